//! ClassAds as JSON, in HTCondor's form: literals are JSON values,
//! undefined is `null`, lists are arrays, nested ads are objects, and any
//! other expression is a string `"\/Expr(<expression>)\/"`. Also serde
//! support in the same form, and the oracle's value normalisation.

use std::sync::Arc;

use serde_json::{Map, Number, Value as Json};

use crate::ast::{ClassAd, Expr};
use crate::eval::Evaluator;
use crate::unparse::spaces;
use crate::value::Value;
use crate::{ParseError, parse_expr};

/// An error converting JSON to a ClassAd.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonError {
    /// The attribute path where it happened (`a.b[2]`).
    pub path: String,
    /// What was wrong.
    pub msg: String,
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.msg)
        } else {
            write!(f, "at `{}`: {}", self.path, self.msg)
        }
    }
}

impl std::error::Error for JsonError {}

/// An ad as a JSON value.
pub fn ad_to_json(ad: &ClassAd) -> Json {
    let mut m = Map::new();
    for (k, v) in ad.iter() {
        m.insert(k.as_str().to_string(), expr_to_json(v));
    }
    Json::Object(m)
}

fn expr_json_string(e: &Expr) -> Json {
    Json::String(format!("/Expr({e})/"))
}

/// The expression text of a JSON string of the form `/Expr(<text>)/`.
fn expr_text(s: &str) -> Option<&str> {
    s.strip_prefix("/Expr(").and_then(|r| r.strip_suffix(")/"))
}

/// An expression as a JSON value: literals natively, others as `/Expr(...)/`.
pub fn expr_to_json(e: &Expr) -> Json {
    match e {
        Expr::Lit(Value::Undefined) => Json::Null,
        Expr::Lit(Value::Bool(b)) => Json::Bool(*b),
        Expr::Lit(Value::Int(i)) => Json::Number((*i).into()),
        Expr::Lit(Value::Real(r)) => match Number::from_f64(*r) {
            Some(n) if *r != 0.0 || !r.is_sign_negative() => Json::Number(n),
            _ => expr_json_string(e),
        },
        // A string of that form would read back as an expression: it is
        // written as one, whose value is the string.
        Expr::Lit(Value::Str(s)) if expr_text(s).is_some() => expr_json_string(e),
        Expr::Lit(Value::Str(s)) => Json::String(s.to_string()),
        Expr::List(items) => Json::Array(items.iter().map(expr_to_json).collect()),
        Expr::Record(ad) => ad_to_json(ad),
        _ => expr_json_string(e),
    }
}

/// An ad as HTCondor's JSON text, laid out as classad2's `printJson`: two
/// spaces a level, empty objects and arrays opened and closed on lines of
/// their own, reals as `%.16G` (see [`crate::value::format_real_g16`]), and
/// the `\/Expr(...)\/` escaping HTCondor writes.
pub fn ad_to_json_string(ad: &ClassAd) -> String {
    let mut out = String::new();
    write_json(&mut out, &ad_to_json(ad), 0);
    out
}

fn write_json(out: &mut String, j: &Json, indent: usize) {
    stacker::maybe_grow(64 * 1024, 1024 * 1024, || match j {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (_, Some(u), _) => out.push_str(&u.to_string()),
            (_, _, Some(r)) => out.push_str(&crate::value::format_real_g16(r)),
            _ => out.push_str(&n.to_string()),
        },
        Json::String(s) => {
            let quoted = serde_json::to_string(s).unwrap_or_default();
            match expr_text(s) {
                Some(_) => {
                    // "/Expr(...)/" as "\/Expr(...)\/".
                    let inner = &quoted[7..quoted.len() - 3];
                    out.push_str("\"\\/Expr(");
                    out.push_str(inner);
                    out.push_str(")\\/\"");
                }
                None => out.push_str(&quoted),
            }
        }
        Json::Array(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                spaces(out, indent + 2);
                write_json(out, item, indent + 2);
            }
            close(out, !items.is_empty(), indent, ']');
        }
        Json::Object(m) => {
            out.push_str("{\n");
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                spaces(out, indent + 2);
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push_str(": ");
                write_json(out, v, indent + 2);
            }
            close(out, !m.is_empty(), indent, '}');
        }
    })
}

fn close(out: &mut String, any: bool, indent: usize, bracket: char) {
    if any {
        out.push('\n');
    }
    spaces(out, indent);
    out.push(bracket);
}

/// Parses HTCondor's JSON form of one ad.
pub fn ad_from_json_str(text: &str) -> Result<ClassAd, JsonError> {
    let j: Json = serde_json::from_str(text)
        .map_err(|e| JsonError { path: String::new(), msg: e.to_string() })?;
    ad_from_json(&j)
}

/// Parses HTCondor's JSON form of ads: one object, or an array of them
/// (what `condor_q -json` prints).
pub fn ads_from_json_str(text: &str) -> Result<Vec<ClassAd>, JsonError> {
    let j: Json = serde_json::from_str(text)
        .map_err(|e| JsonError { path: String::new(), msg: e.to_string() })?;
    match &j {
        Json::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                ad_from_json(item).map_err(|e| JsonError {
                    path: format!("[{i}]{}{}", if e.path.is_empty() { "" } else { "." }, e.path),
                    msg: e.msg,
                })
            })
            .collect(),
        _ => Ok(vec![ad_from_json(&j)?]),
    }
}

/// Converts a JSON object to an ad.
pub fn ad_from_json(j: &Json) -> Result<ClassAd, JsonError> {
    let Json::Object(m) = j else {
        return Err(JsonError { path: String::new(), msg: "expected a JSON object".into() });
    };
    let mut ad = ClassAd::new();
    for (k, v) in m {
        let e = expr_from_json(v, k, 0)?;
        ad.insert(k.as_str(), e);
    }
    Ok(ad)
}

fn expr_from_json(j: &Json, path: &str, depth: u32) -> Result<Expr, JsonError> {
    if depth > crate::parser::MAX_DEPTH {
        return Err(JsonError { path: path.into(), msg: "nested too deeply".into() });
    }
    Ok(match j {
        Json::Null => Expr::Lit(Value::Undefined),
        Json::Bool(b) => Expr::Lit(Value::Bool(*b)),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Expr::Lit(Value::Int(i)),
            None => Expr::Lit(Value::Real(n.as_f64().unwrap_or(f64::NAN))),
        },
        Json::String(s) => match expr_text(s) {
            Some(text) => parse_expr(text).map_err(|e: ParseError| JsonError {
                path: path.into(),
                msg: format!("bad expression: {e}"),
            })?,
            None => Expr::Lit(Value::string(s.as_str())),
        },
        Json::Array(items) => Expr::List(
            items
                .iter()
                .enumerate()
                .map(|(i, x)| expr_from_json(x, &format!("{path}[{i}]"), depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Json::Object(m) => {
            let mut ad = ClassAd::new();
            for (k, v) in m {
                ad.insert(k.as_str(), expr_from_json(v, &format!("{path}.{k}"), depth + 1)?);
            }
            Expr::Record(Arc::new(ad))
        }
    })
}

impl serde::Serialize for ClassAd {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ad_to_json(self).serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for ClassAd {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ClassAd, D::Error> {
        let j = Json::deserialize(d)?;
        ad_from_json(&j).map_err(serde::de::Error::custom)
    }
}

/// A value normalised as the oracle corpus encodes it:
/// `{"type": ..., "value": ...}`. Nested values are evaluated the way the
/// oracle did: list element *i* is `(<expr>)[i]` and ad attribute *a* is
/// `(<expr>).a`, in the same MY/TARGET context.
pub fn normalize(
    ev: &mut Evaluator,
    expr: &Expr,
    value: &Value,
    my: Option<&ClassAd>,
    target: Option<&ClassAd>,
) -> Json {
    normalize_at(ev, expr, value, my, target, 0)
}

fn normalize_at(
    ev: &mut Evaluator,
    expr: &Expr,
    value: &Value,
    my: Option<&ClassAd>,
    target: Option<&ClassAd>,
    depth: u32,
) -> Json {
    let tv = |t: &str, v: Json| {
        let mut m = Map::new();
        m.insert("type".into(), Json::String(t.into()));
        m.insert("value".into(), v);
        Json::Object(m)
    };
    if depth > 64 {
        return tv("too_deep", Json::Null);
    }
    match value {
        Value::Undefined => tv("undefined", Json::Null),
        Value::Error => tv("error", Json::Null),
        Value::Bool(b) => tv("bool", Json::Bool(*b)),
        Value::Int(i) => tv("int", Json::Number((*i).into())),
        Value::Real(r) => tv("real", real_json(*r)),
        Value::Str(s) => tv("string", Json::String(s.to_string())),
        Value::List(items) => {
            let paren = Expr::Paren(Arc::new(expr.clone()));
            let out = (0..items.len())
                .map(|i| {
                    let sub = Expr::Index(
                        Arc::new(paren.clone()),
                        Arc::new(Expr::Lit(Value::Int(i as i64))),
                    );
                    let v = ev.eval(&sub, my, target);
                    normalize_at(ev, &sub, &v, my, target, depth + 1)
                })
                .collect();
            tv("list", Json::Array(out))
        }
        Value::Ad(ad) => {
            let paren = Expr::Paren(Arc::new(expr.clone()));
            let mut m = Map::new();
            for (k, _) in ad.iter() {
                let sub = Expr::Select(Arc::new(paren.clone()), k.clone());
                let v = ev.eval(&sub, my, target);
                m.insert(k.as_str().to_string(), normalize_at(ev, &sub, &v, my, target, depth + 1));
            }
            tv("classad", Json::Object(m))
        }
    }
}

fn real_json(r: f64) -> Json {
    if r.is_nan() {
        Json::String("nan".into())
    } else if r.is_infinite() {
        Json::String(if r > 0.0 { "inf" } else { "-inf" }.into())
    } else {
        Number::from_f64(r).map_or(Json::Null, Json::Number)
    }
}

/// Parses an expression exactly as the oracle's reference did: one complete
/// expression, not ending in `;`. `None` is a parse error.
pub fn parse_oracle_expr(text: &str) -> Option<Expr> {
    if text.trim_end().ends_with(';') {
        return None;
    }
    parse_expr(text).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ads_from_json_take_an_object_or_an_array_of_them() {
        let one = ads_from_json_str(r#"{"A": 1, "B": "\/Expr(A + 1)\/"}"#).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].eval_attr("B"), Value::Int(2));
        let two = ads_from_json_str(r#"[{"A": 1}, {"A": 2}]"#).unwrap();
        assert_eq!(two.len(), 2);
        let bad = ads_from_json_str(r#"[{"A": 1}, 3]"#).unwrap_err();
        assert!(bad.to_string().starts_with("at `[1]`"), "{bad}");
    }

    use super::*;

    #[test]
    fn a_string_that_looks_like_an_expression_stays_a_string() {
        // Found by fuzzing: the string "/Expr(1 +)/" was written as itself,
        // which reads back as an expression (here a bad one).
        for s in ["/Expr(1 +)/", "/Expr(1)/", "/Expr()/", "/Expr(\"x\")/"] {
            let mut ad = ClassAd::new();
            ad.insert("n", Expr::Lit(Value::string(s)));
            let text = ad_to_json_string(&ad);
            assert_eq!(ad_from_json_str(&text), Ok(ad.clone()), "{s:?} as {text}");
            let serde: ClassAd =
                serde_json::from_str(&serde_json::to_string(&ad).unwrap()).unwrap();
            assert_eq!(serde, ad);
        }
        // Other strings are written as themselves.
        let ad = crate::parse_ad(r#"[a = "/Expr(1)"; b = "Expr(1)/"; c = "x"]"#).unwrap();
        assert_eq!(ad_to_json(&ad).to_string(), r#"{"a":"/Expr(1)","b":"Expr(1)/","c":"x"}"#);
    }
}
