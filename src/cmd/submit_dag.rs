//! `andes submit-dag` (condor_submit_dag): checks a DAG whole, then queues
//! its DAGMan as a job of the schedd (the scheduler universe), which runs it
//! on the submit machine as you: it survives this terminal, `andes q` shows
//! it with its nodes, `andes rm` of it removes them and writes a rescue DAG,
//! `andes hold` stops it (its running nodes go on) until `andes release`.

use std::path::PathBuf;
use std::process::ExitCode;

use andes_dagman::DagFiles;
use andes_dagman::submit::{SubmitDag, dagman_job, file_name, queue, write_condor_sub};
use anyhow::Result;
use clap::Args;

use crate::cmd::client::{self, Session};
use crate::settings::user_name;

/// Arguments of `andes submit-dag`.
#[derive(Args, Debug)]
pub struct SubmitDagArgs {
    /// The DAG input file.
    dag: PathBuf,
    /// The most node jobs in the queue at once (0: no limit).
    #[arg(long = "maxjobs", value_name = "N")]
    max_jobs: Option<u32>,
    /// No node job is submitted while this many are idle (default 1000).
    #[arg(long = "maxidle", value_name = "N")]
    max_idle: Option<u32>,
    /// The most PRE scripts running at once (default 20).
    #[arg(long = "maxpre", value_name = "N")]
    max_pre: Option<u32>,
    /// The most POST scripts running at once (default 20).
    #[arg(long = "maxpost", value_name = "N")]
    max_post: Option<u32>,
    /// Run a node's POST script even when its PRE script failed.
    #[arg(long = "AlwaysRunPost")]
    always_run_post: bool,
    /// Paths in the DAG file are relative to its own directory.
    #[arg(long = "usedagdir")]
    use_dag_dir: bool,
    /// JobBatchName of the DAGMan job and its nodes.
    #[arg(long = "batch-name", value_name = "NAME")]
    batch_name: Option<String>,
    /// Start the DAG afresh: rescue DAGs of an earlier run are set aside
    /// (renamed `.old`) and an earlier run's files are replaced.
    #[arg(short = 'f', long = "force")]
    force: bool,
    /// Check everything and write the DAGMan job's ad to `<dag>.condor.sub`,
    /// but queue nothing.
    #[arg(long = "no_submit")]
    no_submit: bool,
    /// Recover from the node log, as after a crash.
    #[arg(long = "DoRecov")]
    recover: bool,
    /// Accepted for HTCondor's scripts: every node job's events always go
    /// to `<dag>.nodes.log` too, as DAGMan reads them there.
    #[arg(long = "dont_use_default_node_log")]
    dont_use_default_node_log: bool,
    /// Seconds a PRE or POST script may run before it is killed (and fails).
    #[arg(long = "script-timeout", value_name = "SECONDS")]
    script_timeout: Option<u64>,
    /// Say more of what is done (HTCondor's -verbose).
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// The DAGMan job's own e-mail notification (Never, Error, Complete,
    /// Always), as its `notification` submit command: recorded in its
    /// `JobNotification`. (andes sends no e-mail.)
    #[arg(long = "notification", value_name = "VALUE")]
    notification: Option<String>,
    /// Accepted for HTCondor's scripts: node jobs send no e-mail (andes
    /// sends none).
    #[arg(long = "suppress_notification")]
    suppress_notification: bool,
    /// Accepted for HTCondor's scripts (andes sends no e-mail).
    #[arg(long = "dont_suppress_notification")]
    dont_suppress_notification: bool,
    /// 1 (the default): the newest rescue DAG is run over the DAG; 0: the
    /// DAG runs from its start.
    #[arg(long = "autorescue", value_name = "0|1", value_parser = clap::value_parser!(u8).range(0..=1))]
    autorescue: Option<u8>,
    /// The directory `<dag>.dagman.out` is written to (default: the DAG
    /// file's).
    #[arg(long = "outfile_dir", value_name = "DIR")]
    outfile_dir: Option<PathBuf>,
    /// The DAGMan job takes this whole environment (its scripts and node
    /// submits see it), not only what finds the pool, the user and PATH.
    #[arg(long = "import_env")]
    import_env: bool,
    /// Accepted for HTCondor's scripts: `<dag>.condor.sub` is always
    /// written anew.
    #[arg(long = "update_submit")]
    update_submit: bool,
    /// Accepted for HTCondor's scripts: a sub-DAG's files are checked when
    /// this DAG is, and its `.condor.sub` is written when it is queued.
    #[arg(long = "do_recurse")]
    do_recurse: bool,
    /// Accepted for HTCondor's scripts: there is one andes, so no version to
    /// mismatch.
    #[arg(long = "allowversionmismatch")]
    allow_version_mismatch: bool,
    /// Accepted for HTCondor's scripts: a node's log is always read through
    /// `<dag>.nodes.log`, which DAGMan checks itself.
    #[arg(long = "allowlogerror")]
    allow_log_error: bool,
    /// A submit command added to the DAGMan job's description (repeatable):
    /// `-append '+AccountingGroup = "physics"'`, `-append 'priority = 5'`.
    #[arg(long = "append", value_name = "COMMAND")]
    append: Vec<String>,
}

/// `dir` made absolute against the current directory (DAGMan runs there too).
fn iwd_join(dir: &std::path::Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// Runs `andes submit-dag`.
pub fn run(args: SubmitDagArgs) -> Result<ExitCode> {
    let o = SubmitDag {
        max_jobs: args.max_jobs,
        max_idle: args.max_idle,
        max_pre: args.max_pre,
        max_post: args.max_post,
        always_run_post: args.always_run_post,
        use_dag_dir: args.use_dag_dir,
        batch_name: args.batch_name.clone(),
        force: args.force,
        recover: args.recover,
        script_timeout: args.script_timeout,
        append: args
            .append
            .iter()
            .cloned()
            .chain(args.notification.iter().map(|n| format!("notification = {n}")))
            .collect(),
        no_autorescue: args.autorescue == Some(0),
        outfile_dir: args.outfile_dir.as_ref().map(|d| iwd_join(d)),
        import_env: args.import_env,
    };
    let iwd = std::env::current_dir()?;
    let owner = user_name();
    if args.verbose {
        eprintln!("andes dagman {}", o.dagman_args()?.join(" "));
    }
    // Checked whole before anything is queued, as DAGMan will read it.
    let mut job = dagman_job(&args.dag, &iwd, owner.as_deref(), &|k| std::env::var(k).ok(), &o)?;
    for w in &job.prepared.dag.warnings {
        eprintln!("WARNING: {w}");
    }
    let files = DagFiles::of(&job.dag);
    let with_ext = |ext: &str| format!("{}{ext}", file_name(&job.dag));
    outln!("-----------------------------------------------------------------------");
    outln!("File for submitting this DAG to andes           : {}", with_ext(".condor.sub"));
    outln!("Log of DAGMan debugging messages                : {}", file_name(&files.out));
    outln!("Log of DAGMan's output                          : {}", with_ext(".lib.out"));
    outln!("Log of DAGMan's error messages                  : {}", with_ext(".lib.err"));
    outln!("Log of the life of DAGMan itself                : {}", with_ext(".dagman.log"));
    outln!();
    if args.no_submit {
        write_condor_sub(&job)?;
        outln!("-no_submit given, not submitting DAG to andes.  You can do this with:");
        outln!("andes submit-dag {}", args.dag.display());
        outln!("-----------------------------------------------------------------------");
        return Ok(ExitCode::SUCCESS);
    }
    let session = Session::open()?;
    let cluster = session.block_on(queue(&session.client, &mut job, client::now()))?;
    outln!("Submitting job(s).");
    outln!("1 job(s) submitted to cluster {cluster}.");
    outln!("-----------------------------------------------------------------------");
    Ok(ExitCode::SUCCESS)
}
