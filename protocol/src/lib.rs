//! Identities, signed requests and wire types shared by every andes daemon and the
//! `andes` command.
//!
//! * [`key`]: ed25519 key pairs and their files (`andes keygen`).
//! * [`trust`]: the pool's trust file, mapping public keys to identities and roles.
//! * [`sign`]: what a request's signature covers and the `Andes-*` headers.
//! * [`verify`]: the receiver's checks (trust, clock skew, signature, replay).
//! * [`server`]: axum layers and extractors: a handler gets [`Caller`] and the body.
//! * [`client`]: the signing HTTP client.
//! * [`pool`]: the messages between negotiator, schedd and execute host.
//! * [`error`]: rejections and the `{"error": "..."}` body every daemon answers with.
#![warn(missing_docs)]

pub mod client;
pub mod error;
pub mod key;
pub mod pool;
pub mod server;
pub mod sign;
pub mod trust;
pub mod verify;

pub use client::{Client, ClientError, ClientErrorKind, Response};
pub use error::{ApiError, AuthError, ErrorBody};
pub use key::{Keypair, PublicKey};
pub use server::{Auth, SignedJson, VerifiedBody, decode_json, require};
pub use sign::SignedHeaders;
pub use trust::{Identity, Role, TrustFile};
pub use verify::{Caller, Clock, ManualClock, SystemClock, Verifier, VerifierConfig};
