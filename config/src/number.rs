use super::*;

pub(crate) fn unquote(s: &str) -> &str {
    let b = s.as_bytes();
    if b.len() > 1 && b[0] == b[b.len() - 1] && (b[0] == b'"' || b[0] == b'\'') {
        &s[1..s.len() - 1]
    } else {
        s
    }
}

// ---------------------------------------------------------------------------
// Arithmetic for $INT / $REAL / $CHOICE / $SUBSTR
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Real(f64),
}

/// Evaluates a simple arithmetic expression: integer and real literals,
/// `true`/`false`, `+ - * / %`, unary `+ -` and parentheses.
pub(crate) fn eval_number(s: &str) -> Option<Num> {
    let mut p = Arith { s: s.as_bytes(), i: 0, depth: 0 };
    let v = p.expr()?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

pub(crate) struct Arith<'s> {
    pub(crate) s: &'s [u8],
    pub(crate) i: usize,
    pub(crate) depth: usize,
}

impl Arith<'_> {
    pub(crate) fn ws(&mut self) {
        while self.i < self.s.len() && is_space(self.s[self.i] as char) {
            self.i += 1;
        }
    }

    pub(crate) fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    pub(crate) fn expr(&mut self) -> Option<Num> {
        let mut v = self.term()?;
        while let Some(c @ (b'+' | b'-')) = self.peek() {
            self.i += 1;
            let r = self.term()?;
            v = arith(c, v, r)?;
        }
        Some(v)
    }

    pub(crate) fn term(&mut self) -> Option<Num> {
        let mut v = self.unary()?;
        while let Some(c @ (b'*' | b'/' | b'%')) = self.peek() {
            self.i += 1;
            let r = self.unary()?;
            v = arith(c, v, r)?;
        }
        Some(v)
    }

    pub(crate) fn unary(&mut self) -> Option<Num> {
        self.depth += 1;
        if self.depth > 64 {
            return None;
        }
        let r = match self.peek()? {
            b'-' => {
                self.i += 1;
                match self.unary()? {
                    Num::Int(i) => i.checked_neg().map(Num::Int),
                    Num::Real(r) => Some(Num::Real(-r)),
                }
            }
            b'+' => {
                self.i += 1;
                self.unary()
            }
            b'(' => {
                self.i += 1;
                let v = self.expr()?;
                if self.peek()? != b')' {
                    return None;
                }
                self.i += 1;
                Some(v)
            }
            _ => self.atom(),
        };
        self.depth -= 1;
        r
    }

    pub(crate) fn atom(&mut self) -> Option<Num> {
        let start = self.i;
        let s = self.s;
        if s[start].is_ascii_alphabetic() {
            let mut e = start;
            while e < s.len() && s[e].is_ascii_alphabetic() {
                e += 1;
            }
            self.i = e;
            let w = std::str::from_utf8(&s[start..e]).ok()?;
            return match w.to_ascii_lowercase().as_str() {
                "true" => Some(Num::Int(1)),
                "false" => Some(Num::Int(0)),
                _ => None,
            };
        }
        let mut e = start;
        let mut real = false;
        while e < s.len() && (s[e].is_ascii_digit() || s[e] == b'.') {
            real |= s[e] == b'.';
            e += 1;
        }
        if e < s.len() && (s[e] == b'e' || s[e] == b'E') {
            let mut k = e + 1;
            if k < s.len() && (s[k] == b'+' || s[k] == b'-') {
                k += 1;
            }
            if k < s.len() && s[k].is_ascii_digit() {
                while k < s.len() && s[k].is_ascii_digit() {
                    k += 1;
                }
                e = k;
                real = true;
            }
        }
        if e == start {
            return None;
        }
        self.i = e;
        let t = std::str::from_utf8(&s[start..e]).ok()?;
        if real {
            t.parse::<f64>().ok().map(Num::Real)
        } else {
            t.parse::<i64>().ok().map(Num::Int)
        }
    }
}

pub(crate) fn arith(op: u8, a: Num, b: Num) -> Option<Num> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => match op {
            b'+' => x.checked_add(y),
            b'-' => x.checked_sub(y),
            b'*' => x.checked_mul(y),
            b'/' => x.checked_div(y),
            _ => x.checked_rem(y),
        }
        .map(Num::Int),
        _ => {
            let f = |n: Num| match n {
                Num::Int(i) => i as f64,
                Num::Real(r) => r,
            };
            let (x, y) = (f(a), f(b));
            Some(Num::Real(match op {
                b'+' => x + y,
                b'-' => x - y,
                b'*' => x * y,
                b'/' => x / y,
                _ => x % y,
            }))
        }
    }
}

// ---------------------------------------------------------------------------
// printf-style formatting for $INT / $REAL
// ---------------------------------------------------------------------------

/// One conversion of a C format string, as written: its flags, width,
/// precision and letter.
#[derive(Clone, Copy)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    /// A length modifier (`h`, `l`, ...) was written, and skipped.
    modifier: bool,
    width: usize,
    prec: Option<usize>,
    conv: char,
}

/// C's `printf` for a format string with exactly one conversion: the text
/// around it (`%%` for a `%`) and what `convert` makes of the conversion.
/// `exactly_one` and `missing` are the errors for a second conversion and
/// for none.
fn format_one(
    fmt: &str,
    exactly_one: &str,
    missing: &str,
    convert: impl FnOnce(&Spec) -> Result<String, String>,
) -> Result<String, String> {
    const MAX_WIDTH: usize = 1024;
    let mut convert = Some(convert);
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        let Some(convert) = convert.take() else {
            return Err(exactly_one.into());
        };
        let (mut left, mut plus, mut space, mut alt, mut zero) =
            (false, false, false, false, false);
        while let Some(&f) = chars.peek() {
            match f {
                '-' => left = true,
                '+' => plus = true,
                ' ' => space = true,
                '#' => alt = true,
                '0' => zero = true,
                _ => break,
            }
            chars.next();
        }
        let num = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| -> Result<Option<usize>, String> {
            let mut n: Option<usize> = None;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                let v = n.unwrap_or(0) * 10 + d as usize;
                if v > MAX_WIDTH {
                    return Err(format!("width or precision larger than {MAX_WIDTH}"));
                }
                n = Some(v);
                chars.next();
            }
            Ok(n)
        };
        let width = num(&mut chars)?.unwrap_or(0);
        let prec = if chars.peek() == Some(&'.') {
            chars.next();
            Some(num(&mut chars)?.unwrap_or(0))
        } else {
            None
        };
        let mut modifier = false;
        while matches!(chars.peek(), Some('h' | 'l' | 'L' | 'q' | 'j' | 'z' | 't')) {
            modifier = true;
            chars.next();
        }
        let conv = chars.next().ok_or("incomplete conversion")?;
        let spec = Spec { left, plus, space, alt, zero, modifier, width, prec, conv };
        out.push_str(&convert(&spec)?);
    }
    match convert {
        None => Ok(out),
        Some(_) => Err(missing.into()),
    }
}

/// C's `printf(fmt, s)` for one string: `fmt` holds exactly one `%s`
/// (with `-`, a width and a precision if wanted) and `%%` for a `%`.
pub(crate) fn printf_string(fmt: &str, s: &str) -> Result<String, String> {
    format_one(fmt, "expected exactly one `%s`", "expected a `%s`", |spec| {
        if spec.conv != 's' {
            return Err(format!("`%{}` is not `%s`: the value is a string", spec.conv));
        }
        // A `0` flag pads a string with spaces still, as the width alone does.
        if spec.plus || spec.space || spec.alt || spec.modifier {
            return Err("`%s` takes only `-`, a width and a precision".into());
        }
        let body: String = match spec.prec {
            Some(p) => s.chars().take(p).collect(),
            None => s.to_string(),
        };
        let pad = " ".repeat(spec.width.saturating_sub(body.chars().count()));
        Ok(match spec.left {
            true => body + &pad,
            false => pad + &body,
        })
    })
}

/// Formats `v` with a C format string containing exactly one conversion
/// (`%d %i %u %x %X %o` for integers, `%f %F %e %E %g %G` for reals).
pub(crate) fn printf(fmt: &str, v: Num) -> Result<String, String> {
    format_one(
        fmt,
        "expected exactly one conversion",
        "expected a conversion such as `%d`",
        |spec| {
            let Spec { left, plus, space, alt, zero, width, prec, conv, .. } = *spec;
            let mut out = String::new();
            let (neg, body, numeric_prefix) = match (conv, v) {
                ('d' | 'i' | 'u', Num::Int(i)) => {
                    let digits = if conv == 'u' {
                        (i as u64).to_string()
                    } else {
                        i.unsigned_abs().to_string()
                    };
                    (conv != 'u' && i < 0, pad_digits(digits, prec), String::new())
                }
                ('x' | 'X' | 'o', Num::Int(i)) => {
                    let u = i as u64;
                    let (digits, prefix) = match conv {
                        'x' => (format!("{u:x}"), "0x"),
                        'X' => (format!("{u:X}"), "0X"),
                        _ => (format!("{u:o}"), "0"),
                    };
                    let prefix = if alt && u != 0 { prefix } else { "" };
                    (false, pad_digits(digits, prec), prefix.to_string())
                }
                ('f' | 'F' | 'e' | 'E' | 'g' | 'G', Num::Real(r)) => (
                    r.is_sign_negative() && !r.is_nan(),
                    classad::value::printf_real(r.abs(), conv, prec.unwrap_or(6), alt),
                    String::new(),
                ),
                ('d' | 'i' | 'u' | 'x' | 'X' | 'o', Num::Real(_)) => {
                    return Err(format!("`%{conv}` formats an integer, not a real"));
                }
                ('f' | 'F' | 'e' | 'E' | 'g' | 'G', Num::Int(_)) => {
                    return Err(format!("`%{conv}` formats a real, not an integer"));
                }
                _ => return Err(format!("unsupported conversion `%{conv}`")),
            };
            let sign = if neg {
                "-"
            } else if plus {
                "+"
            } else if space {
                " "
            } else {
                ""
            };
            let len = sign.len() + numeric_prefix.len() + body.len();
            let finite = !matches!(v, Num::Real(r) if !r.is_finite());
            let zero_ok = zero && !left && finite && (matches!(v, Num::Real(_)) || prec.is_none());
            if len >= width {
                out.push_str(sign);
                out.push_str(&numeric_prefix);
                out.push_str(&body);
            } else if left {
                out.push_str(sign);
                out.push_str(&numeric_prefix);
                out.push_str(&body);
                out.push_str(&" ".repeat(width - len));
            } else if zero_ok {
                out.push_str(sign);
                out.push_str(&numeric_prefix);
                out.push_str(&"0".repeat(width - len));
                out.push_str(&body);
            } else {
                out.push_str(&" ".repeat(width - len));
                out.push_str(sign);
                out.push_str(&numeric_prefix);
                out.push_str(&body);
            }
            Ok(out)
        },
    )
}

pub(crate) fn pad_digits(digits: String, prec: Option<usize>) -> String {
    match prec {
        Some(p) if p > digits.len() => format!("{}{digits}", "0".repeat(p - digits.len())),
        _ => digits,
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------
