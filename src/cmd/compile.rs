//! `andes compile`: instrument a wasip1 module for transparent checkpoints
//! (the counterpart of condor_compile).

use std::path::PathBuf;
use std::process::ExitCode;

use andes_compile::{DEFAULT_STACK_PAGES, Options};
use anyhow::{Context, Result, anyhow};
use clap::Args;

use super::snapshot::size;

/// Arguments of `andes compile`.
#[derive(Args, Debug)]
pub struct CompileArgs {
    /// The wasip1 module to instrument.
    input: PathBuf,
    /// Where to write the instrumented module.
    #[arg(short = 'o', long = "output", value_name = "OUT.wasm")]
    output: PathBuf,
    /// The checkpoint stack's size in 64 KiB pages: the largest call stack a
    /// checkpoint can hold.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_STACK_PAGES)]
    stack_pages: u32,
    /// Leave memory.copy and memory.fill whole. By default those larger than
    /// 1 MiB run in pieces with a yield point between them, so that a
    /// checkpoint never waits for one long copy (a program that grows
    /// buffers of hundreds of MB), at a small cost to programs that copy
    /// often.
    #[arg(long)]
    no_split_bulk: bool,
}

/// Runs `andes compile`.
pub fn run(a: CompileArgs) -> Result<ExitCode> {
    let input =
        std::fs::read(&a.input).with_context(|| format!("reading {}", a.input.display()))?;
    let opts =
        Options { stack_pages: a.stack_pages, split_bulk: !a.no_split_bulk, ..Options::default() };
    let out = andes_compile::instrument(&input, &opts)
        .map_err(|e| anyhow!("{}: {e}", a.input.display()))?;
    std::fs::write(&a.output, &out).with_context(|| format!("writing {}", a.output.display()))?;
    outln!("input         {} ({})", a.input.display(), size(input.len() as u64));
    outln!("output        {} ({})", a.output.display(), size(out.len() as u64));
    outln!("growth        {:.2}x", out.len() as f64 / input.len().max(1) as f64);
    outln!("instrumentation version {}", andes_compile::INSTRUMENTATION_VERSION);
    Ok(ExitCode::SUCCESS)
}
