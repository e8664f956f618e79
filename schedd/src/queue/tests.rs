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
