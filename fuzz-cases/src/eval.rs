//! Evaluates an arbitrary expression against two arbitrary ads, matches the
//! ads and round-trips them through JSON. Nothing may panic or hang, and no
//! evaluation may allocate past its byte budget (a small multiple of
//! `DEFAULT_MAX_BYTES`, plus a multiple of the input's own size): a
//! counting allocator measures each one.
//!
//! Input layout: one flag byte (bit 0: strict evaluation), then the
//! expression, the MY ad and the TARGET ad separated by 0 bytes. A part
//! that is missing or does not parse is the empty ad (for an ad) or skips
//! expression evaluation (for the expression).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use classad::{ClassAd, EvalOptions, Evaluator, Expr, Value};

/// Counts the bytes this thread allocates.
struct Counting;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed on to `System` unchanged; the counter is a
// thread-local `Cell` with a constant initialiser and no destructor.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.with(|a| a.set(a.get() + layout.size() as u64));
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.with(|a| a.set(a.get() + new_size.saturating_sub(layout.size()) as u64));
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Evaluates and checks what the evaluation allocated against its budget.
fn eval_bounded(
    ev: &mut Evaluator,
    expr: &Expr,
    my: Option<&ClassAd>,
    target: Option<&ClassAd>,
    input: usize,
) -> Value {
    let before = ALLOCATED.with(Cell::get);
    let v = ev.eval(expr, my, target);
    let spent = ALLOCATED.with(Cell::get) - before;
    let bound = 4 * classad::eval::DEFAULT_MAX_BYTES + 64 * input as u64 + (1 << 20);
    assert!(spent <= bound, "one evaluation allocated {spent} bytes, past {bound}");
    v
}

fn parse_ad(part: Option<&[u8]>) -> ClassAd {
    part.and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|t| classad::parse_ad(t).ok())
        .unwrap_or_default()
}

fn json_round_trip(ad: &ClassAd) {
    let json = classad::json::ad_to_json_string(ad);
    let back = classad::json::ad_from_json_str(&json)
        .unwrap_or_else(|e| panic!("JSON of an ad does not read back: {json:?}: {e}"));
    assert_eq!(&back, ad, "JSON round trip through {json:?}");
}

/// Runs one input through the target's checks; panics on a failure.
pub fn run(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut parts = rest.splitn(3, |&b| b == 0);
    let expr = parts
        .next()
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|t| classad::parse_expr(t).ok());
    let my = parse_ad(parts.next());
    let target = parse_ad(parts.next());

    let mut ev = Evaluator::with_options(EvalOptions {
        now: Some(1_700_000_000),
        seed: Some(1),
        strict: flags & 1 != 0,
        ..Default::default()
    });
    let n = data.len();
    if let Some(expr) = &expr {
        let v = eval_bounded(&mut ev, expr, Some(&my), Some(&target), n);
        let _ = v.to_string();
        let _ = eval_bounded(&mut ev, expr, Some(&my), None, n);
        let _ = eval_bounded(&mut ev, expr, None, None, n);
    }
    for (name, _) in my.iter() {
        let _ = ev.eval_attr(&my, Some(&target), name.as_str());
    }
    let _ = classad::matching::symmetric_match(&my, &target);
    let _ = classad::rank(&my, &target);
    json_round_trip(&my);
    json_round_trip(&target);
}
