//! The ClassAd parser: new syntax (`[ a = 1; b = "x" ]`), old syntax (one
//! `Attr = Expr` per line, as `condor_q -long` prints) and lone expressions.

use std::fmt;
use std::sync::Arc;

use crate::ast::{AttrName, BinOp, Call, ClassAd, Expr, UnOp};
use crate::builtins;
use crate::lexer::{LexError, Lexer, Pos, Tok};
use crate::value::Value;

/// How deeply expressions may nest (parentheses, brackets, operators and
/// operator chains together). Deeper input is an error, never a stack overflow.
pub const MAX_DEPTH: u32 = 4000;

/// A parse error: where, and what was expected.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
    /// What was wrong.
    pub msg: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.col, self.msg)
    }
}

impl std::error::Error for ParseError {}

impl From<LexError> for ParseError {
    fn from(e: LexError) -> ParseError {
        ParseError { line: e.pos.line, col: e.pos.col, msg: e.msg }
    }
}

/// Parses one complete expression.
pub fn parse_expr(text: &str) -> Result<Expr, ParseError> {
    let mut p = Parser::new(text, false)?;
    let e = p.expr()?;
    p.expect_eof()?;
    Ok(e)
}

/// Parses one ClassAd in either syntax: new syntax when the text starts
/// with `[`, old syntax otherwise.
pub fn parse_ad(text: &str) -> Result<ClassAd, ParseError> {
    let mut ads = parse_ads(text)?;
    match ads.len() {
        0 => Ok(ClassAd::new()),
        1 => Ok(ads.remove(0)),
        n => Err(ParseError { line: 1, col: 1, msg: format!("expected one ClassAd, found {n}") }),
    }
}

/// Parses a sequence of ClassAds: new-syntax ads one after another, or
/// old-syntax ads separated by blank lines.
pub fn parse_ads(text: &str) -> Result<Vec<ClassAd>, ParseError> {
    let mut probe = Lexer::new(text);
    probe.skip_trivia(false)?;
    if text[probe.offset()..].starts_with('[') {
        let mut p = Parser::new(text, false)?;
        let mut ads = Vec::new();
        while p.tok != Tok::Eof {
            if p.tok != Tok::Punct("[") {
                return Err(p.error(format!(
                    "expected `[` to start a ClassAd, found {}",
                    p.tok.describe()
                )));
            }
            let (ad, _) = p.record()?;
            ads.push(ad);
        }
        Ok(ads)
    } else {
        parse_old_ads(text)
    }
}

/// Parses one old-syntax ad (`Name = Expr` per line).
pub fn parse_old_ad(text: &str) -> Result<ClassAd, ParseError> {
    let mut ads = parse_old_ads(text)?.into_iter();
    let mut ad = ads.next().unwrap_or_default();
    // Blank lines inside one ad are allowed here: later parts merge in.
    for a in ads {
        ad.update(&a);
    }
    Ok(ad)
}

fn parse_old_ads(text: &str) -> Result<Vec<ClassAd>, ParseError> {
    let mut p = Parser::new(text, true)?;
    let mut ads = Vec::new();
    let mut cur = ClassAd::new();
    loop {
        // Blank lines separate ads.
        let mut blank_lines = 0;
        while p.tok == Tok::Eof && !p.lx.at_line_end_or_eof_is_eof() {
            p.lx.eat_newline();
            blank_lines += 1;
            p.advance()?;
        }
        if blank_lines > 1 && !cur.is_empty() {
            ads.push(std::mem::take(&mut cur));
        }
        if p.tok == Tok::Eof {
            break;
        }
        let name = match &p.tok {
            Tok::Ident(s) if !crate::lexer::is_reserved_word(s) => AttrName::new(s),
            Tok::QuotedIdent(s) => AttrName::new(s),
            t => {
                return Err(p.error(format!(
                    "expected an attribute name at the start of the line, found {}",
                    t.describe()
                )));
            }
        };
        p.advance()?;
        if p.tok != Tok::Punct("=") {
            return Err(p.error(format!(
                "expected `=` after attribute name `{name}`, found {}",
                p.tok.describe()
            )));
        }
        p.advance()?;
        let e = p.expr()?;
        if p.tok != Tok::Eof {
            return Err(p.error(format!(
                "expected the end of the line after the value of `{name}`, found {}",
                p.tok.describe()
            )));
        }
        cur.insert(name, e);
    }
    if !cur.is_empty() {
        ads.push(cur);
    }
    Ok(ads)
}

impl Lexer<'_> {
    /// In line mode the parser sees `Eof` at each line end: true when that
    /// is the real end of input.
    fn at_line_end_or_eof_is_eof(&self) -> bool {
        self.offset() >= self.src_len()
    }
}

/// `real("INF")`, `real("-INF")` and `real("NaN")` are how infinities and
/// NaN are written (and unparsed): they read back as the literal itself, so
/// that every value round-trips through its text.
fn special_real(name: &str, args: &[Expr]) -> Option<Value> {
    if !name.eq_ignore_ascii_case("real") {
        return None;
    }
    let [Expr::Lit(Value::Str(s))] = args else { return None };
    let v = if s.eq_ignore_ascii_case("inf") {
        f64::INFINITY
    } else if s.eq_ignore_ascii_case("-inf") {
        f64::NEG_INFINITY
    } else if s.eq_ignore_ascii_case("nan") {
        f64::NAN
    } else {
        return None;
    };
    Some(Value::Real(v))
}

struct Parser<'s> {
    lx: Lexer<'s>,
    tok: Tok<'s>,
    pos: Pos,
    line_mode: bool,
    depth: u32,
}

impl<'s> Parser<'s> {
    fn new(text: &'s str, line_mode: bool) -> Result<Parser<'s>, ParseError> {
        let mut p = Parser {
            lx: Lexer::new(text),
            tok: Tok::Eof,
            pos: Pos::default(),
            line_mode,
            depth: 0,
        };
        p.advance()?;
        Ok(p)
    }

    fn advance(&mut self) -> Result<(), ParseError> {
        self.lx.skip_trivia(self.line_mode)?;
        if self.line_mode && self.lx.at_line_end() {
            self.pos = self.lx.pos();
            self.tok = Tok::Eof;
            return Ok(());
        }
        let (t, pos) = self.lx.next_token()?;
        self.tok = t;
        self.pos = pos;
        Ok(())
    }

    fn error(&self, msg: String) -> ParseError {
        ParseError { line: self.pos.line, col: self.pos.col, msg }
    }

    fn expect_eof(&self) -> Result<(), ParseError> {
        if self.tok == Tok::Eof {
            Ok(())
        } else {
            Err(self.error(format!(
                "expected the end of the expression, found {}",
                self.tok.describe()
            )))
        }
    }

    fn expect(&mut self, p: &'static str, ctx: &str) -> Result<(), ParseError> {
        if self.tok == Tok::Punct(p) {
            self.advance()
        } else {
            Err(self.error(format!("expected `{p}` {ctx}, found {}", self.tok.describe())))
        }
    }

    fn enter(&mut self, n: u32) -> Result<(), ParseError> {
        self.depth += n;
        if self.depth > MAX_DEPTH {
            Err(self.error(format!("expression nested more than {MAX_DEPTH} levels deep")))
        } else {
            Ok(())
        }
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.enter(1)?;
        let r = stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.ternary());
        self.depth -= 1;
        r
    }

    fn ternary(&mut self) -> Result<Expr, ParseError> {
        let c = self.binary(1)?;
        if self.tok != Tok::Punct("?") {
            return Ok(c);
        }
        self.advance()?;
        if self.tok == Tok::Punct(":") {
            self.advance()?;
            let b = self.expr()?;
            return Ok(Expr::Elvis(Arc::new(c), Arc::new(b)));
        }
        let a = self.expr()?;
        self.expect(":", "in a `? :` conditional")?;
        let b = self.expr()?;
        Ok(Expr::Cond(Arc::new(c), Arc::new(a), Arc::new(b)))
    }

    fn binop(&self) -> Option<BinOp> {
        Some(match &self.tok {
            Tok::Punct(p) => match *p {
                "||" => BinOp::Or,
                "&&" => BinOp::And,
                "|" => BinOp::BitOr,
                "^" => BinOp::BitXor,
                "&" => BinOp::BitAnd,
                "==" => BinOp::Eq,
                "!=" => BinOp::Ne,
                "=?=" => BinOp::Is,
                "=!=" => BinOp::Isnt,
                "<" => BinOp::Lt,
                "<=" => BinOp::Le,
                ">" => BinOp::Gt,
                ">=" => BinOp::Ge,
                "<<" => BinOp::Shl,
                ">>" => BinOp::Shr,
                ">>>" => BinOp::UShr,
                "+" => BinOp::Add,
                "-" => BinOp::Sub,
                "*" => BinOp::Mul,
                "/" => BinOp::Div,
                "%" => BinOp::Mod,
                _ => return None,
            },
            Tok::Ident(s) if s.eq_ignore_ascii_case("is") => BinOp::Is,
            Tok::Ident(s) if s.eq_ignore_ascii_case("isnt") => BinOp::Isnt,
            _ => return None,
        })
    }

    fn binary(&mut self, min_prec: u8) -> Result<Expr, ParseError> {
        let mut lhs = self.unary()?;
        let mut chain = 0;
        let r = loop {
            let Some(op) = self.binop() else { break Ok(lhs) };
            let prec = op.precedence();
            if prec < min_prec {
                break Ok(lhs);
            }
            if let Err(e) = self.enter(1) {
                break Err(e);
            }
            chain += 1;
            if let Err(e) = self.advance() {
                break Err(e);
            }
            let rhs = match self.binary(prec + 1) {
                Ok(r) => r,
                Err(e) => break Err(e),
            };
            lhs = Expr::Binary(op, Arc::new(lhs), Arc::new(rhs));
        };
        self.depth -= chain;
        r
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        let op = match self.tok {
            Tok::Punct("-") => UnOp::Neg,
            Tok::Punct("+") => UnOp::Plus,
            Tok::Punct("!") => UnOp::Not,
            Tok::Punct("~") => UnOp::BitNot,
            _ => return self.postfix(),
        };
        self.advance()?;
        if op == UnOp::Neg {
            // HTCondor folds `-` applied directly to a number into a
            // negative literal: `-1.0/0` is `(-1.0)/0`.
            let lit = match self.tok {
                Tok::Int(v) => Some(Value::Int((v.min(1 << 63) as i64).wrapping_neg())),
                Tok::Real(r) => Some(Value::Real(-r)),
                _ => None,
            };
            if let Some(v) = lit {
                let positive = Expr::Lit(match self.tok {
                    Tok::Int(u) => Value::Int(u.min(i64::MAX as u64) as i64),
                    _ => match v {
                        Value::Real(r) => Value::Real(-r),
                        ref other => other.clone(),
                    },
                });
                self.advance()?;
                // A postfix on the number binds tighter than the minus.
                if matches!(self.tok, Tok::Punct(".") | Tok::Punct("[")) {
                    let operand = self.postfix_on(positive)?;
                    return Ok(Expr::Unary(UnOp::Neg, Arc::new(operand)));
                }
                return Ok(Expr::Lit(v));
            }
        }
        self.enter(1)?;
        let operand = stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.unary());
        self.depth -= 1;
        Ok(Expr::Unary(op, Arc::new(operand?)))
    }

    fn postfix(&mut self) -> Result<Expr, ParseError> {
        let e = self.primary()?;
        self.postfix_on(e)
    }

    fn postfix_on(&mut self, mut e: Expr) -> Result<Expr, ParseError> {
        let mut chain = 0;
        let r = loop {
            match self.tok {
                Tok::Punct(".") => {
                    if let Err(err) = self.advance() {
                        break Err(err);
                    }
                    // HTCondor accepts `a..b`.
                    if self.tok == Tok::Punct(".")
                        && let Err(err) = self.advance()
                    {
                        break Err(err);
                    }
                    let name = match &self.tok {
                        Tok::Ident(s) if !crate::lexer::is_reserved_word(s) => AttrName::new(s),
                        Tok::QuotedIdent(s) => AttrName::new(s),
                        t => {
                            break Err(self.error(format!(
                                "expected an attribute name after `.`, found {}",
                                t.describe()
                            )));
                        }
                    };
                    if let Err(err) = self.advance() {
                        break Err(err);
                    }
                    e = Expr::Select(Arc::new(e), name);
                }
                Tok::Punct("[") => {
                    if let Err(err) = self.advance() {
                        break Err(err);
                    }
                    let idx = match self.expr() {
                        Ok(i) => i,
                        Err(err) => break Err(err),
                    };
                    if let Err(err) = self.expect("]", "to close the subscript") {
                        break Err(err);
                    }
                    e = Expr::Index(Arc::new(e), Arc::new(idx));
                }
                _ => break Ok(e),
            }
            if let Err(err) = self.enter(1) {
                break Err(err);
            }
            chain += 1;
        };
        self.depth -= chain;
        r
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        let tok = std::mem::replace(&mut self.tok, Tok::Eof);
        match tok {
            Tok::Int(v) => {
                self.advance()?;
                Ok(Expr::Lit(Value::Int(v.min(i64::MAX as u64) as i64)))
            }
            Tok::Real(r) => {
                self.advance()?;
                Ok(Expr::Lit(Value::Real(r)))
            }
            Tok::Str(s) => {
                self.advance()?;
                // Adjacent string literals concatenate.
                if !matches!(self.tok, Tok::Str(_)) {
                    return Ok(Expr::Lit(Value::Str(crate::table::intern_value(&s))));
                }
                let mut s = s.into_owned();
                while let Tok::Str(more) = &self.tok {
                    s.push_str(more);
                    self.advance()?;
                }
                Ok(Expr::Lit(Value::Str(crate::table::intern_value(&s))))
            }
            Tok::Ident(word) => {
                use crate::lexer::Keyword;
                let lit = match crate::lexer::keyword(word) {
                    Some(Keyword::True) => Some(Value::Bool(true)),
                    Some(Keyword::False) => Some(Value::Bool(false)),
                    Some(Keyword::Undefined) => Some(Value::Undefined),
                    Some(Keyword::Error) => Some(Value::Error),
                    Some(Keyword::Is | Keyword::Isnt) => {
                        self.tok = Tok::Ident(word);
                        return Err(self.error(format!("expected an expression, found `{word}`")));
                    }
                    None => None,
                };
                self.advance()?;
                if let Some(v) = lit {
                    return Ok(Expr::Lit(v));
                }
                if self.tok == Tok::Punct("(") {
                    self.advance()?;
                    let args = self.items(")", "a function's arguments")?;
                    if let Some(v) = special_real(word, &args) {
                        return Ok(Expr::Lit(v));
                    }
                    return Ok(Expr::Call(Arc::new(Call {
                        name: word.into(),
                        func: builtins::lookup(word),
                        args,
                    })));
                }
                Ok(Expr::Attr { name: AttrName::new(word), absolute: false })
            }
            Tok::QuotedIdent(name) => {
                self.advance()?;
                Ok(Expr::Attr { name: AttrName::new(&name), absolute: false })
            }
            Tok::Punct(".") => {
                self.advance()?;
                let name = match &self.tok {
                    Tok::Ident(s) if !crate::lexer::is_reserved_word(s) => AttrName::new(s),
                    Tok::QuotedIdent(s) => AttrName::new(s),
                    t => {
                        return Err(self.error(format!(
                            "expected an attribute name after `.`, found {}",
                            t.describe()
                        )));
                    }
                };
                self.advance()?;
                Ok(Expr::Attr { name, absolute: true })
            }
            Tok::Punct("(") => {
                self.advance()?;
                let e = self.expr()?;
                self.expect(")", "to close `(`")?;
                Ok(Expr::Paren(Arc::new(e)))
            }
            Tok::Punct("{") => {
                self.advance()?;
                Ok(Expr::List(self.items("}", "a list")?))
            }
            Tok::Punct("[") => {
                self.tok = Tok::Punct("[");
                let (ad, _) = self.record()?;
                Ok(Expr::Record(Arc::new(ad)))
            }
            t => {
                self.tok = t;
                Err(self.error(format!("expected an expression, found {}", self.tok.describe())))
            }
        }
    }

    /// Comma-separated expressions up to `close` (already past the opener).
    fn items(&mut self, close: &'static str, what: &str) -> Result<Vec<Expr>, ParseError> {
        let mut out = Vec::new();
        if self.tok == Tok::Punct(close) {
            self.advance()?;
            return Ok(out);
        }
        loop {
            out.push(self.expr()?);
            match self.tok {
                Tok::Punct(",") => self.advance()?,
                Tok::Punct(p) if p == close => {
                    self.advance()?;
                    return Ok(out);
                }
                _ => {
                    return Err(self.error(format!(
                        "expected `,` or `{close}` in {what}, found {}",
                        self.tok.describe()
                    )));
                }
            }
        }
    }

    /// A new-syntax record `[ a = 1; b = 2 ]`; the current token is `[`.
    fn record(&mut self) -> Result<(ClassAd, Pos), ParseError> {
        let start = self.pos;
        self.enter(1)?;
        self.advance()?;
        let mut ad = ClassAd::new();
        loop {
            while self.tok == Tok::Punct(";") {
                self.advance()?;
            }
            if self.tok == Tok::Punct("]") {
                self.advance()?;
                break;
            }
            let name = match &self.tok {
                Tok::Ident(s) if !crate::lexer::is_reserved_word(s) => AttrName::new(s),
                Tok::QuotedIdent(s) => AttrName::new(s),
                Tok::Eof => {
                    return Err(self.error(format!(
                        "expected `]` to close the ClassAd opened at line {}, column {}",
                        start.line, start.col
                    )));
                }
                t => {
                    return Err(
                        self.error(format!("expected an attribute name, found {}", t.describe()))
                    );
                }
            };
            self.advance()?;
            self.expect("=", &format!("after attribute name `{name}`"))?;
            let e = self.expr()?;
            ad.insert(name, e);
            match self.tok {
                Tok::Punct(";") | Tok::Punct("]") => {}
                _ => {
                    return Err(self.error(format!(
                        "expected `;` or `]` after an attribute's value, found {}",
                        self.tok.describe()
                    )));
                }
            }
        }
        self.depth -= 1;
        Ok((ad, start))
    }
}
