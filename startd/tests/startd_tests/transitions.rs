//! Every numbered transition of the spec's state and activity diagram, each
//! driven on a virtual clock with the default policy unless a test says
//! otherwise.

use crate::common;

use andes_startd::{
    Action, Activity, CheckpointKind, Event, ShutdownKind, StarterOutcome, State, VacateKind,
};
use classad::{Value, parse_expr};
use common::*;

const RETIRE_HOUR: &str = "MAXJOBRETIREMENTTIME = 3600";
const BACKFILL: &str = andes_startd::policy::BACKFILL_EXAMPLE;

fn exited(h: &mut Harness, slot: u32) -> Vec<Action> {
    h.ev(Event::StarterExited { slot, outcome: StarterOutcome::Completed })
}

#[test]
fn transition_1_owner_to_unclaimed_when_is_owner_is_false() {
    let mut h = Harness::new(1, &[]);
    h.measure(0.0, 100); // keyboard touched 100 s ago: START is FALSE
    assert_eq!(numbers(&h.tick()), Vec::<u8>::new());
    assert_eq!(h.sa(1), (State::Owner, Activity::Idle));
    h.measure(0.0, 901);
    assert_eq!(numbers(&h.tick()), vec![1]);
    assert_eq!(h.sa(1), (State::Unclaimed, Activity::Idle));
}

#[test]
fn transition_2_unclaimed_to_owner_when_start_turns_false() {
    let mut h = Harness::idle(1, &[]);
    h.tick();
    h.touch();
    let a = h.tick();
    assert_eq!(numbers(&a), vec![2]);
    assert_eq!(published(&a, 1).unwrap().eval_attr("State"), Value::from("Owner"));
}

#[test]
fn transition_3_unclaimed_idle_to_benchmarking() {
    let mut h = Harness::idle(1, &["RunBenchmarks = (LastBenchmark == 0)"]);
    assert_eq!(numbers(&h.tick()), vec![1]);
    let a = h.tick();
    assert_eq!(numbers(&a), vec![3]);
    assert!(has(&a, &Action::RunBenchmarks { slot: 1 }));
    assert_eq!(h.sa(1), (State::Unclaimed, Activity::Benchmarking));
}

#[test]
fn transition_4_benchmarking_to_idle_with_the_results() {
    let mut h = Harness::idle(1, &["RunBenchmarks = (LastBenchmark == 0)"]);
    h.tick();
    h.tick();
    h.now += 20;
    let a = h.ev(Event::BenchmarkFinished { slot: 1, mips: 5000, kflops: 900_000 });
    assert_eq!(numbers(&a), vec![4]);
    let ad = published(&a, 1).unwrap();
    assert_eq!(ad.eval_attr("Mips"), Value::Int(5000));
    assert_eq!(ad.eval_attr("LastBenchmark"), Value::Int(T0 + 20));
    // LastBenchmark is no longer 0: no more benchmarks.
    assert_eq!(numbers(&h.tick()), Vec::<u8>::new());
}

#[test]
fn transition_5_unclaimed_to_claimed_when_the_claim_comes_first() {
    let mut h = Harness::idle(1, &[]);
    h.tick();
    let a = h.claim(1, "c1", VANILLA);
    assert_eq!(numbers(&a), vec![5]);
    assert!(has(&a, &Action::ClaimAccepted { slot: 1, claim_id: "c1".into() }));
    let ad = published(&a, 1).unwrap();
    assert_eq!(ad.eval_attr("RemoteOwner"), Value::from("alice"));
    assert_eq!(ad.eval_attr("ClientMachine"), Value::from("submit.example.org"));
}

#[test]
fn transition_6_unclaimed_to_matched_advertising_requirements_false() {
    let mut h = Harness::idle(1, &[]);
    h.tick();
    let a = h.ev(Event::MatchNotified { slot: 1, claim_id: "c1".into() });
    assert_eq!(numbers(&a), vec![6]);
    assert_eq!(published(&a, 1).unwrap().eval_attr("Requirements"), Value::Bool(false));
}

#[test]
fn transition_8_matched_to_owner_at_match_timeout() {
    let mut h = Harness::idle(1, &[]);
    h.tick();
    h.ev(Event::MatchNotified { slot: 1, claim_id: "c1".into() });
    // Polled every POLLING_INTERVAL while a slot is busy; the timeout is
    // judged at each poll and at its own deadline.
    assert_eq!(h.sd.next_deadline(), T0 + 5);
    assert_eq!(numbers(&h.advance(119)), Vec::<u8>::new());
    assert_eq!(h.sa(1).0, State::Matched);
    let a = h.advance(1);
    assert_eq!(numbers(&a)[0], 8);
    assert!(h.log.iter().any(|x| matches!(x, Action::Transition { number: 8, .. })));
}

#[test]
fn transition_8_matched_to_owner_when_start_is_locally_false() {
    let mut h = Harness::idle(1, &[]);
    h.tick();
    h.ev(Event::MatchNotified { slot: 1, claim_id: "c1".into() });
    h.touch();
    assert_eq!(numbers(&h.tick()), vec![8]);
    assert_eq!(h.sa(1), (State::Owner, Activity::Idle));
}

#[test]
fn transition_9_matched_to_claimed() {
    let mut h = Harness::idle(1, &[]);
    h.tick();
    h.ev(Event::MatchNotified { slot: 1, claim_id: "c1".into() });
    let a = h.claim(1, "c1", VANILLA);
    assert_eq!(numbers(&a), vec![9]);
    assert_eq!(h.sa(1), (State::Claimed, Activity::Idle));
    assert_eq!(h.sd.slot(1).unwrap().claim_id(), Some("c1"));
}

#[test]
fn transition_10_claimed_idle_to_preempting_on_vacate() {
    let mut h = Harness::idle(1, &[]);
    h.tick();
    h.claim(1, "c1", VANILLA);
    let a = h.ev(Event::Vacate { slot: Some(1), kind: VacateKind::Graceful });
    assert_eq!(numbers(&a), vec![10, 22]);
    assert!(has(&a, &Action::ClaimBroken { slot: 1, claim_id: "c1".into() }));
    assert_eq!(h.sa(1), (State::Owner, Activity::Idle));
}

#[test]
fn transition_10_claimed_idle_to_preempting_when_start_is_false() {
    let mut h = Harness::idle(1, &[]);
    h.tick();
    h.claim(1, "c1", VANILLA);
    h.touch();
    assert_eq!(numbers(&h.tick()), vec![10, 22]);
}

#[test]
fn transition_10_judges_start_against_the_last_job_the_claim_ran_not_its_request() {
    // The claim was made for alice's job; the schedd then ran bob's on it.
    // Between jobs, START is judged against the job the claim now stands
    // for (bob's), as HTCondor's startd does, so the claim is preempted.
    let mut h = Harness::idle(1, &["START = TARGET.Owner =!= \"bob\" || MY.LetBob =?= True"]);
    let let_bob = |on: bool| Event::SetAttribute {
        slot: Some(1),
        name: "LetBob".into(),
        value: on.then(|| parse_expr("True").unwrap()),
    };
    h.ev(let_bob(true));
    h.tick();
    h.claim(1, "c1", VANILLA);
    let bob = VANILLA.replace("alice", "bob");
    assert_eq!(numbers(&h.activate(1, "c1", &bob)), vec![11]);
    h.ev(let_bob(false));
    assert_eq!(numbers(&exited(&mut h, 1)), vec![12]);
    let a = h.tick();
    assert_eq!(numbers(&a), vec![10, 22]);
    assert!(has(&a, &Action::ClaimBroken { slot: 1, claim_id: "c1".into() }));
}

#[test]
fn a_job_that_ends_while_suspended_leaves_by_the_diagrams_edges() {
    // The diagram has no edge from Suspended to Idle: the job is no longer
    // suspended (15), then its starter has exited (12). In retirement, a
    // suspended job's end is 17 (Suspended to Preempting).
    let mut h = Harness::idle(1, &[]);
    h.run_job(1, VANILLA);
    h.touch();
    assert_eq!(numbers(&h.tick()), vec![14]);
    let a = exited(&mut h, 1);
    assert_eq!(numbers(&a), vec![15, 12]);
    assert!(!has(&a, &Action::Continue { slot: 1 }));
    assert_eq!(h.sa(1), (State::Claimed, Activity::Idle));
}

#[test]
fn transition_11_claimed_idle_to_busy_on_activation() {
    let mut h = Harness::idle(1, &[]);
    h.tick();
    h.claim(1, "c1", VANILLA);
    let a = h.activate(1, "c1", VANILLA);
    assert_eq!(numbers(&a), vec![11]);
    assert!(
        a.iter()
            .any(|x| matches!(x, Action::StartJob { slot: 1, claim_id, .. } if claim_id == "c1"))
    );
    let ad = published(&a, 1).unwrap();
    assert_eq!(ad.eval_attr("JobId"), Value::from("7.0"));
    assert_eq!(ad.eval_attr("JobStart"), Value::Int(T0));
    // A job that cannot checkpoint has no LastPeriodicCheckpoint.
    assert!(!ad.contains("LastPeriodicCheckpoint"));
}

#[test]
fn transition_12_busy_to_idle_when_the_starter_exits() {
    let mut h = Harness::idle(1, &[]);
    h.run_job(1, VANILLA);
    h.advance(100);
    let a = exited(&mut h, 1);
    assert_eq!(numbers(&a), vec![12]);
    let ad = published(&a, 1).unwrap();
    assert!(!ad.contains("JobId"));
    assert_eq!(ad.eval_attr("TotalClaimRunTime"), Value::Int(100));
}

#[test]
fn transition_13_busy_to_retiring_when_preempt_and_not_want_suspend() {
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, CKPT);
    h.touch(); // KeyboardBusy: WANT_SUSPEND false for a big non-vanilla job
    let a = h.tick();
    assert_eq!(numbers(&a), vec![13]);
    assert_eq!(h.sa(1), (State::Claimed, Activity::Retiring));
    assert_eq!(h.sd.retirement(1, h.now), Some((0, Some(3600))));
}

#[test]
fn transition_13_busy_to_retiring_on_a_graceful_shutdown() {
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, CKPT);
    assert_eq!(numbers(&h.ev(Event::Shutdown(ShutdownKind::Graceful))), vec![13]);
}

#[test]
fn transition_14_busy_to_suspended() {
    let mut h = Harness::idle(1, &[]);
    h.run_job(1, VANILLA);
    h.advance(60);
    h.touch();
    let a = h.tick();
    assert_eq!(numbers(&a), vec![14]);
    assert!(has(&a, &Action::Suspend { slot: 1 }));
    assert!(h.sd.slot(1).unwrap().job_suspended());
}

#[test]
fn transition_15_suspended_to_busy_on_continue() {
    let mut h = Harness::idle(1, &[]);
    h.run_job(1, VANILLA);
    h.touch();
    h.tick();
    let a = h.advance(299);
    assert_eq!(numbers(&a), Vec::<u8>::new());
    let a = h.advance(10);
    assert_eq!(numbers(&a), vec![15]);
    assert!(has(&a, &Action::Continue { slot: 1 }));
    assert_eq!(h.sa(1), (State::Claimed, Activity::Busy));
}

#[test]
fn transition_16_suspended_to_retiring_on_preempt() {
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, VANILLA);
    h.touch();
    h.tick();
    let mut seen = Vec::new();
    for _ in 0..21 {
        seen.extend(numbers(&h.advance(30)));
        if !seen.is_empty() {
            break;
        }
        h.touch();
    }
    // 16, and then (the keyboard still busy) suspended again in retirement: 20.
    assert_eq!(seen, vec![16, 20]);
    assert!(h.now - T0 > 600);
    assert!(h.sd.slot(1).unwrap().retiring());
    assert!(h.log.iter().any(|a| *a == Action::Continue { slot: 1 }));
}

#[test]
fn transition_17_suspended_in_retirement_when_retirement_time_shrinks() {
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, VANILLA);
    h.advance(100);
    let a = h.ev(Event::BetterMatch { slot: 1, claim: request("c2", VANILLA) });
    assert_eq!(numbers(&a), vec![13]);
    h.touch();
    assert_eq!(numbers(&h.tick()), vec![20]);
    // The machine's MaxJobRetirementTime drops below the job's run time.
    let a = h.ev(Event::SetAttribute {
        slot: Some(1),
        name: "MaxJobRetirementTime".into(),
        value: Some(parse_expr("50").unwrap()),
    });
    assert_eq!(numbers(&a), vec![17]);
    assert_eq!(h.sa(1), (State::Preempting, Activity::Vacating));
    // A job with nothing to save is not resumed by the startd: the vacate
    // notice resumes it if it can hear it (the starter knows), or ends it.
    assert!(!has(&a, &Action::Continue { slot: 1 }));
    assert!(a.iter().any(|x| matches!(x, Action::SoftKill { slot: 1, .. })));
}

#[test]
fn transition_18_retiring_to_preempting_when_retirement_runs_out() {
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, CKPT);
    h.touch();
    h.tick();
    // Exactly one hour of run time after the job started.
    let a = h.advance(3599);
    assert!(!numbers(&a).contains(&18));
    let a = h.advance(1);
    assert_eq!(numbers(&a), vec![18]);
    // WANT_VACATE (ActivationTimer > 10 min): a checkpoint first.
    assert!(has(&a, &Action::Checkpoint { slot: 1, kind: CheckpointKind::Vacate }));
    assert_eq!(h.sa(1), (State::Preempting, Activity::Vacating));
}

#[test]
fn transition_18_retiring_to_preempting_when_the_job_finishes() {
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, CKPT);
    h.touch();
    h.tick();
    h.advance(100);
    let a = exited(&mut h, 1);
    assert_eq!(numbers(&a), vec![18, 22]);
    assert_eq!(h.sa(1), (State::Owner, Activity::Idle));
}

#[test]
fn transition_19_retiring_to_busy_when_the_preempting_claim_goes_away() {
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, CKPT);
    h.ev(Event::BetterMatch { slot: 1, claim: request("c2", CKPT) });
    assert_eq!(h.sa(1), (State::Claimed, Activity::Retiring));
    let a = h.ev(Event::ClaimReleased { slot: 1, claim_id: "c2".into() });
    assert_eq!(numbers(&a), vec![19]);
    assert_eq!(h.sa(1), (State::Claimed, Activity::Busy));
    assert_eq!(h.sd.slot(1).unwrap().claim_id(), Some("c1"));
}

#[test]
fn transition_19_not_when_the_owner_also_wants_the_machine() {
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, CKPT);
    h.ev(Event::BetterMatch { slot: 1, claim: request("c2", CKPT) });
    h.touch();
    h.tick(); // PREEMPT is true now as well
    let a = h.ev(Event::ClaimReleased { slot: 1, claim_id: "c2".into() });
    assert_eq!(numbers(&a), Vec::<u8>::new());
    assert_eq!(h.sa(1), (State::Claimed, Activity::Retiring));
}

#[test]
fn transition_20_retiring_to_suspended() {
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, VANILLA);
    h.ev(Event::BetterMatch { slot: 1, claim: request("c2", VANILLA) });
    h.touch();
    let a = h.tick();
    assert_eq!(numbers(&a), vec![20]);
    assert!(has(&a, &Action::Suspend { slot: 1 }));
    // The retirement clock stops while suspended: no deadline for it.
    assert_eq!(h.sd.retirement(1, h.now + 1000), Some((0, Some(3600))));
}

#[test]
fn transition_21_vacating_to_killing_after_max_vacate_time() {
    let mut h = Harness::idle(1, &[]);
    h.run_job(1, VANILLA);
    let a = h.ev(Event::Vacate { slot: Some(1), kind: VacateKind::Graceful });
    assert_eq!(numbers(&a), vec![13, 18]);
    assert!(has(&a, &Action::SoftKill { slot: 1, grace_secs: 600 }));
    assert_eq!(numbers(&h.advance(600)), Vec::<u8>::new());
    let a = h.advance(5);
    assert_eq!(numbers(&a), vec![21]);
    assert!(has(&a, &Action::HardKill { slot: 1 }));
}

#[test]
fn transition_22_vacating_to_owner_when_the_starter_exits() {
    let mut h = Harness::idle(1, &[]);
    h.run_job(1, VANILLA);
    h.ev(Event::Vacate { slot: Some(1), kind: VacateKind::Graceful });
    let a = h.ev(Event::StarterExited { slot: 1, outcome: StarterOutcome::Evicted });
    assert_eq!(numbers(&a), vec![22]);
    assert!(has(&a, &Action::ClaimBroken { slot: 1, claim_id: "c1".into() }));
    assert!(!published(&a, 1).unwrap().contains("RemoteOwner"));
}

#[test]
fn transition_23_vacating_to_claimed_idle_for_a_better_match() {
    let mut h = Harness::idle(1, &[]);
    h.run_job(1, CKPT);
    h.advance(700);
    let a = h.ev(Event::BetterMatch { slot: 1, claim: request("c2", VANILLA) });
    assert_eq!(numbers(&a), vec![13, 18]);
    assert!(has(&a, &Action::Checkpoint { slot: 1, kind: CheckpointKind::Vacate }));
    // Requirements is FALSE while Preempting.
    assert_eq!(published(&a, 1).unwrap().eval_attr("Requirements"), Value::Bool(false));
    let a = h.ev(Event::CheckpointFinished { slot: 1, ok: true });
    assert!(has(&a, &Action::SoftKill { slot: 1, grace_secs: 600 }));
    let a = exited(&mut h, 1);
    assert_eq!(numbers(&a), vec![23]);
    assert!(has(&a, &Action::ClaimBroken { slot: 1, claim_id: "c1".into() }));
    assert!(has(&a, &Action::ClaimAccepted { slot: 1, claim_id: "c2".into() }));
    assert_eq!(h.sa(1), (State::Claimed, Activity::Idle));
    assert_eq!(h.sd.slot(1).unwrap().claim_id(), Some("c2"));
}

#[test]
fn transition_24_killing_to_claimed_idle_for_a_better_match() {
    let mut h = Harness::idle(1, &["WANT_VACATE = False"]);
    h.run_job(1, CKPT);
    let a = h.ev(Event::BetterMatch { slot: 1, claim: request("c2", VANILLA) });
    assert_eq!(numbers(&a), vec![13, 18]);
    assert_eq!(h.sa(1), (State::Preempting, Activity::Killing));
    assert!(has(&a, &Action::HardKill { slot: 1 }));
    assert_eq!(numbers(&exited(&mut h, 1)), vec![24]);
    assert_eq!(h.sd.slot(1).unwrap().claim_id(), Some("c2"));
}

#[test]
fn transition_25_killing_to_owner() {
    let mut h = Harness::idle(1, &[]);
    h.run_job(1, VANILLA);
    let a = h.ev(Event::Vacate { slot: Some(1), kind: VacateKind::Fast });
    assert_eq!(numbers(&a), vec![13, 18]);
    assert_eq!(h.sa(1), (State::Preempting, Activity::Killing));
    assert_eq!(numbers(&exited(&mut h, 1)), vec![25]);
    assert_eq!(h.sa(1), (State::Owner, Activity::Idle));
}

#[test]
fn killing_timeout_kills_the_starter_again_and_the_slot_waits_for_its_end() {
    // The spec: at KILLING_TIMEOUT the startd SIGKILLs the starter, and the
    // machine leaves Killing only once the starter has exited. The slot is
    // never freed (nor its job forgotten) while the job may still run.
    let mut h = Harness::idle(1, &["KILLING_TIMEOUT = 45"]);
    h.run_job(1, VANILLA);
    h.ev(Event::Vacate { slot: Some(1), kind: VacateKind::Fast });
    // Polled every POLLING_INTERVAL while a slot is busy; the timeout is
    // judged at each poll and at its own deadline.
    assert_eq!(h.sd.next_deadline(), T0 + 5);
    assert!(numbers(&h.advance(44)).is_empty());
    let a = h.advance(1);
    assert!(numbers(&a).is_empty(), "{a:?}");
    assert!(has(&a, &Action::KillStarter { slot: 1 }));
    assert_eq!(h.sa(1), (State::Preempting, Activity::Killing));
    assert!(h.sd.slot(1).unwrap().job().is_some());
    // Again every KILLING_TIMEOUT while the starter lives.
    assert!(!has(&h.advance(44), &Action::KillStarter { slot: 1 }));
    assert!(has(&h.advance(1), &Action::KillStarter { slot: 1 }));
    assert_eq!(h.sa(1), (State::Preempting, Activity::Killing));
    assert_eq!(numbers(&exited(&mut h, 1)), vec![25]);
    assert_eq!(h.sa(1), (State::Owner, Activity::Idle));
    assert!(h.sd.slot(1).unwrap().job().is_none());
}

fn backfilling() -> Harness {
    let mut h = Harness::idle(1, &[BACKFILL]);
    assert_eq!(numbers(&h.tick()), vec![1]);
    // START_BACKFILL waits for two minutes of StateTimer.
    assert!(numbers(&h.advance(100)).is_empty());
    let a = h.advance(300);
    assert_eq!(numbers(&a), vec![7, 26]);
    assert!(has(&a, &Action::StartBackfill { slot: 1, job: "primes".into() }));
    h
}

#[test]
fn transition_7_unclaimed_to_backfill_on_start_backfill() {
    let h = backfilling();
    assert_eq!(h.sa(1), (State::Backfill, Activity::Busy));
}

#[test]
fn transition_26_backfill_idle_to_busy_when_the_job_starts() {
    let mut h = backfilling();
    h.ev(Event::BackfillExited { slot: 1 });
    let a = h.tick();
    assert_eq!(numbers(&a), vec![26]);
    assert_eq!(h.sd.slot(1).unwrap().backfill_job(), Some("primes"));
}

#[test]
fn transition_27_backfill_busy_to_idle_when_the_job_exits() {
    let mut h = backfilling();
    let a = h.ev(Event::BackfillExited { slot: 1 });
    assert_eq!(numbers(&a), vec![27]);
    assert_eq!(h.sa(1), (State::Backfill, Activity::Idle));
}

#[test]
fn transition_28_backfill_busy_to_killing_on_evict_backfill() {
    let mut h = backfilling();
    h.touch();
    let a = h.tick();
    assert_eq!(numbers(&a), vec![28]);
    assert!(has(&a, &Action::KillBackfill { slot: 1 }));
}

#[test]
fn transition_29_and_30_backfill_killing_to_idle_to_owner() {
    let mut h = backfilling();
    h.touch();
    h.tick();
    let a = h.ev(Event::BackfillExited { slot: 1 });
    assert_eq!(numbers(&a), vec![29, 30]);
    assert_eq!(h.sa(1), (State::Owner, Activity::Idle));
}

#[test]
fn transition_30_backfill_idle_to_owner_on_vacate() {
    let mut h = backfilling();
    h.ev(Event::BackfillExited { slot: 1 });
    let a = h.ev(Event::Vacate { slot: None, kind: VacateKind::Graceful });
    assert_eq!(numbers(&a), vec![30]);
}

#[test]
fn transition_31_backfill_to_claimed_idle() {
    let mut h = backfilling();
    let a = h.claim(1, "c1", VANILLA);
    assert_eq!(numbers(&a), vec![28]);
    let a = h.ev(Event::BackfillExited { slot: 1 });
    assert_eq!(numbers(&a), vec![29, 31]);
    assert!(has(&a, &Action::ClaimAccepted { slot: 1, claim_id: "c1".into() }));
    assert_eq!(h.sa(1), (State::Claimed, Activity::Idle));
}

#[test]
fn transition_32_backfill_to_matched() {
    let mut h = backfilling();
    let a = h.ev(Event::MatchNotified { slot: 1, claim_id: "c1".into() });
    assert_eq!(numbers(&a), vec![28]);
    let a = h.ev(Event::BackfillExited { slot: 1 });
    assert_eq!(numbers(&a), vec![29, 32]);
    assert_eq!(h.sa(1), (State::Matched, Activity::Idle));
}

// -- beyond the numbered transitions --------------------------------------

#[test]
fn periodic_checkpoint_keeps_the_job_busy() {
    let small = "[ ClusterId = 1; ProcId = 0; ImageSize = 1000; WasmCheckpoint = \"cooperative\" ]";
    let mut h = Harness::idle(1, &[]);
    h.run_job(1, small);
    let a = h.advance(6 * 3600);
    assert!(!a.iter().any(|x| matches!(x, Action::Checkpoint { .. })));
    let a = h.advance(5);
    assert!(has(&a, &Action::Checkpoint { slot: 1, kind: CheckpointKind::Periodic }));
    assert_eq!(h.sa(1), (State::Claimed, Activity::Busy));
    let ad = published(&a, 1).unwrap();
    assert!(ad.eval_attr("LastPeriodicCheckpoint").as_int().unwrap() > T0 + 6 * 3600);
}

#[test]
fn claim_worklife_closes_the_claim_after_the_job() {
    let mut h = Harness::idle(1, &["CLAIM_WORKLIFE = 600"]);
    h.run_job(1, VANILLA);
    h.advance(700);
    let a = exited(&mut h, 1);
    assert_eq!(numbers(&a), vec![12, 10, 22]);
    assert!(has(&a, &Action::ReleaseClaim { slot: 1, claim_id: "c1".into() }));
    assert!(!a.iter().any(|x| matches!(x, Action::ClaimBroken { .. })));
}

/// CLAIM_WORKLIFE bounds when a claim takes *new* jobs: the first job, which
/// the claim was made for, starts however late its activation comes, and
/// only the next is refused.
#[test]
fn claim_worklife_never_refuses_a_claims_first_job() {
    let mut h = Harness::idle(1, &["CLAIM_WORKLIFE = 0"]);
    h.tick();
    h.claim(1, "c1", VANILLA);
    assert_eq!(h.sa(1), (State::Claimed, Activity::Idle));
    // The activation comes in the next second (as it may, a few ms after
    // the claim): the job starts.
    h.now += 1;
    let a = h.activate(1, "c1", VANILLA);
    assert!(!a.iter().any(|x| matches!(x, Action::ActivationRefused { .. })), "{a:?}");
    assert_eq!(h.sa(1), (State::Claimed, Activity::Busy));
}

#[test]
fn a_jobs_own_retirement_time_can_only_lower_the_machines() {
    let job = "[ ClusterId = 1; ProcId = 0; ImageSize = 200000; MaxJobRetirementTime = 100 ]";
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, job);
    h.ev(Event::BetterMatch { slot: 1, claim: request("c2", VANILLA) });
    assert_eq!(h.sd.retirement(1, h.now), Some((0, Some(100))));
    // Polled every POLLING_INTERVAL while a slot is busy; the timeout is
    // judged at each poll and at its own deadline.
    assert_eq!(h.sd.next_deadline(), T0 + 5);
    let job = "[ ClusterId = 1; ProcId = 0; ImageSize = 200000; MaxJobRetirementTime = 99999 ]";
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, job);
    h.ev(Event::BetterMatch { slot: 1, claim: request("c2", VANILLA) });
    assert_eq!(h.sd.retirement(1, h.now), Some((0, Some(3600))));
}

#[test]
fn a_peaceful_shutdown_waits_for_the_job() {
    let mut h = Harness::idle(2, &[]);
    h.run_job(1, VANILLA);
    let a = h.ev(Event::Shutdown(ShutdownKind::Peaceful));
    assert!(numbers(&a).contains(&13));
    assert_eq!(h.sd.retirement(1, h.now + 86400), Some((86400, None)));
    h.advance(86400);
    assert_eq!(h.sa(1), (State::Claimed, Activity::Retiring));
    assert!(!h.log.contains(&Action::ShutdownComplete));
    let a = exited(&mut h, 1);
    assert_eq!(numbers(&a), vec![18, 22]);
    assert!(has(&a, &Action::ShutdownComplete));
    // Nothing leaves Owner after a shutdown.
    assert!(numbers(&h.advance(3600)).is_empty());
}

#[test]
fn claims_that_do_not_meet_start_are_refused() {
    let mut h = Harness::new(1, &[]);
    h.measure(0.0, 10); // the owner is typing
    let a = h.claim(1, "c1", VANILLA);
    assert!(
        a.iter().any(|x| matches!(x, Action::ClaimRefused { claim_id, .. } if claim_id == "c1"))
    );
    assert_eq!(h.sa(1), (State::Owner, Activity::Idle));
}

#[test]
fn a_transparent_checkpoint_needs_the_same_platform() {
    let mut h = Harness::idle(1, &[]);
    h.tick();
    let moved = "[ WasmCheckpoint = \"transparent\"; NumCkpts = 2; \
                 LastCheckpointPlatform = \"andes-snapshot-0/instrumentation-1\" ]";
    let a = h.claim(1, "c1", moved);
    assert!(a.iter().any(|x| matches!(x, Action::ClaimRefused { .. })));
    let same = format!(
        "[ WasmCheckpoint = \"transparent\"; NumCkpts = 2; LastCheckpointPlatform = \"{}\" ]",
        andes_startd::DEFAULT_CHECKPOINT_PLATFORM
    );
    assert_eq!(numbers(&h.claim(1, "c2", &same)), vec![5]);
}

#[test]
fn events_for_unknown_slots_are_rejected_not_panicked_on() {
    let mut h = Harness::idle(1, &[]);
    for e in [
        Event::MatchNotified { slot: 0, claim_id: "x".into() },
        Event::StarterExited { slot: 9, outcome: StarterOutcome::Failed },
        Event::BackfillExited { slot: u32::MAX },
    ] {
        let a = h.ev(e);
        assert!(matches!(&a[..], [Action::EventRejected { .. }]), "{a:?}");
    }
    let a = h.ev(Event::ClaimReleased { slot: 1, claim_id: "nope".into() });
    assert!(matches!(&a[..], [Action::EventRejected { .. }]));
    let a = h.activate(1, "nope", VANILLA);
    assert!(matches!(&a[..], [Action::ActivationRefused { .. }]));
}

#[test]
fn set_attribute_adds_and_clears_attributes() {
    let mut h = Harness::idle(2, &[]);
    let a = h.ev(Event::SetAttribute {
        slot: Some(2),
        name: "IsDesktop".into(),
        value: Some(parse_expr("true").unwrap()),
    });
    assert_eq!(published(&a, 2).unwrap().eval_attr("IsDesktop"), Value::Bool(true));
    assert!(published(&a, 1).is_none());
    h.tick();
    assert_eq!(h.sd.slot(2).unwrap().ad().eval_attr("IsDesktop"), Value::Bool(true));
    h.ev(Event::SetAttribute { slot: Some(2), name: "IsDesktop".into(), value: None });
    assert!(!h.sd.slot(2).unwrap().ad().contains("IsDesktop"));
}

#[test]
fn configuration_can_override_a_measured_attribute() {
    // A headless test machine made to look like a desktop in use.
    let mut h =
        Harness::idle(1, &["STARTD_ATTRS = KeyboardIdle, Site\nKeyboardIdle = 5\nSite = \"lab\""]);
    let a = h.tick();
    assert!(numbers(&a).is_empty());
    let ad = h.sd.slot(1).unwrap().ad();
    assert_eq!(ad.eval_attr("KeyboardIdle"), Value::Int(5));
    assert_eq!(ad.eval_attr("Site"), Value::from("lab"));
    assert_eq!(ad.eval_attr("CurrentRank"), Value::Real(0.0));
}

#[test]
fn the_startds_own_attributes_cannot_be_set() {
    let mut h = Harness::idle(1, &[]);
    for name in ["State", "requirements", ""] {
        let a = h.ev(Event::SetAttribute {
            slot: None,
            name: name.into(),
            value: Some(parse_expr("\"Claimed\"").unwrap()),
        });
        assert!(matches!(&a[..], [Action::EventRejected { .. }]), "{name}: {a:?}");
    }
    assert_eq!(h.sa(1), (State::Owner, Activity::Idle));
}

#[test]
fn extreme_times_and_values_do_not_panic() {
    let mut h = Harness::idle(
        2,
        &["MAXJOBRETIREMENTTIME = 9223372036854775807\nKILLING_TIMEOUT = 9223372036854775807\n\
           MATCH_TIMEOUT = -9223372036854775807\nUPDATE_INTERVAL = 9223372036854775807"],
    );
    h.run_job(1, VANILLA);
    h.ev(Event::MatchNotified { slot: 2, claim_id: "m".into() });
    h.ev(Event::BetterMatch { slot: 1, claim: request("c2", VANILLA) });
    for now in [i64::MIN, -1, 0, i64::MAX, i64::MAX] {
        h.now = now;
        h.tick();
        h.measure(f64::NAN, i64::MIN);
        h.ev(Event::Vacate { slot: None, kind: VacateKind::Fast });
    }
    assert!(h.sd.next_deadline() <= andes_startd::MAX_TIME);
}

#[test]
fn vanilla_variants_apply_to_jobs_that_cannot_checkpoint() {
    let cfg = "WANT_SUSPEND_VANILLA = False";
    // Cannot checkpoint: WANT_SUSPEND_VANILLA (False) decides, so the busy
    // keyboard preempts at once instead of suspending.
    let mut h = Harness::idle(1, &[cfg]);
    h.run_job(1, VANILLA);
    assert_eq!(
        h.sd.slot(1).unwrap().ad().get("WANT_SUSPEND").map(|e| e.to_string()),
        Some("false".into())
    );
    h.touch();
    assert_eq!(numbers(&h.tick()), vec![13, 18]);
    // The same job declaring a cooperative checkpoint gets the standard
    // WANT_SUSPEND (IsVanilla is true): suspended.
    let coop = VANILLA.replace(" ]", "; WasmCheckpoint = \"cooperative\" ]");
    let mut h = Harness::idle(1, &[cfg]);
    h.run_job(1, &coop);
    h.touch();
    assert_eq!(numbers(&h.tick()), vec![14]);
    // After the job the standard expressions are back.
    h.ev(Event::StarterExited { slot: 1, outcome: StarterOutcome::Completed });
    assert!(
        h.sd.slot(1).unwrap().ad().get("WANT_SUSPEND").unwrap().to_string().contains("ImageSize")
    );
}

#[test]
fn every_slot_publishes_its_ad_every_update_interval() {
    let mut h = Harness::idle(2, &[]);
    let a = h.tick();
    assert!(published(&a, 1).is_some() && published(&a, 2).is_some());
    let ad = published(&a, 2).unwrap();
    for (name, want) in [
        ("Name", Value::from("slot2@localhost")),
        ("Machine", Value::from("localhost")),
        ("MyType", Value::from("Machine")),
        ("TargetType", Value::from("Job")),
        ("SlotID", Value::Int(2)),
        ("VirtualMachineID", Value::Int(2)),
        ("Cpus", Value::Int(1)),
        ("Memory", Value::Int(4096)),
        ("HasWasm", Value::Bool(true)),
        ("KeyboardIdle", Value::Int(3600)),
        ("CpuIsBusy", Value::Bool(false)),
        ("ClockDay", Value::Int(2)),
    ] {
        assert_eq!(ad.eval_attr(name), want, "{name}");
    }
    // An Unclaimed machine polls every UPDATE_INTERVAL (300 s), and
    // publishes nothing in between.
    assert_eq!(h.sd.next_deadline(), T0 + 300);
    let a = h.advance(299);
    assert!(!a.iter().any(|x| matches!(x, Action::Publish { .. })), "{a:?}");
    let a = h.advance(1);
    assert!(published(&a, 1).is_some() && published(&a, 2).is_some());
    assert_eq!(published(&a, 1).unwrap().eval_attr("KeyboardIdle"), Value::Int(3900));
}

#[test]
fn a_released_claim_hands_the_slot_to_the_waiting_better_match() {
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, VANILLA);
    h.ev(Event::BetterMatch { slot: 1, claim: request("c2", VANILLA) });
    let a = h.ev(Event::ClaimReleased { slot: 1, claim_id: "c1".into() });
    assert_eq!(numbers(&a), vec![18]);
    assert!(a.iter().any(|x| matches!(x, Action::SoftKill { slot: 1, .. })));
    let a = h.ev(Event::StarterExited { slot: 1, outcome: StarterOutcome::Evicted });
    assert_eq!(numbers(&a), vec![23]);
    // The schedd released the claim itself: it is not told it is broken.
    assert!(!a.iter().any(|x| matches!(x, Action::ClaimBroken { .. })));
    assert_eq!(h.sd.slot(1).unwrap().claim_id(), Some("c2"));
}

/// condor_drain: an idle slot is Drained at once and takes no claim; a busy
/// one keeps its job to the end of its retirement (graceful), then is
/// Drained; cancelled, the slots are Owner and then Unclaimed again as
/// START says.
#[test]
fn a_drain_empties_the_machine_and_a_cancel_opens_it_again() {
    let mut h = Harness::idle(2, &[RETIRE_HOUR]);
    h.run_job(1, CKPT);
    h.ev(Event::Drain { kind: VacateKind::Graceful });
    assert_eq!(h.sa(2), (State::Drained, Activity::Idle));
    assert_eq!(h.sa(1), (State::Claimed, Activity::Retiring), "its job retires");
    let a = h.claim(2, "c2", CKPT);
    assert!(
        a.iter().any(
            |x| matches!(x, Action::ClaimRefused { reason, .. } if reason.contains("drained"))
        ),
        "{a:?}"
    );
    assert_eq!(h.sa(2), (State::Drained, Activity::Idle));
    // The job ends within its retirement: the slot is Drained.
    exited(&mut h, 1);
    h.tick();
    assert_eq!(h.sa(1).0, State::Drained);
    h.advance(3600);
    assert_eq!((h.sa(1).0, h.sa(2).0), (State::Drained, State::Drained), "it stays drained");
    h.ev(Event::CancelDrain);
    assert_eq!(h.sa(1), (State::Unclaimed, Activity::Idle));
    assert_eq!(h.sa(2), (State::Unclaimed, Activity::Idle));
}

/// A fast drain vacates at once, with no retirement.
#[test]
fn a_fast_drain_vacates_at_once() {
    let mut h = Harness::idle(1, &[RETIRE_HOUR]);
    h.run_job(1, CKPT);
    h.ev(Event::Drain { kind: VacateKind::Fast });
    assert_eq!(h.sa(1).0, State::Preempting);
}

/// A job's end and the claim's next queued job as one event go through the
/// same transitions (12 then 11), to the same slot ad, as the two events
/// fed one after the other, publishing once rather than twice; an
/// activation the machine refuses (the claim's worklife is over) is refused
/// the same way, and the claim ends as after the two.
#[test]
fn an_end_and_the_next_job_as_one_event_are_the_two_events_published_once() {
    let next = VANILLA.replace("ProcId = 0", "ProcId = 1");
    for (config, refused) in [("CLAIM_WORKLIFE = 600", false), ("CLAIM_WORKLIFE = 0", true)] {
        let mut two = Harness::idle(1, &[config]);
        let mut one = Harness::idle(1, &[config]);
        for h in [&mut two, &mut one] {
            h.run_job(1, VANILLA);
            h.now += 5;
        }
        let mut a = exited(&mut two, 1);
        a.extend(two.activate(1, "c1", &next));
        let b = one.ev(Event::StarterExitedNext {
            slot: 1,
            outcome: StarterOutcome::Completed,
            claim_id: "c1".into(),
            job: classad::parse_ad(&next).unwrap(),
        });
        assert_eq!(numbers(&a), numbers(&b), "{config}");
        assert_eq!(two.sa(1), one.sa(1), "{config}");
        let refusals = |acts: &[Action]| {
            acts.iter().filter(|a| matches!(a, Action::ActivationRefused { .. })).count()
        };
        assert_eq!((refusals(&a), refusals(&b)), if refused { (1, 1) } else { (0, 0) });
        let publishes =
            |acts: &[Action]| acts.iter().filter(|a| matches!(a, Action::Publish { .. })).count();
        // (A refused activation changes nothing to publish.)
        let want = if refused { (1, 1) } else { (2, 1) };
        assert_eq!((publishes(&a), publishes(&b)), want, "{config}");
        assert_eq!(published(&a, 1).unwrap(), published(&b, 1).unwrap(), "{config}");
        if !refused {
            assert_eq!(one.sa(1), (State::Claimed, Activity::Busy));
            let job = one.sd.slot(1).unwrap().job().unwrap().eval_attr("ProcId");
            assert_eq!(job, Value::Int(1));
        }
    }
}
