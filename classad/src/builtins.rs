//! HTCondor's built-in ClassAd functions.
//!
//! Most functions are *strict*: their arguments are evaluated first and the
//! function sees only values. A few (`ifThenElse`, `eval`, `unparse`, ...)
//! need the unevaluated arguments or the evaluation context; those are
//! [`Builtin::Special`] and are carried out by the evaluator itself.
//!
//! The semantics follow HTCondor's own library (`src/classad/fnCall.cpp`
//! and the functions `src/condor_utils/compat_classad.cpp` registers),
//! including its rules for undefined and error arguments and its quirks.
//! HTCondor strings are byte strings; ours are UTF-8, so the functions work
//! on bytes and convert back lossily where a byte cut could split a
//! character.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::ast::ClassAd;
use crate::budget::Budget;
use crate::value::{Value, real_to_int};

/// What a strict built-in may use besides its arguments.
pub struct FnEnv<'a> {
    /// The evaluation's "now", in seconds since the epoch (`time()`).
    pub now: i64,
    /// The evaluation's random source (`random()`), seedable for tests.
    pub rng: &'a mut Rng,
    /// What the evaluation has left (see [`crate::budget`]). The evaluator
    /// charges a built-in for reading its arguments and for the value it
    /// returns; a built-in whose result can outgrow its arguments checks
    /// [`Budget::fits`] as it builds it, and answers `error` rather than
    /// grow past it.
    pub budget: &'a mut Budget,
}

impl FnEnv<'_> {
    /// True when a result of `bytes` bytes may still be made; when not, the
    /// budget is spent (the built-in answers error, and so does the rest of
    /// the evaluation).
    fn fits(&mut self, bytes: usize) -> bool {
        if self.budget.fits(bytes) {
            return true;
        }
        self.budget.exhaust();
        false
    }
}

/// A small, seedable pseudo-random generator (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator with a fixed seed.
    pub fn seeded(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A generator seeded from the clock.
    pub fn from_time() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9);
        Rng(t)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform real in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A strict built-in: arguments in, value out.
pub type StrictFn = fn(&[Value], &mut FnEnv<'_>) -> Value;

/// Built-ins that the evaluator carries out itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecialFn {
    /// `ifThenElse(c, a, b)`: evaluates only the branch taken.
    IfThenElse,
    /// `eval(s)`: parses the string and evaluates it in the current scope.
    Eval,
    /// `unparse(attr)`: the text of an attribute's expression.
    Unparse,
}

/// A resolved built-in function.
#[derive(Clone, Copy, Debug)]
pub enum Builtin {
    /// Called with evaluated arguments.
    Strict(StrictFn),
    /// Carried out by the evaluator.
    Special(SpecialFn),
}

/// Resolves a function name (case-insensitively) to its built-in.
pub fn lookup(name: &str) -> Option<Builtin> {
    let lower = name.to_ascii_lowercase();
    let special = match lower.as_str() {
        "ifthenelse" => Some(SpecialFn::IfThenElse),
        "eval" => Some(SpecialFn::Eval),
        "unparse" => Some(SpecialFn::Unparse),
        _ => None,
    };
    if let Some(s) = special {
        return Some(Builtin::Special(s));
    }
    strict(&lower).map(Builtin::Strict)
}

/// The strict built-ins, by lower-case name: the one table both
/// [`lookup`] and [`strict_names`] read, so a test that enumerates the
/// built-ins cannot miss one.
static STRICT: &[(&str, StrictFn)] = &[
    // Type predicates.
    ("isundefined", |a, _| pred(a, |v| matches!(v, Value::Undefined))),
    ("iserror", |a, _| pred(a, |v| matches!(v, Value::Error))),
    ("isstring", |a, _| pred(a, |v| matches!(v, Value::Str(_)))),
    ("isinteger", |a, _| pred(a, |v| matches!(v, Value::Int(_)))),
    ("isreal", |a, _| pred(a, |v| matches!(v, Value::Real(_)))),
    ("islist", |a, _| pred(a, |v| matches!(v, Value::List(_)))),
    ("isclassad", |a, _| pred(a, |v| matches!(v, Value::Ad(_)))),
    ("isboolean", |a, _| pred(a, |v| matches!(v, Value::Bool(_)))),
    // We have no absolute or relative time values.
    ("isabstime", |a, _| pred(a, |_| false)),
    ("isreltime", |a, _| pred(a, |_| false)),
    // Lists.
    ("member", |a, _| member(a, false)),
    ("identicalmember", |a, _| member(a, true)),
    ("size", size),
    ("sum", |a, _| sum_avg(a, false)),
    ("avg", |a, _| sum_avg(a, true)),
    ("min", |a, _| min_max(a, true)),
    ("max", |a, _| min_max(a, false)),
    ("anycompare", |a, _| list_compare(a, false)),
    ("allcompare", |a, _| list_compare(a, true)),
    // Time.
    ("time", time),
    ("splittime", split_time),
    ("formattime", format_time),
    ("interval", interval),
    // Strings.
    ("strcat", |a, e| strcat_join(a, e, false)),
    ("join", |a, e| strcat_join(a, e, true)),
    ("toupper", |a, e| change_case(a, e, true)),
    ("tolower", |a, e| change_case(a, e, false)),
    ("substr", substr),
    ("strcmp", |a, e| compare_strings(a, e, false)),
    ("stricmp", |a, e| compare_strings(a, e, true)),
    ("versioncmp", |a, e| compare_version(a, e, VersionOp::Cmp)),
    ("versionle", |a, e| compare_version(a, e, VersionOp::Le)),
    ("versionlt", |a, e| compare_version(a, e, VersionOp::Lt)),
    ("versionge", |a, e| compare_version(a, e, VersionOp::Ge)),
    ("versiongt", |a, e| compare_version(a, e, VersionOp::Gt)),
    ("versioneq", |a, e| compare_version(a, e, VersionOp::Eq)),
    ("version_in_range", version_in_range),
    // Regular expressions.
    ("regexp", regexp),
    ("regexpmember", regexp_member),
    ("regexps", |a, e| subst_pattern(a, e, "")),
    ("replace", |a, e| subst_pattern(a, e, "f")),
    ("replaceall", |a, e| subst_pattern(a, e, "fg")),
    // Conversions.
    ("int", conv_int_fn),
    ("real", conv_real_fn),
    ("string", conv_string_fn),
    ("bool", conv_bool_fn),
    // Arithmetic.
    ("floor", |a, _| do_round(a, RoundOp::Floor)),
    ("ceil", |a, _| do_round(a, RoundOp::Ceil)),
    ("ceiling", |a, _| do_round(a, RoundOp::Ceil)),
    ("round", |a, _| do_round(a, RoundOp::Round)),
    ("pow", pow),
    ("quantize", quantize),
    ("random", random),
    // Miscellaneous.
    ("debug", debug),
    ("stringlistsintersect", string_lists_intersect),
    // The functions HTCondor's compatibility layer registers.
    ("stringlistsize", string_list_size),
    ("stringlistsum", |a, _| string_list_summarize(a, Summary::Sum)),
    ("stringlistavg", |a, _| string_list_summarize(a, Summary::Avg)),
    ("stringlistmin", |a, _| string_list_summarize(a, Summary::Min)),
    ("stringlistmax", |a, _| string_list_summarize(a, Summary::Max)),
    ("stringlistmember", |a, e| string_list_member(a, e, false, false)),
    ("stringlistimember", |a, e| string_list_member(a, e, true, false)),
    ("stringlistsubsetmatch", |a, e| string_list_member(a, e, false, true)),
    ("stringlistisubsetmatch", |a, e| string_list_member(a, e, true, true)),
    ("stringlist_regexpmember", string_list_regexp_member),
    ("splitusername", |a, _| split_at(a, false)),
    ("splitslotname", |a, _| split_at(a, true)),
    ("split", split_arb),
    ("envv1tov2", env_v1_to_v2),
    ("mergeenvironment", merge_environment),
    ("argstolist", args_to_list),
    ("listtoargs", list_to_args),
];

/// The strict built-in named `lower` (already lower case).
fn strict(lower: &str) -> Option<StrictFn> {
    STRICT.iter().find(|(n, _)| *n == lower).map(|(_, f)| *f)
}

/// The names of every strict built-in, lower case.
pub fn strict_names() -> impl Iterator<Item = &'static str> {
    STRICT.iter().map(|(n, _)| *n)
}

// ---------------------------------------------------------------------------
// Shared helpers: conversions, comparisons, arithmetic.
// ---------------------------------------------------------------------------

/// The bytes of a C string: everything before the first NUL.
fn cstr(s: &str) -> &[u8] {
    let b = s.as_bytes();
    match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    }
}

/// Bytes back to a string value (lossily, should a cut split a character).
fn bytes_value(b: &[u8]) -> Value {
    Value::Str(String::from_utf8_lossy(b).into())
}

/// C's `isspace` in the "C" locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// HTCondor's `convertValueToStringValue`: strings as they are, other
/// scalars, lists and ads unparsed; undefined and error are passed back as
/// the failure.
///
/// A list or an ad unparses to at most four bytes per byte of its weight
/// (an escaped byte is four); one whose text might not fit the budget is
/// error before any of it is written.
fn to_str(v: &Value, env: &mut FnEnv<'_>) -> Result<String, Value> {
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
fn to_real(v: &Value) -> Result<f64, Value> {
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
fn to_int(v: &Value) -> Result<i64, Value> {
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

/// C's `strtod` on a byte string: the value and the number of bytes
/// consumed (0 when no number starts the string). Accepts leading
/// white space, a sign, decimal and hexadecimal floats, `inf`,
/// `infinity` and `nan`, case-insensitively.
fn strtod(s: &[u8]) -> (f64, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    while is_c_space(at(i)) {
        i += 1;
    }
    let num_start = i;
    let neg = at(i) == b'-';
    if matches!(at(i), b'+' | b'-') {
        i += 1;
    }
    let sign = if neg { -1.0 } else { 1.0 };
    let rest = &s[i.min(s.len())..];
    let starts_ci = |p: &[u8]| rest.len() >= p.len() && rest[..p.len()].eq_ignore_ascii_case(p);
    if starts_ci(b"infinity") {
        return (sign * f64::INFINITY, i + 8);
    }
    if starts_ci(b"inf") {
        return (sign * f64::INFINITY, i + 3);
    }
    if starts_ci(b"nan") {
        let mut n = 3;
        if rest.get(3) == Some(&b'(') {
            let close = rest[4..].iter().position(|&c| !(c.is_ascii_alphanumeric() || c == b'_'));
            if let Some(k) = close
                && rest[4 + k] == b')'
            {
                n = 4 + k + 1;
            }
        }
        return (sign * f64::NAN, i + n);
    }
    if at(i) == b'0'
        && matches!(at(i + 1), b'x' | b'X')
        && (at(i + 2).is_ascii_hexdigit() || (at(i + 2) == b'.' && at(i + 3).is_ascii_hexdigit()))
    {
        let (r, end) = hex_float(s, i + 2);
        return (sign * r, end);
    }
    // Decimal: digits, optional fraction, optional exponent.
    let mut j = i;
    let mut digits = 0;
    while at(j).is_ascii_digit() {
        j += 1;
        digits += 1;
    }
    if at(j) == b'.' {
        j += 1;
        while at(j).is_ascii_digit() {
            j += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return (0.0, 0);
    }
    if matches!(at(j), b'e' | b'E') {
        let mut k = j + 1;
        if matches!(at(k), b'+' | b'-') {
            k += 1;
        }
        if at(k).is_ascii_digit() {
            while at(k).is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    // The slice is ASCII by construction.
    let text = std::str::from_utf8(&s[num_start..j]).unwrap_or("0");
    (text.parse::<f64>().unwrap_or(0.0), j)
}

/// The hexadecimal part of `strtod`, starting just after `0x`.
fn hex_float(s: &[u8], start: usize) -> (f64, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = start;
    let mut mant: u64 = 0;
    let mut exp: i64 = 0;
    let mut seen_frac = false;
    loop {
        let c = at(i);
        if c == b'.' && !seen_frac {
            seen_frac = true;
            i += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else { break };
        if mant >> 59 == 0 {
            mant = mant * 16 + d as u64;
            if seen_frac {
                exp -= 4;
            }
        } else if !seen_frac {
            exp += 4;
        }
        i += 1;
    }
    if matches!(at(i), b'p' | b'P') {
        let mut k = i + 1;
        let eneg = at(k) == b'-';
        if matches!(at(k), b'+' | b'-') {
            k += 1;
        }
        if at(k).is_ascii_digit() {
            let mut e: i64 = 0;
            while at(k).is_ascii_digit() {
                e = (e * 10 + (at(k) - b'0') as i64).min(100_000);
                k += 1;
            }
            exp += if eneg { -e } else { e };
            i = k;
        }
    }
    (ldexp(mant as f64, exp), i)
}

/// `x * 2^e` without intermediate overflow.
fn ldexp(mut x: f64, e: i64) -> f64 {
    let mut e = e.clamp(-4000, 4000);
    while e > 1000 {
        x *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 {
        x *= 2f64.powi(-1000);
        e += 1000;
    }
    x * 2f64.powi(e as i32)
}

/// Byte-wise ASCII case-insensitive comparison (`strcasecmp`).
fn cmp_nocase(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
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
enum Num {
    I(i64),
    R(f64),
}

impl Num {
    fn real(self) -> f64 {
        match self {
            Num::I(i) => i as f64,
            Num::R(r) => r,
        }
    }
}

fn num_of(v: &Value) -> Option<Num> {
    match v {
        Value::Bool(b) => Some(Num::I(*b as i64)),
        Value::Int(i) => Some(Num::I(*i)),
        Value::Real(r) => Some(Num::R(*r)),
        _ => None,
    }
}

/// A real arithmetic result: +inf is an error, as in HTCondor.
fn real_result(r: f64) -> Value {
    if r == f64::INFINITY { Value::Error } else { Value::Real(r) }
}

/// HTCondor's `+` on two values (strict; booleans promote to integers;
/// integer overflow wraps).
fn add_values(a: &Value, b: &Value) -> Value {
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

fn pred(args: &[Value], p: fn(&Value) -> bool) -> Value {
    match args {
        [v] => Value::Bool(p(v)),
        _ => Value::Error,
    }
}

// ---------------------------------------------------------------------------
// Lists.
// ---------------------------------------------------------------------------

/// `member(x, list)` (`==`) and `identicalMember(x, list)` (`=?=`).
fn member(args: &[Value], identical: bool) -> Value {
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
fn size(args: &[Value], _: &mut FnEnv<'_>) -> Value {
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
fn sum_avg(args: &[Value], avg: bool) -> Value {
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
fn min_max(args: &[Value], min: bool) -> Value {
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
fn list_compare(args: &[Value], all: bool) -> Value {
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

// ---------------------------------------------------------------------------
// Strings.
// ---------------------------------------------------------------------------

/// `strcat(...)` and the three forms of `join`.
fn strcat_join(args: &[Value], env: &mut FnEnv<'_>, is_join: bool) -> Value {
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
fn change_case(args: &[Value], env: &mut FnEnv<'_>, upper: bool) -> Value {
    let [v] = args else { return Value::Error };
    match to_str(v, env) {
        Ok(s) => Value::string(if upper { s.to_ascii_uppercase() } else { s.to_ascii_lowercase() }),
        Err(e) => e,
    }
}

/// `substr(s, offset [, length])`, Perl-like, on bytes.
fn substr(args: &[Value], _: &mut FnEnv<'_>) -> Value {
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
fn compare_strings(args: &[Value], env: &mut FnEnv<'_>, nocase: bool) -> Value {
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
enum VersionOp {
    Cmp,
    Le,
    Lt,
    Ge,
    Gt,
    Eq,
}

/// `versioncmp` and `versionLT` etc.: strverscmp-like ordering.
fn compare_version(args: &[Value], env: &mut FnEnv<'_>, op: VersionOp) -> Value {
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
fn version_in_range(args: &[Value], env: &mut FnEnv<'_>) -> Value {
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
fn natural_cmp(a: &[u8], b: &[u8]) -> i64 {
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
fn split_at(args: &[Value], slot: bool) -> Value {
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
fn split_arb(args: &[Value], env: &mut FnEnv<'_>) -> Value {
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

// ---------------------------------------------------------------------------
// String lists ("a, b, c").
// ---------------------------------------------------------------------------

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
fn string_list_size(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let (list, delims) = match args {
        [Value::Str(l)] => (l, ", ".as_bytes()),
        [Value::Str(l), Value::Str(d)] => (l, cstr(d)),
        _ => return Value::Error,
    };
    Value::Int(string_tokens(list.as_bytes(), delims).count() as i64)
}

#[derive(Clone, Copy, PartialEq)]
enum Summary {
    Sum,
    Avg,
    Min,
    Max,
}

/// `stringListSum`, `stringListAvg`, `stringListMin`, `stringListMax`.
/// The arithmetic is in doubles; the result is an integer unless an item
/// has characters other than sign and digits. As in HTCondor, min starts
/// from `FLT_MAX` and max from `FLT_MIN` (the smallest positive float).
fn string_list_summarize(args: &[Value], kind: Summary) -> Value {
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
fn string_list_member(args: &[Value], env: &mut FnEnv<'_>, nocase: bool, subset: bool) -> Value {
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
fn string_lists_intersect(args: &[Value], env: &mut FnEnv<'_>) -> Value {
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
fn string_list_regexp_member(args: &[Value], env: &mut FnEnv<'_>) -> Value {
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

// ---------------------------------------------------------------------------
// Regular expressions.
// ---------------------------------------------------------------------------

/// PCRE options HTCondor passes.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct RegexFlags {
    caseless: bool,
    multiline: bool,
    dotall: bool,
    extended: bool,
}

impl RegexFlags {
    /// The option letters of `regexp()` and friends (lower case only, as
    /// HTCondor's `regexp_helper` checks them).
    fn from_options(opts: &str) -> RegexFlags {
        RegexFlags {
            caseless: opts.contains('i'),
            multiline: opts.contains('m'),
            dotall: opts.contains('s'),
            extended: opts.contains('x'),
        }
    }
}

/// Compiled patterns are shared, never cloned: a clone of a `Regex` starts
/// a cache of its own, which costs an allocation at its first search.
type RegexCache = Vec<(String, RegexFlags, Option<Arc<regex::bytes::Regex>>)>;

thread_local! {
    static REGEX_CACHE: RefCell<RegexCache> = const { RefCell::new(Vec::new()) };
}

/// The steps a pattern's compilation costs when it is not cached: the
/// compiled program is bounded ([`REGEX_PROGRAM_BYTES`]), so is its work.
const REGEX_COMPILE_STEPS: u64 = 256;

/// The largest compiled program a pattern may make. Matching time is
/// bounded by the program's size times the target's (the regex crate never
/// backtracks), so this and the cost of a search ([`search`]) bound the
/// time one match takes. Real patterns compile to a few kilobytes.
const REGEX_PROGRAM_BYTES: usize = 1 << 16;

/// Searches `t` for `re`, charging the work: one step per byte of the
/// target. `None` when the budget is spent.
fn search(re: &regex::bytes::Regex, t: &[u8], env: &mut FnEnv<'_>) -> Option<bool> {
    if !env.budget.read(t.len() as u64 * crate::budget::BYTES_PER_STEP) {
        return None;
    }
    Some(re.is_match(t))
}

/// Compiles a pattern as PCRE would see it (byte-oriented, ASCII classes),
/// falling back to Unicode mode for patterns that need it; `None` for an
/// invalid (or unsupported) pattern, or when the budget cannot pay for
/// compiling it. Recently used patterns are cached.
fn compile_regex(
    pattern: &str,
    flags: RegexFlags,
    env: &mut FnEnv<'_>,
) -> Option<Arc<regex::bytes::Regex>> {
    const CACHE_SIZE: usize = 64;
    // Only short patterns are kept: the cache's memory stays small whatever
    // patterns users write.
    const CACHED_PATTERN: usize = 1024;
    if let Some(hit) = REGEX_CACHE.with(|c| {
        c.borrow().iter().find(|(p, f, _)| p == pattern && *f == flags).map(|(_, _, r)| r.clone())
    }) {
        return hit;
    }
    if !env.budget.read(REGEX_COMPILE_STEPS * crate::budget::BYTES_PER_STEP) {
        return None;
    }
    let pat = std::str::from_utf8(cstr(pattern)).unwrap_or(pattern);
    let build = |unicode: bool| {
        regex::bytes::RegexBuilder::new(pat)
            .case_insensitive(flags.caseless)
            .multi_line(flags.multiline)
            .dot_matches_new_line(flags.dotall)
            .ignore_whitespace(flags.extended)
            .unicode(unicode)
            .size_limit(REGEX_PROGRAM_BYTES)
            .dfa_size_limit(1 << 18)
            .build()
            .ok()
    };
    let re = build(false).or_else(|| build(true)).map(Arc::new);
    if pattern.len() > CACHED_PATTERN {
        return re;
    }
    REGEX_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_SIZE {
            c.remove(0);
        }
        c.push((pattern.to_string(), flags, re.clone()));
    });
    re
}

/// Checks the arguments of the regex functions: error beats undefined;
/// the trailing options argument, when present, must be a string.
/// Returns the options string or the value to answer with.
fn regex_args(args: &[Value], fixed: usize) -> Result<String, Value> {
    if args.iter().any(Value::is_error) {
        return Err(Value::Error);
    }
    if args.iter().any(Value::is_undefined) {
        return Err(Value::Undefined);
    }
    match args.get(fixed) {
        None => Ok(String::new()),
        Some(Value::Str(o)) => Ok(o.to_string()),
        Some(_) => Err(Value::Error),
    }
}

/// `regexp(pattern, target [, options])`.
fn regexp(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    if !(2..=3).contains(&args.len()) {
        return Value::Error;
    }
    let opts = match regex_args(args, 2) {
        Ok(o) => o,
        Err(v) => return v,
    };
    let (Value::Str(p), Value::Str(t)) = (&args[0], &args[1]) else { return Value::Error };
    regexp_helper(p, t, None, &opts, env)
}

/// `regexpMember(pattern, list [, options])`: true when an element
/// matches; undefined when none does but some element is undefined.
fn regexp_member(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    if !(2..=3).contains(&args.len()) {
        return Value::Error;
    }
    let opts = match regex_args(args, 2) {
        Ok(o) => o,
        Err(v) => return v,
    };
    let (Value::Str(p), Value::List(items)) = (&args[0], &args[1]) else { return Value::Error };
    // Compiled once for the whole list; a pattern that does not compile
    // matches no element (each element's test is an error, skipped).
    let re = compile_regex(p, RegexFlags::from_options(&opts), env);
    if env.budget.is_spent() {
        return Value::Error;
    }
    let mut maybe_undefined = false;
    for e in items.iter() {
        match e {
            Value::Str(t) => {
                let Some(re) = &re else { continue };
                match search(re, cstr(t), env) {
                    Some(true) => return Value::Bool(true),
                    Some(false) => {}
                    None => return Value::Error,
                }
            }
            Value::Undefined => maybe_undefined = true,
            _ => return Value::Error,
        }
    }
    if maybe_undefined { Value::Undefined } else { Value::Bool(false) }
}

/// `regexps`, `replace` and `replaceall` (`extra` holds the option
/// letters the function name implies).
fn subst_pattern(args: &[Value], env: &mut FnEnv<'_>, extra: &str) -> Value {
    if !(3..=4).contains(&args.len()) {
        return Value::Error;
    }
    let mut opts = match regex_args(args, 3) {
        Ok(o) => o,
        Err(v) => return v,
    };
    opts.push_str(extra);
    let (Value::Str(p), Value::Str(t), Value::Str(r)) = (&args[0], &args[1], &args[2]) else {
        return Value::Error;
    };
    regexp_helper(p, t, Some(r), &opts, env)
}

/// HTCondor's `regexp_helper`: a match test, or a substitution whose
/// result is only the substituted text unless `f` (full target) is given;
/// `g` substitutes every match. `\0`..`\9` in the replacement are groups;
/// a group the pattern did not reach is an error.
///
/// The substitution's result is built within the budget: a replacement
/// that repeats its groups many times over a long target is error before
/// it outgrows it.
fn regexp_helper(
    pattern: &str,
    target: &str,
    replace: Option<&str>,
    opts: &str,
    env: &mut FnEnv<'_>,
) -> Value {
    let flags = RegexFlags::from_options(opts);
    let Some(re) = compile_regex(pattern, flags, env) else { return Value::Error };
    let t = cstr(target);
    let Some(replace) = replace else {
        return search(&re, t, env).map_or(Value::Error, Value::Bool);
    };
    if !env.budget.read(t.len() as u64 * crate::budget::BYTES_PER_STEP) {
        return Value::Error;
    }
    let replace = cstr(replace);
    let full = opts.contains('f');
    let all = opts.contains('g');
    let mut out: Vec<u8> = Vec::new();
    let mut idx = 0usize;
    let mut empty_match = false;
    let mut locs = re.capture_locations();
    loop {
        if empty_match {
            // PCRE retries at the same place for a non-empty anchored match;
            // we treat that retry as failing (the usual outcome) and step
            // over one byte. At the end of the target HTCondor steps past
            // the terminator, and PCRE then rejects the offset: error.
            if idx >= t.len() {
                return Value::Error;
            }
            out.push(t[idx]);
            idx += 1;
            empty_match = false;
            continue;
        }
        let Some(m) = re.captures_read_at(&mut locs, t, idx) else { break };
        let ngroups = (0..locs.len()).rev().find(|&g| locs.get(g).is_some()).map_or(0, |g| g + 1);
        if full {
            out.extend_from_slice(&t[idx..m.start()]);
        }
        let mut k = 0;
        while k < replace.len() {
            let c = replace[k];
            if c == b'\\' && k + 1 < replace.len() && replace[k + 1].is_ascii_digit() {
                let g = (replace[k + 1] - b'0') as usize;
                if g >= ngroups {
                    return Value::Error;
                }
                if let Some((s, e)) = locs.get(g) {
                    if !env.fits(out.len() + (e - s)) {
                        return Value::Error;
                    }
                    out.extend_from_slice(&t[s..e]);
                }
                k += 2;
            } else {
                out.push(c);
                k += 1;
            }
        }
        if !env.fits(out.len()) {
            return Value::Error;
        }
        idx = m.end();
        if m.start() == m.end() {
            empty_match = true;
        }
        if !all {
            break;
        }
    }
    if full {
        out.extend_from_slice(&t[idx.min(t.len())..]);
    }
    bytes_value(&out)
}

// ---------------------------------------------------------------------------
// Conversions and arithmetic.
// ---------------------------------------------------------------------------

/// `int(x)`.
fn conv_int_fn(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    to_int(v).map_or_else(|e| e, Value::Int)
}

/// `real(x)`.
fn conv_real_fn(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    to_real(v).map_or_else(|e| e, Value::Real)
}

/// `string(x)`.
fn conv_string_fn(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    to_str(v, env).map_or_else(|e| e, Value::string)
}

/// `bool(x)`: numbers are true when non-zero; the strings "true" and
/// "false" (any case) convert, other strings are undefined.
fn conv_bool_fn(args: &[Value], _: &mut FnEnv<'_>) -> Value {
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
enum RoundOp {
    Floor,
    Ceil,
    Round,
}

/// `floor`, `ceiling` and `round` (half to even); integers pass through,
/// anything else goes through `real()` (undefined is an error).
fn do_round(args: &[Value], op: RoundOp) -> Value {
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
fn pow(args: &[Value], _: &mut FnEnv<'_>) -> Value {
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
fn quantize(args: &[Value], _: &mut FnEnv<'_>) -> Value {
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
fn random(args: &[Value], env: &mut FnEnv<'_>) -> Value {
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
fn debug(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    match args {
        [v] => v.clone(),
        _ => Value::Error,
    }
}

// ---------------------------------------------------------------------------
// Time.
// ---------------------------------------------------------------------------

/// `time()`: the evaluation's now.
fn time(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    if args.is_empty() { Value::Int(env.now) } else { Value::Error }
}

/// `interval(secs)`: `[days+]hh:mm:ss` with leading zero fields dropped.
fn interval(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    let Ok(secs) = to_int(v) else { return Value::Error };
    // HTCondor reads the value into a C int.
    let tot = secs as i32;
    let days = tot / 86400;
    let rem = tot % 86400;
    let (hours, min, sec) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    let s = if days != 0 {
        format!("{days}+{:02}:{:02}:{:02}", hours.abs(), min.abs(), sec.abs())
    } else if hours != 0 {
        format!("{hours}:{:02}:{:02}", min.abs(), sec.abs())
    } else if min != 0 {
        format!("{min}:{:02}", sec.abs())
    } else {
        format!("{sec}")
    };
    Value::string(s)
}

/// The offset of local time from UTC at `t`, in seconds.
fn local_offset(t: i64) -> i64 {
    jiff::Timestamp::from_second(t)
        .map_or(0, |ts| i64::from(jiff::tz::TimeZone::system().to_offset(ts).seconds()))
}

/// The local time zone's standard abbreviation, for `%Z` (HTCondor passes
/// no zone in its `struct tm`, so glibc falls back to `tzname[0]`).
fn local_zone_name() -> String {
    if let Ok(tz) = std::env::var("TZ") {
        let tz = tz.trim_start_matches(':');
        let name: String = tz.chars().take_while(char::is_ascii_alphabetic).collect();
        if name.len() >= 3 && !tz.contains('/') {
            return name;
        }
    }
    if local_offset(0) == 0 { "UTC".to_string() } else { String::new() }
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

/// (year, month 1-12, day) to days since 1970-01-01.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// HTCondor's `day_numbers`: weekday (0 = Sunday) and day of the year
/// (0-based) of a date, with its C arithmetic.
fn day_numbers(year: i64, month: i64, day: i64) -> (i64, i64) {
    let leap = |y: i64| {
        let (m4, m400) = (y % 4, y % 400);
        m4 == 0 && m400 != 100 && m400 != 200 && m400 != 300
    };
    let fixed = |y: i64, m: i64, d: i64| {
        let adj = if m <= 2 {
            0
        } else if leap(y) {
            -1
        } else {
            -2
        };
        365 * (y - 1) + (y - 1) / 4 - (y - 1) / 100 + (y - 1) / 400 + (367 * m - 362) / 12 + adj + d
    };
    let f = fixed(year, month, day);
    (f % 7, f - fixed(year, 1, 1))
}

/// The broken-down time HTCondor hands to `strftime`.
struct Tm {
    year: i64,
    mon: i64,
    mday: i64,
    hour: i64,
    min: i64,
    sec: i64,
    wday: i64,
    yday: i64,
}

impl Tm {
    /// Components of a time value as HTCondor's `splitTime` computes them:
    /// local time (`None` when out of range).
    fn from_epoch(t: i64) -> Option<(Tm, i64)> {
        let off = local_offset(t);
        let local = t.checked_add(off)?;
        let days = local.div_euclid(86_400);
        let secs = local.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        if i32::try_from(y - 1900).is_err() {
            return None;
        }
        let (wday, yday) = day_numbers(y, m, d);
        let tm = Tm {
            year: y,
            mon: m - 1,
            mday: d,
            hour: secs / 3600,
            min: secs % 3600 / 60,
            sec: secs % 60,
            wday,
            yday,
        };
        Some((tm, off))
    }

    /// What `mktime` would give for these (local) components.
    fn epoch(&self) -> i64 {
        let naive = days_from_civil(self.year, self.mon + 1, self.mday)
            .saturating_mul(86_400)
            .saturating_add(self.hour * 3600 + self.min * 60 + self.sec);
        naive.saturating_sub(local_offset(naive))
    }
}

/// A time argument of `formatTime` / `splitTime` as seconds: integers as
/// they are, reals through a C `int` cast.
fn time_arg(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::Real(r) => Some(if r.is_nan() || *r >= 2_147_483_648.0 || *r <= -2_147_483_649.0 {
            i32::MIN as i64
        } else {
            *r as i64
        }),
        _ => None,
    }
}

/// `splitTime(t)`: an ad with the local-time components of `t`.
fn split_time(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    if v.is_undefined() {
        return Value::Undefined;
    }
    let Some(t) = time_arg(v) else { return Value::Error };
    let Some((tm, off)) = Tm::from_epoch(t) else { return Value::Error };
    let mut ad = ClassAd::new();
    ad.insert_value("Type", "AbsoluteTime");
    ad.insert_value("Year", Value::Int(tm.year));
    ad.insert_value("Month", Value::Int(tm.mon + 1));
    ad.insert_value("Day", Value::Int(tm.mday));
    ad.insert_value("Hours", Value::Int(tm.hour));
    ad.insert_value("Minutes", Value::Int(tm.min));
    ad.insert_value("Seconds", Value::Int(tm.sec));
    ad.insert_value("Offset", Value::Int(off));
    Value::Ad(Arc::new(ad))
}

/// `formatTime([t [, format]])`: `strftime` of `t` (default now) in local
/// time, format default `%c`. `t` may also be an ad such as `splitTime`
/// makes.
fn format_time(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    let (tm, epoch) = match args.first() {
        None => match Tm::from_epoch(env.now) {
            Some((tm, _)) => (tm, env.now),
            None => return Value::Error,
        },
        Some(_) if args.len() > 2 => return Value::Error,
        Some(Value::Ad(ad)) => {
            let now = env.now;
            let mut field =
                |name: &str| match crate::eval::eval_attr_within(ad, name, now, env.budget) {
                    Value::Int(i) => Some(i as i32 as i64),
                    _ => None,
                };
            let year = field("Year").unwrap_or(1900);
            let mon = field("Month").map_or(0, |m| m - 1);
            let mday = field("Day").unwrap_or(0);
            let (wday, yday) = day_numbers(year, mon + 1, mday);
            let tm = Tm {
                year,
                mon,
                mday,
                hour: field("Hours").unwrap_or(0),
                min: field("Minutes").unwrap_or(0),
                sec: field("Seconds").unwrap_or(0),
                wday,
                yday,
            };
            let e = tm.epoch();
            (tm, e)
        }
        Some(v) => match time_arg(v).and_then(Tm::from_epoch) {
            Some((tm, _)) => {
                let e = tm.epoch();
                (tm, e)
            }
            None => return Value::Error,
        },
    };
    let fmt: &[u8] = match args.get(1) {
        None => b"%c",
        Some(Value::Str(f)) => cstr(f),
        Some(_) => return Value::Error,
    };
    let zone = local_zone_name();
    let mut out = Vec::new();
    if !strftime(fmt, &tm, epoch, &zone, &mut out) {
        out.clear();
    }
    bytes_value(&out)
}

/// HTCondor formats into a 1024-byte buffer; longer results fail.
const STRFTIME_MAX: usize = 1023;

const WEEKDAYS: [&str; 7] =
    ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// glibc's ISO 8601 week helper: days since the start of the ISO year.
fn iso_week_days(yday: i64, wday: i64) -> i64 {
    const BIG_ENOUGH_MULTIPLE_OF_7: i64 = (366 / 7 + 2) * 7;
    yday - (yday - wday + 4 + BIG_ENOUGH_MULTIPLE_OF_7) % 7 + 4 - 1
}

/// The ISO 8601 week-based year and week number.
fn iso_week(tm: &Tm) -> (i64, i64) {
    let is_leap = |y: i64| y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let mut year = tm.year;
    let mut days = iso_week_days(tm.yday, tm.wday);
    if days < 0 {
        year -= 1;
        days = iso_week_days(tm.yday + 365 + is_leap(year) as i64, tm.wday);
    } else {
        let d = iso_week_days(tm.yday - (365 + is_leap(year) as i64), tm.wday);
        if d >= 0 {
            year += 1;
            days = d;
        }
    }
    (year, days / 7 + 1)
}

/// C-locale `strftime` with glibc's flags (`_ - 0 ^ #`), widths and the
/// `E`/`O` modifiers. Returns false when the result would not fit
/// HTCondor's buffer.
fn strftime(fmt: &[u8], tm: &Tm, epoch: i64, zone: &str, out: &mut Vec<u8>) -> bool {
    let name = |table: &[&str], i: i64, abbrev: bool| -> String {
        match usize::try_from(i).ok().and_then(|i| table.get(i)) {
            Some(n) if abbrev => n[..3].to_string(),
            Some(n) => n.to_string(),
            None => "?".to_string(),
        }
    };
    let hour12 = if tm.hour % 12 == 0 { 12 } else { tm.hour % 12 };
    let mut i = 0;
    while i < fmt.len() {
        if out.len() > STRFTIME_MAX {
            return false;
        }
        let c = fmt[i];
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        let spec_start = i;
        i += 1;
        let mut pad: Option<u8> = None;
        let mut upcase = false;
        let mut swapcase = false;
        while let Some(&f) = fmt.get(i) {
            match f {
                b'_' | b'-' | b'0' => pad = Some(f),
                b'^' => upcase = true,
                b'#' => swapcase = true,
                _ => break,
            }
            i += 1;
        }
        let mut width: Option<usize> = None;
        while let Some(d) = fmt.get(i).filter(|d| d.is_ascii_digit()) {
            width = Some(width.unwrap_or(0).saturating_mul(10).saturating_add((d - b'0') as usize));
            i += 1;
        }
        if width.is_some_and(|w| w > STRFTIME_MAX) {
            return false;
        }
        if matches!(fmt.get(i), Some(b'E' | b'O')) {
            i += 1;
        }
        let conv = fmt.get(i).copied().unwrap_or(0);
        if conv != 0 {
            i += 1;
        }
        enum Piece {
            Num(i64, usize, u8),
            Text(String, bool),
            Sub(&'static str),
        }
        let piece = match conv {
            b'a' => Piece::Text(name(&WEEKDAYS, tm.wday, true), true),
            b'A' => Piece::Text(name(&WEEKDAYS, tm.wday, false), true),
            b'b' | b'h' => Piece::Text(name(&MONTHS, tm.mon, true), true),
            b'B' => Piece::Text(name(&MONTHS, tm.mon, false), true),
            b'c' => Piece::Sub("%a %b %e %H:%M:%S %Y"),
            b'C' => Piece::Num(tm.year.div_euclid(100), 2, b'0'),
            b'd' => Piece::Num(tm.mday, 2, b'0'),
            b'D' | b'x' => Piece::Sub("%m/%d/%y"),
            b'e' => Piece::Num(tm.mday, 2, b' '),
            b'F' => Piece::Sub("%Y-%m-%d"),
            b'g' => Piece::Num(iso_week(tm).0.rem_euclid(100), 2, b'0'),
            b'G' => Piece::Num(iso_week(tm).0, 1, b'0'),
            b'H' => Piece::Num(tm.hour, 2, b'0'),
            b'I' => Piece::Num(hour12, 2, b'0'),
            b'j' => Piece::Num(tm.yday + 1, 3, b'0'),
            b'k' => Piece::Num(tm.hour, 2, b' '),
            b'l' => Piece::Num(hour12, 2, b' '),
            b'm' => Piece::Num(tm.mon + 1, 2, b'0'),
            b'M' => Piece::Num(tm.min, 2, b'0'),
            b'n' => Piece::Text("\n".to_string(), false),
            b'p' => Piece::Text(if tm.hour > 11 { "PM" } else { "AM" }.to_string(), false),
            b'P' => Piece::Text(if tm.hour > 11 { "pm" } else { "am" }.to_string(), false),
            b'r' => Piece::Sub("%I:%M:%S %p"),
            b'R' => Piece::Sub("%H:%M"),
            b's' => Piece::Num(epoch, 1, b'0'),
            b'S' => Piece::Num(tm.sec, 2, b'0'),
            b't' => Piece::Text("\t".to_string(), false),
            b'T' | b'X' => Piece::Sub("%H:%M:%S"),
            b'u' => Piece::Num((tm.wday - 1).rem_euclid(7) + 1, 1, b'0'),
            b'U' => Piece::Num((tm.yday - tm.wday + 7) / 7, 2, b'0'),
            b'V' => Piece::Num(iso_week(tm).1, 2, b'0'),
            b'w' => Piece::Num(tm.wday, 1, b'0'),
            b'W' => Piece::Num((tm.yday - (tm.wday - 1 + 7) % 7 + 7) / 7, 2, b'0'),
            b'y' => Piece::Num(tm.year.rem_euclid(100), 2, b'0'),
            b'Y' => Piece::Num(tm.year, 1, b'0'),
            // HTCondor's struct tm has a zero UTC offset and no zone name.
            b'z' => Piece::Text("+0000".to_string(), false),
            b'Z' => Piece::Text(zone.to_string(), false),
            b'%' => Piece::Text("%".to_string(), false),
            _ => {
                out.extend_from_slice(&fmt[spec_start..i]);
                continue;
            }
        };
        let mut text: Vec<u8> = match piece {
            Piece::Num(v, default_width, default_pad) => {
                let digits = v.unsigned_abs().to_string();
                let sign = if v < 0 { "-" } else { "" };
                let w = width.unwrap_or(default_width);
                let fill = w.saturating_sub(digits.len() + sign.len());
                match pad.unwrap_or(default_pad) {
                    b'-' => format!("{sign}{digits}"),
                    b'0' => format!("{sign}{}{digits}", "0".repeat(fill)),
                    _ => format!("{}{sign}{digits}", " ".repeat(fill)),
                }
                .into_bytes()
            }
            Piece::Text(s, is_name) => {
                let s = if swapcase && is_name {
                    s.to_ascii_uppercase()
                } else if swapcase {
                    s.to_ascii_lowercase()
                } else {
                    s
                };
                pad_text(s.into_bytes(), width, pad)
            }
            Piece::Sub(sub) => {
                let mut inner = Vec::new();
                if !strftime(sub.as_bytes(), tm, epoch, zone, &mut inner) {
                    return false;
                }
                pad_text(inner, width, pad)
            }
        };
        if upcase {
            text.make_ascii_uppercase();
        }
        out.extend_from_slice(&text);
    }
    out.len() <= STRFTIME_MAX
}

/// Left-pads a text conversion to `width` (spaces, or zeros with `0`).
fn pad_text(s: Vec<u8>, width: Option<usize>, pad: Option<u8>) -> Vec<u8> {
    let w = width.unwrap_or(0);
    if w <= s.len() || pad == Some(b'-') {
        return s;
    }
    let fill = if pad == Some(b'0') { b'0' } else { b' ' };
    let mut v = vec![fill; w - s.len()];
    v.extend_from_slice(&s);
    v
}

// ---------------------------------------------------------------------------
// Environment and argument strings (HTCondor's Env and ArgList).
// ---------------------------------------------------------------------------

/// An environment: variables in byte order; `None` marks an entry kept
/// verbatim without `=` (an unexpanded `$$()` macro).
type EnvTable = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// HTCondor's `Env::SetEnvWithErrorMessage` on one `name=value` entry.
fn env_set(env: &mut EnvTable, entry: &[u8]) -> bool {
    if entry.is_empty() {
        return false;
    }
    match entry.iter().position(|&c| c == b'=') {
        None if entry.windows(2).any(|w| w == b"$$") => {
            env.insert(entry.to_vec(), None);
            true
        }
        None | Some(0) => false,
        Some(eq) => {
            env.insert(entry[..eq].to_vec(), Some(entry[eq + 1..].to_vec()));
            true
        }
    }
}

/// The V2 (raw) form of an environment: quoted entries joined by spaces.
fn env_to_v2(env: &EnvTable) -> Value {
    let mut out = Vec::new();
    for (k, v) in env {
        let mut entry = k.clone();
        if let Some(v) = v {
            entry.push(b'=');
            entry.extend_from_slice(v);
        }
        append_arg(&entry, &mut out);
    }
    bytes_value(&out)
}

/// HTCondor's `append_arg`: V2 argument quoting with single quotes.
fn append_arg(arg: &[u8], result: &mut Vec<u8>) {
    if !result.is_empty() {
        result.push(b' ');
    }
    if arg.is_empty() {
        result.extend_from_slice(b"''");
    }
    for &c in arg {
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\'') {
            if result.last() == Some(&b'\'') {
                result.pop();
            } else {
                result.push(b'\'');
            }
            if c == b'\'' {
                result.push(b'\'');
            }
            result.push(c);
            result.push(b'\'');
        } else {
            result.push(c);
        }
    }
}

/// HTCondor's `split_args` (V2 syntax): white space separates, single
/// quotes group, a doubled quote inside quotes is a quote. `None` for an
/// unbalanced quote.
fn split_args(s: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut parsed = false;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'\'' => {
                parsed = true;
                i += 1;
                loop {
                    match s.get(i) {
                        None => return None,
                        Some(b'\'') if s.get(i + 1) == Some(&b'\'') => {
                            buf.push(b'\'');
                            i += 2;
                        }
                        Some(b'\'') => {
                            i += 1;
                            break;
                        }
                        Some(&c) => {
                            buf.push(c);
                            i += 1;
                        }
                    }
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                if parsed {
                    parsed = false;
                    out.push(std::mem::take(&mut buf));
                }
            }
            c => {
                parsed = true;
                buf.push(c);
                i += 1;
            }
        }
    }
    if parsed {
        out.push(buf);
    }
    Some(out)
}

/// `envV1ToV2(env)`: an old-syntax (`;`-separated) environment in the
/// new syntax; undefined stays undefined.
fn env_v1_to_v2(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    let s = match v {
        Value::Undefined => return Value::Undefined,
        Value::Str(s) => cstr(s),
        _ => return Value::Error,
    };
    let mut env = EnvTable::new();
    if s.is_empty() {
        return env_to_v2(&env);
    }
    let mut delim = b';';
    let mut input = s;
    let first = s[0];
    if first == delim {
        input = &s[1..];
    } else if b"!#$%&*+,-/:;<>?@^`|~\x1F".contains(&first) {
        delim = first;
        input = &s[1..];
    }
    let mut pos = 0;
    while pos < input.len() {
        while pos < input.len() && matches!(input[pos], b' ' | b'\t' | b'\n' | b'\r') {
            pos += 1;
        }
        let mut entry = Vec::new();
        while pos < input.len() {
            let c = input[pos];
            pos += 1;
            if c == b'\n' || c == delim {
                break;
            }
            entry.push(c);
        }
        if !entry.is_empty() && !env_set(&mut env, &entry) {
            return Value::Error;
        }
    }
    env_to_v2(&env)
}

/// `mergeEnvironment(env1, ...)`: V2 environments merged, later wins;
/// undefined arguments are skipped.
fn merge_environment(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let mut env = EnvTable::new();
    for a in args {
        let s = match a {
            Value::Undefined => continue,
            Value::Str(s) => cstr(s),
            _ => return Value::Error,
        };
        let Some(entries) = split_args(s) else { return Value::Error };
        for e in entries {
            if !env_set(&mut env, &e) {
                return Value::Error;
            }
        }
    }
    env_to_v2(&env)
}

/// The optional syntax-version argument of `argsToList`/`listToArgs`.
fn args_version(args: &[Value]) -> Option<i32> {
    match args.get(1) {
        None => Some(2),
        Some(Value::Int(v)) => Some(*v as i32).filter(|v| *v == 1 || *v == 2),
        Some(_) => None,
    }
}

/// `argsToList(args [, version])`: an argument string as a list.
fn args_to_list(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    if !(1..=2).contains(&args.len()) {
        return Value::Error;
    }
    let Some(version) = args_version(args) else { return Value::Error };
    let Value::Str(s) = &args[0] else { return Value::Error };
    let s = cstr(s);
    let parts = if version == 1 {
        s.split(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
            .filter(|p| !p.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    } else {
        match split_args(s) {
            Some(p) => p,
            None => return Value::Error,
        }
    };
    Value::list(parts.iter().map(|p| bytes_value(p)).collect())
}

/// `listToArgs(list [, version])`: a list of strings as an argument string.
fn list_to_args(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    if !(1..=2).contains(&args.len()) {
        return Value::Error;
    }
    let Some(version) = args_version(args) else { return Value::Error };
    let Value::List(items) = &args[0] else { return Value::Error };
    let mut out = Vec::new();
    for e in items.iter() {
        let Value::Str(s) = e else { return Value::Error };
        let s = cstr(s);
        if version == 1 {
            if s.iter().any(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')) {
                return Value::Error;
            }
            if !out.is_empty() {
                out.push(b' ');
            }
            out.extend_from_slice(s);
        } else {
            append_arg(s, &mut out);
        }
    }
    bytes_value(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &[Value]) -> Value {
        let mut rng = Rng::seeded(7);
        let mut budget = Budget::default_budget();
        let mut env = FnEnv { now: 951_782_400, rng: &mut rng, budget: &mut budget };
        match lookup(name) {
            Some(Builtin::Strict(f)) => f(args, &mut env),
            other => panic!("{name} is not a strict builtin: {other:?}"),
        }
    }

    fn s(x: &str) -> Value {
        Value::string(x)
    }
    fn i(x: i64) -> Value {
        Value::Int(x)
    }
    fn r(x: f64) -> Value {
        Value::Real(x)
    }
    fn b(x: bool) -> Value {
        Value::Bool(x)
    }
    fn l(items: &[Value]) -> Value {
        Value::list(items.to_vec())
    }
    fn ad(attrs: &[(&str, Value)]) -> Value {
        let mut a = ClassAd::new();
        for (k, v) in attrs {
            a.insert_value(*k, v.clone());
        }
        Value::Ad(Arc::new(a))
    }
    const U: Value = Value::Undefined;
    const E: Value = Value::Error;

    fn strs(items: &[&str]) -> Value {
        Value::list(items.iter().map(|x| s(x)).collect())
    }

    #[test]
    fn lookup_names() {
        assert!(matches!(lookup("ifThenElse"), Some(Builtin::Special(SpecialFn::IfThenElse))));
        assert!(matches!(lookup("EVAL"), Some(Builtin::Special(SpecialFn::Eval))));
        assert!(matches!(lookup("unparse"), Some(Builtin::Special(SpecialFn::Unparse))));
        for n in
            ["StringListMember", "versionGT", "stringList_regexpMember", "CEIL", "splitSlotName"]
        {
            assert!(matches!(lookup(n), Some(Builtin::Strict(_))), "{n}");
        }
        for n in [
            "abs",
            "sqrt",
            "log",
            "nosuchfunction",
            "sprintf",
            "upperCase",
            "stringListRegexpMember",
        ] {
            assert!(lookup(n).is_none(), "{n}");
        }
    }

    #[test]
    fn type_predicates() {
        assert_eq!(call("isError", &[E]), b(true));
        assert_eq!(call("isString", &[U]), b(false));
        assert_eq!(call("isInteger", &[i(1)]), b(true));
        assert_eq!(call("isInteger", &[r(1.0)]), b(false));
        assert_eq!(call("isReal", &[i(1)]), b(false));
        assert_eq!(call("isReal", &[r(1.0)]), b(true));
        assert_eq!(call("isBoolean", &[i(1)]), b(false));
        assert_eq!(call("isBoolean", &[b(false)]), b(true));
        assert_eq!(call("isList", &[l(&[])]), b(true));
        assert_eq!(call("isClassAd", &[ad(&[])]), b(true));
        assert_eq!(call("isUndefined", &[U]), b(true));
        assert_eq!(call("isUndefined", &[i(3)]), b(false));
        assert_eq!(call("isAbstime", &[i(3)]), b(false));
        assert_eq!(call("isReltime", &[i(3)]), b(false));
        assert_eq!(call("isUndefined", &[]), E);
        assert_eq!(call("isString", &[s("a"), s("b")]), E);
    }

    #[test]
    fn compare_values_rules() {
        assert_eq!(compare_values("==", &s("abc"), &s("ABC")), b(true));
        assert_eq!(compare_values("<", &s("ABC"), &s("abd")), b(true));
        assert_eq!(compare_values("<=", &s("abc"), &s("ABC")), b(true));
        assert_eq!(compare_values("==", &s("1"), &i(1)), E);
        assert_eq!(compare_values("==", &i(2), &r(2.0)), b(true));
        assert_eq!(compare_values("==", &b(true), &i(1)), b(true));
        assert_eq!(compare_values("<", &b(false), &r(0.5)), b(true));
        assert_eq!(compare_values("==", &U, &U), U);
        assert_eq!(compare_values("==", &U, &E), E);
        assert_eq!(compare_values("==", &l(&[]), &i(1)), E);
        assert_eq!(compare_values("!=", &r(f64::NAN), &r(f64::NAN)), b(true));
        assert_eq!(compare_values("==", &r(f64::NAN), &r(f64::NAN)), b(false));
        assert_eq!(compare_values("is", &i(1), &r(1.0)), b(false));
        assert_eq!(compare_values("=?=", &b(true), &i(1)), b(false));
        assert_eq!(compare_values("is", &s("1"), &i(1)), b(false));
        assert_eq!(compare_values("is", &s("a"), &s("A")), b(false));
        assert_eq!(compare_values("is", &U, &U), b(true));
        assert_eq!(compare_values("isnt", &U, &i(1)), b(true));
        assert_eq!(compare_values("is", &l(&[i(1)]), &l(&[i(1)])), E);
        assert_eq!(compare_values("is", &ad(&[]), &ad(&[])), E);
        assert_eq!(compare_values("is", &l(&[i(1)]), &i(1)), b(false));
        assert_eq!(compare_values("is", &r(-0.0), &r(0.0)), b(true));
        assert_eq!(compare_values("is", &r(f64::NAN), &r(f64::NAN)), b(false));
        assert_eq!(compare_values("~", &i(1), &i(1)), E);
    }

    #[test]
    fn membership() {
        assert_eq!(call("member", &[s("A"), strs(&["a", "b"])]), b(true));
        assert_eq!(call("member", &[r(2.0), l(&[i(1), i(2)])]), b(true));
        assert_eq!(call("member", &[U, l(&[i(1), U])]), U);
        assert_eq!(call("member", &[i(1), s("1,2")]), E);
        assert_eq!(call("member", &[i(1), U]), U);
        assert_eq!(call("member", &[E, l(&[E])]), E);
        assert_eq!(call("member", &[l(&[]), l(&[])]), E);
        // Element comparisons that fail are just not matches.
        assert_eq!(call("member", &[i(1), l(&[s("1"), E, U])]), b(false));
        assert_eq!(call("member", &[i(1)]), E);
        assert_eq!(call("identicalMember", &[s("A"), strs(&["a", "b"])]), b(false));
        assert_eq!(call("identicalMember", &[r(2.0), l(&[i(1), i(2)])]), b(false));
        assert_eq!(call("identicalMember", &[U, l(&[i(1), U])]), b(true));
        assert_eq!(call("identicalMember", &[E, l(&[E])]), b(true));
        assert_eq!(call("identicalMember", &[s("x86_64"), strs(&["X86_64", "aarch64"])]), b(false));
        assert_eq!(call("identicalMember", &[ad(&[]), l(&[])]), E);
    }

    #[test]
    fn size_of_things() {
        assert_eq!(call("size", &[s("hello")]), i(5));
        assert_eq!(call("size", &[s("café")]), i(5));
        assert_eq!(call("size", &[l(&[i(1), i(2), i(3)])]), i(3));
        assert_eq!(call("size", &[ad(&[("a", i(1)), ("b", i(2))])]), i(2));
        assert_eq!(call("size", &[U]), U);
        assert_eq!(call("size", &[i(3)]), E);
        assert_eq!(call("size", &[]), E);
    }

    #[test]
    fn aggregates() {
        assert_eq!(call("sum", &[l(&[i(1), i(2), i(3)])]), i(6));
        assert_eq!(call("sum", &[l(&[])]), i(0));
        assert_eq!(call("sum", &[l(&[i(1), U])]), i(1));
        assert_eq!(call("sum", &[l(&[U])]), i(0));
        assert_eq!(call("sum", &[l(&[i(1), r(0.5)])]), r(1.5));
        assert_eq!(call("sum", &[l(&[b(true), b(true)])]), i(2));
        assert_eq!(call("sum", &[l(&[b(true)])]), b(true));
        assert_eq!(call("sum", &[l(&[i(i64::MAX), i(1)])]), i(i64::MIN));
        assert_eq!(call("sum", &[l(&[r(1e308), r(1e308)])]), E);
        assert_eq!(call("sum", &[l(&[s("1")])]), E);
        assert_eq!(call("sum", &[U]), U);
        assert_eq!(call("sum", &[i(1)]), E);
        assert_eq!(call("avg", &[l(&[i(1), i(2), i(3), i(4)])]), r(2.5));
        assert_eq!(call("avg", &[l(&[])]), i(0));
        assert_eq!(call("avg", &[l(&[U, i(4)])]), r(4.0));
        assert_eq!(call("min", &[l(&[])]), U);
        assert_eq!(call("max", &[l(&[])]), U);
        assert_eq!(call("min", &[l(&[s("a"), i(1)])]), E);
        assert_eq!(call("max", &[l(&[i(1), r(2.0)])]), r(2.0));
        assert_eq!(call("max", &[l(&[i(1), U])]), i(1));
        assert_eq!(call("max", &[l(&[i(2), r(2.0)])]), i(2));
        assert_eq!(call("min", &[l(&[i(3), r(-1.5), i(2)])]), r(-1.5));
        assert_eq!(call("max", &[l(&[b(true), i(0)])]), b(true));
        assert_eq!(call("max", &[U]), U);
        assert_eq!(call("max", &[s("1,2")]), E);
    }

    #[test]
    fn any_all_compare() {
        assert_eq!(call("anyCompare", &[s("<"), l(&[i(1), i(2), i(3)]), i(2)]), b(true));
        assert_eq!(call("anyCompare", &[s(">"), l(&[i(1), i(2)]), i(2)]), b(false));
        assert_eq!(call("allCompare", &[s(">="), l(&[i(2), i(3)]), i(2)]), b(true));
        assert_eq!(call("allCompare", &[s(">"), l(&[i(2), i(3)]), i(2)]), b(false));
        assert_eq!(call("allCompare", &[s("<"), l(&[]), i(2)]), b(true));
        assert_eq!(call("anyCompare", &[s("<"), l(&[]), i(2)]), b(false));
        assert_eq!(call("anyCompare", &[s("=="), strs(&["A"]), s("a")]), b(true));
        assert_eq!(call("anyCompare", &[s("is"), strs(&["A"]), s("a")]), b(false));
        assert_eq!(call("anyCompare", &[s("isnt"), l(&[i(1)]), U]), b(true));
        // An undefined comparison ends the scan with false.
        assert_eq!(call("anyCompare", &[s("=="), l(&[U, i(2)]), i(2)]), b(false));
        assert_eq!(call("allCompare", &[s("=="), l(&[U]), i(2)]), b(false));
        assert_eq!(call("anyCompare", &[s("=="), l(&[s("x"), i(2)]), i(2)]), E);
        assert_eq!(call("anyCompare", &[s("=?="), l(&[i(2)]), i(2)]), E);
        assert_eq!(call("anyCompare", &[s("IS"), l(&[i(2)]), i(2)]), E);
        assert_eq!(call("anyCompare", &[U, l(&[i(2)]), i(2)]), U);
        assert_eq!(call("anyCompare", &[s("<"), U, i(2)]), U);
        assert_eq!(call("anyCompare", &[s("<"), i(1), i(2)]), E);
        assert_eq!(call("anyCompare", &[i(1), l(&[]), i(2)]), E);
        assert_eq!(call("anyCompare", &[s("<"), l(&[])]), E);
    }

    #[test]
    fn strcat_and_join() {
        assert_eq!(call("strcat", &[s("a"), s("b"), s("c")]), s("abc"));
        assert_eq!(call("strcat", &[]), s(""));
        assert_eq!(call("strcat", &[s("n="), i(5)]), s("n=5"));
        assert_eq!(call("strcat", &[s("r="), r(1.5)]), s("r=1.500000000000000E+00"));
        assert_eq!(call("strcat", &[s("e="), E]), E);
        assert_eq!(call("strcat", &[l(&[i(1)]), s("x")]), s("{ 1 }x"));
        assert_eq!(call("strcat", &[s("a"), U]), U);
        assert_eq!(call("strcat", &[s("a"), U, E]), U);
        assert_eq!(call("strcat", &[b(true), s("/"), r(0.0)]), s("true/0.0"));
        assert_eq!(call("join", &[s(", "), strs(&["a", "b", "c"])]), s("a, b, c"));
        assert_eq!(call("join", &[s(":"), l(&[])]), s(""));
        assert_eq!(call("join", &[s(","), l(&[s("a"), U, s("c")])]), s("a,c"));
        assert_eq!(call("join", &[s(", "), s("a"), s("b"), s("c")]), s("a, b, c"));
        assert_eq!(call("join", &[strs(&["a", "b", "c"])]), s("abc"));
        assert_eq!(
            call("join", &[s(";"), l(&[i(1), r(2.5), l(&[i(3)])])]),
            s("1;2.500000000000000E+00;{ 3 }")
        );
        assert_eq!(call("join", &[s(","), l(&[U])]), U);
        assert_eq!(call("join", &[U, strs(&["a", "b"])]), s("ab"));
        assert_eq!(call("join", &[s(","), l(&[E])]), E);
        assert_eq!(call("join", &[s(","), s(""), s("a"), s("b")]), s("a,b"));
        assert_eq!(call("join", &[s(",")]), s(""));
        assert_eq!(call("join", &[]), s(""));
        assert_eq!(call("join", &[i(0), s("a"), s("b")]), s("a0b"));
    }

    #[test]
    fn case_and_substr() {
        assert_eq!(call("toLower", &[s("MixEd 1")]), s("mixed 1"));
        assert_eq!(call("toUpper", &[i(5)]), s("5"));
        assert_eq!(call("toUpper", &[s("café")]), s("CAFé"));
        assert_eq!(call("toUpper", &[strs(&["a"])]), s("{ \"A\" }"));
        assert_eq!(call("toUpper", &[U]), U);
        assert_eq!(call("toLower", &[E]), E);
        assert_eq!(call("toLower", &[]), E);
        assert_eq!(call("substr", &[s("abcdef"), i(-2)]), s("ef"));
        assert_eq!(call("substr", &[s("abcdef"), i(1), i(2)]), s("bc"));
        assert_eq!(call("substr", &[s("abcdef"), i(1), i(-2)]), s("bcd"));
        assert_eq!(call("substr", &[s("abcdef"), i(1), i(0)]), s(""));
        assert_eq!(call("substr", &[s("abcdef"), i(10)]), s(""));
        assert_eq!(call("substr", &[s("abcdef"), i(-10), i(2)]), s("ab"));
        assert_eq!(call("substr", &[s("abcdef"), i(2), i(100)]), s("cdef"));
        assert_eq!(call("substr", &[s("abc"), i(1), i(-10)]), s(""));
        assert_eq!(call("substr", &[s("abc"), i(4_294_967_297)]), s("bc"));
        assert_eq!(call("substr", &[i(123_456), i(1), i(2)]), E);
        assert_eq!(call("substr", &[U, i(1)]), U);
        assert_eq!(call("substr", &[s("abc"), U]), U);
        assert_eq!(call("substr", &[s("abc"), r(1.9)]), E);
        assert_eq!(call("substr", &[s("abc"), i(1), s("1")]), E);
        assert_eq!(call("substr", &[s("abc")]), E);
        // Byte offsets: a cut through a character does not panic.
        assert_eq!(call("substr", &[s("café"), i(0), i(4)]), s("caf\u{fffd}"));
    }

    #[test]
    fn string_comparisons() {
        assert_eq!(call("strcmp", &[s("a"), s("a")]), i(0));
        assert_eq!(call("strcmp", &[s("a"), s("A")]), i(1));
        assert_eq!(call("strcmp", &[s("abc"), s("ab")]), i(1));
        assert_eq!(call("strcmp", &[s("ab"), s("abc")]), i(-1));
        assert_eq!(call("strcmp", &[i(1), s("1")]), i(0));
        assert_eq!(call("strcmp", &[U, s("1")]), U);
        assert_eq!(call("strcmp", &[E, s("1")]), E);
        assert_eq!(call("strcmp", &[s("1")]), E);
        assert_eq!(call("stricmp", &[s("abc"), s("abd")]), i(-1));
        assert_eq!(call("stricmp", &[s("B"), s("a")]), i(1));
        assert_eq!(call("stricmp", &[s("ABC"), s("abc")]), i(0));
        assert_eq!(call("stricmp", &[b(true), s("TRUE")]), i(0));
    }

    #[test]
    fn versions() {
        assert_eq!(call("versioncmp", &[s("7.9"), s("7.10")]), i(-1));
        assert_eq!(call("versioncmp", &[s("1.2"), s("1.2")]), i(0));
        assert_eq!(call("versioncmp", &[s("a"), s("c")]), i(-2));
        assert_eq!(call("versioncmp", &[s("7.x"), s("7.y")]), i(-1));
        let order = ["000", "00", "01", "010", "09", "0", "1", "9", "10"];
        for w in order.windows(2) {
            let c = call("versioncmp", &[s(w[0]), s(w[1])]);
            assert!(matches!(c, Value::Int(n) if n < 0), "{w:?}: {c:?}");
            assert_eq!(call("versionLT", &[s(w[0]), s(w[1])]), b(true), "{w:?}");
            assert_eq!(call("versionGT", &[s(w[1]), s(w[0])]), b(true), "{w:?}");
        }
        assert_eq!(call("versionGE", &[s("8.9.1"), s("8.9.1")]), b(true));
        assert_eq!(call("versionLE", &[s("8.10.1"), s("8.9.1")]), b(false));
        assert_eq!(call("versionEQ", &[s("8.9"), s("8.9")]), b(true));
        assert_eq!(call("versionEQ", &[i(8), s("8")]), b(true));
        assert_eq!(call("versioncmp", &[U, s("1")]), U);
        assert_eq!(call("versioncmp", &[E, s("1")]), E);
        assert_eq!(call("versioncmp", &[s("1")]), E);
        assert_eq!(call("version_in_range", &[s("8.9.3"), s("8.9.0"), s("8.10.0")]), b(true));
        assert_eq!(call("version_in_range", &[s("8.11"), s("8.9.0"), s("8.10.0")]), b(false));
        assert_eq!(call("version_in_range", &[s("8.11"), U, s("8.10.0")]), U);
        assert_eq!(call("version_in_range", &[U, s("1"), s("2")]), E);
        assert_eq!(call("version_in_range", &[E, s("1"), s("2")]), E);
    }

    #[test]
    fn regexps() {
        assert_eq!(call("regexp", &[s("A"), s("xax"), s("i")]), b(true));
        assert_eq!(call("regexp", &[s("A"), s("xax")]), b(false));
        assert_eq!(call("regexp", &[s("A"), s("xax"), s("I")]), b(false));
        assert_eq!(call("regexp", &[s("a"), U]), U);
        assert_eq!(call("regexp", &[E, U]), E);
        assert_eq!(call("regexp", &[s("a"), s("a"), U]), U);
        assert_eq!(call("regexp", &[s("a"), s("a"), i(1)]), E);
        assert_eq!(call("regexp", &[s("a"), i(1)]), E);
        assert_eq!(call("regexp", &[s("(")]), E);
        assert_eq!(call("regexp", &[s("("), s("(")]), E);
        assert_eq!(call("regexp", &[s(r"^(\d+)-(\d+)$"), s("12-34")]), b(true));
        assert_eq!(call("regexp", &[s("^b$"), s("a\nb"), s("m")]), b(true));
        assert_eq!(call("regexp", &[s("^b$"), s("a\nb")]), b(false));
        assert_eq!(call("regexp", &[s("a.b"), s("a\nb"), s("s")]), b(true));
        assert_eq!(call("regexp", &[s("a.b"), s("a\nb")]), b(false));
        assert_eq!(call("regexp", &[s("a b # comment"), s("ab"), s("x")]), b(true));
        assert_eq!(call("regexp", &[s("caf."), s("café")]), b(true));
        assert_eq!(call("regexp", &[s("^é$"), s("é")]), b(true));
        assert_eq!(
            call("regexps", &[s(r"(\w+)@(\w+)"), s("user@host"), s(r"\2:\1")]),
            s("host:user")
        );
        assert_eq!(call("regexps", &[s("o"), s("foo"), s("0")]), s("0"));
        assert_eq!(call("regexps", &[s("o"), s("foo"), s("0"), s("g")]), s("00"));
        assert_eq!(call("regexps", &[s("o"), s("foo"), s("0"), s("f")]), s("f0o"));
        assert_eq!(call("regexps", &[s("x"), s("foo"), s("0")]), s(""));
        assert_eq!(call("regexps", &[s("(a)|(b)"), s("b"), s(r"[\1]")]), s("[]"));
        assert_eq!(call("regexps", &[s("(a)|(b)"), s("a"), s(r"[\2]")]), E);
        assert_eq!(call("regexps", &[s("a"), s("a"), s(r"\n\\0")]), s(r"\n\a"));
        assert_eq!(call("regexps", &[s("a"), s("a"), s("x\\")]), s("x\\"));
        assert_eq!(call("regexps", &[s("a"), s("a"), U]), U);
        assert_eq!(call("regexps", &[s("a"), s("a"), i(1)]), E);
        assert_eq!(call("regexps", &[s("a"), s("a")]), E);
        assert_eq!(call("replace", &[s("o"), s("foo"), s("0")]), s("f0o"));
        assert_eq!(call("replaceall", &[s("o"), s("foo"), s("0")]), s("f00"));
        assert_eq!(call("replaceall", &[s("O"), s("foo"), s("0"), s("i")]), s("f00"));
        assert_eq!(call("replaceall", &[s(r"(\d+)"), s("a1b22c"), s(r"<\1>")]), s("a<1>b<22>c"));
        assert_eq!(call("replaceall", &[s("^"), s("abc"), s("-")]), s("-abc"));
        // HTCondor's global substitution fails when a match can be empty at the end.
        assert_eq!(call("replaceall", &[s("x*"), s("abc"), s("-")]), E);
        assert_eq!(call("replace", &[s("x*"), s("abc"), s("-")]), s("-abc"));
        assert_eq!(call("replace", &[s("b"), s("abc"), s(r"\0\0")]), s("abbc"));
    }

    #[test]
    fn regexp_member_fn() {
        assert_eq!(call("regexpMember", &[s("^b"), strs(&["a", "bc"])]), b(true));
        assert_eq!(call("regexpMember", &[s("^B"), strs(&["a", "bc"]), s("i")]), b(true));
        assert_eq!(call("regexpMember", &[s("^z"), strs(&["a", "bc"])]), b(false));
        assert_eq!(call("regexpMember", &[s("^z"), l(&[s("a"), U])]), U);
        assert_eq!(call("regexpMember", &[s("^a"), l(&[s("a"), U])]), b(true));
        assert_eq!(call("regexpMember", &[s("^z"), l(&[i(1), s("z")])]), E);
        assert_eq!(call("regexpMember", &[s("^z"), s("z")]), E);
        assert_eq!(call("regexpMember", &[s("("), strs(&["a"])]), b(false));
        assert_eq!(call("regexpMember", &[U, strs(&["a"])]), U);
    }

    #[test]
    fn conversions() {
        assert_eq!(call("int", &[b(true)]), i(1));
        assert_eq!(call("int", &[U]), U);
        assert_eq!(call("int", &[E]), E);
        assert_eq!(call("int", &[s("12abc")]), i(12));
        assert_eq!(call("int", &[s(" 12")]), i(12));
        assert_eq!(call("int", &[s("-3.9")]), i(-3));
        assert_eq!(call("int", &[s("1e3")]), i(1000));
        assert_eq!(call("int", &[s("0x1A")]), i(26));
        assert_eq!(call("int", &[s("abc")]), E);
        assert_eq!(call("int", &[s("")]), E);
        assert_eq!(call("int", &[r(1e30)]), i(i64::MIN));
        assert_eq!(call("int", &[r(-2.7)]), i(-2));
        assert_eq!(call("int", &[l(&[])]), E);
        assert_eq!(call("int", &[]), E);
        assert_eq!(call("real", &[s("2.5")]), r(2.5));
        assert_eq!(call("real", &[s("x")]), E);
        assert_eq!(call("real", &[U]), U);
        assert_eq!(call("real", &[s("inf")]), r(f64::INFINITY));
        assert_eq!(call("real", &[s("-Infinity")]), r(f64::NEG_INFINITY));
        assert!(matches!(call("real", &[s("nan")]), Value::Real(x) if x.is_nan()));
        assert_eq!(call("real", &[s(".5e1x")]), r(5.0));
        assert_eq!(call("real", &[s("1e400")]), r(f64::INFINITY));
        assert_eq!(call("real", &[s("0x1p-2")]), r(0.25));
        assert_eq!(call("real", &[s("0x")]), r(0.0));
        assert_eq!(call("real", &[s("-")]), E);
        assert_eq!(call("real", &[s("1e")]), r(1.0));
        assert_eq!(call("real", &[i(3)]), r(3.0));
        assert_eq!(call("real", &[b(false)]), r(0.0));
        assert_eq!(call("real", &[ad(&[])]), E);
        assert_eq!(call("string", &[r(-1.5)]), s("-1.500000000000000E+00"));
        assert_eq!(call("string", &[r(0.1)]), s("1.000000000000000E-01"));
        assert_eq!(call("string", &[b(true)]), s("true"));
        assert_eq!(call("string", &[U]), U);
        assert_eq!(call("string", &[E]), E);
        assert_eq!(call("string", &[l(&[i(1), i(2)])]), s("{ 1,2 }"));
        assert_eq!(call("string", &[ad(&[("a", i(1))])]), s("[ a = 1 ]"));
        assert_eq!(call("string", &[s("x")]), s("x"));
        assert_eq!(call("bool", &[s("FALSE")]), b(false));
        assert_eq!(call("bool", &[s("true")]), b(true));
        assert_eq!(call("bool", &[s("yes")]), U);
        assert_eq!(call("bool", &[i(2)]), b(true));
        assert_eq!(call("bool", &[r(0.5)]), b(true));
        assert_eq!(call("bool", &[r(0.0)]), b(false));
        assert_eq!(call("bool", &[U]), U);
        assert_eq!(call("bool", &[E]), E);
        assert_eq!(call("bool", &[l(&[])]), E);
    }

    #[test]
    fn rounding_and_pow() {
        assert_eq!(call("ceiling", &[r(2.1)]), i(3));
        assert_eq!(call("ceiling", &[r(-2.1)]), i(-2));
        assert_eq!(call("ceil", &[r(2.1)]), i(3));
        assert_eq!(call("floor", &[r(-2.1)]), i(-3));
        assert_eq!(call("floor", &[i(7)]), i(7));
        assert_eq!(call("floor", &[s("2.7")]), i(2));
        assert_eq!(call("floor", &[b(true)]), i(1));
        assert_eq!(call("floor", &[U]), E);
        assert_eq!(call("floor", &[s("x")]), E);
        assert_eq!(call("floor", &[r(1e300)]), i(i64::MIN));
        assert_eq!(call("round", &[r(2.5)]), i(2));
        assert_eq!(call("round", &[r(-2.5)]), i(-2));
        assert_eq!(call("round", &[r(3.5)]), i(4));
        assert_eq!(call("round", &[r(2.6)]), i(3));
        assert_eq!(call("round", &[]), E);
        assert_eq!(call("pow", &[i(2), i(-1)]), r(0.5));
        assert_eq!(call("pow", &[i(2), r(0.5)]), r(std::f64::consts::SQRT_2));
        assert_eq!(call("pow", &[i(2), i(63)]), i(i64::MIN));
        assert_eq!(call("pow", &[i(2), i(10)]), i(1024));
        assert_eq!(call("pow", &[i(0), i(0)]), i(1));
        assert_eq!(call("pow", &[r(0.0), r(0.0)]), r(1.0));
        assert_eq!(call("pow", &[s("2"), i(2)]), r(4.0));
        assert_eq!(call("pow", &[b(true), i(2)]), r(1.0));
        // HTCondor adds 0.5 and truncates, so odd powers of negatives are off by one.
        assert_eq!(call("pow", &[i(-2), i(3)]), i(-7));
        assert_eq!(call("pow", &[U, i(2)]), E);
        assert_eq!(call("pow", &[i(2)]), E);
    }

    #[test]
    fn quantize_fn() {
        assert_eq!(call("quantize", &[i(0), i(4)]), i(0));
        assert_eq!(call("quantize", &[i(3), i(8)]), i(8));
        assert_eq!(call("quantize", &[i(3), i(2)]), i(4));
        assert_eq!(call("quantize", &[r(2.5), i(2)]), r(4.0));
        assert_eq!(call("quantize", &[i(5), r(2.5)]), r(5.0));
        assert_eq!(call("quantize", &[r(1.5), r(6.8)]), r(6.8));
        assert_eq!(call("quantize", &[i(1500), l(&[i(1024), i(2048), i(4096)])]), i(2048));
        assert_eq!(call("quantize", &[i(5000), l(&[i(1024), i(2048), i(4096)])]), i(8192));
        assert_eq!(call("quantize", &[i(3), l(&[i(1), r(2.5), i(4)])]), i(4));
        assert_eq!(call("quantize", &[i(0), l(&[i(4)])]), i(4));
        assert_eq!(call("quantize", &[i(2), l(&[i(1), i(2), s("A")])]), i(2));
        assert_eq!(call("quantize", &[i(3), l(&[i(1), i(2), r(0.5)])]), r(3.0));
        assert_eq!(call("quantize", &[r(2.7), l(&[i(1), i(2), r(0.5)])]), r(3.0));
        assert_eq!(call("quantize", &[i(3), l(&[i(1), i(2), s("A")])]), E);
        assert_eq!(call("quantize", &[i(7), l(&[])]), i(7));
        assert_eq!(call("quantize", &[i(-3), i(2)]), i(-2));
        assert_eq!(call("quantize", &[i(5), i(0)]), i(5));
        assert_eq!(call("quantize", &[r(5.5), r(0.0)]), r(5.5));
        assert_eq!(call("quantize", &[U, i(4)]), E);
        assert_eq!(call("quantize", &[i(4), U]), E);
        assert_eq!(call("quantize", &[i(4)]), E);
    }

    #[test]
    fn random_fn() {
        for _ in 0..50 {
            assert!(matches!(call("random", &[i(10)]), Value::Int(n) if (0..10).contains(&n)));
            assert!(matches!(call("random", &[r(2.5)]), Value::Real(x) if (0.0..2.5).contains(&x)));
            assert!(matches!(call("random", &[]), Value::Real(x) if (0.0..1.0).contains(&x)));
        }
        assert_eq!(call("random", &[i(1)]), i(0));
        assert_eq!(call("random", &[i(0)]), E);
        assert_eq!(call("random", &[i(-5)]), E);
        assert_eq!(call("random", &[r(0.0)]), E);
        assert_eq!(call("random", &[i(1 << 32)]), E);
        assert_eq!(call("random", &[s("5")]), E);
        assert_eq!(call("random", &[U]), E);
        assert_eq!(call("random", &[i(1), i(2)]), E);
    }

    #[test]
    fn interval_fn() {
        assert_eq!(call("interval", &[i(0)]), s("0"));
        assert_eq!(call("interval", &[i(60)]), s("1:00"));
        assert_eq!(call("interval", &[i(67)]), s("1:07"));
        assert_eq!(call("interval", &[i(3600)]), s("1:00:00"));
        assert_eq!(call("interval", &[i(86400)]), s("1+00:00:00"));
        assert_eq!(call("interval", &[i(90061)]), s("1+01:01:01"));
        assert_eq!(call("interval", &[i(1_000_000)]), s("11+13:46:40"));
        assert_eq!(call("interval", &[i(1_472_523)]), s("17+01:02:03"));
        assert_eq!(call("interval", &[i(-5)]), s("-5"));
        assert_eq!(call("interval", &[i(-65)]), s("-1:05"));
        assert_eq!(call("interval", &[i(-90061)]), s("-1+01:01:01"));
        assert_eq!(call("interval", &[r(1.5)]), s("1"));
        assert_eq!(call("interval", &[s("90")]), s("1:30"));
        assert_eq!(call("interval", &[b(true)]), s("1"));
        assert_eq!(call("interval", &[U]), E);
        assert_eq!(call("interval", &[s("x")]), E);
        assert_eq!(call("interval", &[]), E);
    }

    fn tm(year: i64, mon: i64, mday: i64, hour: i64, min: i64, sec: i64) -> Tm {
        let (wday, yday) = day_numbers(year, mon, mday);
        Tm { year, mon: mon - 1, mday, hour, min, sec, wday, yday }
    }

    fn fmt(f: &str, t: &Tm) -> String {
        let mut out = Vec::new();
        assert!(strftime(f.as_bytes(), t, 951_782_400, "UTC", &mut out));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strftime_conversions() {
        let t = tm(2000, 2, 29, 13, 5, 9);
        assert_eq!(fmt("%Y/%m/%d %a %j", &t), "2000/02/29 Tue 060");
        assert_eq!(fmt("%c", &t), "Tue Feb 29 13:05:09 2000");
        assert_eq!(fmt("%A %B %b %h %e|%d", &t), "Tuesday February Feb Feb 29|29");
        assert_eq!(fmt("%H %I %k %l %M %S %p %P", &t), "13 01 13  1 05 09 PM pm");
        assert_eq!(
            fmt("%D %x %X %T %R %r %F", &t),
            "02/29/00 02/29/00 13:05:09 13:05:09 13:05 01:05:09 PM 2000-02-29"
        );
        assert_eq!(fmt("%C %y %G %g %V %u %w %U %W", &t), "20 00 2000 00 09 2 2 09 09");
        assert_eq!(fmt("%z %Z %s %% %n%t", &t), "+0000 UTC 951782400 % \n\t");
        assert_eq!(fmt("%-d %_m %5Y %^a %#b %010d %-j", &t), "29  2 02000 TUE FEB 0000000029 60");
        assert_eq!(fmt("%q %Ey %Od %", &t), "%q 00 29 %");
        let jan1 = tm(2021, 1, 1, 0, 0, 0);
        assert_eq!(fmt("%G-W%V-%u %a %U %W", &jan1), "2020-W53-5 Fri 00 00");
        let t2 = tm(1999, 12, 5, 0, 0, 0);
        assert_eq!(fmt("%e|%I %p|%j", &t2), " 5|12 AM|339");
        let mut out = Vec::new();
        assert!(!strftime(b"%2000Y", &t, 0, "", &mut out));
        let long = "x".repeat(2000);
        let mut out = Vec::new();
        assert!(!strftime(long.as_bytes(), &t, 0, "", &mut out));
    }

    #[test]
    fn format_and_split_time() {
        let utc = local_offset(951_782_400) == 0 && local_offset(0) == 0;
        if utc {
            assert_eq!(
                call("formatTime", &[i(951_782_400), s("%Y/%m/%d %a %j")]),
                s("2000/02/29 Tue 060")
            );
            assert_eq!(call("formatTime", &[r(951_782_400.9), s("%H:%M:%S")]), s("00:00:00"));
            assert_eq!(call("formatTime", &[i(951_782_400)]), s("Tue Feb 29 00:00:00 2000"));
            assert_eq!(call("formatTime", &[]), s("Tue Feb 29 00:00:00 2000"));
            assert_eq!(call("formatTime", &[i(-1), s("%F %T")]), s("1969-12-31 23:59:59"));
            assert_eq!(call("formatTime", &[r(1e10), s("%Y")]), s("1901"));
            assert_eq!(
                call("splitTime", &[i(951_782_400)]),
                ad(&[
                    ("Type", s("AbsoluteTime")),
                    ("Year", i(2000)),
                    ("Month", i(2)),
                    ("Day", i(29)),
                    ("Hours", i(0)),
                    ("Minutes", i(0)),
                    ("Seconds", i(0)),
                    ("Offset", i(0)),
                ])
            );
        }
        let split = ad(&[("Year", i(2024)), ("Month", i(7)), ("Day", i(4)), ("Hours", i(9))]);
        assert_eq!(
            call("formatTime", &[split, s("%A %d %B %Y %H:%M")]),
            s("Thursday 04 July 2024 09:00")
        );
        assert_eq!(call("formatTime", &[ad(&[]), s("%Y %m %d")]), s("1900 01 00"));
        assert_eq!(call("formatTime", &[s("x"), s("%Y")]), E);
        assert_eq!(call("formatTime", &[U, s("%Y")]), E);
        assert_eq!(call("formatTime", &[b(true)]), E);
        assert_eq!(call("formatTime", &[i(0), U]), E);
        assert_eq!(call("formatTime", &[i(0), i(1)]), E);
        assert_eq!(call("formatTime", &[i(0), s("%Y"), s("")]), E);
        assert_eq!(call("formatTime", &[i(i64::MAX), s("%Y")]), E);
        assert_eq!(call("formatTime", &[i(0), s(&"%c".repeat(100))]), s(""));
        assert_eq!(call("splitTime", &[U]), U);
        assert_eq!(call("splitTime", &[ad(&[])]), E);
        assert_eq!(call("splitTime", &[s("1")]), E);
        assert_eq!(call("splitTime", &[]), E);
        assert_eq!(call("time", &[]), i(951_782_400));
        assert_eq!(call("time", &[i(1)]), E);
    }

    #[test]
    fn splitting() {
        assert_eq!(call("split", &[s("a,b;c"), s(",;")]), strs(&["a", "b", "c"]));
        assert_eq!(call("split", &[s("")]), strs(&[]));
        assert_eq!(call("split", &[s(" a, b ,c ")]), strs(&["a", "b", "", "c"]));
        assert_eq!(call("split", &[s("a b  c")]), strs(&["a", "b", "c"]));
        assert_eq!(call("split", &[s("a,,b")]), strs(&["a", "", "b"]));
        assert_eq!(call("split", &[s("a b"), s("")]), strs(&["a b"]));
        assert_eq!(call("split", &[s("a\nb")]), strs(&["a\nb"]));
        assert_eq!(call("split", &[U]), E);
        assert_eq!(call("split", &[s("a"), U]), E);
        assert_eq!(call("split", &[]), E);
        assert_eq!(
            call("splitUserName", &[s("alice@example.org")]),
            strs(&["alice", "example.org"])
        );
        assert_eq!(call("splitUserName", &[s("bob")]), strs(&["bob", ""]));
        assert_eq!(call("splitUserName", &[s("a@b@c")]), strs(&["a", "b@c"]));
        assert_eq!(call("splitSlotName", &[s("slot1@machine")]), strs(&["slot1", "machine"]));
        assert_eq!(call("splitSlotName", &[s("machine")]), strs(&["", "machine"]));
        assert_eq!(call("splitUserName", &[U]), E);
        assert_eq!(call("splitUserName", &[s("a"), s("b")]), E);
    }

    #[test]
    fn string_lists() {
        assert_eq!(call("stringListMember", &[s("b"), s("a,b,c")]), b(true));
        assert_eq!(call("stringListMember", &[s("B"), s("a,b,c")]), b(false));
        assert_eq!(call("stringListIMember", &[s("B"), s("a,b,c")]), b(true));
        assert_eq!(call("stringListMember", &[s("b"), s("a;b;c"), s(";")]), b(true));
        assert_eq!(call("stringListMember", &[s("b"), s("a, b ,c")]), b(true));
        assert_eq!(call("stringListMember", &[s("b"), s("a\tb")]), b(true));
        assert_eq!(call("stringListMember", &[s(" b"), s("a,b")]), b(false));
        assert_eq!(call("stringListMember", &[U, s("a,b")]), b(false));
        assert_eq!(call("stringListMember", &[s("a"), U]), b(false));
        assert_eq!(call("stringListMember", &[U, U]), U);
        assert_eq!(call("stringListMember", &[s("a"), s("a;b"), U]), b(false));
        assert_eq!(call("stringListMember", &[i(1), s("1,2")]), E);
        assert_eq!(call("stringListMember", &[s("1"), s("1,2"), i(1)]), E);
        assert_eq!(call("stringListMember", &[s("1")]), E);
        assert_eq!(call("stringListSubsetMatch", &[s("a,b"), s("b,c,a")]), b(true));
        assert_eq!(call("stringListSubsetMatch", &[s("a,B"), s("b,c,a")]), b(false));
        assert_eq!(call("stringListISubsetMatch", &[s("a,B"), s("b,c,a")]), b(true));
        assert_eq!(call("stringListSubsetMatch", &[s(""), s("b")]), b(true));
        assert_eq!(call("stringListSubsetMatch", &[U, s("b")]), b(true));
        assert_eq!(call("stringListSubsetMatch", &[s("a"), U]), b(false));
        assert_eq!(call("stringListSubsetMatch", &[U, U]), U);
        assert_eq!(call("stringListSubsetMatch", &[s(" , "), s("a")]), b(false));
        assert_eq!(call("stringListSize", &[s("")]), i(0));
        assert_eq!(call("stringListSize", &[s("a b,c")]), i(3));
        assert_eq!(call("stringListSize", &[s("a;b"), s(";")]), i(2));
        assert_eq!(call("stringListSize", &[s(" , ,a")]), i(1));
        assert_eq!(call("stringListSize", &[s("a\tb")]), i(1));
        assert_eq!(call("stringListSize", &[U]), E);
        assert_eq!(call("stringListSize", &[s("a"), U]), E);
        assert_eq!(call("stringListSum", &[s("")]), r(0.0));
        assert_eq!(call("stringListSum", &[s("1,2,3")]), i(6));
        assert_eq!(call("stringListSum", &[s("1,2.5")]), r(3.5));
        assert_eq!(call("stringListSum", &[s("1,x")]), E);
        assert_eq!(call("stringListSum", &[s("12abc")]), r(12.0));
        assert_eq!(call("stringListAvg", &[s("1,2,3,4")]), i(2));
        assert_eq!(call("stringListAvg", &[s("")]), r(0.0));
        assert_eq!(call("stringListAvg", &[s("1.0,2")]), r(1.5));
        assert_eq!(call("stringListMax", &[s("3,1,2.5")]), r(3.0));
        assert_eq!(call("stringListMax", &[s("3,1,2")]), i(3));
        assert_eq!(call("stringListMin", &[s("3,1,2")]), i(1));
        assert_eq!(call("stringListMin", &[s("")]), U);
        assert_eq!(call("stringListMax", &[s("")]), U);
        // HTCondor starts max at FLT_MIN and min at FLT_MAX.
        assert_eq!(call("stringListMax", &[s("-5,-3")]), i(0));
        assert_eq!(call("stringListMax", &[s("-5.5")]), r(f32::MIN_POSITIVE as f64));
        assert_eq!(call("stringListMin", &[s("1e39")]), r(f32::MAX as f64));
        assert_eq!(call("stringListMin", &[s("-1;-2"), s(";")]), i(-2));
        assert_eq!(call("stringListMin", &[i(1)]), E);
        assert_eq!(call("stringListSum", &[]), E);
    }

    #[test]
    fn string_list_intersect_and_regexp() {
        assert_eq!(call("stringListsIntersect", &[s("a,b"), s("c,b")]), b(true));
        assert_eq!(call("stringListsIntersect", &[s("a,b"), s("c,d")]), b(false));
        assert_eq!(call("stringListsIntersect", &[s("a b"), s("b")]), b(true));
        assert_eq!(call("stringListsIntersect", &[s("a;b"), s("b;c"), s(";")]), b(true));
        assert_eq!(call("stringListsIntersect", &[s("a;b"), s("b;c"), s("")]), b(false));
        assert_eq!(call("stringListsIntersect", &[s("a,\tb"), s("b")]), b(false));
        assert_eq!(call("stringListsIntersect", &[U, s("b")]), U);
        assert_eq!(call("stringListsIntersect", &[U, E]), E);
        assert_eq!(call("stringListsIntersect", &[s("a"), s("a"), U]), U);
        assert_eq!(call("stringListsIntersect", &[s("a"), s("a"), i(1)]), E);
        assert_eq!(call("stringListsIntersect", &[i(1), s("1")]), E);
        assert_eq!(call("stringListsIntersect", &[s("a")]), E);
        assert_eq!(call("stringList_regexpMember", &[s("^b"), s("a, bc")]), b(true));
        assert_eq!(call("stringList_regexpMember", &[s("^B"), s("a;bc"), s(";"), s("I")]), b(true));
        assert_eq!(call("stringList_regexpMember", &[s("^z"), s("a, bc")]), b(false));
        assert_eq!(call("stringList_regexpMember", &[s("^z"), s("")]), U);
        assert_eq!(call("stringList_regexpMember", &[s("("), s("a")]), E);
        assert_eq!(call("stringList_regexpMember", &[s("a"), U]), E);
        assert_eq!(call("stringList_regexpMember", &[s("a")]), E);
    }

    #[test]
    fn environments() {
        assert_eq!(call("envV1ToV2", &[s("A=1;B=two words")]), s("A=1 B=two' 'words"));
        assert_eq!(call("envV1ToV2", &[s("B=2; A=1")]), s("A=1 B=2"));
        assert_eq!(call("envV1ToV2", &[s("|A=1|B=x;y")]), s("A=1 B=x;y"));
        assert_eq!(call("envV1ToV2", &[s("A=it's")]), s("A=it''''s"));
        assert_eq!(call("envV1ToV2", &[s("A=")]), s("A="));
        assert_eq!(call("envV1ToV2", &[s("A=1;$$(X)")]), s("$$(X) A=1"));
        assert_eq!(call("envV1ToV2", &[s("$$(X)")]), E);
        assert_eq!(call("envV1ToV2", &[s("")]), s(""));
        assert_eq!(call("envV1ToV2", &[s("A")]), E);
        assert_eq!(call("envV1ToV2", &[s("=1")]), E);
        assert_eq!(call("envV1ToV2", &[U]), U);
        assert_eq!(call("envV1ToV2", &[i(1)]), E);
        assert_eq!(call("envV1ToV2", &[]), E);
        assert_eq!(
            call("mergeEnvironment", &[s("A=1 B=2"), U, s("B=3 'C=x y'")]),
            s("A=1 B=3 C=x' 'y")
        );
        assert_eq!(call("mergeEnvironment", &[]), s(""));
        assert_eq!(call("mergeEnvironment", &[s("A=1 'B")]), E);
        assert_eq!(call("mergeEnvironment", &[s("A")]), E);
        assert_eq!(call("mergeEnvironment", &[i(1)]), E);
    }

    #[test]
    fn argument_strings() {
        assert_eq!(call("argsToList", &[s("a 'b c' d''e")]), strs(&["a", "b c", "de"]));
        assert_eq!(call("argsToList", &[s("a 'it''s'")]), strs(&["a", "it's"]));
        assert_eq!(call("argsToList", &[s("a 'b c'"), i(1)]), strs(&["a", "'b", "c'"]));
        assert_eq!(call("argsToList", &[s("'a")]), E);
        assert_eq!(call("argsToList", &[s("a"), i(3)]), E);
        assert_eq!(call("argsToList", &[U]), E);
        assert_eq!(call("listToArgs", &[strs(&["a", "b c", "", "it's"])]), s("a b' 'c '' it''''s"));
        assert_eq!(call("listToArgs", &[strs(&["a", "b"]), i(1)]), s("a b"));
        assert_eq!(call("listToArgs", &[strs(&["a", "b c"]), i(1)]), E);
        assert_eq!(call("listToArgs", &[l(&[i(1)])]), E);
        assert_eq!(call("listToArgs", &[s("a")]), E);
    }

    #[test]
    fn misc() {
        assert_eq!(call("debug", &[i(3)]), i(3));
        assert_eq!(call("debug", &[]), E);
        assert_eq!(natural_cmp(b"a\xff", b"a1"), -1 - 49);
    }

    #[test]
    fn strtod_prefixes() {
        assert_eq!(strtod(b"  -12.5e1xyz"), (-125.0, 9));
        assert_eq!(strtod(b"+.5"), (0.5, 3));
        assert_eq!(strtod(b"5."), (5.0, 2));
        assert_eq!(strtod(b"."), (0.0, 0));
        assert_eq!(strtod(b"1e+"), (1.0, 1));
        assert_eq!(strtod(b"0x10"), (16.0, 4));
        assert_eq!(strtod(b"0x.8p1"), (1.0, 6));
        assert_eq!(strtod(b"infinityx"), (f64::INFINITY, 8));
        assert_eq!(strtod(b"-INFx"), (f64::NEG_INFINITY, 4));
        assert_eq!(strtod(b"nan(abc)").1, 8);
        assert_eq!(strtod(b"nan(a-c)").1, 3);
        assert_eq!(strtod(b"").1, 0);
    }

    #[test]
    fn never_panics_on_odd_input() {
        let odd = [
            U,
            E,
            b(true),
            i(i64::MIN),
            i(-1),
            i(0),
            i(i64::MAX),
            r(f64::NAN),
            r(f64::NEG_INFINITY),
            r(-0.0),
            r(1e300),
            s(""),
            s("é"),
            s("\0a"),
            s("%"),
            s("\\"),
            s("(("),
            l(&[]),
            l(&[U, E, s("x")]),
            ad(&[]),
        ];
        let names = [
            "isundefined",
            "member",
            "identicalmember",
            "size",
            "sum",
            "avg",
            "min",
            "max",
            "anycompare",
            "allcompare",
            "splittime",
            "formattime",
            "interval",
            "strcat",
            "join",
            "toupper",
            "substr",
            "strcmp",
            "stricmp",
            "versioncmp",
            "version_in_range",
            "regexp",
            "regexpmember",
            "regexps",
            "replace",
            "replaceall",
            "int",
            "real",
            "string",
            "bool",
            "floor",
            "round",
            "pow",
            "quantize",
            "random",
            "debug",
            "stringlistsintersect",
            "stringlistsize",
            "stringlistsum",
            "stringlistmax",
            "stringlistmember",
            "stringlistisubsetmatch",
            "stringlist_regexpmember",
            "splitusername",
            "split",
            "envv1tov2",
            "mergeenvironment",
            "argstolist",
            "listtoargs",
        ];
        for n in names {
            call(n, &[]);
            for a in &odd {
                call(n, std::slice::from_ref(a));
                for b in &odd {
                    call(n, &[a.clone(), b.clone()]);
                    call(n, &[s("<"), a.clone(), b.clone()]);
                    call(n, &[a.clone(), b.clone(), s("fgimsx")]);
                }
            }
        }
    }
}
