//! What every program that talks to an andes pool shares: the configuration as
//! the commands read it ([`settings`]), the user's keys and a signed session to a
//! daemon ([`session`]), and the submit itself ([`submit`]: expand a submit
//! description, upload its modules and inputs, queue its jobs once), and the
//! fetch of spooled jobs' output ([`transfer`]).
//!
//! The `andes` command and the Python package (`python/`) both stand on it, so a
//! script finds the pool, the keys and the errors exactly as the command does.
#![forbid(unsafe_code)]

pub mod session;
pub mod settings;
pub mod submit;
pub mod transfer;
