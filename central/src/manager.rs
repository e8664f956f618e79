//! The central manager: the collector's store and the negotiator's cycle.
//!
//! A cycle takes a snapshot of the collector's slot ads (with their private
//! claim ids) and asks every schedd with idle jobs for its demand, grouped by
//! the attributes the pool's machines care about; the pure planner
//! ([`crate::negotiator::plan`]) decides; the cycle then hands each schedd its
//! matches and tells each host which slots were matched. Cycles run every
//! NEGOTIATOR_INTERVAL, and at once when the collector hears of new idle jobs
//! or a newly unclaimed slot (its [`Central::poke`]), so an idle pool starts a
//! job in milliseconds.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use andes_protocol::pool::{
    DemandReply, DemandRequest, MatchGrant, MatchNotice, MatchRejection, MatchesReply,
    MatchesRequest,
};
use andes_protocol::{Client, Clock, Keypair};
use classad::{ClassAd, Value};
use http::Method;
use tokio::sync::Notify;

use crate::collector::{AdType, Collector};
use crate::negotiator::{
    Accountant, AccountantConfig, NegotiatorConfig, Plan, Request, SlotAd, Snapshot,
    significant_attributes,
};
use crate::quarantine::{self, Quarantine, Signature};

/// Reads the central manager's configuration again (`andes reconfig`).
pub type Reload = Arc<dyn Fn() -> Result<CentralConfig, String> + Send + Sync>;

/// How the central manager is set up.
#[derive(Clone, Debug)]
pub struct CentralConfig {
    /// NEGOTIATOR_INTERVAL.
    pub interval: Duration,
    /// The planner's settings (preemption).
    pub negotiator: NegotiatorConfig,
    /// The accountant's settings.
    pub accountant: AccountantConfig,
    /// Where the accountant's state is kept across restarts (JSON), if anywhere.
    pub state_file: Option<PathBuf>,
}

/// What one cycle did.
#[derive(Clone, Debug, Default)]
pub struct CycleStats {
    /// Slots considered.
    pub slots: usize,
    /// Demand groups considered.
    pub groups: usize,
    /// Matches made.
    pub matches: usize,
    /// Matches the schedds took.
    pub taken: u32,
    /// Time spent planning.
    pub plan_time: Duration,
    /// Time the whole cycle took.
    pub total_time: Duration,
    /// Of which waiting for the schedds' answers (their demand, and whether
    /// they took their matches: a schedd claims its slots before it says).
    pub waited: Duration,
}

impl CycleStats {
    /// The cycle's own work: its time less its waits for schedds.
    pub fn busy_time(&self) -> Duration {
        self.total_time.saturating_sub(self.waited)
    }
}

/// Seconds a match handed out may wait for its schedd's claim before the
/// slot is offered again (a schedd that died, or never got the match): a
/// second claim with the same offer is refused by the host, so offering
/// again is safe; the grace only avoids offering a slot twice while its
/// claim is on its way.
pub const OFFER_GRACE: i64 = 10;

/// Seconds between two saves of the accountant's state by negotiation
/// cycles: a pool running short jobs may run many cycles a second, and a
/// central manager that stops loses at most this much of its usage
/// record. A change of a user's factor is saved at once.
pub const ACCOUNTANT_SAVE_EVERY: i64 = 10;

/// The longest a poke waits for its cycle: a burst of slots becoming
/// Unclaimed (a schedd releasing its claims) runs a few cycles, not one per
/// slot, and none waits longer than this.
pub const POKED_CYCLE_GAP: Duration = Duration::from_millis(50);

/// The negotiator's time that poked cycles may take, one part in this many
/// (kept by [`PokeBudget`]).
pub const POKED_CYCLE_SHARE: u32 = 10;

/// The work poked cycles may do back to back before their share
/// ([`POKED_CYCLE_SHARE`]) holds them back: what a few cycles of a busy
/// small pool take, so that a job submitted just after others came and went
/// (each start and release pokes a cycle) waits for none of them.
pub const POKED_CYCLE_BURST: Duration = Duration::from_millis(20);

/// What poked cycles may still spend of the negotiator's time, as a credit
/// of work: it grows by one part in [`POKED_CYCLE_SHARE`] of the time that
/// passes, up to [`POKED_CYCLE_BURST`], and every cycle spends its own work
/// ([`CycleStats::busy_time`]). A poke starts a cycle at once while there
/// is credit, else once the debt is earned back, never more than
/// [`POKED_CYCLE_GAP`] later (a debt beyond that is forgiven: a pool whose
/// one cycle takes longer than the gap still starts jobs a poke asks for
/// within it). However many pokes come, poked cycles take about a tenth
/// of the negotiator's time, plus the burst.
#[derive(Clone, Debug)]
pub struct PokeBudget {
    /// Credit of work, in nanoseconds; negative while in debt.
    credit: i128,
    /// When the credit was last brought up to date.
    at: Instant,
}

impl PokeBudget {
    /// A full budget at `now`.
    pub fn new(now: Instant) -> PokeBudget {
        PokeBudget { credit: POKED_CYCLE_BURST.as_nanos() as i128, at: now }
    }

    fn earn(&mut self, now: Instant) {
        let passed = now.saturating_duration_since(self.at).as_nanos() as i128;
        let burst = POKED_CYCLE_BURST.as_nanos() as i128;
        self.credit = (self.credit + passed / POKED_CYCLE_SHARE as i128).min(burst);
        self.at = self.at.max(now);
    }

    /// A cycle that did `work` ended at `now`.
    pub fn spend(&mut self, now: Instant, work: Duration) {
        self.earn(now);
        let floor = -((POKED_CYCLE_GAP / POKED_CYCLE_SHARE).as_nanos() as i128);
        self.credit = (self.credit - work.as_nanos() as i128).max(floor);
    }

    /// How long a poke at `now` waits before its cycle starts.
    pub fn wait(&mut self, now: Instant) -> Duration {
        self.earn(now);
        let debt = u64::try_from(-self.credit).unwrap_or(0);
        Duration::from_nanos(debt).saturating_mul(POKED_CYCLE_SHARE).min(POKED_CYCLE_GAP)
    }
}

/// A plan of at most this many (slot, request group) pairs runs on the
/// cycle's own task rather than on a blocking thread. Few enough that users'
/// expressions spending their whole evaluation budget at every pair hold the
/// runtime's thread a fraction of a second at worst (and poked cycles then
/// come that much less often); a real pool's plan goes to its own thread.
pub const INLINE_PLAN_PAIRS: usize = 16;

/// The central manager's shared state.
pub struct Central {
    /// The collector's store (its routes share it).
    pub collector: Arc<Mutex<Collector>>,
    accountant: Mutex<Accountant>,
    poke: Arc<Notify>,
    clock: Arc<dyn Clock>,
    keypair: Arc<Keypair>,
    cfg: Mutex<CentralConfig>,
    reload: Mutex<Option<Reload>>,
    clients: Mutex<HashMap<String, Client>>,
    /// Offers handed out, by slot name, with the submitter they went to and
    /// when: not offered again until the slot's claim id changes or, if
    /// nobody claimed it within [`OFFER_GRACE`], at the next cycle after;
    /// counted as that submitter's in the meantime.
    handed: Mutex<HashMap<String, (String, String, i64)>>,
    cycles: std::sync::atomic::AtomicU64,
    quarantine: Arc<Quarantine>,
    /// When cycles last saved the accountant's state.
    saved_at: Mutex<Option<i64>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn str_attr<N: classad::NameRef + ?Sized>(ad: &ClassAd, name: &N) -> Option<String> {
    match ad.eval_attr(name) {
        Value::Str(s) if !s.is_empty() => Some(s.to_string()),
        _ => None,
    }
}

impl Central {
    /// A central manager over `collector`, signing with `keypair` (role
    /// `negotiator` in every schedd's and host's trust file).
    pub fn new(
        collector: Arc<Mutex<Collector>>,
        poke: Arc<Notify>,
        clock: Arc<dyn Clock>,
        keypair: Arc<Keypair>,
        cfg: CentralConfig,
    ) -> Central {
        let mut accountant = Accountant::new(cfg.accountant);
        if let Some(f) = &cfg.state_file
            && let Ok(text) = std::fs::read_to_string(f)
        {
            match serde_json::from_str::<Accountant>(&text) {
                Ok(mut a) => {
                    a.set_config(cfg.accountant);
                    accountant = a;
                }
                Err(e) => tracing::warn!(
                    "{}: not an accountant state ({e}); starting afresh",
                    f.display()
                ),
            }
        }
        let quarantine = Arc::new(Quarantine::open(
            cfg.state_file.as_deref().and_then(|f| f.parent()),
            clock.now(),
        ));
        Central {
            quarantine,
            collector,
            accountant: Mutex::new(accountant),
            poke,
            clock,
            keypair,
            cfg: Mutex::new(cfg),
            reload: Mutex::new(None),
            clients: Mutex::new(HashMap::new()),
            handed: Mutex::new(HashMap::new()),
            cycles: std::sync::atomic::AtomicU64::new(0),
            saved_at: Mutex::new(None),
        }
    }

    /// Wakes the negotiator for a cycle now.
    pub fn poke(&self) {
        self.poke.notify_one();
    }

    /// Cycles run so far.
    pub fn cycles(&self) -> u64 {
        self.cycles.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The accountant's table (`andes userprio`).
    pub fn userprio(&self) -> Vec<crate::negotiator::UserPrioRow> {
        lock(&self.accountant).rows()
    }

    /// Sets a submitter's priority factor (`andes userprio -setfactor`).
    pub fn set_factor(&self, submitter: &str, factor: f64) -> bool {
        let ok = lock(&self.accountant).set_factor(submitter, factor);
        self.save();
        ok
    }

    fn client(&self, addr: &str) -> Option<Client> {
        let mut c = lock(&self.clients);
        if let Some(cl) = c.get(addr) {
            return Some(cl.clone());
        }
        match Client::new(&format!("http://{addr}"), self.keypair.clone()) {
            Ok(cl) => {
                let cl = cl.with_timeout(Duration::from_secs(30));
                c.insert(addr.to_string(), cl.clone());
                Some(cl)
            }
            Err(e) => {
                tracing::warn!("address {addr}: {e}");
                None
            }
        }
    }

    /// How `andes reconfig` reads the configuration again.
    pub fn set_reload(&self, reload: Reload) {
        *lock(&self.reload) = Some(reload);
    }

    /// `andes reconfig`: the negotiator's knobs read again apply from the
    /// next cycle, which starts at once; the accountant keeps every
    /// submitter's usage and factor. Returns a sentence for the caller.
    pub fn reconfigure(&self) -> Result<String, String> {
        let reload = lock(&self.reload).clone().ok_or(
            "this central manager was not started from a configuration: nothing to read again",
        )?;
        let new = reload()?;
        let mut changed = Vec::new();
        {
            let mut cfg = lock(&self.cfg);
            if new.interval != cfg.interval {
                changed.push("NEGOTIATOR_INTERVAL");
            }
            let text = |e: &Option<classad::Expr>| e.as_ref().map(|e| e.to_string());
            if text(&new.negotiator.preemption_requirements)
                != text(&cfg.negotiator.preemption_requirements)
            {
                changed.push("PREEMPTION_REQUIREMENTS");
            }
            if text(&new.negotiator.preemption_rank) != text(&cfg.negotiator.preemption_rank) {
                changed.push("PREEMPTION_RANK");
            }
            if new.negotiator.consider_preemption != cfg.negotiator.consider_preemption {
                changed.push("NEGOTIATOR_CONSIDER_PREEMPTION");
            }
            if new.accountant != cfg.accountant {
                changed.push("PRIORITY_HALFLIFE / DEFAULT_PRIO_FACTOR");
                lock(&self.accountant).set_config(new.accountant);
            }
            let state_file = cfg.state_file.clone();
            *cfg = CentralConfig { state_file, ..new };
        }
        self.poke.notify_one();
        let message = match changed.len() {
            0 => "configuration read again; no negotiator knob changed".to_string(),
            _ => format!("configuration read again; now in force: {}", changed.join(", ")),
        };
        tracing::info!("andes negotiator: {message}");
        Ok(message)
    }

    fn save(&self) {
        let Some(f) = lock(&self.cfg).state_file.clone() else { return };
        let text = match serde_json::to_string(&*lock(&self.accountant)) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("cannot save the accountant: {e}");
                return;
            }
        };
        // Atomically and durably: a crash leaves the last whole state.
        if let Err(e) = andes_beneath::replace_file(&f, text.as_bytes(), 0o644) {
            tracing::warn!("cannot save the accountant to {}: {e}", f.display());
        }
    }

    /// Runs cycles until the task is dropped.
    pub async fn run(self: Arc<Self>) {
        // tokio's clock, which a test may pause and advance.
        let now = || tokio::time::Instant::now().into_std();
        let mut budget = PokeBudget::new(now());
        loop {
            let stats = self.cycle().await;
            budget.spend(now(), stats.busy_time());
            if stats.matches > 0 {
                tracing::info!(
                    "negotiation: {} slots, {} groups, {} matches ({} taken), plan {:?}, cycle {:?}",
                    stats.slots,
                    stats.groups,
                    stats.matches,
                    stats.taken,
                    stats.plan_time,
                    stats.total_time
                );
            }
            tokio::select! {
                _ = self.poke.notified() => {
                    let wait = budget.wait(now());
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                }
                _ = tokio::time::sleep(lock(&self.cfg).interval) => {}
            }
        }
    }

    /// One negotiation cycle.
    pub async fn cycle(&self) -> CycleStats {
        let started = Instant::now();
        self.cycles.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = self.clock.now();
        let mut stats = CycleStats::default();
        let (machines, schedds) = {
            let mut c = lock(&self.collector);
            c.expire(now);
            let schedds = c.ads(AdType::Schedd, now);
            let idle = |(ad, _): &(ClassAd, Option<ClassAd>)| matches!(ad.eval_attr(classad::name!("TotalIdleJobs")), Value::Int(n) if n > 0);
            if !schedds.iter().any(idle) {
                // No idle job anywhere: nothing to match, and the slots'
                // ads need not be copied; only usage is counted.
                let machines = c.snapshot(Some(AdType::Machine), now);
                drop(c);
                let in_use = usage(machines.iter().map(|a| &**a));
                self.account(now, &in_use);
                stats.total_time = started.elapsed();
                return stats;
            }
            (c.shared_ads(AdType::Machine, now), schedds)
        };
        let mut in_use = usage(machines.iter().map(|(ad, _)| &**ad));
        // Offers still pending (handed out, not yet claimed) are skipped.
        let mut slots = Vec::new();
        {
            let mut handed = lock(&self.handed);
            let mut live = HashSet::new();
            for (ad, private) in machines {
                let Some(name) = str_attr(&ad, classad::name!("Name")) else { continue };
                let Some(claim_id) =
                    private.as_ref().and_then(|p| str_attr(p, classad::name!("ClaimId")))
                else {
                    continue;
                };
                live.insert(name.clone());
                if let Some((offer, submitter, when)) = handed.get(&name)
                    && *offer == claim_id
                    && now.saturating_sub(*when) < OFFER_GRACE
                {
                    // Matched, not yet claimed as far as the collector knows:
                    // no candidate, but the submitter's for fair share.
                    let mut ad = ad;
                    let copy = std::sync::Arc::make_mut(&mut ad);
                    copy.insert_value(classad::name!("State"), "Matched");
                    copy.insert_value(classad::name!("RemoteUser"), submitter.as_str());
                    copy.insert_value(classad::name!("RemoteOwner"), submitter.as_str());
                    *in_use.entry(submitter.clone()).or_default() += 1;
                    slots.push(SlotAd { ad, claim_id });
                    continue;
                }
                handed.remove(&name);
                slots.push(SlotAd { ad, claim_id });
            }
            handed.retain(|n, _| live.contains(n));
        }
        stats.slots = slots.len();
        let busy_schedds: Vec<(String, String)> = schedds
            .iter()
            .filter(|(ad, _)| matches!(ad.eval_attr(classad::name!("TotalIdleJobs")), Value::Int(n) if n > 0))
            .filter_map(|(ad, _)| {
                Some((
                    str_attr(ad, classad::name!("Name"))?,
                    str_attr(ad, classad::name!("MyAddress"))?,
                ))
            })
            .collect();
        // With no slots at all the cycle still runs: each idle job hears "no
        // match found" (LastRejMatchTime), which is what the job router and
        // users look at.
        if busy_schedds.is_empty() {
            self.account(now, &in_use);
            stats.total_time = started.elapsed();
            return stats;
        }
        // The slots' ads are shared with the collector, not copied, into the
        // plan's input: at 100,000 slots a copy of them costs seconds.
        let significant = significant_attributes(slots.iter().map(|s| &*s.ad));
        let mut demands = Vec::new();
        let asks: Vec<_> = busy_schedds
            .into_iter()
            .filter_map(|(name, addr)| {
                let client = self.client(&addr)?;
                let req = DemandRequest { significant: significant.clone() };
                Some(async move {
                    let r: Result<DemandReply, _> =
                        client.call(Method::POST, "/v1/negotiate/demand", Some(&req)).await;
                    (name, addr, r)
                })
            })
            .collect();
        let asked = Instant::now();
        let answers = futures_join_all(asks).await;
        stats.waited += asked.elapsed();
        for (name, addr, r) in answers {
            match r {
                Ok(d) => demands.push((name, addr, d)),
                Err(e) => tracing::warn!("schedd {name} at {addr}: no demand: {e}"),
            }
        }
        let mut requests = Vec::new();
        let mut schedd_addr: HashMap<String, String> = HashMap::new();
        for (name, addr, d) in &demands {
            schedd_addr.insert(name.clone(), addr.clone());
            for g in &d.groups {
                let Ok(ad) = classad::parse_ad(&g.ad) else { continue };
                requests.push(Request {
                    schedd: name.clone(),
                    submitter: g.submitter.clone(),
                    autocluster: g.autocluster,
                    ad,
                    idle: g.idle,
                });
            }
        }
        // Quarantined requests are not evaluated: their schedds hear so.
        let mut per: HashMap<String, MatchesRequest> = HashMap::new();
        let mut sigs = Vec::with_capacity(requests.len());
        requests.retain(|r| {
            let sig = Signature::of(r);
            let Some(why) = self.quarantine.why(sig, r) else {
                sigs.push(sig);
                return true;
            };
            tell_quarantined(&mut per, r, why);
            false
        });
        stats.groups = requests.len();
        let snapshot = Snapshot { slots, requests };
        let accountant = lock(&self.accountant).clone();
        let ncfg = lock(&self.cfg).negotiator.clone();
        let t = Instant::now();
        let q = self.quarantine.clone();
        let plan = move || {
            let watch = q.watch(&snapshot.requests, &sigs);
            let plan = crate::negotiator::plan_watched(&snapshot, &accountant, &ncfg, now, &watch);
            (snapshot, sigs, plan)
        };
        // A small plan (a personal pool, a few groups) takes microseconds:
        // handing it to a blocking thread and back would take longer. A
        // panic is contained either way.
        let small = stats.slots.saturating_mul(stats.groups) <= INLINE_PLAN_PAIRS;
        let planned = if small {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(plan))
                .map_err(|_| "the planner panicked".to_string())
        } else {
            tokio::task::spawn_blocking(plan).await.map_err(|e| e.to_string())
        };
        let (snapshot, sigs, plan): (Snapshot, Vec<Signature>, Plan) = match planned {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("the negotiation planner failed: {e}");
                stats.total_time = started.elapsed();
                return stats;
            }
        };
        // What failed is quarantined now; the rest is known to be harmless.
        for &r in &plan.failed {
            let (Some(req), Some(sig)) = (snapshot.requests.get(r), sigs.get(r)) else { continue };
            tracing::error!(
                "matching a request of {} from schedd {} failed: quarantining it",
                req.submitter,
                req.schedd
            );
            self.quarantine.add(
                *sig,
                req.schedd.clone(),
                req.submitter.clone(),
                now,
                quarantine::FAILED.to_string(),
            );
            tell_quarantined(&mut per, req, quarantine::FAILED.to_string());
        }
        self.quarantine.passed(
            sigs.iter()
                .enumerate()
                .filter(|(r, _)| plan.failed.binary_search(r).is_err())
                .map(|(_, s)| *s),
        );
        stats.plan_time = t.elapsed();
        stats.matches = plan.matches.len();
        // Group by schedd.
        let mut notices = Vec::new();
        // Each match's slot and offer: a match its schedd does not take
        // frees its slot again below.
        let mut offered = Vec::new();
        {
            let mut handed = lock(&self.handed);
            for m in &plan.matches {
                let Some(req) = snapshot.requests.get(m.request) else { continue };
                let Some(slot) = snapshot.slots.get(m.slot_index) else { continue };
                let Some(host) = str_attr(&slot.ad, classad::name!("MyAddress")) else { continue };
                let name = str_attr(&slot.ad, classad::name!("Name")).unwrap_or_default();
                handed.insert(name.clone(), (slot.claim_id.clone(), req.submitter.clone(), now));
                offered.push((name.clone(), slot.claim_id.clone()));
                *in_use.entry(req.submitter.clone()).or_default() += 1;
                per.entry(req.schedd.clone()).or_default().matches.push(MatchGrant {
                    autocluster: req.autocluster,
                    slot_ad: slot.ad.to_string(),
                    claim_id: slot.claim_id.clone(),
                    host_address: host.clone(),
                    preempting: m.preempting.is_some(),
                });
                // Preempting, and not because the machine's RANK prefers the
                // job: by user priority, which only the negotiator may say.
                let current = match slot.ad.eval_attr(classad::name!("CurrentRank")) {
                    classad::Value::Int(i) => i as f64,
                    classad::Value::Real(r) => r,
                    _ => 0.0,
                };
                let priority = m.preempting.is_some() && m.machine_rank <= current;
                notices.push((
                    host,
                    MatchNotice { slot: name, claim_id: slot.claim_id.clone(), priority },
                ));
            }
            for r in &plan.rejections {
                if plan.failed.binary_search(&r.request).is_ok() {
                    continue;
                }
                let Some(req) = snapshot.requests.get(r.request) else { continue };
                per.entry(req.schedd.clone()).or_default().rejections.push(MatchRejection {
                    autocluster: req.autocluster,
                    reason: r.reason.clone(),
                    quarantined: false,
                });
            }
        }
        let sends = per.into_iter().filter_map(|(schedd, req)| {
            let addr = schedd_addr.get(&schedd)?.clone();
            let client = self.client(&addr)?;
            Some(async move {
                let r: Result<MatchesReply, _> =
                    client.call(Method::POST, "/v1/negotiate/matches", Some(&req)).await;
                (schedd, r)
            })
        });
        let mut claimed = HashSet::new();
        let sent = Instant::now();
        let answers = futures_join_all(sends).await;
        stats.waited += sent.elapsed();
        for (schedd, r) in answers {
            match r {
                Ok(r) => {
                    stats.taken += r.taken;
                    claimed.extend(r.claimed);
                }
                Err(e) => tracing::warn!("schedd {schedd}: matches not delivered: {e}"),
            }
        }
        // A match not delivered or not taken leaves its slot free for the
        // next cycle (its job may have gone to a claim its schedd already
        // held): it must not wait out OFFER_GRACE, idle while jobs wait.
        {
            let mut handed = lock(&self.handed);
            for (name, offer) in &offered {
                if !claimed.contains(offer) && handed.get(name).is_some_and(|(o, _, _)| o == offer)
                {
                    handed.remove(name);
                }
            }
        }
        // The hosts hear of the matches their schedds took (Matched,
        // MATCH_TIMEOUT). A lost notice only skips the Matched state.
        for (host, notice) in notices {
            if !claimed.contains(&notice.claim_id) {
                continue;
            }
            if let Some(c) = self.client(&host) {
                tokio::spawn(async move {
                    if let Err(e) = c.post_json("/v1/host/match", &notice).await {
                        tracing::debug!("match notice to {host}: {e}");
                    }
                });
            }
        }
        self.account(now, &in_use);
        stats.total_time = started.elapsed();
        stats
    }

    fn account(&self, now: i64, in_use: &HashMap<String, u32>) {
        lock(&self.accountant).update(now, in_use);
        let due = {
            let mut at = lock(&self.saved_at);
            let due = at.is_none_or(|t| now.saturating_sub(t) >= ACCOUNTANT_SAVE_EVERY);
            if due {
                *at = Some(now);
            }
            due
        };
        if due {
            self.save();
        }
    }
}

/// Usage, for fair share: claimed slots by their user.
fn usage<'a>(machines: impl Iterator<Item = &'a ClassAd>) -> HashMap<String, u32> {
    let mut in_use: HashMap<String, u32> = HashMap::new();
    for ad in machines {
        if str_attr(ad, classad::name!("State")).as_deref() == Some("Claimed")
            && let Some(u) = str_attr(ad, classad::name!("RemoteOwner"))
                .or_else(|| str_attr(ad, classad::name!("RemoteUser")))
        {
            *in_use.entry(u).or_default() += 1;
        }
    }
    in_use
}

/// Tells `req`'s schedd, with the matches it gets, that `req` is quarantined
/// (`why`): it holds the request's idle jobs.
fn tell_quarantined(per: &mut HashMap<String, MatchesRequest>, req: &Request, why: String) {
    per.entry(req.schedd.clone()).or_default().rejections.push(MatchRejection {
        autocluster: req.autocluster,
        reason: why,
        quarantined: true,
    });
}

/// Runs futures concurrently and collects their outputs (in completion order).
async fn futures_join_all<F: std::future::Future + Send + 'static>(
    futs: impl IntoIterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for f in futs {
        set.spawn(f);
    }
    let mut out = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(v) = r {
            out.push(v);
        }
    }
    out
}

/// `GET /v1/negotiator/userprio` answers the accountant's table.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct UserPrioReply {
    /// One row per submitter.
    pub rows: Vec<crate::negotiator::UserPrioRow>,
}

/// `POST /v1/negotiator/setfactor` (admin).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SetFactorRequest {
    /// The submitter.
    pub submitter: String,
    /// The new priority factor (>= 1).
    pub factor: f64,
}

/// The negotiator's routes: `GET /v1/negotiator/userprio` (any trusted
/// caller), `POST /v1/negotiator/setfactor` and `POST
/// /v1/negotiator/reconfig` (admin).
pub fn router(central: Arc<Central>, auth: &andes_protocol::Auth) -> axum::Router {
    routes(central, auth).router
}

/// [`router`] with who may call each route.
pub fn routes(
    central: Arc<Central>,
    auth: &andes_protocol::Auth,
) -> andes_protocol::routes::Served {
    use andes_protocol::{ApiError, Role, SignedJson};
    use axum::extract::State;
    use axum::routing::{get, post};
    async fn userprio(State(c): State<Arc<Central>>) -> axum::Json<UserPrioReply> {
        axum::Json(UserPrioReply { rows: c.userprio() })
    }
    async fn setfactor(
        State(c): State<Arc<Central>>,
        SignedJson(req): SignedJson<SetFactorRequest>,
    ) -> Result<axum::http::StatusCode, ApiError> {
        if !(req.factor.is_finite() && req.factor >= 1.0) {
            return Err(ApiError::bad_request(format!(
                "a priority factor is a number >= 1, not {}",
                req.factor
            )));
        }
        if !c.set_factor(&req.submitter, req.factor) {
            return Err(ApiError::not_found(format!("no submitter {}", req.submitter)));
        }
        Ok(axum::http::StatusCode::NO_CONTENT)
    }
    async fn reconfig(
        State(c): State<Arc<Central>>,
        SignedJson(_): SignedJson<serde_json::Value>,
    ) -> Result<axum::Json<serde_json::Value>, ApiError> {
        let message = c.reconfigure().map_err(ApiError::bad_request)?;
        Ok(axum::Json(serde_json::json!({ "message": message })))
    }
    use axum::http::Method as M;
    let anyone = &[Role::User, Role::Schedd, Role::Host, Role::Negotiator];
    andes_protocol::routes::Api::new()
        .route(M::GET, "/v1/negotiator/userprio", anyone, get(userprio))
        .route(M::POST, "/v1/negotiator/setfactor", &[Role::Admin], post(setfactor))
        .route(M::POST, "/v1/negotiator/reconfig", &[Role::Admin], post(reconfig))
        .finish(auth, central)
}
