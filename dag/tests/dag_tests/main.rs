//! andes-dag's integration tests, in one binary.

mod language;
mod run;
