//! What the schedd was evaluating when it died, so that it never dies on the
//! same input twice.
//!
//! Every expression a user writes is evaluated within a budget
//! ([`classad::budget`]), so no known input can take the schedd down. This
//! is the second line: before the queue evaluates a job's own expressions
//! (its periodic policy, its exit policy, `LeaveJobInQueue`) it writes which
//! job and what into a small journal beside the queue, and clears it after.
//! The write is one `pwrite` into the page cache (no sync): it survives the
//! process, which is what it guards against. A schedd that starts and finds
//! the journal naming a job quarantines it: the job is held (code 5, with a
//! reason saying so) and marked [`QUARANTINED`], and the queue evaluates
//! none of its expressions until someone releases it. The schedd then
//! serves as always; the input that stopped it is never replayed.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::job::JobId;

/// Set on a quarantined job: what the schedd was evaluating of it when it
/// died. Cleared by a release.
pub const QUARANTINED: &str = "Quarantined";

/// One record, padded: `"<what> <cluster>.<proc>"`.
const RECORD: usize = 64;

/// The journal of what is being evaluated (`job_queue.evaluating` beside
/// the database).
pub struct Journal {
    file: Option<File>,
    path: PathBuf,
}

/// What the journal named when the schedd started: it died evaluating this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crashed {
    /// The job.
    pub job: JobId,
    /// What of it (`periodic policy`, `exit policy`, `LeaveJobInQueue`).
    pub what: String,
}

impl Journal {
    /// The journal for a queue at `db`, and what it names, if the last
    /// schedd died evaluating something. A journal that cannot be written
    /// is reported and skipped: it is a safeguard, not a condition to run.
    pub fn open(db: &Path) -> (Journal, Option<Crashed>) {
        let path = db.with_extension("evaluating");
        let crashed = std::fs::read(&path).ok().and_then(|b| parse(&b));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
            .map_err(|e| tracing::warn!("{}: {e}; no evaluation journal", path.display()))
            .ok();
        (Journal { file, path }, crashed)
    }

    /// A journal that records nothing (for tests that need none).
    pub fn none() -> Journal {
        Journal { file: None, path: PathBuf::new() }
    }

    /// Records that `what` of job `id` is about to be evaluated; the record
    /// is cleared when the guard drops.
    pub fn enter(&self, id: JobId, what: &'static str) -> Entered<'_> {
        let text = format!("{what} {id}");
        self.write(text.as_bytes());
        Entered(self)
    }

    fn write(&self, text: &[u8]) {
        let Some(f) = &self.file else { return };
        let mut rec = [b' '; RECORD];
        let n = text.len().min(RECORD - 1);
        rec[..n].copy_from_slice(&text[..n]);
        rec[RECORD - 1] = b'\n';
        if let Err(e) = write_at(f, &rec) {
            tracing::warn!("{}: {e}", self.path.display());
        }
    }
}

/// A job being evaluated; clears the journal when dropped.
pub struct Entered<'a>(&'a Journal);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.0.write(b"");
    }
}

fn parse(bytes: &[u8]) -> Option<Crashed> {
    let text = std::str::from_utf8(bytes).ok()?.trim();
    let (what, id) = text.rsplit_once(' ')?;
    let job = match id.parse().ok()? {
        crate::job::JobSelector::Job(j) => j,
        _ => return None,
    };
    Some(Crashed { job, what: what.to_string() })
}

#[cfg(unix)]
fn write_at(f: &File, rec: &[u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, rec, 0)
}

#[cfg(windows)]
fn write_at(f: &File, rec: &[u8]) -> std::io::Result<()> {
    let n = std::os::windows::fs::FileExt::seek_write(f, rec, 0)?;
    if n == rec.len() { Ok(()) } else { Err(std::io::Error::other("short write")) }
}

#[cfg(not(any(unix, windows)))]
fn write_at(_: &File, _: &[u8]) -> std::io::Result<()> {
    Ok(())
}

/// Fault injection for the tests of this module's promise, in debug builds
/// only: with `ANDES_FAULT_ABORT_ON` naming an attribute, evaluating a job
/// whose ad has it aborts the process, as an input that crashed the
/// evaluator would. Release builds have no such door.
pub fn fault_point(ad: &classad::ClassAd) {
    #[cfg(debug_assertions)]
    if let Some(attr) = std::env::var_os("ANDES_FAULT_ABORT_ON")
        && ad.contains(&attr.to_string_lossy())
    {
        eprintln!("andes: fault injection: aborting while evaluating a job with {attr:?}");
        std::process::abort();
    }
    #[cfg(not(debug_assertions))]
    let _ = ad;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_names_what_was_being_evaluated_when_the_process_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("job_queue.db");
        let (j, crashed) = Journal::open(&db);
        assert_eq!(crashed, None);
        {
            let _e = j.enter(JobId::new(7, 3), "periodic policy");
        }
        // Cleared after a clean evaluation.
        assert_eq!(Journal::open(&db).1, None);
        let (j, _) = Journal::open(&db);
        let e = j.enter(JobId::new(12, 0), "exit policy");
        // The process dies here: the guard never drops.
        std::mem::forget(e);
        let (_, crashed) = Journal::open(&db);
        assert_eq!(crashed, Some(Crashed { job: JobId::new(12, 0), what: "exit policy".into() }));
        // Named once: the next start finds it clear.
        assert_eq!(Journal::open(&db).1, None);
    }
}
