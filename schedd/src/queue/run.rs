//! A job's run as the pool reports it: started, updates, suspension,
//! eviction, exit, and the periodic and exit policy.

use super::error::*;
use super::ops::*;
use super::routed::*;
use super::state::*;
use super::txn::*;
use crate::attrs::{ACTIVATION_PENDING, CLAIM_ID_ATTR, ROUTED_TO};

use classad::{ClassAd, EvalOptions, Evaluator, Expr, Value};

use crate::job::{JobId, JobStatus, hold_code};
use crate::policy::{self, ExitDecision, HoldInfo, PeriodicAction};
use crate::quarantine::{self, QUARANTINED};
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// Attributes of the job's whole life that the schedd keeps itself: an
/// execute host's figure for its own run never replaces them.
pub(crate) static LIFETIME_ATTRS: classad::Names<3> =
    classad::Names::new(["CumulativeSuspensionTime", "RemoteWallClockTime", "CumulativeSlotTime"]);

/// A run is over: its wall-clock time (the host's figure for it, else the
/// time since JobCurrentStartDate) is added to the job's RemoteWallClockTime
/// (HTCondor's: cumulative over all runs, suspensions included) and, times
/// the CPUs the job held (its SlotWeight), to CumulativeSlotTime.
pub(crate) fn add_run_time(ad: &mut ClassAd, run: &ClassAd, now: i64) {
    let num = |v: Value| match v {
        Value::Int(i) => Some(i as f64),
        Value::Real(r) if r.is_finite() => Some(r),
        _ => None,
    };
    let wall = num(run.eval_attr(classad::name!("RemoteWallClockTime")))
        .or_else(|| {
            num(ad.eval_attr(classad::name!("JobCurrentStartDate"))).map(|t| now as f64 - t)
        })
        .map(|w| w.clamp(0.0, 1e12));
    let Some(wall) = wall else { return };
    let cpus =
        num(ad.eval_attr(classad::name!("RequestCpus"))).filter(|c| *c >= 1.0).unwrap_or(1.0);
    let total = num(ad.eval_attr(classad::name!("RemoteWallClockTime"))).unwrap_or(0.0) + wall;
    let slot = num(ad.eval_attr(classad::name!("CumulativeSlotTime"))).unwrap_or(0.0) + wall * cpus;
    ad.insert_value(classad::name!("RemoteWallClockTime"), total);
    ad.insert_value(classad::name!("CumulativeSlotTime"), slot);
}

/// Merges what an execute host reports into a job's ad, but for
/// [`LIFETIME_ATTRS`].
pub(crate) fn update_from_host(ad: &mut ClassAd, attrs: &ClassAd) {
    if LIFETIME_ATTRS.get().iter().any(|a| attrs.contains(a)) {
        let mut attrs = attrs.clone();
        attrs.remove_all(LIFETIME_ATTRS.get());
        ad.update(&attrs);
    } else {
        ad.update(attrs);
    }
}

impl Txn<'_, '_> {
    pub(crate) fn started(&mut self, id: JobId) -> Result<(), QueueError> {
        let now = self.now;
        let Some(p) = self.state.jobs.get_mut(&id) else {
            return Err(QueueError::NotFound(format!("job {id} is not in the queue")));
        };
        if p.status != JobStatus::Idle {
            return Err(QueueError::Invalid(format!(
                "job {id} cannot start: status {}",
                p.status.letter()
            )));
        }
        let starts = match p.ad.eval_attr(classad::name!("NumJobStarts")) {
            Value::Int(n) => n,
            _ => 0,
        };
        p.ad.insert_value(classad::name!("NumJobStarts"), starts + 1);
        p.ad.insert_value(classad::name!("NumShadowStarts"), starts + 1);
        if !p.ad.contains(classad::name!("JobStartDate")) {
            p.ad.insert_value(classad::name!("JobStartDate"), now);
        }
        p.ad.insert_value(classad::name!("JobCurrentStartDate"), now);
        self.set_status(id, JobStatus::Running);
        self.persist(id)?;
        self.event(id, EventKind::Executing)?;
        self.mirror(id)
    }

    pub(crate) fn pool_op(&mut self, id: JobId, op: &PoolOp) -> Result<(), QueueError> {
        if let PoolOp::Quarantined { what, reason } = op {
            if self.state.jobs.get(&id).is_some_and(|p| p.status == JobStatus::Idle) {
                return self.quarantine(id, what, reason.clone());
            }
            return Ok(());
        }
        let now = self.now;
        let Some(p) = self.state.jobs.get_mut(&id) else { return Ok(()) };
        let int = |ad: &ClassAd, n: &str| match ad.eval_attr(n) {
            Value::Int(v) => v,
            _ => 0,
        };
        match op {
            PoolOp::Quarantined { .. } => {}
            PoolOp::Matched => {
                let n = int(&p.ad, "NumJobMatches");
                p.ad.insert_value(classad::name!("NumJobMatches"), n + 1);
                p.ad.insert_value(classad::name!("LastMatchTime"), now);
            }
            PoolOp::Rejected(reason) => {
                if p.status != JobStatus::Idle {
                    return Ok(());
                }
                p.ad.insert_value(classad::name!("LastRejMatchReason"), reason.as_str());
                p.ad.insert_value(classad::name!("LastRejMatchTime"), now);
            }
            PoolOp::Activating(attrs) => {
                if p.status != JobStatus::Idle {
                    return Err(QueueError::Invalid(format!(
                        "job {id} cannot start: status {}",
                        p.status.letter()
                    )));
                }
                // Routed meanwhile: its copy runs it (in the same
                // transaction order as the route, so one or the other).
                if p.ad.contains(classad::name!(ROUTED_TO)) {
                    return Err(QueueError::Invalid(format!(
                        "job {id} cannot start: it is routed"
                    )));
                }
                update_from_host(&mut p.ad, attrs);
                p.ad.insert_value(classad::name!(ACTIVATION_PENDING), true);
            }
            PoolOp::NotStarted(claim) => {
                let same = matches!(p.ad.eval_attr(classad::name!(CLAIM_ID_ATTR)), Value::Str(c) if *c == **claim);
                // Idle, or held or removed meanwhile: the claim is not the job's.
                let running = p.status.is_active();
                if !running && same && p.ad.remove(classad::name!(ACTIVATION_PENDING)).is_some() {
                    for a in [CLAIM_ID_ATTR, "StartdAddr", "RemoteHost"] {
                        p.ad.remove(a);
                    }
                }
            }
            PoolOp::ActivationFailed(claim, reason) => {
                let same = matches!(p.ad.eval_attr(classad::name!(CLAIM_ID_ATTR)), Value::Str(c) if *c == **claim);
                if p.status.is_active() || !same {
                    return Ok(());
                }
                p.ad.remove(classad::name!(ACTIVATION_PENDING));
                for a in [CLAIM_ID_ATTR, "StartdAddr", "RemoteHost"] {
                    p.ad.remove(a);
                }
                let n = int(&p.ad, "NumShadowExceptions") + 1;
                p.ad.insert_value(classad::name!("NumShadowExceptions"), n);
                p.ad.insert_value(classad::name!("LastShadowException"), reason.as_str());
                if n >= MAX_ACTIVATION_FAILURES && p.status == JobStatus::Idle {
                    let info = HoldInfo {
                        reason: format!(
                            "the job could not be started on {n} matches in a row; the last \
                             time: {reason}"
                        ),
                        code: hold_code::TRANSFER_INPUT_ERROR,
                        subcode: 0,
                    };
                    return self.hold(id, info).map(|_| ());
                }
            }
            PoolOp::Started(attrs) => {
                if p.status != JobStatus::Idle {
                    return Err(QueueError::Invalid(format!(
                        "job {id} cannot start: status {}",
                        p.status.letter()
                    )));
                }
                update_from_host(&mut p.ad, attrs);
                p.ad.remove(classad::name!(ACTIVATION_PENDING));
                p.ad.remove(classad::name!("NumShadowExceptions"));
                return self.started(id);
            }
            PoolOp::Update(attrs) => {
                if !p.status.is_active() {
                    return Ok(());
                }
                update_from_host(&mut p.ad, attrs);
                // The host reports `JobDeferredUntil = undefined` once the
                // job's wait for its DeferralTime is over.
                if matches!(
                    attrs.get(classad::name!("JobDeferredUntil")),
                    Some(Expr::Lit(Value::Undefined))
                ) {
                    p.ad.remove(classad::name!("JobDeferredUntil"));
                }
            }
            PoolOp::Grid(attrs) => {
                p.ad.update(attrs);
                // What the copy uses at its target shows on its original.
                if let Some(original) = self.original_of(id)
                    && let Some(o) = self.state.jobs.get_mut(&original)
                {
                    let mut changed = false;
                    for a in MIRRORED_USAGE {
                        if let Some(e) = attrs.get(a) {
                            o.ad.insert(*a, e.clone());
                            changed = true;
                        }
                    }
                    if changed {
                        self.persist(original)?;
                    }
                }
            }
            PoolOp::Suspension(on) => match (p.status, *on) {
                (JobStatus::Running, true) => {
                    let n = int(&p.ad, "TotalSuspensions").max(0);
                    p.ad.insert_value(classad::name!("TotalSuspensions"), n + 1);
                    p.ad.insert_value(classad::name!("LastSuspensionTime"), now);
                    self.set_status(id, JobStatus::Suspended);
                    self.event(id, EventKind::Suspended)?;
                    self.mirror(id)?;
                }
                (JobStatus::Suspended, false) => {
                    self.set_status(id, JobStatus::Running);
                    self.event(id, EventKind::Unsuspended)?;
                    self.mirror(id)?;
                }
                _ => return Ok(()),
            },
            PoolOp::Logged(lines) => {
                if !p.status.is_active() {
                    return Ok(());
                }
                for line in andes_protocol::pool::bounded_log(lines, 0) {
                    self.event(id, EventKind::Note(line))?;
                }
            }
            PoolOp::Reconnected => {
                let n = int(&p.ad, "NumJobReconnects");
                p.ad.insert_value(classad::name!("NumJobReconnects"), n + 1);
                p.ad.insert_value(classad::name!("JobLastReconnectTime"), now);
            }
            PoolOp::Evicted(attrs) => {
                let was = p.status;
                update_from_host(&mut p.ad, attrs);
                if was.is_active() || was == JobStatus::Removed {
                    add_run_time(&mut p.ad, attrs, now);
                }
                p.ad.remove(classad::name!(ACTIVATION_PENDING));
                if let Some(host) = p.ad.remove(classad::name!("RemoteHost")) {
                    p.ad.insert(classad::name!("LastRemoteHost"), host);
                }
                p.ad.remove(classad::name!(CLAIM_ID_ATTR));
                p.ad.remove(classad::name!("StartdAddr"));
                p.ad.insert_value(classad::name!("LastVacateTime"), now);
                match was {
                    // Vacated while suspended, as running: idle again (its
                    // suspension's time counted as it leaves it).
                    JobStatus::Running | JobStatus::Suspended => {
                        self.set_status(id, JobStatus::Idle);
                        if let Some(p) = self.state.jobs.get_mut(&id) {
                            p.ad.remove(classad::name!("JobDeferredUntil"));
                        }
                        self.schedule_cron(id)?;
                        self.persist(id)?;
                        let checkpointed = attrs.contains(classad::name!("LastCkptTime"));
                        self.event(id, EventKind::Evicted { checkpointed })?;
                        self.mirror(id)?;
                    }
                    JobStatus::Removed => return self.leave(id),
                    _ => self.persist(id)?,
                }
                return Ok(());
            }
        }
        self.persist(id)
    }

    pub(crate) fn exited(&mut self, id: JobId, ending: &ClassAd) -> Result<(), QueueError> {
        let Some(p) = self.state.jobs.get_mut(&id) else {
            return Err(QueueError::NotFound(format!("job {id} is not in the queue")));
        };
        let was = p.status;
        if !was.is_active() && was != JobStatus::Removed {
            return Err(QueueError::Invalid(format!(
                "job {id} is not running (status {})",
                was.letter()
            )));
        }
        update_from_host(&mut p.ad, ending);
        add_run_time(&mut p.ad, ending, self.now);
        p.ad.remove(classad::name!(CLAIM_ID_ATTR));
        p.ad.remove(classad::name!("JobDeferredUntil"));
        if let Some(host) = p.ad.remove(classad::name!("RemoteHost")) {
            p.ad.insert(classad::name!("LastRemoteHost"), host);
        }
        if was == JobStatus::Removed {
            return self.leave(id);
        }
        if let Some(info) = HoldInfo::from_ad(ending, "held by the execute host") {
            // The job is no longer active: hold from Idle's point of view.
            self.set_status(id, JobStatus::Idle);
            self.hold(id, info)?;
            return Ok(());
        }
        // The job ran to its end (HTCondor's shadow counts it before the exit
        // policy reads it: `max_retries` is `NumJobCompletions > JobMaxRetries`).
        if matches!(ending.eval_attr(classad::name!("ExitCode")), Value::Int(_))
            || matches!(ending.eval_attr(classad::name!("ExitBySignal")), Value::Bool(true))
        {
            let n = match p.ad.eval_attr(classad::name!("NumJobCompletions")) {
                Value::Int(n) => n.max(0) + 1,
                _ => 1,
            };
            p.ad.insert_value(classad::name!("NumJobCompletions"), n);
        }
        let ad = self.state.job(id).expect("present").ad();
        let decision = {
            let _evaluating = self.journal.enter(id, "exit policy");
            quarantine::fault_point("exit policy", &ad);
            policy::on_exit(&ad, self.now)
        };
        match decision {
            ExitDecision::Complete => {
                self.copy_completed(id)?;
                self.complete(id)
            }
            ExitDecision::Hold(info) => {
                self.event(id, EventKind::Terminated)?;
                self.set_status(id, JobStatus::Idle);
                self.hold(id, info).map(|_| ())
            }
            ExitDecision::Requeue => {
                // HTCondor's shadow logs an eviction, "Job terminated and was
                // requeued" with how it ended, never a termination.
                self.set_status(id, JobStatus::Idle);
                if self.is_cron(id) {
                    self.note_skipped(id)?;
                    self.schedule_cron(id)?;
                }
                // A routed copy's run at its target is over: the router
                // submits it there again, as a new run.
                if let Some(p) = self.state.jobs.get_mut(&id)
                    && p.ad.remove(classad::name!(crate::attrs::GRID_JOB_ID)).is_some()
                {
                    p.ad.remove(classad::name!(crate::attrs::GRID_JOB_STATUS));
                }
                self.persist(id)?;
                self.mirror(id)?;
                self.event(id, EventKind::Requeued)?;
                Ok(())
            }
        }
    }

    pub(crate) fn periodic(&mut self) -> Result<ChangeReport, QueueError> {
        let mut fired = Vec::new();
        let mut last_cluster = None;
        let mut cluster_has = false;
        for v in self.state.jobs() {
            if last_cluster != Some(v.id.cluster) {
                last_cluster = Some(v.id.cluster);
                cluster_has = policy::has_periodic(&v.cluster.ad);
            }
            if !cluster_has && !policy::has_periodic(&v.proc.ad) {
                continue;
            }
            // A routed original evaluates no periodic expressions; its copy
            // does. A quarantined job evaluates none until released.
            if v.proc.ad.contains(classad::name!(ROUTED_TO))
                || v.proc.ad.contains(classad::name!(QUARANTINED))
            {
                continue;
            }
            let ad = v.ad();
            let _evaluating = self.journal.enter(v.id, "periodic policy");
            quarantine::fault_point("periodic policy", &ad);
            if let Some(a) = policy::periodic(&ad, v.proc.status, self.now) {
                fired.push((v.id, a));
            }
        }
        // Completed jobs kept by LeaveJobInQueue leave once it is false.
        let done: Vec<JobId> = self
            .state
            .jobs()
            .filter(|v| v.proc.status == JobStatus::Completed)
            .map(|v| v.id)
            .collect();
        for id in done {
            if !self.leave_in_queue(id) {
                self.leave(id)?;
            }
        }
        let mut report = ChangeReport::default();
        for (id, action) in fired {
            let r = match action {
                PeriodicAction::Hold(info) => self.hold(id, info)?,
                PeriodicAction::Release(reason) => self.release(id, reason)?,
                PeriodicAction::Remove(reason) => self.remove(id, reason)?,
            };
            match r {
                None => report.changed.push(id),
                Some(why) => report.skipped.push((id, why.to_string())),
            }
        }
        Ok(report)
    }

    /// The job completed: CompletionDate, the event, its cluster's count,
    /// and it leaves the queue.
    pub(crate) fn complete(&mut self, id: JobId) -> Result<(), QueueError> {
        if let Some(p) = self.state.jobs.get_mut(&id) {
            p.ad.insert_value(classad::name!("CompletionDate"), self.now);
        }
        self.set_status(id, JobStatus::Completed);
        self.event(id, EventKind::Terminated)?;
        if let Some(c) = self.state.clusters.get_mut(&id.cluster) {
            c.completed += 1;
        }
        self.tx
            .prepare_cached("UPDATE clusters SET completed = completed + 1 WHERE id = ?1")?
            .execute([id.cluster as i64])?;
        if self.leave_in_queue(id) {
            // HTCondor's LeaveJobInQueue: a spooled job waits, completed, for
            // its owner to fetch its output.
            return self.persist(id);
        }
        self.leave(id)
    }

    /// True when the job's `LeaveJobInQueue` is true now.
    pub(crate) fn leave_in_queue(&self, id: JobId) -> bool {
        let Some(v) = self.state.job(id) else { return false };
        if v.proc.ad.get(classad::name!("LeaveJobInQueue")).is_none()
            && v.cluster.ad.get(classad::name!("LeaveJobInQueue")).is_none()
        {
            return false;
        }
        if v.proc.ad.contains(classad::name!(QUARANTINED)) {
            return false;
        }
        let ad = v.ad();
        let _evaluating = self.journal.enter(id, "LeaveJobInQueue");
        quarantine::fault_point("LeaveJobInQueue", &ad);
        let mut ev =
            Evaluator::with_options(EvalOptions { now: Some(self.now), ..Default::default() });
        is_true(&ev.eval_attr(&ad, None, classad::name!("LeaveJobInQueue")))
    }

    /// Holds job `job`, whose `what` a daemon died (or failed) evaluating,
    /// marks it so that none of its expressions is evaluated again until it
    /// is released, and says why (`reason`).
    pub(crate) fn quarantine(
        &mut self,
        job: JobId,
        what: &str,
        reason: String,
    ) -> Result<(), QueueError> {
        let Some(p) = self.state.jobs.get_mut(&job) else { return Ok(()) };
        p.ad.insert_value(classad::name!(QUARANTINED), what);
        let info = HoldInfo { reason, code: hold_code::JOB_POLICY_UNDEFINED, subcode: 0 };
        if self.hold(job, info.clone())?.is_none() {
            return Ok(());
        }
        // Already held: it stays so, and its reason now says why it must
        // stay until someone releases it.
        if let Some(p) = self.state.jobs.get_mut(&job)
            && p.status == JobStatus::Held
        {
            p.ad.insert_value(classad::name!("HoldReason"), info.reason.as_str());
            p.ad.insert_value(classad::name!("HoldReasonCode"), info.code);
            p.ad.insert_value(classad::name!("HoldReasonSubCode"), info.subcode);
            self.event(job, EventKind::Note(info.reason))?;
        }
        self.persist(job)
    }
}
