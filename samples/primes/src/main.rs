//! `primes`: counts the primes below N, reporting its progress to andes.
//!
//! Usage: `primes [N]`, N defaulting to 2000000 (`_` separators allowed, as in
//! `10_000_000`). Prints `primes below N: COUNT` and exits with code 0; with a
//! bad argument it prints why and exits with code 2.
//!
//! It runs a segmented sieve of Eratosthenes: first the primes up to sqrt(N),
//! then the range [0, N) in segments of 32 Ki numbers, crossing off multiples of those
//! primes in each. Working in segments keeps memory small and makes the work
//! linear in N, so the job sets its `Progress` attribute (through the guest SDK)
//! each time another tenth of the range is done. The output is deterministic,
//! which makes the job a compute benchmark as well: time it for a large N.

use andes_guest::attr;
use std::process::ExitCode;

const DEFAULT_N: u64 = 2_000_000;
const SEGMENT: u64 = 32 * 1024;

fn main() -> ExitCode {
    let n = match std::env::args().nth(1) {
        None => DEFAULT_N,
        Some(arg) => match arg.replace('_', "").parse::<u64>() {
            Ok(n) => n,
            Err(e) => {
                eprintln!("primes: N must be a whole number, not `{arg}`: {e}");
                eprintln!("usage: primes [N]   (default {DEFAULT_N})");
                return ExitCode::from(2);
            }
        },
    };

    let mut progress = Progress::default();
    let count = count_primes_below(n, |fraction| progress.report(fraction));
    progress.report(1.0);
    println!("primes below {n}: {count}");
    ExitCode::SUCCESS
}

/// The number of primes p with p < n. Calls `on_progress` with the fraction of
/// the range done after each segment.
fn count_primes_below(n: u64, mut on_progress: impl FnMut(f64)) -> u64 {
    if n <= 2 {
        return 0;
    }
    // The primes up to sqrt(n) suffice to sieve the whole range.
    let small = simple_sieve(isqrt(n - 1));
    let mut composite = vec![false; SEGMENT as usize];
    let mut count = 0;
    let mut low = 0;
    while low < n {
        let high = (low + SEGMENT).min(n);
        let seg = &mut composite[..(high - low) as usize];
        seg.fill(false);
        for &p in &small {
            // Cross off p*p, p*p + p, ... within [low, high), skipping p itself.
            let first = (p * p).max(low.div_ceil(p) * p);
            let mut m = first;
            while m < high {
                seg[(m - low) as usize] = true;
                m += p;
            }
        }
        // 0 and 1 are not primes.
        for i in low..2.min(high) {
            seg[i as usize] = true;
        }
        count += seg.iter().filter(|&&c| !c).count() as u64;
        low = high;
        on_progress(low as f64 / n as f64);
    }
    count
}

/// All primes up to and including `limit`, by the plain sieve.
fn simple_sieve(limit: u64) -> Vec<u64> {
    let limit = limit as usize;
    let mut composite = vec![false; limit + 1];
    let mut primes = Vec::new();
    for i in 2..=limit {
        if !composite[i] {
            primes.push(i as u64);
            for m in (i * i..=limit).step_by(i) {
                composite[m] = true;
            }
        }
    }
    primes
}

/// The largest r with r * r <= n.
fn isqrt(n: u64) -> u64 {
    let mut r = (n as f64).sqrt() as u64;
    while r * r > n {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= n {
        r += 1;
    }
    r
}

/// Sets the job's `Progress` attribute each time another tenth is done.
#[derive(Default)]
struct Progress {
    tenths: u32,
    warned: bool,
}

impl Progress {
    fn report(&mut self, fraction: f64) {
        let tenths = (fraction * 10.0).floor() as u32;
        if tenths <= self.tenths {
            return;
        }
        self.tenths = tenths;
        // Progress is a nicety: a failure to report it (for example when run
        // outside andes) is worth one warning, not the job.
        if let Err(e) = attr::set_progress(f64::from(tenths) / 10.0)
            && !self.warned
        {
            eprintln!("primes: cannot report progress: {e}");
            self.warned = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_counts() {
        for (n, count) in [(0, 0), (2, 0), (3, 1), (10, 4), (100, 25), (1_000_000, 78_498)] {
            assert_eq!(count_primes_below(n, |_| {}), count, "n = {n}");
        }
    }
}
