//! The andes execute host: the `andes host` daemon.
//!
//! The [`daemon`] drives `andes-startd`'s pure policy machine with real
//! starters (`andes-starter`, one per job), as `condor_startd` drives
//! `condor_starter`: it measures the machine, carries out the machine's
//! actions, keeps each slot's sandbox, and answers the pool ([`pool`]: the
//! collector's updates, the schedd's claims, activations and report polls)
//! and its owner ([`api`]: status and commands).
#![forbid(unsafe_code)]

pub mod api;
pub mod benchmark;
mod config;
pub mod daemon;
mod measure;
pub mod owed;
pub mod pool;
pub mod quarantine;
pub mod remote;
mod runs;

/// The startd state machine the [`daemon`] drives.
pub use andes_startd;
/// The starter the [`daemon`] runs jobs with.
pub use andes_starter;
