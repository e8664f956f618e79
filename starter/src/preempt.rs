//! Suspending and killing guest code that runs with neither fuel nor epoch
//! checks (Linux on x86_64).
//!
//! A job that needs no fuel runs on the host's unmetered engine, whose code is
//! what Cranelift makes of the module and nothing more: no check at function
//! entries or loop headers. It runs on a job thread of its own
//! ([`crate::jobthread`]), and its controller reaches it with a signal
//! ([`SIGNAL`]) to that thread:
//!
//! * **Suspend.** When the signal finds the thread in a function body of the
//!   job's own module, the handler blocks on a futex until the job is resumed
//!   or killed. Guest code holds no host lock, so nothing else waits for it,
//!   and a blocked thread uses no CPU.
//! * **Hard kill.** When the signal finds the thread in a function body of the
//!   job's module, the handler moves the program counter to a `ud2` that
//!   wasmtime registered as a trap site (the `unreachable` of a one-function
//!   pad module, see [`Preempt`]), so wasmtime's own SIGILL handling unwinds the guest as it
//!   does any trap.
//!
//! Anywhere else the handler neither blocks (host code may hold a lock) nor
//! moves the program counter (it would corrupt host state). If the guest
//! called out of its code (a libcall such as `memory.fill`, or a host
//! function), it patches the return address of the call's trampoline so that
//! the call, once finished, returns into [`andes_preempt_stub`] instead of the guest: the
//! stub saves every register, blocks while suspended, and continues into the
//! guest, or into the pad if killed. A guest that spends nearly all its time in
//! bulk-memory libcalls is thus stopped when the current one ends, however
//! rarely a signal finds it in its own code. Besides, the store's call hook
//! ([`Remote::at_boundary`]) blocks or traps the job when it next crosses
//! between host and guest; the job thread's executor stops polling (suspend)
//! or drops (kill) the job's future whenever it waits; and the kicker thread
//! signals again, backing off from 100 µs to 10 ms, until one of those took
//! effect.
//!
//! The patch needs facts about wasmtime 36 that are not its public API. Where
//! its runtime structures keep things, it reads from wasmtime's own published
//! layout (`wasmtime_environ::VMOffsets` for the host's pointer size): a
//! `VMFuncRef` holds its instance's `VMContext`; a `VMContext` starts with the
//! magic `core` and holds its `VMStoreContext`; that holds `stack_limit`,
//! `last_wasm_exit_fp` and `last_wasm_exit_pc`. Those pointers are followed
//! at set-up only through reads that cannot fault (`process_vm_readv` on the
//! process itself), and used only once the magic is found. What no layout
//! says: the trampolines out of guest code push the guest's frame pointer and
//! return address as a frame record and copy them to `last_wasm_exit_fp` and
//! `last_wasm_exit_pc`, and `stack_limit` is `max_wasm_stack` below where the
//! guest was entered on its fiber stack, which tells that stack from the job
//! thread's own and from a signal stack. Likewise
//! the pad's trap site is where wasmtime's own SIGILL handling must recognise
//! a trap. All of it is checked when the host starts ([`Preempt::new`]): the
//! pad is run once, with a store signal handler that records where wasmtime's
//! SIGILL came from, which must be a `ud2` in the pad's body; and a probe
//! module calls two host functions whose returns are patched into the stub,
//! whose results must arrive intact. If anything is not as expected, the host
//! meters every job instead; the tests of `starter/tests/starter/unmetered.rs` exercise
//! every path.

use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use wasmtime::{CallHook, Engine, Module, Store, Trap};

use crate::cputime::ThreadClock;

/// The signal that reaches a job thread. SIGURG is ignored by default, so a
/// stray one harms no thread, and nothing in the host uses it otherwise.
pub(crate) const SIGNAL: libc::c_int = libc::SIGURG;

/// [`Remote::request`]: let the job run.
pub(crate) const RUN: u32 = 0;
/// [`Remote::request`]: stop the job where it is and keep it stopped.
pub(crate) const SUSPEND: u32 = 1;
/// [`Remote::request`]: end the job (final).
pub(crate) const KILL: u32 = 2;

/// [`Remote::state`]: the job thread runs guest or host code.
pub(crate) const BUSY: u32 = 0;
/// [`Remote::state`]: blocked in the signal handler or the call hook.
pub(crate) const HELD: u32 = 1;
/// [`Remote::state`]: the executor waits and will not poll while suspended.
pub(crate) const PARKED: u32 = 2;
/// [`Remote::state`]: not started yet, or finished.
pub(crate) const IDLE: u32 = 3;

/// The function bodies of a compiled module, as absolute address ranges.
/// Holds the module, so that its code stays mapped at those addresses for
/// as long as a job's [`Remote`] may look at them.
pub(crate) struct GuestCode {
    ranges: Box<[(usize, usize)]>,
    _module: Module,
}

impl GuestCode {
    /// The function bodies of `module` (not its trampolines).
    pub(crate) fn of(module: &Module) -> GuestCode {
        let base = module.text().as_ptr() as usize;
        let mut ranges: Vec<(usize, usize)> = module
            .functions()
            .filter(|f| f.len > 0)
            .map(|f| (base + f.offset, base + f.offset + f.len))
            .collect();
        ranges.sort_unstable();
        GuestCode { ranges: ranges.into_boxed_slice(), _module: module.clone() }
    }

    /// True when `pc` lies in one of the bodies. Async-signal-safe: reads
    /// immutable memory only.
    fn contains(&self, pc: usize) -> bool {
        let r = &self.ranges;
        // The last range starting at or before `pc`.
        let i = r.partition_point(|&(start, _)| start <= pc);
        i > 0 && pc < r[i - 1].1
    }
}

/// What the unmetered engine needs to stop guests: the pad, a module whose
/// one function is `unreachable`, and the address of its trap site. Every
/// job's [`Remote`] holds a clone, so that the pad's code stays mapped while
/// any job may be sent there, even if the host is dropped meanwhile.
#[derive(Clone)]
pub(crate) struct Preempt {
    _pad: Module,
    /// The `ud2` a killed guest is sent to.
    trap_pc: usize,
    /// The engine's `max_wasm_stack`.
    wasm_stack: usize,
}

/// How far below the wasm stack limit host code called from the guest may
/// run, and still be on the guest's fiber stack: the engine gives the fiber
/// 1 MiB more than `max_wasm_stack` ([`crate::engine`]), of which the
/// fiber's own frames above the guest's entry take a few KiB.
const HOST_SLACK: usize = 256 << 10;

impl Preempt {
    /// Finds the pad's trap site for `engine` (async, unmetered, with this
    /// `max_wasm_stack` and an async stack at least [`HOST_SLACK`] larger),
    /// and checks that the trampoline patch works.
    pub(crate) fn new(engine: &Engine, wasm_stack: usize) -> Result<Preempt, String> {
        // The layout is computed here, not first in a signal handler.
        std::sync::LazyLock::force(&LAYOUT);
        let (pad, trap_pc) = pad(engine)?;
        let preempt = Preempt { _pad: pad, trap_pc, wasm_stack };
        probe(engine, &preempt)?;
        Ok(preempt)
    }
}

/// The pad: `(module (func (export "pad") unreachable))`, assembled (the
/// engine takes binary modules only; a test assembles the text).
const PAD: &[u8] = &[
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
    0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type 0: [] -> []
    0x03, 0x02, 0x01, 0x00, // func 0: type 0
    0x07, 0x07, 0x01, 0x03, b'p', b'a', b'd', 0x00, 0x00, // export "pad": func 0
    0x0a, 0x05, 0x01, 0x03, 0x00, 0x00, 0x0b, // code: unreachable
];

/// The probe, assembled (a test assembles the text):
///
/// ```text
/// (module
///   (import "probe" "i" (func (param i32) (result i32)))
///   (import "probe" "f" (func (result f64)))
///   (func (export "run") (param i32) (result f64)
///     (f64.add (call 1) (f64.convert_i32_s (i32.add (call 0 (local.get 0)) (i32.const 1))))))
/// ```
const PROBE: &[u8] = &[
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
    // types: [i32] -> [i32], [] -> [f64], [i32] -> [f64]
    0x01, 0x0f, 0x03, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x60, 0x00, 0x01, 0x7c, 0x60, 0x01, 0x7f, 0x01,
    0x7c, //
    // imports: probe.i (type 0), probe.f (type 1)
    0x02, 0x15, 0x02, 0x05, b'p', b'r', b'o', b'b', b'e', 0x01, b'i', 0x00, 0x00, 0x05, b'p', b'r',
    b'o', b'b', b'e', 0x01, b'f', 0x00, 0x01, //
    0x03, 0x02, 0x01, 0x02, // func 2: type 2
    0x07, 0x07, 0x01, 0x03, b'r', b'u', b'n', 0x00, 0x02, // export "run": func 2
    // code: call 1, local.get 0, call 0, i32.const 1, i32.add,
    // f64.convert_i32_s, f64.add
    0x0a, 0x0f, 0x01, 0x0d, 0x00, 0x10, 0x01, 0x20, 0x00, 0x10, 0x00, 0x41, 0x01, 0x6a, 0xb7, 0xa0,
    0x0b,
];

/// Compiles the pad and finds its trap site by running it once.
fn pad(engine: &Engine) -> Result<(Module, usize), String> {
    let module = Module::new(engine, PAD).map_err(|e| format!("compiling the pad: {e:#}"))?;
    let body = module
        .functions()
        .next()
        .map(|f| {
            let base = module.text().as_ptr() as usize;
            (base + f.offset, base + f.offset + f.len)
        })
        .ok_or("the pad has no function")?;
    let seen = Arc::new(AtomicUsize::new(0));
    let mut store = Store::new(engine, ());
    {
        let seen = seen.clone();
        // SAFETY: the handler is async-signal-safe: it reads the context
        // the kernel gave it and stores one atomic.
        unsafe {
            use wasmtime::unix::StoreExt;
            store.set_signal_handler(move |signum, _info, ctx| {
                if signum == libc::SIGILL && !ctx.is_null() {
                    seen.store(context_pc(ctx as *mut libc::c_void), Ordering::SeqCst);
                }
                false
            });
        }
    }
    let trapped = crate::park::block_on(async {
        let instance = wasmtime::Instance::new_async(&mut store, &module, &[]).await?;
        let pad = instance.get_typed_func::<(), ()>(&mut store, "pad")?;
        pad.call_async(&mut store, ()).await
    });
    match trapped {
        Err(e) if e.downcast_ref::<Trap>() == Some(&Trap::UnreachableCodeReached) => {}
        other => return Err(format!("the pad did not trap as expected: {other:?}")),
    }
    let pc = seen.load(Ordering::SeqCst);
    if pc < body.0 || pc + 2 > body.1 {
        return Err(format!("the pad trapped at {pc:#x}, outside its body {body:x?}"));
    }
    // SAFETY: `pc..pc + 2` lies in the pad's code, which `module` keeps
    // mapped (readable and executable).
    let bytes = unsafe { std::slice::from_raw_parts(pc as *const u8, 2) };
    if bytes != [0x0f, 0x0b] {
        return Err(format!("the pad's trap site is {bytes:02x?}, not ud2"));
    }
    Ok((module, pc))
}

/// Checks the trampoline patch on a probe module that calls two host
/// functions (an `i32` and an `f64` result), each of which patches its own
/// return into the stub as the signal handler would.
fn probe(engine: &Engine, preempt: &Preempt) -> Result<(), String> {
    let module = Module::new(engine, PROBE).map_err(|e| format!("compiling the probe: {e:#}"))?;
    let remote = Remote::new(Arc::new(GuestCode::of(&module)), preempt);
    let patched = Arc::new(AtomicUsize::new(0));
    let mut store = Store::new(engine, ());
    let mut linker = wasmtime::Linker::new(engine);
    let patch = {
        let (remote, patched) = (remote.clone(), patched.clone());
        move || {
            let here = 0usize;
            let sp = std::hint::black_box(&here) as *const usize as usize;
            // SAFETY: this runs in a host function called from guest code,
            // as a signal handler interrupting a libcall would: the stack
            // from `sp` up to the guest's frame is live.
            if unsafe { remote.patch_return(sp) } {
                patched.fetch_add(1, Ordering::SeqCst);
            }
        }
    };
    let p1 = patch.clone();
    linker
        .func_wrap("probe", "i", move |x: i32| -> i32 {
            p1();
            x.wrapping_mul(2)
        })
        .and_then(|l| {
            l.func_wrap("probe", "f", move || -> f64 {
                patch();
                0.25
            })
        })
        .map_err(|e| format!("linking the probe: {e:#}"))?;
    let _on = OnThisThread::enter(&remote);
    let result = crate::park::block_on(async {
        let instance = linker.instantiate_async(&mut store, &module).await?;
        let run = instance.get_typed_func::<i32, f64>(&mut store, "run")?;
        let _known = remote.set_store(run.func().to_raw(&mut store) as usize);
        run.call_async(&mut store, 20).await
    })
    .map_err(|e| format!("running the probe: {e:#}"))?;
    let n = patched.load(Ordering::SeqCst);
    if result != 41.25 || n != 2 || remote.patched_ret.load(Ordering::SeqCst) != 0 {
        return Err(format!(
            "the trampoline patch failed its probe: {result} (41.25 expected), {n} of 2 returns \
             patched"
        ));
    }
    Ok(())
}

/// The program counter saved in a signal's context.
///
/// # Safety
/// `ctx` is the `ucontext_t` the kernel passed to a handler.
unsafe fn context_pc(ctx: *mut libc::c_void) -> usize {
    // SAFETY: per the contract.
    unsafe { (*(ctx as *mut libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RIP as usize] as usize }
}

/// One running job as its controller and its job thread share it.
pub(crate) struct Remote {
    /// What the controller wants: [`RUN`], [`SUSPEND`] or [`KILL`] (final).
    /// Also the futex word a held thread waits on.
    request: AtomicU32,
    /// Where the job thread is: [`BUSY`], [`HELD`], [`PARKED`] or [`IDLE`].
    state: AtomicU32,
    /// The job thread's kernel id, 0 when it has none.
    tid: AtomicI32,
    code: Arc<GuestCode>,
    /// The pad a killed guest is sent to, and the engine's wasm stack size.
    preempt: Preempt,
    /// Wakes the job thread's executor.
    pub(crate) parker: Arc<crate::park::Parker>,
    /// The job thread's CPU clock and its reading when the job began, while
    /// the job runs.
    cpu: Mutex<Option<(ThreadClock, u64)>>,
    /// CPU time of the finished run, in nanoseconds.
    cpu_done: std::sync::atomic::AtomicU64,
    /// The job thread's system CPU time when the job began.
    sys_base: std::sync::atomic::AtomicU64,
    /// System CPU time of the finished run, in nanoseconds.
    sys_done: std::sync::atomic::AtomicU64,
    /// The job thread's wait for a CPU when the job began.
    delay_base: std::sync::atomic::AtomicU64,
    /// The finished run's wait for a CPU, in nanoseconds.
    delay_done: std::sync::atomic::AtomicU64,
    /// The store's `VMStoreContext`, once the guest is instantiated.
    vmstore: AtomicUsize,
    /// The return address the stub continues at, while a trampoline's
    /// return is patched; 0 otherwise.
    patched_ret: AtomicUsize,
    /// Where the patched return address is (on the guest's stack).
    patched_at: AtomicUsize,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("request", &self.request())
            .field("state", &self.state())
            .field("tid", &self.tid.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Remote {
    /// A job of a module with `code`, on the engine `preempt` was made for.
    pub(crate) fn new(code: Arc<GuestCode>, preempt: &Preempt) -> Arc<Remote> {
        Arc::new(Remote {
            request: AtomicU32::new(RUN),
            state: AtomicU32::new(IDLE),
            tid: AtomicI32::new(0),
            code,
            preempt: preempt.clone(),
            parker: crate::park::Parker::new(),
            cpu: Mutex::new(None),
            cpu_done: Default::default(),
            sys_base: Default::default(),
            sys_done: Default::default(),
            delay_base: Default::default(),
            delay_done: Default::default(),
            vmstore: AtomicUsize::new(0),
            patched_ret: AtomicUsize::new(0),
            patched_at: AtomicUsize::new(0),
        })
    }

    /// What the controller wants now.
    pub(crate) fn request(&self) -> u32 {
        self.request.load(Ordering::SeqCst)
    }

    /// Where the job thread is.
    pub(crate) fn state(&self) -> u32 {
        self.state.load(Ordering::SeqCst)
    }

    /// Records where the job thread is.
    pub(crate) fn set_state(&self, s: u32) {
        self.state.store(s, Ordering::SeqCst);
    }

    /// True when a suspension has taken effect: the job thread is held or
    /// its executor waits without polling, and nothing has woken it since
    /// (it runs no instruction until resumed or killed).
    pub(crate) fn is_stopped(&self) -> bool {
        self.request() == SUSPEND && matches!(self.state(), HELD | PARKED)
    }

    /// Asks for `want` ([`RUN`], [`SUSPEND`] or [`KILL`]). A kill is final.
    pub(crate) fn set_request(self: &Arc<Self>, want: u32) {
        let old = self
            .request
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| (r != KILL).then_some(want));
        let Ok(old) = old else { return };
        // A parked executor sees a suspension whenever it next wakes; only a
        // resume or a kill needs to wake it now. The thread may run from the
        // wake on: it is no longer stopped ([`Remote::is_stopped`]) until it
        // says so again, even if suspended again before it woke.
        if want != SUSPEND {
            self.mark_woken();
            if old == SUSPEND {
                futex_wake(&self.request);
            }
            self.parker.unpark();
        }
        if want != RUN {
            self.kick();
            kicker().watch(self);
        }
    }

    /// Records that the job thread, held or parked, is being woken.
    fn mark_woken(&self) {
        for from in [HELD, PARKED] {
            let _ = self.state.compare_exchange(from, BUSY, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    /// Signals the job thread if it runs code.
    fn kick(&self) {
        let tid = self.tid.load(Ordering::SeqCst);
        if tid != 0 && self.state() == BUSY {
            // SAFETY: tgkill takes plain integers; a thread that has gone is
            // ESRCH, and a reused id only reaches a thread whose handler
            // finds no job of ours (or its own job, which it serves).
            unsafe {
                libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, SIGNAL);
            }
        }
    }

    /// The system CPU time of the job's finished run, in nanoseconds (0 while
    /// it runs: only the job's own thread can read it).
    pub(crate) fn sys_ns(&self) -> u64 {
        self.sys_done.load(Ordering::SeqCst)
    }

    /// How long the job's finished run waited for a CPU, in nanoseconds (0
    /// while it runs).
    pub(crate) fn run_delay_ns(&self) -> u64 {
        self.delay_done.load(Ordering::SeqCst)
    }

    /// The CPU time the job has used so far, in nanoseconds.
    pub(crate) fn cpu_ns(&self) -> u64 {
        let g = self.cpu.lock().unwrap_or_else(|e| e.into_inner());
        match &*g {
            Some((clock, base)) => clock.ns().map_or(0, |n| n.saturating_sub(*base)),
            None => self.cpu_done.load(Ordering::SeqCst),
        }
    }

    /// Learns the store's `VMStoreContext` from a guest function of the job's
    /// instance (`Func::to_raw`: a `VMFuncRef`). Leaves it unknown, and the
    /// trampoline patch off, if the `VMContext` is not as expected. The
    /// returned guard forgets it again: it must be dropped before the store,
    /// so that a signal never reads a freed store context.
    pub(crate) fn set_store(self: &Arc<Self>, func_ref: usize) -> StoreKnown {
        let known = StoreKnown(self.clone());
        if func_ref == 0 {
            return known;
        }
        // Every word is read without faulting, and used only if the
        // `VMContext` it leads to carries wasmtime's magic: a layout other
        // than the one published leaves the store unknown and the patch off.
        let l = &*LAYOUT;
        if l.func_ref_vmctx + 8 > l.func_ref_size {
            return known;
        }
        let Some(vmctx) = read_word(func_ref + l.func_ref_vmctx) else { return known };
        let (Some(magic), Some(store)) =
            (read_word(vmctx + l.vmctx_magic), read_word(vmctx + l.vmctx_store_context))
        else {
            return known;
        };
        let magic = (magic & 0xffff_ffff) as u32;
        if magic == wasmtime_environ::VMCONTEXT_MAGIC
            && [l.stack_limit, l.exit_fp, l.exit_pc].iter().all(|o| read_word(store + o).is_some())
        {
            self.vmstore.store(store, Ordering::SeqCst);
        }
        known
    }

    /// Patches the return address of the trampoline the guest last called
    /// out through, if it is on the stack between `sp` and the guest's frame,
    /// so that the call returns into [`andes_preempt_stub`] instead. True
    /// when patched (now or before). Async-signal-safe.
    ///
    /// Only the guest's own fiber stack is ever read or written: `sp` must
    /// lie within [`HOST_SLACK`] below the store's wasm stack limit, or above
    /// it, and the guest's frame between `sp` and the limit plus
    /// `max_wasm_stack` (where wasmtime entered the guest). That whole range
    /// is on the fiber stack, which is mapped and readable. An interrupted
    /// context elsewhere (the job thread's own stack, while its executor
    /// runs; a signal stack, while another handler runs) is left alone.
    ///
    /// # Safety
    /// `sp` is the stack pointer of the calling thread, the job's thread, as
    /// its interrupted context or its current frame had it. The store whose
    /// context [`Remote::set_store`] recorded is alive.
    unsafe fn patch_return(&self, sp: usize) -> bool {
        if self.patched_ret.load(Ordering::SeqCst) != 0 {
            return true;
        }
        let vmstore = self.vmstore.load(Ordering::SeqCst);
        if vmstore == 0 {
            return false;
        }
        let l = &*LAYOUT;
        // SAFETY: the store context lives as long as the job's store (the
        // contract, and `StoreKnown`).
        let (limit, exit_fp, exit_pc) = unsafe {
            (
                std::ptr::read_volatile((vmstore + l.stack_limit) as *const usize),
                std::ptr::read_volatile((vmstore + l.exit_fp) as *const usize),
                std::ptr::read_volatile((vmstore + l.exit_pc) as *const usize),
            )
        };
        // Not in the guest (the limit is unset), or not on its fiber stack.
        if limit == usize::MAX || limit < HOST_SLACK {
            return false;
        }
        let (low, high) = (limit - HOST_SLACK, limit.saturating_add(self.preempt.wasm_stack));
        if sp < low || exit_fp > high {
            return false;
        }
        // The frame record is below the guest's frame, on the same stack,
        // and the trampolines' frames are small.
        if !self.code.contains(exit_pc) || exit_fp <= sp || exit_fp - sp > SCAN_LIMIT {
            return false;
        }
        let mut at = (sp + 7) & !7;
        while at + 16 <= exit_fp {
            // SAFETY: `sp..exit_fp` lies within `low..high`, the guest's
            // fiber stack (see above), live and this thread's own.
            unsafe {
                let word = at as *mut usize;
                if std::ptr::read_volatile(word) == exit_fp
                    && std::ptr::read_volatile(word.add(1)) == exit_pc
                {
                    self.patched_at.store(at + 8, Ordering::SeqCst);
                    self.patched_ret.store(exit_pc, Ordering::SeqCst);
                    std::ptr::write_volatile(word.add(1), stub_address());
                    return true;
                }
            }
            at += 8;
        }
        false
    }

    /// The store's call hook: on every crossing into guest code, stop here
    /// if asked to (suspend blocks the thread, kill traps the guest).
    pub(crate) fn at_boundary(&self, hook: CallHook) -> anyhow::Result<()> {
        if matches!(hook, CallHook::ReturningFromWasm) {
            return Ok(());
        }
        loop {
            match self.request() {
                SUSPEND => self.hold(false),
                KILL => return Err(Trap::Interrupt.into()),
                _ => return Ok(()),
            }
        }
    }

    /// Blocks the calling (job) thread while the request is [`SUSPEND`].
    /// Async-signal-safe: atomics and system calls only. Outside the signal
    /// handler (which runs with [`SIGNAL`] blocked already) the signal is
    /// blocked meanwhile, so that one sent just before the thread stopped
    /// waits for the resume instead of waking it.
    ///
    /// HELD is published again after every wake: a resume marks the thread
    /// busy ([`Remote::set_request`]), and a suspension that follows before
    /// the thread woke takes effect only once it waits again.
    fn hold(&self, in_handler: bool) {
        let _masked = (!in_handler).then(SignalMasked::new);
        loop {
            self.state.store(HELD, Ordering::SeqCst);
            if self.request.load(Ordering::SeqCst) != SUSPEND {
                break;
            }
            futex_wait(&self.request, SUSPEND);
        }
        self.state.store(BUSY, Ordering::SeqCst);
    }
}

/// The job's future's waker: wakes the executor (the job thread's `drive`),
/// which is no longer stopped from then on.
impl std::task::Wake for Remote {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.mark_woken();
        self.parker.unpark();
    }
}

/// Keeps a job's store context known to its signal handler; forgets it
/// when dropped (before the store is).
pub(crate) struct StoreKnown(Arc<Remote>);

impl Drop for StoreKnown {
    fn drop(&mut self) {
        self.0.vmstore.store(0, Ordering::SeqCst);
    }
}

/// Blocks [`SIGNAL`] on the calling thread until dropped.
pub(crate) struct SignalMasked(());

impl SignalMasked {
    pub(crate) fn new() -> SignalMasked {
        signal_mask(libc::SIG_BLOCK);
        SignalMasked(())
    }
}

impl Drop for SignalMasked {
    fn drop(&mut self) {
        signal_mask(libc::SIG_UNBLOCK);
    }
}

fn signal_mask(how: libc::c_int) {
    // SAFETY: a local, initialised signal set; pthread_sigmask only changes
    // the calling thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, SIGNAL);
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// Where wasmtime keeps what the patch reads, from wasmtime's own published
/// layout (`wasmtime_environ::VMOffsets` for this host's pointer size), never
/// from numbers written here: a wasmtime whose layout moved is read where it
/// says, and a change the probe at start-up does not pass leaves every job
/// metered.
struct Layout {
    /// `vmctx` in a `VMFuncRef`.
    func_ref_vmctx: usize,
    /// The size of a `VMFuncRef`.
    func_ref_size: usize,
    /// The magic at the start of a `VMContext`.
    vmctx_magic: usize,
    /// The `VMStoreContext` pointer in a `VMContext`.
    vmctx_store_context: usize,
    /// `stack_limit` in a `VMStoreContext`.
    stack_limit: usize,
    /// `last_wasm_exit_fp` and `last_wasm_exit_pc` in a `VMStoreContext`.
    exit_fp: usize,
    exit_pc: usize,
}

static LAYOUT: std::sync::LazyLock<Layout> = std::sync::LazyLock::new(|| {
    use wasmtime_environ::PtrSize;
    let p = wasmtime_environ::HostPtr;
    Layout {
        func_ref_vmctx: usize::from(p.vm_func_ref_vmctx()),
        func_ref_size: usize::from(p.size_of_vm_func_ref()),
        vmctx_magic: usize::from(p.vmctx_magic()),
        vmctx_store_context: usize::from(p.vmctx_store_context()),
        stack_limit: usize::from(p.vmstore_context_stack_limit()),
        exit_fp: usize::from(p.vmstore_context_last_wasm_exit_fp()),
        exit_pc: usize::from(p.vmstore_context_last_wasm_exit_pc()),
    }
});

/// Reads a word at `addr` of this process without ever faulting: through
/// `process_vm_readv` on ourselves, which answers an unmapped address with
/// an error. Used where a pointer comes from wasmtime's internals, before
/// anything is trusted to be where the layout says.
fn read_word(addr: usize) -> Option<usize> {
    if addr == 0 || !addr.is_multiple_of(std::mem::align_of::<usize>()) {
        return None;
    }
    let mut out = 0usize;
    let local = libc::iovec { iov_base: (&mut out as *mut usize).cast(), iov_len: 8 };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: 8 };
    // SAFETY: both iovecs describe 8 bytes; the local one is `out`. The
    // kernel checks the remote one and fails rather than faulting.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (n == 8).then_some(out)
}
/// How far above the stack pointer a trampoline's frame record may be.
const SCAN_LIMIT: usize = 64 << 10;

// The stub a patched trampoline returns into, with the stack pointer 16-byte
// aligned (the guest's, after its call). It keeps a slot for where to go on,
// saves every register a return may carry or the guest may rely on (the
// callee-saved ones are kept by `andes_preempt_resume` itself), asks where to
// go on (blocking while suspended), restores them all and returns there.
std::arch::global_asm!(
    ".pushsection .text.andes_preempt_stub,\"ax\",@progbits",
    ".p2align 4",
    "andes_preempt_stub:",
    "sub rsp, 8",
    "push rax",
    "push rcx",
    "push rdx",
    "push rsi",
    "push rdi",
    "push r8",
    "push r9",
    "push r10",
    "push r11",
    "sub rsp, 256",
    "movdqu [rsp], xmm0",
    "movdqu [rsp + 16], xmm1",
    "movdqu [rsp + 32], xmm2",
    "movdqu [rsp + 48], xmm3",
    "movdqu [rsp + 64], xmm4",
    "movdqu [rsp + 80], xmm5",
    "movdqu [rsp + 96], xmm6",
    "movdqu [rsp + 112], xmm7",
    "movdqu [rsp + 128], xmm8",
    "movdqu [rsp + 144], xmm9",
    "movdqu [rsp + 160], xmm10",
    "movdqu [rsp + 176], xmm11",
    "movdqu [rsp + 192], xmm12",
    "movdqu [rsp + 208], xmm13",
    "movdqu [rsp + 224], xmm14",
    "movdqu [rsp + 240], xmm15",
    "call {resume}",
    "mov [rsp + 328], rax",
    "movdqu xmm0, [rsp]",
    "movdqu xmm1, [rsp + 16]",
    "movdqu xmm2, [rsp + 32]",
    "movdqu xmm3, [rsp + 48]",
    "movdqu xmm4, [rsp + 64]",
    "movdqu xmm5, [rsp + 80]",
    "movdqu xmm6, [rsp + 96]",
    "movdqu xmm7, [rsp + 112]",
    "movdqu xmm8, [rsp + 128]",
    "movdqu xmm9, [rsp + 144]",
    "movdqu xmm10, [rsp + 160]",
    "movdqu xmm11, [rsp + 176]",
    "movdqu xmm12, [rsp + 192]",
    "movdqu xmm13, [rsp + 208]",
    "movdqu xmm14, [rsp + 224]",
    "movdqu xmm15, [rsp + 240]",
    "add rsp, 256",
    "pop r11",
    "pop r10",
    "pop r9",
    "pop r8",
    "pop rdi",
    "pop rsi",
    "pop rdx",
    "pop rcx",
    "pop rax",
    "ret",
    ".popsection",
    resume = sym andes_preempt_resume,
);

unsafe extern "C" {
    fn andes_preempt_stub();
}

/// The address patched trampolines return into.
fn stub_address() -> usize {
    andes_preempt_stub as *const () as usize
}

/// Called by the stub, on the job thread, once a patched call has returned:
/// blocks while the job is suspended, then says where to go on (the guest, or
/// the pad's trap site when killed). Plain code, not a signal handler.
extern "C" fn andes_preempt_resume() -> usize {
    let current = CURRENT.with(|c| c.load(Ordering::SeqCst));
    if current.is_null() {
        // Only a job thread ever runs the stub, with its job current.
        std::process::abort();
    }
    // SAFETY: set by `OnThisThread` on this thread for the job's duration.
    let r = unsafe { &*current };
    let back = r.patched_ret.swap(0, Ordering::SeqCst);
    r.patched_at.store(0, Ordering::SeqCst);
    loop {
        match r.request() {
            SUSPEND => r.hold(false),
            KILL => return r.preempt.trap_pc,
            _ => return back,
        }
    }
}

/// The job the calling thread runs, for the signal handler.
pub(crate) struct OnThisThread {
    remote: Arc<Remote>,
}

std::thread_local! {
    /// The [`Remote`] of the job this thread runs, or null. Const-initialised
    /// and without a destructor, so the handler reads it without allocating.
    static CURRENT: AtomicPtr<Remote> = const { AtomicPtr::new(std::ptr::null_mut()) };
}

impl OnThisThread {
    /// Makes the calling thread the job's thread until the value is dropped:
    /// signals reach it, and its CPU clock is the job's.
    pub(crate) fn enter(remote: &Arc<Remote>) -> OnThisThread {
        CURRENT.with(|c| c.store(Arc::as_ptr(remote) as *mut Remote, Ordering::SeqCst));
        if let Some(clock) = ThreadClock::current() {
            let base = clock.ns().unwrap_or(0);
            *remote.cpu.lock().unwrap_or_else(|e| e.into_inner()) = Some((clock, base));
        }
        remote.sys_base.store(crate::cputime::thread_sys_ns(), Ordering::SeqCst);
        remote.delay_base.store(crate::cputime::thread_run_delay_ns(), Ordering::SeqCst);
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        remote.tid.store(tid, Ordering::SeqCst);
        remote.set_state(BUSY);
        OnThisThread { remote: remote.clone() }
    }
}

impl Drop for OnThisThread {
    fn drop(&mut self) {
        let r = &self.remote;
        r.set_state(IDLE);
        r.tid.store(0, Ordering::SeqCst);
        let mut g = r.cpu.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((clock, base)) = g.take() {
            r.cpu_done.store(clock.ns().unwrap_or(base).saturating_sub(base), Ordering::SeqCst);
        }
        let sys = crate::cputime::thread_sys_ns().saturating_sub(r.sys_base.load(Ordering::SeqCst));
        r.sys_done.store(sys, Ordering::SeqCst);
        let delay = crate::cputime::thread_run_delay_ns()
            .saturating_sub(r.delay_base.load(Ordering::SeqCst));
        r.delay_done.store(delay, Ordering::SeqCst);
        drop(g);
        CURRENT.with(|c| c.store(std::ptr::null_mut(), Ordering::SeqCst));
    }
}

/// The previous disposition of [`SIGNAL`], called for threads with no job.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Installs the handler of [`SIGNAL`] (once per process).
pub(crate) fn install() -> Result<(), String> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            // SAFETY: a plain sigaction call with a zeroed, then filled, struct;
            // the handler is async-signal-safe (see `on_signal`).
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                // SA_RESTART: a signal that lands in a host call's system call
                // restarts it rather than failing it with EINTR.
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(SIGNAL, &sa, &mut old) != 0 {
                    return Err(format!(
                        "installing the handler of signal {SIGNAL}: {}",
                        std::io::Error::last_os_error()
                    ));
                }
                let _ = PREVIOUS.set(old);
            }
            Ok(())
        })
        .clone()
}

extern "C" fn on_signal(signum: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: errno is thread-local; it is put back before returning.
    let errno = unsafe { *libc::__errno_location() };
    let current = CURRENT.with(|c| c.load(Ordering::SeqCst));
    if current.is_null() {
        chain(signum, info, ctx);
    } else if !ctx.is_null() {
        // SAFETY: `current` is set by `OnThisThread` on this very thread and
        // cleared before its `Remote` can go; `ctx` is the kernel's context.
        unsafe { serve(&*current, ctx) };
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Acts on the job's request if the thread was interrupted in guest code.
///
/// # Safety
/// `ctx` is the `ucontext_t` of a signal delivered to this thread.
unsafe fn serve(r: &Remote, ctx: *mut libc::c_void) {
    // SAFETY: per the contract.
    let pc = unsafe { context_pc(ctx) };
    if !r.code.contains(pc) {
        if r.request.load(Ordering::SeqCst) != RUN {
            // SAFETY: per the contract, `sp` is this thread's.
            unsafe {
                let sp =
                    (*(ctx as *mut libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RSP as usize];
                r.patch_return(sp as usize);
            }
        }
        return;
    }
    loop {
        match r.request.load(Ordering::SeqCst) {
            SUSPEND => r.hold(true),
            KILL => {
                // SAFETY: per the contract; the new pc is a registered trap
                // site, so the thread traps there as if the guest had.
                unsafe {
                    (*(ctx as *mut libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RIP as usize] =
                        r.preempt.trap_pc as libc::greg_t;
                }
                return;
            }
            _ => return,
        }
    }
}

/// Passes a signal that found no job to the handler installed before ours.
fn chain(signum: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(prev) = PREVIOUS.get() else { return };
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        return;
    }
    // SAFETY: `h` is the handler the process installed for this signal, of
    // the kind its flags say.
    unsafe {
        if prev.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(h);
            f(signum, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
            f(signum);
        }
    }
}

fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: `word` is a live, aligned u32; a spurious or interrupted wake
    // is handled by the caller's loop.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        );
    }
}

/// Signals again the jobs whose request has not taken effect yet.
struct Kicker {
    watched: Mutex<Vec<(Arc<Remote>, Instant, Duration)>>,
    more: Condvar,
}

const FIRST_RETRY: Duration = Duration::from_micros(100);
const LAST_RETRY: Duration = Duration::from_millis(10);

fn kicker() -> &'static Kicker {
    static KICKER: OnceLock<&'static Kicker> = OnceLock::new();
    KICKER.get_or_init(|| {
        let k: &'static Kicker =
            Box::leak(Box::new(Kicker { watched: Mutex::new(Vec::new()), more: Condvar::new() }));
        // Without the thread, requests still take effect at the job's next
        // host call or wait; only a job that never leaves guest code after
        // an unlucky first signal would wait for its next crossing.
        let _ = std::thread::Builder::new().name("andes-kicker".into()).spawn(move || k.run());
        k
    })
}

impl Kicker {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Arc<Remote>, Instant, Duration)>> {
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Signals `r` again soon, and then less and less often, while its
    /// request has not taken effect.
    fn watch(&self, r: &Arc<Remote>) {
        let next = Instant::now() + FIRST_RETRY;
        let mut w = self.lock();
        match w.iter_mut().find(|(x, _, _)| Arc::ptr_eq(x, r)) {
            Some(e) => (e.1, e.2) = (next, FIRST_RETRY),
            None => w.push((r.clone(), next, FIRST_RETRY)),
        }
        drop(w);
        self.more.notify_one();
    }

    /// True while `r`'s request still needs signals.
    fn pending(r: &Remote) -> bool {
        match (r.request(), r.state()) {
            (RUN, _) | (_, IDLE) => false,
            (SUSPEND, HELD | PARKED) => false,
            // A parked executor was woken by the kill and drops the job.
            (KILL, PARKED) => false,
            _ => true,
        }
    }

    fn run(&self) {
        let mut w = self.lock();
        loop {
            let now = Instant::now();
            w.retain(|(r, _, _)| Kicker::pending(r));
            for (r, next, delay) in w.iter_mut() {
                if *next <= now {
                    r.kick();
                    *delay = (*delay * 2).min(LAST_RETRY);
                    *next = now + *delay;
                }
            }
            w = match w.iter().map(|(_, next, _)| *next).min() {
                None => self.more.wait(w).unwrap_or_else(|e| e.into_inner()),
                Some(next) => {
                    let wait = next.saturating_duration_since(Instant::now());
                    self.more.wait_timeout(w, wait).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_never_fault_on_unmapped_or_misaligned_addresses() {
        let word = 0x1234_5678_9abc_def0usize;
        assert_eq!(read_word(&word as *const usize as usize), Some(word));
        assert_eq!(read_word(0), None);
        assert_eq!(read_word(8), None, "the zero page is not mapped");
        assert_eq!(read_word((&word as *const usize as usize) + 1), None);
        assert_eq!(read_word(usize::MAX & !7), None);
    }

    #[test]
    fn the_pad_and_the_probe_are_their_text_assembled() {
        let pad = r#"(module (func (export "pad") unreachable))"#;
        assert_eq!(PAD, wat::parse_str(pad).unwrap());
        let probe = r#"(module
          (import "probe" "i" (func (param i32) (result i32)))
          (import "probe" "f" (func (result f64)))
          (func (export "run") (param i32) (result f64)
            (f64.add (call 1) (f64.convert_i32_s (i32.add (call 0 (local.get 0)) (i32.const 1))))))"#;
        assert_eq!(PROBE, wat::parse_str(probe).unwrap());
    }

    #[test]
    fn a_func_ref_that_is_not_one_leaves_the_store_unknown() {
        // Garbage where a VMFuncRef should be: pointers into nowhere and to
        // memory without wasmtime's magic. Nothing faults; nothing is used.
        let engine = Engine::default();
        let module = Module::new(&engine, wat::parse_str("(module)").unwrap()).unwrap();
        let remote = Remote::new(
            Arc::new(GuestCode::of(&module)),
            &Preempt { _pad: module.clone(), trap_pc: 0, wasm_stack: 0 },
        );
        let junk = [0usize, 0, 0, 8, 0, 0, 0, 0];
        let no_magic = [0u64; 8];
        let points_to_no_magic = [0usize, 0, 0, no_magic.as_ptr() as usize, 0, 0, 0, 0];
        for f in [junk.as_ptr() as usize, points_to_no_magic.as_ptr() as usize, 16] {
            let _known = remote.set_store(f);
            assert_eq!(remote.vmstore.load(Ordering::SeqCst), 0);
        }
    }
}
