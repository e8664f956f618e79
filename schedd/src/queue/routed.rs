//! Routed copies: the job router's copy of a job, mirrored back onto the
//! original.

use super::actor::*;
use super::error::*;
use super::ops::*;
use super::txn::*;
use crate::attrs::{ACTIVATION_PENDING, ROUTED_FROM, ROUTED_TO};

use classad::{ClassAd, Expr, Value};

use crate::job::{JobId, JobStatus};
use crate::policy::HoldInfo;
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// What an original takes from its routed copy when the copy completes.
pub(crate) const FINAL_ATTRS: [&str; 12] = [
    "NumJobCompletions",
    "NumJobStarts",
    "ImageSize",
    "ExitCode",
    "ExitBySignal",
    "ExitSignal",
    "RemoteWallClockTime",
    "RemoteUserCpu",
    "RemoteSysCpu",
    "LastRemoteHost",
    "WasmTrap",
    "JobCurrentStartDate",
];

/// What a routed copy's target reports of its use (RemoteHost, CPU,
/// memory), shown on its original as it changes.
pub const MIRRORED_USAGE: &[&str] = &[
    "RemoteHost",
    "RemoteUserCpu",
    "RemoteSysCpu",
    "RemoteWallClockTime",
    "ImageSize",
    "ResidentSetSize",
    "MemoryUsage",
    "DiskUsage",
];

/// Set on a routed original that is held because its copy is: it is not
/// held itself, and goes back to idle if the copy is removed.
pub(crate) const ROUTED_COPY_HELD: &str = "RoutedCopyHeld";

impl Txn<'_, '_> {
    /// The job router's routing of an idle job: its copy becomes a new
    /// cluster of the same owner.
    pub(crate) fn route(&mut self, original: JobId, copy: &ClassAd) -> Result<u32, QueueError> {
        let Some(v) = self.state.job(original) else {
            return Err(QueueError::NotFound(format!("job {original} is not in the queue")));
        };
        if v.proc.status != JobStatus::Idle {
            return Err(QueueError::Invalid(format!("job {original} is not idle")));
        }
        // Idle but on its way to a host (its activation recorded): the host
        // may run it, so a copy would run it a second time.
        if v.proc.ad.contains(classad::name!(ACTIVATION_PENDING)) {
            return Err(QueueError::Invalid(format!("job {original} is being started here")));
        }
        let ad = v.ad();
        if ad.contains(classad::name!(ROUTED_TO)) || ad.contains(classad::name!(ROUTED_FROM)) {
            return Err(QueueError::Invalid(format!(
                "job {original} is already routed or is a routed copy"
            )));
        }
        let owner = v.owner().to_string();
        let route = match copy.eval_attr(classad::name!("RouteName")) {
            Value::Str(s) => s.to_string(),
            _ => String::new(),
        };
        let mut copy = copy.clone();
        copy.insert_value(classad::name!(ROUTED_FROM), original.to_string());
        let submit = Submit { cluster: None, cluster_ad: copy, procs: vec![ClassAd::new()] };
        let cluster = self.submit(&Actor::user(&owner), &submit, Origin::Router)?;
        let to = JobId::new(cluster, 0);
        if let Some(p) = self.state.jobs.get_mut(&original) {
            p.ad.insert_value(classad::name!(ROUTED_TO), to.to_string());
            p.ad.insert_value(classad::name!("RouteName"), route.as_str());
            p.ad.insert_value(classad::name!("RoutedBy"), "andes router");
        }
        self.persist(original)?;
        self.event(
            original,
            EventKind::Note(format!("job router: routed to job {to} (route {route})")),
        )?;
        Ok(cluster)
    }

    /// The job a routed copy was routed from, if `id` is one.
    pub(crate) fn original_of(&self, id: JobId) -> Option<JobId> {
        let v = self.state.job(id)?;
        let text = match v
            .proc
            .ad
            .get(classad::name!(ROUTED_FROM))
            .or_else(|| v.cluster.ad.get(classad::name!(ROUTED_FROM)))?
        {
            Expr::Lit(Value::Str(s)) => s.to_string(),
            _ => return None,
        };
        match text.parse() {
            Ok(crate::job::JobSelector::Job(j)) => Some(j),
            _ => None,
        }
    }

    /// The routed copy of `id`, if it is routed.
    pub(crate) fn copy_of(&self, id: JobId) -> Option<JobId> {
        match self.state.jobs.get(&id)?.ad.get(classad::name!(ROUTED_TO))? {
            Expr::Lit(Value::Str(s)) => match s.parse() {
                Ok(crate::job::JobSelector::Job(j)) => Some(j),
                _ => None,
            },
            _ => None,
        }
    }

    /// A routed copy's status changed: its original mirrors Idle, Running,
    /// Suspended and Held (with the copy's hold reason); a released copy
    /// releases it.
    pub(crate) fn mirror(&mut self, copy: JobId) -> Result<(), QueueError> {
        let Some(original) = self.original_of(copy) else { return Ok(()) };
        let Some(c) = self.state.jobs.get(&copy) else { return Ok(()) };
        let status = c.status;
        let mirrored = match status {
            JobStatus::Idle => JobStatus::Idle,
            JobStatus::Running | JobStatus::TransferringOutput => JobStatus::Running,
            JobStatus::Suspended => JobStatus::Suspended,
            JobStatus::Held => {
                let info = HoldInfo::from_ad(&c.ad, "").unwrap_or(HoldInfo {
                    reason: String::new(),
                    code: 0,
                    subcode: 0,
                });
                return self.hold(original, info).map(|_| ());
            }
            _ => return Ok(()),
        };
        let Some(p) = self.state.jobs.get(&original) else { return Ok(()) };
        if p.status == JobStatus::Held && status == JobStatus::Idle {
            return self
                .release(original, format!("its routed copy {copy} was released"))
                .map(|_| ());
        }
        if !matches!(p.status, JobStatus::Idle | JobStatus::Running | JobStatus::Suspended)
            || p.status == mirrored
        {
            return Ok(());
        }
        let was = p.status;
        self.set_status(original, mirrored);
        self.persist(original)?;
        match (was, mirrored) {
            (JobStatus::Suspended, JobStatus::Running) => {
                self.event(original, EventKind::Unsuspended)?
            }
            (_, JobStatus::Running) => self.event(original, EventKind::Executing)?,
            (_, JobStatus::Suspended) => self.event(original, EventKind::Suspended)?,
            _ => {}
        }
        Ok(())
    }

    /// A routed copy completed: its original takes its final status and
    /// leaves the queue.
    pub(crate) fn copy_completed(&mut self, copy: JobId) -> Result<(), QueueError> {
        let Some(original) = self.original_of(copy) else { return Ok(()) };
        let Some(copy_ad) = self.state.job(copy).map(|v| v.ad()) else { return Ok(()) };
        let Some(p) = self.state.jobs.get_mut(&original) else { return Ok(()) };
        for a in FINAL_ATTRS {
            if let Some(e) = copy_ad.get(a) {
                p.ad.insert(a, e.clone());
            }
        }
        self.complete(original)
    }

    /// A routed copy was removed: its original, unless held or removed
    /// itself, is idle again and may be matched or routed anew.
    pub(crate) fn copy_removed(&mut self, copy: JobId) -> Result<(), QueueError> {
        let Some(original) = self.original_of(copy) else { return Ok(()) };
        let Some(p) = self.state.jobs.get_mut(&original) else { return Ok(()) };
        if let Some(e) = p.ad.remove(classad::name!(ROUTED_TO)) {
            p.ad.insert(classad::name!("LastRoutedToJobId"), e);
        }
        // An original that only mirrored its copy's hold is not held itself:
        // released, it is idle again.
        if p.status == JobStatus::Held && p.ad.contains(classad::name!(ROUTED_COPY_HELD)) {
            let why = format!("job router: routed copy {copy} was removed");
            return self.release(original, why).map(|_| ());
        }
        let back = matches!(p.status, JobStatus::Idle | JobStatus::Running | JobStatus::Suspended);
        if back {
            self.set_status(original, JobStatus::Idle);
        }
        self.persist(original)?;
        if back {
            self.event(
                original,
                EventKind::Note(format!(
                    "job router: routed copy {copy} was removed; the job is idle again"
                )),
            )?;
        }
        Ok(())
    }

    /// The original was held or removed: its routed copy is removed.
    pub(crate) fn remove_copy_of(&mut self, original: JobId, why: &str) -> Result<(), QueueError> {
        if let Some(copy) = self.copy_of(original) {
            self.remove(copy, format!("the job it was routed from ({original}) was {why}"))?;
        }
        Ok(())
    }
}
