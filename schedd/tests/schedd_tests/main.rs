//! The schedd's tests from outside the crate, in one binary: its HTTP API,
//! the queue, deferral on a virtual clock, routed copies and the job router.

mod api;
mod deferral;
mod queue;
mod routed;
mod router_service;
