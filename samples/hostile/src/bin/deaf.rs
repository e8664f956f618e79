//! `deaf`: asks once whether it is being vacated, ignores the answer, then
//! spins forever and never asks again.
//!
//! Attacks: the vacate grace. The job imports the guest SDK's vacate call, so
//! the host must give it its grace (MACHINE_MAX_VACATE_TIME) as it would any
//! job that can hear a soft kill; it must then hard-kill it when the grace
//! runs out, never let it run on.

use std::hint::black_box;

fn main() {
    // Asked, and ignored.
    black_box(andes_guest::vacate_requested());
    let mut n: u64 = 0;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}
