//! The `andes host` daemon: a thin shell around `andes-startd`'s pure state
//! machine that carries out its actions with real starters.
//!
//! [`Daemon`] owns the [`Startd`] and feeds it events at the time of its
//! [`Clock`] (a [`andes_starter::VirtualClock`] in tests): a [`Event::Tick`] at
//! [`Startd::next_deadline`], fresh [`Measurements`] before each of its polls,
//! [`Event::StarterExited`] and [`Event::BackfillExited`] when a starter
//! ends, [`Event::BenchmarkFinished`] after a benchmark, and the commands of
//! the HTTP API ([`crate::api`]). Each [`Action`] the machine returns is carried out
//! at once:
//!
//! | action | what the daemon does |
//! | --- | --- |
//! | `StartJob` | runs the job with [`Host::run`] in a task, with its own [`Control`], in a fresh sandbox under EXECUTE |
//! | `StartBackfill` | the same for the named backfill job (`BACKFILL_JOB_<name>`) |
//! | `Suspend`, `Continue` | [`Control::suspend`], [`Control::resume`] |
//! | `SoftKill` | [`Control::soft_kill`] with the grace the machine computed |
//! | `HardKill`, `KillBackfill` | [`Control::hard_kill`] |
//! | `KillStarter` | kills the job again, logged; the slot waits for its end |
//! | `Checkpoint` | a cooperative job (`WasmCheckpoint = "cooperative"`) is asked to save (its `checkpoint-requested`); a module compiled by `andes compile` is snapshotted at its next yield point (periodic: it goes on; vacate: the soft kill that follows takes the stopping snapshot). `CheckpointFinished { ok: true }` is answered at once, so a vacate goes on while the job saves; each save and snapshot reaches the shadow in the job's report. Other jobs: `ok: false` |
//! | `RunBenchmarks` | runs two small Wasm loops ([`benchmark`]) and answers `BenchmarkFinished` |
//! | `Publish` | keeps the ad for `andes host status` and, in a pool, sends it to the collector with the slot's claim id |
//! | `ShutdownComplete` | the daemon's [`Daemon::run`] returns once no starter is left |
//! | `ClaimAccepted` | spends the slot's offer: a new claim id replaces it |
//! | other claim notices | logged; a claim the startd no longer holds ends its report (`claim_alive = false`) |
//!
//! A sandbox is `$(EXECUTE)/dir_<slot>_<n>`, empty when a job starts in it:
//! when a job ends its sandbox is emptied and kept for the slot's next job
//! (removed if it cannot be emptied, or if its starter had to be abandoned). A job compiled by `andes compile` also
//! gets `$(EXECUTE)/ckpt_<slot>_<n>`, the contents of the sandbox files its
//! snapshots name, kept until the shadow has had the last of them.
//!
//! Transparent checkpoints need [`SnapshotKeys`] ([`Daemon::set_snapshot_keys`]):
//! the host signs each snapshot with its own key and restores only snapshots
//! signed by keys the pool trusts as hosts.
//!
//! Claims ([`pool`]): the schedd-facing routes reach the daemon through
//! [`Remote::pool`]; [`Daemon::pool`] feeds the machine [`Event::MatchNotified`],
//! [`Event::ClaimRequested`] (or [`Event::BetterMatch`] on a claimed slot),
//! [`Event::ClaimActivated`] with the job's module and input files,
//! [`Event::JobUpdated`] and [`Event::ClaimReleased`], and keeps each claim's
//! report for the shadow's long poll. A claim whose lease runs out (no shadow
//! heard from for JobLeaseDuration) is released.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use andes_config::Config;
use andes_protocol::pool::public_claim_id;
use andes_startd::{
    Action, Event, MachineInfo, Measurements, Policy, PolicyError, ShutdownKind, SlotId, Startd,
    StarterOutcome, VacateKind,
};
use classad::{ClassAd, Expr, Value};
use tokio::sync::{mpsc, oneshot};

use crate::{benchmark, pool};
use andes_starter::control::{Clock, Control};
use andes_starter::engine::Host;
use andes_starter::starter::{Deferral, Ending, HOLD_FAILED_TO_START, JobResult, JobSpec, Limits};

/// The wasmtime version the host is built with (`WasmtimeVersion`).
pub const WASMTIME_VERSION: &str = "36.0.20";

/// The Wasm proposals the engine enables (`WasmFeatures`).
pub const WASM_FEATURES: &[&str] = &[
    "bulk-memory",
    "multi-value",
    "mutable-global",
    "reference-types",
    "saturating-float-to-int",
    "sign-extension",
    "simd",
];

/// A configuration holding `andes_startd`'s defaults and default policy
/// (as [`andes_startd::default_config`]) whose `$ENV(NAME)` reads `env`:
/// load the site's files on top of it.
pub fn base_config<I, K, V>(env: I) -> Config
where
    I: IntoIterator<Item = (K, V)>,
    K: Into<String>,
    V: Into<String>,
{
    let mut cfg = Config::with_env(env);
    andes_startd::policy::load_defaults(&mut cfg);
    cfg
}

/// Why the daemon cannot start, or a request failed.
#[derive(Debug)]
pub enum DaemonError {
    /// The startd policy is wrong.
    Policy(PolicyError),
    /// A configuration value is wrong.
    Config {
        /// The knob.
        name: String,
        /// Where it was defined (`file, line N`), when known.
        location: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A file or directory could not be used.
    Io {
        /// Which.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

impl fmt::Display for DaemonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DaemonError::Policy(e) => write!(f, "{e}"),
            DaemonError::Config { name, location: Some(l), message } => {
                write!(f, "{l}: {name}: {message}")
            }
            DaemonError::Config { name, location: None, message } => write!(f, "{name}: {message}"),
            DaemonError::Io { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for DaemonError {}

impl From<PolicyError> for DaemonError {
    fn from(e: PolicyError) -> Self {
        DaemonError::Policy(e)
    }
}

/// A backfill job the daemon can run: its ad and its module.
#[derive(Clone, Debug)]
pub struct BackfillJob {
    /// The job ad (`Cmd`, `Arguments`, `Environment`, `Out`, `Err`, limits).
    pub ad: ClassAd,
    /// The module's bytes, read from `Cmd` at startup.
    pub module: Arc<[u8]>,
}

/// How a host signs the transparent checkpoints it takes, and whose it
/// restores.
#[derive(Clone)]
pub struct SnapshotKeys {
    /// The public half of the host's key.
    pub public: [u8; 32],
    /// Signs with the host's key.
    pub sign: andes_starter::transparent::SignFn,
    /// Whose snapshots a restore accepts (the pool's hosts).
    pub trusted: andes_starter::transparent::TrustFn,
}

impl fmt::Debug for SnapshotKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotKeys").field("public", &hex::encode(self.public)).finish()
    }
}

/// Everything the daemon needs, read from the configuration.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The startd policy.
    pub policy: Policy,
    /// The machine.
    pub info: MachineInfo,
    /// EXECUTE: where job sandboxes are made.
    pub execute: PathBuf,
    /// The backfill jobs named by BACKFILL_JOBS.
    pub backfill: HashMap<String, BackfillJob>,
    /// STARTER_INITIAL_UPDATE_INTERVAL: seconds from a job's start to its
    /// first update to the shadow (HTCondor: 8).
    pub starter_initial_update: u64,
    /// STARTER_UPDATE_INTERVAL: seconds between later updates (HTCondor: 300).
    pub starter_update: u64,
    /// STARTD_HISTORY: the file each finished job's ad is appended to.
    pub history: Option<PathBuf>,
    /// ALIVE_INTERVAL: seconds between a schedd's keep-alives when its claim
    /// does not say (HTCondor's knob; andes: 10).
    pub alive_interval: u64,
    /// MAX_CLAIM_ALIVES_MISSED: keep-alives a claim may miss before it is
    /// released (HTCondor: 6; andes: 3).
    pub max_alives_missed: u64,
}

impl DaemonConfig {
    /// Reads the policy and the backfill jobs from `cfg`. Each name in
    /// BACKFILL_JOBS needs `BACKFILL_JOB_<name>`: a new-syntax job ad whose
    /// `Cmd` is the module's path (relative paths are taken from the current
    /// directory), e.g. `BACKFILL_JOB_primes = [ Cmd = "/opt/andes/primes.wasm";
    /// Arguments = "5000000" ]`.
    pub fn from_config(
        cfg: &Config,
        execute: PathBuf,
        info: MachineInfo,
    ) -> Result<DaemonConfig, DaemonError> {
        let policy = Policy::from_config(cfg)?;
        let mut backfill = HashMap::new();
        if policy.backfill {
            for name in &policy.backfill_jobs {
                let knob = format!("BACKFILL_JOB_{name}");
                let location = cfg.location(&knob).map(|l| l.to_string());
                let err = |message: String| DaemonError::Config {
                    name: knob.clone(),
                    location: location.clone(),
                    message,
                };
                let text = cfg
                    .get(&knob)
                    .map_err(|e| err(e.to_string()))?
                    .filter(|t| !t.trim().is_empty())
                    .ok_or_else(|| {
                        err(format!(
                            "BACKFILL_JOBS names `{name}`, but {knob} is not set \
                             (a job ad such as [ Cmd = \"/path/{name}.wasm\" ])"
                        ))
                    })?;
                let ad =
                    classad::parse_ad(&text).map_err(|e| err(format!("not a ClassAd: {e}")))?;
                let cmd = match ad.eval_attr("Cmd") {
                    Value::Str(s) if !s.is_empty() => PathBuf::from(s.to_string()),
                    _ => return Err(err("the ad has no Cmd (the module's path)".into())),
                };
                let module = std::fs::read(&cmd)
                    .map_err(|e| err(format!("cannot read Cmd {}: {e}", cmd.display())))?;
                backfill.insert(name.clone(), BackfillJob { ad, module: module.into() });
            }
        }
        let int = |name: &str, default: u64| -> u64 {
            cfg.get(name)
                .ok()
                .flatten()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .filter(|&v| v > 0)
                .unwrap_or(default)
        };
        Ok(DaemonConfig {
            policy,
            info,
            execute,
            backfill,
            starter_initial_update: int("STARTER_INITIAL_UPDATE_INTERVAL", 8),
            starter_update: int("STARTER_UPDATE_INTERVAL", 300),
            alive_interval: int("ALIVE_INTERVAL", 10),
            max_alives_missed: int("MAX_CLAIM_ALIVES_MISSED", 3),
            history: cfg
                .get("STARTD_HISTORY")
                .ok()
                .flatten()
                .filter(|p| !p.trim().is_empty())
                .map(PathBuf::from),
        })
    }
}

/// What a starter runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    /// A claimed job.
    Job,
    /// A backfill job.
    Backfill,
    /// The benchmarks.
    Benchmark,
}

struct Run {
    kind: RunKind,
    generation: u64,
    ctl: Arc<Control>,
    sandbox: PathBuf,
    task: tokio::task::JoinHandle<()>,
    last_cpu: f64,
    last_at: std::time::Instant,
    load: f64,
    /// Tells the daemon of each save of a cooperative job.
    saver: Option<tokio::task::JoinHandle<()>>,
    /// The contents of the files its snapshots name (a module compiled by
    /// `andes compile`, snapshots enabled).
    blobs: Option<Arc<pool::BlobDir>>,
    /// The snapshot it resumed from: its hash and the contents it names.
    restored: Option<(String, Arc<std::collections::HashSet<String>>)>,
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(t) = &self.saver {
            t.abort();
        }
    }
}

enum Finished {
    Starter(JobResult),
    Benchmark {
        mips: i64,
        kflops: i64,
    },
    /// The job saved its state (the guest SDK's `checkpoint.save`); it runs on.
    Saved,
    /// The starter took a transparent checkpoint (or failed to).
    Snapshot(Box<Result<andes_starter::transparent::Checkpoint, String>>),
}

struct Exit {
    slot: SlotId,
    generation: u64,
    finished: Finished,
}

/// How a starter ended, as the daemon saw it.
#[derive(Clone, Debug)]
pub struct ExitReport {
    /// The slot.
    pub slot: SlotId,
    /// What ran.
    pub kind: RunKind,
    /// How a job or backfill job ended (`None` for benchmarks).
    pub ending: Option<Ending>,
}

/// A source of measurements: given each slot's own job load
/// (`CondorLoadAvg`), the machine's [`Measurements`]; with `true`, the
/// slow-changing resources too (free disk and swap, which cost a look at
/// the file systems): asked every UPDATE_INTERVAL, while load and keyboard
/// are measured before every poll.
pub type Measurer = Box<dyn FnMut(Vec<f64>, bool) -> Measurements + Send>;

/// Where the daemon's log lines go (besides `tracing`): transitions,
/// starters' endings, refusals.
pub type Logger = Box<dyn FnMut(&str) + Send>;

/// A request from the HTTP API (or any other front end) to the daemon.
enum Request {
    Status(oneshot::Sender<Vec<ClassAd>>),
    Command(Command, oneshot::Sender<Result<String, String>>),
    Pool(pool::PoolRequest, oneshot::Sender<Result<pool::PoolReply, pool::PoolError>>),
}

/// A slot's ad for the collector, with its private part (the slot's current
/// claim id).
#[derive(Clone, Debug)]
pub struct PublishedAd {
    /// The public ad.
    pub ad: ClassAd,
    /// The private ad (`ClaimId`).
    pub private: ClassAd,
}

/// A command for the daemon.
#[derive(Clone, Debug)]
pub enum Command {
    /// `andes vacate`: one slot or all.
    Vacate {
        /// The slot, or all.
        slot: Option<SlotId>,
        /// Graceful or fast.
        kind: VacateKind,
    },
    /// `andes drain`: no new claims; running jobs retire (or are vacated at
    /// once) and the slots are Drained. `cancel` opens the machine again.
    Drain {
        /// Graceful or fast.
        kind: VacateKind,
        /// Cancel a drain instead.
        cancel: bool,
    },
    /// `andes checkpoint`: the checkpointable jobs of one slot or all
    /// checkpoint now and run on.
    Checkpoint {
        /// The slot, or all.
        slot: Option<SlotId>,
    },
    /// `andes host off`.
    Off(ShutdownKind),
    /// `andes host set-attr`. `KeyboardIdle` and `ConsoleIdle` set this way
    /// count up from the value set until cleared, or until the machine's own
    /// measured activity is more recent.
    SetAttr {
        /// The slot, or all.
        slot: Option<SlotId>,
        /// The attribute.
        name: String,
        /// The expression, or `None` to clear it.
        value: Option<Expr>,
    },
    /// `andes reconfig`: read the configuration again and apply it.
    Reconfig,
}

/// Reads the host's configuration again, as it was read at start
/// (`andes reconfig`).
pub type Reload = Arc<dyn Fn() -> Result<DaemonConfig, String> + Send + Sync>;

/// A cloneable way to reach a running [`Daemon`] (what the HTTP API holds).
#[derive(Clone, Debug)]
pub struct Remote {
    tx: mpsc::Sender<Request>,
}

impl Remote {
    /// The latest published ad of every slot, slot 1 first; `None` once the
    /// daemon has stopped.
    pub async fn status(&self) -> Option<Vec<ClassAd>> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Request::Status(tx)).await.ok()?;
        rx.await.ok()
    }

    /// Carries out a command: `Ok` with a message, or `Err` with why the
    /// startd refused it.
    pub async fn command(&self, command: Command) -> Result<String, String> {
        let (tx, rx) = oneshot::channel();
        let stopped = || "the host daemon has stopped".to_string();
        self.tx.send(Request::Command(command, tx)).await.map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    /// Carries out a request of the pool's routes.
    pub async fn pool(&self, req: pool::PoolRequest) -> Result<pool::PoolReply, pool::PoolError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Request::Pool(req, tx)).await.map_err(|_| pool::PoolError::Stopping)?;
        rx.await.map_err(|_| pool::PoolError::Stopping)?
    }
}

/// The daemon: the startd machine, its starters and the latest ads.
pub struct Daemon {
    startd: Startd,
    host: Arc<Host>,
    clock: Arc<dyn Clock>,
    machine_clock: std::sync::Mutex<MachineClock>,
    /// Offers of claimed slots the negotiator matched by user priority.
    priority_offers: HashSet<String>,
    execute: PathBuf,
    backfill: HashMap<String, BackfillJob>,
    runs: HashMap<SlotId, Run>,
    modules: HashMap<SlotId, Arc<[u8]>>,
    ads: BTreeMap<SlotId, ClassAd>,
    endings: HashMap<SlotId, Ending>,
    exits_tx: mpsc::UnboundedSender<Exit>,
    exits_rx: mpsc::UnboundedReceiver<Exit>,
    requests_tx: mpsc::Sender<Request>,
    requests_rx: mpsc::Receiver<Request>,
    measurer: Measurer,
    logger: Option<Logger>,
    update_interval: i64,
    next_measure: i64,
    generation: u64,
    shutdown_complete: bool,
    rejections: Vec<String>,
    /// Each slot's current offer: the claim id the collector hands on.
    offers: HashMap<SlotId, String>,
    claims: HashMap<String, pool::ClaimEntry>,
    /// Claims that ended before their shadow heard how the job ended: kept
    /// (until the Unix second given) so it still can.
    ended: HashMap<String, (pool::ClaimEntry, i64)>,
    /// A fast shutdown was asked for: no waiting for shadows.
    fast_shutdown: bool,
    /// Each slot's emptied sandbox, kept for its next job.
    spare: HashMap<SlotId, PathBuf>,
    /// Slots whose next job is one of a batch (its schedd saw the claim's
    /// jobs take under 10 ms each): it runs metered, since handing a job
    /// that short to a thread of its own costs more than fuel checks do.
    short: std::collections::HashSet<SlotId>,
    /// Whether a module (by digest) was compiled by `andes compile`:
    /// reading that means parsing the module, once per module, not per job.
    instrumented: HashMap<[u8; 32], bool>,
    store: pool::Modules,
    inputs: HashMap<SlotId, Vec<andes_protocol::pool::FileData>>,
    input_sizes: HashMap<SlotId, Vec<(String, u64)>>,
    /// The saved state an activation brought, until the job starts.
    saved_in: HashMap<SlotId, Arc<[u8]>>,
    /// The snapshot an activation brought, until its job starts.
    snapshot_in: HashMap<SlotId, andes_protocol::pool::SnapshotData>,
    snapshot_keys: Option<SnapshotKeys>,
    reload: Option<Reload>,
    starter_initial_update: u64,
    starter_update: u64,
    alive_interval: u64,
    max_alives_missed: u64,
    address: Option<String>,
    publisher: Option<mpsc::UnboundedSender<PublishedAd>>,
    history: Option<std::fs::File>,
    /// Slots whose job waits for its DeferralTime (the ad's JobDeferredUntil).
    deferred: std::collections::HashSet<SlotId>,
    deferred_tx: mpsc::UnboundedSender<SlotId>,
    deferred_rx: mpsc::UnboundedReceiver<SlotId>,
}

/// Sets or clears a slot's `JobDeferredUntil`: its job waits for its
/// DeferralTime (`andes status` shows the activity as Deferred).
fn deferred_attr(slot: SlotId, until: Option<i64>) -> Event {
    Event::SetAttribute {
        slot: Some(slot),
        name: "JobDeferredUntil".into(),
        value: until.map(|t| classad::Expr::from(Value::Int(t))),
    }
}

/// The slot of claim `c`, if `caller` is its claimant.
fn owned_by(c: &pool::ClaimEntry, caller: &str, claim_id: &str) -> Result<SlotId, pool::PoolError> {
    if c.claimant != caller {
        return Err(pool::PoolError::Forbidden(format!(
            "claim {claim_id} belongs to {}, not {caller}",
            c.claimant
        )));
    }
    Ok(c.slot)
}

fn unix_now(clock: &dyn Clock) -> i64 {
    i64::try_from(clock.unix_now()).unwrap_or(i64::MAX)
}

/// A step of the wall clock larger than this (milliseconds, against the
/// monotonic clock's advance since the last reading) is a step, not drift.
const STEP_TOLERANCE_MS: i64 = 2_000;

/// The time the startd machine runs on: the wall clock, except that a step of
/// it (NTP, an operator, a virtual machine resumed) moves none of the machine's
/// timers. The machine's time goes on with the monotonic clock across the step,
/// then converges on the wall clock by at most a tenth of the time that passes
/// (as `adjtime` slews), and never goes back. So a clock set back 90 s does
/// not stop the machine's updates and timeouts for 90 s, and one set forward
/// does not fire them all at once.
#[derive(Debug)]
pub struct MachineClock {
    last_mono: std::time::Instant,
    last_ms: i64,
    /// Machine time minus wall time, milliseconds.
    offset_ms: i64,
}

impl MachineClock {
    /// A machine clock at wall time `wall_ms` and monotonic instant `mono`.
    pub fn new(wall_ms: i64, mono: std::time::Instant) -> MachineClock {
        MachineClock { last_mono: mono, last_ms: wall_ms, offset_ms: 0 }
    }

    /// The machine's time (Unix milliseconds) when the wall clock reads
    /// `wall_ms` at monotonic instant `mono`.
    pub fn now_ms(&mut self, wall_ms: i64, mono: std::time::Instant) -> i64 {
        let elapsed = i64::try_from(mono.saturating_duration_since(self.last_mono).as_millis())
            .unwrap_or(i64::MAX);
        let expected = self.last_ms.saturating_add(elapsed);
        let mut offset = self.offset_ms;
        if (wall_ms.saturating_add(offset) - expected).abs() > STEP_TOLERANCE_MS {
            // The wall clock was stepped: the machine's time goes on as if not.
            offset = expected.saturating_sub(wall_ms);
        }
        // Slew toward the wall clock: at most a tenth of the time that passed.
        let slew = (elapsed / 10).min(offset.abs());
        offset -= offset.signum() * slew;
        let now = wall_ms.saturating_add(offset).max(self.last_ms);
        self.offset_ms = now - wall_ms;
        self.last_ms = now;
        self.last_mono = mono;
        now
    }
}

impl Daemon {
    /// A daemon for `config`, running jobs on `host`, reading time from
    /// `clock` and measuring the machine with `measurer` (use
    /// [`real_measurer`] in production). Creates EXECUTE and removes the
    /// sandboxes (`dir_*`) a previous run left in it.
    pub fn new(
        config: DaemonConfig,
        host: Arc<Host>,
        clock: Arc<dyn Clock>,
        measurer: Measurer,
    ) -> Result<Daemon, DaemonError> {
        // EXECUTE itself may be entered by others; each sandbox in it is
        // the daemon's alone (its umask).
        andes_beneath::private::create_dirs_reachable(&config.execute)
            .map_err(|error| DaemonError::Io { path: config.execute.clone(), error })?;
        // Sandboxes a previous run left behind (a crash) belong to no job now.
        if let Ok(entries) = std::fs::read_dir(&config.execute) {
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if ["dir_", "ckpt_", "out_", "in_"].iter().any(|p| name.starts_with(p)) {
                    remove_sandbox(&e.path());
                }
            }
        }
        let now = unix_now(clock.as_ref());
        let update_interval = config.policy.update_interval.max(1);
        let startd = Startd::new(config.policy, &config.info, now)?;
        let (exits_tx, exits_rx) = mpsc::unbounded_channel();
        let (requests_tx, requests_rx) = mpsc::channel(64);
        let (deferred_tx, deferred_rx) = mpsc::unbounded_channel();
        let ads = startd.slots().iter().map(|s| (s.id(), s.ad().clone())).collect();
        let offers = startd.slots().iter().map(|s| (s.id(), pool::new_claim_id(s.id()))).collect();
        let machine_clock =
            std::sync::Mutex::new(MachineClock::new(clock.unix_now_ms(), clock.now()));
        Ok(Daemon {
            startd,
            host,
            machine_clock,
            priority_offers: HashSet::new(),
            clock,
            execute: config.execute,
            backfill: config.backfill,
            runs: HashMap::new(),
            modules: HashMap::new(),
            ads,
            endings: HashMap::new(),
            exits_tx,
            exits_rx,
            deferred: Default::default(),
            deferred_tx,
            deferred_rx,
            requests_tx,
            requests_rx,
            measurer,
            logger: None,
            update_interval,
            next_measure: now,
            generation: 0,
            shutdown_complete: false,
            rejections: Vec::new(),
            offers,
            claims: HashMap::new(),
            ended: HashMap::new(),
            fast_shutdown: false,
            spare: HashMap::new(),
            short: Default::default(),
            instrumented: HashMap::new(),
            store: pool::Modules::default(),
            inputs: HashMap::new(),
            input_sizes: HashMap::new(),
            saved_in: HashMap::new(),
            snapshot_in: HashMap::new(),
            snapshot_keys: None,
            reload: None,
            starter_initial_update: config.starter_initial_update,
            starter_update: config.starter_update,
            alive_interval: config.alive_interval,
            max_alives_missed: config.max_alives_missed,
            address: None,
            publisher: None,
            history: config.history.as_ref().and_then(|p| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| tracing::warn!("STARTD_HISTORY {}: {e}", p.display()))
                    .ok()
            }),
        })
    }

    /// Lets the daemon take and restore transparent checkpoints of jobs
    /// compiled by `andes compile`: signed with `keys`, restored only when a
    /// trusted host signed them. Without keys such jobs run as plain ones.
    pub fn set_snapshot_keys(&mut self, keys: SnapshotKeys) {
        self.snapshot_keys = Some(keys);
    }

    /// How `andes reconfig` reads the configuration again.
    pub fn set_reload(&mut self, reload: Reload) {
        self.reload = Some(reload);
    }

    /// `andes reconfig`: the configuration read again applies while every
    /// slot keeps its state, claim and job (see [`Startd::reconfigure`]).
    fn reconfigure(&mut self) -> Result<String, String> {
        let reload = self.reload.clone().ok_or(
            "this host was not started from a configuration: there is nothing to read again",
        )?;
        let config = reload()?;
        let now = self.now();
        let r = self.startd.reconfigure(config.policy, now);
        self.update_interval = self.startd.policy().update_interval.max(1);
        self.next_measure = self.next_measure.min(now.saturating_add(self.update_interval));
        self.backfill = config.backfill;
        self.starter_initial_update = config.starter_initial_update;
        self.starter_update = config.starter_update;
        self.alive_interval = config.alive_interval;
        self.max_alives_missed = config.max_alives_missed;
        self.tick();
        let mut message = match r.changed.len() {
            0 => "configuration read again; no policy knob changed".to_string(),
            _ => format!("configuration read again; now in force: {}", r.changed.join(", ")),
        };
        if !r.at_restart.is_empty() {
            message.push_str(&format!(
                "; at the next start (the slot layout stays while the host runs): {}",
                r.at_restart.join(", ")
            ));
        }
        tracing::info!("andes host: {message}");
        Ok(message)
    }

    /// Joins a pool: every slot ad the startd publishes goes to `publisher`
    /// (with `MyAddress = address` and the slot's current claim id in the
    /// private part), starting with the current ones.
    pub fn join_pool(&mut self, address: String, publisher: mpsc::UnboundedSender<PublishedAd>) {
        self.address = Some(address);
        self.publisher = Some(publisher);
        for (slot, ad) in self.ads.clone() {
            self.send_ad(slot, ad);
        }
    }

    fn send_ad(&mut self, slot: SlotId, mut ad: ClassAd) {
        let Some(p) = &self.publisher else { return };
        if let Some(a) = &self.address {
            ad.insert_value("MyAddress", a.as_str());
            // HTCondor's form of the same: `<host:port>`.
            let authority = a.split_once("://").map_or(a.as_str(), |(_, rest)| rest);
            let authority = authority.split('/').next().unwrap_or(authority);
            ad.insert_value("StartdIpAddr", format!("<{authority}>"));
        }
        let mut private = ClassAd::new();
        if let Some(offer) = self.offers.get(&slot) {
            private.insert_value("ClaimId", offer.as_str());
        }
        let _ = p.send(PublishedAd { ad, private });
    }

    /// Sends the daemon's log lines to `logger` too.
    pub fn set_logger(&mut self, logger: Logger) {
        self.logger = Some(logger);
    }

    fn log(&mut self, line: String) {
        tracing::info!("{line}");
        if let Some(l) = &mut self.logger {
            l(&line);
        }
    }

    /// A handle for the HTTP API.
    pub fn remote(&self) -> Remote {
        Remote { tx: self.requests_tx.clone() }
    }

    /// The state machine (read only: feed it through [`Daemon::feed`]).
    pub fn startd(&self) -> &Startd {
        &self.startd
    }

    /// The time the daemon works with: its clock's Unix seconds, through a
    /// [`MachineClock`] so that a step of the wall clock moves no timer.
    pub fn now(&self) -> i64 {
        let mut c = self.machine_clock.lock().unwrap_or_else(|e| e.into_inner());
        c.now_ms(self.clock.unix_now_ms(), self.clock.now()).div_euclid(1000)
    }

    /// Feeds `event` at [`Daemon::now`], carries out the actions, and feeds
    /// on the events those produce at once (a refused checkpoint, a job that
    /// could not start). Returns every action, in order.
    pub fn feed(&mut self, event: Event) -> Vec<Action> {
        let now = self.now();
        let mut queue = VecDeque::from([event]);
        let mut all = Vec::new();
        // Each follow-up event answers one action of a bounded kind; the cap
        // only guards against a machine that would loop.
        let mut budget = 10_000usize;
        while let Some(ev) = queue.pop_front() {
            if budget == 0 {
                self.log("the startd kept asking for follow-up events; stopped".into());
                break;
            }
            budget -= 1;
            let mut acts = self.startd.handle(now, ev);
            for a in &mut acts {
                self.carry_out(a, &mut queue);
            }
            all.extend(acts);
        }
        self.reconcile_claims();
        all
    }

    /// Claims the startd no longer holds are over: their shadows hear so.
    fn reconcile_claims(&mut self) {
        if self.claims.is_empty() {
            return;
        }
        let held: std::collections::HashSet<String> = self
            .startd
            .slots()
            .iter()
            .flat_map(|s| [s.claim_id(), s.pending_claim_id()])
            .flatten()
            .map(str::to_string)
            .collect();
        let gone: Vec<String> =
            self.claims.keys().filter(|id| !held.contains(*id)).cloned().collect();
        let until = self.now().saturating_add(pool::FINAL_REPORT_KEEP);
        for id in gone {
            if let Some(c) = self.claims.remove(&id) {
                self.log(format!("slot {}: claim ended", c.slot));
                c.publish(|r| {
                    r.claim_alive = false;
                    r.queued = 0;
                    if r.state == andes_protocol::pool::RunState::Running
                        || r.state == andes_protocol::pool::RunState::Suspended
                    {
                        r.state = andes_protocol::pool::RunState::Exited;
                        r.evicted = true;
                        r.ctl = None;
                    }
                });
                if c.owes_end() {
                    self.ended.insert(id, (c, until));
                }
            }
        }
    }

    /// Forgets ended claims whose shadow has heard the end, or stopped
    /// asking.
    fn prune_ended(&mut self) {
        let now = self.now();
        self.ended.retain(|_, (c, until)| c.owes_end() && now <= *until);
    }

    /// True while the daemon should stay up for shadows still owed the end
    /// of their job (not after a fast shutdown).
    fn owes_shadows(&mut self) -> bool {
        self.prune_ended();
        !self.fast_shutdown && !self.ended.is_empty()
    }

    /// The claim `claim_id`, live or ended (its final report still kept), if
    /// `caller` holds it: for fetching what its reports named as streamed.
    fn claim_or_ended(
        &self,
        caller: &str,
        claim_id: &str,
    ) -> Result<&pool::ClaimEntry, pool::PoolError> {
        let c = self
            .claims
            .get(claim_id)
            .or_else(|| self.ended.get(claim_id).map(|(c, _)| c))
            .ok_or_else(|| {
                pool::PoolError::NotFound(format!(
                    "no claim {}",
                    andes_protocol::pool::public_claim_id(claim_id)
                ))
            })?;
        owned_by(c, caller, claim_id)?;
        Ok(c)
    }

    /// Where the streamed input files of the slot's claim are uploaded.
    fn uploaded_dir(&self, slot: SlotId) -> PathBuf {
        self.execute.join(format!("in_{slot}"))
    }

    fn claim_of_slot(&self, slot: SlotId) -> Option<&pool::ClaimEntry> {
        let id = self.startd.slots().iter().find(|s| s.id() == slot)?.claim_id()?;
        self.claims.get(id)
    }

    /// Serves a request of the pool's routes.
    pub fn pool(&mut self, req: pool::PoolRequest) -> Result<pool::PoolReply, pool::PoolError> {
        use andes_protocol::pool::ClaimReply;
        use pool::{PoolError, PoolReply, PoolRequest};
        let owned = |me: &Self, caller: &str, claim_id: &str| -> Result<SlotId, PoolError> {
            let c = me.claims.get(claim_id).ok_or_else(|| {
                PoolError::NotFound(format!("no claim {} here", public_claim_id(claim_id)))
            })?;
            owned_by(c, caller, claim_id)
        };
        match req {
            PoolRequest::Match(m) => {
                let slot = pool::claim_slot(&m.claim_id)
                    .filter(|s| self.offers.get(s) == Some(&m.claim_id))
                    .ok_or_else(|| {
                        PoolError::NotFound(format!("no offer {}", public_claim_id(&m.claim_id)))
                    })?;
                // Only current offers are remembered as priority preemptions.
                let offers: HashSet<&String> = self.offers.values().collect();
                self.priority_offers.retain(|c| offers.contains(c));
                if m.priority {
                    self.priority_offers.insert(m.claim_id.clone());
                }
                self.feed(Event::MatchNotified { slot, claim_id: m.claim_id });
                Ok(PoolReply::Done)
            }
            PoolRequest::Claim { caller, req } => {
                let refused = |reason: String| {
                    Ok(PoolReply::Claim(ClaimReply {
                        accepted: false,
                        reason: Some(reason),
                        slot_ad: None,
                    }))
                };
                // A claimant that restarted lets go at once of what its
                // earlier life held and runs no job.
                if let Some(inc) = &req.incarnation {
                    self.forget_earlier_lives(&caller, inc);
                }
                let Some(slot) = pool::claim_slot(&req.claim_id)
                    .filter(|s| self.offers.get(s) == Some(&req.claim_id))
                else {
                    return refused(format!(
                        "claim id {} is not this host's current offer (already claimed, or stale)",
                        public_claim_id(&req.claim_id)
                    ));
                };
                let alive = req
                    .alive_interval
                    .filter(|&a| a > 0)
                    .unwrap_or(self.alive_interval)
                    .clamp(1, 3600);
                let claim_lease = Duration::from_secs(alive.saturating_mul(self.max_alives_missed));
                let incarnation = req.incarnation.clone();
                let ad = classad::parse_ad(&req.ad)
                    .map_err(|e| PoolError::BadInput(format!("the request ad: {e}")))?;
                let claim = andes_startd::ClaimRequest {
                    claim_id: req.claim_id.clone(),
                    client_machine: req.client_machine,
                    owner: req.owner,
                    user: req.user,
                    ad,
                };
                let claimed =
                    self.startd.slots().iter().any(|s| s.id() == slot && s.claim_id().is_some());
                // A claim on a claimed slot preempts by the machine's RANK
                // (which the startd checks), or by user priority when the
                // negotiator said so for this offer; never on the claimant's
                // word alone.
                let by_priority = self.priority_offers.remove(&req.claim_id);
                let event = if claimed && by_priority {
                    Event::BetterMatch { slot, claim }
                } else {
                    Event::ClaimRequested { slot, claim }
                };
                // The claim is recorded first so that the startd's actions
                // find it; a refusal removes it again.
                let mut entry = pool::ClaimEntry::new(slot, caller, self.clock.now(), claim_lease);
                entry.incarnation = incarnation;
                self.claims.insert(req.claim_id.clone(), entry);
                let acts = self.feed(event);
                let refusal = acts.iter().find_map(|a| match a {
                    Action::ClaimRefused { claim_id, reason, .. } if *claim_id == req.claim_id => {
                        Some(reason.clone())
                    }
                    _ => None,
                });
                let held = self.startd.slots().iter().any(|s| {
                    s.claim_id() == Some(req.claim_id.as_str())
                        || s.pending_claim_id() == Some(req.claim_id.as_str())
                });
                if let Some(reason) =
                    refusal.or((!held).then(|| "the startd did not accept the claim".to_string()))
                {
                    self.claims.remove(&req.claim_id);
                    return refused(reason);
                }
                let slot_ad = self.ads.get(&slot).map(|a| a.to_string());
                Ok(PoolReply::Claim(ClaimReply { accepted: true, reason: None, slot_ad }))
            }
            PoolRequest::HasModule(d) => Ok(PoolReply::Has(self.store.get(&d).is_some())),
            PoolRequest::PutModule(d, bytes) => {
                self.store.put(d, bytes);
                Ok(PoolReply::Done)
            }
            PoolRequest::Activate { caller, req, ads } => {
                let (job, more) = *ads;
                let slot = owned(self, &caller, &req.claim_id)?;
                if self
                    .startd
                    .slots()
                    .iter()
                    .any(|s| s.id() == slot && s.pending_claim_id() == Some(req.claim_id.as_str()))
                {
                    // A preempting claim waits for the slot's current job to go.
                    return Err(PoolError::Pending);
                }
                // A job runs once: a second activation of a job this host
                // already runs or holds queued (its schedd lost track) is
                // refused.
                if let Value::Str(gid) = job.eval_attr("GlobalJobId")
                    && self.holds_job(&gid)
                {
                    return Err(PoolError::Refused(format!(
                        "job {gid} is already running or queued on this host"
                    )));
                }
                let module = self.store.get(&req.module_digest).ok_or(PoolError::NeedModule)?;
                pool::check_inputs(&job, &req.inputs)?;
                let snapshot_bytes: Vec<andes_protocol::pool::FileData> = req
                    .snapshot
                    .iter()
                    .filter_map(|s| s.streamed.clone())
                    .chain(req.saved_state.iter().filter_map(|s| s.streamed.clone()))
                    .map(|st| {
                        andes_protocol::pool::FileData::streamed("a checkpoint", st.size, st.sha256)
                    })
                    .collect();
                let snapshot_parts =
                    req.snapshot.iter().flat_map(|s| s.blobs.iter()).chain(snapshot_bytes.iter());
                pool::check_uploaded(
                    &self.uploaded_dir(slot),
                    req.inputs
                        .iter()
                        .chain(req.more.iter().flat_map(|q| q.inputs.iter()))
                        .chain(snapshot_parts),
                )?;
                let mono = self.clock.now();
                if let Some(c) = self.claims.get_mut(&req.claim_id) {
                    c.acknowledged();
                    c.job_lease = Some(Duration::from_secs(req.lease_secs.min(1 << 32)));
                    c.renewed = mono;
                    c.updates_sent = 0;
                }
                self.input_sizes
                    .insert(slot, req.inputs.iter().map(|f| (f.name.clone(), f.len())).collect());
                let req = *req;
                self.inputs.insert(slot, req.inputs);
                if let Some(st) = req.saved_state {
                    let data = match &st.streamed {
                        None => st.data,
                        Some(s) => {
                            let sha = s.sha256.as_deref().unwrap_or_default();
                            std::fs::read(self.uploaded_dir(slot).join(sha)).map_err(|e| {
                                PoolError::BadInput(format!(
                                    "the saved state was not uploaded: {e}"
                                ))
                            })?
                        }
                    };
                    self.saved_in.insert(slot, Arc::from(data));
                }
                if let Some(snap) = req.snapshot {
                    pool::check_snapshot(&snap, &self.uploaded_dir(slot))?;
                    self.snapshot_in.insert(slot, snap);
                }
                let batch = !req.more.is_empty();
                let mut queue = std::collections::VecDeque::with_capacity(req.more.len());
                for (q, job) in req.more.into_iter().zip(more) {
                    let module = self.store.get(&q.module_digest).ok_or(PoolError::NeedModule)?;
                    pool::check_inputs(&job, &q.inputs)?;
                    queue.push_back(pool::Queued { job, module, inputs: q.inputs });
                }
                if let Some(c) = self.claims.get_mut(&req.claim_id) {
                    let n = queue.len() as u32;
                    c.queue = queue;
                    // A new activation: its jobs' ends are reported afresh.
                    c.publish(|r| {
                        r.ended = Arc::new(Vec::new());
                        r.kept = Arc::new(HashMap::new());
                        r.queued = n;
                    });
                }
                if batch {
                    self.short.insert(slot);
                }
                let acts = self.activate(slot, req.claim_id.clone(), job, module);
                self.short.remove(&slot);
                self.inputs.remove(&slot);
                self.saved_in.remove(&slot);
                self.snapshot_in.remove(&slot);
                if let Some(reason) = acts.iter().find_map(|a| match a {
                    Action::ActivationRefused { reason, .. } => Some(reason.clone()),
                    _ => None,
                }) {
                    return Err(PoolError::Refused(reason));
                }
                Ok(PoolReply::Done)
            }
            PoolRequest::Subscribe { caller, claim_id, incarnation } => {
                self.prune_ended();
                if let Some((c, _)) = self.ended.get_mut(&claim_id) {
                    // The claim is over; its shadow still hears how it ended.
                    owned_by(c, &caller, &claim_id)?;
                    follows_again(c, incarnation);
                    return Ok(PoolReply::Reports(
                        c.report.subscribe(),
                        self.starter_initial_update,
                        self.starter_update,
                        c.end_sent.clone(),
                        c.heard.clone(),
                    ));
                }
                owned(self, &caller, &claim_id)?;
                let mono = self.clock.now();
                let c = self.claims.get_mut(&claim_id).ok_or(PoolError::Stopping)?;
                c.heard.now();
                c.renewed = mono;
                follows_again(c, incarnation);
                Ok(PoolReply::Reports(
                    c.report.subscribe(),
                    self.starter_initial_update,
                    self.starter_update,
                    c.end_sent.clone(),
                    c.heard.clone(),
                ))
            }
            PoolRequest::Alive { caller, req } => {
                let released = self.forget_earlier_lives(&caller, &req.incarnation);
                let mono = self.clock.now();
                let mut unknown = Vec::new();
                for id in req.claims {
                    match self.claims.get_mut(&id) {
                        Some(c) if c.claimant == caller => {
                            c.renewed = mono;
                            follows_again(c, Some(req.incarnation.clone()));
                        }
                        _ => unknown.push(id),
                    }
                }
                Ok(PoolReply::Alive(andes_protocol::pool::AliveReply { unknown, released }))
            }
            PoolRequest::Edit { caller, req } => {
                let slot = owned(self, &caller, &req.claim_id)?;
                if let Some(c) = self.claims.get_mut(&req.claim_id) {
                    c.renewed = self.clock.now();
                    c.acknowledged();
                }
                let attrs = classad::parse_ad(&req.attrs)
                    .map_err(|e| PoolError::BadInput(format!("the attributes: {e}")))?;
                self.feed(Event::JobUpdated { slot, claim_id: req.claim_id, attrs });
                // Policy sees the change now, not at the next poll.
                self.tick();
                Ok(PoolReply::Done)
            }
            PoolRequest::Sandbox { caller, claim_id } => {
                let slot = owned(self, &caller, &claim_id)?;
                match self.runs.get(&slot).filter(|r| r.kind == RunKind::Job) {
                    Some(r) => Ok(PoolReply::Sandbox(r.sandbox.clone())),
                    None => Err(PoolError::NotFound("the claim runs no job now".into())),
                }
            }
            PoolRequest::VacateJob { caller, req } => {
                // As `andes vacate` of its slot, for the claim's owner only.
                let slot = owned(self, &caller, &req.claim_id)?;
                if let Some(c) = self.claims.get_mut(&req.claim_id) {
                    c.acknowledged();
                }
                self.feed(Event::Vacate { slot: Some(slot), kind: VacateKind::Graceful });
                self.tick();
                Ok(PoolReply::Done)
            }
            PoolRequest::Withdraw { caller, req } => {
                owned(self, &caller, &req.claim_id)?;
                let c = self.claims.get_mut(&req.claim_id).ok_or(PoolError::Stopping)?;
                c.acknowledged();
                let is_it = |q: &pool::Queued| {
                    let id = |name| match q.job.eval_attr(name) {
                        classad::Value::Int(n) => u32::try_from(n).ok(),
                        _ => None,
                    };
                    id("ClusterId") == Some(req.cluster) && id("ProcId") == Some(req.proc)
                };
                let Some(at) = c.queue.iter().position(is_it) else {
                    return Ok(PoolReply::Withdrawn(false));
                };
                c.queue.remove(at);
                let queued = c.queue.len() as u32;
                c.publish(|r| r.queued = queued);
                Ok(PoolReply::Withdrawn(true))
            }
            PoolRequest::InputDir { caller, claim_id } => {
                let slot = owned(self, &caller, &claim_id)?;
                let dir = self.uploaded_dir(slot);
                std::fs::create_dir_all(&dir)
                    .map_err(|e| PoolError::Refused(format!("{}: {e}", dir.display())))?;
                let disk = match self.ads.get(&slot).map(|a| a.eval_attr("Disk")) {
                    Some(Value::Int(kib)) if kib > 0 => (kib as u64).saturating_mul(1024),
                    _ => 0,
                };
                let used: u64 = std::fs::read_dir(&dir)
                    .map(|rd| rd.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
                    .unwrap_or(0);
                Ok(PoolReply::InputDir(dir, disk.saturating_sub(used)))
            }
            PoolRequest::Saved { caller, req } => {
                let c = self.claim_or_ended(&caller, &req.claim_id)?;
                match c.report.borrow().latest_saved() {
                    Some((n, d)) if n == req.seq => Ok(PoolReply::Saved(d)),
                    _ => Err(PoolError::NotFound(format!(
                        "saved state {} is no longer the job's latest",
                        req.seq
                    ))),
                }
            }
            PoolRequest::SnapshotPart { caller, req } => {
                let c = self.claim_or_ended(&caller, &req.claim_id)?;
                let r = c.report.borrow();
                let snap = r.snapshot.as_ref().filter(|s| s.hash == req.hash).ok_or_else(|| {
                    PoolError::NotFound(format!(
                        "checkpoint {} is no longer the job's latest",
                        req.hash
                    ))
                })?;
                match &req.blob {
                    None => Ok(PoolReply::SnapshotBytes(snap.bytes.clone())),
                    Some(b) if snap.files.contains(b) && andes_snapshot::is_hash(b) => {
                        Ok(PoolReply::SnapshotBlob(snap.blobs.clone(), snap.blobs.store.path(b)))
                    }
                    Some(b) => Err(PoolError::NotFound(format!(
                        "checkpoint {} names no file content {b}",
                        req.hash
                    ))),
                }
            }
            PoolRequest::Output { caller, req } => {
                let c = self.claim_or_ended(&caller, &req.claim_id)?;
                let r = c.report.borrow();
                let found = r.kept.get(&req.job).and_then(|k| {
                    k.files.get(&req.name).map(|p| PoolReply::Output(k.clone(), p.clone()))
                });
                found.ok_or_else(|| {
                    PoolError::NotFound(format!(
                        "job {} has no output file {:?} kept for transfer",
                        req.job, req.name
                    ))
                })
            }
            PoolRequest::Release { caller, claim_id } => {
                // Releasing a claim that already ended acknowledges its end.
                if let Some((c, _)) = self.ended.get(&claim_id) {
                    owned_by(c, &caller, &claim_id)?;
                    c.acknowledged();
                    self.prune_ended();
                    return Ok(PoolReply::Done);
                }
                let slot = owned(self, &caller, &claim_id)?;
                if let Some(c) = self.claims.get(&claim_id) {
                    c.acknowledged();
                }
                self.feed(Event::ClaimReleased { slot, claim_id });
                self.tick();
                Ok(PoolReply::Done)
            }
        }
    }

    /// True when a slot runs, or a claim holds queued, the job `gid`.
    fn holds_job(&self, gid: &str) -> bool {
        let is = |ad: &ClassAd| matches!(ad.eval_attr("GlobalJobId"), Value::Str(g) if *g == *gid);
        self.startd.slots().iter().any(|s| s.job().is_some_and(is))
            || self.claims.values().any(|c| c.queue.iter().any(|q| is(&q.job)))
    }

    /// True while claim `c`'s slot runs (or has queued) a job of it.
    fn claim_running(&self, c: &pool::ClaimEntry) -> bool {
        self.runs.get(&c.slot).is_some_and(|r| r.kind == RunKind::Job) || !c.queue.is_empty()
    }

    /// Claims whose lease ran out: released, their jobs killed. A claim runs
    /// on its job lease while a job of it runs, on its keep-alive lease
    /// otherwise (so a claim accepted and never used, or left idle by a
    /// schedd that died, is back to Unclaimed within seconds).
    fn expire_leases(&mut self) {
        let mono = self.clock.now();
        let mut expired: Vec<(SlotId, String, bool)> = Vec::new();
        for (id, c) in &self.claims {
            let running = self.claim_running(c);
            let listening = c.report.receiver_count() > 0;
            if !listening && mono >= c.expires(running) {
                expired.push((c.slot, id.clone(), running));
            }
        }
        for c in self.claims.values_mut() {
            if c.report.receiver_count() > 0 {
                // A shadow is listening right now: the lease is live.
                c.renewed = mono;
            }
        }
        for (slot, id, running) in expired {
            let what = if running { "the job lease" } else { "the claim's lease (no keep-alive)" };
            self.log(format!(
                "slot {slot}: claim {}: {what} expired; releasing",
                public_claim_id(&id)
            ));
            self.feed(Event::ClaimReleased { slot, claim_id: id });
        }
    }

    /// Releases the claims of `claimant`'s earlier incarnations that run no
    /// job (those that do wait for the new one to follow them, or for their
    /// job lease); returns how many.
    fn forget_earlier_lives(&mut self, claimant: &str, incarnation: &str) -> u32 {
        let old: Vec<(SlotId, String)> = self
            .claims
            .iter()
            .filter(|(_, c)| {
                c.claimant == claimant
                    && c.incarnation.as_deref().is_some_and(|i| i != incarnation)
                    && !self.claim_running(c)
            })
            .map(|(id, c)| (c.slot, id.clone()))
            .collect();
        for (slot, id) in &old {
            self.log(format!(
                "slot {slot}: claim {}: its schedd restarted; releasing",
                public_claim_id(id)
            ));
            self.feed(Event::ClaimReleased { slot: *slot, claim_id: id.clone() });
        }
        old.len() as u32
    }

    /// Activates a claim with a job and the module it runs: hands the module
    /// over, then feeds [`Event::ClaimActivated`].
    pub fn activate(
        &mut self,
        slot: SlotId,
        claim_id: String,
        job: ClassAd,
        module: Arc<[u8]>,
    ) -> Vec<Action> {
        self.modules.insert(slot, module);
        let acts = self.feed(Event::ClaimActivated { slot, claim_id, job });
        self.modules.remove(&slot);
        acts
    }

    /// Takes a round of measurements and feeds them.
    pub fn measure(&mut self) -> Vec<Action> {
        let now = self.now();
        let resources = now >= self.next_measure;
        if resources {
            self.next_measure = now.saturating_add(self.update_interval);
        }
        let loads = self.condor_loads();
        let m = (self.measurer)(loads, resources);
        let mut acts = self.feed(Event::Measured(m));
        // The running jobs' memory as it is now, for the slots' ads and the
        // policy (HTCondor's starter updates the startd likewise).
        let mut updates = Vec::new();
        for (&slot, r) in &self.runs {
            let claim = self.startd.slot(slot).and_then(|s| s.claim_id().map(str::to_string));
            if let (RunKind::Job, Some(claim_id)) = (r.kind, claim) {
                let mut attrs = ClassAd::new();
                for (n, v) in r.ctl.usage(self.clock.as_ref()).memory_attrs() {
                    attrs.insert_value(n, v);
                }
                updates.push(Event::JobUpdated { slot, claim_id, attrs });
            }
        }
        for e in updates {
            acts.extend(self.feed(e));
        }
        acts
    }

    /// Releases the claims whose lease ran out, then feeds a [`Event::Tick`].
    /// When the tick is one of the startd's polls (every POLLING_INTERVAL
    /// while a slot is in use) the machine is measured first, so the policy
    /// sees an owner who came back within seconds, as HTCondor's startd
    /// does; otherwise every UPDATE_INTERVAL.
    pub fn tick(&mut self) -> Vec<Action> {
        self.expire_leases();
        let now = self.now();
        let mut acts = Vec::new();
        if now >= self.next_measure.min(self.startd.next_poll()) {
            acts = self.measure();
        }
        acts.extend(self.feed(Event::Tick));
        acts
    }

    /// When the daemon next needs to wake: the machine's next deadline or
    /// the next measurement, in Unix seconds.
    pub fn next_deadline(&self) -> i64 {
        let mono = self.clock.now();
        let lease = self.claims.values().map(|c| c.expires(self.claim_running(c))).min().map_or(
            i64::MAX,
            |t| {
                let secs = t.saturating_duration_since(mono).as_secs_f64().ceil() as i64;
                self.now().saturating_add(secs)
            },
        );
        self.startd.next_deadline().min(self.next_measure).min(lease)
    }

    /// Carries out a command, then evaluates the policy at once (a tick), so
    /// its effect shows without waiting for the next poll.
    pub fn command(&mut self, command: Command) -> Result<String, String> {
        self.rejections.clear();
        let message = match &command {
            Command::Vacate { slot, kind } => {
                let what = slot.map_or("all slots".to_string(), |s| format!("slot {s}"));
                format!("vacating {what} ({})", vacate_word(*kind))
            }
            Command::Drain { cancel: true, .. } => "drain cancelled".to_string(),
            Command::Drain { kind, .. } => format!("draining ({})", vacate_word(*kind)),
            Command::Checkpoint { slot } => {
                let what = slot.map_or("the jobs of all slots".to_string(), |s| {
                    format!("the job of slot {s}")
                });
                format!("checkpointing {what}")
            }
            Command::Off(kind) => {
                self.fast_shutdown |= *kind == ShutdownKind::Fast;
                format!("shutting down ({})", shutdown_word(*kind))
            }
            Command::Reconfig => return self.reconfigure(),
            Command::SetAttr { slot, name, value } => {
                let what = slot.map_or("every slot".to_string(), |s| format!("slot {s}"));
                match value {
                    Some(v) => format!("{name} = {v} on {what}"),
                    None => format!("{name} cleared on {what}"),
                }
            }
        };
        let event = match command {
            Command::Vacate { slot, kind } => Event::Vacate { slot, kind },
            Command::Checkpoint { slot } => Event::CheckpointNow { slot },
            Command::Drain { cancel: true, .. } => Event::CancelDrain,
            Command::Drain { kind, .. } => Event::Drain { kind },
            Command::Off(kind) => Event::Shutdown(kind),
            Command::SetAttr { slot, name, value } => Event::SetAttribute { slot, name, value },
            Command::Reconfig => return Ok(message),
        };
        self.feed(event);
        if !self.rejections.is_empty() {
            return Err(self.rejections.join("; "));
        }
        self.tick();
        Ok(message)
    }

    /// The latest published ad of every slot, slot 1 first.
    pub fn ads(&self) -> Vec<ClassAd> {
        self.ads.values().cloned().collect()
    }

    /// True once the machine said the shutdown is complete.
    pub fn shutdown_complete(&self) -> bool {
        self.shutdown_complete
    }

    /// True once the shutdown is complete and no starter is left.
    pub fn finished(&self) -> bool {
        self.shutdown_complete && self.runs.is_empty()
    }

    /// The control of the slot's running starter.
    pub fn control(&self, slot: SlotId) -> Option<Arc<Control>> {
        self.runs.get(&slot).map(|r| r.ctl.clone())
    }

    /// What the slot's starter runs, if one does.
    pub fn running(&self, slot: SlotId) -> Option<RunKind> {
        self.runs.get(&slot).map(|r| r.kind)
    }

    /// The sandbox of the slot's running starter.
    pub fn sandbox(&self, slot: SlotId) -> Option<&Path> {
        self.runs.get(&slot).map(|r| r.sandbox.as_path())
    }

    /// How the slot's last job or backfill job ended.
    pub fn last_ending(&self, slot: SlotId) -> Option<&Ending> {
        self.endings.get(&slot)
    }

    /// Waits for the next starter to end, feeds the machine what it means
    /// and reports it. Never returns while no starter runs.
    pub async fn next_exit(&mut self) -> ExitReport {
        loop {
            // The daemon holds a sender, so the channel never closes.
            let Some(exit) = self.exits_rx.recv().await else {
                std::future::pending::<()>().await;
                continue;
            };
            if let Some(r) = self.on_exit(exit) {
                return r;
            }
        }
    }

    fn on_exit(&mut self, exit: Exit) -> Option<ExitReport> {
        let slot = exit.slot;
        if self.runs.get(&slot).is_none_or(|r| r.generation != exit.generation) {
            // An abandoned starter that ended after all.
            return None;
        }
        if let Finished::Saved = exit.finished {
            // The job saved its state: the shadow hears of it at once.
            let saved = self.runs.get(&slot).map(|r| r.ctl.saved());
            if let (Some(c), Some((n, Some(d)))) = (self.claim_of_slot(slot), saved) {
                c.publish(|r| r.saved = Some((n, d)));
            }
            return None;
        }
        if let Finished::Snapshot(taken) = exit.finished {
            self.on_snapshot(slot, *taken);
            return None;
        }
        let run = self.runs.remove(&slot)?;
        if self.deferred.remove(&slot) {
            self.feed(deferred_attr(slot, None));
        }
        if run.kind == RunKind::Job
            && let Finished::Starter(result) = &exit.finished
        {
            self.report_exit(slot, &run, result);
        }
        if run.sandbox.exists() {
            // Not kept for streamed outputs (renamed away): used again.
            self.recycle_sandbox(slot, run.sandbox.clone());
        }
        let (ending, event) = match exit.finished {
            Finished::Benchmark { mips, kflops } => {
                (None, Event::BenchmarkFinished { slot, mips, kflops })
            }
            Finished::Saved | Finished::Snapshot(_) => return None,
            Finished::Starter(result) => {
                let event = match run.kind {
                    RunKind::Backfill => Event::BackfillExited { slot },
                    _ => Event::StarterExited { slot, outcome: outcome(&result.ending) },
                };
                self.log(format!("slot {slot}: {:?} ended: {:?}", run.kind, result.ending));
                self.endings.insert(slot, result.ending.clone());
                (Some(result.ending), event)
            }
        };
        self.feed(event);
        if run.kind == RunKind::Job {
            self.continue_claim(slot);
        }
        Some(ExitReport { slot, kind: run.kind, ending })
    }

    /// A transparent checkpoint of the slot's job: the shadow hears of it at
    /// once (its report carries the snapshot and the file contents it names).
    fn on_snapshot(
        &mut self,
        slot: SlotId,
        taken: Result<andes_starter::transparent::Checkpoint, String>,
    ) {
        let c = match taken {
            Ok(c) => c,
            Err(e) => {
                self.log(format!("slot {slot}: checkpoint failed: {e}"));
                return;
            }
        };
        let Some(blobs) = self.runs.get(&slot).and_then(|r| r.blobs.clone()) else { return };
        let Some(hash) = andes_snapshot::stored_hash(&c.bytes) else { return };
        let files: Arc<std::collections::HashSet<String>> =
            Arc::new(c.header.files.iter().map(|f| f.blake3.clone()).collect());
        self.log(format!(
            "slot {slot}: checkpoint taken ({} bytes, {} files{})",
            c.bytes.len(),
            files.len(),
            if c.stopping { ", the job stops" } else { "" }
        ));
        let snap = Arc::new(pool::HostSnapshot {
            hash: hash.clone(),
            bytes: Arc::new(c.bytes),
            files: files.clone(),
            blobs,
            stopping: c.stopping,
        });
        if let Some(claim) = self.claim_of_slot(slot) {
            claim.publish(|r| {
                Arc::make_mut(&mut r.known).insert(hash, files);
                r.snapshot = Some(snap);
            });
        }
    }

    /// Appends the startd's copy of a finished job's ad to STARTD_HISTORY, in
    /// HTCondor's history-file form (the ad, then a `***` banner). A failure
    /// is logged and otherwise dropped, as HTCondor's startd does.
    fn write_history(&mut self, job: &ClassAd, ending: &ClassAd) {
        use std::io::Write as _;
        let now = self.now();
        let Some(f) = &mut self.history else { return };
        let mut ad = job.clone();
        ad.update(ending);
        ad.insert_value("CompletionDate", now);
        let int = |n: &str| match ad.eval_attr(n) {
            Value::Int(v) => v,
            _ => -1,
        };
        let owner = match ad.eval_attr("Owner") {
            Value::Str(s) => s.to_string(),
            _ => String::new(),
        };
        let text = format!(
            "{}\n*** ClusterId = {} ProcId = {} Owner = \"{owner}\" CompletionDate = {now}\n",
            ad.to_old_syntax().trim_end(),
            int("ClusterId"),
            int("ProcId")
        );
        if let Err(e) = f.write_all(text.as_bytes()) {
            tracing::warn!("cannot write STARTD_HISTORY: {e}");
        }
    }

    /// Tells the shadow how the slot's job ended, with its output files.
    fn report_exit(&mut self, slot: SlotId, run: &Run, result: &JobResult) {
        let Some((claim_id, job)) = self
            .startd
            .slots()
            .iter()
            .find(|s| s.id() == slot)
            .and_then(|s| Some((s.claim_id()?.to_string(), s.job()?.clone())))
        else {
            return;
        };
        let mut ending = result.to_ad();
        for (name, expr) in &result.updates {
            ending.insert(name.as_str(), expr.clone());
        }
        self.write_history(&job, &ending);
        let evicted = matches!(result.ending, Ending::Evicted { .. });
        let limit = match job.eval_attr("RequestDisk") {
            Value::Int(kib) if kib > 0 => (kib as u64).saturating_mul(1024),
            _ => u64::MAX,
        };
        let pool::Outputs { files: outputs, streamed, error, errno } = if evicted {
            pool::Outputs::default()
        } else {
            let sizes = self.input_sizes.remove(&slot).unwrap_or_default();
            // What this activation's earlier ends carry already counts.
            let carried: u64 = self.claims.get(&claim_id).map_or(0, |c| {
                c.report
                    .borrow()
                    .ended
                    .iter()
                    .flat_map(|e| &e.outputs)
                    .map(|f| f.data.len() as u64)
                    .sum()
            });
            let budget = pool::ACTIVATION_INLINE_BUDGET.saturating_sub(carried);
            pool::collect_outputs(&run.sandbox, &job, &sizes, limit, budget)
        };
        // Output files too big for the report stay in the sandbox, renamed
        // out of the slot's way, until the shadow has fetched them.
        let kept = if streamed.is_empty() {
            None
        } else {
            let name = run.sandbox.file_name().map(|n| n.to_string_lossy().into_owned());
            let dir = self
                .execute
                .join(format!("out_{}", name.as_deref().unwrap_or("x").trim_start_matches("dir_")));
            match std::fs::rename(&run.sandbox, &dir) {
                Ok(()) => Some(Arc::new(pool::KeptOutputs { dir, files: streamed })),
                Err(e) => {
                    ending.insert_value("HoldReasonCode", 12i64);
                    ending.insert_value("HoldReasonSubCode", e.raw_os_error().unwrap_or(0) as i64);
                    ending.insert_value(
                        "HoldReason",
                        format!("cannot keep the output files for transfer: {e}").as_str(),
                    );
                    None
                }
            }
        };
        if let Some(e) = error
            && !ending.contains("HoldReasonCode")
        {
            // HTCondor's "Transfer output files failure" hold; its subcode
            // is the errno (2: a file named that the job did not create).
            ending.insert_value("HoldReasonCode", 12i64);
            ending.insert_value("HoldReasonSubCode", errno as i64);
            ending.insert_value("HoldReason", e.as_str());
        }
        let saved = run.ctl.saved();
        let gid = match job.eval_attr("GlobalJobId") {
            Value::Str(s) => s.to_string(),
            _ => String::new(),
        };
        if let Some(c) = self.claims.get(&claim_id) {
            c.publish(|r| {
                if let (n, Some(d)) = saved {
                    r.saved = Some((n, d));
                }
                r.state = andes_protocol::pool::RunState::Exited;
                r.ctl = None;
                let mut update = ClassAd::new();
                for n in [
                    "RemoteUserCpu",
                    "RemoteSysCpu",
                    "ImageSize",
                    "ResidentSetSize",
                    "MemoryUsage",
                    "DiskUsage",
                ] {
                    if let Some(e) = ending.get(n) {
                        update.insert(n, e.clone());
                    }
                }
                let end_job = gid.clone();
                let end = andes_protocol::pool::JobEnd {
                    job: gid,
                    version: r.version + 1,
                    update: update.to_string(),
                    ending: ending.to_string(),
                    outputs: outputs.clone(),
                    evicted,
                };
                Arc::make_mut(&mut r.ended).push(end);
                if let Some(k) = kept {
                    Arc::make_mut(&mut r.kept).insert(end_job, k);
                }
                r.ending = Some(ending);
                r.outputs = Arc::new(outputs);
                r.evicted = evicted;
            });
        }
    }

    /// Starts the next job queued on the slot's claim, if its schedd still
    /// follows the claim; else the queue is dropped (those jobs never ran).
    fn continue_claim(&mut self, slot: SlotId) {
        let Some(claim_id) = self
            .startd
            .slots()
            .iter()
            .find(|s| s.id() == slot && s.job().is_none())
            .and_then(|s| s.claim_id())
            .map(str::to_string)
        else {
            return;
        };
        let Some(c) = self.claims.get_mut(&claim_id) else { return };
        if c.queue.is_empty() {
            return;
        }
        if !c.followed() {
            c.queue.clear();
            c.publish(|r| r.queued = 0);
            self.log(format!(
                "slot {slot}: no shadow follows claim {claim_id}: queued jobs dropped"
            ));
            return;
        }
        let Some(next) = c.queue.pop_front() else { return };
        self.input_sizes
            .insert(slot, next.inputs.iter().map(|f| (f.name.clone(), f.len())).collect());
        self.inputs.insert(slot, next.inputs);
        self.short.insert(slot);
        let acts = self.activate(slot, claim_id.clone(), next.job, next.module);
        self.short.remove(&slot);
        self.inputs.remove(&slot);
        if acts.iter().any(|a| matches!(a, Action::ActivationRefused { .. }))
            && let Some(c) = self.claims.get_mut(&claim_id)
        {
            c.queue.clear();
            c.publish(|r| r.queued = 0);
        }
    }

    /// Runs the daemon: measures before each poll, ticks at the
    /// machine's deadlines, handles starter exits and requests, until a
    /// shutdown is complete and every starter has ended.
    pub async fn run(mut self) {
        self.measure();
        self.tick();
        let mut last_wake = self.now();
        // Done once shut down with no starter left, and no shadow still owed
        // the end of its job (that is looked at every 100 ms meanwhile).
        while !self.finished() || self.owes_shadows() {
            let now = self.now();
            // A deadline already passed is served once per second at most.
            let deadline = self.next_deadline().max(last_wake.saturating_add(1)).max(now);
            let secs = u64::try_from(deadline - now).unwrap_or(0).min(u32::MAX as u64);
            let nap = if self.finished() {
                Duration::from_millis(100)
            } else {
                Duration::from_secs(secs)
            };
            let wake = self.clock.sleep_until(self.clock.now() + nap);
            tokio::select! {
                _ = wake => {
                    last_wake = self.now();
                    self.tick();
                }
                Some(exit) = self.exits_rx.recv() => {
                    self.on_exit(exit);
                }
                Some(slot) = self.deferred_rx.recv() => {
                    if self.deferred.remove(&slot) {
                        self.feed(deferred_attr(slot, None));
                    }
                }
                Some(req) = self.requests_rx.recv() => match req {
                    Request::Status(reply) => {
                        let _ = reply.send(self.ads());
                    }
                    Request::Pool(req, reply) => {
                        let r = self.pool(req);
                        let _ = reply.send(r);
                    }
                    Request::Command(c, reply) => {
                        let r = self.command(c);
                        let _ = reply.send(r);
                    }
                },
            }
        }
    }

    fn condor_loads(&mut self) -> Vec<f64> {
        let now = self.clock.now();
        let n = self.startd.slots().len();
        let clock = self.clock.clone();
        (1..=n as SlotId)
            .map(|id| match self.runs.get_mut(&id) {
                Some(r) if r.kind != RunKind::Benchmark => {
                    let u = r.ctl.usage(clock.as_ref());
                    let cpu = u.remote_user_cpu + u.remote_sys_cpu;
                    let wall = now.saturating_duration_since(r.last_at).as_secs_f64();
                    if wall > 0.0 {
                        r.load = ((cpu - r.last_cpu) / wall).clamp(0.0, 64.0);
                        r.last_cpu = cpu;
                        r.last_at = now;
                    }
                    r.load
                }
                _ => 0.0,
            })
            .collect()
    }

    /// Does what the startd asked. A `StartJob`'s ad moves into the starter
    /// (the action keeps an empty one): one clone fewer per job.
    fn carry_out(&mut self, action: &mut Action, queue: &mut VecDeque<Event>) {
        match action {
            Action::Transition { slot, number, from, to } => self.log(format!(
                "slot {slot}: {}/{} -> {}/{} ({number})",
                from.0.as_str(),
                from.1.as_str(),
                to.0.as_str(),
                to.1.as_str()
            )),
            Action::StartJob { slot, claim_id, job } => {
                let Some(module) = self.modules.get(slot).cloned() else {
                    self.log(format!(
                        "slot {slot}: claim {} activated with no module",
                        public_claim_id(claim_id)
                    ));
                    queue.push_back(Event::StarterExited {
                        slot: *slot,
                        outcome: StarterOutcome::Failed,
                    });
                    return;
                };
                let ad = std::mem::take(job);
                let gid = match ad.eval_attr("GlobalJobId") {
                    Value::Str(s) => Some(s.to_string()),
                    _ => None,
                };
                let deferral = match Deferral::decide(&ad, self.clock.unix_now_ms()) {
                    Deferral::Wait(t) => Some(Some(t)),
                    _ if ad.contains("DeferralTime") => Some(None),
                    _ => None,
                };
                if let Err(e) = self.start(*slot, RunKind::Job, ad, module) {
                    self.log(format!("slot {slot}: cannot start the job: {e}"));
                    queue.push_back(Event::StarterExited {
                        slot: *slot,
                        outcome: StarterOutcome::Failed,
                    });
                    return;
                }
                let now = self.now();
                let ctl = self.runs.get(slot).map(|r| r.ctl.clone());
                let restored = self.runs.get(slot).and_then(|r| r.restored.clone());
                if let Some(c) = self.claims.get(claim_id) {
                    c.told_end.store(false, std::sync::atomic::Ordering::Release);
                    c.end_sent.store(false, std::sync::atomic::Ordering::Release);
                    let queued = c.queue.len() as u32;
                    c.publish(|r| {
                        r.queued = queued;
                        r.state = andes_protocol::pool::RunState::Running;
                        r.job = gid;
                        r.ctl = ctl.clone();
                        r.ending = None;
                        r.outputs = Arc::new(Vec::new());
                        r.evicted = false;
                        r.started = now;
                        r.deferral = deferral;
                        r.snapshot = None;
                        r.known = Arc::new(restored.iter().cloned().collect());
                        r.restored = restored.map(|(h, _)| h);
                    });
                    // The shadow hears when the wait ends, so the queue shows it.
                    if let (Some(Some(_)), Some(ctl)) = (deferral, ctl) {
                        let report = c.report.clone();
                        let slot = *slot;
                        let deferred_tx = self.deferred_tx.clone();
                        tokio::spawn(async move {
                            ctl.begun().await;
                            report.send_modify(|r| {
                                if r.deferral == Some(deferral.flatten()) {
                                    r.deferral = Some(None);
                                    r.version += 1;
                                }
                            });
                            let _ = deferred_tx.send(slot);
                        });
                    }
                }
                if let Some(Some(t)) = deferral {
                    // The slot says its job waits (JobDeferredUntil).
                    self.deferred.insert(*slot);
                    queue.push_back(deferred_attr(*slot, Some(t)));
                }
            }
            Action::StartBackfill { slot, job } => {
                let started = match self.backfill.get(job) {
                    Some(b) => {
                        let (ad, module) = (b.ad.clone(), b.module.clone());
                        self.start(*slot, RunKind::Backfill, ad, module)
                            .map_err(|e| format!("cannot start backfill job {job}: {e}"))
                    }
                    None => Err(format!("no backfill job `{job}` (BACKFILL_JOB_{job})")),
                };
                if let Err(e) = started {
                    self.log(format!("slot {slot}: {e}"));
                    queue.push_back(Event::BackfillExited { slot: *slot });
                }
            }
            Action::Suspend { slot } => {
                if let Some(r) = self.runs.get(slot) {
                    r.ctl.suspend(self.clock.as_ref());
                }
                if let Some(c) = self.claim_of_slot(*slot) {
                    c.publish(|r| r.state = andes_protocol::pool::RunState::Suspended);
                }
            }
            Action::Continue { slot } => {
                if let Some(r) = self.runs.get(slot) {
                    r.ctl.resume(self.clock.as_ref());
                }
                if let Some(c) = self.claim_of_slot(*slot) {
                    c.publish(|r| r.state = andes_protocol::pool::RunState::Running);
                }
            }
            Action::Checkpoint { slot, kind } => {
                // A cooperative job is asked (its `checkpoint-requested`) and
                // saves in its own time; a vacate goes on at once, the job
                // saving within its grace. A job compiled by `andes compile`
                // is snapshotted at its next yield point: asked now for a
                // periodic checkpoint; on a vacate, the soft kill that follows
                // makes the starter take the stopping snapshot.
                let cooperative =
                    self.startd.slots().iter().find(|s| s.id() == *slot).is_some_and(|s| {
                        s.job().is_some_and(|j| {
                            j.eval_attr("WasmCheckpoint")
                                .as_str()
                                .is_some_and(|m| m.eq_ignore_ascii_case("cooperative"))
                        })
                    });
                let run = self.runs.get(slot).filter(|r| r.kind == RunKind::Job);
                let ok = match run {
                    Some(r) if r.blobs.is_some() => {
                        if *kind == andes_startd::CheckpointKind::Periodic {
                            r.ctl.request_checkpoint();
                        }
                        true
                    }
                    Some(r) if cooperative => {
                        r.ctl.request_checkpoint();
                        true
                    }
                    _ => false,
                };
                if !ok {
                    self.log(format!("slot {slot}: {kind:?} checkpoint refused: not supported"));
                }
                queue.push_back(Event::CheckpointFinished { slot: *slot, ok });
            }
            Action::SoftKill { slot, grace_secs } => {
                if let Some(r) = self.runs.get(slot) {
                    r.ctl.soft_kill(self.clock.as_ref(), Duration::from_secs(*grace_secs));
                }
            }
            Action::HardKill { slot } => {
                if let Some(r) = self.runs.get(slot) {
                    r.ctl.hard_kill();
                }
            }
            Action::KillBackfill { slot } => match self.runs.get(slot) {
                Some(r) => r.ctl.hard_kill(),
                None => queue.push_back(Event::BackfillExited { slot: *slot }),
            },
            Action::KillStarter { slot } => {
                // The job runs on a thread of this process: the hard kill
                // (signal, trap at the next instruction of guest code, and
                // the job's waits dropped) is the strongest there is, so it
                // is sent again. The slot stays in Killing, its resources
                // counted, until the job's thread has really ended.
                if let Some(r) = self.runs.get(slot) {
                    r.ctl.hard_kill();
                    self.log(format!(
                        "slot {slot}: the job has not stopped within KILLING_TIMEOUT of its \
                         hard kill; killing it again (the slot waits for its end)"
                    ));
                }
            }
            Action::RunBenchmarks { slot } => {
                if let Err(e) = self.start_benchmark(*slot) {
                    self.log(format!("slot {slot}: cannot run the benchmarks: {e}"));
                    queue.push_back(Event::BenchmarkFinished { slot: *slot, mips: 0, kflops: 0 });
                }
            }
            Action::Publish { slot, ad } => {
                self.ads.insert(*slot, ad.clone());
                self.send_ad(*slot, ad.clone());
            }
            Action::ShutdownComplete => self.shutdown_complete = true,
            Action::EventRejected { reason } => {
                self.log(reason.clone());
                self.rejections.push(reason.clone());
            }
            Action::ClaimAccepted { slot, claim_id } => {
                // The offer is spent: a new one (for a preempting match) replaces it.
                if self.offers.get(slot) == Some(claim_id) {
                    self.offers.insert(*slot, pool::new_claim_id(*slot));
                }
                self.log(format!("slot {slot}: claim {} accepted", public_claim_id(claim_id)))
            }
            Action::ClaimBroken { slot, claim_id } => {
                self.log(format!("slot {slot}: claim {} broken", public_claim_id(claim_id)))
            }
            Action::ReleaseClaim { slot, claim_id } => {
                self.log(format!("slot {slot}: claim {} released", public_claim_id(claim_id)))
            }
            Action::ClaimRefused { slot, claim_id, reason }
            | Action::ActivationRefused { slot, claim_id, reason } => self
                .log(format!("slot {slot}: claim {} refused: {reason}", public_claim_id(claim_id))),
        }
    }

    fn fresh_sandbox(&mut self, slot: SlotId) -> Result<(u64, PathBuf), std::io::Error> {
        self.generation += 1;
        let g = self.generation;
        // The slot's last sandbox, emptied when its job ended: making and
        // removing a directory per job costs more than the job itself when
        // jobs are short.
        if let Some(dir) = self.spare.remove(&slot) {
            return Ok((g, dir));
        }
        let dir = self.execute.join(format!("dir_{slot}_{g}"));
        if dir.exists() {
            remove_sandbox(&dir);
        }
        std::fs::create_dir_all(&dir)?;
        Ok((g, dir))
    }

    fn start(
        &mut self,
        slot: SlotId,
        kind: RunKind,
        ad: ClassAd,
        module: Arc<[u8]>,
    ) -> Result<(), String> {
        if let Some(old) = self.runs.remove(&slot) {
            // The machine starts a job only on a slot with none; a leftover
            // starter is stopped rather than leaked.
            old.ctl.hard_kill();
            old.task.abort();
            remove_sandbox(&old.sandbox);
        }
        let (generation, sandbox) =
            self.fresh_sandbox(slot).map_err(|e| format!("creating a sandbox: {e}"))?;
        if let Some(inputs) = self.inputs.get(&slot) {
            pool::write_inputs(&sandbox, inputs, &self.uploaded_dir(slot))
                .map_err(|e| format!("writing the input files: {e}"))?;
        }
        let digest = match ad.eval_attr("CmdDigest") {
            Value::Str(d) => pool::parse_digest(&d),
            _ => None,
        };
        // Every job, from a schedd or backfill, is held to its slot's size.
        let limits = {
            let slot_ad = self.ads.get(&slot);
            let int = |n: &str| match slot_ad.map(|a| a.eval_attr(n)) {
                Some(Value::Int(v)) => Some(v),
                _ => None,
            };
            Limits::in_slot(&ad, int("Memory"), int("Disk"))
        };
        let saved_state = match kind {
            RunKind::Job => self.saved_in.get(&slot).cloned(),
            _ => None,
        };
        let checkpoints = kind == RunKind::Job
            && self.snapshot_keys.is_some()
            && self.instrumented(&module, digest);
        let (transparent, blobs, restored) = match (checkpoints, &self.snapshot_keys) {
            (true, Some(keys)) => {
                let snap = self.snapshot_in.remove(&slot);
                let (t, blobs, restored) = self
                    .transparent(slot, generation, &ad, keys.clone(), snap)
                    .map_err(|e| format!("preparing its checkpoints: {e}"))?;
                (Some(t), Some(blobs), restored)
            }
            _ => (None, None, None),
        };
        let spec = JobSpec {
            module,
            limits,
            ad,
            sandbox: sandbox.clone(),
            inherit_stdio: false,
            digest,
            saved_state,
            transparent,
            metered: kind == RunKind::Job && self.short.contains(&slot),
        };
        let ctl = Control::new();
        let saver = (kind == RunKind::Job).then(|| {
            let (ctl, tx) = (ctl.clone(), self.exits_tx.clone());
            tokio::spawn(async move {
                let mut seen = 0;
                loop {
                    ctl.saved_beyond(seen).await;
                    seen = ctl.saved().0;
                    if tx.send(Exit { slot, generation, finished: Finished::Saved }).is_err() {
                        return;
                    }
                }
            })
        });
        let task = {
            let (host, ctl, clock, tx) =
                (self.host.clone(), ctl.clone(), self.clock.clone(), self.exits_tx.clone());
            // The job runs in place on this task's thread: the daemon stops
            // it through its control, never by aborting the task alone.
            tokio::spawn(async move {
                let result = host.run_in_place(spec, ctl, clock).await;
                let _ = tx.send(Exit { slot, generation, finished: Finished::Starter(result) });
            })
        };
        self.runs.insert(
            slot,
            Run {
                kind,
                generation,
                ctl,
                sandbox,
                task,
                last_cpu: 0.0,
                last_at: self.clock.now(),
                load: 0.0,
                saver,
                blobs,
                restored,
            },
        );
        Ok(())
    }

    /// Where a job compiled by `andes compile` keeps its snapshots' file
    /// contents, and how its snapshots are signed and reported; with the
    /// snapshot an activation brought, the job resumes from it.
    #[allow(clippy::type_complexity)]
    fn transparent(
        &self,
        slot: SlotId,
        generation: u64,
        ad: &ClassAd,
        keys: SnapshotKeys,
        snap: Option<andes_protocol::pool::SnapshotData>,
    ) -> Result<
        (
            Arc<andes_starter::Transparent>,
            Arc<pool::BlobDir>,
            Option<(String, Arc<std::collections::HashSet<String>>)>,
        ),
        std::io::Error,
    > {
        let blobs = Arc::new(pool::BlobDir::create(
            self.execute.join(format!("ckpt_{slot}_{generation}")),
        )?);
        let mut restored = None;
        let mut restore = None;
        if let Some(snap) = snap {
            let mut names = std::collections::HashSet::new();
            let uploaded = self.uploaded_dir(slot);
            for b in &snap.blobs {
                match &b.streamed {
                    None => names.insert(blobs.store.put(&b.data)?),
                    Some(s) => {
                        // Streamed to the claim's uploads: stored, and checked
                        // against its name as it is.
                        let sha = s.sha256.as_deref().unwrap_or_default();
                        let (hash, _) = blobs.store.put_file(&uploaded.join(sha))?;
                        if hash != b.name {
                            return Err(std::io::Error::other(format!(
                                "the checkpoint's file content {} is {hash}",
                                b.name
                            )));
                        }
                        names.insert(hash)
                    }
                };
            }
            let bytes = match &snap.streamed {
                None => snap.bytes,
                Some(s) => std::fs::read(uploaded.join(s.sha256.as_deref().unwrap_or_default()))?,
            };
            restored = Some((snap.hash, Arc::new(names)));
            restore = Some(Arc::from(bytes));
        }
        let job = match ad.eval_attr("GlobalJobId") {
            Value::Str(s) => s.to_string(),
            _ => format!("slot{slot}"),
        };
        let tx = self.exits_tx.clone();
        let sink =
            Arc::new(move |taken: Result<andes_starter::transparent::Checkpoint, String>| {
                let finished = Finished::Snapshot(Box::new(taken));
                let _ = tx.send(Exit { slot, generation, finished });
            });
        let t = andes_starter::Transparent {
            job,
            public: keys.public,
            sign: keys.sign,
            blobs: blobs.store.clone(),
            sink,
            restore,
            trusted: keys.trusted,
        };
        Ok((Arc::new(t), blobs, restored))
    }

    fn start_benchmark(&mut self, slot: SlotId) -> Result<(), String> {
        let (generation, sandbox) =
            self.fresh_sandbox(slot).map_err(|e| format!("creating a sandbox: {e}"))?;
        let ctl = Control::new();
        let task = {
            let (host, clock, tx, dir) =
                (self.host.clone(), self.clock.clone(), self.exits_tx.clone(), sandbox.clone());
            tokio::spawn(async move {
                let (mips, kflops) = match benchmark::run(&host, &dir, clock).await {
                    Ok(r) => (r.mips, r.kflops),
                    Err(e) => {
                        tracing::error!("slot {slot}: benchmark failed: {e}");
                        (0, 0)
                    }
                };
                let _ = tx.send(Exit {
                    slot,
                    generation,
                    finished: Finished::Benchmark { mips, kflops },
                });
            })
        };
        let last_at = self.clock.now();
        self.runs.insert(
            slot,
            Run {
                kind: RunKind::Benchmark,
                generation,
                ctl,
                sandbox,
                task,
                last_cpu: 0.0,
                last_at,
                load: 0.0,
                saver: None,
                blobs: None,
                restored: None,
            },
        );
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        for (_, r) in self.runs.drain() {
            r.ctl.hard_kill();
            r.task.abort();
            remove_sandbox(&r.sandbox);
        }
        for (_, d) in self.spare.drain() {
            remove_sandbox(&d);
        }
    }
}

impl Daemon {
    /// Whether `module` (whose digest the job ad names, if it does) was
    /// compiled by `andes compile`, remembered per digest.
    fn instrumented(&mut self, module: &[u8], digest: Option<[u8; 32]>) -> bool {
        let Some(d) = digest else {
            return andes_compile::instrumentation_version(module).is_some();
        };
        *self
            .instrumented
            .entry(d)
            .or_insert_with(|| andes_compile::instrumentation_version(module).is_some())
    }

    /// Empties the sandbox of a job that ended and keeps it for the slot's
    /// next job; one that cannot be emptied is removed.
    fn recycle_sandbox(&mut self, slot: SlotId, dir: PathBuf) {
        match empty_dir(&dir) {
            Ok(()) => {
                if let Some(old) = self.spare.insert(slot, dir) {
                    remove_sandbox(&old);
                }
            }
            Err(e) => {
                tracing::debug!("{}: not emptied ({e}); removed", dir.display());
                remove_sandbox(&dir);
            }
        }
    }
}

/// A schedd asks about claim `c` again. From the run it holds the claim
/// for, that acknowledges the end it was last sent; from a new run (it
/// restarted), the claim becomes that run's, and what the old run was sent
/// but may not have kept is sent again.
fn follows_again(c: &mut pool::ClaimEntry, incarnation: Option<String>) {
    match incarnation {
        Some(i) if c.incarnation.as_deref() != Some(i.as_str()) => {
            c.incarnation = Some(i);
            c.end_sent.store(false, std::sync::atomic::Ordering::Release);
        }
        _ => c.acknowledged(),
    }
}

/// Removes everything in `dir` (symbolic links themselves, never what they
/// point to, at any depth), leaving it empty.
fn empty_dir(dir: &Path) -> std::io::Result<()> {
    andes_beneath::Beneath::open(dir)?.clear()
}

fn remove_sandbox(dir: &Path) {
    let r = empty_dir(dir).and_then(|_| std::fs::remove_dir(dir));
    if let Err(e) = r
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove sandbox {}: {e}", dir.display());
    }
}

/// The startd's view of a starter's ending.
pub fn outcome(ending: &Ending) -> StarterOutcome {
    match ending {
        Ending::Evicted { .. } => StarterOutcome::Evicted,
        Ending::Held { code, .. } if *code == HOLD_FAILED_TO_START => StarterOutcome::Failed,
        _ => StarterOutcome::Completed,
    }
}

/// `graceful` or `fast`: how a vacate of `kind` is named in messages.
fn vacate_word(kind: VacateKind) -> &'static str {
    if kind == VacateKind::Fast { "fast" } else { "graceful" }
}

/// `graceful`, `peaceful` or `fast`.
pub fn shutdown_word(kind: ShutdownKind) -> &'static str {
    match kind {
        ShutdownKind::Graceful => "graceful",
        ShutdownKind::Peaceful => "peaceful",
        ShutdownKind::Fast => "fast",
    }
}

/// The real machine's measurements ([`andes_startd::measure::measure`]),
/// with, when asked, the free space of `execute`'s file system and the free
/// swap for the slots' live `Disk` and `VirtualMemory`
/// ([`andes_startd::measure::measure_with_disk`]).
pub fn real_measurer(execute: &Path) -> Measurer {
    let execute = execute.to_path_buf();
    Box::new(move |loads, resources| {
        if resources {
            andes_startd::measure::measure_with_disk(&execute, loads)
        } else {
            andes_startd::measure::measure(loads)
        }
    })
}

/// The real machine's facts, with EXECUTE's free space as `Disk`.
pub fn machine_info(execute: &Path) -> MachineInfo {
    let features: Vec<String> = WASM_FEATURES.iter().map(|s| s.to_string()).collect();
    let mut info = andes_startd::measure::machine_info(execute, WASMTIME_VERSION, &features);
    info.checkpoint_platform = checkpoint_platform();
    info
}

/// The `CheckpointPlatform` this host restores: the snapshot format and the
/// instrumentation version of `andes compile`, nothing of the OS or CPU.
pub fn checkpoint_platform() -> String {
    andes_snapshot::platform(Some(andes_compile::INSTRUMENTATION_VERSION))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_startd_default_checkpoint_platform_is_the_hosts() {
        assert_eq!(super::checkpoint_platform(), andes_startd::DEFAULT_CHECKPOINT_PLATFORM);
    }

    use super::MachineClock;
    use std::time::{Duration, Instant};

    #[test]
    fn a_stepped_wall_clock_moves_no_machine_timer() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let wall0 = 1_800_000_000_000i64;
        let mut c = MachineClock::new(wall0, t0);
        assert_eq!(c.now_ms(wall0 + 1_000, at(1.0)), wall0 + 1_000);
        // Set back 93 s: the machine's time goes on with the monotonic clock
        // (slewing toward the wall clock by a tenth: 900 ms for the second).
        let back = wall0 + 2_000 - 93_000;
        let m = c.now_ms(back, at(2.0));
        assert_eq!(m, wall0 + 1_900);
        // A second later it is a second on (less a tenth of it, slewed).
        let m2 = c.now_ms(back + 1_000, at(3.0));
        assert!((900..=1_000).contains(&(m2 - m)), "{}", m2 - m);
        // It converges on the wall clock, never going back, within ~16 minutes.
        let mut last = m2;
        for i in 1..=1_000 {
            let t = 3.0 + f64::from(i);
            let now = c.now_ms(back + (t as i64 - 2) * 1_000, at(t));
            assert!(now >= last);
            last = now;
        }
        assert_eq!(last, back + 1_001_000, "converged on the wall clock");
        // Set forward a minute: no jump.
        let t = 1_004.0;
        let wall = back + 1_002_000 + 60_000;
        let m = c.now_ms(wall, at(t));
        assert_eq!(m, last + 1_100);
        // Small drift is followed as it is.
        let mut c = MachineClock::new(wall0, t0);
        assert_eq!(c.now_ms(wall0 + 1_500, at(1.0)), wall0 + 1_500);
        assert_eq!(c.now_ms(wall0 + 1_600, at(2.0)), wall0 + 1_600);
    }
}
