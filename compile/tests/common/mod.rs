//! A minimal host for instrumented modules, set up as the execute host sets
//! up its engine (`starter/src/engine.rs`): the yield import, capture of every
//! memory and `andes.global.N`, restore into a fresh Store and Instance, and
//! rewind in place.

#![allow(dead_code)]

use std::future::Future;
use std::io::Cursor;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::task::Poll;

use andes_compile::{
    GET_STATE, GLOBAL_EXPORT_PREFIX, PAGE_SIZE, POLL_MEMORY_EXPORT, POLL_WORD, STACK_MEMORY_EXPORT,
    START_REWIND, START_UNWIND, STATE_REWINDING, STATE_UNWINDING, STOP_REWIND, STOP_UNWIND,
    StackLayout, YIELD_FIELD, YIELD_MODULE, is_stack_overflow,
};
use wasi_common::WasiCtx;
use wasi_common::pipe::WritePipe;
use wasmtime::{
    AsContextMut, Caller, Config, Engine, Extern, Instance, InstanceAllocationStrategy, Linker,
    Memory, Module, PoolingAllocationConfig, Store, Trap, UpdateDeadline, Val,
};

/// Fuel units between the store's async yields. The host's default is
/// 1,000,000; a finer grain gives the random interruptions more places.
pub const FUEL_YIELD_INTERVAL: u64 = 10_000;

/// A sample job, built by `cargo xtask samples`.
pub fn sample(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../samples/target/wasm32-wasip1/release")
        .join(format!("{name}.wasm"));
    std::fs::read(&p).unwrap_or_else(|e| {
        panic!("{}: {e}; build the samples first (`cargo xtask samples`)", p.display())
    })
}

/// The seed of this run: `ANDES_SEED`, else from the clock.
pub fn seed() -> u64 {
    match std::env::var("ANDES_SEED") {
        Ok(s) => s.parse().expect("ANDES_SEED must be a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    }
}

/// Prints the seed if the test fails.
pub struct ReportSeed(pub u64);

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

/// `k` poll counts in the first nine tenths of `polls`, sorted, at least
/// `polls / 2k` apart: far enough that each request is honoured (at the next
/// checked loop header) before the next one comes.
pub fn random_points(seed: u64, k: usize, polls: u64) -> Vec<u64> {
    let range = polls * 9 / 10;
    let gap = polls / (2 * k as u64);
    assert!(gap >= 2, "a run of {polls} polls is too short for {k} points");
    let mut state = seed;
    loop {
        let mut points: Vec<u64> = (0..k).map(|_| 1 + splitmix(&mut state) % range).collect();
        points.sort_unstable();
        if points.windows(2).all(|w| w[1] - w[0] >= gap) {
            return points;
        }
    }
}

/// How a checkpoint continues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Capture, drop the Store, restore into a fresh Store and Instance.
    Resume,
    /// Capture, then rewind in the same instance (a periodic checkpoint).
    Rewind,
}

/// How a run ended.
#[derive(Debug)]
pub struct Outcome {
    pub stdout: Vec<u8>,
    pub exit: i32,
    /// `_start` calls it took: one more than the checkpoints.
    pub slices: usize,
    /// Async yields (fuel) over the whole run.
    pub polls: u64,
    /// The bytes of the Asyncify stack each checkpoint used.
    pub stack_bytes: Vec<u32>,
    /// The bytes each capture copied (memories).
    pub captured_bytes: Vec<usize>,
}

/// A run that trapped.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    /// Whether the host recognised an Asyncify stack overflow.
    pub overflow: bool,
    /// `asyncify_get_state()` after the trap.
    pub state: i32,
}

/// What a checkpoint holds: every memory and every exported mutable global.
pub struct Saved {
    pub memories: Vec<(String, Vec<u8>)>,
    pub globals: Vec<(String, Val)>,
}

pub struct State {
    wasi: WasiCtx,
    /// The poll memory, whose word at POLL_WORD is the flag.
    flag: Option<Memory>,
}

/// An engine configured as the execute host's, and a linker with WASI, the
/// `andes:job` attribute import and the yield import.
pub struct Rig {
    pub engine: Engine,
    linker: Linker<State>,
}

impl Default for Rig {
    fn default() -> Self {
        Rig::new()
    }
}

async fn typed_call<P, R>(caller: &mut Caller<'_, State>, name: &str, p: P) -> wasmtime::Result<R>
where
    P: wasmtime::WasmParams + Sync,
    R: wasmtime::WasmResults + Sync,
{
    let f = caller
        .get_export(name)
        .and_then(Extern::into_func)
        .ok_or_else(|| anyhow::anyhow!("no export {name}"))?;
    f.typed::<P, R>(&*caller)?.call_async(&mut *caller, p).await
}

impl Rig {
    pub fn new() -> Rig {
        let mut cfg = Config::new();
        cfg.strategy(wasmtime::Strategy::Cranelift);
        cfg.async_support(true);
        cfg.consume_fuel(true);
        cfg.epoch_interruption(true);
        cfg.max_wasm_stack(1 << 20);
        cfg.async_stack_size(2 << 20);
        let mut pool = PoolingAllocationConfig::default();
        // An instrumented module has three memories: the guest's, the poll memory and the
        // Asyncify stack.
        pool.total_memories(96)
            .max_memories_per_module(3)
            .total_tables(32)
            .total_core_instances(32)
            .total_stacks(32)
            .max_memory_size(1 << 30);
        cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&cfg).expect("engine");

        let mut linker: Linker<State> = Linker::new(&engine);
        wasi_common::tokio::add_to_linker(&mut linker, |s: &mut State| &mut s.wasi).unwrap();
        linker.allow_shadowing(true);
        linker
            .func_wrap("wasi_snapshot_preview1", "proc_exit", |code: i32| -> wasmtime::Result<()> {
                Err(wasi_common::I32Exit(code & 0xff).into())
            })
            .unwrap();
        // andes:job/attributes.set(name, value) -> result<_, string>: ok.
        linker
            .func_wrap(
                "andes:job/attributes@0.1.0",
                "set",
                |mut caller: Caller<'_, State>, _: i32, _: i32, _: i32, _: i32, ret: i32| {
                    let memory = caller
                        .get_export("memory")
                        .and_then(Extern::into_memory)
                        .ok_or_else(|| anyhow::anyhow!("no memory"))?;
                    memory.write(&mut caller, ret as u32 as usize, &[0])?;
                    wasmtime::Result::<()>::Ok(())
                },
            )
            .unwrap();
        linker
            .func_wrap_async(YIELD_MODULE, YIELD_FIELD, |mut caller: Caller<'_, State>, (): ()| {
                Box::new(async move {
                    let flag = caller.data().flag.expect("flag");
                    let state: i32 = typed_call(&mut caller, GET_STATE, ()).await?;
                    if state == STATE_REWINDING {
                        typed_call::<(), ()>(&mut caller, STOP_REWIND, ()).await?;
                        set_flag(&mut caller, flag, 0)?;
                        return Ok(());
                    }
                    if flag.data(&caller)[POLL_WORD as usize] == 0 {
                        return Ok(());
                    }
                    let stack = caller
                        .get_export(STACK_MEMORY_EXPORT)
                        .and_then(Extern::into_memory)
                        .ok_or_else(|| anyhow::anyhow!("no stack memory"))?;
                    let layout = StackLayout::new(stack.data_size(&caller) as u64);
                    stack.write(&mut caller, layout.data as usize, &layout.initial_data())?;
                    typed_call::<i32, ()>(&mut caller, START_UNWIND, layout.data as i32).await
                })
            })
            .unwrap();
        Rig { engine, linker }
    }

    async fn instantiate(
        &self,
        module: &Module,
        args: &[&str],
        stdout: &Arc<RwLock<Cursor<Vec<u8>>>>,
    ) -> (Store<State>, Instance) {
        let mut b = wasi_common::tokio::WasiCtxBuilder::new();
        b.arg("job.wasm").unwrap();
        for a in args {
            b.arg(a).unwrap();
        }
        b.stdout(Box::new(WritePipe::from_shared(stdout.clone())));
        let wasi = b.build();
        let mut store = Store::new(&self.engine, State { wasi, flag: None });
        store.set_fuel(u64::MAX).unwrap();
        store.fuel_async_yield_interval(Some(FUEL_YIELD_INTERVAL)).unwrap();
        store.set_epoch_deadline(1);
        // The host asks for a yield from its epoch callback.
        store.epoch_deadline_callback(|mut ctx| {
            if let Some(flag) = ctx.data().flag {
                set_flag(&mut ctx, flag, 1)?;
            }
            Ok(UpdateDeadline::Continue(1))
        });
        let instance =
            self.linker.instantiate_async(&mut store, module).await.expect("instantiate");
        store.data_mut().flag = instance.get_memory(&mut store, POLL_MEMORY_EXPORT);
        (store, instance)
    }

    /// Runs `_start`, counting the store's async yields in `polls` and
    /// ticking the epoch (so the callback sets the flag) when the count
    /// reaches the next of `points`.
    async fn drive(
        &self,
        store: &mut Store<State>,
        instance: &Instance,
        polls: &mut u64,
        points: &[u64],
        next: &mut usize,
    ) -> wasmtime::Result<()> {
        let start = instance.get_typed_func::<(), ()>(&mut *store, "_start")?;
        let mut fut = std::pin::pin!(start.call_async(&mut *store, ()));
        std::future::poll_fn(|cx| match fut.as_mut().poll(cx) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => {
                *polls += 1;
                while *next < points.len() && points[*next] <= *polls {
                    self.engine.increment_epoch();
                    *next += 1;
                }
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
        .await
    }

    /// Runs a module to its end, checkpointing at each of `points` (counts
    /// of async yields over the whole run) and continuing as `mode` says.
    pub fn run_through(&self, bytes: &[u8], args: &[&str], points: &[u64], mode: Mode) -> Outcome {
        self.run_compiled(&self.compile(bytes), args, points, mode)
    }

    /// Compiles a module for this rig's engine.
    pub fn compile(&self, bytes: &[u8]) -> Module {
        Module::new(&self.engine, bytes).expect("compile")
    }

    /// [`Rig::run_through`] for a compiled module.
    pub fn run_compiled(
        &self,
        module: &Module,
        args: &[&str],
        points: &[u64],
        mode: Mode,
    ) -> Outcome {
        self.block_on(self.run_through_async(module, args, points, mode, false))
            .unwrap_or_else(|f| panic!("the job trapped: {}", f.message))
    }

    /// Runs an instrumented module with the flag set before `_start`, so it
    /// unwinds at its first loop header; resumes it in a fresh instance.
    pub fn run_flagged_from_start(&self, bytes: &[u8]) -> Result<Outcome, Failure> {
        let module = self.compile(bytes);
        self.block_on(self.run_through_async(&module, &[], &[], Mode::Resume, true))
    }

    /// Runs a module with a checkpoint at each of `points`, resumed in a
    /// fresh instance; a trap is returned, not a panic.
    #[allow(dead_code)]
    pub fn try_run_at(&self, bytes: &[u8], points: &[u64]) -> Result<Outcome, Failure> {
        let module = self.compile(bytes);
        self.block_on(self.run_through_async(&module, &[], points, Mode::Resume, false))
    }

    /// Runs a module (instrumented or not) to its end, without interruption.
    #[allow(dead_code)]
    pub fn try_run(&self, bytes: &[u8]) -> Result<Outcome, Failure> {
        let module = self.compile(bytes);
        self.block_on(self.run_through_async(&module, &[], &[], Mode::Resume, false))
    }

    fn block_on<F: Future>(&self, f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    }

    async fn run_through_async(
        &self,
        module: &Module,
        args: &[&str],
        points: &[u64],
        mode: Mode,
        flag_first: bool,
    ) -> Result<Outcome, Failure> {
        let stdout = Arc::new(RwLock::new(Cursor::new(Vec::new())));
        let mut out = Outcome {
            stdout: vec![],
            exit: 0,
            slices: 0,
            polls: 0,
            stack_bytes: vec![],
            captured_bytes: vec![],
        };
        let mut next = 0;
        let mut saved: Option<Saved> = None;
        'instances: loop {
            let (mut store, instance) = self.instantiate(module, args, &stdout).await;
            if let Some(s) = saved.take() {
                restore(&mut store, &instance, &s);
                // The contract: the poll word stays raised while rewinding.
                let flag = store.data().flag.expect("flag");
                set_flag(&mut store, flag, 1).unwrap();
                call::<i32, ()>(&mut store, &instance, START_REWIND, 0).await;
            } else if flag_first {
                let flag = store.data().flag.expect("flag");
                set_flag(&mut store, flag, 1).unwrap();
            }
            loop {
                out.slices += 1;
                let r = self.drive(&mut store, &instance, &mut out.polls, points, &mut next).await;
                let instrumented = instance.get_func(&mut store, GET_STATE).is_some();
                let state = if instrumented {
                    call::<(), i32>(&mut store, &instance, GET_STATE, ()).await
                } else {
                    0
                };
                match r {
                    Ok(()) if state == STATE_UNWINDING => {
                        call::<(), ()>(&mut store, &instance, STOP_UNWIND, ()).await;
                        let s = capture(&mut store, &instance);
                        let stack =
                            &s.memories.iter().find(|m| m.0 == STACK_MEMORY_EXPORT).unwrap().1;
                        let layout = StackLayout::new(stack.len() as u64);
                        let data = stack[layout.data as usize..][..8].try_into().unwrap();
                        out.stack_bytes.push(layout.used(data).expect("a plausible stack"));
                        out.captured_bytes.push(s.memories.iter().map(|m| m.1.len()).sum());
                        match mode {
                            Mode::Resume => {
                                saved = Some(s);
                                drop(store);
                                continue 'instances;
                            }
                            Mode::Rewind => {
                                let flag = store.data().flag.expect("flag");
                                set_flag(&mut store, flag, 1).unwrap();
                                call::<i32, ()>(&mut store, &instance, START_REWIND, 0).await;
                            }
                        }
                    }
                    Ok(()) => {
                        out.exit = 0;
                        break 'instances;
                    }
                    Err(e) => {
                        if let Some(exit) = e.downcast_ref::<wasi_common::I32Exit>() {
                            out.exit = exit.0;
                            break 'instances;
                        }
                        let oob = e.downcast_ref::<Trap>() == Some(&Trap::MemoryOutOfBounds);
                        return Err(Failure {
                            message: format!("{e:?}"),
                            overflow: is_stack_overflow(oob, state),
                            state,
                        });
                    }
                }
            }
        }
        out.stdout = stdout.read().unwrap().get_ref().clone();
        Ok(out)
    }
}

async fn call<P, R>(store: &mut Store<State>, instance: &Instance, name: &str, p: P) -> R
where
    P: wasmtime::WasmParams + Sync,
    R: wasmtime::WasmResults + Sync,
{
    instance
        .get_typed_func::<P, R>(&mut *store, name)
        .unwrap()
        .call_async(&mut *store, p)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

/// Every memory and every `andes.global.N`.
pub fn capture(store: &mut Store<State>, instance: &Instance) -> Saved {
    let exports: Vec<(String, Extern)> =
        instance.exports(&mut *store).map(|e| (e.name().to_string(), e.into_extern())).collect();
    let mut saved = Saved { memories: vec![], globals: vec![] };
    for (name, ext) in exports {
        match ext {
            Extern::Memory(m) => saved.memories.push((name, m.data(&*store).to_vec())),
            Extern::Global(g) if name.starts_with(GLOBAL_EXPORT_PREFIX) => {
                saved.globals.push((name, g.get(&mut *store)))
            }
            _ => {}
        }
    }
    saved
}

/// Writes a capture into a fresh instance: memories grown to their size,
/// then their bytes; the globals.
pub fn restore(store: &mut Store<State>, instance: &Instance, saved: &Saved) {
    for (name, bytes) in &saved.memories {
        let m = instance.get_memory(&mut *store, name).expect("memory");
        let have = m.data_size(&*store);
        if bytes.len() > have {
            m.grow(&mut *store, ((bytes.len() - have) as u64).div_ceil(PAGE_SIZE)).expect("grow");
        }
        assert_eq!(m.data_size(&*store), bytes.len(), "memory {name}");
        m.data_mut(&mut *store).copy_from_slice(bytes);
    }
    for (name, v) in &saved.globals {
        instance.get_global(&mut *store, name).expect("global").set(&mut *store, *v).expect("set");
    }
}

/// Sets the flag (the poll memory's word at POLL_WORD).
fn set_flag(store: impl AsContextMut, poll: Memory, value: u32) -> wasmtime::Result<()> {
    poll.write(store, POLL_WORD as usize, &value.to_le_bytes())?;
    Ok(())
}
