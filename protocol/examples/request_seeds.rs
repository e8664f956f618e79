//! Writes the seed corpus of the `request` fuzz target (`fuzz/fuzz_targets/request.rs`)
//! into the directory given: `cargo run -p andes-protocol --example request_seeds fuzz/corpus/request`.
//!
//! Each seed is a flag byte, `METHOD\nPATH\n`, header lines, an empty line and the body.
//! The signed seeds use the fuzz target's trusted key, its fixed "now" and its
//! destination ([`DESTINATION`]).

use std::path::PathBuf;

use andes_protocol::{Destination, Keypair, SignedHeaders};
use http::HeaderMap;

const NOW: i64 = 1_800_000_000;
/// The daemon the fuzz target's verifier stands for: a loopback one over plain HTTP.
const DESTINATION: &str = "127.0.0.1:9618";

fn seed(flags: u8, method: &str, path: &str, headers: &HeaderMap, body: &[u8]) -> Vec<u8> {
    let mut out = vec![flags];
    out.extend_from_slice(format!("{method}\n{path}\n").as_bytes());
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

fn signed(kp: &Keypair, method: &str, path: &str, body: &[u8], ts: i64, n: u8) -> HeaderMap {
    let mut h = HeaderMap::new();
    let dest = Destination::Addr(DESTINATION.into());
    SignedHeaders::sign_with_nonce(kp, &dest, method, path, body, ts, vec![n; 16]).apply(&mut h);
    h.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    h
}

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "corpus/request".into()));
    std::fs::create_dir_all(&dir)?;
    let alice = Keypair::from_seed("alice", [1; 32]).expect("valid name");
    let eve = Keypair::from_seed("eve", [4; 32]).expect("valid name");
    let submit = br#"{"cmd":"primes.wasm","count":2,"args":["-n","10"],"env":{"A":"1"}}"#;
    let bodies: [&[u8]; 6] = [
        submit,
        b"",
        b"{\"cmd\": 1}",
        b"{\"cmd\":\"a\",\"count\":99999999999}",
        b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        b"{\"cmd\":\"\\ud800\",\"count\":1,\"x\":1e999}",
    ];
    let mut seeds = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let n = i as u8;
        seeds.push(seed(
            0,
            "POST",
            "/v1/jobs",
            &signed(&alice, "POST", "/v1/jobs", body, NOW, n),
            body,
        ));
        seeds.push(seed(1, "POST", "/v1/jobs?cluster=1", &HeaderMap::new(), body));
    }
    let q = "/v1/queue?constraint=Owner%3D%3D%22alice%22";
    seeds.push(seed(0, "GET", q, &signed(&alice, "GET", q, b"", NOW - 299, 20), b""));
    seeds.push(seed(0, "GET", q, &signed(&alice, "GET", q, b"", NOW - 301, 21), b""));
    seeds.push(seed(0, "GET", q, &signed(&alice, "GET", q, b"", NOW + 300, 22), b""));
    seeds.push(seed(0, "GET", q, &signed(&eve, "GET", q, b"", NOW, 23), b""));
    seeds.push(seed(0, "GET", "/v1/queue", &HeaderMap::new(), b""));
    seeds.push(seed(0xff, "DELETE", "/v1/jobs/1.0", &HeaderMap::new(), b""));
    let mut bad = signed(&alice, "GET", "/", b"", NOW, 24);
    bad.insert("andes-timestamp", http::HeaderValue::from_static("-0"));
    bad.append("andes-nonce", http::HeaderValue::from_static("AAAA"));
    seeds.push(seed(0, "GET", "/", &bad, b""));
    for (i, s) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), s)?;
    }
    println!("wrote {} seeds to {}", seeds.len(), dir.display());
    Ok(())
}
