//! Daemon logs as HTCondor keeps them: each daemon writes its own file in
//! `LOG` (SchedLog, StartLog, CollectorLog, NegotiatorLog; each path its own
//! knob: SCHEDD_LOG, STARTD_LOG, ...), and when one would grow past
//! `MAX_<SUBSYS>_LOG` bytes (default `MAX_DEFAULT_LOG`, 10 MiB) it is
//! renamed `<file>.old` (replacing the previous one) and a new file begun.
//! The same lines go to standard error, as before.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::settings::Settings;

/// HTCondor's MAX_DEFAULT_LOG: 10 MiB.
const MAX_DEFAULT_LOG: u64 = 10 << 20;

/// A daemon whose log a process writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Daemon {
    /// `andes schedd` (with its shadows and job router).
    Schedd,
    /// `andes host` (the startd and its starters).
    Startd,
    /// The collector of `andes central-manager`.
    Collector,
    /// The negotiator of `andes central-manager`.
    Negotiator,
}

impl Daemon {
    /// HTCondor's subsystem name (the knobs' prefix).
    fn subsystem(self) -> &'static str {
        match self {
            Daemon::Schedd => "SCHEDD",
            Daemon::Startd => "STARTD",
            Daemon::Collector => "COLLECTOR",
            Daemon::Negotiator => "NEGOTIATOR",
        }
    }

    /// HTCondor's file name for its log.
    fn file_name(self) -> &'static str {
        match self {
            Daemon::Schedd => "SchedLog",
            Daemon::Startd => "StartLog",
            Daemon::Collector => "CollectorLog",
            Daemon::Negotiator => "NegotiatorLog",
        }
    }

    /// Whether an event of `target` (its module path) is this daemon's work.
    fn owns(self, target: &str) -> bool {
        // Without allocating: this runs for every event the process logs.
        let under =
            |p: &str| target.strip_prefix(p).is_some_and(|r| r.is_empty() || r.starts_with("::"));
        match self {
            Daemon::Schedd => false,
            Daemon::Startd => {
                under("andes_host")
                    || under("andes_startd")
                    || under("andes_starter")
                    || under("andes::cmd::host")
            }
            Daemon::Collector => {
                under("andes_central::collector")
                    || under("andes_central::manager")
                    || under("andes::cmd::central")
            }
            Daemon::Negotiator => under("andes_central::negotiator"),
        }
    }
}

/// A log file that starts over (the old one kept as `.old`) past a size.
#[derive(Debug)]
pub struct Rotating {
    path: PathBuf,
    max: u64,
    state: Mutex<Option<(File, u64)>>,
}

impl Rotating {
    /// Opens (appending, creating) the log at `path`, which starts over past
    /// `max` bytes.
    pub fn open(path: &Path, max: u64) -> std::io::Result<Rotating> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        let len = file.metadata()?.len();
        Ok(Rotating { path: path.to_path_buf(), max, state: Mutex::new(Some((file, len))) })
    }

    /// The `.old` file it moves to.
    fn old(&self) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(".old");
        PathBuf::from(p)
    }

    fn write_line(&self, buf: &[u8]) -> std::io::Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, len)) = &*s
            && *len > 0
            && len.saturating_add(buf.len() as u64) > self.max
        {
            // Close before the rename (Windows renames no open file).
            *s = None;
            std::fs::rename(&self.path, self.old())?;
        }
        if s.is_none() {
            let file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
            let len = file.metadata()?.len();
            *s = Some((file, len));
        }
        let Some((file, len)) = s.as_mut() else { return Ok(()) };
        file.write_all(buf)?;
        *len += buf.len() as u64;
        Ok(())
    }
}

/// One event's bytes on their way to a [`Rotating`] log, and to standard
/// error too when it is a copy ([`Logs::tee`]).
pub struct LogWriter<'a> {
    log: &'a Rotating,
    tee: bool,
}

impl Write for LogWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.tee {
            // Standard error is a copy: a closed one stops no log.
            let _ = std::io::stderr().write_all(buf);
        }
        self.log.write_line(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The logs of the daemons one process runs: an event goes to the daemon
/// whose module wrote it, else to the first (the process's own).
#[derive(Clone)]
struct Logs {
    logs: Arc<Vec<(Daemon, Rotating)>>,
    /// Whether each line goes to standard error too, formatted once for
    /// both (a daemon's standard error that is no terminal, where the same
    /// plain text serves: a line is otherwise formatted twice, about 4 % of
    /// a busy pool's CPU).
    tee: bool,
}

impl<'a> MakeWriter<'a> for Logs {
    type Writer = LogWriter<'a>;
    fn make_writer(&'a self) -> LogWriter<'a> {
        LogWriter { log: &self.logs[0].1, tee: self.tee }
    }
    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> LogWriter<'a> {
        let target = meta.target();
        let log = self.logs.iter().find(|(d, _)| d.owns(target)).unwrap_or(&self.logs[0]);
        LogWriter { log: &log.1, tee: self.tee }
    }
}

/// Where daemon `d`'s log goes and how large it grows, from `s`.
fn log_of(s: &Settings, d: Daemon) -> Result<(PathBuf, u64)> {
    let sub = d.subsystem();
    let path = match s.get(&format!("{sub}_LOG"))? {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(s.require("LOG")?).join(d.file_name()),
    };
    let max = match s.int(&format!("MAX_{sub}_LOG"))? {
        Some(n) => n,
        None => s.int("MAX_DEFAULT_LOG")?.unwrap_or(MAX_DEFAULT_LOG as i64),
    };
    Ok((path, u64::try_from(max).unwrap_or(0).max(1)))
}

/// Logs to standard error only (a command that is not a daemon).
pub fn init_stderr() {
    install(Vec::new());
}

/// Logs this process's `daemons` (the first its own) to their files and to
/// standard error: `info` and up unless `RUST_LOG` says otherwise.
pub fn init(s: &Settings, daemons: &[Daemon]) -> Result<()> {
    let mut logs = Vec::new();
    for &d in daemons {
        let (path, max) = log_of(s, d)?;
        if let Some(dir) = path.parent() {
            andes_beneath::private::create_dirs_reachable(dir)
                .with_context(|| format!("creating the log directory {}", dir.display()))?;
        }
        let log = Rotating::open(&path, max)
            .with_context(|| format!("opening the {} log {}", d.file_name(), path.display()))?;
        logs.push((d, log));
    }
    install(logs);
    Ok(())
}

fn install(logs: Vec<(Daemon, Rotating)>) {
    use tracing_subscriber::Layer;
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
    };
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // A terminal gets its own, coloured copy; any other standard error the
    // files' lines (`tee`).
    let tee = !terminal && !logs.is_empty();
    let stderr = (!tee).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(terminal)
            .with_target(false)
            .with_filter(filter())
    });
    let files = (!logs.is_empty()).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(Logs { logs: Arc::new(logs), tee })
            .with_ansi(false)
            .with_target(false)
            .with_filter(filter())
    });
    let _ = tracing_subscriber::registry().with(stderr).with(files).try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past its size a log is moved to `.old` (replacing the last one) and
    /// begun again; a line never straddles two files.
    #[test]
    fn a_log_past_its_size_starts_over_keeping_one_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SchedLog");
        let log = Rotating::open(&path, 100).unwrap();
        let line = |n: usize| format!("line {n:02} {}\n", "x".repeat(30));
        for n in 0..7 {
            log.write_line(line(n).as_bytes()).unwrap();
        }
        // 40-byte lines, 100 bytes a file: 2 a file.
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(&path), line(6));
        assert_eq!(read(&dir.path().join("SchedLog.old")), line(4) + &line(5));
        assert!(std::fs::read_dir(dir.path()).unwrap().count() == 2, "one old file");
        // Reopened, a log goes on where it was.
        drop(log);
        let log = Rotating::open(&path, 100).unwrap();
        log.write_line(line(7).as_bytes()).unwrap();
        assert_eq!(read(&path), line(6) + &line(7));
    }

    /// Each event goes to the daemon whose module wrote it, the rest to the
    /// process's own.
    #[test]
    fn events_go_to_the_log_of_the_daemon_that_wrote_them() {
        let owner = |t: &str| {
            [Daemon::Schedd, Daemon::Startd, Daemon::Collector, Daemon::Negotiator]
                .into_iter()
                .find(|d| d.owns(t))
        };
        assert_eq!(owner("andes_central::negotiator::cycle"), Some(Daemon::Negotiator));
        assert_eq!(owner("andes_central::collector"), Some(Daemon::Collector));
        assert_eq!(owner("andes_host::pool"), Some(Daemon::Startd));
        assert_eq!(owner("andes_starter::starter"), Some(Daemon::Startd));
        assert_eq!(owner("andes::cmd::host"), Some(Daemon::Startd));
        assert_eq!(owner("andes::cmd::central"), Some(Daemon::Collector));
        assert_eq!(owner("andes_hostile"), None);
        assert_eq!(owner("andes_schedd::shadow"), None);
    }
}
