//! What a job's store holds: its WASI context, its limits, its control and
//! I/O, and the name its sandbox has inside the guest.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::Result;
use wasi_common::WasiCtx;
use wasmtime::ResourceLimiter;

use crate::control::{Clock, Control};
use crate::imports::{ImportState, JobIo};
use crate::sandbox::Quota;

/// The name the guest sees for its sandbox: the root of its filesystem, so
/// that every guest runtime resolves paths into it. wasi-libc (C, Rust)
/// resolves a relative path against its working directory, `/` by default;
/// Go's wasip1 runtime joins it to `PWD` (else the first preopen's name) and
/// looks for a preopen whose name is a prefix of the result. A sandbox
/// preopened as `.` is found by wasi-libc but by no Go program, which then
/// fails every open with EBADF.
pub(crate) const SANDBOX_PREOPEN: &str = "/";

pub(crate) struct Limiter {
    pub(crate) max: u64,
    pub(crate) refused: Option<u64>,
    pub(crate) ctl: Arc<Control>,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, _cur: usize, desired: usize, _max: Option<usize>) -> Result<bool> {
        if desired as u64 > self.max {
            self.refused = Some(desired as u64);
            return Ok(false);
        }
        self.ctl.memory_bytes.store(desired as u64, Ordering::Relaxed);
        Ok(true)
    }
    fn table_growing(&mut self, _cur: usize, desired: usize, _max: Option<usize>) -> Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
    /// A module instrumented by `andes compile` has three memories (its
    /// own, the word the host sets to ask for a checkpoint, its checkpoint
    /// stack); more are refused at instantiation, each being a reservation
    /// of address space the host would keep.
    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
    /// One table, as compilers targeting wasm32-wasip1 make.
    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

/// Most memories a job's module may define.
pub(crate) const MAX_MEMORIES: usize = 3;
/// Most tables a job's module may define.
pub(crate) const MAX_TABLES: usize = 1;
/// Most elements a job's table may grow to.
pub(crate) const MAX_TABLE_ELEMENTS: usize = 1 << 20;

pub(crate) struct JobState {
    pub(crate) wasi: WasiCtx,
    pub(crate) limiter: Limiter,
    pub(crate) ctl: Arc<Control>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) io: Arc<JobIo>,
    /// An instrumented module whose poll word the job's [`Control`] sets
    /// (it has somewhere to put its snapshots): its yields are taken.
    pub(crate) polled: bool,
    /// The sandbox's quota (and its registry of open handles).
    pub(crate) quota: Arc<Quota>,
    /// A checkpoint was tried on this vacate already.
    pub(crate) vacate_checkpointed: bool,
    /// An unmetered job's link to its thread.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(crate) remote: Option<Arc<crate::preempt::Remote>>,
}

impl JobState {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(crate) fn remote(&self) -> Option<Arc<crate::preempt::Remote>> {
        self.remote.clone()
    }
}

impl ImportState for JobState {
    fn control(&self) -> &Control {
        &self.ctl
    }
    fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }
    fn io(&self) -> &Arc<JobIo> {
        &self.io
    }
}
