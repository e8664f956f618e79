//! The events: [`JobEvent`] (which job, when, what), [`EventKind`] with one
//! variant per HTCondor event number, and the fields of each event.

use classad::ClassAd;
use jiff::Timestamp;

use super::number;

/// The job an event is about: `(cluster.proc.subproc)` in the header.
/// Cluster-wide events (035, 036) use proc and subproc `-1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventJobId {
    /// ClusterId.
    pub cluster: i32,
    /// ProcId.
    pub proc: i32,
    /// Subproc (always 0 for andes jobs).
    pub subproc: i32,
}

impl EventJobId {
    /// The id `cluster.proc.0`.
    pub fn new(cluster: i32, proc: i32) -> EventJobId {
        EventJobId { cluster, proc, subproc: 0 }
    }

    /// The queue's id of the job (`None` for a negative cluster or proc, which
    /// no queue gives).
    pub fn job(&self) -> Option<crate::ids::JobId> {
        Some(crate::ids::JobId::new(
            u32::try_from(self.cluster).ok()?,
            u32::try_from(self.proc).ok()?,
        ))
    }
}

impl From<crate::ids::JobId> for EventJobId {
    fn from(id: crate::ids::JobId) -> EventJobId {
        EventJobId {
            cluster: i32::try_from(id.cluster).unwrap_or(i32::MAX),
            proc: i32::try_from(id.proc).unwrap_or(i32::MAX),
            subproc: 0,
        }
    }
}

/// CPU time as the log prints it (`Usr 0 00:00:01, Sys 0 00:00:00`), in whole seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuUsage {
    /// User CPU seconds.
    pub user: u32,
    /// System CPU seconds.
    pub system: u32,
}

impl CpuUsage {
    /// Usage from seconds. HTCondor's reader adds the days, hours, minutes and
    /// seconds in a C `int`, so values are capped at `i32::MAX` seconds.
    pub fn from_secs(user: u64, system: u64) -> CpuUsage {
        let cap = |s: u64| u32::try_from(s.min(i32::MAX as u64)).unwrap_or(i32::MAX as u32);
        CpuUsage { user: cap(user), system: cap(system) }
    }
}

/// How a job (or a run of it) ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It exited: `(1) Normal termination (return value N)`.
    Normal {
        /// Its exit code.
        return_value: i32,
    },
    /// It was killed: `(0) Abnormal termination (signal N)`.
    Abnormal {
        /// The signal (for a Wasm job, the one HTCondor would report for its trap).
        signal: i32,
        /// Where its core file went, if it left one.
        core_file: Option<String>,
    },
}

/// One row of the `Partitionable Resources` table of events 004 and 005:
/// `<Name>Usage`, `Request<Name>`, `<Name>` (allocated) and `Assigned<Name>`.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceUsage {
    /// The resource: `Cpus`, `Disk`, `Memory`, `Gpus`, … (a ClassAd identifier).
    pub name: String,
    /// Peak (or, for GPUs, average) usage.
    pub usage: Option<f64>,
    /// What the job requested.
    pub request: Option<f64>,
    /// What the slot provided.
    pub allocated: Option<f64>,
    /// Which instances were assigned (non-fungible resources such as GPUs).
    /// HTCondor's reader finds this column only when the table also has an
    /// `Allocated` column (some row has `allocated`).
    pub assigned: Option<String>,
}

/// 000: the job entered the queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Submit {
    /// The schedd's address: `<127.0.0.1:9618?...>`.
    pub submit_host: String,
    /// `submit_event_notes` (DAGMan writes `DAG Node: NAME` here).
    pub log_notes: Option<String>,
    /// `submit_event_user_notes`. Readers take the first notes line for log
    /// notes, so without `log_notes` these read back as log notes.
    pub user_notes: Option<String>,
    /// Warnings given at submit time.
    pub warnings: Option<String>,
}

/// 001: the job began running.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Execute {
    /// The startd's address.
    pub execute_host: String,
    /// The slot: `slot1_1@host`.
    pub slot_name: Option<String>,
}

/// 002: the job's executable could not be run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecErrorType {
    /// `(0) Job file not executable.`: for andes, the module could not be instantiated.
    NotExecutable,
    /// `(1) Job not properly linked for Condor.`: for andes, a missing import.
    BadLink,
}

/// 003: the job checkpointed (and kept running).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checkpointed {
    /// CPU time on the execute host.
    pub run_remote_usage: CpuUsage,
    /// CPU time of the shadow.
    pub run_local_usage: CpuUsage,
    /// Bytes the checkpoint sent.
    pub sent_bytes: u64,
}

/// What an eviction did to the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// `(0) CPU times`: evicted without a checkpoint.
    NotCheckpointed,
    /// `(1) Job was checkpointed.`
    Checkpointed,
    /// `(0) Job terminated and was requeued`, with how it ended.
    TerminatedAndRequeued(Ending),
}

/// 004: the job left its slot before finishing.
#[derive(Clone, Debug, PartialEq)]
pub struct Evicted {
    /// Checkpointed, not, or terminated and requeued.
    pub eviction: Eviction,
    /// `Code N Subcode M` on the first line (written when the code is not 0).
    pub reason_code: i32,
    /// The subcode.
    pub reason_subcode: i32,
    /// CPU time on the execute host for this run.
    pub run_remote_usage: CpuUsage,
    /// CPU time of the shadow for this run.
    pub run_local_usage: CpuUsage,
    /// Bytes sent to the job in this run.
    pub sent_bytes: u64,
    /// Bytes received from the job in this run.
    pub received_bytes: u64,
    /// Why.
    pub reason: Option<String>,
    /// The resources table.
    pub resources: Vec<ResourceUsage>,
}

/// 005: the job finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Terminated {
    /// How it ended.
    pub ending: Ending,
    /// `Run Remote Usage`: CPU time on the execute host in the last run.
    pub run_remote_usage: CpuUsage,
    /// `Run Local Usage`: CPU time of the shadow in the last run.
    pub run_local_usage: CpuUsage,
    /// `Total Remote Usage`: over all runs.
    pub total_remote_usage: CpuUsage,
    /// `Total Local Usage`: over all runs.
    pub total_local_usage: CpuUsage,
    /// `Run Bytes Sent By Job`.
    pub sent_bytes: u64,
    /// `Run Bytes Received By Job`.
    pub received_bytes: u64,
    /// `Total Bytes Sent By Job`.
    pub total_sent_bytes: u64,
    /// `Total Bytes Received By Job`.
    pub total_received_bytes: u64,
    /// The resources table.
    pub resources: Vec<ResourceUsage>,
}

/// 006: the job's memory use changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageSize {
    /// `ImageSize` in KiB (for andes: linear memory).
    pub image_size_kb: i64,
    /// `MemoryUsage` in MiB.
    pub memory_usage_mb: Option<i64>,
    /// `ResidentSetSize` in KiB.
    pub resident_set_size_kb: Option<i64>,
    /// `ProportionalSetSize` in KiB.
    pub proportional_set_size_kb: Option<i64>,
}

/// 007: the shadow failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShadowException {
    /// What went wrong.
    pub message: String,
    /// Bytes sent to the job.
    pub sent_bytes: u64,
    /// Bytes received from the job.
    pub received_bytes: u64,
}

/// 021: a daemon on the execute side reported an error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteError {
    /// `Error` (true) or `Warning` (false).
    pub critical: bool,
    /// The daemon: `starter`.
    pub daemon_name: String,
    /// Its host.
    pub execute_host: String,
    /// The message; may span lines.
    pub error: String,
    /// `HoldReasonCode` (0: none, and no code line is written).
    pub hold_reason_code: i32,
    /// `HoldReasonSubCode`.
    pub hold_reason_subcode: i32,
}

/// 022: the shadow lost the execute host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disconnected {
    /// Why (must not be empty).
    pub reason: String,
    /// The startd's name (must not be empty).
    pub startd_name: String,
    /// The startd's address (must not be empty).
    pub startd_addr: String,
}

/// 023: the shadow found the job again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reconnected {
    /// The startd's name.
    pub startd_name: String,
    /// The startd's address.
    pub startd_addr: String,
    /// The starter's address.
    pub starter_addr: String,
}

/// 024: reconnection failed; the job will be rescheduled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReconnectFailed {
    /// Why (must not be empty).
    pub reason: String,
    /// The startd's name (must not be empty nor contain `,`).
    pub startd_name: String,
}

/// 033: a job attribute changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttributeUpdate {
    /// The attribute.
    pub name: String,
    /// Its new value, as ClassAd text.
    pub value: String,
    /// Its old value, if it had one.
    pub old_value: Option<String>,
}

/// 035: a cluster (late materialization factory) was submitted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterSubmit {
    /// The schedd's address.
    pub submit_host: String,
    /// `submit_event_notes`.
    pub log_notes: Option<String>,
    /// `submit_event_user_notes`.
    pub user_notes: Option<String>,
}

/// How far a removed cluster got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// `Error N` (N negative).
    Error(i32),
    /// `Incomplete`.
    Incomplete,
    /// `Complete`.
    Complete,
    /// `Paused`.
    Paused,
}

/// 036: a cluster was removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterRemove {
    /// The next ProcId the factory would have used.
    pub next_proc_id: i32,
    /// The next row of item data.
    pub next_row: i32,
    /// Completion status.
    pub completion: Completion,
    /// Notes.
    pub notes: Option<String>,
}

/// What happened: one variant per HTCondor event number.
#[derive(Clone, Debug, PartialEq)]
pub enum EventKind {
    /// 000 `Job submitted from host: …`
    Submit(Submit),
    /// 001 `Job executing on host: …`
    Execute(Execute),
    /// 002 `(N) Job file not executable.`
    ExecutableError(ExecErrorType),
    /// 003 `Job was checkpointed.`
    Checkpointed(Checkpointed),
    /// 004 `Job was evicted.`
    Evicted(Evicted),
    /// 005 `Job terminated.`
    Terminated(Terminated),
    /// 006 `Image size of job updated: N`
    ImageSize(ImageSize),
    /// 007 `Shadow exception!`
    ShadowException(ShadowException),
    /// 008: one line of free text (at most 1023 bytes, not `...`).
    Generic(String),
    /// 009 `Job was aborted.`, with the reason.
    Aborted(Option<String>),
    /// 010 `Job was suspended.`, with the number of processes suspended.
    Suspended(i32),
    /// 011 `Job was unsuspended.`
    Unsuspended,
    /// 012 `Job was held.`
    Held {
        /// `HoldReason`.
        reason: Option<String>,
        /// `HoldReasonCode`.
        code: i32,
        /// `HoldReasonSubCode`.
        subcode: i32,
    },
    /// 013 `Job was released.`, with the reason.
    Released(Option<String>),
    /// 021 `Error from starter on host:`
    RemoteError(RemoteError),
    /// 022 `Job disconnected, attempting to reconnect`
    Disconnected(Disconnected),
    /// 023 `Job reconnected to …`
    Reconnected(Reconnected),
    /// 024 `Job reconnection failed`
    ReconnectFailed(ReconnectFailed),
    /// 028 `Job ad information event triggered.`: attributes in old ClassAd
    /// syntax. Only literal booleans, integers, reals and strings are
    /// written (HTCondor's writer evaluates the attributes first and keeps
    /// only those), and only attributes whose names need no quoting.
    JobAdInformation(ClassAd),
    /// 033 `Changing job attribute …`
    AttributeUpdate(AttributeUpdate),
    /// 035 `Cluster submitted from host: …`
    ClusterSubmit(ClusterSubmit),
    /// 036 `Cluster removed`
    ClusterRemove(ClusterRemove),
    /// Any other event number, read from a log: its body lines, kept as they were.
    Other {
        /// The event number.
        number: u16,
        /// The body: the rest of the header line, then each further line.
        lines: Vec<String>,
    },
}

impl EventKind {
    /// HTCondor's event number.
    pub fn number(&self) -> u16 {
        use number as n;
        match self {
            EventKind::Submit(_) => n::SUBMIT,
            EventKind::Execute(_) => n::EXECUTE,
            EventKind::ExecutableError(_) => n::EXECUTABLE_ERROR,
            EventKind::Checkpointed(_) => n::CHECKPOINTED,
            EventKind::Evicted(_) => n::JOB_EVICTED,
            EventKind::Terminated(_) => n::JOB_TERMINATED,
            EventKind::ImageSize(_) => n::IMAGE_SIZE,
            EventKind::ShadowException(_) => n::SHADOW_EXCEPTION,
            EventKind::Generic(_) => n::GENERIC,
            EventKind::Aborted(_) => n::JOB_ABORTED,
            EventKind::Suspended(_) => n::JOB_SUSPENDED,
            EventKind::Unsuspended => n::JOB_UNSUSPENDED,
            EventKind::Held { .. } => n::JOB_HELD,
            EventKind::Released(_) => n::JOB_RELEASED,
            EventKind::RemoteError(_) => n::REMOTE_ERROR,
            EventKind::Disconnected(_) => n::JOB_DISCONNECTED,
            EventKind::Reconnected(_) => n::JOB_RECONNECTED,
            EventKind::ReconnectFailed(_) => n::JOB_RECONNECT_FAILED,
            EventKind::JobAdInformation(_) => n::JOB_AD_INFORMATION,
            EventKind::AttributeUpdate(_) => n::ATTRIBUTE_UPDATE,
            EventKind::ClusterSubmit(_) => n::CLUSTER_SUBMIT,
            EventKind::ClusterRemove(_) => n::CLUSTER_REMOVE,
            EventKind::Other { number, .. } => *number,
        }
    }

    /// HTCondor's class name of the event, its ClassAd's `MyType`
    /// (`SubmitEvent`, `JobTerminatedEvent`, ...).
    pub fn class_name(&self) -> &'static str {
        match self {
            EventKind::Submit(_) => "SubmitEvent",
            EventKind::Execute(_) => "ExecuteEvent",
            EventKind::ExecutableError(_) => "ExecutableErrorEvent",
            EventKind::Checkpointed(_) => "CheckpointedEvent",
            EventKind::Evicted(_) => "JobEvictedEvent",
            EventKind::Terminated(_) => "JobTerminatedEvent",
            EventKind::ImageSize(_) => "JobImageSizeEvent",
            EventKind::ShadowException(_) => "ShadowExceptionEvent",
            EventKind::Generic(_) => "GenericEvent",
            EventKind::Aborted(_) => "JobAbortedEvent",
            EventKind::Suspended(_) => "JobSuspendedEvent",
            EventKind::Unsuspended => "JobUnsuspendedEvent",
            EventKind::Held { .. } => "JobHeldEvent",
            EventKind::Released(_) => "JobReleasedEvent",
            EventKind::RemoteError(_) => "RemoteErrorEvent",
            EventKind::Disconnected(_) => "JobDisconnectedEvent",
            EventKind::Reconnected(_) => "JobReconnectedEvent",
            EventKind::ReconnectFailed(_) => "JobReconnectFailedEvent",
            EventKind::JobAdInformation(_) => "JobAdInformationEvent",
            EventKind::AttributeUpdate(_) => "AttributeUpdateEvent",
            EventKind::ClusterSubmit(_) => "ClusterSubmitEvent",
            EventKind::ClusterRemove(_) => "ClusterRemoveEvent",
            EventKind::Other { .. } => "FutureEvent",
        }
    }

    /// HTCondor's name for the event number: `ULOG_SUBMIT`, `ULOG_JOB_HELD`, …
    pub fn name(&self) -> &'static str {
        const NAMES: [&str; 48] = [
            "ULOG_SUBMIT",
            "ULOG_EXECUTE",
            "ULOG_EXECUTABLE_ERROR",
            "ULOG_CHECKPOINTED",
            "ULOG_JOB_EVICTED",
            "ULOG_JOB_TERMINATED",
            "ULOG_IMAGE_SIZE",
            "ULOG_SHADOW_EXCEPTION",
            "ULOG_GENERIC",
            "ULOG_JOB_ABORTED",
            "ULOG_JOB_SUSPENDED",
            "ULOG_JOB_UNSUSPENDED",
            "ULOG_JOB_HELD",
            "ULOG_JOB_RELEASED",
            "ULOG_NODE_EXECUTE",
            "ULOG_NODE_TERMINATED",
            "ULOG_POST_SCRIPT_TERMINATED",
            "ULOG_GLOBUS_SUBMIT",
            "ULOG_GLOBUS_SUBMIT_FAILED",
            "ULOG_GLOBUS_RESOURCE_UP",
            "ULOG_GLOBUS_RESOURCE_DOWN",
            "ULOG_REMOTE_ERROR",
            "ULOG_JOB_DISCONNECTED",
            "ULOG_JOB_RECONNECTED",
            "ULOG_JOB_RECONNECT_FAILED",
            "ULOG_GRID_RESOURCE_UP",
            "ULOG_GRID_RESOURCE_DOWN",
            "ULOG_GRID_SUBMIT",
            "ULOG_JOB_AD_INFORMATION",
            "ULOG_JOB_STATUS_UNKNOWN",
            "ULOG_JOB_STATUS_KNOWN",
            "ULOG_JOB_STAGE_IN",
            "ULOG_JOB_STAGE_OUT",
            "ULOG_ATTRIBUTE_UPDATE",
            "ULOG_PRESKIP",
            "ULOG_CLUSTER_SUBMIT",
            "ULOG_CLUSTER_REMOVE",
            "ULOG_FACTORY_PAUSED",
            "ULOG_FACTORY_RESUMED",
            "ULOG_NONE",
            "ULOG_FILE_TRANSFER",
            "ULOG_RESERVE_SPACE",
            "ULOG_RELEASE_SPACE",
            "ULOG_FILE_COMPLETE",
            "ULOG_FILE_USED",
            "ULOG_FILE_REMOVED",
            "ULOG_DATAFLOW_JOB_SKIPPED",
            "ULOG_COMMON_FILES",
        ];
        NAMES.get(usize::from(self.number())).copied().unwrap_or("ULOG_FUTURE_EVENT")
    }
}

/// One event: which job, when (given by the caller), and what happened.
#[derive(Clone, Debug, PartialEq)]
pub struct JobEvent {
    /// The job.
    pub id: EventJobId,
    /// When it happened. The log keeps whole seconds (milliseconds with
    /// [`FormatOptions::sub_second`](super::FormatOptions::sub_second)).
    pub time: Timestamp,
    /// What happened.
    pub kind: EventKind,
}

impl JobEvent {
    /// A new event.
    pub fn new(id: EventJobId, time: Timestamp, kind: EventKind) -> JobEvent {
        JobEvent { id, time, kind }
    }
}
