//! A running job's files as the shadow moves them: inputs read for the
//! activation, outputs fetched as streams, checkpoints (cooperative saved
//! states and transparent snapshots) kept in the spool.

use crate::jobfiles::read_inputs;
use andes_protocol::pool::{STDERR_NAME, STDOUT_NAME};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use andes_protocol::ClientErrorKind;
use andes_protocol::pool::FileData;
use classad::ClassAd;

use super::link::Link;
use super::state::PoolState;
use crate::job::JobId;
use crate::spool::Spool;
use crate::transfer::{self, Staged};

/// Fetches what a report named as streamed (`route`, asked with `req`) into
/// the staging file `path`: an error unless it came whole, `size` bytes.
pub(crate) async fn fetch_whole<T: serde::Serialize + ?Sized>(
    link: &Link,
    route: &str,
    req: &T,
    path: &Path,
    size: u64,
) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| format!("staging: {e}"))?;
    let (w, _) = link
        .long
        .download(route, req, file, size)
        .await
        .map_err(|e| format!("fetching it: {e}"))?;
    if w.len != size {
        return Err(format!("it came with {} of its {size} bytes", w.len));
    }
    Ok(())
}

/// A kept saved state to send with a job: carried when small; a big one named
/// by SHA-256, its file added to `sources` for the upload before the activation.
pub(crate) fn saved_state_to_send(
    path: &Path,
    sources: &mut crate::spool::Sources,
) -> Option<andes_protocol::pool::SavedState> {
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    if len <= andes_protocol::pool::STREAM_OVER {
        let data = std::fs::read(path).ok()?;
        return Some(andes_protocol::pool::SavedState { seq: 0, data, streamed: None });
    }
    let (sha, size) = andes_protocol::stream::file_sha256(&mut file).ok()?;
    let sha = hex::encode(sha);
    sources.push((sha.clone(), file));
    let streamed = Some(andes_protocol::pool::Streamed { size, sha256: Some(sha) });
    Some(andes_protocol::pool::SavedState { seq: 0, data: Vec::new(), streamed })
}

/// How many times a streamed output file is fetched before the job is held
/// (waiting 2, 4, 8, 16 and 32 s between tries: a full disk or a cut link of
/// a minute passes; a host that answers it no longer has the file is final).
pub(crate) const OUTPUT_TRIES: u32 = 6;

/// Keeps a checkpointing job's files (all but its streams) in `dir`,
/// replacing the previous checkpoint whole.
pub(crate) fn save_checkpoint(
    dir: &Path,
    outputs: &[FileData],
    staged: &Staged,
) -> std::io::Result<()> {
    let tmp = dir.with_extension("new");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    for f in outputs {
        if f.name == STDOUT_NAME
            || f.name == STDERR_NAME
            || !andes_protocol::pool::safe_relative_name(&f.name)
        {
            continue;
        }
        let p = tmp.join(&f.name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        staged.place(f, &p)?;
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&tmp, dir)
}

impl PoolState {
    /// The job's input files (see [`read_inputs`]).
    pub(crate) fn read_inputs(
        &self,
        job: &ClassAd,
        ckpt: Option<&Path>,
    ) -> Result<transfer::Inputs, transfer::TransferError> {
        read_inputs(job, ckpt, &self.cfg.accounts, &|d| self.queue.open_upload_of(job, d))
    }

    /// Fetches the output files a report names as streamed (`POST
    /// /v1/host/output`, each written to disk as it arrives) into a staging
    /// directory of the schedd's: under SPOOL, else the system's temporary
    /// directory. A file that does not come whole is an error (a hold).
    pub(crate) async fn fetch_outputs(
        &self,
        link: &Link,
        claim_id: &str,
        gid: &str,
        outputs: &[FileData],
    ) -> Result<Staged, String> {
        let mut staged = Staged::default();
        if outputs.iter().all(|f| f.streamed.is_none()) {
            return Ok(staged);
        }
        let dir = self.staging_dir("outputs-")?;
        for (n, f) in outputs.iter().enumerate() {
            let Some(s) = &f.streamed else { continue };
            let path = dir.path().join(n.to_string());
            let req = andes_protocol::pool::OutputRequest {
                claim_id: claim_id.to_string(),
                job: gid.to_string(),
                name: f.name.clone(),
            };
            // A transfer cut short is tried again a few times; a refusal is final.
            let mut tries = 0;
            loop {
                tries += 1;
                let file = std::fs::File::create(&path)
                    .map_err(|e| format!("cannot stage output file {}: {e}", f.name))?;
                let got = link.long.download("/v1/host/output", &req, file, s.size).await;
                let why = match got {
                    Ok((w, _)) if w.len == s.size => break,
                    Ok((w, _)) => format!("it came with {} bytes of its {}", w.len, s.size),
                    Err(e) => {
                        if matches!(e.kind, ClientErrorKind::Status { .. }) {
                            tries = OUTPUT_TRIES;
                        }
                        e.to_string()
                    }
                };
                if tries >= OUTPUT_TRIES {
                    return Err(format!(
                        "cannot transfer output file {} ({tries} tries): {why}",
                        f.name
                    ));
                }
                tracing::info!("output file {} of {gid}: {why}; trying again", f.name);
                tokio::time::sleep(Duration::from_secs(1 << tries)).await;
            }
            staged.files.insert(f.name.clone(), path);
        }
        staged.dir = Some(dir);
        Ok(staged)
    }

    /// A fresh directory of the schedd's for files fetched as streams: under
    /// SPOOL (`incoming`), else the system's temporary directory. Removed when
    /// dropped.
    pub(crate) fn staging_dir(&self, prefix: &str) -> Result<tempfile::TempDir, String> {
        let root = match self.cfg.spool.as_deref() {
            Some(s) => s.join("incoming"),
            None => std::env::temp_dir(),
        };
        std::fs::create_dir_all(&root)
            .and_then(|()| tempfile::Builder::new().prefix(prefix).tempdir_in(&root))
            .map_err(|e| format!("cannot stage files in {}: {e}", root.display()))
    }

    /// The spool's checkpoints, if the schedd has a spool.
    pub(crate) fn spool(&self) -> Option<Spool> {
        self.cfg.spool.as_deref().map(Spool::new)
    }

    /// Where job `id`'s saved state (cooperative checkpoint) is kept.
    pub(crate) fn saved_state_path(&self, id: JobId) -> Option<PathBuf> {
        self.spool().map(|s| s.saved_state_path(id))
    }

    /// The transparent checkpoint to resume job `id` from, with every file
    /// content it names; a kept one that can no longer be used (damaged, or
    /// of another module) is discarded and the job starts afresh.
    pub(crate) fn snapshot_to_send(
        &self,
        id: JobId,
        module: Option<&[u8; 32]>,
    ) -> Option<(andes_protocol::pool::SnapshotData, crate::spool::Sources)> {
        let (spool, module) = (self.spool()?, module?);
        match spool.load_snapshot(id, module) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("job {id}: its checkpoint cannot be used ({e}); it starts afresh");
                spool.remove_snapshot(id);
                None
            }
        }
    }

    /// Keeps a transparent checkpoint from the job's host (every check, then
    /// durably; on a worker thread, as it may be large).
    pub(crate) async fn keep_snapshot(
        &self,
        link: &Link,
        claim_id: &str,
        id: JobId,
        module: Option<[u8; 32]>,
        mut snap: andes_protocol::pool::SnapshotData,
    ) -> Result<crate::spool::Kept, String> {
        let spool = self.spool().ok_or("the schedd has no SPOOL")?;
        let module = module.ok_or("the job has no CmdDigest")?;
        let bytes = snap.bytes.len() as u64
            + snap.streamed.iter().map(|p| p.size).sum::<u64>()
            + snap.blobs.iter().map(FileData::len).sum::<u64>();
        self.charge_checkpoint(id, bytes)?;
        // Its big parts come as streams of their own, staged in the spool.
        let staging = self.staging_dir("checkpoint-")?;
        let mut staged = HashMap::new();
        let parts = snap
            .streamed
            .as_ref()
            .map(|st| (None, st.size))
            .into_iter()
            .chain(
                snap.blobs
                    .iter()
                    .filter_map(|b| Some((Some(b.name.clone()), b.streamed.as_ref()?.size))),
            )
            .collect::<Vec<_>>();
        for (n, (blob, size)) in parts.into_iter().enumerate() {
            let path = staging.path().join(n.to_string());
            let req = andes_protocol::pool::SnapshotFileRequest {
                claim_id: claim_id.to_string(),
                hash: snap.hash.clone(),
                blob: blob.clone(),
            };
            fetch_whole(link, "/v1/host/snapshot", &req, &path, size).await?;
            match blob {
                None => {
                    snap.bytes = std::fs::read(&path).map_err(|e| format!("staging: {e}"))?;
                    snap.streamed = None;
                }
                Some(b) => {
                    staged.insert(b, path);
                }
            }
        }
        let signers = self.cfg.snapshot_signers.clone();
        tokio::task::spawn_blocking(move || {
            let trusted = |k: &[u8; 32]| signers.as_ref().is_none_or(|s| s.contains(k));
            let kept = spool.keep_snapshot(id, &module, &trusted, &snap, &staged);
            drop(staging);
            kept
        })
        .await
        .map_err(|e| format!("the task keeping it failed: {e}"))?
    }

    /// Fetches a saved state the report named as streamed into `st.data`.
    pub(crate) async fn fetch_saved_state(
        &self,
        link: &Link,
        claim_id: &str,
        st: &mut andes_protocol::pool::SavedState,
        size: u64,
    ) -> Result<(), String> {
        let staging = self.staging_dir("saved-")?;
        let path = staging.path().join("state");
        let req =
            andes_protocol::pool::SavedStateRequest { claim_id: claim_id.into(), seq: st.seq };
        fetch_whole(link, "/v1/host/saved", &req, &path, size).await?;
        st.data = std::fs::read(&path).map_err(|e| format!("staging: {e}"))?;
        st.streamed = None;
        Ok(())
    }

    /// Keeps a saved state durably: written aside, synced, then renamed.
    pub(crate) fn keep_saved_state(&self, id: JobId, data: &[u8]) -> std::io::Result<()> {
        let Some(path) = self.saved_state_path(id) else { return Ok(()) };
        self.charge_checkpoint(id, data.len() as u64).map_err(std::io::Error::other)?;
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
        andes_beneath::replace_file(&path, data, 0o600)
    }

    /// Counts a checkpoint of `bytes` against the job's owner's spool quota
    /// and the spool's room; refused, it is not kept (the job goes on, from
    /// its last kept checkpoint if it is stopped).
    pub(crate) fn charge_checkpoint(&self, id: JobId, bytes: u64) -> Result<(), String> {
        let owner = self.queue.read().job(id).map(|v| v.owner().to_string()).unwrap_or_default();
        self.queue.charge_spool(&owner, bytes).map_err(|e| e.to_string())
    }

    /// Where job `id`'s own checkpoint files are kept.
    pub(crate) fn ckpt_dir(&self, id: JobId) -> Option<PathBuf> {
        self.spool().map(|s| s.ckpt_dir(id))
    }
}

/// Whether a job may keep something in the spool's checkpoints: it
/// checkpoints (`WasmCheckpoint`, `CheckpointExitCode`) or has (`NumCkpts`).
pub(crate) fn may_have_checkpoints(job: &ClassAd) -> bool {
    job.contains(classad::name!("WasmCheckpoint"))
        || job.contains(classad::name!("CheckpointExitCode"))
        || matches!(job.eval_attr(classad::name!("NumCkpts")), classad::Value::Int(n) if n > 0)
}
