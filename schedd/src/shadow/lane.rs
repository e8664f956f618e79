//! The claim's lane: one ordered stream of queue updates per claim, so a
//! job's start, updates and end are applied in order without the claim
//! waiting for each commit.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use andes_protocol::Clock;
use classad::ClassAd;
use tokio::sync::mpsc;

use super::state::{PoolState, lock};
use crate::job::JobId;
use crate::queue::{JobOp, PoolOp};

/// An ordered lane of queue updates for one claim.
pub(crate) struct Lane {
    pub(crate) tx: LaneTx,
    pub(crate) done: tokio::task::JoinHandle<()>,
}

/// Where a claim's shadows send their queue updates: straight to the
/// lane, or (for a batch being taken in) gathered until `flush`, so the
/// batch's updates go in one commit.
#[derive(Clone)]
pub(crate) struct LaneTx {
    pub(crate) tx: mpsc::UnboundedSender<LaneOp>,
    pub(crate) held: Option<Arc<Mutex<Vec<LaneOp>>>>,
}

impl LaneTx {
    pub(crate) fn send(&self, op: LaneOp) {
        match &self.held {
            Some(h) => lock(h).push(op),
            None => {
                let _ = self.tx.send(op);
            }
        }
    }

    /// This lane, gathering updates until `flush`.
    pub(crate) fn gathering(&self) -> LaneTx {
        LaneTx { tx: self.tx.clone(), held: Some(Arc::default()) }
    }

    /// Sends what was gathered, then waits until everything sent so far is
    /// committed. A shadow does this before it asks anything more of the
    /// claim's host, since the host takes its next request as the
    /// acknowledgement that what it reported is kept.
    pub(crate) async fn committed(&self) {
        self.flush();
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.tx.send(LaneOp::Sync(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// Sends what was gathered (before waiting on anything, so the queue is
    /// not behind what the shadows know).
    pub(crate) fn flush(&self) {
        if let Some(h) = &self.held {
            let ops = std::mem::take(&mut *lock(h));
            if !ops.is_empty() {
                let _ = self.tx.send(LaneOp::Many(ops));
            }
        }
    }
}

pub(crate) enum LaneOp {
    Pool(JobId, PoolOp),
    Exited(JobId, ClassAd),
    /// The job's part is over: it is no longer busy.
    Free(JobId),
    /// Several, in order (what a batch's shadows said, sent at once).
    Many(Vec<LaneOp>),
    /// Answered once everything sent before it is committed.
    Sync(tokio::sync::oneshot::Sender<()>),
}

impl Lane {
    pub(crate) fn start(inner: Arc<PoolState>) -> Lane {
        let (tx, mut rx) = mpsc::unbounded_channel::<LaneOp>();
        let done = tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                // Everything the claim has said meanwhile goes in one commit,
                // in order; the jobs whose part is over are freed after it.
                let mut ops = Vec::new();
                let mut frees = Vec::new();
                let mut syncs = Vec::new();
                let mut todo = vec![first];
                while let Some(op) = todo.pop().or_else(|| rx.try_recv().ok()) {
                    match op {
                        LaneOp::Pool(id, op) => ops.push(JobOp::Pool(id, op)),
                        LaneOp::Exited(id, ending) => ops.push(JobOp::Exited(id, ending)),
                        LaneOp::Free(id) => frees.push(id),
                        LaneOp::Many(many) => todo.extend(many.into_iter().rev()),
                        LaneOp::Sync(tx) => syncs.push(tx),
                    }
                }
                inner.apply_in_order(ops).await;
                for id in frees {
                    inner.free(id);
                }
                for tx in syncs {
                    let _ = tx.send(());
                }
            }
        });
        Lane { tx: LaneTx { tx, held: None }, done }
    }

    pub(crate) fn send(&self, op: LaneOp) {
        self.tx.send(op);
    }

    pub(crate) async fn close(self) {
        drop(self.tx);
        let _ = self.done.await;
    }
}

impl PoolState {
    /// A claim's queue updates, in order, in one commit. A commit that fails
    /// is retried every SHADOW_JOB_CLEANUP_RETRY_DELAY, up to
    /// SHADOW_MAX_JOB_CLEANUP_RETRIES times; then the jobs whose end it
    /// carried are requeued (HTCondor's shadow's final update).
    pub(crate) async fn apply_in_order(&self, ops: Vec<JobOp>) {
        if ops.is_empty() {
            return;
        }
        let mut tries = 0;
        // A storage error is most often brief (a full disk being freed):
        // quick tries first, 1 s doubling, then SHADOW_MAX_JOB_CLEANUP_RETRIES
        // more every SHADOW_JOB_CLEANUP_RETRY_DELAY.
        let mut quick = Duration::from_secs(1);
        loop {
            let now = self.clock.now();
            match self.queue.in_order(ops.clone(), now).await {
                Ok(results) => {
                    for (op, r) in ops.iter().zip(results) {
                        if let Err(e) = r {
                            // Held or removed meanwhile: nothing to apply.
                            let id = match op {
                                JobOp::Pool(id, _) | JobOp::Exited(id, _) => id,
                            };
                            tracing::debug!("job {id}: update not applied: {e}");
                        }
                    }
                    return;
                }
                Err(e) if quick < self.cfg.cleanup_retry_delay => {
                    tracing::warn!("queue update failed ({e}); retrying in {quick:?}");
                    tokio::time::sleep(quick).await;
                    quick *= 2;
                }
                Err(e) if tries < self.cfg.max_cleanup_retries => {
                    tracing::warn!("queue update failed ({e}); retrying");
                    tries += 1;
                    tokio::time::sleep(self.cfg.cleanup_retry_delay).await;
                }
                Err(e) => {
                    tracing::error!("queue update failed {tries} times ({e}); requeuing");
                    for op in &ops {
                        if let JobOp::Exited(id, _) = op {
                            let r = self
                                .queue
                                .pool(vec![*id], PoolOp::Evicted(ClassAd::new()), now)
                                .await;
                            if let Err(e) = r {
                                tracing::error!("job {id}: not requeued: {e}");
                            }
                        }
                    }
                    return;
                }
            }
        }
    }
}
