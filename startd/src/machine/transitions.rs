//! State and activity transitions: `go`, the one place a slot changes state
//! or activity (and the spec's transition number is reported); a slot's
//! policy round at each tick; and the timers (MATCH_TIMEOUT, KILLING_TIMEOUT,
//! the end of retirement).

use super::policy_eval::{is_false, truthy};
use super::slot::BackfillCause;
use super::{Action, Activity, Startd, State};

impl Startd {
    pub(super) fn go(
        &mut self,
        i: usize,
        number: u8,
        state: State,
        activity: Activity,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        // Draining, a slot with no claim is Drained, not Owner.
        let state = if state == State::Owner && self.draining { State::Drained } else { state };
        let s = &mut self.slots[i];
        let from = (s.state, s.activity);
        if let Some(j) = &mut s.job {
            let to_susp = activity == Activity::Suspended;
            if to_susp != j.suspended {
                let seg = (now - j.seg_start).max(0);
                if j.suspended {
                    j.suspend_accum += seg;
                } else {
                    j.run_accum += seg;
                }
                j.suspended = to_susp;
                j.seg_start = now;
            }
        }
        if s.state != state {
            s.entered_state = now;
            s.ad.insert_value(classad::name!("EnteredCurrentState"), now);
        }
        if s.state != state || s.activity != activity {
            s.entered_activity = now;
            s.ad.insert_value(classad::name!("EnteredCurrentActivity"), now);
        }
        s.state = state;
        s.activity = activity;
        s.ad.insert_value(classad::name!("State"), state.as_str());
        s.ad.insert_value(classad::name!("Activity"), activity.as_str());
        // A slot matched, being preempted or drained matches no job.
        if matches!(state, State::Matched | State::Preempting | State::Drained) {
            s.ad.insert_value(classad::name!("Requirements"), false);
        } else {
            s.ad.insert(classad::name!("Requirements"), self.requirements.clone());
        }
        if state != State::Matched {
            s.match_deadline = None;
        }
        if activity != Activity::Killing {
            s.killing_deadline = None;
        }
        if !matches!(activity, Activity::Retiring | Activity::Suspended) {
            s.retire_deadline = None;
        }
        s.dirty = true;
        acts.push(Action::Transition { slot: s.id, number, from, to: (state, activity) });
    }

    pub(super) fn timers(&mut self, now: i64, acts: &mut Vec<Action>) {
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if s.state == State::Matched && s.match_deadline.is_some_and(|d| now >= d) {
                self.go(i, 8, State::Owner, Activity::Idle, now, acts);
                continue;
            }
            if s.activity == Activity::Killing
                && s.state == State::Preempting
                && s.killing_deadline.is_some_and(|d| now >= d)
            {
                // The spec's SIGKILL: harder, and again every KILLING_TIMEOUT,
                // but the slot is not freed before the starter is gone.
                let timeout = self.pol_int(i, |p| &p.killing_timeout, 30).max(1);
                self.slots[i].killing_deadline = Some(now.saturating_add(timeout));
                acts.push(Action::KillStarter { slot: self.slots[i].id });
                continue;
            }
            if s.retire.active {
                self.check_retirement(i, now, acts);
            }
        }
    }

    /// One slot's policy round.
    pub(super) fn evaluate(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let (state, activity) = (self.slots[i].state, self.slots[i].activity);
        let id = self.slots[i].id;
        match (state, activity) {
            (State::Owner, _) => {
                if self.shutdown.is_none() && !truthy(&self.pol(i, |p| &p.is_owner, false)) {
                    self.go(i, 1, State::Unclaimed, Activity::Idle, now, acts);
                }
            }
            (State::Unclaimed, Activity::Idle) => {
                if self.shutdown.is_some() || truthy(&self.pol(i, |p| &p.is_owner, false)) {
                    self.go(i, 2, State::Owner, Activity::Idle, now, acts);
                } else if truthy(&self.pol(i, |p| &p.run_benchmarks, false)) {
                    acts.push(Action::RunBenchmarks { slot: id });
                    self.go(i, 3, State::Unclaimed, Activity::Benchmarking, now, acts);
                } else if self.policy.backfill
                    && !self.policy.backfill_jobs.is_empty()
                    && truthy(&self.pol(i, |p| &p.start_backfill, false))
                {
                    self.go(i, 7, State::Backfill, Activity::Idle, now, acts);
                    self.start_backfill(i, now, acts);
                }
            }
            (State::Unclaimed, _) => {}
            (State::Matched, _) => {
                if is_false(&self.pol(i, |p| &p.start, false)) {
                    self.go(i, 8, State::Owner, Activity::Idle, now, acts);
                }
            }
            (State::Claimed, Activity::Idle) => {
                if is_false(&self.pol(i, |p| &p.start, true)) {
                    self.slots[i].retire.owner = true;
                    self.preempt(i, 10, false, now, acts);
                }
            }
            (State::Claimed, Activity::Busy) => {
                if truthy(&self.eval_named(i, |n| &n.want_suspend)) {
                    if truthy(&self.eval_named(i, |n| &n.suspend)) {
                        acts.push(Action::Suspend { slot: id });
                        self.go(i, 14, State::Claimed, Activity::Suspended, now, acts);
                        return;
                    }
                } else if truthy(&self.eval_named(i, |n| &n.preempt)) {
                    self.slots[i].retire.owner = true;
                    self.begin_retirement(i, 13, now, acts);
                    return;
                }
                self.periodic_checkpoint(i, now, acts);
            }
            (State::Claimed, Activity::Retiring) => {
                if truthy(&self.eval_named(i, |n| &n.want_suspend))
                    && truthy(&self.eval_named(i, |n| &n.suspend))
                {
                    acts.push(Action::Suspend { slot: id });
                    self.go(i, 20, State::Claimed, Activity::Suspended, now, acts);
                } else if truthy(&self.eval_named(i, |n| &n.preempt)) {
                    self.slots[i].retire.owner = true;
                }
                self.check_retirement(i, now, acts);
            }
            (State::Claimed, Activity::Suspended) => {
                if truthy(&self.eval_named(i, |n| &n.preempt)) {
                    self.slots[i].retire.owner = true;
                    self.slots[i].retire.active = true;
                    acts.push(Action::Continue { slot: id });
                    self.go(i, 16, State::Claimed, Activity::Retiring, now, acts);
                } else if truthy(&self.eval_named(i, |n| &n.cont)) {
                    acts.push(Action::Continue { slot: id });
                    if self.slots[i].retire.active {
                        self.go(i, 16, State::Claimed, Activity::Retiring, now, acts);
                    } else {
                        self.go(i, 15, State::Claimed, Activity::Busy, now, acts);
                    }
                }
                self.check_retirement(i, now, acts);
            }
            (State::Claimed, _) => {}
            (State::Preempting, Activity::Vacating) => {
                if truthy(&self.eval_named(i, |n| &n.kill)) {
                    self.start_killing(i, 21, now, acts);
                }
            }
            (State::Preempting, _) => {}
            (State::Backfill, Activity::Idle) => {
                if self.shutdown.is_some() || truthy(&self.pol(i, |p| &p.evict_backfill, false)) {
                    self.slots[i].backfill_cause = Some(BackfillCause::Evict);
                    self.leave_backfill(i, now, acts);
                } else {
                    self.start_backfill(i, now, acts);
                }
            }
            (State::Backfill, Activity::Busy) => {
                if truthy(&self.pol(i, |p| &p.evict_backfill, false)) {
                    self.slots[i].backfill_cause = Some(BackfillCause::Evict);
                    self.kill_backfill(i, now, acts);
                }
            }
            (State::Backfill, _) => {}
            // Until the drain is cancelled.
            (State::Drained, _) => {}
        }
    }
}
