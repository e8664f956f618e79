//! Regular expressions: `regexp`, `regexpMember`, `regexps`, `replace` and
//! `replaceAll`, patterns compiled as PCRE would see them (within the
//! evaluation's budget) and kept in a small per-thread cache.

use std::cell::RefCell;
use std::sync::Arc;

use super::FnEnv;
use super::values::{bytes_value, cstr};
use crate::value::Value;

/// PCRE options HTCondor passes.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct RegexFlags {
    pub(super) caseless: bool,
    pub(super) multiline: bool,
    pub(super) dotall: bool,
    pub(super) extended: bool,
}

impl RegexFlags {
    /// The option letters of `regexp()` and friends (lower case only, as
    /// HTCondor's `regexp_helper` checks them).
    fn from_options(opts: &str) -> RegexFlags {
        RegexFlags {
            caseless: opts.contains('i'),
            multiline: opts.contains('m'),
            dotall: opts.contains('s'),
            extended: opts.contains('x'),
        }
    }
}

/// Compiled patterns are shared, never cloned: a clone of a `Regex` starts
/// a cache of its own, which costs an allocation at its first search.
type RegexCache = Vec<(String, RegexFlags, Option<Arc<regex::bytes::Regex>>)>;

thread_local! {
    static REGEX_CACHE: RefCell<RegexCache> = const { RefCell::new(Vec::new()) };
}

/// The steps a pattern's compilation costs when it is not cached: the
/// compiled program is bounded ([`REGEX_PROGRAM_BYTES`]), so is its work.
const REGEX_COMPILE_STEPS: u64 = 256;

/// The largest compiled program a pattern may make. Matching time is
/// bounded by the program's size times the target's (the regex crate never
/// backtracks), so this and the cost of a search ([`search`]) bound the
/// time one match takes. Real patterns compile to a few kilobytes.
const REGEX_PROGRAM_BYTES: usize = 1 << 16;

/// Searches `t` for `re`, charging the work: one step per byte of the
/// target. `None` when the budget is spent.
pub(super) fn search(re: &regex::bytes::Regex, t: &[u8], env: &mut FnEnv<'_>) -> Option<bool> {
    if !env.budget.read(t.len() as u64 * crate::budget::BYTES_PER_STEP) {
        return None;
    }
    Some(re.is_match(t))
}

/// Compiles a pattern as PCRE would see it (byte-oriented, ASCII classes),
/// falling back to Unicode mode for patterns that need it; `None` for an
/// invalid (or unsupported) pattern, or when the budget cannot pay for
/// compiling it. Recently used patterns are cached.
pub(super) fn compile_regex(
    pattern: &str,
    flags: RegexFlags,
    env: &mut FnEnv<'_>,
) -> Option<Arc<regex::bytes::Regex>> {
    const CACHE_SIZE: usize = 64;
    // Only short patterns are kept: the cache's memory stays small whatever
    // patterns users write.
    const CACHED_PATTERN: usize = 1024;
    if let Some(hit) = REGEX_CACHE.with(|c| {
        c.borrow().iter().find(|(p, f, _)| p == pattern && *f == flags).map(|(_, _, r)| r.clone())
    }) {
        return hit;
    }
    if !env.budget.read(REGEX_COMPILE_STEPS * crate::budget::BYTES_PER_STEP) {
        return None;
    }
    let pat = std::str::from_utf8(cstr(pattern)).unwrap_or(pattern);
    let build = |unicode: bool| {
        regex::bytes::RegexBuilder::new(pat)
            .case_insensitive(flags.caseless)
            .multi_line(flags.multiline)
            .dot_matches_new_line(flags.dotall)
            .ignore_whitespace(flags.extended)
            .unicode(unicode)
            .size_limit(REGEX_PROGRAM_BYTES)
            .dfa_size_limit(1 << 18)
            .build()
            .ok()
    };
    let re = build(false).or_else(|| build(true)).map(Arc::new);
    if pattern.len() > CACHED_PATTERN {
        return re;
    }
    REGEX_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_SIZE {
            c.remove(0);
        }
        c.push((pattern.to_string(), flags, re.clone()));
    });
    re
}

/// Checks the arguments of the regex functions: error beats undefined;
/// the trailing options argument, when present, must be a string.
/// Returns the options string or the value to answer with.
fn regex_args(args: &[Value], fixed: usize) -> Result<String, Value> {
    if args.iter().any(Value::is_error) {
        return Err(Value::Error);
    }
    if args.iter().any(Value::is_undefined) {
        return Err(Value::Undefined);
    }
    match args.get(fixed) {
        None => Ok(String::new()),
        Some(Value::Str(o)) => Ok(o.to_string()),
        Some(_) => Err(Value::Error),
    }
}

/// `regexp(pattern, target [, options])`.
pub(super) fn regexp(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    if !(2..=3).contains(&args.len()) {
        return Value::Error;
    }
    let opts = match regex_args(args, 2) {
        Ok(o) => o,
        Err(v) => return v,
    };
    let (Value::Str(p), Value::Str(t)) = (&args[0], &args[1]) else { return Value::Error };
    regexp_helper(p, t, None, &opts, env)
}

/// `regexpMember(pattern, list [, options])`: true when an element
/// matches; undefined when none does but some element is undefined.
pub(super) fn regexp_member(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    if !(2..=3).contains(&args.len()) {
        return Value::Error;
    }
    let opts = match regex_args(args, 2) {
        Ok(o) => o,
        Err(v) => return v,
    };
    let (Value::Str(p), Value::List(items)) = (&args[0], &args[1]) else { return Value::Error };
    // Compiled once for the whole list; a pattern that does not compile
    // matches no element (each element's test is an error, skipped).
    let re = compile_regex(p, RegexFlags::from_options(&opts), env);
    if env.budget.is_spent() {
        return Value::Error;
    }
    let mut maybe_undefined = false;
    for e in items.iter() {
        match e {
            Value::Str(t) => {
                let Some(re) = &re else { continue };
                match search(re, cstr(t), env) {
                    Some(true) => return Value::Bool(true),
                    Some(false) => {}
                    None => return Value::Error,
                }
            }
            Value::Undefined => maybe_undefined = true,
            _ => return Value::Error,
        }
    }
    if maybe_undefined { Value::Undefined } else { Value::Bool(false) }
}

/// `regexps`, `replace` and `replaceall` (`extra` holds the option
/// letters the function name implies).
pub(super) fn subst_pattern(args: &[Value], env: &mut FnEnv<'_>, extra: &str) -> Value {
    if !(3..=4).contains(&args.len()) {
        return Value::Error;
    }
    let mut opts = match regex_args(args, 3) {
        Ok(o) => o,
        Err(v) => return v,
    };
    opts.push_str(extra);
    let (Value::Str(p), Value::Str(t), Value::Str(r)) = (&args[0], &args[1], &args[2]) else {
        return Value::Error;
    };
    regexp_helper(p, t, Some(r), &opts, env)
}

/// HTCondor's `regexp_helper`: a match test, or a substitution whose
/// result is only the substituted text unless `f` (full target) is given;
/// `g` substitutes every match. `\0`..`\9` in the replacement are groups;
/// a group the pattern did not reach is an error.
///
/// The substitution's result is built within the budget: a replacement
/// that repeats its groups many times over a long target is error before
/// it outgrows it.
fn regexp_helper(
    pattern: &str,
    target: &str,
    replace: Option<&str>,
    opts: &str,
    env: &mut FnEnv<'_>,
) -> Value {
    let flags = RegexFlags::from_options(opts);
    let Some(re) = compile_regex(pattern, flags, env) else { return Value::Error };
    let t = cstr(target);
    let Some(replace) = replace else {
        return search(&re, t, env).map_or(Value::Error, Value::Bool);
    };
    if !env.budget.read(t.len() as u64 * crate::budget::BYTES_PER_STEP) {
        return Value::Error;
    }
    let replace = cstr(replace);
    let full = opts.contains('f');
    let all = opts.contains('g');
    let mut out: Vec<u8> = Vec::new();
    let mut idx = 0usize;
    let mut empty_match = false;
    let mut locs = re.capture_locations();
    loop {
        if empty_match {
            // PCRE retries at the same place for a non-empty anchored match;
            // we treat that retry as failing (the usual outcome) and step
            // over one byte. At the end of the target HTCondor steps past
            // the terminator, and PCRE then rejects the offset: error.
            if idx >= t.len() {
                return Value::Error;
            }
            out.push(t[idx]);
            idx += 1;
            empty_match = false;
            continue;
        }
        let Some(m) = re.captures_read_at(&mut locs, t, idx) else { break };
        let ngroups = (0..locs.len()).rev().find(|&g| locs.get(g).is_some()).map_or(0, |g| g + 1);
        if full {
            out.extend_from_slice(&t[idx..m.start()]);
        }
        let mut k = 0;
        while k < replace.len() {
            let c = replace[k];
            if c == b'\\' && k + 1 < replace.len() && replace[k + 1].is_ascii_digit() {
                let g = (replace[k + 1] - b'0') as usize;
                if g >= ngroups {
                    return Value::Error;
                }
                if let Some((s, e)) = locs.get(g) {
                    if !env.fits(out.len() + (e - s)) {
                        return Value::Error;
                    }
                    out.extend_from_slice(&t[s..e]);
                }
                k += 2;
            } else {
                out.push(c);
                k += 1;
            }
        }
        if !env.fits(out.len()) {
            return Value::Error;
        }
        idx = m.end();
        if m.start() == m.end() {
            empty_match = true;
        }
        if !all {
            break;
        }
    }
    if full {
        out.extend_from_slice(&t[idx.min(t.len())..]);
    }
    bytes_value(&out)
}
