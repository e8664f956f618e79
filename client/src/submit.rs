//! The submit as `andes submit` and the Python `Schedd.submit` make it: reserve a
//! cluster, expand the description for it, send the modules the schedd lacks (and
//! with `spool`, the input files), then queue the jobs in one request that a retry
//! can never queue twice.

use andes_job::api::factor;
use andes_job::api::{ClustersReply, ClustersRequest, NewClusterReply, SubmitReply, SubmitRequest};
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

/// Reserves `count` consecutive cluster ids at the schedd (`POST
/// /v1/clusters`, at most [`andes_job::api::MAX_CLUSTER_BLOCK`]); the first.
pub async fn reserve_clusters(c: &Client, count: u32) -> Result<u32> {
    let ClustersReply { first, .. } =
        c.call(http::Method::POST, "/v1/clusters", Some(&ClustersRequest { count })).await?;
    Ok(first)
}

/// True when the schedd refused a submit for an upload it lacks.
fn precondition_failed(e: &anyhow::Error) -> bool {
    use andes_protocol::client::{ClientError, ClientErrorKind};
    e.downcast_ref::<ClientError>().is_some_and(|c| {
        matches!(c.kind, ClientErrorKind::Status { status, .. }
            if status == http::StatusCode::PRECONDITION_FAILED)
    })
}

/// The submit of `jobs` to `cluster`, the cluster's attributes factored out.
fn request(cluster: u32, jobs: Vec<classad::ClassAd>) -> SubmitRequest {
    let s = factor(jobs);
    SubmitRequest {
        cluster: Some(cluster),
        cluster_ad: s.cluster_ad.to_string(),
        procs: s.procs.iter().map(|p| p.to_string()).collect(),
    }
}

/// Queues `out` (expanded for `cluster`, from [`reserve_cluster`]): with `spool`
/// the jobs' input files go up first; then the jobs, and the modules only when
/// the schedd says it lacks one (then the jobs again). `note` hears of each retry.
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
    let req = request(cluster, out.jobs);
    // Most submits run a module their owner has stored already (the same
    // program again: an upload outlives its last job for a while), so the
    // submit goes first. A 412 says an upload is missing: the modules the
    // schedd lacks go up, and the submit again. (Also when the owner's last
    // job naming one left between the two.)
    let mut tries = 0;
    loop {
        match submit_retrying(c, &req, &note).await {
            Err(e) if precondition_failed(&e) && tries < 3 => {
                tries += 1;
                if tries > 1 {
                    note(&format!("{e}; uploading the modules again"));
                }
                for m in &out.modules {
                    upload_missing(c, m).await?;
                }
            }
            r => return r,
        }
    }
}

/// Uploads module `m` unless the schedd has it as its caller's.
async fn upload_missing(c: &Client, m: &andes_submit::Module) -> Result<()> {
    let have = c.get(&format!("/v1/modules/{}", m.digest)).await?;
    if have.status == http::StatusCode::NOT_FOUND {
        upload(c, m).await
    } else if have.status.is_success() {
        Ok(())
    } else {
        Err(status_error(&have))
    }
}

/// Uploads module `m` (a streamed body, written to disk by the schedd as it
/// arrives).
async fn upload(c: &Client, m: &andes_submit::Module) -> Result<()> {
    let path = format!("/v1/modules/{}", m.digest);
    let r = c.upload_bytes(http::Method::PUT, &path, m.bytes.clone().into(), &[]).await?;
    if !r.status.is_success() {
        return Err(anyhow!(
            "uploading {} failed: {}",
            m.path,
            r.error_reason().unwrap_or_else(|| r.status.to_string())
        ));
    }
    Ok(())
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
