//! TLS 1.3 between andes parts, authenticated by the pool's ed25519 keys as raw public
//! keys (RFC 7250): no certificate authority, no certificates. The trust file is the
//! only authority.
//!
//! * A server presents its daemon key; a client accepts it only if the trust file
//!   gives that key one of the roles the client expects (by default a daemon role:
//!   schedd, host or negotiator).
//! * A client presents its key; the server accepts the handshake only if the trust
//!   file knows that key. The connection then authenticates the client's requests,
//!   unsigned ([`crate::sign`]); a request that does carry a signature
//!   ([`crate::Auth`]) must be signed by that same key.
//!
//! rustls with its `ring` provider; TLS 1.3 only; session resumption is off, so every
//! connection's identities come from a full handshake.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms, ring};
use rustls::pki_types::{
    CertificateDer, PrivatePkcs8KeyDer, ServerName, SubjectPublicKeyInfoDer, UnixTime,
};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::sign::CertifiedKey;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, DistinguishedName, ServerConfig,
    SignatureScheme,
};

use crate::key::{Keypair, PublicKey};
use crate::trust::{Role, TrustFile};

/// The roles a client accepts from a server when the call site does not say: the
/// daemons'.
pub const DAEMON_ROLES: &[Role] = &[Role::Schedd, Role::Host, Role::Negotiator];

const SPKI_PREFIX: [u8; 12] =
    [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
const PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// The DER SubjectPublicKeyInfo of an ed25519 key: what a raw-public-key TLS peer
/// sends in place of a certificate.
pub fn spki(key: &PublicKey) -> Vec<u8> {
    let mut v = SPKI_PREFIX.to_vec();
    v.extend_from_slice(key.as_bytes());
    v
}

/// The ed25519 key of a DER SubjectPublicKeyInfo, if it is one.
pub fn key_of_spki(der: &[u8]) -> Option<PublicKey> {
    let raw = der.strip_prefix(&SPKI_PREFIX[..])?;
    if raw.len() != 32 {
        return None;
    }
    PublicKey::from_bytes(raw).ok()
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

fn certified_key(keypair: &Keypair) -> Result<Arc<CertifiedKey>, rustls::Error> {
    let mut der = PKCS8_PREFIX.to_vec();
    der.extend_from_slice(&keypair.seed());
    let signing = ring::sign::any_eddsa_type(&PrivatePkcs8KeyDer::from(der))?;
    Ok(Arc::new(CertifiedKey::new(vec![CertificateDer::from(spki(&keypair.public()))], signing)))
}

fn algorithms() -> WebPkiSupportedAlgorithms {
    ring::default_provider().signature_verification_algorithms
}

fn refuse(why: String) -> rustls::Error {
    rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(Arc::new(
        Refused(why),
    ))))
}

/// Why a peer's key was refused (the text a person reads in the connection error).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

fn verify_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    rustls::crypto::verify_tls13_signature_with_raw_key(
        message,
        &SubjectPublicKeyInfoDer::from(cert.as_ref()),
        dss,
        &algorithms(),
    )
}

/// Where a verifier reads the trust file: a fixed one, or a function giving the one in
/// force (a daemon's [`crate::Verifier`], whose trust file can be replaced).
#[derive(Clone)]
pub enum TrustSource {
    /// This trust file.
    Fixed(Arc<TrustFile>),
    /// The trust file this function returns at each handshake.
    Live(Arc<dyn Fn() -> Arc<TrustFile> + Send + Sync>),
}

impl TrustSource {
    fn get(&self) -> Arc<TrustFile> {
        match self {
            TrustSource::Fixed(t) => t.clone(),
            TrustSource::Live(f) => f(),
        }
    }
}

impl std::fmt::Debug for TrustSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrustSource::Fixed(t) => write!(f, "Fixed({} keys)", t.len()),
            TrustSource::Live(_) => f.write_str("Live"),
        }
    }
}

#[derive(Debug)]
struct ServerKeyCheck {
    trust: Arc<TrustFile>,
    roles: Vec<Role>,
}

impl ServerCertVerifier for ServerKeyCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !intermediates.is_empty() {
            return Err(refuse("the server sent a certificate chain, not one raw key".into()));
        }
        let key = key_of_spki(end_entity)
            .ok_or_else(|| refuse("the server's raw public key is not an ed25519 key".into()))?;
        let roles: Vec<&str> = self.roles.iter().map(|r| r.as_str()).collect();
        match self.trust.lookup(&key) {
            Some(id) if id.role.is_allowed(&self.roles) => Ok(ServerCertVerified::assertion()),
            Some(id) => Err(refuse(format!(
                "the server's key {key} belongs to {} (role {}), not to a {}",
                id.name,
                id.role,
                roles.join(" or ")
            ))),
            None => Err(refuse(format!(
                "the server's key {key} is not in the pool's trust file (expected a {})",
                roles.join(" or ")
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not used by andes".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }

    fn requires_raw_public_keys(&self) -> bool {
        true
    }
}

#[derive(Debug)]
struct ClientKeyCheck {
    trust: TrustSource,
}

impl ClientCertVerifier for ClientKeyCheck {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if !intermediates.is_empty() {
            return Err(refuse("the client sent a certificate chain, not one raw key".into()));
        }
        let key = key_of_spki(end_entity)
            .ok_or_else(|| refuse("the client's raw public key is not an ed25519 key".into()))?;
        if self.trust.get().lookup(&key).is_none() {
            return Err(refuse(format!("the client's key {key} is not in the pool's trust file")));
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not used by andes".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }

    fn requires_raw_public_keys(&self) -> bool {
        true
    }
}

/// A server's TLS configuration: presents `keypair` as its raw public key and requires
/// a client key that `trust` knows.
pub fn server_config(
    keypair: &Keypair,
    trust: TrustSource,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(Arc::new(ClientKeyCheck { trust }))
        .with_cert_resolver(Arc::new(rustls::server::AlwaysResolvesServerRawPublicKeys::new(
            certified_key(keypair)?,
        )));
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

/// A client's TLS configuration: presents `keypair` as its raw public key and accepts a
/// server whose key `trust` gives one of `roles`.
pub fn client_config(
    keypair: &Keypair,
    trust: Arc<TrustFile>,
    roles: &[Role],
) -> Result<Arc<ClientConfig>, rustls::Error> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ServerKeyCheck { trust, roles: roles.to_vec() }))
        .with_client_cert_resolver(Arc::new(
            rustls::client::AlwaysResolvesClientRawPublicKeys::new(certified_key(keypair)?),
        ));
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}

/// The peer's key of an established TLS connection.
pub fn peer_key(conn: &rustls::CommonState) -> Option<PublicKey> {
    conn.peer_certificates().and_then(|c| c.first()).and_then(|c| key_of_spki(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spki_round_trip_and_refusals() {
        let k = Keypair::from_seed("a", [7; 32]).unwrap();
        assert_eq!(key_of_spki(&spki(&k.public())), Some(k.public()));
        let mut bad = spki(&k.public());
        bad[9] = 0x22;
        assert_eq!(key_of_spki(&bad), None);
        assert_eq!(key_of_spki(&spki(&k.public())[..40]), None);
        assert_eq!(key_of_spki(b""), None);
    }

    #[test]
    fn the_signing_key_matches_the_andes_key() {
        let k = Keypair::from_seed("a", [9; 32]).unwrap();
        let ck = certified_key(&k).unwrap();
        let spki_der = ck.key.public_key().expect("ed25519 keys know their public half");
        assert_eq!(key_of_spki(spki_der.as_ref()), Some(k.public()));
    }
}
