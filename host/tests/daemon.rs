//! The host daemon's core with real starters (the samples, built by `cargo
//! xtask samples`) on a virtual clock: policy time passes when the test says
//! so; only a starter's real ending is awaited, with a bound.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use andes_host::andes_startd::{
    Action, Activity, CheckpointKind, ClaimRequest, Event, MachineInfo, Measurements, ShutdownKind,
    State, VacateKind,
};
use andes_host::daemon::{Command, Daemon, DaemonConfig, ExitReport, RunKind, base_config};
use andes_starter::{Clock, Ending, Host, HostConfig, VirtualClock};
use classad::{ClassAd, Expr, Value, parse_ad};

static HOST: LazyLock<Arc<Host>> = LazyLock::new(|| {
    Arc::new(
        Host::new(HostConfig {
            max_instances: 16,
            max_memory_bytes: 1 << 30,
            ..Default::default()
        })
        .expect("host"),
    )
});

fn sample_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../samples/target/wasm32-wasip1/release")
        .join(format!("{name}.wasm"))
}

fn sample(name: &str) -> Arc<[u8]> {
    let p = sample_path(name);
    std::fs::read(&p)
        .unwrap_or_else(|e| {
            panic!("{}: {e}; build the samples first (`cargo xtask samples`)", p.display())
        })
        .into()
}

struct Fixture {
    d: Daemon,
    vc: Arc<VirtualClock>,
    execute: tempfile::TempDir,
}

/// A one-slot daemon on a virtual clock, on an idle machine (keyboard
/// untouched for an hour, no load but its own jobs').
fn daemon(extra: &str) -> Fixture {
    daemon_in(tempfile::tempdir().unwrap(), extra)
}

/// The same, with `execute` as its EXECUTE (what an earlier daemon left).
fn daemon_in(execute: tempfile::TempDir, extra: &str) -> Fixture {
    let mut cfg = base_config(Vec::<(String, String)>::new());
    cfg.load_str(extra, "test.config").unwrap();
    let info = MachineInfo { cpus: 1, memory_mb: 2048, ..MachineInfo::default() };
    let config = DaemonConfig::from_config(&cfg, execute.path().to_path_buf(), info).unwrap();
    let vc = VirtualClock::new();
    let clock: Arc<dyn Clock> = Arc::new(vc.clone());
    let measurer = Box::new(|loads: Vec<f64>, _| Measurements {
        load_avg: loads.iter().sum(),
        keyboard_idle: 3600,
        console_idle: 3600,
        condor_load: loads,
        ..Measurements::default()
    });
    let mut d = Daemon::new(config, HOST.clone(), clock, measurer).unwrap();
    d.measure();
    d.tick();
    Fixture { d, vc, execute }
}

impl Fixture {
    fn state(&self) -> (State, Activity) {
        let s = self.d.startd().slot(1).unwrap();
        (s.state(), s.activity())
    }

    fn advance(&mut self, secs: u64) {
        self.vc.advance(Duration::from_secs(secs));
        self.d.tick();
    }

    async fn exit(&mut self) -> ExitReport {
        tokio::time::timeout(Duration::from_secs(120), self.d.next_exit())
            .await
            .expect("the starter did not end within 120 s")
    }

    /// Claims slot 1 for `job` and activates the claim with `module`.
    fn run_job(&mut self, module: &str, job: &str) -> Vec<Action> {
        let ad = parse_ad(job).unwrap();
        let acts = self.d.feed(Event::ClaimRequested {
            slot: 1,
            claim: ClaimRequest {
                claim_id: "c1".into(),
                client_machine: "schedd.test".into(),
                owner: "alice".into(),
                user: None,
                ad: ad.clone(),
            },
        });
        assert!(acts.iter().any(|a| matches!(a, Action::ClaimAccepted { .. })), "{acts:?}");
        let acts = self.d.activate(1, "c1".into(), ad, sample(module));
        assert_eq!(self.state(), (State::Claimed, Activity::Busy), "{acts:?}");
        assert_eq!(self.d.running(1), Some(RunKind::Job));
        acts
    }

    fn published_state(&self) -> String {
        self.d.ads()[0].eval_attr("State").as_str().unwrap_or_default().to_string()
    }

    /// Sandboxes in EXECUTE (not the daemon's own files: its quarantine's
    /// `.startd.*`).
    fn sandboxes(&self) -> usize {
        std::fs::read_dir(self.execute.path())
            .unwrap()
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with(".startd."))
            .count()
    }

    /// Files left under EXECUTE by jobs that ended (an emptied sandbox kept
    /// for the slot's next job holds none; the daemon's own files do not
    /// count).
    fn leftovers(&self) -> usize {
        fn count(dir: &std::path::Path) -> usize {
            std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with(".startd."))
                .map(|e| if e.path().is_dir() { count(&e.path()) } else { 1 })
                .sum()
        }
        count(self.execute.path())
    }
}

fn numbers(acts: &[Action]) -> Vec<u8> {
    acts.iter()
        .filter_map(|a| match a {
            Action::Transition { number, .. } => Some(*number),
            _ => None,
        })
        .collect()
}

const VANILLA: &str = r#"[ ClusterId = 1; ProcId = 0; JobUniverse = 5; Owner = "alice" ]"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_runs_while_idle_and_owner_activity_evicts_it() {
    let cfg = format!(
        "{}\nBACKFILL_JOBS = spin\nBACKFILL_JOB_spin = [ Cmd = \"{}\" ]\n",
        andes_host::andes_startd::policy::BACKFILL_EXAMPLE,
        sample_path("spin").display()
    );
    let mut f = daemon(&cfg);
    let log = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    f.d.set_logger(Box::new({
        let log = log.clone();
        move |line| log.lock().unwrap().push(line.to_string())
    }));
    assert_eq!(f.state(), (State::Unclaimed, Activity::Idle));
    // START_BACKFILL waits two minutes in Unclaimed.
    f.advance(60);
    assert_eq!(f.state(), (State::Unclaimed, Activity::Idle));
    assert_eq!(f.d.running(1), None);
    f.advance(90);
    assert_eq!(f.state(), (State::Backfill, Activity::Busy));
    assert_eq!(f.d.running(1), Some(RunKind::Backfill));
    assert_eq!(f.published_state(), "Backfill");
    assert_eq!(
        log.lock().unwrap().as_slice(),
        [
            "slot 1: Unclaimed/Idle -> Backfill/Idle (7)",
            "slot 1: Backfill/Idle -> Backfill/Busy (26)"
        ]
    );
    let sandbox = f.d.sandbox(1).unwrap().to_path_buf();
    assert!(sandbox.starts_with(f.execute.path()) && sandbox.is_dir());
    assert_eq!(f.sandboxes(), 1);
    // The owner touches the keyboard: EVICT_BACKFILL ($(MachineBusy)).
    let msg =
        f.d.command(Command::SetAttr {
            slot: None,
            name: "KeyboardIdle".into(),
            value: Some(Expr::from(Value::Int(0))),
        })
        .unwrap();
    assert!(msg.contains("KeyboardIdle"), "{msg}");
    assert_eq!(f.state(), (State::Backfill, Activity::Killing));
    let r = f.exit().await;
    assert_eq!(r.kind, RunKind::Backfill);
    assert_eq!(r.ending, Some(Ending::Evicted { vacated: false }));
    assert_eq!(f.state(), (State::Owner, Activity::Idle));
    assert_eq!(f.published_state(), "Owner");
    assert!(
        !sandbox.exists() || std::fs::read_dir(&sandbox).unwrap().next().is_none(),
        "the sandbox was not emptied"
    );
    assert_eq!(f.leftovers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slots_next_job_gets_its_sandbox_emptied() {
    let mut f = daemon("");
    f.run_job("hello", r#"[ JobUniverse = 5; Out = "out.txt" ]"#);
    let first = f.d.sandbox(1).unwrap().to_path_buf();
    assert_eq!(f.exit().await.ending, Some(Ending::Exited(0)));
    // hello wrote out.txt and hello.out; nothing of them is left.
    assert_eq!(f.leftovers(), 0);
    assert!(first.is_dir(), "the emptied sandbox is kept for the next job");
    f.d.feed(Event::ClaimReleased { slot: 1, claim_id: "c1".into() });
    f.d.tick();
    f.run_job("hello", r#"[ JobUniverse = 5; Out = "again.txt" ]"#);
    assert_eq!(f.d.sandbox(1), Some(first.as_path()));
    assert_eq!(f.exit().await.ending, Some(Ending::Exited(0)));
    assert_eq!(f.leftovers(), 0);
    drop(f);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftover_sandboxes_are_removed_at_startup() {
    let execute = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(execute.path().join("dir_1_7/sub")).unwrap();
    std::fs::write(execute.path().join("dir_1_7/sub/out.txt"), "x").unwrap();
    std::fs::write(execute.path().join("keep.txt"), "x").unwrap();
    let cfg = base_config(Vec::<(String, String)>::new());
    let config =
        DaemonConfig::from_config(&cfg, execute.path().to_path_buf(), MachineInfo::default())
            .unwrap();
    let clock: Arc<dyn Clock> = Arc::new(VirtualClock::new());
    let d = Daemon::new(config, HOST.clone(), clock, Box::new(|_, _| Measurements::default()));
    assert!(d.is_ok());
    assert!(!execute.path().join("dir_1_7").exists());
    assert!(execute.path().join("keep.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_backfill_job_is_a_configuration_error() {
    let mut cfg = base_config(Vec::<(String, String)>::new());
    cfg.load_str("ENABLE_BACKFILL = True\nBACKFILL_JOBS = nothere\n", "site.config").unwrap();
    let e = DaemonConfig::from_config(&cfg, "/tmp".into(), MachineInfo::default()).unwrap_err();
    assert!(e.to_string().contains("BACKFILL_JOB_nothere is not set"), "{e}");
    cfg.load_str("BACKFILL_JOB_nothere = [ Cmd = \"/no/such/module.wasm\" ]\n", "site.config")
        .unwrap();
    let e = DaemonConfig::from_config(&cfg, "/tmp".into(), MachineInfo::default()).unwrap_err();
    assert!(e.to_string().starts_with("site.config, line 1: BACKFILL_JOB_nothere"), "{e}");
    assert!(e.to_string().contains("/no/such/module.wasm"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacate_fast_hard_kills_a_claimed_job() {
    let mut f = daemon("");
    f.run_job("spin", VANILLA);
    assert_eq!(f.sandboxes(), 1);
    f.d.command(Command::Vacate { slot: Some(1), kind: VacateKind::Fast }).unwrap();
    assert_eq!(f.state(), (State::Preempting, Activity::Killing));
    assert!(!f.d.control(1).unwrap().vacate_requested(), "a fast vacate sent a vacate notice");
    let r = f.exit().await;
    assert_eq!(r.ending, Some(Ending::Evicted { vacated: false }));
    assert_eq!(f.state(), (State::Owner, Activity::Idle));
    assert_eq!(f.leftovers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_vacate_gives_the_job_its_notice() {
    let mut f = daemon("");
    let job = r#"[ ClusterId = 1; ProcId = 0; JobUniverse = 5; Arguments = "4000000000" ]"#;
    f.run_job("vacate", job);
    let acts = f.d.feed(Event::Vacate { slot: None, kind: VacateKind::Graceful });
    // Retiring (13), no retirement time: Vacating (18), the notice.
    assert_eq!(numbers(&acts), vec![13, 18], "{acts:?}");
    assert!(acts.contains(&Action::SoftKill { slot: 1, grace_secs: 600 }), "{acts:?}");
    assert_eq!(f.state(), (State::Preempting, Activity::Vacating));
    // The sample saves its partial sum and exits with 85.
    let r = f.exit().await;
    assert_eq!(r.ending, Some(Ending::Exited(85)));
    assert_eq!(f.state(), (State::Owner, Activity::Idle));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooperative_job_is_asked_to_checkpoint_and_the_vacate_goes_on() {
    let mut f = daemon("");
    f.run_job("spin", r#"[ JobUniverse = 5; WasmCheckpoint = "cooperative" ]"#);
    let acts = f.d.feed(Event::Vacate { slot: Some(1), kind: VacateKind::Graceful });
    let ckpt = acts
        .iter()
        .position(|a| *a == Action::Checkpoint { slot: 1, kind: CheckpointKind::Vacate })
        .expect("no checkpoint asked");
    let kill = acts.iter().position(|a| matches!(a, Action::SoftKill { .. })).expect("no notice");
    assert!(ckpt < kill);
    let ctl = f.d.control(1).unwrap();
    assert!(ctl.vacate_requested());
    // The job is asked to save (its `checkpoint-requested`).
    assert!(ctl.checkpoint_requested());
    f.d.command(Command::Vacate { slot: Some(1), kind: VacateKind::Fast }).unwrap();
    assert_eq!(f.exit().await.ending, Some(Ending::Evicted { vacated: true }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_activity_suspends_a_job_then_preempts_it() {
    let mut f = daemon("");
    // `deaf` hears the notice and ignores it (a plain job would end at it).
    f.run_job("deaf", VANILLA);
    let keyboard = |f: &mut Fixture| {
        f.d.command(Command::SetAttr {
            slot: None,
            name: "KeyboardIdle".into(),
            value: Some(Expr::from(Value::Int(0))),
        })
        .unwrap();
    };
    keyboard(&mut f);
    // WANT_SUSPEND (a vanilla job) and SUSPEND (KeyboardBusy): 14.
    assert_eq!(f.state(), (State::Claimed, Activity::Suspended));
    let ctl = f.d.control(1).unwrap();
    assert!(ctl.is_suspended());
    // Still busy ten minutes later: PREEMPT after MaxSuspendTime.
    f.vc.advance(Duration::from_secs(9 * 60));
    keyboard(&mut f);
    assert_eq!(f.state(), (State::Claimed, Activity::Suspended));
    f.vc.advance(Duration::from_secs(2 * 60));
    keyboard(&mut f);
    assert_eq!(f.state(), (State::Preempting, Activity::Vacating));
    assert!(!ctl.is_suspended() && ctl.vacate_requested() && !ctl.is_killed());
    // KILL: vacating longer than MaxVacateTime.
    f.advance(11 * 60);
    assert_eq!(f.state(), (State::Preempting, Activity::Killing));
    assert!(ctl.is_killed());
    assert_eq!(f.exit().await.ending, Some(Ending::Evicted { vacated: true }));
    assert_eq!(f.state(), (State::Owner, Activity::Idle));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_return_is_measured_within_a_poll_not_an_update_interval() {
    // The startd polls every POLLING_INTERVAL (5 s) while a slot is in use
    // and measures the machine before each poll; an Owner or Unclaimed
    // machine is left alone until UPDATE_INTERVAL (the spec, 3.5.x).
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
    let idle = Arc::new(AtomicI64::new(3600));
    let calls = Arc::new(AtomicUsize::new(0));
    let resources = Arc::new(AtomicUsize::new(0));
    let execute = tempfile::tempdir().unwrap();
    let mut cfg = base_config(Vec::<(String, String)>::new());
    cfg.load_str("UPDATE_INTERVAL = 300\nPOLLING_INTERVAL = 5\n", "test.config").unwrap();
    let info = MachineInfo { cpus: 1, memory_mb: 2048, ..MachineInfo::default() };
    let config = DaemonConfig::from_config(&cfg, execute.path().to_path_buf(), info).unwrap();
    let vc = VirtualClock::new();
    let clock: Arc<dyn Clock> = Arc::new(vc.clone());
    let measurer = Box::new({
        let (idle, calls, resources) = (idle.clone(), calls.clone(), resources.clone());
        move |loads: Vec<f64>, full: bool| {
            calls.fetch_add(1, Ordering::SeqCst);
            resources.fetch_add(usize::from(full), Ordering::SeqCst);
            let k = idle.load(Ordering::SeqCst);
            Measurements {
                load_avg: loads.iter().sum(),
                keyboard_idle: k,
                console_idle: k,
                condor_load: loads,
                ..Measurements::default()
            }
        }
    });
    let d = Daemon::new(config, HOST.clone(), clock, measurer).unwrap();
    let mut f = Fixture { d, vc, execute };
    f.d.measure();
    f.d.tick();
    assert_eq!(f.state(), (State::Unclaimed, Activity::Idle));
    // Unclaimed: no measurement between updates.
    let before = calls.load(Ordering::SeqCst);
    for _ in 0..10 {
        f.advance(5);
    }
    assert_eq!(calls.load(Ordering::SeqCst), before, "an idle machine measured every poll");
    f.run_job("spin", VANILLA);
    let full = resources.load(Ordering::SeqCst);
    f.advance(5);
    assert_eq!(f.state(), (State::Claimed, Activity::Busy));
    // The owner sits down: the next poll sees it and suspends the job
    // (WANT_SUSPEND for a vanilla job, SUSPEND on KeyboardBusy).
    idle.store(0, Ordering::SeqCst);
    f.advance(5);
    assert_eq!(f.state(), (State::Claimed, Activity::Suspended));
    // The polls measured load and keyboard only; disk and swap, which cost
    // a look at the file systems, wait for UPDATE_INTERVAL.
    assert_eq!(resources.load(Ordering::SeqCst), full, "a poll measured the disk");
    f.d.command(Command::Vacate { slot: None, kind: VacateKind::Fast }).unwrap();
    f.exit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_fast_kills_and_completes() {
    let mut f = daemon("");
    f.run_job("spin", VANILLA);
    f.d.command(Command::Off(ShutdownKind::Fast)).unwrap();
    assert_eq!(f.state(), (State::Preempting, Activity::Killing));
    assert!(!f.d.shutdown_complete());
    assert_eq!(f.exit().await.ending, Some(Ending::Evicted { vacated: false }));
    assert_eq!(f.state(), (State::Owner, Activity::Idle));
    assert!(f.d.shutdown_complete() && f.d.finished());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_graceful_vacates_then_kills_after_max_vacate_time() {
    let mut f = daemon("");
    // `deaf` hears the notice and ignores it (a plain job would end at it).
    f.run_job("deaf", VANILLA);
    f.d.command(Command::Off(ShutdownKind::Graceful)).unwrap();
    assert_eq!(f.state(), (State::Preempting, Activity::Vacating));
    let ctl = f.d.control(1).unwrap();
    assert!(ctl.vacate_requested() && !ctl.is_killed());
    // deaf ignores the notice; no new claim is taken meanwhile.
    f.advance(5 * 60);
    assert_eq!(f.state(), (State::Preempting, Activity::Vacating));
    assert!(!f.d.shutdown_complete());
    f.advance(6 * 60);
    assert_eq!(f.state(), (State::Preempting, Activity::Killing));
    assert_eq!(f.exit().await.ending, Some(Ending::Evicted { vacated: true }));
    assert!(f.d.finished());
    assert_eq!(f.state(), (State::Owner, Activity::Idle));
}

/// `andes pool down` and SIGTERM (SHUTDOWN_GRACEFUL_TIMEOUT): a graceful
/// shutdown bounded in time kills what still runs SHUTDOWN_REPORT_MARGIN
/// before its time is out, a job that ignores its vacate notice too
/// (MACHINE_MAX_VACATE_TIME, 10 minutes here, would have let it run on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_graceful_shutdown_kills_what_still_runs_before_its_time_is_out() {
    use andes_host::daemon::SHUTDOWN_REPORT_MARGIN;
    assert_eq!(SHUTDOWN_REPORT_MARGIN, Duration::from_secs(1));
    let mut f = daemon("");
    f.run_job("deaf", VANILLA);
    f.d.command(Command::OffWithin(Duration::from_secs(5))).unwrap();
    assert_eq!(f.state(), (State::Preempting, Activity::Vacating));
    let ctl = f.d.control(1).unwrap();
    assert!(ctl.vacate_requested() && !ctl.is_killed());
    f.advance(3);
    assert_eq!(f.state(), (State::Preempting, Activity::Vacating));
    assert!(!ctl.is_killed());
    f.advance(1);
    assert_eq!(f.state(), (State::Preempting, Activity::Killing));
    assert!(ctl.is_killed());
    assert_eq!(f.exit().await.ending, Some(Ending::Evicted { vacated: true }));
    assert!(f.d.finished());
    assert_eq!(f.state(), (State::Owner, Activity::Idle));
}

/// A bounded graceful shutdown waits for the shadows owed their jobs' ends
/// while its time lasts, not FINAL_REPORT_KEEP (two minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_graceful_shutdown_waits_for_shadows_only_while_its_time_lasts() {
    let mut f = daemon("");
    let (id, _rx) = offer(&mut f);
    f.d.pool(claim_request(&id, "one")).unwrap();
    activate_spin(&mut f, &id);
    f.d.command(Command::OffWithin(Duration::from_secs(5))).unwrap();
    // `spin` cannot hear the notice: it is vacated at once.
    assert_eq!(f.exit().await.ending, Some(Ending::Evicted { vacated: true }));
    assert!(f.d.finished());
    assert!(f.d.owes_shadows(), "its shadow has not heard how it ended");
    f.advance(4);
    assert!(f.d.owes_shadows());
    f.advance(1);
    assert!(!f.d.owes_shadows(), "the host waited for a shadow past its time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_peaceful_lets_jobs_run_to_their_end() {
    // A job that never ends is left alone however long it takes.
    let mut f = daemon("");
    f.run_job("spin", VANILLA);
    f.d.command(Command::Off(ShutdownKind::Peaceful)).unwrap();
    assert_eq!(f.state(), (State::Claimed, Activity::Retiring));
    f.advance(30 * 86_400);
    assert_eq!(f.state(), (State::Claimed, Activity::Retiring));
    let ctl = f.d.control(1).unwrap();
    assert!(!ctl.vacate_requested() && !ctl.is_killed());
    assert!(!f.d.shutdown_complete());
    f.d.command(Command::Vacate { slot: None, kind: VacateKind::Fast }).unwrap();
    f.exit().await;
    assert!(f.d.finished());

    // A job that ends: then the shutdown completes.
    let mut f = daemon("");
    f.run_job("hello", r#"[ JobUniverse = 5; Out = "out.txt" ]"#);
    f.d.command(Command::Off(ShutdownKind::Peaceful)).unwrap();
    assert_eq!(f.state(), (State::Claimed, Activity::Retiring));
    assert!(!f.d.shutdown_complete());
    assert_eq!(f.exit().await.ending, Some(Ending::Exited(0)));
    assert_eq!(f.state(), (State::Owner, Activity::Idle));
    assert!(f.d.finished());
    assert_eq!(f.leftovers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_commands_say_why() {
    let mut f = daemon("");
    let e = f.d.command(Command::Vacate { slot: Some(7), kind: VacateKind::Fast }).unwrap_err();
    assert!(e.contains("no slot 7"), "{e}");
    let e =
        f.d.command(Command::SetAttr {
            slot: None,
            name: "State".into(),
            value: Some(Expr::from(Value::Int(1))),
        })
        .unwrap_err();
    assert!(e.contains("startd manages it"), "{e}");
    // A job activated without its module fails to start, cleanly.
    let ad: ClassAd = parse_ad(VANILLA).unwrap();
    f.d.feed(Event::ClaimRequested {
        slot: 1,
        claim: ClaimRequest {
            claim_id: "c9".into(),
            client_machine: "s".into(),
            owner: "alice".into(),
            user: None,
            ad: ad.clone(),
        },
    });
    let acts = f.d.feed(Event::ClaimActivated { slot: 1, claim_id: "c9".into(), job: ad });
    assert_eq!(numbers(&acts), vec![11, 12], "{acts:?}");
    assert_eq!(f.state(), (State::Claimed, Activity::Idle));
    assert_eq!(f.d.running(1), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn benchmarks_measure_mips_and_kflops() {
    let mut f = daemon("RunBenchmarks = (LastBenchmark == 0)\n");
    assert_eq!(f.state(), (State::Unclaimed, Activity::Idle));
    f.d.tick();
    assert_eq!(f.state(), (State::Unclaimed, Activity::Benchmarking));
    let r = f.exit().await;
    assert_eq!(r.kind, RunKind::Benchmark);
    assert_eq!(f.state(), (State::Unclaimed, Activity::Idle));
    let ad = &f.d.ads()[0];
    let mips = ad.eval_attr("Mips").as_int().unwrap();
    let kflops = ad.eval_attr("KFlops").as_int().unwrap();
    eprintln!("Mips = {mips}, KFlops = {kflops}");
    assert!(mips > 0 && kflops > 0, "Mips {mips}, KFlops {kflops}");
    assert_eq!(ad.eval_attr("LastBenchmark").as_int(), Some(f.d.now()));
    // Benchmarked once: not again.
    f.d.tick();
    assert_eq!(f.state(), (State::Unclaimed, Activity::Idle));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_asking_for_more_than_its_slot_gets_the_slots_memory() {
    // The slot has 96 MiB; the job's ad (say, edited after its match) asks
    // for 4096: the cap is the smaller.
    let mut f = daemon("MEMORY = 96");
    f.run_job("membomb", r#"[ JobUniverse = 5; Out = "out.txt"; RequestMemory = 4096 ]"#);
    let sandbox = f.d.sandbox(1).unwrap().to_path_buf();
    let r = f.exit().await;
    match r.ending {
        Some(Ending::Held { code, reason, .. }) => {
            assert_eq!(code, andes_starter::starter::HOLD_MEMORY, "{reason}");
            assert!(reason.contains("RequestMemory allows 96.0 MiB"), "{reason}");
        }
        other => panic!("{other:?}: {:?}", std::fs::read_to_string(sandbox.join("out.txt"))),
    }
}

/// Joins the fixture's daemon to a pool; returns the slot's current offer
/// (the claim id the negotiator would hand out) and the ad channel.
fn offer(
    f: &mut Fixture,
) -> (String, tokio::sync::mpsc::UnboundedReceiver<andes_host::daemon::PublishedAd>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    f.d.join_pool("127.0.0.1:1".into(), tx);
    let mut id = None;
    while let Ok(p) = rx.try_recv() {
        if let Value::Str(c) = p.private.eval_attr("ClaimId") {
            id = Some(c.to_string());
        }
    }
    (id.expect("an offer"), rx)
}

fn claim_request(id: &str, incarnation: &str) -> andes_host::pool::PoolRequest {
    andes_host::pool::PoolRequest::Claim {
        caller: "schedd".into(),
        req: andes_protocol::pool::ClaimRequest {
            claim_id: id.into(),
            owner: "alice".into(),
            user: None,
            client_machine: "schedd@test".into(),
            ad: VANILLA.into(),
            incarnation: Some(incarnation.into()),
            alive_interval: Some(5),
        },
    }
}

fn alive(incarnation: &str, claims: &[&str]) -> andes_host::pool::PoolRequest {
    andes_host::pool::PoolRequest::Alive {
        caller: "schedd".into(),
        req: andes_protocol::pool::AliveRequest {
            incarnation: incarnation.into(),
            claims: claims.iter().map(|c| c.to_string()).collect(),
        },
    }
}

/// The schedd activates claim `id` with `spin`, as a shadow does (its module
/// first, then the job on a 40-minute lease).
fn activate_spin(f: &mut Fixture, id: &str) {
    let module = sample("spin");
    let digest = format!("sha256:{}", hex::encode(andes_starter::engine::module_digest(&module)));
    f.d.pool(andes_host::pool::PoolRequest::PutModule(digest.clone(), module)).unwrap();
    activate_one(f, id, digest, VANILLA, Vec::new());
}

/// The schedd activates claim `id` with `job` alone, of the module stored
/// as `digest`, with `inputs`, on a 40-minute lease.
fn activate_one(
    f: &mut Fixture,
    id: &str,
    digest: String,
    job: &str,
    inputs: Vec<andes_protocol::pool::FileData>,
) {
    let req = andes_protocol::pool::ActivateRequest {
        claim_id: id.to_string(),
        job: job.into(),
        module_digest: digest,
        inputs,
        lease_secs: 2400,
        wait_ms: 0,
        saved_state: None,
        snapshot: None,
        more: Vec::new(),
        append: false,
        acked: 0,
        reply_at_start: false,
    };
    f.d.pool(andes_host::pool::PoolRequest::Activate {
        caller: "schedd".into(),
        req: Box::new(req),
        ads: Box::new((parse_ad(job).unwrap(), Vec::new())),
    })
    .unwrap();
}

/// Joins the fixture's daemon to a pool, has its slot claimed by the
/// schedd (incarnation "one") and stores sample `module` there, as a shadow
/// does: the claim id, the module's digest and the ad channel.
fn claimed_with(
    f: &mut Fixture,
    module: &str,
) -> (String, String, tokio::sync::mpsc::UnboundedReceiver<andes_host::daemon::PublishedAd>) {
    let (id, rx) = offer(f);
    f.d.pool(claim_request(&id, "one")).unwrap();
    let module = sample(module);
    let digest = format!("sha256:{}", hex::encode(andes_starter::engine::module_digest(&module)));
    f.d.pool(andes_host::pool::PoolRequest::PutModule(digest.clone(), module)).unwrap();
    (id, digest, rx)
}

/// The slot's RemoteOwner, from the ads published since.
fn owner(rx: &mut tokio::sync::mpsc::UnboundedReceiver<andes_host::daemon::PublishedAd>) -> String {
    let mut who = String::new();
    while let Ok(p) = rx.try_recv() {
        if let Value::Str(o) = p.ad.eval_attr("RemoteOwner") {
            who = o.to_string();
        }
    }
    who
}

/// The slot's current offer, from the ads published since.
fn next_offer(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<andes_host::daemon::PublishedAd>,
) -> String {
    let mut id = None;
    while let Ok(p) = rx.try_recv() {
        if let Value::Str(c) = p.private.eval_attr("ClaimId") {
            id = Some(c.to_string());
        }
    }
    id.expect("a new offer")
}

/// A claim on a claimed slot preempts only when the slot's RANK strictly
/// prefers it, or when the negotiator said it matched by user priority: not
/// on the word of whoever presents the offer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_slot_is_preempted_only_by_a_better_rank_or_the_negotiators_priority() {
    use andes_host::pool::{PoolReply, PoolRequest};
    let mut f = daemon("RANK = (TARGET.Owner == \"carol\") * 10");
    let (first, mut rx) = offer(&mut f);
    f.d.pool(claim_request(&first, "one")).unwrap();
    assert_eq!(f.state(), (State::Claimed, Activity::Idle));
    let claim_by = |id: &str, owner: &str| PoolRequest::Claim {
        caller: "schedd".into(),
        req: andes_protocol::pool::ClaimRequest {
            claim_id: id.into(),
            owner: owner.into(),
            user: None,
            client_machine: "schedd@test".into(),
            ad: format!("[ ClusterId = 2; ProcId = 0; JobUniverse = 5; Owner = \"{owner}\" ]"),
            incarnation: Some("one".into()),
            alive_interval: Some(5),
        },
    };
    let accepted = |r: PoolReply| match r {
        PoolReply::Claim(c) => (c.accepted, c.reason.unwrap_or_default()),
        other => panic!("{other:?}"),
    };
    // Bob's job: RANK 0, as the current claim's. Refused, and the slot keeps its claim.
    let second = next_offer(&mut rx);
    let (ok, why) = accepted(f.d.pool(claim_by(&second, "bob")).unwrap());
    assert!(!ok && why.contains("RANK"), "{why}");
    assert_eq!(f.state(), (State::Claimed, Activity::Idle));
    // The negotiator says it matched bob by priority: now it preempts.
    f.d.pool(PoolRequest::Match(andes_protocol::pool::MatchNotice {
        slot: "slot1@test".into(),
        claim_id: second.clone(),
        priority: true,
    }))
    .ok();
    let (ok, why) = accepted(f.d.pool(claim_by(&second, "bob")).unwrap());
    assert!(ok, "{why}");
    assert_eq!(owner(&mut rx), "bob", "bob's claim did not preempt");

    // Carol's job: RANK 10 > 0, preempts with no word from the negotiator.
    let mut f = daemon("RANK = (TARGET.Owner == \"carol\") * 10");
    let (first, mut rx) = offer(&mut f);
    f.d.pool(claim_request(&first, "one")).unwrap();
    let (ok, why) = accepted(f.d.pool(claim_by(&next_offer(&mut rx), "carol")).unwrap());
    assert!(ok, "{why}");
    assert_eq!(owner(&mut rx), "carol", "carol's claim did not preempt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_nobody_uses_returns_to_unclaimed_within_its_lease() {
    let mut f = daemon("MAX_CLAIM_ALIVES_MISSED = 3");
    let (id, _rx) = offer(&mut f);
    f.d.pool(claim_request(&id, "one")).unwrap();
    assert_eq!(f.state(), (State::Claimed, Activity::Idle));
    // A lease of 3 keep-alives of 5 s: a keep-alive at 10 s renews it.
    f.advance(10);
    assert_eq!(f.state(), (State::Claimed, Activity::Idle));
    f.d.pool(alive("one", &[&id])).unwrap();
    f.advance(10);
    assert_eq!(f.state(), (State::Claimed, Activity::Idle));
    // No keep-alive for 15 s more: the claim is gone, the slot free again.
    f.advance(6);
    assert_ne!(f.state().0, State::Claimed, "a claim nobody holds stayed claimed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_schedd_frees_its_idle_claims_at_once_and_keeps_its_running_jobs() {
    let mut f = daemon("");
    let (id, _rx) = offer(&mut f);
    f.d.pool(claim_request(&id, "one")).unwrap();
    assert_eq!(f.state(), (State::Claimed, Activity::Idle));
    // The schedd restarts: its new incarnation frees the unused claim at once.
    let r = f.d.pool(alive("two", &[])).unwrap();
    assert!(matches!(r, andes_host::pool::PoolReply::Alive(ref a) if a.released == 1));
    assert_ne!(f.state().0, State::Claimed, "the earlier run's idle claim was kept");
    // A claim running a job is kept for the new run to follow again, and
    // lives on its job lease, not its keep-alive lease.
    let mut f = daemon("");
    let (id, _rx) = offer(&mut f);
    f.d.pool(claim_request(&id, "one")).unwrap();
    activate_spin(&mut f, &id);
    assert_eq!(f.state(), (State::Claimed, Activity::Busy));
    let r = f.d.pool(alive("two", &[])).unwrap();
    assert!(matches!(r, andes_host::pool::PoolReply::Alive(ref a) if a.released == 0));
    assert_eq!(f.state(), (State::Claimed, Activity::Busy));
    f.advance(60);
    assert_eq!(f.state(), (State::Claimed, Activity::Busy), "the job lease holds it");
    f.d.command(Command::Vacate { slot: None, kind: VacateKind::Fast }).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_its_schedd_released_owes_nobody_its_jobs_end() {
    // `andes rm` of a running job: the shadow releases the claim and reads
    // nothing more of it. A host shutting down then must not stay up
    // FINAL_REPORT_KEEP for a shadow that never comes (`andes pool down`
    // right after an `rm` lingered two minutes so).
    let mut f = daemon("");
    let (id, _rx) = offer(&mut f);
    f.d.pool(claim_request(&id, "one")).unwrap();
    activate_spin(&mut f, &id);
    assert_eq!(f.state(), (State::Claimed, Activity::Busy));
    f.d.pool(andes_host::pool::PoolRequest::Release { caller: "schedd".into(), claim_id: id })
        .unwrap();
    f.exit().await;
    f.d.command(Command::Off(ShutdownKind::Graceful)).unwrap();
    assert!(f.d.finished());
    assert!(!f.d.owes_shadows(), "the host waits for a shadow that released its claim");
}

/// A schedd sends a claim's next batch of short jobs while the last one
/// runs: the batch waits behind it on the host, and the ends of the jobs
/// before it stay in the claim's report until the schedd says it committed
/// them (`acked`), then only those are forgotten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_appended_batch_waits_its_turn_and_ends_stay_until_acknowledged() {
    use andes_host::pool::{PoolReply, PoolRequest};
    use andes_protocol::pool::ActivateRequest;
    let mut f = daemon("");
    let (id, digest, _rx) = claimed_with(&mut f, "exit_code");
    let ad = |p: u32| {
        format!(
            r#"[ ClusterId = 1; ProcId = {p}; JobUniverse = 5; Owner = "alice"; GlobalJobId = "s#1.{p}#1"; Arguments = "0" ]"#
        )
    };
    let activate = |jobs: &[u32], append: bool, acked: u64| {
        let queued = |p: &u32| andes_protocol::pool::QueuedJob {
            job: ad(*p),
            module_digest: digest.clone(),
            inputs: Vec::new(),
            delta: false,
            unset: Vec::new(),
        };
        let req = ActivateRequest {
            claim_id: id.clone(),
            job: ad(jobs[0]),
            module_digest: digest.clone(),
            inputs: Vec::new(),
            lease_secs: 2400,
            wait_ms: 0,
            saved_state: None,
            snapshot: None,
            more: jobs[1..].iter().map(queued).collect(),
            append,
            acked,
            reply_at_start: true,
        };
        let ads = (
            parse_ad(&ad(jobs[0])).unwrap(),
            jobs[1..].iter().map(|p| parse_ad(&ad(*p)).unwrap()).collect(),
        );
        PoolRequest::Activate { caller: "schedd".into(), req: Box::new(req), ads: Box::new(ads) }
    };
    let report = |f: &mut Fixture| match f
        .d
        .pool(PoolRequest::Subscribe {
            caller: "schedd".into(),
            claim_id: id.clone(),
            incarnation: None,
            seen: 0,
        })
        .unwrap()
    {
        PoolReply::Reports(rx, ..) => rx.borrow().clone(),
        other => panic!("{other:?}"),
    };
    let ended = |f: &mut Fixture| -> Vec<(String, u64)> {
        report(f).ended.iter().map(|e| (e.job.clone(), e.version)).collect()
    };
    f.d.pool(activate(&[0], false, 0)).unwrap();
    // Job 0 runs (its end not yet taken in by the daemon): the next batch
    // goes behind it, first job and all.
    f.d.pool(activate(&[1, 2], true, 0)).unwrap();
    assert_eq!(f.state(), (State::Claimed, Activity::Busy));
    assert_eq!(report(&mut f).queued, 2);
    for _ in 0..3 {
        f.exit().await;
    }
    let ends = ended(&mut f);
    let names: Vec<&str> = ends.iter().map(|(j, _)| j.as_str()).collect();
    assert_eq!(names, ["s#1.0#1", "s#1.1#1", "s#1.2#1"], "every end is kept");
    assert_eq!(f.d.owed_ends(), 3, "each end is on disk until acknowledged");
    // Each end says how long the job itself ran (by the daemon's clock,
    // virtual here: no time passes), by which the schedd tells short jobs
    // from long ones.
    let runs: Vec<Option<u64>> = report(&mut f).ended.iter().map(|e| e.run_us).collect();
    assert_eq!(runs, [Some(0); 3]);
    // The schedd committed the ends up to job 1's: those are forgotten with
    // its next batch, which starts at once on the idle claim; job 2's stays.
    f.d.pool(activate(&[3], true, ends[1].1)).unwrap();
    let names: Vec<String> = ended(&mut f).into_iter().map(|(j, _)| j).collect();
    assert_eq!(names, ["s#1.2#1"]);
    assert_eq!(f.d.owed_ends(), 1, "the acknowledged ends are settled on disk too");
    assert_eq!(f.d.running(1), Some(RunKind::Job));
    f.exit().await;
    let names: Vec<String> = ended(&mut f).into_iter().map(|(j, _)| j).collect();
    assert_eq!(names, ["s#1.2#1", "s#1.3#1"]);
    // An activation that starts afresh acknowledges every end before it.
    f.d.pool(activate(&[4], false, 0)).unwrap();
    assert!(ended(&mut f).is_empty());
    assert_eq!(f.d.owed_ends(), 0);
    f.exit().await;
    // A batch appended with a checkpoint is refused: a checkpoint resumes
    // one job, activated alone.
    let mut with_state = activate(&[5], true, 0);
    if let PoolRequest::Activate { req, .. } = &mut with_state {
        req.saved_state =
            Some(andes_protocol::pool::SavedState { seq: 1, data: vec![1], streamed: None });
    }
    let e = f.d.pool(with_state).unwrap_err();
    assert!(
        matches!(e, andes_host::pool::PoolError::BadInput(ref m) if m.contains("checkpoint")),
        "{e:?}"
    );
}

/// The shadow of its schedd's run `incarnation` waits on claim `id` having
/// seen its reports up to version `seen`: the report, sent and marked so as
/// the route does.
fn follow(
    f: &mut Fixture,
    id: &str,
    incarnation: &str,
    seen: u64,
) -> andes_protocol::pool::JobReport {
    let sub = andes_host::pool::PoolRequest::Subscribe {
        caller: "schedd".into(),
        claim_id: id.into(),
        incarnation: Some(incarnation.into()),
        seen,
    };
    match f.d.pool(sub).unwrap() {
        andes_host::pool::PoolReply::Reports(rx, _, _, end_sent, _) => {
            let r = rx.borrow().clone();
            let w = r.to_wire(&andes_starter::SystemClock, 0, 0, None);
            if !w.claim_alive || w.state == andes_protocol::pool::RunState::Exited {
                end_sent.fetch_max(w.version, std::sync::atomic::Ordering::AcqRel);
            }
            w
        }
        other => panic!("{other:?}"),
    }
}

/// A keep-alive, an edit or a withdrawal that comes between a job's end
/// reaching the shadow and the shadow's commit acknowledges nothing (they
/// are not sent after it), nor does a wait that did not see the report that
/// told the end: the end stays owed, on disk too, and when the schedd
/// restarts and its new run frees the claim, its shadow still hears the end. (Found by the fault harness, seed 20261207: a keep-alive in that
/// window let the host drop an end whose output the shadow was fetching.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_shadows_own_next_request_acknowledges_a_jobs_end() {
    use andes_host::pool::{PoolReply, PoolRequest};
    let mut f = daemon("");
    let (id, digest, _rx) = claimed_with(&mut f, "exit_code");
    let job = r#"[ ClusterId = 1; ProcId = 0; JobUniverse = 5; Owner = "alice"; GlobalJobId = "s#1.0#1"; Arguments = "0" ]"#;
    activate_one(&mut f, &id, digest, job, Vec::new());
    f.exit().await;
    assert_eq!(follow(&mut f, &id, "one", 0).ended.len(), 1, "the shadow is told");
    f.d.pool(alive("one", &[&id])).unwrap();
    let edit =
        andes_protocol::pool::EditRequest { claim_id: id.clone(), attrs: "[ A = 1 ]".into() };
    f.d.pool(PoolRequest::Edit { caller: "schedd".into(), req: edit }).unwrap();
    let withdraw =
        andes_protocol::pool::WithdrawRequest { claim_id: id.clone(), cluster: 9, proc: 0 };
    f.d.pool(PoolRequest::Withdraw { caller: "schedd".into(), req: withdraw }).unwrap();
    assert_eq!(f.d.owed_ends(), 1, "the end was taken as acknowledged");
    // The schedd restarts: its new run frees the claim, which runs nothing...
    let r = f.d.pool(alive("two", &[])).unwrap();
    assert!(matches!(r, PoolReply::Alive(ref a) if a.released == 1), "{r:?}");
    // ... and its shadow, reconnecting, hears the end all the same.
    let r = follow(&mut f, &id, "two", 0);
    assert_eq!(r.ended.len(), 1);
    assert!(!r.claim_alive);
    // A wait sent again that did not see that report (its answer lost to a
    // cut) acknowledges nothing; the next one that saw it does.
    follow(&mut f, &id, "two", 0);
    assert_eq!(f.d.owed_ends(), 1, "a wait that had not seen the end acknowledged it");
    follow(&mut f, &id, "two", r.version);
    assert_eq!(f.d.owed_ends(), 0);
}

/// A host killed after a job ended and before its schedd took the end in
/// (its big output still to fetch: the fault harness's job 201.0) offers
/// the end again when it starts, with the output kept: the job is not run a
/// second time. Once the schedd has acknowledged the end, a host started
/// again owes nothing and keeps nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_not_yet_taken_in_outlives_the_host_and_is_offered_after_its_restart() {
    use andes_host::pool::{PoolReply, PoolRequest};
    use andes_protocol::pool::{FileData, OutputRequest};
    let mut f = daemon("");
    let (id, digest, _rx) = claimed_with(&mut f, "copyfile");
    let gid = "s#1.0#1";
    let job = format!(
        r#"[ ClusterId = 1; ProcId = 0; JobUniverse = 5; Owner = "alice"; GlobalJobId = "{gid}"; Arguments = "in out 3" ]"#
    );
    activate_one(&mut f, &id, digest, &job, vec![FileData::inline("in", vec![7u8; 600 << 10])]);
    f.exit().await;
    let output = |f: &mut Fixture| -> Vec<u8> {
        let req = OutputRequest { claim_id: id.clone(), job: gid.into(), name: "out".into() };
        match f.d.pool(PoolRequest::Output { caller: "schedd".into(), req }) {
            Ok(PoolReply::Output(kept, path)) => std::fs::read(kept.dir.join(path)).unwrap(),
            other => panic!("{other:?}"),
        }
    };
    let before = follow(&mut f, &id, "one", 0);
    assert_eq!(before.ended.len(), 1);
    let streamed = before.ended[0].outputs.iter().find(|o| o.name == "out").unwrap();
    assert_eq!(streamed.streamed.as_ref().map(|s| s.size), Some(3 * (600 << 10)));
    // Killed: no destructor runs, nothing is flushed or removed.
    let Fixture { d, execute, .. } = f;
    std::mem::forget(d);
    let mut g = daemon_in(execute, "");
    assert_ne!(g.state().0, State::Claimed, "the claim itself is over");
    assert_eq!(g.d.owed_ends(), 1);
    // The schedd restarted too: its new run follows the claim and hears the end.
    let after = follow(&mut g, &id, "two", 0);
    assert!(!after.claim_alive);
    assert_eq!(after.ended, before.ended, "the end offered is the end the job had");
    assert_eq!(output(&mut g), vec![7u8; 3 * (600 << 10)]);
    // Killed again before the schedd said it took the end in: still owed.
    let Fixture { d, execute, .. } = g;
    std::mem::forget(d);
    let mut h = daemon_in(execute, "");
    let again = follow(&mut h, &id, "two", 0);
    assert_eq!(again.ended, before.ended);
    // The schedd asks again: it has the end; the book settles it, and the
    // kept output goes with the claim's last report.
    follow(&mut h, &id, "two", again.version);
    let Fixture { d, execute, .. } = h;
    drop(d);
    let k = daemon_in(execute, "");
    let sub = PoolRequest::Subscribe {
        caller: "schedd".into(),
        claim_id: id.clone(),
        incarnation: Some("two".into()),
        seen: 0,
    };
    let mut k = k;
    assert_eq!(k.d.owed_ends(), 0);
    assert!(k.d.pool(sub).is_err(), "an acknowledged end was offered again");
    assert_eq!(k.leftovers(), 0, "the kept output outlived its end");
}
