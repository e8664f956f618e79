//! `andes transfer-data` (condor_transfer_data): fetches the output of jobs
//! submitted with `andes submit --spool` from the schedd's spool into their
//! directories, appends their event logs, and lets completed ones leave the
//! queue.

use std::io::Write;
use std::process::ExitCode;

use andes_scheduler::api::{
    ChangeReport, QueryReply, QueryRequest, TransferDoneRequest, TransferReply,
};
use andes_scheduler::job::JobId;
use andes_scheduler::transfer;
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;

use crate::cmd::client::Session;
use crate::cmd::q::selection;

/// Arguments of `andes transfer-data`.
#[derive(Args, Debug)]
pub struct TransferArgs {
    /// Job ids (`C.P`) or clusters (`C`); with none, every spooled job of
    /// yours that has completed.
    selection: Vec<String>,
    /// Every spooled job of yours, completed or not (what each has so far).
    #[arg(long)]
    all: bool,
}

/// Runs `andes transfer-data`.
pub fn run(args: TransferArgs) -> Result<ExitCode> {
    let mut targets = selection(&args.selection)?;
    if !targets.owners.is_empty() {
        bail!("name jobs by id or cluster; owners are not accepted here");
    }
    // With no ids, your own jobs: the schedd knows you by your key's name.
    if targets.ids.is_empty() {
        let me = crate::settings::Settings::load()?.get("KEY_NAME")?;
        targets.owners = me.into_iter().collect();
    }
    let mut constraint = format!("{} =!= undefined", transfer::SPOOLED_INPUT);
    if targets.ids.is_empty() && !args.all {
        constraint.push_str(" && JobStatus == 4");
    }
    targets.constraint = Some(constraint);
    let session = Session::open()?;
    session.block_on(async {
        let c = &session.client;
        let req = QueryRequest {
            targets,
            projection: vec!["ClusterId".into(), "ProcId".into()],
            limit: None,
            mine: false,
        };
        let found: QueryReply = c.call(http::Method::POST, "/v1/query", Some(&req)).await?;
        let mut ids = Vec::new();
        for text in &found.ads {
            let ad = classad::parse_ad(text).map_err(|e| anyhow!("the schedd's answer: {e}"))?;
            match (ad.eval_attr("ClusterId"), ad.eval_attr("ProcId")) {
                (classad::Value::Int(c), classad::Value::Int(p)) => {
                    ids.push((JobId::new(c as u32, p as u32), transfer::input_limit(&ad)))
                }
                _ => bail!("the schedd's answer names a job without ClusterId and ProcId"),
            }
        }
        if ids.is_empty() {
            println!("No spooled job to fetch.");
            return Ok(ExitCode::SUCCESS);
        }
        let mut fetched = Vec::new();
        for (id, limit) in ids {
            let got = transfer::fetch_spooled(c, id, limit).await.map_err(|e| anyhow!(e))?;
            let r = &got.reply;
            let ad = classad::parse_ad(&r.ad).map_err(|e| anyhow!("job {id}'s ad: {e}"))?;
            let mut staged = got.staged.open().map_err(|e| anyhow!(e))?;
            write_output(&ad, r, &mut staged).with_context(|| format!("job {id}"))?;
            println!("Fetched the output of job {id} ({} files).", r.files.len());
            fetched.push(id);
        }
        let done: ChangeReport = c
            .call(
                http::Method::POST,
                "/v1/transfer/done",
                Some(&TransferDoneRequest { jobs: fetched }),
            )
            .await?;
        for (id, why) in &done.skipped {
            eprintln!("job {id}: {why}");
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Writes a spooled job's output where it would have gone without `--spool`:
/// its streams to `Out` and `Err`, other files into `Iwd`, its events
/// appended to its `UserLog`.
fn write_output(
    ad: &classad::ClassAd,
    r: &TransferReply,
    staged: &mut std::collections::HashMap<String, std::fs::File>,
) -> Result<()> {
    transfer::write_outputs(ad, &r.files, staged).map_err(|e| anyhow!(e))?;
    if !r.log.is_empty()
        && let Some(path) = andes_scheduler::eventlog::log_path(ad)
    {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening the job's log {}", path.display()))?;
        f.write_all(r.log.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
