//! `coop`: a long computation that checkpoints cooperatively, through the
//! guest SDK's `checkpoint` interface: no files, no instrumentation.
//!
//! Usage: `coop [TERMS] [PAD_MIB]`. It sums 1/k² for k = 1..=TERMS (default
//! 2_000_000_000) in chunks of one million terms. Between chunks:
//!
//! - when the host asks for a checkpoint (`checkpoint::requested()`, a
//!   periodic checkpoint or the first step of a vacate), it saves where it
//!   stands (`checkpoint::save`) and goes on;
//! - when the host asks it to vacate, it saves and exits with code **85**
//!   (HTCondor's `checkpoint_exit_code` convention), so it is run again.
//!
//! At start it resumes from `checkpoint::load()` when there is a saved state
//! (and says so on standard error). The sum is computed in a fixed order and
//! saved with every bit, so standard output is the same however many times
//! the job was interrupted. A bad argument exits with code 2.
//!
//! With PAD_MIB, each saved state carries that many MiB more of bytes derived
//! from where it stands, checked when it is loaded: a state that comes back
//! other than it was saved exits with code 3 (for the tests of big states).

use andes_guest::{checkpoint, log};
use std::process::ExitCode;

const DEFAULT_TERMS: u64 = 2_000_000_000;
const CHUNK: u64 = 1_000_000;
/// The exit code of a job that saved its state and wants to be run again.
const VACATED_EXIT_CODE: u8 = 85;

/// Where the computation stands: (terms, terms done, sum).
fn encode(terms: u64, done: u64, sum: f64) -> [u8; 24] {
    let mut b = [0u8; 24];
    b[..8].copy_from_slice(&terms.to_le_bytes());
    b[8..16].copy_from_slice(&done.to_le_bytes());
    b[16..].copy_from_slice(&sum.to_bits().to_le_bytes());
    b
}

/// The padding of a state saved at `done`: `len` bytes from a simple generator.
fn padding(done: u64, len: usize) -> Vec<u8> {
    let mut x = done ^ 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn decode(b: &[u8]) -> Option<(u64, u64, f64)> {
    if b.len() != 24 {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
    Some((word(0), word(8), f64::from_bits(word(16))))
}

fn main() -> ExitCode {
    let terms = match std::env::args().nth(1) {
        None => DEFAULT_TERMS,
        Some(a) => match a.replace('_', "").parse::<u64>() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("coop: TERMS must be a whole number, not `{a}`: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let pad = match std::env::args().nth(2).map(|a| a.parse::<usize>()) {
        None => 0,
        Some(Ok(m)) if m <= 256 => m << 20,
        Some(_) => {
            eprintln!("coop: PAD_MIB must be a whole number up to 256");
            return ExitCode::from(2);
        }
    };
    let loaded = checkpoint::load();
    let state = loaded.as_deref().map(|b| b.split_at(b.len().min(24)));
    if let Some((head, tail)) = state
        && let Some((_, d, _)) = decode(head)
        && tail != padding(d, tail.len()).as_slice()
    {
        eprintln!("coop: the saved state came back damaged");
        return ExitCode::from(3);
    }
    let (mut done, mut sum) = match state.and_then(|(head, _)| decode(head)) {
        Some((t, d, s)) if t == terms && d <= terms => {
            eprintln!("coop: resuming at term {}", d + 1);
            log::info(&format!("resuming from a saved state at term {}", d + 1));
            (d, s)
        }
        _ => (0, 0.0),
    };
    while done < terms {
        let end = (done + CHUNK).min(terms);
        for k in done + 1..=end {
            let k = k as f64;
            sum += 1.0 / (k * k);
        }
        done = end;
        let vacate = andes_guest::vacate_requested();
        if (checkpoint::requested() || vacate)
            && let Err(e) =
                checkpoint::save(&[&encode(terms, done, sum)[..], &padding(done, pad)].concat())
        {
            eprintln!("coop: checkpoint not saved: {e}");
        }
        if vacate {
            eprintln!("coop: vacated after {done} of {terms} terms");
            return ExitCode::from(VACATED_EXIT_CODE);
        }
    }
    println!("sum of 1/k^2 for k = 1..={terms}: {sum:?}");
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips() {
        assert_eq!(decode(&encode(10, 4, 1.0 / 3.0)), Some((10, 4, 1.0 / 3.0)));
        assert_eq!(decode(b"short"), None);
    }
}
