//! What the whole-process tests share: the `andes` command, and a configuration
//! directory with keys and a trust file.
#![allow(dead_code)] // each platform's tests use their own part

pub mod callers;
pub mod pool;

use std::path::Path;
use std::process::Command;

/// The environment variable that lets a test whose tool is missing be
/// skipped (said NOT RUN). Unset, as in CI, which installs every tool the
/// suite needs (`cargo xtask setup`), a missing tool fails the test: a test
/// that ran nothing never passes.
pub const ALLOW_NOT_RUN: &str = "ANDES_ALLOW_NOT_RUN";

/// `what` cannot run here for want of `needs`: true (the caller returns)
/// when [`ALLOW_NOT_RUN`] is set, after saying NOT RUN; a failure otherwise.
pub fn not_run(what: &str, needs: &str) -> bool {
    if std::env::var_os(ALLOW_NOT_RUN).is_some() {
        eprintln!("\n*** NOT RUN: {what}: needs {needs} ***\n");
        return true;
    }
    panic!(
        "{what} needs {needs}, which is missing (`cargo xtask setup` installs it; set \
         {ALLOW_NOT_RUN}=1 to skip such tests, which then count as not run)"
    );
}

/// The `andes` binary under test.
pub fn andes() -> Command {
    Command::new(env!("CARGO_BIN_EXE_andes"))
}

/// Makes a key pair for each `(name, role)` in `dir` with `andes keygen`, and a
/// trust file listing those with a role (an empty role leaves the key unknown to
/// the pool).
pub fn keys_and_trust(dir: &Path, who: &[(&str, &str)]) {
    let mut trust = String::new();
    for (name, role) in who {
        let out = andes().args(["keygen", name]).env("ANDES_CONFIG_DIR", dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        if !role.is_empty() {
            let pubkey =
                std::fs::read_to_string(dir.join("keys").join(format!("{name}.pub"))).unwrap();
            trust.push_str(&format!("{role} {name} {}\n", pubkey.trim()));
        }
    }
    std::fs::write(dir.join("trust"), trust).unwrap();
}

/// A small deterministic generator for seeded schedules (faults, kills):
/// the same seed gives the same sequence.
pub struct Lcg(pub u64);

impl Lcg {
    /// A number in `0..n` (0 when `n` is 0).
    pub fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next(hi - lo + 1)
    }
}

/// A number from the environment variable `name`, else `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The cluster `andes submit` reported for `jobs` jobs, if it printed it
/// (`N job(s) submitted to cluster C.`).
pub fn submitted_cluster(out: &std::process::Output, jobs: usize) -> Option<i64> {
    let text = String::from_utf8_lossy(&out.stdout);
    let c = text.trim().strip_prefix(&format!("{jobs} job(s) submitted to cluster "))?;
    c.trim_end_matches('.').parse().ok()
}

/// The account the tests run as (and the daemons they start).
pub fn this_account() -> String {
    whoami::fallible::username().unwrap_or_else(|_| "root".into())
}

/// The standard output of a command that must have succeeded (`what` names
/// it when it did not, with both its outputs).
pub fn succeeded(o: std::process::Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// A daemon (`andes schedd`, `andes host`) running as a real process over a
/// configuration directory of its own; killed when dropped.
pub struct Daemon {
    dir: tempfile::TempDir,
    /// The daemon's process.
    pub child: std::process::Child,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    /// Makes keys and a trust file for `who`, writes `config` as andes.config,
    /// starts `andes SUBCOMMAND` and waits until it has written its address
    /// file (`address_file`, relative to the configuration directory).
    pub fn start(
        subcommand: &str,
        who: &[(&str, &str)],
        config: &str,
        address_file: &str,
    ) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        keys_and_trust(dir.path(), who);
        // The test's identities are all this one account (the daemon's).
        let config = format!("USER_ACCOUNT_MAP = * = {}\n{config}", this_account());
        std::fs::write(dir.path().join("andes.config"), config).unwrap();
        let child = andes()
            .arg(subcommand)
            .env("ANDES_CONFIG_DIR", dir.path())
            .env_remove("ANDES_CONFIG")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut d = Daemon { dir, child };
        let f = d.path().join(address_file);
        let start = std::time::Instant::now();
        while !f.exists() {
            if let Some(st) = d.child.try_wait().unwrap() {
                panic!("andes {subcommand} exited: {st}");
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "andes {subcommand} did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        d
    }

    /// The configuration directory (also the commands' working directory).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `andes ARGS` as `user` against this daemon.
    pub fn run(&self, user: &str, args: &[&str]) -> std::process::Output {
        andes()
            .args(args)
            .current_dir(self.path())
            .env("ANDES_CONFIG_DIR", self.path())
            .env_remove("ANDES_CONFIG")
            .env("USER", user)
            .output()
            .unwrap()
    }

    /// Runs `andes ARGS` as `user`, which must succeed; its standard output.
    pub fn ok(&self, user: &str, args: &[&str]) -> String {
        succeeded(self.run(user, args), &format!("{args:?} as {user}"))
    }

    /// Runs `andes ARGS` as `user`, which must fail; its standard error.
    pub fn fails(&self, user: &str, args: &[&str]) -> String {
        let o = self.run(user, args);
        assert!(!o.status.success(), "{args:?} as {user} should fail");
        String::from_utf8(o.stderr).unwrap()
    }
}

/// A directory of a test's own under the system's temporary directory,
/// removed with everything in it when the value is dropped (at the test's
/// end, or as a failing test unwinds). It reads as the [`Path`] it is.
pub struct Scratch(tempfile::TempDir);

impl Scratch {
    /// A new empty directory whose name starts with `andes-TAG-`.
    pub fn new(tag: &str) -> Scratch {
        Scratch(tempfile::Builder::new().prefix(&format!("andes-{tag}-")).tempdir().unwrap())
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.path().as_os_str()
    }
}
