//! Log lines that reach the job's event log on the submit side.
//!
//! Unlike standard output and standard error, which come back as files when the
//! job ends, these lines travel with the host's updates while the job runs.
//! Each call writes one line; keep lines short. Outside andes (not built for
//! wasm32) they go to standard error as `[andes LEVEL] message`.
//!
//! ```no_run
//! andes_guest::log::info("loaded 12000 records");
//! andes_guest::log::warn(&format!("retrying chunk {}", 7));
//! ```

use crate::sys::{self, RawLevel};
use std::fmt;

/// How important a log line is (the WIT enum `andes:job/log.level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Detail useful when debugging the job.
    Debug,
    /// Normal progress.
    Info,
    /// Something unexpected that the job worked around.
    Warn,
    /// Something failed.
    Error,
}

impl Level {
    /// The level's name in lower case, as the WIT spells it: `debug`, `info`,
    /// `warn` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Writes one line at the given level.
pub fn write(level: Level, message: &str) {
    let raw = match level {
        Level::Debug => RawLevel::Debug,
        Level::Info => RawLevel::Info,
        Level::Warn => RawLevel::Warn,
        Level::Error => RawLevel::Error,
    };
    sys::write(raw, message);
}

/// Writes one line at [`Level::Debug`].
pub fn debug(message: &str) {
    write(Level::Debug, message);
}

/// Writes one line at [`Level::Info`].
pub fn info(message: &str) {
    write(Level::Info, message);
}

/// Writes one line at [`Level::Warn`].
pub fn warn(message: &str) {
    write(Level::Warn, message);
}

/// Writes one line at [`Level::Error`].
pub fn error(message: &str) {
    write(Level::Error, message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_named_as_in_the_wit() {
        assert!(Level::Debug < Level::Info && Level::Info < Level::Warn);
        assert!(Level::Warn < Level::Error);
        assert_eq!(Level::Warn.to_string(), "warn");
        // Natively these go to stderr; they must not panic.
        debug("d");
        info("i");
        warn("w");
        error("e");
    }
}
