//! Decodes an arbitrary byte input as a signed andes request and checks it the way a
//! daemon does: header parsing, trust lookup, clock window, signature, replay, and the
//! JSON body. Nothing may panic; a request that is validly signed, fresh and well
//! formed must be accepted once and then refused as a replay.
//!
//! Input: a flag byte, then `METHOD\nPATH\n` header lines `Name: value\n`, an empty
//! line, and the body (raw bytes). Flag bit 0: sign the request with the trusted key
//! (overriding the `Andes-*` headers) so the later checks are reached; bits 1..7: how
//! many seconds before "now" it was signed, times 8 (0..=1016, so both sides of the
//! 300 s window). A re-signed request names this verifier's destination (a server
//! key); the same request presented to another destination must be refused without
//! spending its nonce. Seeds: `cargo run -p andes-protocol --example fuzz_seeds DIR`.

use andes_protocol::sign::check_request_line;
use andes_protocol::{
    AuthError, Destination, Keypair, SignedHeaders, TrustFile, Verifier, VerifierConfig,
    decode_json,
};
use http::{HeaderMap, HeaderName, HeaderValue};

const NOW: i64 = 1_800_000_000;
const SKEW: u64 = 300;

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Submit {
    cmd: String,
    count: u32,
    args: Option<Vec<String>>,
    env: Option<std::collections::BTreeMap<String, String>>,
}

fn split_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// Runs one input through the target's checks; panics on a failure.
pub fn run(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else { return };
    let (method, rest) = split_line(rest);
    let (path, mut rest) = split_line(rest);
    let (Ok(method), Ok(path)) = (std::str::from_utf8(method), std::str::from_utf8(path)) else {
        return;
    };
    let mut headers = HeaderMap::new();
    while !rest.is_empty() {
        let (line, tail) = split_line(rest);
        rest = tail;
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) {
            headers.append(n, v);
        }
    }
    let body = rest;

    let alice = Keypair::from_seed("alice", [1; 32]).unwrap();
    let trust =
        TrustFile::parse(&format!("user alice ed25519 {}\n", alice.public()), "trust").unwrap();
    let config = VerifierConfig { max_skew: SKEW, nonce_cap: 4, ..VerifierConfig::default() };
    let verifier = Verifier::new(trust, config);
    let here = Destination::Key(Keypair::from_seed("schedd", [2; 32]).unwrap().public());
    let elsewhere = Destination::Addr("127.0.0.1:9618".into());

    let resigned = flags & 1 == 1;
    let age = i64::from(flags >> 1) * 8;
    if resigned {
        let nonce = body.iter().chain(path.as_bytes()).copied().cycle().take(16).collect();
        let nonce = if body.is_empty() && path.is_empty() { vec![0; 16] } else { nonce };
        SignedHeaders::sign_with_nonce(&alice, &here, method, path, body, NOW - age, nonce)
            .apply(&mut headers);
    }

    // The header decoder round-trips what it accepts.
    if let Ok(h) = SignedHeaders::from_headers(&headers) {
        let mut again = HeaderMap::new();
        h.apply(&mut again);
        assert_eq!(SignedHeaders::from_headers(&again).as_ref(), Ok(&h));
    }

    // Signed for this daemon, it is no good to another.
    if resigned {
        assert!(verifier.verify(method, path, &headers, body, &elsewhere, NOW).is_err());
    }
    let first = verifier.verify(method, path, &headers, body, &here, NOW);
    match &first {
        Ok(caller) => {
            assert_eq!(caller.identity, "alice");
            assert_eq!(caller.key, alice.public());
            let second = verifier.verify(method, path, &headers, body, &here, NOW);
            assert_eq!(second, Err(AuthError::Replayed { window: SKEW }));
        }
        Err(e) => {
            let _ = (e.to_string(), e.status());
            let fresh = age <= SKEW as i64;
            if resigned && fresh && check_request_line(method, path).is_ok() {
                panic!("a validly signed fresh request was refused: {e}");
            }
        }
    }

    let _ = decode_json::<serde_json::Value>(body).map_err(|e| e.to_string());
    let _ = decode_json::<Submit>(body).map_err(|e| e.to_string());
}
