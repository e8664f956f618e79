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
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

mod expand;
mod load;
mod number;
#[cfg(test)]
mod tests;

use expand::*;
use load::*;
use number::*;

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

/// A macro name as the table keys it (names are case-insensitive): in lower
/// case, borrowed when it already is, as the names a program asks about
/// (submit commands, once a job) are.
pub fn key_case(name: &str) -> std::borrow::Cow<'_, str> {
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        name.to_ascii_lowercase().into()
    } else {
        name.into()
    }
}

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
    pub(crate) kind: ConfigErrorKind,
    pub(crate) origin: Option<String>,
    pub(crate) line: Option<usize>,
    pub(crate) message: String,
}

impl ConfigError {
    pub(crate) fn new(kind: ConfigErrorKind, message: impl Into<String>) -> Self {
        ConfigError { kind, origin: None, line: None, message: message.into() }
    }

    pub(crate) fn at(mut self, origin: &str, line: usize) -> Self {
        if self.origin.is_none() {
            self.origin = Some(origin.to_string());
            self.line = if line == 0 { None } else { Some(line) };
        }
        self
    }

    pub(crate) fn at_location(self, loc: Option<&Location>) -> Self {
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
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) raw: String,
    pub(crate) loc: Location,
}

/// A configuration table: macro names mapped to their raw (unexpanded)
/// values, plus the settings that control loading and expansion.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) entries: Vec<Entry>,
    pub(crate) index: HashMap<String, usize>,
    pub(crate) env: HashMap<String, String>,
    pub(crate) subsystem: Option<String>,
    pub(crate) allow_commands: bool,
    pub(crate) version: (u32, u32, u32),
    pub(crate) warnings: Vec<ConfigError>,
    pub(crate) sources: Vec<String>,
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

    pub(crate) fn transaction(
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

    pub(crate) fn insert(&mut self, name: &str, raw: String, loc: Location) {
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

    pub(crate) fn entry_exact(&self, key_lower: &str) -> Option<&Entry> {
        self.index.get(key_lower).map(|&i| &self.entries[i])
    }

    /// Finds the entry `name` refers to: `SUBSYSTEM.name` first when a
    /// subsystem is set, then `name`. Returns the entry's key too.
    /// The key is the table's own: a name already in lower case is looked
    /// up without allocating ([`key_case`]).
    pub(crate) fn lookup(&self, name: &str) -> Option<(&str, &Entry)> {
        let lower = key_case(name);
        let at =
            |key: &str| self.index.get_key_value(key).map(|(k, &i)| (k.as_str(), &self.entries[i]));
        if let Some(sub) = &self.subsystem {
            let key = format!("{}.{}", sub.to_ascii_lowercase(), lower);
            if let Some(found) = at(&key) {
                return Some(found);
            }
        }
        at(&lower)
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
        ex.stack.push((key.to_string(), entry.name.clone()));
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
    pub(crate) fn self_expand(
        &self,
        name: &str,
        text: &str,
        depth: usize,
    ) -> Result<String, ConfigError> {
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

pub(crate) fn too_large() -> ConfigError {
    ConfigError::new(
        ConfigErrorKind::ExpansionTooLarge,
        format!("expanded value is longer than {MAX_EXPANDED_LEN} bytes"),
    )
}

pub(crate) fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

pub(crate) fn trim(s: &str) -> &str {
    s.trim_matches(is_space)
}

pub(crate) fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/')
}

pub(crate) fn check_name(name: &str) -> Result<(), ConfigError> {
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
pub(crate) fn excerpt(s: &str) -> String {
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

pub(crate) fn read_source(path: &Path) -> std::io::Result<String> {
    let f = fs::File::open(path)?;
    read_limited(f)
}

pub(crate) fn read_limited(r: impl Read) -> std::io::Result<String> {
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
