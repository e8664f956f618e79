//! The shadow's decisions, without I/O: what the queue is told when a report
//! arrives, a lease runs out, an activation gets no answer, a reconnect learns
//! whether the job runs, and how a run ended. The shadow's tasks (`run`) do
//! the talking to the host and the spool, and carry these out in order
//! through the claim's lane. Time is a number the caller passes, so the
//! decisions are tested on a virtual clock, as the startd's machine is.
//!
//! **Nothing runs twice.** A job's activation is recorded in the queue
//! (`ActivationPending`, [`PoolOp::Activating`]) before it is sent. Whenever
//! the shadow does not know whether its job started (the schedd restarted, or
//! the activation's connection failed after the request went out), it asks
//! the host and [`Reconnect::decide`] alone says what follows: the job is
//! taken as started only on the host's word; without it, a pending job stays
//! idle with its activation cleared (or counted as failed), never started a
//! second time elsewhere while it might run.

use andes_protocol::pool::RunState;
use classad::{ClassAd, Value};

use crate::queue::PoolOp;

/// The reason a job whose host went silent is evicted with.
pub(crate) const HOST_GONE: &str = "the job's host is gone";
/// The reason a job whose claim ended under it is evicted with.
pub(crate) const CLAIM_ENDED: &str = "the claim ended";
/// The reason a job whose host missed its lease is evicted with.
pub(crate) const LEASE_MISSED: &str = "the job's host did not answer within its lease";

/// The ad of a run that stopped without ending: its `LastVacateReason`.
pub(crate) fn lost_ad(reason: &str) -> ClassAd {
    let mut a = ClassAd::new();
    a.insert_value(classad::name!("LastVacateReason"), reason);
    a
}

/// What the host said when asked about the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostSays {
    /// Nothing within the job's lease.
    Nothing,
    /// A report of the job: it runs (or ran) there.
    Runs,
    /// A report, but not of the job: it is not there.
    NotThere,
}

/// A shadow that does not know whether its job started, and asks its host.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reconnect {
    /// The claim the job was (or was to be) activated on.
    pub claim_id: String,
    /// The activation was recorded and the job is still idle: it was never
    /// seen to start.
    pub pending: bool,
    /// Why the activation went unanswered, when that is how this began (not
    /// a restart of the schedd).
    pub unanswered: Option<String>,
}

/// What a decision tells the queue, and whether the shadow goes on
/// following the job.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Decision {
    /// Sent to the queue through the claim's lane, in order.
    pub ops: Vec<PoolOp>,
    /// The shadow follows the job's reports from here.
    pub follow: bool,
}

impl Reconnect {
    /// What the host's answer means for the job (see the module's
    /// documentation: nothing runs twice).
    pub(crate) fn decide(&self, says: HostSays) -> Decision {
        match says {
            HostSays::Runs => {
                // The host runs it: a pending job started now (its pending
                // activation ends); a running one is reconnected.
                let op = if self.pending {
                    PoolOp::Started(ClassAd::new())
                } else {
                    PoolOp::Reconnected
                };
                Decision { ops: vec![op], follow: true }
            }
            HostSays::NotThere => {
                let mut ops = Vec::new();
                if !self.pending {
                    ops.push(PoolOp::Reconnected);
                }
                ops.push(self.lost(CLAIM_ENDED));
                Decision { ops, follow: false }
            }
            HostSays::Nothing => Decision { ops: vec![self.lost(HOST_GONE)], follow: false },
        }
    }

    /// The job is not running on the claim: one that never started stays
    /// idle (an unanswered activation counts as a failed one); one that ran
    /// is evicted.
    fn lost(&self, why: &str) -> PoolOp {
        match (&self.unanswered, self.pending) {
            (Some(reason), true) => PoolOp::ActivationFailed(self.claim_id.clone(), reason.clone()),
            (None, true) => PoolOp::NotStarted(self.claim_id.clone()),
            (_, false) => PoolOp::Evicted(lost_ad(why)),
        }
    }
}

/// How an activation was answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The host took the job (and sent its first report).
    Report,
    /// The request may have reached the host: the job may run there (the
    /// reason the answer was lost).
    Unknown(String),
    /// The host refused, or the request never left (the reason).
    Refused(String),
}

/// What follows an activation's answer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Activated {
    /// It runs: these go to the queue and the shadow follows it.
    Runs(Vec<PoolOp>),
    /// Unknown: ask the host, as a restarted schedd would (the activation is
    /// recorded as pending, so [`Reconnect::decide`] keeps it from running
    /// twice).
    AskHost,
    /// It never started: these go to the queue and the claim is released.
    GiveUp(Vec<PoolOp>),
}

/// What an activation's answer means for job on `claim_id` whose start
/// attributes are `started` (RemoteHost, ClaimId, ...); `resuming` from a
/// snapshot counts one more of `restarts` (NumRestarts).
pub(crate) fn activated(
    claim_id: &str,
    answer: Answer,
    mut started: ClassAd,
    resuming: bool,
    restarts: i64,
) -> Activated {
    match answer {
        Answer::Report => {
            if resuming {
                started.insert_value(classad::name!("NumRestarts"), restarts + 1);
            }
            Activated::Runs(vec![PoolOp::Started(started)])
        }
        Answer::Unknown(_) => Activated::AskHost,
        Answer::Refused(reason) => {
            Activated::GiveUp(vec![PoolOp::ActivationFailed(claim_id.to_string(), reason)])
        }
    }
}

/// What the shadow keeps of a running job between reports: when it last
/// told the queue, what state and deferral it last told, and its checkpoint
/// count.
#[derive(Clone, Debug)]
pub(crate) struct Follow {
    last_push: i64,
    last_state: RunState,
    last_deferred: Option<String>,
    /// Seconds between updates of a running job (`SHADOW_QUEUE_UPDATE_INTERVAL`).
    update_every: i64,
    /// The job's periodic policy reads its usage: every report goes on.
    every_report: bool,
    /// NumCkpts.
    ckpts: i64,
}

impl Follow {
    /// Following a job from its first report (in `state`) at `now`. A job
    /// suspended before this first look is one suspension to record.
    pub(crate) fn new(
        state: RunState,
        now: i64,
        update_every: i64,
        every_report: bool,
        ckpts: i64,
    ) -> Follow {
        let last_state = if state == RunState::Suspended { RunState::Running } else { state };
        Follow {
            last_push: now,
            last_state,
            last_deferred: None,
            update_every,
            every_report,
            ckpts,
        }
    }

    /// A report of the running job at `now`, in `state`, with the host's
    /// `update` (only what a host may set): a suspension or resumption
    /// (HTCondor's status 7 and the job log's 010 and 011 events) and, when
    /// due or something changed, the update.
    pub(crate) fn on_report(&mut self, state: RunState, update: ClassAd, now: i64) -> Vec<PoolOp> {
        let mut ops = Vec::new();
        match (self.last_state, state) {
            (RunState::Suspended, RunState::Suspended) => {}
            (_, RunState::Suspended) => ops.push(PoolOp::Suspension(true)),
            (RunState::Suspended, RunState::Running) => ops.push(PoolOp::Suspension(false)),
            _ => {}
        }
        let deferred = update.get(classad::name!("JobDeferredUntil")).map(|e| e.to_string());
        let due = self.every_report || now - self.last_push >= self.update_every;
        if due || state != self.last_state || deferred != self.last_deferred {
            ops.push(PoolOp::Update(update));
            self.last_push = now;
            self.last_state = state;
            self.last_deferred = deferred;
        }
        ops
    }

    /// A checkpoint of `kib` KiB was kept at `now` (a transparent snapshot
    /// names its `platform`): NumCkpts, LastCkptTime, CkptSize.
    pub(crate) fn checkpoint_kept(&mut self, now: i64, kib: i64, platform: Option<&str>) -> PoolOp {
        self.ckpts += 1;
        let mut a = ClassAd::new();
        a.insert_value(classad::name!("NumCkpts"), self.ckpts);
        a.insert_value(classad::name!("LastCkptTime"), now);
        a.insert_value(classad::name!("CkptSize"), kib);
        if let Some(p) = platform {
            a.insert_value(classad::name!("LastCheckpointPlatform"), p);
        }
        PoolOp::Update(a)
    }
}

/// How a run ended, as the queue takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It exited with its CheckpointExitCode and its files came back: it
    /// saved its state and runs again (evicted, its files kept).
    Checkpointed,
    /// It stopped without ending (a vacate, a preemption): back to idle.
    Evicted,
    /// It ended (exited, or was held by its host).
    Exited,
}

/// How a run ended: `evicted` by its host or not, its outputs `transferred`
/// or not, its `ending` ad (exit code, hold), and its CheckpointExitCode.
pub(crate) fn ended(
    evicted: bool,
    transferred: bool,
    ending: &ClassAd,
    checkpoint_code: Option<i64>,
) -> Ended {
    let exit = match ending.eval_attr(classad::name!("ExitCode")) {
        Value::Int(c) => Some(c),
        _ => None,
    };
    if !evicted
        && transferred
        && !ending.contains(classad::name!("HoldReasonCode"))
        && checkpoint_code.is_some()
        && exit == checkpoint_code
    {
        Ended::Checkpointed
    } else if evicted {
        Ended::Evicted
    } else {
        Ended::Exited
    }
}

/// Puts a hold of `code` (subcode `sub`) with `reason` on `ending`, unless
/// the host held it already: the host's reason is the first cause.
pub(crate) fn hold_unless_held(ending: &mut ClassAd, code: i64, sub: i64, reason: &str) {
    if !ending.contains(classad::name!("HoldReasonCode")) {
        ending.insert_value(classad::name!("HoldReasonCode"), code);
        ending.insert_value(classad::name!("HoldReasonSubCode"), sub);
        ending.insert_value(classad::name!("HoldReason"), reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reconnect(pending: bool, unanswered: Option<&str>) -> Reconnect {
        Reconnect { claim_id: "c1".into(), pending, unanswered: unanswered.map(String::from) }
    }

    #[test]
    fn a_job_is_taken_as_started_only_on_its_hosts_word() {
        // Every case of a reconnect: whether the activation was pending and
        // unanswered, and what the host said.
        for pending in [false, true] {
            for unanswered in [None, Some("connection reset")] {
                let r = reconnect(pending, unanswered);
                for says in [HostSays::Nothing, HostSays::Runs, HostSays::NotThere] {
                    let d = r.decide(says);
                    let started = d.ops.iter().any(|o| matches!(o, PoolOp::Started(_)));
                    let reconnected = d.ops.contains(&PoolOp::Reconnected);
                    // Started or reconnected only when the host runs it.
                    assert_eq!(
                        started || reconnected && says == HostSays::Runs,
                        says == HostSays::Runs,
                        "{pending} {unanswered:?} {says:?}"
                    );
                    assert_eq!(d.follow, says == HostSays::Runs);
                    // A pending job the host does not run is never evicted
                    // (which would count a run): it stays idle.
                    if pending && says != HostSays::Runs {
                        assert!(!d.ops.iter().any(|o| matches!(o, PoolOp::Evicted(_))), "{d:?}");
                        let cleared = match unanswered {
                            Some(why) => PoolOp::ActivationFailed("c1".into(), why.into()),
                            None => PoolOp::NotStarted("c1".into()),
                        };
                        assert_eq!(d.ops, vec![cleared]);
                    }
                    // A job that was running and is gone is evicted, and was
                    // reconnected first if the host answered at all.
                    if !pending && says != HostSays::Runs {
                        let why = if says == HostSays::Nothing { HOST_GONE } else { CLAIM_ENDED };
                        let mut want = Vec::new();
                        if says == HostSays::NotThere {
                            want.push(PoolOp::Reconnected);
                        }
                        want.push(PoolOp::Evicted(lost_ad(why)));
                        assert_eq!(d.ops, want);
                    }
                }
            }
        }
    }

    #[test]
    fn an_unanswered_activation_asks_the_host_and_a_refused_one_gives_up() {
        let mut started = ClassAd::new();
        started.insert_value("RemoteHost", "slot1@h");
        assert_eq!(
            activated("c1", Answer::Unknown("reset".into()), started.clone(), false, 0),
            Activated::AskHost
        );
        assert_eq!(
            activated("c1", Answer::Refused("no room".into()), started.clone(), false, 0),
            Activated::GiveUp(vec![PoolOp::ActivationFailed("c1".into(), "no room".into())])
        );
        let Activated::Runs(ops) = activated("c1", Answer::Report, started.clone(), true, 2) else {
            panic!()
        };
        let [PoolOp::Started(ad)] = &ops[..] else { panic!("{ops:?}") };
        assert_eq!(ad.eval_attr("NumRestarts"), Value::Int(3), "a resume counts a restart");
        assert_eq!(ad.eval_attr("RemoteHost"), Value::Str("slot1@h".into()));
        let Activated::Runs(ops) = activated("c1", Answer::Report, started, false, 2) else {
            panic!()
        };
        let [PoolOp::Started(ad)] = &ops[..] else { panic!("{ops:?}") };
        assert!(!ad.contains("NumRestarts"));
    }

    fn update(text: &str) -> ClassAd {
        classad::parse_ad(text).unwrap()
    }

    #[test]
    fn a_running_job_updates_the_queue_when_due_or_changed_on_a_virtual_clock() {
        let mut f = Follow::new(RunState::Running, 1_000, 60, false, 0);
        // Within the interval, nothing changed: nothing goes.
        assert!(f.on_report(RunState::Running, update("[ImageSize = 10]"), 1_010).is_empty());
        assert!(f.on_report(RunState::Running, update("[ImageSize = 11]"), 1_059).is_empty());
        // Due at 60 s after the last push.
        assert_eq!(f.on_report(RunState::Running, update("[ImageSize = 12]"), 1_060).len(), 1);
        assert!(f.on_report(RunState::Running, update("[ImageSize = 12]"), 1_100).is_empty());
        // A suspension goes at once, with the update; staying suspended
        // sends nothing new; resuming does.
        let ops = f.on_report(RunState::Suspended, update("[]"), 1_101);
        assert_eq!(ops[0], PoolOp::Suspension(true));
        assert!(matches!(ops[1], PoolOp::Update(_)));
        assert!(f.on_report(RunState::Suspended, update("[]"), 1_102).is_empty());
        let ops = f.on_report(RunState::Running, update("[]"), 1_103);
        assert_eq!(ops[0], PoolOp::Suspension(false));
        // A deferral the host starts or ends goes at once.
        assert_eq!(
            f.on_report(RunState::Running, update("[JobDeferredUntil = 5000]"), 1_104).len(),
            1
        );
        assert!(
            f.on_report(RunState::Running, update("[JobDeferredUntil = 5000]"), 1_105).is_empty()
        );
        assert_eq!(f.on_report(RunState::Running, update("[]"), 1_106).len(), 1);
    }

    #[test]
    fn a_job_suspended_before_the_first_look_is_one_suspension() {
        let mut f = Follow::new(RunState::Suspended, 0, 60, false, 0);
        let ops = f.on_report(RunState::Suspended, update("[]"), 1);
        assert_eq!(ops[0], PoolOp::Suspension(true));
    }

    #[test]
    fn a_policy_that_reads_usage_gets_every_report() {
        let mut f = Follow::new(RunState::Running, 0, 60, true, 0);
        for t in 1..5 {
            assert_eq!(f.on_report(RunState::Running, update("[]"), t).len(), 1);
        }
    }

    #[test]
    fn checkpoints_are_counted() {
        let mut f = Follow::new(RunState::Running, 0, 60, false, 4);
        let PoolOp::Update(a) = f.checkpoint_kept(77, 12, Some("x86_64/linux")) else { panic!() };
        assert_eq!(a.eval_attr("NumCkpts"), Value::Int(5));
        assert_eq!(a.eval_attr("LastCkptTime"), Value::Int(77));
        assert_eq!(a.eval_attr("CkptSize"), Value::Int(12));
        let PoolOp::Update(a) = f.checkpoint_kept(78, 1, None) else { panic!() };
        assert_eq!(a.eval_attr("NumCkpts"), Value::Int(6));
        assert!(!a.contains("LastCheckpointPlatform"));
    }

    #[test]
    fn how_a_run_ended() {
        let exit = |c: i64| update(&format!("[ExitCode = {c}]"));
        assert_eq!(ended(false, true, &exit(85), Some(85)), Ended::Checkpointed);
        assert_eq!(ended(false, true, &exit(0), Some(85)), Ended::Exited);
        assert_eq!(ended(false, true, &exit(85), None), Ended::Exited);
        // Its files did not come back: not a checkpoint, whatever the code.
        assert_eq!(ended(false, false, &exit(85), Some(85)), Ended::Exited);
        // Held by its host: not a checkpoint.
        assert_eq!(
            ended(false, true, &update("[ExitCode = 85; HoldReasonCode = 34]"), Some(85)),
            Ended::Exited
        );
        assert_eq!(ended(true, true, &exit(85), Some(85)), Ended::Evicted);
        assert_eq!(ended(true, false, &update("[]"), None), Ended::Evicted);
        let mut e = update("[HoldReasonCode = 34; HoldReason = \"memory\"]");
        hold_unless_held(&mut e, 12, 0, "transfer");
        assert_eq!(e.eval_attr("HoldReasonCode"), Value::Int(34), "the host's hold is the cause");
        let mut e = update("[]");
        hold_unless_held(&mut e, 12, 2, "transfer");
        assert_eq!(e.eval_attr("HoldReasonSubCode"), Value::Int(2));
    }
}
