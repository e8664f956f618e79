//! A claim's loop: claiming the slot, running a job of the matched group on
//! it and then more of the same group (claim reuse), keeping it alive, and
//! releasing it.

use crate::attrs::str_attr;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use andes_protocol::pool::{
    ActivateRequest, AliveReply, AliveRequest, CLAIM_PENDING, ClaimReply, ClaimRequest,
    CollectorQuery, CollectorQueryReply, FileData, JobReport, MatchGrant, NEED_MODULE, QueuedJob,
    ReleaseRequest, WaitRequest, WithdrawReply, WithdrawRequest,
};
use andes_protocol::{Client, ClientErrorKind, Clock};
use classad::{ClassAd, Value};
use http::Method;

use super::dollar::host_ad;
use super::files::may_have_checkpoints;
use super::lane::{Lane, LaneOp, LaneTx};
use super::link::{ClaimCtx, Link, not_found, status_reason};
use super::reports::{Ends, NotActivated, Start};
use super::state::{ClaimCount, MAX_BATCH, PoolState, lock};
use crate::job::{JobId, JobStatus};
use crate::queue::{ACTIVATION_PENDING, CLAIM_ID_ATTR, PoolOp};

/// Asks the host to drop job `id`, queued on a claim behind others, before
/// it starts: true when it will not run there.
pub(crate) async fn withdraw(link: &Link, claim_id: &str, id: JobId) -> bool {
    let req =
        WithdrawRequest { claim_id: claim_id.to_string(), cluster: id.cluster, proc: id.proc };
    match link.short.call::<_, WithdrawReply>(Method::POST, "/v1/host/withdraw", Some(&req)).await {
        Ok(r) => r.withdrawn,
        Err(e) => {
            tracing::debug!("job {id}: withdrawing it from its claim: {e}");
            false
        }
    }
}

/// [`withdraw`] as a task of its own, from the host and claim `at`.
pub(crate) fn withdraw_soon((link, claim_id): (Link, String), id: JobId) {
    tokio::spawn(async move { withdraw(&link, &claim_id, id).await });
}

/// Jobs shorter than this are short: a claim's batches of them grow.
const SHORT_JOB: Duration = Duration::from_millis(10);
/// Jobs longer than this are long: they go one an activation. A batch of
/// short jobs grows at once to as many as fit in this time.
const LONG_JOB: Duration = Duration::from_millis(50);

/// A claim's next batch size, and the pace its size and overlap go by:
/// the time its jobs ran on the host (`job_time`, the longest the last answer
/// reported) when the host says, else the schedd's own time a job
/// (`per_job`), which grows with every slot sharing a busy machine. While
/// jobs are short (under 10 ms) the size doubles, or grows at once to as
/// many as the pace fits in the time of one long job (50 ms), up to
/// [`MAX_BATCH`]; once they are long (over 50 ms) it is one again. (Doubling
/// alone, from one job, took each claim seven activations to reach full
/// batches: with 64 slots' claims starting together, most of a trivial
/// job's round trips.)
pub(crate) fn next_batch(
    batch: usize,
    per_job: Duration,
    job_time: Option<Duration>,
) -> (usize, Duration) {
    let pace = job_time.unwrap_or(per_job);
    let next = if pace < SHORT_JOB {
        let fit = LONG_JOB.as_nanos() / pace.as_nanos().max(1);
        (batch * 2).max(usize::try_from(fit).unwrap_or(usize::MAX)).min(MAX_BATCH)
    } else if pace > LONG_JOB {
        1
    } else {
        batch
    };
    (next.max(1), pace)
}

/// The jobs a claim's next batch is a share of.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Share {
    /// Idle jobs of its autocluster not handed to any claim, besides the
    /// one in hand.
    pub(crate) waiting: usize,
    /// Jobs of its autocluster queued on the claims' hosts behind others,
    /// not started yet.
    pub(crate) queued: usize,
    /// Of those, the ones queued on this claim.
    pub(crate) mine: usize,
    /// The schedd's claims of its autocluster (matches being claimed
    /// included).
    pub(crate) claims: usize,
}

/// How many jobs a claim's next activation takes: the claim's batch size
/// (`batch`, grown while jobs are short), but no more than fit in what is
/// left of CLAIM_WORKLIFE (`worklife`) at `per_job` each (a batch outlasts it
/// by at most a job: the claim takes no new jobs after it, queued ones
/// included), and no more than this claim's share of its autocluster's jobs
/// not started yet (those waiting, the one in hand, and those queued on
/// hosts) among the autocluster's claims, less what it has queued already: each
/// claim takes its part of a queue at once, and when the queue runs low its
/// last jobs are spread over the claims rather than queued behind one while
/// other slots stand idle. (A share of what no claim had taken yet shrank
/// with every claim that took one: 64 claims took batches of 93, 92, 90,
/// ..., and a tail of single jobs.)
pub(crate) fn batch_size(
    batch: usize,
    per_job: Duration,
    worklife: Option<Duration>,
    share: Share,
) -> usize {
    let mut size = batch.max(1);
    if let Some(left) = worklife
        && !per_job.is_zero()
    {
        let fit = (left.as_nanos() / per_job.as_nanos()).max(1);
        size = size.min(usize::try_from(fit).unwrap_or(usize::MAX));
    }
    let pending = share.waiting.saturating_add(share.queued).saturating_add(1);
    let fair = pending.div_ceil(share.claims.max(1)).saturating_sub(share.mine);
    size.min(fair.max(1))
}

/// The longest the host holds an answer while a batch of short jobs runs:
/// an appended batch's activation waiting for the batch ahead of it to end,
/// a fresh batch's for itself, a wait for the jobs queued behind the running
/// one (`WaitRequest::settle_ms`). Past it, the jobs are followed report by
/// report.
pub(crate) const BATCH_WAIT_MS: u64 = 2_000;

/// What the journal names while a shadow matches a job to its claim's slot.
const MATCHING: &str = "Requirements, against a claimed slot";

/// The quarantine of job `ad` when a host's refusal (`reason`) says it
/// quarantined that job (see [`andes_protocol::pool::quarantined_refusal`]).
pub(crate) fn host_quarantined(reason: &str, ad: &ClassAd) -> Option<PoolOp> {
    let gid = andes_protocol::pool::quarantined_job(reason)?;
    (str_attr(ad, classad::name!("GlobalJobId")).as_deref() == Some(gid)).then(|| {
        PoolOp::Quarantined {
            what: "ad, against an execute host's policy".into(),
            reason: reason.to_string(),
        }
    })
}

impl PoolState {
    /// The next idle job of an autocluster not yet handed to a claim.
    /// The next job of autocluster `ac` that may run now, on `slot` (both
    /// Requirements, as the negotiator judges them) when given: a job edited
    /// since its autocluster was filed may no longer fit the claim it would
    /// reuse; it waits for the next negotiation, filed anew.
    pub(crate) fn next_job(&self, ac: u32, slot: Option<&ClassAd>) -> Option<JobId> {
        self.next_job_ad(ac, slot).map(|(id, _)| id)
    }

    /// [`PoolState::next_job`], with the job's full ad when matching it to
    /// `slot` made it.
    fn next_job_ad(&self, ac: u32, slot: Option<&ClassAd>) -> Option<(JobId, Option<ClassAd>)> {
        let mut state = lock(&self.state);
        let st = self.queue.read();
        loop {
            let id = state.ac_jobs.get_mut(&ac)?.pop_front()?;
            if state.busy.contains(&id) {
                continue;
            }
            let Some(v) = st.job(id) else { continue };
            let ready = v.proc.status == JobStatus::Idle
                && !v.proc.ad.contains(classad::name!(ACTIVATION_PENDING))
                && !v.routed_away()
                && self.offerable(&v, self.clock.now());
            if !ready {
                continue;
            }
            let ad = match slot {
                None => None,
                Some(s) => {
                    let ad = v.ad();
                    let _evaluating = self.queue.journal().enter(id, MATCHING);
                    crate::quarantine::fault_point("match", &ad);
                    if !classad::symmetric_match(&ad, s) {
                        continue;
                    }
                    Some(ad)
                }
            };
            state.busy.insert(id);
            return Some((id, ad));
        }
    }

    pub(crate) async fn release(&self, link: &Link, claim_id: &str) {
        let req = ReleaseRequest { claim_id: claim_id.to_string() };
        if let Err(e) = link.short.post_json("/v1/host/release", &req).await {
            tracing::debug!("releasing claim: {e}");
        }
    }

    /// Claims the slot of `grant` and runs `first`, then the next jobs of
    /// its autocluster, until the claim ends; counted among the claims of
    /// its autocluster (`_counted`) until then.
    pub(crate) async fn run_claim(
        self: Arc<Self>,
        grant: MatchGrant,
        first: JobId,
        _counted: ClaimCount,
    ) {
        let link = self.link(&grant.host_address);
        let slot_ad = classad::parse_ad(&grant.slot_ad).unwrap_or_default();
        let lane = Lane::start(self.clone());
        let Some(job_ad) = self.queue.read().job(first).map(|v| v.ad()) else {
            lane.send(LaneOp::Free(first));
            lane.close().await;
            return;
        };
        let owner = str_attr(&job_ad, classad::name!("Owner")).unwrap_or_default();
        let req = ClaimRequest {
            claim_id: grant.claim_id.clone(),
            owner: owner.clone(),
            user: None,
            client_machine: self.cfg.name.clone(),
            ad: job_ad.to_string(),
            incarnation: Some(self.incarnation.clone()),
            alive_interval: Some(self.cfg.alive_interval.as_secs().max(1)),
        };
        let claim = ClaimCtx {
            claim_id: grant.claim_id.clone(),
            slot_ad,
            addr: grant.host_address.clone(),
        };
        // A new claim's first activation is one job (its batch grows with
        // the answers): prepared now, and its intent (with the match,
        // NumJobMatches) committed while the claim is on its way, not after
        // its answer. A schedd that dies in between asks the host after its
        // restart, which knows no such claim or no such job: it stays idle.
        // (The batch, and whether its intent was recorded.)
        let claimed = link.short.call::<_, ClaimReply>(Method::POST, "/v1/host/claim", Some(&req));
        let (reply, mut prepared) = match self.plain_batch(first, grant.autocluster, 1, &claim) {
            Some(batch) => {
                let intent = PoolOp::Activating(self.started_attrs(&claim));
                let now = self.clock.now();
                let record = self.queue.pool_matched(first, batch.0.clone(), intent, now);
                let (reply, recorded) = tokio::join!(claimed, record);
                (reply, Some((batch, recorded)))
            }
            None => (claimed.await, None),
        };
        let refused = match reply {
            Ok(r) if r.accepted => None,
            Ok(r) => {
                let reason = r.reason.unwrap_or_default();
                tracing::info!(
                    "claim on {} refused: {reason}",
                    str_attr(&claim.slot_ad, classad::name!("Name")).unwrap_or_default(),
                );
                Some(host_quarantined(&reason, &job_ad))
            }
            Err(e) => {
                tracing::warn!("cannot claim a slot: {e}");
                Some(None)
            }
        };
        if let Some(quarantined) = refused {
            // Never activated: an intent recorded is withdrawn.
            if let Some(((ids, ..), Ok(()))) = &prepared {
                for id in ids {
                    lane.send(LaneOp::Pool(*id, PoolOp::NotStarted(claim.claim_id.clone())));
                }
            }
            if let Some(op) = quarantined {
                lane.send(LaneOp::Pool(first, op));
            }
            lane.send(LaneOp::Free(first));
            lane.close().await;
            return;
        }
        // The match is counted (NumJobMatches) in the first intent's commit;
        // for a job activated alone, now.
        if prepared.is_none() {
            lane.send(LaneOp::Pool(first, PoolOp::Matched));
        }
        lock(&self.held).insert(grant.claim_id.clone(), grant.host_address.clone());
        // The claim's age to the millisecond: with whole seconds a claim of
        // CLAIM_WORKLIFE = 1 would last anywhere from 0 to 2 s.
        let since = tokio::time::Instant::now();
        let mut job = first;
        // Jobs per activation: grows while the claim's jobs are short (a
        // batch costs one round trip, not one per job), back to one as soon
        // as they are not.
        let mut batch = 1usize;
        // How long each job of the last batch took, as the schedd saw it
        // (round trips, commits and a busy machine's waits included).
        let mut per_job = Duration::ZERO;
        // How long the claim's jobs ran on the host, the longest of the ends
        // the last answer carried; what tells short jobs from long ones (the
        // schedd's time a job grows with the slots sharing the machine:
        // judged by it, 64 slots' trivial jobs looked long, went one at a
        // time, and cost twice the CPU a job of 2 slots').
        let mut job_time: Option<Duration> = None;
        // What the batch's size and overlap go by: `job_time` once known.
        let mut pace = Duration::ZERO;
        let mut alive = true;
        // While jobs are short, the next batch goes to the host behind the
        // one it runs (the slot never waits for the schedd): the batch sent
        // last, not yet taken in, and its activation's answer.
        let mut ahead: Option<(Vec<JobId>, JobReport)> = None;
        // The ends committed so far, up to this report version: the host
        // forgets them when it gets the next batch.
        let mut acked = 0u64;
        loop {
            let t = tokio::time::Instant::now();
            let n;
            let worklife = (self.cfg.claim_worklife >= 0).then(|| {
                Duration::from_secs(self.cfg.claim_worklife as u64).saturating_sub(since.elapsed())
            });
            let share = {
                let st = lock(&self.state);
                let mine = ahead
                    .as_ref()
                    .map_or(0, |(ids, _)| ids.iter().filter(|id| st.queued.contains(id)).count());
                Share {
                    waiting: st.ac_jobs.get(&grant.autocluster).map_or(0, |q| q.len()),
                    queued: st.queued.of(grant.autocluster),
                    mine,
                    claims: st.claims_of(grant.autocluster),
                }
            };
            let size = batch_size(batch, per_job, worklife, share);
            let (batch_of, recorded) = match prepared.take() {
                Some((batch, recorded)) => (Some(batch), Some(recorded)),
                None => (self.plain_batch(job, grant.autocluster, size, &claim), None),
            };
            match batch_of {
                Some((ids, mut req, lease, gid)) => {
                    n = ids.len();
                    // Short jobs, and more waiting: the next batch will
                    // follow this one while it runs. (The last batch is
                    // answered once all of it ended, in one report.)
                    let more_waiting = lock(&self.state)
                        .ac_jobs
                        .get(&grant.autocluster)
                        .is_some_and(|q| !q.is_empty());
                    // (Its first job's GlobalJobId tells the batch ahead's
                    // ends from its own in the answer: without it, no overlap.)
                    let short = !per_job.is_zero() && pace < SHORT_JOB;
                    let pipelined = more_waiting && gid.is_some() && short;
                    if ahead.is_some() {
                        // Answered once the batch ahead has ended (and, for
                        // the last batch, this one too), so that their jobs
                        // are not followed one report at a time: as long as
                        // the host takes, up to BATCH_WAIT_MS. (Waiting
                        // four times the schedd's time a job, the host's
                        // time for a batch among 64 slots' on two cores ran
                        // past it: two requests in three were waits, each
                        // answered at the next job's end.)
                        req.wait_ms = BATCH_WAIT_MS;
                        req.append = true;
                        req.acked = acked;
                    } else if short && !pipelined {
                        // A fresh batch of short jobs, none to follow it:
                        // answered once it has ended, in one report, not at
                        // its start and then report by report.
                        req.wait_ms = BATCH_WAIT_MS;
                    }
                    // Answered at its first job's start, unless its jobs
                    // are known short: the schedd knows at once that the
                    // job runs (a fresh activation answered at the end or
                    // after wait_ms left a long job idle in the queue for
                    // wait_ms).
                    req.reply_at_start = pipelined || (!req.append && !short);
                    let digest = req.module_digest.clone();
                    // Recorded before it is sent (see PoolOp::Activating),
                    // for every job of the batch: a schedd that dies while
                    // the host runs them asks the host after its restart.
                    let recorded = match recorded {
                        Some(r) => r,
                        None => {
                            let intent = PoolOp::Activating(self.started_attrs(&claim));
                            self.queue.pool(ids.clone(), intent, self.clock.now()).await
                        }
                    };
                    let sent = match recorded {
                        Ok(()) => self.activate(&link, &req, &digest, lease, Vec::new()).await,
                        Err(e) => Err(NotActivated {
                            reason: format!("recording the activation: {e}"),
                            ambiguous: false,
                        }),
                    };
                    if sent.is_err()
                        && let Some((before, _)) = ahead.take()
                    {
                        // The batch ahead ran on: the host says how, as to a
                        // restarted schedd.
                        let mut ends = Ends::default();
                        for id in before {
                            let start = Start::Reconnect;
                            self.shadow(&link, &claim, id, &lane.tx, start, &mut ends).await;
                        }
                    }
                    if let Err(e) = &sent
                        && e.ambiguous
                    {
                        // The host may run them: it says which, as to a
                        // restarted schedd; each is followed, or goes back
                        // to idle, never started twice.
                        tracing::warn!("job {job}: activation unanswered: {}", e.reason);
                        for (k, id) in ids.into_iter().enumerate() {
                            // The first job counts a failure if none ran.
                            let start = match k {
                                0 => Start::Unanswered(e.reason.clone()),
                                _ => Start::Reconnect,
                            };
                            let mut ends = Ends::default();
                            self.shadow(&link, &claim, id, &lane.tx, start, &mut ends).await;
                        }
                        break;
                    }
                    let sent = sent.map_err(|e| e.reason);
                    if let Err(e) = &sent {
                        // The first job counts the failure; the rest just
                        // go back to idle, but for one the host quarantined.
                        let failed = PoolOp::ActivationFailed(claim.claim_id.clone(), e.clone());
                        lane.send(LaneOp::Pool(ids[0], failed));
                        for id in &ids[1..] {
                            let op = PoolOp::NotStarted(claim.claim_id.clone());
                            lane.send(LaneOp::Pool(*id, op));
                        }
                        for id in &ids {
                            let ad = self.queue.read().job(*id).map(|v| v.ad());
                            if let Some(op) = ad.and_then(|ad| host_quarantined(e, &ad)) {
                                lane.send(LaneOp::Pool(*id, op));
                            }
                        }
                    }
                    if sent.is_ok() {
                        // An appended batch waits on the host, first job and all.
                        let waiting = if req.append { &ids[..] } else { &ids[1..] };
                        self.note_queued(&link, &claim.claim_id, grant.autocluster, waiting);
                    }
                    let report = match sent {
                        Ok(r) => r,
                        Err(e) => {
                            // None of them started: they stay idle.
                            tracing::warn!("job {job}: activation failed: {e}");
                            for id in ids {
                                lane.send(LaneOp::Free(id));
                            }
                            break;
                        }
                    };
                    if let Some(us) = report.ended.iter().filter_map(|e| e.run_us).max() {
                        job_time = Some(Duration::from_micros(us));
                    }
                    if let Some((before, _)) = ahead.take() {
                        // The batch ahead has ended (this one's first job
                        // started after it): its ends are taken in and
                        // committed, and the host forgets them with the
                        // next batch. Every end before this batch's first
                        // job's is the batch ahead's, or older.
                        let upto = report
                            .ended
                            .iter()
                            .take_while(|e| gid.as_deref() != Some(e.job.as_str()))
                            .map(|e| e.version)
                            .max();
                        let (ok, _) =
                            self.take_in(&link, &claim, &lane.tx, before, report.clone()).await;
                        alive &= ok;
                        acked = acked.max(upto.unwrap_or(0));
                    }
                    if pipelined && alive {
                        ahead = Some((ids, report));
                    } else {
                        // The batch's ends are taken in, and committed, before
                        // anything more is asked of the host: it takes the
                        // next request that starts afresh as the
                        // acknowledgement that they are kept.
                        let (ok, longest) =
                            self.take_in(&link, &claim, &lane.tx, ids, report).await;
                        alive &= ok;
                        job_time = longest.or(job_time);
                    }
                }
                None => {
                    n = 1;
                    // A job activated alone starts afresh: the batch ahead
                    // is taken in first.
                    if let Some((before, report)) = ahead.take() {
                        alive &= self.take_in(&link, &claim, &lane.tx, before, report).await.0;
                    }
                    if alive {
                        let mut ends = Ends::default();
                        let start = Start::Activate;
                        alive &=
                            self.shadow(&link, &claim, job, &lane.tx, start, &mut ends).await.0;
                    } else {
                        lane.send(LaneOp::Free(job));
                    }
                }
            }
            if !alive {
                break;
            }
            per_job = t.elapsed() / n as u32;
            (batch, pace) = next_batch(batch, per_job, job_time);
            let worklife = self.cfg.claim_worklife;
            if worklife >= 0 && since.elapsed() >= Duration::from_secs(worklife as u64) {
                break;
            }
            match self.next_job(grant.autocluster, Some(&claim.slot_ad)) {
                Some(next) => job = next,
                None => break,
            }
        }
        if let Some((before, report)) = ahead.take() {
            self.take_in(&link, &claim, &lane.tx, before, report).await;
        }
        // Released (or, for a claim that already ended, its end acknowledged)
        // once everything it reported is committed.
        lane.tx.committed().await;
        self.release(&link, &claim.claim_id).await;
        lock(&self.held).remove(&claim.claim_id);
        lane.close().await;
    }

    /// Tells each host, every ALIVE_INTERVAL, which of its claims this run
    /// of the schedd holds (HTCondor's claim keep-alive); at start, tells the
    /// hosts whose slots the collector shows claimed by this schedd that it
    /// restarted, so they release what its earlier run left idle at once.
    pub(crate) async fn alive_loop(self: Arc<Self>) {
        self.announce_restart().await;
        loop {
            tokio::time::sleep(self.cfg.alive_interval).await;
            let mut by_host: HashMap<String, Vec<String>> = HashMap::new();
            for (claim, addr) in lock(&self.held).iter() {
                by_host.entry(addr.clone()).or_default().push(claim.clone());
            }
            for (addr, claims) in by_host {
                let req = AliveRequest { incarnation: self.incarnation.clone(), claims };
                let link = self.link(&addr);
                let r: Result<AliveReply, _> =
                    link.short.call(Method::POST, "/v1/host/alive", Some(&req)).await;
                if let Err(e) = r {
                    tracing::debug!("keep-alive to {addr}: {e}");
                }
            }
        }
    }

    /// At start: the hosts whose slots the collector shows claimed by this
    /// schedd (its earlier run) hear of this run's incarnation.
    pub(crate) async fn announce_restart(&self) {
        let Some(url) = self.cfg.collector.clone() else { return };
        let Ok(client) = Client::new(&url, self.keypair.clone()) else { return };
        let q = CollectorQuery {
            kind: Some("Machine".into()),
            constraint: Some(format!(
                "ClientMachine == {}",
                classad::Value::Str(self.cfg.name.as_str().into())
            )),
            projection: vec!["MyAddress".into()],
        };
        let found: Result<CollectorQueryReply, _> =
            client.call(Method::POST, "/v1/collector/query", Some(&q)).await;
        let Ok(found) = found else { return };
        let mut hosts = HashSet::new();
        for text in found.ads {
            if let Ok(ad) = classad::parse_ad(&text)
                && let Some(addr) = str_attr(&ad, classad::name!("MyAddress"))
            {
                hosts.insert(addr);
            }
        }
        for addr in hosts {
            let req = AliveRequest { incarnation: self.incarnation.clone(), claims: Vec::new() };
            let r: Result<AliveReply, _> =
                self.link(&addr).short.call(Method::POST, "/v1/host/alive", Some(&req)).await;
            match r {
                Ok(r) if r.released > 0 => tracing::info!(
                    "{addr} released {} claims of this schedd's earlier run",
                    r.released
                ),
                Ok(_) => {}
                Err(e) => tracing::debug!("telling {addr} of this run: {e}"),
            }
        }
    }

    /// Takes in how a batch's jobs ended (or follows them while they run),
    /// in order, from the activation's report. Returns whether the claim is
    /// still usable, and how long the longest of the ends seen ran on the
    /// host (what tells short jobs from long ones when the activation was
    /// answered at a start, before any end).
    pub(crate) async fn take_in(
        &self,
        link: &Link,
        claim: &ClaimCtx,
        lane: &LaneTx,
        ids: Vec<JobId>,
        report: JobReport,
    ) -> (bool, Option<Duration>) {
        let lane = &lane.gathering();
        let mut ends = Ends::default();
        let mut last = Some(report);
        let mut alive = true;
        for id in ids {
            // With no report (the host is lost) it never went out, as far as
            // the schedd can know: it stays idle.
            match last.take() {
                Some(r) => {
                    (alive, last) = self
                        .shadow(link, claim, id, lane, Start::Queued(Box::new(r)), &mut ends)
                        .await;
                }
                None => {
                    lane.send(LaneOp::Pool(id, PoolOp::NotStarted(claim.claim_id.clone())));
                    lane.send(LaneOp::Free(id));
                }
            }
        }
        lane.committed().await;
        let longest = ends.ended.values().filter_map(|e| e.run_us).max();
        (alive, longest.map(Duration::from_micros))
    }

    /// A batch of up to `n` jobs of autocluster `ac` starting with `first`,
    /// as one activation of the claim, when `first` is a plain job: one whose
    /// host needs nothing but its ad, module and input files (it neither
    /// checkpoints nor waits for a DeferralTime). `None` for any other, which
    /// its shadow activates alone.
    pub(crate) fn plain_batch(
        &self,
        first: JobId,
        ac: u32,
        n: usize,
        claim: &ClaimCtx,
    ) -> Option<(Vec<JobId>, ActivateRequest, u64, Option<String>)> {
        let job = self.queue.read().job(first).map(|v| v.ad())?;
        if may_have_checkpoints(&job) || job.contains(classad::name!("DeferralTime")) {
            return None;
        }
        // A job with big input files uploads them first: not for a batch.
        let inputs = self.read_inputs(&job, None).ok().filter(|i| !i.streams())?.files;
        let lease = match job.eval_attr(classad::name!("JobLeaseDuration")) {
            Value::Int(n) if n > 0 => n as u64,
            _ => self.cfg.job_lease,
        };
        let carried = inputs.iter().map(FileData::len).sum();
        let first_ad = host_ad(self.queue.journal(), first, &job, &claim.slot_ad);
        // A host that takes deltas gets each queued job as what differs
        // from the first (a cluster's ad printed and parsed once a batch).
        let base =
            matches!(claim.slot_ad.eval_attr(classad::name!("HasJobAdDeltas")), Value::Bool(true))
                .then_some(&first_ad);
        let more = self.batch_behind(first, ac, n - 1, claim, carried, base);
        let mut ids = vec![first];
        ids.extend(more.iter().map(|(id, _)| *id));
        let req = ActivateRequest {
            claim_id: claim.claim_id.clone(),
            job: first_ad.to_string(),
            module_digest: str_attr(&job, classad::name!("CmdDigest")).unwrap_or_default(),
            inputs,
            lease_secs: lease,
            wait_ms: self.cfg.activate_wait_ms,
            saved_state: None,
            snapshot: None,
            more: more.into_iter().map(|(_, q)| q).collect(),
            append: false,
            acked: 0,
            reply_at_start: false,
        };
        Some((ids, req, lease, str_attr(&job, classad::name!("GlobalJobId"))))
    }

    /// Up to `n` more jobs of autocluster `ac` to queue on the claim behind
    /// `first`: jobs that run the same module and neither checkpoint nor
    /// wait for a DeferralTime. A job whose input files cannot be read is
    /// left for a later activation (which holds it). With `base` (the first
    /// job's host ad), each goes as its delta from it.
    pub(crate) fn batch_behind(
        &self,
        first: JobId,
        ac: u32,
        n: usize,
        claim: &ClaimCtx,
        mut carried: u64,
        base: Option<&ClassAd>,
    ) -> Vec<(JobId, QueuedJob)> {
        if n == 0 {
            return Vec::new();
        }
        let Some(digest) =
            self.queue.read().job(first).and_then(|v| v.str_attr(classad::name!("CmdDigest")))
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        while out.len() < n {
            let Some((id, matched)) = self.next_job_ad(ac, Some(&claim.slot_ad)) else { break };
            let Some(job) = matched.or_else(|| self.queue.read().job(id).map(|v| v.ad())) else {
                lock(&self.state).busy.remove(&id);
                continue;
            };
            let fits = str_attr(&job, classad::name!("CmdDigest")).as_deref()
                == Some(digest.as_str())
                && !may_have_checkpoints(&job)
                && !job.contains(classad::name!("DeferralTime"));
            // The batch's files travel in one message: within its budget.
            let inputs = if fits {
                self.read_inputs(&job, None).ok().filter(|i| !i.streams()).map(|i| i.files).filter(
                    |f| {
                        carried + f.iter().map(FileData::len).sum::<u64>()
                            <= andes_protocol::pool::INLINE_BUDGET
                    },
                )
            } else {
                None
            };
            carried += inputs.iter().flatten().map(FileData::len).sum::<u64>();
            let Some(inputs) = inputs else {
                // Not for a batch: it goes first on a later activation.
                let mut st = lock(&self.state);
                st.busy.remove(&id);
                st.ac_jobs.entry(ac).or_default().push_front(id);
                break;
            };
            let ad = host_ad(self.queue.journal(), id, &job, &claim.slot_ad);
            let (job, delta, unset) = match base {
                Some(base) => {
                    let (delta, unset) = ad.delta_from(base);
                    (delta.to_string(), true, unset)
                }
                None => (ad.to_string(), false, Vec::new()),
            };
            let module_digest = digest.clone();
            out.push((id, QueuedJob { job, module_digest, inputs, delta, unset }));
        }
        out
    }

    /// Notes the jobs an activation queued on the claim's host behind its
    /// first, so that a hold or removal withdraws them from there. One held
    /// or removed while the activation was on its way is withdrawn now. They
    /// are noted before their states are read, so a hold committed meanwhile
    /// is seen by one side or the other, and withdrawn by whichever takes it
    /// off the list.
    pub(crate) fn note_queued(&self, link: &Link, claim_id: &str, ac: u32, ids: &[JobId]) {
        {
            let mut st = lock(&self.state);
            for id in ids {
                st.queued.insert(*id, link.clone(), claim_id.to_string(), ac);
            }
        }
        let stopped: Vec<JobId> = {
            let q = self.queue.read();
            let stopped =
                |id: &&JobId| q.job(**id).is_none_or(|v| v.proc.status != JobStatus::Idle);
            ids.iter().filter(stopped).copied().collect()
        };
        let mut st = lock(&self.state);
        for id in stopped {
            if let Some(at) = st.queued.remove(&id) {
                withdraw_soon(at, id);
            }
        }
    }

    /// A job's part on its claim is over: it is no longer busy.
    pub(crate) fn free(&self, id: JobId) {
        let quiet = {
            let mut st = lock(&self.state);
            st.busy.remove(&id);
            st.queued.remove(&id);
            st.busy.is_empty()
        };
        self.advertise.notify_one();
        if quiet {
            // The pool just went quiet: say so now, so the next submit finds
            // the negotiator up to date.
            self.urgent.notify_one();
        }
    }

    pub(crate) fn started_attrs(&self, claim: &ClaimCtx) -> ClassAd {
        let mut a = ClassAd::new();
        if let Some(n) = str_attr(&claim.slot_ad, classad::name!("Name")) {
            a.insert_value(classad::name!("RemoteHost"), n.as_str());
        }
        a.insert_value(classad::name!(CLAIM_ID_ATTR), claim.claim_id.as_str());
        a.insert_value(classad::name!("StartdAddr"), claim.addr.as_str());
        a
    }

    /// Activates, sending the module first if the host lacks it.
    pub(crate) async fn activate(
        &self,
        link: &Link,
        req: &ActivateRequest,
        digest: &str,
        lease: u64,
        sources: Vec<(String, std::fs::File)>,
    ) -> Result<JobReport, NotActivated> {
        let definite = |reason: String| NotActivated { reason, ambiguous: false };
        // Big input files go first, each as a stream of its own.
        for (sha, file) in sources {
            let path = format!("/v1/host/inputs/{sha}");
            let claim = [(andes_protocol::pool::CLAIM_HEADER, req.claim_id.as_str())];
            let r = link
                .long
                .upload(Method::PUT, &path, file, &claim)
                .await
                .map_err(|e| definite(format!("cannot send an input file to the host: {e}")))?;
            if !r.status.is_success() {
                return Err(definite(format!(
                    "the host refused an input file: {}",
                    r.error_reason().unwrap_or_else(|| r.status.to_string())
                )));
            }
        }
        let start = tokio::time::Instant::now();
        let mut sent_module = false;
        let mut delay = Duration::from_millis(50);
        loop {
            match link.long.call::<_, JobReport>(Method::POST, "/v1/host/activate", Some(req)).await
            {
                Ok(r) => return Ok(r),
                Err(e) if status_reason(&e) == Some((409, CLAIM_PENDING)) => {
                    // Preempting: the slot's previous job is still leaving.
                    if start.elapsed() > Duration::from_secs(lease) {
                        return Err(definite(
                            "the preempted job did not leave within the lease".into(),
                        ));
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
                Err(e) if !sent_module && status_reason(&e) == Some((409, NEED_MODULE)) => {
                    sent_module = true;
                    self.queue
                        .send_upload(&link.long, &format!("/v1/host/modules/{digest}"), digest)
                        .await
                        .map_err(|e| definite(format!("the module did not reach the host: {e}")))?;
                }
                Err(e) => {
                    return Err(match &e.kind {
                        ClientErrorKind::Status { reason, .. } => definite(reason.clone()),
                        // The request may have reached the host, and the job
                        // may run there: only the host can say.
                        _ => NotActivated {
                            reason: format!("cannot reach the host: {e}"),
                            ambiguous: true,
                        },
                    });
                }
            }
        }
    }

    /// A long poll, retried while the host does not answer, for as long as the
    /// job's lease lasts. `Err` when the claim is gone or the lease ran out.
    pub(crate) async fn wait_until_lease(
        &self,
        link: &Link,
        req: &WaitRequest,
        lease: u64,
    ) -> Result<JobReport, ()> {
        let start = tokio::time::Instant::now();
        let lease = Duration::from_secs(lease);
        let mut delay = Duration::from_millis(100);
        loop {
            match link.long.call::<_, JobReport>(Method::POST, "/v1/host/wait", Some(req)).await {
                Ok(r) => return Ok(r),
                Err(e) if not_found(&e) => return Err(()),
                Err(e) => {
                    if start.elapsed() >= lease {
                        tracing::warn!(
                            "claim {}: lease over: {e}",
                            andes_protocol::pool::public_claim_id(&req.claim_id)
                        );
                        return Err(());
                    }
                    tracing::debug!("waiting on the host: {e}");
                    tokio::time::sleep(delay.min(lease.saturating_sub(start.elapsed()))).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}
