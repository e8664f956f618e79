//! The files of a job on a claim: the module store, input files written
//! into the sandbox, and output files collected beneath it within the
//! job's disk request.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use andes_beneath::{Beneath, Kind, Refused};
use andes_protocol::pool::{self, FileData, SnapshotData};
use classad::{ClassAd, Value};

use super::claim::*;

/// The sandbox names of the job's streams: one contract, in `andes-protocol`.
pub use andes_protocol::pool::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};

/// Modules kept in memory at most (least recently stored dropped first).
pub(crate) const MAX_MODULES: usize = 256;

/// The module store: modules by digest, bounded.
#[derive(Default)]
pub(crate) struct Modules {
    map: HashMap<String, Arc<[u8]>>,
    order: std::collections::VecDeque<String>,
}

impl Modules {
    pub(crate) fn get(&self, digest: &str) -> Option<Arc<[u8]>> {
        self.map.get(digest).cloned()
    }
    pub(crate) fn put(&mut self, digest: String, bytes: Arc<[u8]>) {
        if self.map.insert(digest.clone(), bytes).is_none() {
            self.order.push_back(digest);
            while self.order.len() > MAX_MODULES {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }
}

/// Writes the input files into a fresh sandbox, following no link: those
/// carried in the activation, and the streamed ones from `uploaded` (the
/// claim's upload directory, files by SHA-256).
pub(crate) fn write_inputs(
    sandbox: &Path,
    inputs: &[FileData],
    uploaded: &Path,
) -> std::io::Result<()> {
    let b = Beneath::open(sandbox)?;
    for f in inputs {
        match &f.streamed {
            None => b.write(&f.name, &f.data).map_err(std::io::Error::other)?,
            Some(s) => {
                let sha = s.sha256.as_deref().unwrap_or_default();
                let mut from = std::fs::File::open(uploaded.join(sha))?;
                if let Some((parent, _)) = f.name.rsplit_once('/') {
                    b.create_dirs(parent).map_err(std::io::Error::other)?;
                }
                let mut to = b.create_file(&f.name).map_err(std::io::Error::other)?;
                std::io::copy(&mut from, &mut to)?;
            }
        }
    }
    Ok(())
}

/// Checks that every streamed input of an activation was uploaded whole to
/// `uploaded`, and removes the uploads it does not name (left by an earlier
/// activation that never came).
pub(crate) fn check_uploaded<'a>(
    uploaded: &Path,
    inputs: impl Iterator<Item = &'a FileData>,
) -> Result<(), PoolError> {
    let mut named = HashSet::new();
    for f in inputs {
        let Some(s) = &f.streamed else { continue };
        let sha = s.sha256.as_deref().unwrap_or_default();
        if andes_protocol::stream::parse_hex(sha).is_none() {
            return Err(PoolError::BadInput(format!(
                "input file {} is streamed without its SHA-256",
                f.name
            )));
        }
        let len = std::fs::metadata(uploaded.join(sha)).map(|m| m.len()).ok();
        if len != Some(s.size) {
            return Err(PoolError::BadInput(format!(
                "input file {} ({} bytes, SHA-256 {sha}) was not uploaded \
                 (PUT /v1/host/inputs/{sha}) before the activation",
                f.name, s.size
            )));
        }
        named.insert(sha.to_string());
    }
    if let Ok(rd) = std::fs::read_dir(uploaded) {
        for e in rd.flatten() {
            if !named.contains(e.file_name().to_string_lossy().as_ref()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

/// Checks the snapshot an activation brings: its hash is its trailer's and
/// each file content is what its name (BLAKE3) says. Its signature and the
/// rest are checked by the starter before the job resumes.
pub(crate) fn check_snapshot(snap: &SnapshotData, uploaded: &Path) -> Result<(), PoolError> {
    if let Some(s) = &snap.streamed {
        // Uploaded before the activation (checked whole by `check_uploaded`).
        let sha = s.sha256.as_deref().unwrap_or_default();
        let bytes = std::fs::read(uploaded.join(sha)).map_err(|e| {
            PoolError::BadInput(format!("the checkpoint {} was not uploaded: {e}", snap.hash))
        })?;
        return check_snapshot(&SnapshotData { bytes, streamed: None, ..snap.clone() }, uploaded);
    }
    if andes_snapshot::stored_hash(&snap.bytes).as_deref() != Some(snap.hash.as_str()) {
        return Err(PoolError::BadInput(format!(
            "the checkpoint is not an andes snapshot with hash {}",
            snap.hash
        )));
    }
    for b in &snap.blobs {
        if !andes_snapshot::is_hash(&b.name) {
            return Err(PoolError::BadInput(format!(
                "the checkpoint's file content {:?} is not named by its BLAKE3",
                b.name
            )));
        }
        if b.streamed.is_some() {
            // Checked against its name as it is stored (`BlobStore::put_file`).
            continue;
        }
        if andes_snapshot::blob_hash(&b.data) != b.name {
            return Err(PoolError::BadInput(format!(
                "the checkpoint's file content {:?} does not match its name",
                b.name
            )));
        }
    }
    Ok(())
}

/// Checks the input files' names and total size against the job's RequestDisk (KiB).
pub(crate) fn check_inputs(job: &ClassAd, inputs: &[FileData]) -> Result<(), PoolError> {
    for f in inputs {
        if !pool::safe_relative_name(&f.name) {
            return Err(PoolError::BadInput(format!(
                "input file name {:?} is not allowed",
                f.name
            )));
        }
    }
    let total: u64 = inputs.iter().map(FileData::len).sum();
    if let Value::Int(kib) = job.eval_attr(classad::name!("RequestDisk"))
        && kib > 0
        && total > (kib as u64).saturating_mul(1024)
    {
        return Err(PoolError::BadInput(format!(
            "the input files hold {total} bytes, more than the job's RequestDisk ({kib} KiB)"
        )));
    }
    Ok(())
}

/// Files a job may send back at most.
pub const MAX_OUTPUT_FILES: usize = 10_000;

/// The output files of a finished job: TransferOutput's list if set (a file
/// under its base name; a directory with its contents under its base name,
/// or, written with a trailing `/`, its contents alone, as HTCondor does;
/// with PreserveRelativePaths, a relative entry under its relative path),
/// else every top-level regular file the job created or changed; the streams
/// under their sandbox names. At most `limit` bytes in all, of which at most
/// `budget` (and [`pool::INLINE_BUDGET`]) carried in the report; the rest are
/// named as streamed.
///
/// Everything is read beneath the sandbox without following a link: a link or
/// special file that the job names as an output (or puts in place of a
/// stream) is refused, and the refusal is returned as the error (a hold);
/// links and special files found among unnamed files are not sent back.
pub(crate) fn collect_outputs(
    sandbox: &Path,
    job: &ClassAd,
    inputs: &[(String, u64)],
    limit: u64,
    budget: u64,
) -> Outputs {
    let b = match Beneath::open(sandbox) {
        Ok(b) => b,
        Err(e) => {
            return Outputs {
                error: Some(format!("cannot open the job's sandbox: {e}")),
                ..Outputs::default()
            };
        }
    };
    // (name sent back, path in the sandbox)
    let mut wanted: Vec<(String, String)> = Vec::new();
    let mut error: Option<String> = None;
    let mut errno = 0;
    let mut sandbox_empty = false;
    // What the root's listing said of the standard streams' files, when the
    // root was listed: no look at them again.
    let mut streams: Option<Vec<(&str, Kind)>> = None;
    let listed = match job.eval_attr(classad::name!("TransferOutput")) {
        Value::Str(s) if !s.trim().is_empty() => Some(
            s.split(',')
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>(),
        ),
        _ => None,
    };
    // With PreserveRelativePaths a relative entry comes back under its
    // relative path (its trailing slash ignored), as HTCondor does.
    let preserve =
        matches!(job.eval_attr(classad::name!("PreserveRelativePaths")), Value::Bool(true));
    match &listed {
        Some(list) => {
            for n in list {
                let preserved = preserve && !n.starts_with('/');
                let contents_only = n.ends_with('/') && !preserved;
                let path = if preserved {
                    n.split('/')
                        .filter(|c| !c.is_empty() && *c != ".")
                        .collect::<Vec<_>>()
                        .join("/")
                } else {
                    n.trim_end_matches('/').to_string()
                };
                let path = path.as_str();
                let base = if preserved {
                    path.to_string()
                } else {
                    path.rsplit('/').next().unwrap_or(path).to_string()
                };
                let entry = match b.entry(path) {
                    Ok(e) => e,
                    Err(Refused::Missing { .. }) => {
                        if error.is_none() {
                            errno = ENOENT;
                        }
                        error.get_or_insert_with(|| {
                            format!("transfer_output_files names {n}, which the job did not create")
                        });
                        continue;
                    }
                    Err(e) => {
                        error.get_or_insert_with(|| {
                            format!("transfer_output_files names {n}, which is refused: {e}")
                        });
                        continue;
                    }
                };
                match entry.kind {
                    Kind::File => wanted.push((base, path.to_string())),
                    Kind::Dir => match b.walk(path, MAX_OUTPUT_FILES) {
                        Ok(found) => {
                            for e in found {
                                let rel = &e.path[path.len() + 1..];
                                let name = if contents_only {
                                    rel.to_string()
                                } else {
                                    format!("{base}/{rel}")
                                };
                                match e.kind {
                                    Kind::File => wanted.push((name, e.path)),
                                    Kind::Dir => {}
                                    Kind::Link | Kind::Special => {
                                        error.get_or_insert_with(|| {
                                            format!(
                                                "output directory {n} holds {}, which is not a \
                                                 regular file (links and special files are not \
                                                 transferred)",
                                                e.path
                                            )
                                        });
                                    }
                                }
                            }
                        }
                        Err(e) => {
                            error.get_or_insert_with(|| format!("output directory {n}: {e}"));
                        }
                    },
                    Kind::Link | Kind::Special => {
                        let why = b.read(path, 0).err().map(|e| e.to_string()).unwrap_or_default();
                        error.get_or_insert_with(|| {
                            format!("transfer_output_files names {n}, which is refused: {why}")
                        });
                    }
                }
            }
        }
        None => match b.list("", MAX_OUTPUT_FILES) {
            Ok(found) => {
                sandbox_empty = found.is_empty();
                streams = Some(
                    [STDOUT_NAME, STDERR_NAME]
                        .into_iter()
                        .filter_map(|s| found.iter().find(|e| e.path == s).map(|e| (s, e.kind)))
                        .collect(),
                );
                for e in found {
                    let name = e.path;
                    if e.kind != Kind::File
                        || name == STDOUT_NAME
                        || name == STDERR_NAME
                        || name == STDIN_NAME
                    {
                        if matches!(e.kind, Kind::Link | Kind::Special) {
                            tracing::info!("output {name} is not a regular file; not sent back");
                        }
                        continue;
                    }
                    // An input file the job left as it was does not go back.
                    if inputs.iter().any(|(n, len)| *n == name && *len == e.len) {
                        continue;
                    }
                    wanted.push((name.clone(), name));
                }
            }
            Err(e) => {
                error.get_or_insert_with(|| format!("cannot list the job's output files: {e}"));
            }
        },
    }
    let streams = streams.unwrap_or_else(|| {
        [STDOUT_NAME, STDERR_NAME]
            .into_iter()
            .filter_map(|s| b.entry(s).ok().map(|e| (s, e.kind)))
            .collect()
    });
    for (s, kind) in streams {
        match kind {
            Kind::File => wanted.push((s.to_string(), s.to_string())),
            _ => {
                let why = b.read(s, 0).err().map(|e| e.to_string()).unwrap_or_default();
                error.get_or_insert_with(|| {
                    format!(
                        "the job replaced its {} stream: {why}",
                        if s == STDOUT_NAME { "output" } else { "error" }
                    )
                });
            }
        }
    }
    wanted.sort();
    wanted.dedup_by(|a, b| a.0 == b.0);
    if wanted.len() > MAX_OUTPUT_FILES {
        error.get_or_insert_with(|| {
            format!("the job has more than {MAX_OUTPUT_FILES} output files")
        });
        wanted.truncate(MAX_OUTPUT_FILES);
    }
    let mut out = Vec::new();
    let mut streamed = HashMap::new();
    let mut total = 0u64;
    let mut carried = 0u64;
    for (name, path) in wanted {
        // Each was just found a regular file (listed or looked at): opened
        // without another look, and checked once open.
        let (f, len) = match b.open_found(&path) {
            Ok(opened) => opened,
            Err(e) => {
                error.get_or_insert_with(|| format!("cannot send back output file {name}: {e}"));
                continue;
            }
        };
        // A big file (or any past what one report carries) stays where it
        // is, for the shadow to fetch as a stream.
        if len > pool::STREAM_OVER || carried + len > budget.min(pool::INLINE_BUDGET) {
            total = total.saturating_add(len);
            if total > limit {
                error.get_or_insert_with(|| {
                    format!("the output files exceed the job's RequestDisk ({limit} bytes)")
                });
                break;
            }
            out.push(FileData::streamed(name.clone(), len, None));
            streamed.insert(name, path);
            continue;
        }
        match andes_beneath::read_opened(&path, f, len, limit.saturating_sub(total)) {
            Ok(data) => {
                total += data.len() as u64;
                carried += data.len() as u64;
                out.push(FileData::inline(name, data));
            }
            Err(Refused::TooLarge { .. }) => {
                error.get_or_insert_with(|| {
                    format!("the output files exceed the job's RequestDisk ({limit} bytes)")
                });
                break;
            }
            Err(e) => {
                error.get_or_insert_with(|| format!("cannot send back output file {name}: {e}"));
            }
        }
    }
    Outputs { files: out, streamed, error, errno, sandbox_empty }
}

/// The most bytes of output files one activation's reports carry in all: a
/// batch of short jobs sends the rest as streams, so no report outgrows the
/// answer a shadow reads (64 MiB, in base64).
pub const ACTIVATION_INLINE_BUDGET: u64 = 16 << 20;

/// A finished job's output files ([`collect_outputs`]).
#[derive(Debug, Default)]
pub(crate) struct Outputs {
    /// The files, carried or streamed, in order.
    pub files: Vec<FileData>,
    /// The streamed ones: name → path in the sandbox.
    pub streamed: HashMap<String, String>,
    /// Why some could not be sent back (a hold).
    pub error: Option<String>,
    /// The Unix errno behind `error` (HTCondor's HoldReasonSubCode of a
    /// transfer hold), 0 when there is none.
    pub errno: i32,
    /// The sandbox was listed whole and held nothing at all: it needs no
    /// emptying before the slot's next job.
    pub sandbox_empty: bool,
}

/// ENOENT, the same number on every platform andes runs on.
pub(crate) const ENOENT: i32 = 2;
