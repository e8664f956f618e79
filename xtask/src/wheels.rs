//! `cargo xtask wheels`: the Python package as the wheels a site installs, one
//! per Linux machine (x86-64 and aarch64), each abi3 (one wheel serves
//! CPython 3.9 and later) and manylinux2014 (glibc 2.17 and later), built with
//! maturin, linked by zig (`--zig`, the ziglang wheel `cargo xtask samples`
//! installs), into `target/wheels/dist`.
//!
//! Each wheel is then used as a new user would: installed with pip for its
//! platform (`--platform`, so a wheel tagged wrongly is refused) into a
//! directory of its own, and run by that machine's Python, the aarch64 one
//! under qemu-user (Debian's arm64 python3.11 and the libraries it needs,
//! fetched once with `apt-get download` into `target/wheels/arm64-python`):
//! `python/tools/wheel_smoke.py` starts a personal pool from Python and runs
//! jobs on it.
//!
//! `--profile dev` builds unoptimised wheels (quicker, for checking this
//! path); the default is release, the wheels to publish.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::python::{pip, ready_venv, step};
use crate::root;

/// The machines wheels are built for: (Rust target, the machine's name in
/// wheel tags and `platform.machine()`).
const MACHINES: [(&str, &str); 2] =
    [("x86_64-unknown-linux-gnu", "x86_64"), ("aarch64-unknown-linux-gnu", "aarch64")];

/// The Python tag every wheel must carry: the stable ABI of CPython 3.9 and
/// later (pyo3's `abi3-py39`).
const ABI: &str = "cp39-abi3";

/// The platform tag every wheel must end with, before its machine: glibc
/// 2.17 and later (maturin writes `manylinux2014_M.manylinux_2_17_M`).
const TAG: &str = "manylinux_2_17";

/// Debian's arm64 packages that make a Python able to run the smoke test.
const ARM64_PYTHON: [&str; 8] = [
    "python3.11-minimal",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "libc6",
    "zlib1g",
    "libexpat1",
    "libffi8",
    "libssl3",
];

/// `cargo xtask wheels [--profile dev|release]`.
pub fn run(args: &[String]) -> bool {
    let profile = match args {
        [] => "release",
        [flag, p] if flag == "--profile" && (p == "dev" || p == "release") => p.as_str(),
        _ => {
            eprintln!("usage: cargo xtask wheels [--profile dev|release]");
            return false;
        }
    };
    let target = crate::target_dir();
    let dist = target.join("wheels").join("dist");
    let Some(built) = build(&target, profile, &dist) else { return false };
    let Some(andes) = crate::python::andes_program(&target) else { return false };
    let mut ok = true;
    for (wheel, machine) in &built {
        ok &= smoke(&target, wheel, machine, &andes);
    }
    if ok {
        eprintln!("xtask: wheels built and run, in {}:", dist.display());
        for (wheel, _) in &built {
            eprintln!("  {}", wheel.file_name().unwrap_or_default().to_string_lossy());
        }
    }
    ok
}

/// Builds the wheel of every machine into `dist` (emptied first); each with
/// its machine's name, or `None` having said what failed.
pub fn build(target: &Path, profile: &str, dist: &Path) -> Option<Vec<(PathBuf, &'static str)>> {
    let path = zig_path(target)?;
    let py = ready_venv(target)?;
    if Command::new("rustup").arg("--version").output().is_ok() {
        let mut add = vec!["target", "add"];
        add.extend(MACHINES.map(|(t, _)| t));
        crate::run("rustup", &add);
    }
    let _ = std::fs::remove_dir_all(dist);
    let mut built = Vec::new();
    for (triple, machine) in MACHINES {
        let before: Vec<PathBuf> = wheels_in(dist);
        let ok = step(
            &format!("building the andes wheel for {machine} (maturin --zig, {profile} profile)"),
            Command::new(&py)
                .args(["-m", "maturin", "build", "--zig", "--profile", profile])
                .args(["--target", triple, "--compatibility", "manylinux2014"])
                .args(["--manifest-path", "python/Cargo.toml"])
                .arg("--target-dir")
                .arg(target.join("wheels").join("build"))
                .arg("--out")
                .arg(dist)
                .env("PATH", &path),
        );
        if !ok {
            return None;
        }
        let new: Vec<PathBuf> =
            wheels_in(dist).into_iter().filter(|w| !before.contains(w)).collect();
        let want = format!("{TAG}_{machine}.whl");
        let tagged = |w: &Path| {
            let name = w.file_name().unwrap_or_default().to_string_lossy().into_owned();
            name.contains(&format!("-{ABI}-")) && name.ends_with(&want)
        };
        match new.as_slice() {
            [w] if tagged(w) => built.push((w.clone(), machine)),
            _ => {
                eprintln!(
                    "xtask: maturin built {new:?} for {machine}; expected one wheel ending {want}"
                );
                return None;
            }
        }
    }
    Some(built)
}

/// A `PATH` whose first directory has a `zig` command for maturin's `--zig`:
/// the zig of the ziglang wheel `cargo xtask samples` installs; `None`
/// having said what is missing.
pub(crate) fn zig_path(target: &Path) -> Option<std::ffi::OsString> {
    let tc = target.join("toolchains");
    if !tc.join("pip").join("ziglang").is_dir() {
        eprintln!("xtask: the wheels are linked by zig: `cargo xtask samples` installs it");
        return None;
    }
    let bin = target.join("wheels").join("bin");
    let zig = bin.join("zig");
    let shim = std::fs::create_dir_all(&bin)
        .map_err(|e| format!("{}: {e}", bin.display()))
        .and_then(|()| {
            std::fs::write(&zig, crate::docs::zig_shim(&tc))
                .map_err(|e| format!("{}: {e}", zig.display()))
        })
        .and_then(|()| crate::docs::make_executable(&zig));
    if let Err(e) = shim {
        eprintln!("xtask: {e}");
        return None;
    }
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&rest))).ok()
}

fn wheels_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(d) = std::fs::read_dir(dir) else { return Vec::new() };
    d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "whl")).collect()
}

/// Installs `wheel` with pip for its machine into a directory of its own, and
/// runs `python/tools/wheel_smoke.py` with that machine's Python.
pub(crate) fn smoke(target: &Path, wheel: &Path, machine: &str, andes: &Path) -> bool {
    let place = target.join("wheels").join(format!("smoke-{machine}"));
    let _ = std::fs::remove_dir_all(&place);
    let site = place.join("site");
    let Some(host_py) = ready_venv(target) else { return false };
    // pip checks the wheel's tags against the machine's: a wheel it would
    // not install there fails here.
    let mut install = pip(&host_py, &["--no-deps", "--only-binary=:all:"]);
    install
        .args(["--platform", &format!("manylinux2014_{machine}")])
        .args(["--implementation", "cp", "--python-version", "3.11", "--abi", "abi3"])
        .arg("--target")
        .arg(&site)
        .arg(wheel);
    if !step(&format!("pip install {} for {machine}", wheel.display()), &mut install) {
        return false;
    }
    let script = root().join("python/tools/wheel_smoke.py");
    let samples = crate::wasm_dir();
    let mut run = if machine == std::env::consts::ARCH {
        Command::new("python3")
    } else if machine == "aarch64" {
        let Some(python) = arm64_python(target) else { return false };
        let Some(qemu) = crate::portability::qemu_aarch64() else {
            return crate::not_run(
                "the aarch64 wheel under qemu-user",
                "Debian's qemu-user-static (cargo xtask setup installs it)",
            );
        };
        let mut c = Command::new(qemu);
        c.arg("-L").arg(&python.root).arg(&python.exe);
        c
    } else {
        eprintln!("xtask: no way to run a {machine} Python here");
        return false;
    };
    run.arg(&script)
        .arg(andes)
        .arg(&samples)
        .arg(place.join("work"))
        .env("PYTHONPATH", &site)
        .env("PYTHONNOUSERSITE", "1")
        .env_remove("ANDES_CONFIG")
        .current_dir(&place);
    step(&format!("running {} with {machine} Python", script.display()), &mut run)
}

/// Debian's arm64 Python, unpacked: the root to give qemu (`-L`) and the
/// interpreter in it.
struct Arm64Python {
    root: PathBuf,
    exe: PathBuf,
}

/// [`Arm64Python`], fetched with `apt-get download` (its own package lists,
/// so the machine's apt is left as it was) where not fetched already.
fn arm64_python(target: &Path) -> Option<Arm64Python> {
    let place = target.join("wheels").join("arm64-python");
    let root = place.join("root");
    let exe = root.join("usr/bin/python3.11");
    let done = place.join(".unpacked");
    if done.exists() && exe.exists() {
        return Some(Arm64Python { root, exe });
    }
    let state = place.join("apt-state");
    let cache = place.join("apt-cache");
    let debs = place.join("debs");
    for d in [state.join("lists/partial"), cache.join("archives/partial"), debs.clone()] {
        if let Err(e) = std::fs::create_dir_all(&d) {
            eprintln!("xtask: {}: {e}", d.display());
            return None;
        }
    }
    if let Err(e) = std::fs::write(state.join("status"), "") {
        eprintln!("xtask: {}: {e}", state.display());
        return None;
    }
    let apt = |args: &[&str]| {
        let mut c = Command::new("apt-get");
        c.args(["-q", "-o"])
            .arg(format!("Dir::State={}", state.display()))
            .arg("-o")
            .arg(format!("Dir::State::status={}", state.join("status").display()))
            .arg("-o")
            .arg(format!("Dir::Cache={}", cache.display()))
            .args(["-o", "APT::Architecture=arm64", "-o", "APT::Architectures::=arm64"])
            .args(["-o", "APT::Sandbox::User=root"])
            .args(args)
            .current_dir(&debs);
        c
    };
    if !step("apt-get update (arm64 package lists, kept apart)", &mut apt(&["update"])) {
        return None;
    }
    let mut download = vec!["download"];
    download.extend(ARM64_PYTHON);
    if !step("apt-get download Debian's arm64 Python", &mut apt(&download)) {
        return None;
    }
    let _ = std::fs::remove_dir_all(&root);
    for deb in std::fs::read_dir(&debs).ok()?.flatten().map(|e| e.path()) {
        if deb.extension().is_some_and(|x| x == "deb")
            && !step(
                &format!("unpacking {}", deb.display()),
                Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
            )
        {
            return None;
        }
    }
    if !exe.exists() {
        eprintln!("xtask: no {} after unpacking Debian's arm64 Python", exe.display());
        return None;
    }
    let _ = std::fs::write(&done, "");
    Some(Arm64Python { root, exe })
}
