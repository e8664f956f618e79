//! Routed copies in the queue: the original mirrors its copy, takes its
//! final status, returns to idle when the copy is removed, and takes the copy
//! with it when held or removed (the manual's four cases).

use andes_scheduler::job::{JobId, JobStatus};
use andes_scheduler::queue::{Actor, Change, Queue, QueueConfig, Targets, factor};
use classad::{ClassAd, Value};

fn ad(text: &str) -> ClassAd {
    classad::parse_ad(text).unwrap()
}

fn open(dir: &tempfile::TempDir) -> Queue {
    Queue::open(QueueConfig::new(dir.path().join("q.db"), "schedd@test")).unwrap()
}

fn attr(q: &Queue, id: JobId, name: &str) -> Value {
    q.read().job(id).map(|v| v.ad().eval_attr(name)).unwrap_or(Value::Undefined)
}

fn status(q: &Queue, id: JobId) -> Option<JobStatus> {
    q.read().job(id).map(|v| v.proc.status)
}

fn ids(id: JobId) -> Targets {
    Targets { ids: vec![id.to_string().parse().unwrap()], ..Targets::default() }
}

/// One idle job of alice's, routed: (original, copy).
async fn routed(q: &Queue, extra: &str) -> (JobId, JobId) {
    let job = ad(&format!(r#"[Cmd = "job.wasm"; JobUniverse = 5; {extra}]"#));
    let c = q.submit(&Actor::user("alice"), factor(vec![job]), 10).await.unwrap();
    let original = JobId::new(c, 0);
    let copy_ad = ad(&format!(
        r#"[Cmd = "job.wasm"; JobUniverse = 9; GridResource = "andes h:1"; RouteName = "Site 1"; {extra}]"#
    ));
    let copy = q.route(original, copy_ad, 11).await.unwrap();
    (original, copy)
}

#[tokio::test]
async fn routing_makes_a_copy_the_original_points_at() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let (original, copy) = routed(&q, "").await;
    assert_ne!(original, copy);
    assert_eq!(attr(&q, original, "RoutedToJobId"), Value::from(copy.to_string()));
    assert_eq!(attr(&q, original, "RouteName"), Value::from("Site 1"));
    assert_eq!(attr(&q, copy, "RoutedFromJobId"), Value::from(original.to_string()));
    assert_eq!(attr(&q, copy, "Owner"), Value::from("alice"), "the copy keeps the owner");
    assert_eq!(attr(&q, copy, "JobUniverse"), Value::Int(9));
    assert!(q.read().job(original).unwrap().routed_away(), "not matchable while routed");
    assert!(q.read().job(copy).unwrap().routed_away(), "a grid job is not for the negotiator");
    // Neither can be routed again.
    assert!(q.route(original, ad("[A = 1]"), 12).await.is_err());
    assert!(q.route(copy, ad("[A = 1]"), 12).await.is_err());
}

#[tokio::test]
async fn the_original_mirrors_its_copy_and_takes_its_final_status() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let (original, copy) = routed(&q, "").await;
    q.job_started(copy, 20).await.unwrap();
    assert_eq!(status(&q, original), Some(JobStatus::Running));
    q.job_exited(copy, ad("[ExitCode = 3; ExitBySignal = false; RemoteWallClockTime = 7.0]"), 30)
        .await
        .unwrap();
    assert_eq!(status(&q, original), None, "the original left the queue with its copy");
    let h = q.history(Some(&format!("ClusterId == {}", original.cluster)), &[], None).unwrap();
    assert_eq!(h[0].eval_attr("JobStatus"), Value::Int(4));
    assert_eq!(h[0].eval_attr("ExitCode"), Value::Int(3));
    assert_eq!(h[0].eval_attr("RemoteWallClockTime"), Value::Real(7.0));
    assert_eq!(h[0].eval_attr("CompletionDate"), Value::Int(30));
}

#[tokio::test]
async fn a_removed_copy_returns_the_original_to_idle_for_rerouting() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let (original, copy) = routed(&q, "").await;
    q.job_started(copy, 20).await.unwrap();
    q.change(&Actor::admin("root"), ids(copy), Change::Remove { reason: "gone".into() }, 21)
        .await
        .unwrap();
    assert_eq!(status(&q, original), Some(JobStatus::Idle));
    assert_eq!(attr(&q, original, "RoutedToJobId"), Value::Undefined);
    assert_eq!(attr(&q, original, "LastRoutedToJobId"), Value::from(copy.to_string()));
    assert!(!q.read().job(original).unwrap().routed_away(), "matchable again");
    let again =
        q.route(original, ad(r#"[JobUniverse = 9; RouteName = "Site 2"]"#), 22).await.unwrap();
    assert_eq!(attr(&q, original, "RoutedToJobId"), Value::from(again.to_string()));
}

#[tokio::test]
async fn removing_or_holding_the_original_removes_the_copy() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let alice = Actor::user("alice");
    let (original, copy) = routed(&q, "").await;
    q.change(&alice, ids(original), Change::Remove { reason: String::new() }, 20).await.unwrap();
    assert_eq!(status(&q, original), None);
    assert_eq!(status(&q, copy), None, "an idle copy leaves at once");
    let h = q.history(None, &[], None).unwrap();
    assert_eq!(h.iter().filter(|a| a.eval_attr("JobStatus") == Value::Int(3)).count(), 2);

    let (original, copy) = routed(&q, "").await;
    q.job_started(copy, 30).await.unwrap();
    q.change(&alice, ids(original), Change::Hold { reason: String::new() }, 31).await.unwrap();
    assert_eq!(status(&q, original), Some(JobStatus::Held));
    assert_eq!(status(&q, copy), Some(JobStatus::Removed), "a running copy is being removed");
    assert_eq!(attr(&q, original, "RoutedToJobId"), Value::Undefined);
    q.change(&alice, ids(original), Change::Release { reason: String::new() }, 32).await.unwrap();
    assert_eq!(status(&q, original), Some(JobStatus::Idle));
    assert!(!q.read().job(original).unwrap().routed_away());
}

#[tokio::test]
async fn periodic_expressions_run_on_the_copy_not_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let (original, copy) = routed(&q, "PeriodicHold = true").await;
    q.periodic(50).await.unwrap();
    assert_eq!(status(&q, original), Some(JobStatus::Idle), "the original evaluates none");
    assert_eq!(status(&q, copy), Some(JobStatus::Held), "the copy inherited PeriodicHold");
}

#[tokio::test]
async fn edit_in_place_changes_the_job_itself() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let c = q
        .submit(&Actor::user("alice"), factor(vec![ad(r#"[Cmd = "j.wasm"; Old = 1]"#)]), 0)
        .await
        .unwrap();
    let id = JobId::new(c, 0);
    let changes = vec![
        ("Tagged".to_string(), Some(classad::parse_expr("true").unwrap())),
        ("Old".to_string(), None),
        ("Owner".to_string(), Some(classad::parse_expr("\"mallory\"").unwrap())),
    ];
    q.edit_in_place(id, "tag", changes, 1).await.unwrap();
    assert_eq!(attr(&q, id, "Tagged"), Value::Bool(true));
    assert_eq!(attr(&q, id, "Old"), Value::Undefined);
    assert_eq!(attr(&q, id, "Owner"), Value::from("alice"), "protected attributes stay");
}
