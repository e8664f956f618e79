//! ClassAd values: the results of evaluation.

use std::fmt;
use std::sync::Arc;

use crate::ast::ClassAd;

/// The value of an evaluated ClassAd expression.
///
/// Lists hold already-evaluated elements; a nested ClassAd holds its
/// (unevaluated) attribute expressions, exactly as HTCondor's `Value` does.
#[derive(Clone, Debug, Default)]
pub enum Value {
    /// The absence of a value: a missing attribute, or an operation on one.
    #[default]
    Undefined,
    /// The result of a type error, division by zero and the like.
    Error,
    /// `true` or `false`.
    Bool(bool),
    /// A 64-bit signed integer; arithmetic wraps as HTCondor's does.
    Int(i64),
    /// A 64-bit IEEE float.
    Real(f64),
    /// A byte string (HTCondor strings are byte strings; ours are UTF-8).
    Str(Arc<str>),
    /// A list of values.
    List(Arc<Vec<Value>>),
    /// A nested ClassAd.
    Ad(Arc<ClassAd>),
}

impl Value {
    /// A string value.
    pub fn string(s: impl Into<Arc<str>>) -> Value {
        Value::Str(s.into())
    }

    /// A list value.
    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Arc::new(items))
    }

    /// The name of this value's type, as the oracle normalisation spells it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Undefined => "undefined",
            Value::Error => "error",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Real(_) => "real",
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Ad(_) => "classad",
        }
    }

    /// True for `Undefined`.
    pub fn is_undefined(&self) -> bool {
        matches!(self, Value::Undefined)
    }

    /// True for `Error`.
    pub fn is_error(&self) -> bool {
        matches!(self, Value::Error)
    }

    /// The value as a boolean, HTCondor style: booleans are themselves,
    /// numbers are true when non-zero; anything else is `None`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Int(i) => Some(*i != 0),
            Value::Real(r) => Some(*r != 0.0),
            _ => None,
        }
    }

    /// The value as an integer, when it is an integer (or a real, truncated;
    /// or a boolean).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Real(r) => Some(real_to_int(*r)),
            Value::Bool(b) => Some(*b as i64),
            _ => None,
        }
    }

    /// The value as a real, when it is numeric (or boolean).
    pub fn as_real(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Real(r) => Some(*r),
            Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            _ => None,
        }
    }

    /// The string, when this is a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The elements, when this is a list value.
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    /// The ad, when this is a ClassAd value.
    pub fn as_ad(&self) -> Option<&ClassAd> {
        match self {
            Value::Ad(a) => Some(a),
            _ => None,
        }
    }

    /// Strict identity, as `=?=` decides it for scalars: same type and
    /// same value (strings case-sensitively). Lists and ads are never
    /// identical to anything (HTCondor gives error for them; callers check).
    pub fn identical(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Undefined, Value::Undefined) => true,
            (Value::Error, Value::Error) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Real(a), Value::Real(b)) => a == b,
            (Value::Str(a), Value::Str(b)) => a == b,
            _ => false,
        }
    }
}

/// Converts a real to an integer as HTCondor does (C cast semantics on
/// x86-64: out-of-range and NaN give `i64::MIN`).
pub fn real_to_int(r: f64) -> i64 {
    // 2^63 is exactly representable; every finite real in [-2^63, 2^63) fits.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if r.is_nan() || !(-LIMIT..LIMIT).contains(&r) { i64::MIN } else { r as i64 }
}

/// Formats a real the way HTCondor's unparser does: `%.15E`, with `0.0`,
/// `-0.0` and the IEEE specials spelled out.
pub fn format_real(r: f64) -> String {
    if r.is_nan() {
        return "real(\"NaN\")".to_string();
    }
    if r.is_infinite() {
        return if r > 0.0 { "real(\"INF\")" } else { "real(\"-INF\")" }.to_string();
    }
    if r == 0.0 {
        return if r.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    format_e15(r)
}

/// `printf("%.15E", r)` for a finite, non-zero real.
pub(crate) fn format_e15(r: f64) -> String {
    let s = format!("{r:.15E}");
    // Rust prints `1.500000000000000E0`; C prints `1.500000000000000E+00`.
    let (mant, exp) = s.split_once('E').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mant}E{sign}{:02}", exp.abs())
}

/// Formats a non-negative real as C's `printf` does with the conversion
/// `conv` (`f`, `F`, `e`, `E`, `g` or `G`), precision `prec` and, with
/// `alt`, the `#` flag (`%g` keeps its trailing zeros).
pub fn printf_real(r: f64, conv: char, prec: usize, alt: bool) -> String {
    let upper = conv.is_ascii_uppercase();
    if !r.is_finite() {
        let s = if r.is_nan() { "nan" } else { "inf" };
        return if upper { s.to_uppercase() } else { s.to_string() };
    }
    let exp_form = |r: f64, p: usize| -> String {
        let s = format!("{r:.p$e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let e = if upper { 'E' } else { 'e' };
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}{e}{sign}{:02}", exp.unsigned_abs())
    };
    match conv {
        'f' | 'F' => format!("{r:.prec$}"),
        'e' | 'E' => exp_form(r, prec),
        _ => {
            let p = prec.max(1);
            let x: i32 = if r == 0.0 {
                0
            } else {
                let s = format!("{r:.0$e}", p - 1);
                s.split_once('e').and_then(|(_, e)| e.parse().ok()).unwrap_or(0)
            };
            let mut s = if x < -4 || x >= p as i32 {
                exp_form(r, p - 1)
            } else {
                let decimals = (p as i32 - 1 - x).max(0) as usize;
                format!("{r:.decimals$}")
            };
            if !alt {
                // strip trailing zeros of the fraction
                let (mant, exp) = match s.find(['e', 'E']) {
                    Some(k) => (s[..k].to_string(), s[k..].to_string()),
                    None => (s.clone(), String::new()),
                };
                let mant = if mant.contains('.') {
                    mant.trim_end_matches('0').trim_end_matches('.').to_string()
                } else {
                    mant
                };
                s = mant + &exp;
            }
            s
        }
    }
}

/// Formats a real as HTCondor prints it in old syntax and JSON (`condor_q
/// -long`, classad2's `printOld` and `printJson`): `%.16G`, with `.0` where
/// that shows no decimal point or exponent, and `0.0`, `-0.0` and the IEEE
/// specials as [`format_real`] spells them. Where sixteen digits do not read
/// back as `r` (HTCondor would lose the last bit), `%.17G`: what is printed
/// always reads back as the same real.
pub fn format_real_g16(r: f64) -> String {
    if !r.is_finite() || r == 0.0 {
        return format_real(r);
    }
    let mut s = printf_real(r.abs(), 'G', 16, false);
    if s.parse::<f64>().ok() != Some(r.abs()) {
        s = printf_real(r.abs(), 'G', 17, false);
    }
    if !s.contains(['.', 'E']) {
        s.push_str(".0");
    }
    if r < 0.0 { format!("-{s}") } else { s }
}

/// Writes `s` as a quoted ClassAd string literal, escaping as HTCondor's
/// unparser does (non-ASCII bytes become octal escapes).
pub fn write_quoted(out: &mut String, s: &str) {
    out.push('"');
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                out.push('\\');
                out.push_str(&format!("{b:03o}"));
            }
        }
    }
    out.push('"');
}

impl fmt::Display for Value {
    /// Prints the value as a ClassAd literal (HTCondor's unparse).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        crate::unparse::value_to(&mut s, self);
        f.write_str(&s)
    }
}

impl PartialEq for Value {
    /// Structural equality (for tests and round trips): reals compare by
    /// bits, so `-0.0` differs from `0.0`, and every NaN equals every NaN.
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Real(a), Value::Real(b)) => {
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
            }
            (Value::List(a), Value::List(b)) => a == b,
            (Value::Ad(a), Value::Ad(b)) => a == b,
            _ => self.identical(other),
        }
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}
impl From<f64> for Value {
    fn from(r: f64) -> Value {
        Value::Real(r)
    }
}
impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.into())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s.into())
    }
}
