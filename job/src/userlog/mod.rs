//! The job event log in HTCondor's user-log format.
//!
//! The schedd writes each job's events to the file named by `log = FILE` in
//! the submit file, in the text format that `condor_wait`, DAGMan and the
//! htcondor Python package's `JobEventLog` read:
//!
//! ```text
//! 000 (042.000.000) 2026-11-22 04:05:49 Job submitted from host: <127.0.0.1:9618>
//! ...
//! 005 (042.000.000) 2026-11-22 04:06:10 Job terminated.
//!     (1) Normal termination (return value 0)
//! ...
//! ```
//!
//! (Body lines after the first start with a tab, shown here as spaces.)
//! Each event is a header line (three-digit event number, `(cluster.proc.subproc)`,
//! date and time, then the first line of the body), more body lines, and a
//! line `...` that ends it. [`JobEvent`] is one event, [`JobEvent::to_text`]
//! its exact text, [`UserLog`] appends events to a file (one `write` per
//! event on a file opened with `O_APPEND`, so concurrent writers never
//! interleave inside an event), and [`parse_log`] reads a log back.
//!
//! Dates are written as HTCondor 25 writes them by default
//! (`DEFAULT_USERLOG_FORMAT_OPTIONS` unset): ISO `2026-11-22 04:05:49` in
//! local time. [`FormatOptions`] selects the other forms HTCondor's reader
//! accepts: UTC (`2026-11-22 04:05:49Z`), milliseconds, and the legacy
//! `11/22 04:05:49` without a year.
//!
//! Free text never breaks the format: in every one-line field a newline
//! becomes `|` and a carriage return a space, as HTCondor's event setters do
//! (a NUL byte also becomes a space); only the error text of a remote-error
//! event spans lines, each indented by a tab as HTCondor writes it.
//!
//! The module is cut by concept:
//!
//! - [`number`]: HTCondor's event numbers.
//! - `event`: [`JobEvent`], [`EventKind`] and each event's fields.
//! - `text`: [`FormatOptions`] and [`JobEvent::to_text`], the exact text of an event.
//! - `resources`: the `Partitionable Resources` table of events 004 and 005,
//!   written and read.
//! - `old_syntax`: old ClassAd syntax as the log writes and reads it (event 028).
//! - `check`: [`JobEvent::check`], what HTCondor's reader cannot read back.
//! - `ad`: [`JobEvent::to_ad`], the event as HTCondor's event ClassAd.
//! - `writer`: [`UserLog`], appending events to a file.
//! - `parse`: [`parse_log`], a log's text back to events.
//! - `reader`: [`read_log`] and the [`Follower`] of a growing log.

mod ad;
mod check;
mod event;
pub mod number;
mod old_syntax;
mod parse;
mod reader;
mod resources;
mod text;
mod writer;

#[cfg(test)]
mod tests;

pub use check::InvalidEvent;
pub use event::{
    AttributeUpdate, Checkpointed, ClusterRemove, ClusterSubmit, Completion, CpuUsage,
    Disconnected, Ending, EventJobId, EventKind, Evicted, Eviction, ExecErrorType, Execute,
    ImageSize, JobEvent, ReconnectFailed, Reconnected, RemoteError, ResourceUsage, ShadowException,
    Submit, Terminated,
};
pub use parse::{ParseError, ParseOptions, parse_log};
pub use reader::{Follower, MAX_PENDING_EVENT, ReadError, read_log};
pub use text::{FormatOptions, one_line};
pub use writer::{UserLog, UserLogError};

/// The line that ends every event.
pub const SYNC_LINE: &str = "...";
