//! The andes starter: runs one job's Wasm module (wasm32-wasip1)
//! under wasmtime, in a sandbox that sees only the job's own directory, with
//! limits enforced by the runtime, and with the control surface the startd
//! drives (suspend, resume, vacate, hard kill), as `condor_starter` is to
//! `condor_startd`. The `andes host` daemon (`andes-host`) runs one per job;
//! `andes run` runs one on its own.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use andes_starter::{Control, Host, HostConfig, JobSpec, Limits, SystemClock};
//!
//! let host = Host::new(HostConfig::default())?;
//! let ad = classad::parse_ad(r#"[ Cmd = "hello.wasm"; Arguments = "a 'b c'"; Out = "out.txt" ]"#)?;
//! let spec = JobSpec {
//!     module: std::fs::read("hello.wasm")?.into(),
//!     limits: Limits::from_ad(&ad),
//!     ad,
//!     sandbox: "/tmp/job1".into(),
//!     inherit_stdio: false,
//!     digest: None,
//!     saved_state: None,
//!     transparent: None,
//!     metered: false,
//!     sandbox_empty: false,
//! };
//! let result = host.run(spec, Control::new(), Arc::new(SystemClock)).await;
//! println!("{}", result.to_ad());
//! # Ok(()) }
//! ```

pub mod control;
pub mod cputime;
mod dirty;
pub mod engine;
pub mod imports;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod jobthread;
#[cfg(target_os = "linux")]
mod memory;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod park;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod preempt;
pub mod sandbox;
pub mod starter;
mod state;
mod ticker;
pub mod transparent;

pub use control::{Clock, Control, SystemClock, Usage, VirtualClock};
pub use engine::{Host, HostConfig};
pub use starter::{Ending, JobResult, JobSpec, Limits};
pub use transparent::{Checkpoint, Transparent};
