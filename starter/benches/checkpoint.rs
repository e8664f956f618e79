//! Transparent checkpoints through the execute host's starter
//! (`cargo bench -p andes-starter --bench checkpoint`), for modules compiled by
//! `andes compile`:
//!
//! * `overhead`: what instrumentation costs a job that is never
//!   checkpointed, under the full starter (fuel, epoch, limits, its real
//!   sandbox): `primes` (compute) and `digest` (file processing: reads one
//!   file and writes another as it goes), plain against compiled, in
//!   interleaved rounds; medians of the per-round ratios of the job's CPU
//!   time.
//! * `latency`: a running job is asked for a checkpoint at random moments;
//!   the time from `request_checkpoint` until the signed snapshot is in the
//!   host's hands (waiting for the next yield point, unwinding, capturing
//!   memories, globals, descriptors and the sandbox's files, signing), and
//!   its size. `digest` also while it keeps 256 MiB of data in memory.
//! * `restore`: a fresh starter resumes each job from its snapshot, in a
//!   fresh sandbox; the time from `Host::run` until the job runs again (every
//!   check of the snapshot, its files written back, memories and globals
//!   restored, descriptors reopened, the rewind).
//!
//! * `incremental`: the Lua table job (`bench/realprograms/lua/table.lua`
//!   under the suite's Lua, built by `bench/realprograms/build.sh`): a table
//!   of 64 MiB, 1 GiB or 3.5 GiB (`ANDES_BENCH_TABLE_MIB`, default
//!   `64,1024,3584`; rows of one 64 KiB page, so the memory is the table and
//!   little more, up to the 4 GiB a wasm32 memory can have), of
//!   which 1 %, 10 % or 100 % of the pages change between checkpoints
//!   (`ANDES_BENCH_TABLE_PCT`, default `1,10,100`), one entry of each
//!   (`ANDES_BENCH_TABLE_SPREAD`, default 1; 32 change every 4 KiB page of
//!   each: what change tracked by the 4 KiB page cannot save). For
//!   the first snapshot and the next ones: the time from the request to the
//!   signed snapshot in the host's hands (less the wait for its next yield
//!   point), how long the job stood still for it (`Checkpoint::paused`: the
//!   memory is read and written off the job's thread) and the bytes written
//!   (the new memory pack and the file); then the restore of the last one.
//!
//! Build the samples first (`cargo xtask samples`). Knobs:
//! `ANDES_BENCH_ROUNDS` (overhead, default 7), `ANDES_BENCH_TRIALS`
//! (latency and restore, default 30). `-- --test` runs each section once,
//! small. Figures: BENCHMARKS.md, "Transparent checkpoints".

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use andes_snapshot::BlobStore;
use andes_starter::{
    Checkpoint, Clock, Control, Ending, Host, HostConfig, JobSpec, Limits, SystemClock, Transparent,
};
use ed25519_dalek::{Signer, SigningKey};

#[path = "../tests/starter/common.rs"]
mod common;
use common::sample;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn compiled(module: &[u8]) -> Vec<u8> {
    andes_compile::instrument(module, &andes_compile::Options::default()).expect("instrument")
}

fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn digest_input(lines: usize) -> Vec<u8> {
    (0..lines)
        .map(|i| format!("line {i} of the input, {}\n", "x".repeat(i % 37)))
        .collect::<String>()
        .into_bytes()
}

/// A job: its module, ad and input files.
struct Job {
    name: String,
    module: Arc<[u8]>,
    ad: String,
    inputs: Vec<(String, Vec<u8>)>,
}

/// Each snapshot a run took, with when it arrived.
type Taken = Arc<Mutex<Vec<(Instant, Result<Checkpoint, String>)>>>;

/// Where a run's snapshots go, signed with one key.
struct Snaps {
    blobs: BlobStore,
    key: SigningKey,
    taken: Taken,
}

impl Snaps {
    fn new(dir: &Path) -> Snaps {
        Snaps {
            blobs: BlobStore::open(&dir.join("blobs"), false).unwrap(),
            key: SigningKey::from_bytes(&[9; 32]),
            taken: Default::default(),
        }
    }

    fn transparent(&self, restore: Option<Arc<[u8]>>) -> Arc<Transparent> {
        let (signer, taken) = (self.key.clone(), self.taken.clone());
        let public = self.key.verifying_key().to_bytes();
        Arc::new(Transparent {
            job: "bench#1.0".into(),
            public,
            sign: Arc::new(move |m| signer.sign(m).to_bytes()),
            blobs: self.blobs.clone(),
            sink: Arc::new(move |c| taken.lock().unwrap().push((Instant::now(), c))),
            restore,
            trusted: Arc::new(move |k| *k == public),
        })
    }
}

struct Rig {
    host: Arc<Host>,
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    next: std::sync::atomic::AtomicU32,
}

impl Rig {
    fn new() -> Rig {
        Rig {
            host: Arc::new(
                Host::new(HostConfig { max_instances: 8, ..Default::default() }).unwrap(),
            ),
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap(),
            dir: tempfile::tempdir().unwrap(),
            next: Default::default(),
        }
    }

    /// A fresh sandbox, with the job's inputs unless it resumes.
    fn sandbox(&self, job: &Job, inputs: bool) -> PathBuf {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = self.dir.path().join(format!("s{n}"));
        std::fs::create_dir_all(&p).unwrap();
        if inputs {
            for (name, bytes) in &job.inputs {
                std::fs::write(p.join(name), bytes).unwrap();
            }
        }
        p
    }

    fn spec(&self, job: &Job, sandbox: &Path, t: Option<Arc<Transparent>>) -> JobSpec {
        let ad = classad::parse_ad(&job.ad).unwrap();
        JobSpec {
            module: job.module.clone(),
            limits: Limits::from_ad(&ad),
            ad,
            sandbox: sandbox.to_path_buf(),
            inherit_stdio: false,
            digest: Some(andes_starter::engine::module_digest(&job.module)),
            saved_state: None,
            transparent: t,
            metered: false,
            sandbox_empty: false,
        }
    }

    /// Runs `job` to its end; its CPU time in seconds.
    fn run(&self, job: &Job) -> f64 {
        let sandbox = self.sandbox(job, true);
        let spec = self.spec(job, &sandbox, None);
        let r = self.rt.block_on(self.host.run(spec, Control::new(), Arc::new(SystemClock)));
        assert_eq!(r.ending, Ending::Exited(0), "{}: {r:?}", job.name);
        let _ = std::fs::remove_dir_all(&sandbox);
        r.usage.remote_user_cpu + r.usage.remote_sys_cpu
    }
}

fn percentile(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[((xs.len() - 1) as f64 * p).round() as usize]
}

fn overhead(rig: &Rig, quick: bool) {
    let rounds = if quick { 1 } else { env_usize("ANDES_BENCH_ROUNDS", 7) };
    let primes = sample("primes");
    let digest = sample("digest");
    let (n, lines, r) = if quick { ("300000", 200, "200") } else { ("300000000", 4000, "20000") };
    let pairs = [
        (
            Job {
                name: "primes".into(),
                module: primes.clone(),
                ad: format!(r#"[ Arguments = "{n}"; Out = "out.txt" ]"#),
                inputs: vec![],
            },
            compiled(&primes),
        ),
        (
            Job {
                name: "digest".into(),
                module: digest.clone(),
                ad: format!(r#"[ Arguments = "input.txt digests.txt {r}"; Out = "out.txt" ]"#),
                inputs: vec![("input.txt".into(), digest_input(lines))],
            },
            compiled(&digest),
        ),
    ];
    println!("overhead ({rounds} rounds, load {}):", uptime());
    for (p, instrumented) in pairs {
        let c = Job {
            name: p.name.clone(),
            module: instrumented.clone().into(),
            ad: p.ad.clone(),
            inputs: p.inputs.clone(),
        };
        // Warm the module caches.
        rig.run(&p);
        rig.run(&c);
        let mut ratios = Vec::new();
        let (mut tp, mut tc) = (Vec::new(), Vec::new());
        for i in 0..rounds {
            // Alternate the order so drifting load falls on both alike.
            let (a, b) = if i % 2 == 0 {
                let a = rig.run(&p);
                (a, rig.run(&c))
            } else {
                let b = rig.run(&c);
                (rig.run(&p), b)
            };
            ratios.push(b / a);
            tp.push(a);
            tc.push(b);
        }
        println!(
            "  {:>7}: plain {:.3} s, compiled {:.3} s (medians), ratio {:.3}x median, {:.3}x min; \
             module {} -> {} bytes",
            c.name,
            percentile(&mut tp, 0.5),
            percentile(&mut tc, 0.5),
            percentile(&mut ratios.clone(), 0.5),
            percentile(&mut ratios, 0.0),
            p.module.len(),
            instrumented.len()
        );
    }
}

/// The compiled jobs that `latency` and `restore` checkpoint.
fn checkpointed_jobs(quick: bool) -> Vec<Job> {
    let digest = compiled(&sample("digest"));
    let lines = if quick { 2000 } else { 400_000 };
    let mut jobs = vec![
        Job {
            name: "primes".into(),
            module: compiled(&sample("primes")).into(),
            ad: r#"[ Arguments = "1000000000000"; Out = "out.txt" ]"#.into(),
            inputs: vec![],
        },
        Job {
            name: "digest".into(),
            module: digest.clone().into(),
            ad: r#"[ Arguments = "input.txt digests.txt 20000"; Out = "out.txt" ]"#.into(),
            inputs: vec![("input.txt".into(), digest_input(lines))],
        },
    ];
    if !quick {
        jobs.push(Job {
            name: "digest, 256 MiB kept".into(),
            module: digest.into(),
            ad: r#"[ Arguments = "input.txt digests.txt 20000 256"; Out = "out.txt"; RequestMemory = 512 ]"#
                .into(),
            inputs: vec![("input.txt".into(), digest_input(lines))],
        });
    }
    jobs
}

/// Asks a running job for a checkpoint and waits for it, looking every
/// `poll`, for `limit` at most; the time (ms) from the request until the
/// snapshot was in hand.
fn checkpoint_now(
    ctl: &Control,
    snaps: &Snaps,
    name: &str,
    (poll, limit): (Duration, Duration),
) -> f64 {
    let before = snaps.taken.lock().unwrap().len();
    let t0 = Instant::now();
    ctl.request_checkpoint();
    loop {
        if let Some((at, _)) = snaps.taken.lock().unwrap().get(before) {
            return at.duration_since(t0).as_secs_f64() * 1e3;
        }
        assert!(t0.elapsed() < limit, "{name}: no checkpoint");
        std::thread::sleep(poll);
    }
}

/// Asks a running job for `trials` checkpoints at random moments; returns
/// each one's latency (ms) and the last snapshot.
fn latency(rig: &Rig, job: &Job, trials: usize, snaps: &Snaps) -> (Vec<f64>, Vec<u8>) {
    let sandbox = rig.sandbox(job, true);
    let ctl = Control::new();
    let spec = rig.spec(job, &sandbox, Some(snaps.transparent(None)));
    let task = {
        let (host, ctl) = (rig.host.clone(), ctl.clone());
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        rig.rt.spawn(async move { host.run(spec, ctl, clock).await })
    };
    while !ctl.is_running() {
        std::thread::sleep(Duration::from_millis(1));
    }
    // A job that keeps memory fills it first (digest: 128 KiB a line).
    if job.name.contains("MiB") {
        std::thread::sleep(Duration::from_secs(3));
    }
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut out = Vec::new();
    for _ in 0..trials {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::thread::sleep(Duration::from_millis(20 + x % 80));
        let wait = (Duration::from_micros(50), Duration::from_secs(60));
        out.push(checkpoint_now(&ctl, snaps, &job.name, wait));
    }
    ctl.hard_kill();
    let _ = rig.rt.block_on(task);
    let last = match snaps.taken.lock().unwrap().last() {
        Some((_, Ok(c))) => c.bytes.clone(),
        Some((_, Err(e))) => panic!("{}: checkpoint failed: {e}", job.name),
        None => panic!("{}: no checkpoint", job.name),
    };
    (out, last)
}

/// Resumes `job` from `snapshot` in a fresh sandbox `trials` times; the time
/// (ms) from `Host::run` until it runs again.
fn restore(rig: &Rig, job: &Job, snapshot: &[u8], trials: usize, snaps: &Snaps) -> Vec<f64> {
    let bytes: Arc<[u8]> = snapshot.into();
    let mut out = Vec::new();
    for _ in 0..trials {
        let sandbox = rig.sandbox(job, false);
        let ctl = Control::new();
        let spec = rig.spec(job, &sandbox, Some(snaps.transparent(Some(bytes.clone()))));
        // The job's thread notes the moment it enters the guest; this
        // thread waits for it asleep, leaving every core to the restore
        // (a spinning wait took one of this machine's two).
        let (entered, at) = std::sync::mpsc::channel();
        ctl.on_entered(move || {
            let _ = entered.send(Instant::now());
        });
        let t0 = Instant::now();
        let task = {
            let (host, ctl) = (rig.host.clone(), ctl.clone());
            let clock: Arc<dyn Clock> = Arc::new(SystemClock);
            rig.rt.spawn(async move { host.run(spec, ctl, clock).await })
        };
        let running = loop {
            match at.recv_timeout(Duration::from_millis(50)) {
                Ok(t) => break t,
                Err(_) => assert!(!task.is_finished(), "{}: the restore failed", job.name),
            }
        };
        out.push(running.duration_since(t0).as_secs_f64() * 1e3);
        ctl.hard_kill();
        let _ = rig.rt.block_on(task);
        let _ = std::fs::remove_dir_all(&sandbox);
    }
    out
}

fn checkpoints(rig: &Rig, quick: bool) {
    let trials = if quick { 2 } else { env_usize("ANDES_BENCH_TRIALS", 30) };
    println!("latency and restore ({trials} trials each, load {}):", uptime());
    for job in checkpointed_jobs(quick) {
        let dir = tempfile::tempdir().unwrap();
        let snaps = Snaps::new(dir.path());
        let (mut lat, snapshot) = latency(rig, &job, trials, &snaps);
        let mut res = restore(rig, &job, &snapshot, trials.min(10), &snaps);
        let memory: u64 = andes_snapshot::inspect(&snapshot)
            .map(|i| i.header.memories.iter().map(|m| m.bytes).sum())
            .unwrap_or(0);
        println!(
            "  {:>22}: checkpoint median {:.2} ms, p90 {:.2}, p99 {:.2}, max {:.2}; \
             snapshot {} bytes of {:.1} MiB memory; restore median {:.2} ms, max {:.2} \
             (load {})",
            job.name,
            percentile(&mut lat, 0.5),
            percentile(&mut lat, 0.9),
            percentile(&mut lat, 0.99),
            percentile(&mut lat, 1.0),
            snapshot.len(),
            memory as f64 / (1 << 20) as f64,
            percentile(&mut res, 0.5),
            percentile(&mut res, 1.0),
            uptime()
        );
    }
}

/// The Lua table job filling `mib` MiB, changing `pct` % of its 64 KiB
/// pages, `spread` entries of each (32: every 4 KiB page of it).
fn table_job(lua: &Path, mib: u64, pct: u32, spread: u32) -> Job {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/realprograms/lua/table.lua");
    Job {
        name: if spread == 1 {
            format!("table {mib} MiB, {pct}%")
        } else {
            format!("table {mib} MiB, {pct}% x{spread}")
        },
        module: compiled(&std::fs::read(lua).unwrap()).into(),
        ad: format!(
            r#"[ Cmd = "lua.wasm"; Arguments = "table.lua {mib} {pct} {spread}"; Out = "out.txt"; RequestMemory = {} ]"#,
            (mib * 9 / 8 + 64).min(4096)
        ),
        inputs: vec![("table.lua".into(), std::fs::read(script).unwrap())],
    }
}

/// Bytes of the packs `cur` names that `prev` does not.
fn added(prev: Option<&Checkpoint>, cur: &Checkpoint) -> u64 {
    let had = |p: &andes_snapshot::PackEntry| prev.is_some_and(|c| c.header.packs.contains(p));
    cur.header.packs.iter().filter(|p| !had(p)).map(|p| p.size).sum()
}

fn incremental(rig: &Rig, quick: bool) {
    let lua = std::env::var("ANDES_BENCH_LUA").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/realprograms/wasm/lua.wasm"))
    });
    if !lua.exists() {
        println!(
            "incremental: NOT RUN: {} is missing (bench/realprograms/build.sh)",
            lua.display()
        );
        return;
    }
    let sizes: Vec<u64> = std::env::var("ANDES_BENCH_TABLE_MIB")
        .unwrap_or_else(|_| if quick { "16".into() } else { "64,1024,3584".into() })
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let pcts: Vec<u32> = std::env::var("ANDES_BENCH_TABLE_PCT")
        .unwrap_or_else(|_| "1,10,100".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let spread = env_usize("ANDES_BENCH_TABLE_SPREAD", 1) as u32;
    let next = if quick { 2 } else { env_usize("ANDES_BENCH_TRIALS", 10) };
    println!("incremental (load {}):", uptime());
    for mib in sizes {
        for &pct in &pcts {
            let job = table_job(&lua, mib, pct, spread);
            let dir = tempfile::tempdir().unwrap();
            let snaps = Snaps::new(dir.path());
            let sandbox = rig.sandbox(&job, true);
            let ctl = Control::new();
            let spec = rig.spec(&job, &sandbox, Some(snaps.transparent(None)));
            let task = {
                let (host, ctl) = (rig.host.clone(), ctl.clone());
                let clock: Arc<dyn Clock> = Arc::new(SystemClock);
                rig.rt.spawn(async move { host.run(spec, ctl, clock).await })
            };
            let t0 = Instant::now();
            while !std::fs::read_to_string(sandbox.join("out.txt"))
                .is_ok_and(|o| o.contains("built"))
            {
                if task.is_finished() {
                    let r = rig.rt.block_on(task);
                    panic!("{}: ended before building its table: {r:?}", job.name);
                }
                assert!(t0.elapsed() < Duration::from_secs(1800), "{}: not built", job.name);
                std::thread::sleep(Duration::from_millis(20));
            }
            let built = t0.elapsed().as_secs_f64();
            let mut times = Vec::new();
            for _ in 0..=next {
                std::thread::sleep(Duration::from_millis(200));
                let wait = (Duration::from_micros(200), Duration::from_secs(600));
                times.push(checkpoint_now(&ctl, &snaps, &job.name, wait));
            }
            ctl.hard_kill();
            let _ = rig.rt.block_on(task);
            let taken: Vec<Checkpoint> = snaps
                .taken
                .lock()
                .unwrap()
                .iter()
                .map(|(_, c)| c.clone().unwrap_or_else(|e| panic!("{}: {e}", job.name)))
                .collect();
            let first = &taken[0];
            let memory = first.header.memories[0].bytes as f64 / (1 << 20) as f64;
            let mut later_ms: Vec<f64> = times[1..].to_vec();
            let ms = |c: &Checkpoint| c.paused.as_secs_f64() * 1e3;
            let mut later_paused: Vec<f64> = taken[1..].iter().map(ms).collect();
            let mut later_bytes: Vec<f64> =
                taken.windows(2).map(|w| added(Some(&w[0]), &w[1]) as f64).collect();
            let last = taken.last().unwrap().bytes.clone();
            let mut res = restore(rig, &job, &last, if quick { 1 } else { 5 }, &snaps);
            println!(
                "  {:>22}: memory {memory:.0} MiB (built in {built:.1} s); first snapshot {:.1} ms (paused {:.2} ms), \
                 {:.1} MB written; next {} snapshots: median {:.2} ms (max {:.2}), paused \
                 median {:.2} ms (max {:.2}), median {:.3} MB written (max {:.3}), file {} \
                 bytes; restore of the last median {:.1} ms (load {})",
                job.name,
                times[0],
                ms(first),
                (added(None, first) + first.bytes.len() as u64) as f64 / 1e6,
                later_ms.len(),
                percentile(&mut later_ms, 0.5),
                percentile(&mut later_ms, 1.0),
                percentile(&mut later_paused, 0.5),
                percentile(&mut later_paused, 1.0),
                percentile(&mut later_bytes, 0.5) / 1e6,
                percentile(&mut later_bytes, 1.0) / 1e6,
                last.len(),
                percentile(&mut res, 0.5),
                uptime()
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo test` runs benches with `--test`; `cargo bench` passes `--bench`.
    // `cargo bench` passes `--bench`; without it (`cargo test` runs every
    // bench target once) or with `--test`, each section runs small.
    let quick = args.iter().any(|a| a == "--test") || !args.iter().any(|a| a == "--bench");
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    let want = |s: &str| filter.as_deref().is_none_or(|f| s.contains(f));
    let rig = Rig::new();
    if want("overhead") {
        overhead(&rig, quick);
    }
    if want("latency") || want("restore") {
        checkpoints(&rig, quick);
    }
    if want("incremental") {
        incremental(&rig, quick);
    }
}
