//! The pool side of the host daemon: slot offers (claim ids), claims from
//! schedds, activations with the module and input files, the starter's
//! reports (the shadow's long poll), job leases, output files, and the ads
//! sent to the collector.
//!
//! The routes are listed in `andes_protocol::pool`. Every exchange is started
//! by the schedd (its shadow polls), so a host never needs to reach a submit
//! machine; the host reaches only the collector.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use andes_beneath::{Beneath, Kind, Refused};
use andes_protocol::pool::{
    self, ActivateRequest, AliveReply, AliveRequest, ClaimReply, ClaimRequest, EditRequest,
    FileData, JobEnd, JobReport, MatchNotice, NEED_MODULE, ReleaseRequest, RunState, SnapshotData,
    WaitRequest, WithdrawReply, WithdrawRequest,
};
use andes_protocol::{ApiError, Auth, Caller, Role, SignedJson};
use andes_startd::SlotId;
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use classad::{ClassAd, Value};
use tokio::sync::watch;

use crate::daemon::Remote;
use andes_starter::control::{Clock, Control};

/// The sandbox names of the job's streams: one contract, in `andes-protocol`.
pub use andes_protocol::pool::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};

/// Modules kept in memory at most (least recently stored dropped first).
const MAX_MODULES: usize = 256;

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
    /// The BLAKE3 of every file content it names.
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
fn snapshot_for(
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
    fn idle(version: u64) -> Report {
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
            update.insert_value("RemoteUserCpu", u.remote_user_cpu);
            update.insert_value("RemoteSysCpu", u.remote_sys_cpu);
            for (n, v) in u.memory_attrs() {
                update.insert_value(n, v);
            }
            update.insert_value("DiskUsage", u.disk_usage_kib as i64);
            // Nobody counts an unmetered job's fuel: no figure rather than 0.
            if !u.fuel_unmetered {
                update.insert_value("WasmFuelConsumed", u.fuel_consumed as i64);
            }
            update.insert_value("CumulativeSuspensionTime", u.cumulative_suspension_time);
        }
        let job_state = match self.state {
            RunState::Idle => "Idle",
            RunState::Running => "Running",
            RunState::Suspended => "Suspended",
            RunState::Exited => "Exited",
        };
        update.insert_value("JobState", job_state);
        match self.deferral {
            Some(Some(t)) => update.insert_value("JobDeferredUntil", t),
            Some(None) => update.insert_value("JobDeferredUntil", Value::Undefined),
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
    /// Set when a report of the job's end (or the claim's) was sent, and
    /// not yet acknowledged.
    pub end_sent: Arc<std::sync::atomic::AtomicBool>,
    /// Jobs of the current activation waiting for their turn.
    pub queue: std::collections::VecDeque<Queued>,
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
            end_sent: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            queue: std::collections::VecDeque::new(),
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
        if self.end_sent.swap(false, std::sync::atomic::Ordering::AcqRel) {
            self.told_end.store(true, std::sync::atomic::Ordering::Release);
        }
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
    /// the flag to set once the job's end was reported.
    /// Also when the shadow was last heard from, to renew as it is answered.
    Reports(watch::Receiver<Report>, u64, u64, Arc<std::sync::atomic::AtomicBool>, Heard),
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

/// The module store: modules by digest, bounded.
#[derive(Default)]
pub(crate) struct Modules {
    map: HashMap<String, Arc<[u8]>>,
    order: std::collections::VecDeque<String>,
}

impl Modules {
    pub(crate) fn get(&self, digest: &str) -> Option<Arc<[u8]>> {
        self.map.get(digest).cloned()
    }
    pub(crate) fn put(&mut self, digest: String, bytes: Arc<[u8]>) {
        if self.map.insert(digest.clone(), bytes).is_none() {
            self.order.push_back(digest);
            while self.order.len() > MAX_MODULES {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }
}

/// Writes the input files into a fresh sandbox, following no link: those
/// carried in the activation, and the streamed ones from `uploaded` (the
/// claim's upload directory, files by SHA-256).
pub(crate) fn write_inputs(
    sandbox: &Path,
    inputs: &[FileData],
    uploaded: &Path,
) -> std::io::Result<()> {
    let b = Beneath::open(sandbox)?;
    for f in inputs {
        match &f.streamed {
            None => b.write(&f.name, &f.data).map_err(std::io::Error::other)?,
            Some(s) => {
                let sha = s.sha256.as_deref().unwrap_or_default();
                let mut from = std::fs::File::open(uploaded.join(sha))?;
                if let Some((parent, _)) = f.name.rsplit_once('/') {
                    b.create_dirs(parent).map_err(std::io::Error::other)?;
                }
                let mut to = b.create_file(&f.name).map_err(std::io::Error::other)?;
                std::io::copy(&mut from, &mut to)?;
            }
        }
    }
    Ok(())
}

/// Checks that every streamed input of an activation was uploaded whole to
/// `uploaded`, and removes the uploads it does not name (left by an earlier
/// activation that never came).
pub(crate) fn check_uploaded<'a>(
    uploaded: &Path,
    inputs: impl Iterator<Item = &'a FileData>,
) -> Result<(), PoolError> {
    let mut named = HashSet::new();
    for f in inputs {
        let Some(s) = &f.streamed else { continue };
        let sha = s.sha256.as_deref().unwrap_or_default();
        if andes_protocol::stream::parse_hex(sha).is_none() {
            return Err(PoolError::BadInput(format!(
                "input file {} is streamed without its SHA-256",
                f.name
            )));
        }
        let len = std::fs::metadata(uploaded.join(sha)).map(|m| m.len()).ok();
        if len != Some(s.size) {
            return Err(PoolError::BadInput(format!(
                "input file {} ({} bytes, SHA-256 {sha}) was not uploaded \
                 (PUT /v1/host/inputs/{sha}) before the activation",
                f.name, s.size
            )));
        }
        named.insert(sha.to_string());
    }
    if let Ok(rd) = std::fs::read_dir(uploaded) {
        for e in rd.flatten() {
            if !named.contains(e.file_name().to_string_lossy().as_ref()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

/// Checks the snapshot an activation brings: its hash is its trailer's and
/// each file content is what its name (BLAKE3) says. Its signature and the
/// rest are checked by the starter before the job resumes.
pub(crate) fn check_snapshot(snap: &SnapshotData, uploaded: &Path) -> Result<(), PoolError> {
    if let Some(s) = &snap.streamed {
        // Uploaded before the activation (checked whole by `check_uploaded`).
        let sha = s.sha256.as_deref().unwrap_or_default();
        let bytes = std::fs::read(uploaded.join(sha)).map_err(|e| {
            PoolError::BadInput(format!("the checkpoint {} was not uploaded: {e}", snap.hash))
        })?;
        return check_snapshot(&SnapshotData { bytes, streamed: None, ..snap.clone() }, uploaded);
    }
    if andes_snapshot::stored_hash(&snap.bytes).as_deref() != Some(snap.hash.as_str()) {
        return Err(PoolError::BadInput(format!(
            "the checkpoint is not an andes snapshot with hash {}",
            snap.hash
        )));
    }
    for b in &snap.blobs {
        if !andes_snapshot::is_hash(&b.name) {
            return Err(PoolError::BadInput(format!(
                "the checkpoint's file content {:?} is not named by its BLAKE3",
                b.name
            )));
        }
        if b.streamed.is_some() {
            // Checked against its name as it is stored (`BlobStore::put_file`).
            continue;
        }
        if andes_snapshot::blob_hash(&b.data) != b.name {
            return Err(PoolError::BadInput(format!(
                "the checkpoint's file content {:?} does not match its name",
                b.name
            )));
        }
    }
    Ok(())
}

/// Checks the input files' names and total size against the job's RequestDisk (KiB).
pub(crate) fn check_inputs(job: &ClassAd, inputs: &[FileData]) -> Result<(), PoolError> {
    for f in inputs {
        if !pool::safe_relative_name(&f.name) {
            return Err(PoolError::BadInput(format!(
                "input file name {:?} is not allowed",
                f.name
            )));
        }
    }
    let total: u64 = inputs.iter().map(FileData::len).sum();
    if let Value::Int(kib) = job.eval_attr("RequestDisk")
        && kib > 0
        && total > (kib as u64).saturating_mul(1024)
    {
        return Err(PoolError::BadInput(format!(
            "the input files hold {total} bytes, more than the job's RequestDisk ({kib} KiB)"
        )));
    }
    Ok(())
}

/// Files a job may send back at most.
pub const MAX_OUTPUT_FILES: usize = 10_000;

/// The output files of a finished job: TransferOutput's list if set (a file
/// under its base name; a directory with its contents under its base name,
/// or, written with a trailing `/`, its contents alone, as HTCondor does),
/// else every top-level regular file the job created or changed; the streams
/// under their sandbox names. At most `limit` bytes in all, of which at most
/// `budget` (and [`pool::INLINE_BUDGET`]) carried in the report; the rest are
/// named as streamed.
///
/// Everything is read beneath the sandbox without following a link: a link or
/// special file that the job names as an output (or puts in place of a
/// stream) is refused, and the refusal is returned as the error (a hold);
/// links and special files found among unnamed files are not sent back.
pub(crate) fn collect_outputs(
    sandbox: &Path,
    job: &ClassAd,
    inputs: &[(String, u64)],
    limit: u64,
    budget: u64,
) -> Outputs {
    let b = match Beneath::open(sandbox) {
        Ok(b) => b,
        Err(e) => {
            return Outputs {
                error: Some(format!("cannot open the job's sandbox: {e}")),
                ..Outputs::default()
            };
        }
    };
    // (name sent back, path in the sandbox)
    let mut wanted: Vec<(String, String)> = Vec::new();
    let mut error: Option<String> = None;
    let mut errno = 0;
    let listed = match job.eval_attr("TransferOutput") {
        Value::Str(s) if !s.trim().is_empty() => Some(
            s.split(',')
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>(),
        ),
        _ => None,
    };
    match &listed {
        Some(list) => {
            for n in list {
                let contents_only = n.ends_with('/');
                let path = n.trim_end_matches('/');
                let base = path.rsplit('/').next().unwrap_or(path).to_string();
                let entry = match b.entry(path) {
                    Ok(e) => e,
                    Err(Refused::Missing { .. }) => {
                        if error.is_none() {
                            errno = ENOENT;
                        }
                        error.get_or_insert_with(|| {
                            format!("transfer_output_files names {n}, which the job did not create")
                        });
                        continue;
                    }
                    Err(e) => {
                        error.get_or_insert_with(|| {
                            format!("transfer_output_files names {n}, which is refused: {e}")
                        });
                        continue;
                    }
                };
                match entry.kind {
                    Kind::File => wanted.push((base, path.to_string())),
                    Kind::Dir => match b.walk(path, MAX_OUTPUT_FILES) {
                        Ok(found) => {
                            for e in found {
                                let rel = &e.path[path.len() + 1..];
                                let name = if contents_only {
                                    rel.to_string()
                                } else {
                                    format!("{base}/{rel}")
                                };
                                match e.kind {
                                    Kind::File => wanted.push((name, e.path)),
                                    Kind::Dir => {}
                                    Kind::Link | Kind::Special => {
                                        error.get_or_insert_with(|| {
                                            format!(
                                                "output directory {n} holds {}, which is not a \
                                                 regular file (links and special files are not \
                                                 transferred)",
                                                e.path
                                            )
                                        });
                                    }
                                }
                            }
                        }
                        Err(e) => {
                            error.get_or_insert_with(|| format!("output directory {n}: {e}"));
                        }
                    },
                    Kind::Link | Kind::Special => {
                        let why = b.read(path, 0).err().map(|e| e.to_string()).unwrap_or_default();
                        error.get_or_insert_with(|| {
                            format!("transfer_output_files names {n}, which is refused: {why}")
                        });
                    }
                }
            }
        }
        None => match b.list("", MAX_OUTPUT_FILES) {
            Ok(found) => {
                for e in found {
                    let name = e.path;
                    if e.kind != Kind::File
                        || name == STDOUT_NAME
                        || name == STDERR_NAME
                        || name == STDIN_NAME
                    {
                        if matches!(e.kind, Kind::Link | Kind::Special) {
                            tracing::info!("output {name} is not a regular file; not sent back");
                        }
                        continue;
                    }
                    // An input file the job left as it was does not go back.
                    if inputs.iter().any(|(n, len)| *n == name && *len == e.len) {
                        continue;
                    }
                    wanted.push((name.clone(), name));
                }
            }
            Err(e) => {
                error.get_or_insert_with(|| format!("cannot list the job's output files: {e}"));
            }
        },
    }
    for s in [STDOUT_NAME, STDERR_NAME] {
        match b.entry(s) {
            Ok(e) if e.kind == Kind::File => wanted.push((s.to_string(), s.to_string())),
            Ok(_) => {
                let why = b.read(s, 0).err().map(|e| e.to_string()).unwrap_or_default();
                error.get_or_insert_with(|| {
                    format!(
                        "the job replaced its {} stream: {why}",
                        if s == STDOUT_NAME { "output" } else { "error" }
                    )
                });
            }
            Err(_) => {}
        }
    }
    wanted.sort();
    wanted.dedup_by(|a, b| a.0 == b.0);
    if wanted.len() > MAX_OUTPUT_FILES {
        error.get_or_insert_with(|| {
            format!("the job has more than {MAX_OUTPUT_FILES} output files")
        });
        wanted.truncate(MAX_OUTPUT_FILES);
    }
    let mut out = Vec::new();
    let mut streamed = HashMap::new();
    let mut total = 0u64;
    let mut carried = 0u64;
    for (name, path) in wanted {
        // A big file (or any past what one report carries) stays where it
        // is, for the shadow to fetch as a stream.
        if let Ok(e) = b.entry(&path)
            && e.kind == Kind::File
            && (e.len > pool::STREAM_OVER || carried + e.len > budget.min(pool::INLINE_BUDGET))
        {
            total = total.saturating_add(e.len);
            if total > limit {
                error.get_or_insert_with(|| {
                    format!("the output files exceed the job's RequestDisk ({limit} bytes)")
                });
                break;
            }
            out.push(FileData::streamed(name.clone(), e.len, None));
            streamed.insert(name, path);
            continue;
        }
        match b.read(&path, limit.saturating_sub(total)) {
            Ok(data) => {
                total += data.len() as u64;
                carried += data.len() as u64;
                out.push(FileData::inline(name, data));
            }
            Err(Refused::TooLarge { .. }) => {
                error.get_or_insert_with(|| {
                    format!("the output files exceed the job's RequestDisk ({limit} bytes)")
                });
                break;
            }
            Err(e) => {
                error.get_or_insert_with(|| format!("cannot send back output file {name}: {e}"));
            }
        }
    }
    Outputs { files: out, streamed, error, errno }
}

/// The most bytes of output files one activation's reports carry in all: a
/// batch of short jobs sends the rest as streams, so no report outgrows the
/// answer a shadow reads (64 MiB, in base64).
pub const ACTIVATION_INLINE_BUDGET: u64 = 16 << 20;

/// A finished job's output files ([`collect_outputs`]).
#[derive(Debug, Default)]
pub(crate) struct Outputs {
    /// The files, carried or streamed, in order.
    pub files: Vec<FileData>,
    /// The streamed ones: name → path in the sandbox.
    pub streamed: HashMap<String, String>,
    /// Why some could not be sent back (a hold).
    pub error: Option<String>,
    /// The Unix errno behind `error` (HTCondor's HoldReasonSubCode of a
    /// transfer hold), 0 when there is none.
    pub errno: i32,
}

/// ENOENT, the same number on every platform andes runs on.
const ENOENT: i32 = 2;

/// The least time between two rounds of slot ads sent to the collector: the
/// ads of a busy slot change with every job, and only the newest matters.
pub const PUBLISH_GAP: Duration = Duration::from_millis(100);

/// How often a failing collector is tried again.
pub const PUBLISH_RETRY: Duration = Duration::from_secs(1);

/// With nothing to send for this long, one slot's ad goes anyway (to notice
/// a collector that restarted).
pub const PUBLISH_HEARTBEAT: Duration = Duration::from_secs(10);

/// Sends the slot ads the daemon publishes to the collector at `client`
/// (`POST /v1/collector/update`), newest ad per slot first, until the daemon
/// drops its sender: at once when nothing was sent for [`PUBLISH_GAP`] or the
/// slot became Unclaimed, else coalesced into the next round.
///
/// The pool is whole again within seconds of a collector's return: a send
/// that fails is tried again every [`PUBLISH_RETRY`] (and every slot's newest
/// ad is sent once it succeeds); a collector that answers with a new
/// incarnation (it restarted, and holds none of our ads) gets every slot's
/// newest ad at once; and with nothing to send for [`PUBLISH_HEARTBEAT`],
/// one slot's ad goes anyway, so that a restart is noticed even on a host
/// whose slots do not change.
pub fn spawn_publisher(
    client: andes_protocol::Client,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<crate::daemon::PublishedAd>,
) -> tokio::task::JoinHandle<()> {
    fn name(p: &crate::daemon::PublishedAd) -> String {
        p.ad.get("Name").map(|e| e.to_string()).unwrap_or_default()
    }
    fn unclaimed(p: &crate::daemon::PublishedAd) -> bool {
        matches!(p.ad.eval_attr("State"), Value::Str(s) if &*s == "Unclaimed")
    }
    // Only each slot's newest ad matters.
    fn push(pending: &mut Vec<crate::daemon::PublishedAd>, p: crate::daemon::PublishedAd) {
        let n = name(&p);
        pending.retain(|a| name(a) != n);
        pending.push(p);
    }
    tokio::spawn(async move {
        let mut failing = false;
        let mut pending: Vec<crate::daemon::PublishedAd> = Vec::new();
        // Every slot's newest ad, sent or not.
        let mut latest: std::collections::BTreeMap<String, crate::daemon::PublishedAd> =
            std::collections::BTreeMap::new();
        let mut incarnation: Option<String> = None;
        let mut beat = 0usize;
        let mut open = true;
        while open || !pending.is_empty() {
            if pending.is_empty() {
                tokio::select! {
                    p = rx.recv() => match p {
                        Some(p) => push(&mut pending, p),
                        None => return,
                    },
                    _ = tokio::time::sleep(PUBLISH_HEARTBEAT) => {
                        // Nothing to send for a while: one slot's ad, round
                        // robin, to hear the collector's incarnation.
                        if let Some(p) = latest.values().nth(beat % latest.len().max(1)) {
                            pending.push(p.clone());
                        }
                        beat = beat.wrapping_add(1);
                        if pending.is_empty() {
                            continue;
                        }
                    }
                }
            }
            while let Ok(p) = rx.try_recv() {
                push(&mut pending, p);
            }
            for p in &pending {
                latest.insert(name(p), p.clone());
            }
            let round = tokio::time::Instant::now();
            let mut resend_all = false;
            let mut unsent = Vec::new();
            for p in std::mem::take(&mut pending) {
                if failing && !unsent.is_empty() {
                    unsent.push(p);
                    continue;
                }
                let body = pool::CollectorUpdate {
                    kind: "Machine".into(),
                    ad: p.ad.to_string(),
                    private: Some(p.private.to_string()),
                };
                match client.post_json("/v1/collector/update", &body).await {
                    Ok(r) if r.status.is_success() => {
                        if failing {
                            tracing::info!("the collector takes our ads again");
                            resend_all = true;
                        }
                        failing = false;
                        if let Ok(reply) = r.json::<pool::CollectorUpdateReply>()
                            && !reply.incarnation.is_empty()
                        {
                            if incarnation.as_ref().is_some_and(|i| *i != reply.incarnation) {
                                tracing::info!("the collector restarted: sending every slot's ad");
                                resend_all = true;
                            }
                            incarnation = Some(reply.incarnation);
                        }
                    }
                    Ok(r) => {
                        if !failing {
                            tracing::warn!(
                                "the collector refused a slot ad: {}",
                                r.error_reason().unwrap_or_default()
                            );
                        }
                        failing = true;
                        unsent.push(p);
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!("cannot send slot ads to the collector: {e}");
                        }
                        failing = true;
                        unsent.push(p);
                    }
                }
            }
            if resend_all {
                pending = latest.values().cloned().collect();
                continue;
            }
            let gap = if failing {
                pending = unsent;
                PUBLISH_RETRY
            } else {
                PUBLISH_GAP
            };
            // Gather what comes during the gap; a slot becoming Unclaimed
            // goes at once (the negotiator is waiting for it), unless the
            // collector is failing.
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(round + gap) => break,
                    p = rx.recv() => match p {
                        Some(p) => {
                            let now = unclaimed(&p);
                            push(&mut pending, p);
                            if now && !failing {
                                break;
                            }
                        }
                        None => {
                            open = false;
                            break;
                        }
                    },
                }
            }
        }
    })
}

#[derive(Clone)]
struct PoolState {
    remote: Remote,
    clock: Arc<dyn Clock>,
}

/// The pool routes (see `andes_protocol::pool`), behind `auth`.
pub fn router(remote: Remote, clock: Arc<dyn Clock>, auth: &Auth) -> Router {
    routes(remote, clock, auth).router
}

/// [`router`] with who may call each route.
pub fn routes(
    remote: Remote,
    clock: Arc<dyn Clock>,
    auth: &Auth,
) -> andes_protocol::routes::Served {
    use axum::http::Method as M;
    let schedd = &[Role::Schedd];
    andes_protocol::routes::Api::new()
        .route(M::POST, "/v1/host/match", &[Role::Negotiator, Role::Admin], post(match_notice))
        .route(M::POST, "/v1/host/claim", schedd, post(claim))
        .route(M::GET, "/v1/host/modules/{digest}", schedd, get(has_module))
        .route(M::PUT, "/v1/host/modules/{digest}", schedd, put(put_module))
        .route(M::PUT, "/v1/host/inputs/{sha256}", schedd, put(put_input))
        .route(M::POST, "/v1/host/output", schedd, post(output))
        .route(M::POST, "/v1/host/snapshot", schedd, post(snapshot_part))
        .route(M::POST, "/v1/host/saved", schedd, post(saved_state))
        .route(M::POST, "/v1/host/activate", schedd, post(activate))
        .route(M::POST, "/v1/host/wait", schedd, post(wait))
        .route(M::POST, "/v1/host/edit", schedd, post(edit))
        .route(M::POST, "/v1/host/withdraw", schedd, post(withdraw))
        .route(M::POST, "/v1/host/vacate", schedd, post(vacate_job))
        .route(M::POST, "/v1/host/tail", schedd, post(tail))
        .route(M::POST, "/v1/host/release", schedd, post(release))
        .route(M::POST, "/v1/host/alive", schedd, post(alive))
        .finish(auth, PoolState { remote, clock })
}

type ApiResult<T> = Result<T, ApiError>;

async fn ask(s: &PoolState, req: PoolRequest) -> ApiResult<PoolReply> {
    s.remote.pool(req).await.map_err(ApiError::from)
}

async fn match_notice(
    State(s): State<PoolState>,
    SignedJson(req): SignedJson<MatchNotice>,
) -> ApiResult<StatusCode> {
    ask(&s, PoolRequest::Match(req)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn claim(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<ClaimRequest>,
) -> ApiResult<axum::Json<ClaimReply>> {
    match ask(&s, PoolRequest::Claim { caller: caller.identity, req }).await? {
        PoolReply::Claim(r) => Ok(axum::Json(r)),
        _ => Err(ApiError::internal("unexpected reply")),
    }
}

/// `PUT /v1/host/inputs/{sha256}`: an input file for the claim named in the
/// [`pool::CLAIM_HEADER`] header's next activation, streamed to disk and kept
/// only if it is whole, is the SHA-256 its path names, and fits the slot.
async fn put_input(
    State(s): State<PoolState>,
    caller: Caller,
    UrlPath(sha256): UrlPath<String>,
    headers: axum::http::HeaderMap,
    body: andes_protocol::stream::SignedStream,
) -> ApiResult<StatusCode> {
    let Some(digest) = andes_protocol::stream::parse_hex(&sha256) else {
        return Err(ApiError::bad_request(format!("{sha256:?} is not a SHA-256 (64 hex digits)")));
    };
    if digest != body.sha256 {
        return Err(ApiError::bad_request(format!(
            "the body is signed as SHA-256 {}, not the {sha256} its path names",
            hex::encode(body.sha256)
        )));
    }
    let claim_id = headers
        .get(pool::CLAIM_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| ApiError::bad_request("no Andes-Claim header: which claim is this for?"))?
        .to_string();
    let PoolReply::InputDir(dir, room) =
        ask(&s, PoolRequest::InputDir { caller: caller.identity, claim_id }).await?
    else {
        return Err(ApiError::internal("unexpected reply"));
    };
    let name = hex::encode(digest);
    let (part, done) = (dir.join(format!(".{name}.part")), dir.join(&name));
    let file = std::fs::File::create(&part)
        .map_err(|e| ApiError::internal(format!("{}: {e}", part.display())))?;
    match body.write_to(file, room).await {
        Ok((_, file)) => {
            drop(file);
            std::fs::rename(&part, &done)
                .map_err(|e| ApiError::internal(format!("{}: {e}", done.display())))?;
            Ok(StatusCode::NO_CONTENT)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            Err(andes_protocol::AuthError::from(e).into())
        }
    }
}

/// `POST /v1/host/output`: an output file a report named as streamed, as a
/// streamed body. Asking for one acknowledges nothing.
async fn output(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<pool::OutputRequest>,
) -> axum::response::Response {
    let reply = ask(&s, PoolRequest::Output { caller: caller.identity, req }).await;
    let (kept, path) = match reply {
        Ok(PoolReply::Output(k, p)) => (k, p),
        Ok(_) => return ApiError::internal("unexpected reply").into_response(),
        Err(e) => return e.into_response(),
    };
    let opened = tokio::task::spawn_blocking(move || {
        Beneath::open(&kept.dir)
            .map_err(|e| e.to_string())?
            .open_file(&path)
            .map_err(|e| e.to_string())
    })
    .await;
    match opened {
        Ok(Ok((file, len))) => andes_protocol::stream::file_response(file.into_std(), len),
        Ok(Err(e)) => {
            ApiError::internal(format!("the output file cannot be read: {e}")).into_response()
        }
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

/// `POST /v1/host/snapshot`: a streamed part of a checkpoint a report named
/// (the snapshot's bytes, or a file content), as a streamed body.
async fn snapshot_part(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<pool::SnapshotFileRequest>,
) -> axum::response::Response {
    let reply = ask(&s, PoolRequest::SnapshotPart { caller: caller.identity, req }).await;
    match reply {
        Ok(PoolReply::SnapshotBytes(bytes)) => {
            let len = bytes.len() as u64;
            let mut r = axum::response::Response::new(axum::body::Body::from(
                axum::body::Bytes::from_owner(ArcBytes(bytes)),
            ));
            r.headers_mut().insert(axum::http::header::CONTENT_LENGTH, len.into());
            r
        }
        Ok(PoolReply::SnapshotBlob(dir, path)) => {
            let opened = tokio::task::spawn_blocking(move || {
                let f = std::fs::File::open(&path)?;
                let len = f.metadata()?.len();
                drop(dir);
                Ok::<_, std::io::Error>((f, len))
            })
            .await;
            match opened {
                Ok(Ok((f, len))) => andes_protocol::stream::file_response(f, len),
                Ok(Err(e)) => {
                    ApiError::not_found(format!("the file content is gone: {e}")).into_response()
                }
                Err(e) => ApiError::internal(e.to_string()).into_response(),
            }
        }
        Ok(_) => ApiError::internal("unexpected reply").into_response(),
        Err(e) => e.into_response(),
    }
}

/// `POST /v1/host/saved`: the saved state a report named as streamed.
async fn saved_state(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<pool::SavedStateRequest>,
) -> axum::response::Response {
    match ask(&s, PoolRequest::Saved { caller: caller.identity, req }).await {
        Ok(PoolReply::Saved(data)) => {
            let len = data.len() as u64;
            let mut r = axum::response::Response::new(axum::body::Body::from(
                axum::body::Bytes::from_owner(ArcSlice(data)),
            ));
            r.headers_mut().insert(axum::http::header::CONTENT_LENGTH, len.into());
            r
        }
        Ok(_) => ApiError::internal("unexpected reply").into_response(),
        Err(e) => e.into_response(),
    }
}

/// A saved state's shared bytes as a body's owner.
struct ArcSlice(Arc<[u8]>);

impl AsRef<[u8]> for ArcSlice {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// A snapshot's shared bytes as a body's owner.
struct ArcBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for ArcBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

async fn has_module(
    State(s): State<PoolState>,
    UrlPath(digest): UrlPath<String>,
) -> ApiResult<StatusCode> {
    match ask(&s, PoolRequest::HasModule(digest)).await? {
        PoolReply::Has(true) => Ok(StatusCode::OK),
        _ => Ok(StatusCode::NOT_FOUND),
    }
}

async fn put_module(
    State(s): State<PoolState>,
    UrlPath(digest): UrlPath<String>,
    body: andes_protocol::stream::SignedStream,
) -> ApiResult<StatusCode> {
    let signed = format!("sha256:{}", hex::encode(body.sha256));
    if signed != digest {
        return Err(ApiError::bad_request(format!(
            "module digest mismatch: named {digest}, signed as {signed}"
        )));
    }
    // Streamed (no JSON, no body limit but the module's own), checked
    // against the digest as it arrives; kept in memory, where it is compiled.
    let bytes = body
        .into_bytes(pool::MAX_MODULE)
        .await
        .map_err(|e| ApiError::from(andes_protocol::AuthError::from(e)))?;
    if !bytes.starts_with(b"\0asm") {
        return Err(ApiError::bad_request(format!("{digest} is not a Wasm module")));
    }
    ask(&s, PoolRequest::PutModule(digest, Arc::from(&bytes[..]))).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What a shadow's long poll follows: a claim's reports, the starter's
/// update intervals (initial, then periodic), and the flag set once the
/// job's end was reported.
struct Follow {
    rx: watch::Receiver<Report>,
    initial: u64,
    periodic: u64,
    told_end: Arc<std::sync::atomic::AtomicBool>,
    heard: Heard,
}

/// Waits for a report newer than the shadow's (`req.since`), or until the
/// next periodic update is due; renews nothing itself (the daemon sees the
/// receiver alive).
async fn follow(s: &PoolState, f: Follow, req: &WaitRequest) -> JobReport {
    let Follow { mut rx, initial, periodic, told_end, heard } = f;
    let (initial, periodic) = match req.report_within {
        Some(w) => (initial.min(w.max(1)), periodic.min(w.max(1))),
        None => (initial, periodic),
    };
    let since = req.since;
    loop {
        let (version, started, state) = {
            let r = rx.borrow_and_update();
            (r.version, r.started, r.state)
        };
        if version > since {
            break;
        }
        let now = i64::try_from(s.clock.unix_now()).unwrap_or(i64::MAX);
        let due = if state == RunState::Running || state == RunState::Suspended {
            let first = started.saturating_add(initial as i64);
            if now < first {
                first - now
            } else {
                periodic as i64 - (now - first) % periodic.max(1) as i64
            }
        } else {
            periodic as i64
        };
        let wait = Duration::from_secs(due.max(1) as u64);
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { break },
            _ = s.clock.sleep_until(s.clock.now() + wait) => break,
        }
    }
    let r = rx.borrow().clone();
    told(&r, &told_end, &heard);
    r.to_wire(s.clock.as_ref(), since, req.saved_seq, req.snapshot.as_deref())
}

/// Notes that `r` is about to be sent (the shadow was answered now), and
/// whether it tells the job's end (or the claim's): acknowledged by the
/// shadow's next request about the claim.
fn told(r: &Report, end_sent: &std::sync::atomic::AtomicBool, heard: &Heard) {
    heard.now();
    if (r.state == RunState::Exited && r.queued == 0) || !r.claim_alive {
        end_sent.store(true, std::sync::atomic::Ordering::Release);
    }
}

async fn activate(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<ActivateRequest>,
) -> ApiResult<axum::Json<JobReport>> {
    let wait_ms = req.wait_ms.min(60_000);
    let claim_id = req.claim_id.clone();
    let job =
        classad::parse_ad(&req.job).map_err(|e| PoolError::BadInput(format!("the job ad: {e}")))?;
    let more = req
        .more
        .iter()
        .map(|q| classad::parse_ad(&q.job))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PoolError::BadInput(format!("a queued job ad: {e}")))?;
    let ads = Box::new((job, more));
    ask(&s, PoolRequest::Activate { caller: caller.identity.clone(), req: Box::new(req), ads })
        .await?;
    let PoolReply::Reports(rx, initial, periodic, told_end, heard) =
        ask(&s, PoolRequest::Subscribe { caller: caller.identity, claim_id, incarnation: None })
            .await?
    else {
        return Err(ApiError::internal("unexpected reply"));
    };
    // The shadow keeps the snapshot it resumed the job from.
    let have = rx.borrow().restored.clone();
    let have = have.as_deref();
    if wait_ms == 0 {
        let r = rx.borrow().clone();
        told(&r, &told_end, &heard);
        return Ok(axum::Json(r.to_wire(s.clock.as_ref(), 0, 0, have)));
    }
    // Answer when the job (and any queued behind it) ended within wait_ms,
    // else with the report of the moment.
    let mut rx2 = rx.clone();
    let deadline = s.clock.now() + Duration::from_millis(wait_ms);
    loop {
        let done = {
            let r = rx2.borrow_and_update();
            (r.state == RunState::Exited && r.queued == 0) || !r.claim_alive
        };
        if done {
            break;
        }
        tokio::select! {
            c = rx2.changed() => if c.is_err() { break },
            _ = s.clock.sleep_until(deadline) => break,
        }
    }
    let _ = (initial, periodic);
    let r = rx2.borrow().clone();
    told(&r, &told_end, &heard);
    Ok(axum::Json(r.to_wire(s.clock.as_ref(), 0, 0, have)))
}

async fn wait(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<WaitRequest>,
) -> ApiResult<axum::Json<JobReport>> {
    let PoolReply::Reports(rx, initial, periodic, told_end, heard) = ask(
        &s,
        PoolRequest::Subscribe {
            caller: caller.identity,
            claim_id: req.claim_id.clone(),
            incarnation: req.incarnation.clone(),
        },
    )
    .await?
    else {
        return Err(ApiError::internal("unexpected reply"));
    };
    let f = Follow { rx, initial, periodic, told_end, heard };
    Ok(axum::Json(follow(&s, f, &req).await))
}

async fn edit(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<EditRequest>,
) -> ApiResult<StatusCode> {
    ask(&s, PoolRequest::Edit { caller: caller.identity, req }).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn tail(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<andes_protocol::pool::TailRequest>,
) -> ApiResult<axum::Json<andes_protocol::pool::TailReply>> {
    let sandbox = match ask(
        &s,
        PoolRequest::Sandbox { caller: caller.identity, claim_id: req.claim_id.clone() },
    )
    .await?
    {
        PoolReply::Sandbox(p) => p,
        _ => return Err(ApiError::internal("unexpected reply")),
    };
    let reply = tokio::task::spawn_blocking(move || read_tail(&sandbox, &req))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    reply.map(axum::Json).map_err(|e| ApiError::new(StatusCode::CONFLICT, e))
}

/// A piece of the job's output or error stream, read beneath its sandbox
/// (a link or anything but a plain file there is refused, never followed).
fn read_tail(
    sandbox: &Path,
    req: &andes_protocol::pool::TailRequest,
) -> Result<andes_protocol::pool::TailReply, String> {
    use std::io::{Read, Seek};
    let name = if req.stderr { STDERR_NAME } else { STDOUT_NAME };
    let b = Beneath::open(sandbox).map_err(|e| format!("the job's sandbox: {e}"))?;
    let (mut f, size) = match b.open_file(name) {
        Ok(f) => f,
        // Nothing written yet.
        Err(_) if b.entry(name).is_err() => {
            return Ok(andes_protocol::pool::TailReply { offset: 0, data: Vec::new(), size: 0 });
        }
        Err(e) => return Err(format!("the job's {name}: {e}")),
    };
    let max = req.max.min(andes_protocol::pool::MAX_TAIL);
    let offset = req.offset.unwrap_or_else(|| size.saturating_sub(max)).min(size);
    f.seek(std::io::SeekFrom::Start(offset)).map_err(|e| e.to_string())?;
    let mut data = Vec::new();
    f.take(max.min(size - offset)).read_to_end(&mut data).map_err(|e| e.to_string())?;
    Ok(andes_protocol::pool::TailReply { offset, data, size })
}

async fn vacate_job(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<andes_protocol::pool::VacateJobRequest>,
) -> ApiResult<StatusCode> {
    ask(&s, PoolRequest::VacateJob { caller: caller.identity, req }).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn withdraw(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<WithdrawRequest>,
) -> ApiResult<axum::Json<WithdrawReply>> {
    let PoolReply::Withdrawn(withdrawn) =
        ask(&s, PoolRequest::Withdraw { caller: caller.identity, req }).await?
    else {
        return Err(ApiError::internal("unexpected reply"));
    };
    Ok(axum::Json(WithdrawReply { withdrawn }))
}

async fn alive(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<AliveRequest>,
) -> ApiResult<axum::Json<AliveReply>> {
    if req.incarnation.len() > 128 || req.claims.len() > 100_000 {
        return Err(ApiError::bad_request("the keep-alive is too large"));
    }
    match ask(&s, PoolRequest::Alive { caller: caller.identity, req }).await? {
        PoolReply::Alive(r) => Ok(axum::Json(r)),
        _ => Err(ApiError::internal("unexpected reply")),
    }
}

async fn release(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<ReleaseRequest>,
) -> ApiResult<StatusCode> {
    ask(&s, PoolRequest::Release { caller: caller.identity, claim_id: req.claim_id }).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_ids_name_their_slot_and_differ() {
        let a = new_claim_id(3);
        let b = new_claim_id(3);
        assert_ne!(a, b);
        assert_eq!(claim_slot(&a), Some(3));
        assert_eq!(a.len(), 2 + 32);
        assert_eq!(claim_slot("junk"), None);
    }

    #[test]
    fn digests_parse() {
        let d = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(parse_digest(&d), Some([0xab; 32]));
        assert_eq!(parse_digest("sha256:xyz"), None);
        assert_eq!(parse_digest(&"ab".repeat(32)), None);
    }

    /// condor_tail reads the job's stream beneath its sandbox: the last
    /// bytes, or from an offset; nothing yet is empty; a stream the job
    /// replaced with a link to a host file is refused, never followed.
    #[cfg(unix)]
    #[test]
    fn tail_reads_the_stream_beneath_the_sandbox_and_never_follows_a_link() {
        use andes_protocol::pool::TailRequest;
        let dir = tempfile::tempdir().unwrap();
        let sandbox = dir.path().join("sandbox");
        std::fs::create_dir(&sandbox).unwrap();
        let req =
            |offset, max, stderr| TailRequest { claim_id: String::new(), stderr, offset, max };
        let r = read_tail(&sandbox, &req(None, 4, false)).unwrap();
        assert_eq!((r.offset, r.data.len(), r.size), (0, 0, 0));
        std::fs::write(sandbox.join(STDOUT_NAME), b"line one\nline two\n").unwrap();
        let r = read_tail(&sandbox, &req(None, 9, false)).unwrap();
        assert_eq!((r.offset, r.data.as_slice(), r.size), (9, &b"line two\n"[..], 18));
        let r = read_tail(&sandbox, &req(Some(5), 3, false)).unwrap();
        assert_eq!((r.offset, r.data.as_slice()), (5, &b"one"[..]));
        let r = read_tail(&sandbox, &req(Some(99), 3, false)).unwrap();
        assert_eq!((r.offset, r.data.len()), (18, 0));
        std::fs::write(dir.path().join("secret"), b"host key").unwrap();
        std::os::unix::fs::symlink("../secret", sandbox.join(STDERR_NAME)).unwrap();
        let e = read_tail(&sandbox, &req(None, 100, true)).unwrap_err();
        assert!(e.contains(STDERR_NAME), "{e}");
    }

    #[test]
    fn big_outputs_and_those_past_the_budget_are_named_for_streaming() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        for n in ["a", "b", "c"] {
            std::fs::write(p.join(n), vec![1u8; 600 << 10]).unwrap();
        }
        std::fs::write(p.join("big"), vec![2u8; (2 << 20) + 1]).unwrap();
        let Outputs { files, streamed, error, .. } =
            collect_outputs(p, &ClassAd::new(), &[], 1 << 30, 1 << 20);
        assert!(error.is_none(), "{error:?}");
        let how: Vec<(&str, bool, u64)> =
            files.iter().map(|f| (f.name.as_str(), f.streamed.is_some(), f.len())).collect();
        assert_eq!(
            how,
            [
                ("a", false, 600 << 10),
                ("b", true, 600 << 10),
                ("big", true, (2 << 20) + 1),
                ("c", true, 600 << 10)
            ]
        );
        assert!(files.iter().all(|f| f.streamed.is_none() || f.data.is_empty()));
        let mut kept: Vec<_> = streamed.keys().map(String::as_str).collect();
        kept.sort();
        assert_eq!(kept, ["b", "big", "c"]);
        // The job's RequestDisk bounds streamed files too.
        let Outputs { error, .. } = collect_outputs(p, &ClassAd::new(), &[], 3 << 20, 1 << 20);
        assert!(error.unwrap().contains("exceed"));
    }

    #[test]
    fn outputs_are_new_files_and_streams_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("input.txt"), b"in").unwrap();
        std::fs::write(p.join("result.txt"), b"42").unwrap();
        std::fs::write(p.join(STDOUT_NAME), b"hello").unwrap();
        std::fs::create_dir(p.join("sub")).unwrap();
        let job = ClassAd::new();
        let Outputs { files: out, error: err, .. } =
            collect_outputs(p, &job, &[("input.txt".into(), 2)], 1 << 20, u64::MAX);
        let names: Vec<_> = out.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["_andes_stdout", "result.txt"]);
        assert!(err.is_none());
        let Outputs { error: err, .. } = collect_outputs(p, &job, &[], 3, u64::MAX);
        assert!(err.unwrap().contains("exceed"));
        let mut listed = ClassAd::new();
        listed.insert_value("TransferOutput", "result.txt, missing.txt");
        let Outputs { files: out, error: err, .. } =
            collect_outputs(p, &listed, &[], 1 << 20, u64::MAX);
        assert_eq!(out.len(), 2);
        assert!(err.unwrap().contains("missing.txt"));
    }

    #[cfg(unix)]
    #[test]
    fn outputs_never_follow_links_nor_open_special_files() {
        // The sandbox sits under EXECUTE beside the host's keys, as on a host.
        let top = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(top.path().join("keys")).unwrap();
        std::fs::write(top.path().join("keys/host"), b"SECRET KEY").unwrap();
        let p = top.path().join("execute/dir_1_1");
        std::fs::create_dir_all(&p).unwrap();
        let link =
            |target: &str, name: &str| std::os::unix::fs::symlink(target, p.join(name)).unwrap();
        // Named streams replaced by links: refused, never read.
        link("../../keys/host", STDOUT_NAME);
        link("/etc/passwd", STDERR_NAME);
        let Outputs { files: out, error: err, .. } =
            collect_outputs(&p, &ClassAd::new(), &[], 1 << 20, u64::MAX);
        assert!(out.iter().all(|f| !f.data.windows(6).any(|w| w == b"SECRET")), "{out:?}");
        let err = err.unwrap();
        assert!(err.contains("symbolic link"), "{err}");
        std::fs::remove_file(p.join(STDOUT_NAME)).unwrap();
        std::fs::remove_file(p.join(STDERR_NAME)).unwrap();
        // Unnamed outputs: links and special files are left behind.
        link("../../keys/host", "r2");
        let fifo = std::ffi::CString::new(p.join("pipe").to_str().unwrap()).unwrap();
        // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::write(p.join("real.txt"), b"mine").unwrap();
        let Outputs { files: out, error: err, .. } =
            collect_outputs(&p, &ClassAd::new(), &[], 1 << 20, u64::MAX);
        let names: Vec<_> = out.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["real.txt"]);
        assert!(err.is_none(), "{err:?}");
        // Named outputs: a link, a special file, a link on the way, a link in
        // a named directory: each refused with the reason.
        std::fs::create_dir(p.join("d")).unwrap();
        std::fs::write(p.join("d/ok"), b"fine").unwrap();
        std::os::unix::fs::symlink("../../../keys", p.join("d/keys")).unwrap();
        link("../../keys", "kdir");
        for (listed, want) in [
            ("r2", "symbolic link"),
            ("pipe", "not a regular file"),
            ("kdir/host", "symbolic link"),
            ("d", "not a regular file"),
        ] {
            let mut job = ClassAd::new();
            job.insert_value("TransferOutput", listed);
            let Outputs { files: out, error: err, .. } =
                collect_outputs(&p, &job, &[], 1 << 20, u64::MAX);
            let err = err.unwrap_or_else(|| panic!("{listed}: no refusal"));
            assert!(err.contains(want), "{listed}: {err}");
            assert!(out.iter().all(|f| !f.data.starts_with(b"SECRET")), "{listed}");
        }
        // A named directory comes back with its regular files, under its name
        // (or its contents alone with a trailing slash), as HTCondor does.
        std::fs::remove_file(p.join("d/keys")).unwrap();
        let mut job = ClassAd::new();
        job.insert_value("TransferOutput", "d, d/");
        let Outputs { files: out, error: err, .. } =
            collect_outputs(&p, &job, &[], 1 << 20, u64::MAX);
        assert!(err.is_none(), "{err:?}");
        let names: Vec<_> = out.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["d/ok", "ok"]);
        assert_eq!(std::fs::read(top.path().join("keys/host")).unwrap(), b"SECRET KEY");
    }

    #[cfg(unix)]
    #[test]
    fn inputs_are_written_without_following_links() {
        let top = tempfile::tempdir().unwrap();
        let p = top.path().join("sandbox");
        std::fs::create_dir(&p).unwrap();
        std::os::unix::fs::symlink("..", p.join("up")).unwrap();
        let files = vec![FileData::inline("up/planted", b"x".to_vec())];
        assert!(write_inputs(&p, &files, &p).is_err());
        assert!(!top.path().join("planted").exists());
    }

    #[test]
    fn inputs_are_checked() {
        let mut job = ClassAd::new();
        job.insert_value("RequestDisk", 1i64);
        let ok = vec![FileData::inline("a", vec![0; 1024])];
        assert!(check_inputs(&job, &ok).is_ok());
        let big = vec![FileData::inline("a", vec![0; 1025])];
        assert!(matches!(check_inputs(&job, &big), Err(PoolError::BadInput(_))));
        let bad = vec![FileData::inline("../x", vec![])];
        assert!(matches!(check_inputs(&job, &bad), Err(PoolError::BadInput(_))));
    }
}
