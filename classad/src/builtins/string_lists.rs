//! The string-list functions on `"a, b, c"` strings, which HTCondor's
//! compatibility layer registers: `stringListSize`, `stringListSum`, `Avg`,
//! `Min`, `Max`, `stringListMember`, `stringListIMember`, the subset
//! matches, `stringListsIntersect` and `stringList_regexpMember`.

use std::collections::HashSet;

use super::FnEnv;
use super::regexp::{RegexFlags, compile_regex, search};
use super::strtod::strtod;
use super::values::{cstr, is_c_space};
use crate::value::{Value, real_to_int};

/// HTCondor's `StringTokenIterator`: tokens separated by any delimiter
/// character, with surrounding white space trimmed; empty tokens dropped.
/// An iterator, so that a long list is never copied into a vector of its
/// tokens.
fn string_tokens<'a>(s: &'a [u8], delims: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + Clone {
    let s = match s.iter().position(|&c| c == 0) {
        Some(n) => &s[..n],
        None => s,
    };
    let is_delim = move |c: u8| delims.contains(&c);
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < s.len() {
            while i < s.len() && (is_delim(s[i]) || is_c_space(s[i])) {
                i += 1;
            }
            let start = i;
            let mut end = i;
            while i < s.len() && !is_delim(s[i]) {
                if !is_c_space(s[i]) {
                    end = i + 1;
                }
                i += 1;
            }
            if end > start {
                return Some(&s[start..end]);
            }
        }
        None
    })
}

/// `stringListSize(list [, delims])`.
pub(super) fn string_list_size(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let (list, delims) = match args {
        [Value::Str(l)] => (l, ", ".as_bytes()),
        [Value::Str(l), Value::Str(d)] => (l, cstr(d)),
        _ => return Value::Error,
    };
    Value::Int(string_tokens(list.as_bytes(), delims).count() as i64)
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Summary {
    Sum,
    Avg,
    Min,
    Max,
}

/// `stringListSum`, `stringListAvg`, `stringListMin`, `stringListMax`.
/// The arithmetic is in doubles; the result is an integer unless an item
/// has characters other than sign and digits. As in HTCondor, min starts
/// from `FLT_MAX` and max from `FLT_MIN` (the smallest positive float).
pub(super) fn string_list_summarize(args: &[Value], kind: Summary) -> Value {
    let (list, delims) = match args {
        [Value::Str(l)] => (l, ", ".as_bytes()),
        [Value::Str(l), Value::Str(d)] => (l, cstr(d)),
        _ => return Value::Error,
    };
    let mut acc = match kind {
        Summary::Sum | Summary::Avg => 0.0,
        Summary::Min => f32::MAX as f64,
        Summary::Max => f32::MIN_POSITIVE as f64,
    };
    let mut is_real = false;
    let mut count = 0usize;
    for t in string_tokens(list.as_bytes(), delims) {
        count += 1;
        let (x, used) = strtod(t);
        if used == 0 {
            return Value::Error;
        }
        if !t.iter().all(|c| matches!(c, b'+' | b'-' | b'0'..=b'9')) {
            is_real = true;
        }
        acc = match kind {
            Summary::Sum | Summary::Avg => x + acc,
            Summary::Min => {
                if x < acc {
                    x
                } else {
                    acc
                }
            }
            Summary::Max => {
                if x > acc {
                    x
                } else {
                    acc
                }
            }
        };
    }
    if count == 0 {
        return match kind {
            Summary::Sum | Summary::Avg => Value::Real(0.0),
            _ => Value::Undefined,
        };
    }
    if kind == Summary::Avg {
        acc /= count as f64;
    }
    if is_real { Value::Real(acc) } else { Value::Int(real_to_int(acc)) }
}

/// `stringListMember`, `stringListIMember`, `stringListSubsetMatch` and
/// `stringListISubsetMatch`. Undefined arguments act as empty strings
/// unless both lists are undefined.
pub(super) fn string_list_member(
    args: &[Value],
    env: &mut FnEnv<'_>,
    nocase: bool,
    subset: bool,
) -> Value {
    if !(2..=3).contains(&args.len()) {
        return Value::Error;
    }
    let str_or_undef = |v: &Value| -> Result<Option<String>, ()> {
        match v {
            Value::Undefined => Ok(None),
            Value::Str(s) => Ok(Some(s.to_string())),
            _ => Err(()),
        }
    };
    let (Ok(item), Ok(list)) = (str_or_undef(&args[0]), str_or_undef(&args[1])) else {
        return Value::Error;
    };
    let delims = match args.get(2).map(str_or_undef) {
        None | Some(Ok(None)) => ", \t\r\n".to_string(),
        Some(Ok(Some(d))) => d,
        Some(Err(())) => return Value::Error,
    };
    if item.is_none() && list.is_none() {
        return Value::Undefined;
    }
    let item = item.unwrap_or_default();
    let list = list.unwrap_or_default();
    let delims = cstr(&delims);
    let eq = |a: &[u8], b: &[u8]| if nocase { a.eq_ignore_ascii_case(b) } else { a == b };
    let mut tokens = string_tokens(list.as_bytes(), delims);
    if !subset {
        let item = cstr(&item);
        return Value::Bool(tokens.any(|t| eq(t, item)));
    }
    if item.is_empty() {
        return Value::Bool(true);
    }
    // Each wanted item is looked for in the whole list: the work is the
    // number of wanted items times the list's length, charged before.
    let wanted = string_tokens(item.as_bytes(), delims).count() as u64;
    if !env.budget.read(wanted.saturating_mul(list.len() as u64)) {
        return Value::Error;
    }
    // HTCondor answers false when the first list has no items at all.
    let mut found = false;
    for want in string_tokens(item.as_bytes(), delims) {
        found = tokens.clone().any(|t| eq(t, want));
        if !found {
            break;
        }
    }
    Value::Bool(found)
}

/// `stringListsIntersect(a, b [, delims])`: true when the lists share an
/// item (default delimiters space and comma, no trimming).
pub(super) fn string_lists_intersect(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    if !(2..=3).contains(&args.len()) {
        return Value::Error;
    }
    if args.iter().any(Value::is_error) {
        return Value::Error;
    }
    if args.iter().any(Value::is_undefined) {
        return Value::Undefined;
    }
    let (Value::Str(a), Value::Str(b)) = (&args[0], &args[1]) else { return Value::Error };
    let delims: &[u8] = match args.get(2) {
        None => b"",
        Some(Value::Str(d)) => cstr(d),
        Some(_) => return Value::Error,
    };
    let delims = if delims.is_empty() { b" ," as &[u8] } else { delims };
    fn pieces<'a>(s: &'a str, delims: &'a [u8]) -> impl Iterator<Item = &'a [u8]> {
        cstr(s).split(|c| delims.contains(c)).filter(|p| !p.is_empty())
    }
    // The set of the second list's items is the only copy made: a slice
    // and a hash slot per item, within the budget.
    let n = pieces(b, delims).count();
    if !env.fits(n.saturating_mul(2 * std::mem::size_of::<&[u8]>())) {
        return Value::Error;
    }
    let set: HashSet<&[u8]> = pieces(b, delims).collect();
    Value::Bool(pieces(a, delims).any(|p| set.contains(p)))
}

/// `stringList_regexpMember(pattern, list [, delims [, options]])`:
/// undefined when the list has no items.
pub(super) fn string_list_regexp_member(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    if !(2..=4).contains(&args.len()) {
        return Value::Error;
    }
    let mut strs = Vec::with_capacity(4);
    for a in args {
        let Value::Str(s) = a else { return Value::Error };
        strs.push(&**s);
    }
    let delims = strs.get(2).map(|d| cstr(d)).unwrap_or(b", ");
    let opts = strs.get(3).copied().unwrap_or("");
    let flags = RegexFlags {
        caseless: opts.contains(['i', 'I']),
        multiline: opts.contains(['m', 'M']),
        dotall: opts.contains(['s', 'S']),
        extended: opts.contains(['x', 'X']),
    };
    let Some(re) = compile_regex(strs[0], flags, env) else { return Value::Error };
    let mut tokens = string_tokens(strs[1].as_bytes(), delims).peekable();
    if tokens.peek().is_none() {
        return Value::Undefined;
    }
    for t in tokens {
        match search(&re, t, env) {
            Some(true) => return Value::Bool(true),
            Some(false) => {}
            None => return Value::Error,
        }
    }
    Value::Bool(false)
}
