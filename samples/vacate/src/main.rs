//! `vacate`: a long computation that stops cleanly when andes asks it to vacate,
//! and picks up where it stopped when it is run again (a self-checkpointing job).
//!
//! Usage: `vacate [TERMS]`. It sums the series 1/k² for k = 1..=TERMS (default
//! 10_000_000_000, tens of seconds of work; the sum tends to π²/6) in chunks of
//! one million terms, and between chunks asks the guest SDK whether the execute
//! host wants the machine back.
//!
//! - Not vacated: it writes `result.txt` (`terms = TERMS` and `sum = ...`),
//!   deletes any `partial.txt`, prints the sum and exits with code 0.
//! - Vacated: it writes what it has so far to `partial.txt` (`terms`,
//!   `terms_done` and `sum`), logs a line to the job's event log, prints
//!   `vacated after K of TERMS terms` and exits with code **85**. That is
//!   HTCondor's convention for "checkpointed, run me again" (the submit file's
//!   `checkpoint_exit_code = 85`): `partial.txt` travels back with the job, and
//!   the next run, on this machine or another, resumes from it.
//! - A bad argument: exit code 2.
//!
//! The sum is computed in a fixed order and saved with every bit, so the result
//! is the same however many times the job was interrupted.

use andes_guest::{attr, log};
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::process::ExitCode;

/// The exit code of a job that saved its state and wants to be run again
/// (HTCondor's `checkpoint_exit_code`, conventionally 85).
const VACATED_EXIT_CODE: u8 = 85;
const DEFAULT_TERMS: u64 = 10_000_000_000;
/// Terms between two checks of `vacate_requested()`: a millisecond or two.
const CHUNK: u64 = 1_000_000;
const PARTIAL: &str = "partial.txt";
const RESULT: &str = "result.txt";

/// Where the computation stands.
#[derive(Clone, Copy, Debug, PartialEq)]
struct State {
    /// Terms to sum in all.
    terms: u64,
    /// Terms summed so far: k = 1..=terms_done.
    terms_done: u64,
    /// Their sum.
    sum: f64,
}

fn main() -> ExitCode {
    let terms = match std::env::args().nth(1) {
        None => DEFAULT_TERMS,
        Some(arg) => match arg.replace('_', "").parse::<u64>() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("vacate: TERMS must be a whole number, not `{arg}`: {e}");
                return ExitCode::from(2);
            }
        },
    };
    match run(terms) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vacate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(terms: u64) -> io::Result<ExitCode> {
    // The job's own ad says who it is (outside andes there is no ad).
    if let (Some(cluster), Some(proc)) = (attr::get_int("ClusterId"), attr::get_int("ProcId")) {
        log::info(&format!("job {cluster}.{proc}: summing {terms} terms"));
    }
    let mut state = resume(terms)?;
    let mut last_percent = u64::MAX;
    while state.terms_done < state.terms {
        // The soft kill: save and leave. Checked before every chunk, so the job
        // answers within a chunk's time.
        if andes_guest::vacate_requested() {
            return vacate(&state);
        }
        let end = (state.terms_done + CHUNK).min(state.terms);
        for k in state.terms_done + 1..=end {
            let k = k as f64;
            state.sum += 1.0 / (k * k);
        }
        state.terms_done = end;

        let percent = state.terms_done * 100 / state.terms;
        if percent != last_percent {
            last_percent = percent;
            // Outside andes there is nowhere to report to; that is fine.
            let _ = attr::set_progress(percent as f64 / 100.0);
        }
    }

    fs::write(RESULT, format!("terms = {}\nsum = {:?}\n", state.terms, state.sum))?;
    match fs::remove_file(PARTIAL) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    println!("sum of 1/k^2 for k = 1..={}: {:?}", state.terms, state.sum);
    Ok(ExitCode::SUCCESS)
}

/// Saves the partial result and says so; the caller exits with 85.
fn vacate(state: &State) -> io::Result<ExitCode> {
    let mut text = String::new();
    let _ = write!(
        text,
        "terms = {}\nterms_done = {}\nsum = {:?}\n",
        state.terms, state.terms_done, state.sum
    );
    // Write then rename, so a kill half-way through never leaves half a file.
    let tmp = format!("{PARTIAL}.tmp");
    fs::write(&tmp, text)?;
    fs::rename(&tmp, PARTIAL)?;

    let left = match andes_guest::vacate_time_left() {
        Some(left) => format!(", {}s before the deadline", left.as_secs()),
        None => String::new(),
    };
    let line = format!(
        "vacated after {} of {} terms; partial result saved to {PARTIAL}{left}",
        state.terms_done, state.terms
    );
    log::warn(&line);
    println!("{line}");
    Ok(ExitCode::from(VACATED_EXIT_CODE))
}

/// The state saved by an earlier run in `partial.txt`, or a fresh start.
fn resume(terms: u64) -> io::Result<State> {
    let fresh = State { terms, terms_done: 0, sum: 0.0 };
    let text = match fs::read_to_string(PARTIAL) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(fresh),
        Err(e) => return Err(e),
    };
    match parse_partial(&text) {
        Some(saved) if saved.terms == terms && saved.terms_done <= terms => {
            println!("resuming at term {} of {terms}", saved.terms_done + 1);
            log::info(&format!("resuming from {PARTIAL} at term {}", saved.terms_done + 1));
            Ok(saved)
        }
        _ => {
            eprintln!("vacate: ignoring {PARTIAL}: not a saved state for {terms} terms");
            Ok(fresh)
        }
    }
}

/// Reads the `key = value` lines written by [`vacate`].
fn parse_partial(text: &str) -> Option<State> {
    let (mut terms, mut terms_done, mut sum) = (None, None, None);
    for line in text.lines() {
        let (key, value) = line.split_once('=')?;
        let value = value.trim();
        match key.trim() {
            "terms" => terms = value.parse().ok(),
            "terms_done" => terms_done = value.parse().ok(),
            // `{:?}` wrote the shortest text that reads back to the same bits.
            "sum" => sum = value.parse().ok(),
            _ => return None,
        }
    }
    Some(State { terms: terms?, terms_done: terms_done?, sum: sum? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_state_round_trips() {
        let state = State { terms: 10, terms_done: 4, sum: 1.0 / 3.0 };
        let text = format!(
            "terms = {}\nterms_done = {}\nsum = {:?}\n",
            state.terms, state.terms_done, state.sum
        );
        assert_eq!(parse_partial(&text), Some(state));
        assert_eq!(parse_partial("terms = 10\n"), None);
        assert_eq!(parse_partial("junk"), None);
    }
}
