//! Job queue benchmarks: a `queue 100000` cluster made durable, and condor_q's
//! summary over a million queued jobs.
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use std::time::{Duration, Instant};

use andes_schedd::queue::{Actor, JobLimits, Queue, QueueConfig, Submit};

/// A queue that takes the benchmark's `queue 100000` (past HTCondor's
/// default MAX_JOBS_PER_SUBMISSION).
fn config(dir: &tempfile::TempDir) -> QueueConfig {
    let mut c = QueueConfig::new(dir.path().join("q.db"), "bench");
    c.job_limits = JobLimits { per_submission: 1 << 30, per_owner: 1 << 30, submitted: 1 << 30 };
    c
}
use classad::ClassAd;
use criterion::{Criterion, criterion_group, criterion_main};

/// The jobs' module: a job may name only what its owner uploaded.
const MODULE: &[u8] = b"\0asm\x01\0\0\0";

fn module_digest() -> String {
    andes_schedd::queue::module_digest(MODULE)
}

/// Stores the module for `who`, as a submit's client does first.
fn upload(rt: &tokio::runtime::Runtime, q: &Queue, who: &Actor) {
    rt.block_on(q.store_module(who, &module_digest(), MODULE.to_vec(), 0)).unwrap();
}

fn cluster_ad() -> ClassAd {
    classad::parse_ad(
        &format!(r#"[Cmd = "/home/alice/primes.wasm"; CmdDigest = "{}";
        JobUniverse = 5; Iwd = "/home/alice/run"; Out = "out.$(Process)"; Err = "err";
        RequestCpus = 1; RequestMemory = 64; RequestDisk = 1024; JobPrio = 0;
        Requirements = TARGET.HasWasm && TARGET.Memory >= RequestMemory && TARGET.Disk >= RequestDisk;
        Rank = 0.0; OnExitRemove = true; OnExitHold = false; PeriodicHold = false;
        PeriodicRelease = false; PeriodicRemove = false; ShouldTransferFiles = "YES";
        WhenToTransferOutput = "ON_EXIT"; TransferIn = false; JobNotification = 0;
        MyType = "Job"; TargetType = "Machine"]"#, module_digest()),
    )
    .unwrap()
}

/// Full sizes under `cargo bench`; small ones when `cargo test` runs the
/// benchmarks once as a smoke test.
fn scale(full: usize) -> usize {
    if std::env::args().any(|a| a == "--bench") { full } else { (full / 1000).max(1) }
}

fn procs(n: usize) -> Vec<ClassAd> {
    (0..n)
        .map(|i| {
            let mut p = ClassAd::new();
            p.insert_value("Args", format!("--seed {i}"));
            p.insert_value("Out", format!("out.{i}"));
            p
        })
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn submit_100k(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("queue");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("submit_cluster_100000_durable", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let q = Queue::open(config(&dir)).unwrap();
                upload(&rt, &q, &Actor::user("alice"));
                let s = Submit {
                    cluster: None,
                    cluster_ad: cluster_ad(),
                    procs: procs(scale(100_000)),
                };
                let t = Instant::now();
                rt.block_on(q.submit(&Actor::user("alice"), s, 1)).unwrap();
                total += t.elapsed();
            }
            total
        })
    });
    g.finish();
}

fn summary_1m(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let q = Queue::open(config(&dir)).unwrap();
    for owner in 0..10 {
        let s = Submit { cluster: None, cluster_ad: cluster_ad(), procs: procs(scale(100_000)) };
        let who = Actor::user(&format!("user{owner}"));
        upload(&rt, &q, &who);
        rt.block_on(q.submit(&who, s, 1)).unwrap();
    }
    eprintln!("queue of {} jobs; {}", q.read().len(), rss());
    let mut g = c.benchmark_group("queue");
    g.sample_size(10);
    g.bench_function("summary_1000000_jobs", |b| b.iter(|| q.read().summary(&[])));
    g.finish();
}

/// The process's resident set, where the OS tells it cheaply.
fn rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS")).map(str::to_string))
        .unwrap_or_else(|| "RSS unknown on this OS".into())
}

criterion_group!(benches, submit_100k, summary_1m);
criterion_main!(benches);
