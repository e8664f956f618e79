//! C's `strtod` on byte strings, as HTCondor's conversions of strings to
//! numbers use it: decimal and hexadecimal floats, `inf` and `nan`.

use super::values::is_c_space;

/// C's `strtod` on a byte string: the value and the number of bytes
/// consumed (0 when no number starts the string). Accepts leading
/// white space, a sign, decimal and hexadecimal floats, `inf`,
/// `infinity` and `nan`, case-insensitively.
pub(super) fn strtod(s: &[u8]) -> (f64, usize) {
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
