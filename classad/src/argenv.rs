//! HTCondor's syntaxes for the `Arguments`/`Args` and `Environment`/`Env`
//! strings inside job ads.
//!
//! - **V2** (`Arguments`, `Environment`): words separated by white space; a
//!   single-quoted section is literal (white space included) and `''` inside
//!   it is one `'`. Double quotes are ordinary characters.
//! - **V1** (`Args`): words separated by white space, no quoting.
//! - **V1** (`Env`): `NAME=value` entries separated by `;`.

use std::fmt;

/// A malformed argument or environment string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgEnvError {
    /// What was wrong, and where.
    pub msg: String,
}

impl fmt::Display for ArgEnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for ArgEnvError {}

/// Splits a V2 string into words.
pub fn split_v2(s: &str) -> Result<Vec<String>, ArgEnvError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        None => {
                            return Err(ArgEnvError {
                                msg: format!("unbalanced single quote at byte {i} of {s:?}"),
                            });
                        }
                        Some((_, '\'')) => {
                            if matches!(chars.peek(), Some((_, '\''))) {
                                chars.next();
                                cur.push('\'');
                            } else {
                                break;
                            }
                        }
                        Some((_, ch)) => cur.push(ch),
                    }
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

/// Joins words into a V2 string that [`split_v2`] reads back.
pub fn join_v2<S: AsRef<str>>(words: &[S]) -> String {
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let w = w.as_ref();
        if w.is_empty() {
            out.push_str("''");
            continue;
        }
        for c in w.chars() {
            match c {
                '\'' => out.push_str("''''"),
                c if c.is_whitespace() => {
                    out.push('\'');
                    out.push(c);
                    out.push('\'');
                }
                c => out.push(c),
            }
        }
    }
    out
}

/// Splits a V1 `Args` string: white space separates, nothing quotes.
pub fn split_v1_args(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// Parses a V2 `Environment` string into `(name, value)` pairs.
pub fn parse_env_v2(s: &str) -> Result<Vec<(String, String)>, ArgEnvError> {
    split_v2(s)?.into_iter().map(|w| env_entry(&w)).collect()
}

/// Parses a V1 `Env` string (`A=1;B=2`) into `(name, value)` pairs.
pub fn parse_env_v1(s: &str) -> Result<Vec<(String, String)>, ArgEnvError> {
    s.split(';').filter(|e| !e.trim().is_empty()).map(|e| env_entry(e.trim())).collect()
}

fn env_entry(w: &str) -> Result<(String, String), ArgEnvError> {
    match w.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(ArgEnvError { msg: format!("environment entry {w:?} is not NAME=value") }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_words_quotes_and_literal_double_quotes() {
        // The oracle's `arguments = "-n 'hello world' ""quoted"" x"` lands in
        // the ad as this V2 string.
        assert_eq!(
            split_v2("-n hello' 'world \"quoted\" x").unwrap(),
            ["-n", "hello world", "\"quoted\"", "x"]
        );
        assert_eq!(split_v2("'it''s' ''").unwrap(), ["it's", ""]);
        assert_eq!(split_v2("  a   b ").unwrap(), ["a", "b"]);
        assert!(split_v2("'open").unwrap_err().msg.contains("unbalanced"));
    }

    #[test]
    fn v2_join_round_trips() {
        for words in [vec!["a b", "it's", "", "x\ty", "\"q\""], vec![]] {
            assert_eq!(split_v2(&join_v2(&words)).unwrap(), words);
        }
    }

    #[test]
    fn environments_in_both_syntaxes() {
        assert_eq!(
            parse_env_v2("A=1 B=two' 'words C=").unwrap(),
            [
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), String::new())
            ]
        );
        assert_eq!(
            parse_env_v1("A=1;B=two words").unwrap(),
            [("A".into(), "1".into()), ("B".into(), "two words".into())]
        );
        assert!(parse_env_v2("NOEQUALS").is_err());
        assert_eq!(split_v1_args(" -v  \\\"x "), ["-v", "\\\"x"]);
    }
}
