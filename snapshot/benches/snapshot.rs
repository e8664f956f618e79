//! Snapshot and restore time and size of a linear memory, at 16 MiB, 256 MiB
//! and 1 GiB of touched memory, random and mostly-zero.
//!
//!     cargo bench -p andes-snapshot --bench snapshot
//!
//! "take" encodes, hashes and signs into a new buffer (no file);
//! "take-reusing" into the previous snapshot's pack buffer; "durable" also
//! writes its pack and the file with fsync; "restore" verifies, loads its
//! pack from a store and decodes into a new, lazily zeroed memory (as a new
//! Wasm instance has). "incremental/N%" takes a snapshot built on the last
//! one after a word of N % of the chunks changed (as the job's write tracking says).
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use andes_snapshot::{BlobStore, Builder, CHUNK, Header, Sealed, open};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ed25519_dalek::{Signer as _, SigningKey};

const MODULE: [u8; 32] = [1; 32];

/// A Lua 5.4 array of integers as the interpreter lays it out: 16-byte
/// values, the integer then its type tag (compressible about 4:1, as real
/// jobs' data often is).
fn lua_table(bytes: usize) -> Vec<u8> {
    let mut m = vec![0u8; bytes];
    for (i, v) in m.chunks_exact_mut(16).enumerate() {
        v[..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
        v[8] = 0x03;
    }
    m
}

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

fn take(mem: &[u8], key: &SigningKey) -> Sealed {
    take_into(mem, key, Vec::new())
}

/// As a job checkpointed periodically does: into the last pack's buffer.
fn take_into(mem: &[u8], key: &SigningKey, buf: Vec<u8>) -> Sealed {
    let mut b = Builder::reusing(Header::new(&MODULE, "bench", 0), buf);
    b.memory(mem, andes_snapshot::Image::none());
    b.finish(&key.verifying_key().to_bytes(), |m| key.sign(m).to_bytes())
}

/// `mem` with a word of every `every`-th chunk changed.
fn changed(mem: &[u8], every: usize) -> Vec<u8> {
    let mut m = mem.to_vec();
    for c in (0..m.len() / CHUNK).step_by(every) {
        m[c * CHUNK] ^= 0xFF;
    }
    m
}

/// A snapshot built on `last` where every `every`-th chunk changed.
fn take_changed(mem: &[u8], key: &SigningKey, last: &Sealed, every: usize) -> Sealed {
    let mut b = Builder::new(Header::new(&MODULE, "bench", 0)).building_on(&last.chain);
    b.memory_changed(mem, andes_snapshot::Image::none(), &|c| c % every == 0);
    b.finish(&key.verifying_key().to_bytes(), |m| key.sign(m).to_bytes())
}

fn bench(c: &mut Criterion) {
    let key = SigningKey::from_bytes(&[5; 32]);
    let public = key.verifying_key().to_bytes();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = BlobStore::open(&dir.path().join("blobs"), true).expect("store");
    let mut g = c.benchmark_group("snapshot");
    g.sample_size(10);
    for mib in [16usize, 256, 1024] {
        for kind in ["random", "mostly-zero", "lua-table"] {
            let mem = match kind {
                "lua-table" => lua_table(mib << 20),
                _ => memory(mib << 20, kind == "mostly-zero"),
            };
            let sealed = take(&mem, &key);
            sealed.store_pack(&store).expect("pack");
            let stored = sealed.pack.as_ref().map_or(0, |p| p.1.len()) + sealed.bytes.len();
            println!(
                "snapshot {mib} MiB {kind}: {stored} bytes ({:.1}% of memory)",
                100.0 * stored as f64 / mem.len() as f64
            );
            let snap = sealed.bytes.clone();
            g.bench_function(format!("take/{mib}MiB/{kind}"), |b| b.iter(|| take(&mem, &key)));
            let mut buf = Some(Vec::new());
            g.bench_function(format!("take-reusing/{mib}MiB/{kind}"), |b| {
                b.iter(|| {
                    let out = take_into(&mem, &key, buf.take().unwrap_or_default());
                    let n = out.bytes.len();
                    buf = out.pack.map(|p| p.1);
                    n
                })
            });
            if mib == 256 {
                let path = dir.path().join("snap");
                g.bench_function(format!("durable/{mib}MiB/{kind}"), |b| {
                    b.iter(|| {
                        let s = take(&mem, &key);
                        // A pack already stored is not written again: a fresh
                        // store each time, as a first snapshot finds.
                        let fresh = tempfile::tempdir_in(dir.path()).expect("tempdir");
                        s.store_pack(&BlobStore::open(fresh.path(), true).expect("store"))
                            .expect("pack");
                        andes_beneath::replace_file(&path, &s.bytes, 0o644).expect("write")
                    })
                });
            }
            g.bench_function(format!("restore/{mib}MiB/{kind}"), |b| {
                b.iter_batched(
                    || vec![0u8; mem.len()],
                    |mut dest| {
                        let o = open(&snap, &|p| *p == public, &MODULE).expect("open");
                        let packs = o.load_packs(&store).expect("packs");
                        o.restore_memory(0, &mut dest, andes_snapshot::Image::none(), true, &packs)
                            .expect("restore");
                        dest
                    },
                    BatchSize::LargeInput,
                )
            });
            for (pct, every) in [(1, 100), (10, 10)] {
                let mem = changed(&mem, every);
                let s = take_changed(&mem, &key, &sealed, every);
                let added = s.pack.as_ref().map_or(0, |p| p.1.len());
                println!(
                    "snapshot {mib} MiB {kind}, {pct}% changed: {added} bytes added, file {} bytes",
                    s.bytes.len()
                );
                g.bench_function(format!("incremental/{pct}%/{mib}MiB/{kind}"), |b| {
                    b.iter(|| take_changed(&mem, &key, &sealed, every).bytes.len())
                });
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
