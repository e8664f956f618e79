//! The starter's integration tests, one binary: real wasmtime instances
//! running the samples and WAT modules in throwaway sandboxes.

mod common;
mod deferral;
mod hostile;
mod module_cache;
mod starter;
mod transparent;
mod unmetered;
mod wit;
