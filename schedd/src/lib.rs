//! The schedd: the durable job queue and everything that acts on it.

pub use andes_job::files as transfer;
pub use andes_job::ids as job;
pub use andes_job::{api, userlog};

pub mod attrs;
pub mod deferral;
pub mod eventlog;
pub mod jobfiles;
pub mod policy;
pub mod quarantine;
pub mod queue;
pub mod room;
pub mod router;
pub mod schedd;
pub mod scheduler;
pub mod shadow;
pub mod spool;
pub mod userfs;
