//! How the built-ins read and compare values: C strings and bytes, HTCondor's
//! `convertValueTo*` conversions, its comparison operators and `+` on two
//! values, and the type predicates (`isUndefined`, `isString`, ...).

use super::FnEnv;
use super::strtod::strtod;
use crate::value::{Value, real_to_int};

/// The bytes of a C string: everything before the first NUL.
pub(super) fn cstr(s: &str) -> &[u8] {
    let b = s.as_bytes();
    match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    }
}

/// Bytes back to a string value (lossily, should a cut split a character).
pub(super) fn bytes_value(b: &[u8]) -> Value {
    Value::Str(String::from_utf8_lossy(b).into())
}

/// C's `isspace` in the "C" locale.
pub(super) fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// HTCondor's `convertValueToStringValue`: strings as they are, other
/// scalars, lists and ads unparsed; undefined and error are passed back as
/// the failure.
///
/// A list or an ad unparses to at most four bytes per byte of its weight
/// (an escaped byte is four); one whose text might not fit the budget is
/// error before any of it is written.
pub(super) fn to_str(v: &Value, env: &mut FnEnv<'_>) -> Result<String, Value> {
    match v {
        Value::Undefined => Err(Value::Undefined),
        Value::Error => Err(Value::Error),
        Value::Str(s) => Ok(s.to_string()),
        Value::List(_) | Value::Ad(_) => {
            let room = env.budget.room() as u64;
            let w = crate::budget::value_weight(v, room / 4);
            if !env.fits(w.saturating_mul(4).saturating_add(64).try_into().unwrap_or(usize::MAX)) {
                return Err(Value::Error);
            }
            Ok(v.to_string())
        }
        other => Ok(other.to_string()),
    }
}

/// HTCondor's `convertValueToRealValue`: strings through C's `strtod`
/// (error when no number starts the string).
pub(super) fn to_real(v: &Value) -> Result<f64, Value> {
    match v {
        Value::Undefined => Err(Value::Undefined),
        Value::Error | Value::List(_) | Value::Ad(_) => Err(Value::Error),
        Value::Str(s) => match strtod(s.as_bytes()) {
            (_, 0) => Err(Value::Error),
            (r, _) => Ok(r),
        },
        Value::Bool(b) => Ok(if *b { 1.0 } else { 0.0 }),
        Value::Int(i) => Ok(*i as f64),
        Value::Real(r) => Ok(*r),
    }
}

/// HTCondor's `convertValueToIntegerValue`: strings through `strtod` and
/// a C cast, reals truncated.
pub(super) fn to_int(v: &Value) -> Result<i64, Value> {
    match v {
        Value::Undefined => Err(Value::Undefined),
        Value::Error | Value::List(_) | Value::Ad(_) => Err(Value::Error),
        Value::Str(s) => match strtod(s.as_bytes()) {
            (_, 0) => Err(Value::Error),
            (r, _) => Ok(real_to_int(r)),
        },
        Value::Bool(b) => Ok(*b as i64),
        Value::Int(i) => Ok(*i),
        Value::Real(r) => Ok(real_to_int(*r)),
    }
}

/// Byte-wise ASCII case-insensitive comparison (`strcasecmp`).
pub(super) fn cmp_nocase(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.iter().map(u8::to_ascii_lowercase).cmp(b.iter().map(u8::to_ascii_lowercase))
}

/// `op` applied to two ordered values.
fn apply_order<T: PartialOrd>(op: &str, a: T, b: T) -> bool {
    match op {
        "<" => a < b,
        "<=" => a <= b,
        "==" => a == b,
        "!=" => a != b,
        ">=" => a >= b,
        _ => a > b,
    }
}

/// `op` on an [`std::cmp::Ordering`].
fn apply_ordering(op: &str, o: std::cmp::Ordering) -> bool {
    apply_order(op, o, std::cmp::Ordering::Equal)
}

/// HTCondor's comparison operators on two values: `<`, `<=`, `==`, `!=`,
/// `>=`, `>` (strict: error or undefined operands propagate; booleans act
/// as 0/1 and integers promote to reals; strings compare
/// case-insensitively and only with strings; lists and ads are error) and
/// the meta operators `is`/`=?=` and `isnt`/`=!=` (never undefined: same
/// type and same value, strings case-sensitively; lists and ads error).
/// Any other operator gives error.
pub(crate) fn compare_values(op: &str, a: &Value, b: &Value) -> Value {
    let meta = match op {
        "is" | "=?=" => Some(true),
        "isnt" | "=!=" => Some(false),
        "<" | "<=" | "==" | "!=" | ">=" | ">" => None,
        _ => return Value::Error,
    };
    if let Some(want) = meta {
        let same = match (a, b) {
            (Value::Undefined, Value::Undefined) | (Value::Error, Value::Error) => true,
            (Value::Bool(x), Value::Bool(y)) => x == y,
            (Value::Int(x), Value::Int(y)) => x == y,
            (Value::Real(x), Value::Real(y)) => x == y,
            (Value::Str(x), Value::Str(y)) => cstr(x) == cstr(y),
            (Value::List(_), Value::List(_)) | (Value::Ad(_), Value::Ad(_)) => return Value::Error,
            _ => false,
        };
        return Value::Bool(same == want);
    }
    if a.is_error() || b.is_error() {
        return Value::Error;
    }
    if a.is_undefined() || b.is_undefined() {
        return Value::Undefined;
    }
    match (a, b) {
        (Value::Ad(_), _) | (_, Value::Ad(_)) | (Value::List(_), _) | (_, Value::List(_)) => {
            Value::Error
        }
        (Value::Str(x), Value::Str(y)) => {
            Value::Bool(apply_ordering(op, cmp_nocase(cstr(x), cstr(y))))
        }
        (Value::Str(_), _) | (_, Value::Str(_)) => Value::Error,
        _ => match (num_of(a), num_of(b)) {
            (Some(Num::I(x)), Some(Num::I(y))) => Value::Bool(apply_order(op, x, y)),
            (Some(x), Some(y)) => Value::Bool(apply_order(op, x.real(), y.real())),
            _ => Value::Error,
        },
    }
}

/// A number after HTCondor's promotion of booleans to integers.
#[derive(Clone, Copy)]
pub(super) enum Num {
    I(i64),
    R(f64),
}

impl Num {
    pub(super) fn real(self) -> f64 {
        match self {
            Num::I(i) => i as f64,
            Num::R(r) => r,
        }
    }
}

pub(super) fn num_of(v: &Value) -> Option<Num> {
    match v {
        Value::Bool(b) => Some(Num::I(*b as i64)),
        Value::Int(i) => Some(Num::I(*i)),
        Value::Real(r) => Some(Num::R(*r)),
        _ => None,
    }
}

/// A real arithmetic result: +inf is an error, as in HTCondor.
pub(super) fn real_result(r: f64) -> Value {
    if r == f64::INFINITY { Value::Error } else { Value::Real(r) }
}

/// HTCondor's `+` on two values (strict; booleans promote to integers;
/// integer overflow wraps).
pub(super) fn add_values(a: &Value, b: &Value) -> Value {
    if a.is_error() || b.is_error() {
        return Value::Error;
    }
    if a.is_undefined() || b.is_undefined() {
        return Value::Undefined;
    }
    match (num_of(a), num_of(b)) {
        (Some(Num::I(x)), Some(Num::I(y))) => Value::Int(x.wrapping_add(y)),
        (Some(x), Some(y)) => real_result(x.real() + y.real()),
        _ => Value::Error,
    }
}

pub(super) fn pred(args: &[Value], p: fn(&Value) -> bool) -> Value {
    match args {
        [v] => Value::Bool(p(v)),
        _ => Value::Error,
    }
}
