//! The schedd over real HTTP, as a real process: single-job submits from 8
//! concurrent clients, a `queue 100000` submit end to end (expansion, upload,
//! commit), condor_q's summary over a million queued jobs, and one submit's
//! latency with and without another client's costly queries running.
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use andes_protocol::{Client, Keypair, Transport, TrustFile};
use andes_schedd::api::{SubmitReply, SubmitRequest, SummaryReply, SummaryRequest};
use criterion::{Criterion, criterion_group, criterion_main};
use http::Method;

const MODULE: &[u8] = b"\0asm\x01\0\0\0";

/// Full sizes under `cargo bench`; small ones when `cargo test` runs the
/// benchmarks once as a smoke test.
fn scale(full: usize) -> usize {
    if std::env::args().any(|a| a == "--bench") { full } else { (full / 1000).max(1) }
}

struct Schedd {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
    kp: Arc<Keypair>,
    transport: Transport,
}

impl Schedd {
    /// A client of the schedd as alice (over TLS, as every andes connection).
    fn client(&self) -> Client {
        Client::with_transport(&self.url, self.kp.clone(), &self.transport).unwrap()
    }
}

impl Drop for Schedd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn andes() -> Command {
    Command::new(env!("CARGO_BIN_EXE_andes"))
}

fn start() -> Schedd {
    let dir = tempfile::tempdir().unwrap();
    let kp = Keypair::generate("alice").unwrap();
    kp.save(&dir.path().join("keys"), false).unwrap();
    let schedd = Keypair::generate("schedd").unwrap();
    schedd.save(&dir.path().join("keys"), false).unwrap();
    let trust =
        format!("user alice {}\nschedd schedd {}\n", kp.public_line(), schedd.public_line());
    std::fs::write(dir.path().join("trust"), &trust).unwrap();
    let transport = Transport::Tls(Arc::new(TrustFile::parse(&trust, "trust").unwrap()));
    // alice is this process's own account, for the schedd's file work.
    let me = whoami::fallible::username().unwrap_or_else(|_| "root".into());
    std::fs::write(
        dir.path().join("andes.config"),
        // The benchmark's `queue 100000` and its million-job queue are past
        // HTCondor's default MAX_JOBS_PER_SUBMISSION and MAX_JOBS_PER_OWNER.
        format!(
            "SCHEDD_ADDRESS = 127.0.0.1:0\nUSER_ACCOUNT_MAP = alice = {me}\n\
             MAX_JOBS_PER_SUBMISSION = 1000000\nMAX_JOBS_PER_OWNER = 10000000\n"
        ),
    )
    .unwrap();
    let child = andes()
        .arg("schedd")
        .env("ANDES_CONFIG_DIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let f = dir.path().join("spool/.schedd_address");
    let t = Instant::now();
    while !f.exists() {
        assert!(t.elapsed() < Duration::from_secs(30), "the schedd did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let url = format!("http://{}", std::fs::read_to_string(&f).unwrap().trim());
    Schedd { child, url, dir, kp: Arc::new(kp), transport }
}

fn rss_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM")).map(str::to_string))
        .unwrap_or_else(|| "peak RSS unknown on this OS".into())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn upload(rt: &tokio::runtime::Runtime, c: &Client) -> String {
    let digest = andes_schedd::queue::module_digest(MODULE);
    rt.block_on(c.request(Method::PUT, &format!("/v1/modules/{digest}"), MODULE.into())).unwrap();
    digest
}

fn concurrent_single_submits(c: &mut Criterion) {
    let s = start();
    let rt = runtime();
    let client = s.client();
    let digest = upload(&rt, &client);
    let mut g = c.benchmark_group("schedd");
    g.sample_size(10).measurement_time(Duration::from_secs(15));
    // One iteration: 8 clients each submit 50 single-job clusters, one after
    // another, each waiting for its durable acknowledgement (400 submits).
    g.bench_function("submit_400_single_jobs_8_clients", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut tasks = Vec::new();
                for _ in 0..8 {
                    let c = s.client();
                    let d = digest.clone();
                    tasks.push(tokio::spawn(async move {
                        for i in 0..50 {
                            let req = SubmitRequest {
                                cluster: None,
                                cluster_ad: format!(
                                    r#"[Cmd = "job.wasm"; CmdDigest = "{d}"; Args = "{i}"]"#
                                ),
                                procs: vec!["[]".into()],
                            };
                            let _: SubmitReply =
                                c.call(Method::POST, "/v1/submit", Some(&req)).await.unwrap();
                        }
                    }));
                }
                for t in tasks {
                    t.await.unwrap();
                }
            })
        })
    });
    g.finish();
}

fn submit_file_100k(c: &mut Criterion) {
    let s = start();
    std::fs::write(s.dir.path().join("job.wasm"), MODULE).unwrap();
    std::fs::write(
        s.dir.path().join("big.sub"),
        format!(
            "executable = job.wasm\narguments = --seed $(Process)\noutput = out.$(Process)\n\
         request_memory = 64\nqueue {}\n",
            scale(100_000)
        ),
    )
    .unwrap();
    let mut g = c.benchmark_group("schedd");
    g.sample_size(10).measurement_time(Duration::from_secs(30));
    // `andes submit big.sub`, the command as a user runs it: expansion of 100,000
    // jobs, upload, durable commit, acknowledgement.
    g.bench_function("andes_submit_queue_100000", |b| {
        b.iter(|| {
            let out = andes()
                .args(["submit", "big.sub"])
                .current_dir(s.dir.path())
                .env("ANDES_CONFIG_DIR", s.dir.path())
                .env("USER", "alice")
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        })
    });
    g.finish();
}

fn summary_1m(c: &mut Criterion) {
    let s = start();
    let rt = runtime();
    let client = s.client().with_timeout(Duration::from_secs(600));
    let digest = upload(&rt, &client);
    for _ in 0..10 {
        let req = SubmitRequest {
            cluster: None,
            cluster_ad: format!(
                r#"[Cmd = "/home/alice/job.wasm"; CmdDigest = "{digest}"; RequestMemory = 64;
                   Requirements = TARGET.HasWasm && TARGET.Memory >= RequestMemory]"#
            ),
            procs: (0..scale(100_000)).map(|i| format!(r#"[Args = "--seed {i}"]"#)).collect(),
        };
        let _: SubmitReply =
            rt.block_on(client.call(Method::POST, "/v1/submit", Some(&req))).unwrap();
    }
    let mut g = c.benchmark_group("schedd");
    g.sample_size(10);
    g.bench_function("q_summary_1000000_jobs", |b| {
        b.iter(|| {
            let r: SummaryReply = rt
                .block_on(client.call(
                    Method::POST,
                    "/v1/summary",
                    Some(&SummaryRequest::default()),
                ))
                .unwrap();
            assert_eq!(r.totals.jobs, 10 * scale(100_000) as u64);
        })
    });
    g.finish();
    eprintln!("schedd with 1,000,000 jobs: {}", rss_of(s.child.id()));
}

/// `[a0 = 1; a1 = a0 + a0; ...].aN > 0`: 2^N steps without a budget.
fn doubling(n: usize) -> String {
    let mut s = String::from("[a0 = 1");
    for i in 1..=n {
        s.push_str(&format!("; a{i} = a{} + a{}", i - 1, i - 1));
    }
    format!("{s}].a{n} > 0")
}

/// One single-job submit's latency on a queue of 10,000 jobs, alone and
/// while another client sends costly queries (each refused at its step
/// budget) back to back.
fn submit_beside_costly_queries(c: &mut Criterion) {
    let s = start();
    let rt = runtime();
    let client = s.client().with_timeout(Duration::from_secs(120));
    let digest = upload(&rt, &client);
    let req = SubmitRequest {
        cluster: None,
        cluster_ad: format!(r#"[Cmd = "job.wasm"; CmdDigest = "{digest}"]"#),
        procs: (0..scale(10_000)).map(|i| format!(r#"[Args = "{i}"]"#)).collect(),
    };
    let _: SubmitReply = rt.block_on(client.call(Method::POST, "/v1/submit", Some(&req))).unwrap();
    let one = SubmitRequest {
        cluster: None,
        cluster_ad: format!(r#"[Cmd = "job.wasm"; CmdDigest = "{digest}"]"#),
        procs: vec!["[]".into()],
    };
    let mut g = c.benchmark_group("schedd");
    g.sample_size(50);
    g.bench_function("submit_1_job_alone", |b| {
        b.iter(|| {
            let _: SubmitReply =
                rt.block_on(client.call(Method::POST, "/v1/submit", Some(&one))).unwrap();
        })
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let costly = {
        let (c, stop) = (s.client().with_timeout(Duration::from_secs(120)), stop.clone());
        std::thread::spawn(move || {
            let rt = runtime();
            let req = andes_schedd::api::QueryRequest {
                targets: andes_schedd::api::Targets {
                    constraint: Some(doubling(40)),
                    ..Default::default()
                },
                ..Default::default()
            };
            let mut refused = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = rt.block_on(c.request(
                    Method::POST,
                    "/v1/query",
                    serde_json::to_vec(&req).unwrap().into(),
                ));
                if r.is_ok_and(|r| r.status == http::StatusCode::BAD_REQUEST) {
                    refused += 1;
                }
            }
            refused
        })
    };
    g.bench_function("submit_1_job_beside_costly_queries", |b| {
        b.iter(|| {
            let _: SubmitReply =
                rt.block_on(client.call(Method::POST, "/v1/submit", Some(&one))).unwrap();
        })
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let refused = costly.join().unwrap();
    eprintln!("costly queries refused at their budget meanwhile: {refused}");
    g.finish();
}

criterion_group!(
    benches,
    concurrent_single_submits,
    submit_file_100k,
    summary_1m,
    submit_beside_costly_queries
);
criterion_main!(benches);
