//! A job as every part of andes sees it, without the schedd: what the
//! command, the Python package and the fuzz targets need, so none of them
//! links the schedd's queue (and its SQLite) for it.
//!
//! - [`ids`]: `JobId` (`C.P`), `JobSelector` (`C` or `C.P`), `JobStatus` with
//!   HTCondor's codes, and `hold_code`, HTCondor's HoldReasonCodes and andes's
//!   own.
//! - [`api`]: the schedd's HTTP API, its routes and JSON bodies (and `factor`,
//!   which splits expanded job ads into a cluster ad and each job's own).
//! - [`files`]: the files a job names on the submit side (its inputs, where
//!   its outputs go), uploaded for `--spool` and fetched back by
//!   `andes transfer-data`, and the schedd's spool of them.
//! - [`userlog`]: HTCondor's user-log format: typed events, their exact text,
//!   a writer, a reader and a follower.
#![forbid(unsafe_code)]

pub mod api;
pub mod dagman;
pub mod files;
pub mod ids;
pub mod userlog;
