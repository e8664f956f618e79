//! [`Txn`]: one transaction of the writer, applying operations to the
//! database and the in-memory queue together; submits.

use super::actor::*;
use super::ads::*;
use super::config::*;
use super::error::*;
use super::ops::*;
use super::state::*;
use crate::attrs::{self, ROUTED_BY};

use std::sync::Arc;

use classad::{Expr, Value};
use rusqlite::{OptionalExtension, params};

use crate::deferral::{self};
use crate::job::{JobId, JobStatus, hold_code};
use crate::quarantine::Journal;
use crate::room::SpoolLedger;
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// One transaction of the writer: the database's and the in-memory queue's
/// changes of a batch, made together.
pub(crate) struct Txn<'a, 'b> {
    pub(crate) tx: &'a rusqlite::Transaction<'b>,
    pub(crate) state: &'a mut QueueState,
    pub(crate) now: i64,
    pub(crate) batch: &'a mut Batch,
    pub(crate) config: &'a QueueConfig,
    pub(crate) journal: &'a Journal,
    pub(crate) ledger: &'a SpoolLedger,
}

impl Txn<'_, '_> {
    pub(crate) fn apply(&mut self, op: &Op) -> Result<Reply, QueueError> {
        match op {
            Op::Submit(actor, s) => self.submit(actor, s, Origin::Outside).map(Reply::Cluster),
            Op::Change(actor, targets, change) => {
                let ids = self.select(actor, targets)?;
                self.change(&ids, change, actor).map(Reply::Report)
            }
            // What concerns one job at a time, on the schedd's own
            // initiative, is journaled by job (see crate::quarantine).
            Op::Started(id) => {
                let _evaluating = self.journal.enter(*id, "start of a run");
                self.started(*id).map(|_| Reply::Done)
            }
            Op::Pool(ids, op) => {
                for id in ids {
                    let _evaluating = self.journal.enter(*id, "update from its shadow");
                    self.pool_op(*id, op)?;
                }
                Ok(Reply::Done)
            }
            Op::Exited(id, ending) => {
                let _evaluating = self.journal.enter(*id, "end of a run");
                self.exited(*id, ending).map(|_| Reply::Done)
            }
            Op::Many(ops) => {
                let mut replies = Vec::with_capacity(ops.len());
                for op in ops {
                    let r = self.apply(op);
                    // A storage error fails the whole batch, as for one op.
                    if let Err(QueueError::Storage(e)) = &r {
                        return Err(QueueError::Storage(e.clone()));
                    }
                    replies.push(r);
                }
                Ok(Reply::Many(replies))
            }
            Op::Periodic => self.periodic().map(Reply::Report),
            Op::Quarantine(c) => self.quarantine(c.job, &c.what, c.reason()).map(|_| Reply::Done),
            Op::Route(original, copy) => {
                let _evaluating = self.journal.enter(*original, "routed copy");
                self.route(*original, copy).map(Reply::Cluster)
            }
            Op::EditInPlace(id, route, changes) => {
                let Some(p) = self.state.jobs.get_mut(id) else {
                    return Err(QueueError::NotFound(format!("job {id} is not in the queue")));
                };
                if p.status != JobStatus::Idle {
                    return Err(QueueError::Invalid(format!("job {id} is not idle")));
                }
                let cluster_ad = self.state.clusters.get(&id.cluster).map(|c| c.ad.clone());
                let Some(p) = self.state.jobs.get_mut(id) else { unreachable!("checked above") };
                for (name, e) in changes {
                    if attrs::is_protected(name) {
                        continue;
                    }
                    match e {
                        Some(e) => p.ad.insert(name.as_str(), e.clone()),
                        // A cluster-wide attribute is hidden for this job.
                        None if cluster_ad.as_ref().is_some_and(|c| c.contains(name)) => {
                            p.ad.insert(name.as_str(), Expr::from(Value::Undefined))
                        }
                        None => {
                            p.ad.remove(name);
                        }
                    }
                }
                self.persist(*id)?;
                self.event(
                    *id,
                    EventKind::Note(format!("job router: edited in place by route {route}")),
                )?;
                Ok(Reply::Done)
            }
            Op::Deferral(DeferralOp::Missed(ids)) => {
                for id in ids {
                    let _evaluating = self.journal.enter(*id, "missed deferral");
                    self.missed(*id)?;
                }
                Ok(Reply::Done)
            }
            Op::Deferral(DeferralOp::Restart) => {
                let ids: Vec<JobId> = self
                    .state
                    .jobs
                    .iter()
                    .filter(|(_, p)| p.status == JobStatus::Idle)
                    // Being started: its host keeps its time (asked after
                    // the restart, as the shadows do).
                    .filter(|(_, p)| {
                        !p.ad.contains(classad::name!(crate::attrs::ACTIVATION_PENDING))
                    })
                    .map(|(id, _)| *id)
                    .collect();
                for id in ids {
                    let _evaluating = self.journal.enter(id, "cron schedule");
                    if self.is_cron(id) {
                        self.missed(id)?;
                        self.schedule_cron(id)?;
                        self.persist(id)?;
                    }
                }
                Ok(Reply::Done)
            }
            Op::StoreFile(actor, digest, size) => self.store_upload(actor, digest, &[], *size),
            Op::StoreModule(actor, digest, bytes) => {
                self.store_upload(actor, digest, bytes, bytes.len() as u64)
            }
            #[cfg(test)]
            Op::Panic => panic!("a test's panic"),
            Op::Mark(mark) => {
                self.tx.execute(
                    "INSERT INTO meta (key, value) VALUES ('cluster_mark', ?1)
                     ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)",
                    [i64::from(*mark)],
                )?;
                self.state.cluster_mark = self.state.cluster_mark.max(*mark);
                Ok(Reply::Done)
            }
            Op::Fetched(actor, ids) => {
                let mut report = ChangeReport::default();
                for id in ids {
                    let Some(v) = self.state.job(*id) else {
                        report.skipped.push((*id, "not in the queue".into()));
                        continue;
                    };
                    if !actor.may_act_on(&v) {
                        return Err(QueueError::Forbidden(format!(
                            "job {id} belongs to {}; {} may act only on their own jobs",
                            v.owner(),
                            actor.name
                        )));
                    }
                    let status = v.proc.status;
                    if let Some(p) = self.state.jobs.get_mut(id) {
                        p.ad.insert_value(classad::name!("StageOutStart"), self.now);
                        p.ad.insert_value(classad::name!("StageOutFinish"), self.now);
                    }
                    if status == JobStatus::Completed && !self.leave_in_queue(*id) {
                        self.leave(*id)?;
                    } else {
                        self.persist(*id)?;
                    }
                    report.changed.push(*id);
                }
                Ok(Reply::Report(report))
            }
            Op::ReclaimUploads(owner, bytes) => {
                self.reclaim_uploads(owner, *bytes, 0)?;
                Ok(Reply::Done)
            }
            Op::CollectUploads => {
                // An owner's reference goes once no job of theirs names it
                // (after the grace a client has between upload and submit);
                // the bytes go with the last reference.
                let used = self.state.referenced_uploads();
                let cutoff = self.now - self.config.upload_grace;
                let old: Vec<(String, String)> = self
                    .tx
                    .prepare_cached("SELECT owner, digest FROM upload_refs WHERE stored < ?1")?
                    .query_map([cutoff], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?;
                for (owner, digest) in old.into_iter().filter(|k| !used.contains(k)) {
                    self.tx
                        .prepare_cached("DELETE FROM upload_refs WHERE owner = ?1 AND digest = ?2")?
                        .execute([owner, digest])?;
                }
                let named: std::collections::HashSet<String> =
                    used.into_iter().map(|(_, d)| d).collect();
                let orphans: Vec<String> = self
                    .tx
                    .prepare_cached(
                        "SELECT digest FROM modules WHERE stored < ?1
                         AND NOT EXISTS (SELECT 1 FROM upload_refs r WHERE r.digest = modules.digest)",
                    )?
                    .query_map([cutoff], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                let mut removed = Vec::new();
                for d in orphans.iter().filter(|d| !named.contains(d.as_str())) {
                    if self.tx.execute("DELETE FROM modules WHERE digest = ?1", [d])? > 0 {
                        removed.push(d.clone());
                    }
                }
                Ok(Reply::Removed(removed))
            }
        }
    }

    pub(crate) fn submit(
        &mut self,
        actor: &Actor,
        s: &Submit,
        origin: Origin,
    ) -> Result<u32, QueueError> {
        if s.procs.is_empty() {
            return Err(QueueError::Invalid("a submit needs at least one job".into()));
        }
        if s.procs.len() > u32::MAX as usize / 2 {
            return Err(QueueError::Invalid("too many jobs in one cluster".into()));
        }
        if let Origin::Outside = origin {
            self.check_job_limits(actor, s)?;
        }
        let cluster = match s.cluster {
            None => {
                let c = self.state.next_cluster;
                self.state.next_cluster += 1;
                c
            }
            Some(c) => match self.state.reserved.get(&c) {
                Some(o) if **o == *actor.name => c,
                Some(_) => {
                    return Err(QueueError::Forbidden(format!(
                        "cluster {c} was reserved by another user"
                    )));
                }
                None => {
                    // The same submit again (its answer was lost): the first
                    // answer, not a duplicate.
                    let first: Option<(String, String)> = self
                        .tx
                        .prepare_cached("SELECT owner, token FROM submits WHERE cluster = ?1")?
                        .query_row([i64::from(c)], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()?;
                    if let Some((owner, token)) = first
                        && owner == actor.name
                        && token == submit_token(s)
                    {
                        return Ok(c);
                    }
                    return Err(QueueError::Invalid(format!(
                        "cluster {c} is not reserved (the schedd may have restarted, or it was \
                         used by another submit); submit again"
                    )));
                }
            },
        };
        if s.cluster.is_some() {
            self.tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO submits (cluster, owner, token, at) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![i64::from(cluster), actor.name, submit_token(s), self.now])?;
        }
        let mut ad = s.cluster_ad.clone();
        let cluster_held = submitted_held(ad.get(classad::name!("JobStatus")));
        let cluster_cron = andes_cron::Field::ALL.iter().any(|f| ad.contains(f.attribute()));
        // A deferred job becomes matchable ScheddInterval before its prep
        // time: this schedd's own interval, not the 300 s a submit file
        // assumes.
        let wants_interval = ad.contains(classad::name!("ScheddInterval"))
            || s.procs.iter().any(|p| p.contains(classad::name!("ScheddInterval")));
        // Nothing the schedd sets comes from the submitter; a routed copy
        // (built here from its original and the admin's route) keeps its
        // route's attributes and loses only the original's identity.
        origin.strip(&mut ad, actor.schedd);
        if let Origin::Outside = origin {
            self.check_uploads(actor, &ad)?;
        }
        ad.insert_value(classad::name!("ClusterId"), cluster as i64);
        if actor.schedd {
            // Routed here for the owner its ad names (the API checked that
            // this pool trusts them), by the schedd recorded beside it.
            if !matches!(ad.get(classad::name!("Owner")), Some(Expr::Lit(Value::Str(_)))) {
                return Err(QueueError::Invalid(
                    "a routed job's ad must name its Owner as a string".into(),
                ));
            }
            ad.insert_value(classad::name!(ROUTED_BY), actor.name.as_str());
        } else {
            ad.insert_value(classad::name!("Owner"), actor.name.as_str());
        }
        // HTCondor's User: Owner@UID_DOMAIN.
        let user = match ad.get(classad::name!("Owner")) {
            Some(Expr::Lit(Value::Str(o))) => format!("{o}@{}", self.config.uid_domain),
            _ => format!("{}@{}", actor.name, self.config.uid_domain),
        };
        ad.insert_value(classad::name!("User"), user.as_str());
        ad.insert_value(classad::name!("QDate"), self.now);
        if !ad.contains(classad::name!("MyType")) {
            ad.insert_value(classad::name!("MyType"), "Job");
        }
        if wants_interval {
            ad.insert_value(classad::name!("ScheddInterval"), self.config.schedd_interval);
        }
        // The counters a job starts with, as condor_submit sets them (and
        // NumHolds, so that a policy such as `NumHolds >= 2` is false rather
        // than undefined, which holds); the startd's
        // IS_VALID_CHECKPOINT_PLATFORM lets a job with NumCkpts == 0 run on
        // any platform.
        for counter in ["NumCkpts", "NumRestarts", "NumJobStarts", "NumJobCompletions", "NumHolds"]
        {
            ad.insert_value(counter, 0i64);
        }
        let mut procs = Vec::with_capacity(s.procs.len());
        for (i, p) in s.procs.iter().enumerate() {
            let mut p = p.clone();
            // A job submitted with `hold = true` starts held; every other starts idle.
            let held = match p.get(classad::name!("JobStatus")) {
                Some(e) => submitted_held(Some(e)),
                None => cluster_held,
            };
            origin.strip(&mut p, false);
            if let Origin::Outside = origin {
                self.check_uploads(actor, &p)?;
            }
            let status = if held { JobStatus::Held } else { JobStatus::Idle };
            if cluster_cron || super::cron::CRON_ATTRS.get().iter().any(|n| p.contains(n)) {
                let mut whole = ad.clone();
                whole.update(&p);
                match deferral::next_run(&whole, self.now, &self.config.cron_time_zone) {
                    Some(Ok(t)) => p.insert_value(classad::name!("DeferralTime"), t),
                    Some(Err(e)) => {
                        return Err(QueueError::Invalid(format!("job {cluster}.{i}: {e}")));
                    }
                    None => {}
                }
            }
            if held
                && !p.contains(classad::name!("HoldReasonCode"))
                && !ad.contains(classad::name!("HoldReasonCode"))
            {
                p.insert_value(classad::name!("HoldReasonCode"), hold_code::SUBMITTED_ON_HOLD);
                p.insert_value(classad::name!("HoldReason"), "submitted on hold at user's request");
            }
            procs.push((JobId::new(cluster, i as u32), status, p));
        }
        let (owner, batch) = owner_and_batch(&ad);
        self.tx.execute(
            "INSERT INTO clusters (id, ad, submitted, completed) VALUES (?1, ?2, ?3, 0)",
            params![cluster as i64, ad.to_string(), procs.len() as i64],
        )?;
        {
            let mut stmt = self.tx.prepare_cached(
                "INSERT INTO jobs (cluster, proc, status, entered, ad) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for (id, status, p) in &procs {
                stmt.execute(params![
                    id.cluster as i64,
                    id.proc as i64,
                    status.code(),
                    self.now,
                    p.to_string()
                ])?;
            }
        }
        self.tx.execute(
            "INSERT INTO meta (key, value) VALUES ('next_cluster', ?1)
             ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)",
            [self.state.next_cluster as i64],
        )?;
        self.state.reserved.remove(&cluster);
        let n = procs.len() as u32;
        *self.state.owner_jobs.entry(owner.clone()).or_insert(0) += u64::from(n);
        let by = uploader_of(&ad);
        for (_, _, p) in &procs {
            for d in proc_uploads(&ad, p) {
                *self.state.upload_uses.entry((by.clone(), d)).or_insert(0) += 1;
            }
        }
        self.state.clusters.insert(
            cluster,
            Cluster { ad: Arc::new(ad), owner, batch, submitted: n, completed: 0 },
        );
        let want_events = self.config.sink.is_some() || self.config.notify.is_some();
        for (id, status, p) in procs {
            self.state.jobs.insert(id, Proc { status, entered: self.now, ad: p });
            if want_events {
                self.event(id, EventKind::Submitted)?;
                if status == JobStatus::Held
                    && let Some(v) = self.state.job(id)
                {
                    let info = hold_info_of(&v.ad());
                    self.event(id, EventKind::Held(info))?;
                }
            }
        }
        Ok(cluster)
    }

    pub(crate) fn event(&mut self, id: JobId, kind: EventKind) -> Result<(), QueueError> {
        if self.config.sink.is_none() && self.config.notify.is_none() {
            return Ok(());
        }
        if let Some(v) = self.state.job(id) {
            // Made only if a reader needs the whole ad.
            let ad = Arc::new(super::ops::EventAd::of(&v, &self.state.schedd_name));
            // An event bound for an event log is kept in the same
            // transaction as its change until the log has it: a crash between
            // the commit and the log's write loses nothing (it is written at
            // the next start).
            if self.config.sink.is_some()
                && crate::eventlog::LOG_ATTRS.get().iter().any(|a| ad.has(a))
            {
                let kind_text = serde_json::to_string(&kind)
                    .map_err(|e| QueueError::Storage(format!("an event: {e}")))?;
                self.tx
                    .prepare_cached(
                        "INSERT INTO pending_events (cluster, proc, time, kind, ad) \
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                    )?
                    .execute(params![
                        id.cluster as i64,
                        id.proc as i64,
                        self.now,
                        kind_text,
                        ad.to_string()
                    ])?;
                self.batch.logged = self.batch.logged.max(self.tx.last_insert_rowid());
            }
            self.batch.events.push(QueueEvent { id, time: self.now, kind, ad });
        }
        Ok(())
    }

    /// Writes the job's own part to the database.
    pub(crate) fn persist(&mut self, id: JobId) -> Result<(), QueueError> {
        let Some(p) = self.state.jobs.get(&id) else { return Ok(()) };
        self.tx
            .prepare_cached(
                "UPDATE jobs SET status = ?3, entered = ?4, ad = ?5 WHERE cluster = ?1 AND proc = ?2",
            )?
            .execute(params![
                id.cluster as i64,
                id.proc as i64,
                p.status.code(),
                p.entered,
                p.ad.to_string()
            ])?;
        Ok(())
    }

    /// Moves a job from the queue to history; drops its cluster with its last job.
    pub(crate) fn leave(&mut self, id: JobId) -> Result<(), QueueError> {
        let Some(v) = self.state.job(id) else { return Ok(()) };
        let text = v.ad_text();
        let owner = v.owner().to_string();
        let uploader = uploader_of(&v.cluster.ad);
        let digests = proc_uploads(&v.cluster.ad, &v.proc.ad);
        self.batch.left.push(id);
        self.tx
            .prepare_cached(
                "INSERT INTO history (cluster, proc, owner, left_queue, ad) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![id.cluster as i64, id.proc as i64, owner, self.now, text])?;
        self.tx
            .prepare_cached("DELETE FROM jobs WHERE cluster = ?1 AND proc = ?2")?
            .execute(params![id.cluster as i64, id.proc as i64])?;
        self.state.jobs.remove(&id);
        if let Some(n) = self.state.owner_jobs.get_mut(owner.as_str()) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.state.owner_jobs.remove(owner.as_str());
            }
        }
        if self.state.cluster_jobs(id.cluster).next().is_none() {
            self.state.clusters.remove(&id.cluster);
            self.tx.execute("DELETE FROM clusters WHERE id = ?1", [id.cluster as i64])?;
        }
        self.release_uploads(&uploader, digests)
    }

    /// Refuses a submit past MAX_JOBS_PER_SUBMISSION, or one that would take
    /// its owner past MAX_JOBS_PER_OWNER or the queue past
    /// MAX_JOBS_SUBMITTED.
    pub(crate) fn check_job_limits(&self, actor: &Actor, s: &Submit) -> Result<(), QueueError> {
        let n = s.procs.len() as u64;
        let limits = self.config.job_limits;
        if n > limits.per_submission {
            return Err(QueueError::Invalid(format!(
                "a submit of {n} jobs is more than MAX_JOBS_PER_SUBMISSION ({}) allows",
                limits.per_submission
            )));
        }
        let owner: &str = match (actor.schedd, s.cluster_ad.get(classad::name!("Owner"))) {
            (true, Some(Expr::Lit(Value::Str(o)))) => o,
            _ => &actor.name,
        };
        let held = self.state.owner_jobs.get(owner).copied().unwrap_or(0);
        if held + n > limits.per_owner {
            return Err(QueueError::Forbidden(format!(
                "{owner} has {held} jobs in the queue; {n} more would pass MAX_JOBS_PER_OWNER ({})",
                limits.per_owner
            )));
        }
        let all = self.state.jobs.len() as u64;
        if all + n > limits.submitted {
            return Err(QueueError::Forbidden(format!(
                "the queue holds {all} jobs; {n} more would pass MAX_JOBS_SUBMITTED ({})",
                limits.submitted
            )));
        }
        Ok(())
    }
}

/// What one batch leaves to do after its commit.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) events: Vec<QueueEvent>,
    /// The last `pending_events` row written for the event logs.
    pub(crate) logged: i64,
    /// Jobs that left the queue.
    pub(crate) left: Vec<JobId>,
    /// Uploads no longer kept for anyone: their files go after the commit.
    pub(crate) gone_uploads: Vec<String>,
}

/// What identifies a submit's content: the SHA-256 of its ads' text.
pub(crate) fn submit_token(s: &Submit) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(s.cluster_ad.to_string().as_bytes());
    for p in &s.procs {
        h.update(b"\n");
        h.update(p.to_string().as_bytes());
    }
    hex::encode(h.finalize())
}
