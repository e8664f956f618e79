//! A real server on 127.0.0.1 (TLS, as every daemon serves, or plain HTTP where a
//! signature is what authenticates a request) and the real client: every acceptance
//! and rejection, each with its status and reason.

use std::sync::Arc;

use andes_protocol::{
    Auth, Caller, Client, ClientErrorKind, ConnectionInfo, Destination, ErrorBody, Keypair,
    ManualClock, Response, Role, Server, SignedJson, Transport, TrustFile, VerifiedBody, Verifier,
    VerifierConfig, require,
};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};

const T0: i64 = 1_800_000_000;
const LIMIT: usize = 1024;

struct Pool {
    base: String,
    /// Plain HTTP (requests signed) instead of TLS (requests authenticated by their
    /// connection).
    plain: bool,
    auth: Auth,
    trust: Arc<TrustFile>,
    clock: Arc<ManualClock>,
    alice: Arc<Keypair>,
    schedd: Arc<Keypair>,
    root: Arc<Keypair>,
    eve: Arc<Keypair>,
}

impl Pool {
    fn client(&self, kp: &Arc<Keypair>) -> Client {
        let transport =
            if self.plain { Transport::Plain } else { Transport::Tls(self.trust.clone()) };
        Client::with_transport(&self.base, kp.clone(), &transport)
            .unwrap()
            .with_clock(self.clock.clone())
    }
}

#[derive(serde::Deserialize)]
struct Submit {
    cmd: String,
    count: u32,
}

async fn submit(caller: Caller, SignedJson(s): SignedJson<Submit>) -> Json<Value> {
    Json(json!({"owner": caller.identity, "role": caller.role, "cmd": s.cmd, "count": s.count}))
}

async fn whoami(caller: Caller, VerifiedBody(body): VerifiedBody) -> Json<Value> {
    Json(json!({"identity": caller.identity, "role": caller.role, "body_len": body.len()}))
}

async fn start() -> Pool {
    start_with(false).await
}

/// The server over plain HTTP: every request is signed.
async fn start_plain() -> Pool {
    start_with(true).await
}

async fn start_with(plain: bool) -> Pool {
    let kp = |name: &str, seed: u8| Arc::new(Keypair::from_seed(name, [seed; 32]).unwrap());
    let (alice, schedd, root, eve) = (kp("alice", 1), kp("schedd", 2), kp("root", 3), kp("eve", 4));
    let trust = TrustFile::parse(
        &format!(
            "user alice ed25519 {}\nschedd schedd@submit ed25519 {}\nadmin root ed25519 {}\n",
            alice.public(),
            schedd.public(),
            root.public()
        ),
        "trust",
    )
    .unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let auth = Auth::with_body_limit(
        Verifier::new(trust.clone(), VerifierConfig::default()),
        clock.clone(),
        LIMIT,
    );
    let users = Router::new()
        .route("/v1/jobs", post(submit))
        .route("/v1/queue", get(whoami))
        .nest("/v1/nested", Router::new().route("/ping", get(whoami)))
        .layer(require(&[Role::User]));
    let schedds = Router::new().route("/v1/claims", post(whoami)).layer(require(&[Role::Schedd]));
    let app = users.merge(schedds).layer(auth.layer());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = if plain {
        Server::plain(listener).unwrap()
    } else {
        Server::tls(listener, &schedd, &auth).unwrap()
    };
    tokio::spawn(server.serve(app, std::future::pending()));
    Pool {
        base: if plain { format!("http://{addr}") } else { format!("https://{addr}") },
        plain,
        auth,
        trust: Arc::new(trust),
        clock,
        alice,
        schedd,
        root,
        eve,
    }
}

/// Asserts the status and that the `{"error": ...}` reason contains `want`.
fn refused(r: &Response, status: StatusCode, want: &str) {
    assert_eq!(r.status, status, "{:?}", String::from_utf8_lossy(&r.body));
    let body: ErrorBody = r.json().unwrap();
    assert!(body.error.contains(want), "reason {:?} lacks {want:?}", body.error);
}

#[tokio::test]
async fn accepted_with_caller_and_body() {
    let p = start().await;
    let r = p
        .client(&p.alice)
        .post_json("/v1/jobs", &json!({"cmd": "hello.wasm", "count": 3}))
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.json::<Value>().unwrap(),
        json!({"owner": "alice", "role": "user", "cmd": "hello.wasm", "count": 3})
    );
    // A query is part of what is signed; nested routers see the full path.
    let r = p.client(&p.alice).get("/v1/queue?constraint=Owner%3D%3D%22alice%22").await.unwrap();
    assert_eq!(
        r.json::<Value>().unwrap(),
        json!({"identity": "alice", "role": "user", "body_len": 0})
    );
    let r = p.client(&p.alice).get("/v1/nested/ping").await.unwrap();
    assert_eq!(r.status, StatusCode::OK);
    // admin passes a user check; a schedd passes its own.
    let r = p.client(&p.root).get("/v1/queue").await.unwrap();
    assert_eq!(r.json::<Value>().unwrap()["role"], "admin");
    let r = p.client(&p.schedd).post_json("/v1/claims", &json!({})).await.unwrap();
    assert_eq!(r.json::<Value>().unwrap()["identity"], "schedd@submit");
    // The typed call.
    let v: Value = p
        .client(&p.alice)
        .call(Method::POST, "/v1/jobs", Some(&json!({"cmd": "a", "count": 1})))
        .await
        .unwrap();
    assert_eq!(v["owner"], "alice");
}

#[tokio::test]
async fn unsigned_is_401_over_plain_http() {
    let p = start_plain().await;
    let c = p.client(&p.alice);
    let req = http::Request::builder().uri("/v1/queue").body(Full::new(Bytes::new())).unwrap();
    let r = c.send(req).await.unwrap();
    refused(&r, StatusCode::UNAUTHORIZED, "not signed");
}

#[tokio::test]
async fn over_tls_the_connection_authenticates_an_unsigned_request() {
    let p = start().await;
    let c = p.client(&p.alice);
    // What the client sends over TLS: no signature.
    let req = c.prepare(Method::GET, "/v1/queue", Bytes::new()).await.unwrap();
    assert!(andes_protocol::sign::is_unsigned(req.headers()));
    let r = c.send(req).await.unwrap();
    assert_eq!(
        r.json::<Value>().unwrap(),
        json!({"identity": "alice", "role": "user", "body_len": 0})
    );
    // The same unsigned request sent twice is two requests of alice's (no one else
    // can speak on her connection: there is nothing to replay).
    let req = c.prepare(Method::POST, "/v1/jobs", Bytes::from_static(br#"{"cmd":"a","count":1}"#));
    let req = req.await.unwrap();
    let again = req.clone();
    assert_eq!(c.send(req).await.unwrap().status, StatusCode::OK);
    assert_eq!(c.send(again).await.unwrap().status, StatusCode::OK);
    // The body limit and the roles hold as for a signed request.
    let r = c.request(Method::POST, "/v1/jobs", Bytes::from(vec![b' '; LIMIT + 1])).await.unwrap();
    refused(&r, StatusCode::PAYLOAD_TOO_LARGE, "larger than the limit of 1024 bytes");
    let r = c.post_json("/v1/claims", &json!({})).await.unwrap();
    refused(&r, StatusCode::FORBIDDEN, "it needs role schedd");
    // A signed request over TLS is still checked whole: a tampered one is refused.
    let dest = Destination::Key(p.schedd.public());
    let mut req = http::Request::post("/v1/jobs")
        .body(Full::new(Bytes::from_static(br#"{"cmd":"b","count":1}"#)))
        .unwrap();
    andes_protocol::SignedHeaders::sign(&p.alice, &dest, "POST", "/v1/jobs", br#"{"cmd":"a"}"#, T0)
        .apply(req.headers_mut());
    refused(&c.send(req).await.unwrap(), StatusCode::UNAUTHORIZED, "bad signature from alice");
}

#[tokio::test]
async fn a_key_taken_out_of_the_trust_file_is_refused_on_its_open_connection() {
    let p = start().await;
    let c = p.client(&p.alice);
    assert_eq!(c.get("/v1/queue").await.unwrap().status, StatusCode::OK);
    // Alice's key leaves the trust file; her pooled connection stays open.
    let trust =
        TrustFile::parse(&format!("schedd schedd@submit ed25519 {}\n", p.schedd.public()), "trust")
            .unwrap();
    p.auth.verifier().set_trust(trust);
    let r = c.get("/v1/queue").await.unwrap();
    refused(&r, StatusCode::UNAUTHORIZED, "unknown key");
}

#[tokio::test]
async fn tampered_body_path_or_key_is_401() {
    let p = start_plain().await;
    let c = p.client(&p.alice);
    let body = Bytes::from_static(br#"{"cmd":"a","count":1}"#);

    let mut req = c.prepare(Method::POST, "/v1/jobs", body.clone()).await.unwrap();
    *req.body_mut() = Full::new(Bytes::from_static(br#"{"cmd":"b","count":1}"#));
    refused(&c.send(req).await.unwrap(), StatusCode::UNAUTHORIZED, "bad signature from alice");

    let mut req = c.prepare(Method::GET, "/v1/queue?x=1", Bytes::new()).await.unwrap();
    *req.uri_mut() = "/v1/queue?x=2".parse().unwrap();
    refused(&c.send(req).await.unwrap(), StatusCode::UNAUTHORIZED, "bad signature");

    // Signed by alice, claiming to be root: the signature is not root's.
    let mut req = c.prepare(Method::POST, "/v1/jobs", body).await.unwrap();
    req.headers_mut()
        .insert("andes-key", HeaderValue::from_str(&p.root.public().to_base64()).unwrap());
    refused(&c.send(req).await.unwrap(), StatusCode::UNAUTHORIZED, "bad signature from root");

    let mut req = c.prepare(Method::GET, "/v1/queue", Bytes::new()).await.unwrap();
    req.headers_mut().insert("andes-signature", HeaderValue::from_static("bm90IGEgc2lnbmF0dXJl"));
    refused(&c.send(req).await.unwrap(), StatusCode::UNAUTHORIZED, "malformed Andes-Signature");
}

#[tokio::test]
async fn unknown_key_is_refused_at_the_handshake() {
    let p = start().await;
    let e = p.client(&p.eve).get("/v1/queue").await.unwrap_err();
    assert!(matches!(e.kind, ClientErrorKind::Connect(_)), "{e:?}");
    let want = format!("refused this key (eve {}) in the TLS handshake", p.eve.public());
    assert!(e.to_string().contains(&want), "{e}");
    assert!(e.to_string().contains("not in the pool's trust file"), "{e}");
}

#[tokio::test]
async fn expired_or_early_is_401() {
    let p = start_plain().await;
    let late = Arc::new(ManualClock::new(T0 - 301));
    let c = p.client(&p.alice).with_clock(late.clone());
    refused(&c.get("/v1/queue").await.unwrap(), StatusCode::UNAUTHORIZED, "301 s behind");
    late.set(T0 + 1000);
    refused(&c.get("/v1/queue").await.unwrap(), StatusCode::UNAUTHORIZED, "1000 s ahead of");
    late.set(T0 - 300);
    assert_eq!(c.get("/v1/queue").await.unwrap().status, StatusCode::OK);
    // The same request becomes stale as the server's clock moves on.
    let req = p.client(&p.alice).prepare(Method::GET, "/v1/queue", Bytes::new()).await.unwrap();
    p.clock.advance(301);
    refused(&p.client(&p.alice).send(req).await.unwrap(), StatusCode::UNAUTHORIZED, "behind");
}

#[tokio::test]
async fn replay_is_401() {
    let p = start_plain().await;
    let c = p.client(&p.alice);
    let req = c
        .prepare(Method::POST, "/v1/jobs", Bytes::from_static(br#"{"cmd":"a","count":1}"#))
        .await
        .unwrap();
    let again = req.clone();
    assert_eq!(c.send(req).await.unwrap().status, StatusCode::OK);
    refused(&c.send(again).await.unwrap(), StatusCode::UNAUTHORIZED, "replayed request");
}

#[tokio::test]
async fn wrong_role_is_403() {
    let p = start().await;
    let r = p.client(&p.alice).post_json("/v1/claims", &json!({})).await.unwrap();
    refused(
        &r,
        StatusCode::FORBIDDEN,
        "alice (role user) may not use this route; it needs role schedd",
    );
    let r = p.client(&p.schedd).get("/v1/queue").await.unwrap();
    refused(&r, StatusCode::FORBIDDEN, "role schedd");
    // admin passes user checks only.
    let r = p.client(&p.root).post_json("/v1/claims", &json!({})).await.unwrap();
    refused(&r, StatusCode::FORBIDDEN, "role admin");
}

#[tokio::test]
async fn too_large_is_413() {
    let p = start().await;
    let c = p.client(&p.alice);
    let r = c.request(Method::POST, "/v1/jobs", Bytes::from(vec![b' '; LIMIT + 1])).await.unwrap();
    refused(&r, StatusCode::PAYLOAD_TOO_LARGE, "larger than the limit of 1024 bytes");
    let mut ok = br#"{"cmd":"a","count":1}"#.to_vec();
    ok.resize(LIMIT, b' ');
    assert_eq!(
        c.request(Method::POST, "/v1/jobs", ok.into()).await.unwrap().status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn malformed_json_is_400() {
    let p = start().await;
    let c = p.client(&p.alice);
    let r = c.request(Method::POST, "/v1/jobs", Bytes::from_static(b"{\"cmd\": 1}")).await.unwrap();
    refused(
        &r,
        StatusCode::BAD_REQUEST,
        "malformed JSON body: invalid type: integer `1`, expected a string at line 1 column 9",
    );
    let r = c.request(Method::POST, "/v1/jobs", Bytes::from_static(b"{\"cmd\":")).await.unwrap();
    refused(&r, StatusCode::BAD_REQUEST, "malformed JSON body: EOF while parsing");
    let r = c.request(Method::POST, "/v1/jobs", Bytes::new()).await.unwrap();
    refused(&r, StatusCode::BAD_REQUEST, "the body is empty");
    // The typed call carries the reason.
    let e =
        c.call::<_, Value>(Method::POST, "/v1/jobs", Some(&json!({"cmd": "x"}))).await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("400 Bad Request: malformed JSON body: missing field `count`"), "{msg}");
    assert!(msg.starts_with(&format!("POST {}/v1/jobs: ", p.base)), "{msg}");
}

#[tokio::test]
async fn streamed_body_over_the_limit_is_413_without_content_length() {
    let p = start().await;
    let trust = TrustFile::parse(&format!("user alice ed25519 {}", p.alice.public()), "t").unwrap();
    let auth =
        Auth::with_body_limit(Verifier::new(trust, VerifierConfig::default()), p.clock.clone(), 10);
    let mut req = axum::extract::Request::new(axum::body::Body::new(Endless));
    *req.uri_mut() = "/x".parse().unwrap();
    let here = "127.0.0.1:9618".parse().unwrap();
    req.extensions_mut().insert(ConnectionInfo {
        peer_key: None,
        local_key: None,
        local_addr: here,
        remote_addr: here,
    });
    let dest = Destination::Addr(here.to_string());
    andes_protocol::SignedHeaders::sign(&p.alice, &dest, "GET", "/x", b"", T0)
        .apply(req.headers_mut());
    let e = auth.authenticate(req).await.unwrap_err();
    assert_eq!(e, andes_protocol::AuthError::TooLarge { limit: 10 });
}

/// A body that never ends and declares no length.
struct Endless;

impl http_body::Body for Endless {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        std::task::Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(b"0123456789")))))
    }
}

#[tokio::test]
async fn connection_refused_names_the_daemon() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let kp = Arc::new(Keypair::from_seed("alice", [1; 32]).unwrap());
    let e = Client::new(&format!("http://{addr}"), kp).unwrap().get("/v1/queue").await.unwrap_err();
    assert!(matches!(e.kind, ClientErrorKind::Refused(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!("GET http://{addr}/v1/queue: connection refused: is the daemon running at {addr}?")
    );
}

#[tokio::test]
async fn bad_base_urls() {
    let kp = Arc::new(Keypair::from_seed("alice", [1; 32]).unwrap());
    for (url, want) in [
        ("https://127.0.0.1:1", "https:// needs TLS"),
        ("ftp://h:1", "expected HOST:PORT"),
        ("127.0.0.1", "no port"),
        ("http://", "http://: bad URL: not a URL"),
        ("192.0.2.1:9618", "plain HTTP is only for daemons on 127.0.0.1"),
        ("example.org:9618", "plain HTTP is only for daemons on 127.0.0.1"),
    ] {
        let e = Client::with_transport(url, kp.clone(), &Transport::Plain).unwrap_err();
        assert!(e.to_string().contains(want), "{url}: {e}");
    }
    for url in ["127.0.0.1:9618", "http://localhost:9618/prefix", "[::1]:9618"] {
        Client::with_transport(url, kp.clone(), &Transport::Plain).unwrap();
    }
}
