//! andes-dag's integration tests, in one binary.

mod language;
mod rescue;
mod run;
