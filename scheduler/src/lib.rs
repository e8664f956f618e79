//! The schedd: the durable job queue and everything that acts on it.
#![warn(missing_docs)]

pub mod api;
pub mod eventlog;
pub mod job;
pub mod policy;
pub mod queue;
pub mod schedd;
pub mod userlog;
