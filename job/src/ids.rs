//! Job identities, statuses and hold codes, with HTCondor's names and numbers.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A job's id: `cluster.proc`, as condor_q prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JobId {
    /// ClusterId.
    pub cluster: u32,
    /// ProcId.
    pub proc: u32,
}

impl JobId {
    /// The id `cluster.proc`.
    pub fn new(cluster: u32, proc: u32) -> JobId {
        JobId { cluster, proc }
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.cluster, self.proc)
    }
}

/// What a user names on the command line: one job (`12.3`) or a whole cluster (`12`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobSelector {
    /// One job.
    Job(JobId),
    /// Every job of a cluster.
    Cluster(u32),
}

impl JobSelector {
    /// True when `id` is selected.
    pub fn selects(&self, id: JobId) -> bool {
        match *self {
            JobSelector::Job(j) => j == id,
            JobSelector::Cluster(c) => id.cluster == c,
        }
    }
}

impl FromStr for JobSelector {
    type Err = String;
    fn from_str(s: &str) -> Result<JobSelector, String> {
        let bad = || format!("`{s}` is not a job id (CLUSTER or CLUSTER.PROC)");
        match s.split_once('.') {
            Some((c, p)) => Ok(JobSelector::Job(JobId::new(
                c.parse().map_err(|_| bad())?,
                p.parse().map_err(|_| bad())?,
            ))),
            None => Ok(JobSelector::Cluster(s.parse().map_err(|_| bad())?)),
        }
    }
}

impl fmt::Display for JobSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobSelector::Job(j) => j.fmt(f),
            JobSelector::Cluster(c) => c.fmt(f),
        }
    }
}

/// `JobStatus`, with HTCondor's codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum JobStatus {
    /// 1: waiting for a match.
    Idle = 1,
    /// 2: running (or, with a DeferralTime, waiting on the host to start).
    Running = 2,
    /// 3: removed by a user or a policy.
    Removed = 3,
    /// 4: completed.
    Completed = 4,
    /// 5: held.
    Held = 5,
    /// 6: transferring its output back.
    TransferringOutput = 6,
    /// 7: suspended on its host.
    Suspended = 7,
}

impl JobStatus {
    /// The status with code `code`.
    pub fn from_code(code: i64) -> Option<JobStatus> {
        Some(match code {
            1 => JobStatus::Idle,
            2 => JobStatus::Running,
            3 => JobStatus::Removed,
            4 => JobStatus::Completed,
            5 => JobStatus::Held,
            6 => JobStatus::TransferringOutput,
            7 => JobStatus::Suspended,
            _ => return None,
        })
    }

    /// HTCondor's code.
    pub fn code(self) -> i64 {
        self as i64
    }

    /// condor_q's one-letter status column (`ST`).
    pub fn letter(self) -> char {
        match self {
            JobStatus::Idle => 'I',
            JobStatus::Running => 'R',
            JobStatus::Removed => 'X',
            JobStatus::Completed => 'C',
            JobStatus::Held => 'H',
            JobStatus::TransferringOutput => '>',
            JobStatus::Suspended => 'S',
        }
    }

    /// True for the statuses a job leaves the queue in.
    pub fn is_terminal(self) -> bool {
        matches!(self, JobStatus::Removed | JobStatus::Completed)
    }

    /// True while the job holds a slot (running, transferring output or suspended).
    pub fn is_active(self) -> bool {
        matches!(self, JobStatus::Running | JobStatus::TransferringOutput | JobStatus::Suspended)
    }
}

/// `HoldReasonCode` values. The first block is HTCondor's table (the spec's, plus
/// the later codes HTCondor added that andes uses); the last are andes's own, for
/// holds that only a Wasm job can earn.
pub mod hold_code {
    /// The user put the job on hold (`andes hold`).
    pub const USER_REQUEST: i64 = 1;
    /// A job policy expression (periodic_hold, on_exit_hold) evaluated to true.
    pub const JOB_POLICY: i64 = 3;
    /// A job policy expression evaluated to undefined.
    pub const JOB_POLICY_UNDEFINED: i64 = 5;
    /// The starter could not start the executable (not a valid module, failed to link).
    pub const FAILED_TO_CREATE_PROCESS: i64 = 6;
    /// The output or error file could not be opened.
    pub const UNABLE_TO_OPEN_OUTPUT: i64 = 7;
    /// The input file could not be opened.
    pub const UNABLE_TO_OPEN_INPUT: i64 = 8;
    /// The job's output files could not be brought back (`TransferOutputError`).
    pub const TRANSFER_OUTPUT_ERROR: i64 = 12;
    /// The job's input files could not be sent (`TransferInputError`).
    pub const TRANSFER_INPUT_ERROR: i64 = 13;
    /// The initial working directory could not be accessed.
    pub const IWD_ERROR: i64 = 14;
    /// The job was submitted on hold (`hold = true`).
    pub const SUBMITTED_ON_HOLD: i64 = 15;
    /// The job missed its deferral window (`MissedDeferredExecutionTime`).
    pub const MISSED_DEFERRED_EXECUTION_TIME: i64 = 20;
    /// The job's cron settings cannot be read (`InvalidCronSettings`).
    pub const INVALID_CRON_SETTINGS: i64 = 25;
    /// The job's output exceeded its limit (`MaxTransferOutputSizeExceeded`).
    pub const MAX_OUTPUT_EXCEEDED: i64 = 33;
    /// The job used more memory than it requested (`JobOutOfResources`).
    pub const JOB_OUT_OF_RESOURCES: i64 = 34;
    /// A checkpoint failed for good (`FailedToCheckpoint`; subcode 1: the
    /// snapshot to resume from was refused; 2: the job's call stack outgrew
    /// its checkpoint stack).
    pub const FAILED_TO_CHECKPOINT: i64 = 36;
    /// The job ran longer than its allowed execute duration (`JobExecuteExceeded`).
    pub const JOB_EXECUTE_EXCEEDED: i64 = 47;
    /// andes: the job used up its `MaxFuel`.
    pub const FUEL_EXHAUSTED: i64 = 101;
    /// andes: the job wrote more than its `RequestDisk` into its sandbox.
    pub const DISK_QUOTA_EXCEEDED: i64 = 102;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse_and_print() {
        assert_eq!("12".parse::<JobSelector>(), Ok(JobSelector::Cluster(12)));
        assert_eq!("12.3".parse::<JobSelector>(), Ok(JobSelector::Job(JobId::new(12, 3))));
        assert!("12.x".parse::<JobSelector>().unwrap_err().contains("12.x"));
        assert!("".parse::<JobSelector>().is_err());
        assert_eq!(JobSelector::Job(JobId::new(4, 0)).to_string(), "4.0");
        assert!(JobSelector::Cluster(4).selects(JobId::new(4, 9)));
        assert!(!JobSelector::Job(JobId::new(4, 1)).selects(JobId::new(4, 9)));
    }

    #[test]
    fn status_codes_round_trip() {
        for c in 1..=7 {
            assert_eq!(JobStatus::from_code(c).unwrap().code(), c);
        }
        assert_eq!(JobStatus::from_code(0), None);
        assert_eq!(JobStatus::from_code(8), None);
    }
}
