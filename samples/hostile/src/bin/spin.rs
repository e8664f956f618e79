//! `spin`: an infinite loop that makes no calls at all.
//!
//! Attacks: CPU time. The job never enters the host, so nothing but the engine
//! itself can stop it.
//! The host must: suspend it (fuel or epoch yields stop polling it), and on a
//! hard kill interrupt it at once (epoch interruption traps it); it must never
//! end on its own.

use std::hint::black_box;

fn main() {
    let mut n: u64 = 0;
    loop {
        // black_box keeps the optimizer from proving the loop does nothing.
        n = black_box(n.wrapping_add(1));
    }
}
