//! What a daemon is evaluating of a user's input, written down so that a
//! daemon that died evaluating it knows, when it starts again, what not to
//! evaluate a second time.
//!
//! Every expression a user writes is evaluated within a budget
//! (`classad::budget`), so no known input can take a daemon down. The
//! journal is the second line. It is a small file of fixed-size records,
//! one per evaluating thread: before a daemon evaluates a user's input on
//! thread `t` it writes a line naming it into record `t`, and blanks the
//! record after. The file is written through a shared mapping
//! ([`andes_beneath::mapped`]): a record is a store to memory, in the page
//! cache at once (no sync), so it survives the process, which is what it
//! guards against, at the cost of a copy of 128 bytes, not a system call.
//! When the daemon starts, the records it finds are what it was evaluating
//! when it died, if it died of an abort (an allocation that failed, a
//! stack overflow, a panic that could not unwind): a process killed from
//! outside blames nothing on its input (see
//! [`andes_beneath::mapped::Mapped::mark_on_abort`]).
//!
//! The schedd names a job and what of it (one record per evaluation in
//! flight: its queue, its shadows' matching, its job router); the central
//! manager names a resource request on each of the planner's threads; an
//! execute host names the job whose ad its policy was evaluating.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use andes_beneath::mapped::{self, Mapped};

/// One record: a line of at most `RECORD - 1` bytes, padded with spaces.
pub const RECORD: usize = 128;

/// The most records (evaluating threads) a journal keeps.
pub const MAX_SLOTS: usize = 16;

/// The journal of what is being evaluated.
pub struct Journal {
    file: Option<Mapped>,
    path: PathBuf,
    slots: usize,
    /// Which records [`Journal::enter_free`] has handed out (bit `i`:
    /// record `i`).
    taken: Mutex<u32>,
}

impl Journal {
    /// The journal at `path` with `slots` records (at most [`MAX_SLOTS`]),
    /// and the lines it held: what the last process was evaluating when it
    /// stopped, one line per thread that was evaluating (empty after a
    /// clean stop). A journal that cannot be written is reported and
    /// skipped: it is a safeguard, not a condition to run.
    pub fn open(path: &Path, slots: usize) -> (Journal, Vec<String>) {
        let slots = slots.clamp(1, MAX_SLOTS);
        // The records, then one byte set if the process aborts.
        let (file, before) = match Mapped::create(path, slots * RECORD + 1) {
            Ok((mut m, before)) => {
                m.mark_on_abort(slots * RECORD);
                (Some(m), before)
            }
            Err(e) => {
                tracing::warn!("{}: {e}; no evaluation journal", path.display());
                (None, Vec::new())
            }
        };
        let records = before.len() - before.len() % RECORD;
        // A process killed from outside (kill -9, a machine going down) did
        // not die of what it was evaluating: only an abort counts (where
        // the platform tells them apart).
        let aborted = before.len() % RECORD == 1 && before.last() == Some(&mapped::ABORTED);
        let found = if aborted || !mapped::MARKS_ABORTS {
            before[..records]
                .chunks(RECORD)
                .filter_map(|r| {
                    let line =
                        String::from_utf8_lossy(r).trim_matches([' ', '\n', '\0']).to_string();
                    (!line.is_empty()).then_some(line)
                })
                .collect()
        } else {
            let busy = before[..records].chunks(RECORD).any(|r| r.iter().any(|b| *b > b' '));
            if busy {
                tracing::info!(
                    "{}: the last process was stopped from outside while evaluating; \
                     nothing is blamed on what it was evaluating",
                    path.display()
                );
            }
            Vec::new()
        };
        let journal = Journal { file, path: path.to_path_buf(), slots, taken: Mutex::new(0) };
        (journal, found)
    }

    /// A journal that records nothing (for tests that need none, and for
    /// daemons with nowhere to keep one).
    pub fn none() -> Journal {
        Journal { file: None, path: PathBuf::new(), slots: MAX_SLOTS, taken: Mutex::new(0) }
    }

    /// How many records it has.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Records in record `slot` (taken modulo [`Journal::slots`]) that
    /// `line` is about to be evaluated; the record is blanked when the
    /// guard drops. A line longer than a record is cut at a character
    /// boundary; a newline in it ends it.
    pub fn enter(&self, slot: usize, line: &str) -> Entered<'_> {
        self.mark(slot, line);
        Entered { journal: self, slot: Some(slot), pooled: false }
    }

    /// Records `line` in a record no other [`Journal::enter_free`] guard
    /// holds, for callers on any number of threads (a daemon's tasks). With
    /// every record held, nothing is recorded and a warning says so: the
    /// journal is a safeguard, and waiting for it would be worse.
    pub fn enter_free(&self, line: &str) -> Entered<'_> {
        let slot = {
            let mut taken = self.taken.lock().unwrap_or_else(|e| e.into_inner());
            let free = (0..self.slots).find(|i| *taken & (1 << i) == 0);
            if let Some(i) = free {
                *taken |= 1 << i;
            }
            free
        };
        match slot {
            Some(i) => self.mark(i, line),
            None => tracing::warn!(
                "{}: {} evaluations in flight; not recording {line:?}",
                self.path.display(),
                self.slots
            ),
        }
        Entered { journal: self, slot, pooled: true }
    }

    /// Writes `line` into record `slot` (as [`Journal::enter`] does) for a
    /// caller that brackets its evaluations itself, with [`Journal::clear`].
    pub fn mark(&self, slot: usize, line: &str) {
        let line = line.lines().next().unwrap_or("");
        let mut end = line.len().min(RECORD - 1);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        self.write(slot % self.slots, &line.as_bytes()[..end]);
    }

    /// Blanks record `slot`.
    pub fn clear(&self, slot: usize) {
        self.write(slot % self.slots, b"");
    }

    fn write(&self, slot: usize, text: &[u8]) {
        let Some(f) = &self.file else { return };
        let mut rec = [b' '; RECORD];
        rec[..text.len()].copy_from_slice(text);
        rec[RECORD - 1] = b'\n';
        if !f.write(slot * RECORD, &rec) {
            tracing::warn!("{}: record {slot} out of the journal", self.path.display());
        }
    }
}

/// An input being evaluated; blanks its record when dropped.
pub struct Entered<'a> {
    journal: &'a Journal,
    slot: Option<usize>,
    /// Handed out by [`Journal::enter_free`]: freed for others on drop.
    pooled: bool,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let Some(slot) = self.slot else { return };
        self.journal.clear(slot);
        if self.pooled {
            let mut taken = self.journal.taken.lock().unwrap_or_else(|e| e.into_inner());
            *taken &= !(1 << slot);
        }
    }
}

/// Marks the journal at `path` as its process's abort would (for tests of
/// what a daemon does after one, without aborting the test).
pub fn mark_aborted(path: &Path) -> std::io::Result<()> {
    let mut b = std::fs::read(path)?;
    if let Some(last) = b.last_mut() {
        *last = mapped::ABORTED;
    }
    std::fs::write(path, b)
}

/// Fault injection for the tests of the journal's promise, in debug builds
/// only: with `ANDES_FAULT_ABORT_ON` naming an attribute (`Attr`, or
/// `Attr@site` for the fault point called `site` alone), a daemon that
/// evaluates an ad that has it (`has` says whether it does) at fault point
/// `site` aborts, as an input that crashed the evaluator would. Release
/// builds have no such door.
pub fn fault_point(site: &str, has: impl FnOnce(&str) -> bool) {
    #[cfg(debug_assertions)]
    if let Some(spec) = std::env::var_os("ANDES_FAULT_ABORT_ON") {
        let spec = spec.to_string_lossy();
        let (attr, at) = match spec.split_once('@') {
            Some((a, s)) => (a, Some(s)),
            None => (&*spec, None),
        };
        if at.is_none_or(|s| s == site) && has(attr) {
            eprintln!("andes: fault injection: aborting at {site} on an ad with {attr:?}");
            std::process::abort();
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = (site, has);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_names_what_each_thread_was_evaluating_when_the_process_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.evaluating");
        let (j, found) = Journal::open(&path, 2);
        assert!(found.is_empty());
        {
            let _e = j.enter(0, "periodic policy 7.3");
        }
        // Blanked after a clean evaluation.
        assert!(Journal::open(&path, 2).1.is_empty());
        let (j, _) = Journal::open(&path, 2);
        let a = j.enter(0, "request one");
        let b = j.enter(1, "request two\nand not this");
        drop(a);
        let c = j.enter(0, "request three");
        // The process dies here, killed from outside: the guards never
        // drop, and nothing is blamed.
        std::mem::forget(b);
        std::mem::forget(c);
        drop(j);
        std::fs::copy(&path, dir.path().join("copy")).unwrap();
        assert!(Journal::open(&path, 2).1.is_empty(), "a kill blames nothing");
        // The same, of an abort: what was being evaluated is named.
        std::fs::copy(dir.path().join("copy"), &path).unwrap();
        mark_aborted(&path).unwrap();
        let (_, found) = Journal::open(&path, 2);
        assert_eq!(found, vec!["request three".to_string(), "request two".to_string()]);
        // Named once: the next start finds it clear.
        assert!(Journal::open(&path, 2).1.is_empty());
    }

    #[test]
    fn free_records_are_handed_out_once_and_taken_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.evaluating");
        let (j, _) = Journal::open(&path, 2);
        let a = j.enter_free("job 1.0");
        let b = j.enter_free("job 2.0");
        // Full: recorded nowhere, and overwriting nobody.
        drop(j.enter_free("job 3.0"));
        drop(a);
        let c = j.enter_free("job 4.0");
        std::mem::forget(b);
        std::mem::forget(c);
        drop(j);
        mark_aborted(&path).unwrap();
        let (_, found) = Journal::open(&path, 2);
        assert_eq!(found, vec!["job 4.0".to_string(), "job 2.0".to_string()]);
    }

    #[test]
    fn a_long_line_is_cut_at_a_character_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.evaluating");
        let (j, _) = Journal::open(&path, 1);
        let long = "é".repeat(200);
        std::mem::forget(j.enter(5, &long));
        drop(j);
        mark_aborted(&path).unwrap();
        let (_, found) = Journal::open(&path, 1);
        assert_eq!(found.len(), 1);
        assert!(found[0].len() < RECORD && found[0].chars().all(|c| c == 'é'));
    }
}
