//! Environment and argument strings, as HTCondor's Env and ArgList read and
//! write them: `envV1ToV2`, `mergeEnvironment`, `argsToList`, `listToArgs`.

use std::collections::BTreeMap;

use super::FnEnv;
use super::values::{bytes_value, cstr};
use crate::value::Value;

/// An environment: variables in byte order; `None` marks an entry kept
/// verbatim without `=` (an unexpanded `$$()` macro).
type EnvTable = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// HTCondor's `Env::SetEnvWithErrorMessage` on one `name=value` entry.
fn env_set(env: &mut EnvTable, entry: &[u8]) -> bool {
    if entry.is_empty() {
        return false;
    }
    match entry.iter().position(|&c| c == b'=') {
        None if entry.windows(2).any(|w| w == b"$$") => {
            env.insert(entry.to_vec(), None);
            true
        }
        None | Some(0) => false,
        Some(eq) => {
            env.insert(entry[..eq].to_vec(), Some(entry[eq + 1..].to_vec()));
            true
        }
    }
}

/// The V2 (raw) form of an environment: quoted entries joined by spaces.
fn env_to_v2(env: &EnvTable) -> Value {
    let mut out = Vec::new();
    for (k, v) in env {
        let mut entry = k.clone();
        if let Some(v) = v {
            entry.push(b'=');
            entry.extend_from_slice(v);
        }
        append_arg(&entry, &mut out);
    }
    bytes_value(&out)
}

/// HTCondor's `append_arg`: V2 argument quoting with single quotes.
fn append_arg(arg: &[u8], result: &mut Vec<u8>) {
    if !result.is_empty() {
        result.push(b' ');
    }
    if arg.is_empty() {
        result.extend_from_slice(b"''");
    }
    for &c in arg {
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\'') {
            if result.last() == Some(&b'\'') {
                result.pop();
            } else {
                result.push(b'\'');
            }
            if c == b'\'' {
                result.push(b'\'');
            }
            result.push(c);
            result.push(b'\'');
        } else {
            result.push(c);
        }
    }
}

/// HTCondor's `split_args` (V2 syntax): white space separates, single
/// quotes group, a doubled quote inside quotes is a quote. `None` for an
/// unbalanced quote.
fn split_args(s: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut parsed = false;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'\'' => {
                parsed = true;
                i += 1;
                loop {
                    match s.get(i) {
                        None => return None,
                        Some(b'\'') if s.get(i + 1) == Some(&b'\'') => {
                            buf.push(b'\'');
                            i += 2;
                        }
                        Some(b'\'') => {
                            i += 1;
                            break;
                        }
                        Some(&c) => {
                            buf.push(c);
                            i += 1;
                        }
                    }
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                if parsed {
                    parsed = false;
                    out.push(std::mem::take(&mut buf));
                }
            }
            c => {
                parsed = true;
                buf.push(c);
                i += 1;
            }
        }
    }
    if parsed {
        out.push(buf);
    }
    Some(out)
}

/// `envV1ToV2(env)`: an old-syntax (`;`-separated) environment in the
/// new syntax; undefined stays undefined.
pub(super) fn env_v1_to_v2(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    let s = match v {
        Value::Undefined => return Value::Undefined,
        Value::Str(s) => cstr(s),
        _ => return Value::Error,
    };
    let mut env = EnvTable::new();
    if s.is_empty() {
        return env_to_v2(&env);
    }
    let mut delim = b';';
    let mut input = s;
    let first = s[0];
    if first == delim {
        input = &s[1..];
    } else if b"!#$%&*+,-/:;<>?@^`|~\x1F".contains(&first) {
        delim = first;
        input = &s[1..];
    }
    let mut pos = 0;
    while pos < input.len() {
        while pos < input.len() && matches!(input[pos], b' ' | b'\t' | b'\n' | b'\r') {
            pos += 1;
        }
        let mut entry = Vec::new();
        while pos < input.len() {
            let c = input[pos];
            pos += 1;
            if c == b'\n' || c == delim {
                break;
            }
            entry.push(c);
        }
        if !entry.is_empty() && !env_set(&mut env, &entry) {
            return Value::Error;
        }
    }
    env_to_v2(&env)
}

/// `mergeEnvironment(env1, ...)`: V2 environments merged, later wins;
/// undefined arguments are skipped.
pub(super) fn merge_environment(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let mut env = EnvTable::new();
    for a in args {
        let s = match a {
            Value::Undefined => continue,
            Value::Str(s) => cstr(s),
            _ => return Value::Error,
        };
        let Some(entries) = split_args(s) else { return Value::Error };
        for e in entries {
            if !env_set(&mut env, &e) {
                return Value::Error;
            }
        }
    }
    env_to_v2(&env)
}

/// The optional syntax-version argument of `argsToList`/`listToArgs`.
fn args_version(args: &[Value]) -> Option<i32> {
    match args.get(1) {
        None => Some(2),
        Some(Value::Int(v)) => Some(*v as i32).filter(|v| *v == 1 || *v == 2),
        Some(_) => None,
    }
}

/// `argsToList(args [, version])`: an argument string as a list.
pub(super) fn args_to_list(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    if !(1..=2).contains(&args.len()) {
        return Value::Error;
    }
    let Some(version) = args_version(args) else { return Value::Error };
    let Value::Str(s) = &args[0] else { return Value::Error };
    let s = cstr(s);
    let parts = if version == 1 {
        s.split(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
            .filter(|p| !p.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    } else {
        match split_args(s) {
            Some(p) => p,
            None => return Value::Error,
        }
    };
    Value::list(parts.iter().map(|p| bytes_value(p)).collect())
}

/// `listToArgs(list [, version])`: a list of strings as an argument string.
pub(super) fn list_to_args(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    if !(1..=2).contains(&args.len()) {
        return Value::Error;
    }
    let Some(version) = args_version(args) else { return Value::Error };
    let Value::List(items) = &args[0] else { return Value::Error };
    let mut out = Vec::new();
    for e in items.iter() {
        let Value::Str(s) = e else { return Value::Error };
        let s = cstr(s);
        if version == 1 {
            if s.iter().any(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')) {
                return Value::Error;
            }
            if !out.is_empty() {
                out.push(b' ');
            }
            out.extend_from_slice(s);
        } else {
            append_arg(s, &mut out);
        }
    }
    bytes_value(&out)
}
