//! What the queue reads from a job's ad on its own: the uploads it names,
//! who uploaded them, whether it was submitted held, its hold.

use crate::attrs::ROUTED_BY;

use classad::{ClassAd, Expr, Value};

use crate::policy::HoldInfo;
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// The digests of the uploads `ad` names: its `CmdDigest` and the files of
/// its `SpooledInput`. Literal strings only (both are checked at submit and
/// frozen after; an expression names nothing).
pub fn job_uploads(ad: &ClassAd) -> Vec<String> {
    uploads_named(|a| ad.get(a))
}

/// [`job_uploads`] of a job whose proc ad `proc` overrides its cluster ad.
pub(crate) fn proc_uploads(cluster: &ClassAd, proc: &ClassAd) -> Vec<String> {
    uploads_named(|a| proc.get(a).or_else(|| cluster.get(a)))
}

pub(crate) fn uploads_named<'a>(
    get: impl Fn(&classad::AttrName) -> Option<&'a Expr>,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Expr::Lit(Value::Str(d))) = get(classad::name!("CmdDigest")) {
        out.push(d.to_string());
    }
    if let Some(Expr::Lit(Value::Str(list))) = get(classad::name!(SPOOLED_INPUT)) {
        out.extend(spooled_inputs(list).into_iter().map(|(_, d)| d));
    }
    out.sort();
    out.dedup();
    out
}

/// Whose uploads a job (its cluster ad) may name: those of the schedd that
/// routed it here ([`ROUTED_BY`]), else its owner's.
pub fn uploader_of(cluster_ad: &ClassAd) -> String {
    static UPLOADERS: classad::Names<2> = classad::Names::new([ROUTED_BY, "Owner"]);
    for a in UPLOADERS.get() {
        if let Some(Expr::Lit(Value::Str(s))) = cluster_ad.get(a) {
            return s.to_string();
        }
    }
    String::new()
}

/// True when a submitted `JobStatus` asks for the job to start held (`hold = true`).
pub(crate) fn submitted_held(e: Option<&Expr>) -> bool {
    matches!(e.and_then(|e| e.as_literal()), Some(Value::Int(5)))
}

pub(crate) fn hold_info_of(ad: &ClassAd) -> HoldInfo {
    HoldInfo {
        reason: match ad.eval_attr(classad::name!("HoldReason")) {
            Value::Str(s) => s.to_string(),
            _ => String::new(),
        },
        code: match ad.eval_attr(classad::name!("HoldReasonCode")) {
            Value::Int(c) => c,
            _ => 0,
        },
        subcode: match ad.eval_attr(classad::name!("HoldReasonSubCode")) {
            Value::Int(c) => c,
            _ => 0,
        },
    }
}
