//! `sleeper [SECONDS]`: sleeps inside a host call, for an hour unless
//! SECONDS says otherwise, then prints `woke up` and exits 0.
//!
//! Attacks: kill latency. `thread::sleep` becomes WASI `poll_oneoff`, so the
//! job sits in the host, not in Wasm code, where epoch interruption alone cannot
//! reach it.
//! The host must: cancel the blocking call on a hard kill (drop the job's async
//! task) and end the job at once, and use no CPU meanwhile. It prints
//! `sleeping` first, so a test knows it got there. With SECONDS, it is also a
//! job that runs a few seconds without using the CPU (a bad argument exits
//! with code 2).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let secs = match std::env::args().nth(1) {
        None => 3600,
        Some(a) => match a.parse::<u64>() {
            Ok(s) => s,
            Err(_) => {
                eprintln!("usage: sleeper [SECONDS]");
                return ExitCode::from(2);
            }
        },
    };
    println!("sleeping");
    let _ = std::io::stdout().flush();
    std::thread::sleep(Duration::from_secs(secs));
    println!("woke up");
    ExitCode::SUCCESS
}
