//! The starter: runs one job's module in its sandbox, under the limits its
//! ad sets, and says how it ended in HTCondor's terms.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use classad::{ClassAd, Value};
use wasmtime::{Linker, Store, Trap, UpdateDeadline};

use crate::control::{Clock, Control, Controlled, Stopped, Usage};
use crate::engine::Host;
use crate::imports::{self, JobIo};
use crate::sandbox::{Exceeded, Quota, QuotaDir, QuotaFile, sandbox_usage};
use crate::state::{JobState, Limiter, SANDBOX_PREOPEN};
use crate::transparent::{self, Transparent};

/// HTCondor's HoldReasonCode for a job the starter could not start.
pub const HOLD_FAILED_TO_START: i32 = 6;
/// HTCondor's HoldReasonCode: the output file could not be opened.
pub const HOLD_OPEN_OUTPUT: i32 = 7;
/// HTCondor's HoldReasonCode: the input file could not be opened.
pub const HOLD_OPEN_INPUT: i32 = 8;
/// HTCondor's HoldReasonCode: an output file exceeded its size limit
/// (`MaxTransferOutputSizeExceeded`).
pub const HOLD_OUTPUT_TOO_BIG: i32 = 33;
/// HTCondor's HoldReasonCode: memory usage exceeded the limit (`JobOutOfResources`).
pub const HOLD_MEMORY: i32 = 34;
/// HTCondor's HoldReasonCode: `allowed_execute_duration` was exceeded.
pub const HOLD_EXECUTE_DURATION: i32 = 47;
/// andes's HoldReasonCode: the job used all its fuel (`MaxFuel`).
pub const HOLD_FUEL: i32 = 101;
/// andes's HoldReasonCode: the sandbox outgrew `RequestDisk`.
pub const HOLD_DISK: i32 = 102;
/// HTCondor's HoldReasonCode 20 (`MissedDeferredExecutionTime`): the job
/// arrived after its DeferralTime and its DeferralWindow.
pub const HOLD_MISSED_DEFERRAL: i32 = 20;
/// HTCondor's HoldReasonCode 36 (`FailedToCheckpoint`): a transparent
/// checkpoint failed for good. Subcode 1: the snapshot to resume from was
/// refused (corrupt, untrusted, of another module, from another
/// instrumentation); 2: the job's call stack outgrew its checkpoint stack.
pub const HOLD_CHECKPOINT: i32 = 36;

/// What the starter does with a job's `DeferralTime`, by the host's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deferral {
    /// No deferral, or it is time: start now.
    Now,
    /// Wait until this Unix second, then start.
    Wait(i64),
    /// Too late: the job goes on hold.
    Missed {
        /// DeferralTime.
        time: i64,
        /// Seconds past it.
        late: i64,
        /// DeferralWindow.
        window: i64,
    },
    /// DeferralTime is not a number.
    Invalid(String),
}

impl Deferral {
    /// Decides for `ad` at `now_ms` (Unix milliseconds): `DeferralTime` and
    /// `DeferralWindow` are evaluated with `CurrentTime` the host's now; a job
    /// up to `DeferralWindow` seconds late starts at once (the manual).
    pub fn decide(ad: &ClassAd, now_ms: i64) -> Deferral {
        let Some(expr) = ad.get(classad::name!("DeferralTime")) else { return Deferral::Now };
        let now = now_ms.div_euclid(1000);
        let mut ev = classad::Evaluator::with_options(classad::EvalOptions {
            now: Some(now),
            ..Default::default()
        });
        let num = |v: Value| match v {
            Value::Int(i) => Some(i),
            Value::Real(r) if r.is_finite() => Some(r as i64),
            _ => None,
        };
        let time = match num(ev.eval(expr, Some(ad), None)) {
            Some(t) => t,
            None => {
                let v = ev.eval(expr, Some(ad), None);
                return Deferral::Invalid(format!("DeferralTime `{expr}` is {v}, not a time"));
            }
        };
        if time.saturating_mul(1000) > now_ms {
            return Deferral::Wait(time);
        }
        let window = match ad.get(classad::name!("DeferralWindow")) {
            Some(e) => num(ev.eval(e, Some(ad), None)).unwrap_or(0).max(0),
            None => 0,
        };
        let late = now - time;
        if late <= window { Deferral::Now } else { Deferral::Missed { time, late, window } }
    }
}

/// The limits a job runs under. All are enforced by the runtime.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Linear memory cap, in bytes (`RequestMemory`, MiB in the ad).
    pub memory_bytes: u64,
    /// Wall-clock limit (`AllowedExecuteDuration`, seconds in the ad).
    pub execute_duration: Option<Duration>,
    /// Fuel limit (`MaxFuel`).
    pub fuel: Option<u64>,
    /// Bytes the sandbox may hold (`RequestDisk`, KiB in the ad).
    pub disk_bytes: u64,
    /// Bytes each of stdout and stderr may hold (`MaxOutputBytes`).
    pub output_bytes: u64,
    /// Files and directories the job may have open at once.
    pub max_open_files: u32,
    /// Files, directories and links the sandbox may hold.
    pub max_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 128 << 20,
            execute_duration: None,
            fuel: None,
            disk_bytes: 1 << 30,
            output_bytes: 256 << 20,
            max_open_files: 256,
            max_entries: crate::sandbox::DEFAULT_MAX_ENTRIES,
        }
    }
}

fn ad_int<N: classad::NameRef + ?Sized>(ad: &ClassAd, name: &N) -> Option<i64> {
    match ad.eval_attr(name) {
        Value::Int(i) => Some(i),
        Value::Real(r) if r.is_finite() => Some(r as i64),
        _ => None,
    }
}

fn literal_int(ad: &ClassAd, name: &str) -> Option<i64> {
    match ad.get(name)?.as_literal()? {
        Value::Int(i) => Some(*i),
        Value::Real(r) if r.is_finite() => Some(*r as i64),
        _ => None,
    }
}

impl Limits {
    /// The limits of a job running in a slot of `slot_memory_mb` MiB and
    /// `slot_disk_kib` KiB: each is the smaller of what the job asked (a
    /// RequestMemory or RequestDisk the user gave as a number) and what the
    /// slot has, so an ad edited to ask for more than its slot gets the slot's;
    /// HTCondor's default estimates (`ifthenelse(MemoryUsage ...)`,
    /// `DiskUsage`), which only size the match, leave the job its slot's.
    pub fn in_slot(
        ad: &ClassAd,
        slot_memory_mb: Option<i64>,
        slot_disk_kib: Option<i64>,
    ) -> Limits {
        let mut l = Limits::from_ad(ad);
        if let Some(mb) = slot_memory_mb.filter(|m| *m > 0) {
            let slot = (mb as u64).saturating_mul(1 << 20);
            l.memory_bytes = match literal_int(ad, "RequestMemory") {
                Some(_) => l.memory_bytes.min(slot),
                None => slot,
            };
        }
        if let Some(kib) = slot_disk_kib.filter(|k| *k > 0) {
            let slot = (kib as u64).saturating_mul(1024);
            l.disk_bytes = match literal_int(ad, "RequestDisk") {
                Some(_) => l.disk_bytes.min(slot),
                None => slot,
            };
        }
        l
    }

    /// The limits a job ad asks for, with defaults for what it leaves out.
    pub fn from_ad(ad: &ClassAd) -> Limits {
        let d = Limits::default();
        Limits {
            memory_bytes: ad_int(ad, classad::name!("RequestMemory"))
                .filter(|m| *m > 0)
                .map_or(d.memory_bytes, |m| (m as u64).saturating_mul(1 << 20)),
            execute_duration: ad_int(ad, classad::name!("AllowedExecuteDuration"))
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(s as u64)),
            fuel: ad_int(ad, classad::name!("MaxFuel")).filter(|f| *f > 0).map(|f| f as u64),
            disk_bytes: ad_int(ad, classad::name!("RequestDisk"))
                .filter(|k| *k > 0)
                .map_or(d.disk_bytes, |k| (k as u64).saturating_mul(1024)),
            output_bytes: ad_int(ad, classad::name!("MaxOutputBytes"))
                .filter(|b| *b > 0)
                .map_or(d.output_bytes, |b| b as u64),
            max_open_files: d.max_open_files,
            max_entries: d.max_entries,
        }
    }
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// `proc_exit(code)` or a return from `_start` (code 0).
    Exited(i32),
    /// A trap: the nearest Unix signal and the trap's name.
    Trapped {
        /// `ExitSignal`.
        signal: i32,
        /// `WasmTrap`.
        trap: String,
    },
    /// The job must go on hold.
    Held {
        /// `HoldReasonCode`.
        code: i32,
        /// `HoldReasonSubCode`.
        subcode: i32,
        /// `HoldReason`.
        reason: String,
    },
    /// Stopped by the startd: vacated (soft kill then, if needed, hard) or
    /// hard-killed. The job goes back to the queue.
    Evicted {
        /// True when a vacate was requested first.
        vacated: bool,
    },
}

/// The result of running a job.
#[derive(Clone, Debug)]
pub struct JobResult {
    /// How it ended.
    pub ending: Ending,
    /// Its usage.
    pub usage: Usage,
    /// Attributes the job set through the SDK, in order.
    pub updates: Vec<(String, classad::Expr)>,
    /// Log lines it wrote (the first [`imports::MAX_LOG_LINES`]).
    pub log: Vec<(imports::Level, String)>,
    /// Log lines it wrote past those.
    pub log_dropped: u64,
}

impl JobResult {
    /// The job attributes this run sets, with HTCondor's names.
    pub fn to_ad(&self) -> ClassAd {
        let mut ad = ClassAd::new();
        match &self.ending {
            Ending::Exited(code) => {
                ad.insert_value(classad::name!("ExitCode"), *code as i64);
                ad.insert_value(classad::name!("ExitBySignal"), false);
            }
            Ending::Trapped { signal, trap } => {
                ad.insert_value(classad::name!("ExitBySignal"), true);
                ad.insert_value(classad::name!("ExitSignal"), *signal as i64);
                ad.insert_value(classad::name!("WasmTrap"), trap.as_str());
            }
            Ending::Held { code, subcode, reason } => {
                ad.insert_value(classad::name!("HoldReasonCode"), *code as i64);
                ad.insert_value(classad::name!("HoldReasonSubCode"), *subcode as i64);
                ad.insert_value(classad::name!("HoldReason"), reason.as_str());
            }
            Ending::Evicted { .. } => {}
        }
        let u = &self.usage;
        ad.insert_value(classad::name!("RemoteUserCpu"), u.remote_user_cpu);
        ad.insert_value(classad::name!("RemoteSysCpu"), u.remote_sys_cpu);
        ad.insert_value(classad::name!("RemoteWallClockTime"), u.remote_wall_clock_time);
        ad.insert_value(classad::name!("CumulativeSuspensionTime"), u.cumulative_suspension_time);
        for (n, v) in u.memory_attrs() {
            ad.insert_value(n, v);
        }
        ad.insert_value(classad::name!("DiskUsage"), u.disk_usage_kib as i64);
        // Nobody counted an unmetered job's fuel: no figure rather than 0.
        if !u.fuel_unmetered {
            ad.insert_value(classad::name!("WasmFuelConsumed"), u.fuel_consumed as i64);
        }
        ad
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// The module's bytes.
    pub module: Arc<[u8]>,
    /// The job ad (Cmd, Arguments/Args, Environment/Env, In, Out, Err, limits).
    pub ad: ClassAd,
    /// The sandbox directory: the only directory the guest sees.
    pub sandbox: PathBuf,
    /// The limits (usually [`Limits::from_ad`]).
    pub limits: Limits,
    /// Give the job this process's stdin, stdout and stderr where the ad
    /// names no `In`, `Out` or `Err` file (`andes run`).
    pub inherit_stdio: bool,
    /// The module's SHA-256, when the caller knows it (modules are
    /// content-addressed); computed otherwise.
    pub digest: Option<[u8; 32]>,
    /// The state a cooperative job saved in an earlier run (its `load`).
    pub saved_state: Option<Arc<[u8]>>,
    /// Transparent checkpoints, for a module instrumented by `andes compile`:
    /// where snapshots go and which one to resume from.
    pub transparent: Option<Arc<Transparent>>,
    /// Run with fuel checks even where the host runs jobs unmetered: for a
    /// job known to be short, whose hand-off to a job thread of its own (and
    /// back) would cost more than the checks.
    pub metered: bool,
    /// The caller made the sandbox (or emptied it) and put nothing in it: its
    /// usage at the start is known to be nothing, not measured by a walk.
    pub sandbox_empty: bool,
}

/// The nearest Unix signal for a trap, and the trap's name.
pub fn trap_signal(trap: Trap) -> (i32, &'static str) {
    match trap {
        Trap::UnreachableCodeReached => (4, "unreachable"),
        Trap::MemoryOutOfBounds => (11, "memory_out_of_bounds"),
        Trap::HeapMisaligned => (7, "heap_misaligned"),
        Trap::StackOverflow => (11, "stack_overflow"),
        Trap::TableOutOfBounds => (11, "table_out_of_bounds"),
        Trap::IndirectCallToNull => (11, "indirect_call_to_null"),
        Trap::NullReference => (11, "null_reference"),
        Trap::ArrayOutOfBounds => (11, "array_out_of_bounds"),
        Trap::BadSignature => (4, "bad_signature"),
        Trap::IntegerOverflow => (8, "integer_overflow"),
        Trap::IntegerDivisionByZero => (8, "integer_divide_by_zero"),
        Trap::BadConversionToInteger => (8, "bad_conversion_to_integer"),
        Trap::OutOfFuel => (9, "out_of_fuel"),
        Trap::Interrupt => (9, "interrupt"),
        _ => (4, "other"),
    }
}

fn held(code: i32, subcode: i32, reason: impl Into<String>) -> Ending {
    Ending::Held { code, subcode, reason: reason.into() }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
}

/// The job's argv: argv\[0\] is the executable's name, then `Arguments`
/// (V2) or else `Args` (V1).
pub fn job_argv(ad: &ClassAd) -> Result<Vec<String>, String> {
    let cmd = match ad.eval_attr(classad::name!("Cmd")) {
        Value::Str(s) => s.to_string(),
        _ => "job.wasm".into(),
    };
    let argv0 = Path::new(&cmd).file_name().map_or(cmd.clone(), |n| n.to_string_lossy().into());
    let mut argv = vec![argv0];
    match (ad.eval_attr(classad::name!("Arguments")), ad.eval_attr(classad::name!("Args"))) {
        (Value::Str(s), _) => {
            argv.extend(classad::argenv::split_v2(&s).map_err(|e| format!("Arguments: {e}"))?)
        }
        (_, Value::Str(s)) => argv.extend(classad::argenv::split_v1_args(&s)),
        _ => {}
    }
    Ok(argv)
}

/// The job's environment: `Environment` (V2) or else `Env` (V1); never the host's.
pub fn job_env(ad: &ClassAd) -> Result<Vec<(String, String)>, String> {
    match (ad.eval_attr(classad::name!("Environment")), ad.eval_attr(classad::name!("Env"))) {
        (Value::Str(s), _) => {
            classad::argenv::parse_env_v2(&s).map_err(|e| format!("Environment: {e}"))
        }
        (_, Value::Str(s)) => classad::argenv::parse_env_v1(&s).map_err(|e| format!("Env: {e}")),
        _ => Ok(Vec::new()),
    }
}

/// A stream's file name in the sandbox, or `None` for `/dev/null` or unset.
fn stream_path<N: classad::NameRef + ?Sized>(ad: &ClassAd, attr: &N) -> Option<String> {
    match ad.eval_attr(attr) {
        Value::Str(s) if !s.is_empty() && &*s != "/dev/null" => Some(s.to_string()),
        _ => None,
    }
}

fn errno_of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(5)
}

enum Inner {
    Setup(Ending),
    Finished {
        result: Result<()>,
        refused: Option<u64>,
        fuel_left: u64,
    },
    /// Checkpointed on a vacate, and stopped.
    Vacated {
        fuel_left: u64,
    },
}

impl Host {
    /// Runs a job to its end under `ctl`. Never panics on a bad module or ad:
    /// every failure is an [`Ending`]. Dropping the future stops the job.
    pub async fn run(&self, spec: JobSpec, ctl: Arc<Control>, clock: Arc<dyn Clock>) -> JobResult {
        self.run_job(spec, ctl, clock, false).await
    }

    /// Runs a job to its end as [`Host::run`] does, except that an unmetered
    /// job's guest runs on the calling thread, which it blocks until the job
    /// ends ([`tokio::task::block_in_place`]: a worker of a multi-thread
    /// runtime first hands its other tasks to a new worker). That saves
    /// waking a job thread and being woken by it, which costs a trivial job
    /// a fifth of its start-to-exit time, more when the other cores are busy.
    ///
    /// The future then completes within the poll that starts the job, so
    /// dropping or aborting it does not stop the job: stop it through `ctl`
    /// ([`Control::hard_kill`]). Spawn it as a task of its own when the
    /// caller has other things to do meanwhile. On a current-thread runtime,
    /// where no thread may block, this is [`Host::run`].
    pub async fn run_in_place(
        &self,
        spec: JobSpec,
        ctl: Arc<Control>,
        clock: Arc<dyn Clock>,
    ) -> JobResult {
        self.run_job(spec, ctl, clock, true).await
    }

    async fn run_job(
        &self,
        spec: JobSpec,
        ctl: Arc<Control>,
        clock: Arc<dyn Clock>,
        in_place: bool,
    ) -> JobResult {
        let not_run = |ending| JobResult {
            ending,
            usage: Usage::default(),
            updates: Vec::new(),
            log: Vec::new(),
            log_dropped: 0,
        };
        let waited = match Deferral::decide(&spec.ad, clock.unix_now_ms()) {
            Deferral::Now => Ok(()),
            Deferral::Wait(until) => {
                // Wait for the time; a suspend does not stop the wait (the job
                // starts and is at once suspended), a kill or vacate ends it.
                ctl.set_deferred(Some(until));
                // Compile (or load the cached compilation) now, so the job
                // starts at its time, not a compilation later. An error shows
                // again, as a hold, when the job starts.
                self.precompile(&spec);
                wait_until(until, &ctl, clock.as_ref()).await
            }
            Deferral::Missed { time, late, window } => Err(held(
                HOLD_MISSED_DEFERRAL,
                0,
                format!(
                    "Job missed deferred execution time {time} by {late} seconds \
                     (DeferralWindow {window} seconds)"
                ),
            )),
            Deferral::Invalid(reason) => Err(held(HOLD_MISSED_DEFERRAL, 1, reason)),
        };
        // Decided, whichever way: the job no longer waits.
        ctl.set_deferred(None);
        if let Err(ending) = waited {
            return not_run(ending);
        }
        // Snapshots name the module by its digest: computed once.
        let mut spec = spec;
        if spec.transparent.is_some() && spec.digest.is_none() {
            spec.digest = Some(crate::engine::module_digest(&spec.module));
        }
        // A transparent restore: check the snapshot (once, here), then put
        // the sandbox's files back as they were at the checkpoint.
        let restore_bytes = spec.transparent.as_ref().and_then(|t| t.restore.clone());
        let restored = match (&spec.transparent, &restore_bytes) {
            (Some(t), Some(bytes)) => match self.open_restore(&spec, t, bytes) {
                Ok(opened) => Some(opened),
                Err(ending) => return not_run(ending),
            },
            _ => None,
        };
        let io = Arc::new(JobIo {
            ad: std::sync::Mutex::new(spec.ad.clone()),
            loaded: spec.saved_state.clone(),
            ..Default::default()
        });
        ctl.attach_io(io.clone());
        // (A restore has just put the checkpoint's files back.)
        let (used, entries) = if spec.sandbox_empty && restored.is_none() {
            (0, 0)
        } else {
            sandbox_usage(&spec.sandbox, spec.limits.max_entries as usize)
        };
        let quota = Quota::with_entries(
            spec.limits.disk_bytes,
            used,
            spec.limits.max_open_files,
            spec.limits.max_entries,
            entries,
        );
        quota.set_control(ctl.clone());
        ctl.disk_bytes.store(used, Ordering::Relaxed);
        let started = clock.now();
        ctl.mark_started(started);
        // The wall-clock limit counts from here: an unmetered job's guest
        // starts running on its own thread as soon as it is set up.
        let exec_deadline = spec.limits.execute_duration.map(|d| started + d);
        let timed_out = Arc::new(AtomicBool::new(false));
        let watch = watchdog(ctl.clone(), clock.clone(), exec_deadline, timed_out.clone());
        // Fuel used before the snapshot counts against MaxFuel.
        let fuel_before = restored.as_ref().map_or(0, |(o, _)| {
            o.header.usage.get(FUEL_USAGE).copied().unwrap_or(0.0).max(0.0) as u64
        });
        let fuel_budget = spec.limits.fuel.map_or(u64::MAX / 2, |f| f.saturating_sub(fuel_before));
        let tp = spec.transparent.clone().map(|t| TpRun {
            t,
            module: spec.module.clone(),
            digest: spec.digest.unwrap_or_default(),
            sandbox: spec.sandbox.clone(),
            args: job_argv(&spec.ad).unwrap_or_default(),
            env: job_env(&spec.ad).unwrap_or_default(),
            clock: clock.clone(),
            restore: restored.as_ref().map(|(o, packs)| (o, packs)),
            fuel_before,
            fuel_budget,
            in_place_io: spec.metered,
        });
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        let in_place = in_place && may_block_in_place();
        let unmetered = self.unmetered_for(&spec, in_place);
        let metered = unmetered.is_none();
        let setup = self.setup(
            &spec,
            ctl.clone(),
            clock.clone(),
            io.clone(),
            quota.clone(),
            fuel_budget,
            restored.as_ref().map(|(o, _)| &o.header.wasi),
            unmetered.as_ref(),
        );
        let job: JobFuture<'_> = match unmetered {
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            Some(_) if in_place => {
                // No other future to poll beside it: the watchdog is a task.
                let outcome = run_unmetered_here(setup, &ctl, watch, exec_deadline.is_some(), tp);
                Box::pin(std::future::ready(outcome))
            }
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            Some(_) => Box::pin(with_watchdog(self.start_unmetered(setup, ctl.clone()), watch)),
            _ => Box::pin(with_watchdog(
                Controlled {
                    inner: Box::pin(instantiate_and_run(setup, tp)),
                    ctl: ctl.clone(),
                    ticks: self.ticking.hold_lazily(),
                },
                watch,
            )),
        };
        let outcome = job.await;
        let timed_out = timed_out.load(Ordering::SeqCst);
        let mut usage = ctl.usage(clock.as_ref());
        usage.disk_usage_kib = quota.used.load(Ordering::Relaxed).div_ceil(1024);
        let outcome = match outcome {
            // Nobody counted an unmetered job's fuel.
            Ok(Inner::Finished { result, refused, .. }) if !metered => {
                Ok(Inner::Finished { result, refused, fuel_left: fuel_budget })
            }
            other => other,
        };
        usage.fuel_unmetered = !metered;
        let ending = match outcome {
            Err(Stopped::Killed) => self.killed_ending(&spec, &quota, timed_out, &ctl),
            Ok(Inner::Setup(e)) => e,
            Ok(Inner::Vacated { fuel_left }) => {
                usage.fuel_consumed = fuel_budget.saturating_sub(fuel_left);
                Ending::Evicted { vacated: true }
            }
            Ok(Inner::Finished { result, refused, fuel_left }) => {
                usage.fuel_consumed = fuel_budget.saturating_sub(fuel_left);
                ctl.fuel_consumed.store(usage.fuel_consumed, Ordering::Relaxed);
                self.finished_ending(&spec, result, refused, &quota, timed_out, &ctl)
            }
        };
        if usage.fuel_consumed == 0 {
            usage.fuel_consumed = ctl.fuel_consumed.load(Ordering::Relaxed);
        }
        let log = std::mem::take(&mut *io.log.lock().unwrap_or_else(|e| e.into_inner()));
        let log_dropped = io.log_dropped.load(Ordering::Relaxed);
        JobResult { ending, usage, updates: io.take_updates(), log, log_dropped }
    }

    fn killed_ending(
        &self,
        spec: &JobSpec,
        quota: &Quota,
        timed_out: bool,
        ctl: &Control,
    ) -> Ending {
        match quota.exceeded() {
            Some(Exceeded::Disk) => held(
                HOLD_DISK,
                28,
                format!(
                    "the job's sandbox outgrew its disk limit of {} (RequestDisk)",
                    mib(spec.limits.disk_bytes)
                ),
            ),
            Some(Exceeded::Entries) => held(
                HOLD_DISK,
                28,
                format!(
                    "the job's sandbox outgrew its limit of {} files, directories and links",
                    spec.limits.max_entries
                ),
            ),
            Some(Exceeded::Output) => held(
                HOLD_OUTPUT_TOO_BIG,
                27,
                format!(
                    "an output stream of the job exceeded its limit of {}",
                    mib(spec.limits.output_bytes)
                ),
            ),
            None if timed_out => {
                let d = spec.limits.execute_duration.unwrap_or_default().as_secs() as i64;
                held(
                    HOLD_EXECUTE_DURATION,
                    0,
                    format!("The job exceeded allowed execute duration of {}", interval(d)),
                )
            }
            None => Ending::Evicted { vacated: ctl.vacate_requested() },
        }
    }

    fn finished_ending(
        &self,
        spec: &JobSpec,
        result: Result<()>,
        refused: Option<u64>,
        quota: &Quota,
        timed_out: bool,
        ctl: &Control,
    ) -> Ending {
        let memory_hold = |asked: u64| {
            // The limiter's cap: RequestMemory, unless the host allows less.
            let allows = if self.config.max_memory_bytes < spec.limits.memory_bytes {
                format!("this host allows any job {}", mib(self.config.max_memory_bytes))
            } else {
                format!("RequestMemory allows {}", mib(spec.limits.memory_bytes))
            };
            held(
                HOLD_MEMORY,
                0,
                format!(
                    "memory usage exceeded the job's limit: it asked for {} of linear memory, \
                     {allows}",
                    mib(asked),
                ),
            )
        };
        let e = match (result, refused) {
            // A limit the job ran into holds it however it then ends, even
            // by returning before the stop reaches it.
            (Ok(()), _) if quota.exceeded().is_some() => {
                return self.killed_ending(spec, quota, timed_out, ctl);
            }
            (Ok(()), None) => return Ending::Exited(0),
            (Ok(()), Some(asked)) => return memory_hold(asked),
            (Err(e), _) => e,
        };
        if quota.exceeded().is_some() || timed_out || ctl.is_killed() {
            return self.killed_ending(spec, quota, timed_out, ctl);
        }
        // Asking for more memory than RequestMemory is a memory hold however
        // the guest ends (as a cgroup's OOM kill would be), not a mystery trap.
        if let Some(asked) = refused {
            return memory_hold(asked);
        }
        if let Some(exit) = e.downcast_ref::<wasi_common::I32Exit>() {
            return Ending::Exited(exit.0);
        }
        if let Some(trap) = e.downcast_ref::<Trap>() {
            if *trap == Trap::OutOfFuel {
                return held(
                    HOLD_FUEL,
                    0,
                    format!(
                        "the job used all its fuel (MaxFuel = {})",
                        spec.limits.fuel.unwrap_or(0)
                    ),
                );
            }
            let (signal, name) = trap_signal(*trap);
            return Ending::Trapped { signal, trap: name.into() };
        }
        // An error raised by a host function on the guest's behalf (a bad
        // pointer handed to an andes import, say): the guest's fault.
        Ending::Trapped { signal: 4, trap: format!("host: {}", e.root_cause()) }
    }

    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn setup(
        &self,
        spec: &JobSpec,
        ctl: Arc<Control>,
        clock: Arc<dyn Clock>,
        io: Arc<JobIo>,
        quota: Arc<Quota>,
        fuel_budget: u64,
        restoring: Option<&andes_snapshot::WasiState>,
        unmetered: Option<&Unmetered>,
    ) -> Result<(Store<JobState>, Arc<crate::engine::Prepared>), Ending> {
        let (engine, prepared) = match unmetered {
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            Some(u) => (&u.engine, u.prepared.clone()),
            #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
            Some(u) => match *u {},
            None => (
                &self.engine,
                self.prepared(&spec.module, spec.digest).map_err(|e| {
                    held(
                        HOLD_FAILED_TO_START,
                        0,
                        format!("the module is not valid WebAssembly: {e:#}"),
                    )
                })?,
            ),
        };
        let bad_ad = |msg: String| held(HOLD_FAILED_TO_START, 0, msg);
        let argv = job_argv(&spec.ad).map_err(bad_ad)?;
        let env = job_env(&spec.ad).map_err(bad_ad)?;
        let dir = cap_std::fs::Dir::open_ambient_dir(&spec.sandbox, cap_std::ambient_authority())
            .map_err(|e| {
            held(
                14,
                errno_of(&e),
                format!("cannot open the sandbox {}: {e}", spec.sandbox.display()),
            )
        })?;
        // The context is built by hand (not by wasi-common's builder) so that
        // a restored job's monotonic clock continues from its snapshot.
        let mut wasi = transparent::new_ctx(restoring.map_or(0, |w| w.monotonic_ns));
        // Stdin is read through a QuotaFile (no cap, not counted): its reads
        // into the guest's memory touch it first (see `dirty`).
        let reader = |f: Box<dyn wasi_common::WasiFile>| {
            Box::new(QuotaFile::new(f, quota.clone(), None, 0, false))
        };
        if spec.inherit_stdio {
            wasi.set_stdin(reader(Box::new(wasi_common::tokio::stdio::stdin())));
            wasi.set_stdout(Box::new(wasi_common::tokio::stdio::stdout()));
            wasi.set_stderr(Box::new(wasi_common::tokio::stdio::stderr()));
        }
        for a in &argv {
            wasi.push_arg(a).map_err(|e| bad_ad(format!("argument {a:?}: {e}")))?;
        }
        for (k, v) in &env {
            wasi.push_env(k, v).map_err(|e| bad_ad(format!("environment {k}: {e}")))?;
        }
        let wasi_file = |f| wasi_file(f, spec.metered);
        // Positions the stream at its offset in a restored job.
        let seek = |f: &mut cap_std::fs::File, offset: u64, name: &str| {
            use std::io::Seek;
            f.seek(std::io::SeekFrom::Start(offset)).map(|_| ()).map_err(|e| {
                held(HOLD_CHECKPOINT, 1, format!("cannot resume the job's stream {name}: {e}"))
            })
        };
        if let Some(name) = stream_path(&spec.ad, classad::name!("In")) {
            let mut f = dir.open(&name).map_err(|e| {
                held(
                    HOLD_OPEN_INPUT,
                    errno_of(&e),
                    format!("cannot open the job's input file {name}: {e}"),
                )
            })?;
            if let Some(w) = restoring {
                seek(&mut f, w.stdin_offset, &name)?;
            }
            wasi.set_stdin(reader(wasi_file(f)));
        }
        for (attr, is_err) in [(classad::name!("Out"), false), (classad::name!("Err"), true)] {
            let Some(name) = stream_path(&spec.ad, attr) else { continue };
            // A restored job's output continues where it was, in the file
            // the snapshot put back; a new job's starts empty.
            let opened = match restoring {
                None => dir.create(&name),
                Some(_) => {
                    let mut o = cap_std::fs::OpenOptions::new();
                    o.write(true).create(true);
                    dir.open_with(&name, &o)
                }
            };
            let mut f = opened.map_err(|e| {
                held(
                    HOLD_OPEN_OUTPUT,
                    errno_of(&e),
                    format!("cannot create the job's output file {name}: {e}"),
                )
            })?;
            let mut size = 0;
            if let Some(w) = restoring {
                size = if is_err { w.stderr_offset } else { w.stdout_offset };
                seek(&mut f, size, &name)?;
            }
            let file = QuotaFile::new(
                wasi_file(f),
                quota.clone(),
                Some(spec.limits.output_bytes),
                size,
                false,
            );
            if is_err {
                wasi.set_stderr(Box::new(file));
            } else {
                wasi.set_stdout(Box::new(file));
            }
        }
        let sandbox = QuotaDir::new(wasi_dir(dir, spec.metered), quota.clone());
        wasi.push_preopened_dir(Box::new(sandbox), SANDBOX_PREOPEN).map_err(|e| {
            held(HOLD_FAILED_TO_START, 0, format!("cannot preopen the sandbox: {e}"))
        })?;
        // The host's own cap on any memory bounds the job's.
        let max = spec.limits.memory_bytes.min(self.config.max_memory_bytes);
        let limiter = Limiter { max, refused: None, ctl: ctl.clone() };
        let mut store = Store::new(
            engine,
            JobState {
                wasi,
                limiter,
                ctl: ctl.clone(),
                clock,
                io,
                polled: false,
                quota,
                vacate_checkpointed: false,
                #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
                remote: unmetered.map(|u| u.remote.clone()),
            },
        );
        store.limiter(|s| &mut s.limiter);
        // An unmetered job is stopped by its thread's signal and, at each
        // crossing between host and guest, by the call hook.
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if let Some(u) = unmetered {
            let remote = u.remote.clone();
            store.call_hook(move |_, hook| remote.at_boundary(hook));
            return Ok((store, prepared));
        }
        let internal =
            |e: anyhow::Error| held(HOLD_FAILED_TO_START, 0, format!("host error: {e:#}"));
        store.set_fuel(fuel_budget).map_err(internal)?;
        store.fuel_async_yield_interval(Some(self.config.fuel_yield_interval)).map_err(internal)?;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |ctx| {
            let data = ctx.data();
            if let Ok(left) = ctx.get_fuel() {
                data.ctl.fuel_consumed.store(fuel_budget.saturating_sub(left), Ordering::Relaxed);
            }
            if data.ctl.is_killed() {
                return Err(Trap::Interrupt.into());
            }
            Ok(UpdateDeadline::Continue(1))
        });
        Ok((store, prepared))
    }
}

/// A running job as `Host::run` awaits it: the guest's future under its
/// [`Control`] (metered), or the end of its job thread (unmetered).
type JobFuture<'a> = Pin<Box<dyn Future<Output = Result<Inner, Stopped>> + Send + 'a>>;

/// What an unmetered job runs on: its module compiled for the unmetered
/// engine, that engine, and its link to the job thread.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) struct Unmetered {
    prepared: Arc<crate::engine::Prepared>,
    engine: wasmtime::Engine,
    remote: Arc<crate::preempt::Remote>,
}

/// No platform but Linux on x86_64 runs jobs unmetered.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(crate) type Unmetered = std::convert::Infallible;

/// Kills an unmetered job whose `Host::run` was dropped before it ended.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
struct Abandon(Option<Arc<crate::preempt::Remote>>);

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r.set_request(crate::preempt::KILL);
        }
    }
}

/// Enforces a running job's deadlines: hard-kills it when its wall-clock
/// limit passes (recording that in `timed_out`) or when the grace of a
/// vacate ends. Never completes: drop (or abort) it once the job has ended.
async fn watchdog(
    ctl: Arc<Control>,
    clock: Arc<dyn Clock>,
    exec_deadline: Option<Instant>,
    timed_out: Arc<AtomicBool>,
) -> std::convert::Infallible {
    let mut exec_timer = match exec_deadline {
        Some(d) => clock.sleep_until(d),
        None => Box::pin(std::future::pending()),
    };
    loop {
        let mut vacate_timer = match ctl.vacate_deadline() {
            Some((d, _)) => clock.sleep_until(d),
            None => Box::pin(std::future::pending()),
        };
        tokio::select! {
            _ = &mut exec_timer => {
                timed_out.store(true, Ordering::SeqCst);
                ctl.hard_kill();
                break;
            }
            _ = &mut vacate_timer => {
                ctl.hard_kill();
                break;
            }
            _ = ctl.changed() => {}
        }
    }
    // A kill is final: nothing is left to watch.
    std::future::pending().await
}

/// Runs `job` with its watchdog beside it; ends when the job does.
async fn with_watchdog<J: Future<Output = Result<Inner, Stopped>>>(
    job: J,
    watch: impl Future<Output = std::convert::Infallible>,
) -> Result<Inner, Stopped> {
    tokio::select! {
        r = job => r,
        never = watch => match never {},
    }
}

/// Waits until `until` (Unix seconds) by the wall clock; a kill or vacate
/// ends the wait with the job's ending instead. The timer runs on the
/// monotonic clock, the time is on the wall clock: a wall clock set back
/// meanwhile is caught by checking it again when the timer fires, so the job
/// never starts early.
async fn wait_until(until: i64, ctl: &Control, clock: &dyn Clock) -> Result<(), Ending> {
    loop {
        let ms = until.saturating_mul(1000) - clock.unix_now_ms();
        if ms <= 0 {
            return Ok(());
        }
        let mut timer = clock.sleep_until(clock.now() + Duration::from_millis(ms as u64));
        loop {
            if ctl.is_killed() || ctl.vacate_requested() {
                return Err(Ending::Evicted { vacated: ctl.vacate_requested() });
            }
            tokio::select! {
                _ = &mut timer => break,
                _ = ctl.changed() => {}
            }
        }
    }
}

/// True when the calling thread may block for a whole job: a thread of a
/// multi-thread runtime ([`tokio::task::block_in_place`] moves a worker's
/// other tasks away first).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn may_block_in_place() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// The link to an unmetered job's thread, once its setup succeeded.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn setup_remote(
    setup: &Result<(Store<JobState>, Arc<crate::engine::Prepared>), Ending>,
) -> Option<Arc<crate::preempt::Remote>> {
    setup.as_ref().ok().and_then(|(store, _)| store.data().remote())
}

/// The ending of an unmetered job whose guest could not run at all.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn not_started(
    setup: Result<(Store<JobState>, Arc<crate::engine::Prepared>), Ending>,
) -> Result<Inner, Stopped> {
    match setup {
        Err(ending) => Ok(Inner::Setup(ending)),
        Ok(_) => Ok(Inner::Setup(held(HOLD_FAILED_TO_START, 0, "host error"))),
    }
}

/// What an unmetered job ends with when its thread ended without a result.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn lost_thread() -> Result<Inner, Stopped> {
    Ok(Inner::Setup(held(
        HOLD_FAILED_TO_START,
        0,
        "host error: the job's thread ended without a result",
    )))
}

/// Runs an unmetered job's guest on the calling thread, blocking it until
/// the job ends. Its watchdog becomes a task of the caller's runtime when it
/// has something to watch: from the start if the job has a wall-clock limit
/// (`timed`), else from its first vacate. Spawning it regardless would wake
/// an idle worker thread twice per job, and a memory's decommit at the end
/// would then have to reach that worker's CPU too: together a third of a
/// trivial job's start-to-exit time.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn run_unmetered_here(
    setup: Result<(Store<JobState>, Arc<crate::engine::Prepared>), Ending>,
    ctl: &Arc<Control>,
    watch: impl Future<Output = std::convert::Infallible> + Send + 'static,
    timed: bool,
    tp: Option<TpRun<'_>>,
) -> Result<Inner, Stopped> {
    use crate::control::WatchStart;
    let Some(remote) = setup_remote(&setup) else { return not_started(setup) };
    let handle = tokio::runtime::Handle::current();
    let task: Arc<std::sync::Mutex<Option<tokio::task::JoinHandle<_>>>> = Arc::default();
    let start = {
        let (handle, task) = (handle.clone(), task.clone());
        WatchStart(Box::new(move || {
            let spawned = handle.spawn(watch);
            *task.lock().unwrap_or_else(|e| e.into_inner()) = Some(spawned);
        }))
    };
    if timed {
        (start.0)();
    } else if let Err(start) = ctl.arm_watch(start) {
        (start.0)();
    }
    ctl.attach(remote.clone());
    let r = tokio::task::block_in_place(|| {
        let _rt = handle.enter();
        // A panic is the job's end, as on a job thread, not the caller's.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::jobthread::drive(&remote, instantiate_and_run(setup, tp))
        }))
    });
    ctl.detach();
    ctl.disarm_watch();
    if let Some(t) = task.lock().unwrap_or_else(|e| e.into_inner()).take() {
        t.abort();
    }
    r.unwrap_or_else(|_| lost_thread())
}

impl Host {
    /// Whether this job runs unmetered, and on what: only when it needs no
    /// fuel (no `MaxFuel`) and the host allows it. A job checkpointed
    /// transparently runs unmetered when its module has the current
    /// instrumentation (checkpoints asked for through its poll word) and it
    /// runs on the caller's thread (`in_place`), where its snapshots go.
    fn unmetered_for(&self, spec: &JobSpec, in_place: bool) -> Option<Unmetered> {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        {
            let u = self.unmetered.as_ref()?;
            if spec.metered || spec.limits.fuel.is_some() {
                return None;
            }
            let transparent = spec.transparent.is_some();
            if transparent && !in_place {
                return None;
            }
            // A module that does not compile is held by the metered path,
            // which says why.
            let prepared = self.prepared_unmetered(&spec.module, spec.digest).ok()??;
            if transparent
                && prepared.instrumentation != Some(andes_compile::INSTRUMENTATION_VERSION)
            {
                return None;
            }
            let code = prepared.code.clone()?;
            let remote = crate::preempt::Remote::new(code, &u.preempt);
            Some(Unmetered { prepared, engine: u.engine.clone(), remote })
        }
        #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
        {
            let _ = (spec, in_place);
            None
        }
    }

    /// Compiles (or loads) the module a job will run, ahead of its start.
    fn precompile(&self, spec: &JobSpec) {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if self.unmetered.is_some()
            && !spec.metered
            && spec.limits.fuel.is_none()
            && let Ok(Some(_)) = self.prepared_unmetered(&spec.module, spec.digest)
        {
            return;
        }
        let _ = self.prepared(&spec.module, spec.digest);
    }

    /// Runs an unmetered job on a job thread; the future ends when the job
    /// does, and kills it if dropped first.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn start_unmetered(
        &self,
        setup: Result<(Store<JobState>, Arc<crate::engine::Prepared>), Ending>,
        ctl: Arc<Control>,
    ) -> JobFuture<'static> {
        let Some(remote) = setup_remote(&setup) else {
            // Setup failed: nothing to run.
            return Box::pin(std::future::ready(not_started(setup)));
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let handle = tokio::runtime::Handle::try_current().ok();
        ctl.attach(remote.clone());
        let work: crate::jobthread::Work = {
            let remote = remote.clone();
            Box::new(move || {
                let _rt = handle.as_ref().map(|h| h.enter());
                let r = crate::jobthread::drive(&remote, instantiate_and_run(setup, None));
                ctl.detach();
                let _ = tx.send(r);
            })
        };
        let started = match &self.unmetered {
            Some(u) => u.threads.run(work).map_err(|e| e.to_string()),
            None => Err("no job threads".to_string()),
        };
        Box::pin(async move {
            let mut guard = Abandon(Some(remote));
            let r = match started {
                Err(e) => Ok(Inner::Setup(held(
                    HOLD_FAILED_TO_START,
                    0,
                    format!("cannot start a thread for the job: {e}"),
                ))),
                Ok(()) => rx.await.unwrap_or_else(|_| lost_thread()),
            };
            guard.0 = None;
            r
        })
    }
}

/// The key of the fuel a job consumed before a snapshot, in its usage.
pub const FUEL_USAGE: &str = "fuel_consumed";

/// What a run of a transparently checkpointed job needs besides its store.
struct TpRun<'a> {
    t: Arc<Transparent>,
    module: Arc<[u8]>,
    digest: [u8; 32],
    sandbox: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    clock: Arc<dyn Clock>,
    /// The snapshot to resume from (`t.restore`, checked, its files
    /// restored) and its memory packs (loaded and checked).
    restore: Option<(&'a andes_snapshot::Opened<'a>, &'a andes_snapshot::Packs)>,
    /// Fuel consumed before the snapshot resumed from.
    fuel_before: u64,
    fuel_budget: u64,
    /// Files are used in place ([`wasi_dir`]).
    in_place_io: bool,
}

/// A job's file as WASI sees it. A job known to be short (`in_place`: run
/// metered, on a runtime worker that its compute holds anyway) uses its
/// files in place: a small write to the page cache costs far less than
/// handing the worker's core to another thread for it, as tokio's
/// `block_in_place` does at every call.
fn wasi_file(f: cap_std::fs::File, in_place: bool) -> Box<dyn wasi_common::WasiFile> {
    if in_place {
        Box::new(wasi_common::sync::file::File::from_cap_std(f))
    } else {
        Box::new(wasi_common::tokio::File::from_cap_std(f))
    }
}

/// A job's sandbox directory as WASI sees it (in place as [`wasi_file`]
/// says); the files opened in it are of the same kind.
fn wasi_dir(d: cap_std::fs::Dir, in_place: bool) -> Box<dyn wasi_common::WasiDir> {
    if in_place {
        Box::new(wasi_common::sync::dir::Dir::from_cap_std(d))
    } else {
        Box::new(wasi_common::tokio::Dir::from_cap_std(d))
    }
}

impl Host {
    /// Opens the snapshot a job resumes from, loads its memory packs and
    /// restores its files into the sandbox; a refusal is a hold that names
    /// the snapshot and says why, and leaves the sandbox untouched.
    fn open_restore<'b>(
        &self,
        spec: &JobSpec,
        t: &Transparent,
        bytes: &'b [u8],
    ) -> Result<(andes_snapshot::Opened<'b>, andes_snapshot::Packs), Ending> {
        let name = andes_snapshot::stored_hash(bytes).unwrap_or_else(|| "of the job".into());
        let refuse = |why: String| {
            held(HOLD_CHECKPOINT, 1, format!("the checkpoint {name} cannot be restored: {why}"))
        };
        let prepared = self.prepared(&spec.module, spec.digest).map_err(|e| {
            held(HOLD_FAILED_TO_START, 0, format!("the module is not valid WebAssembly: {e:#}"))
        })?;
        let digest = spec.digest.unwrap_or_else(|| crate::engine::module_digest(&spec.module));
        let opened =
            andes_snapshot::open(bytes, &*t.trusted, &digest).map_err(|e| refuse(e.to_string()))?;
        let header = &opened.header;
        let Some(version) = prepared.instrumentation else {
            return Err(refuse(
                "the module is not instrumented by andes compile, the snapshot is of one".into(),
            ));
        };
        let expected = andes_snapshot::platform(Some(version));
        if header.platform != expected || header.unwound.is_none() {
            return Err(refuse(format!(
                "it was taken on platform {}, this module needs {expected}",
                header.platform
            )));
        }
        let packs = opened
            .load_packs_with(|hash| transparent::mapped(&t.blobs.path(hash)))
            .map_err(|e| refuse(e.to_string()))?;
        transparent::restore_sandbox(&spec.sandbox, header, &t.blobs).map_err(refuse)?;
        Ok((opened, packs))
    }
}

/// Instantiates the prepared module and runs `_start`: the job's future.
/// An instrumented module with somewhere to put snapshots (`tp`) is resumed
/// from its snapshot if it has one, and checkpointed whenever it unwinds.
async fn instantiate_and_run(
    setup: Result<(Store<JobState>, Arc<crate::engine::Prepared>), Ending>,
    tp: Option<TpRun<'_>>,
) -> Inner {
    let (mut store, prepared) = match setup {
        Ok(s) => s,
        Err(ending) => return Inner::Setup(ending),
    };
    let pre = match &prepared.pre {
        Ok(pre) => pre,
        Err(e) => {
            return Inner::Setup(held(
                HOLD_FAILED_TO_START,
                0,
                format!("the module could not be linked: {e}"),
            ));
        }
    };
    // A job hears a soft kill if it asks for it (the SDK's vacate calls) or
    // is snapshotted by the host when vacated; any other is ended by it.
    let asks = pre.module().imports().any(|i| {
        i.module() == crate::imports::CONTROL && matches!(i.name(), "vacate-requested" | "deadline")
    });
    store.data().ctl.set_hears_vacate(asks || tp.is_some());
    let instance = match pre.instantiate_async(&mut store).await {
        Ok(i) => i,
        Err(e) => {
            return Inner::Setup(held(
                HOLD_FAILED_TO_START,
                0,
                format!("the module could not be instantiated: {e:#}"),
            ));
        }
    };
    let Ok(start) = instance.get_typed_func::<(), ()>(&mut store, "_start") else {
        return Inner::Setup(held(
            HOLD_FAILED_TO_START,
            0,
            "the module has no `_start` function (is it a wasm32-wasip1 command?)",
        ));
    };
    // An unmetered job's signal handler patches trampolines through the
    // store's context, which it learns from the guest's entry point.
    // The guard forgets it before the store is dropped (declared after it).
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    let _known =
        store.data().remote().map(|r| r.set_store(start.func().to_raw(&mut store) as usize));
    // Transparent checkpoints need an instrumented module, somewhere to put
    // its snapshots, and its initial image.
    let mut tp = match (tp, prepared.instrumentation) {
        (Some(tp), Some(version)) if version != andes_compile::INSTRUMENTATION_VERSION => {
            let why = format!(
                "the module was compiled by an andes compile of another version (its \
                 instrumentation is version {version}, this host checkpoints version {}): \
                 compile the original module again",
                andes_compile::INSTRUMENTATION_VERSION
            );
            if tp.restore.is_some() {
                return Inner::Setup(held(HOLD_CHECKPOINT, 1, why));
            }
            (tp.t.sink)(Err(format!("the job cannot be checkpointed: {why}")));
            None
        }
        (Some(tp), Some(version)) => match prepared.image(&tp.module) {
            Ok(image) => Some((tp, version, image)),
            Err(e) => {
                if tp.restore.is_some() {
                    return Inner::Setup(held(HOLD_CHECKPOINT, 1, e));
                }
                (tp.t.sink)(Err(format!("the job cannot be checkpointed: {e}")));
                None
            }
        },
        _ => None,
    };
    // The job's control block asks it to yield through its poll word; the
    // guard unlinks the word before the store (declared before it) is dropped.
    let _poll = match &tp {
        Some((t, _, _)) => match attach_poll(&mut store, &instance) {
            Ok(guard) => Some(guard),
            Err(why) => {
                // Without its poll word the job can neither yield nor finish
                // a rewind: it runs, uncheckpointed, only from its start.
                if t.restore.is_some() {
                    return Inner::Setup(held(HOLD_CHECKPOINT, 1, why));
                }
                (t.t.sink)(Err(format!("the job cannot be checkpointed: {why}")));
                tp = None;
                None
            }
        },
        None => None,
    };
    // What each snapshot builds on; declared after the store, so dropped
    // (leaving the memory writable) before it.
    let mut since = transparent::Incremental::new();
    if let Some((tp, _, image)) = &tp
        && let Some(opened) = tp.restore
        && let Err(e) = resume(&mut store, &instance, tp, opened, image, &mut since).await
    {
        return Inner::Setup(held(
            HOLD_CHECKPOINT,
            1,
            format!("the job's checkpoint cannot be restored: {e}"),
        ));
    }
    let mut cache = andes_snapshot::HashCache::default();
    store.data().ctl.mark_running();
    let result = loop {
        let r = start.call_async(&mut store, ()).await;
        let Some((tp, version, image)) = tp.as_mut() else { break r };
        let state = transparent::asyncify_state(&mut store, &instance).await;
        match r {
            Ok(()) if state == andes_compile::STATE_UNWINDING => {
                if let Err(e) = transparent::stop_unwind(&mut store, &instance).await {
                    break Err(e);
                }
                let ctl = store.data().ctl.clone();
                ctl.note_paused();
                let stopping = ctl.vacate_requested();
                let metered_fuel_left = store.get_fuel().ok();
                let fuel_left = metered_fuel_left.unwrap_or(tp.fuel_budget);
                let mut usage = std::collections::BTreeMap::new();
                // An unmetered job counts no fuel: none is recorded.
                if let Some(left) = metered_fuel_left {
                    let fuel = tp.fuel_before + tp.fuel_budget.saturating_sub(left);
                    usage.insert(FUEL_USAGE.to_string(), fuel as f64);
                }
                let c = transparent::CaptureCtx {
                    t: &tp.t,
                    module_sha256: tp.digest,
                    version: *version,
                    image,
                    sandbox: &tp.sandbox,
                    args: tp.args.clone(),
                    env: tp.env.clone(),
                    now_ms: tp.clock.unix_now_ms(),
                    cache: &mut cache,
                    usage,
                    since: &mut since,
                };
                let taken = transparent::capture(&mut store, &instance, c, stopping).await;
                ctl.checkpoint_taken();
                let ok = taken.is_ok();
                // `Ok(None)`: its writer hands the snapshot over.
                if let Some(taken) = taken.transpose() {
                    (tp.t.sink)(taken);
                }
                if stopping {
                    store.data_mut().vacate_checkpointed = true;
                    if ok {
                        return Inner::Vacated { fuel_left };
                    }
                }
                if let Err(e) = transparent::start_rewind(&mut store, &instance).await {
                    break Err(e);
                }
            }
            // The saved frames led the rewind astray (a site number or a
            // frame that does not fit the module): the checkpoint, not the
            // job, is at fault. A kill or the fuel running out is not that.
            Err(e)
                if state == andes_compile::STATE_REWINDING
                    && e.downcast_ref::<Trap>()
                        .is_some_and(|t| !matches!(t, Trap::Interrupt | Trap::OutOfFuel)) =>
            {
                return Inner::Setup(held(
                    HOLD_CHECKPOINT,
                    1,
                    format!(
                        "the job's checkpoint cannot be restored: its saved call stack does not \
                         fit the module (the rewind stopped: {e:#})"
                    ),
                ));
            }
            Err(e) if state == andes_compile::STATE_UNWINDING => {
                let oob = e.downcast_ref::<Trap>() == Some(&Trap::MemoryOutOfBounds);
                if andes_compile::is_stack_overflow(oob, state) {
                    let stack = instance
                        .get_memory(&mut store, andes_compile::STACK_MEMORY_EXPORT)
                        .map_or(0, |m| m.data_size(&store) as u64);
                    let layout = andes_compile::StackLayout::new(stack);
                    let why = andes_compile::StackOverflow {
                        capacity: layout.capacity(),
                        pages: stack / andes_compile::PAGE_SIZE,
                    };
                    (tp.t.sink)(Err(why.to_string()));
                    return Inner::Setup(held(HOLD_CHECKPOINT, 2, why.to_string()));
                }
                break Err(e);
            }
            r => break r,
        }
    };
    let refused = store.data().limiter.refused;
    let fuel_left = store.get_fuel().unwrap_or(0);
    Inner::Finished { result, refused, fuel_left }
}

/// Unlinks a compiled job's poll word from its control block when dropped.
struct PollGuard(Arc<Control>);

impl Drop for PollGuard {
    fn drop(&mut self) {
        self.0.detach_poll();
    }
}

/// Links an instrumented instance's poll word to the job's control block, so
/// that a checkpoint or vacate asked for from any thread reaches the guest
/// at its next checked loop header without fuel or epoch checks.
fn attach_poll(
    store: &mut Store<JobState>,
    instance: &wasmtime::Instance,
) -> Result<PollGuard, String> {
    let name = andes_compile::POLL_MEMORY_EXPORT;
    let poll = instance
        .get_memory(&mut *store, name)
        .ok_or_else(|| format!("the module exports no memory `{name}` (its poll word)"))?;
    let word = andes_compile::POLL_WORD as usize;
    // The poll memory must be one page that cannot grow (`min = max = 1`),
    // so that it stays where it is while the instance lives: the host
    // writes the word from other threads, through a pointer.
    let ty = poll.ty(&*store);
    if ty.maximum() != Some(1) || ty.is_shared() || poll.data_size(&*store) < word + 4 {
        return Err(format!(
            "its memory `{name}` is not one unshared page that cannot grow (minimum {}, \
             maximum {:?}, shared {}), as andes compile makes it: compile the original \
             module again",
            ty.minimum(),
            ty.maximum(),
            ty.is_shared()
        ));
    }
    let ptr = poll.data_ptr(&*store).wrapping_add(word);
    let ctl = store.data().ctl.clone();
    store.data_mut().polled = true;
    // SAFETY: the word is in a memory that cannot grow or move, of an
    // instance of `store`; the guard, dropped before the store, detaches it.
    unsafe { ctl.attach_poll(ptr) };
    Ok(PollGuard(ctl))
}

/// Writes a snapshot into a fresh instance and starts the rewind into the
/// frame that yielded.
async fn resume(
    store: &mut Store<JobState>,
    instance: &wasmtime::Instance,
    tp: &TpRun<'_>,
    (opened, packs): (&andes_snapshot::Opened<'_>, &andes_snapshot::Packs),
    image: &andes_snapshot::Image,
    since: &mut transparent::Incremental,
) -> Result<(), String> {
    let learned = transparent::restore_instance(store, instance, opened, packs, image)?;
    // The next snapshot builds on this one (its packs are in the store),
    // knowing its chunks as stored: a restored chunk with a few pages
    // changed is stored as those pages.
    let mut chain = opened.chain().clone();
    for a in learned {
        chain.learn(a);
    }
    since.arm(store, instance, chain);
    let dir = cap_std::fs::Dir::open_ambient_dir(&tp.sandbox, cap_std::ambient_authority())
        .map_err(|e| format!("opening the sandbox: {e}"))?;
    let root = QuotaDir::new(wasi_dir(dir, tp.in_place_io), store.data().quota.clone());
    transparent::restore_descriptors(store, &root, &opened.header.wasi).await?;
    transparent::start_rewind(store, instance).await.map_err(|e| format!("{e:#}"))
}

/// HTCondor's `interval()` format: `[D+]H:MM:SS`.
fn interval(secs: i64) -> String {
    let (d, h, m, s) = (secs / 86400, secs % 86400 / 3600, secs % 3600 / 60, secs % 60);
    if d > 0 { format!("{d}+{h:02}:{m:02}:{s:02}") } else { format!("{h}:{m:02}:{s:02}") }
}

/// The core imports the host offers under the `andes:job` interfaces:
/// (module, name, parameter types, result types), for checking against the WIT.
pub fn andes_import_signatures(host: &Host) -> Vec<(String, String, Vec<String>, Vec<String>)> {
    let wasi = wasi_common::tokio::WasiCtxBuilder::new().build();
    let ctl = Control::new();
    let limiter = Limiter { max: 0, refused: None, ctl: ctl.clone() };
    let state = JobState {
        wasi,
        limiter,
        ctl,
        clock: Arc::new(crate::control::SystemClock),
        io: Arc::new(JobIo::default()),
        polled: false,
        quota: Quota::new(0, 0, 0),
        vacate_checkpointed: false,
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        remote: None,
    };
    let mut store = Store::new(&host.engine, state);
    let mut linker: Linker<JobState> = Linker::new(&host.engine);
    if imports::add_to_linker(&mut linker).is_err() {
        return Vec::new();
    }
    let items: Vec<_> = linker.iter(&mut store).collect();
    items
        .into_iter()
        .filter_map(|(module, name, ext)| {
            let f = ext.into_func()?;
            let ty = f.ty(&store);
            let t = |v: wasmtime::ValType| v.to_string();
            Some((
                module.to_string(),
                name.to_string(),
                ty.params().map(t).collect(),
                ty.results().map(t).collect(),
            ))
        })
        .collect()
}
