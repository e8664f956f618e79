//! Benchmarks of the execute host's starter (`cargo bench -p andes-starter --bench starter`).
//!
//! Four sections; pass one's name to run only it (`-- startup`, `-- compute`,
//! `-- reaction`, `-- memory`):
//!
//! * `startup` (criterion): start-to-exit of a trivial job whose module is
//!   already compiled and pre-linked (one warm-up run first), with its digest
//!   given so that hashing is not measured. Three modules: an empty `_start` in
//!   WAT, one that calls `proc_exit(0)`, and `hello.wasm` with no stdin. `inline` runs `host.run` with
//!   `block_on` on the bench thread; `spawned` runs it as a tokio task on the
//!   one worker thread, as the startd would. Then a plain loop of sequential
//!   runs gives jobs per second on one core. Each case runs on a metered
//!   host and on one that runs jobs unmetered (`unmetered_...`), and the
//!   unmetered ones also in place (`Host::run_in_place`, as the startd and
//!   `andes run` start jobs: `unmetered_.../in_place_inline`, `..._spawned`).
//! * `compute`: `primes N` under the full starter (fuel, epoch, yields; for
//!   three `fuel_yield_interval`s; and unmetered, `starter_unmetered`), under a bare wasmtime embedding (default
//!   `Config`: no fuel, no epoch, sync WASI), and natively. Runs interleave,
//!   round by round, so that load from the rest of the machine falls on all
//!   of them alike.
//! * `reaction`: suspend, resume and hard-kill latencies, for each fuel yield
//!   interval, and on the unmetered engine (`reaction/unmetered/...`).
//! * `memory`: RSS of 1,000 suspended small jobs.
//!
//! The samples must be built first: `cargo xtask samples`, and for the native
//! side of `compute`, `cargo build --release --manifest-path samples/Cargo.toml
//! -p primes --target x86_64-unknown-linux-gnu`.
//!
//! Knobs: `ANDES_BENCH_PRIMES_N` (default 500000000), `ANDES_BENCH_ROUNDS`
//! (default 5), `ANDES_BENCH_TRIALS` (default 20), `ANDES_BENCH_JOBS` (default
//! 1000). With `--test` every section runs once, small, to check it works.
//! See BENCHMARKS.md at the workspace root for the figures.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use andes_starter::cputime::{process_cpu_ns, thread_cpu_ns};
use andes_starter::engine::module_digest;
use andes_starter::{
    Clock, Control, Ending, Host, HostConfig, JobResult, JobSpec, Limits, SystemClock,
};
use criterion::{BatchSize, Criterion};
use tokio::runtime::Runtime;

/// The smallest job: one page of memory and an empty `_start`.
const TRIVIAL_WAT: &str = r#"(module (memory (export "memory") 1) (func (export "_start")))"#;
/// The smallest job that ends through `proc_exit`, as C, Go and Rust programs
/// that exit with a code do.
const EXIT_WAT: &str = r#"(module
    (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
    (memory (export "memory") 1)
    (func (export "_start") (call $exit (i32.const 0))))"#;
/// The smallest job that never ends.
const LOOP_WAT: &str =
    r#"(module (memory (export "memory") 1) (func (export "_start") (loop (br 0))))"#;

/// The fuel yield intervals compared (the middle one is the default).
const INTERVALS: [u64; 3] = [10_000, 100_000, 1_000_000];

struct Opts {
    filter: Option<String>,
    quick: bool,
}

impl Opts {
    fn from_args() -> Opts {
        // Criterion's options that take a value, which is not the filter.
        const WITH_VALUE: &[&str] = &[
            "--profile-time",
            "--save-baseline",
            "--baseline",
            "--baseline-lenient",
            "--load-baseline",
            "--measurement-time",
            "--warm-up-time",
            "--sample-size",
            "--nresamples",
            "--noise-threshold",
            "--confidence-level",
            "--significance-level",
            "--color",
            "--plotting-backend",
            "--output-format",
            "--format",
            "--logfile",
        ];
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut filter = None;
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if WITH_VALUE.contains(&a.as_str()) {
                i += 1;
            } else if !a.starts_with('-') && filter.is_none() {
                filter = Some(a.clone());
            }
            i += 1;
        }
        // `cargo bench` passes `--bench`; without it (`cargo test` runs every
        // bench target once) or with `--test`, each section runs small.
        let quick = args.iter().any(|a| a == "--test") || !args.iter().any(|a| a == "--bench");
        Opts { filter, quick }
    }

    /// True when `section` should run: no filter, or the filter names it (or
    /// one of its criterion benchmarks).
    fn wants(&self, section: &str) -> bool {
        match &self.filter {
            None => true,
            Some(f) => section.contains(f.as_str()) || f.starts_with(section),
        }
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

fn samples_target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples/target")
}

fn sample(name: &str) -> Arc<[u8]> {
    let p = samples_target().join("wasm32-wasip1/release").join(format!("{name}.wasm"));
    std::fs::read(&p)
        .unwrap_or_else(|e| {
            panic!("{}: {e}; build the samples first (`cargo xtask samples`)", p.display())
        })
        .into()
}

fn wat(text: &str) -> Arc<[u8]> {
    wat::parse_str(text).expect("wat").into()
}

/// A start-to-exit case: a module on a host, run as `Host::run` does or
/// (`in_place`) as `Host::run_in_place` does.
struct Case<'a> {
    name: String,
    host: &'a Arc<Host>,
    module: &'a Arc<[u8]>,
    in_place: bool,
}

impl Case<'_> {
    async fn run(&self, spec: JobSpec, clock: Arc<dyn Clock>) -> JobResult {
        run_as(self.host, self.in_place, spec, clock).await
    }
}

/// Runs one job to its end with a fresh control block, in place or not.
async fn run_as(host: &Host, in_place: bool, spec: JobSpec, clock: Arc<dyn Clock>) -> JobResult {
    if in_place {
        host.run_in_place(spec, Control::new(), clock).await
    } else {
        host.run(spec, Control::new(), clock).await
    }
}

/// A multi-thread runtime with `workers` worker threads: wasi-common's tokio
/// flavour calls `block_in_place`, which a current-thread runtime refuses.
fn runtime(workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn host(config: HostConfig) -> Arc<Host> {
    Arc::new(Host::new(config).expect("host"))
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// A job spec with the digest precomputed.
fn job(module: &Arc<[u8]>, ad: &str, sandbox: &Path) -> JobSpec {
    let ad = classad::parse_ad(ad).expect("ad");
    JobSpec {
        module: module.clone(),
        limits: Limits::from_ad(&ad),
        ad,
        sandbox: sandbox.to_path_buf(),
        inherit_stdio: false,
        digest: Some(module_digest(module)),
        saved_state: None,
        transparent: None,
        metered: false,
        sandbox_empty: false,
    }
}

fn median(xs: &mut [f64]) -> f64 {
    assert!(!xs.is_empty());
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 }
}

fn pct(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[((xs.len() - 1) as f64 * p).round() as usize]
}

fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// 1. Start to exit
// ---------------------------------------------------------------------------

/// Where the startup jobs' sandbox goes: `ANDES_BENCH_SANDBOX_DIR`, else
/// tmpfs (`/dev/shm`) when there is one. `hello` rewrites `hello.out` in the
/// same sandbox on every run, and on ext4 closing a file that was truncated
/// and rewritten starts its writeback (`auto_da_alloc`), which would add
/// about 0.6 ms of waiting per run that a fresh sandbox never sees.
fn startup_sandbox() -> tempfile::TempDir {
    let base = std::env::var_os("ANDES_BENCH_SANDBOX_DIR")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()))
        .unwrap_or_else(std::env::temp_dir);
    tempfile::tempdir_in(&base).expect("sandbox")
}

fn bench_startup(c: &mut Criterion, opts: &Opts) {
    let rt = runtime(1);
    // The default host meters every job; the other runs jobs that need no
    // fuel unmetered, each on a job thread of its own.
    let hosts = [
        ("", host(HostConfig { max_instances: 16, ..Default::default() })),
        (
            "unmetered_",
            host(HostConfig { max_instances: 16, meter_fuel: false, ..Default::default() }),
        ),
    ];
    let sb = startup_sandbox();
    println!("startup: sandbox {}; load average {}", sb.path().display(), uptime());
    let clock = clock();
    let modules = [
        ("wat_trivial", wat(TRIVIAL_WAT)),
        ("wat_exit", wat(EXIT_WAT)),
        ("hello", sample("hello")),
    ];
    // Unmetered jobs also as the startd and `andes run` start them: in place
    // on the calling thread (`Host::run_in_place`), no job thread to wake.
    let unmetered = &hosts[1].1;
    let cases: Vec<Case> = hosts
        .iter()
        .flat_map(|(prefix, host)| {
            modules.iter().map(move |(name, module)| Case {
                name: format!("{prefix}{name}"),
                host,
                module,
                in_place: false,
            })
        })
        .chain(modules.iter().map(|(name, module)| Case {
            name: format!("unmetered_{name}"),
            host: unmetered,
            module,
            in_place: true,
        }))
        .collect();
    let mut g = c.benchmark_group("startup");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    for case in &cases {
        let spec = job(case.module, "[]", sb.path());
        // The warm-up run compiles and pre-links the module.
        let r = rt.block_on(case.run(spec.clone(), clock.clone()));
        assert_eq!(r.ending, Ending::Exited(0), "{}: {r:?}", case.name);
        let (name, mode) = (&case.name, if case.in_place { "in_place_" } else { "" });
        g.bench_function(format!("{name}/{mode}inline"), |b| {
            b.iter_batched(
                || spec.clone(),
                |s| rt.block_on(case.run(s, clock.clone())),
                BatchSize::SmallInput,
            )
        });
        g.bench_function(format!("{name}/{mode}spawned"), |b| {
            b.iter_batched(
                || spec.clone(),
                |s| {
                    let (host, clock, in_place) = (case.host.clone(), clock.clone(), case.in_place);
                    rt.block_on(async move {
                        tokio::spawn(async move { run_as(&host, in_place, s, clock).await })
                            .await
                            .expect("job task")
                    })
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
    if !opts.wants("startup/rate") && opts.filter.as_deref().is_some_and(|f| f.contains('/')) {
        return;
    }
    // Jobs per second: sequential runs on the bench thread for a fixed time.
    let secs = if opts.quick { 0.1 } else { 2.0 };
    for case in &cases {
        let spec = job(case.module, "[]", sb.path());
        let name = format!("{}{}", case.name, if case.in_place { "/in_place" } else { "" });
        let t = Instant::now();
        let (cpu0, tcpu0) = (process_cpu_ns(), thread_cpu_ns());
        let mut n = 0u64;
        while t.elapsed().as_secs_f64() < secs {
            for _ in 0..100 {
                black_box(rt.block_on(case.run(spec.clone(), clock.clone())));
            }
            n += 100;
        }
        let wall = t.elapsed().as_secs_f64();
        let cpu = (process_cpu_ns() - cpu0) as f64 / 1e9;
        let tcpu = (thread_cpu_ns() - tcpu0) as f64 / 1e9;
        println!(
            "startup/rate/{name}: {n} sequential jobs in {wall:.2} s = {:.0} jobs/s; \
             {:.1} us wall, {:.1} us CPU of the bench thread, {:.1} us CPU of the process per job",
            n as f64 / wall,
            wall / n as f64 * 1e6,
            tcpu / n as f64 * 1e6,
            cpu / n as f64 * 1e6,
        );
    }
}

// ---------------------------------------------------------------------------
// 2. Compute overhead
// ---------------------------------------------------------------------------

/// The bare embedding: wasmtime's default `Config` (no fuel, no epoch, no
/// async, on-demand allocation), sync wasi-common without stdio (stdout is
/// captured in memory to check the answer), and a no-op for the one andes
/// import `primes` has.
struct Bare {
    engine: wasmtime::Engine,
    module: wasmtime::Module,
    linker: wasmtime::Linker<wasi_common::WasiCtx>,
    fuel: bool,
    epoch: bool,
}

impl Bare {
    /// With `fuel` and `epoch`, the same embedding with the starter's
    /// instrumentation compiled in but never triggered (fuel without yields,
    /// an epoch deadline that never comes): to apportion the starter's
    /// overhead.
    fn new(bytes: &[u8], fuel: bool, epoch: bool) -> Bare {
        let mut config = wasmtime::Config::new();
        config.consume_fuel(fuel).epoch_interruption(epoch);
        if std::env::var_os("ANDES_BENCH_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = wasmtime::Engine::new(&config).expect("engine");
        let module = wasmtime::Module::new(&engine, bytes).expect("compile");
        let mut linker = wasmtime::Linker::new(&engine);
        wasi_common::sync::add_to_linker(&mut linker, |c| c).expect("wasi");
        linker
            .func_wrap(
                "andes:job/attributes@0.1.0",
                "set",
                |mut caller: wasmtime::Caller<'_, wasi_common::WasiCtx>,
                 _np: i32,
                 _nl: i32,
                 _vp: i32,
                 _vl: i32,
                 ret: i32|
                 -> wasmtime::Result<()> {
                    // Success: a zeroed return area.
                    let mem = caller
                        .get_export("memory")
                        .and_then(|e| e.into_memory())
                        .ok_or_else(|| anyhow::anyhow!("no memory"))?;
                    mem.write(&mut caller, ret as u32 as usize, &[0u8; 12])?;
                    Ok(())
                },
            )
            .expect("stub");
        Bare { engine, module, linker, fuel, epoch }
    }

    /// Runs `primes n`; its standard output.
    fn run(&self, n: u64) -> String {
        let out = wasi_common::pipe::WritePipe::new_in_memory();
        let wasi = wasi_common::sync::WasiCtxBuilder::new()
            .arg("primes.wasm")
            .and_then(|b| b.arg(&n.to_string()))
            .expect("args")
            .stdout(Box::new(out.clone()))
            .build();
        let mut store = wasmtime::Store::new(&self.engine, wasi);
        if self.fuel {
            store.set_fuel(u64::MAX / 2).expect("fuel");
        }
        if self.epoch {
            store.set_epoch_deadline(u64::MAX / 2);
        }
        let instance = self.linker.instantiate(&mut store, &self.module).expect("instantiate");
        let start = instance.get_typed_func::<(), ()>(&mut store, "_start").expect("_start");
        if let Err(e) = start.call(&mut store, ()) {
            match e.downcast_ref::<wasi_common::I32Exit>() {
                Some(wasi_common::I32Exit(0)) => {}
                _ => panic!("bare primes: {e:#}"),
            }
        }
        drop(store);
        match out.try_into_inner() {
            Ok(cursor) => String::from_utf8_lossy(&cursor.into_inner()).into_owned(),
            Err(_) => panic!("the stdout pipe is still shared"),
        }
    }
}

/// CPU seconds of this process's waited-for children (`cutime + cstime` of
/// `/proc/self/stat`, in clock ticks of 10 ms).
fn children_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 16 and 17 of stat(5) are the 14th and 15th after the name.
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
    tick(13).zip(tick(14)).map_or(f64::NAN, |(u, s)| (u + s) as f64 / 100.0)
}

fn last_line(s: &str) -> String {
    s.lines().last().unwrap_or_default().to_string()
}

fn bench_compute(opts: &Opts) {
    let n = if opts.quick { 2_000_000 } else { env_u64("ANDES_BENCH_PRIMES_N", 500_000_000) };
    let rounds = if opts.quick { 1 } else { env_u64("ANDES_BENCH_ROUNDS", 5) } as usize;
    println!("compute: primes {n}, {rounds} rounds; load average {}", uptime());
    let bytes = sample("primes");
    let native = samples_target().join("x86_64-unknown-linux-gnu/release/primes");
    let have_native = native.exists();
    if !have_native {
        println!(
            "compute: no native primes at {}; build it with `cargo build --release \
             --manifest-path samples/Cargo.toml -p primes --target x86_64-unknown-linux-gnu`",
            native.display()
        );
    }
    let rt = runtime(1);
    let clock = clock();
    let sb = tempfile::tempdir().expect("sandbox");
    let mut hosts: Vec<(String, Arc<Host>)> = INTERVALS
        .iter()
        .map(|&i| {
            let h =
                host(HostConfig { max_instances: 4, fuel_yield_interval: i, ..Default::default() });
            h.module(&bytes).expect("compile");
            (format!("starter_yield_{i}"), h)
        })
        .collect();
    // The default path of a host that does not meter every job.
    hosts.insert(
        0,
        (
            "starter_unmetered".into(),
            host(HostConfig { max_instances: 4, meter_fuel: false, ..Default::default() }),
        ),
    );
    let bares: Vec<(&str, Bare)> = [
        ("bare_wasmtime", false, false),
        ("bare_fuel", true, false),
        ("bare_epoch", false, true),
        ("bare_fuel_epoch", true, true),
    ]
    .into_iter()
    .map(|(name, fuel, epoch)| (name, Bare::new(&bytes, fuel, epoch)))
    .collect();
    let spec = job(&bytes, &format!(r#"[ Arguments = "{n}"; Out = "out.txt" ]"#), sb.path());
    // ANDES_BENCH_CWASM_DIR=<dir>: write each engine's compiled primes there
    // (ELF; `objdump -d` shows the code the starter runs, for profiles).
    if let Some(dir) = std::env::var_os("ANDES_BENCH_CWASM_DIR") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("cwasm dir");
        let engines = hosts
            .iter()
            .map(|(n, h)| (n.as_str(), h.engine()))
            .chain(bares.iter().map(|(n, b)| (*n, &b.engine)));
        for (name, engine) in engines {
            let code = engine.precompile_module(&bytes).expect("precompile");
            std::fs::write(dir.join(format!("primes-{name}.cwasm")), code).expect("write cwasm");
        }
    }

    let mut names: Vec<String> = Vec::new();
    if have_native {
        names.push("native".into());
    }
    names.extend(bares.iter().map(|(n, _)| n.to_string()));
    names.extend(hosts.iter().map(|(n, _)| n.clone()));
    // ANDES_BENCH_VARIANTS=a,b keeps the variants whose names contain a or b
    // (bare_wasmtime always stays: it is the reference).
    if let Ok(keep) = std::env::var("ANDES_BENCH_VARIANTS") {
        names.retain(|n| n == "bare_wasmtime" || keep.split(',').any(|k| n.contains(k)));
    }
    let mut fuel_used: Vec<u64> = vec![0; names.len()];
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut expected: Option<String> = None;
    let mut check = |name: &str, line: String| match &expected {
        None => expected = Some(line),
        Some(e) => assert_eq!(&line, e, "{name} gave a different answer"),
    };
    for round in 0..rounds {
        // Rotate the order each round.
        for k in 0..names.len() {
            let i = (k + round) % names.len();
            let name = names[i].as_str();
            let t = Instant::now();
            let (line, cpu_s) = if name == "native" {
                let c0 = children_cpu_s();
                let out = std::process::Command::new(&native)
                    .arg(n.to_string())
                    .stderr(std::process::Stdio::null())
                    .output()
                    .expect("native primes");
                (last_line(&String::from_utf8_lossy(&out.stdout)), children_cpu_s() - c0)
            } else if let Some((_, bare)) = bares.iter().find(|(n, _)| *n == name) {
                let c0 = thread_cpu_ns();
                let out = bare.run(n);
                (last_line(&out), (thread_cpu_ns() - c0) as f64 / 1e9)
            } else {
                let h = &hosts.iter().find(|(n, _)| n == name).expect("host").1;
                let c0 = thread_cpu_ns();
                let r = rt.block_on(h.run(spec.clone(), Control::new(), clock.clone()));
                // A metered job runs on this thread; an unmetered one on a
                // job thread of its own, whose CPU time the starter reports.
                let mut c = (thread_cpu_ns() - c0) as f64 / 1e9;
                if r.usage.fuel_unmetered {
                    c += r.usage.remote_user_cpu + r.usage.remote_sys_cpu;
                }
                assert_eq!(r.ending, Ending::Exited(0), "{name}: {r:?}");
                fuel_used[i] = r.usage.fuel_consumed;
                let out = std::fs::read_to_string(sb.path().join("out.txt")).unwrap_or_default();
                (last_line(&out), c)
            };
            let w = t.elapsed().as_secs_f64();
            check(name, line);
            wall[i].push(w);
            cpu[i].push(cpu_s);
        }
        println!("compute: round {} done; load average {}", round + 1, uptime());
    }
    println!("compute: answer `{}`", expected.unwrap_or_default());
    let bare_i = names.iter().position(|n| n == "bare_wasmtime").expect("bare");
    let native_i = names.iter().position(|n| n == "native");
    for (i, name) in names.iter().enumerate() {
        // Paired ratios: each round's run against the same round's bare run.
        let mut vs_bare: Vec<f64> = wall[i].iter().zip(&wall[bare_i]).map(|(a, b)| a / b).collect();
        let mut vs_native: Vec<f64> = match native_i {
            Some(j) => cpu[i].iter().zip(&cpu[j]).map(|(a, b)| a / b).collect(),
            None => vec![f64::NAN],
        };
        let mut cpu_vs_bare: Vec<f64> =
            cpu[i].iter().zip(&cpu[bare_i]).map(|(a, b)| a / b).collect();
        let mut w = wall[i].clone();
        let mut c = cpu[i].clone();
        println!(
            "compute/{name}: median {:.3} s CPU (min {:.3}, max {:.3}), {:.3} s wall; \
             median paired ratio of CPU time x{:.3} bare wasmtime (of wall time x{:.3}), \
             x{:.3} native{}",
            median(&mut c),
            pct(&mut c, 0.0),
            pct(&mut c, 1.0),
            median(&mut w),
            median(&mut cpu_vs_bare),
            median(&mut vs_bare),
            median(&mut vs_native),
            if fuel_used[i] > 0 { format!("; fuel {}", fuel_used[i]) } else { String::new() },
        );
    }
}

// ---------------------------------------------------------------------------
// 3. Reaction times
// ---------------------------------------------------------------------------

fn cpu_ns(ctl: &Control) -> u64 {
    let u = ctl.usage(&SystemClock);
    ((u.remote_user_cpu + u.remote_sys_cpu) * 1e9).round() as u64
}

fn wait_running(ctl: &Control) {
    let t = Instant::now();
    while !ctl.is_running() {
        assert!(t.elapsed() < Duration::from_secs(30), "the job did not start");
        std::thread::sleep(Duration::from_micros(200));
    }
}

type Handle = tokio::task::JoinHandle<(JobResult, Instant)>;

/// Starts a job as a tokio task; the task returns when `host.run` did.
fn start(rt: &Runtime, host: &Arc<Host>, spec: JobSpec, ctl: &Arc<Control>) -> Handle {
    let (host, ctl) = (host.clone(), ctl.clone());
    rt.spawn(async move {
        let r = host.run(spec, ctl, Arc::new(SystemClock)).await;
        (r, Instant::now())
    })
}

/// How fast suspension stops the guest and resumption restarts it: the
/// job's CPU time is published at the end of each poll of the guest, so
/// the last change after `suspend` is when the guest stopped.
struct SuspendTrials {
    suspend_ms: Vec<f64>,
    cpu_after_suspend_ms: Vec<f64>,
    resume_ms: Vec<f64>,
    late: usize,
}

fn suspend_resume(rt: &Runtime, host: &Arc<Host>, spec: JobSpec, trials: usize) -> SuspendTrials {
    const POLL: Duration = Duration::from_micros(10);
    const STABLE: Duration = Duration::from_millis(30);
    let ctl = Control::new();
    let h = start(rt, host, spec, &ctl);
    wait_running(&ctl);
    std::thread::sleep(Duration::from_millis(50));
    let mut out = SuspendTrials {
        suspend_ms: Vec::new(),
        cpu_after_suspend_ms: Vec::new(),
        resume_ms: Vec::new(),
        late: 0,
    };
    for _ in 0..trials {
        std::thread::sleep(Duration::from_millis(20));
        let before = cpu_ns(&ctl);
        let t0 = Instant::now();
        ctl.suspend(&SystemClock);
        let mut last = cpu_ns(&ctl);
        let mut last_change = t0;
        loop {
            std::thread::sleep(POLL);
            let (now, c) = (Instant::now(), cpu_ns(&ctl));
            if c != last {
                last = c;
                last_change = now;
            }
            if now - last_change > STABLE {
                break;
            }
        }
        out.suspend_ms.push((last_change - t0).as_secs_f64() * 1e3);
        out.cpu_after_suspend_ms.push((last - before) as f64 / 1e6);
        if cpu_ns(&ctl) != last {
            out.late += 1;
        }
        let base = cpu_ns(&ctl);
        let t1 = Instant::now();
        ctl.resume(&SystemClock);
        loop {
            // Sleep, not spin: on two cores a spinning poller delays the
            // worker thread it is waiting for.
            std::thread::sleep(POLL);
            if cpu_ns(&ctl) != base {
                out.resume_ms.push(t1.elapsed().as_secs_f64() * 1e3);
                break;
            }
            assert!(t1.elapsed() < Duration::from_secs(10), "the job did not resume");
        }
    }
    ctl.hard_kill();
    let (r, _) = rt.block_on(h).expect("job task");
    assert_eq!(r.ending, Ending::Evicted { vacated: false });
    out
}

/// Milliseconds from `hard_kill` until `host.run` returned, per trial.
fn kill_trials(rt: &Runtime, host: &Arc<Host>, spec: &JobSpec, trials: usize) -> Vec<f64> {
    (0..trials)
        .map(|_| {
            let ctl = Control::new();
            let h = start(rt, host, spec.clone(), &ctl);
            wait_running(&ctl);
            std::thread::sleep(Duration::from_millis(20));
            let t0 = Instant::now();
            ctl.hard_kill();
            let (r, end) = rt.block_on(h).expect("job task");
            assert_eq!(r.ending, Ending::Evicted { vacated: false });
            (end - t0).as_secs_f64() * 1e3
        })
        .collect()
}

fn summary(xs: &[f64]) -> String {
    let mut v = xs.to_vec();
    format!(
        "median {:.3} ms (min {:.3}, p90 {:.3}, max {:.3}, n={})",
        median(&mut v),
        pct(&mut v, 0.0),
        pct(&mut v, 0.9),
        pct(&mut v, 1.0),
        v.len()
    )
}

fn bench_reaction(opts: &Opts) {
    let trials = if opts.quick { 2 } else { env_u64("ANDES_BENCH_TRIALS", 20) as usize };
    let intervals: &[u64] = if opts.quick { &INTERVALS[1..2] } else { &INTERVALS };
    let rt = runtime(1);
    let sb = tempfile::tempdir().expect("sandbox");
    let primes = sample("primes");
    let spin = sample("spin");
    let sleeper = sample("sleeper");
    // Each fuel yield interval of the metered engine, then the unmetered
    // engine (stopped by signal; the interval does not apply).
    let variants = intervals
        .iter()
        .map(|&i| (i.to_string(), HostConfig { fuel_yield_interval: i, ..Default::default() }))
        .chain([("unmetered".to_string(), HostConfig { meter_fuel: false, ..Default::default() })]);
    for (interval, config) in variants {
        println!("reaction: {interval}; load average {}", uptime());
        let host = host(HostConfig { max_instances: 8, ..config });
        for (name, spec) in [
            ("primes", job(&primes, r#"[ Arguments = "1000000000000" ]"#, sb.path())),
            ("spin", job(&spin, "[]", sb.path())),
        ] {
            let t = suspend_resume(&rt, &host, spec, trials);
            println!("reaction/{interval}/suspend/{name}: {}", summary(&t.suspend_ms));
            println!(
                "reaction/{interval}/suspend_cpu/{name}: guest CPU after suspend(): {}{}",
                summary(&t.cpu_after_suspend_ms),
                if t.late > 0 {
                    format!("; {} trials moved after 30 ms", t.late)
                } else {
                    "".into()
                }
            );
            println!("reaction/{interval}/resume/{name}: {}", summary(&t.resume_ms));
        }
        for (name, module) in [("spin", &spin), ("sleeper", &sleeper)] {
            let ms = kill_trials(&rt, &host, &job(module, "[]", sb.path()), trials);
            println!("reaction/{interval}/hard_kill/{name}: {}", summary(&ms));
        }
    }
}

// ---------------------------------------------------------------------------
// 4. Memory of suspended jobs
// ---------------------------------------------------------------------------

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l[field.len()..].trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Each module is measured in a process of its own (this bench, run again
/// with `ANDES_BENCH_MEMORY_MODULE` set): freed heap stays in the process
/// and would hide the second module's cost.
fn bench_memory(opts: &Opts) {
    const MODULES: [&str; 2] = ["spin", "wat_loop"];
    if let Ok(module) = std::env::var("ANDES_BENCH_MEMORY_MODULE") {
        return memory_of(opts, &module);
    }
    // Metered, then unmetered (each unmetered job holds a thread of its
    // own while it runs or is suspended).
    for unmetered in [false, true] {
        for module in MODULES {
            let mut cmd = std::process::Command::new(std::env::current_exe().expect("exe"));
            cmd.arg("--bench").arg("memory").env("ANDES_BENCH_MEMORY_MODULE", module);
            if unmetered {
                cmd.env("ANDES_BENCH_MEMORY_UNMETERED", "1");
            }
            if opts.quick {
                cmd.arg("--test");
            }
            let status = cmd.status().expect("memory child");
            assert!(status.success(), "memory/{module}: {status}");
        }
    }
}

fn memory_of(opts: &Opts, name: &str) {
    let jobs = if opts.quick { 10 } else { env_u64("ANDES_BENCH_JOBS", 1000) as usize };
    let unmetered = std::env::var_os("ANDES_BENCH_MEMORY_UNMETERED").is_some();
    let mode = if unmetered { "unmetered" } else { "metered" };
    println!("memory/{name}/{mode}: {jobs} jobs; load average {}", uptime());
    let config = HostConfig { max_instances: 1100, meter_fuel: !unmetered, ..Default::default() };
    let host = match Host::new(config.clone()) {
        Ok(h) => Arc::new(h),
        Err(e) => {
            println!(
                "memory: a pool of 1100 x {} MiB failed ({e:#}); using 256 MiB",
                config.max_memory_bytes >> 20
            );
            host(HostConfig { max_memory_bytes: 256 << 20, ..config })
        }
    };
    println!(
        "memory: pool of {} instances of up to {} MiB; VmSize {} MiB",
        host.config().max_instances,
        host.config().max_memory_bytes >> 20,
        status_kib("VmSize:") >> 10
    );
    let rt = runtime(1);
    let sb = tempfile::tempdir().expect("sandbox");
    {
        let module = if name == "wat_loop" { wat(LOOP_WAT) } else { sample(name) };
        let spec = job(&module, "[]", sb.path());
        // Warm up: compile, pre-link, and touch one pool slot.
        let ctl = Control::new();
        let h = start(&rt, &host, spec.clone(), &ctl);
        wait_running(&ctl);
        ctl.hard_kill();
        rt.block_on(h).expect("job task");
        std::thread::sleep(Duration::from_millis(50));
        let rss0 = status_kib("VmRSS:");
        let t = Instant::now();
        let ctls: Vec<Arc<Control>> = (0..jobs).map(|_| Control::new()).collect();
        let handles: Vec<Handle> =
            ctls.iter().map(|ctl| start(&rt, &host, spec.clone(), ctl)).collect();
        for ctl in &ctls {
            wait_running(ctl);
        }
        let all_running = t.elapsed();
        for ctl in &ctls {
            ctl.suspend(&SystemClock);
        }
        std::thread::sleep(Duration::from_millis(200));
        let cpu0: Vec<u64> = ctls.iter().map(|c| cpu_ns(c)).collect();
        let proc0 = process_cpu_ns();
        std::thread::sleep(Duration::from_millis(300));
        let moved = ctls.iter().zip(&cpu0).filter(|(c, c0)| cpu_ns(c) != **c0).count();
        let proc_ms = (process_cpu_ns() - proc0) as f64 / 1e6;
        let rss1 = status_kib("VmRSS:");
        let hwm = status_kib("VmHWM:");
        for ctl in &ctls {
            ctl.hard_kill();
        }
        let t = Instant::now();
        for h in handles {
            let (r, _) = rt.block_on(h).expect("job task");
            assert_eq!(r.ending, Ending::Evicted { vacated: false });
        }
        let kill_all = t.elapsed();
        std::thread::sleep(Duration::from_millis(50));
        let rss2 = status_kib("VmRSS:");
        println!(
            "memory/{name}/{mode}: RSS {} MiB before, {} MiB with {jobs} suspended = {:.1} KiB per job; \
             {} MiB after killing all (peak {} MiB); all running after {:.0} ms, all killed in \
             {:.0} ms; {moved} jobs' CPU moved and the process used {proc_ms:.1} ms CPU in 300 ms \
             while all were suspended",
            rss0 >> 10,
            rss1 >> 10,
            (rss1 as f64 - rss0 as f64) / jobs as f64,
            rss2 >> 10,
            hwm >> 10,
            all_running.as_secs_f64() * 1e3,
            kill_all.as_secs_f64() * 1e3,
        );
    }
}

fn main() {
    let opts = Opts::from_args();
    if opts.wants("startup") {
        let mut c = Criterion::default().configure_from_args();
        bench_startup(&mut c, &opts);
        c.final_summary();
    }
    if opts.wants("compute") {
        bench_compute(&opts);
    }
    if opts.wants("reaction") {
        bench_reaction(&opts);
    }
    if opts.wants("memory") {
        bench_memory(&opts);
    }
}
