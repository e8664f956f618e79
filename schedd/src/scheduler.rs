//! The scheduler universe: DAGMan jobs, run by the schedd itself on the
//! submit machine, as their owner, the way HTCondor's schedd runs
//! `condor_dagman` (`andes submit-dag` queues one).
//!
//! A DAGMan job is a job of universe 7 naming its DAG file ([`DAG_FILE`]);
//! it is never offered to the pool. Idle, it starts at once: the schedd runs
//! `andes dagman` (its own executable, or `DAGMAN`) with the job's
//! `Arguments`, in its `Iwd`, with the environment its submitter recorded
//! ([`DAG_ENV`]) and nothing of the schedd's, its output and error going to
//! the job's `Out` and `Err` (opened with the owner's rights), as the
//! owner's account: the schedd's own when they are one (a personal pool),
//! the owner's mapped account when the schedd runs as root; a schedd that
//! can do neither holds the job and says why. The process's exit is the
//! job's. `andes rm` of the job sends it SIGTERM (DAGMan removes its node
//! jobs, runs its FINAL node and writes a rescue DAG), then SIGKILL after
//! [`REMOVE_GRACE`]; `andes hold` stops it outright (its node jobs run on),
//! and a release starts it again, in recovery. The process ends with the
//! schedd that started it (`--exit-with-parent`), and a restarted schedd
//! starts it again for its running jobs: the DAG resumes from its node log.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use classad::{ClassAd, Value};

use crate::job::{JobId, JobStatus};
use crate::queue::EventKind;
use crate::schedd::Schedd;
use crate::userfs::{Access, Accounts};

pub use andes_job::dagman::{DAG_ENV, DAG_FILE, is_dagman};

/// How long a removed DAGMan has to clean up before it is killed.
pub const REMOVE_GRACE: Duration = Duration::from_secs(120);

/// The most arguments a DAGMan job may pass, and bytes in them.
pub const MAX_ARGS: usize = 64;

/// [`is_dagman`] of a queued job, looking at its ads' attributes first (most
/// jobs name no DAG file: they are told apart without building their ad).
pub fn is_dagman_view(v: &crate::queue::JobView<'_>) -> bool {
    v.has(classad::name!(DAG_FILE)) && is_dagman(&v.ad())
}

/// What a running DAGMan process is told.
#[derive(Clone, Copy, Debug)]
enum Signal {
    /// Removed: clean up and end.
    Term,
    /// Held, or out of time: end now.
    Kill,
}

/// The DAGMan processes this schedd runs.
#[derive(Clone)]
pub struct Dagmen {
    schedd: Schedd,
    accounts: Arc<Accounts>,
    program: PathBuf,
    running: Arc<Mutex<HashMap<JobId, tokio::sync::mpsc::UnboundedSender<Signal>>>>,
}

impl Dagmen {
    /// Runs the DAGMan jobs of `schedd` with `program` (an `andes`
    /// executable): those the queue holds now, and each one as it comes.
    pub fn start(schedd: &Schedd, program: PathBuf) -> Dagmen {
        let d = Dagmen {
            schedd: schedd.clone(),
            accounts: schedd.accounts.clone(),
            program,
            running: Arc::default(),
        };
        let mut events = schedd.take_events();
        let me = d.clone();
        tokio::spawn(async move {
            // What the queue holds now: idle jobs start, running ones (a
            // schedd before this one started them) start again, removed ones
            // whose process ended with that schedd leave.
            let now: Vec<(JobId, JobStatus)> = me
                .schedd
                .queue
                .read()
                .jobs()
                .filter(|v| is_dagman(&v.ad()))
                .map(|v| (v.id, v.proc.status))
                .collect();
            for (id, status) in now {
                me.on_status(id, status).await;
            }
            while let Some(batch) = events.recv().await {
                for e in batch {
                    if !e.ad.has(classad::name!(DAG_FILE)) || !is_dagman(&e.ad) {
                        continue;
                    }
                    match &e.kind {
                        EventKind::Submitted | EventKind::Released(_) | EventKind::Requeued => {
                            me.on_status(e.id, JobStatus::Idle).await
                        }
                        EventKind::Removed(_) => me.signal(e.id, Signal::Term),
                        EventKind::Held(_) => me.signal(e.id, Signal::Kill),
                        _ => {}
                    }
                }
            }
        });
        d
    }

    fn signal(&self, id: JobId, s: Signal) {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = running.get(&id) {
            let _ = tx.send(s);
        }
    }

    async fn on_status(&self, id: JobId, status: JobStatus) {
        let now = self.schedd.clock().now();
        match status {
            JobStatus::Idle => {
                let ad = match self.schedd.queue.read().job(id) {
                    Some(v) if v.proc.status == JobStatus::Idle => v.ad(),
                    _ => return,
                };
                if let Err(e) = self.schedd.queue.job_started(id, now).await {
                    tracing::warn!("DAGMan job {id}: {e}");
                    return;
                }
                self.run(id, &ad).await;
            }
            JobStatus::Running => {
                let ad = match self.schedd.queue.read().job(id) {
                    Some(v) => v.ad(),
                    None => return,
                };
                self.run(id, &ad).await;
            }
            JobStatus::Removed => {
                let ending = exit_ad(-1, None);
                let _ = self.schedd.queue.job_exited(id, ending, now).await;
            }
            _ => {}
        }
    }

    /// Starts job `id`'s process (the job is running); on failure, holds it.
    async fn run(&self, id: JobId, ad: &ClassAd) {
        if self.running.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&id) {
            return;
        }
        let child = match self.spawn(id, ad) {
            Ok(c) => c,
            Err(why) => {
                tracing::warn!("DAGMan job {id}: {why}");
                let mut ending = ClassAd::new();
                ending.insert_value(classad::name!("HoldReasonCode"), 6i64);
                ending.insert_value(classad::name!("HoldReasonSubCode"), 0i64);
                ending.insert_value(
                    classad::name!("HoldReason"),
                    format!("cannot run DAGMan: {why}"),
                );
                let now = self.schedd.clock().now();
                let _ = self.schedd.queue.job_exited(id, ending, now).await;
                return;
            }
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.running.lock().unwrap_or_else(|e| e.into_inner()).insert(id, tx);
        let me = self.clone();
        tokio::spawn(async move { me.supervise(id, child, rx).await });
    }

    fn spawn(&self, id: JobId, ad: &ClassAd) -> Result<tokio::process::Child, String> {
        let text = |a: &str| match ad.eval_attr(a) {
            Value::Str(s) => Some(s.to_string()),
            _ => None,
        };
        let owner = text("Owner").ok_or("the job has no Owner")?;
        let access = self.accounts.access(&owner);
        if let Access::SpoolOnly(why) = &access {
            return Err(format!("it would run as {owner}, and {why}"));
        }
        let dag = text(DAG_FILE).ok_or("no DAG file")?;
        let iwd = text("Iwd").ok_or("the job has no Iwd")?;
        let args: Vec<String> =
            text("Arguments").unwrap_or_default().split_whitespace().map(String::from).collect();
        if args.len() > MAX_ARGS {
            return Err(format!("more than {MAX_ARGS} arguments"));
        }
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.arg("dagman")
            .arg("--dagman-job-id")
            .arg(id.cluster.to_string())
            .arg("--exit-with-parent")
            .args(&args)
            .arg("--")
            .arg(&dag)
            .current_dir(&iwd)
            .env_clear()
            .stdin(Stdio::null())
            .kill_on_drop(false);
        if let Value::List(items) = ad.eval_attr(classad::name!(DAG_ENV)) {
            for v in items.iter() {
                if let Value::Str(s) = v
                    && let Some((k, v)) = s.split_once('=')
                    && !k.is_empty()
                {
                    cmd.env(k, v);
                }
            }
        }
        // Output and error, opened with the owner's rights.
        let open = |attr: &str| -> Result<Stdio, String> {
            let Some(name) = text(attr).filter(|n| !n.is_empty()) else {
                return Ok(Stdio::null());
            };
            let path = std::path::Path::new(&iwd).join(&name);
            let f = Accounts::run(&access, || {
                std::fs::OpenOptions::new().create(true).append(true).open(&path)
            })?
            .map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(Stdio::from(f))
        };
        cmd.stdout(open("Out")?).stderr(open("Err")?);
        #[cfg(unix)]
        if let Access::As(a) = &access {
            // std drops the supplementary groups of root when it sets the uid.
            cmd.uid(a.uid).gid(a.gid);
        }
        cmd.spawn().map_err(|e| format!("{}: {e}", self.program.display()))
    }

    async fn supervise(
        &self,
        id: JobId,
        mut child: tokio::process::Child,
        mut signals: tokio::sync::mpsc::UnboundedReceiver<Signal>,
    ) {
        let pid = child.id();
        let mut deadline: Option<tokio::time::Instant> = None;
        let status = loop {
            let grace = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                s = child.wait() => break s,
                Some(sig) = signals.recv() => match sig {
                    Signal::Term => {
                        send(pid, Signal::Term);
                        deadline.get_or_insert(tokio::time::Instant::now() + REMOVE_GRACE);
                    }
                    Signal::Kill => {
                        let _ = child.start_kill();
                    }
                },
                () = grace => {
                    let _ = child.start_kill();
                    deadline = None;
                }
            }
        };
        self.running.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        let ending = match status {
            Ok(s) => {
                #[cfg(unix)]
                let signal = std::os::unix::process::ExitStatusExt::signal(&s);
                #[cfg(not(unix))]
                let signal = None;
                exit_ad(s.code().unwrap_or(-1), signal)
            }
            Err(e) => {
                tracing::warn!("DAGMan job {id}: waiting for it: {e}");
                exit_ad(-1, None)
            }
        };
        let now = self.schedd.clock().now();
        // A held job's process ended because it was held: nothing to record.
        if let Err(e) = self.schedd.queue.job_exited(id, ending, now).await {
            tracing::debug!("DAGMan job {id} ended: {e}");
        }
    }
}

/// The ending a DAGMan process's exit makes.
fn exit_ad(code: i32, signal: Option<i32>) -> ClassAd {
    let mut ad = ClassAd::new();
    match signal {
        Some(s) => {
            ad.insert_value(classad::name!("ExitBySignal"), true);
            ad.insert_value(classad::name!("ExitSignal"), i64::from(s));
        }
        None => {
            ad.insert_value(classad::name!("ExitBySignal"), false);
            ad.insert_value(classad::name!("ExitCode"), i64::from(code));
        }
    }
    ad
}

/// Sends `s` to process `pid`.
fn send(pid: Option<u32>, s: Signal) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
        let sig = match s {
            Signal::Term => rustix::process::Signal::TERM,
            Signal::Kill => rustix::process::Signal::KILL,
        };
        let _ = rustix::process::kill_process(pid, sig);
    }
    #[cfg(not(unix))]
    let _ = (pid, s);
}
