//! The sandbox's files, content-addressed: a checkpoint directory keeps one
//! copy of each distinct content, so repeated checkpoints share unchanged
//! bytes.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use crate::{FileEntry, SnapshotError};

/// Writes `bytes` to `path` atomically (a temporary file, then a rename);
/// with `durable`, the file and its directory are synced first.
pub fn write_file(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("snapshot");
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    if durable {
        f.sync_all()?;
    }
    drop(f);
    fs::rename(&tmp, path)?;
    if durable && let Ok(d) = fs::File::open(dir) {
        d.sync_all()?;
    }
    Ok(())
}

/// A directory of file contents named by their BLAKE3.
#[derive(Clone, Debug)]
pub struct BlobStore {
    dir: PathBuf,
    durable: bool,
}

fn file_err(path: &str, e: impl std::fmt::Display) -> SnapshotError {
    SnapshotError::File { path: path.to_string(), message: e.to_string() }
}

impl BlobStore {
    /// Opens (creating) the store at `dir`; with `durable`, blobs are synced.
    pub fn open(dir: &Path, durable: bool) -> io::Result<BlobStore> {
        fs::create_dir_all(dir)?;
        Ok(BlobStore { dir: dir.to_path_buf(), durable })
    }

    /// Where the blob of `hash` lives.
    pub fn path(&self, hash: &str) -> PathBuf {
        self.dir.join(hash)
    }

    /// True when the store holds `hash`.
    pub fn contains(&self, hash: &str) -> bool {
        self.path(hash).is_file()
    }

    /// Stores the content of `src` unless the store already has it; returns
    /// its hash and size.
    pub fn put_file(&self, src: &Path) -> io::Result<(String, u64)> {
        let mut f = fs::File::open(src)?;
        let mut h = blake3::Hasher::new();
        let mut buf = vec![0u8; 256 * 1024];
        let mut size = 0u64;
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            size += n as u64;
        }
        let hash = h.finalize().to_hex().to_string();
        if !self.contains(&hash) {
            let tmp = self.dir.join(format!(".{hash}.tmp{}", std::process::id()));
            fs::copy(src, &tmp)?;
            if self.durable {
                fs::File::open(&tmp)?.sync_all()?;
            }
            fs::rename(&tmp, self.path(&hash))?;
        }
        Ok((hash, size))
    }

    /// Stores `data` unless the store already has it; returns its hash.
    pub fn put(&self, data: &[u8]) -> io::Result<String> {
        let hash = blob_hash(data);
        if !self.contains(&hash) {
            let tmp = self.dir.join(format!(".{hash}.tmp{}", std::process::id()));
            let mut f = fs::File::create(&tmp)?;
            f.write_all(data)?;
            if self.durable {
                f.sync_all()?;
            }
            drop(f);
            fs::rename(&tmp, self.path(&hash))?;
        }
        Ok(hash)
    }

    /// The content named `hash`, checked against it: an error if the store
    /// lacks it, or holds other bytes under that name.
    pub fn read(&self, hash: &str) -> io::Result<Vec<u8>> {
        if !is_hash(hash) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{hash:?} is not a BLAKE3 content hash"),
            ));
        }
        let bytes = fs::read(self.path(hash))?;
        if blake3::hash(&bytes).to_hex().as_str() != hash {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the stored content {hash} does not match its hash"),
            ));
        }
        Ok(bytes)
    }

    /// Removes every blob whose hash is not in `keep` (and any leftover
    /// temporary file).
    pub fn retain(&self, keep: &std::collections::HashSet<&str>) -> io::Result<()> {
        for e in fs::read_dir(&self.dir)? {
            let e = e?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if !keep.contains(name.as_ref()) {
                fs::remove_file(e.path())?;
            }
        }
        Ok(())
    }

    /// Writes the file of `entry` under `root`, checking its content.
    pub fn restore(&self, entry: &FileEntry, root: &Path) -> Result<(), SnapshotError> {
        let rel = safe_relative(&entry.path)?;
        let src = self.path(&entry.blake3);
        if !is_hash(&entry.blake3) {
            return Err(file_err(&entry.path, "its content hash is malformed"));
        }
        let bytes = fs::read(&src).map_err(|e| {
            file_err(&entry.path, format!("its content {} is missing: {e}", src.display()))
        })?;
        if blake3::hash(&bytes).to_hex().as_str() != entry.blake3
            || bytes.len() as u64 != entry.size
        {
            return Err(file_err(&entry.path, "its stored content does not match its hash"));
        }
        let dest = root.join(rel);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).map_err(|e| file_err(&entry.path, e))?;
        }
        write_file(&dest, &bytes, self.durable).map_err(|e| file_err(&entry.path, e))
    }
}

/// The name a content has in a [`BlobStore`]: its BLAKE3, lowercase hex.
pub fn blob_hash(data: &[u8]) -> String {
    blake3::hash(data).to_hex().to_string()
}

/// True when `s` has the form of a BLAKE3 hash in lowercase hex (so it is
/// safe as a file name).
pub fn is_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Checks that a sandbox path is relative and stays inside the sandbox.
pub fn safe_relative(path: &str) -> Result<PathBuf, SnapshotError> {
    let p = Path::new(path);
    if path.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(file_err(path, "the path leaves the sandbox or is not relative"));
    }
    Ok(p.to_path_buf())
}

/// Remembers the hash of files by (size, modification time), so a file that
/// did not change since the last checkpoint is not read again.
#[derive(Debug, Default)]
pub struct HashCache {
    known: HashMap<PathBuf, (u64, SystemTime, String)>,
}

/// A regular file found under a sandbox: its relative path, that path as
/// the snapshot names it (`/`-separated), and its metadata.
struct Found {
    rel: PathBuf,
    shown: String,
    meta: fs::Metadata,
}

/// Every regular file under `sandbox`; symbolic links are neither followed
/// nor listed.
fn walk(sandbox: &Path) -> Result<Vec<Found>, SnapshotError> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = sandbox.join(&rel);
        let rd = fs::read_dir(&dir).map_err(|e| file_err(&rel.to_string_lossy(), e))?;
        let mut names: Vec<_> = rd.filter_map(|e| e.ok()).collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let r = rel.join(e.file_name());
            let Ok(meta) = fs::symlink_metadata(e.path()) else { continue };
            if meta.is_dir() {
                stack.push(r);
            } else if meta.is_file() {
                let shown = r.to_string_lossy().replace('\\', "/");
                out.push(Found { rel: r, shown, meta });
            }
        }
    }
    Ok(out)
}

/// Lists every regular file under `sandbox` (symbolic links are neither
/// followed nor listed), as `/`-separated relative paths.
pub fn list_files(sandbox: &Path) -> Result<Vec<String>, SnapshotError> {
    Ok(walk(sandbox)?.into_iter().map(|f| f.shown).collect())
}

/// Lists every regular file under `sandbox` (symbolic links are not
/// followed and not kept) and stores the content of each in `store`.
pub fn scan_sandbox(
    sandbox: &Path,
    store: &BlobStore,
    cache: &mut HashCache,
) -> Result<Vec<FileEntry>, SnapshotError> {
    let mut out = Vec::new();
    for Found { rel, shown, meta } in walk(sandbox)? {
        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let cached = cache
            .known
            .get(&rel)
            .filter(|(s, m, h)| *s == meta.len() && *m == mtime && store.contains(h))
            .map(|(_, _, h)| h.clone());
        let (hash, size) = match cached {
            Some(h) => (h, meta.len()),
            None => {
                let (h, s) =
                    store.put_file(&sandbox.join(&rel)).map_err(|err| file_err(&shown, err))?;
                cache.known.insert(rel, (s, mtime, h.clone()));
                (h, s)
            }
        };
        out.push(FileEntry { path: shown, size, blake3: hash });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
