//! Type conversion and arithmetic: `int`, `real`, `string`, `bool`, `floor`,
//! `ceiling`, `round`, `pow`, `quantize`, `random`, and `debug`.

use super::FnEnv;
use super::values::{cstr, to_int, to_real, to_str};
use crate::value::{Value, real_to_int};

/// `int(x)`.
pub(super) fn conv_int_fn(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    to_int(v).map_or_else(|e| e, Value::Int)
}

/// `real(x)`.
pub(super) fn conv_real_fn(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    to_real(v).map_or_else(|e| e, Value::Real)
}

/// `string(x)`.
pub(super) fn conv_string_fn(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    to_str(v, env).map_or_else(|e| e, Value::string)
}

/// `bool(x)`: numbers are true when non-zero; the strings "true" and
/// "false" (any case) convert, other strings are undefined.
pub(super) fn conv_bool_fn(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    match v {
        Value::Undefined => Value::Undefined,
        Value::Error | Value::List(_) | Value::Ad(_) => Value::Error,
        Value::Bool(b) => Value::Bool(*b),
        Value::Int(i) => Value::Bool(*i != 0),
        Value::Real(r) => Value::Bool(*r != 0.0),
        Value::Str(s) => {
            let s = cstr(s);
            if s.eq_ignore_ascii_case(b"false") {
                Value::Bool(false)
            } else if s.eq_ignore_ascii_case(b"true") {
                Value::Bool(true)
            } else {
                Value::Undefined
            }
        }
    }
}

#[derive(Clone, Copy)]
pub(super) enum RoundOp {
    Floor,
    Ceil,
    Round,
}

/// `floor`, `ceiling` and `round` (half to even); integers pass through,
/// anything else goes through `real()` (undefined is an error).
pub(super) fn do_round(args: &[Value], op: RoundOp) -> Value {
    let [v] = args else { return Value::Error };
    if let Value::Int(_) = v {
        return v.clone();
    }
    let Ok(r) = to_real(v) else { return Value::Error };
    Value::Int(real_to_int(match op {
        RoundOp::Floor => r.floor(),
        RoundOp::Ceil => r.ceil(),
        RoundOp::Round => r.round_ties_even(),
    }))
}

/// `pow(base, exp)`: integer for integer operands with a non-negative
/// exponent (computed in doubles plus 0.5 and cast, as HTCondor does),
/// otherwise real.
pub(super) fn pow(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [a, b] = args else { return Value::Error };
    if let (Value::Int(x), Value::Int(y)) = (a, b)
        && *y >= 0
    {
        return Value::Int(real_to_int((*x as f64).powf(*y as f64) + 0.5));
    }
    match (to_real(a), to_real(b)) {
        (Ok(x), Ok(y)) => Value::Real(x.powf(y)),
        _ => Value::Error,
    }
}

/// `quantize(x, base)` and `quantize(x, list)`.
pub(super) fn quantize(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [a, b] = args else { return Value::Error };
    let Ok(rval) = to_real(a) else { return Value::Error };
    let (base, rbase) = match b {
        Value::List(items) => {
            let mut base = Value::Real(0.0);
            let mut rbase = 0.0;
            for e in items.iter() {
                let Ok(r) = to_real(e) else { return Value::Error };
                if r >= rval {
                    return e.clone();
                }
                base = e.clone();
                rbase = r;
            }
            (base, rbase)
        }
        other => match to_real(other) {
            Ok(r) => (other.clone(), r),
            Err(_) => return Value::Error,
        },
    };
    if let Value::Int(ib) = base {
        if ib == 0 {
            return a.clone();
        }
        if let Value::Int(ia) = a {
            return Value::Int(
                ia.wrapping_add(ib).wrapping_sub(1).wrapping_div(ib).wrapping_mul(ib),
            );
        }
        return Value::Real((rval / ib as f64).ceil() * ib as f64);
    }
    if (-1e-8..=1e-8).contains(&rbase) {
        return a.clone();
    }
    Value::Real((rval / rbase).ceil() * rbase)
}

/// `random([x])`: an integer in `[0, x)` for an integer `x`, a real in
/// `[0, x)` for a real; `random()` is `random(1.0)`.
pub(super) fn random(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    let arg = match args {
        [] => Value::Real(1.0),
        [v] => v.clone(),
        _ => return Value::Error,
    };
    match arg {
        Value::Int(i) => {
            // HTCondor reads the bound into a C int.
            let max = i as i32;
            if max <= 0 {
                return Value::Error;
            }
            Value::Int(((env.rng.next_u64() >> 33) % max as u64) as i64)
        }
        Value::Real(r) => {
            if r <= 0.0 {
                return Value::Error;
            }
            Value::Real(r * env.rng.next_f64())
        }
        _ => Value::Error,
    }
}

/// `debug(x)`: `x`.
pub(super) fn debug(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    match args {
        [v] => v.clone(),
        _ => Value::Error,
    }
}
