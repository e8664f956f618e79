//! The schedd's HTTP API: routes and JSON bodies, shared by the daemon and the
//! `andes` command. ClassAds travel as text in new ClassAd syntax.
//!
//! | route | role | body → reply |
//! | --- | --- | --- |
//! | `GET /v1/modules/{digest}` | user | → 200 if stored, 404 if not |
//! | `PUT /v1/modules/{digest}` | user | module bytes → 204 |
//! | `POST /v1/cluster` | user | → [`NewClusterReply`] (a cluster id to expand with) |
//! | `POST /v1/submit` | user | [`SubmitRequest`] → [`SubmitReply`] |
//! | `POST /v1/query` | user | [`QueryRequest`] → [`QueryReply`] |
//! | `POST /v1/summary` | user | [`SummaryRequest`] → [`SummaryReply`] |
//! | `POST /v1/change` | user | [`ChangeRequest`] → [`ChangeReport`] |
//! | `POST /v1/tail` | user (the job's owner), admin | [`TailJobRequest`] → [`andes_protocol::pool::TailReply`] |
//! | `POST /v1/history` | user | [`HistoryRequest`] → [`QueryReply`] |
//! | `PUT /v1/uploads/{digest}` | user | file bytes → 204 (a spooled input file) |
//! | `POST /v1/transfer` | user | [`TransferRequest`] → [`TransferReply`] (a spooled job's output) |
//! | `POST /v1/transfer/file` | user | [`TransferFileRequest`] → the file, streamed (one [`TransferReply`] named as streamed) |
//! | `POST /v1/transfer/done` | user | [`TransferDoneRequest`] → [`ChangeReport`] |
//!
//! Every request is signed (see `andes-protocol`); `admin` passes wherever `user`
//! does. Errors are `{"error": "..."}` with 400 (bad request), 401 (not
//! authenticated), 403 (not allowed), 404 (no such job or module), 413 (too large)
//! or 500 (storage).

use serde::{Deserialize, Serialize};

pub use crate::queue::{Change, ChangeReport, SummaryRow, Targets};

/// `POST /v1/submit`: a cluster, factored into what its jobs share and what each
/// has of its own. The module named by the cluster ad's `CmdDigest` must be stored
/// first (`PUT /v1/modules/{digest}`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SubmitRequest {
    /// The cluster id reserved with `POST /v1/cluster`, if the jobs were expanded
    /// with it.
    #[serde(default)]
    pub cluster: Option<u32>,
    /// The cluster ad.
    pub cluster_ad: String,
    /// One ad per job (often `[]`).
    pub procs: Vec<String>,
}

/// A reserved cluster id.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NewClusterReply {
    /// ClusterId to expand `$(Cluster)` with.
    pub cluster: u32,
}

/// The reply to a submit, sent once the jobs are durable.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SubmitReply {
    /// ClusterId.
    pub cluster: u32,
    /// How many jobs.
    pub count: u32,
}

/// `POST /v1/query`: jobs in the queue.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct QueryRequest {
    /// Which jobs (ids, owners, constraint); none: every job.
    #[serde(default)]
    pub targets: Targets,
    /// Only these attributes (all when empty).
    #[serde(default)]
    pub projection: Vec<String>,
    /// At most this many jobs.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only the caller's own jobs when `targets` names neither ids nor
    /// owners, unless the caller is an admin (condor_q's default: a queue
    /// superuser sees every job).
    #[serde(default)]
    pub mine: bool,
}

/// Job ads, as ClassAd text.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct QueryReply {
    /// The ads.
    pub ads: Vec<String>,
}

/// `POST /v1/summary`: condor_q's default summary.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SummaryRequest {
    /// Only these owners' jobs (all when empty).
    #[serde(default)]
    pub owners: Vec<String>,
    /// Only the caller's own jobs when `owners` is empty, unless the caller
    /// is an admin, as in [`QueryRequest::mine`].
    #[serde(default)]
    pub mine: bool,
}

/// The summary rows and the queue's totals.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SummaryReply {
    /// The schedd's name (SCHEDD_NAME).
    #[serde(default)]
    pub schedd: String,
    /// One row per owner and batch.
    pub rows: Vec<SummaryRow>,
    /// Jobs in the whole queue, by status: idle, running, held, suspended, removed
    /// (still leaving), completed (still leaving).
    pub totals: Totals,
}

/// Counts of jobs by status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// All jobs.
    pub jobs: u64,
    /// Completed.
    pub completed: u64,
    /// Removed.
    pub removed: u64,
    /// Idle.
    pub idle: u64,
    /// Running (and transferring output).
    pub running: u64,
    /// Held.
    pub held: u64,
    /// Suspended.
    pub suspended: u64,
}

/// `POST /v1/tail`: a running job's output or error stream (condor_tail).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TailJobRequest {
    /// The job.
    pub job: crate::job::JobId,
    /// Its standard error instead of its output.
    #[serde(default)]
    pub stderr: bool,
    /// Where to read from; none: the last `max` bytes.
    #[serde(default)]
    pub offset: Option<u64>,
    /// At most this many bytes (at most 1 MiB).
    pub max: u64,
}

/// `POST /v1/change`: hold, release, remove, vacate or edit jobs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChangeRequest {
    /// Which jobs.
    pub targets: Targets,
    /// What to do.
    pub change: Change,
}

/// `POST /v1/history`: jobs that left the queue, newest first.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HistoryRequest {
    /// Only those matching.
    #[serde(default)]
    pub constraint: Option<String>,
    /// Only these owners' jobs.
    #[serde(default)]
    pub owners: Vec<String>,
    /// At most this many.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only these attributes (all when empty).
    #[serde(default)]
    pub projection: Vec<String>,
}

/// `POST /v1/transfer`: the output of a spooled job (submitted with
/// `--spool`), as condor_transfer_data fetches it. Its owner's (or an
/// admin's) only.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TransferRequest {
    /// The job.
    pub job: crate::job::JobId,
}

/// `POST /v1/transfer/file`: one output file of a spooled job that a
/// [`TransferReply`] named as streamed (too big to carry in it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TransferFileRequest {
    /// The job.
    pub job: crate::job::JobId,
    /// The file's name, as the reply gave it.
    pub name: String,
}

/// A spooled job's output as the schedd keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TransferReply {
    /// The job's ad (its Iwd, Out, Err and UserLog say where each goes).
    pub ad: String,
    /// The output files under their sandbox names (`_andes_stdout`,
    /// `_andes_stderr`, the rest as the job named them): carried, or named as
    /// streamed (`POST /v1/transfer/file`).
    pub files: Vec<andes_protocol::pool::FileData>,
    /// The job's event log, as text to append to its `UserLog`.
    pub log: String,
}

/// `POST /v1/transfer/done`: the owner has the output of these spooled jobs;
/// each gets `StageOutFinish`, and a completed one leaves the queue.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TransferDoneRequest {
    /// The jobs.
    pub jobs: Vec<crate::job::JobId>,
}
