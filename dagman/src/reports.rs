//! The files a DAG asks DAGMan to keep as it runs: the `DOT` graph, the
//! `NODE_STATUS_FILE`, the `JOBSTATE_LOG` and each node's
//! `SAVE_POINT_FILE`, in HTCondor's formats.
//!
//! The DOT file is written at the start and, with `UPDATE`, again whenever a
//! node changed state since (at most once per look at the node log); the
//! node status file at the start, then every `min_update_seconds` when
//! something changed (or always, with `ALWAYS-UPDATE`), and at the end. A
//! file that cannot be written is said in `dagman.out`; the DAG goes on.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use andes_dag::run::{Run, State};
use andes_dag::{Dag, NodeId};

/// HTCondor's node status codes (`NodeStatus` in the node status file).
pub fn node_status_code(s: State) -> (i32, &'static str) {
    match s {
        State::Waiting => (0, "STATUS_NOT_READY"),
        State::Ready | State::ReadyToSubmit => (1, "STATUS_READY"),
        State::Pre => (2, "STATUS_PRERUN"),
        State::Submitted => (3, "STATUS_SUBMITTED"),
        State::ReadyForPost | State::Post => (4, "STATUS_POSTRUN"),
        State::Done => (5, "STATUS_DONE"),
        State::Failed => (6, "STATUS_ERROR"),
        State::Futile => (7, "STATUS_FUTILE"),
    }
}

/// What keeps the DAG's reports.
pub struct Reports {
    dag_file: PathBuf,
    base: PathBuf,
    dot: Option<DotFile>,
    status: Option<StatusFile>,
    jobstate: Option<std::fs::File>,
    /// Nodes whose save point was written.
    saved: Vec<bool>,
    /// A node changed state since the files were written.
    changed: bool,
}

struct DotFile {
    spec: andes_dag::Dot,
    header: Option<String>,
    written: u32,
}

struct StatusFile {
    file: PathBuf,
    every: Duration,
    always: bool,
    last: Option<Instant>,
}

impl Reports {
    /// The reports `dag` asks for; paths relative to `base`. What cannot be
    /// opened is returned as a message for `dagman.out`.
    pub fn new(dag: &Dag, dag_file: &Path, base: &Path) -> (Reports, Vec<String>) {
        let mut problems = Vec::new();
        let dot = dag.dot.as_ref().map(|d| {
            let mut spec = d.clone();
            spec.file = base.join(&d.file);
            let header = d.include.as_ref().and_then(|h| {
                std::fs::read_to_string(base.join(h))
                    .map_err(|e| problems.push(format!("DOT INCLUDE {}: {e}", h.display())))
                    .ok()
            });
            DotFile { spec, header, written: 0 }
        });
        let status = dag.node_status.as_ref().map(|s| StatusFile {
            file: base.join(&s.file),
            every: Duration::from_secs(s.min_update_secs),
            always: s.always_update,
            last: None,
        });
        let jobstate = dag.jobstate_log.as_ref().and_then(|f| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(base.join(f))
                .map_err(|e| problems.push(format!("JOBSTATE_LOG {}: {e}", f.display())))
                .ok()
        });
        let r = Reports {
            dag_file: dag_file.to_path_buf(),
            base: base.to_path_buf(),
            dot,
            status,
            jobstate,
            saved: vec![false; dag.nodes.len()],
            changed: true,
        };
        (r, problems)
    }

    /// A node changed state.
    pub fn touch(&mut self) {
        self.changed = true;
    }

    /// Rewrites what is due; `last` forces every file (the DAG's end).
    pub fn write(&mut self, dag: &Dag, run: &Run<'_>, last: bool) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(d) = &mut self.dot
            && (d.written == 0 || (d.spec.update && (self.changed || last)))
        {
            let path = andes_dag::dot::dot_path(&d.spec, d.written);
            let text =
                andes_dag::dot::dot_text(dag, Some(run), &self.dag_file, d.header.as_deref());
            if let Err(e) = std::fs::write(&path, text) {
                problems.push(format!("DOT {}: {e}", path.display()));
            }
            d.written += 1;
        }
        if let Some(s) = &mut self.status {
            let due = s.last.is_none_or(|t| t.elapsed() >= s.every);
            if last || (due && (self.changed || s.always)) {
                if let Err(e) = std::fs::write(&s.file, status_text(dag, run, &self.dag_file)) {
                    problems.push(format!("NODE_STATUS_FILE {}: {e}", s.file.display()));
                }
                s.last = Some(Instant::now());
            }
        }
        self.changed = false;
        problems
    }

    /// A line of the JOBSTATE_LOG: `time node event [condor_id job_tag sequence]`.
    pub fn jobstate(&mut self, node: &str, event: &str, rest: &str) {
        if let Some(f) = &mut self.jobstate {
            let now = jiff::Timestamp::now().as_second();
            let _ = writeln!(f, "{now} {node} {event} {rest}");
        }
    }

    /// The node's SAVE_POINT_FILE, written when it first starts: a rescue
    /// DAG of the DAG as it is then (a relative name goes to `save_files/`
    /// beside the DAG, as HTCondor's DAGMan places it).
    pub fn save_point(&mut self, dag: &Dag, run: &Run<'_>, node: NodeId) -> Option<String> {
        let n = &dag.nodes[node as usize];
        let file = n.save_point.as_ref()?;
        if std::mem::replace(&mut self.saved[node as usize], true) {
            return None;
        }
        let path =
            if file.is_absolute() { file.clone() } else { self.base.join("save_files").join(file) };
        let text = andes_dag::rescue::rescue_text(dag, run, &self.dag_file);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, text));
        written.err().map(|e| format!("SAVE_POINT_FILE {}: {e}", path.display()))
    }
}

/// The node status file's text: a `DagStatus` ad, a `NodeStatus` ad per
/// node and a `StatusEnd` ad, as HTCondor's DAGMan writes it.
pub fn status_text(dag: &Dag, run: &Run<'_>, dag_file: &Path) -> String {
    let mut counts = [0u32; 8];
    for i in 0..dag.nodes.len() as NodeId {
        counts[node_status_code(run.state(i)).0 as usize] += 1;
    }
    let now = jiff::Timestamp::now().as_second();
    let q = |s: &str| classad::Value::string(s).to_string();
    let mut t = String::new();
    let _ = writeln!(t, "[\n  Type = \"DagStatus\";");
    let _ = writeln!(t, "  DagFiles = {{ {} }};", q(&dag_file.display().to_string()));
    let _ = writeln!(t, "  Timestamp = {now};");
    let _ = writeln!(t, "  DagStatus = {};", run.status() as i32);
    let _ = writeln!(t, "  NodesTotal = {};", dag.nodes.len());
    for (name, i) in [
        ("NodesDone", 5),
        ("NodesPre", 2),
        ("NodesQueued", 3),
        ("NodesPost", 4),
        ("NodesReady", 1),
        ("NodesUnready", 0),
        ("NodesFutile", 7),
        ("NodesFailed", 6),
    ] {
        let _ = writeln!(t, "  {name} = {};", counts[i]);
    }
    t.push_str("]\n");
    for (i, n) in dag.nodes.iter().enumerate() {
        let (code, word) = node_status_code(run.state(i as NodeId));
        let _ = writeln!(t, "[\n  Type = \"NodeStatus\";");
        let _ = writeln!(t, "  Node = {};", q(&n.name));
        let _ = writeln!(t, "  NodeStatus = {code}; /* \"{word}\" */");
        let _ = writeln!(t, "  RetryCount = {};", run.retry(i as NodeId));
        t.push_str("]\n");
    }
    let _ = writeln!(t, "[\n  Type = \"StatusEnd\";\n  EndTime = {now};\n]");
    t
}
