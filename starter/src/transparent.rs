//! Transparent checkpoints of modules instrumented by `andes compile`.
//!
//! An instrumented module imports `andes:checkpoint/yield`, checks a flag (a
//! word of its poll memory) at its loop headers and can unwind its call
//! stack into a memory and rewind it (see the `andes-compile` crate for the
//! contract). To checkpoint,
//! the job's [`Control`](crate::control::Control) sets the flag, from whichever thread asks
//! ([`Control::request_checkpoint`](crate::control::Control::request_checkpoint), or a vacate): the job needs no fuel or
//! epoch checks, and runs unmetered where the host can stop it by other
//! means (its hard kill and suspension; see `preempt.rs`). At the next
//! checked loop header the guest calls the yield import, which starts an
//! unwind; every frame saves itself into the checkpoint stack memory and
//! `_start` returns. The starter then captures
//! the job's whole state as a signed snapshot ([`andes_snapshot`]): every
//! linear memory, every mutable global, the WASI state (open descriptors and
//! their offsets, the stream offsets, the monotonic clock) and the sandbox's
//! files, content-addressed in a [`BlobStore`]. It then rewinds and the job
//! continues (a periodic checkpoint), or it stops (a vacate).
//!
//! A restore does the reverse in a fresh Store and Instance, on any host:
//! the sandbox's files are written back, the WASI context is rebuilt with
//! the same descriptors at the same numbers, the memories and globals are
//! written, and `_start` is called to rewind into the frame that yielded.
//!
//! What a restored job sees differently: descriptors the guest opens after a
//! restore may get other numbers than in an uninterrupted run (WASI does not
//! say which number an open returns); a directory the guest held open comes
//! back as a pre-opened one.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use andes_compile as ac;
use andes_snapshot::{
    BlobStore, Descriptor, DescriptorKind, Global as SnapGlobal, GlobalValue, HashCache, Header,
    Unwound, WasiState,
};
use wasi_common::snapshots::preview_1::types;
use wasi_common::snapshots::preview_1::wasi_snapshot_preview1::WasiSnapshotPreview1 as P1;
use wasi_common::{WasiClocks, WasiCtx, WasiMonotonicClock};
use wasmtime::{Caller, Extern, Instance, Store, Val};

use crate::state::JobState;

/// How many descriptor numbers a capture looks through for the guest's open
/// files; a job holding a descriptor above this cannot be checkpointed.
pub const MAX_DESCRIPTOR: u32 = 1 << 16;

/// A checkpoint the starter took.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    /// The signed snapshot.
    pub bytes: Vec<u8>,
    /// Its header (what [`andes_snapshot::inspect`] would read back).
    pub header: Header,
    /// True when the job stops after it (a vacate), false when it goes on.
    pub stopping: bool,
    /// How long the job stood still for it: from its stop at a yield point
    /// until it went on (a periodic snapshot's memory is read and written
    /// after, off the job's thread, where the host can protect the memory).
    pub paused: std::time::Duration,
}

/// Signs a snapshot's digest: returns the ed25519 signature.
pub type SignFn = Arc<dyn Fn(&[u8]) -> [u8; 64] + Send + Sync>;
/// Says whether a signer's public key is trusted.
pub type TrustFn = Arc<dyn Fn(&[u8; 32]) -> bool + Send + Sync>;

/// Where a job's snapshots go, and where its restore comes from: set
/// [`crate::JobSpec::transparent`] to checkpoint a module instrumented by
/// `andes compile`. A module that is not instrumented ignores it.
#[derive(Clone)]
pub struct Transparent {
    /// The job's identity, recorded in each snapshot (`GlobalJobId`).
    pub job: String,
    /// The public half of the key that signs snapshots.
    pub public: [u8; 32],
    /// Signs a snapshot's digest with that key.
    pub sign: SignFn,
    /// Where the sandbox's files are kept, by content.
    pub blobs: BlobStore,
    /// Called with each checkpoint as it is taken, or with why one failed.
    pub sink: Arc<dyn Fn(Result<Checkpoint, String>) + Send + Sync>,
    /// A snapshot to resume from (its files must be in `blobs`).
    pub restore: Option<Arc<[u8]>>,
    /// Whose signatures a restore accepts.
    pub trusted: TrustFn,
}

impl fmt::Debug for Transparent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transparent")
            .field("job", &self.job)
            .field("blobs", &self.blobs)
            .field("restore", &self.restore.as_ref().map(|r| r.len()))
            .finish_non_exhaustive()
    }
}

/// The initial image of memory 0: the module's active data segments, what
/// a snapshot's memory 0 is diffed against. `Err` when a segment's offset
/// is not a constant (it cannot be known before instantiation).
pub fn initial_image(module: &[u8]) -> Result<andes_snapshot::Image, String> {
    let mut segments: Vec<(u64, &[u8])> = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let payload = payload.map_err(|e| e.to_string())?;
        let wasmparser::Payload::DataSection(reader) = payload else { continue };
        for data in reader {
            let data = data.map_err(|e| e.to_string())?;
            let wasmparser::DataKind::Active { memory_index: 0, offset_expr } = data.kind else {
                continue;
            };
            let mut ops = offset_expr.get_operators_reader();
            let offset = match ops.read().map_err(|e| e.to_string())? {
                wasmparser::Operator::I32Const { value } => u64::from(value as u32),
                wasmparser::Operator::I64Const { value } => value as u64,
                op => {
                    return Err(format!(
                        "a data segment's offset is not a constant ({op:?}): its initial image \
                         is not known"
                    ));
                }
            };
            segments.push((offset, data.data));
        }
    }
    Ok(andes_snapshot::initial_image(segments))
}

async fn call<P, R>(
    store: &mut Store<JobState>,
    instance: &Instance,
    name: &str,
    p: P,
) -> anyhow::Result<R>
where
    P: wasmtime::WasmParams + Sync,
    R: wasmtime::WasmResults + Sync,
{
    instance.get_typed_func::<P, R>(&mut *store, name)?.call_async(&mut *store, p).await
}

async fn caller_call<P, R>(caller: &mut Caller<'_, JobState>, name: &str, p: P) -> anyhow::Result<R>
where
    P: wasmtime::WasmParams + Sync,
    R: wasmtime::WasmResults + Sync,
{
    let f = caller
        .get_export(name)
        .and_then(Extern::into_func)
        .ok_or_else(|| anyhow::anyhow!("the instrumented module exports no {name}"))?;
    f.typed::<P, R>(&*caller)?.call_async(&mut *caller, p).await
}

/// The `andes:checkpoint/yield` import: finishes a rewind, or starts an
/// unwind when the job's control block asks for one (a checkpoint, or a
/// vacate the job has not yet been snapshotted for).
pub(crate) async fn on_yield(caller: &mut Caller<'_, JobState>) -> anyhow::Result<()> {
    if !caller.data().polled {
        return Ok(());
    }
    let state: i32 = caller_call(caller, ac::GET_STATE, ()).await?;
    let data = caller.data();
    let ctl = data.ctl.clone();
    if state == ac::STATE_REWINDING {
        caller_call::<(), ()>(caller, ac::STOP_REWIND, ()).await?;
        ctl.lower_poll(caller.data().vacate_checkpointed);
        return Ok(());
    }
    let wanted =
        ctl.checkpoint_requested() || (ctl.vacate_requested() && !data.vacate_checkpointed);
    if !wanted {
        ctl.lower_poll(data.vacate_checkpointed);
        return Ok(());
    }
    let stack = caller
        .get_export(ac::STACK_MEMORY_EXPORT)
        .and_then(Extern::into_memory)
        .ok_or_else(|| anyhow::anyhow!("the instrumented module exports no checkpoint stack"))?;
    let layout = ac::StackLayout::new(stack.data_size(&*caller) as u64);
    stack.write(&mut *caller, layout.data as usize, &layout.initial_data())?;
    caller_call::<i32, ()>(caller, ac::START_UNWIND, layout.data as i32).await
}

/// The unwind state of an instrumented instance (Asyncify's states).
pub(crate) async fn asyncify_state(store: &mut Store<JobState>, instance: &Instance) -> i32 {
    call::<(), i32>(store, instance, ac::GET_STATE, ()).await.unwrap_or(ac::STATE_NORMAL)
}

/// Ends an unwind (the guest has returned from `_start` with every frame saved).
pub(crate) async fn stop_unwind(
    store: &mut Store<JobState>,
    instance: &Instance,
) -> anyhow::Result<()> {
    call::<(), ()>(store, instance, ac::STOP_UNWIND, ()).await
}

/// Starts a rewind: the next `_start` call returns into the saved frames.
pub(crate) async fn start_rewind(
    store: &mut Store<JobState>,
    instance: &Instance,
) -> anyhow::Result<()> {
    let stack = instance
        .get_memory(&mut *store, ac::STACK_MEMORY_EXPORT)
        .ok_or_else(|| anyhow::anyhow!("the instrumented module exports no checkpoint stack"))?;
    let layout = ac::StackLayout::new(stack.data_size(&*store) as u64);
    // The saved frames lie between the buffer's start and `current`: a
    // snapshot whose `current` is elsewhere cannot be rewound.
    let mut data = [0u8; 8];
    stack.read(&*store, layout.data as usize, &mut data)?;
    match layout.used(data) {
        Some(used) if used > 0 && used % 4 == 0 => {}
        _ => anyhow::bail!(
            "its saved call stack is not valid (it ends at byte {} of a buffer from {} to {})",
            u32::from_le_bytes([data[0], data[1], data[2], data[3]]),
            layout.start,
            layout.end
        ),
    }
    // A rewind goes through each loop's poll check on its way back to
    // where the job yielded: the word stays raised until the rewind ends
    // (in the yield import, which lowers it).
    let poll = instance
        .get_memory(&mut *store, ac::POLL_MEMORY_EXPORT)
        .ok_or_else(|| anyhow::anyhow!("the instrumented module exports no poll memory"))?;
    poll.write(&mut *store, ac::POLL_WORD as usize, &1u32.to_le_bytes())?;
    call::<i32, ()>(store, instance, ac::START_REWIND, layout.data as i32).await
}

/// A monotonic clock that reads `by` ahead of the host's: a restored job's
/// clock continues from where it was, never backwards.
struct Shifted {
    inner: Box<dyn WasiMonotonicClock>,
    by: Duration,
}

impl WasiMonotonicClock for Shifted {
    fn resolution(&self) -> Duration {
        self.inner.resolution()
    }
    fn now(&self, precision: Duration) -> cap_std::time::Instant {
        self.inner.now(precision) + self.by
    }
}

/// A fresh WASI context whose monotonic clock starts at `monotonic_ns`.
pub(crate) fn new_ctx(monotonic_ns: u64) -> WasiCtx {
    let mut clocks: WasiClocks = wasi_common::tokio::clocks_ctx();
    if monotonic_ns > 0
        && let Some(m) = clocks.monotonic.take()
    {
        clocks.monotonic = Some(wasi_common::clocks::WasiMonotonicOffsetClock {
            creation_time: m.creation_time,
            abs_clock: Box::new(Shifted {
                inner: m.abs_clock,
                by: Duration::from_nanos(monotonic_ns),
            }),
        });
    }
    WasiCtx::new(
        wasi_common::tokio::random_ctx(),
        clocks,
        wasi_common::tokio::sched::sched_ctx(),
        wasi_common::table::Table::new(),
    )
}

fn monotonic_ns(ctx: &WasiCtx) -> u64 {
    match ctx.clocks.monotonic() {
        Ok(m) => {
            let now = m.abs_clock.now(m.abs_clock.resolution());
            now.duration_since(m.creation_time).as_nanos().min(u128::from(u64::MAX)) as u64
        }
        Err(_) => 0,
    }
}

/// What the capture needs besides the store.
pub(crate) struct CaptureCtx<'a> {
    pub(crate) t: &'a Transparent,
    pub(crate) module_sha256: [u8; 32],
    pub(crate) version: u32,
    pub(crate) image: &'a andes_snapshot::Image,
    pub(crate) sandbox: &'a Path,
    pub(crate) args: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) now_ms: i64,
    pub(crate) cache: &'a mut HashCache,
    pub(crate) usage: std::collections::BTreeMap<String, f64>,
    pub(crate) since: &'a mut Incremental,
}

/// What a job's next snapshot builds on: the last snapshot's chain, and
/// which chunks of memory 0 were written since ([`crate::dirty`]); and the
/// last snapshot's writer while it is still at work.
///
/// Declared after the store it watches: dropping it waits for the writer,
/// which reads the memory, and leaves the memory writable, before the
/// store goes.
pub(crate) struct Incremental {
    /// The thread writing the last snapshot; it yields the chain it sealed,
    /// or `None` when it failed (the next snapshot is then whole). First:
    /// were it ever dropped unjoined, it goes before the tracker.
    writing: Option<std::thread::JoinHandle<Option<andes_snapshot::Chain>>>,
    chain: Option<andes_snapshot::Chain>,
    /// Made at the first snapshot or restore (with the store's signal
    /// handler): a job that is never checkpointed pays nothing for it.
    tracker: Option<crate::dirty::Tracker>,
}

impl Incremental {
    /// Nothing built on yet, nothing watched yet.
    pub(crate) fn new() -> Incremental {
        Incremental { chain: None, tracker: None, writing: None }
    }

    /// The tracker of the job's memory 0, made on first use.
    fn tracker(&mut self, store: &mut Store<JobState>) -> &mut crate::dirty::Tracker {
        self.tracker.get_or_insert_with(|| crate::dirty::tracker(store))
    }

    /// Waits for the last snapshot's writer, if any: what it sealed is what
    /// the next snapshot builds on.
    pub(crate) fn settle(&mut self) {
        if let Some(w) = self.writing.take() {
            self.chain = w.join().ok().flatten();
        }
    }

    /// Starts watching memory 0 of `instance` for writes: the next snapshot
    /// builds on `chain`. Called once the memory holds what `chain` says.
    pub(crate) fn arm(
        &mut self,
        store: &mut Store<JobState>,
        instance: &Instance,
        chain: andes_snapshot::Chain,
    ) {
        self.settle();
        if let Some(m) = instance.get_memory(&mut *store, ac::MEMORY_EXPORT) {
            let (base, len) = (m.data_ptr(&*store), m.data_size(&*store));
            self.tracker(store).arm(base, len);
        }
        self.chain = Some(chain);
    }
}

impl Drop for Incremental {
    fn drop(&mut self) {
        self.settle();
    }
}

/// Reads every open descriptor of the guest: its path in the sandbox (from
/// the quota's registry of open handles), how it was opened and its offset.
async fn descriptors(
    store: &mut Store<JobState>,
    sandbox: &Path,
) -> Result<(Vec<Descriptor>, [u64; 3]), String> {
    let quota = store.data().quota.clone();
    let root = sandbox_id(sandbox).await;
    let expected = quota.open_handles();
    let ctx = &mut store.data_mut().wasi;
    let mut mem = wiggle::GuestMemory::Unshared(&mut []);
    let mut out = Vec::new();
    let mut offsets = [0u64; 3];
    let mut found = 0usize;
    let mut root_found = false;
    for fd in 0..MAX_DESCRIPTOR {
        if found >= expected && root_found && fd > 3 {
            break;
        }
        if !ctx.table().contains_key(fd) {
            continue;
        }
        let Ok(stat) = P1::fd_fdstat_get(ctx, &mut mem, types::Fd::from(fd)).await else {
            continue;
        };
        if fd < 3 {
            if stat.fs_filetype == types::Filetype::RegularFile {
                offsets[fd as usize] =
                    P1::fd_tell(ctx, &mut mem, types::Fd::from(fd)).await.unwrap_or(0);
            }
            continue;
        }
        let fstat = P1::fd_filestat_get(ctx, &mut mem, types::Fd::from(fd))
            .await
            .map_err(|e| format!("descriptor {fd}: {e}"))?;
        let id = (fstat.dev, fstat.ino);
        if stat.fs_filetype == types::Filetype::Directory && Some(id) == root && !root_found {
            root_found = true;
            out.push(Descriptor {
                fd,
                kind: DescriptorKind::Dir {
                    path: ".".into(),
                    preopen: Some(crate::state::SANDBOX_PREOPEN.into()),
                },
            });
            continue;
        }
        let Some(path) = quota.handle_path(id) else {
            return Err(format!(
                "descriptor {fd} is neither a file of the sandbox nor the sandbox itself"
            ));
        };
        found += 1;
        let kind = if stat.fs_filetype == types::Filetype::Directory {
            DescriptorKind::Dir { path, preopen: None }
        } else {
            let offset = P1::fd_tell(ctx, &mut mem, types::Fd::from(fd)).await.unwrap_or(0);
            DescriptorKind::File {
                path,
                read: stat.fs_rights_base.contains(types::Rights::FD_READ),
                write: stat.fs_rights_base.contains(types::Rights::FD_WRITE),
                append: stat.fs_flags.contains(types::Fdflags::APPEND),
                offset,
            }
        };
        out.push(Descriptor { fd, kind });
    }
    if found < expected {
        return Err(format!(
            "the job holds {expected} files open but only {found} have descriptors below \
             {MAX_DESCRIPTOR}"
        ));
    }
    Ok((out, offsets))
}

/// The sandbox directory's (device, inode), as wasi-common reports it to
/// the guest.
async fn sandbox_id(sandbox: &Path) -> Option<(u64, u64)> {
    use wasi_common::WasiDir;
    let dir = cap_std::fs::Dir::open_ambient_dir(sandbox, cap_std::ambient_authority()).ok()?;
    let st = wasi_common::sync::dir::Dir::from_cap_std(dir).get_filestat().await.ok()?;
    Some((st.device_id, st.inode))
}

/// Checks that each open file is still at the path it was opened by (not
/// renamed or removed since).
fn check_paths(sandbox: &Path, descriptors: &[Descriptor]) -> Result<(), String> {
    for d in descriptors {
        let (DescriptorKind::File { path, .. } | DescriptorKind::Dir { path, preopen: None }) =
            &d.kind
        else {
            continue;
        };
        if !path.is_empty()
            && andes_beneath::Beneath::open(sandbox)
                .and_then(|b| b.entry(path).map_err(std::io::Error::other))
                .is_err()
        {
            return Err(format!(
                "descriptor {} refers to {path}, which was renamed or removed while open",
                d.fd
            ));
        }
    }
    Ok(())
}

fn global_value(v: &Val) -> Option<GlobalValue> {
    Some(match v {
        Val::I32(i) => GlobalValue::I32(*i),
        Val::I64(i) => GlobalValue::I64(*i),
        Val::F32(f) => GlobalValue::F32(*f),
        Val::F64(f) => GlobalValue::F64(*f),
        _ => return None,
    })
}

/// Captures the job's whole state (after `stop_unwind`) as a signed snapshot.
///
/// `Ok(None)` when the snapshot is being written off the job's thread (a
/// periodic one, where the memory can be protected): its writer hands it to
/// the sink; the job can go on at once. Otherwise the snapshot is whole
/// when this returns. The last snapshot's writer is waited for first.
pub(crate) async fn capture(
    store: &mut Store<JobState>,
    instance: &Instance,
    c: CaptureCtx<'_>,
    stopping: bool,
) -> Result<Option<Checkpoint>, String> {
    c.since.settle();
    let t0 = std::time::Instant::now();
    let (descriptors, offsets) = descriptors(store, c.sandbox).await?;
    check_paths(c.sandbox, &descriptors)?;
    let files = andes_snapshot::scan_sandbox(c.sandbox, &c.t.blobs, c.cache)
        .map_err(|e| format!("saving the sandbox: {e}"))?;
    let mut header = Header::new(&c.module_sha256, &c.t.job, c.now_ms);
    header.platform = andes_snapshot::platform(Some(c.version));
    let exports: Vec<(String, Extern)> =
        instance.exports(&mut *store).map(|e| (e.name().to_string(), e.into_extern())).collect();
    let memory = instance
        .get_memory(&mut *store, ac::MEMORY_EXPORT)
        .ok_or("the instrumented module exports no memory")?;
    let stack = instance
        .get_memory(&mut *store, ac::STACK_MEMORY_EXPORT)
        .ok_or("the instrumented module exports no checkpoint stack")?;
    for (name, ext) in exports {
        if let Extern::Global(g) = ext
            && ac::global_export_index(&name).is_some()
        {
            let v = g.get(&mut *store);
            let value = global_value(&v).ok_or_else(|| format!("global {name} is not a number"))?;
            header.globals.push(SnapGlobal { name, value });
        }
    }
    let data = ac::StackLayout::new(stack.data_size(&*store) as u64).data;
    header.unwound = Some(Unwound { instrumentation: c.version, memory: 1, data: u64::from(data) });
    let ctx = &store.data().wasi;
    header.wasi = WasiState {
        args: c.args,
        env: c.env,
        descriptors,
        monotonic_ns: monotonic_ns(ctx),
        stdin_offset: offsets[0],
        stdout_offset: offsets[1],
        stderr_offset: offsets[2],
    };
    header.files = files;
    header.usage = c.usage;
    let mut b = andes_snapshot::Builder::new(header);
    if let Some(chain) = &c.since.chain {
        b = b.building_on(chain);
    }
    let (base, len) = (memory.data_ptr(&*store), memory.data_size(&*store));
    let changed =
        c.since.tracker(store).changed(base, len).unwrap_or_else(crate::dirty::Changed::all);
    let frozen = if stopping {
        None
    } else {
        // Only the chunks the snapshot will read are frozen for it.
        let reads = b.to_read(len, c.image, &|i| changed.contains(i));
        c.since.tracker(store).freeze(base, len, &reads)
    };
    if let Some(frozen) = frozen {
        // The chunks are read from the frozen memory by the writer while
        // the job goes on; the rest is small and copied now.
        let stack = stack.data(&*store).to_vec();
        let image = c.image.clone();
        let (t, sink) = (c.t.clone(), c.t.sink.clone());
        let paused = t0.elapsed();
        let writer = std::thread::Builder::new().name("andes-snapshot".into()).spawn(move || {
            let write = move || {
                {
                    // Every chunk read when it goes: the job's writes copy
                    // nothing more.
                    let frozen = frozen;
                    b.memory_from(&frozen, &image, &|i| changed.contains(i));
                }
                b.memory(&stack, andes_snapshot::Image::none());
                let sealed = b.finish(&t.public, |m| (t.sign)(m));
                sealed
                    .store_pack(&t.blobs)
                    .map_err(|e| format!("saving the memory's changes: {e}"))?;
                let kept = Checkpoint {
                    bytes: sealed.bytes,
                    header: sealed.header,
                    stopping: false,
                    paused,
                };
                Ok((kept, sealed.chain))
            };
            let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(write))
                .unwrap_or_else(|_| Err("the snapshot's writer failed".to_string()));
            match written {
                Ok((kept, chain)) => {
                    (sink)(Ok(kept));
                    Some(chain)
                }
                Err(e) => {
                    (sink)(Err(e));
                    None
                }
            }
        });
        return match writer {
            Ok(w) => {
                c.since.writing = Some(w);
                Ok(None)
            }
            Err(e) => {
                // The tracker was re-armed for a snapshot never sealed: the
                // next one is whole.
                c.since.chain = None;
                Err(format!("starting the snapshot's writer: {e}"))
            }
        };
    }
    b.memory_changed(memory.data(&*store), c.image, &|i| changed.contains(i));
    b.memory(stack.data(&*store), andes_snapshot::Image::none());
    let sealed = b.finish(&c.t.public, |m| (c.t.sign)(m));
    sealed.store_pack(&c.t.blobs).map_err(|e| format!("saving the memory's changes: {e}"))?;
    c.since.arm(store, instance, sealed.chain);
    Ok(Some(Checkpoint {
        bytes: sealed.bytes,
        header: sealed.header,
        stopping,
        paused: t0.elapsed(),
    }))
}

/// A memory pack's file mapped read-only, not read: a restore of a few GiB
/// would otherwise copy every pack into fresh memory first (0.4 s a GiB on
/// one core here), before decoding it. The snapshot library checks the
/// bytes against the pack's hash before using any, and decodes them with
/// bounds-checked code.
pub(crate) fn mapped(path: &Path) -> std::io::Result<andes_snapshot::PackBytes> {
    let file = std::fs::File::open(path)?;
    // SAFETY: a blob store's files are written whole under a temporary
    // name and renamed into place, never written in place (`reuse` only
    // sets a time), and removing one leaves a mapping whole. The store is
    // the host's own directory (or, under `andes run`, the user's own
    // checkpoint directory), which no job reaches: only its owner could
    // truncate a file under the mapping.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    Ok(Box::new(map))
}

/// Writes a snapshot's memories and globals into a fresh instance; returns
/// what the restore learned of each memory's stored chunks, for the chain
/// the next snapshot builds on.
pub(crate) fn restore_instance(
    store: &mut Store<JobState>,
    instance: &Instance,
    opened: &andes_snapshot::Opened<'_>,
    packs: &andes_snapshot::Packs,
    image: &andes_snapshot::Image,
) -> Result<Vec<andes_snapshot::Anchors>, String> {
    let mut learned = Vec::with_capacity(opened.header.memories.len());
    let names = [ac::MEMORY_EXPORT, ac::STACK_MEMORY_EXPORT];
    if opened.header.memories.len() != names.len() {
        return Err(format!(
            "the snapshot has {} memories, an instrumented module has {}",
            opened.header.memories.len(),
            names.len()
        ));
    }
    for (i, name) in names.iter().enumerate() {
        let m = instance
            .get_memory(&mut *store, name)
            .ok_or_else(|| format!("the module exports no memory {name}"))?;
        let want = opened.header.memories[i].bytes;
        let have = m.data_size(&*store) as u64;
        if want < have || !want.is_multiple_of(ac::PAGE_SIZE) {
            return Err(format!("memory {name}: {want} bytes cannot follow the module's {have}"));
        }
        if want > have {
            m.grow(&mut *store, (want - have) / ac::PAGE_SIZE).map_err(|e| {
                format!("memory {name}: growing it to {want} bytes was refused: {e}")
            })?;
        }
        let base = if i == 0 { image } else { andes_snapshot::Image::none() };
        learned.push(
            opened
                .restore_memory(i, m.data_mut(&mut *store), base, true, packs)
                .map_err(|e| e.to_string())?,
        );
    }
    for g in &opened.header.globals {
        let global = instance
            .get_global(&mut *store, &g.name)
            .ok_or_else(|| format!("the module has no global {}", g.name))?;
        let v = match g.value {
            GlobalValue::I32(i) => Val::I32(i),
            GlobalValue::I64(i) => Val::I64(i),
            GlobalValue::F32(f) => Val::F32(f),
            GlobalValue::F64(f) => Val::F64(f),
        };
        global.set(&mut *store, v).map_err(|e| format!("global {}: {e}", g.name))?;
    }
    Ok(learned)
}

/// Reopens the guest's descriptors at their numbers and offsets.
pub(crate) async fn restore_descriptors(
    store: &mut Store<JobState>,
    root: &crate::sandbox::QuotaDir,
    wasi: &WasiState,
) -> Result<(), String> {
    use wasi_common::WasiDir;
    use wasi_common::dir::OpenResult;
    use wasi_common::file::{FdFlags, FileAccessMode, OFlags};
    let ctx = &store.data().wasi;
    for d in &wasi.descriptors {
        if let DescriptorKind::Dir { preopen: Some(_), .. } = &d.kind
            && d.fd != 3
        {
            ctx.table()
                .renumber(3, d.fd)
                .map_err(|e| format!("descriptor {}: moving the sandbox there: {e}", d.fd))?;
        }
    }
    for d in &wasi.descriptors {
        let err = |e: wasi_common::Error| format!("descriptor {}: reopening it: {e}", d.fd);
        match &d.kind {
            DescriptorKind::Dir { preopen: Some(_), .. } => {}
            DescriptorKind::Dir { path, preopen: None } => {
                andes_snapshot::safe_relative(path)
                    .map_err(|e| format!("descriptor {}: {e}", d.fd))?;
                match root
                    .open_file(false, path, OFlags::DIRECTORY, true, false, FdFlags::empty())
                    .await
                    .map_err(err)?
                {
                    OpenResult::Dir(dir) => ctx.insert_dir(d.fd, dir, path.into()),
                    OpenResult::File(_) => {
                        return Err(format!("descriptor {}: {path} is not a directory", d.fd));
                    }
                }
            }
            DescriptorKind::File { path, read, write, append, offset } => {
                andes_snapshot::safe_relative(path)
                    .map_err(|e| format!("descriptor {}: {e}", d.fd))?;
                let flags = if *append { FdFlags::APPEND } else { FdFlags::empty() };
                let file = match root
                    .open_file(false, path, OFlags::empty(), *read, *write, flags)
                    .await
                    .map_err(err)?
                {
                    OpenResult::File(f) => f,
                    OpenResult::Dir(_) => {
                        return Err(format!("descriptor {}: {path} is a directory", d.fd));
                    }
                };
                file.seek(std::io::SeekFrom::Start(*offset)).await.map_err(err)?;
                let mut mode = FileAccessMode::empty();
                if *read {
                    mode |= FileAccessMode::READ;
                }
                if *write {
                    mode |= FileAccessMode::WRITE;
                }
                ctx.insert_file(d.fd, file, mode);
            }
        }
    }
    Ok(())
}

/// Writes the snapshot's files into the sandbox and removes everything else
/// but directories, so the sandbox is as it was at the checkpoint; no link
/// is followed.
pub(crate) fn restore_sandbox(
    sandbox: &Path,
    header: &Header,
    blobs: &BlobStore,
) -> Result<(), String> {
    andes_snapshot::restore_files(sandbox, &header.files, blobs).map_err(|e| e.to_string())
}
