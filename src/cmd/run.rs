//! `andes run`: run one module locally, in exactly the execute host's
//! sandbox, and say how it ended in HTCondor's terms. A user's way to try a
//! job before submitting it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use andes_starter::{Clock, Control, Ending, Host, HostConfig, JobSpec, Limits, SystemClock};
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use classad::ClassAd;

/// Arguments of `andes run`.
#[derive(Args)]
pub struct RunArgs {
    /// The module (wasm32-wasip1).
    module: PathBuf,
    /// The job's arguments (argv[0] is the module's file name).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
    /// Linear memory cap, like request_memory: `64M`, `1G`, or MiB.
    #[arg(long, value_name = "SIZE")]
    memory: Option<String>,
    /// Fuel cap (MaxFuel): the job is held when it runs out.
    #[arg(long, value_name = "N")]
    fuel: Option<u64>,
    /// Wall-clock cap (allowed_execute_duration): `10s`, `5m`, `2h`, or seconds.
    #[arg(long, value_name = "DURATION")]
    timeout: Option<String>,
    /// Disk cap for the sandbox (request_disk): `100M`, `1G`, or KiB.
    #[arg(long, value_name = "SIZE")]
    disk: Option<String>,
    /// The sandbox directory: the only directory the job sees (default: the
    /// current directory).
    #[arg(long, value_name = "D")]
    dir: Option<PathBuf>,
    /// An environment variable for the job (repeatable); the job sees no other.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// Time a vacated job (first Ctrl-C) has before it is killed.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    grace: String,
    /// Print, as the last line, a JSON object of the attributes the run set.
    #[arg(long)]
    json: bool,
    /// Count the job's fuel (WasmFuelConsumed) even without --fuel. Without
    /// either, the job runs unmetered where the platform allows it (Linux on
    /// x86_64): about twice as fast on compute, and its fuel is not counted.
    #[arg(long)]
    meter_fuel: bool,
    /// Take the job from this ClassAd file, as a schedd sends it (Arguments,
    /// Environment, In, Out, Err, RequestMemory, ...); options given here
    /// override it.
    #[arg(long, value_name = "FILE")]
    ad: Option<PathBuf>,
    /// Write how the job ended (its exit or hold attributes and usage) to
    /// FILE as a ClassAd.
    #[arg(long, value_name = "FILE")]
    result: Option<PathBuf>,
    /// Keep the job's checkpoints in D, and resume from them: a cooperative
    /// job's saved state (`saved.state`, written durably at each save); for a
    /// module compiled by `andes compile`, its signed snapshots, numbered in
    /// order (`snapshot-00000001`, ...; sorting the names sorts them), with
    /// the sandbox's files under `blobs/` and the key that signs them
    /// (`checkpoints`). A run interrupted in any way resumes from the last.
    #[arg(long, value_name = "D")]
    checkpoint_dir: Option<PathBuf>,
    /// How many of the latest snapshots --checkpoint-dir keeps (0: all).
    #[arg(long, value_name = "N", default_value_t = 10, requires = "checkpoint_dir")]
    checkpoint_keep: usize,
    /// Checkpoint this often (`10s`, `500ms`): a module compiled by `andes
    /// compile` is snapshotted and goes on; a cooperative job sees
    /// `checkpoint-requested`.
    #[arg(long, value_name = "DURATION", requires = "checkpoint_dir")]
    checkpoint_every: Option<String>,
    /// Resume from this snapshot (of a module compiled by `andes compile`),
    /// taken in checkpoint directory D: D's `blobs/` hold its files, D's key
    /// must have signed it. Without it, the last snapshot in --checkpoint-dir
    /// is used.
    #[arg(long, value_name = "SNAPSHOT")]
    restore: Option<PathBuf>,
}

/// How the snapshots in a checkpoint directory are named: this, then their
/// number in eight digits, so that sorting the names sorts the snapshots.
pub const SNAPSHOT_PREFIX: &str = "snapshot-";
/// The key in a checkpoint directory that signs its snapshots.
pub const CHECKPOINT_KEY: &str = "checkpoints";

/// The name of snapshot number `n`.
fn snapshot_name(n: u64) -> String {
    format!("{SNAPSHOT_PREFIX}{n:08}")
}

/// The numbered snapshots in `dir`, oldest first.
fn snapshots(dir: &std::path::Path) -> Vec<(u64, PathBuf)> {
    let mut out: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let n = name.to_str()?.strip_prefix(SNAPSHOT_PREFIX)?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// The checkpoint directory's signing key, created on first use.
fn checkpoint_key(dir: &std::path::Path) -> Result<andes_protocol::Keypair> {
    let path = dir.join(CHECKPOINT_KEY);
    if path.exists() {
        return andes_protocol::Keypair::load(&path).map_err(|e| anyhow!("{e}"));
    }
    let k = andes_protocol::Keypair::generate(CHECKPOINT_KEY).map_err(|e| anyhow!("{e}"))?;
    k.save(dir, false).map_err(|e| anyhow!("{e}"))?;
    Ok(k)
}

/// The contents a snapshot names: its files' and its memory packs.
fn contents(h: &andes_snapshot::Header) -> std::collections::HashSet<String> {
    h.contents().map(|c| c.blake3.to_string()).collect()
}

/// The numbered snapshots of a checkpoint directory: each new one is written
/// durably, then all but the latest `keep` go, with the contents (files and
/// memory packs) only they named.
struct Numbered {
    dir: PathBuf,
    blobs: andes_snapshot::BlobStore,
    keep: usize,
    /// Every snapshot kept, and the contents it names.
    kept: Vec<(u64, std::collections::HashSet<String>)>,
    /// The snapshot this run resumes from (its path, made absolute) and the
    /// contents it names: never pruned until the run has written a newer one,
    /// so that a run given an older `--restore` (or killed before its first
    /// snapshot) can always start again from it.
    pinned: Option<(PathBuf, std::collections::HashSet<String>)>,
}

impl Numbered {
    fn open(
        dir: &std::path::Path,
        blobs: andes_snapshot::BlobStore,
        keep: usize,
        restore: Option<(&std::path::Path, &[u8])>,
    ) -> Numbered {
        let kept = snapshots(dir)
            .into_iter()
            .map(|(n, p)| {
                let files = std::fs::read(&p)
                    .ok()
                    .and_then(|b| andes_snapshot::inspect(&b).ok())
                    .map(|i| contents(&i.header))
                    .unwrap_or_default();
                (n, files)
            })
            .collect();
        let pinned = restore.map(|(path, bytes)| {
            let files =
                andes_snapshot::inspect(bytes).map(|i| contents(&i.header)).unwrap_or_default();
            (std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()), files)
        });
        // A run killed between writing a snapshot and pruning left one
        // more than it keeps: this one tidies up first.
        let mut n = Numbered { dir: dir.to_path_buf(), blobs, keep, kept, pinned };
        n.prune(None);
        n
    }

    fn keep(&mut self, c: &andes_starter::Checkpoint, received: std::time::SystemTime) {
        let n = self.kept.last().map_or(1, |(n, _)| n + 1);
        let path = self.dir.join(snapshot_name(n));
        if let Err(e) = andes_beneath::replace_file(&path, &c.bytes, 0o600) {
            eprintln!("andes: the snapshot was not kept in {}: {e}", path.display());
            return;
        }
        eprintln!(
            "andes: checkpoint: {} ({} bytes{})",
            path.display(),
            c.bytes.len(),
            if c.stopping { ", the job stops" } else { "" }
        );
        self.kept.push((n, contents(&c.header)));
        // The run has moved past the snapshot it resumed from.
        self.pinned = None;
        self.prune(Some(received));
    }

    /// All but the latest `keep` snapshots go, with the contents only they
    /// named, but those stored or reused since `since` (less a margin for
    /// coarse file times): they may belong to a snapshot being taken.
    fn prune(&mut self, since: Option<std::time::SystemTime>) {
        let gone = if self.keep == 0 { 0 } else { self.kept.len().saturating_sub(self.keep) };
        let pinned = self.pinned.as_ref().map(|(p, _)| p.as_path());
        let is_pinned = |path: &std::path::Path| {
            pinned.is_some_and(|p| std::fs::canonicalize(path).is_ok_and(|c| c == p))
        };
        let mut still = Vec::new();
        for (n, files) in self.kept.drain(..gone) {
            let path = self.dir.join(snapshot_name(n));
            if is_pinned(&path) {
                still.push((n, files));
            } else {
                let _ = std::fs::remove_file(path);
            }
        }
        self.kept.splice(0..0, still);
        let named: std::collections::HashSet<&str> = self
            .kept
            .iter()
            .flat_map(|(_, f)| f.iter())
            .chain(self.pinned.iter().flat_map(|(_, f)| f.iter()))
            .map(String::as_str)
            .collect();
        let before = since.map(|t| t - Duration::from_secs(1));
        if let Err(e) = self.blobs.retain_older_than(&named, before) {
            eprintln!("andes: old snapshot contents not removed: {e}");
        }
    }
}

/// Writes a checkpoint directory's snapshots on a thread of its own, so that
/// the job goes on while one is written (durably: a file of hundreds of MB
/// takes seconds). A snapshot taken while the one before is still being
/// written waits for it: at most two are held in memory.
struct SnapshotWriter {
    tx: std::sync::Mutex<Option<std::sync::mpsc::SyncSender<andes_starter::Checkpoint>>>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl SnapshotWriter {
    fn start(mut numbered: Numbered) -> Result<Arc<SnapshotWriter>> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<andes_starter::Checkpoint>(0);
        let thread = std::thread::Builder::new()
            .name("andes-snapshots".into())
            .spawn(move || {
                for c in rx {
                    // The job goes on once this one is handed over: what its
                    // next snapshot stores from now on is spared by the prune.
                    let received = std::time::SystemTime::now();
                    numbered.keep(&c, received);
                }
                // The job has ended: no snapshot is being taken any more.
                numbered.prune(None);
            })
            .context("starting the snapshot writer")?;
        Ok(Arc::new(SnapshotWriter {
            tx: std::sync::Mutex::new(Some(tx)),
            thread: std::sync::Mutex::new(Some(thread)),
        }))
    }

    /// Hands `c` to the writer, waiting while it writes the one before.
    fn send(&self, c: andes_starter::Checkpoint) {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(tx) = tx {
            let _ = tx.send(c);
        }
    }

    /// Waits until every snapshot handed over is written.
    fn finish(&self) {
        drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// Transparent checkpoints into (and from) a checkpoint directory, and the
/// writer that must be finished once the job has ended.
fn transparent(
    dir: &std::path::Path,
    restore: Option<&std::path::Path>,
    keep: usize,
) -> Result<Option<(Arc<andes_starter::Transparent>, Arc<SnapshotWriter>)>> {
    let key = checkpoint_key(dir)?;
    let public = *key.public().as_bytes();
    let blobs = andes_snapshot::BlobStore::open(&dir.join("blobs"), true)
        .with_context(|| format!("opening {}", dir.join("blobs").display()))?;
    let snapshot_path =
        restore.map(Path::to_path_buf).or_else(|| snapshots(dir).pop().map(|s| s.1));
    let restore = match &snapshot_path {
        Some(p) => {
            let b = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            eprintln!(
                "andes: the job resumes from its snapshot {} ({} bytes)",
                p.display(),
                b.len()
            );
            Some(Arc::from(b))
        }
        None => None,
    };
    let pin = snapshot_path.as_deref().zip(restore.as_deref());
    let writer = SnapshotWriter::start(Numbered::open(dir, blobs.clone(), keep, pin))?;
    let signer = key.clone();
    let to_writer = writer.clone();
    let t = Arc::new(andes_starter::Transparent {
        job: "andes run".into(),
        public,
        sign: Arc::new(move |m| signer.sign(m)),
        blobs,
        sink: Arc::new(move |c| match c {
            Ok(c) => to_writer.send(c),
            Err(e) => eprintln!("andes: checkpoint failed: {e}"),
        }),
        restore,
        trusted: Arc::new(move |k| *k == public),
    });
    Ok(Some((t, writer)))
}

/// The file in a checkpoint directory that holds a cooperative job's state.
pub const SAVED_STATE: &str = "saved.state";

/// Parses a duration as `humantime` does (`10s`, `5m`, `2h 30m`, `1d`,
/// `250ms`), or a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(s)
        .map_err(|e| anyhow!("`{s}` is not a duration ({e}; try 10s, 5m, 2h)"))
}

/// Parses a size with HTCondor's units (K, M, G, T; optional B) into
/// `unit`s (1024 for KiB, 1 << 20 for MiB); a bare number is already in `unit`s.
pub fn parse_size(s: &str, unit: u64) -> Result<u64> {
    let t = s.trim().to_ascii_uppercase();
    let t = t.strip_suffix('B').unwrap_or(&t);
    let (num, mult) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, unit),
    };
    let n: f64 = num.trim().parse().map_err(|_| anyhow!("`{s}` is not a size (try 64M or 2G)"))?;
    if !n.is_finite() || n <= 0.0 {
        bail!("`{s}` is not a positive size");
    }
    Ok(((n * mult as f64) / unit as f64).ceil() as u64)
}

fn job_ad(a: &RunArgs) -> Result<ClassAd> {
    let mut ad = match &a.ad {
        Some(f) => {
            let text =
                std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            classad::parse_ad(&text).map_err(|e| anyhow!("{}: {e}", f.display()))?
        }
        None => ClassAd::new(),
    };
    // condor_submit's default RequestMemory and RequestDisk are expressions
    // of the job's measured usage, meant for a slot's size; run alone, the
    // job gets this command's own defaults (or the options below).
    for r in ["RequestMemory", "RequestDisk"] {
        if ad.get(r).is_some_and(|e| !matches!(e, classad::Expr::Lit(_))) {
            ad.remove(r);
        }
    }
    ad.insert_value("Cmd", a.module.display().to_string());
    if a.ad.is_none() || !a.args.is_empty() {
        ad.insert_value("Arguments", classad::argenv::join_v2(&a.args));
    }
    let mut env = Vec::new();
    for e in &a.env {
        let (k, v) = e.split_once('=').ok_or_else(|| anyhow!("--env {e}: expected NAME=VALUE"))?;
        env.push(format!("{k}={v}"));
    }
    if a.ad.is_none() || !env.is_empty() {
        ad.insert_value("Environment", classad::argenv::join_v2(&env));
    }
    if let Some(m) = &a.memory {
        ad.insert_value("RequestMemory", parse_size(m, 1 << 20)? as i64);
    }
    if let Some(d) = &a.disk {
        ad.insert_value("RequestDisk", parse_size(d, 1 << 10)? as i64);
    }
    if let Some(f) = a.fuel {
        ad.insert_value("MaxFuel", f as i64);
    }
    if let Some(t) = &a.timeout {
        ad.insert_value("AllowedExecuteDuration", parse_duration(t)?.as_secs().max(1) as i64);
    }
    Ok(ad)
}

/// The user's cache directory for compiled modules (XDG_CACHE_HOME or
/// ~/.cache on Linux, ~/Library/Caches on macOS, %LOCALAPPDATA% on Windows).
fn cache_dir() -> Option<PathBuf> {
    Some(dirs::cache_dir()?.join("andes").join("modules"))
}

/// Runs `andes run`.
pub fn run(a: RunArgs) -> Result<ExitCode> {
    let module =
        std::fs::read(&a.module).with_context(|| format!("reading {}", a.module.display()))?;
    let module_name = a.module.display().to_string();
    let ad = job_ad(&a)?;
    let grace = parse_duration(&a.grace)?;
    let sandbox = match &a.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("the current directory")?,
    };
    if !sandbox.is_dir() {
        bail!("the sandbox {} is not a directory", sandbox.display());
    }
    let every = a.checkpoint_every.as_deref().map(parse_duration).transpose()?;
    if every.is_some_and(|d| d.is_zero()) {
        bail!("--checkpoint-every must be longer than zero");
    }
    let saved_state = match &a.checkpoint_dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            match std::fs::read(d.join(SAVED_STATE)) {
                Ok(b) => {
                    eprintln!(
                        "andes: the job resumes from its saved state in {} ({} bytes)",
                        d.display(),
                        b.len()
                    );
                    Some(Arc::from(b))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => bail!("reading {}: {e}", d.join(SAVED_STATE).display()),
            }
        }
        None => None,
    };
    let instrumented = andes_compile::instrumentation_version(&module).is_some();
    let ckpt_home = a
        .checkpoint_dir
        .clone()
        .or_else(|| a.restore.as_ref().map(|r| r.parent().unwrap_or(Path::new(".")).to_path_buf()));
    let snapshot_dir = a.checkpoint_dir.clone();
    let transparent = match &ckpt_home {
        Some(d) if instrumented => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            // The job sees its whole sandbox: checkpoints kept inside it would
            // show the job the key that signs them, and each snapshot would
            // hold the ones before it.
            let (dc, sc) = (std::fs::canonicalize(d)?, std::fs::canonicalize(&sandbox)?);
            if dc.starts_with(&sc) {
                bail!(
                    "the checkpoint directory {} is inside the job's sandbox {}: the job could \
                     read the key that signs its snapshots, and each snapshot would hold the \
                     last; keep checkpoints elsewhere, or give the job its own --dir",
                    d.display(),
                    sandbox.display()
                );
            }
            transparent(d, a.restore.as_deref(), a.checkpoint_keep)?
        }
        _ if a.restore.is_some() => bail!(
            "--restore: {} was not compiled by `andes compile`, so it has no snapshots",
            a.module.display()
        ),
        _ => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let host = Host::new(HostConfig {
        max_instances: 4,
        cache_dir: cache_dir(),
        meter_fuel: a.meter_fuel,
        ..Default::default()
    })?;
    let (transparent, writer) = transparent.unzip();
    let spec = JobSpec {
        module: module.into(),
        limits: Limits::from_ad(&ad),
        ad,
        sandbox,
        inherit_stdio: true,
        digest: None,
        saved_state,
        transparent,
        metered: false,
        sandbox_empty: false,
    };
    let ckpt_dir = a.checkpoint_dir.clone();
    let result = rt.block_on(async {
        let ctl = Control::new();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let watcher = {
            let job = ctl.clone();
            let (ctl, clock) = (ctl.clone(), clock.clone());
            let module = module_name.clone();
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            let w = tokio::spawn(async move {
                // Listening before the job starts, so Ctrl-C is never lost.
                let first = ctrl_c_listener().await;
                let _ = ready_tx.send(());
                if first.await.is_ok() {
                    // Listening again before saying so: a second Ctrl-C
                    // that follows the message at once is never lost.
                    let second = ctrl_c_listener().await;
                    eprintln!(
                        "andes: vacating the job ({}s to finish; Ctrl-C again to kill it)",
                        grace.as_secs()
                    );
                    ctl.request_checkpoint();
                    ctl.soft_kill(clock.as_ref(), grace);
                    if second.await.is_ok() {
                        eprintln!("andes: killing the job");
                        ctl.hard_kill();
                    }
                }
            });
            let _ = ready_rx.await;
            // Said once the guest runs (compiling a module can take a while,
            // longest under an emulator): a Ctrl-C from then on finds the
            // job's state to save.
            job.on_entered(move || {
                eprintln!("andes: running {module} (Ctrl-C vacates it, twice kills it)")
            });
            w
        };
        let keeper = ckpt_dir.map(|dir| {
            let ctl = ctl.clone();
            tokio::spawn(async move {
                let mut seen = 0;
                let mut tick = every.map(|d| {
                    let mut t = tokio::time::interval_at(tokio::time::Instant::now() + d, d);
                    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    t
                });
                loop {
                    tokio::select! {
                        _ = ctl.saved_beyond(seen) => {
                            let (n, state) = ctl.saved();
                            seen = n;
                            if let Some(state) = state {
                                keep_state(&dir, &state);
                            }
                        }
                        _ = async {
                            match tick.as_mut() {
                                Some(t) => {
                                    t.tick().await;
                                }
                                None => std::future::pending::<()>().await,
                            }
                        } => {
                            ctl.request_checkpoint();
                        }
                    }
                }
            })
        });
        // On this thread: Ctrl-C reaches the job through its control.
        let r = host.run_in_place(spec, ctl.clone(), clock).await;
        watcher.abort();
        if let Some(k) = keeper {
            k.abort();
            // A save just before the end is kept too.
            if let (Some(dir), (_, Some(state))) = (&a.checkpoint_dir, ctl.saved()) {
                keep_state(dir, &state);
            }
        }
        r
    });
    // Every snapshot the job took is on disk before its ending is acted on.
    if let Some(w) = &writer {
        w.finish();
    }
    // A job that ended has nothing to resume: its snapshots go, with the
    // file contents they named. A vacated (or held) one keeps them, and the
    // same command resumes it from the last.
    if let (Some(dir), true) = (&snapshot_dir, instrumented) {
        match result.ending {
            Ending::Exited(_) | Ending::Trapped { .. } => {
                for (_, p) in snapshots(dir) {
                    let _ = std::fs::remove_file(p);
                }
                let _ = std::fs::remove_dir_all(dir.join("blobs"));
            }
            Ending::Evicted { .. } => {
                if let Some((_, last)) = snapshots(dir).pop() {
                    eprintln!("andes: the same command resumes the job from {}", last.display())
                }
            }
            _ => {}
        }
    }
    let ad = result.to_ad();
    let (summary, code) = match &result.ending {
        Ending::Exited(c) => (format!("job exited normally with return value {c}"), *c & 0xff),
        Ending::Trapped { signal, trap } => {
            (format!("job was killed by signal {signal} (wasm trap: {trap})"), 128 + signal)
        }
        Ending::Held { code, subcode, reason } => (
            format!("job was held (HoldReasonCode {code}, HoldReasonSubCode {subcode}): {reason}"),
            125,
        ),
        Ending::Evicted { vacated: true } => ("job was vacated".to_string(), 130),
        Ending::Evicted { vacated: false } => ("job was killed".to_string(), 137),
    };
    for (level, line) in &result.log {
        eprintln!("andes: job log [{level:?}]: {line}");
    }
    let u = &result.usage;
    eprintln!("andes: {summary}");
    let fuel = match u.fuel_unmetered {
        true => "not metered".to_string(),
        false => u.fuel_consumed.to_string(),
    };
    eprintln!(
        "andes: cpu {:.3}s (user {:.3}s, system {:.3}s), wall {:.3}s, memory {} KiB, fuel {fuel}",
        u.remote_user_cpu + u.remote_sys_cpu,
        u.remote_user_cpu,
        u.remote_sys_cpu,
        u.remote_wall_clock_time,
        u.image_size_kib
    );
    if u.pauses > 0 {
        eprintln!(
            "andes: paused {} times for a checkpoint or vacate; from the request to paused: \
             p99 {:.2} ms, max {:.2} ms",
            u.pauses,
            u.pause_p99_us as f64 / 1e3,
            u.pause_max_us as f64 / 1e3
        );
    }
    if let Some(f) = &a.result {
        crate::settings::write_atomically(&f.display().to_string(), &ad.to_string())
            .with_context(|| format!("writing {}", f.display()))?;
    }
    if a.json {
        let keep = [
            "ExitCode",
            "ExitBySignal",
            "ExitSignal",
            "WasmTrap",
            "HoldReasonCode",
            "HoldReasonSubCode",
            "HoldReason",
            "RemoteUserCpu",
            "RemoteWallClockTime",
            "ImageSize",
            "WasmFuelConsumed",
        ];
        let mut out = serde_json::Map::new();
        for k in keep {
            if let Some(e) = ad.get(k) {
                out.insert(k.to_string(), classad::json::expr_to_json(e));
            }
        }
        outln!("{}", serde_json::Value::Object(out));
    }
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// Writes a saved state durably (aside, synced, renamed), or says why not.
fn keep_state(dir: &std::path::Path, state: &[u8]) {
    if let Err(e) = andes_beneath::replace_file(&dir.join(SAVED_STATE), state, 0o600) {
        eprintln!("andes: the job's saved state was not kept in {}: {e}", dir.display());
    }
}

/// A Ctrl-C listener, registered by the time it is returned (so that a
/// Ctrl-C from then on is never lost), to await.
async fn ctrl_c_listener() -> std::pin::Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>> {
    let mut f = Box::pin(tokio::signal::ctrl_c());
    // The first poll registers it; a poll that already finished it has the
    // answer (a finished future must not be polled again).
    let early = std::future::poll_fn(|cx| std::task::Poll::Ready(f.as_mut().poll(cx))).await;
    match early {
        std::task::Poll::Ready(r) => Box::pin(std::future::ready(r)),
        std::task::Poll::Pending => f,
    }
}

#[cfg(test)]
mod tests {
    use super::{Numbered, parse_duration, snapshot_name, snapshots};
    use std::time::Duration;

    #[test]
    fn durations_read_as_humantime_or_plain_seconds() {
        let secs = |s| parse_duration(s).unwrap();
        assert_eq!(secs("30"), Duration::from_secs(30));
        assert_eq!(secs("5m"), Duration::from_secs(300));
        assert_eq!(secs("2h 30m"), Duration::from_secs(9000));
        assert_eq!(secs("1d"), Duration::from_secs(86_400));
        assert_eq!(secs("250ms"), Duration::from_millis(250));
        let e = parse_duration("soon").unwrap_err().to_string();
        assert!(e.contains("`soon` is not a duration"), "{e}");
    }

    /// A run killed between writing a snapshot and pruning the oldest left
    /// one too many: the next run's directory drops it on opening.
    #[test]
    fn opening_a_checkpoint_directory_prunes_what_a_killed_run_left() {
        let dir = tempfile::tempdir().unwrap();
        for n in 1..=3 {
            std::fs::write(dir.path().join(snapshot_name(n)), b"snapshot").unwrap();
        }
        let blobs = andes_snapshot::BlobStore::open(&dir.path().join("blobs"), false).unwrap();
        let orphan = blobs.put(b"contents no kept snapshot names").unwrap();
        let _ = Numbered::open(dir.path(), blobs.clone(), 2, None);
        let left: Vec<u64> = snapshots(dir.path()).into_iter().map(|(n, _)| n).collect();
        assert_eq!(left, [2, 3]);
        assert!(!dir.path().join("blobs").join(&orphan).exists());
        // Keeping all (0) removes nothing.
        let _ = Numbered::open(dir.path(), blobs, 0, None);
        assert_eq!(snapshots(dir.path()).len(), 2);
    }

    /// `--restore` of an older snapshot of a directory that keeps fewer: the
    /// snapshot and the contents it names stay until the run writes a newer
    /// one (they were pruned on opening, before the restore read its files).
    #[test]
    fn the_snapshot_a_run_resumes_from_is_not_pruned_under_it() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = andes_snapshot::BlobStore::open(&dir.path().join("blobs"), false).unwrap();
        let content = blobs.put(b"the output file when snapshot 1 was taken").unwrap();
        let mut header = andes_snapshot::Header::new(&[0; 32], "test", 0);
        header.files.push(andes_snapshot::FileEntry {
            path: "out.txt".into(),
            size: 41,
            blake3: content.clone(),
        });
        let first = andes_snapshot::Builder::new(header).finish(&[0; 32], |_| [0; 64]).bytes;
        std::fs::write(dir.path().join(snapshot_name(1)), &first).unwrap();
        for n in 2..=4 {
            std::fs::write(dir.path().join(snapshot_name(n)), b"snapshot").unwrap();
        }
        let restore = dir.path().join(snapshot_name(1));
        let mut numbered =
            Numbered::open(dir.path(), blobs.clone(), 2, Some((&restore, &first[..])));
        let left: Vec<u64> = snapshots(dir.path()).into_iter().map(|(n, _)| n).collect();
        assert_eq!(left, [1, 3, 4], "the snapshot resumed from stays");
        assert!(dir.path().join("blobs").join(&content).exists(), "and so do its contents");
        numbered.pinned = None;
        numbered.prune(None);
        let left: Vec<u64> = snapshots(dir.path()).into_iter().map(|(n, _)| n).collect();
        assert_eq!(left, [3, 4], "once the run has moved past it, it goes");
        assert!(!dir.path().join("blobs").join(&content).exists());
    }
}
