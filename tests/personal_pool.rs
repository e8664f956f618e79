//! `andes pool up` as a user starts it: a personal pool in one process,
//! tuned by a local configuration file it never overwrites, read back with
//! `andes config-val` (condor_config_val).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::pool::wait_or;

/// The pool's process, stopped when dropped.
struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_personal_pool_reads_its_local_configuration_and_config_val_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The user's own settings, beside what `pool up` writes.
    std::fs::write(d.join("andes.config.local"), "# mine\nNUM_CPUS = 3\nMY_KNOB = $(NUM_CPUS)0\n")
        .unwrap();
    std::fs::create_dir(d.join("config.d")).unwrap();
    std::fs::write(d.join("config.d/50-site"), "SITE_KNOB = from config.d\n").unwrap();
    std::fs::write(d.join("config.d/50-site~"), "SITE_KNOB = from a backup\n").unwrap();
    let mut child = common::andes()
        .args(["pool", "up", "--slots", "1", "--dir"])
        .arg(d)
        .env("ANDES_CONFIG_DIR", d)
        .env_remove("ANDES_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(d.join("pool.log")).unwrap())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let _up = Up(child);
    let mut config = None;
    for line in out.lines().map_while(Result::ok) {
        if let Some(c) = line.strip_prefix("export ANDES_CONFIG=") {
            config = Some(c.trim().to_string());
        }
        if line.trim() == "pool ready" {
            break;
        }
    }
    let config = config.unwrap_or_else(|| {
        panic!("no pool: {}", std::fs::read_to_string(d.join("pool.log")).unwrap_or_default())
    });
    let andes = |args: &[&str]| {
        let o = common::andes()
            .args(args)
            .env("ANDES_CONFIG_DIR", d)
            .env("ANDES_CONFIG", &config)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // The local file wins over `--slots 1`: three slots.
    wait_or(
        "three slots",
        Duration::from_secs(60),
        || andes(&["status", "-af", "Name"]).1.lines().count() == 3,
        || std::fs::read_to_string(d.join("pool.log")).unwrap_or_default(),
    );
    let (code, out, _) = andes(&["config-val", "NUM_CPUS", "MY_KNOB", "SITE_KNOB"]);
    assert_eq!((code, out.as_str()), (Some(0), "3\n30\nfrom config.d\n"));
    let (_, out, _) = andes(&["config-val", "-v", "NUM_CPUS"]);
    let local = d.canonicalize().unwrap().join("andes.config.local");
    assert_eq!(out, format!("NUM_CPUS = 3\n # at: {}, line 2\n # raw: 3\n", local.display()));
    let (code, _, err) = andes(&["config-val", "NO_SUCH_KNOB"]);
    assert_eq!((code, err.as_str()), (Some(1), "Not defined: NO_SUCH_KNOB\n"));
    // Each daemon of the pool logs to its own file, as HTCondor names them.
    let logs = d.join("log");
    let read = |n: &str| std::fs::read_to_string(logs.join(n)).unwrap_or_default();
    assert!(read("SchedLog").contains("andes schedd"), "{}", read("SchedLog"));
    assert!(read("StartLog").contains("andes host listening"), "{}", read("StartLog"));
    assert!(read("CollectorLog").contains("central-manager listening"), "{}", read("CollectorLog"));
    assert!(logs.join("NegotiatorLog").exists());
    assert!(!read("SchedLog").contains("andes host listening"), "each line in one log");
    // condor_config_val's single-dash form.
    let (code, out, _) = andes(&["config-val", "-dump"]);
    assert_eq!(code, Some(0));
    assert!(out.lines().any(|l| l == "SITE_KNOB = from config.d"), "{out}");
}
