//! `andes dagman`: runs a DAG workflow against the pool, in this process, as
//! HTCondor's `condor_dagman` does (see `andes-dagman`): its node jobs go to
//! the configured schedd as you, its scripts run as you, and its files
//! (`<dag>.dagman.out`, `<dag>.nodes.log`, `<dag>.metrics`, rescue DAGs)
//! are written beside the DAG file. Interrupted (Ctrl-C, SIGTERM), it
//! removes its node jobs, runs the FINAL node and writes a rescue DAG; killed
//! outright, run again it recovers from its node log.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use andes_dagman::{Options, prepare};
use anyhow::Result;
use clap::Args;

use crate::cmd::client::Session;
use crate::settings::user_name;

/// Arguments of `andes dagman`.
#[derive(Args, Debug)]
pub struct DagmanArgs {
    /// The DAG input file.
    dag: PathBuf,
    /// The most node jobs in the queue at once (0, the default: no limit).
    #[arg(long = "maxjobs", value_name = "N")]
    max_jobs: Option<u32>,
    /// No node job is submitted while this many are idle (default 1000;
    /// 0: no limit).
    #[arg(long = "maxidle", value_name = "N")]
    max_idle: Option<u32>,
    /// The most PRE scripts running at once (default 20; 0: no limit).
    #[arg(long = "maxpre", value_name = "N")]
    max_pre: Option<u32>,
    /// The most POST scripts running at once (default 20; 0: no limit).
    #[arg(long = "maxpost", value_name = "N")]
    max_post: Option<u32>,
    /// Run a node's POST script even when its PRE script failed.
    #[arg(long = "AlwaysRunPost")]
    always_run_post: bool,
    /// Paths in the DAG file are relative to its own directory.
    #[arg(long = "usedagdir")]
    use_dag_dir: bool,
    /// JobBatchName of every node job (default: the DAG file's name).
    #[arg(long = "batch-name", value_name = "NAME")]
    batch_name: Option<String>,
    /// Recover from the node log (also done when a stale lock is found).
    #[arg(long = "DoRecov")]
    recover: bool,
    /// Seconds a PRE or POST script may run before it is killed (and fails).
    #[arg(long = "script-timeout", value_name = "SECONDS", default_value_t = 3600)]
    script_timeout: u64,
    /// 1 (the default): run the newest rescue DAG over the DAG; 0: run the
    /// DAG from its start.
    #[arg(long = "autorescue", value_name = "0|1", default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
    autorescue: u8,
    /// The directory `<dag>.dagman.out` is written to (default: the DAG
    /// file's).
    #[arg(long = "outfile_dir", value_name = "DIR")]
    outfile_dir: Option<PathBuf>,
    /// The DAGMan job's cluster (`DAGManJobId` of the node jobs).
    #[arg(long = "dagman-job-id", value_name = "CLUSTER", hide = true)]
    dagman_job_id: Option<u32>,
    /// End at once, cleaning nothing up, when the process that started this
    /// one ends (how the schedd runs a DAGMan job: a schedd killed outright
    /// takes its DAGMen with it, and the next one starts them again, in
    /// recovery).
    #[arg(long = "exit-with-parent", hide = true)]
    exit_with_parent: bool,
}

/// Ends this process when its parent ends (see `--exit-with-parent`).
fn exit_with_parent() {
    #[cfg(unix)]
    {
        let parent = std::os::unix::process::parent_id();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(250));
                if std::os::unix::process::parent_id() != parent {
                    // The lock stays: the next DAGMan of this DAG recovers.
                    std::process::exit(3);
                }
            }
        });
    }
}

/// Runs `andes dagman`.
pub fn run(args: DagmanArgs) -> Result<ExitCode> {
    if args.exit_with_parent {
        exit_with_parent();
    }
    let mut opts = Options::new(&args.dag, std::env::current_exe()?);
    opts.use_dag_dir = args.use_dag_dir;
    opts.batch_name = args.batch_name;
    opts.recover = args.recover;
    opts.script_timeout = Duration::from_secs(args.script_timeout.max(1));
    opts.dagman_job_id = args.dagman_job_id;
    opts.owner = user_name();
    opts.autorescue = args.autorescue == 1;
    opts.outfile_dir = args.outfile_dir;
    // Everything is read and checked before the pool is asked for anything.
    let prepared = prepare(&opts)?;
    for w in &prepared.dag.warnings {
        eprintln!("WARNING: {w}");
    }
    // The command line, then the DAG's CONFIG file, then the defaults.
    let k = &prepared.knobs;
    opts.run.max_jobs = args.max_jobs.or(k.max_jobs).unwrap_or(opts.run.max_jobs);
    opts.run.max_pre = args.max_pre.or(k.max_pre).unwrap_or(opts.run.max_pre);
    opts.run.max_post = args.max_post.or(k.max_post).unwrap_or(opts.run.max_post);
    opts.max_idle = args.max_idle.or(k.max_idle).unwrap_or(opts.max_idle);
    opts.max_job_holds = k.max_job_holds.unwrap_or(opts.max_job_holds);
    opts.prohibit_multi_jobs = k.prohibit_multi_jobs.unwrap_or(false);
    opts.run.always_run_post = args.always_run_post || k.always_run_post.unwrap_or(false);
    for n in &k.not_applied {
        eprintln!("WARNING: the DAG's CONFIG file sets {n}, which andes dagman does not apply");
    }
    let session = Session::open()?;
    let outcome = session.block_on(async {
        // Ctrl-C or SIGTERM (andes rm of the DAGMan job) is its removal.
        let removed = crate::cmd::stop_signal();
        andes_dagman::run(&prepared, &opts, &session.client, removed).await
    })?;
    // What is said here goes to a reader that may have stopped early
    // (`| head -1`): a closed pipe ends the saying, not the process.
    let mut said = format!(
        "DAG {} ended: DAG_Status {}, exit {}{}.\n",
        opts.dag_file.display(),
        outcome.status as i32,
        outcome.exit,
        if outcome.recovered { " (recovered)" } else { "" }
    );
    if let Some(r) = &outcome.rescue {
        said.push_str(&format!(
            "Rescue DAG: {} (submit the DAG again to run what is left).\n",
            r.display()
        ));
    }
    said.push_str(&format!("Progress: {}.dagman.out\n", opts.dag_file.display()));
    let mut stdout = std::io::stdout().lock();
    let _ = std::io::Write::write_all(&mut stdout, said.as_bytes())
        .and_then(|()| std::io::Write::flush(&mut stdout));
    Ok(ExitCode::from(outcome.exit.clamp(0, 255) as u8))
}
