//! One negotiation cycle: 100,000 idle jobs in 200 autoclusters (10
//! submitters) against 10,000 slot ads; and the autocluster assignment of
//! those 100,000 jobs.
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use std::hint::black_box;

use andes_central::negotiator::{
    Accountant, AccountantConfig, Autoclusters, NegotiatorConfig, Request, SlotAd, Snapshot, plan,
    significant_attributes,
};
use classad::{ClassAd, parse_ad, parse_expr};
use criterion::{Criterion, criterion_group, criterion_main};

/// Full sizes under `cargo bench`; small ones when `cargo test` runs the
/// benchmarks once as a smoke test.
fn full() -> bool {
    std::env::args().any(|a| a == "--bench")
}

#[path = "common/lcg.rs"]
mod lcg;
use lcg::Lcg;

const SUBMITTERS: usize = 10;

fn submitter(i: usize) -> String {
    format!("user{i}@cs.example.edu")
}

/// `machines` execute hosts of 8 static slots each: slots of one host share
/// Arch, OpSys, Disk and Mips; hosts differ.
fn slots(machines: usize) -> Vec<SlotAd> {
    let mut rng = Lcg(42);
    let mut out = Vec::with_capacity(machines * 8);
    for m in 0..machines {
        let arch = *rng.pick(&["X86_64", "X86_64", "X86_64", "aarch64"]);
        let opsys = *rng.pick(&["LINUX", "LINUX", "LINUX", "LINUX", "WINDOWS", "OSX"]);
        let (cpus, memory) = *rng.pick(&[(1, 2048), (1, 4096), (2, 8192), (4, 16384)]);
        // Disk per slot in KiB: hosts have a handful of disk sizes.
        let disk = *rng.pick(&[20_000_000i64, 40_000_000, 80_000_000, 160_000_000]);
        let mips = 2000 + (rng.next() % 16) * 250;
        let dept = *rng.pick(&["physics", "chemistry", "cs"]);
        for s in 1..=8 {
            let state_roll = rng.next() % 100;
            let (state, activity) = match state_roll {
                0..80 => ("Unclaimed", "Idle"),
                80..95 => ("Claimed", "Busy"),
                _ => ("Owner", "Idle"),
            };
            let mut text = format!(
                "[MyType = \"Machine\"; TargetType = \"Job\"; Name = \"slot{s}@exec{m:05}.cs.example.edu\"; \
                  Machine = \"exec{m:05}.cs.example.edu\"; SlotID = {s}; Arch = \"{arch}\"; OpSys = \"{opsys}\"; \
                  Cpus = {cpus}; Memory = {memory}; Disk = {disk}; TotalCpus = {tc}; Mips = {mips}; KFlops = {kf}; \
                  HasWasm = true; WasmtimeVersion = \"36.0.0\"; CheckpointPlatform = \"andes-snapshot-3\"; \
                  Department = \"{dept}\"; LoadAvg = {load}; KeyboardIdle = {kbd}; \
                  EnteredCurrentState = {ecs}; State = \"{state}\"; Activity = \"{activity}\"; \
                  START = (TARGET.RequestMemory <= Memory) && (TARGET.RequestCpus <= Cpus) && \
                          (TARGET.RequestDisk <= Disk) && (TARGET.JobUniverse =!= 1); \
                  IS_VALID_CHECKPOINT_PLATFORM = (TARGET.CheckpointPlatform =?= undefined) || \
                          (TARGET.CheckpointPlatform == CheckpointPlatform); \
                  Requirements = START && IS_VALID_CHECKPOINT_PLATFORM; \
                  Rank = (TARGET.Department =?= Department) * 10",
                tc = cpus * 8,
                kf = mips * 300,
                load = (rng.next() % 100) as f64 / 100.0,
                kbd = rng.next() % 100_000,
                ecs = 1_700_000_000 + rng.next() % 100_000,
            );
            if state == "Claimed" {
                let u = rng.next() as usize % SUBMITTERS;
                text.push_str(&format!(
                    "; RemoteUser = \"{}\"; RemoteOwner = \"{}\"; CurrentRank = {}",
                    submitter(u),
                    submitter(u),
                    (rng.next() % 2) * 10
                ));
            }
            text.push(']');
            let ad = parse_ad(&text).expect("slot ad parses");
            out.push(SlotAd {
                ad: ad.into(),
                claim_id: format!("<10.0.{}.{}:9618>#{m}#{s}", m / 256, m % 256),
            });
        }
    }
    out
}

/// The job ad of autocluster `c`: its submitter, memory, disk, cpus,
/// requirements and rank vary with `c`.
fn job_ad(c: usize) -> ClassAd {
    let owner = submitter(c % SUBMITTERS);
    let mem = [128, 512, 1024, 2048, 4096, 6000, 12000][c % 7];
    let disk = [1024, 100_000, 1_000_000, 30_000_000][(c / 7) % 4];
    let cpus = [1, 1, 1, 2, 4][(c / 3) % 5];
    let extra = match c % 4 {
        0 => "",
        1 => " && (TARGET.Arch == \"X86_64\")",
        2 => " && (TARGET.OpSys == \"LINUX\")",
        _ => " && (TARGET.Arch == \"X86_64\") && (TARGET.OpSys == \"LINUX\")",
    };
    let rank = match c % 3 {
        0 => "0.0",
        1 => "TARGET.Mips",
        _ => "TARGET.Memory",
    };
    let dept = ["physics", "chemistry", "cs", "biology"][c % 4];
    parse_ad(&format!(
        "[MyType = \"Job\"; TargetType = \"Machine\"; Owner = \"{owner}\"; User = \"{owner}\"; \
          Cmd = \"/home/u/sim.wasm\"; JobUniverse = 5; Department = \"{dept}\"; \
          RequestMemory = {mem}; RequestDisk = {disk}; RequestCpus = {cpus}; JobPrio = 0; \
          Requirements = (TARGET.HasWasm) && (TARGET.Memory >= RequestMemory) && \
                         (TARGET.Disk >= RequestDisk){extra}; \
          Rank = {rank}; ClusterId = {c}; ProcId = 0; Args = \"--seed 0\"; Out = \"out.0\"; \
          QDate = 1700000000; OnExitRemove = true; ShouldTransferFiles = \"YES\"]"
    ))
    .expect("job ad parses")
}

fn bench(c: &mut Criterion) {
    let (clusters, per_cluster, machines) = if full() { (200, 500, 1250) } else { (20, 5, 25) };
    let slots = slots(machines);
    let bases: Vec<ClassAd> = (0..clusters).map(job_ad).collect();
    // The idle jobs: each cluster's base with its own ProcId, Args, Out.
    let jobs: Vec<ClassAd> = (0..clusters * per_cluster)
        .map(|i| {
            let mut j = bases[i % clusters].clone();
            let p = (i / clusters) as i64;
            j.insert_value("ProcId", p);
            j.insert_value("Args", format!("--seed {p}"));
            j.insert_value("Out", format!("out.{p}"));
            j
        })
        .collect();
    let machine_ads: Vec<ClassAd> = slots.iter().map(|s| (*s.ad).clone()).collect();
    let significant = significant_attributes(&machine_ads);

    let mut acs = Autoclusters::new(significant.clone());
    let ids: Vec<u32> = jobs.iter().map(|j| acs.assign(j)).collect();
    assert_eq!(acs.len(), clusters, "one autocluster per base ad");

    let mut requests: Vec<Request> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for (j, id) in jobs.iter().zip(&ids) {
        let r = *seen.entry(*id).or_insert_with(|| {
            let owner = j.eval_attr("Owner").as_str().unwrap_or("").to_string();
            requests.push(Request {
                schedd: "schedd@submit.cs.example.edu".into(),
                submitter: owner,
                autocluster: *id,
                ad: j.clone(),
                idle: 0,
            });
            requests.len() - 1
        });
        requests[r].idle += 1;
    }
    let snap = Snapshot { slots, requests };
    let mut acct = Accountant::new(AccountantConfig::default());
    for i in 0..SUBMITTERS {
        acct.set_real(&submitter(i), 1.0 + i as f64 * 10.0);
    }
    let cfg = NegotiatorConfig {
        preemption_requirements: Some(
            parse_expr("RemoteUserPrio > SubmitterUserPrio * 1.2").expect("parses"),
        ),
        ..NegotiatorConfig::default()
    };
    let now = 1_700_100_000;
    let p = plan(&snap, &acct, &cfg, now);
    eprintln!(
        "negotiator: {} requests, {} slots, {} groups, {} pair evaluations, {} matches ({} preempting), {} spins, {} rejections",
        p.stats.requests,
        p.stats.slots,
        p.stats.slot_groups,
        p.stats.pair_evaluations,
        p.stats.matches,
        p.stats.preemptions,
        p.stats.spins,
        p.rejections.len()
    );

    let mut g = c.benchmark_group("negotiator");
    g.sample_size(10);
    g.bench_function(
        format!("plan_{}jobs_{}ac_{}slots", jobs.len(), clusters, machines * 8),
        |b| b.iter(|| black_box(plan(black_box(&snap), &acct, &cfg, now))),
    );
    g.bench_function(format!("autocluster_assign_{}jobs", jobs.len()), |b| {
        b.iter(|| {
            let mut acs = Autoclusters::new(significant.clone());
            for j in &jobs {
                black_box(acs.assign(j));
            }
            acs.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
