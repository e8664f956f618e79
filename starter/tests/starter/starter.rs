//! The starter against real modules: the samples (built for wasm32-wasip1
//! by `cargo xtask test`) and small WAT modules for exact traps.

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use andes_starter::starter::{
    HOLD_DISK, HOLD_EXECUTE_DURATION, HOLD_FAILED_TO_START, HOLD_FUEL, HOLD_MEMORY,
    HOLD_OPEN_INPUT, HOLD_OUTPUT_TOO_BIG,
};
use andes_starter::{
    Clock, Control, Ending, Host, HostConfig, JobResult, JobSpec, Limits, SystemClock, VirtualClock,
};
use classad::{ClassAd, Value, parse_ad};

use crate::common::{Sandbox, held, sample, spec, wat};

static HOST: LazyLock<Host> = LazyLock::new(|| {
    Host::new(HostConfig { max_instances: 32, max_memory_bytes: 1 << 30, ..Default::default() })
        .expect("host")
});

async fn run(spec: JobSpec) -> JobResult {
    HOST.run(spec, Control::new(), Arc::new(SystemClock)).await
}

/// Starts `spec` on `clock` and waits until its guest is really running.
async fn start(
    spec: JobSpec,
    clock: &Arc<dyn Clock>,
) -> (Arc<Control>, tokio::task::JoinHandle<JobResult>) {
    let ctl = Control::new();
    let job = tokio::spawn({
        let (ctl, clock) = (ctl.clone(), clock.clone());
        async move { HOST.run(spec, ctl, clock).await }
    });
    while !ctl.is_running() {
        tokio::task::yield_now().await;
    }
    (ctl, job)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_sees_its_args_env_stdin_and_writes_its_files() {
    let sb = Sandbox::new();
    std::fs::write(sb.0.join("in.txt"), "one\ntwo\n").unwrap();
    let r = run(spec(
        sample("hello"),
        r#"[ Cmd = "/home/alice/hello.wasm"; Arguments = "-n 'hello world' x";
             Environment = "GREETING=bonjour OTHER=1"; In = "in.txt"; Out = "out.txt"; Err = "err.txt" ]"#,
        &sb,
    ))
    .await;
    assert_eq!(r.ending, Ending::Exited(0), "stderr: {}", sb.read("err.txt"));
    assert_eq!(
        sb.read("out.txt"),
        "argv[0] = hello.wasm\nargv[1] = -n\nargv[2] = hello world\nargv[3] = x\n\
         GREETING = bonjour\nstdin: ONE\nstdin: TWO\nwrote hello.out\n"
    );
    assert_eq!(sb.read("hello.out"), "bonjour, world\nargs: 4\nstdin lines: 2\n");
    let ad = r.to_ad();
    assert_eq!(ad.eval_attr("ExitCode"), Value::Int(0));
    assert_eq!(ad.eval_attr("ExitBySignal"), Value::Bool(false));
    assert!(matches!(ad.eval_attr("WasmFuelConsumed"), Value::Int(n) if n > 0));
    assert!(matches!(ad.eval_attr("ImageSize"), Value::Int(n) if n > 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_jobs_files_work_in_place_as_any_jobs_do() {
    // A job known to be short (run metered, on a runtime worker) uses its
    // files in place rather than through tokio's hand-offs: what it reads,
    // writes and polls must be the same either way.
    // poll_oneoff on its input (a regular file) and its output: both ready,
    // no error; the exit code is the events (2) plus 10 and 20 for an error.
    let poll = wat(r#"(module
        (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
        (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
        (memory (export "memory") 1)
        (func (export "_start") (local $e i32)
          (i64.store (i32.const 0) (i64.const 1))
          (i32.store8 (i32.const 8) (i32.const 1))
          (i32.store (i32.const 16) (i32.const 0))
          (i64.store (i32.const 48) (i64.const 2))
          (i32.store8 (i32.const 56) (i32.const 2))
          (i32.store (i32.const 64) (i32.const 1))
          (local.set $e (call $poll (i32.const 0) (i32.const 128) (i32.const 2) (i32.const 256)))
          (if (local.get $e) (then (call $exit (i32.add (i32.const 100) (local.get $e)))))
          (call $exit (i32.add (i32.load (i32.const 256)) (i32.add
            (i32.mul (i32.const 10) (i32.ne (i32.load16_u (i32.const 136)) (i32.const 0)))
            (i32.mul (i32.const 20) (i32.ne (i32.load16_u (i32.const 168)) (i32.const 0))))))))"#);
    for metered in [false, true] {
        let sb = Sandbox::new();
        std::fs::write(sb.0.join("in.txt"), "one\ntwo\n").unwrap();
        let mut s = spec(
            sample("hello"),
            r#"[ Arguments = "x"; In = "in.txt"; Out = "out.txt"; Err = "err.txt" ]"#,
            &sb,
        );
        s.metered = metered;
        let r = run(s).await;
        assert_eq!(r.ending, Ending::Exited(0), "metered {metered}: {}", sb.read("err.txt"));
        assert_eq!(
            sb.read("out.txt"),
            "argv[0] = job.wasm\nargv[1] = x\nGREETING = hello\nstdin: ONE\nstdin: TWO\n\
             wrote hello.out\n",
            "metered {metered}"
        );
        assert_eq!(sb.read("hello.out"), "hello, world\nargs: 2\nstdin lines: 2\n");
        let sb = Sandbox::new();
        std::fs::write(sb.0.join("in.txt"), "one\n").unwrap();
        let mut s = spec(poll.clone(), r#"[ In = "in.txt"; Out = "out.txt" ]"#, &sb);
        s.metered = metered;
        assert_eq!(run(s).await.ending, Ending::Exited(2), "metered {metered}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_environment_never_leaks_in() {
    // SAFETY: set before any job reads the environment in this process.
    unsafe { std::env::set_var("ANDES_HOST_SECRET", "leak") };
    let sb = Sandbox::new();
    let r = run(spec(sample("hello"), r#"[ Out = "out.txt"; Args = "a  b" ]"#, &sb)).await;
    assert_eq!(r.ending, Ending::Exited(0));
    let out = sb.read("out.txt");
    assert!(out.contains("argv[1] = a\nargv[2] = b\n"), "{out}");
    assert!(out.contains("GREETING = hello\n") && !out.contains("leak"), "{out}");
}

/// A metered job that ends within its first poll never wakes the epoch
/// ticker (a wake, a tick's sleep and a wake again, for nothing); one that
/// runs through fuel intervals holds it while it runs, and its deadline
/// callback counts its fuel as it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_metered_job_that_yields_wakes_the_epoch_ticker() {
    let host = Host::new(HostConfig { max_instances: 2, ..Default::default() }).expect("host");
    let sb = Sandbox::new();
    let short = wat(r#"(module (memory (export "memory") 1) (func (export "_start")))"#);
    for _ in 0..3 {
        let r = host.run(spec(short.clone(), "[]", &sb), Control::new(), Arc::new(SystemClock));
        assert_eq!(r.await.ending, Ending::Exited(0));
    }
    assert_eq!(host.epoch_ticker_starts(), 0, "a job that never yielded woke the ticker");
    // Twenty million iterations: many fuel intervals of a million.
    let long = wat(r#"(module (memory (export "memory") 1)
             (func (export "_start") (local $i i32)
               (local.set $i (i32.const 20000000))
               (loop $l (local.set $i (i32.sub (local.get $i) (i32.const 1)))
                        (br_if $l (local.get $i)))))"#);
    let r = host.run(spec(long, "[]", &sb), Control::new(), Arc::new(SystemClock)).await;
    assert_eq!(r.ending, Ending::Exited(0));
    assert!(r.usage.fuel_consumed > 20_000_000, "{:?}", r.usage);
    assert_eq!(host.epoch_ticker_starts(), 1, "a job that yielded holds the ticker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_come_back() {
    for code in [0, 3, 85, 126, 255] {
        let sb = Sandbox::new();
        let r = run(spec(sample("exit_code"), &format!("[ Arguments = \"{code}\" ]"), &sb)).await;
        assert_eq!(r.ending, Ending::Exited(code));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traps_map_to_the_nearest_unix_signal() {
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
        let ad = r.to_ad();
        assert_eq!(ad.eval_attr("ExitBySignal"), Value::Bool(true));
        assert_eq!(ad.eval_attr("ExitSignal"), Value::Int(signal as i64));
        assert_eq!(ad.eval_attr("WasmTrap"), Value::string(trap));
    }
    // Unbounded recursion in a real program: the capped wasm stack overflows.
    let sb = Sandbox::new();
    let r = run(spec(sample("recurse"), "[]", &sb)).await;
    assert_eq!(r.ending, Ending::Trapped { signal: 11, trap: "stack_overflow".into() });
    let sb = Sandbox::new();
    let r = run(spec(sample("trap_unreachable"), "[]", &sb)).await;
    assert_eq!(r.ending, Ending::Trapped { signal: 4, trap: "unreachable".into() });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_that_cannot_start_is_held_with_code_6() {
    let sb = Sandbox::new();
    let r = run(spec(Arc::from(&b"\0asm\x01\0\0\0garbage"[..]), "[]", &sb)).await;
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_FAILED_TO_START);
    assert!(reason.contains("not valid WebAssembly"), "{reason}");

    let r = run(spec(
        wat("(module (import \"env\" \"launch_missiles\" (func)) (func (export \"_start\")))"),
        "[]",
        &sb,
    ))
    .await;
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_FAILED_TO_START);
    assert!(reason.contains("launch_missiles"), "{reason}");

    let r = run(spec(wat("(module (func (export \"main\")))"), "[]", &sb)).await;
    assert!(held(&r).1.contains("_start"));

    let r = run(spec(sample("hello"), r#"[ In = "missing.txt" ]"#, &sb)).await;
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_OPEN_INPUT);
    assert!(reason.contains("missing.txt"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_is_capped_at_request_memory() {
    let sb = Sandbox::new();
    let r = run(spec(sample("membomb"), "[ RequestMemory = 64 ]", &sb)).await;
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_MEMORY);
    assert!(reason.contains("RequestMemory allows 64.0 MiB"), "{reason}");
    assert!(r.usage.image_size_kib <= 64 * 1024, "{:?}", r.usage);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuel_is_capped_at_max_fuel() {
    let sb = Sandbox::new();
    let r = run(spec(sample("spin"), "[ MaxFuel = 5000000 ]", &sb)).await;
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_FUEL);
    assert!(reason.contains("MaxFuel = 5000000"), "{reason}");
    assert!(r.usage.fuel_consumed >= 5_000_000 - 100_000, "{:?}", r.usage);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_and_disk_are_capped() {
    let sb = Sandbox::new();
    let r =
        run(spec(sample("flood"), r#"[ Out = "out.txt"; MaxOutputBytes = 100000 ]"#, &sb)).await;
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_OUTPUT_TOO_BIG, "{reason}");
    assert!(std::fs::metadata(sb.0.join("out.txt")).unwrap().len() <= 100_000);

    let sb = Sandbox::new();
    let r = run(spec(sample("flood"), r#"[ Out = "out.txt"; RequestDisk = 64 ]"#, &sb)).await;
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_DISK, "{reason}");
    assert!(reason.contains("RequestDisk"), "{reason}");
    assert!(std::fs::metadata(sb.0.join("out.txt")).unwrap().len() <= 64 * 1024);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_cannot_be_escaped() {
    let sb = Sandbox::new();
    #[cfg(unix)]
    std::os::unix::fs::symlink("/etc/passwd", sb.0.join("outside_link")).unwrap();
    let r = run(spec(sample("escape"), r#"[ Out = "out.txt" ]"#, &sb)).await;
    let out = sb.read("out.txt");
    assert_eq!(r.ending, Ending::Exited(0), "{out}");
    assert!(!out.contains("escaped"), "{out}");
    assert!(out.contains("../../etc/passwd: error") && out.contains("/etc/passwd: error"), "{out}");
    // wasi-common answers an escape through `..` or a symlink with EPERM (63),
    // and an absolute path, which no preopen matches, with ENOENT (44).
    assert!(out.contains("../../etc/passwd: error PermissionDenied (errno 63)"), "{out}");
    assert!(out.contains("/etc/passwd: error NotFound (errno 44)"), "{out}");
    assert!(out.contains("outside_link: error PermissionDenied (errno 63)"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_files_are_capped() {
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wall_clock_limit_holds_with_code_47_on_a_virtual_clock() {
    let sb = Sandbox::new();
    let vc = VirtualClock::new();
    let clock: Arc<dyn Clock> = Arc::new(vc.clone());
    let (_ctl, job) =
        start(spec(sample("spin"), "[ AllowedExecuteDuration = 3600 ]", &sb), &clock).await;
    // The guest is really running: let an hour pass.
    vc.advance(Duration::from_secs(3599));
    tokio::task::yield_now().await;
    assert!(!job.is_finished());
    vc.advance(Duration::from_secs(2));
    let r = job.await.unwrap();
    let (code, reason) = held(&r);
    assert_eq!(code, HOLD_EXECUTE_DURATION);
    assert_eq!(reason, "The job exceeded allowed execute duration of 1:00:00");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_stops_the_cpu_and_resume_continues_where_it_stopped() {
    let sb = Sandbox::new();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (ctl, job) =
        start(spec(sample("primes"), r#"[ Arguments = "3000000"; Out = "out.txt" ]"#, &sb), &clock)
            .await;
    ctl.suspend(clock.as_ref());
    // Let the suspension take effect (the next fuel yield) and the last
    // slice's CPU time be counted, however late a loaded machine lets that
    // happen; then watch the job's CPU time stand still.
    let t = Instant::now();
    let cpu = || {
        let u = ctl.usage(clock.as_ref());
        u.remote_user_cpu + u.remote_sys_cpu
    };
    loop {
        assert!(t.elapsed() < Duration::from_secs(60), "the suspension never took effect");
        let before = cpu();
        tokio::time::sleep(Duration::from_millis(20)).await;
        if ctl.is_stopped() && cpu() == before {
            break;
        }
    }
    let cpu0 = cpu();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(cpu0, cpu(), "the suspended job's CPU time advanced");
    assert!(!job.is_finished());
    ctl.resume(clock.as_ref());
    let r = job.await.unwrap();
    assert_eq!(r.ending, Ending::Exited(0));
    assert_eq!(sb.read("out.txt").lines().last(), Some("primes below 3000000: 216816"));
    assert!(r.usage.cumulative_suspension_time >= 0.3, "{:?}", r.usage);
    assert!(r.updates.iter().any(|(k, _)| k == "Progress"), "{:?}", r.updates);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_kill_stops_a_tight_loop_and_a_blocked_sleep() {
    for name in ["spin", "sleeper"] {
        let sb = Sandbox::new();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let (ctl, job) = start(spec(sample(name), "[]", &sb), &clock).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let t = Instant::now();
        ctl.hard_kill();
        let r = job.await.unwrap();
        assert_eq!(r.ending, Ending::Evicted { vacated: false }, "{name}");
        // Only bounded loosely here, where other tests share the machine (a
        // kill that fails leaves these jobs running for an hour); the
        // starter bench measures how fast a kill is.
        assert!(t.elapsed() < Duration::from_secs(30), "{name}: kill took {:?}", t.elapsed());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacate_lets_a_cooperative_job_save_its_work() {
    let sb = Sandbox::new();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (ctl, job) = start(spec(sample("vacate"), r#"[ Out = "out.txt" ]"#, &sb), &clock).await;
    ctl.soft_kill(clock.as_ref(), Duration::from_secs(60));
    let r = job.await.unwrap();
    assert_eq!(r.ending, Ending::Exited(85), "{}", sb.read("out.txt"));
    assert!(sb.read("partial.txt").contains("terms_done"), "{}", sb.read("partial.txt"));
    assert!(!r.log.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacate_grace_expiry_hard_kills_an_uncooperative_job() {
    // `deaf` can hear a vacate (it imports the SDK's call) but never asks
    // again: it gets its grace, then the hard kill.
    let sb = Sandbox::new();
    let vc = VirtualClock::new();
    let clock: Arc<dyn Clock> = Arc::new(vc.clone());
    let (ctl, job) = start(spec(sample("deaf"), "[]", &sb), &clock).await;
    ctl.soft_kill(clock.as_ref(), Duration::from_secs(600));
    assert!(ctl.vacate_requested());
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!job.is_finished());
    vc.advance(Duration::from_secs(601));
    let r = job.await.unwrap();
    assert_eq!(r.ending, Ending::Evicted { vacated: true });
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kernels_time_for_a_jobs_calls_is_its_system_cpu_not_its_user_cpu() {
    // 16 MiB through stdin and stdout: many read and write calls.
    let sb = Sandbox::new();
    let line = "a".repeat(99) + "\n";
    std::fs::write(sb.0.join("in.txt"), line.repeat(160_000)).unwrap();
    let r = run(spec(
        sample("hello"),
        r#"[ In = "in.txt"; Out = "out.txt"; RequestDisk = 65536 ]"#,
        &sb,
    ))
    .await;
    assert_eq!(r.ending, Ending::Exited(0));
    let u = &r.usage;
    assert!(u.remote_sys_cpu > 0.0 && u.remote_user_cpu > 0.0, "{u:?}");
    let ad = r.to_ad();
    assert!(matches!(ad.eval_attr("RemoteSysCpu"), classad::Value::Real(s) if s > 0.0), "{ad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vacate_ends_a_job_that_cannot_hear_it_at_once_not_after_the_grace() {
    // Plain programs (a spinning loop, a sleeper in poll_oneoff) have no way
    // to hear a soft kill: as HTCondor's SIGTERM ends a plain process, the
    // vacate ends them, with no wait for MACHINE_MAX_VACATE_TIME.
    for name in ["spin", "sleeper"] {
        let sb = Sandbox::new();
        let vc = VirtualClock::new();
        let clock: Arc<dyn Clock> = Arc::new(vc.clone());
        let (ctl, job) = start(spec(sample(name), "[]", &sb), &clock).await;
        ctl.soft_kill(clock.as_ref(), Duration::from_secs(600));
        // No virtual time passes: the vacate alone ends it.
        let r = tokio::time::timeout(Duration::from_secs(60), job).await.expect(name).unwrap();
        assert_eq!(r.ending, Ending::Evicted { vacated: true }, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_job_that_cannot_hear_a_vacate_is_ended_without_running_again() {
    // Resuming it would only give the owner's machine back to a job that is
    // about to be ended: the vacate ends it where it stopped.
    for name in ["spin", "sleeper"] {
        let sb = Sandbox::new();
        let vc = VirtualClock::new();
        let clock: Arc<dyn Clock> = Arc::new(vc.clone());
        let (ctl, job) = start(spec(sample(name), "[]", &sb), &clock).await;
        ctl.suspend(clock.as_ref());
        // The spinner is stopped where it is; the sleeper, waiting on the
        // (virtual) clock, is held back when its wait ends.
        for _ in 0..60_000 {
            if name == "sleeper" || ctl.is_stopped() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(name == "sleeper" || ctl.is_stopped(), "{name}: not stopped by the suspension");
        vc.advance(Duration::from_secs(30));
        ctl.soft_kill(clock.as_ref(), Duration::from_secs(600));
        assert!(ctl.is_suspended(), "{name}: the vacate resumed a job that cannot hear it");
        let r = tokio::time::timeout(Duration::from_secs(60), job).await.expect(name).unwrap();
        assert_eq!(r.ending, Ending::Evicted { vacated: true }, "{name}");
        assert!(ctl.is_suspended(), "{name}");
        // Its suspension lasted to its end.
        assert!(ctl.usage(clock.as_ref()).cumulative_suspension_time >= 30.0, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_job_does_not_disturb_a_good_one_beside_it() {
    let bad_sb = Sandbox::new();
    let ctl = Control::new();
    let bad = tokio::spawn({
        let ctl = ctl.clone();
        let spec = spec(sample("spin"), "[]", &bad_sb);
        async move { HOST.run(spec, ctl, Arc::new(SystemClock)).await }
    });
    let sb = Sandbox::new();
    let r = run(spec(sample("hello"), r#"[ Arguments = "x"; Out = "out.txt" ]"#, &sb)).await;
    assert_eq!(r.ending, Ending::Exited(0));
    assert!(sb.read("out.txt").contains("argv[1] = x"));
    let sb2 = Sandbox::new();
    let r = run(spec(sample("membomb"), "[ RequestMemory = 32 ]", &sb2)).await;
    assert_eq!(held(&r).0, HOLD_MEMORY);
    assert!(!bad.is_finished());
    ctl.hard_kill();
    assert_eq!(bad.await.unwrap().ending, Ending::Evicted { vacated: false });
}

#[test]
fn compiled_modules_are_cached_on_disk_by_digest() {
    let dir = std::env::temp_dir().join(format!("andes-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = HostConfig { max_instances: 2, cache_dir: Some(dir.clone()), ..Default::default() };
    let bytes = sample("hello");
    let digest = andes_starter::engine::module_digest(&bytes);
    let host = Host::new(cfg.clone()).unwrap();
    host.module(&bytes).unwrap();
    assert_eq!(host.compilations(), 1);
    host.module(&bytes).unwrap();
    assert_eq!(host.compilations(), 1, "second load compiled again");
    assert!(host.is_cached_in_memory(&digest));
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .collect();
    assert_eq!(files.len(), 1);
    // A new host (a restart) loads the compiled code from disk.
    let host2 = Host::new(cfg).unwrap();
    host2.module(&bytes).unwrap();
    assert_eq!(host2.compilations(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn limits_come_from_the_job_ad() {
    let ad: ClassAd = parse_ad(
        "[ RequestMemory = 512; RequestDisk = 2048; AllowedExecuteDuration = 60; MaxFuel = 99 ]",
    )
    .unwrap();
    let l = Limits::from_ad(&ad);
    assert_eq!(l.memory_bytes, 512 << 20);
    assert_eq!(l.disk_bytes, 2048 * 1024);
    assert_eq!(l.execute_duration, Some(Duration::from_secs(60)));
    assert_eq!(l.fuel, Some(99));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_invalid_log_line_is_cut_not_a_host_panic() {
    // 5000 bytes of 0xff: each becomes a 3-byte U+FFFD, so the text grows
    // past the line cap and must be cut on a character boundary.
    let sb = Sandbox::new();
    let r = run(spec(
        wat(r#"(module
            (import "andes:job/log@0.1.0" "write" (func $write (param i32 i32 i32)))
            (memory (export "memory") 1)
            (data (i32.const 0) "\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff")
            (func (export "_start")
                (memory.fill (i32.const 16) (i32.const 255) (i32.const 5000))
                (call $write (i32.const 1) (i32.const 0) (i32.const 5000))))"#),
        "[]",
        &sb,
    ))
    .await;
    assert_eq!(r.ending, Ending::Exited(0));
    let (_, line) = &r.log[0];
    assert!(line.len() <= andes_starter::imports::MAX_LOG_LINE && line.starts_with('\u{fffd}'));
}

#[test]
fn each_limit_is_the_smaller_of_the_jobs_request_and_its_slot() {
    let ad = |text: &str| parse_ad(text).unwrap();
    let l = Limits::in_slot(
        &ad("[ RequestMemory = 4096; RequestDisk = 10000000 ]"),
        Some(1024),
        Some(5000),
    );
    assert_eq!(l.memory_bytes, 1024 << 20);
    assert_eq!(l.disk_bytes, 5000 * 1024);
    let l =
        Limits::in_slot(&ad("[ RequestMemory = 64; RequestDisk = 100 ]"), Some(1024), Some(5000));
    assert_eq!(l.memory_bytes, 64 << 20);
    assert_eq!(l.disk_bytes, 100 * 1024);
    // HTCondor's estimates (not numbers) leave the job its slot's.
    let l = Limits::in_slot(
        &ad(
            "[ RequestMemory = ifThenElse(MemoryUsage =!= undefined, MemoryUsage, 1); RequestDisk = DiskUsage ]",
        ),
        Some(1024),
        Some(5000),
    );
    assert_eq!(l.memory_bytes, 1024 << 20);
    assert_eq!(l.disk_bytes, 5000 * 1024);
}
