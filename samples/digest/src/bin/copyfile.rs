//! `copyfile`: copies a file, for the tests of big input and output files.
//!
//! Usage: `copyfile INPUT OUTPUT [TIMES]`. Writes INPUT's bytes to OUTPUT
//! TIMES times over (default 1), through a small buffer, and prints how many
//! bytes it wrote.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: copyfile INPUT OUTPUT [TIMES]");
        return ExitCode::from(2);
    }
    let times: u32 = args.get(3).and_then(|t| t.parse().ok()).unwrap_or(1);
    let run = || -> std::io::Result<u64> {
        let mut input = File::open(&args[1])?;
        let mut output = File::create(&args[2])?;
        let mut buf = vec![0u8; 64 << 10];
        let mut total = 0u64;
        for _ in 0..times {
            input.seek(SeekFrom::Start(0))?;
            loop {
                let n = input.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                output.write_all(&buf[..n])?;
                total += n as u64;
            }
        }
        output.flush()?;
        Ok(total)
    };
    match run() {
        Ok(n) => {
            println!("{n}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("copyfile: {e}");
            ExitCode::from(1)
        }
    }
}
