//! The durable job queue: submits, changes, authority, policy, history, restart.

use andes_schedd::job::{JobId, JobSelector, JobStatus};
use andes_schedd::queue::{
    Actor, Change, EventKind, Queue, QueueConfig, QueueError, QueueEvent, Submit, Targets, factor,
};
use classad::{ClassAd, Value};
use std::sync::{Arc, Mutex};

fn ad(text: &str) -> ClassAd {
    classad::parse_ad(text).unwrap()
}

fn jobs(n: usize, extra: &str) -> Submit {
    let ads = (0..n)
        .map(|i| ad(&format!(r#"[Cmd = "job.wasm"; Args = "{i}"; RequestMemory = 64; {extra}]"#)))
        .collect();
    factor(ads)
}

fn open(dir: &tempfile::TempDir) -> Queue {
    Queue::open(QueueConfig::new(dir.path().join("queue.db"), "schedd@test")).unwrap()
}

fn status(q: &Queue, id: JobId) -> Option<JobStatus> {
    q.read().job(id).map(|v| v.proc.status)
}

fn ids(list: &[&str]) -> Targets {
    Targets { ids: list.iter().map(|s| s.parse().unwrap()).collect(), ..Targets::default() }
}

#[tokio::test]
async fn submit_sets_identity_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let alice = Actor::user("alice");
    {
        let q = open(&dir);
        let s = jobs(3, r#"Owner = "mallory""#);
        // The cluster ad holds what the jobs share; each proc only its Args.
        assert_eq!(s.procs[1].len(), 1);
        let c = q.submit(&alice, s, 1000).await.unwrap();
        assert_eq!(c, 1);
        let c2 = q.submit(&alice, jobs(1, ""), 1001).await.unwrap();
        assert_eq!(c2, 2);
    }
    let q = open(&dir);
    {
        let st = q.read();
        assert_eq!(st.len(), 4);
        let v = st.job(JobId::new(1, 2)).unwrap();
        let a = v.ad();
        assert_eq!(a.eval_attr("Owner"), Value::from("alice"), "Owner comes from the identity");
        assert_eq!(a.eval_attr("ClusterId"), Value::Int(1));
        assert_eq!(a.eval_attr("ProcId"), Value::Int(2));
        assert_eq!(a.eval_attr("Args"), Value::from("2"));
        assert_eq!(a.eval_attr("JobStatus"), Value::Int(1));
        assert_eq!(a.eval_attr("QDate"), Value::Int(1000));
        assert_eq!(a.eval_attr("EnteredCurrentStatus"), Value::Int(1000));
        assert_eq!(a.eval_attr("GlobalJobId"), Value::from("schedd@test#1.2#1000"));
    }
    // Cluster ids keep counting after a restart.
    assert_eq!(q.submit(&alice, jobs(1, ""), 1002).await.unwrap(), 3);
}

#[tokio::test]
async fn concurrent_submits_share_commits_and_all_are_durable() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let mut tasks = Vec::new();
    for t in 0..8 {
        let q = q.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for i in 0..25 {
                let who = Actor::user(&format!("u{t}"));
                got.push(q.submit(&who, jobs(1, ""), 10 + i).await.unwrap());
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    assert_eq!(all, (1..=200).collect::<Vec<u32>>());
    drop(q);
    let q = open(&dir);
    assert_eq!(q.read().len(), 200);
}

#[tokio::test]
async fn hold_release_remove_and_their_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let alice = Actor::user("alice");
    q.submit(&alice, jobs(2, ""), 100).await.unwrap();
    let r = q.change(&alice, ids(&["1.0"]), Change::Hold { reason: "wait".into() }, 200).await;
    assert_eq!(r.unwrap().changed, vec![JobId::new(1, 0)]);
    let a = q.read().job(JobId::new(1, 0)).unwrap().ad();
    assert_eq!(a.eval_attr("JobStatus"), Value::Int(5));
    assert_eq!(a.eval_attr("HoldReason"), Value::from("wait"));
    assert_eq!(a.eval_attr("HoldReasonCode"), Value::Int(1));
    assert_eq!(a.eval_attr("EnteredCurrentStatus"), Value::Int(200));
    // Holding again is reported, not an error.
    let r = q.change(&alice, ids(&["1"]), Change::Hold { reason: String::new() }, 201).await;
    let r = r.unwrap();
    assert_eq!(r.changed, vec![JobId::new(1, 1)]);
    assert_eq!(r.skipped.len(), 1);
    let r = q.change(&alice, ids(&["1.0"]), Change::Release { reason: String::new() }, 300).await;
    assert_eq!(r.unwrap().changed.len(), 1);
    let a = q.read().job(JobId::new(1, 0)).unwrap().ad();
    assert_eq!(a.eval_attr("JobStatus"), Value::Int(1));
    assert_eq!(a.eval_attr("HoldReason"), Value::Undefined);
    assert_eq!(a.eval_attr("LastHoldReason"), Value::from("wait"));
    assert_eq!(a.eval_attr("ReleaseReason"), Value::from("via condor_release (by user alice)"));
    let r = q.change(&alice, ids(&["1.1"]), Change::Remove { reason: "done".into() }, 400).await;
    assert_eq!(r.unwrap().changed.len(), 1);
    assert_eq!(status(&q, JobId::new(1, 1)), None, "a removed idle job leaves the queue");
    let h = q.history(&Actor::admin("root"), None, &[], None).unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].eval_attr("JobStatus"), Value::Int(3));
    assert_eq!(h[0].eval_attr("RemoveReason"), Value::from("done"));
    // A missing job is a clear error.
    let e = q.change(&alice, ids(&["9.9"]), Change::Hold { reason: String::new() }, 1).await;
    assert!(matches!(e, Err(QueueError::NotFound(m)) if m.contains("9.9")));
}

#[tokio::test]
async fn users_act_only_on_their_own_jobs_admins_on_any() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let (alice, bob) = (Actor::user("alice"), Actor::user("bob"));
    q.submit(&alice, jobs(1, ""), 1).await.unwrap();
    q.submit(&bob, jobs(1, ""), 1).await.unwrap();
    let hold = || Change::Hold { reason: String::new() };
    let e = q.change(&bob, ids(&["1.0"]), hold(), 2).await;
    assert!(matches!(e, Err(QueueError::Forbidden(m)) if m.contains("belongs to alice")));
    let e =
        q.change(&bob, Targets { owners: vec!["alice".into()], ..Targets::default() }, hold(), 2);
    assert!(matches!(e.await, Err(QueueError::Forbidden(_))));
    // A constraint reaches only the caller's own jobs.
    let all = Targets { constraint: Some("true".into()), ..Targets::default() };
    let r = q.change(&bob, all.clone(), hold(), 2).await.unwrap();
    assert_eq!(r.changed, vec![JobId::new(2, 0)]);
    assert_eq!(status(&q, JobId::new(1, 0)), Some(JobStatus::Idle));
    let edit = Change::Edit { attr: "Foo".into(), expr: "1".into() };
    assert!(matches!(
        q.change(&bob, ids(&["1"]), edit.clone(), 2).await,
        Err(QueueError::Forbidden(_))
    ));
    let r = q.change(&Actor::admin("root"), all, hold(), 3).await.unwrap();
    assert_eq!(r.changed, vec![JobId::new(1, 0)]);
    assert_eq!(r.skipped.len(), 1, "bob's job was already held");
}

#[tokio::test]
async fn qedit_sets_attributes_and_refuses_protected_ones() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let alice = Actor::user("alice");
    q.submit(&alice, jobs(2, ""), 1).await.unwrap();
    let edit = |a: &str, e: &str| Change::Edit { attr: a.into(), expr: e.into() };
    q.change(&alice, ids(&["1.1"]), edit("RequestMemory", "RequestMemory * 2"), 2).await.unwrap();
    let a = q.read().job(JobId::new(1, 1)).unwrap().ad();
    assert_eq!(a.get("RequestMemory").unwrap().to_string(), "RequestMemory * 2");
    assert_eq!(
        q.read().job(JobId::new(1, 0)).unwrap().ad().eval_attr("RequestMemory"),
        Value::Int(64)
    );
    for p in ["ClusterId", "ProcId", "owner", "JobStatus", "QDate", "GlobalJobId"] {
        let e = q.change(&alice, ids(&["1"]), edit(p, "1"), 2).await;
        assert!(matches!(e, Err(QueueError::Forbidden(m)) if m.contains("protected")), "{p}");
        let e = q.change(&Actor::admin("root"), ids(&["1"]), edit(p, "1"), 2).await;
        assert!(matches!(e, Err(QueueError::Forbidden(_))), "{p} protected from admins too");
    }
    let e = q.change(&alice, ids(&["1"]), edit("Foo", "1 +"), 2).await;
    assert!(matches!(e, Err(QueueError::Invalid(m)) if m.contains("Foo")));
    // Edits survive a restart.
    drop(q);
    let q = open(&dir);
    let a = q.read().job(JobId::new(1, 1)).unwrap().ad();
    assert_eq!(a.get("RequestMemory").unwrap().to_string(), "RequestMemory * 2");
}

#[tokio::test]
async fn exit_policy_completes_holds_or_requeues() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let alice = Actor::user("alice");
    // max_retries = 2, as condor_submit (and andes submit) expands it.
    let retry = r#"JobMaxRetries = 2; OnExitHold = false; OnExitRemove = NumJobCompletions > JobMaxRetries || ExitCode =?= 0"#;
    q.submit(&alice, jobs(1, retry), 1).await.unwrap();
    let id = JobId::new(1, 0);
    let exit = |code: i64| {
        ad(&format!("[ExitCode = {code}; ExitBySignal = false; RemoteWallClockTime = 5.0]"))
    };
    for n in 1..=2 {
        q.job_started(id, 10 * n).await.unwrap();
        assert_eq!(status(&q, id), Some(JobStatus::Running));
        q.job_exited(id, exit(1), 10 * n + 5).await.unwrap();
        assert_eq!(status(&q, id), Some(JobStatus::Idle), "retry {n}");
    }
    q.job_started(id, 30).await.unwrap();
    q.job_exited(id, exit(1), 35).await.unwrap();
    assert_eq!(status(&q, id), None, "third failure: no retries left");
    let h = q.history(&Actor::admin("root"), Some("ClusterId == 1"), &[], None).unwrap();
    assert_eq!(h[0].eval_attr("JobStatus"), Value::Int(4));
    assert_eq!(h[0].eval_attr("NumJobStarts"), Value::Int(3));
    assert_eq!(h[0].eval_attr("NumJobCompletions"), Value::Int(3));
    assert_eq!(h[0].eval_attr("CompletionDate"), Value::Int(35));
    assert_eq!(h[0].eval_attr("ExitCode"), Value::Int(1));
    // Every run's wall-clock time counts, as HTCondor's RemoteWallClockTime
    // does; CumulativeSlotTime weighs it by the CPUs held (one here).
    assert_eq!(h[0].eval_attr("RemoteWallClockTime"), Value::Real(15.0));
    assert_eq!(h[0].eval_attr("CumulativeSlotTime"), Value::Real(15.0));

    q.submit(&alice, jobs(1, r#"OnExitHold = ExitCode == 3; OnExitHoldReason = "three""#), 40)
        .await
        .unwrap();
    let id = JobId::new(2, 0);
    q.job_started(id, 41).await.unwrap();
    q.job_exited(id, exit(3), 42).await.unwrap();
    let a = q.read().job(id).unwrap().ad();
    assert_eq!(a.eval_attr("JobStatus"), Value::Int(5));
    assert_eq!(a.eval_attr("HoldReason"), Value::from("three"));
    assert_eq!(a.eval_attr("HoldReasonCode"), Value::Int(3));

    // A hold from the execute host (a memory limit, say) keeps its code.
    q.change(&alice, ids(&["2.0"]), Change::Release { reason: String::new() }, 43).await.unwrap();
    q.job_started(id, 44).await.unwrap();
    q.job_exited(
        id,
        ad(r#"[HoldReasonCode = 34; HoldReason = "memory"; HoldReasonSubCode = 0]"#),
        45,
    )
    .await
    .unwrap();
    let a = q.read().job(id).unwrap().ad();
    assert_eq!(a.eval_attr("HoldReasonCode"), Value::Int(34));
    assert_eq!(a.eval_attr("NumHolds"), Value::Int(2));
    assert!(q.job_exited(id, exit(0), 46).await.is_err(), "a held job cannot exit");
}

#[tokio::test]
async fn periodic_policy_runs_on_a_virtual_clock() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let alice = Actor::user("alice");
    let p = r#"PeriodicHold = JobStatus == 1 && (CurrentTime - EnteredCurrentStatus) > 3600;
        PeriodicHoldReason = "idle too long"; PeriodicHoldSubCode = 42;
        PeriodicRelease = (CurrentTime - EnteredCurrentStatus) > 60 && NumHolds < 2;
        PeriodicRemove = NumHolds >= 2"#;
    q.submit(&alice, jobs(2, p), 0).await.unwrap();
    q.submit(&alice, jobs(1, ""), 0).await.unwrap();
    assert!(q.periodic(3600).await.unwrap().changed.is_empty());
    let r = q.periodic(3601).await.unwrap();
    assert_eq!(r.changed, vec![JobId::new(1, 0), JobId::new(1, 1)]);
    let a = q.read().job(JobId::new(1, 0)).unwrap().ad();
    assert_eq!(a.eval_attr("HoldReason"), Value::from("idle too long"));
    assert_eq!(a.eval_attr("HoldReasonSubCode"), Value::Int(42));
    assert!(q.periodic(3661).await.unwrap().changed.is_empty());
    assert_eq!(q.periodic(3662).await.unwrap().changed.len(), 2, "released");
    assert_eq!(status(&q, JobId::new(1, 0)), Some(JobStatus::Idle));
    q.periodic(3662 + 3601).await.unwrap();
    assert_eq!(status(&q, JobId::new(1, 0)), Some(JobStatus::Held));
    // NumHolds is now 2: the next pass removes instead of releasing.
    q.periodic(3662 + 3601 + 61).await.unwrap();
    assert_eq!(status(&q, JobId::new(1, 0)), None);
    assert_eq!(status(&q, JobId::new(2, 0)), Some(JobStatus::Idle), "no policy, untouched");
}

#[tokio::test]
async fn history_retention_and_queries() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = QueueConfig::new(dir.path().join("q.db"), "s");
    cfg.history_max_jobs = 3;
    let q = Queue::open(cfg).unwrap();
    let alice = Actor::user("alice");
    q.submit(&alice, jobs(5, ""), 0).await.unwrap();
    for p in 0..5 {
        let t = Targets { ids: vec![JobSelector::Job(JobId::new(1, p))], ..Targets::default() };
        q.change(&alice, t, Change::Remove { reason: String::new() }, 10 + p as i64).await.unwrap();
    }
    let h = q.history(&Actor::admin("root"), None, &[], None).unwrap();
    let procs: Vec<Value> = h.iter().map(|a| a.eval_attr("ProcId")).collect();
    assert_eq!(procs, vec![Value::Int(4), Value::Int(3), Value::Int(2)], "newest first, 3 kept");
    assert_eq!(q.history(&Actor::admin("root"), None, &[], Some(1)).unwrap().len(), 1);
    assert_eq!(q.history(&Actor::admin("root"), Some("ProcId == 3"), &[], None).unwrap().len(), 1);
    assert!(q.history(&Actor::admin("root"), None, &["bob".into()], None).unwrap().is_empty());
    assert!(matches!(
        q.history(&Actor::admin("root"), Some("ProcId =="), &[], None),
        Err(QueueError::Invalid(_))
    ));
}

#[tokio::test]
async fn summary_groups_by_owner_and_batch() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    q.submit(&Actor::user("alice"), jobs(3, r#"JobBatchName = "sweep""#), 5).await.unwrap();
    q.submit(&Actor::user("alice"), jobs(2, r#"JobBatchName = "sweep""#), 6).await.unwrap();
    q.submit(&Actor::user("bob"), jobs(1, ""), 7).await.unwrap();
    q.change(&Actor::user("alice"), ids(&["2.1"]), Change::Hold { reason: String::new() }, 8)
        .await
        .unwrap();
    let rows = q.read().summary(&[]);
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].owner.as_str(), rows[0].batch.as_str()), ("alice", "sweep"));
    assert_eq!((rows[0].idle, rows[0].held, rows[0].submitted), (4, 1, 6));
    assert_eq!(rows[0].ids, vec![(1, 0, 2), (2, 0, 1)]);
    assert_eq!((rows[1].owner.as_str(), rows[1].batch.as_str()), ("bob", "ID: 3"));
    assert_eq!(q.read().summary(&["bob".into()]).len(), 1);
}

#[tokio::test]
async fn events_follow_commits() {
    let dir = tempfile::tempdir().unwrap();
    let seen: Arc<Mutex<Vec<(JobId, String)>>> = Arc::default();
    let s2 = seen.clone();
    let mut cfg = QueueConfig::new(dir.path().join("q.db"), "s");
    cfg.sink = Some(Box::new(move |evs: &[QueueEvent]| {
        let mut s = s2.lock().unwrap();
        for e in evs {
            let k = match &e.kind {
                EventKind::Submitted => "submit",
                EventKind::Held(_) => "held",
                EventKind::Released(_) => "released",
                EventKind::Removed(_) => "removed",
                _ => "other",
            };
            s.push((e.id, k.to_string()));
        }
    }));
    let q = Queue::open(cfg).unwrap();
    let alice = Actor::user("alice");
    q.submit(&alice, jobs(1, "JobStatus = 5"), 0).await.unwrap();
    let a = q.read().job(JobId::new(1, 0)).unwrap().ad();
    assert_eq!(a.eval_attr("HoldReasonCode"), Value::Int(15), "submitted on hold");
    q.change(&alice, ids(&["1"]), Change::Release { reason: String::new() }, 1).await.unwrap();
    q.change(&alice, ids(&["1"]), Change::Remove { reason: String::new() }, 2).await.unwrap();
    let id = JobId::new(1, 0);
    let got = seen.lock().unwrap().clone();
    let want: Vec<(JobId, String)> =
        ["submit", "held", "released", "removed"].iter().map(|k| (id, k.to_string())).collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn modules_are_content_addressed() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let m = b"\0asm\x01\0\0\0".to_vec();
    let d = andes_schedd::queue::module_digest(&m);
    assert!(!q.has_module(&d).unwrap());
    q.store_module(&Actor::user("alice"), &d, m.clone(), 1).await.unwrap();
    q.store_module(&Actor::user("alice"), &d, m.clone(), 1).await.unwrap();
    assert!(q.has_module(&d).unwrap());
    assert_eq!(q.module(&d).unwrap(), Some(m));
    let bad = q.store_module(&Actor::user("alice"), &d, b"\0asm\x01\0\0\0\0".to_vec(), 1).await;
    assert!(matches!(bad, Err(QueueError::Invalid(m)) if m.contains("mismatch")));
    let not_wasm = b"#!/bin/sh".to_vec();
    let d2 = andes_schedd::queue::module_digest(&not_wasm);
    assert!(matches!(
        q.store_module(&Actor::user("alice"), &d2, not_wasm, 1).await,
        Err(QueueError::Invalid(_))
    ));
}

#[tokio::test]
async fn reserved_clusters_belong_to_their_reserver() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let (alice, bob) = (Actor::user("alice"), Actor::user("bob"));
    let c = q.reserve_cluster(&alice, 1).await.unwrap();
    let mut s = jobs(1, "");
    s.cluster = Some(c);
    let e = q.submit(&bob, s.clone(), 1).await;
    assert!(matches!(e, Err(QueueError::Forbidden(_))), "{e:?}");
    assert_eq!(q.submit(&alice, s.clone(), 1).await.unwrap(), c);
    // The same submit again (its answer lost): the first answer, no duplicate.
    assert_eq!(q.submit(&alice, s.clone(), 1).await.unwrap(), c);
    assert_eq!(q.read().cluster_jobs(c).count(), 1);
    // Other content under the same id, or another user: refused.
    let mut other = jobs(2, "");
    other.cluster = Some(c);
    let e = q.submit(&alice, other, 1).await;
    assert!(matches!(e, Err(QueueError::Invalid(m)) if m.contains("not reserved")), "used once");
    assert!(q.submit(&bob, s.clone(), 1).await.is_err());
    // A reservation does not survive a restart (it is refused clearly), and no
    // id handed out is handed out again.
    let c2 = q.reserve_cluster(&alice, 1).await.unwrap();
    drop(q);
    let q = open(&dir);
    let mut s2 = jobs(1, "");
    s2.cluster = Some(c2);
    let e = q.submit(&alice, s2, 2).await;
    assert!(matches!(&e, Err(QueueError::Invalid(m)) if m.contains("not reserved")), "{e:?}");
    let c3 = q.submit(&alice, jobs(1, ""), 2).await.unwrap();
    assert!(c3 > c2, "a reserved id is not handed out again after a restart");
    assert!(q.reserve_cluster(&alice, 2).await.unwrap() > c3);
    // The acknowledged submit is still recognised after the restart.
    assert_eq!(q.submit(&alice, s, 3).await.unwrap(), c);
}

#[tokio::test]
async fn a_cron_step_past_its_range_neither_stops_the_writer_nor_fails() {
    // A step of 2^32 - 1 once overflowed the cron parser inside the queue's
    // writer, and every later write failed with it. It is one value now (a
    // writer that panics on one op fails that op alone: see the unit test
    // `a_panicking_request_fails_alone_and_the_writer_goes_on`).
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let alice = Actor::user("alice");
    let r = q.submit(&alice, jobs(1, r#"CronMinute = "1-59/4294967295""#), 1).await;
    assert!(r.is_ok(), "{r:?}");
    let ok = q.submit(&alice, jobs(2, ""), 2).await.unwrap();
    assert_eq!(q.read().cluster_jobs(ok).count(), 2);
}

#[tokio::test]
async fn an_activation_is_recorded_before_it_is_sent_and_cleared_if_it_never_happened() {
    use andes_schedd::queue::{ACTIVATION_PENDING, PoolOp};
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let alice = Actor::user("alice");
    let c = q.submit(&alice, jobs(2, ""), 1).await.unwrap();
    let (a, b) = (JobId::new(c, 0), JobId::new(c, 1));
    let claim = |id: &str| {
        ad(&format!(r#"[ClaimId = "{id}"; StartdAddr = "h:1"; RemoteHost = "slot1@h"]"#))
    };
    q.pool(vec![a, b], PoolOp::Activating(claim("c1")), 2).await.unwrap();
    let pending = |id| q.read().job(id).unwrap().ad().contains(ACTIVATION_PENDING);
    assert!(pending(a) && pending(b));
    assert_eq!(status(&q, a), Some(JobStatus::Idle), "pending jobs stay idle");
    // It survives a restart: the schedd asks the host after it.
    drop(q);
    let q = open(&dir);
    assert!(q.read().job(a).unwrap().ad().contains(ACTIVATION_PENDING));
    // Another claim's word changes nothing; this claim's clears it.
    q.pool(vec![a], PoolOp::NotStarted("c2".into()), 3).await.unwrap();
    assert!(q.read().job(a).unwrap().ad().contains(ACTIVATION_PENDING));
    q.pool(vec![a], PoolOp::NotStarted("c1".into()), 3).await.unwrap();
    let ad_a = q.read().job(a).unwrap().ad();
    assert!(!ad_a.contains(ACTIVATION_PENDING) && !ad_a.contains("ClaimId"), "{ad_a}");
    // Started: no longer pending, running.
    q.pool(vec![b], PoolOp::Started(ClassAd::new()), 4).await.unwrap();
    assert_eq!(status(&q, b), Some(JobStatus::Running));
    assert!(!q.read().job(b).unwrap().ad().contains(ACTIVATION_PENDING));
    // A pending job held, then released, is matched afresh.
    q.pool(vec![a], PoolOp::Activating(claim("c3")), 5).await.unwrap();
    q.change(&alice, ids(&[&a.to_string()]), Change::Hold { reason: "x".into() }, 5).await.unwrap();
    q.change(&alice, ids(&[&a.to_string()]), Change::Release { reason: "y".into() }, 6)
        .await
        .unwrap();
    assert!(!q.read().job(a).unwrap().ad().contains(ACTIVATION_PENDING));
}

#[tokio::test]
async fn uploads_are_bounded_per_user_and_unused_ones_collected() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = QueueConfig::new(dir.path().join("queue.db"), "schedd@test");
    cfg.upload_quota_bytes = 100;
    cfg.upload_quota_count = 3;
    cfg.upload_grace = 60;
    let q = Queue::open(cfg).unwrap();
    let (alice, bob) = (Actor::user("alice"), Actor::user("bob"));
    let blob = |n: u8, len: usize| vec![n; len];
    let digest = |b: &[u8]| andes_schedd::queue::module_digest(b);
    let (a1, a2, a3) = (blob(1, 40), blob(2, 40), blob(3, 40));
    q.store_upload(&alice, &digest(&a1), a1.clone(), 0).await.unwrap();
    q.store_upload(&alice, &digest(&a2), a2.clone(), 0).await.unwrap();
    // A third of 40 bytes would pass alice's 100: refused, and only hers.
    let e = q.store_upload(&alice, &digest(&a3), a3.clone(), 0).await;
    assert!(matches!(&e, Err(QueueError::Forbidden(m)) if m.contains("quota")), "{e:?}");
    q.store_upload(&bob, &digest(&a3), a3.clone(), 0).await.unwrap();
    // Storing what is already stored costs nothing.
    q.store_upload(&alice, &digest(&a1), a1.clone(), 0).await.unwrap();
    // A job refers to a1 (as a spooled input); a2 and a3 are unused.
    let job = format!(r#"SpooledInput = "in.txt={}""#, digest(&a1));
    q.submit(&alice, jobs(1, &job), 10).await.unwrap();
    // Within the grace, nothing goes; after it, the unused ones do.
    assert_eq!(q.collect_uploads(30).await.unwrap(), 0);
    assert_eq!(q.collect_uploads(100).await.unwrap(), 2);
    assert!(q.has_module(&digest(&a1)).unwrap());
    assert!(!q.has_module(&digest(&a2)).unwrap() && !q.has_module(&digest(&a3)).unwrap());
    // Alice's quota has room again.
    q.store_upload(&alice, &digest(&a3), a3, 100).await.unwrap();
}

#[tokio::test]
async fn events_committed_but_not_yet_logged_are_written_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    // The schedd dies between the commit and the event log's write: here
    // its log writer fails before writing anything, as a crash would.
    let mut cfg = QueueConfig::new(&path, "schedd@test");
    cfg.sink = Some(Box::new(|_: &[QueueEvent]| panic!("the schedd died before writing the log")));
    let q = Queue::open(cfg).unwrap();
    let logged = jobs(1, r#"UserLog = "/tmp/job.log""#);
    let _ = q.submit(&Actor::user("alice"), logged, 1).await;
    drop(q);
    // At the next start the event reaches the log writer.
    let seen: Arc<Mutex<Vec<QueueEvent>>> = Arc::default();
    let opened = |seen: Arc<Mutex<Vec<QueueEvent>>>| {
        let mut cfg = QueueConfig::new(&path, "schedd@test");
        cfg.sink =
            Some(Box::new(move |e: &[QueueEvent]| seen.lock().unwrap().extend_from_slice(e)));
        Queue::open(cfg).unwrap()
    };
    let q = opened(seen.clone());
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].kind, EventKind::Submitted);
        assert_eq!(seen[0].ad.eval_attr("UserLog"), Value::from("/tmp/job.log"));
    }
    // Written once: a later start has nothing more to write.
    drop(q);
    let again: Arc<Mutex<Vec<QueueEvent>>> = Arc::default();
    let _q = opened(again.clone());
    assert!(again.lock().unwrap().is_empty());
}

/// What a job wrote to its log comes with its end (`PoolOp::Logged`, sent
/// before the end in one commit): one generic event (a note) per line, in
/// order, before its termination; bounded however many a host sends; and
/// nothing for a job no longer running.
#[tokio::test]
async fn a_jobs_log_lines_are_events_before_its_end_and_bounded() {
    use andes_protocol::pool::MAX_REPORTED_LOG_LINES;
    use andes_schedd::queue::{JobOp, PoolOp};
    let dir = tempfile::tempdir().unwrap();
    let seen: Arc<Mutex<Vec<QueueEvent>>> = Arc::default();
    let mut cfg = QueueConfig::new(dir.path().join("queue.db"), "schedd@test");
    let sink = seen.clone();
    cfg.sink = Some(Box::new(move |e: &[QueueEvent]| sink.lock().unwrap().extend_from_slice(e)));
    let q = Queue::open(cfg).unwrap();
    let c =
        q.submit(&Actor::user("alice"), jobs(1, r#"UserLog = "/tmp/job.log""#), 1).await.unwrap();
    let id = JobId::new(c, 0);
    q.job_started(id, 5).await.unwrap();
    // A host that sends far more than its budget, one line with a newline in it.
    let mut lines: Vec<String> = (0..1000).map(|i| format!("job log [Info]: line {i}")).collect();
    lines[0] = "job log [Warn]: two\nlines".into();
    let ops = vec![
        JobOp::Pool(id, PoolOp::Logged(lines)),
        JobOp::Exited(id, ad("[ExitCode = 0; ExitBySignal = false]")),
    ];
    for r in q.in_order(ops, 10).await.unwrap() {
        r.unwrap();
    }
    let seen: Vec<QueueEvent> = seen.lock().unwrap().clone();
    let kinds: Vec<&EventKind> = seen.iter().map(|e| &e.kind).collect();
    let notes: Vec<&str> = kinds
        .iter()
        .filter_map(|k| match k {
            EventKind::Note(n) => Some(n.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), MAX_REPORTED_LOG_LINES, "{kinds:?}");
    assert_eq!(notes[0], "job log [Warn]: two lines");
    assert_eq!(notes[1], "job log [Info]: line 1");
    assert!(notes.last().unwrap().contains("901 more lines"), "{notes:?}");
    let at = |want: &dyn Fn(&EventKind) -> bool| kinds.iter().position(|k| want(k)).unwrap();
    assert!(at(&|k| matches!(k, EventKind::Note(_))) > at(&|k| *k == EventKind::Executing));
    let last_note = kinds.iter().rposition(|k| matches!(k, EventKind::Note(_))).unwrap();
    assert!(last_note < at(&|k| *k == EventKind::Terminated), "{kinds:?}");
    // The job is over: lines for it now are not its run's.
    q.pool(vec![id], PoolOp::Logged(vec!["late".into()]), 20).await.unwrap();
}

#[tokio::test]
async fn a_suspended_job_is_status_7_and_its_suspensions_are_counted_and_timed() {
    use andes_schedd::queue::PoolOp;
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let c = q.submit(&Actor::user("alice"), jobs(1, ""), 1).await.unwrap();
    let id = JobId::new(c, 0);
    q.job_started(id, 5).await.unwrap();
    q.pool(vec![id], PoolOp::Suspension(true), 10).await.unwrap();
    assert_eq!(status(&q, id), Some(JobStatus::Suspended));
    let a = q.read().job(id).unwrap().ad();
    assert_eq!(a.eval_attr("JobStatus"), Value::Int(7));
    assert_eq!(a.eval_attr("TotalSuspensions"), Value::Int(1));
    assert_eq!(a.eval_attr("LastSuspensionTime"), Value::Int(10));
    // A second report of the same suspension changes nothing.
    q.pool(vec![id], PoolOp::Suspension(true), 12).await.unwrap();
    q.pool(vec![id], PoolOp::Suspension(false), 25).await.unwrap();
    let a = q.read().job(id).unwrap().ad();
    assert_eq!(a.eval_attr("JobStatus"), Value::Int(2));
    assert_eq!(a.eval_attr("CumulativeSuspensionTime"), Value::Int(15));
    assert_eq!(a.eval_attr("TotalSuspensions"), Value::Int(1));
    // Ended while suspended: that time counts too.
    q.pool(vec![id], PoolOp::Suspension(true), 30).await.unwrap();
    q.job_exited(id, ad("[ExitCode = 0; ExitBySignal = false]"), 40).await.unwrap();
    let h =
        q.history(&Actor::admin("root"), Some(&format!("ClusterId == {c}")), &[], None).unwrap();
    assert_eq!(h[0].eval_attr("CumulativeSuspensionTime"), Value::Int(25));
    assert_eq!(h[0].eval_attr("TotalSuspensions"), Value::Int(2));
}

/// A job vacated while suspended (its host shut down, or preempted it) is
/// evicted as a running one is: idle again, with the eviction in its log,
/// its claim forgotten and its suspension's time counted. (It stayed status
/// 7 with no claim, never to run again until the schedd restarted.)
#[tokio::test]
async fn a_job_evicted_while_suspended_is_idle_again_with_its_eviction_logged() {
    use andes_schedd::queue::PoolOp;
    let dir = tempfile::tempdir().unwrap();
    let seen: Arc<Mutex<Vec<EventKind>>> = Arc::default();
    let s2 = seen.clone();
    let mut cfg = QueueConfig::new(dir.path().join("q.db"), "s");
    cfg.sink = Some(Box::new(move |evs: &[QueueEvent]| {
        s2.lock().unwrap().extend(evs.iter().map(|e| e.kind.clone()));
    }));
    let q = Queue::open(cfg).unwrap();
    let c = q.submit(&Actor::user("alice"), jobs(1, ""), 1).await.unwrap();
    let id = JobId::new(c, 0);
    q.job_started(id, 5).await.unwrap();
    q.pool(vec![id], PoolOp::Suspension(true), 10).await.unwrap();
    assert_eq!(status(&q, id), Some(JobStatus::Suspended));
    q.pool(vec![id], PoolOp::Evicted(ClassAd::new()), 16).await.unwrap();
    assert_eq!(status(&q, id), Some(JobStatus::Idle));
    let a = q.read().job(id).unwrap().ad();
    assert_eq!(a.eval_attr("JobStatus"), Value::Int(1));
    assert_eq!(a.eval_attr("CumulativeSuspensionTime"), Value::Int(6));
    assert_eq!(a.eval_attr("LastVacateTime"), Value::Int(16));
    let seen = seen.lock().unwrap();
    assert!(matches!(seen.last(), Some(EventKind::Evicted { checkpointed: false })), "{seen:?}");
}

/// What one user stored stays theirs: a job may name only uploads its own
/// owner made; the same bytes uploaded by another user are that user's
/// own upload, counted against their own quota; nothing tells one user
/// whether another stored a file.
#[tokio::test]
async fn a_job_names_only_its_owners_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = QueueConfig::new(dir.path().join("queue.db"), "schedd@test");
    cfg.upload_quota_bytes = 100;
    cfg.upload_grace = 60;
    let q = Queue::open(cfg).unwrap();
    let (root, bob) = (Actor::user("root"), Actor::user("bob"));
    let secret = b"the secret number is 7".to_vec();
    let d = andes_schedd::queue::module_digest(&secret);
    q.store_upload(&root, &d, secret.clone(), 0).await.unwrap();
    assert!(q.uploaded_by("root", &d).unwrap());
    assert!(!q.uploaded_by("bob", &d).unwrap(), "root's upload is not bob's");

    // Bob names root's digest as a spooled input: refused, in so many words.
    let spooled = format!(r#"SpooledInput = "stolen={d}""#);
    let e = q.submit(&bob, jobs(1, &spooled), 1).await;
    assert!(
        matches!(&e, Err(QueueError::NotUploaded(m)) if m.contains("not among bob's uploads")),
        "{e:?}"
    );
    // ... and in a proc's own ad, and as the module.
    let mut s = jobs(2, "");
    s.procs[1].insert_expr("SpooledInput", &format!("\"x={d}\"")).unwrap();
    assert!(q.submit(&bob, s, 1).await.is_err());
    assert!(q.submit(&bob, jobs(1, &format!(r#"CmdDigest = "{d}""#)), 1).await.is_err());
    // An expression in place of the digest names nothing the schedd checked.
    let e = q.submit(&bob, jobs(1, r#"CmdDigest = strcat("sha256:", "00")"#), 1).await;
    assert!(matches!(&e, Err(QueueError::Invalid(m)) if m.contains("expected a string")), "{e:?}");
    // Nor can bob edit it in afterwards.
    let c = q.submit(&bob, jobs(1, ""), 1).await.unwrap();
    let edit = Change::Edit { attr: "SpooledInput".into(), expr: format!("\"x={d}\"") };
    let e = q.change(&bob, ids(&[&format!("{c}.0")]), edit, 2).await;
    assert!(matches!(e, Err(QueueError::Forbidden(_))), "{e:?}");

    // Bob uploads the same bytes himself: his own upload, his own quota.
    q.store_upload(&bob, &d, secret.clone(), 3).await.unwrap();
    assert!(q.uploaded_by("bob", &d).unwrap());
    q.submit(&bob, jobs(1, &spooled), 4).await.unwrap();
    // Root's job keeps root's upload when bob's goes, and the reverse.
    q.submit(&root, jobs(1, &spooled), 4).await.unwrap();
    assert_eq!(q.collect_uploads(1000).await.unwrap(), 0, "both still used");
    // An admin may name any stored upload.
    q.submit(&Actor::admin("admin"), jobs(1, &spooled), 5).await.unwrap();
}

/// Everything the schedd writes comes from the schedd: a submitted ad
/// keeps none of it (its claim, route, counters, its `User`), qedit changes
/// none of it, and `User` is Owner@UID_DOMAIN.
#[tokio::test]
async fn what_the_schedd_sets_cannot_be_submitted_or_edited() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let bob = Actor::user("bob");
    let forged = r#"User = "root@vm"; Owner = "root"; ClaimId = "<1.2.3.4:5>#1#1";
        StartdAddr = "127.0.0.1:1"; RemoteHost = "slot1@x"; RoutedToJobId = "1.0";
        RoutedFromJobId = "1.0"; ActivationPending = true; NumJobStarts = 99;
        HoldReasonCode = 1; GridResource = "slurm x"; JobUniverse = 5"#;
    let c = q.submit(&bob, jobs(2, forged), 10).await.unwrap();
    let a = q.read().job(JobId::new(c, 1)).unwrap().ad();
    for gone in [
        "ClaimId",
        "StartdAddr",
        "RemoteHost",
        "RoutedToJobId",
        "RoutedFromJobId",
        "ActivationPending",
        "HoldReasonCode",
        "GridResource",
    ] {
        assert!(!a.contains(gone), "{gone} survived the submit: {a}");
    }
    assert_eq!(a.eval_attr("Owner"), Value::from("bob"));
    // UID_DOMAIN defaults to the host part of the schedd's name.
    assert_eq!(a.eval_attr("User"), Value::from("bob@test"));
    assert_eq!(a.eval_attr("NumJobStarts"), Value::Int(0));
    assert_eq!(a.eval_attr("JobUniverse"), Value::Int(5), "a user's own attributes stay");
    for attr in ["ClaimId", "StartdAddr", "RemoteHost", "RoutedToJobId", "User", "CmdDigest"] {
        let edit = Change::Edit { attr: attr.into(), expr: "\"x\"".into() };
        let e = q.change(&bob, ids(&[&format!("{c}.0")]), edit, 11).await;
        assert!(matches!(e, Err(QueueError::Forbidden(_))), "{attr}: {e:?}");
    }
}

/// A query shows another user's job without its content digests, and a
/// constraint cannot see them either.
#[tokio::test]
async fn digests_are_shown_to_their_owner_alone() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let root = Actor::user("root");
    let module = b"\0asm\x01\0\0\0".to_vec();
    let d = andes_schedd::queue::module_digest(&module);
    q.store_module(&root, &d, module, 0).await.unwrap();
    q.submit(&root, jobs(1, &format!(r#"CmdDigest = "{d}""#)), 1).await.unwrap();
    let probe = classad::parse_expr(&format!(r#"CmdDigest == "{d}""#)).unwrap();
    let all = |_: &andes_schedd::queue::JobView<'_>| true;
    let seen = q.query(&Actor::user("bob"), all, None, None, 2).unwrap();
    assert_eq!(seen.len(), 1);
    assert!(!seen[0].1.contains("CmdDigest"), "{}", seen[0].1);
    assert!(q.query(&Actor::user("bob"), all, Some(&probe), None, 2).unwrap().is_empty());
    let mine = q.query(&root, all, Some(&probe), None, 2).unwrap();
    assert_eq!(mine.len(), 1);
    assert!(mine[0].1.contains("CmdDigest"));
}

/// Everything an owner keeps in the spool counts against one quota:
/// uploads, and a spooled job's outputs and checkpoints; a job that leaves
/// frees its uploads at once, not after the upload grace.
#[tokio::test]
async fn one_quota_covers_every_byte_an_owner_keeps_in_the_spool() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = QueueConfig::new(dir.path().join("queue.db"), "schedd@test");
    cfg.upload_quota_bytes = 1000;
    cfg.upload_grace = 3600;
    let q = Queue::open(cfg).unwrap();
    let bob = Actor::user("bob");
    let blob = vec![7u8; 400];
    let d = andes_schedd::queue::module_digest(&blob);
    q.store_upload(&bob, &d, blob, 0).await.unwrap();
    assert_eq!(q.upload_room("bob").min(10_000), 600);
    // A spooled job's outputs: 500 bytes fit, 200 more do not.
    q.charge_spool("bob", 500).unwrap();
    let e = q.charge_spool("bob", 200);
    assert!(
        matches!(&e, Err(QueueError::Forbidden(m)) if m.contains("SPOOL_QUOTA_PER_OWNER")),
        "{e:?}"
    );
    // Another owner is not touched.
    q.charge_spool("alice", 900).unwrap();
    // Uploads count what outputs and checkpoints keep too.
    let more = vec![8u8; 200];
    let e = q.store_upload(&bob, &andes_schedd::queue::module_digest(&more), more, 1).await;
    assert!(matches!(&e, Err(QueueError::Forbidden(m)) if m.contains("quota")), "{e:?}");

    // A job names the upload; when it leaves, its room is free at once.
    let c = q.submit(&bob, jobs(1, &format!(r#"SpooledInput = "in={d}""#)), 2).await.unwrap();
    q.change(&bob, ids(&[&format!("{c}.0")]), Change::Remove { reason: "done".into() }, 3)
        .await
        .unwrap();
    assert!(q.read().job(JobId::new(c, 0)).is_none());
    // Kept for a next submit until the room is wanted: an upload that
    // needs it takes it.
    assert!(q.uploaded_by("bob", &d).unwrap());
    let big = vec![9u8; 700];
    q.store_upload(&bob, &andes_schedd::queue::module_digest(&big), big, 4).await.unwrap();
    assert!(!q.uploaded_by("bob", &d).unwrap(), "reclaimed for the room");
    assert!(!q.has_module(&d).unwrap());
}

/// An upload whose last job left stays its owner's for the upload grace:
/// the same module submitted again is not sent again. It holds no room: a
/// spooled output that needs the room reclaims it, and the grace's end
/// removes it.
#[tokio::test]
async fn a_released_upload_serves_a_resubmit_until_its_room_is_wanted() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = QueueConfig::new(dir.path().join("queue.db"), "schedd@test");
    cfg.upload_quota_bytes = 100;
    cfg.upload_grace = 60;
    let q = Queue::open(cfg).unwrap();
    let alice = Actor::user("alice");
    let m = vec![5u8; 60];
    let d = andes_schedd::queue::module_digest(&m);
    let job = format!(r#"SpooledInput = "in={d}""#);
    let remove = |c: u32, at: i64| {
        let q = &q;
        let alice = &alice;
        async move {
            q.change(alice, ids(&[&format!("{c}.0")]), Change::Remove { reason: "x".into() }, at)
                .await
                .unwrap();
        }
    };
    q.store_upload(&alice, &d, m, 0).await.unwrap();
    let c = q.submit(&alice, jobs(1, &job), 1).await.unwrap();
    remove(c, 10).await;
    // Submitted again, without the upload, within the grace.
    assert!(q.uploaded_by("alice", &d).unwrap());
    let c = q.submit(&alice, jobs(1, &job), 20).await.unwrap();
    remove(c, 30).await;
    // The grace runs from the last release: 30 + 60.
    assert_eq!(q.collect_uploads(80).await.unwrap(), 0);
    assert!(q.uploaded_by("alice", &d).unwrap());
    // A spooled output needing the room takes it from the released upload.
    assert_eq!(q.upload_room("alice").min(10_000), 100);
    q.charge_spool("alice", 80).unwrap();
    // (The reclaim is the writer's next commit.)
    assert_eq!(q.collect_uploads(81).await.unwrap(), 0);
    assert!(!q.uploaded_by("alice", &d).unwrap(), "reclaimed for the output");
    assert!(!q.has_module(&d).unwrap());
    // Nothing else is over: 20 bytes left.
    assert_eq!(q.upload_room("alice").min(10_000), 20);
}

/// A released upload goes at the end of its grace.
#[tokio::test]
async fn a_released_upload_goes_at_the_end_of_its_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = QueueConfig::new(dir.path().join("queue.db"), "schedd@test");
    cfg.upload_grace = 60;
    let q = Queue::open(cfg).unwrap();
    let alice = Actor::user("alice");
    let m = vec![5u8; 60];
    let d = andes_schedd::queue::module_digest(&m);
    q.store_upload(&alice, &d, m, 0).await.unwrap();
    let c = q.submit(&alice, jobs(1, &format!(r#"SpooledInput = "in={d}""#)), 1).await.unwrap();
    q.change(&alice, ids(&[&format!("{c}.0")]), Change::Remove { reason: "x".into() }, 100)
        .await
        .unwrap();
    assert_eq!(q.collect_uploads(159).await.unwrap(), 0);
    assert_eq!(q.collect_uploads(161).await.unwrap(), 1);
    assert!(!q.uploaded_by("alice", &d).unwrap() && !q.has_module(&d).unwrap());
}
