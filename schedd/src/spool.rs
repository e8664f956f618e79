//! The schedd's spool of job checkpoints (`SPOOL/checkpoints`): what a job
//! needs to resume on its next start, on any host.
//!
//! | file | what |
//! | --- | --- |
//! | `<id>.snapshot` | the job's latest transparent checkpoint (a module compiled by `andes compile`), as the host signed it |
//! | `<id>.blobs/<blake3>` | the contents of the sandbox files that snapshot names, exactly those |
//! | `<id>.state` | a cooperative job's last saved state (the guest SDK's `checkpoint.save`) |
//! | `<id>/` | the files of a job's own checkpoint (`checkpoint_exit_code`) |
//!
//! A snapshot is kept only after every check: its hash, a signer the pool
//! trusts as a host, its signature, the job's module, and every file content
//! it names (each checked against its BLAKE3). The contents are written and
//! synced before the snapshot, which replaces the last one atomically, so
//! the spool always holds one whole snapshot or the previous one.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use andes_protocol::pool::{FileData, INLINE_BUDGET, STREAM_OVER, SnapshotData, Streamed};

/// Files to upload before an activation: SHA-256 (hex) → the open file.
pub type Sources = Vec<(String, std::fs::File)>;
use andes_snapshot::BlobStore;

use crate::job::JobId;

/// Says whether a snapshot's signer (an ed25519 public key) is trusted.
pub type Trust<'a> = &'a dyn Fn(&[u8; 32]) -> bool;

/// A snapshot the spool kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The snapshot's hash.
    pub hash: String,
    /// Bytes of the snapshot and of the file contents it names (`CkptSize`).
    pub bytes: u64,
    /// Its `CheckpointPlatform` (`LastCheckpointPlatform`).
    pub platform: String,
}

/// The checkpoints directory of a schedd's spool.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
}

impl Spool {
    /// The checkpoints of the spool at `spool` (`SPOOL`).
    pub fn new(spool: &Path) -> Spool {
        Spool { dir: spool.join("checkpoints") }
    }

    /// Where job `id`'s transparent checkpoint is kept.
    pub fn snapshot_path(&self, id: JobId) -> PathBuf {
        self.dir.join(format!("{id}.snapshot"))
    }

    fn blobs_dir(&self, id: JobId) -> PathBuf {
        self.dir.join(format!("{id}.blobs"))
    }

    /// Where job `id`'s saved state (cooperative checkpoint) is kept.
    pub fn saved_state_path(&self, id: JobId) -> PathBuf {
        self.dir.join(format!("{id}.state"))
    }

    /// Where job `id`'s own checkpoint files are kept.
    pub fn ckpt_dir(&self, id: JobId) -> PathBuf {
        self.dir.join(id.to_string())
    }

    /// The hash of the snapshot kept for `id`, if there is one.
    pub fn snapshot_hash(&self, id: JobId) -> Option<String> {
        let bytes = std::fs::read(self.snapshot_path(id)).ok()?;
        andes_snapshot::stored_hash(&bytes)
    }

    /// Keeps `snap` as job `id`'s checkpoint, replacing the last, once it
    /// passed every check (see the module's doc); the contents it names that
    /// `snap` does not carry must be in the spool already (the last
    /// snapshot's). Nothing changes on a refusal.
    pub fn keep_snapshot(
        &self,
        id: JobId,
        module: &[u8; 32],
        trusted: Trust<'_>,
        snap: &SnapshotData,
        staged: &HashMap<String, PathBuf>,
    ) -> Result<Kept, String> {
        if andes_snapshot::stored_hash(&snap.bytes).as_deref() != Some(snap.hash.as_str()) {
            return Err(format!("it is not an andes snapshot with hash {}", snap.hash));
        }
        let opened =
            andes_snapshot::open(&snap.bytes, trusted, module).map_err(|e| e.to_string())?;
        let header = &opened.header;
        let store = BlobStore::open(&self.blobs_dir(id), true)
            .map_err(|e| format!("cannot open its file store: {e}"))?;
        let mut new: Vec<&FileData> = Vec::new();
        let mut keep: HashSet<&str> = HashSet::new();
        let mut bytes = snap.bytes.len() as u64;
        for f in header.contents() {
            if !andes_snapshot::is_hash(f.blake3) {
                return Err(format!("{f}: its content hash is malformed"));
            }
            bytes = bytes.saturating_add(f.size);
            if !keep.insert(f.blake3) {
                continue;
            }
            match snap.blobs.iter().find(|b| b.name == f.blake3) {
                Some(b) if b.streamed.is_some() => {
                    // Fetched to a staging file: stored, checked as it is.
                    let from = staged
                        .get(f.blake3)
                        .ok_or_else(|| format!("{f}: its content was not fetched"))?;
                    let (hash, size) = store
                        .put_file(from)
                        .map_err(|e| format!("cannot keep a file content: {e}"))?;
                    if hash != f.blake3 || size != f.size {
                        return Err(format!("{f}: its content does not match its hash"));
                    }
                }
                Some(b) => {
                    if andes_snapshot::blob_hash(&b.data) != f.blake3
                        || b.data.len() as u64 != f.size
                    {
                        return Err(format!("{f}: its content does not match its hash"));
                    }
                    new.push(b);
                }
                None if store.reuse(f.blake3) => {}
                None => return Err(format!("{f}: its content was not sent")),
            }
        }
        for b in new {
            store.put(&b.data).map_err(|e| format!("cannot keep a file content: {e}"))?;
        }
        sync_dir(&self.blobs_dir(id))?;
        andes_beneath::replace_file(&self.snapshot_path(id), &snap.bytes, 0o600)
            .map_err(|e| format!("cannot keep the snapshot: {e}"))?;
        // Contents only older snapshots named go; a failure leaves extra
        // files, never missing ones.
        if let Err(e) = store.retain(&keep) {
            tracing::debug!("job {id}: old checkpoint contents not removed: {e}");
        }
        Ok(Kept { hash: snap.hash.clone(), bytes, platform: header.platform.clone() })
    }

    /// Job `id`'s kept snapshot with every file content it names, ready to
    /// send with the job; `Ok(None)` when there is none. An `Err` says why
    /// the kept one cannot be used (damaged since it was kept, or of another
    /// module): the caller discards it.
    pub fn load_snapshot(
        &self,
        id: JobId,
        module: &[u8; 32],
    ) -> Result<Option<(SnapshotData, Sources)>, String> {
        let bytes = match std::fs::read(self.snapshot_path(id)) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read it: {e}")),
        };
        let seen = andes_snapshot::inspect(&bytes).map_err(|e| e.to_string())?;
        if !seen.hash_ok || !seen.signature_ok {
            return Err("its content no longer matches its hash and signature".into());
        }
        if !seen.header.module_sha256.eq_ignore_ascii_case(&hex::encode(module)) {
            return Err(format!("it is of module {}, not the job's", seen.header.module_sha256));
        }
        let store = BlobStore::open(&self.blobs_dir(id), true)
            .map_err(|e| format!("cannot open its file store: {e}"))?;
        // Small parts ride in the activation (within its budget); big ones are
        // uploaded to the host as streams first (named by SHA-256).
        let mut sources: Sources = Vec::new();
        let mut streamed = |path: &Path, what: &str| -> Result<Streamed, String> {
            let mut file = std::fs::File::open(path).map_err(|e| format!("{what}: {e}"))?;
            let (sha, size) = andes_protocol::stream::file_sha256(&mut file)
                .map_err(|e| format!("{what}: {e}"))?;
            let sha = hex::encode(sha);
            sources.push((sha.clone(), file));
            Ok(Streamed { size, sha256: Some(sha) })
        };
        let mut blobs: Vec<FileData> = Vec::new();
        let mut carried = 0u64;
        for f in seen.header.contents() {
            if blobs.iter().any(|b| b.name == f.blake3) {
                continue;
            }
            if f.size > STREAM_OVER || carried + f.size > INLINE_BUDGET {
                let what = f.to_string();
                let st = streamed(&store.path(f.blake3), &what)?;
                if st.size != f.size {
                    return Err(format!("{what}: its content is not the size it was kept at"));
                }
                blobs.push(FileData {
                    name: f.blake3.to_string(),
                    data: Vec::new(),
                    streamed: Some(st),
                });
                continue;
            }
            let data = store.read(f.blake3).map_err(|e| format!("{f}: {e}"))?;
            carried += data.len() as u64;
            blobs.push(FileData::inline(f.blake3.to_string(), data));
        }
        let (bytes, big) = if bytes.len() as u64 > STREAM_OVER {
            (Vec::new(), Some(streamed(&self.snapshot_path(id), "the snapshot")?))
        } else {
            (bytes, None)
        };
        let data = SnapshotData { hash: seen.hash, bytes, streamed: big, blobs, stopping: false };
        Ok(Some((data, sources)))
    }

    /// Forgets job `id`'s snapshot and its contents.
    pub fn remove_snapshot(&self, id: JobId) {
        let _ = std::fs::remove_file(self.snapshot_path(id));
        let _ = std::fs::remove_dir_all(self.blobs_dir(id));
    }

    /// Forgets every checkpoint of job `id` (it completed or left the queue).
    pub fn remove_job(&self, id: JobId) {
        self.remove_snapshot(id);
        let _ = std::fs::remove_file(self.saved_state_path(id));
        let _ = std::fs::remove_dir_all(self.ckpt_dir(id));
    }
}

fn sync_dir(dir: &Path) -> Result<(), String> {
    match std::fs::File::open(dir) {
        Ok(d) => d.sync_all().map_err(|e| format!("cannot sync {}: {e}", dir.display())),
        // Windows cannot open a directory as a file; its renames are durable.
        Err(_) if cfg!(windows) => Ok(()),
        Err(e) => Err(format!("cannot sync {}: {e}", dir.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use andes_protocol::Keypair;
    use andes_snapshot::{Builder, FileEntry, Header};

    const MODULE: [u8; 32] = [5; 32];

    fn key(name: &str, seed: u8) -> Keypair {
        Keypair::from_seed(name, [seed; 32]).unwrap()
    }

    /// A signed snapshot naming `files` (path, content), and the contents.
    fn snapshot(
        k: &Keypair,
        module: &[u8; 32],
        files: &[(&str, &[u8])],
    ) -> (Vec<u8>, Vec<FileData>) {
        let mut h = Header::new(module, "schedd#1.0", 1_700_000_000_000);
        h.platform = andes_snapshot::platform(Some(1));
        let mut blobs = Vec::new();
        for (path, data) in files {
            let hash = andes_snapshot::blob_hash(data);
            h.files.push(FileEntry {
                path: path.to_string(),
                size: data.len() as u64,
                blake3: hash.clone(),
            });
            blobs.push(FileData::inline(hash, data.to_vec()));
        }
        let mut b = Builder::new(h);
        b.memory(&[1u8; 65536], andes_snapshot::Image::none());
        let sealed = b.finish(k.public().as_bytes(), |m| k.sign(m));
        // The memory's pack travels like a file's content.
        if let Some((hash, bytes)) = sealed.pack {
            blobs.push(FileData::inline(hash, bytes));
        }
        (sealed.bytes, blobs)
    }

    fn data(bytes: Vec<u8>, blobs: Vec<FileData>) -> SnapshotData {
        SnapshotData {
            hash: andes_snapshot::stored_hash(&bytes).unwrap(),
            bytes,
            streamed: None,
            blobs,
            stopping: false,
        }
    }

    #[test]
    fn snapshots_are_kept_with_exactly_their_contents_and_sent_whole() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path());
        let host = key("host", 1);
        let trusted = |p: &[u8; 32]| p == host.public().as_bytes();
        let id = JobId { cluster: 3, proc: 1 };
        let (b1, blobs1) = snapshot(&host, &MODULE, &[("in.txt", b"input"), ("out.txt", b"12")]);
        let first = data(b1, blobs1);
        let kept = spool.keep_snapshot(id, &MODULE, &trusted, &first, &HashMap::new()).unwrap();
        assert_eq!(kept.platform, andes_snapshot::platform(Some(1)));
        assert_eq!(spool.snapshot_hash(id), Some(first.hash.clone()));
        // The next one carries only what changed: the input is already here.
        let (b2, mut blobs2) =
            snapshot(&host, &MODULE, &[("in.txt", b"input"), ("out.txt", b"1234")]);
        blobs2.retain(|b| b.data != b"input");
        let second = data(b2, blobs2);
        // (Its memory pack is the first's: carried, and found already kept.)
        let pack = second.blobs.last().unwrap().data.clone();
        let kept = spool.keep_snapshot(id, &MODULE, &trusted, &second, &HashMap::new()).unwrap();
        assert_eq!(kept.bytes, second.bytes.len() as u64 + 5 + 4 + pack.len() as u64);
        let loaded = spool.load_snapshot(id, &MODULE).unwrap().unwrap().0;
        assert_eq!(loaded.hash, second.hash);
        let mut got: Vec<Vec<u8>> = loaded.blobs.iter().map(|b| b.data.clone()).collect();
        got.sort();
        let mut want = vec![b"1234".to_vec(), b"input".to_vec(), pack];
        want.sort();
        assert_eq!(got, want);
        // "12" is named by no snapshot kept: gone.
        let names = std::fs::read_dir(spool.blobs_dir(id)).unwrap().count();
        assert_eq!(names, 3);
        spool.remove_job(id);
        assert!(spool.load_snapshot(id, &MODULE).unwrap().is_none());
    }

    #[test]
    fn a_refused_snapshot_changes_nothing_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path());
        let host = key("host", 1);
        let stranger = key("host", 2);
        let trusted = |p: &[u8; 32]| p == host.public().as_bytes();
        let id = JobId { cluster: 1, proc: 0 };
        let (b, blobs) = snapshot(&host, &MODULE, &[("a", b"aaa")]);
        let good = data(b, blobs);
        spool.keep_snapshot(id, &MODULE, &trusted, &good, &HashMap::new()).unwrap();

        let (b, blobs) = snapshot(&stranger, &MODULE, &[("a", b"bbb")]);
        let e = spool
            .keep_snapshot(id, &MODULE, &trusted, &data(b, blobs), &HashMap::new())
            .unwrap_err();
        assert!(e.contains("does not trust"), "{e}");
        let (b, blobs) = snapshot(&host, &[6; 32], &[("a", b"bbb")]);
        let e = spool
            .keep_snapshot(id, &MODULE, &trusted, &data(b, blobs), &HashMap::new())
            .unwrap_err();
        assert!(e.contains("module"), "{e}");
        let (b, blobs) = snapshot(&host, &MODULE, &[("a", b"bbb"), ("c", b"ccc")]);
        let mut missing = data(b.clone(), blobs.clone());
        missing.blobs.retain(|b| b.data != b"ccc");
        let e = spool.keep_snapshot(id, &MODULE, &trusted, &missing, &HashMap::new()).unwrap_err();
        assert!(e.contains("was not sent"), "{e}");
        let mut wrong = data(b.clone(), blobs);
        wrong.blobs[0].data = b"xxx".to_vec();
        let e = spool.keep_snapshot(id, &MODULE, &trusted, &wrong, &HashMap::new()).unwrap_err();
        assert!(e.contains("does not match"), "{e}");
        let mut flipped = data(b, Vec::new());
        flipped.bytes[40] ^= 1;
        assert!(spool.keep_snapshot(id, &MODULE, &trusted, &flipped, &HashMap::new()).is_err());

        assert_eq!(spool.snapshot_hash(id), Some(good.hash.clone()));
        assert_eq!(spool.load_snapshot(id, &MODULE).unwrap().unwrap().0, good);
    }

    #[test]
    fn a_damaged_spool_file_is_reported_not_sent() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path());
        let host = key("host", 1);
        let trusted = |_: &[u8; 32]| true;
        let id = JobId { cluster: 2, proc: 0 };
        let (b, blobs) = snapshot(&host, &MODULE, &[("a", b"aaa")]);
        let snap = data(b, blobs);
        spool.keep_snapshot(id, &MODULE, &trusted, &snap, &HashMap::new()).unwrap();
        assert!(spool.load_snapshot(id, &[9; 32]).unwrap_err().contains("module"));
        let blob = spool.blobs_dir(id).join(&snap.blobs[0].name);
        std::fs::write(&blob, b"AAA").unwrap();
        assert!(spool.load_snapshot(id, &MODULE).unwrap_err().contains("file a"));
        let mut bytes = std::fs::read(spool.snapshot_path(id)).unwrap();
        bytes[20] ^= 0xff;
        std::fs::write(spool.snapshot_path(id), bytes).unwrap();
        assert!(spool.load_snapshot(id, &MODULE).unwrap_err().contains("no longer matches"));
    }
}
