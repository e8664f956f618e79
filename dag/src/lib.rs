//! HTCondor's DAG input language, as DAGMan reads it: a workflow's nodes (each
//! an HTCondor job, with optional PRE, POST and HOLD scripts), the edges that
//! order them, and the commands that shape how they run (retries, macros,
//! priorities, throttles, the final node, the files DAGMan writes).
//!
//! [`parse_file`] reads a DAG input file (and the files it `INCLUDE`s) into a
//! [`Dag`] and checks it whole before anything may run: every node named is
//! defined once, no edge touches a node that may have none (FINAL, SERVICE,
//! PROVISIONER), and the graph has no cycle. Every refusal is a [`DagError`]
//! that names the file and line, and says what is wrong there.
//!
//! As DAGMan does, the file is read in two passes: the first defines the
//! nodes (`JOB`, `FINAL`, `SUBDAG EXTERNAL`, `SERVICE`, `PROVISIONER`,
//! `SUBMIT-DESCRIPTION`, and the files `INCLUDE` names), the second applies
//! every other command in file order. A node may so be named before the line
//! that defines it, `ALL_NODES` means every node of the DAG but its FINAL
//! node, and of two commands that set one property of a node the later wins.
//!
//! `SPLICE name file [DIR dir]` adds another DAG's nodes as `name+node`
//! (beneath `dir`, categories scoped to the splice unless named
//! `+category`), and a PARENT or CHILD naming the splice means its last or
//! first nodes. `PIN_IN node n` and `PIN_OUT node n` in a splice's file name
//! its numbered pins, and `CONNECT out in` makes every node on each PIN_OUT
//! of splice `out` a parent of every node on the same-numbered PIN_IN of
//! splice `in` (pins numbered from 1 without gaps, the two splices' counts
//! equal, every first node of `in` on a pin: else refused).
//!
//! [`run::Run`] is how the DAG then runs, as a pure state machine: which
//! scripts and jobs start when, within the throttles, what decides a node,
//! its retries, ABORT-DAG-ON, the FINAL node and the DAG's exit.
//!
//! [`dot`] draws the DAG for Graphviz (the `DOT` command), by state as it runs.
//!
//! [`rescue`] writes the rescue DAG of a run that left work undone, and
//! reads it back over the DAG so that only that work runs again.
//!
//! Everything input can grow is bounded ([`Limits`]): the bytes of a file,
//! the depth of `INCLUDE`s, the nodes, the edges, a line, an inline submit
//! description.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

mod check;
pub mod dot;
mod parse;
pub mod rescue;
pub mod run;

pub use parse::{DagFiles, Disk, parse_file, parse_str};

/// A place in a DAG input file: where a command is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The file, as it was named (the DAG file, or the path an `INCLUDE` gave).
    pub file: PathBuf,
    /// Its line, from 1.
    pub line: u32,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// Why a DAG was refused, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DagError {
    /// The line at fault (for a file that cannot be read, the line that named it,
    /// or line 0 of the DAG file itself).
    pub place: Place,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for DagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.message)
    }
}

impl std::error::Error for DagError {}

/// How much a DAG may hold. Every figure bounds what a DAG file can make the
/// reader keep or do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one file (the DAG file or one it includes).
    pub file_bytes: u64,
    /// `INCLUDE`s within `INCLUDE`s.
    pub include_depth: usize,
    /// Nodes in the DAG.
    pub nodes: usize,
    /// Edges in the DAG (`PARENT p1 p2 CHILD c1 c2` makes four).
    pub edges: usize,
    /// Bytes of one line.
    pub line_bytes: usize,
    /// Bytes of one inline submit description.
    pub inline_bytes: usize,
}

impl Default for Limits {
    /// A DAG of a few million nodes and tens of millions of edges.
    fn default() -> Self {
        Limits {
            file_bytes: 512 << 20,
            include_depth: 32,
            nodes: 5_000_000,
            edges: 50_000_000,
            line_bytes: 1 << 20,
            inline_bytes: 1 << 20,
        }
    }
}

/// A DAG: its nodes in the order their files define them, and what the
/// commands say of them.
#[derive(Clone, Debug, Default)]
pub struct Dag {
    /// The nodes, in definition order (a node's index is its [`NodeId`]).
    pub nodes: Vec<Node>,
    /// The index of each node's name.
    pub by_name: std::collections::HashMap<String, NodeId>,
    /// Each node's children, sorted, without repeats (indexed by [`NodeId`]).
    pub children: Vec<Vec<NodeId>>,
    /// Each node's parents, sorted, without repeats (indexed by [`NodeId`]).
    pub parents: Vec<Vec<NodeId>>,
    /// Submit descriptions declared with `SUBMIT-DESCRIPTION`, by name.
    pub descriptions: BTreeMap<String, InlineSubmit>,
    /// `MAXJOBS`: how many nodes of a category may have jobs in the queue at once.
    pub max_jobs: BTreeMap<String, u32>,
    /// `CONFIG`: the DAG's own DAGMan configuration file.
    pub config: Option<(PathBuf, Place)>,
    /// `SET_JOB_ATTR`: attributes of the DAGMan job's own ad, as ClassAd text.
    pub set_job_attrs: Vec<(String, String)>,
    /// `ENV GET` and `ENV SET`: the DAGMan job's environment.
    pub env: Vec<EnvCommand>,
    /// `DOT`: the Graphviz file DAGMan writes.
    pub dot: Option<Dot>,
    /// `NODE_STATUS_FILE`.
    pub node_status: Option<NodeStatusFile>,
    /// `JOBSTATE_LOG`: the machine-readable history file.
    pub jobstate_log: Option<PathBuf>,
    /// `REJECT`: the file says it must not run; where.
    pub rejected: Option<Place>,
    /// The FINAL node, if any.
    pub final_node: Option<NodeId>,
    /// `PIN_IN` and `PIN_OUT`: how this DAG joins others when it is spliced
    /// and `CONNECT`ed (ignored otherwise, as in HTCondor).
    pub pins: Vec<Pin>,
    /// Notes a reader should see (DAGMan writes them to `dagman.out`): a macro
    /// defined twice for a node, an edge given twice.
    pub warnings: Vec<DagError>,
}

/// `PIN_IN node number` or `PIN_OUT node number`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// `PIN_OUT` (else `PIN_IN`).
    pub out: bool,
    /// The pin's number, from 1.
    pub number: u32,
    /// The node on the pin.
    pub node: NodeId,
    /// Where the pin is defined.
    pub place: Place,
}

/// A node's index in [`Dag::nodes`].
pub type NodeId = u32;

impl Dag {
    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.by_name.get(name).map(|&i| &self.nodes[i as usize])
    }

    /// The edges, parent to child, in node order.
    pub fn edges(&self) -> impl Iterator<Item = (NodeId, NodeId)> + '_ {
        self.children
            .iter()
            .enumerate()
            .flat_map(|(p, cs)| cs.iter().map(move |&c| (p as NodeId, c)))
    }

    /// How many edges.
    pub fn edge_count(&self) -> usize {
        self.children.iter().map(Vec::len).sum()
    }
}

/// What kind of node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// `JOB`: an HTCondor job.
    Job,
    /// `FINAL`: runs last, whatever became of the others.
    Final,
    /// `SUBDAG EXTERNAL`: another DAG, run by a DAGMan of its own.
    SubDag,
    /// `SERVICE`: runs beside the DAG for as long as it runs.
    Service,
    /// `PROVISIONER`: runs before every other node.
    Provisioner,
}

/// Where a node's job is described.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubmitSource {
    /// A submit description file (for a sub-DAG: its DAG file).
    File(PathBuf),
    /// A description written in the DAG file (`JOB A { ... }`).
    Inline(InlineSubmit),
    /// A description declared with `SUBMIT-DESCRIPTION`, by its name.
    Named(String),
}

/// A submit description written in a DAG file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineSubmit {
    /// Its lines, as written (without the braces).
    pub text: String,
    /// Where it begins.
    pub place: Place,
}

/// One node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its name (unique in the DAG).
    pub name: String,
    /// What kind.
    pub kind: NodeKind,
    /// Its job's description (for a sub-DAG, its DAG file).
    pub submit: SubmitSource,
    /// `DIR`: where the job is submitted from and its scripts run.
    pub dir: Option<PathBuf>,
    /// `NOOP`: the job is not submitted; the scripts run.
    pub noop: bool,
    /// `DONE`: neither the job nor the scripts run.
    pub done: bool,
    /// `RETRY`.
    pub retry: Option<Retry>,
    /// `VARS`: macros for its submit description, in order (a later one of
    /// the same name wins).
    pub vars: Vec<Var>,
    /// `SCRIPT PRE`.
    pub pre: Option<Script>,
    /// `SCRIPT POST`.
    pub post: Option<Script>,
    /// `SCRIPT HOLD`.
    pub hold: Option<Script>,
    /// `PRE_SKIP`: a PRE script exiting with this skips the node, as done.
    pub pre_skip: Option<i32>,
    /// `PRIORITY`.
    pub priority: i64,
    /// `CATEGORY`.
    pub category: Option<String>,
    /// `ABORT-DAG-ON`.
    pub abort_on: Option<AbortOn>,
    /// `SAVE_POINT_FILE`: the file DAGMan saves the DAG's progress to when
    /// this node first starts.
    pub save_point: Option<PathBuf>,
    /// Where it is defined.
    pub place: Place,
}

/// `RETRY node N [UNLESS-EXIT value]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// How many times the node is retried after a failure.
    pub times: u32,
    /// A failure with this exit code is not retried.
    pub unless_exit: Option<i32>,
}

/// Where a `VARS` macro goes relative to the node's submit description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarsAt {
    /// `PREPEND`: before the description is read (its conditionals see it).
    Prepend,
    /// `APPEND`: after (it overrides the description's own).
    Append,
    /// Neither said: as `DAGMAN_DEFAULT_APPEND_VARS` says.
    Default,
}

/// One `VARS` macro.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Var {
    /// Its name: a submit macro, or `My.X` / `+X` for a job ClassAd attribute.
    pub name: String,
    /// Its value, unescaped (`$(JOB)` and `$(RETRY)` are expanded when the node is submitted).
    pub value: String,
    /// Where it goes.
    pub at: VarsAt,
}

/// Which of a node's scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptKind {
    /// Before the job is submitted.
    Pre,
    /// After the job ends.
    Post,
    /// When the job is held.
    Hold,
}

/// What `SCRIPT ... DEBUG file type` captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DebugStreams {
    /// `STDOUT`.
    Stdout,
    /// `STDERR`.
    Stderr,
    /// `ALL`: both.
    All,
}

/// A node's script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Script {
    /// The program (a path, or a `.wasm` module).
    pub program: String,
    /// Its arguments, as written (`$JOB`, `$RETURN`... are replaced when it runs).
    pub args: Vec<String>,
    /// `DEFER status time`: an exit with `status` runs it again after `time` seconds.
    pub defer: Option<(i32, u64)>,
    /// `DEBUG file type`: its output captured into `file`.
    pub debug: Option<(PathBuf, DebugStreams)>,
    /// Where it is given.
    pub place: Place,
}

/// `ABORT-DAG-ON node value [RETURN dag_value]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortOn {
    /// The node's exit (of its job, or its POST script) that aborts the DAG.
    pub exit: i32,
    /// The DAG's own exit then (default: the node's).
    pub dag_return: Option<u8>,
}

/// `ENV GET` / `ENV SET`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvCommand {
    /// Variables taken from the submitter's environment.
    Get(Vec<String>),
    /// Variables set, `Key=Value` each.
    Set(Vec<(String, String)>),
}

/// `DOT file [UPDATE | DONT-UPDATE] [OVERWRITE | DONT-OVERWRITE] [INCLUDE header]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dot {
    /// The file.
    pub file: PathBuf,
    /// Rewritten as the DAG runs (`UPDATE`), or once.
    pub update: bool,
    /// Overwritten (`OVERWRITE`, the default), or numbered files kept.
    pub overwrite: bool,
    /// A file whose text goes at its head.
    pub include: Option<PathBuf>,
}

/// `NODE_STATUS_FILE file [min_update_seconds] [ALWAYS-UPDATE]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatusFile {
    /// The file.
    pub file: PathBuf,
    /// Seconds between rewrites, at least.
    pub min_update_secs: u64,
    /// Rewritten even when nothing changed.
    pub always_update: bool,
}
