//! axum integration: the authentication layer (every request's signature,
//! key and body checked before a handler sees it) and the role layer. The
//! extractors a handler uses to learn who is calling and read the verified
//! body are in [`crate::extract`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use andes_protocol::{Auth, Caller, Role, SignedJson, SystemClock, TrustFile, Verifier, VerifierConfig};
//! use axum::{Router, routing::post};
//!
//! #[derive(serde::Deserialize)]
//! struct Submit { cluster: u64 }
//!
//! async fn submit(caller: Caller, SignedJson(s): SignedJson<Submit>) -> String {
//!     format!("{} submitted to {}", caller.identity, s.cluster)
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let trust = TrustFile::load("/etc/andes/trust".as_ref())?;
//! let auth = Auth::new(Verifier::new(trust, VerifierConfig::default()), Arc::new(SystemClock));
//! let app: Router = Router::new()
//!     .route("/v1/jobs", post(submit))
//!     .layer(andes_protocol::require(&[Role::User]))
//!     .layer(auth.layer());
//! // Then served by `andes_protocol::serve::Server`, which gives each request the
//! // connection's identities the layer checks.
//! # Ok(()) }
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{OriginalUri, Request};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tower_layer::Layer;
use tower_service::Service;

use crate::connection::ConnectionInfo;
use crate::error::AuthError;
use crate::extract::{Streamed, VerifiedBody};
use crate::trust::Role;
use crate::verify::{Caller, Clock, Verifier};

/// Default request body limit: 16 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 16 << 20;
/// Default time a request's body may take to arrive once its headers are accepted.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

struct AuthInner {
    verifier: Verifier,
    clock: Arc<dyn Clock>,
    body_limit: usize,
    body_timeout_ms: AtomicU64,
}

/// The authentication of a daemon's HTTP API: a [`Verifier`], the clock it reads and
/// the body size limit. Cheap to clone.
#[derive(Clone)]
pub struct Auth {
    inner: Arc<AuthInner>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("verifier", &self.inner.verifier)
            .field("body_limit", &self.inner.body_limit)
            .finish_non_exhaustive()
    }
}

impl Auth {
    /// Authentication with `verifier`, reading the time from `clock`, with the
    /// default body limit ([`DEFAULT_BODY_LIMIT`]).
    pub fn new(verifier: Verifier, clock: Arc<dyn Clock>) -> Self {
        Self::with_body_limit(verifier, clock, DEFAULT_BODY_LIMIT)
    }

    /// Authentication with a body limit in bytes (larger bodies get 413).
    pub fn with_body_limit(verifier: Verifier, clock: Arc<dyn Clock>, body_limit: usize) -> Self {
        Auth {
            inner: Arc::new(AuthInner {
                verifier,
                clock,
                body_limit,
                body_timeout_ms: AtomicU64::new(DEFAULT_BODY_TIMEOUT.as_millis() as u64),
            }),
        }
    }

    /// Sets how long a request's body may take to arrive once its headers are
    /// accepted (default [`DEFAULT_BODY_TIMEOUT`]); a slower one gets 408.
    pub fn set_body_timeout(&self, timeout: Duration) {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.inner.body_timeout_ms.store(ms, Ordering::Relaxed);
    }

    /// How long a request's body may take to arrive.
    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.inner.body_timeout_ms.load(Ordering::Relaxed))
    }

    /// The verifier (to replace the trust file, or read its state).
    pub fn verifier(&self) -> &Verifier {
        &self.inner.verifier
    }

    /// The body limit, bytes.
    pub fn body_limit(&self) -> usize {
        self.inner.body_limit
    }

    /// The tower layer that authenticates every request of a router: refused requests
    /// get their 401/413/503 answer; accepted ones reach the handler with [`Caller`]
    /// and [`VerifiedBody`] in their extensions and the verified bytes as their body.
    pub fn layer(&self) -> AuthLayer {
        AuthLayer { auth: self.clone() }
    }

    /// Authenticates one request: the headers are checked first (an unsigned, unknown
    /// or stale request, or one signed by another key than its TLS connection's, is
    /// refused before its body is read), then the body is read up to the limit and
    /// within the body deadline, and the destination, signature and nonce are
    /// checked. Returns the request with the caller and the body attached.
    ///
    /// The request must carry the [`ConnectionInfo`] that [`crate::serve`] gives it.
    pub async fn authenticate(&self, req: Request) -> Result<Request, AuthError> {
        let a = &*self.inner;
        let conn =
            req.extensions().get::<ConnectionInfo>().cloned().ok_or(AuthError::NoConnection)?;
        if let Some(key) = &conn.peer_key
            && crate::sign::is_unsigned(req.headers())
        {
            // The TLS handshake proved the key: the connection authenticates its
            // requests (see `crate::sign`).
            let caller = a.verifier.connection_caller(key, a.clock.now())?;
            return self.with_body(req, caller).await;
        }
        let pending = a.verifier.check_headers(req.headers(), a.clock.now())?;
        if let Some(tls) = &conn.peer_key
            && *tls != pending.headers().key
        {
            return Err(AuthError::TlsKeyMismatch {
                signer: pending.headers().key.to_base64(),
                tls: tls.to_base64(),
            });
        }
        let this = conn.accepts(&pending.headers().destination);
        let (parts, body) = req.into_parts();
        if let Some(declared) = parts.headers.get(&crate::sign::BODY_SHA256) {
            // A streamed body: the signature covers the digest the client declared,
            // checked now; the handler checks the body against it as it arrives
            // (`stream::SignedStream`), never holding it whole.
            let digest = parse_body_digest(declared)?;
            let uri = parts.extensions.get::<OriginalUri>().map_or(&parts.uri, |o| &o.0);
            let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
            let caller = a.verifier.finish_digest(
                pending,
                parts.method.as_str(),
                &path,
                &digest,
                &this,
                a.clock.now(),
            )?;
            return accept_streamed(parts, body, caller, digest);
        }
        let bytes = self.read_body(&parts, body).await?;
        // Nested routers strip their prefix from the URI; the signature covers the
        // path the client sent.
        let uri = parts.extensions.get::<OriginalUri>().map_or(&parts.uri, |o| &o.0);
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        let caller = a.verifier.finish(
            pending,
            parts.method.as_str(),
            &path,
            &bytes,
            &this,
            a.clock.now(),
        )?;
        accept_whole(parts, bytes, caller)
    }

    /// The rest of [`Auth::authenticate`] for a request its connection
    /// authenticated as `caller`: the request line is checked and the body read
    /// within the limits as for a signed request; a streamed body (declaring its
    /// SHA-256) is checked against that digest by its handler as it arrives.
    async fn with_body(&self, req: Request, caller: Caller) -> Result<Request, AuthError> {
        let (parts, body) = req.into_parts();
        let uri = parts.extensions.get::<OriginalUri>().map_or(&parts.uri, |o| &o.0);
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        crate::sign::check_request_line(parts.method.as_str(), path)?;
        if let Some(declared) = parts.headers.get(&crate::sign::BODY_SHA256) {
            let digest = parse_body_digest(declared)?;
            return accept_streamed(parts, body, caller, digest);
        }
        let bytes = self.read_body(&parts, body).await?;
        accept_whole(parts, bytes, caller)
    }

    /// A whole body, up to the limit and within the body deadline.
    async fn read_body(
        &self,
        parts: &http::request::Parts,
        body: Body,
    ) -> Result<bytes::Bytes, AuthError> {
        let a = &*self.inner;
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > a.body_limit as u64) {
            return Err(AuthError::TooLarge { limit: a.body_limit });
        }
        let deadline = self.body_timeout();
        let collected = tokio::time::timeout(deadline, Limited::new(body, a.body_limit).collect());
        match collected.await {
            Err(_) => Err(AuthError::BodyTimeout { secs: deadline.as_secs().max(1) }),
            Ok(Ok(c)) => Ok(c.to_bytes()),
            Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
                Err(AuthError::TooLarge { limit: a.body_limit })
            }
            Ok(Err(e)) => Err(AuthError::BodyRead(e.to_string())),
        }
    }
}

/// An authenticated request with a streamed body, for its handler to check against
/// `digest` as it arrives: its connection established, `caller` attached.
fn accept_streamed(
    mut parts: http::request::Parts,
    body: Body,
    caller: Caller,
    digest: [u8; 32],
) -> Result<Request, AuthError> {
    admit(&parts, &caller)?;
    parts.extensions.insert(caller);
    parts.extensions.insert(Streamed(digest));
    Ok(Request::from_parts(parts, body))
}

/// An authenticated request with its whole body read: its connection established,
/// `caller` and the body attached.
fn accept_whole(
    mut parts: http::request::Parts,
    bytes: bytes::Bytes,
    caller: Caller,
) -> Result<Request, AuthError> {
    admit(&parts, &caller)?;
    parts.extensions.insert(caller);
    parts.extensions.insert(VerifiedBody(bytes.clone()));
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// The `Andes-Body-Sha256` a streamed request declares.
fn parse_body_digest(declared: &http::HeaderValue) -> Result<[u8; 32], AuthError> {
    declared.to_str().ok().and_then(crate::stream::parse_hex).ok_or_else(|| {
        AuthError::MalformedHeader {
            header: "Andes-Body-Sha256",
            reason: "expected the body's SHA-256 as 64 hex digits".into(),
        }
    })
}

/// A request proved its caller's key: its connection (over plain HTTP, not
/// yet established) is established, or refused when the daemon, or the key,
/// holds all the connections it may ([`crate::admission`]).
fn admit(parts: &http::request::Parts, caller: &Caller) -> Result<(), AuthError> {
    match parts.extensions.get::<crate::admission::Ticket>() {
        Some(t) if !t.establish(Some(caller.key)) => Err(AuthError::Busy),
        _ => Ok(()),
    }
}

/// The layer of [`Auth::layer`].
#[derive(Clone, Debug)]
pub struct AuthLayer {
    auth: Auth,
}

impl<S> Layer<S> for AuthLayer {
    type Service = AuthService<S>;
    fn layer(&self, inner: S) -> AuthService<S> {
        AuthService { inner, auth: self.auth.clone() }
    }
}

/// The service of [`AuthLayer`].
#[derive(Clone, Debug)]
pub struct AuthService<S> {
    inner: S,
    auth: Auth,
}

impl<S> Service<Request> for AuthService<S>
where
    S: Service<Request, Error = Infallible> + Clone + Send + 'static,
    S::Response: IntoResponse,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // The clone that was made ready is the one called.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let auth = self.auth.clone();
        Box::pin(async move {
            match auth.authenticate(req).await {
                Ok(req) => Ok(inner.call(req).await.into_response()),
                Err(e) => Ok(e.into_response()),
            }
        })
    }
}

/// A layer allowing only callers of the given roles (`admin` passes wherever `user`
/// does); others get 403. Put it inside (before, in `.layer` order) [`Auth::layer`].
pub fn require(roles: &[Role]) -> RequireLayer {
    RequireLayer { roles: roles.into() }
}

/// The layer of [`require`].
#[derive(Clone, Debug)]
pub struct RequireLayer {
    roles: Arc<[Role]>,
}

impl<S> Layer<S> for RequireLayer {
    type Service = RequireService<S>;
    fn layer(&self, inner: S) -> RequireService<S> {
        RequireService { inner, roles: self.roles.clone() }
    }
}

/// The service of [`RequireLayer`].
#[derive(Clone, Debug)]
pub struct RequireService<S> {
    inner: S,
    roles: Arc<[Role]>,
}

impl<S> Service<Request> for RequireService<S>
where
    S: Service<Request, Error = Infallible> + Clone + Send + 'static,
    S::Response: IntoResponse,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let verdict = match req.extensions().get::<Caller>() {
            None => Err(AuthError::NotAuthenticated),
            Some(c) => c.require(&self.roles),
        };
        if let Err(e) = verdict {
            return Box::pin(async move { Ok(e.into_response()) });
        }
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move { Ok(inner.call(req).await.into_response()) })
    }
}
