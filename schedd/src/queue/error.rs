//! What a queue request can fail with, and the evaluation budget of a request.

use serde::{Deserialize, Serialize};

use crate::room::DISK_FULL;
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// Steps one request's constraint may take over all the jobs it is evaluated
/// on (about a second of work); past it the request is refused.
pub const REQUEST_STEPS: u64 = 20_000_000;

/// Jobs read per hold of the queue's read lock when a request walks the queue:
/// the lock is never held while a constraint is evaluated.
pub(crate) const READ_CHUNK: usize = 256;

pub(crate) fn too_costly(what: &str) -> QueueError {
    QueueError::Invalid(format!(
        "the {what} takes more than {REQUEST_STEPS} evaluation steps over the jobs it is \
         applied to; simplify it"
    ))
}

/// Why the queue refused a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueError {
    /// A named job or cluster does not exist.
    NotFound(String),
    /// The actor may not do this (another owner's job, a protected attribute).
    Forbidden(String),
    /// The request itself is wrong (bad expression, empty submit, bad state).
    Invalid(String),
    /// A submit names a module or input its submitter has not uploaded (or
    /// whose upload was collected): upload it, then submit again.
    NotUploaded(String),
    /// The database failed; nothing of the request was kept.
    Storage(String),
}

impl std::fmt::Display for QueueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueError::NotFound(s)
            | QueueError::Forbidden(s)
            | QueueError::Invalid(s)
            | QueueError::NotUploaded(s) => f.write_str(s),
            QueueError::Storage(s) => write!(f, "job queue storage failed: {s}"),
        }
    }
}

impl std::error::Error for QueueError {}

impl From<rusqlite::Error> for QueueError {
    fn from(e: rusqlite::Error) -> QueueError {
        match &e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull => {
                QueueError::Storage(format!("{DISK_FULL}: {e}"))
            }
            _ => QueueError::Storage(e.to_string()),
        }
    }
}
