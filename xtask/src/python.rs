//! `cargo xtask python`: builds the Python package (`python/`, PyO3 + maturin) as
//! a wheel, installs it into a venv of its own (`target/python-venv`), and runs its
//! pytest suite against the `andes` just built; then installs the same wheel with
//! pip outside the venv and runs it with the machine's Python
//! (`python/tools/wheel_smoke.py`, as `cargo xtask wheels` does), and checks the
//! package and its tests with `mypy --strict` (its type stubs complete).
//!
//! The wheel is built with cargo's `dev` profile, in `target/python`;
//! `pip install ./python` (the README's way) builds the same crate in release.
//! PyPI's packages of [`PYPI`] are installed into the venv where missing:
//! HTCondor's own `htcondor` (the test that reads andes's job event logs with
//! HTCondor's reader), and ezdag and htcondor-dags (the tests that run the DAG
//! files they write). Without one, the tests that need it fail (they report
//! NOT RUN only under `ANDES_ALLOW_NOT_RUN=1`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::root;

/// The PyPI packages the Python tests use beside andes, where PyPI has them
/// for this machine: (the module imported, the package, what for).
pub const PYPI: [(&str, &str, &str); 3] = [
    ("htcondor2", "htcondor", "HTCondor's reader of event logs, and its dags"),
    ("ezdag", "ezdag", "a tool that writes DAG files"),
    ("htcondor_dags", "htcondor-dags", "a tool that writes DAG files"),
];

/// The mypy that checks the package's type stubs against its tests
/// (`mypy --strict`, configured in python/pyproject.toml): pinned, as a newer
/// one may find what this one accepts.
const MYPY: &str = "mypy==2.4.1";

/// Whether `python` finds `module` (found, not imported: htcondor-dags's
/// import needs an `htcondor` module that HTCondor's wheels no longer have).
pub fn has_module(python: &Path, module: &str) -> bool {
    let find = format!(
        "import importlib.util, sys; sys.exit(importlib.util.find_spec('{module}') is None)"
    );
    Command::new(python).args(["-c", &find]).output().is_ok_and(|o| o.status.success())
}

/// The venv `cargo xtask python` makes under the target directory `target`.
pub fn venv(target: &Path) -> PathBuf {
    target.join("python-venv")
}

/// Whether `python` imports the `andes` package.
pub fn has_andes(python: &Path) -> bool {
    python.exists()
        && Command::new(python)
            .args(["-c", "import andes"])
            .output()
            .is_ok_and(|o| o.status.success())
}

/// Runs `cmd` (in the repository's root unless it names a directory of its
/// own), saying `what` first; whether it succeeded, having said why not.
pub(crate) fn step(what: &str, cmd: &mut Command) -> bool {
    eprintln!("xtask: {what}");
    if cmd.get_current_dir().is_none() {
        cmd.current_dir(root());
    }
    match cmd.status() {
        Ok(s) if s.success() => true,
        Ok(s) => {
            eprintln!("xtask: {what}: failed ({s})");
            false
        }
        Err(e) => {
            eprintln!("xtask: {what}: {e}");
            false
        }
    }
}

/// The venv with maturin and pytest in it (made, and filled, where missing):
/// its python.
pub(crate) fn ready_venv(target: &Path) -> Option<PathBuf> {
    let venv = venv(target);
    let py = venv.join("bin").join("python3");
    if !py.exists()
        && !step(
            "making the venv target/python-venv",
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
        )
    {
        eprintln!("xtask: python3 with its venv module is needed for the Python package");
        return None;
    }
    if !step(
        "installing maturin, pytest and mypy",
        &mut pip(&py, &["maturin>=1.9,<2", "pytest", MYPY]),
    ) {
        return None;
    }
    Some(py)
}

/// `py -m pip install --quiet ARGS`.
pub(crate) fn pip(py: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(py);
    c.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"]).args(args);
    c
}

/// Builds the wheel into `out` (emptied first), in cargo's `dev` profile and
/// a target directory of its own (`target/python`): its features are not the
/// workspace's, so it would share little with the workspace's build, and
/// another directory lets it build beside the tests (see [`prebuild`]).
/// Linked by zig for glibc 2.17, as `cargo xtask wheels` links the wheels
/// to publish: the tests run a wheel of the kind a site installs.
fn wheel(py: &Path, target: &Path, out: &Path) -> bool {
    let _ = std::fs::remove_dir_all(out);
    let Some(path) = crate::wheels::zig_path(target) else { return false };
    step(
        "building the andes wheel (maturin --zig, manylinux2014, dev profile)",
        Command::new(py)
            .args(["-m", "maturin", "build", "--profile", "dev"])
            // Its dependencies unoptimised (the workspace's are built at
            // opt-level 2 for the tests' wasmtime) but for the cryptography
            // every request signs and checks: the wheel builds in a third of
            // the CPU time, and the tests, which spend theirs in the pools
            // they start, no slower.
            .args(crate::unoptimised_but(OPTIMISED, 2))
            .args(["--zig", "--compatibility", "manylinux2014"])
            .env("PATH", path)
            .args(["--manifest-path", "python/Cargo.toml"])
            .arg("--target-dir")
            .arg(target.join("python"))
            .arg("--out")
            .arg(out)
            .arg("--interpreter")
            .arg(py),
    )
}

/// The wheel's dependencies built optimised: what signs, checks and
/// encrypts each of its requests.
const OPTIMISED: &[&str] = &["ring", "curve25519-dalek", "ed25519-dalek", "sha2"];

/// Held while the venv or the wheel is being made: CI's [`prebuild`] may
/// still be building when the tests reach [`run`], and two maturins staging
/// into one target directory, or two pips into one venv, race (a build
/// failed so: the one moved the library the other was about to stage).
fn exclusive(target: &Path) -> Option<std::fs::File> {
    let path = target.join("python.lock");
    let locked = std::fs::create_dir_all(target)
        .and_then(|()| std::fs::File::create(&path))
        .and_then(|f| f.lock().map(|()| f));
    match locked {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("xtask: cannot lock {}: {e}", path.display());
            None
        }
    }
}

/// Builds the wheel ahead of `run` (CI does, in the background, while the
/// tests run): `run`'s own build then finds everything built.
pub fn prebuild() -> bool {
    let target = crate::target_dir();
    let Some(_lock) = exclusive(&target) else { return false };
    match ready_venv(&target) {
        Some(py) => wheel(&py, &target, &target.join("wheels").join("prebuilt")),
        None => false,
    }
}

/// The `andes` program of the workspace's debug build, built where missing.
pub(crate) fn andes_program(target: &Path) -> Option<PathBuf> {
    let andes = target.join("debug").join(format!("andes{}", std::env::consts::EXE_SUFFIX));
    let built = andes.exists()
        || step(
            "building andes",
            Command::new(crate::cargo_program()).args(["build", "-p", "andes"]),
        );
    built.then_some(andes)
}

/// Builds, installs and tests the Python package; `pytest_args` go to pytest.
pub fn run(pytest_args: &[String]) -> bool {
    let target = crate::target_dir();
    let Some(lock) = exclusive(&target) else { return false };
    let Some(py) = ready_venv(&target) else { return false };
    // PyPI's packages the tests use beside andes, each named by what it
    // imports: HTCondor's own bindings, and two tools that write DAG files
    // with them (python/tests/test_dag_tools.py runs what they write).
    for (module, package, why) in PYPI {
        if !has_module(&py, module)
            && !step(&format!("installing {package} ({why})"), &mut pip(&py, &[package]))
        {
            eprintln!("xtask: {package} not installed: the tests that use it will fail");
        }
    }
    let wheels = target.join("wheels").join("dev");
    if !wheel(&py, &target, &wheels) {
        return false;
    }
    let wheel = std::fs::read_dir(&wheels).ok().and_then(|d| {
        d.flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "whl"))
    });
    let Some(wheel) = wheel else {
        eprintln!("xtask: maturin built no wheel into {}", wheels.display());
        return false;
    };
    let mut install = pip(&py, &["--force-reinstall", "--no-deps"]);
    install.arg(&wheel);
    if !step(&format!("installing {}", wheel.display()), &mut install) {
        return false;
    }
    drop(lock);
    let Some(andes) = andes_program(&target) else { return false };
    step(
        "pytest python/tests",
        Command::new(&py)
            .args(["-m", "pytest", "-rs", "python/tests"])
            .args(pytest_args)
            .env("ANDES_BIN", &andes)
            .env("ANDES_SAMPLES", crate::wasm_dir())
            .env_remove("ANDES_CONFIG"),
    ) && (!pytest_args.is_empty()
        // The same wheel as a new user takes it: installed by pip for this
        // machine, outside the venv, and run by the machine's own Python.
        || crate::wheels::smoke(&target, &wheel, std::env::consts::ARCH, &andes)
            // The type stubs, complete for what the tests use.
            && step(
                "mypy --strict over python/andes and python/tests",
                Command::new(&py)
                    .args(["-m", "mypy", "--strict"])
                    .current_dir(root().join("python")),
            ))
}
