//! The pool side of the host daemon: slot offers (claim ids), claims from
//! schedds, activations with the module and input files, the starter's
//! reports (the shadow's long poll), job leases, output files, and the ads
//! sent to the collector.
//!
//! The routes are listed in `andes_protocol::pool`. Every exchange is started
//! by the schedd (its shadow polls), so a host never needs to reach a submit
//! machine; the host reaches only the collector.
//!
//! [`claim`]: the claims and the requests; [`files`]: the job's files;
//! [`routes`]: the routes; [`publisher`]: the collector's updates; the
//! daemon's answers to the requests are in `answer`.

mod answer;
pub mod claim;
pub mod files;
pub mod publisher;
pub mod routes;
#[cfg(test)]
mod tests;

pub use claim::*;
pub use files::*;
pub use publisher::*;
pub use routes::{router, routes};

/// The sandbox names of the job's streams: one contract, in `andes-protocol`.
pub use andes_protocol::pool::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};
