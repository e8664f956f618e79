//! The control surface the startd drives: suspend, resume, soft kill
//! (vacate) and hard kill, and the usage a running job publishes.
//!
//! A metered job runs as a future. Suspending it means that future is no
//! longer polled: the guest stops at its next fuel yield, keeps all its state
//! and uses no CPU. A hard kill drops the future, which cancels the guest at
//! once, even inside a blocking host call such as a sleep.
//!
//! An unmetered job (Linux on x86_64, see `starter/src/preempt.rs`) never yields on
//! its own: it runs on a thread of its own, which a suspension blocks where the
//! guest is and a hard kill traps, both by a signal; while the job waits in a
//! host call, its future is simply not polled, or dropped, as above. The
//! control surface and its guarantees are the same for both.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Time as the starter sees it. Production uses [`SystemClock`]; tests use a
/// virtual clock whose timers fire when the test advances it.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
    /// Seconds since the Unix epoch (for deadlines shown to guests).
    fn unix_now(&self) -> u64;
    /// Milliseconds since the Unix epoch (deferral times start on the second).
    fn unix_now_ms(&self) -> i64 {
        i64::try_from(self.unix_now()).unwrap_or(i64::MAX / 1000) * 1000
    }
    /// A future that completes at `deadline`.
    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// The real clock, with tokio timers.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn unix_now(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }
    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep_until(deadline.into()))
    }
    fn unix_now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// Usage of a running or finished job, in HTCondor's terms.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// CPU time spent running the guest, in seconds (`RemoteUserCpu`).
    pub remote_user_cpu: f64,
    /// CPU time the kernel spent for the guest (its WASI calls), in seconds
    /// (`RemoteSysCpu`).
    pub remote_sys_cpu: f64,
    /// Wall-clock time since the job started, suspensions included
    /// (`RemoteWallClockTime`), in seconds.
    pub remote_wall_clock_time: f64,
    /// Time spent suspended, in seconds (`CumulativeSuspensionTime`).
    pub cumulative_suspension_time: f64,
    /// Time the job was ready to run but waited for a CPU the host's other
    /// work held, in seconds; 0 where the host cannot tell (no HTCondor
    /// attribute: what tells a short job from one the host kept waiting).
    pub cpu_wait: f64,
    /// Linear memory, in KiB (`ImageSize`).
    pub image_size_kib: u64,
    /// Bytes the sandbox holds, in KiB (`DiskUsage`).
    pub disk_usage_kib: u64,
    /// Fuel consumed (`WasmFuelConsumed`); 0 when the job ran unmetered.
    pub fuel_consumed: u64,
    /// True when the job ran without fuel metering: nobody counted its fuel,
    /// so `WasmFuelConsumed` is not published for it.
    pub fuel_unmetered: bool,
    /// How many times a compiled job paused at a poll point for a
    /// checkpoint or a vacate.
    pub pauses: u64,
    /// Of those pauses, the 99th percentile of the time from the request
    /// (its poll word raised) to the job paused (its stack unwound), in
    /// microseconds; 0 without pauses.
    pub pause_p99_us: u64,
    /// The longest such time, in microseconds.
    pub pause_max_us: u64,
}

impl Usage {
    /// The memory attributes HTCondor keeps current for a running job:
    /// `ImageSize` and `ResidentSetSize` in KiB, `MemoryUsage` in MiB
    /// (rounded up, as condor_submit's `MemoryUsage` expression does). A
    /// Wasm job's memory is its linear memory, all of it the job's own, so
    /// its resident set is its image.
    pub fn memory_attrs(&self) -> [(&'static str, i64); 3] {
        let kib = self.image_size_kib.min(i64::MAX as u64) as i64;
        [("ImageSize", kib), ("ResidentSetSize", kib), ("MemoryUsage", (kib + 1023) / 1024)]
    }
}

#[derive(Debug, Default)]
struct CtlState {
    suspended: bool,
    suspended_since: Option<Instant>,
    suspended_total: Duration,
    vacate_deadline: Option<(Instant, u64)>,
    waker: Option<Waker>,
    started: Option<Instant>,
}

impl CtlState {
    /// Ends a suspension, accounting its time; false when not suspended.
    fn unsuspend(&mut self, clock: &dyn Clock) -> bool {
        if !self.suspended {
            return false;
        }
        self.suspended = false;
        if let Some(since) = self.suspended_since.take() {
            self.suspended_total += clock.now().saturating_duration_since(since);
        }
        true
    }
}

/// Shared between the starter running a job and whoever controls it.
#[derive(Debug, Default)]
pub struct Control {
    state: Mutex<CtlState>,
    changed: tokio::sync::Notify,
    killed: AtomicBool,
    vacate: AtomicBool,
    /// The job cannot hear a soft kill (see [`Control::set_hears_vacate`]).
    deaf: AtomicBool,
    running: AtomicBool,
    /// Called once, on the job's thread, just before its `_start` is entered.
    on_entered: Mutex<Option<EnteredHook>>,
    /// The running job's ad and log, once the starter has made them.
    io: Mutex<Option<Arc<crate::imports::JobIo>>>,
    /// CPU time in nanoseconds.
    cpu_ns: AtomicU64,
    /// The part of `cpu_ns` spent in the kernel for the job (`RemoteSysCpu`).
    sys_ns: AtomicU64,
    /// Time the job was ready to run but waited for a CPU, in nanoseconds.
    delay_ns: AtomicU64,
    pub(crate) memory_bytes: AtomicU64,
    pub(crate) disk_bytes: AtomicU64,
    pub(crate) fuel_consumed: AtomicU64,
    /// The DeferralTime the job waits for (Unix seconds), 0 once it began.
    deferred_until: std::sync::atomic::AtomicI64,
    /// True once the starter found the job need not wait for its
    /// DeferralTime, or its wait is over.
    deferral_over: AtomicBool,
    /// Notified when `deferral_over` becomes true.
    began: tokio::sync::Notify,
    /// The host asks the guest to checkpoint (the SDK's `checkpoint-requested`).
    ckpt_requested: AtomicBool,
    /// The guest's last `save`, and how many it made in this run.
    saved: Mutex<Option<Arc<[u8]>>>,
    saves: AtomicU64,
    saved_notify: tokio::sync::Notify,
    /// Set while a metered job's future is held back by a suspension.
    halted: AtomicBool,
    /// Set once the job runs unmetered: its fuel is not counted.
    unmetered: AtomicBool,
    /// An unmetered job's link to its thread, while it runs.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    remote: Mutex<Option<Arc<crate::preempt::Remote>>>,
    /// Starts the job's watchdog at the first vacate, for a job that runs
    /// without one until then ([`Control::arm_watch`]).
    watch: Mutex<Option<WatchStart>>,
    /// A compiled job's poll word, while its instance lives.
    poll: Mutex<Option<PollWord>>,
    /// When the poll word was raised, and how long the job took to pause.
    pauses: Mutex<Pauses>,
}

/// The times a compiled job took from a raised poll word to paused.
#[derive(Debug, Default)]
struct Pauses {
    raised_at: Option<std::time::Instant>,
    /// Up to [`Pauses::KEPT`] samples in microseconds (the first ones),
    /// kept sorted: a pause is rare, a usage report is not.
    samples_us: Vec<u64>,
    count: u64,
    max_us: u64,
}

impl Pauses {
    /// Samples kept for the percentile: a job that checkpoints for days
    /// keeps a bounded record.
    const KEPT: usize = 4096;

    /// Notes one pause of `us` microseconds.
    fn record(&mut self, us: u64) {
        self.count += 1;
        self.max_us = self.max_us.max(us);
        if self.samples_us.len() < Pauses::KEPT {
            let at = self.samples_us.partition_point(|&x| x <= us);
            self.samples_us.insert(at, us);
        }
    }

    fn p99_us(&self) -> u64 {
        match self.samples_us.len() {
            0 => 0,
            n => self.samples_us[(n * 99).div_ceil(100) - 1],
        }
    }
}

/// The word of a module instrumented by `andes compile` that asks it to
/// yield at its next checked loop header (`andes_compile::POLL_WORD` of its
/// poll memory): set from whichever thread controls the job, read by the
/// guest's plain loads. Being memory, not a global, it needs no access to the
/// store, so a compiled job runs without fuel or epoch checks.
#[derive(Debug)]
struct PollWord(std::ptr::NonNull<AtomicU32>);

// SAFETY: the word is only accessed atomically, and only while it is
// attached: `Control::attach_poll`'s caller keeps the memory alive and in
// place until `Control::detach_poll`, which takes the same lock.
unsafe impl Send for PollWord {}
// SAFETY: as for Send: every access is atomic and under the attach lock.
unsafe impl Sync for PollWord {}

/// What [`Control::on_entered`] calls.
struct EnteredHook(Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for EnteredHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnteredHook")
    }
}

/// Starts a job's watchdog ([`Control::arm_watch`]).
pub(crate) struct WatchStart(pub(crate) Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for WatchStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WatchStart")
    }
}

impl Control {
    /// A fresh control block.
    pub fn new() -> Arc<Control> {
        Arc::new(Control::default())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CtlState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Passes the wanted state on to an unmetered job's thread. Called with
    /// the state lock held (`s`), so that concurrent changes reach the job
    /// in the order they were made.
    fn sync_remote(&self, s: &CtlState) {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        {
            let remote = self.remote.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if let Some(r) = remote {
                use crate::preempt::{KILL, RUN, SUSPEND};
                let want = if self.is_killed() {
                    KILL
                } else if s.suspended && !self.checkpoint_requested() {
                    SUSPEND
                } else {
                    RUN
                };
                if r.request() != want {
                    r.set_request(want);
                }
            }
        }
        #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
        let _ = s;
    }

    /// Links an unmetered job's thread to this control block, and passes it
    /// what was asked before.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(crate) fn attach(&self, r: Arc<crate::preempt::Remote>) {
        let s = self.state();
        self.unmetered.store(true, Ordering::SeqCst);
        *self.remote.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        self.sync_remote(&s);
    }

    /// Ends the link made by [`Control::attach`], keeping the CPU time the
    /// job used.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(crate) fn detach(&self) {
        let _s = self.state();
        if let Some(r) = self.remote.lock().unwrap_or_else(|e| e.into_inner()).take() {
            self.cpu_ns.fetch_add(r.cpu_ns(), Ordering::Relaxed);
            self.sys_ns.fetch_add(r.sys_ns(), Ordering::Relaxed);
            self.delay_ns.fetch_add(r.run_delay_ns(), Ordering::Relaxed);
        }
    }

    /// Links a compiled job's poll word to this control block (a job whose
    /// snapshots go somewhere, so that a vacate asks it to yield too), and
    /// raises it if a checkpoint or a vacate is already asked for.
    ///
    /// # Safety
    ///
    /// `word` must point to 4 aligned bytes of a linear memory that stays
    /// alive and does not move until [`Control::detach_poll`] (a memory
    /// that cannot grow, of a live instance).
    pub(crate) unsafe fn attach_poll(&self, word: *mut u8) {
        let Some(word) = std::ptr::NonNull::new(word.cast::<AtomicU32>()) else { return };
        debug_assert!(word.as_ptr().is_aligned());
        *self.poll.lock().unwrap_or_else(|e| e.into_inner()) = Some(PollWord(word));
        self.raise_poll();
    }

    /// Ends the link made by [`Control::attach_poll`]: nothing touches the
    /// word after this returns.
    pub(crate) fn detach_poll(&self) {
        *self.poll.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Sets the poll word if the job should yield: a checkpoint or a vacate
    /// is asked for.
    fn raise_poll(&self) {
        let poll = self.poll.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(PollWord(word)) = &*poll
            && (self.checkpoint_requested() || self.vacate_requested())
        {
            let mut p = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
            p.raised_at.get_or_insert_with(std::time::Instant::now);
            // SAFETY: attached, so alive and in place (see `attach_poll`).
            unsafe { word.as_ref() }.store(1, Ordering::SeqCst);
        }
    }

    /// Notes that the job paused (its stack unwound) for the request that
    /// raised its poll word: the time it took is one of its pauses.
    pub(crate) fn note_paused(&self) {
        let mut p = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
        let Some(at) = p.raised_at.take() else { return };
        p.record(u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX));
    }

    /// Clears the poll word once the job has yielded (or found it need
    /// not), raising it again for a checkpoint still asked for, or a vacate
    /// the job has not yet answered with a snapshot (`vacate_answered`).
    /// Each request sets its flag before it raises the word, so one that
    /// lands while the job yields is seen here, after the clear, and not
    /// lost.
    pub(crate) fn lower_poll(&self, vacate_answered: bool) {
        {
            let poll = self.poll.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(PollWord(word)) = &*poll {
                self.pauses.lock().unwrap_or_else(|e| e.into_inner()).raised_at = None;
                // SAFETY: as in `raise_poll`.
                unsafe { word.as_ref() }.store(0, Ordering::SeqCst);
            }
        }
        if self.checkpoint_requested() || (self.vacate_requested() && !vacate_answered) {
            self.raise_poll();
        }
    }

    /// Suspends the job: it stops at its next yield and stays stopped.
    pub fn suspend(&self, clock: &dyn Clock) {
        let mut s = self.state();
        if !s.suspended {
            s.suspended = true;
            s.suspended_since = Some(clock.now());
        }
        self.sync_remote(&s);
    }

    /// Resumes a suspended job where it stopped.
    pub fn resume(&self, clock: &dyn Clock) {
        let mut s = self.state();
        if s.unsuspend(clock)
            && let Some(w) = s.waker.take()
        {
            w.wake();
        }
        self.sync_remote(&s);
    }

    /// True while suspended.
    pub fn is_suspended(&self) -> bool {
        self.state().suspended
    }

    /// True once a suspension has taken effect: the guest runs no code until
    /// it is resumed (it was stopped where it was, or its job is held back
    /// while it waits in a host call).
    pub fn is_stopped(&self) -> bool {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if let Some(r) = &*self.remote.lock().unwrap_or_else(|e| e.into_inner()) {
            return r.is_stopped();
        }
        self.halted.load(Ordering::SeqCst) && self.is_suspended()
    }

    /// Says whether the job can hear a soft kill: it imports the SDK's
    /// vacate or checkpoint calls, or checkpoints transparently. One that
    /// cannot is ended by the soft kill itself, as a plain program is by
    /// HTCondor's SIGTERM, instead of running out the grace; a vacate asked
    /// for before this was known is carried out now.
    pub fn set_hears_vacate(&self, hears: bool) {
        self.deaf.store(!hears, Ordering::SeqCst);
        if !hears && self.vacate_requested() {
            self.hard_kill();
        }
    }

    /// Asks the guest to vacate (soft kill); after `grace` it is hard-killed,
    /// or at once if it cannot hear it ([`Control::set_hears_vacate`]).
    pub fn soft_kill(&self, clock: &dyn Clock, grace: Duration) {
        let mut s = self.state();
        if s.vacate_deadline.is_none() {
            let deadline = clock.now() + grace;
            s.vacate_deadline = Some((deadline, clock.unix_now() + grace.as_secs()));
        }
        self.vacate.store(true, Ordering::SeqCst);
        self.raise_poll();
        let deaf = self.deaf.load(Ordering::SeqCst);
        // A suspended job must run to see the vacate; one that cannot hear it
        // is ended where it stopped, never run again.
        if !deaf {
            s.unsuspend(clock);
        }
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        self.sync_remote(&s);
        let watch = self.watch.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(s);
        if let Some(start) = watch {
            (start.0)();
        }
        self.changed.notify_one();
        if deaf {
            self.hard_kill();
        }
    }

    /// Leaves the start of the job's watchdog (which enforces the vacate
    /// grace) to the first [`Control::soft_kill`], so that a job nobody
    /// vacates runs without one. Hands `start` back when a vacate was
    /// already asked for: start the watchdog now.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(crate) fn arm_watch(&self, start: WatchStart) -> Result<(), WatchStart> {
        let s = self.state();
        if s.vacate_deadline.is_some() {
            return Err(start);
        }
        *self.watch.lock().unwrap_or_else(|e| e.into_inner()) = Some(start);
        Ok(())
    }

    /// Withdraws what [`Control::arm_watch`] left, once the job has ended.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(crate) fn disarm_watch(&self) {
        let _s = self.state();
        self.watch.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Kills the job now.
    pub fn hard_kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        let mut s = self.state();
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        self.sync_remote(&s);
        drop(s);
        self.changed.notify_one();
    }

    /// Completes when a vacate or kill was requested since the last call.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await
    }

    /// The DeferralTime the job is waiting for, if it is.
    pub fn deferred_until(&self) -> Option<i64> {
        match self.deferred_until.load(Ordering::SeqCst) {
            0 => None,
            t => Some(t),
        }
    }

    /// The starter's decision: the job waits until `Some(time)`, or (`None`)
    /// it need not wait or its wait is over.
    pub(crate) fn set_deferred(&self, until: Option<i64>) {
        self.deferred_until.store(until.unwrap_or(0), Ordering::SeqCst);
        if until.is_none() {
            self.deferral_over.store(true, Ordering::SeqCst);
            self.began.notify_waiters();
        }
    }

    /// Completes once the starter has found that the job need not wait for
    /// its DeferralTime, or its wait is over (it starts, or ends unrun).
    /// Before the starter has looked, the job is not taken to have begun.
    pub async fn begun(&self) {
        loop {
            let n = self.began.notified();
            if self.deferral_over.load(Ordering::SeqCst) {
                return;
            }
            n.await;
        }
    }

    /// Asks a cooperative guest to checkpoint: its `checkpoint-requested`
    /// is true until it next calls `save`.
    ///
    /// A module instrumented by `andes compile` takes a transparent
    /// checkpoint at its next yield point; a suspended one runs to that
    /// point, is captured, and stays suspended.
    pub fn request_checkpoint(&self) {
        self.ckpt_requested.store(true, Ordering::SeqCst);
        self.raise_poll();
        let mut s = self.state();
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        self.sync_remote(&s);
    }

    /// True while a checkpoint request is pending.
    pub fn checkpoint_requested(&self) -> bool {
        self.ckpt_requested.load(Ordering::SeqCst)
    }

    /// A transparent checkpoint was taken (or tried): the request is answered.
    pub fn checkpoint_taken(&self) {
        self.ckpt_requested.store(false, Ordering::SeqCst);
        self.sync_remote(&self.state());
    }

    /// Records the guest's `save`: it answers any pending request.
    pub fn record_save(&self, state: Arc<[u8]>) {
        *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = Some(state);
        self.saves.fetch_add(1, Ordering::SeqCst);
        self.ckpt_requested.store(false, Ordering::SeqCst);
        // A suspended job that ran only to save stops again.
        self.sync_remote(&self.state());
        self.saved_notify.notify_waiters();
    }

    /// How many times the guest saved in this run, and its last save.
    pub fn saved(&self) -> (u64, Option<Arc<[u8]>>) {
        let g = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        (self.saves.load(Ordering::SeqCst), g.clone())
    }

    /// Completes once the guest has saved more than `n` times in this run.
    pub async fn saved_beyond(&self, n: u64) {
        loop {
            let wait = self.saved_notify.notified();
            if self.saves.load(Ordering::SeqCst) > n {
                return;
            }
            wait.await;
        }
    }

    /// True once a hard kill was requested.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// True once a vacate was requested.
    pub fn vacate_requested(&self) -> bool {
        self.vacate.load(Ordering::SeqCst)
    }

    /// The vacate deadline as an instant and as Unix seconds.
    pub fn vacate_deadline(&self) -> Option<(Instant, u64)> {
        self.state().vacate_deadline
    }

    pub(crate) fn mark_running(&self) {
        // Marked running under the hook's lock: `on_entered` then either
        // leaves its hook before this takes it, or sees the job running.
        let hook = {
            let mut slot = self.on_entered.lock().unwrap_or_else(|e| e.into_inner());
            self.running.store(true, Ordering::SeqCst);
            slot.take()
        };
        if let Some(EnteredHook(hook)) = hook {
            hook();
        }
    }

    /// Calls `f` once, on the job's thread, when the guest's `_start` is
    /// about to be entered (compiled, instantiated and, for a resumed job,
    /// restored), before the guest's first instruction; at once if it
    /// already was. From then on a vacate finds the job's own state to save.
    pub fn on_entered(&self, f: impl FnOnce() + Send + 'static) {
        let mut slot = self.on_entered.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_running() {
            drop(slot);
            f();
        } else {
            *slot = Some(EnteredHook(Box::new(f)));
        }
    }

    /// True once the guest's `_start` has been entered.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    pub(crate) fn mark_started(&self, now: Instant) {
        self.state().started = Some(now);
    }

    pub(crate) fn attach_io(&self, io: Arc<crate::imports::JobIo>) {
        *self.io.lock().unwrap_or_else(|e| e.into_inner()) = Some(io);
    }

    /// The latest value of each attribute the guest has set in this run
    /// (`Progress`, `Chirp*`), in the order first set: what a host passes on
    /// with its periodic updates, as HTCondor's starter passes on a job's
    /// chirped attributes while it runs; at most
    /// [`crate::imports::MAX_LIVE_BYTES`] of them, the rest at its end. A
    /// look: nothing is taken.
    pub fn guest_attrs(&self) -> Vec<(String, classad::Expr)> {
        let io = self.io.lock().unwrap_or_else(|e| e.into_inner()).clone();
        io.map(|io| io.pending_updates()).unwrap_or_default()
    }

    /// The job's usage so far.
    pub fn usage(&self, clock: &dyn Clock) -> Usage {
        let s = self.state();
        let now = clock.now();
        let mut suspended = s.suspended_total;
        if let Some(since) = s.suspended_since {
            suspended += now.saturating_duration_since(since);
        }
        #[allow(unused_mut)]
        let mut cpu_ns = self.cpu_ns.load(Ordering::Relaxed);
        #[allow(unused_mut)]
        let mut sys_ns = self.sys_ns.load(Ordering::Relaxed);
        #[allow(unused_mut)]
        let mut delay_ns = self.delay_ns.load(Ordering::Relaxed);
        // An unmetered job's CPU time is read live from its thread's clock
        // (its system share once its run on the thread is over).
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if let Some(r) = &*self.remote.lock().unwrap_or_else(|e| e.into_inner()) {
            cpu_ns += r.cpu_ns();
            sys_ns += r.sys_ns();
            delay_ns += r.run_delay_ns();
        }
        let sys_ns = sys_ns.min(cpu_ns);
        let pauses = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
        Usage {
            remote_user_cpu: (cpu_ns - sys_ns) as f64 / 1e9,
            remote_sys_cpu: sys_ns as f64 / 1e9,
            remote_wall_clock_time: s
                .started
                .map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64()),
            cumulative_suspension_time: suspended.as_secs_f64(),
            cpu_wait: delay_ns as f64 / 1e9,
            image_size_kib: self.memory_bytes.load(Ordering::Relaxed).div_ceil(1024),
            disk_usage_kib: self.disk_bytes.load(Ordering::Relaxed).div_ceil(1024),
            fuel_consumed: self.fuel_consumed.load(Ordering::Relaxed),
            fuel_unmetered: self.unmetered.load(Ordering::SeqCst),
            pauses: pauses.count,
            pause_p99_us: pauses.p99_us(),
            pause_max_us: pauses.max_us,
        }
    }
}

/// How a controlled run stopped before the guest finished.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stopped {
    Killed,
}

/// Drives the guest's future under a [`Control`]: not polled while
/// suspended (unless a checkpoint is asked for: the guest must run to its
/// next yield point to be captured), dropped when killed, with the CPU time
/// of each poll counted.
pub(crate) struct Controlled<F> {
    pub(crate) inner: Pin<Box<F>>,
    pub(crate) ctl: Arc<Control>,
    /// The job's hold on the epoch ticker, taken at its first yield.
    pub(crate) ticks: crate::ticker::LazyTicks,
}

impl<F: Future> Future for Controlled<F> {
    type Output = Result<F::Output, Stopped>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.ctl.is_killed() {
            return Poll::Ready(Err(Stopped::Killed));
        }
        {
            let mut s = self.ctl.state();
            if s.suspended && !self.ctl.checkpoint_requested() {
                s.waker = Some(cx.waker().clone());
                self.ctl.halted.store(true, Ordering::SeqCst);
                return Poll::Pending;
            }
            s.waker = Some(cx.waker().clone());
            self.ctl.halted.store(false, Ordering::SeqCst);
        }
        let (t0, s0) = (crate::cputime::thread_cpu_ns(), crate::cputime::thread_sys_ns());
        let d0 = crate::cputime::thread_run_delay_ns();
        let r = self.inner.as_mut().poll(cx);
        let spent = crate::cputime::thread_cpu_ns().saturating_sub(t0);
        let sys = crate::cputime::thread_sys_ns().saturating_sub(s0);
        let delay = crate::cputime::thread_run_delay_ns().saturating_sub(d0);
        self.ctl.cpu_ns.fetch_add(spent, Ordering::Relaxed);
        self.ctl.sys_ns.fetch_add(sys, Ordering::Relaxed);
        self.ctl.delay_ns.fetch_add(delay, Ordering::Relaxed);
        match r {
            Poll::Ready(v) => Poll::Ready(Ok(v)),
            Poll::Pending => {
                self.ticks.arm();
                Poll::Pending
            }
        }
    }
}

/// A clock that moves only when told to: for tests of deadlines, grace
/// periods and limits, which then take microseconds instead of minutes.
#[derive(Debug)]
pub struct VirtualClock {
    base: Instant,
    base_unix: u64,
    state: Mutex<(Duration, Vec<(Instant, Waker)>)>,
}

impl VirtualClock {
    /// A virtual clock at the real current time.
    pub fn new() -> Arc<VirtualClock> {
        Arc::new(VirtualClock {
            base: Instant::now(),
            base_unix: SystemClock.unix_now(),
            state: Mutex::new((Duration::ZERO, Vec::new())),
        })
    }

    /// Moves time forward, firing the timers that come due.
    pub fn advance(&self, by: Duration) {
        let due: Vec<Waker> = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.0 += by;
            let now = self.base + s.0;
            let (due, keep): (Vec<_>, Vec<_>) = s.1.drain(..).partition(|(d, _)| *d <= now);
            s.1 = keep;
            due.into_iter().map(|(_, w)| w).collect()
        };
        for w in due {
            w.wake();
        }
    }
}

struct VirtualSleep {
    clock: Arc<VirtualClock>,
    deadline: Instant,
}

impl Future for VirtualSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.clock.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.clock.base + s.0 >= self.deadline {
            Poll::Ready(())
        } else {
            s.1.push((self.deadline, cx.waker().clone()));
            Poll::Pending
        }
    }
}

impl Clock for Arc<VirtualClock> {
    fn now(&self) -> Instant {
        self.base + self.state.lock().unwrap_or_else(|e| e.into_inner()).0
    }
    fn unix_now(&self) -> u64 {
        self.base_unix + self.state.lock().unwrap_or_else(|e| e.into_inner()).0.as_secs()
    }
    fn unix_now_ms(&self) -> i64 {
        let elapsed = self.state.lock().unwrap_or_else(|e| e.into_inner()).0;
        self.base_unix as i64 * 1000 + elapsed.as_millis() as i64
    }
    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(VirtualSleep { clock: self.clock_arc(), deadline })
    }
}

impl VirtualClock {
    fn clock_arc(self: &Arc<Self>) -> Arc<VirtualClock> {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::{Control, Pauses};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A vacate asked for while the job yields for something else (a
    /// periodic checkpoint's rewind, or a poll it found it need not answer)
    /// keeps the poll word raised when the yield lowers it, so the job
    /// still stops; once answered with a snapshot, it is lowered.
    #[test]
    fn a_vacate_asked_for_during_a_yield_is_not_lowered_with_it() {
        let word = AtomicU32::new(0);
        let ctl = Control::new();
        // SAFETY: `word` outlives the link (detached below).
        unsafe { ctl.attach_poll(word.as_ptr().cast()) };
        assert_eq!(word.load(Ordering::SeqCst), 0);
        ctl.soft_kill(&super::VirtualClock::new(), std::time::Duration::from_secs(60));
        assert_eq!(word.load(Ordering::SeqCst), 1);
        ctl.lower_poll(false);
        assert_eq!(word.load(Ordering::SeqCst), 1, "the vacate was lost");
        ctl.lower_poll(true);
        assert_eq!(word.load(Ordering::SeqCst), 0);
        ctl.detach_poll();
    }

    /// Samples noted in any order give the 99th percentile of the sorted
    /// record (the nearest-rank definition) and their maximum.
    #[test]
    fn pause_percentile_is_the_nearest_rank_of_the_samples_in_any_order() {
        let mut p = Pauses::default();
        assert_eq!(p.p99_us(), 0);
        // 1..=200 in a scrambled order: the 198th smallest is the p99.
        for i in 0..200u64 {
            p.record((i * 73) % 200 + 1);
        }
        assert_eq!((p.count, p.max_us, p.p99_us()), (200, 200, 198));
    }
}
