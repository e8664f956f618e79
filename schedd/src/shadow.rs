//! The schedd's side of the pool: its idle demand for the negotiator, the
//! claims it is granted, and a shadow per running job.
//!
//! * **Demand.** `POST /v1/negotiate/demand` groups the idle jobs by the
//!   attributes the negotiator names significant (autoclusters) and answers
//!   one representative ad and a count per group.
//! * **Claims.** `POST /v1/negotiate/matches` hands over matches; for each,
//!   a task claims the slot with the claim id, runs a job of the matched
//!   group on it, and then further jobs of the same group (claim reuse) until
//!   the group runs dry or CLAIM_WORKLIFE is over; then it releases the claim.
//! * **The shadow** (one per running job, inside the claim's task) activates
//!   the claim with the job ad (`$$()` expanded against the slot ad), the
//!   module by digest (sent only if the host lacks it) and the input files;
//!   then follows the starter's reports (a long poll, which also renews the
//!   job's lease on the host), forwards qedit, hold and removal, brings the
//!   output files back to the job's Iwd and tells the queue how the job ended.
//! * **Queue updates** of a claim go through one ordered lane, so a job's
//!   start, updates and end are applied in order without the claim waiting
//!   for each commit.
//! * **Reconnect.** A restarted schedd finds its running jobs (ClaimId and
//!   StartdAddr are kept in the queue) and reconnects their shadows; the jobs
//!   are not restarted and NumJobReconnects grows. A job whose host does not
//!   answer within its JobLeaseDuration goes back to idle.
//! * **Advertising.** The schedd's Scheduler ad and a Submitter ad per owner
//!   go to the collector every SCHEDD_INTERVAL and at once when the queue
//!   changes, which lets the negotiator start a cycle immediately.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use andes_protocol::pool::{
    ActivateRequest, AliveReply, AliveRequest, CLAIM_PENDING, ClaimReply, ClaimRequest,
    CollectorQuery, CollectorQueryReply, CollectorUpdate, CollectorUpdateReply, DemandGroup,
    DemandReply, DemandRequest, EditRequest, FileData, JobEnd, JobReport, MatchGrant, MatchesReply,
    MatchesRequest, NEED_MODULE, QueuedJob, ReleaseRequest, RunState, TailRequest, WaitRequest,
    WithdrawReply, WithdrawRequest,
};
use andes_protocol::{
    ApiError, Auth, Client, ClientError, ClientErrorKind, Clock, Keypair, Role, SignedJson,
};
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use classad::{ClassAd, Value};
use http::Method;
use tokio::sync::{Notify, mpsc};

use crate::deferral::{Deferral, Readiness};
use crate::job::{JobId, JobStatus};
use crate::queue::{ACTIVATION_PENDING, CLAIM_ID_ATTR, EventKind, JobOp, PoolOp, Queue};
use crate::schedd::Schedd;
use crate::spool::Spool;
use crate::transfer::{self, Staged};
use crate::userfs::Accounts;

/// The sandbox names of the job's streams: one contract, in `andes-protocol`.
pub use andes_protocol::pool::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};

/// HTCondor's HoldReasonCode 12: transferring the output files failed.
pub const HOLD_TRANSFER_OUTPUT: i64 = crate::job::hold_code::TRANSFER_OUTPUT_ERROR;
/// HTCondor's HoldReasonCode 13: transferring the input files failed.
pub const HOLD_TRANSFER_INPUT: i64 = crate::job::hold_code::TRANSFER_INPUT_ERROR;

/// The least time between two advertisements: a queue that changes with
/// every job still sends its ads (and wakes the negotiator) at most this often.
pub const ADVERTISE_GAP: Duration = Duration::from_millis(200);

/// The most time between two rounds of the schedd's ads, whatever
/// SCHEDD_INTERVAL says: a collector that restarted has them again within it.
pub const ADVERTISE_HEARTBEAT: Duration = Duration::from_secs(10);

/// How the schedd's pool side is set up (from the configuration).
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// SCHEDD_NAME.
    pub name: String,
    /// The schedd's own address (`host:port`), advertised as MyAddress.
    pub address: String,
    /// The collector's URL, if the schedd is in a pool.
    pub collector: Option<String>,
    /// CLAIM_WORKLIFE: seconds a claim takes new jobs; negative: forever.
    pub claim_worklife: i64,
    /// JobLeaseDuration for jobs that do not set it (HTCondor: 2400 s).
    pub job_lease: u64,
    /// SHADOW_QUEUE_UPDATE_INTERVAL (HTCondor: 900 s).
    pub queue_update_interval: Duration,
    /// SHADOW_JOB_CLEANUP_RETRY_DELAY (HTCondor: 30 s).
    pub cleanup_retry_delay: Duration,
    /// SHADOW_MAX_JOB_CLEANUP_RETRIES (HTCondor: 5).
    pub max_cleanup_retries: u32,
    /// SCHEDD_INTERVAL: seconds between advertisements (HTCondor: 300 s).
    pub schedd_interval: Duration,
    /// Milliseconds an activation may wait for a short job to end.
    pub activate_wait_ms: u64,
    /// Where a job's own checkpoint files are kept between runs (the
    /// schedd's spool); none: a job that exits with its CheckpointExitCode
    /// starts over.
    pub spool: Option<PathBuf>,
    /// Whose signed transparent checkpoints are kept (the pool's hosts, as
    /// raw ed25519 keys); none: any signer's (the host that restores a
    /// snapshot checks its signer again).
    pub snapshot_signers: Option<Arc<HashSet<[u8; 32]>>>,
    /// Whose rights the schedd reads and writes each owner's files with.
    pub accounts: Arc<Accounts>,
    /// ALIVE_INTERVAL: how often the schedd tells each host which claims it
    /// still holds (a host releases an unused claim not heard from for a few).
    pub alive_interval: Duration,
}

impl PoolConfig {
    /// HTCondor's defaults for a schedd named `name` at `address`.
    pub fn new(name: &str, address: &str) -> PoolConfig {
        PoolConfig {
            name: name.to_string(),
            address: address.to_string(),
            collector: None,
            claim_worklife: -1,
            job_lease: 2400,
            queue_update_interval: Duration::from_secs(900),
            cleanup_retry_delay: Duration::from_secs(30),
            max_cleanup_retries: 5,
            schedd_interval: Duration::from_secs(300),
            activate_wait_ms: 100,
            spool: None,
            snapshot_signers: None,
            accounts: Arc::new(Accounts::current()),
            alive_interval: Duration::from_secs(10),
        }
    }
}

/// Jobs per activation at most (see `run_claim`).
const MAX_BATCH: usize = 128;

/// How a job's shadow begins.
/// Why an activation gave no report.
#[derive(Debug)]
struct NotActivated {
    reason: String,
    /// The request may have reached the host (the connection failed after it
    /// was sent): the job may be running there.
    ambiguous: bool,
}

enum Start {
    /// It activates the claim with the job alone.
    Activate,
    /// The schedd restarted: it reconnects to the running job.
    Reconnect,
    /// Its activation went unanswered (the reason): the host says whether
    /// it runs; if not, that counts as a failed activation.
    Unanswered(String),
    /// The job was queued behind others; this is the claim's last report.
    Queued(Box<JobReport>),
}

impl Start {
    fn into_report(self) -> Option<JobReport> {
        match self {
            Start::Queued(r) => Some(*r),
            _ => None,
        }
    }
}

/// The ends of an activation's jobs seen so far, by `GlobalJobId`: a job
/// queued behind others learns how it ended from any report that said so.
#[derive(Default)]
struct Ends {
    ended: HashMap<String, JobEnd>,
    /// The last report viewed, as the host sent it (see `light`): what the
    /// job queued behind starts from. A view of an ended job rewrites its
    /// report as that job's, so the report's own job (by then perhaps the
    /// next one, already running) is kept here.
    last: Option<JobReport>,
}

/// What a report says of one job.
enum Viewed {
    /// It is about the job (running, or how it ended).
    Mine(JobReport),
    /// The job has not run yet (or was dropped: see `queued` and `claim_alive`).
    NotYet(JobReport),
}

impl Ends {
    /// Notes the ends `report` carries, and says what it tells of job `gid`.
    fn view(&mut self, mut report: JobReport, gid: &str) -> Viewed {
        for e in report.ended.drain(..) {
            self.ended.insert(e.job.clone(), e);
        }
        self.last = Some(light(&report));
        let current = report.job.as_deref() == Some(gid);
        match self.ended.get(gid) {
            // The end of a job that is not the report's own is in its entry;
            // the report's own keeps everything else it says (snapshots,
            // saved states).
            Some(e) if !current || report.state == RunState::Exited => {
                if !current {
                    report.saved_state = None;
                    report.snapshot = None;
                }
                report.job = Some(gid.to_string());
                report.state = RunState::Exited;
                report.update = e.update.clone();
                report.ending = Some(e.ending.clone());
                report.outputs = e.outputs.clone();
                report.evicted = e.evicted;
                Viewed::Mine(report)
            }
            _ if current => Viewed::Mine(report),
            _ => Viewed::NotYet(report),
        }
    }

    /// The report the job queued behind starts from, once the job `mine`
    /// (the last viewed) is over: the last report as the host sent it.
    fn behind(&mut self, mine: &JobReport) -> JobReport {
        self.last.take().unwrap_or_else(|| light(mine))
    }
}

/// A report with no job, for the claim as it is (`alive`) when none came.
fn no_report(alive: bool) -> JobReport {
    JobReport {
        version: 0,
        state: RunState::Idle,
        job: None,
        update: String::new(),
        ending: None,
        outputs: Vec::new(),
        evicted: false,
        claim_alive: alive,
        saved_state: None,
        snapshot: None,
        ended: Vec::new(),
        queued: 0,
    }
}

/// `r` without what only its own job needs, for the job queued behind.
fn light(r: &JobReport) -> JobReport {
    JobReport {
        version: r.version,
        state: r.state,
        job: r.job.clone(),
        queued: r.queued,
        evicted: r.evicted,
        ..no_report(r.claim_alive)
    }
}

/// Asks the host to drop job `id`, queued on a claim behind others, before
/// it starts: true when it will not run there.
async fn withdraw(link: &Link, claim_id: &str, id: JobId) -> bool {
    let req =
        WithdrawRequest { claim_id: claim_id.to_string(), cluster: id.cluster, proc: id.proc };
    match link.short.call::<_, WithdrawReply>(Method::POST, "/v1/host/withdraw", Some(&req)).await {
        Ok(r) => r.withdrawn,
        Err(e) => {
            tracing::debug!("job {id}: withdrawing it from its claim: {e}");
            false
        }
    }
}

/// [`withdraw`] as a task of its own, from the host and claim `at`.
fn withdraw_soon((link, claim_id): (Link, String), id: JobId) {
    tokio::spawn(async move { withdraw(&link, &claim_id, id).await });
}

/// What the claim's shadow is told while its job runs.
#[derive(Debug, Clone)]
enum Signal {
    /// qedit: these attributes changed.
    Edit(ClassAd),
    /// The job was held or removed: stop it.
    Stop,
    /// condor_vacate_job: have the host vacate it (it checkpoints if it can
    /// and comes back idle).
    Vacate(String),
}

#[derive(Default)]
struct Book {
    /// Jobs handed to a claim (matched, running or ending): not idle demand.
    busy: HashSet<JobId>,
    /// Autocluster ids by key.
    ac_ids: HashMap<String, u32>,
    /// Idle jobs of each autocluster, as of the last demand.
    ac_jobs: HashMap<u32, VecDeque<JobId>>,
    /// Running shadows.
    shadows: HashMap<JobId, mpsc::UnboundedSender<Signal>>,
    /// Jobs queued on a claim's host behind others, whose shadows have not
    /// started yet: the host and claim to withdraw each from if it is held
    /// or removed meanwhile.
    queued: HashMap<JobId, (Link, String)>,
    /// Matches being claimed or claims held.
    claims: usize,
}

struct Inner {
    queue: Queue,
    clock: Arc<dyn Clock>,
    cfg: PoolConfig,
    keypair: Arc<Keypair>,
    clients: Mutex<HashMap<String, Client>>,
    state: Mutex<Book>,
    advertise: Notify,
    /// Wakes the advertiser before its gap is over: new idle jobs where the
    /// last ad said there were none (an idle pool starts them at once).
    urgent: Notify,
    /// TotalIdleJobs of the last Scheduler ad sent.
    last_idle: std::sync::atomic::AtomicI64,
    /// When deferred idle jobs next need a look: (Unix seconds, job), at the
    /// instant each becomes matchable or its window closes.
    wakes: Mutex<BTreeSet<(i64, JobId)>>,
    /// Wakes the deferral timer when an earlier wake was added.
    rewake: Notify,
    /// This run of the schedd, random: hosts release the unused claims of an
    /// earlier run as soon as they hear of a new one.
    incarnation: String,
    /// The claims this run holds: claim id → host address (for keep-alives).
    held: Mutex<HashMap<String, String>>,
}

/// The schedd's pool side; cheap to clone.
#[derive(Clone)]
pub struct ScheddPool {
    inner: Arc<Inner>,
}

/// A fresh random incarnation id (128 bits, hex).
fn new_incarnation() -> String {
    let mut b = [0u8; 16];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut b);
    hex::encode(b)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ScheddPool {
    /// Starts the pool side of `schedd`: follows its queue's events,
    /// advertises to the collector, and reconnects the shadows of jobs that
    /// were running when the schedd stopped. Must run inside a tokio runtime.
    pub fn start(schedd: &Schedd, cfg: PoolConfig, keypair: Arc<Keypair>) -> ScheddPool {
        let inner = Arc::new(Inner {
            queue: schedd.queue.clone(),
            clock: schedd.clock(),
            cfg,
            keypair,
            clients: Mutex::new(HashMap::new()),
            state: Mutex::new(Book::default()),
            advertise: Notify::new(),
            urgent: Notify::new(),
            last_idle: std::sync::atomic::AtomicI64::new(0),
            wakes: Mutex::new(BTreeSet::new()),
            rewake: Notify::new(),
            incarnation: new_incarnation(),
            held: Mutex::new(HashMap::new()),
        });
        let pool = ScheddPool { inner };
        let mut events = schedd.take_events();
        {
            let inner = pool.inner.clone();
            tokio::spawn(async move {
                while let Some(batch) = events.recv().await {
                    inner.on_events(&batch);
                }
            });
        }
        if pool.inner.cfg.collector.is_some() {
            let inner = pool.inner.clone();
            tokio::spawn(async move { inner.advertise_loop().await });
        }
        {
            // Each idle job's deferral time is read once the schedd serves
            // (and its cron jobs have their next runs): see
            // `Schedd::defer_startup`.
            let inner = pool.inner.clone();
            let schedd = schedd.clone();
            tokio::spawn(async move {
                schedd.started().await;
                let ids: Vec<JobId> = inner
                    .queue
                    .read()
                    .jobs()
                    .filter(|v| v.proc.status == JobStatus::Idle)
                    .map(|v| v.id)
                    .collect();
                for id in ids {
                    inner.watch_deferral(id, None);
                }
                inner.deferral_loop().await
            });
        }
        pool.reconnect_all();
        {
            let inner = pool.inner.clone();
            tokio::spawn(async move { inner.alive_loop().await });
        }
        pool
    }

    /// The negotiator's routes, and users' `POST /v1/tail` (condor_tail: a
    /// running job's output as it is written, fetched from its host).
    pub fn router(&self, auth: &Auth) -> Router {
        self.routes(auth).router
    }

    /// [`ScheddPool::router`] with who may call each route.
    pub fn routes(&self, auth: &Auth) -> andes_protocol::routes::Served {
        use http::Method as M;
        let negotiator = &[Role::Negotiator, Role::Admin];
        andes_protocol::routes::Api::new()
            .route(M::POST, "/v1/negotiate/demand", negotiator, post(demand))
            .route(M::POST, "/v1/negotiate/matches", negotiator, post(matches))
            .route(M::POST, "/v1/tail", &[Role::User, Role::Admin], post(tail))
            .finish(auth, self.clone())
    }

    /// Running shadows (for status and tests).
    pub fn shadows(&self) -> usize {
        lock(&self.inner.state).shadows.len()
    }

    fn reconnect_all(&self) {
        let running: Vec<(JobId, String, String)> = {
            let st = self.inner.queue.read();
            st.jobs()
                .filter(|v| {
                    v.proc.status.is_active()
                        || v.proc.status == JobStatus::Removed
                        || (v.proc.status == JobStatus::Idle
                            && v.proc.ad.contains(ACTIVATION_PENDING))
                })
                .filter_map(|v| {
                    let ad = v.ad();
                    let claim = str_attr(&ad, CLAIM_ID_ATTR)?;
                    let addr = str_attr(&ad, "StartdAddr")?;
                    Some((v.id, claim, addr))
                })
                .collect()
        };
        // Jobs of one claim (a batch the schedd stopped in the middle of)
        // are followed in turn, and the claim released after the last.
        let mut claims: HashMap<(String, String), Vec<JobId>> = HashMap::new();
        for (id, claim_id, addr) in running {
            claims.entry((claim_id, addr)).or_default().push(id);
        }
        for ((claim_id, addr), mut ids) in claims {
            ids.sort();
            let inner = self.inner.clone();
            lock(&inner.state).busy.extend(ids.iter().copied());
            lock(&inner.held).insert(claim_id.clone(), addr.clone());
            tokio::spawn(async move {
                let lane = Lane::start(inner.clone());
                let link = inner.link(&addr);
                let claim = ClaimCtx { claim_id, slot_ad: ClassAd::new(), addr };
                let mut ends = Ends::default();
                for id in ids {
                    inner.shadow(&link, &claim, id, &lane.tx, Start::Reconnect, &mut ends).await;
                }
                // Released (or its end acknowledged) once all is committed.
                lane.tx.committed().await;
                inner.release(&link, &claim.claim_id).await;
                lock(&inner.held).remove(&claim.claim_id);
                lane.close().await;
            });
        }
    }
}

fn str_attr(ad: &ClassAd, name: &str) -> Option<String> {
    match ad.eval_attr(name) {
        Value::Str(s) if !s.is_empty() => Some(s.to_string()),
        _ => None,
    }
}

/// The claim a shadow runs on.
#[derive(Clone)]
struct ClaimCtx {
    claim_id: String,
    slot_ad: ClassAd,
    addr: String,
}

/// Clients for one host: short calls and long polls.
#[derive(Clone)]
struct Link {
    short: Client,
    long: Client,
}

/// An ordered lane of queue updates for one claim.
struct Lane {
    tx: LaneTx,
    done: tokio::task::JoinHandle<()>,
}

/// Where a claim's shadows send their queue updates: straight to the
/// lane, or (for a batch being taken in) gathered until `flush`, so the
/// batch's updates go in one commit.
#[derive(Clone)]
struct LaneTx {
    tx: mpsc::UnboundedSender<LaneOp>,
    held: Option<Arc<Mutex<Vec<LaneOp>>>>,
}

impl LaneTx {
    fn send(&self, op: LaneOp) {
        match &self.held {
            Some(h) => lock(h).push(op),
            None => {
                let _ = self.tx.send(op);
            }
        }
    }

    /// This lane, gathering updates until `flush`.
    fn gathering(&self) -> LaneTx {
        LaneTx { tx: self.tx.clone(), held: Some(Arc::default()) }
    }

    /// Sends what was gathered, then waits until everything sent so far is
    /// committed. A shadow does this before it asks anything more of the
    /// claim's host, since the host takes its next request as the
    /// acknowledgement that what it reported is kept.
    async fn committed(&self) {
        self.flush();
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.tx.send(LaneOp::Sync(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// Sends what was gathered (before waiting on anything, so the queue is
    /// not behind what the shadows know).
    fn flush(&self) {
        if let Some(h) = &self.held {
            let ops = std::mem::take(&mut *lock(h));
            if !ops.is_empty() {
                let _ = self.tx.send(LaneOp::Many(ops));
            }
        }
    }
}

enum LaneOp {
    Pool(JobId, PoolOp),
    Exited(JobId, ClassAd),
    /// The job's part is over: it is no longer busy.
    Free(JobId),
    /// Several, in order (what a batch's shadows said, sent at once).
    Many(Vec<LaneOp>),
    /// Answered once everything sent before it is committed.
    Sync(tokio::sync::oneshot::Sender<()>),
}

impl Lane {
    fn start(inner: Arc<Inner>) -> Lane {
        let (tx, mut rx) = mpsc::unbounded_channel::<LaneOp>();
        let done = tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                // Everything the claim has said meanwhile goes in one commit,
                // in order; the jobs whose part is over are freed after it.
                let mut ops = Vec::new();
                let mut frees = Vec::new();
                let mut syncs = Vec::new();
                let mut todo = vec![first];
                while let Some(op) = todo.pop().or_else(|| rx.try_recv().ok()) {
                    match op {
                        LaneOp::Pool(id, op) => ops.push(JobOp::Pool(id, op)),
                        LaneOp::Exited(id, ending) => ops.push(JobOp::Exited(id, ending)),
                        LaneOp::Free(id) => frees.push(id),
                        LaneOp::Many(many) => todo.extend(many.into_iter().rev()),
                        LaneOp::Sync(tx) => syncs.push(tx),
                    }
                }
                inner.apply_in_order(ops).await;
                for id in frees {
                    inner.free(id);
                }
                for tx in syncs {
                    let _ = tx.send(());
                }
            }
        });
        Lane { tx: LaneTx { tx, held: None }, done }
    }

    fn send(&self, op: LaneOp) {
        self.tx.send(op);
    }

    async fn close(self) {
        drop(self.tx);
        let _ = self.done.await;
    }
}

fn not_found(e: &ClientError) -> bool {
    matches!(&e.kind, ClientErrorKind::Status { status, .. }
        if status.as_u16() == 404 || status.as_u16() == 403)
}

fn status_reason(e: &ClientError) -> Option<(u16, &str)> {
    match &e.kind {
        ClientErrorKind::Status { status, reason } => Some((status.as_u16(), reason.as_str())),
        _ => None,
    }
}

impl Inner {
    fn link(&self, addr: &str) -> Link {
        let mut c = lock(&self.clients);
        let short = match c.get(addr) {
            Some(cl) => cl.clone(),
            None => {
                let url = format!("http://{addr}");
                match Client::new(&url, self.keypair.clone()) {
                    Ok(cl) => {
                        c.insert(addr.to_string(), cl.clone());
                        cl
                    }
                    Err(e) => {
                        tracing::warn!("host address {addr}: {e}");
                        // An unusable address: every call fails, and the
                        // job goes back to idle.
                        Client::new("http://127.0.0.1:1", self.keypair.clone())
                            .expect("a fixed valid URL")
                    }
                }
            }
        };
        let long = short.clone().with_timeout(Duration::from_secs(3600));
        Link { short, long }
    }

    fn on_events(&self, batch: &[crate::queue::QueueEvent]) {
        let mut wake = false;
        let mut st = lock(&self.state);
        for e in batch {
            match &e.kind {
                EventKind::Held(_) | EventKind::Removed(_) => {
                    if let Some(s) = st.shadows.get(&e.id) {
                        let _ = s.send(Signal::Stop);
                    }
                    if let Some(at) = st.queued.remove(&e.id) {
                        withdraw_soon(at, e.id);
                    }
                    if matches!(e.kind, EventKind::Removed(_))
                        && may_have_checkpoints(&e.ad)
                        && let Some(spool) = self.spool()
                    {
                        // Its checkpoints are of no more use.
                        spool.remove_job(e.id);
                    }
                    wake = true;
                }
                EventKind::VacateAsked(why) => {
                    if let Some(s) = st.shadows.get(&e.id) {
                        let _ = s.send(Signal::Vacate(why.clone()));
                    }
                }
                EventKind::Edited(attr) => {
                    self.watch_deferral(e.id, Some(&e.ad));
                    if let Some(s) = st.shadows.get(&e.id)
                        && let Some(expr) = e.ad.get(attr)
                    {
                        let mut ad = ClassAd::new();
                        ad.insert(attr.as_str(), expr.clone());
                        let _ = s.send(Signal::Edit(ad));
                    }
                }
                EventKind::Submitted
                | EventKind::Released(_)
                | EventKind::Requeued
                | EventKind::Evicted { .. }
                | EventKind::Note(_) => {
                    self.watch_deferral(e.id, Some(&e.ad));
                    wake = true;
                    if self.last_idle.load(std::sync::atomic::Ordering::Relaxed) == 0 {
                        self.urgent.notify_one();
                    }
                }
                _ => wake = true,
            }
        }
        drop(st);
        if wake {
            self.advertise.notify_one();
        }
    }

    /// The deferral of an idle job at `now`, if it has one (its ad from the
    /// queue unless given).
    fn deferral_of(&self, ad: &ClassAd, now: i64) -> Option<Deferral> {
        match Deferral::of(ad, now, self.queue.deferral_config().1)? {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::debug!("{e}");
                None
            }
        }
    }

    /// True when an idle job may be offered to the negotiator now: it has no
    /// deferral, or its deferral is ready.
    fn offerable(&self, v: &crate::queue::JobView<'_>, now: i64) -> bool {
        if !v.proc.ad.contains("DeferralTime") && !v.cluster.ad.contains("DeferralTime") {
            return true;
        }
        match self.deferral_of(&v.ad(), now) {
            Some(d) => matches!(d.readiness(now), Readiness::Ready { .. }),
            None => true,
        }
    }

    /// Schedules a look at a deferred idle job when it becomes matchable or
    /// its window closes.
    fn watch_deferral(&self, id: JobId, ad: Option<&ClassAd>) {
        let owned;
        let ad = match ad {
            Some(a) => a,
            None => match self.queue.read().job(id) {
                Some(v)
                    if v.proc.ad.contains("DeferralTime")
                        || v.cluster.ad.contains("DeferralTime") =>
                {
                    owned = v.ad();
                    &owned
                }
                _ => return,
            },
        };
        if !ad.contains("DeferralTime") {
            return;
        }
        let now = self.clock.now();
        let Some(d) = self.deferral_of(ad, now) else { return };
        let at = match d.readiness(now) {
            Readiness::Early { offer_at } => offer_at,
            Readiness::Ready { miss_at } => miss_at,
            Readiness::Missed { .. } => now,
        };
        let mut w = lock(&self.wakes);
        let earliest = w.first().is_none_or(|f| at < f.0);
        w.insert((at, id));
        drop(w);
        if earliest {
            self.rewake.notify_one();
        }
    }

    /// Wakes at each deferred job's instants: offers it when it becomes
    /// matchable (at once, not at the next advertisement), and hands jobs
    /// whose window closed unmatched to the queue.
    async fn deferral_loop(self: Arc<Self>) {
        loop {
            let next = lock(&self.wakes).first().map(|w| w.0);
            let delay = match next {
                Some(t) => Duration::from_millis(
                    (t.saturating_mul(1000) - self.clock.now_ms()).clamp(0, 60_000) as u64,
                ),
                None => Duration::from_secs(3600),
            };
            if !delay.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = self.rewake.notified() => continue,
                }
            }
            let now = self.clock.now();
            let due: Vec<JobId> = {
                let mut w = lock(&self.wakes);
                let mut due = Vec::new();
                while let Some(&(t, id)) = w.first() {
                    if t > now {
                        break;
                    }
                    w.pop_first();
                    due.push(id);
                }
                due
            };
            if due.is_empty() {
                continue;
            }
            let (mut ready, mut missed) = (false, Vec::new());
            let mut again = Vec::new();
            {
                let busy = lock(&self.state).busy.clone();
                let st = self.queue.read();
                for id in due {
                    let Some(v) = st.job(id) else { continue };
                    if v.proc.status != JobStatus::Idle || busy.contains(&id) {
                        continue;
                    }
                    let Some(d) = self.deferral_of(&v.ad(), now) else { continue };
                    match d.readiness(now) {
                        Readiness::Early { offer_at } => again.push((offer_at, id)),
                        Readiness::Ready { miss_at } => {
                            ready = true;
                            again.push((miss_at, id));
                        }
                        Readiness::Missed { .. } => missed.push(id),
                    }
                }
            }
            lock(&self.wakes).extend(again);
            if ready {
                self.urgent.notify_one();
                self.advertise.notify_one();
            }
            if !missed.is_empty()
                && let Err(e) = self.queue.deferral_missed(missed, now).await
            {
                tracing::warn!("deferred jobs that missed their window: {e}");
            }
        }
    }

    async fn advertise_loop(self: Arc<Self>) {
        let Some(url) = self.cfg.collector.clone() else { return };
        let client = match Client::new(&url, self.keypair.clone()) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("COLLECTOR_HOST {url}: {e}");
                return;
            }
        };
        let mut failing = false;
        let mut incarnation: Option<String> = None;
        loop {
            // Every ad, again if the collector turns out to have restarted
            // (it holds none of ours) as they go.
            let mut restarted = false;
            for (kind, ad) in self.ads() {
                if kind == "Scheduler"
                    && let Value::Int(n) = ad.eval_attr("TotalIdleJobs")
                {
                    self.last_idle.store(n, std::sync::atomic::Ordering::Relaxed);
                }
                let body = CollectorUpdate { kind: kind.into(), ad: ad.to_string(), private: None };
                match client.post_json("/v1/collector/update", &body).await {
                    Ok(r) if r.status.is_success() => {
                        failing = false;
                        if let Ok(reply) = r.json::<CollectorUpdateReply>()
                            && !reply.incarnation.is_empty()
                        {
                            restarted |=
                                incarnation.as_ref().is_some_and(|i| *i != reply.incarnation);
                            incarnation = Some(reply.incarnation);
                        }
                    }
                    Ok(r) => {
                        if !failing {
                            tracing::warn!(
                                "the collector refused the {kind} ad: {}",
                                r.error_reason().unwrap_or_default()
                            );
                        }
                        failing = true;
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!("cannot advertise to the collector: {e}");
                        }
                        failing = true;
                    }
                }
            }
            if restarted {
                tracing::info!("the collector restarted: sending every ad again");
                continue;
            }
            // Changes arriving within ADVERTISE_GAP go out together, unless
            // they bring work to a pool that had none.
            tokio::select! {
                _ = tokio::time::sleep(ADVERTISE_GAP) => {}
                _ = self.urgent.notified() => {}
            }
            // A failing collector is tried again every second; a quiet
            // schedd still sends its ads every ADVERTISE_HEARTBEAT, so that a
            // collector that restarted has them again within seconds.
            let wait = if failing {
                Duration::from_secs(1)
            } else {
                self.cfg.schedd_interval.min(ADVERTISE_HEARTBEAT)
            };
            tokio::select! {
                _ = self.advertise.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// The Scheduler ad and one Submitter ad per owner.
    fn ads(&self) -> Vec<(&'static str, ClassAd)> {
        let busy = lock(&self.state).busy.clone();
        let st = self.queue.read();
        let mut per: HashMap<String, [i64; 3]> = HashMap::new();
        for v in st.jobs() {
            let slot = match v.proc.status {
                JobStatus::Idle if !busy.contains(&v.id) => 0,
                s if s.is_active() => 1,
                JobStatus::Held => 2,
                _ => continue,
            };
            per.entry(v.owner().to_string()).or_default()[slot] += 1;
        }
        drop(st);
        let now = self.clock.now();
        let mut total = [0i64; 3];
        let mut out = Vec::new();
        let mut owners: Vec<_> = per.into_iter().collect();
        owners.sort();
        for (owner, n) in &owners {
            for i in 0..3 {
                total[i] += n[i];
            }
            let mut ad = ClassAd::new();
            ad.insert_value("Name", format!("{owner}@{}", self.cfg.name));
            ad.insert_value("Owner", owner.as_str());
            ad.insert_value("ScheddName", self.cfg.name.as_str());
            ad.insert_value("MyAddress", self.cfg.address.as_str());
            ad.insert_value("IdleJobs", n[0]);
            ad.insert_value("RunningJobs", n[1]);
            ad.insert_value("HeldJobs", n[2]);
            ad.insert_value("MyCurrentTime", now);
            out.push(("Submitter", ad));
        }
        let mut ad = ClassAd::new();
        ad.insert_value("Name", self.cfg.name.as_str());
        ad.insert_value("Machine", self.cfg.name.rsplit('@').next().unwrap_or(&self.cfg.name));
        ad.insert_value("MyAddress", self.cfg.address.as_str());
        ad.insert_value("TotalIdleJobs", total[0]);
        ad.insert_value("TotalRunningJobs", total[1]);
        ad.insert_value("TotalHeldJobs", total[2]);
        ad.insert_value("IdleJobs", total[0]);
        ad.insert_value("RunningJobs", total[1]);
        ad.insert_value("HeldJobs", total[2]);
        ad.insert_value("NumUsers", owners.len() as i64);
        ad.insert_value("MyCurrentTime", now);
        // The Scheduler ad first: it is what wakes the negotiator.
        out.insert(0, ("Scheduler", ad));
        out
    }

    fn demand(&self, significant: &[String]) -> DemandReply {
        let mut sig: Vec<String> = significant.to_vec();
        for must in ["Requirements", "Rank", "RequestMemory", "RequestDisk", "RequestCpus"] {
            if !sig.iter().any(|s| s.eq_ignore_ascii_case(must)) {
                sig.push(must.to_string());
            }
        }
        let now = self.clock.now();
        let mut state = lock(&self.state);
        let st = self.queue.read();
        let mut groups: HashMap<u32, (String, ClassAd, VecDeque<JobId>)> = HashMap::new();
        let mut running: HashMap<String, u32> = HashMap::new();
        let mut cluster_keys: HashMap<u32, String> = HashMap::new();
        for v in st.jobs() {
            if v.proc.status.is_active() {
                *running.entry(v.owner().to_string()).or_default() += 1;
                continue;
            }
            if v.proc.status != JobStatus::Idle || state.busy.contains(&v.id) {
                continue;
            }
            // An activation sent and not resolved: its host may be running it.
            if v.proc.ad.contains(ACTIVATION_PENDING) {
                continue;
            }
            if v.routed_away() || !self.offerable(&v, now) {
                continue;
            }
            let base = cluster_keys.entry(v.id.cluster).or_insert_with(|| {
                let mut k = v.owner().to_string();
                for a in &sig {
                    k.push('\u{1}');
                    if let Some(e) = v.cluster.ad.get(a) {
                        k.push_str(&e.to_string());
                    }
                }
                k
            });
            let mut key = base.clone();
            for a in &sig {
                if let Some(e) = v.proc.ad.get(a) {
                    key.push('\u{2}');
                    key.push_str(a);
                    key.push('=');
                    key.push_str(&e.to_string());
                }
            }
            let next = state.ac_ids.len() as u32 + 1;
            let ac = *state.ac_ids.entry(key).or_insert(next);
            groups
                .entry(ac)
                .or_insert_with(|| (v.owner().to_string(), v.ad(), VecDeque::new()))
                .2
                .push_back(v.id);
        }
        drop(st);
        // The key table only grows with distinct job shapes; bound it.
        if state.ac_ids.len() > 1_000_000 {
            state.ac_ids.clear();
        }
        let mut reply = DemandReply {
            schedd: self.cfg.name.clone(),
            groups: Vec::with_capacity(groups.len()),
            running: running.into_iter().collect(),
        };
        state.ac_jobs.clear();
        for (ac, (owner, ad, ids)) in groups {
            reply.groups.push(DemandGroup {
                autocluster: ac,
                submitter: owner,
                ad: ad.to_string(),
                idle: ids.len() as u32,
            });
            state.ac_jobs.insert(ac, ids);
        }
        reply.groups.sort_by_key(|g| g.autocluster);
        reply
    }

    /// The next idle job of an autocluster not yet handed to a claim.
    /// The next job of autocluster `ac` that may run now, on `slot` (both
    /// Requirements, as the negotiator judges them) when given: a job edited
    /// since its autocluster was filed may no longer fit the claim it would
    /// reuse; it waits for the next negotiation, filed anew.
    fn next_job(&self, ac: u32, slot: Option<&ClassAd>) -> Option<JobId> {
        let mut state = lock(&self.state);
        let st = self.queue.read();
        loop {
            let id = state.ac_jobs.get_mut(&ac)?.pop_front()?;
            if state.busy.contains(&id) {
                continue;
            }
            if st.job(id).is_some_and(|v| {
                v.proc.status == JobStatus::Idle
                    && !v.proc.ad.contains(ACTIVATION_PENDING)
                    && !v.routed_away()
                    && self.offerable(&v, self.clock.now())
                    && slot.is_none_or(|s| classad::symmetric_match(&v.ad(), s))
            }) {
                state.busy.insert(id);
                return Some(id);
            }
        }
    }

    async fn release(&self, link: &Link, claim_id: &str) {
        let req = ReleaseRequest { claim_id: claim_id.to_string() };
        if let Err(e) = link.short.post_json("/v1/host/release", &req).await {
            tracing::debug!("releasing claim: {e}");
        }
    }

    /// Claims a matched slot and runs jobs of the group on it.
    async fn run_claim(self: Arc<Self>, grant: MatchGrant, first: JobId) {
        let link = self.link(&grant.host_address);
        let slot_ad = classad::parse_ad(&grant.slot_ad).unwrap_or_default();
        let lane = Lane::start(self.clone());
        let Some(job_ad) = self.queue.read().job(first).map(|v| v.ad()) else {
            lane.send(LaneOp::Free(first));
            lane.close().await;
            return;
        };
        let owner = str_attr(&job_ad, "Owner").unwrap_or_default();
        let req = ClaimRequest {
            claim_id: grant.claim_id.clone(),
            owner: owner.clone(),
            user: None,
            client_machine: self.cfg.name.clone(),
            ad: job_ad.to_string(),
            incarnation: Some(self.incarnation.clone()),
            alive_interval: Some(self.cfg.alive_interval.as_secs().max(1)),
        };
        let reply: Result<ClaimReply, _> =
            link.short.call(Method::POST, "/v1/host/claim", Some(&req)).await;
        match reply {
            Ok(r) if r.accepted => {}
            Ok(r) => {
                tracing::info!(
                    "claim on {} refused: {}",
                    str_attr(&slot_ad, "Name").unwrap_or_default(),
                    r.reason.unwrap_or_default()
                );
                lane.send(LaneOp::Free(first));
                lane.close().await;
                return;
            }
            Err(e) => {
                tracing::warn!("cannot claim a slot: {e}");
                lane.send(LaneOp::Free(first));
                lane.close().await;
                return;
            }
        }
        lane.send(LaneOp::Pool(first, PoolOp::Matched));
        lock(&self.held).insert(grant.claim_id.clone(), grant.host_address.clone());
        let claim = ClaimCtx { claim_id: grant.claim_id, slot_ad, addr: grant.host_address };
        // The claim's age to the millisecond: with whole seconds a claim of
        // CLAIM_WORKLIFE = 1 would last anywhere from 0 to 2 s.
        let since = tokio::time::Instant::now();
        let mut job = first;
        // Jobs per activation: grows while the claim's jobs are short (a
        // batch costs one round trip, not one per job), back to one as soon
        // as they are not.
        let mut batch = 1usize;
        // How long each job of the last batch took.
        let mut per_job = Duration::ZERO;
        let mut alive = true;
        loop {
            let t = tokio::time::Instant::now();
            let n;
            // A batch does not outlast CLAIM_WORKLIFE by more than a job: the
            // claim takes no new jobs after it, queued ones included.
            let mut size = batch;
            if self.cfg.claim_worklife >= 0 && !per_job.is_zero() {
                let left = Duration::from_secs(self.cfg.claim_worklife as u64)
                    .saturating_sub(since.elapsed());
                let fit = (left.as_nanos() / per_job.as_nanos()).max(1);
                size = size.min(usize::try_from(fit).unwrap_or(usize::MAX));
            }
            match self.plain_batch(job, grant.autocluster, size, &claim) {
                Some((ids, req, lease)) => {
                    n = ids.len();
                    let digest = req.module_digest.clone();
                    // Recorded before it is sent (see PoolOp::Activating),
                    // for every job of the batch: a schedd that dies while
                    // the host runs them asks the host after its restart.
                    let intent = PoolOp::Activating(self.started_attrs(&claim));
                    let sent = match self.queue.pool(ids.clone(), intent, self.clock.now()).await {
                        Ok(()) => self.activate(&link, &req, &digest, lease, Vec::new()).await,
                        Err(e) => Err(NotActivated {
                            reason: format!("recording the activation: {e}"),
                            ambiguous: false,
                        }),
                    };
                    if let Err(e) = &sent
                        && e.ambiguous
                    {
                        // The host may run them: it says which, as to a
                        // restarted schedd; each is followed, or goes back
                        // to idle, never started twice.
                        tracing::warn!("job {job}: activation unanswered: {}", e.reason);
                        for (k, id) in ids.into_iter().enumerate() {
                            // The first job counts a failure if none ran.
                            let start = match k {
                                0 => Start::Unanswered(e.reason.clone()),
                                _ => Start::Reconnect,
                            };
                            let mut ends = Ends::default();
                            self.shadow(&link, &claim, id, &lane.tx, start, &mut ends).await;
                        }
                        break;
                    }
                    let sent = sent.map_err(|e| e.reason);
                    if let Err(e) = &sent {
                        // The first job counts the failure; the rest just
                        // go back to idle.
                        let failed = PoolOp::ActivationFailed(claim.claim_id.clone(), e.clone());
                        lane.send(LaneOp::Pool(ids[0], failed));
                        for id in &ids[1..] {
                            let op = PoolOp::NotStarted(claim.claim_id.clone());
                            lane.send(LaneOp::Pool(*id, op));
                        }
                    }
                    if sent.is_ok() {
                        self.note_queued(&link, &claim.claim_id, &ids[1..]);
                    }
                    let report = match sent {
                        Ok(r) => r,
                        Err(e) => {
                            // None of them started: they stay idle.
                            tracing::warn!("job {job}: activation failed: {e}");
                            for id in ids {
                                lane.send(LaneOp::Free(id));
                            }
                            break;
                        }
                    };
                    // The batch's ends are taken in, and committed, before
                    // anything more is asked of the host: it takes the next
                    // request (an activation resets its list of ends) as the
                    // acknowledgement that they are kept.
                    alive &= self.take_in(&link, &claim, &lane.tx, ids, report).await;
                }
                None => {
                    n = 1;
                    let mut ends = Ends::default();
                    let start = Start::Activate;
                    alive &= self.shadow(&link, &claim, job, &lane.tx, start, &mut ends).await.0;
                }
            }
            if !alive {
                break;
            }
            per_job = t.elapsed() / n as u32;
            batch = if per_job < Duration::from_millis(10) {
                (batch * 2).min(MAX_BATCH)
            } else if per_job > Duration::from_millis(50) {
                1
            } else {
                batch
            };
            let worklife = self.cfg.claim_worklife;
            if worklife >= 0 && since.elapsed() >= Duration::from_secs(worklife as u64) {
                break;
            }
            match self.next_job(grant.autocluster, Some(&claim.slot_ad)) {
                Some(next) => job = next,
                None => break,
            }
        }
        // Released (or, for a claim that already ended, its end acknowledged)
        // once everything it reported is committed.
        lane.tx.committed().await;
        self.release(&link, &claim.claim_id).await;
        lock(&self.held).remove(&claim.claim_id);
        lock(&self.state).claims -= 1;
        lane.close().await;
    }

    /// Tells each host, every ALIVE_INTERVAL, which of its claims this run
    /// of the schedd holds (HTCondor's claim keep-alive); at start, tells the
    /// hosts whose slots the collector shows claimed by this schedd that it
    /// restarted, so they release what its earlier run left idle at once.
    async fn alive_loop(self: Arc<Self>) {
        self.announce_restart().await;
        loop {
            tokio::time::sleep(self.cfg.alive_interval).await;
            let mut by_host: HashMap<String, Vec<String>> = HashMap::new();
            for (claim, addr) in lock(&self.held).iter() {
                by_host.entry(addr.clone()).or_default().push(claim.clone());
            }
            for (addr, claims) in by_host {
                let req = AliveRequest { incarnation: self.incarnation.clone(), claims };
                let link = self.link(&addr);
                let r: Result<AliveReply, _> =
                    link.short.call(Method::POST, "/v1/host/alive", Some(&req)).await;
                if let Err(e) = r {
                    tracing::debug!("keep-alive to {addr}: {e}");
                }
            }
        }
    }

    /// At start: the hosts whose slots the collector shows claimed by this
    /// schedd (its earlier run) hear of this run's incarnation.
    async fn announce_restart(&self) {
        let Some(url) = self.cfg.collector.clone() else { return };
        let Ok(client) = Client::new(&url, self.keypair.clone()) else { return };
        let q = CollectorQuery {
            kind: Some("Machine".into()),
            constraint: Some(format!(
                "ClientMachine == {}",
                classad::Value::Str(self.cfg.name.as_str().into())
            )),
            projection: vec!["MyAddress".into()],
        };
        let found: Result<CollectorQueryReply, _> =
            client.call(Method::POST, "/v1/collector/query", Some(&q)).await;
        let Ok(found) = found else { return };
        let mut hosts = HashSet::new();
        for text in found.ads {
            if let Ok(ad) = classad::parse_ad(&text)
                && let Some(addr) = str_attr(&ad, "MyAddress")
            {
                hosts.insert(addr);
            }
        }
        for addr in hosts {
            let req = AliveRequest { incarnation: self.incarnation.clone(), claims: Vec::new() };
            let r: Result<AliveReply, _> =
                self.link(&addr).short.call(Method::POST, "/v1/host/alive", Some(&req)).await;
            match r {
                Ok(r) if r.released > 0 => tracing::info!(
                    "{addr} released {} claims of this schedd's earlier run",
                    r.released
                ),
                Ok(_) => {}
                Err(e) => tracing::debug!("telling {addr} of this run: {e}"),
            }
        }
    }

    /// Takes in how a batch's jobs ended (or follows them while they run),
    /// in order, from the activation's report. Returns whether the claim is
    /// still usable.
    async fn take_in(
        &self,
        link: &Link,
        claim: &ClaimCtx,
        lane: &LaneTx,
        ids: Vec<JobId>,
        report: JobReport,
    ) -> bool {
        let lane = &lane.gathering();
        let mut ends = Ends::default();
        let mut last = Some(report);
        let mut alive = true;
        for id in ids {
            // With no report (the host is lost) it never went out, as far as
            // the schedd can know: it stays idle.
            match last.take() {
                Some(r) => {
                    (alive, last) = self
                        .shadow(link, claim, id, lane, Start::Queued(Box::new(r)), &mut ends)
                        .await;
                }
                None => {
                    lane.send(LaneOp::Pool(id, PoolOp::NotStarted(claim.claim_id.clone())));
                    lane.send(LaneOp::Free(id));
                }
            }
        }
        lane.committed().await;
        alive
    }

    /// A batch of up to `n` jobs of autocluster `ac` starting with `first`,
    /// as one activation of the claim, when `first` is a plain job: one whose
    /// host needs nothing but its ad, module and input files (it neither
    /// checkpoints nor waits for a DeferralTime). `None` for any other, which
    /// its shadow activates alone.
    fn plain_batch(
        &self,
        first: JobId,
        ac: u32,
        n: usize,
        claim: &ClaimCtx,
    ) -> Option<(Vec<JobId>, ActivateRequest, u64)> {
        let job = self.queue.read().job(first).map(|v| v.ad())?;
        if may_have_checkpoints(&job) || job.contains("DeferralTime") {
            return None;
        }
        // A job with big input files uploads them first: not for a batch.
        let inputs = self.read_inputs(&job, None).ok().filter(|i| !i.streams())?.files;
        let lease = match job.eval_attr("JobLeaseDuration") {
            Value::Int(n) if n > 0 => n as u64,
            _ => self.cfg.job_lease,
        };
        let carried = inputs.iter().map(FileData::len).sum();
        let more = self.batch_behind(first, ac, n - 1, claim, carried);
        let mut ids = vec![first];
        ids.extend(more.iter().map(|(id, _)| *id));
        let req = ActivateRequest {
            claim_id: claim.claim_id.clone(),
            job: host_ad(&job, &claim.slot_ad).to_string(),
            module_digest: str_attr(&job, "CmdDigest").unwrap_or_default(),
            inputs,
            lease_secs: lease,
            wait_ms: self.cfg.activate_wait_ms,
            saved_state: None,
            snapshot: None,
            more: more.into_iter().map(|(_, q)| q).collect(),
        };
        Some((ids, req, lease))
    }

    /// Up to `n` more jobs of autocluster `ac` to queue on the claim behind
    /// `first`: jobs that run the same module and neither checkpoint nor
    /// wait for a DeferralTime. A job whose input files cannot be read is
    /// left for a later activation (which holds it).
    fn batch_behind(
        &self,
        first: JobId,
        ac: u32,
        n: usize,
        claim: &ClaimCtx,
        mut carried: u64,
    ) -> Vec<(JobId, QueuedJob)> {
        if n == 0 {
            return Vec::new();
        }
        let Some(digest) =
            self.queue.read().job(first).and_then(|v| str_attr(&v.ad(), "CmdDigest"))
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        while out.len() < n {
            let Some(id) = self.next_job(ac, Some(&claim.slot_ad)) else { break };
            let Some(job) = self.queue.read().job(id).map(|v| v.ad()) else {
                lock(&self.state).busy.remove(&id);
                continue;
            };
            let fits = str_attr(&job, "CmdDigest").as_deref() == Some(digest.as_str())
                && !may_have_checkpoints(&job)
                && !job.contains("DeferralTime");
            // The batch's files travel in one message: within its budget.
            let inputs = if fits {
                self.read_inputs(&job, None).ok().filter(|i| !i.streams()).map(|i| i.files).filter(
                    |f| {
                        carried + f.iter().map(FileData::len).sum::<u64>()
                            <= andes_protocol::pool::INLINE_BUDGET
                    },
                )
            } else {
                None
            };
            carried += inputs.iter().flatten().map(FileData::len).sum::<u64>();
            let Some(inputs) = inputs else {
                // Not for a batch: it goes first on a later activation.
                let mut st = lock(&self.state);
                st.busy.remove(&id);
                st.ac_jobs.entry(ac).or_default().push_front(id);
                break;
            };
            let ad = host_ad(&job, &claim.slot_ad);
            out.push((
                id,
                QueuedJob { job: ad.to_string(), module_digest: digest.clone(), inputs },
            ));
        }
        out
    }

    /// Runs one job on a claim (or reconnects to it, or follows it where it
    /// was queued behind others). Returns whether the claim is still usable,
    /// and the claim's last report, for the job queued behind.
    async fn shadow(
        &self,
        link: &Link,
        claim: &ClaimCtx,
        id: JobId,
        lane: &LaneTx,
        start: Start,
        ends: &mut Ends,
    ) -> (bool, Option<JobReport>) {
        let (tx, mut signals) = mpsc::unbounded_channel();
        {
            // From here its own shadow stops it.
            let mut st = lock(&self.state);
            st.queued.remove(&id);
            st.shadows.insert(id, tx);
        }
        let r = self.shadow_inner(link, claim, id, lane, start, ends, &mut signals).await;
        lock(&self.state).shadows.remove(&id);
        // Whatever path ended it: a job this claim never started is not
        // pending on it any more (a no-op for one that started).
        lane.send(LaneOp::Pool(id, PoolOp::NotStarted(claim.claim_id.clone())));
        lane.send(LaneOp::Free(id));
        r
    }

    #[allow(clippy::too_many_arguments)]
    async fn shadow_inner(
        &self,
        link: &Link,
        claim: &ClaimCtx,
        id: JobId,
        lane: &LaneTx,
        start: Start,
        ends: &mut Ends,
        signals: &mut mpsc::UnboundedReceiver<Signal>,
    ) -> (bool, Option<JobReport>) {
        let Some(job) = self.queue.read().job(id).map(|v| v.ad()) else {
            return (true, start.into_report());
        };
        let gid = str_attr(&job, "GlobalJobId").unwrap_or_default();
        let lease = match job.eval_attr("JobLeaseDuration") {
            Value::Int(n) if n > 0 => n as u64,
            _ => self.cfg.job_lease,
        };
        let module =
            str_attr(&job, "CmdDigest").as_deref().and_then(andes_protocol::stream::parse_digest);
        // A job whose periodic policy reads its usage gets it fresh: the host
        // reports every few seconds and each report reaches the queue.
        let report_within = crate::policy::has_periodic(&job).then_some(POLICY_REPORT_SECS);
        // The transparent checkpoint the spool keeps for the job, by hash.
        // Only a job that checkpoints has anything in the spool.
        let checkpoints = may_have_checkpoints(&job);
        let mut have_snapshot =
            self.spool().filter(|_| checkpoints).and_then(|s| s.snapshot_hash(id));
        let mut report: JobReport = match start {
            Start::Reconnect | Start::Unanswered(_) => {
                let unanswered = match &start {
                    Start::Unanswered(why) => Some(why.clone()),
                    _ => None,
                };
                let req = WaitRequest {
                    incarnation: Some(self.incarnation.clone()),
                    claim_id: claim.claim_id.clone(),
                    since: 0,
                    saved_seq: 0,
                    snapshot: have_snapshot.clone(),
                    report_within,
                };
                // A job whose activation was recorded but never seen to
                // start (the schedd died in between): the host says whether
                // it runs; if not, it stays idle, never started twice.
                let pending = job.contains(ACTIVATION_PENDING)
                    && self.queue.read().job(id).is_some_and(|v| v.proc.status == JobStatus::Idle);
                let lost = |why: &str| {
                    if pending && let Some(reason) = &unanswered {
                        PoolOp::ActivationFailed(claim.claim_id.clone(), reason.clone())
                    } else if pending {
                        PoolOp::NotStarted(claim.claim_id.clone())
                    } else {
                        PoolOp::Evicted(lost_ad(why))
                    }
                };
                let Ok(r) = self.wait_until_lease(link, &req, lease).await else {
                    lane.send(LaneOp::Pool(id, lost("the job's host is gone")));
                    return (false, None);
                };
                match ends.view(r, &gid) {
                    Viewed::Mine(r) => {
                        let op = if pending {
                            PoolOp::Started(ClassAd::new())
                        } else {
                            PoolOp::Reconnected
                        };
                        lane.send(LaneOp::Pool(id, op));
                        r
                    }
                    Viewed::NotYet(r) => {
                        if !pending {
                            lane.send(LaneOp::Pool(id, PoolOp::Reconnected));
                        }
                        lane.send(LaneOp::Pool(id, lost("the claim ended")));
                        return (r.claim_alive, Some(r));
                    }
                }
            }
            Start::Queued(first) => {
                // Queued behind other jobs of the claim: it is followed once
                // a report shows it ran (or that the host dropped it). One
                // held or removed meanwhile is withdrawn from the host's
                // queue (if it started already, it is none of this claim's
                // business any more: its end is not taken in).
                let idle =
                    self.queue.read().job(id).is_some_and(|v| v.proc.status == JobStatus::Idle);
                if !idle {
                    withdraw(link, &claim.claim_id, id).await;
                    return (first.claim_alive, Some(*first));
                }
                let mut r = *first;
                loop {
                    match ends.view(r, &gid) {
                        Viewed::Mine(mine) => {
                            lane.send(LaneOp::Pool(id, PoolOp::Started(self.started_attrs(claim))));
                            break mine;
                        }
                        Viewed::NotYet(other) => {
                            if !other.claim_alive || other.queued == 0 {
                                // It never started: it stays idle.
                                return (other.claim_alive, Some(other));
                            }
                            let req = WaitRequest {
                                incarnation: Some(self.incarnation.clone()),
                                claim_id: claim.claim_id.clone(),
                                since: other.version,
                                saved_seq: 0,
                                snapshot: None,
                                report_within,
                            };
                            lane.committed().await;
                            tokio::select! {
                                sig = signals.recv() => {
                                    if matches!(sig, Some(Signal::Stop) | None) {
                                        // Still queued: the jobs ahead of it
                                        // run on. Started: it is stopped.
                                        if withdraw(link, &claim.claim_id, id).await {
                                            return (other.claim_alive, Some(other));
                                        }
                                        self.release(link, &claim.claim_id).await;
                                        return (false, None);
                                    }
                                    r = other;
                                }
                                got = self.wait_until_lease(link, &req, lease) => match got {
                                    Ok(got) => r = got,
                                    Err(()) => return (false, None),
                                },
                            }
                        }
                    }
                }
            }
            Start::Activate => {
                let ad = host_ad(&job, &claim.slot_ad);
                let ckpt = self.ckpt_dir(id).filter(|_| checkpoints);
                let transfer::Inputs { files: inputs, mut sources } =
                    match self.read_inputs(&job, ckpt.as_deref()) {
                        Ok(i) => i,
                        Err(e) => {
                            // Cannot start: hold it here, keep the claim.
                            let mut attrs = ClassAd::new();
                            // HTCondor's subcode: the errno (2: no such file).
                            attrs.insert_value("HoldReasonCode", HOLD_TRANSFER_INPUT);
                            attrs.insert_value("HoldReasonSubCode", e.errno as i64);
                            attrs.insert_value("HoldReason", e.message.as_str());
                            lane.send(LaneOp::Pool(id, PoolOp::Started(self.started_attrs(claim))));
                            lane.send(LaneOp::Exited(id, attrs));
                            // The jobs meant to follow it never went out.
                            return (true, Some(no_report(true)));
                        }
                    };
                let digest = str_attr(&job, "CmdDigest").unwrap_or_default();
                let snapshot = if checkpoints {
                    self.snapshot_to_send(id, module.as_ref()).map(|(snap, more)| {
                        sources.extend(more);
                        snap
                    })
                } else {
                    None
                };
                have_snapshot = snapshot.as_ref().map(|s| s.hash.clone());
                let resuming = snapshot.is_some();
                let req = ActivateRequest {
                    claim_id: claim.claim_id.clone(),
                    job: ad.to_string(),
                    module_digest: digest.clone(),
                    inputs,
                    lease_secs: lease,
                    wait_ms: self.cfg.activate_wait_ms,
                    saved_state: self
                        .saved_state_path(id)
                        .filter(|_| checkpoints)
                        .and_then(|p| saved_state_to_send(&p, &mut sources)),
                    snapshot,
                    more: Vec::new(),
                };
                // Recorded before it is sent: see PoolOp::Activating.
                if let Err(e) = self
                    .queue
                    .pool(vec![id], PoolOp::Activating(self.started_attrs(claim)), self.clock.now())
                    .await
                {
                    tracing::warn!("job {id}: not activated: {e}");
                    self.release(link, &claim.claim_id).await;
                    return (false, None);
                }
                match self.activate(link, &req, &digest, lease, sources).await {
                    Ok(r) => {
                        let mut started = self.started_attrs(claim);
                        if resuming {
                            // HTCondor's count of restarts from a checkpoint.
                            let n = match job.eval_attr("NumRestarts") {
                                Value::Int(n) => n,
                                _ => 0,
                            };
                            started.insert_value("NumRestarts", n + 1);
                        }
                        lane.send(LaneOp::Pool(id, PoolOp::Started(started)));
                        match ends.view(r, &gid) {
                            Viewed::Mine(r) => r,
                            Viewed::NotYet(r) => r,
                        }
                    }
                    Err(e) if e.ambiguous => {
                        // The host may run it: it says, as to a restarted
                        // schedd (the activation is recorded as pending).
                        tracing::warn!("job {id}: activation unanswered: {}", e.reason);
                        return Box::pin(self.shadow(
                            link,
                            claim,
                            id,
                            lane,
                            Start::Reconnect,
                            ends,
                        ))
                        .await;
                    }
                    Err(NotActivated { reason: e, .. }) => {
                        // The job never started: it stays idle; the claim is given up.
                        tracing::warn!("job {id}: activation failed: {e}");
                        let failed = PoolOp::ActivationFailed(claim.claim_id.clone(), e.clone());
                        lane.send(LaneOp::Pool(id, failed));
                        self.release(link, &claim.claim_id).await;
                        return (false, None);
                    }
                }
            }
        };
        let mut last_push = self.clock.now();
        // A job suspended before this first look is one suspension to record.
        let mut last_state =
            if report.state == RunState::Suspended { RunState::Running } else { report.state };
        // Whether the job waits for its DeferralTime, as last told to the queue.
        let mut last_deferred: Option<String> = None;
        // The seq of the job's last saved state kept in this run.
        let mut have_saved = 0u64;
        // The job's host kept a snapshot as the job stopped (a vacate).
        let mut stopped_with_snapshot = false;
        let mut ckpts = match job.eval_attr("NumCkpts") {
            Value::Int(n) => n,
            _ => 0,
        };
        loop {
            if let Some(snap) = report.snapshot.take()
                && Some(&snap.hash) != have_snapshot.as_ref()
            {
                // A transparent checkpoint: kept in the spool once checked,
                // durably, and sent with the job when it next starts.
                let stopping = snap.stopping;
                match self.keep_snapshot(link, &claim.claim_id, id, module, snap).await {
                    Ok(kept) => {
                        have_snapshot = Some(kept.hash);
                        stopped_with_snapshot |= stopping;
                        ckpts += 1;
                        let mut a = ClassAd::new();
                        a.insert_value("NumCkpts", ckpts);
                        a.insert_value("LastCkptTime", self.clock.now());
                        a.insert_value("CkptSize", kept.bytes.div_ceil(1024) as i64);
                        a.insert_value("LastCheckpointPlatform", kept.platform.as_str());
                        lane.send(LaneOp::Pool(id, PoolOp::Update(a)));
                    }
                    Err(e) => tracing::warn!("job {id}: its checkpoint was not kept: {e}"),
                }
            }
            if let Some(mut st) = report.saved_state.take()
                && st.seq > have_saved
            {
                // A cooperative checkpoint: kept in the spool, durably, and
                // sent with the job when it next starts. A big one is fetched
                // as a stream.
                let fetched = match st.streamed.as_ref().map(|s| s.size) {
                    None => Ok(()),
                    Some(size) => {
                        self.fetch_saved_state(link, &claim.claim_id, &mut st, size).await
                    }
                };
                match fetched
                    .and_then(|()| self.keep_saved_state(id, &st.data).map_err(|e| e.to_string()))
                {
                    Ok(()) => {
                        have_saved = st.seq;
                        ckpts += 1;
                        let mut a = ClassAd::new();
                        a.insert_value("NumCkpts", ckpts);
                        a.insert_value("LastCkptTime", self.clock.now());
                        a.insert_value("CkptSize", st.data.len().div_ceil(1024) as i64);
                        lane.send(LaneOp::Pool(id, PoolOp::Update(a)));
                    }
                    Err(e) => tracing::warn!("job {id}: its saved state was not kept: {e}"),
                }
            }
            if report.state == RunState::Exited {
                let mut ending = from_host(report.ending.as_deref());
                ending.update(&from_host(Some(&report.update)));
                // Output files too big for the report come as streams of their
                // own, staged here before they go where they belong.
                let staged = if report.evicted {
                    Ok(Staged::default())
                } else {
                    self.fetch_outputs(link, &claim.claim_id, &gid, &report.outputs).await
                };
                let (staged, transferred) = match staged {
                    Ok(s) => (s, true),
                    Err(e) => {
                        if !ending.contains("HoldReasonCode") {
                            ending.insert_value("HoldReasonCode", HOLD_TRANSFER_OUTPUT);
                            ending.insert_value("HoldReasonSubCode", 0i64);
                            ending.insert_value("HoldReason", e.as_str());
                        }
                        (Staged::default(), false)
                    }
                };
                let ckpt_code = match job.eval_attr("CheckpointExitCode") {
                    Value::Int(c) => Some(c),
                    _ => None,
                };
                let checkpointed = !report.evicted
                    && transferred
                    && !ending.contains("HoldReasonCode")
                    && ckpt_code.is_some()
                    && matches!(ending.eval_attr("ExitCode"), Value::Int(c) if Some(c) == ckpt_code);
                if checkpointed && let Some(dir) = self.ckpt_dir(id) {
                    // The job saved its state and asks to run again: its files
                    // are kept in the spool and go with it next time.
                    match save_checkpoint(&dir, &report.outputs, &staged) {
                        Ok(()) => ending.insert_value("LastCkptTime", self.clock.now()),
                        Err(e) => tracing::warn!("job {id}: checkpoint not kept: {e}"),
                    }
                    ending.insert_value(
                        "LastVacateReason",
                        "the job checkpointed (CheckpointExitCode)",
                    );
                    lane.send(LaneOp::Pool(id, PoolOp::Evicted(ending)));
                } else if report.evicted {
                    if stopped_with_snapshot {
                        // It left with a snapshot taken as it went.
                        ending.insert_value("LastCkptTime", self.clock.now());
                    }
                    lane.send(LaneOp::Pool(id, PoolOp::Evicted(ending)));
                } else {
                    if checkpoints
                        && !ending.contains("HoldReasonCode")
                        && let Some(spool) = self.spool()
                    {
                        // Done: its checkpoints are of no more use. A held job
                        // keeps them for its release.
                        spool.remove_job(id);
                    }
                    let spool_refused = if transferred && transfer::is_spooled(&job) {
                        // A spooled job's outputs stay in the spool: within
                        // its owner's quota and the spool's room.
                        let bytes: u64 = report.outputs.iter().map(FileData::len).sum();
                        let owner = str_attr(&job, "Owner").unwrap_or_default();
                        self.queue.charge_spool(&owner, bytes).err()
                    } else {
                        None
                    };
                    if !transferred {
                        // Held for it: its outputs are not half delivered.
                    } else if let Some(e) = spool_refused {
                        ending.insert_value(
                            "HoldReasonCode",
                            crate::job::hold_code::DISK_QUOTA_EXCEEDED,
                        );
                        ending.insert_value("HoldReasonSubCode", 0i64);
                        ending.insert_value("HoldReason", format!("its output: {e}").as_str());
                    } else if let Err(e) = write_outputs(
                        id,
                        &job,
                        &report.outputs,
                        &staged,
                        &self.cfg.accounts,
                        self.cfg.spool.as_deref(),
                    ) {
                        ending.insert_value("HoldReasonCode", HOLD_TRANSFER_OUTPUT);
                        ending.insert_value("HoldReasonSubCode", e.errno as i64);
                        ending.insert_value("HoldReason", e.message.as_str());
                    }
                    lane.send(LaneOp::Exited(id, ending));
                }
                // The job behind starts from the report as the host sent it:
                // `report` may be this job's end, seen in a report about the
                // next job, which is running already.
                return (report.claim_alive, Some(ends.behind(&report)));
            }
            if !report.claim_alive {
                lane.send(LaneOp::Pool(id, PoolOp::Evicted(lost_ad("the claim ended"))));
                return (false, None);
            }
            let now = self.clock.now();
            let due = report_within.is_some()
                || now - last_push >= self.cfg.queue_update_interval.as_secs() as i64;
            let update = from_host(Some(&report.update));
            let deferred = update.get("JobDeferredUntil").map(|e| e.to_string());
            // Suspended and resumed by the host: the queue's status 7 and
            // the job log's 010 and 011 events.
            match (last_state, report.state) {
                (RunState::Suspended, RunState::Suspended) => {}
                (_, RunState::Suspended) => {
                    lane.send(LaneOp::Pool(id, PoolOp::Suspension(true)));
                }
                (RunState::Suspended, RunState::Running) => {
                    lane.send(LaneOp::Pool(id, PoolOp::Suspension(false)));
                }
                _ => {}
            }
            if due || report.state != last_state || deferred != last_deferred {
                lane.send(LaneOp::Pool(id, PoolOp::Update(update)));
                last_push = now;
                last_state = report.state;
                last_deferred = deferred;
            }
            let req = WaitRequest {
                incarnation: Some(self.incarnation.clone()),
                claim_id: claim.claim_id.clone(),
                since: report.version,
                saved_seq: have_saved,
                snapshot: have_snapshot.clone(),
                report_within,
            };
            lane.committed().await;
            tokio::select! {
                sig = signals.recv() => match sig {
                    Some(Signal::Edit(attrs)) => {
                        let req = EditRequest {
                            claim_id: claim.claim_id.clone(),
                            attrs: attrs.to_string(),
                        };
                        if let Err(e) = link.short.post_json("/v1/host/edit", &req).await {
                            tracing::debug!("job {id}: qedit did not reach the host: {e}");
                        }
                    }
                    Some(Signal::Vacate(why)) => {
                        tracing::info!("job {id}: vacating it ({why})");
                        let req = andes_protocol::pool::VacateJobRequest {
                            claim_id: claim.claim_id.clone(),
                        };
                        match link.short.post_json("/v1/host/vacate", &req).await {
                            Ok(r) if r.status.is_success() => {}
                            Ok(r) => tracing::warn!("job {id}: the host refused the vacate: {}", r.status),
                            Err(e) => tracing::warn!("job {id}: the vacate did not reach the host: {e}"),
                        }
                    }
                    Some(Signal::Stop) | None => {
                        self.release(link, &claim.claim_id).await;
                        let removed = self
                            .queue
                            .read()
                            .job(id)
                            .is_some_and(|v| v.proc.status == JobStatus::Removed);
                        if removed {
                            lane.send(LaneOp::Exited(id, ClassAd::new()));
                        }
                        return (false, None);
                    }
                },
                r = self.wait_until_lease(link, &req, lease) => match r {
                    Ok(r) => match ends.view(r, &gid) {
                        Viewed::Mine(r) => report = r,
                        Viewed::NotYet(_) => {
                            // Its host moved on without saying how it ended.
                            lane.send(LaneOp::Pool(id, PoolOp::Evicted(lost_ad("the claim ended"))));
                            return (false, None);
                        }
                    },
                    Err(()) => {
                        lane.send(LaneOp::Pool(
                            id,
                            PoolOp::Evicted(lost_ad("the job's host did not answer within its lease")),
                        ));
                        return (false, None);
                    }
                },
            }
        }
    }

    /// The job's input files (see [`read_inputs`]).
    fn read_inputs(
        &self,
        job: &ClassAd,
        ckpt: Option<&Path>,
    ) -> Result<transfer::Inputs, transfer::TransferError> {
        read_inputs(job, ckpt, &self.cfg.accounts, &|d| self.queue.open_upload_of(job, d))
    }

    /// Fetches the output files a report names as streamed (`POST
    /// /v1/host/output`, each written to disk as it arrives) into a staging
    /// directory of the schedd's: under SPOOL, else the system's temporary
    /// directory. A file that does not come whole is an error (a hold).
    async fn fetch_outputs(
        &self,
        link: &Link,
        claim_id: &str,
        gid: &str,
        outputs: &[FileData],
    ) -> Result<Staged, String> {
        let mut staged = Staged::default();
        if outputs.iter().all(|f| f.streamed.is_none()) {
            return Ok(staged);
        }
        let dir = self.staging_dir("outputs-")?;
        for (n, f) in outputs.iter().enumerate() {
            let Some(s) = &f.streamed else { continue };
            let path = dir.path().join(n.to_string());
            let req = andes_protocol::pool::OutputRequest {
                claim_id: claim_id.to_string(),
                job: gid.to_string(),
                name: f.name.clone(),
            };
            // A transfer cut short is tried again a few times; a refusal is final.
            let mut tries = 0;
            loop {
                tries += 1;
                let file = std::fs::File::create(&path)
                    .map_err(|e| format!("cannot stage output file {}: {e}", f.name))?;
                let got = link.long.download("/v1/host/output", &req, file, s.size).await;
                let why = match got {
                    Ok((w, _)) if w.len == s.size => break,
                    Ok((w, _)) => format!("it came with {} bytes of its {}", w.len, s.size),
                    Err(e) => {
                        if matches!(e.kind, ClientErrorKind::Status { .. }) {
                            tries = OUTPUT_TRIES;
                        }
                        e.to_string()
                    }
                };
                if tries >= OUTPUT_TRIES {
                    return Err(format!(
                        "cannot transfer output file {} ({tries} tries): {why}",
                        f.name
                    ));
                }
                tracing::info!("output file {} of {gid}: {why}; trying again", f.name);
                tokio::time::sleep(Duration::from_secs(1 << tries)).await;
            }
            staged.files.insert(f.name.clone(), path);
        }
        staged.dir = Some(dir);
        Ok(staged)
    }

    /// A fresh directory of the schedd's for files fetched as streams: under
    /// SPOOL (`incoming`), else the system's temporary directory. Removed when
    /// dropped.
    fn staging_dir(&self, prefix: &str) -> Result<tempfile::TempDir, String> {
        let root = match self.cfg.spool.as_deref() {
            Some(s) => s.join("incoming"),
            None => std::env::temp_dir(),
        };
        std::fs::create_dir_all(&root)
            .and_then(|()| tempfile::Builder::new().prefix(prefix).tempdir_in(&root))
            .map_err(|e| format!("cannot stage files in {}: {e}", root.display()))
    }

    /// The spool's checkpoints, if the schedd has a spool.
    fn spool(&self) -> Option<Spool> {
        self.cfg.spool.as_deref().map(Spool::new)
    }

    /// Where job `id`'s saved state (cooperative checkpoint) is kept.
    fn saved_state_path(&self, id: JobId) -> Option<PathBuf> {
        self.spool().map(|s| s.saved_state_path(id))
    }

    /// The transparent checkpoint to resume job `id` from, with every file
    /// content it names; a kept one that can no longer be used (damaged, or
    /// of another module) is discarded and the job starts afresh.
    fn snapshot_to_send(
        &self,
        id: JobId,
        module: Option<&[u8; 32]>,
    ) -> Option<(andes_protocol::pool::SnapshotData, crate::spool::Sources)> {
        let (spool, module) = (self.spool()?, module?);
        match spool.load_snapshot(id, module) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("job {id}: its checkpoint cannot be used ({e}); it starts afresh");
                spool.remove_snapshot(id);
                None
            }
        }
    }

    /// Keeps a transparent checkpoint from the job's host (every check, then
    /// durably; on a worker thread, as it may be large).
    async fn keep_snapshot(
        &self,
        link: &Link,
        claim_id: &str,
        id: JobId,
        module: Option<[u8; 32]>,
        mut snap: andes_protocol::pool::SnapshotData,
    ) -> Result<crate::spool::Kept, String> {
        let spool = self.spool().ok_or("the schedd has no SPOOL")?;
        let module = module.ok_or("the job has no CmdDigest")?;
        let bytes = snap.bytes.len() as u64
            + snap.streamed.iter().map(|p| p.size).sum::<u64>()
            + snap.blobs.iter().map(FileData::len).sum::<u64>();
        self.charge_checkpoint(id, bytes)?;
        // Its big parts come as streams of their own, staged in the spool.
        let staging = self.staging_dir("checkpoint-")?;
        let mut staged = HashMap::new();
        let parts = snap
            .streamed
            .as_ref()
            .map(|st| (None, st.size))
            .into_iter()
            .chain(
                snap.blobs
                    .iter()
                    .filter_map(|b| Some((Some(b.name.clone()), b.streamed.as_ref()?.size))),
            )
            .collect::<Vec<_>>();
        for (n, (blob, size)) in parts.into_iter().enumerate() {
            let path = staging.path().join(n.to_string());
            let req = andes_protocol::pool::SnapshotFileRequest {
                claim_id: claim_id.to_string(),
                hash: snap.hash.clone(),
                blob: blob.clone(),
            };
            fetch_whole(link, "/v1/host/snapshot", &req, &path, size).await?;
            match blob {
                None => {
                    snap.bytes = std::fs::read(&path).map_err(|e| format!("staging: {e}"))?;
                    snap.streamed = None;
                }
                Some(b) => {
                    staged.insert(b, path);
                }
            }
        }
        let signers = self.cfg.snapshot_signers.clone();
        tokio::task::spawn_blocking(move || {
            let trusted = |k: &[u8; 32]| signers.as_ref().is_none_or(|s| s.contains(k));
            let kept = spool.keep_snapshot(id, &module, &trusted, &snap, &staged);
            drop(staging);
            kept
        })
        .await
        .map_err(|e| format!("the task keeping it failed: {e}"))?
    }

    /// Fetches a saved state the report named as streamed into `st.data`.
    async fn fetch_saved_state(
        &self,
        link: &Link,
        claim_id: &str,
        st: &mut andes_protocol::pool::SavedState,
        size: u64,
    ) -> Result<(), String> {
        let staging = self.staging_dir("saved-")?;
        let path = staging.path().join("state");
        let req =
            andes_protocol::pool::SavedStateRequest { claim_id: claim_id.into(), seq: st.seq };
        fetch_whole(link, "/v1/host/saved", &req, &path, size).await?;
        st.data = std::fs::read(&path).map_err(|e| format!("staging: {e}"))?;
        st.streamed = None;
        Ok(())
    }

    /// Keeps a saved state durably: written aside, synced, then renamed.
    fn keep_saved_state(&self, id: JobId, data: &[u8]) -> std::io::Result<()> {
        let Some(path) = self.saved_state_path(id) else { return Ok(()) };
        self.charge_checkpoint(id, data.len() as u64).map_err(std::io::Error::other)?;
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
        andes_beneath::replace_file(&path, data, 0o600)
    }

    /// Counts a checkpoint of `bytes` against the job's owner's spool quota
    /// and the spool's room; refused, it is not kept (the job goes on, from
    /// its last kept checkpoint if it is stopped).
    fn charge_checkpoint(&self, id: JobId, bytes: u64) -> Result<(), String> {
        let owner = self.queue.read().job(id).map(|v| v.owner().to_string()).unwrap_or_default();
        self.queue.charge_spool(&owner, bytes).map_err(|e| e.to_string())
    }

    /// Where job `id`'s own checkpoint files are kept.
    fn ckpt_dir(&self, id: JobId) -> Option<PathBuf> {
        self.spool().map(|s| s.ckpt_dir(id))
    }

    fn started_attrs(&self, claim: &ClaimCtx) -> ClassAd {
        let mut a = ClassAd::new();
        if let Some(n) = str_attr(&claim.slot_ad, "Name") {
            a.insert_value("RemoteHost", n.as_str());
        }
        a.insert_value(CLAIM_ID_ATTR, claim.claim_id.as_str());
        a.insert_value("StartdAddr", claim.addr.as_str());
        a
    }

    /// Activates, sending the module first if the host lacks it.
    async fn activate(
        &self,
        link: &Link,
        req: &ActivateRequest,
        digest: &str,
        lease: u64,
        sources: Vec<(String, std::fs::File)>,
    ) -> Result<JobReport, NotActivated> {
        let definite = |reason: String| NotActivated { reason, ambiguous: false };
        // Big input files go first, each as a stream of its own.
        for (sha, file) in sources {
            let path = format!("/v1/host/inputs/{sha}");
            let claim = [(andes_protocol::pool::CLAIM_HEADER, req.claim_id.as_str())];
            let r = link
                .long
                .upload(Method::PUT, &path, file, &claim)
                .await
                .map_err(|e| definite(format!("cannot send an input file to the host: {e}")))?;
            if !r.status.is_success() {
                return Err(definite(format!(
                    "the host refused an input file: {}",
                    r.error_reason().unwrap_or_else(|| r.status.to_string())
                )));
            }
        }
        let start = tokio::time::Instant::now();
        let mut sent_module = false;
        let mut delay = Duration::from_millis(50);
        loop {
            match link.long.call::<_, JobReport>(Method::POST, "/v1/host/activate", Some(req)).await
            {
                Ok(r) => return Ok(r),
                Err(e) if status_reason(&e) == Some((409, CLAIM_PENDING)) => {
                    // Preempting: the slot's previous job is still leaving.
                    if start.elapsed() > Duration::from_secs(lease) {
                        return Err(definite(
                            "the preempted job did not leave within the lease".into(),
                        ));
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
                Err(e) if !sent_module && status_reason(&e) == Some((409, NEED_MODULE)) => {
                    sent_module = true;
                    self.queue
                        .send_upload(&link.long, &format!("/v1/host/modules/{digest}"), digest)
                        .await
                        .map_err(|e| definite(format!("the module did not reach the host: {e}")))?;
                }
                Err(e) => {
                    return Err(match &e.kind {
                        ClientErrorKind::Status { reason, .. } => definite(reason.clone()),
                        // The request may have reached the host, and the job
                        // may run there: only the host can say.
                        _ => NotActivated {
                            reason: format!("cannot reach the host: {e}"),
                            ambiguous: true,
                        },
                    });
                }
            }
        }
    }

    /// A long poll, retried while the host does not answer, for as long as the
    /// job's lease lasts. `Err` when the claim is gone or the lease ran out.
    async fn wait_until_lease(
        &self,
        link: &Link,
        req: &WaitRequest,
        lease: u64,
    ) -> Result<JobReport, ()> {
        let start = tokio::time::Instant::now();
        let lease = Duration::from_secs(lease);
        let mut delay = Duration::from_millis(100);
        loop {
            match link.long.call::<_, JobReport>(Method::POST, "/v1/host/wait", Some(req)).await {
                Ok(r) => return Ok(r),
                Err(e) if not_found(&e) => return Err(()),
                Err(e) => {
                    if start.elapsed() >= lease {
                        tracing::warn!(
                            "claim {}: lease over: {e}",
                            andes_protocol::pool::public_claim_id(&req.claim_id)
                        );
                        return Err(());
                    }
                    tracing::debug!("waiting on the host: {e}");
                    tokio::time::sleep(delay.min(lease.saturating_sub(start.elapsed()))).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    /// A claim's queue updates, in order, in one commit. A commit that fails
    /// is retried every SHADOW_JOB_CLEANUP_RETRY_DELAY, up to
    /// SHADOW_MAX_JOB_CLEANUP_RETRIES times; then the jobs whose end it
    /// carried are requeued (HTCondor's shadow's final update).
    async fn apply_in_order(&self, ops: Vec<JobOp>) {
        if ops.is_empty() {
            return;
        }
        let mut tries = 0;
        // A storage error is most often brief (a full disk being freed):
        // quick tries first, 1 s doubling, then SHADOW_MAX_JOB_CLEANUP_RETRIES
        // more every SHADOW_JOB_CLEANUP_RETRY_DELAY.
        let mut quick = Duration::from_secs(1);
        loop {
            let now = self.clock.now();
            match self.queue.in_order(ops.clone(), now).await {
                Ok(results) => {
                    for (op, r) in ops.iter().zip(results) {
                        if let Err(e) = r {
                            // Held or removed meanwhile: nothing to apply.
                            let id = match op {
                                JobOp::Pool(id, _) | JobOp::Exited(id, _) => id,
                            };
                            tracing::debug!("job {id}: update not applied: {e}");
                        }
                    }
                    return;
                }
                Err(e) if quick < self.cfg.cleanup_retry_delay => {
                    tracing::warn!("queue update failed ({e}); retrying in {quick:?}");
                    tokio::time::sleep(quick).await;
                    quick *= 2;
                }
                Err(e) if tries < self.cfg.max_cleanup_retries => {
                    tracing::warn!("queue update failed ({e}); retrying");
                    tries += 1;
                    tokio::time::sleep(self.cfg.cleanup_retry_delay).await;
                }
                Err(e) => {
                    tracing::error!("queue update failed {tries} times ({e}); requeuing");
                    for op in &ops {
                        if let JobOp::Exited(id, _) = op {
                            let r = self
                                .queue
                                .pool(vec![*id], PoolOp::Evicted(ClassAd::new()), now)
                                .await;
                            if let Err(e) = r {
                                tracing::error!("job {id}: not requeued: {e}");
                            }
                        }
                    }
                    return;
                }
            }
        }
    }

    /// Notes the jobs an activation queued on the claim's host behind its
    /// first, so that a hold or removal withdraws them from there. One held
    /// or removed while the activation was on its way is withdrawn now. They
    /// are noted before their states are read, so a hold committed meanwhile
    /// is seen by one side or the other, and withdrawn by whichever takes it
    /// off the list.
    fn note_queued(&self, link: &Link, claim_id: &str, ids: &[JobId]) {
        {
            let mut st = lock(&self.state);
            for id in ids {
                st.queued.insert(*id, (link.clone(), claim_id.to_string()));
            }
        }
        let stopped: Vec<JobId> = {
            let q = self.queue.read();
            let stopped =
                |id: &&JobId| q.job(**id).is_none_or(|v| v.proc.status != JobStatus::Idle);
            ids.iter().filter(stopped).copied().collect()
        };
        let mut st = lock(&self.state);
        for id in stopped {
            if let Some(at) = st.queued.remove(&id) {
                withdraw_soon(at, id);
            }
        }
    }

    /// A job's part on its claim is over: it is no longer busy.
    fn free(&self, id: JobId) {
        let quiet = {
            let mut st = lock(&self.state);
            st.busy.remove(&id);
            st.queued.remove(&id);
            st.busy.is_empty()
        };
        self.advertise.notify_one();
        if quiet {
            // The pool just went quiet: say so now, so the next submit finds
            // the negotiator up to date.
            self.urgent.notify_one();
        }
    }
}

/// The ad the host gets: `$$()` expanded against the slot, the streams
/// renamed to their sandbox names, the claim id left out.
fn host_ad(job: &ClassAd, slot: &ClassAd) -> ClassAd {
    let mut ad = expand_dollar_dollar(job, slot);
    for (attr, name) in [("In", STDIN_NAME), ("Out", STDOUT_NAME), ("Err", STDERR_NAME)] {
        if let Some(p) = str_attr(&ad, attr)
            && p != "/dev/null"
        {
            ad.insert_value(attr, name);
        }
    }
    ad.remove(CLAIM_ID_ATTR);
    ad
}

/// Seconds between the reports of a job whose periodic policy reads its
/// usage: the policy sees data at most this old (plus one queue write).
pub const POLICY_REPORT_SECS: u64 = 5;

/// Whether a job may keep something in the spool's checkpoints: it
/// checkpoints (`WasmCheckpoint`, `CheckpointExitCode`) or has (`NumCkpts`).
fn may_have_checkpoints(job: &ClassAd) -> bool {
    job.contains("WasmCheckpoint")
        || job.contains("CheckpointExitCode")
        || matches!(job.eval_attr("NumCkpts"), Value::Int(n) if n > 0)
}

fn lost_ad(reason: &str) -> ClassAd {
    let mut a = ClassAd::new();
    a.insert_value("LastVacateReason", reason);
    a
}

/// What an execute host reported (an ending or an update), as the queue may
/// take it: only the attributes a host may set ([`crate::attrs::from_host`]);
/// text that does not parse is nothing.
fn from_host(text: Option<&str>) -> ClassAd {
    crate::attrs::from_host(text.and_then(|t| classad::parse_ad(t).ok()).unwrap_or_default())
}

/// `$$(Attr)`, `$$(Attr:default)` and `$$([expr])` in the job ad's
/// expressions, replaced by the slot ad's values (strings unquoted), as
/// HTCondor's shadow does at activation. A reference the slot cannot resolve
/// is left as it was and the job ad gets no value for it.
pub fn expand_dollar_dollar(job: &ClassAd, slot: &ClassAd) -> ClassAd {
    let mut out = job.clone();
    for (name, expr) in job.iter() {
        // `$$(` is not ClassAd syntax: it can only stand inside a string.
        if !mentions_dollar_dollar(expr) {
            continue;
        }
        let expanded = expand_text(&expr.to_string(), job, slot);
        if let Ok(e) = classad::parse_expr(&expanded) {
            out.insert(name.clone(), e);
        }
    }
    out
}

/// Whether a string literal in `expr` (or in a record within it) holds a
/// `$$(` reference.
fn mentions_dollar_dollar(expr: &classad::Expr) -> bool {
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match e {
            classad::Expr::Lit(Value::Str(s)) if s.contains("$$(") => return true,
            classad::Expr::Record(ad) => stack.extend(ad.iter().map(|(_, x)| x)),
            _ => e.push_operands(&mut stack),
        }
    }
    false
}

fn expand_text(text: &str, job: &ClassAd, slot: &ClassAd) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // Each reference is expanded once; the bound guards against nothing more
    // than a huge ad.
    while let Some(at) = rest.find("$$(") {
        out.push_str(&rest[..at]);
        let body_start = at + 3;
        let Some(close) = matching_paren(&rest[body_start..]) else {
            out.push_str(&rest[at..]);
            return out;
        };
        let body = &rest[body_start..body_start + close];
        let value = if let Some(expr) = body.strip_prefix('[').and_then(|b| b.strip_suffix(']')) {
            classad::parse_expr(expr).ok().map(|e| {
                let mut ev = classad::Evaluator::new();
                ev.eval(&e, Some(slot), Some(job))
            })
        } else {
            let (attr, default) = match body.split_once(':') {
                Some((a, d)) => (a.trim(), Some(d)),
                None => (body.trim(), None),
            };
            match slot.get(attr) {
                Some(_) => Some(slot.eval_attr(attr)),
                None => default.map(Value::string),
            }
        };
        match value {
            Some(Value::Str(s)) => out.push_str(&s),
            Some(v) if !matches!(v, Value::Undefined | Value::Error) => {
                out.push_str(&v.to_string())
            }
            _ => out.push_str(&rest[at..body_start + close + 1]),
        }
        rest = &rest[body_start + close + 1..];
    }
    out.push_str(rest);
    out
}

fn matching_paren(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(i),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Fetches what a report named as streamed (`route`, asked with `req`) into
/// the staging file `path`: an error unless it came whole, `size` bytes.
async fn fetch_whole<T: serde::Serialize + ?Sized>(
    link: &Link,
    route: &str,
    req: &T,
    path: &Path,
    size: u64,
) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| format!("staging: {e}"))?;
    let (w, _) = link
        .long
        .download(route, req, file, size)
        .await
        .map_err(|e| format!("fetching it: {e}"))?;
    if w.len != size {
        return Err(format!("it came with {} of its {size} bytes", w.len));
    }
    Ok(())
}

/// A kept saved state to send with a job: carried when small; a big one named
/// by SHA-256, its file added to `sources` for the upload before the activation.
fn saved_state_to_send(
    path: &Path,
    sources: &mut crate::spool::Sources,
) -> Option<andes_protocol::pool::SavedState> {
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    if len <= andes_protocol::pool::STREAM_OVER {
        let data = std::fs::read(path).ok()?;
        return Some(andes_protocol::pool::SavedState { seq: 0, data, streamed: None });
    }
    let (sha, size) = andes_protocol::stream::file_sha256(&mut file).ok()?;
    let sha = hex::encode(sha);
    sources.push((sha.clone(), file));
    let streamed = Some(andes_protocol::pool::Streamed { size, sha256: Some(sha) });
    Some(andes_protocol::pool::SavedState { seq: 0, data: Vec::new(), streamed })
}

/// How many times a streamed output file is fetched before the job is held
/// (waiting 2, 4, 8, 16 and 32 s between tries: a full disk or a cut link of
/// a minute passes; a host that answers it no longer has the file is final).
const OUTPUT_TRIES: u32 = 6;

/// Keeps a checkpointing job's files (all but its streams) in `dir`,
/// replacing the previous checkpoint whole.
fn save_checkpoint(dir: &Path, outputs: &[FileData], staged: &Staged) -> std::io::Result<()> {
    let tmp = dir.with_extension("new");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    for f in outputs {
        if f.name == STDOUT_NAME
            || f.name == STDERR_NAME
            || !andes_protocol::pool::safe_relative_name(&f.name)
        {
            continue;
        }
        let p = tmp.join(&f.name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        staged.place(f, &p)?;
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&tmp, dir)
}

/// The job's input files: from the submitter's directories with the owner's
/// rights (see [`crate::userfs`]), or for a spooled job from what was
/// uploaded (`uploads` gives an upload's bytes by digest); then the files of
/// its last checkpoint (`ckpt`), which replace inputs of the same name. At
/// most RequestDisk bytes in all.
pub(crate) fn read_inputs(
    job: &ClassAd,
    ckpt: Option<&Path>,
    accounts: &Accounts,
    uploads: &dyn Fn(&str) -> Option<std::fs::File>,
) -> Result<transfer::Inputs, transfer::TransferError> {
    let limit = transfer::input_limit(job);
    let mut out = if transfer::is_spooled(job) {
        let list = str_attr(job, transfer::SPOOLED_INPUT).unwrap_or_default();
        let mut out = transfer::Inputs::default();
        let mut total = 0u64;
        for (name, digest) in transfer::spooled_inputs(&list) {
            if !andes_protocol::pool::safe_relative_name(&name) {
                return Err(format!("the spooled input file name {name:?} is not allowed").into());
            }
            let file = uploads(&digest)
                .ok_or_else(|| format!("the spooled input file {name} ({digest}) is not stored"))?;
            let len = file.metadata().map_err(|e| format!("spooled input {name}: {e}"))?.len();
            out.add(name, file, len, &mut total, limit)?;
        }
        out
    } else {
        let owner = str_attr(job, "Owner").unwrap_or_default();
        let access = accounts.access(&owner);
        Accounts::run(&access, || {
            transfer::input_files(job)
                .map_err(transfer::TransferError::from)
                .and_then(|files| transfer::read_files(&files, limit))
        })??
    };
    if let Some(dir) = ckpt {
        add_checkpoint_files(dir, &mut out, limit)?;
    }
    Ok(out)
}

/// Writes the output files: a spooled job's into its spool directory (under
/// `spool`), anyone else's into the submitter's directories with the owner's
/// rights.
pub(crate) fn write_outputs(
    id: JobId,
    job: &ClassAd,
    outputs: &[FileData],
    staged: &Staged,
    accounts: &Accounts,
    spool: Option<&Path>,
) -> Result<(), transfer::TransferError> {
    if transfer::is_spooled(job) {
        let spool = spool.ok_or("the schedd has no SPOOL for a spooled job's output")?;
        return Ok(transfer::keep_spooled_outputs(
            &transfer::spooled_dir(spool, id),
            outputs,
            &staged.files,
        )?);
    }
    let owner = str_attr(job, "Owner").unwrap_or_default();
    let access = accounts.access(&owner);
    let mut opened = staged.open()?;
    Accounts::run(&access, || transfer::write_outputs(job, outputs, &mut opened))?
}

/// The files of a job's own last checkpoint (`ckpt`, in the schedd's spool),
/// which replace input files of the same name in `out`; `total` and `limit`
/// are the bytes so far and at most.
fn add_checkpoint_files(
    ckpt: &Path,
    inputs: &mut transfer::Inputs,
    limit: u64,
) -> Result<(), String> {
    if !ckpt.is_dir() {
        return Ok(());
    }
    let b = andes_beneath::Beneath::open(ckpt)
        .map_err(|e| format!("cannot read the checkpoint {}: {e}", ckpt.display()))?;
    let found = b
        .walk("", transfer::MAX_INPUT_FILES)
        .map_err(|e| format!("cannot read the checkpoint {}: {e}", ckpt.display()))?;
    for e in found.into_iter().filter(|e| e.kind == andes_beneath::Kind::File) {
        inputs.files.retain(|f| f.name != e.path);
        let mut total: u64 = inputs.files.iter().map(FileData::len).sum();
        let (file, len) =
            b.open_file(&e.path).map_err(|err| format!("cannot read the checkpoint: {err}"))?;
        inputs.add(e.path, file.into_std(), len, &mut total, limit)?;
    }
    Ok(())
}

type ApiResult<T> = Result<axum::Json<T>, ApiError>;

/// `POST /v1/tail`: the job's owner (or an admin) reads its output or error
/// stream as it runs; the host is asked with this schedd's key, for the
/// job's claim.
async fn tail(
    State(p): State<ScheddPool>,
    caller: andes_protocol::Caller,
    SignedJson(req): SignedJson<crate::api::TailJobRequest>,
) -> ApiResult<andes_protocol::pool::TailReply> {
    let (ad, status) = p
        .inner
        .queue
        .read()
        .job(req.job)
        .map(|v| (v.ad(), v.proc.status))
        .ok_or_else(|| ApiError::not_found(format!("no job {} in the queue", req.job)))?;
    let owner = str_attr(&ad, "Owner").unwrap_or_default();
    if caller.role != Role::Admin && owner != caller.identity {
        return Err(ApiError::forbidden(format!(
            "job {} is {owner}'s, not {}'s",
            req.job, caller.identity
        )));
    }
    let running = matches!(status, JobStatus::Running | JobStatus::Suspended);
    let (true, Some(claim_id), Some(addr)) =
        (running, str_attr(&ad, CLAIM_ID_ATTR), str_attr(&ad, "StartdAddr"))
    else {
        return Err(ApiError::new(
            http::StatusCode::CONFLICT,
            format!("job {} is not running (status {})", req.job, status.letter()),
        ));
    };
    let host = TailRequest { claim_id, stderr: req.stderr, offset: req.offset, max: req.max };
    let link = p.inner.link(&addr);
    link.short
        .call::<_, andes_protocol::pool::TailReply>(Method::POST, "/v1/host/tail", Some(&host))
        .await
        .map(axum::Json)
        .map_err(|e| match &e.kind {
            ClientErrorKind::Status { status, reason } => {
                ApiError::new(*status, format!("job {}: {reason}", req.job))
            }
            _ => ApiError::new(
                http::StatusCode::BAD_GATEWAY,
                format!("job {}: its host {addr}: {e}", req.job),
            ),
        })
}

async fn demand(
    State(p): State<ScheddPool>,
    SignedJson(req): SignedJson<DemandRequest>,
) -> ApiResult<DemandReply> {
    Ok(axum::Json(p.inner.demand(&req.significant)))
}

async fn matches(
    State(p): State<ScheddPool>,
    SignedJson(req): SignedJson<MatchesRequest>,
) -> ApiResult<MatchesReply> {
    let inner = &p.inner;
    let mut taken = 0;
    let mut claimed = Vec::new();
    for grant in req.matches {
        let slot = classad::parse_ad(&grant.slot_ad).ok();
        let Some(job) = inner.next_job(grant.autocluster, slot.as_ref()) else { continue };
        taken += 1;
        claimed.push(grant.claim_id.clone());
        lock(&inner.state).claims += 1;
        tokio::spawn(inner.clone().run_claim(grant, job));
    }
    if !req.rejections.is_empty() {
        let now = inner.clock.now();
        let firsts: Vec<(JobId, String)> = {
            let state = lock(&inner.state);
            req.rejections
                .iter()
                .filter_map(|r| {
                    state.ac_jobs.get(&r.autocluster)?.front().map(|id| (*id, r.reason.clone()))
                })
                .collect()
        };
        for (id, reason) in firsts {
            let _ = inner.queue.pool(vec![id], PoolOp::Rejected(reason), now).await;
        }
    }
    Ok(axum::Json(MatchesReply { taken, claimed }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ad(text: &str) -> ClassAd {
        classad::parse_ad(text).unwrap()
    }

    /// A job edited after its autocluster was filed (here: asking for more
    /// memory than the slot has) is not taken by a claim reused for that
    /// autocluster; the next one that fits is.
    #[tokio::test]
    async fn a_reused_claim_takes_only_a_job_that_still_matches_its_slot() {
        use crate::job::JobSelector;
        use crate::queue::{Actor, Change, Submit, Targets};
        let dir = tempfile::tempdir().unwrap();
        let config = crate::schedd::ScheddConfig {
            name: "schedd@test".into(),
            data_dir: dir.path().join("spool"),
            periodic_interval: Duration::from_secs(60),
            history_max_jobs: 100,
            history_max_age: None,
            submit_host: "<127.0.0.1:0>".into(),
            cron_time_zone: jiff::tz::TimeZone::UTC,
            schedd_interval: 300,
            accounts: Arc::new(
                crate::userfs::Accounts::fixed("tester", false, "* = tester", |_| None).unwrap(),
            ),
            uid_domain: None,
            job_limits: Default::default(),
            spool_quota: crate::queue::DEFAULT_UPLOAD_QUOTA_BYTES,
            spool_reserve: Some(0),
        };
        let clock: Arc<dyn Clock> = Arc::new(andes_protocol::ManualClock::new(1_800_000_000));
        let schedd = crate::schedd::Schedd::open(&config, clock).unwrap();
        let keypair = Arc::new(Keypair::from_seed("schedd", [9; 32]).unwrap());
        let pool =
            ScheddPool::start(&schedd, PoolConfig::new("schedd@test", "127.0.0.1:1"), keypair);
        let alice = Actor::user("alice");
        let module = b"\0asm\x01\0\0\0".to_vec();
        let digest = crate::queue::module_digest(&module);
        schedd.queue.store_module(&alice, &digest, module, 1_800_000_000).await.unwrap();
        let job = ad(&format!(
            r#"[Cmd = "job.wasm"; CmdDigest = "{digest}"; Owner = "alice"; RequestMemory = 100; RequestDisk = 10; RequestCpus = 1; Requirements = TARGET.Memory >= RequestMemory]"#,
        ));
        let c = schedd
            .queue
            .submit(
                &alice,
                Submit { cluster: None, cluster_ad: job, procs: vec![ClassAd::new(); 3] },
                1_800_000_000,
            )
            .await
            .unwrap();
        let demand = pool.inner.demand(&[]);
        assert_eq!(demand.groups.len(), 1, "{demand:?}");
        let ac = demand.groups[0].autocluster;
        let edit = Change::Edit { attr: "RequestMemory".into(), expr: "99999999".into() };
        let one = Targets { ids: vec![JobSelector::Job(JobId::new(c, 1))], ..Default::default() };
        schedd.queue.change(&alice, one, edit, 1_800_000_001).await.unwrap();
        let slot = ad(
            r#"[Name = "slot1@h"; Memory = 1024; Disk = 100000; Cpus = 1; Requirements = true]"#,
        );
        assert_eq!(pool.inner.next_job(ac, Some(&slot)), Some(JobId::new(c, 0)));
        assert_eq!(pool.inner.next_job(ac, Some(&slot)), Some(JobId::new(c, 2)));
        assert_eq!(pool.inner.next_job(ac, Some(&slot)), None);
    }

    /// A batch of two: job 2 ends and job 3 starts in one step of the host,
    /// so the shadow following job 2 may first hear of its end in a report
    /// about job 3, running. Job 3 must be followed from that report; the
    /// view rewritten as job 2's end would say job 3 never started (nothing
    /// queued, not the report's job), and job 3 would run twice.
    #[test]
    fn a_job_whose_end_comes_with_the_next_ones_start_hands_that_start_on() {
        let end = |job: &str| JobEnd {
            job: job.into(),
            version: 4,
            update: "[ RemoteUserCpu = 0.1 ]".into(),
            ending: "[ ExitCode = 0; ExitBySignal = false ]".into(),
            outputs: Vec::new(),
            evicted: false,
        };
        let next_running = JobReport {
            version: 5,
            state: RunState::Running,
            job: Some("h#2.0#1".into()),
            ended: vec![end("h#1.0#1")],
            queued: 0,
            ..no_report(true)
        };
        let mut ends = Ends::default();
        let Viewed::Mine(mine) = ends.view(next_running, "h#1.0#1") else {
            panic!("job 1's end is in the report")
        };
        assert_eq!(mine.state, RunState::Exited);
        assert!(mine.ending.as_deref().is_some_and(|e| e.contains("ExitCode")));
        let behind = ends.behind(&mine);
        match ends.view(behind, "h#2.0#1") {
            Viewed::Mine(r) => assert_eq!(r.state, RunState::Running),
            Viewed::NotYet(r) => panic!("job 2 taken as never started: {r:?}"),
        }
        // A report about the job itself, ending it, hands on the same facts.
        let own_end = JobReport {
            version: 6,
            state: RunState::Exited,
            job: Some("h#2.0#1".into()),
            ended: vec![end("h#2.0#1")],
            queued: 0,
            ..no_report(true)
        };
        let Viewed::Mine(mine) = ends.view(own_end, "h#2.0#1") else { panic!() };
        let behind = ends.behind(&mine);
        assert_eq!(
            (behind.version, behind.state, behind.job.as_deref()),
            (6, RunState::Exited, Some("h#2.0#1"))
        );
    }

    #[test]
    fn dollar_dollar_expands_against_the_slot() {
        let slot = ad(r#"[ Name = "slot1@h"; Memory = 2048; Arch = "X86_64" ]"#);
        let job =
            ad(r#"[ Arguments = "--mem $$(Memory) --arch $$(Arch)"; Env = "X=$$(Missing:none)";
                 Big = "$$([Memory * 2])"; Keep = "$$(Nope)"; Plain = 3 ]"#);
        let out = expand_dollar_dollar(&job, &slot);
        assert_eq!(str_attr(&out, "Arguments").unwrap(), "--mem 2048 --arch X86_64");
        assert_eq!(str_attr(&out, "Env").unwrap(), "X=none");
        assert_eq!(str_attr(&out, "Big").unwrap(), "4096");
        assert_eq!(str_attr(&out, "Keep").unwrap(), "$$(Nope)");
        assert_eq!(out.eval_attr("Plain"), Value::Int(3));
        // Unbalanced: left alone, no panic.
        let nested = ad(r#"[ R = [ X = "$$(Arch)" ] ]"#);
        assert_eq!(
            expand_dollar_dollar(&nested, &slot).get("R").unwrap().to_string(),
            r#"[ X = "X86_64" ]"#
        );
        let odd = ad(r#"[ A = "$$(Memory" ]"#);
        assert_eq!(str_attr(&expand_dollar_dollar(&odd, &slot), "A").unwrap(), "$$(Memory");
    }

    #[test]
    fn inputs_and_outputs_move_between_iwd_and_sandbox_names() {
        let dir = tempfile::tempdir().unwrap();
        let iwd = dir.path();
        std::fs::write(iwd.join("data.txt"), b"123").unwrap();
        std::fs::create_dir(iwd.join("d")).unwrap();
        std::fs::write(iwd.join("d/x"), b"x").unwrap();
        std::fs::write(iwd.join("stdin.txt"), b"in").unwrap();
        let job = ad(&format!(
            r#"[ Iwd = "{}"; TransferInput = "data.txt, d"; In = "stdin.txt";
                 Out = "out/job.out"; Err = "job.err"; RequestDisk = 1 ]"#,
            iwd.display()
        ));
        // Every owner is the schedd's own account here.
        let own = Accounts::fixed("tester", false, "* = tester", |_| None).unwrap();
        let none = |_: &str| None;
        let mut names: Vec<_> = read_inputs(&job, None, &own, &none)
            .unwrap()
            .files
            .into_iter()
            .map(|f| f.name)
            .collect();
        names.sort();
        assert_eq!(names, ["_andes_stdin", "d/x", "data.txt"]);
        let outputs = vec![
            FileData::inline(STDOUT_NAME, b"hello".to_vec()),
            FileData::inline(STDERR_NAME, b"oops".to_vec()),
            FileData::inline("result", b"42".to_vec()),
        ];
        let id = JobId::new(1, 0);
        write_outputs(id, &job, &outputs, &Staged::default(), &own, None).unwrap();
        assert_eq!(std::fs::read(iwd.join("out/job.out")).unwrap(), b"hello");
        assert_eq!(std::fs::read(iwd.join("job.err")).unwrap(), b"oops");
        assert_eq!(std::fs::read(iwd.join("result")).unwrap(), b"42");
        let bad = vec![FileData::inline("../escape", vec![])];
        assert!(write_outputs(id, &job, &bad, &Staged::default(), &own, None).is_err());
        // Over RequestDisk (1 KiB).
        std::fs::write(iwd.join("data.txt"), vec![0u8; 2048]).unwrap();
        assert!(read_inputs(&job, None, &own, &none).unwrap_err().message.contains("RequestDisk"));
    }

    #[test]
    fn a_checkpoint_replaces_the_last_and_travels_with_the_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("checkpoints/1.0");
        std::fs::create_dir_all(dir.path().join("checkpoints")).unwrap();
        let files = |pairs: &[(&str, &str)]| -> Vec<FileData> {
            pairs
                .iter()
                .map(|(n, d)| FileData::inline(n.to_string(), d.as_bytes().to_vec()))
                .collect()
        };
        save_checkpoint(
            &ckpt,
            &files(&[("partial.txt", "1"), ("old.txt", "x")]),
            &Staged::default(),
        )
        .unwrap();
        save_checkpoint(
            &ckpt,
            &files(&[("partial.txt", "2"), (STDOUT_NAME, "out"), ("sub/state", "s")]),
            &Staged::default(),
        )
        .unwrap();
        std::fs::write(dir.path().join("partial.txt"), "stale input").unwrap();
        let job =
            ad(&format!(r#"[ Iwd = "{}"; TransferInput = "partial.txt" ]"#, dir.path().display()));
        let own = Accounts::fixed("tester", false, "* = tester", |_| None).unwrap();
        let mut got: Vec<(String, String)> = read_inputs(&job, Some(&ckpt), &own, &|_| None)
            .unwrap()
            .files
            .into_iter()
            .map(|f| (f.name, String::from_utf8(f.data).unwrap()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [("partial.txt".to_string(), "2".to_string()), ("sub/state".into(), "s".into())]
        );
    }

    #[test]
    fn host_ad_renames_the_streams() {
        let job = ad(r#"[ In = "a.in"; Out = "a.out"; Err = "/dev/null"; ClaimId = "secret" ]"#);
        let out = host_ad(&job, &ClassAd::new());
        assert!(!out.contains("ClaimId"));
        assert_eq!(str_attr(&out, "In").unwrap(), STDIN_NAME);
        assert_eq!(str_attr(&out, "Out").unwrap(), STDOUT_NAME);
        assert_eq!(str_attr(&out, "Err").unwrap(), "/dev/null");
    }
}
