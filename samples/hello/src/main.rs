//! `hello`: the smallest useful andes job.
//!
//! It shows what a job sees of the world through WASI: its arguments, the
//! environment its submit file gave it, standard input and output, and the files
//! of its own sandbox directory. It needs nothing from andes beyond WASI, so it
//! also runs under a plain `wasmtime run`.
//!
//! What it does, in order (tests rely on this exact output):
//!
//! 1. prints `argv[i] = ...` for each argument (argv[0] is the executable's name);
//! 2. prints `GREETING = ...`, the environment variable GREETING or `hello`;
//! 3. copies standard input to standard output, each line upper-cased and
//!    prefixed with `stdin: `;
//! 4. writes `hello.out` in its working directory: `<greeting>, world`, then the
//!    number of arguments and of input lines;
//! 5. prints `wrote hello.out` and exits with code 0.

use std::env;
use std::fs;
use std::io::{self, BufRead, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Standard error comes back to the submitter as the job's error file.
            eprintln!("hello: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> io::Result<()> {
    let mut out = io::stdout().lock();

    // 1. Arguments: the submit file's `arguments`, after the module's name.
    let args: Vec<String> = env::args().collect();
    for (i, arg) in args.iter().enumerate() {
        writeln!(out, "argv[{i}] = {arg}")?;
    }

    // 2. Environment: a job sees only what its submit file's `environment` sets,
    //    never the execute host's own variables.
    let greeting = env::var("GREETING").unwrap_or_else(|_| "hello".to_owned());
    writeln!(out, "GREETING = {greeting}")?;

    // 3. Standard input: the submit file's `input` file (empty if none).
    let mut lines = 0usize;
    for line in io::stdin().lock().lines() {
        writeln!(out, "stdin: {}", line?.to_uppercase())?;
        lines += 1;
    }

    // 4. An output file. Relative paths are inside the job's sandbox directory;
    //    files it leaves there come back as the job's output.
    let report = format!("{greeting}, world\nargs: {}\nstdin lines: {lines}\n", args.len());
    fs::write("hello.out", report)?;

    // 5. Done.
    writeln!(out, "wrote hello.out")?;
    out.flush()
}
