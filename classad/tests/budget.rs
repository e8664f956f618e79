//! Evaluation is bounded: an expression whose work doubles at each link of a
//! chain ends in `error` after its step budget instead of running for years.

use classad::{EvalOptions, Evaluator, Value, parse_ad, parse_expr};

/// `[a0 = 1; a1 = a0 + a0; ...; aN = a(N-1) + a(N-1)]`: evaluating `aN` takes
/// 2^N steps without a bound.
fn doubling(n: usize) -> String {
    let mut s = String::from("[a0 = 1");
    for i in 1..=n {
        s.push_str(&format!("; a{i} = a{} + a{}", i - 1, i - 1));
    }
    s.push(']');
    s
}

#[test]
fn a_doubling_chain_is_cut_off_with_error() {
    let ad = parse_ad(&doubling(40)).unwrap();
    let mut ev = Evaluator::new();
    let v = ev.eval(&parse_expr("a40").unwrap(), Some(&ad), None);
    assert_eq!(v, Value::Error);
    assert!(ev.exhausted());
    // The same chain, short enough, still evaluates exactly.
    let ad = parse_ad(&doubling(10)).unwrap();
    let mut ev = Evaluator::new();
    assert_eq!(ev.eval(&parse_expr("a10").unwrap(), Some(&ad), None), Value::Int(1024));
    assert!(!ev.exhausted());
}

#[test]
fn a_nested_chain_inside_an_expression_is_cut_off_too() {
    let e = parse_expr(&format!("{}.a35 > 0 || true", doubling(35))).unwrap();
    let mut ev = Evaluator::new();
    // Once the budget is spent, everything left is `error`, which `||`
    // propagates as HTCondor's logic does.
    assert_eq!(ev.eval(&e, None, None), Value::Error);
    assert!(ev.exhausted());
}

#[test]
fn the_budget_is_per_evaluation_and_configurable() {
    let ad = parse_ad(&doubling(12)).unwrap();
    let e = parse_expr("a12").unwrap();
    let mut small =
        Evaluator::with_options(EvalOptions { max_steps: Some(100), ..Default::default() });
    assert_eq!(small.eval(&e, Some(&ad), None), Value::Error);
    // A later, cheap evaluation is not affected by an earlier costly one.
    assert_eq!(small.eval(&parse_expr("1 + 2").unwrap(), None, None), Value::Int(3));
}

#[test]
fn a_step_pool_bounds_many_evaluations_together() {
    let ad = parse_ad(&doubling(8)).unwrap();
    let e = parse_expr("a8").unwrap();
    let mut ev = Evaluator::new();
    ev.set_step_pool(Some(2_000));
    let mut ok = 0;
    for _ in 0..20 {
        if ev.eval(&e, Some(&ad), None) == Value::Int(256) {
            ok += 1;
        }
    }
    // Each evaluation takes about 2 × 256 steps: a few fit, then the pool is spent.
    assert!((1..20).contains(&ok), "{ok}");
    assert!(ev.exhausted());
    ev.set_step_pool(None);
    assert!(!ev.exhausted());
    assert_eq!(ev.eval(&e, Some(&ad), None), Value::Int(256));
}
