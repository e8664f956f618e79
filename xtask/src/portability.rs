//! `cargo xtask portability`: the host on other platforms, for real. Builds
//! `andes` for Windows (`x86_64-pc-windows-gnu`, linked by mingw-w64; the
//! build is also clippy's lint of Windows code, warnings denied) and for
//! aarch64 Linux (`aarch64-unknown-linux-gnu`, linked by gcc-aarch64-linux-gnu),
//! then runs `tests/system/portability.rs` with the first under wine and the second
//! under qemu-user: the samples and their limits, a cooperative checkpoint, and
//! a compiled job's snapshot moved between every pair of platforms.
//!
//! What it needs (Debian's `wine64`, `qemu-user-static`, `mingw-w64`,
//! `gcc-aarch64-linux-gnu`; `.ci/run` installs them) is looked for first; when
//! something is missing it says NOT RUN and what to install.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::root;

const WINDOWS: &str = "x86_64-pc-windows-gnu";
const AARCH64: &str = "aarch64-unknown-linux-gnu";
const AARCH64_SYSROOT: &str = "/usr/aarch64-linux-gnu";

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

fn first(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().find_map(|c| {
        let p = Path::new(c);
        if p.is_absolute() { p.is_file().then(|| p.to_path_buf()) } else { on_path(c) }
    })
}

/// qemu-user's aarch64 emulator, where installed.
pub fn qemu_aarch64() -> Option<PathBuf> {
    first(&["qemu-aarch64-static", "qemu-aarch64"])
}

/// Runs the portability tests; `true` when they pass (or cannot run here and
/// [`crate::ALLOW_NOT_RUN`] says that may be so).
pub fn run() -> bool {
    run_after_build(|| {})
}

/// [`run`], calling `built` once the cross build is done, as the emulated
/// tests begin (what leaves cores idle may start then).
pub fn run_after_build(built: impl FnOnce()) -> bool {
    let wine = first(&["/usr/lib/wine/wine64", "wine64"]);
    let qemu = qemu_aarch64();
    let mingw = first(&["x86_64-w64-mingw32-gcc"]);
    let arm_gcc = first(&["aarch64-linux-gnu-gcc"]);
    let mut missing = Vec::new();
    for (what, have) in [
        ("wine64", wine.is_some()),
        ("qemu-user-static", qemu.is_some()),
        ("mingw-w64", mingw.is_some()),
        ("gcc-aarch64-linux-gnu", arm_gcc.is_some() && Path::new(AARCH64_SYSROOT).is_dir()),
    ] {
        if !have {
            missing.push(what);
        }
    }
    if !missing.is_empty() {
        return crate::not_run(
            "tests/system/portability.rs (Windows under wine, aarch64 under qemu)",
            &format!("Debian's {}", missing.join(", ")),
        );
    }
    let (Some(wine), Some(qemu), Some(mingw), Some(_)) = (wine, qemu, mingw, arm_gcc) else {
        return false;
    };
    if !build() {
        return false;
    }
    built();
    let target = crate::target_dir();
    let place = target.join("portability");
    let win_dir = place.join("windows");
    if let Err(e) = std::fs::create_dir_all(&win_dir) {
        eprintln!("xtask: {}: {e}", win_dir.display());
        return false;
    }
    let exe = win_dir.join("andes.exe");
    if let Err(e) = std::fs::copy(cross_dir().join(WINDOWS).join("debug").join("andes.exe"), &exe) {
        eprintln!("xtask: copying andes.exe: {e}");
        return false;
    }
    // wine before 9 lacks bcryptprimitives.dll, which Rust programs load: a
    // shim beside andes.exe stands in (tests/support/wine/bcryptprimitives.c).
    let has_own = Path::new("/usr/lib/x86_64-linux-gnu/wine/x86_64-windows/bcryptprimitives.dll")
        .exists()
        || Path::new("/usr/lib/wine/x86_64-windows/bcryptprimitives.dll").exists();
    if !has_own {
        let ok = Command::new(&mingw)
            .args(["-shared", "-O2", "-o"])
            .arg(win_dir.join("bcryptprimitives.dll"))
            .arg(root().join("tests/support/wine/bcryptprimitives.c"))
            .arg("-ladvapi32")
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("xtask: building the bcryptprimitives.dll shim for wine failed");
            return false;
        }
    }
    let prefix = place.join("wine-prefix");
    let Some(_server) = Wineserver::start(&wine, &prefix) else {
        return false;
    };
    let cargo = crate::cargo_program();
    let arm_exe = cross_dir().join(AARCH64).join("debug").join("andes");
    eprintln!(
        "xtask: cargo test --test system -- portability:: (wine: {}, qemu: {})",
        wine.display(),
        qemu.display()
    );
    Command::new(&cargo)
        .args(["test"])
        .args(crate::WORKSPACE)
        .args(["--test", "system", "--", "portability::", "--ignored", "--nocapture"])
        .current_dir(root())
        .env("ANDES_WINE", &wine)
        .env("ANDES_WINDOWS_EXE", &exe)
        .env("WINEPREFIX", &prefix)
        .env("WINEDEBUG", "-all")
        .env("ANDES_QEMU_AARCH64", &qemu)
        .env("ANDES_AARCH64_EXE", &arm_exe)
        .env("ANDES_AARCH64_SYSROOT", AARCH64_SYSROOT)
        .status()
        .is_ok_and(|s| s.success())
}

/// A wineserver kept up for one prefix while the tests run, stopped on drop.
///
/// Left to itself, wine starts a wineserver with the first process of a
/// prefix and the server exits a moment after the last one ends: a test
/// starting `andes.exe` in that moment gets "wine client error: recvmsg:
/// Connection reset by peer" and no process. Kept up (`wineserver -p`), it
/// is there for every process of the run. The prefix is made by a first,
/// silent `wineboot`, so that the services wine starts with it (which live
/// as long as the server) hold no test's output pipe.
pub struct Wineserver {
    server: PathBuf,
    prefix: PathBuf,
}

impl Wineserver {
    /// Starts the server for `prefix` (created if missing) beside `wine`.
    pub fn start(wine: &Path, prefix: &Path) -> Option<Wineserver> {
        use std::process::Stdio;
        let server = wine.with_file_name("wineserver");
        let server = if server.is_file() { server } else { on_path("wineserver")? };
        if let Err(e) = std::fs::create_dir_all(prefix) {
            eprintln!("xtask: {}: {e}", prefix.display());
            return None;
        }
        let kept = Wineserver { server, prefix: prefix.to_path_buf() };
        let up = Command::new(&kept.server)
            .arg("-p")
            .env("WINEPREFIX", prefix)
            .status()
            .is_ok_and(|s| s.success());
        let booted = up
            && Command::new(wine)
                .arg("wineboot")
                .env("WINEPREFIX", prefix)
                .env("WINEDEBUG", "-all")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        if !booted {
            eprintln!("xtask: no wineserver for {} ({})", prefix.display(), kept.server.display());
            return None;
        }
        Some(kept)
    }
}

impl Drop for Wineserver {
    fn drop(&mut self) {
        let _ = Command::new(&self.server).arg("-k").env("WINEPREFIX", &self.prefix).status();
    }
}

/// The target directory of the cross build: its own, so that it can build
/// beside the tests (CI starts it in the background, `cargo xtask
/// prebuild`, while they run).
fn cross_dir() -> PathBuf {
    crate::target_dir().join("cross")
}

/// The dependencies the emulated tests spend their time in, built at
/// opt-level 1 in the cross build (the others at 0): compiling modules
/// (cranelift, regalloc2, wasmparser, wasmtime, gimli, object), running
/// them, and the bytes a daemon digests, signs and compresses (ring, the
/// dalek crates, sha2, blake3, lz4_flex, crc32fast). Unoptimised, cranelift
/// takes seconds per module under qemu.
const HOT: &[&str] = &[
    "cranelift-assembler-x64",
    "cranelift-bforest",
    "cranelift-bitset",
    "cranelift-codegen",
    "cranelift-codegen-shared",
    "cranelift-control",
    "cranelift-entity",
    "cranelift-frontend",
    "cranelift-native",
    "regalloc2",
    "wasmparser",
    "wasmtime",
    "wasmtime-environ",
    "wasmtime-internal-cranelift",
    "wasmtime-internal-fiber",
    "wasmtime-internal-math",
    "wasmtime-internal-slab",
    "wasmtime-internal-unwinder",
    "gimli",
    "object",
    "hashbrown",
    "ring",
    "curve25519-dalek",
    "ed25519-dalek",
    "sha2",
    "blake3",
    "lz4_flex",
    "crc32fast",
];

/// Builds `andes` for Windows and aarch64 Linux into [`cross_dir`]; false
/// (having said what is missing) without the cross tools.
pub fn build() -> bool {
    let Some(arm_gcc) = first(&["aarch64-linux-gnu-gcc"]) else {
        eprintln!("xtask: the cross build needs Debian's gcc-aarch64-linux-gnu");
        return false;
    };
    if first(&["x86_64-w64-mingw32-gcc"]).is_none() {
        eprintln!("xtask: the cross build needs Debian's mingw-w64");
        return false;
    }
    if Command::new("rustup").arg("--version").output().is_ok() {
        crate::run("rustup", &["target", "add", WINDOWS, AARCH64]);
    }
    let cargo = crate::cargo_program();
    eprintln!("xtask: building andes for {WINDOWS} and {AARCH64}");
    // Both in one build, which keeps both cores busy where either alone
    // would wait on one long crate. No debug info: these builds are run,
    // never debugged, and link faster. Their dependencies are not
    // optimised (the native build's are, at opt-level 2), but for what the
    // emulated tests spend their time in (see [`HOT`]), at opt-level 1:
    // the rest compiles in about two thirds of the time. `andes compile`
    // unoptimised too (the workspace's profile raises it): the tests
    // compile their modules on x86-64 Linux. And without jemalloc, whose C
    // build took 148 s of the cross build's 1,297 (by `--timings`): the
    // system allocator serves tests of the platform as well.
    let mut build = Command::new(&cargo);
    build
        .args(["build", "-p", "andes", "--no-default-features"])
        .args(["--target", WINDOWS, "--target", AARCH64])
        .arg("--target-dir")
        .arg(cross_dir())
        .args(crate::unoptimised_but(HOT, 1))
        .args(["--config", "profile.dev.package.andes-compile.opt-level=0"])
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        // The Windows build is also its lint: clippy's driver compiles the
        // workspace's crates as rustc would and lints them as `cargo
        // clippy` does, warnings denied, so one build both checks and
        // makes it (the aarch64 build is linted alike).
        .env("RUSTC_WORKSPACE_WRAPPER", "clippy-driver")
        .env("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUSTFLAGS", "-Dwarnings")
        .env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS", "-Dwarnings")
        .env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", &arm_gcc)
        .env("CC_aarch64_unknown_linux_gnu", &arm_gcc)
        .current_dir(root())
        .status()
        .is_ok_and(|s| s.success())
}
