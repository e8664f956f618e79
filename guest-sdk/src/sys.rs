//! The raw host functions: wit-bindgen's bindings to `wit/job.wit` (made by
//! `cargo xtask bindings`, in `bindings.rs`) on wasm32,
//! stand-ins that behave as "not running under andes" elsewhere.
//!
//! Everything above this module is target-independent.

/// How important a log line is; mirrors the WIT enum `log.level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawLevel {
    Debug,
    Info,
    Warn,
    Error,
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::RawLevel;

    // The bindings are private: the crate's safe API is the public face.
    // They are wit-bindgen's, made once (`cargo xtask bindings`) rather
    // than by its macro at every build.
    #[allow(dead_code, missing_docs, unsafe_op_in_unsafe_fn, clippy::all)]
    mod bindings {
        include!("bindings.rs");
    }

    use bindings::andes::job::{attributes, checkpoint, control, log};

    pub(crate) fn checkpoint_requested() -> bool {
        checkpoint::checkpoint_requested()
    }

    /// `Err(None)` is never returned here: the host is always there on wasm32.
    pub(crate) fn save(state: &[u8]) -> Result<(), Option<String>> {
        checkpoint::save(state).map_err(Some)
    }

    pub(crate) fn load() -> Option<Vec<u8>> {
        checkpoint::load()
    }

    pub(crate) fn vacate_requested() -> bool {
        control::vacate_requested()
    }

    pub(crate) fn deadline() -> Option<u64> {
        control::deadline()
    }

    pub(crate) fn get(name: &str) -> Option<String> {
        attributes::get(name)
    }

    /// `Err(None)` is never returned here: the host is always there on wasm32.
    pub(crate) fn set(name: &str, value: &str) -> Result<(), Option<String>> {
        attributes::set(name, value).map_err(Some)
    }

    pub(crate) fn write(level: RawLevel, message: &str) {
        let level = match level {
            RawLevel::Debug => log::Level::Debug,
            RawLevel::Info => log::Level::Info,
            RawLevel::Warn => log::Level::Warn,
            RawLevel::Error => log::Level::Error,
        };
        log::write(level, message);
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::RawLevel;

    pub(crate) fn vacate_requested() -> bool {
        false
    }

    pub(crate) fn checkpoint_requested() -> bool {
        false
    }

    /// `Err(None)`: there is no host to keep it.
    pub(crate) fn save(_state: &[u8]) -> Result<(), Option<String>> {
        Err(None)
    }

    pub(crate) fn load() -> Option<Vec<u8>> {
        None
    }

    pub(crate) fn deadline() -> Option<u64> {
        None
    }

    pub(crate) fn get(_name: &str) -> Option<String> {
        None
    }

    /// `Err(None)`: there is no host to ask.
    pub(crate) fn set(_name: &str, _value: &str) -> Result<(), Option<String>> {
        Err(None)
    }

    pub(crate) fn write(level: RawLevel, message: &str) {
        let level = match level {
            RawLevel::Debug => "debug",
            RawLevel::Info => "info",
            RawLevel::Warn => "warn",
            RawLevel::Error => "error",
        };
        eprintln!("[andes {level}] {message}");
    }
}

pub(crate) use imp::*;
