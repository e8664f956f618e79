//! What the execute host was evaluating when it died, so that it never dies
//! on the same job twice.
//!
//! Every expression is evaluated within a budget (`classad::budget`), so no
//! known input can take the host down. This is the second line, as the
//! schedd and the central manager have it: the startd's evaluator tells
//! its [`Watcher`] whose job ad it is about to evaluate (the claim's
//! request, the job's START and policy), and the host writes that job's
//! GlobalJobId into a one-record journal in EXECUTE
//! (`.startd.evaluating`, [`andes_protocol::journal`]), blanked when the
//! startd is done; the daemon does the same (record 1) while it handles a
//! job outside the startd (a claim's request, an activation, a job's
//! start). A host that starts after an abort and finds the journal naming a job
//! quarantines it: the job's id goes on a list kept beside it
//! (`.startd.quarantine`, the daemon's alone, at most [`MAX_QUARANTINED`]
//! entries, the oldest dropped first), and the host refuses to claim a slot
//! for that job or to run it, with a reason that says so
//! ([`andes_protocol::pool::quarantined_refusal`]), on which the schedd
//! holds the job (code 5). A job fixed and submitted again has a new id.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use andes_protocol::journal::{Journal, fault_point};
use andes_startd::Watcher;
use classad::{ClassAd, Value};

/// The most jobs a host keeps quarantined.
pub const MAX_QUARANTINED: usize = 10_000;

/// The jobs this host will not evaluate again, and its journal.
pub struct Quarantine {
    journal: Arc<Journal>,
    file: Option<PathBuf>,
    /// GlobalJobId → when it was quarantined (Unix seconds).
    jobs: Mutex<BTreeMap<String, i64>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Quarantine {
    /// The quarantine kept in `dir` (EXECUTE): the list, with the job the
    /// journal names added to it if the last host died evaluating one.
    pub fn open(dir: &Path, now: i64) -> Quarantine {
        let file = dir.join(".startd.quarantine");
        let jobs = match std::fs::read(&file) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
                tracing::warn!("{}: not a quarantine list ({e}); ignored", file.display());
                BTreeMap::new()
            }),
            Err(_) => BTreeMap::new(),
        };
        let (journal, found) = Journal::open(&dir.join(".startd.evaluating"), 2);
        let q = Quarantine { journal: Arc::new(journal), file: Some(file), jobs: Mutex::new(jobs) };
        for gid in found.into_iter().collect::<std::collections::BTreeSet<_>>() {
            tracing::error!(
                "the host stopped while evaluating the ad of job {gid}: quarantining it"
            );
            q.add(gid, now);
        }
        q
    }

    /// A quarantine that keeps nothing (for daemons with nowhere to keep one).
    pub fn none() -> Quarantine {
        Quarantine { journal: Arc::new(Journal::none()), file: None, jobs: Mutex::default() }
    }

    /// The startd's [`Watcher`]: journals whose job ad it evaluates.
    pub fn watcher(&self) -> Watcher {
        let journal = self.journal.clone();
        Box::new(move |ad: Option<&ClassAd>| match ad {
            Some(ad) => {
                if let Value::Str(gid) = ad.eval_attr(classad::name!("GlobalJobId")) {
                    journal.mark(0, &gid);
                }
                fault_point("startd", |a| ad.contains(a));
            }
            None => journal.clear(0),
        })
    }

    /// Records that the daemon handles job `ad` (a claim's request, an
    /// activation, a job's start: what it evaluates of the job outside the
    /// startd) until the guard drops. The startd's own evaluations have
    /// record 0; this is record 1.
    pub fn handling(&self, ad: &ClassAd) -> Handling {
        let gid = match ad.eval_attr(classad::name!("GlobalJobId")) {
            Value::Str(gid) => Some(gid.to_string()),
            _ => None,
        };
        if let Some(gid) = &gid {
            self.journal.mark(1, gid);
            fault_point("host", |a| ad.contains(a));
        }
        Handling { journal: gid.map(|_| self.journal.clone()) }
    }

    /// Whether job `gid` (its GlobalJobId) is quarantined here.
    pub fn holds(&self, gid: &str) -> bool {
        lock(&self.jobs).contains_key(gid)
    }

    /// Whether the job of `ad` is quarantined here.
    pub fn holds_ad(&self, ad: &ClassAd) -> Option<String> {
        match ad.eval_attr(classad::name!("GlobalJobId")) {
            Value::Str(gid) if self.holds(&gid) => Some(gid.to_string()),
            _ => None,
        }
    }

    /// Quarantines job `gid` and keeps the list on disk.
    pub fn add(&self, gid: String, now: i64) {
        let mut jobs = lock(&self.jobs);
        jobs.insert(gid, now);
        while jobs.len() > MAX_QUARANTINED {
            let oldest = jobs.iter().min_by_key(|(_, t)| **t).map(|(g, _)| g.clone());
            match oldest {
                Some(g) => jobs.remove(&g),
                None => break,
            };
        }
        let Some(file) = &self.file else { return };
        // Atomically, as the central manager's list; the daemon's alone.
        let write = serde_json::to_vec_pretty(&*jobs)
            .map_err(std::io::Error::other)
            .and_then(|b| andes_beneath::replace_file(file, &b, 0o600));
        if let Err(e) = write {
            tracing::warn!("{}: {e}", file.display());
        }
    }
}

/// A job the daemon handles (see [`Quarantine::handling`]); its record is
/// blanked on drop.
pub struct Handling {
    journal: Option<Arc<Journal>>,
}

impl Drop for Handling {
    fn drop(&mut self) {
        if let Some(j) = &self.journal {
            j.clear(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(gid: &str) -> ClassAd {
        classad::parse_ad(&format!("[GlobalJobId = \"{gid}\"; Owner = \"bob\"]")).unwrap()
    }

    #[test]
    fn a_job_being_evaluated_when_the_host_stopped_is_quarantined_at_the_next_start() {
        let dir = tempfile::tempdir().unwrap();
        let q = Quarantine::open(dir.path(), 100);
        let mut w = q.watcher();
        w(Some(&job("s#1.0#1")));
        w(None);
        w(Some(&job("s#2.0#1")));
        drop(q.handling(&job("s#3.0#1")));
        let h = q.handling(&job("s#2.0#1"));
        // The host aborts here: the watcher never hears `None`, the guard
        // never drops.
        std::mem::forget(h);
        drop(w);
        drop(q);
        andes_protocol::journal::mark_aborted(&dir.path().join(".startd.evaluating")).unwrap();
        let q = Quarantine::open(dir.path(), 200);
        assert!(q.holds("s#2.0#1"));
        assert!(!q.holds("s#1.0#1"), "evaluated without harm");
        assert!(!q.holds("s#3.0#1"), "handled without harm");
        assert_eq!(q.holds_ad(&job("s#2.0#1")).as_deref(), Some("s#2.0#1"));
        // Kept across later starts, which find the journal clear.
        let q = Quarantine::open(dir.path(), 300);
        assert!(q.holds("s#2.0#1"));
    }

    #[test]
    fn the_list_is_bounded_and_drops_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let q = Quarantine::open(dir.path(), 0);
        for i in 0..MAX_QUARANTINED as i64 + 5 {
            lock(&q.jobs).insert(format!("s#{i}.0#1"), i);
        }
        q.add("s#new.0#1".into(), i64::MAX);
        assert_eq!(lock(&q.jobs).len(), MAX_QUARANTINED);
        assert!(q.holds("s#new.0#1"));
        assert!(!q.holds("s#0.0#1"));
    }

    #[test]
    fn the_refusal_names_the_job_for_the_schedd() {
        let r = andes_protocol::pool::quarantined_refusal("s#7.3#9");
        assert_eq!(andes_protocol::pool::quarantined_job(&r), Some("s#7.3#9"));
        assert_eq!(andes_protocol::pool::quarantined_job("claim pending"), None);
    }
}
