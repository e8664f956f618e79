//! Binaryen's Asyncify pass and optimiser, through the `wasm-opt` crate.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use wasm_opt::{Feature, OptimizationOptions, Pass};

use crate::{CompileError, Optimize, Options, YIELD_FIELD, YIELD_MODULE};

/// Binaryen keeps global state (its thread pool, interned names): one run
/// at a time in a process.
static BINARYEN: Mutex<()> = Mutex::new(());

/// A directory of its own under the system's temporary directory, removed
/// when dropped (the `wasm-opt` crate reads and writes files).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, CompileError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        for _ in 0..100 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let dir = base.join(format!("andes-compile-{}-{n}-{nanos}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(TempDir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(CompileError::Binaryen(format!(
                        "creating a temporary directory under {}: {e}",
                        base.display()
                    )));
                }
            }
        }
        Err(CompileError::Binaryen(format!(
            "no free temporary directory name under {}",
            base.display()
        )))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The features Binaryen may read and emit: those wasmtime 36 enables by
/// default, less tail calls (Asyncify cannot handle them).
const FEATURES: &[Feature] = &[
    Feature::MutableGlobals,
    Feature::TruncSat,
    Feature::SignExt,
    Feature::BulkMemory,
    Feature::Simd,
    Feature::RelaxedSimd,
    Feature::ReferenceTypes,
    Feature::Multivalue,
    Feature::MultiMemory,
    Feature::Memory64,
    Feature::ExtendedConst,
];

fn base(level: u32) -> OptimizationOptions {
    let mut o = match level {
        0 => OptimizationOptions::new_opt_level_0(),
        1 => OptimizationOptions::new_opt_level_1(),
        2 => OptimizationOptions::new_opt_level_2(),
        3 => OptimizationOptions::new_opt_level_3(),
        _ => OptimizationOptions::new_opt_level_4(),
    };
    o.mvp_features_only();
    for f in FEATURES {
        o.enable_feature(*f);
    }
    // Keep the name section: wasmtime's backtraces use it.
    o.debug_info(true);
    o
}

fn run(o: &OptimizationOptions, input: &Path, output: &Path) -> Result<(), CompileError> {
    o.run(input, output).map_err(|e| {
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            src = s.source();
        }
        CompileError::Binaryen(msg)
    })
}

/// Runs Asyncify (and the optimiser, as `opts` says) on `module`.
pub(crate) fn asyncify(module: &[u8], opts: &Options) -> Result<Vec<u8>, CompileError> {
    let dir = TempDir::new()?;
    let (input, middle, output) = (dir.path("in.wasm"), dir.path("mid.wasm"), dir.path("out.wasm"));
    let io = |what: &str, p: &Path, e: std::io::Error| {
        CompileError::Binaryen(format!("{what} {}: {e}", p.display()))
    };
    std::fs::write(&input, module).map_err(|e| io("writing", &input, e))?;

    let (asyncify_level, after) = match opts.optimize {
        Optimize::None => (0, None),
        Optimize::Asyncify => (1, None),
        Optimize::O1 => (1, Some(1)),
        Optimize::O2 => (2, Some(2)),
        Optimize::O3 => (3, Some(3)),
        Optimize::O4 => (4, Some(4)),
    };
    let mut a = base(asyncify_level);
    a.add_default_passes(false);
    a.add_pass(Pass::Asyncify);
    a.set_pass_arg("asyncify-imports", &format!("{YIELD_MODULE}.{YIELD_FIELD}"));
    a.set_pass_arg("asyncify-in-secondary-memory", "1");
    a.set_pass_arg("asyncify-secondary-memory-size", &opts.stack_pages.to_string());

    let _guard = BINARYEN.lock().unwrap_or_else(|p| p.into_inner());
    match after {
        None => run(&a, &input, &output)?,
        Some(level) => {
            run(&a, &input, &middle)?;
            run(&base(level), &middle, &output)?;
        }
    }
    std::fs::read(&output).map_err(|e| io("reading", &output, e))
}
