//! Crash safety: the schedd, a real process, is killed with SIGKILL at random
//! moments while several clients submit; after each restart, and at the end, every
//! acknowledged job is present exactly once and no cluster is half-present.
//!
//! `ANDES_CRASH_KILLS` sets the number of kills (default 15; the verification run
//! when this test was written used 200).

#![cfg(unix)]

use crate::common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use andes_protocol::{Client, Keypair, Transport, TrustFile};
use andes_schedd::api::{QueryReply, QueryRequest, SubmitReply, SubmitRequest};
use common::Lcg;
use http::Method;

const MODULE: &[u8] = b"\0asm\x01\0\0\0";
const PROCS: usize = 2;

/// Starts the schedd on `listen`. A restart on the old port can find it
/// taken for a moment: the clients keep connecting to it while the schedd
/// is down, and an outgoing connection may be given that very port (a TCP
/// self-connect). The schedd then exits at once; it is started again.
fn start_schedd(dir: &Path, listen: &str) -> Child {
    let addr_file = dir.join("spool").join(".schedd_address");
    let log = dir.join("schedd.err");
    let mut exits = Vec::new();
    loop {
        let _ = std::fs::remove_file(&addr_file);
        let mut child = Command::new(env!("CARGO_BIN_EXE_andes"))
            .args(["schedd", "--listen", listen])
            .env("ANDES_CONFIG_DIR", dir)
            .env_remove("ANDES_CONFIG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let exited = loop {
            if addr_file.exists() {
                return child;
            }
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "the schedd did not start");
            std::thread::sleep(Duration::from_millis(5));
        };
        let err = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            err.contains("in use") && exits.len() < 50,
            "the schedd exited: {exited}\n{err}\nearlier exits: {exits:?}"
        );
        exits.push(err);
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn acknowledged_jobs_survive_kill_9() {
    let kills: usize =
        std::env::var("ANDES_CRASH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(15);
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let kp = Keypair::generate("alice").unwrap();
    kp.save(&keys, false).unwrap();
    let schedd_key = Keypair::generate("schedd").unwrap();
    schedd_key.save(&keys, false).unwrap();
    let trust =
        format!("user alice {}\nschedd schedd {}\n", kp.public_line(), schedd_key.public_line());
    std::fs::write(dir.path().join("trust"), &trust).unwrap();
    let transport = Transport::Tls(Arc::new(TrustFile::parse(&trust, "trust").unwrap()));
    // alice is this test's own account, for the schedd's file work.
    let me = whoami::fallible::username().unwrap_or_else(|_| "root".into());
    let map = format!("USER_ACCOUNT_MAP = alice = {me}\n");
    std::fs::write(dir.path().join("andes.config"), map).unwrap();
    let mut schedd = start_schedd(dir.path(), "127.0.0.1:0");
    let addr: SocketAddr = std::fs::read_to_string(dir.path().join("spool/.schedd_address"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let url = addr.to_string();
    let kp = Arc::new(kp);
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let digest = andes_schedd::queue::module_digest(MODULE);
    let client = Client::with_transport(&url, kp.clone(), &transport)
        .unwrap()
        .with_timeout(Duration::from_secs(300));
    rt.block_on(async {
        let r = client.request(Method::PUT, &format!("/v1/modules/{digest}"), MODULE.into()).await;
        assert!(r.unwrap().status.is_success());
    });

    // Clients: each submits 2-job clusters tagged uniquely per attempt, and records
    // the tags of acknowledged submits.
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..4 {
        let (acked, stop, url, kp, digest, transport) = (
            acked.clone(),
            stop.clone(),
            url.clone(),
            kp.clone(),
            digest.clone(),
            transport.clone(),
        );
        tasks.push(rt.spawn(async move {
            let client = Client::with_transport(&url, kp, &transport)
                .unwrap()
                .with_timeout(Duration::from_secs(10));
            let mut attempt = 0u64;
            while !stop.load(Ordering::Relaxed) {
                attempt += 1;
                let tag = format!("c{c}-{attempt}");
                let req = SubmitRequest {
                    cluster: None,
                    cluster_ad: format!(
                        r#"[Cmd = "job.wasm"; CmdDigest = "{digest}"; Tag = "{tag}"]"#
                    ),
                    procs: (0..PROCS).map(|p| format!("[Part = {p}]")).collect(),
                };
                let r: Result<SubmitReply, _> =
                    client.call(Method::POST, "/v1/submit", Some(&req)).await;
                match r {
                    Ok(_) => acked.lock().unwrap().push(tag),
                    Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
                }
            }
        }));
    }

    let query =
        QueryRequest { projection: vec!["Tag".into(), "Part".into()], ..Default::default() };
    let check = |client: &Client, acked: &[String]| {
        let r: QueryReply =
            rt.block_on(client.call(Method::POST, "/v1/query", Some(&query))).unwrap();
        let mut seen: HashMap<String, Vec<i64>> = HashMap::new();
        for text in &r.ads {
            let ad = classad::parse_ad(text).unwrap();
            let tag = ad.eval_attr("Tag");
            let part = ad.eval_attr("Part");
            let (classad::Value::Str(tag), classad::Value::Int(part)) = (tag, part) else {
                panic!("a job without its attributes: {text}");
            };
            seen.entry(tag.to_string()).or_default().push(part);
        }
        for (tag, parts) in &seen {
            let mut p = parts.clone();
            p.sort();
            assert_eq!(
                p,
                (0..PROCS as i64).collect::<Vec<_>>(),
                "cluster {tag} is half-present or doubled"
            );
        }
        for tag in acked {
            assert!(seen.contains_key(tag), "acknowledged submit {tag} was lost");
        }
        seen.len()
    };

    let mut rng = Lcg(0x5eed ^ std::process::id() as u64);
    for _ in 0..kills {
        std::thread::sleep(Duration::from_millis(20 + rng.next(80)));
        schedd.kill().unwrap();
        schedd.wait().unwrap();
        let acked_now = acked.lock().unwrap().clone();
        schedd = start_schedd(dir.path(), &addr.to_string());
        check(&client, &acked_now);
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        rt.block_on(t).unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let present = check(&client, &acked);
    schedd.kill().unwrap();
    schedd.wait().unwrap();
    eprintln!("{kills} kills: {} submits acknowledged, {present} clusters present", acked.len());
    assert!(acked.len() > kills, "too few submits got through to mean anything");
}
