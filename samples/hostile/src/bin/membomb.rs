//! `membomb`: allocates memory in 1 MiB chunks, touching every page, until an
//! allocation fails.
//!
//! Attacks: memory. Linear memory grows until something refuses it.
//! The host must: cap linear memory at the job's request_memory (the store
//! limiter refuses `memory.grow`, or traps the job), and account ImageSize as
//! the linear memory's size. When the allocation fails the job frees what it
//! holds, prints `allocated N MiB before allocation failed` and exits with code
//! 0, so a test can compare N with the cap. (Without a cap, wasm32's own 4 GiB
//! limit ends it.)

use std::hint::black_box;

const MIB: usize = 1 << 20;
const PAGE: usize = 64 * 1024; // a Wasm page

fn main() {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk: Vec<u8> = Vec::new();
        // try_reserve reports failure instead of aborting; reserve room for the
        // hoard's next slot too, so that growing it cannot abort either.
        if chunk.try_reserve_exact(MIB).is_err() || hoard.try_reserve(1).is_err() {
            break;
        }
        chunk.resize(MIB, 0);
        // Touch one byte per page, through black_box, so the memory is really used.
        for i in (0..MIB).step_by(PAGE) {
            chunk[i] = black_box(1);
        }
        hoard.push(chunk);
    }
    let mib = hoard.len();
    drop(hoard); // give the memory back so that printing can allocate
    println!("allocated {mib} MiB before allocation failed");
}
