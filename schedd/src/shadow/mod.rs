//! The schedd's side of the pool: its idle demand for the negotiator, the
//! claims it is granted, and a shadow per running job.
//!
//! * **Demand.** `POST /v1/negotiate/demand` groups the idle jobs by the
//!   attributes the negotiator names significant (autoclusters) and answers
//!   one representative ad and a count per group.
//! * **Claims.** `POST /v1/negotiate/matches` hands over matches; for each,
//!   a task claims the slot with the claim id, runs a job of the matched
//!   group on it, and then further jobs of the same group (claim reuse) until
//!   the group runs dry or CLAIM_WORKLIFE is over; then it releases the claim.
//! * **The shadow** (one per running job, inside the claim's task) activates
//!   the claim with the job ad (`$$()` expanded against the slot ad), the
//!   module by digest (sent only if the host lacks it) and the input files;
//!   then follows the starter's reports (a long poll, which also renews the
//!   job's lease on the host), forwards qedit, hold and removal, brings the
//!   output files back to the job's Iwd and tells the queue how the job ended.
//! * **Queue updates** of a claim go through one ordered lane, so a job's
//!   start, updates and end are applied in order without the claim waiting
//!   for each commit.
//! * **Reconnect.** A restarted schedd finds its running jobs (ClaimId and
//!   StartdAddr are kept in the queue) and reconnects their shadows; the jobs
//!   are not restarted and NumJobReconnects grows. A job whose host does not
//!   answer within its JobLeaseDuration goes back to idle.
//! * **Advertising.** The schedd's Scheduler ad and a Submitter ad per owner
//!   go to the collector every SCHEDD_INTERVAL and at once when the queue
//!   changes, which lets the negotiator start a cycle immediately.
//!
//! Its files, one concept each: [`state`] (the shared state), [`claim`] (a
//! claim's loop), [`run`] (a job's shadow), [`decide`] (the shadow's
//! decisions, pure), [`reports`], [`lane`], [`link`], [`files`],
//! [`advertise`], [`deferral`], [`dollar`], [`routes`].

use crate::attrs::str_attr;
pub mod advertise;
pub mod claim;
pub mod decide;
pub mod deferral;
pub mod dollar;
pub mod files;
pub mod lane;
pub mod link;
pub mod reports;
pub mod routes;
pub mod run;
pub mod state;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use andes_protocol::{Auth, Keypair, Role};
use axum::Router;
use axum::routing::post;
use classad::ClassAd;
use tokio::sync::Notify;

use crate::job::{JobId, JobStatus};
use crate::queue::{ACTIVATION_PENDING, CLAIM_ID_ATTR};
use crate::schedd::Schedd;
use lane::*;
use link::*;
use reports::*;
use routes::*;
use state::*;

/// The sandbox names of the job's streams: one contract, in `andes-protocol`.
pub use andes_protocol::pool::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};
pub use dollar::expand_dollar_dollar;
pub use state::{
    ADVERTISE_GAP, ADVERTISE_HEARTBEAT, HOLD_TRANSFER_INPUT, HOLD_TRANSFER_OUTPUT,
    POLICY_REPORT_SECS, PoolConfig, ScheddPool,
};

impl ScheddPool {
    /// Starts the pool side of `schedd`: follows its queue's events,
    /// advertises to the collector, and reconnects the shadows of jobs that
    /// were running when the schedd stopped. Must run inside a tokio runtime.
    pub fn start(schedd: &Schedd, cfg: PoolConfig, keypair: Arc<Keypair>) -> ScheddPool {
        let inner = Arc::new(PoolState {
            queue: schedd.queue.clone(),
            clock: schedd.clock(),
            significant: schedd.significant.clone(),
            cfg,
            keypair,
            clients: Mutex::new(HashMap::new()),
            state: Mutex::new(Book::default()),
            advertise: Notify::new(),
            urgent: Notify::new(),
            last_idle: std::sync::atomic::AtomicI64::new(0),
            wakes: Mutex::new(BTreeSet::new()),
            rewake: Notify::new(),
            incarnation: new_incarnation(),
            held: Mutex::new(HashMap::new()),
        });
        let pool = ScheddPool { inner };
        let mut events = schedd.take_events();
        {
            let inner = pool.inner.clone();
            tokio::spawn(async move {
                while let Some(batch) = events.recv().await {
                    inner.on_events(&batch);
                }
            });
        }
        if pool.inner.cfg.collector.is_some() {
            let inner = pool.inner.clone();
            tokio::spawn(async move { inner.advertise_loop().await });
        }
        {
            // Each idle job's deferral time is read once the schedd serves
            // (and its cron jobs have their next runs): see
            // `Schedd::defer_startup`.
            let inner = pool.inner.clone();
            let schedd = schedd.clone();
            tokio::spawn(async move {
                schedd.started().await;
                let ids: Vec<JobId> = inner
                    .queue
                    .read()
                    .jobs()
                    .filter(|v| v.proc.status == JobStatus::Idle)
                    .map(|v| v.id)
                    .collect();
                for id in ids {
                    inner.watch_deferral(id, None);
                }
                inner.deferral_loop().await
            });
        }
        pool.reconnect_all();
        {
            let inner = pool.inner.clone();
            tokio::spawn(async move { inner.alive_loop().await });
        }
        pool
    }

    /// The negotiator's routes, and users' `POST /v1/tail` (condor_tail: a
    /// running job's output as it is written, fetched from its host).
    pub fn router(&self, auth: &Auth) -> Router {
        self.routes(auth).router
    }

    /// [`ScheddPool::router`] with who may call each route.
    pub fn routes(&self, auth: &Auth) -> andes_protocol::routes::Served {
        use http::Method as M;
        let negotiator = &[Role::Negotiator, Role::Admin];
        andes_protocol::routes::Api::new()
            .route(M::POST, "/v1/negotiate/demand", negotiator, post(demand))
            .route(M::POST, "/v1/negotiate/matches", negotiator, post(matches))
            .route(M::POST, "/v1/tail", &[Role::User, Role::Admin], post(tail))
            .finish(auth, self.clone())
    }

    /// Running shadows (for status and tests).
    pub fn shadows(&self) -> usize {
        lock(&self.inner.state).shadows.len()
    }

    pub(crate) fn reconnect_all(&self) {
        let running: Vec<(JobId, String, String)> = {
            let st = self.inner.queue.read();
            st.jobs()
                .filter(|v| {
                    v.proc.status.is_active()
                        || v.proc.status == JobStatus::Removed
                        || (v.proc.status == JobStatus::Idle
                            && v.proc.ad.contains(ACTIVATION_PENDING))
                })
                .filter_map(|v| {
                    let ad = v.ad();
                    let claim = str_attr(&ad, CLAIM_ID_ATTR)?;
                    let addr = str_attr(&ad, "StartdAddr")?;
                    Some((v.id, claim, addr))
                })
                .collect()
        };
        // Jobs of one claim (a batch the schedd stopped in the middle of)
        // are followed in turn, and the claim released after the last.
        let mut claims: HashMap<(String, String), Vec<JobId>> = HashMap::new();
        for (id, claim_id, addr) in running {
            claims.entry((claim_id, addr)).or_default().push(id);
        }
        for ((claim_id, addr), mut ids) in claims {
            ids.sort();
            let inner = self.inner.clone();
            lock(&inner.state).busy.extend(ids.iter().copied());
            lock(&inner.held).insert(claim_id.clone(), addr.clone());
            tokio::spawn(async move {
                let lane = Lane::start(inner.clone());
                let link = inner.link(&addr);
                let claim = ClaimCtx { claim_id, slot_ad: ClassAd::new(), addr };
                let mut ends = Ends::default();
                for id in ids {
                    inner.shadow(&link, &claim, id, &lane.tx, Start::Reconnect, &mut ends).await;
                }
                // Released (or its end acknowledged) once all is committed.
                lane.tx.committed().await;
                inner.release(&link, &claim.claim_id).await;
                lock(&inner.held).remove(&claim.claim_id);
                lane.close().await;
            });
        }
    }
}
