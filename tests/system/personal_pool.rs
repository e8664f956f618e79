//! `andes pool up` as a user starts it: a personal pool in one process,
//! tuned by a local configuration file it never overwrites, read back with
//! `andes config-val` (condor_config_val).

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::pool::wait_or;

/// The pool's process, stopped when dropped.
struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_personal_pool_reads_its_local_configuration_and_config_val_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The user's own settings, beside what `pool up` writes.
    std::fs::write(d.join("andes.config.local"), "# mine\nNUM_CPUS = 3\nMY_KNOB = $(NUM_CPUS)0\n")
        .unwrap();
    std::fs::create_dir(d.join("config.d")).unwrap();
    std::fs::write(d.join("config.d/50-site"), "SITE_KNOB = from config.d\n").unwrap();
    std::fs::write(d.join("config.d/50-site~"), "SITE_KNOB = from a backup\n").unwrap();
    let (_up, config) = start(d, 1);
    let andes = |args: &[&str]| run(d, &config, args);
    // The local file wins over `--slots 1`: three slots.
    wait_or(
        "three slots",
        Duration::from_secs(60),
        || andes(&["status", "-af", "Name"]).1.lines().count() == 3,
        || std::fs::read_to_string(d.join("pool.log")).unwrap_or_default(),
    );
    let (code, out, _) = andes(&["config-val", "NUM_CPUS", "MY_KNOB", "SITE_KNOB"]);
    assert_eq!((code, out.as_str()), (Some(0), "3\n30\nfrom config.d\n"));
    let (_, out, _) = andes(&["config-val", "-v", "NUM_CPUS"]);
    let local = d.canonicalize().unwrap().join("andes.config.local");
    assert_eq!(out, format!("NUM_CPUS = 3\n # at: {}, line 2\n # raw: 3\n", local.display()));
    let (code, _, err) = andes(&["config-val", "NO_SUCH_KNOB"]);
    assert_eq!((code, err.as_str()), (Some(1), "Not defined: NO_SUCH_KNOB\n"));
    // Each daemon of the pool logs to its own file, as HTCondor names them.
    let logs = d.join("log");
    let read = |n: &str| std::fs::read_to_string(logs.join(n)).unwrap_or_default();
    assert!(read("SchedLog").contains("andes schedd"), "{}", read("SchedLog"));
    assert!(read("StartLog").contains("andes host listening"), "{}", read("StartLog"));
    assert!(read("CollectorLog").contains("central-manager listening"), "{}", read("CollectorLog"));
    assert!(logs.join("NegotiatorLog").exists());
    assert!(!read("SchedLog").contains("andes host listening"), "each line in one log");
    // condor_config_val's single-dash form.
    let (code, out, _) = andes(&["config-val", "-dump"]);
    assert_eq!(code, Some(0));
    assert!(out.lines().any(|l| l == "SITE_KNOB = from config.d"), "{out}");
}

/// Starts `andes pool up --slots N` in `d` and waits for it: the pool (stopped
/// when dropped) and its configuration file.
fn start(d: &std::path::Path, slots: u32) -> (Up, String) {
    let mut child = common::andes()
        .args(["pool", "up", "--slots", &slots.to_string(), "--dir"])
        .arg(d)
        .env("ANDES_CONFIG_DIR", d)
        .env_remove("ANDES_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(d.join("pool.log")).unwrap())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let up = Up(child);
    let mut config = None;
    for line in out.lines().map_while(Result::ok) {
        if let Some(c) = line.strip_prefix("export ANDES_CONFIG=") {
            config = Some(c.trim().to_string());
        }
        if line.trim() == "pool ready" {
            break;
        }
    }
    let config = config.unwrap_or_else(|| {
        panic!("no pool: {}", std::fs::read_to_string(d.join("pool.log")).unwrap_or_default())
    });
    (up, config)
}

/// Runs `andes ARGS` against the pool: exit code, stdout, stderr.
fn run(d: &std::path::Path, config: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let o = common::andes()
        .args(args)
        .env("ANDES_CONFIG_DIR", d)
        .env("ANDES_CONFIG", config)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `andes reconfig` (condor_reconfig): the running pool reads its local
/// configuration again; the host's new START applies at once (the slot
/// goes to Owner, then back), a slot layout change waits for a restart, the
/// negotiator takes a new interval, the job router a new routing table (and
/// refuses one that does not load).
#[test]
fn reconfig_applies_a_new_start_policy_to_the_running_pool() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let route = |name: &str| {
        format!(
            "[ name = \"{name}\"; GridResource = \"andes 127.0.0.1:9\"; Requirements = False; ]"
        )
    };
    std::fs::write(d.join("andes.config.local"), format!("JOB_ROUTER_ENTRIES = {}\n", route("a")))
        .unwrap();
    let (_up, config) = start(d, 1);
    let andes = |args: &[&str]| run(d, &config, args);
    let log = || std::fs::read_to_string(d.join("pool.log")).unwrap_or_default();
    let state = || andes(&["status", "-af", "State"]).1.trim().to_string();
    wait_or("an unclaimed slot", Duration::from_secs(60), || state() == "Unclaimed", log);

    // A routing table that does not load (its defaults are not a ClassAd)
    // is refused, and the one in use stays; a bad entry is skipped, saying why.
    let text = format!("JOB_ROUTER_ENTRIES = {}\nJOB_ROUTER_DEFAULTS = [ x = \n", route("a"));
    std::fs::write(d.join("andes.config.local"), text).unwrap();
    let (code, out, err) = andes(&["reconfig", "-daemon", "schedd"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("JOB_ROUTER_DEFAULTS") && err.contains("the routes in use stay"), "{err}");
    let text = format!("JOB_ROUTER_ENTRIES = {} [ name = \"x\"\n", route("a"));
    std::fs::write(d.join("andes.config.local"), text).unwrap();
    let (code, out, err) = andes(&["reconfig", "-daemon", "schedd"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("job router: 1 routes; job router: JOB_ROUTER_ENTRIES, entry 2"), "{out}");

    let text = format!(
        "START = False\nNUM_CPUS = 4\nJOB_ROUTER_ENTRIES = {} {}\n",
        route("a"),
        route("b")
    );
    std::fs::write(d.join("andes.config.local"), text).unwrap();
    let (code, out, err) = andes(&["reconfig"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("schedd: cron jobs' next runs computed again"), "{out}");
    assert!(out.contains("job router: 2 routes"), "{out}");
    assert!(out.contains("negotiator: configuration read again; no negotiator knob"), "{out}");
    assert!(out.contains("startd: configuration read again; now in force: START"), "{out}");
    assert!(out.contains("at the next start") && out.contains("NUM_CPUS"), "{out}");
    wait_or("the slot in Owner", Duration::from_secs(30), || state() == "Owner", log);
    assert_eq!(andes(&["status", "-af", "Name"]).1.lines().count(), 1, "still one slot");

    std::fs::write(d.join("andes.config.local"), "# mine again\nNEGOTIATOR_INTERVAL = 7\n")
        .unwrap();
    let (code, out, err) = andes(&["reconfig", "-daemon", "negotiator"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out, "negotiator: configuration read again; now in force: NEGOTIATOR_INTERVAL\n");
    let (code, out, err) = andes(&["reconfig", "-daemon", "startd"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(!out.contains("schedd:"), "{out}");
    wait_or("the slot unclaimed again", Duration::from_secs(30), || state() == "Unclaimed", log);

    // A key added to the trust file is taken at the next reconfig, by
    // every daemon (the schedd here), in the TLS handshake and on requests.
    let (code, out, err) = andes(&["keygen", "bob"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let bob_line = out.lines().next().unwrap().to_string();
    // Bob's configuration: the pool's, signing with his key.
    let bob_config = d.join("bob.config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\nKEY_NAME = bob\n");
    std::fs::write(&bob_config, text).unwrap();
    let bob_q = || {
        let o = common::andes()
            .args(["q", "-allusers"])
            .env("ANDES_CONFIG_DIR", d)
            .env("ANDES_CONFIG", &bob_config)
            .output()
            .unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, err) = bob_q();
    assert_ne!(code, Some(0), "an unknown key is refused");
    assert!(err.contains("not in the pool's trust file"), "{err}");
    let mut trust = std::fs::read_to_string(d.join("trust")).unwrap();
    trust.push_str(&format!("user bob {bob_line}\n"));
    std::fs::write(d.join("trust"), trust).unwrap();
    let (code, out, err) = andes(&["reconfig"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("trust file read again"), "{out}");
    let (code, err) = bob_q();
    assert_eq!(code, Some(0), "{err}");
    // Bob is a user, not an admin: no daemon takes his reconfig.
    for daemon in ["schedd", "startd", "negotiator"] {
        let o = common::andes()
            .args(["reconfig", "-daemon", daemon])
            .env("ANDES_CONFIG_DIR", d)
            .env("ANDES_CONFIG", &bob_config)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{daemon}: {err}");
        assert!(err.contains("403"), "{daemon}: {err}");
    }

    let (code, _, err) = andes(&["reconfig", "-daemon", "shadow"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no daemon `shadow` to reconfigure"), "{err}");
}

/// `andes pool down` right after `andes rm` of running jobs: the pool stops
/// within seconds. (It stayed up two minutes, every listener open, for
/// shadows owed the ends of jobs whose claims they had released.)
#[test]
fn pool_down_right_after_rm_of_running_jobs_stops_the_pool_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (mut up, config) = start(d, 2);
    let andes = |args: &[&str]| run(d, &config, args);
    let log = || std::fs::read_to_string(d.join("pool.log")).unwrap_or_default();
    let sub = d.join("sleep.sub");
    let module = common::pool::sample("sleeper");
    std::fs::write(&sub, format!("executable = {}\nqueue 2\n", module.display())).unwrap();
    let (code, out, err) = andes(&["submit", sub.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}{err}");
    wait_or(
        "both jobs running",
        Duration::from_secs(60),
        || andes(&["q", "-af", "JobStatus"]).1 == "2\n2\n",
        log,
    );
    let (code, out, err) = andes(&["rm", "1"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = andes(&["pool", "down"]);
    assert_eq!(code, Some(0), "{out}{err}");
    // Well under FINAL_REPORT_KEEP (120 s), which it waited before.
    wait_or(
        "the pool to stop",
        Duration::from_secs(20),
        || up.0.try_wait().unwrap().is_some(),
        log,
    );
}

/// The local configuration of a pool about to be stopped with jobs of every
/// kind running: a job that asks for it (`+SuspendMe`) is suspended (the
/// policy is first looked at within UPDATE_INTERVAL of a job's start), and
/// each job is reported every second.
const STOPPING: &str = "WANT_SUSPEND = True\nSUSPEND = (TARGET.SuspendMe =?= True)\n\
                        CONTINUE = (TARGET.SuspendMe =!= True)\nPOLLING_INTERVAL = 1\n\
                        UPDATE_INTERVAL = 2\nSTARTER_INITIAL_UPDATE_INTERVAL = 1\n\
                        STARTER_UPDATE_INTERVAL = 1\n";

/// The jobs of [`start_with_every_kind_of_job`], by the name of their
/// submit file (clusters 1 to 5 in this order).
const KINDS: [&str; 5] = ["plain", "coop", "compiled", "deaf", "suspended"];

/// Starts a personal pool of five slots in `d` with `local` in its local
/// configuration, and runs a job of each kind of [`KINDS`] on it: a plain
/// one (`sleeper`, asleep in a host call), one that checkpoints
/// cooperatively (`coop`), one compiled by `andes compile` (transparent
/// checkpoints; `primes`), one that hears its vacate notice and ignores it
/// (`deaf`: only a kill stops it), and a suspended one. Returns once each
/// runs (the last suspended), each with its user log `<kind>.log` in `d`.
fn start_with_every_kind_of_job(d: &std::path::Path, local: &str) -> (Up, String) {
    std::fs::write(d.join("andes.config.local"), format!("{STOPPING}{local}")).unwrap();
    let (up, config) = start(d, 5);
    let andes = |args: &[&str]| run(d, &config, args);
    let log = || std::fs::read_to_string(d.join("pool.log")).unwrap_or_default();
    let sample = |s: &str| common::pool::sample(s).display().to_string();
    let compiled = d.join("primes_c.wasm");
    let (code, out, err) = andes(&["compile", &sample("primes"), "-o", compiled.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}{err}");
    let submits = [
        format!("executable = {}\n", sample("sleeper")),
        format!(
            "executable = {}\narguments = 2000000000\n+WasmCheckpoint = \"cooperative\"\n\
             checkpoint_exit_code = 85\n",
            sample("coop")
        ),
        format!("executable = {}\narguments = 10000000000000\n", compiled.display()),
        format!("executable = {}\n", sample("deaf")),
        format!("executable = {}\n+SuspendMe = True\n", sample("sleeper")),
    ];
    for (kind, text) in KINDS.iter().zip(submits) {
        let sub = d.join(format!("{kind}.sub"));
        let text = format!("{text}log = {}\noutput = {kind}.out\nqueue\n", kind_log(d, kind));
        std::fs::write(&sub, text).unwrap();
        let (code, out, err) = andes(&["submit", sub.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{kind}: {out}{err}");
    }
    wait_or(
        "four jobs running and one suspended",
        Duration::from_secs(60),
        || andes(&["q", "-af", "JobStatus"]).1 == "2\n2\n2\n2\n7\n",
        log,
    );
    (up, config)
}

/// The user log of the job of `kind`.
fn kind_log(d: &std::path::Path, kind: &str) -> String {
    d.join(format!("{kind}.log")).display().to_string()
}

/// The pool's SHUTDOWN_GRACEFUL_TIMEOUT, as `andes config-val` reads it.
fn graceful_timeout(d: &std::path::Path, config: &str) -> Duration {
    let (code, out, err) = run(d, config, &["config-val", "SHUTDOWN_GRACEFUL_TIMEOUT"]);
    assert_eq!(code, Some(0), "{out}{err}");
    Duration::from_secs(out.trim().parse().unwrap())
}

/// Waits (a minute at most) for the pool's process to end; how long it took
/// since `asked`.
fn gone(up: &mut Up, asked: std::time::Instant, d: &std::path::Path) -> Duration {
    let log = || std::fs::read_to_string(d.join("pool.log")).unwrap_or_default();
    wait_or(
        "the pool to stop",
        Duration::from_secs(60),
        || up.0.try_wait().unwrap().is_some(),
        log,
    );
    asked.elapsed()
}

/// After a stop: the host shut down gracefully (its log says so), every
/// job was vacated before the pool went (its user log says it was
/// evicted; the checkpointing ones checkpointed), and the pool started
/// again has every job, none lost, idle or running again.
fn every_job_vacated_and_kept(d: &std::path::Path) {
    let start_log = std::fs::read_to_string(d.join("log/StartLog")).unwrap_or_default();
    assert!(start_log.contains("shutting down (graceful"), "{start_log}");
    for slot in 1..=5 {
        let vacating = format!("slot {slot}: Claimed/");
        assert!(
            start_log
                .lines()
                .any(|l| l.contains(&vacating) && l.contains("-> Preempting/Vacating")),
            "slot {slot} was not vacated:\n{start_log}"
        );
    }
    // The deaf job ignored its notice: the host killed it in time.
    assert!(start_log.contains("killing the jobs still running (fast)"), "{start_log}");
    for kind in KINDS {
        let log = std::fs::read_to_string(kind_log(d, kind)).unwrap_or_default();
        assert!(log.contains("Job was evicted."), "{kind}: not vacated:\n{log}\n{start_log}");
        if kind == "coop" || kind == "compiled" {
            assert!(log.contains("Job was checkpointed."), "{kind}: {log}");
        }
    }
    let (_up, config) = start(d, 5);
    let andes = |args: &[&str]| run(d, &config, args);
    let (code, out, err) = andes(&["q", "-af", "ClusterId", "JobStatus", "NumCkpts"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    let clusters: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(clusters, ["1", "2", "3", "4", "5"], "{out}");
    for r in &rows {
        assert!(["1", "2", "7"].contains(&r[1]), "job {} is neither idle nor running: {out}", r[0]);
    }
    // The cooperative and the compiled job kept the state they left with.
    for r in &rows[1..3] {
        assert_ne!(r[2], "undefined", "job {} kept no checkpoint: {out}", r[0]);
    }
}

/// `andes pool down` while jobs of every kind run: the pool vacates them
/// (the checkpointing ones checkpoint), its schedd hears how each ended,
/// and it is gone within its SHUTDOWN_GRACEFUL_TIMEOUT (5 s unless the
/// user says otherwise), though one job ignores its vacate notice and
/// MACHINE_MAX_VACATE_TIME is 30 s in a personal pool.
#[test]
fn pool_down_vacates_every_kind_of_job_and_stops_within_its_graceful_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (mut up, config) = start_with_every_kind_of_job(d, "");
    let deadline = graceful_timeout(d, &config);
    assert!(deadline <= Duration::from_secs(5), "a personal pool's default: {deadline:?}");
    let asked = std::time::Instant::now();
    let (code, out, err) = run(d, &config, &["pool", "down"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let took = gone(&mut up, asked, d);
    eprintln!("personal_pool: pool down took {took:?} (SHUTDOWN_GRACEFUL_TIMEOUT {deadline:?})");
    assert!(took < deadline + Duration::from_secs(5), "{took:?}");
    every_job_vacated_and_kept(d);
}

/// SIGTERM to `andes pool up` (what a service manager or `kill` sends):
/// the same graceful stop as `andes pool down`, within the
/// SHUTDOWN_GRACEFUL_TIMEOUT the user configured.
#[cfg(unix)]
#[test]
fn sigterm_vacates_every_kind_of_job_and_stops_within_the_configured_graceful_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (mut up, config) = start_with_every_kind_of_job(d, "SHUTDOWN_GRACEFUL_TIMEOUT = 3\n");
    let deadline = graceful_timeout(d, &config);
    assert_eq!(deadline, Duration::from_secs(3));
    let asked = std::time::Instant::now();
    let pid = up.0.id().to_string();
    let st = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(st.success());
    let took = gone(&mut up, asked, d);
    eprintln!("personal_pool: SIGTERM took {took:?} (SHUTDOWN_GRACEFUL_TIMEOUT {deadline:?})");
    assert!(took < deadline + Duration::from_secs(5), "{took:?}");
    every_job_vacated_and_kept(d);
}
