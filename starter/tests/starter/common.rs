//! What the starter's test suites share: the sample modules, WAT modules,
//! throwaway sandboxes and a job's spec from its ad.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use andes_starter::{Ending, JobResult, JobSpec, Limits};
use classad::parse_ad;

/// A sample module built for wasm32-wasip1 (`cargo xtask test` builds them).
pub fn sample(name: &str) -> Arc<[u8]> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../samples/target/wasm32-wasip1/release")
        .join(format!("{name}.wasm"));
    std::fs::read(&p)
        .unwrap_or_else(|e| {
            panic!("{}: {e}; build the samples first (`cargo xtask test` does)", p.display())
        })
        .into()
}

/// A module from its WAT text.
pub fn wat(text: &str) -> Arc<[u8]> {
    wat::parse_str(text).expect("wat").into()
}

/// A fresh, empty sandbox directory, removed when dropped.
pub struct Sandbox(pub PathBuf);

impl Sandbox {
    pub fn new() -> Sandbox {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("andes-starter-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Sandbox(p)
    }

    /// A file of the sandbox, empty if it is not there.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.0.join(name)).unwrap_or_default()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The spec of a job with this ad, run in `sandbox` with the ad's limits.
pub fn spec(module: Arc<[u8]>, ad: &str, sandbox: &Sandbox) -> JobSpec {
    let ad = parse_ad(ad).unwrap();
    JobSpec {
        module,
        limits: Limits::from_ad(&ad),
        ad,
        sandbox: sandbox.0.clone(),
        inherit_stdio: false,
        digest: None,
        saved_state: None,
        transparent: None,
        metered: false,
        sandbox_empty: false,
    }
}

/// The hold code and reason of a held job (fails the test otherwise).
pub fn held(r: &JobResult) -> (i32, String) {
    match &r.ending {
        Ending::Held { code, reason, .. } => (*code, reason.clone()),
        other => panic!("expected a hold, got {other:?}"),
    }
}
