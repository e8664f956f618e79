//! `andes transfer-data` (condor_transfer_data): fetches the output of jobs
//! submitted with `andes submit --spool` from the schedd's spool into their
//! directories, appends their event logs, and lets completed ones leave the
//! queue. The fetch is `andes_client::transfer`'s, as Python's
//! `Schedd.retrieve` makes it.
//!
//! A job's files go where its ad says only when the job is the caller's
//! own: paths in someone else's ad are theirs to choose, and writing there
//! with the caller's rights (an admin's, root's) would let them choose what
//! the caller overwrites. Anyone else's job is fetched with `--dir DIR`,
//! into that directory, under names of the job's (`C.P.out`, `C.P.err`,
//! `C.P.log`, its other files by their own names), with no link followed.

use std::process::ExitCode;

use andes_client::transfer::{Retrieve, retrieve};
use anyhow::{Result, bail};
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
    let targets = selection(&args.selection)?;
    let me = crate::settings::Settings::load()?.get("KEY_NAME")?;
    if !targets.owners.is_empty() {
        bail!("name jobs by id or cluster; owners are not accepted here");
    }
    let what = Retrieve {
        ids: targets.ids,
        constraint: None,
        all: args.all,
        dir: args.dir,
        dir_hint: Some("give `--dir DIR` to write it into a directory of yours".into()),
    };
    let session = Session::open()?;
    let got = session.block_on(retrieve(&session.client, me.as_deref(), &what, |f| {
        if let Some(into) = &f.into {
            outln!("Wrote the output of job {} into {}.", f.id, into.display());
        }
        outln!("Fetched the output of job {} ({} files).", f.id, f.files);
    }))?;
    if got.fetched.is_empty() {
        outln!("No spooled job to fetch.");
    }
    for (id, why) in &got.kept {
        eprintln!("job {id}: {why}");
    }
    Ok(ExitCode::SUCCESS)
}
