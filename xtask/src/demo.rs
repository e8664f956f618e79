//! `cargo xtask demo`: a personal pool running a mixed batch of sample jobs.
//!
//! It builds the samples and the `andes` binary, starts `andes pool up` in a
//! fresh temporary directory, submits some 300 `primes` jobs, one `vacate` job
//! (which it vacates once while it runs), one `membomb` job limited to 64 MB
//! (which goes on hold), a Go program (`fannkuch`) that writes its results to
//! files, a C program (`textstat`) compiled with `andes compile`, which it
//! vacates mid-run so that it resumes from its snapshot, and a C and a Go job
//! that use the guest SDKs (`coopsum`, `coopgo`), which it vacates so that
//! they save their state and resume from it; it shows their
//! progress, checks every result (the C and Go jobs' against their native
//! builds'), prints `andes q` and `andes history`, and stops the pool. `--keep` keeps the
//! directory. On any failure it names the step and the pool's log, stops the
//! pool and exits non-zero.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How many `primes` jobs the demo submits.
const PRIMES_JOBS: u64 = 300;
/// The `primes` job `p` counts the primes below `(p + 1) * PRIMES_STEP`.
const PRIMES_STEP: u64 = 10_000;
/// Terms the `vacate` job sums: a few seconds of work.
const VACATE_TERMS: u64 = 1_000_000_000;
/// How long the vacate job runs before the demo vacates it.
const VACATE_AFTER: Duration = Duration::from_millis(700);
/// The words of the compiled C job's input, and how many times it counts
/// them: some seconds of work.
const TEXTSTAT_WORDS: usize = 200_000;
const TEXTSTAT_ROUNDS: u32 = 300;
/// How long the compiled C job runs before the demo vacates it.
const COMPILED_VACATE_AFTER: Duration = Duration::from_millis(1500);
/// Terms the C and Go jobs that use the guest SDKs sum (`coopsum`,
/// `coopgo`): a few seconds of work each, saved through the SDK when
/// vacated.
const SDK_TERMS: u64 = 1_000_000_000;
/// The Go job's fannkuch-redux N.
const FANNKUCH_N: u32 = 10;
/// How often the queue is polled.
const POLL: Duration = Duration::from_millis(250);
/// The longest the pool may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest the batch may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);
/// The longest the pool may take to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// HTCondor's JobStatus codes the demo looks at.
const IDLE: i64 = 1;
const RUNNING: i64 = 2;
const HELD: i64 = 5;
const COMPLETED: i64 = 4;

/// A failed step: what the demo was doing, and why it failed.
struct Failure {
    step: &'static str,
    message: String,
}

type Result<T> = std::result::Result<T, Failure>;

/// Attaches the step to an error.
trait At<T> {
    fn at(self, step: &'static str) -> Result<T>;
}

impl<T, E: std::fmt::Display> At<T> for std::result::Result<T, E> {
    fn at(self, step: &'static str) -> Result<T> {
        self.map_err(|e| Failure { step, message: e.to_string() })
    }
}

fn fail<T>(step: &'static str, message: impl Into<String>) -> Result<T> {
    Err(Failure { step, message: message.into() })
}

/// Runs `cargo xtask demo [--keep]`; true when every step succeeded.
pub fn run(args: &[String]) -> bool {
    let mut keep = false;
    for a in args {
        match a.as_str() {
            "--keep" => keep = true,
            other => {
                eprintln!("usage: cargo xtask demo [--keep]   (unknown argument `{other}`)");
                return false;
            }
        }
    }
    if !crate::samples() {
        eprintln!("demo: failed at step `build the samples` (see cargo's messages above)");
        return false;
    }
    if !crate::cargo(&["build", "--bin", "andes"]) {
        eprintln!("demo: failed at step `build andes` (see cargo's messages above)");
        return false;
    }
    let target = crate::target_dir();
    let andes = target.join("debug").join(format!("andes{}", std::env::consts::EXE_SUFFIX));
    let wasm = crate::wasm_dir();
    let dir = match tempfile::Builder::new().prefix("andes-demo-").tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("demo: failed at step `make a temporary directory`: {e}");
            return false;
        }
    };
    let started = Instant::now();
    let mut pool = Pool { andes, dir: dir.path().to_path_buf(), config: None, child: None };
    let outcome = demo(&mut pool, &wasm, started);
    let stopped = pool.stop();
    let ok = match (outcome, stopped) {
        (Ok(()), Ok(())) => true,
        (Err(f), _) | (Ok(()), Err(f)) => {
            eprintln!("\ndemo: failed at step `{}`: {}", f.step, f.message);
            eprintln!("demo: the pool's log: {}", pool.dir.join("pool.log").display());
            false
        }
    };
    if ok && !keep {
        if let Err(e) = dir.close() {
            eprintln!("demo: could not remove {}: {e}", pool.dir.display());
        }
    } else {
        // Kept for --keep, and on failure so that pool.log can be read.
        let path = dir.keep();
        println!("demo: the pool's directory is kept: {}", path.display());
    }
    if ok {
        println!("demo: done in {:.1} s", started.elapsed().as_secs_f64());
    }
    ok
}

/// Where `samples()` puts the native builds of the C and Go guests.
fn native_dir() -> PathBuf {
    crate::root().join("samples").join("target").join("native")
}

/// The personal pool: `andes pool up` and the commands run against it.
struct Pool {
    andes: PathBuf,
    dir: PathBuf,
    /// `ANDES_CONFIG`, once the pool is up.
    config: Option<PathBuf>,
    child: Option<Child>,
}

impl Pool {
    fn jobs(&self) -> PathBuf {
        self.dir.join("jobs")
    }

    /// Starts `andes pool up` and waits for `pool ready`.
    fn up(&mut self, slots: usize) -> Result<()> {
        const STEP: &str = "start the pool";
        let log = std::fs::File::create(self.dir.join("pool.log")).at(STEP)?;
        let mut child = Command::new(&self.andes)
            .args(["pool", "up", "--dir"])
            .arg(&self.dir)
            .args(["--slots", &slots.to_string()])
            .env("ANDES_CONFIG_DIR", &self.dir)
            .env_remove("ANDES_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{}: {e}", self.andes.display()))
            .at(STEP)?;
        let stdout = child.stdout.take();
        self.child = Some(child);
        let Some(stdout) = stdout else { return fail(STEP, "no standard output") };
        // A thread reads the pool's standard output to its end, so that the
        // pool never blocks on it; the lines come here.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(c) = line.strip_prefix("export ANDES_CONFIG=") {
                        self.config = Some(PathBuf::from(c.trim()));
                    } else if line.trim() == "pool ready" {
                        break;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return fail(STEP, format!("not ready after {}s", START_TIMEOUT.as_secs()));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.child.as_mut().and_then(|c| c.wait().ok());
                    let how = status.map_or("ended".to_string(), |s| format!("exited ({s})"));
                    return fail(STEP, format!("`andes pool up` {how} before it was ready"));
                }
            }
        }
        if self.config.is_none() {
            return fail(STEP, "`andes pool up` did not say where its configuration is");
        }
        Ok(())
    }

    /// Runs `andes ARGS` against the pool, in the jobs directory; its stdout.
    fn andes(&self, step: &'static str, args: &[&str]) -> Result<String> {
        let mut cmd = Command::new(&self.andes);
        cmd.args(args).current_dir(self.jobs()).env("ANDES_CONFIG_DIR", &self.dir);
        if let Some(c) = &self.config {
            cmd.env("ANDES_CONFIG", c);
        }
        let out = cmd.stdin(Stdio::null()).output().at(step)?;
        if !out.status.success() {
            return fail(
                step,
                format!(
                    "`andes {}` failed ({}): {}",
                    args.join(" "),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `andes pool down`, then waits for the pool's process (killing it if it
    /// does not stop in time). Does nothing if the pool is not running.
    fn stop(&mut self) -> Result<()> {
        const STEP: &str = "stop the pool";
        let Some(mut child) = self.child.take() else { return Ok(()) };
        if let Ok(Some(status)) = child.try_wait() {
            return fail(STEP, format!("the pool had already exited ({status})"));
        }
        let down = if self.config.is_some() {
            self.andes(STEP, &["pool", "down"]).map(|_| ())
        } else {
            fail(STEP, "the pool never said it was ready")
        };
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return down,
                Ok(Some(status)) => {
                    return down.and(fail(STEP, format!("`andes pool up` exited with {status}")));
                }
                Ok(None) if Instant::now() < deadline && down.is_ok() => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return down.and(fail(
                        STEP,
                        format!("the pool did not stop within {}s: killed", STOP_TIMEOUT.as_secs()),
                    ));
                }
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One job as `andes q -af ClusterId ProcId JobStatus RemoteHost` shows it.
struct Row {
    cluster: i64,
    proc: i64,
    status: i64,
    remote_host: String,
}

fn rows(text: &str) -> Vec<Row> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some(Row {
                cluster: w.next()?.parse().ok()?,
                proc: w.next()?.parse().ok()?,
                status: w.next()?.parse().ok()?,
                remote_host: w.next().unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// The cluster `andes submit` reports: `N job(s) submitted to cluster C.`
fn submitted_cluster(out: &str) -> Option<i64> {
    let rest = out.split("submitted to cluster").nth(1)?;
    rest.trim().trim_end_matches('.').parse().ok()
}

/// The clusters of the batch.
struct Batch {
    primes: i64,
    vacate: i64,
    membomb: i64,
    fannkuch: i64,
    textstat: i64,
    coopsum: i64,
    coopgo: i64,
    total: u64,
}

/// Text for the C job: `words` words from a seeded vocabulary.
fn text(words: usize) -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let vocab: Vec<String> = (0..4000)
        .map(|_| {
            (0..1 + next(9)).map(|_| b"etaoinshrdlucmfwyp"[next(18) as usize] as char).collect()
        })
        .collect();
    let mut out = String::new();
    for i in 0..words {
        out.push_str(&vocab[next(vocab.len() as u64) as usize]);
        out.push(if i % 12 == 11 { '\n' } else { ' ' });
    }
    out
}

/// Writes the submit files beside copies of the modules and submits them.
fn submit(pool: &Pool, wasm: &Path) -> Result<Batch> {
    const STEP: &str = "submit the jobs";
    let jobs = pool.jobs();
    std::fs::create_dir_all(jobs.join("out")).at(STEP)?;
    for m in ["primes", "vacate", "membomb", "coopsum", "coopgo"] {
        let from = wasm.join(format!("{m}.wasm"));
        std::fs::copy(&from, jobs.join(format!("{m}.wasm")))
            .map_err(|e| format!("copying {}: {e}", from.display()))
            .at(STEP)?;
    }
    let limits: String = (0..PRIMES_JOBS).map(|p| format!("{}\n", (p + 1) * PRIMES_STEP)).collect();
    std::fs::write(jobs.join("limits.txt"), limits).at(STEP)?;
    // The Go job writes into a directory of its own; the C job, compiled
    // for transparent checkpoints as a user would, into another.
    for d in ["go", "c"] {
        std::fs::create_dir_all(jobs.join(d)).at(STEP)?;
    }
    let from = wasm.join("fannkuch.wasm");
    std::fs::copy(&from, jobs.join("go/fannkuch.wasm"))
        .map_err(|e| format!("copying {}: {e}", from.display()))
        .at(STEP)?;
    std::fs::write(jobs.join("c/in.txt"), text(TEXTSTAT_WORDS)).at(STEP)?;
    let module = wasm.join("textstat.wasm");
    let out = pool.andes(
        "compile the C job",
        &["compile", &module.to_string_lossy(), "-o", "c/textstat_c.wasm"],
    )?;
    let growth = out.lines().find_map(|l| l.strip_prefix("growth")).unwrap_or("").trim();
    println!(
        "compiled textstat.wasm (C) with andes compile: c/textstat_c.wasm ({growth} its size)"
    );
    let files = [
        (
            "vacate.sub",
            format!(
                "# Sums 1/k^2; stops cleanly (exit 85, partial.txt) when vacated.\n\
                 executable = vacate.wasm\narguments = {VACATE_TERMS}\ncheckpoint_exit_code = 85\n\
                 output = out/vacate.out\nerror = out/vacate.err\nlog = vacate.log\nqueue\n"
            ),
        ),
        (
            "membomb.sub",
            "# Allocates until refused: held for exceeding request_memory.\n\
             executable = membomb.wasm\nrequest_memory = 64\n\
             output = out/membomb.out\nerror = out/membomb.err\nlog = membomb.log\nqueue\n"
                .to_string(),
        ),
        (
            "fannkuch.sub",
            format!(
                "# Go (GOOS=wasip1): fannkuch-redux, its results written to files.\n\
                 executable = {}\narguments = {FANNKUCH_N}\ninitialdir = go\n\
                 output = fannkuch.out\nerror = fannkuch.err\nlog = events.log\nqueue\n",
                jobs.join("go/fannkuch.wasm").display()
            ),
        ),
        (
            "textstat.sub",
            format!(
                "# C (zig cc), compiled by andes compile: checkpointed by snapshot when vacated.\n\
                 executable = {}\narguments = in.txt out.txt {TEXTSTAT_ROUNDS}\n\
                 initialdir = c\ntransfer_input_files = in.txt\n\
                 output = textstat.out\nerror = textstat.err\nlog = events.log\nqueue\n",
                jobs.join("c/textstat_c.wasm").display()
            ),
        ),
        (
            "coopsum.sub",
            format!(
                "# C with the guest SDK (andes.h): saves its state and exits 85 when vacated,\n\
                 # resumes from it, reports its Progress and logs where it resumed.\n\
                 executable = coopsum.wasm\narguments = {SDK_TERMS}\n\
                 +WasmCheckpoint = \"cooperative\"\ncheckpoint_exit_code = 85\n\
                 output = out/coopsum.out\nerror = out/coopsum.err\nlog = coopsum.log\nqueue\n"
            ),
        ),
        (
            "coopgo.sub",
            format!(
                "# Go with the guest SDK (andes.dev/guest/andes): the same, in Go.\n\
                 executable = coopgo.wasm\narguments = {SDK_TERMS}\n\
                 +WasmCheckpoint = \"cooperative\"\ncheckpoint_exit_code = 85\n\
                 output = out/coopgo.out\nerror = out/coopgo.err\nlog = coopgo.log\nqueue\n"
            ),
        ),
        (
            "primes.sub",
            "# Counts the primes below each limit in limits.txt.\n\
             executable = primes.wasm\narguments = $(limit)\n\
             output = out/primes.$(Process).out\nerror = out/primes.$(Process).err\n\
             log = primes.log\nqueue limit from limits.txt\n"
                .to_string(),
        ),
    ];
    let mut clusters = Vec::new();
    for (name, text) in files {
        std::fs::write(jobs.join(name), text).at(STEP)?;
        let out = pool.andes(STEP, &["submit", name])?;
        let Some(c) = submitted_cluster(&out) else {
            return fail(STEP, format!("`andes submit {name}` said: {}", out.trim()));
        };
        println!("submitted {name:<12} {}", out.trim());
        clusters.push(c);
    }
    Ok(Batch {
        vacate: clusters[0],
        membomb: clusters[1],
        fannkuch: clusters[2],
        textstat: clusters[3],
        coopsum: clusters[4],
        coopgo: clusters[5],
        primes: clusters[6],
        total: PRIMES_JOBS + 6,
    })
}

/// Where the vacate job stands.
enum Vacate {
    /// Not running yet.
    Waiting,
    /// Running on this slot since then.
    Running(String, Instant),
    /// Vacated from this slot.
    Vacated(String),
}

/// A job the demo vacates once, after it has run for a while.
struct ToVacate {
    cluster: i64,
    after: Duration,
    what: &'static str,
    state: Vacate,
}

/// Polls the queue until every job is completed or held, vacating the vacate
/// job and the compiled C job once each on the way; returns the slots they
/// were vacated from, in that order.
fn watch(pool: &Pool, batch: &Batch) -> Result<Vec<String>> {
    const STEP: &str = "run the jobs";
    let bar = ProgressBar::new(batch.total);
    let style = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:30.cyan/blue} {pos}/{len} completed  {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    // Without a terminal the bar stays silent: a plain line every few seconds.
    let plain = !std::io::stderr().is_terminal();
    let mut last_line = Instant::now();
    let start = Instant::now();
    let mut targets = [
        ToVacate {
            cluster: batch.vacate,
            after: VACATE_AFTER,
            what: "the vacate job",
            state: Vacate::Waiting,
        },
        ToVacate {
            cluster: batch.textstat,
            after: COMPILED_VACATE_AFTER,
            what: "the compiled C job",
            state: Vacate::Waiting,
        },
        ToVacate {
            cluster: batch.coopsum,
            after: VACATE_AFTER,
            what: "the C job using the guest SDK",
            state: Vacate::Waiting,
        },
        ToVacate {
            cluster: batch.coopgo,
            after: VACATE_AFTER,
            what: "the Go job using the guest SDK",
            state: Vacate::Waiting,
        },
    ];
    loop {
        let q =
            pool.andes(STEP, &["q", "-af", "ClusterId", "ProcId", "JobStatus", "RemoteHost"])?;
        let rows = rows(&q);
        let count = |s: i64| rows.iter().filter(|r| r.status == s).count();
        let (running, idle, held) = (count(RUNNING), count(IDLE), count(HELD));
        let completed = batch.total.saturating_sub(rows.len() as u64);
        let msg = format!("running {running}, idle {idle}, held {held}");
        bar.set_position(completed);
        bar.set_message(msg.clone());
        if plain && last_line.elapsed() >= Duration::from_secs(5) {
            println!("  {completed}/{} completed, {msg}", batch.total);
            last_line = Instant::now();
        }
        for t in &mut targets {
            let v = rows.iter().find(|r| r.cluster == t.cluster && r.proc == 0);
            match (&t.state, v) {
                (Vacate::Waiting, Some(r))
                    if r.status == RUNNING && r.remote_host.contains('@') =>
                {
                    t.state = Vacate::Running(r.remote_host.clone(), Instant::now());
                }
                (Vacate::Running(slot, since), Some(r))
                    if r.status == RUNNING && since.elapsed() >= t.after =>
                {
                    let slot = slot.clone();
                    pool.andes("vacate a running job", &["vacate", &slot])?;
                    let line = format!(
                        "vacated {slot}, where {} (job {}.0) was running",
                        t.what, t.cluster
                    );
                    if plain {
                        println!("  {line}");
                    } else {
                        bar.println(line);
                    }
                    t.state = Vacate::Vacated(slot);
                }
                (Vacate::Waiting | Vacate::Running(..), None) => {
                    bar.abandon();
                    return fail(
                        "vacate a running job",
                        format!("{} finished before the demo could vacate it", t.what),
                    );
                }
                _ => {}
            }
        }
        let vacated = targets.iter().all(|t| matches!(t.state, Vacate::Vacated(_)));
        if rows.iter().all(|r| r.status == HELD) && vacated {
            bar.finish_and_clear();
            println!("  {completed}/{} completed, {msg}", batch.total);
            return Ok(targets
                .into_iter()
                .map(|t| match t.state {
                    Vacate::Vacated(slot) => slot,
                    _ => String::new(),
                })
                .collect());
        }
        if start.elapsed() > RUN_TIMEOUT {
            bar.abandon();
            return fail(
                STEP,
                format!(
                    "not every job completed or held after {}s ({completed} completed, {msg})",
                    RUN_TIMEOUT.as_secs()
                ),
            );
        }
        std::thread::sleep(POLL);
    }
}

/// The number of primes below each of `limits` (sorted), by a plain sieve.
fn prime_counts(limits: &[u64]) -> Vec<u64> {
    let max = limits.last().copied().unwrap_or(0) as usize;
    let mut composite = vec![false; max.max(2)];
    let mut counts = Vec::with_capacity(limits.len());
    let mut next = limits.iter().peekable();
    let mut count = 0;
    for n in 0..=max {
        while next.peek().is_some_and(|&&l| l as usize == n) {
            counts.push(count);
            next.next();
        }
        if n >= 2 && n < max && !composite[n] {
            count += 1;
            let mut m = n * n;
            while m < max {
                composite[m] = true;
                m += n;
            }
        }
    }
    counts
}

/// Checks every primes job's output against an independent count.
fn check_primes(pool: &Pool) -> Result<String> {
    const STEP: &str = "check the primes jobs";
    let limits: Vec<u64> = (0..PRIMES_JOBS).map(|p| (p + 1) * PRIMES_STEP).collect();
    let expected = prime_counts(&limits);
    let mut largest = (0, 0);
    for (p, (&n, &count)) in limits.iter().zip(&expected).enumerate() {
        let path = pool.jobs().join(format!("out/primes.{p}.out"));
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {e}", path.display()))
            .at(STEP)?;
        let want = format!("primes below {n}: {count}");
        if text.trim() != want {
            return fail(STEP, format!("{}: `{}`, expected `{want}`", path.display(), text.trim()));
        }
        largest = largest.max((count, n));
    }
    Ok(format!(
        "primes:  {PRIMES_JOBS} jobs completed with exit code 0; every output present and equal to an independent \
         sieve's count; the largest: {} primes below {}",
        largest.0, largest.1
    ))
}

/// A history or queue row's attributes, by `-af` position.
fn fields(text: &str) -> Vec<Vec<String>> {
    text.lines().map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
}

/// Runs a native build of a guest in a fresh directory holding `inputs`;
/// the files it leaves there and its stdout (as `stdout`).
fn native_run(
    step: &'static str,
    name: &str,
    args: &[String],
    inputs: &[(&str, &Path)],
) -> Result<std::collections::BTreeMap<String, Vec<u8>>> {
    let dir = tempfile::Builder::new().prefix("andes-demo-native-").tempdir().at(step)?;
    for (name, from) in inputs {
        std::fs::copy(from, dir.path().join(name)).at(step)?;
    }
    let bin = native_dir().join(name);
    let out = Command::new(&bin)
        .args(args)
        .current_dir(dir.path())
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))
        .at(step)?;
    if !out.status.success() {
        return fail(step, format!("{} failed: {}", bin.display(), out.status));
    }
    let mut files = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir.path()).at(step)?.flatten() {
        files.insert(
            e.file_name().to_string_lossy().into_owned(),
            std::fs::read(e.path()).at(step)?,
        );
    }
    files.insert("stdout".into(), out.stdout);
    Ok(files)
}

/// Checks that each of `files` in `dir` (named as the native run has them;
/// `stdout` is the job's output file `out`) equals the native build's.
fn same_as_native(
    step: &'static str,
    dir: &Path,
    out: &str,
    native: &std::collections::BTreeMap<String, Vec<u8>>,
    files: &[&str],
) -> Result<()> {
    for f in files {
        let (path, want) = match *f {
            "stdout" => (dir.join(out), native.get("stdout")),
            f => (dir.join(f), native.get(f)),
        };
        let got = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display())).at(step)?;
        if Some(&got) != want {
            return fail(step, format!("{} differs from the native build's", path.display()));
        }
    }
    Ok(())
}

/// Checks the Go job: completed, and every file it wrote is the native build's.
fn check_go(pool: &Pool, batch: &Batch) -> Result<String> {
    const STEP: &str = "check the Go job";
    let h = fields(&pool.andes(
        STEP,
        &["history", "-constraint", &format!("ClusterId == {}", batch.fannkuch), "-af", "ExitCode"],
    )?);
    if h.first().and_then(|r| r.first()).map(String::as_str) != Some("0") {
        return fail(STEP, format!("the Go job did not exit with 0: {h:?}"));
    }
    let native = native_run(STEP, "fannkuch", &[FANNKUCH_N.to_string()], &[])?;
    let dir = pool.jobs().join("go");
    same_as_native(STEP, &dir, "fannkuch.out", &native, &["stdout", "result.txt", "fannkuch.log"])?;
    let result = std::fs::read_to_string(dir.join("result.txt")).unwrap_or_default();
    Ok(format!(
        "go:      job {}.0 (Go, GOOS=wasip1) completed; result.txt, fannkuch.log and its output \
         equal the native build's: {}",
        batch.fannkuch,
        result.lines().last().unwrap_or_default()
    ))
}

/// Checks the compiled C job: vacated once, resumed from its snapshot (not
/// restarted), and its output file is the native build's.
fn check_compiled_c(pool: &Pool, batch: &Batch, vacated_from: &str) -> Result<String> {
    const STEP: &str = "check the compiled C job";
    let h = fields(&pool.andes(
        STEP,
        &[
            "history",
            "-constraint",
            &format!("ClusterId == {}", batch.textstat),
            "-af",
            "ExitCode",
            "NumJobStarts",
            "NumCkpts",
            "CkptSize",
            "LastRemoteHost",
        ],
    )?);
    let Some([exit, starts, ckpts, size, host]) = h.first().map(Vec::as_slice) else {
        return fail(STEP, format!("the compiled C job is not in the history: {h:?}"));
    };
    if exit != "0" || starts != "2" || ckpts.parse::<i64>().unwrap_or(0) < 1 {
        return fail(
            STEP,
            format!(
                "expected exit code 0, 2 starts and a checkpoint; ExitCode {exit}, \
                 NumJobStarts {starts}, NumCkpts {ckpts}"
            ),
        );
    }
    let dir = pool.jobs().join("c");
    let log = std::fs::read_to_string(dir.join("events.log")).unwrap_or_default();
    if !log.contains("Job was checkpointed") {
        return fail(STEP, "its event log has no checkpoint event (was it restarted?)");
    }
    let args: Vec<String> =
        ["in.txt", "out.txt", &TEXTSTAT_ROUNDS.to_string()].iter().map(|s| s.to_string()).collect();
    let native = native_run(STEP, "textstat", &args, &[("in.txt", &dir.join("in.txt"))])?;
    same_as_native(STEP, &dir, "textstat.out", &native, &["stdout", "out.txt"])?;
    Ok(format!(
        "c:       job {}.0 (C, zig cc, compiled by andes compile) vacated from {vacated_from} \
         mid-run, checkpointed by snapshot (CkptSize {size} KiB), resumed on {host} from it and \
         completed; out.txt and its output equal the native build's",
        batch.textstat
    ))
}

/// Checks a job that uses a guest SDK (`name`: `coopsum` or `coopgo`):
/// vacated once, it saved its state through the SDK and resumed from it
/// (its log line, in its user log, says where), reported its Progress to 1,
/// and its output is the native build's.
fn check_sdk_job(
    pool: &Pool,
    cluster: i64,
    name: &str,
    language: &str,
    vacated_from: &str,
) -> Result<String> {
    const STEP: &str = "check the jobs using the guest SDKs";
    let h = fields(&pool.andes(
        STEP,
        &[
            "history",
            "-constraint",
            &format!("ClusterId == {cluster}"),
            "-af",
            "ExitCode",
            "NumJobStarts",
            "Progress",
            "LastRemoteHost",
        ],
    )?);
    let Some([exit, starts, progress, host]) = h.first().map(Vec::as_slice) else {
        return fail(STEP, format!("{name} is not in the history: {h:?}"));
    };
    if exit != "0" || starts != "2" || progress.parse::<f64>().ok() != Some(1.0) {
        return fail(
            STEP,
            format!(
                "{name}: expected exit code 0, 2 starts and Progress 1; ExitCode {exit},                  NumJobStarts {starts}, Progress {progress}"
            ),
        );
    }
    let log = std::fs::read_to_string(pool.jobs().join(format!("{name}.log"))).unwrap_or_default();
    let Some(resumed) = log.lines().find_map(|l| {
        let at = l.find("job log [Info]: resuming from a saved state")?;
        Some(l[at + "job log [Info]: ".len()..].to_string())
    }) else {
        return fail(STEP, format!("{name}: its user log has no line saying it resumed"));
    };
    let native = native_run(STEP, name, &[SDK_TERMS.to_string()], &[])?;
    let out = format!("out/{name}.out");
    same_as_native(STEP, &pool.jobs(), &out, &native, &["stdout"])?;
    Ok(format!(
        "{:<9}job {cluster}.0 ({language}) vacated from {vacated_from}, saved its state \
         through the SDK, resumed on {host} ({resumed}: a generic event in its user log), \
         Progress 1; its output equals the native build's",
        format!("{name}:")
    ))
}

fn demo(pool: &mut Pool, wasm: &Path, started: Instant) -> Result<()> {
    let slots = std::thread::available_parallelism().map_or(2, |n| n.get());
    println!("demo: starting a personal pool with {slots} slots in {}", pool.dir.display());
    pool.up(slots)?;
    println!("demo: pool ready after {:.1} s", started.elapsed().as_secs_f64());

    let batch = submit(pool, wasm)?;
    let run_start = Instant::now();
    let slots = watch(pool, &batch)?;
    let slot = &slots[0];
    println!(
        "demo: every job completed or held after {:.1} s\n",
        run_start.elapsed().as_secs_f64()
    );

    // The results.
    const PRIMES: &str = "check the primes jobs";
    let p = pool.andes(
        PRIMES,
        &["history", "-constraint", &format!("ClusterId == {}", batch.primes), "-af", "ExitCode"],
    )?;
    let exited_0 = p.lines().filter(|l| l.trim() == "0").count() as u64;
    if exited_0 != PRIMES_JOBS {
        return fail(PRIMES, format!("{exited_0} of {PRIMES_JOBS} primes jobs exited with 0"));
    }
    println!("{}", check_primes(pool)?);
    const HOLD: &str = "check the held job";
    let held = pool
        .andes(HOLD, &["q", &batch.membomb.to_string(), "-af", "HoldReasonCode", "HoldReason"])?;
    let Some((code, reason)) = held.trim().split_once(' ') else {
        return fail(HOLD, format!("the membomb job is not on hold: `{}`", held.trim()));
    };
    println!("membomb: job {}.0 held (HoldReasonCode {code}): {reason}", batch.membomb);
    const VAC: &str = "check the vacate job";
    let only = |c: i64| format!("ClusterId == {c}");
    let v = pool.andes(
        VAC,
        &[
            "history",
            "-constraint",
            &only(batch.vacate),
            "-af",
            "JobStatus",
            "NumJobStarts",
            "ExitCode",
        ],
    )?;
    let v = fields(&v);
    match v.first().map(Vec::as_slice) {
        Some([status, starts, exit]) if status == "4" && exit == "0" => {
            let result =
                std::fs::read_to_string(pool.jobs().join("out/vacate.out")).unwrap_or_default();
            let how = match result.lines().find(|l| l.starts_with("resuming at term")) {
                Some(l) => format!("resumed from its own checkpoint ({l})"),
                None => "ran again from the start".to_string(),
            };
            let sum = result.lines().last().unwrap_or_default();
            println!(
                "vacate:  job {}.0 vacated once (from {slot}), {how}, completed \
                 (NumJobStarts {starts}): {sum}",
                batch.vacate,
            );
        }
        _ => return fail(VAC, format!("the vacate job did not complete: {v:?}")),
    }

    println!("{}", check_go(pool, &batch)?);
    println!("{}", check_compiled_c(pool, &batch, &slots[1])?);
    println!("{}", check_sdk_job(pool, batch.coopsum, "coopsum", "C, andes.h", &slots[2])?);
    println!("{}", check_sdk_job(pool, batch.coopgo, "coopgo", "Go, andes.dev/guest", &slots[3])?);

    const SHOW: &str = "show the queue and history";
    print!("{}", pool.andes(SHOW, &["q"])?);
    let h = fields(&pool.andes(SHOW, &["history", "-af", "JobStatus", "RemoteWallClockTime"])?);
    let done = h.iter().filter(|r| r.first().is_some_and(|s| s == &COMPLETED.to_string())).count();
    let wall: f64 = h.iter().filter_map(|r| r.get(1)?.parse::<f64>().ok()).sum();
    println!("\n$ andes history -limit 5");
    print!("{}", pool.andes(SHOW, &["history", "-limit", "5"])?);
    let mut summary = String::new();
    let _ = write!(
        summary,
        "\nhistory: {done} jobs completed, {:.0} s of run time in all (RemoteWallClockTime)",
        wall
    );
    println!("{summary}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prime_counts_are_right() {
        assert_eq!(
            prime_counts(&[0, 2, 3, 10, 100, 10_000, 1_000_000]),
            [0, 0, 1, 4, 25, 1229, 78_498]
        );
    }

    #[test]
    fn submit_output_and_rows_parse() {
        assert_eq!(submitted_cluster("300 job(s) submitted to cluster 3.\n"), Some(3));
        let r = rows("1 0 2 slot1@h\n3 7 1 undefined\n");
        assert_eq!((r[0].cluster, r[0].proc, r[0].status), (1, 0, 2));
        assert_eq!(r[0].remote_host, "slot1@h");
        assert_eq!(r[1].remote_host, "undefined");
    }
}
