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
//! Each chunk made writable inside a protected memory splits the memory's
//! mapping in the kernel (up to two more mappings), and a process may hold
//! only `vm.max_map_count` of them (65,530 by default), shared by every job
//! on the host and by the host itself. A job writing every other chunk could
//! take them all, and the next `mmap` of any job, or of the host, would
//! fail. One [`Budget`] of splits ([`MAPPINGS`]) is what every tracker of
//! the process draws from: a first write that would split the memory beyond
//! it makes the whole memory writable instead (which merges it back), and the
//! job's next snapshot looks at every chunk. Re-arming or disarming returns
//! what a tracker took.
//!
//! While a snapshot is read off the job's thread ([`Tracker::freeze`]), a
//! chunk the job writes before the snapshot has read it is copied aside
//! first: host memory the job makes the host keep. Those copies draw from
//! one more budget of the process ([`COPIES`] bytes); past it, the job's
//! write waits until the snapshot has read the chunk.
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

#[cfg(target_os = "linux")]
/// The mappings trackers may add to the process, together: a quarter of
/// the kernel's default `vm.max_map_count`.
pub(crate) const MAPPINGS: isize = 16_384;

#[cfg(target_os = "linux")]
/// The bytes of chunks all trackers of the process may hold copied aside
/// for snapshots being written ([`Tracker::freeze`]).
pub(crate) const COPIES: isize = 512 << 20;

#[cfg(target_os = "linux")]
/// Something every tracker of the process draws from (see the module's
/// doc): mappings, or bytes copied aside.
pub(crate) struct Budget {
    left: std::sync::atomic::AtomicIsize,
    /// The least ever left.
    lowest: std::sync::atomic::AtomicIsize,
}

#[cfg(target_os = "linux")]
impl Budget {
    /// A budget of `n`.
    pub(crate) const fn new(n: isize) -> Budget {
        Budget {
            left: std::sync::atomic::AtomicIsize::new(n),
            lowest: std::sync::atomic::AtomicIsize::new(n),
        }
    }

    /// Takes `n` if that much is left. Async-signal-safe.
    fn take(&self, n: isize) -> bool {
        use std::sync::atomic::Ordering;
        let mut left = self.left.load(Ordering::Acquire);
        loop {
            if left < n {
                return false;
            }
            match self.left.compare_exchange_weak(
                left,
                left - n,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.lowest.fetch_min(left - n, Ordering::AcqRel);
                    return true;
                }
                Err(now) => left = now,
            }
        }
    }

    /// Gives back `n`. Async-signal-safe.
    fn give(&self, n: isize) {
        self.left.fetch_add(n, std::sync::atomic::Ordering::AcqRel);
    }

    /// What is left.
    #[cfg(test)]
    pub(crate) fn left(&self) -> isize {
        self.left.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The least ever left.
    #[cfg(test)]
    pub(crate) fn lowest(&self) -> isize {
        self.lowest.load(std::sync::atomic::Ordering::Acquire)
    }
}

#[cfg(target_os = "linux")]
/// The budgets a tracker draws from.
#[derive(Clone, Copy)]
pub(crate) struct Budgets {
    /// Mappings its memory's protection may split off.
    pub(crate) mappings: &'static Budget,
    /// Bytes it may hold copied aside while a snapshot is written.
    pub(crate) copies: &'static Budget,
}

#[cfg(target_os = "linux")]
/// The process's budgets, every job's tracker draws from them.
pub(crate) static PROCESS: Budgets =
    Budgets { mappings: &PROCESS_MAPPINGS, copies: &PROCESS_COPIES };

#[cfg(target_os = "linux")]
static PROCESS_MAPPINGS: Budget = Budget::new(MAPPINGS);

#[cfg(target_os = "linux")]
static PROCESS_COPIES: Budget = Budget::new(COPIES);

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
    /// Every chunk: what a snapshot must look at when nothing is known.
    pub(crate) fn all() -> Changed {
        Changed { bits: Vec::new(), armed_chunks: 0 }
    }

    /// True when chunk `c` may have changed.
    pub(crate) fn contains(&self, c: usize) -> bool {
        c >= self.armed_chunks || self.bits.get(c / 64).is_some_and(|w| w & (1 << (c % 64)) != 0)
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU8, AtomicU64, AtomicUsize, Ordering};

    use super::{Budgets, CHUNK, Changed, MAX_CHUNKS};

    /// What the signal handler and the starter share.
    pub(super) struct Shared {
        /// The protected memory's start, 0 while disarmed.
        base: AtomicUsize,
        /// Its length when armed.
        len: AtomicUsize,
        /// A bit per chunk: written since armed.
        dirty: Box<[AtomicU64]>,
        /// A protection change was refused, or the budget ran out:
        /// nothing is known.
        lost: AtomicBool,
        /// The budgets splits and copies are drawn from.
        budgets: Budgets,
        /// The mappings taken from it since armed.
        taken: AtomicIsize,
        /// While a snapshot reads the memory off the job's thread
        /// ([`Frozen`]), each chunk's state: `PENDING` until it is read or
        /// saved, `READING` while the snapshot copies it, `SAVING` while the
        /// fault handler copies it aside, `SAVED` once aside, `NONE` once
        /// read (and for every chunk when nothing is frozen).
        states: Box<[AtomicU8]>,
        /// Where chunks are copied aside (a mapping of the frozen memory's
        /// length, chunk `c` at `c * CHUNK`), 0 when none.
        side: AtomicUsize,
        /// From a freeze until its snapshot has read every chunk.
        frozen: AtomicBool,
        /// Chunks copied aside since the freeze.
        copied: AtomicUsize,
    }

    const NONE: u8 = 0;
    const PENDING: u8 = 1;
    const READING: u8 = 2;
    const SAVING: u8 = 3;
    const SAVED: u8 = 4;

    /// Lets the other thread (the snapshot's or the job's) get on, while
    /// it holds a chunk for a copy of 64 KiB. Async-signal-safe.
    fn wait_a_little() {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
        // SAFETY: sched_yield takes nothing and touches no memory.
        unsafe { libc::sched_yield() };
    }

    fn protect(addr: usize, len: usize, writable: bool) -> bool {
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: the range lies inside a linear memory of the store this
        // tracker belongs to, which is mapped for as long as the tracker lives.
        unsafe { libc::mprotect(addr as *mut libc::c_void, len, prot) == 0 }
    }

    /// Writes the first byte of every kernel mapping over `[addr, addr +
    /// len)` (read from `/proc/self/maps`) with the value it holds, before
    /// any of it is protected. A mapping gets its anonymous-memory record
    /// (`anon_vma`) on its first write; the pieces a protection change
    /// splits it into inherit the one it has then, or each get their own
    /// on their own first write, after which the kernel cannot merge them
    /// back and the splits would outlive the tracker. False when the maps
    /// cannot be read.
    fn prime(addr: usize, len: usize) -> bool {
        if len == 0 {
            return true;
        }
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return false };
        let end = addr + len;
        for line in maps.lines() {
            let Some((a, b)) = line.split_whitespace().next().and_then(|r| r.split_once('-'))
            else {
                return false;
            };
            let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            else {
                return false;
            };
            if a < end && b > addr {
                let p = a.max(addr) as *mut u8;
                // SAFETY: `p` lies in the memory being armed, writable (no
                // part of `[addr, addr + len)` is protected yet) and mapped
                // for as long as the tracker lives; the guest is not running,
                // and the volatile pair writes back what it read.
                unsafe { p.write_volatile(p.read_volatile()) };
            }
        }
        true
    }

    impl Shared {
        pub(super) fn new(budgets: Budgets) -> Arc<Shared> {
            Arc::new(Shared {
                base: AtomicUsize::new(0),
                len: AtomicUsize::new(0),
                dirty: (0..MAX_CHUNKS / 64).map(|_| AtomicU64::new(0)).collect(),
                lost: AtomicBool::new(false),
                budgets,
                taken: AtomicIsize::new(0),
                states: (0..MAX_CHUNKS).map(|_| AtomicU8::new(NONE)).collect(),
                side: AtomicUsize::new(0),
                frozen: AtomicBool::new(false),
                copied: AtomicUsize::new(0),
            })
        }

        /// Copies chunk `c` aside if a frozen snapshot has yet to read it,
        /// before the job's first write to it goes on; when the budget of
        /// copies is spent, waits for the snapshot to read it instead.
        /// Async-signal-safe.
        fn save(&self, c: usize, base: usize, len: usize) {
            let Some(state) = self.states.get(c) else { return };
            let copies = self.budgets.copies;
            let mut paid = false;
            loop {
                match state.load(Ordering::Acquire) {
                    PENDING if !paid => {
                        paid = copies.take(CHUNK as isize);
                        if !paid {
                            wait_a_little();
                        }
                    }
                    PENDING => {
                        if state
                            .compare_exchange(PENDING, SAVING, Ordering::AcqRel, Ordering::Acquire)
                            .is_err()
                        {
                            continue;
                        }
                        let side = self.side.load(Ordering::Acquire);
                        let start = c * CHUNK;
                        // SAFETY: the chunk lies in the memory (mapped, and
                        // readable: it is only write-protected); the side
                        // mapping has the frozen memory's length and is
                        // unmapped only after every chunk left `SAVING`.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                (base + start) as *const u8,
                                (side + start) as *mut u8,
                                CHUNK.min(len - start),
                            );
                        }
                        self.copied.fetch_add(1, Ordering::AcqRel);
                        state.store(SAVED, Ordering::Release);
                        return;
                    }
                    READING => wait_a_little(),
                    _ => {
                        if paid {
                            copies.give(CHUNK as isize);
                        }
                        return;
                    }
                }
            }
        }

        fn is_dirty(&self, c: usize) -> bool {
            self.dirty[c / 64].load(Ordering::Acquire) & (1 << (c % 64)) != 0
        }

        /// Gives back every mapping taken: the memory's protection is one
        /// again (all read-only after arming, all writable after disarming).
        fn give_back(&self) {
            self.budgets.mappings.give(self.taken.swap(0, Ordering::AcqRel));
        }

        /// The fault handler: async-signal-safe (atomics and `mprotect`).
        /// True when the fault was a first write to a protected chunk.
        pub(super) fn on_fault(&self, signum: libc::c_int, info: *const libc::siginfo_t) -> bool {
            // The interrupted code may be reading errno: mprotect must not
            // change it under it.
            // SAFETY: the calling thread's errno, always valid.
            let errno = unsafe { *libc::__errno_location() };
            let handled = self.on_fault_inner(signum, info);
            // SAFETY: as above.
            unsafe { *libc::__errno_location() = errno };
            handled
        }

        fn on_fault_inner(&self, signum: libc::c_int, info: *const libc::siginfo_t) -> bool {
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
            // A chunk next to a written one joins its mapping; one between
            // two read-only neighbours splits theirs in three. (Counted
            // high: a merge gives nothing back until re-armed.)
            let chunks = len / CHUNK;
            let joins = (c > 0 && self.is_dirty(c - 1)) || (c + 1 < chunks && self.is_dirty(c + 1));
            let cost = if joins { 0 } else { 2 };
            if self.frozen.load(Ordering::Acquire) {
                self.save(c, base, len);
            }
            let start = base + c * CHUNK;
            if self.budgets.mappings.take(cost) {
                if protect(start, CHUNK.min(base + len - start), true) {
                    self.taken.fetch_add(cost, Ordering::AcqRel);
                    return true;
                }
                self.budgets.mappings.give(cost);
            }
            // Out of budget, or the kernel refused: give up tracking and
            // make the whole memory writable, which merges it back; once a
            // frozen snapshot has read it all (the job waits as long as a
            // snapshot taken on its own thread would have paused it).
            while self.frozen.load(Ordering::Acquire) {
                wait_a_little();
            }
            self.lost.store(true, Ordering::Release);
            let merged = protect(base, len, true);
            self.give_back();
            merged
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
            let from = if again { was_len } else { 0 };
            if !prime(base + from, len - from) {
                self.disarm();
                return;
            }
            // The handler ignores faults while the tracker is rebuilt.
            s.base.store(0, Ordering::Release);
            s.lost.store(false, Ordering::Release);
            // Every chunk not written since the last arming is read-only
            // still, so one call over the span from the first written chunk
            // to the last protects exactly the written ones: the kernel
            // passes over a mapping already read-only without touching its
            // pages, and flushes the TLB once for the call rather than once
            // per run of written chunks (a call per run cost 5 to 6 us, most
            // of a sparse snapshot's pause).
            let was_chunks = if again { was_len / CHUNK } else { 0 };
            let words = &s.dirty[..was_chunks.div_ceil(64)];
            let bits = |i: usize| words[i].load(Ordering::Acquire);
            let written_first = (0..words.len())
                .find(|&i| bits(i) != 0)
                .map(|i| i * 64 + bits(i).trailing_zeros() as usize);
            let written_end = (0..words.len())
                .rev()
                .find(|&i| bits(i) != 0)
                .map(|i| i * 64 + 64 - bits(i).leading_zeros() as usize);
            // Chunks the memory grew by since are writable, and fresh too.
            let first = written_first.unwrap_or(was_chunks).min(chunks);
            let end = if chunks > was_chunks { chunks } else { written_end.unwrap_or(first) };
            let ok = first == end || protect(base + first * CHUNK, (end - first) * CHUNK, false);
            for w in s.dirty.iter().take(chunks.div_ceil(64)) {
                w.store(0, Ordering::Release);
            }
            // The whole memory is read-only again: one mapping.
            s.give_back();
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

        /// Re-arms over the memory at `base` of `len` bytes (as
        /// [`Tracker::arm`]) so that a snapshot can read its chunks `reads`
        /// (each once) from another thread while the job goes on: until the
        /// returned [`Frozen`] is dropped, the first write to one of them
        /// not read yet copies the chunk aside first, and the snapshot reads
        /// that copy. `None`
        /// when the memory cannot be protected: it must be read before the
        /// job goes on. The memory must not move or be unmapped until the
        /// `Frozen` is dropped (a pooled memory never moves).
        pub(crate) fn freeze(
            &mut self,
            base: *mut u8,
            len: usize,
            reads: &[usize],
        ) -> Option<Frozen> {
            let s = &self.shared;
            let chunks = len.div_ceil(CHUNK);
            if chunks > MAX_CHUNKS
                || s.frozen.load(Ordering::Acquire)
                || reads.iter().any(|&c| c >= chunks)
            {
                return None;
            }
            // SAFETY: a fresh private anonymous mapping, pages committed
            // only as chunks are copied into it.
            let side = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len.max(1),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if side == libc::MAP_FAILED {
                return None;
            }
            for &c in reads {
                s.states[c].store(PENDING, Ordering::Release);
            }
            s.side.store(side as usize, Ordering::Release);
            s.frozen.store(true, Ordering::Release);
            let frozen =
                Frozen { shared: s.clone(), base: base as usize, len, side: side as usize };
            self.arm(base, len);
            let s = &self.shared;
            let armed = s.base.load(Ordering::Acquire) == base as usize
                && s.len.load(Ordering::Acquire) == len
                && !s.lost.load(Ordering::Acquire);
            // Unprotected, the job's writes would not be seen: no freeze.
            armed.then_some(frozen)
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
            s.give_back();
        }
    }

    impl Drop for Tracker {
        fn drop(&mut self) {
            self.disarm();
        }
    }

    /// A memory a snapshot reads from another thread while its job goes on
    /// ([`Tracker::freeze`]): each chunk as it was at the freeze.
    pub(crate) struct Frozen {
        shared: Arc<Shared>,
        base: usize,
        len: usize,
        side: usize,
    }

    // SAFETY: the addresses are of the frozen memory and the side mapping,
    // read under the chunk states' protocol with the job's thread.
    unsafe impl Send for Frozen {}
    // SAFETY: as above; every chunk is read by the state machine, which lets
    // one reader or the fault handler hold it at a time.
    unsafe impl Sync for Frozen {}

    impl andes_snapshot::ChunkSource for Frozen {
        fn len(&self) -> usize {
            self.len
        }

        fn chunk<'a>(&'a self, c: usize, copy: &'a mut [u8]) -> &'a [u8] {
            let start = c * CHUNK;
            let n = CHUNK.min(self.len.saturating_sub(start));
            let copy = &mut copy[..n];
            let state = &self.shared.states[c];
            loop {
                match state.compare_exchange(PENDING, READING, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => {
                        // SAFETY: the chunk is write-protected and the fault
                        // handler waits while it is `READING`: it holds what
                        // it held at the freeze.
                        let live = unsafe {
                            std::slice::from_raw_parts((self.base + start) as *const u8, n)
                        };
                        copy.copy_from_slice(live);
                        state.store(NONE, Ordering::Release);
                        return copy;
                    }
                    Err(SAVED) => {
                        // SAFETY: a saved chunk's copy is complete and stays
                        // until this `Frozen` is dropped.
                        let saved = unsafe {
                            std::slice::from_raw_parts((self.side + start) as *const u8, n)
                        };
                        copy.copy_from_slice(saved);
                        return copy;
                    }
                    Err(SAVING) => wait_a_little(),
                    // Not frozen for reading, or read already: what the job
                    // holds now is not what it held, and the snapshot fails
                    // rather than be written wrong.
                    Err(_) => panic!("chunk {c} was not frozen to be read, or was read twice"),
                }
            }
        }
    }

    impl Drop for Frozen {
        /// Every chunk read: the job's writes copy nothing more, and the
        /// copies are freed once no fault handler is writing one.
        fn drop(&mut self) {
            let s = &self.shared;
            for state in &s.states[..self.len.div_ceil(CHUNK)] {
                loop {
                    let now = state.load(Ordering::Acquire);
                    if now == SAVING {
                        wait_a_little();
                    } else if state
                        .compare_exchange(now, NONE, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        break;
                    }
                }
            }
            s.frozen.store(false, Ordering::Release);
            s.side.store(0, Ordering::Release);
            // SAFETY: the mapping made by `freeze`; no chunk is `PENDING` or
            // `SAVING`, so no handler writes into it any more.
            unsafe { libc::munmap(self.side as *mut libc::c_void, self.len.max(1)) };
            let copied = s.copied.swap(0, Ordering::AcqRel);
            s.budgets.copies.give((copied * CHUNK) as isize);
        }
    }
}

#[cfg(target_os = "linux")]
pub(crate) use imp::Tracker;

/// Creates the tracker of a store's memory 0 and installs the store's
/// signal handler for it.
#[cfg(target_os = "linux")]
pub(crate) fn tracker<T>(store: &mut wasmtime::Store<T>) -> Tracker {
    tracker_with(store, PROCESS)
}

/// [`tracker`] drawing its splits from `budget`.
#[cfg(target_os = "linux")]
pub(crate) fn tracker_with<T>(store: &mut wasmtime::Store<T>, budgets: Budgets) -> Tracker {
    let shared = imp::Shared::new(budgets);
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
    /// Nothing can be protected: a snapshot reads the memory before the
    /// job goes on.
    pub(crate) fn freeze(
        &mut self,
        _base: *mut u8,
        _len: usize,
        _reads: &[usize],
    ) -> Option<Frozen> {
        None
    }
    pub(crate) fn changed(&self, _base: *const u8, _len: usize) -> Option<Changed> {
        None
    }
}

/// A frozen memory: none without write protection.
#[cfg(not(target_os = "linux"))]
pub(crate) enum Frozen {}

#[cfg(not(target_os = "linux"))]
impl andes_snapshot::ChunkSource for Frozen {
    fn len(&self) -> usize {
        match *self {}
    }

    fn chunk<'a>(&'a self, _c: usize, _copy: &'a mut [u8]) -> &'a [u8] {
        match *self {}
    }
}

/// See the Linux `tracker`.
#[cfg(not(target_os = "linux"))]
pub(crate) fn tracker<T>(_store: &mut wasmtime::Store<T>) -> Tracker {
    Tracker
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Copies aside a test never runs out of.
    const COPIES_ANY: isize = 1 << 40;

    /// A guest whose `write(from, step, n, add)` stores `i + 1 + add` at the start of
    /// chunks `from + i * step`, and whose `grow(pages)` grows its memory.
    const WRITER: &str = r#"(module
      (memory (export "memory") 64)
      (func (export "write") (param $from i32) (param $step i32) (param $n i32) (param $add i32)
        (local $i i32)
        (block $done (loop $next
          (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
          (i32.store
            (i32.mul (i32.add (local.get $from) (i32.mul (local.get $i) (local.get $step)))
                     (i32.const 65536))
            (i32.add (local.get $i) (i32.add (local.get $add) (i32.const 1))))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $next))))
      (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))"#;

    struct Job {
        store: wasmtime::Store<()>,
        instance: wasmtime::Instance,
        memory: wasmtime::Memory,
        tracker: Tracker,
    }

    fn engine() -> wasmtime::Engine {
        // The host's allocator: memories in pool slots, chunk-aligned.
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_memories(4).total_core_instances(4).max_memory_size(64 << 20);
        let mut cfg = wasmtime::Config::new();
        cfg.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        wasmtime::Engine::new(&cfg).unwrap()
    }

    /// Budgets of their own for one test: `mappings` and `copies` bytes.
    fn budgets(mappings: isize, copies: isize) -> Budgets {
        Budgets {
            mappings: Box::leak(Box::new(Budget::new(mappings))),
            copies: Box::leak(Box::new(Budget::new(copies))),
        }
    }

    fn job(engine: &wasmtime::Engine, budgets: Budgets) -> Job {
        let module = wasmtime::Module::new(engine, wat::parse_str(WRITER).unwrap()).unwrap();
        let mut store = wasmtime::Store::new(engine, ());
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
        let memory = instance.get_memory(&mut store, "memory").unwrap();
        let mut tracker = tracker_with(&mut store, budgets);
        let (base, len) = (memory.data_ptr(&store), memory.data_size(&store));
        assert!((base as usize).is_multiple_of(CHUNK), "the pool's memory is not chunk-aligned");
        tracker.arm(base, len);
        Job { store, instance, memory, tracker }
    }

    impl Job {
        fn write(&mut self, from: i32, step: i32, n: i32) {
            self.write_adding(from, step, n, 0);
        }

        fn write_adding(&mut self, from: i32, step: i32, n: i32, add: i32) {
            let f =
                self.instance.get_typed_func::<(i32, i32, i32, i32), ()>(&mut self.store, "write");
            f.unwrap().call(&mut self.store, (from, step, n, add)).unwrap();
            for i in 0..n {
                let at = ((from + i * step) as usize) * CHUNK;
                let word = &self.memory.data(&self.store)[at..at + 4];
                assert_eq!(u32::from_le_bytes(word.try_into().unwrap()), (i + add) as u32 + 1);
            }
        }

        /// Arms the tracker again over the memory as it is now.
        fn rearm(&mut self) {
            let (base, len) =
                (self.memory.data_ptr(&self.store), self.memory.data_size(&self.store));
            self.tracker.arm(base, len);
        }

        /// Freezes the memory for a snapshot reading chunks `reads`.
        fn freeze(&mut self, reads: &[usize]) -> imp::Frozen {
            let (base, len) =
                (self.memory.data_ptr(&self.store), self.memory.data_size(&self.store));
            self.tracker.freeze(base, len, reads).expect("a pooled memory freezes")
        }

        fn changed(&self) -> Option<Changed> {
            let m = self.memory.data(&self.store);
            self.tracker.changed(m.as_ptr(), m.len())
        }

        /// The kernel's mappings over this job's memory, from /proc/self/maps.
        fn mappings(&self) -> usize {
            let base = self.memory.data_ptr(&self.store) as usize;
            let end = base + self.memory.data_size(&self.store);
            let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
            maps.lines()
                .filter_map(|l| l.split_whitespace().next()?.split_once('-'))
                .filter_map(|(a, b)| {
                    Some((usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?))
                })
                .filter(|&(a, b)| a < end && b > base)
                .count()
        }
    }

    #[test]
    fn a_job_writing_every_other_chunk_cannot_take_more_mappings_than_the_budget() {
        let budgets = budgets(40, COPIES_ANY);
        let mut a = job(&engine(), budgets);
        assert_eq!(a.mappings(), 1);
        // Ten isolated chunks: twenty mappings of the forty, all known.
        a.write(1, 2, 10);
        let changed = a.changed().expect("within the budget the tracker knows");
        assert!((0..64).all(|c| changed.contains(c) == (c % 2 == 1 && c < 21)));
        assert_eq!(budgets.mappings.left(), 20);
        assert!(a.mappings() <= 21, "{} mappings", a.mappings());
        // Thirty more would need sixty: the tracker gives up, the memory is
        // one writable mapping again and the budget whole.
        a.write(21, 2, 21);
        assert!(a.changed().is_none(), "past its budget the tracker knows nothing");
        assert_eq!(a.mappings(), 1);
        assert_eq!(budgets.mappings.left(), 40);
        // Re-armed, it knows again; writing a run of chunks costs two.
        a.rearm();
        a.write(0, 1, 32);
        let changed = a.changed().unwrap();
        assert!((0..64).all(|c| changed.contains(c) == (c < 32)));
        assert_eq!(budgets.mappings.left(), 38);
        assert_eq!(a.mappings(), 2);
    }

    #[test]
    fn a_rearm_protects_again_exactly_the_chunks_written_first_and_last_included() {
        let budgets = budgets(40, COPIES_ANY);
        let mut a = job(&engine(), budgets);
        let chunks = a.memory.data_size(&a.store) / CHUNK;
        assert_eq!(chunks, 64);
        // The memory's first and last chunks and two between, apart.
        a.write(0, 21, 4);
        assert!(a.mappings() > 4);
        a.rearm();
        assert_eq!(a.mappings(), 1, "re-armed, the memory is one read-only mapping");
        assert_eq!(budgets.mappings.left(), 40);
        assert!((0..64).all(|c| !a.changed().unwrap().contains(c)));
        // Each of them faults again on its next write, and so does a chunk
        // between them that was never written.
        a.write_adding(0, 21, 4, 7);
        a.write(10, 1, 1);
        let changed = a.changed().unwrap();
        assert!((0..64).all(|c| changed.contains(c) == [0, 10, 21, 42, 63].contains(&c)));
        // Twice in a row, nothing written between: nothing to protect.
        a.rearm();
        a.rearm();
        assert_eq!(a.mappings(), 1);
        a.write(33, 1, 1);
        let changed = a.changed().unwrap();
        assert!((0..64).all(|c| changed.contains(c) == (c == 33)));
    }

    #[test]
    fn jobs_share_one_budget_and_one_out_of_it_still_runs_and_grows() {
        let budgets = budgets(8, COPIES_ANY);
        let engine = engine();
        let mut a = job(&engine, budgets);
        let mut b = job(&engine, budgets);
        a.write(1, 2, 4);
        assert_eq!(budgets.mappings.left(), 0);
        // The budget is spent: b's first write gives its tracking up, not
        // its run; it writes, grows its memory and writes past the growth.
        b.write(3, 4, 8);
        assert!(b.changed().is_none());
        let grow = b.instance.get_typed_func::<i32, i32>(&mut b.store, "grow").unwrap();
        assert_eq!(grow.call(&mut b.store, 64).unwrap(), 64);
        b.write(100, 1, 20);
        assert!(a.changed().is_some());
        // A's re-arm gives its share back; b, re-armed over its grown
        // memory, tracks again.
        a.tracker.disarm();
        assert_eq!(budgets.mappings.left(), 8);
        b.rearm();
        b.write(7, 8, 4);
        let changed = b.changed().unwrap();
        assert!((0..128).all(|c| changed.contains(c) == (c % 8 == 7 && c < 39)));
    }

    /// The first word of each chunk a snapshot reads from `frozen`.
    fn read_all(frozen: &imp::Frozen, chunks: std::ops::Range<usize>) -> Vec<u32> {
        use andes_snapshot::ChunkSource;
        let mut copy = vec![0u8; CHUNK];
        chunks
            .map(|c| u32::from_le_bytes(frozen.chunk(c, &mut copy)[..4].try_into().unwrap()))
            .collect()
    }

    #[test]
    fn a_frozen_memory_reads_as_it_was_while_the_job_writes_it() {
        let budgets = budgets(MAPPINGS, COPIES_ANY);
        let mut a = job(&engine(), budgets);
        a.write(0, 1, 64);
        let all: Vec<usize> = (0..64).collect();
        let frozen = a.freeze(&all);
        let mut seen = read_all(&frozen, 0..32);
        // The job writes every chunk, half of them not read yet: those are
        // copied aside on the first write and read from the copy.
        a.write_adding(0, 1, 64, 1000);
        seen.extend(read_all(&frozen, 32..64));
        assert_eq!(seen, (1..=64).collect::<Vec<u32>>());
        drop(frozen);
        // Every chunk written since the freeze is known to the next snapshot.
        let changed = a.changed().unwrap();
        assert!((0..64).all(|c| changed.contains(c)));

        // Again, the snapshot's reads and the job's writes racing.
        let frozen = a.freeze(&all);
        let seen = std::thread::scope(|s| {
            let reader = s.spawn(|| read_all(&frozen, 0..64));
            for round in 0..20 {
                a.write_adding(0, 1, 64, 2000 + round);
            }
            reader.join().unwrap()
        });
        assert_eq!(seen, (1001..=1064).collect::<Vec<u32>>());
        drop(frozen);
        assert_eq!(a.mappings(), 1, "all written since: one writable mapping");
        assert_eq!(budgets.mappings.left(), MAPPINGS - 2);
    }

    #[test]
    fn past_its_budget_of_copies_a_job_waits_for_the_snapshot_to_read_what_it_writes() {
        let budgets = budgets(MAPPINGS, 2 * CHUNK as isize);
        let mut a = job(&engine(), budgets);
        a.write(0, 1, 8);
        let frozen = a.freeze(&(0..64).collect::<Vec<_>>());
        // Chunks 7 and 6 written before the snapshot reads anything: both
        // copied aside, and the budget is spent.
        a.write_adding(6, 1, 2, 100);
        assert_eq!(budgets.copies.left(), 0);
        let seen = std::thread::scope(|s| {
            let reader = s.spawn(|| read_all(&frozen, 0..8));
            // Chunks 5 down to 0: each write waits until the reader has
            // read its chunk, none is copied.
            a.write_adding(5, -1, 6, 200);
            reader.join().unwrap()
        });
        assert_eq!(seen, (1..=8).collect::<Vec<u32>>());
        assert_eq!(budgets.copies.lowest(), 0, "never more than the budget copied aside");
        drop(frozen);
        assert_eq!(budgets.copies.left(), 2 * CHUNK as isize, "the copies' bytes given back");
    }

    #[test]
    fn only_the_chunks_a_snapshot_reads_are_copied_aside() {
        let budgets = budgets(MAPPINGS, COPIES_ANY);
        let mut a = job(&engine(), budgets);
        a.write(0, 1, 8);
        let frozen = a.freeze(&[0, 1, 2, 3]);
        // The job writes the four chunks the snapshot takes from the last
        // one, then one it reads.
        a.write_adding(4, 1, 4, 100);
        assert_eq!(budgets.copies.lowest(), COPIES_ANY, "nothing copied for chunks not read");
        a.write_adding(2, 1, 1, 100);
        assert_eq!(budgets.copies.lowest(), COPIES_ANY - CHUNK as isize);
        assert_eq!(read_all(&frozen, 0..4), vec![1, 2, 3, 4]);
        drop(frozen);
        assert_eq!(budgets.copies.left(), COPIES_ANY);
    }
}
