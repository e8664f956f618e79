//! How a DAG runs, as a pure state machine: DAGMan's decisions without its
//! processes, files or clock. The caller (the DAGMan job) tells it what
//! happened ([`Event`]) and carries out what it asks ([`Step`]): run a PRE or
//! POST script, submit a node's job, remove what still runs.
//!
//! A node is ready once every parent succeeded. It runs its PRE script
//! (if any), its job (unless NOOP), its POST script (if any); the exit of
//! whatever ran last decides it, as HTCondor's manual tables it: a PRE
//! failure skips the job and, unless `always_run_post`, the POST script; a
//! POST script overrides the job's result; a PRE script exiting with the
//! node's PRE_SKIP value makes the node a success at once. A failed node is
//! run again, whole, while it has retries (but not when it exits with its
//! UNLESS-EXIT value). ABORT-DAG-ON stops the DAG when the PRE script, the
//! POST script, or the job of a node without one exits with the value,
//! retries or not. Nodes start highest PRIORITY first, within `max_jobs`,
//! `max_pre`, `max_post` and each category's MAXJOBS. The FINAL node runs
//! once nothing else can, and its result is the DAG's.

use std::collections::BTreeSet;

use crate::{Dag, NodeId, NodeKind};

/// The DAGMan options that bound how much runs at once (`-maxjobs`,
/// `-maxpre`, `-maxpost`; 0 is no limit, as in HTCondor) and
/// `-AlwaysRunPost`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Nodes whose jobs may be in the queue at once.
    pub max_jobs: u32,
    /// PRE scripts running at once.
    pub max_pre: u32,
    /// POST scripts running at once.
    pub max_post: u32,
    /// A node's POST script runs even after its PRE script failed.
    pub always_run_post: bool,
}

/// Where a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// A parent has not succeeded yet.
    Waiting,
    /// Ready to start (its PRE script, or its job).
    Ready,
    /// Its PRE script runs.
    Pre,
    /// Its PRE script succeeded; its job waits for a throttle.
    ReadyToSubmit,
    /// Its job is in the queue.
    Submitted,
    /// Its job ended (or never ran); its POST script waits for a throttle.
    ReadyForPost,
    /// Its POST script runs.
    Post,
    /// It succeeded.
    Done,
    /// It failed, with no retry left.
    Failed,
    /// A parent failed: it will never run.
    Futile,
}

/// What the DAGMan job must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Run the node's PRE script; `retry` is `$RETRY`.
    RunPre {
        /// The node.
        node: NodeId,
        /// `$RETRY`.
        retry: u32,
    },
    /// Submit the node's job (for a SERVICE node, once, at the start).
    Submit {
        /// The node.
        node: NodeId,
        /// `$(RETRY)`.
        retry: u32,
    },
    /// Run the node's POST script.
    RunPost {
        /// The node.
        node: NodeId,
        /// `$RETRY`.
        retry: u32,
        /// `$RETURN`: the job's exit (-1004 when the PRE script failed and the job never ran).
        job_return: i32,
        /// `$PRE_SCRIPT_RETURN` (-1 without a PRE script).
        pre_return: i32,
    },
    /// Remove every job and script of the DAG still running (on an abort or
    /// a removal; once the rest is over, the SERVICE nodes).
    RemoveAll,
    /// The DAG is over: DAGMan writes its rescue DAG if anything is undone
    /// and exits with `exit` (0 success, 1 a failure, 2 removed, or an
    /// ABORT-DAG-ON's value).
    Finished {
        /// `DAG_Status`.
        status: DagStatus,
        /// DAGMan's exit code.
        exit: i32,
    },
}

/// HTCondor's `DAG_Status` (`$DAG_STATUS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DagStatus {
    /// 0: all well.
    Ok = 0,
    /// 2: one or more nodes failed.
    NodeFailed = 2,
    /// 3: aborted by ABORT-DAG-ON.
    Aborted = 3,
    /// 4: removed by condor_rm.
    Removed = 4,
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The node's PRE script exited.
    PreExited(NodeId, i32),
    /// The node's job ended: 0 when every job of its cluster exited 0, else
    /// the first failure's exit (negative signal numbers, -1001 when the
    /// submit failed, -1002 when removed from outside).
    JobEnded(NodeId, i32),
    /// The node's POST script exited.
    PostExited(NodeId, i32),
    /// The DAG was removed (condor_rm of the DAGMan job).
    Removed,
}

/// A DAG as it runs.
#[derive(Clone, Debug)]
pub struct Run<'d> {
    dag: &'d Dag,
    opts: Options,
    state: Vec<State>,
    retries: Vec<u32>,
    pre_return: Vec<i32>,
    /// The job's exit, for the POST script's `$RETURN`.
    pending_return: Vec<i32>,
    /// The abort's exit, once ABORT-DAG-ON stopped the DAG.
    abort_exit: i32,
    /// Parents not yet succeeded, per node.
    waiting_on: Vec<u32>,
    /// Nodes whose PRE script may start, by (priority descending, definition order).
    ready_pre: BTreeSet<(i64, NodeId)>,
    /// Nodes whose job may be submitted, likewise.
    ready_submit: BTreeSet<(i64, NodeId)>,
    /// Nodes whose job waits for its category's MAXJOBS, by category, likewise.
    held_by_category: std::collections::HashMap<&'d str, BTreeSet<(i64, NodeId)>>,
    /// Nodes whose POST script waits for `max_post`, in the order their jobs ended.
    ready_post: std::collections::VecDeque<NodeId>,
    jobs: u32,
    pres: u32,
    posts: u32,
    per_category: std::collections::HashMap<&'d str, u32>,
    failed: u32,
    over: Option<DagStatus>,
    final_started: bool,
    finished: bool,
}

impl<'d> Run<'d> {
    /// The DAG at its start: DONE nodes done, the rest waiting on their
    /// parents. A PROVISIONER node is refused: andes does not run one yet.
    pub fn new(dag: &'d Dag, opts: Options) -> Result<Run<'d>, String> {
        if let Some(p) = dag.nodes.iter().find(|n| n.kind == NodeKind::Provisioner) {
            return Err(format!(
                "{}: PROVISIONER nodes are not run by andes yet ({})",
                p.place, p.name
            ));
        }
        let n = dag.nodes.len();
        let mut run = Run {
            dag,
            opts,
            state: vec![State::Waiting; n],
            retries: vec![0; n],
            pre_return: vec![-1; n],
            pending_return: vec![0; n],
            abort_exit: 0,
            waiting_on: dag.parents.iter().map(|p| p.len() as u32).collect(),
            ready_pre: BTreeSet::new(),
            ready_submit: BTreeSet::new(),
            held_by_category: Default::default(),
            ready_post: Default::default(),
            jobs: 0,
            pres: 0,
            posts: 0,
            per_category: Default::default(),
            failed: 0,
            over: None,
            final_started: false,
            finished: false,
        };
        // DONE nodes (a rescue DAG's) first, all of them, then what they free.
        for (i, node) in dag.nodes.iter().enumerate() {
            if node.done {
                run.state[i] = State::Done;
            }
        }
        for (i, node) in dag.nodes.iter().enumerate() {
            if node.done {
                for &c in &dag.children[i] {
                    run.waiting_on[c as usize] -= 1;
                }
            }
        }
        for i in 0..n as NodeId {
            let node = &dag.nodes[i as usize];
            if run.state[i as usize] == State::Waiting
                && run.waiting_on[i as usize] == 0
                && matches!(node.kind, NodeKind::Job | NodeKind::SubDag)
            {
                run.make_ready(i);
            }
        }
        Ok(run)
    }

    /// Where node `id` is.
    pub fn state(&self, id: NodeId) -> State {
        self.state[id as usize]
    }

    /// `$RETRY` of node `id`: its retries so far.
    pub fn retry(&self, id: NodeId) -> u32 {
        self.retries[id as usize]
    }

    /// `$FAILED_COUNT`.
    pub fn failed_count(&self) -> u32 {
        self.failed
    }

    /// What to do first: the SERVICE nodes' jobs, then whatever may start.
    pub fn start(&mut self) -> Vec<Step> {
        let services: Vec<NodeId> = (0..self.dag.nodes.len() as NodeId)
            .filter(|&i| {
                let n = &self.dag.nodes[i as usize];
                n.kind == NodeKind::Service && !n.done
            })
            .collect();
        let mut steps = Vec::new();
        for node in services {
            self.state[node as usize] = State::Submitted;
            steps.push(Step::Submit { node, retry: 0 });
        }
        steps.extend(self.advance());
        steps
    }

    /// Takes in `event`; says what to do next.
    pub fn on(&mut self, event: Event) -> Vec<Step> {
        if self.finished {
            return Vec::new();
        }
        // An event for a node this DAG does not have (a stale or forged
        // record) changes nothing.
        if let Event::PreExited(id, _) | Event::JobEnded(id, _) | Event::PostExited(id, _) = event
            && id as usize >= self.state.len()
        {
            return Vec::new();
        }
        match event {
            Event::Removed => {
                // As HTCondor's DAGMan: what runs is removed, the FINAL node
                // still runs (told `$DAG_STATUS` 4), then the DAG ends.
                self.over = Some(DagStatus::Removed);
                self.halt();
                let mut steps = vec![Step::RemoveAll];
                steps.extend(self.advance());
                return steps;
            }
            Event::PreExited(id, code) => {
                if self.state[id as usize] != State::Pre {
                    return Vec::new();
                }
                self.pres -= 1;
                self.pre_return[id as usize] = code;
                let node = &self.dag.nodes[id as usize];
                if let Some(steps) = self.abort_on(id, code) {
                    return steps;
                }
                if code != 0 && node.pre_skip == Some(code) {
                    self.succeed(id);
                } else if code == 0 {
                    self.ready_to_submit(id);
                } else if self.opts.always_run_post && node.post.is_some() {
                    // The job never ran: `$RETURN` says so.
                    self.pending_return[id as usize] = -1004;
                    self.state[id as usize] = State::ReadyForPost;
                    self.ready_post.push_back(id);
                } else {
                    self.fail(id, code);
                }
            }
            Event::JobEnded(id, code) => {
                if self.state[id as usize] != State::Submitted {
                    return Vec::new();
                }
                if let Some(steps) = self.job_ended(id, code) {
                    return steps;
                }
            }
            Event::PostExited(id, code) => {
                if self.state[id as usize] != State::Post {
                    return Vec::new();
                }
                self.posts -= 1;
                if let Some(steps) = self.abort_on(id, code) {
                    return steps;
                }
                if code == 0 {
                    self.succeed(id);
                } else {
                    self.fail(id, code);
                }
            }
        }
        self.advance()
    }

    /// The node's job ended with `code`: its POST script is due, or the node
    /// is decided. `Some` when that aborted the DAG.
    fn job_ended(&mut self, id: NodeId, code: i32) -> Option<Vec<Step>> {
        let node = &self.dag.nodes[id as usize];
        if node.kind == NodeKind::Service {
            self.state[id as usize] = if code == 0 { State::Done } else { State::Failed };
            return None;
        }
        self.jobs -= 1;
        if let Some(c) = &node.category
            && let Some(n) = self.per_category.get_mut(c.as_str())
        {
            *n -= 1;
            // The first node its category held may go now.
            if let Some(held) = self.held_by_category.get_mut(c.as_str())
                && let Some(first) = held.pop_first()
            {
                self.ready_submit.insert(first);
            }
        }
        if node.post.is_some() {
            self.pending_return[id as usize] = code;
            self.state[id as usize] = State::ReadyForPost;
            self.ready_post.push_back(id);
            return None;
        }
        if let Some(steps) = self.abort_on(id, code) {
            return Some(steps);
        }
        if code == 0 {
            self.succeed(id);
        } else {
            self.fail(id, code);
        }
        None
    }

    /// ABORT-DAG-ON: the node's exit `code` (of whatever ran last) stops the DAG.
    fn abort_on(&mut self, id: NodeId, code: i32) -> Option<Vec<Step>> {
        let a = self.dag.nodes[id as usize].abort_on?;
        if a.exit != code {
            return None;
        }
        self.state[id as usize] = State::Failed;
        self.failed += 1;
        self.over = Some(DagStatus::Aborted);
        self.abort_exit = a.dag_return.map_or(code, i32::from);
        self.halt();
        let mut steps = vec![Step::RemoveAll];
        steps.extend(self.advance());
        Some(steps)
    }

    /// Everything still running is removed and left undone (the rescue DAG
    /// runs it again); nothing more starts but the FINAL node.
    fn halt(&mut self) {
        for s in &mut self.state {
            if matches!(
                s,
                State::Ready
                    | State::Pre
                    | State::ReadyToSubmit
                    | State::Submitted
                    | State::ReadyForPost
                    | State::Post
            ) {
                *s = State::Waiting;
            }
        }
        self.ready_pre.clear();
        self.ready_submit.clear();
        self.held_by_category.clear();
        self.ready_post.clear();
        (self.jobs, self.pres, self.posts) = (0, 0, 0);
        self.per_category.clear();
    }

    fn make_ready(&mut self, id: NodeId) {
        self.state[id as usize] = State::Ready;
        let key = (-self.dag.nodes[id as usize].priority, id);
        if self.dag.nodes[id as usize].pre.is_some() {
            self.ready_pre.insert(key);
        } else {
            self.ready_submit.insert(key);
        }
    }

    fn ready_to_submit(&mut self, id: NodeId) {
        self.state[id as usize] = State::ReadyToSubmit;
        self.ready_submit.insert((-self.dag.nodes[id as usize].priority, id));
    }

    fn succeed(&mut self, id: NodeId) {
        self.state[id as usize] = State::Done;
        for &c in &self.dag.children[id as usize] {
            self.waiting_on[c as usize] -= 1;
            if self.waiting_on[c as usize] == 0 && self.state[c as usize] == State::Waiting {
                self.make_ready(c);
            }
        }
    }

    fn fail(&mut self, id: NodeId, code: i32) {
        let node = &self.dag.nodes[id as usize];
        if let Some(r) = node.retry
            && self.retries[id as usize] < r.times
            && r.unless_exit != Some(code)
        {
            self.retries[id as usize] += 1;
            self.pre_return[id as usize] = -1;
            self.make_ready(id);
            return;
        }
        self.state[id as usize] = State::Failed;
        self.failed += 1;
        // Its descendants will never run.
        let mut stack: Vec<NodeId> = self.dag.children[id as usize].clone();
        while let Some(c) = stack.pop() {
            if self.state[c as usize] == State::Waiting {
                self.state[c as usize] = State::Futile;
                stack.extend(self.dag.children[c as usize].iter().copied());
            }
        }
    }

    fn category_full(&self, id: NodeId) -> bool {
        let Some(c) = &self.dag.nodes[id as usize].category else { return false };
        let Some(&max) = self.dag.max_jobs.get(c) else { return false };
        max > 0 && self.per_category.get(c.as_str()).copied().unwrap_or(0) >= max
    }

    /// Starts what may start, within the throttles; ends the DAG when
    /// nothing runs and nothing can. Each start costs a few set operations:
    /// nodes waiting on a throttle are not looked at again until it opens.
    fn advance(&mut self) -> Vec<Step> {
        let mut steps = Vec::new();
        loop {
            let pre_open = self.opts.max_pre == 0 || self.pres < self.opts.max_pre;
            let job_open = self.opts.max_jobs == 0 || self.jobs < self.opts.max_jobs;
            let post_open = self.opts.max_post == 0 || self.posts < self.opts.max_post;
            if pre_open && let Some((_, id)) = self.ready_pre.pop_first() {
                if self.state[id as usize] != State::Ready {
                    continue;
                }
                self.pres += 1;
                self.state[id as usize] = State::Pre;
                steps.push(Step::RunPre { node: id, retry: self.retries[id as usize] });
            } else if job_open && let Some(key) = self.ready_submit.pop_first() {
                let id = key.1;
                if !matches!(self.state[id as usize], State::Ready | State::ReadyToSubmit) {
                    continue;
                }
                let node = &self.dag.nodes[id as usize];
                if let Some(c) = &node.category
                    && self.category_full(id)
                {
                    self.state[id as usize] = State::ReadyToSubmit;
                    self.held_by_category.entry(c.as_str()).or_default().insert(key);
                    continue;
                }
                self.jobs += 1;
                if let Some(c) = &node.category {
                    *self.per_category.entry(c.as_str()).or_default() += 1;
                }
                self.state[id as usize] = State::Submitted;
                if node.noop {
                    // No job: it "exits" 0 at once.
                    if let Some(aborted) = self.job_ended(id, 0) {
                        steps.extend(aborted);
                        return steps;
                    }
                    continue;
                }
                steps.push(Step::Submit { node: id, retry: self.retries[id as usize] });
            } else if post_open && let Some(id) = self.ready_post.pop_front() {
                self.posts += 1;
                self.state[id as usize] = State::Post;
                steps.push(Step::RunPost {
                    node: id,
                    retry: self.retries[id as usize],
                    job_return: self.pending_return[id as usize],
                    pre_return: self.pre_return[id as usize],
                });
            } else {
                break;
            }
        }
        steps.extend(self.maybe_finish());
        steps
    }

    /// `$DAG_STATUS` as it stands (what the FINAL node is told).
    pub fn status(&self) -> DagStatus {
        match self.over {
            Some(s) => s,
            None if self.failed > 0 => DagStatus::NodeFailed,
            None => DagStatus::Ok,
        }
    }

    /// When nothing runs and nothing else can start: the FINAL node, or the end.
    fn maybe_finish(&mut self) -> Vec<Step> {
        if self.finished {
            return Vec::new();
        }
        // Waiting on a throttle, or running: counted, not searched for.
        let busy = !self.ready_pre.is_empty()
            || !self.ready_submit.is_empty()
            || self.held_by_category.values().any(|h| !h.is_empty())
            || !self.ready_post.is_empty()
            || self.jobs > 0
            || self.pres > 0
            || self.posts > 0;
        if busy {
            return Vec::new();
        }
        if let Some(f) = self.dag.final_node
            && !self.final_started
            && !self.dag.nodes[f as usize].done
        {
            self.final_started = true;
            self.make_ready(f);
            return self.advance();
        }
        self.finished = true;
        let final_result = self.dag.final_node.map(|f| self.state[f as usize]);
        // The FINAL node's result is the DAG's, over failures, an abort
        // and a removal alike.
        let (status, exit) = match (final_result, self.over) {
            (Some(State::Done), _) => (DagStatus::Ok, 0),
            (Some(_), _) => (DagStatus::NodeFailed, 1),
            (None, Some(DagStatus::Aborted)) => (DagStatus::Aborted, self.abort_exit),
            (None, Some(DagStatus::Removed)) => (DagStatus::Removed, 2),
            _ if self.failed > 0 => (DagStatus::NodeFailed, 1),
            _ => (DagStatus::Ok, 0),
        };
        let services_run = self
            .state
            .iter()
            .zip(&self.dag.nodes)
            .any(|(s, n)| n.kind == NodeKind::Service && *s == State::Submitted);
        let mut steps = Vec::new();
        if services_run {
            steps.push(Step::RemoveAll);
        }
        steps.push(Step::Finished { status, exit });
        steps
    }
}
