//! What one expansion of a description carries: its macros and `+Attr`
//! lines, the job ads made so far, the modules they name, and paths made
//! absolute against the job's initial directory.

use std::collections::HashMap;

use classad::ClassAd;

use crate::Context;
use crate::macros::{Macros, Origin};

/// A Wasm module some of the jobs run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    /// The path as the job ad's `Cmd` spells it.
    pub path: String,
    /// `sha256:<hex>`, as in the job ad's `CmdDigest`.
    pub digest: String,
    /// The module's bytes.
    pub bytes: Vec<u8>,
}

#[derive(Default)]
/// The modules a submission's jobs name, each read and hashed once.
pub(crate) struct ModuleCache {
    /// Digest, length, and whether `andes compile` instrumented it.
    pub(crate) by_path: HashMap<String, (String, u64, bool)>,
    pub(crate) modules: Vec<Module>,
}

impl ModuleCache {
    pub fn into_modules(self) -> Vec<Module> {
        self.modules
    }
}

/// One expansion's state, carried from statement to statement and proc to
/// proc.
pub(crate) struct Run<'c, 'f> {
    pub ctx: &'c Context<'f>,
    pub macros: Macros,
    /// `+Attr`/`MY.Attr` lines: name, raw value, origin (later wins).
    pub attrs: Vec<(String, String, Origin)>,
    pub jobs: Vec<ClassAd>,
    pub modules: ModuleCache,
    /// Sizes in KiB of input files, by path.
    pub sizes: HashMap<String, u64>,
    pub source: String,
    /// Bytes of the job ads made so far, printed.
    pub ad_bytes: usize,
}

/// Counts the bytes written to it (an ad's printed size, without printing it
/// anywhere).
pub(crate) struct ByteCount(pub(crate) usize);

impl std::fmt::Write for ByteCount {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 = self.0.saturating_add(s.len());
        Ok(())
    }
}

/// `path` made absolute against `dir`.
pub(crate) fn resolve(dir: &str, path: &str) -> String {
    if path.starts_with('/') || dir.is_empty() {
        path.to_string()
    } else if path.is_empty() {
        dir.to_string()
    } else {
        format!("{}/{}", dir.trim_end_matches('/'), path)
    }
}

/// Removes `.` components, doubled and trailing slashes.
pub(crate) fn normalize(p: &str) -> String {
    let abs = p.starts_with('/');
    let parts: Vec<&str> = p.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    let joined = parts.join("/");
    if abs { format!("/{joined}") } else { joined }
}
