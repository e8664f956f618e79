//! What a connection proved: the keys of its TLS handshake and its addresses,
//! which [`crate::Server`] attaches to every request and [`crate::Auth`] checks
//! each request's signature against.

use std::net::SocketAddr;

use crate::key::PublicKey;
use crate::sign::Destination;

/// What a request's connection proved, attached to every request [`crate::Server`] serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// The client's key, proven by the TLS handshake (`None` over plain HTTP).
    pub peer_key: Option<PublicKey>,
    /// This daemon's key, presented in the TLS handshake (`None` over plain HTTP).
    pub local_key: Option<PublicKey>,
    /// The address the connection came to.
    pub local_addr: SocketAddr,
    /// The client's address.
    pub remote_addr: SocketAddr,
}

impl ConnectionInfo {
    /// The destination this daemon accepts for a request signed for `signed`: over TLS
    /// its own key; over plain HTTP `signed` itself if it names a loopback host and
    /// this daemon's port, else this daemon's address (see [`crate::sign`]).
    pub fn accepts(&self, signed: &Destination) -> Destination {
        if let Some(k) = &self.local_key {
            return Destination::Key(*k);
        }
        match signed {
            Destination::Addr(a) if is_loopback_authority(a, self.local_addr.port()) => {
                signed.clone()
            }
            _ => Destination::Addr(self.local_addr.to_string()),
        }
    }
}

/// Whether `authority` (`HOST:PORT`) names a loopback host and the port `port`.
pub fn is_loopback_authority(authority: &str, port: u16) -> bool {
    let Some((host, p)) = authority.rsplit_once(':') else { return false };
    if p.parse::<u16>().ok() != Some(port) {
        return false;
    }
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
