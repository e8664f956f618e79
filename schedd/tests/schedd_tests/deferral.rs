//! Deferral and CronTab scheduling in the queue, on a virtual clock: every
//! time is an explicit `now`.

use std::sync::{Arc, Mutex};

use andes_schedd::job::{JobId, JobStatus};
use andes_schedd::queue::{
    Actor, Change, EventKind, Queue, QueueConfig, QueueError, QueueEvent, Targets, factor,
};
use classad::{ClassAd, Value};
use jiff::tz::TimeZone;

fn ad(text: &str) -> ClassAd {
    classad::parse_ad(text).unwrap()
}

/// 2026-11-22T10:00:00Z, a Sunday.
const T0: i64 = 1_795_341_600;

struct Fixture {
    _dir: tempfile::TempDir,
    q: Queue,
    notes: Arc<Mutex<Vec<String>>>,
}

fn open_in(dir: &std::path::Path, tz: TimeZone, notes: Arc<Mutex<Vec<String>>>) -> Queue {
    let mut cfg = QueueConfig::new(dir.join("q.db"), "schedd@test");
    cfg.cron_time_zone = tz;
    let n = notes.clone();
    cfg.sink = Some(Box::new(move |evs: &[QueueEvent]| {
        for e in evs {
            if let EventKind::Note(t) = &e.kind {
                n.lock().unwrap().push(t.clone());
            }
        }
    }));
    Queue::open(cfg).unwrap()
}

fn fixture(tz: TimeZone) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let notes = Arc::default();
    let q = open_in(dir.path(), tz, Arc::clone(&notes));
    Fixture { _dir: dir, q, notes }
}

async fn submit(q: &Queue, extra: &str, now: i64) -> JobId {
    let job = ad(&format!(r#"[Cmd = "job.wasm"; RequestMemory = 64; {extra}]"#));
    let c = q.submit(&Actor::user("alice"), factor(vec![job]), now).await.unwrap();
    JobId::new(c, 0)
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

const EVERY_5: &str = r#"CronMinute = "*/5"; DeferralWindow = 0; DeferralPrepTime = 300; ScheddInterval = 300; OnExitRemove = false"#;

#[tokio::test]
async fn a_cron_job_gets_its_deferral_time_when_it_enters_the_queue() {
    let f = fixture(TimeZone::UTC);
    // Submitted at 10:02:30: the next run is 10:05 (now rounded up to a minute).
    let id = submit(&f.q, EVERY_5, T0 + 150).await;
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 300));
    // On a minute exactly, the next minute is the first candidate.
    let id = submit(&f.q, EVERY_5, T0 + 300).await;
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 600));
}

#[tokio::test]
async fn an_invalid_or_impossible_schedule_is_refused_at_submit() {
    let f = fixture(TimeZone::UTC);
    let job = ad(r#"[Cmd = "job.wasm"; CronMinute = "61"]"#);
    let e = f.q.submit(&Actor::user("alice"), factor(vec![job]), T0).await.unwrap_err();
    assert!(matches!(&e, QueueError::Invalid(m) if m.contains("61 is outside 0-59")), "{e:?}");
    let job = ad(r#"[Cmd = "job.wasm"; CronDayOfMonth = "30"; CronMonth = "2"]"#);
    let e = f.q.submit(&Actor::user("alice"), factor(vec![job]), T0).await.unwrap_err();
    assert!(format!("{e:?}").contains("never"), "{e:?}");
    assert_eq!(f.q.read().len(), 0, "nothing half-submitted");
}

#[tokio::test]
async fn a_requeued_cron_job_keeps_its_id_and_takes_the_next_run() {
    let f = fixture(TimeZone::UTC);
    let id = submit(&f.q, EVERY_5, T0).await;
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 300));
    f.q.job_started(id, T0 + 299).await.unwrap();
    f.q.job_exited(id, ad("[ExitCode = 0; ExitBySignal = false]"), T0 + 330).await.unwrap();
    assert_eq!(status(&f.q, id), Some(JobStatus::Idle), "OnExitRemove = false requeues");
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 600));
    assert_eq!(f.q.read().len(), 1, "the same ClusterId.ProcId");
    assert!(f.notes.lock().unwrap().is_empty(), "nothing skipped");
}

#[tokio::test]
async fn a_requeued_cron_run_is_logged_as_a_requeue_not_a_termination() {
    // HTCondor's shadow logs a run that OnExitRemove sends back to the
    // queue as an eviction ("Job terminated and was requeued"), never as a
    // termination followed by a silent restart.
    let dir = tempfile::tempdir().unwrap();
    let kinds: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut cfg = QueueConfig::new(dir.path().join("q.db"), "schedd@test");
    let k = kinds.clone();
    cfg.sink = Some(Box::new(move |evs: &[QueueEvent]| {
        for e in evs {
            k.lock().unwrap().push(format!("{:?}", e.kind));
        }
    }));
    let q = Queue::open(cfg).unwrap();
    let id = submit(&q, EVERY_5, T0).await;
    q.job_started(id, T0 + 299).await.unwrap();
    q.job_exited(id, ad("[ExitCode = 0; ExitBySignal = false]"), T0 + 330).await.unwrap();
    let kinds = kinds.lock().unwrap().clone();
    assert_eq!(kinds, ["Submitted", "Executing", "Requeued"], "{kinds:?}");
    let events = andes_schedd::eventlog::events_for(
        &QueueEvent {
            id,
            kind: EventKind::Requeued,
            ad: Arc::new(andes_schedd::queue::EventAd::made(q.read().job(id).unwrap().ad())),
            time: T0,
        },
        "submit.example",
    );
    let text = format!("{events:?}");
    assert!(text.contains("TerminatedAndRequeued(Normal { return_value: 0 })"), "{text}");
}

#[tokio::test]
async fn a_run_that_would_overlap_is_skipped_and_logged() {
    let f = fixture(TimeZone::UTC);
    let id = submit(&f.q, EVERY_5, T0).await;
    f.q.job_started(id, T0 + 300).await.unwrap();
    // It ran 12 minutes: the runs of 10:10 and 10:15 came due meanwhile.
    f.q.job_exited(id, ad("[ExitCode = 0; ExitBySignal = false]"), T0 + 300 + 720).await.unwrap();
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 1200));
    assert_eq!(attr(&f.q, id, "CronSkippedRuns"), Value::Int(2));
    let notes = f.notes.lock().unwrap().clone();
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("2 scheduled run(s) skipped"), "{notes:?}");
}

#[tokio::test]
async fn a_missed_cron_run_is_counted_and_the_next_one_taken() {
    let f = fixture(TimeZone::UTC);
    let id = submit(&f.q, EVERY_5, T0).await;
    // Not matched by 10:05 (window 0): missed.
    f.q.deferral_missed(vec![id], T0 + 299).await.unwrap();
    assert_eq!(attr(&f.q, id, "CronMissedRuns"), Value::Undefined, "not yet");
    f.q.deferral_missed(vec![id], T0 + 300).await.unwrap();
    assert_eq!(attr(&f.q, id, "CronMissedRuns"), Value::Int(1));
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 600));
    assert_eq!(status(&f.q, id), Some(JobStatus::Idle));
    // Looked at again only at 10:24:50: the runs of 10:10, 10:15 and 10:20
    // were all missed; the next is 10:25.
    f.q.deferral_missed(vec![id], T0 + 1490).await.unwrap();
    assert_eq!(attr(&f.q, id, "CronMissedRuns"), Value::Int(1 + 3));
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 1500));
    assert!(f.notes.lock().unwrap().iter().any(|n| n.contains("missed")));
}

/// A deferred job on its way to a host (its activation recorded) misses
/// nothing: its host keeps its time. Once the activation is known not to
/// have happened, the missed run counts.
#[tokio::test]
async fn a_job_being_started_misses_no_run() {
    use andes_schedd::queue::PoolOp;
    let f = fixture(TimeZone::UTC);
    let id = submit(&f.q, EVERY_5, T0).await;
    let claim = ad(r#"[ClaimId = "c1"; StartdAddr = "h:1"; RemoteHost = "slot1@h"]"#);
    f.q.pool(vec![id], PoolOp::Activating(claim), T0 + 290).await.unwrap();
    f.q.deferral_missed(vec![id], T0 + 300).await.unwrap();
    assert_eq!(attr(&f.q, id, "CronMissedRuns"), Value::Undefined);
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 300));
    f.q.pool(vec![id], PoolOp::NotStarted("c1".into()), T0 + 301).await.unwrap();
    f.q.deferral_missed(vec![id], T0 + 301).await.unwrap();
    assert_eq!(attr(&f.q, id, "CronMissedRuns"), Value::Int(1));
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 600));
}

#[tokio::test]
async fn a_deferred_job_that_misses_its_window_unmatched_is_held() {
    let f = fixture(TimeZone::UTC);
    let extra = format!("DeferralTime = {}; DeferralWindow = 120; DeferralPrepTime = 60", T0 + 600);
    let id = submit(&f.q, &extra, T0).await;
    f.q.deferral_missed(vec![id], T0 + 719).await.unwrap();
    assert_eq!(status(&f.q, id), Some(JobStatus::Idle), "still within the window");
    f.q.deferral_missed(vec![id], T0 + 720).await.unwrap();
    assert_eq!(status(&f.q, id), Some(JobStatus::Held));
    assert_eq!(attr(&f.q, id, "HoldReasonCode"), Value::Int(20));
    let Value::Str(r) = attr(&f.q, id, "HoldReason") else { panic!() };
    assert!(r.contains("by 120 seconds") && r.contains("DeferralWindow 120"), "{r}");
}

#[tokio::test]
async fn release_recomputes_the_next_run() {
    let f = fixture(TimeZone::UTC);
    let id = submit(&f.q, EVERY_5, T0).await;
    let alice = Actor::user("alice");
    f.q.change(&alice, ids(id), Change::Hold { reason: String::new() }, T0 + 10).await.unwrap();
    f.q.change(&alice, ids(id), Change::Release { reason: String::new() }, T0 + 3000)
        .await
        .unwrap();
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 3300));
}

#[tokio::test]
async fn qedit_of_a_cron_field_is_checked_and_reschedules() {
    let f = fixture(TimeZone::UTC);
    let id = submit(&f.q, EVERY_5, T0).await;
    let alice = Actor::user("alice");
    let edit = |v: &str| Change::Edit { attr: "CronMinute".into(), expr: v.into() };
    let e = f.q.change(&alice, ids(id), edit("\"99\""), T0).await.unwrap_err();
    assert!(format!("{e:?}").contains("99 is outside"), "{e:?}");
    f.q.change(&alice, ids(id), edit("\"30\""), T0).await.unwrap();
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 1800));
}

#[tokio::test]
async fn a_restart_recomputes_every_idle_cron_job() {
    let dir = tempfile::tempdir().unwrap();
    let notes: Arc<Mutex<Vec<String>>> = Arc::default();
    let id = {
        let q = open_in(dir.path(), TimeZone::UTC, notes.clone());
        submit(&q, EVERY_5, T0).await
    };
    // The schedd was down from 10:00 to 10:22:10 (window 0): runs 10:05 to
    // 10:20 were missed; the next is 10:25.
    let q = open_in(dir.path(), TimeZone::UTC, notes.clone());
    q.recompute_cron(T0 + 1330).await.unwrap();
    assert_eq!(attr(&q, id, "DeferralTime"), Value::Int(T0 + 1500));
    assert_eq!(attr(&q, id, "CronMissedRuns"), Value::Int(4));
    // In another zone the schedule is read in local time.
    let q2 = {
        drop(q);
        open_in(dir.path(), TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").unwrap(), notes)
    };
    let alice = Actor::user("alice");
    let edit = Change::Edit { attr: "CronHour".into(), expr: "\"9\"".into() };
    q2.change(
        &alice,
        ids(id),
        Change::Edit { attr: "CronMinute".into(), expr: "\"0\"".into() },
        T0 + 1330,
    )
    .await
    .unwrap();
    q2.change(&alice, ids(id), edit, T0 + 1330).await.unwrap();
    // 09:00 New York (EST, UTC-5) is 14:00 UTC on 2026-11-22.
    assert_eq!(attr(&q2, id, "DeferralTime"), Value::Int(T0 + 4 * 3600));
}

#[tokio::test]
async fn cron_across_daylight_saving_in_the_schedds_zone() {
    // 2026-03-08 02:00 EST -> 03:00 EDT in New York: a daily 02:30 job runs
    // at 03:30 EDT that day (the fold is covered by the cron crate).
    let f = fixture(TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").unwrap());
    let id =
        submit(&f.q, r#"CronMinute = "30"; CronHour = "2"; OnExitRemove = false"#, 1_772_967_600)
            .await; // 2026-03-08T11:00Z
    let Value::Int(t) = attr(&f.q, id, "DeferralTime") else { panic!() };
    assert_eq!(t, 1_773_037_800, "2026-03-09 02:30 EDT = 06:30Z");
    let id =
        submit(&f.q, r#"CronMinute = "30"; CronHour = "2"; OnExitRemove = false"#, 1_772_942_400)
            .await; // 2026-03-08T04:00Z = 23:00 EST
    let Value::Int(t) = attr(&f.q, id, "DeferralTime") else { panic!() };
    assert_eq!(t, 1_772_955_000, "2026-03-08 03:30 EDT = 07:30Z: the skipped 02:30, once");
}

#[tokio::test]
async fn running_deferred_jobs_show_in_the_summary_and_cron_next_runs() {
    let f = fixture(TimeZone::UTC);
    let id = submit(&f.q, EVERY_5, T0).await;
    let rows = f.q.read().summary(&[]);
    assert_eq!(rows[0].next_run, Some(T0 + 300));
    f.q.job_started(id, T0 + 1).await.unwrap();
    f.q.pool(
        vec![id],
        andes_schedd::queue::PoolOp::Update(ad(&format!("[JobDeferredUntil = {}]", T0 + 300))),
        T0 + 1,
    )
    .await
    .unwrap();
    let rows = f.q.read().summary(&[]);
    assert_eq!((rows[0].run, rows[0].deferred), (1, 1));
    // The host reports the wait over: the attribute goes.
    f.q.pool(
        vec![id],
        andes_schedd::queue::PoolOp::Update(ad("[JobDeferredUntil = undefined]")),
        T0 + 300,
    )
    .await
    .unwrap();
    assert_eq!(attr(&f.q, id, "JobDeferredUntil"), Value::Undefined);
    assert!(!f.q.read().job(id).unwrap().proc.ad.contains("JobDeferredUntil"));
    assert_eq!(f.q.read().summary(&[])[0].deferred, 0);
}

#[tokio::test]
async fn a_cron_schedule_that_becomes_unreadable_holds_the_job_as_invalid_cron_settings() {
    // The schedule names another attribute; an edit of that one is not a cron
    // field's, so it is taken, and the schedule is read again at the restart.
    let f = fixture(TimeZone::UTC);
    let id = submit(
        &f.q,
        r#"CronMinute = Every; Every = "*/5"; DeferralWindow = 0; OnExitRemove = false"#,
        T0,
    )
    .await;
    assert_eq!(attr(&f.q, id, "DeferralTime"), Value::Int(T0 + 300));
    let edit = Change::Edit { attr: "Every".into(), expr: "\"99\"".into() };
    f.q.change(&Actor::user("alice"), ids(id), edit, T0).await.unwrap();
    f.q.recompute_cron(T0 + 10).await.unwrap();
    assert_eq!(status(&f.q, id), Some(JobStatus::Held));
    assert_eq!(attr(&f.q, id, "HoldReasonCode"), Value::Int(25), "InvalidCronSettings");
    let Value::Str(r) = attr(&f.q, id, "HoldReason") else { panic!() };
    assert!(r.contains("99"), "{r}");
}

#[tokio::test]
async fn a_deferred_job_takes_the_schedds_own_interval_not_the_submit_files() {
    // A schedd that looks every 20 s: a job due at T0 + 600 with a prep time
    // of 60 is matchable from T0 + 520 (not from T0 + 240, as 300 would say).
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = QueueConfig::new(dir.path().join("q.db"), "schedd@test");
    cfg.schedd_interval = 20;
    let q = Queue::open(cfg).unwrap();
    let extra = format!(
        "DeferralTime = {}; DeferralWindow = 0; DeferralPrepTime = 60; ScheddInterval = 300",
        T0 + 600
    );
    let id = submit(&q, &extra, T0).await;
    assert_eq!(attr(&q, id, "ScheddInterval"), Value::Int(20));
}
