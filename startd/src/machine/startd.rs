//! [`Startd`]: every slot of one execute host, the policy, and the
//! clock-free scheduling of its own evaluations; its construction, its
//! accessors, and [`Startd::handle`], which dispatches each event.

use classad::{ClassAd, EvalOptions, Expr, Value, parse_expr};

use super::reconfig::published_policy;
use super::slot::Retire;
use super::watch::{Watched, Watcher};
use super::{
    Action, Activity, Event, MachineInfo, Measurements, NO_CONSOLE_IDLE, SLOT_JOB_ATTRS,
    ShutdownKind, Slot, SlotId, State,
};
use crate::policy::{Policy, PolicyError};

/// The startd: all slots, the policy, and the clock-free scheduling of its
/// own evaluations.
pub struct Startd {
    pub(super) policy: Policy,
    pub(super) requirements: Expr,
    pub(super) slots: Vec<Slot>,
    pub(super) ev: Watched,
    pub(super) measured: Measurements,
    pub(super) keyboard_active: i64,
    pub(super) console_active: i64,
    /// The keyboard and console activity an administrator set
    /// ([`Event::SetAttribute`]), kept until cleared: a measurement moves
    /// the activity only forward from it.
    pub(super) activity_set: (Option<i64>, Option<i64>),
    /// The keyboard and console activity the last measurement found.
    pub(super) activity_measured: (i64, i64),
    /// The machine's disk (on EXECUTE) and swap at startup, in KB: each
    /// slot keeps its share of them as they are measured.
    pub(super) totals: (u64, u64),
    pub(super) last_now: i64,
    pub(super) next_poll: i64,
    pub(super) next_update: i64,
    pub(super) shutdown: Option<ShutdownKind>,
    pub(super) shutdown_reported: bool,
    /// Draining (condor_drain): no new claims; a slot that would be Owner
    /// is Drained.
    pub(super) draining: bool,
    pub(super) backfill_next: usize,
}

/// The latest time the startd works with (about the year 36812); times are
/// taken in `0..=MAX_TIME`.
pub const MAX_TIME: i64 = 1 << 40;

impl Startd {
    /// A startd for `info` under `policy`, every slot in Owner/Idle at `now`.
    pub fn new(policy: Policy, info: &MachineInfo, now: i64) -> Result<Startd, PolicyError> {
        let now = now.clamp(0, MAX_TIME);
        let layout =
            policy.slot_layout(info.cpus, info.memory_mb, info.disk_kb, info.virtual_memory_kb)?;
        let requirements = parse_expr("START && IS_VALID_CHECKPOINT_PLATFORM")
            .unwrap_or(Expr::Lit(Value::Bool(false)));
        let mut slots = Vec::with_capacity(layout.len());
        for (n, spec) in layout.into_iter().enumerate() {
            let id = n as SlotId + 1;
            let mut ad = ClassAd::new();
            ad.insert_value(classad::name!("MyType"), "Machine");
            ad.insert_value(classad::name!("TargetType"), "Job");
            ad.insert_value(classad::name!("Name"), format!("slot{id}@{}", info.hostname));
            ad.insert_value(classad::name!("Machine"), info.hostname.as_str());
            ad.insert_value(classad::name!("SlotID"), id as i64);
            ad.insert_value(classad::name!("VirtualMachineID"), id as i64);
            ad.insert_value(classad::name!("SlotType"), spec.slot_type as i64);
            ad.insert_value(classad::name!("Arch"), info.arch.as_str());
            ad.insert_value(classad::name!("OpSys"), info.opsys.as_str());
            ad.insert_value(classad::name!("Cpus"), spec.cpus as i64);
            ad.insert_value(classad::name!("TotalCpus"), info.cpus as i64);
            ad.insert_value(classad::name!("Memory"), spec.memory_mb as i64);
            ad.insert_value(classad::name!("Disk"), spec.disk_kb as i64);
            ad.insert_value(classad::name!("VirtualMemory"), spec.virtual_memory_kb as i64);
            ad.insert_value(
                "UidDomain",
                policy.uid_domain.as_deref().unwrap_or(info.hostname.as_str()),
            );
            ad.insert_value(
                "FileSystemDomain",
                policy.filesystem_domain.as_deref().unwrap_or(info.hostname.as_str()),
            );
            ad.insert_value(
                classad::name!("CheckpointPlatform"),
                info.checkpoint_platform.as_str(),
            );
            ad.insert_value(classad::name!("HasWasm"), true);
            ad.insert_value(classad::name!("HasJobDeferral"), true);
            ad.insert_value(classad::name!("HasFileTransfer"), true);
            // A batch's jobs may come as deltas from its first job's ad.
            ad.insert_value(classad::name!("HasJobAdDeltas"), true);
            ad.insert_value(classad::name!("WasmtimeVersion"), info.wasmtime_version.as_str());
            ad.insert_value(
                "WasmFeatures",
                Value::list(info.wasm_features.iter().map(|f| Value::from(f.as_str())).collect()),
            );
            ad.insert_value(classad::name!("LastBenchmark"), 0i64);
            ad.insert_value(classad::name!("Mips"), 0i64);
            ad.insert_value(classad::name!("KFlops"), 0i64);
            ad.insert_value(classad::name!("CurrentRank"), 0.0);
            for (name, e) in published_policy(&policy) {
                ad.insert(name.as_str(), e);
            }
            let static_ad = ad.clone();
            ad.insert(classad::name!("Requirements"), requirements.clone());
            ad.insert_value(classad::name!("State"), State::Owner.as_str());
            ad.insert_value(classad::name!("Activity"), Activity::Idle.as_str());
            ad.insert_value(classad::name!("EnteredCurrentState"), now);
            ad.insert_value(classad::name!("EnteredCurrentActivity"), now);
            slots.push(Slot {
                id,
                spec,
                ad,
                static_ad,
                overrides: ClassAd::new(),
                state: State::Owner,
                activity: Activity::Idle,
                entered_state: now,
                entered_activity: now,
                claim: None,
                pending: None,
                job: None,
                match_deadline: None,
                killing_deadline: None,
                retire: Retire::default(),
                retire_deadline: None,
                vacate_ckpt_pending: false,
                backfill_job: None,
                backfill_cause: None,
                cpu_busy_since: None,
                last_periodic_ckpt: None,
                dirty: true,
            });
        }
        let mut s = Startd {
            draining: false,
            policy,
            requirements,
            slots,
            ev: Watched::new(EvalOptions {
                now: Some(now),
                seed: Some(0),
                strict: false,
                ..Default::default()
            }),
            measured: Measurements::default(),
            keyboard_active: now - NO_CONSOLE_IDLE,
            console_active: now - NO_CONSOLE_IDLE,
            activity_set: (None, None),
            activity_measured: (now - NO_CONSOLE_IDLE, now - NO_CONSOLE_IDLE),
            totals: (info.disk_kb, info.virtual_memory_kb),
            last_now: now,
            next_poll: now,
            next_update: now,
            shutdown: None,
            shutdown_reported: false,
            backfill_next: 0,
        };
        s.refresh_all(now);
        Ok(s)
    }

    /// Has `watcher` told, before the startd evaluates anything of a job's
    /// ad, which job's it is, and when it is done (see [`Watcher`]): what
    /// a daemon journals so that a job whose evaluation crashed it is not
    /// evaluated again.
    pub fn set_watcher(&mut self, watcher: Option<Watcher>) {
        self.ev.set_watcher(watcher);
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// All slots, slot 1 first.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// One slot.
    pub fn slot(&self, id: SlotId) -> Option<&Slot> {
        self.index(id).map(|i| &self.slots[i])
    }

    pub(super) fn index(&self, id: SlotId) -> Option<usize> {
        let i = (id as usize).checked_sub(1)?;
        (i < self.slots.len()).then_some(i)
    }

    /// When the startd next needs an event (a [`Event::Tick`] will do):
    /// its next poll or update, or the earliest MATCH_TIMEOUT,
    /// KILLING_TIMEOUT or end of retirement.
    pub fn next_deadline(&self) -> i64 {
        let mut t = self.next_poll.min(self.next_update);
        for s in &self.slots {
            for d in [s.match_deadline, s.killing_deadline, s.retire_deadline].into_iter().flatten()
            {
                t = t.min(d);
            }
        }
        t.min(MAX_TIME)
    }

    /// When the startd next evaluates its policy: every POLLING_INTERVAL
    /// while a slot is matched, claimed, preempting or backfilling, every
    /// UPDATE_INTERVAL otherwise (the spec: an Owner machine is left alone).
    /// The machine's owner activity should be measured just before it.
    pub fn next_poll(&self) -> i64 {
        self.next_poll
    }

    /// The retirement clock of a retiring slot's job and the time the
    /// machine grants it (`None`: unlimited), or `None` when not retiring.
    pub fn retirement(&mut self, id: SlotId, now: i64) -> Option<(i64, Option<i64>)> {
        let i = self.index(id)?;
        if !self.slots[i].retire.active {
            return None;
        }
        let run = self.slots[i].job.as_ref()?.run_time(now);
        self.ev.set_now(Some(now));
        let grant = self.retirement_grant(i);
        self.ev.done();
        Some((run, grant))
    }

    /// Feeds one event at `now` (seconds since the epoch; a virtual clock in
    /// tests) and returns what to do. Time never goes backwards: an earlier
    /// `now` than the last one is taken as the last one.
    pub fn handle(&mut self, now: i64, event: Event) -> Vec<Action> {
        let acts = self.dispatch(now, event);
        self.ev.done();
        acts
    }

    fn dispatch(&mut self, now: i64, event: Event) -> Vec<Action> {
        let now = now.clamp(0, MAX_TIME).max(self.last_now);
        self.last_now = now;
        self.ev.set_now(Some(now));
        let mut acts = Vec::new();
        if let Event::Measured(m) = &event {
            self.measure(now, m.clone());
        }
        // An event of one slot refreshes that slot's ad and those the
        // timers read, not every slot's: a host's cost per job must not grow
        // with its slots. The others are refreshed at the next poll or
        // update, and whenever they are published.
        let target = event.slot().and_then(|id| self.index(id));
        let slots_before = self.slots.len();
        match target {
            Some(t) => self.refresh_for(now, t),
            None => self.refresh_all(now),
        }
        self.timers(now, &mut acts);
        match event {
            Event::Tick => {
                for i in 0..self.slots.len() {
                    self.evaluate(i, now, &mut acts);
                }
                self.timers(now, &mut acts);
                if now >= self.next_update {
                    self.next_update = now.saturating_add(self.policy.update_interval);
                    for s in &mut self.slots {
                        s.dirty = true;
                    }
                }
                let interval = if self.active() {
                    self.policy.polling_interval
                } else {
                    self.policy.update_interval
                };
                self.next_poll = now.saturating_add(interval);
            }
            Event::Measured(_) => {}
            Event::MatchNotified { slot, claim_id } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_match(i, claim_id, now, &mut acts);
                }
            }
            Event::ClaimRequested { slot, claim } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_claim(i, claim, false, now, &mut acts);
                }
            }
            Event::BetterMatch { slot, claim } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_claim(i, claim, true, now, &mut acts);
                }
            }
            Event::ClaimActivated { slot, claim_id, job } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_activate(i, claim_id, job, now, &mut acts);
                }
            }
            Event::JobUpdated { slot, claim_id, attrs } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    let s = &mut self.slots[i];
                    match (&mut s.job, s.claim.as_ref()) {
                        (Some(job), Some(c)) if c.req.claim_id == claim_id => {
                            job.ad.update(&attrs);
                            for n in SLOT_JOB_ATTRS.get() {
                                if let Some(e) = attrs.get(n) {
                                    s.ad.insert(n, e.clone());
                                }
                            }
                            // The policy sees it at once; the collector at
                            // the next update (UPDATE_INTERVAL or a change
                            // of state), not at every report of the job's
                            // memory.
                        }
                        _ => acts.push(Action::EventRejected {
                            reason: format!("slot {slot}: no job on the claim named"),
                        }),
                    }
                }
            }
            Event::ClaimReleased { slot, claim_id } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_release(i, &claim_id, now, &mut acts);
                }
            }
            Event::StarterExited { slot, outcome: _ } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_starter_exit(i, now, &mut acts);
                }
            }
            Event::StarterExitedNext { slot, outcome: _, claim_id, job } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_starter_exit(i, now, &mut acts);
                    // What two events would have seen between them: the
                    // timers of the job's end, and the ads refreshed again.
                    self.timers(now, &mut acts);
                    self.refresh_for(now, i);
                    self.on_activate(i, claim_id, job, now, &mut acts);
                }
            }
            Event::CheckpointFinished { slot, ok: _ } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    let s = &mut self.slots[i];
                    if s.activity == Activity::Vacating && s.vacate_ckpt_pending {
                        s.vacate_ckpt_pending = false;
                        let grace = self.grace(i);
                        acts.push(Action::SoftKill { slot, grace_secs: grace });
                    }
                }
            }
            Event::BenchmarkFinished { slot, mips, kflops } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    let s = &mut self.slots[i];
                    if (s.state, s.activity) == (State::Unclaimed, Activity::Benchmarking) {
                        for (n, v) in [("Mips", mips), ("KFlops", kflops), ("LastBenchmark", now)] {
                            s.ad.insert_value(n, v);
                            s.static_ad.insert_value(n, v);
                        }
                        self.go(i, 4, State::Unclaimed, Activity::Idle, now, &mut acts);
                    }
                }
            }
            Event::BackfillExited { slot } => {
                if let Some(i) = self.slot_or_reject(slot, &mut acts) {
                    self.on_backfill_exit(i, now, &mut acts);
                }
            }
            Event::Vacate { slot, kind } => {
                let targets: Vec<usize> = match slot {
                    Some(id) => self.slot_or_reject(id, &mut acts).into_iter().collect(),
                    None => (0..self.slots.len()).collect(),
                };
                for i in targets {
                    self.on_vacate(i, kind, now, &mut acts);
                }
            }
            Event::Drain { kind } => self.drain(kind, now, &mut acts),
            Event::CancelDrain => self.cancel_drain(now, &mut acts),
            Event::CheckpointNow { slot } => self.checkpoint_now(slot, now, &mut acts),
            Event::Shutdown(kind) => self.begin_shutdown(kind, now, &mut acts),
            Event::SetAttribute { slot, name, value } => {
                let targets: Vec<usize> = match slot {
                    Some(id) => self.slot_or_reject(id, &mut acts).into_iter().collect(),
                    None => (0..self.slots.len()).collect(),
                };
                self.set_attribute(&targets, &name, value, now, &mut acts);
            }
        }
        // The event may have changed what the timers look at (a retirement
        // time lowered, a job gone).
        self.timers(now, &mut acts);
        // A slot that became busy is polled every POLLING_INTERVAL from now
        // on, not at the next poll of an idle machine (UPDATE_INTERVAL away):
        // a new job's SUSPEND or PREEMPT is seen within POLLING_INTERVAL.
        if self.active() {
            let poll = now.saturating_add(self.policy.polling_interval.max(1));
            self.next_poll = self.next_poll.min(poll);
        }
        if self.shutdown.is_some()
            && !self.shutdown_reported
            && self
                .slots
                .iter()
                .all(|s| matches!(s.state, State::Owner | State::Drained) && s.job.is_none())
        {
            self.shutdown_reported = true;
            acts.push(Action::ShutdownComplete);
        }
        let dirty: Vec<usize> = (0..self.slots.len()).filter(|&i| self.slots[i].dirty).collect();
        if !dirty.is_empty() {
            // What is published is fresh; a slot added or removed may change
            // every slot's share of the machine.
            if target.is_some() && self.slots.len() == slots_before {
                self.refresh(now, |_, s| s.dirty);
            } else {
                self.refresh_all(now);
            }
            for i in dirty {
                let s = &mut self.slots[i];
                s.dirty = false;
                acts.push(Action::Publish { slot: s.id, ad: s.ad.clone() });
            }
        }
        acts
    }

    /// Refreshes what an event of slot `i` refreshes: its own ad, and those
    /// the timers read.
    fn refresh_for(&mut self, now: i64, i: usize) {
        self.refresh(now, |j, s| j == i || s.timed());
    }

    /// Whether any slot is matched, claimed, preempting or backfilling:
    /// the startd polls every POLLING_INTERVAL then, else every
    /// UPDATE_INTERVAL.
    fn active(&self) -> bool {
        self.slots.iter().any(|s| {
            !matches!((s.state, s.activity), (State::Owner, _) | (State::Unclaimed, Activity::Idle))
        })
    }

    pub(super) fn slot_or_reject(&self, id: SlotId, acts: &mut Vec<Action>) -> Option<usize> {
        let i = self.index(id);
        if i.is_none() {
            acts.push(Action::EventRejected {
                reason: format!("no slot {id} (this startd has {})", self.slots.len()),
            });
        }
        i
    }
}
