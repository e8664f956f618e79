//! The signed string and the headers that carry a request's signature.
//!
//! **Which requests are signed.** A request over plain HTTP (loopback only) is signed:
//! nothing else tells who sent it. A request over TLS is authenticated by its
//! connection, as HTCondor authenticates a security session once and not each
//! command: the handshake proved the client's key (the client's raw public key,
//! signed over the handshake, see [`crate::tls`]), and TLS keeps anyone else from
//! speaking on the connection, altering or replaying its records, or redirecting it
//! to another daemon (the client checked the server's key). A signature would prove
//! nothing more (a signed request over TLS must be signed by the connection's own
//! key), so the client sends none; the server takes the key of the handshake,
//! looked up in the trust file in force at each request, and still checks a
//! signature a request does carry. What a signature costs (38 µs to sign, 103 µs to
//! verify a 1 KiB request on this project's test machine, and a nonce kept and
//! written for each) is paid once per connection instead of once per request.
//!
//! A request is signed over this text (lines joined by `\n`, no trailing newline):
//!
//! ```text
//! andes-request-v2
//! DESTINATION          (see below)
//! METHOD
//! /path?query
//! TIMESTAMP            (Unix seconds, decimal)
//! NONCE                (base64 of >= 16 random bytes)
//! SHA-256 of the body  (lower-case hex)
//! PUBLIC KEY           (base64)
//! ```
//!
//! and the five headers [`KEY`], [`TIMESTAMP`], [`NONCE`], [`DESTINATION`] and
//! [`SIGNATURE`] carry the key, timestamp, nonce, destination and the base64 ed25519
//! signature.
//!
//! The destination names the one daemon the request is for, so that a request captured
//! on its way to one daemon is refused by every other, even one trusting the same key.
//! One rule covers both transports: it is what the client *authenticated* the server
//! as ([`Destination`]):
//!
//! * over TLS, the server's public key as its handshake proved it:
//!   `key ed25519 BASE64`; the server accepts only its own key;
//! * over plain HTTP (allowed only on the loopback interface, where nothing
//!   authenticates the server), the authority the client dialled: `addr HOST:PORT`;
//!   the server accepts only a loopback host (`127.0.0.0/8`, `localhost`, `[::1]`)
//!   with its own port, which no other daemon on the machine can hold.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use http::{HeaderMap, HeaderName, HeaderValue};
use rand_core::{OsRng, RngCore};
use sha2::{Digest, Sha256};

use crate::error::AuthError;
use crate::key::{Keypair, PublicKey};

/// The version tag that starts every signed string.
pub const VERSION: &str = "andes-request-v2";
/// `Andes-Key`: the signer's public key, base64.
pub const KEY: HeaderName = HeaderName::from_static("andes-key");
/// `Andes-Timestamp`: when the request was signed, Unix seconds.
pub const TIMESTAMP: HeaderName = HeaderName::from_static("andes-timestamp");
/// `Andes-Nonce`: random bytes, base64, never reused.
pub const NONCE: HeaderName = HeaderName::from_static("andes-nonce");
/// `Andes-Destination`: the daemon the request is for ([`Destination`]'s text).
pub const DESTINATION: HeaderName = HeaderName::from_static("andes-destination");
/// `Andes-Signature`: the ed25519 signature of the signed string, base64.
pub const SIGNATURE: HeaderName = HeaderName::from_static("andes-signature");
/// `Andes-Body-Sha256`: on a streamed request only, the SHA-256 (hex) of the body the
/// signature covers. The server checks the signature before it reads the body and
/// the body against this digest as it arrives (see [`crate::stream`]).
pub const BODY_SHA256: HeaderName = HeaderName::from_static("andes-body-sha256");
/// Bytes of nonce a client makes (128 bits).
pub const NONCE_LEN: usize = 16;
/// Shortest nonce accepted, bytes.
pub const MIN_NONCE_LEN: usize = 16;
/// Longest nonce accepted, bytes.
pub const MAX_NONCE_LEN: usize = 64;

/// Longest `Andes-Destination` accepted, bytes.
pub const MAX_DESTINATION_LEN: usize = 300;

/// The daemon a request is signed for (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Destination {
    /// Over TLS: the server's public key, as its handshake proved it.
    Key(PublicKey),
    /// Over plain HTTP on the loopback interface: the `HOST:PORT` the client dialled.
    Addr(String),
}

impl Destination {
    /// Parses the text of [`Destination`]'s `Display` (`key ed25519 BASE64` or
    /// `addr HOST:PORT`).
    pub fn parse(text: &str) -> Result<Destination, String> {
        if let Some(k) = text.strip_prefix("key ed25519 ") {
            return PublicKey::from_base64(k).map(Destination::Key).map_err(|e| e.to_string());
        }
        if let Some(a) = text.strip_prefix("addr ") {
            if a.is_empty() || !a.bytes().all(|b| b.is_ascii_graphic()) {
                return Err("the address must be HOST:PORT in visible ASCII".into());
            }
            return Ok(Destination::Addr(a.to_string()));
        }
        Err("expected `key ed25519 BASE64` or `addr HOST:PORT`".into())
    }
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Destination::Key(k) => write!(f, "key ed25519 {k}"),
            Destination::Addr(a) => write!(f, "addr {a}"),
        }
    }
}

/// The SHA-256 of a body.
pub fn body_digest(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

/// The text a request's signature covers (see the module documentation).
pub fn signing_string(
    destination: &Destination,
    method: &str,
    path_and_query: &str,
    timestamp: i64,
    nonce: &[u8],
    body_sha256: &[u8; 32],
    key: &PublicKey,
) -> String {
    let hex = hex::encode(body_sha256);
    format!(
        "{VERSION}\n{destination}\n{method}\n{path_and_query}\n{timestamp}\n{}\n{hex}\n{}",
        B64.encode(nonce),
        key.to_base64()
    )
}

/// Checks that a method and a path can be signed unambiguously: no control characters
/// or spaces (which HTTP does not allow there either).
pub fn check_request_line(method: &str, path_and_query: &str) -> Result<(), AuthError> {
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(AuthError::MalformedRequest("the method is not an HTTP token".into()));
    }
    if !path_and_query.starts_with('/') || !path_and_query.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(AuthError::MalformedRequest(
            "the path must start with `/` and hold only visible ASCII".into(),
        ));
    }
    Ok(())
}

/// Whether a request carries none of the signature's headers: over TLS, a request its
/// connection authenticates; over plain HTTP, one refused as unsigned. (A request with
/// some of them is a signed one, checked whole, a missing header refused.)
pub fn is_unsigned(headers: &HeaderMap) -> bool {
    [&KEY, &TIMESTAMP, &NONCE, &DESTINATION, &SIGNATURE].iter().all(|h| !headers.contains_key(*h))
}

/// A request's signature headers, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeaders {
    /// `Andes-Key`.
    pub key: PublicKey,
    /// `Andes-Timestamp`, Unix seconds.
    pub timestamp: i64,
    /// `Andes-Nonce`, decoded.
    pub nonce: Vec<u8>,
    /// `Andes-Destination`, parsed.
    pub destination: Destination,
    /// `Andes-Signature`, decoded.
    pub signature: [u8; 64],
}

impl SignedHeaders {
    /// Signs a request for `destination` with a fresh random nonce.
    pub fn sign(
        keypair: &Keypair,
        destination: &Destination,
        method: &str,
        path_and_query: &str,
        body: &[u8],
        timestamp: i64,
    ) -> Self {
        Self::sign_digest(
            keypair,
            destination,
            method,
            path_and_query,
            &body_digest(body),
            timestamp,
        )
    }

    /// Signs a request whose body is known by its SHA-256 only (a streamed body,
    /// [`BODY_SHA256`]), with a fresh random nonce.
    pub fn sign_digest(
        keypair: &Keypair,
        destination: &Destination,
        method: &str,
        path_and_query: &str,
        body_sha256: &[u8; 32],
        timestamp: i64,
    ) -> Self {
        let mut nonce = vec![0u8; NONCE_LEN];
        OsRng.fill_bytes(&mut nonce);
        Self::sign_digest_with_nonce(
            keypair,
            destination,
            method,
            path_and_query,
            body_sha256,
            timestamp,
            nonce,
        )
    }

    /// Signs a request with the given nonce (tests and fuzzing; real requests use
    /// [`SignedHeaders::sign`]).
    pub fn sign_with_nonce(
        keypair: &Keypair,
        destination: &Destination,
        method: &str,
        path_and_query: &str,
        body: &[u8],
        timestamp: i64,
        nonce: Vec<u8>,
    ) -> Self {
        let digest = body_digest(body);
        Self::sign_digest_with_nonce(
            keypair,
            destination,
            method,
            path_and_query,
            &digest,
            timestamp,
            nonce,
        )
    }

    fn sign_digest_with_nonce(
        keypair: &Keypair,
        destination: &Destination,
        method: &str,
        path_and_query: &str,
        body_sha256: &[u8; 32],
        timestamp: i64,
        nonce: Vec<u8>,
    ) -> Self {
        let key = keypair.public();
        let text = signing_string(
            destination,
            method,
            path_and_query,
            timestamp,
            &nonce,
            body_sha256,
            &key,
        );
        SignedHeaders {
            key,
            timestamp,
            nonce,
            destination: destination.clone(),
            signature: keypair.sign(text.as_bytes()),
        }
    }

    /// Sets the five headers on `headers`.
    pub fn apply(&self, headers: &mut HeaderMap) {
        let v = |s: String| HeaderValue::try_from(s).expect("base64 and digits are valid");
        headers.insert(KEY, v(self.key.to_base64()));
        headers.insert(TIMESTAMP, HeaderValue::from(self.timestamp));
        headers.insert(NONCE, v(B64.encode(&self.nonce)));
        // A destination is parsed or built from visible ASCII only.
        if let Ok(d) = HeaderValue::try_from(self.destination.to_string()) {
            headers.insert(DESTINATION, d);
        }
        headers.insert(SIGNATURE, v(B64.encode(self.signature)));
    }

    /// Parses the five headers. No `Andes-*` header at all is [`AuthError::Unsigned`];
    /// a missing, repeated or malformed one is [`AuthError::MalformedHeader`].
    pub fn from_headers(headers: &HeaderMap) -> Result<Self, AuthError> {
        if is_unsigned(headers) {
            return Err(AuthError::Unsigned);
        }
        let key = one(headers, &KEY, "Andes-Key", 64)?;
        let key = PublicKey::from_base64(key).map_err(|e| AuthError::MalformedHeader {
            header: "Andes-Key",
            reason: e.to_string(),
        })?;
        let ts = one(headers, &TIMESTAMP, "Andes-Timestamp", 20)?;
        let timestamp = if ts.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
            ts.parse::<i64>().ok()
        } else {
            None
        }
        .ok_or_else(|| AuthError::MalformedHeader {
            header: "Andes-Timestamp",
            reason: "expected Unix seconds (a decimal integer)".into(),
        })?;
        let nonce = one(headers, &NONCE, "Andes-Nonce", 4 * MAX_NONCE_LEN.div_ceil(3))?;
        let nonce = B64
            .decode(nonce)
            .ok()
            .filter(|n| (MIN_NONCE_LEN..=MAX_NONCE_LEN).contains(&n.len()))
            .ok_or_else(|| AuthError::MalformedHeader {
                header: "Andes-Nonce",
                reason: format!("expected {MIN_NONCE_LEN} to {MAX_NONCE_LEN} bytes of base64"),
            })?;
        let destination = one(headers, &DESTINATION, "Andes-Destination", MAX_DESTINATION_LEN)?;
        let destination = Destination::parse(destination)
            .map_err(|reason| AuthError::MalformedHeader { header: "Andes-Destination", reason })?;
        let sig = one(headers, &SIGNATURE, "Andes-Signature", 100)?;
        let signature: [u8; 64] =
            B64.decode(sig).ok().and_then(|s| s.try_into().ok()).ok_or_else(|| {
                AuthError::MalformedHeader {
                    header: "Andes-Signature",
                    reason: "expected 64 bytes of base64".into(),
                }
            })?;
        Ok(SignedHeaders { key, timestamp, nonce, destination, signature })
    }

    /// Checks the signature against a request (not the key's trust, the time or
    /// replay: see [`crate::Verifier`]).
    pub fn signature_matches(&self, method: &str, path_and_query: &str, body: &[u8]) -> bool {
        self.signature_matches_digest(method, path_and_query, &body_digest(body))
    }

    /// Checks the signature against a request whose body is known by its SHA-256.
    pub fn signature_matches_digest(
        &self,
        method: &str,
        path_and_query: &str,
        body_sha256: &[u8; 32],
    ) -> bool {
        let text = signing_string(
            &self.destination,
            method,
            path_and_query,
            self.timestamp,
            &self.nonce,
            body_sha256,
            &self.key,
        );
        let sig = ed25519_dalek::Signature::from_bytes(&self.signature);
        self.key.0.verify_strict(text.as_bytes(), &sig).is_ok()
    }
}

fn one<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
    display: &'static str,
    max_len: usize,
) -> Result<&'a str, AuthError> {
    let bad = |reason: &str| AuthError::MalformedHeader { header: display, reason: reason.into() };
    let mut values = headers.get_all(name).iter();
    let v = values.next().ok_or_else(|| bad("missing"))?;
    if values.next().is_some() {
        return Err(bad("given more than once"));
    }
    if v.len() > max_len {
        return Err(bad("too long"));
    }
    v.to_str().map(str::trim).map_err(|_| bad("not ASCII text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kp() -> Keypair {
        Keypair::from_seed("alice", [1; 32]).unwrap()
    }

    fn dest() -> Destination {
        Destination::Addr("127.0.0.1:9618".into())
    }

    #[test]
    fn signing_string_is_exact() {
        let k = kp();
        let s = signing_string(
            &dest(),
            "POST",
            "/jobs?x=1",
            1_700_000_000,
            &[0; 16],
            &body_digest(b""),
            &k.public(),
        );
        assert_eq!(
            s,
            format!(
                "andes-request-v2\naddr 127.0.0.1:9618\nPOST\n/jobs?x=1\n1700000000\nAAAAAAAAAAAAAAAAAAAAAA==\n\
                 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n{}",
                k.public()
            )
        );
    }

    #[test]
    fn signature_covers_every_part() {
        let k = kp();
        let h =
            SignedHeaders::sign_with_nonce(&k, &dest(), "POST", "/a?b=1", b"{}", 100, vec![7; 16]);
        assert!(h.signature_matches("POST", "/a?b=1", b"{}"));
        assert!(!h.signature_matches("GET", "/a?b=1", b"{}"));
        assert!(!h.signature_matches("POST", "/a?b=2", b"{}"));
        assert!(!h.signature_matches("POST", "/a?b=1", b"{ }"));
        for tweak in 0..6 {
            let mut t = h.clone();
            match tweak {
                0 => t.timestamp += 1,
                1 => t.nonce[0] ^= 1,
                2 => t.signature[5] ^= 1,
                3 => t.destination = Destination::Addr("127.0.0.1:9619".into()),
                4 => t.destination = Destination::Key(k.public()),
                _ => t.key = Keypair::from_seed("x", [2; 32]).unwrap().public(),
            }
            assert!(!t.signature_matches("POST", "/a?b=1", b"{}"), "tweak {tweak}");
        }
    }

    #[test]
    fn headers_round_trip_and_fresh_nonces() {
        let k = kp();
        let a = SignedHeaders::sign(&k, &dest(), "GET", "/", b"", -5);
        let b = SignedHeaders::sign(&k, &dest(), "GET", "/", b"", -5);
        assert_ne!(a.nonce, b.nonce);
        assert_eq!(a.nonce.len(), 16);
        let mut m = HeaderMap::new();
        a.apply(&mut m);
        assert_eq!(SignedHeaders::from_headers(&m).unwrap(), a);
    }

    #[test]
    fn header_errors() {
        assert_eq!(SignedHeaders::from_headers(&HeaderMap::new()), Err(AuthError::Unsigned));
        let k = kp();
        let mut good = HeaderMap::new();
        SignedHeaders::sign(&k, &dest(), "GET", "/", b"", 1).apply(&mut good);
        let cases: Vec<(HeaderName, &str, &str)> = vec![
            (KEY, "AAAA", "Andes-Key"),
            (TIMESTAMP, "12a", "Andes-Timestamp"),
            (TIMESTAMP, "99999999999999999999", "Andes-Timestamp"),
            (NONCE, "AAAA", "Andes-Nonce"),
            (SIGNATURE, "AAAA", "Andes-Signature"),
            (DESTINATION, "127.0.0.1:9618", "Andes-Destination"),
            (DESTINATION, "key ed25519 AAAA", "Andes-Destination"),
        ];
        for (name, value, header) in cases {
            let mut m = good.clone();
            m.insert(name, HeaderValue::from_static(value));
            match SignedHeaders::from_headers(&m) {
                Err(AuthError::MalformedHeader { header: h, .. }) => assert_eq!(h, header),
                other => panic!("{header}={value}: {other:?}"),
            }
        }
        let mut m = good.clone();
        m.remove(NONCE);
        assert!(
            SignedHeaders::from_headers(&m)
                .unwrap_err()
                .to_string()
                .contains("Andes-Nonce header: missing")
        );
        let mut m = good.clone();
        m.append(SIGNATURE, HeaderValue::from_static("x"));
        assert!(
            SignedHeaders::from_headers(&m).unwrap_err().to_string().contains("more than once")
        );
    }

    #[test]
    fn destinations_round_trip() {
        for d in [dest(), Destination::Key(kp().public())] {
            assert_eq!(Destination::parse(&d.to_string()), Ok(d));
        }
        assert!(Destination::parse("addr ").is_err());
        assert!(Destination::parse("addr a b").is_err());
    }

    #[test]
    fn request_line_checks() {
        assert!(check_request_line("GET", "/a?b").is_ok());
        assert!(check_request_line("GET", "a").is_err());
        assert!(check_request_line("GET", "/a\nb").is_err());
        assert!(check_request_line("G T", "/").is_err());
        assert!(check_request_line("", "/").is_err());
    }
}
