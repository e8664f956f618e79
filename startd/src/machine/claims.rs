//! Claims: a match from the negotiator, a schedd's claim (and a better
//! match preempting one), an activation that starts a job, a release, the
//! starter's exit, and the end of a job or a claim.

use classad::ClassAd;

use super::policy_eval::truthy;
use super::slot::{BackfillCause, Claim, ClaimEnd, Job, Retire};
use super::{Action, Activity, ClaimRequest, SLOT_JOB_ATTRS, Startd, State, can_checkpoint};
use crate::policy::{CLAIM_EXPR_NAMES, ClaimExprs};

impl Startd {
    pub(super) fn install_claim(
        &mut self,
        i: usize,
        req: ClaimRequest,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let rank = {
            let s = &self.slots[i];
            self.ev.eval(&self.policy.rank, Some(&s.ad), Some(&req.ad)).as_real().unwrap_or(0.0)
        };
        let s = &mut self.slots[i];
        s.ad.insert_value(classad::name!("RemoteOwner"), req.owner.as_str());
        s.ad.insert_value(classad::name!("RemoteUser"), req.user.as_deref().unwrap_or(&req.owner));
        s.ad.insert_value(classad::name!("ClientMachine"), req.client_machine.as_str());
        s.ad.insert_value(classad::name!("CurrentRank"), rank);
        acts.push(Action::ClaimAccepted { slot: s.id, claim_id: req.claim_id.clone() });
        s.claim = Some(Claim {
            req,
            since: now,
            activations: 0,
            run_time: 0,
            suspend_time: 0,
            end: ClaimEnd::Broken,
        });
        s.retire = Retire::default();
    }

    pub(super) fn drop_claim(&mut self, i: usize, acts: &mut Vec<Action>) {
        let s = &mut self.slots[i];
        if let Some(c) = s.claim.take() {
            let claim_id = c.req.claim_id;
            match c.end {
                ClaimEnd::Broken => acts.push(Action::ClaimBroken { slot: s.id, claim_id }),
                ClaimEnd::Expired => acts.push(Action::ReleaseClaim { slot: s.id, claim_id }),
                ClaimEnd::Released => {}
            }
        }
        static CLAIM_ATTRS: classad::Names<3> =
            classad::Names::new(["RemoteOwner", "RemoteUser", "ClientMachine"]);
        s.ad.remove_all(CLAIM_ATTRS.get());
        s.ad.insert_value(classad::name!("CurrentRank"), 0.0);
        s.retire = Retire::default();
    }

    pub(super) fn end_job(&mut self, i: usize, now: i64) {
        let s = &mut self.slots[i];
        if let Some(j) = s.job.take()
            && let Some(c) = &mut s.claim
        {
            c.run_time += j.run_time(now);
            c.suspend_time += j.suspend_time(now);
            // As HTCondor's startd does, the claim now stands for the job it
            // ran: until the next, Claimed/Idle judges START (transition 10)
            // and RANK against it, not the request the claim was first made
            // with. (Moved here at its end, not copied at its start.)
            c.req.ad = j.ad;
        }
        s.ad.remove_all(super::ad::SLOT_JOB_ENDED.get());
        set_exprs(&mut s.ad, &self.policy.standard);
        s.vacate_ckpt_pending = false;
        s.last_periodic_ckpt = None;
        s.retire_deadline = None;
        s.killing_deadline = None;
    }

    pub(super) fn on_match(
        &mut self,
        i: usize,
        _claim_id: String,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        if self.shutdown.is_some() || self.draining {
            return;
        }
        let (state, activity) = (self.slots[i].state, self.slots[i].activity);
        match (state, activity) {
            (State::Owner, _) if !truthy(&self.pol(i, |p| &p.is_owner, false)) => {
                self.go(i, 1, State::Unclaimed, Activity::Idle, now, acts);
                self.enter_matched(i, 6, now, acts);
            }
            (State::Unclaimed, _) => {
                self.stop_benchmarking(i, now, acts);
                self.enter_matched(i, 6, now, acts)
            }
            (State::Backfill, Activity::Busy) => {
                self.slots[i].backfill_cause = Some(BackfillCause::Matched);
                self.kill_backfill(i, now, acts);
            }
            (State::Backfill, Activity::Idle) => self.enter_matched(i, 32, now, acts),
            (State::Backfill, Activity::Killing) => {
                let s = &mut self.slots[i];
                if s.backfill_cause.is_none() {
                    s.backfill_cause = Some(BackfillCause::Matched);
                }
            }
            _ => {}
        }
    }

    /// A match, a claim or a shutdown does not wait for the benchmarks: the
    /// slot leaves Benchmarking for Unclaimed/Idle (4) and their result, when
    /// it comes, is not recorded.
    pub(super) fn stop_benchmarking(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        if self.slots[i].activity == Activity::Benchmarking {
            self.go(i, 4, State::Unclaimed, Activity::Idle, now, acts);
        }
    }

    pub(super) fn enter_matched(&mut self, i: usize, number: u8, now: i64, acts: &mut Vec<Action>) {
        let timeout = self.pol_int(i, |p| &p.match_timeout, 120).max(0);
        self.go(i, number, State::Matched, Activity::Idle, now, acts);
        self.slots[i].match_deadline = Some(now.saturating_add(timeout));
    }

    pub(super) fn on_claim(
        &mut self,
        i: usize,
        req: ClaimRequest,
        forced: bool,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let id = self.slots[i].id;
        let refuse = |acts: &mut Vec<Action>, req: &ClaimRequest, reason: &str| {
            acts.push(Action::ClaimRefused {
                slot: id,
                claim_id: req.claim_id.clone(),
                reason: reason.to_string(),
            })
        };
        if self.shutdown.is_some() {
            return refuse(acts, &req, "the startd is shutting down");
        }
        if !self.requirements_hold(i, &req.ad) {
            return refuse(
                acts,
                &req,
                "the machine's Requirements (START) are not met by this request",
            );
        }
        let (state, activity) = (self.slots[i].state, self.slots[i].activity);
        match (state, activity) {
            (State::Owner, _) => {
                self.go(i, 1, State::Unclaimed, Activity::Idle, now, acts);
                self.install_claim(i, req, now, acts);
                self.go(i, 5, State::Claimed, Activity::Idle, now, acts);
            }
            (State::Unclaimed, _) => {
                self.stop_benchmarking(i, now, acts);
                self.install_claim(i, req, now, acts);
                self.go(i, 5, State::Claimed, Activity::Idle, now, acts);
            }
            (State::Matched, _) => {
                self.install_claim(i, req, now, acts);
                self.go(i, 9, State::Claimed, Activity::Idle, now, acts);
            }
            (State::Backfill, Activity::Idle) if self.slots[i].backfill_job.is_none() => {
                self.install_claim(i, req, now, acts);
                self.go(i, 31, State::Claimed, Activity::Idle, now, acts);
            }
            (State::Backfill, _) => {
                if let Some(old) = self.slots[i].pending.replace(req) {
                    refuse(acts, &old, "superseded by another claim");
                }
                if !matches!(self.slots[i].backfill_cause, Some(BackfillCause::Evict)) {
                    self.slots[i].backfill_cause = Some(BackfillCause::Claimed);
                }
                if self.slots[i].activity == Activity::Busy {
                    self.kill_backfill(i, now, acts);
                }
            }
            (State::Claimed, _) => {
                if !forced {
                    let new_rank = self.pol_with(i, |p| &p.rank, &req.ad).as_real().unwrap_or(0.0);
                    let cur = self.slots[i]
                        .ad
                        .eval_attr(classad::name!("CurrentRank"))
                        .as_real()
                        .unwrap_or(0.0);
                    if new_rank <= cur {
                        return refuse(
                            acts,
                            &req,
                            "the slot is claimed and RANK does not prefer this request",
                        );
                    }
                }
                if let Some(old) = self.slots[i].pending.replace(req) {
                    refuse(acts, &old, "superseded by a better match");
                }
                match activity {
                    Activity::Idle => self.preempt(i, 10, false, now, acts),
                    Activity::Busy => {
                        self.slots[i].retire.better_match = true;
                        self.begin_retirement(i, 13, now, acts);
                    }
                    _ => {
                        self.slots[i].retire.better_match = true;
                        self.slots[i].retire.active = true;
                        self.check_retirement(i, now, acts);
                    }
                }
            }
            (State::Preempting, _) => refuse(acts, &req, "the slot is being preempted"),
            (State::Drained, _) => refuse(acts, &req, "the machine is being drained"),
        }
    }

    pub(super) fn on_activate(
        &mut self,
        i: usize,
        claim_id: String,
        job: ClassAd,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let id = self.slots[i].id;
        let refuse = |acts: &mut Vec<Action>, reason: String| {
            acts.push(Action::ActivationRefused { slot: id, claim_id: claim_id.clone(), reason })
        };
        let s = &self.slots[i];
        if s.claim_id() != Some(claim_id.as_str()) {
            return refuse(acts, "no such claim on this slot".into());
        }
        if (s.state, s.activity) != (State::Claimed, Activity::Idle) {
            return refuse(
                acts,
                format!("the slot is {}/{}", s.state.as_str(), s.activity.as_str()),
            );
        }
        // CLAIM_WORKLIFE is when a claim stops accepting *new* jobs: the
        // first, which the claim was made for, is never refused by it (a
        // claim of worklife 0 runs exactly one job, even when its activation
        // comes in the second after the claim's).
        let (since, activations) = s.claim.as_ref().map_or((now, 0), |c| (c.since, c.activations));
        let worklife = self.pol_with(i, |p| &p.claim_worklife, &job).as_int().unwrap_or(-1);
        if activations > 0 && worklife >= 0 && now - since > worklife {
            refuse(acts, format!("the claim's CLAIM_WORKLIFE ({worklife} s) is over"));
            if let Some(c) = &mut self.slots[i].claim {
                c.end = ClaimEnd::Expired;
            }
            self.preempt(i, 10, false, now, acts);
            return;
        }
        if !self.requirements_hold(i, &job) {
            return refuse(
                acts,
                "the machine's Requirements (START) are not met by this job".into(),
            );
        }
        let checkpointable = can_checkpoint(&job);
        let rank = self.pol_with(i, |p| &p.rank, &job).as_real().unwrap_or(0.0);
        let exprs = if checkpointable { &self.policy.standard } else { &self.policy.vanilla };
        let s = &mut self.slots[i];
        set_exprs(&mut s.ad, exprs);
        let job_id = match (
            job.eval_attr(classad::name!("ClusterId")).as_int(),
            job.eval_attr(classad::name!("ProcId")).as_int(),
        ) {
            (Some(c), Some(p)) => format!("{c}.{p}"),
            _ => job.eval_attr(classad::name!("GlobalJobId")).as_str().unwrap_or("0.0").to_string(),
        };
        s.ad.insert_value(classad::name!("JobId"), job_id);
        s.ad.insert_value(classad::name!("JobStart"), now);
        for n in SLOT_JOB_ATTRS.get() {
            match job.get(n) {
                Some(e) => s.ad.insert(n, e.clone()),
                None => {
                    s.ad.remove(n);
                }
            }
        }
        s.ad.insert_value(classad::name!("CurrentRank"), rank);
        if checkpointable {
            // The first periodic checkpoint counts from the job's start.
            s.ad.insert_value(classad::name!("LastPeriodicCheckpoint"), now);
        }
        if let Some(c) = &mut s.claim {
            c.activations += 1;
        }
        s.job = Some(Job {
            ad: job.clone(),
            checkpointable,
            run_accum: 0,
            suspend_accum: 0,
            seg_start: now,
            suspended: false,
        });
        acts.push(Action::StartJob { slot: id, claim_id, job });
        self.go(i, 11, State::Claimed, Activity::Busy, now, acts);
    }

    pub(super) fn on_release(
        &mut self,
        i: usize,
        claim_id: &str,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let s = &mut self.slots[i];
        if s.pending_claim_id() == Some(claim_id) {
            s.pending = None;
            let r = s.retire;
            if r.better_match && !r.owner && !r.shutdown {
                s.retire = Retire::default();
                s.retire_deadline = None;
                if s.activity == Activity::Retiring {
                    self.go(i, 19, State::Claimed, Activity::Busy, now, acts);
                }
            }
            return;
        }
        if s.claim_id() != Some(claim_id) {
            acts.push(Action::EventRejected {
                reason: format!(
                    "slot {}: the claim named is not its claim; nothing released",
                    s.id
                ),
            });
            return;
        }
        if let Some(c) = &mut s.claim {
            c.end = ClaimEnd::Released;
        }
        match (s.state, s.activity) {
            (State::Claimed, Activity::Idle) => self.preempt(i, 10, false, now, acts),
            (State::Claimed, _) => {
                // The schedd wants its job gone: no retirement. A better
                // match waiting for this claim gets the slot afterwards.
                self.force_preempt(i, false, now, acts);
            }
            _ => {}
        }
    }

    pub(super) fn on_starter_exit(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let s = &self.slots[i];
        if s.job.is_none() {
            return;
        }
        match (s.state, s.activity) {
            (State::Claimed, Activity::Busy) | (State::Claimed, Activity::Suspended)
                if !s.retire.active =>
            {
                if s.activity == Activity::Suspended {
                    // The job ended while suspended (it was killed): it is
                    // no longer suspended (15), and its starter exited (12);
                    // the diagram has no edge from Suspended to Idle.
                    self.go(i, 15, State::Claimed, Activity::Busy, now, acts);
                }
                self.end_job(i, now);
                self.go(i, 12, State::Claimed, Activity::Idle, now, acts);
                let since = self.slots[i].claim.as_ref().map_or(now, |c| c.since);
                let worklife = self.pol_int(i, |p| &p.claim_worklife, -1);
                if worklife >= 0 && now - since > worklife {
                    if let Some(c) = &mut self.slots[i].claim {
                        c.end = ClaimEnd::Expired;
                    }
                    self.preempt(i, 10, false, now, acts);
                }
            }
            (State::Claimed, Activity::Retiring) | (State::Claimed, Activity::Suspended) => {
                let number = if s.activity == Activity::Suspended { 17 } else { 18 };
                self.end_job(i, now);
                self.preempt(i, number, false, now, acts);
            }
            (State::Preempting, _) => {
                self.end_job(i, now);
                self.finish_preempting(i, now, acts);
            }
            _ => self.end_job(i, now),
        }
    }
}

/// Binds the claim's policy expressions in a slot's ad, each only when it
/// differs from what the ad holds (the same between one job and the next
/// unless a job's kind changes them: no copy of them per job).
fn set_exprs(ad: &mut ClassAd, exprs: &ClaimExprs) {
    for (name, e) in CLAIM_EXPR_NAMES.get().iter().zip(exprs.iter()) {
        if ad.get(name) != Some(e) {
            ad.insert(name, e.clone());
        }
    }
}
