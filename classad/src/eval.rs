//! Evaluation with HTCondor's semantics.
//!
//! Scoping follows HTCondor's `MatchClassAd`: when an expression is
//! evaluated with a MY ad and a TARGET ad, `MY`/`TARGET` (and `other`, `ad`)
//! resolve through a match context; a plain name is looked up in the
//! current ad, then in its enclosing ads, and, in HTCondor's default
//! (non-strict) semantics, in the other ad of the match.

use std::sync::Arc;

use crate::ast::{AttrName, BinOp, ClassAd, Expr, Special, UnOp};
use crate::budget::{self, Budget};
use crate::builtins::{Builtin, FnEnv, Rng, SpecialFn};
use crate::value::Value;

pub use crate::budget::{DEFAULT_MAX_BYTES, DEFAULT_MAX_STEPS};

mod operand;
mod plan;

/// How deeply attribute references may nest during one evaluation; deeper
/// chains evaluate to error (HTCondor bounds this too).
pub const MAX_ATTR_DEPTH: u32 = 1000;

/// Evaluation options.
#[derive(Clone, Debug, Default)]
pub struct EvalOptions {
    /// The most steps (sub-expressions and attribute references evaluated)
    /// one evaluation may take; past it the value is `error`, as HTCondor's
    /// library gives for recursion it refuses. `None`: [`DEFAULT_MAX_STEPS`].
    /// A chain such as `a1 = a0 + a0; a2 = a1 + a1; ...` doubles its work at
    /// each link, so without a bound an expression of a few hundred bytes
    /// could run for years.
    pub max_steps: Option<u64>,
    /// The most bytes of values one evaluation may make (see
    /// [`crate::budget`]); past it the value is `error`. `None`:
    /// [`DEFAULT_MAX_BYTES`]. A chain such as `a1 = join(a0, {"y","y"});
    /// a2 = join(a1, {"y","y"}); ...` doubles a string at each link in a few
    /// steps, so steps alone do not bound memory.
    pub max_bytes: Option<u64>,
    /// Pure new-ClassAd semantics (`STRICT_CLASSAD_EVALUATION = true`): no
    /// fallback from MY to TARGET for plain names, and `MY` only inside a match.
    pub strict: bool,
    /// The clock for `time()` and `CurrentTime`, in seconds since the epoch;
    /// `None` reads the system clock.
    pub now: Option<i64>,
    /// The seed for `random()`; `None` seeds from the clock.
    pub seed: Option<u64>,
}

/// Evaluates expressions. Holds reusable scratch space, so one evaluator
/// used for many evaluations does not allocate per evaluation.
pub struct Evaluator {
    opts: EvalOptions,
    rng: Rng,
    scratch: Scratch,
    /// Steps left for all later evaluations together, when bounded
    /// ([`Evaluator::set_step_pool`]).
    pool: Option<u64>,
    /// Some evaluation ran out of its budget.
    exhausted: bool,
}

#[derive(Default)]
struct Scratch {
    frames: Vec<FrameData>,
    in_progress: Vec<(usize, u32)>,
    ad_parents: Vec<(usize, u32)>,
}

/// A nested ad entered during evaluation, with its lexical parent.
struct FrameData {
    ad: Arc<ClassAd>,
    parent: u32,
}

impl Default for Evaluator {
    fn default() -> Self {
        Evaluator::new()
    }
}

static EMPTY: ClassAd = ClassAd::EMPTY;

impl Evaluator {
    /// An evaluator with HTCondor's default semantics.
    pub fn new() -> Evaluator {
        Evaluator::with_options(EvalOptions::default())
    }

    /// An evaluator with the given options.
    pub fn with_options(opts: EvalOptions) -> Evaluator {
        let rng = match opts.seed {
            Some(s) => Rng::seeded(s),
            None => Rng::from_time(),
        };
        Evaluator { opts, rng, scratch: Scratch::default(), pool: None, exhausted: false }
    }

    /// Bounds the steps of all later evaluations together (a request's whole
    /// budget): once spent, every evaluation is `error` at once. `None`
    /// removes the bound. Each evaluation is still bounded by
    /// [`EvalOptions::max_steps`] too.
    pub fn set_step_pool(&mut self, steps: Option<u64>) {
        self.pool = steps;
        self.exhausted = false;
    }

    /// True when an evaluation since the last [`Evaluator::set_step_pool`]
    /// (or since this evaluator was made) ran out of its budget, of steps
    /// or of bytes: its value was `error` for that reason, not for its own.
    pub fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// What the next evaluation may spend.
    fn allowance(&self) -> Budget {
        let each = self.opts.max_steps.unwrap_or(DEFAULT_MAX_STEPS);
        let steps = self.pool.map_or(each, |p| p.min(each));
        Budget::new(steps, self.opts.max_bytes.unwrap_or(DEFAULT_MAX_BYTES))
    }

    /// Records what an evaluation allowed `allowed` had left.
    fn spent(&mut self, allowed: Budget, left: Budget) {
        if left.is_spent() {
            self.exhausted = true;
        }
        if let Some(p) = &mut self.pool {
            *p = p.saturating_sub(allowed.steps() - left.steps());
        }
    }

    /// The options.
    pub fn options(&self) -> &EvalOptions {
        &self.opts
    }

    /// Sets the clock used by `time()` (a virtual clock in tests).
    pub fn set_now(&mut self, now: Option<i64>) {
        self.opts.now = now;
    }

    /// Evaluates `expr` with `my` as the current ad (an empty ad when
    /// `None`) and `target` as the other ad of a match, if any.
    pub fn eval(&mut self, expr: &Expr, my: Option<&ClassAd>, target: Option<&ClassAd>) -> Value {
        let allowed = self.allowance();
        let mut cx = self.cx(my.unwrap_or(&EMPTY), target, allowed);
        let v = cx.eval(expr, MY);
        let left = cx.budget;
        self.spent(allowed, left);
        v
    }

    /// Evaluates `expr` with MY = `my` against each ad of `targets` in turn
    /// (the negotiator's scan), calling `f` with each ad's index and value.
    /// The values are exactly those of [`Evaluator::eval`] (and `random()`
    /// is called in the same order). Two things make a scan faster than
    /// evaluating ad by ad: the expression is compiled once against `my`
    /// (`&&`/`||` chains of comparisons of literals, `TARGET.x` and `MY.x`;
    /// anything else stays with the general evaluator), and what its
    /// `TARGET.x` references read is prefetched for the ads ahead, so that
    /// a scan over many ads does not wait on memory for each one.
    pub fn scan<A: std::borrow::Borrow<ClassAd>>(
        &mut self,
        expr: &Expr,
        my: &ClassAd,
        targets: &[A],
        mut f: impl FnMut(usize, Value),
    ) {
        const AHEAD: usize = 8;
        let plan = plan::Plan::new(expr, my, self.opts.strict);
        // The names of `TARGET.x` the general evaluator will read: both their
        // index slots and their entries are prefetched.
        let mut names = target_refs(expr);
        let slot_names: &[&AttrName] = match &plan {
            Some(p) => {
                names.retain(|n| !p.names.contains(&n));
                &p.names
            }
            None => &[],
        };
        for (i, t) in targets.iter().enumerate() {
            if let Some(far) = targets.get(i + 2 * AHEAD) {
                let far = far.borrow();
                far.prefetch_slots(slot_names);
                for n in &names {
                    far.prefetch_slot(n);
                }
            }
            if let Some(near) = targets.get(i + AHEAD) {
                let near = near.borrow();
                for n in &names {
                    near.prefetch_entry(n);
                }
                if let Some(p) = &plan {
                    let mut bits = p.entry_names.get();
                    while bits != 0 {
                        near.prefetch_entry(p.names[bits.trailing_zeros() as usize]);
                        bits &= bits - 1;
                    }
                }
            }
            let v = match &plan {
                Some(p) => {
                    let allowed = self.allowance();
                    let mut cx = self.cx(my, Some(t.borrow()), allowed);
                    let v = cx.eval_plan(p);
                    let left = cx.budget;
                    self.spent(allowed, left);
                    v
                }
                None => self.eval(expr, Some(my), Some(t.borrow())),
            };
            f(i, v);
        }
    }

    /// A context for one evaluation, with the scratch space cleared.
    #[inline]
    fn cx<'a>(
        &'a mut self,
        my: &'a ClassAd,
        target: Option<&'a ClassAd>,
        budget: Budget,
    ) -> Cx<'a, 'a> {
        let cx = Cx {
            my,
            target,
            strict: self.opts.strict,
            now: self.opts.now,
            rng: &mut self.rng,
            s: &mut self.scratch,
            depth: 0,
            nest: 0,
            budget,
        };
        cx.s.frames.clear();
        cx.s.in_progress.clear();
        cx.s.ad_parents.clear();
        cx
    }

    /// Evaluates attribute `name` of `ad` (undefined when absent), with
    /// `target` as the other ad of a match, if any.
    pub fn eval_attr<N: crate::ast::NameRef + ?Sized>(
        &mut self,
        ad: &ClassAd,
        target: Option<&ClassAd>,
        name: &N,
    ) -> Value {
        let e = Expr::Attr { name: name.attr_name().into_owned(), absolute: false };
        self.eval(&e, Some(ad), target)
    }
}

/// Evaluates attribute `name` of `ad` on what `budget` has left, and
/// charges `budget` what it took: for a built-in that reads the fields of
/// an ad it was given, so that its nested evaluations are part of the
/// caller's, never a fresh budget each.
pub(crate) fn eval_attr_within(ad: &ClassAd, name: &str, now: i64, budget: &mut Budget) -> Value {
    let given = *budget;
    if given.is_spent() {
        return Value::Error;
    }
    let mut ev = Evaluator::with_options(EvalOptions {
        max_steps: Some(given.steps()),
        max_bytes: Some(given.bytes()),
        now: Some(now),
        seed: Some(0),
        ..EvalOptions::default()
    });
    let e = Expr::Attr { name: AttrName::new(name), absolute: false };
    let mut cx = ev.cx(ad, None, given);
    let v = cx.eval(&e, MY);
    let left = cx.budget;
    budget.absorb(given, left);
    v
}

/// The names `expr` reads as `TARGET.name` (or `other.name`), at most 16.
fn target_refs(expr: &Expr) -> Vec<AttrName> {
    let mut out: Vec<AttrName> = Vec::new();
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        if let Expr::Select(base, name) = e
            && let Expr::Attr { name: scope, absolute: false } = &**base
            && matches!(scope.special(), Special::Target | Special::Other)
            && out.len() < 16
            && !out.contains(name)
        {
            out.push(name.clone());
        }
        e.push_operands(&mut stack);
    }
    out
}

/// The system clock, in seconds since the epoch.
pub fn system_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Frame ids: 0 is MY, 1 is TARGET, 2.. are nested ads entered.
const MY: u32 = 0;
const TARGET: u32 = 1;
const NO_PARENT: u32 = u32::MAX;

/// Where a name led.
enum Found<'a> {
    /// An attribute: its ad, its index there, and the frame it lives in.
    Attr(AdRef<'a>, usize, u32),
    /// A whole ad (`MY`, `TARGET`, `parent` ...).
    Frame(u32),
    /// `CurrentTime`.
    Time,
    /// Nothing.
    Undef,
}

#[derive(Clone)]
enum AdRef<'a> {
    Borrowed(&'a ClassAd),
    Owned(Arc<ClassAd>),
}

impl AdRef<'_> {
    fn get(&self) -> &ClassAd {
        match self {
            AdRef::Borrowed(a) => a,
            AdRef::Owned(a) => a,
        }
    }
}

struct Cx<'a, 'r> {
    my: &'a ClassAd,
    target: Option<&'a ClassAd>,
    strict: bool,
    /// The virtual clock, if any; the system clock is read only when needed.
    now: Option<i64>,
    rng: &'r mut Rng,
    s: &'r mut Scratch,
    /// Attribute-reference nesting (bounded by `MAX_ATTR_DEPTH`).
    depth: u32,
    /// Expression nesting, for stack checks.
    nest: u32,
    /// What this evaluation has left; once spent every further step is
    /// `error`.
    budget: Budget,
}

impl<'a> Cx<'a, '_> {
    fn frame_ad(&self, f: u32) -> AdRef<'a> {
        match f {
            MY => AdRef::Borrowed(self.my),
            TARGET => AdRef::Borrowed(self.target.unwrap_or(&EMPTY)),
            n => AdRef::Owned(self.s.frames[(n - 2) as usize].ad.clone()),
        }
    }

    fn frame_parent(&self, f: u32) -> Option<u32> {
        match f {
            MY | TARGET => None,
            n => match self.s.frames[(n - 2) as usize].parent {
                NO_PARENT => None,
                p => Some(p),
            },
        }
    }

    /// The frame for nested ad `ad`, entered from its lexical parent.
    fn enter_ad(&mut self, ad: &Arc<ClassAd>) -> u32 {
        let key = Arc::as_ptr(ad) as usize;
        let parent = self
            .s
            .ad_parents
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, p)| *p)
            .unwrap_or(NO_PARENT);
        if let Some(i) =
            self.s.frames.iter().position(|f| Arc::ptr_eq(&f.ad, ad) && f.parent == parent)
        {
            return i as u32 + 2;
        }
        self.s.frames.push(FrameData { ad: ad.clone(), parent });
        self.s.frames.len() as u32 + 1
    }

    /// The top frame of `f`'s lexical chain.
    fn top_of(&self, mut f: u32) -> u32 {
        while let Some(p) = self.frame_parent(f) {
            f = p;
        }
        f
    }

    /// HTCondor's `LookupInScope`, starting at frame `start`.
    fn lookup_in_scope(&self, name: &AttrName, start: u32) -> Found<'a> {
        let special = name.special();
        let mut cur = start;
        loop {
            let ad = self.frame_ad(cur);
            let a = ad.get();
            if (special == Special::None || a.has_special(special))
                && let Some(i) = a.index_of(name)
            {
                return Found::Attr(ad, i, cur);
            }
            let sup = self.frame_parent(cur);
            match special {
                Special::None => {}
                Special::SelfAd => return Found::Frame(cur),
                Special::My if !self.strict => return Found::Frame(cur),
                Special::Parent => return sup.map_or(Found::Undef, Found::Frame),
                Special::Root => {
                    // In a match the root is the match ad itself, which
                    // holds nothing a user can name.
                    return if self.target.is_some() {
                        Found::Undef
                    } else {
                        Found::Frame(self.top_of(cur))
                    };
                }
                Special::CurrentTime => return Found::Time,
                Special::My | Special::Target | Special::Other | Special::Ad => {
                    // Resolved by the match context above the top-level ads.
                    if sup.is_none() {
                        if self.target.is_none() || cur > TARGET {
                            return Found::Undef;
                        }
                        let own = matches!(special, Special::My | Special::Ad);
                        return Found::Frame(if own { cur } else { 1 - cur });
                    }
                }
            }
            match sup {
                Some(p) => cur = p,
                None => return Found::Undef,
            }
        }
    }

    /// Resolves a plain (or absolute) name as an attribute reference does.
    fn resolve(&self, name: &AttrName, absolute: bool, frame: u32) -> Found<'a> {
        if absolute {
            if self.target.is_some() {
                return Found::Undef;
            }
            return self.lookup_in_scope(name, self.top_of(frame));
        }
        let found = self.lookup_in_scope(name, frame);
        if matches!(found, Found::Undef) && !self.strict && self.target.is_some() && frame <= TARGET
        {
            // HTCondor's alternate scope: a name not found in MY is looked
            // up in TARGET (and the reverse).
            return self.lookup_in_scope(name, 1 - frame);
        }
        found
    }

    fn eval_found(&mut self, found: Found<'a>) -> Value {
        match found {
            Found::Attr(ad, i, frame) => {
                let Some((_, e)) = ad.get().get_index(i) else { return Value::Undefined };
                self.eval_attr_expr(e, frame)
            }
            Found::Frame(f) => self.frame_value(f),
            Found::Time => Value::Int(self.now.unwrap_or_else(system_now)),
            Found::Undef => Value::Undefined,
        }
    }

    /// Evaluates an attribute's expression in its own frame, guarding
    /// against cycles (undefined, as HTCondor 25 gives) and deep chains (error).
    fn eval_attr_expr(&mut self, e: &Expr, frame: u32) -> Value {
        if let Expr::Lit(v) = e {
            return v.clone();
        }
        let key = (e as *const Expr as usize, frame);
        if self.s.in_progress.contains(&key) {
            return Value::Undefined;
        }
        if self.depth >= MAX_ATTR_DEPTH {
            return Value::Error;
        }
        self.depth += 1;
        self.s.in_progress.push(key);
        let v = stacker::maybe_grow(256 * 1024, 2 * 1024 * 1024, || self.eval(e, frame));
        self.s.in_progress.pop();
        self.depth -= 1;
        v
    }

    fn frame_value(&mut self, f: u32) -> Value {
        match self.frame_ad(f) {
            AdRef::Owned(a) => Value::Ad(a),
            AdRef::Borrowed(a) => {
                // A copy of a top-level ad is a value made.
                if !self.budget.make(budget::ad_weight(a, self.budget.bytes())) {
                    return Value::Error;
                }
                Value::Ad(Arc::new(a.clone()))
            }
        }
    }

    /// A list value of `items`, charged its weight: `error` when it does not
    /// fit the budget.
    fn make_list(&mut self, items: Vec<Value>) -> Value {
        if !self.budget.make(budget::list_weight(&items, self.budget.bytes())) {
            return Value::Error;
        }
        Value::list(items)
    }

    /// A top-level ad (MY or TARGET frame).
    #[inline]
    fn top(&self, f: u32) -> &'a ClassAd {
        if f == MY { self.my } else { self.target.unwrap_or(&EMPTY) }
    }

    /// The frame a scope name (`TARGET`, `MY`, ...) names when written in
    /// top-level frame `frame` whose ad does not define that name itself:
    /// the common case, decided without walking scopes.
    #[inline]
    fn scope_frame_fast(&self, scope: &AttrName, frame: u32) -> Option<u32> {
        if frame > TARGET {
            return None;
        }
        let special = scope.special();
        let f = match special {
            Special::Target | Special::Other if self.target.is_some() => 1 - frame,
            Special::My if !self.strict || self.target.is_some() => frame,
            Special::Ad if self.target.is_some() => frame,
            Special::SelfAd => frame,
            _ => return None,
        };
        if self.top(frame).has_special(special) { None } else { Some(f) }
    }

    /// Finds a plain name written in top-level frame `frame`: that ad,
    /// then (default semantics, in a match) the other one.
    #[inline]
    fn lookup_plain_top(&self, name: &AttrName, frame: u32) -> Option<(&'a Expr, u32)> {
        if let Some(e) = self.top(frame).lookup(name) {
            return Some((e, frame));
        }
        if !self.strict && self.target.is_some() {
            let other = 1 - frame;
            if let Some(e) = self.top(other).lookup(name) {
                return Some((e, other));
            }
        }
        None
    }

    /// The common attribute references, resolved without walking scopes:
    /// `Some(found)` when the fast path applies (`found` is `None` for a
    /// missing attribute), `None` when the general path must decide.
    #[inline]
    fn fast_ref(&self, e: &Expr, frame: u32) -> Option<Option<(&'a Expr, u32)>> {
        match e {
            Expr::Attr { name, absolute: false }
                if frame <= TARGET && name.special() == Special::None =>
            {
                Some(self.lookup_plain_top(name, frame))
            }
            Expr::Select(base, name) if name.special() == Special::None => {
                let Expr::Attr { name: scope, absolute: false } = &**base else { return None };
                let f = self.scope_frame_fast(scope, frame)?;
                Some(self.top(f).lookup(name).map(|e| (e, f)))
            }
            _ => None,
        }
    }

    /// Evaluates `e` as an operand: a literal (in the expression or in a
    /// top-level ad) is borrowed, not cloned.
    #[inline]
    fn operand<'x>(&mut self, e: &'x Expr, frame: u32) -> Opnd<'x>
    where
        'a: 'x,
    {
        match e {
            Expr::Lit(v) => Opnd::R(v),
            Expr::Paren(x) => self.operand(x, frame),
            // Comparisons and arithmetic nest shallowly in practice: skip
            // the stack check of the general path.
            Expr::Binary(op, l, r) if operand::is_comparison(*op) => {
                Opnd::O(self.guarded(|cx| cx.comparison(*op, l, r, frame).value()))
            }
            Expr::Binary(op, l, r) if !matches!(op, BinOp::And | BinOp::Or) => {
                Opnd::O(self.guarded(|cx| {
                    let lv = cx.operand(l, frame);
                    let rv = cx.operand(r, frame);
                    binary_op(*op, lv.get(), rv.get())
                }))
            }
            _ => match self.fast_ref(e, frame) {
                Some(Some((Expr::Lit(v), _))) => Opnd::R(v),
                Some(Some((found, f))) => Opnd::O(self.eval_attr_expr(found, f)),
                Some(None) => Opnd::O(Value::Undefined),
                None => Opnd::O(self.eval(e, frame)),
            },
        }
    }

    /// Evaluates `e` with `frame` as the current ad.
    #[inline]
    fn eval(&mut self, e: &Expr, frame: u32) -> Value {
        if let Expr::Lit(v) = e {
            return v.clone();
        }
        // Every other node is a step; with none left the whole remaining
        // tree collapses to `error` without being walked.
        if !self.budget.step() {
            return Value::Error;
        }
        match e {
            Expr::Lit(v) => v.clone(),
            Expr::Attr { name, absolute: false }
                if frame <= TARGET && name.special() == Special::None =>
            {
                match self.lookup_plain_top(name, frame) {
                    Some((e, f)) => self.eval_attr_expr(e, f),
                    None => Value::Undefined,
                }
            }
            Expr::Attr { name, absolute } => {
                let found = self.resolve(name, *absolute, frame);
                self.eval_found(found)
            }
            _ => self.guarded(|cx| cx.eval_compound(e, frame)),
        }
    }

    /// Runs one level of nested evaluation. Checking the stack costs a few
    /// nanoseconds, so it is checked every 16 levels, with a red zone that
    /// covers them; deeper recursion continues on a heap-allocated stack.
    #[inline]
    fn guarded<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        self.nest += 1;
        let v = if self.nest.is_multiple_of(16) {
            stacker::maybe_grow(256 * 1024, 2 * 1024 * 1024, || f(self))
        } else {
            f(self)
        };
        self.nest -= 1;
        v
    }

    fn eval_compound(&mut self, mut e: &Expr, frame: u32) -> Value {
        while let Expr::Paren(x) = e {
            e = x;
        }
        match e {
            Expr::Lit(_) | Expr::Attr { .. } | Expr::Paren(_) => self.eval(e, frame),
            Expr::Binary(op, l, r) => self.binary(*op, l, r, frame),
            Expr::Select(base, name) => match self.fast_ref(e, frame) {
                Some(Some((found, f))) => self.eval_attr_expr(found, f),
                Some(None) => Value::Undefined,
                None => self.select(base, name, frame),
            },
            Expr::Unary(op, x) => {
                let v = self.eval(x, frame);
                unary(*op, v)
            }
            Expr::Cond(c, a, b) => {
                let cv = self.eval(c, frame);
                match cv {
                    Value::Undefined => Value::Undefined,
                    v => match v.as_bool() {
                        Some(true) => self.eval(a, frame),
                        Some(false) => self.eval(b, frame),
                        None => Value::Error,
                    },
                }
            }
            Expr::Elvis(a, b) => match self.eval(a, frame) {
                Value::Undefined => self.eval(b, frame),
                v => v,
            },
            Expr::Index(base, idx) => self.index(base, idx, frame),
            Expr::Call(call) => self.call(call, frame),
            Expr::List(items) => {
                let items = items.iter().map(|x| self.eval(x, frame)).collect();
                self.make_list(items)
            }
            Expr::Record(ad) => {
                let key = Arc::as_ptr(ad) as usize;
                if !self.s.ad_parents.iter().any(|&(k, p)| k == key && p == frame) {
                    self.s.ad_parents.push((key, frame));
                }
                Value::Ad(ad.clone())
            }
        }
    }

    fn binary(&mut self, op: BinOp, l: &Expr, r: &Expr, frame: u32) -> Value {
        match op {
            BinOp::And | BinOp::Or => self.logic(op == BinOp::Or, l, r, frame).value(),
            op if operand::is_comparison(op) => self.comparison(op, l, r, frame).value(),
            _ => {
                let lv = self.operand(l, frame);
                let rv = self.operand(r, frame);
                binary_op(op, lv.get(), rv.get())
            }
        }
    }

    /// The frame a select's base names, or the value it evaluates to.
    fn scope_of(&mut self, base: &Expr, frame: u32) -> Result<u32, Value> {
        let v = match base {
            Expr::Attr { name, absolute } => match self.resolve(name, *absolute, frame) {
                Found::Frame(f) => return Ok(f),
                found => self.eval_found(found),
            },
            Expr::Paren(x) => return self.scope_of(x, frame),
            _ => self.eval(base, frame),
        };
        match v {
            Value::Ad(ad) => Ok(self.enter_ad(&ad)),
            v => Err(v),
        }
    }

    fn select(&mut self, base: &Expr, name: &AttrName, frame: u32) -> Value {
        match self.scope_of(base, frame) {
            Ok(f) => {
                let found = self.lookup_in_scope(name, f);
                self.eval_found(found)
            }
            Err(Value::List(items)) => {
                // `{[b=1],[b=2]}.b` selects from each element.
                let out = items
                    .iter()
                    .map(|item| match item {
                        Value::Ad(ad) => {
                            let f = self.enter_ad(ad);
                            let found = self.lookup_in_scope(name, f);
                            self.eval_found(found)
                        }
                        Value::Undefined => Value::Undefined,
                        _ => Value::Error,
                    })
                    .collect();
                self.make_list(out)
            }
            Err(Value::Undefined) => Value::Undefined,
            Err(_) => Value::Error,
        }
    }

    fn index(&mut self, base: &Expr, idx: &Expr, frame: u32) -> Value {
        let bv = self.scope_of(base, frame);
        let iv = self.eval(idx, frame);
        match (bv, iv) {
            (_, Value::Error) | (Err(Value::Error), _) => Value::Error,
            (_, Value::Undefined) | (Err(Value::Undefined), _) => Value::Undefined,
            (Err(Value::List(items)), Value::Int(i)) => {
                if i < 0 {
                    Value::Error
                } else {
                    items.get(i as usize).cloned().unwrap_or(Value::Error)
                }
            }
            (Ok(f), Value::Str(s)) => {
                let found = self.lookup_in_scope(&AttrName::new(&s), f);
                self.eval_found(found)
            }
            _ => Value::Error,
        }
    }

    fn call(&mut self, call: &crate::ast::Call, frame: u32) -> Value {
        match call.func {
            None => Value::Error,
            Some(Builtin::Strict(f)) => {
                let args: Vec<Value> = call.args.iter().map(|a| self.eval(a, frame)).collect();
                // A built-in's work is bounded by what it reads (its
                // arguments, each bounded by the budget that made it) ...
                let cap = self.budget.steps().saturating_mul(budget::BYTES_PER_STEP);
                let mut read = 0u64;
                for a in &args {
                    read = read.saturating_add(budget::value_weight(a, cap.saturating_sub(read)));
                }
                if !self.budget.read(read) {
                    return Value::Error;
                }
                let mut env = FnEnv {
                    now: self.now.unwrap_or_else(system_now),
                    rng: self.rng,
                    budget: &mut self.budget,
                };
                let v = f(&args, &mut env);
                // ... and what it made is charged like any value made.
                match &v {
                    Value::Str(_) | Value::List(_) | Value::Ad(_) => {
                        if !self.budget.make(budget::value_weight(&v, self.budget.bytes())) {
                            return Value::Error;
                        }
                        v
                    }
                    _ if self.budget.is_spent() => Value::Error,
                    _ => v,
                }
            }
            Some(Builtin::Special(s)) => self.special(s, &call.args, frame),
        }
    }

    fn special(&mut self, s: SpecialFn, args: &[Expr], frame: u32) -> Value {
        match s {
            SpecialFn::IfThenElse => {
                let [c, a, b] = args else { return Value::Error };
                match self.eval(c, frame) {
                    Value::Undefined => Value::Undefined,
                    v => match v.as_bool() {
                        Some(true) => self.eval(a, frame),
                        Some(false) => self.eval(b, frame),
                        None => Value::Error,
                    },
                }
            }
            SpecialFn::Eval => {
                let [x] = args else { return Value::Error };
                match self.eval(x, frame) {
                    // The expression parsed from a string is a value made:
                    // a few nodes of some 40 bytes for every few bytes of text.
                    Value::Str(text) if !self.budget.make(text.len() as u64 * 16) => Value::Error,
                    Value::Str(text) => match crate::parse_expr(&text) {
                        Ok(e) => {
                            if self.depth >= MAX_ATTR_DEPTH {
                                return Value::Error;
                            }
                            self.depth += 1;
                            let v = stacker::maybe_grow(128 * 1024, 2 * 1024 * 1024, || {
                                self.eval(&e, frame)
                            });
                            self.depth -= 1;
                            v
                        }
                        Err(_) => Value::Error,
                    },
                    Value::Undefined => Value::Undefined,
                    _ => Value::Error,
                }
            }
            SpecialFn::Unparse => {
                let [x] = args else { return Value::Error };
                let target = match x.unparen() {
                    Expr::Attr { name, absolute } => Some(self.resolve(name, *absolute, frame)),
                    Expr::Select(base, name) => match self.scope_of(base, frame) {
                        Ok(f) => Some(self.lookup_in_scope(name, f)),
                        Err(_) => None,
                    },
                    _ => None,
                };
                let text = match target {
                    Some(Found::Attr(ad, i, _)) => match ad.get().get_index(i) {
                        Some((_, e)) => e.to_string(),
                        None => String::new(),
                    },
                    Some(_) => String::new(),
                    None => x.to_string(),
                };
                if !self.budget.make(text.len() as u64) {
                    return Value::Error;
                }
                Value::string(text)
            }
        }
    }
}

/// An evaluated operand: borrowed when it is a literal, owned otherwise.
enum Opnd<'x> {
    R(&'x Value),
    O(Value),
}

impl Opnd<'_> {
    #[inline]
    fn get(&self) -> &Value {
        match self {
            Opnd::R(v) => v,
            Opnd::O(v) => v,
        }
    }
}

/// A unary operator on a value.
pub fn unary(op: UnOp, v: Value) -> Value {
    match (op, v) {
        (_, Value::Undefined) => Value::Undefined,
        (UnOp::Not, v) => match v.as_bool() {
            Some(b) => Value::Bool(!b),
            None => Value::Error,
        },
        (UnOp::Neg, Value::Int(i)) => Value::Int(i.wrapping_neg()),
        (UnOp::Neg, Value::Real(r)) => Value::Real(-r),
        (UnOp::Plus, v @ (Value::Int(_) | Value::Real(_))) => v,
        (UnOp::BitNot, Value::Int(i)) => Value::Int(!i),
        (UnOp::BitNot, Value::Bool(b)) => Value::Bool(!b),
        _ => Value::Error,
    }
}

/// Numeric operand: booleans promote to integers in binary arithmetic.
enum Num {
    I(i64),
    R(f64),
}

fn num(v: &Value) -> Option<Num> {
    match v {
        Value::Int(i) => Some(Num::I(*i)),
        Value::Real(r) => Some(Num::R(*r)),
        Value::Bool(b) => Some(Num::I(*b as i64)),
        _ => None,
    }
}

/// A real result: only `+inf` becomes error, as in HTCondor.
fn real_result(r: f64) -> Value {
    if r == f64::INFINITY { Value::Error } else { Value::Real(r) }
}

/// A (non-logical) binary operator on two values, with HTCondor's rules.
#[inline]
pub fn binary_op(op: BinOp, l: &Value, r: &Value) -> Value {
    // The matchmaking common cases first: integers, and interned strings.
    match (l, r) {
        (Value::Int(a), Value::Int(b)) => match op {
            BinOp::Eq => return Value::Bool(a == b),
            BinOp::Ne => return Value::Bool(a != b),
            BinOp::Lt => return Value::Bool(a < b),
            BinOp::Le => return Value::Bool(a <= b),
            BinOp::Gt => return Value::Bool(a > b),
            BinOp::Ge => return Value::Bool(a >= b),
            _ => {}
        },
        (Value::Str(a), Value::Str(b)) if Arc::ptr_eq(a, b) => match op {
            BinOp::Eq | BinOp::Le | BinOp::Ge | BinOp::Is => return Value::Bool(true),
            BinOp::Ne | BinOp::Lt | BinOp::Gt | BinOp::Isnt => return Value::Bool(false),
            _ => {}
        },
        _ => {}
    }
    binary_op_slow(op, l, r)
}

fn binary_op_slow(op: BinOp, l: &Value, r: &Value) -> Value {
    match op {
        BinOp::Is => return strict_eq(l, r),
        BinOp::Isnt => {
            return match strict_eq(l, r) {
                Value::Bool(b) => Value::Bool(!b),
                v => v,
            };
        }
        BinOp::And | BinOp::Or => {
            // Reached only for already-evaluated operands (e.g. from builtins).
            return match (l.as_bool(), r.as_bool()) {
                (Some(a), Some(b)) => Value::Bool(if op == BinOp::And { a && b } else { a || b }),
                _ => Value::Error,
            };
        }
        _ => {}
    }
    if l.is_error() || r.is_error() {
        return Value::Error;
    }
    if l.is_undefined() || r.is_undefined() {
        return Value::Undefined;
    }
    match op {
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => compare(op, l, r),
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod => {
            let (Some(a), Some(b)) = (num(l), num(r)) else { return Value::Error };
            match (a, b) {
                (Num::I(a), Num::I(b)) => match op {
                    BinOp::Add => Value::Int(a.wrapping_add(b)),
                    BinOp::Sub => Value::Int(a.wrapping_sub(b)),
                    BinOp::Mul => Value::Int(a.wrapping_mul(b)),
                    BinOp::Div if b == 0 => Value::Error,
                    BinOp::Div => Value::Int(a.wrapping_div(b)),
                    BinOp::Mod if b == 0 => Value::Error,
                    _ => Value::Int(a.wrapping_rem(b)),
                },
                (a, b) => {
                    let a = match a {
                        Num::I(i) => i as f64,
                        Num::R(r) => r,
                    };
                    let b = match b {
                        Num::I(i) => i as f64,
                        Num::R(r) => r,
                    };
                    match op {
                        BinOp::Add => real_result(a + b),
                        BinOp::Sub => real_result(a - b),
                        BinOp::Mul => real_result(a * b),
                        BinOp::Div => real_result(a / b),
                        _ => Value::Error,
                    }
                }
            }
        }
        BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor => match (l, r) {
            (Value::Int(a), Value::Int(b)) => Value::Int(match op {
                BinOp::BitAnd => a & b,
                BinOp::BitOr => a | b,
                _ => a ^ b,
            }),
            (Value::Bool(a), Value::Bool(b)) => Value::Bool(match op {
                BinOp::BitAnd => a & b,
                BinOp::BitOr => a | b,
                _ => a ^ b,
            }),
            _ => Value::Error,
        },
        BinOp::Shl | BinOp::Shr | BinOp::UShr => match (l, r) {
            (Value::Int(a), Value::Int(b)) => {
                let s = (*b & 63) as u32;
                Value::Int(match op {
                    BinOp::Shl => a.wrapping_shl(s),
                    BinOp::Shr => a.wrapping_shr(s),
                    _ => ((*a as u64) >> s) as i64,
                })
            }
            _ => Value::Error,
        },
        _ => Value::Error,
    }
}

/// `==`, `!=`, `<`, `<=`, `>`, `>=` on two defined, non-error values:
/// numbers by value, strings case-insensitively, anything else is error.
pub fn compare(op: BinOp, l: &Value, r: &Value) -> Value {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match (l, r) {
        (Value::Str(a), Value::Str(b)) if matches!(op, BinOp::Eq | BinOp::Ne) => {
            return Value::Bool(a.eq_ignore_ascii_case(b) == (op == BinOp::Eq));
        }
        (Value::Str(a), Value::Str(b)) => Some(cmp_ignore_case(a, b)),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        _ => match (num(l), num(r)) {
            (Some(Num::I(a)), Some(Num::I(b))) => Some(a.cmp(&b)),
            (Some(a), Some(b)) => {
                let a = match a {
                    Num::I(i) => i as f64,
                    Num::R(r) => r,
                };
                let b = match b {
                    Num::I(i) => i as f64,
                    Num::R(r) => r,
                };
                // NaN: every comparison is false but `!=`.
                match a.partial_cmp(&b) {
                    Some(o) => Some(o),
                    None => return Value::Bool(op == BinOp::Ne),
                }
            }
            _ => return Value::Error,
        },
    };
    let Some(o) = ord else { return Value::Error };
    Value::Bool(match op {
        BinOp::Eq => o == Ordering::Equal,
        BinOp::Ne => o != Ordering::Equal,
        BinOp::Lt => o == Ordering::Less,
        BinOp::Le => o != Ordering::Greater,
        BinOp::Gt => o == Ordering::Greater,
        _ => o != Ordering::Less,
    })
}

/// ASCII case-insensitive ordering, as `strcasecmp`.
pub fn cmp_ignore_case(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (x.to_ascii_lowercase(), y.to_ascii_lowercase());
        if x != y {
            return x.cmp(&y);
        }
    }
    a.len().cmp(&b.len())
}

/// `=?=`: same type and same value, strings case-sensitively; never
/// undefined. Lists and ads cannot be compared (error).
pub fn strict_eq(l: &Value, r: &Value) -> Value {
    match (l, r) {
        (Value::List(_), Value::List(_)) | (Value::Ad(_), Value::Ad(_)) => Value::Error,
        _ => Value::Bool(l.identical(r)),
    }
}
