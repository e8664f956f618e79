//! The pool's routes of the host daemon (`/v1/host/...`), each a request to
//! the daemon's task through its [`Remote`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use andes_beneath::Beneath;
use andes_protocol::pool::{
    self, ActivateRequest, AliveReply, AliveRequest, ClaimReply, ClaimRequest, EditRequest,
    JobReport, MatchNotice, ReleaseRequest, RunState, WaitRequest, WithdrawReply, WithdrawRequest,
};
use andes_protocol::{ApiError, Auth, Caller, Role, SignedJson};
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use tokio::sync::watch;

use super::claim::*;
use crate::remote::Remote;
use andes_starter::control::Clock;

/// The sandbox names of the job's streams: one contract, in `andes-protocol`.
pub use andes_protocol::pool::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};

#[derive(Clone)]
pub(crate) struct PoolState {
    remote: Remote,
    clock: Arc<dyn Clock>,
}

/// The pool routes (see `andes_protocol::pool`), behind `auth`.
pub fn router(remote: Remote, clock: Arc<dyn Clock>, auth: &Auth) -> Router {
    routes(remote, clock, auth).router
}

/// [`router`] with who may call each route.
pub fn routes(
    remote: Remote,
    clock: Arc<dyn Clock>,
    auth: &Auth,
) -> andes_protocol::routes::Served {
    use axum::http::Method as M;
    let schedd = &[Role::Schedd];
    andes_protocol::routes::Api::new()
        .route(M::POST, "/v1/host/match", &[Role::Negotiator, Role::Admin], post(match_notice))
        .route(M::POST, "/v1/host/claim", schedd, post(claim))
        .route(M::GET, "/v1/host/modules/{digest}", schedd, get(has_module))
        .route(M::PUT, "/v1/host/modules/{digest}", schedd, put(put_module))
        .route(M::PUT, "/v1/host/inputs/{sha256}", schedd, put(put_input))
        .route(M::POST, "/v1/host/output", schedd, post(output))
        .route(M::POST, "/v1/host/snapshot", schedd, post(snapshot_part))
        .route(M::POST, "/v1/host/saved", schedd, post(saved_state))
        .route(M::POST, "/v1/host/activate", schedd, post(activate))
        .route(M::POST, "/v1/host/wait", schedd, post(wait))
        .route(M::POST, "/v1/host/edit", schedd, post(edit))
        .route(M::POST, "/v1/host/withdraw", schedd, post(withdraw))
        .route(M::POST, "/v1/host/vacate", schedd, post(vacate_job))
        .route(M::POST, "/v1/host/tail", schedd, post(tail))
        .route(M::POST, "/v1/host/release", schedd, post(release))
        .route(M::POST, "/v1/host/alive", schedd, post(alive))
        .finish(auth, PoolState { remote, clock })
}

type ApiResult<T> = Result<T, ApiError>;

pub(crate) async fn ask(s: &PoolState, req: PoolRequest) -> ApiResult<PoolReply> {
    s.remote.pool(req).await.map_err(ApiError::from)
}

pub(crate) async fn match_notice(
    State(s): State<PoolState>,
    SignedJson(req): SignedJson<MatchNotice>,
) -> ApiResult<StatusCode> {
    ask(&s, PoolRequest::Match(req)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn claim(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<ClaimRequest>,
) -> ApiResult<axum::Json<ClaimReply>> {
    match ask(&s, PoolRequest::Claim { caller: caller.identity, req }).await? {
        PoolReply::Claim(r) => Ok(axum::Json(r)),
        _ => Err(ApiError::internal("unexpected reply")),
    }
}

/// `PUT /v1/host/inputs/{sha256}`: an input file for the claim named in the
/// [`pool::CLAIM_HEADER`] header's next activation, streamed to disk and kept
/// only if it is whole, is the SHA-256 its path names, and fits the slot.
pub(crate) async fn put_input(
    State(s): State<PoolState>,
    caller: Caller,
    UrlPath(sha256): UrlPath<String>,
    headers: axum::http::HeaderMap,
    body: andes_protocol::stream::SignedStream,
) -> ApiResult<StatusCode> {
    let Some(digest) = andes_protocol::stream::parse_hex(&sha256) else {
        return Err(ApiError::bad_request(format!("{sha256:?} is not a SHA-256 (64 hex digits)")));
    };
    if digest != body.sha256 {
        return Err(ApiError::bad_request(format!(
            "the body is signed as SHA-256 {}, not the {sha256} its path names",
            hex::encode(body.sha256)
        )));
    }
    let claim_id = headers
        .get(pool::CLAIM_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| ApiError::bad_request("no Andes-Claim header: which claim is this for?"))?
        .to_string();
    let PoolReply::InputDir(dir, room) =
        ask(&s, PoolRequest::InputDir { caller: caller.identity, claim_id }).await?
    else {
        return Err(ApiError::internal("unexpected reply"));
    };
    let name = hex::encode(digest);
    let (part, done) = (dir.join(format!(".{name}.part")), dir.join(&name));
    let file = std::fs::File::create(&part)
        .map_err(|e| ApiError::internal(format!("{}: {e}", part.display())))?;
    match body.write_to(file, room).await {
        Ok((_, file)) => {
            drop(file);
            std::fs::rename(&part, &done)
                .map_err(|e| ApiError::internal(format!("{}: {e}", done.display())))?;
            Ok(StatusCode::NO_CONTENT)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            Err(andes_protocol::AuthError::from(e).into())
        }
    }
}

/// `POST /v1/host/output`: an output file a report named as streamed, as a
/// streamed body. Asking for one acknowledges nothing.
pub(crate) async fn output(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<pool::OutputRequest>,
) -> axum::response::Response {
    let reply = ask(&s, PoolRequest::Output { caller: caller.identity, req }).await;
    let (kept, path) = match reply {
        Ok(PoolReply::Output(k, p)) => (k, p),
        Ok(_) => return ApiError::internal("unexpected reply").into_response(),
        Err(e) => return e.into_response(),
    };
    let opened = tokio::task::spawn_blocking(move || {
        Beneath::open(&kept.dir)
            .map_err(|e| e.to_string())?
            .open_file(&path)
            .map_err(|e| e.to_string())
    })
    .await;
    match opened {
        Ok(Ok((file, len))) => andes_protocol::stream::file_response(file.into_std(), len),
        Ok(Err(e)) => {
            ApiError::internal(format!("the output file cannot be read: {e}")).into_response()
        }
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

/// `POST /v1/host/snapshot`: a streamed part of a checkpoint a report named
/// (the snapshot's bytes, or a file content), as a streamed body.
pub(crate) async fn snapshot_part(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<pool::SnapshotFileRequest>,
) -> axum::response::Response {
    let reply = ask(&s, PoolRequest::SnapshotPart { caller: caller.identity, req }).await;
    match reply {
        Ok(PoolReply::SnapshotBytes(bytes)) => {
            let len = bytes.len() as u64;
            let mut r = axum::response::Response::new(axum::body::Body::from(
                axum::body::Bytes::from_owner(ArcBytes(bytes)),
            ));
            r.headers_mut().insert(axum::http::header::CONTENT_LENGTH, len.into());
            r
        }
        Ok(PoolReply::SnapshotBlob(dir, path)) => {
            let opened = tokio::task::spawn_blocking(move || {
                let f = std::fs::File::open(&path)?;
                let len = f.metadata()?.len();
                drop(dir);
                Ok::<_, std::io::Error>((f, len))
            })
            .await;
            match opened {
                Ok(Ok((f, len))) => andes_protocol::stream::file_response(f, len),
                Ok(Err(e)) => {
                    ApiError::not_found(format!("the file content is gone: {e}")).into_response()
                }
                Err(e) => ApiError::internal(e.to_string()).into_response(),
            }
        }
        Ok(_) => ApiError::internal("unexpected reply").into_response(),
        Err(e) => e.into_response(),
    }
}

/// `POST /v1/host/saved`: the saved state a report named as streamed.
pub(crate) async fn saved_state(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<pool::SavedStateRequest>,
) -> axum::response::Response {
    match ask(&s, PoolRequest::Saved { caller: caller.identity, req }).await {
        Ok(PoolReply::Saved(data)) => {
            let len = data.len() as u64;
            let mut r = axum::response::Response::new(axum::body::Body::from(
                axum::body::Bytes::from_owner(ArcSlice(data)),
            ));
            r.headers_mut().insert(axum::http::header::CONTENT_LENGTH, len.into());
            r
        }
        Ok(_) => ApiError::internal("unexpected reply").into_response(),
        Err(e) => e.into_response(),
    }
}

/// A saved state's shared bytes as a body's owner.
pub(crate) struct ArcSlice(Arc<[u8]>);

impl AsRef<[u8]> for ArcSlice {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// A snapshot's shared bytes as a body's owner.
pub(crate) struct ArcBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for ArcBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

pub(crate) async fn has_module(
    State(s): State<PoolState>,
    UrlPath(digest): UrlPath<String>,
) -> ApiResult<StatusCode> {
    match ask(&s, PoolRequest::HasModule(digest)).await? {
        PoolReply::Has(true) => Ok(StatusCode::OK),
        _ => Ok(StatusCode::NOT_FOUND),
    }
}

pub(crate) async fn put_module(
    State(s): State<PoolState>,
    UrlPath(digest): UrlPath<String>,
    body: andes_protocol::stream::SignedStream,
) -> ApiResult<StatusCode> {
    let signed = format!("sha256:{}", hex::encode(body.sha256));
    if signed != digest {
        return Err(ApiError::bad_request(format!(
            "module digest mismatch: named {digest}, signed as {signed}"
        )));
    }
    // Streamed (no JSON, no body limit but the module's own), checked
    // against the digest as it arrives; kept in memory, where it is compiled.
    let bytes = body
        .into_bytes(pool::MAX_MODULE)
        .await
        .map_err(|e| ApiError::from(andes_protocol::AuthError::from(e)))?;
    if !bytes.starts_with(b"\0asm") {
        return Err(ApiError::bad_request(format!("{digest} is not a Wasm module")));
    }
    ask(&s, PoolRequest::PutModule(digest, Arc::from(&bytes[..]))).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What a shadow's long poll follows: a claim's reports, the starter's
/// update intervals (initial, then periodic), and the flag set once the
/// job's end was reported.
pub(crate) struct Follow {
    rx: watch::Receiver<Report>,
    initial: u64,
    periodic: u64,
    told_end: Arc<std::sync::atomic::AtomicU64>,
    heard: Heard,
}

/// Waits for a report newer than the shadow's (`req.since`), or until the
/// next periodic update is due; renews nothing itself (the daemon sees the
/// receiver alive).
pub(crate) async fn follow(s: &PoolState, f: Follow, req: &WaitRequest) -> JobReport {
    let Follow { mut rx, initial, periodic, told_end, heard } = f;
    let (initial, periodic) = match req.report_within {
        Some(w) => (initial.min(w.max(1)), periodic.min(w.max(1))),
        None => (initial, periodic),
    };
    let since = req.since;
    // Asked to settle: a newer report is held back while jobs queued behind
    // the running one have not all ended, until this deadline.
    let settle = (req.settle_ms > 0)
        .then(|| s.clock.now() + Duration::from_millis(req.settle_ms.min(60_000)));
    loop {
        let (version, started, state, ended) = {
            let r = rx.borrow_and_update();
            (r.version, r.started, r.state, r.all_ended())
        };
        if version > since && (ended || settle.is_none_or(|at| s.clock.now() >= at)) {
            break;
        }
        let now = i64::try_from(s.clock.unix_now()).unwrap_or(i64::MAX);
        let due = if state == RunState::Running || state == RunState::Suspended {
            let first = started.saturating_add(initial as i64);
            if now < first {
                first - now
            } else {
                periodic as i64 - (now - first) % periodic.max(1) as i64
            }
        } else {
            periodic as i64
        };
        let mut wake = s.clock.now() + Duration::from_secs(due.max(1) as u64);
        if let Some(at) = settle
            && version > since
        {
            wake = wake.min(at);
        }
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { break },
            _ = s.clock.sleep_until(wake) => break,
        }
    }
    let r = rx.borrow().clone();
    told(&r, &told_end, &heard);
    r.to_wire(s.clock.as_ref(), since, req.saved_seq, req.snapshot.as_deref())
}

/// Notes that `r` is about to be sent (the shadow was answered now), and
/// whether it tells the job's end (or the claim's): acknowledged by the
/// shadow's next request about the claim.
pub(crate) fn told(r: &Report, end_sent: &std::sync::atomic::AtomicU64, heard: &Heard) {
    heard.now();
    if r.all_ended() {
        end_sent.fetch_max(r.version.max(1), std::sync::atomic::Ordering::AcqRel);
    }
}

pub(crate) async fn activate(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<ActivateRequest>,
) -> ApiResult<axum::Json<JobReport>> {
    let wait_ms = req.wait_ms.min(60_000);
    let claim_id = req.claim_id.clone();
    let job =
        classad::parse_ad(&req.job).map_err(|e| PoolError::BadInput(format!("the job ad: {e}")))?;
    let more = req
        .more
        .iter()
        .map(|q| {
            let ad = classad::parse_ad(&q.job)?;
            Ok(if q.delta { job.with_delta(&ad, &q.unset) } else { ad })
        })
        .collect::<Result<Vec<_>, classad::ParseError>>()
        .map_err(|e| PoolError::BadInput(format!("a queued job ad: {e}")))?;
    // The job this activation's answer waits to see started.
    let first = match (req.reply_at_start, job.eval_attr("GlobalJobId")) {
        (true, classad::Value::Str(g)) => Some(g.to_string()),
        _ => None,
    };
    let ads = Box::new((job, more));
    ask(&s, PoolRequest::Activate { caller: caller.identity.clone(), req: Box::new(req), ads })
        .await?;
    let PoolReply::Reports(rx, initial, periodic, told_end, heard) =
        // The activation acknowledged what came before it.
        ask(
            &s,
            PoolRequest::Subscribe {
                caller: caller.identity,
                claim_id,
                incarnation: None,
                seen: 0,
            },
        )
        .await?
    else {
        return Err(ApiError::internal("unexpected reply"));
    };
    // The shadow keeps the snapshot it resumed the job from.
    let have = rx.borrow().restored.clone();
    let have = have.as_deref();
    if wait_ms == 0 {
        let r = rx.borrow().clone();
        told(&r, &told_end, &heard);
        return Ok(axum::Json(r.to_wire(s.clock.as_ref(), 0, 0, have)));
    }
    // Answer when the job (and any queued behind it) ended within wait_ms,
    // or, asked so, when its first job started; else with the report of the
    // moment.
    let mut rx2 = rx.clone();
    let deadline = s.clock.now() + Duration::from_millis(wait_ms);
    loop {
        let done = {
            let r = rx2.borrow_and_update();
            let started = first
                .as_deref()
                .is_some_and(|g| r.job.as_deref() == Some(g) || r.ended.iter().any(|e| e.job == g));
            started || r.all_ended()
        };
        if done {
            break;
        }
        tokio::select! {
            c = rx2.changed() => if c.is_err() { break },
            _ = s.clock.sleep_until(deadline) => break,
        }
    }
    let _ = (initial, periodic);
    let r = rx2.borrow().clone();
    told(&r, &told_end, &heard);
    Ok(axum::Json(r.to_wire(s.clock.as_ref(), 0, 0, have)))
}

pub(crate) async fn wait(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<WaitRequest>,
) -> ApiResult<axum::Json<JobReport>> {
    let PoolReply::Reports(rx, initial, periodic, told_end, heard) = ask(
        &s,
        PoolRequest::Subscribe {
            caller: caller.identity,
            claim_id: req.claim_id.clone(),
            incarnation: req.incarnation.clone(),
            seen: req.since,
        },
    )
    .await?
    else {
        return Err(ApiError::internal("unexpected reply"));
    };
    let f = Follow { rx, initial, periodic, told_end, heard };
    Ok(axum::Json(follow(&s, f, &req).await))
}

pub(crate) async fn edit(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<EditRequest>,
) -> ApiResult<StatusCode> {
    ask(&s, PoolRequest::Edit { caller: caller.identity, req }).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn tail(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<andes_protocol::pool::TailRequest>,
) -> ApiResult<axum::Json<andes_protocol::pool::TailReply>> {
    let sandbox = match ask(
        &s,
        PoolRequest::Sandbox { caller: caller.identity, claim_id: req.claim_id.clone() },
    )
    .await?
    {
        PoolReply::Sandbox(p) => p,
        _ => return Err(ApiError::internal("unexpected reply")),
    };
    let reply = tokio::task::spawn_blocking(move || read_tail(&sandbox, &req))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    reply.map(axum::Json).map_err(|e| ApiError::new(StatusCode::CONFLICT, e))
}

/// A piece of the job's output or error stream, read beneath its sandbox
/// (a link or anything but a plain file there is refused, never followed).
pub(crate) fn read_tail(
    sandbox: &Path,
    req: &andes_protocol::pool::TailRequest,
) -> Result<andes_protocol::pool::TailReply, String> {
    use std::io::{Read, Seek};
    let name = if req.stderr { STDERR_NAME } else { STDOUT_NAME };
    let b = Beneath::open(sandbox).map_err(|e| format!("the job's sandbox: {e}"))?;
    let (mut f, size) = match b.open_file(name) {
        Ok(f) => f,
        // Nothing written yet.
        Err(_) if b.entry(name).is_err() => {
            return Ok(andes_protocol::pool::TailReply { offset: 0, data: Vec::new(), size: 0 });
        }
        Err(e) => return Err(format!("the job's {name}: {e}")),
    };
    let max = req.max.min(andes_protocol::pool::MAX_TAIL);
    let offset = req.offset.unwrap_or_else(|| size.saturating_sub(max)).min(size);
    f.seek(std::io::SeekFrom::Start(offset)).map_err(|e| e.to_string())?;
    let mut data = Vec::new();
    f.take(max.min(size - offset)).read_to_end(&mut data).map_err(|e| e.to_string())?;
    Ok(andes_protocol::pool::TailReply { offset, data, size })
}

pub(crate) async fn vacate_job(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<andes_protocol::pool::VacateJobRequest>,
) -> ApiResult<StatusCode> {
    ask(&s, PoolRequest::VacateJob { caller: caller.identity, req }).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn withdraw(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<WithdrawRequest>,
) -> ApiResult<axum::Json<WithdrawReply>> {
    let PoolReply::Withdrawn(withdrawn) =
        ask(&s, PoolRequest::Withdraw { caller: caller.identity, req }).await?
    else {
        return Err(ApiError::internal("unexpected reply"));
    };
    Ok(axum::Json(WithdrawReply { withdrawn }))
}

pub(crate) async fn alive(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<AliveRequest>,
) -> ApiResult<axum::Json<AliveReply>> {
    if req.incarnation.len() > 128 || req.claims.len() > 100_000 {
        return Err(ApiError::bad_request("the keep-alive is too large"));
    }
    match ask(&s, PoolRequest::Alive { caller: caller.identity, req }).await? {
        PoolReply::Alive(r) => Ok(axum::Json(r)),
        _ => Err(ApiError::internal("unexpected reply")),
    }
}

pub(crate) async fn release(
    State(s): State<PoolState>,
    caller: Caller,
    SignedJson(req): SignedJson<ReleaseRequest>,
) -> ApiResult<StatusCode> {
    ask(&s, PoolRequest::Release { caller: caller.identity, claim_id: req.claim_id }).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use andes_starter::VirtualClock;

    /// Lets every other task on the test's runtime run until it waits.
    async fn let_others_run() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    /// A wait asked to settle (a shadow following a batch of short jobs) is
    /// answered once the jobs queued behind the running one have all ended,
    /// not at the first newer report; or, if they take longer, at its
    /// deadline with the latest report. One not asked to settle is answered
    /// at the first newer report, as before.
    #[tokio::test]
    async fn a_settling_wait_is_answered_when_the_batch_has_ended_or_at_its_deadline() {
        let vc = VirtualClock::new();
        let (tx, _requests) = tokio::sync::mpsc::channel(1);
        let s = PoolState { remote: Remote { tx }, clock: Arc::new(vc.clone()) };
        let wait = |settle_ms: u64, since: u64| WaitRequest {
            claim_id: "c".into(),
            since,
            saved_seq: 0,
            snapshot: None,
            incarnation: None,
            report_within: None,
            settle_ms,
        };
        let mut r = Report::idle(1);
        r.state = RunState::Running;
        r.queued = 3;
        let (reports, rx) = watch::channel(r.clone());
        let follow_with = |req: WaitRequest| {
            let (s, rx) = (s.clone(), rx.clone());
            let f = Follow {
                rx,
                initial: 300,
                periodic: 300,
                told_end: Default::default(),
                heard: Heard::default(),
            };
            tokio::spawn(async move { follow(&s, f, &req).await })
        };
        let settling = follow_with(wait(2_000, 1));
        let eager = follow_with(wait(0, 1));
        // A job ends; two are still queued.
        r.version = 2;
        r.queued = 2;
        reports.send_replace(r.clone());
        let got = eager.await.unwrap();
        assert_eq!((got.version, got.queued), (2, 2), "answered at the first newer report");
        let_others_run().await;
        assert!(!settling.is_finished(), "a settling wait answered with jobs still queued");
        // The last of them ends: answered with that report.
        r.version = 3;
        r.queued = 0;
        r.state = RunState::Exited;
        reports.send_replace(r.clone());
        let got = settling.await.unwrap();
        assert_eq!((got.version, got.queued, got.state), (3, 0, RunState::Exited));

        // Jobs that outlast the deadline: the latest report at it.
        r.version = 4;
        r.state = RunState::Running;
        r.queued = 5;
        reports.send_replace(r.clone());
        let settling = follow_with(wait(2_000, 3));
        let_others_run().await;
        assert!(!settling.is_finished(), "answered before its deadline");
        vc.advance(Duration::from_millis(1_999));
        let_others_run().await;
        assert!(!settling.is_finished(), "answered before its deadline");
        vc.advance(Duration::from_millis(1));
        let got = settling.await.unwrap();
        assert_eq!((got.version, got.queued), (4, 5));

        // A schedd asking to settle for ever is answered at the host's bound,
        // a minute (unbounded, its deadline overflowed the clock's instant);
        // the job started now, its periodic update minutes away.
        r.version = 5;
        r.started = i64::try_from(s.clock.unix_now()).unwrap();
        reports.send_replace(r.clone());
        let settling = follow_with(wait(u64::MAX, 4));
        let_others_run().await;
        vc.advance(Duration::from_millis(59_999));
        let_others_run().await;
        assert!(!settling.is_finished(), "answered before the host's bound");
        vc.advance(Duration::from_millis(1));
        let_others_run().await;
        assert!(settling.is_finished(), "not answered at the host's bound");
        let got = settling.await.unwrap();
        assert_eq!((got.version, got.queued), (5, 5));
    }
}
