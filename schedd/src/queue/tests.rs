//! The writer's recovery.

use super::ops::Op;
use super::*;
use classad::ClassAd;

#[tokio::test]
async fn a_panicking_request_fails_alone_and_the_writer_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let q = Queue::open(QueueConfig::new(dir.path().join("q.db"), "test")).unwrap();
    let alice = Actor::user("alice");
    let submit = |n: i64| Submit {
        cluster: None,
        cluster_ad: classad::parse_ad(&format!("[Cmd = \"job.wasm\"; N = {n}]")).unwrap(),
        procs: vec![ClassAd::new()],
    };
    // One batch: a submit, a panic, another submit.
    let (a, bad, b) = tokio::join!(
        q.submit(&alice, submit(1), 1),
        q.call(Op::Panic, 1),
        q.submit(&alice, submit(2), 1),
    );
    let err = bad.err().unwrap().to_string();
    assert!(err.contains("could not apply") && err.contains("a test's panic"), "{err}");
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_ne!(a, b);
    // Later writes still work, and every acknowledged job is there.
    let c = q.submit(&alice, submit(3), 2).await.unwrap();
    assert_eq!(q.read().len(), 3);
    drop(q);
    let q = Queue::open(QueueConfig::new(dir.path().join("q.db"), "test")).unwrap();
    let ids: Vec<u32> = q.read().jobs().map(|v| v.id.cluster).collect();
    assert_eq!(ids.len(), 3);
    for id in [a, b, c] {
        assert!(ids.contains(&id), "{ids:?}");
    }
}

#[tokio::test]
async fn an_events_ad_answers_what_it_binds_before_it_is_made_and_is_the_jobs_ad() {
    let dir = tempfile::tempdir().unwrap();
    let mut qc = QueueConfig::new(dir.path().join("q.db"), "test");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<QueueEvent>::new()));
    let s = seen.clone();
    qc.notify = Some(Box::new(move |events: &[QueueEvent]| {
        s.lock().unwrap().extend(events.iter().cloned())
    }));
    let q = Queue::open(qc).unwrap();
    let own = classad::parse_ad("[Arguments = \"7\"; MyOwn = 1]").unwrap();
    let submit = Submit {
        cluster: None,
        cluster_ad: classad::parse_ad("[Cmd = \"job.wasm\"; UserLog = \"x.log\"]").unwrap(),
        procs: vec![ClassAd::new(), own],
    };
    q.submit(&Actor::user("alice"), submit, 1).await.unwrap();
    let events: Vec<QueueEvent> = seen.lock().unwrap().clone();
    assert_eq!(events.len(), 2, "{events:?}");
    let names =
        ["Cmd", "userlog", "Arguments", "MyOwn", "procid", "JobStatus", "GlobalJobId", "Nope"];
    for e in &events {
        // Asked before the ad is made: from the job's parts.
        let has: Vec<bool> = names.iter().map(|n| e.ad.has(n)).collect();
        let made: &ClassAd = &e.ad;
        let contains: Vec<bool> = names.iter().map(|n| made.contains(n)).collect();
        assert_eq!(has, contains, "job {}", e.id);
        assert_eq!(made, &q.read().job(e.id).unwrap().ad(), "job {}", e.id);
        // Asked after: from the ad itself, the same answers.
        assert_eq!(names.iter().map(|n| e.ad.has(n)).collect::<Vec<_>>(), contains);
    }
    assert!(events.iter().any(|e| e.ad.has("MyOwn")) && !events.iter().all(|e| e.ad.has("MyOwn")));
}

#[tokio::test]
async fn a_job_the_schedd_died_evaluating_is_held_before_the_reopened_queue_can_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("q.db");
    let q = Queue::open(QueueConfig::new(db.clone(), "test")).unwrap();
    let submit = Submit {
        cluster: None,
        cluster_ad: classad::parse_ad("[Cmd = \"job.wasm\"]").unwrap(),
        procs: vec![ClassAd::new()],
    };
    let c = q.submit(&Actor::user("bob"), submit, 1).await.unwrap();
    // It dies evaluating the job's periodic policy.
    std::mem::forget(q.journal().enter(crate::job::JobId::new(c, 0), "periodic policy"));
    drop(q);
    andes_protocol::journal::mark_aborted(&db.with_extension("evaluating")).unwrap();
    let q = Queue::open(QueueConfig::new(db, "test")).unwrap();
    // The first read, before any request: already held and marked.
    let st = q.read();
    let v = st.jobs().next().unwrap();
    assert_eq!(v.proc.status, crate::job::JobStatus::Held);
    assert!(v.ad().contains(crate::quarantine::QUARANTINED));
}
