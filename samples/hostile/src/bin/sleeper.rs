//! `sleeper`: sleeps for an hour inside a host call.
//!
//! Attacks: kill latency. `thread::sleep` becomes WASI `poll_oneoff`, so the
//! job sits in the host, not in Wasm code, where epoch interruption alone cannot
//! reach it.
//! The host must: cancel the blocking call on a hard kill (drop the job's async
//! task) and end the job at once, and use no CPU meanwhile. It prints
//! `sleeping` first, so a test knows it got there.

use std::io::Write;
use std::time::Duration;

fn main() {
    println!("sleeping");
    let _ = std::io::stdout().flush();
    std::thread::sleep(Duration::from_secs(3600));
    println!("woke up"); // only after an hour
}
