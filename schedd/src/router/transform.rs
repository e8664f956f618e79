//! Routes in HTCondor's job transform language, the form its manual gives
//! as the way forward: `JOB_ROUTER_ROUTE_NAMES` lists the routes in the
//! order they are considered, each `JOB_ROUTER_ROUTE_<name>` is a transform,
//! and `JOB_ROUTER_PRE_ROUTE_TRANSFORM_NAMES` /
//! `JOB_ROUTER_POST_ROUTE_TRANSFORM_NAMES` name `JOB_ROUTER_TRANSFORM_<name>`
//! transforms applied before and after every route.
//!
//! A transform is one statement a line (`#` starts a comment, a trailing
//! `\` continues a line):
//!
//! | statement | meaning |
//! | --- | --- |
//! | `NAME = value` | a macro; `GridResource`, `Requirements`, `MaxJobs`, `MaxIdleJobs`, `FailureRateThreshold`, `JobFailureTest`, `EditJobInPlace` and `OverrideRoutingEntry` are the route's own settings (as in the old syntax), any other is used as `$(NAME)` |
//! | `UNIVERSE u` | the copy's universe (a name such as `vanilla`, or a number; default grid) |
//! | `REQUIREMENTS expr` | which jobs may take the route |
//! | `SET attr expr` | sets the attribute |
//! | `DEFAULT attr expr` | sets it if it is missing or undefined |
//! | `EVALSET attr expr` | sets it to the expression's value |
//! | `COPY attr new`, `COPY /regex/ new` | copies (a `\1` in `new` is the regex's group) |
//! | `RENAME attr new`, `RENAME /regex/ new` | renames |
//! | `DELETE attr`, `DELETE /regex/` | deletes |
//!
//! Statements apply in the order written. `$(NAME)` in a statement is the
//! transform's macro, else the configuration's. What andes does not do
//! (`EVALMACRO`, `if`/`else`, `TRANSFORM`) is an error naming the line, and
//! the route is skipped.

use std::collections::HashMap;

use classad::{ClassAd, Expr, Value};

use super::Transform;

/// The most statements one transform may hold.
const MAX_STATEMENTS: usize = 10_000;

/// The macros that are a route's own settings, not attributes of the copy.
const ROUTE_SETTINGS: [&str; 8] = [
    "GridResource",
    "Requirements",
    "MaxJobs",
    "MaxIdleJobs",
    "FailureRateThreshold",
    "JobFailureTest",
    "EditJobInPlace",
    "OverrideRoutingEntry",
];

/// A parsed transform: the route's settings (as an old-syntax entry's
/// attributes) and its steps in order.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    /// `Name`, `GridResource`, `Requirements`, `TargetUniverse`, ...
    pub settings: ClassAd,
    /// The statements that change the copy, in order.
    pub steps: Vec<Transform>,
    /// Things ignored (settings that have no meaning in andes).
    pub warnings: Vec<String>,
}

/// HTCondor's universe names and numbers.
fn universe(word: &str) -> Option<i64> {
    if let Ok(n) = word.parse::<i64>() {
        return (1..=13).contains(&n).then_some(n);
    }
    Some(match word.to_ascii_lowercase().as_str() {
        "standard" => 1,
        "vanilla" => 5,
        "scheduler" => 7,
        "grid" => 9,
        "java" => 10,
        "parallel" => 11,
        "local" => 12,
        "vm" => 13,
        _ => return None,
    })
}

/// Expands `$(NAME)` from `local`, then `config`; an unknown macro is empty
/// (as in HTCondor's configuration). At most 64 rounds of nesting.
fn expand(
    text: &str,
    local: &HashMap<String, String>,
    config: &HashMap<String, String>,
) -> Result<String, String> {
    let mut out = text.to_string();
    for _ in 0..64 {
        let Some(start) = out.find("$(") else { return Ok(out) };
        let Some(len) = out[start + 2..].find(')') else {
            return Err(format!("`{text}`: a `$(` without its `)`"));
        };
        let name = &out[start + 2..start + 2 + len];
        let key = name.to_ascii_lowercase();
        let value = local.get(&key).or_else(|| config.get(&key)).cloned().unwrap_or_default();
        if out.len() + value.len() > 1 << 20 {
            return Err(format!("`{text}`: its macros expand past 1 MiB"));
        }
        out.replace_range(start..start + 3 + len, &value);
    }
    Err(format!("`{text}`: macros nested more than 64 deep"))
}

/// The names of the `$(NAME)` macros `text` uses (the configuration's
/// values of them are what a route may need beside its own).
pub fn macro_names(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("$(") {
        let Some(len) = rest[i + 2..].find(')') else { break };
        out.push(&rest[i + 2..i + 2 + len]);
        rest = &rest[i + 2 + len..];
    }
    out
}

fn expr(text: &str, what: &str) -> Result<Expr, String> {
    classad::parse_expr(text).map_err(|e| format!("{what} `{text}`: {e}"))
}

/// `ATTR rest` or `/regex/ rest`: the target of COPY, RENAME or DELETE.
enum Pattern {
    Attr(String),
    Regex(regex::Regex),
}

fn pattern(text: &str) -> Result<(Pattern, &str), String> {
    if let Some(body) = text.strip_prefix('/') {
        let end =
            body.find('/').ok_or_else(|| format!("`{text}`: the regex has no closing `/`"))?;
        let re = regex::RegexBuilder::new(&body[..end])
            .case_insensitive(true)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("`{}`: {e}", &body[..end]))?;
        return Ok((Pattern::Regex(re), body[end + 1..].trim()));
    }
    let (attr, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    if attr.is_empty() || classad::AttrName::new(attr).needs_quotes() {
        return Err(format!("`{attr}` is not an attribute name"));
    }
    Ok((Pattern::Attr(attr.to_string()), rest.trim()))
}

/// Parses the transform `text` of route `name` (`config` holds the
/// configuration's macros it may use).
pub fn parse(name: &str, text: &str, config: &HashMap<String, String>) -> Result<Parsed, String> {
    let mut p = Parsed::default();
    p.settings.insert_value(classad::name!("Name"), name);
    let mut local: HashMap<String, String> = HashMap::new();
    // Join continued lines first, keeping each statement's first line number.
    let mut statements: Vec<(usize, String)> = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let (n, mut acc) = open.take().unwrap_or((i + 1, String::new()));
        if let Some(body) = line.strip_suffix('\\') {
            acc.push_str(body);
            acc.push(' ');
            open = Some((n, acc));
            continue;
        }
        acc.push_str(line);
        if statements.len() >= MAX_STATEMENTS {
            return Err(format!("more than {MAX_STATEMENTS} statements"));
        }
        statements.push((n, acc));
    }
    if let Some(last) = open {
        statements.push(last);
    }
    for (n, statement) in statements {
        let s = statement.trim();
        if s.is_empty() || s.starts_with('#') {
            continue;
        }
        let at = |e: String| format!("line {n}: {e}");
        let (word, rest) = s.split_once(char::is_whitespace).unwrap_or((s, ""));
        let rest = rest.trim();
        // `NAME = value` (a macro), unless the word is a command.
        if let Some((lhs, value)) = s.split_once('=')
            && !lhs.trim().contains(char::is_whitespace)
            && !lhs.trim().is_empty()
        {
            let key = lhs.trim();
            let value = expand(value.trim(), &local, config).map_err(at)?;
            if let Some(setting) = ROUTE_SETTINGS.iter().find(|r| r.eq_ignore_ascii_case(key)) {
                let e = match classad::parse_expr(&value) {
                    Ok(e) => e,
                    // `GridResource = batch slurm`, unquoted, is its text.
                    Err(_) if setting.eq_ignore_ascii_case("GridResource") => {
                        Expr::from(Value::from(value.as_str()))
                    }
                    Err(e) => return Err(at(format!("{key} = {value}: {e}"))),
                };
                p.settings.insert(*setting, e);
            } else if super::IGNORED.iter().any(|i| i.eq_ignore_ascii_case(key))
                || key.eq_ignore_ascii_case("SendIDTokens")
            {
                p.warnings.push(format!("route `{name}`: {key} has no meaning in andes; ignored"));
            } else {
                local.insert(key.to_ascii_lowercase(), value);
            }
            continue;
        }
        let rest = expand(rest, &local, config).map_err(at)?;
        let split_attr = |rest: &str| -> Result<(String, String), String> {
            let (a, v) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let v = v.trim().strip_prefix('=').unwrap_or(v).trim();
            if a.is_empty() || classad::AttrName::new(a).needs_quotes() {
                return Err(format!("`{a}` is not an attribute name"));
            }
            if v.is_empty() {
                return Err(format!("{word} {a}: no value"));
            }
            Ok((a.to_string(), v.to_string()))
        };
        match word.to_ascii_uppercase().as_str() {
            "UNIVERSE" => {
                let u = universe(&rest).ok_or_else(|| at(format!("unknown universe `{rest}`")))?;
                p.settings.insert_value(classad::name!("TargetUniverse"), u);
            }
            "REQUIREMENTS" => {
                p.settings.insert(
                    classad::name!("Requirements"),
                    expr(&rest, "REQUIREMENTS").map_err(at)?,
                );
            }
            "SET" | "DEFAULT" | "EVALSET" => {
                let (a, v) = split_attr(&rest).map_err(at)?;
                let e = expr(&v, &format!("{word} {a}")).map_err(at)?;
                p.steps.push(match word.to_ascii_uppercase().as_str() {
                    "SET" => Transform::Set(a, e),
                    "DEFAULT" => Transform::Default(a, e),
                    _ => Transform::EvalSet(a, e),
                });
            }
            "COPY" | "RENAME" | "DELETE" => {
                let (target, to) = pattern(&rest).map_err(at)?;
                let delete = word.eq_ignore_ascii_case("DELETE");
                let to = to.strip_prefix('=').unwrap_or(to).trim().to_string();
                if !delete && to.is_empty() {
                    return Err(at(format!("{word} {rest}: the new name is missing")));
                }
                let rename = word.eq_ignore_ascii_case("RENAME");
                p.steps.push(match target {
                    Pattern::Attr(a) if delete => Transform::Delete(a),
                    Pattern::Attr(from) => Transform::CopyCurrent { from, to, rename },
                    Pattern::Regex(re) if delete => Transform::DeleteMatching(re),
                    Pattern::Regex(re) => Transform::CopyMatching { re, to, rename },
                });
            }
            "EVALMACRO" | "IF" | "ELIF" | "ELSE" | "ENDIF" | "TRANSFORM" | "NAME" => {
                return Err(at(format!("`{word}` is not supported by andes")));
            }
            _ => return Err(at(format!("`{s}` is not a transform statement"))),
        }
    }
    Ok(p)
}

/// Applies `COPY`/`RENAME /regex/ to` to `ad`: each matching attribute is
/// copied (or renamed) to `to` with `\N` replaced by the regex's groups.
pub(super) fn copy_matching(ad: &mut ClassAd, re: &regex::Regex, to: &str, rename: bool) {
    let found: Vec<(String, Expr)> = ad
        .iter()
        .filter(|(a, _)| re.is_match(a.as_str()))
        .map(|(a, e)| (a.as_str().to_string(), e.clone()))
        .collect();
    for (a, e) in found {
        let Some(caps) = re.captures(&a) else { continue };
        let mut name = String::new();
        let mut chars = to.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, chars.peek().and_then(|d| d.to_digit(10))) {
                ('\\', Some(d)) => {
                    chars.next();
                    name.push_str(caps.get(d as usize).map_or("", |m| m.as_str()));
                }
                (c, _) => name.push(c),
            }
        }
        if name.is_empty() || classad::AttrName::new(&name).needs_quotes() {
            continue;
        }
        if rename {
            ad.remove(&a);
        }
        ad.insert(name.as_str(), e);
    }
}
