//! Writes each job's event log (`log = FILE` in the submit file, `UserLog` in the
//! job ad) from the queue's events, after each commit.
//!
//! A log that cannot be written is reported (tracing) and skipped: the queue change
//! is already durable and stays; the job is never held for its log.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use classad::{ClassAd, Value};
use jiff::Timestamp;

use crate::queue::{EventKind, EventSink, QueueEvent};
use crate::transfer;
use crate::userfs::{Access, Accounts};
use crate::userlog::{self, EventJobId, FormatOptions, JobEvent, UserLog};

/// The path of a job's event log: `UserLog`, relative to `Iwd` unless absolute.
pub fn log_path(ad: &ClassAd) -> Option<PathBuf> {
    path_attr(ad, &LOG_ATTRS.get()[0])
}

/// The attributes naming a log a job's events go to: its own (`UserLog`)
/// and, for a DAG node, its DAG's node log (`DAGManNodesLog`, which DAGMan
/// reads to follow its nodes), as HTCondor's schedd writes both.
pub static LOG_ATTRS: classad::Names<2> = classad::Names::new(["UserLog", "DAGManNodesLog"]);

/// Every log the job's events go to (see [`LOG_ATTRS`]), each once.
pub fn log_paths(ad: &ClassAd) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in LOG_ATTRS.get().iter().filter_map(|a| path_attr(ad, a)) {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// A path attribute, relative to `Iwd` unless absolute.
fn path_attr(ad: &ClassAd, attr: &classad::AttrName) -> Option<PathBuf> {
    let Value::Str(log) = ad.eval_attr(attr) else { return None };
    if log.is_empty() {
        return None;
    }
    let p = Path::new(&*log);
    if p.is_absolute() {
        return Some(p.to_path_buf());
    }
    match ad.eval_attr(classad::name!("Iwd")) {
        Value::Str(iwd) => Some(Path::new(&*iwd).join(p)),
        _ => Some(p.to_path_buf()),
    }
}

fn int(ad: &ClassAd, name: &str) -> Option<i64> {
    match ad.eval_attr(name) {
        Value::Int(i) => Some(i),
        Value::Real(r) if r.is_finite() => Some(r as i64),
        _ => None,
    }
}

/// The user-log events for one queue event (a termination that requeues gives a
/// 004 "Job terminated and was requeued", as HTCondor's shadow logs it; a
/// hold gives 012; and so on).
pub fn events_for(e: &QueueEvent, submit_host: &str) -> Vec<userlog::EventKind> {
    use userlog::EventKind as U;
    let ad = &e.ad;
    match &e.kind {
        EventKind::Submitted => vec![U::Submit(userlog::Submit {
            submit_host: submit_host.to_string(),
            // `submit_event_notes` (DAGMan's `DAG Node: NAME`), one line.
            log_notes: match ad.eval_attr(classad::name!("SubmitEventNotes")) {
                Value::Str(s) if !s.is_empty() => {
                    Some(s.lines().next().unwrap_or_default().chars().take(1024).collect())
                }
                _ => None,
            },
            ..Default::default()
        })],
        EventKind::Executing => vec![U::Execute(userlog::Execute {
            execute_host: match ad.eval_attr(classad::name!("RemoteHost")) {
                Value::Str(s) => s.to_string(),
                _ => String::new(),
            },
            slot_name: None,
        })],
        EventKind::Held(h) => vec![U::Held {
            reason: Some(h.reason.clone()),
            code: h.code as i32,
            subcode: h.subcode as i32,
        }],
        EventKind::Released(r) => vec![U::Released(Some(r.clone()))],
        EventKind::Removed(r) => vec![U::Aborted(Some(r.clone()))],
        EventKind::Terminated => {
            let ending = ending_of(ad);
            let cpu = int(ad, "RemoteUserCpu").unwrap_or(0).max(0) as u64;
            let usage = userlog::CpuUsage::from_secs(cpu, 0);
            let mut out = Vec::new();
            if let Some(kb) = int(ad, "ImageSize") {
                out.push(U::ImageSize(userlog::ImageSize {
                    image_size_kb: kb,
                    memory_usage_mb: int(ad, "MemoryUsage"),
                    resident_set_size_kb: int(ad, "ResidentSetSize"),
                    ..Default::default()
                }));
            }
            out.push(U::Terminated(userlog::Terminated {
                ending,
                run_remote_usage: usage,
                run_local_usage: Default::default(),
                total_remote_usage: usage,
                total_local_usage: Default::default(),
                sent_bytes: 0,
                received_bytes: 0,
                total_sent_bytes: 0,
                total_received_bytes: 0,
                resources: Vec::new(),
            }));
            out
        }
        EventKind::Evicted { checkpointed } => {
            let eviction = if *checkpointed {
                userlog::Eviction::Checkpointed
            } else {
                userlog::Eviction::NotCheckpointed
            };
            let reason = match ad.eval_attr(classad::name!("LastVacateReason")) {
                Value::Str(s) => Some(s.to_string()),
                _ => None,
            };
            vec![evicted(ad, eviction, reason)]
        }
        EventKind::Note(text) => vec![U::Generic(text.chars().take(1000).collect())],
        // One process: a Wasm job is one.
        EventKind::Suspended => vec![U::Suspended(1)],
        EventKind::Unsuspended => vec![U::Unsuspended],
        // The eviction that follows is what the log shows.
        EventKind::VacateAsked(_) => vec![],
        EventKind::Requeued => {
            vec![evicted(ad, userlog::Eviction::TerminatedAndRequeued(ending_of(ad)), None)]
        }
        EventKind::Edited(_) => Vec::new(),
    }
}

/// A 004 event: the run left its slot (`eviction` says how), with the run's
/// CPU time from the job's ad.
fn evicted(
    ad: &ClassAd,
    eviction: userlog::Eviction,
    reason: Option<String>,
) -> userlog::EventKind {
    let cpu = int(ad, "RemoteUserCpu").unwrap_or(0).max(0) as u64;
    userlog::EventKind::Evicted(userlog::Evicted {
        eviction,
        reason_code: 0,
        reason_subcode: 0,
        run_remote_usage: userlog::CpuUsage::from_secs(cpu, 0),
        run_local_usage: Default::default(),
        sent_bytes: 0,
        received_bytes: 0,
        reason,
        resources: Vec::new(),
    })
}

/// How the job's last run ended, from its ad.
fn ending_of(ad: &ClassAd) -> userlog::Ending {
    if ad.eval_attr(classad::name!("ExitBySignal")) == Value::Bool(true) {
        userlog::Ending::Abnormal {
            signal: int(ad, "ExitSignal").unwrap_or(0) as i32,
            core_file: None,
        }
    } else {
        userlog::Ending::Normal { return_value: int(ad, "ExitCode").unwrap_or(0) as i32 }
    }
}

/// A sink writing every job's events to its log, in UTC ISO dates, naming
/// `submit_host` in submit events: with the owner's rights (see
/// [`crate::userfs`]), or, for a spooled job, into its spool directory under
/// `spool` (fetched with its output).
pub fn sink_for(submit_host: String, accounts: Arc<Accounts>, spool: Option<PathBuf>) -> EventSink {
    Box::new(move |events: &[QueueEvent]| {
        // (path, owner, spooled) → events, in order.
        let mut logs: HashMap<(PathBuf, String, bool), Vec<JobEvent>> = HashMap::new();
        for e in events {
            // A job naming no log is passed over without making its ad.
            if !LOG_ATTRS.get().iter().any(|a| e.ad.has(a)) {
                continue;
            }
            let spooled = transfer::is_spooled(&e.ad);
            let paths = if spooled {
                match (&spool, log_path(&e.ad)) {
                    (Some(s), Some(_)) => {
                        vec![transfer::spooled_dir(s, e.id).join(transfer::SPOOLED_LOG)]
                    }
                    _ => continue,
                }
            } else {
                log_paths(&e.ad)
            };
            let owner = match e.ad.eval_attr(classad::name!("Owner")) {
                Value::Str(o) => o.to_string(),
                _ => String::new(),
            };
            let time = Timestamp::from_second(e.time).unwrap_or(Timestamp::UNIX_EPOCH);
            for path in paths {
                for kind in events_for(e, &submit_host) {
                    logs.entry((path.clone(), owner.clone(), spooled))
                        .or_default()
                        .push(JobEvent::new(EventJobId::from(e.id), time, kind));
                }
            }
        }
        for ((path, owner, spooled), evs) in logs {
            let write = || {
                if spooled && let Some(dir) = path.parent() {
                    // Opening the log reports what goes wrong here.
                    let _ = std::fs::create_dir_all(dir);
                }
                UserLog::open(&path, FormatOptions::utc())
                    .and_then(|mut log| evs.iter().try_for_each(|ev| log.append(ev)))
            };
            // A spooled job's log is the schedd's own file; anyone else's is
            // written with its owner's rights.
            let access = if spooled { Access::Own } else { accounts.access(&owner) };
            match Accounts::run(&access, write) {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::warn!("job event log {}: {err}", path.display()),
                Err(why) => tracing::warn!("job event log {}: {why}", path.display()),
            }
        }
    })
}
