//! The job router as the schedd runs it: it follows the queue's change
//! stream (no polling storm) and also runs every JOB_ROUTER_POLLING_PERIOD;
//! each pass routes idle jobs ([`super::plan`]) and follows the routed copies
//! at their targets. For an `andes HOST:PORT` target it is HTCondor-C's
//! gridmanager: it submits the copy to that schedd, signed with the router's
//! key, and mirrors what happens to it there onto the copy (started, evicted,
//! held, completed, removed), which the queue mirrors onto the original.
//!
//! No filesystem is shared: as HTCondor-C does with spooling, the router
//! reads a copy's input files here (with its owner's rights), sends them
//! with the module to the target's spool, and when the copy completes there
//! fetches its output and writes it where the original's submit file says,
//! again with the owner's rights. The copy runs at the target as its owner
//! (the target's trust decides whether this schedd may submit for them), and
//! its original mirrors it: status, hold reason, usage, RemoteHost, exit;
//! holds, releases, removals and edits of the original reach the copy.
//!
//! A route whose TargetUniverse is not the grid universe (9) makes a copy
//! this pool runs itself; the router sends it nowhere.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use andes_protocol::{ApiError, Auth, Caller, Client, Clock, Keypair, Role, SignedJson};
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use classad::{ClassAd, EvalOptions, Evaluator, Expr, Value};
use http::Method;
use serde::{Deserialize, Serialize};

use super::{Decision, RouteLoad, Table, TableError, Target};
use crate::api::{
    ChangeRequest, HistoryRequest, QueryReply, QueryRequest, SubmitReply, SubmitRequest, Targets,
};
use crate::job::{JobId, JobSelector, JobStatus};
use crate::quarantine::Journal;
use crate::queue::{Actor, Change, EventKind, PoolOp, Queue, QueueEvent, QueueState, ROUTED_FROM};
use crate::schedd::Schedd;

/// How the router is set up (from the configuration).
#[derive(Clone, Debug)]
pub struct RouterConfig {
    /// JOB_ROUTER_DEFAULTS.
    pub defaults: Option<String>,
    /// JOB_ROUTER_ENTRIES.
    pub entries: Option<String>,
    /// JOB_ROUTER_ENTRIES_FILE: a file of more entries, read again whenever
    /// it changes.
    pub entries_file: Option<PathBuf>,
    /// JOB_ROUTER_ENTRIES_CMD: a shell command whose output is more entries.
    pub entries_cmd: Option<String>,
    /// JOB_ROUTER_ENTRIES_REFRESH: how often the command runs again; zero
    /// (HTCondor's meaning) is never: it runs once, at start.
    pub entries_refresh: Duration,
    /// Routes in the transform language (JOB_ROUTER_ROUTE_NAMES and the
    /// knobs around it).
    pub named: super::NamedRoutes,
    /// JOB_ROUTER_SOURCE_JOB_CONSTRAINT.
    pub source_constraint: Option<String>,
    /// JOB_ROUTER_POLLING_PERIOD.
    pub polling_period: Duration,
    /// Where finished routed jobs are recorded (`andes router history`).
    pub history: PathBuf,
    /// Where Slurm jobs' scripts, modules and results are kept (a directory
    /// the Slurm nodes share with the schedd).
    pub work_dir: PathBuf,
    /// The `andes` command Slurm jobs run (`andes run`), as the nodes see it.
    pub andes: PathBuf,
}

pub use crate::attrs::{GRID_JOB_ID, GRID_JOB_STATUS};

/// The job policy a copy keeps here and does not take to its target: as
/// the manual says, the copy's periodic expressions are evaluated for the
/// copy (here), and so is its exit policy: a copy `max_retries` requeues
/// is submitted to its target again, a new run each time.
const POLICY_ATTRS: [&str; 12] = [
    "OnExitRemove",
    "OnExitHold",
    "OnExitHoldReason",
    "OnExitHoldSubCode",
    "PeriodicHold",
    "PeriodicHoldReason",
    "PeriodicHoldSubCode",
    "PeriodicRelease",
    "PeriodicReleaseReason",
    "PeriodicRemove",
    "PeriodicRemoveReason",
    "TimerRemove",
];

struct Inner {
    queue: Queue,
    /// Whose rights each owner's files are read and written with.
    accounts: Arc<crate::userfs::Accounts>,
    /// The schedd's spool (outputs of spooled originals).
    spool: PathBuf,
    clock: Arc<dyn Clock>,
    cfg: RouterConfig,
    /// Where the table comes from (JOB_ROUTER_DEFAULTS, _ENTRIES,
    /// _ENTRIES_FILE, _ENTRIES_CMD, the named routes): `cfg`'s at start,
    /// replaced by [`JobRouter::reconfigure`].
    sources: Mutex<RouterConfig>,
    keypair: Arc<Keypair>,
    source: Option<Expr>,
    table: Mutex<Arc<Table>>,
    /// Failure history by route name (kept across table reloads).
    failures: Mutex<HashMap<String, RouteLoad>>,
    clients: Mutex<HashMap<String, Client>>,
    /// The queue's events. A pass drains it while holding the queue's read
    /// lock: every commit it can see has its events here already, so an
    /// ending is counted before the route it frees is used again.
    events: Mutex<crate::schedd::EventStream>,
    /// Times the table was loaded again (JOB_ROUTER_ENTRIES_CMD's refresh, or
    /// JOB_ROUTER_ENTRIES_FILE changed), successfully or not.
    reloads: std::sync::atomic::AtomicU64,
}

/// The running job router; cheap to clone.
#[derive(Clone)]
pub struct JobRouter {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The most bytes JOB_ROUTER_ENTRIES_FILE may hold.
pub const MAX_ENTRIES_FILE: u64 = 16 << 20;

/// Loads the routing table: JOB_ROUTER_ENTRIES, JOB_ROUTER_ENTRIES_FILE,
/// and the output of JOB_ROUTER_ENTRIES_CMD, in that order, arranged by
/// JOB_ROUTER_ROUTE_NAMES with its transform-language routes. A file that
/// cannot be read, or a command that fails, is an error (a reload keeps the
/// table it had).
pub fn load_table(cfg: &RouterConfig) -> Result<Table, TableError> {
    let mut entries = Vec::new();
    if let Some(e) = &cfg.entries {
        entries.push(("JOB_ROUTER_ENTRIES".to_string(), e.clone()));
    }
    if let Some(path) = &cfg.entries_file {
        let origin = format!("JOB_ROUTER_ENTRIES_FILE {}", path.display());
        let read = || -> std::io::Result<String> {
            use std::io::Read as _;
            let mut text = String::new();
            std::fs::File::open(path)?.take(MAX_ENTRIES_FILE + 1).read_to_string(&mut text)?;
            Ok(text)
        };
        let text = read().map_err(|e| TableError {
            origin: origin.clone(),
            message: format!("cannot read it: {e}"),
        })?;
        if text.len() as u64 > MAX_ENTRIES_FILE {
            return Err(TableError {
                origin,
                message: format!("it holds more than {MAX_ENTRIES_FILE} bytes"),
            });
        }
        entries.push((origin, text));
    }
    if let Some(cmd) = &cfg.entries_cmd {
        let out = std::process::Command::new(if cfg!(windows) { "cmd" } else { "sh" })
            .args(if cfg!(windows) { ["/C", cmd.as_str()] } else { ["-c", cmd.as_str()] })
            .output()
            .map_err(|e| TableError {
                origin: "JOB_ROUTER_ENTRIES_CMD".into(),
                message: format!("cannot run `{cmd}`: {e}"),
            })?;
        if !out.status.success() {
            return Err(TableError {
                origin: "JOB_ROUTER_ENTRIES_CMD".into(),
                message: format!(
                    "`{cmd}` failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
        let origin = format!("the output of JOB_ROUTER_ENTRIES_CMD `{cmd}`");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // A run that printed an unreadable entry failed: the last good
        // table stays (HTCondor keeps it when the command fails).
        crate::router::check_entries(&text)
            .map_err(|message| TableError { origin: origin.clone(), message })?;
        entries.push((origin, text));
    }
    Table::load(cfg.defaults.as_deref(), &entries).map(|t| t.arrange(&cfg.named))
}

impl JobRouter {
    /// Loads the table and starts the router on `schedd`'s queue, submitting
    /// to other pools with `keypair`. Must run inside a tokio runtime.
    pub fn start(
        schedd: &Schedd,
        cfg: RouterConfig,
        keypair: Arc<Keypair>,
    ) -> Result<JobRouter, TableError> {
        let table = load_table(&cfg)?;
        for w in &table.warnings {
            tracing::warn!("job router: {w}");
        }
        let source = match &cfg.source_constraint {
            Some(c) if !c.trim().is_empty() => {
                Some(classad::parse_expr(c).map_err(|e| TableError {
                    origin: "JOB_ROUTER_SOURCE_JOB_CONSTRAINT".into(),
                    message: e.to_string(),
                })?)
            }
            _ => None,
        };
        let inner = Arc::new(Inner {
            queue: schedd.queue.clone(),
            accounts: schedd.accounts.clone(),
            spool: schedd.spool.clone(),
            clock: schedd.clock(),
            sources: Mutex::new(cfg.clone()),
            cfg,
            keypair,
            source,
            table: Mutex::new(Arc::new(table)),
            failures: Mutex::new(HashMap::new()),
            clients: Mutex::new(HashMap::new()),
            events: Mutex::new(schedd.take_events()),
            reloads: std::sync::atomic::AtomicU64::new(0),
        });
        tokio::spawn(inner.clone().run());
        Ok(JobRouter { inner })
    }

    /// `andes reconfig`: the routing table from `cfg`'s sources (its
    /// defaults, entries, entries file and command, and named routes),
    /// loaded now; they stay the sources of later reloads. A table that does
    /// not load is refused and the one in use stays. The routes' failure
    /// history is kept. Returns the number of routes, and what was wrong
    /// with the entries it skipped.
    pub fn reconfigure(&self, cfg: RouterConfig) -> Result<(usize, Vec<String>), TableError> {
        let table = load_table(&cfg)?;
        for w in &table.warnings {
            tracing::warn!("job router: {w}");
        }
        let said = (table.routes.len(), table.warnings.clone());
        *lock(&self.inner.sources) = cfg;
        *lock(&self.inner.table) = Arc::new(table);
        tracing::info!("job router: reconfigured, {} routes", said.0);
        Ok(said)
    }

    /// How many times the table has been loaded again since start (the
    /// entries command refreshed, or the entries file changed).
    pub fn reloads(&self) -> u64 {
        self.inner.reloads.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The routing table in use.
    pub fn table(&self) -> Arc<Table> {
        lock(&self.inner.table).clone()
    }

    /// `andes router q` and `andes router history`'s routes.
    pub fn router(&self, auth: &Auth) -> Router {
        self.routes(auth).router
    }

    /// [`JobRouter::router`] with who may call each route.
    pub fn routes(&self, auth: &Auth) -> andes_protocol::routes::Served {
        use http::Method as M;
        let who = &[Role::User, Role::Admin];
        andes_protocol::routes::Api::new()
            .route(M::POST, "/v1/router/q", who, post(router_q))
            .route(M::POST, "/v1/router/history", who, post(router_history))
            .finish(auth, self.clone())
    }

    /// Runs one routing pass now (tests, and after changes).
    pub async fn pass(&self) {
        self.inner.pass().await;
    }

    /// Follows every routed copy at its target once now, as each
    /// JOB_ROUTER_POLLING_PERIOD does.
    pub async fn follow(&self) {
        self.inner.follow().await;
    }
}

fn str_attr<N: classad::NameRef + ?Sized>(ad: &ClassAd, name: &N) -> Option<String> {
    match ad.eval_attr(name) {
        Value::Str(s) => Some(s.to_string()),
        _ => None,
    }
}

/// What the journal names while the router evaluates
/// JOB_ROUTER_SOURCE_JOB_CONSTRAINT against a job.
const SOURCE: &str = "the job router's source constraint";

/// Whether route `name`'s JobFailureTest calls the run of `copy` (job `id`)
/// ended a failure.
fn judged_failed(
    journal: &Journal,
    id: JobId,
    table: &Table,
    name: &str,
    copy: &ClassAd,
    now: i64,
) -> bool {
    table.routes.iter().find(|r| r.name == name).is_some_and(|r| {
        let mut ev = Evaluator::with_options(EvalOptions { now: Some(now), ..Default::default() });
        let _evaluating = journal.enter(id, "the job router's JobFailureTest");
        crate::quarantine::fault_point("route", copy);
        r.failed(&mut ev, copy)
    })
}

/// A copy's job at another andes pool, with the client that reaches it.
struct Remote<'a> {
    client: &'a Client,
    addr: &'a str,
    job: JobId,
    /// Still in the target's queue (else only in its history, where its
    /// spooled output is no longer kept).
    queued: bool,
}

/// A copy's job at another andes pool: its GridJobId `andes HOST:PORT C.P`
/// as (HOST:PORT, C.P).
fn andes_grid_job(grid_job: &str) -> Option<(&str, JobId)> {
    let mut w = grid_job.split_whitespace();
    match (w.next(), w.next(), w.next().and_then(job_id)) {
        (Some("andes"), Some(addr), Some(remote)) => Some((addr, remote)),
        _ => None,
    }
}

fn job_id(text: &str) -> Option<JobId> {
    match text.parse() {
        Ok(crate::job::JobSelector::Job(j)) => Some(j),
        _ => None,
    }
}

/// One finished routed job, as `andes router history` counts it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HistoryRecord {
    /// The route's name.
    pub route: String,
    /// Its GridResource.
    pub grid_resource: String,
    /// When the copy was made (Unix seconds).
    pub routed: i64,
    /// When it ended.
    pub ended: i64,
    /// Its wall-clock time at the target, seconds.
    pub wall_seconds: f64,
    /// True when it completed; false when it was removed (a run aborted).
    pub completed: bool,
}

impl Inner {
    async fn run(self: Arc<Self>) {
        let mut tick =
            tokio::time::interval(self.cfg.polling_period.max(Duration::from_millis(100)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // JOB_ROUTER_ENTRIES_REFRESH = 0: the command ran once, at start.
        // The command is the sources' (a reconfig may set or unset it).
        let refresh =
            || lock(&self.sources).entries_cmd.is_some() && !self.cfg.entries_refresh.is_zero();
        let mut reload =
            tokio::time::interval(self.cfg.entries_refresh.max(Duration::from_secs(1)));
        reload.tick().await;
        // JOB_ROUTER_ENTRIES_FILE is looked at every second and read again
        // when its size or modification time changed.
        let stamp =
            |p: &std::path::Path| std::fs::metadata(p).ok().map(|m| (m.len(), m.modified().ok()));
        let file = || lock(&self.sources).entries_file.clone();
        let mut seen = file().as_deref().map(stamp);
        let mut look = tokio::time::interval(Duration::from_secs(1));
        look.tick().await;
        loop {
            tokio::select! {
                batch = std::future::poll_fn(|cx| lock(&self.events).poll_recv(cx)) => match batch {
                    Some(b) => {
                        if self.on_events(&b) {
                            // Changes arriving together make one pass.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            self.pass().await;
                        }
                    }
                    None => return,
                },
                _ = tick.tick() => {
                    self.pass().await;
                    self.follow().await;
                }
                _ = reload.tick(), if refresh() => self.reload(),
                _ = look.tick() => {
                    let now = file().as_deref().map(stamp);
                    if now != seen {
                        seen = now;
                        self.reload();
                    }
                }
            }
        }
    }

    fn reload(&self) {
        let sources = lock(&self.sources).clone();
        let loaded = load_table(&sources);
        self.reloads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match loaded {
            Ok(t) => {
                tracing::info!("job router: {} routes", t.routes.len());
                *lock(&self.table) = Arc::new(t);
            }
            Err(e) => tracing::warn!("job router: keeping the old routing table: {e}"),
        }
    }

    /// Failure accounting and history from the queue's events; true when a
    /// routing pass may find work.
    fn on_events(self: &Arc<Self>, batch: &[QueueEvent]) -> bool {
        let mut work = false;
        let now = self.clock.now();
        let table = lock(&self.table).clone();
        for e in batch {
            let copy = e.ad.has(classad::name!(ROUTED_FROM));
            match &e.kind {
                // A run a copy's policy requeued (max_retries) ended too:
                // it counts for the route's failure rate.
                EventKind::Requeued if copy => {
                    let name = str_attr(&e.ad, classad::name!("RouteName")).unwrap_or_default();
                    let failed =
                        judged_failed(self.queue.journal(), e.id, &table, &name, &e.ad, now);
                    lock(&self.failures).entry(name.clone()).or_default().ended(failed, now);
                    tracing::info!(
                        "job router: {} on route {name} {} and will run again",
                        e.id,
                        if failed { "failed" } else { "ended" }
                    );
                    work = true;
                }
                EventKind::Terminated | EventKind::Removed(_) if copy => {
                    let completed = matches!(e.kind, EventKind::Terminated);
                    let name = str_attr(&e.ad, classad::name!("RouteName")).unwrap_or_default();
                    let failed = !completed
                        || judged_failed(self.queue.journal(), e.id, &table, &name, &e.ad, now);
                    lock(&self.failures).entry(name.clone()).or_default().ended(failed, now);
                    tracing::info!(
                        "job router: {} on route {name} {}",
                        e.id,
                        if failed { "failed" } else { "succeeded" }
                    );
                    self.record(HistoryRecord {
                        route: name,
                        grid_resource: str_attr(&e.ad, classad::name!("GridResource"))
                            .unwrap_or_default(),
                        routed: match e.ad.eval_attr(classad::name!("QDate")) {
                            Value::Int(q) => q,
                            _ => now,
                        },
                        ended: now,
                        wall_seconds: match e.ad.eval_attr(classad::name!("RemoteWallClockTime")) {
                            Value::Real(r) => r,
                            Value::Int(i) => i as f64,
                            _ => 0.0,
                        },
                        completed,
                    });
                    if !completed && let Some(g) = str_attr(&e.ad, GRID_JOB_ID) {
                        let me = self.clone();
                        tokio::spawn(async move { me.remove_remote(&g).await });
                    }
                    work = true;
                }
                // An edit of a copy (or of its original, which the queue
                // passed on) goes on to its job at the target.
                EventKind::Edited(attr) if copy => {
                    if let (Some(g), Some(e)) = (str_attr(&e.ad, GRID_JOB_ID), e.ad.get(attr)) {
                        let (me, attr, expr) = (self.clone(), attr.clone(), e.to_string());
                        tokio::spawn(async move { me.edit_remote(&g, attr, expr).await });
                    }
                }
                EventKind::Submitted | EventKind::Released(_) | EventKind::Requeued => work = true,
                EventKind::Evicted { .. } | EventKind::Removed(_) | EventKind::Held(_) => {
                    work = true
                }
                _ => {}
            }
        }
        work
    }

    fn record(&self, r: HistoryRecord) {
        let line = match serde_json::to_string(&r) {
            Ok(l) => l,
            Err(_) => return,
        };
        let res = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.cfg.history)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = res {
            tracing::warn!("job router history {}: {e}", self.cfg.history.display());
        }
    }

    /// Each route's copies alive and idle now, with its failure history.
    fn loads(&self, st: &QueueState, table: &Table) -> Vec<RouteLoad> {
        let mut counts: HashMap<String, (u32, u32)> = HashMap::new();
        for v in st.jobs() {
            if !v.has(classad::name!(ROUTED_FROM)) {
                continue;
            }
            let name = str_attr(&v.ad(), classad::name!("RouteName")).unwrap_or_default();
            let c = counts.entry(name).or_default();
            if !v.proc.status.is_terminal() {
                c.0 += 1;
            }
            if v.proc.status == JobStatus::Idle {
                c.1 += 1;
            }
        }
        let failures = lock(&self.failures);
        table
            .routes
            .iter()
            .map(|r| {
                let mut l = failures.get(&r.name).cloned().unwrap_or_default();
                let (jobs, idle) = counts.get(&r.name).copied().unwrap_or_default();
                l.jobs = jobs;
                l.idle = idle;
                l
            })
            .collect()
    }

    /// Idle jobs that may be routed: not routed, not copies, not grid jobs,
    /// and within JOB_ROUTER_SOURCE_JOB_CONSTRAINT.
    fn candidates(&self, st: &QueueState, now: i64) -> Vec<(JobId, ClassAd)> {
        let mut ev = Evaluator::with_options(EvalOptions { now: Some(now), ..Default::default() });
        st.jobs()
            .filter(|v| v.proc.status == JobStatus::Idle && !v.routed_away())
            .filter(|v| !v.proc.ad.contains(classad::name!(crate::attrs::ACTIVATION_PENDING)))
            .filter(|v| !v.has(classad::name!(ROUTED_FROM)))
            .filter_map(|v| {
                let ad = v.ad();
                if let Some(c) = &self.source {
                    let _evaluating = self.queue.journal().enter(v.id, SOURCE);
                    crate::quarantine::fault_point("route", &ad);
                    if !matches!(ev.eval(c, Some(&ad), None), Value::Bool(true)) {
                        return None;
                    }
                }
                Some((v.id, ad))
            })
            .collect()
    }

    async fn pass(self: &Arc<Self>) {
        let now = self.clock.now();
        let table = lock(&self.table).clone();
        if table.routes.is_empty() {
            return;
        }
        let (jobs, mut loads) = {
            let st = self.queue.read();
            // Endings committed so far count before routing again.
            loop {
                let next = lock(&self.events).try_recv();
                match next {
                    Ok(b) => {
                        self.on_events(&b);
                    }
                    Err(_) => break,
                }
            }
            (self.candidates(&st, now), self.loads(&st, &table))
        };
        if jobs.is_empty() {
            return;
        }
        for d in super::plan(&table, &mut loads, &jobs, now, self.queue.journal()) {
            let r = match d {
                Decision::Route { job, route, copy } => {
                    self.queue.route(job, copy, now).await.map(|copy| {
                        tracing::info!(
                            "job router: {job} routed to {copy} ({})",
                            table.routes[route].name
                        )
                    })
                }
                Decision::Edit { job, route, changes } => {
                    self.queue.edit_in_place(job, &table.routes[route].name, changes, now).await
                }
            };
            if let Err(e) = r {
                tracing::debug!("job router: {e}");
            }
        }
    }

    fn client(&self, addr: &str) -> Option<Client> {
        let mut c = lock(&self.clients);
        if let Some(cl) = c.get(addr) {
            return Some(cl.clone());
        }
        let cl = Client::new(&format!("http://{addr}"), self.keypair.clone()).ok()?;
        c.insert(addr.to_string(), cl.clone());
        Some(cl)
    }

    /// Follows every routed copy at its target: submits new ones, mirrors
    /// the state of submitted ones.
    async fn follow(&self) {
        let copies: Vec<(JobId, ClassAd, JobStatus)> = {
            let st = self.queue.read();
            st.jobs()
                .filter(|v| v.has(classad::name!(ROUTED_FROM)))
                .map(|v| (v.id, v.ad(), v.proc.status))
                .collect()
        };
        for (id, ad, status) in copies {
            // Copies of another universe run here, like any job.
            if ad.eval_attr(classad::name!("JobUniverse")) != Value::Int(9) {
                continue;
            }
            let Some(gr) = str_attr(&ad, classad::name!("GridResource")) else { continue };
            match (Target::parse(&gr), str_attr(&ad, GRID_JOB_ID)) {
                (Ok(Target::Andes(addr)), None) if status == JobStatus::Idle => {
                    self.submit_remote(id, &ad, &addr).await
                }
                (Ok(Target::Slurm(partition)), None) if status == JobStatus::Idle => {
                    self.submit_slurm(id, &ad, &partition).await
                }
                (Ok(Target::Andes(_)), Some(g)) => self.mirror_remote(id, &ad, status, &g).await,
                (Ok(Target::Slurm(_)), Some(g)) => self.mirror_slurm(id, status, &g).await,
                _ => {}
            }
        }
    }

    /// Holds a copy that cannot go on (its original follows).
    async fn hold_copy(&self, id: JobId, reason: String) {
        tracing::warn!("job router: {id}: {reason}");
        let t = Targets { ids: vec![JobSelector::Job(id)], ..Default::default() };
        let _ =
            self.queue.change(&Actor::schedd(), t, Change::Hold { reason }, self.clock.now()).await;
    }

    /// Submits a copy to another pool's schedd, for its owner, with its
    /// module and input files (read here with the owner's rights).
    async fn submit_remote(&self, id: JobId, ad: &ClassAd, addr: &str) {
        let Some(client) = self.client(addr) else { return };
        let mut remote = ad.clone();
        for a in [
            "ClusterId",
            "ProcId",
            "GlobalJobId",
            "QDate",
            "JobStatus",
            "GridResource",
            GRID_JOB_ID,
            GRID_JOB_STATUS,
            ROUTED_FROM,
            crate::queue::ROUTED_TO,
            "UserLog",
            "DAGManNodesLog",
            "SpooledInput",
            "LeaveJobInQueue",
        ]
        .into_iter()
        .chain(POLICY_ATTRS)
        {
            remote.remove(a);
        }
        remote.insert_value(classad::name!("JobUniverse"), 5i64);
        if let Some(g) = str_attr(ad, classad::name!("GlobalJobId")) {
            remote.insert_value(classad::name!("RoutedFromGlobalJobId"), g.as_str());
        }
        if let Some(digest) = str_attr(ad, classad::name!("CmdDigest")) {
            let path = format!("/v1/modules/{digest}");
            if let Err(e) = self.queue.send_upload(&client, &path, &digest).await {
                tracing::warn!("job router: {id}: sending the module to {addr}: {e}");
                return;
            }
        }
        // The input files, read as the owner (or from this schedd's uploads
        // for a job submitted with --spool), go to the target's spool.
        let (job, accounts, queue) = (ad.clone(), self.accounts.clone(), self.queue.clone());
        let read = tokio::task::spawn_blocking(move || {
            crate::jobfiles::read_inputs(&job, None, &accounts, &|d| queue.open_upload_of(&job, d))
        })
        .await;
        let inputs = match read {
            Ok(Ok(i)) => i,
            Ok(Err(e)) => return self.hold_copy(id, format!("routing to {addr}: {e}")).await,
            Err(e) => return tracing::warn!("job router: {id}: {e}"),
        };
        let mut sent = std::collections::HashSet::new();
        let now = self.clock.now();
        if let Err(e) =
            crate::transfer::spool_inputs(&client, &mut remote, inputs, &mut sent, now).await
        {
            tracing::warn!("job router: {id}: sending input files to {addr}: {e}");
            return;
        }
        let req = SubmitRequest {
            cluster: None,
            cluster_ad: remote.to_string(),
            procs: vec!["[]".into()],
        };
        match client.call::<_, SubmitReply>(Method::POST, "/v1/submit", Some(&req)).await {
            Ok(r) => {
                let g = format!("andes {addr} {}.0", r.cluster);
                let mut attrs = ClassAd::new();
                attrs.insert_value(classad::name!(GRID_JOB_ID), g.as_str());
                attrs.insert_value(classad::name!(GRID_JOB_STATUS), JobStatus::Idle.code());
                if let Err(e) =
                    self.queue.pool(vec![id], PoolOp::Grid(attrs), self.clock.now()).await
                {
                    tracing::warn!("job router: {id}: recording {g}: {e}");
                }
            }
            // The target refused the job itself (its owner is not one it
            // trusts this schedd to submit for, the ad is bad): held, with
            // the target's reason, until someone acts.
            Err(e) if matches!(e.kind, andes_protocol::client::ClientErrorKind::Status { .. }) => {
                self.hold_copy(id, format!("{addr} refused the routed job: {e}")).await
            }
            Err(e) => tracing::warn!("job router: {id}: submitting to {addr}: {e}"),
        }
    }

    /// Sends a change to the copy's job at its target.
    async fn change_remote(&self, client: &Client, remote: JobId, change: Change) -> bool {
        let req = ChangeRequest {
            targets: Targets { ids: vec![JobSelector::Job(remote)], ..Default::default() },
            change,
        };
        match client.post_json("/v1/change", &req).await {
            Ok(r) if r.status.is_success() => true,
            Ok(r) => {
                tracing::debug!("job router: change of {remote}: {}", r.status);
                false
            }
            Err(e) => {
                tracing::debug!("job router: change of {remote}: {e}");
                false
            }
        }
    }

    /// Mirrors the target's view of a copy onto the copy, and the copy's
    /// own changes (a hold or release here) onto the target.
    /// `GridJobStatus` is the target's status as last mirrored: a status
    /// that differs from it changed there; one that matches it while the
    /// copy differs changed here.
    async fn mirror_remote(&self, id: JobId, ad: &ClassAd, status: JobStatus, grid_job: &str) {
        let Some((addr, remote_id)) = andes_grid_job(grid_job) else { return };
        let Some(client) = self.client(addr) else { return };
        let now = self.clock.now();
        if status == JobStatus::Removed {
            self.remove_remote(grid_job).await;
            let _ = self.queue.job_exited(id, ClassAd::new(), now).await;
            return;
        }
        let q = QueryRequest {
            targets: Targets { ids: vec![JobSelector::Job(remote_id)], ..Default::default() },
            ..Default::default()
        };
        let remote = match client.call::<_, QueryReply>(Method::POST, "/v1/query", Some(&q)).await {
            Ok(r) => r.ads.first().and_then(|t| classad::parse_ad(t).ok()),
            Err(e) => {
                tracing::debug!("job router: {id}: asking {addr}: {e}");
                return;
            }
        };
        let Some(remote) = remote else {
            // Gone from the target's queue: its history says how it ended.
            let h = HistoryRequest {
                constraint: Some(format!(
                    "ClusterId == {} && ProcId == {}",
                    remote_id.cluster, remote_id.proc
                )),
                limit: Some(1),
                ..Default::default()
            };
            let Ok(r) = client.call::<_, QueryReply>(Method::POST, "/v1/history", Some(&h)).await
            else {
                return;
            };
            let Some(end) = r.ads.first().and_then(|t| classad::parse_ad(t).ok()) else { return };
            if end.eval_attr(classad::name!("JobStatus")) == Value::Int(JobStatus::Removed.code()) {
                let change = Change::Remove { reason: format!("removed at {addr}") };
                let t = Targets { ids: vec![JobSelector::Job(id)], ..Default::default() };
                let _ = self.queue.change(&Actor::schedd(), t, change, now).await;
                return;
            }
            let there = Remote { client: &client, addr, job: remote_id, queued: false };
            self.ended(id, ad, status, &end, &there).await;
            return;
        };
        let Some(remote_status) = (match remote.eval_attr(classad::name!("JobStatus")) {
            Value::Int(c) => JobStatus::from_code(c),
            _ => None,
        }) else {
            return;
        };
        // What it uses there, shown here (and on the original).
        let mut usage = ClassAd::new();
        for a in crate::queue::MIRRORED_USAGE {
            if let Some(e) = remote.get(a)
                && ad.get(a) != Some(e)
            {
                usage.insert(*a, e.clone());
            }
        }
        let seen = match ad.eval_attr(classad::name!(GRID_JOB_STATUS)) {
            Value::Int(c) => JobStatus::from_code(c),
            _ => None,
        };
        if seen == Some(remote_status) {
            // Nothing new there: a hold or release made here goes there,
            // and the status it leaves there counts as seen (so a release
            // here before the hold there was seen is not taken back).
            let pushed = match (status, remote_status) {
                (JobStatus::Held, s) if s != JobStatus::Held => {
                    let reason = str_attr(ad, classad::name!("HoldReason")).unwrap_or_default();
                    self.change_remote(&client, remote_id, Change::Hold { reason })
                        .await
                        .then_some(JobStatus::Held)
                }
                (JobStatus::Idle, JobStatus::Held) => {
                    let reason = str_attr(ad, classad::name!("ReleaseReason")).unwrap_or_default();
                    self.change_remote(&client, remote_id, Change::Release { reason })
                        .await
                        .then_some(JobStatus::Idle)
                }
                _ => None,
            };
            if let Some(s) = pushed {
                usage.insert_value(classad::name!(GRID_JOB_STATUS), s.code());
            }
            if !usage.is_empty() {
                let _ = self.queue.pool(vec![id], PoolOp::Grid(usage), now).await;
            }
            return;
        }
        if remote_status == JobStatus::Completed {
            let there = Remote { client: &client, addr, job: remote_id, queued: true };
            self.ended(id, ad, status, &remote, &there).await;
            return;
        }
        // It changed there: the copy follows.
        let one = Targets { ids: vec![JobSelector::Job(id)], ..Default::default() };
        if status == JobStatus::Held && remote_status != JobStatus::Held {
            let change = Change::Release { reason: format!("released at {addr}") };
            let _ = self.queue.change(&Actor::schedd(), one.clone(), change, now).await;
        }
        let status = if status == JobStatus::Held { JobStatus::Idle } else { status };
        match (status, remote_status) {
            (JobStatus::Idle, JobStatus::Running | JobStatus::Suspended) => {
                let _ = self.queue.job_started(id, now).await;
                if remote_status == JobStatus::Suspended {
                    let _ = self.queue.pool(vec![id], PoolOp::Suspension(true), now).await;
                }
            }
            (JobStatus::Running, JobStatus::Suspended) => {
                let _ = self.queue.pool(vec![id], PoolOp::Suspension(true), now).await;
            }
            (JobStatus::Suspended, JobStatus::Running) => {
                let _ = self.queue.pool(vec![id], PoolOp::Suspension(false), now).await;
            }
            (JobStatus::Running | JobStatus::Suspended, JobStatus::Idle) => {
                let _ = self.queue.pool(vec![id], PoolOp::Evicted(ClassAd::new()), now).await;
            }
            (s, JobStatus::Held) if s != JobStatus::Held => {
                let reason = str_attr(&remote, classad::name!("HoldReason")).unwrap_or_default();
                let change = Change::Hold { reason: format!("held at {addr}: {reason}") };
                let _ = self.queue.change(&Actor::schedd(), one, change, now).await;
            }
            _ => {}
        }
        usage.insert_value(classad::name!(GRID_JOB_STATUS), remote_status.code());
        let _ = self.queue.pool(vec![id], PoolOp::Grid(usage), now).await;
    }

    /// Copy `id` (its ad here `copy`, its `status`) ended as its job
    /// `there` (`end` is its ad there): its output comes back, written where
    /// the original's submit file says with the owner's rights, and the copy
    /// takes the ending (its original follows). A copy whose output cannot be
    /// written is held, and the target keeps the output until it can be.
    async fn ended(
        &self,
        id: JobId,
        copy: &ClassAd,
        status: JobStatus,
        end: &ClassAd,
        there: &Remote<'_>,
    ) {
        let now = self.clock.now();
        let Remote { client, addr, job: remote_id, queued } = *there;
        if crate::transfer::is_spooled(end) && end.get(classad::name!("StageOutFinish")).is_none() {
            // The target states the output's size; the copy's RequestDisk
            // bounds what this schedd takes in, as it bounds a host's.
            let limit = crate::transfer::input_limit(copy);
            let fetched = match crate::transfer::fetch_spooled(client, remote_id, limit).await {
                Ok(f) => f,
                // Asking again cannot help: held, with why.
                Err(e) if e.refused || !queued => {
                    let why = if queued { "" } else { " (the job has left its queue there)" };
                    return self
                        .hold_copy(id, format!("its output from {addr} was not fetched{why}: {e}"))
                        .await;
                }
                Err(e) => {
                    tracing::warn!("job router: {id}: fetching its output from {addr}: {e}");
                    return;
                }
            };
            // A spooled original keeps the output in its own spool directory:
            // within its owner's spool quota and the spool's room.
            if crate::transfer::is_spooled(copy) {
                let bytes: u64 =
                    fetched.reply.files.iter().map(andes_protocol::pool::FileData::len).sum();
                let owner = str_attr(copy, classad::name!("Owner")).unwrap_or_default();
                if let Err(e) = self.queue.charge_spool(&owner, bytes) {
                    return self
                        .hold_copy(id, format!("its output from {addr} is not kept: {e}"))
                        .await;
                }
            }
            let out_id = str_attr(copy, ROUTED_FROM).as_deref().and_then(job_id).unwrap_or(id);
            let (accounts, spool, grid) = (self.accounts.clone(), self.spool.clone(), copy.clone());
            let written = tokio::task::spawn_blocking(move || {
                crate::jobfiles::write_outputs(
                    out_id,
                    &grid,
                    &fetched.reply.files,
                    &fetched.staged,
                    &accounts,
                    Some(&spool),
                )
            })
            .await;
            match written {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    return self
                        .hold_copy(id, format!("its output from {addr} cannot be written: {e}"))
                        .await;
                }
                Err(e) => return tracing::warn!("job router: {id}: {e}"),
            }
            let done = crate::api::TransferDoneRequest { jobs: vec![remote_id] };
            if let Err(e) = client.post_json("/v1/transfer/done", &done).await {
                tracing::debug!("job router: {id}: telling {addr} the output is fetched: {e}");
            }
        }
        if status == JobStatus::Idle {
            let _ = self.queue.job_started(id, now).await;
        }
        let mut ending = ClassAd::new();
        for a in [
            "ExitCode",
            "ExitBySignal",
            "ExitSignal",
            "WasmTrap",
            "RemoteWallClockTime",
            "RemoteUserCpu",
            "RemoteSysCpu",
            "ImageSize",
            "LastRemoteHost",
        ] {
            if let Some(e) = end.get(a) {
                ending.insert(a, e.clone());
            }
        }
        if let Err(e) = self.queue.job_exited(id, ending, now).await {
            tracing::debug!("job router: {id}: {e}");
        }
    }

    async fn edit_remote(&self, grid_job: &str, attr: String, expr: String) {
        let Some((addr, remote)) = andes_grid_job(grid_job) else { return };
        let Some(client) = self.client(addr) else { return };
        self.change_remote(&client, remote, Change::Edit { attr, expr }).await;
    }

    async fn remove_remote(&self, grid_job: &str) {
        if let Some(rest) = grid_job.strip_prefix("slurm ") {
            if let Some(job) = rest.split_whitespace().nth(1) {
                let _ = slurm(&["scancel", job]).await;
            }
            return;
        }
        let Some((addr, remote)) = andes_grid_job(grid_job) else { return };
        let Some(client) = self.client(addr) else { return };
        let change = Change::Remove { reason: "the routed copy was removed".into() };
        self.change_remote(&client, remote, change).await;
    }
}

/// Runs a Slurm command; its standard output, or why it failed.
async fn slurm(args: &[&str]) -> Result<String, String> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(&args[0])
            .args(&args[1..])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", args[0]))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!("{} failed: {}", args[0], String::from_utf8_lossy(&out.stderr).trim()))
        }
    })
    .await
    .map_err(|e| e.to_string())?
}

/// A path for a shell script, single-quoted; none if it cannot be.
fn quoted(p: &std::path::Path) -> Option<String> {
    let s = p.to_str()?;
    (!s.contains('\'')).then(|| format!("'{s}'"))
}

impl Inner {
    fn slurm_dir(&self, id: JobId) -> PathBuf {
        self.cfg.work_dir.join(format!("slurm-{}-{}", id.cluster, id.proc))
    }

    /// Submits a routed copy to a Slurm partition: a batch script that runs
    /// the module with `andes run` in the job's Iwd, its ad and module beside.
    async fn submit_slurm(&self, id: JobId, ad: &ClassAd, partition: &str) {
        let dir = self.slurm_dir(id);
        let prepared = (|| -> Result<PathBuf, String> {
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let digest =
                str_attr(ad, classad::name!("CmdDigest")).ok_or("the job has no CmdDigest")?;
            let module = self
                .queue
                .module(&digest)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("module {digest} is not in the schedd's store"))?;
            std::fs::write(dir.join("job.wasm"), module).map_err(|e| e.to_string())?;
            let mut job = ad.clone();
            job.insert_value(classad::name!("JobUniverse"), 5i64);
            std::fs::write(dir.join("job.ad"), job.to_string()).map_err(|e| e.to_string())?;
            let iwd = str_attr(ad, classad::name!("Iwd"))
                .map(PathBuf::from)
                .unwrap_or_else(|| dir.clone());
            let q =
                |p: &std::path::Path| quoted(p).ok_or(format!("{}: unusable path", p.display()));
            // The node must see this directory and the job's Iwd (a shared
            // filesystem): it says so, plainly, where it does not.
            let script = format!(
                "#!/bin/sh\n# andes job {id}, routed by the job router\n\
                 for d in {dir} {iwd}; do\n  [ -d \"$d\" ] || {{ echo \"andes: this Slurm node \
                 cannot see $d: a Slurm route needs it on a filesystem shared with the schedd\" >&2; \
                 exit 97; }}\ndone\n\
                 exec {} run --ad {} --result {} --dir {} {}\n",
                q(&self.cfg.andes)?,
                q(&dir.join("job.ad"))?,
                q(&dir.join("result.ad"))?,
                q(&iwd)?,
                q(&dir.join("job.wasm"))?,
                dir = q(&dir)?,
                iwd = q(&iwd)?,
            );
            let path = dir.join("job.sh");
            std::fs::write(&path, script).map_err(|e| e.to_string())?;
            Ok(path)
        })();
        tracing::info!("job router: {id}: submitting to Slurm partition {partition}");
        let script = match prepared {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("job router: {id}: preparing the Slurm job: {e}");
                return;
            }
        };
        let out = dir.join("slurm.out");
        let name = format!("andes-{id}");
        let (Some(script), Some(out)) = (script.to_str(), out.to_str()) else { return };
        let args = [
            "sbatch",
            "--parsable",
            "--partition",
            partition,
            "--job-name",
            &name,
            "--output",
            out,
            script,
        ];
        match slurm(&args).await {
            Ok(text) => {
                let job = text.trim().split(';').next().unwrap_or("").to_string();
                if job.is_empty() || !job.bytes().all(|b| b.is_ascii_digit()) {
                    tracing::warn!("job router: {id}: sbatch said `{}`", text.trim());
                    return;
                }
                let mut attrs = ClassAd::new();
                attrs.insert_value(classad::name!(GRID_JOB_ID), format!("slurm {partition} {job}"));
                let _ = self.queue.pool(vec![id], PoolOp::Grid(attrs), self.clock.now()).await;
            }
            Err(e) => tracing::warn!("job router: {id}: {e}"),
        }
    }

    /// Mirrors a Slurm job (squeue while it is known, then its result file,
    /// else sacct) onto its routed copy.
    async fn mirror_slurm(&self, id: JobId, status: JobStatus, grid_job: &str) {
        let Some(job) = grid_job.split_whitespace().nth(2) else { return };
        let now = self.clock.now();
        if status == JobStatus::Removed {
            let _ = slurm(&["scancel", job]).await;
            let _ = self.queue.job_exited(id, ClassAd::new(), now).await;
            return;
        }
        // A job squeue no longer knows is finished; squeue failing otherwise
        // (the controller unreachable) tells nothing: try again next time.
        let state = match slurm(&["squeue", "-h", "-j", job, "-o", "%T"]).await {
            Ok(s) => s,
            Err(e) if e.contains("Invalid job id") => String::new(),
            Err(e) => {
                tracing::debug!("job router: {id}: {e}");
                return;
            }
        };
        match state.trim() {
            "PENDING" | "CONFIGURING" | "REQUEUED" | "SUSPENDED" => {
                if status == JobStatus::Running {
                    let _ = self.queue.pool(vec![id], PoolOp::Evicted(ClassAd::new()), now).await;
                }
                return;
            }
            "RUNNING" | "COMPLETING" => {
                if status == JobStatus::Idle {
                    let _ = self.queue.job_started(id, now).await;
                }
                return;
            }
            _ => {}
        }
        // Finished (or forgotten by squeue): the result `andes run` wrote.
        let result = std::fs::read_to_string(self.slurm_dir(id).join("result.ad"))
            .ok()
            .and_then(|t| classad::parse_ad(&t).ok());
        match result {
            Some(ending) => {
                if status == JobStatus::Idle {
                    let _ = self.queue.job_started(id, now).await;
                }
                if let Err(e) = self.queue.job_exited(id, ending, now).await {
                    tracing::debug!("job router: {id}: {e}");
                }
            }
            None => {
                let acct = slurm(&["sacct", "-n", "-X", "-j", job, "-o", "State"]).await;
                let state = match acct {
                    Ok(s) if !s.trim().is_empty() => s.trim().to_string(),
                    _ => "unknown to sacct".to_string(),
                };
                // Held, not removed: routed again it would end the same way.
                let reason = format!(
                    "Slurm job {job} ended without a result ({state}): a Slurm route runs the \
                     job in its Iwd and keeps its module and result in {}, which the Slurm \
                     nodes must see on a shared filesystem; its output is in {}",
                    self.slurm_dir(id).display(),
                    self.slurm_dir(id).join("slurm.out").display()
                );
                self.hold_copy(id, reason).await;
            }
        }
    }
}

/// `POST /v1/router/q`: the routed jobs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RouterQReply {
    /// Each route: name, GridResource.
    pub routes: Vec<(String, String)>,
    /// Each routed copy: its ad (ClassAd text).
    pub jobs: Vec<String>,
}

async fn router_q(
    State(r): State<JobRouter>,
    caller: Caller,
) -> Result<axum::Json<RouterQReply>, ApiError> {
    let table = r.table();
    let viewer = crate::schedd::actor(&caller);
    let jobs = r
        .inner
        .queue
        .read()
        .jobs()
        .filter(|v| v.has(classad::name!(ROUTED_FROM)))
        .map(|v| {
            let reader = crate::queue::reader_of(&viewer, &v);
            crate::attrs::visible(v.ad(), reader).to_string()
        })
        .collect();
    Ok(axum::Json(RouterQReply {
        routes: table.routes.iter().map(|r| (r.name.clone(), r.grid_resource.clone())).collect(),
        jobs,
    }))
}

/// `POST /v1/router/history`: finished routed jobs between two times.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RouterHistoryRequest {
    /// From (Unix seconds, inclusive).
    pub from: i64,
    /// To (inclusive).
    pub to: i64,
}

async fn router_history(
    State(r): State<JobRouter>,
    _caller: Caller,
    SignedJson(req): SignedJson<RouterHistoryRequest>,
) -> Result<axum::Json<Vec<HistoryRecord>>, ApiError> {
    let text = std::fs::read_to_string(&r.inner.cfg.history).unwrap_or_default();
    let records = text
        .lines()
        .filter_map(|l| serde_json::from_str::<HistoryRecord>(l).ok())
        .filter(|h| h.ended >= req.from && h.ended <= req.to)
        .collect();
    Ok(axum::Json(records))
}
