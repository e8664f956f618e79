//! `andes submit-dag` (condor_submit_dag): checks a DAG whole, then queues
//! its DAGMan as a job of the schedd (the scheduler universe), which runs it
//! on the submit machine as you: it survives this terminal, `andes q` shows
//! it with its nodes, `andes rm` of it removes them and writes a rescue DAG,
//! `andes hold` stops it (its running nodes go on) until `andes release`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use andes_dagman::{DagFiles, Options, prepare};
use andes_schedd::scheduler::{DAG_ENV, DAG_FILE};
use anyhow::{Context, Result, bail};
use clap::Args;
use classad::{ClassAd, Value};

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
    /// The most idle node jobs at once: accepted and not yet applied (a
    /// warning says so).
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
}

/// The environment a DAGMan job takes from its submitter: what finds the
/// pool and the user's key, and what its scripts run with.
const KEPT_ENV: &[&str] =
    &["ANDES_CONFIG", "ANDES_CONFIG_DIR", "USER", "LOGNAME", "HOME", "PATH", "LANG", "TZ"];

/// Runs `andes submit-dag`.
pub fn run(args: SubmitDagArgs) -> Result<ExitCode> {
    let dag = std::path::absolute(&args.dag)?;
    let files = DagFiles::of(&dag);
    if args.max_idle.is_some() {
        eprintln!("WARNING: -maxidle is not applied by andes yet: use -maxjobs");
    }
    if files.lock.exists() && !args.recover {
        bail!(
            "{} exists: a DAGMan of this DAG may be running (andes q shows it); if it is not, \
             submit with -DoRecov to recover it",
            files.lock.display()
        );
    }
    if args.force {
        set_rescues_aside(&dag)?;
    }
    // Checked whole before anything is queued, as DAGMan will read it.
    let mut opts = Options::new(&dag, "andes");
    opts.use_dag_dir = args.use_dag_dir;
    let prepared = prepare(&opts)?;
    for w in &prepared.dag.warnings {
        eprintln!("WARNING: {w}");
    }
    let mut dagman_args: Vec<String> = Vec::new();
    let mut opt = |name: &str, v: Option<String>| {
        if let Some(v) = v {
            dagman_args.push(format!("--{name}"));
            dagman_args.push(v);
        }
    };
    opt("maxjobs", args.max_jobs.map(|v| v.to_string()));
    opt("maxpre", args.max_pre.map(|v| v.to_string()));
    opt("maxpost", args.max_post.map(|v| v.to_string()));
    opt("script-timeout", args.script_timeout.map(|v| v.to_string()));
    if let Some(b) = &args.batch_name {
        if b.split_whitespace().count() != 1 {
            bail!("-batch-name: one word, please ({b:?})");
        }
        opt("batch-name", Some(b.clone()));
    }
    for (flag, on) in [
        ("--AlwaysRunPost", args.always_run_post),
        ("--usedagdir", args.use_dag_dir),
        ("--DoRecov", args.recover),
    ] {
        if on {
            dagman_args.push(flag.into());
        }
    }
    let iwd = std::env::current_dir()?;
    // ENV GET: the DAG's own picks from this environment go with it too.
    let mut keep: Vec<String> = KEPT_ENV.iter().map(|k| k.to_string()).collect();
    for e in &prepared.dag.env {
        if let andes_dagman::dag::EnvCommand::Get(names) = e {
            keep.extend(names.iter().cloned());
        }
    }
    let mut ad = dagman_ad(&dag, &iwd, &dagman_args, args.batch_name.as_deref(), &keep);
    let with_ext = |ext: &str| {
        let mut s = dag.as_os_str().to_owned();
        s.push(ext);
        PathBuf::from(s)
    };
    let sub = with_ext(".condor.sub");
    println!("-----------------------------------------------------------------------");
    println!("File for submitting this DAG to andes           : {}", name_of(&sub));
    println!("Log of DAGMan debugging messages                : {}", name_of(&files.out));
    println!(
        "Log of DAGMan's output                          : {}",
        name_of(&with_ext(".lib.out"))
    );
    println!(
        "Log of DAGMan's error messages                  : {}",
        name_of(&with_ext(".lib.err"))
    );
    println!(
        "Log of the life of DAGMan itself                : {}",
        name_of(&with_ext(".dagman.log"))
    );
    println!();
    if args.no_submit {
        std::fs::write(&sub, format!("{}\n", ad.to_old_syntax()))
            .with_context(|| format!("cannot write {}", sub.display()))?;
        println!("-no_submit given, not submitting DAG to andes.  You can do this with:");
        println!("andes submit-dag {}", args.dag.display());
        println!("-----------------------------------------------------------------------");
        return Ok(ExitCode::SUCCESS);
    }
    let session = Session::open()?;
    let reply = session.block_on(async {
        let c = &session.client;
        let cluster = andes_client::submit::reserve_cluster(c).await?;
        ad.insert_value("ClusterId", i64::from(cluster));
        if args.batch_name.is_none() {
            ad.insert_value("JobBatchName", format!("{}+{cluster}", name_of(&dag)));
        }
        let req = andes_schedd::api::SubmitRequest {
            cluster: Some(cluster),
            cluster_ad: ad.to_string(),
            procs: vec!["[ProcId = 0]".into()],
        };
        let r: andes_schedd::api::SubmitReply =
            c.call(http::Method::POST, "/v1/submit", Some(&req)).await?;
        anyhow::Ok(r)
    })?;
    std::fs::write(&sub, format!("{}\n", ad.to_old_syntax()))
        .with_context(|| format!("cannot write {}", sub.display()))?;
    println!("Submitting job(s).");
    println!("{} job(s) submitted to cluster {}.", reply.count, reply.cluster);
    println!("-----------------------------------------------------------------------");
    Ok(ExitCode::SUCCESS)
}

fn name_of(p: &Path) -> String {
    p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The DAGMan job's ad (without its cluster).
fn dagman_ad(
    dag: &Path,
    iwd: &Path,
    args: &[String],
    batch: Option<&str>,
    keep: &[String],
) -> ClassAd {
    let base = name_of(dag);
    let mut ad = ClassAd::new();
    ad.insert_value("JobUniverse", 7i64);
    ad.insert_value("Cmd", "condor_dagman");
    ad.insert_value(DAG_FILE, dag.to_string_lossy().as_ref());
    ad.insert_value("Arguments", args.join(" "));
    ad.insert_value("Iwd", iwd.to_string_lossy().as_ref());
    ad.insert_value("Out", format!("{}.lib.out", dag.display()));
    ad.insert_value("Err", format!("{}.lib.err", dag.display()));
    ad.insert_value("UserLog", format!("{}.dagman.log", dag.display()));
    ad.insert_value("JobStatus", 1i64);
    ad.insert_value("KillSig", "SIGTERM");
    if let Some(b) = batch {
        ad.insert_value("JobBatchName", b);
    }
    if let Some(o) = user_name() {
        ad.insert_value("Owner", o.as_str());
    }
    ad.insert_value("QDate", client::now());
    ad.insert_value("DAGManDagName", base.as_str());
    let env: Vec<Value> = keep
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| Value::string(format!("{k}={v}"))))
        .collect();
    ad.insert_value(DAG_ENV, Value::list(env));
    ad
}

/// `-force`: the rescue DAGs of an earlier run are renamed `.old`, so the
/// DAG runs from its start.
fn set_rescues_aside(dag: &Path) -> Result<()> {
    while let Some((_, p)) = andes_dagman::dag::rescue::newest_rescue(dag) {
        let mut old = p.clone().into_os_string();
        old.push(".old");
        std::fs::rename(&p, &old).with_context(|| format!("cannot rename {}", p.display()))?;
    }
    Ok(())
}
