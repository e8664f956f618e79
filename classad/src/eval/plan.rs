//! A scan's expression, compiled once for the shapes matchmaking uses:
//! `&&` and `||` chains of comparisons whose operands are literals,
//! `TARGET.x` references and `MY.x` references. [`Evaluator::scan`]
//! evaluates this form against each ad; whatever it does not cover is left
//! to the general evaluator, in place, so that every value (and every call
//! of `random()`, in order) is exactly what [`Evaluator::eval`] gives.
//!
//! What it saves, per ad: walking the expression tree through the general
//! operand path; resolving `MY.x` (the MY ad is the same for the whole
//! scan, so a `MY` attribute chain that ends in a literal, such as
//! `RequestDisk = DiskUsage`, is followed once, when the plan is made); and
//! reading the attribute entries of TARGET literals, which the attribute
//! table's index slots hold inline (a string as its address and a tag of
//! its text, enough to decide `==` in nearly every case).
//!
//! [`Evaluator::scan`]: super::Evaluator::scan
//! [`Evaluator::eval`]: super::Evaluator::eval

use std::cell::Cell;

use super::operand::{Sc, Tri, int_cmp, str_decided};
use super::{Cx, MY, TARGET};
use crate::ast::{AttrName, BinOp, ClassAd, Expr, Special};
use crate::table::kind;
use crate::value::Value;

static UNDEFINED: Value = Value::Undefined;

/// How deep the compiled tree goes; deeper parts are evaluated generally.
const MAX_NODE_DEPTH: u32 = 64;
/// How long a `MY` attribute chain may be to be followed when compiling.
const MAX_CHAIN: u32 = 16;
/// How many distinct TARGET names a plan reads itself; past this, TARGET
/// references are left to the general evaluator.
const MAX_NAMES: usize = 32;

/// An expression compiled against one MY ad, for evaluation against many
/// TARGET ads.
pub(super) struct Plan<'p> {
    root: Node<'p>,
    /// The TARGET attributes the plan reads itself.
    pub(super) names: Vec<&'p AttrName>,
    /// Bit `j` is set once `names[j]` was found bound to an expression
    /// rather than a literal: its entry, not only its index slot, is then
    /// worth prefetching.
    pub(super) entry_names: Cell<u32>,
}

enum Node<'p> {
    /// `a && b && c ...` (or `||`, when `or`), flattened from the
    /// left-nested tree the parser builds, evaluated left to right.
    Chain { or: bool, items: Box<[Node<'p>]> },
    /// `TARGET.x op literal`, or `literal op TARGET.x` when `lit_left`.
    TargetLit { op: BinOp, name: u32, lit: &'p Value, lit_left: bool },
    /// Any other comparison: `==`, `!=`, `<`, `<=`, `>`, `>=`, `=?=`, `=!=`.
    Cmp { op: BinOp, l: Opd<'p>, r: Opd<'p> },
    /// Anything else, evaluated by the general evaluator in frame MY.
    Gen(&'p Expr),
}

enum Opd<'p> {
    /// The same value against every TARGET: a literal, or a `MY` attribute
    /// chain that ends in one, or a missing `MY` attribute.
    Const(&'p Value),
    /// `TARGET.x` (or a plain name MY does not define, in HTCondor's
    /// default semantics): `names[j]` of the TARGET ad, evaluated in frame
    /// TARGET.
    Target(u32),
    /// Anything else, evaluated by the general evaluator in frame MY.
    Gen(&'p Expr),
}

impl<'p> Plan<'p> {
    /// The plan for `expr` with MY = `my`, or `None` when its top is neither
    /// a comparison nor `&&`/`||` (then it would only forward to the
    /// general evaluator).
    pub(super) fn new(expr: &'p Expr, my: &'p ClassAd, strict: bool) -> Option<Plan<'p>> {
        let mut c = Compiler { my, strict, names: Vec::new() };
        let root = c.node(expr, 0);
        if let Node::Gen(_) = root {
            return None;
        }
        Some(Plan { root, names: c.names, entry_names: Cell::new(0) })
    }
}

struct Compiler<'p> {
    my: &'p ClassAd,
    strict: bool,
    names: Vec<&'p AttrName>,
}

impl<'p> Compiler<'p> {
    fn node(&mut self, e: &'p Expr, depth: u32) -> Node<'p> {
        // Parentheses are syntax only: the general evaluator looks through them.
        let e = e.unparen();
        let Expr::Binary(op, l, r) = e else { return Node::Gen(e) };
        if depth >= MAX_NODE_DEPTH {
            return Node::Gen(e);
        }
        match op {
            BinOp::And | BinOp::Or => {
                // `(a && b) && c` is one chain [a, b, c]: folding left to
                // right, stopping at error or at the deciding value, is
                // what the nested evaluation does.
                let mut items = vec![self.node(r, depth + 1)];
                let mut left = l.unparen();
                while let Expr::Binary(o, ll, lr) = left
                    && o == op
                    && items.len() < 1024
                {
                    items.push(self.node(lr, depth + 1));
                    left = ll.unparen();
                }
                items.push(self.node(left, depth + 1));
                items.reverse();
                Node::Chain { or: *op == BinOp::Or, items: items.into_boxed_slice() }
            }
            BinOp::Eq
            | BinOp::Ne
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge
            | BinOp::Is
            | BinOp::Isnt => match (self.opd(l), self.opd(r)) {
                (Opd::Target(name), Opd::Const(lit)) => {
                    Node::TargetLit { op: *op, name, lit, lit_left: false }
                }
                (Opd::Const(lit), Opd::Target(name)) => {
                    Node::TargetLit { op: *op, name, lit, lit_left: true }
                }
                (l, r) => Node::Cmp { op: *op, l, r },
            },
            _ => Node::Gen(e),
        }
    }

    /// An operand written in frame MY, resolved as `Cx::fast_ref` would.
    fn opd(&mut self, e: &'p Expr) -> Opd<'p> {
        let e = e.unparen();
        match e {
            Expr::Lit(v) => Opd::Const(v),
            Expr::Attr { name, absolute: false } if name.is_plain() => match self.my.lookup(name) {
                Some(found) => self.fold(found, 0).map_or(Opd::Gen(e), Opd::Const),
                None if self.strict => Opd::Const(&UNDEFINED),
                // Not in MY: HTCondor's alternate scope, TARGET.
                None => self.target(name, e),
            },
            Expr::Select(base, name) if name.is_plain() => {
                let Expr::Attr { name: scope, absolute: false } = &**base else {
                    return Opd::Gen(e);
                };
                let special = scope.special();
                if self.my.has_special(special) {
                    // MY defines the scope name itself: scopes must be walked.
                    return Opd::Gen(e);
                }
                match special {
                    Special::Target | Special::Other => self.target(name, e),
                    Special::My | Special::Ad | Special::SelfAd => match self.my.lookup(name) {
                        Some(found) => self.fold(found, 0).map_or(Opd::Gen(e), Opd::Const),
                        None => Opd::Const(&UNDEFINED),
                    },
                    _ => Opd::Gen(e),
                }
            }
            _ => Opd::Gen(e),
        }
    }

    /// The literal that `e`, the expression of a MY attribute, evaluates
    /// to in frame MY whatever the TARGET: a literal, or a reference to a
    /// MY attribute whose expression folds. `None` when that takes more
    /// than reading MY (a TARGET attribute, an operator, a call, ...).
    fn fold(&self, e: &'p Expr, depth: u32) -> Option<&'p Value> {
        if depth > MAX_CHAIN {
            return None;
        }
        match e.unparen() {
            Expr::Lit(v) => Some(v),
            Expr::Attr { name, absolute: false } if name.is_plain() => {
                self.fold(self.my.lookup(name)?, depth + 1)
            }
            Expr::Select(base, name) if name.is_plain() => {
                let Expr::Attr { name: scope, absolute: false } = &**base else { return None };
                let special = scope.special();
                if !matches!(special, Special::My | Special::Ad | Special::SelfAd)
                    || self.my.has_special(special)
                {
                    return None;
                }
                match self.my.lookup(name) {
                    Some(found) => self.fold(found, depth + 1),
                    None => Some(&UNDEFINED),
                }
            }
            _ => None,
        }
    }

    /// TARGET's `name`, referred to by `e`.
    fn target(&mut self, name: &'p AttrName, e: &'p Expr) -> Opd<'p> {
        let j = match self.names.iter().position(|n| *n == name) {
            Some(j) => j,
            None if self.names.len() < MAX_NAMES => {
                self.names.push(name);
                self.names.len() - 1
            }
            None => return Opd::Gen(e),
        };
        Opd::Target(j as u32)
    }
}

impl<'a> Cx<'a, '_> {
    /// Evaluates a plan made for this context's MY ad.
    #[inline]
    pub(super) fn eval_plan(&mut self, plan: &Plan<'_>) -> Value {
        self.node(plan, &plan.root).value()
    }

    fn node(&mut self, plan: &Plan<'_>, n: &Node<'_>) -> Tri {
        match n {
            Node::Chain { or, items } => {
                // Exactly `Cx::binary`'s three-valued logic, with the same
                // order of evaluation and the same short cuts, folded.
                let decides = if *or { Tri::T } else { Tri::F };
                let Some((first, rest)) = items.split_first() else { return Tri::U };
                let mut acc = self.item(plan, first);
                for item in rest {
                    acc = match acc {
                        Tri::E => return Tri::E,
                        b if b == decides => return decides,
                        Tri::U => match self.item(plan, item) {
                            Tri::E => Tri::E,
                            Tri::U => Tri::U,
                            b if b == decides => decides,
                            _ => Tri::U,
                        },
                        _ => self.item(plan, item),
                    };
                }
                acc
            }
            &Node::TargetLit { op, name, lit, lit_left } => {
                self.target_lit(plan, op, name, lit, lit_left)
            }
            Node::Cmp { op, l, r } => {
                let (mut lt, mut rt) = (Value::Undefined, Value::Undefined);
                let a = self.opd(plan, l, &mut lt);
                let b = self.opd(plan, r, &mut rt);
                self.compare(*op, a, b)
            }
            Node::Gen(e) => {
                let v = self.eval(e, MY);
                Tri::of(&v)
            }
        }
    }

    #[inline]
    fn opd<'x>(&mut self, plan: &Plan<'_>, o: &'x Opd<'_>, tmp: &'x mut Value) -> Sc<'x>
    where
        'a: 'x,
    {
        match *o {
            Opd::Const(v) => Sc::V(v),
            Opd::Target(j) => self.target_opd(plan, j, tmp),
            Opd::Gen(e) => {
                *tmp = self.eval(e, MY);
                Sc::V(tmp)
            }
        }
    }

    /// A chain's item: a `TargetLit` is evaluated in line.
    #[inline(always)]
    fn item(&mut self, plan: &Plan<'_>, n: &Node<'_>) -> Tri {
        match *n {
            Node::TargetLit { op, name, lit, lit_left } => {
                self.target_lit(plan, op, name, lit, lit_left)
            }
            _ => self.node(plan, n),
        }
    }

    /// `TARGET.x op lit` (or `lit op TARGET.x`): the common cases, an
    /// integer or a string in the slot, without building values.
    #[inline(always)]
    fn target_lit(
        &mut self,
        plan: &Plan<'_>,
        op: BinOp,
        j: u32,
        lit: &Value,
        lit_left: bool,
    ) -> Tri {
        let slot = match self.target {
            Some(t) => t.probe(plan.names[j as usize]),
            None => None,
        };
        if let Some(slot) = slot {
            match (slot.kind(), lit) {
                (kind::INT, &Value::Int(y)) => {
                    let x = slot.val() as i64;
                    return if lit_left { int_cmp(op, y, x) } else { int_cmp(op, x, y) };
                }
                (kind::STR, Value::Str(s)) => {
                    if let Some(r) = str_decided(op, slot.val(), slot.tag(), s) {
                        return r;
                    }
                }
                _ => {}
            }
        }
        self.target_lit_slow(plan, op, j, lit, lit_left)
    }

    #[inline(never)]
    fn target_lit_slow(
        &mut self,
        plan: &Plan<'_>,
        op: BinOp,
        j: u32,
        lit: &Value,
        lit_left: bool,
    ) -> Tri {
        let mut tmp = Value::Undefined;
        let t = self.target_opd(plan, j, &mut tmp);
        let l = Sc::V(lit);
        if lit_left { self.compare(op, l, t) } else { self.compare(op, t, l) }
    }

    /// TARGET's `names[j]`: its value when the index slot holds it, else its
    /// entry's literal, else its expression evaluated in frame TARGET (the
    /// value `Cx::operand` gives through `Cx::fast_ref`).
    #[inline]
    fn target_opd<'x>(&mut self, plan: &Plan<'_>, j: u32, tmp: &'x mut Value) -> Sc<'x>
    where
        'a: 'x,
    {
        let Some(t) = self.target else { return Sc::Undef };
        let Some(slot) = t.probe(plan.names[j as usize]) else { return Sc::Undef };
        match slot.kind() {
            kind::INT => Sc::Int(slot.val() as i64),
            kind::STR => Sc::TStr {
                addr: slot.val(),
                tag: slot.tag(),
                pos: slot.pos() as u32,
                frame: TARGET as u8,
            },
            kind::BOOL => Sc::Bool(slot.val() != 0),
            kind::REAL => Sc::Real(f64::from_bits(slot.val())),
            kind::UNDEF => Sc::Undef,
            kind::ERROR => Sc::Error,
            _ => self.target_expr(plan, j, slot.pos(), tmp),
        }
    }

    /// A TARGET attribute bound to something other than a literal scalar.
    #[cold]
    #[inline(never)]
    fn target_expr<'x>(&mut self, plan: &Plan<'_>, j: u32, pos: usize, tmp: &'x mut Value) -> Sc<'x>
    where
        'a: 'x,
    {
        plan.entry_names.set(plan.entry_names.get() | 1 << j);
        match self.target.and_then(|t| t.expr_at(pos)) {
            Some(Expr::Lit(v)) => Sc::V(v),
            Some(e) => {
                *tmp = self.eval_attr_expr(e, TARGET);
                Sc::V(tmp)
            }
            None => Sc::Undef,
        }
    }
}
