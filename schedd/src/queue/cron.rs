//! Cron jobs and deferral: the next run of a cron job, missed windows.

use super::error::*;
use super::ops::*;
use super::txn::*;

use classad::Value;

use crate::attrs::ACTIVATION_PENDING;
use crate::deferral::{self, Deferral, Readiness};
use crate::job::{JobId, JobStatus, hold_code};
use crate::policy::HoldInfo;
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// Unix seconds as an RFC 3339 UTC time (hold reasons and notes).
pub(crate) fn fmt_time(t: i64) -> String {
    match jiff::Timestamp::from_second(t) {
        Ok(ts) => format!("{ts:.0}"),
        Err(_) => t.to_string(),
    }
}

/// The attributes of a cron schedule ([`andes_cron::Field::attribute`]).
pub(crate) static CRON_ATTRS: classad::Names<5> =
    classad::Names::new(andes_cron::Field::ALL_ATTRIBUTES);

impl Txn<'_, '_> {
    /// True when the job has a cron schedule.
    pub(crate) fn is_cron(&self, id: JobId) -> bool {
        self.state.job(id).is_some_and(|v| CRON_ATTRS.get().iter().any(|n| v.has(n)))
    }

    pub(crate) fn int_attr<N: classad::NameRef + ?Sized>(&self, id: JobId, name: &N) -> i64 {
        match self.state.job(id).map(|v| v.ad().eval_attr(name)) {
            Some(Value::Int(n)) => n,
            _ => 0,
        }
    }

    /// Sets a cron job's DeferralTime to its next run after now. A schedule
    /// that became invalid (edited) holds the job.
    pub(crate) fn schedule_cron(&mut self, id: JobId) -> Result<(), QueueError> {
        if !self.is_cron(id) {
            return Ok(());
        }
        let Some(ad) = self.state.job(id).map(|v| v.ad()) else { return Ok(()) };
        match deferral::next_run(&ad, self.now, &self.config.cron_time_zone) {
            Some(Ok(t)) => {
                if let Some(p) = self.state.jobs.get_mut(&id) {
                    p.ad.insert_value(classad::name!("DeferralTime"), t);
                }
                Ok(())
            }
            Some(Err(e)) => {
                let info = HoldInfo {
                    reason: e.to_string(),
                    code: hold_code::INVALID_CRON_SETTINGS,
                    subcode: 0,
                };
                self.hold(id, info).map(|_| ())
            }
            None => Ok(()),
        }
    }

    /// Notes runs skipped because the previous run of a cron job was still
    /// running when they came due (never two instances at once).
    pub(crate) fn note_skipped(&mut self, id: JobId) -> Result<(), QueueError> {
        let Some(ad) = self.state.job(id).map(|v| v.ad()) else { return Ok(()) };
        let Value::Int(last) = ad.eval_attr(classad::name!("DeferralTime")) else { return Ok(()) };
        let n = deferral::runs_between(&ad, last, self.now, &self.config.cron_time_zone);
        if n == 0 {
            return Ok(());
        }
        let total = self.int_attr(id, classad::name!("CronSkippedRuns")) + n as i64;
        if let Some(p) = self.state.jobs.get_mut(&id) {
            p.ad.insert_value(classad::name!("CronSkippedRuns"), total);
        }
        self.event(
            id,
            EventKind::Note(format!(
                "cron: {n} scheduled run(s) skipped: the run of {} was still running",
                fmt_time(last)
            )),
        )
    }

    /// An idle deferred job whose window closed before it was matched: a
    /// cron job counts the miss and takes its next run; any other is held.
    pub(crate) fn missed(&mut self, id: JobId) -> Result<(), QueueError> {
        let Some(v) = self.state.job(id) else { return Ok(()) };
        // Being started (its activation recorded): its host keeps its time.
        if v.proc.status != JobStatus::Idle
            || v.proc.ad.contains(classad::name!(ACTIVATION_PENDING))
        {
            return Ok(());
        }
        let ad = v.ad();
        let Some(Ok(d)) = Deferral::of(&ad, self.now, self.config.schedd_interval) else {
            return Ok(());
        };
        let Readiness::Missed { late } = d.readiness(self.now) else { return Ok(()) };
        if self.is_cron(id) {
            let extra = deferral::runs_between(
                &ad,
                d.time,
                self.now - d.window,
                &self.config.cron_time_zone,
            );
            let n = 1 + extra as i64;
            let total = self.int_attr(id, classad::name!("CronMissedRuns")) + n;
            if let Some(p) = self.state.jobs.get_mut(&id) {
                p.ad.insert_value(classad::name!("CronMissedRuns"), total);
            }
            self.event(
                id,
                EventKind::Note(format!(
                    "cron: {n} run(s) missed: no match before the run of {} closed \
                     (DeferralWindow {} s)",
                    fmt_time(d.time),
                    d.window
                )),
            )?;
            self.schedule_cron(id)?;
            return self.persist(id);
        }
        let info = HoldInfo {
            reason: format!(
                "Job missed its deferral time of {} by {late} seconds without being matched \
                 (DeferralWindow {} seconds)",
                fmt_time(d.time),
                d.window
            ),
            code: hold_code::MISSED_DEFERRED_EXECUTION_TIME,
            subcode: 0,
        };
        self.hold(id, info).map(|_| ())
    }
}
