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

/// A module whose memory is `pages` pages from the start, all set to 0xAA.
fn leaves_bytes(pages: u32) -> Arc<[u8]> {
    crate::common::wat(&format!(
        r#"(module
          (memory (export "memory") {pages})
          (func (export "_start")
            (memory.fill (i32.const 0) (i32.const 0xAA) (i32.const {bytes}))))"#,
        bytes = pages * 65536
    ))
}

/// A module that starts with `initial` pages, grows to `pages`, and exits 1
/// if any byte of them is not zero.
fn finds_bytes(initial: u32, pages: u32) -> Arc<[u8]> {
    crate::common::wat(&format!(
        r#"(module
          (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
          (memory (export "memory") {initial})
          (func (export "_start") (local $i i32)
            (drop (memory.grow (i32.const {grow})))
            (block $done (loop $scan
              (br_if $done (i32.ge_u (local.get $i) (i32.const {bytes})))
              (if (i64.ne (i64.load (local.get $i)) (i64.const 0))
                (then (call $exit (i32.const 1))))
              (local.set $i (i32.add (local.get $i) (i32.const 8)))
              (br $scan)))))"#,
        grow = pages - initial,
        bytes = pages * 65536
    ))
}

/// The host keeps a job's memory for the next one (zeroed in place where the
/// job used little of it, given back to the kernel where it used much): the
/// next job, of the same size or another, finds only zeros, on both engines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_never_finds_what_an_earlier_job_left_in_its_memory() {
    for (engine, host) in hosts() {
        // 2 MiB is zeroed in place; 10 MiB is more than a memory keeps.
        for pages in [32, 160] {
            for initial in [pages, 1] {
                for round in 0..3 {
                    let sb = Sandbox::new();
                    let ad = "[ RequestMemory = 64 ]";
                    let w = host
                        .run(
                            spec(leaves_bytes(pages), ad, &sb),
                            Control::new(),
                            Arc::new(SystemClock),
                        )
                        .await;
                    assert_eq!(w.ending, Ending::Exited(0), "{engine}: {:?}", w.ending);
                    let r = host
                        .run(
                            spec(finds_bytes(initial, pages), ad, &sb),
                            Control::new(),
                            Arc::new(SystemClock),
                        )
                        .await;
                    assert_eq!(
                        r.ending,
                        Ending::Exited(0),
                        "{engine}, {pages} pages from {initial}, round {round}: the earlier job's bytes"
                    );
                }
            }
        }
    }
}

/// Each memory and table is address space or host memory the host keeps for
/// the job: a module defining more than a job may have (three memories, one
/// table) is refused at instantiation, on both engines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_memories_or_tables_than_a_job_may_have_are_refused() {
    let many = |what: &str, n: usize| {
        let defs = (0..n).map(|i| {
            format!("({what} ${what}{i} 1 {})", if what == "table" { "funcref" } else { "" })
        });
        crate::common::wat(&format!(
            "(module {} (memory (export \"memory\") 1) (func (export \"_start\")))",
            defs.collect::<Vec<_>>().join(" ")
        ))
    };
    for (engine, host) in hosts() {
        for (module, what) in
            [(many("memory", 3), "four memories"), (many("table", 2), "two tables")]
        {
            let sb = Sandbox::new();
            let r = host.run(spec(module, "[]", &sb), Control::new(), Arc::new(SystemClock)).await;
            let (_, reason) = held(&r);
            assert!(reason.contains("limit"), "{engine}, {what}: {reason}");
        }
        // Three memories and one table are allowed.
        let sb = Sandbox::new();
        let ok = host
            .run(spec(many("memory", 2), "[]", &sb), Control::new(), Arc::new(SystemClock))
            .await;
        assert_eq!(ok.ending, Ending::Exited(0), "{engine}: {:?}", ok.ending);
    }
}

/// A job may ask for more memory than the host lets any job have: it is held
/// at the host's cap, and the hold says it is the host's (not RequestMemory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_cap_on_memory_bounds_a_job_that_asks_for_more() {
    // 1.5 GiB, past the hosts' 1 GiB (`max_memory_bytes`), within RequestMemory.
    let grows = crate::common::wat(
        r#"(module
          (memory (export "memory") 1)
          (func (export "_start") (drop (memory.grow (i32.const 24576)))))"#,
    );
    for (engine, host) in hosts() {
        let sb = Sandbox::new();
        let r = host
            .run(
                spec(grows.clone(), "[ RequestMemory = 2048 ]", &sb),
                Control::new(),
                Arc::new(SystemClock),
            )
            .await;
        let (_, reason) = held(&r);
        assert!(reason.contains("this host allows any job 1024.0 MiB"), "{engine}: {reason}");
    }
}
