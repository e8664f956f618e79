//! The list functions: `member`, `identicalMember`, `size`, `sum`, `avg`,
//! `min`, `max`, `anyCompare` and `allCompare`.

use super::FnEnv;
use super::values::{add_values, compare_values, num_of, real_result};
use crate::value::Value;

/// `member(x, list)` (`==`) and `identicalMember(x, list)` (`=?=`).
pub(super) fn member(args: &[Value], identical: bool) -> Value {
    let [x, list] = args else { return Value::Error };
    if list.is_undefined() || (!identical && x.is_undefined()) {
        return Value::Undefined;
    }
    let Value::List(items) = list else { return Value::Error };
    if matches!(x, Value::List(_) | Value::Ad(_)) {
        return Value::Error;
    }
    if !identical && x.is_error() {
        return Value::Error;
    }
    let op = if identical { "is" } else { "==" };
    let found = items.iter().any(|e| matches!(compare_values(op, e, x), Value::Bool(true)));
    Value::Bool(found)
}

/// `size(s)`: bytes of a string, elements of a list, attributes of an ad.
pub(super) fn size(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    match args {
        [Value::Undefined] => Value::Undefined,
        [Value::List(l)] => Value::Int(l.len() as i64),
        [Value::Ad(a)] => Value::Int(a.len() as i64),
        [Value::Str(s)] => Value::Int(s.len() as i64),
        _ => Value::Error,
    }
}

/// `sum(list)` and `avg(list)`: undefined elements are skipped; an empty
/// list gives integer 0 for both.
pub(super) fn sum_avg(args: &[Value], avg: bool) -> Value {
    let [list] = args else { return Value::Error };
    let items = match list {
        Value::Undefined => return Value::Undefined,
        Value::List(l) => l,
        _ => return Value::Error,
    };
    let mut result = Value::Int(0);
    let mut first = true;
    let mut len = 0usize;
    for e in items.iter() {
        match e {
            Value::Undefined => continue,
            Value::Bool(_) | Value::Int(_) | Value::Real(_) => {}
            _ => return Value::Error,
        }
        len += 1;
        if first {
            result = e.clone();
            first = false;
        } else {
            result = add_values(&result, e);
        }
    }
    if !avg || len == 0 {
        return result;
    }
    match num_of(&result) {
        Some(n) => real_result(n.real() / len as f64),
        None => result,
    }
}

/// `min(list)` and `max(list)`: undefined elements are skipped; an empty
/// list gives undefined; the chosen element keeps its type.
pub(super) fn min_max(args: &[Value], min: bool) -> Value {
    let [list] = args else { return Value::Error };
    let items = match list {
        Value::Undefined => return Value::Undefined,
        Value::List(l) => l,
        _ => return Value::Error,
    };
    let op = if min { "<" } else { ">" };
    let mut result: Option<&Value> = None;
    for e in items.iter() {
        match e {
            Value::Undefined => continue,
            Value::Bool(_) | Value::Int(_) | Value::Real(_) => {}
            _ => return Value::Error,
        }
        match result {
            None => result = Some(e),
            Some(r) => {
                if matches!(compare_values(op, e, r), Value::Bool(true)) {
                    result = Some(e);
                }
            }
        }
    }
    result.cloned().unwrap_or(Value::Undefined)
}

/// `anyCompare(op, list, x)` and `allCompare(op, list, x)`.
pub(super) fn list_compare(args: &[Value], all: bool) -> Value {
    let [op, list, x] = args else { return Value::Error };
    let op: &str = match op {
        Value::Undefined => return Value::Undefined,
        Value::Str(s) => s,
        _ => return Value::Error,
    };
    if !matches!(op, "<" | "<=" | "!=" | "==" | ">" | ">=" | "is" | "isnt") {
        return Value::Error;
    }
    let items = match list {
        Value::Undefined => return Value::Undefined,
        Value::List(l) => l,
        _ => return Value::Error,
    };
    for e in items.iter() {
        match compare_values(op, e, x) {
            Value::Bool(b) => {
                if b && !all {
                    return Value::Bool(true);
                }
                if !b && all {
                    return Value::Bool(false);
                }
            }
            // HTCondor stops at the first undefined comparison, answering false.
            Value::Undefined => return Value::Bool(false),
            _ => return Value::Error,
        }
    }
    Value::Bool(all)
}
