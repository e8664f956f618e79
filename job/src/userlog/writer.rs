//! Appending to a log: [`UserLog`], one `write` per event on a file opened
//! with `O_APPEND`, so concurrent writers never interleave inside an event.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::{FormatOptions, InvalidEvent, JobEvent};

/// An error writing the event log, naming the file.
#[derive(Debug)]
pub enum UserLogError {
    /// The file could not be opened, written or synced.
    Io {
        /// The log file.
        path: PathBuf,
        /// What was being done: `open`, `write`, `fsync`.
        op: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
    /// The event cannot be written so that HTCondor's reader reads it back.
    Invalid {
        /// The log file.
        path: PathBuf,
        /// What is wrong with the event.
        error: InvalidEvent,
    },
}

impl fmt::Display for UserLogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserLogError::Io { path, op, source } => {
                write!(f, "job event log {}: {op} failed: {source}", path.display())
            }
            UserLogError::Invalid { path, error } => {
                write!(f, "job event log {}: not written: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for UserLogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UserLogError::Io { source, .. } => Some(source),
            UserLogError::Invalid { error, .. } => Some(error),
        }
    }
}

/// A job event log open for appending.
///
/// The file is opened with `O_APPEND` and each event goes out in a single
/// `write`, so events from several writers (several schedd threads, or a
/// schedd and DAGMan) never interleave inside an event.
#[derive(Debug)]
pub struct UserLog {
    path: PathBuf,
    file: File,
    opts: FormatOptions,
    fsync: bool,
}

impl UserLog {
    /// Opens (creating if needed) the log at `path`.
    pub fn open(path: impl AsRef<Path>, opts: FormatOptions) -> Result<UserLog, UserLogError> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|source| UserLogError::Io { path: path.clone(), op: "open", source })?;
        Ok(UserLog { path, file, opts, fsync: false })
    }

    /// Whether each append waits for the event to reach the disk (`fsync`).
    /// Off by default, as in HTCondor (`ENABLE_USERLOG_FSYNC` is for the
    /// schedd's own writes).
    pub fn with_fsync(mut self, fsync: bool) -> UserLog {
        self.fsync = fsync;
        self
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event.
    pub fn append(&mut self, event: &JobEvent) -> Result<(), UserLogError> {
        event.check().map_err(|error| UserLogError::Invalid { path: self.path.clone(), error })?;
        let text = event.to_text(&self.opts);
        self.write_text(text.as_bytes())
    }

    /// Appends several events in one write (they land together or not at all
    /// as far as other writers can see).
    pub fn append_all<'a>(
        &mut self,
        events: impl IntoIterator<Item = &'a JobEvent>,
    ) -> Result<(), UserLogError> {
        let mut text = String::new();
        for event in events {
            event
                .check()
                .map_err(|error| UserLogError::Invalid { path: self.path.clone(), error })?;
            text.push_str(&event.to_text(&self.opts));
        }
        if text.is_empty() {
            return Ok(());
        }
        self.write_text(text.as_bytes())
    }

    fn write_text(&mut self, bytes: &[u8]) -> Result<(), UserLogError> {
        let io = |op, source| UserLogError::Io { path: self.path.clone(), op, source };
        // One write(2) of the whole buffer; write_all only loops on the
        // (for regular files, exceptional) short write.
        self.file.write_all(bytes).map_err(|e| io("write", e))?;
        self.file.flush().map_err(|e| io("flush", e))?;
        if self.fsync {
            self.file.sync_data().map_err(|e| io("fsync", e))?;
        }
        Ok(())
    }
}
