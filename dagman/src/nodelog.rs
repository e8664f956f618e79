//! The DAG's node log (`<dag>.nodes.log`), DAGMan's view of its jobs and its
//! journal: the schedd writes every node job's events there (the job's
//! `DAGManNodesLog`), each submit event naming its node (`DAG Node: NAME`,
//! HTCondor's submit notes), and DAGMan adds a POST script's end (event 016,
//! as HTCondor's DAGMan writes it). Followed, it says when a node's job
//! ended; read again after a crash, it says what already happened, so a
//! recovered DAG submits no node twice and runs no POST script again.
//!
//! A cluster's submit events are written together, when its submit is
//! committed and before any of its jobs can end: a node's job is over when
//! as many of its procs ended (terminated or removed) as were submitted.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use andes_dag::NodeId;
use andes_job::userlog::{
    Ending, EventJobId, EventKind, Follower, FormatOptions, JobEvent, ParseOptions, UserLog,
};

/// The submit-notes prefix naming a node.
pub const NODE_NOTE: &str = "DAG Node: ";

/// The exit a node's job counts as when it was removed (HTCondor's DAGMan:
/// the job was aborted).
pub const REMOVED: i32 = -1002;

/// One node job's cluster, as the log tells it.
#[derive(Clone, Debug, Default)]
struct Cluster {
    node: Option<NodeId>,
    submitted: u32,
    ended: u32,
    /// 0, or the first failure's exit.
    result: i32,
    reported: bool,
}

/// What the log said since the last look.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Every job of the node's cluster ended: 0, or the first failure's exit.
    JobEnded {
        /// The node.
        node: NodeId,
        /// Its cluster.
        cluster: i32,
        /// The exit.
        code: i32,
    },
    /// A job of the node's cluster was held (DAGMan waits for its release).
    Held {
        /// The node.
        node: NodeId,
        /// The job.
        job: String,
        /// Why.
        reason: String,
    },
}

/// What an earlier run of this DAG left in the log, node by node, for
/// recovery: the clusters it submitted (each attempt's, in order) and the
/// POST scripts that ended (their exits, in order).
#[derive(Clone, Debug, Default)]
pub struct Evidence {
    /// Clusters submitted for each node, oldest first.
    pub clusters: HashMap<NodeId, VecDeque<i32>>,
    /// POST script exits of each node, oldest first.
    pub posts: HashMap<NodeId, VecDeque<i32>>,
}

/// The node log, followed.
#[derive(Debug)]
pub struct NodeLog {
    path: PathBuf,
    follower: Follower,
    clusters: HashMap<i32, Cluster>,
    /// Each job not yet ended, and whether it is idle (submitted, evicted
    /// or released, not running or held): `-maxidle` counts these.
    procs: HashMap<(i32, i32), bool>,
    idle: usize,
    /// Clusters submitted whose submit events the log does not show yet.
    awaiting: usize,
}

impl NodeLog {
    /// The log at `path`, followed from its start.
    pub fn new(path: &Path) -> NodeLog {
        NodeLog {
            path: path.to_path_buf(),
            follower: Follower::new(path, ParseOptions::default()),
            clusters: HashMap::new(),
            procs: HashMap::new(),
            idle: 0,
            awaiting: 0,
        }
    }

    /// Node jobs idle now: those the log shows idle, and a job for each
    /// cluster submitted that the log does not show yet.
    pub fn idle(&self) -> usize {
        self.idle + self.awaiting
    }

    /// Job `id` is idle (`Some(true)`), running or held (`Some(false)`), or
    /// over (`None`).
    fn set_proc(&mut self, id: (i32, i32), idle: Option<bool>) {
        let was = match idle {
            Some(i) => self.procs.insert(id, i),
            None => self.procs.remove(&id),
        };
        if was == Some(true) {
            self.idle -= 1;
        }
        if idle == Some(true) {
            self.idle += 1;
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Says that `cluster` is `node`'s job (known from the submit's reply,
    /// before the log may show it).
    pub fn expect(&mut self, cluster: i32, node: NodeId) {
        let c = self.clusters.entry(cluster).or_default();
        if c.node.is_none() && c.submitted == 0 {
            self.awaiting += 1;
        }
        c.node = Some(node);
    }

    /// Forgets `cluster` (removed with the DAG: its end decides nothing).
    pub fn forget(&mut self, cluster: i32) {
        if let Some(c) = self.clusters.get_mut(&cluster) {
            c.reported = true;
        }
    }

    /// Reads what the log gained; `names` finds a node by name (for submit
    /// notes and POST events). Events of clusters that are not the DAG's
    /// are ignored. `evidence`, when given, collects what an earlier run did.
    pub fn poll(
        &mut self,
        names: &dyn Fn(&str) -> Option<NodeId>,
        mut evidence: Option<&mut Evidence>,
    ) -> Result<Vec<Seen>, String> {
        let events = match self.follower.poll() {
            Ok(e) => e,
            Err(andes_job::userlog::ReadError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(Vec::new());
            }
            Err(e) => return Err(e.to_string()),
        };
        let mut seen = Vec::new();
        for ev in events {
            let cid = ev.id.cluster;
            let pid = (ev.id.cluster, ev.id.proc);
            match &ev.kind {
                EventKind::Submit(_) | EventKind::Evicted(_) | EventKind::Released(_) => {
                    self.set_proc(pid, Some(true))
                }
                EventKind::Execute(_) | EventKind::Held { .. } => self.set_proc(pid, Some(false)),
                EventKind::Terminated(_) | EventKind::Aborted(_) => self.set_proc(pid, None),
                _ => {}
            }
            match &ev.kind {
                EventKind::Submit(s) => {
                    let named = s
                        .log_notes
                        .as_deref()
                        .and_then(|n| n.trim().strip_prefix(NODE_NOTE))
                        .and_then(|n| names(n.trim()));
                    let c = self.clusters.entry(cid).or_default();
                    if c.submitted == 0 && c.node.is_some() {
                        self.awaiting = self.awaiting.saturating_sub(1);
                    }
                    if c.submitted == 0
                        && let (Some(node), Some(ev)) = (named, evidence.as_deref_mut())
                    {
                        ev.clusters.entry(node).or_default().push_back(cid);
                    }
                    if c.node.is_none() {
                        c.node = named;
                    }
                    c.submitted += 1;
                }
                EventKind::Terminated(t) => {
                    let code = match t.ending {
                        Ending::Normal { return_value } => return_value,
                        Ending::Abnormal { signal, .. } => -signal,
                    };
                    self.ended(cid, code, &mut seen);
                }
                EventKind::Aborted(_) => self.ended(cid, REMOVED, &mut seen),
                EventKind::Held { reason, .. } => {
                    if let Some(node) = self.clusters.get(&cid).and_then(|c| c.node) {
                        seen.push(Seen::Held {
                            node,
                            job: format!("{}.{}", ev.id.cluster, ev.id.proc),
                            reason: reason.clone().unwrap_or_default(),
                        });
                    }
                }
                EventKind::Other { number: 16, lines } => {
                    if let (Some((name, code)), Some(ev)) =
                        (post_event(lines), evidence.as_deref_mut())
                        && let Some(node) = names(&name)
                    {
                        ev.posts.entry(node).or_default().push_back(code);
                    }
                }
                _ => {}
            }
        }
        Ok(seen)
    }

    fn ended(&mut self, cluster: i32, code: i32, seen: &mut Vec<Seen>) {
        let Some(c) = self.clusters.get_mut(&cluster) else { return };
        c.ended += 1;
        if c.result == 0 && code != 0 {
            c.result = code;
        }
        if c.ended >= c.submitted
            && c.submitted > 0
            && !c.reported
            && let Some(node) = c.node
        {
            c.reported = true;
            seen.push(Seen::JobEnded { node, cluster, code: c.result });
        }
    }

    /// Appends a POST script's end for `node` (event 016, as HTCondor's
    /// DAGMan writes it), under the id of the node's last job.
    pub fn post_ended(&self, job: EventJobId, node: &str, code: i32) -> Result<(), String> {
        let ending = if code >= 0 {
            format!("\t(1) Normal termination (return value {code})")
        } else {
            format!("\t(0) Abnormal termination (signal {})", -code)
        };
        let ev = JobEvent::new(
            job,
            jiff::Timestamp::now(),
            EventKind::Other {
                number: 16,
                lines: vec![
                    "POST Script terminated.".into(),
                    ending,
                    format!("    {NODE_NOTE}{node}"),
                ],
            },
        );
        UserLog::open(&self.path, FormatOptions::utc())
            .and_then(|mut log| log.append(&ev))
            .map_err(|e| e.to_string())
    }
}

/// The node and exit a POST event's lines name.
fn post_event(lines: &[String]) -> Option<(String, i32)> {
    let mut code = None;
    let mut name = None;
    for l in lines {
        let t = l.trim();
        if let Some(n) = t.strip_prefix(NODE_NOTE) {
            name = Some(n.trim().to_string());
        } else if let Some(v) = t.strip_prefix("(1) Normal termination (return value ") {
            code = v.trim_end_matches(')').parse().ok();
        } else if let Some(v) = t.strip_prefix("(0) Abnormal termination (signal ") {
            code = v.trim_end_matches(')').parse::<i32>().ok().map(|s| -s);
        }
    }
    Some((name?, code?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_events_read_back() {
        let lines = vec![
            "POST Script terminated.".to_string(),
            "\t(1) Normal termination (return value 3)".into(),
            "    DAG Node: B".into(),
        ];
        assert_eq!(post_event(&lines), Some(("B".into(), 3)));
        let lines = vec!["\t(0) Abnormal termination (signal 9)".to_string(), "DAG Node: C".into()];
        assert_eq!(post_event(&lines), Some(("C".into(), -9)));
        assert_eq!(post_event(&["DAG Node: C".to_string()]), None);
    }
}
