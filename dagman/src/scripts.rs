//! PRE and POST scripts: their macros replaced, run as the DAGMan's own
//! process runs (the DAG's owner), in the node's directory, bounded in time.
//!
//! A script is a program on the submit machine (HTCondor's DAG files name
//! shell scripts and binaries); one whose program ends in `.wasm` runs in
//! andes's local sandbox (`andes run`). Its standard output and error go
//! nowhere unless the DAG says `DEBUG file`. A script still running at its
//! timeout is killed and counts as failed (exit [`TIMED_OUT`]); one that
//! exits with its `DEFER` status runs again after the `DEFER` time, and that
//! exit is not its result.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use andes_dag::{DebugStreams, Script};

/// The exit a script killed at its timeout counts as (HTCondor's DAGMan
/// reports a killed script by its signal, negated: SIGKILL).
pub const TIMED_OUT: i32 = -9;

/// The most times one script is deferred before it counts as failed.
pub const MAX_DEFERRALS: u32 = 1_000;

/// What a script's arguments may name: HTCondor's script macros.
#[derive(Clone, Debug, Default)]
pub struct Macros {
    /// `$JOB`: the node's name.
    pub job: String,
    /// `$RETRY`: the node's retries so far.
    pub retry: u32,
    /// `$MAX_RETRIES`.
    pub max_retries: u32,
    /// `$JOBID`: the node's last job, `cluster.proc` (POST only).
    pub job_id: String,
    /// `$RETURN`: the job's exit (POST only).
    pub job_return: i32,
    /// `$PRE_SCRIPT_RETURN` (POST only; -1 without a PRE script).
    pub pre_return: i32,
    /// `$DAG_STATUS`.
    pub dag_status: i32,
    /// `$FAILED_COUNT`.
    pub failed_count: u32,
}

impl Macros {
    /// `arg` with every macro it names replaced (anywhere in it, as
    /// `$JOB.out`); an unknown `$NAME` is left as written.
    pub fn apply(&self, arg: &str) -> String {
        // Longest names first: `$JOB` is a prefix of `$JOBID`.
        let table: [(&str, String); 8] = [
            ("$PRE_SCRIPT_RETURN", self.pre_return.to_string()),
            ("$FAILED_COUNT", self.failed_count.to_string()),
            ("$MAX_RETRIES", self.max_retries.to_string()),
            ("$DAG_STATUS", self.dag_status.to_string()),
            ("$RETURN", self.job_return.to_string()),
            ("$JOBID", self.job_id.clone()),
            ("$RETRY", self.retry.to_string()),
            ("$JOB", self.job.clone()),
        ];
        let mut out = String::with_capacity(arg.len());
        let mut rest = arg;
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let tail = &rest[at..];
            match table.iter().find(|(name, _)| tail.starts_with(name)) {
                Some((name, value)) => {
                    out.push_str(value);
                    rest = &tail[name.len()..];
                }
                None => {
                    out.push('$');
                    rest = &tail[1..];
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// How a script runs.
#[derive(Clone, Debug)]
pub struct Runner {
    /// The `andes` executable, for `.wasm` scripts.
    pub andes: PathBuf,
    /// The longest a script may run.
    pub timeout: Duration,
}

impl Runner {
    /// Runs `script` (its program and `DEBUG` file relative to `dir`) with
    /// `macros`; its exit: the program's code, a signal negated, or
    /// [`TIMED_OUT`]. `Err` when it could not be started at all (that too
    /// is a failure of the script, reported as the DAG's log says).
    pub async fn run(&self, script: &Script, dir: &Path, macros: &Macros) -> Result<i32, String> {
        let mut deferrals = 0;
        loop {
            let code = self.once(script, dir, macros).await?;
            match script.defer {
                Some((status, secs)) if code == status && deferrals < MAX_DEFERRALS => {
                    deferrals += 1;
                    tokio::time::sleep(Duration::from_secs(secs)).await;
                }
                _ => return Ok(code),
            }
        }
    }

    async fn once(&self, script: &Script, dir: &Path, macros: &Macros) -> Result<i32, String> {
        let program = dir.join(&script.program);
        let args: Vec<String> = script.args.iter().map(|a| macros.apply(a)).collect();
        let mut cmd = if script.program.ends_with(".wasm") {
            let mut c = tokio::process::Command::new(&self.andes);
            c.arg("run").arg(&program).arg("--").args(&args);
            c
        } else {
            let mut c = tokio::process::Command::new(&program);
            c.args(&args);
            c
        };
        cmd.current_dir(dir).stdin(Stdio::null()).kill_on_drop(true);
        let (out, err) = match &script.debug {
            Some((file, streams)) => {
                let open = || {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(dir.join(file))
                        .map_err(|e| {
                            format!("{}: the DEBUG file {}: {e}", script.place, file.display())
                        })
                };
                let f = open()?;
                let g = f.try_clone().map_err(|e| format!("{}: {e}", script.place))?;
                match streams {
                    DebugStreams::Stdout => (Stdio::from(f), Stdio::null()),
                    DebugStreams::Stderr => (Stdio::null(), Stdio::from(f)),
                    DebugStreams::All => (Stdio::from(f), Stdio::from(g)),
                }
            }
            None => (Stdio::null(), Stdio::null()),
        };
        cmd.stdout(out).stderr(err);
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("{}: cannot run {}: {e}", script.place, program.display()))?;
        match tokio::time::timeout(self.timeout, child.wait()).await {
            Ok(Ok(status)) => Ok(exit_of(status)),
            Ok(Err(e)) => Err(format!("{}: waiting for {}: {e}", script.place, program.display())),
            Err(_) => {
                kill_group(&mut child).await;
                Ok(TIMED_OUT)
            }
        }
    }
}

/// A process's exit as DAGMan reports it: its code, or its signal negated.
fn exit_of(status: std::process::ExitStatus) -> i32 {
    if let Some(c) = status.code() {
        return c;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(s) = status.signal() {
            return -s;
        }
    }
    -1
}

/// Kills a timed-out script and everything it started (its process group).
async fn kill_group(child: &mut tokio::process::Child) {
    #[cfg(unix)]
    if let Some(pid) = child.id().and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
        // The group the script leads (`process_group(0)`): its children too.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.kill().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macros_are_replaced_anywhere_longest_first() {
        let m = Macros {
            job: "A".into(),
            retry: 2,
            max_retries: 3,
            job_id: "7.0".into(),
            job_return: 5,
            pre_return: -1,
            dag_status: 0,
            failed_count: 1,
        };
        assert_eq!(m.apply("$JOB.out"), "A.out");
        assert_eq!(m.apply("$JOBID"), "7.0");
        assert_eq!(m.apply("$RETRY/$MAX_RETRIES"), "2/3");
        assert_eq!(m.apply("$RETURN $PRE_SCRIPT_RETURN"), "5 -1");
        assert_eq!(m.apply("$DAG_STATUS,$FAILED_COUNT"), "0,1");
        assert_eq!(m.apply("$HOME $ and $$JOB"), "$HOME $ and $A");
    }
}
