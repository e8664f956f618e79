//! Taking the machine out of service: shutdown (condor_off: graceful,
//! peaceful, fast) and draining (condor_drain, and its cancellation).

use super::slot::BackfillCause;
use super::{Action, Activity, ShutdownKind, Startd, State, VacateKind};

impl Startd {
    /// `condor_off`: every slot goes out of service as `kind` says.
    pub(super) fn begin_shutdown(&mut self, kind: ShutdownKind, now: i64, acts: &mut Vec<Action>) {
        self.shutdown = Some(match (self.shutdown, kind) {
            (Some(ShutdownKind::Fast), _) | (_, ShutdownKind::Fast) => ShutdownKind::Fast,
            (Some(ShutdownKind::Graceful), _) => ShutdownKind::Graceful,
            _ => kind,
        });
        for i in 0..self.slots.len() {
            self.on_shutdown(i, kind, now, acts);
        }
    }

    /// `condor_drain`: no new claims; each slot is Drained once its job has left.
    pub(super) fn drain(&mut self, kind: VacateKind, now: i64, acts: &mut Vec<Action>) {
        self.draining = true;
        let kind =
            if kind == VacateKind::Fast { ShutdownKind::Fast } else { ShutdownKind::Graceful };
        for i in 0..self.slots.len() {
            self.on_shutdown(i, kind, now, acts);
            // An idle slot is Drained at once.
            if self.slots[i].state == State::Owner {
                self.go(i, 40, State::Owner, Activity::Idle, now, acts);
            }
        }
    }

    /// `condor_drain -cancel`: the machine takes claims again.
    pub(super) fn cancel_drain(&mut self, now: i64, acts: &mut Vec<Action>) {
        self.draining = false;
        for i in 0..self.slots.len() {
            if self.slots[i].state == State::Drained {
                self.go(i, 41, State::Owner, Activity::Idle, now, acts);
                self.evaluate(i, now, acts);
            }
        }
    }

    pub(super) fn on_shutdown(
        &mut self,
        i: usize,
        kind: ShutdownKind,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let (state, activity) = (self.slots[i].state, self.slots[i].activity);
        let fast = kind == ShutdownKind::Fast;
        match (state, activity) {
            (State::Owner | State::Drained, _) => {}
            (State::Unclaimed, _) => {
                self.stop_benchmarking(i, now, acts);
                self.go(i, 2, State::Owner, Activity::Idle, now, acts)
            }
            (State::Matched, _) => self.go(i, 8, State::Owner, Activity::Idle, now, acts),
            (State::Claimed, _) => {
                self.slots[i].retire.shutdown = true;
                self.end_claim(i, fast, now, acts);
            }
            (State::Preempting, Activity::Vacating) if fast => self.start_killing(i, 21, now, acts),
            (State::Preempting, _) => self.slots[i].retire.shutdown = true,
            (State::Backfill, _) => {
                self.slots[i].backfill_cause = Some(BackfillCause::Evict);
                if activity == Activity::Busy {
                    self.kill_backfill(i, now, acts);
                } else if activity == Activity::Idle {
                    self.leave_backfill(i, now, acts);
                }
            }
        }
    }
}
