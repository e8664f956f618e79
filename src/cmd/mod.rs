//! The `andes` subcommands.

pub mod classad;
pub mod run;
