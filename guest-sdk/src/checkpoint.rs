//! Cooperative checkpoints: the job saves its own state and reads it back
//! after a restart, on this host or another. No instrumentation is needed,
//! and the state is whatever bytes the job chooses.
//!
//! ```no_run
//! use andes_guest::checkpoint;
//!
//! // Where the work stands: resume from the last save, if any.
//! let mut done: u64 = checkpoint::load()
//!     .and_then(|b| b.try_into().ok())
//!     .map(u64::from_le_bytes)
//!     .unwrap_or(0);
//! while done < 1_000 {
//!     // ... one step of real work ...
//!     done += 1;
//!     if checkpoint::requested() {
//!         checkpoint::save(&done.to_le_bytes()).expect("saved");
//!     }
//! }
//! ```

use std::fmt;

/// Why a save did not happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaveError {
    /// The host refused it; the message says why (too large, say).
    Refused(String),
    /// Not running under andes: there is no host to keep it.
    NotUnderAndes,
}

impl fmt::Display for SaveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SaveError::Refused(m) => write!(f, "the host refused the checkpoint: {m}"),
            SaveError::NotUnderAndes => f.write_str("not running under andes"),
        }
    }
}

impl std::error::Error for SaveError {}

/// True when the host asks the job to checkpoint now (periodically, or
/// before a vacate). It stays true until the job calls [`save`]. Cheap:
/// poll it between steps of work. Outside andes it is always false.
pub fn requested() -> bool {
    crate::sys::checkpoint_requested()
}

/// Stores `state` as the job's checkpoint, replacing the previous one; the
/// host keeps it with the job, durably, and [`load`] returns it when the
/// job runs again.
pub fn save(state: &[u8]) -> Result<(), SaveError> {
    crate::sys::save(state).map_err(|e| match e {
        Some(m) => SaveError::Refused(m),
        None => SaveError::NotUnderAndes,
    })
}

/// The job's last saved state: after a restart, what it saved before (in
/// this run, its latest save); `None` on a first start and outside andes.
pub fn load() -> Option<Vec<u8>> {
    crate::sys::load()
}
