//! The guest SDK for andes jobs.
//!
//! An andes job is a WebAssembly module built for `wasm32-wasip1` and run by an
//! andes execute host under wasmtime. Besides WASI (files of its own sandbox,
//! arguments, environment, standard streams, clocks), a job may import the
//! functions of the `andes:job` WIT world (`wit/job.wit` in the andes
//! repository). This crate wraps them in a safe API:
//!
//! - [`vacate_requested`] and [`vacate_deadline`]: HTCondor's soft kill. The
//!   machine is being reclaimed; save what you need and exit before the deadline.
//! - [`attr`]: read the job's own ClassAd and set the few attributes a job may
//!   set (`Progress` and names beginning with `Chirp`), as HTCondor's chirp does.
//! - [`log`]: lines that reach the job's event log on the submit side.
//! - [`checkpoint`]: cooperative checkpoints: save the job's own state, and
//!   load it back after a restart, on this host or another.
//!
//! # Example
//!
//! A job that works in chunks, reports its progress and stops cleanly when asked
//! to vacate:
//!
//! ```no_run
//! use andes_guest::{attr, log};
//!
//! const CHUNKS: u32 = 100;
//!
//! fn main() {
//!     let owner = attr::get_string("Owner").unwrap_or_else(|| "nobody".into());
//!     log::info(&format!("starting for {owner}"));
//!     for chunk in 0..CHUNKS {
//!         if andes_guest::vacate_requested() {
//!             log::warn(&format!("vacated after {chunk} chunks"));
//!             // Save the partial result here, then exit with the code the submit
//!             // file names as checkpoint_exit_code (85 by HTCondor's convention).
//!             std::process::exit(85);
//!         }
//!         // ... one chunk of real work ...
//!         let _ = attr::set_progress(f64::from(chunk + 1) / f64::from(CHUNKS));
//!     }
//!     attr::set_string("ChirpResult", "done").expect("ChirpResult is settable");
//! }
//! ```
//!
//! # Outside andes
//!
//! The host functions exist only when the crate is built for `wasm32`. On any
//! other target the crate still compiles and behaves as a job that is not
//! running under andes: [`vacate_requested`] is `false`, [`vacate_deadline`] and
//! [`attr::get`] are `None`, [`attr::set`] fails with
//! [`attr::AttrError::NotUnderAndes`], and [`log`] writes to standard error.
//! This lets a job's logic be tested natively.
//!
//! # The binary interface
//!
//! The functions are core-module imports lowered with the component model's
//! canonical ABI; their exact core signatures are in this crate's `README.md`.
//! A module that uses this crate exports `cabi_realloc`, which the host calls to
//! allocate the strings it returns.
#![warn(missing_docs)]

pub mod attr;
pub mod checkpoint;
pub mod log;
mod sys;

use std::time::{Duration, SystemTime};

/// Whether the execute host has asked this job to vacate.
///
/// This is HTCondor's soft kill (SIGTERM at vacate): the machine is being
/// reclaimed, and a job that sees `true` should save what it needs (see
/// [`vacate_deadline`] for how long it has) and exit. Once `true` it stays
/// `true`. The call is cheap: a job may poll it every few milliseconds of work.
///
/// Outside andes (not built for wasm32) it is always `false`.
pub fn vacate_requested() -> bool {
    sys::vacate_requested()
}

/// When a vacate is pending: the time after which the host kills the job.
///
/// `None` when no vacate has been requested (and outside andes), or in the
/// unlikely case that the host's deadline is beyond what [`SystemTime`] can hold.
/// Compare it with [`SystemTime::now`], or use [`vacate_time_left`].
pub fn vacate_deadline() -> Option<SystemTime> {
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(vacate_deadline_secs()?))
}

/// Like [`vacate_deadline`], as the host gives it: seconds since the Unix epoch.
pub fn vacate_deadline_secs() -> Option<u64> {
    sys::deadline()
}

/// When a vacate is pending: how long until the host kills the job, by this
/// job's clock (zero once the deadline has passed). `None` when no vacate has
/// been requested.
pub fn vacate_time_left() -> Option<Duration> {
    let deadline = vacate_deadline()?;
    Some(deadline.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_build_is_not_under_andes() {
        assert!(!vacate_requested());
        assert_eq!(vacate_deadline(), None);
        assert_eq!(vacate_deadline_secs(), None);
        assert_eq!(vacate_time_left(), None);
    }
}
