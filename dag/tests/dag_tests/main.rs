//! andes-dag's integration tests, in one binary.

mod dot;
mod language;
mod rescue;
mod run;
