//! Transparent checkpoints through the starter: modules instrumented by
//! `andes compile`, interrupted at random points by a vacate, each time
//! resumed from the signed snapshot in a fresh instance and a fresh sandbox,
//! must end exactly as an uninterrupted run does.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use andes_snapshot::BlobStore;
use andes_starter::{
    Checkpoint, Clock, Control, Ending, Host, HostConfig, JobResult, JobSpec, Limits, SystemClock,
    Transparent,
};
use ed25519_dalek::{Signer, SigningKey};

use crate::common::sample;

/// A sample instrumented by `andes compile` (once per test binary).
fn instrumented(name: &'static str) -> Arc<[u8]> {
    type Cache = Mutex<Vec<(&'static str, Arc<[u8]>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut c = cache.lock().unwrap();
    if let Some((_, m)) = c.iter().find(|(n, _)| *n == name) {
        return m.clone();
    }
    let out = andes_compile::instrument(&sample(name), &andes_compile::Options::default())
        .expect("instrument");
    let m: Arc<[u8]> = out.into();
    c.push((name, m.clone()));
    m
}

fn host() -> Host {
    Host::new(HostConfig {
        max_instances: 8,
        epoch_tick: Duration::from_millis(2),
        ..Default::default()
    })
    .expect("host")
}

/// A host that runs jobs unmetered where it can, as `andes host` does by
/// default (STARTER_METER_FUEL = False).
fn unmetered_host() -> Arc<Host> {
    Arc::new(
        Host::new(HostConfig {
            max_instances: 8,
            epoch_tick: Duration::from_millis(2),
            meter_fuel: false,
            ..Default::default()
        })
        .expect("host"),
    )
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn seed() -> u64 {
    match std::env::var("ANDES_SEED") {
        Ok(s) => s.parse().expect("ANDES_SEED must be a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    }
}

struct ReportSeed(u64);
impl Drop for ReportSeed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failed with seed {0}; replay with ANDES_SEED={0}", self.0);
        }
    }
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `k` sorted fuel counts between 5% and 80% of `total`, at least
/// `total / 4k` apart.
fn points(state: &mut u64, k: usize, total: u64) -> Vec<u64> {
    let lo = total / 20;
    let range = total * 8 / 10 - lo;
    let gap = total / (4 * k as u64);
    loop {
        let mut p: Vec<u64> = (0..k).map(|_| lo + splitmix(state) % range).collect();
        p.sort_unstable();
        if p.windows(2).all(|w| w[1] - w[0] >= gap) {
            return p;
        }
    }
}

/// One job: its module, ad, input files, and where its snapshots go.
struct Job {
    module: Arc<[u8]>,
    ad: String,
    inputs: Vec<(String, Vec<u8>)>,
    blobs: BlobStore,
    taken: Arc<Mutex<Vec<Result<Checkpoint, String>>>>,
    signer: SigningKey,
    trusted: [u8; 32],
    _dir: tempfile::TempDir,
    sandboxes: PathBuf,
    next: std::sync::atomic::AtomicU32,
}

impl Job {
    fn new(module: Arc<[u8]>, ad: &str, inputs: Vec<(String, Vec<u8>)>) -> Job {
        let dir = tempfile::tempdir().unwrap();
        let blobs = BlobStore::open(&dir.path().join("blobs"), false).unwrap();
        let sandboxes = dir.path().join("sandboxes");
        std::fs::create_dir_all(&sandboxes).unwrap();
        let signer = key(7);
        Job {
            module,
            ad: ad.to_string(),
            inputs,
            blobs,
            taken: Default::default(),
            trusted: signer.verifying_key().to_bytes(),
            signer,
            _dir: dir,
            sandboxes,
            next: Default::default(),
        }
    }

    /// A fresh sandbox; with `inputs`, holding the job's input files (a
    /// restored job gets its files from the snapshot instead).
    fn sandbox(&self, inputs: bool) -> PathBuf {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = self.sandboxes.join(format!("s{n}"));
        std::fs::create_dir_all(&p).unwrap();
        if inputs {
            for (name, bytes) in &self.inputs {
                std::fs::write(p.join(name), bytes).unwrap();
            }
        }
        p
    }

    fn spec(&self, sandbox: &Path, restore: Option<Arc<[u8]>>) -> JobSpec {
        self.spec_with(sandbox, restore, &self.blobs)
    }

    /// [`Job::spec`] with the contents kept in `blobs`.
    fn spec_with(&self, sandbox: &Path, restore: Option<Arc<[u8]>>, blobs: &BlobStore) -> JobSpec {
        let ad = classad::parse_ad(&self.ad).unwrap();
        let signer = self.signer.clone();
        let taken = self.taken.clone();
        let trusted = self.trusted;
        JobSpec {
            module: self.module.clone(),
            limits: Limits::from_ad(&ad),
            ad,
            sandbox: sandbox.to_path_buf(),
            inherit_stdio: false,
            digest: None,
            saved_state: None,
            metered: false,
            sandbox_empty: false,
            transparent: Some(Arc::new(Transparent {
                job: "test#1.0".into(),
                public: self.signer.verifying_key().to_bytes(),
                sign: Arc::new(move |m| signer.sign(m).to_bytes()),
                blobs: blobs.clone(),
                sink: Arc::new(move |c| taken.lock().unwrap().push(c)),
                restore,
                trusted: Arc::new(move |k| *k == trusted),
            })),
        }
    }

    fn last_snapshot(&self) -> Arc<[u8]> {
        let t = self.taken.lock().unwrap();
        match t.last() {
            Some(Ok(c)) => c.bytes.clone().into(),
            Some(Err(e)) => panic!("the last checkpoint failed: {e}"),
            None => panic!("no checkpoint was taken"),
        }
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Runs once, uninterrupted: the reference output and fuel.
fn reference(host: &Host, job: &Job, out: &str) -> (Vec<u8>, String, u64) {
    let sandbox = job.sandbox(true);
    let r =
        rt().block_on(host.run(job.spec(&sandbox, None), Control::new(), Arc::new(SystemClock)));
    assert_eq!(r.ending, Ending::Exited(0), "{r:?}");
    let stdout = std::fs::read(sandbox.join(out)).unwrap();
    (stdout, files_digest(&sandbox), r.usage.fuel_consumed)
}

/// Every file of a sandbox, names and contents, as one string.
fn files_digest(dir: &Path) -> String {
    let mut names: Vec<_> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    names
        .iter()
        .map(|n| {
            let bytes = std::fs::read(dir.join(n)).unwrap();
            format!("{}:{}:{}", n.to_string_lossy(), bytes.len(), blake3::hash(&bytes).to_hex())
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs the job to its end, vacating it when its cumulative fuel reaches
/// each of `at`, and resuming each time from the snapshot the vacate took,
/// in a fresh sandbox. Returns the last sandbox and how many vacates took.
fn run_interrupted(host: &Host, job: &Job, at: &[u64]) -> (PathBuf, JobResult, usize) {
    let rt = rt();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mut restore: Option<Arc<[u8]>> = None;
    let mut fuel_before = 0u64;
    let mut vacates = 0;
    loop {
        let sandbox = job.sandbox(restore.is_none());
        let before = job.taken.lock().unwrap().len();
        let ctl = Control::new();
        let spec = job.spec(&sandbox, restore.clone());
        let result = rt.block_on(async {
            let run = host.run(spec, ctl.clone(), clock.clone());
            tokio::pin!(run);
            if let Some(&point) = at.get(vacates) {
                loop {
                    tokio::select! {
                        r = &mut run => return r,
                        _ = tokio::time::sleep(Duration::from_millis(1)) => {}
                    }
                    if fuel_before + ctl.usage(clock.as_ref()).fuel_consumed >= point {
                        ctl.soft_kill(clock.as_ref(), Duration::from_secs(120));
                        break;
                    }
                }
            }
            run.await
        });
        match result.ending {
            Ending::Evicted { vacated: true } => {
                {
                    let t = job.taken.lock().unwrap();
                    assert_eq!(t.len(), before + 1, "one checkpoint per vacate");
                    assert!(matches!(t.last(), Some(Ok(c)) if c.stopping), "{:?}", t.last());
                }
                let snap = job.last_snapshot();
                let header = andes_snapshot::inspect(&snap).unwrap().header;
                assert!(header.unwound.is_some());
                fuel_before = header.usage["fuel_consumed"] as u64;
                restore = Some(snap);
                vacates += 1;
            }
            _ => return (sandbox, result, vacates),
        }
    }
}

fn check_random_interruptions(job: &Job, out: &str, ks: impl Iterator<Item = usize>) {
    let host = host();
    let (want, want_files, total) = reference(&host, job, out);
    let seed = seed();
    let _report = ReportSeed(seed);
    let mut state = seed;
    for k in ks {
        let at = points(&mut state, k, total);
        let (sandbox, result, vacates) = run_interrupted(&host, job, &at);
        assert_eq!(result.ending, Ending::Exited(0), "k = {k}: {result:?}");
        // Every vacate took a checkpoint (a loaded machine may let the job end
        // before the last point was seen; then fewer vacates were made).
        assert!(vacates >= 1 && vacates <= k, "k = {k}: {vacates} vacates");
        if vacates < k {
            println!("k = {k}: the job ended after {vacates} vacates");
        }
        let got = std::fs::read(sandbox.join(out)).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "k = {k}, interrupted at fuel {at:?}"
        );
        assert_eq!(files_digest(&sandbox), want_files, "k = {k}: the sandbox's files");
    }
}

#[test]
fn a_compute_job_interrupted_k_times_for_k_1_to_20_ends_as_if_never_interrupted() {
    let job = Job::new(
        instrumented("primes"),
        r#"[ Cmd = "primes.wasm"; Arguments = "30000000"; Out = "out.txt" ]"#,
        vec![],
    );
    check_random_interruptions(&job, "out.txt", 1..=20);
}

fn digest_input(lines: usize) -> Vec<u8> {
    (0..lines)
        .map(|i| format!("line {i} of the input, {}\n", "x".repeat(i % 37)))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn a_file_processing_job_with_open_files_interrupted_k_times_ends_as_if_never_interrupted() {
    // The job reads one open file and writes another while it runs.
    let job = digest_job(2000, 3000);
    check_random_interruptions(&job, "out.txt", [1, 2, 3, 5, 8, 13, 20].into_iter());
}

/// The instrumented `digest` job over `lines` lines of input, `rounds` times,
/// its output in `out.txt`.
fn digest_job(lines: usize, rounds: u32) -> Job {
    Job::new(
        instrumented("digest"),
        &format!(
            r#"[ Cmd = "digest.wasm"; Arguments = "input.txt digests.txt {rounds}"; Out = "out.txt" ]"#
        ),
        vec![("input.txt".into(), digest_input(lines))],
    )
}

#[test]
fn a_job_whose_memory_grows_to_64_mib_is_restored_with_all_of_it() {
    let job = Job::new(
        instrumented("digest"),
        r#"[ Cmd = "digest.wasm"; Arguments = "input.txt digests.txt 2000 64"; Out = "out.txt"; RequestMemory = 256 ]"#,
        vec![("input.txt".into(), digest_input(1500))],
    );
    check_random_interruptions(&job, "out.txt", [3].into_iter());
    let biggest = job
        .taken
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.as_ref().unwrap().header.memories[0].bytes)
        .max()
        .unwrap();
    assert!(biggest > 16 << 20, "the last snapshots hold the grown memory: {biggest} bytes");
}

/// Runs `job` in `sandbox` to its end, asking for a checkpoint every
/// `every` once the last one asked for has arrived, `most` times at most.
fn run_checkpointed(
    rt: &tokio::runtime::Runtime,
    host: &Host,
    job: &Job,
    sandbox: &Path,
    every: Duration,
    most: usize,
) -> JobResult {
    let ctl = Control::new();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    rt.block_on(async {
        let run = host.run(job.spec(sandbox, None), ctl.clone(), clock);
        tokio::pin!(run);
        let mut asked = 0;
        loop {
            tokio::select! {
                r = &mut run => return r,
                _ = tokio::time::sleep(every) => {}
            }
            if job.taken.lock().unwrap().len() == asked && asked < most {
                ctl.request_checkpoint();
                asked += 1;
            }
        }
    })
}

#[test]
fn periodic_checkpoints_let_the_job_go_on_and_each_one_resumes_elsewhere() {
    // Long enough that a second checkpoint is taken before the job ends even
    // on a loaded machine, where writing the first one (off the job's
    // thread, fsynced) can take as long as 4,000 rounds do.
    let job = digest_job(1500, 12_000);
    let host = host();
    let (want, want_files, _) = reference(&host, &job, "out.txt");
    let rt = rt();
    let sandbox = job.sandbox(true);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let result = run_checkpointed(&rt, &host, &job, &sandbox, Duration::from_millis(1), 3);
    assert_eq!(result.ending, Ending::Exited(0));
    assert_eq!(std::fs::read(sandbox.join("out.txt")).unwrap(), want, "the job went on");
    let snapshots: Vec<Checkpoint> =
        job.taken.lock().unwrap().iter().map(|c| c.clone().unwrap()).collect();
    assert!(snapshots.len() >= 2, "took {} periodic checkpoints", snapshots.len());
    assert!(snapshots.iter().all(|c| !c.stopping));
    // Each one, restored in a fresh sandbox, ends the same way.
    for c in &snapshots {
        let fresh = job.sandbox(false);
        let r = rt.block_on(host.run(
            job.spec(&fresh, Some(c.bytes.clone().into())),
            Control::new(),
            clock.clone(),
        ));
        assert_eq!(r.ending, Ending::Exited(0), "{r:?}");
        assert_eq!(std::fs::read(fresh.join("out.txt")).unwrap(), want);
        assert_eq!(files_digest(&fresh), want_files);
    }
}

/// Bytes of the packs `cur` names that `prev` does not: what `cur` added.
fn added(prev: &Checkpoint, cur: &Checkpoint) -> (u64, u64) {
    let new = cur.header.packs.iter().filter(|p| !prev.header.packs.contains(p));
    let total = cur.header.packs.iter().map(|p| p.size).sum();
    (new.map(|p| p.size).sum(), total)
}

/// A job that fills 16 MiB and then changes a little of it at a time,
/// checkpointed again and again: once its memory stops growing, each
/// snapshot adds at most 5 % of the memory's stored bytes (only the chunks
/// written since the last; a fault per chunk tells which), and the last of a
/// chain of at least ten, restored in an empty sandbox from a store holding
/// only what it names, ends as the uninterrupted run does.
#[test]
fn periodic_snapshots_write_only_what_changed_and_the_last_of_a_chain_restores_alone() {
    let job = Job::new(
        instrumented("digest"),
        r#"[ Cmd = "digest.wasm"; Arguments = "input.txt digests.txt 20000 16"; Out = "out.txt"; RequestMemory = 256 ]"#,
        vec![("input.txt".into(), digest_input(5000))],
    );
    let host = host();
    let (want, want_files, _) = reference(&host, &job, "out.txt");
    let rt = rt();
    let sandbox = job.sandbox(true);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let result = run_checkpointed(&rt, &host, &job, &sandbox, Duration::from_millis(2), usize::MAX);
    assert_eq!(result.ending, Ending::Exited(0), "{result:?}");
    assert_eq!(std::fs::read(sandbox.join("out.txt")).unwrap(), want, "the job went on");
    let snapshots: Vec<Checkpoint> =
        job.taken.lock().unwrap().iter().map(|c| c.clone().unwrap()).collect();
    let full = snapshots.last().unwrap().header.memories[0].bytes;
    let steady: Vec<&Checkpoint> =
        snapshots.iter().filter(|c| c.header.memories[0].bytes == full).collect();
    assert!(steady.len() >= 11, "{} snapshots once the memory was full", steady.len());
    for pair in steady.windows(2) {
        let (new, total) = added(pair[0], pair[1]);
        assert!(
            new * 20 <= total,
            "a snapshot added {new} bytes to the {total} its memory is stored in"
        );
    }
    // The last, restored from nothing but what it names.
    let last = *steady.last().unwrap();
    let only = tempfile::tempdir().unwrap();
    let alone = BlobStore::open(only.path(), false).unwrap();
    for c in last.header.contents() {
        alone.put(&job.blobs.read(c.blake3).unwrap()).unwrap();
    }
    let fresh = job.sandbox(false);
    let r = rt.block_on(host.run(
        job.spec_with(&fresh, Some(last.bytes.clone().into()), &alone),
        Control::new(),
        clock,
    ));
    assert_eq!(r.ending, Ending::Exited(0), "{r:?}");
    assert_eq!(std::fs::read(fresh.join("out.txt")).unwrap(), want);
    assert_eq!(files_digest(&fresh), want_files);
}

#[test]
fn a_suspended_job_can_be_checkpointed_and_stays_suspended() {
    let job = Job::new(
        instrumented("primes"),
        r#"[ Cmd = "primes.wasm"; Arguments = "40000000"; Out = "out.txt" ]"#,
        vec![],
    );
    let host = host();
    let rt = rt();
    let sandbox = job.sandbox(true);
    let ctl = Control::new();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let result = rt.block_on(async {
        let run = host.run(job.spec(&sandbox, None), ctl.clone(), clock.clone());
        tokio::pin!(run);
        // Let it run, then suspend it.
        while ctl.usage(clock.as_ref()).fuel_consumed < 10_000_000 {
            tokio::select! {
                r = &mut run => panic!("ended early: {r:?}"),
                _ = tokio::time::sleep(Duration::from_millis(1)) => {}
            }
        }
        ctl.suspend(clock.as_ref());
        ctl.request_checkpoint();
        while job.taken.lock().unwrap().is_empty() {
            tokio::select! {
                r = &mut run => panic!("ended while suspended: {r:?}"),
                _ = tokio::time::sleep(Duration::from_millis(1)) => {}
            }
        }
        assert!(ctl.is_suspended(), "still suspended after its checkpoint");
        // It does not run on while suspended.
        let fuel = ctl.usage(clock.as_ref()).fuel_consumed;
        for _ in 0..50 {
            tokio::select! {
                r = &mut run => panic!("ended while suspended: {r:?}"),
                _ = tokio::time::sleep(Duration::from_millis(2)) => {}
            }
        }
        let after = ctl.usage(clock.as_ref()).fuel_consumed;
        assert!(after <= fuel + 2_000_000, "ran on while suspended: {fuel} -> {after}");
        ctl.resume(clock.as_ref());
        run.await
    });
    assert_eq!(result.ending, Ending::Exited(0));
    // The snapshot taken while suspended resumes to the same end.
    let want = std::fs::read(sandbox.join("out.txt")).unwrap();
    let fresh = job.sandbox(false);
    let r =
        rt.block_on(host.run(job.spec(&fresh, Some(job.last_snapshot())), Control::new(), clock));
    assert_eq!(r.ending, Ending::Exited(0));
    assert_eq!(std::fs::read(fresh.join("out.txt")).unwrap(), want);
}

/// Takes one snapshot of `job` by vacating it early.
fn one_snapshot(host: &Host, job: &Job) -> Arc<[u8]> {
    let (_, _, total) = reference(host, job, "out.txt");
    let (_, _, vacates) = run_interrupted(host, job, &[total / 2]);
    assert!(vacates >= 1);
    let t = job.taken.lock().unwrap();
    t.iter().find_map(|c| c.as_ref().ok().filter(|c| c.stopping)).unwrap().bytes.clone().into()
}

fn held(r: &JobResult) -> (i32, i32, String) {
    match &r.ending {
        Ending::Held { code, subcode, reason } => (*code, *subcode, reason.clone()),
        e => panic!("not held: {e:?}"),
    }
}

#[test]
fn a_bad_snapshot_is_refused_with_a_hold_that_says_why_and_the_sandbox_is_untouched() {
    let host = host();
    let job = Job::new(
        instrumented("primes"),
        r#"[ Cmd = "primes.wasm"; Arguments = "20000000"; Out = "out.txt" ]"#,
        vec![],
    );
    let snap = one_snapshot(&host, &job);
    let rt = rt();
    let run = |spec: JobSpec| rt.block_on(host.run(spec, Control::new(), Arc::new(SystemClock)));

    // One changed byte.
    let mut bad = snap.to_vec();
    let mid = bad.len() / 2;
    bad[mid] ^= 1;
    let sandbox = job.sandbox(false);
    std::fs::write(sandbox.join("keep.txt"), b"mine").unwrap();
    let (code, sub, why) = held(&run(job.spec(&sandbox, Some(bad.into()))));
    assert_eq!((code, sub), (36, 1));
    assert!(why.contains("corrupted"), "{why}");
    assert_eq!(std::fs::read(sandbox.join("keep.txt")).unwrap(), b"mine", "nothing lost");

    // Cut short.
    let cut: Arc<[u8]> = snap[..snap.len() - 10].into();
    let (_, _, why) = held(&run(job.spec(&job.sandbox(false), Some(cut))));
    assert!(why.contains("corrupted") || why.contains("truncated"), "{why}");

    // Signed by a key the host does not trust.
    let mut other = job.spec(&job.sandbox(false), Some(snap.clone()));
    let t = other.transparent.as_mut().unwrap();
    Arc::get_mut(t).unwrap().trusted = Arc::new(|_| false);
    let (_, _, why) = held(&run(other));
    assert!(why.contains("does not trust"), "{why}");

    // Of another module.
    let mut spec = job.spec(&job.sandbox(false), Some(snap.clone()));
    spec.module = instrumented("digest");
    let (_, _, why) = held(&run(spec));
    assert!(why.contains("not of this module"), "{why}");

    // A memory pack it names, tampered with, then missing: the hold names
    // the snapshot and the pack, and the sandbox is left as it was.
    let name = andes_snapshot::stored_hash(&snap).unwrap();
    let pack = andes_snapshot::inspect(&snap).unwrap().header.packs[0].blake3.clone();
    let kept = std::fs::read(job.blobs.path(&pack)).unwrap();
    std::fs::write(job.blobs.path(&pack), b"another memory").unwrap();
    let sandbox = job.sandbox(false);
    std::fs::write(sandbox.join("keep.txt"), b"mine").unwrap();
    let (code, sub, why) = held(&run(job.spec(&sandbox, Some(snap.clone()))));
    assert_eq!((code, sub), (36, 1));
    assert!(why.contains(&name) && why.contains(&pack), "{why}");
    assert!(why.contains("does not match its hash"), "{why}");
    assert_eq!(std::fs::read(sandbox.join("keep.txt")).unwrap(), b"mine", "nothing lost");
    std::fs::remove_file(job.blobs.path(&pack)).unwrap();
    let (code, _, why) = held(&run(job.spec(&job.sandbox(false), Some(snap.clone()))));
    assert_eq!(code, 36);
    assert!(
        why.contains(&name) && why.contains(&format!("memory pack {pack}: it is missing")),
        "{why}"
    );
    std::fs::write(job.blobs.path(&pack), kept).unwrap();
    let r = run(job.spec(&job.sandbox(false), Some(snap)));
    assert_eq!(r.ending, Ending::Exited(0), "restored once its pack is back: {r:?}");
}

/// `snap` with its checkpoint stack (memory 1) changed by `tamper`, signed
/// again by the job's own (trusted) key: a snapshot that passes every check
/// of its file but whose saved frames were not written by the module.
fn tampered(job: &Job, snap: &[u8], tamper: impl FnOnce(&mut [u8])) -> Arc<[u8]> {
    let digest = andes_starter::engine::module_digest(&job.module);
    let opened = andes_snapshot::open(snap, &|k| *k == job.trusted, &digest).unwrap();
    let image = andes_starter::transparent::initial_image(&job.module).unwrap();
    let packs = opened.load_packs(&job.blobs).unwrap();
    let mut memories = Vec::new();
    for (i, m) in opened.header.memories.iter().enumerate() {
        let mut bytes = vec![0u8; m.bytes as usize];
        let base = if i == 0 { &image } else { andes_snapshot::Image::none() };
        opened.restore_memory(i, &mut bytes, base, false, &packs).unwrap();
        memories.push(bytes);
    }
    tamper(&mut memories[1]);
    let mut b = andes_snapshot::Builder::new(opened.header.clone());
    b.memory(&memories[0], &image);
    b.memory(&memories[1], andes_snapshot::Image::none());
    let sealed = b.finish(&job.trusted, |m| job.signer.sign(m).to_bytes());
    sealed.store_pack(&job.blobs).unwrap();
    sealed.bytes.into()
}

/// A snapshot signed by a trusted host whose saved call stack the module
/// did not write (its end pointer out of the buffer or unaligned, no
/// frames, frames of garbage whose site numbers no function has) puts the job
/// on hold, saying the checkpoint cannot be restored; the host is unharmed
/// and the genuine snapshot still resumes to the uninterrupted run's end.
#[test]
fn a_signed_snapshot_whose_saved_frames_do_not_fit_the_module_is_held_not_run() {
    let host = host();
    let job = Job::new(
        instrumented("primes"),
        r#"[ Cmd = "primes.wasm"; Arguments = "20000000"; Out = "out.txt" ]"#,
        vec![],
    );
    let (want, _, _) = reference(&host, &job, "out.txt");
    let snap = one_snapshot(&host, &job);
    let rt = rt();
    let run = |s: Arc<[u8]>| {
        rt.block_on(host.run(
            job.spec(&job.sandbox(false), Some(s)),
            Control::new(),
            Arc::new(SystemClock),
        ))
    };
    let layout = andes_compile::StackLayout::new(1 << 20);
    let current = |stack: &[u8]| u32::from_le_bytes(stack[..4].try_into().unwrap()) as usize;
    let set_current =
        |to: u32| move |stack: &mut [u8]| stack[..4].copy_from_slice(&to.to_le_bytes());
    type Tamper = Box<dyn FnOnce(&mut [u8])>;
    let cases: Vec<(&str, Tamper)> = vec![
        ("end pointer past the buffer", Box::new(set_current(u32::MAX - 3))),
        ("end pointer before the buffer", Box::new(set_current(layout.start - 4))),
        ("no frames", Box::new(set_current(layout.start))),
        (
            "end pointer not aligned",
            Box::new(move |s: &mut [u8]| {
                let c = current(s) as u32 + 1;
                s[..4].copy_from_slice(&c.to_le_bytes());
            }),
        ),
        (
            "frames of garbage",
            Box::new(move |s: &mut [u8]| {
                let end = current(s);
                s[layout.start as usize..end].fill(0xff);
            }),
        ),
    ];
    for (what, tamper) in cases {
        let r = run(tampered(&job, &snap, tamper));
        let (code, sub, why) = held(&r);
        assert_eq!((code, sub), (36, 1), "{what}: {why}");
        assert!(why.contains("cannot be restored"), "{what}: {why}");
        assert!(why.contains("saved call stack"), "{what}: {why}");
    }
    // The genuine snapshot, re-signed the same way, still resumes.
    let sandbox = job.sandbox(false);
    let r = rt.block_on(host.run(
        job.spec(&sandbox, Some(tampered(&job, &snap, |_| {}))),
        Control::new(),
        Arc::new(SystemClock),
    ));
    assert_eq!(r.ending, Ending::Exited(0));
    assert_eq!(std::fs::read(sandbox.join("out.txt")).unwrap(), want);
}

#[test]
fn a_module_not_compiled_for_checkpoints_runs_as_before_and_is_simply_not_checkpointed() {
    let job = Job::new(
        sample("primes"),
        r#"[ Cmd = "primes.wasm"; Arguments = "20000000"; Out = "out.txt" ]"#,
        vec![],
    );
    let host = host();
    let rt = rt();
    let sandbox = job.sandbox(true);
    let ctl = Control::new();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let r = rt.block_on(async {
        let run = host.run(job.spec(&sandbox, None), ctl.clone(), clock.clone());
        tokio::pin!(run);
        ctl.request_checkpoint();
        run.await
    });
    assert_eq!(r.ending, Ending::Exited(0));
    assert!(job.taken.lock().unwrap().is_empty(), "no snapshot of a plain module");
    assert!(std::fs::read_to_string(sandbox.join("out.txt")).unwrap().starts_with("primes below"));
}

/// Runs a job as the execute host's daemon does ([`Host::run_in_place`], a
/// task of a multi-thread runtime), calling `drive` with its control block
/// until it ends.
fn run_in_place(
    rt: &tokio::runtime::Runtime,
    host: &Arc<Host>,
    spec: JobSpec,
    ctl: &Arc<Control>,
    mut drive: impl FnMut(&Control) + Send,
) -> JobResult {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let task = {
        let (host, ctl, clock) = (host.clone(), ctl.clone(), clock.clone());
        rt.spawn(async move { host.run_in_place(spec, ctl, clock).await })
    };
    while !task.is_finished() {
        drive(ctl);
        std::thread::sleep(Duration::from_millis(2));
    }
    rt.block_on(task).unwrap()
}

/// A compiled job runs unmetered (no fuel or epoch checks) where the host
/// runs plain jobs so: its periodic checkpoints and its vacate reach it
/// through its poll word, its suspension and hard kill by the host's signal,
/// and each snapshot resumes to the uninterrupted run's end.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_compiled_job_runs_unmetered_and_its_poll_word_brings_checkpoints_and_vacates() {
    let job = digest_job(1500, 100_000);
    let host = unmetered_host();
    let (want, want_files, _) = reference(&host, &job, "out.txt");
    let rt = rt();
    let clock = SystemClock;
    // Two periodic checkpoints, a suspension, then a vacate.
    let ctl = Control::new();
    let mut step = 0;
    let mut cpu_at_suspend = 0.0;
    let r = run_in_place(&rt, &host, job.spec(&job.sandbox(true), None), &ctl, |ctl| {
        let taken = job.taken.lock().unwrap().len();
        match step {
            0 | 1 if taken == step && ctl.is_running() => {
                ctl.request_checkpoint();
                step += 1;
            }
            2 if taken == 2 => {
                ctl.suspend(&clock);
                step += 1;
            }
            3 if ctl.is_stopped() => {
                cpu_at_suspend = ctl.usage(&clock).remote_user_cpu;
                step += 1;
            }
            4..=50 => step += 1,
            51 => {
                let cpu = ctl.usage(&clock).remote_user_cpu;
                assert!(cpu - cpu_at_suspend < 0.01, "ran on while suspended");
                ctl.soft_kill(&clock, Duration::from_secs(60));
                step += 1;
            }
            _ => {}
        }
    });
    assert_eq!(r.ending, Ending::Evicted { vacated: true }, "{r:?}");
    assert!(r.usage.fuel_unmetered, "the compiled job ran metered");
    let taken: Vec<Checkpoint> =
        job.taken.lock().unwrap().iter().map(|c| c.clone().unwrap()).collect();
    assert_eq!(taken.len(), 3, "two periodic checkpoints and the vacate's");
    // Each snapshot came from one pause at a poll point, each timed from its
    // request.
    assert_eq!(r.usage.pauses, 3, "{:?}", r.usage);
    assert!(r.usage.pause_p99_us <= r.usage.pause_max_us, "{:?}", r.usage);
    assert!(!taken[0].stopping && !taken[1].stopping && taken[2].stopping);
    for c in &taken {
        let fresh = job.sandbox(false);
        let spec = job.spec(&fresh, Some(c.bytes.clone().into()));
        let r = run_in_place(&rt, &host, spec, &Control::new(), |_| {});
        assert_eq!(r.ending, Ending::Exited(0), "{r:?}");
        assert!(r.usage.fuel_unmetered);
        assert_eq!(std::fs::read(fresh.join("out.txt")).unwrap(), want);
        assert_eq!(files_digest(&fresh), want_files);
    }
}

/// A compiled job in a loop with no poll point (a leaf's, which the
/// instrumentation leaves alone) is still hard-killed at once, unmetered.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_compiled_job_that_never_polls_is_hard_killed_at_once() {
    let job = Job::new(instrumented("spin"), r#"[ Cmd = "spin.wasm" ]"#, vec![]);
    let host = unmetered_host();
    let rt = rt();
    let ctl = Control::new();
    let mut asked: Option<std::time::Instant> = None;
    let r = run_in_place(&rt, &host, job.spec(&job.sandbox(true), None), &ctl, |ctl| {
        if asked.is_none() && ctl.usage(&SystemClock).remote_user_cpu > 0.05 {
            ctl.hard_kill();
            asked = Some(std::time::Instant::now());
        }
    });
    let took = asked.expect("killed").elapsed();
    assert_eq!(r.ending, Ending::Evicted { vacated: false }, "{r:?}");
    assert!(r.usage.fuel_unmetered);
    assert!(took < Duration::from_secs(5), "the kill took {took:?}");
}

/// `module` with the limits of its memory `index` replaced by `limits`
/// (the binary encoding: flags, minimum, maximum).
fn with_memory_limits(module: &[u8], index: usize, limits: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    for p in wasmparser::Parser::new(0).parse_all(module) {
        let wasmparser::Payload::MemorySection(s) = p.unwrap() else { continue };
        let range = s.range();
        let starts: Vec<usize> = s.clone().into_iter_with_offsets().map(|m| m.unwrap().0).collect();
        let mut content = Vec::new();
        leb(starts.len(), &mut content);
        for (i, &start) in starts.iter().enumerate() {
            let end = starts.get(i + 1).copied().unwrap_or(range.end);
            if i == index {
                content.extend_from_slice(limits);
            } else {
                content.extend_from_slice(&module[start..end]);
            }
        }
        let mut size = Vec::new();
        leb(range.end - range.start, &mut size);
        let header = range.start - size.len() - 1;
        let mut out = module[..header].to_vec();
        out.push(5);
        leb(content.len(), &mut out);
        out.extend_from_slice(&content);
        out.extend_from_slice(&module[range.end..]);
        wasmparser::Validator::new().validate_all(&out).expect("the patched module validates");
        return out;
    }
    panic!("no memory section")
}

/// A module that says it was compiled by andes compile but whose poll
/// memory could move (it can grow) or holds no word is not linked to the
/// host's control block (which writes the word through a pointer from other
/// threads): the job runs to its end, is not checkpointed, and its sink says
/// why.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_poll_memory_that_could_move_or_is_empty_is_refused_and_the_job_runs_uncheckpointed() {
    let host = unmetered_host();
    let rt = rt();
    // Growable from one page: the job runs to its end. One page at most but
    // none at first: the job's own loop checks read past its end and trap,
    // as the module says (the host writes nothing there).
    let cases: [(&[u8], Ending); 2] = [
        (&[0x00, 0x01], Ending::Exited(0)),
        (&[0x01, 0x00, 0x01], Ending::Trapped { signal: 11, trap: "memory_out_of_bounds".into() }),
    ];
    for (limits, ending) in cases {
        let module: Arc<[u8]> = with_memory_limits(
            &instrumented("primes"),
            andes_compile::POLL_MEMORY as usize,
            limits,
        )
        .into();
        assert_eq!(
            andes_compile::instrumentation_version(&module),
            Some(andes_compile::INSTRUMENTATION_VERSION)
        );
        let job = Job::new(
            module,
            r#"[ Cmd = "primes.wasm"; Arguments = "3000000"; Out = "out.txt" ]"#,
            vec![],
        );
        let sandbox = job.sandbox(true);
        let ctl = Control::new();
        let r = run_in_place(&rt, &host, job.spec(&sandbox, None), &ctl, |ctl| {
            ctl.request_checkpoint();
        });
        assert_eq!(r.ending, ending, "{limits:?}: {r:?}");
        let taken = job.taken.lock().unwrap();
        assert!(!taken.is_empty(), "{limits:?}: the sink heard nothing");
        for t in taken.iter() {
            let e = t.as_ref().expect_err("no snapshot of such a module");
            assert!(
                e.contains("cannot be checkpointed")
                    && e.contains("andes.checkpoint.poll")
                    && e.contains("cannot grow"),
                "{limits:?}: {e}"
            );
        }
        assert_eq!(r.usage.pauses, 0);
        if r.ending == Ending::Exited(0) {
            let out = std::fs::read_to_string(sandbox.join("out.txt")).unwrap();
            assert!(out.starts_with("primes below"), "{out}");
        }
    }
}

/// A guest whose memory the host writes: each round `random_get` and
/// `clock_time_get` write into one of 32 pages the guest itself never
/// writes (in turn), the guest keeps a copy of what they wrote in a page of
/// its own, spins, and checks every one of the 32 pages against its copy,
/// exiting 3 or 4 on a difference. A snapshot that missed a write the host
/// made (not the guest's code) restores that page as it was before, and the
/// check after the restore fails wherever the checkpoint came.
const HOST_WRITES: &str = r#"(module
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 40)
  (data (i32.const 16) "ok\n")
  (func $page (param $k i32) (result i32)
    (i32.mul (i32.const 65536) (i32.add (i32.const 2) (local.get $k))))
  (func $copy (param $k i32) (result i32)
    (i32.add (i32.const 65536) (i32.mul (local.get $k) (i32.const 16))))
  (func (export "_start")
    (local $i i32) (local $j i32) (local $k i32)
    (loop $round
      (local.set $k (i32.rem_u (local.get $i) (i32.const 32)))
      (drop (call $random (call $page (local.get $k)) (i32.const 8)))
      (drop (call $clock (i32.const 1) (i64.const 0)
        (i32.add (call $page (local.get $k)) (i32.const 8))))
      (i64.store (call $copy (local.get $k)) (i64.load (call $page (local.get $k))))
      (i64.store offset=8 (call $copy (local.get $k))
        (i64.load offset=8 (call $page (local.get $k))))
      (local.set $j (i32.const 0))
      (loop $spin
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br_if $spin (i32.lt_u (local.get $j) (i32.const 100000))))
      (local.set $j (i32.const 0))
      (loop $check
        (if (i64.ne (i64.load (call $page (local.get $j))) (i64.load (call $copy (local.get $j))))
          (then (call $exit (i32.const 3))))
        (if (i64.ne (i64.load offset=8 (call $page (local.get $j)))
                    (i64.load offset=8 (call $copy (local.get $j))))
          (then (call $exit (i32.const 4))))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br_if $check (i32.lt_u (local.get $j) (i32.const 32))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $round (i32.lt_u (local.get $i) (i32.const 2000))))
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 3))
    (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))"#;

#[test]
fn what_the_host_writes_into_guest_memory_is_in_the_next_snapshot() {
    let module = andes_compile::instrument(
        &wat::parse_str(HOST_WRITES).unwrap(),
        &andes_compile::Options::default(),
    )
    .expect("instrument");
    let job = Job::new(module.into(), r#"[ Cmd = "writes.wasm"; Out = "out.txt" ]"#, vec![]);
    check_random_interruptions(&job, "out.txt", [2, 5, 12].into_iter());
    // Under the unmetered engine too, checkpointed again and again.
    let host = unmetered_host();
    let rt = rt();
    let ctl = Control::new();
    let r = run_in_place(&rt, &host, job.spec(&job.sandbox(true), None), &ctl, |ctl| {
        if ctl.is_running() {
            ctl.request_checkpoint();
        }
    });
    assert_eq!(r.ending, Ending::Exited(0), "{r:?}");
    let taken: Vec<Checkpoint> =
        job.taken.lock().unwrap().iter().map(|c| c.clone().unwrap()).collect();
    assert!(taken.len() >= 5, "{} checkpoints", taken.len());
    for c in taken.iter().rev().take(3) {
        let fresh = job.sandbox(false);
        let r = run_in_place(
            &rt,
            &host,
            job.spec(&fresh, Some(c.bytes.clone().into())),
            &Control::new(),
            |_| {},
        );
        assert_eq!(r.ending, Ending::Exited(0), "{r:?}");
        assert_eq!(std::fs::read(fresh.join("out.txt")).unwrap(), b"ok\n");
    }
}
