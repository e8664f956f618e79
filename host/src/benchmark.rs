//! The startd's benchmarks (`Mips`, `KFlops`), measured on the engine jobs
//! run on: two small Wasm loops, run by the starter like any job.
//!
//! * `Mips`: millions of Wasm instructions per second of CPU time. The count
//!   is the fuel the loop consumed (wasmtime charges one unit per executed
//!   instruction, control markers such as `block`, `loop` and `end` aside),
//!   so it is a real count, not an estimate.
//! * `KFlops`: thousands of double-precision floating-point operations (a
//!   multiply and an add per iteration, dependent on each other) per second
//!   of CPU time.
//!
//! Both are per CPU, as HTCondor's are.

use std::path::Path;
use std::sync::Arc;

use classad::ClassAd;

use andes_starter::control::{Clock, Control};
use andes_starter::engine::Host;
use andes_starter::starter::{Ending, JobSpec, Limits};

/// Iterations of the integer loop (12 instructions each).
pub const INT_ITERATIONS: u32 = 20_000_000;
/// Iterations of the floating-point loop (2 operations each).
pub const FLOAT_ITERATIONS: u32 = 10_000_000;

/// A linear congruential generator stepped `INT_ITERATIONS` times:
///
/// ```text
/// (module
///   (memory (export "memory") 1)
///   (func (export "_start")
///     (local $i i32) (local $x i32)
///     (local.set $i (i32.const INT_ITERATIONS))
///     (loop $l
///       (local.set $x (i32.add (i32.mul (local.get $x) (i32.const 1664525)) (i32.const 1013904223)))
///       (local.set $i (i32.sub (local.get $i) (i32.const 1)))
///       (br_if $l (local.get $i)))
///     (i32.store (i32.const 0) (local.get $x))))
/// ```
fn int_module() -> Vec<u8> {
    use wasm_encoder::Instruction as I;
    let step = [
        I::LocalGet(1),
        I::I32Const(1664525),
        I::I32Mul,
        I::I32Const(1013904223),
        I::I32Add,
        I::LocalSet(1),
    ];
    loop_module(wasm_encoder::ValType::I32, &[], &step, INT_ITERATIONS, I::I32Store(store_at(2)))
}

/// `x = x * 0.999999 + 0.5`, `FLOAT_ITERATIONS` times:
///
/// ```text
/// (module
///   (memory (export "memory") 1)
///   (func (export "_start")
///     (local $i i32) (local $x f64)
///     (local.set $i (i32.const FLOAT_ITERATIONS))
///     (local.set $x (f64.const 1))
///     (loop $l
///       (local.set $x (f64.add (f64.mul (local.get $x) (f64.const 0.999999)) (f64.const 0.5)))
///       (local.set $i (i32.sub (local.get $i) (i32.const 1)))
///       (br_if $l (local.get $i)))
///     (f64.store (i32.const 0) (local.get $x))))
/// ```
fn float_module() -> Vec<u8> {
    use wasm_encoder::Instruction as I;
    let start = [I::F64Const(1.0.into()), I::LocalSet(1)];
    let step = [
        I::LocalGet(1),
        I::F64Const(0.999999.into()),
        I::F64Mul,
        I::F64Const(0.5.into()),
        I::F64Add,
        I::LocalSet(1),
    ];
    loop_module(
        wasm_encoder::ValType::F64,
        &start,
        &step,
        FLOAT_ITERATIONS,
        I::F64Store(store_at(3)),
    )
}

/// Where both loops leave their result: address 0 of memory 0, naturally
/// aligned (`align` is the log2 of the value's size in bytes).
fn store_at(align: u32) -> wasm_encoder::MemArg {
    wasm_encoder::MemArg { offset: 0, align, memory_index: 0 }
}

/// A module exporting one page of memory and `_start`: locals `$i` (i32)
/// and `$x` (of type `x`); `$i = iterations`, then `start`, then a loop of
/// `step` and `$i -= 1` that goes round while `$i` is not zero, then `$x`
/// stored by `store` at address 0 (so that the loop's work is kept).
fn loop_module(
    x: wasm_encoder::ValType,
    start: &[wasm_encoder::Instruction<'_>],
    step: &[wasm_encoder::Instruction<'_>],
    iterations: u32,
    store: wasm_encoder::Instruction<'_>,
) -> Vec<u8> {
    use wasm_encoder::{
        BlockType, CodeSection, ExportKind, ExportSection, Function, FunctionSection,
        Instruction as I, MemorySection, MemoryType, Module, TypeSection, ValType,
    };
    let mut types = TypeSection::new();
    types.ty().function([], []);
    let mut functions = FunctionSection::new();
    functions.function(0);
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("_start", ExportKind::Func, 0);
    let mut f = Function::new_with_locals_types([ValType::I32, x]);
    f.instruction(&I::I32Const(iterations as i32));
    f.instruction(&I::LocalSet(0));
    for i in start {
        f.instruction(i);
    }
    f.instruction(&I::Loop(BlockType::Empty));
    for i in step {
        f.instruction(i);
    }
    for i in [I::LocalGet(0), I::I32Const(1), I::I32Sub, I::LocalSet(0), I::LocalGet(0)] {
        f.instruction(&i);
    }
    f.instruction(&I::BrIf(0));
    f.instruction(&I::End);
    f.instruction(&I::I32Const(0));
    f.instruction(&I::LocalGet(1));
    f.instruction(&store);
    f.instruction(&I::End);
    let mut code = CodeSection::new();
    code.function(&f);
    let mut module = Module::new();
    module.section(&types).section(&functions).section(&memories).section(&exports).section(&code);
    module.finish()
}

/// The benchmarks' results.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Results {
    /// `Mips`.
    pub mips: i64,
    /// `KFlops`.
    pub kflops: i64,
    /// Wasm instructions the integer loop executed (its fuel).
    pub instructions: u64,
    /// CPU seconds of the integer loop.
    pub int_cpu_secs: f64,
    /// CPU seconds of the floating-point loop.
    pub float_cpu_secs: f64,
}

async fn run_one(
    host: &Host,
    module: Vec<u8>,
    sandbox: &Path,
    clock: Arc<dyn Clock>,
) -> Result<(u64, f64), String> {
    let spec = JobSpec {
        module: module.into(),
        ad: ClassAd::new(),
        sandbox: sandbox.to_path_buf(),
        limits: Limits::default(),
        inherit_stdio: false,
        digest: None,
        saved_state: None,
        transparent: None,
        metered: false,
        sandbox_empty: false,
    };
    let r = host.run(spec, Control::new(), clock).await;
    match r.ending {
        Ending::Exited(0) => Ok((r.usage.fuel_consumed, r.usage.remote_user_cpu)),
        other => Err(format!("the benchmark ended with {other:?}")),
    }
}

/// Runs both loops in `sandbox` (an existing, empty directory).
pub async fn run(host: &Host, sandbox: &Path, clock: Arc<dyn Clock>) -> Result<Results, String> {
    let (instructions, int_cpu) = run_one(host, int_module(), sandbox, clock.clone()).await?;
    let (_, float_cpu) = run_one(host, float_module(), sandbox, clock).await?;
    // A CPU time too small to measure is taken as one microsecond.
    let per_sec = |n: f64, secs: f64| n / secs.max(1e-6);
    let mips = (per_sec(instructions as f64, int_cpu) / 1e6).round() as i64;
    let kflops = (per_sec(2.0 * FLOAT_ITERATIONS as f64, float_cpu) / 1e3).round() as i64;
    Ok(Results { mips, kflops, instructions, int_cpu_secs: int_cpu, float_cpu_secs: float_cpu })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sections of `module` but its custom ones (the names a text
    /// module's `$names` give).
    fn sections(module: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        for payload in wasmparser::Parser::new(0).parse_all(module) {
            if let Some((id, range)) = payload.unwrap().as_section()
                && id != 0
            {
                out.push((id, module[range].to_vec()));
            }
        }
        out
    }

    /// Each module is the text its documentation shows, assembled.
    #[test]
    fn the_benchmark_modules_are_the_loops_their_documentation_shows() {
        for (made, text, name, n) in [
            (int_module(), include_doc(0), "INT_ITERATIONS", INT_ITERATIONS),
            (float_module(), include_doc(1), "FLOAT_ITERATIONS", FLOAT_ITERATIONS),
        ] {
            let text = text.replace(name, &n.to_string());
            let assembled = wat::parse_str(&text).unwrap();
            wasmparser::validate(&made).unwrap();
            assert_eq!(sections(&made), sections(&assembled), "{text}");
        }
    }

    /// The `text` block of the documentation of the `n`th module function.
    fn include_doc(n: usize) -> String {
        let src = include_str!("benchmark.rs");
        let block = src.split("/// ```text\n").nth(n + 1).unwrap();
        let block = block.split("/// ```\n").next().unwrap();
        block
            .lines()
            .map(|l| l.trim_start_matches("///").trim_start_matches(' '))
            .collect::<Vec<_>>()
            .join("\n")
    }
}
