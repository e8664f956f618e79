//! Signing and verifying requests: the per-request cost every daemon pays.
//!
//! `cargo bench -p andes-protocol --bench verify`
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use std::cell::Cell;

use andes_protocol::{Destination, Keypair, SignedHeaders, TrustFile, Verifier, VerifierConfig};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use http::HeaderMap;

const T0: i64 = 1_800_000_000;

fn bench(c: &mut Criterion) {
    let alice = Keypair::from_seed("alice", [1; 32]).unwrap();
    let eve = Keypair::from_seed("eve", [2; 32]).unwrap();
    let mut lines = String::new();
    for i in 0..10_000u32 {
        let mut seed = [9u8; 32];
        seed[..4].copy_from_slice(&i.to_le_bytes());
        let k = Keypair::from_seed("u", seed).unwrap();
        lines.push_str(&format!("user u{i} ed25519 {}\n", k.public()));
    }
    lines.push_str(&format!("user alice ed25519 {}\n", alice.public()));
    let trust = TrustFile::parse(&lines, "bench").unwrap();
    let verifier = Verifier::new(trust, VerifierConfig::default());
    let body = vec![b'x'; 1024];
    let here = Destination::Key(Keypair::from_seed("schedd", [3; 32]).unwrap().public());

    c.bench_function("sign 1 KiB request", |b| {
        b.iter(|| SignedHeaders::sign(&alice, &here, "POST", "/v1/jobs", &body, T0))
    });

    // One request a second of virtual time: the replay cache stays at its steady size.
    let now = Cell::new(T0);
    c.bench_function("verify 1 KiB request (10,001 trusted keys)", |b| {
        b.iter_batched(
            || {
                now.set(now.get() + 1);
                let mut h = HeaderMap::new();
                SignedHeaders::sign(&alice, &here, "POST", "/v1/jobs", &body, now.get())
                    .apply(&mut h);
                (h, now.get())
            },
            |(h, t)| verifier.verify("POST", "/v1/jobs", &h, &body, &here, t).unwrap(),
            BatchSize::SmallInput,
        )
    });

    let mut unknown = HeaderMap::new();
    SignedHeaders::sign(&eve, &here, "POST", "/v1/jobs", &body, T0).apply(&mut unknown);
    c.bench_function("refuse unknown key (headers only)", |b| {
        b.iter(|| verifier.check_headers(&unknown, T0).unwrap_err())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
