//! Routed copies in the queue: the original mirrors its copy (a held copy
//! too), takes its final status, returns to idle when the copy is removed,
//! and takes the copy with it when held or removed (the manual's four cases).

use andes_schedd::job::{JobId, JobStatus};
use andes_schedd::queue::{Actor, Change, Queue, QueueConfig, Targets, factor};
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

/// A job runs here or through its copy, never both: one on its way to a
/// host (its activation recorded) is not routed, and one routed is not
/// activated, whichever came first.
#[tokio::test]
async fn a_job_being_started_is_not_routed_and_a_routed_job_is_not_started() {
    use andes_schedd::queue::PoolOp;
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let job = ad(r#"[Cmd = "job.wasm"; JobUniverse = 5]"#);
    let c = q.submit(&Actor::user("alice"), factor(vec![job.clone(), job]), 10).await.unwrap();
    let (a, b) = (JobId::new(c, 0), JobId::new(c, 1));
    let claim = ad(r#"[ClaimId = "c1"; StartdAddr = "h:1"; RemoteHost = "slot1@h"]"#);
    let copy_ad = || ad(r#"[Cmd = "job.wasm"; JobUniverse = 9; GridResource = "andes h:1"]"#);
    // Being started: the route is refused, nothing is copied.
    q.pool(vec![a], PoolOp::Activating(claim.clone()), 11).await.unwrap();
    let e = q.route(a, copy_ad(), 12).await.unwrap_err();
    assert!(e.to_string().contains("being started here"), "{e}");
    assert_eq!(q.read().jobs().count(), 2, "no copy was made");
    // The activation never happened: it may be routed now.
    q.pool(vec![a], PoolOp::NotStarted("c1".into()), 13).await.unwrap();
    q.route(a, copy_ad(), 14).await.unwrap();
    // Routed: its activation is refused, and it stays as it was.
    let copy = q.route(b, copy_ad(), 15).await.unwrap();
    let e = q.pool(vec![b], PoolOp::Activating(claim), 16).await.unwrap_err();
    assert!(e.to_string().contains("it is routed"), "{e}");
    let ad_b = q.read().job(b).unwrap().ad();
    assert!(!ad_b.contains("ActivationPending") && !ad_b.contains("ClaimId"), "{ad_b}");
    assert_eq!(status(&q, b), Some(JobStatus::Idle));
    assert_eq!(attr(&q, b, "RoutedToJobId"), Value::from(copy.to_string()));
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
    let h = q
        .history(
            &Actor::admin("root"),
            Some(&format!("ClusterId == {}", original.cluster)),
            &[],
            None,
        )
        .unwrap();
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
    let h = q.history(&Actor::admin("root"), None, &[], None).unwrap();
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
    assert_eq!(status(&q, copy), Some(JobStatus::Held), "the copy inherited PeriodicHold");
    // The original evaluates none: it only mirrors its copy's hold.
    assert_eq!(status(&q, original), Some(JobStatus::Held));
    assert_eq!(attr(&q, original, "HoldReason"), attr(&q, copy, "HoldReason"));
    assert_eq!(attr(&q, original, "RoutedToJobId"), Value::from(copy.to_string()));
}

/// A copy's hold shows on its original with the copy's reason; releasing
/// the original releases the copy; and when a held copy is removed (the
/// manual's PeriodicRemove of held copies) the original, held only as a
/// mirror, is idle again for rerouting.
#[tokio::test]
async fn the_original_mirrors_a_held_copy_and_is_idle_again_when_it_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let (original, copy) = routed(&q, "").await;
    q.job_started(copy, 20).await.unwrap();
    let hold = Change::Hold { reason: "held at h:1: disk full".into() };
    q.change(&Actor::schedd(), ids(copy), hold, 21).await.unwrap();
    assert_eq!(status(&q, original), Some(JobStatus::Held));
    assert_eq!(attr(&q, original, "HoldReason"), Value::from("held at h:1: disk full"));
    assert_eq!(status(&q, copy), Some(JobStatus::Held), "the mirror does not remove the copy");
    let alice = Actor::user("alice");
    q.change(&alice, ids(original), Change::Release { reason: String::new() }, 22).await.unwrap();
    assert_eq!(status(&q, copy), Some(JobStatus::Idle), "the release reached the copy");
    assert_eq!(status(&q, original), Some(JobStatus::Idle));

    let hold = Change::Hold { reason: "again".into() };
    q.change(&Actor::schedd(), ids(copy), hold, 23).await.unwrap();
    assert_eq!(status(&q, original), Some(JobStatus::Held));
    q.change(&Actor::schedd(), ids(copy), Change::Remove { reason: "gone".into() }, 24)
        .await
        .unwrap();
    assert_eq!(status(&q, original), Some(JobStatus::Idle), "not held once its copy is gone");
    assert_eq!(attr(&q, original, "LastHoldReason"), Value::from("again"));
    assert!(!q.read().job(original).unwrap().routed_away(), "free to be routed again");
}

/// An edit of a routed original reaches its copy.
#[tokio::test]
async fn an_edit_of_the_original_reaches_its_copy() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let (original, copy) = routed(&q, "").await;
    let edit = Change::Edit { attr: "Wanted".into(), expr: "42".into() };
    q.change(&Actor::user("alice"), ids(original), edit, 20).await.unwrap();
    assert_eq!(attr(&q, copy, "Wanted"), Value::Int(42));
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

/// Another pool's schedd routing a job here submits it for the owner its ad
/// names (recorded with the schedd beside it) and acts on the jobs it
/// routed here, and on no other job: not the owner's own, not by owner
/// name, not another schedd's.
#[tokio::test]
async fn a_routing_schedd_acts_only_on_the_jobs_it_routed_here() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir);
    let site = Actor::routing_schedd("site-a");
    let job = ad(r#"[Cmd = "job.wasm"; Owner = "alice"]"#);
    let routed = JobId::new(q.submit(&site, factor(vec![job]), 10).await.unwrap(), 0);
    assert_eq!(attr(&q, routed, "Owner"), Value::from("alice"));
    assert_eq!(attr(&q, routed, "RoutedFromSchedd"), Value::from("site-a"));
    // Without an Owner there is no one to run it for.
    let none = q.submit(&site, factor(vec![ad(r#"[Cmd = "job.wasm"]"#)]), 10).await;
    assert!(none.is_err(), "{none:?}");
    // A user cannot claim a schedd routed their job.
    let forged = ad(r#"[Cmd = "job.wasm"; RoutedFromSchedd = "site-a"]"#);
    let own =
        JobId::new(q.submit(&Actor::user("alice"), factor(vec![forged]), 10).await.unwrap(), 0);
    assert_eq!(attr(&q, own, "RoutedFromSchedd"), Value::Undefined);

    let hold = || Change::Hold { reason: "r".into() };
    assert!(q.change(&site, ids(own), hold(), 11).await.is_err(), "alice's own job");
    let by_owner = Targets { owners: vec!["alice".into()], ..Targets::default() };
    assert!(q.change(&site, by_owner, hold(), 11).await.is_err(), "by owner name");
    let other = Actor::routing_schedd("site-b");
    assert!(q.change(&other, ids(routed), hold(), 11).await.is_err(), "another schedd's job");
    q.change(&site, ids(routed), hold(), 11).await.unwrap();
    assert_eq!(status(&q, routed), Some(JobStatus::Held));
    assert_eq!(status(&q, own), Some(JobStatus::Idle));
    // Its owner may act on it as on any of her jobs.
    let release = Change::Release { reason: String::new() };
    q.change(&Actor::user("alice"), ids(routed), release, 12).await.unwrap();
    assert_eq!(status(&q, routed), Some(JobStatus::Idle));
}
