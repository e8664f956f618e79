//! `andes watch`: condor_watch_q. Tracks jobs through their job event logs
//! (found with one query to the schedd, or named), without asking the
//! schedd again: a table per cluster with a progress bar, redrawn as the
//! logs grow, until the jobs reach the state `-exit` names.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use andes_schedd::api::{QueryReply, QueryRequest};
use andes_schedd::job::JobId;
use andes_schedd::userlog::{EventKind, Follower, JobEvent, ParseOptions};
use anyhow::{Result, anyhow, bail};
use clap::Args;

use crate::cmd::client::Session;
use crate::cmd::q::selection;

/// How often the logs are looked at again.
const POLL: Duration = Duration::from_millis(500);

/// Arguments of `andes watch`.
#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Track these users' jobs (their logs, from one query to the schedd).
    #[arg(long, num_args = 1.., value_name = "USER")]
    users: Vec<String>,
    /// Track these clusters' jobs.
    #[arg(long, num_args = 1.., value_name = "CLUSTER")]
    clusters: Vec<u32>,
    /// Track the jobs of these event logs (no schedd asked).
    #[arg(long, num_args = 1.., value_name = "LOG")]
    files: Vec<PathBuf>,
    /// Stop when the jobs reach a state: `GROUP,STATE[,CODE]`, GROUP `all`,
    /// `any` or `none`, STATE `held`, `idle`, `running`, `done` (completed)
    /// or `active` (idle or running); exit with CODE (default 0).
    #[arg(long, value_name = "GROUP,STATE[,CODE]")]
    exit: Option<String>,
    /// Print the table once and stop.
    #[arg(long)]
    once: bool,
}

/// A job's state as its log tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Running,
    Held,
    Done,
    Removed,
}

/// A `-exit` condition.
#[derive(Debug, PartialEq)]
struct ExitWhen {
    group: Group,
    state: String,
    code: u8,
}

#[derive(Debug, PartialEq)]
enum Group {
    All,
    Any,
    None,
}

impl ExitWhen {
    fn parse(s: &str) -> Result<ExitWhen> {
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        let (group, state, code) = match parts.as_slice() {
            [g, st] => (*g, *st, 0),
            [g, st, c] => {
                (*g, *st, c.parse::<u8>().map_err(|_| anyhow!("-exit {s}: `{c}` is not a code"))?)
            }
            _ => bail!("-exit {s}: expected GROUP,STATE[,CODE]"),
        };
        let group = match group {
            "all" => Group::All,
            "any" => Group::Any,
            "none" => Group::None,
            g => bail!("-exit {s}: `{g}` is not all, any or none"),
        };
        if !["held", "idle", "running", "done", "active"].contains(&state) {
            bail!("-exit {s}: `{state}` is not held, idle, running, done or active");
        }
        Ok(ExitWhen { group, state: state.to_string(), code })
    }

    fn holds(&self, jobs: &BTreeMap<JobId, State>) -> bool {
        if jobs.is_empty() {
            return false;
        }
        let is = |s: &State| match self.state.as_str() {
            "held" => *s == State::Held,
            "idle" => *s == State::Idle,
            "running" => *s == State::Running,
            "done" => matches!(s, State::Done | State::Removed),
            _ => matches!(s, State::Idle | State::Running),
        };
        match self.group {
            Group::All => jobs.values().all(is),
            Group::Any => jobs.values().any(is),
            Group::None => !jobs.values().any(is),
        }
    }
}

/// Runs `andes watch`.
pub fn run(args: WatchArgs) -> Result<ExitCode> {
    let exit = args.exit.as_deref().map(ExitWhen::parse).transpose()?;
    let clusters: BTreeSet<u32> = args.clusters.iter().copied().collect();
    let mut logs: Vec<PathBuf> = args.files.clone();
    if logs.is_empty() {
        logs = logs_from_schedd(&args.users, &args.clusters)?;
        if logs.is_empty() {
            outln!("No job to track: none of the jobs asked for has an event log (`log`).");
            return Ok(ExitCode::SUCCESS);
        }
    }
    let mut followers: Vec<Follower> =
        logs.iter().map(|p| Follower::new(p, ParseOptions::default())).collect();
    let mut jobs: BTreeMap<JobId, State> = BTreeMap::new();
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut shown = String::new();
    loop {
        for f in &mut followers {
            match f.poll() {
                Ok(events) => {
                    for e in &events {
                        note(&mut jobs, e, &clusters);
                    }
                }
                Err(e) => eprintln!("andes watch: {e}"),
            }
        }
        let table = table(&jobs);
        if table != shown {
            let mut out = std::io::stdout().lock();
            if tty && !shown.is_empty() {
                // Back over the last table, then clear below.
                let _ = write!(out, "\x1b[{}A\x1b[J", shown.lines().count());
            }
            let _ = write!(out, "{table}");
            let _ = out.flush();
            shown = table;
        }
        if args.once {
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(x) = &exit
            && x.holds(&jobs)
        {
            return Ok(ExitCode::from(x.code));
        }
        std::thread::sleep(POLL);
    }
}

/// The event logs of the jobs asked for: one query to the schedd.
fn logs_from_schedd(users: &[String], clusters: &[u32]) -> Result<Vec<PathBuf>> {
    let words: Vec<String> =
        users.iter().cloned().chain(clusters.iter().map(|c| c.to_string())).collect();
    let targets = selection(&words)?;
    let mine = words.is_empty();
    let req = QueryRequest {
        targets,
        projection: vec!["UserLog".into(), "Iwd".into()],
        limit: None,
        mine,
        group_by: None,
    };
    let session = Session::open()?;
    let r: QueryReply =
        session.block_on(session.client.call(http::Method::POST, "/v1/query", Some(&req)))?;
    let logs: BTreeSet<PathBuf> =
        crate::cmd::q::parse_ads(&r)?.iter().filter_map(andes_schedd::eventlog::log_path).collect();
    Ok(logs.into_iter().collect())
}

/// Takes in one event (of a tracked cluster, when clusters are named).
fn note(jobs: &mut BTreeMap<JobId, State>, e: &JobEvent, clusters: &BTreeSet<u32>) {
    let Some(id) = e.id.job() else { return };
    if !clusters.is_empty() && !clusters.contains(&id.cluster) {
        return;
    }
    let state = match &e.kind {
        EventKind::Submit(_) | EventKind::Released(_) => State::Idle,
        EventKind::Execute(_) | EventKind::Unsuspended | EventKind::Suspended(_) => State::Running,
        // Evicted or terminated and requeued: back to idle.
        EventKind::Evicted(_) => State::Idle,
        EventKind::Held { .. } => State::Held,
        EventKind::Terminated(_) => State::Done,
        EventKind::Aborted(_) => State::Removed,
        _ => return,
    };
    // A log read from its middle still counts the jobs it names.
    jobs.insert(id, state);
}

/// condor_watch_q's table: a row per cluster with a progress bar.
fn table(jobs: &BTreeMap<JobId, State>) -> String {
    let mut out = format!(
        "{:<12} {:>6} {:>6} {:>6} {:>6} {:>6}  {:<20} {}\n",
        "BATCH", "IDLE", "RUN", "DONE", "HOLD", "TOTAL", "JOB_IDS", "PROGRESS"
    );
    let mut by_cluster: BTreeMap<u32, Vec<(u32, State)>> = BTreeMap::new();
    for (id, s) in jobs {
        by_cluster.entry(id.cluster).or_default().push((id.proc, *s));
    }
    let dash = |n: usize| if n == 0 { "-".to_string() } else { n.to_string() };
    for (c, procs) in &by_cluster {
        let count = |st: State| procs.iter().filter(|(_, s)| *s == st).count();
        let (idle, run, held) = (count(State::Idle), count(State::Running), count(State::Held));
        let done = count(State::Done) + count(State::Removed);
        let total = procs.len();
        let (first, last) = (procs[0].0, procs[procs.len() - 1].0);
        let ids =
            if first == last { format!("{c}.{first}") } else { format!("{c}.{first}-{last}") };
        const WIDTH: usize = 20;
        let filled = done * WIDTH / total.max(1);
        let bar = format!("[{}{}]", "#".repeat(filled), ".".repeat(WIDTH - filled));
        out.push_str(&format!(
            "{:<12} {:>6} {:>6} {:>6} {:>6} {:>6}  {:<20} {bar} {}%\n",
            format!("ID: {c}"),
            dash(idle),
            dash(run),
            dash(done),
            dash(held),
            total,
            ids,
            done * 100 / total.max(1)
        ));
    }
    let all = |st: State| jobs.values().filter(|s| **s == st).count();
    out.push_str(&format!(
        "\nTotal: {} jobs; {} completed, {} removed, {} idle, {} running, {} held\n",
        jobs.len(),
        all(State::Done),
        all(State::Removed),
        all(State::Idle),
        all(State::Running),
        all(State::Held)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_conditions_read_as_condor_watch_q_reads_them() {
        let x = ExitWhen::parse("all,done").unwrap();
        assert_eq!((x.group, x.state.as_str(), x.code), (Group::All, "done", 0));
        assert_eq!(ExitWhen::parse("any,held,3").unwrap().code, 3);
        assert!(ExitWhen::parse("most,done").unwrap_err().to_string().contains("`most`"));
        assert!(ExitWhen::parse("all,asleep").unwrap_err().to_string().contains("`asleep`"));
        let jobs: BTreeMap<JobId, State> =
            [(JobId::new(1, 0), State::Done), (JobId::new(1, 1), State::Held)].into();
        assert!(!ExitWhen::parse("all,done").unwrap().holds(&jobs));
        assert!(ExitWhen::parse("any,held").unwrap().holds(&jobs));
        assert!(ExitWhen::parse("none,running").unwrap().holds(&jobs));
        assert!(!ExitWhen::parse("all,done").unwrap().holds(&BTreeMap::new()));
    }
}
