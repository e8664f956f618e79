//! Old ClassAd syntax as the log holds it: the literal attributes of event
//! 028 (`Name = value`, reals as C's `%.16G`, strings with only `"` escaped)
//! and the `Assigned` cells of the resources table, written and read back.

use classad::{Expr, Value};

use super::one_line;

/// `%.16G` as C prints it, with `.0` appended when the result looks like an
/// integer: how HTCondor's old-syntax unparser writes a real.
pub(super) fn old_real(r: f64) -> String {
    if r == 0.0 {
        return if r.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    if r.is_nan() {
        return "real(\"NaN\")".to_string();
    }
    if r.is_infinite() {
        return if r > 0.0 { "real(\"INF\")" } else { "real(\"-INF\")" }.to_string();
    }
    // The decimal exponent after rounding to 16 significant digits.
    let e = format!("{r:.15e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut s = if !(-4..16).contains(&exp) {
        let mant = strip_zeros(mant);
        format!("{mant}E{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let decimals = usize::try_from(15 - exp).unwrap_or(0);
        strip_zeros(&format!("{r:.decimals$}")).to_string()
    };
    if !s.contains(['.', 'E', 'e']) {
        s.push_str(".0");
    }
    s
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { s }
}

/// A string in old ClassAd syntax: only `"` is escaped (as `\"`); a
/// backslash is written as it is, as HTCondor's old-syntax unparser does.
pub(super) fn old_string(out: &mut String, s: &str) {
    out.push('"');
    for c in one_line(s).chars() {
        if c == '"' {
            out.push_str("\\\"");
        } else {
            out.push(c);
        }
    }
    out.push('"');
}

/// The value of a 028 attribute in old syntax, or None when HTCondor's writer
/// would not write it (not a literal boolean, integer, real or string).
pub(super) fn old_value(e: &Expr) -> Option<String> {
    let mut out = String::new();
    match e.unparen().as_literal()? {
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Real(r) => out.push_str(&old_real(*r)),
        Value::Str(s) => old_string(&mut out, s),
        _ => return None,
    }
    Some(out)
}

/// The value of an old-syntax string literal (`"a\"b"` → `a"b`); other text as it is.
pub(super) fn unquote_old(s: &str) -> String {
    match s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) => inner.replace("\\\"", "\""),
        None => s.to_string(),
    }
}

/// Rewrites the string literals of an old-syntax expression (where only a
/// `\"` followed by more text is an escape) into new syntax, which the
/// classad crate parses.
pub(super) fn old_to_new_syntax(rhs: &str) -> String {
    let mut out = String::with_capacity(rhs.len() + 8);
    let mut rest = rhs;
    while let Some(q) = rest.find('"') {
        out.push_str(&rest[..q]);
        let mut value = String::new();
        let mut s = &rest[q + 1..];
        loop {
            match s.find('"') {
                None => {
                    // Unterminated: leave it for the parser to report.
                    out.push('"');
                    out.push_str(&rest[q + 1..]);
                    return out;
                }
                Some(e) => {
                    let (chunk, after) = (&s[..e], &s[e + 1..]);
                    if chunk.ends_with('\\') && !after.is_empty() {
                        value.push_str(&chunk[..chunk.len() - 1]);
                        value.push('"');
                        s = after;
                    } else {
                        value.push_str(chunk);
                        s = after;
                        break;
                    }
                }
            }
        }
        classad::value::write_quoted(&mut out, &value);
        rest = s;
    }
    out.push_str(rest);
    out
}
