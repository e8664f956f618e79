//! Files as streamed bodies between a real server and the real client over TLS: far
//! larger than the server's body limit, checked against the signed digest, refused
//! clearly where a route takes the other kind of body.

use std::io::Write;
use std::sync::Arc;

use andes_protocol::stream::{self, SignedStream, StreamError};
use andes_protocol::{
    Auth, Client, ClientErrorKind, ErrorBody, Keypair, ManualClock, Role, Server, SignedJson,
    Transport, TrustFile, Verifier, VerifierConfig, require,
};
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::routing::{post, put};
use axum::{Json, Router};
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};

const T0: i64 = 1_800_000_000;
/// The server's limit for whole (JSON) bodies: every file here is larger.
const BODY_LIMIT: usize = 1024;
/// The upload route's own limit.
const FILE_LIMIT: u64 = 64 << 20;

async fn put_file(
    State(dir): State<Arc<tempfile::TempDir>>,
    Path(name): Path<String>,
    body: SignedStream,
) -> axum::response::Response {
    let tmp = dir.path().join(format!(".{name}.part"));
    let file = std::fs::File::create(&tmp).unwrap();
    match body.write_to(file, FILE_LIMIT).await {
        Ok((len, _)) => {
            std::fs::rename(&tmp, dir.path().join(&name)).unwrap();
            Json(json!({"len": len})).into_response()
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            andes_protocol::AuthError::from(e).into_response()
        }
    }
}

#[derive(serde::Deserialize)]
struct Get {
    name: String,
}

async fn get_file(
    State(dir): State<Arc<tempfile::TempDir>>,
    SignedJson(g): SignedJson<Get>,
) -> axum::response::Response {
    let file = std::fs::File::open(dir.path().join(g.name)).unwrap();
    let len = file.metadata().unwrap().len();
    stream::file_response(file, len)
}

struct Fixture {
    client: Client,
    dir: Arc<tempfile::TempDir>,
    scratch: tempfile::TempDir,
}

async fn start() -> Fixture {
    let alice = Arc::new(Keypair::from_seed("alice", [1; 32]).unwrap());
    let server_key = Keypair::from_seed("schedd", [2; 32]).unwrap();
    let trust = TrustFile::parse(
        &format!(
            "user alice ed25519 {}\nschedd schedd@submit ed25519 {}\n",
            alice.public(),
            server_key.public()
        ),
        "trust",
    )
    .unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let auth = Auth::with_body_limit(
        Verifier::new(trust.clone(), VerifierConfig::default()),
        clock.clone(),
        BODY_LIMIT,
    );
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let app = Router::new()
        .route("/v1/files/{name}", put(put_file))
        .route("/v1/get", post(get_file))
        .layer(require(&[Role::User]))
        .layer(auth.layer())
        .with_state(dir.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Server::tls(listener, &server_key, &auth).unwrap();
    tokio::spawn(server.serve(app, std::future::pending()));
    let client =
        Client::with_transport(&format!("https://{addr}"), alice, &Transport::Tls(Arc::new(trust)))
            .unwrap()
            .with_clock(clock);
    Fixture { client, dir, scratch: tempfile::tempdir().unwrap() }
}

fn file_of(dir: &std::path::Path, name: &str, len: usize) -> (std::path::PathBuf, Vec<u8>) {
    let mut data = Vec::with_capacity(len);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    while data.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(len);
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().write_all(&data).unwrap();
    (p, data)
}

fn reason(r: &andes_protocol::Response) -> String {
    r.json::<ErrorBody>().map(|e| e.error).unwrap_or_default()
}

#[tokio::test]
async fn a_file_far_larger_than_the_body_limit_goes_up_and_comes_back_whole() {
    let f = start().await;
    let len = 40 << 20;
    let (path, data) = file_of(f.scratch.path(), "big", len + 3);
    let r = f
        .client
        .upload(Method::PUT, "/v1/files/big", std::fs::File::open(&path).unwrap(), &[])
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", reason(&r));
    assert_eq!(r.json::<Value>().unwrap()["len"], len as u64 + 3);
    assert!(std::fs::read(f.dir.path().join("big")).unwrap() == data);

    let out = f.scratch.path().join("back");
    let (w, _) = f
        .client
        .download(
            "/v1/get",
            &json!({"name": "big"}),
            std::fs::File::create(&out).unwrap(),
            FILE_LIMIT,
        )
        .await
        .unwrap();
    assert_eq!(w.len, len as u64 + 3);
    let mut again = std::fs::File::open(&out).unwrap();
    assert_eq!(stream::file_sha256(&mut again).unwrap().0, w.sha256);
    assert!(std::fs::read(&out).unwrap() == data);

    // A download past the caller's limit stops there.
    let e = f
        .client
        .download(
            "/v1/get",
            &json!({"name": "big"}),
            std::fs::File::create(f.scratch.path().join("cut")).unwrap(),
            1 << 20,
        )
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ClientErrorKind::Transfer(StreamError::TooLarge { .. })), "{e}");
}

#[tokio::test]
async fn a_body_that_is_not_the_one_signed_is_refused_and_nothing_is_kept() {
    let f = start().await;
    // Signed over "the real file", sent with other bytes of the same length.
    let signed = Bytes::from_static(b"the real file");
    let mut req = f.client.prepare(Method::PUT, "/v1/files/x", signed.clone()).await.unwrap();
    let digest = hex::encode(andes_protocol::sign::body_digest(&signed));
    req.headers_mut().insert(stream::BODY_SHA256, HeaderValue::try_from(digest).unwrap());
    *req.body_mut() = Full::new(Bytes::from_static(b"the fake file"));
    let r = f.client.send(req).await.unwrap();
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", reason(&r));
    assert!(reason(&r).contains("not the"), "{}", reason(&r));
    assert!(!f.dir.path().join("x").exists());

    // A digest header that is not one.
    let mut req = f.client.prepare(Method::PUT, "/v1/files/y", signed).await.unwrap();
    req.headers_mut().insert(stream::BODY_SHA256, HeaderValue::from_static("abc"));
    let r = f.client.send(req).await.unwrap();
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", reason(&r));
    assert!(reason(&r).contains("Andes-Body-Sha256"), "{}", reason(&r));
}

#[tokio::test]
async fn each_route_says_which_kind_of_body_it_takes() {
    let f = start().await;
    // A stream where JSON is expected.
    let (path, _) = file_of(f.scratch.path(), "j", 10);
    let r = f
        .client
        .upload(Method::POST, "/v1/get", std::fs::File::open(&path).unwrap(), &[])
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(reason(&r).contains("not a streamed one"), "{}", reason(&r));
    // A whole body where a stream is expected: taken as well, within the
    // server's body limit.
    let r = f.client.request(Method::PUT, "/v1/files/z", Bytes::from_static(b"{}")).await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", reason(&r));
    assert_eq!(std::fs::read(f.dir.path().join("z")).unwrap(), b"{}");
    let r = f.client.request(Method::PUT, "/v1/files/z", vec![0u8; BODY_LIMIT + 1].into()).await;
    assert_eq!(r.unwrap().status, StatusCode::PAYLOAD_TOO_LARGE);
    // More than the route takes: refused from the declared length.
    let (path, _) = file_of(f.scratch.path(), "huge", FILE_LIMIT as usize + 1);
    let r = f
        .client
        .upload(Method::PUT, "/v1/files/huge", std::fs::File::open(&path).unwrap(), &[])
        .await;
    // The refusal comes before the body is read: the client hears it, or, when
    // the server closed while it was still sending, says so.
    match r {
        Ok(r) => assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", reason(&r)),
        Err(e) => assert!(e.to_string().contains("refuses a file it cannot take"), "{e}"),
    }
    assert!(!f.dir.path().join("huge").exists());
}
