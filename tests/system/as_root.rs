//! A schedd running as root serving several users: every file it reads or
//! writes for a job, it does with the job owner's rights, never its own.
//!
//! These tests need root and two local accounts, `andes-alice` and
//! `andes-bob`; `cargo xtask test` creates the accounts and runs them when it
//! runs as root (`cargo test --test system -- as_root:: --ignored`), and says plainly
//! that they were not run otherwise.
#![cfg(target_os = "linux")]

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::pool::{Pool, int, sample, text, wait_or};

/// uid of a local account, from /etc/passwd.
fn uid_of(name: &str) -> u32 {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.first() == Some(&name)).then(|| f[2].parse().unwrap())
        })
        .unwrap_or_else(|| {
            panic!("no local account {name}: `useradd {name}` (cargo xtask test does)")
        })
}

fn chown(p: &Path, uid: u32) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; -1 leaves the group.
    assert_eq!(unsafe { libc_chown(c.as_ptr(), uid, u32::MAX) }, 0, "chown {}", p.display());
}

unsafe extern "C" {
    #[link_name = "chown"]
    fn libc_chown(path: *const std::ffi::c_char, uid: u32, gid: u32) -> i32;
    fn geteuid() -> u32;
}

/// A directory of `user`'s own (mode 0700) under a world-traversable top.
struct Home {
    top: PathBuf,
}

impl Home {
    fn new() -> Home {
        // One per test: the tests run side by side in one process.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let top = std::env::temp_dir().join(format!("andes-as-root-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&top);
        std::fs::create_dir_all(&top).unwrap();
        std::fs::set_permissions(&top, std::fs::Permissions::from_mode(0o755)).unwrap();
        Home { top }
    }

    fn of(&self, user: &str) -> PathBuf {
        let d = self.top.join(user);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        chown(&d, uid_of(user));
        d
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.top);
    }
}

/// A pool whose schedd runs as root with no identity map, trusting users
/// `andes-alice` and `andes-bob`.
fn pool() -> Pool {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { geteuid() };
    assert_eq!(euid, 0, "these tests need root (cargo xtask test runs them as root)");
    let keys = tempfile::tempdir().unwrap();
    let users = ["andes-alice", "andes-bob"];
    let mut lines = Vec::new();
    for who in users {
        uid_of(who);
        let o = common::andes().args(["keygen", who]).env("ANDES_CONFIG_DIR", keys.path()).output();
        assert!(o.as_ref().is_ok_and(|o| o.status.success()), "{o:?}");
        let public = std::fs::read_to_string(keys.path().join(format!("keys/{who}.pub"))).unwrap();
        lines.push(format!("user {who} {}", public.trim()));
    }
    let p = Pool::new_trusting("USER_ACCOUNT_MAP =", 1, &lines);
    for who in users {
        for f in [who.to_string(), format!("{who}.pub")] {
            std::fs::copy(keys.path().join("keys").join(&f), p.path().join("keys").join(&f))
                .unwrap();
        }
    }
    p
}

/// Submits `text` as `user` from `dir` (the job's Iwd).
fn submit_from(p: &Pool, user: &str, dir: &Path, text: &str) -> std::process::Output {
    std::fs::copy(sample("hello"), dir.join("hello.wasm")).unwrap();
    std::fs::write(dir.join("job.sub"), text).unwrap();
    common::andes()
        .args(["submit", "job.sub"])
        .current_dir(dir)
        .env("ANDES_CONFIG_DIR", p.path())
        .env("ANDES_CONFIG", p.user_config())
        .env("USER", user)
        .output()
        .unwrap()
}

#[test]
#[ignore = "needs root and the accounts andes-alice and andes-bob: cargo xtask test runs it as root"]
fn a_root_schedd_reads_and_writes_each_users_files_as_that_user() {
    let p = pool();
    let home = Home::new();
    let alice = home.of("andes-alice");
    let bob = home.of("andes-bob");
    std::fs::write(bob.join("secret.txt"), "bob's secret").unwrap();
    chown(&bob.join("secret.txt"), uid_of("andes-bob"));
    std::fs::write(alice.join("in.txt"), "line one\n").unwrap();
    chown(&alice.join("in.txt"), uid_of("andes-alice"));
    // A good job: its output and log are written as alice, in her directory.
    let o = submit_from(
        &p,
        "andes-alice",
        &alice,
        "executable = hello.wasm\ninput = in.txt\noutput = out.txt\nlog = job.log\nqueue\n",
    );
    assert!(o.status.success(), "{o:?}");
    // Root's and bob's files are out of her reach, as inputs or as log.
    for (name, what) in [
        ("shadow", "transfer_input_files = /etc/shadow\n"),
        ("bobs", &format!("transfer_input_files = {}\n", bob.join("secret.txt").display())),
    ] {
        let o = submit_from(
            &p,
            "andes-alice",
            &alice,
            &format!("executable = hello.wasm\n{what}output = {name}.out\nqueue\n"),
        );
        assert!(o.status.success(), "{o:?}");
    }
    // A directory only root may write: a log there must not appear.
    let roots = home.top.join("root-only");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::set_permissions(&roots, std::fs::Permissions::from_mode(0o700)).unwrap();
    let forbidden = roots.join("as-root.log");
    let o = submit_from(
        &p,
        "andes-alice",
        &alice,
        &format!(
            "executable = hello.wasm\noutput = out2.txt\nlog = {}\nqueue\n",
            forbidden.display()
        ),
    );
    assert!(o.status.success(), "{o:?}");
    wait_or(
        "two held, two done",
        Duration::from_secs(90),
        || {
            let q = p.queue();
            q.iter().filter(|a| int(a, "JobStatus") == 5).count() == 2 && p.history().len() == 2
        },
        || format!("{:#?}\n{}", p.queue(), p.logs()),
    );
    for ad in p.queue() {
        assert_eq!(int(&ad, "HoldReasonCode"), 13, "{ad}");
        // HTCondor's subcode of a transfer hold: the errno (EACCES).
        assert_eq!(int(&ad, "HoldReasonSubCode"), 13, "{ad}");
        assert!(text(&ad, "HoldReason").contains("Permission denied"), "{ad}");
    }
    let alice_uid = uid_of("andes-alice");
    for f in ["out.txt", "job.log", "hello.out", "out2.txt"] {
        let m = std::fs::metadata(alice.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(m.uid(), alice_uid, "{f} is not alice's");
    }
    assert!(std::fs::read_to_string(alice.join("out.txt")).unwrap().contains("stdin: LINE ONE"));
    assert!(!forbidden.exists(), "a log was written as root");
    assert!(!alice.join("shadow.out").exists() && !alice.join("bobs.out").exists());
}

/// A remap is an output path like any other: written as the job's owner, so
/// it reaches no file or directory she could not write herself (root's,
/// bob's), however it is spelt (absolute, or climbing with `..`).
#[test]
#[ignore = "needs root and the accounts andes-alice and andes-bob: cargo xtask test runs it as root"]
fn a_remap_writes_only_where_the_owner_may() {
    let p = pool();
    let home = Home::new();
    let alice = home.of("andes-alice");
    let bob = home.of("andes-bob");
    let roots = home.top.join("root-only");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::set_permissions(&roots, std::fs::Permissions::from_mode(0o700)).unwrap();
    let victim = roots.join("victim");
    std::fs::write(&victim, "root's").unwrap();
    for (name, to) in [
        ("root", victim.display().to_string()),
        ("rootdir", roots.join("new/planted").display().to_string()),
        ("bob", "../andes-bob/planted".to_string()),
        ("mine", "kept/hello.out".to_string()),
    ] {
        let o = submit_from(
            &p,
            "andes-alice",
            &alice,
            &format!(
                "executable = hello.wasm\narguments = x\ntransfer_output_files = hello.out\n\
                 transfer_output_remaps = \"hello.out = {to}\"\noutput = {name}.out\nqueue\n"
            ),
        );
        assert!(o.status.success(), "{o:?}");
    }
    wait_or(
        "three held, one done",
        Duration::from_secs(90),
        || p.queue().iter().filter(|a| int(a, "JobStatus") == 5).count() == 3,
        || format!("{:#?}\n{}", p.queue(), p.logs()),
    );
    wait_or("one done", Duration::from_secs(30), || p.history().len() == 1, || p.logs());
    for ad in p.queue() {
        assert_eq!(int(&ad, "HoldReasonCode"), 12, "{ad}");
        assert_eq!(int(&ad, "HoldReasonSubCode"), 13, "{ad}");
        assert!(text(&ad, "HoldReason").contains("Permission denied"), "{ad}");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's");
    assert!(!roots.join("new").exists());
    assert!(!bob.join("planted").exists());
    let kept = alice.join("kept/hello.out");
    assert_eq!(std::fs::metadata(&kept).unwrap().uid(), uid_of("andes-alice"));
    assert_eq!(std::fs::metadata(alice.join("kept")).unwrap().uid(), uid_of("andes-alice"));
}
