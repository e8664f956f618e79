//! Backfill: a slot otherwise idle runs the next of BACKFILL_JOBS; a match,
//! a claim, a vacate, a shutdown or EVICT_BACKFILL kills it, and the slot
//! goes where the cause says.

use super::slot::BackfillCause;
use super::{Action, Activity, Startd, State};

impl Startd {
    pub(super) fn on_backfill_exit(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let s = &mut self.slots[i];
        if s.state != State::Backfill {
            return;
        }
        s.backfill_job = None;
        match s.activity {
            Activity::Busy => self.go(i, 27, State::Backfill, Activity::Idle, now, acts),
            Activity::Killing => {
                self.go(i, 29, State::Backfill, Activity::Idle, now, acts);
                self.leave_backfill(i, now, acts);
            }
            _ => {}
        }
    }

    pub(super) fn leave_backfill(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let cause = self.slots[i].backfill_cause.take();
        let pending = self.slots[i].pending.take();
        match (cause, pending) {
            (Some(BackfillCause::Claimed), Some(req)) if self.shutdown.is_none() => {
                self.install_claim(i, req, now, acts);
                self.go(i, 31, State::Claimed, Activity::Idle, now, acts);
            }
            (Some(BackfillCause::Matched), None) if self.shutdown.is_none() => {
                self.enter_matched(i, 32, now, acts)
            }
            (_, pending) => {
                if let Some(req) = pending {
                    acts.push(Action::ClaimRefused {
                        slot: self.slots[i].id,
                        claim_id: req.claim_id,
                        reason: "the slot went back to its owner".into(),
                    });
                }
                self.go(i, 30, State::Owner, Activity::Idle, now, acts)
            }
        }
    }

    pub(super) fn kill_backfill(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        acts.push(Action::KillBackfill { slot: self.slots[i].id });
        self.go(i, 28, State::Backfill, Activity::Killing, now, acts);
    }

    pub(super) fn start_backfill(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let jobs = &self.policy.backfill_jobs;
        if jobs.is_empty() {
            return;
        }
        let job = jobs[self.backfill_next % jobs.len()].clone();
        self.backfill_next = self.backfill_next.wrapping_add(1);
        self.slots[i].backfill_job = Some(job.clone());
        acts.push(Action::StartBackfill { slot: self.slots[i].id, job });
        self.go(i, 26, State::Backfill, Activity::Busy, now, acts);
    }
}
