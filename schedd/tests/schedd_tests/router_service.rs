//! The job router in a schedd: entries from JOB_ROUTER_ENTRIES_CMD,
//! refreshed every JOB_ROUTER_ENTRIES_REFRESH; a failing command keeps the
//! table it had.

use std::sync::Arc;
use std::time::{Duration, Instant};

use andes_protocol::{Keypair, ManualClock};
use andes_schedd::router::service::{JobRouter, RouterConfig, load_table};
use andes_schedd::schedd::{Schedd, ScheddConfig};

fn config(dir: &std::path::Path, cmd: &str) -> RouterConfig {
    RouterConfig {
        defaults: Some("[ MaxIdleJobs = 7 ]".into()),
        entries: Some(r#"[ Name = "fixed"; GridResource = "andes 127.0.0.1:1" ]"#.into()),
        entries_file: None,
        named: Default::default(),
        entries_cmd: Some(cmd.into()),
        entries_refresh: Duration::from_secs(1),
        source_constraint: None,
        polling_period: Duration::from_secs(3600),
        history: dir.join("router_history.jsonl"),
        work_dir: dir.join("router"),
        andes: std::path::PathBuf::from("andes"),
    }
}

fn schedd(dir: &std::path::Path) -> Schedd {
    let sc = ScheddConfig {
        name: "schedd@test".into(),
        data_dir: dir.join("spool"),
        periodic_interval: Duration::from_secs(60),
        history_max_jobs: 100,
        history_max_age: None,
        submit_host: "<127.0.0.1:0>".into(),
        cron_time_zone: jiff::tz::TimeZone::UTC,
        schedd_interval: 300,
        // Every user is the schedd's own account here.
        accounts: std::sync::Arc::new(
            andes_schedd::userfs::Accounts::fixed("tester", false, "* = tester", |_| None).unwrap(),
        ),
        uid_domain: None,
        job_limits: Default::default(),
        spool_quota: andes_schedd::queue::DEFAULT_UPLOAD_QUOTA_BYTES,
        spool_reserve: Some(0),
    };
    Schedd::open(&sc, Arc::new(ManualClock::new(1_800_000_000))).unwrap()
}

fn names(r: &JobRouter) -> Vec<String> {
    r.table().routes.iter().map(|r| r.name.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_from_a_command_are_refreshed() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.txt");
    std::fs::write(&routes, r#"[ Name = "from-cmd"; GridResource = "andes 127.0.0.1:2" ]"#)
        .unwrap();
    let cmd = format!("cat '{}'", routes.display());
    let cfg = config(dir.path(), &cmd);
    // Loaded once: both sources, each merged over the defaults.
    let t = load_table(&cfg).unwrap();
    assert_eq!(t.routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["fixed", "from-cmd"]);
    assert!(t.routes.iter().all(|r| r.max_idle_jobs == 7));

    let schedd = schedd(dir.path());
    let key = Arc::new(Keypair::from_seed("router", [7; 32]).unwrap());
    let router = JobRouter::start(&schedd, cfg, key).unwrap();
    assert_eq!(names(&router), ["fixed", "from-cmd"]);
    // The command's output changes: the next refresh takes it.
    std::fs::write(
        &routes,
        "[ Name = \"from-cmd\"; GridResource = \"andes 127.0.0.1:2\" ]\n\
         [ Name = \"added\"; GridResource = \"slurm debug\" ]\n",
    )
    .unwrap();
    let start = Instant::now();
    while names(&router).len() != 3 {
        assert!(start.elapsed() < Duration::from_secs(20), "not refreshed: {:?}", names(&router));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(names(&router), ["fixed", "from-cmd", "added"]);
    // A command that fails, or prints a bad table, leaves the table as it was.
    std::fs::write(&routes, "[ Name = ").unwrap();
    let seen = router.reloads();
    let start = Instant::now();
    while router.reloads() < seen + 2 {
        assert!(start.elapsed() < Duration::from_secs(20), "no refresh");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(names(&router), ["fixed", "from-cmd", "added"]);
    let bad = config(dir.path(), "exit 3");
    let e = load_table(&bad).unwrap_err();
    assert!(e.to_string().contains("JOB_ROUTER_ENTRIES_CMD"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_jobs_within_the_source_constraint_are_routed() {
    use andes_schedd::job::JobId;
    use andes_schedd::queue::{Actor, factor};
    let dir = tempfile::tempdir().unwrap();
    let schedd = schedd(dir.path());
    let mut cfg = config(dir.path(), "true");
    cfg.entries_cmd = None;
    cfg.source_constraint = Some("Owner == \"alice\" && RequestMemory < 100".into());
    let key = Arc::new(Keypair::from_seed("router", [7; 32]).unwrap());
    let router = JobRouter::start(&schedd, cfg, key).unwrap();
    let mut ids = Vec::new();
    for (who, mem) in [("alice", 64), ("alice", 512), ("bob", 64)] {
        let ad = classad::parse_ad(&format!(r#"[Cmd = "j.wasm"; RequestMemory = {mem}]"#)).unwrap();
        let c =
            schedd.queue.submit(&Actor::user(who), factor(vec![ad]), 1_800_000_000).await.unwrap();
        ids.push(JobId::new(c, 0));
    }
    router.pass().await;
    let routed: Vec<bool> = ids
        .iter()
        .map(|id| schedd.queue.read().job(*id).unwrap().ad().contains("RoutedToJobId"))
        .collect();
    assert_eq!(routed, [true, false, false]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_in_place_route_transforms_the_job_once() {
    use andes_schedd::job::JobId;
    use andes_schedd::queue::{Actor, factor};
    let dir = tempfile::tempdir().unwrap();
    let schedd = schedd(dir.path());
    let mut cfg = config(dir.path(), "true");
    cfg.entries_cmd = None;
    // Eval_Set_ sees the job being transformed as MY.
    cfg.entries = Some(
        r#"[ Name = "tag"; EditJobInPlace = true; Requirements = TARGET.Tagged =?= undefined;
             Set_Tagged = true; Eval_Set_RequestMemory = RequestMemory * 2 ]"#
            .into(),
    );
    let key = Arc::new(Keypair::from_seed("router", [7; 32]).unwrap());
    let router = JobRouter::start(&schedd, cfg, key).unwrap();
    let ad = classad::parse_ad(r#"[Cmd = "j.wasm"; RequestMemory = 64]"#).unwrap();
    let c =
        schedd.queue.submit(&Actor::user("alice"), factor(vec![ad]), 1_800_000_000).await.unwrap();
    let id = JobId::new(c, 0);
    router.pass().await;
    router.pass().await;
    let ad = schedd.queue.read().job(id).unwrap().ad();
    assert_eq!(ad.eval_attr("Tagged"), classad::Value::Bool(true));
    assert_eq!(ad.eval_attr("RequestMemory"), classad::Value::Int(128), "edited once, not twice");
    assert!(!ad.contains("RoutedToJobId"), "edited in place, not routed");
    assert_eq!(schedd.queue.read().len(), 1, "no copy");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_refresh_of_zero_runs_the_command_once_and_the_entries_file_is_read_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let cmd = format!(
        "echo run >> '{}'; echo '[ Name = \"cmd\"; GridResource = \"andes 127.0.0.1:3\" ]'",
        runs.display()
    );
    let file = dir.path().join("entries");
    std::fs::write(&file, r#"[ Name = "file1"; GridResource = "andes 127.0.0.1:4" ]"#).unwrap();
    let mut cfg = config(dir.path(), &cmd);
    // HTCondor's JOB_ROUTER_ENTRIES_REFRESH = 0: never run the command again.
    cfg.entries_refresh = Duration::ZERO;
    cfg.entries_file = Some(file.clone());
    let schedd = schedd(dir.path());
    let key = Arc::new(Keypair::from_seed("router", [7; 32]).unwrap());
    let router = JobRouter::start(&schedd, cfg, key).unwrap();
    assert_eq!(names(&router), ["fixed", "file1", "cmd"]);
    // A day of (virtual) time: the command ran once, at start.
    tokio::time::sleep(Duration::from_secs(86_400)).await;
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 1);
    assert_eq!(router.reloads(), 0);
    // The file changes: it is read again within a second or two.
    std::fs::write(
        &file,
        "[ Name = \"file2\"; GridResource = \"andes 127.0.0.1:5\" ]\n\
         [ Name = \"file3\"; GridResource = \"slurm debug\" ]\n",
    )
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(names(&router), ["fixed", "file2", "file3", "cmd"]);
    // A file that cannot be read keeps the table it had.
    std::fs::remove_file(&file).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(names(&router), ["fixed", "file2", "file3", "cmd"]);
}

/// A target pool that lies: it says the routed job completed, states
/// `size` bytes of output, and streams zeros without end to whoever asks;
/// or (`in_queue` false) has let the job leave its queue with its output.
mod lying_target {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::routing::{post, put};

    /// How many times its output file was asked for.
    pub struct Target {
        pub addr: String,
        pub downloads: Arc<AtomicUsize>,
    }

    pub async fn start(size: u64, in_queue: bool) -> Target {
        let downloads = Arc::new(AtomicUsize::new(0));
        let ended = format!(
            r#"[ ClusterId = 1; ProcId = 0; JobStatus = 4; ExitCode = 0; {} = "" ]"#,
            andes_schedd::transfer::SPOOLED_INPUT
        );
        let json = |v: serde_json::Value| {
            ([(http::header::CONTENT_TYPE, "application/json")], v.to_string())
        };
        let (queued, history, transfer) = {
            let ad = ended.clone();
            let q = if in_queue { vec![ad.clone()] } else { vec![] };
            let reply = serde_json::json!({
                "ad": ad,
                "files": [{ "name": "_andes_stdout", "streamed": { "size": size } }],
                "log": "",
            });
            (serde_json::json!({ "ads": q }), serde_json::json!({ "ads": [ad] }), reply)
        };
        let d = downloads.clone();
        let app = Router::new()
            .route("/v1/uploads/{digest}", put(move || async move { json(serde_json::json!({})) }))
            .route(
                "/v1/submit",
                post(move || async move { json(serde_json::json!({ "cluster": 1, "count": 1 })) }),
            )
            .route("/v1/query", post(move || async move { json(queued) }))
            .route("/v1/history", post(move || async move { json(history) }))
            .route(
                "/v1/transfer",
                post(move || async move {
                    if in_queue {
                        Ok(json(transfer))
                    } else {
                        Err((http::StatusCode::NOT_FOUND, "no job 1.0 in the queue"))
                    }
                }),
            )
            .route(
                "/v1/transfer/file",
                post(move || {
                    d.fetch_add(1, Ordering::SeqCst);
                    async move {
                        let zeros = futures_util::stream::repeat_with(|| {
                            Ok::<_, std::io::Error>(bytes::Bytes::from_static(&[0; 65536]))
                        });
                        axum::body::Body::from_stream(zeros)
                    }
                }),
            )
            .route("/v1/change", post(move || async move { json(serde_json::json!({})) }))
            .route("/v1/transfer/done", post(move || async move { json(serde_json::json!({})) }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Target { addr, downloads }
    }
}

/// Routes one job of 1 MiB RequestDisk to `target` and runs passes until
/// its copy is held: the hold reason.
async fn routed_copy_held(dir: &std::path::Path, target: &str) -> String {
    use andes_schedd::job::JobStatus;
    use andes_schedd::queue::{Actor, factor};
    let schedd = schedd(dir);
    let mut cfg = config(dir, "true");
    cfg.entries_cmd = None;
    cfg.entries = Some(format!(r#"[ Name = "liar"; GridResource = "andes {target}" ]"#));
    let key = Arc::new(Keypair::from_seed("router", [7; 32]).unwrap());
    let router = JobRouter::start(&schedd, cfg, key).unwrap();
    let module = dir.join("j.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    let ad = classad::parse_ad(&format!(
        r#"[Cmd = "{}"; Iwd = "{}"; RequestDisk = 1024; Out = "out.txt"]"#,
        module.display(),
        dir.display()
    ))
    .unwrap();
    schedd.queue.submit(&Actor::user("alice"), factor(vec![ad]), 1_800_000_000).await.unwrap();
    for _ in 0..10 {
        router.pass().await;
        router.follow().await;
        let q = schedd.queue.read();
        if let Some(j) = q.jobs().find(|j| j.proc.status == JobStatus::Held) {
            return match j.ad().eval_attr("HoldReason") {
                classad::Value::Str(s) => s.to_string(),
                v => panic!("HoldReason {v:?}"),
            };
        }
    }
    let ads: Vec<String> = schedd.queue.read().jobs().map(|j| j.ad().to_string()).collect();
    panic!("no copy was held in ten passes: {ads:#?}");
}

/// A target the source trusts states more output than the copy's
/// RequestDisk: the schedd refuses it before downloading a byte, and holds
/// the copy with why, rather than filling its disk or asking again forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_a_target_states_beyond_request_disk_is_refused_and_the_copy_held() {
    let dir = tempfile::tempdir().unwrap();
    let target = lying_target::start(8 << 30, true).await;
    let reason = routed_copy_held(dir.path(), &target.addr).await;
    assert!(reason.contains("8589934592 bytes") && reason.contains("RequestDisk"), "{reason}");
    assert_eq!(target.downloads.load(std::sync::atomic::Ordering::SeqCst), 0, "downloaded");
    assert!(!dir.path().join("out.txt").exists());
}

/// A completed spooled job gone from the target's queue with its output:
/// the copy is held, saying so, instead of being retried every pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_whose_output_left_the_targets_queue_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let target = lying_target::start(10, false).await;
    let reason = routed_copy_held(dir.path(), &target.addr).await;
    assert!(reason.contains("has left its queue"), "{reason}");
}
