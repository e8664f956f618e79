//! Which chunks of a job's memory changed since its last snapshot, so the
//! next one reads and writes only those ([`andes_snapshot::Builder::memory_changed`]).
//!
//! On Linux the memory is write-protected after each snapshot, a chunk
//! ([`andes_snapshot::CHUNK`], 64 KiB) at a time: the first write to a chunk
//! faults, the store's signal handler (which wasmtime asks before treating a
//! fault as a trap) marks the chunk written and makes it writable again, and
//! the write goes on. A chunk costs one fault per snapshot interval, however
//! often it is written; the next snapshot re-protects only the chunks that
//! were written. Elsewhere, and whenever tracking was lost (a protection
//! change refused, the memory moved), nothing is known and the next
//! snapshot looks at every chunk.
//!
//! The kernel does not fault on a protected page it writes into for a
//! system call: it fails the call (`EFAULT`). Every read the guest makes
//! into its memory through the sandbox's files ([`crate::sandbox::QuotaFile`],
//! stdin included) therefore first [`touch`]es its buffers, which faults each
//! chunk in as written.
//!
//! The protection must never outlive the tracker: wasmtime reuses a memory's
//! slot for the next instance, believing its pages writable. [`Tracker`]
//! makes the whole memory writable again when it is disarmed or dropped,
//! which happens before the store is.

use std::io::IoSliceMut;

use andes_snapshot::CHUNK;

/// Most chunks tracked: a 4 GiB memory (all a wasm32 memory can be).
#[cfg(target_os = "linux")]
const MAX_CHUNKS: usize = (4usize << 30) / CHUNK;

/// Writes each chunk of `bufs` with the byte it holds, so a write-protected
/// chunk is faulted in (and marked written) before the kernel writes into it.
pub(crate) fn touch(bufs: &mut [IoSliceMut<'_>]) {
    for b in bufs.iter_mut() {
        touch_bytes(b);
    }
}

/// [`touch`] for one buffer.
pub(crate) fn touch_bytes(b: &mut [u8]) {
    let start = b.as_ptr() as usize;
    let mut at = 0usize;
    while at < b.len() {
        let p: *mut u8 = &mut b[at];
        // SAFETY: `p` points into `b`, which this function holds exclusively;
        // the volatile pair writes back what was read, so no byte changes.
        unsafe { p.write_volatile(p.read_volatile()) };
        // The next chunk boundary after `at`.
        at = ((start + at) / CHUNK + 1) * CHUNK - start;
    }
}

/// The chunks of a memory written since the tracker was armed.
pub(crate) struct Changed {
    bits: Vec<u64>,
    /// Chunks at or past this one were not there when armed: all changed.
    armed_chunks: usize,
}

impl Changed {
    /// True when chunk `c` may have changed.
    pub(crate) fn contains(&self, c: usize) -> bool {
        c >= self.armed_chunks || self.bits.get(c / 64).is_some_and(|w| w & (1 << (c % 64)) != 0)
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

    use super::{CHUNK, Changed, MAX_CHUNKS};

    /// What the signal handler and the starter share.
    pub(super) struct Shared {
        /// The protected memory's start, 0 while disarmed.
        base: AtomicUsize,
        /// Its length when armed.
        len: AtomicUsize,
        /// A bit per chunk: written since armed.
        dirty: Box<[AtomicU64]>,
        /// A protection change was refused: nothing is known.
        lost: AtomicBool,
    }

    fn protect(addr: usize, len: usize, writable: bool) -> bool {
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: the range lies inside a linear memory of the store this
        // tracker belongs to, which is mapped for as long as the tracker lives.
        unsafe { libc::mprotect(addr as *mut libc::c_void, len, prot) == 0 }
    }

    impl Shared {
        pub(super) fn new() -> Arc<Shared> {
            Arc::new(Shared {
                base: AtomicUsize::new(0),
                len: AtomicUsize::new(0),
                dirty: (0..MAX_CHUNKS / 64).map(|_| AtomicU64::new(0)).collect(),
                lost: AtomicBool::new(false),
            })
        }

        /// The fault handler: async-signal-safe (atomics and `mprotect`).
        /// True when the fault was a first write to a protected chunk.
        pub(super) fn on_fault(&self, signum: libc::c_int, info: *const libc::siginfo_t) -> bool {
            if (signum != libc::SIGSEGV && signum != libc::SIGBUS) || info.is_null() {
                return false;
            }
            // SAFETY: the kernel hands the handler a valid siginfo.
            let addr = unsafe { (*info).si_addr() } as usize;
            let base = self.base.load(Ordering::Acquire);
            let len = self.len.load(Ordering::Acquire);
            if base == 0 || addr < base || addr >= base + len {
                return false;
            }
            let c = (addr - base) / CHUNK;
            let bit = 1u64 << (c % 64);
            // A second fault in a chunk already written is not ours.
            if self.dirty[c / 64].fetch_or(bit, Ordering::AcqRel) & bit != 0 {
                return false;
            }
            let start = base + c * CHUNK;
            if protect(start, CHUNK.min(base + len - start), true) {
                return true;
            }
            // The kernel refused (too many mappings): give up tracking and
            // make the whole memory writable, which merges it back.
            self.lost.store(true, Ordering::Release);
            protect(base, len, true)
        }
    }

    /// See the module's doc.
    pub(crate) struct Tracker {
        shared: Arc<Shared>,
    }

    impl Tracker {
        pub(super) fn with(shared: Arc<Shared>) -> Tracker {
            Tracker { shared }
        }

        /// Protects the memory at `base` of `len` bytes: from now on each
        /// chunk's first write is noted. Armed before at the same place, only
        /// the chunks written since (and any the memory grew by) need it.
        pub(crate) fn arm(&mut self, base: *mut u8, len: usize) {
            let s = &self.shared;
            let base = base as usize;
            let chunks = len / CHUNK;
            if !len.is_multiple_of(CHUNK) || chunks > MAX_CHUNKS || !base.is_multiple_of(CHUNK) {
                self.disarm();
                return;
            }
            let was = s.base.load(Ordering::Acquire);
            let was_len = s.len.load(Ordering::Acquire);
            let again = was == base && !s.lost.load(Ordering::Acquire) && was_len <= len;
            if !again {
                self.disarm();
            }
            // The handler ignores faults while the tracker is rebuilt.
            s.base.store(0, Ordering::Release);
            s.lost.store(false, Ordering::Release);
            let mut ok = true;
            let mut run: Option<usize> = None;
            let was_chunks = if again { was_len / CHUNK } else { 0 };
            for c in 0..=chunks {
                let fresh = c < chunks
                    && (c >= was_chunks
                        || s.dirty[c / 64].load(Ordering::Acquire) & (1 << (c % 64)) != 0);
                match (fresh, run) {
                    (true, None) => run = Some(c),
                    (false, Some(first)) => {
                        ok &= protect(base + first * CHUNK, (c - first) * CHUNK, false);
                        run = None;
                    }
                    _ => {}
                }
            }
            for w in s.dirty.iter().take(chunks.div_ceil(64)) {
                w.store(0, Ordering::Release);
            }
            s.len.store(len, Ordering::Release);
            s.base.store(base, Ordering::Release);
            if !ok {
                s.lost.store(true, Ordering::Release);
                self.disarm();
            }
        }

        /// The chunks written since armed, if known for the memory now at
        /// `base` of `len` bytes.
        pub(crate) fn changed(&self, base: *const u8, len: usize) -> Option<Changed> {
            let s = &self.shared;
            let armed = s.base.load(Ordering::Acquire);
            let armed_len = s.len.load(Ordering::Acquire);
            if armed == 0
                || armed != base as usize
                || len < armed_len
                || s.lost.load(Ordering::Acquire)
            {
                return None;
            }
            let words = (len / CHUNK).div_ceil(64).min(s.dirty.len());
            let bits = s.dirty[..words].iter().map(|w| w.load(Ordering::Acquire)).collect();
            Some(Changed { bits, armed_chunks: armed_len / CHUNK })
        }

        /// Makes the whole memory writable again and forgets it.
        pub(crate) fn disarm(&self) {
            let s = &self.shared;
            let base = s.base.swap(0, Ordering::AcqRel);
            let len = s.len.swap(0, Ordering::AcqRel);
            if base != 0 && len != 0 {
                // Cannot fail for lack of mappings: it merges them.
                protect(base, len, true);
            }
        }
    }

    impl Drop for Tracker {
        fn drop(&mut self) {
            self.disarm();
        }
    }
}

#[cfg(target_os = "linux")]
pub(crate) use imp::Tracker;

/// Creates the tracker of a store's memory 0 and installs the store's
/// signal handler for it.
#[cfg(target_os = "linux")]
pub(crate) fn tracker<T>(store: &mut wasmtime::Store<T>) -> Tracker {
    let shared = imp::Shared::new();
    let handler = shared.clone();
    // SAFETY: the handler is async-signal-safe: it reads the siginfo,
    // updates atomics and calls mprotect.
    unsafe {
        use wasmtime::unix::StoreExt;
        store.set_signal_handler(move |signum, info, _ctx| handler.on_fault(signum, info));
    }
    Tracker::with(shared)
}

/// Without write protection nothing is known: every snapshot looks at
/// every chunk.
#[cfg(not(target_os = "linux"))]
pub(crate) struct Tracker;

#[cfg(not(target_os = "linux"))]
impl Tracker {
    pub(crate) fn arm(&mut self, _base: *mut u8, _len: usize) {}
    pub(crate) fn changed(&self, _base: *const u8, _len: usize) -> Option<Changed> {
        None
    }
}

/// See the Linux `tracker`.
#[cfg(not(target_os = "linux"))]
pub(crate) fn tracker<T>(_store: &mut wasmtime::Store<T>) -> Tracker {
    Tracker
}
