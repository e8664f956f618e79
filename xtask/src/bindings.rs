//! `cargo xtask bindings`: makes the guest SDK's bindings to `wit/job.wit`
//! (`guest-sdk/src/bindings.rs`) with wit-bindgen's command, the version of
//! the SDK's `wit-bindgen` runtime, installed into `target/toolchains` when
//! missing.
//!
//! The bindings are kept in the repository rather than made by
//! wit-bindgen's macro at each build: the macro's crates (a WIT parser, a
//! component encoder, a Rust generator) took a minute to compile before a
//! job that uses the SDK could, on every fresh build of every user's job.
//! The file names the git blob of the WIT it was made from; `cargo xtask
//! tidy` fails when that is not the WIT's, so the two cannot drift apart.

use std::path::Path;
use std::process::Command;

use crate::root;

/// The bindings, from the repository's root.
pub const FILE: &str = "guest-sdk/src/bindings.rs";

/// The WIT they are made from, from the repository's root.
pub const WIT: &str = "wit/job.wit";

/// wit-bindgen's version: the SDK's `wit-bindgen` dependency's.
const VERSION: &str = "0.63.0";

/// The line of [`FILE`] that names the WIT's git blob.
const MARK: &str = "// Made from wit/job.wit, git blob ";

/// `git hash-object` of `path` (from the repository's root).
fn blob(path: &str) -> Option<String> {
    let out = Command::new("git").args(["hash-object", path]).current_dir(root()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Tidy's rule: the bindings were made from the WIT as it is now.
pub fn check(root: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(root.join(FILE)) else {
        return vec![format!("{FILE} is missing: run `cargo xtask bindings`")];
    };
    let made_from = text.lines().find_map(|l| l.strip_prefix(MARK)).map(str::trim);
    match (made_from, blob(WIT)) {
        (Some(m), Some(now)) if m == now => Vec::new(),
        (_, None) => vec![format!("cannot hash {WIT} with git")],
        _ => vec![format!("{FILE} was not made from {WIT} as it is: run `cargo xtask bindings`")],
    }
}

/// Makes [`FILE`] anew; true when it did.
pub fn run() -> bool {
    let tools = crate::target_dir().join("toolchains").join("wit-bindgen");
    let exe = tools.join("bin").join(format!("wit-bindgen{}", std::env::consts::EXE_SUFFIX));
    if !exe.exists() {
        let version = format!("={VERSION}");
        let root_arg = tools.to_string_lossy();
        let install = ["install", "wit-bindgen-cli", "--locked", "--version", &version];
        if !crate::cargo(&[&install[..], &["--root", &root_arg]].concat()) {
            return false;
        }
    }
    let Some(hash) = blob(WIT) else {
        eprintln!("xtask: cannot hash {WIT} with git");
        return false;
    };
    let out = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("xtask: a temporary directory: {e}");
            return false;
        }
    };
    let ok = Command::new(&exe)
        .args(["rust", "wit", "--world", "job", "--format", "--out-dir"])
        .arg(out.path())
        .current_dir(root())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("xtask: {} failed", exe.display());
        return false;
    }
    let made = match std::fs::read_to_string(out.path().join("job.rs")) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("xtask: wit-bindgen's output: {e}");
            return false;
        }
    };
    let text = format!(
        "// The guest SDK's bindings to the andes:job world, made by wit-bindgen {VERSION}\n\
         // (`cargo xtask bindings`); not to be edited.\n\
         {MARK}{hash}\n\n{made}"
    );
    match std::fs::write(root().join(FILE), text) {
        Ok(()) => {
            eprintln!("xtask: wrote {FILE}");
            true
        }
        Err(e) => {
            eprintln!("xtask: {FILE}: {e}");
            false
        }
    }
}
