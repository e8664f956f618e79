//! The daemon's answers to the pool's requests: claims, activations, edits,
//! withdrawals and releases from schedds, and the leases that end claims
//! nobody holds any more.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use andes_protocol::pool::public_claim_id;
use andes_startd::{Action, Event, SlotId, StarterOutcome, VacateKind};
use classad::{ClassAd, Value};

use crate::daemon::*;
use crate::pool::claim::{
    ClaimEntry, FINAL_REPORT_KEEP, PoolError, PoolReply, PoolRequest, Queued, claim_slot,
};
use crate::pool::files::{check_inputs, check_snapshot, check_uploaded};

/// The slot of claim `c`, if `caller` is its claimant.
pub(crate) fn owned_by(c: &ClaimEntry, caller: &str, claim_id: &str) -> Result<SlotId, PoolError> {
    if c.claimant != caller {
        return Err(PoolError::Forbidden(format!(
            "claim {claim_id} belongs to {}, not {caller}",
            c.claimant
        )));
    }
    Ok(c.slot)
}

/// The claim whose ends `req` may acknowledge, forget or waive: only the
/// shadow's own requests, each sent once what the shadow was told before is
/// committed (its next wait, an activation, a release). The queue's, the
/// keep-alives' and a queued job's withdrawal acknowledge nothing. Every
/// request is named, so a new one is decided here.
fn settles(req: &PoolRequest) -> Option<&str> {
    match req {
        PoolRequest::Subscribe { claim_id, .. } | PoolRequest::Release { claim_id, .. } => {
            Some(claim_id)
        }
        PoolRequest::Activate { req, .. } => Some(&req.claim_id),
        PoolRequest::Withdraw { .. }
        | PoolRequest::Alive { .. }
        | PoolRequest::Edit { .. }
        | PoolRequest::VacateJob { .. }
        | PoolRequest::Match(_)
        | PoolRequest::Claim { .. }
        | PoolRequest::HasModule(_)
        | PoolRequest::PutModule(..)
        | PoolRequest::Sandbox { .. }
        | PoolRequest::InputDir { .. }
        | PoolRequest::Saved { .. }
        | PoolRequest::SnapshotPart { .. }
        | PoolRequest::Output { .. } => None,
    }
}

/// A keep-alive from its schedd names claim `c`: from a new run of the
/// schedd, the claim becomes that run's, and what the old run was sent but
/// may not have kept is sent again (true then). A keep-alive acknowledges
/// nothing: it goes out on its own clock, not once the shadow has committed
/// what it was told (one between an end's report and its commit let the
/// host drop the end, and the output the shadow was still fetching).
pub(crate) fn kept_alive(c: &mut ClaimEntry, incarnation: &str) -> bool {
    if c.incarnation.as_deref() == Some(incarnation) {
        return false;
    }
    c.incarnation = Some(incarnation.to_string());
    c.end_sent.store(0, std::sync::atomic::Ordering::Release);
    true
}

/// A schedd asks about claim `c` again, having seen its reports up to
/// version `seen`. From the run it holds the claim for, that acknowledges
/// an end told in those; from a new run (it restarted), the claim becomes
/// that run's, and what the old run was sent but may not have kept is sent
/// again.
pub(crate) fn follows_again(c: &mut ClaimEntry, incarnation: Option<String>, seen: u64) {
    if !incarnation.is_some_and(|i| kept_alive(c, &i)) {
        c.acknowledged_upto(seen);
    }
}

impl Daemon {
    /// Claims the startd no longer holds are over: their shadows hear so.
    pub(crate) fn reconcile_claims(&mut self) {
        if self.claims.is_empty() {
            return;
        }
        // Run after every event: each claim is looked for on its own slot
        // first, with nothing allocated, so a host's cost per event stays
        // small however many slots it has.
        let holds = |s: &andes_startd::Slot, id: &str| {
            s.claim_id() == Some(id) || s.pending_claim_id() == Some(id)
        };
        let gone: Vec<String> = self
            .claims
            .iter()
            .filter(|(id, c)| {
                !self.startd.slot(c.slot).is_some_and(|s| holds(s, id))
                    && !self.startd.slots().iter().any(|s| holds(s, id))
            })
            .map(|(id, _)| id.clone())
            .collect();
        let until = self.now().saturating_add(FINAL_REPORT_KEEP);
        for id in gone {
            if let Some(c) = self.claims.remove(&id) {
                self.log(format!("slot {}: claim ended", c.slot));
                c.publish(|r| {
                    r.claim_alive = false;
                    r.queued = 0;
                    if r.state == andes_protocol::pool::RunState::Running
                        || r.state == andes_protocol::pool::RunState::Suspended
                    {
                        r.state = andes_protocol::pool::RunState::Exited;
                        r.evicted = true;
                        r.ctl = None;
                    }
                });
                if c.owes_end() {
                    // Its end is still owed, from `ended`.
                    self.ended.insert(id, (c, until));
                } else {
                    self.settle_owed(Some(&id));
                }
            }
        }
    }

    /// The claim `claim_id`, live or ended (its final report still kept), if
    /// `caller` holds it: for fetching what its reports named as streamed.
    pub(crate) fn claim_or_ended(
        &self,
        caller: &str,
        claim_id: &str,
    ) -> Result<&ClaimEntry, PoolError> {
        let c = self
            .claims
            .get(claim_id)
            .or_else(|| self.ended.get(claim_id).map(|(c, _)| c))
            .ok_or_else(|| {
                PoolError::NotFound(format!(
                    "no claim {}",
                    andes_protocol::pool::public_claim_id(claim_id)
                ))
            })?;
        owned_by(c, caller, claim_id)?;
        Ok(c)
    }

    /// Where the streamed input files of the slot's claim are uploaded.
    pub(crate) fn uploaded_dir(&self, slot: SlotId) -> PathBuf {
        self.execute.join(format!("in_{slot}"))
    }

    pub(crate) fn claim_of_slot(&self, slot: SlotId) -> Option<&ClaimEntry> {
        let id = self.startd.slots().iter().find(|s| s.id() == slot)?.claim_id()?;
        self.claims.get(id)
    }

    /// Serves a request of the pool's routes; the ends it acknowledges are
    /// settled in the book of owed ends ([`crate::owed`]).
    pub fn pool(&mut self, req: PoolRequest) -> Result<PoolReply, PoolError> {
        if self.owed.is_empty() {
            return self.answer(req);
        }
        let settles = settles(&req).map(str::to_string);
        let reply = self.answer(req);
        if let Some(claim) = settles {
            self.settle_owed(Some(&claim));
        }
        reply
    }

    fn answer(&mut self, req: PoolRequest) -> Result<PoolReply, PoolError> {
        use andes_protocol::pool::ClaimReply;
        let owned = |me: &Self, caller: &str, claim_id: &str| -> Result<SlotId, PoolError> {
            let c = me.claims.get(claim_id).ok_or_else(|| {
                PoolError::NotFound(format!("no claim {} here", public_claim_id(claim_id)))
            })?;
            owned_by(c, caller, claim_id)
        };
        match req {
            PoolRequest::Match(m) => {
                let slot = claim_slot(&m.claim_id)
                    .filter(|s| self.offers.get(s) == Some(&m.claim_id))
                    .ok_or_else(|| {
                        PoolError::NotFound(format!("no offer {}", public_claim_id(&m.claim_id)))
                    })?;
                // Only current offers are remembered as priority preemptions.
                let offers: HashSet<&String> = self.offers.values().collect();
                self.priority_offers.retain(|c| offers.contains(c));
                if m.priority {
                    self.priority_offers.insert(m.claim_id.clone());
                }
                self.feed(Event::MatchNotified { slot, claim_id: m.claim_id });
                Ok(PoolReply::Done)
            }
            PoolRequest::Claim { caller, req } => {
                let refused = |reason: String| {
                    Ok(PoolReply::Claim(ClaimReply {
                        accepted: false,
                        reason: Some(reason),
                        slot_ad: None,
                    }))
                };
                // A claimant that restarted lets go at once of what its
                // earlier life held and runs no job.
                if let Some(inc) = &req.incarnation {
                    self.forget_earlier_lives(&caller, inc);
                }
                let Some(slot) =
                    claim_slot(&req.claim_id).filter(|s| self.offers.get(s) == Some(&req.claim_id))
                else {
                    return refused(format!(
                        "claim id {} is not this host's current offer (already claimed, or stale)",
                        public_claim_id(&req.claim_id)
                    ));
                };
                let alive = req
                    .alive_interval
                    .filter(|&a| a > 0)
                    .unwrap_or(self.alive_interval)
                    .clamp(1, 3600);
                let claim_lease = Duration::from_secs(alive.saturating_mul(self.max_alives_missed));
                let incarnation = req.incarnation.clone();
                let ad = classad::parse_ad(&req.ad)
                    .map_err(|e| PoolError::BadInput(format!("the request ad: {e}")))?;
                if let Some(gid) = self.quarantine.holds_ad(&ad) {
                    return refused(andes_protocol::pool::quarantined_refusal(&gid));
                }
                let _handling = self.quarantine.handling(&ad);
                let claim = andes_startd::ClaimRequest {
                    claim_id: req.claim_id.clone(),
                    client_machine: req.client_machine,
                    owner: req.owner,
                    user: req.user,
                    ad,
                };
                let claimed =
                    self.startd.slots().iter().any(|s| s.id() == slot && s.claim_id().is_some());
                // A claim on a claimed slot preempts by the machine's RANK
                // (which the startd checks), or by user priority when the
                // negotiator said so for this offer; never on the claimant's
                // word alone.
                let by_priority = self.priority_offers.remove(&req.claim_id);
                let event = if claimed && by_priority {
                    Event::BetterMatch { slot, claim }
                } else {
                    Event::ClaimRequested { slot, claim }
                };
                // The claim is recorded first so that the startd's actions
                // find it; a refusal removes it again.
                let mut entry = ClaimEntry::new(slot, caller, self.clock.now(), claim_lease);
                entry.incarnation = incarnation;
                self.claims.insert(req.claim_id.clone(), entry);
                let acts = self.feed(event);
                let refusal = acts.iter().find_map(|a| match a {
                    Action::ClaimRefused { claim_id, reason, .. } if *claim_id == req.claim_id => {
                        Some(reason.clone())
                    }
                    _ => None,
                });
                let held = self.startd.slots().iter().any(|s| {
                    s.claim_id() == Some(req.claim_id.as_str())
                        || s.pending_claim_id() == Some(req.claim_id.as_str())
                });
                if let Some(reason) =
                    refusal.or((!held).then(|| "the startd did not accept the claim".to_string()))
                {
                    self.claims.remove(&req.claim_id);
                    return refused(reason);
                }
                let slot_ad = self.ads.get(&slot).map(|a| a.to_string());
                Ok(PoolReply::Claim(ClaimReply { accepted: true, reason: None, slot_ad }))
            }
            PoolRequest::HasModule(d) => Ok(PoolReply::Has(self.store.get(&d).is_some())),
            PoolRequest::PutModule(d, bytes) => {
                self.store.put(d, bytes);
                Ok(PoolReply::Done)
            }
            PoolRequest::Activate { caller, req, ads } => {
                let (job, more) = *ads;
                let _handling = self.quarantine.handling(&job);
                let slot = owned(self, &caller, &req.claim_id)?;
                if req.append && (req.snapshot.is_some() || req.saved_state.is_some()) {
                    return Err(PoolError::BadInput(
                        "an appended activation carries no checkpoint".into(),
                    ));
                }
                if self
                    .startd
                    .slots()
                    .iter()
                    .any(|s| s.id() == slot && s.pending_claim_id() == Some(req.claim_id.as_str()))
                {
                    // A preempting claim waits for the slot's current job to go.
                    return Err(PoolError::Pending);
                }
                // A job runs once: a second activation of a job this host
                // already runs or holds queued (its schedd lost track) is
                // refused.
                if let Value::Str(gid) = job.eval_attr(classad::name!("GlobalJobId"))
                    && self.holds_job(&gid)
                {
                    return Err(PoolError::Refused(format!(
                        "job {gid} is already running or queued on this host"
                    )));
                }
                // Nothing of a job this host stopped evaluating is evaluated
                // again (see crate::quarantine).
                if let Some(gid) = std::iter::once(&job)
                    .chain(more.iter())
                    .find_map(|ad| self.quarantine.holds_ad(ad))
                {
                    return Err(PoolError::Refused(andes_protocol::pool::quarantined_refusal(
                        &gid,
                    )));
                }
                let module = self.store.get(&req.module_digest).ok_or(PoolError::NeedModule)?;
                check_inputs(&job, &req.inputs)?;
                let snapshot_bytes: Vec<andes_protocol::pool::FileData> = req
                    .snapshot
                    .iter()
                    .filter_map(|s| s.streamed.clone())
                    .chain(req.saved_state.iter().filter_map(|s| s.streamed.clone()))
                    .map(|st| {
                        andes_protocol::pool::FileData::streamed("a checkpoint", st.size, st.sha256)
                    })
                    .collect();
                let snapshot_parts =
                    req.snapshot.iter().flat_map(|s| s.blobs.iter()).chain(snapshot_bytes.iter());
                check_uploaded(
                    &self.uploaded_dir(slot),
                    req.inputs
                        .iter()
                        .chain(req.more.iter().flat_map(|q| q.inputs.iter()))
                        .chain(snapshot_parts),
                )?;
                let mono = self.clock.now();
                if let Some(c) = self.claims.get_mut(&req.claim_id) {
                    if req.append {
                        c.forget_ends(req.acked);
                    } else {
                        c.acknowledged();
                    }
                    c.job_lease = Some(Duration::from_secs(req.lease_secs.min(1 << 32)));
                    c.renewed = mono;
                    c.updates_sent = 0;
                }
                if req.append
                    && self.claims.get(&req.claim_id).is_some_and(|c| self.claim_running(c))
                {
                    // Behind the jobs the claim runs: they all wait their turn.
                    let req = *req;
                    let mut queued = Vec::with_capacity(req.more.len() + 1);
                    queued.push(Queued::new(job, module, req.inputs));
                    for (q, job) in req.more.into_iter().zip(more) {
                        let module =
                            self.store.get(&q.module_digest).ok_or(PoolError::NeedModule)?;
                        check_inputs(&job, &q.inputs)?;
                        queued.push(Queued::new(job, module, q.inputs));
                    }
                    let added = queued.len();
                    if let Some(c) = self.claims.get_mut(&req.claim_id) {
                        c.queue.extend(queued);
                        let n = c.queue.len() as u32;
                        c.publish(|r| r.queued = n);
                    }
                    self.log(format!(
                        "slot {slot}: {added} more jobs queued behind the claim's running one"
                    ));
                    return Ok(PoolReply::Done);
                }
                self.input_sizes
                    .insert(slot, req.inputs.iter().map(|f| (f.name.clone(), f.len())).collect());
                let req = *req;
                self.inputs.insert(slot, req.inputs);
                if let Some(st) = req.saved_state {
                    let data = match &st.streamed {
                        None => st.data,
                        Some(s) => {
                            let sha = s.sha256.as_deref().unwrap_or_default();
                            std::fs::read(self.uploaded_dir(slot).join(sha)).map_err(|e| {
                                PoolError::BadInput(format!(
                                    "the saved state was not uploaded: {e}"
                                ))
                            })?
                        }
                    };
                    self.saved_in.insert(slot, Arc::from(data));
                }
                if let Some(snap) = req.snapshot {
                    check_snapshot(&snap, &self.uploaded_dir(slot))?;
                    self.snapshot_in.insert(slot, snap);
                }
                let batch = !req.more.is_empty();
                let mut queue = std::collections::VecDeque::with_capacity(req.more.len());
                for (q, job) in req.more.into_iter().zip(more) {
                    let module = self.store.get(&q.module_digest).ok_or(PoolError::NeedModule)?;
                    check_inputs(&job, &q.inputs)?;
                    queue.push_back(Queued::new(job, module, q.inputs));
                }
                if let Some(c) = self.claims.get_mut(&req.claim_id) {
                    let n = queue.len() as u32;
                    c.queue.clear();
                    c.queue.extend(queue);
                    // A new activation: its jobs' ends are reported afresh
                    // (an appended one keeps those not yet acknowledged).
                    c.publish(|r| {
                        if !req.append {
                            r.ended = Arc::new(Vec::new());
                            r.kept = Arc::new(HashMap::new());
                        }
                        r.queued = n;
                    });
                }
                if batch {
                    self.short.insert(slot);
                }
                let acts = self.activate(slot, req.claim_id.clone(), job, module);
                self.short.remove(&slot);
                self.inputs.remove(&slot);
                self.saved_in.remove(&slot);
                self.snapshot_in.remove(&slot);
                if let Some(reason) = acts.iter().find_map(|a| match a {
                    Action::ActivationRefused { reason, .. } => Some(reason.clone()),
                    _ => None,
                }) {
                    return Err(PoolError::Refused(reason));
                }
                Ok(PoolReply::Done)
            }
            PoolRequest::Subscribe { caller, claim_id, incarnation, seen } => {
                self.prune_ended();
                if let Some((c, _)) = self.ended.get_mut(&claim_id) {
                    // The claim is over; its shadow still hears how it ended.
                    owned_by(c, &caller, &claim_id)?;
                    follows_again(c, incarnation, seen);
                    return Ok(PoolReply::Reports(
                        c.report.subscribe(),
                        self.starter_initial_update,
                        self.starter_update,
                        c.end_sent.clone(),
                        c.heard.clone(),
                    ));
                }
                owned(self, &caller, &claim_id)?;
                let mono = self.clock.now();
                let c = self.claims.get_mut(&claim_id).ok_or(PoolError::Stopping)?;
                c.heard.now();
                c.renewed = mono;
                follows_again(c, incarnation, seen);
                Ok(PoolReply::Reports(
                    c.report.subscribe(),
                    self.starter_initial_update,
                    self.starter_update,
                    c.end_sent.clone(),
                    c.heard.clone(),
                ))
            }
            PoolRequest::Alive { caller, req } => {
                let released = self.forget_earlier_lives(&caller, &req.incarnation);
                let mono = self.clock.now();
                let mut unknown = Vec::new();
                for id in req.claims {
                    match self.claims.get_mut(&id) {
                        Some(c) if c.claimant == caller => {
                            c.renewed = mono;
                            kept_alive(c, &req.incarnation);
                        }
                        _ => unknown.push(id),
                    }
                }
                Ok(PoolReply::Alive(andes_protocol::pool::AliveReply { unknown, released }))
            }
            PoolRequest::Edit { caller, req } => {
                let slot = owned(self, &caller, &req.claim_id)?;
                // An edit acknowledges no end: it comes from the queue, not
                // from the shadow once it committed what it was told.
                if let Some(c) = self.claims.get_mut(&req.claim_id) {
                    c.renewed = self.clock.now();
                }
                let attrs = classad::parse_ad(&req.attrs)
                    .map_err(|e| PoolError::BadInput(format!("the attributes: {e}")))?;
                self.feed(Event::JobUpdated { slot, claim_id: req.claim_id, attrs });
                // Policy sees the change now, not at the next poll.
                self.tick();
                Ok(PoolReply::Done)
            }
            PoolRequest::Sandbox { caller, claim_id } => {
                let slot = owned(self, &caller, &claim_id)?;
                match self.runs.get(&slot).filter(|r| r.kind == RunKind::Job) {
                    Some(r) => Ok(PoolReply::Sandbox(r.sandbox.clone())),
                    None => Err(PoolError::NotFound("the claim runs no job now".into())),
                }
            }
            PoolRequest::VacateJob { caller, req } => {
                // As `andes vacate` of its slot, for the claim's owner only.
                let slot = owned(self, &caller, &req.claim_id)?;
                self.feed(Event::Vacate { slot: Some(slot), kind: VacateKind::Graceful });
                self.tick();
                Ok(PoolReply::Done)
            }
            PoolRequest::Withdraw { caller, req } => {
                owned(self, &caller, &req.claim_id)?;
                // A withdrawal acknowledges no end: the shadow of a queued
                // job sends it whether or not the ends ahead are committed.
                let c = self.claims.get_mut(&req.claim_id).ok_or(PoolError::Stopping)?;
                let is_it = |q: &Queued| {
                    let id = |name| match q.job.eval_attr(name) {
                        classad::Value::Int(n) => u32::try_from(n).ok(),
                        _ => None,
                    };
                    id("ClusterId") == Some(req.cluster) && id("ProcId") == Some(req.proc)
                };
                if !c.queue.remove_first(is_it) {
                    return Ok(PoolReply::Withdrawn(false));
                }
                let queued = c.queue.len() as u32;
                c.publish(|r| r.queued = queued);
                Ok(PoolReply::Withdrawn(true))
            }
            PoolRequest::InputDir { caller, claim_id } => {
                let slot = owned(self, &caller, &claim_id)?;
                let dir = self.uploaded_dir(slot);
                std::fs::create_dir_all(&dir)
                    .map_err(|e| PoolError::Refused(format!("{}: {e}", dir.display())))?;
                let disk = match self.ads.get(&slot).map(|a| a.eval_attr(classad::name!("Disk"))) {
                    Some(Value::Int(kib)) if kib > 0 => (kib as u64).saturating_mul(1024),
                    _ => 0,
                };
                let used: u64 = std::fs::read_dir(&dir)
                    .map(|rd| rd.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
                    .unwrap_or(0);
                Ok(PoolReply::InputDir(dir, disk.saturating_sub(used)))
            }
            PoolRequest::Saved { caller, req } => {
                let c = self.claim_or_ended(&caller, &req.claim_id)?;
                match c.report.borrow().latest_saved() {
                    Some((n, d)) if n == req.seq => Ok(PoolReply::Saved(d)),
                    _ => Err(PoolError::NotFound(format!(
                        "saved state {} is no longer the job's latest",
                        req.seq
                    ))),
                }
            }
            PoolRequest::SnapshotPart { caller, req } => {
                let c = self.claim_or_ended(&caller, &req.claim_id)?;
                let r = c.report.borrow();
                let snap = r.snapshot.as_ref().filter(|s| s.hash == req.hash).ok_or_else(|| {
                    PoolError::NotFound(format!(
                        "checkpoint {} is no longer the job's latest",
                        req.hash
                    ))
                })?;
                match &req.blob {
                    None => Ok(PoolReply::SnapshotBytes(snap.bytes.clone())),
                    Some(b) if snap.files.contains(b) && andes_snapshot::is_hash(b) => {
                        Ok(PoolReply::SnapshotBlob(snap.blobs.clone(), snap.blobs.store.path(b)))
                    }
                    Some(b) => Err(PoolError::NotFound(format!(
                        "checkpoint {} names no file content {b}",
                        req.hash
                    ))),
                }
            }
            PoolRequest::Output { caller, req } => {
                let c = self.claim_or_ended(&caller, &req.claim_id)?;
                let r = c.report.borrow();
                let found = r.kept.get(&req.job).and_then(|k| {
                    k.files.get(&req.name).map(|p| PoolReply::Output(k.clone(), p.clone()))
                });
                found.ok_or_else(|| {
                    PoolError::NotFound(format!(
                        "job {} has no output file {:?} kept for transfer",
                        req.job, req.name
                    ))
                })
            }
            PoolRequest::Release { caller, claim_id } => {
                // Releasing a claim that already ended acknowledges its end.
                if let Some((c, _)) = self.ended.get(&claim_id) {
                    owned_by(c, &caller, &claim_id)?;
                    c.acknowledged();
                    self.prune_ended();
                    return Ok(PoolReply::Done);
                }
                let slot = owned(self, &caller, &claim_id)?;
                if let Some(c) = self.claims.get(&claim_id) {
                    c.waive_end();
                }
                self.feed(Event::ClaimReleased { slot, claim_id });
                self.tick();
                Ok(PoolReply::Done)
            }
        }
    }

    /// True when a slot runs, or a claim holds queued, the job `gid`.
    pub(crate) fn holds_job(&self, gid: &str) -> bool {
        let is = |ad: &ClassAd| matches!(ad.eval_attr(classad::name!("GlobalJobId")), Value::Str(g) if *g == *gid);
        self.startd.slots().iter().any(|s| s.job().is_some_and(is))
            || self.claims.values().any(|c| c.queue.holds(gid))
    }

    /// True while claim `c`'s slot runs (or has queued) a job of it.
    pub(crate) fn claim_running(&self, c: &ClaimEntry) -> bool {
        self.runs.get(&c.slot).is_some_and(|r| r.kind == RunKind::Job) || !c.queue.is_empty()
    }

    /// Claims whose lease ran out: released, their jobs killed. A claim runs
    /// on its job lease while a job of it runs, on its keep-alive lease
    /// otherwise (so a claim accepted and never used, or left idle by a
    /// schedd that died, is back to Unclaimed within seconds).
    pub(crate) fn expire_leases(&mut self) {
        let mono = self.clock.now();
        let mut expired: Vec<(SlotId, String, bool)> = Vec::new();
        for (id, c) in &self.claims {
            let running = self.claim_running(c);
            let listening = c.report.receiver_count() > 0;
            if !listening && mono >= c.expires(running) {
                expired.push((c.slot, id.clone(), running));
            }
        }
        for c in self.claims.values_mut() {
            if c.report.receiver_count() > 0 {
                // A shadow is listening right now: the lease is live.
                c.renewed = mono;
            }
        }
        for (slot, id, running) in expired {
            let what = if running { "the job lease" } else { "the claim's lease (no keep-alive)" };
            self.log(format!(
                "slot {slot}: claim {}: {what} expired; releasing",
                public_claim_id(&id)
            ));
            self.feed(Event::ClaimReleased { slot, claim_id: id });
        }
    }

    /// Releases the claims of `claimant`'s earlier incarnations that run no
    /// job (those that do wait for the new one to follow them, or for their
    /// job lease); returns how many.
    pub(crate) fn forget_earlier_lives(&mut self, claimant: &str, incarnation: &str) -> u32 {
        let old: Vec<(SlotId, String)> = self
            .claims
            .iter()
            .filter(|(_, c)| {
                c.claimant == claimant
                    && c.incarnation.as_deref().is_some_and(|i| i != incarnation)
                    && !self.claim_running(c)
            })
            .map(|(id, c)| (c.slot, id.clone()))
            .collect();
        for (slot, id) in &old {
            self.log(format!(
                "slot {slot}: claim {}: its schedd restarted; releasing",
                public_claim_id(id)
            ));
            self.feed(Event::ClaimReleased { slot: *slot, claim_id: id.clone() });
        }
        old.len() as u32
    }

    /// Activates a claim with a job and the module it runs: hands the module
    /// over, then feeds [`Event::ClaimActivated`].
    pub fn activate(
        &mut self,
        slot: SlotId,
        claim_id: String,
        job: ClassAd,
        module: Arc<[u8]>,
    ) -> Vec<Action> {
        self.feed_with_module(slot, module, Event::ClaimActivated { slot, claim_id, job })
    }

    /// Feeds `event`, which may start a job on `slot`, with the module that
    /// job runs at hand for the machine's [`Action::StartJob`] (and no
    /// longer once the event is carried out).
    fn feed_with_module(&mut self, slot: SlotId, module: Arc<[u8]>, event: Event) -> Vec<Action> {
        self.modules.insert(slot, module);
        let acts = self.feed(event);
        self.modules.remove(&slot);
        acts
    }

    /// The next job queued on the claim of the slot whose job is ending,
    /// taken from its queue, with the claim, if its schedd still follows
    /// the claim; else the queue is dropped (those jobs never ran).
    pub(crate) fn next_queued(&mut self, slot: SlotId) -> Option<(String, Queued)> {
        let claim_id = self.startd.slot(slot)?.claim_id()?.to_string();
        let c = self.claims.get_mut(&claim_id)?;
        if c.queue.is_empty() {
            return None;
        }
        if !c.followed() {
            c.queue.clear();
            c.publish(|r| r.queued = 0);
            self.log(format!(
                "slot {slot}: no shadow follows claim {claim_id}: queued jobs dropped"
            ));
            return None;
        }
        let next = c.queue.pop_front()?;
        Some((claim_id, next))
    }

    /// Feeds the end of the slot's job and the start of the claim's next
    /// queued job as one event ([`Event::StarterExitedNext`]), the job's
    /// module and inputs handed over. If the machine refuses the activation
    /// (the claim's worklife is over, the slot is being vacated), the rest
    /// of the claim's queue is dropped.
    pub(crate) fn exit_and_continue(
        &mut self,
        slot: SlotId,
        outcome: StarterOutcome,
        claim_id: String,
        next: Queued,
    ) {
        self.input_sizes
            .insert(slot, next.inputs.iter().map(|f| (f.name.clone(), f.len())).collect());
        self.inputs.insert(slot, next.inputs);
        self.short.insert(slot);
        let event =
            Event::StarterExitedNext { slot, outcome, claim_id: claim_id.clone(), job: next.job };
        let acts = self.feed_with_module(slot, next.module, event);
        self.short.remove(&slot);
        self.inputs.remove(&slot);
        if acts.iter().any(|a| matches!(a, Action::ActivationRefused { .. }))
            && let Some(c) = self.claims.get_mut(&claim_id)
        {
            c.queue.clear();
            c.publish(|r| r.queued = 0);
        }
    }
}
