//! The startd as a pure state machine: `(state, event, now) -> (state, actions)`.

use classad::{AttrName, ClassAd, EvalOptions, Evaluator, Expr, Value, parse_expr};

use crate::policy::{CLAIM_EXPR_NAMES, ClaimExprs, Policy, PolicyError, SlotSpec};

/// A slot's number: 1 for `slot1@host`, and so on.
pub type SlotId = u32;

/// A slot's state (HTCondor's `State` attribute).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// The machine's owner is using it, or it is not available to andes.
    Owner,
    /// Available, not running a job.
    Unclaimed,
    /// Matched by the negotiator, not yet claimed by the schedd.
    Matched,
    /// Claimed by a schedd.
    Claimed,
    /// The claim is being preempted.
    Preempting,
    /// Running a backfill job while otherwise idle.
    Backfill,
    /// The machine is being drained (condor_drain): it takes no new claims;
    /// a slot is here once its job has left.
    Drained,
}

impl State {
    /// HTCondor's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Owner => "Owner",
            State::Unclaimed => "Unclaimed",
            State::Matched => "Matched",
            State::Claimed => "Claimed",
            State::Preempting => "Preempting",
            State::Backfill => "Backfill",
            State::Drained => "Drained",
        }
    }
}

/// A slot's activity (HTCondor's `Activity` attribute).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activity {
    /// No job activity.
    Idle,
    /// A job is running.
    Busy,
    /// A job is suspended.
    Suspended,
    /// A job is running out its retirement time before preemption.
    Retiring,
    /// A job is being checkpointed and given its vacate notice.
    Vacating,
    /// A job is being hard-killed.
    Killing,
    /// The startd is running benchmarks.
    Benchmarking,
}

impl Activity {
    /// HTCondor's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Idle => "Idle",
            Activity::Busy => "Busy",
            Activity::Suspended => "Suspended",
            Activity::Retiring => "Retiring",
            Activity::Vacating => "Vacating",
            Activity::Killing => "Killing",
            Activity::Benchmarking => "Benchmarking",
        }
    }
}

/// What the machine is, as the caller (or [`crate::measure`]) found it.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineInfo {
    /// The fully qualified host name (`Machine`).
    pub hostname: String,
    /// `Arch` in HTCondor's spelling (`X86_64`, `aarch64`, ...).
    pub arch: String,
    /// `OpSys` in HTCondor's spelling (`LINUX`, `WINDOWS`, `OSX`).
    pub opsys: String,
    /// Detected CPUs (`NUM_CPUS` overrides).
    pub cpus: u32,
    /// Detected memory in MB (`MEMORY` overrides).
    pub memory_mb: u64,
    /// Disk available to jobs, in KB.
    pub disk_kb: u64,
    /// Virtual memory (swap), in KB.
    pub virtual_memory_kb: u64,
    /// `WasmtimeVersion`.
    pub wasmtime_version: String,
    /// `WasmFeatures`.
    pub wasm_features: Vec<String>,
    /// `CheckpointPlatform`: the snapshot format and instrumentation version.
    pub checkpoint_platform: String,
}

impl Default for MachineInfo {
    fn default() -> Self {
        MachineInfo {
            hostname: "localhost".into(),
            arch: "X86_64".into(),
            opsys: "LINUX".into(),
            cpus: 1,
            memory_mb: 1024,
            disk_kb: 1 << 20,
            virtual_memory_kb: 1 << 20,
            wasmtime_version: String::new(),
            wasm_features: Vec::new(),
            checkpoint_platform: DEFAULT_CHECKPOINT_PLATFORM.into(),
        }
    }
}

/// The `CheckpointPlatform` of this andes: snapshot format 1, instrumentation
/// 3 (`andes compile`'s own unwinding). Independent of OS and CPU. The execute
/// host states its own (the same, which its tests check).
pub const DEFAULT_CHECKPOINT_PLATFORM: &str = "andes-snapshot-1/instrumentation-3";

/// Idle time reported when there is no keyboard or console (a headless
/// server): large, as HTCondor reports it.
pub const NO_CONSOLE_IDLE: i64 = i32::MAX as i64;

/// One round of measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurements {
    /// The machine's load average (`LoadAvg`, before division among slots).
    pub load_avg: f64,
    /// Seconds since any keyboard or mouse, pseudo-terminals included.
    pub keyboard_idle: i64,
    /// Seconds since the console keyboard or mouse.
    pub console_idle: i64,
    /// Load from each slot's own job (`CondorLoadAvg`), slot 1 first;
    /// missing entries are 0.
    pub condor_load: Vec<f64>,
    /// Seconds east of UTC of local time, for `ClockMin` and `ClockDay`.
    pub utc_offset: i32,
    /// Free space, in KB, on the file system of EXECUTE now (`None`: not
    /// measured; the slots keep the figure they had).
    pub disk_free_kb: Option<u64>,
    /// Free swap, in KB, now (`None`: not measured).
    pub swap_free_kb: Option<u64>,
}

impl Default for Measurements {
    fn default() -> Self {
        Measurements {
            load_avg: 0.0,
            keyboard_idle: NO_CONSOLE_IDLE,
            console_idle: NO_CONSOLE_IDLE,
            condor_load: Vec::new(),
            utc_offset: 0,
            disk_free_kb: None,
            swap_free_kb: None,
        }
    }
}

/// A schedd's request to claim a slot.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimRequest {
    /// The claim id the negotiator issued.
    pub claim_id: String,
    /// The claiming schedd's machine (`ClientMachine`).
    pub client_machine: String,
    /// The user who claims (`RemoteOwner`).
    pub owner: String,
    /// The user who uses the claim (`RemoteUser`), when not the owner.
    pub user: Option<String>,
    /// The request (job) ad the claim is for.
    pub ad: ClassAd,
}

/// How a starter ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StarterOutcome {
    /// The job ran to its end (exit, trap or hold).
    Completed,
    /// The job was evicted (vacated or killed) at the startd's request.
    Evicted,
    /// The starter failed (could not start the job, or crashed).
    Failed,
}

/// Vacate: `condor_vacate` and `condor_vacate -fast`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VacateKind {
    /// Retirement, then checkpoint and vacate notice.
    Graceful,
    /// Hard kill now.
    Fast,
}

/// Shutdown: `condor_off -graceful`, `-peaceful`, `-fast`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownKind {
    /// Jobs retire (MaxJobRetirementTime), then are vacated.
    Graceful,
    /// Jobs run to their end: retirement time is infinite.
    Peaceful,
    /// Jobs are hard-killed now.
    Fast,
}

/// Why a checkpoint is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointKind {
    /// `PERIODIC_CHECKPOINT`: the job keeps running (Claimed/Busy).
    Periodic,
    /// The first step of Preempting/Vacating.
    Vacate,
}

/// Something that happened, fed to [`Startd::handle`].
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Time to evaluate: send one at [`Startd::next_deadline`] (or more often).
    /// The startd polls every POLLING_INTERVAL while any slot is busy with a
    /// claim, a match or backfill, else every UPDATE_INTERVAL, and publishes
    /// every UPDATE_INTERVAL.
    Tick,
    /// New measurements (taken effect at once; policy is evaluated at the next tick).
    Measured(Measurements),
    /// The negotiator says this slot was matched.
    MatchNotified {
        /// The slot.
        slot: SlotId,
        /// The match's claim id.
        claim_id: String,
    },
    /// A schedd asks to claim the slot.
    ClaimRequested {
        /// The slot.
        slot: SlotId,
        /// The request.
        claim: ClaimRequest,
    },
    /// The schedd activates its claim with a job.
    ClaimActivated {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
        /// The job ad.
        job: ClassAd,
    },
    /// The schedd releases its claim (or a pending preempting claim goes away).
    ClaimReleased {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
    },
    /// The starter of the slot's job has exited.
    StarterExited {
        /// The slot.
        slot: SlotId,
        /// How.
        outcome: StarterOutcome,
    },
    /// A checkpoint the startd asked for finished.
    CheckpointFinished {
        /// The slot.
        slot: SlotId,
        /// Whether a snapshot was written.
        ok: bool,
    },
    /// Benchmarks finished.
    BenchmarkFinished {
        /// The slot.
        slot: SlotId,
        /// `Mips`.
        mips: i64,
        /// `KFlops`.
        kflops: i64,
    },
    /// The slot's backfill job exited.
    BackfillExited {
        /// The slot.
        slot: SlotId,
    },
    /// `condor_vacate`: one slot, or all (`None`).
    Vacate {
        /// The slot, or all.
        slot: Option<SlotId>,
        /// Graceful or fast.
        kind: VacateKind,
    },
    /// `condor_drain`: the machine takes no new claims; running jobs retire
    /// (graceful) or are vacated at once (fast) and each slot, once empty,
    /// is Drained.
    Drain {
        /// Graceful or fast.
        kind: VacateKind,
    },
    /// `condor_drain -cancel`: the machine takes claims again.
    CancelDrain,
    /// `condor_checkpoint`: the checkpointable jobs of one slot, or all
    /// (`None`), checkpoint now and run on, as a periodic checkpoint.
    CheckpointNow {
        /// The slot, or all.
        slot: Option<SlotId>,
    },
    /// The startd is shutting down.
    Shutdown(ShutdownKind),
    /// The negotiator found a better match for a claimed slot (machine RANK
    /// or user priority): the current claim is preempted in its favour.
    BetterMatch {
        /// The slot.
        slot: SlotId,
        /// The preempting claim.
        claim: ClaimRequest,
    },
    /// The schedd changed attributes of the running job (`andes qedit`): the
    /// startd's copy of the job ad takes them, and policy sees them at the
    /// next evaluation.
    JobUpdated {
        /// The slot.
        slot: SlotId,
        /// The claim the job runs on.
        claim_id: String,
        /// The attributes.
        attrs: ClassAd,
    },
    /// Sets (`Some`) or clears (`None`) an attribute of one slot's ad or of
    /// all (`andes host set-attr`). `KeyboardIdle` and `ConsoleIdle` set this
    /// way count up from the value set, as measured ones do, until cleared
    /// or until the machine's own measured activity is more recent.
    SetAttribute {
        /// The slot, or all.
        slot: Option<SlotId>,
        /// The attribute.
        name: String,
        /// The new expression, or `None` to go back to the startd's own value.
        value: Option<Expr>,
    },
}

/// Something the driver must do, returned by [`Startd::handle`].
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A state or activity change (for logs; tests check the numbers).
    Transition {
        /// The slot.
        slot: SlotId,
        /// The spec's transition number, 1 to 32.
        number: u8,
        /// State and activity before.
        from: (State, Activity),
        /// State and activity after.
        to: (State, Activity),
    },
    /// Tell the schedd its claim request was accepted.
    ClaimAccepted {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
    },
    /// Tell the schedd its claim request was refused.
    ClaimRefused {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
        /// Why.
        reason: String,
    },
    /// Tell the schedd its activation was refused.
    ActivationRefused {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
        /// Why.
        reason: String,
    },
    /// Start a starter for the job.
    StartJob {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
        /// The job ad.
        job: ClassAd,
    },
    /// Suspend the job (the starter stops polling it).
    Suspend {
        /// The slot.
        slot: SlotId,
    },
    /// Resume a suspended job.
    Continue {
        /// The slot.
        slot: SlotId,
    },
    /// Checkpoint the job (a snapshot, or the job's own checkpoint call).
    Checkpoint {
        /// The slot.
        slot: SlotId,
        /// Periodic or on vacate.
        kind: CheckpointKind,
    },
    /// Give the job its vacate notice; the starter hard-kills it after
    /// `grace_secs`. A suspended job is resumed by the notice if it can hear
    /// it; one that cannot is ended where it is, without running again.
    SoftKill {
        /// The slot.
        slot: SlotId,
        /// Seconds.
        grace_secs: u64,
    },
    /// Kill the job now.
    HardKill {
        /// The slot.
        slot: SlotId,
    },
    /// KILLING_TIMEOUT passed after a hard kill and the job is still not
    /// gone: kill the starter and all it runs with the strongest means the
    /// driver has (HTCondor's SIGKILL to the starter and its children). The
    /// slot stays in Preempting/Killing until the starter has exited
    /// ([`Event::StarterExited`]); it is never freed while its job may still
    /// run. Sent again every KILLING_TIMEOUT until then.
    KillStarter {
        /// The slot.
        slot: SlotId,
    },
    /// Tell the schedd the claim is broken (preempted).
    ClaimBroken {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
    },
    /// Tell the schedd the startd releases the claim (CLAIM_WORKLIFE over).
    ReleaseClaim {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
    },
    /// Run the benchmarks, then send [`Event::BenchmarkFinished`].
    RunBenchmarks {
        /// The slot.
        slot: SlotId,
    },
    /// Start the named backfill job (from BACKFILL_JOBS).
    StartBackfill {
        /// The slot.
        slot: SlotId,
        /// The job's name.
        job: String,
    },
    /// Kill the slot's backfill job, then send [`Event::BackfillExited`].
    KillBackfill {
        /// The slot.
        slot: SlotId,
    },
    /// Send the slot's ad to the collector.
    Publish {
        /// The slot.
        slot: SlotId,
        /// The ad.
        ad: ClassAd,
    },
    /// Every slot is in Owner with no job after a shutdown: the daemon may exit.
    ShutdownComplete,
    /// An event named a slot or claim that does not exist here.
    EventRejected {
        /// Why.
        reason: String,
    },
}

/// Why a claim ends, deciding what the schedd is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClaimEnd {
    Broken,
    Released,
    Expired,
}

#[derive(Debug, Clone)]
struct Claim {
    req: ClaimRequest,
    since: i64,
    /// Jobs started on the claim: CLAIM_WORKLIFE bounds only the ones after
    /// the first.
    activations: u32,
    run_time: i64,
    suspend_time: i64,
    end: ClaimEnd,
}

#[derive(Debug, Clone)]
struct Job {
    ad: ClassAd,
    checkpointable: bool,
    run_accum: i64,
    suspend_accum: i64,
    seg_start: i64,
    suspended: bool,
}

impl Job {
    fn run_time(&self, now: i64) -> i64 {
        self.run_accum + if self.suspended { 0 } else { (now - self.seg_start).max(0) }
    }
    fn suspend_time(&self, now: i64) -> i64 {
        self.suspend_accum + if self.suspended { (now - self.seg_start).max(0) } else { 0 }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Retire {
    active: bool,
    better_match: bool,
    owner: bool,
    shutdown: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BackfillCause {
    Evict,
    Matched,
    Claimed,
}

/// Whether a job can checkpoint: its ad says `WasmCheckpoint =
/// "transparent"` or `"cooperative"`.
pub fn can_checkpoint(job: &ClassAd) -> bool {
    job.eval_attr("WasmCheckpoint").as_str().is_some_and(|s| {
        s.eq_ignore_ascii_case("transparent") || s.eq_ignore_ascii_case("cooperative")
    })
}

/// One slot: its ad, state, activity, claim and job.
#[derive(Debug, Clone)]
pub struct Slot {
    id: SlotId,
    spec: SlotSpec,
    ad: ClassAd,
    static_ad: ClassAd,
    overrides: ClassAd,
    state: State,
    activity: Activity,
    entered_state: i64,
    entered_activity: i64,
    claim: Option<Claim>,
    pending: Option<ClaimRequest>,
    job: Option<Job>,
    match_deadline: Option<i64>,
    killing_deadline: Option<i64>,
    retire: Retire,
    retire_deadline: Option<i64>,
    vacate_ckpt_pending: bool,
    backfill_job: Option<String>,
    backfill_cause: Option<BackfillCause>,
    cpu_busy_since: Option<i64>,
    last_periodic_ckpt: Option<i64>,
    dirty: bool,
}

impl Slot {
    /// The slot number.
    pub fn id(&self) -> SlotId {
        self.id
    }
    /// The resources the slot has.
    pub fn spec(&self) -> &SlotSpec {
        &self.spec
    }
    /// The machine ad as last refreshed.
    pub fn ad(&self) -> &ClassAd {
        &self.ad
    }
    /// The state.
    pub fn state(&self) -> State {
        self.state
    }
    /// The activity.
    pub fn activity(&self) -> Activity {
        self.activity
    }
    /// The current claim's id.
    pub fn claim_id(&self) -> Option<&str> {
        self.claim.as_ref().map(|c| c.req.claim_id.as_str())
    }
    /// The claim waiting for the current one's preemption.
    pub fn pending_claim_id(&self) -> Option<&str> {
        self.pending.as_ref().map(|c| c.claim_id.as_str())
    }
    /// The running job's ad, if a starter runs one.
    pub fn job(&self) -> Option<&ClassAd> {
        self.job.as_ref().map(|j| &j.ad)
    }
    /// Whether the job's starter is suspended.
    pub fn job_suspended(&self) -> bool {
        self.job.as_ref().is_some_and(|j| j.suspended)
    }
    /// The job's run time so far, suspensions excluded (the retirement clock).
    pub fn job_run_time(&self, now: i64) -> Option<i64> {
        self.job.as_ref().map(|j| j.run_time(now))
    }
    /// The backfill job running, if any.
    pub fn backfill_job(&self) -> Option<&str> {
        self.backfill_job.as_deref()
    }
    /// Whether the slot is retiring (Claimed/Retiring, or suspended in retirement).
    pub fn retiring(&self) -> bool {
        self.retire.active
    }
}

/// The startd: all slots, the policy, and the clock-free scheduling of its
/// own evaluations.
pub struct Startd {
    policy: Policy,
    requirements: Expr,
    slots: Vec<Slot>,
    ev: Evaluator,
    measured: Measurements,
    keyboard_active: i64,
    console_active: i64,
    /// The keyboard and console activity an administrator set
    /// ([`Event::SetAttribute`]), kept until cleared: a measurement moves
    /// the activity only forward from it.
    activity_set: (Option<i64>, Option<i64>),
    /// The keyboard and console activity the last measurement found.
    activity_measured: (i64, i64),
    /// The machine's disk (on EXECUTE) and swap at startup, in KB: each
    /// slot keeps its share of them as they are measured.
    totals: (u64, u64),
    last_now: i64,
    next_poll: i64,
    next_update: i64,
    shutdown: Option<ShutdownKind>,
    shutdown_reported: bool,
    /// Draining (condor_drain): no new claims; a slot that would be Owner
    /// is Drained.
    draining: bool,
    backfill_next: usize,
}

/// Attribute names the startd writes at every refresh, made once.
struct Names {
    loadavg: AttrName,
    condorloadavg: AttrName,
    keyboardidle: AttrName,
    consoleidle: AttrName,
    clockmin: AttrName,
    clockday: AttrName,
    totalclaimruntime: AttrName,
    totalclaimsuspendtime: AttrName,
    totaljobruntime: AttrName,
    totaljobsuspendtime: AttrName,
    cpuisbusy: AttrName,
    cpubusytime: AttrName,
    want_suspend: Expr,
    suspend: Expr,
    cont: Expr,
    preempt: Expr,
    want_vacate: Expr,
    kill: Expr,
    periodic_checkpoint: Expr,
}

fn names() -> &'static Names {
    static NAMES: std::sync::OnceLock<Names> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| Names {
        loadavg: AttrName::new("LoadAvg"),
        condorloadavg: AttrName::new("CondorLoadAvg"),
        keyboardidle: AttrName::new("KeyboardIdle"),
        consoleidle: AttrName::new("ConsoleIdle"),
        clockmin: AttrName::new("ClockMin"),
        clockday: AttrName::new("ClockDay"),
        totalclaimruntime: AttrName::new("TotalClaimRunTime"),
        totalclaimsuspendtime: AttrName::new("TotalClaimSuspendTime"),
        totaljobruntime: AttrName::new("TotalJobRunTime"),
        totaljobsuspendtime: AttrName::new("TotalJobSuspendTime"),
        cpuisbusy: AttrName::new("CpuIsBusy"),
        cpubusytime: AttrName::new("CpuBusyTime"),
        want_suspend: Expr::attr("WANT_SUSPEND"),
        suspend: Expr::attr("SUSPEND"),
        cont: Expr::attr("CONTINUE"),
        preempt: Expr::attr("PREEMPT"),
        want_vacate: Expr::attr("WANT_VACATE"),
        kill: Expr::attr("KILL"),
        periodic_checkpoint: Expr::attr("PERIODIC_CHECKPOINT"),
    })
}

/// The latest time the startd works with (about the year 36812); times are
/// taken in `0..=MAX_TIME`.
pub const MAX_TIME: i64 = 1 << 40;

/// Attributes only the startd sets.
const MANAGED: [&str; 10] = [
    "State",
    "Activity",
    "EnteredCurrentState",
    "EnteredCurrentActivity",
    "Requirements",
    "MyType",
    "TargetType",
    "Name",
    "SlotID",
    "VirtualMachineID",
];

/// Spreads the load that is not andes's jobs' (the owner's) over the slots
/// as HTCondor's startd does: the least busy slots take it first (Owner,
/// then Unclaimed, Matched, Claimed, Preempting, Backfill; by slot number
/// within a state), each a full load on each of its CPUs while more is left,
/// the last one reached taking what remains. So an owner's load shows on a
/// slot running a job only once the idle slots are full, and each slot's
/// LoadAvg is its CondorLoadAvg plus its share, the shares summing to the
/// machine's owner load.
fn owner_loads(slots: &[Slot], total: f64) -> Vec<f64> {
    let rank = |st: State| match st {
        State::Owner | State::Drained => 0,
        State::Unclaimed => 1,
        State::Matched => 2,
        State::Claimed => 3,
        State::Preempting => 4,
        State::Backfill => 5,
    };
    let mut order: Vec<usize> = (0..slots.len()).collect();
    order.sort_by_key(|&i| rank(slots[i].state));
    let mut out = vec![0.0; slots.len()];
    let mut left = total.max(0.0);
    for (k, &i) in order.iter().enumerate() {
        let cpus = slots[i].spec.cpus.max(1) as f64;
        if k + 1 < order.len() && left > cpus {
            out[i] = cpus;
            left -= cpus;
        } else {
            out[i] = left;
            break;
        }
    }
    out
}

/// A slot's part of `now`, as `part` was of `whole` (1/`n` when `whole`
/// was unknown).
fn share(part: u64, whole: u64, now: u64, n: usize) -> u64 {
    if whole > 0 {
        (now as u128 * part.min(whole) as u128 / whole as u128) as u64
    } else {
        now / n.max(1) as u64
    }
}

/// The running job's attributes a slot's ad carries while it runs, kept
/// current from the starter (HTCondor's STARTD_JOB_ATTRS).
pub const SLOT_JOB_ATTRS: [&str; 6] =
    ["JobUniverse", "ImageSize", "MemoryUsage", "ResidentSetSize", "ExecutableSize", "NiceUser"];

fn truthy(v: &Value) -> bool {
    v.as_bool() == Some(true)
}

fn is_false(v: &Value) -> bool {
    matches!(v, Value::Bool(false))
}

/// What [`Startd::reconfigure`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reconfigured {
    /// The knobs whose new values apply now.
    pub changed: Vec<String>,
    /// The knobs whose new values wait for the next start (the slot layout).
    pub at_restart: Vec<String>,
}

/// The policy's expressions a slot's ad carries, by attribute name.
fn published_policy(policy: &Policy) -> Vec<(String, Expr)> {
    let mut out = vec![
        ("START".to_string(), policy.start.clone()),
        ("IS_VALID_CHECKPOINT_PLATFORM".to_string(), policy.valid_ckpt_platform.clone()),
        ("Rank".to_string(), policy.rank.clone()),
        ("PERIODIC_CHECKPOINT".to_string(), policy.periodic_checkpoint.clone()),
        ("MaxJobRetirementTime".to_string(), policy.max_job_retirement_time.clone()),
    ];
    for (name, e) in CLAIM_EXPR_NAMES.iter().zip(policy.standard.iter()) {
        out.push((name.to_string(), e.clone()));
    }
    out.extend(policy.startd_attrs.iter().cloned());
    out
}

/// Every knob of the policy that can change while the startd runs, with its
/// value as text: what a reconfiguration compares.
fn policy_knobs(p: &Policy) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![
        ("START".into(), p.start.to_string()),
        ("IS_OWNER".into(), p.is_owner.to_string()),
        ("IS_VALID_CHECKPOINT_PLATFORM".into(), p.valid_ckpt_platform.to_string()),
        ("RANK".into(), p.rank.to_string()),
        ("PERIODIC_CHECKPOINT".into(), p.periodic_checkpoint.to_string()),
        ("MAXJOBRETIREMENTTIME".into(), p.max_job_retirement_time.to_string()),
        ("KILLING_TIMEOUT".into(), p.killing_timeout.to_string()),
        ("CLAIM_WORKLIFE".into(), p.claim_worklife.to_string()),
        ("MATCH_TIMEOUT".into(), p.match_timeout.to_string()),
        ("RunBenchmarks".into(), p.run_benchmarks.to_string()),
        ("START_BACKFILL".into(), p.start_backfill.to_string()),
        ("EVICT_BACKFILL".into(), p.evict_backfill.to_string()),
        ("CPUBusy".into(), p.cpu_busy.to_string()),
        ("MACHINE_MAX_VACATE_TIME".into(), p.machine_max_vacate_time.to_string()),
        ("POLLING_INTERVAL".into(), p.polling_interval.to_string()),
        ("UPDATE_INTERVAL".into(), p.update_interval.to_string()),
        ("ENABLE_BACKFILL".into(), p.backfill.to_string()),
        ("BACKFILL_JOBS".into(), p.backfill_jobs.join(",")),
        ("STARTD_SLOT_ATTRS".into(), p.cross_slot_attrs.join(",")),
    ];
    for (name, e) in CLAIM_EXPR_NAMES.iter().zip(p.standard.iter()) {
        out.push((name.to_string(), e.to_string()));
    }
    for (name, e) in CLAIM_EXPR_NAMES.iter().zip(p.vanilla.iter()) {
        out.push((format!("{name}_VANILLA"), e.to_string()));
    }
    let attrs: Vec<String> = p.startd_attrs.iter().map(|(n, e)| format!("{n} = {e}")).collect();
    out.push(("STARTD_ATTRS".into(), attrs.join("; ")));
    out
}

impl Startd {
    /// A startd for `info` under `policy`, every slot in Owner/Idle at `now`.
    pub fn new(policy: Policy, info: &MachineInfo, now: i64) -> Result<Startd, PolicyError> {
        let now = now.clamp(0, MAX_TIME);
        let layout =
            policy.slot_layout(info.cpus, info.memory_mb, info.disk_kb, info.virtual_memory_kb)?;
        let requirements = parse_expr("START && IS_VALID_CHECKPOINT_PLATFORM")
            .unwrap_or(Expr::Lit(Value::Bool(false)));
        let mut slots = Vec::with_capacity(layout.len());
        for (n, spec) in layout.into_iter().enumerate() {
            let id = n as SlotId + 1;
            let mut ad = ClassAd::new();
            ad.insert_value("MyType", "Machine");
            ad.insert_value("TargetType", "Job");
            ad.insert_value("Name", format!("slot{id}@{}", info.hostname));
            ad.insert_value("Machine", info.hostname.as_str());
            ad.insert_value("SlotID", id as i64);
            ad.insert_value("VirtualMachineID", id as i64);
            ad.insert_value("SlotType", spec.slot_type as i64);
            ad.insert_value("Arch", info.arch.as_str());
            ad.insert_value("OpSys", info.opsys.as_str());
            ad.insert_value("Cpus", spec.cpus as i64);
            ad.insert_value("TotalCpus", info.cpus as i64);
            ad.insert_value("Memory", spec.memory_mb as i64);
            ad.insert_value("Disk", spec.disk_kb as i64);
            ad.insert_value("VirtualMemory", spec.virtual_memory_kb as i64);
            ad.insert_value(
                "UidDomain",
                policy.uid_domain.as_deref().unwrap_or(info.hostname.as_str()),
            );
            ad.insert_value(
                "FileSystemDomain",
                policy.filesystem_domain.as_deref().unwrap_or(info.hostname.as_str()),
            );
            ad.insert_value("CheckpointPlatform", info.checkpoint_platform.as_str());
            ad.insert_value("HasWasm", true);
            ad.insert_value("HasJobDeferral", true);
            ad.insert_value("HasFileTransfer", true);
            ad.insert_value("WasmtimeVersion", info.wasmtime_version.as_str());
            ad.insert_value(
                "WasmFeatures",
                Value::list(info.wasm_features.iter().map(|f| Value::from(f.as_str())).collect()),
            );
            ad.insert_value("LastBenchmark", 0i64);
            ad.insert_value("Mips", 0i64);
            ad.insert_value("KFlops", 0i64);
            ad.insert_value("CurrentRank", 0.0);
            for (name, e) in published_policy(&policy) {
                ad.insert(name.as_str(), e);
            }
            let static_ad = ad.clone();
            ad.insert("Requirements", requirements.clone());
            ad.insert_value("State", State::Owner.as_str());
            ad.insert_value("Activity", Activity::Idle.as_str());
            ad.insert_value("EnteredCurrentState", now);
            ad.insert_value("EnteredCurrentActivity", now);
            slots.push(Slot {
                id,
                spec,
                ad,
                static_ad,
                overrides: ClassAd::new(),
                state: State::Owner,
                activity: Activity::Idle,
                entered_state: now,
                entered_activity: now,
                claim: None,
                pending: None,
                job: None,
                match_deadline: None,
                killing_deadline: None,
                retire: Retire::default(),
                retire_deadline: None,
                vacate_ckpt_pending: false,
                backfill_job: None,
                backfill_cause: None,
                cpu_busy_since: None,
                last_periodic_ckpt: None,
                dirty: true,
            });
        }
        let mut s = Startd {
            draining: false,
            policy,
            requirements,
            slots,
            ev: Evaluator::with_options(EvalOptions {
                now: Some(now),
                seed: Some(0),
                strict: false,
                ..Default::default()
            }),
            measured: Measurements::default(),
            keyboard_active: now - NO_CONSOLE_IDLE,
            console_active: now - NO_CONSOLE_IDLE,
            activity_set: (None, None),
            activity_measured: (now - NO_CONSOLE_IDLE, now - NO_CONSOLE_IDLE),
            totals: (info.disk_kb, info.virtual_memory_kb),
            last_now: now,
            next_poll: now,
            next_update: now,
            shutdown: None,
            shutdown_reported: false,
            backfill_next: 0,
        };
        s.refresh_all(now);
        Ok(s)
    }

    /// Takes a policy read again from the configuration (`andes reconfig`,
    /// condor_reconfig) while every slot keeps its state, activity, claim
    /// and job: the expressions (START, RANK, the claim expressions and
    /// their `_VANILLA` variants, PERIODIC_CHECKPOINT, STARTD_ATTRS, ...)
    /// and intervals apply from the next evaluation, which runs at once.
    /// The slot layout (NUM_CPUS, MEMORY, NUM_SLOTS, the slot types) and
    /// the domains are the machine's shape while the startd runs, as in
    /// HTCondor: a change to them is reported and takes effect at the next
    /// start.
    pub fn reconfigure(&mut self, mut policy: Policy, now: i64) -> Reconfigured {
        let old = &self.policy;
        let mut at_restart = Vec::new();
        // The machine's shape stays as it is; a change to it is reported.
        let mut keep = |name: &str, changed: bool| {
            if changed {
                at_restart.push(name.to_string());
            }
        };
        keep("NUM_CPUS", policy.num_cpus != old.num_cpus);
        keep("MEMORY", policy.memory_mb != old.memory_mb);
        keep("NUM_SLOTS", policy.num_slots != old.num_slots);
        keep("SLOT_TYPE_<N> / NUM_SLOTS_TYPE_<N>", policy.slot_types != old.slot_types);
        keep("UID_DOMAIN", policy.uid_domain != old.uid_domain);
        keep("FILESYSTEM_DOMAIN", policy.filesystem_domain != old.filesystem_domain);
        policy.num_cpus = old.num_cpus;
        policy.memory_mb = old.memory_mb;
        policy.num_slots = old.num_slots;
        policy.slot_types = old.slot_types.clone();
        policy.uid_domain = old.uid_domain.clone();
        policy.filesystem_domain = old.filesystem_domain.clone();
        let changed: Vec<String> = policy_knobs(old)
            .into_iter()
            .zip(policy_knobs(&policy))
            .filter(|((_, a), (_, b))| a != b)
            .map(|((name, _), _)| name)
            .collect();
        let gone: Vec<String> = old
            .startd_attrs
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| !policy.startd_attrs.iter().any(|(m, _)| m.eq_ignore_ascii_case(n)))
            .collect();
        let published = published_policy(&policy);
        for slot in &mut self.slots {
            for ad in [&mut slot.ad, &mut slot.static_ad] {
                for name in &gone {
                    ad.remove(name.as_str());
                }
                for (name, e) in &published {
                    ad.insert(name.as_str(), e.clone());
                }
            }
            slot.dirty = true;
        }
        self.policy = policy;
        // The next poll comes at the new interval at the latest.
        self.next_poll =
            self.next_poll.min(now.saturating_add(self.policy.polling_interval.max(1)));
        self.refresh_all(now);
        Reconfigured { changed, at_restart }
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// All slots, slot 1 first.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// One slot.
    pub fn slot(&self, id: SlotId) -> Option<&Slot> {
        self.index(id).map(|i| &self.slots[i])
    }

    fn index(&self, id: SlotId) -> Option<usize> {
        let i = (id as usize).checked_sub(1)?;
        (i < self.slots.len()).then_some(i)
    }

    /// When the startd next needs an event (a [`Event::Tick`] will do):
    /// its next poll or update, or the earliest MATCH_TIMEOUT,
    /// KILLING_TIMEOUT or end of retirement.
    pub fn next_deadline(&self) -> i64 {
        let mut t = self.next_poll.min(self.next_update);
        for s in &self.slots {
            for d in [s.match_deadline, s.killing_deadline, s.retire_deadline].into_iter().flatten()
            {
                t = t.min(d);
            }
        }
        t.min(MAX_TIME)
    }

    /// When the startd next evaluates its policy: every POLLING_INTERVAL
    /// while a slot is matched, claimed, preempting or backfilling, every
    /// UPDATE_INTERVAL otherwise (the spec: an Owner machine is left alone).
    /// The machine's owner activity should be measured just before it.
    pub fn next_poll(&self) -> i64 {
        self.next_poll
    }

    /// The retirement clock of a retiring slot's job and the time the
    /// machine grants it (`None`: unlimited), or `None` when not retiring.
    pub fn retirement(&mut self, id: SlotId, now: i64) -> Option<(i64, Option<i64>)> {
        let i = self.index(id)?;
        if !self.slots[i].retire.active {
            return None;
        }
        let run = self.slots[i].job.as_ref()?.run_time(now);
        self.ev.set_now(Some(now));
        Some((run, self.retirement_grant(i)))
    }

    /// Feeds one event at `now` (seconds since the epoch; a virtual clock in
    /// tests) and returns what to do. Time never goes backwards: an earlier
    /// `now` than the last one is taken as the last one.
    pub fn handle(&mut self, now: i64, event: Event) -> Vec<Action> {
        let now = now.clamp(0, MAX_TIME).max(self.last_now);
        self.last_now = now;
        self.ev.set_now(Some(now));
        let mut acts = Vec::new();
        if let Event::Measured(m) = &event {
            self.measure(now, m.clone());
        }
        self.refresh_all(now);
        self.timers(now, &mut acts);
        match event {
            Event::Tick => {
                for i in 0..self.slots.len() {
                    self.evaluate(i, now, &mut acts);
                }
                self.timers(now, &mut acts);
                if now >= self.next_update {
                    self.next_update = now.saturating_add(self.policy.update_interval);
                    for s in &mut self.slots {
                        s.dirty = true;
                    }
                }
                let active = self.slots.iter().any(|s| {
                    !matches!(
                        (s.state, s.activity),
                        (State::Owner, _) | (State::Unclaimed, Activity::Idle)
                    )
                });
                let interval =
                    if active { self.policy.polling_interval } else { self.policy.update_interval };
                self.next_poll = now.saturating_add(interval);
            }
            Event::Measured(_) => {}
            Event::MatchNotified { slot, claim_id } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_match(i, claim_id, now, &mut acts);
                }
            }
            Event::ClaimRequested { slot, claim } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_claim(i, claim, false, now, &mut acts);
                }
            }
            Event::BetterMatch { slot, claim } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_claim(i, claim, true, now, &mut acts);
                }
            }
            Event::ClaimActivated { slot, claim_id, job } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_activate(i, claim_id, job, now, &mut acts);
                }
            }
            Event::JobUpdated { slot, claim_id, attrs } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    let s = &mut self.slots[i];
                    match (&mut s.job, s.claim.as_ref()) {
                        (Some(job), Some(c)) if c.req.claim_id == claim_id => {
                            job.ad.update(&attrs);
                            for n in SLOT_JOB_ATTRS {
                                if let Some(e) = attrs.get(n) {
                                    s.ad.insert(n, e.clone());
                                }
                            }
                            // The policy sees it at once; the collector at
                            // the next update (UPDATE_INTERVAL or a change
                            // of state), not at every report of the job's
                            // memory.
                        }
                        _ => acts.push(Action::EventRejected {
                            reason: format!("slot {slot}: no job on the claim named"),
                        }),
                    }
                }
            }
            Event::ClaimReleased { slot, claim_id } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_release(i, &claim_id, now, &mut acts);
                }
            }
            Event::StarterExited { slot, outcome: _ } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_starter_exit(i, now, &mut acts);
                }
            }
            Event::CheckpointFinished { slot, ok: _ } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    let s = &mut self.slots[i];
                    if s.activity == Activity::Vacating && s.vacate_ckpt_pending {
                        s.vacate_ckpt_pending = false;
                        let grace = self.grace(i);
                        acts.push(Action::SoftKill { slot, grace_secs: grace });
                    }
                }
            }
            Event::BenchmarkFinished { slot, mips, kflops } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    let s = &mut self.slots[i];
                    if (s.state, s.activity) == (State::Unclaimed, Activity::Benchmarking) {
                        for (n, v) in [("Mips", mips), ("KFlops", kflops), ("LastBenchmark", now)] {
                            s.ad.insert_value(n, v);
                            s.static_ad.insert_value(n, v);
                        }
                        self.go(i, 4, State::Unclaimed, Activity::Idle, now, &mut acts);
                    }
                }
            }
            Event::BackfillExited { slot } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_backfill_exit(i, now, &mut acts);
                }
            }
            Event::Vacate { slot, kind } => {
                let targets: Vec<usize> = match slot {
                    Some(id) => self.slot_or_reject(id, &mut acts).into_iter().collect(),
                    None => (0..self.slots.len()).collect(),
                };
                for i in targets {
                    self.on_vacate(i, kind, now, &mut acts);
                }
            }
            Event::Drain { kind } => {
                self.draining = true;
                let kind = if kind == VacateKind::Fast {
                    ShutdownKind::Fast
                } else {
                    ShutdownKind::Graceful
                };
                for i in 0..self.slots.len() {
                    self.on_shutdown(i, kind, now, &mut acts);
                    // An idle slot is Drained at once.
                    if self.slots[i].state == State::Owner {
                        self.go(i, 40, State::Owner, Activity::Idle, now, &mut acts);
                    }
                }
            }
            Event::CancelDrain => {
                self.draining = false;
                for i in 0..self.slots.len() {
                    if self.slots[i].state == State::Drained {
                        self.go(i, 41, State::Owner, Activity::Idle, now, &mut acts);
                        self.evaluate(i, now, &mut acts);
                    }
                }
            }
            Event::CheckpointNow { slot } => {
                let targets: Vec<usize> = match slot {
                    Some(id) => self.slot_or_reject(id, &mut acts).into_iter().collect(),
                    None => (0..self.slots.len()).collect(),
                };
                let mut asked = 0;
                for i in targets {
                    let s = &mut self.slots[i];
                    let running = s.state == State::Claimed && s.activity == Activity::Busy;
                    if running && s.job.as_ref().is_some_and(|j| j.checkpointable) {
                        s.last_periodic_ckpt = Some(now);
                        s.ad.insert_value("LastPeriodicCheckpoint", now);
                        s.dirty = true;
                        acts.push(Action::Checkpoint {
                            slot: s.id,
                            kind: CheckpointKind::Periodic,
                        });
                        asked += 1;
                    }
                }
                if asked == 0 {
                    let what = slot.map_or("any slot".to_string(), |s| format!("slot {s}"));
                    acts.push(Action::EventRejected {
                        reason: format!("no job that can checkpoint is running on {what}"),
                    });
                }
            }
            Event::Shutdown(kind) => {
                self.shutdown = Some(match (self.shutdown, kind) {
                    (Some(ShutdownKind::Fast), _) | (_, ShutdownKind::Fast) => ShutdownKind::Fast,
                    (Some(ShutdownKind::Graceful), _) => ShutdownKind::Graceful,
                    _ => kind,
                });
                for i in 0..self.slots.len() {
                    self.on_shutdown(i, kind, now, &mut acts);
                }
            }
            Event::SetAttribute { slot, name, value } => {
                let targets: Vec<usize> = match slot {
                    Some(id) => self.slot_or_reject(id, &mut acts).into_iter().collect(),
                    None => (0..self.slots.len()).collect(),
                };
                self.set_attribute(&targets, &name, value, now, &mut acts);
            }
        }
        // The event may have changed what the timers look at (a retirement
        // time lowered, a job gone).
        self.timers(now, &mut acts);
        if self.shutdown.is_some()
            && !self.shutdown_reported
            && self
                .slots
                .iter()
                .all(|s| matches!(s.state, State::Owner | State::Drained) && s.job.is_none())
        {
            self.shutdown_reported = true;
            acts.push(Action::ShutdownComplete);
        }
        let dirty: Vec<usize> = (0..self.slots.len()).filter(|&i| self.slots[i].dirty).collect();
        if !dirty.is_empty() {
            self.refresh_all(now);
            for i in dirty {
                let s = &mut self.slots[i];
                s.dirty = false;
                acts.push(Action::Publish { slot: s.id, ad: s.ad.clone() });
            }
        }
        acts
    }

    fn slot_or_reject(&self, id: SlotId, acts: &mut Vec<Action>) -> Option<usize> {
        let i = self.index(id);
        if i.is_none() {
            acts.push(Action::EventRejected {
                reason: format!("no slot {id} (this startd has {})", self.slots.len()),
            });
        }
        i
    }

    // -- measurements and the ad ------------------------------------------

    fn measure(&mut self, now: i64, m: Measurements) {
        let clamp = |x: i64| x.clamp(0, NO_CONSOLE_IDLE);
        // A value set by hand stands until the machine's own activity is more
        // recent: measuring every few seconds never undoes it.
        let (kb, con) = self.activity_set;
        self.activity_measured = (now - clamp(m.keyboard_idle), now - clamp(m.console_idle));
        self.keyboard_active = self.activity_measured.0.max(kb.unwrap_or(i64::MIN));
        self.console_active = self.activity_measured.1.max(con.unwrap_or(i64::MIN));
        self.measured = m;
    }

    fn refresh_all(&mut self, now: i64) {
        let m = &self.measured;
        let nm = names();
        let local = now.saturating_add(m.utc_offset as i64);
        let clock_min = local.rem_euclid(86_400) / 60;
        let clock_day = (local.div_euclid(86_400) + 4).rem_euclid(7);
        let sane = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
        let condor: Vec<f64> = (0..self.slots.len())
            .map(|i| sane(m.condor_load.get(i).copied().unwrap_or(0.0)))
            .collect();
        let owner = owner_loads(&self.slots, sane(m.load_avg) - condor.iter().sum::<f64>());
        let keyboard_idle = (now - self.keyboard_active).clamp(0, NO_CONSOLE_IDLE);
        let console_idle = (now - self.console_active).clamp(0, NO_CONSOLE_IDLE);
        let n = self.slots.len();
        let totals = self.totals;
        for ((s, &own), &mine) in self.slots.iter_mut().zip(condor.iter()).zip(owner.iter()) {
            let ad = &mut s.ad;
            // Disk and VirtualMemory are what is free now, each slot keeping
            // its share (the spec: the space available in EXECUTE).
            if let Some(free) = m.disk_free_kb {
                ad.insert_value("Disk", share(s.spec.disk_kb, totals.0, free, n) as i64);
            }
            if let Some(free) = m.swap_free_kb {
                ad.insert_value(
                    "VirtualMemory",
                    share(s.spec.virtual_memory_kb, totals.1, free, n) as i64,
                );
            }
            ad.insert_value(nm.loadavg.clone(), own + mine);
            ad.insert_value(nm.condorloadavg.clone(), own);
            ad.insert_value(nm.keyboardidle.clone(), keyboard_idle);
            ad.insert_value(nm.consoleidle.clone(), console_idle.max(keyboard_idle));
            ad.insert_value(nm.clockmin.clone(), clock_min);
            ad.insert_value(nm.clockday.clone(), clock_day);
            match &s.claim {
                Some(c) => {
                    let (jr, js) =
                        s.job.as_ref().map_or((0, 0), |j| (j.run_time(now), j.suspend_time(now)));
                    ad.insert_value(nm.totalclaimruntime.clone(), c.run_time + jr);
                    ad.insert_value(nm.totalclaimsuspendtime.clone(), c.suspend_time + js);
                }
                None => {
                    ad.remove(nm.totalclaimruntime.as_str());
                    ad.remove(nm.totalclaimsuspendtime.as_str());
                }
            }
            match &s.job {
                Some(j) => {
                    ad.insert_value(nm.totaljobruntime.clone(), j.run_time(now));
                    ad.insert_value(nm.totaljobsuspendtime.clone(), j.suspend_time(now));
                }
                None => {
                    ad.remove(nm.totaljobruntime.as_str());
                    ad.remove(nm.totaljobsuspendtime.as_str());
                }
            }
            for (name, e) in &self.policy.startd_attrs {
                ad.insert(name.as_str(), e.clone());
            }
            for (name, e) in s.overrides.iter() {
                ad.insert(name.clone(), e.clone());
            }
            let busy = truthy(&self.ev.eval(&self.policy.cpu_busy, Some(&s.ad), None));
            if busy {
                s.cpu_busy_since.get_or_insert(now);
            } else {
                s.cpu_busy_since = None;
            }
            s.ad.insert_value(nm.cpuisbusy.clone(), busy);
            s.ad.insert_value(nm.cpubusytime.clone(), s.cpu_busy_since.map_or(0, |t| now - t));
        }
        if !self.policy.cross_slot_attrs.is_empty() {
            let mut vals = Vec::new();
            for s in &self.slots {
                for a in &self.policy.cross_slot_attrs {
                    vals.push((s.id, a.as_str(), self.ev.eval_attr(&s.ad, None, a)));
                }
            }
            for s in &mut self.slots {
                for (id, a, v) in &vals {
                    s.ad.insert_value(format!("slot{id}_{a}").as_str(), v.clone());
                    s.ad.insert_value(format!("vm{id}_{a}").as_str(), v.clone());
                }
            }
        }
    }

    fn set_attribute(
        &mut self,
        targets: &[usize],
        name: &str,
        value: Option<Expr>,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let lname = name.to_ascii_lowercase();
        if name.is_empty() || MANAGED.iter().any(|m| m.eq_ignore_ascii_case(name)) {
            acts.push(Action::EventRejected {
                reason: format!(
                    "`{name}` is not an attribute that can be set: the startd manages it"
                ),
            });
            return;
        }
        if lname == "keyboardidle" || lname == "consoleidle" {
            let secs = match &value {
                None => None,
                Some(e) => match self.ev.eval(e, None, None).as_int() {
                    Some(v) => Some(v.clamp(0, NO_CONSOLE_IDLE)),
                    None => {
                        acts.push(Action::EventRejected {
                            reason: format!("{name} must be a number of seconds, not {e}"),
                        });
                        return;
                    }
                },
            };
            // Cleared, the last measurement's value is back.
            let at = secs.map(|s| now - s);
            if lname == "keyboardidle" {
                self.activity_set.0 = at;
                self.keyboard_active = at.unwrap_or(self.activity_measured.0);
            } else {
                self.activity_set.1 = at;
                self.console_active = at.unwrap_or(self.activity_measured.1);
            }
        } else {
            for &i in targets {
                let s = &mut self.slots[i];
                match &value {
                    Some(e) => {
                        s.overrides.insert(name, e.clone());
                        s.ad.insert(name, e.clone());
                    }
                    None => {
                        s.overrides.remove(name);
                        match s.static_ad.get(name) {
                            Some(e) => {
                                let e = e.clone();
                                s.ad.insert(name, e);
                            }
                            None => {
                                s.ad.remove(name);
                            }
                        }
                    }
                }
            }
        }
        for &i in targets {
            self.slots[i].dirty = true;
        }
        self.refresh_all(now);
    }

    /// Evaluates a policy expression with the slot's ad as MY and, as
    /// TARGET, the job (or else the claim's request ad) when `with_job`.
    fn pol(&mut self, i: usize, which: fn(&Policy) -> &Expr, with_job: bool) -> Value {
        let s = &self.slots[i];
        let t = if with_job {
            s.job.as_ref().map(|j| &j.ad).or(s.claim.as_ref().map(|c| &c.req.ad))
        } else {
            None
        };
        self.ev.eval(which(&self.policy), Some(&s.ad), t)
    }

    /// Evaluates a policy expression against `target`.
    fn pol_with(&mut self, i: usize, which: fn(&Policy) -> &Expr, target: &ClassAd) -> Value {
        self.ev.eval(which(&self.policy), Some(&self.slots[i].ad), Some(target))
    }

    fn eval_named(&mut self, i: usize, which: fn(&Names) -> &Expr) -> Value {
        let s = &self.slots[i];
        let target = s.job.as_ref().map(|j| &j.ad).or(s.claim.as_ref().map(|c| &c.req.ad));
        self.ev.eval(which(names()), Some(&s.ad), target)
    }

    fn pol_int(&mut self, i: usize, which: fn(&Policy) -> &Expr, default: i64) -> i64 {
        self.pol(i, which, true).as_int().unwrap_or(default)
    }

    // -- transitions -------------------------------------------------------

    fn go(
        &mut self,
        i: usize,
        number: u8,
        state: State,
        activity: Activity,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        // Draining, a slot with no claim is Drained, not Owner.
        let state = if state == State::Owner && self.draining { State::Drained } else { state };
        let s = &mut self.slots[i];
        let from = (s.state, s.activity);
        if let Some(j) = &mut s.job {
            let to_susp = activity == Activity::Suspended;
            if to_susp != j.suspended {
                let seg = (now - j.seg_start).max(0);
                if j.suspended {
                    j.suspend_accum += seg;
                } else {
                    j.run_accum += seg;
                }
                j.suspended = to_susp;
                j.seg_start = now;
            }
        }
        if s.state != state {
            s.entered_state = now;
            s.ad.insert_value("EnteredCurrentState", now);
        }
        if s.state != state || s.activity != activity {
            s.entered_activity = now;
            s.ad.insert_value("EnteredCurrentActivity", now);
        }
        s.state = state;
        s.activity = activity;
        s.ad.insert_value("State", state.as_str());
        s.ad.insert_value("Activity", activity.as_str());
        // A slot matched, being preempted or drained matches no job.
        if matches!(state, State::Matched | State::Preempting | State::Drained) {
            s.ad.insert_value("Requirements", false);
        } else {
            s.ad.insert("Requirements", self.requirements.clone());
        }
        if state != State::Matched {
            s.match_deadline = None;
        }
        if activity != Activity::Killing {
            s.killing_deadline = None;
        }
        if !matches!(activity, Activity::Retiring | Activity::Suspended) {
            s.retire_deadline = None;
        }
        s.dirty = true;
        acts.push(Action::Transition { slot: s.id, number, from, to: (state, activity) });
    }

    fn install_claim(&mut self, i: usize, req: ClaimRequest, now: i64, acts: &mut Vec<Action>) {
        let rank = {
            let s = &self.slots[i];
            self.ev.eval(&self.policy.rank, Some(&s.ad), Some(&req.ad)).as_real().unwrap_or(0.0)
        };
        let s = &mut self.slots[i];
        s.ad.insert_value("RemoteOwner", req.owner.as_str());
        s.ad.insert_value("RemoteUser", req.user.as_deref().unwrap_or(&req.owner));
        s.ad.insert_value("ClientMachine", req.client_machine.as_str());
        s.ad.insert_value("CurrentRank", rank);
        acts.push(Action::ClaimAccepted { slot: s.id, claim_id: req.claim_id.clone() });
        s.claim = Some(Claim {
            req,
            since: now,
            activations: 0,
            run_time: 0,
            suspend_time: 0,
            end: ClaimEnd::Broken,
        });
        s.retire = Retire::default();
    }

    fn drop_claim(&mut self, i: usize, acts: &mut Vec<Action>) {
        let s = &mut self.slots[i];
        if let Some(c) = s.claim.take() {
            let claim_id = c.req.claim_id;
            match c.end {
                ClaimEnd::Broken => acts.push(Action::ClaimBroken { slot: s.id, claim_id }),
                ClaimEnd::Expired => acts.push(Action::ReleaseClaim { slot: s.id, claim_id }),
                ClaimEnd::Released => {}
            }
        }
        for n in ["RemoteOwner", "RemoteUser", "ClientMachine"] {
            s.ad.remove(n);
        }
        s.ad.insert_value("CurrentRank", 0.0);
        s.retire = Retire::default();
    }

    fn end_job(&mut self, i: usize, now: i64) {
        let s = &mut self.slots[i];
        if let Some(j) = s.job.take()
            && let Some(c) = &mut s.claim
        {
            c.run_time += j.run_time(now);
            c.suspend_time += j.suspend_time(now);
        }
        for n in ["JobId", "JobStart", "LastPeriodicCheckpoint"].into_iter().chain(SLOT_JOB_ATTRS) {
            s.ad.remove(n);
        }
        for (name, e) in CLAIM_EXPR_NAMES.iter().zip(self.policy.standard.iter()) {
            s.ad.insert(*name, e.clone());
        }
        s.vacate_ckpt_pending = false;
        s.last_periodic_ckpt = None;
        s.retire_deadline = None;
        s.killing_deadline = None;
    }

    fn on_match(&mut self, i: usize, _claim_id: String, now: i64, acts: &mut Vec<Action>) {
        if self.shutdown.is_some() || self.draining {
            return;
        }
        let (state, activity) = (self.slots[i].state, self.slots[i].activity);
        match (state, activity) {
            (State::Owner, _) if !truthy(&self.pol(i, |p| &p.is_owner, false)) => {
                self.go(i, 1, State::Unclaimed, Activity::Idle, now, acts);
                self.enter_matched(i, 6, now, acts);
            }
            (State::Unclaimed, _) => {
                self.stop_benchmarking(i, now, acts);
                self.enter_matched(i, 6, now, acts)
            }
            (State::Backfill, Activity::Busy) => {
                self.slots[i].backfill_cause = Some(BackfillCause::Matched);
                self.kill_backfill(i, now, acts);
            }
            (State::Backfill, Activity::Idle) => self.enter_matched(i, 32, now, acts),
            (State::Backfill, Activity::Killing) => {
                let s = &mut self.slots[i];
                if s.backfill_cause.is_none() {
                    s.backfill_cause = Some(BackfillCause::Matched);
                }
            }
            _ => {}
        }
    }

    /// A match, a claim or a shutdown does not wait for the benchmarks: the
    /// slot leaves Benchmarking for Unclaimed/Idle (4) and their result, when
    /// it comes, is not recorded.
    fn stop_benchmarking(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        if self.slots[i].activity == Activity::Benchmarking {
            self.go(i, 4, State::Unclaimed, Activity::Idle, now, acts);
        }
    }

    fn enter_matched(&mut self, i: usize, number: u8, now: i64, acts: &mut Vec<Action>) {
        let timeout = self.pol_int(i, |p| &p.match_timeout, 120).max(0);
        self.go(i, number, State::Matched, Activity::Idle, now, acts);
        self.slots[i].match_deadline = Some(now.saturating_add(timeout));
    }

    fn requirements_hold(&mut self, i: usize, ad: &ClassAd) -> bool {
        let start = self.ev.eval_attr(&self.slots[i].ad, Some(ad), "START");
        let ckpt = self.ev.eval_attr(&self.slots[i].ad, Some(ad), "IS_VALID_CHECKPOINT_PLATFORM");
        truthy(&start) && truthy(&ckpt)
    }

    fn on_claim(
        &mut self,
        i: usize,
        req: ClaimRequest,
        forced: bool,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let id = self.slots[i].id;
        let refuse = |acts: &mut Vec<Action>, req: &ClaimRequest, reason: &str| {
            acts.push(Action::ClaimRefused {
                slot: id,
                claim_id: req.claim_id.clone(),
                reason: reason.to_string(),
            })
        };
        if self.shutdown.is_some() {
            return refuse(acts, &req, "the startd is shutting down");
        }
        if !self.requirements_hold(i, &req.ad) {
            return refuse(
                acts,
                &req,
                "the machine's Requirements (START) are not met by this request",
            );
        }
        let (state, activity) = (self.slots[i].state, self.slots[i].activity);
        match (state, activity) {
            (State::Owner, _) => {
                self.go(i, 1, State::Unclaimed, Activity::Idle, now, acts);
                self.install_claim(i, req, now, acts);
                self.go(i, 5, State::Claimed, Activity::Idle, now, acts);
            }
            (State::Unclaimed, _) => {
                self.stop_benchmarking(i, now, acts);
                self.install_claim(i, req, now, acts);
                self.go(i, 5, State::Claimed, Activity::Idle, now, acts);
            }
            (State::Matched, _) => {
                self.install_claim(i, req, now, acts);
                self.go(i, 9, State::Claimed, Activity::Idle, now, acts);
            }
            (State::Backfill, Activity::Idle) if self.slots[i].backfill_job.is_none() => {
                self.install_claim(i, req, now, acts);
                self.go(i, 31, State::Claimed, Activity::Idle, now, acts);
            }
            (State::Backfill, _) => {
                if let Some(old) = self.slots[i].pending.replace(req) {
                    refuse(acts, &old, "superseded by another claim");
                }
                if !matches!(self.slots[i].backfill_cause, Some(BackfillCause::Evict)) {
                    self.slots[i].backfill_cause = Some(BackfillCause::Claimed);
                }
                if self.slots[i].activity == Activity::Busy {
                    self.kill_backfill(i, now, acts);
                }
            }
            (State::Claimed, _) => {
                if !forced {
                    let new_rank = self.pol_with(i, |p| &p.rank, &req.ad).as_real().unwrap_or(0.0);
                    let cur = self.slots[i].ad.eval_attr("CurrentRank").as_real().unwrap_or(0.0);
                    if new_rank <= cur {
                        return refuse(
                            acts,
                            &req,
                            "the slot is claimed and RANK does not prefer this request",
                        );
                    }
                }
                if let Some(old) = self.slots[i].pending.replace(req) {
                    refuse(acts, &old, "superseded by a better match");
                }
                match activity {
                    Activity::Idle => self.preempt(i, 10, false, now, acts),
                    Activity::Busy => {
                        self.slots[i].retire.better_match = true;
                        self.begin_retirement(i, 13, now, acts);
                    }
                    _ => {
                        self.slots[i].retire.better_match = true;
                        self.slots[i].retire.active = true;
                        self.check_retirement(i, now, acts);
                    }
                }
            }
            (State::Preempting, _) => refuse(acts, &req, "the slot is being preempted"),
            (State::Drained, _) => refuse(acts, &req, "the machine is being drained"),
        }
    }

    fn on_activate(
        &mut self,
        i: usize,
        claim_id: String,
        job: ClassAd,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let id = self.slots[i].id;
        let refuse = |acts: &mut Vec<Action>, reason: String| {
            acts.push(Action::ActivationRefused { slot: id, claim_id: claim_id.clone(), reason })
        };
        let s = &self.slots[i];
        if s.claim_id() != Some(claim_id.as_str()) {
            return refuse(acts, "no such claim on this slot".into());
        }
        if (s.state, s.activity) != (State::Claimed, Activity::Idle) {
            return refuse(
                acts,
                format!("the slot is {}/{}", s.state.as_str(), s.activity.as_str()),
            );
        }
        // CLAIM_WORKLIFE is when a claim stops accepting *new* jobs: the
        // first, which the claim was made for, is never refused by it (a
        // claim of worklife 0 runs exactly one job, even when its activation
        // comes in the second after the claim's).
        let (since, activations) = s.claim.as_ref().map_or((now, 0), |c| (c.since, c.activations));
        let worklife = self.pol_with(i, |p| &p.claim_worklife, &job).as_int().unwrap_or(-1);
        if activations > 0 && worklife >= 0 && now - since > worklife {
            refuse(acts, format!("the claim's CLAIM_WORKLIFE ({worklife} s) is over"));
            if let Some(c) = &mut self.slots[i].claim {
                c.end = ClaimEnd::Expired;
            }
            self.preempt(i, 10, false, now, acts);
            return;
        }
        if !self.requirements_hold(i, &job) {
            return refuse(
                acts,
                "the machine's Requirements (START) are not met by this job".into(),
            );
        }
        let checkpointable = can_checkpoint(&job);
        let rank = self.pol_with(i, |p| &p.rank, &job).as_real().unwrap_or(0.0);
        let exprs: ClaimExprs =
            if checkpointable { self.policy.standard.clone() } else { self.policy.vanilla.clone() };
        let s = &mut self.slots[i];
        for (name, e) in CLAIM_EXPR_NAMES.iter().zip(exprs.iter()) {
            s.ad.insert(*name, e.clone());
        }
        let job_id = match (job.eval_attr("ClusterId").as_int(), job.eval_attr("ProcId").as_int()) {
            (Some(c), Some(p)) => format!("{c}.{p}"),
            _ => job.eval_attr("GlobalJobId").as_str().unwrap_or("0.0").to_string(),
        };
        s.ad.insert_value("JobId", job_id);
        s.ad.insert_value("JobStart", now);
        for n in SLOT_JOB_ATTRS {
            match job.get(n) {
                Some(e) => s.ad.insert(n, e.clone()),
                None => {
                    s.ad.remove(n);
                }
            }
        }
        s.ad.insert_value("CurrentRank", rank);
        if checkpointable {
            // The first periodic checkpoint counts from the job's start.
            s.ad.insert_value("LastPeriodicCheckpoint", now);
        }
        if let Some(c) = &mut s.claim {
            c.activations += 1;
            // As HTCondor's startd does, the claim now stands for the job it
            // runs: between this job and the next, Claimed/Idle judges START
            // (transition 10) and RANK against the last job activated, not
            // the request the claim was first made with.
            c.req.ad = job.clone();
        }
        s.job = Some(Job {
            ad: job.clone(),
            checkpointable,
            run_accum: 0,
            suspend_accum: 0,
            seg_start: now,
            suspended: false,
        });
        acts.push(Action::StartJob { slot: id, claim_id, job });
        self.go(i, 11, State::Claimed, Activity::Busy, now, acts);
    }

    fn on_release(&mut self, i: usize, claim_id: &str, now: i64, acts: &mut Vec<Action>) {
        let s = &mut self.slots[i];
        if s.pending_claim_id() == Some(claim_id) {
            s.pending = None;
            let r = s.retire;
            if r.better_match && !r.owner && !r.shutdown {
                s.retire = Retire::default();
                s.retire_deadline = None;
                if s.activity == Activity::Retiring {
                    self.go(i, 19, State::Claimed, Activity::Busy, now, acts);
                }
            }
            return;
        }
        if s.claim_id() != Some(claim_id) {
            acts.push(Action::EventRejected {
                reason: format!(
                    "slot {}: the claim named is not its claim; nothing released",
                    s.id
                ),
            });
            return;
        }
        if let Some(c) = &mut s.claim {
            c.end = ClaimEnd::Released;
        }
        match (s.state, s.activity) {
            (State::Claimed, Activity::Idle) => self.preempt(i, 10, false, now, acts),
            (State::Claimed, _) => {
                // The schedd wants its job gone: no retirement. A better
                // match waiting for this claim gets the slot afterwards.
                self.force_preempt(i, false, now, acts);
            }
            _ => {}
        }
    }

    fn on_starter_exit(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let s = &self.slots[i];
        if s.job.is_none() {
            return;
        }
        match (s.state, s.activity) {
            (State::Claimed, Activity::Busy) | (State::Claimed, Activity::Suspended)
                if !s.retire.active =>
            {
                if s.activity == Activity::Suspended {
                    // The job ended while suspended (it was killed): it is
                    // no longer suspended (15), and its starter exited (12);
                    // the diagram has no edge from Suspended to Idle.
                    self.go(i, 15, State::Claimed, Activity::Busy, now, acts);
                }
                self.end_job(i, now);
                self.go(i, 12, State::Claimed, Activity::Idle, now, acts);
                let since = self.slots[i].claim.as_ref().map_or(now, |c| c.since);
                let worklife = self.pol_int(i, |p| &p.claim_worklife, -1);
                if worklife >= 0 && now - since > worklife {
                    if let Some(c) = &mut self.slots[i].claim {
                        c.end = ClaimEnd::Expired;
                    }
                    self.preempt(i, 10, false, now, acts);
                }
            }
            (State::Claimed, Activity::Retiring) | (State::Claimed, Activity::Suspended) => {
                let number = if s.activity == Activity::Suspended { 17 } else { 18 };
                self.end_job(i, now);
                self.preempt(i, number, false, now, acts);
            }
            (State::Preempting, _) => {
                self.end_job(i, now);
                self.finish_preempting(i, now, acts);
            }
            _ => self.end_job(i, now),
        }
    }

    fn on_backfill_exit(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let s = &mut self.slots[i];
        if s.state != State::Backfill {
            return;
        }
        s.backfill_job = None;
        match s.activity {
            Activity::Busy => self.go(i, 27, State::Backfill, Activity::Idle, now, acts),
            Activity::Killing => {
                self.go(i, 29, State::Backfill, Activity::Idle, now, acts);
                self.leave_backfill(i, now, acts);
            }
            _ => {}
        }
    }

    fn leave_backfill(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let cause = self.slots[i].backfill_cause.take();
        let pending = self.slots[i].pending.take();
        match (cause, pending) {
            (Some(BackfillCause::Claimed), Some(req)) if self.shutdown.is_none() => {
                self.install_claim(i, req, now, acts);
                self.go(i, 31, State::Claimed, Activity::Idle, now, acts);
            }
            (Some(BackfillCause::Matched), None) if self.shutdown.is_none() => {
                self.enter_matched(i, 32, now, acts)
            }
            (_, pending) => {
                if let Some(req) = pending {
                    acts.push(Action::ClaimRefused {
                        slot: self.slots[i].id,
                        claim_id: req.claim_id,
                        reason: "the slot went back to its owner".into(),
                    });
                }
                self.go(i, 30, State::Owner, Activity::Idle, now, acts)
            }
        }
    }

    fn kill_backfill(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        acts.push(Action::KillBackfill { slot: self.slots[i].id });
        self.go(i, 28, State::Backfill, Activity::Killing, now, acts);
    }

    fn on_vacate(&mut self, i: usize, kind: VacateKind, now: i64, acts: &mut Vec<Action>) {
        let (state, activity) = (self.slots[i].state, self.slots[i].activity);
        let fast = kind == VacateKind::Fast;
        match (state, activity) {
            (State::Matched, _) => self.go(i, 8, State::Owner, Activity::Idle, now, acts),
            (State::Claimed, _) => {
                self.slots[i].retire.owner = true;
                self.end_claim(i, fast, now, acts);
            }
            (State::Preempting, Activity::Vacating) if fast => self.start_killing(i, 21, now, acts),
            (State::Preempting, _) => self.slots[i].retire.owner = true,
            (State::Backfill, Activity::Busy) => {
                self.slots[i].backfill_cause = Some(BackfillCause::Evict);
                self.kill_backfill(i, now, acts);
            }
            (State::Backfill, Activity::Killing) => {
                self.slots[i].backfill_cause = Some(BackfillCause::Evict)
            }
            (State::Backfill, _) => {
                self.slots[i].backfill_cause = Some(BackfillCause::Evict);
                self.leave_backfill(i, now, acts);
            }
            _ => {}
        }
    }

    /// Ends a claim for a vacate or a shutdown (the caller has noted which): an
    /// idle claim is preempted at once (10); a busy job retires (13) unless the
    /// request is fast; a suspended or retiring one keeps retiring.
    fn end_claim(&mut self, i: usize, fast: bool, now: i64, acts: &mut Vec<Action>) {
        let activity = self.slots[i].activity;
        if activity == Activity::Idle {
            self.preempt(i, 10, fast, now, acts);
        } else if fast {
            self.force_preempt(i, true, now, acts);
        } else if activity == Activity::Busy {
            self.begin_retirement(i, 13, now, acts);
        } else {
            self.slots[i].retire.active = true;
            self.check_retirement(i, now, acts);
        }
    }

    fn on_shutdown(&mut self, i: usize, kind: ShutdownKind, now: i64, acts: &mut Vec<Action>) {
        let (state, activity) = (self.slots[i].state, self.slots[i].activity);
        let fast = kind == ShutdownKind::Fast;
        match (state, activity) {
            (State::Owner | State::Drained, _) => {}
            (State::Unclaimed, _) => {
                self.stop_benchmarking(i, now, acts);
                self.go(i, 2, State::Owner, Activity::Idle, now, acts)
            }
            (State::Matched, _) => self.go(i, 8, State::Owner, Activity::Idle, now, acts),
            (State::Claimed, _) => {
                self.slots[i].retire.shutdown = true;
                self.end_claim(i, fast, now, acts);
            }
            (State::Preempting, Activity::Vacating) if fast => self.start_killing(i, 21, now, acts),
            (State::Preempting, _) => self.slots[i].retire.shutdown = true,
            (State::Backfill, _) => {
                self.slots[i].backfill_cause = Some(BackfillCause::Evict);
                if activity == Activity::Busy {
                    self.kill_backfill(i, now, acts);
                } else if activity == Activity::Idle {
                    self.leave_backfill(i, now, acts);
                }
            }
        }
    }

    /// Out of the Claimed state now, skipping what is left of retirement
    /// (fast vacate or shutdown, or the schedd's release).
    fn force_preempt(&mut self, i: usize, fast: bool, now: i64, acts: &mut Vec<Action>) {
        let s = &self.slots[i];
        match s.activity {
            Activity::Busy => {
                self.slots[i].retire.active = true;
                self.go(i, 13, State::Claimed, Activity::Retiring, now, acts);
                self.preempt(i, 18, fast, now, acts);
            }
            Activity::Retiring => self.preempt(i, 18, fast, now, acts),
            Activity::Suspended => self.preempt(i, 17, fast, now, acts),
            _ => self.preempt(i, 10, fast, now, acts),
        }
    }

    fn begin_retirement(&mut self, i: usize, number: u8, now: i64, acts: &mut Vec<Action>) {
        self.slots[i].retire.active = true;
        self.go(i, number, State::Claimed, Activity::Retiring, now, acts);
        self.check_retirement(i, now, acts);
    }

    /// The retirement the machine grants the job: MAXJOBRETIREMENTTIME,
    /// lowered by the job's own MaxJobRetirementTime; unlimited in a
    /// peaceful shutdown.
    fn retirement_grant(&mut self, i: usize) -> Option<i64> {
        let s = &self.slots[i];
        if s.retire.shutdown && self.shutdown == Some(ShutdownKind::Peaceful) && !s.retire.owner {
            return None;
        }
        let job = s.job.as_ref().map(|j| &j.ad);
        let machine = self.ev.eval_attr(&s.ad, job, "MaxJobRetirementTime").as_int().unwrap_or(0);
        let mut grant = machine.max(0);
        if let Some(j) = job
            && j.contains("MaxJobRetirementTime")
            && let Some(v) = self.ev.eval_attr(j, Some(&s.ad), "MaxJobRetirementTime").as_int()
        {
            grant = grant.min(v.max(0));
        }
        Some(grant)
    }

    fn check_retirement(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let s = &self.slots[i];
        if !s.retire.active || s.state != State::Claimed {
            return;
        }
        let Some(run) = s.job.as_ref().map(|j| j.run_time(now)) else { return };
        let suspended = s.activity == Activity::Suspended;
        match self.retirement_grant(i) {
            Some(g) if run >= g => {
                let number = if suspended { 17 } else { 18 };
                self.preempt(i, number, false, now, acts);
            }
            Some(g) if !suspended => {
                self.slots[i].retire_deadline = Some(now.saturating_add(g - run))
            }
            _ => self.slots[i].retire_deadline = None,
        }
    }

    fn grace(&mut self, i: usize) -> u64 {
        let mut g = self.policy.machine_max_vacate_time;
        let s = &self.slots[i];
        if let Some(j) = &s.job
            && let Some(v) = self.ev.eval_attr(&j.ad, Some(&s.ad), "JobMaxVacateTime").as_int()
        {
            g = g.min(v.max(0));
        }
        g.max(0) as u64
    }

    /// Enters Preempting: Vacating (checkpoint first if the job can, then the
    /// vacate notice) or Killing; with no job, straight through to the end.
    fn preempt(&mut self, i: usize, number: u8, fast: bool, now: i64, acts: &mut Vec<Action>) {
        let id = self.slots[i].id;
        self.slots[i].retire.active = false;
        self.slots[i].retire_deadline = None;
        if self.slots[i].job.is_none() {
            self.go(i, number, State::Preempting, Activity::Vacating, now, acts);
            self.finish_preempting(i, now, acts);
            return;
        }
        let vacate = !fast && {
            let v = self.eval_named(i, |n| &n.want_vacate);
            !is_false(&v) && v.as_bool() != Some(false)
        };
        if !vacate {
            self.go(i, number, State::Preempting, Activity::Killing, now, acts);
            self.kill_now(i, now, acts);
            return;
        }
        let (suspended, ckpt) = {
            let j = self.slots[i].job.as_ref();
            (j.is_some_and(|j| j.suspended), j.is_some_and(|j| j.checkpointable))
        };
        // A suspended job is resumed only where it has something to do: to
        // save its state. Otherwise the vacate notice itself resumes a job
        // that can hear it and ends one that cannot, which never runs again.
        if suspended && ckpt {
            acts.push(Action::Continue { slot: id });
        }
        self.go(i, number, State::Preempting, Activity::Vacating, now, acts);
        if ckpt {
            self.slots[i].vacate_ckpt_pending = true;
            acts.push(Action::Checkpoint { slot: id, kind: CheckpointKind::Vacate });
        } else {
            let grace = self.grace(i);
            acts.push(Action::SoftKill { slot: id, grace_secs: grace });
        }
    }

    fn start_killing(&mut self, i: usize, number: u8, now: i64, acts: &mut Vec<Action>) {
        self.go(i, number, State::Preempting, Activity::Killing, now, acts);
        self.kill_now(i, now, acts);
    }

    fn kill_now(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let timeout = self.pol_int(i, |p| &p.killing_timeout, 30).max(0);
        let s = &mut self.slots[i];
        s.vacate_ckpt_pending = false;
        s.killing_deadline = Some(now.saturating_add(timeout));
        acts.push(Action::HardKill { slot: s.id });
    }

    /// The starter is gone: notify the schedd and leave Preempting for
    /// Claimed/Idle (a better match waits) or Owner.
    fn finish_preempting(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        self.end_job(i, now);
        let killing = self.slots[i].activity == Activity::Killing;
        let r = self.slots[i].retire;
        let to_claim = self.slots[i].pending.is_some()
            && !r.owner
            && !r.shutdown
            && self.shutdown.is_none()
            && self.slots[i].claim.as_ref().is_none_or(|c| c.end != ClaimEnd::Expired);
        // `retire` was cleared on entering Preempting; the causes are kept.
        self.drop_claim(i, acts);
        if to_claim {
            let Some(req) = self.slots[i].pending.take() else { return };
            self.install_claim(i, req, now, acts);
            self.go(i, if killing { 24 } else { 23 }, State::Claimed, Activity::Idle, now, acts);
        } else {
            if let Some(req) = self.slots[i].pending.take() {
                acts.push(Action::ClaimRefused {
                    slot: self.slots[i].id,
                    claim_id: req.claim_id,
                    reason: "the slot went back to its owner".into(),
                });
            }
            self.go(i, if killing { 25 } else { 22 }, State::Owner, Activity::Idle, now, acts);
        }
    }

    fn timers(&mut self, now: i64, acts: &mut Vec<Action>) {
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if s.state == State::Matched && s.match_deadline.is_some_and(|d| now >= d) {
                self.go(i, 8, State::Owner, Activity::Idle, now, acts);
                continue;
            }
            if s.activity == Activity::Killing
                && s.state == State::Preempting
                && s.killing_deadline.is_some_and(|d| now >= d)
            {
                // The spec's SIGKILL: harder, and again every KILLING_TIMEOUT,
                // but the slot is not freed before the starter is gone.
                let timeout = self.pol_int(i, |p| &p.killing_timeout, 30).max(1);
                self.slots[i].killing_deadline = Some(now.saturating_add(timeout));
                acts.push(Action::KillStarter { slot: self.slots[i].id });
                continue;
            }
            if s.retire.active {
                self.check_retirement(i, now, acts);
            }
        }
    }

    /// One slot's policy round.
    fn evaluate(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let (state, activity) = (self.slots[i].state, self.slots[i].activity);
        let id = self.slots[i].id;
        match (state, activity) {
            (State::Owner, _) => {
                if self.shutdown.is_none() && !truthy(&self.pol(i, |p| &p.is_owner, false)) {
                    self.go(i, 1, State::Unclaimed, Activity::Idle, now, acts);
                }
            }
            (State::Unclaimed, Activity::Idle) => {
                if self.shutdown.is_some() || truthy(&self.pol(i, |p| &p.is_owner, false)) {
                    self.go(i, 2, State::Owner, Activity::Idle, now, acts);
                } else if truthy(&self.pol(i, |p| &p.run_benchmarks, false)) {
                    acts.push(Action::RunBenchmarks { slot: id });
                    self.go(i, 3, State::Unclaimed, Activity::Benchmarking, now, acts);
                } else if self.policy.backfill
                    && !self.policy.backfill_jobs.is_empty()
                    && truthy(&self.pol(i, |p| &p.start_backfill, false))
                {
                    self.go(i, 7, State::Backfill, Activity::Idle, now, acts);
                    self.start_backfill(i, now, acts);
                }
            }
            (State::Unclaimed, _) => {}
            (State::Matched, _) => {
                if is_false(&self.pol(i, |p| &p.start, false)) {
                    self.go(i, 8, State::Owner, Activity::Idle, now, acts);
                }
            }
            (State::Claimed, Activity::Idle) => {
                if is_false(&self.pol(i, |p| &p.start, true)) {
                    self.slots[i].retire.owner = true;
                    self.preempt(i, 10, false, now, acts);
                }
            }
            (State::Claimed, Activity::Busy) => {
                if truthy(&self.eval_named(i, |n| &n.want_suspend)) {
                    if truthy(&self.eval_named(i, |n| &n.suspend)) {
                        acts.push(Action::Suspend { slot: id });
                        self.go(i, 14, State::Claimed, Activity::Suspended, now, acts);
                        return;
                    }
                } else if truthy(&self.eval_named(i, |n| &n.preempt)) {
                    self.slots[i].retire.owner = true;
                    self.begin_retirement(i, 13, now, acts);
                    return;
                }
                self.periodic_checkpoint(i, now, acts);
            }
            (State::Claimed, Activity::Retiring) => {
                if truthy(&self.eval_named(i, |n| &n.want_suspend))
                    && truthy(&self.eval_named(i, |n| &n.suspend))
                {
                    acts.push(Action::Suspend { slot: id });
                    self.go(i, 20, State::Claimed, Activity::Suspended, now, acts);
                } else if truthy(&self.eval_named(i, |n| &n.preempt)) {
                    self.slots[i].retire.owner = true;
                }
                self.check_retirement(i, now, acts);
            }
            (State::Claimed, Activity::Suspended) => {
                if truthy(&self.eval_named(i, |n| &n.preempt)) {
                    self.slots[i].retire.owner = true;
                    self.slots[i].retire.active = true;
                    acts.push(Action::Continue { slot: id });
                    self.go(i, 16, State::Claimed, Activity::Retiring, now, acts);
                } else if truthy(&self.eval_named(i, |n| &n.cont)) {
                    acts.push(Action::Continue { slot: id });
                    if self.slots[i].retire.active {
                        self.go(i, 16, State::Claimed, Activity::Retiring, now, acts);
                    } else {
                        self.go(i, 15, State::Claimed, Activity::Busy, now, acts);
                    }
                }
                self.check_retirement(i, now, acts);
            }
            (State::Claimed, _) => {}
            (State::Preempting, Activity::Vacating) => {
                if truthy(&self.eval_named(i, |n| &n.kill)) {
                    self.start_killing(i, 21, now, acts);
                }
            }
            (State::Preempting, _) => {}
            (State::Backfill, Activity::Idle) => {
                if self.shutdown.is_some() || truthy(&self.pol(i, |p| &p.evict_backfill, false)) {
                    self.slots[i].backfill_cause = Some(BackfillCause::Evict);
                    self.leave_backfill(i, now, acts);
                } else {
                    self.start_backfill(i, now, acts);
                }
            }
            (State::Backfill, Activity::Busy) => {
                if truthy(&self.pol(i, |p| &p.evict_backfill, false)) {
                    self.slots[i].backfill_cause = Some(BackfillCause::Evict);
                    self.kill_backfill(i, now, acts);
                }
            }
            (State::Backfill, _) => {}
            // Until the drain is cancelled.
            (State::Drained, _) => {}
        }
    }

    fn start_backfill(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let jobs = &self.policy.backfill_jobs;
        if jobs.is_empty() {
            return;
        }
        let job = jobs[self.backfill_next % jobs.len()].clone();
        self.backfill_next = self.backfill_next.wrapping_add(1);
        self.slots[i].backfill_job = Some(job.clone());
        acts.push(Action::StartBackfill { slot: self.slots[i].id, job });
        self.go(i, 26, State::Backfill, Activity::Busy, now, acts);
    }

    fn periodic_checkpoint(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let s = &self.slots[i];
        let Some(j) = &s.job else { return };
        if !j.checkpointable || s.last_periodic_ckpt == Some(now) {
            return;
        }
        if truthy(&self.eval_named(i, |n| &n.periodic_checkpoint)) {
            let s = &mut self.slots[i];
            s.last_periodic_ckpt = Some(now);
            s.ad.insert_value("LastPeriodicCheckpoint", now);
            s.dirty = true;
            acts.push(Action::Checkpoint { slot: s.id, kind: CheckpointKind::Periodic });
        }
    }
}
