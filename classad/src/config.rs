//! HTCondor's configuration-file language.
//!
//! A [`Config`] is a table of macros (`NAME = value`) read from one or more
//! configuration sources in order. It follows the HTCondor manual's
//! "Introduction to Configuration" chapter:
//!
//! * `NAME = value` lines; names are case-insensitive (the spelling of the
//!   latest definition is kept for display). Whitespace around `=` and at
//!   both ends of a line is dropped.
//! * `#` starts a comment only at the beginning of a line (after optional
//!   whitespace); `A = x # y` sets `A` to `x # y`.
//! * A trailing `\` (optionally followed by whitespace) joins the next line.
//!   Leading whitespace of the continued line is dropped. A comment line
//!   inside a continuation is skipped entirely and the continuation goes on
//!   with the following line; a comment line that starts a statement never
//!   continues, even if it ends with `\`.
//! * `NAME @=tag` … `@tag` multi-line values. The lines in between are kept
//!   verbatim (joined with `\n`); the closing line may be indented.
//! * `NAME += value` appends to the previous value (separated by a space, or
//!   by the separator in `NAME +,= v`, `+;=`, `+|=`, `+&=`, `+*=`; doubled
//!   separators such as `NAME +&&= v` join with ` && `).
//! * `$(NAME)`, `$(NAME:default)` (the default may itself contain macros),
//!   `$$(...)` (left alone for job-time expansion) and `$(DOLLAR)` (a literal
//!   `$`). Expansion is *late*: the table stores the raw text and
//!   [`Config::get`] expands on lookup, so a later redefinition of a
//!   referenced macro changes earlier definitions that use it. The exception
//!   is a reference to the macro being defined (`A = $(A) more`), which is
//!   replaced by the previous value of `A` at definition time.
//! * Macro functions `$ENV(NAME[:default])` (looked up in an injectable
//!   environment, empty by default; an unset variable without a default
//!   gives `UNDEFINED`, as in HTCondor), `$INT(x[,fmt])`, `$REAL(x[,fmt])`,
//!   `$CHOICE(i, list)`, `$SUBSTR(x, start[, len])`, `$BASENAME(x)` and
//!   `$DIRNAME(x)`. `$STRING`, `$EVAL`, `$RANDOM_CHOICE`, `$RANDOM_INTEGER`
//!   and the `$F…()` file-name functions are recognised but rejected with a
//!   [`ConfigErrorKind::Unsupported`] error.
//! * `include : path`, `include ifexist : path`; `include command : cmd` and
//!   `include : cmd |` only when [`Config::allow_include_command`] was
//!   called. Relative paths resolve against the including file's directory.
//! * `if` / `elif` / `else` / `endif` with `defined NAME`, `version OP x.y[.z]`,
//!   boolean and numeric literals, `$(NAME)` and `!` negation.
//! * `error : message` stops loading with an error; `warning : message` is
//!   recorded in [`Config::warnings`].
//! * A line without an operator that begins with `[` is ignored.
//!
//! Expansion detects cycles (`A = $(B)`, `B = $(A)`) and reports them as
//! errors; recursion depth, include depth, file size and the size of an
//! expanded value are all bounded, so no input can make it recurse or
//! allocate without limit.

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Maximum nesting of `include` statements (HTCondor's limit as well).
pub const MAX_INCLUDE_DEPTH: usize = 20;
/// Maximum nesting of `if` statements within one source.
pub const MAX_IF_DEPTH: usize = 63;
/// Maximum nesting of macro references while expanding one value.
pub const MAX_EXPANSION_DEPTH: usize = 128;
/// Maximum length in bytes of any single expanded value.
pub const MAX_EXPANDED_LEN: usize = 1 << 20;
/// Maximum number of bytes one expansion may produce in total, including
/// intermediate results of nested macros.
pub const MAX_EXPANSION_WORK: usize = 16 << 20;
/// Maximum size in bytes of one configuration file or command output.
pub const MAX_SOURCE_LEN: u64 = 16 << 20;

/// The HTCondor version `if version …` compares against unless
/// [`Config::set_version`] says otherwise.
pub const DEFAULT_VERSION: (u32, u32, u32) = (24, 0, 0);

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// What kind of problem a [`ConfigError`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// A file or command could not be read (including a missing `include`
    /// file); carries the underlying I/O error kind.
    Io(std::io::ErrorKind),
    /// A line is not valid configuration syntax.
    Syntax,
    /// A `NAME @=tag` value was not closed by an `@tag` line.
    UnterminatedMultiLine,
    /// An `if` was not closed by `endif`, or `elif`/`else`/`endif` appeared
    /// without a matching `if`, or `if` statements were nested too deeply.
    Conditional,
    /// A file includes itself, directly or indirectly.
    IncludeCycle,
    /// `include` statements were nested more than [`MAX_INCLUDE_DEPTH`] deep.
    IncludeDepth,
    /// `include command` was used but commands are not allowed.
    IncludeCommandRefused,
    /// An included command exited unsuccessfully.
    IncludeCommandFailed,
    /// Macros refer to each other in a cycle.
    MacroCycle,
    /// Macro references were nested more than [`MAX_EXPANSION_DEPTH`] deep.
    ExpansionDepth,
    /// An expanded value grew past [`MAX_EXPANDED_LEN`], or an expansion did
    /// more than [`MAX_EXPANSION_WORK`] work.
    ExpansionTooLarge,
    /// A macro function (`$INT`, `$CHOICE`, …) was given bad arguments.
    Function,
    /// The input uses a feature this implementation does not provide.
    Unsupported,
    /// The configuration itself raised an error with `error : message`.
    UserError,
    /// A `warning : message` statement (only found in [`Config::warnings`]).
    UserWarning,
}

/// An error from loading or expanding configuration, with the place it
/// refers to (file or origin name and line number) when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    origin: Option<String>,
    line: Option<usize>,
    message: String,
}

impl ConfigError {
    fn new(kind: ConfigErrorKind, message: impl Into<String>) -> Self {
        ConfigError { kind, origin: None, line: None, message: message.into() }
    }

    fn at(mut self, origin: &str, line: usize) -> Self {
        if self.origin.is_none() {
            self.origin = Some(origin.to_string());
            self.line = if line == 0 { None } else { Some(line) };
        }
        self
    }

    fn at_location(self, loc: Option<&Location>) -> Self {
        match loc {
            Some(l) => self.at(&l.origin, l.line.unwrap_or(0)),
            None => self,
        }
    }

    /// What kind of problem this is.
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// The file (or origin name given to [`Config::load_str`]) the error
    /// refers to, if any.
    pub fn origin(&self) -> Option<&str> {
        self.origin.as_deref()
    }

    /// The 1-based line number the error refers to, if any. For a statement
    /// continued over several lines this is its first line.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The description of the problem, without the location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.origin, self.line) {
            (Some(o), Some(l)) => write!(f, "{o}, line {l}: {}", self.message),
            (Some(o), None) => write!(f, "{o}: {}", self.message),
            (None, Some(l)) => write!(f, "line {l}: {}", self.message),
            (None, None) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

// ---------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------

/// Where a macro was (last) defined, for diagnostics such as
/// `condor_config_val -v`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file path, the origin name given to [`Config::load_str`], or
    /// `<set>` for [`Config::set`].
    pub origin: String,
    /// The 1-based line of the definition (its first line if continued), or
    /// `None` when it did not come from a source text.
    pub line: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}, line {l}", self.origin),
            None => f.write_str(&self.origin),
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    raw: String,
    loc: Location,
}

/// A configuration table: macro names mapped to their raw (unexpanded)
/// values, plus the settings that control loading and expansion.
#[derive(Debug, Clone)]
pub struct Config {
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    env: HashMap<String, String>,
    subsystem: Option<String>,
    allow_commands: bool,
    version: (u32, u32, u32),
    warnings: Vec<ConfigError>,
    sources: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config::new()
    }
}

impl Config {
    /// An empty configuration whose `$ENV()` environment is empty.
    pub fn new() -> Self {
        Config {
            entries: Vec::new(),
            index: HashMap::new(),
            env: HashMap::new(),
            subsystem: None,
            allow_commands: false,
            version: DEFAULT_VERSION,
            warnings: Vec::new(),
            sources: Vec::new(),
        }
    }

    /// An empty configuration whose `$ENV(NAME)` looks names up in `env`;
    /// pass `std::env::vars()` to use the real process environment.
    pub fn with_env<I, K, V>(env: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let mut c = Config::new();
        c.env = env.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        c
    }

    /// Sets the subsystem name (such as `STARTD`). Lookups of `NAME` then
    /// first try `SUBSYSTEM.NAME`, as HTCondor daemons do.
    pub fn set_subsystem(&mut self, subsystem: Option<&str>) {
        self.subsystem = subsystem.map(str::to_string);
    }

    /// Allows (`true`) or refuses (`false`, the default) `include command :`
    /// and `include : cmd |`, which run a program and read its output.
    pub fn allow_include_command(&mut self, allow: bool) {
        self.allow_commands = allow;
    }

    /// Sets the version `if version …` conditions compare against
    /// (default [`DEFAULT_VERSION`]).
    pub fn set_version(&mut self, major: u32, minor: u32, sub_minor: u32) {
        self.version = (major, minor, sub_minor);
    }

    /// Reads the configuration file at `path`, adding its definitions (and
    /// those of the files it includes) on top of the current ones.
    ///
    /// On error the table is left exactly as it was before the call.
    pub fn load_file(&mut self, path: impl AsRef<Path>) -> Result<(), ConfigError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = read_source(path).map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::Io(e.kind()),
                format!("cannot read configuration file: {e}"),
            )
            .at(&origin, 0)
        })?;
        let canonical = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let base = path.parent().map(Path::to_path_buf);
        self.transaction(|cfg| {
            cfg.sources.push(origin.clone());
            let mut loader = Loader { cfg, stack: vec![(canonical, origin.clone())] };
            loader.parse(&text, &origin, base.as_deref(), 0)
        })
    }

    /// Reads configuration from `text`. `origin` names it in errors and
    /// [`Location`]s; if `origin` is a path with a directory part, relative
    /// `include` paths resolve against that directory, otherwise against the
    /// current directory.
    ///
    /// On error the table is left exactly as it was before the call.
    pub fn load_str(&mut self, text: &str, origin: &str) -> Result<(), ConfigError> {
        let base =
            Path::new(origin).parent().filter(|p| !p.as_os_str().is_empty()).map(Path::to_path_buf);
        self.transaction(|cfg| {
            let mut loader = Loader { cfg, stack: Vec::new() };
            loader.parse(text, origin, base.as_deref(), 0)
        })
    }

    fn transaction(
        &mut self,
        f: impl FnOnce(&mut Config) -> Result<(), ConfigError>,
    ) -> Result<(), ConfigError> {
        let backup =
            (self.entries.clone(), self.index.clone(), self.warnings.len(), self.sources.len());
        let r = f(self);
        if r.is_err() {
            self.entries = backup.0;
            self.index = backup.1;
            self.warnings.truncate(backup.2);
            self.sources.truncate(backup.3);
        }
        r
    }

    /// Defines `name` as `raw`, as the line `name = raw` would (references
    /// to `name` itself in `raw` are replaced by its current value). The
    /// definition's [`Location`] is `<set>`.
    pub fn set(&mut self, name: &str, raw: &str) -> Result<(), ConfigError> {
        check_name(name)?;
        let value = self.self_expand(name, raw, 0)?;
        self.insert(name, value, Location { origin: "<set>".to_string(), line: None });
        Ok(())
    }

    fn insert(&mut self, name: &str, raw: String, loc: Location) {
        let key = name.to_ascii_lowercase();
        match self.index.get(&key) {
            Some(&i) => {
                let e = &mut self.entries[i];
                e.name = name.to_string();
                e.raw = raw;
                e.loc = loc;
            }
            None => {
                self.index.insert(key, self.entries.len());
                self.entries.push(Entry { name: name.to_string(), raw, loc });
            }
        }
    }

    fn entry_exact(&self, key_lower: &str) -> Option<&Entry> {
        self.index.get(key_lower).map(|&i| &self.entries[i])
    }

    /// Finds the entry `name` refers to: `SUBSYSTEM.name` first when a
    /// subsystem is set, then `name`. Returns the entry's key too.
    fn lookup(&self, name: &str) -> Option<(String, &Entry)> {
        let lower = name.to_ascii_lowercase();
        if let Some(sub) = &self.subsystem {
            let key = format!("{}.{}", sub.to_ascii_lowercase(), lower);
            if let Some(e) = self.entry_exact(&key) {
                return Some((key, e));
            }
        }
        self.entry_exact(&lower).map(|e| (lower, e))
    }

    /// The raw (unexpanded) value of `name`, if it is defined.
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.lookup(name).map(|(_, e)| e.raw.as_str())
    }

    /// Whether `name` is defined (possibly as the empty string).
    pub fn is_defined(&self, name: &str) -> bool {
        self.lookup(name).is_some()
    }

    /// Where `name` was last defined.
    pub fn location(&self, name: &str) -> Option<&Location> {
        self.lookup(name).map(|(_, e)| &e.loc)
    }

    /// The fully expanded value of `name`, or `None` if it is not defined.
    pub fn get(&self, name: &str) -> Result<Option<String>, ConfigError> {
        let Some((key, entry)) = self.lookup(name) else {
            return Ok(None);
        };
        let mut ex = Expander::new(self);
        let mut out = String::new();
        ex.stack.push((key.clone(), entry.name.clone()));
        ex.expand_text(&entry.raw, &mut out)?;
        Ok(Some(finish_dollar(&out)))
    }

    /// Expands the macros in an arbitrary `text` against this table.
    pub fn expand(&self, text: &str) -> Result<String, ConfigError> {
        let mut ex = Expander::new(self);
        let mut out = String::new();
        ex.expand_text(text, &mut out)?;
        Ok(finish_dollar(&out))
    }

    /// The names of all defined macros, in order of first definition, spelled
    /// as in their latest definition.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.entries.iter().map(|e| e.name.as_str())
    }

    /// The number of defined macros.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no macro is defined.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `warning : message` statements met while loading, in order.
    pub fn warnings(&self) -> &[ConfigError] {
        &self.warnings
    }

    /// Every file read so far (including included ones), in reading order.
    pub fn sources(&self) -> &[String] {
        &self.sources
    }

    /// Replaces references to `name` itself (`$(name)`, `$(name:default)`)
    /// in `text` by the current raw value of `name` (or the default when it
    /// is undefined or empty).
    fn self_expand(&self, name: &str, text: &str, depth: usize) -> Result<String, ConfigError> {
        if depth > MAX_EXPANSION_DEPTH {
            return Err(ConfigError::new(
                ConfigErrorKind::ExpansionDepth,
                format!("defaults of `$({name}:...)` nested more than {MAX_EXPANSION_DEPTH} deep"),
            ));
        }
        let mut out = String::new();
        let mut pos = 0;
        let mut scan = Scanner::new(text);
        while let Some(m) = scan.next_macro() {
            out.push_str(&text[pos..m.start]);
            pos = m.end;
            let is_self = matches!(m.kind, MacroKind::Normal)
                && text[m.name.0..m.name.1].eq_ignore_ascii_case(name);
            if !is_self {
                out.push_str(&text[m.start..m.end]);
                continue;
            }
            let current = self.entry_exact(&name.to_ascii_lowercase()).map(|e| e.raw.as_str());
            match (current, m.default) {
                (Some(v), _) if !v.is_empty() => out.push_str(v),
                (_, Some((a, b))) => {
                    out.push_str(&self.self_expand(name, &text[a..b], depth + 1)?)
                }
                _ => {}
            }
            if out.len() > MAX_EXPANDED_LEN {
                return Err(too_large());
            }
        }
        out.push_str(&text[pos..]);
        if out.len() > MAX_EXPANDED_LEN {
            return Err(too_large());
        }
        Ok(out)
    }
}

fn too_large() -> ConfigError {
    ConfigError::new(
        ConfigErrorKind::ExpansionTooLarge,
        format!("expanded value is longer than {MAX_EXPANDED_LEN} bytes"),
    )
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

fn trim(s: &str) -> &str {
    s.trim_matches(is_space)
}

fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/')
}

fn check_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || !name.bytes().all(is_id_byte) {
        return Err(ConfigError::new(
            ConfigErrorKind::Syntax,
            format!(
                "invalid macro name `{}`: expected letters, digits, `_`, `.` or `/`",
                excerpt(name)
            ),
        ));
    }
    Ok(())
}

/// Shortens `s` for quoting in an error message.
fn excerpt(s: &str) -> String {
    const MAX: usize = 80;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

fn read_source(path: &Path) -> std::io::Result<String> {
    let f = fs::File::open(path)?;
    read_limited(f)
}

fn read_limited(r: impl Read) -> std::io::Result<String> {
    let mut buf = Vec::new();
    r.take(MAX_SOURCE_LEN + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_SOURCE_LEN {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_SOURCE_LEN} bytes"),
        ));
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

// ---------------------------------------------------------------------------
// Reading lines
// ---------------------------------------------------------------------------

struct Lines<'t> {
    lines: Vec<&'t str>,
    next: usize,
}

impl<'t> Lines<'t> {
    fn new(text: &'t str) -> Self {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        Lines { lines: text.split('\n').collect(), next: 0 }
    }

    /// The next physical line (without its line end) and its 1-based number.
    fn physical(&mut self) -> Option<(usize, &'t str)> {
        let l = *self.lines.get(self.next)?;
        self.next += 1;
        Some((self.next, l.strip_suffix('\r').unwrap_or(l)))
    }

    /// The next logical line: trimmed, continuations joined, comment lines
    /// inside continuations dropped. Returns its first line number.
    fn logical(&mut self) -> Option<(usize, String)> {
        let (first, l) = self.physical()?;
        let t = trim(l);
        if t.starts_with('#') {
            // A comment never continues, even if it ends with `\`.
            return Some((first, t.to_string()));
        }
        let mut buf = String::new();
        let mut cur = t;
        loop {
            match cur.strip_suffix('\\') {
                Some(head) => buf.push_str(head),
                None => {
                    buf.push_str(cur);
                    return Some((first, buf));
                }
            }
            // Continued: find the next non-comment line.
            loop {
                match self.physical() {
                    None => return Some((first, buf)),
                    Some((_, l)) => {
                        let t = trim(l);
                        if t.starts_with('#') {
                            continue;
                        }
                        cur = t;
                        break;
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------

struct IfFrame {
    line: usize,
    active: bool,
    any_taken: bool,
    seen_else: bool,
}

struct Loader<'c> {
    cfg: &'c mut Config,
    /// Files being read, outermost first: canonical path and display name.
    stack: Vec<(PathBuf, String)>,
}

enum Op {
    Assign,
    Colon,
    Here,
    Append(String),
}

impl Loader<'_> {
    fn parse(
        &mut self,
        text: &str,
        origin: &str,
        base: Option<&Path>,
        depth: usize,
    ) -> Result<(), ConfigError> {
        let mut lines = Lines::new(text);
        let mut ifs: Vec<IfFrame> = Vec::new();
        while let Some((lineno, line)) = lines.logical() {
            let err_at = |e: ConfigError| e.at(origin, lineno);
            let mut line = line.as_str();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // HTCondor ignores a ':' in front of lines of an if body (and of
            // an `if` itself) so that old parsers skip them.
            if let Some(rest) = line.strip_prefix(':')
                && (!ifs.is_empty() || keyword_at(rest, "if").is_some())
            {
                line = rest;
            }
            let enabled = ifs.iter().all(|f| f.active);
            if let Some(cond) = keyword_at(line, "if") {
                if ifs.len() >= MAX_IF_DEPTH {
                    return Err(err_at(ConfigError::new(
                        ConfigErrorKind::Conditional,
                        format!("`if` statements nested more than {MAX_IF_DEPTH} deep"),
                    )));
                }
                let v =
                    if enabled { self.eval_condition(cond, "if").map_err(err_at)? } else { false };
                ifs.push(IfFrame { line: lineno, active: v, any_taken: v, seen_else: false });
                continue;
            }
            if let Some(cond) = keyword_at(line, "elif") {
                let outer = ifs.len().saturating_sub(1);
                let outer_enabled = ifs[..outer].iter().all(|f| f.active);
                let Some(frame) = ifs.last() else {
                    return Err(err_at(cond_error("`elif` without a matching `if`")));
                };
                if frame.seen_else {
                    return Err(err_at(cond_error("`elif` is not allowed after `else`")));
                }
                let v = if !frame.any_taken && outer_enabled {
                    self.eval_condition(cond, "elif").map_err(err_at)?
                } else {
                    false
                };
                if let Some(frame) = ifs.last_mut() {
                    frame.active = v;
                    frame.any_taken |= v;
                }
                continue;
            }
            if let Some(rest) = keyword_at(line, "else") {
                if !rest.is_empty() {
                    return Err(err_at(syntax(format!(
                        "expected nothing after `else`, found `{}`",
                        excerpt(rest)
                    ))));
                }
                let Some(frame) = ifs.last_mut() else {
                    return Err(err_at(cond_error("`else` without a matching `if`")));
                };
                if frame.seen_else {
                    return Err(err_at(cond_error("`else` is not allowed after `else`")));
                }
                frame.seen_else = true;
                frame.active = !frame.any_taken;
                continue;
            }
            if keyword_at(line, "endif").is_some() {
                if ifs.pop().is_none() {
                    return Err(err_at(cond_error("`endif` without a matching `if`")));
                }
                continue;
            }

            let parsed = parse_statement(line).map_err(err_at)?;
            let Some(st) = parsed else {
                continue; // a `[section]` line
            };
            if let Op::Here = st.op {
                // Consume the body even when disabled, so it is not parsed.
                let body = read_here(&mut lines, &st, lineno).map_err(err_at)?;
                if enabled {
                    let name = self.expand_name(st.name).map_err(err_at)?;
                    let value = self.cfg.self_expand(&name, &body, 0).map_err(err_at)?;
                    self.define(&name, value, origin, lineno);
                }
                continue;
            }
            if !enabled {
                continue;
            }
            let keyword = st.name.strip_prefix('@').unwrap_or(st.name);
            if matches!(st.op, Op::Colon) {
                if keyword.eq_ignore_ascii_case("include") {
                    self.include(&st, base, depth).map_err(err_at)?;
                    continue;
                }
                if keyword.eq_ignore_ascii_case("use") {
                    return Err(err_at(ConfigError::new(
                        ConfigErrorKind::Unsupported,
                        format!(
                            "configuration templates (`use {} : {}`) are not supported",
                            st.words.unwrap_or("CATEGORY"),
                            excerpt(st.value)
                        ),
                    )));
                }
                let is_error = keyword.eq_ignore_ascii_case("error");
                if is_error || keyword.eq_ignore_ascii_case("warning") {
                    if let Some(w) = st.words
                        && w.parse::<i64>().is_err()
                    {
                        return Err(err_at(syntax(format!(
                            "expected `{keyword} : message`, found `{}`",
                            excerpt(line)
                        ))));
                    }
                    let msg = self.cfg.expand(st.value).map_err(err_at)?;
                    if is_error {
                        return Err(err_at(ConfigError::new(ConfigErrorKind::UserError, msg)));
                    }
                    let w = ConfigError::new(ConfigErrorKind::UserWarning, msg).at(origin, lineno);
                    self.cfg.warnings.push(w);
                    continue;
                }
            }
            if st.words.is_some() {
                return Err(err_at(syntax(format!(
                    "expected `NAME = value`, found `{}`",
                    excerpt(line)
                ))));
            }
            let name = self.expand_name(st.name).map_err(err_at)?;
            let rhs = match &st.op {
                Op::Append(sep) => match self.cfg.entry_exact(&name.to_ascii_lowercase()) {
                    Some(e) if !e.raw.is_empty() => format!("{}{}{}", e.raw, sep, st.value),
                    _ => st.value.to_string(),
                },
                _ => st.value.to_string(),
            };
            let value = self.cfg.self_expand(&name, &rhs, 0).map_err(err_at)?;
            self.define(&name, value, origin, lineno);
        }
        if let Some(f) = ifs.last() {
            return Err(cond_error(format!(
                "`if` at line {} is not closed by `endif` before the end of the file",
                f.line
            ))
            .at(origin, f.line));
        }
        Ok(())
    }

    fn define(&mut self, name: &str, value: String, origin: &str, line: usize) {
        self.cfg.insert(name, value, Location { origin: origin.to_string(), line: Some(line) });
    }

    /// Expands macros in a macro name being defined and checks the result.
    fn expand_name(&self, name: &str) -> Result<String, ConfigError> {
        let n = if name.contains('$') { self.cfg.expand(name)? } else { name.to_string() };
        check_name(&n)?;
        Ok(n)
    }

    fn eval_condition(&self, cond: &str, what: &str) -> Result<bool, ConfigError> {
        eval_condition(self.cfg, cond).map_err(|reason| {
            if reason.kind == ConfigErrorKind::Conditional {
                cond_error(format!(
                    "`{}` is not a valid {what} condition: {}",
                    excerpt(cond),
                    reason.message
                ))
            } else {
                reason
            }
        })
    }

    fn include(
        &mut self,
        st: &Statement<'_>,
        base: Option<&Path>,
        depth: usize,
    ) -> Result<(), ConfigError> {
        let mut ifexist = false;
        let mut command = false;
        for w in st.words.unwrap_or("").split(is_space).filter(|w| !w.is_empty()) {
            if w.eq_ignore_ascii_case("ifexist") {
                ifexist = true;
            } else if w.eq_ignore_ascii_case("command") {
                command = true;
            } else if w.eq_ignore_ascii_case("into") {
                return Err(ConfigError::new(
                    ConfigErrorKind::Unsupported,
                    "`include ... into <file>` is not supported",
                ));
            } else {
                return Err(syntax(format!(
                    "unexpected keyword `{}` after `include`: expected `include [ifexist] [command] : <file or command>`",
                    excerpt(w)
                )));
            }
        }
        let target = self.cfg.expand(st.value)?;
        let mut target = trim(&target).to_string();
        if let Some(t) = target.strip_suffix('|') {
            command = true;
            target = trim(t).to_string();
        }
        if target.is_empty() {
            return Err(syntax("expected a file name after `include :`, found nothing"));
        }
        if depth + 1 >= MAX_INCLUDE_DEPTH {
            return Err(ConfigError::new(
                ConfigErrorKind::IncludeDepth,
                format!(
                    "includes nested more than {MAX_INCLUDE_DEPTH} deep: {}",
                    self.chain(&target)
                ),
            ));
        }
        if command {
            return self.include_command(&target, ifexist, base, depth);
        }
        let mut path = PathBuf::from(&target);
        if path.is_relative()
            && let Some(b) = base
        {
            path = b.join(path);
        }
        let display = path.display().to_string();
        let file = match fs::File::open(&path) {
            Ok(f) => f,
            Err(_) if ifexist => return Ok(()),
            Err(e) => {
                return Err(ConfigError::new(
                    ConfigErrorKind::Io(e.kind()),
                    format!("cannot read included file `{display}`: {e}"),
                ));
            }
        };
        let canonical = fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if self.stack.iter().any(|(p, _)| *p == canonical) {
            return Err(ConfigError::new(
                ConfigErrorKind::IncludeCycle,
                format!("include cycle: {}", self.chain(&display)),
            ));
        }
        let text = read_limited(file).map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::Io(e.kind()),
                format!("cannot read included file `{display}`: {e}"),
            )
        })?;
        self.cfg.sources.push(display.clone());
        self.stack.push((canonical, display.clone()));
        let inner_base = path.parent().map(Path::to_path_buf);
        let r = self.parse(&text, &display, inner_base.as_deref(), depth + 1);
        self.stack.pop();
        r
    }

    fn chain(&self, last: &str) -> String {
        let mut parts: Vec<&str> = self.stack.iter().map(|(_, d)| d.as_str()).collect();
        parts.push(last);
        parts.join(" -> ")
    }

    fn include_command(
        &mut self,
        cmdline: &str,
        ifexist: bool,
        base: Option<&Path>,
        depth: usize,
    ) -> Result<(), ConfigError> {
        if !self.cfg.allow_commands {
            return Err(ConfigError::new(
                ConfigErrorKind::IncludeCommandRefused,
                format!(
                    "refusing to run `{}` for `include command`: running commands from configuration is disabled (see Config::allow_include_command)",
                    excerpt(cmdline)
                ),
            ));
        }
        let mut args = cmdline.split(is_space).filter(|a| !a.is_empty());
        let Some(program) = args.next() else {
            return Err(syntax("expected a command after `include command :`"));
        };
        let mut cmd = std::process::Command::new(program);
        cmd.args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        if let Some(b) = base {
            cmd.current_dir(b);
        }
        let fail = |kind, msg: String| -> Result<(), ConfigError> {
            if ifexist { Ok(()) } else { Err(ConfigError::new(kind, msg)) }
        };
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return fail(
                    ConfigErrorKind::Io(e.kind()),
                    format!("cannot run `{}`: {e}", excerpt(cmdline)),
                );
            }
        };
        let out = match child.stdout.take() {
            Some(s) => read_limited(s),
            None => Ok(String::new()),
        };
        let status = child.wait();
        let text = match (out, status) {
            (Ok(t), Ok(s)) if s.success() => t,
            (Err(e), _) => {
                let _ = child.kill();
                return fail(
                    ConfigErrorKind::Io(e.kind()),
                    format!("cannot read the output of `{}`: {e}", excerpt(cmdline)),
                );
            }
            (_, Ok(s)) => {
                return fail(
                    ConfigErrorKind::IncludeCommandFailed,
                    format!("`{}` failed ({s})", excerpt(cmdline)),
                );
            }
            (_, Err(e)) => {
                return fail(
                    ConfigErrorKind::Io(e.kind()),
                    format!("cannot run `{}`: {e}", excerpt(cmdline)),
                );
            }
        };
        let display = format!("{cmdline} |");
        self.cfg.sources.push(display.clone());
        self.parse(&text, &display, base, depth + 1)
    }
}

fn syntax(msg: impl Into<String>) -> ConfigError {
    ConfigError::new(ConfigErrorKind::Syntax, msg)
}

fn cond_error(msg: impl Into<String>) -> ConfigError {
    ConfigError::new(ConfigErrorKind::Conditional, msg)
}

/// If `line` starts with keyword `kw` (case-insensitive) followed by
/// whitespace or the end, returns the trimmed rest.
fn keyword_at<'a>(line: &'a str, kw: &str) -> Option<&'a str> {
    let head = line.get(..kw.len())?;
    if !head.eq_ignore_ascii_case(kw) {
        return None;
    }
    let rest = &line[kw.len()..];
    match rest.chars().next() {
        None => Some(""),
        Some(c) if is_space(c) => Some(trim(rest)),
        Some(_) => None,
    }
}

struct Statement<'a> {
    name: &'a str,
    /// Words between the name and the operator (`include ifexist : f`).
    words: Option<&'a str>,
    op: Op,
    value: &'a str,
}

/// Splits a statement line into name, operator and value the way HTCondor
/// does. `Ok(None)` means the line is to be ignored (`[section]`).
fn parse_statement(line: &str) -> Result<Option<Statement<'_>>, ConfigError> {
    let b = line.as_bytes();
    let n = b.len();
    let mut i = 0;
    while i < n && !is_space(b[i] as char) && b[i] != b'=' && b[i] != b':' {
        i += 1;
    }
    let name = &line[..i];
    let bad = || {
        if line.starts_with('[') {
            return Ok(None);
        }
        let what = if name.eq_ignore_ascii_case("include") {
            "`include : <file>`"
        } else {
            "`NAME = value`"
        };
        Err(syntax(format!("expected {what}, found `{}`", excerpt(line))))
    };
    if i == n {
        return bad();
    }
    let mut words = None;
    let mut j = i;
    if b[j] != b'=' && b[j] != b':' {
        while j < n && is_space(b[j] as char) {
            j += 1;
        }
        let ws = j;
        while j < n && !matches!(b[j], b'=' | b':' | b'@' | b'+') {
            j += 1;
        }
        if j == n {
            return bad();
        }
        let w = trim(&line[ws..j]);
        if !w.is_empty() {
            words = Some(w);
        }
    }
    if name.is_empty() {
        return bad();
    }
    let op = match b[j] {
        b'=' => {
            j += 1;
            Op::Assign
        }
        b':' => {
            j += 1;
            Op::Colon
        }
        b'@' => {
            if j + 1 < n && b[j + 1] == b'=' {
                j += 2;
                Op::Here
            } else {
                return bad();
            }
        }
        _ => {
            // '+', optionally followed by a separator (single or doubled)
            j += 1;
            let mut sep = " ".to_string();
            if j < n && b",;|&*".contains(&b[j]) {
                let c = b[j] as char;
                j += 1;
                if j < n && b[j] as char == c {
                    j += 1;
                    sep = format!(" {c}{c} ");
                } else {
                    sep = c.to_string();
                }
            }
            if j < n && b[j] == b'=' {
                j += 1;
                Op::Append(sep)
            } else {
                return bad();
            }
        }
    };
    Ok(Some(Statement { name, words, op, value: trim(&line[j..]) }))
}

fn read_here(
    lines: &mut Lines<'_>,
    st: &Statement<'_>,
    start: usize,
) -> Result<String, ConfigError> {
    let tag = st.value;
    if tag.is_empty() {
        return Err(syntax(format!(
            "expected a tag after `{} @=`, as in `{} @=end` ... `@end`",
            st.name, st.name
        )));
    }
    let mut body: Vec<&str> = Vec::new();
    loop {
        match lines.physical() {
            None => {
                return Err(ConfigError::new(
                    ConfigErrorKind::UnterminatedMultiLine,
                    format!(
                        "multi-line value `{} @={tag}` started at line {start} is not closed: expected a line `@{tag}` before the end of the file",
                        st.name
                    ),
                ));
            }
            Some((_, l)) => {
                if trim(l).strip_prefix('@') == Some(tag) {
                    return Ok(body.join("\n"));
                }
                body.push(l);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Conditions
// ---------------------------------------------------------------------------

fn literal_bool(s: &str) -> Option<bool> {
    let l = s.to_ascii_lowercase();
    match l.as_str() {
        "true" | "yes" | "t" => Some(true),
        "false" | "no" | "f" => Some(false),
        _ => None,
    }
}

fn literal_number(s: &str) -> Option<f64> {
    if s.is_empty()
        || !s.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
        || !s.bytes().any(|c| c.is_ascii_digit())
    {
        return None;
    }
    s.parse::<f64>().ok()
}

fn eval_condition(cfg: &Config, cond: &str) -> Result<bool, ConfigError> {
    let expanded;
    let mut expr = trim(cond);
    let had_dollar = expr.contains('$');
    if had_dollar {
        expanded = cfg.expand(expr)?;
        expr = trim(&expanded);
    }
    let mut negate = false;
    if let Some(rest) = expr.strip_prefix('!') {
        negate = true;
        expr = trim(rest);
    }
    let v = if had_dollar && expr.is_empty() { false } else { eval_simple_condition(cfg, expr)? };
    Ok(v != negate)
}

fn eval_simple_condition(cfg: &Config, expr: &str) -> Result<bool, ConfigError> {
    if let Some(b) = literal_bool(expr) {
        return Ok(b);
    }
    if let Some(n) = literal_number(expr) {
        return Ok(n != 0.0);
    }
    if let Some(rest) = keyword_at(expr, "defined") {
        if rest.is_empty() {
            return Ok(false);
        }
        if literal_bool(rest).is_some() || literal_number(rest).is_some() {
            return Ok(true);
        }
        if rest.bytes().all(is_id_byte) {
            return Ok(cfg.raw(rest).is_some_and(|v| !v.is_empty()));
        }
        return Err(cond_error(
            "`defined` must be followed by a macro name, a boolean or a number",
        ));
    }
    if let Some(head) = expr.get(..7)
        && head.eq_ignore_ascii_case("version")
    {
        let rest = &expr[7..];
        if rest.is_empty() || rest.starts_with(|c: char| is_space(c) || "<=>!".contains(c)) {
            return eval_version(cfg.version, trim(rest));
        }
    }
    if expr.bytes().all(is_id_byte) {
        Err(cond_error(
            "expected `defined NAME`, `version OP x.y.z`, true/false/yes/no or a number",
        ))
    } else {
        Err(cond_error(
            "complex conditions are not supported; expected `defined NAME`, `version OP x.y.z`, true/false/yes/no or a number",
        ))
    }
}

fn eval_version(current: (u32, u32, u32), rest: &str) -> Result<bool, ConfigError> {
    let mut s = rest;
    let negated = s.starts_with('!');
    if negated {
        s = &s[1..];
    }
    let mut op = std::cmp::Ordering::Equal;
    if let Some(c) = s.chars().next()
        && "<=>".contains(c)
    {
        op = match c {
            '<' => std::cmp::Ordering::Less,
            '>' => std::cmp::Ordering::Greater,
            _ => std::cmp::Ordering::Equal,
        };
        s = &s[1..];
    }
    let or_equal = s.starts_with('=');
    if or_equal {
        s = &s[1..];
    }
    let mut v = trim(s);
    if let Some(r) = v.strip_prefix(['v', 'V']) {
        v = r;
    }
    let parts: Vec<&str> = v.split('.').collect();
    let nums: Option<Vec<u32>> = parts.iter().map(|p| p.parse::<u32>().ok()).collect();
    let given = match nums.as_deref() {
        Some([a, b]) if *a >= 6 => (*a, *b, current.2),
        Some([a, b, c]) if *a >= 6 => (*a, *b, *c),
        _ => {
            return Err(cond_error(format!(
                "expected a version such as `8.2` or `8.2.3` after `version`, found `{}`",
                excerpt(v)
            )));
        }
    };
    let ord = current.cmp(&given);
    let r = ord == op || (or_equal && ord == std::cmp::Ordering::Equal);
    Ok(r != negated)
}

// ---------------------------------------------------------------------------
// Macro scanning
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Func {
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
    fn from_name(w: &str) -> Option<Func> {
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
enum MacroKind {
    Normal,
    Func(Func),
}

/// One `$(...)` or `$FUNC(...)` occurrence in a text.
#[derive(Debug, Clone, Copy)]
struct MacroRef {
    start: usize,
    end: usize,
    kind: MacroKind,
    /// The name part of the body (the whole body for functions).
    name: (usize, usize),
    /// The text after `:`, for `$(NAME:default)` and `$ENV(NAME:default)`.
    default: Option<(usize, usize)>,
}

/// Scans a text for macro references, left to right.
struct Scanner<'t> {
    s: &'t str,
    pos: usize,
    /// For each `(`, the position of its matching `)` (or `u32::MAX`);
    /// computed on first use so that scanning stays linear in the text.
    parens: Option<Vec<u32>>,
}

impl<'t> Scanner<'t> {
    fn new(s: &'t str) -> Self {
        Scanner { s, pos: 0, parens: None }
    }

    /// The `)` matching the `(` at `open`.
    fn matching_paren(&mut self, open: usize) -> Option<usize> {
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
    fn next_macro(&mut self) -> Option<MacroRef> {
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
fn finish_dollar(s: &str) -> String {
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

fn is_dollar(s: &str, m: &MacroRef) -> bool {
    matches!(m.kind, MacroKind::Normal)
        && m.default.is_none()
        && s[m.name.0..m.name.1].eq_ignore_ascii_case("DOLLAR")
}

// ---------------------------------------------------------------------------
// Expansion
// ---------------------------------------------------------------------------

struct Expander<'a> {
    cfg: &'a Config,
    /// Macros being expanded: key and display name.
    stack: Vec<(String, String)>,
    memo: HashMap<String, String>,
    work: usize,
    depth: usize,
}

impl<'a> Expander<'a> {
    fn new(cfg: &'a Config) -> Self {
        Expander { cfg, stack: Vec::new(), memo: HashMap::new(), work: 0, depth: 0 }
    }

    /// The location of the macro currently being expanded, for errors.
    fn current_location(&self) -> Option<&'a Location> {
        let (key, _) = self.stack.last()?;
        self.cfg.entry_exact(key).map(|e| &e.loc)
    }

    fn fail(&self, e: ConfigError) -> ConfigError {
        e.at_location(self.current_location())
    }

    fn push(&mut self, out: &mut String, s: &str) -> Result<(), ConfigError> {
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

    fn expand_text(&mut self, text: &str, out: &mut String) -> Result<(), ConfigError> {
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

    fn expand_text_inner(&mut self, text: &str, out: &mut String) -> Result<(), ConfigError> {
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
    fn expand_name(
        &mut self,
        name: &str,
        default: Option<&str>,
        out: &mut String,
    ) -> Result<bool, ConfigError> {
        let cfg = self.cfg;
        match cfg.lookup(name) {
            Some((key, e)) if !e.raw.is_empty() => {
                if let Some(v) = self.memo.get(&key) {
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
                self.stack.push((key.clone(), e.name.clone()));
                let mut buf = String::new();
                let r = self.expand_text(&e.raw, &mut buf);
                self.stack.pop();
                r?;
                self.push(out, &buf)?;
                self.memo.insert(key, buf);
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
    fn lookup_and_expand(&mut self, item: &str) -> Result<String, ConfigError> {
        let mut buf = String::new();
        if !item.is_empty() && item.bytes().all(is_id_byte) && self.cfg.lookup(item).is_some() {
            self.expand_name(item, None, &mut buf)?;
        } else {
            self.expand_text(item, &mut buf)?;
        }
        Ok(buf)
    }

    fn func_error(&self, msg: String) -> ConfigError {
        self.fail(ConfigError::new(ConfigErrorKind::Function, msg))
    }

    fn eval_func(
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
            Func::String | Func::Eval => Err(self.fail(ConfigError::new(
                ConfigErrorKind::Unsupported,
                format!(
                    "{whole}: $STRING() and $EVAL() need ClassAd evaluation and are not supported"
                ),
            ))),
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

fn unquote(s: &str) -> &str {
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
enum Num {
    Int(i64),
    Real(f64),
}

/// Evaluates a simple arithmetic expression: integer and real literals,
/// `true`/`false`, `+ - * / %`, unary `+ -` and parentheses.
fn eval_number(s: &str) -> Option<Num> {
    let mut p = Arith { s: s.as_bytes(), i: 0, depth: 0 };
    let v = p.expr()?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

struct Arith<'s> {
    s: &'s [u8],
    i: usize,
    depth: usize,
}

impl Arith<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && is_space(self.s[self.i] as char) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn expr(&mut self) -> Option<Num> {
        let mut v = self.term()?;
        while let Some(c @ (b'+' | b'-')) = self.peek() {
            self.i += 1;
            let r = self.term()?;
            v = arith(c, v, r)?;
        }
        Some(v)
    }

    fn term(&mut self) -> Option<Num> {
        let mut v = self.unary()?;
        while let Some(c @ (b'*' | b'/' | b'%')) = self.peek() {
            self.i += 1;
            let r = self.unary()?;
            v = arith(c, v, r)?;
        }
        Some(v)
    }

    fn unary(&mut self) -> Option<Num> {
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

    fn atom(&mut self) -> Option<Num> {
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

fn arith(op: u8, a: Num, b: Num) -> Option<Num> {
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

/// Formats `v` with a C format string containing exactly one conversion
/// (`%d %i %u %x %X %o` for integers, `%f %F %e %E %g %G` for reals).
fn printf(fmt: &str, v: Num) -> Result<String, String> {
    const MAX_WIDTH: usize = 1024;
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    let mut converted = false;
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
        if converted {
            return Err("expected exactly one conversion".into());
        }
        converted = true;
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
        while matches!(chars.peek(), Some('h' | 'l' | 'L' | 'q' | 'j' | 'z' | 't')) {
            chars.next();
        }
        let conv = chars.next().ok_or("incomplete conversion")?;
        let (neg, body, numeric_prefix) = match (conv, v) {
            ('d' | 'i' | 'u', Num::Int(i)) => {
                let digits =
                    if conv == 'u' { (i as u64).to_string() } else { i.unsigned_abs().to_string() };
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
                format_real(r.abs(), conv, prec.unwrap_or(6), alt),
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
    }
    if !converted {
        return Err("expected a conversion such as `%d`".into());
    }
    Ok(out)
}

fn pad_digits(digits: String, prec: Option<usize>) -> String {
    match prec {
        Some(p) if p > digits.len() => format!("{}{digits}", "0".repeat(p - digits.len())),
        _ => digits,
    }
}

/// Formats a non-negative real like C's `%f`, `%e` or `%g`.
fn format_real(r: f64, conv: char, prec: usize, alt: bool) -> String {
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

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn data_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/config")
    }

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::SeqCst);
            let p = std::env::temp_dir().join(format!(
                "classad-config-test-{}-{}",
                std::process::id(),
                n
            ));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).expect("create temp dir");
            TempDir(p)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let p = self.0.join(name);
            if let Some(parent) = p.parent() {
                fs::create_dir_all(parent).expect("create dir");
            }
            fs::write(&p, text).expect("write file");
            p
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn load(text: &str) -> Config {
        let mut c = Config::new();
        c.load_str(text, "test.config").expect("load");
        c
    }

    fn get(c: &Config, name: &str) -> String {
        c.get(name).expect("expand").expect("defined")
    }

    fn load_err(text: &str) -> ConfigError {
        let mut c = Config::new();
        c.load_str(text, "test.config").expect_err("should fail")
    }

    // ---- basic syntax ----

    #[test]
    fn simple_assignments_and_case_insensitive_names() {
        let c = load("  Foo   =   bar baz  \nNUM=3\n");
        assert_eq!(c.raw("foo"), Some("bar baz"));
        assert_eq!(c.raw("FOO"), Some("bar baz"));
        assert_eq!(get(&c, "num"), "3");
        assert_eq!(c.names().collect::<Vec<_>>(), vec!["Foo", "NUM"]);
        assert_eq!(c.len(), 2);
        assert!(!c.is_empty());
        assert_eq!(c.get("missing").unwrap(), None);
        assert!(!c.is_defined("missing"));
    }

    #[test]
    fn later_definition_overrides_and_keeps_latest_spelling() {
        let c = load("a = 1\nA = 2\n");
        assert_eq!(get(&c, "a"), "2");
        assert_eq!(c.names().collect::<Vec<_>>(), vec!["A"]);
        assert_eq!(c.location("a").unwrap().line, Some(2));
    }

    #[test]
    fn empty_value() {
        let c = load("A =\nB = $(A:dflt)\n");
        assert_eq!(c.raw("A"), Some(""));
        assert!(c.is_defined("A"));
        // HTCondor uses the default for a macro defined as empty.
        assert_eq!(get(&c, "B"), "dflt");
    }

    #[test]
    fn comments_only_at_line_start() {
        let c = load("# comment\n   # indented comment\nA = x # not a comment\n");
        assert_eq!(get(&c, "A"), "x # not a comment");
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn continuation_joins_lines() {
        let c = load("A = one \\\n    two \\\n\tthree\nB = 1\n");
        assert_eq!(c.raw("A"), Some("one two three"));
        assert_eq!(c.raw("B"), Some("1"));
        assert_eq!(c.location("B").unwrap().line, Some(4));
    }

    #[test]
    fn continuation_backslash_may_be_followed_by_whitespace() {
        let c = load("A = one \\   \ntwo\n");
        assert_eq!(c.raw("A"), Some("one two"));
    }

    #[test]
    fn comment_lines_inside_continuation_are_skipped() {
        // Both examples from the HTCondor manual give `A = $(B) $(D)`.
        let c = load("A = $(B) \\\n# $(C)\n$(D)\n");
        assert_eq!(c.raw("A"), Some("$(B) $(D)"));
        let c = load("A = $(B) \\\n# $(C) \\\n$(D)\n");
        assert_eq!(c.raw("A"), Some("$(B) $(D)"));
    }

    #[test]
    fn comment_line_ending_in_backslash_does_not_continue() {
        let c = load("# comment \\\nA = 1\n");
        assert_eq!(c.raw("A"), Some("1"));
    }

    #[test]
    fn continuation_at_end_of_file() {
        let c = load("A = x \\");
        assert_eq!(c.raw("A"), Some("x"));
    }

    #[test]
    fn crlf_and_bom() {
        let c = load("\u{feff}A = 1\r\nB = 2 \\\r\n  3\r\n");
        assert_eq!(c.raw("A"), Some("1"));
        assert_eq!(c.raw("B"), Some("2 3"));
    }

    #[test]
    fn bracket_lines_are_ignored() {
        let c = load("[HTCondor Settings]\nmy_classad = [ foo=bar ]\n");
        assert_eq!(c.raw("my_classad"), Some("[ foo=bar ]"));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn dotted_subsystem_names_and_lookup() {
        let mut c = load("LOWPORT = 1\nMASTER.LOWPORT = 2\nUSE = $(LOWPORT)\n");
        assert_eq!(get(&c, "LOWPORT"), "1");
        assert_eq!(get(&c, "MASTER.LOWPORT"), "2");
        assert_eq!(get(&c, "USE"), "1");
        c.set_subsystem(Some("master"));
        assert_eq!(get(&c, "LOWPORT"), "2");
        assert_eq!(get(&c, "USE"), "2");
    }

    #[test]
    fn colon_assignment_is_accepted() {
        let c = load("RunBenchmarks : False\n");
        assert_eq!(c.raw("RunBenchmarks"), Some("False"));
    }

    #[test]
    fn macro_in_defined_name_is_expanded() {
        let c = load("PREFIX = MY\n$(PREFIX)_VAR = 7\n");
        assert_eq!(c.raw("MY_VAR"), Some("7"));
    }

    #[test]
    fn plus_equals_appends() {
        let c =
            load("L = a\nL += b\nM += first\nS = x\nS +,= y\nT = p\nT +&&= q\nU = 1\nU +||= 2\n");
        assert_eq!(c.raw("L"), Some("a b"));
        assert_eq!(c.raw("M"), Some("first"));
        assert_eq!(c.raw("S"), Some("x,y"));
        assert_eq!(c.raw("T"), Some("p && q"));
        assert_eq!(c.raw("U"), Some("1 || 2"));
    }

    #[test]
    fn set_and_expand_api() {
        let mut c = Config::new();
        c.set("A", "1").unwrap();
        c.set("B", "$(A) + $(A)").unwrap();
        c.set("A", "$(A)0").unwrap(); // self reference: previous value
        assert_eq!(c.raw("A"), Some("10"));
        assert_eq!(get(&c, "B"), "10 + 10");
        assert_eq!(c.expand("x=$(B);y=$(NOPE:d)").unwrap(), "x=10 + 10;y=d");
        assert_eq!(c.location("A").unwrap().to_string(), "<set>");
        let e = c.set("bad name", "1").unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Syntax);
        assert!(e.message().contains("invalid macro name `bad name`"), "{e}");
    }

    #[test]
    fn locations_for_diagnostics() {
        let dir = TempDir::new();
        let p = dir.write("a.config", "\n# c\nX = 1\nY = 2 \\\n  3\n");
        let mut c = Config::new();
        c.load_file(&p).unwrap();
        let lx = c.location("x").unwrap();
        assert_eq!(lx.origin, p.display().to_string());
        assert_eq!(lx.line, Some(3));
        assert_eq!(c.location("Y").unwrap().line, Some(4));
        assert_eq!(lx.to_string(), format!("{}, line 3", p.display()));
        assert_eq!(c.sources(), &[p.display().to_string()]);
    }

    // ---- multi-line values ----

    #[test]
    fn here_document_values_are_verbatim() {
        let c = load(
            "JOB_ROUTER_DEFAULTS @=jrd\n  [\n    requirements = target.WantJobRouter is true;\n\n    # kept\n  ]\n  @jrd\nNEXT = 1\n",
        );
        assert_eq!(
            c.raw("JOB_ROUTER_DEFAULTS"),
            Some("  [\n    requirements = target.WantJobRouter is true;\n\n    # kept\n  ]")
        );
        assert_eq!(c.raw("NEXT"), Some("1"));
        assert_eq!(c.location("JOB_ROUTER_DEFAULTS").unwrap().line, Some(1));
    }

    #[test]
    fn here_document_expands_late_and_self_refs_early() {
        let c = load("A = one\nA @=end\n$(A)\n$(B)\n@end\nB = two\n");
        assert_eq!(c.raw("A"), Some("one\n$(B)"));
        assert_eq!(get(&c, "A"), "one\ntwo");
    }

    #[test]
    fn unterminated_here_document_names_tag_and_line() {
        let e = load_err("X = 1\nFOO @=end\nline\n@ending\n");
        assert_eq!(e.kind(), ConfigErrorKind::UnterminatedMultiLine);
        assert_eq!(e.line(), Some(2));
        assert_eq!(e.origin(), Some("test.config"));
        assert!(e.message().contains("`FOO @=end`"), "{e}");
        assert!(e.message().contains("started at line 2"), "{e}");
        assert!(e.message().contains("`@end`"), "{e}");
    }

    #[test]
    fn here_document_without_tag() {
        let e = load_err("FOO @=\n");
        assert_eq!(e.kind(), ConfigErrorKind::Syntax);
        assert!(e.message().contains("expected a tag"), "{e}");
    }

    // ---- expansion ----

    #[test]
    fn late_binding() {
        let c = load("A = xxx\nC = $(A)\nA = yyy\n");
        assert_eq!(c.raw("C"), Some("$(A)"));
        assert_eq!(get(&c, "C"), "yyy");
    }

    #[test]
    fn forward_references() {
        let c = load("C = [$(A)]\nA = $(B)$(B)\nB = z\n");
        assert_eq!(get(&c, "C"), "[zz]");
    }

    #[test]
    fn self_reference_uses_previous_value() {
        // The manual's example.
        let c = load("A = xxx\nB = $(A)\nA = $(A)yyy\nA = $(A)zzz\n");
        assert_eq!(c.raw("A"), Some("xxxyyyzzz"));
        assert_eq!(get(&c, "A"), "xxxyyyzzz");
        assert_eq!(get(&c, "B"), "xxxyyyzzz");
        // Self references are case-insensitive and keep other macros raw.
        let c = load("L = $(X)\nl = $(l) more $(Y)\nX = 1\nY = 2\n");
        assert_eq!(c.raw("L"), Some("$(X) more $(Y)"));
        assert_eq!(get(&c, "L"), "1 more 2");
        // Undefined self reference: default or empty.
        let c = load("N = $(N:start) next\nM = $(M) end\n");
        assert_eq!(c.raw("N"), Some("start next"));
        assert_eq!(c.raw("M"), Some(" end"));
    }

    #[test]
    fn undefined_macro_expands_to_empty() {
        let c = load("MAX_ALLOC_CPUS = $(NUMCPUS)-1\n");
        assert_eq!(get(&c, "MAX_ALLOC_CPUS"), "-1");
    }

    #[test]
    fn defaults_literal_and_nested() {
        let c = load(
            "A = $(NUMCPUS:4)-1\nB = $(NUMCPUS:$(DETECTED))-1\nDETECTED = 8\nC = $(X:$(Y:$(Z:deep)))\nD = $(DETECTED:1)\nE = $(X:a b, c)\n",
        );
        assert_eq!(get(&c, "A"), "4-1");
        assert_eq!(get(&c, "B"), "8-1");
        assert_eq!(get(&c, "C"), "deep");
        assert_eq!(get(&c, "D"), "8");
        assert_eq!(get(&c, "E"), "a b, c");
    }

    #[test]
    fn dollar_dollar_is_kept() {
        let c = load("A = $$(Memory) and $$([ $(X) + 1 ])\nX = 2\n");
        assert_eq!(get(&c, "A"), "$$(Memory) and $$([ 2 + 1 ])");
    }

    #[test]
    fn dollar_macro() {
        let c = load("A = cost $(DOLLAR)5 $(dollar)(NOT_A_MACRO)\nB = $(A)\nNOT_A_MACRO = oops\n");
        assert_eq!(get(&c, "A"), "cost $5 $(NOT_A_MACRO)");
        assert_eq!(get(&c, "B"), "cost $5 $(NOT_A_MACRO)");
    }

    #[test]
    fn non_macro_dollar_text_is_left_alone() {
        let c = load("A = $5 and $(not a macro) and $UNKNOWN(x) and $(\nB = 1\n");
        assert_eq!(get(&c, "A"), "$5 and $(not a macro) and $UNKNOWN(x) and $(");
    }

    #[test]
    fn env_function() {
        let mut c = Config::with_env([("HOME", "/home/me"), ("EMPTY", ""), ("REF", "$(X)")]);
        c.load_str(
            "A = $ENV(HOME)/x\nB = $ENV(NOPE)\nC = $ENV(NOPE:fallback)\nD = $ENV(EMPTY:e)\nE = $ENV(REF)\nX = 9\n",
            "t",
        )
        .unwrap();
        assert_eq!(get(&c, "A"), "/home/me/x");
        assert_eq!(get(&c, "B"), "UNDEFINED");
        assert_eq!(get(&c, "C"), "fallback");
        assert_eq!(get(&c, "D"), "e");
        assert_eq!(get(&c, "E"), "9");
        // The default environment is empty, not the process environment.
        let c = load("P = $ENV(PATH:none)\n");
        assert_eq!(get(&c, "P"), "none");
    }

    #[test]
    fn int_and_real_functions() {
        let c = load(
            "X = 2\nY = 6\nXYArea = $(X) * $(Y)\nI = $INT(XYArea)\nJ = $INT(XYArea,%04d)\nK = $INT(XYArea,Area=%d)\nL = $INT(7 / 2)\nM = $INT(2.9)\nR = $REAL(XYArea)\nS = $REAL(1.5,%.3f)\nT = $REAL(10,%g)\nT2 = $REAL(1.5, %.1f)\nU = $REAL(1.0/3)\nU2 = $REAL(1/3)\nV = $INT(255,%x)\nW = $REAL(0.00001234,%e)\n",
        );
        assert_eq!(get(&c, "I"), "12");
        assert_eq!(get(&c, "J"), "0012");
        assert_eq!(get(&c, "K"), "Area=12");
        assert_eq!(get(&c, "L"), "3");
        assert_eq!(get(&c, "M"), "2");
        assert_eq!(get(&c, "R"), "12");
        assert_eq!(get(&c, "S"), "1.500");
        assert_eq!(get(&c, "T"), "10.0");
        // As in HTCondor, the format is everything after the comma.
        assert_eq!(get(&c, "T2"), " 1.5");
        assert_eq!(get(&c, "U"), "0.3333333333333333");
        assert_eq!(get(&c, "U2"), "0"); // integer division, as in ClassAds
        assert_eq!(get(&c, "V"), "ff");
        assert_eq!(get(&c, "W"), "1.234000e-05");
    }

    #[test]
    fn int_function_errors() {
        let c = load(
            "A = $INT(abc)\nB = $INT(5,%s)\nC = $INT(1/0)\nD = $INT(5,%d%d)\nE = $REAL(1,%d)\n",
        );
        for n in ["A", "B", "C", "D", "E"] {
            let e = c.get(n).unwrap_err();
            assert_eq!(e.kind(), ConfigErrorKind::Function, "{n}: {e}");
            assert_eq!(e.line(), c.location(n).unwrap().line, "{n}");
        }
        assert!(c.get("A").unwrap_err().message().contains("does not evaluate to a number"));
    }

    #[test]
    fn choice_and_substr_functions() {
        let c = load(
            "LIST = a, b, $(X)\nX = c\nA = $CHOICE(2, LIST)\nB = $CHOICE(1, red, green, blue)\nIDX = 0\nC = $CHOICE(IDX, LIST)\nName = abcdef\nS1 = $SUBSTR(Name, 2)\nS2 = $SUBSTR(Name, 0, -2)\nS3 = $SUBSTR(Name, 1, 3)\nS4 = $SUBSTR(Name, -1)\nS5 = $SUBSTR(Name, 4, -3)\nBAD = $CHOICE(5, LIST)\n",
        );
        assert_eq!(get(&c, "A"), "c");
        assert_eq!(get(&c, "B"), "green");
        assert_eq!(get(&c, "C"), "a");
        assert_eq!(get(&c, "S1"), "cdef");
        assert_eq!(get(&c, "S2"), "abcd");
        assert_eq!(get(&c, "S3"), "bcd");
        assert_eq!(get(&c, "S4"), "f");
        assert_eq!(get(&c, "S5"), "");
        let e = c.get("BAD").unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Function);
        assert!(e.message().contains("out of range"), "{e}");
    }

    #[test]
    fn basename_and_dirname() {
        let c = load(
            "F = /usr/local/bin/prog.exe\nB = $BASENAME(F)\nD = $DIRNAME(F)\nN = $BASENAME(NOPE)\n",
        );
        assert_eq!(get(&c, "B"), "prog.exe");
        assert_eq!(get(&c, "D"), "/usr/local/bin/");
        assert_eq!(get(&c, "N"), "");
    }

    #[test]
    fn unsupported_functions_are_errors() {
        let c = load("A = $RANDOM_INTEGER(0, 8, 2)\nB = $STRING(X)\nC = $Fn(X)\nD = $EVAL(X)\n");
        for n in ["A", "B", "C", "D"] {
            let e = c.get(n).unwrap_err();
            assert_eq!(e.kind(), ConfigErrorKind::Unsupported, "{n}");
        }
    }

    #[test]
    fn cycle_is_an_error_naming_the_cycle() {
        let c = load("A = $(B)\nB = x $(C)\nC = $(A)\nD = $(A)\n");
        let e = c.get("A").unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::MacroCycle);
        assert_eq!(e.message(), "macros refer to each other in a cycle: A -> B -> C -> A");
        assert_eq!(e.origin(), Some("test.config"));
        assert_eq!(e.line(), Some(1));
        let e = c.get("D").unwrap_err();
        assert_eq!(e.message(), "macros refer to each other in a cycle: A -> B -> C -> A");
        let e = c.expand("$(C)").unwrap_err();
        assert_eq!(e.message(), "macros refer to each other in a cycle: C -> A -> B -> C");
    }

    #[test]
    fn cycle_through_default_and_function() {
        let c = load("A = $(U:$(A))\nB = $INT(B)\n");
        assert_eq!(c.get("A").unwrap_err().kind(), ConfigErrorKind::MacroCycle);
        assert_eq!(c.get("B").unwrap_err().kind(), ConfigErrorKind::MacroCycle);
    }

    #[test]
    fn expansion_size_is_bounded() {
        // Each level doubles: 2^40 bytes if unbounded.
        let mut text = String::from("M0 = xxxxxxxxxxxxxxxx\n");
        for i in 1..=40 {
            text.push_str(&format!("M{i} = $(M{})$(M{})\n", i - 1, i - 1));
        }
        let c = load(&text);
        let e = c.get("M40").unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::ExpansionTooLarge);
        // Deep chains of empty macros finish quickly thanks to memoization.
        let mut text = String::from("E0 =\n");
        for i in 1..=100 {
            text.push_str(&format!(
                "E{i} = $(E{p})$(E{p})$(E{p})$(E{p})$(E{p})$(E{p})\n",
                p = i - 1
            ));
        }
        let c = load(&text);
        assert_eq!(get(&c, "E100"), "");
    }

    #[test]
    fn expansion_depth_is_bounded() {
        let mut text = String::new();
        for i in 0..300 {
            text.push_str(&format!("D{i} = $(D{})\n", i + 1));
        }
        text.push_str("D300 = end\n");
        let c = load(&text);
        let e = c.get("D0").unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::ExpansionDepth);
        assert_eq!(get(&c, "D200"), "end");
        // Deeply nested defaults in one value.
        let deep = format!("X = {}{}\n", "$(U:".repeat(500), ")".repeat(500));
        let c = load(&deep);
        assert_eq!(c.get("X").unwrap_err().kind(), ConfigErrorKind::ExpansionDepth);
    }

    // ---- errors ----

    #[test]
    fn bad_line_error() {
        let e = load_err("A = 1\n\nthis is not config\n");
        assert_eq!(e.kind(), ConfigErrorKind::Syntax);
        assert_eq!(e.line(), Some(3));
        assert_eq!(e.origin(), Some("test.config"));
        assert_eq!(e.message(), "expected `NAME = value`, found `this is not config`");
        assert_eq!(
            e.to_string(),
            "test.config, line 3: expected `NAME = value`, found `this is not config`"
        );
        let e = load_err("???\n");
        assert_eq!(e.message(), "expected `NAME = value`, found `???`");
        let e = load_err("= value\n");
        assert_eq!(e.kind(), ConfigErrorKind::Syntax);
        let e = load_err("A B = 1\n");
        assert_eq!(e.message(), "expected `NAME = value`, found `A B = 1`");
        let e = load_err("A+ = 1\n");
        assert!(e.message().contains("invalid macro name `A+`"), "{e}");
        let e = load_err("A @ 1\n");
        assert_eq!(e.kind(), ConfigErrorKind::Syntax);
    }

    #[test]
    fn failed_load_leaves_table_unchanged() {
        let mut c = load("A = 1\n");
        let e = c.load_str("A = 2\nB = 3\nbroken\n", "second").unwrap_err();
        assert_eq!(e.line(), Some(3));
        assert_eq!(c.raw("A"), Some("1"));
        assert_eq!(c.raw("B"), None);
    }

    #[test]
    fn error_and_warning_statements() {
        let mut c = Config::new();
        c.load_str("X = thing\nwarning : careful with $(X)\nY = 1\n", "w").unwrap();
        assert_eq!(c.warnings().len(), 1);
        assert_eq!(c.warnings()[0].message(), "careful with thing");
        assert_eq!(c.warnings()[0].line(), Some(2));
        assert_eq!(c.warnings()[0].kind(), ConfigErrorKind::UserWarning);
        let e = load_err("if ! defined stuff\n  error : stuff is needed!\nendif\n");
        assert_eq!(e.kind(), ConfigErrorKind::UserError);
        assert_eq!(e.message(), "stuff is needed!");
        assert_eq!(e.line(), Some(2));
    }

    #[test]
    fn use_templates_are_unsupported() {
        let e = load_err("use ROLE : Personal\n");
        assert_eq!(e.kind(), ConfigErrorKind::Unsupported);
        assert!(e.message().contains("use ROLE : Personal"), "{e}");
    }

    // ---- includes ----

    #[test]
    fn include_relative_to_including_file() {
        let dir = TempDir::new();
        dir.write("sub/inner.config", "INNER = from inner $(OUTER)\nOVER = inner\n");
        let main = dir.write(
            "main.config",
            "OVER = main\ninclude : sub/inner.config\nOUTER = outer\nAFTER = $(OVER)\n",
        );
        let mut c = Config::new();
        c.load_file(&main).unwrap();
        assert_eq!(get(&c, "INNER"), "from inner outer");
        assert_eq!(get(&c, "AFTER"), "inner");
        let loc = c.location("INNER").unwrap();
        assert!(loc.origin.ends_with("inner.config"), "{loc}");
        assert_eq!(loc.line, Some(1));
        assert_eq!(c.sources().len(), 2);
    }

    #[test]
    fn include_path_is_expanded_immediately() {
        let dir = TempDir::new();
        dir.write("local.conf", "LOCAL = yes\n");
        let mut c = Config::new();
        let text = format!(
            "LOCAL_DIR = {}\nFILE = local.conf\n@include : $(LOCAL_DIR)/$(FILE)\n",
            dir.0.display()
        );
        c.load_str(&text, "inline").unwrap();
        assert_eq!(get(&c, "LOCAL"), "yes");
    }

    #[test]
    fn include_relative_to_load_str_origin_directory() {
        let dir = TempDir::new();
        dir.write("x.conf", "X = 1\n");
        let origin = dir.0.join("virtual.conf");
        let mut c = Config::new();
        c.load_str("include : x.conf\n", &origin.display().to_string()).unwrap();
        assert_eq!(get(&c, "X"), "1");
    }

    #[test]
    fn missing_include_file_is_an_error() {
        let dir = TempDir::new();
        let main = dir.write("main.config", "A = 1\ninclude : nope.config\n");
        let mut c = Config::new();
        let e = c.load_file(&main).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Io(std::io::ErrorKind::NotFound));
        assert_eq!(e.line(), Some(2));
        assert_eq!(e.origin(), Some(main.display().to_string().as_str()));
        assert!(e.message().contains("nope.config"), "{e}");
        assert_eq!(c.raw("A"), None);
    }

    #[test]
    fn missing_top_level_file_is_an_error() {
        let dir = TempDir::new();
        let mut c = Config::new();
        let e = c.load_file(dir.0.join("absent")).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Io(std::io::ErrorKind::NotFound));
    }

    #[test]
    fn include_ifexist_skips_missing_file() {
        let dir = TempDir::new();
        dir.write("there.config", "THERE = 1\n");
        let main = dir
            .write("main.config", "include ifexist : nope.config\nINCLUDE IFEXIST: there.config\n");
        let mut c = Config::new();
        c.load_file(&main).unwrap();
        assert_eq!(get(&c, "THERE"), "1");
    }

    #[test]
    fn include_cycle_is_an_error_naming_the_chain() {
        let dir = TempDir::new();
        let a = dir.write("a.config", "A = 1\ninclude : b.config\n");
        dir.write("b.config", "B = 1\n\ninclude : a.config\n");
        let mut c = Config::new();
        let e = c.load_file(&a).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::IncludeCycle);
        assert_eq!(e.line(), Some(3));
        assert!(e.origin().unwrap().ends_with("b.config"));
        let a_s = a.display().to_string();
        let b_s = dir.0.join("b.config").display().to_string();
        assert_eq!(
            e.message(),
            format!("include cycle: {a_s} -> {b_s} -> {}", dir.0.join("a.config").display())
        );
        // Self include
        let s = dir.write("self.config", "include : self.config\n");
        let e = Config::new().load_file(&s).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::IncludeCycle);
    }

    #[test]
    fn include_depth_is_bounded() {
        let dir = TempDir::new();
        for i in 0..30 {
            dir.write(
                &format!("f{i}.config"),
                &format!("V{i} = {i}\ninclude : f{}.config\n", i + 1),
            );
        }
        dir.write("f30.config", "END = 1\n");
        let mut c = Config::new();
        let e = c.load_file(dir.0.join("f0.config")).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::IncludeDepth);
        assert!(e.message().contains("f0.config -> "), "{e}");
        // A shallower chain works.
        let mut c = Config::new();
        c.load_file(dir.0.join("f15.config")).unwrap();
        assert_eq!(get(&c, "END"), "1");
    }

    #[test]
    fn include_command_refused_by_default() {
        let e = load_err("include command : echo X = 1\n");
        assert_eq!(e.kind(), ConfigErrorKind::IncludeCommandRefused);
        assert!(e.message().contains("`echo X = 1`"), "{e}");
        let e = load_err("include : echo X = 1 |\n");
        assert_eq!(e.kind(), ConfigErrorKind::IncludeCommandRefused);
        let e = load_err("include into /tmp/x : echo\n");
        assert_eq!(e.kind(), ConfigErrorKind::Unsupported);
        let e = load_err("include bogus : x\n");
        assert_eq!(e.kind(), ConfigErrorKind::Syntax);
        assert!(e.message().contains("unexpected keyword `bogus`"), "{e}");
        let e = load_err("include :\n");
        assert_eq!(e.kind(), ConfigErrorKind::Syntax);
        let e = load_err("include foo.config\n");
        assert_eq!(e.message(), "expected `include : <file>`, found `include foo.config`");
    }

    #[test]
    fn include_command_when_allowed() {
        let mut c = Config::new();
        c.allow_include_command(true);
        c.load_str("include command : echo FROM_CMD = 42\ninclude : echo PIPED = 1 |\n", "t")
            .unwrap();
        assert_eq!(get(&c, "FROM_CMD"), "42");
        assert_eq!(get(&c, "PIPED"), "1");
        let e = c.load_str("include command : false\n", "t").unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::IncludeCommandFailed);
        c.load_str("include ifexist command : false\n", "t").unwrap();
    }

    #[test]
    fn later_files_override_earlier_ones() {
        let dir = TempDir::new();
        let a = dir.write("a.config", "X = a\nY = $(X)\n");
        let b = dir.write("b.config", "X = b\n");
        let mut c = Config::new();
        c.load_file(&a).unwrap();
        c.load_file(&b).unwrap();
        assert_eq!(get(&c, "Y"), "b");
        assert_eq!(c.location("X").unwrap().origin, b.display().to_string());
    }

    // ---- conditionals ----

    #[test]
    fn if_defined_else() {
        let c = load("if defined MY_UNDEFINED_VARIABLE\n  X = 12\nelse\n  X = -1\nendif\n");
        assert_eq!(get(&c, "X"), "-1");
        let c = load("V = 1\nif defined V\n  X = 12\nelse\n  X = -1\nendif\n");
        assert_eq!(get(&c, "X"), "12");
        let c = load("V =\nif defined V\nX = 1\nelse\nX = 2\nendif\n");
        assert_eq!(get(&c, "X"), "2");
        let c = load("if !defined V\nX = 1\nendif\n");
        assert_eq!(get(&c, "X"), "1");
    }

    #[test]
    fn if_version() {
        let mut c = Config::new();
        c.set_version(8, 2, 3);
        c.load_str(
            "if version >= 8.1.6\nA = yes\nendif\nif version == 8.2\nB = yes\nendif\nif version < 8.2.3\nC = yes\nendif\nif version <= 8.2\nD = yes\nendif\nif version > 8.2.2\nE = yes\nendif\nif version != 8.2.3\nF = yes\nendif\n",
            "v",
        )
        .unwrap();
        assert_eq!(c.raw("A"), Some("yes"));
        assert_eq!(c.raw("B"), Some("yes"));
        assert_eq!(c.raw("C"), None);
        assert_eq!(c.raw("D"), Some("yes"));
        assert_eq!(c.raw("E"), Some("yes"));
        assert_eq!(c.raw("F"), None);
        let e = load_err("if version >= banana\nendif\n");
        assert_eq!(e.kind(), ConfigErrorKind::Conditional);
    }

    #[test]
    fn if_literals_macros_elif_and_nesting() {
        let c = load(
            "ON = true\nif $(ON)\nA = 1\nendif\nif $(UNSET)\nB = 1\nendif\nif no\nC = 1\nelif 0\nC = 2\nelif yes\nC = 3\nelif true\nC = 4\nelse\nC = 5\nendif\nif false\n  if true\n    D = 1\n  else\n    D = 2\n  endif\n  FOO @=x\nnot config\n@x\nelse\n  :D = 3\nendif\n",
        );
        assert_eq!(c.raw("A"), Some("1"));
        assert_eq!(c.raw("B"), None);
        assert_eq!(c.raw("C"), Some("3"));
        assert_eq!(c.raw("D"), Some("3"));
        assert_eq!(c.raw("FOO"), None);
    }

    #[test]
    fn if_errors() {
        let e = load_err("A = 1\nif defined X\nB = 2\n");
        assert_eq!(e.kind(), ConfigErrorKind::Conditional);
        assert_eq!(e.line(), Some(2));
        assert!(e.message().contains("not closed by `endif`"), "{e}");
        let e = load_err("endif\n");
        assert_eq!(e.message(), "`endif` without a matching `if`");
        let e = load_err("else\n");
        assert_eq!(e.message(), "`else` without a matching `if`");
        let e = load_err("elif true\n");
        assert_eq!(e.message(), "`elif` without a matching `if`");
        let e = load_err("if true\nelse\nelse\nendif\n");
        assert_eq!(e.message(), "`else` is not allowed after `else`");
        let e = load_err("if true\nelse\nelif true\nendif\n");
        assert_eq!(e.message(), "`elif` is not allowed after `else`");
        let e = load_err("if A > 3\nendif\n");
        assert_eq!(e.kind(), ConfigErrorKind::Conditional);
        assert!(e.message().starts_with("`A > 3` is not a valid if condition"), "{e}");
        let e = load_err(&"if true\n".repeat(70));
        assert!(e.message().contains("nested more than"), "{e}");
    }

    // ---- robustness ----

    #[test]
    fn arbitrary_input_never_panics() {
        let samples = [
            "",
            "\n",
            "\\",
            "=",
            ":",
            "@",
            "+=",
            "$(",
            "$()",
            "A = $(",
            "A = $()",
            "A=$(:)",
            "A = $(B:",
            "A @=",
            "A @=t\n@",
            "if",
            "elif",
            "else x",
            "endif x",
            "include",
            "include :",
            "A = $ENV(",
            "A = $ENV()",
            "A = $INT()",
            "A = $CHOICE()",
            "A = $SUBSTR()",
            "A = $SUBSTR(X,a)",
            "A = $(DOLLAR:x)",
            "A = $$",
            "A = $$$(",
            "\u{feff}",
            "A = é$(é)",
            "é = 1",
            "A = $INT(1,%)",
            "A = $REAL(1,%.9999999f)",
            "[",
            "[x",
            "A ,= ",
            "A +",
            "if $(X",
            "A = $REAL(1e308*10)",
            "A = $INT(-9223372036854775808 / -1)",
        ];
        for s in samples {
            let mut c = Config::new();
            let _ = c.load_str(s, "fuzz");
            for n in c.names().map(str::to_string).collect::<Vec<_>>() {
                let _ = c.get(&n);
            }
            let _ = c.expand(s);
        }
    }

    #[test]
    fn random_input_never_panics() {
        // A small deterministic generator over the characters that matter.
        let alphabet: &[&str] = &[
            "$", "(", ")", ":", "=", "@", "+", "#", "\\", "\n", " ", "A", "b", "_", ".", "$(",
            "$$(", "$ENV(", "$INT(", "$CHOICE(", "$SUBSTR(", "DOLLAR", "if ", "else", "endif",
            "elif ", "defined ", "include", "@=t", "@t", ",", "%", "1", "-", "é",
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..3000 {
            let len = (next() % 40) as usize;
            let text: String =
                (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
            let mut c = Config::new();
            let _ = c.load_str(&text, "random");
            for n in c.names().map(str::to_string).collect::<Vec<_>>() {
                let _ = c.get(&n);
            }
            let _ = c.expand(&text);
        }
    }

    #[test]
    fn scanning_unclosed_macros_is_linear() {
        // 200k unclosed `$(X:(` would take quadratic time with a naive scan.
        let text = "$(X:(".repeat(200_000);
        let c = Config::new();
        let start = std::time::Instant::now();
        assert_eq!(c.expand(&text).unwrap(), text);
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn printf_formats() {
        assert_eq!(printf("%5d|", Num::Int(42)).unwrap(), "   42|");
        assert_eq!(printf("%-5d|", Num::Int(42)).unwrap(), "42   |");
        assert_eq!(printf("%+d", Num::Int(42)).unwrap(), "+42");
        assert_eq!(printf("%05d", Num::Int(-42)).unwrap(), "-0042");
        assert_eq!(printf("%.3d", Num::Int(7)).unwrap(), "007");
        assert_eq!(printf("%#x", Num::Int(255)).unwrap(), "0xff");
        assert_eq!(printf("%o", Num::Int(8)).unwrap(), "10");
        assert_eq!(printf("%lld%%", Num::Int(5)).unwrap(), "5%");
        assert_eq!(printf("%.2f", Num::Real(3.25159)).unwrap(), "3.25");
        assert_eq!(printf("%8.2f", Num::Real(-3.25159)).unwrap(), "   -3.25");
        assert_eq!(printf("%e", Num::Real(12345.678)).unwrap(), "1.234568e+04");
        assert_eq!(printf("%G", Num::Real(1e-10)).unwrap(), "1E-10");
        assert_eq!(printf("%g", Num::Real(123456789.0)).unwrap(), "1.23457e+08");
        assert_eq!(printf("%g", Num::Real(0.0001)).unwrap(), "0.0001");
        assert_eq!(printf("%.16G", Num::Real(0.1)).unwrap(), "0.1");
        assert_eq!(printf("%g", Num::Real(0.0)).unwrap(), "0");
        assert!(printf("%s", Num::Int(1)).is_err());
        assert!(printf("no conversion", Num::Int(1)).is_err());
    }

    // ---- the spec's policy blocks ----

    fn load_files(names: &[&str]) -> Config {
        let mut c = Config::new();
        for n in names {
            c.load_file(data_dir().join(n)).unwrap_or_else(|e| panic!("loading {n}: {e}"));
        }
        c
    }

    /// Expected expansions of the spec's default policy on its own: macros
    /// the block never defines (SmallJob, IsPVM, IsVanilla) expand to "".
    const DEFAULT_POLICY_EXPANDED: &[(&str, &str)] = &[
        ("MINUTE", "60"),
        ("HOUR", "(60 * 60)"),
        ("StateTimer", "(CurrentTime - EnteredCurrentState)"),
        ("ActivityTimer", "(CurrentTime - EnteredCurrentActivity)"),
        ("ActivationTimer", "(CurrentTime - JobStart)"),
        ("LastCkpt", "(CurrentTime - LastPeriodicCheckpoint)"),
        ("NonCondorLoadAvg", "(LoadAvg - CondorLoadAvg)"),
        ("BackgroundLoad", "0.3"),
        ("HighLoad", "0.5"),
        ("StartIdleTime", "15 * 60"),
        ("ContinueIdleTime", "5 * 60"),
        ("MaxSuspendTime", "10 * 60"),
        ("MaxVacateTime", "10 * 60"),
        ("KeyboardBusy", "KeyboardIdle < 60"),
        ("ConsoleBusy", "(ConsoleIdle  < 60)"),
        ("CPUIdle", "(LoadAvg - CondorLoadAvg) <= 0.3"),
        ("CPUBusy", "(LoadAvg - CondorLoadAvg) >= 0.5"),
        ("KeyboardNotBusy", "(KeyboardIdle < 60 == False)"),
        // Unbalanced in the spec itself.
        ("MachineBusy", "((LoadAvg - CondorLoadAvg) >= 0.5 || KeyboardIdle < 60"),
        ("WANT_SUSPEND", "(  || (KeyboardIdle < 60 == False) ||  ||  )"),
        ("WANT_VACATE", "( (CurrentTime - JobStart) > 10 * 60 ||  ||  )"),
        (
            "START",
            "( (KeyboardIdle > 15 * 60) && ( (LoadAvg - CondorLoadAvg) <= 0.3 || (State != \"Unclaimed\" && State != \"Owner\")) )",
        ),
        (
            "SUSPEND",
            "( KeyboardIdle < 60 || ( (CpuBusyTime > 2 * 60) && (CurrentTime - JobStart) > 90 ) )",
        ),
        (
            "CONTINUE",
            "( (LoadAvg - CondorLoadAvg) <= 0.3 && ((CurrentTime - EnteredCurrentActivity) > 10) && (KeyboardIdle > 5 * 60) )",
        ),
        (
            "PREEMPT",
            "( ((Activity == \"Suspended\") && ((CurrentTime - EnteredCurrentActivity) > 10 * 60)) || (SUSPEND && (WANT_SUSPEND == False)) )",
        ),
        ("MaxJobRetirementTime", "0"),
        ("KILL", "(CurrentTime - EnteredCurrentActivity) > 10 * 60"),
        (
            "PERIODIC_CHECKPOINT",
            "( (ImageSize < 60000) && ((CurrentTime - LastPeriodicCheckpoint) > (6 * (60 * 60))) ) || ( (CurrentTime - LastPeriodicCheckpoint) > (12 * (60 * 60)) )",
        ),
    ];

    #[test]
    fn default_policy_block_expands() {
        let c = load_files(&["default_policy.config"]);
        // Every macro of the block, and nothing else.
        let names: Vec<&str> = c.names().collect();
        let expected_names: Vec<&str> = DEFAULT_POLICY_EXPANDED.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, expected_names);
        for (name, want) in DEFAULT_POLICY_EXPANDED {
            let got = get(&c, name);
            assert_eq!(got, *want, "{name}");
            assert!(!got.contains("$("), "{name}: {got}");
        }
        // Raw text keeps the macros (late binding).
        assert_eq!(c.raw("KILL"), Some("$(ActivityTimer) > $(MaxVacateTime)"));
        assert_eq!(
            c.raw("PREEMPT"),
            Some(
                "( ((Activity == \"Suspended\") && ($(ActivityTimer) > $(MaxSuspendTime))) || (SUSPEND && (WANT_SUSPEND == False)) )"
            )
        );
        assert_eq!(c.location("START").unwrap().line, Some(28));
        assert_eq!(c.location("PERIODIC_CHECKPOINT").unwrap().line, Some(41));
    }

    #[test]
    fn default_policy_with_supplement_is_plain_classad_text() {
        let c = load_files(&["default_policy.config", "default_policy_supplement.config"]);
        let want = [
            (
                "WANT_SUSPEND",
                "( (TARGET.ImageSize <  (15 * 1024)) || (KeyboardIdle < 60 == False) || (TARGET.JobUniverse == 4) || (TARGET.JobUniverse == 5) )",
            ),
            (
                "WANT_VACATE",
                "( (CurrentTime - JobStart) > 10 * 60 || (TARGET.JobUniverse == 4) || (TARGET.JobUniverse == 5) )",
            ),
            ("MachineBusy", "((LoadAvg - CondorLoadAvg) >= 0.5 || KeyboardIdle < 60)"),
        ];
        for (name, w) in want {
            assert_eq!(get(&c, name), w, "{name}");
        }
        // The other policy macros are unaffected by the supplement.
        for (name, w) in DEFAULT_POLICY_EXPANDED {
            if !["WANT_SUSPEND", "WANT_VACATE", "MachineBusy"].contains(name) {
                assert_eq!(get(&c, name), *w, "{name}");
            }
        }
        // Everything is fully expanded with balanced parentheses.
        for name in c.names() {
            let v = get(&c, name);
            assert!(!v.contains('$'), "{name}: {v}");
            assert_eq!(v.matches('(').count(), v.matches(')').count(), "{name}: {v}");
        }
    }

    #[test]
    fn test_job_policy_refers_to_previous_values() {
        let c = load_files(&["default_policy.config", "testjob_policy.config"]);
        assert_eq!(
            get(&c, "START"),
            "(( (KeyboardIdle > 15 * 60) && ( (LoadAvg - CondorLoadAvg) <= 0.3 || (State != \"Unclaimed\" && State != \"Owner\")) )) || Owner == \"coltrane\""
        );
        assert_eq!(
            get(&c, "SUSPEND"),
            "(( KeyboardIdle < 60 || ( (CpuBusyTime > 2 * 60) && (CurrentTime - JobStart) > 90 ) )) && Owner != \"coltrane\""
        );
        assert_eq!(
            get(&c, "CONTINUE"),
            "( (LoadAvg - CondorLoadAvg) <= 0.3 && ((CurrentTime - EnteredCurrentActivity) > 10) && (KeyboardIdle > 5 * 60) )"
        );
        assert_eq!(
            get(&c, "PREEMPT"),
            "(( ((Activity == \"Suspended\") && ((CurrentTime - EnteredCurrentActivity) > 10 * 60)) || (SUSPEND && (WANT_SUSPEND == False)) )) && Owner != \"coltrane\""
        );
        assert_eq!(get(&c, "KILL"), "(CurrentTime - EnteredCurrentActivity) > 10 * 60");
        assert!(c.location("KILL").unwrap().origin.ends_with("testjob_policy.config"));
    }

    #[test]
    fn time_of_day_policy_overrides() {
        let c = load_files(&["default_policy.config", "time_of_day_policy.config"]);
        let after = "( (ClockMin < 480 || ClockMin >= 1020) || (ClockDay == 0 || ClockDay == 6) )";
        let work = "( (ClockMin >= 480 && ClockMin < 1020) && (ClockDay > 0 && ClockDay < 6) )";
        assert_eq!(get(&c, "AfterHours"), after);
        assert_eq!(get(&c, "WorkHours"), work);
        assert_eq!(
            get(&c, "START"),
            format!("{after} && (LoadAvg - CondorLoadAvg) <= 0.3 && KeyboardIdle > 15 * 60")
        );
        assert_eq!(
            get(&c, "MachineBusy"),
            format!("( {work} || (LoadAvg - CondorLoadAvg) >= 0.5 || KeyboardIdle < 60 )")
        );
        assert_eq!(get(&c, "WANT_SUSPEND"), after);
    }

    #[test]
    fn desktop_policy_expands() {
        let mut c = load_files(&[
            "default_policy.config",
            "default_policy_supplement.config",
            "desktop_policy.config",
        ]);
        c.load_str("IsDesktop = True\n", "local").unwrap();
        let want = [
            ("STARTD_EXPRS", "IsDesktop"),
            (
                "START",
                "( ((LoadAvg - CondorLoadAvg) <= 0.3 || (State != \"Unclaimed\" && State != \"Owner\")) && (IsDesktop =!= True || (KeyboardIdle > 15 * 60)) )",
            ),
            (
                "WANT_SUSPEND",
                "( (TARGET.ImageSize <  (15 * 1024)) || ((LoadAvg - CondorLoadAvg) >= 0.5 && (KeyboardIdle < 60 == False)) || (TARGET.JobUniverse == 4) || (TARGET.JobUniverse == 5) )",
            ),
            (
                "WANT_VACATE",
                "( (CurrentTime - JobStart) > 10 * 60 || (TARGET.JobUniverse == 4) || (TARGET.JobUniverse == 5) )",
            ),
            (
                "SUSPEND",
                "( ((CpuBusyTime > 2 * 60) && ((CurrentTime - JobStart) > 90)) || ( IsDesktop =?= True && KeyboardIdle < 60 ) )",
            ),
            (
                "CONTINUE",
                "( (LoadAvg - CondorLoadAvg) <= 0.3 && ((CurrentTime - EnteredCurrentActivity) > 300) && (IsDesktop =!= True || (KeyboardIdle > 5 * 60)) )",
            ),
            (
                "PREEMPT",
                "( ((Activity == \"Suspended\") && ((CurrentTime - EnteredCurrentActivity) > 10 * 60)) || (SUSPEND && (WANT_SUSPEND == False)) )",
            ),
            ("MaxJobRetirementTime", "(IsDesktop =!= True) * 0"),
            ("KILL", "(CurrentTime - EnteredCurrentActivity) > 10 * 60"),
            ("IsDesktop", "True"),
        ];
        for (name, w) in want {
            assert_eq!(get(&c, name), w, "{name}");
        }
        assert_eq!(c.location("START").unwrap().line, Some(8));
    }

    #[test]
    fn job_suspension_policy_expands() {
        let c = load_files(&["default_policy.config", "job_suspension_policy.config"]);
        assert_eq!(get(&c, "NUM_CPUS"), "2");
        assert_eq!(get(&c, "VM1_START"), "(TARGET.IsHighPrioJob =?= TRUE)");
        let vm2 = "( (vm1_Activity != \"Busy\") && (KeyboardIdle > 15 * 60) && ((LoadAvg - CondorLoadAvg) <= 0.3 || (State != \"Unclaimed\" && State != \"Owner\")) )";
        assert_eq!(get(&c, "VM2_START"), vm2);
        // START refers to VM1_START/VM2_START, defined after it.
        assert_eq!(
            get(&c, "START"),
            format!(
                "(VirtualMachineID == 1) && (TARGET.IsHighPrioJob =?= TRUE) || (VirtualMachineID == 2) && {vm2}"
            )
        );
        assert_eq!(
            get(&c, "SUSPEND"),
            "(VirtualMachineID == 2) && ( (vm1_Activity == \"Busy\") || (KeyboardIdle < 60) )"
        );
        assert_eq!(get(&c, "CONTINUE"), "(KeyboardIdle > 5 * 60) && (vm1_Activity != \"Busy\")");
    }
}
