use ed25519_dalek::{Signer as _, SigningKey};
use proptest::prelude::*;

use super::*;

const MODULE: [u8; 32] = [7; 32];

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// A blob store of the test's own.
struct Store {
    _dir: tempfile::TempDir,
    blobs: BlobStore,
}

fn store() -> Store {
    let dir = tempfile::tempdir().unwrap();
    let blobs = BlobStore::open(dir.path(), false).unwrap();
    Store { _dir: dir, blobs }
}

fn seal_in(b: Builder, k: &SigningKey, s: &Store) -> Sealed {
    let sealed = b.finish(&k.verifying_key().to_bytes(), |m| k.sign(m).to_bytes());
    sealed.store_pack(&s.blobs).unwrap();
    sealed
}

fn restore(o: &Opened<'_>, s: &Store, dest: &mut [u8], base: &Image, fresh: bool) {
    let packs = o.load_packs(&s.blobs).unwrap();
    o.restore_memory(0, dest, base, fresh, &packs).unwrap();
}

/// `content` (a snapshot up to its trailer) with the trailer: `k`'s key,
/// the content's hash, `k`'s signature.
fn signed(mut content: Vec<u8>, k: &SigningKey) -> Vec<u8> {
    let hash = blake3::hash(&content);
    content.extend_from_slice(&k.verifying_key().to_bytes());
    content.extend_from_slice(hash.as_bytes());
    let mut msg = SIGNATURE_CONTEXT.to_vec();
    msg.extend_from_slice(hash.as_bytes());
    content.extend_from_slice(&k.sign(&msg).to_bytes());
    content
}

fn trust(k: &SigningKey) -> impl Fn(&[u8; 32]) -> bool + '_ {
    move |p| *p == k.verifying_key().to_bytes()
}

/// A memory with a data image, some zero pages, some text and some noise.
fn sample_memory(pages: usize) -> (Vec<u8>, Image) {
    let base = initial_image([(1024, &b"hello, initial data"[..]), (70_000, &[9u8; 5000][..])]);
    let mut mem = vec![0u8; pages * CHUNK];
    mem[..base.bytes().len()].copy_from_slice(base.bytes());
    let mut x = 0x9E3779B97F4A7C15u64;
    for (i, b) in mem[3 * CHUNK..4 * CHUNK].iter_mut().enumerate() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> (i % 8)) as u8;
    }
    for (i, b) in mem[5 * CHUNK..6 * CHUNK].iter_mut().enumerate() {
        *b = b"the same line again\n"[i % 20];
    }
    mem[1030] = b'X'; // a change inside the data image
    (mem, base)
}

fn header() -> Header {
    let mut h = Header::new(&MODULE, "schedd#1.0", 1_700_000_000_000);
    h.globals = vec![Global { name: "andes.global.0".into(), value: GlobalValue::I32(65536) }];
    h.wasi.args = vec!["job.wasm".into(), "7".into()];
    h.wasi.stdout_offset = 12;
    h
}

fn snapshot_in(mem: &[u8], base: &Image, k: &SigningKey, s: &Store) -> Sealed {
    let mut b = Builder::new(header());
    b.memory(mem, base);
    seal_in(b, k, s)
}

fn snapshot_of(mem: &[u8], base: &Image, k: &SigningKey) -> Vec<u8> {
    snapshot_in(mem, base, k, &store()).bytes
}

#[test]
fn memory_round_trips_and_skips_unchanged_pages() {
    let k = key(1);
    let (mem, base) = sample_memory(64);
    let s = store();
    let sealed = snapshot_in(&mem, &base, &k, &s);
    let snap = sealed.bytes;
    // 64 pages of 64 KiB: only the noise page, the text page (compressed)
    // and the changed data page take room, in the pack; the file holds
    // their table.
    let pack = sealed.pack.unwrap().1.len();
    assert!(pack < CHUNK + 8 * 1024, "{pack} bytes");
    assert!(snap.len() < 64 * chain::ENTRY + 1024, "{} bytes", snap.len());
    let opened = open(&snap, &trust(&k), &MODULE).unwrap();
    assert_eq!(opened.header.wasi.args, vec!["job.wasm", "7"]);
    assert_eq!(opened.header.globals[0].value, GlobalValue::I32(65536));
    for fresh in [true, false] {
        let mut dest = vec![0u8; mem.len()];
        if fresh {
            dest[..base.bytes().len()].copy_from_slice(base.bytes());
        } else {
            dest.fill(0xAA);
        }
        restore(&opened, &s, &mut dest, &base, fresh);
        assert!(dest == mem, "fresh={fresh}");
    }
}

#[test]
fn large_memories_use_every_core_and_round_trip() {
    let k = key(1);
    let (mut mem, base) = sample_memory(8);
    mem.resize(300 * CHUNK + 100, 0); // an odd tail, many threads' worth
    let n = mem.len();
    mem[n - 1] = 1;
    mem[200 * CHUNK + 5] = 2;
    let s = store();
    let snap = snapshot_in(&mem, &base, &k, &s).bytes;
    let opened = open(&snap, &trust(&k), &MODULE).unwrap();
    let mut dest = vec![0u8; mem.len()];
    dest[..base.bytes().len()].copy_from_slice(base.bytes());
    restore(&opened, &s, &mut dest, &base, true);
    assert!(dest == mem);
}

#[test]
fn a_flipped_byte_anywhere_is_refused() {
    let k = key(1);
    let (mem, base) = sample_memory(8);
    let snap = snapshot_of(&mem, &base, &k);
    let len = snap.len();
    // magic, version, header, body, signer, hash, signature
    for (at, want) in [
        (0, "not an andes snapshot"),
        (20, "does not match its hash"),
        (len / 2, "does not match its hash"),
        (len - 200, "does not match its hash"),
        (len - 120, "does not trust"),
        (len - 80, "does not match its hash"),
        (len - 10, "signature is invalid"),
    ] {
        let mut bad = snap.clone();
        bad[at] ^= 0x10;
        let e = open(&bad, &trust(&k), &MODULE).err().unwrap().to_string();
        assert!(e.contains(want), "byte {at}: {e}");
    }
}

#[test]
fn a_truncated_or_extended_snapshot_is_refused() {
    let k = key(1);
    let (mem, base) = sample_memory(8);
    let snap = snapshot_of(&mem, &base, &k);
    for cut in [0, 5, 12, 40, snap.len() / 2, snap.len() - 1] {
        let e = open(&snap[..cut], &trust(&k), &MODULE).err().unwrap();
        assert!(
            matches!(
                e,
                SnapshotError::Truncated { .. }
                    | SnapshotError::HashMismatch
                    | SnapshotError::Untrusted { .. }
            ),
            "cut at {cut}: {e}"
        );
    }
    let mut longer = snap.clone();
    longer.extend_from_slice(&[0; 7]);
    assert!(open(&longer, &trust(&k), &MODULE).is_err());
}

#[test]
fn a_wrong_signer_a_different_module_and_a_future_version_are_refused() {
    let (mem, base) = sample_memory(8);
    let mallory = key(2);
    let snap = snapshot_of(&mem, &base, &mallory);
    let e = open(&snap, &trust(&key(1)), &MODULE).err().unwrap();
    assert_eq!(
        e,
        SnapshotError::Untrusted { signer: hex::encode(mallory.verifying_key().to_bytes()) },
        "{e}"
    );
    let e = open(&snap, &trust(&mallory), &[8; 32]).err().unwrap();
    assert!(matches!(e, SnapshotError::WrongModule { .. }), "{e}");
    assert!(e.to_string().contains(&hex::encode(MODULE)), "{e}");
    let mut future = snap.clone();
    let next = FORMAT_VERSION + 1;
    future[8..12].copy_from_slice(&next.to_le_bytes());
    let e = open(&future, &trust(&mallory), &MODULE).err().unwrap();
    assert_eq!(e, SnapshotError::FutureVersion { found: next });
    assert!(e.to_string().contains(&format!("version {next} is newer")), "{e}");
}

#[test]
fn a_valid_signature_by_an_untrusted_key_never_passes_for_a_trusted_one() {
    // Replace the signer's key with a trusted one: the signature then fails.
    let (mem, base) = sample_memory(8);
    let alice = key(1);
    let mallory = key(2);
    let mut snap = snapshot_of(&mem, &base, &mallory);
    let at = snap.len() - 128;
    snap[at..at + 32].copy_from_slice(&alice.verifying_key().to_bytes());
    let e = open(&snap, &trust(&alice), &MODULE).err().unwrap();
    assert!(matches!(e, SnapshotError::BadSignature { .. }), "{e}");
}

#[test]
fn memory_must_fit_its_destination_and_base() {
    let k = key(1);
    let (mem, base) = sample_memory(8);
    let s = store();
    let snap = snapshot_in(&mem, &base, &k, &s).bytes;
    let o = open(&snap, &trust(&k), &MODULE).unwrap();
    let packs = o.load_packs(&s.blobs).unwrap();
    let mut small = vec![0u8; mem.len() - CHUNK];
    assert!(o.restore_memory(0, &mut small, &base, true, &packs).is_err());
    let mut dest = vec![0u8; mem.len()];
    let e = o.restore_memory(0, &mut dest, &Image::new(&b"other"[..]), true, &packs).err().unwrap();
    assert!(e.to_string().contains("another initial image"), "{e}");
    assert!(o.restore_memory(1, &mut dest, &base, true, &packs).is_err());
    let e = o.restore_memory(0, &mut dest, &base, true, &Packs::default()).err().unwrap();
    assert!(e.to_string().contains("0 packs were loaded, the snapshot names 1"), "{e}");
}

#[test]
fn inspect_reports_without_trusting() {
    let k = key(3);
    let (mem, base) = sample_memory(8);
    let snap = snapshot_of(&mem, &base, &k);
    let i = inspect(&snap).unwrap();
    assert!(i.hash_ok && i.signature_ok);
    assert_eq!(i.signer, hex::encode(k.verifying_key().to_bytes()));
    assert_eq!(i.header.platform, platform(None));
    assert_eq!(i.header.job, "schedd#1.0");
    let mut bad = snap.clone();
    let n = bad.len();
    bad[n - 1] ^= 1;
    let i = inspect(&bad).unwrap();
    assert!(i.hash_ok && !i.signature_ok);
}

#[test]
fn platform_names_only_versions() {
    assert_eq!(platform(Some(1)), "andes-snapshot-3/instrumentation-1");
    assert_eq!(platform(None), "andes-snapshot-3");
}

#[test]
fn files_are_stored_once_and_restored_exactly() {
    let sandbox = tempfile::tempdir().unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = BlobStore::open(store_dir.path(), false).unwrap();
    std::fs::write(sandbox.path().join("in.txt"), b"input").unwrap();
    std::fs::create_dir(sandbox.path().join("sub")).unwrap();
    std::fs::write(sandbox.path().join("sub/out.txt"), b"output so far").unwrap();
    std::fs::write(sandbox.path().join("copy.txt"), b"input").unwrap();
    let mut cache = HashCache::default();
    let files = scan_sandbox(sandbox.path(), &store, &mut cache).unwrap();
    let paths: Vec<_> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["copy.txt", "in.txt", "sub/out.txt"]);
    // Same content, one blob.
    assert_eq!(std::fs::read_dir(store_dir.path()).unwrap().count(), 2);
    std::fs::write(sandbox.path().join("sub/out.txt"), b"output so far, and more").unwrap();
    let later = scan_sandbox(sandbox.path(), &store, &mut cache).unwrap();
    assert_eq!(std::fs::read_dir(store_dir.path()).unwrap().count(), 3);
    let fresh = tempfile::tempdir().unwrap();
    for f in &files {
        store.restore(f, fresh.path()).unwrap();
    }
    assert_eq!(std::fs::read(fresh.path().join("sub/out.txt")).unwrap(), b"output so far");
    for f in &later {
        store.restore(f, fresh.path()).unwrap();
    }
    assert_eq!(
        std::fs::read(fresh.path().join("sub/out.txt")).unwrap(),
        b"output so far, and more"
    );
}

#[test]
fn restoring_a_file_refuses_escapes_and_tampered_blobs() {
    let store_dir = tempfile::tempdir().unwrap();
    let store = BlobStore::open(store_dir.path(), false).unwrap();
    let src = store_dir.path().join("x");
    std::fs::write(&src, b"data").unwrap();
    let (hash, size) = store.put_file(&src).unwrap();
    let root = tempfile::tempdir().unwrap();
    for bad in ["../evil", "/etc/passwd", "", "a/../../b"] {
        let e = FileEntry { path: bad.into(), size, blake3: hash.clone() };
        assert!(store.restore(&e, root.path()).is_err(), "{bad}");
    }
    std::fs::write(store.path(&hash), b"DATA").unwrap();
    let e = FileEntry { path: "ok".into(), size, blake3: hash };
    let err = store.restore(&e, root.path()).err().unwrap().to_string();
    assert!(err.contains("does not match its hash"), "{err}");
}

#[test]
fn blobs_put_read_and_retain_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let store = BlobStore::open(dir.path(), true).unwrap();
    let a = store.put(b"alpha").unwrap();
    let b = store.put(b"beta").unwrap();
    assert_eq!(store.put(b"alpha").unwrap(), a);
    assert!(is_hash(&a) && is_hash(&b));
    assert_eq!(store.read(&a).unwrap(), b"alpha");
    // Bytes that are not what their name says are refused, as is a name
    // that is not a hash.
    std::fs::write(store.path(&b), b"BETA").unwrap();
    assert_eq!(store.read(&b).unwrap_err().kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(store.read("../x").unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
    store.retain(&[a.as_str()].into_iter().collect()).unwrap();
    assert!(store.contains(&a) && !store.contains(&b));
}

#[test]
fn the_stored_hash_is_the_trailers() {
    let k = key(4);
    let (mem, base) = sample_memory(8);
    let snap = snapshot_of(&mem, &base, &k);
    assert_eq!(stored_hash(&snap), Some(inspect(&snap).unwrap().hash));
    assert_eq!(stored_hash(b"ANDESNAP"), None);
    assert_eq!(stored_hash(&[0u8; 512]), None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any header and body, validly signed (what a trusted but buggy or
    /// compromised host could send), gives an error or a memory, never a
    /// panic or a runaway allocation.
    #[test]
    fn the_decoder_survives_any_signed_content(
        body in proptest::collection::vec(any::<u8>(), 0..4096),
        declared in 0u64..(1 << 20),
        offset in 0u64..64,
        len in 0u64..5000,
        dest_len in 0usize..(3 * CHUNK),
        version in 1u32..=FORMAT_VERSION,
        pack in proptest::collection::vec(any::<u8>(), 0..1024),
        pack_size in 0u64..2048,
    ) {
        let k = key(1);
        let s = store();
        let mut h = Header::new(&MODULE, "j", 0);
        h.memories.push(MemoryInfo { bytes: declared, base: blake3::hash(b"").to_hex().to_string(), offset, len });
        if version >= 2 {
            h.packs.push(PackEntry { blake3: s.blobs.put(&pack).unwrap(), size: pack_size });
        }
        let header = serde_json::to_vec(&h).unwrap();
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
        out.extend_from_slice(&header);
        let out = signed(out, &k);
        if let Ok(o) = open(&out, &trust(&k), &MODULE) {
            let mut dest = vec![0u8; dest_len];
            let packs = o.load_packs(&s.blobs).unwrap_or_default();
            let _ = o.restore_memory(0, &mut dest, Image::none(), false, &packs);
        }
    }

    /// Arbitrary bytes are refused with a reason.
    #[test]
    fn arbitrary_bytes_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        prop_assert!(open(&bytes, &|_| true, &MODULE).is_err());
        let _ = inspect(&bytes);
    }
}

#[cfg(unix)]
#[test]
fn a_snapshot_never_holds_or_writes_through_a_link() {
    let top = tempfile::tempdir().unwrap();
    std::fs::write(top.path().join("secret"), b"the host's key").unwrap();
    std::fs::create_dir(top.path().join("outside")).unwrap();
    let sandbox = top.path().join("sandbox");
    std::fs::create_dir(&sandbox).unwrap();
    std::os::unix::fs::symlink("../secret", sandbox.join("key")).unwrap();
    std::os::unix::fs::symlink("../outside", sandbox.join("sub")).unwrap();
    std::fs::write(sandbox.join("mine"), b"job data").unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = BlobStore::open(store_dir.path(), false).unwrap();
    let files = scan_sandbox(&sandbox, &store, &mut HashCache::default()).unwrap();
    let paths: Vec<_> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["mine"]);
    for e in std::fs::read_dir(store_dir.path()).unwrap() {
        assert_ne!(std::fs::read(e.unwrap().path()).unwrap(), b"the host's key");
    }
    // Restoring `sub/f` where the sandbox holds a link named `sub`: the link
    // is removed (the snapshot has none), never written through.
    let h = store.put(b"restored").unwrap();
    let entry = FileEntry { path: "sub/f".into(), size: 8, blake3: h };
    restore_files(&sandbox, &[entry], &store).unwrap();
    assert_eq!(std::fs::read(sandbox.join("sub/f")).unwrap(), b"restored");
    assert!(std::fs::read_dir(top.path().join("outside")).unwrap().next().is_none());
    assert!(!sandbox.join("key").exists() && !sandbox.join("mine").exists());
    assert_eq!(std::fs::read(top.path().join("secret")).unwrap(), b"the host's key");
}

/// Writes `n` chunks of `mem` with noise from `seed`.
fn scribble(mem: &mut [u8], chunks: &[usize], seed: u64) {
    let mut x = seed | 1;
    for &c in chunks {
        for b in &mut mem[c * CHUNK..c * CHUNK + 4096] {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
}

#[test]
fn a_chain_of_ten_snapshots_writes_what_changed_and_restores_from_its_last() {
    let k = key(1);
    let (mut mem, base) = sample_memory(8);
    mem.resize(512 * CHUNK, 0);
    scribble(&mut mem, &(8..300).collect::<Vec<_>>(), 1);
    let s = store();
    let first = snapshot_in(&mem, &base, &k, &s);
    let full = first.pack.as_ref().unwrap().1.len();
    let mut chain = first.chain;
    let mut last = first.bytes;
    let mut uninterrupted = mem.clone();
    for round in 0..10u64 {
        // A few chunks change, and the memory grows by one page.
        let changed = [3 + round as usize, 100, 250 + round as usize, 400];
        scribble(&mut uninterrupted, &changed, 7 + round);
        uninterrupted.resize(uninterrupted.len() + CHUNK, 0);
        let at = uninterrupted.len() - 10;
        uninterrupted[at] = round as u8 + 1;
        let mut b = Builder::new(header()).building_on(&chain);
        b.memory_changed(&uninterrupted, &base, &|c| changed.contains(&c));
        let sealed = seal_in(b, &k, &s);
        let added = sealed.pack.as_ref().map_or(0, |p| p.1.len());
        // Four changed chunks and the new page (the probe keeps noise raw).
        assert!(added <= 5 * CHUNK, "round {round}: {added} bytes added");
        assert!(added * 20 < full, "round {round}: {added} of {full}");
        chain = sealed.chain;
        last = sealed.bytes;
    }
    // Restored from the last one alone, with only what it names, into a
    // memory that holds garbage.
    let only = store();
    let o = open(&last, &trust(&k), &MODULE).unwrap();
    for p in &o.header.packs {
        only.blobs.put(&s.blobs.read(&p.blake3).unwrap()).unwrap();
    }
    let mut dest = vec![0xEEu8; uninterrupted.len()];
    restore(&o, &only, &mut dest, &base, false);
    assert!(dest == uninterrupted);
    assert_eq!(inspect(&last).unwrap().memory_sizes.len(), 1);
}

/// A memory that records which chunks are read of it.
struct Recording<'a> {
    mem: &'a [u8],
    asked: std::sync::Mutex<Vec<usize>>,
}

impl ChunkSource for Recording<'_> {
    fn len(&self) -> usize {
        self.mem.len()
    }

    fn chunk<'a>(&'a self, c: usize, copy: &'a mut [u8]) -> &'a [u8] {
        self.asked.lock().unwrap().push(c);
        self.mem.chunk(c, copy)
    }
}

#[test]
fn packs_stay_few_and_mostly_used_however_long_the_chain() {
    let k = key(1);
    let (mut mem, base) = sample_memory(8);
    mem.resize(256 * CHUNK, 0);
    scribble(&mut mem, &(0..256).collect::<Vec<_>>(), 3);
    let s = store();
    let mut sealed = snapshot_in(&mem, &base, &k, &s);
    let mut x = 11u64;
    for round in 0..300u64 {
        // Each round rewrites a few chunks: hot ones often, others rarely.
        let mut changed = Vec::new();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            changed.push(if x.is_multiple_of(3) { (x % 256) as usize } else { (x % 8) as usize });
        }
        scribble(&mut mem, &changed, round + 100);
        let mut b = Builder::new(header()).building_on(&sealed.chain);
        let is_changed = |c: usize| changed.contains(&c);
        // What it says it will read is what it reads (retired packs'
        // chunks included), and each chunk once.
        let planned = b.to_read(mem.len(), &base, &is_changed);
        let source = Recording { mem: &mem, asked: Default::default() };
        b.memory_from(&source, &base, &is_changed);
        let mut asked = source.asked.into_inner().unwrap();
        asked.sort_unstable();
        assert_eq!(asked, planned, "round {round}");
        sealed = seal_in(b, &k, &s);
        let o = open(&sealed.bytes, &trust(&k), &MODULE).unwrap();
        assert!(o.header.packs.len() <= MAX_PACKS, "round {round}");
        // What the packs hold beyond what is in use stays bounded: older
        // packs were at least half used when this snapshot was built.
        let live: u64 = o.chain().live().iter().sum();
        let held: u64 = o.header.packs.iter().map(|p| p.size).sum();
        assert!(held <= 3 * live, "round {round}: packs of {held} bytes hold {live} in use");
    }
    let o = open(&sealed.bytes, &trust(&k), &MODULE).unwrap();
    let mut dest = vec![0u8; mem.len()];
    restore(&o, &s, &mut dest, &base, false);
    assert!(dest == mem);
}

#[test]
fn a_missing_or_tampered_pack_is_refused_by_name() {
    let k = key(1);
    let (mem, base) = sample_memory(8);
    let s = store();
    let sealed = snapshot_in(&mem, &base, &k, &s);
    let hash = sealed.pack.unwrap().0;
    let o = open(&sealed.bytes, &trust(&k), &MODULE).unwrap();
    std::fs::write(s.blobs.path(&hash), b"something else").unwrap();
    let e = o.load_packs(&s.blobs).unwrap_err();
    assert!(matches!(&e, SnapshotError::Pack { hash: h, .. } if *h == hash), "{e}");
    assert!(e.to_string().contains("does not match its hash"), "{e}");
    std::fs::remove_file(s.blobs.path(&hash)).unwrap();
    let e = o.load_packs(&s.blobs).unwrap_err().to_string();
    assert!(e.contains(&hash) && e.contains("missing"), "{e}");
}

#[test]
fn a_chunk_outside_its_pack_is_refused_when_opened() {
    let k = key(1);
    let (mem, base) = sample_memory(8);
    let s = store();
    let sealed = snapshot_in(&mem, &base, &k, &s);
    let o = open(&sealed.bytes, &trust(&k), &MODULE).unwrap();
    // The same header, its pack declared one byte shorter, signed again:
    // the last chunk no longer fits.
    let mut h = o.header.clone();
    h.packs[0].size -= 1;
    let mut b = Builder::new(h.clone());
    b.memory(&vec![0u8; mem.len()], &base);
    let mut bytes = b.finish(&k.verifying_key().to_bytes(), |m| k.sign(m).to_bytes()).bytes;
    // Splice the original table in, with the shortened header.
    let section = &sealed.bytes[16..16 + o.header.memories[0].len as usize];
    bytes[16..16 + section.len()].copy_from_slice(section);
    let json_at = 16 + section.len();
    let mut h2 = h;
    h2.memories = o.header.memories.clone();
    let json = serde_json::to_vec(&h2).unwrap();
    bytes.truncate(json_at);
    bytes[12..16].copy_from_slice(&(json.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&json);
    let e = open(&signed(bytes, &k), &trust(&k), &MODULE).err().unwrap().to_string();
    assert!(e.contains("lie outside pack"), "{e}");
}

#[test]
fn another_initial_image_is_written_whole_again() {
    let k = key(1);
    let (mem, base) = sample_memory(8);
    let s = store();
    let first = snapshot_in(&mem, &base, &k, &s);
    let mut b = Builder::new(header()).building_on(&first.chain);
    let another = Image::new(&b"another image"[..]);
    b.memory_changed(&mem, &another, &|_| false);
    let second = seal_in(b, &k, &s);
    let o = open(&second.bytes, &trust(&k), &MODULE).unwrap();
    assert_eq!(o.header.packs.len(), 1);
    assert_ne!(o.header.packs[0], first.chain.packs()[0]);
    let mut dest = vec![0u8; mem.len()];
    restore(&o, &s, &mut dest, &another, false);
    assert!(dest == mem);
}

#[test]
fn a_format_1_snapshot_is_still_read() {
    // Written by the format 1 writer (sample_memory(8), key 1).
    let bytes = include_bytes!("../tests/fixtures/format1.snap");
    let k = key(1);
    let (mem, base) = sample_memory(8);
    let o = open(bytes, &trust(&k), &MODULE).unwrap();
    assert!(o.header.packs.is_empty() && o.chain().packs().is_empty());
    let packs = o.load_packs(&store().blobs).unwrap();
    let mut dest = vec![0x55u8; mem.len()];
    o.restore_memory(0, &mut dest, &base, false, &packs).unwrap();
    assert!(dest == mem);
    assert_eq!(inspect(bytes).unwrap().version, 1);
}

#[test]
fn an_image_is_named_by_the_hash_of_its_bytes() {
    let image = initial_image([(3, &b"abc"[..])]);
    assert_eq!(image.bytes(), b"\0\0\0abc");
    assert_eq!(image.hash(), blake3::hash(b"\0\0\0abc").to_hex().as_str());
    assert_eq!(Image::none().bytes(), b"");
    assert_eq!(Image::none().hash(), blake3::hash(b"").to_hex().as_str());
}

/// Writes noise from `seed` over page `page` (4 KiB) of chunk `c` of `mem`.
fn scribble_page(mem: &mut [u8], c: usize, page: usize, seed: u64) {
    let mut x = seed | 1;
    let at = c * CHUNK + page * chain::PAGE;
    for b in &mut mem[at..at + chain::PAGE] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

/// `sealed` restored from its own packs alone into memory full of garbage.
fn restored_alone(sealed: &Sealed, s: &Store, k: &SigningKey, base: &Image, len: usize) -> Vec<u8> {
    let only = store();
    let o = open(&sealed.bytes, &trust(k), &MODULE).unwrap();
    for p in &o.header.packs {
        only.blobs.put(&s.blobs.read(&p.blake3).unwrap()).unwrap();
    }
    let mut dest = vec![0xEEu8; len];
    restore(&o, &only, &mut dest, base, false);
    dest
}

/// `sample_memory(8)` grown to `chunks`, every page of chunks `noisy` noise.
fn noisy_memory(chunks: usize, noisy: std::ops::Range<usize>) -> (Vec<u8>, Image) {
    let (mut mem, base) = sample_memory(8);
    mem.resize(chunks * CHUNK, 0);
    for c in noisy {
        for p in 0..chain::PAGES {
            scribble_page(&mut mem, c, p, (c * 100 + p) as u64);
        }
    }
    (mem, base)
}

fn added(sealed: &Sealed) -> usize {
    sealed.pack.as_ref().map_or(0, |p| p.1.len())
}

#[test]
fn a_chunk_with_few_pages_changed_is_stored_as_its_pages_over_its_anchor() {
    let k = key(1);
    let (mut mem, base) = noisy_memory(64, 8..64);
    let s = store();
    let first = snapshot_in(&mem, &base, &k, &s);
    let mut chain = first.chain.clone();
    let step = |mem: &[u8], chain: &Chain, changed: &dyn Fn(usize) -> bool| {
        let mut b = Builder::new(header()).building_on(chain);
        b.memory_changed(mem, &base, changed);
        seal_in(b, &k, &s)
    };
    // One page of each of 32 noisy chunks: 32 pages stored, not 32 chunks.
    for c in 8..40 {
        scribble_page(&mut mem, c, 3, c as u64 + 7);
    }
    let second = step(&mem, &chain, &|c| (8..40).contains(&c));
    assert!(added(&second) <= 33 * chain::PAGE, "{} bytes added", added(&second));
    assert!(restored_alone(&second, &s, &k, &base, mem.len()) == mem);
    chain = second.chain;
    // Two more pages of the same chunks: each patch holds the three that
    // differ from its anchor, over the anchor (never over the last patch).
    for c in 8..40 {
        scribble_page(&mut mem, c, 9, c as u64 + 70);
        scribble_page(&mut mem, c, 15, c as u64 + 700);
    }
    let third = step(&mem, &chain, &|c| (8..40).contains(&c));
    assert!(added(&third) <= 32 * 3 * chain::PAGE + 1024, "{} bytes added", added(&third));
    assert!(added(&third) >= 32 * 3 * chain::PAGE - 1024, "{} bytes added", added(&third));
    assert!(restored_alone(&third, &s, &k, &base, mem.len()) == mem);
    chain = third.chain;
    // Most of a chunk changed: stored whole, and the anchor of what follows.
    for p in 0..12 {
        scribble_page(&mut mem, 50, p, p as u64 + 9000);
    }
    let fourth = step(&mem, &chain, &|c| c == 50);
    assert!(added(&fourth) >= CHUNK, "{} bytes added", added(&fourth));
    chain = fourth.chain;
    scribble_page(&mut mem, 50, 13, 31337);
    let fifth = step(&mem, &chain, &|c| c == 50);
    assert!(added(&fifth) <= chain::PAGE, "{} bytes added", added(&fifth));
    assert!(restored_alone(&fifth, &s, &k, &base, mem.len()) == mem);
    chain = fifth.chain;
    // Written back as its anchor was, and a zero chunk given one page:
    // nothing stored for the first, a page for the second.
    let original = restored_alone(&first, &s, &k, &base, mem.len());
    mem[20 * CHUNK..21 * CHUNK].copy_from_slice(&original[20 * CHUNK..21 * CHUNK]);
    scribble_page(&mut mem, 6, 2, 4242);
    let sixth = step(&mem, &chain, &|c| c == 20 || c == 6);
    assert!(added(&sixth) <= chain::PAGE, "{} bytes added", added(&sixth));
    let last = restored_alone(&sixth, &s, &k, &base, mem.len());
    assert!(last == mem);
    // Inspection counts a patch's bytes with its anchor's.
    let stored = inspect(&sixth.bytes).unwrap().memory_sizes[0];
    let o = open(&sixth.bytes, &trust(&k), &MODULE).unwrap();
    assert!(stored > o.chain().memories[0].chunks.iter().map(|c| u64::from(c.len)).sum::<u64>());
}

#[test]
fn a_chain_read_from_a_file_stores_each_written_chunk_whole_once_then_patches() {
    let k = key(1);
    let (mut mem, base) = noisy_memory(32, 8..24);
    let s = store();
    let first = snapshot_in(&mem, &base, &k, &s);
    // What a host resuming the job has: the file, not the builder's hashes.
    let o = open(&first.bytes, &trust(&k), &MODULE).unwrap();
    scribble_page(&mut mem, 10, 1, 5);
    scribble_page(&mut mem, 28, 1, 6); // a zero chunk: its hashes are known
    let mut b = Builder::new(header()).building_on(o.chain());
    b.memory_changed(&mem, &base, &|c| c == 10 || c == 28);
    let second = seal_in(b, &k, &s);
    let n = added(&second);
    assert!((CHUNK..CHUNK + 2 * chain::PAGE).contains(&n), "{n} bytes added");
    scribble_page(&mut mem, 10, 2, 55);
    let mut b = Builder::new(header()).building_on(&second.chain);
    b.memory_changed(&mem, &base, &|c| c == 10);
    let third = seal_in(b, &k, &s);
    assert!(added(&third) <= chain::PAGE, "{} bytes added", added(&third));
    assert!(restored_alone(&third, &s, &k, &base, mem.len()) == mem);
}

/// `sealed`'s file with `edit` applied to memory 0's section, signed again by `k`.
fn with_section_edited(sealed: &Sealed, k: &SigningKey, edit: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut bytes = sealed.bytes[..sealed.bytes.len() - 128].to_vec();
    let len = sealed.header.memories[0].len as usize;
    edit(&mut bytes[16..16 + len]);
    signed(bytes, k)
}

#[test]
fn a_malformed_patch_table_is_refused_with_the_chunk_named() {
    let k = key(1);
    let (mut mem, base) = sample_memory(8);
    let s = store();
    let first = snapshot_in(&mem, &base, &k, &s);
    scribble_page(&mut mem, 3, 4, 99);
    let mut b = Builder::new(header()).building_on(&first.chain);
    b.memory_changed(&mem, &base, &|c| c == 3);
    let second = seal_in(b, &k, &s);
    assert!(open(&second.bytes, &trust(&k), &MODULE).is_ok());
    let e = |bytes: Vec<u8>| open(&bytes, &trust(&k), &MODULE).err().unwrap().to_string();
    // The one patch's entry is the section's last 23 bytes.
    let no_pages = with_section_edited(&second, &k, |sec| {
        let n = sec.len();
        sec[n - 2..].copy_from_slice(&0u16.to_le_bytes());
    });
    assert!(e(no_pages).contains("chunk 3: a patch of kind"));
    let past_the_end = with_section_edited(&second, &k, |sec| {
        let n = sec.len();
        sec[n - 23..n - 19].copy_from_slice(&8u32.to_le_bytes());
    });
    assert!(e(past_the_end).contains("a patch of chunk 8"));
    let more_pages = with_section_edited(&second, &k, |sec| {
        let n = sec.len();
        sec[n - 2..].copy_from_slice(&0xFFFFu16.to_le_bytes());
    });
    assert!(e(more_pages).contains("is invalid"));
    let counted_twice = with_section_edited(&second, &k, |sec| {
        let n = sec.len();
        sec[n - 27..n - 23].copy_from_slice(&2u32.to_le_bytes());
    });
    assert!(e(counted_twice).contains("table of 2 patches"));
}

/// A job resumed from a snapshot knows its chunks as stored once they are
/// restored: its first snapshot stores a chunk with a page changed as that
/// page (over the anchor, also where the restored chunk was itself a
/// patch), as any later snapshot does, and it restores to the memory.
#[test]
fn a_restored_chain_stores_only_the_changed_pages_in_its_first_snapshot() {
    let k = key(1);
    let (mut mem, base) = noisy_memory(32, 8..24);
    let s = store();
    let first = snapshot_in(&mem, &base, &k, &s);
    scribble_page(&mut mem, 12, 3, 7);
    let mut b = Builder::new(header()).building_on(&first.chain);
    b.memory_changed(&mem, &base, &|c| c == 12);
    let second = seal_in(b, &k, &s);
    assert!(added(&second) <= chain::PAGE, "{} bytes added", added(&second));
    // What a host resuming the job does: open, restore, learn.
    let o = open(&second.bytes, &trust(&k), &MODULE).unwrap();
    let packs = o.load_packs(&s.blobs).unwrap();
    let mut dest = vec![0xEEu8; mem.len()];
    let anchors = o.restore_memory(0, &mut dest, &base, false, &packs).unwrap();
    assert!(dest == mem);
    let mut chain = o.chain().clone();
    chain.learn(anchors);
    scribble_page(&mut mem, 10, 1, 5);
    scribble_page(&mut mem, 12, 9, 8);
    let mut b = Builder::new(header()).building_on(&chain);
    b.memory_changed(&mem, &base, &|c| c == 10 || c == 12);
    let third = seal_in(b, &k, &s);
    // A page for chunk 10; for chunk 12 its two pages that differ from its
    // anchor. Without what the restore learned: both chunks whole.
    let n = added(&third);
    assert!(n <= 3 * chain::PAGE, "{n} bytes added");
    assert!(restored_alone(&third, &s, &k, &base, mem.len()) == mem);
    // What does not fit the chain is ignored, not trusted.
    let mut other = o.chain().clone();
    let small = snapshot_in(&mem[..8 * CHUNK], &base, &k, &s);
    let so = open(&small.bytes, &trust(&k), &MODULE).unwrap();
    let sp = so.load_packs(&s.blobs).unwrap();
    other.learn(so.restore_memory(0, &mut vec![0u8; 8 * CHUNK], &base, false, &sp).unwrap());
    assert!(other == *o.chain());
}
