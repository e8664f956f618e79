//! What the schedd was evaluating when it died, so that it never dies on the
//! same input twice.
//!
//! Every expression a user writes is evaluated within a budget
//! ([`classad::budget`]), so no known input can take the schedd down. This
//! is the second line: before the queue evaluates a job's own expressions
//! (its periodic policy, its exit policy, `LeaveJobInQueue`) it writes which
//! job and what into a small journal beside the queue
//! ([`andes_protocol::journal`]), and clears it after. A schedd that starts and finds
//! the journal naming a job quarantines it: the job is held (code 5, with a
//! reason saying so) and marked [`QUARANTINED`], and the queue evaluates
//! none of its expressions until someone releases it. The schedd then
//! serves as always; the input that stopped it is never replayed.

use std::path::Path;

use crate::job::JobId;

/// Set on a quarantined job: what was being evaluated of it when a daemon
/// died (or failed). Cleared by a release.
pub const QUARANTINED: &str = "Quarantined";

/// The journal of what the queue is evaluating (`job_queue.evaluating`
/// beside the database): one record, `"<what> <cluster>.<proc>"`.
pub struct Journal(andes_protocol::journal::Journal);

/// What the journal named when the schedd started: it died evaluating this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crashed {
    /// The job.
    pub job: JobId,
    /// What of it (`periodic policy`, `exit policy`, `LeaveJobInQueue`).
    pub what: String,
}

impl Crashed {
    /// The hold reason of a job quarantined for this.
    pub fn reason(&self) -> String {
        format!(
            "the schedd stopped while evaluating this job's {}; it is held, and none of its \
             expressions is evaluated, so that it cannot stop the schedd again (release it \
             once they are fixed)",
            self.what
        )
    }
}

impl Journal {
    /// The journal for a queue at `db`, and what it names, if the last
    /// schedd died evaluating something.
    pub fn open(db: &Path) -> (Journal, Option<Crashed>) {
        let (j, found) =
            andes_protocol::journal::Journal::open(&db.with_extension("evaluating"), 1);
        (Journal(j), found.first().and_then(|l| parse(l)))
    }

    /// A journal that records nothing (for tests that need none).
    pub fn none() -> Journal {
        Journal(andes_protocol::journal::Journal::none())
    }

    /// Records that `what` of job `id` is about to be evaluated; the record
    /// is cleared when the guard drops.
    pub fn enter(&self, id: JobId, what: &'static str) -> andes_protocol::journal::Entered<'_> {
        self.0.enter(0, &format!("{what} {id}"))
    }
}

fn parse(text: &str) -> Option<Crashed> {
    let (what, id) = text.trim().rsplit_once(' ')?;
    let job = match id.parse().ok()? {
        crate::job::JobSelector::Job(j) => j,
        _ => return None,
    };
    Some(Crashed { job, what: what.to_string() })
}

/// Fault injection for the tests of this module's promise (see
/// [`andes_protocol::journal::fault_point`]).
pub fn fault_point(ad: &classad::ClassAd) {
    andes_protocol::journal::fault_point(|a| ad.contains(a));
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
