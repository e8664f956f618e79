//! Reads logs written by `andes_schedd::userlog` with HTCondor's own
//! reader: the `JobEventLog` of the htcondor Python package (25.14.1,
//! module `htcondor2`), and checks each event's type, job, time and fields,
//! and that HTCondor's re-formatting of each parsed event gives back our text.
//!
//! The test makes its own Python environment (a venv under the target
//! directory, reused once made). Without python3, venv, pip or the network
//! it says loudly on stderr that it is skipped, and why, and passes.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use andes_job::userlog::*;
use classad::{ClassAd, Value};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::{Value as Json, json};

const HTCONDOR: &str = "htcondor==25.14.1";

/// US Central time as a POSIX TZ rule (no tz database needed, here or in Python).
const CHICAGO: &str = "CST6CDT,M3.2.0,M11.1.0";
/// Central European time as a POSIX TZ rule.
const PARIS: &str = "CET-1CEST,M3.5.0,M10.5.0/3";

/// The venv's python, made (once, under a lock) if needed; or why not.
fn htcondor_python() -> Result<PathBuf, String> {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    let venv = base.join("py-htcondor-25.14.1");
    let lock_path = base.join("py-htcondor-25.14.1.lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    lock.lock().map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    let python = venv.join("bin").join("python");
    let works = |py: &Path| {
        Command::new(py)
            .args(["-c", "import htcondor2"])
            .env("CONDOR_CONFIG", "/dev/null")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if works(&python) {
        return Ok(python);
    }
    let system_python = std::env::var("ANDES_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&system_python)
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .output()
        .map_err(|e| format!("cannot run `{system_python}`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{system_python} -m venv` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let out = Command::new(venv.join("bin").join("pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "--timeout", "30"])
        .arg(HTCONDOR)
        .output()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(format!("`pip install {HTCONDOR}` failed: {}", tail.join(" / ")));
    }
    if works(&python) { Ok(python) } else { Err("htcondor2 does not import".into()) }
}

fn skip(reason: &str) {
    // Straight to the process's stderr, past the test harness's capture, so
    // that a skip is seen even when the test passes.
    let msg = format!(
        "\n############################################################################\n\
         ## SKIPPED: userlog test against HTCondor's reader (htcondor2.JobEventLog)\n\
         ## reason: {reason}\n\
         ############################################################################\n"
    );
    let _ = std::io::stderr().write_all(msg.as_bytes());
}

const READER: &str = r#"
import json, sys
import htcondor2
out = []
try:
    for e in htcondor2.JobEventLog(sys.argv[1]).events(0):
        data = {}
        for k in e:
            v = e[k]
            data[k] = v if isinstance(v, (bool, int, float, str)) else repr(v)
        out.append({"type": int(e.type), "cluster": e.cluster, "proc": e.proc,
                    "timestamp": e.timestamp, "data": data, "text": str(e)})
except Exception as x:
    out.append({"error": repr(x)})
print(json.dumps(out))
"#;

/// HTCondor's view of each event of the log at `path`, read with `TZ=tz`.
fn read_with_htcondor(python: &Path, path: &Path, tz: &str) -> Vec<Json> {
    let out = Command::new(python)
        .args(["-c", READER])
        .arg(path)
        .env("TZ", tz)
        .env("CONDOR_CONFIG", "/dev/null")
        .output()
        .expect("run python");
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Json = serde_json::from_slice(&out.stdout).expect("JSON from the reader");
    v.as_array().cloned().unwrap_or_default()
}

fn usage(user: u32, system: u32) -> CpuUsage {
    CpuUsage { user, system }
}

fn res(name: &str, usage: f64, request: f64, allocated: f64) -> ResourceUsage {
    ResourceUsage {
        name: name.into(),
        usage: Some(usage),
        request: Some(request),
        allocated: Some(allocated),
        assigned: None,
    }
}

/// Every event kind, over several jobs, each with the fields HTCondor's
/// reader must find (attribute → expected value in the event's ClassAd).
fn events() -> Vec<(JobEvent, Vec<(&'static str, Json)>)> {
    let t0: i64 = 1_795_320_349; // 2026-11-22 04:05:49 UTC
    let mut n = 0;
    let mut ev = |cluster: i32, proc: i32, kind: EventKind| {
        n += 1;
        JobEvent::new(
            EventJobId { cluster, proc, subproc: 0 },
            Timestamp::from_second(t0 + 61 * n).unwrap(),
            kind,
        )
    };
    let host = "<127.0.0.1:9618?addrs=127.0.0.1-9618&alias=submit.example>";
    let mut ad = ClassAd::new();
    ad.insert_value("Owner", "alice");
    ad.insert_value("JobStatus", 2i64);
    ad.insert_value("RemoteWallClockTime", 12.5);
    ad.insert_value("Iwd", "C:\\jobs\\\"quoted\"");
    ad.insert_value("WantCheckpoint", true);
    ad.insert_value("Multi", "line1\nline2");
    ad.insert_value("Nothing", Value::Undefined);

    let terminated = Terminated {
        ending: Ending::Normal { return_value: 3 },
        run_remote_usage: usage(1, 2),
        run_local_usage: usage(0, 0),
        total_remote_usage: usage(90_061, 2),
        total_local_usage: usage(0, 1),
        sent_bytes: 0,
        received_bytes: 1234,
        total_sent_bytes: 5,
        total_received_bytes: 2468,
        resources: vec![
            res("Cpus", 0.25, 1.0, 1.0),
            res("Disk", 10.0, 20.0, 30.0),
            res("Memory", 3.0, 128.0, 128.0),
        ],
    };
    vec![
        (
            ev(
                100,
                0,
                EventKind::Submit(Submit {
                    submit_host: host.into(),
                    log_notes: Some("DAG Node: A".into()),
                    user_notes: None,
                    warnings: None,
                }),
            ),
            vec![("SubmitHost", json!(host)), ("LogNotes", json!("DAG Node: A"))],
        ),
        (
            ev(
                100,
                1,
                EventKind::Submit(Submit {
                    submit_host: host.into(),
                    log_notes: Some("first note".into()),
                    user_notes: Some("user note".into()),
                    warnings: None,
                }),
            ),
            vec![("LogNotes", json!("first note")), ("UserNotes", json!("user note"))],
        ),
        (
            ev(
                100,
                0,
                EventKind::Execute(Execute {
                    execute_host: "<10.0.0.2:9618?addrs=10.0.0.2-9618>".into(),
                    slot_name: Some("slot1_1@exec.example".into()),
                }),
            ),
            vec![
                ("ExecuteHost", json!("<10.0.0.2:9618?addrs=10.0.0.2-9618>")),
                ("SlotName", json!("slot1_1@exec.example")),
            ],
        ),
        (
            ev(
                100,
                0,
                EventKind::ImageSize(ImageSize {
                    image_size_kb: 2048,
                    memory_usage_mb: Some(2),
                    resident_set_size_kb: Some(1900),
                    proportional_set_size_kb: Some(1800),
                }),
            ),
            vec![
                ("Size", json!(2048)),
                ("MemoryUsage", json!(2)),
                ("ResidentSetSize", json!(1900)),
                ("ProportionalSetSize", json!(1800)),
            ],
        ),
        (ev(100, 0, EventKind::Suspended(1)), vec![("NumberOfPIDs", json!(1))]),
        (ev(100, 0, EventKind::Unsuspended), vec![]),
        (
            ev(
                100,
                0,
                EventKind::Checkpointed(Checkpointed {
                    run_remote_usage: usage(3661, 1),
                    run_local_usage: usage(0, 0),
                    sent_bytes: 4096,
                }),
            ),
            vec![
                ("RunRemoteUsage", json!("Usr 0 01:01:01, Sys 0 00:00:01")),
                ("SentBytes", json!(4096.0)),
            ],
        ),
        (
            ev(
                100,
                0,
                EventKind::Evicted(Evicted {
                    eviction: Eviction::Checkpointed,
                    reason_code: 0,
                    reason_subcode: 0,
                    run_remote_usage: usage(5, 0),
                    run_local_usage: usage(0, 0),
                    sent_bytes: 10,
                    received_bytes: 20,
                    reason: Some("preempted:\nby the startd".into()),
                    resources: vec![res("Cpus", 1.0, 1.0, 1.0)],
                }),
            ),
            vec![
                ("Checkpointed", json!(true)),
                ("TerminatedAndRequeued", json!(false)),
                ("Reason", json!("preempted:|by the startd")),
                ("SentBytes", json!(10.0)),
                ("ReceivedBytes", json!(20.0)),
                ("RunRemoteUsage", json!("Usr 0 00:00:05, Sys 0 00:00:00")),
            ],
        ),
        (
            ev(
                100,
                0,
                EventKind::Disconnected(Disconnected {
                    reason: "Socket between submit and execute hosts closed unexpectedly".into(),
                    startd_name: "slot1@exec.example".into(),
                    startd_addr: "<10.0.0.2:9618>".into(),
                }),
            ),
            vec![
                (
                    "DisconnectReason",
                    json!("Socket between submit and execute hosts closed unexpectedly"),
                ),
                ("StartdName", json!("slot1@exec.example")),
                ("StartdAddr", json!("<10.0.0.2:9618>")),
            ],
        ),
        (
            ev(
                100,
                0,
                EventKind::Reconnected(Reconnected {
                    startd_name: "slot1@exec.example".into(),
                    startd_addr: "<10.0.0.2:9618>".into(),
                    starter_addr: "<10.0.0.2:9700>".into(),
                }),
            ),
            vec![
                ("StartdName", json!("slot1@exec.example")),
                ("StartdAddr", json!("<10.0.0.2:9618>")),
                ("StarterAddr", json!("<10.0.0.2:9700>")),
            ],
        ),
        (
            ev(100, 0, EventKind::JobAdInformation(ad)),
            vec![
                ("Owner", json!("alice")),
                ("JobStatus", json!(2)),
                ("RemoteWallClockTime", json!(12.5)),
                ("Iwd", json!("C:\\jobs\\\"quoted\"")),
                ("WantCheckpoint", json!(true)),
                ("Multi", json!("line1|line2")),
            ],
        ),
        (
            ev(
                100,
                0,
                EventKind::AttributeUpdate(AttributeUpdate {
                    name: "JobPrio".into(),
                    value: "5".into(),
                    old_value: Some("0".into()),
                }),
            ),
            vec![("Attribute", json!("JobPrio")), ("Value", json!("5"))],
        ),
        (
            ev(100, 0, EventKind::Terminated(terminated.clone())),
            vec![
                ("TerminatedNormally", json!(true)),
                ("ReturnValue", json!(3)),
                ("RunRemoteUsage", json!("Usr 0 00:00:01, Sys 0 00:00:02")),
                ("TotalRemoteUsage", json!("Usr 1 01:01:01, Sys 0 00:00:02")),
                ("TotalLocalUsage", json!("Usr 0 00:00:00, Sys 0 00:00:01")),
                ("SentBytes", json!(0.0)),
                ("ReceivedBytes", json!(1234.0)),
                ("TotalSentBytes", json!(5.0)),
                ("TotalReceivedBytes", json!(2468.0)),
                ("CpusUsage", json!(0.25)),
                ("RequestCpus", json!(1)),
                ("Cpus", json!(1)),
                ("DiskUsage", json!(10)),
                ("RequestDisk", json!(20)),
                ("Disk", json!(30)),
                ("MemoryUsage", json!(3)),
                ("RequestMemory", json!(128)),
                ("Memory", json!(128)),
            ],
        ),
        (
            ev(
                100,
                1,
                EventKind::ShadowException(ShadowException {
                    message: "failed to activate claim".into(),
                    sent_bytes: 7,
                    received_bytes: 8,
                }),
            ),
            vec![
                ("Message", json!("failed to activate claim")),
                ("SentBytes", json!(7.0)),
                ("ReceivedBytes", json!(8.0)),
            ],
        ),
        (
            ev(
                100,
                1,
                EventKind::RemoteError(RemoteError {
                    critical: true,
                    daemon_name: "starter".into(),
                    execute_host: "exec.example".into(),
                    error: "Failed to instantiate the module:\nunknown import `env.f`".into(),
                    hold_reason_code: 6,
                    hold_reason_subcode: 2,
                }),
            ),
            vec![
                ("Daemon", json!("starter")),
                ("ExecuteHost", json!("exec.example")),
                ("ErrorMsg", json!("Failed to instantiate the module:\nunknown import `env.f`")),
                ("HoldReasonCode", json!(6)),
                ("HoldReasonSubCode", json!(2)),
            ],
        ),
        (
            ev(
                100,
                1,
                EventKind::Held {
                    reason: Some("Error from slot1@exec: memory\nlimit exceeded\n...".into()),
                    code: 34,
                    subcode: 0,
                },
            ),
            vec![
                ("HoldReason", json!("Error from slot1@exec: memory|limit exceeded|...")),
                ("HoldReasonCode", json!(34)),
                ("HoldReasonSubCode", json!(0)),
            ],
        ),
        (
            ev(100, 1, EventKind::Released(Some("via condor_release (by user alice)".into()))),
            vec![("Reason", json!("via condor_release (by user alice)"))],
        ),
        (
            ev(
                100,
                1,
                EventKind::ReconnectFailed(ReconnectFailed {
                    reason: "Job lease expired".into(),
                    startd_name: "slot1@exec.example".into(),
                }),
            ),
            vec![
                ("Reason", json!("Job lease expired")),
                ("StartdName", json!("slot1@exec.example")),
            ],
        ),
        (
            ev(
                100,
                1,
                EventKind::Evicted(Evicted {
                    eviction: Eviction::TerminatedAndRequeued(Ending::Abnormal {
                        signal: 9,
                        core_file: None,
                    }),
                    reason_code: 21,
                    reason_subcode: 102,
                    run_remote_usage: usage(5, 1),
                    run_local_usage: usage(0, 0),
                    sent_bytes: 1,
                    received_bytes: 2,
                    reason: Some("OnExitRemove was false".into()),
                    resources: vec![],
                }),
            ),
            vec![
                ("TerminatedAndRequeued", json!(true)),
                ("TerminatedNormally", json!(false)),
                ("TerminatedBySignal", json!(9)),
                ("ReasonCode", json!(21)),
                ("ReasonSubCode", json!(102)),
                ("Reason", json!("OnExitRemove was false")),
            ],
        ),
        (
            ev(
                100,
                1,
                EventKind::Terminated(Terminated {
                    ending: Ending::Abnormal {
                        signal: 11,
                        core_file: Some("/scratch/core.1234".into()),
                    },
                    resources: vec![],
                    ..terminated
                }),
            ),
            vec![
                ("TerminatedNormally", json!(false)),
                ("TerminatedBySignal", json!(11)),
                ("CoreFile", json!("/scratch/core.1234")),
            ],
        ),
        (
            ev(100, 1, EventKind::Aborted(Some("via condor_rm (by user alice)".into()))),
            vec![("Reason", json!("via condor_rm (by user alice)"))],
        ),
        (
            ev(
                101,
                -1,
                EventKind::ClusterSubmit(ClusterSubmit {
                    submit_host: host.into(),
                    log_notes: None,
                    user_notes: None,
                }),
            ),
            vec![("SubmitHost", json!(host))],
        ),
        (
            ev(
                101,
                -1,
                EventKind::ClusterRemove(ClusterRemove {
                    next_proc_id: 5,
                    next_row: 5,
                    completion: Completion::Complete,
                    notes: Some("removed by alice".into()),
                }),
            ),
            vec![
                ("NextProcId", json!(5)),
                ("NextRow", json!(5)),
                ("Completion", json!(1)),
                ("Notes", json!("removed by alice")),
            ],
        ),
        (
            ev(102, 0, EventKind::ExecutableError(ExecErrorType::NotExecutable)),
            vec![("ExecuteErrorType", json!(0))],
        ),
        (
            ev(102, 0, EventKind::Generic("a generic event".into())),
            vec![("Info", json!("a generic event"))],
        ),
    ]
}

fn same(got: &Json, want: &Json) -> bool {
    match (got.as_f64(), want.as_f64()) {
        (Some(a), Some(b)) => a == b && got.is_boolean() == want.is_boolean(),
        _ => got == want,
    }
}

/// Writes every event with `opts`, reads it back with HTCondor under `tz`,
/// and checks it event by event. Returns the number of events checked.
fn check_with_htcondor(opts: FormatOptions, tz: &str, compare_text: bool) -> Option<usize> {
    let python = match htcondor_python() {
        Ok(p) => p,
        Err(reason) => {
            skip(&reason);
            return None;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.log");
    let cases = events();
    let mut log = UserLog::open(&path, opts.clone()).unwrap();
    for (e, _) in &cases {
        log.append(e).unwrap();
    }
    let got = read_with_htcondor(&python, &path, tz);
    let log_text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(got.len(), cases.len(), "HTCondor read {got:#?}\nfrom:\n{log_text}");
    let mut failures = Vec::new();
    for (i, ((e, fields), g)) in cases.iter().zip(&got).enumerate() {
        let what = format!("event #{i} ({:03} {})", e.kind.number(), e.kind.name());
        if let Some(err) = g.get("error") {
            failures.push(format!("{what}: HTCondor's reader failed: {err}"));
            continue;
        }
        let num = |k: &str| g.get(k).and_then(Json::as_i64);
        if num("type") != Some(i64::from(e.kind.number())) {
            failures.push(format!("{what}: type {:?}", g.get("type")));
        }
        if num("cluster") != Some(i64::from(e.id.cluster)) {
            failures.push(format!("{what}: cluster {:?}", g.get("cluster")));
        }
        if num("proc") != Some(i64::from(e.id.proc)) {
            failures.push(format!("{what}: proc {:?}", g.get("proc")));
        }
        if num("timestamp") != Some(e.time.as_second()) {
            failures.push(format!(
                "{what}: timestamp {:?}, want {}",
                g.get("timestamp"),
                e.time.as_second()
            ));
        }
        let data = &g["data"];
        for (k, want) in fields {
            match data.get(k) {
                Some(v) if same(v, want) => {}
                other => failures.push(format!("{what}: {k} = {other:?}, want {want}")),
            }
        }
        // HTCondor's reader rewrites two things on purpose: `DAG Node:` notes
        // become structured notes, and it does not read the resources table
        // of an eviction. Everything else must come back as we wrote it.
        let rewritten = match &e.kind {
            EventKind::Submit(s) => {
                s.log_notes.as_deref().is_some_and(|n| n.starts_with("DAG Node: "))
            }
            EventKind::Evicted(v) => !v.resources.is_empty(),
            _ => false,
        };
        if compare_text && !rewritten {
            let ours = e.to_text(&opts);
            let ours = ours.strip_suffix("...\n").unwrap_or(&ours);
            let theirs = g["text"].as_str().unwrap_or("");
            if ours != theirs {
                failures.push(format!(
                    "{what}: HTCondor re-formats it differently:\n--- ours\n{ours}--- HTCondor\n{theirs}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}\n\nlog:\n{log_text}", failures.join("\n"));
    Some(cases.len())
}

#[test]
fn htcondor_reads_every_event_in_utc() {
    if let Some(n) = check_with_htcondor(FormatOptions::utc(), "UTC", false) {
        eprintln!("HTCondor's reader agreed on all {n} events (UTC dates with Z)");
    }
}

#[test]
fn htcondor_reads_every_event_in_local_time_and_reformats_it_identically() {
    // HTCondor's default form: ISO dates in local time, without Z. HTCondor's
    // reader turns them into times with the process's time zone.
    let zone = TimeZone::posix(CHICAGO).unwrap();
    if let Some(n) = check_with_htcondor(FormatOptions::local(zone), CHICAGO, true) {
        eprintln!("HTCondor's reader agreed on all {n} events, text included (local dates)");
    }
}

#[test]
fn htcondor_reads_legacy_and_sub_second_dates() {
    let python = match htcondor_python() {
        Ok(p) => p,
        Err(reason) => return skip(&reason),
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.log");
    let t = Timestamp::new(1_795_320_349, 987_000_000).unwrap();
    let e = JobEvent::new(EventJobId::new(7, 3), t, EventKind::Unsuspended);
    let opts = FormatOptions::utc().apply("SUB_SECOND");
    UserLog::open(&path, opts).unwrap().append(&e).unwrap();
    let got = read_with_htcondor(&python, &path, "UTC");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["timestamp"], json!(1_795_320_349));
    assert_eq!(got[0]["data"]["EventTime"], json!("2026-11-22T04:05:49.987"));

    // Legacy dates carry no year: HTCondor takes the current one.
    let path = dir.path().join("legacy.log");
    UserLog::open(&path, FormatOptions::utc().apply("LEGACY")).unwrap().append(&e).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "011 (007.003.000) 11/22 04:05:49 Job was unsuspended.\n...\n"
    );
    let got = read_with_htcondor(&python, &path, "UTC");
    assert_eq!(got.len(), 1, "{got:?}");
    let time = got[0]["data"]["EventTime"].as_str().unwrap_or("");
    assert!(time.ends_with("-11-22T04:05:49"), "{time}");
    assert_eq!(got[0]["type"], json!(11));
    assert_eq!(got[0]["cluster"], json!(7));
    assert_eq!(got[0]["proc"], json!(3));
}

mod random {
    use super::*;
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    /// One-line text that HTCondor keeps as it is: printable, no surrounding
    /// blanks, and none of the prefixes its reader gives a meaning to.
    fn text() -> impl Strategy<Value = String> {
        "[!-~]([ -~]{0,30}[!-~])?".prop_filter("meaningful prefix", |s| {
            !s.starts_with('[')
                && !s.starts_with("WARNING: ")
                && !s.starts_with("DAG Node: ")
                && !s.starts_with("Code ")
                && !s.starts_with("Partitionable ")
                && !s.starts_with("Reason: ")
                && s != "Reason unspecified"
        })
    }

    fn cell() -> impl Strategy<Value = Option<f64>> {
        proptest::option::of(prop_oneof![
            (0i64..1_000_000_000_000).prop_map(|v| v as f64),
            (0i64..10_000_000).prop_map(|v| v as f64),
            (1i64..100_000).prop_map(|v| v as f64 / 100.0),
        ])
    }

    fn resources() -> impl Strategy<Value = Vec<ResourceUsage>> {
        proptest::collection::btree_map(
            prop_oneof![
                Just("Cpus".to_string()),
                Just("Memory".to_string()),
                Just("Disk".to_string()),
                Just("Gpus".to_string()),
                Just("TimeExecute".to_string()),
                "[A-Z][A-Za-z]{0,24}",
            ],
            (cell(), cell(), cell(), proptest::option::of("[A-Za-z0-9,-]{1,30}")),
            1..5,
        )
        .prop_map(|m| {
            let mut seen = std::collections::HashSet::new();
            let mut v: Vec<ResourceUsage> = m
                .into_iter()
                .filter(|(name, _)| seen.insert(name.to_ascii_lowercase()))
                .map(|(name, (usage, request, allocated, assigned))| ResourceUsage {
                    name,
                    usage,
                    request,
                    allocated,
                    assigned,
                })
                .collect();
            if v.iter().all(|r| r.allocated.is_none()) {
                v.iter_mut().for_each(|r| r.assigned = None);
            }
            v
        })
    }

    fn ad() -> impl Strategy<Value = ClassAd> {
        proptest::collection::btree_map(
            "[A-Za-z][A-Za-z0-9_]{0,16}",
            prop_oneof![
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::Int),
                (-1_000_000_000i64..1_000_000_000).prop_map(|v| Value::Real(v as f64 / 1000.0)),
                any::<f64>().prop_filter("finite", |r| r.is_finite()).prop_map(Value::Real),
                "[ -~]{0,24}".prop_map(Value::from),
            ],
            1..8,
        )
        .prop_map(|m| {
            let mut ad = ClassAd::new();
            for (k, v) in m {
                if !classad::AttrName::new(&k).needs_quotes() && ad.get(&k).is_none() {
                    ad.insert_value(k.as_str(), v);
                }
            }
            if ad.is_empty() {
                ad.insert_value("A", 1i64);
            }
            ad
        })
    }

    fn cpu() -> impl Strategy<Value = CpuUsage> {
        (0u32..=i32::MAX as u32, 0u32..=i32::MAX as u32)
            .prop_map(|(user, system)| CpuUsage { user, system })
    }

    fn ending() -> impl Strategy<Value = Ending> {
        prop_oneof![
            any::<i32>().prop_map(|return_value| Ending::Normal { return_value }),
            (0i32..100, proptest::option::of("/[a-z0-9/._-]{1,30}"))
                .prop_map(|(signal, core_file)| Ending::Abnormal { signal, core_file }),
        ]
    }

    fn kind() -> impl Strategy<Value = EventKind> {
        prop_oneof![
            (text(), proptest::option::of(text())).prop_map(|(h, n)| {
                EventKind::Submit(Submit {
                    submit_host: h,
                    log_notes: n,
                    user_notes: None,
                    warnings: None,
                })
            }),
            (ending(), cpu(), cpu(), cpu(), cpu(), any::<[u32; 4]>(), resources()).prop_map(
                |(ending, a, b, c, d, bytes, resources)| {
                    EventKind::Terminated(Terminated {
                        ending,
                        run_remote_usage: a,
                        run_local_usage: b,
                        total_remote_usage: c,
                        total_local_usage: d,
                        // HTCondor reads these bytes as a C float: exact below 2^24.
                        sent_bytes: u64::from(bytes[0] >> 8),
                        received_bytes: u64::from(bytes[1] >> 8),
                        total_sent_bytes: u64::from(bytes[2] >> 8),
                        total_received_bytes: u64::from(bytes[3] >> 8),
                        resources,
                    })
                }
            ),
            ad().prop_map(EventKind::JobAdInformation),
            (proptest::option::of(text()), any::<i32>(), any::<i32>())
                .prop_map(|(reason, code, subcode)| EventKind::Held { reason, code, subcode }),
            // HTCondor's reader takes a missing ResidentSetSize as 0.
            (any::<i64>(), proptest::option::of(0i64..1 << 50), 0i64..1 << 50).prop_map(
                |(i, m, r)| {
                    EventKind::ImageSize(ImageSize {
                        image_size_kb: i,
                        memory_usage_mb: m,
                        resident_set_size_kb: Some(r),
                        proportional_set_size_kb: None,
                    })
                }
            ),
            (
                "[a-z_]{1,10}",
                "[a-z0-9.-]{1,20}",
                proptest::collection::vec(text(), 0..3),
                1i32..50,
                any::<i32>()
            )
                .prop_map(|(d, h, lines, code, subcode)| {
                    EventKind::RemoteError(RemoteError {
                        critical: true,
                        daemon_name: d,
                        execute_host: h,
                        error: lines.join("\n"),
                        hold_reason_code: code,
                        hold_reason_subcode: subcode,
                    })
                }),
            (
                prop_oneof![
                    Just(Eviction::NotCheckpointed),
                    Just(Eviction::Checkpointed),
                    ending().prop_map(Eviction::TerminatedAndRequeued)
                ],
                cpu(),
                cpu(),
                proptest::option::of(text()),
                0i32..50
            )
                .prop_map(|(eviction, a, b, reason, code)| {
                    EventKind::Evicted(Evicted {
                        eviction,
                        reason_code: code,
                        reason_subcode: code * 3,
                        run_remote_usage: a,
                        run_local_usage: b,
                        sent_bytes: 12,
                        received_bytes: 34,
                        reason,
                        resources: vec![],
                    })
                }),
            (any::<i32>(), any::<i32>(), proptest::option::of(text())).prop_map(|(p, r, notes)| {
                EventKind::ClusterRemove(ClusterRemove {
                    next_proc_id: p,
                    next_row: r,
                    completion: Completion::Paused,
                    notes,
                })
            }),
            (text(), text(), text()).prop_map(|(reason, a, n)| {
                EventKind::Disconnected(Disconnected {
                    reason,
                    startd_addr: a,
                    startd_name: n.replace(' ', "_"),
                })
            }),
        ]
    }

    /// Random events of the kinds with the most structure, read by
    /// HTCondor: its re-formatting of each event must be our text exactly.
    #[test]
    fn htcondor_reformats_random_events_identically() {
        let python = match htcondor_python() {
            Ok(p) => p,
            Err(reason) => return skip(&reason),
        };
        let mut runner = TestRunner::deterministic();
        let strategy = (any::<u16>(), 0i64..4_000_000_000, kind());
        let zone = TimeZone::posix(PARIS).unwrap();
        let opts = FormatOptions::local(zone);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("random.log");
        let mut log = UserLog::open(&path, opts.clone()).unwrap();
        let mut events = Vec::new();
        for _ in 0..1000 {
            let (c, t, kind) = strategy.new_tree(&mut runner).unwrap().current();
            let e = JobEvent::new(
                EventJobId::new(i32::from(c), 0),
                Timestamp::from_second(t).unwrap(),
                kind,
            );
            log.append(&e).unwrap();
            events.push(e);
        }
        let got = read_with_htcondor(&python, &path, PARIS);
        assert_eq!(got.len(), events.len());
        let mut failures = Vec::new();
        for (e, g) in events.iter().zip(&got) {
            let ours = e.to_text(&opts);
            let ours = ours.strip_suffix("...\n").unwrap_or(&ours);
            let theirs = g["text"].as_str().unwrap_or("(no text: a read error)");
            if ours != theirs {
                failures.push(format!("--- ours\n{ours}--- HTCondor\n{theirs}"));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} events differ:\n{}",
            failures.len(),
            events.len(),
            failures.join("\n")
        );
    }
}
