//! Checkpoints a running job takes and keeps running: PERIODIC_CHECKPOINT
//! and condor_checkpoint.

use super::policy_eval::truthy;
use super::{Action, Activity, CheckpointKind, SlotId, Startd, State};

impl Startd {
    /// `condor_checkpoint`: the checkpointable jobs running on one slot, or
    /// all, checkpoint now and run on.
    pub(super) fn checkpoint_now(
        &mut self,
        slot: Option<SlotId>,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let targets: Vec<usize> = match slot {
            Some(id) => self.slot_or_reject(id, acts).into_iter().collect(),
            None => (0..self.slots.len()).collect(),
        };
        let mut asked = 0;
        for i in targets {
            let s = &mut self.slots[i];
            let running = s.state == State::Claimed && s.activity == Activity::Busy;
            if running && s.job.as_ref().is_some_and(|j| j.checkpointable) {
                s.last_periodic_ckpt = Some(now);
                s.ad.insert_value(classad::name!("LastPeriodicCheckpoint"), now);
                s.dirty = true;
                acts.push(Action::Checkpoint { slot: s.id, kind: CheckpointKind::Periodic });
                asked += 1;
            }
        }
        if asked == 0 {
            let what = slot.map_or("any slot".to_string(), |s| format!("slot {s}"));
            acts.push(Action::EventRejected {
                reason: format!("no job that can checkpoint is running on {what}"),
            });
        }
    }

    pub(super) fn periodic_checkpoint(&mut self, i: usize, now: i64, acts: &mut Vec<Action>) {
        let s = &self.slots[i];
        let Some(j) = &s.job else { return };
        if !j.checkpointable || s.last_periodic_ckpt == Some(now) {
            return;
        }
        if truthy(&self.eval_named(i, |n| &n.periodic_checkpoint)) {
            let s = &mut self.slots[i];
            s.last_periodic_ckpt = Some(now);
            s.ad.insert_value(classad::name!("LastPeriodicCheckpoint"), now);
            s.dirty = true;
            acts.push(Action::Checkpoint { slot: s.id, kind: CheckpointKind::Periodic });
        }
    }
}
