//! [`Queue`]: the handle every part of the schedd holds, its requests and
//! its reads.

use super::actor::*;
use super::ads::*;
use super::commit::*;
use super::config::*;
use super::error::*;
use super::ops::*;
use super::state::*;
use super::store::*;
use crate::attrs::{self, Reader};

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use classad::{ClassAd, EvalOptions, Evaluator, Expr};
use rusqlite::{Connection, OptionalExtension};
use tokio::sync::oneshot;

use crate::job::JobId;
use crate::quarantine::Journal;
use crate::room::{Reserve, SpoolLedger};
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// The job queue. Cheap to clone; all clones share one queue.
#[derive(Clone)]
pub struct Queue {
    pub(crate) deferral_config: Arc<(jiff::tz::TimeZone, i64)>,
    pub(crate) state: Arc<RwLock<QueueState>>,
    pub(crate) tx: mpsc::SyncSender<Request>,
    pub(crate) reader: Arc<std::sync::Mutex<Connection>>,
    pub(crate) uploads: Arc<PathBuf>,
    pub(crate) upload_quota: u64,
    pub(crate) reserve_bytes: u64,
    pub(crate) ledger: Arc<SpoolLedger>,
    pub(crate) reserve: Option<Arc<Reserve>>,
    pub(crate) journal: Arc<Journal>,
}

impl Queue {
    /// Opens (or creates) the queue at `config.path` and starts its writer thread.
    pub fn open(config: QueueConfig) -> Result<Queue, QueueError> {
        let conn = open(&config.path)?;
        conn.execute_batch(SCHEMA)?;
        migrate_modules(&conn)?;
        owner_only(&config.path, &["", "-wal", "-shm"]);
        let loaded = load(&conn, &config.schedd_name)?;
        migrate_upload_refs(&conn, &loaded)?;
        let state = Arc::new(RwLock::new(loaded));
        replay_pending_events(&conn, &config)?;
        let reader = Arc::new(std::sync::Mutex::new(open(&config.path)?));
        let (tx, rx) = mpsc::sync_channel::<Request>(4096);
        let deferral_config = Arc::new((config.cron_time_zone.clone(), config.schedd_interval));
        let uploads = Arc::new(uploads_dir(&config.path));
        std::fs::create_dir_all(&*uploads)
            .map_err(|e| QueueError::Storage(format!("{}: {e}", uploads.display())))?;
        owner_only(&uploads, &[""]);
        sweep_uploads(&conn, &uploads)?;
        let upload_quota = config.upload_quota_bytes;
        let reserve_bytes = config.reserve_bytes;
        let spool = config.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let ledger = SpoolLedger::new(spool.clone());
        let reserve = (reserve_bytes > 0)
            .then(|| Arc::new(Reserve::new(spool.join(".reserve"), reserve_bytes)));
        let (journal, crashed) = Journal::open(&config.path);
        let journal = Arc::new(journal);
        let mut writer = Writer {
            conn,
            state: state.clone(),
            config,
            journal: journal.clone(),
            ledger: ledger.clone(),
            reserve: reserve.clone(),
            synced: true,
        };
        // The jobs it died evaluating are held before anything can read
        // the queue: a router's or policy's first pass, reading it before
        // the quarantine was applied, would evaluate the job again and die
        // again.
        let quarantines: Vec<Request> = crashed
            .into_iter()
            .map(|c| {
                tracing::error!(
                    "the schedd stopped while evaluating the {} of job {}: quarantining it",
                    c.what,
                    c.job
                );
                let (reply, _) = oneshot::channel();
                let now = jiff::Timestamp::now().as_second();
                Request { op: Op::Quarantine(c), now, reply }
            })
            .collect();
        if !quarantines.is_empty() {
            writer.batch(quarantines);
        }
        std::thread::Builder::new()
            .name("andes-queue-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| QueueError::Storage(format!("cannot start the queue writer: {e}")))?;
        Ok(Queue {
            deferral_config,
            state,
            tx,
            reader,
            uploads,
            upload_quota,
            reserve_bytes,
            ledger,
            reserve,
            journal,
        })
    }

    /// The journal of what the schedd is evaluating of its jobs, for every
    /// part that evaluates a job's ad on its own initiative (see
    /// [`crate::quarantine`]).
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// A read view of the queue. Hold it briefly: writers wait for it.
    pub fn read(&self) -> RwLockReadGuard<'_, QueueState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The ads of the jobs `wanted` selects for which `constraint` is true,
    /// as `viewer` may see them ([`attrs::visible`]), in id order, at most
    /// `limit`. The read lock is taken for a few hundred jobs at a time and
    /// released before any constraint is evaluated; the constraint is
    /// evaluated on what the caller may see, within [`REQUEST_STEPS`] in all.
    /// Blocking: call it off the async runtime.
    pub fn query(
        &self,
        viewer: &Actor,
        wanted: impl Fn(&JobView<'_>) -> bool,
        constraint: Option<&Expr>,
        limit: Option<usize>,
        now: i64,
    ) -> Result<Vec<(JobId, ClassAd)>, QueueError> {
        let mut ev = Evaluator::with_options(EvalOptions { now: Some(now), ..Default::default() });
        ev.set_step_pool(Some(REQUEST_STEPS));
        let mut out = Vec::new();
        let mut from = JobId::new(0, 0);
        loop {
            let (chunk, last) = {
                let st = self.read();
                let mut last = None;
                let mut chunk: Vec<(JobId, ClassAd)> = Vec::new();
                for (id, proc) in st.jobs.range(from..).take(READ_CHUNK) {
                    last = Some(*id);
                    let Some(cluster) = st.clusters.get(&id.cluster) else { continue };
                    let v = JobView { id: *id, cluster, proc, schedd: &st.schedd_name };
                    if wanted(&v) {
                        chunk.push((v.id, attrs::visible(v.ad(), reader_of(viewer, &v))));
                    }
                }
                (chunk, last)
            };
            for (id, ad) in chunk {
                if let Some(c) = constraint {
                    let v = ev.eval(c, Some(&ad), None);
                    if ev.exhausted() {
                        return Err(too_costly("constraint"));
                    }
                    if !is_true(&v) {
                        continue;
                    }
                }
                if limit.is_some_and(|l| out.len() >= l) {
                    return Ok(out);
                }
                out.push((id, ad));
            }
            match last {
                Some(l) if l.proc < u32::MAX => from = JobId::new(l.cluster, l.proc + 1),
                Some(l) if l.cluster < u32::MAX => from = JobId::new(l.cluster + 1, 0),
                _ => return Ok(out),
            }
        }
    }

    pub(crate) async fn call(&self, op: Op, now: i64) -> Result<Reply, QueueError> {
        let (reply, rx) = oneshot::channel();
        let tx = self.tx.clone();
        // The channel is bounded: waiting for room must not block the runtime.
        let req = Request { op, now, reply };
        match tx.try_send(req) {
            Ok(()) => {}
            Err(mpsc::TrySendError::Full(req)) => {
                tokio::task::spawn_blocking(move || tx.send(req).map_err(|_| ()))
                    .await
                    .map_err(|e| QueueError::Storage(e.to_string()))?
                    .map_err(|_| QueueError::Storage("the queue writer has stopped".into()))?;
            }
            Err(mpsc::TrySendError::Disconnected(_)) => {
                return Err(QueueError::Storage("the queue writer has stopped".into()));
            }
        }
        rx.await.map_err(|_| QueueError::Storage("the queue writer has stopped".into()))?
    }

    /// Hands out a cluster id for `actor` to expand a submit description with
    /// (`$(Cluster)`), as condor_submit asks the schedd for a new cluster first.
    /// The reservation itself is held in memory: one made before a restart is
    /// refused after it, clearly (the client expands and submits again). No id
    /// handed out is ever handed out again, restart or not: a high-water mark
    /// past it is on disk before the id is returned.
    pub async fn reserve_cluster(&self, actor: &Actor, now: i64) -> Result<u32, QueueError> {
        self.reserve_clusters(actor, 1, now).await
    }

    /// Reserves `count` consecutive cluster ids for `actor`; the first.
    pub async fn reserve_clusters(
        &self,
        actor: &Actor,
        count: u32,
        now: i64,
    ) -> Result<u32, QueueError> {
        let count = count.max(1);
        let (first, last, mark) = {
            let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
            let first = st.next_cluster;
            let Some(next) = first.checked_add(count) else {
                return Err(QueueError::Invalid("no cluster ids are left".into()));
            };
            st.next_cluster = next;
            let owner: std::sync::Arc<str> = actor.name.as_str().into();
            for id in first..next {
                st.reserved.insert(id, owner.clone());
            }
            while st.reserved.len() > MAX_RESERVED {
                st.reserved.pop_first();
            }
            (first, next - 1, st.cluster_mark)
        };
        if last >= mark {
            self.call(Op::Mark(last.saturating_add(CLUSTER_MARK_STEP)), now).await?;
        }
        Ok(first)
    }

    /// Submits a cluster; returns its ClusterId once it is durable.
    pub async fn submit(&self, actor: &Actor, submit: Submit, now: i64) -> Result<u32, QueueError> {
        match self.call(Op::Submit(actor.clone(), submit), now).await? {
            Reply::Cluster(c) => Ok(c),
            _ => unreachable!("submit replies with a cluster"),
        }
    }

    /// Holds, releases, removes or edits jobs.
    pub async fn change(
        &self,
        actor: &Actor,
        targets: Targets,
        change: Change,
        now: i64,
    ) -> Result<ChangeReport, QueueError> {
        let mut targets = targets;
        if let Some(text) = targets.constraint.take() {
            // The constraint is evaluated here, on the jobs' public ads, out of
            // the writer's way and within a budget; the writer then checks
            // the rest (ids, owners, rights) as always.
            let c = parse_constraint(&text)?;
            let (q, t, a) = (self.clone(), targets.clone(), actor.clone());
            let matched = tokio::task::spawn_blocking(move || {
                let named = !t.ids.is_empty() || !t.owners.is_empty();
                q.query(
                    &a,
                    |v| {
                        if named {
                            t.ids.iter().any(|sel| sel.selects(v.id))
                                || t.owners.iter().any(|o| o == v.owner())
                        } else {
                            a.may_act_on(v)
                        }
                    },
                    Some(&c),
                    None,
                    now,
                )
            })
            .await
            .map_err(|e| QueueError::Storage(e.to_string()))??;
            let mut ids: Vec<JobId> = matched.into_iter().map(|(id, _)| id).collect();
            ids.sort();
            targets.matched = Some(ids);
            targets.constraint = Some(text);
        }
        match self.call(Op::Change(actor.clone(), targets, change), now).await? {
            Reply::Report(r) => Ok(r),
            _ => unreachable!("change replies with a report"),
        }
    }

    /// A job started running (from its shadow).
    pub async fn job_started(&self, id: JobId, now: i64) -> Result<(), QueueError> {
        self.call(Op::Started(id), now).await.map(|_| ())
    }

    /// Records what a shadow or the negotiation learned about jobs (see
    /// [`PoolOp`]). Jobs no longer in the queue are skipped; a job in the wrong
    /// state for the operation is an error (for a single job) or skipped.
    pub async fn pool(&self, ids: Vec<JobId>, op: PoolOp, now: i64) -> Result<(), QueueError> {
        self.call(Op::Pool(ids, op), now).await.map(|_| ())
    }

    /// [`Queue::pool`] of `op` on `ids`, with the match of `matched`
    /// counted ([`PoolOp::Matched`]) in the same commit: a claim's first
    /// activation intent costs one commit, not two. The answer is `op`'s.
    pub async fn pool_matched(
        &self,
        matched: JobId,
        ids: Vec<JobId>,
        op: PoolOp,
        now: i64,
    ) -> Result<(), QueueError> {
        let ops = vec![Op::Pool(vec![matched], PoolOp::Matched), Op::Pool(ids, op)];
        match self.call(Op::Many(ops), now).await? {
            Reply::Many(mut r) => r.pop().unwrap_or(Ok(Reply::Done)).map(|_| ()),
            _ => unreachable!("many ops answer with many replies"),
        }
    }

    /// A job ended; `ending` carries ExitCode/ExitBySignal/ExitSignal and usage, or a
    /// hold (HoldReasonCode, HoldReason, HoldReasonSubCode) from the execute side.
    pub async fn job_exited(&self, id: JobId, ending: ClassAd, now: i64) -> Result<(), QueueError> {
        self.call(Op::Exited(id, ending), now).await.map(|_| ())
    }

    /// Applies `ops` in order, in one commit: each gets its own answer, and a
    /// storage failure (`Err`) leaves none of them applied. What a claim's
    /// updates go through, so a busy claim costs one commit per round of
    /// updates rather than one per update.
    pub async fn in_order(
        &self,
        ops: Vec<JobOp>,
        now: i64,
    ) -> Result<Vec<Result<(), QueueError>>, QueueError> {
        let ops = ops
            .into_iter()
            .map(|op| match op {
                JobOp::Pool(id, op) => Op::Pool(vec![id], op),
                JobOp::Exited(id, ending) => Op::Exited(id, ending),
            })
            .collect();
        match self.call(Op::Many(ops), now).await? {
            Reply::Many(r) => Ok(r.into_iter().map(|r| r.map(|_| ())).collect()),
            _ => unreachable!("many ops answer with many replies"),
        }
    }

    /// Idle deferred jobs whose window may have closed unmatched: a cron job
    /// counts the missed run and takes its next one; any other is held.
    pub async fn deferral_missed(&self, ids: Vec<JobId>, now: i64) -> Result<(), QueueError> {
        self.call(Op::Deferral(DeferralOp::Missed(ids)), now).await.map(|_| ())
    }

    /// Routes the idle job `original` (the job router): `copy` becomes a new
    /// job of the same owner (its routed copy, RoutedFromJobId), and the
    /// original records RoutedToJobId and RouteName. From then on the
    /// original mirrors the copy: see [`crate::router`].
    pub async fn route(
        &self,
        original: JobId,
        copy: ClassAd,
        now: i64,
    ) -> Result<JobId, QueueError> {
        match self.call(Op::Route(original, copy), now).await? {
            Reply::Cluster(c) => Ok(JobId::new(c, 0)),
            _ => unreachable!("route replies with the copy's cluster"),
        }
    }

    /// Transforms an idle job in place (an EditJobInPlace route): each
    /// attribute set (`Some`) or deleted (`None`).
    pub async fn edit_in_place(
        &self,
        id: JobId,
        route: &str,
        changes: Vec<(String, Option<Expr>)>,
        now: i64,
    ) -> Result<(), QueueError> {
        self.call(Op::EditInPlace(id, route.to_string(), changes), now).await.map(|_| ())
    }

    /// Gives every idle cron job its next run (at schedd start or reconfiguration).
    pub async fn recompute_cron(&self, now: i64) -> Result<(), QueueError> {
        self.call(Op::Deferral(DeferralOp::Restart), now).await.map(|_| ())
    }

    /// The configured cron time zone and SCHEDD_INTERVAL.
    pub fn deferral_config(&self) -> &(jiff::tz::TimeZone, i64) {
        &self.deferral_config
    }

    /// Evaluates every job's periodic policy at `now` and applies what fires.
    /// The schedd calls this every PERIODIC_EXPR_INTERVAL.
    pub async fn periodic(&self, now: i64) -> Result<ChangeReport, QueueError> {
        match self.call(Op::Periodic, now).await? {
            Reply::Report(r) => Ok(r),
            _ => unreachable!("periodic replies with a report"),
        }
    }

    /// Stores a module under its digest (`sha256:<hex>`), durably, counted
    /// against `actor`'s upload quota. The digest is checked against the
    /// bytes. Uploads no queued job refers to are removed after
    /// [`QueueConfig::upload_grace`] ([`Queue::collect_uploads`]).
    pub async fn store_module(
        &self,
        actor: &Actor,
        digest: &str,
        bytes: Vec<u8>,
        now: i64,
    ) -> Result<(), QueueError> {
        if !bytes.starts_with(b"\0asm") {
            return Err(QueueError::Invalid(format!("{digest} is not a Wasm module")));
        }
        self.store_upload(actor, digest, bytes, now).await
    }

    /// Stores an upload (a spooled input file, say) under its digest
    /// (`sha256:<hex>`), durably, counted against `actor`'s upload quota
    /// as modules are. The digest is checked against the bytes.
    pub async fn store_upload(
        &self,
        actor: &Actor,
        digest: &str,
        bytes: Vec<u8>,
        now: i64,
    ) -> Result<(), QueueError> {
        let actual = module_digest(&bytes);
        if actual != digest {
            return Err(QueueError::Invalid(format!(
                "upload digest mismatch: named {digest}, content is {actual}"
            )));
        }
        self.call(Op::StoreModule(actor.clone(), digest.to_string(), bytes), now).await.map(|_| ())
    }

    /// The owner of spooled jobs `ids` has fetched their output
    /// (`andes transfer-data`): each gets `StageOutFinish`, and a completed
    /// one leaves the queue. Only the owner (or an admin) may say so.
    pub async fn output_fetched(
        &self,
        actor: &Actor,
        ids: Vec<JobId>,
        now: i64,
    ) -> Result<ChangeReport, QueueError> {
        match self.call(Op::Fetched(actor.clone(), ids), now).await? {
            Reply::Report(r) => Ok(r),
            _ => unreachable!("fetched replies with a report"),
        }
    }

    /// Removes the uploads no job in the queue refers to that are older than
    /// [`QueueConfig::upload_grace`]; returns how many.
    pub async fn collect_uploads(&self, now: i64) -> Result<u64, QueueError> {
        match self.call(Op::CollectUploads, now).await? {
            Reply::Removed(gone) => {
                // Their rows are gone (committed): their files follow.
                for d in &gone {
                    if let Some(name) = upload_name(d) {
                        let _ = std::fs::remove_file(self.uploads.join(name));
                    }
                }
                Ok(gone.len() as u64)
            }
            _ => unreachable!("collecting uploads replies with what it removed"),
        }
    }

    /// The most bytes `owner` may upload now: what their spool quota has
    /// left, and what the spool's file system has free beyond its reserve.
    pub fn upload_room(&self, owner: &str) -> u64 {
        self.room_of(owner).0
    }

    /// [`Queue::upload_room`], and how much of it `owner`'s released
    /// uploads still take (kept for a next submit until the room is
    /// wanted: [`Queue::charge_spool`] and an upload reclaim them).
    fn room_of(&self, owner: &str) -> (u64, u64) {
        // The sum in SQL; only the released rows (few) come out, to be
        // checked against the queued jobs.
        let (uploaded, released_rows): (i64, Vec<(String, i64)>) = {
            let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
            let uploaded = conn
                .prepare_cached("SELECT COALESCE(SUM(size), 0) FROM upload_refs WHERE owner = ?1")
                .and_then(|mut st| st.query_row([owner], |r| r.get(0)))
                .unwrap_or(0);
            let released = conn
                .prepare_cached(
                    "SELECT digest, size FROM upload_refs
                     WHERE owner = ?1 AND released IS NOT NULL",
                )
                .and_then(|mut st| st.query_map([owner], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
                .unwrap_or_default();
            (uploaded, released)
        };
        let uploaded = uploaded.max(0) as u64;
        let released: u64 = {
            let state = self.read();
            released_rows
                .iter()
                .filter(|(digest, _)| !state.names_upload(owner, digest))
                .map(|(_, size)| (*size).max(0) as u64)
                .sum()
        };
        let kept = self.ledger.usage(owner, || self.read().jobs_of(owner));
        let quota_left = self.upload_quota.saturating_sub(uploaded.saturating_sub(released) + kept);
        (quota_left.min(self.disk_room()), released)
    }

    /// What the spool's file system may still take: its free space beyond
    /// the reserve (unbounded when it cannot be measured).
    pub fn disk_room(&self) -> u64 {
        match crate::room::free_bytes(&self.uploads) {
            Some(free) => free.saturating_sub(self.reserve_bytes),
            None => u64::MAX,
        }
    }

    /// Counts `bytes` more kept in the spool for `owner` (a spooled job's
    /// outputs, a checkpoint), or refuses them: past the owner's spool quota,
    /// or past what the file system may take beyond the reserve.
    pub fn charge_spool(&self, owner: &str, bytes: u64) -> Result<(), QueueError> {
        let (room, released) = self.room_of(owner);
        if bytes > room.saturating_sub(released) && bytes <= room {
            // Room the owner's released uploads hold: they go, in the
            // writer's next commit.
            let (reply, _) = oneshot::channel();
            let op = Op::ReclaimUploads(owner.to_string(), bytes);
            let _ = self.tx.try_send(Request { op, now: 0, reply });
        }
        if bytes > room {
            return Err(QueueError::Forbidden(format!(
                "keeping {bytes} more bytes in the spool for {owner} would pass their spool \
                 quota (SPOOL_QUOTA_PER_OWNER, {} bytes) or the spool's free space beyond its \
                 reserve (SPOOL_RESERVE, {} bytes); {room} bytes may still be kept",
                self.upload_quota, self.reserve_bytes
            )));
        }
        self.ledger.add(owner, bytes);
        Ok(())
    }

    /// Files were removed from the spool (outputs of jobs that left): what
    /// each owner keeps is weighed again when next asked; the reserve is made
    /// again if it was given back and there is room.
    pub fn spool_changed(&self) {
        self.ledger.forget();
        if let Some(r) = &self.reserve {
            r.restore();
        }
    }

    /// The directory uploads are streamed into ([`Queue::store_file`]).
    pub fn uploads(&self) -> &Path {
        &self.uploads
    }

    /// Stores an upload whose bytes were streamed to `staged` (a file in
    /// [`Queue::uploads`]) and checked to be `digest` (`sha256:<hex>`), `size`
    /// bytes, counted against `actor`'s quota: the file is synced, moved to its
    /// name, and then the upload is committed. Refused, it is removed.
    pub async fn store_file(
        &self,
        actor: &Actor,
        digest: &str,
        staged: &Path,
        size: u64,
        now: i64,
    ) -> Result<(), QueueError> {
        let name = upload_name(digest)
            .ok_or_else(|| QueueError::Invalid(format!("{digest:?} is not sha256:<hex>")))?;
        let target = self.uploads.join(name);
        let placed = std::fs::File::open(staged)
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::rename(staged, &target))
            .and_then(|()| std::fs::File::open(self.uploads.as_path())?.sync_all());
        if let Err(e) = placed {
            let _ = std::fs::remove_file(staged);
            return Err(QueueError::Storage(format!("{}: {e}", target.display())));
        }
        let r = self.call(Op::StoreFile(actor.clone(), digest.to_string(), size), now).await;
        if r.is_err() && !self.has_module(digest).unwrap_or(true) {
            let _ = std::fs::remove_file(&target);
        }
        r.map(|_| ())
    }

    /// Sends the upload `digest` as a streamed body to `path` of `client`'s
    /// daemon (from its file; an upload kept in the database, from memory).
    /// Err with the reason when it is not stored or the daemon refuses it.
    pub async fn send_upload(
        &self,
        client: &andes_protocol::Client,
        path: &str,
        digest: &str,
    ) -> Result<(), String> {
        let r = match self.upload_file(digest).and_then(|p| std::fs::File::open(p).ok()) {
            Some(file) => client.upload(http::Method::PUT, path, file, &[]).await,
            None => {
                let bytes = self
                    .module(digest)
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("{digest} is not stored here"))?;
                client.upload_bytes(http::Method::PUT, path, bytes.into(), &[]).await
            }
        }
        .map_err(|e| e.to_string())?;
        if r.status.is_success() {
            Ok(())
        } else {
            Err(format!("refused: {}", r.error_reason().unwrap_or_else(|| r.status.to_string())))
        }
    }

    /// The upload `digest` as job `job` (its whole ad) may read it: only one
    /// its uploader ([`uploader_of`]) made.
    pub fn open_upload_of(&self, job: &ClassAd, digest: &str) -> Option<std::fs::File> {
        match self.uploaded_by(&uploader_of(job), digest) {
            Ok(true) => self.open_upload(digest),
            _ => None,
        }
    }

    /// The upload `digest`, open for reading: its file, or for one kept in the
    /// database, an anonymous temporary file holding its bytes.
    pub fn open_upload(&self, digest: &str) -> Option<std::fs::File> {
        if let Some(f) = self.upload_file(digest).and_then(|p| std::fs::File::open(p).ok()) {
            return Some(f);
        }
        let bytes = self.module(digest).ok().flatten()?;
        let mut f = tempfile::tempfile().ok()?;
        std::io::Write::write_all(&mut f, &bytes).ok()?;
        std::io::Seek::rewind(&mut f).ok()?;
        Some(f)
    }

    /// Where the upload `digest` is as a file, if it is stored as one (uploads
    /// from before uploads were files are in the database: see [`Queue::module`]).
    pub fn upload_file(&self, digest: &str) -> Option<PathBuf> {
        let p = self.uploads.join(upload_name(digest)?);
        p.is_file().then_some(p)
    }

    /// True when `owner` uploaded `digest` (and it is still kept for them):
    /// the only uploads a job of theirs may name. Another owner's upload of
    /// the same bytes does not count: nothing here tells one user whether
    /// another stored a file.
    pub fn uploaded_by(&self, owner: &str, digest: &str) -> Result<bool, QueueError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        Ok(conn
            .query_row(
                "SELECT 1 FROM upload_refs WHERE owner = ?1 AND digest = ?2",
                [owner, digest],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// True when the module with this digest is stored, for anyone.
    pub fn has_module(&self, digest: &str) -> Result<bool, QueueError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        Ok(conn
            .query_row("SELECT 1 FROM modules WHERE digest = ?1", [digest], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// The module (or other upload) with this digest, in memory.
    pub fn module(&self, digest: &str) -> Result<Option<Vec<u8>>, QueueError> {
        let data: Option<Vec<u8>> = {
            let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
            conn.query_row("SELECT data FROM modules WHERE digest = ?1", [digest], |r| r.get(0))
                .optional()?
        };
        match data {
            Some(d) if d.is_empty() => match self.upload_file(digest) {
                Some(p) => std::fs::read(&p)
                    .map(Some)
                    .map_err(|e| QueueError::Storage(format!("{}: {e}", p.display()))),
                // Stored in the database before uploads were files: empty.
                None => Ok(Some(Vec::new())),
            },
            other => Ok(other),
        }
    }

    /// Jobs that left the queue, newest first: those matching `constraint`, at most
    /// `limit`, as `viewer` may see them ([`attrs::visible`]).
    pub fn history(
        &self,
        viewer: &Actor,
        constraint: Option<&str>,
        owners: &[String],
        limit: Option<usize>,
    ) -> Result<Vec<ClassAd>, QueueError> {
        let constraint = constraint.map(parse_constraint).transpose()?;
        let mut ev = Evaluator::new();
        ev.set_step_pool(Some(REQUEST_STEPS));
        let mut out = Vec::new();
        let mut before = i64::MAX;
        loop {
            // A few hundred rows per hold of the reader, which submits share:
            // the constraint is evaluated with it released.
            let rows: Vec<(i64, String, String)> = {
                let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
                let mut stmt = conn.prepare_cached(
                    "SELECT seq, owner, ad FROM history WHERE seq < ?1 ORDER BY seq DESC LIMIT ?2",
                )?;
                let rows = stmt.query_map(rusqlite::params![before, READ_CHUNK as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?;
                rows.collect::<Result<_, _>>()?
            };
            if rows.is_empty() {
                return Ok(out);
            }
            for (seq, owner, text) in rows {
                before = seq;
                if limit.is_some_and(|l| out.len() >= l) {
                    return Ok(out);
                }
                if !owners.is_empty() && !owners.contains(&owner) {
                    continue;
                }
                let reader = if viewer.admin || viewer.name == owner {
                    Reader::Owner
                } else {
                    Reader::Other
                };
                let ad = attrs::visible(parse_stored(&text, "history ad")?, reader);
                if let Some(c) = &constraint {
                    let v = ev.eval(c, Some(&ad), None);
                    if ev.exhausted() {
                        return Err(too_costly("constraint"));
                    }
                    if !is_true(&v) {
                        continue;
                    }
                }
                out.push(ad);
            }
        }
    }
}
