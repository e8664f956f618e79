//! The extractors a handler takes from a request [`crate::Auth`] accepted:
//! who is calling ([`Caller`]), the verified body ([`VerifiedBody`],
//! [`SignedJson`]), and the marker of a streamed body.

use axum::extract::FromRequestParts;
use bytes::Bytes;
use http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::AuthError;
use crate::verify::Caller;

/// The marker [`crate::Auth`] puts on a streamed request it accepted: the
/// SHA-256 the client declared (and, over plain HTTP, signed), which the body
/// must hash to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Streamed(pub [u8; 32]);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = AuthError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, AuthError> {
        parts.extensions.get::<Caller>().cloned().ok_or(AuthError::NotAuthenticated)
    }
}

/// The verified body bytes of an authenticated request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedBody(pub Bytes);

impl<S: Send + Sync> FromRequestParts<S> for VerifiedBody {
    type Rejection = AuthError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, AuthError> {
        parts.extensions.get::<VerifiedBody>().cloned().ok_or_else(|| not_collected(parts))
    }
}

/// The verified body of an authenticated request, decoded from JSON; malformed JSON is
/// refused with 400 and serde's reason (with line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for SignedJson<T> {
    type Rejection = AuthError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, AuthError> {
        let body = parts.extensions.get::<VerifiedBody>().ok_or_else(|| not_collected(parts))?;
        decode_json(&body.0).map(SignedJson)
    }
}

/// Why a request has no verified body: a streamed one, or none authenticated.
fn not_collected(parts: &Parts) -> AuthError {
    if parts.extensions.get::<Streamed>().is_some() {
        AuthError::WrongBody(
            "this route takes a JSON body, not a streamed one (Andes-Body-Sha256)".into(),
        )
    } else {
        AuthError::NotAuthenticated
    }
}

/// Decodes a JSON body, with [`AuthError::BadJson`] (400) and a reason on failure.
pub fn decode_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, AuthError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(AuthError::BadJson("the body is empty; expected a JSON document".into()));
    }
    serde_json::from_slice(body).map_err(|e| AuthError::BadJson(e.to_string()))
}
