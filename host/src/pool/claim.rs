//! A claim as the daemon keeps it: the job on it and its report for the
//! shadow's long poll, its lease, the snapshot it carries, and the requests
//! and replies of the pool's routes.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use andes_protocol::ApiError;
use andes_protocol::pool::{
    self, ActivateRequest, AliveReply, AliveRequest, ClaimReply, ClaimRequest, EditRequest,
    FileData, JobEnd, JobReport, MatchNotice, NEED_MODULE, RunState, SnapshotData, WithdrawRequest,
};
use andes_startd::SlotId;
use axum::http::StatusCode;
use classad::{ClassAd, Value};
use tokio::sync::watch;

use andes_starter::control::{Clock, Control};

/// The sandbox names of the job's streams: one contract, in `andes-protocol`.
pub use andes_protocol::pool::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};

/// A job on a claim, as the daemon last saw it.
#[derive(Clone, Debug)]
pub struct Report {
    /// Bumped on every change.
    pub version: u64,
    /// What the job is doing.
    pub state: RunState,
    /// GlobalJobId.
    pub job: Option<String>,
    /// The running job's control (usage is read from it at answer time).
    pub ctl: Option<Arc<Control>>,
    /// The ending, when exited.
    pub ending: Option<ClassAd>,
    /// Output files, when exited.
    pub outputs: Arc<Vec<FileData>>,
    /// Evicted rather than ended.
    pub evicted: bool,
    /// False once the claim is over.
    pub claim_alive: bool,
    /// When the job started (Unix seconds).
    pub started: i64,
    /// The job has a DeferralTime: `Some(t)` while it waits for `t`,
    /// `None` once it began (reported as `JobDeferredUntil = undefined`).
    pub deferral: Option<Option<i64>>,
    /// The job's last saved state (cooperative checkpoint) and its seq.
    pub saved: Option<(u64, Arc<[u8]>)>,
    /// The job's latest transparent checkpoint.
    pub snapshot: Option<Arc<HostSnapshot>>,
    /// The file contents each snapshot of this run names (and the snapshot
    /// the job resumed from), by snapshot hash: what a shadow that keeps one
    /// of them already has.
    pub known: Arc<HashMap<String, Arc<HashSet<String>>>>,
    /// The hash of the snapshot the job resumed from (the shadow keeps it).
    pub restored: Option<String>,
    /// How each job of the current activation ended, in order.
    pub ended: Arc<Vec<JobEnd>>,
    /// Jobs of the activation still queued on the claim.
    pub queued: u32,
    /// The sandboxes of this activation's jobs that hold output files too big
    /// for a report ([`pool::STREAM_OVER`]), by GlobalJobId: the shadow fetches
    /// each with `POST /v1/host/output`. Dropped (and removed) with the report
    /// at the claim's next activation or when its final report goes.
    pub kept: Arc<HashMap<String, Arc<KeptOutputs>>>,
}

/// An ended job's sandbox kept for the output files its report names as
/// streamed (`EXECUTE/out_<slot>_<n>`): removed when the last report naming it
/// is gone.
#[derive(Debug)]
pub struct KeptOutputs {
    /// The sandbox, renamed.
    pub dir: PathBuf,
    /// Each streamed output's name → its path in `dir`.
    pub files: HashMap<String, String>,
}

impl Drop for KeptOutputs {
    fn drop(&mut self) {
        let r = andes_beneath::Beneath::open(&self.dir)
            .and_then(|b| b.clear())
            .and_then(|()| std::fs::remove_dir(&self.dir));
        if let Err(e) = r
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("cannot remove {}: {e}", self.dir.display());
        }
    }
}

/// A transparent checkpoint the host took, kept for the shadow.
#[derive(Debug)]
pub struct HostSnapshot {
    /// Its content hash (hex).
    pub hash: String,
    /// The signed snapshot.
    pub bytes: Arc<Vec<u8>>,
    /// The BLAKE3 of every content it names (files and memory packs).
    pub files: Arc<HashSet<String>>,
    /// Where those contents are (kept while this snapshot is).
    pub blobs: Arc<BlobDir>,
    /// The job stopped after it (a vacate).
    pub stopping: bool,
}

/// A run's directory of file contents (`EXECUTE/ckpt_<slot>_<n>`): removed
/// when the last snapshot naming it, and the run itself, are gone.
#[derive(Debug)]
pub struct BlobDir {
    /// The store in it.
    pub store: andes_snapshot::BlobStore,
    dir: PathBuf,
}

impl BlobDir {
    /// Creates `dir` (empty) and a store in it.
    pub fn create(dir: PathBuf) -> std::io::Result<BlobDir> {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        let store = andes_snapshot::BlobStore::open(&dir, false)?;
        Ok(BlobDir { store, dir })
    }
}

impl Drop for BlobDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The wire form of `snap` for a shadow that keeps the snapshot `have`:
/// with the file contents that one does not name (all, when the host does
/// not know it). `None` when `have` is `snap` itself, or a content cannot
/// be read (logged; the shadow keeps what it has).
pub(crate) fn snapshot_for(
    snap: &HostSnapshot,
    known: &HashMap<String, Arc<HashSet<String>>>,
    have: Option<&str>,
) -> Option<SnapshotData> {
    if have == Some(snap.hash.as_str()) {
        return None;
    }
    let held = have.and_then(|h| known.get(h));
    let mut blobs = Vec::new();
    let mut names: Vec<&String> =
        snap.files.iter().filter(|f| held.is_none_or(|h| !h.contains(*f))).collect();
    names.sort();
    // Small contents ride in the report (within its budget); the rest, and a
    // big snapshot's bytes, the shadow fetches as streams (`/v1/host/snapshot`).
    let mut carried = 0u64;
    for name in names {
        let size = match std::fs::metadata(snap.blobs.store.path(name)) {
            Ok(m) => m.len(),
            Err(e) => {
                tracing::error!("checkpoint {}: file content {name}: {e}", snap.hash);
                return None;
            }
        };
        if size > pool::STREAM_OVER || carried + size > pool::INLINE_BUDGET {
            blobs.push(FileData::streamed(name.clone(), size, None));
            continue;
        }
        match snap.blobs.store.read(name) {
            Ok(data) => {
                carried += data.len() as u64;
                blobs.push(FileData::inline(name.clone(), data));
            }
            Err(e) => {
                tracing::error!("checkpoint {}: file content {name}: {e}", snap.hash);
                return None;
            }
        }
    }
    let size = snap.bytes.len() as u64;
    let big = size > pool::STREAM_OVER;
    Some(SnapshotData {
        hash: snap.hash.clone(),
        bytes: if big { Vec::new() } else { snap.bytes.to_vec() },
        streamed: big.then_some(pool::Streamed { size, sha256: None }),
        blobs,
        stopping: snap.stopping,
    })
}

impl Report {
    /// True when nothing more will happen on the claim for its shadow: its
    /// last job ended and none is queued behind it, or the claim is over.
    pub(crate) fn all_ended(&self) -> bool {
        (self.state == RunState::Exited && self.queued == 0) || !self.claim_alive
    }

    pub(crate) fn idle(version: u64) -> Report {
        Report {
            version,
            state: RunState::Idle,
            job: None,
            ctl: None,
            ending: None,
            outputs: Arc::new(Vec::new()),
            evicted: false,
            claim_alive: true,
            started: 0,
            deferral: None,
            saved: None,
            snapshot: None,
            known: Arc::new(HashMap::new()),
            restored: None,
            ended: Arc::new(Vec::new()),
            queued: 0,
            kept: Arc::new(HashMap::new()),
        }
    }

    /// The job's newest saved state and its seq: the running job's, or the
    /// one kept when it ended.
    pub fn latest_saved(&self) -> Option<(u64, Arc<[u8]>)> {
        let mut saved = self.saved.clone();
        if let Some(ctl) = &self.ctl
            && let (n, Some(d)) = ctl.saved()
            && saved.as_ref().is_none_or(|(s, _)| n > *s)
        {
            saved = Some((n, d));
        }
        saved
    }

    /// The wire form, with usage read now; it carries the job's saved state
    /// when that is newer than `have` (the seq the shadow holds), its
    /// latest snapshot when that is not `have_snapshot` (the one the shadow
    /// keeps), and the ends of the activation's jobs after version `since`.
    pub fn to_wire(
        &self,
        clock: &dyn Clock,
        since: u64,
        have: u64,
        have_snapshot: Option<&str>,
    ) -> JobReport {
        let saved = self.latest_saved();
        let mut update = ClassAd::new();
        if let Some(ctl) = &self.ctl {
            let u = ctl.usage(clock);
            update.insert_value(classad::name!("RemoteUserCpu"), u.remote_user_cpu);
            update.insert_value(classad::name!("RemoteSysCpu"), u.remote_sys_cpu);
            for (n, v) in u.memory_attrs() {
                update.insert_value(n, v);
            }
            update.insert_value(classad::name!("DiskUsage"), u.disk_usage_kib as i64);
            // Nobody counts an unmetered job's fuel: no figure rather than 0.
            if !u.fuel_unmetered {
                update.insert_value(classad::name!("WasmFuelConsumed"), u.fuel_consumed as i64);
            }
            update.insert_value(
                classad::name!("CumulativeSuspensionTime"),
                u.cumulative_suspension_time,
            );
            // What the job set (Progress, Chirp*) reaches its queue while it
            // runs, not only at its end.
            for (name, value) in ctl.guest_attrs() {
                update.insert(name.as_str(), value);
            }
        }
        let job_state = match self.state {
            RunState::Idle => "Idle",
            RunState::Running => "Running",
            RunState::Suspended => "Suspended",
            RunState::Exited => "Exited",
        };
        update.insert_value(classad::name!("JobState"), job_state);
        match self.deferral {
            Some(Some(t)) => update.insert_value(classad::name!("JobDeferredUntil"), t),
            Some(None) => update.insert_value(classad::name!("JobDeferredUntil"), Value::Undefined),
            None => {}
        }
        JobReport {
            version: self.version,
            state: self.state,
            job: self.job.clone(),
            update: update.to_string(),
            ending: self.ending.as_ref().map(|a| a.to_string()),
            outputs: (*self.outputs).clone(),
            evicted: self.evicted,
            log: Vec::new(),
            claim_alive: self.claim_alive,
            saved_state: saved.filter(|(seq, _)| *seq > have).map(|(seq, d)| {
                // A big one the shadow fetches as a stream (`/v1/host/saved`).
                let size = d.len() as u64;
                if size > pool::STREAM_OVER {
                    let streamed = Some(pool::Streamed { size, sha256: None });
                    andes_protocol::pool::SavedState { seq, data: Vec::new(), streamed }
                } else {
                    andes_protocol::pool::SavedState { seq, data: d.to_vec(), streamed: None }
                }
            }),
            snapshot: self
                .snapshot
                .as_ref()
                .and_then(|s| snapshot_for(s, &self.known, have_snapshot)),
            ended: self.ended.iter().filter(|e| e.version > since).cloned().collect(),
            queued: self.queued,
        }
    }
}

/// The job ad, module and input files of a job queued on a claim.
#[derive(Debug)]
pub(crate) struct Queued {
    pub job: ClassAd,
    pub module: Arc<[u8]>,
    pub inputs: Vec<FileData>,
    /// Its GlobalJobId, read once.
    gid: Option<String>,
}

impl Queued {
    pub(crate) fn new(job: ClassAd, module: Arc<[u8]>, inputs: Vec<FileData>) -> Queued {
        let gid = match job.eval_attr(classad::name!("GlobalJobId")) {
            Value::Str(g) => Some(g.to_string()),
            _ => None,
        };
        Queued { job, module, inputs, gid }
    }
}

/// The jobs queued on a claim, in order, with their GlobalJobIds counted:
/// the host refuses to run a job it already holds by asking every claim
/// ([`JobQueue::holds`]), which costs a lookup, not a walk over every
/// queued job's ad (on a host of 64 slots with batches queued, that walk
/// was a twentieth of the pool's CPU).
#[derive(Debug, Default)]
pub(crate) struct JobQueue {
    jobs: std::collections::VecDeque<Queued>,
    gids: HashMap<String, u32>,
}

impl JobQueue {
    fn count(&mut self, q: &Queued) {
        if let Some(g) = &q.gid {
            *self.gids.entry(g.clone()).or_default() += 1;
        }
    }

    fn uncount(&mut self, q: &Queued) {
        if let Some(g) = &q.gid
            && let Some(n) = self.gids.get_mut(g)
        {
            *n -= 1;
            if *n == 0 {
                self.gids.remove(g);
            }
        }
    }

    /// Queues `jobs` behind those queued.
    pub(crate) fn extend(&mut self, jobs: impl IntoIterator<Item = Queued>) {
        for q in jobs {
            self.count(&q);
            self.jobs.push_back(q);
        }
    }

    /// The next job, taken from the queue.
    pub(crate) fn pop_front(&mut self) -> Option<Queued> {
        let q = self.jobs.pop_front()?;
        self.uncount(&q);
        Some(q)
    }

    /// Takes out the first job `is` picks; whether there was one.
    pub(crate) fn remove_first(&mut self, is: impl Fn(&Queued) -> bool) -> bool {
        let Some(at) = self.jobs.iter().position(is) else { return false };
        if let Some(q) = self.jobs.remove(at) {
            self.uncount(&q);
        }
        true
    }

    /// Drops every queued job.
    pub(crate) fn clear(&mut self) {
        self.jobs.clear();
        self.gids.clear();
    }

    /// How many jobs are queued.
    pub(crate) fn len(&self) -> usize {
        self.jobs.len()
    }

    /// True when none is.
    pub(crate) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Whether job `gid` (its GlobalJobId) is queued.
    pub(crate) fn holds(&self, gid: &str) -> bool {
        self.gids.contains_key(gid)
    }
}

/// How long an ended claim's last report waits for its shadow (Unix
/// seconds): a shadow that asks just after the claim ended (a vacate, the
/// host shutting down) still hears how its job ended, and with what snapshot.
pub const FINAL_REPORT_KEEP: i64 = 120;

/// When a claim's shadow was last heard from or answered; shared with the
/// routes that answer it.
#[derive(Clone, Debug)]
pub struct Heard(Arc<std::sync::Mutex<std::time::Instant>>);

impl Default for Heard {
    fn default() -> Heard {
        Heard(Arc::new(std::sync::Mutex::new(std::time::Instant::now())))
    }
}

impl Heard {
    /// Notes that the shadow was heard from (or answered) now.
    pub fn now(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
    }

    /// How long ago that was.
    pub fn elapsed(&self) -> Duration {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).elapsed()
    }
}

/// A claim the host holds for a schedd.
pub(crate) struct ClaimEntry {
    pub slot: SlotId,
    /// The identity that claimed it: the only one that may use it.
    pub claimant: String,
    /// The claimant's incarnation (a schedd that restarts has a new one).
    pub incarnation: Option<String>,
    /// When the claimant was last heard from about this claim (the daemon's
    /// monotonic clock: a wall-clock step moves no lease).
    pub renewed: std::time::Instant,
    /// How long the claim lives unheard from while it runs no job (the
    /// schedd's ALIVE_INTERVAL times MAX_CLAIM_ALIVES_MISSED).
    pub claim_lease: Duration,
    /// How long it lives unheard from while it runs a job (the job's
    /// JobLeaseDuration), once activated.
    pub job_lease: Option<Duration>,
    pub report: watch::Sender<Report>,
    pub updates_sent: u32,
    /// Set once the claim's schedd has acknowledged a report of its job's
    /// end (or of the claim's end), by asking anything more of the claim
    /// after it was sent (a schedd does so only once what it was told is
    /// on its disk): the host owes it nothing more.
    pub told_end: Arc<std::sync::atomic::AtomicBool>,
    /// The version of the last report sent that told the job's end (or the
    /// claim's), not yet acknowledged; 0 when none is.
    pub end_sent: Arc<std::sync::atomic::AtomicU64>,
    /// Jobs of the current activation waiting for their turn.
    pub queue: JobQueue,
    /// When a shadow last asked about the claim, or was last answered (a
    /// long wait may have begun long before it ended).
    pub heard: Heard,
}

impl ClaimEntry {
    pub(crate) fn new(
        slot: SlotId,
        claimant: String,
        now: std::time::Instant,
        claim_lease: Duration,
    ) -> ClaimEntry {
        let (report, _) = watch::channel(Report::idle(1));
        ClaimEntry {
            slot,
            claimant,
            incarnation: None,
            renewed: now,
            claim_lease,
            job_lease: None,
            report,
            updates_sent: 0,
            told_end: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            end_sent: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            queue: JobQueue::default(),
            heard: Heard::default(),
        }
    }

    /// True while the claim's schedd follows it: a shadow is waiting on its
    /// report, or asked or was answered within the last two seconds (a wait
    /// that returns with a job's end renews it as it goes). A queued job starts only
    /// then, so a schedd that died does not leave jobs running that it will
    /// match again.
    pub(crate) fn followed(&self) -> bool {
        self.report.receiver_count() > 0 || self.heard.elapsed() < Duration::from_secs(2)
    }

    /// When the claim's lease runs out if nothing renews it: a job lease
    /// while it runs a job (`running`), else the claim's keep-alive lease.
    pub(crate) fn expires(&self, running: bool) -> std::time::Instant {
        let lease = match (running, self.job_lease) {
            (true, Some(j)) => j.max(self.claim_lease),
            _ => self.claim_lease,
        };
        self.renewed + lease
    }

    /// The claim's schedd asks something more of it: an end sent before is
    /// now acknowledged.
    pub(crate) fn acknowledged(&self) {
        self.acknowledged_upto(u64::MAX);
    }

    /// The claim's shadow asks again having seen the reports up to version
    /// `seen` (a wait's `since`): an end told in one of those is now
    /// acknowledged; one told in a later report, which this request did not
    /// see (a wait sent again after a cut), is not.
    pub(crate) fn acknowledged_upto(&self, seen: u64) {
        use std::sync::atomic::Ordering;
        let told = |v: u64| (v > 0 && v <= seen).then_some(0);
        if self.end_sent.fetch_update(Ordering::AcqRel, Ordering::Acquire, told).is_ok() {
            self.told_end.store(true, Ordering::Release);
        }
    }

    /// The claim's schedd has committed the ends up to report version
    /// `upto` (an appended activation's [`acked`](pool::ActivateRequest::acked)):
    /// they are forgotten, with the sandboxes kept for their outputs, and
    /// once none is left unacknowledged an end sent before is acknowledged.
    /// Nobody is woken: nothing new happened to the claim.
    pub(crate) fn forget_ends(&self, upto: u64) {
        let mut left = true;
        self.report.send_if_modified(|r| {
            if r.ended.iter().any(|e| e.version <= upto) {
                let (gone, kept): (Vec<JobEnd>, Vec<JobEnd>) =
                    r.ended.iter().cloned().partition(|e| e.version <= upto);
                if !r.kept.is_empty() {
                    let k = Arc::make_mut(&mut r.kept);
                    for e in &gone {
                        k.remove(&e.job);
                    }
                }
                r.ended = Arc::new(kept);
            }
            left = !r.ended.is_empty();
            false
        });
        if !left {
            self.acknowledged();
        }
    }

    /// The claim's holder released it: it reads nothing more of the claim,
    /// so the end of a job still running on it is owed to nobody (`andes
    /// rm` of a running job releases its claim so).
    pub(crate) fn waive_end(&self) {
        self.end_sent.store(0, std::sync::atomic::Ordering::Release);
        self.told_end.store(true, std::sync::atomic::Ordering::Release);
    }

    /// True when the claim's shadow has not yet been told how its last job
    /// ended (or has not acknowledged it).
    pub(crate) fn owes_end(&self) -> bool {
        !self.told_end.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Changes the report and bumps its version.
    pub(crate) fn publish(&self, f: impl FnOnce(&mut Report)) {
        self.report.send_modify(|r| {
            f(r);
            r.version += 1;
        });
    }
}

/// A request from the pool routes to the daemon.
#[derive(Debug)]
pub enum PoolRequest {
    /// The negotiator's match notice.
    Match(MatchNotice),
    /// A schedd claims a slot.
    Claim {
        /// The caller's identity.
        caller: String,
        /// The request.
        req: ClaimRequest,
    },
    /// Whether the module is here.
    HasModule(String),
    /// Store a module (digest checked by the route).
    PutModule(String, Arc<[u8]>),
    /// Run a job on a claim.
    Activate {
        /// The caller's identity.
        caller: String,
        /// The request.
        req: Box<ActivateRequest>,
        /// Its job ad and its queued jobs' ads, parsed by the route (not by
        /// the daemon's loop, which every slot waits on).
        ads: Box<(ClassAd, Vec<ClassAd>)>,
    },
    /// Follow a claim's reports.
    Subscribe {
        /// The caller's identity.
        caller: String,
        /// The claim.
        claim_id: String,
        /// The caller's incarnation, if it says (a restarted schedd takes
        /// the claim over).
        incarnation: Option<String>,
        /// The report version the caller has seen (a wait's `since`): an
        /// end told up to it is acknowledged.
        seen: u64,
    },
    /// The schedd still holds these claims.
    Alive {
        /// The caller's identity.
        caller: String,
        /// The request.
        req: AliveRequest,
    },
    /// qedit reaches the host's copy of the job ad.
    Edit {
        /// The caller's identity.
        caller: String,
        /// The request.
        req: EditRequest,
    },
    /// The sandbox of the claim's running job (condor_tail).
    Sandbox {
        /// The caller's identity.
        caller: String,
        /// The claim.
        claim_id: String,
    },
    /// The claim's running job is vacated (condor_vacate_job).
    VacateJob {
        /// The caller's identity.
        caller: String,
        /// The request.
        req: andes_protocol::pool::VacateJobRequest,
    },
    /// A job queued on a claim is dropped before it starts.
    Withdraw {
        /// The caller's identity.
        caller: String,
        /// The request.
        req: WithdrawRequest,
    },
    /// Where an input file for a claim's next activation is uploaded, and how
    /// many bytes more the claim's slot takes.
    InputDir {
        /// The caller's identity.
        caller: String,
        /// The claim.
        claim_id: String,
    },
    /// The saved state a report named as streamed.
    Saved {
        /// The caller's identity.
        caller: String,
        /// The request.
        req: pool::SavedStateRequest,
    },
    /// A streamed part of a checkpoint a report named.
    SnapshotPart {
        /// The caller's identity.
        caller: String,
        /// The request.
        req: pool::SnapshotFileRequest,
    },
    /// An output file a job's report named as streamed.
    Output {
        /// The caller's identity.
        caller: String,
        /// The request.
        req: pool::OutputRequest,
    },
    /// The schedd is done with a claim.
    Release {
        /// The caller's identity.
        caller: String,
        /// The claim.
        claim_id: String,
    },
}

/// What the daemon answers a [`PoolRequest`].
#[derive(Debug)]
pub enum PoolReply {
    /// Done.
    Done,
    /// The claim's answer.
    Claim(ClaimReply),
    /// Whether the module is here.
    Has(bool),
    /// Whether a queued job was withdrawn.
    Withdrawn(bool),
    /// The keep-alive's answer.
    Alive(AliveReply),
    /// The directory of a claim's uploaded inputs and the bytes it still takes.
    InputDir(PathBuf, u64),
    /// The sandbox of a claim's running job.
    Sandbox(PathBuf),
    /// A saved state's bytes.
    Saved(Arc<[u8]>),
    /// A checkpoint's bytes.
    SnapshotBytes(Arc<Vec<u8>>),
    /// A checkpoint's file content: the store it is in (kept while it is
    /// read) and its path.
    SnapshotBlob(Arc<BlobDir>, PathBuf),
    /// A kept sandbox and an output file's path in it.
    Output(Arc<KeptOutputs>, String),
    /// Reports to follow, the update intervals (initial, then periodic), and
    /// where to note the version of a report that told the job's end.
    /// Also when the shadow was last heard from, to renew as it is answered.
    Reports(watch::Receiver<Report>, u64, u64, Arc<std::sync::atomic::AtomicU64>, Heard),
}

/// Why the daemon refused a [`PoolRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolError {
    /// No such claim or slot.
    NotFound(String),
    /// Not the claimant.
    Forbidden(String),
    /// The startd refused.
    Refused(String),
    /// The module is not here: send it.
    NeedModule,
    /// Input files over the job's RequestDisk or badly named.
    BadInput(String),
    /// The claim waits for the slot's current job to leave (preemption):
    /// activate again later.
    Pending,
    /// The daemon is stopping.
    Stopping,
}

impl From<PoolError> for ApiError {
    fn from(e: PoolError) -> ApiError {
        match e {
            PoolError::NotFound(m) => ApiError::not_found(m),
            PoolError::Forbidden(m) => ApiError::forbidden(m),
            PoolError::Refused(m) => ApiError::new(StatusCode::CONFLICT, m),
            PoolError::NeedModule => ApiError::new(StatusCode::CONFLICT, NEED_MODULE),
            PoolError::Pending => ApiError::new(StatusCode::CONFLICT, pool::CLAIM_PENDING),
            PoolError::BadInput(m) => ApiError::bad_request(m),
            PoolError::Stopping => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the host daemon is stopping")
            }
        }
    }
}

/// A fresh claim id for a slot: `<slot>#<128 random bits in hex>`.
pub fn new_claim_id(slot: SlotId) -> String {
    let mut bytes = [0u8; 16];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut bytes);
    format!("{slot}#{}", hex::encode(bytes))
}

/// The slot a claim id was made for.
pub fn claim_slot(claim_id: &str) -> Option<SlotId> {
    claim_id.split_once('#')?.0.parse().ok()
}

pub use andes_protocol::stream::parse_digest;

#[cfg(test)]
mod tests {
    use super::*;
    use andes_snapshot::{Builder, CHUNK, Header};

    fn sealed(
        h: Header,
        mem: &[u8],
        on: Option<&andes_snapshot::Chain>,
        changed: &[usize],
    ) -> andes_snapshot::Sealed {
        let mut b = Builder::new(h);
        match on {
            Some(c) => {
                b = b.building_on(c);
                b.memory_changed(mem, andes_snapshot::Image::none(), &|i| changed.contains(&i));
            }
            None => b.memory(mem, andes_snapshot::Image::none()),
        }
        b.finish(&[1; 32], |_| [0; 64])
    }

    /// Whether a job is queued is known from the count of its GlobalJobId,
    /// kept through every way a job enters or leaves the queue.
    #[test]
    fn a_claims_queue_knows_which_jobs_it_holds() {
        let q = |gid: &str| {
            let ad = classad::parse_ad(&format!("[ GlobalJobId = \"{gid}\" ]")).unwrap();
            Queued::new(ad, Arc::from(&b""[..]), Vec::new())
        };
        let mut queue = JobQueue::default();
        queue.extend([q("a"), q("b"), q("a"), q("c")]);
        assert!(queue.holds("a") && queue.holds("b") && queue.holds("c"));
        assert!(!queue.holds("d"));
        assert_eq!(queue.pop_front().and_then(|j| j.gid), Some("a".to_string()));
        assert!(queue.holds("a"), "a second a is still queued");
        assert!(queue.remove_first(|j| j.gid.as_deref() == Some("a")));
        assert!(!queue.holds("a"));
        assert!(!queue.remove_first(|j| j.gid.as_deref() == Some("a")));
        assert_eq!(queue.len(), 2);
        queue.clear();
        assert!(queue.is_empty() && !queue.holds("b") && !queue.holds("c"));
    }

    /// A shadow that keeps the last snapshot gets, with the next one, only
    /// the memory pack that one added: the chunks that changed, not the
    /// memory it already holds.
    #[test]
    fn the_next_snapshot_sends_only_the_memory_pack_the_shadow_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Arc::new(BlobDir::create(dir.path().join("ckpt")).unwrap());
        let mut mem = vec![0u8; 64 * CHUNK];
        for (i, b) in mem.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let first = sealed(Header::new(&[2; 32], "j", 0), &mem, None, &[]);
        first.store_pack(&blobs.store).unwrap();
        mem[5 * CHUNK] ^= 1;
        let second = sealed(Header::new(&[2; 32], "j", 1), &mem, Some(&first.chain), &[5]);
        second.store_pack(&blobs.store).unwrap();
        let names = |s: &andes_snapshot::Sealed| -> Arc<HashSet<String>> {
            Arc::new(s.header.contents().map(|c| c.blake3.to_string()).collect())
        };
        let hash = |s: &andes_snapshot::Sealed| andes_snapshot::stored_hash(&s.bytes).unwrap();
        let snap = HostSnapshot {
            hash: hash(&second),
            bytes: Arc::new(second.bytes.clone()),
            files: names(&second),
            blobs,
            stopping: false,
        };
        let known: HashMap<String, Arc<HashSet<String>>> =
            [(hash(&first), names(&first)), (hash(&second), names(&second))].into();
        let sent = snapshot_for(&snap, &known, Some(&hash(&first))).unwrap();
        let new_pack = second.pack.as_ref().unwrap();
        assert_eq!(sent.blobs.len(), 1);
        assert_eq!(sent.blobs[0].name, new_pack.0);
        assert!(new_pack.1.len() <= CHUNK, "{} bytes", new_pack.1.len());
        // A shadow that keeps nothing gets both packs.
        assert_eq!(snapshot_for(&snap, &known, None).unwrap().blobs.len(), 2);
    }
}
