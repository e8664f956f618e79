//! The starter's unmetered mode (`HostConfig::meter_fuel = false`): jobs that
//! need no fuel run with neither fuel nor epoch checks, on a thread of their
//! own, and are suspended and killed by a signal to that thread. Every
//! control operation, limit and exit path must behave exactly as on the
//! metered engine, whether the job's guest runs on a job thread
//! (`Host::run`) or on the caller's own thread (`Host::run_in_place`).
//! Linux on x86_64 only: elsewhere every job runs metered.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use andes_starter::starter::{
    HOLD_DISK, HOLD_EXECUTE_DURATION, HOLD_FUEL, HOLD_MEMORY, HOLD_OUTPUT_TOO_BIG,
};
use andes_starter::{
    Clock, Control, Ending, Host, HostConfig, JobResult, JobSpec, Limits, SystemClock, VirtualClock,
};
use classad::Value;

use crate::common::{Sandbox, held, sample, spec, wat};

static HOST: LazyLock<Host> = LazyLock::new(|| {
    let h = Host::new(HostConfig {
        max_instances: 48,
        max_memory_bytes: 1 << 30,
        meter_fuel: false,
        ..Default::default()
    })
    .expect("host");
    assert_eq!(h.unmetered_unavailable(), None, "this platform should run jobs unmetered");
    h
});

/// How long any wait in these tests may take before it counts as a hang:
/// far longer than any reaction should (the bench measures those), so that
/// a loaded machine does not fail the tests.
const HANG: Duration = Duration::from_secs(60);

/// `(loop (br 0))`: no calls, no memory.
const LOOP: &str =
    r#"(module (memory (export "memory") 1) (func (export "_start") (loop (br 0))))"#;

/// A loop that reads and writes memory, and calls a function of its own.
const MEMORY_LOOP: &str = r#"(module (memory (export "memory") 1)
    (func $bump (param $a i32)
      (i32.store (local.get $a) (i32.add (i32.load (local.get $a)) (i32.const 1))))
    (func (export "_start") (local $i i32)
      (loop $l
        (local.set $i (i32.and (i32.add (local.get $i) (i32.const 4)) (i32.const 65532)))
        (call $bump (local.get $i))
        (br $l))))"#;

/// A loop that spends most of its time in libcalls (`memory.fill`).
const FILL_LOOP: &str = r#"(module (memory (export "memory") 4)
    (func (export "_start")
      (loop $l (memory.fill (i32.const 0) (i32.const 7) (i32.const 200000)) (br $l))))"#;

/// A loop that spends most of its time in host calls (`clock_time_get`).
const HOST_CALL_LOOP: &str = r#"(module
    (import "wasi_snapshot_preview1" "clock_time_get"
      (func $now (param i32 i64 i32) (result i32)))
    (memory (export "memory") 1)
    (func (export "_start")
      (loop $l (drop (call $now (i32.const 1) (i64.const 0) (i32.const 0))) (br $l))))"#;

/// Where a test job's guest runs.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// On a job thread: `Host::run`.
    Thread,
    /// On the thread of the task that runs it: `Host::run_in_place`.
    InPlace,
}

const MODES: [Mode; 2] = [Mode::Thread, Mode::InPlace];

async fn run_as(mode: Mode, spec: JobSpec, ctl: Arc<Control>, clock: Arc<dyn Clock>) -> JobResult {
    match mode {
        Mode::Thread => HOST.run(spec, ctl, clock).await,
        Mode::InPlace => HOST.run_in_place(spec, ctl, clock).await,
    }
}

async fn run(spec: JobSpec) -> JobResult {
    run_as(Mode::Thread, spec, Control::new(), Arc::new(SystemClock)).await
}

async fn run_in_place(spec: JobSpec) -> JobResult {
    run_as(Mode::InPlace, spec, Control::new(), Arc::new(SystemClock)).await
}

/// A job running as a tokio task, with its control block.
struct Job {
    ctl: Arc<Control>,
    task: tokio::task::JoinHandle<JobResult>,
}

fn start(spec: JobSpec, clock: Arc<dyn Clock>) -> Job {
    start_as(Mode::Thread, spec, clock)
}

fn start_as(mode: Mode, spec: JobSpec, clock: Arc<dyn Clock>) -> Job {
    let ctl = Control::new();
    let task = tokio::spawn({
        let ctl = ctl.clone();
        async move { run_as(mode, spec, ctl, clock).await }
    });
    Job { ctl, task }
}

/// Yields until `cond` holds; panics after [`HANG`].
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < HANG, "waited {HANG:?} for {what}");
        tokio::task::yield_now().await;
    }
}

/// The job's CPU time, user and system.
fn cpu(ctl: &Control) -> f64 {
    let u = ctl.usage(&SystemClock);
    u.remote_user_cpu + u.remote_sys_cpu
}

/// Waits until the job's guest has run for a while (its CPU time moved).
async fn running(job: &Job) {
    until("the job to start", || job.ctl.is_running()).await;
    let c0 = cpu(&job.ctl);
    until("the job to use CPU", || cpu(&job.ctl) > c0).await;
}

/// Kills the job and waits for its end, which must come soon.
async fn kill(job: Job) -> JobResult {
    let t = Instant::now();
    job.ctl.hard_kill();
    let r = tokio::time::timeout(HANG, job.task).await.expect("the kill took effect").unwrap();
    assert!(t.elapsed() < HANG);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_runs_unmetered_and_publishes_no_fuel() {
    for mode in MODES {
        hello_unmetered(mode).await;
    }
}

async fn hello_unmetered(mode: Mode) {
    let sb = Sandbox::new();
    std::fs::write(sb.0.join("in.txt"), "one\ntwo\n").unwrap();
    let r = run_as(
        mode,
        spec(
        sample("hello"),
        r#"[ Cmd = "/home/alice/hello.wasm"; Arguments = "-n 'hello world' x";
             Environment = "GREETING=bonjour OTHER=1"; In = "in.txt"; Out = "out.txt"; Err = "err.txt" ]"#,
            &sb,
        ),
        Control::new(),
        Arc::new(SystemClock),
    )
    .await;
    assert_eq!(r.ending, Ending::Exited(0), "{mode:?}: stderr: {}", sb.read("err.txt"));
    assert_eq!(
        sb.read("out.txt"),
        "argv[0] = hello.wasm\nargv[1] = -n\nargv[2] = hello world\nargv[3] = x\n\
         GREETING = bonjour\nstdin: ONE\nstdin: TWO\nwrote hello.out\n"
    );
    assert_eq!(sb.read("hello.out"), "bonjour, world\nargs: 4\nstdin lines: 2\n");
    assert!(r.usage.fuel_unmetered);
    assert_eq!(r.usage.fuel_consumed, 0);
    let ad = r.to_ad();
    assert_eq!(ad.eval_attr("ExitCode"), Value::Int(0));
    assert_eq!(ad.get("WasmFuelConsumed"), None, "an unmetered job's fuel is not published");
    assert!(matches!(ad.eval_attr("ImageSize"), Value::Int(n) if n > 0));
    // A job this short may be all kernel time by the thread's accounting.
    let cpu = |n: &str| match ad.eval_attr(n) {
        Value::Real(c) => c,
        v => panic!("{n} = {v}"),
    };
    assert!(cpu("RemoteUserCpu") + cpu("RemoteSysCpu") > 0.0, "{ad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_that_need_fuel_still_run_metered() {
    let sb = Sandbox::new();
    let r = run(spec(sample("spin"), "[ MaxFuel = 5000000 ]", &sb)).await;
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_FUEL);
    assert!(reason.contains("MaxFuel = 5000000"), "{reason}");
    assert!(r.usage.fuel_consumed >= 5_000_000 - 100_000, "{:?}", r.usage);
    assert!(!r.usage.fuel_unmetered);
    let r = run(spec(sample("hello"), r#"[ MaxFuel = 100000000000 ]"#, &sb)).await;
    assert_eq!(r.ending, Ending::Exited(0));
    assert!(matches!(r.to_ad().eval_attr("WasmFuelConsumed"), Value::Int(n) if n > 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_traps_are_the_same_as_metered() {
    for code in [0, 3, 85, 126, 255] {
        let sb = Sandbox::new();
        let r = run(spec(sample("exit_code"), &format!("[ Arguments = \"{code}\" ]"), &sb)).await;
        assert_eq!(r.ending, Ending::Exited(code));
    }
    let cases = [
        (
            "(module (memory (export \"memory\") 1) (func (export \"_start\") unreachable))",
            4,
            "unreachable",
        ),
        (
            "(module (memory (export \"memory\") 1) (func (export \"_start\") \
             (drop (i32.div_s (i32.const 1) (i32.const 0)))))",
            8,
            "integer_divide_by_zero",
        ),
        (
            "(module (memory (export \"memory\") 1) (func (export \"_start\") \
             (drop (i32.load (i32.const 1000000)))))",
            11,
            "memory_out_of_bounds",
        ),
    ];
    for (text, signal, trap) in cases {
        let sb = Sandbox::new();
        let r = run(spec(wat(text), "[]", &sb)).await;
        assert_eq!(r.ending, Ending::Trapped { signal, trap: trap.into() }, "{text}");
        let r = run_in_place(spec(wat(text), "[]", &sb)).await;
        assert_eq!(r.ending, Ending::Trapped { signal, trap: trap.into() }, "in place: {text}");
    }
    let sb = Sandbox::new();
    let r = run(spec(sample("recurse"), "[]", &sb)).await;
    assert_eq!(r.ending, Ending::Trapped { signal: 11, trap: "stack_overflow".into() });
    let r = run_in_place(spec(sample("recurse"), "[]", &sb)).await;
    assert_eq!(r.ending, Ending::Trapped { signal: 11, trap: "stack_overflow".into() });
    let r = run_in_place(spec(sample("exit_code"), "[ Arguments = \"85\" ]", &sb)).await;
    assert_eq!(r.ending, Ending::Exited(85));
    let r = run(spec(sample("trap_divzero"), "[]", &sb)).await;
    assert_eq!(r.ending, Ending::Trapped { signal: 8, trap: "integer_divide_by_zero".into() });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_as_on_the_metered_engine() {
    let sb = Sandbox::new();
    let r = run(spec(sample("membomb"), "[ RequestMemory = 64 ]", &sb)).await;
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_MEMORY);
    assert!(reason.contains("RequestMemory allows 64.0 MiB"), "{reason}");

    let sb = Sandbox::new();
    let r =
        run(spec(sample("flood"), r#"[ Out = "out.txt"; MaxOutputBytes = 100000 ]"#, &sb)).await;
    assert_eq!(held(&r).0, HOLD_OUTPUT_TOO_BIG);
    assert!(std::fs::metadata(sb.0.join("out.txt")).unwrap().len() <= 100_000);

    let sb = Sandbox::new();
    let r = run(spec(sample("flood"), r#"[ Out = "out.txt"; RequestDisk = 64 ]"#, &sb)).await;
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_DISK, "{reason}");
    assert!(std::fs::metadata(sb.0.join("out.txt")).unwrap().len() <= 64 * 1024);

    let sb = Sandbox::new();
    let r = run(spec(sample("fdbomb"), r#"[ Out = "out.txt" ]"#, &sb)).await;
    assert_eq!(r.ending, Ending::Exited(0));
    let out = sb.read("out.txt");
    let n: usize = out
        .strip_prefix("opened ")
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(n <= Limits::default().max_open_files as usize, "{out}");

    let sb = Sandbox::new();
    #[cfg(unix)]
    std::os::unix::fs::symlink("/etc/passwd", sb.0.join("outside_link")).unwrap();
    let r = run(spec(sample("escape"), r#"[ Out = "out.txt" ]"#, &sb)).await;
    let out = sb.read("out.txt");
    assert_eq!(r.ending, Ending::Exited(0), "{out}");
    assert!(!out.contains("escaped"), "{out}");
    assert!(out.contains("../../etc/passwd: error PermissionDenied (errno 63)"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wall_clock_limit_stops_a_tight_loop_on_a_virtual_clock() {
    for mode in MODES {
        wall_clock_limit(mode).await;
    }
}

async fn wall_clock_limit(mode: Mode) {
    let sb = Sandbox::new();
    let vc = VirtualClock::new();
    let job = start_as(
        mode,
        spec(wat(LOOP), "[ AllowedExecuteDuration = 3600 ]", &sb),
        Arc::new(vc.clone()),
    );
    running(&job).await;
    vc.advance(Duration::from_secs(3599));
    tokio::task::yield_now().await;
    assert!(!job.task.is_finished());
    vc.advance(Duration::from_secs(2));
    let r = tokio::time::timeout(HANG, job.task).await.expect("the limit took effect").unwrap();
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_EXECUTE_DURATION);
    assert_eq!(reason, "The job exceeded allowed execute duration of 1:00:00");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_kill_stops_loops_host_calls_sleeps_and_suspended_jobs() {
    for mode in MODES {
        hard_kill_stops(mode).await;
    }
}

async fn hard_kill_stops(mode: Mode) {
    let cases = [
        ("spin", sample("spin")),
        ("loop", wat(LOOP)),
        ("memory loop", wat(MEMORY_LOOP)),
        ("memory.fill loop", wat(FILL_LOOP)),
        ("host call loop", wat(HOST_CALL_LOOP)),
        ("primes", sample("primes")),
    ];
    for (name, module) in cases {
        eprintln!("kill: {name}, {mode:?}");
        let sb = Sandbox::new();
        let job = start_as(
            mode,
            spec(module, r#"[ Arguments = "1000000000000" ]"#, &sb),
            Arc::new(SystemClock),
        );
        running(&job).await;
        let r = kill(job).await;
        assert_eq!(r.ending, Ending::Evicted { vacated: false }, "{name}");
        assert!(r.usage.fuel_unmetered, "{name}");
    }
    // Blocked in a host call: the sleeper waits in poll_oneoff for an hour.
    let sb = Sandbox::new();
    let job = start_as(
        mode,
        spec(sample("sleeper"), r#"[ Out = "out.txt" ]"#, &sb),
        Arc::new(SystemClock),
    );
    until("the sleeper to sleep", || sb.read("out.txt").contains("sleeping")).await;
    let r = kill(job).await;
    assert_eq!(r.ending, Ending::Evicted { vacated: false });
    // Suspended first, in guest code and in a sleep.
    for module in [wat(LOOP), sample("sleeper")] {
        let sb = Sandbox::new();
        let job = start_as(mode, spec(module, "[]", &sb), Arc::new(SystemClock));
        until("the job to start", || job.ctl.is_running()).await;
        job.ctl.suspend(&SystemClock);
        until("the suspension", || job.ctl.is_stopped()).await;
        let r = kill(job).await;
        assert_eq!(r.ending, Ending::Evicted { vacated: false });
    }
}

/// Suspends `job`, and checks that its CPU time stands still while
/// `meanwhile` runs to its end.
/// Waits until a stopped job's CPU time has stood still while another job
/// ran: the last instructions before its thread sleeps, and a signal sent
/// just before it did, still count.
async fn settle(job: &Job) {
    let t = Instant::now();
    loop {
        let c = cpu(&job.ctl);
        let sb = Sandbox::new();
        let r = run(spec(
            wat(r#"(module (memory (export "memory") 1) (func (export "_start")))"#),
            "[]",
            &sb,
        ))
        .await;
        assert_eq!(r.ending, Ending::Exited(0));
        if cpu(&job.ctl) == c {
            return;
        }
        assert!(t.elapsed() < HANG, "the suspended job's CPU time kept moving");
    }
}

/// False when the job ended before the suspension took effect.
async fn suspended_while<F: std::future::Future<Output = ()>>(job: &Job, meanwhile: F) -> bool {
    let t = Instant::now();
    job.ctl.suspend(&SystemClock);
    let t0 = Instant::now();
    while !job.ctl.is_stopped() {
        if job.task.is_finished() {
            return false;
        }
        assert!(t0.elapsed() < HANG, "the suspension did not take effect: {:?}", job.ctl);
        tokio::task::yield_now().await;
    }
    let took = t.elapsed();
    settle(job).await;
    let c0 = cpu(&job.ctl);
    meanwhile.await;
    let c1 = cpu(&job.ctl);
    assert_eq!(c0, c1, "the suspended job used CPU (suspension took {took:?}): {:?}", job.ctl);
    assert!(!job.task.is_finished());
    assert!(job.ctl.is_stopped());
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_stops_the_cpu_and_resume_continues_where_it_stopped() {
    let sb = Sandbox::new();
    let job = start(
        spec(sample("primes"), r#"[ Arguments = "30000000"; Out = "out.txt" ]"#, &sb),
        Arc::new(SystemClock),
    );
    running(&job).await;
    // Another job runs to its end while this one is suspended.
    let other = Sandbox::new();
    let suspended = suspended_while(&job, async {
        let r =
            run(spec(sample("primes"), r#"[ Arguments = "2000000"; Out = "out.txt" ]"#, &other))
                .await;
        assert_eq!(r.ending, Ending::Exited(0));
        assert_eq!(other.read("out.txt").lines().last(), Some("primes below 2000000: 148933"));
    })
    .await;
    assert!(suspended);
    // Suspend and resume, again and again, in guest code or in host calls.
    for _ in 0..25 {
        job.ctl.resume(&SystemClock);
        let c = cpu(&job.ctl);
        until("the job to run again", || cpu(&job.ctl) > c || job.task.is_finished()).await;
        let suspended = suspended_while(&job, async {
            for _ in 0..50 {
                tokio::task::yield_now().await;
            }
        })
        .await;
        if !suspended {
            break;
        }
    }
    job.ctl.resume(&SystemClock);
    let r = tokio::time::timeout(HANG, job.task).await.expect("finished").unwrap();
    assert_eq!(r.ending, Ending::Exited(0));
    assert_eq!(sb.read("out.txt").lines().last(), Some("primes below 30000000: 1857859"));
    assert!(r.usage.cumulative_suspension_time > 0.0, "{:?}", r.usage);
    assert!(r.updates.iter().any(|(k, _)| k == "Progress"), "{:?}", r.updates);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_stops_loops_in_libcalls_and_host_calls() {
    for mode in MODES {
        suspend_stops_loops(mode).await;
    }
}

async fn suspend_stops_loops(mode: Mode) {
    for (name, module) in [
        ("loop", wat(LOOP)),
        ("memory loop", wat(MEMORY_LOOP)),
        ("memory.fill loop", wat(FILL_LOOP)),
        ("host call loop", wat(HOST_CALL_LOOP)),
    ] {
        let sb = Sandbox::new();
        let job = start_as(mode, spec(module, "[]", &sb), Arc::new(SystemClock));
        running(&job).await;
        for _ in 0..5 {
            let other = Sandbox::new();
            let suspended = suspended_while(&job, async {
                let r = run(spec(sample("hello"), "[]", &other)).await;
                assert_eq!(r.ending, Ending::Exited(0));
            })
            .await;
            assert!(suspended, "{name}, {mode:?}");
            job.ctl.resume(&SystemClock);
            let c = cpu(&job.ctl);
            until("the job to run again", || cpu(&job.ctl) > c).await;
        }
        assert_eq!(kill(job).await.ending, Ending::Evicted { vacated: false }, "{name}, {mode:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_sleeper_stays_stopped_and_resumes() {
    for mode in MODES {
        suspended_sleeper(mode).await;
    }
}

async fn suspended_sleeper(mode: Mode) {
    let sb = Sandbox::new();
    let job = start_as(
        mode,
        spec(sample("sleeper"), r#"[ Out = "out.txt" ]"#, &sb),
        Arc::new(SystemClock),
    );
    until("the sleeper to sleep", || sb.read("out.txt").contains("sleeping")).await;
    let suspended = suspended_while(&job, async {
        let other = Sandbox::new();
        let r = run(spec(sample("hello"), r#"[ Out = "out.txt" ]"#, &other)).await;
        assert_eq!(r.ending, Ending::Exited(0));
    })
    .await;
    assert!(suspended);
    job.ctl.resume(&SystemClock);
    assert!(!job.ctl.is_stopped());
    let r = kill(job).await;
    assert_eq!(r.ending, Ending::Evicted { vacated: false });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacate_lets_a_cooperative_job_save_its_work_even_when_suspended() {
    for (suspend_first, mode) in
        [(false, Mode::Thread), (true, Mode::Thread), (true, Mode::InPlace)]
    {
        let sb = Sandbox::new();
        let job = start_as(
            mode,
            spec(sample("vacate"), r#"[ Out = "out.txt" ]"#, &sb),
            Arc::new(SystemClock),
        );
        running(&job).await;
        if suspend_first {
            job.ctl.suspend(&SystemClock);
            until("the suspension", || job.ctl.is_stopped()).await;
        }
        job.ctl.soft_kill(&SystemClock, Duration::from_secs(600));
        let r = tokio::time::timeout(HANG, job.task).await.expect("vacated").unwrap();
        assert_eq!(r.ending, Ending::Exited(85), "{}", sb.read("out.txt"));
        assert!(sb.read("partial.txt").contains("terms_done"), "{}", sb.read("partial.txt"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacate_grace_expiry_hard_kills_an_uncooperative_job() {
    for mode in MODES {
        grace_expiry(mode, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_vacated_before_it_starts_is_hard_killed_when_the_grace_ends() {
    for mode in MODES {
        grace_expiry(mode, true).await;
    }
}

/// Vacates a job that can hear a vacate but ignores it (`deaf`), once it
/// runs or (`early`) before it starts, and checks that it is hard-killed
/// when the grace ends, not before.
async fn grace_expiry(mode: Mode, early: bool) {
    let sb = Sandbox::new();
    let vc = VirtualClock::new();
    let clock: Arc<dyn Clock> = Arc::new(vc.clone());
    let ctl = Control::new();
    let grace = Duration::from_secs(600);
    if early {
        ctl.soft_kill(clock.as_ref(), grace);
    }
    let task = tokio::spawn({
        let (spec, ctl, clock) = (spec(sample("deaf"), "[]", &sb), ctl.clone(), clock.clone());
        async move { run_as(mode, spec, ctl, clock).await }
    });
    let job = Job { ctl, task };
    running(&job).await;
    if !early {
        job.ctl.soft_kill(clock.as_ref(), grace);
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    vc.advance(grace - Duration::from_secs(1));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!job.task.is_finished(), "{mode:?}: killed before the grace ended");
    vc.advance(Duration::from_secs(2));
    let r = tokio::time::timeout(HANG, job.task).await.expect("killed").unwrap();
    assert_eq!(r.ending, Ending::Evicted { vacated: true });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_job_does_not_disturb_a_good_one_beside_it() {
    let bad_sb = Sandbox::new();
    let bad = start_as(Mode::InPlace, spec(sample("spin"), "[]", &bad_sb), Arc::new(SystemClock));
    let fill_sb = Sandbox::new();
    let fill = start(spec(wat(FILL_LOOP), "[]", &fill_sb), Arc::new(SystemClock));
    let sb = Sandbox::new();
    let r = run(spec(sample("hello"), r#"[ Arguments = "x"; Out = "out.txt" ]"#, &sb)).await;
    assert_eq!(r.ending, Ending::Exited(0));
    assert!(sb.read("out.txt").contains("argv[1] = x"));
    let sb2 = Sandbox::new();
    let r = run(spec(sample("membomb"), "[ RequestMemory = 32 ]", &sb2)).await;
    assert_eq!(held(&r).0, HOLD_MEMORY);
    assert!(!bad.task.is_finished() && !fill.task.is_finished());
    assert_eq!(kill(bad).await.ending, Ending::Evicted { vacated: false });
    assert_eq!(kill(fill).await.ending, Ending::Evicted { vacated: false });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_run_kills_its_job_and_the_host_goes_on() {
    let sb = Sandbox::new();
    let job = start(spec(wat(LOOP), "[]", &sb), Arc::new(SystemClock));
    running(&job).await;
    job.task.abort();
    let _ = job.task.await;
    // The job's thread stops using CPU once its job is gone: its CPU time
    // stands still while other jobs run, and they run as usual.
    let t = Instant::now();
    loop {
        let c0 = cpu(&job.ctl);
        let sb2 = Sandbox::new();
        let r = run(spec(sample("hello"), "[]", &sb2)).await;
        assert_eq!(r.ending, Ending::Exited(0));
        if cpu(&job.ctl) == c0 {
            break;
        }
        assert!(t.elapsed() < HANG, "the abandoned job still runs");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_outliving_its_host_is_still_killed_cleanly() {
    // The host goes away while its abandoned job still runs: the kill that
    // follows must still find the pad's trap site mapped, and the job's
    // thread must stop.
    let host = Arc::new(
        Host::new(HostConfig { max_instances: 2, meter_fuel: false, ..Default::default() })
            .expect("host"),
    );
    let sb = Sandbox::new();
    let ctl = Control::new();
    let task = tokio::spawn({
        let (host, ctl, spec) = (host.clone(), ctl.clone(), spec(wat(LOOP), "[]", &sb));
        async move { host.run(spec, ctl, Arc::new(SystemClock)).await }
    });
    until("the job to start", || ctl.is_running()).await;
    let c0 = cpu(&ctl);
    until("the job to use CPU", || cpu(&ctl) > c0).await;
    // While it runs, its usage says its fuel is not counted.
    assert!(ctl.usage(&SystemClock).fuel_unmetered);
    task.abort();
    let _ = task.await;
    drop(host);
    let t = Instant::now();
    loop {
        let c = cpu(&ctl);
        let sb2 = Sandbox::new();
        let r = run(spec(sample("hello"), "[]", &sb2)).await;
        assert_eq!(r.ending, Ending::Exited(0));
        if cpu(&ctl) == c {
            break;
        }
        assert!(t.elapsed() < HANG, "the abandoned job still runs");
    }
}

/// In place, the guest runs on the caller's thread, whose CPU time then grows
/// by the job's; on a job thread, the caller only waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn in_place_the_guest_runs_on_the_calling_thread() {
    // Compiled (and the host set up) first, so that neither counts below.
    let warm = Sandbox::new();
    let spec_in =
        |sb: &Sandbox| spec(sample("primes"), r#"[ Arguments = "20000000"; Out = "out.txt" ]"#, sb);
    run_as(Mode::InPlace, spec_in(&warm), Control::new(), Arc::new(SystemClock)).await;
    for mode in MODES {
        let sb = Sandbox::new();
        let t0 = cpu_time::ThreadTime::now();
        let r = run_as(mode, spec_in(&sb), Control::new(), Arc::new(SystemClock)).await;
        let caller = t0.elapsed().as_secs_f64();
        assert_eq!(r.ending, Ending::Exited(0));
        assert_eq!(sb.read("out.txt").lines().last(), Some("primes below 20000000: 1270607"));
        let job = r.usage.remote_user_cpu + r.usage.remote_sys_cpu;
        assert!(job > 0.0, "{:?}", r.usage);
        match mode {
            Mode::InPlace => assert!(caller >= job * 0.9, "caller {caller} s, job {job} s"),
            Mode::Thread => assert!(caller < job * 0.5, "caller {caller} s, job {job} s"),
        }
    }
}

/// Jobs run in place block their own threads, never the runtime: on a
/// runtime of one worker, several run at once while its timers fire and
/// other jobs start and end.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn jobs_in_place_leave_the_runtime_free() {
    let sandboxes: Vec<Sandbox> = (0..3).map(|_| Sandbox::new()).collect();
    let jobs: Vec<Job> = sandboxes
        .iter()
        .map(|sb| start_as(Mode::InPlace, spec(wat(LOOP), "[]", sb), Arc::new(SystemClock)))
        .collect();
    for job in &jobs {
        running(job).await;
    }
    tokio::time::timeout(HANG, tokio::time::sleep(Duration::from_millis(5)))
        .await
        .expect("a timer fired while the jobs ran");
    let other = Sandbox::new();
    let hello = tokio::spawn(run_in_place(spec(sample("hello"), "[]", &other)));
    let r = tokio::time::timeout(HANG, hello).await.expect("hello ran beside them").unwrap();
    assert_eq!(r.ending, Ending::Exited(0));
    for job in &jobs {
        let c = cpu(&job.ctl);
        until("each job to keep running", || cpu(&job.ctl) > c).await;
    }
    for job in jobs {
        assert_eq!(kill(job).await.ending, Ending::Evicted { vacated: false });
    }
}

/// No thread of a current-thread runtime may block: a job run in place runs
/// on a job thread there, under the same control.
#[tokio::test]
async fn in_place_on_a_current_thread_runtime_uses_a_job_thread() {
    let sb = Sandbox::new();
    let r = run_in_place(spec(sample("hello"), "[]", &sb)).await;
    assert_eq!(r.ending, Ending::Exited(0));
    let job = start_as(Mode::InPlace, spec(wat(LOOP), "[]", &sb), Arc::new(SystemClock));
    running(&job).await;
    job.ctl.suspend(&SystemClock);
    until("the suspension", || job.ctl.is_stopped()).await;
    assert_eq!(kill(job).await.ending, Ending::Evicted { vacated: false });
}

/// xorshift64*: the stress test's seeded choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Prints the seed when the stress test fails, so that it can be replayed
/// with `ANDES_STRESS_SEED`.
struct Seed(u64);

impl Drop for Seed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("stress test failed with ANDES_STRESS_SEED={}", self.0);
        }
    }
}

/// A job of the stress test: what it runs, and whether it burns CPU when
/// it runs (a sleeper does not).
struct Stressed {
    name: &'static str,
    mode: Mode,
    job: Job,
    burns: bool,
    _sandbox: Sandbox,
}

fn stressed(rng: &mut Rng) -> Stressed {
    let kinds: [(&'static str, Arc<[u8]>, &str, bool); 8] = [
        ("loop", wat(LOOP), "[]", true),
        ("memory loop", wat(MEMORY_LOOP), "[]", true),
        ("memory.fill loop", wat(FILL_LOOP), "[]", true),
        ("host call loop", wat(HOST_CALL_LOOP), "[]", true),
        ("spin", sample("spin"), "[]", true),
        ("sleeper", sample("sleeper"), "[]", false),
        ("primes", sample("primes"), r#"[ Arguments = "1000000000000" ]"#, true),
        // A metered job on the same host, beside the unmetered ones.
        ("metered spin", sample("spin"), "[ MaxFuel = 1000000000000000 ]", true),
    ];
    let (name, module, ad, burns) = kinds[rng.below(kinds.len() as u64) as usize].clone();
    let mode = MODES[rng.below(2) as usize];
    let sb = Sandbox::new();
    let job = start_as(mode, spec(module, ad, &sb), Arc::new(SystemClock));
    Stressed { name, mode, job, burns, _sandbox: sb }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_random_suspend_resume_and_kill_of_concurrent_jobs() {
    let seed =
        std::env::var("ANDES_STRESS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    let _seed = Seed(seed);
    eprintln!("stress seed {seed}");
    let mut rng = Rng(seed);
    let mut jobs: Vec<Stressed> = (0..6).map(|_| stressed(&mut rng)).collect();
    for j in &jobs {
        until("a stressed job to start", || j.job.ctl.is_running()).await;
    }
    let mut witnesses = 0;
    for step in 0..160 {
        let i = rng.below(jobs.len() as u64) as usize;
        let j = &jobs[i];
        let what = format!("step {step}, job {i} ({}, {:?}), seed {seed}", j.name, j.mode);
        match rng.below(10) {
            0..=2 => {
                j.job.ctl.suspend(&SystemClock);
                let t = Instant::now();
                while !j.job.ctl.is_stopped() {
                    assert!(t.elapsed() < HANG, "{what}: the suspension did not take effect");
                    assert!(!j.job.task.is_finished(), "{what}: the job ended");
                    tokio::task::yield_now().await;
                }
            }
            3..=5 => {
                let was = j.job.ctl.is_suspended();
                j.job.ctl.resume(&SystemClock);
                if was && j.burns {
                    let c = cpu(&j.job.ctl);
                    let t = Instant::now();
                    while cpu(&j.job.ctl) <= c {
                        assert!(t.elapsed() < HANG, "{what}: the job did not resume");
                        tokio::task::yield_now().await;
                    }
                }
            }
            6 => {
                // None of these jobs can hear a vacate: however long the
                // grace, the vacate itself ends it, suspended or not.
                let old = std::mem::replace(&mut jobs[i], stressed(&mut rng));
                old.job.ctl.soft_kill(&SystemClock, Duration::from_secs(3600));
                let r = tokio::time::timeout(HANG, old.job.task).await.expect(&what).unwrap();
                assert_eq!(r.ending, Ending::Evicted { vacated: true }, "{what}");
                until("a new stressed job to start", || jobs[i].job.ctl.is_running()).await;
            }
            7 => {
                let old = std::mem::replace(&mut jobs[i], stressed(&mut rng));
                let ending = kill(old.job).await.ending;
                assert!(matches!(ending, Ending::Evicted { .. }), "{what}: {ending:?}");
                until("a new stressed job to start", || jobs[i].job.ctl.is_running()).await;
            }
            _ => {
                // Others progress while some are suspended, and those use no
                // CPU meanwhile.
                let mut stopped = Vec::new();
                for (k, j) in jobs.iter().enumerate() {
                    if j.job.ctl.is_stopped() {
                        settle(&j.job).await;
                        stopped.push((k, cpu(&j.job.ctl)));
                    }
                }
                let sb = Sandbox::new();
                let r = run(spec(
                    sample("primes"),
                    r#"[ Arguments = "300000"; Out = "out.txt" ]"#,
                    &sb,
                ))
                .await;
                assert_eq!(r.ending, Ending::Exited(0), "{what}");
                assert_eq!(sb.read("out.txt").lines().last(), Some("primes below 300000: 25997"));
                witnesses += 1;
                for (k, c) in stopped {
                    let j = &jobs[k];
                    assert!(j.job.ctl.is_stopped(), "{what}: job {k} ({}) woke", j.name);
                    assert_eq!(cpu(&j.job.ctl), c, "{what}: suspended job {k} ({}) ran", j.name);
                }
            }
        }
        for _ in 0..rng.below(20) {
            tokio::task::yield_now().await;
        }
    }
    assert!(witnesses > 0);
    for (i, j) in jobs.into_iter().enumerate() {
        let ending = kill(j.job).await.ending;
        assert!(matches!(ending, Ending::Evicted { .. }), "job {i} ({}): {ending:?}", j.name);
    }
    // The host is as good as new.
    let sb = Sandbox::new();
    let r = run(spec(sample("hello"), r#"[ Out = "out.txt" ]"#, &sb)).await;
    assert_eq!(r.ending, Ending::Exited(0));
}
