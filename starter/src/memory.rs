//! Linear memories and async stacks that a job leaves behind, kept for the
//! next job (Linux).
//!
//! wasmtime's pooling allocator resets a freed linear memory with
//! `madvise(MADV_DONTNEED)`, and the next job's first write to each page
//! faults it in again (a copy of the module's data image, or a zeroed page).
//! In a process whose threads run on several CPUs, that `madvise` and each
//! copy-on-write fault end in a TLB shootdown: an interrupt to every other
//! CPU the process runs on. A short job touches a few dozen pages; the
//! faults, the `madvise` and the interrupts were a fifth of a personal
//! pool's CPU at 2 slots (journal 2026-12-07-benchmarks).
//!
//! Here the engine's memories come from [`Reuse`]. When a memory is freed
//! (its store dropped) the kernel is asked which of its pages are there
//! (`/proc/self/pagemap`: present, or swapped out), those are zeroed in
//! place and kept mapped and writable, and the memory goes on a free list
//! for the next instance: its data segments are copied in (no
//! copy-on-write image) onto pages already there, and nothing faults or
//! interrupts another CPU. Whatever the kernel cannot account for is given
//! back as before: a memory whose pages cannot be listed, one that used
//! more than [`KEEP_PER_MEMORY`] bytes, or one whose pages would take what
//! the free list keeps past [`KEEP_TOTAL`], one budget for the process.
//!
//! # What a job can see
//!
//! A memory handed out is zero everywhere, as a new linear memory must be:
//! every page of it that could hold a byte is either one the kernel lists
//! as present or swapped (zeroed here, with `write_bytes`) or one it does
//! not (given back with `MADV_DONTNEED`, or never touched: the kernel maps
//! zeros). Only the first `accessible` bytes are readable and writable;
//! the rest of the reservation and a guard on each side stay `PROT_NONE`,
//! so the compiled code's elided bounds checks hold as with wasmtime's own
//! memories. A region shrunk for a smaller memory gives back the pages it
//! no longer lets anyone reach before it is protected.
//!
//! Stacks (wasmtime's fibers, one per call into the guest) are kept too,
//! as wasmtime's pool keeps them, without zeroing: wasm cannot read the
//! native stack.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{Result, bail};
use wasmtime::{LinearMemory, MemoryCreator, MemoryType, StackCreator, StackMemory};

/// Most bytes of a freed memory zeroed in place and kept; a memory that
/// touched more is given back to the kernel whole.
pub(crate) const KEEP_PER_MEMORY: usize = 4 << 20;

/// Most bytes all free memories of the process keep resident, together.
pub(crate) const KEEP_TOTAL: usize = 256 << 20;

/// A freed memory larger than this is given back without listing its
/// pages (listing 64 MiB reads 128 KiB of page map).
const SCAN_LIMIT: usize = 64 << 20;

/// Free memories and free stacks kept, each.
const MAX_FREE: usize = 4096;

/// The guard page(s) below a stack.
const STACK_GUARD: usize = 64 << 10;

/// The host's page size.
fn page() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(rustix::param::page_size)
}

fn round_up(n: usize) -> usize {
    n.div_ceil(page()) * page()
}

/// The process's page map, if it can be read.
fn pagemap() -> Option<&'static File> {
    static MAP: OnceLock<Option<File>> = OnceLock::new();
    MAP.get_or_init(|| File::open("/proc/self/pagemap").ok()).as_ref()
}

/// A page map entry's bits: the page is present, or swapped out.
const PM_PRESENT: u64 = 1 << 63;
const PM_SWAPPED: u64 = 1 << 62;

/// One mapping: `len` bytes from `start`, unmapped when dropped.
struct Mapping {
    start: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by whoever holds the value;
// the pointer is only an address.
unsafe impl Send for Mapping {}
// SAFETY: as for Send: shared references only read the address.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `len` bytes of inaccessible, unreserved address space.
    fn reserve(len: usize) -> std::io::Result<Mapping> {
        // SAFETY: a new anonymous mapping, at an address the kernel chooses.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping { start: p.cast(), len })
    }

    /// Sets the protection of `at..at + len` (offsets into the mapping).
    fn protect(&self, at: usize, len: usize, writable: bool) -> std::io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        assert!(at + len <= self.len);
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_NONE };
        // SAFETY: within this mapping, which nothing else uses while it is
        // being changed (its owner holds it).
        match unsafe { libc::mprotect(self.start.add(at).cast(), len, prot) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }

    /// Gives `at..at + len` back to the kernel: it reads as zeros after.
    fn discard(&self, at: usize, len: usize) -> std::io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        assert!(at + len <= self.len);
        // SAFETY: within this mapping; a private anonymous mapping's pages
        // read as zeros after MADV_DONTNEED.
        match unsafe { libc::madvise(self.start.add(at).cast(), len, libc::MADV_DONTNEED) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `reserve`, which nothing uses any more.
        unsafe { libc::munmap(self.start.cast(), self.len) };
    }
}

/// A linear memory's region: a guard, the reservation, a guard.
struct Region {
    map: Mapping,
    /// The guard before the memory (and after it).
    guard: usize,
    /// Bytes the memory may grow to without moving.
    reserved: usize,
    /// Bytes from the base that are readable and writable (page multiple).
    accessible: usize,
    /// Bytes of the region resident and zero, counted in [`Reuse`]'s total
    /// while the region is free.
    kept: usize,
}

impl Region {
    fn new(reserved: usize, guard: usize) -> std::io::Result<Region> {
        let len = reserved
            .checked_add(2 * guard)
            .ok_or_else(|| std::io::Error::other("memory reservation too large"))?;
        Ok(Region { map: Mapping::reserve(len)?, guard, reserved, accessible: 0, kept: 0 })
    }

    fn base(&self) -> *mut u8 {
        // SAFETY: the guard lies within the mapping.
        unsafe { self.map.start.add(self.guard) }
    }

    /// Makes the first `bytes` (page multiple) accessible: grows by
    /// protection, or shrinks by giving back what is no longer reachable,
    /// then protecting it.
    fn set_accessible(&mut self, bytes: usize) -> std::io::Result<()> {
        if bytes > self.accessible {
            self.map.protect(self.guard + self.accessible, bytes - self.accessible, true)?;
        } else if bytes < self.accessible {
            self.map.discard(self.guard + bytes, self.accessible - bytes)?;
            self.map.protect(self.guard + bytes, self.accessible - bytes, false)?;
        }
        self.accessible = bytes;
        Ok(())
    }

    /// Zeroes every page of the accessible bytes: in place when the page
    /// map lists few enough pages there, else by giving them all back.
    /// Returns the bytes kept resident (zero), or an error when the region
    /// cannot be trusted to be zero (it must not be used again).
    fn clear(&mut self, budget: &AtomicUsize) -> std::io::Result<usize> {
        let acc = self.accessible;
        if acc == 0 {
            return Ok(0);
        }
        // A write tracker protects pages of a memory and makes them all
        // writable again before its store goes; a region is zeroed only
        // once it is sure of that (an mprotect that changes nothing costs
        // no TLB flush).
        self.map.protect(self.guard, acc, true)?;
        if let Some(runs) = self.touched(acc) {
            let bytes: usize = runs.iter().map(|r| r.len()).sum();
            let fits = bytes <= KEEP_PER_MEMORY
                && budget
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |k| {
                        (k + bytes <= KEEP_TOTAL).then_some(k + bytes)
                    })
                    .is_ok();
            if fits {
                for r in runs {
                    // SAFETY: within the accessible (writable) bytes of a
                    // region nothing else uses.
                    unsafe { std::ptr::write_bytes(self.base().add(r.start), 0, r.len()) };
                }
                return Ok(bytes);
            }
        }
        self.map.discard(self.guard, acc)?;
        Ok(0)
    }

    /// The byte ranges (from the base, page multiples) of the first `acc`
    /// bytes whose pages are present or swapped out; `None` when the page
    /// map cannot say, or the memory is too large to ask about.
    fn touched(&self, acc: usize) -> Option<Vec<Range<usize>>> {
        if acc > SCAN_LIMIT {
            return None;
        }
        let map = pagemap()?;
        let pages = acc / page();
        let mut raw = vec![0u8; pages * 8];
        let first = self.base() as usize / page();
        map.read_exact_at(&mut raw, (first * 8) as u64).ok()?;
        let mut runs: Vec<Range<usize>> = Vec::new();
        for (i, e) in raw.chunks_exact(8).enumerate() {
            let e = u64::from_ne_bytes(e.try_into().expect("8 bytes"));
            if e & (PM_PRESENT | PM_SWAPPED) == 0 {
                continue;
            }
            let at = i * page();
            match runs.last_mut() {
                Some(r) if r.end == at => r.end = at + page(),
                _ => runs.push(at..at + page()),
            }
        }
        Some(runs)
    }
}

/// The engine's memory and stack creator: regions kept for the next
/// instance (see the module's documentation).
#[derive(Default)]
pub(crate) struct Reuse {
    memories: Mutex<Vec<Region>>,
    stacks: Mutex<Vec<Mapping>>,
    /// Bytes the free regions keep resident.
    kept: AtomicUsize,
}

impl Reuse {
    /// The process's one set of free lists, shared by every engine.
    pub(crate) fn process() -> Arc<Reuse> {
        static REUSE: OnceLock<Arc<Reuse>> = OnceLock::new();
        REUSE.get_or_init(|| Arc::new(Reuse::default())).clone()
    }

    /// A region for a memory of `reserved` bytes and `guard` bytes of
    /// guard, `bytes` (page multiple) of it accessible: a free one (one
    /// already of that size first), or a new one.
    fn take(&self, reserved: usize, guard: usize, bytes: usize) -> std::io::Result<Region> {
        let found = {
            let mut free = self.memories.lock().unwrap_or_else(|e| e.into_inner());
            let fits = |r: &Region| r.reserved == reserved && r.guard == guard;
            let at = free
                .iter()
                .rposition(|r| fits(r) && r.accessible == bytes)
                .or_else(|| free.iter().rposition(fits));
            at.map(|i| free.swap_remove(i))
        };
        let mut region = match found {
            Some(r) => {
                self.kept.fetch_sub(r.kept, Ordering::AcqRel);
                r
            }
            None => Region::new(reserved, guard)?,
        };
        region.kept = 0;
        region.set_accessible(bytes)?;
        Ok(region)
    }

    /// Takes a freed memory's region back: zeroed and kept, or unmapped.
    fn give(&self, mut region: Region) {
        match region.clear(&self.kept) {
            Ok(kept) => region.kept = kept,
            Err(e) => {
                tracing::warn!("a freed linear memory could not be reset, so it is unmapped: {e}");
                return;
            }
        }
        let mut free = self.memories.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < MAX_FREE {
            free.push(region);
        } else {
            drop(free);
            self.kept.fetch_sub(region.kept, Ordering::AcqRel);
        }
    }
}

/// A linear memory in a [`Region`], given back to its [`Reuse`] when
/// wasmtime drops it.
struct Memory {
    region: Option<Region>,
    size: usize,
    reuse: Arc<Reuse>,
}

impl Memory {
    fn region(&self) -> &Region {
        self.region.as_ref().expect("a live memory has its region")
    }
}

// SAFETY: `as_ptr` is the region's base, which never moves; `grow_to` makes
// the new bytes accessible (zero) before saying so; `byte_capacity` is the
// reservation, after which a guard follows.
unsafe impl LinearMemory for Memory {
    fn byte_size(&self) -> usize {
        self.size
    }

    fn byte_capacity(&self) -> usize {
        self.region().reserved
    }

    fn grow_to(&mut self, new_size: usize) -> Result<()> {
        let region = self.region.as_mut().expect("a live memory has its region");
        if new_size > region.reserved {
            bail!("a linear memory cannot grow past its reservation ({} bytes)", region.reserved);
        }
        let bytes = round_up(new_size);
        if bytes > region.accessible {
            region.set_accessible(bytes)?;
        }
        self.size = new_size;
        Ok(())
    }

    fn as_ptr(&self) -> *mut u8 {
        self.region().base()
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        if let Some(r) = self.region.take() {
            self.reuse.give(r);
        }
    }
}

/// The memory creator handed to the engine: [`Reuse`] behind an `Arc`.
pub(crate) struct Memories(pub(crate) Arc<Reuse>);

// SAFETY: each memory is a region of its own, zero-filled, with a guard of
// `guard_size_in_bytes` after the reservation (and one before it).
unsafe impl MemoryCreator for Memories {
    fn new_memory(
        &self,
        _ty: MemoryType,
        minimum: usize,
        _maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        let reserved = round_up(reserved_size_in_bytes.unwrap_or(minimum).max(minimum));
        let guard = round_up(guard_size_in_bytes);
        let region = self
            .0
            .take(reserved, guard, round_up(minimum))
            .map_err(|e| format!("making a linear memory of {minimum} bytes: {e}"))?;
        Ok(Box::new(Memory { region: Some(region), size: minimum, reuse: self.0.clone() }))
    }
}

/// A fiber stack: a guard, then the stack; given back when dropped.
struct Stack {
    map: Option<Mapping>,
    reuse: Arc<Reuse>,
}

impl Stack {
    fn map(&self) -> &Mapping {
        self.map.as_ref().expect("a live stack has its mapping")
    }
}

// SAFETY: the range is page aligned, writable, and below it lies a guard
// of `STACK_GUARD` bytes that is `PROT_NONE`.
unsafe impl StackMemory for Stack {
    fn top(&self) -> *mut u8 {
        let m = self.map();
        // SAFETY: the end of the mapping.
        unsafe { m.start.add(m.len) }
    }

    fn range(&self) -> Range<usize> {
        let m = self.map();
        (m.start as usize + STACK_GUARD)..(m.start as usize + m.len)
    }

    fn guard_range(&self) -> Range<*mut u8> {
        let m = self.map();
        // SAFETY: the guard lies within the mapping.
        m.start..unsafe { m.start.add(STACK_GUARD) }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(m) = self.map.take() {
            let mut free = self.reuse.stacks.lock().unwrap_or_else(|e| e.into_inner());
            if free.len() < MAX_FREE {
                free.push(m);
            }
        }
    }
}

// SAFETY: each stack is a mapping of its own, page aligned, with a guard.
unsafe impl StackCreator for Memories {
    fn new_stack(&self, size: usize, zeroed: bool) -> Result<Box<dyn StackMemory>> {
        let len = round_up(size) + STACK_GUARD;
        let found = {
            let mut free = self.0.stacks.lock().unwrap_or_else(|e| e.into_inner());
            free.iter().rposition(|m| m.len == len).map(|i| free.swap_remove(i))
        };
        let map = match found {
            Some(m) => {
                if zeroed {
                    m.discard(STACK_GUARD, len - STACK_GUARD)?;
                }
                m
            }
            None => {
                let m = Mapping::reserve(len)?;
                m.protect(STACK_GUARD, len - STACK_GUARD, true)?;
                m
            }
        };
        Ok(Box::new(Stack { map: Some(map), reuse: self.0.clone() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memory of `minimum` bytes in a 1 GiB reservation, as the engine
    /// would make it.
    fn memory(reuse: &Arc<Reuse>, minimum: usize) -> Memory {
        let region = reuse.take(1 << 30, 1 << 20, round_up(minimum)).unwrap();
        Memory { region: Some(region), size: minimum, reuse: reuse.clone() }
    }

    fn bytes(m: &mut Memory) -> &mut [u8] {
        // SAFETY: the memory's accessible bytes, used by this test alone.
        unsafe { std::slice::from_raw_parts_mut(m.as_ptr(), m.byte_size()) }
    }

    #[test]
    fn a_memory_used_before_comes_back_zero_and_resident() {
        let reuse = Arc::new(Reuse::default());
        let mut m = memory(&reuse, 1 << 20);
        let base = m.as_ptr();
        let b = bytes(&mut m);
        b[0] = 1;
        b[5000] = 2;
        b[(1 << 20) - 1] = 3;
        drop(m);
        assert_eq!(reuse.kept.load(Ordering::Acquire), 3 * page(), "three pages kept");
        let mut m = memory(&reuse, 1 << 20);
        assert_eq!(m.as_ptr(), base, "the same region, reused");
        assert_eq!(reuse.kept.load(Ordering::Acquire), 0);
        assert!(bytes(&mut m).iter().all(|&x| x == 0), "every byte zero");
    }

    #[test]
    fn a_grown_then_smaller_memory_is_zero_and_its_old_bytes_unreachable() {
        let reuse = Arc::new(Reuse::default());
        let mut m = memory(&reuse, 64 << 10);
        m.grow_to(8 << 20).unwrap();
        let b = bytes(&mut m);
        b.fill(7); // more than KEEP_PER_MEMORY: given back to the kernel
        drop(m);
        assert_eq!(reuse.kept.load(Ordering::Acquire), 0);
        let mut m = memory(&reuse, 64 << 10);
        assert_eq!(reuse.memories.lock().unwrap().len(), 0);
        assert_eq!(m.region().accessible, 64 << 10, "only the new minimum is accessible");
        m.grow_to(8 << 20).unwrap();
        assert!(bytes(&mut m).iter().all(|&x| x == 0), "every byte zero after growing again");
        assert!(m.grow_to((1 << 30) + 1).is_err(), "no growth past the reservation");
    }

    #[test]
    fn stacks_are_reused_with_their_guard() {
        let reuse = Arc::new(Reuse::default());
        let c = Memories(reuse.clone());
        let s = c.new_stack(1 << 20, false).unwrap();
        let top = s.top();
        assert_eq!(s.range().end, top as usize);
        assert_eq!(s.range().len(), 1 << 20);
        assert_eq!(s.guard_range().end as usize, s.range().start);
        drop(s);
        let s = c.new_stack(1 << 20, false).unwrap();
        assert_eq!(s.top(), top, "the same stack, reused");
    }
}
