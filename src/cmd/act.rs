//! `andes hold`, `andes release`, `andes rm`, `andes vacate-job` and
//! `andes qedit`: changes to queued jobs, by id, cluster, owner or constraint.

use std::process::ExitCode;

use andes_schedd::api::{Change, ChangeReport, ChangeRequest};
use anyhow::{Result, bail};
use clap::Args;

use crate::cmd::client::Session;
use crate::cmd::q::selection;

/// Arguments of `andes hold`, `andes release` and `andes rm`.
#[derive(Args, Debug)]
pub struct ActArgs {
    /// Job ids (`C.P`), clusters (`C`) or owners.
    selection: Vec<String>,
    /// Only jobs for which this ClassAd expression is true.
    #[arg(long, value_name = "EXPR")]
    constraint: Option<String>,
    /// Every job you may act on.
    #[arg(long)]
    all: bool,
    /// Why (becomes HoldReason, ReleaseReason or RemoveReason).
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
}

/// Which change.
#[derive(Clone, Copy, Debug)]
pub enum Verb {
    /// `andes hold`.
    Hold,
    /// `andes release`.
    Release,
    /// `andes rm`.
    Remove,
    /// `andes vacate-job`.
    Vacate,
}

/// Runs `andes hold`, `andes release` or `andes rm`.
pub fn run(verb: Verb, args: ActArgs) -> Result<ExitCode> {
    let mut targets = selection(&args.selection)?;
    targets.constraint = match (args.constraint, args.all) {
        (Some(c), _) => Some(c),
        (None, true) => Some("true".into()),
        (None, false) => None,
    };
    if targets.ids.is_empty() && targets.owners.is_empty() && targets.constraint.is_none() {
        bail!("name the jobs: ids, clusters, owners, --constraint EXPR or --all");
    }
    let reason = args.reason.unwrap_or_default();
    let (change, past) = match verb {
        Verb::Hold => (Change::Hold { reason }, "held"),
        Verb::Release => (Change::Release { reason }, "released"),
        Verb::Remove => (Change::Remove { reason }, "marked for removal"),
        Verb::Vacate => (Change::Vacate { reason }, "vacated"),
    };
    let r = send(ChangeRequest { targets, change })?;
    for id in &r.changed {
        outln!("Job {id} {past}");
    }
    for (id, why) in &r.skipped {
        outln!("Job {id} not {past}: {why}");
    }
    if r.changed.is_empty() && r.skipped.is_empty() {
        outln!("No jobs matched.");
    }
    Ok(exit(&r))
}

fn exit(r: &ChangeReport) -> ExitCode {
    if r.changed.is_empty() && !r.skipped.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn send(req: ChangeRequest) -> Result<ChangeReport> {
    let session = Session::open()?;
    Ok(session.block_on(session.client.call(http::Method::POST, "/v1/change", Some(&req)))?)
}

/// Arguments of `andes qedit`.
#[derive(Args, Debug)]
pub struct QeditArgs {
    /// Jobs to edit: `C.P`, `C` or an owner; leave out with --constraint.
    #[arg(required_unless_present = "constraint")]
    target: Option<String>,
    /// The attribute.
    attr: Option<String>,
    /// Its new value: a ClassAd expression (quote strings: '"text"').
    value: Option<String>,
    /// Edit every job of yours for which this expression is true.
    #[arg(long, value_name = "EXPR")]
    constraint: Option<String>,
}

/// Runs `andes qedit`.
pub fn qedit(args: QeditArgs) -> Result<ExitCode> {
    // With --constraint, the positionals shift: ATTR VALUE.
    let (target, attr, value) = match (&args.constraint, args.target, args.attr, args.value) {
        (Some(_), Some(a), Some(v), None) => (None, a, v),
        (_, Some(t), Some(a), Some(v)) => (Some(t), a, v),
        _ => bail!("usage: andes qedit ID ATTR VALUE, or andes qedit --constraint EXPR ATTR VALUE"),
    };
    let mut targets = selection(target.as_slice())?;
    targets.constraint = args.constraint;
    let change = Change::Edit { attr: attr.clone(), expr: value.clone() };
    let r = send(ChangeRequest { targets, change })?;
    outln!("Set attribute \"{attr}\" for {} matching job(s).", r.changed.len());
    for (id, why) in &r.skipped {
        outln!("Job {id} not changed: {why}");
    }
    Ok(exit(&r))
}
