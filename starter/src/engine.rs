//! The host's wasmtime engines, and the cache of compiled modules.
//!
//! The metered engine (fuel and epoch checks compiled in) can run every job
//! on every platform. Where the host can stop guest code by signal (Linux on
//! x86_64, `starter/src/preempt.rs`) and [`HostConfig::meter_fuel`] is off, a
//! second, unmetered engine runs the jobs that need no fuel: about twice as
//! fast on loop-heavy code, since the checks at every loop header and
//! function entry keep values in registers from surviving calls.
//!
//! # The compiled-module cache
//!
//! [`HostConfig::cache_dir`] holds native code that wasmtime loads without
//! checking it (`Module::deserialize` is `unsafe`): whoever can write a file
//! there can run code as the host. So:
//!
//! * [`Host::new`] refuses, with an error saying what to do, a cache directory
//!   that others can write (group- or world-writable, or owned by another
//!   user), rather than falling back to no disk cache: a host that silently
//!   compiled every module again would hide a misconfiguration, or an attack,
//!   from its operator. A directory it creates is created mode 0700.
//! * Each cache file is `andesMC1`, a BLAKE3 MAC keyed with a secret of the
//!   cache (`.key` in the directory, 32 random bytes, mode 0600, made on first
//!   use) over the engine's key, the module's digest and the compiled code, then
//!   the code. The whole file is read into memory, its MAC checked, and only
//!   those bytes are deserialized; a file failing the check is removed (with a
//!   warning) and the module compiled again.
//! * On Windows, where access is an access control list and not a mode, a
//!   directory the host creates and the key it makes get one of their own that
//!   only the host's user is in (`andes_beneath::private`), and a key that lets
//!   anyone else read it is refused; owners are not checked.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::state::JobState;
use sha2::{Digest, Sha256};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Module};

/// How the host's engine is set up.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Jobs that may be instantiated at once: the pooling allocator's slots,
    /// where it is used (not on Linux, where a job's memories come from
    /// the starter's `memory` module and the host's slots bound how many run).
    pub max_instances: u32,
    /// The largest linear memory any job may have, in bytes (a job's own cap
    /// is its `RequestMemory`).
    pub max_memory_bytes: u64,
    /// The wasm stack cap, in bytes.
    pub max_wasm_stack: usize,
    /// Fuel units between yields to the scheduler: smaller reacts faster to
    /// suspend, larger costs less. The default, 1,000,000, was chosen by
    /// measurement (BENCHMARKS.md): about 1 % of compute time, and a suspend
    /// still takes effect within 0.2 ms.
    pub fuel_yield_interval: u64,
    /// How often the engine's epoch ticks (kill and limit checks).
    pub epoch_tick: Duration,
    /// Where compiled modules are cached; `None` keeps them in memory only.
    pub cache_dir: Option<PathBuf>,
    /// Meter every job's fuel (the host configuration's
    /// `STARTER_METER_FUEL`). When false, a job with no `MaxFuel` runs on
    /// the unmetered engine where the platform allows it (Linux on x86_64;
    /// a module compiled by `andes compile` too, when the host runs it in
    /// place, as its daemon and `andes run` do): about twice as
    /// fast on compute, but nobody counts its fuel, so its
    /// `WasmFuelConsumed` is not published ([`crate::Usage::fuel_unmetered`]).
    /// Suspend, resume, vacate, hard kill and every limit work the same
    /// either way. True by default, so that every job reports its fuel
    /// unless the host chooses speed.
    pub meter_fuel: bool,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            max_instances: 1000,
            max_memory_bytes: 4 << 30,
            max_wasm_stack: 1 << 20,
            fuel_yield_interval: 1_000_000,
            epoch_tick: Duration::from_millis(5),
            cache_dir: None,
            meter_fuel: true,
        }
    }
}

/// The engine and the module cache shared by every job on a host.
pub struct Host {
    pub(crate) engine: Engine,
    pub(crate) config: HostConfig,
    engine_key: String,
    /// The secret the disk cache's files are authenticated with.
    cache_key: Option<[u8; 32]>,
    modules: Mutex<HashMap<[u8; 32], Arc<Prepared>>>,
    pub(crate) linker: wasmtime::Linker<JobState>,
    ticker: Option<std::thread::JoinHandle<()>>,
    pub(crate) ticking: Arc<crate::ticker::Ticking>,
    compilations: std::sync::atomic::AtomicU64,
    /// The unmetered engine, when jobs may use it.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(crate) unmetered: Option<Unmetered>,
    /// Why jobs that need no fuel are metered anyway, if they are.
    unmetered_off: Option<String>,
}

/// The engine for jobs that need no fuel: no fuel, no epoch checks, no wasm
/// backtraces (a killed guest's trap is raised at the pad, see
/// [`crate::preempt`]).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) struct Unmetered {
    pub(crate) engine: Engine,
    engine_key: String,
    /// Compiled modules; `None` for a module instrumented by `andes
    /// compile`, which always runs metered.
    modules: Mutex<HashMap<[u8; 32], Option<Arc<Prepared>>>>,
    pub(crate) linker: wasmtime::Linker<JobState>,
    pub(crate) preempt: crate::preempt::Preempt,
    pub(crate) threads: Arc<crate::jobthread::JobThreads>,
}

/// A module compiled and linked against the host's imports once, so that
/// each job only instantiates it.
pub(crate) struct Prepared {
    pub(crate) module: Module,
    /// The pre-linked module, or why linking failed (an unknown import).
    pub(crate) pre: Result<wasmtime::InstancePre<JobState>, String>,
    /// The `andes compile` instrumentation version, if the module has one.
    pub(crate) instrumentation: Option<u32>,
    /// Memory 0's initial image, computed at the first checkpoint.
    image: std::sync::OnceLock<Result<andes_snapshot::Image, String>>,
    /// On the unmetered engine: the module's function bodies, where a
    /// signal may stop or trap the guest.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(crate) code: Option<Arc<crate::preempt::GuestCode>>,
}

impl Prepared {
    /// Memory 0's initial image (`bytes` are the module's), hashed once.
    pub(crate) fn image(&self, bytes: &[u8]) -> Result<andes_snapshot::Image, String> {
        self.image.get_or_init(|| crate::transparent::initial_image(bytes)).clone()
    }
}

/// The SHA-256 of a module's bytes.
pub fn module_digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Bytes of each pool slot's table kept resident after its instance ends.
#[cfg(not(target_os = "linux"))]
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// The engine configuration: `metered` compiles fuel and epoch checks in.
fn engine_config(config: &HostConfig, metered: bool) -> Config {
    let mut cfg = Config::new();
    cfg.strategy(wasmtime::Strategy::Cranelift);
    cfg.async_support(true);
    cfg.consume_fuel(metered);
    cfg.epoch_interruption(metered);
    // No backtraces, on either engine: a job's ending is told by its trap's
    // code or its exit status alone, and taking one walks the guest's frames
    // at every `proc_exit`. (A killed unmetered guest traps at the pad, in
    // another module: there would be none to take anyway.)
    cfg.wasm_backtrace(false);
    // For profiling a job's code with `perf`: /tmp/perf-PID.map names the
    // guest's functions.
    if std::env::var_os("ANDES_PERF_MAP").is_some() {
        cfg.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    cfg.max_wasm_stack(config.max_wasm_stack);
    cfg.async_stack_size(config.max_wasm_stack + (1 << 20));
    allocation(&mut cfg, config);
    cfg
}

/// Where the engine's instances, memories and stacks come from.
///
/// On Linux, memories and stacks a job leaves are kept for the next job,
/// zeroed in place where few of their pages were used ([`crate::memory`]):
/// a short job's start then neither faults nor shoots down another CPU's
/// TLB. Data segments are copied in (a copy-on-write image needs wasmtime's
/// own mappings); a module with more than three memories is refused by the
/// job's limiter ([`crate::state::Limiter`]), as the pool refused it.
#[cfg(target_os = "linux")]
fn allocation(cfg: &mut Config, _config: &HostConfig) {
    let reuse = std::sync::Arc::new(crate::memory::Memories(crate::memory::Reuse::process()));
    cfg.memory_init_cow(false);
    cfg.with_host_memory(reuse.clone());
    cfg.with_host_stack(reuse);
    cfg.allocation_strategy(InstanceAllocationStrategy::OnDemand);
}

/// Where the engine's instances, memories and stacks come from: wasmtime's
/// pooling allocator, one slot per job that may run at once.
#[cfg(not(target_os = "linux"))]
fn allocation(cfg: &mut Config, config: &HostConfig) {
    let mut pool = wasmtime::PoolingAllocationConfig::default();
    // A module instrumented by `andes compile` has two more memories: the
    // word the host sets to ask for a checkpoint, and its checkpoint stack.
    pool.total_memories(config.max_instances.saturating_mul(3))
        .max_memories_per_module(3)
        .total_tables(config.max_instances)
        .total_core_instances(config.max_instances)
        .total_stacks(config.max_instances)
        .max_memory_size(config.max_memory_bytes as usize);
    // A freed instance's table is zeroed with memset up to this size rather
    // than decommitted: cheaper than the madvise, its TLB shootdown and the
    // next job's page faults (hello: 47 to 42 µs start to exit, BENCHMARKS.md).
    // Linear memory is not: a small job touches pages spread over its first
    // megabyte (the stack's top, then data), and zeroing it all costs more.
    pool.table_keep_resident(TABLE_KEEP_RESIDENT);
    cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
}

/// The cache key of an engine's compiled code.
fn engine_key(engine: &Engine, config: &HostConfig) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    config.max_wasm_stack.hash(&mut h);
    format!("{:016x}", h.finish())
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
impl Unmetered {
    fn new(config: &HostConfig) -> Result<Unmetered, String> {
        crate::preempt::install()?;
        let engine = Engine::new(&engine_config(config, false))
            .map_err(|e| format!("creating the unmetered engine: {e:#}"))?;
        let preempt = crate::preempt::Preempt::new(&engine, config.max_wasm_stack)?;
        let linker = make_linker(&engine).map_err(|e| format!("{e:#}"))?;
        Ok(Unmetered {
            engine_key: engine_key(&engine, config),
            engine,
            modules: Mutex::new(HashMap::new()),
            linker,
            preempt,
            threads: crate::jobthread::JobThreads::new(),
        })
    }
}

impl Host {
    /// A host with this configuration.
    pub fn new(config: HostConfig) -> Result<Host> {
        let engine =
            Engine::new(&engine_config(&config, true)).context("creating the wasm engine")?;
        let engine_key = engine_key(&engine, &config);
        let cache_key = match &config.cache_dir {
            Some(dir) => Some(open_cache(dir)?),
            None => None,
        };
        let ticking = Arc::new(crate::ticker::Ticking::default());
        let ticker = {
            let engine = engine.clone();
            let ticking = ticking.clone();
            let tick = config.epoch_tick;
            std::thread::Builder::new()
                .name("andes-epoch".into())
                .spawn(move || {
                    while ticking.wait_for_work() {
                        std::thread::sleep(tick);
                        engine.increment_epoch();
                    }
                })
                .context("starting the epoch ticker")?
        };
        let linker = make_linker(&engine)?;
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        let (unmetered, unmetered_off) = match config.meter_fuel {
            true => (None, Some("the host meters every job (meter_fuel)".to_string())),
            false => match Unmetered::new(&config) {
                Ok(u) => (Some(u), None),
                Err(e) => {
                    tracing::warn!("every job runs metered: {e}");
                    (None, Some(e))
                }
            },
        };
        #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
        let unmetered_off = Some(match config.meter_fuel {
            true => "the host meters every job (meter_fuel)".to_string(),
            false => "this platform cannot stop unmetered guest code".to_string(),
        });
        Ok(Host {
            linker,
            engine,
            config,
            engine_key,
            cache_key,
            modules: Mutex::new(HashMap::new()),
            ticker: Some(ticker),
            ticking,
            compilations: Default::default(),
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            unmetered,
            unmetered_off,
        })
    }

    /// Why jobs that need no fuel are metered here anyway (`meter_fuel`, or
    /// a platform that cannot stop unmetered guest code), or `None` when
    /// they run unmetered.
    pub fn unmetered_unavailable(&self) -> Option<&str> {
        self.unmetered_off.as_deref()
    }

    /// How many times the epoch ticker was woken from rest: once for each
    /// stretch of time in which metered jobs that outlasted their first
    /// yield ran (jobs that end within it never wake it).
    pub fn epoch_ticker_starts(&self) -> u64 {
        self.ticking.starts()
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    fn cache_path(&self, digest: &[u8; 32], engine_key: &str) -> Option<PathBuf> {
        self.config
            .cache_dir
            .as_ref()
            .map(|d| d.join(format!("{}-{}.cwasm", hex::encode(digest), engine_key)))
    }

    /// The compiled module for these bytes: from memory, else from the disk
    /// cache, else compiled (and cached). An invalid module is an error
    /// naming the problem.
    pub fn module(&self, bytes: &[u8]) -> Result<Module> {
        Ok(self.prepared(bytes, None)?.module.clone())
    }

    /// The module, compiled and pre-linked, keyed by its digest (computed
    /// when not given).
    pub(crate) fn prepared(&self, bytes: &[u8], digest: Option<[u8; 32]>) -> Result<Arc<Prepared>> {
        let digest = digest.unwrap_or_else(|| module_digest(bytes));
        if let Some(p) = self.lock().get(&digest) {
            return Ok(p.clone());
        }
        let module = self.load_or_compile(&self.engine, &self.engine_key, bytes, &digest)?;
        let pre = self.linker.instantiate_pre(&module).map_err(|e| format!("{e:#}"));
        let instrumentation = andes_compile::instrumentation_version(bytes);
        let p = Arc::new(Prepared {
            module,
            pre,
            instrumentation,
            image: Default::default(),
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            code: None,
        });
        self.lock().insert(digest, p.clone());
        Ok(p)
    }

    /// The module compiled and pre-linked for the unmetered engine, or
    /// `None` when the host meters every job.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(crate) fn prepared_unmetered(
        &self,
        bytes: &[u8],
        digest: Option<[u8; 32]>,
    ) -> Result<Option<Arc<Prepared>>> {
        let Some(u) = &self.unmetered else { return Ok(None) };
        let digest = digest.unwrap_or_else(|| module_digest(bytes));
        let lock = || u.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = lock().get(&digest) {
            return Ok(p.clone());
        }
        let module = self.load_or_compile(&u.engine, &u.engine_key, bytes, &digest)?;
        let pre = u.linker.instantiate_pre(&module).map_err(|e| format!("{e:#}"));
        let code = Some(Arc::new(crate::preempt::GuestCode::of(&module)));
        // An instrumented module runs here too: its checkpoints are asked for
        // through its poll word, which needs no fuel or epoch check.
        let instrumentation = andes_compile::instrumentation_version(bytes);
        let p =
            Arc::new(Prepared { module, pre, instrumentation, image: Default::default(), code });
        lock().insert(digest, Some(p.clone()));
        Ok(Some(p))
    }

    fn load_or_compile(
        &self,
        engine: &Engine,
        engine_key: &str,
        bytes: &[u8],
        digest: &[u8; 32],
    ) -> Result<Module> {
        let path = self.cache_path(digest, engine_key);
        if let (Some(p), Some(key)) = (&path, &self.cache_key)
            && let Ok(file) = std::fs::read(p)
        {
            match open_cached(key, engine_key, digest, &file) {
                // SAFETY: these bytes are exactly what `Module::serialize` below
                // wrote for this engine (its compatibility key is in the name and
                // under the MAC), authenticated with the cache's secret, which only
                // this user can read; wasmtime also checks the header.
                Some(code) => match unsafe { Module::deserialize(engine, code) } {
                    Ok(m) => return Ok(m),
                    Err(e) => {
                        tracing::warn!("module cache {}: {e:#}; compiling again", p.display())
                    }
                },
                None => {
                    tracing::warn!(
                        "module cache {}: the file fails its integrity check (not written by \
                         this host, or altered); removed, compiling again",
                        p.display()
                    );
                    let _ = std::fs::remove_file(p);
                }
            }
        }
        let m = Module::new(engine, bytes)?;
        self.compilations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let (Some(p), Some(key)) = (&path, &self.cache_key)
            && let Ok(code) = m.serialize()
        {
            write_atomically(p, &seal(key, engine_key, digest, &code));
        }
        Ok(m)
    }

    /// How many modules this host has compiled (cache misses).
    pub fn compilations(&self) -> u64 {
        self.compilations.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Compiles without caching (to measure compilation).
    pub fn compile_uncached(&self, bytes: &[u8]) -> Result<Module> {
        Module::new(&self.engine, bytes)
    }

    /// True when the module with this digest is compiled in memory.
    pub fn is_cached_in_memory(&self, digest: &[u8; 32]) -> bool {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if let Some(u) = &self.unmetered
            && u.modules.lock().unwrap_or_else(|e| e.into_inner()).contains_key(digest)
        {
            return true;
        }
        self.lock().contains_key(digest)
    }

    /// Forgets the in-memory cache (the disk cache stays).
    pub fn clear_memory_cache(&self) {
        self.lock().clear();
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if let Some(u) = &self.unmetered {
            u.modules.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Arc<Prepared>>> {
        self.modules.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The magic that starts a cache file.
const CACHE_MAGIC: &[u8; 8] = b"andesMC1";

fn cache_mac(key: &[u8; 32], engine_key: &str, digest: &[u8; 32], code: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(&(engine_key.len() as u64).to_le_bytes());
    h.update(engine_key.as_bytes());
    h.update(digest);
    h.update(code);
    *h.finalize().as_bytes()
}

/// A cache file's bytes: the magic, the MAC, the code.
fn seal(key: &[u8; 32], engine_key: &str, digest: &[u8; 32], code: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CACHE_MAGIC.len() + 32 + code.len());
    out.extend_from_slice(CACHE_MAGIC);
    out.extend_from_slice(&cache_mac(key, engine_key, digest, code));
    out.extend_from_slice(code);
    out
}

/// The code of a cache file whose MAC is right, else `None`.
fn open_cached<'a>(
    key: &[u8; 32],
    engine_key: &str,
    digest: &[u8; 32],
    file: &'a [u8],
) -> Option<&'a [u8]> {
    let rest = file.strip_prefix(&CACHE_MAGIC[..])?;
    let (mac, code) = rest.split_at_checked(32)?;
    let want = blake3::Hash::from(cache_mac(key, engine_key, digest, code));
    // `blake3::Hash` compares in constant time.
    (want == blake3::Hash::from(<[u8; 32]>::try_from(mac).ok()?)).then_some(code)
}

/// Checks (and creates, mode 0700) the cache directory and returns its secret,
/// making it on first use.
fn open_cache(dir: &Path) -> Result<[u8; 32]> {
    if !dir.exists() {
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(dir).with_context(|| format!("creating the module cache {}", dir.display()))?;
        andes_beneath::private::restrict_to_owner(dir)
            .with_context(|| format!("restricting the module cache {}", dir.display()))?;
    }
    check_private(dir, "the module cache directory", 0o022)?;
    let key_path = dir.join(".key");
    let mut key = [0u8; 32];
    match std::fs::read(&key_path) {
        Ok(k) => {
            check_private(&key_path, "the module cache's key", 0o077)?;
            key = k.try_into().map_err(|_| {
                anyhow::anyhow!(
                    "the module cache's key {} is not 32 bytes: remove it (the cache's files \
                     are then compiled again)",
                    key_path.display()
                )
            })?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut key);
            let mut o = std::fs::OpenOptions::new();
            o.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
            let mut f = o.open(&key_path).with_context(|| {
                format!("creating the module cache's key {}", key_path.display())
            })?;
            andes_beneath::private::restrict_to_owner(&key_path).with_context(|| {
                format!("restricting the module cache's key {}", key_path.display())
            })?;
            std::io::Write::write_all(&mut f, &key).with_context(|| {
                format!("writing the module cache's key {}", key_path.display())
            })?;
        }
        Err(e) => {
            return Err(e)
                .with_context(|| format!("reading the module cache's key {}", key_path.display()));
        }
    }
    Ok(key)
}

/// Refuses a path owned by another user or with any of the mode bits `forbidden`
/// (0o022: others may write it; 0o077: others may read it too). Unix only; see the
/// module documentation for Windows.
#[cfg(unix)]
fn check_private(path: &Path, what: &str, forbidden: u32) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).with_context(|| format!("{what} {}", path.display()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        anyhow::bail!(
            "{what} {} belongs to user id {}, not to this user ({me}): it holds native code the \
             host runs, so only the host's own user may own it; chown it, or point \
             MODULE_CACHE elsewhere",
            path.display(),
            m.uid()
        );
    }
    if m.mode() & forbidden != 0 {
        anyhow::bail!(
            "{what} {} is open to others (mode {:o}): it guards native code the host runs, so \
             only its owner may {}; chmod {}, or point MODULE_CACHE elsewhere",
            path.display(),
            m.mode() & 0o7777,
            if forbidden == 0o022 { "write it" } else { "read or write it" },
            if forbidden == 0o022 { "go-w (0700 for a directory)" } else { "600" }
        );
    }
    Ok(())
}

/// Windows: refuses a file whose access control list lets anyone but its owner
/// (and the system and administrators) read it, when reads are `forbidden`.
#[cfg(not(unix))]
fn check_private(path: &Path, what: &str, forbidden: u32) -> Result<()> {
    if forbidden & 0o044 == 0 || path.is_dir() {
        return Ok(());
    }
    let f = std::fs::File::open(path).with_context(|| format!("{what} {}", path.display()))?;
    if let Some(who) = andes_beneath::private::open_to_others(&f)
        .with_context(|| format!("reading who may read {what} {}", path.display()))?
    {
        anyhow::bail!(
            "{what} {} is open to others: {who}; it guards native code the host runs, so \
             only its owner may read it: remove it (the cache is then made again), or point \
             MODULE_CACHE elsewhere",
            path.display()
        );
    }
    Ok(())
}

fn write_atomically(path: &Path, data: &[u8]) {
    if let Err(e) = andes_beneath::replace_file(path, data, 0o600) {
        tracing::debug!("compiled-module cache {}: {e}", path.display());
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.ticking.stop();
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

/// The linker every job shares: WASI (wasi-common, async) and the
/// `andes:job` imports.
pub(crate) fn make_linker(engine: &wasmtime::Engine) -> anyhow::Result<wasmtime::Linker<JobState>> {
    let mut linker: wasmtime::Linker<JobState> = wasmtime::Linker::new(engine);
    wasi_common::tokio::add_to_linker(&mut linker, |s: &mut JobState| &mut s.wasi)?;
    crate::imports::add_to_linker(&mut linker)?;
    // The yield point of modules instrumented by `andes compile`.
    linker.func_wrap_async(
        andes_compile::YIELD_MODULE,
        andes_compile::YIELD_FIELD,
        |mut caller: wasmtime::Caller<'_, JobState>, (): ()| {
            Box::new(async move { crate::transparent::on_yield(&mut caller).await })
        },
    )?;
    // wasi-common refuses exit statuses of 126 and above; a job may exit
    // with any status 0..=255, as HTCondor reports it.
    linker.allow_shadowing(true);
    for m in ["wasi_snapshot_preview1", "wasi_unstable"] {
        linker.func_wrap(m, "proc_exit", |code: i32| -> anyhow::Result<()> {
            Err(wasi_common::I32Exit(code & 0xff).into())
        })?;
    }
    Ok(linker)
}
