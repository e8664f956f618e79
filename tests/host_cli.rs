//! `andes host` as a real process, driven by the real commands over signed
//! HTTP: status, set-attr, vacate, off, and the refusals.

use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

struct HostProc {
    dir: tempfile::TempDir,
    child: Child,
}

impl Drop for HostProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

mod common;
use common::andes;

impl HostProc {
    /// Keys for root (admin), alice (user) and mallory (unknown), a trust
    /// file, a two-slot configuration and a running `andes host` on a free
    /// port.
    fn start() -> HostProc {
        let dir = tempfile::tempdir().unwrap();
        common::keys_and_trust(
            dir.path(),
            &[("root", "admin"), ("alice", "user"), ("mallory", "")],
        );
        std::fs::write(
            dir.path().join("andes.config"),
            "HOST_ADDRESS = 127.0.0.1:0\nNUM_CPUS = 2\nMEMORY = 2048\n",
        )
        .unwrap();
        let child = andes()
            .arg("host")
            .env("ANDES_CONFIG_DIR", dir.path())
            .env_remove("ANDES_CONFIG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut h = HostProc { dir, child };
        let f = h.path().join(".host_address");
        let start = Instant::now();
        while !f.exists() {
            if let Some(st) = h.child.try_wait().unwrap() {
                panic!("andes host exited: {st}");
            }
            assert!(start.elapsed() < Duration::from_secs(60), "andes host did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        h
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn run(&self, user: &str, args: &[&str]) -> Output {
        andes()
            .args(args)
            .env("ANDES_CONFIG_DIR", self.path())
            .env_remove("ANDES_CONFIG")
            .env("USER", user)
            .output()
            .unwrap()
    }

    fn ok(&self, user: &str, args: &[&str]) -> String {
        let o = self.run(user, args);
        assert!(
            o.status.success(),
            "{args:?} as {user}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    fn fails(&self, user: &str, args: &[&str]) -> String {
        let o = self.run(user, args);
        assert!(!o.status.success(), "{args:?} as {user} should fail");
        String::from_utf8(o.stderr).unwrap()
    }

    /// The slots' (State, KeyboardIdle), from `status -json`.
    fn slots(&self) -> Vec<(String, i64)> {
        let out = self.ok("alice", &["host", "status", "-json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|ad| {
                (ad["State"].as_str().unwrap().to_string(), ad["KeyboardIdle"].as_i64().unwrap())
            })
            .collect()
    }
}

#[test]
fn host_status_set_attr_vacate_and_off() {
    let mut h = HostProc::start();
    // Two slots, each the owner's or available, as the real machine's load
    // and keyboard say.
    let slots = h.slots();
    assert_eq!(slots.len(), 2, "{slots:?}");
    assert!(slots.iter().all(|(s, _)| s == "Owner" || s == "Unclaimed"), "{slots:?}");

    let table = h.ok("alice", &["host", "status"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].split_whitespace().eq([
            "Name",
            "OpSys",
            "Arch",
            "State",
            "Activity",
            "LoadAv",
            "Mem",
            "ActvtyTime"
        ]),
        "{table}"
    );
    assert!(lines[1].starts_with("slot1@") && lines[2].starts_with("slot2@"), "{table}");
    assert!(lines[1].split_whitespace().nth(6) == Some("1024"), "{table}");
    assert!(table.contains("Total"), "{table}");
    let long = h.ok("alice", &["host", "status", "-long"]);
    assert!(long.contains("SlotID = 1\n") && long.contains("SlotID = 2\n"), "{long}");
    assert!(long.contains("MyType = \"Machine\""), "{long}");

    // Only an admin acts on the host; unknown keys are refused.
    let e = h.fails("alice", &["host", "set-attr", "KeyboardIdle", "0"]);
    assert!(e.contains("403"), "{e}");
    let e = h.fails("mallory", &["host", "status"]);
    assert!(e.contains("401"), "{e}");
    let e = h.fails("root", &["host", "set-attr", "State", "\"Claimed\""]);
    assert!(e.contains("startd manages it"), "{e}");
    let e = h.fails("root", &["host", "set-attr", "Foo", "(1 +"]);
    assert!(e.contains("not a ClassAd expression"), "{e}");
    let e = h.fails("root", &["vacate", "slot9"]);
    assert!(e.contains("no slot 9"), "{e}");

    // One slot's ad gets an attribute of the site's choosing.
    let out = h.ok("root", &["host", "set-attr", "HasGpu", "false", "-slot", "2"]);
    assert!(out.contains("HasGpu = false on slot 2"), "{out}");
    let long = h.ok("alice", &["host", "status", "-long"]);
    let ads: Vec<&str> = long.split("\n\n").filter(|a| !a.trim().is_empty()).collect();
    assert_eq!(ads.len(), 2, "{long}");
    assert!(!ads[0].contains("HasGpu") && ads[1].contains("\nHasGpu = false"), "{long}");

    // The owner is at the keyboard: both slots go to Owner.
    let out = h.ok("root", &["host", "set-attr", "KeyboardIdle", "0"]);
    assert!(out.contains("KeyboardIdle = 0"), "{out}");
    let start = Instant::now();
    loop {
        let slots = h.slots();
        if slots.iter().all(|(s, k)| s == "Owner" && *k < 60) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "slots did not go to Owner: {slots:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = h.ok("root", &["vacate", "-fast"]);
    assert!(out.contains("vacating all slots (fast)"), "{out}");

    // condor_off -fast: the daemon exits 0 and removes its address file.
    let out = h.ok("root", &["host", "off", "-fast"]);
    assert!(out.contains("shutting down (fast)"), "{out}");
    let start = Instant::now();
    let status = loop {
        if let Some(st) = h.child.try_wait().unwrap() {
            break st;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "andes host did not exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    assert!(!h.path().join(".host_address").exists());
    assert!(h.path().join("execute").is_dir());
}
