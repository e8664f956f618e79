//! Loads arbitrary text as HTCondor configuration, then expands every
//! defined macro and the whole input as a string. Nothing may panic or hang.
//!
//! `include` paths resolve against `fuzz/include_root/`, which holds a few
//! small files (including ones that include themselves or each other).
//! Inputs that both mention `include` and contain a `/` are skipped so that
//! the fuzzer cannot open arbitrary files such as FIFOs or `/dev/kmsg`,
//! whose reads block; without `/` (which no macro function can produce
//! from input lacking one, and `$ENV` sees an empty environment) an include
//! can only name an entry of `include_root/`.

use andes_config::Config;

const ORIGIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/include_root/fuzz.config");

/// Runs one input through the target's checks; panics on a failure.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.contains('/') && text.to_ascii_lowercase().contains("include") {
        return;
    }
    let mut cfg = Config::new();
    let _ = cfg.load_str(text, ORIGIN);
    let names: Vec<String> = cfg.names().map(str::to_string).collect();
    for name in &names {
        assert!(cfg.is_defined(name), "{name:?} listed by names() but not defined");
        let _ = cfg.raw(name);
        let _ = cfg.location(name);
        let _ = cfg.get(name);
    }
    let _ = cfg.expand(text);
    // The same with a subsystem set: lookups try `SUB.NAME` first.
    cfg.set_subsystem(Some("STARTD"));
    for name in &names {
        let _ = cfg.get(name);
    }
}
