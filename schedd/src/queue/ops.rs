//! The operations the queue's writer applies, the replies, and the events
//! (for the job event log and the schedd) that changes make.

use super::actor::*;
use super::error::*;

use std::sync::Arc;

use classad::{ClassAd, Expr};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::job::JobId;
use crate::policy::HoldInfo;
use crate::quarantine::{self};
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// What the shadows and the negotiation tell the queue about jobs.
#[derive(Clone, Debug, PartialEq)]
pub enum PoolOp {
    /// The job was matched (LastMatchTime, NumJobMatches).
    Matched,
    /// The job's autocluster found no match (LastRejMatchReason, LastRejMatchTime).
    Rejected(String),
    /// The job is about to be activated on a claim (these attributes:
    /// RemoteHost, ClaimId, StartdAddr): recorded, with
    /// [`ACTIVATION_PENDING`], before the activation is sent, so that a
    /// schedd that dies meanwhile asks the host after its restart instead of
    /// running the job a second time elsewhere. The job stays idle.
    Activating(ClassAd),
    /// An activation on claim `.0` recorded with [`PoolOp::Activating`] did
    /// not happen: the record is cleared; the job stays idle. (Nothing is
    /// done to a job that started, or that is pending on another claim.)
    NotStarted(String),
    /// An activation on claim `.0` failed (`.1` says why): as
    /// [`PoolOp::NotStarted`], and counted in `NumShadowExceptions`; after
    /// [`MAX_ACTIVATION_FAILURES`] the job is held with the reason, never
    /// matched and refused without end.
    ActivationFailed(String, String),
    /// The job started on a claim: these attributes (RemoteHost, ClaimId, ...) are set.
    Started(ClassAd),
    /// The shadow's periodic update of a running job.
    Update(ClassAd),
    /// The shadow reconnected to the running job (NumJobReconnects).
    Reconnected,
    /// The host suspended (`true`) or resumed (`false`) the running job.
    Suspension(bool),
    /// The job stopped without ending (evicted, lease lost): back to idle.
    Evicted(ClassAd),
    /// Lines the running job wrote to its log (`andes:job/log`), bounded
    /// as [`andes_protocol::pool::bounded_log`] does: each a generic event
    /// (008) in its user log, before the event of how its run ended.
    Logged(Vec<String>),
    /// The job router's view of a routed copy at its target (GridJobId):
    /// set whatever the job's status.
    Grid(ClassAd),
    /// A daemon stopped (or failed) while evaluating this job's ad (the
    /// central manager matching its autocluster, an execute host its
    /// policy), and will not evaluate it again: an idle job is held and
    /// quarantined (see [`crate::quarantine`]).
    Quarantined {
        /// What of the job, where (`Requirements, in the central manager`).
        what: String,
        /// The daemon's reason.
        reason: String,
    },
}

impl PoolOp {
    /// Whether a commit holding this op waits for the disk. An op whose
    /// loss in a power cut is made good by what is already synced need not:
    /// a start (the activation's intent is synced before it is sent: a
    /// schedd that finds the intent asks the host, as after any crash), and
    /// counters and usage a later report or match brings again. Any synced
    /// commit after it syncs it too (the log is written in order), and a
    /// process that dies loses nothing (the operating system holds what was
    /// written).
    pub(crate) fn must_sync(&self) -> bool {
        !matches!(
            self,
            PoolOp::Started(_)
                | PoolOp::Matched
                | PoolOp::Rejected(_)
                | PoolOp::Update(_)
                | PoolOp::Reconnected
        )
    }
}

/// One of a claim's queue updates, applied in order with others
/// ([`Queue::in_order`]).
#[derive(Clone, Debug)]
pub enum JobOp {
    /// What the shadow or the negotiation says of a job ([`Queue::pool`]).
    Pool(JobId, PoolOp),
    /// The job ended ([`Queue::job_exited`]).
    Exited(JobId, ClassAd),
}

pub(crate) enum Op {
    Submit(Actor, Submit),
    Change(Actor, Targets, Change),
    Started(JobId),
    Pool(Vec<JobId>, PoolOp),
    Exited(JobId, ClassAd),
    Periodic,
    StoreModule(Actor, String, Vec<u8>),
    /// An upload already in its file under the uploads directory: its digest and size.
    StoreFile(Actor, String, u64),
    /// Removes uploads no job refers to, older than the grace.
    CollectUploads,
    /// Removes an owner's released uploads, oldest first, until this many
    /// bytes are freed ([`Txn::reclaim_uploads`](super::txn::Txn)).
    ReclaimUploads(String, u64),
    /// Spooled jobs whose output their owner fetched.
    Fetched(Actor, Vec<JobId>),
    /// Panics inside the writer (tests of its recovery).
    #[cfg(test)]
    Panic,
    /// Raises the on-disk high-water mark of cluster ids.
    Mark(u32),
    Deferral(DeferralOp),
    Route(JobId, ClassAd),
    EditInPlace(JobId, String, Vec<(String, Option<Expr>)>),
    /// The schedd died evaluating this (see [`crate::quarantine`]).
    Quarantine(quarantine::Crashed),
    /// Several ops, in order, in the same commit; each answers on its own.
    Many(Vec<Op>),
}

impl Op {
    /// Whether a commit holding this op waits for the disk
    /// ([`PoolOp::must_sync`]); every op but those pool ops does.
    pub(crate) fn must_sync(&self) -> bool {
        match self {
            Op::Pool(_, op) => op.must_sync(),
            Op::Many(ops) => ops.iter().any(Op::must_sync),
            _ => true,
        }
    }
}

/// The schedd's deferral timer's requests.
pub(crate) enum DeferralOp {
    /// These idle jobs may have missed their window.
    Missed(Vec<JobId>),
    /// The schedd started: every idle cron job takes its next run.
    Restart,
}

pub(crate) enum Reply {
    Cluster(u32),
    Removed(Vec<String>),
    Report(ChangeReport),
    Done,
    Many(Vec<Result<Reply, QueueError>>),
}

pub(crate) struct Request {
    pub(crate) op: Op,
    pub(crate) now: i64,
    pub(crate) reply: oneshot::Sender<Result<Reply, QueueError>>,
}

/// Something that happened to a job, for its event log and for whoever follows
/// the queue (the router, the shadows). Emitted only after it is durable.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueEvent {
    /// The job.
    pub id: JobId,
    /// When.
    pub time: i64,
    /// What.
    pub kind: EventKind,
    /// The job's full ad after the event (for removals and completions, the ad
    /// that went to history), made when first read.
    pub ad: Arc<EventAd>,
}

/// A job's full ad as a [`QueueEvent`] carries it: made from the job's parts
/// the first time it is read (through `Deref`), once for every reader. Most
/// readers look first for an attribute most jobs lack ([`EventAd::has`]: a
/// log, a DAG, a deferral, a route), which needs no full ad.
pub struct EventAd {
    parts: Option<EventParts>,
    ad: std::sync::OnceLock<ClassAd>,
}

/// What a job's full ad is made from ([`super::state::full_ad`]).
struct EventParts {
    cluster: Arc<ClassAd>,
    proc: super::state::Proc,
    id: JobId,
    schedd: Arc<str>,
}

impl EventAd {
    /// An event's ad made already.
    pub fn made(ad: ClassAd) -> EventAd {
        EventAd { parts: None, ad: std::sync::OnceLock::from(ad) }
    }

    /// The ad of `view`'s job, made when first read.
    pub(crate) fn of(view: &super::state::JobView<'_>, schedd: &Arc<str>) -> EventAd {
        let parts = EventParts {
            cluster: view.cluster.ad.clone(),
            proc: view.proc.clone(),
            id: view.id,
            schedd: schedd.clone(),
        };
        EventAd { parts: Some(parts), ad: std::sync::OnceLock::new() }
    }

    /// Whether the job's full ad binds `name`, without making it.
    pub fn has<N: classad::NameRef + ?Sized>(&self, name: &N) -> bool {
        match (&self.parts, self.ad.get()) {
            (_, Some(ad)) => ad.contains(name),
            (Some(p), None) => super::state::binds(&p.cluster, &p.proc, name),
            (None, None) => false,
        }
    }
}

impl std::ops::Deref for EventAd {
    type Target = ClassAd;
    fn deref(&self) -> &ClassAd {
        self.ad.get_or_init(|| match &self.parts {
            Some(p) => super::state::full_ad(&p.cluster, &p.proc, p.id, &p.schedd),
            None => ClassAd::new(),
        })
    }
}

impl std::fmt::Debug for EventAd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl PartialEq for EventAd {
    fn eq(&self, other: &EventAd) -> bool {
        **self == **other
    }
}

/// The kinds of [`QueueEvent`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum EventKind {
    /// Submitted.
    Submitted,
    /// Started running.
    Executing,
    /// Put on hold.
    Held(HoldInfo),
    /// Released from hold.
    Released(String),
    /// Removed (aborted).
    Removed(String),
    /// Ended and completed.
    Terminated,
    /// Ended and went back to idle (OnExitRemove false): the user log's
    /// 004 "Job terminated and was requeued".
    Requeued,
    /// Left its slot before finishing (vacated, preempted, its host lost) and
    /// went back to idle; `checkpointed` when it saved its state first.
    Evicted {
        /// The job checkpointed before leaving.
        checkpointed: bool,
    },
    /// An attribute was edited.
    Edited(String),
    /// A note for the job's event log (a generic event): skipped or missed
    /// cron runs.
    Note(String),
    /// Suspended by the execute host's policy (user log 010).
    Suspended,
    /// Running again after a suspension (user log 011).
    Unsuspended,
    /// A vacate was asked for (condor_vacate_job): its shadow has the host
    /// vacate it; the eviction that follows is the event the log shows.
    VacateAsked(String),
}

/// Called with the jobs that left the queue in a commit.
pub type LeftHook = Box<dyn Fn(&[JobId]) + Send + Sync>;

/// Receives events after each commit (the schedd writes event logs from here).
pub type EventSink = Box<dyn Fn(&[QueueEvent]) + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every op a commit may leave unsynced is named here with why its
    /// loss in a power cut is made good; any other op, and any batch
    /// holding one, syncs.
    #[test]
    fn only_ops_whose_loss_is_made_good_commit_unsynced() {
        let ad = ClassAd::new;
        let unsynced = [
            PoolOp::Started(ad()),        // the synced intent: the host is asked
            PoolOp::Matched,              // a counter the next match raises
            PoolOp::Rejected("r".into()), // the next cycle says it again
            PoolOp::Update(ad()),         // the next report brings it again
            PoolOp::Reconnected,          // a counter
        ];
        let synced = [
            PoolOp::Activating(ad()),
            PoolOp::NotStarted("c".into()),
            PoolOp::ActivationFailed("c".into(), "r".into()),
            PoolOp::Suspension(true),
            PoolOp::Evicted(ad()),
            PoolOp::Logged(vec!["l".into()]),
            PoolOp::Grid(ad()),
            PoolOp::Quarantined { what: "w".into(), reason: "r".into() },
        ];
        let id = JobId { cluster: 1, proc: 0 };
        for op in &unsynced {
            assert!(!op.must_sync(), "{op:?}");
            assert!(!Op::Pool(vec![id], op.clone()).must_sync(), "{op:?}");
        }
        for op in &synced {
            assert!(op.must_sync(), "{op:?}");
            let many = Op::Many(vec![
                Op::Pool(vec![id], PoolOp::Started(ad())),
                Op::Pool(vec![id], op.clone()),
            ]);
            assert!(many.must_sync(), "{op:?}");
        }
        assert!(Op::Exited(id, ad()).must_sync());
        assert!(Op::Started(id).must_sync());
        assert!(
            Op::Many(vec![Op::Pool(vec![id], PoolOp::Matched), Op::Exited(id, ad())]).must_sync()
        );
        assert!(
            !Op::Many(vec![
                Op::Pool(vec![id], PoolOp::Matched),
                Op::Pool(vec![id], PoolOp::Started(ad()))
            ])
            .must_sync()
        );
    }
}
