//! What the negotiator was matching when the central manager died, so that
//! it never dies on the same request twice.
//!
//! Every job's `Requirements` and `Rank`, and every slot's expressions
//! about the job, are evaluated within a budget (`classad::budget`), so no
//! known input can stop the central manager. This is the second line, as
//! the schedd's is for its own evaluations:
//!
//! - A resource request is named by its [`Signature`]: the schedd, the
//!   submitter and the text of the job's `Requirements`, `Rank` and
//!   `Request*`. It stays the same while the request's jobs do, whichever
//!   of them stands for the others, across restarts of either daemon. A
//!   signature is a hash anyone can compute: a quarantine entry holds only
//!   requests of its own schedd and submitter, so a request made to share
//!   another user's signature can only quarantine its own user's jobs.
//! - The planner evaluates a request it has not evaluated before alone, one
//!   at a time, before any other thread starts ([`crate::negotiator::Watch`]);
//!   requests evaluated before without harm go on both cores. Before each
//!   evaluation it writes the request's signature into a journal
//!   (`negotiator.evaluating` beside the accountant's state,
//!   [`andes_protocol::journal`]) and blanks it after.
//! - A central manager that starts and finds a request it was evaluating
//!   alone quarantines it: the signature is kept (`negotiator.quarantine`,
//!   which survives restarts), the request is never evaluated again, and
//!   its schedd is told at each cycle, which holds the request's idle jobs
//!   (code 5) with a reason saying so. A request named while others were
//!   being evaluated too is not known, so it is evaluated alone at the next
//!   cycle, which decides.
//! - A panic in one request's evaluation is caught and quarantines that
//!   request at once, with no restart.
//!
//! A user who changes the jobs' `Requirements` (`andes edit`) gives them a
//! new signature; releasing them unchanged holds them again at the next
//! cycle, without evaluating them. The administrator lifts a quarantine by
//! deleting its line from `negotiator.quarantine` (a JSON list) while the
//! central manager is stopped.

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use andes_protocol::journal::{Journal, fault_point};
use classad::ClassAd;
use serde::{Deserialize, Serialize};

use crate::negotiator::{Request, Watch};

/// The most quarantined requests kept; past it the oldest is forgotten
/// (and would be quarantined again, at the cost of one more restart).
pub const MAX_QUARANTINED: usize = 10_000;

/// The most signatures remembered as evaluated without harm; past it the
/// set starts afresh (and each request is evaluated alone once more).
pub const MAX_KNOWN: usize = 1_000_000;

/// A resource request's identity, stable while its jobs are the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Signature(pub u64);

impl Signature {
    /// The signature of `request`: its schedd, its submitter and the text
    /// of the job attributes a match evaluates first ([`SIGNED`]). Not the
    /// pool's significant attributes, which change as machines come and
    /// go (after a restart, the collector hears of them again one by one).
    /// Two requests of one submitter alike in these are one to the
    /// quarantine, which errs on the side of holding. FNV-1a: the same on
    /// every build and platform, so a signature kept on disk means the same
    /// request after an upgrade.
    pub fn of(request: &Request) -> Signature {
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        request.schedd.hash(&mut h);
        request.submitter.hash(&mut h);
        for n in SIGNED {
            n.hash(&mut h);
            attr_text(&request.ad, n).hash(&mut h);
        }
        Signature(h.finish())
    }
}

/// The job attributes a [`Signature`] covers.
pub const SIGNED: [&str; 5] =
    ["Requirements", "Rank", "RequestMemory", "RequestDisk", "RequestCpus"];

fn attr_text(ad: &ClassAd, name: &str) -> String {
    ad.get(name).map(|e| e.to_string()).unwrap_or_default()
}

struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// One quarantined request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The schedd whose request it was.
    pub schedd: String,
    /// Its submitter.
    pub submitter: String,
    /// When it was quarantined (seconds since the epoch).
    pub since: i64,
    /// What happened.
    pub why: String,
}

/// What a quarantine entry holds: the signature, and the schedd and
/// submitter whose request it was. A signature is a 64-bit hash that anyone
/// can compute, so one user could choose a request whose signature is
/// another's: an entry holds only requests of its own schedd and submitter.
type Key = (Signature, String, String);

/// The negotiator's journal, its quarantine, and the signatures it has
/// evaluated without harm.
pub struct Quarantine {
    journal: Journal,
    file: Option<PathBuf>,
    entries: Mutex<BTreeMap<Key, Entry>>,
    known: Mutex<HashSet<Signature>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Quarantine {
    /// The quarantine kept in `dir` (`negotiator.quarantine` and the journal
    /// `negotiator.evaluating`), with what the journal named quarantined if
    /// the last central manager died evaluating it alone. `None` keeps
    /// nothing on disk.
    pub fn open(dir: Option<&Path>, now: i64) -> Quarantine {
        let Some(dir) = dir else {
            return Quarantine {
                journal: Journal::none(),
                file: None,
                entries: Mutex::new(BTreeMap::new()),
                known: Mutex::new(HashSet::new()),
            };
        };
        let file = dir.join("negotiator.quarantine");
        let entries: BTreeMap<Key, Entry> = match std::fs::read(&file) {
            Ok(b) => match serde_json::from_slice::<Vec<(Signature, Entry)>>(&b) {
                Ok(v) => v
                    .into_iter()
                    .map(|(s, e)| ((s, e.schedd.clone(), e.submitter.clone()), e))
                    .collect(),
                Err(e) => {
                    tracing::warn!("{}: not a quarantine list ({e}); ignored", file.display());
                    BTreeMap::new()
                }
            },
            Err(_) => BTreeMap::new(),
        };
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
        let (journal, found) = Journal::open(&dir.join("negotiator.evaluating"), threads);
        let q = Quarantine {
            journal,
            file: Some(file),
            entries: Mutex::new(entries),
            known: Mutex::new(HashSet::new()),
        };
        for line in found {
            match Record::parse(&line) {
                Some(r) if r.alone => {
                    tracing::error!(
                        "the central manager stopped while matching a request of {} from \
                         schedd {}: quarantining it",
                        r.submitter,
                        r.schedd
                    );
                    q.add(r.signature, r.schedd, r.submitter, now, STOPPED.to_string());
                }
                Some(r) => tracing::warn!(
                    "the central manager stopped while matching several requests, one of \
                     {} from schedd {}: each is matched alone at the next cycle",
                    r.submitter,
                    r.schedd
                ),
                None => tracing::warn!("negotiator.evaluating: not a record: {line:?}"),
            }
        }
        q
    }

    /// Whether `request`, whose signature is `sig`, is quarantined, and why:
    /// only by an entry of its own schedd and submitter.
    pub fn why(&self, sig: Signature, request: &Request) -> Option<String> {
        let key = (sig, request.schedd.clone(), request.submitter.clone());
        lock(&self.entries).get(&key).map(|e| e.why.clone())
    }

    /// How many requests are quarantined.
    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Quarantines `sig` and keeps the list on disk.
    pub fn add(&self, sig: Signature, schedd: String, submitter: String, now: i64, why: String) {
        let mut entries = lock(&self.entries);
        let key = (sig, schedd.clone(), submitter.clone());
        entries.insert(key, Entry { schedd, submitter, since: now, why });
        while entries.len() > MAX_QUARANTINED {
            let oldest = entries.iter().min_by_key(|(_, e)| e.since).map(|(k, _)| k.clone());
            match oldest {
                Some(k) => entries.remove(&k),
                None => break,
            };
        }
        let Some(file) = &self.file else { return };
        let list: Vec<(&Signature, &Entry)> = entries.iter().map(|((s, ..), e)| (s, e)).collect();
        // Atomically and durably, as the accountant's state; the daemon's alone.
        let write = serde_json::to_vec_pretty(&list)
            .map_err(std::io::Error::other)
            .and_then(|b| andes_beneath::replace_file(file, &b, 0o600));
        if let Err(e) = write {
            tracing::warn!("{}: {e}", file.display());
        }
    }

    /// Remembers that these signatures were evaluated without harm.
    pub fn passed(&self, sigs: impl IntoIterator<Item = Signature>) {
        let mut known = lock(&self.known);
        if known.len() > MAX_KNOWN {
            known.clear();
        }
        known.extend(sigs);
    }

    /// The planner's [`Watch`] over `requests` (with their signatures).
    pub fn watch<'a>(&'a self, requests: &'a [Request], sigs: &'a [Signature]) -> Watching<'a> {
        let known = lock(&self.known);
        let known = sigs.iter().map(|s| known.contains(s)).collect();
        Watching { q: self, requests, sigs, known }
    }
}

/// The reason a request quarantined after a stop is given.
pub const STOPPED: &str = "the central manager stopped while matching these jobs; they are held \
     and not matched again, so that they cannot stop it again (change their Requirements with \
     `andes edit`, then release them)";

/// The reason a request whose evaluation failed is given.
pub const FAILED: &str = "the central manager failed while matching these jobs; they are held \
     and not matched again (change their Requirements with `andes edit`, then release them)";

/// A [`Watch`] writing the journal (see [`Quarantine::watch`]).
pub struct Watching<'a> {
    q: &'a Quarantine,
    requests: &'a [Request],
    sigs: &'a [Signature],
    known: Vec<bool>,
}

impl Watch for Watching<'_> {
    fn known(&self, r: usize) -> bool {
        self.known.get(r).copied().unwrap_or(false)
    }

    fn enter(&self, thread: usize, r: usize, alone: bool) {
        let (Some(req), Some(sig)) = (self.requests.get(r), self.sigs.get(r)) else { return };
        let rec = Record {
            signature: *sig,
            alone,
            schedd: req.schedd.clone(),
            submitter: req.submitter.clone(),
        };
        self.q.journal.mark(thread, &rec.to_string());
        fault_point("negotiator", |a| req.ad.contains(a));
    }

    fn leave(&self, thread: usize) {
        self.q.journal.clear(thread);
    }
}

/// One journal line: `<signature> alone|together <schedd> <submitter>`.
struct Record {
    signature: Signature,
    alone: bool,
    schedd: String,
    submitter: String,
}

impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = if self.alone { "alone" } else { "together" };
        write!(f, "{} {how} {} {}", self.signature, self.schedd, self.submitter)
    }
}

impl Record {
    fn parse(line: &str) -> Option<Record> {
        let mut it = line.split_whitespace();
        let signature = Signature(u64::from_str_radix(it.next()?, 16).ok()?);
        let alone = match it.next()? {
            "alone" => true,
            "together" => false,
            _ => return None,
        };
        let schedd = it.next().unwrap_or_default().to_string();
        let submitter = it.next().unwrap_or_default().to_string();
        Some(Record { signature, alone, schedd, submitter })
    }
}

#[cfg(test)]
mod tests;
