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

/// The shortest decimal digits that read back as the finite, non-zero `r`
/// (of its magnitude; at most 16 of them, and the exponent of the first),
/// when they are also `|r|` rounded to 16 significant digits, padded with
/// zeros: what `%.15E` and `%.16G` print. `None` otherwise (or when it
/// cannot tell), for the exact, slower way.
///
/// How it tells: with `D = N * 10^s` the shortest digits (`N` an integer of
/// `n` digits, `e = s + n - 1` the exponent), rounding `|r|` to 16 digits
/// gives `D` when `|r - D| < 0.5 * 10^(e-15)`, `|r|` being in `D`'s decade
/// (it is unless `D` is a power of ten above it: no shorter number that
/// reads back as `r` lies between them). `r - D` is had exactly enough with
/// one fused multiply-add when `N` and `10^|s|` are exact doubles:
/// `|r| * 10^-s - N` (or `N * 10^s - |r|`), a single rounding of the exact
/// difference; the bound is taken with a margin far wider than that
/// rounding, so it errs only towards the slow way. Most reals of a job's
/// ad (times in seconds from nanoseconds; 88 % of three-place decimals)
/// take this way: printing them was 3 % of a busy pool's CPU, each exactly
/// rounded, read back and printed again.
pub(crate) fn shortest_digits(r: f64) -> Option<(Digits, i32)> {
    /// The powers of ten a double holds exactly.
    const POW10: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ];
    const MARGIN: f64 = 1.0 - 1e-9;
    let a = r.abs();
    if !a.is_normal() {
        return None; // zero, subnormals, the specials
    }
    let mut text = Digits { buf: [0; 24], len: 0 };
    std::io::Write::write_fmt(&mut text, format_args!("{a:e}")).ok()?;
    let (mant, exp) = std::str::from_utf8(text.as_bytes()).ok()?.split_once('e')?;
    let e: i32 = exp.parse().ok()?;
    let mut digits = Digits { buf: [0; 24], len: 0 };
    let mut n_value: u64 = 0;
    for b in mant.bytes().filter(u8::is_ascii_digit) {
        *digits.buf.get_mut(digits.len)? = b;
        digits.len += 1;
        n_value = n_value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    let n = digits.len as i32;
    if n > 16 || n_value >= 1 << 53 {
        return None;
    }
    let big_n = n_value as f64;
    let s = e - (n - 1);
    let pow = |k: i32| POW10.get(usize::try_from(k).ok()?).copied();
    // (|r| - D) scaled by 10^-s when s < 0, (D - |r|) when s >= 0, and the
    // bound 0.5 * 10^(e-15) scaled alike.
    let (diff, bound, r_below) = if s < 0 {
        let p = pow(-s)?;
        let t = a.mul_add(p, -big_n);
        (t, 0.5 / pow(16 - n)?, t < 0.0)
    } else {
        let p = pow(s)?;
        let t = big_n.mul_add(p, -a);
        let bound = if e >= 15 { 0.5 * pow(e - 15)? } else { 0.5 / pow(15 - e)? };
        (t, bound, t > 0.0)
    };
    if n_value == 1 && r_below {
        return None; // D = 10^e above |r|: another decade
    }
    (diff.abs() < bound * MARGIN).then_some((digits, e))
}

/// Up to 24 ASCII bytes, on the stack.
pub(crate) struct Digits {
    buf: [u8; 24],
    len: usize,
}

impl Digits {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::io::Write for Digits {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let end = self.len + b.len();
        let Some(to) = self.buf.get_mut(self.len..end) else {
            return Err(std::io::ErrorKind::WriteZero.into());
        };
        to.copy_from_slice(b);
        self.len = end;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Appends `%.15E` of a real from [`shortest_digits`]'s digits `d` and
/// exponent `e`.
pub(crate) fn e15_of_digits(out: &mut String, negative: bool, d: &[u8], e: i32) {
    if negative {
        out.push('-');
    }
    out.push(d.first().map_or('0', |&b| b as char));
    out.push('.');
    for i in 1..16 {
        out.push(d.get(i).map_or('0', |&b| b as char));
    }
    exponent_to(out, 'E', e);
}

/// Appends `E+05`, `E-123`: C's exponent, at least two digits.
fn exponent_to(out: &mut String, letter: char, e: i32) {
    use std::fmt::Write as _;
    out.push(letter);
    out.push(if e < 0 { '-' } else { '+' });
    let _ = write!(out, "{:02}", e.unsigned_abs());
}

/// `printf("%.15E", r)` for a finite, non-zero real.
pub(crate) fn format_e15(r: f64) -> String {
    match shortest_digits(r) {
        Some((digits, e)) => {
            let mut s = String::with_capacity(24);
            e15_of_digits(&mut s, r < 0.0, digits.as_bytes(), e);
            s
        }
        None => format_e15_exact(r),
    }
}

/// [`format_e15`] the exact way: every real, slower.
pub(crate) fn format_e15_exact(r: f64) -> String {
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
    if let Some((digits, e)) = shortest_digits(r) {
        return g16_of_digits(r < 0.0, digits.as_bytes(), e);
    }
    format_real_g16_exact(r)
}

/// `%.16G` (trailing zeros dropped, `.0` added to a whole number) from
/// [`shortest_digits`]'s digits `d` and exponent `e`.
fn g16_of_digits(negative: bool, d: &[u8], e: i32) -> String {
    let mut s = String::with_capacity(24);
    if negative {
        s.push('-');
    }
    let digit = |i: usize| d.get(i).map_or('0', |&b| b as char);
    if !(-4..16).contains(&e) {
        s.push(digit(0));
        if d.len() > 1 {
            s.push('.');
            d[1..].iter().for_each(|&b| s.push(b as char));
        }
        exponent_to(&mut s, 'E', e);
    } else if e < 0 {
        s.push_str("0.");
        (0..(-e - 1)).for_each(|_| s.push('0'));
        d.iter().for_each(|&b| s.push(b as char));
    } else {
        let whole = e as usize + 1;
        (0..whole).for_each(|i| s.push(digit(i)));
        if d.len() > whole {
            s.push('.');
            d[whole..].iter().for_each(|&b| s.push(b as char));
        } else {
            s.push_str(".0");
        }
    }
    s
}

/// [`format_real_g16`] the exact way, for a finite non-zero real.
pub(crate) fn format_real_g16_exact(r: f64) -> String {
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
    // Runs of bytes printed as they are go in whole.
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let run = bytes[i..]
            .iter()
            .position(|&b| !(0x20..=0x7e).contains(&b) || b == b'"' || b == b'\\')
            .unwrap_or(bytes.len() - i);
        // Printable ASCII begins and ends on character boundaries (the
        // bytes of a multi-byte character are escaped one by one).
        if run > 0 {
            out.push_str(&s[i..i + run]);
            i += run;
        }
        let Some(&b) = bytes.get(i) else { break };
        i += 1;
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `format_real_exact` as it was before its fast way.
    fn exact_reference(r: f64) -> String {
        crate::unparse::format_real_exact_slow(r)
    }

    /// Reals of every kind: random bit patterns (every exponent), the
    /// decimals jobs report (times, rates, sizes), powers of ten and two and
    /// their neighbours, the largest and smallest.
    fn reals() -> Vec<f64> {
        let mut v = Vec::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = f64::from_bits(x);
            if r.is_finite() && r != 0.0 {
                v.push(r);
            }
            // A decimal of 1 to 17 digits at any scale.
            let digits = (x >> 40) % 10u64.pow(1 + (x % 17) as u32);
            let scale = ((x >> 20) % 80) as i32 - 40;
            v.push(digits.max(1) as f64 * 10f64.powi(scale));
            v.push((x % 100_000) as f64 / 1000.0);
            v.push((x % 1_000_000_007) as f64 * 1e-9);
        }
        for e in -320..=308 {
            let p = 10f64.powi(e);
            let q = 2f64.powi(e.clamp(-1074, 1023));
            for r in [p, q] {
                v.extend([
                    r,
                    f64::from_bits(r.to_bits() + 1),
                    f64::from_bits(r.to_bits().saturating_sub(1)),
                ]);
                v.extend([4.5 * r, 4.503 * r, 9.999_999_999_999_999 * r, 0.3 * r, 0.1 + r]);
            }
        }
        v.extend([f64::MAX, f64::MIN_POSITIVE, 5e-324, 0.1 + 0.2, 1.0 / 3.0, 2.0 / 3.0]);
        v.retain(|r| r.is_finite() && *r != 0.0);
        let negatives: Vec<f64> = v.iter().map(|r| -r).collect();
        v.extend(negatives);
        v
    }

    /// Strings print as HTCondor's unparser prints them: printable ASCII as
    /// it is, quotes and backslashes escaped, every other byte (each of a
    /// multi-byte character) in octal.
    #[test]
    fn quoted_strings_escape_as_htcondor_does() {
        let quoted = |s: &str| {
            let mut out = String::new();
            write_quoted(&mut out, s);
            out
        };
        assert_eq!(quoted(""), r#""""#);
        assert_eq!(quoted("plain text"), r#""plain text""#);
        assert_eq!(quoted("a\"b\\c\n\t\r\x08\x0c"), r#""a\"b\\c\n\t\r\b\f""#);
        assert_eq!(quoted("é"), r#""\303\251""#);
        assert_eq!(quoted("aé b\x01"), r#""a\303\251 b\001""#);
        assert_eq!(quoted("€x"), r#""\342\202\254x""#);
    }

    /// The fast way prints, for every real it takes, what C's `%.15E` and
    /// `%.16G` print (the exact way's text), and takes most reals a job's
    /// ad holds.
    #[test]
    fn shortest_digits_print_what_the_exact_way_prints() {
        let mut fast = 0;
        let all = reals();
        for &r in &all {
            if shortest_digits(r).is_some() {
                fast += 1;
            }
            assert_eq!(format_e15(r), format_e15_exact(r), "%.15E of {r:e}");
            assert_eq!(format_real_g16(r), format_real_g16_exact(r), "%.16G of {r:e}");
            assert_eq!(
                crate::unparse::format_real_exact(r),
                exact_reference(r),
                "exact text of {r:e}"
            );
            let mut s = String::new();
            crate::unparse::value_to(&mut s, &Value::Real(r));
            assert_eq!(s, exact_reference(r), "unparsed {r:e}");
        }
        // (Random bit patterns have 17 digits: the exact way.)
        assert!(fast > all.len() / 3, "the fast way took {fast} of {}", all.len());
        let decimals = (1..100_000).map(|k| k as f64 / 1000.0);
        let fast_decimals = decimals.clone().filter(|r| shortest_digits(*r).is_some()).count();
        assert!(
            fast_decimals * 100 > 99_999 * 85,
            "{fast_decimals} of 99,999 three-place decimals"
        );
        for r in [0.5, 1.25, 3.0, 0.001_234, 100.0, 12_345.678] {
            assert!(shortest_digits(r).is_some(), "{r} takes the fast way");
        }
    }
}
