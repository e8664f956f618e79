//! The spec's policies as shipped, each walked through its story on a
//! virtual clock.

use crate::common;

use andes_startd::policy::{
    DESKTOP_POLICY, DISABLE_PREEMPTION_POLICY, JOB_SUSPENSION_POLICY, TESTJOB_POLICY,
    TIME_OF_DAY_POLICY,
};
use andes_startd::{Action, Activity, CheckpointKind, Event, SlotId, StarterOutcome, State};
use classad::Value;
use common::*;

fn refused(a: &[Action]) -> bool {
    a.iter().any(|x| matches!(x, Action::ClaimRefused { .. }))
}

/// Touches the keyboard every 30 s for `secs` seconds, collecting transitions.
fn typing(h: &mut Harness, secs: i64) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut t = 0;
    while t < secs {
        h.touch();
        seen.extend(numbers(&h.advance(30)));
        t += 30;
    }
    seen
}

#[test]
fn default_policy_suspend_continue_retire_vacate_kill_owner() {
    // A small job that can checkpoint: the default policy suspends it.
    let job = "[ ClusterId = 3; ProcId = 0; JobUniverse = 5; ImageSize = 1000; \
               WasmCheckpoint = \"transparent\"; NumCkpts = 0 ]";
    let mut h = Harness::idle(1, &[]);
    h.run_job(1, job);
    h.advance(3600);
    // The keyboard is touched: Suspended at the next poll.
    h.touch();
    let a = h.advance(5);
    assert_eq!(numbers(&a), vec![14]);
    assert!(has(&a, &Action::Suspend { slot: 1 }));
    // Idle for ContinueIdleTime (5 minutes): Busy again.
    let a = h.advance(295);
    assert!(numbers(&a).is_empty());
    let a = h.advance(5);
    assert_eq!(numbers(&a), vec![15]);
    assert!(has(&a, &Action::Continue { slot: 1 }));
    assert_eq!(h.sd.slot(1).unwrap().ad().eval_attr("TotalJobSuspendTime").as_int(), Some(300));
    // The owner keeps typing: suspended longer than MaxSuspendTime (10
    // minutes), then Retiring (no retirement time) and Preempting/Vacating,
    // with a checkpoint first.
    h.touch();
    assert_eq!(numbers(&h.advance(5)), vec![14]);
    let seen = typing(&mut h, 630);
    assert_eq!(seen, vec![16, 18]);
    assert_eq!(h.sa(1), (State::Preempting, Activity::Vacating));
    assert!(h.log.contains(&Action::Checkpoint { slot: 1, kind: CheckpointKind::Vacate }));
    let a = h.ev(Event::CheckpointFinished { slot: 1, ok: true });
    assert!(a.iter().any(|x| matches!(x, Action::SoftKill { slot: 1, .. })));
    // The job ignores its vacate notice: Killing after MaxVacateTime.
    let entered = h.sd.slot(1).unwrap().ad().eval_attr("EnteredCurrentActivity").as_int().unwrap();
    let mut seen = Vec::new();
    while seen.is_empty() && h.now - entered <= 700 {
        seen.extend(numbers(&h.advance(5)));
    }
    assert_eq!(seen, vec![21]);
    assert!((601..=605).contains(&(h.now - entered)), "{}", h.now - entered);
    assert!(h.log.contains(&Action::HardKill { slot: 1 }));
    // The starter goes: Owner, and the schedd is told.
    let a = h.ev(Event::StarterExited { slot: 1, outcome: StarterOutcome::Evicted });
    assert_eq!(numbers(&a), vec![25]);
    assert!(has(&a, &Action::ClaimBroken { slot: 1, claim_id: "c1".into() }));
    assert_eq!(h.sa(1), (State::Owner, Activity::Idle));
}

#[test]
fn testjob_policy_coltranes_jobs_start_anyway_and_are_left_alone() {
    let coltrane = "[ ClusterId = 1; ProcId = 0; JobUniverse = 5; ImageSize = 200000; \
                    Owner = \"coltrane\" ]";
    let alice = "[ ClusterId = 2; ProcId = 0; JobUniverse = 5; ImageSize = 200000; \
                 Owner = \"alice\" ]";
    let mut h = Harness::new(1, &[TESTJOB_POLICY]);
    h.measure(0.0, 5); // somebody is typing
    // START is FALSE || UNDEFINED = UNDEFINED locally, so not Owner.
    assert_eq!(numbers(&h.tick()), vec![1]);
    assert!(refused(&h.claim(1, "a", alice)));
    assert_eq!(numbers(&h.claim(1, "c", coltrane)), vec![5]);
    assert_eq!(numbers(&h.activate(1, "c", coltrane)), vec![11]);
    // An hour of typing: never suspended, never preempted.
    assert!(typing(&mut h, 3600).is_empty());
    assert_eq!(h.sa(1), (State::Claimed, Activity::Busy));
    // The same machine suspends anybody else's job.
    h.ev(Event::StarterExited { slot: 1, outcome: StarterOutcome::Completed });
    let mut h = Harness::idle(1, &[TESTJOB_POLICY]);
    h.run_job(1, alice);
    h.touch();
    assert_eq!(numbers(&h.tick()), vec![14]);
}

#[test]
fn time_of_day_policy_runs_jobs_after_hours_only() {
    let job = "[ ClusterId = 1; ProcId = 0; JobUniverse = 5; ImageSize = 200000 ]";
    let mut h = Harness::idle(1, &[TIME_OF_DAY_POLICY]);
    // T0 is a Tuesday, 22:13 UTC: after hours.
    let ad = h.sd.slot(1).unwrap().ad().clone();
    assert_eq!(ad.eval_attr("ClockDay"), Value::Int(2));
    assert_eq!(ad.eval_attr("ClockMin"), Value::Int(22 * 60 + 13));
    h.run_job(1, job);
    // Through the night the job runs undisturbed.
    let eight = (T0.div_euclid(86_400) + 1) * 86_400 + 8 * 3600;
    let a = h.advance(eight - 1 - h.now);
    assert!(numbers(&a).is_empty());
    // At 08:00 on Wednesday WANT_SUSPEND ($(AfterHours)) is false and
    // SUSPEND (work hours) true: preempted at once instead of suspended.
    let a = h.advance(5);
    assert_eq!(numbers(&a), vec![13, 18]);
    assert_eq!(h.sa(1), (State::Preempting, Activity::Vacating));
    h.ev(Event::StarterExited { slot: 1, outcome: StarterOutcome::Evicted });
    // During work hours the machine starts nothing.
    h.advance(3600);
    assert_eq!(h.sa(1).0, State::Owner);
    assert!(refused(&h.claim(1, "c2", job)));
    // After 17:00 it is willing again.
    let five = eight + 9 * 3600;
    h.advance(five - h.now + 300);
    assert_eq!(h.sa(1).0, State::Unclaimed);
    assert_eq!(numbers(&h.claim(1, "c3", job)), vec![5]);
}

#[test]
fn desktop_policy_only_desktops_mind_the_keyboard() {
    let job = "[ ClusterId = 1; ProcId = 0; JobUniverse = 5; ImageSize = 200000 ]";
    let mut desktop = Harness::new(1, &[DESKTOP_POLICY, "IsDesktop = True"]);
    let mut server = Harness::new(1, &[DESKTOP_POLICY]);
    assert_eq!(desktop.sd.slot(1).unwrap().ad().eval_attr("IsDesktop"), Value::Bool(true));
    assert!(!server.sd.slot(1).unwrap().ad().contains("IsDesktop"));
    // Somebody logs in to both to debug a problem.
    desktop.measure(0.0, 5);
    server.measure(0.0, 5);
    desktop.tick();
    server.tick();
    assert_eq!(desktop.sa(1).0, State::Owner);
    assert_eq!(server.sa(1).0, State::Unclaimed);
    assert!(refused(&desktop.claim(1, "c1", job)));
    server.claim(1, "c1", job);
    server.activate(1, "c1", job);
    assert!(typing(&mut server, 3600).is_empty());
    assert_eq!(server.sa(1), (State::Claimed, Activity::Busy));
    // The desktop, once idle, runs a job and suspends it when its user returns.
    desktop.measure(0.0, 3600);
    desktop.run_job(1, job);
    desktop.advance(120);
    desktop.touch();
    assert_eq!(numbers(&desktop.tick()), vec![14]);
    // CONTINUE waits 5 minutes of suspension and an idle keyboard.
    let a = desktop.advance(300);
    assert!(numbers(&a).is_empty());
    assert_eq!(numbers(&desktop.advance(10)), vec![15]);
}

#[test]
fn disable_preemption_policy_retires_for_two_days() {
    let job = "[ ClusterId = 1; ProcId = 0; JobUniverse = 1; ImageSize = 200000 ]";
    let mut h = Harness::idle(1, &[DISABLE_PREEMPTION_POLICY]);
    h.run_job(1, job);
    // Owner activity does not preempt (PREEMPT = False), nor does it suspend
    // this big non-vanilla job (WANT_SUSPEND is false while typing).
    assert!(typing(&mut h, 600).is_empty());
    h.advance(1000);
    // Equal RANK: no rank preemption.
    assert!(refused(&h.claim(1, "c2", job)));
    // The negotiator preempts by user priority: two days of retirement.
    let a = h.ev(Event::BetterMatch { slot: 1, claim: request("c3", job) });
    assert_eq!(numbers(&a), vec![13]);
    let start = T0;
    assert_eq!(h.sd.retirement(1, h.now), Some((h.now - start, Some(2 * 24 * 3600))));
    assert_eq!(h.sd.next_deadline().min(start + 2 * 86400), h.sd.next_deadline());
    let a = h.advance(start + 2 * 86400 - 1 - h.now);
    assert!(numbers(&a).is_empty());
    let a = h.advance(1);
    assert_eq!(numbers(&a), vec![18]);
    let a = h.ev(Event::StarterExited { slot: 1, outcome: StarterOutcome::Evicted });
    assert_eq!(numbers(&a), vec![23]);
    assert_eq!(h.sd.slot(1).unwrap().claim_id(), Some("c3"));
}

#[test]
fn job_suspension_policy_slot2_yields_to_slot1() {
    let high = "[ ClusterId = 1; ProcId = 0; IsHighPrioJob = True; ImageSize = 1000 ]";
    let low = "[ ClusterId = 2; ProcId = 0; ImageSize = 1000 ]";
    let mut h = Harness::idle(1, &[JOB_SUSPENSION_POLICY]);
    // NUM_CPUS = 2 on a one-CPU machine: two slots.
    assert_eq!(h.sd.slots().len(), 2);
    h.tick();
    assert!(refused(&h.claim(1, "x", low)));
    assert_eq!(numbers(&h.claim(2, "lo", low)), vec![5]);
    h.activate(2, "lo", low);
    h.advance(600);
    assert_eq!(h.sa(2), (State::Claimed, Activity::Busy));
    // A high-priority job starts on slot 1: slot 2's job is suspended.
    h.claim(1, "hi", high);
    h.activate(1, "hi", high);
    let a = h.advance(5);
    assert_eq!(numbers(&a), vec![14]);
    assert!(has(&a, &Action::Suspend { slot: 2 }));
    assert_eq!(h.sd.slot(2).unwrap().ad().eval_attr("vm1_Activity"), Value::from("Busy"));
    // Slot 1's job finishes: slot 2's job continues.
    h.advance(120);
    h.ev(Event::StarterExited { slot: 1, outcome: StarterOutcome::Completed });
    let a = h.advance(5);
    assert_eq!(numbers(&a), vec![15]);
    assert!(has(&a, &Action::Continue { slot: 2 }));
}

#[test]
fn the_owners_load_goes_to_the_least_busy_slots_first_as_htcondor_spreads_it() {
    // Three slots: slot 1 runs a job (its own load 1.0), slots 2 and 3 are
    // idle. The owner adds 1.5: HTCondor's startd gives it to the Owner and
    // Unclaimed slots first (a full CPU each while more is left), so the
    // slot running the job shows no owner load; every slot's LoadAvg is its
    // CondorLoadAvg plus its share, and the shares sum to the owner's load.
    let mut h = Harness::idle(3, &[]);
    h.tick();
    h.claim(1, "c1", VANILLA);
    h.activate(1, "c1", VANILLA);
    assert_eq!(h.sa(1), (State::Claimed, Activity::Busy));
    assert_eq!(h.sa(2), (State::Unclaimed, Activity::Idle));
    h.measure(1.5, 5000);
    h.tick();
    let load = |h: &Harness, slot: SlotId| {
        let ad = h.sd.slot(slot).unwrap().ad();
        (
            ad.eval_attr("LoadAvg").as_real().unwrap(),
            ad.eval_attr("CondorLoadAvg").as_real().unwrap(),
        )
    };
    assert_eq!(load(&h, 1), (1.0, 1.0));
    assert_eq!(load(&h, 2), (1.0, 0.0));
    assert_eq!(load(&h, 3), (0.5, 0.0));
    // More than the idle slots can take: the rest lands on the busy slot.
    h.measure(2.75, 5000);
    h.tick();
    assert_eq!(load(&h, 2), (1.0, 0.0));
    assert_eq!(load(&h, 3), (1.0, 0.0));
    assert_eq!(load(&h, 1), (1.75, 1.0));
}

/// A job started on an idle machine (polled every UPDATE_INTERVAL) has its
/// SUSPEND seen within POLLING_INTERVAL of its start, not at the idle
/// machine's next poll, minutes away.
#[test]
fn a_new_jobs_policy_is_polled_every_polling_interval_from_its_start() {
    let mut h = Harness::idle(1, &["SUSPEND = (CurrentTime - EnteredCurrentActivity) > 1"]);
    h.tick();
    let idle_poll = h.sd.next_poll();
    assert_eq!(idle_poll, h.now + 300, "an idle machine waits UPDATE_INTERVAL");
    h.now += 10;
    h.run_job(1, VANILLA);
    assert!(h.sd.next_poll() <= h.now + 5, "busy: polled within POLLING_INTERVAL");
    h.advance(6);
    assert_eq!(h.sa(1), (State::Claimed, Activity::Suspended));
}
