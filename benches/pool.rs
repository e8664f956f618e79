//! A whole personal pool (`andes pool up --slots 2`, a real process: central
//! manager, schedd and execute host): end-to-end throughput of trivial jobs
//! from the first submit to the last completion, and the submit→start latency
//! of one job on an idle pool.
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use std::time::{Duration, Instant};

use andes_schedd::api::{QueryReply, QueryRequest, SubmitReply, SubmitRequest};
use criterion::{Criterion, criterion_group, criterion_main};
use http::Method;

/// Full sizes under `cargo bench`; small ones when `cargo test` runs the
/// benchmarks once as a smoke test.
fn scale(full: usize) -> usize {
    if std::env::args().any(|a| a == "--bench") { full } else { (full / 1000).max(2) }
}

#[path = "common/mod.rs"]
mod common;

/// The personal pool.
struct Pool {
    p: common::PersonalPool,
}

impl std::ops::Deref for Pool {
    type Target = common::PersonalPool;
    fn deref(&self) -> &common::PersonalPool {
        &self.p
    }
}

fn start() -> Pool {
    Pool { p: common::pool_up(2) }
}

impl Pool {
    /// Submits `n` trivial jobs (`exit_code 0`) as one cluster.
    fn submit(&self, n: usize) {
        self.submit_module("exit_code", "0", n);
    }

    /// Submits `n` jobs of sample `name` with `args` as one cluster as
    /// `andes submit` does: the submit first, and the module only when the
    /// schedd says it lacks it (412), then the submit again.
    fn submit_module(&self, name: &str, args: &str, n: usize) {
        let module = std::fs::read(common::sample(name)).unwrap();
        let digest = andes_schedd::queue::module_digest(&module);
        let iwd = self.dir.path().display();
        let req = SubmitRequest {
            cluster: None,
            cluster_ad: format!(
                r#"[Cmd = "{name}.wasm"; CmdDigest = "{digest}"; Arguments = "{args}"; Iwd = "{iwd}";
                   RequestMemory = 64; RequestDisk = 1024; JobUniverse = 5;
                   Requirements = TARGET.HasWasm && TARGET.Memory >= RequestMemory]"#
            ),
            procs: vec!["[]".to_string(); n],
        };
        let submit = || -> Result<SubmitReply, _> {
            self.rt.block_on(self.client.call(Method::POST, "/v1/submit", Some(&req)))
        };
        if let Err(e) = submit() {
            let missing = matches!(e.kind, andes_protocol::client::ClientErrorKind::Status { status, .. }
                if status == http::StatusCode::PRECONDITION_FAILED);
            assert!(missing, "{e}");
            self.put_module(name);
            submit().unwrap();
        }
    }

    /// Removes every job in the queue (running ones are vacated).
    fn remove_all(&self) {
        let req = andes_schedd::api::ChangeRequest {
            targets: andes_schedd::api::Targets {
                constraint: Some("true".into()),
                ..Default::default()
            },
            change: andes_schedd::api::Change::Remove { reason: "bench".into() },
        };
        let _: serde_json::Value =
            self.rt.block_on(self.client.call(Method::POST, "/v1/change", Some(&req))).unwrap();
    }

    /// Waits until the queue is empty (every job completed), polling.
    fn drain(&self) {
        let t = Instant::now();
        while self.jobs_left() > 0 {
            assert!(t.elapsed() < Duration::from_secs(600), "the pool did not drain");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until every slot is Unclaimed in the collector: an idle pool.
    fn settle(&self) {
        let q = andes_protocol::pool::CollectorQuery {
            kind: Some("Machine".into()),
            constraint: Some("State != \"Unclaimed\"".into()),
            projection: vec!["Name".into()],
        };
        let t = Instant::now();
        loop {
            let r: andes_protocol::pool::CollectorQueryReply = self
                .rt
                .block_on(self.collector.call(Method::POST, "/v1/collector/query", Some(&q)))
                .unwrap();
            if r.ads.is_empty() {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "the slots did not become idle");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// On an idle pool (the queue drained, every slot unclaimed), how long
    /// from `submit` until the queue has no idle job.
    fn until_not_idle(&self, submit: impl FnOnce(&Pool)) -> Duration {
        self.drain();
        self.settle();
        let t = Instant::now();
        submit(self);
        while !self.none_idle() {
            std::hint::spin_loop();
        }
        t.elapsed()
    }

    /// Whether the queue has no idle job (the one submitted has started or ended).
    fn none_idle(&self) -> bool {
        let req = QueryRequest {
            targets: andes_schedd::api::Targets {
                constraint: Some("JobStatus == 1".into()),
                ..Default::default()
            },
            projection: vec!["JobStatus".into()],
            ..Default::default()
        };
        let r: QueryReply =
            self.rt.block_on(self.client.call(Method::POST, "/v1/query", Some(&req))).unwrap();
        r.ads.is_empty()
    }
}

fn throughput(c: &mut Criterion) {
    let pool = start();
    let n = scale(10_000);
    let mut g = c.benchmark_group("pool");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.throughput(criterion::Throughput::Elements(n as u64));
    g.bench_function("trivial_jobs_10000_two_slots", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                pool.submit(n);
                pool.drain();
                total += t.elapsed();
            }
            total
        })
    });
    g.finish();
}

fn latency(c: &mut Criterion) {
    let pool = start();
    let mut g = c.benchmark_group("pool");
    g.sample_size(50);
    g.bench_function("submit_to_start_idle_pool", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| pool.until_not_idle(|p| p.submit(1))).sum())
    });
    // A job that runs on (a minute's sleep): until the schedd says it runs,
    // not until it ends as for the trivial job above.
    g.bench_function("submit_to_running_idle_pool", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let t = pool.until_not_idle(|p| p.submit_module("sleeper", "60", 1));
                    pool.remove_all();
                    t
                })
                .sum()
        })
    });
    g.finish();
}

criterion_group!(benches, latency, throughput);
criterion_main!(benches);
