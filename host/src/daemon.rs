//! The `andes host` daemon: a thin shell around `andes-startd`'s pure state
//! machine that carries out its actions with real starters.
//!
//! [`Daemon`] owns the [`Startd`] and feeds it events at the time of its
//! [`Clock`] (a [`andes_starter::VirtualClock`] in tests): a [`Event::Tick`] at
//! [`Startd::next_deadline`], fresh [`Measurements`] before each of its polls,
//! [`Event::StarterExited`] and [`Event::BackfillExited`] when a starter
//! ends, [`Event::BenchmarkFinished`] after a benchmark, and the commands of
//! the HTTP API ([`crate::api`]). Each [`Action`] the machine returns is carried out
//! at once:
//!
//! | action | what the daemon does |
//! | --- | --- |
//! | `StartJob` | runs the job with [`Host::run`] in a task, with its own [`Control`], in a fresh sandbox under EXECUTE |
//! | `StartBackfill` | the same for the named backfill job (`BACKFILL_JOB_<name>`) |
//! | `Suspend`, `Continue` | [`Control::suspend`], [`Control::resume`] |
//! | `SoftKill` | [`Control::soft_kill`] with the grace the machine computed |
//! | `HardKill`, `KillBackfill` | [`Control::hard_kill`] |
//! | `KillStarter` | kills the job again, logged; the slot waits for its end |
//! | `Checkpoint` | a cooperative job (`WasmCheckpoint = "cooperative"`) is asked to save (its `checkpoint-requested`); a module compiled by `andes compile` is snapshotted at its next yield point (periodic: it goes on; vacate: the soft kill that follows takes the stopping snapshot). `CheckpointFinished { ok: true }` is answered at once, so a vacate goes on while the job saves; each save and snapshot reaches the shadow in the job's report. Other jobs: `ok: false` |
//! | `RunBenchmarks` | runs two small Wasm loops ([`benchmark`]) and answers `BenchmarkFinished` |
//! | `Publish` | keeps the ad for `andes host status` and, in a pool, sends it to the collector with the slot's claim id |
//! | `ShutdownComplete` | the daemon's [`Daemon::run`] returns once no starter is left |
//! | `ClaimAccepted` | spends the slot's offer: a new claim id replaces it |
//! | other claim notices | logged; a claim the startd no longer holds ends its report (`claim_alive = false`) |
//!
//! A sandbox is `$(EXECUTE)/dir_<slot>_<n>`, empty when a job starts in it:
//! when a job ends its sandbox is emptied and kept for the slot's next job
//! (removed if it cannot be emptied, or if its starter had to be abandoned). A job compiled by `andes compile` also
//! gets `$(EXECUTE)/ckpt_<slot>_<n>`, the contents of the sandbox files its
//! snapshots name, kept until the shadow has had the last of them.
//!
//! Transparent checkpoints need [`SnapshotKeys`] ([`Daemon::set_snapshot_keys`]):
//! the host signs each snapshot with its own key and restores only snapshots
//! signed by keys the pool trusts as hosts.
//!
//! Claims ([`pool`]): the schedd-facing routes reach the daemon through
//! [`Remote::pool`]; [`Daemon::pool`] feeds the machine [`Event::MatchNotified`],
//! [`Event::ClaimRequested`] (or [`Event::BetterMatch`] on a claimed slot),
//! [`Event::ClaimActivated`] with the job's module and input files,
//! [`Event::JobUpdated`] and [`Event::ClaimReleased`], and keeps each claim's
//! report for the shadow's long poll. A claim whose lease runs out (no shadow
//! heard from for JobLeaseDuration) is released.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use andes_protocol::pool::public_claim_id;
use andes_startd::{Action, Event, ShutdownKind, SlotId, Startd, StarterOutcome, VacateKind};
use classad::{ClassAd, Value};
use tokio::sync::mpsc;

pub use crate::config::*;
use crate::measure::unix_now;
pub use crate::measure::{MachineClock, checkpoint_platform, machine_info, real_measurer};
use crate::pool::claim::{BlobDir, ClaimEntry, new_claim_id};
use crate::pool::files::Modules;
pub use crate::remote::*;
use andes_starter::control::{Clock, Control};
use andes_starter::engine::Host;
use andes_starter::starter::{Deferral, Ending, HOLD_FAILED_TO_START, JobResult};

/// What a starter runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    /// A claimed job.
    Job,
    /// A backfill job.
    Backfill,
    /// The benchmarks.
    Benchmark,
}

pub(crate) struct Run {
    pub(crate) kind: RunKind,
    pub(crate) generation: u64,
    pub(crate) ctl: Arc<Control>,
    pub(crate) sandbox: PathBuf,
    pub(crate) task: tokio::task::JoinHandle<()>,
    pub(crate) last_cpu: f64,
    pub(crate) last_at: std::time::Instant,
    pub(crate) load: f64,
    /// Tells the daemon of each save of a cooperative job.
    pub(crate) saver: Option<tokio::task::JoinHandle<()>>,
    /// The contents of the files its snapshots name (a module compiled by
    /// `andes compile`, snapshots enabled).
    pub(crate) blobs: Option<Arc<BlobDir>>,
    /// The snapshot it resumed from: its hash and the contents it names.
    pub(crate) restored: Option<(String, Arc<std::collections::HashSet<String>>)>,
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(t) = &self.saver {
            t.abort();
        }
    }
}

pub(crate) enum Finished {
    Starter(JobResult),
    Benchmark {
        mips: i64,
        kflops: i64,
    },
    /// The job saved its state (the guest SDK's `checkpoint.save`); it runs on.
    Saved,
    /// The starter took a transparent checkpoint (or failed to).
    Snapshot(Box<Result<andes_starter::transparent::Checkpoint, String>>),
}

pub(crate) struct Exit {
    pub(crate) slot: SlotId,
    pub(crate) generation: u64,
    pub(crate) finished: Finished,
}

/// The part of a bounded graceful shutdown ([`Command::OffWithin`]) kept for
/// the jobs' ends to reach their shadows: this long before its time is out,
/// the host kills whatever still runs, so that each job's shadow still hears
/// how it ended and the queue has the job idle again before the host stops.
pub const SHUTDOWN_REPORT_MARGIN: Duration = Duration::from_secs(1);

/// How a starter ended, as the daemon saw it.
#[derive(Clone, Debug)]
pub struct ExitReport {
    /// The slot.
    pub slot: SlotId,
    /// What ran.
    pub kind: RunKind,
    /// How a job or backfill job ended (`None` for benchmarks).
    pub ending: Option<Ending>,
}

/// Reads the host's configuration again, as it was read at start
/// (`andes reconfig`).
pub type Reload = Arc<dyn Fn() -> Result<DaemonConfig, String> + Send + Sync>;

/// Sets or clears a slot's `JobDeferredUntil`: its job waits for its
/// DeferralTime (`andes status` shows the activity as Deferred).
pub(crate) fn deferred_attr(slot: SlotId, until: Option<i64>) -> Event {
    Event::SetAttribute {
        slot: Some(slot),
        name: "JobDeferredUntil".into(),
        value: until.map(|t| classad::Expr::from(Value::Int(t))),
    }
}

/// The daemon: the startd machine, its starters and the latest ads.
pub struct Daemon {
    pub(crate) startd: Startd,
    pub(crate) host: Arc<Host>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) machine_clock: std::sync::Mutex<MachineClock>,
    /// Offers of claimed slots the negotiator matched by user priority.
    pub(crate) priority_offers: HashSet<String>,
    pub(crate) execute: PathBuf,
    pub(crate) backfill: HashMap<String, BackfillJob>,
    pub(crate) runs: HashMap<SlotId, Run>,
    pub(crate) modules: HashMap<SlotId, Arc<[u8]>>,
    pub(crate) ads: BTreeMap<SlotId, Arc<ClassAd>>,
    pub(crate) endings: HashMap<SlotId, Ending>,
    pub(crate) exits_tx: mpsc::UnboundedSender<Exit>,
    pub(crate) exits_rx: mpsc::UnboundedReceiver<Exit>,
    pub(crate) requests_tx: mpsc::Sender<Request>,
    pub(crate) requests_rx: mpsc::Receiver<Request>,
    pub(crate) measurer: Measurer,
    pub(crate) logger: Option<Logger>,
    pub(crate) update_interval: i64,
    pub(crate) next_measure: i64,
    pub(crate) generation: u64,
    pub(crate) shutdown_complete: bool,
    pub(crate) rejections: Vec<String>,
    /// Each slot's current offer: the claim id the collector hands on.
    pub(crate) offers: HashMap<SlotId, String>,
    pub(crate) claims: HashMap<String, ClaimEntry>,
    /// Claims that ended before their shadow heard how the job ended: kept
    /// (until the Unix second given) so it still can.
    pub(crate) ended: HashMap<String, (ClaimEntry, i64)>,
    /// The ends owed to schedds, on disk until acknowledged.
    pub(crate) owed: crate::owed::Owed,
    /// A fast shutdown was asked for: no waiting for shadows.
    pub(crate) fast_shutdown: bool,
    /// A bounded graceful shutdown ([`Command::OffWithin`]): when to kill
    /// what still runs (taken once done), and when to stop waiting for
    /// shadows, on the daemon's monotonic clock.
    pub(crate) shutdown_kill_at: Option<std::time::Instant>,
    pub(crate) shutdown_by: Option<std::time::Instant>,
    /// Each slot's emptied sandbox, kept for its next job.
    pub(crate) spare: HashMap<SlotId, PathBuf>,
    /// Slots whose next job is one of a batch (its schedd saw the claim's
    /// jobs take under 10 ms each): it runs metered, since handing a job
    /// that short to a thread of its own costs more than fuel checks do.
    pub(crate) short: std::collections::HashSet<SlotId>,
    /// Whether a module (by digest) was compiled by `andes compile`:
    /// reading that means parsing the module, once per module, not per job.
    pub(crate) instrumented: HashMap<[u8; 32], bool>,
    pub(crate) store: Modules,
    pub(crate) inputs: HashMap<SlotId, Vec<andes_protocol::pool::FileData>>,
    pub(crate) input_sizes: HashMap<SlotId, Vec<(String, u64)>>,
    /// The saved state an activation brought, until the job starts.
    pub(crate) saved_in: HashMap<SlotId, Arc<[u8]>>,
    /// The snapshot an activation brought, until its job starts.
    pub(crate) snapshot_in: HashMap<SlotId, andes_protocol::pool::SnapshotData>,
    pub(crate) snapshot_keys: Option<SnapshotKeys>,
    pub(crate) reload: Option<Reload>,
    pub(crate) starter_initial_update: u64,
    pub(crate) starter_update: u64,
    pub(crate) alive_interval: u64,
    pub(crate) max_alives_missed: u64,
    /// `MyAddress` and `StartdIpAddr` once the daemon has an address, made
    /// once for every ad published.
    pub(crate) address: Option<[Value; 2]>,
    pub(crate) publisher: Option<mpsc::UnboundedSender<PublishedAd>>,
    pub(crate) history: Option<std::fs::File>,
    /// Slots whose job waits for its DeferralTime (the ad's JobDeferredUntil).
    pub(crate) deferred: std::collections::HashSet<SlotId>,
    pub(crate) deferred_tx: mpsc::UnboundedSender<SlotId>,
    pub(crate) deferred_rx: mpsc::UnboundedReceiver<SlotId>,
    /// Jobs this host stopped while evaluating: never evaluated again.
    pub(crate) quarantine: crate::quarantine::Quarantine,
}

impl Daemon {
    /// A daemon for `config`, running jobs on `host`, reading time from
    /// `clock` and measuring the machine with `measurer` (use
    /// [`real_measurer`] in production). Creates EXECUTE and removes the
    /// sandboxes (`dir_*`) a previous run left in it.
    pub fn new(
        config: DaemonConfig,
        host: Arc<Host>,
        clock: Arc<dyn Clock>,
        measurer: Measurer,
    ) -> Result<Daemon, DaemonError> {
        // EXECUTE itself may be entered by others; each sandbox in it is
        // the daemon's alone (its umask).
        andes_beneath::private::create_dirs_reachable(&config.execute)
            .map_err(|error| DaemonError::Io { path: config.execute.clone(), error })?;
        // The ends an earlier run still owed its schedds, offered again.
        let (owed, orphans) = crate::owed::Owed::open(&config.execute);
        let keep: HashSet<&str> =
            orphans.iter().filter_map(|e| e.kept.as_ref().map(|(d, _)| d.as_str())).collect();
        // Sandboxes a previous run left behind (a crash) belong to no job
        // now, but for those kept for an owed end's outputs. New ones are
        // numbered past every one found, so none is named as a kept one.
        let mut generation = 0;
        if let Ok(entries) = std::fs::read_dir(&config.execute) {
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if ["dir_", "ckpt_", "out_", "in_"].iter().any(|p| name.starts_with(p)) {
                    let n = name.rsplit('_').next().and_then(|n| n.parse::<u64>().ok());
                    generation = generation.max(n.unwrap_or(0));
                    if !keep.contains(name.as_ref()) {
                        remove_sandbox(&e.path());
                    }
                }
            }
        }
        let now = unix_now(clock.as_ref());
        let update_interval = config.policy.update_interval.max(1);
        let mut startd = Startd::new(config.policy, &config.info, now)?;
        let quarantine = crate::quarantine::Quarantine::open(&config.execute, now);
        startd.set_watcher(Some(quarantine.watcher()));
        let (exits_tx, exits_rx) = mpsc::unbounded_channel();
        let (requests_tx, requests_rx) = mpsc::channel(64);
        let (deferred_tx, deferred_rx) = mpsc::unbounded_channel();
        let ads = startd.slots().iter().map(|s| (s.id(), Arc::new(s.ad().clone()))).collect();
        let offers = startd.slots().iter().map(|s| (s.id(), new_claim_id(s.id()))).collect();
        let machine_clock =
            std::sync::Mutex::new(MachineClock::new(clock.unix_now_ms(), clock.now()));
        let mut daemon = Daemon {
            owed,
            startd,
            host,
            machine_clock,
            priority_offers: HashSet::new(),
            clock,
            execute: config.execute,
            backfill: config.backfill,
            runs: HashMap::new(),
            modules: HashMap::new(),
            ads,
            endings: HashMap::new(),
            exits_tx,
            exits_rx,
            deferred: Default::default(),
            quarantine,
            deferred_tx,
            deferred_rx,
            requests_tx,
            requests_rx,
            measurer,
            logger: None,
            update_interval,
            next_measure: now,
            generation,
            shutdown_complete: false,
            rejections: Vec::new(),
            offers,
            claims: HashMap::new(),
            ended: HashMap::new(),
            fast_shutdown: false,
            shutdown_kill_at: None,
            shutdown_by: None,
            spare: HashMap::new(),
            short: Default::default(),
            instrumented: HashMap::new(),
            store: Modules::default(),
            inputs: HashMap::new(),
            input_sizes: HashMap::new(),
            saved_in: HashMap::new(),
            snapshot_in: HashMap::new(),
            snapshot_keys: None,
            reload: None,
            starter_initial_update: config.starter_initial_update,
            starter_update: config.starter_update,
            alive_interval: config.alive_interval,
            max_alives_missed: config.max_alives_missed,
            address: None,
            publisher: None,
            history: config.history.as_ref().and_then(|p| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| tracing::warn!("STARTD_HISTORY {}: {e}", p.display()))
                    .ok()
            }),
        };
        daemon.restore_owed(orphans);
        Ok(daemon)
    }

    /// The ends an earlier run of the host owed (read from its book, see
    /// [`crate::owed`]) become the final reports of ended claims, kept for
    /// the job's lease (at least [`FINAL_REPORT_KEEP`]): the shadow that
    /// follows or reconnects to the claim takes each end in as it would
    /// have before the host died. An end whose kept sandbox is gone is not
    /// offered (its book line is settled as owed to nobody).
    fn restore_owed(&mut self, orphans: Vec<crate::owed::OwedEnd>) {
        use crate::pool::claim::{FINAL_REPORT_KEEP, KeptOutputs};
        let mut by_claim: BTreeMap<String, Vec<crate::owed::OwedEnd>> = BTreeMap::new();
        for e in orphans {
            if let Some((dir, _)) = &e.kept
                && !self.execute.join(dir).is_dir()
            {
                tracing::warn!("the end of {}: its kept outputs are gone; not offered", e.end.job);
                continue;
            }
            by_claim.entry(e.claim.clone()).or_default().push(e);
        }
        let (mono, now) = (self.clock.now(), self.now());
        for (claim_id, mut ends) in by_claim {
            ends.sort_by_key(|e| e.end.version);
            let Some(last) = ends.last() else { continue };
            let lease = ends.iter().map(|e| e.lease_secs).max().unwrap_or(0);
            let mut c =
                ClaimEntry::new(last.slot, last.claimant.clone(), mono, Duration::from_secs(lease));
            c.incarnation = last.incarnation.clone();
            c.job_lease = Some(Duration::from_secs(lease));
            c.told_end.store(false, std::sync::atomic::Ordering::Release);
            let kept: HashMap<String, Arc<KeptOutputs>> = ends
                .iter()
                .filter_map(|e| {
                    let (dir, files) = e.kept.clone()?;
                    let dir = self.execute.join(dir);
                    Some((e.end.job.clone(), Arc::new(KeptOutputs { dir, files })))
                })
                .collect();
            let (version, job) = (last.end.version, last.end.job.clone());
            let (ending, evicted) = (classad::parse_ad(&last.end.ending).ok(), last.end.evicted);
            let jobs: Vec<String> = ends.iter().map(|e| e.end.job.clone()).collect();
            c.report.send_modify(|r| {
                r.version = version + 1;
                r.state = andes_protocol::pool::RunState::Exited;
                r.job = Some(job);
                r.ending = ending;
                r.evicted = evicted;
                r.claim_alive = false;
                r.ended = Arc::new(ends.into_iter().map(|e| e.end).collect());
                r.kept = Arc::new(kept);
            });
            self.log(format!(
                "claim {}: the ends of {} owed from before a restart, kept for {lease} s",
                public_claim_id(&claim_id),
                jobs.join(", ")
            ));
            let until = now.saturating_add((lease as i64).max(FINAL_REPORT_KEEP));
            self.ended.insert(claim_id, (c, until));
        }
        self.settle_owed(None);
    }

    /// How many job ends the host owes its schedds: each kept in
    /// `EXECUTE/.startd.owed` ([`crate::owed`]) until acknowledged.
    pub fn owed_ends(&self) -> usize {
        self.owed.len()
    }

    /// Settles, in the book of owed ends, the ends of `claim` (or of every
    /// claim) no longer owed: its claim is gone, its schedd acknowledged it
    /// (or released the claim), or the claim's report no longer carries it
    /// (forgotten on an appended activation's `acked`, or by a fresh
    /// activation). Called where those happen: after the requests that
    /// acknowledge (for their claim, `pool::answer::settles`), as claims
    /// end or are pruned, and at every tick (all).
    pub(crate) fn settle_owed(&mut self, claim: Option<&str>) {
        if self.owed.is_empty() {
            return;
        }
        let (claims, ended) = (&self.claims, &self.ended);
        self.owed.settle(claim, |claim, version| {
            let c = claims.get(claim).or_else(|| ended.get(claim).map(|(c, _)| c));
            c.is_some_and(|c| {
                c.owes_end()
                    && c.report.borrow().ended.first().is_some_and(|f| version >= f.version)
            })
        });
    }

    /// Lets the daemon take and restore transparent checkpoints of jobs
    /// compiled by `andes compile`: signed with `keys`, restored only when a
    /// trusted host signed them. Without keys such jobs run as plain ones.
    pub fn set_snapshot_keys(&mut self, keys: SnapshotKeys) {
        self.snapshot_keys = Some(keys);
    }

    /// How `andes reconfig` reads the configuration again.
    pub fn set_reload(&mut self, reload: Reload) {
        self.reload = Some(reload);
    }

    /// `andes reconfig`: the configuration read again applies while every
    /// slot keeps its state, claim and job (see [`Startd::reconfigure`]).
    pub(crate) fn reconfigure(&mut self) -> Result<String, String> {
        let reload = self.reload.clone().ok_or(
            "this host was not started from a configuration: there is nothing to read again",
        )?;
        let config = reload()?;
        let now = self.now();
        let r = self.startd.reconfigure(config.policy, now);
        self.update_interval = self.startd.policy().update_interval.max(1);
        self.next_measure = self.next_measure.min(now.saturating_add(self.update_interval));
        self.backfill = config.backfill;
        self.starter_initial_update = config.starter_initial_update;
        self.starter_update = config.starter_update;
        self.alive_interval = config.alive_interval;
        self.max_alives_missed = config.max_alives_missed;
        self.tick();
        let mut message = match r.changed.len() {
            0 => "configuration read again; no policy knob changed".to_string(),
            _ => format!("configuration read again; now in force: {}", r.changed.join(", ")),
        };
        if !r.at_restart.is_empty() {
            message.push_str(&format!(
                "; at the next start (the slot layout stays while the host runs): {}",
                r.at_restart.join(", ")
            ));
        }
        tracing::info!("andes host: {message}");
        Ok(message)
    }

    /// Joins a pool: every slot ad the startd publishes goes to `publisher`
    /// (with `MyAddress = address` and the slot's current claim id in the
    /// private part), starting with the current ones.
    pub fn join_pool(&mut self, address: String, publisher: mpsc::UnboundedSender<PublishedAd>) {
        // HTCondor's form of the same: `<host:port>`.
        let authority = address.split_once("://").map_or(address.as_str(), |(_, rest)| rest);
        let authority = authority.split('/').next().unwrap_or(authority);
        let ip = Value::from(format!("<{authority}>"));
        self.address = Some([Value::from(address), ip]);
        self.publisher = Some(publisher);
        for (slot, ad) in std::mem::take(&mut self.ads) {
            let ad = self.addressed(ClassAd::clone(&ad));
            self.ads.insert(slot, ad.clone());
            self.send_ad(slot, ad);
        }
    }

    /// A slot's ad with the daemon's address in it (`MyAddress`, and
    /// HTCondor's `StartdIpAddr`), once it has one.
    fn addressed(&self, mut ad: ClassAd) -> Arc<ClassAd> {
        if let Some([mine, ip]) = &self.address {
            ad.insert_value(classad::name!("MyAddress"), mine.clone());
            ad.insert_value(classad::name!("StartdIpAddr"), ip.clone());
        }
        Arc::new(ad)
    }

    pub(crate) fn send_ad(&mut self, slot: SlotId, ad: Arc<ClassAd>) {
        let Some(p) = &self.publisher else { return };
        let mut private = ClassAd::new();
        if let Some(offer) = self.offers.get(&slot) {
            private.insert_value(classad::name!("ClaimId"), offer.as_str());
        }
        let _ = p.send(PublishedAd { ad, private });
    }

    /// Sends the daemon's log lines to `logger` too.
    pub fn set_logger(&mut self, logger: Logger) {
        self.logger = Some(logger);
    }

    pub(crate) fn log(&mut self, line: String) {
        tracing::info!("{line}");
        if let Some(l) = &mut self.logger {
            l(&line);
        }
    }

    /// A handle for the HTTP API.
    pub fn remote(&self) -> Remote {
        Remote { tx: self.requests_tx.clone() }
    }

    /// The state machine (read only: feed it through [`Daemon::feed`]).
    pub fn startd(&self) -> &Startd {
        &self.startd
    }

    /// The time the daemon works with: its clock's Unix seconds, through a
    /// [`MachineClock`] so that a step of the wall clock moves no timer.
    pub fn now(&self) -> i64 {
        let mut c = self.machine_clock.lock().unwrap_or_else(|e| e.into_inner());
        c.now_ms(self.clock.unix_now_ms(), self.clock.now()).div_euclid(1000)
    }

    /// Feeds `event` at [`Daemon::now`], carries out the actions, and feeds
    /// on the events those produce at once (a refused checkpoint, a job that
    /// could not start). Returns every action, in order (an
    /// [`Action::Publish`] without its ad, which went to the slot's latest
    /// ad and the publisher: [`Daemon::ads`]).
    pub fn feed(&mut self, event: Event) -> Vec<Action> {
        let now = self.now();
        let mut queue = VecDeque::from([event]);
        let mut all = Vec::new();
        // Each follow-up event answers one action of a bounded kind; the cap
        // only guards against a machine that would loop.
        let mut budget = 10_000usize;
        while let Some(ev) = queue.pop_front() {
            if budget == 0 {
                self.log("the startd kept asking for follow-up events; stopped".into());
                break;
            }
            budget -= 1;
            let mut acts = self.startd.handle(now, ev);
            for a in &mut acts {
                self.carry_out(a, &mut queue);
            }
            all.extend(acts);
        }
        self.reconcile_claims();
        all
    }

    /// Forgets ended claims whose shadow has heard the end, or stopped
    /// asking.
    pub(crate) fn prune_ended(&mut self) {
        let now = self.now();
        let before = self.ended.len();
        self.ended.retain(|_, (c, until)| c.owes_end() && now <= *until);
        if self.ended.len() != before {
            self.settle_owed(None);
        }
    }

    /// True while the daemon should stay up for shadows still owed the end
    /// of their job (not after a fast shutdown, nor once a bounded one's
    /// time is out; never for a claim its schedd released, which reads
    /// nothing more of it).
    pub fn owes_shadows(&mut self) -> bool {
        self.prune_ended();
        let out_of_time = self.shutdown_by.is_some_and(|t| self.clock.now() >= t);
        !self.fast_shutdown && !out_of_time && !self.ended.is_empty()
    }

    /// A bounded graceful shutdown whose time is nearly out: what still
    /// runs is killed (a fast shutdown), once.
    fn bounded_shutdown(&mut self) {
        let Some(at) = self.shutdown_kill_at else { return };
        if self.clock.now() < at {
            return;
        }
        self.shutdown_kill_at = None;
        if self.runs.values().any(|r| r.kind != RunKind::Benchmark) {
            self.log(
                "the graceful shutdown's time (SHUTDOWN_GRACEFUL_TIMEOUT) is nearly out: \
                 killing the jobs still running (fast)"
                    .into(),
            );
        }
        self.feed(Event::Shutdown(ShutdownKind::Fast));
    }

    /// Takes a round of measurements and feeds them.
    pub fn measure(&mut self) -> Vec<Action> {
        let now = self.now();
        let resources = now >= self.next_measure;
        if resources {
            self.next_measure = now.saturating_add(self.update_interval);
        }
        let loads = self.condor_loads();
        let m = (self.measurer)(loads, resources);
        let mut acts = self.feed(Event::Measured(m));
        // The running jobs' memory as it is now, for the slots' ads and the
        // policy (HTCondor's starter updates the startd likewise).
        let mut updates = Vec::new();
        for (&slot, r) in &self.runs {
            let claim = self.startd.slot(slot).and_then(|s| s.claim_id().map(str::to_string));
            if let (RunKind::Job, Some(claim_id)) = (r.kind, claim) {
                let mut attrs = ClassAd::new();
                for (n, v) in r.ctl.usage(self.clock.as_ref()).memory_attrs() {
                    attrs.insert_value(n, v);
                }
                updates.push(Event::JobUpdated { slot, claim_id, attrs });
            }
        }
        for e in updates {
            acts.extend(self.feed(e));
        }
        acts
    }

    /// Releases the claims whose lease ran out, then feeds a [`Event::Tick`].
    /// When the tick is one of the startd's polls (every POLLING_INTERVAL
    /// while a slot is in use) the machine is measured first, so the policy
    /// sees an owner who came back within seconds, as HTCondor's startd
    /// does; otherwise every UPDATE_INTERVAL.
    pub fn tick(&mut self) -> Vec<Action> {
        self.bounded_shutdown();
        self.expire_leases();
        let now = self.now();
        let mut acts = Vec::new();
        if now >= self.next_measure.min(self.startd.next_poll()) {
            acts = self.measure();
        }
        acts.extend(self.feed(Event::Tick));
        self.settle_owed(None);
        acts
    }

    /// When the daemon next needs to wake: the machine's next deadline or
    /// the next measurement, in Unix seconds.
    pub fn next_deadline(&self) -> i64 {
        let mono = self.clock.now();
        let lease = self.claims.values().map(|c| c.expires(self.claim_running(c))).min().map_or(
            i64::MAX,
            |t| {
                let secs = t.saturating_duration_since(mono).as_secs_f64().ceil() as i64;
                self.now().saturating_add(secs)
            },
        );
        self.startd.next_deadline().min(self.next_measure).min(lease)
    }

    /// Carries out a command, then evaluates the policy at once (a tick), so
    /// its effect shows without waiting for the next poll.
    pub fn command(&mut self, command: Command) -> Result<String, String> {
        self.rejections.clear();
        let message = match &command {
            Command::Vacate { slot, kind } => {
                let what = slot.map_or("all slots".to_string(), |s| format!("slot {s}"));
                format!("vacating {what} ({})", vacate_word(*kind))
            }
            Command::Drain { cancel: true, .. } => "drain cancelled".to_string(),
            Command::Drain { kind, .. } => format!("draining ({})", vacate_word(*kind)),
            Command::Checkpoint { slot } => {
                let what = slot.map_or("the jobs of all slots".to_string(), |s| {
                    format!("the job of slot {s}")
                });
                format!("checkpointing {what}")
            }
            Command::Off(kind) => {
                self.fast_shutdown |= *kind == ShutdownKind::Fast;
                format!("shutting down ({})", shutdown_word(*kind))
            }
            Command::OffWithin(within) => {
                let now = self.clock.now();
                let by = now + *within;
                let kill_at = now + within.saturating_sub(SHUTDOWN_REPORT_MARGIN);
                // A second bound never extends the first.
                self.shutdown_by = Some(self.shutdown_by.map_or(by, |t| t.min(by)));
                self.shutdown_kill_at =
                    Some(self.shutdown_kill_at.map_or(kill_at, |t| t.min(kill_at)));
                format!("shutting down (graceful, within {} s)", within.as_secs_f64())
            }
            Command::Reconfig => return self.reconfigure(),
            Command::SetAttr { slot, name, value } => {
                let what = slot.map_or("every slot".to_string(), |s| format!("slot {s}"));
                match value {
                    Some(v) => format!("{name} = {v} on {what}"),
                    None => format!("{name} cleared on {what}"),
                }
            }
        };
        let event = match command {
            Command::Vacate { slot, kind } => Event::Vacate { slot, kind },
            Command::Checkpoint { slot } => Event::CheckpointNow { slot },
            Command::Drain { cancel: true, .. } => Event::CancelDrain,
            Command::Drain { kind, .. } => Event::Drain { kind },
            Command::Off(kind) => Event::Shutdown(kind),
            Command::OffWithin(_) => Event::Shutdown(ShutdownKind::Graceful),
            Command::SetAttr { slot, name, value } => Event::SetAttribute { slot, name, value },
            Command::Reconfig => return Ok(message),
        };
        self.feed(event);
        if !self.rejections.is_empty() {
            return Err(self.rejections.join("; "));
        }
        self.tick();
        Ok(message)
    }

    /// The latest published ad of every slot, slot 1 first.
    pub fn ads(&self) -> Vec<ClassAd> {
        self.ads.values().map(|a| ClassAd::clone(a)).collect()
    }

    /// True once the machine said the shutdown is complete.
    pub fn shutdown_complete(&self) -> bool {
        self.shutdown_complete
    }

    /// True once the shutdown is complete and no starter is left.
    pub fn finished(&self) -> bool {
        self.shutdown_complete && self.runs.is_empty()
    }

    /// The control of the slot's running starter.
    pub fn control(&self, slot: SlotId) -> Option<Arc<Control>> {
        self.runs.get(&slot).map(|r| r.ctl.clone())
    }

    /// What the slot's starter runs, if one does.
    pub fn running(&self, slot: SlotId) -> Option<RunKind> {
        self.runs.get(&slot).map(|r| r.kind)
    }

    /// The sandbox of the slot's running starter.
    pub fn sandbox(&self, slot: SlotId) -> Option<&Path> {
        self.runs.get(&slot).map(|r| r.sandbox.as_path())
    }

    /// How the slot's last job or backfill job ended.
    pub fn last_ending(&self, slot: SlotId) -> Option<&Ending> {
        self.endings.get(&slot)
    }

    /// Runs the daemon: measures before each poll, ticks at the
    /// machine's deadlines, handles starter exits and requests, until a
    /// shutdown is complete and every starter has ended.
    pub async fn run(mut self) {
        self.measure();
        self.tick();
        let mut last_wake = self.now();
        // Done once shut down with no starter left, and no shadow still owed
        // the end of its job (that is looked at every 100 ms meanwhile).
        while !self.finished() || self.owes_shadows() {
            let now = self.now();
            // A deadline already passed is served once per second at most.
            let deadline = self.next_deadline().max(last_wake.saturating_add(1)).max(now);
            let secs = u64::try_from(deadline - now).unwrap_or(0).min(u32::MAX as u64);
            let mut nap = if self.finished() {
                Duration::from_millis(100)
            } else {
                Duration::from_secs(secs)
            };
            if let Some(at) = self.shutdown_kill_at {
                nap = nap.min(at.saturating_duration_since(self.clock.now()));
            }
            let wake = self.clock.sleep_until(self.clock.now() + nap);
            tokio::select! {
                _ = wake => {
                    last_wake = self.now();
                    self.tick();
                }
                Some(exit) = self.exits_rx.recv() => {
                    self.on_exit(exit);
                }
                Some(slot) = self.deferred_rx.recv() => {
                    if self.deferred.remove(&slot) {
                        self.feed(deferred_attr(slot, None));
                    }
                }
                Some(req) = self.requests_rx.recv() => match req {
                    Request::Status(reply) => {
                        let _ = reply.send(self.ads());
                    }
                    Request::Pool(req, reply) => {
                        let r = self.pool(req);
                        let _ = reply.send(r);
                    }
                    Request::Command(c, reply) => {
                        let r = self.command(c);
                        let _ = reply.send(r);
                    }
                },
            }
        }
    }

    pub(crate) fn condor_loads(&mut self) -> Vec<f64> {
        let now = self.clock.now();
        let n = self.startd.slots().len();
        let clock = self.clock.clone();
        (1..=n as SlotId)
            .map(|id| match self.runs.get_mut(&id) {
                Some(r) if r.kind != RunKind::Benchmark => {
                    let u = r.ctl.usage(clock.as_ref());
                    let cpu = u.remote_user_cpu + u.remote_sys_cpu;
                    let wall = now.saturating_duration_since(r.last_at).as_secs_f64();
                    if wall > 0.0 {
                        r.load = ((cpu - r.last_cpu) / wall).clamp(0.0, 64.0);
                        r.last_cpu = cpu;
                        r.last_at = now;
                    }
                    r.load
                }
                _ => 0.0,
            })
            .collect()
    }

    /// Does what the startd asked. A `StartJob`'s ad moves into the starter
    /// (the action keeps an empty one): one clone fewer per job.
    pub(crate) fn carry_out(&mut self, action: &mut Action, queue: &mut VecDeque<Event>) {
        match action {
            Action::Transition { slot, number, from, to } => self.log(format!(
                "slot {slot}: {}/{} -> {}/{} ({number})",
                from.0.as_str(),
                from.1.as_str(),
                to.0.as_str(),
                to.1.as_str()
            )),
            Action::StartJob { slot, claim_id, job } => {
                let Some(module) = self.modules.get(slot).cloned() else {
                    self.log(format!(
                        "slot {slot}: claim {} activated with no module",
                        public_claim_id(claim_id)
                    ));
                    queue.push_back(Event::StarterExited {
                        slot: *slot,
                        outcome: StarterOutcome::Failed,
                    });
                    return;
                };
                let ad = std::mem::take(job);
                let gid = match ad.eval_attr(classad::name!("GlobalJobId")) {
                    Value::Str(s) => Some(s.to_string()),
                    _ => None,
                };
                let deferral = match Deferral::decide(&ad, self.clock.unix_now_ms()) {
                    Deferral::Wait(t) => Some(Some(t)),
                    _ if ad.contains(classad::name!("DeferralTime")) => Some(None),
                    _ => None,
                };
                let handling = self.quarantine.handling(&ad);
                let started = self.start(*slot, RunKind::Job, ad, module);
                drop(handling);
                if let Err(e) = started {
                    self.log(format!("slot {slot}: cannot start the job: {e}"));
                    queue.push_back(Event::StarterExited {
                        slot: *slot,
                        outcome: StarterOutcome::Failed,
                    });
                    return;
                }
                let now = self.now();
                let ctl = self.runs.get(slot).map(|r| r.ctl.clone());
                let restored = self.runs.get(slot).and_then(|r| r.restored.clone());
                if let Some(c) = self.claims.get(claim_id) {
                    c.told_end.store(false, std::sync::atomic::Ordering::Release);
                    c.end_sent.store(0, std::sync::atomic::Ordering::Release);
                    let queued = c.queue.len() as u32;
                    c.publish(|r| {
                        r.queued = queued;
                        r.state = andes_protocol::pool::RunState::Running;
                        r.job = gid;
                        r.ctl = ctl.clone();
                        r.ending = None;
                        r.outputs = Arc::new(Vec::new());
                        r.evicted = false;
                        r.started = now;
                        r.deferral = deferral;
                        r.snapshot = None;
                        r.known = Arc::new(restored.iter().cloned().collect());
                        r.restored = restored.map(|(h, _)| h);
                    });
                    // The shadow hears when the wait ends, so the queue shows it.
                    if let (Some(Some(_)), Some(ctl)) = (deferral, ctl) {
                        let report = c.report.clone();
                        let slot = *slot;
                        let deferred_tx = self.deferred_tx.clone();
                        tokio::spawn(async move {
                            ctl.begun().await;
                            report.send_modify(|r| {
                                if r.deferral == Some(deferral.flatten()) {
                                    r.deferral = Some(None);
                                    r.version += 1;
                                }
                            });
                            let _ = deferred_tx.send(slot);
                        });
                    }
                }
                if let Some(Some(t)) = deferral {
                    // The slot says its job waits (JobDeferredUntil).
                    self.deferred.insert(*slot);
                    queue.push_back(deferred_attr(*slot, Some(t)));
                }
            }
            Action::StartBackfill { slot, job } => {
                let started = match self.backfill.get(job) {
                    Some(b) => {
                        let (ad, module) = (b.ad.clone(), b.module.clone());
                        self.start(*slot, RunKind::Backfill, ad, module)
                            .map_err(|e| format!("cannot start backfill job {job}: {e}"))
                    }
                    None => Err(format!("no backfill job `{job}` (BACKFILL_JOB_{job})")),
                };
                if let Err(e) = started {
                    self.log(format!("slot {slot}: {e}"));
                    queue.push_back(Event::BackfillExited { slot: *slot });
                }
            }
            Action::Suspend { slot } => {
                if let Some(r) = self.runs.get(slot) {
                    r.ctl.suspend(self.clock.as_ref());
                }
                if let Some(c) = self.claim_of_slot(*slot) {
                    c.publish(|r| r.state = andes_protocol::pool::RunState::Suspended);
                }
            }
            Action::Continue { slot } => {
                if let Some(r) = self.runs.get(slot) {
                    r.ctl.resume(self.clock.as_ref());
                }
                if let Some(c) = self.claim_of_slot(*slot) {
                    c.publish(|r| r.state = andes_protocol::pool::RunState::Running);
                }
            }
            Action::Checkpoint { slot, kind } => {
                // A cooperative job is asked (its `checkpoint-requested`) and
                // saves in its own time; a vacate goes on at once, the job
                // saving within its grace. A job compiled by `andes compile`
                // is snapshotted at its next yield point: asked now for a
                // periodic checkpoint; on a vacate, the soft kill that follows
                // makes the starter take the stopping snapshot.
                let cooperative =
                    self.startd.slots().iter().find(|s| s.id() == *slot).is_some_and(|s| {
                        s.job().is_some_and(|j| {
                            j.eval_attr(classad::name!("WasmCheckpoint"))
                                .as_str()
                                .is_some_and(|m| m.eq_ignore_ascii_case("cooperative"))
                        })
                    });
                let run = self.runs.get(slot).filter(|r| r.kind == RunKind::Job);
                let ok = match run {
                    Some(r) if r.blobs.is_some() => {
                        if *kind == andes_startd::CheckpointKind::Periodic {
                            r.ctl.request_checkpoint();
                        }
                        true
                    }
                    Some(r) if cooperative => {
                        r.ctl.request_checkpoint();
                        true
                    }
                    _ => false,
                };
                if !ok {
                    self.log(format!("slot {slot}: {kind:?} checkpoint refused: not supported"));
                }
                queue.push_back(Event::CheckpointFinished { slot: *slot, ok });
            }
            Action::SoftKill { slot, grace_secs } => {
                if let Some(r) = self.runs.get(slot) {
                    r.ctl.soft_kill(self.clock.as_ref(), Duration::from_secs(*grace_secs));
                }
            }
            Action::HardKill { slot } => {
                if let Some(r) = self.runs.get(slot) {
                    r.ctl.hard_kill();
                }
            }
            Action::KillBackfill { slot } => match self.runs.get(slot) {
                Some(r) => r.ctl.hard_kill(),
                None => queue.push_back(Event::BackfillExited { slot: *slot }),
            },
            Action::KillStarter { slot } => {
                // The job runs on a thread of this process: the hard kill
                // (signal, trap at the next instruction of guest code, and
                // the job's waits dropped) is the strongest there is, so it
                // is sent again. The slot stays in Killing, its resources
                // counted, until the job's thread has really ended.
                if let Some(r) = self.runs.get(slot) {
                    r.ctl.hard_kill();
                    self.log(format!(
                        "slot {slot}: the job has not stopped within KILLING_TIMEOUT of its \
                         hard kill; killing it again (the slot waits for its end)"
                    ));
                }
            }
            Action::RunBenchmarks { slot } => {
                if let Err(e) = self.start_benchmark(*slot) {
                    self.log(format!("slot {slot}: cannot run the benchmarks: {e}"));
                    queue.push_back(Event::BenchmarkFinished { slot: *slot, mips: 0, kflops: 0 });
                }
            }
            Action::Publish { slot, ad } => {
                // The ad itself is kept and published, not copies of it: the
                // action comes back from `feed` without it.
                let ad = self.addressed(std::mem::take(ad));
                self.ads.insert(*slot, ad.clone());
                self.send_ad(*slot, ad);
            }
            Action::ShutdownComplete => self.shutdown_complete = true,
            Action::EventRejected { reason } => {
                self.log(reason.clone());
                self.rejections.push(reason.clone());
            }
            Action::ClaimAccepted { slot, claim_id } => {
                // The offer is spent: a new one (for a preempting match) replaces it.
                if self.offers.get(slot) == Some(claim_id) {
                    self.offers.insert(*slot, new_claim_id(*slot));
                }
                self.log(format!("slot {slot}: claim {} accepted", public_claim_id(claim_id)))
            }
            Action::ClaimBroken { slot, claim_id } => {
                self.log(format!("slot {slot}: claim {} broken", public_claim_id(claim_id)))
            }
            Action::ReleaseClaim { slot, claim_id } => {
                self.log(format!("slot {slot}: claim {} released", public_claim_id(claim_id)))
            }
            Action::ClaimRefused { slot, claim_id, reason }
            | Action::ActivationRefused { slot, claim_id, reason } => self
                .log(format!("slot {slot}: claim {} refused: {reason}", public_claim_id(claim_id))),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        for (_, r) in self.runs.drain() {
            r.ctl.hard_kill();
            r.task.abort();
            remove_sandbox(&r.sandbox);
        }
        for (_, d) in self.spare.drain() {
            remove_sandbox(&d);
        }
    }
}

/// Removes everything in `dir` (symbolic links themselves, never what they
/// point to, at any depth), leaving it empty.
pub(crate) fn empty_dir(dir: &Path) -> std::io::Result<()> {
    andes_beneath::Beneath::open(dir)?.clear()
}

pub(crate) fn remove_sandbox(dir: &Path) {
    let r = empty_dir(dir).and_then(|_| std::fs::remove_dir(dir));
    if let Err(e) = r
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove sandbox {}: {e}", dir.display());
    }
}

/// The startd's view of a starter's ending.
pub fn outcome(ending: &Ending) -> StarterOutcome {
    match ending {
        Ending::Evicted { .. } => StarterOutcome::Evicted,
        Ending::Held { code, .. } if *code == HOLD_FAILED_TO_START => StarterOutcome::Failed,
        _ => StarterOutcome::Completed,
    }
}

/// `graceful` or `fast`: how a vacate of `kind` is named in messages.
pub(crate) fn vacate_word(kind: VacateKind) -> &'static str {
    if kind == VacateKind::Fast { "fast" } else { "graceful" }
}

/// `graceful`, `peaceful` or `fast`.
pub fn shutdown_word(kind: ShutdownKind) -> &'static str {
    match kind {
        ShutdownKind::Graceful => "graceful",
        ShutdownKind::Peaceful => "peaceful",
        ShutdownKind::Fast => "fast",
    }
}
