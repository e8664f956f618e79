//! The schedd's pool side as one shared state ([`PoolState`]): its
//! configuration, the book of busy jobs, autoclusters, shadows and claims,
//! and the signals a running job's shadow is sent.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use andes_protocol::{Client, Clock, Keypair};
use classad::ClassAd;
use tokio::sync::{Notify, mpsc};

use super::link::Link;
use crate::job::JobId;
use crate::queue::Queue;
use crate::userfs::Accounts;

/// HTCondor's HoldReasonCode 12: transferring the output files failed.
pub const HOLD_TRANSFER_OUTPUT: i64 = crate::job::hold_code::TRANSFER_OUTPUT_ERROR;

/// HTCondor's HoldReasonCode 13: transferring the input files failed.
pub const HOLD_TRANSFER_INPUT: i64 = crate::job::hold_code::TRANSFER_INPUT_ERROR;

/// The least time between two advertisements: a queue that changes with
/// every job still sends its ads (and wakes the negotiator) at most this often.
pub const ADVERTISE_GAP: Duration = Duration::from_millis(200);

/// The most time between two rounds of the schedd's ads, whatever
/// SCHEDD_INTERVAL says: a collector that restarted has them again within it.
pub const ADVERTISE_HEARTBEAT: Duration = Duration::from_secs(10);

/// How the schedd's pool side is set up (from the configuration).
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// SCHEDD_NAME.
    pub name: String,
    /// The schedd's own address (`host:port`), advertised as MyAddress.
    pub address: String,
    /// The collector's URL, if the schedd is in a pool.
    pub collector: Option<String>,
    /// CLAIM_WORKLIFE: seconds a claim takes new jobs; negative: forever.
    pub claim_worklife: i64,
    /// JobLeaseDuration for jobs that do not set it (HTCondor: 2400 s).
    pub job_lease: u64,
    /// SHADOW_QUEUE_UPDATE_INTERVAL (HTCondor: 900 s).
    pub queue_update_interval: Duration,
    /// SHADOW_JOB_CLEANUP_RETRY_DELAY (HTCondor: 30 s).
    pub cleanup_retry_delay: Duration,
    /// SHADOW_MAX_JOB_CLEANUP_RETRIES (HTCondor: 5).
    pub max_cleanup_retries: u32,
    /// SCHEDD_INTERVAL: seconds between advertisements (HTCondor: 300 s).
    pub schedd_interval: Duration,
    /// Milliseconds an activation may wait for a short job to end.
    pub activate_wait_ms: u64,
    /// Where a job's own checkpoint files are kept between runs (the
    /// schedd's spool); none: a job that exits with its CheckpointExitCode
    /// starts over.
    pub spool: Option<PathBuf>,
    /// Whose signed transparent checkpoints are kept (the pool's hosts, as
    /// raw ed25519 keys); none: any signer's (the host that restores a
    /// snapshot checks its signer again).
    pub snapshot_signers: Option<Arc<HashSet<[u8; 32]>>>,
    /// Whose rights the schedd reads and writes each owner's files with.
    pub accounts: Arc<Accounts>,
    /// ALIVE_INTERVAL: how often the schedd tells each host which claims it
    /// still holds (a host releases an unused claim not heard from for a few).
    pub alive_interval: Duration,
}

impl PoolConfig {
    /// HTCondor's defaults for a schedd named `name` at `address`.
    pub fn new(name: &str, address: &str) -> PoolConfig {
        PoolConfig {
            name: name.to_string(),
            address: address.to_string(),
            collector: None,
            claim_worklife: -1,
            job_lease: 2400,
            queue_update_interval: Duration::from_secs(900),
            cleanup_retry_delay: Duration::from_secs(30),
            max_cleanup_retries: 5,
            schedd_interval: Duration::from_secs(300),
            activate_wait_ms: 100,
            spool: None,
            snapshot_signers: None,
            accounts: Arc::new(Accounts::current()),
            alive_interval: Duration::from_secs(10),
        }
    }
}

/// Jobs per activation at most (see `run_claim`): beyond what a batch
/// costs whatever its size (the intent's commit, the round trip, the ends'
/// report and commit), a batch is bounded by time, as many short jobs as
/// fit in 50 ms of the host's (`next_batch`). At 128, trivial jobs (about
/// 100 us each) filled a batch in 13 ms and a personal pool spent a fifth
/// of its time waiting on those commits: 512 leaves the time bound to
/// decide.
pub(crate) const MAX_BATCH: usize = 512;

/// What the claim's shadow is told while its job runs.
#[derive(Debug, Clone)]
pub(crate) enum Signal {
    /// qedit: these attributes changed.
    Edit(ClassAd),
    /// The job was held or removed: stop it.
    Stop,
    /// condor_vacate_job: have the host vacate it (it checkpoints if it can
    /// and comes back idle).
    Vacate(String),
}

#[derive(Default)]
pub(crate) struct Book {
    /// Jobs handed to a claim (matched, running or ending): not idle demand.
    pub(crate) busy: HashSet<JobId>,
    /// Autocluster ids by key.
    pub(crate) ac_ids: HashMap<String, u32>,
    /// Idle jobs of each autocluster, as of the last demand.
    pub(crate) ac_jobs: HashMap<u32, VecDeque<JobId>>,
    /// Running shadows.
    pub(crate) shadows: HashMap<JobId, mpsc::UnboundedSender<Signal>>,
    /// Jobs queued on a claim's host behind others, whose shadows have not
    /// started yet.
    pub(crate) queued: QueuedJobs,
    /// Matches being claimed or claims held, by autocluster: each counted by
    /// its [`ClaimCount`] while it lives.
    pub(crate) claims: HashMap<u32, usize>,
}

impl Book {
    /// Matches being claimed or claims held for `autocluster`.
    pub(crate) fn claims_of(&self, autocluster: u32) -> usize {
        self.claims.get(&autocluster).copied().unwrap_or(0)
    }
}

/// A match taken for claiming, counted in [`Book::claims`] under its
/// autocluster from when it is taken until it is dropped, however its claim
/// ends: released, refused, or its job gone before the claim was made. (A
/// count kept by hand missed the early ends: a refused claim stayed counted
/// for good, and every later claim's share of the queue shrank with it.)
pub(crate) struct ClaimCount {
    pool: Arc<PoolState>,
    autocluster: u32,
}

impl ClaimCount {
    /// Counts a claim of `autocluster` until the value is dropped.
    pub(crate) fn new(pool: &Arc<PoolState>, autocluster: u32) -> ClaimCount {
        *lock(&pool.state).claims.entry(autocluster).or_default() += 1;
        ClaimCount { pool: pool.clone(), autocluster }
    }
}

impl Drop for ClaimCount {
    fn drop(&mut self) {
        let mut st = lock(&self.pool.state);
        if let Some(n) = st.claims.get_mut(&self.autocluster) {
            *n -= 1;
            if *n == 0 {
                st.claims.remove(&self.autocluster);
            }
        }
    }
}

/// Jobs queued on a claim's host behind others, whose shadows have not
/// started yet: the host and claim to withdraw each from if it is held or
/// removed meanwhile, and how many of each autocluster there are (what a
/// claim's share of its autocluster counts, `shadow::claim::batch_size`).
#[derive(Default)]
pub(crate) struct QueuedJobs {
    at: HashMap<JobId, (Link, String, u32)>,
    by_ac: HashMap<u32, usize>,
}

impl QueuedJobs {
    /// Notes `id`, of autocluster `ac`, queued on `claim_id` at `link`.
    pub(crate) fn insert(&mut self, id: JobId, link: Link, claim_id: String, ac: u32) {
        if let Some((_, _, was)) = self.at.insert(id, (link, claim_id, ac)) {
            self.uncount(was);
        }
        *self.by_ac.entry(ac).or_default() += 1;
    }

    /// Takes `id` off the list: where it was queued, if it was.
    pub(crate) fn remove(&mut self, id: &JobId) -> Option<(Link, String)> {
        let (link, claim_id, ac) = self.at.remove(id)?;
        self.uncount(ac);
        Some((link, claim_id))
    }

    /// True when `id` is queued.
    pub(crate) fn contains(&self, id: &JobId) -> bool {
        self.at.contains_key(id)
    }

    /// How many jobs of autocluster `ac` are queued.
    pub(crate) fn of(&self, ac: u32) -> usize {
        self.by_ac.get(&ac).copied().unwrap_or(0)
    }

    fn uncount(&mut self, ac: u32) {
        if let Some(n) = self.by_ac.get_mut(&ac) {
            *n -= 1;
            if *n == 0 {
                self.by_ac.remove(&ac);
            }
        }
    }
}

pub(crate) struct PoolState {
    pub(crate) queue: Queue,
    pub(crate) clock: Arc<dyn Clock>,
    /// The negotiator's significant attributes, shared with the schedd's
    /// queries (`Schedd::significant`).
    pub(crate) significant: Arc<Mutex<Vec<String>>>,
    pub(crate) cfg: PoolConfig,
    pub(crate) keypair: Arc<Keypair>,
    pub(crate) clients: Mutex<HashMap<String, Client>>,
    pub(crate) state: Mutex<Book>,
    pub(crate) advertise: Notify,
    /// Wakes the advertiser before its gap is over: new idle jobs where the
    /// last ad said there were none (an idle pool starts them at once).
    pub(crate) urgent: Notify,
    /// TotalIdleJobs of the last Scheduler ad sent.
    pub(crate) last_idle: std::sync::atomic::AtomicI64,
    /// When deferred idle jobs next need a look: (Unix seconds, job), at the
    /// instant each becomes matchable or its window closes.
    pub(crate) wakes: Mutex<BTreeSet<(i64, JobId)>>,
    /// Wakes the deferral timer when an earlier wake was added.
    pub(crate) rewake: Notify,
    /// This run of the schedd, random: hosts release the unused claims of an
    /// earlier run as soon as they hear of a new one.
    pub(crate) incarnation: String,
    /// The claims this run holds: claim id → host address (for keep-alives).
    pub(crate) held: Mutex<HashMap<String, String>>,
}

/// The schedd's pool side; cheap to clone.
#[derive(Clone)]
pub struct ScheddPool {
    pub(crate) inner: Arc<PoolState>,
}

/// A fresh random incarnation id (128 bits, hex).
pub(crate) fn new_incarnation() -> String {
    let mut b = [0u8; 16];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut b);
    hex::encode(b)
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Seconds between the reports of a job whose periodic policy reads its
/// usage: the policy sees data at most this old (plus one queue write).
pub const POLICY_REPORT_SECS: u64 = 5;

impl PoolState {
    pub(crate) fn link(&self, addr: &str) -> Link {
        let mut c = lock(&self.clients);
        let short = match c.get(addr) {
            Some(cl) => cl.clone(),
            None => {
                let url = format!("http://{addr}");
                match Client::new(&url, self.keypair.clone()) {
                    Ok(cl) => {
                        c.insert(addr.to_string(), cl.clone());
                        cl
                    }
                    Err(e) => {
                        tracing::warn!("host address {addr}: {e}");
                        // An unusable address: every call fails, and the
                        // job goes back to idle.
                        Client::new("http://127.0.0.1:1", self.keypair.clone())
                            .expect("a fixed valid URL")
                    }
                }
            }
        };
        let long = short.clone().with_timeout(Duration::from_secs(3600));
        Link { short, long }
    }
}
