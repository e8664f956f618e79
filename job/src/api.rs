//! The schedd's HTTP API: routes and JSON bodies, shared by the daemon and the
//! `andes` command. ClassAds travel as text in new ClassAd syntax.
//!
//! | route | role | body → reply |
//! | --- | --- | --- |
//! | `GET /v1/modules/{digest}` | user | → 200 if stored, 404 if not |
//! | `PUT /v1/modules/{digest}` | user | module bytes → 204 |
//! | `POST /v1/cluster` | user | → [`NewClusterReply`] (a cluster id to expand with) |
//! | `POST /v1/clusters` | user | [`ClustersRequest`] → [`ClustersReply`] (a block of them) |
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
//! authenticated), 403 (not allowed), 404 (no such job or module), 412 (a submit
//! naming a module or input its submitter has not uploaded: upload, then submit
//! again), 413 (too large) or 500 (storage).

use serde::{Deserialize, Serialize};

use classad::{ClassAd, Expr};

use crate::ids::{JobId, JobSelector};

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

/// The most cluster ids one `POST /v1/clusters` reserves.
pub const MAX_CLUSTER_BLOCK: u32 = 256;

/// `POST /v1/clusters`: reserve `count` cluster ids at once (at most
/// [`MAX_CLUSTER_BLOCK`]), for a client that submits many clusters (DAGMan's
/// node jobs); ids it never submits are left unused, as a reserved id is.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ClustersRequest {
    /// How many.
    pub count: u32,
}

/// Reserved cluster ids: `first` to `first + count - 1`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ClustersReply {
    /// The first id.
    pub first: u32,
    /// How many.
    pub count: u32,
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
    /// Ads of groups of the selected jobs in place of the jobs' own
    /// (htcondor2's `QueryOpt.AutoCluster` and `QueryOpt.GroupBy`): one ad
    /// per distinct set of values of these attributes, holding them with
    /// `JobCount`, `AutoClusterId` (the groups numbered from 1 in the order
    /// of their first jobs) and `AutoClusterAttrs`. Empty: the schedd's
    /// autocluster attributes (the ones every match reads, and those the
    /// negotiator last named significant). `limit` then counts groups.
    #[serde(default)]
    pub group_by: Option<Vec<String>>,
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
    pub job: crate::ids::JobId,
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
    pub job: crate::ids::JobId,
}

/// `POST /v1/transfer/file`: one output file of a spooled job that a
/// [`TransferReply`] named as streamed (too big to carry in it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TransferFileRequest {
    /// The job.
    pub job: crate::ids::JobId,
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
    pub jobs: Vec<crate::ids::JobId>,
}

/// The jobs a request is about. Jobs selected by id or owner, narrowed by the
/// constraint; with neither ids nor owners, every job matching the constraint (and
/// with no constraint either, every job). For a user, anything but their own
/// explicitly named jobs is refused, and a constraint only ever reaches their own.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Targets {
    /// Jobs or clusters named by id.
    #[serde(default)]
    pub ids: Vec<JobSelector>,
    /// Owners whose jobs are named.
    #[serde(default)]
    pub owners: Vec<String>,
    /// A ClassAd constraint every selected job must satisfy.
    #[serde(default)]
    pub constraint: Option<String>,
    /// The jobs the constraint was found true of, outside the queue's writer
    /// (the schedd's queue evaluates it before handing the change to its writer, so that
    /// a costly constraint never holds up other writes). Sorted.
    #[serde(skip)]
    pub matched: Option<Vec<JobId>>,
}

/// A change to jobs already in the queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Change {
    /// Put on hold (`andes hold`), with a reason.
    Hold {
        /// HoldReason.
        reason: String,
    },
    /// Release from hold, with a reason.
    Release {
        /// ReleaseReason.
        reason: String,
    },
    /// Remove, with a reason.
    Remove {
        /// RemoveReason.
        reason: String,
    },
    /// Vacate running jobs (`andes vacate-job`, condor_vacate_job): each
    /// leaves its slot, checkpointing if it can, and goes back to idle.
    Vacate {
        /// Why, for the daemons' logs.
        reason: String,
    },
    /// Set an attribute to an expression (`andes qedit`).
    Edit {
        /// The attribute.
        attr: String,
        /// Its new expression, as text.
        expr: String,
    },
}

/// What a change did: the jobs changed, and those selected but left alone with why
/// (a release of a job that is not held, say).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChangeReport {
    /// Jobs changed.
    pub changed: Vec<JobId>,
    /// Jobs selected but not changed, each with the reason.
    pub skipped: Vec<(JobId, String)>,
}

/// One row of condor_q's summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// OWNER.
    pub owner: String,
    /// BATCH_NAME (`ID: <cluster>` when the job has no JobBatchName).
    pub batch: String,
    /// SUBMITTED: the latest QDate in the batch.
    pub submitted: i64,
    /// DONE.
    pub done: u64,
    /// RUN.
    pub run: u64,
    /// IDLE.
    pub idle: u64,
    /// HOLD.
    pub held: u64,
    /// Suspended jobs (counted in TOTAL).
    pub suspended: u64,
    /// Running jobs still waiting for their DeferralTime (counted in RUN).
    #[serde(default)]
    pub deferred: u64,
    /// The earliest next run of the batch's idle cron jobs.
    #[serde(default)]
    pub next_run: Option<i64>,
    /// JOB_IDS: (cluster, lowest proc, highest proc) of each cluster in the batch.
    pub ids: Vec<(u32, u32, u32)>,
}

/// A submit: the cluster ad and one ad per job with only what differs.
#[derive(Clone, Debug)]
pub struct Submit {
    /// A cluster id from `POST /v1/cluster`, when the jobs were expanded
    /// knowing it (`$(Cluster)`); `None` takes the next one.
    pub cluster: Option<u32>,
    /// What the jobs share.
    pub cluster_ad: ClassAd,
    /// What each job has of its own (may be empty ads).
    pub procs: Vec<ClassAd>,
}

/// Splits full job ads (as `andes submit` expands them) into the cluster ad, with
/// every attribute all of them share (structurally equal expressions), and each
/// job's own remainder.
pub fn factor(ads: Vec<ClassAd>) -> Submit {
    let Some(first) = ads.first() else {
        return Submit { cluster: None, cluster_ad: ClassAd::new(), procs: Vec::new() };
    };
    let mut shared: Vec<(classad::AttrName, Expr)> =
        first.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for ad in &ads[1..] {
        shared.retain(|(k, v)| ad.lookup(k).is_some_and(|e| e == v));
    }
    let mut cluster_ad = ClassAd::new();
    for (k, v) in &shared {
        cluster_ad.insert(k.clone(), v.clone());
    }
    let procs = ads
        .iter()
        .map(|ad| {
            let mut p = ClassAd::new();
            for (k, v) in ad.iter() {
                if cluster_ad.lookup(k).is_none() {
                    p.insert(k.clone(), v.clone());
                }
            }
            p
        })
        .collect();
    Submit { cluster: None, cluster_ad, procs }
}
