//! Operands as scalars: comparisons and `&&`/`||` decided without building
//! [`Value`]s where they need not be. An attribute of a top-level ad found
//! by the fast scope rules is read from its index slot, which holds a
//! literal's value (or, for a string, its address and a tag of its text);
//! only what that cannot decide goes through `binary_op`, so the values are
//! `binary_op`'s and `Cx::binary`'s exactly.

use super::{BinOp, Cx, Expr, TARGET, Value, binary_op};
use crate::ast::AttrName;
use crate::table::{Slot, kind, str_addr, str_tag};

/// A value as `&&` and `||` see it: true, false, undefined, or error (which
/// also stands for a string, list or ad, which `&&` and `||` turn into error).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Tri {
    F,
    T,
    U,
    E,
}

impl Tri {
    #[inline]
    pub(super) fn of(v: &Value) -> Tri {
        match v {
            Value::Undefined => Tri::U,
            Value::Error => Tri::E,
            v => match v.as_bool() {
                Some(true) => Tri::T,
                Some(false) => Tri::F,
                None => Tri::E,
            },
        }
    }

    #[inline]
    pub(super) fn bool(b: bool) -> Tri {
        if b { Tri::T } else { Tri::F }
    }

    /// The value; exact for the results of comparisons and of `&&`/`||`,
    /// which are only ever booleans, undefined or error.
    #[inline]
    pub(super) fn value(self) -> Value {
        match self {
            Tri::F => Value::Bool(false),
            Tri::T => Value::Bool(true),
            Tri::U => Value::Undefined,
            Tri::E => Value::Error,
        }
    }
}

/// An evaluated operand: borrowed, or a scalar read from an index slot.
#[derive(Clone, Copy)]
pub(super) enum Sc<'x> {
    V(&'x Value),
    Int(i64),
    Real(f64),
    Bool(bool),
    Undef,
    Error,
    /// A string literal of a top-level ad (frame MY or TARGET), as its
    /// index slot has it: its address, tag and position.
    TStr {
        addr: u64,
        tag: u8,
        pos: u32,
        frame: u8,
    },
}

impl Sc<'_> {
    /// The integer, when this is one.
    #[inline]
    fn int(self) -> Option<i64> {
        match self {
            Sc::Int(i) | Sc::V(&Value::Int(i)) => Some(i),
            _ => None,
        }
    }
}

/// An integer comparison, as `binary_op` makes it.
#[inline(always)]
pub(super) fn int_cmp(op: BinOp, x: i64, y: i64) -> Tri {
    Tri::bool(match op {
        BinOp::Eq | BinOp::Is => x == y,
        BinOp::Ne | BinOp::Isnt => x != y,
        BinOp::Lt => x < y,
        BinOp::Le => x <= y,
        BinOp::Gt => x > y,
        _ => x >= y,
    })
}

/// Whether two strings are equal (case-sensitively for `=?=` and `=!=`,
/// otherwise ignoring case), when their address and tag decide it: the same
/// string, or texts that differ even ignoring case.
#[inline(always)]
pub(super) fn str_decided(op: BinOp, addr: u64, tag: u8, s: &std::sync::Arc<str>) -> Option<Tri> {
    if !matches!(op, BinOp::Eq | BinOp::Ne | BinOp::Is | BinOp::Isnt) {
        return None;
    }
    let same = if addr == str_addr(s) {
        true
    } else if tag != str_tag(s) {
        false
    } else {
        return None;
    };
    Some(Tri::bool(same == matches!(op, BinOp::Eq | BinOp::Is)))
}

impl<'a> Cx<'a, '_> {
    /// `l && r` (or `l || r`): `Cx::binary`'s three-valued logic, with the
    /// same order of evaluation and the same short cuts.
    pub(super) fn logic(&mut self, or: bool, l: &Expr, r: &Expr, frame: u32) -> Tri {
        let decides = Tri::bool(or);
        match self.logic_opd(l, frame) {
            Tri::E => Tri::E,
            Tri::U => match self.logic_opd(r, frame) {
                Tri::E => Tri::E,
                Tri::U => Tri::U,
                b if b == decides => decides,
                _ => Tri::U,
            },
            b if b == decides => decides,
            _ => self.logic_opd(r, frame),
        }
    }

    /// An operand of `&&`/`||`, as they see it.
    #[inline]
    fn logic_opd(&mut self, e: &Expr, frame: u32) -> Tri {
        let e = e.unparen();
        match e {
            Expr::Binary(op, l, r) => match op {
                BinOp::And | BinOp::Or => {
                    self.guarded(|cx| cx.logic(*op == BinOp::Or, l, r, frame))
                }
                op if is_comparison(*op) => self.guarded(|cx| cx.comparison(*op, l, r, frame)),
                _ => Tri::of(self.operand(e, frame).get()),
            },
            _ => Tri::of(self.operand(e, frame).get()),
        }
    }

    /// `l op r` for a comparison operator.
    #[inline]
    pub(super) fn comparison(&mut self, op: BinOp, l: &Expr, r: &Expr, frame: u32) -> Tri {
        let (mut x, mut y) = (Value::Undefined, Value::Undefined);
        let a = self.scalar(l, frame, &mut x);
        let b = self.scalar(r, frame, &mut y);
        self.compare(op, a, b)
    }

    /// `e` as an operand: literals borrowed, attributes that the fast scope
    /// rules find read from their index slot, anything else evaluated into
    /// `tmp` (the value `Cx::operand` gives).
    #[inline]
    fn scalar<'x>(&mut self, e: &'x Expr, frame: u32, tmp: &'x mut Value) -> Sc<'x>
    where
        'a: 'x,
    {
        let e = e.unparen();
        if let Expr::Lit(v) = e {
            return Sc::V(v);
        }
        match self.fast_slot(e, frame) {
            Some(Some((slot, f))) => match slot.kind() {
                kind::INT => Sc::Int(slot.val() as i64),
                kind::STR => Sc::TStr {
                    addr: slot.val(),
                    tag: slot.tag(),
                    pos: slot.pos() as u32,
                    frame: f as u8,
                },
                kind::BOOL => Sc::Bool(slot.val() != 0),
                kind::REAL => Sc::Real(f64::from_bits(slot.val())),
                kind::UNDEF => Sc::Undef,
                kind::ERROR => Sc::Error,
                _ => match self.top(f).expr_at(slot.pos()) {
                    Some(Expr::Lit(v)) => Sc::V(v),
                    Some(found) => {
                        *tmp = self.eval_attr_expr(found, f);
                        Sc::V(tmp)
                    }
                    None => Sc::Undef,
                },
            },
            Some(None) => Sc::Undef,
            None => match self.operand(e, frame) {
                super::Opnd::R(v) => Sc::V(v),
                super::Opnd::O(v) => {
                    *tmp = v;
                    Sc::V(tmp)
                }
            },
        }
    }

    /// `Cx::fast_ref`, giving the index slot rather than the expression.
    #[inline]
    fn fast_slot(&self, e: &Expr, frame: u32) -> Option<Option<(Slot, u32)>> {
        match e {
            Expr::Attr { name, absolute: false } if frame <= TARGET && name.is_plain() => {
                Some(self.slot_plain_top(name, frame))
            }
            Expr::Select(base, name) if name.is_plain() => {
                let Expr::Attr { name: scope, absolute: false } = &**base else { return None };
                let f = self.scope_frame_fast(scope, frame)?;
                Some(self.top(f).probe(name).map(|s| (s, f)))
            }
            _ => None,
        }
    }

    /// `Cx::lookup_plain_top`, giving the index slot.
    #[inline]
    fn slot_plain_top(&self, name: &AttrName, frame: u32) -> Option<(Slot, u32)> {
        if let Some(s) = self.top(frame).probe(name) {
            return Some((s, frame));
        }
        if !self.strict && self.target.is_some() {
            let other = 1 - frame;
            if let Some(s) = self.top(other).probe(name) {
                return Some((s, other));
            }
        }
        None
    }

    /// `binary_op` for a comparison, without building values for the
    /// common cases: two integers, and a slot's string against a string.
    #[inline]
    pub(super) fn compare(&mut self, op: BinOp, a: Sc<'_>, b: Sc<'_>) -> Tri {
        if let (Some(x), Some(y)) = (a.int(), b.int()) {
            return int_cmp(op, x, y);
        }
        match (a, b) {
            (Sc::TStr { addr, tag, .. }, Sc::V(Value::Str(s)))
            | (Sc::V(Value::Str(s)), Sc::TStr { addr, tag, .. }) => {
                if let Some(r) = str_decided(op, addr, tag, s) {
                    return r;
                }
            }
            _ => {}
        }
        self.compare_values(op, a, b)
    }

    /// `binary_op` on the values two operands stand for.
    #[inline(never)]
    fn compare_values(&mut self, op: BinOp, a: Sc<'_>, b: Sc<'_>) -> Tri {
        let (mut x, mut y) = (Value::Undefined, Value::Undefined);
        let l = self.sc_value(a, &mut x);
        let r = self.sc_value(b, &mut y);
        Tri::of(&binary_op(op, l, r))
    }

    /// The value an operand stands for.
    pub(super) fn sc_value<'x>(&mut self, s: Sc<'x>, tmp: &'x mut Value) -> &'x Value
    where
        'a: 'x,
    {
        *tmp = match s {
            Sc::V(v) => return v,
            Sc::Int(i) => Value::Int(i),
            Sc::Real(r) => Value::Real(r),
            Sc::Bool(b) => Value::Bool(b),
            Sc::Undef => Value::Undefined,
            Sc::Error => Value::Error,
            Sc::TStr { pos, frame, .. } => match self.top(frame as u32).expr_at(pos as usize) {
                Some(Expr::Lit(v)) => return v,
                Some(e) => self.eval_attr_expr(e, frame as u32),
                None => Value::Undefined,
            },
        };
        tmp
    }
}

/// `==`, `!=`, `<`, `<=`, `>`, `>=`, `=?=`, `=!=`: the operators whose
/// value is always a boolean, undefined or error.
#[inline]
pub(super) fn is_comparison(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Eq
            | BinOp::Ne
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge
            | BinOp::Is
            | BinOp::Isnt
    )
}
