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

/// A linear congruential generator stepped `INT_ITERATIONS` times.
fn int_module() -> String {
    format!(
        r#"(module
  (memory (export "memory") 1)
  (func (export "_start")
    (local $i i32) (local $x i32)
    (local.set $i (i32.const {INT_ITERATIONS}))
    (loop $l
      (local.set $x (i32.add (i32.mul (local.get $x) (i32.const 1664525)) (i32.const 1013904223)))
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (br_if $l (local.get $i)))
    (i32.store (i32.const 0) (local.get $x))))"#
    )
}

/// `x = x * 0.999999 + 0.5`, `FLOAT_ITERATIONS` times.
fn float_module() -> String {
    format!(
        r#"(module
  (memory (export "memory") 1)
  (func (export "_start")
    (local $i i32) (local $x f64)
    (local.set $i (i32.const {FLOAT_ITERATIONS}))
    (local.set $x (f64.const 1))
    (loop $l
      (local.set $x (f64.add (f64.mul (local.get $x) (f64.const 0.999999)) (f64.const 0.5)))
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (br_if $l (local.get $i)))
    (f64.store (i32.const 0) (local.get $x))))"#
    )
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
    wat: &str,
    sandbox: &Path,
    clock: Arc<dyn Clock>,
) -> Result<(u64, f64), String> {
    // The engine compiles WAT text as it does binary modules.
    let spec = JobSpec {
        module: wat.as_bytes().into(),
        ad: ClassAd::new(),
        sandbox: sandbox.to_path_buf(),
        limits: Limits::default(),
        inherit_stdio: false,
        digest: None,
        saved_state: None,
        transparent: None,
        metered: false,
    };
    let r = host.run(spec, Control::new(), clock).await;
    match r.ending {
        Ending::Exited(0) => Ok((r.usage.fuel_consumed, r.usage.remote_user_cpu)),
        other => Err(format!("the benchmark ended with {other:?}")),
    }
}

/// Runs both loops in `sandbox` (an existing, empty directory).
pub async fn run(host: &Host, sandbox: &Path, clock: Arc<dyn Clock>) -> Result<Results, String> {
    let (instructions, int_cpu) = run_one(host, &int_module(), sandbox, clock.clone()).await?;
    let (_, float_cpu) = run_one(host, &float_module(), sandbox, clock).await?;
    // A CPU time too small to measure is taken as one microsecond.
    let per_sec = |n: f64, secs: f64| n / secs.max(1e-6);
    let mips = (per_sec(instructions as f64, int_cpu) / 1e6).round() as i64;
    let kflops = (per_sec(2.0 * FLOAT_ITERATIONS as f64, float_cpu) / 1e3).round() as i64;
    Ok(Results { mips, kflops, instructions, int_cpu_secs: int_cpu, float_cpu_secs: float_cpu })
}
