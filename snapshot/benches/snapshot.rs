//! Snapshot and restore time and size of a linear memory, at 16 MiB, 256 MiB
//! and 1 GiB of touched memory, random and mostly-zero.
//!
//!     cargo bench -p andes-snapshot --bench snapshot
//!
//! "take" encodes, hashes and signs into a new buffer (no file);
//! "take-reusing" into the previous snapshot's buffer; "durable" also
//! writes it to a file with fsync; "restore" verifies and decodes into a new,
//! lazily zeroed memory (as a new Wasm instance has).
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use andes_snapshot::{Builder, CHUNK, Header, open};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ed25519_dalek::{Signer as _, SigningKey};

const MODULE: [u8; 32] = [1; 32];

fn memory(bytes: usize, mostly_zero: bool) -> Vec<u8> {
    let mut m = vec![0u8; bytes];
    let mut x = 0x2545F4914F6CDD1Du64;
    for (i, page) in m.chunks_mut(CHUNK).enumerate() {
        // Mostly zero: one page in 32 holds data.
        if mostly_zero && i % 32 != 0 {
            continue;
        }
        for w in page.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes()[..w.len()]);
        }
    }
    m
}

fn take(mem: &[u8], key: &SigningKey) -> Vec<u8> {
    take_into(mem, key, Vec::new())
}

/// As a job checkpointed periodically does: into the last snapshot's buffer.
fn take_into(mem: &[u8], key: &SigningKey, buf: Vec<u8>) -> Vec<u8> {
    let mut b = Builder::reusing(Header::new(&MODULE, "bench", 0), buf);
    b.memory(mem, &[]);
    b.finish(&key.verifying_key().to_bytes(), |m| key.sign(m).to_bytes())
}

fn bench(c: &mut Criterion) {
    let key = SigningKey::from_bytes(&[5; 32]);
    let public = key.verifying_key().to_bytes();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut g = c.benchmark_group("snapshot");
    g.sample_size(10);
    for mib in [16usize, 256, 1024] {
        for (kind, zero) in [("random", false), ("mostly-zero", true)] {
            let mem = memory(mib << 20, zero);
            let snap = take(&mem, &key);
            println!(
                "snapshot {mib} MiB {kind}: {} bytes ({:.1}% of memory)",
                snap.len(),
                100.0 * snap.len() as f64 / mem.len() as f64
            );
            g.bench_function(format!("take/{mib}MiB/{kind}"), |b| b.iter(|| take(&mem, &key)));
            let mut buf = Some(Vec::new());
            g.bench_function(format!("take-reusing/{mib}MiB/{kind}"), |b| {
                b.iter(|| {
                    let out = take_into(&mem, &key, buf.take().unwrap_or_default());
                    let n = out.len();
                    buf = Some(out);
                    n
                })
            });
            if mib == 256 {
                let path = dir.path().join("snap");
                g.bench_function(format!("durable/{mib}MiB/{kind}"), |b| {
                    b.iter(|| {
                        andes_beneath::replace_file(&path, &take(&mem, &key), 0o644).expect("write")
                    })
                });
            }
            g.bench_function(format!("restore/{mib}MiB/{kind}"), |b| {
                b.iter_batched(
                    || vec![0u8; mem.len()],
                    |mut dest| {
                        let o = open(&snap, &|p| *p == public, &MODULE).expect("open");
                        o.restore_memory(0, &mut dest, &[], true).expect("restore");
                        dest
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
