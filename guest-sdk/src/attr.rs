//! The job's own ClassAd: HTCondor's chirp.
//!
//! A job can read any attribute of its job ad, as ClassAd expression text, and
//! set a few of them: `Progress`, and attributes whose names begin with `Chirp`
//! (for results and status a user wants to see in the queue while the job
//! runs). Attribute names are case-insensitive, as everywhere in ClassAds.
//!
//! Values are ClassAd expression text. [`set`] takes the text as it is; the
//! typed setters ([`set_int`], [`set_real`], [`set_string`], [`set_bool`],
//! [`set_progress`]) write correct literals for you, quoting and escaping
//! strings. The typed getters ([`get_int`], [`get_real`], [`get_string`],
//! [`get_bool`]) read attributes whose value is a plain literal.
//!
//! ```no_run
//! use andes_guest::attr;
//!
//! let cpus = attr::get_int("RequestCpus").unwrap_or(1);
//! attr::set_progress(0.25)?;
//! attr::set_string("ChirpStage", "say \"hi\"")?; // sent as "say \"hi\""
//! attr::set("ChirpCpus", &cpus.to_string())?;
//! // Identity and state belong to andes: refused here, before asking the host.
//! assert!(matches!(attr::set("JobStatus", "4"), Err(attr::AttrError::NotSettable { .. })));
//! # Ok::<(), attr::AttrError>(())
//! ```

use crate::sys;
use std::error::Error;
use std::fmt;

/// The attribute a job sets to report how far it has got: a real from 0 to 1.
pub const PROGRESS: &str = "Progress";

/// The prefix of the attributes a job may set freely.
pub const CHIRP_PREFIX: &str = "Chirp";

/// Why an attribute could not be set.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttrError {
    /// A job may not set this attribute: only `Progress` and names beginning
    /// with `Chirp` are allowed. Identity and state (`ClusterId`, `ProcId`,
    /// `Owner`, `JobStatus`, ...) belong to andes. Refused without asking the
    /// host.
    NotSettable {
        /// The name as given.
        name: String,
    },
    /// The name is not a ClassAd attribute name (a letter or `_`, then
    /// letters, digits and `_`). Refused without asking the host.
    InvalidName {
        /// The name as given.
        name: String,
    },
    /// The value cannot be written as a ClassAd expression (for example an
    /// empty expression, or a progress that is not a number). Refused without
    /// asking the host.
    InvalidValue {
        /// The attribute being set.
        name: String,
        /// What is wrong with the value.
        reason: String,
    },
    /// The host refused the update and said why (for example, the value does
    /// not parse as a ClassAd expression, or is too large).
    Refused {
        /// The attribute being set.
        name: String,
        /// The host's explanation.
        reason: String,
    },
    /// The job is not running under andes (the crate was built for a target
    /// other than wasm32), so there is no job ad to update.
    NotUnderAndes,
}

impl fmt::Display for AttrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrError::NotSettable { name } => write!(
                f,
                "a job may not set attribute `{name}`: only `{PROGRESS}` and attributes whose \
                 names begin with `{CHIRP_PREFIX}` (for example `ChirpResult`) can be set"
            ),
            AttrError::InvalidName { name } => write!(
                f,
                "`{name}` is not a ClassAd attribute name: use a letter or `_` followed by \
                 letters, digits and `_`"
            ),
            AttrError::InvalidValue { name, reason } => {
                write!(f, "invalid value for attribute `{name}`: {reason}")
            }
            AttrError::Refused { name, reason } => {
                write!(f, "the host refused to set attribute `{name}`: {reason}")
            }
            AttrError::NotUnderAndes => {
                f.write_str("not running under andes: there is no job ad to update")
            }
        }
    }
}

impl Error for AttrError {}

/// Whether `name` is a plain ClassAd attribute name: a letter or `_`, then
/// letters, digits and `_`.
pub fn is_valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether a job may set attribute `name`: `Progress`, or a name beginning with
/// `Chirp`, compared case-insensitively as ClassAd names are. The host applies
/// the same rule; this lets a job find out without asking.
pub fn is_settable(name: &str) -> bool {
    is_valid_name(name)
        && (name.eq_ignore_ascii_case(PROGRESS)
            || name
                .get(..CHIRP_PREFIX.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(CHIRP_PREFIX)))
}

/// Checks a name before asking the host to set it.
fn check_settable(name: &str) -> Result<(), AttrError> {
    if !is_valid_name(name) {
        return Err(AttrError::InvalidName { name: name.to_owned() });
    }
    if !is_settable(name) {
        return Err(AttrError::NotSettable { name: name.to_owned() });
    }
    Ok(())
}

/// One attribute of the job's ad, as ClassAd expression text: `"alice"` with
/// its quotes, `42`, `TARGET.Memory > 10`. `None` when the ad has no such
/// attribute (and outside andes).
pub fn get(name: &str) -> Option<String> {
    sys::get(name)
}

/// An attribute whose value is a string literal, unquoted and unescaped.
/// `None` if it is missing or is not a single string literal.
pub fn get_string(name: &str) -> Option<String> {
    parse_string_literal(&get(name)?)
}

/// An attribute whose value is an integer literal (possibly negative).
/// `None` if it is missing or is anything else.
pub fn get_int(name: &str) -> Option<i64> {
    parse_int_literal(&get(name)?)
}

/// An attribute whose value is a real or integer literal, as an `f64`.
/// `None` if it is missing or is anything else.
pub fn get_real(name: &str) -> Option<f64> {
    parse_real_literal(&get(name)?)
}

/// An attribute whose value is `true` or `false` (in any case).
/// `None` if it is missing or is anything else.
pub fn get_bool(name: &str) -> Option<bool> {
    let text = get(name)?;
    let text = text.trim();
    if text.eq_ignore_ascii_case("true") {
        Some(true)
    } else if text.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// Sets attribute `name` of the job's ad to the ClassAd expression `value_expr`,
/// taken as it is: `set("ChirpCount", "42")`, `set("ChirpName", "\"alice\"")`.
/// To set a plain value, prefer the typed setters, which write the literal.
///
/// Only `Progress` and names beginning with `Chirp` may be set; anything else
/// (`ClusterId`, `ProcId`, `Owner`, `JobStatus`, ...) fails with
/// [`AttrError::NotSettable`] without asking the host. The host parses the
/// expression and may refuse it ([`AttrError::Refused`]).
pub fn set(name: &str, value_expr: &str) -> Result<(), AttrError> {
    check_settable(name)?;
    if value_expr.trim().is_empty() {
        return Err(AttrError::InvalidValue {
            name: name.to_owned(),
            reason: "the expression is empty".to_owned(),
        });
    }
    sys::set(name, value_expr).map_err(|reason| match reason {
        Some(reason) => AttrError::Refused { name: name.to_owned(), reason },
        None => AttrError::NotUnderAndes,
    })
}

/// Sets `Progress` to `fraction`, a real from 0 (just started) to 1 (done).
/// A finite value outside that range is clamped into it; NaN and infinities
/// fail with [`AttrError::InvalidValue`].
pub fn set_progress(fraction: f64) -> Result<(), AttrError> {
    if !fraction.is_finite() {
        return Err(AttrError::InvalidValue {
            name: PROGRESS.to_owned(),
            reason: format!("progress must be a number from 0 to 1, not {fraction}"),
        });
    }
    set(PROGRESS, &real_literal(fraction.clamp(0.0, 1.0)))
}

/// Sets attribute `name` to an integer literal.
pub fn set_int(name: &str, value: i64) -> Result<(), AttrError> {
    set(name, &value.to_string())
}

/// Sets attribute `name` to a real literal (see [`real_literal`]).
pub fn set_real(name: &str, value: f64) -> Result<(), AttrError> {
    set(name, &real_literal(value))
}

/// Sets attribute `name` to a string literal holding `value` (see
/// [`string_literal`]): any text is allowed.
pub fn set_string(name: &str, value: &str) -> Result<(), AttrError> {
    set(name, &string_literal(value))
}

/// Sets attribute `name` to `true` or `false`.
pub fn set_bool(name: &str, value: bool) -> Result<(), AttrError> {
    set(name, if value { "true" } else { "false" })
}

/// `value` as a ClassAd string literal: in double quotes, with `"` and `\`
/// escaped, the usual C escapes for control characters (`\n`, `\t`, `\r`, `\b`,
/// `\f`), and every other byte outside printable ASCII as a three-digit octal
/// escape, as HTCondor's unparser writes it. Parsing the literal gives back
/// `value` exactly.
///
/// ```
/// assert_eq!(andes_guest::attr::string_literal("say \"hi\"\n"), r#""say \"hi\"\n""#);
/// assert_eq!(andes_guest::attr::string_literal("é"), r#""\303\251""#);
/// ```
pub fn string_literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for b in value.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                out.push('\\');
                out.push(char::from(b'0' + (b >> 6)));
                out.push(char::from(b'0' + ((b >> 3) & 7)));
                out.push(char::from(b'0' + (b & 7)));
            }
        }
    }
    out.push('"');
    out
}

/// `value` as ClassAd expression text that evaluates to the same real: the
/// shortest decimal that reads back exactly, always with a `.` so that it is a
/// real and not an integer (`1.0`, `0.42`, `1.0e-7`), and `real("NaN")`,
/// `real("INF")` or `real("-INF")` for values that have no literal.
///
/// ```
/// use andes_guest::attr::real_literal;
/// assert_eq!(real_literal(0.5), "0.5");
/// assert_eq!(real_literal(3.0), "3.0");
/// assert_eq!(real_literal(1e20), "1.0e20");
/// assert_eq!(real_literal(f64::INFINITY), r#"real("INF")"#);
/// ```
pub fn real_literal(value: f64) -> String {
    if value.is_nan() {
        return "real(\"NaN\")".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "real(\"INF\")" } else { "real(\"-INF\")" }.to_owned();
    }
    // Debug prints the shortest text that round-trips: `0.1`, `3.0`, `1e20`,
    // `1.5e-7`. Make sure the mantissa has a `.`.
    let text = format!("{value:?}");
    match text.split_once('e') {
        Some((mantissa, exp)) if !mantissa.contains('.') => format!("{mantissa}.0e{exp}"),
        _ => text,
    }
}

/// Reads a ClassAd string literal, such as [`get`] returns for a string
/// attribute: the text between the quotes with its escapes resolved. `None` if
/// `text` (less surrounding white space) is not one string literal.
///
/// ```
/// use andes_guest::attr::parse_string_literal;
/// assert_eq!(parse_string_literal(r#""a\tb""#).as_deref(), Some("a\tb"));
/// assert_eq!(parse_string_literal(r#""a" + "b""#), None);
/// ```
pub fn parse_string_literal(text: &str) -> Option<String> {
    let inner = text.trim().strip_prefix('"')?.strip_suffix('"')?;
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        match b {
            b'"' => return None, // an unescaped quote: more than one literal
            b'\\' => {
                let e = *bytes.get(i)?; // a trailing `\` escaped the closing quote
                i += 1;
                match e {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'b' => out.push(0x08),
                    b'f' => out.push(0x0c),
                    b'a' => out.push(0x07),
                    b'v' => out.push(0x0b),
                    b'0'..=b'7' => {
                        // Up to three octal digits; a leading 4-7 allows two.
                        let max = if e <= b'3' { 3 } else { 2 };
                        let mut v = u32::from(e - b'0');
                        let mut n = 1;
                        while n < max {
                            match bytes.get(i) {
                                Some(&d @ b'0'..=b'7') => {
                                    v = v * 8 + u32::from(d - b'0');
                                    i += 1;
                                    n += 1;
                                }
                                _ => break,
                            }
                        }
                        out.push(v as u8);
                    }
                    // `\\`, `\"`, `\'` and any other escape: the character itself.
                    other => out.push(other),
                }
            }
            _ => out.push(b),
        }
    }
    Some(match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Reads an integer literal, possibly with a leading `-`: `42`, `-7`.
fn parse_int_literal(text: &str) -> Option<i64> {
    let text = text.trim();
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Reads a real or integer literal, possibly with a leading `-`.
fn parse_real_literal(text: &str) -> Option<f64> {
    let text = text.trim();
    let body = text.strip_prefix('-').unwrap_or(text);
    // Only what a ClassAd number can hold: `str::parse` would also take `inf`
    // and `NaN`, which in a ClassAd are attribute references.
    if !body.starts_with(|c: char| c.is_ascii_digit())
        || !body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitelist() {
        for ok in ["Progress", "progress", "PROGRESS", "ChirpResult", "chirp_x", "CHIRPY", "Chirp"]
        {
            assert!(is_settable(ok), "{ok} should be settable");
            assert_eq!(check_settable(ok), Ok(()));
        }
        for refused in [
            "ClusterId",
            "ProcId",
            "Owner",
            "JobStatus",
            "HoldReason",
            "Requirements",
            "ProgressX",
            "XChirp",
            "Chir",
        ] {
            assert!(!is_settable(refused), "{refused} should be refused");
            let err = set(refused, "1").unwrap_err();
            assert_eq!(err, AttrError::NotSettable { name: refused.to_owned() });
            assert!(err.to_string().contains(refused), "{err}");
            assert!(err.to_string().contains("Chirp"), "{err}");
        }
    }

    #[test]
    fn invalid_names_are_refused_locally() {
        for bad in ["", "1Chirp", "Chirp.X", "Chirp X", "Chirp-X", "Chirpé", "\"Progress\""] {
            assert!(!is_valid_name(bad), "{bad:?}");
            assert_eq!(set(bad, "1"), Err(AttrError::InvalidName { name: bad.to_owned() }));
        }
        assert!(is_valid_name("_x9"));
    }

    #[test]
    fn empty_value_is_refused_locally() {
        assert!(matches!(set("ChirpX", "  "), Err(AttrError::InvalidValue { .. })));
    }

    #[test]
    fn natively_there_is_no_host() {
        assert_eq!(get("Owner"), None);
        assert_eq!(get_string("Owner"), None);
        assert_eq!(set("ChirpX", "1"), Err(AttrError::NotUnderAndes));
        assert_eq!(set_progress(0.5), Err(AttrError::NotUnderAndes));
        assert_eq!(set_int("ChirpX", 1), Err(AttrError::NotUnderAndes));
        assert_eq!(set_string("ChirpX", "x"), Err(AttrError::NotUnderAndes));
        assert_eq!(set_bool("ChirpX", true), Err(AttrError::NotUnderAndes));
        assert_eq!(set_real("ChirpX", 1.5), Err(AttrError::NotUnderAndes));
        // The local checks come first.
        assert!(matches!(set_int("Owner", 1), Err(AttrError::NotSettable { .. })));
    }

    #[test]
    fn progress_must_be_a_number() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(matches!(set_progress(bad), Err(AttrError::InvalidValue { .. })));
        }
    }

    #[test]
    fn string_literals() {
        assert_eq!(string_literal(""), r#""""#);
        assert_eq!(string_literal("alice"), r#""alice""#);
        assert_eq!(string_literal(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(string_literal("1\n2\t3\r\u{8}\u{c}"), r#""1\n2\t3\r\b\f""#);
        assert_eq!(string_literal("\0\u{1}\u{7f}"), r#""\000\001\177""#);
        assert_eq!(string_literal("it's"), r#""it's""#);
        assert_eq!(string_literal("ü"), r#""\303\274""#);
    }

    #[test]
    fn string_literals_round_trip() {
        for s in
            ["", "plain", "q\"uote", "back\\slash\\", "\n\t\r\u{8}\u{c}\0", "日本語 ✓", "\\101"]
        {
            let lit = string_literal(s);
            assert_eq!(parse_string_literal(&lit).as_deref(), Some(s), "{lit}");
        }
        // All bytes a string can hold.
        let all: String = (0u32..0x800).filter_map(char::from_u32).collect();
        assert_eq!(parse_string_literal(&string_literal(&all)), Some(all));
    }

    #[test]
    fn parsing_string_literals() {
        assert_eq!(parse_string_literal(r#"  "x"  "#).as_deref(), Some("x"));
        assert_eq!(parse_string_literal(r#""\a\v\q\'\?""#).as_deref(), Some("\u{7}\u{b}q'?"));
        assert_eq!(parse_string_literal(r#""\101\60\0""#).as_deref(), Some("A0\0"));
        assert_eq!(parse_string_literal(r#""\477""#).as_deref(), Some("'7"));
        for not_one in [r#"x"#, r#""x"#, r#"x""#, r#"""#, r#""a"+"b""#, r#""a\""#, "42"] {
            assert_eq!(parse_string_literal(not_one), None, "{not_one}");
        }
    }

    #[test]
    fn real_literals() {
        assert_eq!(real_literal(0.0), "0.0");
        assert_eq!(real_literal(-0.0), "-0.0");
        assert_eq!(real_literal(0.42), "0.42");
        assert_eq!(real_literal(1.0), "1.0");
        assert_eq!(real_literal(-2.5), "-2.5");
        assert_eq!(real_literal(1e16), "1.0e16");
        assert_eq!(real_literal(1.5e-7), "1.5e-7");
        assert_eq!(real_literal(f64::MAX), "1.7976931348623157e308");
        assert_eq!(real_literal(f64::NAN), r#"real("NaN")"#);
        assert_eq!(real_literal(f64::NEG_INFINITY), r#"real("-INF")"#);
        for v in [0.1, 1.0 / 3.0, 6.02e23, -1e-300, 123456789.0, f64::MIN_POSITIVE] {
            let lit = real_literal(v);
            assert!(lit.contains('.'), "{lit}");
            assert_eq!(parse_real_literal(&lit), Some(v), "{lit}");
        }
    }

    #[test]
    fn number_literals() {
        assert_eq!(parse_int_literal(" 42 "), Some(42));
        assert_eq!(parse_int_literal("-7"), Some(-7));
        assert_eq!(parse_int_literal("9223372036854775807"), Some(i64::MAX));
        for bad in ["", "-", "+1", "1.0", "0x10", "\"1\"", "1 + 1", "99999999999999999999"] {
            assert_eq!(parse_int_literal(bad), None, "{bad}");
        }
        assert_eq!(parse_real_literal("2"), Some(2.0));
        assert_eq!(parse_real_literal("-2.5e3"), Some(-2500.0));
        for bad in ["inf", "NaN", "-inf", "", ".5", "x", "real(\"INF\")", "1.0.0"] {
            assert_eq!(parse_real_literal(bad), None, "{bad}");
        }
    }
}
