//! What an expression refers to in an ad, and the expression partly
//! evaluated in it: HTCondor's `GetExternalReferences` /
//! `GetInternalReferences` (full names) and `Flatten`, which classad2
//! offers as `ClassAd.externalRefs`, `internalRefs` and `flatten`.

use std::collections::HashSet;
use std::sync::Arc;

use crate::ast::{AttrName, BinOp, ClassAd, Expr, Special};
use crate::eval::Evaluator;
use crate::value::Value;

/// How deep the walks go (the parser bounds what it makes well below this;
/// a hand-built tree past it is left as it is).
const MAX_DEPTH: usize = 512;

/// The attributes `expr` refers to that `ad` defines (`internal`) and those
/// it does not (`external`), through the definitions of the ones it does:
/// in `B = A + X`, `B` refers to `A` (internal) and `X` (external).
/// `MY.x`, `TARGET.x` and `base.x` with `base` undefined are external, by
/// their full names; `base.x` with `base` defined counts `base` as internal.
/// Each list is sorted (case-insensitively) with no name twice.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Refs {
    /// Names the ad defines.
    pub internal: Vec<String>,
    /// Names it does not.
    pub external: Vec<String>,
}

/// [`Refs`] of `expr` in `ad`.
pub fn refs(ad: &ClassAd, expr: &Expr) -> Refs {
    let mut w = RefWalk { ad, seen: HashSet::new(), internal: Vec::new(), external: Vec::new() };
    w.walk(expr, &[], 0);
    Refs { internal: sorted(w.internal), external: sorted(w.external) }
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort_by(|a, b| crate::eval::cmp_ignore_case(a, b));
    names.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    names
}

struct RefWalk<'a> {
    ad: &'a ClassAd,
    /// Attributes of the ad whose definitions have been walked.
    seen: HashSet<String>,
    internal: Vec<String>,
    external: Vec<String>,
}

impl<'a> RefWalk<'a> {
    /// `local`: the records `expr` sits in (their names are neither).
    fn walk(&mut self, expr: &'a Expr, local: &[&'a ClassAd], depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        match expr {
            Expr::Attr { name, .. } => self.name(name, local, depth),
            Expr::Select(base, name) => match base.unparen() {
                Expr::Attr { name: b, .. } if b.special() == Special::None => {
                    if local.iter().any(|r| r.lookup(b).is_some()) {
                    } else if self.ad.lookup(b).is_some() {
                        self.internal.push(b.as_str().to_string());
                    } else {
                        self.external.push(format!("{}.{}", b.as_str(), name.as_str()));
                    }
                }
                Expr::Attr { name: b, .. } if b.special() != Special::CurrentTime => {
                    self.external.push(format!("{}.{}", b.as_str(), name.as_str()));
                }
                other => self.walk(other, local, depth + 1),
            },
            Expr::Record(r) => {
                let mut inner = local.to_vec();
                inner.push(r);
                for (_, e) in r.iter() {
                    self.walk(e, &inner, depth + 1);
                }
            }
            _ => {
                let mut ops = Vec::new();
                expr.push_operands(&mut ops);
                for e in ops {
                    self.walk(e, local, depth + 1);
                }
            }
        }
    }

    fn name(&mut self, name: &AttrName, local: &[&'a ClassAd], depth: usize) {
        if name.special() != Special::None || local.iter().any(|r| r.lookup(name).is_some()) {
            return;
        }
        match self.ad.lookup(name) {
            Some(def) => {
                self.internal.push(name.as_str().to_string());
                if self.seen.insert(name.as_str().to_ascii_lowercase()) {
                    self.walk(def, &[], depth + 1);
                }
            }
            None => self.external.push(name.as_str().to_string()),
        }
    }
}

/// `expr` partly evaluated in `ad` (HTCondor's flatten): what refers only
/// to attributes the ad defines (and to none of `MY.`, `TARGET.` and the
/// like) is evaluated to its value; the rest is kept, its parts flattened.
/// A reference to an attribute that cannot be evaluated stays a reference.
/// `&&`, `||` and `?:` whose deciding operand is known are decided
/// (`true && X` is `X`, `X && false` is `false`); in `+` and `*` a literal
/// comes first and literals meeting are combined (`X * 2 * 3` is `6 * X`).
pub fn flatten(ad: &ClassAd, expr: &Expr) -> Expr {
    Flattener { ad, ev: Evaluator::new() }.flat(expr, 0)
}

struct Flattener<'a> {
    ad: &'a ClassAd,
    ev: Evaluator,
}

impl Flattener<'_> {
    fn flat(&mut self, expr: &Expr, depth: usize) -> Expr {
        if depth > MAX_DEPTH {
            return expr.clone();
        }
        if let Expr::Lit(_) = expr {
            return expr.clone();
        }
        if refs(self.ad, expr).external.is_empty() {
            return Expr::from(self.ev.eval(expr, Some(self.ad), None));
        }
        let f = |s: &mut Self, e: &Arc<Expr>| Arc::new(s.flat(e, depth + 1));
        match expr {
            Expr::Binary(op, l, r) => {
                let (l, r) = (f(self, l), f(self, r));
                self.binary(*op, l, r)
            }
            Expr::Cond(c, a, b) => {
                let c = f(self, c);
                match c.as_literal() {
                    Some(Value::Bool(true)) => self.flat(a, depth + 1),
                    Some(Value::Bool(false)) => self.flat(b, depth + 1),
                    _ => Expr::Cond(c, f(self, a), f(self, b)),
                }
            }
            Expr::Paren(x) => {
                let x = f(self, x);
                match x.as_ref() {
                    Expr::Lit(v) => Expr::Lit(v.clone()),
                    _ => Expr::Paren(x),
                }
            }
            Expr::Unary(op, x) => Expr::Unary(*op, f(self, x)),
            Expr::Elvis(a, b) => Expr::Elvis(f(self, a), f(self, b)),
            Expr::Index(a, b) => Expr::Index(f(self, a), f(self, b)),
            Expr::List(items) => {
                Expr::List(items.iter().map(|i| self.flat(i, depth + 1)).collect())
            }
            Expr::Call(c) => {
                let mut c = (**c).clone();
                c.args = c.args.iter().map(|a| self.flat(a, depth + 1)).collect();
                Expr::Call(Arc::new(c))
            }
            // References the ad cannot evaluate, selections and records stay.
            _ => expr.clone(),
        }
    }

    fn binary(&mut self, op: BinOp, l: Arc<Expr>, r: Arc<Expr>) -> Expr {
        let (lv, rv) = (l.as_literal().cloned(), r.as_literal().cloned());
        match (op, &lv, &rv) {
            (BinOp::And, Some(Value::Bool(false)), _)
            | (BinOp::And, _, Some(Value::Bool(false))) => {
                return Expr::Lit(Value::Bool(false));
            }
            (BinOp::Or, Some(Value::Bool(true)), _) | (BinOp::Or, _, Some(Value::Bool(true))) => {
                return Expr::Lit(Value::Bool(true));
            }
            (BinOp::And, Some(Value::Bool(true)), _) | (BinOp::Or, Some(Value::Bool(false)), _) => {
                return unwrap(r);
            }
            _ => {}
        }
        if matches!(op, BinOp::Add | BinOp::Mul) {
            // The literal first; two literals meeting across the operator combined.
            let (lit, other) = match (lv, rv) {
                (Some(v), None) if is_number(&v) => (v, r),
                (None, Some(v)) if is_number(&v) => (v, l),
                _ => return Expr::Binary(op, l, r),
            };
            if let Expr::Binary(inner, a, b) = other.as_ref()
                && *inner == op
                && let Some(v) = a.as_literal().filter(|v| is_number(v))
            {
                let combined = crate::eval::binary_op(op, &lit, v);
                return Expr::Binary(op, Arc::new(Expr::Lit(combined)), b.clone());
            }
            return Expr::Binary(op, Arc::new(Expr::Lit(lit)), other);
        }
        Expr::Binary(op, l, r)
    }
}

fn is_number(v: &Value) -> bool {
    matches!(v, Value::Int(_) | Value::Real(_))
}

fn unwrap(e: Arc<Expr>) -> Expr {
    Arc::try_unwrap(e).unwrap_or_else(|e| (*e).clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_ad, parse_expr};

    fn ad() -> ClassAd {
        parse_ad("[A = 1; B = A + X; C = Y; D = C + 1; S = \"s\"; R = [q = 1]; M = 2]").unwrap()
    }

    fn refs_of(text: &str) -> (Vec<String>, Vec<String>) {
        let r = refs(&ad(), &parse_expr(text).unwrap());
        (r.internal, r.external)
    }

    fn flat(text: &str) -> String {
        flatten(&ad(), &parse_expr(text).unwrap()).to_string()
    }

    #[test]
    fn references_through_definitions_by_full_name() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(refs_of("B"), (v(&["A", "B"]), v(&["X"])));
        assert_eq!(refs_of("D"), (v(&["C", "D"]), v(&["Y"])));
        assert_eq!(refs_of("C + X"), (v(&["C"]), v(&["X", "Y"])));
        assert_eq!(
            refs_of("A + X + B + MY.S + TARGET.T + foo.bar"),
            (v(&["A", "B"]), v(&["foo.bar", "MY.S", "TARGET.T", "X"]))
        );
        assert_eq!(refs_of("R.q"), (v(&["R"]), v(&[])));
        assert_eq!(refs_of("strcat(S, Q) + {A, q}"), (v(&["A", "S"]), v(&["Q"])));
        // A nested record's own names are its own.
        assert_eq!(refs_of("[z = Q; w = z]"), (v(&[]), v(&["Q"])));
        assert_eq!(refs_of("1"), (v(&[]), v(&[])));
    }

    #[test]
    fn a_cycle_is_walked_once() {
        let ad = parse_ad("[A = B; B = A + Z]").unwrap();
        let r = refs(&ad, &parse_expr("A").unwrap());
        assert_eq!((r.internal.len(), r.external), (2, vec!["Z".to_string()]));
    }

    #[test]
    fn flatten_evaluates_what_it_can() {
        assert_eq!(flat("M * 1024 * 1024"), "2097152");
        assert_eq!(flat("Zed * 1024 * 1024"), "1048576 * Zed");
        assert_eq!(flat("A + X + 2 * 3"), "7 + X");
        assert_eq!(flat("X + 1"), "1 + X");
        assert_eq!(flat("X - 1 - 2"), "X - 1 - 2");
        assert_eq!(flat("B * 2"), "2 * B");
        assert_eq!(flat("A > 0 && X"), "X");
        assert_eq!(flat("X && false"), "false");
        assert_eq!(flat("true || X"), "true");
        assert_eq!(flat("A == 1 ? X : Y"), "X");
        assert_eq!(flat("A == 2 ? X : Y"), "Y");
        assert_eq!(flat("strcat(S, \"x\")"), "\"sx\"");
        assert_eq!(flat("{A, X}"), "{ 1,X }");
        assert_eq!(flat("R.q"), "1");
        assert_eq!(flat("(A + 1) * X"), "2 * X");
        assert_eq!(flat("TARGET.A + 1"), "1 + TARGET.A");
        assert_eq!(flat("MY.A + 1"), "1 + MY.A");
        assert_eq!(flat("(X + A) / 2"), "(1 + X) / 2");
        assert_eq!(flat("undefined"), "undefined");
    }

    #[test]
    fn a_cycle_flattens_to_what_evaluating_it_gives() {
        let ad = parse_ad("[A = B + 1; B = A + 1]").unwrap();
        let a = ad.eval_attr("A").to_string();
        assert_eq!(flatten(&ad, &parse_expr("A + X").unwrap()).to_string(), format!("{a} + X"));
    }
}
