//! A DAGMan job as every part sees it: the schedd (which runs it, see
//! `andes-schedd`'s `scheduler`), `andes submit-dag` and the Python
//! package (which queue it), `andes q` (which shows its nodes under it).
//!
//! A DAGMan job is a job of universe 7 (HTCondor's scheduler universe)
//! naming its DAG file in [`DAG_FILE`]; it runs no module.

use classad::{ClassAd, Value};

/// HTCondor's scheduler universe.
pub const SCHEDULER_UNIVERSE: i64 = 7;

/// The attribute naming a DAGMan job's DAG file (absolute).
pub const DAG_FILE: &str = "DAGManDagFile";

/// The attribute holding a DAGMan job's environment: a list of
/// `NAME=value` strings, its submitter's (the configuration it reads, its
/// user name, home and path), the whole of what the process gets.
pub const DAG_ENV: &str = "DAGManEnvironment";

/// True for a DAGMan job: universe 7 with a DAG file.
pub fn is_dagman(ad: &ClassAd) -> bool {
    matches!(ad.eval_attr(classad::name!("JobUniverse")), Value::Int(SCHEDULER_UNIVERSE))
        && matches!(ad.eval_attr(classad::name!(DAG_FILE)), Value::Str(_))
}
