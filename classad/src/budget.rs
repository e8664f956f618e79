//! What one evaluation may spend: steps of work and bytes of values made.
//!
//! Every expression a daemon evaluates may come from a user, so every
//! evaluation runs on a [`Budget`]. Steps bound its time: each node of the
//! expression evaluated is a step, and so is every [`BYTES_PER_STEP`] bytes a
//! built-in function reads or a value made holds. Bytes bound its memory:
//! every value the evaluation makes (a list, a string a built-in builds, a
//! copy of an ad) is charged its *weight*, the bytes it would take if every
//! piece it shares with another value were copied, before anyone can read
//! it. So a chain such as `a1 = join(a0, {"y","y","y"}); a2 = join(a1, ...)`
//! that doubles a string at each link, or `l1 = {l0, l0}; l2 = {l1, l1}`
//! that doubles a list's logical size while sharing its parts, ends in
//! `error` once its values would outgrow the budget, however few steps it
//! took. Past either bound the value is `error`, and every later step of
//! the same evaluation is `error` at once.
//!
//! The invariant that makes the bound hold for every built-in: no value an
//! evaluation holds weighs more than the bytes it was charged, so a
//! built-in's input is bounded, and a built-in that could build more than
//! its input (`join`, `replaceAll`, `split`, ...) asks [`Budget::room`]
//! before it grows its result. `tests::every_builtin_stays_within_its_budget`
//! calls every built-in on inputs built to blow it up and checks the bytes
//! it allocated.

use crate::ast::{ClassAd, Expr};
use crate::value::Value;

/// Steps one evaluation may take by default (see
/// [`crate::EvalOptions::max_steps`]): a few milliseconds of work, far
/// beyond any real policy expression.
pub const DEFAULT_MAX_STEPS: u64 = 100_000;

/// Bytes of values one evaluation may make by default (see
/// [`crate::EvalOptions::max_bytes`]): far beyond any real expression (a job
/// ad's whole text is usually a few kilobytes), small enough that many
/// evaluations at once cannot exhaust a daemon's memory.
pub const DEFAULT_MAX_BYTES: u64 = 8 << 20;

/// Bytes read by a built-in, or held by a value made, that count as one
/// step of work.
pub const BYTES_PER_STEP: u64 = 64;

/// What a value counts for itself, besides what it points to: a list
/// element or a scalar slot.
pub const VALUE_BYTES: u64 = std::mem::size_of::<Value>() as u64;

/// What an expression node or an ad's entry counts for itself.
const NODE_BYTES: u64 = 32;

/// What an evaluation has left to spend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    steps: u64,
    bytes: u64,
}

impl Budget {
    /// A budget of `steps` steps and `bytes` bytes.
    pub fn new(steps: u64, bytes: u64) -> Budget {
        Budget { steps, bytes }
    }

    /// The default budget: [`DEFAULT_MAX_STEPS`] and [`DEFAULT_MAX_BYTES`].
    pub fn default_budget() -> Budget {
        Budget::new(DEFAULT_MAX_STEPS, DEFAULT_MAX_BYTES)
    }

    /// Steps left.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Bytes left.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// True once the budget ran out: every later step is `error`.
    pub fn is_spent(&self) -> bool {
        self.steps == 0
    }

    /// Takes one step; false when none was left.
    #[inline]
    pub fn step(&mut self) -> bool {
        if self.steps == 0 {
            return false;
        }
        self.steps -= 1;
        true
    }

    /// Spends the work of reading `bytes` bytes (a built-in scanning its
    /// arguments); false, and the budget spent, when it does not fit.
    #[inline]
    pub fn read(&mut self, bytes: u64) -> bool {
        let steps = bytes / BYTES_PER_STEP;
        if steps == 0 {
            return !self.is_spent();
        }
        if steps >= self.steps {
            self.exhaust();
            return false;
        }
        self.steps -= steps;
        true
    }

    /// Charges a value of `bytes` bytes made (its weight), and the work of
    /// making it; false, and the budget spent, when it does not fit.
    #[inline]
    pub fn make(&mut self, bytes: u64) -> bool {
        if bytes > self.bytes {
            self.exhaust();
            return false;
        }
        self.bytes -= bytes;
        self.read(bytes)
    }

    /// The most bytes a value made now may weigh: what a built-in checks
    /// before it grows a result, so it never allocates past the budget.
    #[inline]
    pub fn room(&self) -> usize {
        if self.is_spent() {
            return 0;
        }
        usize::try_from(self.bytes.min(self.steps.saturating_mul(BYTES_PER_STEP)))
            .unwrap_or(usize::MAX)
    }

    /// True when a result of `bytes` more bytes still fits [`Budget::room`].
    #[inline]
    pub fn fits(&self, bytes: usize) -> bool {
        bytes <= self.room()
    }

    /// Spends everything: the evaluation is over.
    pub fn exhaust(&mut self) {
        self.steps = 0;
        self.bytes = 0;
    }

    /// Takes what `other`, a budget carved from this one (a nested
    /// evaluation's), spent of `given`.
    pub(crate) fn absorb(&mut self, given: Budget, other: Budget) {
        let steps = given.steps.saturating_sub(other.steps);
        let bytes = given.bytes.saturating_sub(other.bytes);
        self.steps = self.steps.saturating_sub(steps);
        self.bytes = self.bytes.saturating_sub(bytes);
        if other.is_spent() {
            self.exhaust();
        }
    }
}

/// One thing to weigh.
enum Node<'a> {
    V(&'a Value),
    E(&'a Expr),
    A(&'a ClassAd),
}

/// The weight of `v` beyond its own slot: the bytes its strings, lists and
/// ads would take if every shared part were copied. Stops counting once
/// past `cap` (the answer is then some number above `cap`), so weighing a
/// value that shares its parts many times costs at most `cap` bytes of work.
pub fn value_weight(v: &Value, cap: u64) -> u64 {
    weigh(Node::V(v), cap)
}

/// The weight of an ad (see [`value_weight`]): its names, expressions and
/// literals.
pub fn ad_weight(ad: &ClassAd, cap: u64) -> u64 {
    weigh(Node::A(ad), cap)
}

/// The weight of a list of `items`, as a new list value would be charged.
pub fn list_weight(items: &[Value], cap: u64) -> u64 {
    let mut total = items.len() as u64 * VALUE_BYTES;
    for v in items {
        if total > cap {
            break;
        }
        total = total.saturating_add(value_weight(v, cap - total));
    }
    total
}

fn weigh(root: Node<'_>, cap: u64) -> u64 {
    let mut total: u64 = 0;
    let mut stack = vec![root];
    let mut operands: Vec<&Expr> = Vec::new();
    while let Some(n) = stack.pop() {
        match n {
            Node::V(Value::Str(s)) => total = total.saturating_add(s.len() as u64),
            Node::V(Value::List(items)) => {
                // Each element counts its slot before it is pushed, so the
                // stack never holds more than `cap / VALUE_BYTES` entries.
                total = total.saturating_add(items.len() as u64 * VALUE_BYTES);
                if total > cap {
                    return total;
                }
                stack.extend(items.iter().map(Node::V));
            }
            Node::V(Value::Ad(ad)) => stack.push(Node::A(ad)),
            Node::V(_) => {}
            Node::A(ad) => {
                total = total.saturating_add(ad.len() as u64 * NODE_BYTES);
                if total > cap {
                    return total;
                }
                for (name, e) in ad.iter() {
                    total = total.saturating_add(name.as_str().len() as u64);
                    stack.push(Node::E(e));
                }
            }
            Node::E(e) => {
                total = total.saturating_add(NODE_BYTES);
                match e {
                    Expr::Lit(v) => stack.push(Node::V(v)),
                    Expr::Record(ad) => stack.push(Node::A(ad)),
                    Expr::Call(c) => total = total.saturating_add(c.name.len() as u64),
                    Expr::Attr { name, .. } | Expr::Select(_, name) => {
                        total = total.saturating_add(name.as_str().len() as u64)
                    }
                    _ => {}
                }
                operands.clear();
                e.push_operands(&mut operands);
                stack.extend(operands.iter().map(|&e| Node::E(e)));
            }
        }
        if total > cap {
            return total;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_budget_runs_out_of_steps_and_of_bytes() {
        let mut b = Budget::new(3, 1000);
        assert!(b.step() && b.step() && b.step());
        assert!(!b.step());
        assert!(b.is_spent());

        let mut b = Budget::new(1000, 100);
        assert!(b.make(100));
        assert_eq!(b.bytes(), 0);
        assert!(b.make(0));
        assert!(!b.make(1));
        assert!(b.is_spent(), "a value that does not fit ends the evaluation");

        // Bytes cost steps as well.
        let mut b = Budget::new(10, 1 << 20);
        assert!(b.make(9 * BYTES_PER_STEP));
        assert_eq!(b.steps(), 1);
        assert!(!b.read(BYTES_PER_STEP));
        assert_eq!(b.room(), 0);
    }

    #[test]
    fn shared_parts_weigh_each_time_they_are_reached() {
        let s = Value::string("x".repeat(100));
        let mut l = Value::list(vec![s.clone(), s]);
        assert_eq!(value_weight(&l, u64::MAX), 2 * VALUE_BYTES + 200);
        for _ in 0..60 {
            l = Value::List(Arc::new(vec![l.clone(), l]));
        }
        // 2^60 copies: counting stops past the cap, after little work.
        let w = value_weight(&l, 1 << 20);
        assert!(w > 1 << 20 && w < 1 << 21, "{w}");
    }

    #[test]
    fn ads_weigh_their_names_and_expressions() {
        let ad = crate::parse_ad(r#"[a = "0123456789"; b = {1, 2, 3}; c = x + y]"#).unwrap();
        let w = ad_weight(&ad, u64::MAX);
        assert!(w > 3 * NODE_BYTES + 10, "{w}");
        assert!(ad_weight(&ad, 10) > 10);
    }
}
