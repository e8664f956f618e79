//! The slot's machine ad: the measurements taken, the attributes refreshed at
//! every event (load, idle times, clock, claim and job times, CpuIsBusy,
//! cross-slot attributes), the owner's load spread over the slots, and
//! attributes set by hand (`andes host set-attr`).

use classad::Expr;

use super::policy_eval::{names, truthy};
use super::{Action, Measurements, NO_CONSOLE_IDLE, Slot, Startd, State};

/// Attributes only the startd sets.
const MANAGED: [&str; 10] = [
    "State",
    "Activity",
    "EnteredCurrentState",
    "EnteredCurrentActivity",
    "Requirements",
    "MyType",
    "TargetType",
    "Name",
    "SlotID",
    "VirtualMachineID",
];

/// Spreads the load that is not andes's jobs' (the owner's) over the slots
/// as HTCondor's startd does: the least busy slots take it first (Owner,
/// then Unclaimed, Matched, Claimed, Preempting, Backfill; by slot number
/// within a state), each a full load on each of its CPUs while more is left,
/// the last one reached taking what remains. So an owner's load shows on a
/// slot running a job only once the idle slots are full, and each slot's
/// LoadAvg is its CondorLoadAvg plus its share, the shares summing to the
/// machine's owner load.
fn owner_loads(slots: &[Slot], total: f64) -> Vec<f64> {
    let rank = |st: State| match st {
        State::Owner | State::Drained => 0,
        State::Unclaimed => 1,
        State::Matched => 2,
        State::Claimed => 3,
        State::Preempting => 4,
        State::Backfill => 5,
    };
    let mut order: Vec<usize> = (0..slots.len()).collect();
    order.sort_by_key(|&i| rank(slots[i].state));
    let mut out = vec![0.0; slots.len()];
    let mut left = total.max(0.0);
    for (k, &i) in order.iter().enumerate() {
        let cpus = slots[i].spec.cpus.max(1) as f64;
        if k + 1 < order.len() && left > cpus {
            out[i] = cpus;
            left -= cpus;
        } else {
            out[i] = left;
            break;
        }
    }
    out
}

/// A slot's part of `now`, as `part` was of `whole` (1/`n` when `whole`
/// was unknown).
fn share(part: u64, whole: u64, now: u64, n: usize) -> u64 {
    if whole > 0 {
        (now as u128 * part.min(whole) as u128 / whole as u128) as u64
    } else {
        now / n.max(1) as u64
    }
}

/// The running job's attributes a slot's ad carries while it runs, kept
/// current from the starter (HTCondor's STARTD_JOB_ATTRS).
pub static SLOT_JOB_ATTRS: classad::Names<6> = classad::Names::new(JOB_ATTRS);

const JOB_ATTRS: [&str; 6] =
    ["JobUniverse", "ImageSize", "MemoryUsage", "ResidentSetSize", "ExecutableSize", "NiceUser"];

/// What a slot's ad loses when its job ends: the job's id, its start, its
/// last periodic checkpoint and [`SLOT_JOB_ATTRS`].
pub(super) static SLOT_JOB_ENDED: classad::Names<9> = classad::Names::new({
    let mut all = ["JobId", "JobStart", "LastPeriodicCheckpoint", "", "", "", "", "", ""];
    let mut i = 0;
    while i < JOB_ATTRS.len() {
        all[3 + i] = JOB_ATTRS[i];
        i += 1;
    }
    all
});

impl Startd {
    pub(super) fn measure(&mut self, now: i64, m: Measurements) {
        let clamp = |x: i64| x.clamp(0, NO_CONSOLE_IDLE);
        // A value set by hand stands until the machine's own activity is more
        // recent: measuring every few seconds never undoes it.
        let (kb, con) = self.activity_set;
        self.activity_measured = (now - clamp(m.keyboard_idle), now - clamp(m.console_idle));
        self.keyboard_active = self.activity_measured.0.max(kb.unwrap_or(i64::MIN));
        self.console_active = self.activity_measured.1.max(con.unwrap_or(i64::MIN));
        self.measured = m;
    }

    pub(super) fn refresh_all(&mut self, now: i64) {
        self.refresh(now, |_, _| true);
    }

    /// Refreshes the ads of the slots `which` picks (by index and slot):
    /// what changes with time, measurements and the slot's claim and job.
    /// Every slot's when another slot's attributes are copied into each
    /// ad (STARTD_SLOT_ATTRS), since those are read from the others.
    pub(super) fn refresh(&mut self, now: i64, which: impl Fn(usize, &Slot) -> bool) {
        let all = !self.policy.cross_slot_attrs.is_empty();
        let m = &self.measured;
        let nm = names();
        let local = now.saturating_add(m.utc_offset as i64);
        let clock_min = local.rem_euclid(86_400) / 60;
        let clock_day = (local.div_euclid(86_400) + 4).rem_euclid(7);
        let sane = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
        let condor: Vec<f64> = (0..self.slots.len())
            .map(|i| sane(m.condor_load.get(i).copied().unwrap_or(0.0)))
            .collect();
        let owner = owner_loads(&self.slots, sane(m.load_avg) - condor.iter().sum::<f64>());
        let keyboard_idle = (now - self.keyboard_active).clamp(0, NO_CONSOLE_IDLE);
        let console_idle = (now - self.console_active).clamp(0, NO_CONSOLE_IDLE);
        let n = self.slots.len();
        let totals = self.totals;
        for (i, ((s, &own), &mine)) in
            self.slots.iter_mut().zip(condor.iter()).zip(owner.iter()).enumerate()
        {
            if !all && !which(i, s) {
                continue;
            }
            let ad = &mut s.ad;
            // Disk and VirtualMemory are what is free now, each slot keeping
            // its share (the spec: the space available in EXECUTE).
            if let Some(free) = m.disk_free_kb {
                ad.insert_value(
                    classad::name!("Disk"),
                    share(s.spec.disk_kb, totals.0, free, n) as i64,
                );
            }
            if let Some(free) = m.swap_free_kb {
                ad.insert_value(
                    "VirtualMemory",
                    share(s.spec.virtual_memory_kb, totals.1, free, n) as i64,
                );
            }
            ad.insert_value(nm.loadavg.clone(), own + mine);
            ad.insert_value(nm.condorloadavg.clone(), own);
            ad.insert_value(nm.keyboardidle.clone(), keyboard_idle);
            ad.insert_value(nm.consoleidle.clone(), console_idle.max(keyboard_idle));
            ad.insert_value(nm.clockmin.clone(), clock_min);
            ad.insert_value(nm.clockday.clone(), clock_day);
            match &s.claim {
                Some(c) => {
                    let (jr, js) =
                        s.job.as_ref().map_or((0, 0), |j| (j.run_time(now), j.suspend_time(now)));
                    ad.insert_value(nm.totalclaimruntime.clone(), c.run_time + jr);
                    ad.insert_value(nm.totalclaimsuspendtime.clone(), c.suspend_time + js);
                }
                None => {
                    ad.remove(nm.totalclaimruntime.as_str());
                    ad.remove(nm.totalclaimsuspendtime.as_str());
                }
            }
            match &s.job {
                Some(j) => {
                    ad.insert_value(nm.totaljobruntime.clone(), j.run_time(now));
                    ad.insert_value(nm.totaljobsuspendtime.clone(), j.suspend_time(now));
                }
                None => {
                    ad.remove(nm.totaljobruntime.as_str());
                    ad.remove(nm.totaljobsuspendtime.as_str());
                }
            }
            for (name, e) in &self.policy.startd_attrs {
                ad.insert(name.as_str(), e.clone());
            }
            for (name, e) in s.overrides.iter() {
                ad.insert(name.clone(), e.clone());
            }
            let busy = truthy(&self.ev.eval(&self.policy.cpu_busy, Some(&s.ad), None));
            if busy {
                s.cpu_busy_since.get_or_insert(now);
            } else {
                s.cpu_busy_since = None;
            }
            s.ad.insert_value(nm.cpuisbusy.clone(), busy);
            s.ad.insert_value(nm.cpubusytime.clone(), s.cpu_busy_since.map_or(0, |t| now - t));
        }
        if !self.policy.cross_slot_attrs.is_empty() {
            let mut vals = Vec::new();
            for s in &self.slots {
                for a in &self.policy.cross_slot_attrs {
                    vals.push((s.id, a.as_str(), self.ev.eval_attr(&s.ad, None, a)));
                }
            }
            for s in &mut self.slots {
                for (id, a, v) in &vals {
                    s.ad.insert_value(format!("slot{id}_{a}").as_str(), v.clone());
                    s.ad.insert_value(format!("vm{id}_{a}").as_str(), v.clone());
                }
            }
        }
    }

    pub(super) fn set_attribute(
        &mut self,
        targets: &[usize],
        name: &str,
        value: Option<Expr>,
        now: i64,
        acts: &mut Vec<Action>,
    ) {
        let lname = name.to_ascii_lowercase();
        if name.is_empty() || MANAGED.iter().any(|m| m.eq_ignore_ascii_case(name)) {
            acts.push(Action::EventRejected {
                reason: format!(
                    "`{name}` is not an attribute that can be set: the startd manages it"
                ),
            });
            return;
        }
        if lname == "keyboardidle" || lname == "consoleidle" {
            let secs = match &value {
                None => None,
                Some(e) => match self.ev.eval(e, None, None).as_int() {
                    Some(v) => Some(v.clamp(0, NO_CONSOLE_IDLE)),
                    None => {
                        acts.push(Action::EventRejected {
                            reason: format!("{name} must be a number of seconds, not {e}"),
                        });
                        return;
                    }
                },
            };
            // Cleared, the last measurement's value is back.
            let at = secs.map(|s| now - s);
            if lname == "keyboardidle" {
                self.activity_set.0 = at;
                self.keyboard_active = at.unwrap_or(self.activity_measured.0);
            } else {
                self.activity_set.1 = at;
                self.console_active = at.unwrap_or(self.activity_measured.1);
            }
        } else {
            for &i in targets {
                let s = &mut self.slots[i];
                match &value {
                    Some(e) => {
                        s.overrides.insert(name, e.clone());
                        s.ad.insert(name, e.clone());
                    }
                    None => {
                        s.overrides.remove(name);
                        match s.static_ad.get(name) {
                            Some(e) => {
                                let e = e.clone();
                                s.ad.insert(name, e);
                            }
                            None => {
                                s.ad.remove(name);
                            }
                        }
                    }
                }
            }
        }
        for &i in targets {
            self.slots[i].dirty = true;
        }
        self.refresh_all(now);
    }
}
