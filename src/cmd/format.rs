//! How ads are printed, as `condor_q` and `condor_status` print them:
//! `-long`, `-af` (autoformat) and `-format` (C printf conversions), shared
//! by `andes q`, `andes history` and `andes status`.

use anyhow::Result;
use clap::Args;
use classad::{ClassAd, Value};

/// How jobs are shown.
#[derive(Args, Debug, Default)]
pub struct Format {
    /// Every attribute of each job, in old ClassAd syntax.
    #[arg(long = "long", short = 'l')]
    pub(crate) long: bool,
    /// Every attribute of each job, as a JSON array of ads (HTCondor's form).
    #[arg(long)]
    pub(crate) json: bool,
    /// Only these attributes' (or expressions') values, one job per line
    /// (condor_q's `-af`/`-autoformat`). `-af:OPTS` as HTCondor takes it:
    /// `h` a header of the names, `j` the job id first, `l` each value labelled
    /// `NAME = VALUE`, `t` tabs between values, `,` commas, `n` a line per value,
    /// `g` a blank line between jobs, `V` strings quoted, `r` expressions
    /// unevaluated.
    #[arg(long = "af", visible_alias = "autoformat", num_args = 1.., value_name = "ATTR")]
    pub(crate) af: Vec<String>,
    /// The letters of `-af:OPTS` (given as `-af:OPTS`, not by this name).
    #[arg(long = "af-options", hide = true, value_name = "OPTS")]
    pub(crate) af_options: Option<String>,
    /// printf-style output, as condor_q's `-format FMT ATTR` (repeatable): each
    /// pair prints ATTR's value through FMT (`%d %i %s %f %e %g %x %o %c %v %V`,
    /// with flags, width and precision; `\n` and `\t` in FMT); an undefined
    /// value prints nothing for its pair.
    #[arg(
        long = "format",
        num_args = 2,
        value_names = ["FMT", "ATTR"],
        action = clap::ArgAction::Append,
        allow_hyphen_values = true
    )]
    pub(crate) printf: Vec<String>,
}

/// The widest field, and the most digits, a `-format` conversion may ask
/// for: beyond it the format is refused (a width of 10^12 would otherwise
/// be padded out in memory).
pub(crate) const MAX_FIELD: usize = 4096;

impl Format {
    /// Refuses a `-format` whose field width or precision is over
    /// [`MAX_FIELD`], naming it.
    pub(crate) fn check(&self) -> Result<()> {
        for fmt in self.printf.iter().step_by(2) {
            let mut chars = fmt.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '%' => {
                        let spec = Spec::read(&mut chars);
                        for n in [Some(&spec.width), spec.precision.as_ref()].into_iter().flatten()
                        {
                            if n.parse::<u128>().map_or(n.len() > 5, |v| v > MAX_FIELD as u128) {
                                anyhow::bail!(
                                    "-format {fmt:?}: a field width or precision of {n} is more \
                                     than {MAX_FIELD}"
                                );
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Whether `-long`, `-json`, `-af` or `-format` was given.
    pub(crate) fn is_set(&self) -> bool {
        self.long || self.json || !self.af.is_empty() || !self.printf.is_empty()
    }

    /// The attributes to ask for: those `-af` and `-format` name (with the job
    /// id for `-af:j`); every attribute (empty) when one of them is an expression
    /// or none is named.
    pub(crate) fn projection(&self) -> Vec<String> {
        let named: Vec<&String> =
            self.af.iter().chain(self.printf.iter().skip(1).step_by(2)).collect();
        let plain = |a: &str| {
            a.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if named.is_empty() || !named.iter().all(|a| plain(a)) {
            return Vec::new();
        }
        let mut p: Vec<String> = named.into_iter().cloned().collect();
        if self.af_options.as_deref().is_some_and(|o| o.contains('j')) {
            p.extend(["ClusterId".to_string(), "ProcId".to_string()]);
        }
        p
    }

    /// The ads as `-long`, `-json` or `-af` print them.
    pub fn render(&self, ads: &[ClassAd]) -> String {
        if self.json {
            let v: Vec<serde_json::Value> = ads.iter().map(classad::json::ad_to_json).collect();
            return serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        }
        if self.long {
            return ads.iter().map(|a| a.to_old_syntax() + "\n").collect();
        }
        let mut out = String::new();
        if !self.printf.is_empty() {
            for ad in ads {
                for pair in self.printf.chunks(2) {
                    if let [fmt, attr] = pair {
                        out.push_str(&printf(fmt, &evaluate(ad, attr)));
                    }
                }
            }
            return out;
        }
        let opts = self.af_options.as_deref().unwrap_or("");
        let sep = if opts.contains(',') {
            ","
        } else if opts.contains('t') {
            "\t"
        } else if opts.contains('n') {
            "\n"
        } else {
            " "
        };
        let job_id = opts.contains('j');
        if opts.contains('h') {
            let mut names: Vec<&str> = Vec::new();
            if job_id {
                names.push("ID");
            }
            names.extend(self.af.iter().map(String::as_str));
            out.push_str(&names.join(sep));
            out.push('\n');
        }
        for (i, ad) in ads.iter().enumerate() {
            if i > 0 && opts.contains('g') {
                out.push('\n');
            }
            let mut cols: Vec<String> = Vec::new();
            if job_id {
                cols.push(format!("{}.{}", int(ad, "ClusterId"), int(ad, "ProcId")));
            }
            for a in &self.af {
                let v = if opts.contains('r') {
                    match ad.get(a) {
                        Some(e) => e.to_string(),
                        None => "undefined".to_string(),
                    }
                } else if opts.contains('V') {
                    let mut s = String::new();
                    classad::unparse::value_to(&mut s, &evaluate(ad, a));
                    s
                } else {
                    af_value(&evaluate(ad, a))
                };
                cols.push(if opts.contains('l') { format!("{a} = {v}") } else { v });
            }
            out.push_str(&cols.join(sep));
            out.push('\n');
        }
        out
    }
}

/// An attribute's value, or an expression's evaluated against the ad (as `-af`
/// and `-format` take either); an expression that does not parse is an error
/// value.
fn evaluate(ad: &ClassAd, what: &str) -> Value {
    if ad.get(what).is_some() {
        return ad.eval_attr(what);
    }
    match classad::parse_expr(what) {
        Ok(e) => ad.eval(&e),
        Err(_) => Value::Error,
    }
}

/// One `-format` pair: `fmt` with its conversion filled from `v`, as printf
/// would (C's flags, width and precision), with `\n`, `\t` and `\\` escapes.
/// An undefined value prints nothing.
pub(crate) fn printf(fmt: &str, v: &Value) -> String {
    if matches!(v, Value::Undefined) {
        return String::new();
    }
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            },
            '%' => {
                let Spec { flags, width, precision } = Spec::read(&mut chars);
                let Some(conv) = chars.next() else {
                    out.push('%');
                    break;
                };
                let precision = precision.map(|p| p.parse::<usize>().unwrap_or(0).min(MAX_FIELD));
                let body = convert(conv, &flags, precision, v);
                let width: usize = width.parse::<usize>().unwrap_or(0).min(MAX_FIELD);
                out.push_str(&pad(&body, width, &flags, conv));
            }
            c => out.push(c),
        }
    }
    out
}

/// A conversion's flags, width and precision (as written), after its `%`.
struct Spec {
    flags: String,
    width: String,
    precision: Option<String>,
}

impl Spec {
    /// Reads flags, width, `.precision` and length modifiers (which mean
    /// nothing here), leaving the conversion character.
    fn read(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Spec {
        fn take(
            chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
            ok: impl Fn(char) -> bool,
        ) -> String {
            let mut s = String::new();
            while let Some(c) = chars.next_if(|c| ok(*c)) {
                s.push(c);
            }
            s
        }
        let flags = take(chars, |c| "-+ 0#".contains(c));
        let width = take(chars, |c| c.is_ascii_digit());
        let precision = chars.next_if_eq(&'.').map(|_| take(chars, |c| c.is_ascii_digit()));
        take(chars, |c| "lhqLjzt".contains(c));
        Spec { flags, width, precision }
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Real(r) => Some(*r),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn convert(conv: char, flags: &str, precision: Option<usize>, v: &Value) -> String {
    let sign = |s: String, neg: bool| {
        if neg {
            s
        } else if flags.contains('+') {
            format!("+{s}")
        } else if flags.contains(' ') {
            format!(" {s}")
        } else {
            s
        }
    };
    match conv {
        '%' => "%".into(),
        'd' | 'i' | 'u' => match number(v) {
            Some(n) => sign(format!("{}", n.trunc() as i64), n < 0.0),
            None => af_value(v),
        },
        'x' => number(v).map_or_else(|| af_value(v), |n| format!("{:x}", n as i64)),
        'X' => number(v).map_or_else(|| af_value(v), |n| format!("{:X}", n as i64)),
        'o' => number(v).map_or_else(|| af_value(v), |n| format!("{:o}", n as i64)),
        'c' => number(v)
            .and_then(|n| char::from_u32(n as u32))
            .map_or_else(|| af_value(v), String::from),
        'f' | 'F' => match number(v) {
            Some(n) => sign(format!("{:.*}", precision.unwrap_or(6), n), n < 0.0),
            None => af_value(v),
        },
        'e' | 'E' => match number(v) {
            Some(n) => {
                let s = c_exp(n, precision.unwrap_or(6));
                sign(if conv == 'E' { s.to_uppercase() } else { s }, n < 0.0)
            }
            None => af_value(v),
        },
        'g' | 'G' => match number(v) {
            Some(n) => {
                let p = precision.unwrap_or(6).max(1);
                let exp = if n == 0.0 { 0 } else { n.abs().log10().floor() as i32 };
                let s = if exp < -4 || exp >= p as i32 {
                    c_exp(n, p - 1)
                } else {
                    let s = format!("{:.*}", (p as i32 - 1 - exp).max(0) as usize, n);
                    if flags.contains('#') || !s.contains('.') {
                        s
                    } else {
                        s.trim_end_matches('0').trim_end_matches('.').to_string()
                    }
                };
                sign(if conv == 'G' { s.to_uppercase() } else { s }, n < 0.0)
            }
            None => af_value(v),
        },
        's' | 'v' => {
            let s = af_value(v);
            match precision {
                Some(p) => s.chars().take(p).collect(),
                None => s,
            }
        }
        'V' => {
            let mut s = String::new();
            classad::unparse::value_to(&mut s, v);
            s
        }
        other => format!("%{other}"),
    }
}

/// C's `%e`: one digit, the fraction, and a signed exponent of at least two digits.
fn c_exp(n: f64, precision: usize) -> String {
    let s = format!("{:.*e}", precision, n);
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

fn pad(body: &str, width: usize, flags: &str, conv: char) -> String {
    let len = body.chars().count();
    if len >= width {
        return body.to_string();
    }
    let fill = width - len;
    if flags.contains('-') {
        format!("{body}{}", " ".repeat(fill))
    } else if flags.contains('0') && "diuxXofFeEgG".contains(conv) {
        let (sign, digits) = match body.chars().next() {
            Some(c @ ('-' | '+' | ' ')) => (c.to_string(), &body[1..]),
            _ => (String::new(), body),
        };
        format!("{sign}{}{digits}", "0".repeat(fill))
    } else {
        format!("{}{body}", " ".repeat(fill))
    }
}

/// A value as `-af` prints it: strings bare, everything else as ClassAd text.
pub(crate) fn af_value(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        other => {
            let mut s = String::new();
            classad::unparse::value_to(&mut s, other);
            s
        }
    }
}

/// An attribute's value as an integer (reals truncated), 0 when it is not a number.
pub(crate) fn int(ad: &ClassAd, name: &str) -> i64 {
    match ad.eval_attr(name) {
        Value::Int(i) => i,
        Value::Real(r) if r.is_finite() => r as i64,
        _ => 0,
    }
}

/// An attribute's string value, empty when it is not a string.
pub(crate) fn string(ad: &ClassAd, name: &str) -> String {
    match ad.eval_attr(name) {
        Value::Str(s) => s.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_converts_as_c_printf_does() {
        let i = Value::Int(42);
        let r = Value::Real(2.5);
        let s = Value::Str("abc".into());
        assert_eq!(printf("%d", &i), "42");
        // A width or precision past MAX_FIELD is refused up front, and never
        // padded out in memory.
        let f = |fmt: &str| Format { printf: vec![fmt.into(), "X".into()], ..Format::default() };
        assert!(f("%4096d").check().is_ok());
        let e = f("[%99999999999999999999d]").check().unwrap_err().to_string();
        assert!(e.contains("99999999999999999999") && e.contains("4096"), "{e}");
        assert!(f("%.5000f").check().is_err());
        assert_eq!(printf("%9999999999d", &i).len(), MAX_FIELD);
        assert_eq!(printf("[%5d|%-5d|%05d|%+d]", &i), "[   42|42   |00042|+42]");
        assert_eq!(printf("%x %X %o %c", &Value::Int(255)), "ff FF 377 ÿ");
        assert_eq!(printf("%.2f %8.3f", &r), "2.50    2.500");
        assert_eq!(printf("%e", &r), "2.500000e+00");
        assert_eq!(printf("%E", &Value::Real(0.000123)), "1.230000E-04");
        assert_eq!(printf("%g %g %g", &Value::Real(0.0001)), "0.0001 0.0001 0.0001");
        assert_eq!(printf("%g", &Value::Real(1234567.0)), "1.23457e+06");
        assert_eq!(printf("%g", &Value::Real(100.0)), "100");
        assert_eq!(printf("%s|%.2s|%V|%v", &s), "abc|ab|\"abc\"|abc");
        assert_eq!(printf("%d", &Value::Real(-7.9)), "-7");
        assert_eq!(printf("100%%\\t%s\\n", &s), "100%\tabc\n");
        // An undefined value prints nothing; a string under %d prints as it is.
        assert_eq!(printf("x=%d\\n", &Value::Undefined), "");
        assert_eq!(printf("%d", &Value::Str("n/a".into())), "n/a");
    }

    #[test]
    fn af_prints_strings_bare() {
        let ad = classad::parse_ad(r#"[a = "x y"; b = 2; c = {1, "z"}]"#).unwrap();
        let f = Format {
            af: vec!["a".into(), "b".into(), "c".into(), "d".into()],
            ..Format::default()
        };
        assert_eq!(f.render(&[ad]), "x y 2 { 1,\"z\" } undefined\n");
    }
}
