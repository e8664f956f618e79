//! `digest`: a file-processing job, the kind a checkpoint must not disturb.
//!
//! Usage: `digest INPUT OUTPUT [ROUNDS] [KEEP_MIB]`. Reads INPUT line by line
//! through one open file, hashes each line ROUNDS times (default 20000;
//! FNV-1a, chained), and writes `LINE_NUMBER HASH` lines to OUTPUT through
//! another open file, flushed line by line. Every 100 lines it prints a
//! running checksum on stdout. With KEEP_MIB it also keeps that many MiB of
//! memory filled with data derived from the hashes, allocated a little at a
//! time as it goes, so its memory grows while it runs. At the end it prints
//! the number of lines and a final checksum, which covers that memory too.
//!
//! Its output depends only on its input: an interrupted and resumed run
//! must print and write exactly what an uninterrupted one does.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::ExitCode;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: digest INPUT OUTPUT [ROUNDS] [KEEP_MIB]");
        return ExitCode::from(2);
    }
    let rounds: u64 = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(20_000);
    let keep_mib: usize = args.get(4).and_then(|r| r.parse().ok()).unwrap_or(0);
    let input = match File::open(&args[1]) {
        Ok(f) => BufReader::with_capacity(256, f),
        Err(e) => {
            eprintln!("digest: cannot open {}: {e}", args[1]);
            return ExitCode::from(1);
        }
    };
    let mut output = match File::create(&args[2]) {
        Ok(f) => BufWriter::new(f),
        Err(e) => {
            eprintln!("digest: cannot create {}: {e}", args[2]);
            return ExitCode::from(1);
        }
    };
    let mut kept: Vec<Vec<u64>> = Vec::new();
    let mut kept_words = 0usize;
    let keep_words = keep_mib * (1 << 20) / 8;
    let mut checksum = 0xcbf2_9ce4_8422_2325u64;
    let mut lines = 0u64;
    for line in input.lines() {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                eprintln!("digest: reading {}: {e}", args[1]);
                return ExitCode::from(1);
            }
        };
        lines += 1;
        let mut h = fnv(0xcbf2_9ce4_8422_2325, line.as_bytes());
        for round in 0..rounds {
            h = fnv(h, &round.to_le_bytes());
        }
        checksum = fnv(checksum, &h.to_le_bytes());
        if kept_words < keep_words {
            let n = (keep_words - kept_words).min(16 * 1024);
            kept.push((0..n as u64).map(|i| h.rotate_left((i % 64) as u32) ^ i).collect());
            kept_words += n;
        }
        if writeln!(output, "{lines} {h:016x}").and_then(|_| output.flush()).is_err() {
            eprintln!("digest: writing {}", args[2]);
            return ExitCode::from(1);
        }
        if lines.is_multiple_of(100) {
            println!("{lines} lines, checksum {checksum:016x}");
        }
    }
    for chunk in &kept {
        for w in chunk {
            checksum = fnv(checksum, &w.to_le_bytes());
        }
    }
    println!("done: {lines} lines, {kept_words} words kept, checksum {checksum:016x}");
    ExitCode::SUCCESS
}
