//! `andes host` as a real process, driven by the real commands over signed
//! HTTP: status, set-attr, vacate, off, and the refusals.

use std::time::{Duration, Instant};

use crate::common;

/// `andes host` with keys for root (admin), alice (user) and mallory
/// (unknown), a trust file and a two-slot configuration, on a free port.
fn start() -> common::Daemon {
    common::Daemon::start(
        "host",
        &[("host", "host"), ("root", "admin"), ("alice", "user"), ("mallory", "")],
        "HOST_ADDRESS = 127.0.0.1:0\nNUM_CPUS = 2\nMEMORY = 2048\n",
        ".host_address",
    )
}

/// The slots' (State, KeyboardIdle), from `status -json`.
fn slot_states(h: &common::Daemon) -> Vec<(String, i64)> {
    let out = h.ok("alice", &["host", "status", "-json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|ad| (ad["State"].as_str().unwrap().to_string(), ad["KeyboardIdle"].as_i64().unwrap()))
        .collect()
}

#[test]
fn host_status_set_attr_vacate_and_off() {
    let mut h = start();
    // Two slots, each the owner's or available, as the real machine's load
    // and keyboard say.
    let slots = slot_states(&h);
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
    assert!(e.contains("the key is not in the pool's trust file"), "{e}");
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
        let slots = slot_states(&h);
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
