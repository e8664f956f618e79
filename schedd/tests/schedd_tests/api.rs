//! The schedd's HTTP API on a real socket: every refusal (401, 403, 400, 413) comes
//! with its reason and changes nothing.

use std::sync::Arc;
use std::time::Duration;

use andes_protocol::{Auth, Client, Keypair, ManualClock, TrustFile, Verifier, VerifierConfig};
use andes_schedd::api::{QueryReply, QueryRequest, SubmitRequest};
use andes_schedd::queue::module_digest;
use andes_schedd::schedd::{Schedd, ScheddConfig};
use http::{Method, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MODULE: &[u8] = b"\0asm\x01\0\0\0";
const NOW: i64 = 1_800_000_000;

struct Fixture {
    _dir: tempfile::TempDir,
    url: String,
    addr: std::net::SocketAddr,
    alice: Client,
    bob: Client,
    schedd: Schedd,
}

async fn fixture(body_limit: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let alice = Arc::new(Keypair::from_seed("alice", [1; 32]).unwrap());
    let bob = Arc::new(Keypair::from_seed("bob", [2; 32]).unwrap());
    let trust = TrustFile::parse(
        &format!("user alice {}\nuser bob {}\n", alice.public_line(), bob.public_line()),
        "trust",
    )
    .unwrap();
    let config = ScheddConfig {
        name: "schedd@test".into(),
        data_dir: dir.path().join("spool"),
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
    let schedd = Schedd::open(&config, clock.clone()).unwrap();
    let auth = Auth::with_body_limit(
        Verifier::new(trust, VerifierConfig::default()),
        clock.clone(),
        body_limit,
    );
    let (listener, addr) =
        andes_schedd::schedd::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let server = andes_protocol::Server::plain(listener).unwrap();
    tokio::spawn(andes_schedd::schedd::serve(schedd.clone(), auth, server));
    let url = format!("http://{addr}");
    let client = |k: &Arc<Keypair>| Client::new(&url, k.clone()).unwrap().with_clock(clock.clone());
    Fixture { alice: client(&alice), bob: client(&bob), url, addr, schedd, _dir: dir }
}

fn submit_body(digest: &str) -> SubmitRequest {
    SubmitRequest {
        cluster: None,
        cluster_ad: format!(r#"[Cmd = "job.wasm"; CmdDigest = "{digest}"]"#),
        procs: vec!["[]".into(), "[Args = \"1\"]".into()],
    }
}

async fn status_and_reason(
    c: &Client,
    method: Method,
    path: &str,
    body: Vec<u8>,
) -> (StatusCode, String) {
    let r = c.request(method, path, body.into()).await.unwrap();
    (r.status, r.error_reason().unwrap_or_default())
}

#[tokio::test]
async fn bad_requests_are_refused_with_reasons_and_change_nothing() {
    let f = fixture(1 << 20).await;
    let digest = module_digest(MODULE);
    // No module yet.
    let body = serde_json::to_vec(&submit_body(&digest)).unwrap();
    let (st, why) = status_and_reason(&f.alice, Method::POST, "/v1/submit", body.clone()).await;
    assert_eq!(st, StatusCode::PRECONDITION_FAILED);
    assert!(why.contains("PUT it to /v1/modules/"), "{why}");
    // A module whose bytes do not match its name, and one that is not Wasm.
    let (st, why) = status_and_reason(
        &f.alice,
        Method::PUT,
        &format!("/v1/modules/{digest}"),
        b"\0asm".to_vec(),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{why}");
    let (st, _) =
        status_and_reason(&f.alice, Method::PUT, "/v1/modules/sha256:xyz", MODULE.to_vec()).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (st, _) =
        status_and_reason(&f.alice, Method::PUT, &format!("/v1/modules/{digest}"), MODULE.to_vec())
            .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    // Malformed JSON, a bad ad, a bad cluster reservation.
    let (st, why) =
        status_and_reason(&f.alice, Method::POST, "/v1/submit", b"{\"cluster_ad\": ".to_vec())
            .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(why.contains("EOF") || why.contains("line"), "{why}");
    let mut bad = submit_body(&digest);
    bad.procs[1] = "[Args = ]".into();
    let (st, why) =
        status_and_reason(&f.alice, Method::POST, "/v1/submit", serde_json::to_vec(&bad).unwrap())
            .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(why.starts_with("job 1:"), "{why}");
    let mut bad = submit_body(&digest);
    bad.cluster = Some(77);
    let (st, why) =
        status_and_reason(&f.alice, Method::POST, "/v1/submit", serde_json::to_vec(&bad).unwrap())
            .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(why.contains("not reserved"), "{why}");
    // Too large.
    let huge = vec![b' '; 2 << 20];
    let (st, _) = status_and_reason(&f.alice, Method::POST, "/v1/submit", huge).await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(f.schedd.queue.read().is_empty(), "nothing was queued");
    // And a good one goes through.
    let (st, why) = status_and_reason(&f.alice, Method::POST, "/v1/submit", body).await;
    assert_eq!(st, StatusCode::OK, "{why}");
    assert_eq!(f.schedd.queue.read().len(), 2);
}

#[tokio::test]
async fn unsigned_truncated_and_replayed_requests_are_refused() {
    let f = fixture(1 << 20).await;
    // Unsigned, over a raw socket.
    let mut s = tokio::net::TcpStream::connect(f.addr).await.unwrap();
    s.write_all(
        b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
    )
    .await
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 401"), "{out}");
    assert!(out.contains("error"), "{out}");
    // A signed request whose body is cut short never reaches the queue.
    let req = f.alice.prepare(Method::POST, "/v1/cluster", Vec::new().into()).await.unwrap();
    let mut s = tokio::net::TcpStream::connect(f.addr).await.unwrap();
    let mut head = String::from("POST /v1/cluster HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n");
    for (k, v) in req.headers() {
        if k != http::header::CONTENT_LENGTH {
            head.push_str(&format!("{k}: {}\r\n", v.to_str().unwrap()));
        }
    }
    head.push_str("\r\n0123456789");
    s.write_all(head.as_bytes()).await.unwrap();
    s.shutdown().await.unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    assert!(!out.starts_with("HTTP/1.1 200"), "{out}");
    // Replay: the same signed request twice.
    let body = serde_json::to_vec(&QueryRequest::default()).unwrap();
    let req = f.bob.prepare(Method::POST, "/v1/query", body.into()).await.unwrap();
    let again = {
        let mut b = http::Request::builder().method(req.method()).uri(req.uri());
        for (k, v) in req.headers() {
            b = b.header(k, v);
        }
        b.body(req.body().clone()).unwrap()
    };
    assert_eq!(f.bob.send(req).await.unwrap().status, StatusCode::OK);
    let r = f.bob.send(again).await.unwrap();
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(r.error_reason().unwrap().contains("replay"), "{:?}", r.error_reason());
    let _ = &f.url;
}

#[tokio::test]
async fn another_owners_jobs_are_forbidden() {
    let f = fixture(1 << 20).await;
    let digest = module_digest(MODULE);
    f.alice.request(Method::PUT, &format!("/v1/modules/{digest}"), MODULE.into()).await.unwrap();
    let body = serde_json::to_vec(&submit_body(&digest)).unwrap();
    assert_eq!(
        f.alice.request(Method::POST, "/v1/submit", body.into()).await.unwrap().status,
        StatusCode::OK
    );
    let change = serde_json::json!({"targets": {"ids": [{"Cluster": 1}]}, "change": {"Remove": {"reason": "mine now"}}});
    let (st, why) =
        status_and_reason(&f.bob, Method::POST, "/v1/change", serde_json::to_vec(&change).unwrap())
            .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert!(why.contains("belongs to alice"), "{why}");
    let r: QueryReply =
        f.bob.call(Method::POST, "/v1/query", Some(&QueryRequest::default())).await.unwrap();
    assert_eq!(r.ads.len(), 2, "reading is open to every user; nothing was removed");
}
