//! `andes`: the command users run. Each subcommand lives in `cmd/`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// andes: high-throughput computing for WebAssembly jobs.
#[derive(Parser)]
#[command(name = "andes", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate ClassAd expressions and analyse matches.
    #[command(subcommand)]
    Classad(cmd::classad::ClassadCmd),
    /// Run a Wasm module locally in the execute host's sandbox and say how it
    /// ended, in HTCondor's terms (try a job before submitting it).
    Run(cmd::run::RunArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Classad(c) => cmd::classad::run(c),
        Command::Run(a) => cmd::run::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("andes: {e:#}");
            ExitCode::from(2)
        }
    }
}
