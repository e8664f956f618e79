//! The host's reports as a shadow reads them: how a shadow begins
//! ([`Start`]), and a claim's reports viewed for one job ([`Ends`]).

use std::collections::HashMap;

use andes_protocol::pool::{JobEnd, JobReport, RunState};

/// How a job's shadow begins.
/// Why an activation gave no report.
#[derive(Debug)]
pub(crate) struct NotActivated {
    pub(crate) reason: String,
    /// The request may have reached the host (the connection failed after it
    /// was sent): the job may be running there.
    pub(crate) ambiguous: bool,
}

pub(crate) enum Start {
    /// It activates the claim with the job alone.
    Activate,
    /// The schedd restarted: it reconnects to the running job.
    Reconnect,
    /// Its activation went unanswered (the reason): the host says whether
    /// it runs; if not, that counts as a failed activation.
    Unanswered(String),
    /// The job was queued behind others; this is the claim's last report.
    Queued(Box<JobReport>),
}

impl Start {
    pub(crate) fn into_report(self) -> Option<JobReport> {
        match self {
            Start::Queued(r) => Some(*r),
            _ => None,
        }
    }
}

/// The ends of an activation's jobs seen so far, by `GlobalJobId`: a job
/// queued behind others learns how it ended from any report that said so.
#[derive(Default)]
pub(crate) struct Ends {
    pub(crate) ended: HashMap<String, JobEnd>,
    /// The last report viewed, as the host sent it (see `light`): what the
    /// job queued behind starts from. A view of an ended job rewrites its
    /// report as that job's, so the report's own job (by then perhaps the
    /// next one, already running) is kept here.
    pub(crate) last: Option<JobReport>,
}

/// What a report says of one job.
pub(crate) enum Viewed {
    /// It is about the job (running, or how it ended).
    Mine(JobReport),
    /// The job has not run yet (or was dropped: see `queued` and `claim_alive`).
    NotYet(JobReport),
}

impl Ends {
    /// Notes the ends `report` carries, and says what it tells of job `gid`.
    pub(crate) fn view(&mut self, mut report: JobReport, gid: &str) -> Viewed {
        for e in report.ended.drain(..) {
            self.ended.insert(e.job.clone(), e);
        }
        self.last = Some(light(&report));
        let current = report.job.as_deref() == Some(gid);
        match self.ended.get(gid) {
            // The end of a job that is not the report's own is in its entry;
            // the report's own keeps everything else it says (snapshots,
            // saved states).
            Some(e) if !current || report.state == RunState::Exited => {
                if !current {
                    report.saved_state = None;
                    report.snapshot = None;
                }
                report.job = Some(gid.to_string());
                report.state = RunState::Exited;
                report.update = e.update.clone();
                report.ending = Some(e.ending.clone());
                report.outputs = e.outputs.clone();
                report.evicted = e.evicted;
                report.log = e.log.clone();
                Viewed::Mine(report)
            }
            _ if current => Viewed::Mine(report),
            _ => Viewed::NotYet(report),
        }
    }

    /// The report the job queued behind starts from, once the job `mine`
    /// (the last viewed) is over: the last report as the host sent it.
    pub(crate) fn behind(&mut self, mine: &JobReport) -> JobReport {
        self.last.take().unwrap_or_else(|| light(mine))
    }
}

/// A report with no job, for the claim as it is (`alive`) when none came.
pub(crate) fn no_report(alive: bool) -> JobReport {
    JobReport {
        version: 0,
        state: RunState::Idle,
        job: None,
        update: String::new(),
        ending: None,
        outputs: Vec::new(),
        evicted: false,
        log: Vec::new(),
        claim_alive: alive,
        saved_state: None,
        snapshot: None,
        ended: Vec::new(),
        queued: 0,
    }
}

/// `r` without what only its own job needs, for the job queued behind.
pub(crate) fn light(r: &JobReport) -> JobReport {
    JobReport {
        version: r.version,
        state: r.state,
        job: r.job.clone(),
        queued: r.queued,
        evicted: r.evicted,
        ..no_report(r.claim_alive)
    }
}
