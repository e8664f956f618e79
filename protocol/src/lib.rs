//! Identities, authenticated requests and wire types shared by every andes daemon and
//! the `andes` command.
//!
//! * [`key`]: ed25519 key pairs and their files (`andes keygen`).
//! * [`trust`]: the pool's trust file, mapping public keys to identities and roles.
//! * [`sign`]: which requests are signed (those over plain HTTP; TLS authenticates the
//!   rest by their connection), what a signature covers and the `Andes-*` headers.
//! * [`verify`]: the receiver's checks (trust, clock skew, destination, signature,
//!   replay, per-key limits); [`replay`]: its file, which survives a restart.
//! * [`tls`]: TLS 1.3 authenticated by the pool's keys as raw public keys.
//! * [`serve`]: the one way a daemon serves: TLS (or loopback plain HTTP), hyper, and
//!   the connection limits; [`admission`]: which connections it keeps (those that
//!   proved a trusted key first).
//! * [`auth`]: the axum layers that check every request; [`extract`]: what a handler takes from one ([`Caller`], the body).
//! * [`connection`]: what a connection proved (its TLS keys, its addresses).
//! * [`journal`]: what a daemon is evaluating of a user's input, kept so that
//!   it never dies on the same input twice.
//! * [`client`]: the HTTP client (signing over plain HTTP).
//! * [`stream`]: files as streamed bodies (big inputs, outputs, modules, snapshots).
//! * [`pool`]: the messages between negotiator, schedd and execute host.
//! * [`error`]: rejections and the `{"error": "..."}` body every daemon answers with.
#![forbid(unsafe_code)]

pub mod admission;
pub mod auth;
pub mod client;
pub mod connection;
pub mod error;
pub mod extract;
pub mod journal;
pub mod key;
pub mod pool;
pub mod replay;
pub mod routes;
pub mod serve;
pub mod sign;
pub mod stream;
pub mod tls;
pub mod trust;
pub mod verify;

pub use auth::{Auth, require};
pub use client::{Client, ClientError, ClientErrorKind, Response, Transport};
pub use error::{ApiError, AuthError, ErrorBody};
pub use extract::{SignedJson, VerifiedBody, decode_json};
pub use key::{Keypair, PublicKey};
pub use serve::{ConnectionInfo, Limits, ServeError, Server};
pub use sign::{Destination, SignedHeaders};
pub use trust::{Identity, Role, TrustFile};
pub use verify::{Caller, Clock, ManualClock, SystemClock, Verifier, VerifierConfig};
