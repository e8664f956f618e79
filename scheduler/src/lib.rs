//! The schedd: the durable job queue and everything that acts on it.
#![warn(missing_docs)]

pub mod api;
pub mod attrs;
pub mod deferral;
pub mod eventlog;
pub mod job;
pub mod policy;
pub mod quarantine;
pub mod queue;
pub mod room;
pub mod router;
pub mod schedd;
pub mod shadow;
pub mod spool;
pub mod transfer;
pub mod userfs;
pub mod userlog;
