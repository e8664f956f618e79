//! Deferral precision: 100 jobs deferred to the same second on an idle
//! personal pool (`andes pool up --slots 100`, a real process), each the
//! `stamp` sample printing when it began by its own wall clock. The figure is
//! how late each started after its DeferralTime; criterion records each
//! batch's p99, and the whole distribution (median, p99, max) is printed.
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use andes_schedd::api::{SubmitReply, SubmitRequest};
use criterion::{Criterion, criterion_group, criterion_main};
use http::Method;

/// 100 jobs per batch under `cargo bench`; 4 when `cargo test` runs it once.
fn jobs() -> usize {
    if std::env::args().any(|a| a == "--bench") { 100 } else { 4 }
}

#[path = "common/mod.rs"]
mod common;

/// The personal pool and the batches so far.
struct Pool {
    p: common::PersonalPool,
    batch: u32,
}

impl std::ops::Deref for Pool {
    type Target = common::PersonalPool;
    fn deref(&self) -> &common::PersonalPool {
        &self.p
    }
}

fn start(slots: usize) -> Pool {
    Pool { p: common::pool_up(slots), batch: 0 }
}

impl Pool {
    /// Submits `n` stamp jobs deferred to QDate + 5 s and waits for all of
    /// them; returns each one's lateness in milliseconds.
    fn batch(&mut self, n: usize) -> Vec<i64> {
        self.batch += 1;
        // Uploaded with each submit, as `andes submit` does: an upload is
        // kept for its owner's jobs, and dropped once none is left.
        let digest = self.put_module("stamp");
        let out = self.dir.path().join(format!("b{}", self.batch));
        std::fs::create_dir_all(&out).unwrap();
        let req = SubmitRequest {
            cluster: None,
            cluster_ad: format!(
                r#"[Cmd = "stamp.wasm"; CmdDigest = "{digest}"; Iwd = "{}";
                   RequestMemory = 32; RequestDisk = 1024; JobUniverse = 5;
                   DeferralTime = (QDate + 5); DeferralWindow = 0; DeferralPrepTime = 300;
                   ScheddInterval = 300;
                   Requirements = TARGET.HasWasm && TARGET.HasJobDeferral]"#,
                out.display()
            ),
            procs: (0..n).map(|i| format!("[Out = \"stamp.{i}.out\"]")).collect(),
        };
        let reply: SubmitReply =
            self.rt.block_on(self.client.call(Method::POST, "/v1/submit", Some(&req))).unwrap();
        let t = Instant::now();
        while self.jobs_left() > 0 {
            assert!(t.elapsed() < Duration::from_secs(120), "the deferred jobs did not finish");
            std::thread::sleep(Duration::from_millis(50));
        }
        let cluster = reply.cluster;
        let history: andes_schedd::api::QueryReply = self
            .rt
            .block_on(self.client.call(
                Method::POST,
                "/v1/history",
                Some(&andes_schedd::api::HistoryRequest {
                    constraint: Some(format!("ClusterId == {cluster}")),
                    owners: Vec::new(),
                    limit: Some(1),
                    projection: vec!["QDate".into(), "JobStatus".into()],
                }),
            ))
            .unwrap();
        let ad = classad::parse_ad(&history.ads[0]).unwrap();
        let classad::Value::Int(qdate) = ad.eval_attr("QDate") else { panic!("no QDate") };
        let deferral_ms = (qdate + 5) * 1000;
        (0..n)
            .map(|i| {
                let text = std::fs::read_to_string(out.join(format!("stamp.{i}.out")))
                    .unwrap_or_else(|e| panic!("job {cluster}.{i} wrote no output: {e}"));
                let ms: i64 = text.trim().strip_prefix("started ").unwrap().parse().unwrap();
                ms - deferral_ms
            })
            .collect()
    }
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn precision(c: &mut Criterion) {
    let n = jobs();
    let mut pool = start(n);
    let all = Arc::new(Mutex::new(Vec::new()));
    let mut g = c.benchmark_group("deferral");
    g.sample_size(10).warm_up_time(Duration::from_millis(1));
    g.bench_function("start_minus_deferral_time_p99_of_100_jobs", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut late = pool.batch(n);
                late.sort_unstable();
                assert!(late[0] >= 0, "a job started {} ms early", -late[0]);
                total += Duration::from_millis(percentile(&late, 0.99) as u64);
                all.lock().unwrap().extend(late);
            }
            total
        })
    });
    g.finish();
    let mut all = all.lock().unwrap().clone();
    all.sort_unstable();
    eprintln!(
        "deferral lateness over {} jobs: median {} ms, p99 {} ms, max {} ms, min {} ms",
        all.len(),
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        all[all.len() - 1],
        all[0]
    );
}

criterion_group!(benches, precision);
criterion_main!(benches);
