//! The C guest SDK, `guest-sdk/c/andes.h`: its own tests
//! (`guest-sdk/c/test_andes.c`) natively and under `andes run`, the header
//! from C++, and `coopsum` (`samples/guests/c/coopsum.c`), a C job that
//! checkpoints cooperatively through it, vacated and resumed in a pool.
//! samples/guests/build.sh builds them all with the pinned zig; a missing
//! build fails here, never passes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use classad::Value;
use common::pool::{Pool, VACATING_POOL, int, sample, text, wait_or};

/// The native build of a C guest (samples/guests/build.sh).
fn native(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/target/native").join(name);
    assert!(p.exists(), "{}: build the samples first (`cargo xtask samples` does)", p.display());
    p
}

/// `andes run` of `module` with `args` in a fresh sandbox: its stdout and
/// stderr; the run must exit 0.
fn andes_run(module: &Path, extra: &[&str], args: &[&str]) -> (String, String) {
    let d = tempfile::tempdir().unwrap();
    let o = common::andes()
        .arg("run")
        .arg("--dir")
        .arg(d.path())
        .args(extra)
        .arg(module)
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        o.status.success() && err.contains("exited normally with return value 0"),
        "andes run {}: {err}",
        module.display()
    );
    (String::from_utf8_lossy(&o.stdout).into_owned(), err)
}

/// The C guest SDK passes its own tests (guest-sdk/c/test_andes.c):
/// natively, its pure parts and how it behaves outside andes (nothing
/// requested, nothing to load, every set refused as not under andes after
/// the name checks, log lines on standard error); and built for wasm32-wasi
/// and run by `andes run` with a job ad, every import with a host behind it:
/// attributes read and set, the host's refusals and saved states (strings
/// the host allocates with the header's `cabi_realloc`), and log lines.
#[test]
fn the_c_sdk_passes_its_tests_natively_and_under_andes() {
    let o = Command::new(native("test_andes")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "native test_andes: {err}");
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("ok: "), "{o:?}");
    // Natively, log lines go to standard error as the Rust SDK writes them.
    assert!(err.contains("[andes info] formatted 42 line\n"), "{err}");

    let d = tempfile::tempdir().unwrap();
    let ad = d.path().join("job.ad");
    std::fs::write(&ad, "Owner = \"alice\"\nRequestCpus = 3\nWantX = true\nRatio = 0.5\n").unwrap();
    let (out, err) = andes_run(&sample("test_andes"), &["--ad", ad.to_str().unwrap()], &[]);
    assert!(out.starts_with("ok: "), "{out}{err}");
    assert!(err.contains("andes: job log [Info]: test_andes: a line at info\n"), "{err}");
    assert!(err.contains("andes: job log [Warn]: test_andes: 2 at warn\n"), "{err}");
}

/// The Progress a job last reported, as the queue or the history shows it.
fn progress(ad: &classad::ClassAd) -> f64 {
    match ad.eval_attr("Progress") {
        Value::Real(r) => r,
        _ => 0.0,
    }
}

/// What `coopsum` prints for `terms` run natively, where it is never stopped:
/// the known-good output of every run of it under andes, however often it
/// was stopped.
fn coopsum_native(terms: &str) -> String {
    let o = Command::new(native("coopsum")).arg(terms).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "native coopsum: {err}");
    // Natively the SDK refuses JobStatus too, before asking anyone.
    assert!(err.contains("coopsum: JobStatus: a job may not set attribute `JobStatus`"), "{err}");
    assert!(!err.contains("resuming"), "{err}");
    String::from_utf8(o.stdout).unwrap()
}

/// `coopsum` built as C and, from the same source, as C++ (the header from
/// C++): each prints what the Rust `coop` prints for the same sum, and,
/// killed outright by SIGKILL after a periodic save under `andes run
/// --checkpoint-dir`, resumes in a fresh process from what it saved, says so
/// in a log line, and prints the same.
#[test]
fn the_c_sample_built_as_c_and_cpp_resumes_from_its_last_save() {
    const TERMS: &str = "900000000";
    let want = coopsum_native(TERMS);
    assert!(want.starts_with(&format!("sum of 1/k^2 for k = 1..={TERMS}: ")), "{want}");
    let (coop, _) = andes_run(&sample("coop"), &[], &[TERMS]);
    assert_eq!(coop, want, "the Rust coop and the C coopsum differ");
    for name in ["coopsum", "coopsum_cpp"] {
        let module = sample(name);
        let ckpt = tempfile::tempdir().unwrap();
        let saved = ckpt.path().join("saved.state");
        let mut child = common::andes()
            .args(["run", "--checkpoint-every", "100ms", "--checkpoint-dir"])
            .arg(ckpt.path())
            .arg(&module)
            .arg(TERMS)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_or(
            "a saved state",
            Duration::from_secs(60),
            || {
                let running = child.try_wait().unwrap().is_none();
                assert!(running, "{name} ended before it was killed: make its run longer");
                saved.exists()
            },
            String::new,
        );
        child.kill().unwrap(); // SIGKILL: no chance to save then
        let killed = child.wait_with_output().unwrap();
        assert!(killed.stdout.is_empty(), "{name} had already finished");
        let dir = ckpt.path().to_str().unwrap();
        let (out, err) = andes_run(&module, &["--checkpoint-dir", dir], &[TERMS]);
        assert_eq!(out, want, "{name} resumed: {err}");
        assert!(err.contains("coopsum: resuming at term"), "{name}: {err}");
        assert!(
            err.contains("andes: job log [Info]: resuming from a saved state at term"),
            "{err}"
        );
    }
}

/// In a pool of two hosts, the C cooperative sample (`coopsum`, through
/// andes.h) is vacated twice mid-run (a soft kill: it saves and exits with
/// 85) by draining the host it runs on, resumes each time on the other host
/// from the state it saved, and ends with the output of an
/// uninterrupted run. The Progress it sets reaches the queue while it runs
/// (with the host's periodic updates) and grows, 1 in the history; the
/// line it logs on each resume is a generic event in its user log; and the
/// SDK refused its attempt to set JobStatus.
#[test]
fn a_c_cooperative_job_vacated_twice_resumes_from_what_it_saved() {
    let p = Pool::new(VACATING_POOL, 2);
    // About 10 s of work; each vacate comes once a run has reported more than
    // 0.3 s of CPU, so the job is still running at the second.
    const TERMS: &str = "3000000000";
    p.submit(
        "alice",
        "cs",
        &format!(
            "executable = {}\narguments = {TERMS}\noutput = cs.out\nerror = cs.err\n\
             log = cs.log\n+WasmCheckpoint = \"cooperative\"\ncheckpoint_exit_code = 85\nqueue\n",
            sample("coopsum").display()
        ),
    );
    let whole = coopsum_native(TERMS);
    let queue = || p.queue().iter().map(|a| a.to_string()).collect::<Vec<_>>().join("\n");
    let (mut last, mut done) = (-1.0, 0.0);
    // The slots it left; each vacate drains the host it ran on, so that it
    // resumes on the other.
    let (mut left, mut drained) = (Vec::new(), None);
    for starts in 1..=2 {
        let mut seen = 0.0;
        wait_or(
            "the job to run a while",
            Duration::from_secs(90),
            || {
                p.queue().first().is_some_and(|a| {
                    seen = match a.eval_attr("RemoteUserCpu") {
                        Value::Real(c) => c,
                        _ => 0.0,
                    };
                    int(a, "JobStatus") == 2
                        && int(a, "NumJobStarts") == starts
                        && seen > 0.3
                        && seen != last
                        && progress(a) > done
                })
            },
            || format!("{}\n{}", p.logs(), queue()),
        );
        left.push(p.move_running_job(&mut drained));
        // The run ends with the job's save and exit code 85; the Progress
        // it set comes back with it: past the run before's, short of 1.
        wait_or(
            "the vacated run's Progress in the queue",
            Duration::from_secs(60),
            || {
                p.queue().first().is_some_and(|a| {
                    (int(a, "JobStatus") != 2 || int(a, "NumJobStarts") > starts)
                        && progress(a) > done
                        && progress(a) < 1.0
                })
            },
            || format!("{}\n{}", p.logs(), queue()),
        );
        let a = p.queue().into_iter().next().unwrap();
        done = progress(&a);
        last = match a.eval_attr("RemoteUserCpu") {
            Value::Real(c) => c,
            _ => seen,
        };
    }
    wait_or("the job to finish", Duration::from_secs(180), || p.history().len() == 1, || p.logs());
    let h = &p.history()[0];
    assert_eq!(int(h, "ExitCode"), 0, "{h}");
    assert_eq!(int(h, "NumJobStarts"), 3, "{h}");
    assert!(int(h, "NumCkpts") >= 2, "{h}");
    assert_eq!(progress(h), 1.0, "{h}");
    let finished_on = text(h, "LastRemoteHost");
    assert!(left[0] != left[1] && left[1] != finished_on, "{left:?}, then {finished_on}");
    let jobs = p.path().join("jobs");
    let out = std::fs::read_to_string(jobs.join("cs.out")).unwrap();
    assert!(out.starts_with(&format!("sum of 1/k^2 for k = 1..={TERMS}: ")), "{out}");
    assert_eq!(out, whole);
    let err = std::fs::read_to_string(jobs.join("cs.err")).unwrap();
    assert!(err.contains("coopsum: resuming at term"), "{err}");
    assert!(err.contains("coopsum: JobStatus: a job may not set attribute `JobStatus`"), "{err}");
    let log = std::fs::read_to_string(jobs.join("cs.log")).unwrap();
    assert!(log.contains("Job terminated"), "{log}");
    // The two resumed runs logged where they resumed, each a generic event.
    let logged: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("job log [Info]: resuming from a saved state at term"))
        .collect();
    assert_eq!(logged.len(), 2, "{log}");
    assert!(logged.iter().all(|l| l.starts_with("008 (")), "{log}");
}
