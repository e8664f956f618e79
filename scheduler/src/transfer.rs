//! A job's files on the submit side: which input files it names, where its
//! output files go, and the spool of a job submitted with `--spool`.
//!
//! Two ways a job's files travel, as in HTCondor:
//!
//! - **From the submitter's directories** (the default): the schedd reads
//!   the inputs and writes the outputs and the event log at the paths of the
//!   job ad, with the owner's rights (see [`crate::userfs`]).
//! - **Spooled** (`andes submit --spool`, condor_submit -spool): the
//!   submitting command reads the inputs itself and uploads them; the job ad
//!   names them in [`SPOOLED_INPUT`]. The schedd keeps the outputs and the
//!   event log in its own spool ([`spooled_dir`]), and the job stays in the
//!   queue once completed (`LeaveJobInQueue`) until its owner fetches them
//!   with `andes transfer-data` (condor_transfer_data). The schedd never
//!   touches the submitter's paths for such a job.

use std::path::{Path, PathBuf};

use andes_beneath::{Beneath, Kind};
use andes_protocol::pool::{FileData, safe_relative_name};
use classad::{ClassAd, Value};

use crate::job::{JobId, JobSelector};
pub use crate::queue::{SPOOLED_INPUT, spooled_inputs};
use crate::shadow::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};

/// Input files a job may name at most.
pub const MAX_INPUT_FILES: usize = 10_000;

/// The name of a spooled job's event log in its spool directory.
pub const SPOOLED_LOG: &str = "_andes_userlog";

/// `LeaveJobInQueue` of a spooled job: it stays in the queue once completed
/// until its output is fetched (`StageOutFinish` set), or for ten days.
pub const SPOOLED_LEAVE_IN_QUEUE: &str = "JobStatus == 4 && StageOutFinish =?= undefined && \
     (CompletionDate =?= undefined || CompletionDate == 0 || time() - CompletionDate < 864000)";

fn str_attr(job: &ClassAd, name: &str) -> Option<String> {
    match job.eval_attr(name) {
        Value::Str(s) => Some(s.to_string()),
        _ => None,
    }
}

/// True when the job was submitted with `--spool`: its inputs were uploaded,
/// its outputs stay in the schedd's spool.
pub fn is_spooled(job: &ClassAd) -> bool {
    matches!(job.eval_attr(SPOOLED_INPUT), Value::Str(_))
}

/// The job's initial working directory (`Iwd`), where relative paths start.
pub fn iwd_of(job: &ClassAd) -> PathBuf {
    PathBuf::from(str_attr(job, "Iwd").unwrap_or_else(|| ".".into()))
}

/// `p` against `iwd` unless absolute.
pub fn resolve(iwd: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() { p.to_path_buf() } else { iwd.join(p) }
}

/// The bytes a job's input files may hold in all: its RequestDisk, else 1 GiB.
pub fn input_limit(job: &ClassAd) -> u64 {
    match job.eval_attr("RequestDisk") {
        Value::Int(kib) if kib > 0 => (kib as u64).saturating_mul(1024),
        _ => 1 << 30,
    }
}

/// The input files a job names on the submit side, as (name in the sandbox,
/// path): TransferInput (a file under its base name, a directory with its
/// contents under its base name) and the stdin file (`In`). Listing a
/// directory reads the submitter's file system: call it with their rights.
pub fn input_files(job: &ClassAd) -> Result<Vec<(String, PathBuf)>, String> {
    let iwd = iwd_of(job);
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    let push = |name: String, path: PathBuf, out: &mut Vec<(String, PathBuf)>| {
        if out.len() >= MAX_INPUT_FILES {
            return Err(format!("more than {MAX_INPUT_FILES} input files"));
        }
        out.push((name, path));
        Ok(())
    };
    if let Some(list) = str_attr(job, "TransferInput") {
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let path = resolve(&iwd, item);
            let base = path
                .file_name()
                .map(|b| b.to_string_lossy().to_string())
                .ok_or_else(|| format!("input file {item} has no name"))?;
            if path.is_dir() {
                let mut stack = vec![(path.clone(), base)];
                while let Some((dir, prefix)) = stack.pop() {
                    let rd = std::fs::read_dir(&dir).map_err(|e| {
                        format!("cannot read input directory {}: {e}", dir.display())
                    })?;
                    for e in rd.flatten() {
                        let name = format!("{prefix}/{}", e.file_name().to_string_lossy());
                        let p = e.path();
                        if p.is_dir() {
                            stack.push((p, name));
                        } else {
                            push(name, p, &mut out)?;
                        }
                    }
                }
            } else {
                push(base, path, &mut out)?;
            }
        }
    }
    if let Some(input) = str_attr(job, "In")
        && input != "/dev/null"
    {
        push(STDIN_NAME.to_string(), resolve(&iwd, &input), &mut out)?;
    }
    Ok(out)
}

/// Reads `files` (as [`input_files`] lists them), at most `limit` bytes in all.
pub fn read_files(files: &[(String, PathBuf)], limit: u64) -> Result<Vec<FileData>, String> {
    let mut out = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for (name, path) in files {
        let data = std::fs::read(path)
            .map_err(|e| format!("cannot read input file {}: {e}", path.display()))?;
        total += data.len() as u64;
        if total > limit {
            return Err(format!(
                "the input files exceed the job's RequestDisk ({} KiB)",
                limit / 1024
            ));
        }
        out.push(FileData { name: name.clone(), data });
    }
    Ok(out)
}

/// Where each output file goes on the submit side: the streams to `Out` and
/// `Err`, the rest into `Iwd` under their own names. `None` for a stream the
/// job does not keep.
pub fn output_path(job: &ClassAd, name: &str) -> Result<Option<PathBuf>, String> {
    if !safe_relative_name(name) {
        return Err(format!("the host sent an output file named {name:?}"));
    }
    let iwd = iwd_of(job);
    Ok(match name {
        STDOUT_NAME => str_attr(job, "Out").map(|p| resolve(&iwd, &p)),
        STDERR_NAME => str_attr(job, "Err").map(|p| resolve(&iwd, &p)),
        name => Some(iwd.join(name)),
    })
}

/// Writes the output files into the submitter's directories (the streams to
/// `Out` and `Err`, the rest into `Iwd`). Call it with the owner's rights.
pub fn write_outputs(job: &ClassAd, outputs: &[FileData]) -> Result<(), String> {
    for f in outputs {
        let Some(target) = output_path(job, &f.name)? else { continue };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&target, &f.data)
            .map_err(|e| format!("cannot write output file {}: {e}", target.display()))?;
    }
    Ok(())
}

/// Where a spooled job's outputs and event log are kept: `SPOOL/spooled/<id>`.
pub fn spooled_dir(spool: &Path, id: JobId) -> PathBuf {
    spool.join("spooled").join(id.to_string())
}

/// Keeps a spooled job's output files in its spool directory (under their
/// sandbox names), following no link.
pub fn keep_spooled_outputs(dir: &Path, outputs: &[FileData]) -> Result<(), String> {
    let b = Beneath::create(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for f in outputs {
        if !safe_relative_name(&f.name) || f.name == SPOOLED_LOG {
            return Err(format!("the host sent an output file named {:?}", f.name));
        }
        b.write_atomic(&f.name, &f.data, true).map_err(|e| format!("spooling output {e}"))?;
    }
    Ok(())
}

/// A spooled job's kept output files and its event log's text.
pub fn spooled_outputs(dir: &Path, limit: u64) -> Result<(Vec<FileData>, String), String> {
    let b = match Beneath::open(dir) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Vec::new(), String::new()));
        }
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut files = Vec::new();
    let mut log = String::new();
    let mut total = 0u64;
    for e in b.walk("", MAX_INPUT_FILES).map_err(|e| e.to_string())? {
        let last = e.path.rsplit('/').next().unwrap_or(&e.path);
        // A write cut short leaves its temporary file (`.NAME.tmpPID`) behind.
        if e.kind != Kind::File || (last.starts_with('.') && last.contains(".tmp")) {
            continue;
        }
        let data = b.read(&e.path, limit.saturating_sub(total)).map_err(|e| e.to_string())?;
        total += data.len() as u64;
        if e.path == SPOOLED_LOG {
            log = String::from_utf8_lossy(&data).into_owned();
        } else {
            files.push(FileData { name: e.path, data });
        }
    }
    Ok((files, log))
}

/// Removes the spool directories of spooled jobs that are no longer in the
/// queue (`keep` says which are).
pub fn sweep_spooled(spool: &Path, keep: impl Fn(JobId) -> bool) -> usize {
    let dir = spool.join("spooled");
    let Ok(rd) = std::fs::read_dir(&dir) else { return 0 };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Ok(JobSelector::Job(id)) = name.parse::<JobSelector>()
            && keep(id)
        {
            continue;
        }
        if Beneath::open(&e.path()).and_then(|b| b.clear()).is_ok()
            && std::fs::remove_dir(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}
