//! Reading a submit description into statements with line numbers.

use crate::{ErrorKind, SubmitError};

/// Largest submit description accepted, in bytes.
pub const MAX_SOURCE_LEN: usize = 16 << 20;

/// A parsed submit description: its statements in file order.
#[derive(Clone, Debug)]
pub struct SubmitDescription {
    /// The name used for this description in error messages (a file name).
    pub source: String,
    /// The statements, in file order.
    pub statements: Vec<Statement>,
}

/// One statement of a submit description.
#[derive(Clone, Debug, PartialEq)]
pub struct Statement {
    /// Where the statement starts (1-based line number).
    pub line: usize,
    /// What the statement says.
    pub kind: StatementKind,
}

/// The kinds of statement a submit description holds.
#[derive(Clone, Debug, PartialEq)]
pub enum StatementKind {
    /// `name = value`: a submit command or a user macro (they share one table).
    Assign {
        /// The name as written.
        name: String,
        /// The raw, unexpanded value.
        value: String,
    },
    /// `+Name = value` or `MY.Name = value`: an attribute copied into the job ad.
    Attr {
        /// The attribute name, without `+` or `MY.`.
        name: String,
        /// The raw, unexpanded ClassAd expression.
        value: String,
    },
    /// A `queue` statement.
    Queue(QueueStatement),
}

/// A `queue` statement: `queue [count] [vars] [in|from|matching ...]`.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueStatement {
    /// The count as written (may hold macros); empty means 1.
    pub count: String,
    /// The item variable names (`Item` when none is given and there are items).
    pub vars: Vec<String>,
    /// Where the items come from.
    pub items: ItemSource,
}

/// Where the items of a `queue` statement come from.
#[derive(Clone, Debug, PartialEq)]
pub enum ItemSource {
    /// `queue [N]`: no items.
    None,
    /// `queue v in (a b c)`: the item words (comma or space separated).
    In(Vec<String>),
    /// `queue a,b from ( rows )`: inline rows.
    FromRows(Vec<String>),
    /// `queue a,b from file`: rows read from a file relative to the initial
    /// directory (the name may hold macros).
    FromFile(String),
    /// `queue v matching [files|dirs] globs`.
    Matching {
        /// Which directory entries match.
        what: MatchKind,
        /// The glob patterns.
        globs: Vec<String>,
    },
}

/// Which entries `queue ... matching` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    /// Files and directories.
    Any,
    /// `matching files`.
    Files,
    /// `matching dirs`.
    Dirs,
}

/// Parses the text of a submit description. `source` names it in errors.
pub fn parse(text: &str, source: &str) -> Result<SubmitDescription, SubmitError> {
    if text.len() > MAX_SOURCE_LEN {
        return Err(SubmitError::new(
            ErrorKind::Syntax,
            source,
            None,
            format!("the submit description is larger than {MAX_SOURCE_LEN} bytes"),
        ));
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let mut statements = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start = i + 1;
        // Join continuation lines.
        let mut logical = String::new();
        loop {
            let l = lines[i];
            i += 1;
            let t = l.trim_end();
            if let Some(body) = t.strip_suffix('\\') {
                logical.push_str(body);
                if i < lines.len() {
                    continue;
                }
            } else {
                logical.push_str(l);
            }
            break;
        }
        let t = logical.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let err = |msg: String| SubmitError::new(ErrorKind::Syntax, source, Some(start), msg);
        if let Some(rest) = keyword(t, "queue") {
            let (q, consumed) = parse_queue(rest, &lines[i..])
                .map_err(|msg| SubmitError::new(ErrorKind::Queue, source, Some(start), msg))?;
            i += consumed;
            statements.push(Statement { line: start, kind: StatementKind::Queue(q) });
            continue;
        }
        let Some(eq) = t.find('=') else {
            return Err(err(format!("expected `name = value` or `queue`, found {:?}", excerpt(t))));
        };
        let name = t[..eq].trim();
        let value = t[eq + 1..].trim().to_string();
        if let Some(attr) =
            name.strip_prefix('+').or_else(|| strip_prefix_ci(name, "MY.")).map(str::trim)
        {
            if !valid_attr_name(attr) {
                return Err(err(format!("{name:?} is not a valid attribute name")));
            }
            statements.push(Statement {
                line: start,
                kind: StatementKind::Attr { name: attr.into(), value },
            });
            continue;
        }
        if !valid_macro_name(name) {
            return Err(err(format!(
                "{:?} is not a valid command or macro name (letters, digits, `_` and `.`)",
                excerpt(name)
            )));
        }
        statements.push(Statement {
            line: start,
            kind: StatementKind::Assign { name: name.into(), value },
        });
    }
    Ok(SubmitDescription { source: source.to_string(), statements })
}

fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

pub(crate) fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    if s.len() >= prefix.len()
        && s.is_char_boundary(prefix.len())
        && s[..prefix.len()].eq_ignore_ascii_case(prefix)
    {
        Some(&s[prefix.len()..])
    } else {
        None
    }
}

/// `word` at the start of `s`, case-insensitively, followed by white space or
/// the end: returns the rest.
fn keyword<'a>(s: &'a str, word: &str) -> Option<&'a str> {
    let rest = strip_prefix_ci(s, word)?;
    if rest.is_empty() || rest.starts_with(|c: char| c.is_whitespace()) {
        Some(rest.trim_start())
    } else {
        None
    }
}

fn valid_attr_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

fn valid_macro_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

/// Parses the arguments of a `queue` statement. `following` are the lines
/// after it, consumed by a multi-line `( ... )` list. Returns the statement
/// and the number of following lines consumed.
fn parse_queue(rest: &str, following: &[&str]) -> Result<(QueueStatement, usize), String> {
    let mut s = rest.trim();
    // Optional count: everything up to the first variable name / keyword.
    // HTCondor allows an expression; we take the leading token(s) that are
    // not an identifier followed by `in`/`from`/`matching`/`,`.
    let mut count = String::new();
    let words: Vec<&str> = s.split_whitespace().collect();
    if let Some(first) = words.first() {
        let is_kw = |w: &str| ["in", "from", "matching"].iter().any(|k| w.eq_ignore_ascii_case(k));
        let looks_var = first
            .split(',')
            .next()
            .is_some_and(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'));
        let first_is_count = !looks_var || first.starts_with("$(");
        if first_is_count && !is_kw(first) {
            count = first.to_string();
            s = s[first.len()..].trim_start();
        }
    }
    if s.is_empty() {
        return Ok((QueueStatement { count, vars: vec![], items: ItemSource::None }, 0));
    }
    // Variables up to the keyword.
    let lower = s.to_ascii_lowercase();
    let mut kw_pos = None;
    for kw in ["in", "from", "matching"] {
        let mut from = 0;
        while let Some(p) = lower[from..].find(kw) {
            let p = from + p;
            let before_ok = p == 0 || lower[..p].ends_with(|c: char| c.is_whitespace() || c == ',');
            let after = &lower[p + kw.len()..];
            let after_ok =
                after.is_empty() || after.starts_with(|c: char| c.is_whitespace() || c == '(');
            if before_ok && after_ok {
                if kw_pos.is_none_or(|(q, _): (usize, &str)| p < q) {
                    kw_pos = Some((p, kw));
                }
                break;
            }
            from = p + kw.len();
        }
    }
    let Some((p, kw)) = kw_pos else {
        return Err(format!(
            "bad queue statement: expected `in`, `from` or `matching` after {:?}",
            excerpt(s)
        ));
    };
    let vars: Vec<String> = s[..p]
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect();
    for v in &vars {
        if !valid_attr_name(v) {
            return Err(format!("bad queue statement: {v:?} is not a valid variable name"));
        }
    }
    let mut args = s[p + kw.len()..].trim();
    let mut what = MatchKind::Any;
    if kw == "matching" {
        if let Some(r) = keyword(args, "files") {
            what = MatchKind::Files;
            args = r;
        } else if let Some(r) = keyword(args, "dirs") {
            what = MatchKind::Dirs;
            args = r;
        }
    }
    // The list: `( ... )` inline, `(` then lines up to `)`, or bare words.
    let (list, consumed, parenthesised): (Vec<String>, usize, bool) =
        if let Some(inner) = args.strip_prefix('(') {
            if let Some(close) = inner.rfind(')') {
                if !inner[close + 1..].trim().is_empty() {
                    return Err(format!(
                        "bad queue statement: unexpected text after `)`: {:?}",
                        excerpt(&inner[close + 1..])
                    ));
                }
                (vec![inner[..close].to_string()], 0, true)
            } else {
                let mut rows = Vec::new();
                if !inner.trim().is_empty() {
                    rows.push(inner.to_string());
                }
                let mut n = 0;
                let mut closed = false;
                for l in following {
                    n += 1;
                    let t = l.trim();
                    if let Some(after) = t.strip_prefix(')') {
                        if !after.trim().is_empty() {
                            return Err(format!(
                                "bad queue statement: unexpected text after `)`: {:?}",
                                excerpt(after)
                            ));
                        }
                        closed = true;
                        break;
                    }
                    rows.push(l.strip_suffix('\r').unwrap_or(l).to_string());
                }
                if !closed {
                    return Err(
                        "bad queue statement: the item list `(` is never closed by `)`".to_string()
                    );
                }
                (rows, n, true)
            }
        } else {
            (vec![args.to_string()], 0, false)
        };
    let items = match kw {
        "in" => ItemSource::In(
            list.iter()
                .flat_map(|l| l.split(|c: char| c == ',' || c.is_whitespace()))
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect(),
        ),
        "from" if parenthesised => ItemSource::FromRows(
            list.iter()
                .flat_map(|l| l.split('\n'))
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string)
                .collect(),
        ),
        "from" => {
            let f = list.concat().trim().to_string();
            if f.is_empty() {
                return Err("bad queue statement: `from` needs a file name or `( rows )`".into());
            }
            ItemSource::FromFile(f)
        }
        _ => {
            let globs: Vec<String> = list
                .iter()
                .flat_map(|l| l.split(|c: char| c == ',' || c.is_whitespace()))
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect();
            if globs.is_empty() {
                return Err("bad queue statement: `matching` needs at least one pattern".into());
            }
            ItemSource::Matching { what, globs }
        }
    };
    if matches!(items, ItemSource::In(ref v) if v.is_empty()) && !parenthesised {
        return Err("bad queue statement: `in` needs a list of items".into());
    }
    Ok((QueueStatement { count, vars, items }, consumed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(text: &str) -> QueueStatement {
        let d = parse(text, "t.sub").unwrap();
        match d.statements.into_iter().last().unwrap().kind {
            StatementKind::Queue(q) => q,
            k => panic!("not a queue: {k:?}"),
        }
    }

    #[test]
    fn assignments_attrs_comments_and_continuations() {
        let d = parse(
            "# c\nExecutable = job.wasm\n+Project = \"x\"\nMY.Weight = 5\nargs = a \\\n  b\n\nqueue\n",
            "t.sub",
        )
        .unwrap();
        assert_eq!(d.statements.len(), 5);
        assert_eq!(
            d.statements[0],
            Statement {
                line: 2,
                kind: StatementKind::Assign { name: "Executable".into(), value: "job.wasm".into() }
            }
        );
        assert_eq!(
            d.statements[2].kind,
            StatementKind::Attr { name: "Weight".into(), value: "5".into() }
        );
        assert_eq!(
            d.statements[3],
            Statement {
                line: 5,
                kind: StatementKind::Assign { name: "args".into(), value: "a   b".into() }
            }
        );
        assert_eq!(d.statements[4].line, 8);
    }

    #[test]
    fn every_queue_form() {
        assert_eq!(queue("queue").count, "");
        assert_eq!(queue("Queue 5").count, "5");
        let q = queue("queue color in (red, green blue)");
        assert_eq!(q.vars, ["color"]);
        assert_eq!(q.items, ItemSource::In(vec!["red".into(), "green".into(), "blue".into()]));
        let q = queue("queue 2 x in (\n a\n b\n)\n");
        assert_eq!((q.count.as_str(), q.vars.len()), ("2", 1));
        assert_eq!(q.items, ItemSource::In(vec!["a".into(), "b".into()]));
        let q = queue("queue a,b from (\n  first, second value\n# skip\n third, fourth\n)");
        assert_eq!(q.vars, ["a", "b"]);
        assert_eq!(
            q.items,
            ItemSource::FromRows(vec!["first, second value".into(), "third, fourth".into()])
        );
        let q = queue("queue a b from (x y)");
        assert_eq!(q.items, ItemSource::FromRows(vec!["x y".into()]));
        assert_eq!(queue("queue from list.txt").items, ItemSource::FromFile("list.txt".into()));
        let q = queue("queue f matching files *.dat, *.txt");
        assert_eq!(
            q.items,
            ItemSource::Matching {
                what: MatchKind::Files,
                globs: vec!["*.dat".into(), "*.txt".into()]
            }
        );
        assert!(q.vars == ["f"]);
        let q = queue("queue matching (*.dat)");
        assert!(q.vars.is_empty());
        let q = queue("queue 3 in (a b)");
        assert_eq!(q.count, "3");
    }

    #[test]
    fn bad_queue_statements_name_the_line() {
        let e = parse("executable = x\nqueue 3 in (a b\n", "f.sub").unwrap_err();
        assert_eq!((e.kind(), e.line()), (ErrorKind::Queue, Some(2)));
        assert!(e.to_string().starts_with("f.sub:2: "), "{e}");
        assert!(parse("queue x y z", "f").is_err());
        assert!(parse("queue x in (a) junk", "f").is_err());
        let e = parse("a = 1\nthis is not a command\n", "f.sub").unwrap_err();
        assert_eq!((e.kind(), e.line()), (ErrorKind::Syntax, Some(2)));
    }
}
