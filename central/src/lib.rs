//! The central manager: HTCondor's condor_collector and condor_negotiator,
//! and the negotiation cycle that joins them.
//!
//! - [`collector`]: the store of machine, schedd and submitter ads (pure), and
//!   its routes (`collector::api`: who may publish what).
//! - [`negotiator`]: the matchmaking plan (pure: a snapshot in, matches out),
//!   autoclusters, and the accountant of user priorities.
//! - [`manager`]: the daemon's shell: a negotiation cycle every
//!   NEGOTIATOR_INTERVAL (demand from each schedd, the plan, matches to the
//!   schedds and notices to the hosts), the accountant kept on disk, and
//!   `andes userprio`'s routes.
//! - [`quarantine`]: what the negotiator was matching when it stopped, so
//!   that it never stops on the same request twice.
//!
//! It shares nothing with the schedd but the wire (`andes-protocol`): no
//! queue, no SQLite.
#![forbid(unsafe_code)]

pub mod collector;
pub mod manager;
pub mod negotiator;
pub mod quarantine;
