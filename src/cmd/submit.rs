//! `andes submit`: expand a submit description into job ads and queue them at the
//! schedd (or, with `--dump`, print them).

use std::path::PathBuf;
use std::process::ExitCode;

use andes_scheduler::api::{NewClusterReply, SubmitReply, SubmitRequest};
use andes_scheduler::queue::factor;
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

/// Sends the submit, again if its answer is lost on the way (a timeout, a
/// cut connection, a schedd restarting): the schedd recognises the same
/// submit to the same reserved cluster and answers as the first time, so a
/// retry never queues the jobs twice.
async fn submit_retrying(c: &andes_protocol::Client, req: &SubmitRequest) -> Result<SubmitReply> {
    use andes_protocol::client::ClientErrorKind as K;
    let mut wait = std::time::Duration::from_millis(250);
    for attempt in 1.. {
        match c.call::<_, SubmitReply>(http::Method::POST, "/v1/submit", Some(req)).await {
            Ok(r) => return Ok(r),
            Err(e)
                if attempt < 6
                    && matches!(
                        e.kind,
                        K::Timeout(_) | K::Connect(_) | K::Refused(_) | K::Http(_)
                    ) =>
            {
                eprintln!("andes submit: {e}; trying again in {wait:?}");
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            Err(e) => return Err(e.into()),
        }
    }
    unreachable!("the loop returns")
}

/// Uploads every job's input files (read here, with the user's own rights)
/// and names them in the job's `SpooledInput`, as condor_submit -spool does;
/// the jobs then stay in the queue once completed until their output is
/// fetched (`LeaveJobInQueue`).
async fn spool_inputs(
    c: &andes_protocol::Client,
    jobs: &mut [classad::ClassAd],
    now: i64,
) -> Result<()> {
    use andes_scheduler::transfer;
    let mut sent = std::collections::HashSet::new();
    for (i, job) in jobs.iter_mut().enumerate() {
        let files = transfer::input_files(job).map_err(|e| anyhow!("job {i}: {e}"))?;
        let inputs = transfer::read_files(&files, transfer::input_limit(job))
            .map_err(|e| anyhow!("job {i}: {e}"))?;
        transfer::spool_inputs(c, job, inputs, &mut sent, now)
            .await
            .map_err(|e| anyhow!("job {i}: {e}"))?;
    }
    Ok(())
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
            print!("{text}");
        } else {
            std::fs::write(out, &text)
                .with_context(|| format!("cannot write the dry run to {}", out.display()))?;
        }
        println!("Dry-Run {} job(s) would be submitted to cluster 1.", checked.jobs.len());
        return Ok(ExitCode::SUCCESS);
    }
    if args.dump {
        let out = checked;
        if args.json {
            let ads: Vec<serde_json::Value> =
                out.jobs.iter().map(classad::json::ad_to_json).collect();
            println!("{}", serde_json::to_string_pretty(&ads)?);
        } else {
            let texts: Vec<String> = out.jobs.iter().map(|a| a.to_old_syntax()).collect();
            print!("{}", texts.join("\n"));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let session = Session::open()?;
    session.block_on(async {
        let c = &session.client;
        let NewClusterReply { cluster } =
            c.call(http::Method::POST, "/v1/cluster", None::<&()>).await?;
        let mut out = expand(&desc, &context(cluster))?;
        if args.spool {
            spool_inputs(c, &mut out.jobs, now).await?;
        }
        for m in &out.modules {
            let path = format!("/v1/modules/{}", m.digest);
            let have = c.get(&path).await?;
            if have.status == http::StatusCode::NOT_FOUND {
                // A streamed body, written to disk by the schedd as it arrives.
                let r =
                    c.upload_bytes(http::Method::PUT, &path, m.bytes.clone().into(), &[]).await?;
                if !r.status.is_success() {
                    return Err(anyhow!(
                        "uploading {} failed: {}",
                        m.path,
                        r.error_reason().unwrap_or_else(|| r.status.to_string())
                    ));
                }
            } else if !have.status.is_success() {
                return Err(client::status_error(&have));
            }
        }
        let s = factor(out.jobs);
        let req = SubmitRequest {
            cluster: Some(cluster),
            cluster_ad: s.cluster_ad.to_string(),
            procs: s.procs.iter().map(|p| p.to_string()).collect(),
        };
        let reply = submit_retrying(c, &req).await?;
        println!("{} job(s) submitted to cluster {}.", reply.count, reply.cluster);
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
        use andes_scheduler::job::JobStatus as S;
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
    use andes_scheduler::api::{HistoryRequest, QueryRequest, Targets};
    use andes_scheduler::job::JobSelector;
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
    println!("Cluster {cluster}: {}.", progress.line());
    for (id, why) in &progress.held {
        println!("Job {id} is held: {why}");
    }
    Ok(if progress.held.is_empty() && progress.removed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
