//! The startd as a pure state machine: `(state, event, now) -> (state, actions)`.
//!
//! The machine is cut by concept:
//!
//! - `state`: [`SlotId`], [`State`] and [`Activity`].
//! - `info`: [`MachineInfo`] (what the machine is) and [`Measurements`] (what
//!   it measures).
//! - `event`: the machine's input and output, [`Event`] and [`Action`], with
//!   [`ClaimRequest`] and the kinds of outcome, vacate, shutdown and checkpoint.
//! - `slot`: [`Slot`], with its claim, job and retirement.
//! - `startd`: [`Startd`], its construction and [`Startd::handle`], which
//!   dispatches each event.
//! - `reconfig`: [`Startd::reconfigure`] and [`Reconfigured`].
//! - `ad`: the slot's machine ad: measurements, the attributes refreshed at
//!   every event, owner load, attributes set by hand.
//! - `policy_eval`: evaluating the policy's expressions for a slot.
//! - `transitions`: `go`, the one place a slot changes state or activity; a
//!   slot's policy round; the timers (MATCH_TIMEOUT, KILLING_TIMEOUT, the end
//!   of retirement).
//! - `claims`: matches, claims, activations, releases and the end of a job.
//! - `preempt`: vacate, retirement, and preemption (Vacating, Killing).
//! - `backfill`: starting, replacing and evicting backfill jobs.
//! - `drain`: shutdown and draining (condor_off, condor_drain).
//! - `checkpoint`: periodic checkpoints and condor_checkpoint.
//! - `watch`: the evaluator, which tells a watcher whose job ad it evaluates.

mod ad;
mod backfill;
mod checkpoint;
mod claims;
mod drain;
mod event;
mod info;
mod policy_eval;
mod preempt;
mod reconfig;
mod slot;
mod startd;
mod state;
mod transitions;
mod watch;

pub use ad::SLOT_JOB_ATTRS;
pub use event::{
    Action, CheckpointKind, ClaimRequest, Event, ShutdownKind, StarterOutcome, VacateKind,
};
pub use info::{DEFAULT_CHECKPOINT_PLATFORM, MachineInfo, Measurements, NO_CONSOLE_IDLE};
pub use reconfig::Reconfigured;
pub use slot::{Slot, can_checkpoint};
pub use startd::{MAX_TIME, Startd};
pub use state::{Activity, SlotId, State};
pub use watch::Watcher;
