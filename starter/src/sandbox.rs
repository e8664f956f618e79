//! The job's sandbox directory, as the guest sees it: wasi-common's cap-std
//! directory, wrapped so that the bytes the sandbox holds, the size of each
//! output stream and the number of open files are capped. Limits are
//! enforced here, in the host, never trusted to the guest.

use std::any::Any;
use std::collections::HashMap;
use std::io::{IoSlice, IoSliceMut, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use wasi_common::dir::{OpenResult, ReaddirCursor, ReaddirEntity};
use wasi_common::file::{Advice, FdFlags, FileType, Filestat, OFlags};
use wasi_common::snapshots::preview_1::error::Errno;
use wasi_common::{Error, SystemTimeSpec, WasiDir, WasiFile};

/// Which limit a guest ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceeded {
    /// The sandbox's byte quota (`RequestDisk`).
    Disk,
    /// An output stream's cap.
    Output,
    /// The most files and directories the sandbox may hold.
    Entries,
}

/// The shared accounting of one job's sandbox.
///
/// Bytes are counted per file (by device and inode), not per name: a file
/// the job unlinks or renames over while it still holds it open keeps its
/// bytes counted until its last handle closes, as the disk keeps them.
#[derive(Debug)]
pub struct Quota {
    /// Bytes held now.
    pub used: AtomicU64,
    /// Most bytes the sandbox may hold.
    pub limit: u64,
    /// Most files and directories open at once.
    pub max_open: u32,
    open: AtomicU32,
    /// Most files, directories and links the sandbox may hold.
    pub max_entries: u64,
    entries: AtomicU64,
    /// Set when a write was refused for the disk quota.
    pub disk_exceeded: AtomicBool,
    /// Set when a write was refused for an output cap.
    pub output_exceeded: AtomicBool,
    /// Set when a new file or directory was refused for the entry limit.
    pub entries_exceeded: AtomicBool,
    /// The job to stop when a limit is exceeded.
    ctl: std::sync::OnceLock<Arc<crate::control::Control>>,
    /// Every file and directory the guest holds open through the sandbox,
    /// by (device, inode). A transparent checkpoint finds each descriptor's
    /// path here.
    handles: std::sync::Mutex<HashMap<(u64, u64), Handle>>,
}

/// One open file or directory of the sandbox.
#[derive(Debug)]
struct Handle {
    /// Its path in the sandbox when opened (or renamed through the sandbox).
    path: String,
    /// Handles sharing it.
    count: usize,
    /// Its size as last counted.
    size: u64,
    /// Its last name was removed while open: its bytes are released when
    /// the last handle closes.
    orphan: bool,
}

/// Files, directories and links a sandbox may hold by default.
pub const DEFAULT_MAX_ENTRIES: u64 = 16_384;

impl Quota {
    /// A quota of `limit` bytes with `used` bytes already held.
    pub fn new(limit: u64, used: u64, max_open: u32) -> Arc<Quota> {
        Quota::with_entries(limit, used, max_open, DEFAULT_MAX_ENTRIES, 0)
    }

    /// A quota of `limit` bytes and `max_entries` files, directories and
    /// links, with `used` bytes and `entries` entries already held.
    pub fn with_entries(
        limit: u64,
        used: u64,
        max_open: u32,
        max_entries: u64,
        entries: u64,
    ) -> Arc<Quota> {
        Arc::new(Quota {
            used: AtomicU64::new(used),
            limit,
            max_open,
            open: AtomicU32::new(0),
            max_entries,
            entries: AtomicU64::new(entries),
            disk_exceeded: AtomicBool::new(false),
            output_exceeded: AtomicBool::new(false),
            entries_exceeded: AtomicBool::new(false),
            ctl: std::sync::OnceLock::new(),
            handles: Default::default(),
        })
    }

    fn handles(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, u64), Handle>> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&self, id: (u64, u64), path: String, size: u64) {
        let mut h = self.handles();
        let e =
            h.entry(id).or_insert(Handle { path: String::new(), count: 0, size, orphan: false });
        e.path = path;
        e.count += 1;
    }

    fn unregister(&self, id: (u64, u64)) {
        let mut h = self.handles();
        if let Some(e) = h.get_mut(&id) {
            e.count -= 1;
            if e.count == 0 {
                let gone = h.remove(&id);
                drop(h);
                if let Some(Handle { orphan: true, size, .. }) = gone {
                    self.shrink(size);
                }
            }
        }
    }

    /// Records an open file's new size; returns its old one.
    fn resize(&self, id: (u64, u64), size: u64) -> Option<u64> {
        self.handles().get_mut(&id).map(|e| std::mem::replace(&mut e.size, size))
    }

    /// An open file's size as last counted.
    fn size_of(&self, id: (u64, u64)) -> Option<u64> {
        self.handles().get(&id).map(|e| e.size)
    }

    /// A file lost its last name (unlinked, or renamed over): its bytes are
    /// released now if no handle holds it, else when the last one closes.
    fn released(&self, st: &Filestat) {
        if st.filetype != FileType::RegularFile || st.nlink > 1 {
            return;
        }
        let mut h = self.handles();
        match h.get_mut(&file_id(st)) {
            Some(e) => e.orphan = true,
            None => {
                drop(h);
                self.shrink(st.size);
            }
        }
    }

    /// Takes one more entry, or refuses (and stops the job) at the limit.
    fn take_entry(&self) -> Result<(), Error> {
        if self.entries.fetch_add(1, Ordering::SeqCst) >= self.max_entries {
            self.entries.fetch_sub(1, Ordering::SeqCst);
            self.entries_exceeded.store(true, Ordering::SeqCst);
            self.stop_job();
            return Err(Errno::Dquot.into());
        }
        Ok(())
    }

    /// Gives an entry back.
    fn drop_entry(&self) {
        let _ = self
            .entries
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| Some(n.saturating_sub(1)));
    }

    /// Files, directories and links the sandbox holds, as counted.
    pub fn entries(&self) -> u64 {
        self.entries.load(Ordering::SeqCst)
    }

    /// Files and directories the guest holds open.
    pub fn open_count(&self) -> u32 {
        self.open.load(Ordering::SeqCst)
    }

    /// The sandbox path of an open file or directory, by (device, inode).
    pub fn handle_path(&self, id: (u64, u64)) -> Option<String> {
        self.handles().get(&id).map(|e| e.path.clone())
    }

    /// How many handles the guest holds open through the sandbox.
    pub fn open_handles(&self) -> usize {
        self.handles().values().map(|e| e.count).sum()
    }

    /// Stops this job when a limit is exceeded.
    pub fn set_control(&self, ctl: Arc<crate::control::Control>) {
        let _ = self.ctl.set(ctl);
    }

    fn stop_job(&self) {
        if let Some(c) = self.ctl.get() {
            c.hard_kill();
        }
    }

    /// The first limit exceeded, if any.
    pub fn exceeded(&self) -> Option<Exceeded> {
        if self.disk_exceeded.load(Ordering::SeqCst) {
            Some(Exceeded::Disk)
        } else if self.output_exceeded.load(Ordering::SeqCst) {
            Some(Exceeded::Output)
        } else if self.entries_exceeded.load(Ordering::SeqCst) {
            Some(Exceeded::Entries)
        } else {
            None
        }
    }

    fn grow(&self, by: u64) {
        let now = self.used.fetch_add(by, Ordering::Relaxed) + by;
        if let Some(c) = self.ctl.get() {
            c.disk_bytes.store(now, Ordering::Relaxed);
        }
    }

    fn shrink(&self, by: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| Some(u.saturating_sub(by)));
    }

    /// True when `n` more bytes fit.
    fn fits(&self, n: u64) -> bool {
        self.used.load(Ordering::Relaxed).saturating_add(n) <= self.limit
    }
}

/// Bytes held by the regular files under `path` and how many files,
/// directories and links there are (no link followed), counting at most
/// `max_entries` entries.
pub fn sandbox_usage(path: &std::path::Path, max_entries: usize) -> (u64, u64) {
    match andes_beneath::Beneath::open(path)
        .and_then(|b| b.walk("", max_entries).map_err(std::io::Error::other))
    {
        Ok(all) => (all.iter().map(|e| e.len).sum(), all.len() as u64),
        Err(e) => {
            // The sandbox holds only what the host put there (inputs, a
            // snapshot's files), so this is the host's own trouble.
            tracing::warn!("cannot measure the sandbox {}: {e}", path.display());
            (0, 0)
        }
    }
}

/// The sandbox directory with its quota.
pub struct QuotaDir {
    inner: Box<dyn WasiDir>,
    quota: Arc<Quota>,
    /// This directory's path in the sandbox (`""` for the sandbox itself).
    path: String,
    /// Its (device, inode), registered in the quota while it is open.
    id: Option<(u64, u64)>,
    /// A handle the job opened (not the preopened sandbox): counts toward
    /// the open-file limit.
    counted: bool,
}

/// `dir/name` as a plain sandbox path (`""` for the sandbox itself): `.`
/// and empty components dropped, `..` taken back (the capability directory
/// has already refused any that would leave the sandbox).
fn join(dir: &str, name: &str) -> String {
    let mut parts: Vec<&str> = dir.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    for c in name.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts.join("/")
}

fn file_id(st: &Filestat) -> (u64, u64) {
    (st.device_id, st.inode)
}

impl QuotaDir {
    /// Wraps a wasi-common directory: the sandbox itself.
    pub fn new(inner: Box<dyn WasiDir>, quota: Arc<Quota>) -> QuotaDir {
        QuotaDir { inner, quota, path: String::new(), id: None, counted: false }
    }

    fn unwrap_dir(d: &dyn WasiDir) -> &dyn WasiDir {
        match d.as_any().downcast_ref::<QuotaDir>() {
            Some(q) => q.inner.as_ref(),
            None => d,
        }
    }
}

#[wiggle::async_trait]
impl WasiDir for QuotaDir {
    fn as_any(&self) -> &dyn Any {
        self
    }

    async fn open_file(
        &self,
        symlink_follow: bool,
        path: &str,
        oflags: OFlags,
        read: bool,
        write: bool,
        fdflags: FdFlags,
    ) -> Result<OpenResult, Error> {
        let q = &self.quota;
        if q.open.fetch_add(1, Ordering::SeqCst) >= q.max_open {
            q.open.fetch_sub(1, Ordering::SeqCst);
            return Err(Errno::Mfile.into());
        }
        let existing = if oflags.intersects(OFlags::TRUNCATE | OFlags::CREATE) {
            self.inner.get_path_filestat(path, symlink_follow).await.ok()
        } else {
            None
        };
        // A new name is a new entry.
        let creates = oflags.contains(OFlags::CREATE) && existing.is_none();
        if creates && let Err(e) = q.take_entry() {
            q.open.fetch_sub(1, Ordering::SeqCst);
            return Err(e);
        }
        match self.inner.open_file(symlink_follow, path, oflags, read, write, fdflags).await {
            Ok(OpenResult::File(f)) => {
                let st = f.get_filestat().await.ok();
                let size = st.as_ref().map_or(0, |s| s.size);
                let mut file = QuotaFile::new(f, q.clone(), None, size, true);
                if let Some(st) = st {
                    let id = file_id(&st);
                    file.id = Some(id);
                    q.register(id, join(&self.path, path), size);
                    // Truncation releases the bytes the file held.
                    if oflags.contains(OFlags::TRUNCATE)
                        && let Some(before) = existing.filter(|b| file_id(b) == id)
                    {
                        let old = q.resize(id, size).unwrap_or(0).max(before.size);
                        q.shrink(old.saturating_sub(size));
                    }
                }
                Ok(OpenResult::File(Box::new(file)))
            }
            Ok(OpenResult::Dir(d)) => {
                // A directory handle counts toward the open-file limit too.
                let id = d.get_filestat().await.ok().map(|st| file_id(&st));
                let path = join(&self.path, path);
                if let Some(id) = id {
                    q.register(id, path.clone(), 0);
                }
                Ok(OpenResult::Dir(Box::new(QuotaDir {
                    inner: d,
                    quota: q.clone(),
                    path,
                    id,
                    counted: true,
                })))
            }
            Err(e) => {
                q.open.fetch_sub(1, Ordering::SeqCst);
                if creates {
                    q.drop_entry();
                }
                Err(e)
            }
        }
    }

    async fn create_dir(&self, path: &str) -> Result<(), Error> {
        self.quota.take_entry()?;
        let r = self.inner.create_dir(path).await;
        if r.is_err() {
            self.quota.drop_entry();
        }
        r
    }

    async fn readdir(
        &self,
        cursor: ReaddirCursor,
    ) -> Result<Box<dyn Iterator<Item = Result<ReaddirEntity, Error>> + Send>, Error> {
        self.inner.readdir(cursor).await
    }

    async fn symlink(&self, old_path: &str, new_path: &str) -> Result<(), Error> {
        self.quota.take_entry()?;
        let r = self.inner.symlink(old_path, new_path).await;
        if r.is_err() {
            self.quota.drop_entry();
        }
        r
    }

    async fn remove_dir(&self, path: &str) -> Result<(), Error> {
        self.inner.remove_dir(path).await?;
        self.quota.drop_entry();
        Ok(())
    }

    async fn unlink_file(&self, path: &str) -> Result<(), Error> {
        let st = self.inner.get_path_filestat(path, false).await.ok();
        self.inner.unlink_file(path).await?;
        self.quota.drop_entry();
        if let Some(st) = st {
            self.quota.released(&st);
        }
        Ok(())
    }

    async fn read_link(&self, path: &str) -> Result<PathBuf, Error> {
        self.inner.read_link(path).await
    }

    async fn get_filestat(&self) -> Result<Filestat, Error> {
        self.inner.get_filestat().await
    }

    async fn get_path_filestat(&self, path: &str, follow: bool) -> Result<Filestat, Error> {
        self.inner.get_path_filestat(path, follow).await
    }

    async fn rename(&self, path: &str, dest_dir: &dyn WasiDir, dest: &str) -> Result<(), Error> {
        let dest_inner = QuotaDir::unwrap_dir(dest_dir);
        let replaced = dest_inner.get_path_filestat(dest, false).await.ok();
        let moved = self.inner.get_path_filestat(path, false).await.ok();
        self.inner.rename(path, dest_inner, dest).await?;
        if let Some(st) = replaced
            && moved.as_ref().is_none_or(|m| file_id(m) != file_id(&st))
        {
            // The name it replaced is gone, and with it maybe a file's bytes.
            self.quota.drop_entry();
            self.quota.released(&st);
        }
        // An open file keeps its path for a checkpoint's descriptor table.
        if let Some(m) = moved {
            let to = match dest_dir.as_any().downcast_ref::<QuotaDir>() {
                Some(d) => join(&d.path, dest),
                None => dest.to_string(),
            };
            if let Some(h) = self.quota.handles().get_mut(&file_id(&m)) {
                h.path = to;
            }
        }
        Ok(())
    }

    async fn hard_link(&self, path: &str, target: &dyn WasiDir, tpath: &str) -> Result<(), Error> {
        self.quota.take_entry()?;
        let r = self.inner.hard_link(path, QuotaDir::unwrap_dir(target), tpath).await;
        if r.is_err() {
            self.quota.drop_entry();
        }
        r
    }

    async fn set_times(
        &self,
        path: &str,
        atime: Option<SystemTimeSpec>,
        mtime: Option<SystemTimeSpec>,
        follow: bool,
    ) -> Result<(), Error> {
        self.inner.set_times(path, atime, mtime, follow).await
    }
}

/// A file in the sandbox (or an output stream), with its writes counted.
pub struct QuotaFile {
    inner: Box<dyn WasiFile>,
    quota: Arc<Quota>,
    /// For output streams: the most bytes the stream may hold.
    cap: Option<u64>,
    /// The file's size as last seen.
    size: AtomicU64,
    /// Counts toward the open-file limit.
    counted: bool,
    /// Its (device, inode), registered in the quota while it is open.
    id: Option<(u64, u64)>,
}

impl QuotaFile {
    /// Wraps a file of `size` bytes; `cap` caps an output stream.
    pub fn new(
        inner: Box<dyn WasiFile>,
        quota: Arc<Quota>,
        cap: Option<u64>,
        size: u64,
        counted: bool,
    ) -> QuotaFile {
        QuotaFile { inner, quota, cap, size: AtomicU64::new(size), counted, id: None }
    }

    /// The file's size as last counted.
    fn size(&self) -> u64 {
        match self.id.and_then(|id| self.quota.size_of(id)) {
            Some(s) => s,
            None => self.size.load(Ordering::Relaxed),
        }
    }

    fn check(&self, n: u64, offset_end: Option<u64>) -> Result<(), Error> {
        let size = self.size();
        let new_size = match offset_end {
            Some(end) => size.max(end),
            None => size.saturating_add(n),
        };
        if let Some(cap) = self.cap
            && new_size > cap
        {
            self.quota.output_exceeded.store(true, Ordering::SeqCst);
            self.quota.stop_job();
            return Err(Errno::Fbig.into());
        }
        if !self.quota.fits(new_size.saturating_sub(size)) {
            self.quota.disk_exceeded.store(true, Ordering::SeqCst);
            self.quota.stop_job();
            return Err(Errno::Nospc.into());
        }
        Ok(())
    }

    async fn account(&self) {
        if let Ok(st) = self.inner.get_filestat().await {
            let swapped = self.size.swap(st.size, Ordering::Relaxed);
            // A file of the sandbox is counted once, whichever handle writes.
            let old = self.id.and_then(|id| self.quota.resize(id, st.size)).unwrap_or(swapped);
            if st.size > old {
                self.quota.grow(st.size - old);
            } else {
                self.quota.shrink(old - st.size);
            }
        }
    }
}

impl Drop for QuotaFile {
    fn drop(&mut self) {
        if self.counted {
            self.quota.open.fetch_sub(1, Ordering::SeqCst);
        }
        if let Some(id) = self.id {
            self.quota.unregister(id);
        }
    }
}

impl Drop for QuotaDir {
    fn drop(&mut self) {
        // The sandbox itself (the preopen) is not one of the job's handles.
        if self.counted {
            self.quota.open.fetch_sub(1, Ordering::SeqCst);
        }
        if let Some(id) = self.id {
            self.quota.unregister(id);
        }
    }
}

fn total(bufs: &[IoSlice<'_>]) -> u64 {
    bufs.iter().map(|b| b.len() as u64).sum()
}

#[wiggle::async_trait]
impl WasiFile for QuotaFile {
    fn as_any(&self) -> &dyn Any {
        self
    }
    async fn get_filetype(&self) -> Result<FileType, Error> {
        self.inner.get_filetype().await
    }
    #[cfg(unix)]
    fn pollable(&self) -> Option<rustix::fd::BorrowedFd<'_>> {
        self.inner.pollable()
    }
    #[cfg(windows)]
    fn pollable(&self) -> Option<io_extras::os::windows::RawHandleOrSocket> {
        self.inner.pollable()
    }
    fn isatty(&self) -> bool {
        self.inner.isatty()
    }
    async fn datasync(&self) -> Result<(), Error> {
        self.inner.datasync().await
    }
    async fn sync(&self) -> Result<(), Error> {
        self.inner.sync().await
    }
    async fn get_fdflags(&self) -> Result<FdFlags, Error> {
        self.inner.get_fdflags().await
    }
    async fn set_fdflags(&mut self, flags: FdFlags) -> Result<(), Error> {
        self.inner.set_fdflags(flags).await
    }
    async fn get_filestat(&self) -> Result<Filestat, Error> {
        self.inner.get_filestat().await
    }
    async fn set_filestat_size(&self, size: u64) -> Result<(), Error> {
        self.check(0, Some(size))?;
        self.inner.set_filestat_size(size).await?;
        self.account().await;
        Ok(())
    }
    async fn advise(&self, offset: u64, len: u64, advice: Advice) -> Result<(), Error> {
        self.inner.advise(offset, len, advice).await
    }
    async fn set_times(
        &self,
        atime: Option<SystemTimeSpec>,
        mtime: Option<SystemTimeSpec>,
    ) -> Result<(), Error> {
        self.inner.set_times(atime, mtime).await
    }
    // Reads land in the guest's memory: touched first, so the kernel never
    // writes into a chunk still write-protected for the next snapshot.
    async fn read_vectored<'a>(&self, bufs: &mut [IoSliceMut<'a>]) -> Result<u64, Error> {
        crate::dirty::touch(bufs);
        self.inner.read_vectored(bufs).await
    }
    async fn read_vectored_at<'a>(
        &self,
        bufs: &mut [IoSliceMut<'a>],
        offset: u64,
    ) -> Result<u64, Error> {
        crate::dirty::touch(bufs);
        self.inner.read_vectored_at(bufs, offset).await
    }
    async fn write_vectored<'a>(&self, bufs: &[IoSlice<'a>]) -> Result<u64, Error> {
        self.check(total(bufs), None)?;
        let n = self.inner.write_vectored(bufs).await?;
        self.account().await;
        Ok(n)
    }
    async fn write_vectored_at<'a>(&self, bufs: &[IoSlice<'a>], offset: u64) -> Result<u64, Error> {
        self.check(total(bufs), Some(offset.saturating_add(total(bufs))))?;
        let n = self.inner.write_vectored_at(bufs, offset).await?;
        self.account().await;
        Ok(n)
    }
    async fn seek(&self, pos: SeekFrom) -> Result<u64, Error> {
        self.inner.seek(pos).await
    }
    async fn peek(&self, buf: &mut [u8]) -> Result<u64, Error> {
        crate::dirty::touch_bytes(buf);
        self.inner.peek(buf).await
    }
    fn num_ready_bytes(&self) -> Result<u64, Error> {
        self.inner.num_ready_bytes()
    }
    // A regular file is always ready (epoll refuses one, and tokio's files
    // then say ready; wasi-common's in-place files cannot say).
    async fn readable(&self) -> Result<(), Error> {
        if self.inner.get_filetype().await? == FileType::RegularFile {
            return Ok(());
        }
        self.inner.readable().await
    }
    async fn writable(&self) -> Result<(), Error> {
        if self.inner.get_filetype().await? == FileType::RegularFile {
            return Ok(());
        }
        self.inner.writable().await
    }
}
