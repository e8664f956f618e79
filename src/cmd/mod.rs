//! The `andes` subcommands.

pub mod classad;
