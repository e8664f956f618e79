//! Room on the spool: what one owner may keep there, and what the schedd
//! keeps free for itself, so that one user filling the disk locks nobody
//! out.
//!
//! - **Per owner**: everything a user can make the schedd keep in its spool
//!   (uploads, a spooled job's outputs, checkpoints) counts against one quota
//!   (SPOOL_QUOTA_PER_OWNER, bytes). Uploads are counted by the queue's own
//!   records; outputs and checkpoints by [`SpoolLedger`], which weighs an
//!   owner's spool directories once and then follows what is kept.
//! - **Headroom**: growth (an upload, an output kept, a checkpoint) is taken
//!   only while the file system keeps SPOOL_RESERVE bytes free besides
//!   ([`free_bytes`]); and a reserve file of that size is kept beside the
//!   queue ([`Reserve`]). A commit that fails for want of space gives the
//!   reserve back and is tried again, so removals, holds and the ends of
//!   running jobs commit even on a disk something else filled.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::job::JobId;

/// The start of the message of a commit that failed for want of space.
pub const DISK_FULL: &str = "the spool's file system is full";

/// Bytes free to this account on the file system holding `path`, if known.
pub fn free_bytes(path: &Path) -> Option<u64> {
    statvfs(path).map(|(free, _)| free)
}

/// The SPOOL_RESERVE a spool at `path` gets when none is configured: 64 MiB,
/// or a sixteenth of its file system when that is smaller.
pub fn default_reserve(path: &Path) -> u64 {
    const MAX: u64 = 64 << 20;
    match statvfs(path) {
        Some((_, total)) => MAX.min(total / 16),
        None => MAX,
    }
}

/// (bytes free to this account, bytes in all) of the file system holding `path`.
fn statvfs(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
        // SAFETY: `c` is a NUL-terminated path that outlives the call, and
        // `st` is a buffer of the size statvfs writes.
        let r = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
        if r != 0 {
            return None;
        }
        // SAFETY: statvfs returned 0, so it filled `st`.
        let st = unsafe { st.assume_init() };
        #[allow(clippy::unnecessary_cast)]
        let (avail, blocks, size) = (st.f_bavail as u64, st.f_blocks as u64, st.f_frsize as u64);
        Some((avail.saturating_mul(size), blocks.saturating_mul(size)))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// A file of zeros kept beside the queue, given back when a commit finds
/// the disk full.
pub struct Reserve {
    path: PathBuf,
    bytes: u64,
}

impl Reserve {
    /// The reserve of `bytes` at `path` (made now if missing and the disk has
    /// room for it twice over).
    pub fn new(path: PathBuf, bytes: u64) -> Reserve {
        let r = Reserve { path, bytes };
        r.restore();
        r
    }

    /// The reserve's size.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Gives the reserve back to the file system; true if there was one.
    pub fn release(&self) -> bool {
        let released = std::fs::remove_file(&self.path).is_ok();
        if released {
            tracing::error!(
                "{DISK_FULL}: the {} bytes kept in reserve are given back so that removals, \
                 holds and job ends commit; free space on the spool",
                self.bytes
            );
        }
        released
    }

    /// Makes the reserve again if it is missing and there is room (twice
    /// its size free): real zeros, not a sparse file, so the space is held.
    pub fn restore(&self) {
        if self.bytes == 0 || self.path.exists() {
            return;
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        if free_bytes(dir).is_some_and(|f| f < 2 * self.bytes) {
            return;
        }
        let made = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(&self.path)?;
            let zeros = vec![0u8; 1 << 20];
            let mut left = self.bytes;
            while left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                f.write_all(&zeros[..n])?;
                left -= n as u64;
            }
            f.sync_all()
        })();
        if let Err(e) = made {
            let _ = std::fs::remove_file(&self.path);
            tracing::warn!(
                "cannot keep a reserve of {} bytes at {}: {e}",
                self.bytes,
                self.path.display()
            );
        }
    }
}

/// What each owner keeps in the spool besides uploads: spooled outputs and
/// checkpoints, weighed once per owner and then followed.
pub struct SpoolLedger {
    spool: PathBuf,
    held: Mutex<HashMap<String, u64>>,
}

impl SpoolLedger {
    /// The ledger of the spool at `spool`.
    pub fn new(spool: PathBuf) -> Arc<SpoolLedger> {
        Arc::new(SpoolLedger { spool, held: Mutex::new(HashMap::new()) })
    }

    /// Bytes `owner` keeps in spooled outputs and checkpoints, their `jobs`
    /// in the queue: weighed now if not known.
    pub fn usage(&self, owner: &str, jobs: impl FnOnce() -> Vec<JobId>) -> u64 {
        if let Some(n) = self.lock().get(owner) {
            return *n;
        }
        let n: u64 = jobs().into_iter().map(|id| self.job_bytes(id)).sum();
        self.lock().insert(owner.to_string(), n);
        n
    }

    /// `owner` now keeps `bytes` more.
    pub fn add(&self, owner: &str, bytes: u64) {
        if let Some(n) = self.lock().get_mut(owner) {
            *n = n.saturating_add(bytes);
        }
    }

    /// Forgets what is known (files were removed): weighed again when asked.
    pub fn forget(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What job `id` keeps: its spooled outputs and its checkpoints.
    fn job_bytes(&self, id: JobId) -> u64 {
        let name = id.to_string();
        let mut total = dir_bytes(&self.spool.join("spooled").join(&name));
        let ckpt = self.spool.join("checkpoints");
        for suffix in ["", ".snapshot", ".blobs", ".state"] {
            let p = ckpt.join(format!("{name}{suffix}"));
            total = total.saturating_add(match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => dir_bytes(&p),
                Ok(m) if m.is_file() => m.len(),
                _ => 0,
            });
        }
        total
    }
}

/// The bytes of the regular files beneath `dir` (no link followed), at most
/// 100,000 entries.
fn dir_bytes(dir: &Path) -> u64 {
    match andes_beneath::Beneath::open(dir) {
        Ok(b) => b.usage(100_000).unwrap_or(0),
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_made_given_back_and_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".reserve");
        let r = Reserve::new(path.clone(), 1 << 20);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
        assert!(r.release());
        assert!(!path.exists());
        assert!(!r.release());
        r.restore();
        assert!(path.exists());
        assert!(free_bytes(dir.path()).is_some());
    }

    #[test]
    fn the_ledger_weighs_once_and_follows() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("spooled/3.0");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("a"), vec![1u8; 1000]).unwrap();
        std::fs::create_dir_all(dir.path().join("checkpoints")).unwrap();
        std::fs::write(dir.path().join("checkpoints/3.0.state"), vec![1u8; 24]).unwrap();
        let l = SpoolLedger::new(dir.path().to_path_buf());
        assert_eq!(l.usage("bob", || vec![JobId::new(3, 0)]), 1024);
        l.add("bob", 76);
        assert_eq!(l.usage("bob", || panic!("weighed again")), 1100);
        l.forget();
        assert_eq!(l.usage("bob", || vec![JobId::new(3, 0)]), 1024);
    }
}
