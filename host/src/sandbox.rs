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
}

/// The shared accounting of one job's sandbox.
#[derive(Debug)]
pub struct Quota {
    /// Bytes held now.
    pub used: AtomicU64,
    /// Most bytes the sandbox may hold.
    pub limit: u64,
    /// Most files open at once.
    pub max_open: u32,
    open: AtomicU32,
    /// Set when a write was refused for the disk quota.
    pub disk_exceeded: AtomicBool,
    /// Set when a write was refused for an output cap.
    pub output_exceeded: AtomicBool,
    /// The job to stop when a limit is exceeded.
    ctl: std::sync::OnceLock<Arc<crate::control::Control>>,
    /// Every file and directory the guest holds open through the sandbox,
    /// by (device, inode): its path and how many handles share it. A
    /// transparent checkpoint finds each descriptor's path here.
    handles: std::sync::Mutex<HashMap<(u64, u64), (String, usize)>>,
}

impl Quota {
    /// A quota of `limit` bytes with `used` bytes already held.
    pub fn new(limit: u64, used: u64, max_open: u32) -> Arc<Quota> {
        Arc::new(Quota {
            used: AtomicU64::new(used),
            limit,
            max_open,
            open: AtomicU32::new(0),
            disk_exceeded: AtomicBool::new(false),
            output_exceeded: AtomicBool::new(false),
            ctl: std::sync::OnceLock::new(),
            handles: Default::default(),
        })
    }

    fn handles(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, u64), (String, usize)>> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&self, id: (u64, u64), path: String) {
        let mut h = self.handles();
        let e = h.entry(id).or_insert((path.clone(), 0));
        e.0 = path;
        e.1 += 1;
    }

    fn unregister(&self, id: (u64, u64)) {
        let mut h = self.handles();
        if let Some(e) = h.get_mut(&id) {
            e.1 -= 1;
            if e.1 == 0 {
                h.remove(&id);
            }
        }
    }

    /// The sandbox path of an open file or directory, by (device, inode).
    pub fn handle_path(&self, id: (u64, u64)) -> Option<String> {
        self.handles().get(&id).map(|e| e.0.clone())
    }

    /// How many handles the guest holds open through the sandbox.
    pub fn open_handles(&self) -> usize {
        self.handles().values().map(|e| e.1).sum()
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

/// Bytes held by the files under `path` (not following symlinks).
pub fn disk_usage(path: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&p) else { continue };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// The sandbox directory with its quota.
pub struct QuotaDir {
    inner: Box<dyn WasiDir>,
    quota: Arc<Quota>,
    /// This directory's path in the sandbox (`""` for the sandbox itself).
    path: String,
    /// Its (device, inode), registered in the quota while it is open.
    id: Option<(u64, u64)>,
}

/// `dir/name`, or `name` in the sandbox's root.
fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

fn file_id(st: &Filestat) -> (u64, u64) {
    (st.device_id, st.inode)
}

impl QuotaDir {
    /// Wraps a wasi-common directory: the sandbox itself.
    pub fn new(inner: Box<dyn WasiDir>, quota: Arc<Quota>) -> QuotaDir {
        QuotaDir { inner, quota, path: String::new(), id: None }
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
        // Truncation releases the bytes the file held.
        let before = if oflags.contains(OFlags::TRUNCATE) {
            self.inner.get_path_filestat(path, symlink_follow).await.map(|s| s.size).unwrap_or(0)
        } else {
            0
        };
        match self.inner.open_file(symlink_follow, path, oflags, read, write, fdflags).await {
            Ok(OpenResult::File(f)) => {
                q.shrink(before);
                let st = f.get_filestat().await.ok();
                let size = st.as_ref().map_or(0, |s| s.size);
                let mut file = QuotaFile::new(f, q.clone(), None, size, true);
                if let Some(st) = st {
                    file.id = Some(file_id(&st));
                    q.register(file_id(&st), join(&self.path, path));
                }
                Ok(OpenResult::File(Box::new(file)))
            }
            Ok(OpenResult::Dir(d)) => {
                q.open.fetch_sub(1, Ordering::SeqCst);
                let id = d.get_filestat().await.ok().map(|st| file_id(&st));
                let path = join(&self.path, path);
                if let Some(id) = id {
                    q.register(id, path.clone());
                }
                Ok(OpenResult::Dir(Box::new(QuotaDir { inner: d, quota: q.clone(), path, id })))
            }
            Err(e) => {
                q.open.fetch_sub(1, Ordering::SeqCst);
                Err(e)
            }
        }
    }

    async fn create_dir(&self, path: &str) -> Result<(), Error> {
        self.inner.create_dir(path).await
    }

    async fn readdir(
        &self,
        cursor: ReaddirCursor,
    ) -> Result<Box<dyn Iterator<Item = Result<ReaddirEntity, Error>> + Send>, Error> {
        self.inner.readdir(cursor).await
    }

    async fn symlink(&self, old_path: &str, new_path: &str) -> Result<(), Error> {
        self.inner.symlink(old_path, new_path).await
    }

    async fn remove_dir(&self, path: &str) -> Result<(), Error> {
        self.inner.remove_dir(path).await
    }

    async fn unlink_file(&self, path: &str) -> Result<(), Error> {
        let st = self.inner.get_path_filestat(path, false).await.ok();
        self.inner.unlink_file(path).await?;
        if let Some(st) = st
            && st.nlink <= 1
            && st.filetype == FileType::RegularFile
        {
            self.quota.shrink(st.size);
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
        // Renaming over an existing file releases its bytes.
        let replaced = QuotaDir::unwrap_dir(dest_dir).get_path_filestat(dest, false).await.ok();
        self.inner.rename(path, QuotaDir::unwrap_dir(dest_dir), dest).await?;
        if let Some(st) = replaced
            && st.filetype == FileType::RegularFile
            && st.nlink <= 1
        {
            self.quota.shrink(st.size);
        }
        Ok(())
    }

    async fn hard_link(&self, path: &str, target: &dyn WasiDir, tpath: &str) -> Result<(), Error> {
        self.inner.hard_link(path, QuotaDir::unwrap_dir(target), tpath).await
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

    fn check(&self, n: u64, offset_end: Option<u64>) -> Result<(), Error> {
        let size = self.size.load(Ordering::Relaxed);
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
            let old = self.size.swap(st.size, Ordering::Relaxed);
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
    async fn read_vectored<'a>(&self, bufs: &mut [IoSliceMut<'a>]) -> Result<u64, Error> {
        self.inner.read_vectored(bufs).await
    }
    async fn read_vectored_at<'a>(
        &self,
        bufs: &mut [IoSliceMut<'a>],
        offset: u64,
    ) -> Result<u64, Error> {
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
        self.inner.peek(buf).await
    }
    fn num_ready_bytes(&self) -> Result<u64, Error> {
        self.inner.num_ready_bytes()
    }
    async fn readable(&self) -> Result<(), Error> {
        self.inner.readable().await
    }
    async fn writable(&self) -> Result<(), Error> {
        self.inner.writable().await
    }
}
