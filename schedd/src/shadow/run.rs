//! A job's shadow: one function per way a run begins (activate, reconnect,
//! queued behind others), then following its reports until it ends. What
//! each event means is decided in [`super::decide`]; here it is carried out.

use crate::attrs::str_attr;
use crate::jobfiles::write_outputs;

use andes_protocol::Clock;
use andes_protocol::pool::{
    ActivateRequest, EditRequest, FileData, JobReport, RunState, WaitRequest,
};
use classad::{ClassAd, Value};
use tokio::sync::mpsc;

use super::claim::{BATCH_WAIT_MS, withdraw};
use super::decide::{
    Activated, Answer, CLAIM_ENDED, Ended, Follow, HostSays, LEASE_MISSED, Reconnect, activated,
    ended, hold_unless_held, lost_ad,
};
use super::dollar::host_ad;
use super::files::{may_have_checkpoints, save_checkpoint, saved_state_to_send};
use super::lane::{LaneOp, LaneTx};
use super::link::{ClaimCtx, Link};
use super::reports::{Ends, Start, Viewed, no_report};
use super::state::{
    HOLD_TRANSFER_INPUT, HOLD_TRANSFER_OUTPUT, POLICY_REPORT_SECS, PoolState, Signal, lock,
};
use crate::job::{JobId, JobStatus};
use crate::queue::{ACTIVATION_PENDING, PoolOp};
use crate::transfer::{self, Staged};

/// What an execute host reported (an ending or an update), as the queue may
/// take it: only the attributes a host may set ([`crate::attrs::from_host`]);
/// text that does not parse is nothing.
pub(crate) fn from_host(text: Option<&str>) -> ClassAd {
    crate::attrs::from_host(text.and_then(|t| classad::parse_ad(t).ok()).unwrap_or_default())
}

impl PoolState {
    /// Runs one job on a claim (or reconnects to it, or follows it where it
    /// was queued behind others). Returns whether the claim is still usable,
    /// and the claim's last report, for the job queued behind.
    pub(crate) async fn shadow(
        &self,
        link: &Link,
        claim: &ClaimCtx,
        id: JobId,
        lane: &LaneTx,
        start: Start,
        ends: &mut Ends,
    ) -> (bool, Option<JobReport>) {
        let (tx, mut signals) = mpsc::unbounded_channel();
        {
            // From here its own shadow stops it.
            let mut st = lock(&self.state);
            st.queued.remove(&id);
            st.shadows.insert(id, tx);
        }
        let r = self.shadow_inner(link, claim, id, lane, start, ends, &mut signals).await;
        lock(&self.state).shadows.remove(&id);
        // Whatever path ended it: a job this claim never started is not
        // pending on it any more (a no-op for one that started).
        lane.send(LaneOp::Pool(id, PoolOp::NotStarted(claim.claim_id.clone())));
        lane.send(LaneOp::Free(id));
        r
    }

    #[allow(clippy::too_many_arguments)]
    async fn shadow_inner(
        &self,
        link: &Link,
        claim: &ClaimCtx,
        id: JobId,
        lane: &LaneTx,
        start: Start,
        ends: &mut Ends,
        signals: &mut mpsc::UnboundedReceiver<Signal>,
    ) -> (bool, Option<JobReport>) {
        let Some(job) = self.queue.read().job(id).map(|v| v.ad()) else {
            return (true, start.into_report());
        };
        let mut run = self.run_of(&job, id);
        let begun = match start {
            Start::Reconnect => self.reconnect(link, claim, id, lane, &job, &run, ends, None).await,
            Start::Unanswered(why) => {
                self.reconnect(link, claim, id, lane, &job, &run, ends, Some(why)).await
            }
            Start::Queued(first) => {
                self.follow_queued(link, claim, id, lane, &run, ends, signals, *first).await
            }
            Start::Activate => {
                match self.activate_job(link, claim, id, lane, &job, &mut run, ends).await {
                    Begun::AskHost => {
                        // The host may run it: it says, as to a restarted
                        // schedd (the activation is recorded as pending).
                        return Box::pin(self.shadow(
                            link,
                            claim,
                            id,
                            lane,
                            Start::Reconnect,
                            ends,
                        ))
                        .await;
                    }
                    begun => begun,
                }
            }
        };
        match begun {
            Begun::Runs(report) => {
                self.follow(link, claim, id, lane, &job, run, report, ends, signals).await
            }
            Begun::Over(alive, behind) => (alive, behind),
            Begun::AskHost => unreachable!("only an activation asks the host"),
        }
    }

    /// What the shadow reads of `job` once, for the whole run.
    fn run_of(&self, job: &ClassAd, id: JobId) -> RunOf {
        let lease = match job.eval_attr(classad::name!("JobLeaseDuration")) {
            Value::Int(n) if n > 0 => n as u64,
            _ => self.cfg.job_lease,
        };
        // The transparent checkpoint the spool keeps for the job, by hash.
        // Only a job that checkpoints has anything in the spool.
        let checkpoints = may_have_checkpoints(job);
        RunOf {
            gid: str_attr(job, classad::name!("GlobalJobId")).unwrap_or_default(),
            lease,
            module: str_attr(job, classad::name!("CmdDigest"))
                .as_deref()
                .and_then(andes_protocol::stream::parse_digest),
            // A job whose periodic policy reads its usage gets it fresh: the
            // host reports every few seconds and each report reaches the queue.
            report_within: crate::policy::has_periodic(job).then_some(POLICY_REPORT_SECS),
            checkpoints,
            have_snapshot: self.spool().filter(|_| checkpoints).and_then(|s| s.snapshot_hash(id)),
        }
    }

    /// The schedd restarted, or an activation went unanswered (`unanswered`):
    /// the host says whether the job runs ([`Reconnect::decide`]).
    #[allow(clippy::too_many_arguments)]
    async fn reconnect(
        &self,
        link: &Link,
        claim: &ClaimCtx,
        id: JobId,
        lane: &LaneTx,
        job: &ClassAd,
        run: &RunOf,
        ends: &mut Ends,
        unanswered: Option<String>,
    ) -> Begun {
        let mut req = WaitRequest {
            incarnation: Some(self.incarnation.clone()),
            claim_id: claim.claim_id.clone(),
            since: 0,
            saved_seq: 0,
            snapshot: run.have_snapshot.clone(),
            report_within: run.report_within,
            settle_ms: 0,
        };
        // A job whose activation was recorded but never seen to start (the
        // schedd died in between): the host says whether it runs.
        let pending = job.contains(classad::name!(ACTIVATION_PENDING))
            && self.queue.read().job(id).is_some_and(|v| v.proc.status == JobStatus::Idle);
        let ask = Reconnect { claim_id: claim.claim_id.clone(), pending, unanswered };
        let (says, report) = loop {
            match self.wait_until_lease(link, &req, run.lease).await {
                Err(()) => break (HostSays::Nothing, None),
                Ok(r) => match ends.view(r, &run.gid) {
                    Viewed::Mine(r) => break (HostSays::Runs, Some(r)),
                    // Jobs still wait their turn on the claim: this one may
                    // be among them, and would run after a "not there" sent
                    // it elsewhere. It is not there only once none waits.
                    Viewed::NotYet(r) if r.claim_alive && r.queued > 0 => req.since = r.version,
                    Viewed::NotYet(r) => break (HostSays::NotThere, Some(r)),
                },
            }
        };
        let decision = ask.decide(says);
        for op in decision.ops {
            lane.send(LaneOp::Pool(id, op));
        }
        match (decision.follow, report) {
            (true, Some(r)) => Begun::Runs(r),
            (_, Some(r)) => Begun::Over(r.claim_alive, Some(r)),
            (_, None) => Begun::Over(false, None),
        }
    }

    /// Queued behind other jobs of the claim: it is followed once a report
    /// shows it ran (or that the host dropped it). One held or removed
    /// meanwhile is withdrawn from the host's queue (if it started already,
    /// it is none of this claim's business any more: its end is not taken in).
    #[allow(clippy::too_many_arguments)]
    async fn follow_queued(
        &self,
        link: &Link,
        claim: &ClaimCtx,
        id: JobId,
        lane: &LaneTx,
        run: &RunOf,
        ends: &mut Ends,
        signals: &mut mpsc::UnboundedReceiver<Signal>,
        first: JobReport,
    ) -> Begun {
        let idle = self.queue.read().job(id).is_some_and(|v| v.proc.status == JobStatus::Idle);
        if !idle {
            withdraw(link, &claim.claim_id, id).await;
            return Begun::Over(first.claim_alive, Some(first));
        }
        let mut r = first;
        loop {
            match ends.view(r, &run.gid) {
                Viewed::Mine(mine) => {
                    lane.send(LaneOp::Pool(id, PoolOp::Started(self.started_attrs(claim))));
                    return Begun::Runs(mine);
                }
                Viewed::NotYet(other) => {
                    if !other.claim_alive || other.queued == 0 {
                        // It never started: it stays idle.
                        return Begun::Over(other.claim_alive, Some(other));
                    }
                    let req = WaitRequest {
                        incarnation: Some(self.incarnation.clone()),
                        claim_id: claim.claim_id.clone(),
                        since: other.version,
                        saved_seq: 0,
                        snapshot: None,
                        report_within: run.report_within,
                        settle_ms: settle_ms(&other),
                    };
                    lane.committed().await;
                    tokio::select! {
                        sig = signals.recv() => {
                            if matches!(sig, Some(Signal::Stop) | None) {
                                // Still queued: the jobs ahead of it run on.
                                // Started: it is stopped.
                                if withdraw(link, &claim.claim_id, id).await {
                                    return Begun::Over(other.claim_alive, Some(other));
                                }
                                self.release(link, &claim.claim_id).await;
                                return Begun::Over(false, None);
                            }
                            r = other;
                        }
                        got = self.wait_until_lease(link, &req, run.lease) => match got {
                            Ok(got) => r = got,
                            Err(()) => return Begun::Over(false, None),
                        },
                    }
                }
            }
        }
    }

    /// Activates the claim with the job, its inputs and (for a job that
    /// checkpoints) what it resumes from; [`activated`] says what follows.
    #[allow(clippy::too_many_arguments)]
    async fn activate_job(
        &self,
        link: &Link,
        claim: &ClaimCtx,
        id: JobId,
        lane: &LaneTx,
        job: &ClassAd,
        run: &mut RunOf,
        ends: &mut Ends,
    ) -> Begun {
        let ad = host_ad(self.queue.journal(), id, job, &claim.slot_ad);
        let ckpt = self.ckpt_dir(id).filter(|_| run.checkpoints);
        let transfer::Inputs { files: inputs, mut sources } =
            match self.read_inputs(job, ckpt.as_deref()) {
                Ok(i) => i,
                Err(e) => {
                    // Cannot start: hold it here, keep the claim.
                    let mut attrs = ClassAd::new();
                    // HTCondor's subcode: the errno (2: no such file).
                    attrs.insert_value(classad::name!("HoldReasonCode"), HOLD_TRANSFER_INPUT);
                    attrs.insert_value(classad::name!("HoldReasonSubCode"), e.errno as i64);
                    attrs.insert_value(classad::name!("HoldReason"), e.message.as_str());
                    lane.send(LaneOp::Pool(id, PoolOp::Started(self.started_attrs(claim))));
                    lane.send(LaneOp::Exited(id, attrs));
                    // The jobs meant to follow it never went out.
                    return Begun::Over(true, Some(no_report(true)));
                }
            };
        let digest = str_attr(job, classad::name!("CmdDigest")).unwrap_or_default();
        let snapshot = if run.checkpoints {
            self.snapshot_to_send(id, run.module.as_ref()).map(|(snap, more)| {
                sources.extend(more);
                snap
            })
        } else {
            None
        };
        run.have_snapshot = snapshot.as_ref().map(|s| s.hash.clone());
        let resuming = snapshot.is_some();
        let req = ActivateRequest {
            claim_id: claim.claim_id.clone(),
            job: ad.to_string(),
            module_digest: digest.clone(),
            inputs,
            lease_secs: run.lease,
            wait_ms: self.cfg.activate_wait_ms,
            saved_state: self
                .saved_state_path(id)
                .filter(|_| run.checkpoints)
                .and_then(|p| saved_state_to_send(&p, &mut sources)),
            snapshot,
            more: Vec::new(),
            append: false,
            acked: 0,
            // The schedd knows at once that the job runs.
            reply_at_start: true,
        };
        // Recorded before it is sent: see PoolOp::Activating.
        if let Err(e) = self
            .queue
            .pool(vec![id], PoolOp::Activating(self.started_attrs(claim)), self.clock.now())
            .await
        {
            tracing::warn!("job {id}: not activated: {e}");
            self.release(link, &claim.claim_id).await;
            return Begun::Over(false, None);
        }
        let mut quarantined = None;
        let (answer, report) = match self.activate(link, &req, &digest, run.lease, sources).await {
            Ok(r) => (Answer::Report, Some(r)),
            Err(e) if e.ambiguous => {
                tracing::warn!("job {id}: activation unanswered: {}", e.reason);
                (Answer::Unknown(e.reason), None)
            }
            Err(e) => {
                tracing::warn!("job {id}: activation failed: {}", e.reason);
                quarantined = super::claim::host_quarantined(&e.reason, job);
                (Answer::Refused(e.reason), None)
            }
        };
        let restarts = match job.eval_attr(classad::name!("NumRestarts")) {
            Value::Int(n) => n,
            _ => 0,
        };
        match activated(&claim.claim_id, answer, self.started_attrs(claim), resuming, restarts) {
            Activated::Runs(ops) => {
                for op in ops {
                    lane.send(LaneOp::Pool(id, op));
                }
                let r = report.expect("a report came with the answer");
                match ends.view(r, &run.gid) {
                    Viewed::Mine(r) | Viewed::NotYet(r) => Begun::Runs(r),
                }
            }
            Activated::AskHost => Begun::AskHost,
            Activated::GiveUp(ops) => {
                // The job never started: it stays idle (held, if the host
                // quarantined it); the claim is given up.
                for op in ops.into_iter().chain(quarantined) {
                    lane.send(LaneOp::Pool(id, op));
                }
                self.release(link, &claim.claim_id).await;
                Begun::Over(false, None)
            }
        }
    }

    /// Follows the running job's reports from `report` until it ends, its
    /// claim ends, its lease runs out or it is stopped.
    #[allow(clippy::too_many_arguments)]
    async fn follow(
        &self,
        link: &Link,
        claim: &ClaimCtx,
        id: JobId,
        lane: &LaneTx,
        job: &ClassAd,
        mut run: RunOf,
        mut report: JobReport,
        ends: &mut Ends,
        signals: &mut mpsc::UnboundedReceiver<Signal>,
    ) -> (bool, Option<JobReport>) {
        let ckpts = match job.eval_attr(classad::name!("NumCkpts")) {
            Value::Int(n) => n,
            _ => 0,
        };
        let mut follow = Follow::new(
            report.state,
            self.clock.now(),
            self.cfg.queue_update_interval.as_secs() as i64,
            run.report_within.is_some(),
            ckpts,
        );
        // The seq of the job's last saved state kept in this run.
        let mut have_saved = 0u64;
        // The job's host kept a snapshot as the job stopped (a vacate).
        let mut stopped_with_snapshot = false;
        loop {
            if let Some(snap) = report.snapshot.take()
                && Some(&snap.hash) != run.have_snapshot.as_ref()
            {
                // A transparent checkpoint: kept in the spool once checked,
                // durably, and sent with the job when it next starts.
                let stopping = snap.stopping;
                match self.keep_snapshot(link, &claim.claim_id, id, run.module, snap).await {
                    Ok(kept) => {
                        run.have_snapshot = Some(kept.hash);
                        stopped_with_snapshot |= stopping;
                        let kib = kept.bytes.div_ceil(1024) as i64;
                        let op =
                            follow.checkpoint_kept(self.clock.now(), kib, Some(&kept.platform));
                        lane.send(LaneOp::Pool(id, op));
                    }
                    Err(e) => tracing::warn!("job {id}: its checkpoint was not kept: {e}"),
                }
            }
            if let Some(mut st) = report.saved_state.take()
                && st.seq > have_saved
            {
                // A cooperative checkpoint: kept in the spool, durably, and
                // sent with the job when it next starts. A big one is fetched
                // as a stream.
                let fetched = match st.streamed.as_ref().map(|s| s.size) {
                    None => Ok(()),
                    Some(size) => {
                        self.fetch_saved_state(link, &claim.claim_id, &mut st, size).await
                    }
                };
                match fetched
                    .and_then(|()| self.keep_saved_state(id, &st.data).map_err(|e| e.to_string()))
                {
                    Ok(()) => {
                        have_saved = st.seq;
                        let kib = st.data.len().div_ceil(1024) as i64;
                        lane.send(LaneOp::Pool(
                            id,
                            follow.checkpoint_kept(self.clock.now(), kib, None),
                        ));
                    }
                    Err(e) => tracing::warn!("job {id}: its saved state was not kept: {e}"),
                }
            }
            if report.state == RunState::Exited {
                self.on_end(link, claim, id, lane, job, &run, &report, stopped_with_snapshot).await;
                // The job behind starts from the report as the host sent it:
                // `report` may be this job's end, seen in a report about the
                // next job, which is running already.
                return (report.claim_alive, Some(ends.behind(&report)));
            }
            if !report.claim_alive {
                lane.send(LaneOp::Pool(id, PoolOp::Evicted(lost_ad(CLAIM_ENDED))));
                return (false, None);
            }
            for op in
                follow.on_report(report.state, from_host(Some(&report.update)), self.clock.now())
            {
                lane.send(LaneOp::Pool(id, op));
            }
            let req = WaitRequest {
                incarnation: Some(self.incarnation.clone()),
                claim_id: claim.claim_id.clone(),
                since: report.version,
                saved_seq: have_saved,
                snapshot: run.have_snapshot.clone(),
                report_within: run.report_within,
                settle_ms: settle_ms(&report),
            };
            lane.committed().await;
            tokio::select! {
                sig = signals.recv() => match sig {
                    Some(Signal::Edit(attrs)) => {
                        let req = EditRequest {
                            claim_id: claim.claim_id.clone(),
                            attrs: attrs.to_string(),
                        };
                        if let Err(e) = link.short.post_json("/v1/host/edit", &req).await {
                            tracing::debug!("job {id}: qedit did not reach the host: {e}");
                        }
                    }
                    Some(Signal::Vacate(why)) => {
                        tracing::info!("job {id}: vacating it ({why})");
                        let req = andes_protocol::pool::VacateJobRequest {
                            claim_id: claim.claim_id.clone(),
                        };
                        match link.short.post_json("/v1/host/vacate", &req).await {
                            Ok(r) if r.status.is_success() => {}
                            Ok(r) => tracing::warn!("job {id}: the host refused the vacate: {}", r.status),
                            Err(e) => tracing::warn!("job {id}: the vacate did not reach the host: {e}"),
                        }
                    }
                    Some(Signal::Stop) | None => {
                        self.release(link, &claim.claim_id).await;
                        let removed = self
                            .queue
                            .read()
                            .job(id)
                            .is_some_and(|v| v.proc.status == JobStatus::Removed);
                        if removed {
                            lane.send(LaneOp::Exited(id, ClassAd::new()));
                        }
                        return (false, None);
                    }
                },
                r = self.wait_until_lease(link, &req, run.lease) => match r {
                    Ok(r) => match ends.view(r, &run.gid) {
                        Viewed::Mine(r) => report = r,
                        Viewed::NotYet(_) => {
                            // Its host moved on without saying how it ended.
                            lane.send(LaneOp::Pool(id, PoolOp::Evicted(lost_ad(CLAIM_ENDED))));
                            return (false, None);
                        }
                    },
                    Err(()) => {
                        lane.send(LaneOp::Pool(id, PoolOp::Evicted(lost_ad(LEASE_MISSED))));
                        return (false, None);
                    }
                },
            }
        }
    }

    /// The run ended (`report` says how): its outputs are fetched and go
    /// where they belong, and the queue is told how it ended ([`ended`]).
    #[allow(clippy::too_many_arguments)]
    async fn on_end(
        &self,
        link: &Link,
        claim: &ClaimCtx,
        id: JobId,
        lane: &LaneTx,
        job: &ClassAd,
        run: &RunOf,
        report: &JobReport,
        stopped_with_snapshot: bool,
    ) {
        let mut ending = from_host(report.ending.as_deref());
        ending.update(&from_host(Some(&report.update)));
        if !report.log.is_empty() {
            lane.send(LaneOp::Pool(id, PoolOp::Logged(report.log.clone())));
        }
        // Output files too big for the report come as streams of their own,
        // staged here before they go where they belong.
        let staged = if report.evicted {
            Ok(Staged::default())
        } else {
            self.fetch_outputs(link, &claim.claim_id, &run.gid, &report.outputs).await
        };
        let (staged, transferred) = match staged {
            Ok(s) => (s, true),
            Err(e) => {
                hold_unless_held(&mut ending, HOLD_TRANSFER_OUTPUT, 0, &e);
                (Staged::default(), false)
            }
        };
        let checkpoint_code = match job.eval_attr(classad::name!("CheckpointExitCode")) {
            Value::Int(c) => Some(c),
            _ => None,
        };
        match ended(report.evicted, transferred, &ending, checkpoint_code) {
            Ended::Checkpointed if self.ckpt_dir(id).is_some() => {
                // The job saved its state and asks to run again: its files
                // are kept in the spool and go with it next time.
                let dir = self.ckpt_dir(id).expect("checked");
                match save_checkpoint(&dir, &report.outputs, &staged) {
                    Ok(()) => ending.insert_value(classad::name!("LastCkptTime"), self.clock.now()),
                    Err(e) => tracing::warn!("job {id}: checkpoint not kept: {e}"),
                }
                ending.insert_value(
                    classad::name!("LastVacateReason"),
                    "the job checkpointed (CheckpointExitCode)",
                );
                lane.send(LaneOp::Pool(id, PoolOp::Evicted(ending)));
            }
            Ended::Evicted => {
                if stopped_with_snapshot {
                    // It left with a snapshot taken as it went.
                    ending.insert_value(classad::name!("LastCkptTime"), self.clock.now());
                }
                lane.send(LaneOp::Pool(id, PoolOp::Evicted(ending)));
            }
            Ended::Checkpointed | Ended::Exited => {
                if run.checkpoints
                    && !ending.contains(classad::name!("HoldReasonCode"))
                    && let Some(spool) = self.spool()
                {
                    // Done: its checkpoints are of no more use. A held job
                    // keeps them for its release.
                    spool.remove_job(id);
                }
                let spool_refused = if transferred && transfer::is_spooled(job) {
                    // A spooled job's outputs stay in the spool: within its
                    // owner's quota and the spool's room.
                    let bytes: u64 = report.outputs.iter().map(FileData::len).sum();
                    let owner = str_attr(job, classad::name!("Owner")).unwrap_or_default();
                    self.queue.charge_spool(&owner, bytes).err()
                } else {
                    None
                };
                if !transferred {
                    // Held for it: its outputs are not half delivered.
                } else if let Some(e) = spool_refused {
                    ending.insert_value(
                        classad::name!("HoldReasonCode"),
                        crate::job::hold_code::DISK_QUOTA_EXCEEDED,
                    );
                    ending.insert_value(classad::name!("HoldReasonSubCode"), 0i64);
                    ending.insert_value(
                        classad::name!("HoldReason"),
                        format!("its output: {e}").as_str(),
                    );
                } else if let Err(e) = write_outputs(
                    id,
                    job,
                    &report.outputs,
                    &staged,
                    &self.cfg.accounts,
                    self.cfg.spool.as_deref(),
                ) {
                    ending.insert_value(classad::name!("HoldReasonCode"), HOLD_TRANSFER_OUTPUT);
                    ending.insert_value(classad::name!("HoldReasonSubCode"), e.errno as i64);
                    ending.insert_value(classad::name!("HoldReason"), e.message.as_str());
                }
                lane.send(LaneOp::Exited(id, ending));
            }
        }
    }
}

/// What the shadow reads of its job once, for the whole run.
pub(crate) struct RunOf {
    /// GlobalJobId: how reports name it.
    gid: String,
    /// JobLeaseDuration, seconds.
    lease: u64,
    /// The module's digest.
    module: Option<[u8; 32]>,
    /// The host reports at least this often (a periodic policy reads usage).
    report_within: Option<u64>,
    /// The job may keep checkpoints in the spool.
    checkpoints: bool,
    /// The hash of the transparent snapshot the spool keeps for it.
    have_snapshot: Option<String>,
}

/// How a run began.
enum Begun {
    /// The job runs: its first report.
    Runs(JobReport),
    /// Over before it was followed: whether the claim is alive, and the
    /// report the job queued behind starts from.
    Over(bool, Option<JobReport>),
    /// The activation went unanswered: ask the host.
    AskHost,
}

/// How long a wait lets the host settle (`WaitRequest::settle_ms`) after
/// `report`: with jobs queued behind the one running (a batch, which only
/// jobs known short make), until they have all ended, up to
/// [`BATCH_WAIT_MS`]; else not at all. A batch of 48 trivial jobs taken in
/// after its claim's last activation was followed by 16 waits, each
/// answered at the next end.
fn settle_ms(report: &JobReport) -> u64 {
    if report.queued > 0 { BATCH_WAIT_MS } else { 0 }
}
