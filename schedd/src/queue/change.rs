//! Changes users ask for: selection, qedit, hold, release, removal.

use super::actor::*;
use super::error::*;
use super::ops::*;
use super::routed::*;
use super::state::*;
use super::txn::*;
use crate::attrs::{self, ACTIVATION_PENDING, CLAIM_ID_ATTR, ROUTED_TO};

use classad::{EvalOptions, Evaluator, Value};

use crate::job::{JobId, JobSelector, JobStatus, hold_code};
use crate::policy::HoldInfo;
use crate::quarantine::QUARANTINED;
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

impl Txn<'_, '_> {
    /// The jobs `targets` names, checked against the actor's rights.
    pub(crate) fn select(&self, actor: &Actor, t: &Targets) -> Result<Vec<JobId>, QueueError> {
        let constraint = t.constraint.as_deref().map(parse_constraint).transpose()?;
        // A routing schedd names the jobs it routed by id, never by owner.
        if !actor.admin
            && let Some(o) = t.owners.iter().find(|o| actor.schedd || **o != actor.name)
        {
            return Err(QueueError::Forbidden(format!(
                "{} may not act on the jobs of {o}",
                actor.name
            )));
        }
        let mut ids: Vec<JobId> = Vec::new();
        for sel in &t.ids {
            let before = ids.len();
            match *sel {
                JobSelector::Job(id) => {
                    if self.state.jobs.contains_key(&id) {
                        ids.push(id);
                    }
                }
                JobSelector::Cluster(c) => ids.extend(self.state.cluster_jobs(c).map(|v| v.id)),
            }
            if ids.len() == before {
                return Err(QueueError::NotFound(format!("job {sel} is not in the queue")));
            }
            for id in &ids[before..] {
                let Some(v) = self.state.job(*id) else { continue };
                let owner = v.owner();
                if !actor.may_act_on(&v) {
                    return Err(QueueError::Forbidden(format!(
                        "job {id} belongs to {owner}; {} may act only on their own jobs",
                        actor.name
                    )));
                }
            }
        }
        if !t.owners.is_empty() {
            ids.extend(
                self.state.jobs().filter(|v| t.owners.iter().any(|o| o == v.owner())).map(|v| v.id),
            );
        }
        if t.ids.is_empty() && t.owners.is_empty() {
            if constraint.is_none() {
                return Err(QueueError::Invalid("name jobs by id, owner or constraint".into()));
            }
            ids.extend(self.state.jobs().filter(|v| actor.may_act_on(v)).map(|v| v.id));
        }
        ids.sort();
        ids.dedup();
        if let Some(m) = &t.matched {
            ids.retain(|id| m.binary_search(id).is_ok());
        } else if let Some(c) = constraint {
            let mut ev =
                Evaluator::with_options(EvalOptions { now: Some(self.now), ..Default::default() });
            ev.set_step_pool(Some(REQUEST_STEPS));
            let mut kept = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(v) = self.state.job(id) {
                    let ad = attrs::visible(v.ad(), reader_of(actor, &v));
                    let ok = is_true(&ev.eval(&c, Some(&ad), None));
                    if ev.exhausted() {
                        return Err(too_costly("constraint"));
                    }
                    if ok {
                        kept.push(id);
                    }
                }
            }
            ids = kept;
        }
        Ok(ids)
    }

    pub(crate) fn change(
        &mut self,
        ids: &[JobId],
        change: &Change,
        actor: &Actor,
    ) -> Result<ChangeReport, QueueError> {
        let mut report = ChangeReport::default();
        if let Change::Edit { attr, expr } = change {
            if attrs::is_protected(attr) {
                return Err(QueueError::Forbidden(format!(
                    "{attr} is protected and cannot be edited"
                )));
            }
            if classad::AttrName::new(attr).needs_quotes() || attr.is_empty() {
                return Err(QueueError::Invalid(format!("`{attr}` is not an attribute name")));
            }
            let e = classad::parse_expr(expr)
                .map_err(|e| QueueError::Invalid(format!("value of {attr} `{expr}`: {e}")))?;
            let cron_field = andes_cron::Field::from_name(attr).is_some();
            if cron_field && let Some(v) = ids.first().and_then(|id| self.state.job(*id)) {
                let mut whole = v.ad();
                whole.insert(attr.as_str(), e.clone());
                if let Some(Err(err)) = andes_cron::Schedule::from_ad(&whole) {
                    return Err(QueueError::Invalid(err.to_string()));
                }
            }
            for &id in ids {
                let Some(p) = self.state.jobs.get_mut(&id) else { continue };
                p.ad.insert(attr.as_str(), e.clone());
                if cron_field && p.status == JobStatus::Idle {
                    self.schedule_cron(id)?;
                }
                self.persist(id)?;
                self.event(id, EventKind::Edited(attr.clone()))?;
                report.changed.push(id);
                // An edit of a routed original reaches its copy (and the
                // router takes it on to the copy's target).
                if let Some(copy) = self.copy_of(id)
                    && let Some(p) = self.state.jobs.get_mut(&copy)
                {
                    p.ad.insert(attr.as_str(), e.clone());
                    self.persist(copy)?;
                    self.event(copy, EventKind::Edited(attr.clone()))?;
                }
            }
            return Ok(report);
        }
        // The reason given, else HTCondor's "via condor_hold (by user alice)".
        let why = |reason: &String, command: &str| {
            if reason.is_empty() {
                format!("via {command} (by user {})", actor.name)
            } else {
                reason.clone()
            }
        };
        for &id in ids {
            let Some(status) = self.state.jobs.get(&id).map(|p| p.status) else { continue };
            let r = match change {
                Change::Hold { reason } => {
                    let reason = why(reason, "condor_hold");
                    self.hold(id, HoldInfo { reason, code: hold_code::USER_REQUEST, subcode: 0 })
                }
                Change::Release { reason } => self.release(id, why(reason, "condor_release")),
                Change::Remove { reason } => self.remove(id, why(reason, "condor_rm")),
                Change::Vacate { reason } => {
                    self.vacate_asked(id, why(reason, "condor_vacate_job"))
                }
                Change::Edit { .. } => unreachable!("handled above"),
            }?;
            match r {
                None => report.changed.push(id),
                Some(why) => {
                    report.skipped.push((id, format!("{why} (status {})", status.letter())))
                }
            }
        }
        Ok(report)
    }

    pub(crate) fn set_status(&mut self, id: JobId, status: JobStatus) {
        if let Some(p) = self.state.jobs.get_mut(&id) {
            // Leaving a suspension, however (resumed, vacated, ended): its
            // time counts, as HTCondor's CumulativeSuspensionTime.
            if p.status == JobStatus::Suspended && status != JobStatus::Suspended {
                let since = match p.ad.eval_attr(classad::name!("LastSuspensionTime")) {
                    Value::Int(t) if t > 0 => t,
                    _ => self.now,
                };
                let total = match p.ad.eval_attr(classad::name!("CumulativeSuspensionTime")) {
                    Value::Int(t) => t,
                    _ => 0,
                };
                p.ad.insert_value(
                    classad::name!("CumulativeSuspensionTime"),
                    total + (self.now - since).max(0),
                );
                p.ad.insert_value(classad::name!("LastSuspensionTime"), 0i64);
            }
            p.status = status;
            p.entered = self.now;
        }
    }

    pub(crate) fn hold(
        &mut self,
        id: JobId,
        info: HoldInfo,
    ) -> Result<Option<&'static str>, QueueError> {
        let Some(p) = self.state.jobs.get_mut(&id) else { return Ok(Some("not in the queue")) };
        if p.status == JobStatus::Held {
            return Ok(Some("already held"));
        }
        if p.status.is_terminal() {
            return Ok(Some("already leaving the queue"));
        }
        let holds = match p.ad.eval_attr(classad::name!("NumHolds")) {
            Value::Int(n) => n,
            _ => 0,
        };
        p.ad.insert_value(classad::name!("NumHolds"), holds + 1);
        p.ad.insert_value(classad::name!("HoldReason"), info.reason.as_str());
        p.ad.insert_value(classad::name!("HoldReasonCode"), info.code);
        p.ad.insert_value(classad::name!("HoldReasonSubCode"), info.subcode);
        p.ad.remove(classad::name!("ReleaseReason"));
        self.set_status(id, JobStatus::Held);
        self.persist(id)?;
        self.event(id, EventKind::Held(info))?;
        // The manual: an original that goes on hold takes its copy away,
        // unless it is the copy's own hold it mirrors.
        let copy_held = self
            .copy_of(id)
            .and_then(|c| self.state.jobs.get(&c))
            .is_some_and(|c| c.status == JobStatus::Held);
        if copy_held {
            if let Some(p) = self.state.jobs.get_mut(&id) {
                p.ad.insert_value(classad::name!(ROUTED_COPY_HELD), true);
            }
            self.persist(id)?;
        } else {
            self.remove_copy_of(id, "held")?;
        }
        self.mirror(id)?;
        Ok(None)
    }

    pub(crate) fn vacate_asked(
        &mut self,
        id: JobId,
        reason: String,
    ) -> Result<Option<&'static str>, QueueError> {
        let Some(p) = self.state.jobs.get(&id) else { return Ok(Some("not in the queue")) };
        if !matches!(p.status, JobStatus::Running | JobStatus::Suspended) {
            return Ok(Some("not running"));
        }
        self.event(id, EventKind::VacateAsked(reason))?;
        Ok(None)
    }

    pub(crate) fn release(
        &mut self,
        id: JobId,
        reason: String,
    ) -> Result<Option<&'static str>, QueueError> {
        let Some(p) = self.state.jobs.get_mut(&id) else { return Ok(Some("not in the queue")) };
        if p.status != JobStatus::Held {
            return Ok(Some("not held"));
        }
        for (from, to) in [
            ("HoldReason", "LastHoldReason"),
            ("HoldReasonCode", "LastHoldReasonCode"),
            ("HoldReasonSubCode", "LastHoldReasonSubCode"),
        ] {
            if let Some(e) = p.ad.remove(from) {
                p.ad.insert(to, e);
            }
        }
        p.ad.insert_value(classad::name!("ReleaseReason"), reason.as_str());
        p.ad.remove(classad::name!(ROUTED_COPY_HELD));
        p.ad.remove(classad::name!(QUARANTINED));
        // An activation pending when it was held is no more: released, it is
        // matched afresh.
        if p.ad.remove(classad::name!(ACTIVATION_PENDING)).is_some() {
            for a in [CLAIM_ID_ATTR, "StartdAddr", "RemoteHost"] {
                p.ad.remove(a);
            }
        }
        self.set_status(id, JobStatus::Idle);
        self.schedule_cron(id)?;
        self.persist(id)?;
        self.event(id, EventKind::Released(reason.clone()))?;
        // An original that mirrors its held copy releases it, and a
        // released copy its original.
        if let Some(copy) = self.copy_of(id) {
            self.release(copy, reason)?;
        }
        self.mirror(id)?;
        Ok(None)
    }

    pub(crate) fn remove(
        &mut self,
        id: JobId,
        reason: String,
    ) -> Result<Option<&'static str>, QueueError> {
        let Some(p) = self.state.jobs.get_mut(&id) else { return Ok(Some("not in the queue")) };
        if p.status == JobStatus::Removed {
            return Ok(Some("already being removed"));
        }
        p.ad.insert_value(classad::name!("RemoveReason"), reason.as_str());
        // A routed original has no shadow: it leaves at once.
        let active = p.status.is_active() && !p.ad.contains(classad::name!(ROUTED_TO));
        self.set_status(id, JobStatus::Removed);
        self.event(id, EventKind::Removed(reason))?;
        self.remove_copy_of(id, "removed")?;
        self.copy_removed(id)?;
        if active {
            // Its shadow reports the end (job_exited), then it leaves the queue.
            self.persist(id)?;
        } else {
            self.leave(id)?;
        }
        Ok(None)
    }
}
