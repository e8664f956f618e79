//! Hostile guests against the sandbox's limits: each trick a job could use to
//! take more than its share ends in a specific hold or refusal, on both
//! engines (metered, and unmetered where the platform has it), while a good
//! job beside it finishes normally.

use std::sync::{Arc, LazyLock};

use andes_starter::starter::HOLD_DISK;
use andes_starter::{Control, Ending, Host, HostConfig, JobResult, JobSpec, SystemClock};

use crate::common::{Sandbox, held, sample, spec};

static METERED: LazyLock<Host> = LazyLock::new(|| {
    Host::new(HostConfig { max_instances: 32, max_memory_bytes: 1 << 30, ..Default::default() })
        .expect("host")
});

static UNMETERED: LazyLock<Host> = LazyLock::new(|| {
    Host::new(HostConfig {
        max_instances: 32,
        max_memory_bytes: 1 << 30,
        meter_fuel: false,
        ..Default::default()
    })
    .expect("host")
});

/// The hosts to try: the metered one, and the unmetered one where this
/// platform runs jobs unmetered.
fn hosts() -> Vec<(&'static str, &'static Host)> {
    let mut h = vec![("metered", &*METERED)];
    if UNMETERED.unmetered_unavailable().is_none() {
        h.push(("unmetered", &*UNMETERED));
    }
    h
}

/// Runs `hostile` on `host` with a good job (hello) beside it; the good job
/// must finish normally whatever the hostile one does.
async fn beside_a_good_job(host: &'static Host, hostile: JobSpec) -> JobResult {
    let good_sb = Sandbox::new();
    std::fs::write(good_sb.0.join("in.txt"), "one\n").unwrap();
    let good = spec(sample("hello"), r#"[ In = "in.txt"; Out = "out.txt" ]"#, &good_sb);
    let (bad, ok) = tokio::join!(
        host.run(hostile, Control::new(), Arc::new(SystemClock)),
        host.run(good, Control::new(), Arc::new(SystemClock)),
    );
    assert_eq!(ok.ending, Ending::Exited(0), "the good job beside it: {:?}", ok.ending);
    assert!(good_sb.read("out.txt").contains("stdin: ONE"), "{}", good_sb.read("out.txt"));
    bad
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_hidden_by_unlinking_or_renaming_open_files_still_count() {
    for (engine, host) in hosts() {
        for mode in ["unlink", "rename"] {
            let sb = Sandbox::new();
            let ad = format!(r#"[ Out = "out.txt"; Arguments = "{mode}"; RequestDisk = 1024 ]"#);
            let r = beside_a_good_job(host, spec(sample("diskhide"), &ad, &sb)).await;
            let out = sb.read("out.txt");
            let (code, reason) = held(&r);
            assert_eq!(code, HOLD_DISK, "{engine} {mode}: {reason}; {out}");
            assert!(reason.contains("RequestDisk"), "{engine} {mode}: {reason}");
            // The job is stopped as its write fails; if it got to say how much
            // it hid, that is within the 1 MiB it asked for.
            if let Some(hid) = out
                .strip_prefix("hid ")
                .and_then(|s| s.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
            {
                assert!(hid <= 1024, "{engine} {mode}: {out}");
            }
            assert!(!out.contains("nothing stopped it"), "{engine} {mode}: {out}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_directories_and_links_are_bounded_in_number() {
    for (engine, host) in hosts() {
        for mode in ["files", "dirs", "links", "deep"] {
            let sb = Sandbox::new();
            let ad = format!(r#"[ Out = "out.txt"; Arguments = "{mode}" ]"#);
            let mut s = spec(sample("entrybomb"), &ad, &sb);
            s.limits.max_entries = 300;
            let r = beside_a_good_job(host, s).await;
            let out = sb.read("out.txt");
            let Ending::Held { code, reason, .. } = &r.ending else {
                panic!("{engine} {mode}: not held: {:?}; {out}", r.ending)
            };
            assert_eq!(*code, HOLD_DISK, "{engine} {mode}: {reason}; {out}");
            assert!(
                reason.contains("300 files, directories and links"),
                "{engine} {mode}: {reason}"
            );
            if let Some(made) = out
                .strip_prefix("made ")
                .and_then(|s| s.split(',').next())
                .and_then(|n| n.parse::<u64>().ok())
            {
                assert!(made <= 300, "{engine} {mode}: {out}");
            }
            assert!(!out.contains("nothing stopped it"), "{engine} {mode}: {out}");
            // However deep, the sandbox is cleared without following anything.
            andes_beneath::Beneath::open(&sb.0).unwrap().clear().unwrap();
            assert_eq!(std::fs::read_dir(&sb.0).unwrap().count(), 0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_handles_count_as_open_files() {
    for (engine, host) in hosts() {
        let sb = Sandbox::new();
        let r =
            beside_a_good_job(host, spec(sample("dirfdbomb"), r#"[ Out = "out.txt" ]"#, &sb)).await;
        let out = sb.read("out.txt");
        assert_eq!(r.ending, Ending::Exited(0), "{engine}: {out}");
        let n: usize = out
            .strip_prefix("opened ")
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{engine}: {out}"));
        assert!(n <= andes_starter::Limits::default().max_open_files as usize, "{engine}: {out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attribute_floods_are_refused_past_their_bounds() {
    for (engine, host) in hosts() {
        let sb = Sandbox::new();
        let r =
            beside_a_good_job(host, spec(sample("attrflood"), r#"[ Out = "out.txt" ]"#, &sb)).await;
        let out = sb.read("out.txt");
        assert_eq!(r.ending, Ending::Exited(0), "{engine}: {out}");
        let first = out.lines().next().unwrap_or_default();
        let n: usize = first
            .strip_prefix("set ")
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{engine}: {out}"));
        assert!(n <= andes_starter::imports::MAX_SET_ATTRS, "{engine}: {out}");
        assert!(!first.contains("nothing stopped it"), "{engine}: {out}");
        // Repeating one name is allowed, and only its latest value is kept.
        assert!(out.contains("repeated 20000 times"), "{engine}: {out}");
        assert!(r.updates.len() <= andes_starter::imports::MAX_SET_ATTRS, "{engine}");
        let bytes: usize = r.updates.iter().map(|(n, e)| n.len() + e.to_string().len()).sum();
        assert!(bytes <= andes_starter::imports::MAX_SET_BYTES + 64 * 1024, "{engine}: {bytes}");
    }
}
