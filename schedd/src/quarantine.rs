//! What the schedd was evaluating when it died, so that it never dies on the
//! same input twice.
//!
//! Every expression a user writes is evaluated within a budget
//! ([`classad::budget`]), so no known input can take the schedd down. This
//! is the second line: before the schedd evaluates a job's ad on its own
//! initiative (the queue: its periodic policy, its exit policy,
//! `LeaveJobInQueue`, and every operation on one job it makes itself: a
//! run's start, a shadow's update, a run's end, a routed copy, a missed
//! deferral, a cron schedule; a shadow: its Requirements against the slot a claim
//! would reuse, its `$$()` references; the job router: the source
//! constraint, each route's Requirements, the route's transform) it writes
//! which job and what into a small journal beside the queue
//! ([`andes_protocol::journal`], one record per evaluation in flight), and
//! clears it after. A schedd that starts and finds the journal naming jobs
//! after an abort (a kill from outside blames nothing: see
//! [`andes_protocol::journal`]) quarantines them: each is held (code 5, with a reason saying so) and
//! marked [`QUARANTINED`], and nothing evaluates its expressions until
//! someone releases it. The schedd then serves as always; the input that
//! stopped it is never replayed.
//!
//! What a user's request evaluates (a query's constraint) is the
//! requester's own doing, bounded by the budget, and is not replayed by a
//! restart: it is not journaled.

use std::path::Path;

use crate::job::JobId;

/// Set on a quarantined job: what was being evaluated of it when a daemon
/// died (or failed). Cleared by a release.
pub const QUARANTINED: &str = "Quarantined";

/// The journal of what the schedd is evaluating (`job_queue.evaluating`
/// beside the database): one record per evaluation in flight,
/// `"<what> <cluster>.<proc>"`.
pub struct Journal(andes_protocol::journal::Journal);

/// Evaluations the journal records at once (the queue's writer, shadows'
/// matching, the router); more in flight go unrecorded, with a warning.
const RECORDS: usize = andes_protocol::journal::MAX_SLOTS;

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
    /// The journal for a queue at `db`, and what it names: what the last
    /// schedd was evaluating when it died (empty after a clean stop).
    pub fn open(db: &Path) -> (Journal, Vec<Crashed>) {
        let (j, found) =
            andes_protocol::journal::Journal::open(&db.with_extension("evaluating"), RECORDS);
        // One job may be named twice (an op, and the policy within it): the
        // later record, the inner one, says more.
        let mut crashed: Vec<Crashed> = Vec::new();
        for c in found.iter().filter_map(|l| parse(l)) {
            crashed.retain(|k| k.job != c.job);
            crashed.push(c);
        }
        (Journal(j), crashed)
    }

    /// A journal that records nothing (for tests that need none).
    pub fn none() -> Journal {
        Journal(andes_protocol::journal::Journal::none())
    }

    /// Records that `what` of job `id` is about to be evaluated (from any
    /// thread); the record is cleared when the guard drops.
    pub fn enter(&self, id: JobId, what: &'static str) -> andes_protocol::journal::Entered<'_> {
        self.0.enter_free(&format!("{what} {id}"))
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

/// Fault injection for the tests of this module's promise, at the fault
/// point `site` (see [`andes_protocol::journal::fault_point`]).
pub fn fault_point(site: &str, ad: &classad::ClassAd) {
    andes_protocol::journal::fault_point(site, |a| ad.contains(a));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_names_what_was_being_evaluated_when_the_process_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("job_queue.db");
        let (j, crashed) = Journal::open(&db);
        assert_eq!(crashed, vec![]);
        {
            let _e = j.enter(JobId::new(7, 3), "periodic policy");
        }
        // Cleared after a clean evaluation.
        assert_eq!(Journal::open(&db).1, vec![]);
        let (j, _) = Journal::open(&db);
        let e = j.enter(JobId::new(12, 0), "exit policy");
        let f = j.enter(JobId::new(13, 1), "Requirements, against a claimed slot");
        // The process dies here: the guards never drop.
        std::mem::forget(e);
        std::mem::forget(f);
        drop(j);
        let journal = db.with_extension("evaluating");
        let killed = std::fs::read(&journal).unwrap();
        // Killed from outside, it blames nothing.
        assert_eq!(Journal::open(&db).1, vec![]);
        // Of an abort, it names both.
        std::fs::write(&journal, killed).unwrap();
        andes_protocol::journal::mark_aborted(&journal).unwrap();
        let (_, crashed) = Journal::open(&db);
        assert_eq!(
            crashed,
            vec![
                Crashed { job: JobId::new(12, 0), what: "exit policy".into() },
                Crashed {
                    job: JobId::new(13, 1),
                    what: "Requirements, against a claimed slot".into()
                },
            ]
        );
        // Named once: the next start finds it clear.
        assert_eq!(Journal::open(&db).1, vec![]);
        // Named twice, by an op and the policy within it: once, as the policy.
        let (j, _) = Journal::open(&db);
        std::mem::forget(j.enter(JobId::new(5, 0), "end of a run"));
        std::mem::forget(j.enter(JobId::new(5, 0), "exit policy"));
        drop(j);
        andes_protocol::journal::mark_aborted(&journal).unwrap();
        let (_, crashed) = Journal::open(&db);
        assert_eq!(crashed, vec![Crashed { job: JobId::new(5, 0), what: "exit policy".into() }]);
    }
}
