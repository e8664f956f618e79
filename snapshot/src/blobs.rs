//! The sandbox's files, content-addressed: a checkpoint directory keeps one
//! copy of each distinct content, so repeated checkpoints share unchanged
//! bytes.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use andes_beneath::{Beneath, Entry, Kind};

use crate::{FileEntry, SnapshotError};

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
    /// Opens (creating) the store at `dir`. A `durable` store writes each
    /// blob as [`andes_beneath::replace_file`] does (synced, renamed into
    /// place, the directory synced); a scratch store (a run's files on the
    /// execute host, gone with the run) skips the syncs, still renaming into
    /// place so that no blob is ever seen half written.
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

    /// True when the store holds `hash`, which is then marked as just
    /// stored (its modification time set to now): a content a new snapshot
    /// names again is as young as one it wrote, for
    /// [`BlobStore::retain_older_than`].
    /// Marking it is best effort: a content this process may not write is
    /// still there.
    pub fn reuse(&self, hash: &str) -> bool {
        let path = self.path(hash);
        let marked = fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(SystemTime::now()));
        marked.is_ok() || path.is_file()
    }

    /// Stores what `src` reads unless the store already has it; returns its
    /// hash and size. The content is read once: hashed as it is copied to a
    /// temporary file, which becomes the blob.
    pub fn put_reader(&self, src: &mut dyn Read) -> io::Result<(String, u64)> {
        let mut out = tempfile::Builder::new().prefix(".put-").tempfile_in(&self.dir)?;
        let mut h = blake3::Hasher::new();
        let mut buf = vec![0u8; 256 * 1024];
        let mut size = 0u64;
        loop {
            let n = src.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            out.write_all(&buf[..n])?;
            size += n as u64;
        }
        let hash = h.finalize().to_hex().to_string();
        // A blob already stored: the temporary file goes when dropped.
        if !self.reuse(&hash) {
            self.persist(out, &hash)?;
        }
        Ok((hash, size))
    }

    /// Makes the written temporary file `out` the blob `hash`: synced first
    /// and the directory after in a durable store, renamed into place in
    /// any, so that no blob is ever seen half written.
    fn persist(&self, out: tempfile::NamedTempFile, hash: &str) -> io::Result<()> {
        if self.durable {
            out.as_file().sync_all()?;
        }
        out.persist(self.path(hash)).map_err(|e| e.error)?;
        if self.durable {
            andes_beneath::sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Stores the content of the file `src` (a path the caller trusts)
    /// unless the store already has it; returns its hash and size.
    pub fn put_file(&self, src: &Path) -> io::Result<(String, u64)> {
        self.put_reader(&mut fs::File::open(src)?)
    }

    /// Stores `data` unless the store already has it; returns its hash.
    pub fn put(&self, data: &[u8]) -> io::Result<String> {
        let hash = blob_hash(data);
        self.put_named(&hash, data)?;
        Ok(hash)
    }

    /// Stores `data`, whose BLAKE3 the caller computed as `hash`, unless the
    /// store already has it. (A wrong name is caught when it is read.)
    pub fn put_named(&self, hash: &str, data: &[u8]) -> io::Result<()> {
        if !is_hash(hash) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{hash:?} is not a BLAKE3 content hash"),
            ));
        }
        if self.reuse(hash) {
            return Ok(());
        }
        let mut out = tempfile::Builder::new().prefix(".put-").tempfile_in(&self.dir)?;
        out.write_all(data)?;
        self.persist(out, hash)
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
        check_content(hash, &bytes)?;
        Ok(bytes)
    }

    /// Removes every blob whose hash is not in `keep` (and any leftover
    /// temporary file).
    pub fn retain(&self, keep: &std::collections::HashSet<&str>) -> io::Result<()> {
        self.retain_older_than(keep, None)
    }

    /// [`BlobStore::retain`], sparing whatever was stored or reused at or
    /// after `before`: the contents of a snapshot being taken while older
    /// ones are pruned, which no kept snapshot names yet.
    pub fn retain_older_than(
        &self,
        keep: &std::collections::HashSet<&str>,
        before: Option<SystemTime>,
    ) -> io::Result<()> {
        for e in fs::read_dir(&self.dir)? {
            let e = e?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if keep.contains(name.as_ref()) {
                continue;
            }
            if let Some(before) = before
                && e.metadata().and_then(|m| m.modified()).is_ok_and(|m| m >= before)
            {
                continue;
            }
            fs::remove_file(e.path())?;
        }
        Ok(())
    }

    /// Writes the file of `entry` under `root`, checking its content. Nothing
    /// is followed on the way: a link where a directory or the file should
    /// be is refused, never written through.
    pub fn restore(&self, entry: &FileEntry, root: &Path) -> Result<(), SnapshotError> {
        let b = Beneath::open(root).map_err(|e| file_err(&entry.path, e))?;
        self.restore_beneath(entry, &b)
    }

    /// [`BlobStore::restore`] into an opened root.
    pub fn restore_beneath(&self, entry: &FileEntry, root: &Beneath) -> Result<(), SnapshotError> {
        safe_relative(&entry.path)?;
        let src = self.path(&entry.blake3);
        if !is_hash(&entry.blake3) {
            return Err(file_err(&entry.path, "its content hash is malformed"));
        }
        let bytes = fs::read(&src).map_err(|e| {
            file_err(&entry.path, format!("its content {} is missing: {e}", src.display()))
        })?;
        if bytes.len() as u64 != entry.size || check_content(&entry.blake3, &bytes).is_err() {
            return Err(file_err(&entry.path, "its stored content does not match its hash"));
        }
        root.write_atomic(&entry.path, &bytes, self.durable).map_err(|e| file_err(&entry.path, e))
    }
}

/// The name a content has in a [`BlobStore`]: its BLAKE3, lowercase hex.
pub fn blob_hash(data: &[u8]) -> String {
    crate::content_hash(data).to_hex().to_string()
}

/// Checks that `bytes` are the content named `hash`: the one check every
/// read from a store (a blob, a memory pack, a restored file) goes through.
pub(crate) fn check_content(hash: &str, bytes: &[u8]) -> io::Result<()> {
    if blob_hash(bytes) != hash {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the stored content {hash} does not match its hash"),
        ));
    }
    Ok(())
}

/// True when `s` has the form of a BLAKE3 hash in lowercase hex (so it is
/// safe as a file name).
pub fn is_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Checks that a sandbox path is relative and stays inside the sandbox:
/// `/`-separated plain components (see [`andes_beneath::components`]).
pub fn safe_relative(path: &str) -> Result<PathBuf, SnapshotError> {
    let p = Path::new(path);
    if andes_beneath::components(path).is_err()
        || !p.components().all(|c| matches!(c, Component::Normal(_)))
    {
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

/// Most files and directories a sandbox's walk looks at.
pub const MAX_SANDBOX_ENTRIES: usize = 1 << 20;

/// Every entry under `sandbox`, without following a link.
fn walk(sandbox: &Path) -> Result<(Beneath, Vec<Entry>), SnapshotError> {
    let b = Beneath::open(sandbox).map_err(|e| file_err(".", e))?;
    let all = b.walk("", MAX_SANDBOX_ENTRIES).map_err(|e| file_err(".", e))?;
    Ok((b, all))
}

/// Lists every regular file under `sandbox` (symbolic links are neither
/// followed nor listed), as `/`-separated relative paths.
pub fn list_files(sandbox: &Path) -> Result<Vec<String>, SnapshotError> {
    Ok(walk(sandbox)?.1.into_iter().filter(|e| e.kind == Kind::File).map(|e| e.path).collect())
}

/// Makes the sandbox hold what a snapshot's `files` say, and nothing else
/// but directories: every other file, link and special file is removed (a
/// link itself, never what it points to), then each file is written back,
/// following no link on the way.
pub fn restore_files(
    sandbox: &Path,
    files: &[FileEntry],
    store: &BlobStore,
) -> Result<(), SnapshotError> {
    let (b, all) = walk(sandbox)?;
    let keep: std::collections::HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    for e in all {
        if e.kind != Kind::Dir && !(e.kind == Kind::File && keep.contains(e.path.as_str())) {
            b.remove_file(&e.path).map_err(|err| {
                file_err(&e.path, format!("removing it, which the snapshot does not have: {err}"))
            })?;
        }
    }
    for f in files {
        store.restore_beneath(f, &b)?;
    }
    Ok(())
}

/// Lists every regular file under `sandbox` (symbolic links are not
/// followed and not kept) and stores the content of each in `store`.
pub fn scan_sandbox(
    sandbox: &Path,
    store: &BlobStore,
    cache: &mut HashCache,
) -> Result<Vec<FileEntry>, SnapshotError> {
    let mut out = Vec::new();
    let (b, all) = walk(sandbox)?;
    for e in all.into_iter().filter(|e| e.kind == Kind::File) {
        let rel = PathBuf::from(&e.path);
        let mtime = e.modified.unwrap_or(SystemTime::UNIX_EPOCH);
        let cached = cache
            .known
            .get(&rel)
            .filter(|(s, m, h)| *s == e.len && *m == mtime && store.reuse(h))
            .map(|(_, _, h)| h.clone());
        let (hash, size) = match cached {
            Some(h) => (h, e.len),
            None => {
                // Opened beneath the sandbox, never through a link: a
                // snapshot holds only the sandbox's own files.
                let (mut f, _) = b.open_file(&e.path).map_err(|err| file_err(&e.path, err))?;
                let (h, s) = store.put_reader(&mut f).map_err(|err| file_err(&e.path, err))?;
                cache.known.insert(rel, (s, mtime, h.clone()));
                (h, s)
            }
        };
        out.push(FileEntry { path: e.path, size, blake3: hash });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
