//! `$$()` expansion of the job ad against the slot ad, as HTCondor's shadow
//! does at activation.

use crate::attrs::str_attr;
use andes_protocol::pool::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};

use classad::{ClassAd, Value};

use crate::job::JobId;
use crate::quarantine::Journal;
use crate::queue::CLAIM_ID_ATTR;

/// The ad the host gets for job `id`: `$$()` expanded against the slot
/// (an evaluation of the job's ad, recorded in `journal` while it runs),
/// the streams renamed to their sandbox names, the claim id left out.
pub(crate) fn host_ad(journal: &Journal, id: JobId, job: &ClassAd, slot: &ClassAd) -> ClassAd {
    let mut ad = if job.iter().any(|(_, e)| mentions_dollar_dollar(e)) {
        let _evaluating = journal.enter(id, "$$() references, against its slot");
        crate::quarantine::fault_point("dollar", job);
        expand_dollar_dollar(job, slot)
    } else {
        job.clone()
    };
    for (attr, name) in [
        (classad::name!("In"), STDIN_NAME),
        (classad::name!("Out"), STDOUT_NAME),
        (classad::name!("Err"), STDERR_NAME),
    ] {
        if let Some(p) = str_attr(&ad, attr)
            && p != "/dev/null"
        {
            ad.insert_value(attr, name);
        }
    }
    ad.remove(classad::name!(CLAIM_ID_ATTR));
    ad
}

/// `$$(Attr)`, `$$(Attr:default)` and `$$([expr])` in the job ad's
/// expressions, replaced by the slot ad's values (strings unquoted), as
/// HTCondor's shadow does at activation. A reference the slot cannot resolve
/// is left as it was and the job ad gets no value for it.
pub fn expand_dollar_dollar(job: &ClassAd, slot: &ClassAd) -> ClassAd {
    let mut out = job.clone();
    for (name, expr) in job.iter() {
        // `$$(` is not ClassAd syntax: it can only stand inside a string.
        if !mentions_dollar_dollar(expr) {
            continue;
        }
        let expanded = expand_text(&expr.to_string(), job, slot);
        if let Ok(e) = classad::parse_expr(&expanded) {
            out.insert(name.clone(), e);
        }
    }
    out
}

/// Whether a string literal in `expr` (or in a record within it) holds a
/// `$$(` reference.
pub(crate) fn mentions_dollar_dollar(expr: &classad::Expr) -> bool {
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match e {
            classad::Expr::Lit(Value::Str(s)) if s.contains("$$(") => return true,
            classad::Expr::Record(ad) => stack.extend(ad.iter().map(|(_, x)| x)),
            _ => e.push_operands(&mut stack),
        }
    }
    false
}

pub(crate) fn expand_text(text: &str, job: &ClassAd, slot: &ClassAd) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // Each reference is expanded once; the bound guards against nothing more
    // than a huge ad.
    while let Some(at) = rest.find("$$(") {
        out.push_str(&rest[..at]);
        let body_start = at + 3;
        let Some(close) = matching_paren(&rest[body_start..]) else {
            out.push_str(&rest[at..]);
            return out;
        };
        let body = &rest[body_start..body_start + close];
        let value = if let Some(expr) = body.strip_prefix('[').and_then(|b| b.strip_suffix(']')) {
            classad::parse_expr(expr).ok().map(|e| {
                let mut ev = classad::Evaluator::new();
                ev.eval(&e, Some(slot), Some(job))
            })
        } else {
            let (attr, default) = match body.split_once(':') {
                Some((a, d)) => (a.trim(), Some(d)),
                None => (body.trim(), None),
            };
            match slot.get(attr) {
                Some(_) => Some(slot.eval_attr(attr)),
                None => default.map(Value::string),
            }
        };
        match value {
            Some(Value::Str(s)) => out.push_str(&s),
            Some(v) if !matches!(v, Value::Undefined | Value::Error) => {
                out.push_str(&v.to_string())
            }
            _ => out.push_str(&rest[at..body_start + close + 1]),
        }
        rest = &rest[body_start + close + 1..];
    }
    out.push_str(rest);
    out
}

pub(crate) fn matching_paren(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(i),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}
