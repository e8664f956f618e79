//! One [`Slot`]: its ad, state, activity, claim, job and retirement, and
//! [`can_checkpoint`], which says whether its job can checkpoint.

use classad::ClassAd;

use super::{Activity, ClaimRequest, SlotId, State};
use crate::policy::SlotSpec;

/// Why a claim ends, deciding what the schedd is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClaimEnd {
    Broken,
    Released,
    Expired,
}

#[derive(Debug, Clone)]
pub(super) struct Claim {
    pub(super) req: ClaimRequest,
    pub(super) since: i64,
    /// Jobs started on the claim: CLAIM_WORKLIFE bounds only the ones after
    /// the first.
    pub(super) activations: u32,
    pub(super) run_time: i64,
    pub(super) suspend_time: i64,
    pub(super) end: ClaimEnd,
}

#[derive(Debug, Clone)]
pub(super) struct Job {
    pub(super) ad: ClassAd,
    pub(super) checkpointable: bool,
    pub(super) run_accum: i64,
    pub(super) suspend_accum: i64,
    pub(super) seg_start: i64,
    pub(super) suspended: bool,
}

impl Job {
    pub(super) fn run_time(&self, now: i64) -> i64 {
        self.run_accum + if self.suspended { 0 } else { (now - self.seg_start).max(0) }
    }
    pub(super) fn suspend_time(&self, now: i64) -> i64 {
        self.suspend_accum + if self.suspended { (now - self.seg_start).max(0) } else { 0 }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Retire {
    pub(super) active: bool,
    pub(super) better_match: bool,
    pub(super) owner: bool,
    pub(super) shutdown: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BackfillCause {
    Evict,
    Matched,
    Claimed,
}

/// Whether a job can checkpoint: its ad says `WasmCheckpoint =
/// "transparent"` or `"cooperative"`.
pub fn can_checkpoint(job: &ClassAd) -> bool {
    job.eval_attr(classad::name!("WasmCheckpoint")).as_str().is_some_and(|s| {
        s.eq_ignore_ascii_case("transparent") || s.eq_ignore_ascii_case("cooperative")
    })
}

/// One slot: its ad, state, activity, claim and job.
#[derive(Debug, Clone)]
pub struct Slot {
    pub(super) id: SlotId,
    pub(super) spec: SlotSpec,
    pub(super) ad: ClassAd,
    pub(super) static_ad: ClassAd,
    pub(super) overrides: ClassAd,
    pub(super) state: State,
    pub(super) activity: Activity,
    pub(super) entered_state: i64,
    pub(super) entered_activity: i64,
    pub(super) claim: Option<Claim>,
    pub(super) pending: Option<ClaimRequest>,
    pub(super) job: Option<Job>,
    pub(super) match_deadline: Option<i64>,
    pub(super) killing_deadline: Option<i64>,
    pub(super) retire: Retire,
    pub(super) retire_deadline: Option<i64>,
    pub(super) vacate_ckpt_pending: bool,
    pub(super) backfill_job: Option<String>,
    pub(super) backfill_cause: Option<BackfillCause>,
    pub(super) cpu_busy_since: Option<i64>,
    pub(super) last_periodic_ckpt: Option<i64>,
    pub(super) dirty: bool,
}

impl Slot {
    /// Whether the machine's timers read this slot at every event (a match
    /// waiting for its claim, a kill under way, a retirement): its ad is
    /// kept fresh for them whatever the event.
    pub(super) fn timed(&self) -> bool {
        self.state == State::Matched || self.state == State::Preempting || self.retire.active
    }

    /// The slot number.
    pub fn id(&self) -> SlotId {
        self.id
    }
    /// The resources the slot has.
    pub fn spec(&self) -> &SlotSpec {
        &self.spec
    }
    /// The machine ad as last refreshed.
    pub fn ad(&self) -> &ClassAd {
        &self.ad
    }
    /// The state.
    pub fn state(&self) -> State {
        self.state
    }
    /// The activity.
    pub fn activity(&self) -> Activity {
        self.activity
    }
    /// The current claim's id.
    pub fn claim_id(&self) -> Option<&str> {
        self.claim.as_ref().map(|c| c.req.claim_id.as_str())
    }
    /// The claim waiting for the current one's preemption.
    pub fn pending_claim_id(&self) -> Option<&str> {
        self.pending.as_ref().map(|c| c.claim_id.as_str())
    }
    /// The running job's ad, if a starter runs one.
    pub fn job(&self) -> Option<&ClassAd> {
        self.job.as_ref().map(|j| &j.ad)
    }
    /// Whether the job's starter is suspended.
    pub fn job_suspended(&self) -> bool {
        self.job.as_ref().is_some_and(|j| j.suspended)
    }
    /// The job's run time so far, suspensions excluded (the retirement clock).
    pub fn job_run_time(&self, now: i64) -> Option<i64> {
        self.job.as_ref().map(|j| j.run_time(now))
    }
    /// The backfill job running, if any.
    pub fn backfill_job(&self) -> Option<&str> {
        self.backfill_job.as_deref()
    }
    /// Whether the slot is retiring (Claimed/Retiring, or suspended in retirement).
    pub fn retiring(&self) -> bool {
        self.retire.active
    }
}
