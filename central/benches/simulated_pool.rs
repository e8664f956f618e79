//! A simulated pool of 1,000, 10,000 and 100,000 slots against the real
//! central manager: how fast the collector takes slot ads, how long a
//! negotiation cycle takes, and what the central manager spends per match.
//!
//! **Simulated:** the execute hosts and the schedds. Hosts have 8 static
//! slots each (125, 1,250 and 12,500 hosts), each host its own ed25519 key
//! and identity in the trust file. Their slot ads are written after ads a
//! real `andes host` published (`andes pool up`, then `andes status -l`):
//! the same attributes in the same order, the startd's published policy of
//! a dedicated execute node (`START = true`), and, when Claimed, the
//! running job's attributes. Hosts differ in Arch, Memory per slot, and in
//! `Disk`, which a host measures on its EXECUTE file system and is
//! therefore different on every host; LoadAvg, KeyboardIdle and the like
//! differ per slot. Three schedds answer `/v1/negotiate/demand` on loopback
//! sockets with 100 autoclusters each (300 in all, 30 submitters), each
//! group's ad a full job ad as a real schedd sends it; they answer
//! `/v1/negotiate/matches` without parsing the grants and take none (so
//! every cycle is the same), except in the match-notice bench, where they
//! take every match and the hosts are loopback listeners that count the
//! notices and the connections they came on.
//!
//! **Real:** everything of `andes-central`. Slot ads reach the collector as
//! the host's publisher sends them: one `POST /v1/collector/updates` per
//! host and round, the JSON body of a `CollectorUpdates`, signed with the
//! host's key (`SignedHeaders`), through the collector's real router behind
//! the real `Auth` layer (signature, nonce and replay cache written to a
//! file as the daemon does, key rates) into the real `Collector`. The
//! requests are driven into the router in-process (each carries the
//! `ConnectionInfo` the server would attach), so TCP and TLS are not
//! counted; one bench also sends them over a loopback socket to the real
//! `Server`. Signing is the hosts' work and is done before the clock
//! starts. Cycles are `Central::cycle` of `manager.rs`: the collector's
//! snapshot, demand from each schedd over HTTP, the planner, the grants to
//! each schedd over HTTP, the notices to the hosts.
//!
//! 1,000 and 10,000 slots are measured by criterion; 100,000 is measured by
//! hand, a few runs each (min / median / max printed), as each run takes
//! seconds. Figures that are not times (bytes per slot ad, the collector's
//! lock held by a cycle, the size of the grants, connections per notice)
//! are printed as the bench goes. Run with
//! `cargo bench -p andes-central --bench simulated_pool`; the figures are
//! in `journal/2026-12-02-simulated-pool.md`.
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use andes_central::collector::{AdType, Collector};
use andes_central::manager::{Central, CentralConfig, OFFER_GRACE};
use andes_central::negotiator::{
    Accountant, AccountantConfig, NegotiatorConfig, PlanStats, Request, SlotAd, Snapshot, plan,
};
use andes_protocol::pool::{
    CollectorUpdate, CollectorUpdates, DemandGroup, DemandReply, MatchesReply, MatchesRequest,
};
use andes_protocol::{
    Auth, Clock, ConnectionInfo, Destination, Keypair, ManualClock, SignedHeaders, TrustFile,
    Verifier, VerifierConfig,
};
use axum::body::Bytes;
use classad::ClassAd;
use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main,
};
use tower::ServiceExt;

/// Full sizes under `cargo bench`; one small pool when `cargo test` runs the
/// benchmarks once as a smoke test.
fn full() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// The sizes measured by criterion, and the one measured by hand.
/// `SIMULATED_POOL_SLOTS=30000,50000` measures those sizes by criterion
/// instead (to profile one).
fn sizes() -> (Vec<usize>, Option<usize>) {
    if let Ok(list) = std::env::var("SIMULATED_POOL_SLOTS") {
        let sizes = list.split(',').map(|n| n.trim().parse().expect("a number of slots"));
        return (sizes.collect(), None);
    }
    if full() { (vec![1_000, 10_000], Some(100_000)) } else { (vec![64], None) }
}

/// Runs by hand at the largest size.
const HAND_RUNS: usize = 3;

/// Whether a bench id is selected by the filter on the command line (as
/// criterion selects), so that only what is measured is set up.
fn selected(id: &str) -> bool {
    // Criterion's options that take a value.
    const VALUED: &[&str] = &[
        "--profile-time",
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--save-baseline",
        "--baseline",
        "--load-baseline",
        "--significance-level",
        "--noise-threshold",
        "--confidence-level",
        "--nresamples",
        "--output-format",
        "--color",
        "--format",
        "--plotting-backend",
    ];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if VALUED.contains(&a.as_str()) {
            args.next();
        } else if !a.starts_with('-') {
            // A substring, or anchored with `^` and `$`.
            let (start, f) = a.strip_prefix('^').map_or((false, a.as_str()), |f| (true, f));
            let (end, f) = f.strip_suffix('$').map_or((false, f), |f| (true, f));
            return match (start, end) {
                (true, true) => id == f,
                (true, false) => id.starts_with(f),
                (false, true) => id.ends_with(f),
                (false, false) => id.contains(f),
            };
        }
    }
    true
}

const SLOTS_PER_HOST: usize = 8;
const SCHEDDS: usize = 3;
const AUTOCLUSTERS_PER_SCHEDD: usize = 100;
const SUBMITTERS_PER_SCHEDD: usize = 10;
/// The collector's address the hosts sign for (plain HTTP on loopback).
const COLLECTOR: &str = "127.0.0.1:9618";
const T0: i64 = 1_796_000_000;
/// The schedd's request body limit (`andes_schedd::schedd::BODY_LIMIT`),
/// which its simulation applies to the grants it is sent.
const SCHEDD_BODY_LIMIT: usize = 256 << 20;

#[path = "common/lcg.rs"]
mod lcg;
use lcg::Lcg;

/// A group of ten flat samples of about 3 s in all: every group of this
/// bench measures whole rounds or cycles, each long.
fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(3));
    g
}

/// One simulated execute host.
struct Host {
    name: String,
    key: Arc<Keypair>,
    arch: &'static str,
    memory: i64,
    disk: i64,
    address: String,
    seed: u64,
}

fn hosts(slots: usize) -> Vec<Host> {
    let mut rng = Lcg(7);
    (0..slots.div_ceil(SLOTS_PER_HOST))
        .map(|i| {
            let name = format!("exec{i:05}.pool.example.org");
            let mut seed = [0u8; 32];
            seed[..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
            let key = Arc::new(Keypair::from_seed(&name, seed).expect("a valid key name"));
            let (arch, memory) = *rng.pick(&[
                ("X86_64", 2048),
                ("X86_64", 3013),
                ("X86_64", 4096),
                ("X86_64", 8192),
                ("aarch64", 4096),
            ]);
            // The share of the free space on EXECUTE, as the host measures
            // it: different on every host.
            let disk = 40_000_000 + (rng.next() % 20_000_000) as i64;
            let address = format!("10.{}.{}.{}:9620", i / 65536, (i / 256) % 256, i % 256);
            Host { name, key, arch, memory, disk, address, seed: rng.next() }
        })
        .collect()
}

/// Who holds a claimed slot.
#[derive(Clone, Copy)]
enum Slot {
    Unclaimed,
    Claimed,
}

fn submitter(i: usize) -> String {
    format!("user{i:02}")
}

fn schedd_name(s: usize) -> String {
    format!("schedd@submit{s}.pool.example.org")
}

/// Slot `s` (from 1) of `h` as its host publishes it (new ClassAd syntax),
/// and its private part (the claim id).
fn slot_ad(h: &Host, s: usize, state: Slot) -> (String, String) {
    let mut rng = Lcg(h.seed.wrapping_add(s as u64));
    let entered = T0 - 600 - (rng.next() % 3600) as i64;
    let idle = 17_000 + (rng.next() % 5000) as i64;
    let load = (rng.next() % 1000) as f64 / 1000.0;
    let (st, activity) = match state {
        Slot::Unclaimed => ("Unclaimed", "Idle"),
        Slot::Claimed => ("Claimed", "Busy"),
    };
    let mut ad = format!(
        r#"[MyType = "Machine"; TargetType = "Job"; Name = "slot{s}@{host}"; Machine = "{host}"; SlotID = {s}; VirtualMachineID = {s}; SlotType = 0; Arch = "{arch}"; OpSys = "LINUX"; Cpus = 1; TotalCpus = {cpus}; Memory = {mem}; Disk = {disk}; VirtualMemory = 0; UidDomain = "{host}"; FileSystemDomain = "{host}"; CheckpointPlatform = "andes-snapshot-3/instrumentation-3"; HasWasm = true; HasJobDeferral = true; HasFileTransfer = true; WasmtimeVersion = "36.0.20"; WasmFeatures = {{ "bulk-memory","multi-value","mutable-global","reference-types","saturating-float-to-int","sign-extension","simd" }}; LastBenchmark = 0; Mips = 0; KFlops = 0; CurrentRank = 0.0; START = true; IS_VALID_CHECKPOINT_PLATFORM = (((TARGET.WasmCheckpoint is "transparent") == false) || ((MY.CheckpointPlatform isnt undefined) && ((TARGET.LastCheckpointPlatform is MY.CheckpointPlatform) || (TARGET.NumCkpts == 0)))); Rank = 0; PERIODIC_CHECKPOINT = ((ImageSize < 60000) && ((CurrentTime - LastPeriodicCheckpoint) > (6 * (60 * 60)))) || ((CurrentTime - LastPeriodicCheckpoint) > (12 * (60 * 60))); MaxJobRetirementTime = 0; WANT_SUSPEND = false; SUSPEND = false; CONTINUE = true; PREEMPT = false; WANT_VACATE = true; KILL = false; Requirements = START && IS_VALID_CHECKPOINT_PLATFORM; State = "{st}"; Activity = "{activity}"; EnteredCurrentState = {entered}; EnteredCurrentActivity = {entered}; LoadAvg = {load}; CondorLoadAvg = {cload}; KeyboardIdle = {idle}; ConsoleIdle = {idle}; ClockMin = 376; ClockDay = 3; CpuIsBusy = {busy}; CpuBusyTime = 0"#,
        host = h.name,
        arch = h.arch,
        cpus = SLOTS_PER_HOST,
        mem = h.memory,
        disk = h.disk,
        cload = if matches!(state, Slot::Claimed) { load } else { 0.0 },
        busy = matches!(state, Slot::Claimed),
    );
    if let Slot::Claimed = state {
        let user = submitter((rng.next() as usize) % (SCHEDDS * SUBMITTERS_PER_SCHEDD));
        let schedd = schedd_name((rng.next() as usize) % SCHEDDS);
        let run = T0 - entered;
        let image = 1000 + (rng.next() % 500_000) as i64;
        ad.push_str(&format!(
            r#"; RemoteOwner = "{user}"; RemoteUser = "{user}"; ClientMachine = "{schedd}"; TotalClaimRunTime = {run}; TotalClaimSuspendTime = 0; JobId = "{c}.{p}"; JobStart = {entered}; JobUniverse = 5; ImageSize = {image}; ExecutableSize = 67; TotalJobRunTime = {run}; TotalJobSuspendTime = 0; MemoryUsage = {mu}; ResidentSetSize = {image}"#,
            c = 1000 + rng.next() % 100_000,
            p = rng.next() % 1000,
            mu = (image + 1023) / 1024,
        ));
    }
    ad.push_str(&format!(r#"; MyAddress = "{a}"; StartdIpAddr = "<{a}>"]"#, a = h.address));
    // Parsed and printed again: the text a host's publisher sends.
    let ad = classad::parse_ad(&ad).expect("slot ad parses").to_string();
    let private = format!(r#"[ClaimId = "{s}#{}"]"#, rng.hex(16));
    (ad, private)
}

/// The job ad of autocluster `ac` (0-based) of schedd `s`: a full job ad
/// as the schedd's demand carries it.
fn job_ad(s: usize, ac: usize) -> (String, ClassAd) {
    let owner = submitter(s * SUBMITTERS_PER_SCHEDD + ac % SUBMITTERS_PER_SCHEDD);
    let mem = [64, 256, 512, 1024, 2048, 3000, 4096][ac % 7];
    let usage = [67, 10_000, 2_000_000][(ac / 7) % 3];
    let cpus = if ac % 50 == 49 { 2 } else { 1 };
    let extra = match ac % 5 {
        0 | 1 => "",
        2 => r#" && (TARGET.Arch == "X86_64")"#,
        3 => r#" && (TARGET.OpSys == "LINUX")"#,
        _ => r#" && (TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX")"#,
    };
    let rank = if ac % 10 == 9 { "TARGET.Memory" } else { "0.0" };
    let cluster = 100 + ac;
    let qdate = T0 - 3600 - ac as i64;
    let host = format!("submit{s}.pool.example.org");
    let text = format!(
        r#"[JobUniverse = 5; Cmd = "/home/{owner}/sim/model{ac}.wasm"; CmdDigest = "sha256:{digest}"; Arguments = "--seed $(Process)"; Environment = ""; In = "/dev/null"; TransferIn = false; Out = "out.0"; StreamOut = false; Err = "err.0"; StreamErr = false; UserLog = "/home/{owner}/sim/job.log"; ShouldTransferFiles = "IF_NEEDED"; WhenToTransferOutput = "ON_EXIT"; RequestCpus = {cpus}; RequestMemory = {mem}; RequestDisk = DiskUsage; Requirements = (TARGET.HasWasm) && (TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory){extra}; Rank = {rank}; JobPrio = 0; JobNotification = 0; Iwd = "/home/{owner}/sim"; DiskUsage = {usage}; ImageSize = {usage}; ExecutableSize = {usage}; TransferInputSizeMB = 0; ClusterId = {cluster}; Owner = "{owner}"; User = "{owner}@{host}"; QDate = {qdate}; MyType = "Job"; NumCkpts = 0; NumRestarts = 0; NumJobStarts = 0; NumJobCompletions = 0; NumHolds = 0; ProcId = 0; JobStatus = 1; EnteredCurrentStatus = {qdate}; GlobalJobId = "{schedd}#{cluster}.0#{qdate}"]"#,
        digest = Lcg(ac as u64 + 1000 * s as u64).hex(32),
        schedd = schedd_name(s),
    );
    let ad = classad::parse_ad(&text).expect("job ad parses");
    (ad.to_string(), ad)
}

// ---------------------------------------------------------------------------
// Memory, from /proc (Linux only; elsewhere nothing is printed).

fn proc_status_kb(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn rss_bytes() -> Option<u64> {
    proc_status_kb("VmRSS:").map(|k| k * 1024)
}

/// Resets the peak RSS (`VmHWM`) to the current RSS.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn peak_bytes() -> Option<u64> {
    proc_status_kb("VmHWM:").map(|k| k * 1024)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

// ---------------------------------------------------------------------------
// The collector's side: signed rounds of slot ads.

/// The collector's router, as the central manager serves it, over a fresh
/// store, and what drives it.
struct CollectorRig {
    clock: Arc<ManualClock>,
    collector: Arc<Mutex<Collector>>,
    router: axum::Router,
    /// Each request of a round: the `CollectorUpdates` body and its host's key.
    rounds: Vec<(Arc<Keypair>, Bytes)>,
    _replay: tempfile::TempDir,
}

/// A collector whose hosts send their `slots` slot ads in `state`,
/// `per_request` ads to a request (8: a host's whole round in one).
fn collector_rig(hosts: &[Host], slots: usize, state: Slot, per_request: usize) -> CollectorRig {
    let clock = Arc::new(ManualClock::new(T0));
    let mut trust = String::new();
    for h in hosts {
        trust.push_str(&format!("host {} {}\n", h.name, h.key.public_line()));
    }
    let trust = TrustFile::parse(&trust, "trust").expect("trust file parses");
    let replay = tempfile::tempdir().expect("a temporary directory");
    let verifier = Verifier::with_replay_file(
        trust,
        VerifierConfig::default(),
        &replay.path().join("central_replay_cache"),
        T0,
    )
    .expect("a replay cache");
    let auth = Auth::new(verifier, clock.clone());
    let collector = Arc::new(Mutex::new(Collector::default()));
    let poke = Arc::new(tokio::sync::Notify::new());
    let router =
        andes_central::collector::api::routes(collector.clone(), clock.clone(), &auth, Some(poke))
            .router;
    let mut rounds = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let n = SLOTS_PER_HOST.min(slots - i * SLOTS_PER_HOST);
        let updates: Vec<CollectorUpdate> = (1..=n)
            .map(|s| {
                let (ad, private) = slot_ad(h, s, state);
                CollectorUpdate::whole("Machine", ad, Some(private))
            })
            .collect();
        for chunk in updates.chunks(per_request) {
            let body = CollectorUpdates { updates: chunk.to_vec() };
            let body = serde_json::to_vec(&body).expect("serialises");
            rounds.push((h.key.clone(), Bytes::from(body)));
        }
    }
    CollectorRig { clock, collector, router, rounds, _replay: replay }
}

const UPDATES_PATH: &str = "/v1/collector/updates";

/// Each host's round, signed now (the hosts' work, done before timing).
fn signed_round(rig: &CollectorRig) -> Vec<axum::http::Request<axum::body::Body>> {
    let now = rig.clock.now();
    let dest = Destination::Addr(COLLECTOR.to_string());
    let local: SocketAddr = COLLECTOR.parse().expect("an address");
    rig.rounds
        .iter()
        .enumerate()
        .map(|(i, (key, body))| {
            let signed = SignedHeaders::sign(key, &dest, "POST", UPDATES_PATH, body, now);
            let mut req = axum::http::Request::builder()
                .method("POST")
                .uri(UPDATES_PATH)
                .header(http::header::HOST, COLLECTOR)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(axum::body::Body::from(body.clone()))
                .expect("a request");
            signed.apply(req.headers_mut());
            req.extensions_mut().insert(ConnectionInfo {
                peer_key: None,
                local_key: None,
                local_addr: local,
                remote_addr: SocketAddr::from(([127, 0, 0, 1], 20_000 + (i % 40_000) as u16)),
            });
            req
        })
        .collect()
}

/// Drives one signed round through the router, every host at once; returns
/// the time taken. Panics if any update was refused.
async fn drive_round(
    router: &axum::Router,
    reqs: Vec<axum::http::Request<axum::body::Body>>,
) -> Duration {
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for req in reqs {
        let r = router.clone();
        set.spawn(async move {
            let resp = r.oneshot(req).await.expect("infallible");
            let ok = resp.status().is_success();
            let body = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap_or_default();
            (ok, body)
        });
    }
    let mut refused = None;
    while let Some(r) = set.join_next().await {
        let (ok, body) = r.expect("a task");
        let reply: Option<andes_protocol::pool::CollectorUpdatesReply> =
            serde_json::from_slice(&body).ok();
        if !ok || reply.is_none_or(|r| !r.refused.is_empty()) {
            refused = Some(String::from_utf8_lossy(&body).into_owned());
        }
    }
    let took = start.elapsed();
    if let Some(why) = refused {
        panic!("the collector refused a round: {why}");
    }
    took
}

/// Moves the clock on between rounds (a round a minute): nonces leave the
/// replay cache as they would, and no ad expires.
const ROUND_GAP: i64 = 60;

fn round_once(rt: &tokio::runtime::Runtime, rig: &CollectorRig) -> Duration {
    rig.clock.advance(ROUND_GAP);
    let reqs = signed_round(rig);
    rt.block_on(drive_round(&rig.router, reqs))
}

fn bench_collector(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let (sizes, hand) = sizes();
    let mut g = group(c, "simulated_pool/collector_round");
    for &n in sizes.iter().chain(hand.iter()) {
        let by_hand = Some(n) == hand;
        let hs = hosts(n);
        let kinds = [
            ("unclaimed", Slot::Unclaimed, SLOTS_PER_HOST),
            ("claimed", Slot::Claimed, SLOTS_PER_HOST),
            // Each slot ad in a request of its own: what a pool whose slots
            // change one at a time sends.
            ("unclaimed_one_per_request", Slot::Unclaimed, 1),
        ];
        for (label, state, per_request) in kinds {
            let id = format!("simulated_pool/collector_round/{label}/{n}");
            // One ad per request at 100,000 would fill the replay cache.
            if !selected(&id) || (by_hand && per_request == 1) {
                continue;
            }
            let rig = collector_rig(&hs, n, state, per_request);
            // The first round fills the store.
            round_once(rt, &rig);
            let held = rig.collector.lock().expect("the store").len();
            assert_eq!(held, n, "every slot ad kept");
            let bytes: usize = rig.rounds.iter().map(|(_, b)| b.len()).sum();
            eprintln!(
                "{id}: {} hosts, {} requests a round, {:.1} MiB of bodies ({} B per slot ad)",
                hs.len(),
                rig.rounds.len(),
                mib(bytes as u64),
                bytes / n,
            );
            if by_hand {
                let times: Vec<Duration> = (0..HAND_RUNS).map(|_| round_once(rt, &rig)).collect();
                report_hand(&id, &times, Some(n));
            } else {
                g.throughput(Throughput::Elements(n as u64));
                g.bench_function(BenchmarkId::new(label, n), |b| {
                    b.iter_custom(|iters| (0..iters).map(|_| round_once(rt, &rig)).sum())
                });
            }
        }
    }
    g.finish();
}

/// The same rounds over a loopback socket to the real `Server` (plain
/// HTTP), 32 connections at once: what HTTP adds to the collector's work.
fn bench_collector_http(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let n = if full() { 10_000 } else { 64 };
    if !selected(&format!("simulated_pool/collector_round_http/unclaimed/{n}")) {
        return;
    }
    let hs = hosts(n);
    let rig = collector_rig(&hs, n, Slot::Unclaimed, SLOTS_PER_HOST);
    let listener =
        rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("a loopback listener");
    let addr = listener.local_addr().expect("an address").to_string();
    let server = andes_protocol::Server::plain(listener).expect("a loopback server");
    rt.spawn(server.serve(rig.router.clone(), std::future::pending()));
    let nobody = Arc::new(Keypair::from_seed("sender", [3; 32]).expect("a key"));
    let clients: Vec<andes_protocol::Client> = (0..32)
        .map(|_| andes_protocol::Client::new(&format!("http://{addr}"), nobody.clone()))
        .collect::<Result<_, _>>()
        .expect("clients");
    let clients = Arc::new(clients);
    let send_round = |rig: &CollectorRig| -> Duration {
        rig.clock.advance(ROUND_GAP);
        let now = rig.clock.now();
        let dest = Destination::Addr(addr.clone());
        let reqs: Vec<http::Request<http_body_util::Full<Bytes>>> = rig
            .rounds
            .iter()
            .map(|(key, body)| {
                let signed = SignedHeaders::sign(key, &dest, "POST", UPDATES_PATH, body, now);
                let mut req = http::Request::builder()
                    .method("POST")
                    .uri(UPDATES_PATH)
                    .header(http::header::HOST, addr.as_str())
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(http_body_util::Full::new(body.clone()))
                    .expect("a request");
                signed.apply(req.headers_mut());
                req
            })
            .collect();
        let clients = clients.clone();
        rt.block_on(async move {
            let start = Instant::now();
            let mut lanes: Vec<Vec<_>> = (0..clients.len()).map(|_| Vec::new()).collect();
            for (i, r) in reqs.into_iter().enumerate() {
                lanes[i % clients.len()].push(r);
            }
            let mut set = tokio::task::JoinSet::new();
            for (i, lane) in lanes.into_iter().enumerate() {
                let clients = clients.clone();
                set.spawn(async move {
                    for r in lane {
                        let resp = clients[i].send(r).await.expect("the collector answers");
                        assert!(resp.status.is_success(), "refused: {:?}", resp.error_reason());
                    }
                });
            }
            while let Some(r) = set.join_next().await {
                r.expect("a lane");
            }
            start.elapsed()
        })
    };
    send_round(&rig);
    let mut g = group(c, "simulated_pool/collector_round_http");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function(BenchmarkId::new("unclaimed", n), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| send_round(&rig)).sum())
    });
    g.finish();
}

// ---------------------------------------------------------------------------
// The negotiator's side: cycles of `Central`.

/// A simulated schedd: its demand, and what it does with matches.
struct Schedd {
    demand: Bytes,
    /// Whether it takes the matches (and so the hosts hear of them).
    take: bool,
    /// The size of the last grants it was sent, bytes, and how many.
    last_grants: Arc<(AtomicUsize, AtomicUsize)>,
    /// The last grants' body.
    kept: Arc<Mutex<Option<Bytes>>>,
}

async fn start_schedd(s: Schedd) -> String {
    use axum::routing::post;
    let demand = s.demand.clone();
    let last = s.last_grants.clone();
    let kept = s.kept.clone();
    let take = s.take;
    let app = axum::Router::new()
        .route(
            "/v1/negotiate/demand",
            post(move || {
                let d = demand.clone();
                async move { ([(http::header::CONTENT_TYPE, "application/json")], d) }
            }),
        )
        .route(
            "/v1/negotiate/matches",
            post(move |body: Bytes| {
                let (last, kept) = (last.clone(), kept.clone());
                async move {
                    last.0.store(body.len(), Ordering::Relaxed);
                    *kept.lock().expect("the body") = Some(body.clone());
                    let reply = if take {
                        let req: MatchesRequest =
                            serde_json::from_slice(&body).expect("grants parse");
                        let claimed: Vec<String> =
                            req.matches.into_iter().map(|m| m.claim_id).collect();
                        last.1.store(claimed.len(), Ordering::Relaxed);
                        MatchesReply { taken: claimed.len() as u32, claimed }
                    } else {
                        MatchesReply::default()
                    };
                    axum::Json(reply)
                }
            }),
        )
        .layer(axum::extract::DefaultBodyLimit::max(SCHEDD_BODY_LIMIT));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a listener");
    let addr = listener.local_addr().expect("an address").to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the schedd serves") });
    addr
}

/// What a cycle bench runs against.
struct CycleRig {
    central: Central,
    /// The schedds' requests, as the cycle reads them from their demand.
    requests: Vec<Request>,
    collector: Arc<Mutex<Collector>>,
    clock: Arc<ManualClock>,
    grants: Vec<Arc<(AtomicUsize, AtomicUsize)>>,
    /// The last grants each schedd was sent.
    kept: Vec<Arc<Mutex<Option<Bytes>>>>,
    _state: tempfile::TempDir,
}

/// A central manager whose collector holds `n` slot ads in `state` and the
/// three schedds' ads, `idle` jobs in all waiting at the schedds (spread
/// over their 300 autoclusters).
fn cycle_rig(
    rt: &tokio::runtime::Runtime,
    hosts: &[Host],
    n: usize,
    state: Slot,
    idle: usize,
    take: bool,
) -> CycleRig {
    let clock = Arc::new(ManualClock::new(T0));
    // Ads never expire here: the notice bench moves the clock on.
    let mut c = Collector::new(1 << 40);
    for (i, h) in hosts.iter().enumerate() {
        for s in 1..=SLOTS_PER_HOST.min(n - i * SLOTS_PER_HOST) {
            let (ad, private) = slot_ad(h, s, state);
            let ad = classad::parse_ad(&ad).expect("parses");
            let private = classad::parse_ad(&private).expect("parses");
            c.update(AdType::Machine, ad, Some(private), &h.name, T0).expect("kept");
        }
    }
    let groups = SCHEDDS * AUTOCLUSTERS_PER_SCHEDD;
    let per_group = idle.div_ceil(groups);
    let mut grants = Vec::new();
    let mut kept = Vec::new();
    let mut requests = Vec::new();
    for s in 0..SCHEDDS {
        let demand = DemandReply {
            schedd: schedd_name(s),
            groups: (0..AUTOCLUSTERS_PER_SCHEDD)
                .map(|ac| DemandGroup {
                    autocluster: ac as u32 + 1,
                    submitter: submitter(s * SUBMITTERS_PER_SCHEDD + ac % SUBMITTERS_PER_SCHEDD),
                    ad: job_ad(s, ac).0,
                    idle: per_group as u32,
                })
                .filter(|g| g.idle > 0)
                .collect(),
            running: Vec::new(),
        };
        requests.extend(demand.groups.iter().map(|g| Request {
            schedd: schedd_name(s),
            submitter: g.submitter.clone(),
            autocluster: g.autocluster,
            ad: classad::parse_ad(&g.ad).expect("parses"),
            idle: g.idle,
        }));
        let last = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        grants.push(last.clone());
        let body = Arc::new(Mutex::new(None));
        kept.push(body.clone());
        let schedd = Schedd {
            demand: Bytes::from(serde_json::to_vec(&demand).expect("serialises")),
            take,
            last_grants: last,
            kept: body,
        };
        let addr = rt.block_on(start_schedd(schedd));
        let ad = classad::parse_ad(&format!(
            r#"[Name = "{}"; MyAddress = "{addr}"; TotalIdleJobs = {}; TotalRunningJobs = 0]"#,
            schedd_name(s),
            per_group * AUTOCLUSTERS_PER_SCHEDD
        ))
        .expect("parses");
        c.update(AdType::Schedd, ad, None, &schedd_name(s), T0).expect("kept");
    }
    let collector = Arc::new(Mutex::new(c));
    let state_dir = tempfile::tempdir().expect("a temporary directory");
    let key = Arc::new(Keypair::from_seed("negotiator", [9; 32]).expect("a key"));
    let cfg = CentralConfig {
        interval: Duration::from_secs(60),
        negotiator: Default::default(),
        accountant: Default::default(),
        state_file: Some(state_dir.path().join("accountant.json")),
    };
    let central = Central::new(
        collector.clone(),
        Arc::new(tokio::sync::Notify::new()),
        clock.clone(),
        key,
        cfg,
    );
    CycleRig { central, requests, collector, clock, grants, kept, _state: state_dir }
}

/// The planner's counters for the cycle `rig` runs: its slots and requests
/// planned alone, as the cycle plans them.
fn plan_stats(rig: &CycleRig) -> PlanStats {
    let slots = rig
        .collector
        .lock()
        .expect("the store")
        .shared_ads(AdType::Machine, rig.clock.now())
        .into_iter()
        .filter_map(|(ad, private)| {
            let claim_id = private?.eval_attr("ClaimId").as_str()?.to_string();
            Some(SlotAd { ad, claim_id })
        })
        .collect();
    let snap = Snapshot { slots, requests: rig.requests.clone() };
    let accountant = Accountant::new(AccountantConfig::default());
    plan(&snap, &accountant, &NegotiatorConfig::default(), rig.clock.now()).stats
}

/// How long a cycle holds the collector's lock to take the slot ads out:
/// shared references to them with their private parts when some schedd has
/// idle jobs, else the shared references alone (what `Central::cycle` does
/// under it).
fn lock_hold(rig: &CycleRig, idle: bool) -> Duration {
    let c = rig.collector.lock().expect("the store");
    let now = rig.clock.now();
    let t = Instant::now();
    if idle {
        let ads = c.shared_ads(AdType::Machine, now);
        let took = t.elapsed();
        drop(c);
        drop(ads);
        took
    } else {
        let ads = c.snapshot(Some(AdType::Machine), now);
        let took = t.elapsed();
        drop(c);
        drop(ads);
        took
    }
}

fn report_hand(id: &str, times: &[Duration], elements: Option<usize>) {
    let mut t = times.to_vec();
    t.sort();
    let med = t[t.len() / 2];
    let rate = elements
        .map(|n| format!("; {:.0} slot ads/s at the median", n as f64 / med.as_secs_f64()))
        .unwrap_or_default();
    eprintln!(
        "{id}: {} runs by hand: min {:?}, median {med:?}, max {:?}{rate}",
        t.len(),
        t[0],
        t[t.len() - 1]
    );
}

/// What a schedd must do with its grants before it can claim anything:
/// read the JSON, and parse each match's slot ad.
fn schedd_decode(body: &[u8]) -> String {
    let t = Instant::now();
    let req: MatchesRequest = serde_json::from_slice(body).expect("grants parse");
    let json = t.elapsed();
    let ads: Vec<ClassAd> =
        req.matches.iter().map(|m| classad::parse_ad(&m.slot_ad).expect("parses")).collect();
    let all = t.elapsed();
    let n = ads.len().max(1) as f64;
    format!(
        "one schedd's {} grants ({:.1} MiB) decoded in {json:?}, their slot ads parsed by \
         {all:?}: {:.1} µs per match before any claim",
        ads.len(),
        mib(body.len() as u64),
        all.as_secs_f64() * 1e6 / n
    )
}

/// The scenarios of the negotiation cycle.
#[derive(Clone, Copy)]
enum Scenario {
    /// Every slot Unclaimed; twice as many idle jobs as slots in 300
    /// autoclusters: every slot matched and granted.
    Filling,
    /// Every slot Claimed; the same idle jobs: nothing to match, the whole
    /// cycle run (a full pool with a queue).
    FullWithQueue,
    /// Every slot Claimed, no idle job anywhere.
    FullNoQueue,
}

impl Scenario {
    const ALL: [Scenario; 3] = [Scenario::Filling, Scenario::FullWithQueue, Scenario::FullNoQueue];
    fn label(self) -> &'static str {
        match self {
            Scenario::Filling => "unclaimed_idle",
            Scenario::FullWithQueue => "claimed_idle",
            Scenario::FullNoQueue => "claimed_no_idle",
        }
    }
    fn slots(self) -> Slot {
        match self {
            Scenario::Filling => Slot::Unclaimed,
            _ => Slot::Claimed,
        }
    }
    fn idle(self, n: usize) -> usize {
        match self {
            Scenario::FullNoQueue => 0,
            _ => 2 * n,
        }
    }
}

fn bench_cycles(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let (sizes, hand) = sizes();
    let mut g = group(c, "simulated_pool/cycle");
    for &n in sizes.iter().chain(hand.iter()) {
        let by_hand = Some(n) == hand;
        let hs = hosts(n);
        for sc in Scenario::ALL {
            let id = format!("simulated_pool/cycle/{}/{n}", sc.label());
            if !selected(&id) {
                continue;
            }
            let rig = cycle_rig(rt, &hs, n, sc.slots(), sc.idle(n), false);
            // One cycle first: its figures, and the peak of memory it takes.
            let peak = reset_peak();
            let before = rss_bytes();
            let t = Instant::now();
            let stats = rt.block_on(rig.central.cycle());
            let first = t.elapsed();
            let grant_bytes: usize = rig.grants.iter().map(|g| g.0.load(Ordering::Relaxed)).sum();
            let peak_text = match (peak, before, peak_bytes()) {
                (true, Some(b), Some(p)) => {
                    format!("; peak RSS {:.0} MiB above the pool's", mib(p.saturating_sub(b)))
                }
                _ => String::new(),
            };
            let per_match = match grant_bytes.checked_div(stats.matches) {
                Some(each) => format!(
                    "; grants {:.1} MiB ({each} B per match, the largest schedd's {:.0}% of its \
                     body limit)",
                    mib(grant_bytes as u64),
                    100.0
                        * rig.grants.iter().map(|g| g.0.load(Ordering::Relaxed)).max().unwrap_or(0)
                            as f64
                        / SCHEDD_BODY_LIMIT as f64
                ),
                None => String::new(),
            };
            let ps = plan_stats(&rig);
            eprintln!(
                "{id}: {} slots, {} requests, {} matches; {} candidate slots in {} groups, {} pairs \
                 evaluated, {} steps to pick; first cycle {first:?} (plan {:?}); the collector's \
                 lock held {:?} to take the slot ads{peak_text}{per_match}",
                stats.slots,
                stats.groups,
                stats.matches,
                ps.candidate_slots,
                ps.slot_groups,
                ps.pair_evaluations,
                ps.picks,
                stats.plan_time,
                lock_hold(&rig, sc.idle(n) > 0),
            );
            if let Scenario::Filling = sc {
                assert_eq!(stats.matches, n, "every slot matched");
                if let Some(body) = rig.kept[0].lock().expect("the body").take() {
                    eprintln!("{id}: {}", schedd_decode(&body));
                }
            }
            let run = || {
                let t = Instant::now();
                rt.block_on(rig.central.cycle());
                t.elapsed()
            };
            if by_hand {
                let times: Vec<Duration> = (0..HAND_RUNS).map(|_| run()).collect();
                report_hand(&id, &times, None);
            } else {
                g.throughput(Throughput::Elements(n as u64));
                g.bench_function(BenchmarkId::new(sc.label(), n), |b| {
                    b.iter_custom(|iters| (0..iters).map(|_| run()).sum())
                });
            }
        }
    }
    g.finish();
}

/// Hosts that count the match notices they hear and the connections they
/// come on: `hosts` listeners on loopback.
struct NoticeSink {
    notices: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
    arrived: Arc<tokio::sync::Notify>,
}

async fn start_hosts(hosts: &mut [Host]) -> NoticeSink {
    use axum::routing::post;
    use axum::serve::ListenerExt;
    let sink = NoticeSink {
        notices: Arc::new(AtomicUsize::new(0)),
        connections: Arc::new(AtomicUsize::new(0)),
        arrived: Arc::new(tokio::sync::Notify::new()),
    };
    for h in hosts {
        let (n, arrived) = (sink.notices.clone(), sink.arrived.clone());
        let app = axum::Router::new().route(
            "/v1/host/match",
            post(move |_body: Bytes| {
                let (n, arrived) = (n.clone(), arrived.clone());
                async move {
                    n.fetch_add(1, Ordering::Relaxed);
                    arrived.notify_one();
                    http::StatusCode::NO_CONTENT
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a listener");
        h.address = listener.local_addr().expect("an address").to_string();
        let conns = sink.connections.clone();
        let listener = listener.tap_io(move |_| {
            conns.fetch_add(1, Ordering::Relaxed);
        });
        tokio::spawn(async move { axum::serve(listener, app).await.expect("the host serves") });
    }
    sink
}

/// A cycle whose matches the schedds take, until every host heard of its
/// matches: what a match costs the central manager in all. At 1,000 slots
/// only: every notice opens a connection of its own, and at 10,000 the
/// hosts' and the central manager's ends of them would pass this process's
/// limit of open files.
fn bench_notices(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let n = if full() { 1_000 } else { 64 };
    if !selected(&format!("simulated_pool/notices/taken/{n}")) {
        return;
    }
    let mut hs = hosts(n);
    let sink = rt.block_on(start_hosts(&mut hs));
    let rig = cycle_rig(rt, &hs, n, Slot::Unclaimed, 2 * n, true);
    let run = || {
        // Offers handed out in the last cycle are offered again.
        rig.clock.advance(OFFER_GRACE);
        let start = sink.notices.load(Ordering::Relaxed);
        let t = Instant::now();
        rt.block_on(async {
            let stats = rig.central.cycle().await;
            assert_eq!(stats.taken as usize, n, "every match taken");
            while sink.notices.load(Ordering::Relaxed) < start + n {
                sink.arrived.notified().await;
            }
        });
        t.elapsed()
    };
    let conns = sink.connections.load(Ordering::Relaxed);
    let took = run();
    eprintln!(
        "simulated_pool/notices/{n}: one cycle with {n} matches taken and every notice heard: \
         {took:?}; {} connections opened to {} hosts for {n} notices",
        sink.connections.load(Ordering::Relaxed) - conns,
        hs.len(),
    );
    let mut g = group(c, "simulated_pool/notices");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function(BenchmarkId::new("taken", n), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| run()).sum())
    });
    g.finish();
}

/// The environment variable that makes this bench a child measuring the
/// store's memory (`unclaimed:100000`).
const MEMORY_CHILD: &str = "SIMULATED_POOL_MEMORY";

/// Fills a collector with `n` slot ads as the child of [`bench_memory`]
/// and prints the RSS it added per slot ad, then exits.
fn memory_child(spec: &str) -> ! {
    let (label, n) = spec.split_once(':').expect("LABEL:SLOTS");
    let n: usize = n.parse().expect("a number of slots");
    let state = if label == "claimed" { Slot::Claimed } else { Slot::Unclaimed };
    let hs = hosts(n);
    let before = rss_bytes().unwrap_or(0);
    let mut c = Collector::default();
    let mut text = 0;
    for (i, h) in hs.iter().enumerate() {
        for s in 1..=SLOTS_PER_HOST.min(n - i * SLOTS_PER_HOST) {
            let (ad, private) = slot_ad(h, s, state);
            text += ad.len() + private.len();
            let ad = classad::parse_ad(&ad).expect("parses");
            let private = classad::parse_ad(&private).expect("parses");
            c.update(AdType::Machine, ad, Some(private), &h.name, T0).expect("kept");
        }
    }
    let after = rss_bytes().unwrap_or(0);
    println!(
        "{:.0} B of RSS per slot ad held ({} B of text)",
        after.saturating_sub(before) as f64 / n as f64,
        text / n
    );
    drop(c);
    std::process::exit(0)
}

/// What the collector's store holds per slot ad: each size and state
/// measured in a fresh process (this bench run again), so that no memory
/// freed before is reused.
fn bench_memory() {
    let (sizes, hand) = sizes();
    for n in sizes.into_iter().chain(hand) {
        for label in ["unclaimed", "claimed"] {
            let id = format!("simulated_pool/memory/{label}/{n}");
            if !selected(&id) {
                continue;
            }
            let exe = std::env::current_exe().expect("this bench");
            let out = std::process::Command::new(exe)
                .env(MEMORY_CHILD, format!("{label}:{n}"))
                .output()
                .expect("the bench runs");
            eprintln!("{id}: {}", String::from_utf8_lossy(&out.stdout).trim());
        }
    }
}

fn bench(c: &mut Criterion) {
    if let Ok(spec) = std::env::var(MEMORY_CHILD) {
        memory_child(&spec);
    }
    bench_memory();
    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let cfg = VerifierConfig::default();
    eprintln!(
        "simulated_pool: the replay cache holds {} nonces for {} s: at most {} signed requests/s \
         to the central manager, sustained",
        cfg.nonce_cap,
        cfg.max_skew,
        cfg.nonce_cap as u64 / cfg.max_skew
    );
    bench_collector(c, &rt);
    bench_collector_http(c, &rt);
    bench_cycles(c, &rt);
    bench_notices(c, &rt);
}

criterion_group!(benches, bench);
criterion_main!(benches);
