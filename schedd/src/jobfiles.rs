//! A job's files between its initial directory (or the spool) and the
//! names they have in the sandbox: read as the job's owner for an
//! activation, written back as the owner when it ends. The shadow and the
//! job router's Slurm path both move files this way.

use std::path::Path;

use andes_protocol::pool::FileData;
use classad::ClassAd;

use crate::job::JobId;
use crate::transfer::{self, Staged};
use crate::userfs::Accounts;

/// The job's input files: from the submitter's directories with the owner's
/// rights (see [`crate::userfs`]), or for a spooled job from what was
/// uploaded (`uploads` gives an upload's bytes by digest); then the files of
/// its last checkpoint (`ckpt`), which replace inputs of the same name. At
/// most RequestDisk bytes in all.
pub(crate) fn read_inputs(
    job: &ClassAd,
    ckpt: Option<&Path>,
    accounts: &Accounts,
    uploads: &dyn Fn(&str) -> Option<std::fs::File>,
) -> Result<transfer::Inputs, transfer::TransferError> {
    let limit = transfer::input_limit(job);
    let mut out = if transfer::is_spooled(job) {
        let list = str_attr(job, transfer::SPOOLED_INPUT).unwrap_or_default();
        let mut out = transfer::Inputs::default();
        let mut total = 0u64;
        for (name, digest) in transfer::spooled_inputs(&list) {
            if !andes_protocol::pool::safe_relative_name(&name) {
                return Err(format!("the spooled input file name {name:?} is not allowed").into());
            }
            let file = uploads(&digest)
                .ok_or_else(|| format!("the spooled input file {name} ({digest}) is not stored"))?;
            let len = file.metadata().map_err(|e| format!("spooled input {name}: {e}"))?.len();
            out.add(name, file, len, &mut total, limit)?;
        }
        out
    } else {
        let owner = str_attr(job, classad::name!("Owner")).unwrap_or_default();
        let access = accounts.access(&owner);
        Accounts::run(&access, || {
            transfer::input_files(job)
                .map_err(transfer::TransferError::from)
                .and_then(|files| transfer::read_files(&files, limit))
        })??
    };
    if let Some(dir) = ckpt {
        add_checkpoint_files(dir, &mut out, limit)?;
    }
    Ok(out)
}

/// Writes the output files: a spooled job's into its spool directory (under
/// `spool`), anyone else's into the submitter's directories with the owner's
/// rights.
pub(crate) fn write_outputs(
    id: JobId,
    job: &ClassAd,
    outputs: &[FileData],
    staged: &Staged,
    accounts: &Accounts,
    spool: Option<&Path>,
) -> Result<(), transfer::TransferError> {
    if transfer::is_spooled(job) {
        let spool = spool.ok_or("the schedd has no SPOOL for a spooled job's output")?;
        return Ok(transfer::keep_spooled_outputs(
            &transfer::spooled_dir(spool, id),
            outputs,
            &staged.files,
        )?);
    }
    let owner = str_attr(job, classad::name!("Owner")).unwrap_or_default();
    let access = accounts.access(&owner);
    let mut opened = staged.open()?;
    Accounts::run(&access, || transfer::write_outputs(job, outputs, &mut opened))?
}

/// The files of a job's own last checkpoint (`ckpt`, in the schedd's spool),
/// which replace input files of the same name in `out`; `total` and `limit`
/// are the bytes so far and at most.
fn add_checkpoint_files(
    ckpt: &Path,
    inputs: &mut transfer::Inputs,
    limit: u64,
) -> Result<(), String> {
    if !ckpt.is_dir() {
        return Ok(());
    }
    let b = andes_beneath::Beneath::open(ckpt)
        .map_err(|e| format!("cannot read the checkpoint {}: {e}", ckpt.display()))?;
    let found = b
        .walk("", transfer::MAX_INPUT_FILES)
        .map_err(|e| format!("cannot read the checkpoint {}: {e}", ckpt.display()))?;
    for e in found.into_iter().filter(|e| e.kind == andes_beneath::Kind::File) {
        inputs.files.retain(|f| f.name != e.path);
        let mut total: u64 = inputs.files.iter().map(FileData::len).sum();
        let (file, len) =
            b.open_file(&e.path).map_err(|err| format!("cannot read the checkpoint: {err}"))?;
        inputs.add(e.path, file.into_std(), len, &mut total, limit)?;
    }
    Ok(())
}

use crate::attrs::str_attr;
