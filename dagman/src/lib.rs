//! DAGMan for andes: runs a DAG workflow (HTCondor's DAG input language, read
//! by `andes-dag`) against a pool, as HTCondor's `condor_dagman` does.
//!
//! [`prepare`] reads everything before anything runs: the DAG file and what
//! it includes, the newest rescue DAG over it (`<dag>.rescueNNN`), and every
//! node's submit description (parsed, so a broken one is refused with its
//! file and line); a `SUBDAG EXTERNAL` node's DAG is read too (its own DAGMan,
//! a job of the schedd like any DAGMan job, runs it as the node's job); a
//! construct andes does not run yet (splices' pins) is refused by `andes-dag`.
//! [`run`] then drives `andes-dag`'s pure state machine: it submits
//! each ready node's job to the schedd (with the node's `VARS`, and the
//! attributes DAGMan gives its nodes: `DAGManJobId`, `DAGNodeName`,
//! `DAGParentNodeNames`, `DAGManNodesLog`), runs PRE and POST scripts
//! ([`scripts`]), and follows the node log ([`nodelog`]), where the schedd
//! writes every node job's events, to learn when a node's job ended.
//!
//! The files a DAGMan user reads are written beside the DAG file:
//! `<dag>.dagman.out` (progress, a line per step), `<dag>.nodes.log` (every
//! node job's events, and the POST scripts' ends), `<dag>.metrics` (JSON, at
//! the end), the rescue DAG `<dag>.rescueNNN` when the DAG ends with work
//! undone, and `<dag>.lock` while it runs (a second DAGMan of the same DAG is
//! refused). A DAGMan that finds a lock left by one that died (a crash, a
//! kill -9, its machine restarted) recovers: it reads the node log and
//! takes every node job it finds there as its own, so no node's job is
//! submitted twice and no POST script that ended runs again.

#![forbid(unsafe_code)]

pub use andes_dag as dag;

pub mod nodelog;
pub mod reports;
pub mod scripts;
pub mod submit;

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use andes_dag::run::{DagStatus, Event, Options as RunOptions, Run, State, Step};
use andes_dag::{Dag, Limits, NodeId, NodeKind, ScriptKind, SubmitSource, VarsAt};
use andes_job::api::{Change, ChangeReport, ChangeRequest, Targets};
use andes_job::ids::JobSelector;
use andes_job::userlog::EventJobId;
use andes_protocol::Client;
use andes_submit::SubmitDescription;
use anyhow::{Context as _, Result, anyhow, bail};
use classad::ClassAd;
use futures_util::StreamExt as _;

use crate::nodelog::{Evidence, NodeLog, Seen};
use crate::reports::Reports;
use crate::scripts::{Macros, Runner};

/// HTCondor's `DAGMAN_MAX_JOBS_IDLE`.
pub const DEFAULT_MAX_IDLE: u32 = 1000;

/// How a DAG runs (HTCondor's `condor_submit_dag` options that apply).
#[derive(Clone, Debug)]
pub struct Options {
    /// The DAG input file.
    pub dag_file: PathBuf,
    /// `-maxjobs`, `-maxpre`, `-maxpost`, `-AlwaysRunPost`.
    pub run: RunOptions,
    /// The longest a PRE or POST script may run.
    pub script_timeout: Duration,
    /// `-usedagdir`: paths in the DAG are relative to its own directory
    /// (else to the directory DAGMan runs in).
    pub use_dag_dir: bool,
    /// `-batch-name`: the node jobs' `JobBatchName` (default: the DAG
    /// file's name, and `+` and the DAGMan job's id when it has one).
    pub batch_name: Option<String>,
    /// The DAGMan job's cluster, when it runs as a job (`DAGManJobId`).
    pub dagman_job_id: Option<u32>,
    /// `-DoRecov`: recover from the node log even without a stale lock.
    pub recover: bool,
    /// The `andes` executable (runs `.wasm` scripts).
    pub andes: PathBuf,
    /// How often the node log is read.
    pub poll: Duration,
    /// The job owner named in node jobs (`Owner`).
    pub owner: Option<String>,
    /// `-maxidle`: no node job is submitted while this many are idle (0: no
    /// limit).
    pub max_idle: u32,
    /// Where DAGMan runs (relative paths in the DAG start here without
    /// `-usedagdir`); `None`: this process's current directory.
    pub working_dir: Option<PathBuf>,
    /// `-autorescue`: the newest rescue DAG is run over the DAG (HTCondor's
    /// default); false runs the DAG from its start.
    pub autorescue: bool,
    /// `-outfile_dir`: the directory of `<dag>.dagman.out` (beside the DAG
    /// file when `None`).
    pub outfile_dir: Option<PathBuf>,
    /// `DAGMAN_MAX_JOB_HOLDS`: a node's job held this many times is removed
    /// and the node fails (HTCondor's default 100; 0: no limit).
    pub max_job_holds: u32,
    /// `DAGMAN_PROHIBIT_MULTI_JOBS`: a node whose submit queues more than one
    /// job fails, nothing of it queued.
    pub prohibit_multi_jobs: bool,
}

impl Options {
    /// HTCondor's defaults (`DAGMAN_MAX_PRE_SCRIPTS` and
    /// `DAGMAN_MAX_POST_SCRIPTS` 20, no job limit) for `dag_file`.
    pub fn new(dag_file: impl Into<PathBuf>, andes: impl Into<PathBuf>) -> Options {
        Options {
            dag_file: dag_file.into(),
            run: RunOptions { max_jobs: 0, max_pre: 20, max_post: 20, always_run_post: false },
            script_timeout: Duration::from_secs(3600),
            use_dag_dir: false,
            batch_name: None,
            dagman_job_id: None,
            recover: false,
            andes: andes.into(),
            poll: Duration::from_millis(200),
            owner: None,
            working_dir: None,
            max_idle: DEFAULT_MAX_IDLE,
            autorescue: true,
            outfile_dir: None,
            max_job_holds: DEFAULT_MAX_JOB_HOLDS,
            prohibit_multi_jobs: false,
        }
    }
}

/// The files of one DAG, beside its DAG file.
#[derive(Clone, Debug)]
pub struct DagFiles {
    /// `<dag>.dagman.out`.
    pub out: PathBuf,
    /// `<dag>.nodes.log`.
    pub nodes_log: PathBuf,
    /// `<dag>.metrics`.
    pub metrics: PathBuf,
    /// `<dag>.lock`.
    pub lock: PathBuf,
}

impl DagFiles {
    /// The files of the DAG file `dag` (made absolute against the current
    /// directory: jobs name the node log from anywhere).
    pub fn of(dag: &Path) -> DagFiles {
        let dag = std::path::absolute(dag).unwrap_or_else(|_| dag.to_path_buf());
        let with = |ext: &str| {
            let mut s = dag.as_os_str().to_owned();
            s.push(ext);
            PathBuf::from(s)
        };
        DagFiles {
            out: with(".dagman.out"),
            nodes_log: with(".nodes.log"),
            metrics: with(".metrics"),
            lock: with(".lock"),
        }
    }

    /// The files of `opts`'s DAG, `dagman.out` in `-outfile_dir` if given.
    pub fn of_run(opts: &Options) -> DagFiles {
        let mut files = DagFiles::of(&opts.dag_file);
        if let (Some(dir), Some(name)) = (&opts.outfile_dir, files.out.file_name()) {
            files.out = dir.join(name);
        }
        files
    }
}

/// A DAG read and checked, ready to run.
#[derive(Debug)]
pub struct Prepared {
    /// The DAG (with a rescue DAG's DONE nodes marked).
    pub dag: Dag,
    /// Where relative paths in it start.
    pub base: PathBuf,
    /// The rescue DAG read over it, if any.
    pub rescue: Option<PathBuf>,
    /// What the DAG's `CONFIG` file sets (the command line's options win).
    pub knobs: Knobs,
    /// Each submit description file, parsed, by its path.
    descriptions: HashMap<PathBuf, SubmitDescription>,
}

/// HTCondor's `DAGMAN_MAX_JOB_HOLDS` default.
pub const DEFAULT_MAX_JOB_HOLDS: u32 = 100;

/// The DAGMan knobs a DAG's `CONFIG` file may set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Knobs {
    /// `DAGMAN_MAX_JOBS_SUBMITTED` (`-maxjobs`).
    pub max_jobs: Option<u32>,
    /// `DAGMAN_MAX_PRE_SCRIPTS` (`-maxpre`).
    pub max_pre: Option<u32>,
    /// `DAGMAN_MAX_POST_SCRIPTS` (`-maxpost`).
    pub max_post: Option<u32>,
    /// `DAGMAN_ALWAYS_RUN_POST` (`-AlwaysRunPost`).
    pub always_run_post: Option<bool>,
    /// `DAGMAN_MAX_JOBS_IDLE` (`-maxidle`).
    pub max_idle: Option<u32>,
    /// `DAGMAN_MAX_JOB_HOLDS`: a node's job held this many times is removed
    /// and the node fails (0: no limit).
    pub max_job_holds: Option<u32>,
    /// `DAGMAN_PROHIBIT_MULTI_JOBS`: a node whose submit queues more than one
    /// job fails.
    pub prohibit_multi_jobs: Option<bool>,
    /// `DAGMAN_*` knobs the file sets that andes does not apply (said as
    /// warnings, not ignored in silence).
    pub not_applied: Vec<String>,
}

/// Reads a DAG's `CONFIG` file (HTCondor's configuration language).
fn read_knobs(path: &Path, at: &andes_dag::Place) -> Result<Knobs> {
    let mut c = andes_config::Config::new();
    c.load_file(path).map_err(|e| anyhow!("{at}: CONFIG {}: {e}", path.display()))?;
    let mut k = Knobs::default();
    let get = |name: &str| -> Result<Option<String>> {
        c.get(name).map_err(|e| anyhow!("{at}: CONFIG {}: {name}: {e}", path.display()))
    };
    let count = |name: &str| -> Result<Option<u32>> {
        match get(name)? {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| {
                anyhow!("{at}: CONFIG {}: {name} = {v}: expected a count", path.display())
            }),
        }
    };
    k.max_jobs = count("DAGMAN_MAX_JOBS_SUBMITTED")?;
    k.max_pre = count("DAGMAN_MAX_PRE_SCRIPTS")?;
    k.max_post = count("DAGMAN_MAX_POST_SCRIPTS")?;
    k.max_idle = count("DAGMAN_MAX_JOBS_IDLE")?;
    k.max_job_holds = count("DAGMAN_MAX_JOB_HOLDS")?;
    let boolean = |name: &str| -> Result<Option<bool>> {
        Ok(match get(name)? {
            None => None,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => Some(true),
                "false" | "0" | "no" => Some(false),
                _ => bail!("{at}: CONFIG {}: {name} = {v}: expected a boolean", path.display()),
            },
        })
    };
    k.always_run_post = boolean("DAGMAN_ALWAYS_RUN_POST")?;
    k.prohibit_multi_jobs = boolean("DAGMAN_PROHIBIT_MULTI_JOBS")?;
    const APPLIED: [&str; 7] = [
        "DAGMAN_PROHIBIT_MULTI_JOBS",
        "DAGMAN_MAX_JOB_HOLDS",
        "DAGMAN_MAX_JOBS_IDLE",
        "DAGMAN_MAX_JOBS_SUBMITTED",
        "DAGMAN_MAX_PRE_SCRIPTS",
        "DAGMAN_MAX_POST_SCRIPTS",
        "DAGMAN_ALWAYS_RUN_POST",
    ];
    let mut others: Vec<String> = c
        .names()
        .filter(|n| n.to_ascii_uppercase().starts_with("DAGMAN_"))
        .filter(|n| !APPLIED.iter().any(|a| a.eq_ignore_ascii_case(n)))
        .map(String::from)
        .collect();
    others.sort();
    k.not_applied = others;
    Ok(k)
}

/// Reads the DAG, the newest rescue DAG over it and every node's submit
/// description; refuses (with file and line) anything wrong, before any
/// job is submitted or script run.
pub fn prepare(opts: &Options) -> Result<Prepared> {
    let cwd = match &opts.working_dir {
        Some(d) => d.clone(),
        None => std::env::current_dir()?,
    };
    let dag_path = cwd.join(&opts.dag_file);
    let base = if opts.use_dag_dir {
        dag_path.parent().map(Path::to_path_buf).unwrap_or(cwd)
    } else {
        cwd
    };
    let disk = andes_dag::Disk::new(&base);
    let mut dag =
        andes_dag::parse_file(&dag_path, &disk, &Limits::default()).map_err(|e| anyhow!("{e}"))?;
    if let Some(at) = &dag.rejected {
        bail!("{at}: the DAG file says REJECT: it is not to be run");
    }
    let rescue = if opts.autorescue { andes_dag::rescue::newest_rescue(&dag_path) } else { None };
    if let Some((_, path)) = &rescue {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the rescue DAG {}", path.display()))?;
        andes_dag::rescue::apply_rescue(&mut dag, &text, path).map_err(|e| anyhow!("{e}"))?;
    }
    let knobs = match &dag.config {
        Some((file, at)) => read_knobs(&base.join(file), at)?,
        None => Knobs::default(),
    };
    let mut descriptions = HashMap::new();
    for node in &dag.nodes {
        if node.noop || node.done {
            continue;
        }
        if node.kind == NodeKind::SubDag {
            // Its own DAGMan reads it whole when it runs; here it must exist
            // and read as a DAG (its own sub-DAGs are its DAGMan's to check).
            let SubmitSource::File(f) = &node.submit else {
                bail!("{}: SUBDAG EXTERNAL {} names no DAG file", node.place, node.name);
            };
            let dir = node_dir(&base, node.dir.as_deref());
            let path = dir.join(f);
            andes_dag::parse_file(&path, &andes_dag::Disk::new(&dir), &Limits::default())
                .map_err(|e| anyhow!("{}: SUBDAG EXTERNAL {}: {e}", node.place, node.name))?;
            continue;
        }
        match &node.submit {
            SubmitSource::File(f) => {
                let path = node_dir(&base, node.dir.as_deref()).join(f);
                if descriptions.contains_key(&path) {
                    continue;
                }
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    anyhow!(
                        "{}: node {}: the submit file {}: {e}",
                        node.place,
                        node.name,
                        f.display()
                    )
                })?;
                let d = andes_submit::parse(&text, &path.display().to_string())?;
                descriptions.insert(path, d);
            }
            SubmitSource::Inline(i) => {
                inline_description(i)?;
            }
            SubmitSource::Named(n) => {
                let Some(i) = dag.descriptions.get(n) else {
                    bail!("{}: node {}: no SUBMIT-DESCRIPTION is named {n}", node.place, node.name);
                };
                inline_description(i)?;
            }
        }
    }
    Ok(Prepared { dag, base, rescue: rescue.map(|(_, p)| p), knobs, descriptions })
}

/// An inline submit description (`JOB A { ... }`, `SUBMIT-DESCRIPTION`),
/// parsed; one without a `queue` statement queues one job, as HTCondor's
/// DAGMan submits it.
fn inline_description(i: &andes_dag::InlineSubmit) -> Result<SubmitDescription> {
    let mut d = andes_submit::parse(&i.text, &i.place.to_string())?;
    let queues =
        d.statements.iter().any(|s| matches!(s.kind, andes_submit::StatementKind::Queue(_)));
    if !queues {
        d = andes_submit::parse(&format!("{}\nqueue\n", i.text), &i.place.to_string())?;
    }
    Ok(d)
}

fn node_dir(base: &Path, dir: Option<&Path>) -> PathBuf {
    match dir {
        Some(d) => base.join(d),
        None => base.to_path_buf(),
    }
}

/// How a DAG ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// `DAG_Status`.
    pub status: DagStatus,
    /// DAGMan's exit code.
    pub exit: i32,
    /// The rescue DAG written, if any.
    pub rescue: Option<PathBuf>,
    /// Whether this run recovered an earlier one.
    pub recovered: bool,
}

/// `dagman.out`: a line per step, each with its time, as DAGMan's.
struct Out {
    file: std::fs::File,
}

impl Out {
    fn say(&mut self, text: impl AsRef<str>) {
        let now = jiff::Zoned::now();
        let _ = writeln!(self.file, "{} {}", now.strftime("%m/%d/%y %H:%M:%S"), text.as_ref());
    }
}

/// What happened to the node jobs, for the metrics file.
#[derive(Default)]
struct Counts {
    submitted: u32,
    succeeded: u32,
    failed: u32,
    pre_run: u32,
    post_run: u32,
}

/// Runs the DAG `p` against the schedd `client` until it ends, or until
/// `removed` resolves (the DAGMan job removed): then every node job still
/// in the queue is removed and the FINAL node, if any, runs.
pub async fn run(
    p: &Prepared,
    opts: &Options,
    client: &Client,
    removed: impl std::future::Future<Output = ()>,
) -> Result<Outcome> {
    let files = DagFiles::of_run(opts);
    let dag = &p.dag;
    // One DAGMan per DAG: the lock is held while this one runs; a lock left
    // behind (its holder gone) means recovery.
    let stale = files.lock.exists();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&files.lock)
        .with_context(|| format!("cannot open the lock file {}", files.lock.display()))?;
    // A DAGMan whose schedd was killed outright ends within a moment: its
    // successor waits that long for the lock.
    let mut locked = lock.try_lock().is_ok();
    for _ in 0..40 {
        if locked {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        locked = lock.try_lock().is_ok();
    }
    if !locked {
        bail!(
            "another DAGMan runs {} ({} is locked)",
            opts.dag_file.display(),
            files.lock.display()
        );
    }
    let recovering = stale || opts.recover;
    let mut out = Out {
        file: std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&files.out)
            .with_context(|| format!("cannot write {}", files.out.display()))?,
    };
    out.say("******************************************************");
    out.say(format!("** andes dagman: {}", opts.dag_file.display()));
    out.say("******************************************************");
    if let Some(r) = &p.rescue {
        out.say(format!("Using rescue DAG {}", r.display()));
    }
    if !recovering && files.nodes_log.exists() {
        // A fresh run's log starts empty: the last run's events are not this one's.
        std::fs::write(&files.nodes_log, b"")
            .with_context(|| format!("cannot reset {}", files.nodes_log.display()))?;
    }
    let names = |n: &str| dag.by_name.get(n).copied();
    let mut log = NodeLog::new(&files.nodes_log);
    let mut evidence = Evidence::default();
    let mut ended: HashMap<i32, i32> = HashMap::new();
    if recovering {
        out.say("Running in RECOVERY mode: reading the node log");
        for s in log.poll(&names, Some(&mut evidence)).map_err(|e| anyhow!(e))? {
            if let Seen::JobEnded { cluster, code, .. } = s {
                ended.insert(cluster, code);
            }
        }
        let jobs: usize = evidence.clusters.values().map(VecDeque::len).sum();
        out.say(format!("Recovery: {jobs} node job(s) found in the node log"));
    }
    let start = jiff::Timestamp::now();
    let runner = Runner { andes: opts.andes.clone(), timeout: opts.script_timeout };
    let mut state = Run::new(dag, opts.run).map_err(|e| anyhow!(e))?;
    let mut steps: VecDeque<Step> = state.start().into();
    let dag_path = std::path::absolute(&opts.dag_file).unwrap_or_else(|_| opts.dag_file.clone());
    let (mut reports, problems) = Reports::new(dag, &dag_path, &p.base);
    for e in problems {
        out.say(format!("ERROR: {e}"));
    }
    let me = opts.dagman_job_id.map_or("-".to_string(), |c| format!("{c}.0"));
    reports.jobstate("INTERNAL", "***", &format!("DAGMAN_STARTED {me} ***"));
    let mut cluster_of: Vec<Option<i32>> = vec![None; dag.nodes.len()];
    let mut counts = Counts::default();
    let mut scripts = tokio::task::JoinSet::new();
    let mut tick = tokio::time::interval(opts.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(removed);
    let mut removal_seen = false;
    let mut events: VecDeque<Event> = VecDeque::new();
    let mut to_submit: VecDeque<(NodeId, u32)> = VecDeque::new();
    let mut idle_said = false;
    let submits = Submits::default();
    // Holds of each node's current job (DAGMAN_MAX_JOB_HOLDS).
    let mut holds_of: HashMap<NodeId, u32> = HashMap::new();
    let mut submitting = futures_util::stream::FuturesUnordered::new();
    loop {
        while let Some(step) = steps.pop_front() {
            match step {
                Step::RunPre { node, retry } => {
                    let n = &dag.nodes[node as usize];
                    if evidence.clusters.get(&node).is_some_and(|c| !c.is_empty()) {
                        // Its job was submitted before: the PRE script succeeded.
                        events.push_back(Event::PreExited(node, 0));
                        continue;
                    }
                    let Some(script) = n.pre.clone() else {
                        events.push_back(Event::PreExited(node, 0));
                        continue;
                    };
                    out.say(format!("Running PRE script of Node {}...", n.name));
                    counts.pre_run += 1;
                    if let Some(e) = reports.save_point(dag, &state, node) {
                        out.say(format!("ERROR: {e}"));
                    }
                    reports.jobstate(&n.name, "PRE_SCRIPT_STARTED", &format!("- local - {retry}"));
                    let macros = macros_for(&state, dag, node, retry, None, 0, -1);
                    let dir = node_dir(&p.base, n.dir.as_deref());
                    let r = runner.clone();
                    scripts.spawn(async move {
                        (node, ScriptKind::Pre, r.run(&script, &dir, &macros).await)
                    });
                }
                Step::RunPost { node, retry, job_return, pre_return } => {
                    let n = &dag.nodes[node as usize];
                    if let Some(code) = evidence.posts.get_mut(&node).and_then(|q| q.pop_front()) {
                        out.say(format!("POST script of Node {} ended before: {code}", n.name));
                        events.push_back(Event::PostExited(node, code));
                        continue;
                    }
                    let Some(script) = n.post.clone() else {
                        events.push_back(Event::PostExited(node, job_return));
                        continue;
                    };
                    out.say(format!("Running POST script of Node {}...", n.name));
                    counts.post_run += 1;
                    reports.jobstate(&n.name, "POST_SCRIPT_STARTED", &format!("- local - {retry}"));
                    let job_id = cluster_of[node as usize];
                    let macros =
                        macros_for(&state, dag, node, retry, job_id, job_return, pre_return);
                    let dir = node_dir(&p.base, n.dir.as_deref());
                    let r = runner.clone();
                    scripts.spawn(async move {
                        (node, ScriptKind::Post, r.run(&script, &dir, &macros).await)
                    });
                }
                Step::Submit { node, retry } => {
                    let n = &dag.nodes[node as usize];
                    if let Some(c) = evidence.clusters.get_mut(&node).and_then(|q| q.pop_front()) {
                        out.say(format!("Node {} job is cluster {c} (from the node log)", n.name));
                        cluster_of[node as usize] = Some(c);
                        log.expect(c, node);
                        if let Some(&code) = ended.get(&c) {
                            events.push_back(Event::JobEnded(node, code));
                        }
                        continue;
                    }
                    if n.noop {
                        out.say(format!("Node {} is NOOP: not submitted", n.name));
                        events.push_back(Event::JobEnded(node, 0));
                        continue;
                    }
                    if let Some(e) = reports.save_point(dag, &state, node) {
                        out.say(format!("ERROR: {e}"));
                    }
                    to_submit.push_back((node, retry));
                }
                Step::RemoveAll => {
                    scripts.abort_all();
                    let live: Vec<u32> = (0..dag.nodes.len())
                        .filter(|&i| state.state(i as NodeId) != State::Done)
                        .filter_map(|i| cluster_of[i].filter(|c| !ended.contains_key(c)))
                        .map(|c| c as u32)
                        .collect();
                    for &c in &live {
                        log.forget(c as i32);
                    }
                    if !live.is_empty() {
                        out.say(format!("Removing {} node job cluster(s)", live.len()));
                        if let Err(e) = remove_clusters(client, &live).await {
                            out.say(format!("ERROR: removing the node jobs: {e:#}"));
                        }
                    }
                }
                Step::Finished { status, exit } => {
                    // Submits still on their way (a removal halted their
                    // nodes): their jobs are removed as they arrive.
                    to_submit.clear();
                    while let Some((_, _, r)) = submitting.next().await {
                        if let Ok(c) = r
                            && let Err(e) = remove_clusters(client, &[c]).await
                        {
                            out.say(format!("ERROR: removing cluster {c}: {e:#}"));
                        }
                    }
                    // Whatever decided the DAG, work left undone is a rescue DAG's.
                    let rescue = write_rescue(dag, &state, &opts.dag_file)?;
                    if let Some(r) = &rescue {
                        out.say(format!("Wrote the rescue DAG {}", r.display()));
                    }
                    let o = Outcome { status, exit, rescue, recovered: recovering };
                    for e in reports.write(dag, &state, true) {
                        out.say(format!("ERROR: {e}"));
                    }
                    reports.jobstate("INTERNAL", "***", &format!("DAGMAN_FINISHED {exit} ***"));
                    write_metrics(&files, &o, &state, dag, &counts, start)?;
                    return finish(o, &mut out, lock, &files);
                }
            }
        }
        if let Some(ev) = events.pop_front() {
            steps.extend(state.on(ev));
            reports.touch();
            continue;
        }
        // Ready nodes are submitted several at once (each its own cluster),
        // while fewer than -maxidle node jobs are idle.
        let idle_room = |log: &NodeLog, flying: usize| {
            opts.max_idle == 0 || log.idle() + flying < opts.max_idle as usize
        };
        if !to_submit.is_empty() && !idle_room(&log, submitting.len()) && !idle_said {
            idle_said = true;
            let idle = log.idle() + submitting.len();
            out.say(format!("{idle} node jobs idle: -maxidle {} reached", opts.max_idle));
        }
        while submitting.len() < MAX_SUBMITS_IN_FLIGHT
            && idle_room(&log, submitting.len())
            && let Some((node, retry)) = to_submit.pop_front()
        {
            idle_said = false;
            let macros = (state.status() as i32, state.failed_count());
            submitting.push(submit_node(p, opts, &files, client, &submits, macros, node, retry));
        }
        tokio::select! {
            Some((node, retry, result)) = submitting.next(), if !submitting.is_empty() => {
                let n = &dag.nodes[node as usize];
                match result {
                    // Halted since (the DAG was removed or aborted): not its job any more.
                    Ok(c) if state.state(node) != State::Submitted => {
                        if let Err(e) = remove_clusters(client, &[c]).await {
                            out.say(format!("ERROR: removing cluster {c}: {e:#}"));
                        }
                    }
                    Ok(c) => {
                        counts.submitted += 1;
                        reports.jobstate(&n.name, "SUBMIT", &format!("{c}.0 - {retry}"));
                        out.say(format!("Submitting HTCondor Node {} job(s)... cluster {c}", n.name));
                        cluster_of[node as usize] = Some(c as i32);
                        holds_of.remove(&node);
                        log.expect(c as i32, node);
                    }
                    Err(e) => {
                        out.say(format!("ERROR: submitting Node {}: {e:#}", n.name));
                        events.push_back(Event::JobEnded(node, -1001));
                    }
                }
            }
            Some(joined) = scripts.join_next() => {
                let Ok((node, kind, result)) = joined else { continue };
                let name = &dag.nodes[node as usize].name;
                let code = match result {
                    Ok(c) => c,
                    Err(e) => {
                        out.say(format!("ERROR: {e}"));
                        -1
                    }
                };
                let which = match kind {
                    ScriptKind::Pre => "PRE",
                    ScriptKind::Post => "POST",
                    ScriptKind::Hold => "HOLD",
                };
                out.say(format!("{which} Script of Node {name} completed: {code}"));
                let verdict = if code == 0 { "SUCCESS" } else { "FAILURE" };
                reports.jobstate(name, &format!("{which}_SCRIPT_{verdict}"), &code.to_string());
                reports.touch();
                if kind == ScriptKind::Hold {
                    // A HOLD script decides nothing: the job stays held.
                } else if kind == ScriptKind::Pre {
                    steps.extend(state.on(Event::PreExited(node, code)));
                } else {
                    let id = cluster_of[node as usize].unwrap_or(0);
                    let job = EventJobId { cluster: id, proc: 0, subproc: 0 };
                    if let Err(e) = log.post_ended(job, name, code) {
                        out.say(format!("ERROR: the node log: {e}"));
                    }
                    steps.extend(state.on(Event::PostExited(node, code)));
                }
            }
            _ = tick.tick() => {
                for e in reports.write(dag, &state, false) {
                    out.say(format!("ERROR: {e}"));
                }
                let seen = match log.poll(&names, None) {
                    Ok(s) => s,
                    Err(e) => {
                        out.say(format!("ERROR: reading the node log: {e}"));
                        continue;
                    }
                };
                for s in seen {
                    match s {
                        Seen::JobEnded { node, cluster, code } => {
                            ended.insert(cluster, code);
                            if cluster_of[node as usize] != Some(cluster) {
                                continue;
                            }
                            let name = &dag.nodes[node as usize].name;
                            if code == 0 {
                                counts.succeeded += 1;
                                out.say(format!("Node {name} job completed"));
                                reports.jobstate(name, "JOB_SUCCESS", "0");
                            } else {
                                counts.failed += 1;
                                out.say(format!("Node {name} job failed: {code}"));
                                reports.jobstate(name, "JOB_FAILURE", &code.to_string());
                            }
                            events.push_back(Event::JobEnded(node, code));
                        }
                        Seen::Held { node, job, reason } => {
                            let n = &dag.nodes[node as usize];
                            out.say(format!("Node {} job {job} is held: {reason}", n.name));
                            reports.jobstate(&n.name, "JOB_HELD", &job);
                            let current = cluster_of[node as usize];
                            let ours = current.is_some_and(|c| job.starts_with(&format!("{c}.")));
                            let holds = holds_of.entry(node).or_insert(0);
                            if ours {
                                *holds += 1;
                            }
                            if let Some(c) = current.filter(|_| ours)
                                && opts.max_job_holds > 0
                                && *holds >= opts.max_job_holds
                                && state.state(node) == State::Submitted
                            {
                                // As HTCondor's DAGMan: the job goes, the node fails.
                                out.say(format!(
                                    "Node {} job held {holds} times (DAGMAN_MAX_JOB_HOLDS {}): \
                                     removing it; the node fails",
                                    n.name, opts.max_job_holds
                                ));
                                *holds = 0;
                                log.forget(c);
                                if let Err(e) = remove_clusters(client, &[c as u32]).await {
                                    out.say(format!("ERROR: removing cluster {c}: {e:#}"));
                                }
                                counts.failed += 1;
                                events.push_back(Event::JobEnded(node, -1002));
                                continue;
                            }
                            if let Some(script) = n.hold.clone()
                                && current.is_some_and(|c| job.starts_with(&format!("{c}.")))
                            {
                                out.say(format!("Running HOLD script of Node {}...", n.name));
                                let retry = state.retry(node);
                                let macros = macros_for(&state, dag, node, retry, current, 0, -1);
                                let dir = node_dir(&p.base, n.dir.as_deref());
                                let r = runner.clone();
                                scripts.spawn(async move {
                                    (node, ScriptKind::Hold, r.run(&script, &dir, &macros).await)
                                });
                            }
                        }
                    }
                }
            }
            () = &mut removed, if !removal_seen => {
                removal_seen = true;
                out.say("Received the removal of the DAG");
                steps.extend(state.on(Event::Removed));
            }
        }
    }
}

/// The script macros of `node` now.
fn macros_for(
    state: &Run<'_>,
    dag: &Dag,
    node: NodeId,
    retry: u32,
    cluster: Option<i32>,
    job_return: i32,
    pre_return: i32,
) -> Macros {
    let n = &dag.nodes[node as usize];
    Macros {
        job: n.name.clone(),
        retry,
        max_retries: n.retry.map_or(0, |r| r.times),
        job_id: cluster.map(|c| format!("{c}.0")).unwrap_or_default(),
        job_return,
        pre_return,
        dag_status: state.status() as i32,
        failed_count: state.failed_count(),
    }
}

/// Node jobs submitted at once, at most.
pub const MAX_SUBMITS_IN_FLIGHT: usize = 16;

/// Submits `node`'s job (attempt `retry`); `(node, retry, its cluster)`.
/// `dag_now` is `$DAG_STATUS` and `$FAILED_COUNT` now (for a FINAL node).
/// What the node submits of one DAGMan share: cluster ids reserved a block
/// at a time (a node's submit is then one request: `queue` sends a module
/// only when the schedd says it lacks it).
#[derive(Default)]
struct Submits {
    /// Reserved ids not used yet.
    clusters: tokio::sync::Mutex<std::ops::Range<u32>>,
}

impl Submits {
    /// A reserved cluster id: the next of the block, or of a new block.
    async fn cluster(&self, client: &Client) -> Result<u32> {
        let mut ids = self.clusters.lock().await;
        if ids.is_empty() {
            let n = MAX_SUBMITS_IN_FLIGHT as u32;
            let first = andes_client::submit::reserve_clusters(client, n).await?;
            *ids = first..first.saturating_add(n);
        }
        Ok(ids.next().unwrap_or_default())
    }
}

#[allow(clippy::too_many_arguments)]
async fn submit_node(
    p: &Prepared,
    opts: &Options,
    files: &DagFiles,
    client: &Client,
    submits: &Submits,
    dag_now: (i32, u32),
    node: NodeId,
    retry: u32,
) -> (NodeId, u32, Result<u32>) {
    let r = submit_one(p, opts, files, client, submits, dag_now, node, retry).await;
    (node, retry, r)
}

#[allow(clippy::too_many_arguments)]
async fn submit_one(
    p: &Prepared,
    opts: &Options,
    files: &DagFiles,
    client: &Client,
    submits: &Submits,
    dag_now: (i32, u32),
    node: NodeId,
    retry: u32,
) -> Result<u32> {
    let dag = &p.dag;
    let n = &dag.nodes[node as usize];
    let dir = node_dir(&p.base, n.dir.as_deref());
    if n.kind == NodeKind::SubDag {
        return submit_subdag(p, opts, files, client, node, retry).await;
    }
    let inline;
    let (desc, source): (&SubmitDescription, String) = match &n.submit {
        SubmitSource::File(f) => {
            let path = dir.join(f);
            let d = p
                .descriptions
                .get(&path)
                .ok_or_else(|| anyhow!("the submit file {} was not read", path.display()))?;
            (d, path.display().to_string())
        }
        SubmitSource::Inline(i) => {
            inline = inline_description(i)?;
            (&inline, i.place.to_string())
        }
        SubmitSource::Named(name) => {
            let i = dag
                .descriptions
                .get(name)
                .ok_or_else(|| anyhow!("no SUBMIT-DESCRIPTION is named {name}"))?;
            inline = inline_description(i)?;
            (&inline, i.place.to_string())
        }
    };
    let expand_vars =
        |v: &str| v.replace("$(JOB)", &n.name).replace("$(RETRY)", &retry.to_string());
    let parents: Vec<&str> =
        dag.parents[node as usize].iter().map(|&q| dag.nodes[q as usize].name.as_str()).collect();
    // The macros DAGMan gives every node's submit description, before its
    // VARS (which may use `$(JOB)` and `$(RETRY)` themselves).
    let mut defines = vec![
        format!("JOB = {}", n.name),
        format!("RETRY = {retry}"),
        format!("DAG_NODE_NAME = {}", n.name),
        format!("DAG_PARENT_NAMES = {}", parents.join(",")),
    ];
    if let Some(id) = opts.dagman_job_id {
        defines.push(format!("DAGManJobId = {id}"));
    }
    let mut extra = Vec::new();
    for v in &n.vars {
        let line = format!("{} = {}", v.name, expand_vars(&v.value));
        match v.at {
            VarsAt::Append => extra.push(line),
            VarsAt::Prepend | VarsAt::Default => defines.push(line),
        }
    }
    for (attr, value) in &dag.set_job_attrs {
        extra.push(format!("+{attr} = {value}"));
    }
    for (attr, value) in node_attrs(p, opts, files, node, retry).iter() {
        extra.push(format!("+{attr} = {value}"));
    }
    if n.kind == NodeKind::Final {
        extra.push(format!("+DAG_STATUS = {}", dag_now.0));
        extra.push(format!("+FAILED_COUNT = {}", dag_now.1));
    }
    let batch = opts.batch_name.clone().unwrap_or_else(|| {
        let name =
            opts.dag_file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        match opts.dagman_job_id {
            Some(id) => format!("{name}+{id}"),
            None => name,
        }
    });
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    for e in &dag.env {
        if let andes_dag::EnvCommand::Set(pairs) = e {
            env.extend(pairs.iter().cloned());
        }
    }
    let now = jiff::Timestamp::now().as_second();
    let cluster = submits.cluster(client).await?;
    let mut ctx = andes_submit::Context::new(cluster as i64, now, dir.to_string_lossy());
    ctx.owner = opts.owner.clone();
    ctx.env = env;
    ctx.defines = defines;
    ctx.extra_lines = extra;
    ctx.batch_name = Some(batch);
    let sub = andes_submit::expand(desc, &ctx).with_context(|| source.clone())?;
    if opts.prohibit_multi_jobs && sub.jobs.len() > 1 {
        bail!(
            "{source}: queues {} jobs, and DAGMAN_PROHIBIT_MULTI_JOBS allows a node one",
            sub.jobs.len()
        );
    }
    // The submit goes first; a module the schedd lacks for the owner (412)
    // is sent, then the submit again.
    let reply = andes_client::submit::queue(client, cluster, sub, false, now, |_| {}).await?;
    Ok(reply.cluster)
}

/// The attributes every node job carries (a sub-DAG's DAGMan job too).
fn node_attrs(p: &Prepared, opts: &Options, files: &DagFiles, node: NodeId, retry: u32) -> ClassAd {
    let dag = &p.dag;
    let n = &dag.nodes[node as usize];
    let parents: Vec<&str> =
        dag.parents[node as usize].iter().map(|&q| dag.nodes[q as usize].name.as_str()).collect();
    let mut ad = ClassAd::new();
    ad.insert_value("DAGNodeName", n.name.as_str());
    ad.insert_value("DAGParentNodeNames", parents.join(",").as_str());
    ad.insert_value("DAGManNodesLog", files.nodes_log.to_string_lossy().as_ref());
    ad.insert_value("SubmitEventNotes", format!("{}{}", nodelog::NODE_NOTE, n.name));
    ad.insert_value("DAGManNodeRetry", i64::from(retry));
    if let Some(id) = opts.dagman_job_id {
        ad.insert_value("DAGManJobId", i64::from(id));
    }
    ad
}

/// Submits a `SUBDAG EXTERNAL` node: its DAG's own DAGMan, as a job the
/// schedd runs (as `andes submit-dag` queues one), a node of this DAG.
async fn submit_subdag(
    p: &Prepared,
    opts: &Options,
    files: &DagFiles,
    client: &Client,
    node: NodeId,
    retry: u32,
) -> Result<u32> {
    let n = &p.dag.nodes[node as usize];
    let dir = node_dir(&p.base, n.dir.as_deref());
    let SubmitSource::File(f) = &n.submit else { bail!("{} names no DAG file", n.name) };
    let env = |k: &str| std::env::var(k).ok();
    let o = submit::SubmitDag { batch_name: opts.batch_name.clone(), ..Default::default() };
    let mut job = submit::dagman_job(&dir.join(f), &dir, opts.owner.as_deref(), &env, &o)?;
    job.ad.update(&node_attrs(p, opts, files, node, retry));
    let now = jiff::Timestamp::now().as_second();
    submit::queue(client, &mut job, now).await
}

/// Removes the node jobs of `clusters` from the queue.
async fn remove_clusters(client: &Client, clusters: &[u32]) -> Result<()> {
    let req = ChangeRequest {
        targets: Targets {
            ids: clusters.iter().map(|&c| JobSelector::Cluster(c)).collect(),
            ..Default::default()
        },
        change: Change::Remove { reason: "removed by DAGMan".into() },
    };
    let _: ChangeReport = client.call(http::Method::POST, "/v1/change", Some(&req)).await?;
    Ok(())
}

/// Writes the next rescue DAG when anything is undone; its path.
fn write_rescue(dag: &Dag, state: &Run<'_>, dag_file: &Path) -> Result<Option<PathBuf>> {
    let undone = (0..dag.nodes.len() as NodeId)
        .any(|i| dag.nodes[i as usize].kind == NodeKind::Job && state.state(i) != State::Done);
    if !undone {
        return Ok(None);
    }
    let next = andes_dag::rescue::newest_rescue(dag_file).map_or(1, |(n, _)| n + 1);
    if next > andes_dag::rescue::MAX_RESCUE {
        bail!(
            "{} rescue DAGs of {} exist already",
            andes_dag::rescue::MAX_RESCUE,
            dag_file.display()
        );
    }
    let path = andes_dag::rescue::rescue_path(dag_file, next);
    let text = andes_dag::rescue::rescue_text(dag, state, dag_file);
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Some(path))
}

/// `<dag>.metrics`: what the run did, as JSON.
fn write_metrics(
    files: &DagFiles,
    o: &Outcome,
    state: &Run<'_>,
    dag: &Dag,
    counts: &Counts,
    start: jiff::Timestamp,
) -> Result<()> {
    let end = jiff::Timestamp::now();
    let count = |s: State| (0..dag.nodes.len() as NodeId).filter(|&i| state.state(i) == s).count();
    let m = serde_json::json!({
        "client": "andes dagman",
        "version": env!("CARGO_PKG_VERSION"),
        "start_time": start.as_millisecond() as f64 / 1000.0,
        "end_time": end.as_millisecond() as f64 / 1000.0,
        "duration": (end.as_millisecond() - start.as_millisecond()) as f64 / 1000.0,
        "exitcode": o.exit,
        "dag_status": o.status as i32,
        "rescue_dag_number": o.rescue.as_ref().map(|_| 1),
        "recovered": o.recovered,
        "jobs_submitted": counts.submitted,
        "jobs_succeeded": counts.succeeded,
        "jobs_failed": counts.failed,
        "pre_scripts_run": counts.pre_run,
        "post_scripts_run": counts.post_run,
        "total_nodes": dag.nodes.len(),
        "nodes_done": count(State::Done),
        "nodes_failed": count(State::Failed),
        "nodes_futile": count(State::Futile),
    });
    std::fs::write(&files.metrics, format!("{m:#}\n"))
        .with_context(|| format!("cannot write {}", files.metrics.display()))
}

/// The end: the last lines of `dagman.out`, the lock let go and removed.
fn finish(o: Outcome, out: &mut Out, lock: std::fs::File, files: &DagFiles) -> Result<Outcome> {
    let mut line = String::new();
    let _ = write!(
        line,
        "**** andes dagman exiting with status {} (DAG_Status {})",
        o.exit, o.status as i32
    );
    out.say(line);
    drop(lock);
    let _ = std::fs::remove_file(&files.lock);
    Ok(o)
}
