//! Rejections and the JSON error body every daemon answers with:
//! `{"error": "...reason..."}` with the HTTP status.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

use crate::trust::Role;

/// The JSON body of every error response: `{"error": "...reason..."}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ErrorBody {
    /// Why the request failed, for a person to read.
    pub error: String,
}

/// Why a request was refused by authentication, authorization or body decoding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Andes-*` headers at all (401).
    #[error(
        "request is not signed: it carries no Andes-Signature header (sign it with an andes key)"
    )]
    Unsigned,
    /// A signature header is missing, repeated or malformed (401).
    #[error("malformed {header} header: {reason}")]
    MalformedHeader {
        /// The header's name.
        header: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The route takes the other kind of body: JSON where a stream came, or the
    /// reverse (400).
    #[error("{0}")]
    WrongBody(String),
    /// The method or path cannot be part of a signed request (401).
    #[error("malformed request: {0}")]
    MalformedRequest(String),
    /// The key is not in the trust file (401).
    #[error("unknown key {key}: it is not in the pool's trust file")]
    UnknownKey {
        /// The key, base64.
        key: String,
    },
    /// The signature does not match the request (401).
    #[error(
        "bad signature from {identity}: the signature does not match the request's method, \
         path, body, timestamp and nonce"
    )]
    BadSignature {
        /// The identity the key belongs to.
        identity: String,
    },
    /// The timestamp is outside the clock-skew window (401).
    #[error(
        "request timestamp {timestamp} is {} s {} the server's clock ({now}); at most {max_skew} s \
         is allowed: check the clocks of both machines",
        timestamp.abs_diff(*now),
        if timestamp < now { "behind" } else { "ahead of" }
    )]
    Skewed {
        /// The request's `Andes-Timestamp` (Unix seconds).
        timestamp: i64,
        /// The server's time.
        now: i64,
        /// The window, seconds.
        max_skew: u64,
    },
    /// The nonce was already used within the window (401).
    #[error("replayed request: this nonce was already used within the last {window} s")]
    Replayed {
        /// How long nonces are remembered, seconds.
        window: u64,
    },
    /// The replay cache is at its cap (503): accepting more would either use unbounded
    /// memory or forget nonces still inside the window.
    #[error(
        "too many recent requests to remember ({held} nonces inside the clock-skew window); \
         retry in {retry_after} s"
    )]
    ReplayCacheFull {
        /// Nonces held.
        held: usize,
        /// Seconds until the oldest one expires.
        retry_after: u64,
    },
    /// The request was signed for another daemon (401): a request captured on its way
    /// to one daemon is refused by every other.
    #[error("the request was signed for another daemon ({signed_for}); this one is {this}")]
    WrongDestination {
        /// The `Andes-Destination` the request was signed for.
        signed_for: String,
        /// What this daemon accepts.
        this: String,
    },
    /// The request's signing key is not the key its TLS connection was authenticated
    /// with (401).
    #[error(
        "the request is signed by key {signer} but its TLS connection was authenticated \
         as key {tls}: sign with the key the connection presents"
    )]
    TlsKeyMismatch {
        /// The key that signed the request, base64.
        signer: String,
        /// The client key of the TLS session, base64.
        tls: String,
    },
    /// One key sent more than its share (429): too many requests per second, or too
    /// many nonces held in the replay cache. Only that key is refused.
    #[error("too many requests from {identity}: {why}; retry in {retry_after} s")]
    TooManyRequests {
        /// Whose key.
        identity: String,
        /// Which limit.
        why: String,
        /// Seconds until the key is under its limit again.
        retry_after: u64,
    },
    /// The body did not arrive within the deadline (408).
    #[error("the request body did not arrive within {secs} s")]
    BodyTimeout {
        /// The deadline, seconds.
        secs: u64,
    },
    /// The accepted nonce could not be written to the replay-cache file (503): the
    /// request is refused rather than accepted without a record that survives a
    /// restart.
    #[error("cannot record the request in the replay cache: {0}")]
    ReplayCacheWrite(String),
    /// The request did not come through [`crate::serve`], so there is no connection
    /// identity to check it against (500: a programming error).
    #[error("this request did not come through andes_protocol::serve: no connection identity")]
    NoConnection,
    /// The caller's role is not allowed on this route (403).
    #[error(
        "{identity} (role {role}) may not use this route; it needs role {}",
        roles_text(allowed)
    )]
    Forbidden {
        /// Who called.
        identity: String,
        /// In which role.
        role: Role,
        /// The roles the route allows.
        allowed: Vec<Role>,
    },
    /// The body is larger than the limit (413).
    #[error("request body is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The limit, bytes.
        limit: usize,
    },
    /// The body could not be read (400).
    #[error("cannot read the request body: {0}")]
    BodyRead(String),
    /// The body is not the JSON the route expects (400).
    #[error("malformed JSON body: {0}")]
    BadJson(String),
    /// A handler asked for the caller on a route without the authentication layer
    /// (500: a programming error, refused rather than served unauthenticated).
    #[error("this route is not behind andes authentication")]
    NotAuthenticated,
    /// The daemon serves as many connections as it may, or as many of this key's
    /// as one key may hold (503): try again.
    #[error(
        "the daemon is serving as many connections as it may (or as many as one key may \
         hold); try again"
    )]
    Busy,
}

fn roles_text(roles: &[Role]) -> String {
    let names: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
    if names.is_empty() { "(none)".to_string() } else { names.join(" or ") }
}

impl AuthError {
    /// The HTTP status this rejection is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            AuthError::Unsigned
            | AuthError::MalformedHeader { .. }
            | AuthError::MalformedRequest(_)
            | AuthError::UnknownKey { .. }
            | AuthError::BadSignature { .. }
            | AuthError::Skewed { .. }
            | AuthError::Replayed { .. }
            | AuthError::WrongDestination { .. }
            | AuthError::TlsKeyMismatch { .. } => StatusCode::UNAUTHORIZED,
            AuthError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            AuthError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            AuthError::ReplayCacheFull { .. }
            | AuthError::ReplayCacheWrite(_)
            | AuthError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            AuthError::NoConnection => StatusCode::INTERNAL_SERVER_ERROR,
            AuthError::Forbidden { .. } => StatusCode::FORBIDDEN,
            AuthError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            AuthError::BodyRead(_) | AuthError::BadJson(_) | AuthError::WrongBody(_) => {
                StatusCode::BAD_REQUEST
            }
            AuthError::NotAuthenticated => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        let mut r = ApiError::new(self.status(), self.to_string()).into_response();
        match self {
            AuthError::ReplayCacheFull { retry_after, .. }
            | AuthError::TooManyRequests { retry_after, .. } => {
                r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            }
            e if e.status() == StatusCode::UNAUTHORIZED => {
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Andes-Ed25519"));
            }
            _ => {}
        }
        r
    }
}

/// An error response: a status and a reason, sent as [`ErrorBody`] JSON. Handlers
/// return it for their own refusals (`404`, `409`, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {reason}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// Why, for a person to read.
    pub reason: String,
}

impl ApiError {
    /// An error response with this status and reason.
    pub fn new(status: StatusCode, reason: impl Into<String>) -> Self {
        ApiError { status, reason: reason.into() }
    }

    /// 400 Bad Request.
    pub fn bad_request(reason: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, reason)
    }

    /// 404 Not Found.
    pub fn not_found(reason: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, reason)
    }

    /// 403 Forbidden.
    pub fn forbidden(reason: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, reason)
    }

    /// 500 Internal Server Error.
    pub fn internal(reason: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, reason)
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        ApiError::new(e.status(), e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(ErrorBody { error: self.reason })).into_response()
    }
}
