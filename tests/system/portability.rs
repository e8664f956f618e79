//! The execute side on other platforms, run for real: the Windows build of
//! `andes` under wine, the aarch64 Linux build under qemu-user, and snapshots
//! moved between them and x86-64 Linux.
//!
//! The tests are `#[ignore]`d: they need the two cross builds and the
//! emulators, which `cargo xtask portability` (part of `cargo xtask test`)
//! makes and checks first, saying NOT RUN for a platform it cannot provide.
//! Run by hand: `cargo xtask portability`.
//!
//! The platforms come from the environment `cargo xtask portability` sets:
//! `ANDES_WINDOWS_EXE` (an `andes.exe`), `ANDES_WINE` (wine64), `WINEPREFIX`;
//! `ANDES_AARCH64_EXE`, `ANDES_QEMU_AARCH64` and `ANDES_AARCH64_SYSROOT`.

use crate::common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// One platform `andes` runs on here: how to start it.
struct Platform {
    name: &'static str,
    /// The program to start (the emulator, or `andes` itself).
    program: PathBuf,
    /// Its first arguments (the emulator's options and the `andes` it runs).
    prefix: Vec<OsString>,
}

impl Platform {
    fn command(&self) -> Command {
        let mut c = Command::new(&self.program);
        c.args(&self.prefix);
        c
    }
}

fn env_path(name: &str) -> PathBuf {
    match std::env::var_os(name) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => panic!("{name} is not set: run these tests with `cargo xtask portability`"),
    }
}

/// x86-64 Linux (this build), Windows under wine, aarch64 under qemu-user.
fn platforms() -> Vec<Platform> {
    let native = Platform {
        name: "x86_64-linux",
        program: assert_cmd::cargo::cargo_bin("andes"),
        prefix: Vec::new(),
    };
    let windows = Platform {
        name: "x86_64-windows (wine)",
        program: env_path("ANDES_WINE"),
        prefix: vec![env_path("ANDES_WINDOWS_EXE").into()],
    };
    let aarch64 = Platform {
        name: "aarch64-linux (qemu)",
        program: env_path("ANDES_QEMU_AARCH64"),
        prefix: vec![
            "-L".into(),
            env_path("ANDES_AARCH64_SYSROOT").into(),
            env_path("ANDES_AARCH64_EXE").into(),
        ],
    };
    vec![native, windows, aarch64]
}

fn sample(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples/target/wasm32-wasip1/release")
        .join(format!("{name}.wasm"));
    assert!(p.exists(), "{}: build the samples first (`cargo xtask samples`)", p.display());
    p
}

/// `sample`, compiled by `andes compile` on x86-64 Linux into `into`.
fn compiled(name: &str, into: &Path) -> PathBuf {
    let native = &platforms()[0];
    let c = native.command().arg("compile").arg(sample(name)).arg("-o").arg(into).output().unwrap();
    assert!(c.status.success(), "{}", show(native, &c));
    into.to_path_buf()
}

fn fresh(tag: &str) -> common::Scratch {
    common::Scratch::new(&format!("portability-{tag}"))
}

fn show(p: &Platform, o: &Output) -> String {
    format!(
        "on {}: status {:?}\nstdout:\n{}\nstderr:\n{}",
        p.name,
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn last_json(p: &Platform, o: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {}", show(p, o)))
}

/// `andes run ARGS` on `p` in the sandbox `dir`, to its end.
fn run(p: &Platform, dir: &Path, args: &[&std::ffi::OsStr]) -> Output {
    p.command().arg("run").arg("--dir").arg(dir).args(args).output().unwrap()
}

#[test]
#[ignore = "needs the cross builds and emulators: cargo xtask portability"]
fn the_samples_run_and_break_their_limits_alike_on_every_platform() {
    for p in platforms() {
        let dir = fresh(&format!("limits-{}", p.name.split(' ').next().unwrap()));
        let primes = sample("primes");
        let out = run(&p, &dir, &[primes.as_os_str(), "100000".as_ref()]);
        assert_eq!(out.status.code(), Some(0), "{}", show(&p, &out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "primes below 100000: 9592\n");

        // The job thread's CPU time (getrusage on Linux, GetThreadTimes on
        // Windows) for a job that only computes: counted, and never more
        // than the time it ran (a process's time, or another thread's,
        // would be).
        let out = run(&p, &dir, &["--json".as_ref(), primes.as_os_str(), "20000000".as_ref()]);
        let j = last_json(&p, &out);
        let (cpu, wall) = (
            j["RemoteUserCpu"].as_f64().unwrap_or(-1.0),
            j["RemoteWallClockTime"].as_f64().unwrap_or(-1.0),
        );
        assert!(cpu > 0.0 && wall > 0.0, "cpu {cpu}, wall {wall}: {}", show(&p, &out));
        assert!(cpu <= wall * 1.05 + 0.02, "cpu {cpu} over wall {wall}: {}", show(&p, &out));

        let membomb = sample("membomb");
        let out = run(
            &p,
            &dir,
            &["--json".as_ref(), "--memory".as_ref(), "32M".as_ref(), membomb.as_os_str()],
        );
        let j = last_json(&p, &out);
        assert_eq!(j["HoldReasonCode"], 34, "{}", show(&p, &out));
        assert_eq!(out.status.code(), Some(125), "{}", show(&p, &out));

        let spin = sample("spin");
        let out = run(
            &p,
            &dir,
            &["--json".as_ref(), "--fuel".as_ref(), "2000000".as_ref(), spin.as_os_str()],
        );
        assert_eq!(last_json(&p, &out)["HoldReasonCode"], 101, "{}", show(&p, &out));

        let trap = sample("trap_unreachable");
        let out = run(&p, &dir, &["--json".as_ref(), trap.as_os_str()]);
        let j = last_json(&p, &out);
        assert_eq!((j["ExitBySignal"].clone(), j["ExitSignal"].clone()), (true.into(), 4.into()));
        assert_eq!(out.status.code(), Some(128 + 4), "{}", show(&p, &out));
    }
}

/// Starts `andes run --checkpoint-every 100ms --checkpoint-dir CKPT ARGS` on `p`
/// and kills it outright once `made` holds; panics if it ended first.
fn kill_once(
    p: &Platform,
    dir: &Path,
    ckpt: &Path,
    args: &[&std::ffi::OsStr],
    made: impl Fn() -> bool,
) {
    let mut child = p
        .command()
        .args(["run", "--checkpoint-every", "100ms", "--dir"])
        .arg(dir)
        .arg("--checkpoint-dir")
        .arg(ckpt)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !made() {
        if let Some(s) = child.try_wait().unwrap() {
            panic!("on {}: the job ended ({s}) before it was checkpointed", p.name);
        }
        assert!(t0.elapsed() < Duration::from_secs(300), "on {}: no checkpoint in 300 s", p.name);
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
#[ignore = "needs the cross builds and emulators: cargo xtask portability"]
fn a_cooperative_job_killed_outright_resumes_on_every_platform() {
    let coop = sample("coop");
    let terms = "300000000";
    let native = &platforms()[0];
    let whole = run(native, &fresh("coop-whole"), &[coop.as_os_str(), terms.as_ref()]);
    assert_eq!(whole.status.code(), Some(0), "{}", show(native, &whole));
    for p in platforms() {
        let dir = fresh(&format!("coop-{}", p.name.split(' ').next().unwrap()));
        let ckpt = dir.join("ckpt");
        let saved = ckpt.join("saved.state");
        kill_once(&p, &dir, &ckpt, &[coop.as_os_str(), terms.as_ref()], || saved.exists());
        let resumed = p
            .command()
            .args(["run", "--dir"])
            .arg(&dir)
            .arg("--checkpoint-dir")
            .arg(&ckpt)
            .arg(&coop)
            .arg(terms)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&resumed.stderr);
        assert_eq!(resumed.status.code(), Some(0), "{}", show(&p, &resumed));
        assert!(err.contains("resuming at term"), "{}", show(&p, &resumed));
        assert_eq!(resumed.stdout, whole.stdout, "{}", show(&p, &resumed));
    }
}

fn snapshots(d: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(d).map(|r| r.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    v.retain(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("snapshot-")));
    v.sort();
    v
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A module compiled by `andes compile` (on x86-64 Linux), checkpointed on each
/// platform and killed outright; a middle snapshot, with its checkpoint
/// directory, moved to each platform (itself included) and resumed there in an
/// empty sandbox: the file the job writes is byte-identical to an uninterrupted
/// run's on x86-64 Linux, every way.
#[test]
#[ignore = "needs the cross builds and emulators: cargo xtask portability"]
fn a_snapshot_taken_on_any_platform_resumes_on_every_other() {
    let top = fresh("moves");
    let module = compiled("digest", &top.join("digest.c.wasm"));
    let native = &platforms()[0];
    let input: String = (1..=3000).map(|i| format!("line {i} of the input\n")).collect();
    let args = |m: &Path| -> Vec<OsString> {
        vec![m.as_os_str().into(), "in.txt".into(), "out.txt".into(), "20000".into()]
    };
    let reference = top.join("reference");
    std::fs::create_dir_all(&reference).unwrap();
    std::fs::write(reference.join("in.txt"), &input).unwrap();
    let a = args(&module);
    let a: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
    let whole = run(native, &reference, &a);
    assert_eq!(whole.status.code(), Some(0), "{}", show(native, &whole));
    let expected = std::fs::read(reference.join("out.txt")).unwrap();
    for from in platforms() {
        let tag = from.name.split(' ').next().unwrap().to_string();
        let dir = top.join(format!("from-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("in.txt"), &input).unwrap();
        let ckpt = top.join(format!("ckpt-{tag}"));
        kill_once(&from, &dir, &ckpt, &a, || snapshots(&ckpt).len() >= 3);
        let taken = snapshots(&ckpt);
        let middle = taken[taken.len() / 2].file_name().unwrap().to_owned();
        for to in platforms() {
            let to_tag = to.name.split(' ').next().unwrap();
            let moved = top.join(format!("ckpt-{tag}-to-{to_tag}"));
            copy_dir(&ckpt, &moved);
            // A copied secret key keeps the mode the copy gives it; the key
            // must be the owner's alone on a Unix host, as after scp -p.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let key = moved.join("checkpoints");
                std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
            }
            let sandbox = top.join(format!("sandbox-{tag}-to-{to_tag}"));
            std::fs::create_dir_all(&sandbox).unwrap();
            let out = to
                .command()
                .args(["run", "--dir"])
                .arg(&sandbox)
                .arg("--checkpoint-dir")
                .arg(&moved)
                .arg("--restore")
                .arg(moved.join(&middle))
                .args(&a)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{} -> {}", from.name, show(&to, &out));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("resumes from its snapshot"), "{}", show(&to, &out));
            let got = std::fs::read(sandbox.join("out.txt")).unwrap_or_default();
            assert!(
                got == expected,
                "{} -> {}: out.txt differs from the uninterrupted run's",
                from.name,
                to.name
            );
            eprintln!(
                "moved {} of {}: {} -> {}: identical",
                middle.to_string_lossy(),
                tag,
                from.name,
                to.name
            );
        }
    }
    let _ = std::fs::remove_dir_all(&top);
}

use common::pool::{int, text};

/// A pool whose execute hosts are of every platform: a compiled job vacated
/// from its x86-64 Linux host resumes on the Windows host from its snapshot,
/// then, vacated again, on the aarch64 host, ending as an uninterrupted run
/// does; then one schedd's jobs run on each platform, matched by Arch and OpSys.
#[test]
#[ignore = "needs the cross builds and emulators: cargo xtask portability"]
fn a_pool_across_platforms_moves_a_vacated_job_between_them_and_runs_jobs_on_each() {
    use common::pool::{Pool, wait_or};
    let [_, windows, aarch64]: [Platform; 3] = platforms().try_into().ok().unwrap();
    let mut p = Pool::new(
        "NUM_CPUS = 1\nWANT_VACATE = True\nMACHINE_MAX_VACATE_TIME = 60\n\
         STARTER_INITIAL_UPDATE_INTERVAL = 1\nSTARTER_UPDATE_INTERVAL = 1\n\
         SHADOW_QUEUE_UPDATE_INTERVAL = 1",
        1,
    );
    // Windows and aarch64 join first, drained: an emulator's start-up
    // (seconds under load) must not decide where the job is when it moves.
    p.start_host_from(windows.command(), 2, "");
    p.start_host_from(aarch64.command(), 3, "");
    let known = |p: &Pool| p.slots().iter().map(|s| text(s, "Name")).collect::<Vec<_>>();
    wait_or(
        "the collector to know Windows and aarch64",
        Duration::from_secs(120),
        || known(&p).len() == 3,
        || format!("{:?}\n{}", known(&p), p.logs()),
    );
    for host in ["host2", "host3"] {
        p.ok("root", &["drain", host]);
    }
    let free = |p: &Pool| {
        p.slots()
            .iter()
            .filter(|s| text(s, "State") != "Drained")
            .map(|s| text(s, "Name"))
            .collect::<Vec<_>>()
    };
    wait_or(
        "Windows and aarch64 drained",
        Duration::from_secs(120),
        || free(&p) == ["slot1@host1"],
        || format!("{:?}\n{}", free(&p), p.logs()),
    );
    // A compiled job, on the one host open: x86-64 Linux.
    let module = p.compile("digest");
    let jobs = p.path().join("jobs");
    let input: String = (1..=3000).map(|i| format!("line {i} of the input\n")).collect();
    std::fs::write(jobs.join("input.txt"), &input).unwrap();
    let reference = p.path().join("reference");
    std::fs::create_dir_all(&reference).unwrap();
    std::fs::write(reference.join("input.txt"), &input).unwrap();
    let rounds = "300000";
    let whole = common::andes()
        .args(["run", "--dir"])
        .arg(&reference)
        .arg(jobs.join(&module))
        .args(["input.txt", "digests.txt", rounds])
        .output()
        .unwrap();
    let printed = common::succeeded(whole, "andes run");
    let expected = std::fs::read_to_string(reference.join("digests.txt")).unwrap();
    p.submit(
        "alice",
        "d",
        &format!(
            "executable = {module}\narguments = input.txt digests.txt {rounds}\n\
             transfer_input_files = input.txt\noutput = d.out\nerror = d.err\nlog = d.log\nqueue\n"
        ),
    );
    let running_on = |p: &Pool, host: &str| {
        p.queue().first().is_some_and(|a| {
            int(a, "JobStatus") == 2
                && text(a, "RemoteHost") == host
                && matches!(a.eval_attr("RemoteUserCpu"), classad::Value::Real(c) if c > 0.5)
        })
    };
    wait_or(
        "the job to run on x86-64 Linux",
        Duration::from_secs(120),
        || running_on(&p, "slot1@host1"),
        || p.logs(),
    );
    // Windows opens and x86-64 Linux leaves: the job is vacated, snapshotted
    // as it goes, and resumes on Windows.
    p.ok("root", &["drain", "host2", "-cancel"]);
    p.host_cmd(1, "root", &["host", "off", "-graceful"]);
    wait_or(
        "the job to resume on Windows",
        Duration::from_secs(300),
        || running_on(&p, "slot1@host2"),
        || p.logs(),
    );
    // Then aarch64 opens and Windows leaves.
    p.ok("root", &["drain", "host3", "-cancel"]);
    p.host_cmd(2, "root", &["host", "off", "-graceful"]);
    wait_or("the job to finish", Duration::from_secs(900), || p.history().len() == 1, || p.logs());
    let h = &p.history()[0];
    assert_eq!(int(h, "JobStatus"), 4, "{h}");
    assert_eq!(int(h, "ExitCode"), 0, "{h}");
    assert_eq!(int(h, "NumJobStarts"), 3, "{h}");
    assert!(int(h, "NumCkpts") >= 2, "{h}");
    assert_eq!(text(h, "LastRemoteHost"), "slot1@host3", "{h}");
    assert_eq!(std::fs::read_to_string(jobs.join("digests.txt")).unwrap(), expected);
    assert_eq!(std::fs::read_to_string(jobs.join("d.out")).unwrap(), printed);

    // All three up: one job for each platform, matched by its Requirements.
    p.start_host(1, "");
    p.start_host_from(windows.command(), 2, "");
    wait_or(
        "three platforms' slots",
        Duration::from_secs(120),
        || {
            let slots = p.slots();
            let mut kinds: Vec<String> =
                slots.iter().map(|a| format!("{}/{}", text(a, "Arch"), text(a, "OpSys"))).collect();
            kinds.sort();
            kinds == ["X86_64/LINUX", "X86_64/WINDOWS", "aarch64/LINUX"]
                && slots.iter().all(|a| int(a, "Disk") > 0)
        },
        || p.logs(),
    );
    for (name, req) in [("l", "X86_64/LINUX"), ("w", "X86_64/WINDOWS"), ("a", "aarch64/LINUX")] {
        let (arch, os) = req.split_once('/').unwrap();
        p.submit(
            "alice",
            name,
            &format!(
                "executable = primes.wasm\narguments = 100000\noutput = {name}.out\n\
                 log = {name}.log\nrequirements = Arch == \"{arch}\" && OpSys == \"{os}\"\nqueue\n"
            ),
        );
    }
    wait_or(
        "the three jobs to finish",
        Duration::from_secs(300),
        || p.history().len() == 4,
        || p.logs(),
    );
    for (name, host) in [("l", "slot1@host1"), ("w", "slot1@host2"), ("a", "slot1@host3")] {
        let out = std::fs::read_to_string(jobs.join(format!("{name}.out"))).unwrap();
        assert_eq!(out, "primes below 100000: 9592\n", "job {name}");
        let h = p
            .history()
            .into_iter()
            .find(|a| text(a, "Out").ends_with(&format!("{name}.out")))
            .unwrap();
        assert_eq!(text(&h, "LastRemoteHost"), host, "{h}");
    }
}

/// The startd's policy on the Windows and aarch64 hosts, as on Linux: the
/// owner comes back (KeyboardIdle 0) and a running job is suspended (status 7),
/// then continues; under a policy that preempts without a vacate, the job is
/// killed outright and goes back to idle; `andes rm` of a running job frees its
/// slot.
#[test]
#[ignore = "needs the cross builds and emulators: cargo xtask portability"]
fn the_startd_policy_suspends_continues_and_kills_jobs_on_every_platform() {
    use common::pool::{Pool, wait_or};
    let [_, windows, aarch64]: [Platform; 3] = platforms().try_into().ok().unwrap();
    for platform in [windows, aarch64] {
        let status = |p: &Pool| p.queue().first().map(|a| int(a, "JobStatus"));
        // Suspend and continue.
        let mut p = Pool::new(
            "NUM_CPUS = 1\nWANT_SUSPEND = True\nSUSPEND = KeyboardIdle < 60\n\
             CONTINUE = KeyboardIdle >= 60\nPREEMPT = False\nSTARTER_UPDATE_INTERVAL = 1\n\
             STARTER_INITIAL_UPDATE_INTERVAL = 1\n",
            0,
        );
        p.start_host_from(platform.command(), 1, "");
        // Whatever the emulated machine says of its console, the owner is away.
        p.host_cmd(1, "root", &["host", "set-attr", "KeyboardIdle", "1000"]);
        p.submit("alice", "spin", "executable = spin.wasm\nlog = spin.log\nqueue\n");
        let on = platform.name;
        let reach = |p: &Pool, code: i64, what: &str| {
            wait_or(
                &format!("{what} on {on}"),
                Duration::from_secs(120),
                || status(p) == Some(code),
                || p.logs(),
            )
        };
        reach(&p, 2, "the job to run");
        p.host_cmd(1, "root", &["host", "set-attr", "KeyboardIdle", "0"]);
        reach(&p, 7, "status 7");
        p.host_cmd(1, "root", &["host", "set-attr", "KeyboardIdle", "1000"]);
        reach(&p, 2, "running again");
        let ad = p.queue().remove(0);
        assert_eq!(int(&ad, "TotalSuspensions"), 1, "on {on}: {ad}");
        // rm of a running job: gone, and its slot free again.
        p.ok("alice", &["rm", "1"]);
        wait_or(
            &format!("the slot freed on {on}"),
            Duration::from_secs(120),
            || {
                p.queue().is_empty()
                    && p.slots().first().is_some_and(|s| text(s, "State") == "Unclaimed")
            },
            || p.logs(),
        );
        drop(p);

        // Preempted without a vacate: killed outright, back to idle.
        let mut p = Pool::new(
            "NUM_CPUS = 1\nSTART = KeyboardIdle >= 60\nWANT_SUSPEND = False\n\
             PREEMPT = KeyboardIdle < 60\nWANT_VACATE = False\nKILL = False\n\
             STARTER_UPDATE_INTERVAL = 1\nSTARTER_INITIAL_UPDATE_INTERVAL = 1\n",
            0,
        );
        p.start_host_from(platform.command(), 1, "");
        p.host_cmd(1, "root", &["host", "set-attr", "KeyboardIdle", "1000"]);
        p.submit("alice", "spin", "executable = spin.wasm\nlog = spin.log\nqueue\n");
        reach(&p, 2, "the job to run");
        p.host_cmd(1, "root", &["host", "set-attr", "KeyboardIdle", "0"]);
        reach(&p, 1, "the job killed and idle");
        let log = std::fs::read_to_string(p.path().join("jobs/spin.log")).unwrap();
        assert!(log.contains("Job was evicted"), "on {on}: {log}");
        p.ok("alice", &["rm", "1"]);
    }
}

/// Secret keys are for their owner alone on every platform: `andes keygen`
/// writes one no one else may read (on Windows an access control list of
/// the key's own, which wine keeps as the file's mode, so it shows here),
/// and a key others may read is refused where it is used (a checkpoint
/// directory's signing key, loaded by `andes run`).
#[test]
#[ignore = "needs the cross builds and emulators: cargo xtask portability"]
fn secret_keys_are_for_their_owner_alone_and_refused_when_open_on_every_platform() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for p in platforms() {
        let dir = fresh("keys");
        let keys = dir.join("keys");
        let o = p.command().arg("keygen").arg("--dir").arg(&keys).arg("alice").output().unwrap();
        assert!(o.status.success(), "{}", show(&p, &o));
        for f in [keys.clone(), keys.join("alice")] {
            assert_eq!(mode(&f) & 0o007, 0, "{}: {} has mode {:o}", p.name, f.display(), mode(&f));
        }

        let sandbox = dir.join("sandbox");
        let ckpt = dir.join("ckpt");
        std::fs::create_dir(&sandbox).unwrap();
        let primes = compiled("primes", &dir.join("primes.c.wasm"));
        let args =
            ["--checkpoint-dir".as_ref(), ckpt.as_os_str(), primes.as_os_str(), "1000".as_ref()];
        let o = run(&p, &sandbox, &args);
        assert!(o.status.success(), "{}", show(&p, &o));
        let key = ckpt.join("checkpoints");
        assert_eq!(
            mode(&key) & 0o007,
            0,
            "{}: its checkpoint key has mode {:o}",
            p.name,
            mode(&key)
        );
        // Others let read it: refused, by name.
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let o = run(&p, &sandbox, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{}: a key open to others was used: {}", p.name, show(&p, &o));
        assert!(
            err.contains("checkpoints")
                && (err.contains("open to others") || err.contains("chmod")),
            "{}",
            show(&p, &o)
        );
    }
}

/// Ctrl-C vacates a compiled job on every platform (on Windows the console's
/// Ctrl-C event, which wine raises for SIGINT), leaving a snapshot from which
/// the same command resumes it to the uninterrupted run's output.
#[test]
#[ignore = "needs the cross builds and emulators: cargo xtask portability"]
fn ctrl_c_vacates_a_compiled_job_and_the_same_command_resumes_it_on_every_platform() {
    use std::io::BufRead;
    let top = fresh("ctrl-c");
    let module = compiled("primes", &top.join("primes.c.wasm"));
    let native = &platforms()[0];
    let n = "400000000";
    let whole = run(native, &top, &[module.as_os_str(), n.as_ref()]);
    assert_eq!(whole.status.code(), Some(0), "{}", show(native, &whole));
    for p in platforms() {
        let dir = top.join(format!("sandbox-{}", p.name.split(' ').next().unwrap()));
        let ckpt = top.join(format!("ckpt-{}", p.name.split(' ').next().unwrap()));
        std::fs::create_dir_all(&dir).unwrap();
        let command = || {
            let mut c = p.command();
            c.arg("run").arg("--dir").arg(&dir).arg("--checkpoint-dir").arg(&ckpt);
            c.arg(&module).arg(n);
            c
        };
        let mut child = command().stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            for line in std::io::BufReader::new(stderr).lines() {
                let line = line.unwrap_or_default();
                if line.contains("Ctrl-C vacates it") {
                    let _ = tx.send(());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        // Once it listens for Ctrl-C (it says so), SIGINT it.
        rx.recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("on {}: andes run never started the job", p.name));
        let kill = Command::new("kill").arg("-INT").arg(child.id().to_string()).status().unwrap();
        assert!(kill.success());
        let status = child.wait().unwrap();
        let err = reader.join().unwrap();
        assert!(
            err.contains("vacating the job") && err.contains("job was vacated"),
            "on {}: {status}\n{err}",
            p.name
        );
        assert!(!snapshots(&ckpt).is_empty(), "on {}: no snapshot\n{err}", p.name);
        let resumed = command().output().unwrap();
        assert_eq!(resumed.status.code(), Some(0), "{}", show(&p, &resumed));
        assert!(
            String::from_utf8_lossy(&resumed.stderr).contains("resumes from its snapshot"),
            "{}",
            show(&p, &resumed)
        );
        assert_eq!(resumed.stdout, whole.stdout, "{}", show(&p, &resumed));
    }
}

/// A wineserver kept up for a prefix of a test's own, stopped on drop (as
/// `cargo xtask portability` keeps one for the shared prefix): one that
/// exits between two of the test's processes can refuse the second with
/// "wine client error: recvmsg: Connection reset by peer".
struct KeptWineserver {
    server: PathBuf,
    prefix: PathBuf,
}

impl KeptWineserver {
    fn start(prefix: &Path) -> KeptWineserver {
        let server = env_path("ANDES_WINE").with_file_name("wineserver");
        let server = if server.is_file() { server } else { PathBuf::from("wineserver") };
        std::fs::create_dir_all(prefix).unwrap();
        let kept = KeptWineserver { server, prefix: prefix.to_path_buf() };
        let up = Command::new(&kept.server).arg("-p").env("WINEPREFIX", prefix).status().unwrap();
        assert!(up.success(), "{} -p: {up}", kept.server.display());
        let boot = Command::new(env_path("ANDES_WINE"))
            .arg("wineboot")
            .env("WINEPREFIX", prefix)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(boot.success(), "wineboot in {}: {boot}", prefix.display());
        kept
    }
}

impl Drop for KeptWineserver {
    fn drop(&mut self) {
        let _ = Command::new(&self.server).arg("-k").env("WINEPREFIX", &self.prefix).status();
    }
}

/// The module cache's key on Windows is for its owner alone (an access
/// control list of its own, which wine shows as the file's mode), and a key
/// others may read is refused by name: whoever can read it could forge the
/// cache's native code. In a wine prefix of its own, so that the other
/// tests' cache is left alone.
#[test]
#[ignore = "needs the cross builds and emulators: cargo xtask portability"]
fn the_module_cache_key_on_windows_is_for_its_owner_alone() {
    use std::os::unix::fs::PermissionsExt;
    let windows = platforms().swap_remove(1);
    let top = fresh("wine-cache");
    let prefix = top.join("prefix");
    let sandbox = top.join("sandbox");
    std::fs::create_dir_all(&sandbox).unwrap();
    let _server = KeptWineserver::start(&prefix);
    let run_once = || {
        windows
            .command()
            .env("WINEPREFIX", &prefix)
            .arg("run")
            .arg("--dir")
            .arg(&sandbox)
            .arg(sample("primes"))
            .arg("1000")
            .output()
            .unwrap()
    };
    let first = run_once();
    assert_eq!(first.status.code(), Some(0), "{}", show(&windows, &first));
    let users = prefix.join("drive_c/users");
    let key = std::fs::read_dir(&users)
        .unwrap()
        .flatten()
        .map(|u| u.path().join("AppData/Local/andes/modules/.key"))
        .find(|k| k.exists())
        .unwrap_or_else(|| panic!("no module cache key under {}", users.display()));
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o007, 0, "{}: mode {mode:o}", key.display());
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let second = run_once();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        !second.status.success(),
        "a cache key open to others was used: {}",
        show(&windows, &second)
    );
    assert!(
        err.contains("module cache's key") && err.contains("open to others"),
        "{}",
        show(&windows, &second)
    );
}
