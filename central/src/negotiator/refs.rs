//! An expression walker: which attributes an expression can read, and from
//! which side of a match.
//!
//! HTCondor's scoping in a match (default, non-strict semantics): `MY.x` and
//! `.x` read the current ad; `TARGET.x` (or `other.x`) the other ad; a plain
//! name reads the current ad when it has the attribute, else the other ad.
//! Some expressions cannot be analysed (a bare `TARGET` or `MY`, `eval()` of
//! a string, a nested record): those are *opaque*, and callers must assume
//! that any attribute matters.

use std::collections::BTreeSet;

use classad::ast::Special;
use classad::{AttrName, ClassAd, Expr};

/// What one ad's expressions read, after following the ad's own attributes.
#[derive(Debug, Default, Clone)]
pub struct Closure {
    /// Names (lowercase) read from the other ad of the match.
    pub other: BTreeSet<String>,
    /// Something was read that the walker cannot name.
    pub opaque: bool,
}

/// What one ad's expressions read, as borrowed names (no allocation per
/// name), in the order first seen, each once.
#[derive(Debug, Default)]
pub struct Names<'a> {
    /// Read from this ad, whether it has them or not.
    pub local: Vec<&'a AttrName>,
    /// Read from the other ad of the match.
    pub other: Vec<&'a AttrName>,
    /// Something was read that the walker cannot name.
    pub opaque: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    My,
    Target,
    Opaque,
    Time,
}

/// The side of a match a special name stands for (classad's own
/// classification, made when the name was parsed).
fn scope_of(name: &AttrName) -> Option<Scope> {
    match name.special() {
        Special::None => None,
        Special::My | Special::SelfAd | Special::Ad => Some(Scope::My),
        Special::Target | Special::Other => Some(Scope::Target),
        Special::Parent | Special::Root => Some(Scope::Opaque),
        Special::CurrentTime => Some(Scope::Time),
    }
}

/// Functions whose arguments name attributes as strings.
const OPAQUE_FUNCTIONS: [&str; 2] = ["eval", "evalineachcontext"];

/// Where a direct reference of an expression points.
enum Ref<'e> {
    My(&'e AttrName),
    Target(&'e AttrName),
    Plain(&'e AttrName),
    Opaque,
}

fn refs<'e>(expr: &'e Expr, stack: &mut Vec<&'e Expr>, mut f: impl FnMut(Ref<'e>)) {
    stack.clear();
    stack.push(expr);
    while let Some(e) = stack.pop() {
        match e {
            Expr::Lit(_) => {}
            Expr::Attr { name, absolute } => {
                if *absolute {
                    f(Ref::My(name));
                    continue;
                }
                match scope_of(name) {
                    Some(Scope::Time) => {}
                    // A whole ad used as a value.
                    Some(_) => f(Ref::Opaque),
                    None => f(Ref::Plain(name)),
                }
            }
            Expr::Select(base, name) => match base.unparen() {
                Expr::Attr { name: scope, absolute: false } => match scope_of(scope) {
                    Some(Scope::My) => f(Ref::My(name)),
                    Some(Scope::Target) => f(Ref::Target(name)),
                    Some(Scope::Opaque) | Some(Scope::Time) => f(Ref::Opaque),
                    // `record.x` where `record` is an attribute: the
                    // attribute is read; what it selects is its own.
                    None => f(Ref::Plain(scope)),
                },
                other => stack.push(other),
            },
            Expr::Call(c) => {
                if OPAQUE_FUNCTIONS.iter().any(|n| n.eq_ignore_ascii_case(&c.name)) {
                    f(Ref::Opaque);
                }
                e.push_operands(stack);
            }
            // Names inside a record resolve in the record first: too subtle
            // to follow; say so.
            Expr::Record(_) => f(Ref::Opaque),
            Expr::Unary(..)
            | Expr::Paren(_)
            | Expr::Binary(..)
            | Expr::Elvis(..)
            | Expr::Index(..)
            | Expr::Cond(..)
            | Expr::List(_) => e.push_operands(stack),
        }
    }
}

fn push_once<'a>(v: &mut Vec<&'a AttrName>, n: &'a AttrName) {
    if !v.contains(&n) {
        v.push(n);
    }
}

/// Follows `seeds` (attribute names of `ad`) and `exprs` (expressions
/// evaluated with `ad` as MY) through `ad`'s own attributes.
pub fn names<'a>(ad: &'a ClassAd, seeds: &'a [AttrName], exprs: &[&'a Expr]) -> Names<'a> {
    let mut out = Names::default();
    let mut work: Vec<&'a AttrName> = Vec::new();
    let mut stack = Vec::new();
    let mut absorb = |e: &'a Expr, out: &mut Names<'a>, work: &mut Vec<&'a AttrName>| {
        refs(e, &mut stack, |r| match r {
            Ref::My(n) => work.push(n),
            Ref::Target(n) => push_once(&mut out.other, n),
            Ref::Plain(n) => {
                if ad.lookup(n).is_some() {
                    work.push(n);
                } else {
                    push_once(&mut out.other, n);
                }
            }
            Ref::Opaque => out.opaque = true,
        })
    };
    for e in exprs {
        absorb(e, &mut out, &mut work);
    }
    work.extend(seeds.iter().rev());
    while let Some(n) = work.pop() {
        if out.local.contains(&n) {
            continue;
        }
        out.local.push(n);
        if let Some(e) = ad.lookup(n) {
            absorb(e, &mut out, &mut work);
        }
    }
    out
}

/// [`names`] as owned, lowercase, sorted sets.
pub fn closure<'a>(
    ad: &ClassAd,
    seeds: impl IntoIterator<Item = &'a str>,
    exprs: impl IntoIterator<Item = &'a Expr>,
) -> Closure {
    let seeds: Vec<AttrName> = seeds.into_iter().map(AttrName::new).collect();
    let exprs: Vec<&Expr> = exprs.into_iter().collect();
    let n = names(ad, &seeds, &exprs);
    Closure {
        other: n.other.iter().map(|n| n.as_str().to_ascii_lowercase()).collect(),
        opaque: n.opaque,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_own_attributes_and_splits_sides() {
        let ad = classad::parse_ad(
            "[Requirements = START && IS_VALID; START = TARGET.RequestMemory <= Memory && Foo; \
             IS_VALID = MY.Bar =!= undefined; Memory = 10; Rank = TARGET.Mips + KFlops]",
        )
        .unwrap();
        let seeds = [AttrName::new("Requirements"), AttrName::new("Rank")];
        let local: Vec<String> =
            names(&ad, &seeds, &[]).local.iter().map(|n| n.as_str().to_ascii_lowercase()).collect();
        for n in ["requirements", "start", "is_valid", "memory", "bar", "rank"] {
            assert!(local.contains(&n.to_string()), "{n} local: {local:?}");
        }
        let c = closure(&ad, ["Requirements", "Rank"], []);
        for n in ["requestmemory", "foo", "mips", "kflops"] {
            assert!(c.other.contains(n), "{n} other: {c:?}");
        }
        assert!(!c.opaque);
    }

    #[test]
    fn whole_ad_and_eval_are_opaque() {
        let ad = classad::parse_ad("[Requirements = eval(\"x\") ; Rank = size(TARGET)]").unwrap();
        assert!(closure(&ad, ["Requirements"], []).opaque);
        assert!(closure(&ad, ["Rank"], []).opaque);
        let ad = classad::parse_ad("[Requirements = CurrentTime > 5]").unwrap();
        assert!(!closure(&ad, ["Requirements"], []).opaque);
    }
}
