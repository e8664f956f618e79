//! The `andes` subcommands.

pub mod act;
pub mod central;
pub mod classad;
pub mod client;
pub mod compile;
pub mod cron;
pub mod host;
pub mod keygen;
pub mod pool;
pub mod q;
pub mod router;
pub mod run;
pub mod schedd;
pub mod snapshot;
pub mod status;
pub mod submit;
pub mod transfer;
pub mod vacate;
