//! `andes transfer-data` (condor_transfer_data): fetches the output of jobs
//! submitted with `andes submit --spool` from the schedd's spool into their
//! directories, appends their event logs, and lets completed ones leave the
//! queue.
//!
//! A job's files go where its ad says only when the job is the caller's
//! own: paths in someone else's ad are theirs to choose, and writing there
//! with the caller's rights (an admin's, root's) would let them choose what
//! the caller overwrites. Anyone else's job is fetched with `--dir DIR`,
//! into that directory, under names of the job's (`C.P.out`, `C.P.err`,
//! `C.P.log`, its other files by their own names), with no link followed.

use std::io::Write;
use std::process::ExitCode;

use andes_schedd::api::{
    ChangeReport, QueryReply, QueryRequest, TransferDoneRequest, TransferReply,
};
use andes_schedd::job::JobId;
use andes_schedd::transfer;
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
    /// Write each job's files into this directory (under `C.P/`) rather
    /// than where its ad says; needed for another user's jobs.
    #[arg(long, value_name = "DIR")]
    dir: Option<std::path::PathBuf>,
}

/// Runs `andes transfer-data`.
pub fn run(args: TransferArgs) -> Result<ExitCode> {
    let mut targets = selection(&args.selection)?;
    let me = crate::settings::Settings::load()?.get("KEY_NAME")?;
    if !targets.owners.is_empty() {
        bail!("name jobs by id or cluster; owners are not accepted here");
    }
    // With no ids, your own jobs: the schedd knows you by your key's name.
    if targets.ids.is_empty() {
        targets.owners = me.clone().into_iter().collect();
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
        if ids.is_empty() && !args.selection.is_empty() {
            bail!(
                "none of {} is a job submitted with --spool that you may fetch (the output \
                 of a spooled job is its owner's)",
                args.selection.join(", ")
            );
        }
        if ids.is_empty() {
            outln!("No spooled job to fetch.");
            return Ok(ExitCode::SUCCESS);
        }
        let mut fetched = Vec::new();
        for (id, limit) in ids {
            let got = transfer::fetch_spooled(c, id, limit).await.map_err(|e| anyhow!(e))?;
            let r = &got.reply;
            let ad = classad::parse_ad(&r.ad).map_err(|e| anyhow!("job {id}'s ad: {e}"))?;
            let mut staged = got.staged.open().map_err(|e| anyhow!(e))?;
            let owner = match ad.eval_attr("Owner") {
                classad::Value::Str(o) => o.to_string(),
                _ => String::new(),
            };
            match &args.dir {
                Some(dir) => write_into(dir, id, r, &mut staged),
                None if me.as_deref() == Some(owner.as_str()) => write_output(&ad, r, &mut staged),
                None => bail!(
                    "job {id} belongs to {owner}: its output goes where its ad says only when \
                     its owner fetches it; run `andes transfer-data` as {owner}, or give \
                     `--dir DIR` to write it into a directory of yours"
                ),
            }
            .with_context(|| format!("job {id}"))?;
            outln!("Fetched the output of job {id} ({} files).", r.files.len());
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
        && let Some(path) = andes_schedd::eventlog::log_path(ad)
    {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let mut o = std::fs::OpenOptions::new();
        o.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW);
        let mut f =
            o.open(&path).with_context(|| format!("opening the job's log {}", path.display()))?;
        if !f.metadata()?.is_file() {
            bail!("the job's log {} is not a regular file", path.display());
        }
        f.write_all(r.log.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Writes a spooled job's output beneath `dir`, in `C.P/`: its streams as
/// `C.P.out` and `C.P.err`, its other files by their names, its events as
/// `C.P.log`; no link is followed, at any depth.
fn write_into(
    dir: &std::path::Path,
    id: JobId,
    r: &TransferReply,
    staged: &mut std::collections::HashMap<String, std::fs::File>,
) -> Result<()> {
    let root = andes_beneath::Beneath::create(dir)
        .with_context(|| format!("opening {}", dir.display()))?;
    let name = |file: &str| match file {
        andes_schedd::shadow::STDOUT_NAME => format!("{id}/{id}.out"),
        andes_schedd::shadow::STDERR_NAME => format!("{id}/{id}.err"),
        other => format!("{id}/{other}"),
    };
    for f in &r.files {
        let path = name(&f.name);
        let mut out = root.create_file(&path).map_err(|e| anyhow!("{}: {e}", dir.display()))?;
        match (&f.streamed, staged.get_mut(&f.name)) {
            (None, _) => out.write_all(&f.data)?,
            (Some(_), Some(from)) => {
                std::io::copy(from, &mut out)?;
            }
            (Some(_), None) => bail!("{} was not transferred", f.name),
        }
    }
    if !r.log.is_empty() {
        root.write(&format!("{id}/{id}.log"), r.log.as_bytes())
            .map_err(|e| anyhow!("{}: {e}", dir.display()))?;
    }
    outln!("Wrote the output of job {id} into {}.", dir.join(id.to_string()).display());
    Ok(())
}
