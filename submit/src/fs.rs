//! File access for submit expansion, behind a trait so that tests can serve
//! a directory written as `/iwd` in the ads from anywhere.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Read access to the files a submit description refers to. Paths are
/// absolute, spelled as in the job ad (initial directory joined in).
pub trait FileSystem {
    /// Reads at most `limit` bytes of the file at `path`; a longer file is
    /// an error of kind [`io::ErrorKind::FileTooLarge`].
    fn read(&self, path: &str, limit: u64) -> io::Result<Vec<u8>>;
    /// The size in bytes of a regular file, or `None` if `path` is not one.
    fn file_size(&self, path: &str) -> Option<u64>;
    /// The names in directory `path` with whether each is a directory, or
    /// `None` if `path` is not a directory.
    fn read_dir(&self, path: &str) -> Option<Vec<(String, bool)>>;
}

fn read_limited(r: impl Read, limit: u64) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    r.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(buf)
}

fn real_read_dir(p: &Path) -> Option<Vec<(String, bool)>> {
    let rd = std::fs::read_dir(p).ok()?;
    let mut out = Vec::new();
    for e in rd.flatten() {
        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
        out.push((e.file_name().to_string_lossy().into_owned(), is_dir));
    }
    out.sort();
    Some(out)
}

/// The local file system, paths taken as they are.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

impl FileSystem for RealFs {
    fn read(&self, path: &str, limit: u64) -> io::Result<Vec<u8>> {
        read_limited(std::fs::File::open(path)?, limit)
    }
    fn file_size(&self, path: &str) -> Option<u64> {
        std::fs::metadata(path).ok().filter(|m| m.is_file()).map(|m| m.len())
    }
    fn read_dir(&self, path: &str) -> Option<Vec<(String, bool)>> {
        real_read_dir(Path::new(path))
    }
}

/// The local file system with one path prefix mapped onto a real directory:
/// `MappedFs::new("/iwd", "tests/data/submit_iwd")` reads `/iwd/a.txt` from
/// `tests/data/submit_iwd/a.txt`. Paths outside the prefix are refused.
#[derive(Clone, Debug)]
pub struct MappedFs {
    prefix: String,
    root: PathBuf,
}

impl MappedFs {
    /// Maps `prefix` (as written in the ads) onto the directory `root`.
    pub fn new(prefix: impl Into<String>, root: impl Into<PathBuf>) -> Self {
        let mut prefix = prefix.into();
        while prefix.len() > 1 && prefix.ends_with('/') {
            prefix.pop();
        }
        MappedFs { prefix, root: root.into() }
    }

    fn map(&self, path: &str) -> Option<PathBuf> {
        let rest = path.strip_prefix(&self.prefix)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let rest = rest.trim_start_matches('/');
        if rest.split('/').any(|c| c == "..") {
            return None;
        }
        Some(if rest.is_empty() { self.root.clone() } else { self.root.join(rest) })
    }
}

impl FileSystem for MappedFs {
    fn read(&self, path: &str, limit: u64) -> io::Result<Vec<u8>> {
        let p = self.map(path).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("outside {}", self.prefix))
        })?;
        read_limited(std::fs::File::open(p)?, limit)
    }
    fn file_size(&self, path: &str) -> Option<u64> {
        std::fs::metadata(self.map(path)?).ok().filter(|m| m.is_file()).map(|m| m.len())
    }
    fn read_dir(&self, path: &str) -> Option<Vec<(String, bool)>> {
        real_read_dir(&self.map(path)?)
    }
}

/// Files held in memory, keyed by absolute path; directories are implied by
/// the files' paths. Useful for tests and for fuzzing.
#[derive(Clone, Debug, Default)]
pub struct MemFs {
    files: BTreeMap<String, Vec<u8>>,
}

impl MemFs {
    /// An empty file system.
    pub fn new() -> Self {
        MemFs::default()
    }

    /// Adds (or replaces) the file at absolute `path`.
    pub fn add(&mut self, path: impl Into<String>, bytes: Vec<u8>) {
        self.files.insert(path.into(), bytes);
    }
}

impl FileSystem for MemFs {
    fn read(&self, path: &str, limit: u64) -> io::Result<Vec<u8>> {
        let b = self
            .files
            .get(path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))?;
        if b.len() as u64 > limit {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!("larger than {limit} bytes"),
            ));
        }
        Ok(b.clone())
    }
    fn file_size(&self, path: &str) -> Option<u64> {
        self.files.get(path).map(|b| b.len() as u64)
    }
    fn read_dir(&self, path: &str) -> Option<Vec<(String, bool)>> {
        let dir = format!("{}/", path.trim_end_matches('/'));
        let mut out: Vec<(String, bool)> = Vec::new();
        for k in self.files.keys() {
            if let Some(rest) = k.strip_prefix(&dir) {
                let (name, is_dir) = match rest.split_once('/') {
                    Some((d, _)) => (d, true),
                    None => (rest, false),
                };
                if !name.is_empty() && !out.iter().any(|(n, _)| n == name) {
                    out.push((name.to_string(), is_dir));
                }
            }
        }
        if out.is_empty() { None } else { Some(out) }
    }
}
