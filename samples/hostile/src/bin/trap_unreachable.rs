//! `trap_unreachable`: executes Wasm's `unreachable` instruction.
//!
//! Attacks: nothing; it is the simplest trap. The host must: report the job as
//! ended by a trap (with the trap's message) rather than an exit code, and not
//! mistake it for a crash of its own.

fn main() {
    println!("about to trap");
    #[cfg(target_arch = "wasm32")]
    core::arch::wasm32::unreachable();
    #[cfg(not(target_arch = "wasm32"))]
    std::process::abort();
}
