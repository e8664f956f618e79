//! Reading a log file: [`read_log`] for a whole file, and the [`Follower`]
//! that reads a growing log event by event (`andes wait`, `andes watch`);
//! [`ReadError`] names the file and the line.

use std::fmt;
use std::path::{Path, PathBuf};

use super::{JobEvent, ParseError, ParseOptions, SYNC_LINE, parse_log};

/// Reads the events of a log file. Errors name the file and the line.
pub fn read_log(path: impl AsRef<Path>, opts: &ParseOptions) -> Result<Vec<JobEvent>, ReadError> {
    let path = path.as_ref();
    let bytes =
        std::fs::read(path).map_err(|source| ReadError::Io { path: path.to_path_buf(), source })?;
    let text = String::from_utf8_lossy(&bytes);
    parse_log(&text, opts).map_err(|error| ReadError::Parse { path: path.to_path_buf(), error })
}

/// The longest event a [`Follower`] waits to see closed, bytes: a log
/// whose last event grows past it without its `...` line is refused.
pub const MAX_PENDING_EVENT: usize = 16 << 20;

/// Reads a log as it grows (condor_wait, condor_watch_q, a program
/// following its jobs): each [`Follower::poll`] returns the events closed
/// (by their `...` line) since the last, leaving an event still being
/// written for a later poll. Errors name the file and the line.
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    opts: ParseOptions,
    /// Bytes read up to here.
    offset: u64,
    /// Read but not yet closed by a `...` line.
    pending: Vec<u8>,
    /// Lines before `pending`, for error messages.
    lines_before: usize,
}

impl Follower {
    /// Follows the log at `path` from its start (it need not exist yet).
    pub fn new(path: impl AsRef<Path>, opts: ParseOptions) -> Follower {
        Follower {
            path: path.as_ref().to_path_buf(),
            opts,
            offset: 0,
            pending: Vec::new(),
            lines_before: 0,
        }
    }

    /// The log followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The events closed since the last poll, in the log's order.
    pub fn poll(&mut self) -> Result<Vec<JobEvent>, ReadError> {
        use std::io::{Read, Seek};
        let path = self.path.clone();
        let io = |source| ReadError::Io { path: path.clone(), source };
        let mut f = std::fs::File::open(&path).map_err(io)?;
        let len = f.metadata().map_err(io)?.len();
        if len < self.offset {
            // Truncated or replaced: HTCondor's readers start over too.
            *self = Follower::new(&path, self.opts.clone());
        }
        f.seek(std::io::SeekFrom::Start(self.offset)).map_err(io)?;
        let room = (MAX_PENDING_EVENT + 1).saturating_sub(self.pending.len());
        let read = f.take(room as u64).read_to_end(&mut self.pending).map_err(io)?;
        self.offset += read as u64;
        // The events up to the last `...` line are whole.
        let sync = format!("\n{SYNC_LINE}\n");
        let end = if self.pending.starts_with(format!("{SYNC_LINE}\n").as_bytes()) {
            Some(SYNC_LINE.len() + 1)
        } else {
            None
        };
        let end = self
            .pending
            .windows(sync.len())
            .rposition(|w| w == sync.as_bytes())
            .map(|i| i + sync.len())
            .or(end);
        let Some(end) = end else {
            if self.pending.len() > MAX_PENDING_EVENT {
                return Err(ReadError::Parse {
                    path: self.path.clone(),
                    error: ParseError {
                        line: self.lines_before + 1,
                        msg: format!("an event runs past {MAX_PENDING_EVENT} bytes unclosed"),
                    },
                });
            }
            return Ok(Vec::new());
        };
        let whole: Vec<u8> = self.pending.drain(..end).collect();
        let text = String::from_utf8_lossy(&whole);
        let before = self.lines_before;
        self.lines_before += text.matches('\n').count();
        parse_log(&text, &self.opts).map_err(|mut error| {
            error.line += before;
            ReadError::Parse { path: self.path.clone(), error }
        })
    }
}

/// An error reading a log file.
#[derive(Debug)]
pub enum ReadError {
    /// The file could not be read.
    Io {
        /// The log file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The file is not a well-formed log.
    Parse {
        /// The log file.
        path: PathBuf,
        /// Where and what.
        error: ParseError,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            ReadError::Parse { path, error } => {
                write!(f, "{}:{}: {}", path.display(), error.line, error.msg)
            }
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            ReadError::Parse { error, .. } => Some(error),
        }
    }
}
