//! The pool side's routes: the negotiator's demand and matches, and
//! `condor_tail`.

use crate::attrs::str_attr;

use andes_protocol::pool::{DemandReply, DemandRequest, MatchesReply, MatchesRequest, TailRequest};
use andes_protocol::{ApiError, ClientErrorKind, Clock, Role, SignedJson};
use axum::extract::State;
use http::Method;

use super::state::{ClaimCount, ScheddPool, lock};
use crate::job::{JobId, JobStatus};
use crate::queue::{CLAIM_ID_ATTR, PoolOp};

pub(crate) type ApiResult<T> = Result<axum::Json<T>, ApiError>;

/// `POST /v1/tail`: the job's owner (or an admin) reads its output or error
/// stream as it runs; the host is asked with this schedd's key, for the
/// job's claim.
pub(crate) async fn tail(
    State(p): State<ScheddPool>,
    caller: andes_protocol::Caller,
    SignedJson(req): SignedJson<crate::api::TailJobRequest>,
) -> ApiResult<andes_protocol::pool::TailReply> {
    let (ad, status) = p
        .inner
        .queue
        .read()
        .job(req.job)
        .map(|v| (v.ad(), v.proc.status))
        .ok_or_else(|| ApiError::not_found(format!("no job {} in the queue", req.job)))?;
    let owner = str_attr(&ad, classad::name!("Owner")).unwrap_or_default();
    if caller.role != Role::Admin && owner != caller.identity {
        return Err(ApiError::forbidden(format!(
            "job {} is {owner}'s, not {}'s",
            req.job, caller.identity
        )));
    }
    let running = matches!(status, JobStatus::Running | JobStatus::Suspended);
    let (true, Some(claim_id), Some(addr)) =
        (running, str_attr(&ad, CLAIM_ID_ATTR), str_attr(&ad, classad::name!("StartdAddr")))
    else {
        return Err(ApiError::new(
            http::StatusCode::CONFLICT,
            format!("job {} is not running (status {})", req.job, status.letter()),
        ));
    };
    let host = TailRequest { claim_id, stderr: req.stderr, offset: req.offset, max: req.max };
    let link = p.inner.link(&addr);
    link.short
        .call::<_, andes_protocol::pool::TailReply>(Method::POST, "/v1/host/tail", Some(&host))
        .await
        .map(axum::Json)
        .map_err(|e| match &e.kind {
            ClientErrorKind::Status { status, reason } => {
                ApiError::new(*status, format!("job {}: {reason}", req.job))
            }
            _ => ApiError::new(
                http::StatusCode::BAD_GATEWAY,
                format!("job {}: its host {addr}: {e}", req.job),
            ),
        })
}

pub(crate) async fn demand(
    State(p): State<ScheddPool>,
    SignedJson(req): SignedJson<DemandRequest>,
) -> ApiResult<DemandReply> {
    Ok(axum::Json(p.inner.demand(&req.significant)))
}

pub(crate) async fn matches(
    State(p): State<ScheddPool>,
    SignedJson(req): SignedJson<MatchesRequest>,
) -> ApiResult<MatchesReply> {
    let inner = &p.inner;
    let mut taken = 0;
    let mut claimed = Vec::new();
    for grant in req.matches {
        let slot = classad::parse_ad(&grant.slot_ad).ok();
        let Some(job) = inner.next_job(grant.autocluster, slot.as_ref()) else { continue };
        taken += 1;
        claimed.push(grant.claim_id.clone());
        let counted = ClaimCount::new(inner, grant.autocluster);
        tokio::spawn(inner.clone().run_claim(grant, job, counted));
    }
    if !req.rejections.is_empty() {
        let now = inner.clock.now();
        // A rejection is recorded on the autocluster's first job (what
        // `andes q -better-analyze` reads); a quarantine holds them all.
        let mut ops: Vec<(Vec<JobId>, PoolOp)> = Vec::new();
        {
            let state = lock(&inner.state);
            for r in &req.rejections {
                let Some(ids) = state.ac_jobs.get(&r.autocluster) else { continue };
                if r.quarantined {
                    ops.push((
                        ids.iter().copied().collect(),
                        PoolOp::Quarantined {
                            what: "Requirements, in the central manager".into(),
                            reason: r.reason.clone(),
                        },
                    ));
                } else if let Some(id) = ids.front() {
                    ops.push((vec![*id], PoolOp::Rejected(r.reason.clone())));
                }
            }
        }
        for (ids, op) in ops {
            let _ = inner.queue.pool(ids, op, now).await;
        }
    }
    Ok(axum::Json(MatchesReply { taken, claimed }))
}
