//! The writer thread and its group commit: every request waiting at a moment
//! applied in one transaction, committed once, answered after the commit.

use super::config::*;
use super::error::*;
use super::ops::*;
use super::state::*;
use super::store::*;
use super::txn::*;

use std::sync::mpsc;
use std::sync::{Arc, RwLock};

use rusqlite::Connection;

use crate::quarantine::Journal;
use crate::room::{DISK_FULL, Reserve, SpoolLedger};
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

pub(crate) struct Writer {
    pub(crate) conn: Connection,
    pub(crate) state: Arc<RwLock<QueueState>>,
    pub(crate) config: QueueConfig,
    pub(crate) journal: Arc<Journal>,
    pub(crate) ledger: Arc<SpoolLedger>,
    pub(crate) reserve: Option<Arc<Reserve>>,
    /// The connection's `synchronous` setting: `FULL` (true) but for a
    /// batch none of whose ops must sync ([`Op::must_sync`]).
    pub(crate) synced: bool,
}

impl Writer {
    pub(crate) fn run(mut self, rx: mpsc::Receiver<Request>) {
        while let Ok(first) = rx.recv() {
            let mut reqs = vec![first];
            while reqs.len() < 4096 {
                match rx.try_recv() {
                    Ok(r) => reqs.push(r),
                    Err(_) => break,
                }
            }
            self.batch(reqs);
        }
    }

    /// What a commit leaves to do outside the transaction: the files of
    /// uploads nobody keeps, the spool of jobs that left.
    pub(crate) fn after_commit(&self, batch: &Batch) {
        let dir = uploads_dir(&self.config.path);
        for d in &batch.gone_uploads {
            if let Some(name) = upload_name(d) {
                let _ = std::fs::remove_file(dir.join(name));
            }
        }
        if !batch.left.is_empty() {
            if let Some(f) = &self.config.on_left {
                f(&batch.left);
            }
            self.ledger.forget();
        }
    }

    /// Applies a batch of requests in one transaction. A request whose
    /// operation panics fails alone: the transaction is rolled back, the
    /// in-memory queue reloaded from the database, and the rest applied
    /// again without it, so one bad request never stops the writer nor
    /// costs anyone else's.
    pub(crate) fn batch(&mut self, mut reqs: Vec<Request>) {
        loop {
            match self.attempt(&reqs) {
                Attempt::Committed(results, batch) => {
                    let mut logged = true;
                    if let Some(sink) = &self.config.sink
                        && !batch.events.is_empty()
                    {
                        // A failing log writer never stops the queue: its
                        // events stay pending, for the next start.
                        let events = &batch.events;
                        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(events)))
                            .is_err()
                        {
                            tracing::error!(
                                "writing job event logs failed; retried at the next start"
                            );
                            logged = false;
                        }
                    }
                    if logged && batch.logged > 0 {
                        self.forget_logged(batch.logged);
                    }
                    for (req, r) in reqs.into_iter().zip(results) {
                        let _ = req.reply.send(r);
                    }
                    self.after_commit(&batch);
                    return;
                }
                // The disk is full: the reserve is given back and the batch
                // tried again, so that what frees space (removals) and what
                // must not be lost (holds, job ends) commits.
                Attempt::Failed(QueueError::Storage(m))
                    if m.starts_with(DISK_FULL)
                        && self.reserve.as_ref().is_some_and(|r| r.release()) => {}
                Attempt::Failed(e) => {
                    for req in reqs {
                        let _ = req.reply.send(Err(e.clone()));
                    }
                    return;
                }
                Attempt::Panicked(i, msg) => {
                    let bad = reqs.remove(i);
                    tracing::error!(
                        "a job queue request could not be applied ({msg}); it was refused and the \
                         others applied without it"
                    );
                    let _ = bad.reply.send(Err(QueueError::Invalid(format!(
                        "the schedd could not apply this request ({msg}); nothing of it was kept"
                    ))));
                    if reqs.is_empty() {
                        return;
                    }
                }
            }
        }
    }

    /// The event logs have every pending event up to `seq`: they are
    /// forgotten. Not synced: a crash before this reaches the disk only
    /// writes those events again at the next start.
    pub(crate) fn forget_logged(&mut self, seq: i64) {
        // (Left synced if the setting cannot change.)
        let _ = self.sync(false);
        if let Err(e) = self.conn.execute("DELETE FROM pending_events WHERE seq <= ?1", [seq]) {
            tracing::warn!("forgetting logged events: {e}");
        }
    }

    /// Sets whether the next commits wait for the disk (`synchronous` FULL
    /// or NORMAL, in WAL mode): a change only when it differs. On an error
    /// the setting is as it was.
    pub(crate) fn sync(&mut self, full: bool) -> rusqlite::Result<()> {
        if self.synced != full {
            let level = if full { "FULL" } else { "NORMAL" };
            self.conn.pragma_update(None, "synchronous", level)?;
            self.synced = full;
        }
        Ok(())
    }

    /// One try at a batch, holding the write lock throughout so that readers
    /// never see a change before its commit.
    pub(crate) fn attempt(&mut self, reqs: &[Request]) -> Attempt {
        let must_sync = reqs.iter().any(|r| r.op.must_sync());
        if let Err(e) = self.sync(must_sync)
            && must_sync
        {
            // Never a commit that must sync without the setting that does.
            return Attempt::Failed(QueueError::Storage(format!("setting synchronous: {e}")));
        }
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        let mut results = Vec::with_capacity(reqs.len());
        let mut batch = Batch::default();
        let mut panicked = None;
        let outcome = (|| -> Result<(), QueueError> {
            let tx = self.conn.transaction()?;
            for (i, req) in reqs.iter().enumerate() {
                let mut ctx = Txn {
                    tx: &tx,
                    state: &mut state,
                    now: req.now,
                    batch: &mut batch,
                    config: &self.config,
                    journal: &self.journal,
                    ledger: &self.ledger,
                };
                let r = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    ctx.apply(&req.op)
                })) {
                    Ok(r) => r,
                    Err(payload) => {
                        let msg = payload
                            .downcast_ref::<String>()
                            .map(String::as_str)
                            .or_else(|| payload.downcast_ref::<&str>().copied())
                            .unwrap_or("a panic")
                            .to_string();
                        panicked = Some((i, msg));
                        // Dropping the transaction rolls it back.
                        return Err(QueueError::Storage("rolled back".into()));
                    }
                };
                // A storage error inside an op fails the whole batch.
                if let Err(QueueError::Storage(e)) = &r {
                    return Err(QueueError::Storage(e.clone()));
                }
                results.push(r);
            }
            prune_history(&tx, &self.config, reqs.iter().map(|r| r.now).max().unwrap_or(0))?;
            tx.commit()?;
            Ok(())
        })();
        match outcome {
            Ok(()) => {
                if let Some(notify) = &self.config.notify
                    && !batch.events.is_empty()
                {
                    notify(&batch.events);
                }
                Attempt::Committed(results, batch)
            }
            Err(e) => {
                // The in-memory queue may hold part of what was rolled back.
                match load(&self.conn, &self.config.schedd_name) {
                    Ok(fresh) => {
                        let reserved = std::mem::take(&mut state.reserved);
                        let next = state.next_cluster;
                        *state = fresh;
                        state.reserved = reserved;
                        state.next_cluster = state.next_cluster.max(next);
                    }
                    Err(e2) => tracing::error!("reloading the job queue failed: {e2}"),
                }
                match panicked {
                    Some((i, msg)) => Attempt::Panicked(i, msg),
                    None => {
                        tracing::error!("job queue commit failed: {e}; reloaded from the database");
                        Attempt::Failed(e)
                    }
                }
            }
        }
    }
}

/// How one try at a batch went.
pub(crate) enum Attempt {
    /// Committed: each request's result, and the events to log.
    Committed(Vec<Result<Reply, QueueError>>, Batch),
    /// Nothing was kept; every request fails with this.
    Failed(QueueError),
    /// Request `.0` panicked (`.1` says how); nothing was kept.
    Panicked(usize, String),
}

pub(crate) fn prune_history(
    tx: &rusqlite::Transaction<'_>,
    config: &QueueConfig,
    now: i64,
) -> Result<(), QueueError> {
    tx.prepare_cached("DELETE FROM submits WHERE at < ?1")?.execute([now - SUBMIT_TOKEN_KEEP])?;
    // Cheap when nothing is due: both deletes use the primary key.
    tx.prepare_cached("DELETE FROM history WHERE seq <= (SELECT MAX(seq) FROM history) - ?1")?
        .execute([config.history_max_jobs as i64])?;
    if let Some(age) = config.history_max_age {
        tx.prepare_cached("DELETE FROM history WHERE left_queue < ?1")?.execute([now - age])?;
    }
    Ok(())
}
