//! The replay cache's file: every accepted nonce, so that a daemon killed (even with
//! `kill -9`) and started again still refuses a request it accepted before, for as long
//! as that request's timestamp is inside the window.
//!
//! The file is append-only between rewrites: an 8-byte magic `andesRC1`, then one
//! 56-byte record per accepted request (the signer's key, 32 bytes; the nonce's
//! 16-byte digest; the time the nonce may be forgotten, Unix seconds, 8 bytes little
//! endian). Each record is one `write` to the operating system with no `fsync`: a
//! killed process loses nothing the kernel has, though a power failure may. When the
//! file holds many more records than are still inside the window it is rewritten with
//! the live ones (a new file renamed over the old), and the same happens when it is
//! opened, which also drops a record cut short by a kill.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The magic that starts the file.
pub const MAGIC: &[u8; 8] = b"andesRC1";
/// Bytes per record.
pub const RECORD_LEN: usize = 56;

/// One remembered nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The key that signed the request.
    pub key: [u8; 32],
    /// The digest of key and nonce the cache keys on.
    pub id: [u8; 16],
    /// When the nonce may be forgotten (its timestamp + the window), Unix seconds.
    pub expiry: i64,
}

impl Record {
    fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[..32].copy_from_slice(&self.key);
        b[32..48].copy_from_slice(&self.id);
        b[48..].copy_from_slice(&self.expiry.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Record> {
        Some(Record {
            key: b.get(..32)?.try_into().ok()?,
            id: b.get(32..48)?.try_into().ok()?,
            expiry: i64::from_le_bytes(b.get(48..56)?.try_into().ok()?),
        })
    }
}

/// A replay-cache file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ReplayLogError {
    /// Reading or writing failed.
    #[error("replay cache {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a replay cache.
    #[error(
        "replay cache {path} is not an andes replay cache (it does not start with `andesRC1`); \
         if it is, it was damaged: stop the daemon, wait as long as the clock-skew window \
         (5 minutes by default) so that no request it accepted can still be replayed, \
         then remove the file"
    )]
    NotACache {
        /// The file.
        path: PathBuf,
    },
}

/// The open replay-cache file.
#[derive(Debug)]
pub struct ReplayLog {
    path: PathBuf,
    file: File,
    records: usize,
}

impl ReplayLog {
    /// Opens (creating it, mode 0600, if missing) the file at `path` and returns it
    /// with the records whose expiry is not before `now`; the file is rewritten with
    /// only those.
    pub fn open(path: &Path, now: i64) -> Result<(ReplayLog, Vec<Record>), ReplayLogError> {
        let io = |source| ReplayLogError::Io { path: path.to_path_buf(), source };
        let mut live = Vec::new();
        match File::open(path) {
            Ok(mut f) => {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes).map_err(io)?;
                if !bytes.is_empty() {
                    let body = bytes
                        .strip_prefix(&MAGIC[..])
                        .ok_or_else(|| ReplayLogError::NotACache { path: path.to_path_buf() })?;
                    // A trailing partial record (a kill in the middle of a write) is dropped.
                    live.extend(
                        body.chunks_exact(RECORD_LEN)
                            .filter_map(Record::decode)
                            .filter(|r| r.expiry >= now),
                    );
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let file = write_new(path, &live).map_err(io)?;
        Ok((ReplayLog { path: path.to_path_buf(), file, records: live.len() }, live))
    }

    /// Appends one record (one write, no fsync).
    pub fn append(&mut self, r: &Record) -> Result<(), ReplayLogError> {
        self.file
            .write_all(&r.encode())
            .map_err(|source| ReplayLogError::Io { path: self.path.clone(), source })?;
        self.records += 1;
        Ok(())
    }

    /// Records in the file now.
    pub fn records(&self) -> usize {
        self.records
    }

    /// Replaces the file by one holding only `live`.
    pub fn rewrite(&mut self, live: &[Record]) -> Result<(), ReplayLogError> {
        self.file = write_new(&self.path, live)
            .map_err(|source| ReplayLogError::Io { path: self.path.clone(), source })?;
        self.records = live.len();
        Ok(())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn write_new(path: &Path, live: &[Record]) -> std::io::Result<File> {
    let mut bytes = Vec::with_capacity(MAGIC.len() + live.len() * RECORD_LEN);
    bytes.extend_from_slice(MAGIC);
    for r in live {
        bytes.extend_from_slice(&r.encode());
    }
    andes_beneath::replace_file(path, &bytes, 0o600)?;
    OpenOptions::new().append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(n: u8, expiry: i64) -> Record {
        Record { key: [n; 32], id: [n; 16], expiry }
    }

    #[test]
    fn records_survive_reopening_and_expired_ones_go() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("replay");
        let (mut log, live) = ReplayLog::open(&p, 100).unwrap();
        assert!(live.is_empty());
        for (n, e) in [(1, 150), (2, 250), (3, 350)] {
            log.append(&rec(n, e)).unwrap();
        }
        drop(log);
        let (log, live) = ReplayLog::open(&p, 200).unwrap();
        assert_eq!(live, vec![rec(2, 250), rec(3, 350)]);
        assert_eq!(log.records(), 2);
        assert_eq!(std::fs::metadata(&p).unwrap().len() as usize, 8 + 2 * RECORD_LEN);
    }

    #[test]
    fn a_torn_last_record_is_dropped_and_a_foreign_file_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("replay");
        let (mut log, _) = ReplayLog::open(&p, 0).unwrap();
        log.append(&rec(1, 10)).unwrap();
        drop(log);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(&[9; 20]).unwrap();
        drop(f);
        let (mut log, live) = ReplayLog::open(&p, 0).unwrap();
        assert_eq!(live, vec![rec(1, 10)]);
        log.append(&rec(2, 10)).unwrap();
        drop(log);
        assert_eq!(ReplayLog::open(&p, 0).unwrap().1, vec![rec(1, 10), rec(2, 10)]);
        std::fs::write(&p, b"something else entirely").unwrap();
        let e = ReplayLog::open(&p, 0).unwrap_err();
        assert!(e.to_string().contains("is not an andes replay cache"), "{e}");
    }
}
