//! `cargo xtask scale`: a pool of separate processes as the manual sets one up
//! (one central manager, one schedd, N `andes host` processes of S slots each,
//! each with its own `STARTD_NAME`), all on 127.0.0.1, and what it does:
//!
//! 0. **prime**: one job of each module, so that the module cache the hosts
//!    share (they stand for machines whose caches are warm) holds both.
//! 1. **fill**: `queue N*S` jobs that sleep; the time from the submit until
//!    every slot runs one. Then `andes rm` of them all, and the time until
//!    every slot is free again.
//! 2. **warm-up**: `queue 4*N*S` short jobs, so that every host has compiled
//!    the module both ways it runs (alone, and metered in a batch: the
//!    figures below are for a module already compiled).
//! 3. **throughput**: `queue J` short jobs (the `hello` sample, its output
//!    returned as a file); jobs per second from the submit until the queue
//!    is empty, and each daemon's CPU per job (user and system time from
//!    `/proc`, less what it spent in the same time idle) and resident memory;
//!    and the same from the moment every slot is claimed to the end (jobs/s
//!    and CPU a job on claims already made: the daemons' cost a job once
//!    the claims are made, which the target of 20 us for the central
//!    manager is about); and the steady part of that, until 3 jobs a slot
//!    are left (from then on claims are released as the queue runs out:
//!    a cost per slot, not per job).
//!
//! ```sh
//! cargo xtask scale --hosts 200 --slots 5 --jobs 5000
//! ```
//!
//! Options: `--hosts N` (20), `--slots S` (8), `--jobs J` (at least 2,000 and
//! 10 per slot), `--debug` (the debug build; the default is release),
//! `--keep` (keep the pool's directory), `--perf FILE` (a `perf record` of
//! every daemon during the throughput phase, into FILE), `--andes BIN` (run
//! that binary, built by nobody here: to compare two builds, interleaved).
//! Linux only (it reads `/proc`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What every process of the pool is configured with, besides its own lines.
const COMMON: &str = "
START = True
SUSPEND = False
CONTINUE = True
PREEMPT = False
KILL = False
WANT_SUSPEND = False
WANT_VACATE = False
RANK = 0
SCHEDD_ADDRESS = 127.0.0.1:0
HOST_ADDRESS = 127.0.0.1:0
CENTRAL_MANAGER_ADDRESS = 127.0.0.1:0
";

/// How long any one phase may take before the run is given up.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);

/// How long the pool is watched idle, for each daemon's idle CPU rate.
const IDLE_WATCH: Duration = Duration::from_secs(5);

struct Options {
    hosts: usize,
    slots: usize,
    jobs: usize,
    release: bool,
    keep: bool,
    perf: Option<PathBuf>,
    andes: Option<PathBuf>,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        hosts: 20,
        slots: 8,
        jobs: 0,
        release: true,
        keep: false,
        perf: None,
        andes: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{name} wants a positive number"))
        };
        match a.as_str() {
            "--hosts" => o.hosts = number("--hosts")?,
            "--slots" => o.slots = number("--slots")?,
            "--jobs" => o.jobs = number("--jobs")?,
            "--debug" => o.release = false,
            "--keep" => o.keep = true,
            "--andes" => {
                let f = it.next().ok_or("--andes wants a binary")?;
                o.andes = Some(std::env::current_dir().map_err(|e| e.to_string())?.join(f));
            }
            "--perf" => {
                let f = it.next().ok_or("--perf wants a file")?;
                o.perf = Some(std::env::current_dir().map_err(|e| e.to_string())?.join(f));
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if o.jobs == 0 {
        o.jobs = (o.hosts * o.slots * 10).max(2000);
    }
    Ok(o)
}

/// Runs `cargo xtask scale ARGS`.
pub fn run(args: &[String]) -> bool {
    let o = match options(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!(
                "usage: cargo xtask scale [--hosts N] [--slots S] [--jobs J] [--debug] [--keep] \
                 [--perf FILE] [--andes BIN]: {e}"
            );
            return false;
        }
    };
    if !cfg!(target_os = "linux") {
        eprintln!("scale: reads each daemon's CPU time from /proc: Linux only");
        return false;
    }
    if !crate::sample_jobs() {
        eprintln!("scale: failed to build the sample jobs (see cargo's messages above)");
        return false;
    }
    let profile = if o.release { "release" } else { "debug" };
    let build: &[&str] = if o.release {
        &["build", "--release", "--bin", "andes"]
    } else {
        &["build", "--bin", "andes"]
    };
    if o.andes.is_none() && !crate::cargo(build) {
        eprintln!("scale: failed to build andes (see cargo's messages above)");
        return false;
    }
    let andes = o.andes.clone().unwrap_or_else(|| crate::target_dir().join(profile).join("andes"));
    let dir = match tempfile::Builder::new().prefix("andes-scale-").tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("scale: cannot make a temporary directory: {e}");
            return false;
        }
    };
    let mut pool = Pool { andes, dir: dir.path().to_path_buf(), procs: Vec::new(), common: None };
    let outcome = measure(&mut pool, &o);
    pool.stop();
    match outcome {
        Ok(report) => {
            println!("{report}");
            if o.keep {
                println!("scale: the pool's directory is kept: {}", dir.keep().display());
            }
            true
        }
        Err(e) => {
            eprintln!("scale: {e}");
            eprintln!("scale: the pool's directory is kept: {}", dir.keep().display());
            false
        }
    }
}

/// One daemon process of the pool.
struct Proc {
    kind: &'static str,
    child: Child,
}

struct Pool {
    andes: PathBuf,
    dir: PathBuf,
    procs: Vec<Proc>,
    /// The configuration every process and command reads once the central
    /// manager is up (it names the collector).
    common: Option<String>,
}

impl Pool {
    fn common(&self) -> &str {
        self.common.as_deref().unwrap_or(COMMON)
    }

    /// Starts `andes ARGS` as a daemon of kind `kind` with configuration
    /// `config`, and waits until it writes `address_file`.
    fn spawn(
        &mut self,
        kind: &'static str,
        name: &str,
        args: &[&str],
        config: &str,
        address_file: &Path,
    ) -> Result<String, String> {
        let cfg = self.dir.join(format!("{name}.config"));
        std::fs::write(&cfg, config).map_err(|e| format!("{}: {e}", cfg.display()))?;
        let log = self.dir.join(format!("{name}.log"));
        let log_file =
            std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let child = Command::new(&self.andes)
            .args(args)
            .env("ANDES_CONFIG_DIR", &self.dir)
            .env("ANDES_CONFIG", &cfg)
            .env("USER", "nobody")
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("{}: {e}", self.andes.display()))?;
        self.procs.push(Proc { kind, child });
        let start = Instant::now();
        loop {
            if let Ok(a) = std::fs::read_to_string(address_file)
                && !a.trim().is_empty()
            {
                return Ok(a.trim().to_string());
            }
            if let Some(p) = self.procs.last_mut()
                && let Ok(Some(st)) = p.child.try_wait()
            {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("{name} exited ({st}): {text}"));
            }
            if start.elapsed() > Duration::from_secs(60) {
                return Err(format!("{name} did not start within 60 s ({})", log.display()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Runs `andes ARGS` as user `alice` in the jobs' directory: its output.
    fn andes(&self, args: &[&str]) -> Result<String, String> {
        let cfg = self.dir.join("user.config");
        std::fs::write(&cfg, self.common()).map_err(|e| format!("{}: {e}", cfg.display()))?;
        let out = Command::new(&self.andes)
            .args(args)
            .current_dir(self.dir.join("jobs"))
            .env("ANDES_CONFIG_DIR", &self.dir)
            .env("ANDES_CONFIG", &cfg)
            .env("USER", "alice")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("andes {}: {e}", args.join(" ")))?;
        if !out.status.success() {
            return Err(format!(
                "`andes {}` failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The queue's totals: (jobs, idle, running).
    fn totals(&self) -> Result<(u64, u64, u64), String> {
        let out = self.andes(&["q", "-totals"])?;
        let line = out
            .lines()
            .find(|l| l.starts_with("Total for query:"))
            .ok_or_else(|| format!("`andes q -totals` said: {out}"))?;
        parse_totals(line).ok_or_else(|| format!("cannot read `{line}`"))
    }

    /// How many slots the collector shows, and how many of them are not
    /// Unclaimed (claimed, matched, or in Owner after a job was killed,
    /// until the startd evaluates START again).
    fn slots(&self) -> Result<(usize, usize), String> {
        let out = self.andes(&["status", "-af", "State"])?;
        let states: Vec<&str> = out.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        Ok((states.len(), states.iter().filter(|s| **s != "Unclaimed").count()))
    }

    /// Polls `done` every 100 ms until it is true: how long that took. A
    /// command that fails (a daemon too busy to answer in time) is tried
    /// again, within the phase's time.
    fn until(
        &self,
        what: &str,
        mut done: impl FnMut(&Pool) -> Result<bool, String>,
    ) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            match done(self) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => eprintln!("scale: {what}: {e} (trying again)"),
            }
            if start.elapsed() > PHASE_TIMEOUT {
                return Err(format!("{what}: not after {} s", PHASE_TIMEOUT.as_secs()));
            }
            self.alive()?;
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(start.elapsed())
    }

    /// An error naming a daemon that exited.
    fn alive(&self) -> Result<(), String> {
        for p in &self.procs {
            if std::fs::metadata(format!("/proc/{}", p.child.id())).is_err() {
                return Err(format!(
                    "a {} (pid {}) exited; logs in {}",
                    p.kind,
                    p.child.id(),
                    self.dir.display()
                ));
            }
        }
        Ok(())
    }

    /// Each daemon's CPU time so far (user + system), and resident memory.
    fn usage(&self) -> Vec<(&'static str, Duration, u64)> {
        let tick = clock_ticks();
        self.procs
            .iter()
            .map(|p| {
                let pid = p.child.id();
                let cpu = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| cpu_ticks(&s))
                    .map_or(Duration::ZERO, |t| Duration::from_secs_f64(t as f64 / tick));
                let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .ok()
                    .and_then(|s| rss_kib(&s))
                    .unwrap_or(0);
                (p.kind, cpu, rss)
            })
            .collect()
    }

    /// `perf record` of every daemon into `file`, until sent SIGINT.
    fn perf(&self, file: &Path) -> Result<Child, String> {
        let pids: Vec<String> = self.procs.iter().map(|p| p.child.id().to_string()).collect();
        let child = Command::new("perf")
            .args(["record", "-F", "499", "-o"])
            .arg(file)
            .args(["-p", &pids.join(",")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("perf: {e}"))?;
        // perf attaches to each process before it samples.
        std::thread::sleep(Duration::from_millis(500));
        Ok(child)
    }

    fn stop(&mut self) {
        for p in &mut self.procs {
            let _ = p.child.kill();
        }
        for p in &mut self.procs {
            let _ = p.child.wait();
        }
    }
}

/// A reading taken during the throughput phase: when, each daemon's usage
/// (as [`Pool::usage`]), and how many jobs were left in the queue.
struct Mark(Instant, Vec<(&'static str, Duration, u64)>, u64);

/// The part of the throughput phase between two [`Mark`]s.
struct Window {
    /// CPU per kind of daemon, as [`cpu_by_kind`].
    cpu: Vec<(&'static str, usize, Duration)>,
    /// Jobs done.
    jobs: u64,
    secs: f64,
}

impl Window {
    /// From `from` to `to`, when jobs were done between them.
    fn between(from: &Mark, to: &Mark) -> Option<Window> {
        (from.2 > to.2).then(|| Window {
            cpu: cpu_by_kind(&from.1, &to.1),
            jobs: from.2 - to.2,
            secs: to.0.duration_since(from.0).as_secs_f64(),
        })
    }

    fn rate(&self) -> f64 {
        self.jobs as f64 / self.secs
    }

    /// The CPU daemons of `kind` spent a job, in microseconds.
    fn cpu_per_job_us(&self, kind: &str) -> Option<f64> {
        let (_, _, c) = self.cpu.iter().find(|(k, _, _)| *k == kind)?;
        Some(c.as_secs_f64() / self.jobs as f64 * 1e6)
    }
}

/// `(jobs, idle, running)` from `Total for query: 3 jobs; 0 completed,
/// 0 removed, 1 idle, 2 running, 0 held, 0 suspended`.
fn parse_totals(line: &str) -> Option<(u64, u64, u64)> {
    let (_, rest) = line.split_once(": ")?;
    let mut jobs = None;
    let mut idle = None;
    let mut running = None;
    for part in rest.split([';', ',']) {
        let mut w = part.split_whitespace();
        let n: u64 = w.next()?.parse().ok()?;
        match w.next()? {
            "jobs" => jobs = Some(n),
            "idle" => idle = Some(n),
            "running" => running = Some(n),
            _ => {}
        }
    }
    Some((jobs?, idle?, running?))
}

/// utime + stime, in clock ticks, from `/proc/PID/stat`.
fn cpu_ticks(stat: &str) -> Option<u64> {
    // The command name may hold spaces and parentheses: fields follow the
    // last `)`; utime and stime are the 12th and 13th after it.
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// VmRSS in KiB from `/proc/PID/status`.
fn rss_kib(status: &str) -> Option<u64> {
    let l = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    l.split_whitespace().nth(1)?.parse().ok()
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`; 100 if unknown).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU per kind of daemon between two readings: (kind, processes, CPU).
fn cpu_by_kind(
    before: &[(&'static str, Duration, u64)],
    after: &[(&'static str, Duration, u64)],
) -> Vec<(&'static str, usize, Duration)> {
    let mut out: Vec<(&'static str, usize, Duration)> = Vec::new();
    for ((kind, b, _), (_, a, _)) in before.iter().zip(after) {
        let d = a.saturating_sub(*b);
        match out.iter_mut().find(|(k, _, _)| k == kind) {
            Some(e) => {
                e.1 += 1;
                e.2 += d;
            }
            None => out.push((kind, 1, d)),
        }
    }
    out
}

fn measure(pool: &mut Pool, o: &Options) -> Result<String, String> {
    let dir = pool.dir.clone();
    std::fs::create_dir_all(dir.join("jobs/out")).map_err(|e| e.to_string())?;
    // Keys and trust: one key per host, as a real site would have.
    let mut who: Vec<(String, &str)> = vec![
        ("schedd".into(), "schedd"),
        ("negotiator".into(), "negotiator"),
        ("alice".into(), "user"),
    ];
    who.extend((1..=o.hosts).map(|i| (format!("host{i}"), "host")));
    let mut trust = String::new();
    for (name, role) in &who {
        let out = Command::new(&pool.andes)
            .args(["keygen", name])
            .env("ANDES_CONFIG_DIR", &dir)
            .output()
            .map_err(|e| format!("andes keygen: {e}"))?;
        if !out.status.success() {
            return Err(format!("andes keygen {name}: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let public = std::fs::read_to_string(dir.join("keys").join(format!("{name}.pub")))
            .map_err(|e| format!("{name}.pub: {e}"))?;
        trust.push_str(&format!("{role} {name} {}\n", public.trim()));
    }
    std::fs::write(dir.join("trust"), trust).map_err(|e| e.to_string())?;
    let account = std::env::var("USER").unwrap_or_else(|_| "root".into());
    let mut common = format!("{COMMON}NUM_CPUS = {}\nUSER_ACCOUNT_MAP = * = {account}\n", o.slots);

    let started = Instant::now();
    let cm = pool.spawn(
        "central manager",
        "cm",
        &["central-manager"],
        &common,
        &dir.join(".collector_address"),
    )?;
    common.push_str(&format!("COLLECTOR_HOST = {cm}\n"));
    pool.common = Some(common.clone());
    pool.spawn("schedd", "schedd", &["schedd"], &common, &dir.join("spool/.schedd_address"))?;
    for i in 1..=o.hosts {
        let f = dir.join(format!(".host{i}_address"));
        let config = format!(
            "{common}HOST_KEY_NAME = host{i}\nEXECUTE = $(LOCAL_DIR)/execute{i}\n\
             HOST_ADDRESS_FILE = {}\nMODULE_CACHE = $(LOCAL_DIR)/cache\nSTARTD_NAME = host{i}\n",
            f.display()
        );
        pool.spawn("host", &format!("host{i}"), &["host"], &config, &f)?;
    }
    let slots = o.hosts * o.slots;
    let up = pool.until("every slot in the collector", |p| Ok(p.slots()?.0 >= slots))?;
    let all_up = started.elapsed();
    eprintln!("scale: {} hosts of {} slots up in {:.1} s", o.hosts, o.slots, all_up.as_secs_f64());
    let _ = up;

    let wasm = crate::wasm_dir();
    for s in ["sleeper", "hello"] {
        let to = dir.join("jobs").join(format!("{s}.wasm"));
        std::fs::copy(wasm.join(format!("{s}.wasm")), &to).map_err(|e| format!("{s}.wasm: {e}"))?;
    }

    // 0. One job of each module, compiled once into the shared cache.
    std::fs::create_dir_all(dir.join("jobs/prime")).map_err(|e| e.to_string())?;
    let prime = "executable = hello.wasm\noutput = prime/hello.out\nqueue\n\
                 executable = sleeper.wasm\noutput = prime/sleeper.out\nqueue\n";
    std::fs::write(dir.join("jobs/prime.sub"), prime).map_err(|e| e.to_string())?;
    pool.andes(&["submit", "prime.sub"])?;
    pool.until("the module cache primed", |p| {
        let (jobs, _, running) = p.totals()?;
        Ok(jobs == 1 && running == 1)
    })?;
    pool.andes(&["rm", "alice"])?;
    pool.until("the primed slots Unclaimed", |p| Ok(p.totals()?.0 == 0 && p.slots()?.1 == 0))?;

    // 1. Fill every slot.
    std::fs::write(
        dir.join("jobs/fill.sub"),
        format!("executable = sleeper.wasm\nrequest_memory = 16\nqueue {slots}\n"),
    )
    .map_err(|e| e.to_string())?;
    let t = Instant::now();
    pool.andes(&["submit", "fill.sub"])?;
    let filled = pool.until("every slot running a job", |p| Ok(p.totals()?.2 >= slots as u64))?;
    let _ = t;
    eprintln!("scale: every slot busy {:.1} s after the submit", filled.as_secs_f64());
    pool.andes(&["rm", "alice"])?;
    let freed = pool
        .until("every slot Unclaimed after rm", |p| Ok(p.totals()?.0 == 0 && p.slots()?.1 == 0))?;
    eprintln!("scale: every slot Unclaimed {:.1} s after the rm", freed.as_secs_f64());

    // 2. Every host compiles the module.
    let short = |name: &str, n: usize| {
        format!(
            "executable = hello.wasm\narguments = $(Process)\noutput = {name}/$(Process).out\n\
             request_memory = 16\nqueue {n}\n"
        )
    };
    std::fs::create_dir_all(dir.join("jobs/warm")).map_err(|e| e.to_string())?;
    // Four a slot: a claim's second activation is a batch, whose jobs run
    // metered (compiled apart from the unmetered code the prime cached).
    let warm_jobs = slots * 4;
    std::fs::write(dir.join("jobs/warm.sub"), short("warm", warm_jobs))
        .map_err(|e| e.to_string())?;
    pool.andes(&["submit", "warm.sub"])?;
    let warm = pool.until("the warm-up jobs done", |p| Ok(p.totals()?.0 == 0))?;
    eprintln!("scale: {warm_jobs} warm-up jobs done in {:.1} s", warm.as_secs_f64());
    // Their claims released: the pool is idle.
    pool.until("the warm-up claims released", |p| Ok(p.slots()?.1 == 0))?;

    // 3. Idle, then short jobs.
    let idle_before = pool.usage();
    let idle_t = Instant::now();
    std::thread::sleep(IDLE_WATCH);
    let idle_after = pool.usage();
    let idle_secs = idle_t.elapsed().as_secs_f64();
    let idle = cpu_by_kind(&idle_before, &idle_after);

    std::fs::write(dir.join("jobs/short.sub"), short("out", o.jobs)).map_err(|e| e.to_string())?;
    let perf = match &o.perf {
        Some(f) => Some(pool.perf(f)?),
        None => None,
    };
    let before = pool.usage();
    let t = Instant::now();
    pool.andes(&["submit", "short.sub"])?;
    let submitted = t.elapsed();
    // Once every slot is claimed, the jobs left run on claims already made:
    // what each daemon spends from then on is its cost a job on reused
    // claims (the collector is asked only until then, so its answers are
    // not counted in that part).
    let mut claimed = None;
    pool.until("every slot claimed, or the short jobs done", |p| {
        if p.slots()?.1 >= slots {
            let at = Instant::now();
            let usage = p.usage();
            claimed = Some(Mark(at, usage, p.totals()?.0));
            return Ok(true);
        }
        Ok(p.totals()?.0 == 0)
    })?;
    // Until the queue's tail (3 jobs a slot left), no claim is made or
    // released: the steady part of the run, on reused claims only.
    let mut tail = None;
    pool.until("every short job done", |p| {
        let left = p.totals()?.0;
        if tail.is_none() && claimed.is_some() && left <= 3 * slots as u64 {
            tail = Some(Mark(Instant::now(), p.usage(), left));
        }
        Ok(left == 0)
    })?;
    let took = t.elapsed();
    let end = Mark(Instant::now(), pool.usage(), 0);
    let after = &end.1;
    if let Some(mut p) = perf {
        // SIGINT: perf writes its file and exits.
        let _ = Command::new("kill").args(["-INT", &p.id().to_string()]).status();
        let _ = p.wait();
    }
    let busy = cpu_by_kind(&before, after);
    let done = std::fs::read_dir(dir.join("jobs/out")).map(|d| d.count()).unwrap_or(0);
    if done != o.jobs {
        return Err(format!("{done} of {} outputs came back", o.jobs));
    }

    let rate = o.jobs as f64 / took.as_secs_f64();
    let mut r = String::new();
    r.push_str(&format!(
        "pool: {} hosts x {} slots = {slots} slots ({} build), {} short jobs\n",
        o.hosts,
        o.slots,
        if o.release { "release" } else { "debug" },
        o.jobs
    ));
    r.push_str(&format!(
        "all slots in the collector: {:.1} s after the first daemon started\n",
        all_up.as_secs_f64()
    ));
    r.push_str(&format!("every slot busy: {:.1} s after `queue {slots}`\n", filled.as_secs_f64()));
    r.push_str(&format!(
        "every slot Unclaimed: {:.1} s after `rm` (a killed job's slot is in Owner until \
         the startd evaluates START again)\n",
        freed.as_secs_f64()
    ));
    r.push_str(&format!(
        "short jobs: {:.0} jobs/s ({} in {:.2} s, submit to empty queue)\n",
        rate,
        o.jobs,
        took.as_secs_f64()
    ));
    r.push_str(&format!(
        "`andes submit` returned {:.2} s after it started; every slot claimed at {}\n",
        submitted.as_secs_f64(),
        claimed.as_ref().map_or("-".to_string(), |c| format!(
            "{:.2} s, {} jobs done",
            c.0.duration_since(t).as_secs_f64(),
            (o.jobs as u64).saturating_sub(c.2)
        ))
    ));
    let reused = claimed.as_ref().and_then(|c| Window::between(c, &end));
    // From every slot claimed to the queue's tail.
    let steady = claimed.as_ref().zip(tail.as_ref()).and_then(|(c, t)| Window::between(c, t));
    match &steady {
        Some(w) => r.push_str(&format!(
            "steady, on reused claims: {:.0} jobs/s ({} jobs in {:.2} s, from every slot \
             claimed until 3 jobs a slot are left: no claim made or released)\n",
            w.rate(),
            w.jobs,
            w.secs
        )),
        None => r.push_str("steady, on reused claims: not measured (too few jobs)\n"),
    }
    match &reused {
        Some(w) => r.push_str(&format!(
            "on claims made: {:.0} jobs/s ({} jobs in {:.2} s, from every slot claimed to \
             empty queue)\n",
            w.rate(),
            w.jobs,
            w.secs
        )),
        None => r.push_str("on claims made: not measured (the jobs ran out first)\n"),
    }
    r.push_str("daemon            procs  CPU/job (us)  idle CPU/s (ms)  net CPU/job (us)  RSS max (MiB)  RSS sum (MiB)  on claims made (us)  steady (us)\n");
    for (kind, n, cpu) in &busy {
        let idle_rate = idle
            .iter()
            .find(|(k, _, _)| k == kind)
            .map_or(0.0, |(_, _, c)| c.as_secs_f64() / idle_secs);
        let per_job = cpu.as_secs_f64() / o.jobs as f64 * 1e6;
        let net =
            (cpu.as_secs_f64() - idle_rate * took.as_secs_f64()).max(0.0) / o.jobs as f64 * 1e6;
        let rss: Vec<u64> =
            after.iter().filter(|(k, _, _)| k == kind).map(|(_, _, r)| *r).collect();
        let max = rss.iter().copied().max().unwrap_or(0) as f64 / 1024.0;
        let sum = rss.iter().sum::<u64>() as f64 / 1024.0;
        let column = |w: &Option<Window>| {
            w.as_ref()
                .and_then(|w| w.cpu_per_job_us(kind))
                .map_or("-".into(), |us| format!("{us:.0}"))
        };
        let (on_claims, in_steady) = (column(&reused), column(&steady));
        r.push_str(&format!(
            "{kind:<17} {n:>5}  {per_job:>12.0}  {:>15.1}  {net:>16.0}  {max:>13.1}  {sum:>13.1}  \
             {on_claims:>19}  {in_steady:>11}\n",
            idle_rate * 1e3
        ));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_stat_and_status_lines_parse() {
        let l = "Total for query: 12 jobs; 0 completed, 1 removed, 3 idle, 8 running, 0 held, 0 suspended";
        assert_eq!(parse_totals(l), Some((12, 3, 8)));
        assert_eq!(parse_totals("Total for query: x"), None);
        let stat = "1234 (andes (x) y) S 1 2 3 4 5 6 7 8 9 10 250 70 0 0";
        assert_eq!(cpu_ticks(stat), Some(320));
        assert_eq!(rss_kib("Name:\tandes\nVmRSS:\t  20480 kB\n"), Some(20480));
    }

    #[test]
    fn options_default_and_refuse() {
        let o = options(&[]).unwrap();
        assert_eq!((o.hosts, o.slots, o.jobs), (20, 8, 2000));
        let a: Vec<String> =
            ["--hosts", "200", "--slots", "5"].iter().map(|s| s.to_string()).collect();
        assert_eq!(options(&a).unwrap().jobs, 10_000);
        assert!(options(&["--hosts".to_string(), "0".to_string()]).is_err());
        assert!(options(&["--bogus".to_string()]).is_err());
    }
}
