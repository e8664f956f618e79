//! `andes submit`: expand a submit description into job ads and queue them at the
//! schedd (or, with `--dump`, print them).

use std::path::PathBuf;
use std::process::ExitCode;

use andes_submit::{Context as SubmitContext, expand, parse};
use anyhow::{Context, Result, anyhow};
use clap::Args;

use crate::cmd::client::{self, Session};
use crate::settings::user_name;

/// Arguments of `andes submit`.
#[derive(Args, Debug)]
pub struct SubmitArgs {
    /// The submit description file (`-` for standard input), then any
    /// `name=value` submit commands, applied before the file's first line.
    file: PathBuf,
    /// `name=value`: a submit command applied before the file's first line.
    #[arg(value_name = "NAME=VALUE")]
    defines: Vec<String>,
    /// Use `queue OPTS` in place of the file's last queue statement (or at its
    /// end when it has none), as condor_submit -queue does.
    #[arg(long = "queue", value_name = "OPTS", allow_hyphen_values = true)]
    queue: Option<String>,
    /// Expand and check everything, but submit nothing: write the job ads to
    /// FILE (`-` for standard output), as condor_submit -dry-run does.
    #[arg(long = "dry-run", value_name = "FILE")]
    dry_run: Option<PathBuf>,
    /// An extra submit command, applied before each `queue` statement (repeatable).
    #[arg(short = 'a', long = "append", value_name = "'cmd = value'")]
    append: Vec<String>,
    /// Sets JobBatchName for every job.
    #[arg(long = "batch-name", value_name = "NAME")]
    batch_name: Option<String>,
    /// Print the job ads instead of submitting them (no schedd needed).
    #[arg(long)]
    dump: bool,
    /// With --dump: print JSON (HTCondor's form) instead of old ClassAd syntax.
    #[arg(long, requires = "dump")]
    json: bool,
    /// Send the input files with the jobs (condor_submit -spool): the schedd
    /// keeps them, and the output, in its own spool until you fetch it with
    /// `andes transfer-data`. Needed where the schedd cannot act as you (it
    /// does not run as root, or you have no account on its machine).
    #[arg(long)]
    spool: bool,
    /// Stay until every job of the cluster has completed, been removed or
    /// been held, with a progress bar; the exit status is 1 if any was held
    /// or removed.
    #[arg(long)]
    wait: bool,
}

fn read_description(file: &PathBuf) -> Result<(String, String)> {
    if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
        return Ok((s, "<stdin>".into()));
    }
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read the submit file {}", file.display()))?;
    Ok((text, file.display().to_string()))
}

/// Runs `andes submit`.
pub fn run(args: SubmitArgs) -> Result<ExitCode> {
    let (text, source) = read_description(&args.file)?;
    let desc = parse(&text, &source)?;
    let iwd = std::env::current_dir()?.to_string_lossy().into_owned();
    let now = client::now();
    let context = |cluster: u32| {
        let mut ctx = SubmitContext::new(cluster as i64, now, iwd.clone());
        ctx.owner = user_name();
        ctx.env = std::env::vars().collect();
        ctx.extra_lines = args.append.clone();
        ctx.defines = args.defines.clone();
        ctx.queue = args.queue.clone();
        ctx.batch_name = args.batch_name.clone();
        ctx
    };
    for d in &args.defines {
        if !d.contains('=') {
            return Err(anyhow!(
                "{d:?}: after the submit file, only name=value submit commands may follow"
            ));
        }
    }
    // Checked before the pool is asked for anything: a bad file queues
    // nothing and reserves no cluster, and its warnings show once.
    let checked = expand(&desc, &context(1))?;
    for w in &checked.warnings {
        eprintln!("WARNING: {w}");
    }
    if let Some(out) = &args.dry_run {
        let texts: Vec<String> = checked.jobs.iter().map(|a| a.to_old_syntax()).collect();
        let text = texts.join("\n");
        if out.as_os_str() == "-" {
            out!("{text}");
        } else {
            std::fs::write(out, &text)
                .with_context(|| format!("cannot write the dry run to {}", out.display()))?;
        }
        outln!("Dry-Run {} job(s) would be submitted to cluster 1.", checked.jobs.len());
        return Ok(ExitCode::SUCCESS);
    }
    if args.dump {
        let out = checked;
        if args.json {
            let ads: Vec<serde_json::Value> =
                out.jobs.iter().map(classad::json::ad_to_json).collect();
            outln!("{}", serde_json::to_string_pretty(&ads)?);
        } else {
            let texts: Vec<String> = out.jobs.iter().map(|a| a.to_old_syntax()).collect();
            out!("{}", texts.join("\n"));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let session = Session::open()?;
    session.block_on(async {
        let c = &session.client;
        let cluster = andes_client::submit::reserve_cluster(c).await?;
        let out = expand(&desc, &context(cluster))?;
        let reply = andes_client::submit::queue(c, cluster, out, args.spool, now, |m| {
            eprintln!("andes submit: {m}")
        })
        .await?;
        outln!("{} job(s) submitted to cluster {}.", reply.count, reply.cluster);
        if args.wait {
            return wait_for_cluster(c, reply.cluster, reply.count).await;
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Where a cluster's jobs stand, from the queue and (for those gone from it)
/// the history.
#[derive(Debug, Default, PartialEq)]
struct Progress {
    done: u64,
    removed: u64,
    held: Vec<(String, String)>,
    running: u64,
    idle: u64,
}

impl Progress {
    fn of(ads: &[classad::ClassAd]) -> Progress {
        use andes_schedd::job::JobStatus as S;
        use classad::Value;
        let mut p = Progress::default();
        for ad in ads {
            let int = |n: &str| match ad.eval_attr(n) {
                Value::Int(i) => i,
                _ => -1,
            };
            match S::from_code(int("JobStatus")) {
                Some(S::Completed) => p.done += 1,
                Some(S::Removed) => p.removed += 1,
                Some(S::Held) => {
                    let reason = match ad.eval_attr("HoldReason") {
                        Value::Str(s) => s.to_string(),
                        _ => String::new(),
                    };
                    p.held.push((format!("{}.{}", int("ClusterId"), int("ProcId")), reason));
                }
                Some(S::Running | S::TransferringOutput | S::Suspended) => p.running += 1,
                Some(S::Idle) | None => p.idle += 1,
            }
        }
        p
    }

    fn over(&self) -> bool {
        self.running == 0 && self.idle == 0
    }

    fn line(&self) -> String {
        format!(
            "{} done, {} running, {} idle, {} held, {} removed",
            self.done,
            self.running,
            self.idle,
            self.held.len(),
            self.removed
        )
    }
}

/// `andes submit --wait`: follows cluster `cluster` (`count` jobs) until
/// none is idle or running.
async fn wait_for_cluster(
    c: &andes_protocol::Client,
    cluster: u32,
    count: u32,
) -> Result<ExitCode> {
    use crate::cmd::q::parse_ads;
    use andes_schedd::api::{HistoryRequest, QueryRequest, Targets};
    use andes_schedd::job::JobSelector;
    let projection: Vec<String> =
        ["ClusterId", "ProcId", "JobStatus", "HoldReason"].map(String::from).into();
    let bar = indicatif::ProgressBar::new(u64::from(count));
    bar.set_style(
        indicatif::ProgressStyle::with_template("cluster {prefix} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(cluster.to_string());
    let progress = loop {
        let q = QueryRequest {
            targets: Targets { ids: vec![JobSelector::Cluster(cluster)], ..Default::default() },
            projection: projection.clone(),
            ..Default::default()
        };
        let mut ads = parse_ads(&c.call(http::Method::POST, "/v1/query", Some(&q)).await?)?;
        if ads.len() < count as usize {
            let h = HistoryRequest {
                constraint: Some(format!("ClusterId == {cluster}")),
                projection: projection.clone(),
                ..Default::default()
            };
            let proc = |a: &classad::ClassAd| a.eval_attr("ProcId");
            let queued: Vec<classad::Value> = ads.iter().map(proc).collect();
            let gone = parse_ads(&c.call(http::Method::POST, "/v1/history", Some(&h)).await?)?;
            ads.extend(gone.into_iter().filter(|a| !queued.contains(&proc(a))));
        }
        let p = Progress::of(&ads);
        bar.set_position(p.done + p.removed + p.held.len() as u64);
        bar.set_message(p.line());
        if p.over() && ads.len() >= count as usize {
            break p;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    };
    bar.finish_and_clear();
    outln!("Cluster {cluster}: {}.", progress.line());
    for (id, why) in &progress.held {
        outln!("Job {id} is held: {why}");
    }
    Ok(if progress.held.is_empty() && progress.removed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
