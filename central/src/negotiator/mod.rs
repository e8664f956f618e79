//! The negotiator: one matchmaking cycle as a pure function.
//!
//! [`plan`] takes a [`Snapshot`] of the pool (slot ads and the schedds'
//! resource requests, one per autocluster), the [`Accountant`]'s user
//! priorities and the configuration, and returns a [`Plan`]: which request
//! gets which slot (possibly preempting its current claim), and why the
//! rest got nothing. It reads no clock and does no I/O; the central manager
//! applies the plan. Autoclusters ([`autocluster`]) are what keep its cost
//! at requests × slots rather than jobs × slots; slots whose match-relevant
//! attributes are equal are evaluated once as a group.

pub mod accountant;
pub mod autocluster;
mod refs;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

use classad::{AttrName, ClassAd, EvalOptions, Evaluator, Expr};

pub use accountant::{Accountant, AccountantConfig, UserPrioRow};
pub use autocluster::{Autoclusters, significant_attributes};

/// One slot as the collector has it.
#[derive(Clone)]
pub struct SlotAd {
    /// The machine (slot) ad: Name, State, Activity, Requirements, Rank,
    /// and, when claimed, RemoteUser, RemoteOwner and CurrentRank. Shared
    /// with the collector's copy: a cycle takes the ads, not copies of them.
    pub ad: std::sync::Arc<ClassAd>,
    /// The slot's claim id: secret, handed only to the matched schedd.
    pub claim_id: String,
}

impl std::fmt::Debug for SlotAd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotAd").field("ad", &self.ad).field("claim_id", &"<secret>").finish()
    }
}

/// One resource request: a schedd's idle jobs of one submitter and one
/// autocluster.
#[derive(Clone, Debug)]
pub struct Request {
    /// The schedd's name.
    pub schedd: String,
    /// The submitter, `owner@domain`.
    pub submitter: String,
    /// The autocluster id (the schedd's).
    pub autocluster: u32,
    /// A representative job ad (`$$()` not expanded).
    pub ad: ClassAd,
    /// How many idle jobs it stands for.
    pub idle: u32,
}

/// What one cycle sees.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Every slot.
    pub slots: Vec<SlotAd>,
    /// Every resource request, in each schedd's order of preference.
    pub requests: Vec<Request>,
}

/// The negotiator's knobs.
#[derive(Clone, Debug)]
pub struct NegotiatorConfig {
    /// PREEMPTION_REQUIREMENTS (MY = the slot, TARGET = the job;
    /// `SubmitterUserPrio` and `RemoteUserPrio` are provided). `None` is
    /// False: no preemption by user priority.
    pub preemption_requirements: Option<Expr>,
    /// NEGOTIATOR_CONSIDER_PREEMPTION (default true): false makes claimed
    /// slots never candidates.
    pub consider_preemption: bool,
    /// PREEMPTION_RANK: among preemption candidates otherwise equal, the
    /// higher is preferred.
    pub preemption_rank: Option<Expr>,
    /// The most matches one cycle hands out (`None`: no limit).
    pub max_matches_per_cycle: Option<u32>,
}

impl Default for NegotiatorConfig {
    fn default() -> Self {
        NegotiatorConfig {
            preemption_requirements: None,
            consider_preemption: true,
            preemption_rank: None,
            max_matches_per_cycle: None,
        }
    }
}

/// One job of a request given one slot.
#[derive(Clone, PartialEq)]
pub struct Match {
    /// The request's index in [`Snapshot::requests`].
    pub request: usize,
    /// The request's schedd.
    pub schedd: String,
    /// The request's submitter.
    pub submitter: String,
    /// The request's autocluster.
    pub autocluster: u32,
    /// The slot's Name.
    pub slot: String,
    /// The slot's index in [`Snapshot::slots`].
    pub slot_index: usize,
    /// The slot's claim id (secret).
    pub claim_id: String,
    /// The RemoteUser whose claim this match preempts, if any.
    pub preempting: Option<String>,
    /// The job's Rank of the slot.
    pub job_rank: f64,
    /// The slot's Rank of the job.
    pub machine_rank: f64,
}

impl std::fmt::Debug for Match {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Match")
            .field("request", &self.request)
            .field("schedd", &self.schedd)
            .field("submitter", &self.submitter)
            .field("autocluster", &self.autocluster)
            .field("slot", &self.slot)
            .field("slot_index", &self.slot_index)
            .field("claim_id", &"<secret>")
            .field("preempting", &self.preempting)
            .field("job_rank", &self.job_rank)
            .field("machine_rank", &self.machine_rank)
            .finish()
    }
}

/// Why (some of) a request's jobs got no slot.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejection {
    /// The request's index in [`Snapshot::requests`].
    pub request: usize,
    /// The request's schedd.
    pub schedd: String,
    /// The request's submitter.
    pub submitter: String,
    /// The request's autocluster.
    pub autocluster: u32,
    /// How many of its idle jobs got nothing.
    pub unmatched: u32,
    /// HTCondor's words: [`NO_MATCH`], [`INSUFFICIENT_PRIORITY`] or
    /// [`MATCH_LIMIT`].
    pub reason: String,
}

/// No slot matches (or every one that did was taken).
pub const NO_MATCH: &str = "no match found";
/// Slots match, but the submitter has used its fair share.
pub const INSUFFICIENT_PRIORITY: &str = "insufficient priority";
/// The cycle's match limit was reached first.
pub const MATCH_LIMIT: &str = "negotiation cycle match limit reached";

/// Counters of one cycle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlanStats {
    /// Requests with idle jobs.
    pub requests: usize,
    /// Slots in the snapshot.
    pub slots: usize,
    /// Slots that could be candidates (unclaimed, backfill or claimed).
    pub candidate_slots: usize,
    /// Groups of candidate slots with equal match-relevant attributes.
    pub slot_groups: usize,
    /// (request, slot group) pairs evaluated: each at most once.
    pub pair_evaluations: usize,
    /// Matches made.
    pub matches: usize,
    /// Of which preempt a claim.
    pub preemptions: usize,
    /// Spins of the pie.
    pub spins: usize,
    /// Steps spent picking slots within tiers of equal candidates (pops
    /// and pushes of each request's heap): about (matches + candidate
    /// groups) × a small factor, not matches × groups.
    pub picks: usize,
}

/// The outcome of one cycle.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// One per matched job.
    pub matches: Vec<Match>,
    /// One per request with jobs left unmatched.
    pub rejections: Vec<Rejection>,
    /// Requests whose evaluation failed (a panic in the evaluator, caught):
    /// unmatched, and rejected as having no match; the caller quarantines
    /// them so that they are not evaluated again.
    pub failed: Vec<usize>,
    /// Counters.
    pub stats: PlanStats,
}

/// What the planner tells its caller as it evaluates the requests (the
/// central manager writes it into its journal, [`crate::quarantine`]), and
/// which requests it may evaluate beside others.
pub trait Watch: Sync {
    /// Whether request `r` was evaluated before without harm. The others
    /// are evaluated one at a time, before any thread starts, so that an
    /// input that stops the process is the only one named when it does.
    fn known(&self, r: usize) -> bool;
    /// Request `r` is about to be evaluated on `thread`; `alone` when
    /// nothing else is being evaluated meanwhile.
    fn enter(&self, thread: usize, r: usize, alone: bool);
    /// `thread` finished evaluating its request.
    fn leave(&self, thread: usize);
}

/// A [`Watch`] that watches nothing: every request is known.
pub struct Unwatched;

impl Watch for Unwatched {
    fn known(&self, _: usize) -> bool {
        true
    }
    fn enter(&self, _: usize, _: usize, _: bool) {}
    fn leave(&self, _: usize) {}
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SlotClass {
    /// Unclaimed or Backfill: free to match.
    Free,
    /// Claimed: a candidate for preemption.
    Claimed,
    /// Held by someone but not a candidate (Matched, Preempting, or
    /// Claimed where nothing could preempt it: see [`preemptible`]).
    Held,
    /// Owner, Drained, anything else: outside the pie.
    Out,
}

fn classify(state: &str) -> SlotClass {
    match state {
        s if s.eq_ignore_ascii_case("Unclaimed") || s.eq_ignore_ascii_case("Backfill") => {
            SlotClass::Free
        }
        s if s.eq_ignore_ascii_case("Claimed") => SlotClass::Claimed,
        s if s.eq_ignore_ascii_case("Matched") || s.eq_ignore_ascii_case("Preempting") => {
            SlotClass::Held
        }
        _ => SlotClass::Out,
    }
}

/// Whether some request could preempt the claim on a Claimed slot this
/// cycle. Not when preemption is not considered; nor, without
/// PREEMPTION_REQUIREMENTS, when the slot's Rank (`rank_seed`) reads
/// nothing of a job and is no higher than its CurrentRank, since only a
/// strictly higher Rank preempts then. Such a slot is held, and no request
/// is evaluated against it: a full pool with a queue would otherwise cost
/// each cycle its requests × its claimed slots, to find nothing.
fn preemptible(
    ev: &mut Evaluator,
    cfg: &NegotiatorConfig,
    ad: &ClassAd,
    rank_seed: &[AttrName],
) -> bool {
    if !cfg.consider_preemption {
        return false;
    }
    if cfg.preemption_requirements.is_some() {
        return true;
    }
    let reads = refs::names(ad, rank_seed, &[]);
    if reads.opaque || !reads.other.is_empty() {
        return true;
    }
    let rank = rank_seed
        .first()
        .and_then(|n| ad.lookup(n))
        .map_or(0.0, |e| finite(ev.eval(e, Some(ad), None).as_real().unwrap_or(0.0)));
    let current =
        finite(ev.eval_attr(ad, None, classad::name!("CurrentRank")).as_real().unwrap_or(0.0));
    rank > current
}

/// The string value of `attr` (an attribute reference) in `ad`.
fn string_attr(ev: &mut Evaluator, ad: &ClassAd, attr: &Expr) -> Option<String> {
    ev.eval(attr, Some(ad), None).as_str().map(str::to_string)
}

/// Slots with equal match-relevant attributes.
struct Group {
    /// The representative slot.
    rep: usize,
    claimed: bool,
    current_rank: f64,
    remote_user: Option<String>,
    /// Member slots sorted by name, and how many are used.
    members: Vec<usize>,
    used: usize,
}

/// How a request may take a group's slots.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    group: u32,
    job_rank: f64,
    machine_rank: f64,
    preempt: bool,
    preemption_rank: f64,
}

fn finite(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x }
}

fn holds(ev: &mut Evaluator, req: &AttrName, ad: &ClassAd, other: &ClassAd) -> bool {
    match ad.lookup(req) {
        Some(e) => ev.eval(e, Some(ad), Some(other)).as_bool() == Some(true),
        None => false,
    }
}

/// `ad`'s Rank of `other` as [`classad::matching::rank_with`] has it (a
/// number, else 0), with a prepared name.
fn rank(ev: &mut Evaluator, name: &AttrName, ad: &ClassAd, other: &ClassAd) -> f64 {
    match ad.lookup(name) {
        Some(e) => finite(ev.eval(e, Some(ad), Some(other)).as_real().unwrap_or(0.0)),
        None => 0.0,
    }
}

struct Ctx<'a> {
    snap: &'a Snapshot,
    cfg: &'a NegotiatorConfig,
    accountant: &'a Accountant,
    groups: &'a [Group],
    reps: Vec<&'a ClassAd>,
    now: i64,
}

impl Ctx<'_> {
    fn evaluator(&self) -> Evaluator {
        Evaluator::with_options(EvalOptions {
            strict: false,
            now: Some(self.now),
            seed: Some(self.now as u64),
            ..Default::default()
        })
    }

    /// Every candidate group of request `r`, best first.
    fn candidates(
        &self,
        ev: &mut Evaluator,
        r: usize,
        augmented: &mut HashMap<u32, ClassAd>,
    ) -> Vec<Candidate> {
        let Some(req) = self.snap.requests.get(r) else { return Vec::new() };
        let job = &req.ad;
        let requirements = AttrName::new("Requirements");
        let rank_name = AttrName::new("Rank");
        let Some(job_req) = job.lookup(&requirements) else { return Vec::new() };
        let mut pass = Vec::new();
        ev.scan(job_req, job, &self.reps, |gi, v| {
            if v.as_bool() == Some(true) {
                pass.push(gi);
            }
        });
        let submitter_prio = self.accountant.effective(&req.submitter);
        let mut out = Vec::with_capacity(pass.len());
        for gi in pass {
            let (Some(g), Some(slot)) = (self.groups.get(gi), self.reps.get(gi)) else { continue };
            if !holds(ev, &requirements, slot, job) {
                continue;
            }
            let job_rank = rank(ev, &rank_name, job, slot);
            let machine_rank = rank(ev, &rank_name, slot, job);
            let mut c = Candidate {
                group: gi as u32,
                job_rank,
                machine_rank,
                preempt: g.claimed,
                preemption_rank: 0.0,
            };
            if g.claimed {
                if !self.cfg.consider_preemption {
                    continue;
                }
                let by_rank = machine_rank > g.current_rank;
                let need_prio = !by_rank;
                if need_prio
                    && (machine_rank < g.current_rank
                        || g.remote_user.as_deref() == Some(req.submitter.as_str())
                        || self.cfg.preemption_requirements.is_none())
                {
                    continue;
                }
                let needs_aug = need_prio || self.cfg.preemption_rank.is_some();
                if needs_aug {
                    let aug = augmented.entry(gi as u32).or_insert_with(|| {
                        let mut a = (*slot).clone();
                        let remote = g.remote_user.as_deref().unwrap_or("");
                        a.insert_value(
                            classad::name!("RemoteUserPrio"),
                            self.accountant.effective(remote),
                        );
                        a
                    });
                    aug.insert_value(classad::name!("SubmitterUserPrio"), submitter_prio);
                    if need_prio {
                        let ok = self.cfg.preemption_requirements.as_ref().is_some_and(|e| {
                            ev.eval(e, Some(aug), Some(job)).as_bool() == Some(true)
                        });
                        if !ok {
                            continue;
                        }
                    }
                    if let Some(e) = &self.cfg.preemption_rank {
                        c.preemption_rank =
                            finite(ev.eval(e, Some(aug), Some(job)).as_real().unwrap_or(0.0));
                    }
                }
            }
            out.push(c);
        }
        let groups = self.groups;
        let first_name = |c: &Candidate| {
            groups.get(c.group as usize).and_then(|g| g.members.first().copied()).unwrap_or(0)
        };
        out.sort_by(|a, b| {
            b.job_rank
                .total_cmp(&a.job_rank)
                .then(b.machine_rank.total_cmp(&a.machine_rank))
                .then(a.preempt.cmp(&b.preempt))
                .then(b.preemption_rank.total_cmp(&a.preemption_rank))
                .then(first_name(a).cmp(&first_name(b)))
        });
        out
    }
}

fn same_tier(a: &Candidate, b: &Candidate) -> bool {
    a.job_rank.total_cmp(&b.job_rank).is_eq()
        && a.machine_rank.total_cmp(&b.machine_rank).is_eq()
        && a.preempt == b.preempt
        && a.preemption_rank.total_cmp(&b.preemption_rank).is_eq()
}

/// The lowercase names of the slot attributes that can affect a match
/// with any of `requests`, and whether a job reads its target in a way
/// the walker cannot name.
fn slot_side_names(requests: &[Request]) -> (BTreeSet<String>, bool) {
    let mut names = BTreeSet::new();
    let mut opaque = false;
    for r in requests {
        let c = refs::closure(&r.ad, ["Requirements", "Rank"], []);
        opaque |= c.opaque;
        names.extend(c.other);
    }
    (names, opaque)
}

/// Groups candidate slots whose match-relevant attributes have equal text.
fn group_slots(
    snap: &Snapshot,
    cfg: &NegotiatorConfig,
    classes: &[SlotClass],
    names: &[String],
    ev: &mut Evaluator,
) -> Vec<Group> {
    let (job_side, job_opaque) = slot_side_names(&snap.requests);
    let mut seeds: Vec<AttrName> = job_side.iter().map(|n| AttrName::new(n)).collect();
    for n in ["Requirements", "Rank", "State", "CurrentRank", "RemoteUser"] {
        let n = AttrName::new(n);
        if !seeds.contains(&n) {
            seeds.push(n);
        }
    }
    let extra: Vec<&Expr> =
        cfg.preemption_requirements.iter().chain(cfg.preemption_rank.iter()).collect();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    let mut key = String::new();
    for (i, slot) in snap.slots.iter().enumerate() {
        let class = classes.get(i).copied().unwrap_or(SlotClass::Out);
        if !matches!(class, SlotClass::Free | SlotClass::Claimed) {
            continue;
        }
        key.clear();
        let c = refs::names(&slot.ad, &seeds, &extra);
        if job_opaque || c.opaque {
            key.push_str(&format!("\u{2}{i}"));
        } else {
            for n in &c.local {
                key.extend(n.as_str().chars().map(|c| c.to_ascii_lowercase()));
                match slot.ad.lookup(n) {
                    Some(e) => {
                        key.push('=');
                        classad::unparse::expr_to(&mut key, e);
                    }
                    None => key.push('\u{0}'),
                }
                key.push('\n');
            }
        }
        key.push(if class == SlotClass::Claimed { 'C' } else { 'F' });
        let gi = match index.get(&key) {
            Some(g) => *g,
            None => {
                let claimed = class == SlotClass::Claimed;
                let current_rank = if claimed {
                    finite(
                        ev.eval_attr(&slot.ad, None, classad::name!("CurrentRank"))
                            .as_real()
                            .unwrap_or(0.0),
                    )
                } else {
                    0.0
                };
                let remote_user = if claimed {
                    string_attr(ev, &slot.ad, &Expr::attr("RemoteUser"))
                } else {
                    None
                };
                groups.push(Group {
                    rep: i,
                    claimed,
                    current_rank,
                    remote_user,
                    members: Vec::new(),
                    used: 0,
                });
                index.insert(key.clone(), groups.len() - 1);
                groups.len() - 1
            }
        };
        if let Some(g) = groups.get_mut(gi) {
            g.members.push(i);
        }
    }
    let name_of = |i: &usize| names.get(*i).map(String::as_str).unwrap_or("");
    for g in &mut groups {
        g.members.sort_by(|a, b| name_of(a).cmp(name_of(b)).then(a.cmp(b)));
        if let Some(first) = g.members.first() {
            g.rep = *first;
        }
    }
    groups
}

struct SubmitterState {
    name: String,
    weight: f64,
    effective: f64,
    quota: f64,
    done: bool,
    requests: Vec<usize>,
}

/// Plans one negotiation cycle. Pure: `now` (Unix seconds) is the clock
/// for `time()` in expressions.
///
/// Rules: a slot and a request match when both Requirements hold (each ad
/// as MY against the other as TARGET). A request's candidates are ordered
/// by the job's Rank, then the slot's Rank (both higher first), then
/// unclaimed before preemption, then PREEMPTION_RANK, then slot name.
/// Unclaimed and Backfill slots are candidates; a Claimed slot is one only
/// when `consider_preemption` and either its Rank of the job beats its
/// `CurrentRank`, or (at equal rank, another submitter) PREEMPTION_REQUIREMENTS
/// holds. Each slot is matched at most once. Submitters share the pool's
/// slots in proportion to 1/effective priority (their slots in use count
/// against their share), taking turns best priority first; unused share
/// goes round again to those with demand left.
pub fn plan(input: &Snapshot, accountant: &Accountant, cfg: &NegotiatorConfig, now: i64) -> Plan {
    plan_watched(input, accountant, cfg, now, &Unwatched)
}

/// [`plan`], telling `watch` which request is being evaluated on which
/// thread, evaluating the requests it does not know one at a time first,
/// and catching a panic in the evaluation of any one request (that request
/// is listed in [`Plan::failed`]; the others are planned as if it had no
/// match).
pub fn plan_watched(
    input: &Snapshot,
    accountant: &Accountant,
    cfg: &NegotiatorConfig,
    now: i64,
    watch: &dyn Watch,
) -> Plan {
    let mut ev = Evaluator::with_options(EvalOptions {
        strict: false,
        now: Some(now),
        seed: Some(now as u64),
        ..Default::default()
    });
    let mut stats = PlanStats { slots: input.slots.len(), ..PlanStats::default() };

    // The slots: class, name, holder.
    let mut classes = Vec::with_capacity(input.slots.len());
    let mut names = Vec::with_capacity(input.slots.len());
    let mut holders: HashMap<String, u32> = HashMap::new();
    let mut held_total: u64 = 0;
    let mut pool: u64 = 0;
    let (state_e, name_e, user_e) =
        (Expr::attr("State"), Expr::attr("Name"), Expr::attr("RemoteUser"));
    let rank_seed = [AttrName::new("Rank")];
    for s in &input.slots {
        let class = match string_attr(&mut ev, &s.ad, &state_e).map(|st| classify(&st)) {
            // Claimed, but no request can take it this cycle: held.
            Some(SlotClass::Claimed) if !preemptible(&mut ev, cfg, &s.ad, &rank_seed) => {
                SlotClass::Held
            }
            c => c.unwrap_or(SlotClass::Out),
        };
        names.push(string_attr(&mut ev, &s.ad, &name_e).unwrap_or_default());
        if class != SlotClass::Out {
            pool += 1;
        }
        if matches!(class, SlotClass::Claimed | SlotClass::Held) {
            held_total += 1;
            if let Some(u) = string_attr(&mut ev, &s.ad, &user_e) {
                *holders.entry(u).or_default() += 1;
            }
        }
        classes.push(class);
    }
    stats.candidate_slots =
        classes.iter().filter(|c| matches!(c, SlotClass::Free | SlotClass::Claimed)).count();

    let mut groups = group_slots(input, cfg, &classes, &names, &mut ev);
    stats.slot_groups = groups.len();

    // Demand.
    let active_requests: Vec<usize> =
        (0..input.requests.len()).filter(|r| input.requests[*r].idle > 0).collect();
    stats.requests = active_requests.len();

    // Every (request, group) pair, evaluated once, both cores.
    let mut failed = Vec::new();
    let candidates: Vec<Vec<Candidate>> = {
        let ctx = Ctx {
            snap: input,
            cfg,
            accountant,
            groups: &groups,
            reps: groups.iter().filter_map(|g| input.slots.get(g.rep).map(|s| &*s.ad)).collect(),
            now,
        };
        let mut all: Vec<Vec<Candidate>> = vec![Vec::new(); input.requests.len()];
        let (known, new): (Vec<usize>, Vec<usize>) =
            active_requests.iter().copied().partition(|r| watch.known(*r));
        let work = known.len() * groups.len();
        // Asked only for a large plan: the answer reads the cgroup's files,
        // a cost a small pool's every cycle would pay.
        let threads = if work < 20_000 {
            1
        } else {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
            cores.min(known.len().max(1))
        };
        // Interleave so each thread gets a fair mix of requests.
        let mut chunks: Vec<(usize, bool, Vec<usize>)> = (0..threads)
            .map(|t| (t, threads == 1, known.iter().copied().skip(t).step_by(threads).collect()))
            .collect();
        // What was never evaluated goes first, alone.
        chunks.insert(0, (0, true, new));
        let run = |(thread, alone, chunk): &(usize, bool, Vec<usize>)| {
            let mut ev = ctx.evaluator();
            let mut aug = HashMap::new();
            let mut out = Vec::with_capacity(chunk.len());
            for &r in chunk {
                let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    watch.enter(*thread, r, *alone);
                    ctx.candidates(&mut ev, r, &mut aug)
                }));
                watch.leave(*thread);
                // A failed evaluation (`None`) may have left the evaluator's
                // caches half-written.
                if got.is_err() {
                    ev = ctx.evaluator();
                    aug.clear();
                }
                out.push((r, got.ok()));
            }
            out
        };
        let mut results = vec![run(&chunks[0])];
        let rest = &chunks[1..];
        if rest.len() == 1 {
            results.push(run(&rest[0]));
        } else {
            results.extend(std::thread::scope(|s| {
                let handles: Vec<_> = rest.iter().map(|c| s.spawn(|| run(c))).collect::<Vec<_>>();
                // `run` catches every panic of an evaluation; a thread that
                // still fails leaves its requests unmatched this cycle.
                handles.into_iter().map(|h| h.join().unwrap_or_default()).collect::<Vec<_>>()
            }));
        }
        for (r, cands) in results.into_iter().flatten() {
            match cands {
                Some(cands) => {
                    if let Some(slot) = all.get_mut(r) {
                        *slot = cands;
                    }
                }
                None => failed.push(r),
            }
        }
        all
    };
    stats.pair_evaluations = active_requests.len() * groups.len();

    // The submitters with demand, best priority first.
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    let mut subs: Vec<SubmitterState> = Vec::new();
    for &r in &active_requests {
        let req = &input.requests[r];
        let i = *by_name.entry(req.submitter.as_str()).or_insert_with(|| {
            let effective = accountant.effective(&req.submitter);
            let effective = if effective.is_finite() { effective.max(1e-6) } else { 1e300 };
            subs.push(SubmitterState {
                name: req.submitter.clone(),
                weight: 1.0 / effective,
                effective,
                quota: 0.0,
                done: false,
                requests: Vec::new(),
            });
            subs.len() - 1
        });
        if let Some(s) = subs.get_mut(i) {
            s.requests.push(r);
        }
    }
    subs.sort_by(|a, b| a.effective.total_cmp(&b.effective).then_with(|| a.name.cmp(&b.name)));
    let total_weight: f64 = subs.iter().map(|s| s.weight).sum();
    for s in &mut subs {
        let share = pool as f64 * s.weight / total_weight;
        let used = f64::from(holders.get(&s.name).copied().unwrap_or(0));
        s.quota = (share - used).max(0.0);
    }

    let mut remaining: Vec<u32> = input.requests.iter().map(|r| r.idle).collect();
    let mut cursor: Vec<Cursor> =
        std::iter::repeat_with(Cursor::default).take(input.requests.len()).collect();
    // Each slot's place in the order of all slots by name (then index).
    let mut by_name_order: Vec<usize> = (0..input.slots.len()).collect();
    by_name_order.sort_by(|a, b| names[*a].cmp(&names[*b]).then(a.cmp(b)));
    let mut by_name = vec![0u32; input.slots.len()];
    for (place, slot) in by_name_order.into_iter().enumerate() {
        by_name[slot] = place as u32;
    }
    let mut matches: Vec<Match> = Vec::new();
    let limit = cfg.max_matches_per_cycle.map_or(usize::MAX, |m| m as usize);
    let mut limited = false;
    const EPS: f64 = 1e-9;
    let max_spins = input.slots.len() + subs.len() + 2;

    while stats.spins < max_spins && !limited {
        stats.spins += 1;
        for s in subs.iter_mut().filter(|s| !s.done) {
            while s.quota >= 1.0 - EPS {
                if matches.len() >= limit {
                    limited = true;
                    break;
                }
                let mut got = None;
                for &r in &s.requests {
                    if remaining.get(r).copied().unwrap_or(0) == 0 {
                        continue;
                    }
                    let (Some(cands), Some(cur)) = (candidates.get(r), cursor.get_mut(r)) else {
                        continue;
                    };
                    if let Some(pick) = take(cands, cur, &mut groups, &by_name, &mut stats.picks) {
                        got = Some((r, pick));
                        break;
                    }
                }
                let Some((r, (cand, slot))) = got else {
                    s.done = true;
                    break;
                };
                let req = &input.requests[r];
                let g = groups.get(cand.group as usize);
                let preempting = if cand.preempt {
                    Some(g.and_then(|g| g.remote_user.clone()).unwrap_or_default())
                } else {
                    held_total += 1;
                    None
                };
                if let Some(n) = remaining.get_mut(r) {
                    *n -= 1;
                }
                matches.push(Match {
                    request: r,
                    schedd: req.schedd.clone(),
                    submitter: req.submitter.clone(),
                    autocluster: req.autocluster,
                    slot: names.get(slot).cloned().unwrap_or_default(),
                    slot_index: slot,
                    claim_id: input.slots.get(slot).map(|s| s.claim_id.clone()).unwrap_or_default(),
                    preempting,
                    job_rank: cand.job_rank,
                    machine_rank: cand.machine_rank,
                });
                s.quota -= 1.0;
            }
            if limited {
                break;
            }
        }
        if limited {
            break;
        }
        // What is left of the pie goes round again to those with demand.
        let open: Vec<usize> = (0..subs.len()).filter(|i| !subs[*i].done).collect();
        if open.is_empty() {
            break;
        }
        let carried: f64 = open.iter().map(|i| subs[*i].quota.max(0.0)).sum();
        let left = pool as f64 - held_total as f64 - carried;
        if left > EPS {
            let w: f64 = open.iter().map(|i| subs[*i].weight).sum();
            for &i in &open {
                subs[i].quota += left * subs[i].weight / w;
            }
        }
        if open.iter().any(|i| subs[*i].quota >= 1.0 - EPS) {
            continue;
        }
        // Only fractions are left: round the largest up, while whole slots
        // of the pie remain unheld.
        if pool.saturating_sub(held_total) >= 1 {
            let best = open.iter().copied().max_by(|a, b| {
                subs[*a]
                    .quota
                    .total_cmp(&subs[*b].quota)
                    .then(subs[*b].effective.total_cmp(&subs[*a].effective))
            });
            if let Some(i) = best {
                subs[i].quota = 1.0;
                continue;
            }
        }
        break;
    }

    // Rejections: what is left unmatched, and why.
    let mut rejections = Vec::new();
    for &r in &active_requests {
        let left = remaining.get(r).copied().unwrap_or(0);
        if left == 0 {
            continue;
        }
        let req = &input.requests[r];
        let has_more = candidates.get(r).is_some_and(|c| {
            let from = cursor.get(r).map_or(0, |c| c.pos);
            c.iter()
                .skip(from)
                .any(|c| groups.get(c.group as usize).is_some_and(|g| g.used < g.members.len()))
        });
        let reason = if has_more && limited {
            MATCH_LIMIT
        } else if has_more {
            INSUFFICIENT_PRIORITY
        } else {
            NO_MATCH
        };
        rejections.push(Rejection {
            request: r,
            schedd: req.schedd.clone(),
            submitter: req.submitter.clone(),
            autocluster: req.autocluster,
            unmatched: left,
            reason: reason.to_string(),
        });
    }
    stats.matches = matches.len();
    stats.preemptions = matches.iter().filter(|m| m.preempting.is_some()).count();
    failed.sort_unstable();
    Plan { matches, rejections, failed, stats }
}

/// Where a request is in its candidates: the tier it takes from, with
/// each of the tier's groups' next free slot in a heap, smallest name
/// first, so that a pick costs a logarithm of the tier rather than a walk
/// of it (a tier can hold every group of the pool, and a cycle that fills
/// a pool makes a pick per slot).
#[derive(Default)]
struct Cursor {
    /// The first candidate of the open tier; every one before it is used up.
    pos: usize,
    /// One past the open tier's last candidate; `end == pos`: none open.
    end: usize,
    /// (the name order of a group's next free slot, its candidate's
    /// index). An entry whose group was taken from since (by any request)
    /// is put back with the group's new next slot when it comes to the top.
    heap: BinaryHeap<Reverse<(u32, u32)>>,
}

/// Takes the best free slot of `cands` from the cursor on: within the
/// first tier of equally good candidates, the group whose next slot comes
/// first by name (each group's slots are sorted by name; `by_name` is
/// each slot's place in the order of all slots by name). `steps` counts
/// the heap's pops and pushes.
fn take(
    cands: &[Candidate],
    cur: &mut Cursor,
    groups: &mut [Group],
    by_name: &[u32],
    steps: &mut usize,
) -> Option<(Candidate, usize)> {
    let free = |g: &Group| g.used < g.members.len();
    let order = |slot: usize| by_name.get(slot).copied().unwrap_or(u32::MAX);
    loop {
        if cur.end == cur.pos {
            // Open the next tier.
            while let Some(c) = cands.get(cur.pos) {
                if groups.get(c.group as usize).is_some_and(free) {
                    break;
                }
                cur.pos += 1;
            }
            let first = *cands.get(cur.pos)?;
            cur.heap.clear();
            cur.end = cur.pos;
            while let Some(c) = cands.get(cur.end) {
                if !same_tier(&first, c) {
                    break;
                }
                if let Some(&slot) =
                    groups.get(c.group as usize).and_then(|g| g.members.get(g.used))
                {
                    *steps += 1;
                    cur.heap.push(Reverse((order(slot), cur.end as u32)));
                }
                cur.end += 1;
            }
        }
        *steps += 1;
        let Some(Reverse((key, i))) = cur.heap.pop() else {
            // The tier is used up.
            cur.pos = cur.end;
            continue;
        };
        let Some(c) = cands.get(i as usize).copied() else { continue };
        let Some(g) = groups.get_mut(c.group as usize) else { continue };
        let Some(&slot) = g.members.get(g.used) else { continue };
        if order(slot) != key {
            // Taken from since it was pushed: back with its next slot.
            *steps += 1;
            cur.heap.push(Reverse((order(slot), i)));
            continue;
        }
        g.used += 1;
        if let Some(&next) = g.members.get(g.used) {
            *steps += 1;
            cur.heap.push(Reverse((order(next), i)));
        }
        return Some((c, slot));
    }
}

#[cfg(test)]
mod tests;
