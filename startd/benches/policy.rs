//! One policy evaluation round (a POLLING_INTERVAL tick) over 64 busy slots
//! with the default policy, and what a short job's end and the next job's
//! start on a reused claim cost on machines of 2 and 64 slots (the same, as
//! a host's cost per job must not grow with its slots).
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use andes_startd::{ClaimRequest, Event, MachineInfo, Measurements, Policy, Startd, State};
use classad::parse_ad;
use criterion::{Criterion, criterion_group, criterion_main};

fn busy_machine(slots: u32) -> (Startd, i64) {
    let mut now = 1_700_000_000;
    let info = MachineInfo { cpus: slots, memory_mb: 256 * 1024, ..MachineInfo::default() };
    let mut sd = Startd::new(Policy::default_policy(), &info, now).unwrap();
    sd.handle(
        now,
        Event::Measured(Measurements {
            load_avg: slots as f64,
            keyboard_idle: 3600,
            console_idle: 3600,
            condor_load: vec![1.0; slots as usize],
            utc_offset: 0,
            ..Measurements::default()
        }),
    );
    sd.handle(now, Event::Tick);
    for slot in 1..=slots {
        let job = parse_ad(&format!(
            "[ ClusterId = {slot}; ProcId = 0; JobUniverse = 5; ImageSize = 200000; \
               Owner = \"alice\"; RequestMemory = 1024 ]"
        ))
        .unwrap();
        let claim_id = format!("c{slot}");
        sd.handle(
            now,
            Event::ClaimRequested {
                slot,
                claim: ClaimRequest {
                    claim_id: claim_id.clone(),
                    client_machine: "submit.example.org".into(),
                    owner: "alice".into(),
                    user: None,
                    ad: job.clone(),
                },
            },
        );
        sd.handle(now, Event::ClaimActivated { slot, claim_id, job });
    }
    now += 5;
    sd.handle(now, Event::Tick);
    assert!(sd.slots().iter().all(|s| s.state() == State::Claimed && s.job().is_some()));
    (sd, now)
}

fn bench(c: &mut Criterion) {
    let (mut sd, mut now) = busy_machine(64);
    c.bench_function("startd_poll_64_busy_slots_default_policy", |b| {
        b.iter(|| {
            now += 5;
            std::hint::black_box(sd.handle(now, Event::Tick));
        })
    });
}

fn job_turnover(c: &mut Criterion) {
    for slots in [2, 64] {
        let (mut sd, now) = busy_machine(slots);
        let job = parse_ad(
            "[ ClusterId = 1; ProcId = 0; JobUniverse = 5; ImageSize = 200000; \
               Owner = \"alice\"; RequestMemory = 1024 ]",
        )
        .unwrap();
        c.bench_function(&format!("startd_job_end_and_next_start_{slots}_slots"), |b| {
            b.iter(|| {
                let ended = sd.handle(
                    now,
                    Event::StarterExited {
                        slot: 1,
                        outcome: andes_startd::StarterOutcome::Completed,
                    },
                );
                let started = sd.handle(
                    now,
                    Event::ClaimActivated { slot: 1, claim_id: "c1".into(), job: job.clone() },
                );
                std::hint::black_box((ended, started))
            })
        });
        assert!(sd.slots()[0].job().is_some(), "the next job did not start");
    }
}

criterion_group!(benches, bench, job_turnover);
criterion_main!(benches);
