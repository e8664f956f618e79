//! A slot's number, [`State`] and [`Activity`], in HTCondor's spelling.

/// A slot's number: 1 for `slot1@host`, and so on.
pub type SlotId = u32;

/// A slot's state (HTCondor's `State` attribute).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// The machine's owner is using it, or it is not available to andes.
    Owner,
    /// Available, not running a job.
    Unclaimed,
    /// Matched by the negotiator, not yet claimed by the schedd.
    Matched,
    /// Claimed by a schedd.
    Claimed,
    /// The claim is being preempted.
    Preempting,
    /// Running a backfill job while otherwise idle.
    Backfill,
    /// The machine is being drained (condor_drain): it takes no new claims;
    /// a slot is here once its job has left.
    Drained,
}

impl State {
    /// HTCondor's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Owner => "Owner",
            State::Unclaimed => "Unclaimed",
            State::Matched => "Matched",
            State::Claimed => "Claimed",
            State::Preempting => "Preempting",
            State::Backfill => "Backfill",
            State::Drained => "Drained",
        }
    }
}

/// A slot's activity (HTCondor's `Activity` attribute).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activity {
    /// No job activity.
    Idle,
    /// A job is running.
    Busy,
    /// A job is suspended.
    Suspended,
    /// A job is running out its retirement time before preemption.
    Retiring,
    /// A job is being checkpointed and given its vacate notice.
    Vacating,
    /// A job is being hard-killed.
    Killing,
    /// The startd is running benchmarks.
    Benchmarking,
}

impl Activity {
    /// HTCondor's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Idle => "Idle",
            Activity::Busy => "Busy",
            Activity::Suspended => "Suspended",
            Activity::Retiring => "Retiring",
            Activity::Vacating => "Vacating",
            Activity::Killing => "Killing",
            Activity::Benchmarking => "Benchmarking",
        }
    }
}
