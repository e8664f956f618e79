use super::*;

pub(crate) struct Lines<'t> {
    pub(crate) lines: Vec<&'t str>,
    pub(crate) next: usize,
}

impl<'t> Lines<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        Lines { lines: text.split('\n').collect(), next: 0 }
    }

    /// The next physical line (without its line end) and its 1-based number.
    pub(crate) fn physical(&mut self) -> Option<(usize, &'t str)> {
        let l = *self.lines.get(self.next)?;
        self.next += 1;
        Some((self.next, l.strip_suffix('\r').unwrap_or(l)))
    }

    /// The next logical line: trimmed, continuations joined, comment lines
    /// inside continuations dropped. Returns its first line number.
    pub(crate) fn logical(&mut self) -> Option<(usize, String)> {
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

pub(crate) struct IfFrame {
    pub(crate) line: usize,
    pub(crate) active: bool,
    pub(crate) any_taken: bool,
    pub(crate) seen_else: bool,
}

pub(crate) struct Loader<'c> {
    pub(crate) cfg: &'c mut Config,
    /// Files being read, outermost first: canonical path and display name.
    pub(crate) stack: Vec<(PathBuf, String)>,
}

pub(crate) enum Op {
    Assign,
    Colon,
    Here,
    Append(String),
}

impl Loader<'_> {
    pub(crate) fn parse(
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

    pub(crate) fn define(&mut self, name: &str, value: String, origin: &str, line: usize) {
        self.cfg.insert(name, value, Location { origin: origin.to_string(), line: Some(line) });
    }

    /// Expands macros in a macro name being defined and checks the result.
    pub(crate) fn expand_name(&self, name: &str) -> Result<String, ConfigError> {
        let n = if name.contains('$') { self.cfg.expand(name)? } else { name.to_string() };
        check_name(&n)?;
        Ok(n)
    }

    pub(crate) fn eval_condition(&self, cond: &str, what: &str) -> Result<bool, ConfigError> {
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

    pub(crate) fn include(
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

    pub(crate) fn chain(&self, last: &str) -> String {
        let mut parts: Vec<&str> = self.stack.iter().map(|(_, d)| d.as_str()).collect();
        parts.push(last);
        parts.join(" -> ")
    }

    pub(crate) fn include_command(
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

pub(crate) fn syntax(msg: impl Into<String>) -> ConfigError {
    ConfigError::new(ConfigErrorKind::Syntax, msg)
}

pub(crate) fn cond_error(msg: impl Into<String>) -> ConfigError {
    ConfigError::new(ConfigErrorKind::Conditional, msg)
}

/// If `line` starts with keyword `kw` (case-insensitive) followed by
/// whitespace or the end, returns the trimmed rest.
pub(crate) fn keyword_at<'a>(line: &'a str, kw: &str) -> Option<&'a str> {
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

pub(crate) struct Statement<'a> {
    pub(crate) name: &'a str,
    /// Words between the name and the operator (`include ifexist : f`).
    pub(crate) words: Option<&'a str>,
    pub(crate) op: Op,
    pub(crate) value: &'a str,
}

/// Splits a statement line into name, operator and value the way HTCondor
/// does. `Ok(None)` means the line is to be ignored (`[section]`).
pub(crate) fn parse_statement(line: &str) -> Result<Option<Statement<'_>>, ConfigError> {
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

pub(crate) fn read_here(
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

pub(crate) fn literal_bool(s: &str) -> Option<bool> {
    let l = s.to_ascii_lowercase();
    match l.as_str() {
        "true" | "yes" | "t" => Some(true),
        "false" | "no" | "f" => Some(false),
        _ => None,
    }
}

pub(crate) fn literal_number(s: &str) -> Option<f64> {
    if s.is_empty()
        || !s.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
        || !s.bytes().any(|c| c.is_ascii_digit())
    {
        return None;
    }
    s.parse::<f64>().ok()
}

pub(crate) fn eval_condition(cfg: &Config, cond: &str) -> Result<bool, ConfigError> {
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

pub(crate) fn eval_simple_condition(cfg: &Config, expr: &str) -> Result<bool, ConfigError> {
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

pub(crate) fn eval_version(current: (u32, u32, u32), rest: &str) -> Result<bool, ConfigError> {
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
