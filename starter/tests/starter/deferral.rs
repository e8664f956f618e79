//! The starter's side of job deferral, on a virtual clock: it waits for
//! DeferralTime by the host's clock, starts a late job within its
//! DeferralWindow, holds one later than that, and keeps a suspended or
//! killed job's wait as the manual says.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use andes_starter::starter::{Deferral, HOLD_MISSED_DEFERRAL};
use andes_starter::{
    Clock, Control, Ending, Host, HostConfig, JobResult, JobSpec, Limits, VirtualClock,
};
use classad::parse_ad;

static HOST: LazyLock<Host> = LazyLock::new(|| {
    Host::new(HostConfig { max_instances: 8, max_memory_bytes: 1 << 30, ..Default::default() })
        .expect("host")
});

fn hello() -> Arc<[u8]> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../samples/target/wasm32-wasip1/release/hello.wasm");
    std::fs::read(&p)
        .unwrap_or_else(|e| {
            panic!("{}: {e}; build the samples first (`cargo xtask test`)", p.display())
        })
        .into()
}

struct Sandbox(PathBuf);

impl Sandbox {
    fn new() -> Sandbox {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("andes-deferral-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Sandbox(p)
    }
    /// The guest wrote its output (the starter creates `Out` before the
    /// guest runs, so an empty file does not count).
    fn ran(&self) -> bool {
        std::fs::metadata(self.0.join("out.txt")).is_ok_and(|m| m.len() > 0)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Run {
    vc: Arc<VirtualClock>,
    ctl: Arc<Control>,
    sb: Sandbox,
    job: tokio::task::JoinHandle<JobResult>,
}

/// Starts hello with `deferral` (ClassAd attributes, `NOW` replaced by the
/// virtual clock's Unix seconds) on a virtual clock.
fn start(deferral: &str) -> Run {
    start_on(deferral, |vc| Arc::new(vc))
}

/// As [`start`], with the starter's clock made by `clock` from the virtual
/// one.
fn start_on(deferral: &str, clock: impl FnOnce(Arc<VirtualClock>) -> Arc<dyn Clock>) -> Run {
    let vc = VirtualClock::new();
    let now = vc.unix_now() as i64;
    let text = format!("[ Out = \"out.txt\"; {} ]", deferral.replace("NOW", &now.to_string()));
    let ad = parse_ad(&text).unwrap();
    let sb = Sandbox::new();
    let spec = JobSpec {
        module: hello(),
        limits: Limits::from_ad(&ad),
        ad,
        sandbox: sb.0.clone(),
        inherit_stdio: false,
        digest: None,
        saved_state: None,
        transparent: None,
        metered: false,
        sandbox_empty: false,
    };
    let ctl = Control::new();
    let clock = clock(vc.clone());
    let job = tokio::spawn({
        let ctl = ctl.clone();
        async move { HOST.run(spec, ctl, clock).await }
    });
    Run { vc, ctl, sb, job }
}

async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

/// Waits (in real time, for the spawned starter) until the job waits for
/// its DeferralTime.
async fn waiting(r: &Run) -> i64 {
    for _ in 0..5_000 {
        if let Some(t) = r.ctl.deferred_until() {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the job never began to wait");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_waits_for_its_deferral_time_then_runs() {
    let r = start("DeferralTime = NOW + 30");
    let until = waiting(&r).await;
    assert_eq!(until, r.vc.unix_now() as i64 + 30);
    r.vc.advance(Duration::from_millis(29_999));
    settle().await;
    assert!(!r.job.is_finished() && !r.sb.ran(), "started before its time");
    assert!(r.ctl.deferred_until().is_some());
    r.vc.advance(Duration::from_millis(1));
    let res = r.job.await.unwrap();
    assert_eq!(res.ending, Ending::Exited(0));
    assert!(r.sb.ran());
    assert_eq!(r.ctl.deferred_until(), None);
}

/// A virtual clock whose wall clock can be set back (as NTP may step or
/// slew it) while its monotonic time goes on.
struct SetBack {
    vc: Arc<VirtualClock>,
    behind_ms: Arc<std::sync::atomic::AtomicI64>,
    /// How many timers the starter has set.
    timers: Arc<std::sync::atomic::AtomicUsize>,
}

impl Clock for SetBack {
    fn now(&self) -> std::time::Instant {
        self.vc.now()
    }
    fn unix_now(&self) -> u64 {
        (self.unix_now_ms() / 1000) as u64
    }
    fn unix_now_ms(&self) -> i64 {
        self.vc.unix_now_ms() - self.behind_ms.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn sleep_until(
        &self,
        deadline: std::time::Instant,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        self.timers.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.vc.sleep_until(deadline)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wall_clock_set_back_during_the_wait_does_not_start_the_job_early() {
    use std::sync::atomic::Ordering::SeqCst;
    let behind_ms = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let timers = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let r = start_on("DeferralTime = NOW + 30", {
        let (behind_ms, timers) = (behind_ms.clone(), timers.clone());
        |vc| Arc::new(SetBack { vc, behind_ms, timers })
    });
    waiting(&r).await;
    settle().await;
    assert_eq!(timers.load(SeqCst), 1, "one timer, for the DeferralTime");
    // The wall clock goes back 2 s while the job waits: by it, the 30 s
    // the timer was set for are 28. The starter sees that when its timer
    // fires and sets another for the 2 s left, or (wrongly) starts the job.
    behind_ms.store(2_000, SeqCst);
    r.vc.advance(Duration::from_secs(30));
    let t = std::time::Instant::now();
    while timers.load(SeqCst) == 1 && !r.job.is_finished() {
        assert!(t.elapsed() < Duration::from_secs(60), "the starter neither waited nor ran");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(!r.job.is_finished() && !r.sb.ran(), "started by the monotonic clock, early");
    assert_eq!(timers.load(SeqCst), 2);
    assert!(r.ctl.deferred_until().is_some());
    r.vc.advance(Duration::from_secs(2));
    assert_eq!(r.job.await.unwrap().ending, Ending::Exited(0));
    assert!(r.sb.ran());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_always_deferred_for_60_seconds() {
    // DeferralTime = (CurrentTime + 60): evaluated on the execute host.
    let r = start("DeferralTime = (CurrentTime + 60)");
    let until = waiting(&r).await;
    assert_eq!(until, r.vc.unix_now() as i64 + 60);
    r.vc.advance(Duration::from_secs(60));
    assert_eq!(r.job.await.unwrap().ending, Ending::Exited(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_sixty_seconds_in_the_past_with_a_120_second_window_runs_at_once() {
    let r = start("DeferralTime = (CurrentTime - 60); DeferralWindow = 120");
    // No time passes on the virtual clock: it must not wait.
    let res = r.job.await.unwrap();
    assert_eq!(res.ending, Ending::Exited(0));
    assert!(r.sb.ran());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_45_seconds_late_with_75_left_in_the_window_runs() {
    let r = start("DeferralTime = NOW - 45; DeferralWindow = 120");
    assert_eq!(r.job.await.unwrap().ending, Ending::Exited(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_the_window_holds_the_job_with_code_25() {
    let r = start("DeferralTime = NOW - 130; DeferralWindow = 120");
    let res = r.job.await.unwrap();
    match res.ending {
        Ending::Held { code, subcode, reason } => {
            assert_eq!((code, subcode), (HOLD_MISSED_DEFERRAL, 0));
            assert!(reason.contains("by 130 seconds (DeferralWindow 120 seconds)"), "{reason}");
        }
        other => panic!("expected a hold, got {other:?}"),
    }
    assert!(!r.sb.ran(), "a missed job never runs");
    // The default window is 0: one second late is too late.
    let r = start("DeferralTime = NOW - 1");
    assert!(matches!(r.job.await.unwrap().ending, Ending::Held { code: 20, .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_while_waiting_it_starts_on_time_and_is_at_once_suspended() {
    let r = start("DeferralTime = NOW + 10");
    waiting(&r).await;
    r.ctl.suspend(&r.vc);
    r.vc.advance(Duration::from_secs(10));
    // The wait ends on time even though suspended...
    for _ in 0..5_000 {
        if r.ctl.deferred_until().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(r.ctl.deferred_until(), None, "the wait ended at the deferral time");
    // ...but the job does not run until it is continued.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!r.job.is_finished() && !r.sb.ran(), "a suspended job ran");
    r.ctl.resume(&r.vc);
    assert_eq!(r.job.await.unwrap().ending, Ending::Exited(0));
    assert!(r.sb.ran());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_while_waiting_ends_the_job_unrun() {
    let r = start("DeferralTime = NOW + 3600");
    waiting(&r).await;
    r.ctl.hard_kill();
    let res = r.job.await.unwrap();
    assert_eq!(res.ending, Ending::Evicted { vacated: false });
    assert!(!r.sb.ran());
    assert_eq!(r.ctl.deferred_until(), None);
}

#[test]
fn decisions() {
    let ad = |t: &str| parse_ad(t).unwrap();
    assert_eq!(Deferral::decide(&ad("[A = 1]"), 5_000), Deferral::Now);
    assert_eq!(Deferral::decide(&ad("[DeferralTime = 6]"), 5_000), Deferral::Wait(6));
    assert_eq!(Deferral::decide(&ad("[DeferralTime = 5]"), 5_999), Deferral::Now);
    assert_eq!(
        Deferral::decide(&ad("[DeferralTime = 3]"), 5_000),
        Deferral::Missed { time: 3, late: 2, window: 0 }
    );
    assert!(matches!(Deferral::decide(&ad("[DeferralTime = \"x\"]"), 0), Deferral::Invalid(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_cron_window_360_starts_a_job_up_to_six_minutes_late() {
    let r = start("DeferralTime = NOW - 359; DeferralWindow = 360");
    assert_eq!(r.job.await.unwrap().ending, Ending::Exited(0));
    let r = start("DeferralTime = NOW - 361; DeferralWindow = 360");
    assert!(matches!(r.job.await.unwrap().ending, Ending::Held { code: 20, .. }));
}

/// `Control::begun` (which tells the pool when a deferred job's wait is
/// over) completes only once the starter has looked: a fresh control has not
/// begun, a waiting job has not, and a job that started (or never had to
/// wait) has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn begun_completes_only_once_the_starter_has_decided() {
    let not_yet = |ctl: Arc<Control>| async move {
        tokio::time::timeout(Duration::ZERO, ctl.begun()).await.is_err()
    };
    assert!(not_yet(Control::new()).await, "a job the starter has not seen has not begun");
    let r = start("DeferralTime = NOW + 30");
    waiting(&r).await;
    assert!(not_yet(r.ctl.clone()).await, "a waiting job has not begun");
    r.vc.advance(Duration::from_secs(30));
    tokio::time::timeout(Duration::from_secs(60), r.ctl.begun()).await.expect("begun at its time");
    assert_eq!(r.job.await.unwrap().ending, Ending::Exited(0));
    let r = start("");
    assert_eq!(r.job.await.unwrap().ending, Ending::Exited(0));
    assert!(!not_yet(r.ctl.clone()).await, "a job that never waited has begun");
}
