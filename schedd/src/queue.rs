//! The durable job queue.
//!
//! **Durability.** SQLite (bundled) in WAL mode with `synchronous = FULL`. Every
//! change goes through one writer thread, which takes all the requests waiting at
//! that moment, applies them in one transaction and commits once (group commit):
//! a caller's future resolves only after the commit that holds its change is on
//! disk. The in-memory queue is changed under the same write lock, held until the
//! commit returns, so no reader ever sees a change that is not yet durable. If a
//! commit fails, every caller of the batch gets the error and the in-memory queue
//! is reloaded from the database, the source of truth.
//!
//! **Shape.** Like HTCondor's job queue, a cluster ad holds what its jobs share and
//! each job (proc) ad holds only what is its own; a job's full ad is the cluster ad
//! overlaid with its proc ad, plus `ProcId`, `JobStatus`, `EnteredCurrentStatus` and
//! `GlobalJobId`, which are kept in fields rather than as attributes. A million
//! queued jobs of a few clusters therefore cost little more than their keys.
//!
//! **Authority.** Every change names an [`Actor`]. The queue sets `Owner` from it
//! on submit, refuses changes by a user to another user's jobs (an admin may change
//! any job), and refuses `qedit` of protected attributes.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use classad::{ClassAd, EvalOptions, Evaluator, Expr, Value};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::attrs::{self, Reader};
use crate::deferral::{self, Deferral, Readiness};
use crate::job::{JobId, JobSelector, JobStatus, hold_code};
use crate::policy::{self, ExitDecision, HoldInfo, PeriodicAction};
use crate::quarantine::{self, Journal, QUARANTINED};
use crate::room::{DISK_FULL, Reserve, SpoolLedger};
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// Attributes of the job's whole life that the schedd keeps itself: an
/// execute host's figure for its own run never replaces them.
const LIFETIME_ATTRS: [&str; 3] =
    ["CumulativeSuspensionTime", "RemoteWallClockTime", "CumulativeSlotTime"];

/// A run is over: its wall-clock time (the host's figure for it, else the
/// time since JobCurrentStartDate) is added to the job's RemoteWallClockTime
/// (HTCondor's: cumulative over all runs, suspensions included) and, times
/// the CPUs the job held (its SlotWeight), to CumulativeSlotTime.
fn add_run_time(ad: &mut ClassAd, run: &ClassAd, now: i64) {
    let num = |v: Value| match v {
        Value::Int(i) => Some(i as f64),
        Value::Real(r) if r.is_finite() => Some(r),
        _ => None,
    };
    let wall = num(run.eval_attr("RemoteWallClockTime"))
        .or_else(|| num(ad.eval_attr("JobCurrentStartDate")).map(|t| now as f64 - t))
        .map(|w| w.clamp(0.0, 1e12));
    let Some(wall) = wall else { return };
    let cpus = num(ad.eval_attr("RequestCpus")).filter(|c| *c >= 1.0).unwrap_or(1.0);
    let total = num(ad.eval_attr("RemoteWallClockTime")).unwrap_or(0.0) + wall;
    let slot = num(ad.eval_attr("CumulativeSlotTime")).unwrap_or(0.0) + wall * cpus;
    ad.insert_value("RemoteWallClockTime", total);
    ad.insert_value("CumulativeSlotTime", slot);
}

/// Merges what an execute host reports into a job's ad, but for
/// [`LIFETIME_ATTRS`].
fn update_from_host(ad: &mut ClassAd, attrs: &ClassAd) {
    if LIFETIME_ATTRS.iter().any(|a| attrs.contains(a)) {
        let mut attrs = attrs.clone();
        for a in LIFETIME_ATTRS {
            attrs.remove(a);
        }
        ad.update(&attrs);
    } else {
        ad.update(attrs);
    }
}

/// On an original job: its routed copy's id (`"C.P"`).
pub const ROUTED_TO: &str = "RoutedToJobId";
/// On a routed copy: the original's id (`"C.P"`).
pub const ROUTED_FROM: &str = "RoutedFromJobId";

/// What an original takes from its routed copy when the copy completes.
const FINAL_ATTRS: [&str; 12] = [
    "NumJobCompletions",
    "NumJobStarts",
    "ImageSize",
    "ExitCode",
    "ExitBySignal",
    "ExitSignal",
    "RemoteWallClockTime",
    "RemoteUserCpu",
    "RemoteSysCpu",
    "LastRemoteHost",
    "WasmTrap",
    "JobCurrentStartDate",
];

/// The attribute holding a running job's claim id: a secret, kept in the queue
/// so a restarted schedd can reconnect, never shown by queries or history.
pub const CLAIM_ID_ATTR: &str = "ClaimId";

/// Activations of a job that may fail in a row before it is held.
pub const MAX_ACTIVATION_FAILURES: i64 = 5;

/// Set on an idle job whose activation was sent (or is about to be) and
/// not yet seen to start: see [`PoolOp::Activating`].
pub const ACTIVATION_PENDING: &str = "ActivationPending";

/// Steps one request's constraint may take over all the jobs it is evaluated
/// on (about a second of work); past it the request is refused.
pub const REQUEST_STEPS: u64 = 20_000_000;

/// Jobs read per hold of the queue's read lock when a request walks the queue:
/// the lock is never held while a constraint is evaluated.
const READ_CHUNK: usize = 256;

fn too_costly(what: &str) -> QueueError {
    QueueError::Invalid(format!(
        "the {what} takes more than {REQUEST_STEPS} evaluation steps over the jobs it is \
         applied to; simplify it"
    ))
}

/// What the shadows and the negotiation tell the queue about jobs.
#[derive(Clone, Debug, PartialEq)]
pub enum PoolOp {
    /// The job was matched (LastMatchTime, NumJobMatches).
    Matched,
    /// The job's autocluster found no match (LastRejMatchReason, LastRejMatchTime).
    Rejected(String),
    /// The job is about to be activated on a claim (these attributes:
    /// RemoteHost, ClaimId, StartdAddr): recorded, with
    /// [`ACTIVATION_PENDING`], before the activation is sent, so that a
    /// schedd that dies meanwhile asks the host after its restart instead of
    /// running the job a second time elsewhere. The job stays idle.
    Activating(ClassAd),
    /// An activation on claim `.0` recorded with [`PoolOp::Activating`] did
    /// not happen: the record is cleared; the job stays idle. (Nothing is
    /// done to a job that started, or that is pending on another claim.)
    NotStarted(String),
    /// An activation on claim `.0` failed (`.1` says why): as
    /// [`PoolOp::NotStarted`], and counted in `NumShadowExceptions`; after
    /// [`MAX_ACTIVATION_FAILURES`] the job is held with the reason, never
    /// matched and refused without end.
    ActivationFailed(String, String),
    /// The job started on a claim: these attributes (RemoteHost, ClaimId, ...) are set.
    Started(ClassAd),
    /// The shadow's periodic update of a running job.
    Update(ClassAd),
    /// The shadow reconnected to the running job (NumJobReconnects).
    Reconnected,
    /// The host suspended (`true`) or resumed (`false`) the running job.
    Suspension(bool),
    /// The job stopped without ending (evicted, lease lost): back to idle.
    Evicted(ClassAd),
    /// The job router's view of a routed copy at its target (GridJobId):
    /// set whatever the job's status.
    Grid(ClassAd),
}

/// One of a claim's queue updates, applied in order with others
/// ([`Queue::in_order`]).
#[derive(Clone, Debug)]
pub enum JobOp {
    /// What the shadow or the negotiation says of a job ([`Queue::pool`]).
    Pool(JobId, PoolOp),
    /// The job ended ([`Queue::job_exited`]).
    Exited(JobId, ClassAd),
}

/// Who asks for a change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The verified identity: the `Owner` of the jobs this actor submits.
    pub name: String,
    /// An admin may act on anyone's jobs.
    pub admin: bool,
    /// Another pool's schedd routing jobs here (HTCondor-C): it submits each
    /// job for the owner its ad names (the schedd's API checks that this
    /// pool trusts that user), recorded as the job's [`ROUTED_BY`], and acts
    /// on the jobs it submitted and no others.
    pub schedd: bool,
}

/// What a routed copy's target reports of its use (RemoteHost, CPU,
/// memory), shown on its original as it changes.
pub const MIRRORED_USAGE: &[&str] = &[
    "RemoteHost",
    "RemoteUserCpu",
    "RemoteSysCpu",
    "RemoteWallClockTime",
    "ImageSize",
    "ResidentSetSize",
    "MemoryUsage",
    "DiskUsage",
];

/// Set on a routed original that is held because its copy is: it is not
/// held itself, and goes back to idle if the copy is removed.
const ROUTED_COPY_HELD: &str = "RoutedCopyHeld";

/// The attribute naming the schedd (its identity in this pool's trust file)
/// that routed a job here for its owner.
pub const ROUTED_BY: &str = "RoutedFromSchedd";

/// Where a submitted ad comes from.
#[derive(Clone, Copy)]
enum Origin {
    /// A request: nothing the schedd sets is kept ([`attrs::strip_submitted`]).
    Outside,
    /// The job router's copy of a job: built here from the original's ad (the
    /// queue's own) and the admin's route; only the original's identity goes.
    Router,
}

impl Origin {
    fn strip(self, ad: &mut ClassAd, by_schedd: bool) {
        match self {
            Origin::Outside => attrs::strip_submitted(ad, by_schedd),
            Origin::Router => {
                for a in [
                    "ClusterId",
                    "ProcId",
                    "Owner",
                    "QDate",
                    "JobStatus",
                    "GlobalJobId",
                    "EnteredCurrentStatus",
                    "ScheddInterval",
                    ROUTED_BY,
                ] {
                    ad.remove(a);
                }
            }
        }
    }
}

/// How `actor` may see job `v`: as its owner (or an admin, or the schedd
/// that routed it here), or as anyone else.
pub fn reader_of(actor: &Actor, v: &JobView<'_>) -> Reader {
    if actor.may_act_on(v) { Reader::Owner } else { Reader::Other }
}

impl Actor {
    /// A user.
    pub fn user(name: &str) -> Actor {
        Actor { name: name.to_string(), admin: false, schedd: false }
    }
    /// An administrator.
    pub fn admin(name: &str) -> Actor {
        Actor { name: name.to_string(), admin: true, schedd: false }
    }
    /// Another pool's schedd, routing jobs here for their owners.
    pub fn routing_schedd(name: &str) -> Actor {
        Actor { name: name.to_string(), admin: false, schedd: true }
    }

    /// True when this actor may act on `job`: an admin on any, a user on
    /// their own, a routing schedd on those it routed here.
    pub fn may_act_on(&self, job: &JobView<'_>) -> bool {
        if self.admin {
            return true;
        }
        if self.schedd {
            return matches!(
                job.cluster.ad.get(ROUTED_BY),
                Some(Expr::Lit(Value::Str(s))) if **s == *self.name
            );
        }
        job.owner() == self.name
    }
    /// The schedd itself (policy, shadows): may act on any job.
    pub fn schedd() -> Actor {
        Actor::admin("schedd")
    }
}

/// Why the queue refused a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueError {
    /// A named job or cluster does not exist.
    NotFound(String),
    /// The actor may not do this (another owner's job, a protected attribute).
    Forbidden(String),
    /// The request itself is wrong (bad expression, empty submit, bad state).
    Invalid(String),
    /// The database failed; nothing of the request was kept.
    Storage(String),
}

impl std::fmt::Display for QueueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueError::NotFound(s) | QueueError::Forbidden(s) | QueueError::Invalid(s) => {
                f.write_str(s)
            }
            QueueError::Storage(s) => write!(f, "job queue storage failed: {s}"),
        }
    }
}

impl std::error::Error for QueueError {}

impl From<rusqlite::Error> for QueueError {
    fn from(e: rusqlite::Error) -> QueueError {
        match &e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull => {
                QueueError::Storage(format!("{DISK_FULL}: {e}"))
            }
            _ => QueueError::Storage(e.to_string()),
        }
    }
}

/// Something that happened to a job, for its event log and for whoever follows
/// the queue (the router, the shadows). Emitted only after it is durable.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueEvent {
    /// The job.
    pub id: JobId,
    /// When.
    pub time: i64,
    /// What.
    pub kind: EventKind,
    /// The job's full ad after the event (for removals and completions, the ad
    /// that went to history).
    pub ad: Arc<ClassAd>,
}

/// The kinds of [`QueueEvent`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum EventKind {
    /// Submitted.
    Submitted,
    /// Started running.
    Executing,
    /// Put on hold.
    Held(HoldInfo),
    /// Released from hold.
    Released(String),
    /// Removed (aborted).
    Removed(String),
    /// Ended and completed.
    Terminated,
    /// Ended and went back to idle (OnExitRemove false): the user log's
    /// 004 "Job terminated and was requeued".
    Requeued,
    /// Left its slot before finishing (vacated, preempted, its host lost) and
    /// went back to idle; `checkpointed` when it saved its state first.
    Evicted {
        /// The job checkpointed before leaving.
        checkpointed: bool,
    },
    /// An attribute was edited.
    Edited(String),
    /// A note for the job's event log (a generic event): skipped or missed
    /// cron runs.
    Note(String),
    /// Suspended by the execute host's policy (user log 010).
    Suspended,
    /// Running again after a suspension (user log 011).
    Unsuspended,
    /// A vacate was asked for (condor_vacate_job): its shadow has the host
    /// vacate it; the eviction that follows is the event the log shows.
    VacateAsked(String),
}

/// Called with the jobs that left the queue in a commit.
pub type LeftHook = Box<dyn Fn(&[JobId]) + Send + Sync>;

/// Receives events after each commit (the schedd writes event logs from here).
pub type EventSink = Box<dyn Fn(&[QueueEvent]) + Send + Sync>;

/// How the queue is set up.
pub struct QueueConfig {
    /// The SQLite database file.
    pub path: PathBuf,
    /// This schedd's name, the first part of `GlobalJobId`.
    pub schedd_name: String,
    /// History keeps at most this many jobs (oldest dropped first).
    pub history_max_jobs: u64,
    /// History drops jobs that left the queue more than this many seconds ago.
    pub history_max_age: Option<i64>,
    /// Called with the events of each commit, after the commit.
    pub sink: Option<EventSink>,
    /// Called with the events of each commit before any reader can see the
    /// committed state (the queue's write lock is still held): for followers
    /// that read the queue and must never see a change before its event.
    /// Keep it cheap (a channel send).
    pub notify: Option<EventSink>,
    /// The time zone of cron schedules (CRON_TIME_ZONE; the system's by default).
    pub cron_time_zone: jiff::tz::TimeZone,
    /// SCHEDD_INTERVAL in seconds, for deferred jobs without ScheddInterval.
    pub schedd_interval: i64,
    /// SPOOL_QUOTA_PER_OWNER: bytes each owner may keep in the spool, their
    /// uploads (modules, spooled inputs), spooled jobs' outputs and
    /// checkpoints together (see [`crate::room`]).
    pub upload_quota_bytes: u64,
    /// Uploads each user may keep stored.
    pub upload_quota_count: u64,
    /// SPOOL_RESERVE: bytes kept free on the spool's file system besides what
    /// is stored, and held in a reserve file that a commit failing for want
    /// of space gives back (0: none).
    pub reserve_bytes: u64,
    /// Called after each commit with the jobs that left the queue in it (the
    /// schedd removes their spooled outputs). Keep it cheap.
    pub on_left: Option<LeftHook>,
    /// Seconds an upload no job in the queue refers to is kept (the time a
    /// client has between uploading and submitting).
    pub upload_grace: i64,
    /// UID_DOMAIN: the part after `@` in each job's `User`.
    pub uid_domain: String,
    /// How many jobs one user, one submit and the whole queue may hold.
    pub job_limits: JobLimits,
}

/// HTCondor's bounds on jobs: what one user or one submit can make the
/// schedd keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobLimits {
    /// MAX_JOBS_PER_SUBMISSION: jobs one submit may create (HTCondor: 20,000).
    pub per_submission: u64,
    /// MAX_JOBS_PER_OWNER: jobs one owner may have in the queue (HTCondor: 100,000).
    pub per_owner: u64,
    /// MAX_JOBS_SUBMITTED: jobs the queue may hold in all.
    pub submitted: u64,
}

impl Default for JobLimits {
    fn default() -> JobLimits {
        JobLimits { per_submission: 20_000, per_owner: 100_000, submitted: i32::MAX as u64 }
    }
}

/// Default [`QueueConfig::upload_quota_bytes`]: 4 GiB.
pub const DEFAULT_UPLOAD_QUOTA_BYTES: u64 = 4 << 30;
/// Default [`QueueConfig::upload_quota_count`].
pub const DEFAULT_UPLOAD_QUOTA_COUNT: u64 = 10_000;
/// Default [`QueueConfig::upload_grace`]: one hour.
pub const DEFAULT_UPLOAD_GRACE: i64 = 3600;

impl QueueConfig {
    /// Defaults for a database at `path`.
    pub fn new(path: impl Into<PathBuf>, schedd_name: &str) -> QueueConfig {
        QueueConfig {
            path: path.into(),
            schedd_name: schedd_name.to_string(),
            history_max_jobs: 1_000_000,
            history_max_age: None,
            sink: None,
            notify: None,
            cron_time_zone: jiff::tz::TimeZone::system(),
            schedd_interval: 300,
            upload_quota_bytes: DEFAULT_UPLOAD_QUOTA_BYTES,
            upload_quota_count: DEFAULT_UPLOAD_QUOTA_COUNT,
            reserve_bytes: 0,
            on_left: None,
            upload_grace: DEFAULT_UPLOAD_GRACE,
            uid_domain: schedd_name.rsplit('@').next().unwrap_or(schedd_name).to_string(),
            job_limits: JobLimits::default(),
        }
    }
}

/// A cluster: what its jobs share.
pub struct Cluster {
    /// The cluster ad (ClusterId, Owner, QDate, Cmd, ... everything shared).
    pub ad: Arc<ClassAd>,
    /// Owner, from the verified identity.
    pub owner: Arc<str>,
    /// JobBatchName, if any.
    pub batch: Option<Arc<str>>,
    /// Procs ever submitted.
    pub submitted: u32,
    /// Procs that completed.
    pub completed: u32,
}

/// A job: what is its own.
pub struct Proc {
    /// JobStatus.
    pub status: JobStatus,
    /// EnteredCurrentStatus.
    pub entered: i64,
    /// Attributes of this job that override or add to the cluster ad.
    pub ad: ClassAd,
}

/// The in-memory queue, as readers see it.
pub struct QueueState {
    clusters: BTreeMap<u32, Cluster>,
    jobs: BTreeMap<JobId, Proc>,
    next_cluster: u32,
    /// Cluster ids handed out by [`Queue::reserve_cluster`] and not yet used, with
    /// the owner each was reserved for.
    reserved: BTreeMap<u32, Arc<str>>,
    /// Cluster ids below this may have been handed out (it is on disk), so
    /// after a restart none of them is handed out again.
    cluster_mark: u32,
    schedd_name: Arc<str>,
    /// Jobs in the queue per owner (MAX_JOBS_PER_OWNER).
    owner_jobs: HashMap<Arc<str>, u64>,
    /// How many queued jobs name each upload, by whose it is
    /// ([`uploader_of`]): an upload goes once its last job has left.
    upload_uses: HashMap<(String, String), u32>,
}

/// How far ahead of the ids handed out the on-disk high-water mark is set
/// (one write per this many reservations).
const CLUSTER_MARK_STEP: u32 = 100;

/// Seconds a submit's token is kept, for a client retrying after a lost
/// answer to get the first answer again.
const SUBMIT_TOKEN_KEEP: i64 = 86_400;

/// Reservations kept at most; the oldest is dropped past this.
const MAX_RESERVED: usize = 100_000;

/// A job as readers see it.
pub struct JobView<'a> {
    /// Its id.
    pub id: JobId,
    /// Its cluster.
    pub cluster: &'a Cluster,
    /// Its own part.
    pub proc: &'a Proc,
    schedd: &'a str,
}

impl JobView<'_> {
    /// The job's full ad.
    pub fn ad(&self) -> ClassAd {
        let mut ad = (*self.cluster.ad).clone();
        ad.update(&self.proc.ad);
        ad.insert_value("ProcId", self.id.proc as i64);
        ad.insert_value("JobStatus", self.proc.status.code());
        ad.insert_value("EnteredCurrentStatus", self.proc.entered);
        let qdate = match self.cluster.ad.eval_attr("QDate") {
            Value::Int(q) => q,
            _ => 0,
        };
        ad.insert_value("GlobalJobId", format!("{}#{}#{}", self.schedd, self.id, qdate));
        ad
    }

    /// True when the job is not for this pool's negotiator: a routed
    /// original (it mirrors its copy) or a grid-universe job (a routed copy,
    /// run elsewhere).
    pub fn routed_away(&self) -> bool {
        self.proc.ad.contains(ROUTED_TO)
            || matches!(
                self.proc.ad.get("JobUniverse").or_else(|| self.cluster.ad.get("JobUniverse")),
                Some(Expr::Lit(Value::Int(9)))
            )
    }

    /// The job's `Owner`.
    pub fn owner(&self) -> &str {
        &self.cluster.owner
    }
}

impl QueueState {
    /// The number of jobs in the queue.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// True when the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The schedd's name (first part of GlobalJobId).
    pub fn schedd_name(&self) -> &str {
        &self.schedd_name
    }

    /// One job.
    pub fn job(&self, id: JobId) -> Option<JobView<'_>> {
        let proc = self.jobs.get(&id)?;
        let cluster = self.clusters.get(&id.cluster)?;
        Some(JobView { id, cluster, proc, schedd: &self.schedd_name })
    }

    /// Every job, in id order.
    pub fn jobs(&self) -> impl Iterator<Item = JobView<'_>> {
        self.jobs.iter().filter_map(|(id, proc)| {
            let cluster = self.clusters.get(&id.cluster)?;
            Some(JobView { id: *id, cluster, proc, schedd: &self.schedd_name })
        })
    }

    /// The jobs of one cluster.
    pub fn cluster_jobs(&self, cluster: u32) -> impl Iterator<Item = JobView<'_>> {
        let c = self.clusters.get(&cluster);
        self.jobs.range(JobId::new(cluster, 0)..=JobId::new(cluster, u32::MAX)).filter_map(
            move |(id, proc)| {
                Some(JobView { id: *id, cluster: c?, proc, schedd: &self.schedd_name })
            },
        )
    }

    /// A cluster.
    pub fn cluster(&self, id: u32) -> Option<&Cluster> {
        self.clusters.get(&id)
    }

    /// The jobs of `owner` in the queue.
    pub fn jobs_of(&self, owner: &str) -> Vec<JobId> {
        let clusters: std::collections::HashSet<u32> =
            self.clusters.iter().filter(|(_, c)| &*c.owner == owner).map(|(id, _)| *id).collect();
        self.jobs.keys().filter(|id| clusters.contains(&id.cluster)).copied().collect()
    }

    /// The uploads (modules, spooled inputs) the queued jobs refer to, with
    /// whose they are ([`uploader_of`]): every `CmdDigest`, and each digest
    /// named in `SpooledInput`.
    pub fn referenced_uploads(&self) -> std::collections::HashSet<(String, String)> {
        self.upload_uses.keys().cloned().collect()
    }

    /// condor_q's summary: one row per (owner, batch), in the order first seen.
    pub fn summary(&self, owners: &[String]) -> Vec<SummaryRow> {
        let mut rows: Vec<SummaryRow> = Vec::new();
        let mut index: HashMap<(Arc<str>, String), usize> = HashMap::new();
        let mut last_cluster = None;
        let mut row_i = 0;
        let mut cluster_cron = false;
        for (id, proc) in &self.jobs {
            if last_cluster != Some(id.cluster) {
                last_cluster = Some(id.cluster);
                let Some(c) = self.clusters.get(&id.cluster) else { continue };
                cluster_cron = andes_cron::Field::ALL.iter().any(|f| c.ad.contains(f.attribute()));
                if !owners.is_empty() && !owners.iter().any(|o| **o == *c.owner) {
                    row_i = usize::MAX;
                    continue;
                }
                let batch = match &c.batch {
                    Some(b) => b.to_string(),
                    None => format!("ID: {}", id.cluster),
                };
                let key = (c.owner.clone(), batch);
                row_i = match index.get(&key) {
                    Some(&i) => i,
                    None => {
                        rows.push(SummaryRow {
                            owner: key.0.to_string(),
                            batch: key.1.clone(),
                            submitted: 0,
                            ..SummaryRow::default()
                        });
                        index.insert(key, rows.len() - 1);
                        rows.len() - 1
                    }
                };
                let r = &mut rows[row_i];
                r.done += c.completed as u64;
                r.submitted = r.submitted.max(self.qdate(c));
                r.ids.push((id.cluster, u32::MAX, 0));
            }
            if row_i == usize::MAX {
                continue;
            }
            let r = &mut rows[row_i];
            match proc.status {
                JobStatus::Idle => {
                    r.idle += 1;
                    // A cron job's next run (its DeferralTime is its own).
                    if let Some(Expr::Lit(Value::Int(t))) = proc.ad.get("DeferralTime")
                        && (cluster_cron
                            || andes_cron::Field::ALL
                                .iter()
                                .any(|f| proc.ad.contains(f.attribute())))
                    {
                        r.next_run = Some(r.next_run.map_or(*t, |n| n.min(*t)));
                    }
                }
                JobStatus::Running | JobStatus::TransferringOutput => {
                    r.run += 1;
                    if proc.ad.contains("JobDeferredUntil") {
                        r.deferred += 1;
                    }
                }
                JobStatus::Held => r.held += 1,
                JobStatus::Suspended => r.suspended += 1,
                JobStatus::Removed | JobStatus::Completed => {}
            }
            let span = r.ids.last_mut().expect("pushed above");
            span.1 = span.1.min(id.proc);
            span.2 = span.2.max(id.proc);
        }
        rows
    }

    fn qdate(&self, c: &Cluster) -> i64 {
        match c.ad.eval_attr("QDate") {
            Value::Int(q) => q,
            _ => 0,
        }
    }
}

enum Op {
    Submit(Actor, Submit),
    Change(Actor, Targets, Change),
    Started(JobId),
    Pool(Vec<JobId>, PoolOp),
    Exited(JobId, ClassAd),
    Periodic,
    StoreModule(Actor, String, Vec<u8>),
    /// An upload already in its file under the uploads directory: its digest and size.
    StoreFile(Actor, String, u64),
    /// Removes uploads no job refers to, older than the grace.
    CollectUploads,
    /// Spooled jobs whose output their owner fetched.
    Fetched(Actor, Vec<JobId>),
    /// Panics inside the writer (tests of its recovery).
    #[cfg(test)]
    Panic,
    /// Raises the on-disk high-water mark of cluster ids.
    Mark(u32),
    Deferral(DeferralOp),
    Route(JobId, ClassAd),
    EditInPlace(JobId, String, Vec<(String, Option<Expr>)>),
    /// The schedd died evaluating this (see [`crate::quarantine`]).
    Quarantine(quarantine::Crashed),
    /// Several ops, in order, in the same commit; each answers on its own.
    Many(Vec<Op>),
}

/// The schedd's deferral timer's requests.
enum DeferralOp {
    /// These idle jobs may have missed their window.
    Missed(Vec<JobId>),
    /// The schedd started: every idle cron job takes its next run.
    Restart,
}

enum Reply {
    Cluster(u32),
    Removed(Vec<String>),
    Report(ChangeReport),
    Done,
    Many(Vec<Result<Reply, QueueError>>),
}

struct Request {
    op: Op,
    now: i64,
    reply: oneshot::Sender<Result<Reply, QueueError>>,
}

/// The job queue. Cheap to clone; all clones share one queue.
#[derive(Clone)]
pub struct Queue {
    deferral_config: Arc<(jiff::tz::TimeZone, i64)>,
    state: Arc<RwLock<QueueState>>,
    tx: mpsc::SyncSender<Request>,
    reader: Arc<std::sync::Mutex<Connection>>,
    uploads: Arc<PathBuf>,
    upload_quota: u64,
    reserve_bytes: u64,
    ledger: Arc<SpoolLedger>,
    reserve: Option<Arc<Reserve>>,
}

/// Where a queue at `db` keeps its uploads (modules, spooled inputs), one file
/// per SHA-256: the directory `uploads` beside the database.
pub fn uploads_dir(db: &Path) -> PathBuf {
    db.parent().unwrap_or(Path::new(".")).join("uploads")
}

/// The file name of an upload with digest `sha256:<hex>`, if it is one.
fn upload_name(digest: &str) -> Option<&str> {
    digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS clusters (
    id INTEGER PRIMARY KEY, ad TEXT NOT NULL,
    submitted INTEGER NOT NULL, completed INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    cluster INTEGER NOT NULL, proc INTEGER NOT NULL,
    status INTEGER NOT NULL, entered INTEGER NOT NULL, ad TEXT NOT NULL,
    PRIMARY KEY (cluster, proc)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, cluster INTEGER NOT NULL, proc INTEGER NOT NULL,
    owner TEXT NOT NULL, left_queue INTEGER NOT NULL, ad TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS modules (digest TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS pending_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, cluster INTEGER NOT NULL, proc INTEGER NOT NULL,
    time INTEGER NOT NULL, kind TEXT NOT NULL, ad TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submits (
    cluster INTEGER PRIMARY KEY, owner TEXT NOT NULL, token TEXT NOT NULL, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS upload_refs (
    owner TEXT NOT NULL, digest TEXT NOT NULL, size INTEGER NOT NULL, stored INTEGER NOT NULL,
    PRIMARY KEY (owner, digest)) WITHOUT ROWID;
";

/// Makes `path` (with each of `suffixes`) the daemon's alone, where it
/// exists: a queue made before the daemons' umask was 077 had its database,
/// journal and uploads open to every local user.
fn owner_only(path: &Path, suffixes: &[&str]) {
    #[cfg(unix)]
    for suffix in suffixes {
        use std::os::unix::fs::PermissionsExt;
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let p = PathBuf::from(p);
        if let Ok(m) = std::fs::metadata(&p) {
            let mode = if m.is_dir() { 0o700 } else { 0o600 };
            if m.permissions().mode() & 0o077 != 0 {
                let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode));
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (path, suffixes);
}

fn open(path: &Path) -> Result<Connection, QueueError> {
    let conn = Connection::open(path)
        .map_err(|e| QueueError::Storage(format!("{}: {e}", path.display())))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    Ok(conn)
}

/// Events committed but perhaps not yet in their event logs when the schedd
/// stopped (a crash between a commit and the log's write): written now, then
/// forgotten. A log may get an event twice this way, never lose one.
fn replay_pending_events(conn: &Connection, config: &QueueConfig) -> Result<(), QueueError> {
    let Some(sink) = &config.sink else { return Ok(()) };
    let mut events = Vec::new();
    let mut last = 0i64;
    {
        let mut stmt = conn.prepare(
            "SELECT seq, cluster, proc, time, kind, ad FROM pending_events ORDER BY seq",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            last = r.get(0)?;
            let (cluster, proc): (i64, i64) = (r.get(1)?, r.get(2)?);
            let kind: String = r.get(4)?;
            let ad: String = r.get(5)?;
            let Ok(kind) = serde_json::from_str::<EventKind>(&kind) else { continue };
            let Ok(ad) = classad::parse_ad(&ad) else { continue };
            events.push(QueueEvent {
                id: JobId::new(cluster as u32, proc as u32),
                time: r.get(3)?,
                kind,
                ad: Arc::new(ad),
            });
        }
    }
    if !events.is_empty() {
        tracing::info!("writing {} job events the event logs may not have", events.len());
        sink(&events);
        conn.execute("DELETE FROM pending_events WHERE seq <= ?1", [last])?;
    }
    Ok(())
}

/// Queues made before uploads were accounted: each stored module gets its
/// size, no uploader and the time of the upgrade.
fn migrate_modules(conn: &Connection) -> Result<(), QueueError> {
    let has: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('modules') WHERE name = 'uploader'")?
        .exists([])?;
    if !has {
        conn.execute_batch(
            "ALTER TABLE modules ADD COLUMN uploader TEXT NOT NULL DEFAULT '';
             ALTER TABLE modules ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE modules ADD COLUMN stored INTEGER NOT NULL DEFAULT 0;
             UPDATE modules SET size = length(data), stored = CAST(strftime('%s','now') AS INTEGER);",
        )?;
    }
    conn.execute_batch("CREATE INDEX IF NOT EXISTS modules_uploader ON modules (uploader)")?;
    Ok(())
}

/// Queues made before uploads had owners: each upload becomes its uploader's,
/// and one from before uploads were accounted (no uploader) becomes the
/// owner's of every queued job that names it. Once.
fn migrate_upload_refs(conn: &Connection, st: &QueueState) -> Result<(), QueueError> {
    let done: bool = conn.prepare("SELECT 1 FROM meta WHERE key = 'upload_refs'")?.exists([])?;
    if done {
        return Ok(());
    }
    conn.execute(
        "INSERT OR IGNORE INTO upload_refs (owner, digest, size, stored)
         SELECT uploader, digest, size, stored FROM modules WHERE uploader != ''",
        [],
    )?;
    let mut legacy = conn.prepare(
        "INSERT OR IGNORE INTO upload_refs (owner, digest, size, stored)
         SELECT ?1, digest, size, stored FROM modules WHERE digest = ?2 AND uploader = ''",
    )?;
    for (owner, digest) in st.referenced_uploads() {
        legacy.execute(params![owner, digest])?;
    }
    conn.execute("INSERT INTO meta (key, value) VALUES ('upload_refs', 1)", [])?;
    Ok(())
}

/// Removes from the uploads directory what no stored upload names: files left
/// by a crash between an upload's file and its commit, and partial uploads.
fn sweep_uploads(conn: &Connection, dir: &Path) -> Result<(), QueueError> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Ok(()) };
    let mut known = conn.prepare("SELECT 1 FROM modules WHERE digest = ?1")?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !known.exists([format!("sha256:{name}")])? {
            let _ = std::fs::remove_file(e.path());
        }
    }
    Ok(())
}

fn parse_stored(text: &str, what: &str) -> Result<ClassAd, QueueError> {
    classad::parse_ad(text).map_err(|e| QueueError::Storage(format!("stored {what}: {e}")))
}

fn load(conn: &Connection, schedd_name: &str) -> Result<QueueState, QueueError> {
    let mut st = QueueState {
        clusters: BTreeMap::new(),
        jobs: BTreeMap::new(),
        next_cluster: 1,
        reserved: BTreeMap::new(),
        cluster_mark: 1,
        schedd_name: schedd_name.into(),
        owner_jobs: HashMap::new(),
        upload_uses: HashMap::new(),
    };
    let meta = |key: &str| -> Result<Option<i64>, QueueError> {
        Ok(conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    };
    // Past every id ever handed out, reserved or submitted.
    let next = meta("next_cluster")?.unwrap_or(1).max(meta("cluster_mark")?.unwrap_or(1));
    st.next_cluster = next.clamp(1, i64::from(u32::MAX)) as u32;
    st.cluster_mark = st.next_cluster;
    let mut stmt = conn.prepare("SELECT id, ad, submitted, completed FROM clusters")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let id: i64 = r.get(0)?;
        let text: String = r.get(1)?;
        let ad = parse_stored(&text, &format!("cluster {id}"))?;
        let (owner, batch) = owner_and_batch(&ad);
        st.clusters.insert(
            id as u32,
            Cluster {
                ad: Arc::new(ad),
                owner,
                batch,
                submitted: r.get::<_, i64>(2)? as u32,
                completed: r.get::<_, i64>(3)? as u32,
            },
        );
    }
    let mut stmt = conn.prepare("SELECT cluster, proc, status, entered, ad FROM jobs")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let id = JobId::new(r.get::<_, i64>(0)? as u32, r.get::<_, i64>(1)? as u32);
        let status = JobStatus::from_code(r.get(2)?)
            .ok_or_else(|| QueueError::Storage(format!("job {id}: bad status")))?;
        let text: String = r.get(4)?;
        let ad = if text == "[]" { ClassAd::new() } else { parse_stored(&text, &id.to_string())? };
        if let Some(c) = st.clusters.get(&id.cluster) {
            *st.owner_jobs.entry(c.owner.clone()).or_insert(0) += 1;
            let by = uploader_of(&c.ad);
            for d in proc_uploads(&c.ad, &ad) {
                *st.upload_uses.entry((by.clone(), d)).or_insert(0) += 1;
            }
        }
        st.jobs.insert(id, Proc { status, entered: r.get(3)?, ad });
    }
    Ok(st)
}

/// The digests of the uploads `ad` names: its `CmdDigest` and the files of
/// its `SpooledInput`. Literal strings only (both are checked at submit and
/// frozen after; an expression names nothing).
pub fn job_uploads(ad: &ClassAd) -> Vec<String> {
    uploads_named(|a| ad.get(a))
}

/// [`job_uploads`] of a job whose proc ad `proc` overrides its cluster ad.
fn proc_uploads(cluster: &ClassAd, proc: &ClassAd) -> Vec<String> {
    uploads_named(|a| proc.get(a).or_else(|| cluster.get(a)))
}

fn uploads_named<'a>(get: impl Fn(&str) -> Option<&'a Expr>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Expr::Lit(Value::Str(d))) = get("CmdDigest") {
        out.push(d.to_string());
    }
    if let Some(Expr::Lit(Value::Str(list))) = get(SPOOLED_INPUT) {
        out.extend(spooled_inputs(list).into_iter().map(|(_, d)| d));
    }
    out.sort();
    out.dedup();
    out
}

/// Whose uploads a job (its cluster ad) may name: those of the schedd that
/// routed it here ([`ROUTED_BY`]), else its owner's.
pub fn uploader_of(cluster_ad: &ClassAd) -> String {
    for a in [ROUTED_BY, "Owner"] {
        if let Some(Expr::Lit(Value::Str(s))) = cluster_ad.get(a) {
            return s.to_string();
        }
    }
    String::new()
}

/// A cluster's Owner (always a literal: the schedd sets it) and
/// JobBatchName, read as literals: the queue evaluates nothing of a job's
/// while it loads (a batch name written as an expression has none).
fn owner_and_batch(ad: &ClassAd) -> (Arc<str>, Option<Arc<str>>) {
    let literal = |name: &str| match ad.get(name) {
        Some(Expr::Lit(Value::Str(s))) => Some(s.clone()),
        _ => None,
    };
    let owner = literal("Owner").unwrap_or_else(|| Arc::from(""));
    let batch = literal("JobBatchName").filter(|s| !s.is_empty());
    (owner, batch)
}

impl Queue {
    /// Opens (or creates) the queue at `config.path` and starts its writer thread.
    pub fn open(config: QueueConfig) -> Result<Queue, QueueError> {
        let conn = open(&config.path)?;
        conn.execute_batch(SCHEMA)?;
        migrate_modules(&conn)?;
        owner_only(&config.path, &["", "-wal", "-shm"]);
        let loaded = load(&conn, &config.schedd_name)?;
        migrate_upload_refs(&conn, &loaded)?;
        let state = Arc::new(RwLock::new(loaded));
        replay_pending_events(&conn, &config)?;
        let reader = Arc::new(std::sync::Mutex::new(open(&config.path)?));
        let (tx, rx) = mpsc::sync_channel::<Request>(4096);
        let deferral_config = Arc::new((config.cron_time_zone.clone(), config.schedd_interval));
        let uploads = Arc::new(uploads_dir(&config.path));
        std::fs::create_dir_all(&*uploads)
            .map_err(|e| QueueError::Storage(format!("{}: {e}", uploads.display())))?;
        owner_only(&uploads, &[""]);
        sweep_uploads(&conn, &uploads)?;
        let upload_quota = config.upload_quota_bytes;
        let reserve_bytes = config.reserve_bytes;
        let spool = config.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let ledger = SpoolLedger::new(spool.clone());
        let reserve = (reserve_bytes > 0)
            .then(|| Arc::new(Reserve::new(spool.join(".reserve"), reserve_bytes)));
        let (journal, crashed) = Journal::open(&config.path);
        let writer = Writer {
            conn,
            state: state.clone(),
            config,
            journal,
            ledger: ledger.clone(),
            reserve: reserve.clone(),
        };
        std::thread::Builder::new()
            .name("andes-queue-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| QueueError::Storage(format!("cannot start the queue writer: {e}")))?;
        if let Some(c) = crashed {
            // The writer's first commit: nobody waits for its answer.
            tracing::error!(
                "the schedd stopped while evaluating the {} of job {}: quarantining it",
                c.what,
                c.job
            );
            let (reply, _) = oneshot::channel();
            let now = jiff::Timestamp::now().as_second();
            let _ = tx.send(Request { op: Op::Quarantine(c), now, reply });
        }
        Ok(Queue {
            deferral_config,
            state,
            tx,
            reader,
            uploads,
            upload_quota,
            reserve_bytes,
            ledger,
            reserve,
        })
    }

    /// A read view of the queue. Hold it briefly: writers wait for it.
    pub fn read(&self) -> RwLockReadGuard<'_, QueueState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The ads of the jobs `wanted` selects for which `constraint` is true,
    /// as `viewer` may see them ([`attrs::visible`]), in id order, at most
    /// `limit`. The read lock is taken for a few hundred jobs at a time and
    /// released before any constraint is evaluated; the constraint is
    /// evaluated on what the caller may see, within [`REQUEST_STEPS`] in all.
    /// Blocking: call it off the async runtime.
    pub fn query(
        &self,
        viewer: &Actor,
        wanted: impl Fn(&JobView<'_>) -> bool,
        constraint: Option<&Expr>,
        limit: Option<usize>,
        now: i64,
    ) -> Result<Vec<(JobId, ClassAd)>, QueueError> {
        let mut ev = Evaluator::with_options(EvalOptions { now: Some(now), ..Default::default() });
        ev.set_step_pool(Some(REQUEST_STEPS));
        let mut out = Vec::new();
        let mut from = JobId::new(0, 0);
        loop {
            let (chunk, last) = {
                let st = self.read();
                let mut last = None;
                let mut chunk: Vec<(JobId, ClassAd)> = Vec::new();
                for (id, proc) in st.jobs.range(from..).take(READ_CHUNK) {
                    last = Some(*id);
                    let Some(cluster) = st.clusters.get(&id.cluster) else { continue };
                    let v = JobView { id: *id, cluster, proc, schedd: &st.schedd_name };
                    if wanted(&v) {
                        chunk.push((v.id, attrs::visible(v.ad(), reader_of(viewer, &v))));
                    }
                }
                (chunk, last)
            };
            for (id, ad) in chunk {
                if let Some(c) = constraint {
                    let v = ev.eval(c, Some(&ad), None);
                    if ev.exhausted() {
                        return Err(too_costly("constraint"));
                    }
                    if !is_true(&v) {
                        continue;
                    }
                }
                if limit.is_some_and(|l| out.len() >= l) {
                    return Ok(out);
                }
                out.push((id, ad));
            }
            match last {
                Some(l) if l.proc < u32::MAX => from = JobId::new(l.cluster, l.proc + 1),
                Some(l) if l.cluster < u32::MAX => from = JobId::new(l.cluster + 1, 0),
                _ => return Ok(out),
            }
        }
    }

    async fn call(&self, op: Op, now: i64) -> Result<Reply, QueueError> {
        let (reply, rx) = oneshot::channel();
        let tx = self.tx.clone();
        // The channel is bounded: waiting for room must not block the runtime.
        let req = Request { op, now, reply };
        match tx.try_send(req) {
            Ok(()) => {}
            Err(mpsc::TrySendError::Full(req)) => {
                tokio::task::spawn_blocking(move || tx.send(req).map_err(|_| ()))
                    .await
                    .map_err(|e| QueueError::Storage(e.to_string()))?
                    .map_err(|_| QueueError::Storage("the queue writer has stopped".into()))?;
            }
            Err(mpsc::TrySendError::Disconnected(_)) => {
                return Err(QueueError::Storage("the queue writer has stopped".into()));
            }
        }
        rx.await.map_err(|_| QueueError::Storage("the queue writer has stopped".into()))?
    }

    /// Hands out a cluster id for `actor` to expand a submit description with
    /// (`$(Cluster)`), as condor_submit asks the schedd for a new cluster first.
    /// The reservation itself is held in memory: one made before a restart is
    /// refused after it, clearly (the client expands and submits again). No id
    /// handed out is ever handed out again, restart or not: a high-water mark
    /// past it is on disk before the id is returned.
    pub async fn reserve_cluster(&self, actor: &Actor, now: i64) -> Result<u32, QueueError> {
        let (id, mark) = {
            let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
            let id = st.next_cluster;
            st.next_cluster += 1;
            st.reserved.insert(id, actor.name.as_str().into());
            if st.reserved.len() > MAX_RESERVED {
                st.reserved.pop_first();
            }
            (id, st.cluster_mark)
        };
        if id >= mark {
            self.call(Op::Mark(id.saturating_add(CLUSTER_MARK_STEP)), now).await?;
        }
        Ok(id)
    }

    /// Submits a cluster; returns its ClusterId once it is durable.
    pub async fn submit(&self, actor: &Actor, submit: Submit, now: i64) -> Result<u32, QueueError> {
        match self.call(Op::Submit(actor.clone(), submit), now).await? {
            Reply::Cluster(c) => Ok(c),
            _ => unreachable!("submit replies with a cluster"),
        }
    }

    /// Holds, releases, removes or edits jobs.
    pub async fn change(
        &self,
        actor: &Actor,
        targets: Targets,
        change: Change,
        now: i64,
    ) -> Result<ChangeReport, QueueError> {
        let mut targets = targets;
        if let Some(text) = targets.constraint.take() {
            // The constraint is evaluated here, on the jobs' public ads, out of
            // the writer's way and within a budget; the writer then checks
            // the rest (ids, owners, rights) as always.
            let c = parse_constraint(&text)?;
            let (q, t, a) = (self.clone(), targets.clone(), actor.clone());
            let matched = tokio::task::spawn_blocking(move || {
                let named = !t.ids.is_empty() || !t.owners.is_empty();
                q.query(
                    &a,
                    |v| {
                        if named {
                            t.ids.iter().any(|sel| sel.selects(v.id))
                                || t.owners.iter().any(|o| o == v.owner())
                        } else {
                            a.may_act_on(v)
                        }
                    },
                    Some(&c),
                    None,
                    now,
                )
            })
            .await
            .map_err(|e| QueueError::Storage(e.to_string()))??;
            let mut ids: Vec<JobId> = matched.into_iter().map(|(id, _)| id).collect();
            ids.sort();
            targets.matched = Some(ids);
            targets.constraint = Some(text);
        }
        match self.call(Op::Change(actor.clone(), targets, change), now).await? {
            Reply::Report(r) => Ok(r),
            _ => unreachable!("change replies with a report"),
        }
    }

    /// A job started running (from its shadow).
    pub async fn job_started(&self, id: JobId, now: i64) -> Result<(), QueueError> {
        self.call(Op::Started(id), now).await.map(|_| ())
    }

    /// Records what a shadow or the negotiation learned about jobs (see
    /// [`PoolOp`]). Jobs no longer in the queue are skipped; a job in the wrong
    /// state for the operation is an error (for a single job) or skipped.
    pub async fn pool(&self, ids: Vec<JobId>, op: PoolOp, now: i64) -> Result<(), QueueError> {
        self.call(Op::Pool(ids, op), now).await.map(|_| ())
    }

    /// A job ended; `ending` carries ExitCode/ExitBySignal/ExitSignal and usage, or a
    /// hold (HoldReasonCode, HoldReason, HoldReasonSubCode) from the execute side.
    pub async fn job_exited(&self, id: JobId, ending: ClassAd, now: i64) -> Result<(), QueueError> {
        self.call(Op::Exited(id, ending), now).await.map(|_| ())
    }

    /// Applies `ops` in order, in one commit: each gets its own answer, and a
    /// storage failure (`Err`) leaves none of them applied. What a claim's
    /// updates go through, so a busy claim costs one commit per round of
    /// updates rather than one per update.
    pub async fn in_order(
        &self,
        ops: Vec<JobOp>,
        now: i64,
    ) -> Result<Vec<Result<(), QueueError>>, QueueError> {
        let ops = ops
            .into_iter()
            .map(|op| match op {
                JobOp::Pool(id, op) => Op::Pool(vec![id], op),
                JobOp::Exited(id, ending) => Op::Exited(id, ending),
            })
            .collect();
        match self.call(Op::Many(ops), now).await? {
            Reply::Many(r) => Ok(r.into_iter().map(|r| r.map(|_| ())).collect()),
            _ => unreachable!("many ops answer with many replies"),
        }
    }

    /// Idle deferred jobs whose window may have closed unmatched: a cron job
    /// counts the missed run and takes its next one; any other is held.
    pub async fn deferral_missed(&self, ids: Vec<JobId>, now: i64) -> Result<(), QueueError> {
        self.call(Op::Deferral(DeferralOp::Missed(ids)), now).await.map(|_| ())
    }

    /// Routes the idle job `original` (the job router): `copy` becomes a new
    /// job of the same owner (its routed copy, RoutedFromJobId), and the
    /// original records RoutedToJobId and RouteName. From then on the
    /// original mirrors the copy: see [`crate::router`].
    pub async fn route(
        &self,
        original: JobId,
        copy: ClassAd,
        now: i64,
    ) -> Result<JobId, QueueError> {
        match self.call(Op::Route(original, copy), now).await? {
            Reply::Cluster(c) => Ok(JobId::new(c, 0)),
            _ => unreachable!("route replies with the copy's cluster"),
        }
    }

    /// Transforms an idle job in place (an EditJobInPlace route): each
    /// attribute set (`Some`) or deleted (`None`).
    pub async fn edit_in_place(
        &self,
        id: JobId,
        route: &str,
        changes: Vec<(String, Option<Expr>)>,
        now: i64,
    ) -> Result<(), QueueError> {
        self.call(Op::EditInPlace(id, route.to_string(), changes), now).await.map(|_| ())
    }

    /// Gives every idle cron job its next run (at schedd start or reconfiguration).
    pub async fn recompute_cron(&self, now: i64) -> Result<(), QueueError> {
        self.call(Op::Deferral(DeferralOp::Restart), now).await.map(|_| ())
    }

    /// The configured cron time zone and SCHEDD_INTERVAL.
    pub fn deferral_config(&self) -> &(jiff::tz::TimeZone, i64) {
        &self.deferral_config
    }

    /// Evaluates every job's periodic policy at `now` and applies what fires.
    /// The schedd calls this every PERIODIC_EXPR_INTERVAL.
    pub async fn periodic(&self, now: i64) -> Result<ChangeReport, QueueError> {
        match self.call(Op::Periodic, now).await? {
            Reply::Report(r) => Ok(r),
            _ => unreachable!("periodic replies with a report"),
        }
    }

    /// Stores a module under its digest (`sha256:<hex>`), durably, counted
    /// against `actor`'s upload quota. The digest is checked against the
    /// bytes. Uploads no queued job refers to are removed after
    /// [`QueueConfig::upload_grace`] ([`Queue::collect_uploads`]).
    pub async fn store_module(
        &self,
        actor: &Actor,
        digest: &str,
        bytes: Vec<u8>,
        now: i64,
    ) -> Result<(), QueueError> {
        if !bytes.starts_with(b"\0asm") {
            return Err(QueueError::Invalid(format!("{digest} is not a Wasm module")));
        }
        self.store_upload(actor, digest, bytes, now).await
    }

    /// Stores an upload (a spooled input file, say) under its digest
    /// (`sha256:<hex>`), durably, counted against `actor`'s upload quota
    /// as modules are. The digest is checked against the bytes.
    pub async fn store_upload(
        &self,
        actor: &Actor,
        digest: &str,
        bytes: Vec<u8>,
        now: i64,
    ) -> Result<(), QueueError> {
        let actual = module_digest(&bytes);
        if actual != digest {
            return Err(QueueError::Invalid(format!(
                "upload digest mismatch: named {digest}, content is {actual}"
            )));
        }
        self.call(Op::StoreModule(actor.clone(), digest.to_string(), bytes), now).await.map(|_| ())
    }

    /// The owner of spooled jobs `ids` has fetched their output
    /// (`andes transfer-data`): each gets `StageOutFinish`, and a completed
    /// one leaves the queue. Only the owner (or an admin) may say so.
    pub async fn output_fetched(
        &self,
        actor: &Actor,
        ids: Vec<JobId>,
        now: i64,
    ) -> Result<ChangeReport, QueueError> {
        match self.call(Op::Fetched(actor.clone(), ids), now).await? {
            Reply::Report(r) => Ok(r),
            _ => unreachable!("fetched replies with a report"),
        }
    }

    /// Removes the uploads no job in the queue refers to that are older than
    /// [`QueueConfig::upload_grace`]; returns how many.
    pub async fn collect_uploads(&self, now: i64) -> Result<u64, QueueError> {
        match self.call(Op::CollectUploads, now).await? {
            Reply::Removed(gone) => {
                // Their rows are gone (committed): their files follow.
                for d in &gone {
                    if let Some(name) = upload_name(d) {
                        let _ = std::fs::remove_file(self.uploads.join(name));
                    }
                }
                Ok(gone.len() as u64)
            }
            _ => unreachable!("collecting uploads replies with what it removed"),
        }
    }

    /// The most bytes `owner` may upload now: what their spool quota has
    /// left, and what the spool's file system has free beyond its reserve.
    pub fn upload_room(&self, owner: &str) -> u64 {
        let uploaded: i64 = {
            let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
            conn.query_row(
                "SELECT COALESCE(SUM(size), 0) FROM upload_refs WHERE owner = ?1",
                [owner],
                |r| r.get(0),
            )
            .unwrap_or(0)
        };
        let kept = self.ledger.usage(owner, || self.read().jobs_of(owner));
        let quota_left = self.upload_quota.saturating_sub(uploaded.max(0) as u64 + kept);
        quota_left.min(self.disk_room())
    }

    /// What the spool's file system may still take: its free space beyond
    /// the reserve (unbounded when it cannot be measured).
    pub fn disk_room(&self) -> u64 {
        match crate::room::free_bytes(&self.uploads) {
            Some(free) => free.saturating_sub(self.reserve_bytes),
            None => u64::MAX,
        }
    }

    /// Counts `bytes` more kept in the spool for `owner` (a spooled job's
    /// outputs, a checkpoint), or refuses them: past the owner's spool quota,
    /// or past what the file system may take beyond the reserve.
    pub fn charge_spool(&self, owner: &str, bytes: u64) -> Result<(), QueueError> {
        let room = self.upload_room(owner);
        if bytes > room {
            return Err(QueueError::Forbidden(format!(
                "keeping {bytes} more bytes in the spool for {owner} would pass their spool \
                 quota (SPOOL_QUOTA_PER_OWNER, {} bytes) or the spool's free space beyond its \
                 reserve (SPOOL_RESERVE, {} bytes); {room} bytes may still be kept",
                self.upload_quota, self.reserve_bytes
            )));
        }
        self.ledger.add(owner, bytes);
        Ok(())
    }

    /// Files were removed from the spool (outputs of jobs that left): what
    /// each owner keeps is weighed again when next asked; the reserve is made
    /// again if it was given back and there is room.
    pub fn spool_changed(&self) {
        self.ledger.forget();
        if let Some(r) = &self.reserve {
            r.restore();
        }
    }

    /// The directory uploads are streamed into ([`Queue::store_file`]).
    pub fn uploads(&self) -> &Path {
        &self.uploads
    }

    /// Stores an upload whose bytes were streamed to `staged` (a file in
    /// [`Queue::uploads`]) and checked to be `digest` (`sha256:<hex>`), `size`
    /// bytes, counted against `actor`'s quota: the file is synced, moved to its
    /// name, and then the upload is committed. Refused, it is removed.
    pub async fn store_file(
        &self,
        actor: &Actor,
        digest: &str,
        staged: &Path,
        size: u64,
        now: i64,
    ) -> Result<(), QueueError> {
        let name = upload_name(digest)
            .ok_or_else(|| QueueError::Invalid(format!("{digest:?} is not sha256:<hex>")))?;
        let target = self.uploads.join(name);
        let placed = std::fs::File::open(staged)
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::rename(staged, &target))
            .and_then(|()| std::fs::File::open(self.uploads.as_path())?.sync_all());
        if let Err(e) = placed {
            let _ = std::fs::remove_file(staged);
            return Err(QueueError::Storage(format!("{}: {e}", target.display())));
        }
        let r = self.call(Op::StoreFile(actor.clone(), digest.to_string(), size), now).await;
        if r.is_err() && !self.has_module(digest).unwrap_or(true) {
            let _ = std::fs::remove_file(&target);
        }
        r.map(|_| ())
    }

    /// Sends the upload `digest` as a streamed body to `path` of `client`'s
    /// daemon (from its file; an upload kept in the database, from memory).
    /// Err with the reason when it is not stored or the daemon refuses it.
    pub async fn send_upload(
        &self,
        client: &andes_protocol::Client,
        path: &str,
        digest: &str,
    ) -> Result<(), String> {
        let r = match self.upload_file(digest).and_then(|p| std::fs::File::open(p).ok()) {
            Some(file) => client.upload(http::Method::PUT, path, file, &[]).await,
            None => {
                let bytes = self
                    .module(digest)
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("{digest} is not stored here"))?;
                client.upload_bytes(http::Method::PUT, path, bytes.into(), &[]).await
            }
        }
        .map_err(|e| e.to_string())?;
        if r.status.is_success() {
            Ok(())
        } else {
            Err(format!("refused: {}", r.error_reason().unwrap_or_else(|| r.status.to_string())))
        }
    }

    /// The upload `digest` as job `job` (its whole ad) may read it: only one
    /// its uploader ([`uploader_of`]) made.
    pub fn open_upload_of(&self, job: &ClassAd, digest: &str) -> Option<std::fs::File> {
        match self.uploaded_by(&uploader_of(job), digest) {
            Ok(true) => self.open_upload(digest),
            _ => None,
        }
    }

    /// The upload `digest`, open for reading: its file, or for one kept in the
    /// database, an anonymous temporary file holding its bytes.
    pub fn open_upload(&self, digest: &str) -> Option<std::fs::File> {
        if let Some(f) = self.upload_file(digest).and_then(|p| std::fs::File::open(p).ok()) {
            return Some(f);
        }
        let bytes = self.module(digest).ok().flatten()?;
        let mut f = tempfile::tempfile().ok()?;
        std::io::Write::write_all(&mut f, &bytes).ok()?;
        std::io::Seek::rewind(&mut f).ok()?;
        Some(f)
    }

    /// Where the upload `digest` is as a file, if it is stored as one (uploads
    /// from before uploads were files are in the database: see [`Queue::module`]).
    pub fn upload_file(&self, digest: &str) -> Option<PathBuf> {
        let p = self.uploads.join(upload_name(digest)?);
        p.is_file().then_some(p)
    }

    /// True when `owner` uploaded `digest` (and it is still kept for them):
    /// the only uploads a job of theirs may name. Another owner's upload of
    /// the same bytes does not count: nothing here tells one user whether
    /// another stored a file.
    pub fn uploaded_by(&self, owner: &str, digest: &str) -> Result<bool, QueueError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        Ok(conn
            .query_row(
                "SELECT 1 FROM upload_refs WHERE owner = ?1 AND digest = ?2",
                [owner, digest],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// True when the module with this digest is stored, for anyone.
    pub fn has_module(&self, digest: &str) -> Result<bool, QueueError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        Ok(conn
            .query_row("SELECT 1 FROM modules WHERE digest = ?1", [digest], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// The module (or other upload) with this digest, in memory.
    pub fn module(&self, digest: &str) -> Result<Option<Vec<u8>>, QueueError> {
        let data: Option<Vec<u8>> = {
            let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
            conn.query_row("SELECT data FROM modules WHERE digest = ?1", [digest], |r| r.get(0))
                .optional()?
        };
        match data {
            Some(d) if d.is_empty() => match self.upload_file(digest) {
                Some(p) => std::fs::read(&p)
                    .map(Some)
                    .map_err(|e| QueueError::Storage(format!("{}: {e}", p.display()))),
                // Stored in the database before uploads were files: empty.
                None => Ok(Some(Vec::new())),
            },
            other => Ok(other),
        }
    }

    /// Jobs that left the queue, newest first: those matching `constraint`, at most
    /// `limit`, as `viewer` may see them ([`attrs::visible`]).
    pub fn history(
        &self,
        viewer: &Actor,
        constraint: Option<&str>,
        owners: &[String],
        limit: Option<usize>,
    ) -> Result<Vec<ClassAd>, QueueError> {
        let constraint = constraint.map(parse_constraint).transpose()?;
        let mut ev = Evaluator::new();
        ev.set_step_pool(Some(REQUEST_STEPS));
        let mut out = Vec::new();
        let mut before = i64::MAX;
        loop {
            // A few hundred rows per hold of the reader, which submits share:
            // the constraint is evaluated with it released.
            let rows: Vec<(i64, String, String)> = {
                let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
                let mut stmt = conn.prepare_cached(
                    "SELECT seq, owner, ad FROM history WHERE seq < ?1 ORDER BY seq DESC LIMIT ?2",
                )?;
                let rows = stmt.query_map(rusqlite::params![before, READ_CHUNK as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?;
                rows.collect::<Result<_, _>>()?
            };
            if rows.is_empty() {
                return Ok(out);
            }
            for (seq, owner, text) in rows {
                before = seq;
                if limit.is_some_and(|l| out.len() >= l) {
                    return Ok(out);
                }
                if !owners.is_empty() && !owners.contains(&owner) {
                    continue;
                }
                let reader = if viewer.admin || viewer.name == owner {
                    Reader::Owner
                } else {
                    Reader::Other
                };
                let ad = attrs::visible(parse_stored(&text, "history ad")?, reader);
                if let Some(c) = &constraint {
                    let v = ev.eval(c, Some(&ad), None);
                    if ev.exhausted() {
                        return Err(too_costly("constraint"));
                    }
                    if !is_true(&v) {
                        continue;
                    }
                }
                out.push(ad);
            }
        }
    }
}

/// Parses a constraint, with an error that names it.
pub fn parse_constraint(text: &str) -> Result<Expr, QueueError> {
    if text.len() > MAX_CONSTRAINT {
        return Err(QueueError::Invalid(format!(
            "a constraint of {} bytes is longer than the {MAX_CONSTRAINT} allowed",
            text.len()
        )));
    }
    classad::parse_expr(text).map_err(|e| QueueError::Invalid(format!("constraint `{text}`: {e}")))
}

/// The longest constraint a request may carry: far beyond any real one.
pub const MAX_CONSTRAINT: usize = 64 << 10;

/// True when a constraint's value selects: true, or a non-zero number.
pub fn is_true(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Int(i) => *i != 0,
        Value::Real(r) => *r != 0.0,
        _ => false,
    }
}

struct Writer {
    conn: Connection,
    state: Arc<RwLock<QueueState>>,
    config: QueueConfig,
    journal: Journal,
    ledger: Arc<SpoolLedger>,
    reserve: Option<Arc<Reserve>>,
}

/// What one batch leaves to do after its commit.
#[derive(Default)]
struct Batch {
    events: Vec<QueueEvent>,
    /// The last `pending_events` row written for the event logs.
    logged: i64,
    /// Jobs that left the queue.
    left: Vec<JobId>,
    /// Uploads no longer kept for anyone: their files go after the commit.
    gone_uploads: Vec<String>,
}

impl Writer {
    fn run(mut self, rx: mpsc::Receiver<Request>) {
        while let Ok(first) = rx.recv() {
            let mut reqs = vec![first];
            while reqs.len() < 4096 {
                match rx.try_recv() {
                    Ok(r) => reqs.push(r),
                    Err(_) => break,
                }
            }
            self.batch(reqs);
        }
    }

    /// What a commit leaves to do outside the transaction: the files of
    /// uploads nobody keeps, the spool of jobs that left.
    fn after_commit(&self, batch: &Batch) {
        let dir = uploads_dir(&self.config.path);
        for d in &batch.gone_uploads {
            if let Some(name) = upload_name(d) {
                let _ = std::fs::remove_file(dir.join(name));
            }
        }
        if !batch.left.is_empty() {
            if let Some(f) = &self.config.on_left {
                f(&batch.left);
            }
            self.ledger.forget();
        }
    }

    /// Applies a batch of requests in one transaction. A request whose
    /// operation panics fails alone: the transaction is rolled back, the
    /// in-memory queue reloaded from the database, and the rest applied
    /// again without it, so one bad request never stops the writer nor
    /// costs anyone else's.
    fn batch(&mut self, mut reqs: Vec<Request>) {
        loop {
            match self.attempt(&reqs) {
                Attempt::Committed(results, batch) => {
                    let mut logged = true;
                    if let Some(sink) = &self.config.sink
                        && !batch.events.is_empty()
                    {
                        // A failing log writer never stops the queue: its
                        // events stay pending, for the next start.
                        let events = &batch.events;
                        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(events)))
                            .is_err()
                        {
                            tracing::error!(
                                "writing job event logs failed; retried at the next start"
                            );
                            logged = false;
                        }
                    }
                    if logged && batch.logged > 0 {
                        self.forget_logged(batch.logged);
                    }
                    for (req, r) in reqs.into_iter().zip(results) {
                        let _ = req.reply.send(r);
                    }
                    self.after_commit(&batch);
                    return;
                }
                // The disk is full: the reserve is given back and the batch
                // tried again, so that what frees space (removals) and what
                // must not be lost (holds, job ends) commits.
                Attempt::Failed(QueueError::Storage(m))
                    if m.starts_with(DISK_FULL)
                        && self.reserve.as_ref().is_some_and(|r| r.release()) => {}
                Attempt::Failed(e) => {
                    for req in reqs {
                        let _ = req.reply.send(Err(e.clone()));
                    }
                    return;
                }
                Attempt::Panicked(i, msg) => {
                    let bad = reqs.remove(i);
                    tracing::error!(
                        "a job queue request could not be applied ({msg}); it was refused and the \
                         others applied without it"
                    );
                    let _ = bad.reply.send(Err(QueueError::Invalid(format!(
                        "the schedd could not apply this request ({msg}); nothing of it was kept"
                    ))));
                    if reqs.is_empty() {
                        return;
                    }
                }
            }
        }
    }

    /// The event logs have every pending event up to `seq`: they are
    /// forgotten. Not synced: a crash before this reaches the disk only
    /// writes those events again at the next start.
    fn forget_logged(&mut self, seq: i64) {
        let r = self
            .conn
            .pragma_update(None, "synchronous", "NORMAL")
            .and_then(|_| self.conn.execute("DELETE FROM pending_events WHERE seq <= ?1", [seq]))
            .and_then(|_| self.conn.pragma_update(None, "synchronous", "FULL"));
        if let Err(e) = r {
            tracing::warn!("forgetting logged events: {e}");
            let _ = self.conn.pragma_update(None, "synchronous", "FULL");
        }
    }

    /// One try at a batch, holding the write lock throughout so that readers
    /// never see a change before its commit.
    fn attempt(&mut self, reqs: &[Request]) -> Attempt {
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        let mut results = Vec::with_capacity(reqs.len());
        let mut batch = Batch::default();
        let mut panicked = None;
        let outcome = (|| -> Result<(), QueueError> {
            let tx = self.conn.transaction()?;
            for (i, req) in reqs.iter().enumerate() {
                let mut ctx = Ctx {
                    tx: &tx,
                    state: &mut state,
                    now: req.now,
                    batch: &mut batch,
                    config: &self.config,
                    journal: &self.journal,
                    ledger: &self.ledger,
                };
                let r = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    ctx.apply(&req.op)
                })) {
                    Ok(r) => r,
                    Err(payload) => {
                        let msg = payload
                            .downcast_ref::<String>()
                            .map(String::as_str)
                            .or_else(|| payload.downcast_ref::<&str>().copied())
                            .unwrap_or("a panic")
                            .to_string();
                        panicked = Some((i, msg));
                        // Dropping the transaction rolls it back.
                        return Err(QueueError::Storage("rolled back".into()));
                    }
                };
                // A storage error inside an op fails the whole batch.
                if let Err(QueueError::Storage(e)) = &r {
                    return Err(QueueError::Storage(e.clone()));
                }
                results.push(r);
            }
            prune_history(&tx, &self.config, reqs.iter().map(|r| r.now).max().unwrap_or(0))?;
            tx.commit()?;
            Ok(())
        })();
        match outcome {
            Ok(()) => {
                if let Some(notify) = &self.config.notify
                    && !batch.events.is_empty()
                {
                    notify(&batch.events);
                }
                Attempt::Committed(results, batch)
            }
            Err(e) => {
                // The in-memory queue may hold part of what was rolled back.
                match load(&self.conn, &self.config.schedd_name) {
                    Ok(fresh) => {
                        let reserved = std::mem::take(&mut state.reserved);
                        let next = state.next_cluster;
                        *state = fresh;
                        state.reserved = reserved;
                        state.next_cluster = state.next_cluster.max(next);
                    }
                    Err(e2) => tracing::error!("reloading the job queue failed: {e2}"),
                }
                match panicked {
                    Some((i, msg)) => Attempt::Panicked(i, msg),
                    None => {
                        tracing::error!("job queue commit failed: {e}; reloaded from the database");
                        Attempt::Failed(e)
                    }
                }
            }
        }
    }
}

/// How one try at a batch went.
enum Attempt {
    /// Committed: each request's result, and the events to log.
    Committed(Vec<Result<Reply, QueueError>>, Batch),
    /// Nothing was kept; every request fails with this.
    Failed(QueueError),
    /// Request `.0` panicked (`.1` says how); nothing was kept.
    Panicked(usize, String),
}

/// What identifies a submit's content: the SHA-256 of its ads' text.
fn submit_token(s: &Submit) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(s.cluster_ad.to_string().as_bytes());
    for p in &s.procs {
        h.update(b"\n");
        h.update(p.to_string().as_bytes());
    }
    hex::encode(h.finalize())
}

fn prune_history(
    tx: &rusqlite::Transaction<'_>,
    config: &QueueConfig,
    now: i64,
) -> Result<(), QueueError> {
    tx.prepare_cached("DELETE FROM submits WHERE at < ?1")?.execute([now - SUBMIT_TOKEN_KEEP])?;
    // Cheap when nothing is due: both deletes use the primary key.
    tx.prepare_cached("DELETE FROM history WHERE seq <= (SELECT MAX(seq) FROM history) - ?1")?
        .execute([config.history_max_jobs as i64])?;
    if let Some(age) = config.history_max_age {
        tx.prepare_cached("DELETE FROM history WHERE left_queue < ?1")?.execute([now - age])?;
    }
    Ok(())
}

struct Ctx<'a, 'b> {
    tx: &'a rusqlite::Transaction<'b>,
    state: &'a mut QueueState,
    now: i64,
    batch: &'a mut Batch,
    config: &'a QueueConfig,
    journal: &'a Journal,
    ledger: &'a SpoolLedger,
}

impl Ctx<'_, '_> {
    fn apply(&mut self, op: &Op) -> Result<Reply, QueueError> {
        match op {
            Op::Submit(actor, s) => self.submit(actor, s, Origin::Outside).map(Reply::Cluster),
            Op::Change(actor, targets, change) => {
                let ids = self.select(actor, targets)?;
                self.change(&ids, change, actor).map(Reply::Report)
            }
            Op::Started(id) => self.started(*id).map(|_| Reply::Done),
            Op::Pool(ids, op) => {
                for id in ids {
                    self.pool_op(*id, op)?;
                }
                Ok(Reply::Done)
            }
            Op::Exited(id, ending) => self.exited(*id, ending).map(|_| Reply::Done),
            Op::Many(ops) => {
                let mut replies = Vec::with_capacity(ops.len());
                for op in ops {
                    let r = self.apply(op);
                    // A storage error fails the whole batch, as for one op.
                    if let Err(QueueError::Storage(e)) = &r {
                        return Err(QueueError::Storage(e.clone()));
                    }
                    replies.push(r);
                }
                Ok(Reply::Many(replies))
            }
            Op::Periodic => self.periodic().map(Reply::Report),
            Op::Quarantine(c) => self.quarantine(c).map(|_| Reply::Done),
            Op::Route(original, copy) => self.route(*original, copy).map(Reply::Cluster),
            Op::EditInPlace(id, route, changes) => {
                let Some(p) = self.state.jobs.get_mut(id) else {
                    return Err(QueueError::NotFound(format!("job {id} is not in the queue")));
                };
                if p.status != JobStatus::Idle {
                    return Err(QueueError::Invalid(format!("job {id} is not idle")));
                }
                let cluster_ad = self.state.clusters.get(&id.cluster).map(|c| c.ad.clone());
                let Some(p) = self.state.jobs.get_mut(id) else { unreachable!("checked above") };
                for (name, e) in changes {
                    if attrs::is_protected(name) {
                        continue;
                    }
                    match e {
                        Some(e) => p.ad.insert(name.as_str(), e.clone()),
                        // A cluster-wide attribute is hidden for this job.
                        None if cluster_ad.as_ref().is_some_and(|c| c.contains(name)) => {
                            p.ad.insert(name.as_str(), Expr::from(Value::Undefined))
                        }
                        None => {
                            p.ad.remove(name);
                        }
                    }
                }
                self.persist(*id)?;
                self.event(
                    *id,
                    EventKind::Note(format!("job router: edited in place by route {route}")),
                )?;
                Ok(Reply::Done)
            }
            Op::Deferral(DeferralOp::Missed(ids)) => {
                for id in ids {
                    self.missed(*id)?;
                }
                Ok(Reply::Done)
            }
            Op::Deferral(DeferralOp::Restart) => {
                let ids: Vec<JobId> = self
                    .state
                    .jobs
                    .iter()
                    .filter(|(_, p)| p.status == JobStatus::Idle)
                    .map(|(id, _)| *id)
                    .collect();
                for id in ids {
                    if self.is_cron(id) {
                        self.missed(id)?;
                        self.schedule_cron(id)?;
                        self.persist(id)?;
                    }
                }
                Ok(Reply::Done)
            }
            Op::StoreFile(actor, digest, size) => self.store_upload(actor, digest, &[], *size),
            Op::StoreModule(actor, digest, bytes) => {
                self.store_upload(actor, digest, bytes, bytes.len() as u64)
            }
            #[cfg(test)]
            Op::Panic => panic!("a test's panic"),
            Op::Mark(mark) => {
                self.tx.execute(
                    "INSERT INTO meta (key, value) VALUES ('cluster_mark', ?1)
                     ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)",
                    [i64::from(*mark)],
                )?;
                self.state.cluster_mark = self.state.cluster_mark.max(*mark);
                Ok(Reply::Done)
            }
            Op::Fetched(actor, ids) => {
                let mut report = ChangeReport::default();
                for id in ids {
                    let Some(v) = self.state.job(*id) else {
                        report.skipped.push((*id, "not in the queue".into()));
                        continue;
                    };
                    if !actor.may_act_on(&v) {
                        return Err(QueueError::Forbidden(format!(
                            "job {id} belongs to {}; {} may act only on their own jobs",
                            v.owner(),
                            actor.name
                        )));
                    }
                    let status = v.proc.status;
                    if let Some(p) = self.state.jobs.get_mut(id) {
                        p.ad.insert_value("StageOutStart", self.now);
                        p.ad.insert_value("StageOutFinish", self.now);
                    }
                    if status == JobStatus::Completed && !self.leave_in_queue(*id) {
                        self.leave(*id)?;
                    } else {
                        self.persist(*id)?;
                    }
                    report.changed.push(*id);
                }
                Ok(Reply::Report(report))
            }
            Op::CollectUploads => {
                // An owner's reference goes once no job of theirs names it
                // (after the grace a client has between upload and submit);
                // the bytes go with the last reference.
                let used = self.state.referenced_uploads();
                let cutoff = self.now - self.config.upload_grace;
                let old: Vec<(String, String)> = self
                    .tx
                    .prepare_cached("SELECT owner, digest FROM upload_refs WHERE stored < ?1")?
                    .query_map([cutoff], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?;
                for (owner, digest) in old.into_iter().filter(|k| !used.contains(k)) {
                    self.tx
                        .prepare_cached("DELETE FROM upload_refs WHERE owner = ?1 AND digest = ?2")?
                        .execute([owner, digest])?;
                }
                let named: std::collections::HashSet<String> =
                    used.into_iter().map(|(_, d)| d).collect();
                let orphans: Vec<String> = self
                    .tx
                    .prepare_cached(
                        "SELECT digest FROM modules WHERE stored < ?1
                         AND NOT EXISTS (SELECT 1 FROM upload_refs r WHERE r.digest = modules.digest)",
                    )?
                    .query_map([cutoff], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                let mut removed = Vec::new();
                for d in orphans.iter().filter(|d| !named.contains(d.as_str())) {
                    if self.tx.execute("DELETE FROM modules WHERE digest = ?1", [d])? > 0 {
                        removed.push(d.clone());
                    }
                }
                Ok(Reply::Removed(removed))
            }
        }
    }

    /// Records an upload of `size` bytes under `digest`, counted against
    /// `actor`'s quota: its bytes in the row (`data`), or none when they are in
    /// its file under the uploads directory. One already stored is left as it is.
    ///
    /// Each owner keeps their own reference to what they uploaded, counted
    /// against their own quota, even when another owner stored the same
    /// bytes: the bytes are kept once, but one user's upload never lets
    /// another name it, and the answer is the same whether or not anyone
    /// else had stored it.
    fn store_upload(
        &mut self,
        actor: &Actor,
        digest: &str,
        data: &[u8],
        size: u64,
    ) -> Result<Reply, QueueError> {
        let mine: bool = self
            .tx
            .prepare_cached("SELECT 1 FROM upload_refs WHERE owner = ?1 AND digest = ?2")?
            .exists([actor.name.as_str(), digest])?;
        if mine {
            self.tx
                .prepare_cached(
                    "UPDATE upload_refs SET stored = ?3 WHERE owner = ?1 AND digest = ?2",
                )?
                .execute(params![actor.name, digest, self.now])?;
            return Ok(Reply::Done);
        }
        self.check_upload_quota(actor, size)?;
        self.tx
            .prepare_cached(
                "INSERT INTO upload_refs (owner, digest, size, stored) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![actor.name, digest, size as i64, self.now])?;
        self.tx
            .prepare_cached(
                "INSERT OR IGNORE INTO modules (digest, data, uploader, size, stored)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![digest, data, actor.name, size as i64, self.now])?;
        Ok(Reply::Done)
    }

    /// Refuses a submit past MAX_JOBS_PER_SUBMISSION, or one that would take
    /// its owner past MAX_JOBS_PER_OWNER or the queue past
    /// MAX_JOBS_SUBMITTED.
    fn check_job_limits(&self, actor: &Actor, s: &Submit) -> Result<(), QueueError> {
        let n = s.procs.len() as u64;
        let limits = self.config.job_limits;
        if n > limits.per_submission {
            return Err(QueueError::Invalid(format!(
                "a submit of {n} jobs is more than MAX_JOBS_PER_SUBMISSION ({}) allows",
                limits.per_submission
            )));
        }
        let owner: &str = match (actor.schedd, s.cluster_ad.get("Owner")) {
            (true, Some(Expr::Lit(Value::Str(o)))) => o,
            _ => &actor.name,
        };
        let held = self.state.owner_jobs.get(owner).copied().unwrap_or(0);
        if held + n > limits.per_owner {
            return Err(QueueError::Forbidden(format!(
                "{owner} has {held} jobs in the queue; {n} more would pass MAX_JOBS_PER_OWNER ({})",
                limits.per_owner
            )));
        }
        let all = self.state.jobs.len() as u64;
        if all + n > limits.submitted {
            return Err(QueueError::Forbidden(format!(
                "the queue holds {all} jobs; {n} more would pass MAX_JOBS_SUBMITTED ({})",
                limits.submitted
            )));
        }
        Ok(())
    }

    /// Refuses a submitted ad that names an upload its submitter did not
    /// make ([`Queue::uploaded_by`]); an admin may name any stored upload.
    fn check_uploads(&mut self, actor: &Actor, ad: &ClassAd) -> Result<(), QueueError> {
        // A spooled input or module must be named as a literal string: that
        // is what is checked here and what the shadow reads.
        for a in ["CmdDigest", SPOOLED_INPUT] {
            if let Some(e) = ad.get(a)
                && !matches!(e, Expr::Lit(Value::Str(_)))
            {
                return Err(QueueError::Invalid(format!("{a} = {e}: expected a string")));
            }
        }
        for digest in job_uploads(ad) {
            let known = if actor.admin {
                self.tx
                    .prepare_cached("SELECT 1 FROM modules WHERE digest = ?1")?
                    .exists([&digest])?
            } else {
                self.tx
                    .prepare_cached("SELECT 1 FROM upload_refs WHERE digest = ?1 AND owner = ?2")?
                    .exists([digest.as_str(), actor.name.as_str()])?
            };
            if !known {
                let path = if ad.get("CmdDigest").and_then(Expr::as_literal).and_then(Value::as_str)
                    == Some(digest.as_str())
                {
                    "modules"
                } else {
                    "uploads"
                };
                return Err(QueueError::Invalid(format!(
                    "{digest} is not among {}'s uploads; PUT it to /v1/{path}/{digest} first",
                    actor.name
                )));
            }
        }
        Ok(())
    }

    /// Refuses an upload of `size` bytes that would take `actor` past the quota.
    fn check_upload_quota(&mut self, actor: &Actor, size: u64) -> Result<(), QueueError> {
        let (uploaded, count): (i64, i64) = self.tx.query_row(
            "SELECT COALESCE(SUM(size), 0), COUNT(*) FROM upload_refs WHERE owner = ?1",
            [actor.name.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let state = &*self.state;
        let kept = self.ledger.usage(&actor.name, || state.jobs_of(&actor.name));
        let bytes_held = uploaded.max(0) as u64 + kept;
        let (max_bytes, max_count) =
            (self.config.upload_quota_bytes, self.config.upload_quota_count);
        if bytes_held + size > max_bytes || count as u64 >= max_count {
            return Err(QueueError::Forbidden(format!(
                "{} keeps {count} uploads and {bytes_held} bytes in all in the spool (uploads, \
                 spooled outputs, checkpoints); {size} bytes more would pass the quota of \
                 {max_count} uploads or {max_bytes} bytes (SPOOL_QUOTA_PER_OWNER; uploads no \
                 queued job uses are removed after {} s, a job's outputs when it leaves)",
                actor.name, self.config.upload_grace
            )));
        }
        Ok(())
    }

    fn submit(&mut self, actor: &Actor, s: &Submit, origin: Origin) -> Result<u32, QueueError> {
        if s.procs.is_empty() {
            return Err(QueueError::Invalid("a submit needs at least one job".into()));
        }
        if s.procs.len() > u32::MAX as usize / 2 {
            return Err(QueueError::Invalid("too many jobs in one cluster".into()));
        }
        if let Origin::Outside = origin {
            self.check_job_limits(actor, s)?;
        }
        let cluster = match s.cluster {
            None => {
                let c = self.state.next_cluster;
                self.state.next_cluster += 1;
                c
            }
            Some(c) => match self.state.reserved.get(&c) {
                Some(o) if **o == *actor.name => c,
                Some(_) => {
                    return Err(QueueError::Forbidden(format!(
                        "cluster {c} was reserved by another user"
                    )));
                }
                None => {
                    // The same submit again (its answer was lost): the first
                    // answer, not a duplicate.
                    let first: Option<(String, String)> = self
                        .tx
                        .prepare_cached("SELECT owner, token FROM submits WHERE cluster = ?1")?
                        .query_row([i64::from(c)], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()?;
                    if let Some((owner, token)) = first
                        && owner == actor.name
                        && token == submit_token(s)
                    {
                        return Ok(c);
                    }
                    return Err(QueueError::Invalid(format!(
                        "cluster {c} is not reserved (the schedd may have restarted, or it was \
                         used by another submit); submit again"
                    )));
                }
            },
        };
        if s.cluster.is_some() {
            self.tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO submits (cluster, owner, token, at) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![i64::from(cluster), actor.name, submit_token(s), self.now])?;
        }
        let mut ad = s.cluster_ad.clone();
        let cluster_held = submitted_held(ad.get("JobStatus"));
        let cluster_cron = andes_cron::Field::ALL.iter().any(|f| ad.contains(f.attribute()));
        // A deferred job becomes matchable ScheddInterval before its prep
        // time: this schedd's own interval, not the 300 s a submit file
        // assumes.
        let wants_interval =
            ad.contains("ScheddInterval") || s.procs.iter().any(|p| p.contains("ScheddInterval"));
        // Nothing the schedd sets comes from the submitter; a routed copy
        // (built here from its original and the admin's route) keeps its
        // route's attributes and loses only the original's identity.
        origin.strip(&mut ad, actor.schedd);
        if let Origin::Outside = origin {
            self.check_uploads(actor, &ad)?;
        }
        ad.insert_value("ClusterId", cluster as i64);
        if actor.schedd {
            // Routed here for the owner its ad names (the API checked that
            // this pool trusts them), by the schedd recorded beside it.
            if !matches!(ad.get("Owner"), Some(Expr::Lit(Value::Str(_)))) {
                return Err(QueueError::Invalid(
                    "a routed job's ad must name its Owner as a string".into(),
                ));
            }
            ad.insert_value(ROUTED_BY, actor.name.as_str());
        } else {
            ad.insert_value("Owner", actor.name.as_str());
        }
        // HTCondor's User: Owner@UID_DOMAIN.
        let user = match ad.get("Owner") {
            Some(Expr::Lit(Value::Str(o))) => format!("{o}@{}", self.config.uid_domain),
            _ => format!("{}@{}", actor.name, self.config.uid_domain),
        };
        ad.insert_value("User", user.as_str());
        ad.insert_value("QDate", self.now);
        if !ad.contains("MyType") {
            ad.insert_value("MyType", "Job");
        }
        if wants_interval {
            ad.insert_value("ScheddInterval", self.config.schedd_interval);
        }
        // The counters a job starts with, as condor_submit sets them (and
        // NumHolds, so that a policy such as `NumHolds >= 2` is false rather
        // than undefined, which holds); the startd's
        // IS_VALID_CHECKPOINT_PLATFORM lets a job with NumCkpts == 0 run on
        // any platform.
        for counter in ["NumCkpts", "NumRestarts", "NumJobStarts", "NumJobCompletions", "NumHolds"]
        {
            ad.insert_value(counter, 0i64);
        }
        let mut procs = Vec::with_capacity(s.procs.len());
        for (i, p) in s.procs.iter().enumerate() {
            let mut p = p.clone();
            // A job submitted with `hold = true` starts held; every other starts idle.
            let held = match p.get("JobStatus") {
                Some(e) => submitted_held(Some(e)),
                None => cluster_held,
            };
            origin.strip(&mut p, false);
            if let Origin::Outside = origin {
                self.check_uploads(actor, &p)?;
            }
            let status = if held { JobStatus::Held } else { JobStatus::Idle };
            if cluster_cron || andes_cron::Field::ALL.iter().any(|f| p.contains(f.attribute())) {
                let mut whole = ad.clone();
                whole.update(&p);
                match deferral::next_run(&whole, self.now, &self.config.cron_time_zone) {
                    Some(Ok(t)) => p.insert_value("DeferralTime", t),
                    Some(Err(e)) => {
                        return Err(QueueError::Invalid(format!("job {cluster}.{i}: {e}")));
                    }
                    None => {}
                }
            }
            if held && !p.contains("HoldReasonCode") && !ad.contains("HoldReasonCode") {
                p.insert_value("HoldReasonCode", hold_code::SUBMITTED_ON_HOLD);
                p.insert_value("HoldReason", "submitted on hold at user's request");
            }
            procs.push((JobId::new(cluster, i as u32), status, p));
        }
        let (owner, batch) = owner_and_batch(&ad);
        self.tx.execute(
            "INSERT INTO clusters (id, ad, submitted, completed) VALUES (?1, ?2, ?3, 0)",
            params![cluster as i64, ad.to_string(), procs.len() as i64],
        )?;
        {
            let mut stmt = self.tx.prepare_cached(
                "INSERT INTO jobs (cluster, proc, status, entered, ad) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for (id, status, p) in &procs {
                stmt.execute(params![
                    id.cluster as i64,
                    id.proc as i64,
                    status.code(),
                    self.now,
                    p.to_string()
                ])?;
            }
        }
        self.tx.execute(
            "INSERT INTO meta (key, value) VALUES ('next_cluster', ?1)
             ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)",
            [self.state.next_cluster as i64],
        )?;
        self.state.reserved.remove(&cluster);
        let n = procs.len() as u32;
        *self.state.owner_jobs.entry(owner.clone()).or_insert(0) += u64::from(n);
        let by = uploader_of(&ad);
        for (_, _, p) in &procs {
            for d in proc_uploads(&ad, p) {
                *self.state.upload_uses.entry((by.clone(), d)).or_insert(0) += 1;
            }
        }
        self.state.clusters.insert(
            cluster,
            Cluster { ad: Arc::new(ad), owner, batch, submitted: n, completed: 0 },
        );
        let want_events = self.config.sink.is_some() || self.config.notify.is_some();
        for (id, status, p) in procs {
            self.state.jobs.insert(id, Proc { status, entered: self.now, ad: p });
            if want_events {
                self.event(id, EventKind::Submitted)?;
                if status == JobStatus::Held
                    && let Some(v) = self.state.job(id)
                {
                    let info = hold_info_of(&v.ad());
                    self.event(id, EventKind::Held(info))?;
                }
            }
        }
        Ok(cluster)
    }

    fn event(&mut self, id: JobId, kind: EventKind) -> Result<(), QueueError> {
        if self.config.sink.is_none() && self.config.notify.is_none() {
            return Ok(());
        }
        if let Some(v) = self.state.job(id) {
            let ad = Arc::new(v.ad());
            // An event bound for an event log is kept in the same
            // transaction as its change until the log has it: a crash between
            // the commit and the log's write loses nothing (it is written at
            // the next start).
            if self.config.sink.is_some() && ad.contains("UserLog") {
                let kind_text = serde_json::to_string(&kind)
                    .map_err(|e| QueueError::Storage(format!("an event: {e}")))?;
                self.tx
                    .prepare_cached(
                        "INSERT INTO pending_events (cluster, proc, time, kind, ad) \
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                    )?
                    .execute(params![
                        id.cluster as i64,
                        id.proc as i64,
                        self.now,
                        kind_text,
                        ad.to_string()
                    ])?;
                self.batch.logged = self.batch.logged.max(self.tx.last_insert_rowid());
            }
            self.batch.events.push(QueueEvent { id, time: self.now, kind, ad });
        }
        Ok(())
    }

    /// The jobs `targets` names, checked against the actor's rights.
    fn select(&self, actor: &Actor, t: &Targets) -> Result<Vec<JobId>, QueueError> {
        let constraint = t.constraint.as_deref().map(parse_constraint).transpose()?;
        // A routing schedd names the jobs it routed by id, never by owner.
        if !actor.admin
            && let Some(o) = t.owners.iter().find(|o| actor.schedd || **o != actor.name)
        {
            return Err(QueueError::Forbidden(format!(
                "{} may not act on the jobs of {o}",
                actor.name
            )));
        }
        let mut ids: Vec<JobId> = Vec::new();
        for sel in &t.ids {
            let before = ids.len();
            match *sel {
                JobSelector::Job(id) => {
                    if self.state.jobs.contains_key(&id) {
                        ids.push(id);
                    }
                }
                JobSelector::Cluster(c) => ids.extend(self.state.cluster_jobs(c).map(|v| v.id)),
            }
            if ids.len() == before {
                return Err(QueueError::NotFound(format!("job {sel} is not in the queue")));
            }
            for id in &ids[before..] {
                let Some(v) = self.state.job(*id) else { continue };
                let owner = v.owner();
                if !actor.may_act_on(&v) {
                    return Err(QueueError::Forbidden(format!(
                        "job {id} belongs to {owner}; {} may act only on their own jobs",
                        actor.name
                    )));
                }
            }
        }
        if !t.owners.is_empty() {
            ids.extend(
                self.state.jobs().filter(|v| t.owners.iter().any(|o| o == v.owner())).map(|v| v.id),
            );
        }
        if t.ids.is_empty() && t.owners.is_empty() {
            if constraint.is_none() {
                return Err(QueueError::Invalid("name jobs by id, owner or constraint".into()));
            }
            ids.extend(self.state.jobs().filter(|v| actor.may_act_on(v)).map(|v| v.id));
        }
        ids.sort();
        ids.dedup();
        if let Some(m) = &t.matched {
            ids.retain(|id| m.binary_search(id).is_ok());
        } else if let Some(c) = constraint {
            let mut ev =
                Evaluator::with_options(EvalOptions { now: Some(self.now), ..Default::default() });
            ev.set_step_pool(Some(REQUEST_STEPS));
            let mut kept = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(v) = self.state.job(id) {
                    let ad = attrs::visible(v.ad(), reader_of(actor, &v));
                    let ok = is_true(&ev.eval(&c, Some(&ad), None));
                    if ev.exhausted() {
                        return Err(too_costly("constraint"));
                    }
                    if ok {
                        kept.push(id);
                    }
                }
            }
            ids = kept;
        }
        Ok(ids)
    }

    fn change(
        &mut self,
        ids: &[JobId],
        change: &Change,
        actor: &Actor,
    ) -> Result<ChangeReport, QueueError> {
        let mut report = ChangeReport::default();
        if let Change::Edit { attr, expr } = change {
            if attrs::is_protected(attr) {
                return Err(QueueError::Forbidden(format!(
                    "{attr} is protected and cannot be edited"
                )));
            }
            if classad::AttrName::new(attr).needs_quotes() || attr.is_empty() {
                return Err(QueueError::Invalid(format!("`{attr}` is not an attribute name")));
            }
            let e = classad::parse_expr(expr)
                .map_err(|e| QueueError::Invalid(format!("value of {attr} `{expr}`: {e}")))?;
            let cron_field = andes_cron::Field::from_name(attr).is_some();
            if cron_field && let Some(v) = ids.first().and_then(|id| self.state.job(*id)) {
                let mut whole = v.ad();
                whole.insert(attr.as_str(), e.clone());
                if let Some(Err(err)) = andes_cron::Schedule::from_ad(&whole) {
                    return Err(QueueError::Invalid(err.to_string()));
                }
            }
            for &id in ids {
                let Some(p) = self.state.jobs.get_mut(&id) else { continue };
                p.ad.insert(attr.as_str(), e.clone());
                if cron_field && p.status == JobStatus::Idle {
                    self.schedule_cron(id)?;
                }
                self.persist(id)?;
                self.event(id, EventKind::Edited(attr.clone()))?;
                report.changed.push(id);
                // An edit of a routed original reaches its copy (and the
                // router takes it on to the copy's target).
                if let Some(copy) = self.copy_of(id)
                    && let Some(p) = self.state.jobs.get_mut(&copy)
                {
                    p.ad.insert(attr.as_str(), e.clone());
                    self.persist(copy)?;
                    self.event(copy, EventKind::Edited(attr.clone()))?;
                }
            }
            return Ok(report);
        }
        // The reason given, else HTCondor's "via condor_hold (by user alice)".
        let why = |reason: &String, command: &str| {
            if reason.is_empty() {
                format!("via {command} (by user {})", actor.name)
            } else {
                reason.clone()
            }
        };
        for &id in ids {
            let Some(status) = self.state.jobs.get(&id).map(|p| p.status) else { continue };
            let r = match change {
                Change::Hold { reason } => {
                    let reason = why(reason, "condor_hold");
                    self.hold(id, HoldInfo { reason, code: hold_code::USER_REQUEST, subcode: 0 })
                }
                Change::Release { reason } => self.release(id, why(reason, "condor_release")),
                Change::Remove { reason } => self.remove(id, why(reason, "condor_rm")),
                Change::Vacate { reason } => {
                    self.vacate_asked(id, why(reason, "condor_vacate_job"))
                }
                Change::Edit { .. } => unreachable!("handled above"),
            }?;
            match r {
                None => report.changed.push(id),
                Some(why) => {
                    report.skipped.push((id, format!("{why} (status {})", status.letter())))
                }
            }
        }
        Ok(report)
    }

    fn set_status(&mut self, id: JobId, status: JobStatus) {
        if let Some(p) = self.state.jobs.get_mut(&id) {
            // Leaving a suspension, however (resumed, vacated, ended): its
            // time counts, as HTCondor's CumulativeSuspensionTime.
            if p.status == JobStatus::Suspended && status != JobStatus::Suspended {
                let since = match p.ad.eval_attr("LastSuspensionTime") {
                    Value::Int(t) if t > 0 => t,
                    _ => self.now,
                };
                let total = match p.ad.eval_attr("CumulativeSuspensionTime") {
                    Value::Int(t) => t,
                    _ => 0,
                };
                p.ad.insert_value("CumulativeSuspensionTime", total + (self.now - since).max(0));
                p.ad.insert_value("LastSuspensionTime", 0i64);
            }
            p.status = status;
            p.entered = self.now;
        }
    }

    fn hold(&mut self, id: JobId, info: HoldInfo) -> Result<Option<&'static str>, QueueError> {
        let Some(p) = self.state.jobs.get_mut(&id) else { return Ok(Some("not in the queue")) };
        if p.status == JobStatus::Held {
            return Ok(Some("already held"));
        }
        if p.status.is_terminal() {
            return Ok(Some("already leaving the queue"));
        }
        let holds = match p.ad.eval_attr("NumHolds") {
            Value::Int(n) => n,
            _ => 0,
        };
        p.ad.insert_value("NumHolds", holds + 1);
        p.ad.insert_value("HoldReason", info.reason.as_str());
        p.ad.insert_value("HoldReasonCode", info.code);
        p.ad.insert_value("HoldReasonSubCode", info.subcode);
        p.ad.remove("ReleaseReason");
        self.set_status(id, JobStatus::Held);
        self.persist(id)?;
        self.event(id, EventKind::Held(info))?;
        // The manual: an original that goes on hold takes its copy away,
        // unless it is the copy's own hold it mirrors.
        let copy_held = self
            .copy_of(id)
            .and_then(|c| self.state.jobs.get(&c))
            .is_some_and(|c| c.status == JobStatus::Held);
        if copy_held {
            if let Some(p) = self.state.jobs.get_mut(&id) {
                p.ad.insert_value(ROUTED_COPY_HELD, true);
            }
            self.persist(id)?;
        } else {
            self.remove_copy_of(id, "held")?;
        }
        self.mirror(id)?;
        Ok(None)
    }

    fn vacate_asked(
        &mut self,
        id: JobId,
        reason: String,
    ) -> Result<Option<&'static str>, QueueError> {
        let Some(p) = self.state.jobs.get(&id) else { return Ok(Some("not in the queue")) };
        if !matches!(p.status, JobStatus::Running | JobStatus::Suspended) {
            return Ok(Some("not running"));
        }
        self.event(id, EventKind::VacateAsked(reason))?;
        Ok(None)
    }

    fn release(&mut self, id: JobId, reason: String) -> Result<Option<&'static str>, QueueError> {
        let Some(p) = self.state.jobs.get_mut(&id) else { return Ok(Some("not in the queue")) };
        if p.status != JobStatus::Held {
            return Ok(Some("not held"));
        }
        for (from, to) in [
            ("HoldReason", "LastHoldReason"),
            ("HoldReasonCode", "LastHoldReasonCode"),
            ("HoldReasonSubCode", "LastHoldReasonSubCode"),
        ] {
            if let Some(e) = p.ad.remove(from) {
                p.ad.insert(to, e);
            }
        }
        p.ad.insert_value("ReleaseReason", reason.as_str());
        p.ad.remove(ROUTED_COPY_HELD);
        p.ad.remove(QUARANTINED);
        // An activation pending when it was held is no more: released, it is
        // matched afresh.
        if p.ad.remove(ACTIVATION_PENDING).is_some() {
            for a in [CLAIM_ID_ATTR, "StartdAddr", "RemoteHost"] {
                p.ad.remove(a);
            }
        }
        self.set_status(id, JobStatus::Idle);
        self.schedule_cron(id)?;
        self.persist(id)?;
        self.event(id, EventKind::Released(reason.clone()))?;
        // An original that mirrors its held copy releases it, and a
        // released copy its original.
        if let Some(copy) = self.copy_of(id) {
            self.release(copy, reason)?;
        }
        self.mirror(id)?;
        Ok(None)
    }

    fn remove(&mut self, id: JobId, reason: String) -> Result<Option<&'static str>, QueueError> {
        let Some(p) = self.state.jobs.get_mut(&id) else { return Ok(Some("not in the queue")) };
        if p.status == JobStatus::Removed {
            return Ok(Some("already being removed"));
        }
        p.ad.insert_value("RemoveReason", reason.as_str());
        // A routed original has no shadow: it leaves at once.
        let active = p.status.is_active() && !p.ad.contains(ROUTED_TO);
        self.set_status(id, JobStatus::Removed);
        self.event(id, EventKind::Removed(reason))?;
        self.remove_copy_of(id, "removed")?;
        self.copy_removed(id)?;
        if active {
            // Its shadow reports the end (job_exited), then it leaves the queue.
            self.persist(id)?;
        } else {
            self.leave(id)?;
        }
        Ok(None)
    }

    fn started(&mut self, id: JobId) -> Result<(), QueueError> {
        let now = self.now;
        let Some(p) = self.state.jobs.get_mut(&id) else {
            return Err(QueueError::NotFound(format!("job {id} is not in the queue")));
        };
        if p.status != JobStatus::Idle {
            return Err(QueueError::Invalid(format!(
                "job {id} cannot start: status {}",
                p.status.letter()
            )));
        }
        let starts = match p.ad.eval_attr("NumJobStarts") {
            Value::Int(n) => n,
            _ => 0,
        };
        p.ad.insert_value("NumJobStarts", starts + 1);
        p.ad.insert_value("NumShadowStarts", starts + 1);
        if !p.ad.contains("JobStartDate") {
            p.ad.insert_value("JobStartDate", now);
        }
        p.ad.insert_value("JobCurrentStartDate", now);
        self.set_status(id, JobStatus::Running);
        self.persist(id)?;
        self.event(id, EventKind::Executing)?;
        self.mirror(id)
    }

    fn pool_op(&mut self, id: JobId, op: &PoolOp) -> Result<(), QueueError> {
        let now = self.now;
        let Some(p) = self.state.jobs.get_mut(&id) else { return Ok(()) };
        let int = |ad: &ClassAd, n: &str| match ad.eval_attr(n) {
            Value::Int(v) => v,
            _ => 0,
        };
        match op {
            PoolOp::Matched => {
                let n = int(&p.ad, "NumJobMatches");
                p.ad.insert_value("NumJobMatches", n + 1);
                p.ad.insert_value("LastMatchTime", now);
            }
            PoolOp::Rejected(reason) => {
                if p.status != JobStatus::Idle {
                    return Ok(());
                }
                p.ad.insert_value("LastRejMatchReason", reason.as_str());
                p.ad.insert_value("LastRejMatchTime", now);
            }
            PoolOp::Activating(attrs) => {
                if p.status != JobStatus::Idle {
                    return Err(QueueError::Invalid(format!(
                        "job {id} cannot start: status {}",
                        p.status.letter()
                    )));
                }
                update_from_host(&mut p.ad, attrs);
                p.ad.insert_value(ACTIVATION_PENDING, true);
            }
            PoolOp::NotStarted(claim) => {
                let same = matches!(p.ad.eval_attr(CLAIM_ID_ATTR), Value::Str(c) if *c == **claim);
                // Idle, or held or removed meanwhile: the claim is not the job's.
                let running = p.status.is_active();
                if !running && same && p.ad.remove(ACTIVATION_PENDING).is_some() {
                    for a in [CLAIM_ID_ATTR, "StartdAddr", "RemoteHost"] {
                        p.ad.remove(a);
                    }
                }
            }
            PoolOp::ActivationFailed(claim, reason) => {
                let same = matches!(p.ad.eval_attr(CLAIM_ID_ATTR), Value::Str(c) if *c == **claim);
                if p.status.is_active() || !same {
                    return Ok(());
                }
                p.ad.remove(ACTIVATION_PENDING);
                for a in [CLAIM_ID_ATTR, "StartdAddr", "RemoteHost"] {
                    p.ad.remove(a);
                }
                let n = int(&p.ad, "NumShadowExceptions") + 1;
                p.ad.insert_value("NumShadowExceptions", n);
                p.ad.insert_value("LastShadowException", reason.as_str());
                if n >= MAX_ACTIVATION_FAILURES && p.status == JobStatus::Idle {
                    let info = HoldInfo {
                        reason: format!(
                            "the job could not be started on {n} matches in a row; the last \
                             time: {reason}"
                        ),
                        code: hold_code::TRANSFER_INPUT_ERROR,
                        subcode: 0,
                    };
                    return self.hold(id, info).map(|_| ());
                }
            }
            PoolOp::Started(attrs) => {
                if p.status != JobStatus::Idle {
                    return Err(QueueError::Invalid(format!(
                        "job {id} cannot start: status {}",
                        p.status.letter()
                    )));
                }
                update_from_host(&mut p.ad, attrs);
                p.ad.remove(ACTIVATION_PENDING);
                p.ad.remove("NumShadowExceptions");
                return self.started(id);
            }
            PoolOp::Update(attrs) => {
                if !p.status.is_active() {
                    return Ok(());
                }
                update_from_host(&mut p.ad, attrs);
                // The host reports `JobDeferredUntil = undefined` once the
                // job's wait for its DeferralTime is over.
                if matches!(attrs.get("JobDeferredUntil"), Some(Expr::Lit(Value::Undefined))) {
                    p.ad.remove("JobDeferredUntil");
                }
            }
            PoolOp::Grid(attrs) => {
                p.ad.update(attrs);
                // What the copy uses at its target shows on its original.
                if let Some(original) = self.original_of(id)
                    && let Some(o) = self.state.jobs.get_mut(&original)
                {
                    let mut changed = false;
                    for a in MIRRORED_USAGE {
                        if let Some(e) = attrs.get(a) {
                            o.ad.insert(*a, e.clone());
                            changed = true;
                        }
                    }
                    if changed {
                        self.persist(original)?;
                    }
                }
            }
            PoolOp::Suspension(on) => match (p.status, *on) {
                (JobStatus::Running, true) => {
                    let n = int(&p.ad, "TotalSuspensions").max(0);
                    p.ad.insert_value("TotalSuspensions", n + 1);
                    p.ad.insert_value("LastSuspensionTime", now);
                    self.set_status(id, JobStatus::Suspended);
                    self.event(id, EventKind::Suspended)?;
                    self.mirror(id)?;
                }
                (JobStatus::Suspended, false) => {
                    self.set_status(id, JobStatus::Running);
                    self.event(id, EventKind::Unsuspended)?;
                    self.mirror(id)?;
                }
                _ => return Ok(()),
            },
            PoolOp::Reconnected => {
                let n = int(&p.ad, "NumJobReconnects");
                p.ad.insert_value("NumJobReconnects", n + 1);
                p.ad.insert_value("JobLastReconnectTime", now);
            }
            PoolOp::Evicted(attrs) => {
                let was = p.status;
                update_from_host(&mut p.ad, attrs);
                if was.is_active() || was == JobStatus::Removed {
                    add_run_time(&mut p.ad, attrs, now);
                }
                p.ad.remove(ACTIVATION_PENDING);
                if let Some(host) = p.ad.remove("RemoteHost") {
                    p.ad.insert("LastRemoteHost", host);
                }
                p.ad.remove(CLAIM_ID_ATTR);
                p.ad.remove("StartdAddr");
                p.ad.insert_value("LastVacateTime", now);
                match was {
                    JobStatus::Running => {
                        self.set_status(id, JobStatus::Idle);
                        if let Some(p) = self.state.jobs.get_mut(&id) {
                            p.ad.remove("JobDeferredUntil");
                        }
                        self.schedule_cron(id)?;
                        self.persist(id)?;
                        let checkpointed = attrs.contains("LastCkptTime");
                        self.event(id, EventKind::Evicted { checkpointed })?;
                        self.mirror(id)?;
                    }
                    JobStatus::Removed => return self.leave(id),
                    _ => self.persist(id)?,
                }
                return Ok(());
            }
        }
        self.persist(id)
    }

    fn exited(&mut self, id: JobId, ending: &ClassAd) -> Result<(), QueueError> {
        let Some(p) = self.state.jobs.get_mut(&id) else {
            return Err(QueueError::NotFound(format!("job {id} is not in the queue")));
        };
        let was = p.status;
        if !was.is_active() && was != JobStatus::Removed {
            return Err(QueueError::Invalid(format!(
                "job {id} is not running (status {})",
                was.letter()
            )));
        }
        update_from_host(&mut p.ad, ending);
        add_run_time(&mut p.ad, ending, self.now);
        p.ad.remove(CLAIM_ID_ATTR);
        p.ad.remove("JobDeferredUntil");
        if let Some(host) = p.ad.remove("RemoteHost") {
            p.ad.insert("LastRemoteHost", host);
        }
        if was == JobStatus::Removed {
            return self.leave(id);
        }
        if let Some(info) = HoldInfo::from_ad(ending, "held by the execute host") {
            // The job is no longer active: hold from Idle's point of view.
            self.set_status(id, JobStatus::Idle);
            self.hold(id, info)?;
            return Ok(());
        }
        // The job ran to its end (HTCondor's shadow counts it before the exit
        // policy reads it: `max_retries` is `NumJobCompletions > JobMaxRetries`).
        if matches!(ending.eval_attr("ExitCode"), Value::Int(_))
            || matches!(ending.eval_attr("ExitBySignal"), Value::Bool(true))
        {
            let n = match p.ad.eval_attr("NumJobCompletions") {
                Value::Int(n) => n.max(0) + 1,
                _ => 1,
            };
            p.ad.insert_value("NumJobCompletions", n);
        }
        let ad = self.state.job(id).expect("present").ad();
        let decision = {
            let _evaluating = self.journal.enter(id, "exit policy");
            quarantine::fault_point(&ad);
            policy::on_exit(&ad, self.now)
        };
        match decision {
            ExitDecision::Complete => {
                self.copy_completed(id)?;
                self.complete(id)
            }
            ExitDecision::Hold(info) => {
                self.event(id, EventKind::Terminated)?;
                self.set_status(id, JobStatus::Idle);
                self.hold(id, info).map(|_| ())
            }
            ExitDecision::Requeue => {
                // HTCondor's shadow logs an eviction, "Job terminated and was
                // requeued" with how it ended, never a termination.
                self.set_status(id, JobStatus::Idle);
                if self.is_cron(id) {
                    self.note_skipped(id)?;
                    self.schedule_cron(id)?;
                }
                // A routed copy's run at its target is over: the router
                // submits it there again, as a new run.
                if let Some(p) = self.state.jobs.get_mut(&id)
                    && p.ad.remove(crate::router::service::GRID_JOB_ID).is_some()
                {
                    p.ad.remove(crate::router::service::GRID_JOB_STATUS);
                }
                self.persist(id)?;
                self.mirror(id)?;
                self.event(id, EventKind::Requeued)?;
                Ok(())
            }
        }
    }

    fn periodic(&mut self) -> Result<ChangeReport, QueueError> {
        let mut fired = Vec::new();
        let mut last_cluster = None;
        let mut cluster_has = false;
        for v in self.state.jobs() {
            if last_cluster != Some(v.id.cluster) {
                last_cluster = Some(v.id.cluster);
                cluster_has = policy::has_periodic(&v.cluster.ad);
            }
            if !cluster_has && !policy::has_periodic(&v.proc.ad) {
                continue;
            }
            // A routed original evaluates no periodic expressions; its copy
            // does. A quarantined job evaluates none until released.
            if v.proc.ad.contains(ROUTED_TO) || v.proc.ad.contains(QUARANTINED) {
                continue;
            }
            let ad = v.ad();
            let _evaluating = self.journal.enter(v.id, "periodic policy");
            quarantine::fault_point(&ad);
            if let Some(a) = policy::periodic(&ad, v.proc.status, self.now) {
                fired.push((v.id, a));
            }
        }
        // Completed jobs kept by LeaveJobInQueue leave once it is false.
        let done: Vec<JobId> = self
            .state
            .jobs()
            .filter(|v| v.proc.status == JobStatus::Completed)
            .map(|v| v.id)
            .collect();
        for id in done {
            if !self.leave_in_queue(id) {
                self.leave(id)?;
            }
        }
        let mut report = ChangeReport::default();
        for (id, action) in fired {
            let r = match action {
                PeriodicAction::Hold(info) => self.hold(id, info)?,
                PeriodicAction::Release(reason) => self.release(id, reason)?,
                PeriodicAction::Remove(reason) => self.remove(id, reason)?,
            };
            match r {
                None => report.changed.push(id),
                Some(why) => report.skipped.push((id, why.to_string())),
            }
        }
        Ok(report)
    }

    /// The job router's routing of an idle job: its copy becomes a new
    /// cluster of the same owner.
    fn route(&mut self, original: JobId, copy: &ClassAd) -> Result<u32, QueueError> {
        let Some(v) = self.state.job(original) else {
            return Err(QueueError::NotFound(format!("job {original} is not in the queue")));
        };
        if v.proc.status != JobStatus::Idle {
            return Err(QueueError::Invalid(format!("job {original} is not idle")));
        }
        let ad = v.ad();
        if ad.contains(ROUTED_TO) || ad.contains(ROUTED_FROM) {
            return Err(QueueError::Invalid(format!(
                "job {original} is already routed or is a routed copy"
            )));
        }
        let owner = v.owner().to_string();
        let route = match copy.eval_attr("RouteName") {
            Value::Str(s) => s.to_string(),
            _ => String::new(),
        };
        let mut copy = copy.clone();
        copy.insert_value(ROUTED_FROM, original.to_string());
        let submit = Submit { cluster: None, cluster_ad: copy, procs: vec![ClassAd::new()] };
        let cluster = self.submit(&Actor::user(&owner), &submit, Origin::Router)?;
        let to = JobId::new(cluster, 0);
        if let Some(p) = self.state.jobs.get_mut(&original) {
            p.ad.insert_value(ROUTED_TO, to.to_string());
            p.ad.insert_value("RouteName", route.as_str());
            p.ad.insert_value("RoutedBy", "andes router");
        }
        self.persist(original)?;
        self.event(
            original,
            EventKind::Note(format!("job router: routed to job {to} (route {route})")),
        )?;
        Ok(cluster)
    }

    /// The job a routed copy was routed from, if `id` is one.
    fn original_of(&self, id: JobId) -> Option<JobId> {
        let v = self.state.job(id)?;
        let text = match v.proc.ad.get(ROUTED_FROM).or_else(|| v.cluster.ad.get(ROUTED_FROM))? {
            Expr::Lit(Value::Str(s)) => s.to_string(),
            _ => return None,
        };
        match text.parse() {
            Ok(crate::job::JobSelector::Job(j)) => Some(j),
            _ => None,
        }
    }

    /// The routed copy of `id`, if it is routed.
    fn copy_of(&self, id: JobId) -> Option<JobId> {
        match self.state.jobs.get(&id)?.ad.get(ROUTED_TO)? {
            Expr::Lit(Value::Str(s)) => match s.parse() {
                Ok(crate::job::JobSelector::Job(j)) => Some(j),
                _ => None,
            },
            _ => None,
        }
    }

    /// A routed copy's status changed: its original mirrors Idle, Running,
    /// Suspended and Held (with the copy's hold reason); a released copy
    /// releases it.
    fn mirror(&mut self, copy: JobId) -> Result<(), QueueError> {
        let Some(original) = self.original_of(copy) else { return Ok(()) };
        let Some(c) = self.state.jobs.get(&copy) else { return Ok(()) };
        let status = c.status;
        let mirrored = match status {
            JobStatus::Idle => JobStatus::Idle,
            JobStatus::Running | JobStatus::TransferringOutput => JobStatus::Running,
            JobStatus::Suspended => JobStatus::Suspended,
            JobStatus::Held => {
                let info = HoldInfo::from_ad(&c.ad, "").unwrap_or(HoldInfo {
                    reason: String::new(),
                    code: 0,
                    subcode: 0,
                });
                return self.hold(original, info).map(|_| ());
            }
            _ => return Ok(()),
        };
        let Some(p) = self.state.jobs.get(&original) else { return Ok(()) };
        if p.status == JobStatus::Held && status == JobStatus::Idle {
            return self
                .release(original, format!("its routed copy {copy} was released"))
                .map(|_| ());
        }
        if !matches!(p.status, JobStatus::Idle | JobStatus::Running | JobStatus::Suspended)
            || p.status == mirrored
        {
            return Ok(());
        }
        let was = p.status;
        self.set_status(original, mirrored);
        self.persist(original)?;
        match (was, mirrored) {
            (JobStatus::Suspended, JobStatus::Running) => {
                self.event(original, EventKind::Unsuspended)?
            }
            (_, JobStatus::Running) => self.event(original, EventKind::Executing)?,
            (_, JobStatus::Suspended) => self.event(original, EventKind::Suspended)?,
            _ => {}
        }
        Ok(())
    }

    /// A routed copy completed: its original takes its final status and
    /// leaves the queue.
    fn copy_completed(&mut self, copy: JobId) -> Result<(), QueueError> {
        let Some(original) = self.original_of(copy) else { return Ok(()) };
        let Some(copy_ad) = self.state.job(copy).map(|v| v.ad()) else { return Ok(()) };
        let Some(p) = self.state.jobs.get_mut(&original) else { return Ok(()) };
        for a in FINAL_ATTRS {
            if let Some(e) = copy_ad.get(a) {
                p.ad.insert(a, e.clone());
            }
        }
        self.complete(original)
    }

    /// The job completed: CompletionDate, the event, its cluster's count,
    /// and it leaves the queue.
    fn complete(&mut self, id: JobId) -> Result<(), QueueError> {
        if let Some(p) = self.state.jobs.get_mut(&id) {
            p.ad.insert_value("CompletionDate", self.now);
        }
        self.set_status(id, JobStatus::Completed);
        self.event(id, EventKind::Terminated)?;
        if let Some(c) = self.state.clusters.get_mut(&id.cluster) {
            c.completed += 1;
        }
        self.tx
            .prepare_cached("UPDATE clusters SET completed = completed + 1 WHERE id = ?1")?
            .execute([id.cluster as i64])?;
        if self.leave_in_queue(id) {
            // HTCondor's LeaveJobInQueue: a spooled job waits, completed, for
            // its owner to fetch its output.
            return self.persist(id);
        }
        self.leave(id)
    }

    /// True when the job's `LeaveJobInQueue` is true now.
    fn leave_in_queue(&self, id: JobId) -> bool {
        let Some(v) = self.state.job(id) else { return false };
        if v.proc.ad.get("LeaveJobInQueue").is_none()
            && v.cluster.ad.get("LeaveJobInQueue").is_none()
        {
            return false;
        }
        if v.proc.ad.contains(QUARANTINED) {
            return false;
        }
        let ad = v.ad();
        let _evaluating = self.journal.enter(id, "LeaveJobInQueue");
        quarantine::fault_point(&ad);
        let mut ev =
            Evaluator::with_options(EvalOptions { now: Some(self.now), ..Default::default() });
        is_true(&ev.eval_attr(&ad, None, "LeaveJobInQueue"))
    }

    /// Holds the job the schedd died evaluating, marks it so that none of
    /// its expressions is evaluated again until it is released, and says why.
    fn quarantine(&mut self, c: &quarantine::Crashed) -> Result<(), QueueError> {
        let Some(p) = self.state.jobs.get_mut(&c.job) else { return Ok(()) };
        p.ad.insert_value(QUARANTINED, c.what.as_str());
        let reason = format!(
            "the schedd stopped while evaluating this job's {}; it is held, and none of its \
             expressions is evaluated, so that it cannot stop the schedd again (release it \
             once they are fixed)",
            c.what
        );
        let info = HoldInfo { reason, code: hold_code::JOB_POLICY_UNDEFINED, subcode: 0 };
        if self.hold(c.job, info.clone())?.is_none() {
            return Ok(());
        }
        // Already held: it stays so, and its reason now says why it must
        // stay until someone releases it.
        if let Some(p) = self.state.jobs.get_mut(&c.job)
            && p.status == JobStatus::Held
        {
            p.ad.insert_value("HoldReason", info.reason.as_str());
            p.ad.insert_value("HoldReasonCode", info.code);
            p.ad.insert_value("HoldReasonSubCode", info.subcode);
            self.event(c.job, EventKind::Note(info.reason))?;
        }
        self.persist(c.job)
    }

    /// A routed copy was removed: its original, unless held or removed
    /// itself, is idle again and may be matched or routed anew.
    fn copy_removed(&mut self, copy: JobId) -> Result<(), QueueError> {
        let Some(original) = self.original_of(copy) else { return Ok(()) };
        let Some(p) = self.state.jobs.get_mut(&original) else { return Ok(()) };
        if let Some(e) = p.ad.remove(ROUTED_TO) {
            p.ad.insert("LastRoutedToJobId", e);
        }
        // An original that only mirrored its copy's hold is not held itself:
        // released, it is idle again.
        if p.status == JobStatus::Held && p.ad.contains(ROUTED_COPY_HELD) {
            let why = format!("job router: routed copy {copy} was removed");
            return self.release(original, why).map(|_| ());
        }
        let back = matches!(p.status, JobStatus::Idle | JobStatus::Running | JobStatus::Suspended);
        if back {
            self.set_status(original, JobStatus::Idle);
        }
        self.persist(original)?;
        if back {
            self.event(
                original,
                EventKind::Note(format!(
                    "job router: routed copy {copy} was removed; the job is idle again"
                )),
            )?;
        }
        Ok(())
    }

    /// The original was held or removed: its routed copy is removed.
    fn remove_copy_of(&mut self, original: JobId, why: &str) -> Result<(), QueueError> {
        if let Some(copy) = self.copy_of(original) {
            self.remove(copy, format!("the job it was routed from ({original}) was {why}"))?;
        }
        Ok(())
    }

    /// True when the job has a cron schedule.
    fn is_cron(&self, id: JobId) -> bool {
        self.state.job(id).is_some_and(|v| {
            andes_cron::Field::ALL
                .iter()
                .any(|f| v.proc.ad.contains(f.attribute()) || v.cluster.ad.contains(f.attribute()))
        })
    }

    fn int_attr(&self, id: JobId, name: &str) -> i64 {
        match self.state.job(id).map(|v| v.ad().eval_attr(name)) {
            Some(Value::Int(n)) => n,
            _ => 0,
        }
    }

    /// Sets a cron job's DeferralTime to its next run after now. A schedule
    /// that became invalid (edited) holds the job.
    fn schedule_cron(&mut self, id: JobId) -> Result<(), QueueError> {
        if !self.is_cron(id) {
            return Ok(());
        }
        let Some(ad) = self.state.job(id).map(|v| v.ad()) else { return Ok(()) };
        match deferral::next_run(&ad, self.now, &self.config.cron_time_zone) {
            Some(Ok(t)) => {
                if let Some(p) = self.state.jobs.get_mut(&id) {
                    p.ad.insert_value("DeferralTime", t);
                }
                Ok(())
            }
            Some(Err(e)) => {
                let info = HoldInfo {
                    reason: e.to_string(),
                    code: hold_code::INVALID_CRON_SETTINGS,
                    subcode: 0,
                };
                self.hold(id, info).map(|_| ())
            }
            None => Ok(()),
        }
    }

    /// Notes runs skipped because the previous run of a cron job was still
    /// running when they came due (never two instances at once).
    fn note_skipped(&mut self, id: JobId) -> Result<(), QueueError> {
        let Some(ad) = self.state.job(id).map(|v| v.ad()) else { return Ok(()) };
        let Value::Int(last) = ad.eval_attr("DeferralTime") else { return Ok(()) };
        let n = deferral::runs_between(&ad, last, self.now, &self.config.cron_time_zone);
        if n == 0 {
            return Ok(());
        }
        let total = self.int_attr(id, "CronSkippedRuns") + n as i64;
        if let Some(p) = self.state.jobs.get_mut(&id) {
            p.ad.insert_value("CronSkippedRuns", total);
        }
        self.event(
            id,
            EventKind::Note(format!(
                "cron: {n} scheduled run(s) skipped: the run of {} was still running",
                fmt_time(last)
            )),
        )
    }

    /// An idle deferred job whose window closed before it was matched: a
    /// cron job counts the miss and takes its next run; any other is held.
    fn missed(&mut self, id: JobId) -> Result<(), QueueError> {
        let Some(v) = self.state.job(id) else { return Ok(()) };
        if v.proc.status != JobStatus::Idle {
            return Ok(());
        }
        let ad = v.ad();
        let Some(Ok(d)) = Deferral::of(&ad, self.now, self.config.schedd_interval) else {
            return Ok(());
        };
        let Readiness::Missed { late } = d.readiness(self.now) else { return Ok(()) };
        if self.is_cron(id) {
            let extra = deferral::runs_between(
                &ad,
                d.time,
                self.now - d.window,
                &self.config.cron_time_zone,
            );
            let n = 1 + extra as i64;
            let total = self.int_attr(id, "CronMissedRuns") + n;
            if let Some(p) = self.state.jobs.get_mut(&id) {
                p.ad.insert_value("CronMissedRuns", total);
            }
            self.event(
                id,
                EventKind::Note(format!(
                    "cron: {n} run(s) missed: no match before the run of {} closed \
                     (DeferralWindow {} s)",
                    fmt_time(d.time),
                    d.window
                )),
            )?;
            self.schedule_cron(id)?;
            return self.persist(id);
        }
        let info = HoldInfo {
            reason: format!(
                "Job missed its deferral time of {} by {late} seconds without being matched \
                 (DeferralWindow {} seconds)",
                fmt_time(d.time),
                d.window
            ),
            code: hold_code::MISSED_DEFERRED_EXECUTION_TIME,
            subcode: 0,
        };
        self.hold(id, info).map(|_| ())
    }

    /// Writes the job's own part to the database.
    fn persist(&mut self, id: JobId) -> Result<(), QueueError> {
        let Some(p) = self.state.jobs.get(&id) else { return Ok(()) };
        self.tx
            .prepare_cached(
                "UPDATE jobs SET status = ?3, entered = ?4, ad = ?5 WHERE cluster = ?1 AND proc = ?2",
            )?
            .execute(params![
                id.cluster as i64,
                id.proc as i64,
                p.status.code(),
                p.entered,
                p.ad.to_string()
            ])?;
        Ok(())
    }

    /// Moves a job from the queue to history; drops its cluster with its last job.
    fn leave(&mut self, id: JobId) -> Result<(), QueueError> {
        let Some(v) = self.state.job(id) else { return Ok(()) };
        let ad = v.ad();
        let owner = v.owner().to_string();
        let uploader = uploader_of(&v.cluster.ad);
        let digests = proc_uploads(&v.cluster.ad, &v.proc.ad);
        self.batch.left.push(id);
        self.tx
            .prepare_cached(
                "INSERT INTO history (cluster, proc, owner, left_queue, ad) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![id.cluster as i64, id.proc as i64, owner, self.now, ad.to_string()])?;
        self.tx
            .prepare_cached("DELETE FROM jobs WHERE cluster = ?1 AND proc = ?2")?
            .execute(params![id.cluster as i64, id.proc as i64])?;
        self.state.jobs.remove(&id);
        if let Some(n) = self.state.owner_jobs.get_mut(owner.as_str()) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.state.owner_jobs.remove(owner.as_str());
            }
        }
        if self.state.cluster_jobs(id.cluster).next().is_none() {
            self.state.clusters.remove(&id.cluster);
            self.tx.execute("DELETE FROM clusters WHERE id = ?1", [id.cluster as i64])?;
        }
        self.release_uploads(&uploader, digests)
    }

    /// A job that named `digests` left: those no other job of `uploader`
    /// names are no longer theirs, at once (not after the grace an upload
    /// waiting for its submit has), and bytes nobody keeps go.
    fn release_uploads(&mut self, uploader: &str, digests: Vec<String>) -> Result<(), QueueError> {
        if digests.is_empty() {
            return Ok(());
        }
        let mut unused = Vec::new();
        for d in digests {
            let key = (uploader.to_string(), d);
            if let Some(n) = self.state.upload_uses.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.state.upload_uses.remove(&key);
                    unused.push(key.1);
                }
            }
        }
        for d in unused {
            self.tx
                .prepare_cached("DELETE FROM upload_refs WHERE owner = ?1 AND digest = ?2")?
                .execute([uploader, d.as_str()])?;
            let kept: bool = self
                .tx
                .prepare_cached("SELECT 1 FROM upload_refs WHERE digest = ?1")?
                .exists([&d])?;
            if !kept && self.tx.execute("DELETE FROM modules WHERE digest = ?1", [&d])? > 0 {
                self.batch.gone_uploads.push(d);
            }
        }
        Ok(())
    }
}

/// Unix seconds as an RFC 3339 UTC time (hold reasons and notes).
fn fmt_time(t: i64) -> String {
    match jiff::Timestamp::from_second(t) {
        Ok(ts) => format!("{ts:.0}"),
        Err(_) => t.to_string(),
    }
}

/// True when a submitted `JobStatus` asks for the job to start held (`hold = true`).
fn submitted_held(e: Option<&Expr>) -> bool {
    matches!(e.and_then(|e| e.as_literal()), Some(Value::Int(5)))
}

fn hold_info_of(ad: &ClassAd) -> HoldInfo {
    HoldInfo {
        reason: match ad.eval_attr("HoldReason") {
            Value::Str(s) => s.to_string(),
            _ => String::new(),
        },
        code: match ad.eval_attr("HoldReasonCode") {
            Value::Int(c) => c,
            _ => 0,
        },
        subcode: match ad.eval_attr("HoldReasonSubCode") {
            Value::Int(c) => c,
            _ => 0,
        },
    }
}

#[cfg(test)]
mod writer_tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_request_fails_alone_and_the_writer_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let q = Queue::open(QueueConfig::new(dir.path().join("q.db"), "test")).unwrap();
        let alice = Actor::user("alice");
        let submit = |n: i64| Submit {
            cluster: None,
            cluster_ad: classad::parse_ad(&format!("[Cmd = \"job.wasm\"; N = {n}]")).unwrap(),
            procs: vec![ClassAd::new()],
        };
        // One batch: a submit, a panic, another submit.
        let (a, bad, b) = tokio::join!(
            q.submit(&alice, submit(1), 1),
            q.call(Op::Panic, 1),
            q.submit(&alice, submit(2), 1),
        );
        let err = bad.err().unwrap().to_string();
        assert!(err.contains("could not apply") && err.contains("a test's panic"), "{err}");
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_ne!(a, b);
        // Later writes still work, and every acknowledged job is there.
        let c = q.submit(&alice, submit(3), 2).await.unwrap();
        assert_eq!(q.read().len(), 3);
        drop(q);
        let q = Queue::open(QueueConfig::new(dir.path().join("q.db"), "test")).unwrap();
        let ids: Vec<u32> = q.read().jobs().map(|v| v.id.cluster).collect();
        assert_eq!(ids.len(), 3);
        for id in [a, b, c] {
            assert!(ids.contains(&id), "{ids:?}");
        }
    }
}
