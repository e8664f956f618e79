//! The collector's HTTP API: routes and JSON bodies, shared by the daemon, the
//! daemons that publish and the `andes status` command. ClassAds travel as text in
//! new ClassAd syntax.
//!
//! | route | role | body → reply |
//! | --- | --- | --- |
//! | `POST /v1/collector/update` | host (Machine), schedd (Scheduler, Submitter), admin (any) | [`UpdateRequest`] → [`UpdateReply`] |
//! | `POST /v1/collector/updates` | as update, for each ad | [`UpdatesRequest`] (at most [`MAX_COLLECTOR_UPDATES`]) → [`UpdatesReply`] (the ads refused, by index; the deltas whose base is not held, as `stale`) |
//! | `POST /v1/collector/invalidate` | as update | [`InvalidateRequest`] → [`InvalidateReply`] |
//! | `POST /v1/collector/query` | any trusted role | [`QueryRequest`] → [`QueryReply`] |
//!
//! Every request is signed (see `andes-protocol`). A publisher may replace or
//! invalidate only the ads it published (until they expire); an admin may invalidate
//! any. Errors are `{"error": "..."}` with 400 (bad ad, type or constraint), 401 (not
//! authenticated) or 403 (not allowed).

use std::sync::{Arc, Mutex, MutexGuard};

use andes_protocol::{ApiError, Auth, Caller, Clock, Role, SignedJson};
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use classad::ClassAd;
use serde::{Deserialize, Serialize};

use super::{AdType, Collector, CollectorError};

pub use andes_protocol::pool::{
    CollectorInvalidate as InvalidateRequest, CollectorQuery as QueryRequest,
    CollectorQueryReply as QueryReply, CollectorUpdate as UpdateRequest,
    CollectorUpdates as UpdatesRequest, CollectorUpdatesReply as UpdatesReply,
    MAX_COLLECTOR_UPDATES,
};

/// The answer to an update.
pub use andes_protocol::pool::CollectorUpdateReply as UpdateReply;

/// This collector's incarnation: random, new at each start of the process.
fn incarnation() -> &'static str {
    static INCARNATION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    INCARNATION.get_or_init(|| {
        let mut b = [0u8; 16];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut b);
        hex::encode(b)
    })
}

/// The answer to an invalidation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InvalidateReply {
    /// Whether there was such an ad.
    pub removed: bool,
}

/// The collector's shared state: the store and the clock it is read with.
#[derive(Clone)]
struct Shared {
    collector: Arc<Mutex<Collector>>,
    clock: Arc<dyn Clock>,
    poke: Option<Arc<tokio::sync::Notify>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Collector> {
        // A panic elsewhere while holding the lock leaves a consistent map.
        self.collector.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The collector's routes over `collector`, read at `clock`'s time, behind `auth`
/// (signed requests from trusted keys only).
pub fn router(collector: Arc<Mutex<Collector>>, clock: Arc<dyn Clock>, auth: &Auth) -> Router {
    router_with_poke(collector, clock, auth, None)
}

/// [`router`], also waking `poke` (the negotiator) when an update may give it
/// work: a slot ad in Unclaimed, or a Scheduler ad with idle jobs while a
/// cycle could match one (see [`Collector::negotiation_may_match`]).
pub fn router_with_poke(
    collector: Arc<Mutex<Collector>>,
    clock: Arc<dyn Clock>,
    auth: &Auth,
    poke: Option<Arc<tokio::sync::Notify>>,
) -> Router {
    routes(collector, clock, auth, poke).router
}

/// [`router_with_poke`] with who may call each route.
pub fn routes(
    collector: Arc<Mutex<Collector>>,
    clock: Arc<dyn Clock>,
    auth: &Auth,
    poke: Option<Arc<tokio::sync::Notify>>,
) -> andes_protocol::routes::Served {
    use http::Method as M;
    let who = &[Role::User, Role::Schedd, Role::Host, Role::Negotiator];
    andes_protocol::routes::Api::new()
        .route(M::POST, "/v1/collector/update", who, post(update))
        .route(M::POST, "/v1/collector/updates", who, post(updates))
        .route(M::POST, "/v1/collector/invalidate", who, post(invalidate))
        .route(M::POST, "/v1/collector/query", who, post(query))
        .finish(auth, Shared { collector, clock, poke })
}

/// Whether a caller in `role` may publish or withdraw ads of `kind`.
pub fn may_publish(role: Role, kind: AdType) -> bool {
    match role {
        Role::Admin => true,
        Role::Host => kind == AdType::Machine,
        Role::Schedd => matches!(kind, AdType::Schedd | AdType::Submitter),
        Role::Negotiator => kind == AdType::Negotiator,
        Role::User => false,
    }
}

fn kind(word: &str) -> Result<AdType, ApiError> {
    word.parse().map_err(|e: CollectorError| ApiError::bad_request(e.to_string()))
}

fn check_publisher(caller: &Caller, kind: AdType) -> Result<(), ApiError> {
    if may_publish(caller.role, kind) {
        return Ok(());
    }
    let allowed = match kind {
        AdType::Machine => "host or admin",
        AdType::Schedd | AdType::Submitter => "schedd or admin",
        AdType::Negotiator => "negotiator or admin",
    };
    Err(ApiError::forbidden(format!(
        "{} (role {}) may not publish {kind} ads; they come from role {allowed}",
        caller.identity, caller.role
    )))
}

fn store_error(e: CollectorError) -> ApiError {
    match e {
        CollectorError::Forbidden { .. } => ApiError::forbidden(e.to_string()),
        CollectorError::UnknownType(_)
        | CollectorError::NoName { .. }
        | CollectorError::StaleBase { .. } => ApiError::bad_request(e.to_string()),
    }
}

fn parse_ad(text: &str, what: &str) -> Result<ClassAd, ApiError> {
    classad::parse_ad(text).map_err(|e| ApiError::bad_request(format!("{what}: {e}")))
}

type ApiResult<T> = Result<axum::Json<T>, ApiError>;

/// One update, checked and parsed: its type, ad (or delta), private part,
/// and the publisher's numbers for it.
struct Checked {
    kind: AdType,
    ad: ClassAd,
    private: Option<ClassAd>,
    serial: Option<u64>,
    /// A delta: the serial of its base, and the names it unsets.
    delta: Option<(u64, Vec<String>)>,
}

fn check_update(caller: &Caller, req: &UpdateRequest) -> Result<Checked, ApiError> {
    let kind = kind(&req.kind)?;
    check_publisher(caller, kind)?;
    let what = if req.base.is_some() { "delta of the" } else { "the" };
    let ad = parse_ad(&req.ad, &format!("{what} {kind} ad"))?;
    let private = req
        .private
        .as_deref()
        .map(|p| parse_ad(p, &format!("the private {kind} ad")))
        .transpose()?;
    if req.base.is_none() && !req.unset.is_empty() {
        return Err(ApiError::bad_request(format!(
            "the {kind} ad names attributes to unset but no base ad to unset them from"
        )));
    }
    Ok(Checked {
        kind,
        ad,
        private,
        serial: req.serial,
        delta: req.base.map(|b| (b, req.unset.clone())),
    })
}

impl Checked {
    /// Keeps this update in `store` (a delta resolved against the ad it
    /// was taken from): the ad's lifetime, and whether it should wake the
    /// negotiator (a slot ad in Unclaimed, or a Scheduler ad with idle jobs
    /// while a cycle could match one, see
    /// [`Collector::negotiation_may_match`]).
    fn keep(
        self,
        store: &mut Collector,
        identity: &str,
        now: i64,
    ) -> Result<(i64, bool), CollectorError> {
        let Checked { kind, ad, private, serial, delta } = self;
        // A Scheduler ad changes no slot ad: judged before or after alike.
        let wakes = |store: &Collector, ad: &ClassAd| match kind {
            AdType::Schedd => {
                matches!(ad.eval_attr(classad::name!("TotalIdleJobs")), classad::Value::Int(n) if n > 0)
                    && store.negotiation_may_match(now)
            }
            AdType::Machine => {
                matches!(ad.eval_attr(classad::name!("State")), classad::Value::Str(st) if &*st == "Unclaimed")
            }
            _ => false,
        };
        match delta {
            Some((base, unset)) => {
                let (lifetime, ad) =
                    store.apply_delta(kind, &ad, &unset, private, base, serial, identity, now)?;
                Ok((lifetime, wakes(store, &ad)))
            }
            None => {
                let wakes = wakes(store, &ad);
                let lifetime = store.update_numbered(kind, ad, private, identity, now, serial)?;
                Ok((lifetime, wakes))
            }
        }
    }
}

async fn update(
    State(s): State<Shared>,
    caller: Caller,
    SignedJson(req): SignedJson<UpdateRequest>,
) -> ApiResult<UpdateReply> {
    let c = check_update(&caller, &req)?;
    let now = s.clock.now();
    let (lifetime, wakes) = c.keep(&mut s.lock(), &caller.identity, now).map_err(store_error)?;
    if wakes && let Some(p) = &s.poke {
        p.notify_one();
    }
    Ok(axum::Json(UpdateReply { lifetime, incarnation: incarnation().to_string() }))
}

/// Several updates in one request: each is checked and kept as
/// [`update`] would, under one lock; those refused are named in the reply
/// (deltas whose base the collector does not hold apart, as `stale`).
async fn updates(
    State(s): State<Shared>,
    caller: Caller,
    SignedJson(req): SignedJson<UpdatesRequest>,
) -> ApiResult<UpdatesReply> {
    if req.updates.len() > MAX_COLLECTOR_UPDATES {
        return Err(ApiError::bad_request(format!(
            "{} updates in one request; at most {MAX_COLLECTOR_UPDATES}",
            req.updates.len()
        )));
    }
    let checked: Vec<_> = req.updates.iter().map(|u| check_update(&caller, u)).collect();
    let now = s.clock.now();
    let mut reply = UpdatesReply {
        incarnation: incarnation().to_string(),
        takes_deltas: true,
        ..Default::default()
    };
    let mut lifetime = None::<i64>;
    let mut wakes = false;
    {
        let mut store = s.lock();
        for (i, c) in checked.into_iter().enumerate() {
            let kept = c.and_then(|c| match c.keep(&mut store, &caller.identity, now) {
                Ok((l, w)) => {
                    wakes |= w;
                    Ok(Some(l))
                }
                Err(CollectorError::StaleBase { .. }) => Ok(None),
                Err(e) => Err(store_error(e)),
            });
            match kept {
                Ok(Some(l)) => lifetime = Some(lifetime.map_or(l, |m| m.min(l))),
                Ok(None) => reply.stale.push(i),
                Err(e) => reply.refused.push((i, e.reason)),
            }
        }
    }
    reply.lifetime = lifetime.unwrap_or(0);
    if wakes && let Some(p) = &s.poke {
        p.notify_one();
    }
    Ok(axum::Json(reply))
}

async fn invalidate(
    State(s): State<Shared>,
    caller: Caller,
    SignedJson(req): SignedJson<InvalidateRequest>,
) -> ApiResult<InvalidateReply> {
    let kind = kind(&req.kind)?;
    check_publisher(&caller, kind)?;
    let now = s.clock.now();
    let removed = if caller.role == Role::Admin {
        s.lock().remove(kind, &req.name)
    } else {
        s.lock().invalidate(kind, &req.name, &caller.identity, now).map_err(store_error)?
    };
    Ok(axum::Json(InvalidateReply { removed }))
}

async fn query(
    State(s): State<Shared>,
    SignedJson(req): SignedJson<QueryRequest>,
) -> ApiResult<QueryReply> {
    let kind = req.kind.as_deref().map(kind).transpose()?;
    let constraint = req
        .constraint
        .as_deref()
        .map(|c| {
            classad::parse_expr(c)
                .map_err(|e| ApiError::bad_request(format!("constraint `{c}`: {e}")))
        })
        .transpose()?;
    let now = s.clock.now();
    // Only the snapshot is taken under the lock; the constraint is evaluated
    // (within its budget) and the ads unparsed after it is released, off the
    // runtime.
    let snapshot = s.lock().snapshot(kind, now);
    let ads = tokio::task::spawn_blocking(move || {
        crate::collector::select(&snapshot, constraint.as_ref(), &req.projection, now)
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
    .map_err(ApiError::bad_request)?;
    Ok(axum::Json(QueryReply { ads: ads.iter().map(ClassAd::to_string).collect() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_publish_their_own_kinds() {
        use AdType::*;
        assert!(may_publish(Role::Host, Machine));
        assert!(!may_publish(Role::Host, Schedd));
        assert!(may_publish(Role::Schedd, Schedd));
        assert!(may_publish(Role::Schedd, Submitter));
        assert!(!may_publish(Role::Schedd, Machine));
        assert!(!may_publish(Role::Schedd, Negotiator));
        assert!(AdType::ALL.iter().all(|&k| may_publish(Role::Admin, k)));
        assert!(AdType::ALL.iter().all(|&k| !may_publish(Role::User, k)));
    }
}
