//! The `andes` subcommands.

pub mod act;
pub mod classad;
pub mod client;
pub mod host;
pub mod keygen;
pub mod q;
pub mod run;
pub mod schedd;
pub mod submit;
pub mod vacate;
