//! The machine's input and output: the [`Event`]s the driver feeds it and the
//! [`Action`]s it returns, with a schedd's [`ClaimRequest`] and the kinds of
//! starter outcome, vacate, shutdown and checkpoint.

use classad::{ClassAd, Expr};

use super::{Activity, Measurements, SlotId, State};

/// A schedd's request to claim a slot.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimRequest {
    /// The claim id the negotiator issued.
    pub claim_id: String,
    /// The claiming schedd's machine (`ClientMachine`).
    pub client_machine: String,
    /// The user who claims (`RemoteOwner`).
    pub owner: String,
    /// The user who uses the claim (`RemoteUser`), when not the owner.
    pub user: Option<String>,
    /// The request (job) ad the claim is for.
    pub ad: ClassAd,
}

/// How a starter ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StarterOutcome {
    /// The job ran to its end (exit, trap or hold).
    Completed,
    /// The job was evicted (vacated or killed) at the startd's request.
    Evicted,
    /// The starter failed (could not start the job, or crashed).
    Failed,
}

/// Vacate: `condor_vacate` and `condor_vacate -fast`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VacateKind {
    /// Retirement, then checkpoint and vacate notice.
    Graceful,
    /// Hard kill now.
    Fast,
}

/// Shutdown: `condor_off -graceful`, `-peaceful`, `-fast`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownKind {
    /// Jobs retire (MaxJobRetirementTime), then are vacated.
    Graceful,
    /// Jobs run to their end: retirement time is infinite.
    Peaceful,
    /// Jobs are hard-killed now.
    Fast,
}

/// Why a checkpoint is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointKind {
    /// `PERIODIC_CHECKPOINT`: the job keeps running (Claimed/Busy).
    Periodic,
    /// The first step of Preempting/Vacating.
    Vacate,
}

/// Something that happened, fed to [`Startd::handle`](super::Startd::handle).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Time to evaluate: send one at [`Startd::next_deadline`](super::Startd::next_deadline) (or more often).
    /// The startd polls every POLLING_INTERVAL while any slot is busy with a
    /// claim, a match or backfill, else every UPDATE_INTERVAL, and publishes
    /// every UPDATE_INTERVAL.
    Tick,
    /// New measurements (taken effect at once; policy is evaluated at the next tick).
    Measured(Measurements),
    /// The negotiator says this slot was matched.
    MatchNotified {
        /// The slot.
        slot: SlotId,
        /// The match's claim id.
        claim_id: String,
    },
    /// A schedd asks to claim the slot.
    ClaimRequested {
        /// The slot.
        slot: SlotId,
        /// The request.
        claim: ClaimRequest,
    },
    /// The schedd activates its claim with a job.
    ClaimActivated {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
        /// The job ad.
        job: ClassAd,
    },
    /// The schedd releases its claim (or a pending preempting claim goes away).
    ClaimReleased {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
    },
    /// The starter of the slot's job has exited.
    StarterExited {
        /// The slot.
        slot: SlotId,
        /// How.
        outcome: StarterOutcome,
    },
    /// The starter of the slot's job has exited and the claim goes on at
    /// once with the next job its schedd queued on it: as
    /// [`Event::StarterExited`] then [`Event::ClaimActivated`], with one
    /// evaluation of the timers and one publication of the slot's ad rather
    /// than two (a claim running a batch of short jobs does this per job).
    StarterExitedNext {
        /// The slot.
        slot: SlotId,
        /// How the job that ended ended.
        outcome: StarterOutcome,
        /// The claim.
        claim_id: String,
        /// The next job's ad.
        job: ClassAd,
    },
    /// A checkpoint the startd asked for finished.
    CheckpointFinished {
        /// The slot.
        slot: SlotId,
        /// Whether a snapshot was written.
        ok: bool,
    },
    /// Benchmarks finished.
    BenchmarkFinished {
        /// The slot.
        slot: SlotId,
        /// `Mips`.
        mips: i64,
        /// `KFlops`.
        kflops: i64,
    },
    /// The slot's backfill job exited.
    BackfillExited {
        /// The slot.
        slot: SlotId,
    },
    /// `condor_vacate`: one slot, or all (`None`).
    Vacate {
        /// The slot, or all.
        slot: Option<SlotId>,
        /// Graceful or fast.
        kind: VacateKind,
    },
    /// `condor_drain`: the machine takes no new claims; running jobs retire
    /// (graceful) or are vacated at once (fast) and each slot, once empty,
    /// is Drained.
    Drain {
        /// Graceful or fast.
        kind: VacateKind,
    },
    /// `condor_drain -cancel`: the machine takes claims again.
    CancelDrain,
    /// `condor_checkpoint`: the checkpointable jobs of one slot, or all
    /// (`None`), checkpoint now and run on, as a periodic checkpoint.
    CheckpointNow {
        /// The slot, or all.
        slot: Option<SlotId>,
    },
    /// The startd is shutting down.
    Shutdown(ShutdownKind),
    /// The negotiator found a better match for a claimed slot (machine RANK
    /// or user priority): the current claim is preempted in its favour.
    BetterMatch {
        /// The slot.
        slot: SlotId,
        /// The preempting claim.
        claim: ClaimRequest,
    },
    /// The schedd changed attributes of the running job (`andes qedit`): the
    /// startd's copy of the job ad takes them, and policy sees them at the
    /// next evaluation.
    JobUpdated {
        /// The slot.
        slot: SlotId,
        /// The claim the job runs on.
        claim_id: String,
        /// The attributes.
        attrs: ClassAd,
    },
    /// Sets (`Some`) or clears (`None`) an attribute of one slot's ad or of
    /// all (`andes host set-attr`). `KeyboardIdle` and `ConsoleIdle` set this
    /// way count up from the value set, as measured ones do, until cleared
    /// or until the machine's own measured activity is more recent.
    SetAttribute {
        /// The slot, or all.
        slot: Option<SlotId>,
        /// The attribute.
        name: String,
        /// The new expression, or `None` to go back to the startd's own value.
        value: Option<Expr>,
    },
}

impl Event {
    /// The one slot the event concerns, for the events that concern one
    /// slot alone (a machine-wide event, or one that may name no slot,
    /// gives `None`).
    pub fn slot(&self) -> Option<SlotId> {
        match self {
            Event::MatchNotified { slot, .. }
            | Event::ClaimRequested { slot, .. }
            | Event::BetterMatch { slot, .. }
            | Event::ClaimActivated { slot, .. }
            | Event::JobUpdated { slot, .. }
            | Event::ClaimReleased { slot, .. }
            | Event::StarterExited { slot, .. }
            | Event::StarterExitedNext { slot, .. }
            | Event::CheckpointFinished { slot, .. }
            | Event::BenchmarkFinished { slot, .. }
            | Event::BackfillExited { slot } => Some(*slot),
            Event::Tick
            | Event::Measured(_)
            | Event::Vacate { .. }
            | Event::Drain { .. }
            | Event::CancelDrain
            | Event::CheckpointNow { .. }
            | Event::Shutdown(_)
            | Event::SetAttribute { .. } => None,
        }
    }
}

/// Something the driver must do, returned by [`Startd::handle`](super::Startd::handle).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A state or activity change (for logs; tests check the numbers).
    Transition {
        /// The slot.
        slot: SlotId,
        /// The spec's transition number, 1 to 32.
        number: u8,
        /// State and activity before.
        from: (State, Activity),
        /// State and activity after.
        to: (State, Activity),
    },
    /// Tell the schedd its claim request was accepted.
    ClaimAccepted {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
    },
    /// Tell the schedd its claim request was refused.
    ClaimRefused {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
        /// Why.
        reason: String,
    },
    /// Tell the schedd its activation was refused.
    ActivationRefused {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
        /// Why.
        reason: String,
    },
    /// Start a starter for the job.
    StartJob {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
        /// The job ad.
        job: ClassAd,
    },
    /// Suspend the job (the starter stops polling it).
    Suspend {
        /// The slot.
        slot: SlotId,
    },
    /// Resume a suspended job.
    Continue {
        /// The slot.
        slot: SlotId,
    },
    /// Checkpoint the job (a snapshot, or the job's own checkpoint call).
    Checkpoint {
        /// The slot.
        slot: SlotId,
        /// Periodic or on vacate.
        kind: CheckpointKind,
    },
    /// Give the job its vacate notice; the starter hard-kills it after
    /// `grace_secs`. A suspended job is resumed by the notice if it can hear
    /// it; one that cannot is ended where it is, without running again.
    SoftKill {
        /// The slot.
        slot: SlotId,
        /// Seconds.
        grace_secs: u64,
    },
    /// Kill the job now.
    HardKill {
        /// The slot.
        slot: SlotId,
    },
    /// KILLING_TIMEOUT passed after a hard kill and the job is still not
    /// gone: kill the starter and all it runs with the strongest means the
    /// driver has (HTCondor's SIGKILL to the starter and its children). The
    /// slot stays in Preempting/Killing until the starter has exited
    /// ([`Event::StarterExited`]); it is never freed while its job may still
    /// run. Sent again every KILLING_TIMEOUT until then.
    KillStarter {
        /// The slot.
        slot: SlotId,
    },
    /// Tell the schedd the claim is broken (preempted).
    ClaimBroken {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
    },
    /// Tell the schedd the startd releases the claim (CLAIM_WORKLIFE over).
    ReleaseClaim {
        /// The slot.
        slot: SlotId,
        /// The claim.
        claim_id: String,
    },
    /// Run the benchmarks, then send [`Event::BenchmarkFinished`].
    RunBenchmarks {
        /// The slot.
        slot: SlotId,
    },
    /// Start the named backfill job (from BACKFILL_JOBS).
    StartBackfill {
        /// The slot.
        slot: SlotId,
        /// The job's name.
        job: String,
    },
    /// Kill the slot's backfill job, then send [`Event::BackfillExited`].
    KillBackfill {
        /// The slot.
        slot: SlotId,
    },
    /// Send the slot's ad to the collector.
    Publish {
        /// The slot.
        slot: SlotId,
        /// The ad.
        ad: ClassAd,
    },
    /// Every slot is in Owner with no job after a shutdown: the daemon may exit.
    ShutdownComplete,
    /// An event named a slot or claim that does not exist here.
    EventRejected {
        /// Why.
        reason: String,
    },
}
