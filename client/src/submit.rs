//! The submit as `andes submit` and the Python `Schedd.submit` make it: reserve a
//! cluster, expand the description for it, send the modules the schedd lacks (and
//! with `spool`, the input files), then queue the jobs in one request that a retry
//! can never queue twice.

use andes_job::api::factor;
use andes_job::api::{NewClusterReply, SubmitReply, SubmitRequest};
use andes_protocol::Client;
use andes_submit::Submission;
use anyhow::{Result, anyhow};

use crate::session::status_error;

/// Reserves the next cluster id at the schedd (`POST /v1/cluster`).
pub async fn reserve_cluster(c: &Client) -> Result<u32> {
    let NewClusterReply { cluster } =
        c.call(http::Method::POST, "/v1/cluster", None::<&()>).await?;
    Ok(cluster)
}

/// Queues `out` (expanded for `cluster`, from [`reserve_cluster`]): uploads the
/// modules the schedd does not have, with `spool` the jobs' input files too, then
/// the jobs. `note` hears of each retry.
pub async fn queue(
    c: &Client,
    cluster: u32,
    mut out: Submission,
    spool: bool,
    now: i64,
    note: impl Fn(&str),
) -> Result<SubmitReply> {
    if spool {
        spool_inputs(c, &mut out.jobs, now).await?;
    }
    for m in &out.modules {
        let path = format!("/v1/modules/{}", m.digest);
        let have = c.get(&path).await?;
        if have.status == http::StatusCode::NOT_FOUND {
            // A streamed body, written to disk by the schedd as it arrives.
            let r = c.upload_bytes(http::Method::PUT, &path, m.bytes.clone().into(), &[]).await?;
            if !r.status.is_success() {
                return Err(anyhow!(
                    "uploading {} failed: {}",
                    m.path,
                    r.error_reason().unwrap_or_else(|| r.status.to_string())
                ));
            }
        } else if !have.status.is_success() {
            return Err(status_error(&have));
        }
    }
    let s = factor(out.jobs);
    let req = SubmitRequest {
        cluster: Some(cluster),
        cluster_ad: s.cluster_ad.to_string(),
        procs: s.procs.iter().map(|p| p.to_string()).collect(),
    };
    submit_retrying(c, &req, note).await
}

/// Sends the submit, again if its answer is lost on the way (a timeout, a
/// cut connection, a schedd restarting): the schedd recognises the same
/// submit to the same reserved cluster and answers as the first time, so a
/// retry never queues the jobs twice.
async fn submit_retrying(
    c: &Client,
    req: &SubmitRequest,
    note: impl Fn(&str),
) -> Result<SubmitReply> {
    use andes_protocol::client::ClientErrorKind as K;
    let mut wait = std::time::Duration::from_millis(250);
    for attempt in 1.. {
        match c.call::<_, SubmitReply>(http::Method::POST, "/v1/submit", Some(req)).await {
            Ok(r) => return Ok(r),
            Err(e)
                if attempt < 6
                    && matches!(
                        e.kind,
                        K::Timeout(_) | K::Connect(_) | K::Refused(_) | K::Http(_)
                    ) =>
            {
                note(&format!("{e}; trying again in {wait:?}"));
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            Err(e) => return Err(e.into()),
        }
    }
    unreachable!("the loop returns")
}

/// Uploads every job's input files (read here, with the user's own rights)
/// and names them in the job's `SpooledInput`, as condor_submit -spool does;
/// the jobs then stay in the queue once completed until their output is
/// fetched (`LeaveJobInQueue`).
pub async fn spool_inputs(c: &Client, jobs: &mut [classad::ClassAd], now: i64) -> Result<()> {
    use andes_job::files as transfer;
    let mut sent = std::collections::HashSet::new();
    for (i, job) in jobs.iter_mut().enumerate() {
        let files = transfer::input_files(job).map_err(|e| anyhow!("job {i}: {e}"))?;
        let inputs = transfer::read_files(&files, transfer::input_limit(job))
            .map_err(|e| anyhow!("job {i}: {e}"))?;
        transfer::spool_inputs(c, job, inputs, &mut sent, now)
            .await
            .map_err(|e| anyhow!("job {i}: {e}"))?;
    }
    Ok(())
}
