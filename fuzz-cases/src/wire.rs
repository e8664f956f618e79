//! Decodes arbitrary JSON as each request and reply body that crosses the
//! network, the way a daemon or the `andes` command decodes it
//! (`andes_protocol::decode_json`). Nothing may panic; whatever decodes must
//! re-encode to JSON that decodes again and re-encodes to the same bytes.
//! The ClassAds a body carries (ads and constraints, as text) go through the
//! ClassAd parser, whose output must unparse and parse back equal; file names
//! go through `safe_relative_name`, base64 file contents through the body
//! decoder itself, and a snapshot's bytes through `andes_snapshot::inspect`.
//!
//! Input: one byte choosing the type (its value modulo the number of types,
//! in the order of `TYPES` below), then the JSON body.

use andes_central::collector::api as collector_api;
use andes_host::api as host_api;
use andes_job::api as schedd_api;
use andes_job::api::Targets;
use andes_protocol::pool::{self, FileData, SnapshotData};
use andes_protocol::{ErrorBody, decode_json};
use andes_schedd::router::service as router_api;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A ClassAd carried as text: what parses must unparse to text that parses
/// back to an equal ad.
fn ad(text: &str) {
    if let Ok(ad) = classad::parse_ad(text) {
        let back = ad.to_string();
        let again = classad::parse_ad(&back)
            .unwrap_or_else(|e| panic!("unparse of a carried ad does not parse: {back:?}: {e}"));
        assert_eq!(again, ad, "carried ad round trip through {back:?}");
    }
}

/// A constraint carried as text.
fn expr(text: &str) {
    if let Ok(e) = classad::parse_expr(text) {
        let back = e.to_string();
        let again = classad::parse_expr(&back).unwrap_or_else(|err| {
            panic!("unparse of a constraint does not parse: {back:?}: {err}")
        });
        assert_eq!(again, e, "constraint round trip through {back:?}");
    }
}

fn files(files: &[FileData]) {
    for f in files {
        let _ = pool::safe_relative_name(&f.name);
    }
}

fn snapshot(s: &SnapshotData) {
    let _ = andes_snapshot::inspect(&s.bytes);
    files(&s.blobs);
}

fn targets(t: &Targets) {
    if let Some(c) = &t.constraint {
        expr(c);
    }
    for id in &t.ids {
        let shown = id.to_string();
        assert_eq!(shown.parse().as_ref(), Ok(id), "job selector {shown}");
    }
}

/// Decodes `body` as `T`; what decodes re-encodes and decodes again to the same
/// encoding. Returns the value for the carried-content checks.
fn round_trip<T: Serialize + DeserializeOwned>(body: &[u8]) -> Option<T> {
    let first: T = match decode_json(body) {
        Ok(v) => v,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return None;
        }
    };
    let json = serde_json::to_vec(&first).expect("a decoded body encodes");
    let second: T = decode_json(&json).unwrap_or_else(|e| {
        panic!("the encoding of a decoded {} does not decode: {e}", std::any::type_name::<T>())
    });
    let again = serde_json::to_vec(&second).expect("a decoded body encodes");
    assert_eq!(
        String::from_utf8_lossy(&json),
        String::from_utf8_lossy(&again),
        "{} does not round-trip",
        std::any::type_name::<T>()
    );
    Some(second)
}

fn plain<T: Serialize + DeserializeOwned>(body: &[u8]) {
    let _ = round_trip::<T>(body);
}

/// How one body type is checked.
type Check = fn(&[u8]);

/// Every body type, with what it carries. Keep the order: seeds name types by
/// their place here (`fuzz/seed_corpus.py`).
const TYPES: &[(&str, Check)] = &[
    // andes-protocol: the pool's messages (host, schedd, negotiator, collector).
    ("pool::FileData", |b| {
        if let Some(f) = round_trip::<FileData>(b) {
            files(std::slice::from_ref(&f));
        }
    }),
    ("pool::MatchNotice", plain::<pool::MatchNotice>),
    ("pool::ClaimRequest", |b| {
        if let Some(r) = round_trip::<pool::ClaimRequest>(b) {
            ad(&r.ad);
        }
    }),
    ("pool::ClaimReply", |b| {
        if let Some(r) = round_trip::<pool::ClaimReply>(b) {
            r.slot_ad.as_deref().map(ad);
        }
    }),
    ("pool::ActivateRequest", |b| {
        if let Some(r) = round_trip::<pool::ActivateRequest>(b) {
            ad(&r.job);
            files(&r.inputs);
            r.snapshot.as_ref().map(snapshot);
            for q in &r.more {
                ad(&q.job);
                files(&q.inputs);
            }
        }
    }),
    ("pool::WaitRequest", plain::<pool::WaitRequest>),
    ("pool::JobReport", |b| {
        if let Some(r) = round_trip::<pool::JobReport>(b) {
            ad(&r.update);
            r.ending.as_deref().map(ad);
            files(&r.outputs);
            r.snapshot.as_ref().map(snapshot);
            for e in &r.ended {
                ad(&e.update);
                ad(&e.ending);
                files(&e.outputs);
            }
        }
    }),
    ("pool::EditRequest", |b| {
        if let Some(r) = round_trip::<pool::EditRequest>(b) {
            ad(&r.attrs);
        }
    }),
    ("pool::WithdrawRequest", plain::<pool::WithdrawRequest>),
    ("pool::WithdrawReply", plain::<pool::WithdrawReply>),
    ("pool::ReleaseRequest", plain::<pool::ReleaseRequest>),
    ("pool::DemandRequest", plain::<pool::DemandRequest>),
    ("pool::DemandReply", |b| {
        if let Some(r) = round_trip::<pool::DemandReply>(b) {
            r.groups.iter().for_each(|g| ad(&g.ad));
        }
    }),
    ("pool::MatchesRequest", |b| {
        if let Some(r) = round_trip::<pool::MatchesRequest>(b) {
            r.matches.iter().for_each(|m| ad(&m.slot_ad));
        }
    }),
    ("pool::MatchesReply", plain::<pool::MatchesReply>),
    ("pool::CollectorUpdate", |b| {
        if let Some(r) = round_trip::<pool::CollectorUpdate>(b) {
            ad(&r.ad);
            r.private.as_deref().map(ad);
        }
    }),
    ("pool::CollectorInvalidate", plain::<pool::CollectorInvalidate>),
    ("pool::CollectorQuery", |b| {
        if let Some(r) = round_trip::<pool::CollectorQuery>(b) {
            r.constraint.as_deref().map(expr);
        }
    }),
    ("pool::CollectorQueryReply", |b| {
        if let Some(r) = round_trip::<pool::CollectorQueryReply>(b) {
            r.ads.iter().for_each(|a| ad(a));
        }
    }),
    ("ErrorBody", plain::<ErrorBody>),
    // andes-schedd: the schedd's API.
    ("schedd::SubmitRequest", |b| {
        if let Some(r) = round_trip::<schedd_api::SubmitRequest>(b) {
            ad(&r.cluster_ad);
            r.procs.iter().for_each(|a| ad(a));
        }
    }),
    ("schedd::NewClusterReply", plain::<schedd_api::NewClusterReply>),
    ("schedd::ClustersRequest", plain::<schedd_api::ClustersRequest>),
    ("schedd::ClustersReply", plain::<schedd_api::ClustersReply>),
    ("schedd::SubmitReply", plain::<schedd_api::SubmitReply>),
    ("schedd::QueryRequest", |b| {
        if let Some(r) = round_trip::<schedd_api::QueryRequest>(b) {
            targets(&r.targets);
        }
    }),
    ("schedd::QueryReply", |b| {
        if let Some(r) = round_trip::<schedd_api::QueryReply>(b) {
            r.ads.iter().for_each(|a| ad(a));
        }
    }),
    ("schedd::SummaryRequest", plain::<schedd_api::SummaryRequest>),
    ("schedd::SummaryReply", plain::<schedd_api::SummaryReply>),
    ("schedd::ChangeRequest", |b| {
        if let Some(r) = round_trip::<schedd_api::ChangeRequest>(b) {
            targets(&r.targets);
            if let andes_job::api::Change::Edit { expr: e, .. } = &r.change {
                expr(e);
            }
        }
    }),
    ("schedd::ChangeReport", plain::<schedd_api::ChangeReport>),
    ("schedd::HistoryRequest", |b| {
        if let Some(r) = round_trip::<schedd_api::HistoryRequest>(b) {
            r.constraint.as_deref().map(expr);
        }
    }),
    // The collector's replies (its requests are the pool's above).
    ("collector::UpdateReply", plain::<collector_api::UpdateReply>),
    ("collector::InvalidateReply", plain::<collector_api::InvalidateReply>),
    // The negotiator's and the job router's API.
    ("central::UserPrioReply", plain::<andes_central::manager::UserPrioReply>),
    ("central::SetFactorRequest", plain::<andes_central::manager::SetFactorRequest>),
    ("router::RouterQReply", |b| {
        if let Some(r) = round_trip::<router_api::RouterQReply>(b) {
            r.jobs.iter().for_each(|a| ad(a));
        }
    }),
    ("router::RouterHistoryRequest", plain::<router_api::RouterHistoryRequest>),
    ("router::history reply", plain::<Vec<router_api::HistoryRecord>>),
    // andes-host: the host daemon's admin API.
    ("host::StatusReply", |b| {
        if let Some(r) = round_trip::<host_api::StatusReply>(b) {
            r.ads.iter().for_each(|a| ad(a));
        }
    }),
    ("host::VacateRequest", plain::<host_api::VacateRequest>),
    ("host::OffRequest", plain::<host_api::OffRequest>),
    ("host::SetAttrRequest", |b| {
        if let Some(r) = round_trip::<host_api::SetAttrRequest>(b) {
            r.value.as_deref().map(expr);
        }
    }),
    ("host::CommandReply", plain::<host_api::CommandReply>),
    // Claim leases, collector incarnations and spooled transfer.
    ("pool::AliveRequest", plain::<pool::AliveRequest>),
    ("pool::AliveReply", plain::<pool::AliveReply>),
    ("pool::CollectorUpdateReply", plain::<pool::CollectorUpdateReply>),
    ("schedd::TransferRequest", plain::<schedd_api::TransferRequest>),
    ("schedd::TransferReply", |b| {
        if let Some(r) = round_trip::<schedd_api::TransferReply>(b) {
            ad(&r.ad);
            files(&r.files);
        }
    }),
    ("schedd::TransferDoneRequest", plain::<schedd_api::TransferDoneRequest>),
];

/// Runs one input through the target's checks; panics on a failure.
pub fn run(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else { return };
    let (_, check) = TYPES[usize::from(which) % TYPES.len()];
    check(body);
}
