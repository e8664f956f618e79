//! The queue in memory: clusters and procs, the indexes over them, and a
//! job's view (its cluster's ad overlaid with its own).

use super::error::*;
use crate::attrs::ROUTED_TO;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use classad::{AttrName, ClassAd, Expr, NameRef, Value};

use crate::job::{JobId, JobStatus};
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, Totals, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// A cluster: what its jobs share.
pub struct Cluster {
    /// The cluster ad (ClusterId, Owner, QDate, Cmd, ... everything shared).
    pub ad: Arc<ClassAd>,
    /// Owner, from the verified identity.
    pub owner: Arc<str>,
    /// JobBatchName, if any.
    pub batch: Option<Arc<str>>,
    /// Procs ever submitted.
    pub submitted: u32,
    /// Procs that completed.
    pub completed: u32,
}

/// A job: what is its own.
#[derive(Clone)]
pub struct Proc {
    /// JobStatus.
    pub status: JobStatus,
    /// EnteredCurrentStatus.
    pub entered: i64,
    /// Attributes of this job that override or add to the cluster ad.
    pub ad: ClassAd,
}

/// The in-memory queue, as readers see it.
pub struct QueueState {
    pub(crate) clusters: BTreeMap<u32, Cluster>,
    pub(crate) jobs: BTreeMap<JobId, Proc>,
    pub(crate) next_cluster: u32,
    /// Cluster ids handed out by [`Queue::reserve_cluster`] and not yet used, with
    /// the owner each was reserved for.
    pub(crate) reserved: BTreeMap<u32, Arc<str>>,
    /// Cluster ids below this may have been handed out (it is on disk), so
    /// after a restart none of them is handed out again.
    pub(crate) cluster_mark: u32,
    pub(crate) schedd_name: Arc<str>,
    /// Jobs in the queue per owner (MAX_JOBS_PER_OWNER).
    pub(crate) owner_jobs: HashMap<Arc<str>, u64>,
    /// How many queued jobs name each upload, by whose it is
    /// ([`uploader_of`]): an upload goes once its last job has left.
    pub(crate) upload_uses: HashMap<(String, String), u32>,
}

/// How far ahead of the ids handed out the on-disk high-water mark is set
/// (one write per this many reservations).
pub(crate) const CLUSTER_MARK_STEP: u32 = 100;

/// Seconds a submit's token is kept, for a client retrying after a lost
/// answer to get the first answer again.
pub(crate) const SUBMIT_TOKEN_KEEP: i64 = 86_400;

/// Reservations kept at most; the oldest is dropped past this.
pub(crate) const MAX_RESERVED: usize = 100_000;

/// A job as readers see it.
pub struct JobView<'a> {
    /// Its id.
    pub id: JobId,
    /// Its cluster.
    pub cluster: &'a Cluster,
    /// Its own part.
    pub proc: &'a Proc,
    pub(crate) schedd: &'a str,
}

/// The attributes a job's full ad holds beyond its cluster's and its own
/// ([`JobView::ad`] sets them).
pub(crate) static SYNTHESIZED: classad::Names<4> =
    classad::Names::new(["ProcId", "JobStatus", "EnteredCurrentStatus", "GlobalJobId"]);

/// A job's full ad: its cluster's ad overlaid with its own part, and the
/// attributes the queue keeps apart ([`SYNTHESIZED`]).
pub(crate) fn full_ad(cluster: &ClassAd, proc: &Proc, id: JobId, schedd: &str) -> ClassAd {
    let mut ad = cluster.clone();
    ad.update(&proc.ad);
    ad.update(&synthesized(cluster, proc, id, schedd));
    ad
}

/// The text of the job's [`full_ad`], printed from its parts without
/// making it.
pub(crate) fn full_ad_text(cluster: &ClassAd, proc: &Proc, id: JobId, schedd: &str) -> String {
    let own = synthesized(cluster, proc, id, schedd);
    let mut text = String::with_capacity(32 * (cluster.len() + proc.ad.len() + own.len()));
    classad::unparse::ad_overlaid_to(&mut text, &[cluster, &proc.ad, &own]);
    text
}

/// The attributes the queue keeps apart ([`SYNTHESIZED`]), as an ad.
fn synthesized(cluster: &ClassAd, proc: &Proc, id: JobId, schedd: &str) -> ClassAd {
    let [proc_id, status, entered, global] = SYNTHESIZED.get();
    let mut ad = ClassAd::with_capacity(4);
    ad.insert_value(proc_id, id.proc as i64);
    ad.insert_value(status, proc.status.code());
    ad.insert_value(entered, proc.entered);
    let qdate = match cluster.eval_attr(classad::name!("QDate")) {
        Value::Int(q) => q,
        _ => 0,
    };
    ad.insert_value(global, format!("{schedd}#{id}#{qdate}"));
    ad
}

/// Whether the job's full ad ([`full_ad`]) binds `name`, asked of its parts
/// without making it.
pub(crate) fn binds<N: NameRef + ?Sized>(cluster: &ClassAd, proc: &Proc, name: &N) -> bool {
    let name = name.attr_name();
    proc.ad.lookup(&name).is_some()
        || cluster.lookup(&name).is_some()
        || SYNTHESIZED.get().contains(&name)
}

impl JobView<'_> {
    /// The job's full ad.
    pub fn ad(&self) -> ClassAd {
        full_ad(&self.cluster.ad, self.proc, self.id, self.schedd)
    }

    /// The text of the job's full ad (as `self.ad().to_string()`, without
    /// making the ad).
    pub fn ad_text(&self) -> String {
        full_ad_text(&self.cluster.ad, self.proc, self.id, self.schedd)
    }

    /// [`crate::attrs::str_attr`] of the job's full ad: read from its parts
    /// when `name` is bound to a string literal there (as `CmdDigest` is),
    /// else evaluated in the full ad.
    pub fn str_attr<N: NameRef + ?Sized>(&self, name: &N) -> Option<String> {
        let name = name.attr_name();
        let synthesized = SYNTHESIZED.get().contains(&name);
        match self.proc.ad.lookup(&name).or_else(|| self.cluster.ad.lookup(&name)) {
            Some(Expr::Lit(Value::Str(s))) if !synthesized => {
                (!s.is_empty()).then(|| s.to_string())
            }
            _ => crate::attrs::str_attr(&self.ad(), &*name),
        }
    }

    /// Whether the job's full ad binds `name` (without making it).
    pub fn has<N: NameRef + ?Sized>(&self, name: &N) -> bool {
        binds(&self.cluster.ad, self.proc, name)
    }

    /// True when the job is not for this pool's negotiator: a routed
    /// original (it mirrors its copy) or a grid-universe job (a routed copy,
    /// run elsewhere).
    pub fn routed_away(&self) -> bool {
        self.proc.ad.contains(classad::name!(ROUTED_TO))
            || matches!(
                {
                    let universe = classad::name!("JobUniverse");
                    self.proc.ad.get(universe).or_else(|| self.cluster.ad.get(universe))
                },
                Some(Expr::Lit(Value::Int(9)))
            )
    }

    /// The job's `Owner`.
    pub fn owner(&self) -> &str {
        &self.cluster.owner
    }
}

impl QueueState {
    /// The number of jobs in the queue.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// True when the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The schedd's name (first part of GlobalJobId).
    pub fn schedd_name(&self) -> &str {
        &self.schedd_name
    }

    /// One job.
    pub fn job(&self, id: JobId) -> Option<JobView<'_>> {
        let proc = self.jobs.get(&id)?;
        let cluster = self.clusters.get(&id.cluster)?;
        Some(JobView { id, cluster, proc, schedd: &self.schedd_name })
    }

    /// Every job, in id order.
    pub fn jobs(&self) -> impl Iterator<Item = JobView<'_>> {
        self.jobs.iter().filter_map(|(id, proc)| {
            let cluster = self.clusters.get(&id.cluster)?;
            Some(JobView { id: *id, cluster, proc, schedd: &self.schedd_name })
        })
    }

    /// The jobs of one cluster.
    pub fn cluster_jobs(&self, cluster: u32) -> impl Iterator<Item = JobView<'_>> {
        let c = self.clusters.get(&cluster);
        self.jobs.range(JobId::new(cluster, 0)..=JobId::new(cluster, u32::MAX)).filter_map(
            move |(id, proc)| {
                Some(JobView { id: *id, cluster: c?, proc, schedd: &self.schedd_name })
            },
        )
    }

    /// A cluster.
    pub fn cluster(&self, id: u32) -> Option<&Cluster> {
        self.clusters.get(&id)
    }

    /// The jobs of `owner` in the queue.
    pub fn jobs_of(&self, owner: &str) -> Vec<JobId> {
        let clusters: std::collections::HashSet<u32> =
            self.clusters.iter().filter(|(_, c)| &*c.owner == owner).map(|(id, _)| *id).collect();
        self.jobs.keys().filter(|id| clusters.contains(&id.cluster)).copied().collect()
    }

    /// The uploads (modules, spooled inputs) the queued jobs refer to, with
    /// whose they are ([`uploader_of`]): every `CmdDigest`, and each digest
    /// named in `SpooledInput`.
    pub fn referenced_uploads(&self) -> std::collections::HashSet<(String, String)> {
        self.upload_uses.keys().cloned().collect()
    }

    /// Whether a queued job of `owner` names the upload `digest`: a released
    /// upload one names again holds its room and is not reclaimed.
    pub(crate) fn names_upload(&self, owner: &str, digest: &str) -> bool {
        self.upload_uses.contains_key(&(owner.to_string(), digest.to_string()))
    }

    /// How many jobs of the queue are in each state (one pass over the
    /// jobs, reading their status only).
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for p in self.jobs.values() {
            t.jobs += 1;
            match p.status {
                JobStatus::Idle => t.idle += 1,
                JobStatus::Running | JobStatus::TransferringOutput => t.running += 1,
                JobStatus::Held => t.held += 1,
                JobStatus::Suspended => t.suspended += 1,
                JobStatus::Removed => t.removed += 1,
                JobStatus::Completed => t.completed += 1,
            }
        }
        t
    }

    /// condor_q's summary: one row per (owner, batch), in the order first seen.
    ///
    /// Condor_q, the dashboard and scripts ask for it often, and it reads
    /// every job: the names it looks for are made once (making a name from
    /// text hashes it and takes the interner's lock), not per job.
    pub fn summary(&self, owners: &[String]) -> Vec<SummaryRow> {
        static NAMES: std::sync::LazyLock<SummaryNames> =
            std::sync::LazyLock::new(|| SummaryNames {
                deferral_time: AttrName::new("DeferralTime"),
                deferred_until: AttrName::new("JobDeferredUntil"),
                cron: andes_cron::Field::ALL.map(|f| AttrName::new(f.attribute())),
            });
        let names = &*NAMES;
        let is_cron = |ad: &ClassAd| names.cron.iter().any(|n| ad.lookup(n).is_some());
        let mut rows: Vec<SummaryRow> = Vec::new();
        let mut index: HashMap<(Arc<str>, String), usize> = HashMap::new();
        let mut last_cluster = None;
        let mut row_i = 0;
        let mut cluster_cron = false;
        for (id, proc) in &self.jobs {
            if last_cluster != Some(id.cluster) {
                last_cluster = Some(id.cluster);
                let Some(c) = self.clusters.get(&id.cluster) else { continue };
                cluster_cron = is_cron(&c.ad);
                if !owners.is_empty() && !owners.iter().any(|o| **o == *c.owner) {
                    row_i = usize::MAX;
                    continue;
                }
                let batch = match &c.batch {
                    Some(b) => b.to_string(),
                    None => format!("ID: {}", id.cluster),
                };
                let key = (c.owner.clone(), batch);
                row_i = match index.get(&key) {
                    Some(&i) => i,
                    None => {
                        rows.push(SummaryRow {
                            owner: key.0.to_string(),
                            batch: key.1.clone(),
                            submitted: 0,
                            ..SummaryRow::default()
                        });
                        index.insert(key, rows.len() - 1);
                        rows.len() - 1
                    }
                };
                let r = &mut rows[row_i];
                r.done += c.completed as u64;
                r.submitted = r.submitted.max(self.qdate(c));
                r.ids.push((id.cluster, u32::MAX, 0));
            }
            if row_i == usize::MAX {
                continue;
            }
            let r = &mut rows[row_i];
            match proc.status {
                JobStatus::Idle => {
                    r.idle += 1;
                    // A cron job's next run (its DeferralTime is its own).
                    if let Some(Expr::Lit(Value::Int(t))) = proc.ad.lookup(&names.deferral_time)
                        && (cluster_cron || is_cron(&proc.ad))
                    {
                        r.next_run = Some(r.next_run.map_or(*t, |n| n.min(*t)));
                    }
                }
                JobStatus::Running | JobStatus::TransferringOutput => {
                    r.run += 1;
                    if proc.ad.lookup(&names.deferred_until).is_some() {
                        r.deferred += 1;
                    }
                }
                JobStatus::Held => r.held += 1,
                JobStatus::Suspended => r.suspended += 1,
                JobStatus::Removed | JobStatus::Completed => {}
            }
            let span = r.ids.last_mut().expect("pushed above");
            span.1 = span.1.min(id.proc);
            span.2 = span.2.max(id.proc);
        }
        rows
    }

    pub(crate) fn qdate(&self, c: &Cluster) -> i64 {
        match c.ad.eval_attr(classad::name!("QDate")) {
            Value::Int(q) => q,
            _ => 0,
        }
    }
}

/// The names [`QueueState::summary`] looks for, made once.
struct SummaryNames {
    deferral_time: AttrName,
    deferred_until: AttrName,
    cron: [AttrName; 5],
}

/// A cluster's Owner (always a literal: the schedd sets it) and
/// JobBatchName, read as literals: the queue evaluates nothing of a job's
/// while it loads (a batch name written as an expression has none).
pub(crate) fn owner_and_batch(ad: &ClassAd) -> (Arc<str>, Option<Arc<str>>) {
    let literal = |name: &str| match ad.get(name) {
        Some(Expr::Lit(Value::Str(s))) => Some(s.clone()),
        _ => None,
    };
    let owner = literal("Owner").unwrap_or_else(|| Arc::from(""));
    let batch = literal("JobBatchName").filter(|s| !s.is_empty());
    (owner, batch)
}

/// Parses a constraint, with an error that names it.
pub fn parse_constraint(text: &str) -> Result<Expr, QueueError> {
    if text.len() > MAX_CONSTRAINT {
        return Err(QueueError::Invalid(format!(
            "a constraint of {} bytes is longer than the {MAX_CONSTRAINT} allowed",
            text.len()
        )));
    }
    classad::parse_expr(text).map_err(|e| QueueError::Invalid(format!("constraint `{text}`: {e}")))
}

/// The longest constraint a request may carry: far beyond any real one.
pub const MAX_CONSTRAINT: usize = 64 << 10;

/// True when a constraint's value selects: true, or a non-zero number.
pub fn is_true(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Int(i) => *i != 0,
        Value::Real(r) => *r != 0.0,
        _ => false,
    }
}

/// Activations of a job that may fail in a row before it is held.
pub const MAX_ACTIVATION_FAILURES: i64 = 5;
