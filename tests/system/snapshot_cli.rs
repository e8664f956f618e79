//! `andes snapshot inspect` as a user runs it on a real snapshot file.

use andes_protocol::Keypair;
use andes_snapshot::{Builder, Header};
use assert_cmd::Command;

fn inspect(path: &std::path::Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::cargo_bin("andes")
        .unwrap()
        .args(["snapshot", "inspect"])
        .arg(path)
        .args(extra)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

#[test]
fn inspect_shows_the_header_and_the_checks() {
    let dir = tempfile::tempdir().unwrap();
    let key = Keypair::from_seed("exec1", [3; 32]).unwrap();
    let mut h = Header::new(&[9; 32], "submit#4.0", 1_790_000_000_000);
    h.wasi.stdout_offset = 42;
    let mut b = Builder::new(h);
    let mut mem = vec![0u8; 4 << 20];
    mem[100_000..100_010].copy_from_slice(b"0123456789");
    b.memory(&mem, andes_snapshot::Image::none());
    let sealed = b.finish(key.public().as_bytes(), |m| key.sign(m));
    let blobs = andes_snapshot::BlobStore::open(&dir.path().join("blobs"), false).unwrap();
    sealed.store_pack(&blobs).unwrap();
    let pack = sealed.pack.as_ref().unwrap().0.clone();
    let snap = sealed.bytes;
    let path = dir.path().join("000001.snap");
    std::fs::write(&path, &snap).unwrap();
    let trust = dir.path().join("trust");
    std::fs::write(&trust, format!("host exec1 {}\n", key.public_line())).unwrap();

    let (code, out) = inspect(&path, &["--trust", trust.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    for want in [
        "platform      andes-snapshot-3",
        "memory packs  1 (",
        ", every content present in ",
        &format!("module        sha256:{}", hex::encode([9; 32])),
        "job           submit#4.0",
        "memory 0      4.0 MiB",
        "stdout        42 bytes written",
        "signature     ok",
        "trusted       yes, as exec1",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    assert!(out.contains("content hash  blake3:") && out.contains(" ok\n"), "{out}");

    // --json: one document a program can read, with the header and the checks.
    let (code, out) = inspect(&path, &["--json", "--trust", trust.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    let doc: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(doc["header"]["packs"][0]["blake3"], pack.as_str(), "{out}");
    assert_eq!(doc["header"]["job"], "submit#4.0", "{out}");
    assert_eq!(doc["content_hash"]["ok"], true, "{out}");
    assert_eq!(doc["signer"]["signature_ok"], true, "{out}");
    assert!(doc["trusted"].as_str().is_some_and(|t| t.starts_with("exec1")), "{out}");
    assert_eq!(doc["missing"], serde_json::json!([]), "{out}");

    // Its pack gone from the directory: said, and the exit status says so.
    std::fs::remove_file(blobs.path(&pack)).unwrap();
    let (code, out) = inspect(&path, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!("MISSING from {}: {pack}", dir.path().join("blobs").display())),
        "{out}"
    );
    let (code, out) = inspect(&path, &["--json"]);
    assert_eq!(code, Some(1), "{out}");
    let doc: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(doc["missing"], serde_json::json!([pack]), "{out}");

    // One flipped byte: the content hash check fails, and the exit status says so.
    let mut bad = snap.clone();
    bad[20] ^= 1;
    std::fs::write(&path, &bad).unwrap();
    let (code, out) = inspect(&path, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("FAILED"), "{out}");

    // Not a snapshot, and a future version: clear errors.
    std::fs::write(&path, b"hello").unwrap();
    let (code, out) = inspect(&path, &[]);
    assert_eq!(code, Some(2));
    assert!(out.contains("not an andes snapshot"), "{out}");
    std::fs::write(&path, b"ANDESNAP\x09\0\0\0").unwrap();
    let (_, out) = inspect(&path, &[]);
    assert!(out.contains("format version 9 is newer"), "{out}");
}
