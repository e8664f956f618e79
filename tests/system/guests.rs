//! Guests in C and Go, which know nothing of andes (samples/guests: `textstat`
//! built with zig cc, `fannkuch` built with GOOS=wasip1), run as a user runs
//! them: with `andes run`, compiled by `andes compile` and restored from a
//! snapshot after a SIGKILL, and as jobs of a pool. Each must write what the
//! native build of the same source writes, byte for byte: stdout and every
//! file it leaves, and nothing more (its scratch files removed).
//!
//! And the Go guest SDK (guest-sdk/go): its own tests, natively and under
//! `andes run`, and `coopgo`, a Go job that uses it to checkpoint
//! cooperatively, vacated in a pool and under `andes run`.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use common::pool::{Pool, VACATING_POOL, int, sample, wait_or};

/// A guest and a run of it: its module name, arguments, and the input files
/// it needs in its sandbox.
struct Guest {
    name: &'static str,
    args: Vec<String>,
    inputs: Vec<(&'static str, Vec<u8>)>,
}

/// Text for `textstat`: `words` words drawn from a seeded vocabulary, with
/// line breaks and punctuation, mixed case.
fn text(words: usize) -> Vec<u8> {
    let mut rng = common::Lcg(7);
    let vocab: Vec<String> = (0..3000)
        .map(|_| {
            let n = rng.between(1, 9) as usize;
            (0..n).map(|_| (b"etaoinshrdluCMFWYP"[rng.next(18) as usize]) as char).collect()
        })
        .collect();
    let mut out = String::new();
    for i in 0..words {
        out.push_str(&vocab[rng.next(vocab.len() as u64) as usize]);
        out.push_str(match rng.next(20) {
            0 => ".\n",
            1 => ", ",
            _ if i % 13 == 0 => "\n",
            _ => " ",
        });
    }
    out.into_bytes()
}

fn textstat(words: usize, rounds: u32) -> Guest {
    Guest {
        name: "textstat",
        args: vec!["in.txt".into(), "out.txt".into(), rounds.to_string()],
        inputs: vec![("in.txt", text(words))],
    }
}

fn fannkuch(n: u32) -> Guest {
    Guest { name: "fannkuch", args: vec![n.to_string()], inputs: vec![] }
}

/// The native build of a guest (samples/guests/build.sh).
fn native(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/target/native").join(name);
    assert!(p.exists(), "{}: build the samples first (`cargo xtask samples` does)", p.display());
    p
}

/// A fresh directory holding the guest's input files.
fn sandbox(g: &Guest) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (name, bytes) in &g.inputs {
        std::fs::write(d.path().join(name), bytes).unwrap();
    }
    d
}

/// Every file of a directory, by name.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect()
}

/// What the native build prints and leaves in its directory.
fn native_run(g: &Guest) -> (Vec<u8>, BTreeMap<String, Vec<u8>>) {
    let d = sandbox(g);
    let o = Command::new(native(g.name)).args(&g.args).current_dir(d.path()).output().unwrap();
    assert!(o.status.success(), "native {}: {}", g.name, String::from_utf8_lossy(&o.stderr));
    (o.stdout, files(d.path()))
}

/// The files a run left beside its stdout, as they compare with a native run.
fn assert_same(what: &str, g: &Guest, stdout: &[u8], dir: &BTreeMap<String, Vec<u8>>) {
    let (want_out, want_files) = native_run(g);
    assert_eq!(
        String::from_utf8_lossy(stdout),
        String::from_utf8_lossy(&want_out),
        "{what}: {} printed other than its native build",
        g.name
    );
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(dir), names(&want_files), "{what}: {} left other files", g.name);
    for (name, want) in &want_files {
        assert!(dir[name] == *want, "{what}: {}'s {name} differs from its native build's", g.name);
    }
}

/// `andes run` of a module in `dir`, its stdout; the run must exit 0.
fn andes_run(module: &Path, dir: &Path, extra: &[&str], args: &[String]) -> Vec<u8> {
    let o = common::andes()
        .arg("run")
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .arg(module)
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && err.contains("exited normally with return value 0"),
        "andes run {}: {err}",
        module.display()
    );
    o.stdout
}

/// Sample `name` compiled by `andes compile`, once per test process.
fn compiled(name: &'static str) -> PathBuf {
    static DONE: OnceLock<Mutex<BTreeMap<&'static str, PathBuf>>> = OnceLock::new();
    let mut done = DONE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = done.get(name) {
        return p.clone();
    }
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("guests-{name}_c.wasm"));
    let o = common::andes().arg("compile").arg(sample(name)).arg("-o").arg(&out).output().unwrap();
    common::succeeded(o, "andes compile");
    done.insert(name, out.clone());
    out
}

/// A Go guest opens, writes, appends to, seeks in and removes files in its
/// sandbox, as a C guest does: Go's wasip1 runtime finds its files only under
/// a preopen that covers its working directory (before, it failed every open
/// with "Bad file number").
#[test]
fn c_and_go_guests_write_their_files_as_their_native_builds_do() {
    for g in [textstat(20_000, 3), fannkuch(8)] {
        let d = sandbox(&g);
        let out = andes_run(&sample(g.name), d.path(), &[], &g.args);
        assert_same("andes run", &g, &out, &files(d.path()));
    }
}

/// Compiled, checkpointed every 100 ms and killed with SIGKILL mid-run, each
/// guest resumes in a fresh process with an empty sandbox from a snapshot
/// taken in the middle, and finishes with exactly the native build's output:
/// its files (written, appended to, sought in, removed before the snapshot or
/// after) come back from the snapshot as they were.
#[test]
fn compiled_c_and_go_guests_resume_from_a_middle_snapshot_after_sigkill() {
    for g in [textstat(100_000, 400), fannkuch(10)] {
        let module = compiled(g.name);
        let ckpt = tempfile::tempdir().unwrap();
        let first = sandbox(&g);
        let mut child = common::andes()
            .arg("run")
            .arg("--dir")
            .arg(first.path())
            .arg("--checkpoint-dir")
            .arg(ckpt.path())
            .args(["--checkpoint-every", "100ms", "--checkpoint-keep", "0"])
            .arg(&module)
            .args(&g.args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let snapshots = || -> Vec<PathBuf> {
            let mut v: Vec<PathBuf> = std::fs::read_dir(ckpt.path())
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("snapshot-"))
                })
                .collect();
            v.sort();
            v
        };
        wait_or(
            "four snapshots",
            Duration::from_secs(120),
            || {
                let running = child.try_wait().unwrap().is_none();
                assert!(running, "{} ended before it was killed: make its run longer", g.name);
                snapshots().len() >= 4
            },
            String::new,
        );
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let taken = snapshots();
        let middle = &taken[taken.len() / 2];
        let fresh = tempfile::tempdir().unwrap();
        let restore = [
            "--checkpoint-dir",
            ckpt.path().to_str().unwrap(),
            "--restore",
            middle.to_str().unwrap(),
        ];
        // Both guests print only when they end, so the resumed run prints
        // all of it.
        let out = andes_run(&module, fresh.path(), &restore, &g.args);
        let what = format!("{} restored from {}", g.name, middle.display());
        assert_same(&what, &g, &out, &files(fresh.path()));
    }
}

/// In a pool, each guest runs as a plain job and compiled, and every job
/// brings back the native build's stdout and files.
#[test]
fn c_and_go_guests_run_plain_and_compiled_as_jobs_of_a_pool() {
    let p = Pool::new("", 1);
    let jobs = p.path().join("jobs");
    let guests = [textstat(20_000, 5), fannkuch(9)];
    for g in &guests {
        for (kind, module) in [("plain", sample(g.name)), ("compiled", compiled(g.name))] {
            let dir = jobs.join(format!("{}-{kind}", g.name));
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in &g.inputs {
                std::fs::write(dir.join(name), bytes).unwrap();
            }
            let inputs: Vec<&str> = g.inputs.iter().map(|(n, _)| *n).collect();
            let sub = format!(
                "executable = {}\narguments = {}\ninitialdir = {}\n{}output = stdout\n\
                 error = stderr\nlog = job.log\nqueue\n",
                module.display(),
                g.args.join(" "),
                dir.display(),
                if inputs.is_empty() {
                    String::new()
                } else {
                    format!("transfer_input_files = {}\n", inputs.join(", "))
                },
            );
            let f = jobs.join(format!("{}-{kind}.sub", g.name));
            std::fs::write(&f, sub).unwrap();
            p.ok("alice", &["submit", f.to_str().unwrap()]);
        }
    }
    wait_or(
        "the four jobs to finish",
        Duration::from_secs(180),
        || p.history().len() == 4,
        || p.logs(),
    );
    for h in p.history() {
        assert_eq!(int(&h, "ExitCode"), 0, "{h}");
    }
    for g in &guests {
        for kind in ["plain", "compiled"] {
            let dir = jobs.join(format!("{}-{kind}", g.name));
            let mut left = files(&dir);
            let stdout = left.remove("stdout").unwrap();
            let err = left.remove("stderr").unwrap();
            assert!(err.is_empty(), "{} ({kind}): {}", g.name, String::from_utf8_lossy(&err));
            left.remove("job.log");
            assert_same(&format!("a {kind} job"), g, &stdout, &left);
        }
    }
}

/// The Go guest SDK's own tests (guest-sdk/go: names checked as the Rust
/// SDK checks them, literals written as it writes them, and what it does
/// outside andes), built natively by samples/guests/build.sh with the
/// pinned Go; a missing build fails here, never passes.
#[test]
fn the_go_guest_sdks_own_tests_pass() {
    let o = Command::new(native("andes_go_test")).arg("-test.v").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.lines().last() == Some("PASS"),
        "the Go guest SDK's tests:\n{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("--- PASS: TestWhitelist"), "{out}");
}

/// The same tests built for wasip1 and run by `andes run`, where they call
/// the real host: every import's lowering (arguments in, return areas and
/// `cabi_realloc` out, errors with their reasons) is checked against it, and
/// the log lines come out as the job's.
#[test]
fn the_go_guest_sdks_tests_pass_under_andes_run() {
    let d = tempfile::tempdir().unwrap();
    let o = common::andes()
        .arg("run")
        .arg("--dir")
        .arg(d.path())
        .arg(sample("andes_go_test"))
        .arg("-test.v")
        .output()
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(
        o.status.success()
            && out.lines().last() == Some("PASS")
            && err.contains("exited normally with return value 0"),
        "the Go guest SDK's tests under andes:\n{out}{err}"
    );
    for t in ["TestAttributesGoThroughTheHost", "TestCheckpointsGoThroughTheHost", "TestWhitelist"]
    {
        assert!(out.contains(&format!("--- PASS: {t} ")), "{t}:\n{out}");
    }
    for (level, line) in [("Debug", "debug"), ("Info", "info"), ("Warn", "warn")] {
        assert!(err.contains(&format!("andes: job log [{level}]: go sdk: {line}\n")), "{err}");
    }
    assert!(err.contains("andes: job log [Error]: go sdk: error \u{fffd}\n"), "{err}");
}

/// The Progress a job last reported, as the queue shows it.
fn progress(ad: &classad::ClassAd) -> f64 {
    match ad.eval_attr("Progress") {
        classad::Value::Real(r) => r,
        _ => 0.0,
    }
}

/// A Go job that uses the Go guest SDK (samples/guests/go/coopgo), in a
/// pool of two hosts with cooperative checkpoints: vacated twice mid-run by
/// draining the host it runs on, each time it saves through the SDK and
/// exits 85, resumes on the other host from what it saved, and ends
/// with what an uninterrupted run prints. Meanwhile its Progress reaches
/// the queue while it runs, the line it logs on each resume is a generic
/// event in its user log, and the SDK refuses to set JobStatus without
/// asking the host.
#[test]
fn a_go_job_using_the_sdk_is_vacated_twice_and_resumes_from_what_it_saved() {
    let p = Pool::new(VACATING_POOL, 2);
    // About 10 s of work for the module as andes runs it; each saved state
    // carries 1 MiB more, which the job checks when it loads it.
    const TERMS: &str = "3000000000";
    let whole = std::thread::spawn(|| {
        let o = Command::new(native("coopgo")).arg(TERMS).output().unwrap();
        assert!(o.status.success(), "native coopgo: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    });
    p.submit(
        "alice",
        "g",
        &format!(
            "executable = {}\narguments = {TERMS} 1\noutput = g.out\nerror = g.err\nlog = g.log\n\
             +WasmCheckpoint = \"cooperative\"\ncheckpoint_exit_code = 85\nqueue\n",
            sample("coopgo").display()
        ),
    );
    // Each vacate comes once the run has reported more than 0.3 s of CPU
    // (not `cpu`, the run before's final figure, which the queue shows until
    // this run's first update).
    let (mut cpu, mut done) = (0.0, 0.0);
    // The slots it left; each vacate drains the host it ran on, so that it
    // resumes on the other.
    let (mut left, mut drained) = (Vec::new(), None);
    let job = |p: &Pool| p.queue().into_iter().next();
    for starts in 1..=2 {
        wait_or(
            "the Go job to run a while",
            Duration::from_secs(90),
            || {
                job(&p).is_some_and(|a| {
                    let c = match a.eval_attr("RemoteUserCpu") {
                        classad::Value::Real(c) => c,
                        _ => 0.0,
                    };
                    int(&a, "JobStatus") == 2
                        && int(&a, "NumJobStarts") == starts
                        && c > 0.3
                        && c != cpu
                        && progress(&a) > done
                })
            },
            || format!("{}\nqueue: {:?}", p.logs(), p.queue()),
        );
        left.push(p.move_running_job(&mut drained));
        // The run ends with the job's save and exit code 85; what it set
        // comes back with it: a Progress past the run before's, short of 1.
        wait_or(
            "the vacated run's Progress in the queue",
            Duration::from_secs(60),
            || {
                job(&p).is_some_and(|a| {
                    (int(&a, "JobStatus") != 2 || int(&a, "NumJobStarts") > starts)
                        && progress(&a) > done
                        && progress(&a) < 1.0
                })
            },
            || format!("{}\nqueue: {:?}", p.logs(), p.queue()),
        );
        let a = job(&p).unwrap();
        done = progress(&a);
        if let classad::Value::Real(c) = a.eval_attr("RemoteUserCpu") {
            cpu = c;
        }
    }
    wait_or(
        "the Go job to finish",
        Duration::from_secs(180),
        || p.history().len() == 1,
        || p.logs(),
    );
    let h = &p.history()[0];
    assert_eq!(int(h, "ExitCode"), 0, "{h}");
    assert_eq!(int(h, "NumJobStarts"), 3, "{h}");
    assert!(int(h, "NumCkpts") >= 2, "{h}");
    assert_eq!(progress(h), 1.0, "{h}");
    let finished_on = common::pool::text(h, "LastRemoteHost");
    assert!(left[0] != left[1] && left[1] != finished_on, "{left:?}, then {finished_on}");
    let jobs = p.path().join("jobs");
    let out = std::fs::read_to_string(jobs.join("g.out")).unwrap();
    assert!(out.starts_with(&format!("sum of 1/k^2 for k = 1..={TERMS}: ")), "{out}");
    assert_eq!(out, whole.join().unwrap(), "the vacated job's output differs from a whole run's");
    let err = std::fs::read_to_string(jobs.join("g.err")).unwrap();
    assert!(err.contains("coopgo: resuming at term"), "{err}");
    assert!(
        err.contains("coopgo: JobStatus not set: a job may not set attribute `JobStatus`"),
        "{err}"
    );
    // The two resumed runs logged where they resumed (the SDK's Info), each
    // a generic event of its user log.
    let log = std::fs::read_to_string(jobs.join("g.log")).unwrap();
    let logged = log
        .lines()
        .filter(|l| l.contains("job log [Info]: resuming from a saved state at term"))
        .count();
    assert_eq!(logged, 2, "{log}");
}

/// The same Go job under `andes run`, vacated by Ctrl-C (SIGINT) once it
/// runs: it saves through the SDK and exits 85; run again, it loads what it
/// saved, says so in a log line that andes shows as the job's, and prints
/// what its native build prints.
#[cfg(unix)]
#[test]
fn a_go_job_using_the_sdk_resumes_under_andes_run_and_logs_it() {
    use std::io::BufRead;
    const TERMS: &str = "1000000000";
    let d = tempfile::tempdir().unwrap();
    let run = || {
        let mut c = common::andes();
        c.args(["run", "--dir"])
            .arg(d.path())
            .arg("--checkpoint-dir")
            .arg(d.path().join("state"))
            .arg(sample("coopgo"))
            .arg(TERMS);
        c
    };
    let mut child = run().stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("coopgo: JobStatus not set") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // Its first line: the job runs (and the SDK refused JobStatus).
    rx.recv_timeout(Duration::from_secs(60)).expect("coopgo's first line");
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    child.wait().unwrap();
    let err = reader.join().unwrap();
    assert!(err.contains("coopgo: vacated after"), "{err}");
    assert!(err.contains("exited normally with return value 85"), "{err}");
    let o = run().output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("exited normally with return value 0"), "{err}");
    assert!(err.contains("andes: job log [Info]: resuming from a saved state at term"), "{err}");
    let whole = Command::new(native("coopgo")).arg(TERMS).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&whole.stdout));
}
