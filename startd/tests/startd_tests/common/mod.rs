//! A virtual-clock driver for the startd, shared by the tests.
#![allow(dead_code)]

use andes_startd::{
    Action, Activity, ClaimRequest, Event, MachineInfo, Measurements, Policy, SlotId, Startd,
    State, default_config,
};
use classad::{ClassAd, parse_ad, parse_expr};

/// Tuesday 14 November 2023, 22:13:20 UTC.
pub const T0: i64 = 1_700_000_000;

pub struct Harness {
    pub sd: Startd,
    pub now: i64,
    pub log: Vec<Action>,
}

pub fn policy(extra: &[&str]) -> Policy {
    let mut cfg = default_config();
    for (n, text) in extra.iter().enumerate() {
        cfg.load_str(text, &format!("extra{n}.config")).unwrap();
    }
    Policy::from_config(&cfg).unwrap()
}

impl Harness {
    pub fn new(cpus: u32, extra: &[&str]) -> Harness {
        let info = MachineInfo { cpus, memory_mb: 4096 * cpus as u64, ..MachineInfo::default() };
        Harness { sd: Startd::new(policy(extra), &info, T0).unwrap(), now: T0, log: Vec::new() }
    }

    /// A machine whose keyboard has been idle for an hour, with no load.
    pub fn idle(cpus: u32, extra: &[&str]) -> Harness {
        let mut h = Harness::new(cpus, extra);
        h.measure(0.0, 3600);
        h
    }

    pub fn ev(&mut self, e: Event) -> Vec<Action> {
        let a = self.sd.handle(self.now, e);
        self.log.extend(a.iter().cloned());
        a
    }

    pub fn tick(&mut self) -> Vec<Action> {
        self.ev(Event::Tick)
    }

    pub fn measure(&mut self, load: f64, keyboard_idle: i64) -> Vec<Action> {
        let condor = self
            .sd
            .slots()
            .iter()
            .map(|s| if s.job().is_some() && !s.job_suspended() { 1.0 } else { 0.0 })
            .collect::<Vec<_>>();
        let total = load + condor.iter().sum::<f64>();
        self.ev(Event::Measured(Measurements {
            load_avg: total,
            keyboard_idle,
            console_idle: keyboard_idle,
            condor_load: condor,
            utc_offset: 0,
            ..Measurements::default()
        }))
    }

    /// Touch the keyboard now.
    pub fn touch(&mut self) -> Vec<Action> {
        self.ev(Event::SetAttribute {
            slot: None,
            name: "KeyboardIdle".into(),
            value: Some(parse_expr("0").unwrap()),
        })
    }

    /// Moves the clock to `now + by`, waking the startd at each of its
    /// deadlines on the way (as the daemon does), then once at the end.
    pub fn advance(&mut self, by: i64) -> Vec<Action> {
        let end = self.now + by;
        let mut out = Vec::new();
        for _ in 0..100_000 {
            let d = self.sd.next_deadline();
            if d > end {
                break;
            }
            self.now = d.max(self.now);
            out.extend(self.tick());
            if self.sd.next_deadline() <= self.now {
                break;
            }
        }
        self.now = end;
        out.extend(self.tick());
        out
    }

    pub fn sa(&self, slot: SlotId) -> (State, Activity) {
        let s = self.sd.slot(slot).unwrap();
        (s.state(), s.activity())
    }

    pub fn claim(&mut self, slot: SlotId, id: &str, ad: &str) -> Vec<Action> {
        self.ev(Event::ClaimRequested { slot, claim: request(id, ad) })
    }

    pub fn activate(&mut self, slot: SlotId, id: &str, job: &str) -> Vec<Action> {
        self.ev(Event::ClaimActivated { slot, claim_id: id.into(), job: parse_ad(job).unwrap() })
    }

    /// Owner → Unclaimed → Claimed/Idle → Claimed/Busy with `job`.
    pub fn run_job(&mut self, slot: SlotId, job: &str) {
        self.tick();
        self.claim(slot, "c1", job);
        self.activate(slot, "c1", job);
        assert_eq!(self.sa(slot), (State::Claimed, Activity::Busy));
    }
}

pub fn request(id: &str, ad: &str) -> ClaimRequest {
    ClaimRequest {
        claim_id: id.into(),
        client_machine: "submit.example.org".into(),
        owner: "alice".into(),
        user: None,
        ad: parse_ad(ad).unwrap(),
    }
}

pub fn numbers(acts: &[Action]) -> Vec<u8> {
    acts.iter()
        .filter_map(|a| match a {
            Action::Transition { number, .. } => Some(*number),
            _ => None,
        })
        .collect()
}

pub fn has(acts: &[Action], want: &Action) -> bool {
    acts.iter().any(|a| a == want)
}

pub fn published(acts: &[Action], slot: SlotId) -> Option<&ClassAd> {
    acts.iter().rev().find_map(|a| match a {
        Action::Publish { slot: s, ad } if *s == slot => Some(ad),
        _ => None,
    })
}

/// A big vanilla-style job that cannot checkpoint (WANT_SUSPEND true via IsVanilla).
pub const VANILLA: &str =
    "[ ClusterId = 7; ProcId = 0; JobUniverse = 5; ImageSize = 200000; Owner = \"alice\" ]";
/// A big job that can checkpoint and that the default policy does not suspend
/// while the keyboard is busy (not small, not vanilla).
pub const CKPT: &str = "[ ClusterId = 8; ProcId = 1; JobUniverse = 1; ImageSize = 200000; \
                        Owner = \"bob\"; WasmCheckpoint = \"transparent\"; NumCkpts = 0 ]";
