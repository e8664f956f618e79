//! The submit macro table: `andes_config::Config` does the expansion
//! (`$(NAME)`, `$(NAME:default)`, `$ENV()`, `$INT()`, `$REAL()`, `$CHOICE()`,
//! `$SUBSTR()`, `$BASENAME()`, `$DIRNAME()`, `$(DOLLAR)`, `$$(...)`, cycle
//! and size limits); this layer adds the submit-only functions `$F...()`,
//! `$RANDOM_INTEGER()` and `$RANDOM_CHOICE()` in the text being expanded.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use andes_config::{Config, ConfigError};

use crate::{ErrorKind, SubmitError};

/// How deep `$F(name)` may nest through the macros it names.
const MAX_FUNC_DEPTH: usize = 16;

pub(crate) struct Macros {
    cfg: Config,
    defs: HashMap<String, (String, usize)>,
    rng: u64,
    /// Names (lower case) something looked up: a command read, a macro
    /// expanded by name.
    used: RefCell<HashSet<String>>,
}

/// Where a value came from, for error messages.
#[derive(Clone, Debug)]
pub(crate) struct Origin {
    pub source: String,
    pub line: Option<usize>,
}

impl Origin {
    pub fn error(&self, kind: ErrorKind, msg: impl Into<String>) -> SubmitError {
        SubmitError::new(kind, &self.source, self.line, msg)
    }
}

impl Macros {
    pub fn new(env: &[(String, String)], seed: u64) -> Self {
        Macros {
            cfg: Config::with_env(env.iter().cloned()),
            defs: HashMap::new(),
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
            used: RefCell::default(),
        }
    }

    fn config_error(origin: &Origin, name: Option<&str>, e: &ConfigError) -> SubmitError {
        let what = match name {
            Some(n) => format!("{n}: {}", e.message()),
            None => e.message().to_string(),
        };
        origin.error(ErrorKind::Macro, what)
    }

    /// Defines `name = value` from `source:line`.
    pub fn define(&mut self, name: &str, value: &str, origin: &Origin) -> Result<(), SubmitError> {
        self.cfg.set(name, value).map_err(|e| Self::config_error(origin, Some(name), &e))?;
        if let Some(l) = origin.line {
            self.defs.insert(name.to_ascii_lowercase(), (origin.source.clone(), l));
        }
        Ok(())
    }

    /// Defines a built-in such as `Process` (no location).
    pub fn builtin(&mut self, name: &str, value: &str) {
        // Built-in names and values are plain; `set` cannot fail on them
        // except through a self-reference, which they never hold.
        let _ = self.cfg.set(name, &value.replace('$', "$(DOLLAR)"));
        self.defs.remove(&name.to_ascii_lowercase());
    }

    /// Records that `name` was read (without allocating when it was already).
    fn note_used(&self, name: &str) {
        let mut used = self.used.borrow_mut();
        if !used.contains(andes_config::key_case(name).as_ref()) {
            used.insert(name.to_ascii_lowercase());
        }
    }

    /// Whether `name` is defined; a defined name counts as read.
    pub fn is_defined(&self, name: &str) -> bool {
        let defined = self.cfg.is_defined(name);
        if defined {
            self.note_used(name);
        }
        defined
    }

    /// The lines of the file that defined a name nothing read: neither a
    /// command nor a macro any value names (`$(name)`), as condor_submit
    /// warns of (a misspelt command, most often). Sorted by line.
    pub fn unused(&self) -> Vec<(String, Origin)> {
        let used = self.used.borrow();
        // Every name some value references as `$(name)` or `$(name:...)`: one
        // pass over the values, however many there are.
        let mut named: HashSet<String> = HashSet::new();
        for n in self.defs.keys() {
            let Some(raw) = self.cfg.raw(n) else { continue };
            for (i, _) in raw.match_indices("$(") {
                let rest = &raw[i + 2..];
                let end = rest.find([')', ':']).unwrap_or(rest.len());
                named.insert(rest[..end].to_ascii_lowercase());
            }
            // A function's arguments may name macros too (`$EVAL(steps)`,
            // `$INT(n,%03d)`, `$CHOICE(i, list)`): every argument that is a
            // name counts as read.
            for (i, _) in raw.match_indices('$') {
                let rest = &raw[i + 1..];
                let word = rest.find(|c: char| !c.is_ascii_alphanumeric() && c != '_');
                let Some(open) = word.filter(|&w| w > 0 && rest[w..].starts_with('(')) else {
                    continue;
                };
                let args = &rest[open + 1..];
                let args = &args[..args.find(')').unwrap_or(args.len())];
                for a in args.split(',').map(str::trim) {
                    if !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                        named.insert(a.to_ascii_lowercase());
                    }
                }
            }
        }
        let mut out: Vec<(String, Origin)> = self
            .defs
            .iter()
            .filter(|(n, _)| !used.contains(*n) && !named.contains(*n))
            .map(|(n, (src, line))| {
                let text = format!("{n} = {}", self.cfg.raw(n).unwrap_or_default());
                (text, Origin { source: src.clone(), line: Some(*line) })
            })
            .collect();
        out.sort_by_key(|(_, o)| o.line);
        out
    }

    /// Where `name` was defined, for messages about its value.
    pub fn origin(&self, name: &str, fallback: &str) -> Origin {
        match self.defs.get(andes_config::key_case(name).as_ref()) {
            Some((s, l)) => Origin { source: s.clone(), line: Some(*l) },
            None => Origin { source: fallback.to_string(), line: None },
        }
    }

    /// The expanded value of `name`, or `None` when it is not defined.
    pub fn get(
        &mut self,
        name: &str,
        iwd: &str,
        fallback: &str,
    ) -> Result<Option<String>, SubmitError> {
        self.get_depth(name, iwd, fallback, 0)
    }

    fn get_depth(
        &mut self,
        name: &str,
        iwd: &str,
        fallback: &str,
        depth: usize,
    ) -> Result<Option<String>, SubmitError> {
        let Some(raw) = self.cfg.raw(name).map(str::to_string) else {
            return Ok(None);
        };
        self.note_used(name);
        let origin = self.origin(name, fallback);
        self.expand_depth(&raw, iwd, &origin, depth).map(Some)
    }

    /// Expands the macros in `text`.
    pub fn expand(
        &mut self,
        text: &str,
        iwd: &str,
        origin: &Origin,
    ) -> Result<String, SubmitError> {
        self.expand_depth(text, iwd, origin, 0)
    }

    fn expand_depth(
        &mut self,
        text: &str,
        iwd: &str,
        origin: &Origin,
        depth: usize,
    ) -> Result<String, SubmitError> {
        if depth > MAX_FUNC_DEPTH {
            return Err(origin.error(ErrorKind::Macro, "macro functions nest too deeply"));
        }
        let pre = if text.contains('$') {
            self.functions(text, iwd, origin, depth)?
        } else {
            text.to_string()
        };
        self.cfg.expand(&pre).map_err(|e| Self::config_error(origin, None, &e))
    }

    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Replaces `$F...(name)`, `$RANDOM_INTEGER(...)` and `$RANDOM_CHOICE(...)`.
    fn functions(
        &mut self,
        text: &str,
        iwd: &str,
        origin: &Origin,
        depth: usize,
    ) -> Result<String, SubmitError> {
        let b = text.as_bytes();
        let pairs = paren_pairs(b);
        let mut out = String::with_capacity(text.len());
        let mut pos = 0;
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'$' {
                i += 1;
                continue;
            }
            if b.get(i + 1) == Some(&b'$') {
                i += 2;
                continue;
            }
            let name_start = i + 1;
            let mut j = name_start;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            if j == name_start && b.get(j) == Some(&b'(') {
                // `$(name)` whose value uses a submit-only function: expand
                // it here, since the configuration expander does not know
                // those functions.
                if let Some(close) = pairs.get(&j).copied() {
                    let inner = &text[j + 1..close];
                    let (name, default) = match inner.split_once(':') {
                        Some((n, d)) => (n, Some(d)),
                        None => (inner, None),
                    };
                    let uses =
                        name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
                            && self.cfg.raw(name).is_some_and(uses_submit_function);
                    if uses {
                        let mut v = self
                            .get_depth(name, iwd, &origin.source, depth + 1)?
                            .unwrap_or_default();
                        if let (true, Some(d)) = (v.is_empty(), default) {
                            v = self.expand_depth(d, iwd, origin, depth + 1)?;
                        }
                        out.push_str(&text[pos..i]);
                        out.push_str(&v.replace('$', "$(DOLLAR)"));
                        pos = close + 1;
                        i = close + 1;
                        continue;
                    }
                }
            }
            if j == name_start || b.get(j) != Some(&b'(') {
                i = j.max(i + 1);
                continue;
            }
            let fname = &text[name_start..j];
            let upper = fname.to_ascii_uppercase();
            let is_f =
                upper.starts_with('F') && upper[1..].bytes().all(|c| b"PNXDQABFWU".contains(&c));
            if !(is_f || upper == "RANDOM_INTEGER" || upper == "RANDOM_CHOICE") {
                i = j;
                continue;
            }
            let close = pairs.get(&j).copied();
            let Some(close) = close else {
                return Err(
                    origin.error(ErrorKind::Macro, format!("${fname}( is not closed by `)`"))
                );
            };
            let arg = &text[j + 1..close];
            let value = if is_f {
                let name = arg.trim();
                let v = self.get_depth(name, iwd, &origin.source, depth + 1)?.unwrap_or_default();
                file_parts(&v, &upper[1..], iwd)
            } else {
                let expanded = self.expand_depth(arg, iwd, origin, depth + 1)?;
                let parts: Vec<&str> = expanded.split(',').map(str::trim).collect();
                if upper == "RANDOM_CHOICE" {
                    if parts.iter().all(|p| p.is_empty()) {
                        return Err(origin.error(ErrorKind::Macro, "$RANDOM_CHOICE() needs items"));
                    }
                    let n = self.next_random() % parts.len() as u64;
                    parts[n as usize].to_string()
                } else {
                    let num = |s: &str| s.parse::<i64>().ok();
                    let bad = || {
                        origin.error(
                            ErrorKind::Macro,
                            format!("$RANDOM_INTEGER({expanded}): expected min, max[, step] integers with min <= max"),
                        )
                    };
                    let (Some(lo), Some(hi)) =
                        (parts.first().and_then(|s| num(s)), parts.get(1).and_then(|s| num(s)))
                    else {
                        return Err(bad());
                    };
                    let step = match parts.get(2) {
                        Some(s) => num(s).filter(|s| *s > 0).ok_or_else(bad)?,
                        None => 1,
                    };
                    if lo > hi || parts.len() > 3 {
                        return Err(bad());
                    }
                    let span = ((hi as i128 - lo as i128) / step as i128 + 1) as u128;
                    let pick = (self.next_random() as u128) % span;
                    (lo as i128 + pick as i128 * step as i128).to_string()
                }
            };
            out.push_str(&text[pos..i]);
            out.push_str(&value.replace('$', "$(DOLLAR)"));
            pos = close + 1;
            i = close + 1;
        }
        out.push_str(&text[pos..]);
        Ok(out)
    }
}

/// The index of the matching `)` for every `(` that has one, in one pass.
fn paren_pairs(b: &[u8]) -> HashMap<usize, usize> {
    let mut open = Vec::new();
    let mut pairs = HashMap::new();
    for (k, &c) in b.iter().enumerate() {
        match c {
            b'(' => open.push(k),
            b')' => {
                if let Some(o) = open.pop() {
                    pairs.insert(o, k);
                }
            }
            _ => {}
        }
    }
    pairs
}

/// Whether `raw` calls `$F...()`, `$RANDOM_INTEGER()` or `$RANDOM_CHOICE()`.
fn uses_submit_function(raw: &str) -> bool {
    let b = raw.as_bytes();
    (0..b.len()).any(|i| {
        if b[i] != b'$' {
            return false;
        }
        let rest = &raw[i + 1..];
        let ident_len =
            rest.bytes().take_while(|c| c.is_ascii_alphanumeric() || *c == b'_').count();
        if rest.as_bytes().get(ident_len) != Some(&b'(') || ident_len == 0 {
            return false;
        }
        let name = rest[..ident_len].to_ascii_uppercase();
        name == "RANDOM_INTEGER"
            || name == "RANDOM_CHOICE"
            || (name.starts_with('F') && name[1..].bytes().all(|c| b"PNXDQABFWU".contains(&c)))
    })
}

/// HTCondor's `$F` modifiers applied to a path: `f` makes it absolute
/// against the initial directory, `u`/`w` turn `\` into `/` and back; then
/// `p` is the directory part (with its trailing `/`), `d` the last directory
/// name (with `/`), `n` the name without extension, `x` the extension (with
/// its `.`), `b` the name with extension; with none of these the whole path;
/// finally `q` wraps the result in double quotes and `a` in single quotes.
pub(crate) fn file_parts(path: &str, mods: &str, iwd: &str) -> String {
    let has = |c: char| mods.contains(c);
    let mut p = path.trim().to_string();
    if has('F') && !p.starts_with('/') && !p.is_empty() {
        p = format!("{}/{}", iwd.trim_end_matches('/'), p);
    }
    if has('U') {
        p = p.replace('\\', "/");
    }
    let (dir, name) = match p.rfind('/') {
        Some(i) => (&p[..=i], &p[i + 1..]),
        None => ("", p.as_str()),
    };
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (name, ""),
    };
    let mut out = String::new();
    if !(has('P') || has('D') || has('N') || has('X') || has('B')) {
        out.push_str(&p);
    } else {
        if has('P') {
            out.push_str(dir);
        } else if has('D') {
            let d = dir.trim_end_matches('/');
            let last = d.rsplit('/').next().unwrap_or("");
            if !last.is_empty() {
                out.push_str(last);
                out.push('/');
            }
        }
        if has('B') {
            out.push_str(name);
        } else {
            if has('N') {
                out.push_str(stem);
            }
            if has('X') {
                out.push_str(ext);
            }
        }
    }
    if has('W') {
        out = out.replace('/', "\\");
    }
    if has('Q') {
        out = format!("\"{out}\"");
    } else if has('A') {
        out = format!("'{out}'");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin { source: "t.sub".into(), line: Some(1) }
    }

    #[test]
    fn file_functions() {
        let p = "/data/set1/file.tar.gz";
        assert_eq!(file_parts(p, "N", "/iwd"), "file.tar");
        assert_eq!(file_parts(p, "X", "/iwd"), ".gz");
        assert_eq!(file_parts(p, "P", "/iwd"), "/data/set1/");
        assert_eq!(file_parts(p, "NX", "/iwd"), "file.tar.gz");
        assert_eq!(file_parts(p, "D", "/iwd"), "set1/");
        assert_eq!(file_parts("in/a.txt", "F", "/iwd"), "/iwd/in/a.txt");
        assert_eq!(file_parts("a.txt", "NQ", "/iwd"), "\"a\"");
        assert_eq!(file_parts("a", "X", "/iwd"), "");
    }

    #[test]
    fn expansion_with_submit_functions() {
        let mut m = Macros::new(&[("HOME".into(), "/home/u".into())], 1);
        m.define("path", "/data/set1/file.tar.gz", &origin()).unwrap();
        m.builtin("Process", "7");
        let out = m
            .expand(
                "$Fn(path) $Fx(path) $Fp(path) $INT(Process,%03d) $ENV(HOME) $$([x]) $(nope:d)",
                "/iwd",
                &origin(),
            )
            .unwrap();
        assert_eq!(out, "file.tar .gz /data/set1/ 007 /home/u $$([x]) d");
        for _ in 0..50 {
            let v: i64 =
                m.expand("$RANDOM_INTEGER(2, 10, 4)", "/iwd", &origin()).unwrap().parse().unwrap();
            assert!([2, 6, 10].contains(&v), "{v}");
            let c = m.expand("$RANDOM_CHOICE(a, b)", "/iwd", &origin()).unwrap();
            assert!(c == "a" || c == "b");
        }
        assert!(m.expand("$RANDOM_INTEGER(5, 1)", "/iwd", &origin()).is_err());
        assert!(m.expand("$Fn(path", "/iwd", &origin()).is_err());
    }

    #[test]
    fn self_reference_and_cycles_are_bounded() {
        let mut m = Macros::new(&[], 0);
        m.define("a", "x", &origin()).unwrap();
        m.define("a", "$(a) y", &origin()).unwrap();
        assert_eq!(m.get("a", "/", "t").unwrap().unwrap(), "x y");
        m.define("b", "$(c)", &origin()).unwrap();
        m.define("c", "$(b)", &origin()).unwrap();
        let e = m.get("b", "/", "t").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Macro);
        m.define("x", "$Fn(path)", &origin()).unwrap();
        m.define("path", "/a/b.c", &origin()).unwrap();
        assert_eq!(m.expand("[$(x)] [$(x:d)]", "/", &origin()).unwrap(), "[b] [b]");
        m.define("f", "$Fn(f)", &origin()).unwrap();
        assert!(m.get("f", "/", "t").is_err());
    }
}
