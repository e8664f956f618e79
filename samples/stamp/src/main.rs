//! Prints the instant it began, in Unix milliseconds by the guest's wall
//! clock (WASI `clock_time_get(realtime)`, the host's clock): `started MS`.
//! Deferred jobs use it to show when they really started.

use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    println!("started {now}");
}
