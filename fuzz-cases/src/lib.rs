//! The checks of every fuzz target, one module per target, each with
//! `run(data)`: the cargo-fuzz targets in `fuzz/fuzz_targets` run them
//! under libFuzzer, and `tests/findings.rs` replays every input a campaign
//! found (`fuzz/findings`) through them on every test run. Being in the
//! root workspace, they are built and linted with everything else.

pub mod classad_json;
pub mod config;
pub mod cron;
pub mod eval;
pub mod guest_abi;
pub mod parse;
pub mod request;
pub mod snapshot;
pub mod submit;
pub mod trust;
pub mod wire;
