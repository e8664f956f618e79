//! The schedd's connections to a host, and a claim as its shadows know it.

use andes_protocol::{Client, ClientError, ClientErrorKind};
use classad::ClassAd;

/// The claim a shadow runs on.
#[derive(Clone)]
pub(crate) struct ClaimCtx {
    pub(crate) claim_id: String,
    pub(crate) slot_ad: ClassAd,
    pub(crate) addr: String,
}

/// Clients for one host: short calls and long polls.
#[derive(Clone)]
pub(crate) struct Link {
    pub(crate) short: Client,
    pub(crate) long: Client,
}

pub(crate) fn not_found(e: &ClientError) -> bool {
    matches!(&e.kind, ClientErrorKind::Status { status, .. }
        if status.as_u16() == 404 || status.as_u16() == 403)
}

pub(crate) fn status_reason(e: &ClientError) -> Option<(u16, &str)> {
    match &e.kind {
        ClientErrorKind::Status { status, reason } => Some((status.as_u16(), reason.as_str())),
        _ => None,
    }
}
