//! `cargo xtask setup`: installs what the test suite needs, where it is
//! missing: the Rust targets, and Debian's and PyPI's tools the tests drive
//! (mingw-w64 and clang for the cross checks, wine, qemu-user and an aarch64
//! gcc for the other platforms, Slurm, chromium and chromedriver, libfaketime,
//! mdbook, HTCondor's Python package, ezdag and htcondor-dags). `cargo xtask
//! test` runs it first, and CI through it, so the list is kept once.
//! Installing from Debian needs root; without it, what is missing is named and
//! the tests that need it fail (unless `ANDES_ALLOW_NOT_RUN=1`).

use std::path::Path;
use std::process::Command;

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn sh(script: &str) -> bool {
    Command::new("sh").args(["-c", script]).status().is_ok_and(|s| s.success())
}

/// Installs Debian `packages` (quietly; an `apt-get update` first only if the
/// plain install fails).
fn apt(packages: &[&str]) -> bool {
    let list = packages.join(" ");
    sh(&format!("apt-get install -y -qq {list} >/dev/null 2>&1"))
        || sh(&format!("apt-get update -qq && apt-get install -y -qq {list} >/dev/null"))
}

/// Installs what is missing; true when everything is there afterwards.
pub fn run() -> bool {
    let mut missing = Vec::new();
    if Command::new("rustup").arg("--version").output().is_ok() {
        crate::run("rustup", &["component", "add", "rustfmt", "clippy"]);
        crate::run(
            "rustup",
            &[
                "target",
                "add",
                "wasm32-wasip1",
                "x86_64-pc-windows-gnu",
                "aarch64-unknown-linux-gnu",
            ],
        );
    }
    let debian: [(&str, bool, &[&str]); 6] = [
        ("mingw-w64", have("x86_64-w64-mingw32-gcc"), &["mingw-w64"]),
        ("clang", have("clang"), &["clang"]),
        (
            "wine64, qemu-user-static, gcc-aarch64-linux-gnu",
            Path::new("/usr/lib/wine/wine64").exists()
                && have("qemu-aarch64-static")
                && have("aarch64-linux-gnu-gcc"),
            &["wine64", "qemu-user-static", "gcc-aarch64-linux-gnu"],
        ),
        ("slurm-wlm", have("slurmctld"), &["slurm-wlm"]),
        (
            "chromium, chromium-driver",
            have("chromium") && have("chromedriver"),
            &["chromium", "chromium-driver"],
        ),
        (
            "libfaketime",
            Path::new("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1").exists(),
            &["libfaketime"],
        ),
    ];
    for (what, present, packages) in debian {
        if !present {
            eprintln!("xtask: installing {what}");
            if !apt(packages) {
                missing.push(what);
            }
        }
    }
    if !have("mdbook") {
        eprintln!("xtask: installing mdbook");
        let cargo = crate::cargo_program();
        if !crate::run(
            &cargo,
            // A debug build: it renders one small book per run, and builds
            // in a third of a release build's time.
            &[
                "install",
                "mdbook",
                "--locked",
                "--debug",
                "--version",
                "0.5.4",
                "--no-default-features",
            ],
        ) {
            missing.push("mdbook");
        }
    }
    // PyPI's packages the Python tests use (`cargo xtask python` installs
    // them into its venv too): HTCondor's own bindings, for the tests that
    // read andes's event logs with HTCondor's reader, and ezdag and
    // htcondor-dags, whose DAG files the tests run.
    for (module, package, why) in crate::python::PYPI {
        if !crate::python::has_module(Path::new("python3"), module) {
            eprintln!("xtask: installing {package} (pip), {why}");
            let ok = sh(&format!("python3 -m pip install --quiet {package} >/dev/null 2>&1"))
                || sh(&format!(
                    "python3 -m pip install --quiet --break-system-packages {package} >/dev/null 2>&1"
                ));
            if !ok {
                missing.push(package);
            }
        }
    }
    if missing.is_empty() {
        eprintln!("xtask: setup: everything the tests need is installed");
        true
    } else {
        eprintln!(
            "xtask: setup: could not install {} (installing from Debian needs root); the tests \
             that need them will fail unless {}=1",
            missing.join(", "),
            crate::ALLOW_NOT_RUN
        );
        false
    }
}
