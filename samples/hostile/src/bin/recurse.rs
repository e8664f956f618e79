//! `recurse`: unbounded, non-tail recursion.
//!
//! Attacks: the stack. Each call keeps a frame alive, on the engine's native
//! stack and on the shadow stack in linear memory.
//! The host must: turn the overflow into a trap, either wasmtime's "call stack
//! exhausted" or an out-of-bounds access when the shadow stack runs off the
//! bottom of linear memory, whichever comes first, and report the job as having
//! failed with a trap, not crash or hang.

use std::hint::black_box;

#[inline(never)]
fn descend(depth: u64) -> u64 {
    // A frame in linear memory that the optimizer must keep.
    let frame = black_box([depth; 4]);
    // Never true; keeps the compiler from calling the recursion unconditional.
    if frame[0] == u64::MAX {
        return 0;
    }
    // Using the result after the call makes it a non-tail call.
    let below = descend(black_box(depth + 1));
    black_box(below).wrapping_add(frame[1])
}

fn main() {
    println!("descending");
    let total = descend(0);
    // Never reached.
    println!("returned {total}");
}
