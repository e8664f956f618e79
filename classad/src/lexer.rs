//! The ClassAd lexer: bytes in, tokens with line and column out.

use std::borrow::Cow;

/// A token.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok<'s> {
    /// An integer literal's magnitude (saturated at `u64::MAX`); unary
    /// minus is folded by the parser, so `-9223372036854775808` is exact.
    Int(u64),
    /// A real literal.
    Real(f64),
    /// A string literal, escapes processed.
    Str(Cow<'s, str>),
    /// An identifier or keyword.
    Ident(&'s str),
    /// A quoted attribute name: `'odd name'`.
    QuotedIdent(Cow<'s, str>),
    /// Punctuation or an operator, as written.
    Punct(&'static str),
    /// End of input.
    Eof,
}

impl Tok<'_> {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Int(i) => format!("integer `{i}`"),
            Tok::Real(r) => format!("real `{r}`"),
            Tok::Str(_) => "a string".into(),
            Tok::Ident(s) => format!("`{s}`"),
            Tok::QuotedIdent(s) => format!("`'{s}'`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "end of input".into(),
        }
    }
}

/// A position in the source: 1-based line and column (in bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
}

/// A lexing error.
#[derive(Clone, Debug, PartialEq)]
pub struct LexError {
    /// Where.
    pub pos: Pos,
    /// What.
    pub msg: String,
}

/// Words that cannot be attribute names without quotes.
pub fn is_reserved_word(s: &str) -> bool {
    keyword(s).is_some()
}

/// The reserved words, recognised case-insensitively without allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keyword {
    /// `true`
    True,
    /// `false`
    False,
    /// `undefined`
    Undefined,
    /// `error`
    Error,
    /// `is`
    Is,
    /// `isnt`
    Isnt,
}

/// The keyword `s` spells, if any.
#[inline]
pub fn keyword(s: &str) -> Option<Keyword> {
    let (k, word) = match s.len() {
        2 => (Keyword::Is, "is"),
        4 if s.as_bytes()[0].eq_ignore_ascii_case(&b't') => (Keyword::True, "true"),
        4 => (Keyword::Isnt, "isnt"),
        5 if s.as_bytes()[0].eq_ignore_ascii_case(&b'f') => (Keyword::False, "false"),
        5 => (Keyword::Error, "error"),
        9 => (Keyword::Undefined, "undefined"),
        _ => return None,
    };
    s.eq_ignore_ascii_case(word).then_some(k)
}

/// The lexer. It reads on demand; the parser asks it to stop at line ends
/// for old-syntax ads (one attribute per line).
pub struct Lexer<'s> {
    src: &'s str,
    bytes: &'s [u8],
    i: usize,
    line: u32,
    line_start: usize,
}

impl<'s> Lexer<'s> {
    /// A lexer over `src`.
    pub fn new(src: &'s str) -> Lexer<'s> {
        Lexer { src, bytes: src.as_bytes(), i: 0, line: 1, line_start: 0 }
    }

    /// The current position.
    pub fn pos(&self) -> Pos {
        Pos { line: self.line, col: (self.i - self.line_start + 1) as u32 }
    }

    /// The byte offset.
    pub fn offset(&self) -> usize {
        self.i
    }

    /// The length of the source in bytes.
    pub fn src_len(&self) -> usize {
        self.bytes.len()
    }

    /// Skips spaces and comments. With `stop_at_newline`, stops before a
    /// newline (old-syntax ads end an attribute at the line's end).
    pub fn skip_trivia(&mut self, stop_at_newline: bool) -> Result<(), LexError> {
        loop {
            match self.bytes.get(self.i) {
                Some(b'\n') if stop_at_newline => return Ok(()),
                Some(b'\n') => {
                    self.i += 1;
                    self.line += 1;
                    self.line_start = self.i;
                }
                Some(b' ' | b'\t' | b'\r' | 0x0b | 0x0c) => self.i += 1,
                Some(b'/') if self.bytes.get(self.i + 1) == Some(&b'/') => {
                    while self.i < self.bytes.len() && self.bytes[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                Some(b'/') if self.bytes.get(self.i + 1) == Some(&b'*') => {
                    let start = self.pos();
                    self.i += 2;
                    loop {
                        match self.bytes.get(self.i) {
                            None => {
                                return Err(LexError {
                                    pos: start,
                                    msg: "unterminated `/*` comment".into(),
                                });
                            }
                            Some(b'*') if self.bytes.get(self.i + 1) == Some(&b'/') => {
                                self.i += 2;
                                break;
                            }
                            Some(b'\n') => {
                                self.i += 1;
                                self.line += 1;
                                self.line_start = self.i;
                            }
                            _ => self.i += 1,
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// True when the next byte (after trivia has been skipped) is a newline or the end.
    pub fn at_line_end(&self) -> bool {
        matches!(self.bytes.get(self.i), None | Some(b'\n'))
    }

    /// Consumes a newline, if one is next.
    pub fn eat_newline(&mut self) -> bool {
        if self.bytes.get(self.i) == Some(&b'\n') {
            self.i += 1;
            self.line += 1;
            self.line_start = self.i;
            true
        } else {
            false
        }
    }

    /// Reads the next token; trivia must have been skipped.
    pub fn next_token(&mut self) -> Result<(Tok<'s>, Pos), LexError> {
        let pos = self.pos();
        let Some(&c) = self.bytes.get(self.i) else {
            return Ok((Tok::Eof, pos));
        };
        let tok = match c {
            b'0'..=b'9' => self.number(pos)?,
            b'.' if self.bytes.get(self.i + 1).is_some_and(u8::is_ascii_digit) => {
                self.number(pos)?
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = self.i;
                while self
                    .bytes
                    .get(self.i)
                    .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
                {
                    self.i += 1;
                }
                Tok::Ident(&self.src[start..self.i])
            }
            b'"' => Tok::Str(self.quoted(b'"', pos)?),
            b'\'' => Tok::QuotedIdent(self.quoted(b'\'', pos)?),
            _ => match self.punct(c) {
                Some(p) => {
                    self.i += p.len();
                    Tok::Punct(p)
                }
                None => {
                    let ch = self.src[self.i..].chars().next().unwrap_or('?');
                    return Err(LexError { pos, msg: format!("unexpected character `{ch}`") });
                }
            },
        };
        Ok((tok, pos))
    }

    /// The operator or punctuation at the current position, longest first.
    fn punct(&self, c: u8) -> Option<&'static str> {
        let at = |k: usize| self.bytes.get(self.i + k).copied();
        Some(match c {
            b'(' => "(",
            b')' => ")",
            b'[' => "[",
            b']' => "]",
            b'{' => "{",
            b'}' => "}",
            b',' => ",",
            b';' => ";",
            b'.' => ".",
            b'?' => "?",
            b':' => ":",
            b'+' => "+",
            b'-' => "-",
            b'*' => "*",
            b'/' => "/",
            b'%' => "%",
            b'~' => "~",
            b'^' => "^",
            b'=' => match (at(1), at(2)) {
                (Some(b'?'), Some(b'=')) => "=?=",
                (Some(b'!'), Some(b'=')) => "=!=",
                (Some(b'='), _) => "==",
                _ => "=",
            },
            b'!' => {
                if at(1) == Some(b'=') {
                    "!="
                } else {
                    "!"
                }
            }
            b'<' => match at(1) {
                Some(b'<') => "<<",
                Some(b'=') => "<=",
                _ => "<",
            },
            b'>' => match (at(1), at(2)) {
                (Some(b'>'), Some(b'>')) => ">>>",
                (Some(b'>'), _) => ">>",
                (Some(b'='), _) => ">=",
                _ => ">",
            },
            b'&' => {
                if at(1) == Some(b'&') {
                    "&&"
                } else {
                    "&"
                }
            }
            b'|' => {
                if at(1) == Some(b'|') {
                    "||"
                } else {
                    "|"
                }
            }
            _ => return None,
        })
    }

    fn number(&mut self, pos: Pos) -> Result<Tok<'s>, LexError> {
        let start = self.i;
        let digits = |lx: &mut Lexer<'_>| {
            while lx.bytes.get(lx.i).is_some_and(u8::is_ascii_digit) {
                lx.i += 1;
            }
        };
        digits(self);
        let int_end = self.i;
        let mut is_real = false;
        if self.bytes.get(self.i) == Some(&b'.')
            && self.bytes.get(self.i + 1).is_some_and(u8::is_ascii_digit)
        {
            is_real = true;
            self.i += 1;
            digits(self);
        }
        if matches!(self.bytes.get(self.i), Some(b'e' | b'E')) {
            let mut j = self.i + 1;
            if matches!(self.bytes.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if self.bytes.get(j).is_some_and(u8::is_ascii_digit) {
                is_real = true;
                self.i = j;
                digits(self);
            }
        }
        let text = &self.src[start..self.i];
        if is_real {
            let r: f64 = text
                .parse()
                .map_err(|_| LexError { pos, msg: format!("malformed real `{text}`") })?;
            return Ok(Tok::Real(r));
        }
        // Old ClassAd semantics (HTCondor's default): no octal or hex
        // integers; a leading zero on a multi-digit integer is an error.
        if int_end - start > 1 && self.bytes[start] == b'0' {
            return Err(LexError {
                pos,
                msg: format!("integer `{text}` has a leading zero (octal is not supported)"),
            });
        }
        let mut v: u64 = 0;
        for b in text.bytes() {
            v = v.saturating_mul(10).saturating_add((b - b'0') as u64);
        }
        Ok(Tok::Int(v))
    }

    fn quoted(&mut self, q: u8, pos: Pos) -> Result<Cow<'s, str>, LexError> {
        self.i += 1;
        let start = self.i;
        // Fast path: no escapes.
        while let Some(&b) = self.bytes.get(self.i) {
            if b == q {
                let s = &self.src[start..self.i];
                self.i += 1;
                return Ok(Cow::Borrowed(s));
            }
            if b == b'\\' || b == b'\n' {
                break;
            }
            self.i += 1;
        }
        let mut out: Vec<u8> = self.bytes[start..self.i].to_vec();
        loop {
            match self.bytes.get(self.i) {
                None => {
                    let what = if q == b'"' { "string" } else { "quoted name" };
                    return Err(LexError { pos, msg: format!("unterminated {what}") });
                }
                Some(&b) if b == q => {
                    self.i += 1;
                    break;
                }
                Some(b'\n') => {
                    out.push(b'\n');
                    self.i += 1;
                    self.line += 1;
                    self.line_start = self.i;
                }
                Some(b'\\') => {
                    self.i += 1;
                    let Some(&e) = self.bytes.get(self.i) else { continue };
                    self.i += 1;
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
                            let mut v: u32 = (e - b'0') as u32;
                            let mut n = 1;
                            while n < max {
                                match self.bytes.get(self.i) {
                                    Some(&d @ b'0'..=b'7') => {
                                        v = v * 8 + (d - b'0') as u32;
                                        self.i += 1;
                                        n += 1;
                                    }
                                    _ => break,
                                }
                            }
                            out.push(v as u8);
                        }
                        b'\n' => {
                            out.push(b'\n');
                            self.line += 1;
                            self.line_start = self.i;
                        }
                        // `\\`, `\"`, `\'`, `\?` and any unknown escape: the
                        // character itself (HTCondor drops the backslash).
                        other => out.push(other),
                    }
                }
                Some(&b) => {
                    out.push(b);
                    self.i += 1;
                }
            }
        }
        Ok(Cow::Owned(match String::from_utf8(out) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }))
    }
}
