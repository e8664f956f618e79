//! `cargo xtask`: the project's own commands.
//!
//! - `cargo xtask test`: the whole test suite (what CI runs).
//! - `cargo xtask bench`: the criterion benchmarks.

use std::process::{Command, ExitCode};

fn cargo(args: &[&str]) -> bool {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("xtask: cargo {}", args.join(" "));
    Command::new(cargo).args(args).status().map(|s| s.success()).unwrap_or(false)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ok = match args.first().map(String::as_str) {
        Some("test") => {
            cargo(&["test", "--workspace", "--all-targets"])
                && cargo(&["test", "--workspace", "--doc"])
        }
        Some("bench") => {
            let mut a = vec!["bench", "--workspace"];
            a.extend(args[1..].iter().map(String::as_str));
            cargo(&a)
        }
        Some("demo") => {
            eprintln!(
                "xtask: the demo (a personal pool running sample jobs) arrives with the pool \
                 (collector, negotiator, shadow and starter); it is not built yet"
            );
            false
        }
        _ => {
            eprintln!("usage: cargo xtask <test|bench|demo>");
            false
        }
    };
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
