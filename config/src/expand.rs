use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    Env,
    RandomChoice,
    RandomInteger,
    Choice,
    Substr,
    Int,
    Real,
    String,
    Eval,
    Basename,
    Dirname,
    Filename,
}

impl Func {
    pub(crate) fn from_name(w: &str) -> Option<Func> {
        Some(match w {
            "ENV" => Func::Env,
            "RANDOM_CHOICE" => Func::RandomChoice,
            "RANDOM_INTEGER" => Func::RandomInteger,
            "CHOICE" => Func::Choice,
            "SUBSTR" => Func::Substr,
            "INT" => Func::Int,
            "REAL" => Func::Real,
            "STRING" => Func::String,
            "EVAL" => Func::Eval,
            "BASENAME" => Func::Basename,
            "DIRNAME" => Func::Dirname,
            _ if w.starts_with('F')
                && w[1..].bytes().all(|c| b"pnxdqabfwu".contains(&c.to_ascii_lowercase())) =>
            {
                Func::Filename
            }
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum MacroKind {
    Normal,
    Func(Func),
}

/// One `$(...)` or `$FUNC(...)` occurrence in a text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MacroRef {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: MacroKind,
    /// The name part of the body (the whole body for functions).
    pub(crate) name: (usize, usize),
    /// The text after `:`, for `$(NAME:default)` and `$ENV(NAME:default)`.
    pub(crate) default: Option<(usize, usize)>,
}

/// Scans a text for macro references, left to right.
pub(crate) struct Scanner<'t> {
    pub(crate) s: &'t str,
    pub(crate) pos: usize,
    /// For each `(`, the position of its matching `)` (or `u32::MAX`);
    /// computed on first use so that scanning stays linear in the text.
    pub(crate) parens: Option<Vec<u32>>,
}

impl<'t> Scanner<'t> {
    pub(crate) fn new(s: &'t str) -> Self {
        Scanner { s, pos: 0, parens: None }
    }

    /// The `)` matching the `(` at `open`.
    pub(crate) fn matching_paren(&mut self, open: usize) -> Option<usize> {
        let b = self.s.as_bytes();
        let table = self.parens.get_or_insert_with(|| {
            let mut t = vec![u32::MAX; b.len()];
            let mut stack = Vec::new();
            for (k, &c) in b.iter().enumerate() {
                match c {
                    b'(' => stack.push(k),
                    b')' => {
                        if let Some(o) = stack.pop() {
                            t[o] = u32::try_from(k).unwrap_or(u32::MAX);
                        }
                    }
                    _ => {}
                }
            }
            t
        });
        match table.get(open) {
            Some(&m) if m != u32::MAX => Some(m as usize),
            _ => None,
        }
    }

    /// The next macro reference after the previous one.
    pub(crate) fn next_macro(&mut self) -> Option<MacroRef> {
        let s = self.s;
        let b = s.as_bytes();
        let n = b.len();
        let mut i = self.pos;
        loop {
            let d = i + b.get(i..)?.iter().position(|&c| c == b'$')?;
            let mut p = d + 1;
            if p < n && b[p] == b'$' {
                // `$$(...)` is left for later; macros inside it still expand.
                p += 1;
                while p < n && (b[p].is_ascii_alphanumeric() || b[p] == b'_') {
                    p += 1;
                }
                i = p;
                continue;
            }
            let word_start = p;
            while p < n && (b[p].is_ascii_alphanumeric() || b[p] == b'_') {
                p += 1;
            }
            if p >= n || b[p] != b'(' {
                i = p;
                continue;
            }
            let word = &s[word_start..p];
            let kind = if word.is_empty() {
                MacroKind::Normal
            } else if let Some(f) = Func::from_name(word) {
                MacroKind::Func(f)
            } else {
                i = p;
                continue;
            };
            let body = p + 1;
            let found = if matches!(kind, MacroKind::Normal | MacroKind::Func(Func::Env)) {
                // NAME or NAME:default
                let mut q = body;
                while q < n && is_id_byte(b[q]) {
                    q += 1;
                }
                if q < n && b[q] == b')' {
                    Some(MacroRef { start: d, end: q + 1, kind, name: (body, q), default: None })
                } else if q < n && b[q] == b':' {
                    // The name has no parentheses, so the `)` closing the
                    // default is the one matching the `(` after `$`.
                    self.matching_paren(p).map(|close| MacroRef {
                        start: d,
                        end: close + 1,
                        kind,
                        name: (body, q),
                        default: Some((q + 1, close)),
                    })
                } else {
                    None
                }
            } else {
                self.matching_paren(p).map(|close| MacroRef {
                    start: d,
                    end: close + 1,
                    kind,
                    name: (body, close),
                    default: None,
                })
            };
            match found {
                Some(m) => {
                    self.pos = m.end;
                    return Some(m);
                }
                None => i = body,
            }
        }
    }
}

/// Replaces each `$(DOLLAR)` (kept as a placeholder during expansion) with
/// a literal `$`.
pub(crate) fn finish_dollar(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pos = 0;
    let mut scan = Scanner::new(s);
    while let Some(m) = scan.next_macro() {
        out.push_str(&s[pos..m.start]);
        if is_dollar(s, &m) {
            out.push('$');
        } else {
            out.push_str(&s[m.start..m.end]);
        }
        pos = m.end;
    }
    out.push_str(&s[pos..]);
    out
}

pub(crate) fn is_dollar(s: &str, m: &MacroRef) -> bool {
    matches!(m.kind, MacroKind::Normal)
        && m.default.is_none()
        && s[m.name.0..m.name.1].eq_ignore_ascii_case("DOLLAR")
}

// ---------------------------------------------------------------------------
// Expansion
// ---------------------------------------------------------------------------

pub(crate) struct Expander<'a> {
    pub(crate) cfg: &'a Config,
    /// Macros being expanded: key and display name.
    pub(crate) stack: Vec<(String, String)>,
    pub(crate) memo: HashMap<String, String>,
    pub(crate) work: usize,
    pub(crate) depth: usize,
}

impl<'a> Expander<'a> {
    pub(crate) fn new(cfg: &'a Config) -> Self {
        Expander { cfg, stack: Vec::new(), memo: HashMap::new(), work: 0, depth: 0 }
    }

    /// The location of the macro currently being expanded, for errors.
    pub(crate) fn current_location(&self) -> Option<&'a Location> {
        let (key, _) = self.stack.last()?;
        self.cfg.entry_exact(key).map(|e| &e.loc)
    }

    pub(crate) fn fail(&self, e: ConfigError) -> ConfigError {
        e.at_location(self.current_location())
    }

    pub(crate) fn push(&mut self, out: &mut String, s: &str) -> Result<(), ConfigError> {
        self.work += s.len();
        if out.len() + s.len() > MAX_EXPANDED_LEN {
            return Err(self.fail(too_large()));
        }
        if self.work > MAX_EXPANSION_WORK {
            return Err(self.fail(ConfigError::new(
                ConfigErrorKind::ExpansionTooLarge,
                format!(
                    "expansion produced more than {MAX_EXPANSION_WORK} bytes of intermediate text"
                ),
            )));
        }
        out.push_str(s);
        Ok(())
    }

    pub(crate) fn expand_text(&mut self, text: &str, out: &mut String) -> Result<(), ConfigError> {
        if self.depth >= MAX_EXPANSION_DEPTH {
            return Err(self.fail(ConfigError::new(
                ConfigErrorKind::ExpansionDepth,
                format!("macro references nested more than {MAX_EXPANSION_DEPTH} deep"),
            )));
        }
        self.depth += 1;
        let r = self.expand_text_inner(text, out);
        self.depth -= 1;
        r
    }

    pub(crate) fn expand_text_inner(
        &mut self,
        text: &str,
        out: &mut String,
    ) -> Result<(), ConfigError> {
        let mut pos = 0;
        let mut scan = Scanner::new(text);
        while let Some(m) = scan.next_macro() {
            self.push(out, &text[pos..m.start])?;
            pos = m.end;
            let name = &text[m.name.0..m.name.1];
            let default = m.default.map(|(a, b)| &text[a..b]);
            match m.kind {
                MacroKind::Normal if is_dollar(text, &m) => {
                    self.push(out, &text[m.start..m.end])?;
                }
                MacroKind::Normal => {
                    self.expand_name(name, default, out)?;
                }
                MacroKind::Func(f) => {
                    self.eval_func(f, &text[m.start..m.end], name, default, out)?
                }
            }
        }
        self.push(out, &text[pos..])
    }

    /// Expands the value of macro `name`, or `default` when it is undefined
    /// or empty. Returns whether the macro was defined and non-empty.
    pub(crate) fn expand_name(
        &mut self,
        name: &str,
        default: Option<&str>,
        out: &mut String,
    ) -> Result<bool, ConfigError> {
        let cfg = self.cfg;
        match cfg.lookup(name) {
            Some((key, e)) if !e.raw.is_empty() => {
                if let Some(v) = self.memo.get(key) {
                    let v = v.clone();
                    self.push(out, &v)?;
                    return Ok(true);
                }
                if let Some(at) = self.stack.iter().position(|(k, _)| *k == key) {
                    let mut chain: Vec<&str> =
                        self.stack[at..].iter().map(|(_, d)| d.as_str()).collect();
                    chain.push(&e.name);
                    return Err(ConfigError::new(
                        ConfigErrorKind::MacroCycle,
                        format!("macros refer to each other in a cycle: {}", chain.join(" -> ")),
                    )
                    .at_location(cfg.entry_exact(&self.stack[at].0).map(|e| &e.loc)));
                }
                self.stack.push((key.to_string(), e.name.clone()));
                let mut buf = String::new();
                let r = self.expand_text(&e.raw, &mut buf);
                self.stack.pop();
                r?;
                self.push(out, &buf)?;
                self.memo.insert(key.to_string(), buf);
                Ok(true)
            }
            _ => {
                if let Some(d) = default {
                    self.expand_text(d, out)?;
                }
                Ok(false)
            }
        }
    }

    /// HTCondor's argument convention for `$INT`, `$SUBSTR`, …: the item is
    /// a macro name if one is defined by that name, otherwise literal text;
    /// either way it is then expanded.
    pub(crate) fn lookup_and_expand(&mut self, item: &str) -> Result<String, ConfigError> {
        let mut buf = String::new();
        if !item.is_empty() && item.bytes().all(is_id_byte) && self.cfg.lookup(item).is_some() {
            self.expand_name(item, None, &mut buf)?;
        } else {
            self.expand_text(item, &mut buf)?;
        }
        Ok(buf)
    }

    pub(crate) fn func_error(&self, msg: String) -> ConfigError {
        self.fail(ConfigError::new(ConfigErrorKind::Function, msg))
    }

    pub(crate) fn eval_func(
        &mut self,
        f: Func,
        whole: &str,
        body: &str,
        default: Option<&str>,
        out: &mut String,
    ) -> Result<(), ConfigError> {
        match f {
            Func::Env => {
                match self.cfg.env.get(body) {
                    Some(v) if !v.is_empty() => {
                        let v = v.clone();
                        self.expand_text(&v, out)?;
                    }
                    found => match default {
                        Some(d) => self.expand_text(d, out)?,
                        None if found.is_none() => self.push(out, "UNDEFINED")?,
                        None => {}
                    },
                }
                Ok(())
            }
            Func::Choice => {
                let items: Vec<&str> = body.split(',').map(trim).collect();
                if items.len() < 2 {
                    return Err(self.func_error(format!(
                        "{whole}: expected `$CHOICE(index, list name)` or `$CHOICE(index, item, item, ...)`"
                    )));
                }
                let ival = self.lookup_and_expand(items[0])?;
                let index = match eval_number(trim(&ival)) {
                    Some(Num::Int(i)) if i >= 0 => i as usize,
                    _ => {
                        return Err(self.func_error(format!(
                            "{whole}: index `{}` is not a non-negative integer",
                            excerpt(&ival)
                        )));
                    }
                };
                if items.len() == 2 {
                    let list_name = items[1];
                    if self.cfg.lookup(list_name).is_none() {
                        return Err(self.func_error(format!(
                            "{whole}: no list named `{}`",
                            excerpt(list_name)
                        )));
                    }
                    let mut list = String::new();
                    self.expand_name(list_name, None, &mut list)?;
                    let parts: Vec<&str> = list.split(',').map(trim).collect();
                    match parts.get(index) {
                        Some(p) => {
                            let p = p.to_string();
                            self.push(out, &p)
                        }
                        None => Err(self.func_error(format!(
                            "{whole}: index {index} is out of range for a list of {}",
                            parts.len()
                        ))),
                    }
                } else {
                    match index.checked_add(1).and_then(|k| items.get(k)) {
                        Some(p) => self.expand_text(p, out),
                        None => Err(self.func_error(format!(
                            "{whole}: index {index} is out of range for a list of {}",
                            items.len() - 1
                        ))),
                    }
                }
            }
            Func::Substr => {
                let args: Vec<&str> = body.split(',').map(trim).collect();
                if args.len() < 2 || args.len() > 3 {
                    return Err(self.func_error(format!(
                        "{whole}: expected `$SUBSTR(name, start)` or `$SUBSTR(name, start, length)`"
                    )));
                }
                let val = self.lookup_and_expand(args[0])?;
                if val.is_empty() {
                    return Ok(());
                }
                let mut nums = Vec::new();
                for a in &args[1..] {
                    let t = self.lookup_and_expand(a)?;
                    match eval_number(trim(&t)) {
                        Some(Num::Int(i)) => nums.push(i),
                        _ => {
                            return Err(self.func_error(format!(
                                "{whole}: `{}` is not an integer",
                                excerpt(&t)
                            )));
                        }
                    }
                }
                let chars: Vec<char> = val.chars().collect();
                let len = chars.len() as i64;
                let mut start = nums[0];
                if start < 0 {
                    start += len;
                }
                let start = start.clamp(0, len);
                let rest = len - start;
                let mut sub = nums.get(1).copied().unwrap_or(rest);
                if sub < 0 {
                    sub += rest;
                }
                let sub = sub.clamp(0, rest);
                let s: String = chars[start as usize..(start + sub) as usize].iter().collect();
                self.push(out, &s)
            }
            Func::Int | Func::Real => {
                let (item, fmt) = match body.split_once(',') {
                    Some((a, b)) => (trim(a), Some(b)),
                    None => (trim(body), None),
                };
                let val = self.lookup_and_expand(item)?;
                let fname = if f == Func::Int { "$INT" } else { "$REAL" };
                let num = eval_number(trim(&val)).ok_or_else(|| {
                    self.func_error(format!(
                        "{whole}: `{}` does not evaluate to a number",
                        excerpt(&val)
                    ))
                })?;
                let s = if f == Func::Int {
                    let i = match num {
                        Num::Int(i) => i,
                        Num::Real(r) if r.is_finite() && r.abs() < 9.2e18 => r.trunc() as i64,
                        Num::Real(_) => {
                            return Err(self.func_error(format!(
                                "{whole}: `{}` does not evaluate to an integer",
                                excerpt(&val)
                            )));
                        }
                    };
                    match fmt {
                        None => i.to_string(),
                        Some(fm) => printf(fm, Num::Int(i)).map_err(|e| {
                            self.func_error(format!("{fname}() format `{fm}`: {e}"))
                        })?,
                    }
                } else {
                    let r = match num {
                        Num::Int(i) => i as f64,
                        Num::Real(r) => r,
                    };
                    match fmt {
                        None => printf("%.16G", Num::Real(r)).unwrap_or_else(|_| r.to_string()),
                        Some(fm) => {
                            let mut s = printf(fm, Num::Real(r)).map_err(|e| {
                                self.func_error(format!("{fname}() format `{fm}`: {e}"))
                            })?;
                            if !s.contains('.') {
                                s.push_str(".0");
                            }
                            s
                        }
                    }
                };
                self.push(out, &s)
            }
            Func::Basename | Func::Dirname => {
                let name = trim(body);
                let mut val = String::new();
                if self.cfg.lookup(name).is_some() {
                    self.expand_name(name, None, &mut val)?;
                }
                let v = unquote(&val);
                let cut = v.rfind(['/', '\\']).map(|k| k + 1).unwrap_or(0);
                let s = if f == Func::Basename { &v[cut..] } else { &v[..cut] };
                let s = s.to_string();
                self.push(out, &s)
            }
            // $STRING(item[,fmt]): the item (a macro's name, or text) expanded
            // and evaluated as a ClassAd expression, when that gives a
            // string; else the expanded text itself. The format is all after
            // the comma, spaces included, with one `%s`.
            Func::String => {
                let (item, fmt) = match body.split_once(',') {
                    Some((a, b)) => (trim(a), Some(b)),
                    None => (trim(body), None),
                };
                let text = self.lookup_and_expand(item)?;
                let value = match classad::parse_expr(trim(&text)) {
                    Ok(e) => match classad::ClassAd::new().eval(&e) {
                        classad::Value::Str(s) => s.to_string(),
                        _ => text,
                    },
                    Err(_) => text,
                };
                let s = match fmt {
                    None => value,
                    Some(fm) => printf_string(fm, &value)
                        .map_err(|e| self.func_error(format!("$STRING() format `{fm}`: {e}")))?,
                };
                self.push(out, &s)
            }
            // $EVAL(item): the item expanded and evaluated as a ClassAd
            // expression; a string without its quotes, any other value as
            // ClassAds write it.
            Func::Eval => {
                let text = self.lookup_and_expand(trim(body))?;
                let e = classad::parse_expr(trim(&text)).map_err(|e| {
                    self.func_error(format!(
                        "{whole}: `{}` is not a ClassAd expression: {e}",
                        excerpt(&text)
                    ))
                })?;
                let s = match classad::ClassAd::new().eval(&e) {
                    classad::Value::Str(s) => s.to_string(),
                    v => v.to_string(),
                };
                self.push(out, &s)
            }
            Func::RandomChoice | Func::RandomInteger => Err(self.fail(ConfigError::new(
                ConfigErrorKind::Unsupported,
                format!("{whole}: $RANDOM_CHOICE() and $RANDOM_INTEGER() are not supported"),
            ))),
            Func::Filename => Err(self.fail(ConfigError::new(
                ConfigErrorKind::Unsupported,
                format!("{whole}: the $F...() file name functions are not supported"),
            ))),
        }
    }
}
