//! The host daemon's signed HTTP API, shared by the daemon and the `andes`
//! command. ClassAds travel as text in new ClassAd syntax.
//!
//! | route | role | body → reply |
//! | --- | --- | --- |
//! | `GET /v1/status` | user, schedd, host (admin) | → [`StatusReply`] |
//! | `POST /v1/vacate` | admin | [`VacateRequest`] → [`CommandReply`] |
//! | `POST /v1/checkpoint` | admin | [`CheckpointRequest`] → [`CommandReply`] |
//! | `POST /v1/drain` | admin | [`DrainRequest`] → [`CommandReply`] |
//! | `POST /v1/off` | admin | [`OffRequest`] → [`CommandReply`] |
//! | `POST /v1/set-attr` | admin | [`SetAttrRequest`] → [`CommandReply`] |
//! | `POST /v1/reconfig` | admin | [`ReconfigRequest`] → [`CommandReply`] |
//!
//! Every request is signed (see `andes-protocol`). Errors are
//! `{"error": "..."}` with 400 (bad request or refused by the startd), 401,
//! 403, or 503 (the daemon is stopping). The routes schedds and the
//! negotiator use (claims, activations, job reports) are in [`crate::pool`].

use std::net::SocketAddr;

use andes_protocol::{ApiError, Auth, Role, SignedJson};
use andes_startd::{ShutdownKind, SlotId, VacateKind};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use crate::remote::{Command, Remote};

/// `GET /v1/status`: the latest ad of every slot.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StatusReply {
    /// One ad per slot, slot 1 first.
    pub ads: Vec<String>,
}

/// `POST /v1/vacate` (condor_vacate).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct VacateRequest {
    /// The slot; none: every slot.
    #[serde(default)]
    pub slot: Option<SlotId>,
    /// Hard-kill at once instead of retiring and vacating.
    #[serde(default)]
    pub fast: bool,
}

/// `POST /v1/drain`: condor_drain.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DrainRequest {
    /// Vacate the jobs at once instead of letting them retire.
    #[serde(default)]
    pub fast: bool,
    /// Take claims again (condor_drain -cancel).
    #[serde(default)]
    pub cancel: bool,
}

/// `POST /v1/checkpoint`: condor_checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckpointRequest {
    /// The slot; none: every slot.
    #[serde(default)]
    pub slot: Option<SlotId>,
}

/// `POST /v1/reconfig`: condor_reconfig (an empty object).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReconfigRequest {}

/// How `andes host off` shuts down (condor_off).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OffMode {
    /// Jobs retire (MaxJobRetirementTime), then are vacated.
    Graceful,
    /// Jobs run to their end.
    Peaceful,
    /// Jobs are hard-killed now.
    Fast,
}

impl From<OffMode> for ShutdownKind {
    fn from(m: OffMode) -> ShutdownKind {
        match m {
            OffMode::Graceful => ShutdownKind::Graceful,
            OffMode::Peaceful => ShutdownKind::Peaceful,
            OffMode::Fast => ShutdownKind::Fast,
        }
    }
}

/// `POST /v1/off`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OffRequest {
    /// How.
    pub mode: OffMode,
}

/// `POST /v1/set-attr`: sets (or clears) an attribute of a slot's ad.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetAttrRequest {
    /// The slot; none: every slot.
    #[serde(default)]
    pub slot: Option<SlotId>,
    /// The attribute (`KeyboardIdle`, or any the startd does not manage).
    pub name: String,
    /// A ClassAd expression; none: back to the startd's own value.
    #[serde(default)]
    pub value: Option<String>,
}

/// What an admin command did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CommandReply {
    /// A sentence for a person.
    pub message: String,
}

/// The API, behind `auth` (signed requests) and per-route roles.
pub fn router(remote: Remote, auth: &Auth) -> Router {
    routes(remote, auth).router
}

/// [`router`] with who may call each route.
pub fn routes(remote: Remote, auth: &Auth) -> andes_protocol::routes::Served {
    use axum::http::Method as M;
    let admin = &[Role::Admin];
    andes_protocol::routes::Api::new()
        .route(M::GET, "/v1/status", &[Role::User, Role::Schedd, Role::Host], get(status))
        .route(M::POST, "/v1/vacate", admin, post(vacate))
        .route(M::POST, "/v1/checkpoint", admin, post(checkpoint))
        .route(M::POST, "/v1/drain", admin, post(drain))
        .route(M::POST, "/v1/off", admin, post(off))
        .route(M::POST, "/v1/set-attr", admin, post(set_attr))
        .route(M::POST, "/v1/reconfig", admin, post(reconfig))
        .finish(auth, remote)
}

/// Serves the API through `server` (TLS or loopback plain HTTP, see
/// [`andes_protocol::Server`]) until `stop` completes.
pub async fn serve(
    remote: Remote,
    auth: Auth,
    server: andes_protocol::Server,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    server.serve(router(remote, &auth), stop).await
}

/// Binds `addr` (port 0 picks one) and reports the address bound.
pub async fn bind(addr: SocketAddr) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let l = tokio::net::TcpListener::bind(addr).await?;
    let a = l.local_addr()?;
    Ok((l, a))
}

type ApiResult<T> = Result<axum::Json<T>, ApiError>;

fn stopping() -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the host daemon is stopping")
}

async fn status(State(remote): State<Remote>) -> ApiResult<StatusReply> {
    let ads = remote.status().await.ok_or_else(stopping)?;
    Ok(axum::Json(StatusReply { ads: ads.iter().map(|a| a.to_string()).collect() }))
}

async fn run(remote: &Remote, c: Command) -> ApiResult<CommandReply> {
    match remote.command(c).await {
        Ok(message) => Ok(axum::Json(CommandReply { message })),
        Err(reason) => Err(ApiError::bad_request(reason)),
    }
}

async fn vacate(
    State(remote): State<Remote>,
    SignedJson(req): SignedJson<VacateRequest>,
) -> ApiResult<CommandReply> {
    let kind = if req.fast { VacateKind::Fast } else { VacateKind::Graceful };
    run(&remote, Command::Vacate { slot: req.slot, kind }).await
}

async fn drain(
    State(remote): State<Remote>,
    SignedJson(req): SignedJson<DrainRequest>,
) -> ApiResult<CommandReply> {
    let kind = if req.fast { VacateKind::Fast } else { VacateKind::Graceful };
    run(&remote, Command::Drain { kind, cancel: req.cancel }).await
}

async fn checkpoint(
    State(remote): State<Remote>,
    SignedJson(req): SignedJson<CheckpointRequest>,
) -> ApiResult<CommandReply> {
    run(&remote, Command::Checkpoint { slot: req.slot }).await
}

/// condor_reconfig: the host reads its configuration again.
async fn reconfig(
    State(remote): State<Remote>,
    SignedJson(_): SignedJson<ReconfigRequest>,
) -> ApiResult<CommandReply> {
    run(&remote, Command::Reconfig).await
}

async fn off(
    State(remote): State<Remote>,
    SignedJson(req): SignedJson<OffRequest>,
) -> ApiResult<CommandReply> {
    run(&remote, Command::Off(req.mode.into())).await
}

async fn set_attr(
    State(remote): State<Remote>,
    SignedJson(req): SignedJson<SetAttrRequest>,
) -> ApiResult<CommandReply> {
    let value = match &req.value {
        None => None,
        Some(text) => Some(classad::parse_expr(text).map_err(|e| {
            ApiError::bad_request(format!("{} = {text}: not a ClassAd expression: {e}", req.name))
        })?),
    };
    run(&remote, Command::SetAttr { slot: req.slot, name: req.name, value }).await
}
