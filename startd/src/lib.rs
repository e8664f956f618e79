//! The startd: machine ads, slots and HTCondor's startd policy as a pure
//! state machine.
//!
//! [`Startd`] holds every slot of one execute host. It never does I/O and
//! never reads the clock: the daemon feeds it [`Event`]s, each with the time
//! `now` (seconds since the epoch), and carries out the [`Action`]s it
//! returns; [`Startd::next_deadline`] says when to wake it next, so
//! MATCH_TIMEOUT, KILLING_TIMEOUT and the end of retirement do not depend on
//! the polling granularity. Tests drive it on a virtual clock.
//!
//! ```
//! use andes_startd::{Event, MachineInfo, Measurements, Policy, Startd, State};
//!
//! let now = 1_700_000_000;
//! let info = MachineInfo { cpus: 2, ..MachineInfo::default() };
//! let mut startd = Startd::new(Policy::default_policy(), &info, now).unwrap();
//! // An idle machine: keyboard untouched for an hour, no load.
//! startd.handle(now, Event::Measured(Measurements {
//!     keyboard_idle: 3600,
//!     console_idle: 3600,
//!     ..Measurements::default()
//! }));
//! startd.handle(now, Event::Tick);
//! assert_eq!(startd.slot(1).unwrap().state(), State::Unclaimed);
//! assert_eq!(startd.slots().len(), 2);
//! ```
//!
//! # Policy
//!
//! The policy is HTCondor's configuration language ([`andes_config`]).
//! [`default_config`] holds andes's defaults (`config/andes_defaults.config`),
//! then the specification's default policy block verbatim
//! (`config/default_policy.config`) and a labelled supplement for the names
//! that block uses without defining (`SmallJob`, `IsPVM`, `IsVanilla`, ...).
//! Site files are loaded on top, then [`Policy::from_config`] reads START,
//! IS_OWNER, IS_VALID_CHECKPOINT_PLATFORM, RANK, WANT_SUSPEND, SUSPEND,
//! CONTINUE, PREEMPT, WANT_VACATE, KILL, KILLING_TIMEOUT,
//! MAXJOBRETIREMENTTIME, CLAIM_WORKLIFE, MATCH_TIMEOUT, PERIODIC_CHECKPOINT,
//! RunBenchmarks, START_BACKFILL, EVICT_BACKFILL, POLLING_INTERVAL,
//! UPDATE_INTERVAL, STARTD_ATTRS/STARTD_EXPRS, STARTD_SLOT_ATTRS/
//! STARTD_VM_EXPRS, NUM_CPUS, MEMORY, NUM_SLOTS, SLOT_TYPE_N and
//! NUM_SLOTS_TYPE_N. The spec's example policies ship as
//! [`policy::TESTJOB_POLICY`] and its siblings.
//!
//! Expressions are evaluated with the slot's machine ad as MY and the job
//! ad (or, before activation, the claim's request ad) as TARGET, with
//! `CurrentTime` = `now`. The claim expressions are published in the machine
//! ad under their configuration names, so PREEMPT can name SUSPEND and
//! WANT_SUSPEND as the default policy does.
//!
//! # Jobs that can checkpoint
//!
//! A job can checkpoint when its ad says `WasmCheckpoint = "transparent"`
//! (a module instrumented by `andes compile`: the host snapshots it) or
//! `WasmCheckpoint = "cooperative"` (it links the guest SDK's checkpoint
//! call). With the attribute absent, or any other value, it cannot. The
//! spec's `_VANILLA` variants (WANT_SUSPEND_VANILLA, SUSPEND_VANILLA,
//! CONTINUE_VANILLA, PREEMPT_VANILLA, WANT_VACATE_VANILLA, KILL_VANILLA)
//! apply to jobs that cannot checkpoint, falling back to the standard
//! expressions. IS_VALID_CHECKPOINT_PLATFORM asks a transparent job that
//! has checkpointed (`NumCkpts` not 0) for a `LastCheckpointPlatform` equal
//! to the machine's `CheckpointPlatform`.
//!
//! # Mapping onto Wasm
//!
//! Suspend and continue are the starter's suspend and resume (the job is no
//! longer polled). Preempting/Vacating checkpoints a job that can, then gives
//! it the vacate notice (a soft kill whose grace is MACHINE_MAX_VACATE_TIME,
//! lowered by the job's JobMaxVacateTime); KILL moves on to Killing, a hard
//! kill, and KILLING_TIMEOUT after it (and every KILLING_TIMEOUT until the
//! starter is gone) the startd kills the starter itself
//! ([`Action::KillStarter`]); the slot never leaves Killing while its job
//! may still run. A periodic checkpoint keeps the slot
//! Claimed/Busy.
//!
//! # Backfill
//!
//! With `ENABLE_BACKFILL = True` and `BACKFILL_SYSTEM = andes`, an
//! Unclaimed/Idle slot whose START_BACKFILL is true enters Backfill and
//! starts the next job of `BACKFILL_JOBS` (a list of names the andes backfill
//! runner knows) with [`Action::StartBackfill`]. A match, a claim, a vacate,
//! a shutdown or EVICT_BACKFILL kills it ([`Action::KillBackfill`]).
//!
//! # Where andes differs from the spec, and why
//!
//! * A slot runs its own backfill job (the spec's BOINC client is one per
//!   machine); a backfill job that exits on its own (27) is replaced at the
//!   next poll (26), not in the same instant, so a job that fails at once
//!   cannot spin the startd.
//! * A job that can checkpoint has `LastPeriodicCheckpoint` = `JobStart`
//!   until its first periodic checkpoint; otherwise the default
//!   PERIODIC_CHECKPOINT (`CurrentTime - LastPeriodicCheckpoint > ...`) could
//!   never become true.
//! * A match or claim that reaches a slot in the Owner state, when IS_OWNER
//!   is not true (or START is true for the request), takes it through
//!   Unclaimed (1) first, then 6 or 5: the spec allows claiming an Owner
//!   slot but numbers no such transition.
//! * Vacate (graceful) and shutdown (graceful) go through Retiring (13) as
//!   owner preemption does; fast ones skip retirement and vacating
//!   (13, 18 straight to Killing). A schedd releasing a claim whose job runs
//!   skips retirement too.
//! * RunBenchmarks is not run once at startup by itself; write it in terms
//!   of `LastBenchmark == 0`, as the spec's example does.
//! * KeyboardIdle and ConsoleIdle count up between measurements, so a
//!   policy sees idle time grow between polls as it does on a real host.

mod machine;
pub mod measure;
pub mod policy;

pub use machine::{
    Action, Activity, CheckpointKind, ClaimRequest, DEFAULT_CHECKPOINT_PLATFORM, Event, MAX_TIME,
    MachineInfo, Measurements, NO_CONSOLE_IDLE, Reconfigured, SLOT_JOB_ATTRS, ShutdownKind, Slot,
    SlotId, Startd, StarterOutcome, State, VacateKind, Watcher, can_checkpoint,
};
pub use policy::{Policy, PolicyError, SlotSpec, default_config};
