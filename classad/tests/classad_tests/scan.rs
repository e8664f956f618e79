//! The fast paths of evaluation against their references. `Evaluator::scan`
//! compiles the common shapes of a match expression and reads literals from
//! the attribute index: each value must be exactly the one `Evaluator::eval`
//! gives. The general evaluator decides comparisons and `&&`/`||` on
//! operands read from index slots: each value must be `binary_op`'s on the
//! operands' values, and HTCondor's three-valued logic. These properties
//! generate ads (small and indexed, with case variants of names and strings,
//! attribute chains, cycles, names that shadow `MY` and `TARGET`) and
//! expressions (`&&`/`||` chains of comparisons and other clauses).

use classad::eval::binary_op;
use classad::{BinOp, ClassAd, EvalOptions, Evaluator, Value, parse_ad, parse_expr};
use proptest::prelude::*;

/// Attribute names the ads define and the expressions read, with case
/// variants, and scope names that some ads define themselves.
const NAMES: &[&str] = &[
    "Arch", "arch", "OpSys", "OPSYS", "Memory", "memory", "Disk", "Cpus", "Chain", "Chain2", "Cyc",
    "Name", "Long", "Flag", "Load", "Target", "My", "other",
];

/// Values, as text, including expressions over other attributes.
const VALUES: &[&str] = &[
    "0",
    "1",
    "-3",
    "2048",
    "9223372036854775807",
    "1.5",
    "0.0",
    "-0.0",
    "real(\"NaN\")",
    "true",
    "false",
    "undefined",
    "error",
    "\"X86_64\"",
    "\"x86_64\"",
    "\"LINUX\"",
    "\"linux\"",
    "\"\"",
    "\"aarch64\"",
    "\"a string longer than the interner keeps, 0123456789\"",
    "\"A STRING LONGER THAN THE INTERNER KEEPS, 0123456789\"",
    "{ 1, 2 }",
    "[ a = 1; b = Memory ]",
    "Memory",
    "MY.Memory",
    "TARGET.Memory",
    "Chain2",
    "Disk",
    "Cyc",
    "Memory + 1",
    "ifThenElse(Memory > 1, Arch, Disk)",
    "random(10)",
    "time()",
    "TARGET.Arch == \"X86_64\"",
];

/// A value: often a small integer or a short string, so that comparisons
/// come out both ways.
fn value() -> BoxedStrategy<&'static str> {
    prop_oneof![
        2 => prop::sample::select(&["0", "1", "2048"][..]),
        1 => prop::sample::select(&["\"X86_64\"", "\"x86_64\"", "\"aarch64\""][..]),
        2 => prop::sample::select(VALUES),
    ]
    .boxed()
}

fn ad_text() -> impl Strategy<Value = String> {
    (prop::collection::vec((prop::sample::select(NAMES), value()), 0..14), 0usize..24).prop_map(
        |(attrs, fillers)| {
            let mut s = String::from("[");
            for (n, v) in attrs {
                s.push_str(&format!("{n} = {v}; "));
            }
            // Fillers push the ad past the size below which it is scanned.
            for i in 0..fillers {
                s.push_str(&format!("Filler{i} = {i}; "));
            }
            s.push(']');
            s
        },
    )
}

fn operand() -> impl Strategy<Value = String> {
    let name = prop::sample::select(NAMES);
    prop_oneof![
        3 => value().prop_map(str::to_string),
        3 => name.clone().prop_map(|n| format!("TARGET.{n}")),
        1 => name.clone().prop_map(|n| format!("MY.{n}")),
        1 => name.clone().prop_map(|n| n.to_string()),
        1 => name.clone().prop_map(|n| format!("other.{n}")),
        1 => name.clone().prop_map(|n| format!("(TARGET.{n})")),
        1 => name.clone().prop_map(|n| format!(".{n}")),
        1 => name.clone().prop_map(|n| format!("TARGET.{n}.b")),
        1 => name.prop_map(|n| format!("TARGET.{n} + 1")),
    ]
}

fn clause() -> impl Strategy<Value = String> {
    let op = prop::sample::select(&["==", "!=", "<", "<=", ">", ">=", "=?=", "=!=", "is", "isnt"]);
    prop_oneof![
        4 => (operand(), op, operand()).prop_map(|(l, op, r)| format!("{l} {op} {r}")),
        1 => operand(),
        1 => operand().prop_map(|o| format!("!({o})")),
        1 => operand().prop_map(|o| format!("isUndefined({o})")),
    ]
}

fn expr_text() -> impl Strategy<Value = String> {
    let leaf = clause().prop_map(|c| format!("({c})"));
    leaf.prop_recursive(3, 12, 4, |inner| {
        (prop::collection::vec(inner, 2..5), any::<bool>(), any::<bool>()).prop_map(
            |(items, or, paren)| {
                let joined = items.join(if or { " || " } else { " && " });
                if paren { format!("({joined})") } else { joined }
            },
        )
    })
}

fn options(strict: bool) -> EvalOptions {
    EvalOptions { strict, now: Some(1_700_000_000), seed: Some(7), ..Default::default() }
}

/// The values of `scan`, and those of `eval` one ad at a time, with
/// evaluators in the same state (for `random()`).
fn both(expr: &str, my: &ClassAd, targets: &[ClassAd], strict: bool) -> (Vec<Value>, Vec<Value>) {
    let e = parse_expr(expr).unwrap_or_else(|err| panic!("{expr}: {err}"));
    let mut scanned = Vec::new();
    Evaluator::with_options(options(strict)).scan(&e, my, targets, |i, v| {
        assert_eq!(i, scanned.len());
        scanned.push(v)
    });
    let mut ev = Evaluator::with_options(options(strict));
    let evaluated = targets.iter().map(|t| ev.eval(&e, Some(my), Some(t))).collect();
    (scanned, evaluated)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn scan_gives_the_values_of_eval(
        expr in expr_text(),
        my in ad_text(),
        targets in prop::collection::vec(ad_text(), 1..6),
    ) {
        let my = parse_ad(&my).unwrap();
        let targets: Vec<ClassAd> = targets.iter().map(|t| parse_ad(t).unwrap()).collect();
        for strict in [false, true] {
            let (scanned, evaluated) = both(&expr, &my, &targets, strict);
            prop_assert_eq!(scanned, evaluated, "`{}` strict={}", expr, strict);
        }
    }
}

/// `l && r` (`l || r` when `or`) as HTCondor defines it: the left operand
/// alone decides when it is error or the deciding value, and undefined on
/// the left still lets the right decide. `r` is evaluated only if needed.
fn reference_logic(or: bool, l: Value, r: impl FnOnce() -> Value) -> Value {
    let as_logic = |v: Value| match v {
        Value::Undefined | Value::Error => v,
        v => v.as_bool().map_or(Value::Error, Value::Bool),
    };
    match as_logic(l) {
        Value::Error => Value::Error,
        Value::Undefined => match as_logic(r()) {
            Value::Bool(b) if b == or => Value::Bool(or),
            Value::Bool(_) => Value::Undefined,
            v => v,
        },
        Value::Bool(b) if b == or => Value::Bool(or),
        _ => as_logic(r()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn comparisons_and_logic_give_the_reference_values(
        l in operand(),
        op in prop::sample::select(&[
            BinOp::Eq, BinOp::Ne, BinOp::Lt, BinOp::Le, BinOp::Gt, BinOp::Ge, BinOp::Is,
            BinOp::Isnt, BinOp::And, BinOp::Or,
        ][..]),
        r in operand(),
        my in ad_text(),
        target in ad_text(),
        strict in any::<bool>(),
    ) {
        let (my, target) = (parse_ad(&my).unwrap(), parse_ad(&target).unwrap());
        let text = format!("({l}) {} ({r})", op.symbol());
        let whole = parse_expr(&text).unwrap();
        let (le, re) = (parse_expr(&l).unwrap(), parse_expr(&r).unwrap());
        let got = Evaluator::with_options(options(strict)).eval(&whole, Some(&my), Some(&target));
        let mut ev = Evaluator::with_options(options(strict));
        let lv = ev.eval(&le, Some(&my), Some(&target));
        let want = match op {
            BinOp::And | BinOp::Or => {
                reference_logic(op == BinOp::Or, lv, || ev.eval(&re, Some(&my), Some(&target)))
            }
            _ => binary_op(op, &lv, &ev.eval(&re, Some(&my), Some(&target))),
        };
        prop_assert_eq!(got, want, "`{}`", text);
    }
}

#[test]
fn scan_decides_strings_by_address_tag_and_text() {
    let my = parse_ad("[RequestMemory = 2048; RequestDisk = DiskUsage; DiskUsage = 10]").unwrap();
    let mut targets = Vec::new();
    for arch in ["X86_64", "x86_64", "X86_65", "aarch64", "", "x86_64 but longer than 32 bytes...."]
    {
        let mut t = String::from("[");
        for i in 0..20 {
            t.push_str(&format!("F{i} = {i}; "));
        }
        t.push_str(&format!("Arch = \"{arch}\"; Memory = 4096; Disk = 10]"));
        targets.push(parse_ad(&t).unwrap());
    }
    let expr = "(TARGET.Arch == \"X86_64\") && (TARGET.Memory >= MY.RequestMemory) && \
                (TARGET.Disk >= MY.RequestDisk)";
    for op in ["==", "!=", "=?=", "=!=", "<", ">="] {
        let e = format!("TARGET.Arch {op} \"X86_64\"");
        for strict in [false, true] {
            let (s, v) = both(&e, &my, &targets, strict);
            assert_eq!(s, v, "{e}");
        }
    }
    let (s, v) = both(expr, &my, &targets, false);
    assert_eq!(s, v);
    let t = Value::Bool(true);
    let f = Value::Bool(false);
    assert_eq!(s, [t.clone(), t, f.clone(), f.clone(), f.clone(), f]);
}
