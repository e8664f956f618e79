//! A small file of the daemon's own, written through a shared mapping: a
//! write is a store to memory, not a system call, and it is in the page
//! cache at once, so it survives the process (an abort, a kill -9) though
//! not the machine. This is what an evaluation journal needs: a record
//! written before every evaluation of a user's input, read back only after
//! the process died.
//!
//! A journal must also tell a process that died of its input from one that
//! was killed from outside (a `kill -9`, a machine going down), or it would
//! blame whatever it was doing at the time. [`Mapped::mark_on_abort`] sets a
//! byte of the file when the process aborts (on Unix, `SIGABRT`: what Rust
//! raises when an allocation fails, a stack overflows or a panic cannot
//! unwind). A kill leaves it unset.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Mutex;

/// The byte [`Mapped::mark_on_abort`] writes when the process aborts.
pub const ABORTED: u8 = b'!';

/// Whether this platform can [`Mapped::mark_on_abort`] (Unix).
pub const MARKS_ABORTS: bool = cfg!(unix);

/// A file of a fixed length mapped for writing (see the module).
pub struct Mapped {
    map: Mutex<memmap2::MmapMut>,
    _file: File,
    /// The byte [`Mapped::mark_on_abort`] registered, unregistered on drop.
    marked: Option<usize>,
}

impl Mapped {
    /// Creates (or takes over) `path` as a file of `len` bytes, the
    /// owner's alone, mapped for writing; returns it with what the file
    /// held before (at most `len` bytes; empty if it did not exist).
    pub fn create(path: &Path, len: usize) -> io::Result<(Mapped, Vec<u8>)> {
        let mut before = std::fs::read(path).unwrap_or_default();
        before.truncate(len);
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(true).read(true).write(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(path)?;
        file.set_len(len as u64)?;
        // SAFETY: the mapping is of a file this process just created (or
        // truncated) in its own private directory, for its own account
        // alone, and never resized while mapped. Another process of that
        // account shrinking it would fault this one, as writing into the
        // daemon's database would corrupt it: the daemon's files are its
        // own by contract (`private::owner_only_by_default`).
        let map = unsafe { memmap2::MmapMut::map_mut(&file)? };
        Ok((Mapped { map: Mutex::new(map), _file: file, marked: None }, before))
    }

    /// The file's length.
    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Has byte `at` of the file set to [`ABORTED`] if the process aborts
    /// (see the module); false if it cannot be (past the end, every place
    /// taken, or a platform without it: Windows).
    pub fn mark_on_abort(&mut self, at: usize) -> bool {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if at >= map.len() || self.marked.is_some() {
            return false;
        }
        let ptr = map.as_mut_ptr().wrapping_add(at);
        drop(map);
        match abort::register(ptr) {
            Some(i) => {
                self.marked = Some(i);
                true
            }
            None => false,
        }
    }

    /// Writes `bytes` at `at`; false (and nothing written) if they do not
    /// fit.
    pub fn write(&self, at: usize, bytes: &[u8]) -> bool {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        match at.checked_add(bytes.len()) {
            Some(end) if end <= map.len() => {
                map[at..end].copy_from_slice(bytes);
                true
            }
            _ => false,
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if let Some(i) = self.marked.take() {
            abort::unregister(i);
        }
    }
}

/// The bytes to set when the process aborts: a fixed table the signal
/// handler reads without locks or allocation.
#[cfg(unix)]
mod abort {
    use std::sync::Once;
    use std::sync::atomic::{AtomicPtr, Ordering};

    const PLACES: usize = 16;
    static PTRS: [AtomicPtr<u8>; PLACES] = [const { AtomicPtr::new(std::ptr::null_mut()) }; PLACES];
    static INSTALL: Once = Once::new();

    extern "C" fn on_abort(_: libc::c_int) {
        for p in &PTRS {
            let p = p.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: a registered pointer is into a live mapping: it is
                // unregistered (nulled) before its mapping is dropped. A
                // volatile store of one byte is async-signal-safe.
                unsafe { p.write_volatile(super::ABORTED) };
            }
        }
        // Returning lets abort(3) go on: it resets the default action and
        // raises SIGABRT again, so the process ends as it would have.
    }

    pub(super) fn register(ptr: *mut u8) -> Option<usize> {
        INSTALL.call_once(|| {
            // SAFETY: installs a handler for SIGABRT that only stores bytes
            // (see on_abort); a zeroed sigaction is a valid starting value.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_abort as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(libc::SIGABRT, &sa, std::ptr::null_mut());
            }
        });
        for (i, p) in PTRS.iter().enumerate() {
            if p.compare_exchange(std::ptr::null_mut(), ptr, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Some(i);
            }
        }
        None
    }

    pub(super) fn unregister(i: usize) {
        PTRS[i].store(std::ptr::null_mut(), Ordering::Release);
    }
}

#[cfg(not(unix))]
mod abort {
    pub(super) fn register(_: *mut u8) -> Option<usize> {
        None
    }

    pub(super) fn unregister(_: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_is_in_the_file_without_a_flush() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j");
        let (m, before) = Mapped::create(&p, 16).unwrap();
        assert!(before.is_empty());
        assert!(m.write(4, b"abcd"));
        assert!(!m.write(14, b"abcd"), "past the end");
        assert_eq!(&std::fs::read(&p).unwrap()[..8], b"\0\0\0\0abcd");
        std::mem::forget(m);
        let (_, before) = Mapped::create(&p, 8).unwrap();
        assert_eq!(before, b"\0\0\0\0abcd");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }

    /// Run by [`an_abort_marks_the_file_and_a_kill_does_not`] in a child
    /// process: maps the file it names, marks it and dies as asked.
    #[cfg(unix)]
    #[test]
    fn child_that_dies() {
        let Some(path) = std::env::var_os("ANDES_MAPPED_CHILD") else { return };
        let (mut m, _) = Mapped::create(std::path::Path::new(&path), 8).unwrap();
        assert!(m.mark_on_abort(7));
        m.write(0, b"busy");
        if std::env::var_os("ANDES_MAPPED_ABORT").is_some() {
            std::process::abort();
        }
        // SAFETY: kill(2) of this very process, as a kill -9 from outside.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }

    #[cfg(unix)]
    #[test]
    fn an_abort_marks_the_file_and_a_kill_does_not() {
        let dir = tempfile::tempdir().unwrap();
        for abort in [true, false] {
            let p = dir.path().join(format!("j{abort}"));
            let mut c = std::process::Command::new(std::env::current_exe().unwrap());
            c.args([
                "--exact",
                "mapped::tests::child_that_dies",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("ANDES_MAPPED_CHILD", &p);
            if abort {
                c.env("ANDES_MAPPED_ABORT", "1");
            }
            let st = c.output().unwrap().status;
            assert!(!st.success());
            let b = std::fs::read(&p).unwrap();
            assert_eq!(&b[..4], b"busy");
            assert_eq!(b[7] == ABORTED, abort, "abort {abort}: {b:?}");
        }
    }
}
