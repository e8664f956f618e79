//! Long random event sequences against the startd's invariants.

use crate::common;

use std::collections::HashMap;

use andes_startd::{
    Action, Activity, Event, Measurements, ShutdownKind, SlotId, StarterOutcome, State, VacateKind,
};
use classad::{parse_ad, parse_expr};
use common::*;
use proptest::prelude::*;

const JOBS: [&str; 4] = [
    "[ ClusterId = 1; ProcId = 0; JobUniverse = 5; ImageSize = 200000 ]",
    "[ ClusterId = 2; ProcId = 0; ImageSize = 1000; WasmCheckpoint = \"transparent\"; NumCkpts = 0 ]",
    "[ ClusterId = 3; ProcId = 0; ImageSize = 90000; WasmCheckpoint = \"cooperative\"; \
       MaxJobRetirementTime = 120 ]",
    "[ ClusterId = 4; ProcId = 0; ImageSize = 200000; MaxJobRetirementTime = 100000 ]",
];

fn valid(state: State, activity: Activity) -> bool {
    use Activity::*;
    match state {
        State::Owner | State::Matched => activity == Idle,
        State::Unclaimed => matches!(activity, Idle | Benchmarking),
        State::Claimed => matches!(activity, Idle | Busy | Suspended | Retiring),
        State::Preempting => matches!(activity, Vacating | Killing),
        State::Backfill => matches!(activity, Idle | Busy | Killing),
        State::Drained => activity == Idle,
    }
}

/// The edges of the manual's state diagram (Figure 3.4), by number: each
/// number labels exactly these (from, to) pairs and no other.
fn edges(number: u8) -> Vec<((State, Activity), (State, Activity))> {
    use Activity::*;
    use State::*;
    let preempting = |from| vec![(from, (Preempting, Vacating)), (from, (Preempting, Killing))];
    // Draining, each edge to Owner ends in Drained instead.
    let to_owner = |from| vec![(from, (Owner, Idle)), (from, (Drained, Idle))];
    match number {
        1 => vec![((Owner, Idle), (Unclaimed, Idle))],
        2 => to_owner((Unclaimed, Idle)),
        3 => vec![((Unclaimed, Idle), (Unclaimed, Benchmarking))],
        4 => vec![((Unclaimed, Benchmarking), (Unclaimed, Idle))],
        5 => vec![((Unclaimed, Idle), (Claimed, Idle))],
        6 => vec![((Unclaimed, Idle), (Matched, Idle))],
        7 => vec![((Unclaimed, Idle), (Backfill, Idle))],
        8 => to_owner((Matched, Idle)),
        9 => vec![((Matched, Idle), (Claimed, Idle))],
        10 => preempting((Claimed, Idle)),
        11 => vec![((Claimed, Idle), (Claimed, Busy))],
        12 => vec![((Claimed, Busy), (Claimed, Idle))],
        13 => vec![((Claimed, Busy), (Claimed, Retiring))],
        14 => vec![((Claimed, Busy), (Claimed, Suspended))],
        15 => vec![((Claimed, Suspended), (Claimed, Busy))],
        16 => vec![((Claimed, Suspended), (Claimed, Retiring))],
        17 => preempting((Claimed, Suspended)),
        18 => preempting((Claimed, Retiring)),
        19 => vec![((Claimed, Retiring), (Claimed, Busy))],
        20 => vec![((Claimed, Retiring), (Claimed, Suspended))],
        21 => vec![((Preempting, Vacating), (Preempting, Killing))],
        22 => to_owner((Preempting, Vacating)),
        23 => vec![((Preempting, Vacating), (Claimed, Idle))],
        24 => vec![((Preempting, Killing), (Claimed, Idle))],
        25 => to_owner((Preempting, Killing)),
        26 => vec![((Backfill, Idle), (Backfill, Busy))],
        27 => vec![((Backfill, Busy), (Backfill, Idle))],
        28 => vec![((Backfill, Busy), (Backfill, Killing))],
        29 => vec![((Backfill, Killing), (Backfill, Idle))],
        30 => to_owner((Backfill, Idle)),
        31 => vec![((Backfill, Idle), (Claimed, Idle))],
        32 => vec![((Backfill, Idle), (Matched, Idle))],
        // condor_drain and its cancel (no number in the manual's diagram).
        40 => vec![((Owner, Idle), (Drained, Idle))],
        41 => vec![((Drained, Idle), (Owner, Idle))],
        _ => vec![],
    }
}

#[derive(Default)]
struct Model {
    at: HashMap<SlotId, (State, Activity)>,
    starter: HashMap<SlotId, bool>,
    suspended: HashMap<SlotId, bool>,
}

fn event(op: u8, slot: SlotId, id: u8, h: &Harness) -> Event {
    let claim_id = format!("c{id}");
    let job = JOBS[id as usize % JOBS.len()];
    match op {
        0..=4 => Event::Tick,
        5 => Event::Measured(Measurements {
            load_avg: (id as f64) * 0.4,
            keyboard_idle: [0, 30, 400, 5000][id as usize % 4],
            console_idle: 5000,
            condor_load: vec![],
            utc_offset: 0,
            ..Measurements::default()
        }),
        6 => Event::MatchNotified { slot, claim_id },
        7 | 8 => Event::ClaimRequested { slot, claim: request(&claim_id, job) },
        9 | 10 => {
            // Usually the real claim id, so jobs do start.
            let claim_id =
                h.sd.slot(slot)
                    .and_then(|s| s.claim_id().map(str::to_string))
                    .filter(|_| id != 0)
                    .unwrap_or(claim_id);
            Event::ClaimActivated { slot, claim_id, job: parse_ad(job).unwrap() }
        }
        11 => Event::ClaimReleased { slot, claim_id },
        12 | 13 => Event::StarterExited { slot, outcome: StarterOutcome::Completed },
        14 => Event::CheckpointFinished { slot, ok: id & 1 == 0 },
        15 => Event::BackfillExited { slot },
        16 => Event::Vacate {
            slot: if id == 3 { None } else { Some(slot) },
            kind: if id & 1 == 0 { VacateKind::Graceful } else { VacateKind::Fast },
        },
        17 => Event::BetterMatch { slot, claim: request(&claim_id, job) },
        18 => Event::SetAttribute {
            slot: Some(slot),
            name: "MaxJobRetirementTime".into(),
            value: if id == 0 {
                None
            } else {
                Some(parse_expr(&(id as i64 * 90).to_string()).unwrap())
            },
        },
        19 => Event::BenchmarkFinished { slot, mips: 100, kflops: 100 },
        20 => {
            Event::Drain { kind: if id & 1 == 0 { VacateKind::Graceful } else { VacateKind::Fast } }
        }
        21 => Event::CancelDrain,
        _ => Event::Shutdown(match id % 3 {
            0 => ShutdownKind::Graceful,
            1 => ShutdownKind::Peaceful,
            _ => ShutdownKind::Fast,
        }),
    }
}

fn check(
    h: &mut Harness,
    m: &mut Model,
    acts: &[Action],
    had_job: &HashMap<SlotId, bool>,
    ev: &Event,
) {
    let mut started: HashMap<SlotId, u32> = HashMap::new();
    for a in acts {
        match a {
            Action::Transition { slot, number, from, to } => {
                assert!(
                    edges(*number).contains(&(*from, *to)),
                    "transition {number} labels {from:?} -> {to:?}, not an edge the manual \
                     gives that number"
                );
                let prev = m.at.get(slot).copied().unwrap_or((State::Owner, Activity::Idle));
                assert_eq!(*from, prev, "transition {number} of slot {slot} from a stale state");
                assert!(valid(to.0, to.1), "{to:?}");
                if from.0 == State::Preempting && to.0 != State::Preempting {
                    assert!(
                        *to == (State::Owner, Activity::Idle)
                            || *to == (State::Drained, Activity::Idle)
                            || *to == (State::Claimed, Activity::Idle),
                        "Preempting ended in {to:?}"
                    );
                }
                m.at.insert(*slot, *to);
            }
            Action::StartJob { slot, .. } => {
                let exited_now = matches!(ev, Event::StarterExited { slot: s, .. } if s == slot);
                assert!(
                    !m.starter.get(slot).copied().unwrap_or(false) || exited_now,
                    "a second job on slot {slot}"
                );
                assert!(!had_job.get(slot).copied().unwrap_or(false) || exited_now);
                *started.entry(*slot).or_default() += 1;
                m.starter.insert(*slot, true);
                m.suspended.insert(*slot, false);
            }
            Action::Suspend { slot } => {
                m.suspended.insert(*slot, true);
            }
            Action::Continue { slot } => {
                m.suspended.insert(*slot, false);
            }
            Action::SoftKill { slot, .. } => {
                // The notice resumes a suspended job that can hear it (or
                // ends one that cannot).
                m.suspended.insert(*slot, false);
            }
            _ => {}
        }
    }
    assert!(started.values().all(|&n| n <= 1));
    if let Event::StarterExited { slot, .. } = ev
        && !started.contains_key(slot)
    {
        m.starter.insert(*slot, false);
    }
    let now = h.now;
    for id in 1..=h.sd.slots().len() as SlotId {
        let s = h.sd.slot(id).unwrap();
        let (state, activity) = (s.state(), s.activity());
        assert!(valid(state, activity));
        assert_eq!(
            m.at.get(&id).copied().unwrap_or((State::Owner, Activity::Idle)),
            (state, activity)
        );
        // No job runs while Suspended; a suspended job is in Suspended.
        if activity == Activity::Suspended {
            assert!(s.job_suspended());
            assert!(m.suspended.get(&id).copied().unwrap_or(false));
        }
        if matches!(activity, Activity::Busy | Activity::Retiring | Activity::Vacating)
            && state != State::Backfill
        {
            assert!(!s.job_suspended());
            assert!(!m.suspended.get(&id).copied().unwrap_or(false), "slot {id} {activity:?}");
        }
        if state == State::Claimed && activity != Activity::Idle {
            assert!(s.job().is_some());
        }
        // Retirement never exceeds what the machine grants.
        if activity == Activity::Retiring
            && let Some((run, Some(grant))) = h.sd.retirement(id, now)
        {
            assert!(run <= grant, "slot {id}: retired {run} s of {grant}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_event_sequences_keep_the_invariants(
        steps in prop::collection::vec((0u8..23, 1u32..3, 0i64..400, 0u8..4), 1..300)
    ) {
        let mut h = Harness::idle(2, &[
            andes_startd::policy::BACKFILL_EXAMPLE,
            "MAXJOBRETIREMENTTIME = 300\nRunBenchmarks = (LastBenchmark == 0)",
        ]);
        let mut m = Model::default();
        for (op, slot, dt, id) in steps {
            // The daemon wakes the startd at each of its deadlines.
            let target = h.now + dt;
            for _ in 0..10_000 {
                let d = h.sd.next_deadline();
                if d > target {
                    break;
                }
                h.now = d.max(h.now);
                let had: HashMap<SlotId, bool> =
                    h.sd.slots().iter().map(|s| (s.id(), s.job().is_some())).collect();
                let acts = h.tick();
                check(&mut h, &mut m, &acts, &had, &Event::Tick);
                if h.sd.next_deadline() <= h.now {
                    break;
                }
            }
            h.now = target;
            let ev = event(op, slot, id, &h);
            let had: HashMap<SlotId, bool> =
                h.sd.slots().iter().map(|s| (s.id(), s.job().is_some())).collect();
            let acts = h.ev(ev.clone());
            check(&mut h, &mut m, &acts, &had, &ev);
        }
    }
}
