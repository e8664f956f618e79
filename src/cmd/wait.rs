//! `andes wait`: condor_wait. Follows a job event log until the jobs in it
//! (or one job, or one cluster) have completed or been aborted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use andes_schedd::job::{JobId, JobSelector};
use andes_schedd::userlog::{EventKind, Follower, JobEvent, ParseOptions};
use clap::Args;

/// How often the log is looked at again while nothing ends.
const POLL: Duration = Duration::from_millis(200);

/// Arguments of `andes wait`.
#[derive(Args, Debug)]
pub struct WaitArgs {
    /// The job event log (the submit file's `log`).
    log: PathBuf,
    /// Only this job (`C.P`) or cluster (`C`); by default every job in the log.
    job: Option<String>,
    /// Give up after this many seconds (exit status 1).
    #[arg(long, value_name = "SECONDS")]
    wait: Option<u64>,
    /// Done once this many of the jobs have ended.
    #[arg(long, value_name = "N")]
    num: Option<usize>,
    /// Say when each job is submitted, starts and ends.
    #[arg(long)]
    status: bool,
    /// Print each event of the log as it comes.
    #[arg(long)]
    echo: bool,
}

/// Runs `andes wait`: exit status 0 once the jobs have ended, 1 when the
/// time is up, the log cannot be read or the job is not in it.
pub fn run(args: WaitArgs) -> anyhow::Result<ExitCode> {
    let which = match args.job.as_deref().map(str::parse::<JobSelector>).transpose() {
        Ok(w) => w,
        Err(e) => return Ok(fail(&e)),
    };
    let deadline = args.wait.map(|s| Instant::now() + Duration::from_secs(s));
    let mut log = Follower::new(&args.log, ParseOptions::default());
    let mut jobs = Jobs::default();
    let mut first = true;
    loop {
        let events = match log.poll() {
            Ok(e) => e,
            Err(e) => return Ok(fail(&e.to_string())),
        };
        for e in &events {
            if args.echo {
                out!("{}", e.to_text(&Default::default()));
            }
            if let Some(line) = jobs.note(e, which.as_ref())
                && args.status
            {
                outln!("{line}");
            }
        }
        if jobs.done(args.num) {
            outln!("{}", if which.is_some() { "Specified job(s) done." } else { "All jobs done." });
            return Ok(ExitCode::SUCCESS);
        }
        if first && jobs.submitted.is_empty() {
            let what =
                args.job.as_deref().map_or_else(|| "no job".to_string(), |j| format!("job {j}"));
            return Ok(fail(&format!(
                "{}: {what} was submitted to this log (no submit event)",
                args.log.display()
            )));
        }
        first = false;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            outln!("Time expired.");
            return Ok(ExitCode::from(1));
        }
        std::thread::sleep(POLL);
    }
}

fn fail(why: &str) -> ExitCode {
    eprintln!("andes wait: {why}");
    ExitCode::from(1)
}

/// The jobs of the log that are waited for, and which have ended.
#[derive(Default)]
struct Jobs {
    submitted: BTreeSet<JobId>,
    ended: BTreeMap<JobId, bool>,
}

impl Jobs {
    /// Takes in one event; what `-status` says of it, if anything.
    fn note(&mut self, e: &JobEvent, which: Option<&JobSelector>) -> Option<String> {
        let id = e.id.job()?;
        if which.is_some_and(|w| !w.selects(id)) {
            return None;
        }
        let name = format!("{id}.{}", e.id.subproc);
        match &e.kind {
            EventKind::Submit(_) => {
                self.submitted.insert(id);
                self.ended.remove(&id);
                Some(format!("{name} submitted"))
            }
            EventKind::Execute(x) => Some(format!("{name} executing on host {}", x.execute_host)),
            EventKind::Terminated(_) => {
                self.submitted.insert(id);
                self.ended.insert(id, true);
                Some(format!("{name} completed"))
            }
            EventKind::Aborted(_) => {
                self.submitted.insert(id);
                self.ended.insert(id, false);
                Some(format!("{name} aborted"))
            }
            _ => None,
        }
    }

    /// Whether the wait is over: `num` of them ended, or every one.
    fn done(&self, num: Option<usize>) -> bool {
        match num {
            Some(n) => self.ended.len() >= n,
            None => !self.submitted.is_empty() && self.ended.len() == self.submitted.len(),
        }
    }
}
