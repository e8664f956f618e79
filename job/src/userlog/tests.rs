//! The user log's tests: each event's exact text, the checks, the writer,
//! the reader and follower, and `parse(format(e)) == e` over random events.

use classad::{ClassAd, Value};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use proptest::prelude::*;

use super::old_syntax::old_real;
use super::*;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

/// US Central time as a POSIX TZ rule (no tz database needed, here or in Python).
const CHICAGO: &str = "CST6CDT,M3.2.0,M11.1.0";
/// Central European time as a POSIX TZ rule.
const PARIS: &str = "CET-1CEST,M3.5.0,M10.5.0/3";

/// 2026-11-22 04:05:49 UTC.
const T0: i64 = 1_795_320_349;

#[test]
fn an_event_as_htcondors_event_classad() {
    let held = JobEvent::new(
        EventJobId::new(7, 2),
        at(T0),
        EventKind::Held { reason: Some("disk full".into()), code: 21, subcode: 3 },
    );
    let ad = held.to_ad();
    let s = |n: &str| ad.eval_attr(n);
    assert_eq!(s("MyType"), Value::string("JobHeldEvent"));
    assert_eq!(s("EventTypeNumber"), Value::Int(12));
    assert_eq!(s("EventTime"), Value::string("2026-11-22T04:05:49"));
    assert_eq!(
        (s("Cluster"), s("Proc"), s("Subproc")),
        (Value::Int(7), Value::Int(2), Value::Int(0))
    );
    assert_eq!(s("HoldReason"), Value::string("disk full"));
    assert_eq!((s("HoldReasonCode"), s("HoldReasonSubCode")), (Value::Int(21), Value::Int(3)));
    let ended = JobEvent::new(
        EventJobId::new(1, 0),
        at(T0),
        EventKind::Terminated(Terminated {
            ending: Ending::Abnormal { signal: 9, core_file: None },
            run_remote_usage: CpuUsage::from_secs(3661, 1),
            run_local_usage: CpuUsage::default(),
            total_remote_usage: CpuUsage::default(),
            total_local_usage: CpuUsage::default(),
            sent_bytes: 10,
            received_bytes: 20,
            total_sent_bytes: 10,
            total_received_bytes: 20,
            resources: Vec::new(),
        }),
    );
    let ad = ended.to_ad();
    assert_eq!(ad.eval_attr("TerminatedNormally"), Value::Bool(false));
    assert_eq!(ad.eval_attr("TerminatedBySignal"), Value::Int(9));
    assert!(!ad.contains("ReturnValue"));
    assert_eq!(ad.eval_attr("RunRemoteUsage"), Value::string("Usr 0 01:01:01, Sys 0 00:00:01"));
    assert_eq!(
        ad.eval_attr("ReceivedBytes"),
        Value::Real(20.0),
        "byte counts are reals, as in HTCondor"
    );
}

fn ev(kind: EventKind) -> JobEvent {
    JobEvent::new(EventJobId::new(42, 7), at(T0), kind)
}

fn text(kind: EventKind) -> String {
    ev(kind).to_text(&FormatOptions::utc())
}

fn body(kind: EventKind) -> String {
    let t = text(kind);
    let header = "(042.007.000) 2026-11-22 04:05:49Z ";
    let at = t.find(header).expect("header") + header.len();
    assert!(t.ends_with("\n...\n"), "{t:?}");
    t[at..t.len() - 4].to_string()
}

fn usage(user: u32, system: u32) -> CpuUsage {
    CpuUsage { user, system }
}

/// A follower returns each event once it is closed, whatever the bytes
/// a write left; it starts over when the log is replaced, and a bad
/// event is named by its line in the whole file.
#[test]
fn a_follower_returns_events_as_they_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.log");
    let mut f = Follower::new(&path, ParseOptions::in_zone(TimeZone::UTC));
    assert!(matches!(f.poll(), Err(ReadError::Io { .. })), "no log yet");
    let one = text(EventKind::Aborted(Some("why".into())));
    let two = text(EventKind::Released(None));
    std::fs::write(&path, "").unwrap();
    assert!(f.poll().unwrap().is_empty());
    // Written a byte at a time: an event comes out only once closed.
    let all = format!("{one}{two}");
    let mut got = Vec::new();
    for i in 1..=all.len() {
        std::fs::write(&path, &all[..i]).unwrap();
        let new = f.poll().unwrap();
        if i == one.len() {
            assert_eq!(new.len(), 1, "closed at byte {i}");
        } else if i != all.len() {
            assert!(new.is_empty(), "at byte {i}: {new:?}");
        }
        got.extend(new);
    }
    assert_eq!(
        got,
        vec![ev(EventKind::Aborted(Some("why".into()))), ev(EventKind::Released(None))]
    );
    assert!(f.poll().unwrap().is_empty(), "each event once");
    // Replaced by a shorter log: read from its start.
    std::fs::write(&path, &two).unwrap();
    assert_eq!(f.poll().unwrap(), vec![ev(EventKind::Released(None))]);
    // A bad event: its line in the whole file.
    let lines = two.matches('\n').count();
    std::fs::write(&path, format!("{two}{two}garbage\n...\n")).unwrap();
    let e = f.poll().unwrap_err().to_string();
    assert!(e.contains(&format!("job.log:{}:", 2 * lines + 1)), "{e}");
}

fn res(name: &str, u: f64, r: f64, a: f64) -> ResourceUsage {
    ResourceUsage {
        name: name.into(),
        usage: Some(u),
        request: Some(r),
        allocated: Some(a),
        assigned: None,
    }
}

#[test]
fn header_forms() {
    let e = ev(EventKind::Unsuspended);
    assert_eq!(
        e.to_text(&FormatOptions::utc()),
        "011 (042.007.000) 2026-11-22 04:05:49Z Job was unsuspended.\n...\n"
    );
    let chicago = TimeZone::posix(CHICAGO).unwrap();
    assert_eq!(
        e.to_text(&FormatOptions::local(chicago.clone())),
        "011 (042.007.000) 2026-11-21 22:05:49 Job was unsuspended.\n...\n"
    );
    let legacy = FormatOptions::local(chicago).apply("LEGACY");
    assert_eq!(e.to_text(&legacy), "011 (042.007.000) 11/21 22:05:49 Job was unsuspended.\n...\n");
    let ms = FormatOptions::local(TimeZone::UTC).apply("UTC, SUB_SECOND");
    let e = JobEvent::new(
        EventJobId { cluster: 12345, proc: -1, subproc: -1 },
        Timestamp::new(T0, 250_000_000).unwrap(),
        EventKind::Unsuspended,
    );
    assert_eq!(
        e.to_text(&ms),
        "011 (12345.-01.-01) 2026-11-22 04:05:49.250Z Job was unsuspended.\n...\n"
    );
}

#[test]
fn submit_text() {
    assert_eq!(
        body(EventKind::Submit(Submit {
            submit_host: "<127.0.0.1:9618?addrs=127.0.0.1-9618>".into(),
            log_notes: Some("DAG Node: A".into()),
            user_notes: Some("user\nnote".into()),
            warnings: Some("no output".into()),
        })),
        "Job submitted from host: <127.0.0.1:9618?addrs=127.0.0.1-9618>\n    DAG Node: A\n    user|note\n    WARNING: Committed job submission into the queue with the following warning(s): no output\n"
    );
    assert!(text(EventKind::Submit(Submit::default())).starts_with("000 "));
}

#[test]
fn execute_and_executable_error_text() {
    assert_eq!(
        body(EventKind::Execute(Execute {
            execute_host: "<10.0.0.2:9618>".into(),
            slot_name: Some("slot1_1@host".into()),
        })),
        "Job executing on host: <10.0.0.2:9618>\n\tSlotName: slot1_1@host\n"
    );
    assert_eq!(
        body(EventKind::ExecutableError(ExecErrorType::NotExecutable)),
        "(0) Job file not executable.\n"
    );
    assert_eq!(
        body(EventKind::ExecutableError(ExecErrorType::BadLink)),
        "(1) Job not properly linked for Condor.\n"
    );
}

#[test]
fn checkpointed_text() {
    assert_eq!(
        body(EventKind::Checkpointed(Checkpointed {
            run_remote_usage: usage(90_061, 5),
            run_local_usage: usage(0, 0),
            sent_bytes: 4096,
        })),
        "Job was checkpointed.\n\tUsr 1 01:01:01, Sys 0 00:00:05  -  Run Remote Usage\n\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n\t4096  -  Run Bytes Sent By Job For Checkpoint\n"
    );
}

#[test]
fn evicted_text() {
    let e = Evicted {
        eviction: Eviction::Checkpointed,
        reason_code: 0,
        reason_subcode: 0,
        run_remote_usage: usage(3, 1),
        run_local_usage: usage(0, 0),
        sent_bytes: 10,
        received_bytes: 20,
        reason: Some("preempted by the startd".into()),
        resources: vec![],
    };
    assert_eq!(
        body(EventKind::Evicted(e.clone())),
        "Job was evicted.\n\t(1) Job was checkpointed.\n\t\tUsr 0 00:00:03, Sys 0 00:00:01  -  Run Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n\t10  -  Run Bytes Sent By Job\n\t20  -  Run Bytes Received By Job\n\tReason: preempted by the startd\n"
    );
    let requeued = Evicted {
        eviction: Eviction::TerminatedAndRequeued(Ending::Abnormal { signal: 9, core_file: None }),
        reason_code: 21,
        reason_subcode: 102,
        reason: Some("killed".into()),
        ..e
    };
    assert_eq!(
        body(EventKind::Evicted(requeued)),
        "Job was evicted. Code 21 Subcode 102\n\t(0) Job terminated and was requeued\n\t\tUsr 0 00:00:03, Sys 0 00:00:01  -  Run Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n\t10  -  Run Bytes Sent By Job\n\t20  -  Run Bytes Received By Job\n\t(0) Abnormal termination (signal 9)\n\t(0) No core file\n\tkilled\n"
    );
}

fn terminated() -> Terminated {
    Terminated {
        ending: Ending::Normal { return_value: 3 },
        run_remote_usage: usage(1, 2),
        run_local_usage: usage(0, 0),
        total_remote_usage: usage(61, 2),
        total_local_usage: usage(0, 1),
        sent_bytes: 0,
        received_bytes: 1234,
        total_sent_bytes: 5,
        total_received_bytes: 2468,
        resources: vec![
            res("Memory", 3.0, 128.0, 128.0),
            res("Cpus", 0.0, 1.0, 1.0),
            res("Disk", 10.0, 20.0, 30.0),
        ],
    }
}

#[test]
fn terminated_text() {
    assert_eq!(
        body(EventKind::Terminated(terminated())),
        "Job terminated.\n\t(1) Normal termination (return value 3)\n\t\tUsr 0 00:00:01, Sys 0 00:00:02  -  Run Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n\t\tUsr 0 00:01:01, Sys 0 00:00:02  -  Total Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:01  -  Total Local Usage\n\t0  -  Run Bytes Sent By Job\n\t1234  -  Run Bytes Received By Job\n\t5  -  Total Bytes Sent By Job\n\t2468  -  Total Bytes Received By Job\n\tPartitionable Resources :    Usage  Request Allocated \n\t   Cpus                 :        0        1         1 \n\t   Disk (KB)            :       10       20        30 \n\t   Memory (MB)          :        3      128       128 \n"
    );
    let mut t = terminated();
    t.ending = Ending::Abnormal { signal: 11, core_file: Some("/tmp/core.1".into()) };
    t.resources = vec![
        ResourceUsage {
            name: "Gpus".into(),
            usage: Some(0.5),
            request: Some(1.0),
            allocated: Some(1.0),
            assigned: Some("GPU-a1".into()),
        },
        ResourceUsage {
            name: "Cpus".into(),
            usage: None,
            request: Some(1.0),
            allocated: None,
            assigned: None,
        },
    ];
    assert_eq!(
        body(EventKind::Terminated(t)),
        "Job terminated.\n\t(0) Abnormal termination (signal 11)\n\t(1) Corefile in: /tmp/core.1\n\t\tUsr 0 00:00:01, Sys 0 00:00:02  -  Run Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n\t\tUsr 0 00:01:01, Sys 0 00:00:02  -  Total Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:01  -  Total Local Usage\n\t0  -  Run Bytes Sent By Job\n\t1234  -  Run Bytes Received By Job\n\t5  -  Total Bytes Sent By Job\n\t2468  -  Total Bytes Received By Job\n\tPartitionable Resources :    Usage  Request Allocated Assigned\n\t   Cpus                 :                 1           \n\t   Gpus (Average)       :     0.50        1         1 \"GPU-a1\"\n"
    );
}

#[test]
fn image_size_and_shadow_exception_text() {
    assert_eq!(
        body(EventKind::ImageSize(ImageSize {
            image_size_kb: 2048,
            memory_usage_mb: Some(2),
            resident_set_size_kb: Some(1900),
            proportional_set_size_kb: None,
        })),
        "Image size of job updated: 2048\n\t2  -  MemoryUsage of job (MB)\n\t1900  -  ResidentSetSize of job (KB)\n"
    );
    assert_eq!(
        body(EventKind::ShadowException(ShadowException {
            message: "lost\r\nthe starter".into(),
            sent_bytes: 1,
            received_bytes: 2,
        })),
        "Shadow exception!\n\tlost ||the starter\n\t1  -  Run Bytes Sent By Job\n\t2  -  Run Bytes Received By Job\n"
            .replace(" ||", " |")
    );
}

#[test]
fn simple_events_text() {
    assert_eq!(body(EventKind::Generic("hello".into())), "hello\n");
    assert_eq!(
        body(EventKind::Aborted(Some("via condor_rm (by user alice)".into()))),
        "Job was aborted.\n\tvia condor_rm (by user alice)\n"
    );
    assert_eq!(body(EventKind::Aborted(None)), "Job was aborted.\n");
    assert_eq!(
        body(EventKind::Suspended(1)),
        "Job was suspended.\n\tNumber of processes actually suspended: 1\n"
    );
    assert_eq!(body(EventKind::Unsuspended), "Job was unsuspended.\n");
    assert_eq!(
        body(EventKind::Held {
            reason: Some("Error from starter:\nmemory limit\n...".into()),
            code: 34,
            subcode: 0,
        }),
        "Job was held.\n\tError from starter:|memory limit|...\n\tCode 34 Subcode 0\n"
    );
    assert_eq!(
        body(EventKind::Held { reason: None, code: 1, subcode: 2 }),
        "Job was held.\n\tReason unspecified\n\tCode 1 Subcode 2\n"
    );
    assert_eq!(
        body(EventKind::Released(Some("via condor_release".into()))),
        "Job was released.\n\tvia condor_release\n"
    );
}

#[test]
fn remote_and_reconnect_text() {
    assert_eq!(
        body(EventKind::RemoteError(RemoteError {
            critical: true,
            daemon_name: "starter".into(),
            execute_host: "host1".into(),
            error: "first\nsecond".into(),
            hold_reason_code: 6,
            hold_reason_subcode: 2,
        })),
        "Error from starter on host1:\n\tfirst\n\tsecond\n\tCode 6 Subcode 2\n"
    );
    assert_eq!(
        body(EventKind::Disconnected(Disconnected {
            reason: "Socket closed".into(),
            startd_name: "slot1@host1".into(),
            startd_addr: "<10.0.0.2:9618>".into(),
        })),
        "Job disconnected, attempting to reconnect\n    Socket closed\n    Trying to reconnect to slot1@host1 <10.0.0.2:9618>\n"
    );
    assert_eq!(
        body(EventKind::Reconnected(Reconnected {
            startd_name: "slot1@host1".into(),
            startd_addr: "<10.0.0.2:9618>".into(),
            starter_addr: "<10.0.0.2:9700>".into(),
        })),
        "Job reconnected to slot1@host1\n    startd address: <10.0.0.2:9618>\n    starter address: <10.0.0.2:9700>\n"
    );
    assert_eq!(
        body(EventKind::ReconnectFailed(ReconnectFailed {
            reason: "Job lease expired".into(),
            startd_name: "slot1@host1".into(),
        })),
        "Job reconnection failed\n    Job lease expired\n    Can not reconnect to slot1@host1, rescheduling job\n"
    );
}

#[test]
fn job_ad_information_text() {
    let mut ad = ClassAd::new();
    ad.insert_value("Owner", "al\"ice\\");
    ad.insert_value("JobStatus", 2i64);
    ad.insert_value("RemoteWallClockTime", 12.5);
    ad.insert_value("CpusUsage", 3.0);
    ad.insert_value("Tiny", 1e-7);
    ad.insert_value("Huge", 1e20);
    ad.insert_value("Exited", true);
    ad.insert_value("Note", "a\nb");
    ad.insert_value("Skipped", Value::Undefined);
    ad.insert_expr("Expr", "1 + 2").unwrap();
    ad.insert_value("lower", 1i64);
    assert_eq!(
        body(EventKind::JobAdInformation(ad)),
        "Job ad information event triggered.\nCpusUsage = 3.0\nExited = true\nHuge = 1E+20\nJobStatus = 2\nNote = \"a|b\"\nOwner = \"al\\\"ice\\\"\nRemoteWallClockTime = 12.5\nTiny = 1E-07\nlower = 1\n"
    );
}

#[test]
fn old_reals() {
    assert_eq!(old_real(0.1), "0.1");
    assert_eq!(old_real(1.0 / 3.0), "0.3333333333333333");
    assert_eq!(old_real(-2.5e-5), "-2.5E-05");
    assert_eq!(old_real(123456789012345680.0), "1.234567890123457E+17");
    assert_eq!(old_real(1e15), "1000000000000000.0");
    assert_eq!(old_real(1e16), "1E+16");
    assert_eq!(old_real(f64::INFINITY), "real(\"INF\")");
    assert_eq!(old_real(-0.0), "-0.0");
}

#[test]
fn attribute_update_and_cluster_text() {
    assert_eq!(
        body(EventKind::AttributeUpdate(AttributeUpdate {
            name: "JobPrio".into(),
            value: "5".into(),
            old_value: Some("0".into()),
        })),
        "Changing job attribute JobPrio from 0 to 5\n"
    );
    assert_eq!(
        body(EventKind::AttributeUpdate(AttributeUpdate {
            name: "JobPrio".into(),
            value: "5".into(),
            old_value: None,
        })),
        "Setting job attribute JobPrio to 5\n"
    );
    assert_eq!(
        body(EventKind::ClusterSubmit(ClusterSubmit {
            submit_host: "<127.0.0.1:9618>".into(),
            log_notes: Some("notes".into()),
            user_notes: None,
        })),
        "Cluster submitted from host: <127.0.0.1:9618>\n    notes\n"
    );
    assert_eq!(
        body(EventKind::ClusterRemove(ClusterRemove {
            next_proc_id: 5,
            next_row: 5,
            completion: Completion::Complete,
            notes: Some("done".into()),
        })),
        "Cluster removed\n\tMaterialized 5 jobs from 5 items.\tComplete\n\tdone\n"
    );
    assert_eq!(
        body(EventKind::ClusterRemove(ClusterRemove {
            next_proc_id: 0,
            next_row: 0,
            completion: Completion::Error(-3),
            notes: None,
        })),
        "Cluster removed\n\tMaterialized 0 jobs from 0 items.\tError -3\n"
    );
}

#[test]
fn names_and_numbers() {
    assert_eq!(EventKind::Unsuspended.number(), 11);
    assert_eq!(EventKind::Unsuspended.name(), "ULOG_JOB_UNSUSPENDED");
    assert_eq!(EventKind::Other { number: 99, lines: vec![] }.name(), "ULOG_FUTURE_EVENT");
    assert_eq!(
        EventKind::ClusterRemove(ClusterRemove {
            next_proc_id: 0,
            next_row: 0,
            completion: Completion::Paused,
            notes: None
        })
        .name(),
        "ULOG_CLUSTER_REMOVE"
    );
}

#[test]
fn checks_refuse_what_htcondor_cannot_read() {
    assert!(ev(EventKind::Generic("...".into())).check().is_err());
    assert!(ev(EventKind::JobAdInformation(ClassAd::new())).check().is_err());
    assert!(ev(EventKind::Disconnected(Disconnected::default())).check().is_err());
    let ancient = JobEvent::new(EventJobId::new(1, 0), at(-3_000_000_000), EventKind::Unsuspended);
    assert!(ancient.check().unwrap_err().msg.contains("outside the years"));
    let mut t = terminated();
    t.resources.push(res("cpus", 1.0, 1.0, 1.0));
    let err = ev(EventKind::Terminated(t)).check().unwrap_err();
    assert_eq!(err.to_string(), "event 005: resource `cpus` appears twice");
    assert!(ev(EventKind::Terminated(terminated())).check().is_ok());
}

#[test]
fn parse_errors_say_where() {
    let opts = ParseOptions::in_zone(TimeZone::UTC);
    let err = parse_log("garbage\n", &opts).unwrap_err();
    assert_eq!(err.line, 1);
    let err = parse_log(
        "011 (042.007.000) 2026-11-22 04:05:49Z Job was unsuspended.\n...\n012 (042.007.000) 2026-11-22 04:05:49Z Job was held.\n",
        &opts,
    )
    .unwrap_err();
    assert_eq!(err.line, 3);
    assert!(err.msg.contains("no closing"), "{err}");
    let err = parse_log(
        "005 (042.007.000) 2026-11-22 04:05:49Z Job terminated.\n\t(1) Normal termination (return value x)\n...\n",
        &opts,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "line 2: event 005: expected a return value, found `x`");
    let err =
        parse_log("011 (1.0.0) 11/22 04:05:49 Job was unsuspended.\n...\n", &opts).unwrap_err();
    assert!(err.msg.contains("legacy_year"), "{err}");
    let ok = parse_log(
        "011 (1.0.0) 11/22 04:05:49 Job was unsuspended.\n...\n",
        &ParseOptions { zone: TimeZone::UTC, legacy_year: Some(2026) },
    )
    .unwrap();
    assert_eq!(ok[0].time, at(T0));
}

#[test]
fn reads_an_htcondor_written_event() {
    // As HTCondor 25 writes it (local time, here UTC), with an execute
    // property line andes does not keep.
    let log = "001 (1234.000.000) 2026-11-22 04:05:49 Job executing on host: <10.0.0.2:9618?addrs=10.0.0.2-9618>\n\tSlotName: slot1_2@node\n\tCpus = 1\n...\n";
    let evs = parse_log(log, &ParseOptions::in_zone(TimeZone::UTC)).unwrap();
    assert_eq!(
        evs,
        vec![JobEvent::new(
            EventJobId::new(1234, 0),
            at(T0),
            EventKind::Execute(Execute {
                execute_host: "<10.0.0.2:9618?addrs=10.0.0.2-9618>".into(),
                slot_name: Some("slot1_2@node".into()),
            })
        )]
    );
}

#[test]
fn appender_writes_whole_events_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.log");
    let mut log = UserLog::open(&path, FormatOptions::utc()).unwrap().with_fsync(true);
    let a = ev(EventKind::Unsuspended);
    let b = ev(EventKind::Suspended(1));
    log.append(&a).unwrap();
    log.append_all([&b, &a]).unwrap();
    let mut again = UserLog::open(&path, FormatOptions::utc()).unwrap();
    again.append(&b).unwrap();
    let back = read_log(&path, &ParseOptions::in_zone(TimeZone::UTC)).unwrap();
    assert_eq!(back, vec![a.clone(), b.clone(), a.clone(), b.clone()]);
    let err = log.append(&ev(EventKind::Generic("...".into()))).unwrap_err();
    assert!(err.to_string().contains("job.log"), "{err}");
    let err =
        UserLog::open(dir.path().join("no/such/dir/x.log"), FormatOptions::utc()).unwrap_err();
    assert!(err.to_string().contains("no/such/dir/x.log"), "{err}");
    assert!(err.to_string().contains("open failed"), "{err}");
    let err = read_log(dir.path().join("missing.log"), &ParseOptions::default()).unwrap_err();
    assert!(err.to_string().contains("missing.log"), "{err}");
    std::fs::write(&path, "011 (1.0.0) 2026-11-22 04:05:49Z Job was unsuspended.\nxx\n").unwrap();
    let err = read_log(&path, &ParseOptions::default()).unwrap_err();
    assert!(err.to_string().starts_with(&format!("{}:1:", path.display())), "{err}");
}

#[test]
fn concurrent_writers_never_interleave_inside_an_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.log");
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut log = UserLog::open(&path, FormatOptions::utc()).unwrap();
                for i in 0..200 {
                    let mut t5 = terminated();
                    t5.ending = Ending::Normal { return_value: i };
                    let e = JobEvent::new(
                        EventJobId::new(t, i),
                        at(T0 + i64::from(i)),
                        EventKind::Terminated(t5),
                    );
                    log.append(&e).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let back = read_log(&path, &ParseOptions::in_zone(TimeZone::UTC)).unwrap();
    assert_eq!(back.len(), 800);
    for t in 0..4 {
        let mine: Vec<i32> = back.iter().filter(|e| e.id.cluster == t).map(|e| e.id.proc).collect();
        assert_eq!(mine, (0..200).collect::<Vec<_>>(), "writer {t}'s events in order");
    }
    for e in back {
        let EventKind::Terminated(t5) = e.kind else { panic!("{e:?}") };
        assert_eq!(t5.ending, Ending::Normal { return_value: e.id.proc });
        let mut want = terminated().resources;
        want.sort_by_key(|r| r.name.to_ascii_lowercase());
        assert_eq!(t5.resources, want);
    }
}

// ----- property: parse(format(e)) == e -----

fn text_strategy() -> impl Strategy<Value = String> {
    // What a one-line field can carry unchanged: no newline, no
    // surrounding blanks (readers trim), not starting with `[`.
    "[A-Za-z0-9<>@:/_\\-][A-Za-z0-9 <>@:/_.\\-\"\\\\()]{0,20}[A-Za-z0-9>)\"]".prop_map(|s| s)
}

fn word() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_.<>:]{0,12}"
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(text_strategy())
}

fn cpu() -> impl Strategy<Value = CpuUsage> {
    (0u32..=i32::MAX as u32, 0u32..=i32::MAX as u32)
        .prop_map(|(user, system)| CpuUsage { user, system })
}

fn ending() -> impl Strategy<Value = Ending> {
    prop_oneof![
        any::<i32>().prop_map(|v| Ending::Normal { return_value: v }),
        (0i32..64, proptest::option::of("/[a-z/.]{1,12}"))
            .prop_map(|(signal, core_file)| { Ending::Abnormal { signal, core_file } }),
    ]
}

fn cell() -> impl Strategy<Value = Option<f64>> {
    proptest::option::of(prop_oneof![
        (0i64..1_000_000).prop_map(|v| v as f64),
        (1i64..100_000).prop_map(|v| v as f64 / 100.0),
    ])
}

fn resources() -> impl Strategy<Value = Vec<ResourceUsage>> {
    proptest::collection::btree_map(
        "[A-Z][a-z]{2,8}",
        (cell(), cell(), cell(), proptest::option::of("[A-Za-z0-9,-]{1,10}")),
        0..4,
    )
    .prop_map(|m| {
        let mut v: Vec<ResourceUsage> = m
            .into_iter()
            .map(|(name, (usage, request, allocated, assigned))| ResourceUsage {
                name,
                usage,
                request,
                allocated,
                assigned,
            })
            .collect();
        // The reader sees an empty Allocated or Assigned column as absent.
        let no_alloc = v.iter().all(|r| r.allocated.is_none());
        if no_alloc {
            v.iter_mut().for_each(|r| r.assigned = None);
        }
        // Rows without values are not written.
        v.retain(|r| {
            r.usage.is_some()
                || r.request.is_some()
                || r.allocated.is_some()
                || r.assigned.is_some()
        });
        v.sort_by_key(|r| r.name.to_ascii_lowercase());
        v
    })
}

fn ad() -> impl Strategy<Value = ClassAd> {
    proptest::collection::btree_map(
        "[A-Z][A-Za-z0-9_]{0,10}",
        prop_oneof![
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::Int),
            (-1_000_000i64..1_000_000).prop_map(|v| Value::Real(v as f64 / 1000.0)),
            "[ -~]{0,16}".prop_map(Value::from),
        ],
        1..6,
    )
    .prop_map(|m| {
        let mut ad = ClassAd::new();
        for (k, v) in m {
            if !classad::AttrName::new(&k).needs_quotes() {
                ad.insert_value(k.as_str(), v);
            }
        }
        if ad.is_empty() {
            ad.insert_value("A", 1i64);
        }
        ad
    })
}

fn kind() -> impl Strategy<Value = EventKind> {
    prop_oneof![
        (text_strategy(), opt_text(), opt_text(), opt_text()).prop_map(|(h, l, u, w)| {
            // User notes alone would read back as log notes.
            let u = if l.is_some() { u } else { None };
            EventKind::Submit(Submit { submit_host: h, log_notes: l, user_notes: u, warnings: w })
        }),
        (text_strategy(), proptest::option::of(word()))
            .prop_map(|(h, s)| { EventKind::Execute(Execute { execute_host: h, slot_name: s }) }),
        prop_oneof![Just(ExecErrorType::NotExecutable), Just(ExecErrorType::BadLink)]
            .prop_map(EventKind::ExecutableError),
        (cpu(), cpu(), any::<u32>()).prop_map(|(a, b, s)| EventKind::Checkpointed(Checkpointed {
            run_remote_usage: a,
            run_local_usage: b,
            sent_bytes: s.into()
        })),
        (
            prop_oneof![
                Just(Eviction::NotCheckpointed),
                Just(Eviction::Checkpointed),
                ending().prop_map(Eviction::TerminatedAndRequeued)
            ],
            (any::<i32>(), any::<i32>()),
            cpu(),
            cpu(),
            any::<u64>(),
            any::<u64>(),
            opt_text(),
            resources()
        )
            .prop_map(|(eviction, (c, s), a, b, sent, recv, reason, resources)| {
                EventKind::Evicted(Evicted {
                    eviction,
                    reason_code: c,
                    reason_subcode: if c == 0 { 0 } else { s },
                    run_remote_usage: a,
                    run_local_usage: b,
                    sent_bytes: sent,
                    received_bytes: recv,
                    reason: reason.filter(|r| !r.starts_with("Partitionable Resources")),
                    resources,
                })
            }),
        (ending(), cpu(), cpu(), cpu(), cpu(), any::<[u64; 4]>(), resources()).prop_map(
            |(ending, a, b, c, d, bytes, resources)| EventKind::Terminated(Terminated {
                ending,
                run_remote_usage: a,
                run_local_usage: b,
                total_remote_usage: c,
                total_local_usage: d,
                sent_bytes: bytes[0],
                received_bytes: bytes[1],
                total_sent_bytes: bytes[2],
                total_received_bytes: bytes[3],
                resources,
            })
        ),
        (
            any::<i64>(),
            proptest::option::of(0i64..1 << 40),
            proptest::option::of(0i64..1 << 40),
            proptest::option::of(0i64..1 << 40)
        )
            .prop_map(|(i, m, r, p)| EventKind::ImageSize(ImageSize {
                image_size_kb: i,
                memory_usage_mb: m,
                resident_set_size_kb: r,
                proportional_set_size_kb: p
            })),
        (text_strategy(), any::<u64>(), any::<u64>()).prop_map(|(m, s, r)| {
            EventKind::ShadowException(ShadowException {
                message: m,
                sent_bytes: s,
                received_bytes: r,
            })
        }),
        text_strategy().prop_map(EventKind::Generic),
        opt_text().prop_map(EventKind::Aborted),
        any::<i32>().prop_map(EventKind::Suspended),
        Just(EventKind::Unsuspended),
        (opt_text(), any::<i32>(), any::<i32>()).prop_map(|(reason, code, subcode)| {
            EventKind::Held { reason: reason.filter(|r| r != "Reason unspecified"), code, subcode }
        }),
        opt_text().prop_map(EventKind::Released),
        (
            any::<bool>(),
            word(),
            word(),
            proptest::collection::vec(text_strategy(), 0..3),
            0i32..50,
            any::<i32>()
        )
            .prop_map(|(critical, d, h, lines, code, sub)| {
                EventKind::RemoteError(RemoteError {
                    critical,
                    daemon_name: d,
                    execute_host: h.trim_end_matches(':').to_string() + "x",
                    error: lines
                        .into_iter()
                        .filter(|l| !l.starts_with("Code "))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    hold_reason_code: code,
                    hold_reason_subcode: if code == 0 { 0 } else { sub },
                })
            }),
        (text_strategy(), word(), text_strategy()).prop_map(|(r, n, a)| {
            EventKind::Disconnected(Disconnected { reason: r, startd_name: n, startd_addr: a })
        }),
        (text_strategy(), text_strategy(), text_strategy()).prop_map(|(n, a, s)| {
            EventKind::Reconnected(Reconnected { startd_name: n, startd_addr: a, starter_addr: s })
        }),
        (text_strategy(), word()).prop_map(|(r, n)| {
            EventKind::ReconnectFailed(ReconnectFailed { reason: r, startd_name: n })
        }),
        ad().prop_map(EventKind::JobAdInformation),
        (word(), word(), proptest::option::of(word())).prop_map(|(n, v, o)| {
            EventKind::AttributeUpdate(AttributeUpdate { name: n, value: v, old_value: o })
        }),
        (text_strategy(), opt_text(), opt_text()).prop_map(|(h, l, u)| {
            let u = if l.is_some() { u } else { None };
            EventKind::ClusterSubmit(ClusterSubmit { submit_host: h, log_notes: l, user_notes: u })
        }),
        (
            any::<i32>(),
            any::<i32>(),
            prop_oneof![
                (i32::MIN..0).prop_map(Completion::Error),
                Just(Completion::Incomplete),
                Just(Completion::Complete),
                Just(Completion::Paused)
            ],
            opt_text()
        )
            .prop_map(|(p, r, completion, notes)| EventKind::ClusterRemove(
                ClusterRemove { next_proc_id: p, next_row: r, completion, notes }
            )),
    ]
}

fn event() -> impl Strategy<Value = JobEvent> {
    (any::<i32>(), -1i32..100_000, 0i32..3, 0i64..4_102_444_800, kind()).prop_map(
        |(c, p, s, t, kind)| JobEvent {
            id: EventJobId { cluster: c, proc: p, subproc: s },
            time: at(t),
            kind,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn round_trip(events in proptest::collection::vec(event(), 1..4)) {
        for opts in [FormatOptions::utc(), FormatOptions::local(TimeZone::posix(PARIS).unwrap())] {
            let mut text = String::new();
            for e in &events {
                prop_assert!(e.check().is_ok(), "{:?}", e.check());
                text.push_str(&e.to_text(&opts));
            }
            let back = parse_log(&text, &ParseOptions::in_zone(opts.zone.clone()));
            if opts.utc {
                prop_assert_eq!(back.as_ref(), Ok(&events), "text:\n{}", text);
            } else {
                // Local time without an offset is ambiguous in the hour a
                // clock goes back (in HTCondor too): what comes back is an
                // event with the same text, and otherwise the same event.
                let back = back.map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
                prop_assert_eq!(back.len(), events.len());
                for (b, e) in back.iter().zip(&events) {
                    prop_assert_eq!(b.to_text(&opts), e.to_text(&opts));
                    prop_assert_eq!(&b.kind, &e.kind);
                    prop_assert_eq!(b.id, e.id);
                }
            }
        }
    }

    #[test]
    fn parser_never_panics(text in "([0-9]{3} \\([0-9.-]{1,8}\\) [0-9: /TZ.-]{5,24} [ -~\t]{0,30}\n([ -~\t]{0,30}\n){0,4}(\\.\\.\\.\n)?){0,3}") {
        let _ = parse_log(&text, &ParseOptions::in_zone(TimeZone::UTC));
    }

    #[test]
    fn parser_survives_damaged_logs(
        e in event(),
        edits in proptest::collection::vec((any::<proptest::sample::Index>(), any::<char>(), 0u8..3), 1..8),
    ) {
        let mut text: Vec<char> = e.to_text(&FormatOptions::utc()).chars().collect();
        for (at, c, op) in edits {
            if text.is_empty() {
                break;
            }
            let i = at.index(text.len());
            match op {
                0 => text[i] = c,
                1 => { text.remove(i); }
                _ => text.insert(i, c),
            }
        }
        let text: String = text.into_iter().collect();
        let _ = parse_log(&text, &ParseOptions::in_zone(TimeZone::UTC));
        let _ = parse_log(&text, &ParseOptions { zone: TimeZone::UTC, legacy_year: Some(2026) });
    }

    #[test]
    fn free_text_never_breaks_the_format(reason in "[ -~\n\r\t]{0,40}", note in "[ -~\n\r]{0,40}") {
        let events = vec![
            ev(EventKind::Held { reason: Some(reason.clone()), code: 3, subcode: 0 }),
            ev(EventKind::Aborted(Some(note.clone()))),
            ev(EventKind::Unsuspended),
        ];
        let mut text = String::new();
        for e in &events {
            text.push_str(&e.to_text(&FormatOptions::utc()));
        }
        let back = parse_log(&text, &ParseOptions::in_zone(TimeZone::UTC)).unwrap();
        prop_assert_eq!(back.len(), 3);
        prop_assert_eq!(back[0].kind.number(), 12);
        prop_assert_eq!(back[2].kind.clone(), EventKind::Unsuspended);
    }
}
