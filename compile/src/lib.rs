//! `andes compile`: instrument a wasip1 module so that the execute host can
//! checkpoint it transparently, the counterpart of HTCondor's `condor_compile`.
//!
//! [`instrument`] rewrites a module in three steps:
//!
//! 1. **Yield points.** A one-page memory, the *poll memory*, is added after
//!    the guest's (index [`POLL_MEMORY`], exported as [`POLL_MEMORY_EXPORT`]);
//!    its `u32` at [`POLL_WORD`] is the *flag*. A function `() -> ()` is
//!    imported as [`YIELD_MODULE`]`.`[`YIELD_FIELD`] (every function index
//!    after the imports moves up by one). At loop headers (after the blocks
//!    that open there, so that a `switch` in a loop tests the poll word and
//!    nothing else on its way in) the pass inserts
//!    `i32.load poll[POLL_WORD]; if; call yield; end`. The host sets the
//!    flag to ask for a yield, from any thread and without stopping the
//!    guest (it is a word of memory, not a global only the store may
//!    write): so a compiled job needs neither fuel nor epoch checks to be
//!    checkpointed. The guest calls the import at the next checked header.
//!    Which loops are checked is [`Options::checks`]: by default
//!    ([`LoopChecks::Outer`]) the outermost loops and the loops that make
//!    calls, in functions that call something; a hot inner loop that calls
//!    nothing runs unchecked (and the unwinding leaves leaf functions alone),
//!    which keeps the cost of a job that is never checkpointed low, at the
//!    price of a yield waiting for such an inner loop to end. One
//!    instruction can run long too: a `memory.copy` or `memory.fill` of
//!    hundreds of megabytes (a `Vec` that doubles) takes a tenth of a
//!    second. With [`Options::split_bulk`] (the default), every
//!    `memory.copy` and `memory.fill` of a 32-bit memory becomes a call to a helper the pass adds, which does one of at most
//!    1 MiB as the instruction itself, and a larger one in pieces of 1 MiB
//!    with a flag check before each (backwards when the destination is
//!    above the source, so overlaps come out as the instruction's do; one
//!    that would trap is left to the instruction, which traps before
//!    moving a byte). A recursion need not loop at all (a tree walk, a
//!    naive `fib`), so every cycle of calls, direct or through a table, gets
//!    a check too: at the entry of the lowest function of each cycle a
//!    depth-first search of the call graph closes, unless a function on it
//!    checks on every entry already (its body starts with a checked loop)
//!    or has been given a check for another cycle.
//! 2. **Unwinding.** andes's own transform (the `unwind` module) makes the
//!    call stack unwindable into memory and rewindable later. Only the
//!    functions that can reach the yield import change: a function can if
//!    it calls one that can, directly or through a table entry of the
//!    called type. After each call that can yield, a test of the state
//!    leaves the function through an epilogue that saves its locals as one
//!    frame; on entry while rewinding, a prologue pops the frame and a
//!    branch per level of nesting goes back to the call. The normal path
//!    keeps its shape: unlike Binaryen's Asyncify, which andes used before
//!    (instrumentation version 2), nothing guards the code between calls.
//!    The branches a rewind takes still end in the middle of code, and
//!    each such join in a loop costs the normal path register moves; so
//!    an outermost loop that holds many sites
//!    ([`Options::fast_copy_sites`], an interpreter's dispatch loop) is
//!    emitted twice: a rewind copy, entered only by a rewind, with those
//!    branches, whose back edges go to a fast copy without them.
//!    It exports [`START_UNWIND`], [`STOP_UNWIND`], [`START_REWIND`],
//!    [`STOP_REWIND`] and [`GET_STATE`] under Asyncify's names, with
//!    Asyncify's meaning.
//! 3. **Exports and version.** Every mutable global of the output (the
//!    module's own, `__stack_pointer` among them, the flag and the unwinding's
//!    state and data pointer) is exported as `andes.global.N`, N being its
//!    index in the output ([`global_export_name`]); the guest memory is
//!    exported as [`MEMORY_EXPORT`] if it was not; a custom section
//!    [`CUSTOM_SECTION`] holds [`INSTRUMENTATION_VERSION`] as a little-endian
//!    `u32` ([`instrumentation_version`] reads it back). The output is
//!    validated with wasmparser under wasmtime 36's default features.
//!
//! # The checkpoint stack
//!
//! An unwind saves the call stack (each frame's locals and the call it was
//! in) in a buffer described by a small data structure, in a **linear
//! memory** of its own, exported as [`STACK_MEMORY_EXPORT`] (index
//! [`STACK_MEMORY`]), so the
//! guest's memory is never touched: its allocator cannot collide with the
//! buffer and a snapshot of the guest memory is exactly the guest's. Its size
//! is fixed at compile time ([`Options::stack_pages`], default
//! [`DEFAULT_STACK_PAGES`] pages of 64 KiB); [`StackLayout`] says where the
//! host writes the data structure and the bounds of the buffer.
//!
//! To unwind, the host writes `[start, end]` (two little-endian `u32`) at
//! [`StackLayout::data`] and calls `asyncify_start_unwind(data)`. To rewind
//! it restores the stack memory as captured (the data structure then records
//! how far the buffer was filled) and calls `asyncify_start_rewind(data)`.
//!
//! **Overflow.** A call stack larger than the buffer makes the unwind write
//! past the end of the stack memory, which traps (out-of-bounds memory
//! access) while [`GET_STATE`] returns [`STATE_UNWINDING`]; the guest memory
//! is untouched. The host recognises that pair with [`is_stack_overflow`]
//! and reports [`StackOverflow`], whose message says how to recompile with a
//! larger stack. The job cannot continue from that point (its frames are
//! gone), but it can be restarted from its previous snapshot.
//!
//! # What the host does
//!
//! To checkpoint, the host sets the flag (from whichever thread controls the
//! job).
//! The yield import, called at the next loop header, sees
//! `asyncify_get_state() == 0` and the flag set: it calls
//! `asyncify_start_unwind(data)` and returns. Every frame saves itself and
//! returns, so `_start` returns `Ok` to the host with the state
//! [`STATE_UNWINDING`] (which distinguishes it from a real return); the host
//! calls `asyncify_stop_unwind()` and captures every memory and every
//! `andes.global.N`. To resume (in the same instance, or a fresh one after
//! writing the memories, growing them first, and the globals back) it calls
//! `asyncify_start_rewind(data)` and `_start` again, **with the flag
//! raised**: the rewind passes through the flag check of each loop on its
//! way back (a loop's branch to where it left is taken inside that check,
//! so that the normal path tests only the flag). The yield import then
//! sees [`STATE_REWINDING`], calls `asyncify_stop_rewind()`, clears the flag
//! and returns, and the guest continues where it was.
#![forbid(unsafe_code)]

#[cfg(feature = "instrument")]
mod graph;
#[cfg(feature = "instrument")]
mod liveness;
#[cfg(feature = "instrument")]
mod rewrite;
#[cfg(feature = "instrument")]
mod scan;
#[cfg(feature = "instrument")]
mod unwind;

/// The module of the yield import.
pub const YIELD_MODULE: &str = "andes:checkpoint";
/// The field of the yield import, of type `() -> ()`.
pub const YIELD_FIELD: &str = "yield";
/// The export of the poll memory, whose word at [`POLL_WORD`] is the flag
/// (non-zero asks for a yield).
pub const POLL_MEMORY_EXPORT: &str = "andes.checkpoint.poll";
/// The poll memory's index in an instrumented module (after the guest's).
pub const POLL_MEMORY: u32 = 1;
/// Where the flag is in the poll memory (a little-endian `u32`, aligned).
pub const POLL_WORD: u32 = 0;
/// The stack memory's index in an instrumented module (after the poll memory).
pub const STACK_MEMORY: u32 = 2;
/// The prefix of the exports of mutable globals: `andes.global.N`.
pub const GLOBAL_EXPORT_PREFIX: &str = "andes.global.";
/// The export of the guest's linear memory.
pub const MEMORY_EXPORT: &str = "memory";
/// The export of the memory that holds the unwind data structure and stack.
pub const STACK_MEMORY_EXPORT: &str = "andes.checkpoint.stack";
/// `asyncify_start_unwind(data: i32)`.
pub const START_UNWIND: &str = "asyncify_start_unwind";
/// `asyncify_stop_unwind()`.
pub const STOP_UNWIND: &str = "asyncify_stop_unwind";
/// `asyncify_start_rewind(data: i32)`.
pub const START_REWIND: &str = "asyncify_start_rewind";
/// `asyncify_stop_rewind()`.
pub const STOP_REWIND: &str = "asyncify_stop_rewind";
/// `asyncify_get_state() -> i32`: one of the `STATE_*` values.
pub const GET_STATE: &str = "asyncify_get_state";
/// [`GET_STATE`]: running normally.
pub const STATE_NORMAL: i32 = 0;
/// [`GET_STATE`]: unwinding the call stack into the stack memory.
pub const STATE_UNWINDING: i32 = 1;
/// [`GET_STATE`]: rewinding the call stack from the stack memory.
pub const STATE_REWINDING: i32 = 2;
/// The custom section that records the instrumentation version.
pub const CUSTOM_SECTION: &str = "andes.instrumentation";
/// The version of the instrumentation this crate produces. A snapshot of an
/// instrumented module can only be restored into a module instrumented with
/// the same version (it is part of `CheckpointPlatform`).
/// Version 3 unwinds with andes's own transform, whose frames differ from
/// Asyncify's, and keeps the poll word raised during a rewind; version 2
/// kept the flag in the poll memory (version 1: in a global, which only
/// the job's own thread could set).
pub const INSTRUMENTATION_VERSION: u32 = 3;
/// The default size of the stack memory, in 64 KiB pages (1 MiB, as the
/// host's cap on the wasm stack).
pub const DEFAULT_STACK_PAGES: u32 = 16;
/// The largest stack memory [`instrument`] accepts, in 64 KiB pages (256 MiB).
pub const MAX_STACK_PAGES: u32 = 4096;
/// The size of a wasm page.
pub const PAGE_SIZE: u64 = 65536;

/// The export name of mutable global `index`: `andes.global.N`.
pub fn global_export_name(index: u32) -> String {
    format!("{GLOBAL_EXPORT_PREFIX}{index}")
}

/// The global index of an `andes.global.N` export name.
pub fn global_export_index(name: &str) -> Option<u32> {
    let n = name.strip_prefix(GLOBAL_EXPORT_PREFIX)?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || (n.len() > 1 && n.starts_with('0'))
    {
        return None;
    }
    n.parse().ok()
}

/// Where the unwind data structure and its buffer live in the stack memory
/// ([`STACK_MEMORY_EXPORT`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackLayout {
    /// Where the data structure (`[current, end]`, two little-endian `u32`)
    /// starts: the argument of `asyncify_start_unwind` and
    /// `asyncify_start_rewind`.
    pub data: u32,
    /// The first byte of the buffer (the initial `current`).
    pub start: u32,
    /// The end of the buffer (exclusive; the `end` field).
    pub end: u32,
}

impl StackLayout {
    /// The layout in a stack memory of `bytes` bytes (its current size).
    pub fn new(bytes: u64) -> StackLayout {
        let end = bytes.min(u64::from(u32::MAX) & !3) as u32;
        StackLayout { data: 0, start: 8, end: end.max(8) }
    }

    /// The buffer's capacity in bytes.
    pub fn capacity(&self) -> u32 {
        self.end - self.start
    }

    /// The data structure to write at [`StackLayout::data`] before an unwind.
    pub fn initial_data(&self) -> [u8; 8] {
        let mut d = [0; 8];
        d[..4].copy_from_slice(&self.start.to_le_bytes());
        d[4..].copy_from_slice(&self.end.to_le_bytes());
        d
    }

    /// How many bytes of the buffer an unwind used, from the data structure
    /// read back at [`StackLayout::data`] (`None` if it is not plausible).
    pub fn used(&self, data: [u8; 8]) -> Option<u32> {
        let current = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        (self.start..=self.end).contains(&current).then(|| current - self.start)
    }
}

/// Whether a trap of the guest was the checkpoint stack overflowing during an
/// unwind: it was an out-of-bounds memory access and [`GET_STATE`] (called
/// after the trap) returned [`STATE_UNWINDING`].
pub fn is_stack_overflow(out_of_bounds: bool, asyncify_state: i32) -> bool {
    out_of_bounds && asyncify_state == STATE_UNWINDING
}

/// The unwound call stack did not fit in the stack memory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "checkpoint failed: the job's call stack does not fit in the {capacity}-byte checkpoint \
     stack ({STACK_MEMORY_EXPORT}); recompile the job with a larger one (`andes compile \
     --stack-pages N`, now {pages}) and restart it from its last snapshot"
)]
pub struct StackOverflow {
    /// The buffer's capacity in bytes.
    pub capacity: u32,
    /// The stack memory's size in pages.
    pub pages: u64,
}

/// Which loops get a flag check at their header: where a job can yield.
///
/// A loop without a check runs until it ends, or until it calls a function
/// that reaches a check, before the job can yield; a checkpoint requested
/// meanwhile waits. Fewer checks cost less at run time, and a function with
/// no check and no call to one is left alone by the unwinding, which costs less
/// again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopChecks {
    /// Every loop. Any loop that runs long can yield.
    Every,
    /// Every loop except those of leaf functions (functions that call
    /// nothing): a leaf's loop always runs to its end before the job yields.
    NotInLeaves,
    /// In functions that call something, the outermost loops and the loops
    /// whose own body (outside the loops nested in it) makes a call. A loop
    /// nested in another that calls nothing runs to its end before the job
    /// yields, so a checkpoint waits for at most one iteration of the
    /// enclosing checked loop, unless such an inner loop itself runs without
    /// end.
    Outer,
}

/// How [`instrument`] instruments.
#[derive(Clone, Debug)]
pub struct Options {
    /// The size of the stack memory in 64 KiB pages (1 ..= [`MAX_STACK_PAGES`]).
    pub stack_pages: u32,
    /// Which loops get a flag check.
    pub checks: LoopChecks,
    /// Split `memory.copy` and `memory.fill` larger than 1 MiB into pieces
    /// with a flag check between them (see the crate documentation): a
    /// checkpoint then never waits for one long instruction. On by
    /// default: every copy becomes a call and every function that copies
    /// one that can yield, which costs little (gofmt, whose runtime copies
    /// everywhere, 1.67x to 1.73x of plain; journal/2026-11-26-benchmarks.md,
    /// "`--split-bulk` with the new unwinding") and bounds the
    /// pause of a program that grows buffers of hundreds of MB.
    pub split_bulk: bool,
    /// The fewest sites (calls that can reach a yield) an outermost loop
    /// holds for it to be emitted twice: a copy a rewind enters, with the
    /// branches that take it back to where it left, and a fast copy
    /// without them, which the loop goes on in (see the crate
    /// documentation). Default [`DEFAULT_FAST_COPY_SITES`]; `u32::MAX`
    /// never copies.
    pub fast_copy_sites: u32,
}

/// The default of [`Options::fast_copy_sites`]: an interpreter's dispatch
/// loop (SQLite's 477 sites, Lua's 153), not the loop of every function
/// that makes a few calls (a Go function's loop holds 14, as a median).
pub const DEFAULT_FAST_COPY_SITES: u32 = 64;

impl Default for Options {
    fn default() -> Self {
        Options {
            stack_pages: DEFAULT_STACK_PAGES,
            checks: LoopChecks::Outer,
            split_bulk: true,
            fast_copy_sites: DEFAULT_FAST_COPY_SITES,
        }
    }
}

/// Why a module cannot be instrumented.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// Not a valid WebAssembly module.
    #[error("not a valid WebAssembly module: {0}")]
    Invalid(String),
    /// The module was instrumented by `andes compile` already.
    #[error(
        "the module is already instrumented by andes compile (instrumentation version {0}); \
         instrumenting twice is not supported: compile the original module"
    )]
    AlreadyInstrumented(u32),
    /// The module already uses a name the instrumentation adds.
    #[error(
        "the module already has {0}, which andes compile adds: was it instrumented by \
         Asyncify or another tool? compile the original module"
    )]
    Conflict(String),
    /// No `_start` function.
    #[error(
        "the module exports no `_start` function of type () -> (): andes compile takes \
         wasip1 command modules (programs with a `main`), not libraries or reactors"
    )]
    NoStart,
    /// No linear memory.
    #[error(
        "the module has no linear memory: there is no state to checkpoint in it and \
         nowhere a wasip1 program could keep its data; is it a wasip1 program?"
    )]
    NoMemory,
    /// A feature the instrumentation cannot handle.
    #[error("the module uses {feature}, which andes compile cannot instrument: {why}")]
    Unsupported {
        /// The feature, in words.
        feature: String,
        /// Why, or where.
        why: String,
    },
    /// An option is out of range.
    #[error("invalid option: {0}")]
    Options(String),
    /// The result did not validate: a bug in andes compile.
    #[error("internal error: the instrumented module does not validate ({0}); please report it")]
    Output(String),
}

/// The features wasmtime 36 enables by default (with the host's cargo
/// features: no GC, no threads, no components).
pub fn wasmtime_features() -> wasmparser::WasmFeatures {
    use wasmparser::WasmFeatures as F;
    F::WASM2 | F::MULTI_MEMORY | F::RELAXED_SIMD | F::TAIL_CALL | F::EXTENDED_CONST | F::MEMORY64
}

/// Instruments `module` (see the crate documentation) and returns the new
/// module's bytes. Needs the `instrument` feature (on by default), which
/// is the instrumenter; without it the crate is the contract alone, what the
/// execute host needs to checkpoint an instrumented module.
#[cfg(feature = "instrument")]
pub fn instrument(module: &[u8], opts: &Options) -> Result<Vec<u8>, CompileError> {
    if opts.stack_pages == 0 || opts.stack_pages > MAX_STACK_PAGES {
        return Err(CompileError::Options(format!(
            "stack pages must be between 1 and {MAX_STACK_PAGES}, not {}",
            opts.stack_pages
        )));
    }
    let mut info = scan::scan(module)?;
    let (facts, calls) = graph::facts(module)?;
    let polled: Vec<bool> = info.functions.iter().map(|f| f.entry_loop && f.calls).collect();
    let polls = graph::recursion_polls(&facts, &calls, &polled);
    for (f, poll) in info.functions.iter_mut().zip(polls) {
        f.entry_poll = poll;
    }
    let pre = rewrite::pre(module, &info, opts)?;
    let unwound = unwind::transform(&pre, opts)?;
    let out = rewrite::post(&unwound, opts)?;
    wasmparser::Validator::new_with_features(wasmtime_features())
        .validate_all(&out)
        .map_err(|e| CompileError::Output(e.to_string()))?;
    Ok(out)
}

/// The instrumentation version recorded in a module's [`CUSTOM_SECTION`], if
/// it has one (a module not compiled by `andes compile` has none).
pub fn instrumentation_version(module: &[u8]) -> Option<u32> {
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        match payload.ok()? {
            wasmparser::Payload::CustomSection(c) if c.name() == CUSTOM_SECTION => {
                return <[u8; 4]>::try_from(c.data()).ok().map(u32::from_le_bytes);
            }
            _ => {}
        }
    }
    None
}

#[cfg(all(test, feature = "instrument"))]
mod tests;
