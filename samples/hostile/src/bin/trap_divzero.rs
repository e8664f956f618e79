//! `trap_divzero`: executes a real Wasm `i32.div_u` with a zero divisor.
//!
//! Attacks: nothing; it is a trap of another kind than `unreachable`. The host
//! must: report the job as ended by an "integer divide by zero" trap.
//!
//! Rust checks every integer division and panics on a zero divisor, and a panic
//! ends in `unreachable`, not in a division trap. Stable Rust has no unchecked
//! division, so this job tells the compiler the divisor is not zero
//! (`assert_unchecked`), which removes the check, and then divides by an opaque
//! zero. That is undefined behaviour in Rust on purpose: what the compiler
//! emits for it is a bare `i32.div_u`, which is exactly the instruction wanted
//! (checked with `wasm-tools print`: no branch to `unreachable` before it).

use std::hint::{assert_unchecked, black_box};

fn main() {
    println!("about to divide by zero");
    let dividend: u32 = black_box(42);
    let divisor: u32 = black_box(0);
    // SAFETY: none; the divisor is zero on purpose, to make the engine trap.
    let quotient = unsafe {
        assert_unchecked(divisor != 0);
        dividend / divisor
    };
    // Never reached.
    println!("quotient {}", black_box(quotient));
}
