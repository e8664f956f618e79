//! The durable job queue.
//!
//! **Durability.** SQLite (bundled) in WAL mode with `synchronous = FULL`. Every
//! change goes through one writer thread, which takes all the requests waiting at
//! that moment, applies them in one transaction and commits once (group commit):
//! a caller's future resolves only after the commit that holds its change is on
//! disk. The in-memory queue is changed under the same write lock, held until the
//! commit returns, so no reader ever sees a change that is not yet written. A
//! batch holding only changes whose loss in a power cut what is already synced
//! makes good (a job's start, whose activation intent was synced before it was
//! sent; match and usage counters: `PoolOp::must_sync`) commits with
//! `synchronous = NORMAL`: written, not waited for; the next synced commit syncs
//! it too, and a process that dies loses nothing of it. If a
//! commit fails, every caller of the batch gets the error and the in-memory queue
//! is reloaded from the database, the source of truth.
//!
//! **Shape.** Like HTCondor's job queue, a cluster ad holds what its jobs share and
//! each job (proc) ad holds only what is its own; a job's full ad is the cluster ad
//! overlaid with its proc ad, plus `ProcId`, `JobStatus`, `EnteredCurrentStatus` and
//! `GlobalJobId`, which are kept in fields rather than as attributes. A million
//! queued jobs of a few clusters therefore cost little more than their keys.
//!
//! **Authority.** Every change names an [`Actor`]. The queue sets `Owner` from it
//! on submit, refuses changes by a user to another user's jobs (an admin may change
//! any job), and refuses `qedit` of protected attributes.
//!
//! The module's files, one concept each: [`handle`] (the [`Queue`] handle),
//! [`state`] (the queue in memory), [`store`] (SQLite), [`commit`] (the
//! writer and its group commit), [`txn`] (one transaction), [`ops`],
//! [`actor`], [`config`], [`error`]; what a transaction does, by concept:
//! [`change`], [`run`], [`routed`], [`cron`], [`uploads`].

pub mod actor;
pub mod ads;
pub mod change;
pub mod commit;
pub mod config;
pub mod cron;
pub mod error;
pub mod handle;
pub mod ops;
pub mod routed;
pub mod run;
pub mod state;
pub mod store;
#[cfg(test)]
mod tests;
pub mod txn;
pub mod uploads;

pub use crate::attrs::{ACTIVATION_PENDING, CLAIM_ID_ATTR, ROUTED_BY, ROUTED_FROM, ROUTED_TO};
pub use actor::{Actor, reader_of};
pub use ads::{job_uploads, uploader_of};
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};
pub use config::{
    DEFAULT_UPLOAD_GRACE, DEFAULT_UPLOAD_QUOTA_BYTES, DEFAULT_UPLOAD_QUOTA_COUNT, JobLimits,
    QueueConfig,
};
pub use error::{QueueError, REQUEST_STEPS};
pub use handle::Queue;
pub use ops::{EventAd, EventKind, EventSink, JobOp, LeftHook, PoolOp, QueueEvent};
pub use routed::MIRRORED_USAGE;
pub use state::{
    Cluster, JobView, MAX_ACTIVATION_FAILURES, MAX_CONSTRAINT, Proc, QueueState, is_true,
    parse_constraint,
};
pub use store::uploads_dir;
