//! The string functions: `strcat`, `join`, `toUpper`, `toLower`, `substr`,
//! `strcmp`, `stricmp`, the version comparisons (`versioncmp`, `versionLT`,
//! ..., `version_in_range`), `splitUserName`, `splitSlotName` and `split`.

use super::FnEnv;
use super::values::{bytes_value, cmp_nocase, cstr, is_c_space, to_str};
use crate::value::Value;

/// `strcat(...)` and the three forms of `join`.
pub(super) fn strcat_join(args: &[Value], env: &mut FnEnv<'_>, is_join: bool) -> Value {
    let expanded: Vec<Value>;
    let mut items = args;
    if is_join
        && (1..=2).contains(&args.len())
        && let Some(Value::List(list)) = args.last()
    {
        let sep = if args.len() == 2 { args[0].clone() } else { Value::string("") };
        expanded = std::iter::once(sep).chain(list.iter().cloned()).collect();
        items = &expanded;
    }
    let mut buf = String::new();
    let mut sep = String::new();
    let mut undefined = false;
    let mut defined = false;
    for (i, v) in items.iter().enumerate() {
        let s = match to_str(v, env) {
            Ok(s) => s,
            Err(Value::Undefined) => {
                undefined = true;
                if is_join {
                    continue;
                }
                defined = false;
                break;
            }
            Err(_) => return Value::Error,
        };
        let grown = buf.len() + s.len() + if is_join { sep.len() } else { 0 };
        if !env.fits(grown) {
            return Value::Error;
        }
        if is_join {
            if i == 0 {
                sep = s;
                continue;
            }
            if !buf.is_empty() {
                buf.push_str(&sep);
            }
        }
        defined = true;
        buf.push_str(&s);
    }
    if undefined && !defined {
        return Value::Undefined;
    }
    Value::string(buf)
}

/// `toUpper(x)` / `toLower(x)`: ASCII only; non-strings are converted.
pub(super) fn change_case(args: &[Value], env: &mut FnEnv<'_>, upper: bool) -> Value {
    let [v] = args else { return Value::Error };
    match to_str(v, env) {
        Ok(s) => Value::string(if upper { s.to_ascii_uppercase() } else { s.to_ascii_lowercase() }),
        Err(e) => e,
    }
}

/// `substr(s, offset [, length])`, Perl-like, on bytes.
pub(super) fn substr(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    if !(2..=3).contains(&args.len()) {
        return Value::Error;
    }
    if args.iter().any(Value::is_undefined) {
        return Value::Undefined;
    }
    let (Value::Str(s), Value::Int(off)) = (&args[0], &args[1]) else { return Value::Error };
    let len_arg = match args.get(2) {
        None => None,
        Some(Value::Int(l)) => Some(*l as i32 as i64),
        Some(_) => return Value::Error,
    };
    // HTCondor reads the offset and length into C ints.
    let mut offset = *off as i32 as i64;
    let mut len = len_arg.unwrap_or(0);
    let bytes = s.as_bytes();
    let alen = bytes.len() as i64;
    if offset < 0 {
        offset = (alen + offset).max(0);
    } else if offset >= alen {
        offset = alen;
    }
    if len <= 0 {
        len = (alen - offset + len).max(0);
    } else if len > alen - offset {
        len = alen - offset;
    }
    if len_arg == Some(0) {
        len = 0;
    }
    let start = offset as usize;
    bytes_value(&bytes[start..start + len as usize])
}

/// `strcmp(a, b)` / `stricmp(a, b)`: -1, 0 or 1 on the string forms.
pub(super) fn compare_strings(args: &[Value], env: &mut FnEnv<'_>, nocase: bool) -> Value {
    let [a, b] = args else { return Value::Error };
    if a.is_undefined() || b.is_undefined() {
        return Value::Undefined;
    }
    let (Ok(a), Ok(b)) = (to_str(a, env), to_str(b, env)) else { return Value::Error };
    let (a, b) = (cstr(&a), cstr(&b));
    let o = if nocase { cmp_nocase(a, b) } else { a.cmp(b) };
    Value::Int(o as i64)
}

#[derive(Clone, Copy)]
pub(super) enum VersionOp {
    Cmp,
    Le,
    Lt,
    Ge,
    Gt,
    Eq,
}

/// `versioncmp` and `versionLT` etc.: strverscmp-like ordering.
pub(super) fn compare_version(args: &[Value], env: &mut FnEnv<'_>, op: VersionOp) -> Value {
    let [a, b] = args else { return Value::Error };
    if a.is_undefined() || b.is_undefined() {
        return Value::Undefined;
    }
    let (Ok(a), Ok(b)) = (to_str(a, env), to_str(b, env)) else { return Value::Error };
    let r = natural_cmp(cstr(&a), cstr(&b));
    match op {
        VersionOp::Cmp => Value::Int(r),
        VersionOp::Le => Value::Bool(r <= 0),
        VersionOp::Lt => Value::Bool(r < 0),
        VersionOp::Ge => Value::Bool(r >= 0),
        VersionOp::Gt => Value::Bool(r > 0),
        VersionOp::Eq => Value::Bool(r == 0),
    }
}

/// `version_in_range(v, min, max)`.
pub(super) fn version_in_range(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    let [v, lo, hi] = args else { return Value::Error };
    if lo.is_undefined() || hi.is_undefined() {
        return Value::Undefined;
    }
    let (Ok(v), Ok(lo), Ok(hi)) = (to_str(v, env), to_str(lo, env), to_str(hi, env)) else {
        return Value::Error;
    };
    let l = natural_cmp(cstr(&lo), cstr(&v));
    let r = natural_cmp(cstr(&v), cstr(&hi));
    Value::Bool(l <= 0 && r <= 0)
}

/// HTCondor's `natural_cmp` (like `strverscmp`), returning its raw
/// difference values (characters compare as C's signed `char`).
pub(super) fn natural_cmp(a: &[u8], b: &[u8]) -> i64 {
    let ca = |i: usize| a.get(i).copied().unwrap_or(0);
    let cb = |i: usize| b.get(i).copied().unwrap_or(0);
    let signed = |c: u8| c as i8 as i64;
    let dig = |c: u8| c.is_ascii_digit();
    let mut i = 0;
    while ca(i) != 0 && ca(i) == cb(i) {
        i += 1;
    }
    if ca(i) == cb(i) {
        return 0;
    }
    let diff = signed(ca(i)) - signed(cb(i));
    // Digits leading up to the mismatch (the same in both strings).
    let mut n_beg = i;
    while n_beg > 0 && dig(ca(n_beg - 1)) {
        n_beg -= 1;
    }
    if n_beg == i && (!dig(ca(i)) || !dig(cb(i))) {
        return diff;
    }
    let mut z1 = n_beg;
    while ca(z1) == b'0' {
        z1 += 1;
    }
    let mut z2 = n_beg;
    while cb(z2) == b'0' {
        z2 += 1;
    }
    if z1 > n_beg && !dig(ca(z1)) {
        z1 -= 1;
    }
    if z2 > n_beg && !dig(cb(z2)) {
        z2 -= 1;
    }
    let (zl1, zl2) = ((z1 - n_beg) as i64, (z2 - n_beg) as i64);
    if zl1 != zl2 {
        return zl2 - zl1;
    }
    if z1 > n_beg {
        return diff;
    }
    let mut e1 = z1;
    while dig(ca(e1)) {
        e1 += 1;
    }
    let mut e2 = z2;
    while dig(cb(e2)) {
        e2 += 1;
    }
    let (l1, l2) = ((e1 - n_beg) as i64, (e2 - n_beg) as i64);
    if l1 != l2 { l1 - l2 } else { diff }
}

/// `splitUserName(s)` / `splitSlotName(s)`: the parts around the first `@`.
pub(super) fn split_at(args: &[Value], slot: bool) -> Value {
    let [Value::Str(s)] = args else { return Value::Error };
    let (first, second) = match s.split_once('@') {
        Some((a, b)) => (a, b),
        None if slot => ("", &**s),
        None => (&**s, ""),
    };
    Value::list(vec![Value::string(first), Value::string(second)])
}

/// `split(s [, separators])`: splits at any separator character; runs of
/// white space count once, repeated non-space separators give empty items.
pub(super) fn split_arb(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    if !(1..=2).contains(&args.len()) {
        return Value::Error;
    }
    let Value::Str(s) = &args[0] else { return Value::Error };
    let seps: &[u8] = match args.get(1) {
        None => b", \t",
        Some(Value::Str(p)) => p.as_bytes(),
        Some(_) => return Value::Error,
    };
    let s = s.as_bytes();
    let mut out = Vec::new();
    let mut last = 0usize;
    // Each item costs its slot besides its bytes: a string of separators
    // would otherwise make a list many times its own size.
    let item = crate::budget::VALUE_BYTES as usize;
    let mut made = 0usize;
    if !seps.is_empty() {
        let find = |from: usize| (from..s.len()).find(|&k| seps.contains(&s[k]));
        let mut prev_sep: Option<u8> = None;
        let mut ix = find(last);
        while let Some(k) = ix {
            let piece = if k > last {
                Some(&s[last..k])
            } else if prev_sep.is_some_and(|c| !is_c_space(c) && c == s[k]) {
                Some(&b""[..])
            } else {
                None
            };
            if let Some(piece) = piece {
                made += item + piece.len();
                if !env.fits(made) {
                    return Value::Error;
                }
                out.push(bytes_value(piece));
            }
            if !is_c_space(s[k]) {
                prev_sep = Some(s[k]);
            }
            last = k + 1;
            ix = find(last);
        }
    }
    if s.len() > last {
        out.push(bytes_value(&s[last..]));
    }
    Value::list(out)
}
