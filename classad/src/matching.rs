//! Matchmaking: the symmetric match, Rank, and an analysis of why two ads
//! do not match (`condor_q -better-analyze` is the model).

use std::sync::OnceLock;

use crate::ast::{AttrName, BinOp, ClassAd, Expr};
use crate::eval::Evaluator;
use crate::value::Value;

/// True when `ad`'s Requirements hold with MY = `ad` and TARGET = `other`:
/// a boolean true or a non-zero number. Undefined, error, a string or a
/// missing Requirements do not match (HTCondor's `matches`).
pub fn requirements_hold(ev: &mut Evaluator, ad: &ClassAd, other: &ClassAd) -> bool {
    match ad.lookup(name(&REQUIREMENTS, "Requirements")) {
        Some(e) => ev.eval(e, Some(ad), Some(other)).as_bool() == Some(true),
        None => false,
    }
}

static REQUIREMENTS: OnceLock<AttrName> = OnceLock::new();
static RANK: OnceLock<AttrName> = OnceLock::new();

/// The name, made once: each match looks it up in two ads.
fn name<'a>(cell: &'a OnceLock<AttrName>, text: &str) -> &'a AttrName {
    cell.get_or_init(|| AttrName::new(text))
}

/// True when each ad's Requirements hold against the other.
pub fn symmetric_match_with(ev: &mut Evaluator, a: &ClassAd, b: &ClassAd) -> bool {
    requirements_hold(ev, a, b) && requirements_hold(ev, b, a)
}

/// [`symmetric_match_with`] with a fresh evaluator of default semantics.
pub fn symmetric_match(a: &ClassAd, b: &ClassAd) -> bool {
    symmetric_match_with(&mut Evaluator::new(), a, b)
}

/// `ad`'s Rank of `other`, as the negotiator uses it: a number, or 0.0
/// when Rank is missing or not numeric.
pub fn rank_with(ev: &mut Evaluator, ad: &ClassAd, other: &ClassAd) -> f64 {
    match ad.lookup(name(&RANK, "Rank")) {
        Some(e) => match ev.eval(e, Some(ad), Some(other)) {
            Value::Int(i) => i as f64,
            Value::Real(r) => r,
            Value::Bool(b) => b as i64 as f64,
            _ => 0.0,
        },
        None => 0.0,
    }
}

/// [`rank_with`] with a fresh evaluator of default semantics.
pub fn rank(ad: &ClassAd, other: &ClassAd) -> f64 {
    rank_with(&mut Evaluator::new(), ad, other)
}

/// One top-level clause of a Requirements expression and its value.
#[derive(Debug, Clone)]
pub struct Clause {
    /// The clause's text.
    pub text: String,
    /// Its value against the other ad.
    pub value: Value,
}

impl Clause {
    /// True when the clause holds.
    pub fn holds(&self) -> bool {
        self.value.as_bool() == Some(true)
    }
}

/// Why one side's Requirements hold or fail.
#[derive(Debug, Clone)]
pub struct SideAnalysis {
    /// The whole Requirements value (undefined when missing).
    pub value: Value,
    /// True when Requirements is present.
    pub present: bool,
    /// Each top-level `&&` clause with its value.
    pub clauses: Vec<Clause>,
}

impl SideAnalysis {
    /// True when Requirements hold.
    pub fn holds(&self) -> bool {
        self.value.as_bool() == Some(true)
    }

    /// The clauses that do not hold.
    pub fn failing(&self) -> impl Iterator<Item = &Clause> {
        self.clauses.iter().filter(|c| !c.holds())
    }
}

/// Splits `e` into its top-level `&&` clauses.
pub fn conjuncts(e: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e.unparen() {
            Expr::Binary(BinOp::And, l, r) => {
                stack.push(r);
                stack.push(l);
            }
            other => out.push(other),
        }
    }
    out
}

/// Evaluates `ad`'s Requirements against `other`, clause by clause.
pub fn analyze_side(ev: &mut Evaluator, ad: &ClassAd, other: &ClassAd) -> SideAnalysis {
    let Some(req) = ad.get("Requirements") else {
        return SideAnalysis { value: Value::Undefined, present: false, clauses: Vec::new() };
    };
    let value = ev.eval(req, Some(ad), Some(other));
    let clauses = conjuncts(req)
        .into_iter()
        .map(|c| Clause { text: c.to_string(), value: ev.eval(c, Some(ad), Some(other)) })
        .collect();
    SideAnalysis { value, present: true, clauses }
}
