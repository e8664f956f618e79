//! Writes the seed corpus of the `snapshot` fuzz target
//! (`fuzz/fuzz_targets/snapshot.rs`) into the directory given:
//! `cargo run -p andes-snapshot --example snapshot_seeds fuzz/corpus/snapshot`.
//!
//! Each snapshot is written twice: whole, after flag byte 0 (the target opens
//! it trusting every key), and cut into `u32 LE` header length, JSON header
//! and body after flag byte 1 or 3 (the target seals it again itself, and
//! with 3 restores into a reused memory).

use std::path::PathBuf;

use andes_snapshot::{
    Builder, CHUNK, Descriptor, DescriptorKind, FileEntry, Global, GlobalValue, Header, Unwound,
    initial_image,
};
use ed25519_dalek::{Signer as _, SigningKey};

/// The fuzz target's module digest.
const MODULE: [u8; 32] = [7; 32];

fn seal(b: Builder) -> Vec<u8> {
    let k = SigningKey::from_bytes(&[1; 32]);
    b.finish(&k.verifying_key().to_bytes(), |m| k.sign(m).to_bytes()).bytes
}

/// The split form: header length, header, body (what lies between the
/// 16-byte prefix and the header, before the 128-byte trailer).
fn split(file: &[u8]) -> Vec<u8> {
    let hlen = u32::from_le_bytes(file[12..16].try_into().expect("4 bytes")) as usize;
    let header_at = file.len() - 128 - hlen;
    let mut out = (hlen as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&file[header_at..header_at + hlen]);
    out.extend_from_slice(&file[16..header_at]);
    out
}

fn snapshots() -> Vec<Vec<u8>> {
    let mut out = Vec::new();

    // Nothing but a header.
    out.push(seal(Builder::new(Header::new(&MODULE, "schedd#1.0", 1_700_000_000_000))));

    // One memory of two pages, with data, zeros, text and noise; globals,
    // WASI state, files, an unwound stack and usage.
    let base = initial_image([(1024, &b"hello, initial data"[..]), (70_000, &[9u8; 500][..])]);
    let mut mem = vec![0u8; 3 * CHUNK];
    mem[..base.bytes().len()].copy_from_slice(base.bytes());
    for (i, b) in mem[CHUNK..CHUNK + 4096].iter_mut().enumerate() {
        *b = b"the same line again\n"[i % 20];
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for b in &mut mem[2 * CHUNK..2 * CHUNK + 2048] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    mem[1030] = b'X';
    let mut h = Header::new(&MODULE, "schedd#12.3#1700000000", 1_700_000_000_000);
    h.globals = vec![
        Global { name: "andes.global.0".into(), value: GlobalValue::I32(65536) },
        Global { name: "g64".into(), value: GlobalValue::I64(-1) },
        Global { name: "f".into(), value: GlobalValue::F64(0x4009_21FB_5444_2D18) },
    ];
    h.wasi.args = vec!["job.wasm".into(), "7".into()];
    h.wasi.env = vec![("A".into(), "1".into())];
    h.wasi.descriptors = vec![
        Descriptor {
            fd: 3,
            kind: DescriptorKind::Dir { path: ".".into(), preopen: Some(".".into()) },
        },
        Descriptor {
            fd: 4,
            kind: DescriptorKind::File {
                path: "out/log.txt".into(),
                read: false,
                write: true,
                append: true,
                offset: 12,
            },
        },
    ];
    h.wasi.stdout_offset = 12;
    h.files = vec![FileEntry { path: "out/log.txt".into(), size: 12, blake3: "00".repeat(32) }];
    h.unwound = Some(Unwound { instrumentation: 1, memory: 1, data: 16 });
    h.usage.insert("WasmFuelConsumed".into(), 12345.0);
    let mut b = Builder::new(h.clone());
    b.memory(&mem, &base);
    b.memory(&[0u8; CHUNK], andes_snapshot::Image::none());
    out.push(seal(b));

    // The same memory against no base, and an empty memory.
    let mut b = Builder::new(h);
    b.memory(&mem, andes_snapshot::Image::none());
    b.memory(&[], andes_snapshot::Image::none());
    out.push(seal(b));
    out
}

fn main() -> std::io::Result<()> {
    let dir =
        PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "fuzz/corpus/snapshot".into()));
    std::fs::create_dir_all(&dir)?;
    for (i, file) in snapshots().iter().enumerate() {
        let whole = [&[0u8][..], file].concat();
        std::fs::write(dir.join(format!("seed-{i}-whole")), whole)?;
        let cut = split(file);
        for flag in [1u8, 3] {
            std::fs::write(
                dir.join(format!("seed-{i}-split-{flag}")),
                [&[flag][..], &cut].concat(),
            )?;
        }
    }
    println!("wrote {} seeds to {}", snapshots().len() * 3, dir.display());
    Ok(())
}
