//! `andes run` as a user runs it: the job's own stdio, how it ended, the
//! exit status, and the `--json` line scripts rely on.

use crate::common;

use assert_cmd::Command;
use common::Scratch;
use std::path::{Path, PathBuf};

fn sample(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples/target/wasm32-wasip1/release")
        .join(format!("{name}.wasm"));
    assert!(p.exists(), "{}: build the samples first (`cargo xtask test` does)", p.display());
    p
}

fn sandbox(tag: &str) -> Scratch {
    Scratch::new(&format!("run-cli-{tag}"))
}

fn last_json(stdout: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(stdout);
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_job_runs_with_its_args_env_and_stdin_and_its_exit_code_is_ours() {
    let dir = sandbox("hello");
    let out = Command::cargo_bin("andes")
        .unwrap()
        .args(["run", "--json", "--env", "GREETING=hi", "--dir"])
        .arg(&dir)
        .arg(sample("hello"))
        .args(["a", "b c"])
        .write_stdin("x\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(
            "argv[0] = hello.wasm\nargv[1] = a\nargv[2] = b c\nGREETING = hi\nstdin: X\n"
        ),
        "{text}"
    );
    assert!(dir.join("hello.out").exists());
    let j = last_json(&out.stdout);
    assert_eq!(j["ExitCode"], 0);
    assert_eq!(j["ExitBySignal"], false);
    // Where the host can stop unmetered guests, a job that needs no fuel
    // runs unmetered and nobody counts its fuel.
    if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        assert_eq!(j.get("WasmFuelConsumed"), None, "{j}");
    } else {
        assert!(j["WasmFuelConsumed"].as_i64().unwrap() > 0);
    }
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("job exited normally with return value 0")
    );

    // --meter-fuel counts it anyway.
    let out = Command::cargo_bin("andes")
        .unwrap()
        .args(["run", "--json", "--meter-fuel", "--dir"])
        .arg(&dir)
        .arg(sample("hello"))
        .write_stdin("x\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let j = last_json(&out.stdout);
    assert!(j["WasmFuelConsumed"].as_i64().unwrap() > 0, "{j}");

    let out = Command::cargo_bin("andes")
        .unwrap()
        .args(["run", "--dir"])
        .arg(&dir)
        .arg(sample("exit_code"))
        .arg("42")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(42));
}

#[test]
fn limits_end_in_holds_with_their_codes() {
    let dir = sandbox("limits");
    let run = |args: &[&str], module: &str| {
        Command::cargo_bin("andes")
            .unwrap()
            .args(["run", "--json", "--dir"])
            .arg(&dir)
            .args(args)
            .arg(sample(module))
            .output()
            .unwrap()
    };
    let out = run(&["--memory", "32M"], "membomb");
    let j = last_json(&out.stdout);
    assert_eq!(j["HoldReasonCode"], 34, "{j}");
    assert!(j["HoldReason"].as_str().unwrap().contains("RequestMemory allows 32.0 MiB"));
    assert_eq!(out.status.code(), Some(125));

    let out = run(&["--fuel", "2000000"], "spin");
    assert_eq!(last_json(&out.stdout)["HoldReasonCode"], 101);

    let out = run(&[], "trap_unreachable");
    let j = last_json(&out.stdout);
    assert_eq!((j["ExitBySignal"].clone(), j["ExitSignal"].clone()), (true.into(), 4.into()));
    assert_eq!(j["WasmTrap"], "unreachable");
    assert_eq!(out.status.code(), Some(128 + 4));
}

#[test]
fn bad_input_is_a_clear_error() {
    let out =
        Command::cargo_bin("andes").unwrap().args(["run", "/nonexistent.wasm"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading /nonexistent.wasm"));
    let out = Command::cargo_bin("andes")
        .unwrap()
        .args(["run", "--memory", "lots"])
        .arg(sample("hello"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`lots` is not a size"));
}

#[cfg(unix)]
#[test]
fn ctrl_c_vacates_and_a_second_ctrl_c_kills() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = sandbox("ctrlc");
    let bin = assert_cmd::cargo::cargo_bin("andes");
    let mut child = std::process::Command::new(bin)
        .args(["run", "--json", "--grace", "1h", "--dir"])
        .arg(&dir)
        // `deaf` hears a vacate and ignores it (a plain job would end at the
        // first Ctrl-C: it cannot hear one).
        .arg(sample("deaf"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.starts_with("andes: running"), "{line}");
    let pid = child.id().to_string();
    let sigint = || std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap();
    sigint();
    line.clear();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("vacating the job"), "{line}");
    sigint();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(rest.contains("killing the job") && rest.contains("job was vacated"), "{rest}");
    assert_eq!(out.status.code(), Some(130));
}

/// Runs `andes run --checkpoint-every 100ms --checkpoint-dir CKPT` on
/// `module arg` in `dir`, and kills it with SIGKILL (no chance to checkpoint
/// then) once `made` exists: before it ends, since a 100 ms period and a run
/// of seconds leave a wide margin.
fn kill_once_checkpointed(
    dir: &Path,
    ckpt: &Path,
    module: &Path,
    arg: &str,
    made: impl Fn() -> bool,
) {
    kill_once_checkpointed_with(&[], dir, ckpt, module, arg, made)
}

/// As [`kill_once_checkpointed`], with more options for `andes run`.
fn kill_once_checkpointed_with(
    options: &[&str],
    dir: &Path,
    ckpt: &Path,
    module: &Path,
    arg: &str,
    made: impl Fn() -> bool,
) {
    let mut child = spawn_checkpointed(options, dir, ckpt, module, arg, made);
    child.kill().unwrap();
    let killed = child.wait_with_output().unwrap();
    assert!(killed.stdout.is_empty(), "it had already finished");
}

/// Starts `andes run --checkpoint-every 100ms --checkpoint-dir CKPT` and
/// returns once `made` holds.
fn spawn_checkpointed(
    options: &[&str],
    dir: &Path,
    ckpt: &Path,
    module: &Path,
    arg: &str,
    made: impl Fn() -> bool,
) -> std::process::Child {
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("andes"))
        .args(["run", "--checkpoint-every", "100ms"])
        .args(options)
        .arg("--dir")
        .arg(dir)
        .arg("--checkpoint-dir")
        .arg(ckpt)
        .arg(module)
        .arg(arg)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !made() {
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "no checkpoint within 60 s");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child
}

/// `andes run --restore SNAPSHOT` on `module arg` in `dir`, to its end.
fn run_restoring(dir: &Path, snapshot: &Path, module: &Path, arg: &str) -> std::process::Output {
    Command::cargo_bin("andes")
        .unwrap()
        .args(["run", "--dir"])
        .arg(dir)
        .arg("--restore")
        .arg(snapshot)
        .arg(module)
        .arg(arg)
        .output()
        .unwrap()
}

/// `andes run [--checkpoint-dir CKPT]` on `module arg` in `dir`, to its end.
fn run_to_end(dir: &Path, ckpt: Option<&Path>, module: &Path, arg: &str) -> std::process::Output {
    let mut cmd = Command::cargo_bin("andes").unwrap();
    cmd.args(["run", "--dir"]).arg(dir);
    if let Some(c) = ckpt {
        cmd.arg("--checkpoint-dir").arg(c);
    }
    cmd.arg(module).arg(arg).output().unwrap()
}

/// A cooperative job run with `--checkpoint-dir`, killed with SIGKILL (no
/// chance to save then), resumes in a fresh process from its last periodic
/// save and prints exactly what an uninterrupted run prints.
#[test]
fn a_cooperative_job_killed_outright_resumes_from_its_last_save() {
    let dir = sandbox("coop");
    let ckpt = dir.join("ckpt");
    let terms = "900000000";
    let whole = run_to_end(&dir, None, &sample("coop"), terms);
    assert_eq!(whole.status.code(), Some(0));
    let saved = ckpt.join("saved.state");
    kill_once_checkpointed(&dir, &ckpt, &sample("coop"), terms, || saved.exists());
    let resumed = run_to_end(&dir, Some(&ckpt), &sample("coop"), terms);
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{err}");
    assert!(err.contains("resuming at term"), "{err}");
    assert_eq!(resumed.stdout, whole.stdout);
}

/// A compiled job's place, apart from its checkpoints: a fresh directory
/// `top` holding the job's sandbox `top/job` and `top/primes.wasm`, made
/// by `andes compile samples/primes.wasm`. Returns `(top, job, module)`.
fn compiled_primes(name: &str) -> (Scratch, PathBuf, PathBuf) {
    let top = sandbox(name);
    let dir = top.join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let module = top.join("primes.wasm");
    let compiled = Command::cargo_bin("andes")
        .unwrap()
        .args(["compile"])
        .arg(sample("primes"))
        .arg("-o")
        .arg(&module)
        .output()
        .unwrap();
    assert_eq!(compiled.status.code(), Some(0), "{}", String::from_utf8_lossy(&compiled.stderr));
    (top, dir, module)
}

/// The snapshots in a checkpoint directory, in order: they are numbered
/// files, so sorting their names sorts them.
fn numbered(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.retain(|n| n.starts_with("snapshot-"));
    v.sort();
    v
}

/// `--checkpoint-keep 2`: only the latest two snapshots stay, with only the
/// contents they name (files and memory packs), once a run killed outright (which may die
/// between writing a snapshot and pruning the oldest: the next run prunes
/// first) is resumed and then vacated.
#[cfg(unix)]
#[test]
fn checkpoint_keep_leaves_the_latest_snapshots_and_their_contents() {
    let (top, dir, module) = compiled_primes("keep");
    let kept = top.join("kept");
    let n = "400000000";
    let keep = ["--checkpoint-keep", "2"];
    kill_once_checkpointed_with(&keep, &dir, &kept, &module, n, || numbered(&kept).len() >= 2);
    // Resumed from its last snapshot, then vacated (SIGINT) once it has
    // taken more: it stops after a last snapshot, pruned.
    let child = spawn_checkpointed(&keep, &dir, &kept, &module, n, || {
        numbered(&kept).last().is_some_and(|l| l.as_str() >= "snapshot-00000005")
    });
    let pid = child.id().to_string();
    std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.stdout.is_empty(), "it had already finished: {err}");
    assert!(err.contains("resumes from its snapshot"), "{err}");
    assert!(err.contains("the job stops"), "{err}");
    let left = numbered(&kept);
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left[0].as_str() >= "snapshot-00000005", "{left:?}");
    let named: std::collections::BTreeSet<String> = left
        .iter()
        .flat_map(|f| {
            let i = andes_snapshot::inspect(&std::fs::read(kept.join(f)).unwrap()).unwrap();
            i.header.contents().map(|c| c.blake3.to_string()).collect::<Vec<_>>()
        })
        .collect();
    let stored: std::collections::BTreeSet<String> = std::fs::read_dir(kept.join("blobs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(stored, named);
}

/// `andes compile`, then `andes run --checkpoint-every`: the job is
/// snapshotted while it runs, killed with SIGKILL, and the same command
/// resumes it from the snapshot in a fresh process, ending exactly as an
/// uninterrupted run does; the snapshot is removed once the job has ended.
#[test]
fn a_compiled_job_killed_outright_resumes_from_its_last_snapshot() {
    let (top, dir, module) = compiled_primes("transparent");
    let ckpt = top.join("ckpt");
    let n = "400000000";
    let whole = run_to_end(&dir, None, &module, n);
    assert_eq!(whole.status.code(), Some(0));
    kill_once_checkpointed(&dir, &ckpt, &module, n, || numbered(&ckpt).len() >= 2);
    let taken = numbered(&ckpt);
    assert_eq!(taken[0], "snapshot-00000001", "{taken:?}");
    assert_eq!(taken[1], "snapshot-00000002", "{taken:?}");
    // Any of them resumes the job: the first, then (by default) the last.
    let first = top.join("first");
    std::fs::copy(ckpt.join(&taken[0]), &first).unwrap();
    let older = run_restoring(&dir, &ckpt.join(&taken[0]), &module, n);
    assert_eq!(older.status.code(), Some(0), "{}", String::from_utf8_lossy(&older.stderr));
    assert_eq!(older.stdout, whole.stdout);
    // The same command resumes from the last and numbers on from it.
    kill_once_checkpointed(&dir, &ckpt, &module, n, || numbered(&ckpt).last() > taken.last());
    let resumed = run_to_end(&dir, Some(&ckpt), &module, n);
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{err}");
    assert!(err.contains("resumes from its snapshot"), "{err}");
    assert_eq!(resumed.stdout, whole.stdout);
    assert!(numbered(&ckpt).is_empty(), "the ended job's snapshots are gone");

    // A module that was not compiled has no snapshots to restore.
    let out = Command::cargo_bin("andes")
        .unwrap()
        .args(["run", "--restore"])
        .arg(&first)
        .arg(sample("primes"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not compiled by `andes compile`"));

    // Checkpoints inside the job's own sandbox are refused.
    let out = run_to_end(&dir, Some(&dir.join("ckpt")), &module, n);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is inside the job's sandbox"));
}

/// `andes run` checkpointing every 100 ms with every snapshot kept, killed
/// with SIGKILL at moments a seed picks (`ANDES_FAULT_SEED`, default 1: up
/// to 150 ms after a new snapshot appears, so often while the next one's
/// memory pack, files or file are being written): after each kill every
/// snapshot left is whole (`andes snapshot inspect` checks its hash, its
/// signature and that every content it names is in `blobs/`), the same
/// command resumes from the last, building its chain on, and the first, a
/// middle and the last snapshot each restore the job to the uninterrupted
/// output.
#[cfg(unix)]
#[test]
fn a_kill_at_any_moment_leaves_every_snapshot_of_a_chain_restorable() {
    let (top, dir, module) = compiled_primes("chain-kills");
    let ckpt = top.join("ckpt");
    let n = "1000000000";
    let whole = run_to_end(&dir, None, &module, n);
    assert_eq!(whole.status.code(), Some(0));
    let mut x: u64 =
        std::env::var("ANDES_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut kills = 0;
    for _ in 0..6 {
        let before = numbered(&ckpt).last().cloned();
        let mut child =
            spawn_checkpointed(&["--checkpoint-keep", "0"], &dir, &ckpt, &module, n, || {
                numbered(&ckpt).last() > before.as_ref()
            });
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        std::thread::sleep(std::time::Duration::from_millis((x >> 33) % 150));
        child.kill().unwrap();
        if !child.wait_with_output().unwrap().stdout.is_empty() {
            break;
        }
        kills += 1;
        for s in numbered(&ckpt) {
            let out = Command::cargo_bin("andes")
                .unwrap()
                .args(["snapshot", "inspect"])
                .arg(ckpt.join(&s))
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(0), "after kill {kills}, {s}:\n{text}");
            assert!(text.contains("every content present"), "{text}");
        }
    }
    assert!(kills >= 3, "the job ended after {kills} kills");
    // Each run waited for a snapshot of its own before its kill; a loaded
    // machine may kill a run before its second, so one a run is the floor.
    let all = numbered(&ckpt);
    assert!(all.len() >= kills, "{all:?}");
    for s in [&all[0], &all[all.len() / 2], &all[all.len() - 1]] {
        let out = run_restoring(&dir, &ckpt.join(s), &module, n);
        assert_eq!(out.status.code(), Some(0), "{s}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, whole.stdout, "restored from {s}");
    }
}
