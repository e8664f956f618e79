//! How a queue is set up: its database, its limits and quotas.

use super::ops::*;

use std::path::PathBuf;

pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// How the queue is set up.
pub struct QueueConfig {
    /// The SQLite database file.
    pub path: PathBuf,
    /// This schedd's name, the first part of `GlobalJobId`.
    pub schedd_name: String,
    /// History keeps at most this many jobs (oldest dropped first).
    pub history_max_jobs: u64,
    /// History drops jobs that left the queue more than this many seconds ago.
    pub history_max_age: Option<i64>,
    /// Called with the events of each commit, after the commit.
    pub sink: Option<EventSink>,
    /// Called with the events of each commit before any reader can see the
    /// committed state (the queue's write lock is still held): for followers
    /// that read the queue and must never see a change before its event.
    /// Keep it cheap (a channel send).
    pub notify: Option<EventSink>,
    /// The time zone of cron schedules (CRON_TIME_ZONE; the system's by default).
    pub cron_time_zone: jiff::tz::TimeZone,
    /// SCHEDD_INTERVAL in seconds, for deferred jobs without ScheddInterval.
    pub schedd_interval: i64,
    /// SPOOL_QUOTA_PER_OWNER: bytes each owner may keep in the spool, their
    /// uploads (modules, spooled inputs), spooled jobs' outputs and
    /// checkpoints together (see [`crate::room`]).
    pub upload_quota_bytes: u64,
    /// Uploads each user may keep stored.
    pub upload_quota_count: u64,
    /// SPOOL_RESERVE: bytes kept free on the spool's file system besides what
    /// is stored, and held in a reserve file that a commit failing for want
    /// of space gives back (0: none).
    pub reserve_bytes: u64,
    /// Called after each commit with the jobs that left the queue in it (the
    /// schedd removes their spooled outputs). Keep it cheap.
    pub on_left: Option<LeftHook>,
    /// Seconds an upload no job in the queue refers to is kept (the time a
    /// client has between uploading and submitting).
    pub upload_grace: i64,
    /// UID_DOMAIN: the part after `@` in each job's `User`.
    pub uid_domain: String,
    /// How many jobs one user, one submit and the whole queue may hold.
    pub job_limits: JobLimits,
}

/// HTCondor's bounds on jobs: what one user or one submit can make the
/// schedd keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobLimits {
    /// MAX_JOBS_PER_SUBMISSION: jobs one submit may create (HTCondor: 20,000).
    pub per_submission: u64,
    /// MAX_JOBS_PER_OWNER: jobs one owner may have in the queue (HTCondor: 100,000).
    pub per_owner: u64,
    /// MAX_JOBS_SUBMITTED: jobs the queue may hold in all.
    pub submitted: u64,
}

impl Default for JobLimits {
    fn default() -> JobLimits {
        JobLimits { per_submission: 20_000, per_owner: 100_000, submitted: i32::MAX as u64 }
    }
}

/// Default [`QueueConfig::upload_quota_bytes`]: 4 GiB.
pub const DEFAULT_UPLOAD_QUOTA_BYTES: u64 = 4 << 30;

/// Default [`QueueConfig::upload_quota_count`].
pub const DEFAULT_UPLOAD_QUOTA_COUNT: u64 = 10_000;

/// Default [`QueueConfig::upload_grace`]: one hour.
pub const DEFAULT_UPLOAD_GRACE: i64 = 3600;

impl QueueConfig {
    /// Defaults for a database at `path`.
    pub fn new(path: impl Into<PathBuf>, schedd_name: &str) -> QueueConfig {
        QueueConfig {
            path: path.into(),
            schedd_name: schedd_name.to_string(),
            history_max_jobs: 1_000_000,
            history_max_age: None,
            sink: None,
            notify: None,
            cron_time_zone: jiff::tz::TimeZone::system(),
            schedd_interval: 300,
            upload_quota_bytes: DEFAULT_UPLOAD_QUOTA_BYTES,
            upload_quota_count: DEFAULT_UPLOAD_QUOTA_COUNT,
            reserve_bytes: 0,
            on_left: None,
            upload_grace: DEFAULT_UPLOAD_GRACE,
            uid_domain: schedd_name.rsplit('@').next().unwrap_or(schedd_name).to_string(),
            job_limits: JobLimits::default(),
        }
    }
}
