//! The schedd daemon: the job queue behind the signed HTTP API of [`crate::api`],
//! the periodic job policy, and the job event logs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use andes_protocol::routes::{Api, Served};
use andes_protocol::stream::SignedStream;
use andes_protocol::{ApiError, Auth, Caller, Clock, Role, SignedJson};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use classad::ClassAd;

use crate::api::{
    ChangeRequest, ClustersReply, ClustersRequest, HistoryRequest, MAX_CLUSTER_BLOCK,
    NewClusterReply, QueryReply, QueryRequest, SubmitReply, SubmitRequest, SummaryReply,
    SummaryRequest, TransferDoneRequest, TransferFileRequest, TransferReply, TransferRequest,
};
use crate::job::JobSelector;
use crate::queue::{Actor, ChangeReport, Queue, QueueConfig, QueueError, Submit, parse_constraint};
use crate::userfs::{Access, Accounts};

/// The largest request the schedd reads: a cluster of a few hundred thousand jobs,
/// or a module.
pub const BODY_LIMIT: usize = 256 << 20;

/// How a schedd is set up (the `andes schedd` command fills it from the
/// configuration).
pub struct ScheddConfig {
    /// SCHEDD_NAME: the first part of every GlobalJobId.
    pub name: String,
    /// Where the queue database lives.
    pub data_dir: PathBuf,
    /// PERIODIC_EXPR_INTERVAL.
    pub periodic_interval: Duration,
    /// History retention: at most this many jobs.
    pub history_max_jobs: u64,
    /// History retention: at most this old, in seconds.
    pub history_max_age: Option<i64>,
    /// The address submit events name (`<127.0.0.1:9618>`).
    pub submit_host: String,
    /// CRON_TIME_ZONE: the zone of cron schedules (the system's by default).
    pub cron_time_zone: jiff::tz::TimeZone,
    /// SCHEDD_INTERVAL, seconds: a deferred job's lead when it sets no ScheddInterval.
    pub schedd_interval: i64,
    /// Whose rights each owner's files are read and written with
    /// (USER_ACCOUNT_MAP; see [`crate::userfs`]).
    pub accounts: Arc<Accounts>,
    /// UID_DOMAIN, the part after `@` of each job's `User` (by default the
    /// part of SCHEDD_NAME after its `@`).
    pub uid_domain: Option<String>,
    /// MAX_JOBS_PER_SUBMISSION, MAX_JOBS_PER_OWNER, MAX_JOBS_SUBMITTED.
    pub job_limits: crate::queue::JobLimits,
    /// SPOOL_QUOTA_PER_OWNER (bytes) and SPOOL_RESERVE (bytes): see
    /// [`crate::room`].
    pub spool_quota: u64,
    /// SPOOL_RESERVE (`None`: [`crate::room::default_reserve`]).
    pub spool_reserve: Option<u64>,
}

/// A running schedd's shared state.
#[derive(Clone)]
pub struct Schedd {
    /// The job queue.
    pub queue: Queue,
    clock: Arc<dyn Clock>,
    events: EventTap,
    /// Whose rights each owner's files are handled with.
    pub(crate) accounts: Arc<Accounts>,
    /// The schedd's spool (where spooled jobs' outputs are kept).
    pub(crate) spool: PathBuf,
    /// True once the start-up work that evaluates users' expressions (cron
    /// schedules, deferral times) may run and has run: see
    /// [`Schedd::defer_startup`].
    started: Arc<tokio::sync::watch::Sender<bool>>,
    /// The attributes the negotiator last named significant (its demand
    /// request's): with [`AUTOCLUSTER_ATTRS`], what sets jobs apart into
    /// autoclusters, for the negotiator and for queries that ask for them.
    pub(crate) significant: Arc<std::sync::Mutex<Vec<String>>>,
}

/// What every match reads of a job, so jobs that differ in any of them are
/// never one autocluster, whatever the negotiator names significant.
pub(crate) const AUTOCLUSTER_ATTRS: [&str; 5] =
    ["Requirements", "Rank", "RequestMemory", "RequestDisk", "RequestCpus"];

/// The attributes that set jobs apart into autoclusters: `significant`
/// (the negotiator's) and [`AUTOCLUSTER_ATTRS`], each once.
pub(crate) fn autocluster_attrs(significant: &[String]) -> Vec<String> {
    let mut sig: Vec<String> = Vec::with_capacity(significant.len() + AUTOCLUSTER_ATTRS.len());
    for a in AUTOCLUSTER_ATTRS.iter().copied().chain(significant.iter().map(String::as_str)) {
        if !sig.iter().any(|s| s.eq_ignore_ascii_case(a)) {
            sig.push(a.to_string());
        }
    }
    sig
}

type EventTap =
    Arc<std::sync::Mutex<Vec<tokio::sync::mpsc::UnboundedSender<Vec<crate::queue::QueueEvent>>>>>;

/// The queue's events after each commit, for the schedd's pool side (shadows,
/// negotiation): see [`Schedd::take_events`].
pub type EventStream = tokio::sync::mpsc::UnboundedReceiver<Vec<crate::queue::QueueEvent>>;

impl Schedd {
    /// Opens the queue in `config.data_dir` (created if missing).
    pub fn open(config: &ScheddConfig, clock: Arc<dyn Clock>) -> Result<Schedd, QueueError> {
        andes_beneath::private::create_dirs_reachable(&config.data_dir).map_err(|e| {
            QueueError::Storage(format!("cannot create {}: {e}", config.data_dir.display()))
        })?;
        let mut qc = QueueConfig::new(config.data_dir.join("job_queue.db"), &config.name);
        qc.history_max_jobs = config.history_max_jobs;
        qc.history_max_age = config.history_max_age;
        qc.cron_time_zone = config.cron_time_zone.clone();
        qc.schedd_interval = config.schedd_interval;
        if let Some(d) = &config.uid_domain {
            qc.uid_domain = d.clone();
        }
        qc.job_limits = config.job_limits;
        qc.upload_quota_bytes = config.spool_quota;
        qc.reserve_bytes =
            config.spool_reserve.unwrap_or_else(|| crate::room::default_reserve(&config.data_dir));
        // The spooled outputs of jobs that left go at once, off the writer.
        let (left_tx, left_rx) = std::sync::mpsc::channel::<Vec<crate::job::JobId>>();
        let spool = config.data_dir.clone();
        std::thread::Builder::new()
            .name("andes-spool-reaper".into())
            .spawn(move || {
                while let Ok(ids) = left_rx.recv() {
                    for id in ids {
                        let dir = crate::transfer::spooled_dir(&spool, id);
                        if let Ok(b) = andes_beneath::Beneath::open(&dir)
                            && b.clear().is_ok()
                        {
                            let _ = std::fs::remove_dir(&dir);
                        }
                    }
                }
            })
            .map_err(|e| QueueError::Storage(format!("cannot start the spool reaper: {e}")))?;
        let left_tx = std::sync::Mutex::new(left_tx);
        qc.on_left = Some(Box::new(move |ids: &[crate::job::JobId]| {
            let _ = left_tx.lock().unwrap_or_else(|e| e.into_inner()).send(ids.to_vec());
        }));
        let log = crate::eventlog::sink_for(
            config.submit_host.clone(),
            config.accounts.clone(),
            Some(config.data_dir.clone()),
        );
        let tap: EventTap = Arc::new(std::sync::Mutex::new(Vec::new()));
        let t = tap.clone();
        // Followers hear of a commit before anyone can read it; the event
        // logs are written after, outside the queue's lock.
        qc.notify = Some(Box::new(move |events: &[crate::queue::QueueEvent]| {
            let mut subscribers = t.lock().unwrap_or_else(|e| e.into_inner());
            subscribers.retain(|tx| tx.send(events.to_vec()).is_ok());
        }));
        qc.sink = Some(Box::new(move |events: &[crate::queue::QueueEvent]| log(events)));
        Ok(Schedd {
            queue: Queue::open(qc)?,
            clock,
            events: tap,
            accounts: config.accounts.clone(),
            spool: config.data_dir.clone(),
            started: Arc::new(tokio::sync::watch::Sender::new(true)),
            significant: Arc::default(),
        })
    }

    /// Holds back what evaluates users' expressions at start-up (every idle
    /// cron job's next run, each idle job's deferral time, the periodic
    /// policy) until [`Schedd::finish_startup`]: the daemon serves first, so
    /// no job's expression can keep it from answering, not even an admin's
    /// `rm` of that job.
    pub fn defer_startup(&self) {
        self.started.send_replace(false);
    }

    /// Runs the start-up work [`Schedd::defer_startup`] held back (every idle
    /// cron job takes its next run, as the manual says of a restart), then
    /// lets the rest go.
    pub async fn finish_startup(&self) {
        if let Err(e) = self.queue.recompute_cron(self.clock.now()).await {
            tracing::error!("recomputing the cron jobs' next runs: {e}");
        }
        self.started.send_replace(true);
    }

    /// Waits until start-up work may run (at once unless deferred).
    pub async fn started(&self) {
        let mut rx = self.started.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// A stream of the queue's events from now on; each caller (the pool
    /// side, the job router) has its own. Dropping it unsubscribes.
    pub fn take_events(&self) -> EventStream {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.events.lock().unwrap_or_else(|e| e.into_inner()).push(tx);
        rx
    }

    /// The schedd's clock.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// The API, behind `auth` (signed requests) and a role check.
    pub fn router(&self, auth: &Auth) -> Router {
        self.routes(auth).router
    }

    /// The API's routes with who may call each (see [`andes_protocol::routes`]).
    pub fn routes(&self, auth: &Auth) -> Served {
        use http::Method as M;
        // Other pools' schedds route jobs here (HTCondor-C) for owners this
        // pool trusts; see [`Actor::routing_schedd`].
        let who = &[Role::User, Role::Schedd];
        let mut served = Api::new()
            .route(M::GET, "/v1/modules/{digest}", who, get(has_module))
            .route(M::PUT, "/v1/modules/{digest}", who, axum::routing::put(put_module))
            .route(M::POST, "/v1/cluster", who, post(new_cluster))
            .route(M::POST, "/v1/clusters", who, post(new_clusters))
            .route(M::POST, "/v1/submit", who, post(submit))
            .route(M::POST, "/v1/query", who, post(query))
            .route(M::POST, "/v1/summary", who, post(summary))
            .route(M::POST, "/v1/change", who, post(change))
            .route(M::POST, "/v1/history", who, post(history))
            .route(M::PUT, "/v1/uploads/{digest}", who, axum::routing::put(put_upload))
            .route(M::POST, "/v1/transfer", who, post(transfer))
            .route(M::POST, "/v1/transfer/file", who, post(transfer_file))
            .route(M::POST, "/v1/transfer/done", who, post(transfer_done))
            .finish(auth, self.clone());
        served.router = served.router.layer(axum::Extension(auth.clone()));
        served
    }

    /// Evaluates the periodic policy every `interval` (on the schedd's clock), for
    /// as long as the returned task lives.
    pub fn spawn_periodic(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            me.started().await;
            // The first pass comes one interval after start, never before
            // the schedd serves.
            let mut tick =
                tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = me.queue.periodic(me.clock.now()).await {
                    tracing::error!("periodic job policy: {e}");
                }
                let gone = crate::transfer::sweep_spooled(&me.spool, |id| {
                    me.queue.read().job(id).is_some()
                });
                if gone > 0 {
                    tracing::info!("removed the spooled output of {gone} jobs that left the queue");
                }
                me.queue.spool_changed();
                match me.queue.collect_uploads(me.clock.now()).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!("removed {n} uploads no queued job uses"),
                    Err(e) => tracing::error!("collecting unused uploads: {e}"),
                }
            }
        })
    }

    fn now(&self) -> i64 {
        self.clock.now()
    }
}

/// Serves `schedd` through `server` (TLS or loopback plain HTTP, see
/// [`andes_protocol::Server`]) until the future is dropped.
pub async fn serve(
    schedd: Schedd,
    auth: Auth,
    server: andes_protocol::Server,
) -> std::io::Result<()> {
    let app = schedd.router(&auth);
    server.serve(app, std::future::pending()).await
}

/// Binds `addr` (port 0 picks one) and reports the address bound.
pub async fn bind(addr: SocketAddr) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let l = tokio::net::TcpListener::bind(addr).await?;
    let a = l.local_addr()?;
    Ok((l, a))
}

/// The queue's actor for a verified caller.
pub(crate) fn actor(c: &Caller) -> Actor {
    match c.role {
        Role::Admin => Actor::admin(&c.identity),
        Role::Schedd => Actor::routing_schedd(&c.identity),
        _ => Actor::user(&c.identity),
    }
}

fn api_error(e: QueueError) -> ApiError {
    match e {
        QueueError::NotFound(m) => ApiError::not_found(m),
        QueueError::Forbidden(m) => ApiError::forbidden(m),
        QueueError::Invalid(m) => ApiError::bad_request(m),
        // 412: the submit may succeed once its uploads are made.
        QueueError::NotUploaded(m) => ApiError::new(StatusCode::PRECONDITION_FAILED, m),
        QueueError::Storage(_) => ApiError::internal(e.to_string()),
    }
}

type ApiResult<T> = Result<axum::Json<T>, ApiError>;

fn check_digest(digest: &str) -> Result<(), ApiError> {
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!("`{digest}` is not a module digest (sha256:<64 hex>)")))
    }
}

/// `GET /v1/modules/{digest}`: whether the caller has uploaded it (never
/// whether anyone else has).
async fn has_module(
    State(s): State<Schedd>,
    caller: Caller,
    Path(digest): Path<String>,
) -> Result<StatusCode, ApiError> {
    check_digest(&digest)?;
    match s.queue.uploaded_by(&caller.identity, &digest).map_err(api_error)? {
        true => Ok(StatusCode::OK),
        false => Err(ApiError::not_found(format!(
            "{} has not uploaded {digest} (or it was collected)",
            caller.identity
        ))),
    }
}

async fn put_module(
    State(s): State<Schedd>,
    caller: Caller,
    Path(digest): Path<String>,
    body: SignedStream,
) -> Result<StatusCode, ApiError> {
    receive_upload(&s, &caller, &digest, body, true).await
}

async fn put_upload(
    State(s): State<Schedd>,
    caller: Caller,
    Path(digest): Path<String>,
    body: SignedStream,
) -> Result<StatusCode, ApiError> {
    receive_upload(&s, &caller, &digest, body, false).await
}

/// An upload, streamed to a file in the queue's uploads directory (never whole
/// in memory), kept if it is the body signed, names the digest its path gives,
/// fits the uploader's quota and, for a module, is a Wasm module.
async fn receive_upload(
    s: &Schedd,
    caller: &Caller,
    digest: &str,
    body: SignedStream,
    module: bool,
) -> Result<StatusCode, ApiError> {
    check_digest(digest)?;
    let signed = format!("sha256:{}", hex::encode(body.sha256));
    if signed != digest {
        return Err(ApiError::bad_request(format!(
            "the body is signed as {signed}, not the {digest} its path names"
        )));
    }
    let staged = tempfile::Builder::new()
        .prefix(".part-")
        .tempfile_in(s.queue.uploads())
        .map_err(|e| ApiError::internal(format!("{}: {e}", s.queue.uploads().display())))?;
    let (file, path) = staged.into_parts();
    // No more than the caller's spool quota has left, nor than the spool's
    // file system may take beyond its reserve.
    let limit = s.queue.upload_room(&caller.identity);
    let (size, mut file) = match body.write_to(file, limit).await {
        Ok(r) => r,
        Err(andes_protocol::stream::StreamError::TooLarge { .. }) => {
            return Err(ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                format!(
                    "{} may keep {limit} more bytes in the spool, less than this upload: the \
                     room left by their quota (SPOOL_QUOTA_PER_OWNER, uploads, spooled \
                     outputs and checkpoints together) or by the spool's free space beyond \
                     its reserve (SPOOL_RESERVE)",
                    caller.identity
                ),
            ));
        }
        Err(e) => return Err(andes_protocol::AuthError::from(e).into()),
    };
    if module {
        use std::io::{Read, Seek};
        let mut magic = [0u8; 4];
        let is_wasm =
            file.rewind().and_then(|()| file.read_exact(&mut magic)).is_ok() && magic == *b"\0asm";
        if !is_wasm {
            return Err(ApiError::bad_request(format!("{digest} is not a Wasm module")));
        }
    }
    drop(file);
    let staged = path.keep().map_err(|e| ApiError::internal(e.to_string()))?;
    s.queue.store_file(&actor(caller), digest, &staged, size, s.now()).await.map_err(api_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// The ad of a spooled job `id` the caller may fetch the output of.
fn spooled_job(s: &Schedd, caller: &Caller, id: crate::job::JobId) -> Result<ClassAd, ApiError> {
    let a = actor(caller);
    let (ad, owner, may) = {
        let st = s.queue.read();
        let v = st
            .job(id)
            .ok_or_else(|| ApiError::not_found(format!("job {id} is not in the queue")))?;
        (v.ad(), v.owner().to_string(), a.may_act_on(&v))
    };
    if !may {
        return Err(ApiError::forbidden(format!(
            "job {id} belongs to {owner}; {} may fetch only their own output",
            a.name
        )));
    }
    if !crate::transfer::is_spooled(&ad) {
        return Err(ApiError::bad_request(format!(
            "job {id} was not submitted with --spool: its output went to its directories"
        )));
    }
    Ok(ad)
}

async fn transfer(
    State(s): State<Schedd>,
    caller: Caller,
    SignedJson(req): SignedJson<TransferRequest>,
) -> ApiResult<TransferReply> {
    let id = req.job;
    let ad = spooled_job(&s, &caller, id)?;
    let dir = crate::transfer::spooled_dir(&s.spool, id);
    let (files, log) =
        tokio::task::spawn_blocking(move || crate::transfer::spooled_outputs(&dir, TRANSFER_LIMIT))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
            .map_err(ApiError::internal)?;
    let ad = crate::attrs::visible(ad, crate::attrs::Reader::Owner).to_string();
    Ok(axum::Json(TransferReply { ad, files, log }))
}

/// `POST /v1/transfer/file`: one output file of a spooled job that
/// `/v1/transfer` named as streamed, as a streamed body.
async fn transfer_file(
    State(s): State<Schedd>,
    caller: Caller,
    SignedJson(req): SignedJson<TransferFileRequest>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let ad = spooled_job(&s, &caller, req.job);
    if let Err(e) = ad {
        return e.into_response();
    }
    if !andes_protocol::pool::safe_relative_name(&req.name)
        || req.name == crate::transfer::SPOOLED_LOG
    {
        return ApiError::bad_request(format!("{:?} is not an output file name", req.name))
            .into_response();
    }
    let dir = crate::transfer::spooled_dir(&s.spool, req.job);
    let opened = tokio::task::spawn_blocking(move || {
        andes_beneath::Beneath::open(&dir)
            .map_err(|e| e.to_string())?
            .open_file(&req.name)
            .map_err(|e| e.to_string())
    })
    .await;
    match opened {
        Ok(Ok((file, len))) => andes_protocol::stream::file_response(file.into_std(), len),
        Ok(Err(e)) => ApiError::not_found(format!("no such output file: {e}")).into_response(),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

/// The most bytes of a spooled job's event log one `transfer` answer carries.
const TRANSFER_LIMIT: u64 = 16 << 20;

async fn transfer_done(
    State(s): State<Schedd>,
    caller: Caller,
    SignedJson(req): SignedJson<TransferDoneRequest>,
) -> ApiResult<ChangeReport> {
    let r = s.queue.output_fetched(&actor(&caller), req.jobs, s.now()).await.map_err(api_error)?;
    Ok(axum::Json(r))
}

async fn new_cluster(State(s): State<Schedd>, caller: Caller) -> ApiResult<NewClusterReply> {
    let cluster = s.queue.reserve_cluster(&actor(&caller), s.now()).await.map_err(api_error)?;
    Ok(axum::Json(NewClusterReply { cluster }))
}

async fn new_clusters(
    State(s): State<Schedd>,
    caller: Caller,
    SignedJson(req): SignedJson<ClustersRequest>,
) -> ApiResult<ClustersReply> {
    if req.count == 0 || req.count > MAX_CLUSTER_BLOCK {
        return Err(ApiError::bad_request(format!(
            "count {}: from 1 to {MAX_CLUSTER_BLOCK} cluster ids at once",
            req.count
        )));
    }
    let first =
        s.queue.reserve_clusters(&actor(&caller), req.count, s.now()).await.map_err(api_error)?;
    Ok(axum::Json(ClustersReply { first, count: req.count }))
}

fn parse_ad(text: &str, what: &str) -> Result<ClassAd, ApiError> {
    classad::parse_ad(text).map_err(|e| ApiError::bad_request(format!("{what}: {e}")))
}

async fn submit(
    State(s): State<Schedd>,
    caller: Caller,
    axum::Extension(auth): axum::Extension<Auth>,
    SignedJson(req): SignedJson<SubmitRequest>,
) -> ApiResult<SubmitReply> {
    let cluster_ad = parse_ad(&req.cluster_ad, "cluster ad")?;
    if caller.role == Role::Schedd {
        routed_owner(&auth, &caller, &cluster_ad)?;
    }
    let mut procs = Vec::with_capacity(req.procs.len());
    for (i, p) in req.procs.iter().enumerate() {
        procs.push(if p == "[]" { ClassAd::new() } else { parse_ad(p, &format!("job {i}"))? });
    }
    // Every module the jobs run must be stored: the cluster's, or each job's own.
    let mut digests = std::collections::BTreeSet::new();
    for ad in std::iter::once(&cluster_ad).chain(procs.iter()) {
        if let Some(e) = ad.get(classad::name!("CmdDigest")) {
            match e.as_literal() {
                Some(classad::Value::Str(d)) => digests.insert(d.to_string()),
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "CmdDigest = {e}: expected a string"
                    )));
                }
            };
        }
    }
    // Each job's whole ad: its cluster's own when the job adds nothing (the common
    // case, and no copy of the cluster's ad for each of thousands of jobs).
    let job_of = |p: &ClassAd| -> std::borrow::Cow<'_, ClassAd> {
        if p.is_empty() {
            std::borrow::Cow::Borrowed(&cluster_ad)
        } else {
            let mut job = cluster_ad.clone();
            job.update(p);
            std::borrow::Cow::Owned(job)
        }
    };
    // A DAGMan job runs no module: the schedd runs it itself, as its owner.
    let dagman = |p: &ClassAd| andes_job::dagman::is_dagman(&job_of(p));
    if procs.iter().any(dagman) {
        if caller.role == Role::Schedd || !procs.iter().all(dagman) {
            return Err(ApiError::bad_request(
                "a DAGMan job is submitted alone, by its owner (andes submit-dag)",
            ));
        }
    } else if digests.is_empty()
        || procs.iter().any(|p| p.get(classad::name!("CmdDigest")).is_none())
            && cluster_ad.get(classad::name!("CmdDigest")).is_none()
    {
        return Err(ApiError::bad_request("a job has no CmdDigest (its module's sha256)"));
    }
    for digest in &digests {
        check_digest(digest)?;
    }
    // Files: a spooled job names uploads (the queue checks, as it commits,
    // that each module and input is the submitter's own); any other
    // job's files are read and written in its owner's directories, which
    // this schedd may do only with the owner's rights.
    // (Jobs that add nothing to their cluster's ad are checked once.)
    let mut cluster_checked = false;
    for (i, p) in procs.iter().enumerate() {
        if p.is_empty() {
            if cluster_checked {
                continue;
            }
            cluster_checked = true;
        }
        let job = job_of(p);
        if crate::transfer::is_spooled(&job) {
            let list = job.eval_attr(classad::name!(crate::transfer::SPOOLED_INPUT));
            for (name, digest) in crate::transfer::spooled_inputs(list.as_str().unwrap_or("")) {
                if !andes_protocol::pool::safe_relative_name(&name) {
                    return Err(ApiError::bad_request(format!(
                        "job {i}: spooled input name {name:?} is not allowed"
                    )));
                }
                check_digest(&digest)?;
            }
        } else if caller.role == Role::Schedd {
            return Err(ApiError::bad_request(format!(
                "job {i}: a job routed from another pool must carry its input files (spooled)"
            )));
        } else if let Access::SpoolOnly(why) = s.accounts.access(&caller.identity) {
            return Err(ApiError::forbidden(why));
        }
    }
    let count = procs.len() as u32;
    let cluster = s
        .queue
        .submit(&actor(&caller), Submit { cluster: req.cluster, cluster_ad, procs }, s.now())
        .await
        .map_err(api_error)?;
    Ok(axum::Json(SubmitReply { cluster, count }))
}

/// Checks a job another pool's schedd routes here: its `Owner` must be a
/// user this pool's trust file lists. The pool trusts that schedd to speak
/// for its users, as HTCondor trusts a schedd with its owners' jobs; an owner
/// it does not know is refused, so routed jobs never run as an anonymous
/// router user.
fn routed_owner(auth: &Auth, caller: &Caller, ad: &ClassAd) -> Result<(), ApiError> {
    let owner = match ad.get(classad::name!("Owner")).and_then(|e| e.as_literal()) {
        Some(classad::Value::Str(o)) => o.to_string(),
        _ => {
            return Err(ApiError::bad_request(format!(
                "schedd {} routes a job without an Owner; a routed job names the user it \
                 runs for",
                caller.identity
            )));
        }
    };
    let trust = auth.verifier().trust();
    let known = trust.iter().any(|(_, id)| id.role == Role::User && id.name == owner);
    if !known {
        return Err(ApiError::forbidden(format!(
            "schedd {} may not submit for {owner}: {owner} is not a user this pool trusts",
            caller.identity
        )));
    }
    Ok(())
}

/// A job ad as a query shows it (the queue gave it as the caller may see
/// it): only the projected attributes when a projection is given.
fn project(ad: &ClassAd, projection: &[String]) -> String {
    if projection.is_empty() {
        return ad.to_string();
    }
    let mut out = ClassAd::new();
    for p in projection {
        if let Some((name, e)) = ad.get_entry(p) {
            out.insert(name.clone(), e.clone());
        }
    }
    out.to_string()
}

/// The most attributes a query may group jobs by.
const MAX_GROUP_ATTRS: usize = 256;

/// The groups `ads` fall into by the values of `attrs` (an attribute an ad
/// lacks is a value of its own), one ad each in the order of their first
/// members, at most `limit`: the attributes as the first member has them,
/// `JobCount`, `AutoClusterId` and `AutoClusterAttrs`, as HTCondor's schedd
/// answers an autocluster query.
fn group_ads<'a>(
    ads: impl Iterator<Item = &'a ClassAd>,
    attrs: &[String],
    limit: Option<usize>,
) -> Vec<String> {
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut groups: Vec<(ClassAd, i64)> = Vec::new();
    for ad in ads {
        let mut key = String::new();
        for a in attrs {
            // \u{1} cannot occur in unparsed ClassAd text: no two keys collide.
            key.push('\u{1}');
            if let Some(e) = ad.get(a) {
                key.push_str(&e.to_string());
            }
        }
        let n = *index.entry(key).or_insert_with(|| {
            let mut g = ClassAd::new();
            for a in attrs {
                if let Some((name, e)) = ad.get_entry(a) {
                    g.insert(name.clone(), e.clone());
                }
            }
            groups.push((g, 0));
            groups.len() - 1
        });
        groups[n].1 += 1;
    }
    let list = attrs.join(",");
    groups
        .into_iter()
        .take(limit.unwrap_or(usize::MAX))
        .enumerate()
        .map(|(i, (mut g, count))| {
            g.insert_value(classad::name!("JobCount"), count);
            g.insert_value(classad::name!("AutoClusterId"), i as i64 + 1);
            g.insert_value(classad::name!("AutoClusterAttrs"), list.clone());
            g.to_string()
        })
        .collect()
}

/// The owner `mine` narrows a request to: the caller, unless an admin.
fn mine(caller: &Caller, mine: bool) -> Option<String> {
    (mine && caller.role != Role::Admin).then(|| caller.identity.clone())
}

async fn query(
    State(s): State<Schedd>,
    caller: Caller,
    SignedJson(mut req): SignedJson<QueryRequest>,
) -> ApiResult<QueryReply> {
    if req.targets.ids.is_empty()
        && req.targets.owners.is_empty()
        && let Some(me) = mine(&caller, req.mine)
    {
        req.targets.owners.push(me);
    }
    let constraint =
        req.targets.constraint.as_deref().map(parse_constraint).transpose().map_err(api_error)?;
    let group_by = match req.group_by.take() {
        None => None,
        Some(attrs) if attrs.is_empty() => {
            Some(autocluster_attrs(&s.significant.lock().unwrap_or_else(|e| e.into_inner())))
        }
        Some(attrs) if attrs.len() > MAX_GROUP_ATTRS => {
            return Err(ApiError::bad_request(format!(
                "group_by names {} attributes: at most {MAX_GROUP_ATTRS}",
                attrs.len()
            )));
        }
        Some(attrs) => Some(attrs),
    };
    let now = s.now();
    let q = s.queue.clone();
    // Off the runtime, and with the queue's lock taken only a few hundred jobs
    // at a time: a costly constraint delays nobody else.
    let ads = tokio::task::spawn_blocking(move || {
        let t = &req.targets;
        let wanted = |v: &crate::queue::JobView<'_>| {
            (t.ids.is_empty() && t.owners.is_empty())
                || t.ids.iter().any(|sel: &JobSelector| sel.selects(v.id))
                || t.owners.iter().any(|o| o == v.owner())
        };
        let viewer = actor(&caller);
        match &group_by {
            None => q
                .query(&viewer, wanted, constraint.as_ref(), req.limit, now)
                .map(|found| found.iter().map(|(_, ad)| project(ad, &req.projection)).collect()),
            Some(attrs) => q
                .query(&viewer, wanted, constraint.as_ref(), None, now)
                .map(|found| group_ads(found.iter().map(|(_, ad)| ad), attrs, req.limit)),
        }
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
    .map_err(api_error)?;
    Ok(axum::Json(QueryReply { ads }))
}

async fn summary(
    State(s): State<Schedd>,
    caller: Caller,
    SignedJson(mut req): SignedJson<SummaryRequest>,
) -> ApiResult<SummaryReply> {
    if req.owners.is_empty()
        && let Some(me) = mine(&caller, req.mine)
    {
        req.owners.push(me);
    }
    let st = s.queue.read();
    let rows = st.summary(&req.owners);
    let totals = st.totals();
    Ok(axum::Json(SummaryReply { schedd: st.schedd_name().to_string(), rows, totals }))
}

async fn change(
    State(s): State<Schedd>,
    caller: Caller,
    SignedJson(req): SignedJson<ChangeRequest>,
) -> ApiResult<ChangeReport> {
    let r = s
        .queue
        .change(&actor(&caller), req.targets, req.change, s.now())
        .await
        .map_err(api_error)?;
    Ok(axum::Json(r))
}

async fn history(
    State(s): State<Schedd>,
    caller: Caller,
    SignedJson(req): SignedJson<HistoryRequest>,
) -> ApiResult<QueryReply> {
    let q = s.queue.clone();
    let viewer = actor(&caller);
    let ads = tokio::task::spawn_blocking(move || {
        q.history(&viewer, req.constraint.as_deref(), &req.owners, req.limit)
            .map(|ads| ads.iter().map(|a| project(a, &req.projection)).collect())
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
    .map_err(api_error)?;
    Ok(axum::Json(QueryReply { ads }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_group_by_their_values_in_the_order_of_their_first_members() {
        let ads: Vec<ClassAd> = [
            "[ClusterId = 1; RequestMemory = 64; Owner = \"a\"]",
            "[ClusterId = 2; RequestMemory = 128; Owner = \"a\"]",
            "[ClusterId = 3; RequestMemory = 64; Owner = \"a\"]",
            // A missing attribute is a value of its own, never another's.
            "[ClusterId = 4; Owner = \"a\"]",
            // An expression is grouped by its text.
            "[ClusterId = 5; RequestMemory = 32 * 2; Owner = \"a\"]",
        ]
        .iter()
        .map(|t| classad::parse_ad(t).unwrap())
        .collect();
        let attrs = vec!["RequestMemory".to_string(), "Owner".to_string()];
        let groups: Vec<ClassAd> = group_ads(ads.iter(), &attrs, None)
            .iter()
            .map(|t| classad::parse_ad(t).unwrap())
            .collect();
        let row = |g: &ClassAd| {
            (g.eval_attr("AutoClusterId"), g.eval_attr("JobCount"), g.eval_attr("RequestMemory"))
        };
        use classad::Value::{Int, Undefined};
        assert_eq!(
            groups.iter().map(row).collect::<Vec<_>>(),
            [
                (Int(1), Int(2), Int(64)),
                (Int(2), Int(1), Int(128)),
                (Int(3), Int(1), Undefined),
                (Int(4), Int(1), Int(64)),
            ]
        );
        assert!(groups.iter().all(|g| g.get("ClusterId").is_none()));
        assert_eq!(
            groups[0].eval_attr("AutoClusterAttrs"),
            classad::Value::Str("RequestMemory,Owner".into())
        );
        // The limit counts groups.
        assert_eq!(group_ads(ads.iter(), &attrs, Some(2)).len(), 2);
    }

    #[test]
    fn autocluster_attributes_hold_what_every_match_reads_once() {
        let sig = autocluster_attrs(&["requestmemory".into(), "Arch".into(), "Arch".into()]);
        assert_eq!(
            sig,
            ["Requirements", "Rank", "RequestMemory", "RequestDisk", "RequestCpus", "Arch"]
        );
    }
}
