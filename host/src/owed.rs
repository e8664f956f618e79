//! The ends the host owes its schedds, kept on disk until each is taken in,
//! so that a job whose host dies between its end and the schedd's
//! acknowledgement is not run again.
//!
//! A job's end (its ending ad, its output files carried inline, the sandbox
//! kept for its streamed outputs, the claim and its schedd) is appended to
//! `EXECUTE/.startd.owed` before any shadow can hear of it; once the end is
//! acknowledged (the schedd asked anything more of the claim after it was
//! told, which it does only with the end on its disk; an appended
//! activation's `acked`; a fresh activation; a release), a line saying so
//! follows. The file is written, not synced: it outlives the host's process
//! (kill -9, an abort, `andes host` stopped), which is what it is for; a
//! power cut takes the sandboxes too. A host that starts reads it: each end
//! still owed becomes an ended claim's final report, as if the claim had
//! ended a moment ago, kept for the job's lease, with the sandbox of its
//! streamed outputs (left in place at startup), so the shadow that follows
//! the claim, or reconnects to it, takes the end in as it would have before
//! the host died. An end whose kept sandbox is gone is not offered: its job
//! runs again, as it did before this record existed.
//!
//! The file holds one JSON line per end and per acknowledgement. It is
//! rewritten with only the ends still owed at start, and whenever it has
//! grown past [`COMPACT_OVER`] bytes and four times what is still owed. A
//! line that cannot be read (a torn last line, after a full disk) is
//! skipped with a warning. Nobody but the host writes the file (EXECUTE's
//! own files are the daemon's alone); what it reads is still checked: a
//! kept sandbox must be a plain `out_*` name in EXECUTE.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use andes_protocol::pool::JobEnd;
use andes_startd::SlotId;
use serde::{Deserialize, Serialize};

/// The book's file name in EXECUTE.
pub const FILE: &str = ".startd.owed";

/// The file is compacted once it has grown past this many bytes (and four
/// times what it still owes).
pub const COMPACT_OVER: u64 = 1 << 20;

/// An end the host owes a claim's schedd, as the book keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwedEnd {
    /// The claim the job ran on.
    pub claim: String,
    /// Its slot.
    pub slot: SlotId,
    /// The identity that holds the claim.
    pub claimant: String,
    /// The claimant's incarnation when the job ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
    /// The job's lease (JobLeaseDuration), seconds: how long a restarted
    /// host keeps the end for its shadow.
    pub lease_secs: u64,
    /// The end as the report carries it.
    pub end: JobEnd,
    /// The sandbox kept for its streamed outputs: its name in EXECUTE and
    /// each streamed output's name → its path in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<(String, HashMap<String, String>)>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    End(Box<OwedEnd>),
    Done { claim: String, version: u64 },
}

/// The book of owed ends (see the module's documentation).
pub struct Owed {
    path: Option<PathBuf>,
    file: Option<std::fs::File>,
    /// Each claim's owed ends by their report version: the line that
    /// records it (what a compaction writes again).
    open: HashMap<String, BTreeMap<u64, String>>,
    /// Bytes in the file, and in its lines still owed.
    written: u64,
    live: u64,
}

impl Owed {
    /// The book in `execute`, and the ends it still owes (in the order they
    /// ended). A book that cannot be written is reported and kept in memory
    /// only: the host runs on, as it did before it kept one.
    pub fn open(execute: &Path) -> (Owed, Vec<OwedEnd>) {
        let path = execute.join(FILE);
        let mut read: Vec<Option<OwedEnd>> = Vec::new();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let mut at: HashMap<(String, u64), usize> = HashMap::new();
                for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
                    if line.is_empty() {
                        continue;
                    }
                    match serde_json::from_slice::<Line>(line) {
                        Ok(Line::End(e)) => {
                            // Recorded again: the later line is the end.
                            let key = (e.claim.clone(), e.end.version);
                            if let Some(i) = at.insert(key, read.len()) {
                                read[i] = None;
                            }
                            read.push(Some(*e));
                        }
                        Ok(Line::Done { claim, version }) => {
                            if let Some(i) = at.remove(&(claim, version)) {
                                read[i] = None;
                            }
                        }
                        Err(e) => tracing::warn!(
                            "{} line {}: not an owed end ({e}); skipped",
                            path.display(),
                            n + 1
                        ),
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("{}: {e}; no owed ends read", path.display()),
        }
        let mut ends: Vec<OwedEnd> = read.into_iter().flatten().collect();
        ends.retain(|e| match &e.kept {
            Some((dir, _)) if !kept_name_ok(dir) => {
                tracing::warn!("{}: kept sandbox {dir:?} is not one; end dropped", path.display());
                false
            }
            _ => true,
        });
        let mut book =
            Owed { path: Some(path), file: None, open: HashMap::new(), written: 0, live: 0 };
        for e in &ends {
            book.remember(e);
        }
        book.compact();
        (book, ends)
    }

    /// A book that keeps nothing.
    pub fn none() -> Owed {
        Owed { path: None, file: None, open: HashMap::new(), written: 0, live: 0 }
    }

    /// How many ends the book owes.
    pub fn len(&self) -> usize {
        self.open.values().map(BTreeMap::len).sum()
    }

    /// True when it owes none.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    fn remember(&mut self, e: &OwedEnd) -> Option<String> {
        let line = match serde_json::to_string(&Line::End(Box::new(e.clone()))) {
            Ok(l) => l + "\n",
            Err(err) => {
                tracing::warn!("the end of {} cannot be recorded: {err}", e.end.job);
                return None;
            }
        };
        self.live += line.len() as u64;
        let old = self.open.entry(e.claim.clone()).or_default().insert(e.end.version, line.clone());
        if let Some(old) = old {
            self.live -= old.len() as u64;
        }
        Some(line)
    }

    /// Records `e` before anyone is told of it.
    pub fn record(&mut self, e: &OwedEnd) {
        if let Some(line) = self.remember(e) {
            self.append(&line);
        }
    }

    /// Settles the ends no longer owed, of `claim` alone or (`None`) of
    /// every claim: `owed(claim, version)` says whether the end of that
    /// report version on that claim still is. Ends stop being owed oldest
    /// first (or all at once), so a claim whose oldest end is still owed is
    /// passed over at the cost of that one question.
    pub fn settle(&mut self, claim: Option<&str>, owed: impl Fn(&str, u64) -> bool) {
        if self.open.is_empty() {
            return;
        }
        let mut done = String::new();
        let mut settle_one = |claim: &str, ends: &mut BTreeMap<u64, String>, live: &mut u64| {
            if ends.keys().next().is_some_and(|&v| owed(claim, v)) {
                return;
            }
            ends.retain(|&version, line| {
                let keep = owed(claim, version);
                if !keep {
                    *live -= line.len() as u64;
                    let l = Line::Done { claim: claim.to_string(), version };
                    if let Ok(s) = serde_json::to_string(&l) {
                        done.push_str(&s);
                        done.push('\n');
                    }
                }
                keep
            });
        };
        match claim {
            Some(c) => {
                if let Some(ends) = self.open.get_mut(c) {
                    settle_one(c, ends, &mut self.live);
                    if ends.is_empty() {
                        self.open.remove(c);
                    }
                }
            }
            None => {
                let live = &mut self.live;
                self.open.retain(|c, ends| {
                    settle_one(c, ends, live);
                    !ends.is_empty()
                });
            }
        }
        if !done.is_empty() {
            self.append(&done);
        }
        if self.written > COMPACT_OVER && self.written > 4 * self.live {
            self.compact();
        }
    }

    fn append(&mut self, text: &str) {
        let Some(path) = &self.path else { return };
        if self.file.is_none() {
            match std::fs::OpenOptions::new().create(true).append(true).open(path) {
                Ok(f) => {
                    if let Err(e) = andes_beneath::private::restrict_to_owner(path) {
                        tracing::warn!("{}: {e}", path.display());
                    }
                    self.file = Some(f);
                }
                Err(e) => {
                    tracing::warn!("{}: {e}; an end is kept in memory only", path.display());
                    return;
                }
            }
        }
        let Some(f) = &mut self.file else { return };
        // One write: a process killed after it returns has it in the file.
        match f.write_all(text.as_bytes()) {
            Ok(()) => self.written += text.len() as u64,
            Err(e) => tracing::warn!("{}: {e}; an end is kept in memory only", path.display()),
        }
    }

    /// Writes the file again with only what is still owed (a new file
    /// renamed over the old: a process killed meanwhile leaves one or the
    /// other, whole).
    fn compact(&mut self) {
        let Some(path) = self.path.clone() else { return };
        // Closed first: Windows renames over a file no one holds open.
        self.file = None;
        let tmp = path.with_file_name(format!("{FILE}.new"));
        let mut text = String::with_capacity(self.live as usize);
        for ends in self.open.values() {
            for line in ends.values() {
                text.push_str(line);
            }
        }
        let r = std::fs::write(&tmp, text.as_bytes())
            .and_then(|()| andes_beneath::private::restrict_to_owner(&tmp))
            .and_then(|()| std::fs::rename(&tmp, &path));
        match r {
            Ok(()) => self.written = text.len() as u64,
            Err(e) => {
                tracing::warn!("{}: not compacted: {e}", path.display());
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }
}

/// A kept sandbox's name as the daemon makes it: `out_` and no path.
pub fn kept_name_ok(name: &str) -> bool {
    name.starts_with("out_")
        && !name.contains(['/', '\\'])
        && name != "."
        && name != ".."
        && Path::new(name).file_name().is_some_and(|n| n == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(claim: &str, version: u64, kept: Option<&str>) -> OwedEnd {
        OwedEnd {
            claim: claim.into(),
            slot: 1,
            claimant: "schedd".into(),
            incarnation: Some("one".into()),
            lease_secs: 2400,
            end: JobEnd {
                job: format!("s#1.{version}#1"),
                version,
                update: "[]".into(),
                ending: "[ ExitCode = 0 ]".into(),
                outputs: vec![andes_protocol::pool::FileData::inline("out", vec![0, 1, 2])],
                evicted: false,
                log: Vec::new(),
                run_us: Some(5),
            },
            kept: kept.map(|k| (k.to_string(), [("big".into(), "big".into())].into())),
        }
    }

    /// What is recorded and not settled is read back, whole, by the next
    /// host; what was settled is not.
    #[test]
    fn an_end_recorded_and_not_settled_is_owed_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let (mut book, none) = Owed::open(dir.path());
        assert!(none.is_empty());
        let (a, b, c) = (end("c1", 3, Some("out_1_4")), end("c1", 5, None), end("c2", 2, None));
        for e in [&a, &b, &c] {
            book.record(e);
        }
        book.settle(None, |claim, version| !(claim == "c1" && version == 3));
        assert_eq!(book.len(), 2);
        // The process is gone without a word (nothing flushed, nothing dropped
        // in order): what it wrote is what the next one reads.
        std::mem::forget(book);
        let (book, owed) = Owed::open(dir.path());
        let mut got: Vec<(String, u64)> =
            owed.iter().map(|e| (e.claim.clone(), e.end.version)).collect();
        got.sort();
        assert_eq!(got, [("c1".to_string(), 5), ("c2".to_string(), 2)]);
        assert_eq!(owed.iter().find(|e| e.claim == "c2").unwrap(), &c);
        assert_eq!(book.len(), 2);
        // Opening compacts: only the owed lines are left.
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    /// A torn last line (a full disk mid-write) and a line naming a kept
    /// sandbox outside EXECUTE are skipped; the rest is read.
    #[test]
    fn a_torn_line_or_a_kept_path_outside_execute_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let (mut book, _) = Owed::open(dir.path());
        book.record(&end("c1", 3, None));
        book.record(&end("c1", 4, Some("../../etc")));
        book.record(&end("c1", 6, Some("out_1_2/../../x")));
        drop(book);
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.path().join(FILE)).unwrap();
        f.write_all(b"{\"end\":{\"claim\":\"c1\",\"sl").unwrap();
        let (_, owed) = Owed::open(dir.path());
        let versions: Vec<u64> = owed.iter().map(|e| e.end.version).collect();
        assert_eq!(versions, [3]);
    }

    /// A host that runs on records and settles many ends: its file stays
    /// small (compacted), and still owes exactly what is owed.
    #[test]
    fn the_file_is_compacted_as_ends_are_settled() {
        let dir = tempfile::tempdir().unwrap();
        let (mut book, _) = Owed::open(dir.path());
        for v in 0..20_000u64 {
            book.record(&end("c1", v, None));
            book.settle(Some("c1"), |_, version| version == v);
        }
        let size = std::fs::metadata(dir.path().join(FILE)).unwrap().len();
        assert!(size <= 2 * COMPACT_OVER, "{size} bytes");
        let (_, owed) = Owed::open(dir.path());
        let versions: Vec<u64> = owed.iter().map(|e| e.end.version).collect();
        assert_eq!(versions, [19_999]);
    }

    #[test]
    fn only_plain_out_names_are_kept_sandboxes() {
        assert!(kept_name_ok("out_1_7"));
        for bad in ["dir_1_7", "out_1/..", "../out_1", "out_\\x", "", "out_/x"] {
            assert!(!kept_name_ok(bad), "{bad}");
        }
    }
}
