//! Printing expressions, ads and values back in canonical ClassAd syntax,
//! as HTCondor's unparser does. Every printed form parses back to an equal
//! expression: parentheses are inserted where a hand-built tree needs them,
//! and reals print with as many digits as it takes to read back exactly
//! (new syntax: HTCondor's `%.15E`; old syntax, as `condor_q -long` and
//! classad2's `printOld` print: its `%.16G`).

use crate::ast::{AttrName, ClassAd, Expr, UnOp};
use crate::value::{Value, format_real_g16, write_quoted};

/// Which of HTCondor's two printed forms: new syntax (reals as `%.15E`, or
/// as many digits as read back exactly) or old syntax (reals as `%.16G`, as
/// `condor_q -long` and classad2's `printOld` print them).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Syntax {
    New,
    Old,
}

/// Precedence of the ternary operator and of binary, unary, postfix and primary forms.
const P_TERNARY: u8 = 0;
const P_UNARY: u8 = 11;
const P_POSTFIX: u8 = 12;
const P_PRIMARY: u8 = 13;

fn prec(e: &Expr) -> u8 {
    match e {
        Expr::Cond(..) | Expr::Elvis(..) => P_TERNARY,
        Expr::Binary(op, ..) => op.precedence(),
        Expr::Unary(..) => P_UNARY,
        // A negative number literal reads back as a folded unary minus.
        Expr::Lit(Value::Int(i)) if *i < 0 => P_UNARY,
        Expr::Lit(Value::Real(r)) if r.is_sign_negative() && !r.is_nan() => P_UNARY,
        Expr::Select(..) | Expr::Index(..) => P_POSTFIX,
        _ => P_PRIMARY,
    }
}

/// A real as the unparser prints it: `%.15E` like HTCondor when that reads
/// back exactly, else with one more digit so that nothing is lost.
pub fn format_real_exact(r: f64) -> String {
    let mut s = String::with_capacity(24);
    real_exact_to(&mut s, r);
    s
}

/// Appends [`format_real_exact`]'s text of `r`.
fn real_exact_to(out: &mut String, r: f64) {
    if !r.is_finite() || r == 0.0 {
        return out.push_str(&crate::value::format_real(r));
    }
    match crate::value::shortest_digits(r) {
        // Its 16 digits hold the shortest that read back: exact.
        Some((digits, e)) => crate::value::e15_of_digits(out, r < 0.0, digits.as_bytes(), e),
        None => out.push_str(&format_real_exact_slow(r)),
    }
}

/// [`format_real_exact`] the slow way, for any finite non-zero real:
/// `%.15E` exactly rounded, read back, and `%.16E` when it does not.
pub(crate) fn format_real_exact_slow(r: f64) -> String {
    let s = crate::value::format_e15_exact(r);
    if s.parse::<f64>().ok() == Some(r) {
        return s;
    }
    let s = format!("{r:.16E}");
    let (mant, exp) = s.split_once('E').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    format!("{mant}E{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
}

/// Appends the canonical text of a value.
pub fn value_to(out: &mut String, v: &Value) {
    value_in(out, v, Syntax::New)
}

fn value_in(out: &mut String, v: &Value, syntax: Syntax) {
    match v {
        Value::Undefined => out.push_str("undefined"),
        Value::Error => out.push_str("error"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(itoa::Buffer::new().format(*i)),
        Value::Real(r) if syntax == Syntax::Old => out.push_str(&format_real_g16(*r)),
        Value::Real(r) => real_exact_to(out, *r),
        Value::Str(s) => write_quoted(out, s),
        Value::List(items) => {
            out.push_str("{ ");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                value_in(out, item, syntax);
            }
            out.push_str(" }");
        }
        Value::Ad(ad) => ad_in(out, ad, syntax),
    }
}

/// Appends an attribute name, quoted when it needs to be.
pub fn name_to(out: &mut String, name: &AttrName) {
    if name.needs_quotes() {
        out.push('\'');
        for b in name.as_str().bytes() {
            match b {
                b'\'' => out.push_str("\\'"),
                b'\\' => out.push_str("\\\\"),
                b'\n' => out.push_str("\\n"),
                b'\t' => out.push_str("\\t"),
                0x20..=0x7e => out.push(b as char),
                _ => out.push_str(&format!("\\{b:03o}")),
            }
        }
        out.push('\'');
    } else {
        out.push_str(name.as_str());
    }
}

/// Appends a ClassAd in new syntax on one line: `[ a = 1; b = 2 ]`.
pub fn ad_to(out: &mut String, ad: &ClassAd) {
    ad_in(out, ad, Syntax::New)
}

fn ad_in(out: &mut String, ad: &ClassAd, syntax: Syntax) {
    out.push_str("[ ");
    for (i, (k, v)) in ad.iter().enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        name_to(out, k);
        out.push_str(" = ");
        expr_in(out, v, syntax);
    }
    out.push_str(" ]");
}

/// Appends a ClassAd laid out as HTCondor's pretty printer does (what
/// classad2's `str(ad)` gives): each attribute on a line of its own, `; `
/// after all but the last, and lists and nested ads opened on lines of
/// their own, `indent` being the column the enclosing attribute starts at.
pub fn pretty_ad_to(out: &mut String, ad: &ClassAd, indent: usize) {
    out.push('\n');
    spaces(out, indent + 4);
    out.push_str("[\n");
    for (i, (k, v)) in ad.iter().enumerate() {
        if i > 0 {
            out.push_str("; \n");
        }
        spaces(out, indent + 8);
        name_to(out, k);
        out.push_str(" = ");
        pretty_expr_to(out, v, indent + 8);
    }
    if !ad.is_empty() {
        out.push('\n');
    }
    spaces(out, indent + 4);
    out.push(']');
}

fn pretty_expr_to(out: &mut String, e: &Expr, indent: usize) {
    match e {
        Expr::Record(ad) => pretty_ad_to(out, ad, indent),
        Expr::List(items) => stacker::maybe_grow(64 * 1024, 1024 * 1024, || {
            out.push('\n');
            spaces(out, indent + 3);
            out.push_str("{\n");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                spaces(out, indent + 6);
                pretty_expr_to(out, item, indent + 6);
            }
            if !items.is_empty() {
                out.push('\n');
            }
            spaces(out, indent + 3);
            out.push('}');
        }),
        _ => expr_to(out, e),
    }
}

/// Appends `n` spaces (the printers' indentation).
pub(crate) fn spaces(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// Appends a ClassAd in old syntax: `Name = Expr`, one per line.
pub fn old_ad_to(out: &mut String, ad: &ClassAd) {
    for (k, v) in ad.iter() {
        name_to(out, k);
        out.push_str(" = ");
        expr_in(out, v, Syntax::Old);
        out.push('\n');
    }
}

/// Appends, in old syntax as [`old_ad_to`] does, the ad that `layers`
/// make when each is bound over the ones before it (later wins): the same
/// text as copying the first and updating the copy with the others
/// ([`ClassAd::update`], which keeps a rebound attribute in its place),
/// without the copy.
pub fn old_overlaid_to(out: &mut String, layers: &[&ClassAd]) {
    overlaid(layers, |k, v| {
        name_to(out, k);
        out.push_str(" = ");
        expr_in(out, v, Syntax::Old);
        out.push('\n');
    });
}

/// [`old_overlaid_to`] in new syntax on one line, as [`ad_to`] prints the
/// updated copy.
pub fn ad_overlaid_to(out: &mut String, layers: &[&ClassAd]) {
    out.push_str("[ ");
    let mut first = true;
    overlaid(layers, |k, v| {
        if !first {
            out.push_str("; ");
        }
        first = false;
        name_to(out, k);
        out.push_str(" = ");
        expr_in(out, v, Syntax::New);
    });
    out.push_str(" ]");
}

/// Each attribute of `layers` bound over one another, in the updated
/// copy's order, with its last binding.
fn overlaid<'a>(layers: &[&'a ClassAd], mut each: impl FnMut(&'a AttrName, &'a Expr)) {
    for (i, ad) in layers.iter().enumerate() {
        for (k, v) in ad.iter() {
            if layers[..i].iter().any(|a| a.lookup(k).is_some()) {
                continue; // printed in its place, with its last value
            }
            each(k, layers[i + 1..].iter().rev().find_map(|a| a.lookup(k)).unwrap_or(v));
        }
    }
}

/// Appends the canonical text of an expression.
pub fn expr_to(out: &mut String, e: &Expr) {
    expr_in(out, e, Syntax::New)
}

fn expr_in(out: &mut String, e: &Expr, syntax: Syntax) {
    stacker::maybe_grow(64 * 1024, 1024 * 1024, || expr_prec(out, e, P_TERNARY, syntax))
}

fn expr_prec(out: &mut String, e: &Expr, need: u8, syntax: Syntax) {
    let expr_to = |out: &mut String, e: &Expr| expr_in(out, e, syntax);
    let expr_sub = |out: &mut String, e: &Expr, need: u8| expr_sub(out, e, need, syntax);
    if prec(e) < need {
        out.push('(');
        expr_to(out, e);
        out.push(')');
        return;
    }
    match e {
        Expr::Lit(v) => value_in(out, v, syntax),
        Expr::Attr { name, absolute } => {
            if *absolute {
                out.push('.');
            }
            name_to(out, name);
        }
        Expr::Select(base, name) => {
            expr_sub(out, base, P_POSTFIX);
            out.push('.');
            name_to(out, name);
        }
        Expr::Index(base, idx) => {
            expr_sub(out, base, P_POSTFIX);
            out.push('[');
            expr_to(out, idx);
            out.push(']');
        }
        Expr::Unary(op, x) => {
            out.push_str(match op {
                UnOp::Neg => " -",
                UnOp::Plus => " +",
                UnOp::Not => " !",
                UnOp::BitNot => " ~",
            });
            // `-3` would read back as a negative literal, `--x` as `-(-x)`:
            // a number (or a negative literal) under `-`/`+` gets parentheses.
            let numeric = matches!(x.as_ref(), Expr::Lit(Value::Int(_) | Value::Real(_)));
            if numeric && matches!(op, UnOp::Neg | UnOp::Plus) {
                out.push('(');
                expr_to(out, x);
                out.push(')');
            } else {
                expr_sub(out, x, P_UNARY);
            }
        }
        Expr::Binary(op, l, r) => {
            let p = op.precedence();
            expr_sub(out, l, p);
            out.push(' ');
            out.push_str(op.symbol());
            out.push(' ');
            expr_sub(out, r, p + 1);
        }
        Expr::Cond(c, a, b) => {
            expr_sub(out, c, 1);
            out.push_str(" ? ");
            expr_to(out, a);
            out.push_str(" : ");
            expr_to(out, b);
        }
        Expr::Elvis(a, b) => {
            expr_sub(out, a, 1);
            out.push_str(" ?: ");
            expr_to(out, b);
        }
        Expr::Paren(x) => {
            out.push('(');
            expr_to(out, x);
            out.push(')');
        }
        Expr::Call(c) => {
            out.push_str(&c.name);
            out.push('(');
            for (i, a) in c.args.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                expr_to(out, a);
            }
            out.push(')');
        }
        Expr::List(items) => {
            out.push_str("{ ");
            for (i, a) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                expr_to(out, a);
            }
            out.push_str(" }");
        }
        Expr::Record(ad) => ad_in(out, ad, syntax),
    }
}

fn expr_sub(out: &mut String, e: &Expr, need: u8, syntax: Syntax) {
    stacker::maybe_grow(64 * 1024, 1024 * 1024, || expr_prec(out, e, need, syntax))
}

impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = String::new();
        expr_to(&mut s, self);
        f.write_str(&s)
    }
}

impl std::fmt::Display for ClassAd {
    /// New syntax on one line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // (About 32 bytes an attribute: a few growths, not a dozen.)
        let mut s = String::with_capacity(32 * self.len() + 4);
        ad_to(&mut s, self);
        f.write_str(&s)
    }
}

impl ClassAd {
    /// The ad in old syntax (`Name = Expr` per line), as `condor_q -long` prints.
    pub fn to_old_syntax(&self) -> String {
        let mut s = String::with_capacity(32 * self.len());
        old_ad_to(&mut s, self);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Layers print as the copy updated with them would.
    #[test]
    fn overlaid_ads_print_as_the_updated_copy() {
        let a = crate::parse_ad("[A = 1; B = \"b\"; C = 2.5; D = A + 1]").unwrap();
        let b = crate::parse_ad("[C = 3; E = true; B = undefined]").unwrap();
        let c = crate::parse_ad("[E = false; F = {1, 2}; A = 7]").unwrap();
        let empty = ClassAd::new();
        for layers in [
            vec![&a],
            vec![&a, &b],
            vec![&a, &b, &c],
            vec![&empty, &c, &a],
            vec![&b, &empty, &a, &c],
        ] {
            let mut copy = layers[0].clone();
            layers[1..].iter().for_each(|l| copy.update(l));
            let mut out = String::new();
            old_overlaid_to(&mut out, &layers);
            assert_eq!(out, copy.to_old_syntax());
            let mut out = String::new();
            ad_overlaid_to(&mut out, &layers);
            assert_eq!(out, copy.to_string());
        }
    }

    #[test]
    fn pretty_printing_lays_out_as_htcondors_printer() {
        let ad =
            crate::parse_ad("[A = 1; L = {1, 2}; N = [x = 1; y = {}]; B = {[b = 1], {2, {}}}]")
                .unwrap();
        let mut s = String::new();
        pretty_ad_to(&mut s, &ad, 0);
        // As classad2 25.x prints the same ad (str(ClassAd)).
        let want = "\n    [\n        A = 1; \n        L = \n           {\n              1,\n              2\n           }; \n        N = \n            [\n                x = 1; \n                y = \n                   {\n                   }\n            ]; \n        B = \n           {\n              \n                  [\n                      b = 1\n                  ],\n              \n                 {\n                    2,\n                    \n                       {\n                       }\n                 }\n           }\n    ]";
        assert_eq!(s, want);
        let mut empty = String::new();
        pretty_ad_to(&mut empty, &ClassAd::new(), 0);
        assert_eq!(empty, "\n    [\n    ]");
    }
}
