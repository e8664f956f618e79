//! Vacating and preemption: condor_vacate, retirement (MaxJobRetirementTime),
//! and Preempting (Vacating: checkpoint, then the vacate notice; Killing), to
//! the claim's end.

use super::policy_eval::is_false;
use super::slot::{BackfillCause, ClaimEnd};
use super::{Action, Activity, CheckpointKind, ShutdownKind, Startd, State, VacateKind};

impl Startd {
    pub(super) fn on_vacate(
        &mut self,
        i: usize,
        kind: VacateKind,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let (state, activity) = (self.slots[i].state, self.slots[i].activity);
        let fast = kind == VacateKind::Fast;
        match (state, activity) {
            (State::Matched, _) => self.go(i, 8, State::Owner, Activity::Idle, now, acts),
            (State::Claimed, _) => {
                self.slots[i].retire.owner = true;
                self.end_claim(i, fast, now, acts);
            }
            (State::Preempting, Activity::Vacating) if fast => self.start_killing(i, 21, now, acts),
            (State::Preempting, _) => self.slots[i].retire.owner = true,
            (State::Backfill, Activity::Busy) => {
                self.slots[i].backfill_cause = Some(BackfillCause::Evict);
                self.kill_backfill(i, now, acts);
            }
            (State::Backfill, Activity::Killing) => {
                self.slots[i].backfill_cause = Some(BackfillCause::Evict)
            }
            (State::Backfill, _) => {
                self.slots[i].backfill_cause = Some(BackfillCause::Evict);
                self.leave_backfill(i, now, acts);
            }
            _ => {}
        }
    }

    /// Ends a claim for a vacate or a shutdown (the caller has noted which): an
    /// idle claim is preempted at once (10); a busy job retires (13) unless the
    /// request is fast; a suspended or retiring one keeps retiring.
    pub(super) fn end_claim(&mut self, i: usize, fast: bool, now: i64, acts: &mut Vec<Action>) {
        let activity = self.slots[i].activity;
        if activity == Activity::Idle {
            self.preempt(i, 10, fast, now, acts);
        } else if fast {
            self.force_preempt(i, true, now, acts);
        } else if activity == Activity::Busy {
            self.begin_retirement(i, 13, now, acts);
        } else {
            self.slots[i].retire.active = true;
            self.check_retirement(i, now, acts);
        }
    }

    /// Out of the Claimed state now, skipping what is left of retirement
    /// (fast vacate or shutdown, or the schedd's release).
    pub(super) fn force_preempt(&mut self, i: usize, fast: bool, now: i64, acts: &mut Vec<Action>) {
        let s = &self.slots[i];
        match s.activity {
            Activity::Busy => {
                self.slots[i].retire.active = true;
                self.go(i, 13, State::Claimed, Activity::Retiring, now, acts);
                self.preempt(i, 18, fast, now, acts);
            }
            Activity::Retiring => self.preempt(i, 18, fast, now, acts),
            Activity::Suspended => self.preempt(i, 17, fast, now, acts),
            _ => self.preempt(i, 10, fast, now, acts),
        }
    }

    pub(super) fn begin_retirement(
        &mut self,
        i: usize,
        number: u8,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        self.slots[i].retire.active = true;
        self.go(i, number, State::Claimed, Activity::Retiring, now, acts);
        self.check_retirement(i, now, acts);
    }

    /// The retirement the machine grants the job: MAXJOBRETIREMENTTIME,
    /// lowered by the job's own MaxJobRetirementTime; unlimited in a
    /// peaceful shutdown.
    pub(super) fn retirement_grant(&mut self, i: usize) -> Option<i64> {
        let s = &self.slots[i];
        if s.retire.shutdown && self.shutdown == Some(ShutdownKind::Peaceful) && !s.retire.owner {
            return None;
        }
        let job = s.job.as_ref().map(|j| &j.ad);
        let machine = self
            .ev
            .eval_attr(&s.ad, job, classad::name!("MaxJobRetirementTime"))
            .as_int()
            .unwrap_or(0);
        let mut grant = machine.max(0);
        if let Some(j) = job
            && j.contains(classad::name!("MaxJobRetirementTime"))
            && let Some(v) =
                self.ev.eval_attr(j, Some(&s.ad), classad::name!("MaxJobRetirementTime")).as_int()
        {
            grant = grant.min(v.max(0));
        }
        Some(grant)
    }

    pub(super) fn check_retirement(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let s = &self.slots[i];
        if !s.retire.active || s.state != State::Claimed {
            return;
        }
        let Some(run) = s.job.as_ref().map(|j| j.run_time(now)) else { return };
        let suspended = s.activity == Activity::Suspended;
        match self.retirement_grant(i) {
            Some(g) if run >= g => {
                let number = if suspended { 17 } else { 18 };
                self.preempt(i, number, false, now, acts);
            }
            Some(g) if !suspended => {
                self.slots[i].retire_deadline = Some(now.saturating_add(g - run))
            }
            _ => self.slots[i].retire_deadline = None,
        }
    }

    pub(super) fn grace(&mut self, i: usize) -> u64 {
        let mut g = self.policy.machine_max_vacate_time;
        let s = &self.slots[i];
        if let Some(j) = &s.job
            && let Some(v) =
                self.ev.eval_attr(&j.ad, Some(&s.ad), classad::name!("JobMaxVacateTime")).as_int()
        {
            g = g.min(v.max(0));
        }
        g.max(0) as u64
    }

    /// Enters Preempting: Vacating (checkpoint first if the job can, then the
    /// vacate notice) or Killing; with no job, straight through to the end.
    pub(super) fn preempt(
        &mut self,
        i: usize,
        number: u8,
        fast: bool,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let id = self.slots[i].id;
        self.slots[i].retire.active = false;
        self.slots[i].retire_deadline = None;
        if self.slots[i].job.is_none() {
            self.go(i, number, State::Preempting, Activity::Vacating, now, acts);
            self.finish_preempting(i, now, acts);
            return;
        }
        let vacate = !fast && {
            let v = self.eval_named(i, |n| &n.want_vacate);
            !is_false(&v) && v.as_bool() != Some(false)
        };
        if !vacate {
            self.go(i, number, State::Preempting, Activity::Killing, now, acts);
            self.kill_now(i, now, acts);
            return;
        }
        let (suspended, ckpt) = {
            let j = self.slots[i].job.as_ref();
            (j.is_some_and(|j| j.suspended), j.is_some_and(|j| j.checkpointable))
        };
        // A suspended job is resumed only where it has something to do: to
        // save its state. Otherwise the vacate notice itself resumes a job
        // that can hear it and ends one that cannot, which never runs again.
        if suspended && ckpt {
            acts.push(Action::Continue { slot: id });
        }
        self.go(i, number, State::Preempting, Activity::Vacating, now, acts);
        if ckpt {
            self.slots[i].vacate_ckpt_pending = true;
            acts.push(Action::Checkpoint { slot: id, kind: CheckpointKind::Vacate });
        } else {
            let grace = self.grace(i);
            acts.push(Action::SoftKill { slot: id, grace_secs: grace });
        }
    }

    pub(super) fn start_killing(&mut self, i: usize, number: u8, now: i64, acts: &mut Vec<Action>) {
        self.go(i, number, State::Preempting, Activity::Killing, now, acts);
        self.kill_now(i, now, acts);
    }

    pub(super) fn kill_now(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let timeout = self.pol_int(i, |p| &p.killing_timeout, 30).max(0);
        let s = &mut self.slots[i];
        s.vacate_ckpt_pending = false;
        s.killing_deadline = Some(now.saturating_add(timeout));
        acts.push(Action::HardKill { slot: s.id });
    }

    /// The starter is gone: notify the schedd and leave Preempting for
    /// Claimed/Idle (a better match waits) or Owner.
    pub(super) fn finish_preempting(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        self.end_job(i, now);
        let killing = self.slots[i].activity == Activity::Killing;
        let r = self.slots[i].retire;
        let to_claim = self.slots[i].pending.is_some()
            && !r.owner
            && !r.shutdown
            && self.shutdown.is_none()
            && self.slots[i].claim.as_ref().is_none_or(|c| c.end != ClaimEnd::Expired);
        // `retire` was cleared on entering Preempting; the causes are kept.
        self.drop_claim(i, acts);
        if to_claim {
            let Some(req) = self.slots[i].pending.take() else { return };
            self.install_claim(i, req, now, acts);
            self.go(i, if killing { 24 } else { 23 }, State::Claimed, Activity::Idle, now, acts);
        } else {
            if let Some(req) = self.slots[i].pending.take() {
                acts.push(Action::ClaimRefused {
                    slot: self.slots[i].id,
                    claim_id: req.claim_id,
                    reason: "the slot went back to its owner".into(),
                });
            }
            self.go(i, if killing { 25 } else { 22 }, State::Owner, Activity::Idle, now, acts);
        }
    }
}
