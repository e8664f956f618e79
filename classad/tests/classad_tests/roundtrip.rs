//! Unparse round trip: every expression prints in canonical syntax that
//! parses back to an equal expression.

use std::sync::Arc;

use classad::ast::Call;
use classad::{AttrName, BinOp, ClassAd, Expr, UnOp, Value, parse_ad, parse_expr};
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z_][A-Za-z0-9_]{0,8}",
        Just("is".to_string()),
        Just("TRUE".to_string()),
        "[ -~]{1,6}",
        "\\PC{1,4}",
    ]
}

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        any::<i64>().prop_map(|i| Expr::Lit(Value::Int(i))),
        any::<f64>().prop_map(|r| Expr::Lit(Value::Real(r))),
        prop::sample::select(vec![f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.0])
            .prop_map(|r| Expr::Lit(Value::Real(r))),
        any::<bool>().prop_map(|b| Expr::Lit(Value::Bool(b))),
        Just(Expr::Lit(Value::Undefined)),
        Just(Expr::Lit(Value::Error)),
        "\\PC{0,8}".prop_map(|s| Expr::Lit(Value::string(s))),
        any::<String>().prop_map(|s| Expr::Lit(Value::string(s))),
        (name(), any::<bool>())
            .prop_map(|(n, absolute)| Expr::Attr { name: AttrName::new(&n), absolute }),
    ]
}

fn binop() -> impl Strategy<Value = BinOp> {
    prop::sample::select(vec![
        BinOp::Or,
        BinOp::And,
        BinOp::BitOr,
        BinOp::BitXor,
        BinOp::BitAnd,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::Is,
        BinOp::Isnt,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
        BinOp::Shl,
        BinOp::Shr,
        BinOp::UShr,
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Mod,
    ])
}

fn expr() -> impl Strategy<Value = Expr> {
    leaf().prop_recursive(6, 64, 4, |inner| {
        prop_oneof![
            (
                prop::sample::select(vec![UnOp::Neg, UnOp::Plus, UnOp::Not, UnOp::BitNot]),
                inner.clone()
            )
                .prop_map(|(op, e)| Expr::Unary(op, std::sync::Arc::new(e))),
            (binop(), inner.clone(), inner.clone()).prop_map(|(op, l, r)| Expr::Binary(
                op,
                std::sync::Arc::new(l),
                std::sync::Arc::new(r)
            )),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(|(c, a, b)| Expr::Cond(
                std::sync::Arc::new(c),
                std::sync::Arc::new(a),
                std::sync::Arc::new(b)
            )),
            (inner.clone(), inner.clone())
                .prop_map(|(a, b)| Expr::Elvis(std::sync::Arc::new(a), std::sync::Arc::new(b))),
            (inner.clone(), name())
                .prop_map(|(b, n)| Expr::Select(std::sync::Arc::new(b), AttrName::new(&n))),
            (inner.clone(), inner.clone())
                .prop_map(|(b, i)| Expr::Index(std::sync::Arc::new(b), std::sync::Arc::new(i))),
            inner.clone().prop_map(|e| Expr::Paren(std::sync::Arc::new(e))),
            (
                prop::sample::select(vec![
                    "strcat",
                    "member",
                    "ifThenElse",
                    "nosuchfunction",
                    "size"
                ]),
                prop::collection::vec(inner.clone(), 0..4)
            )
                .prop_map(|(n, args)| Expr::Call(std::sync::Arc::new(Call {
                    name: n.into(),
                    func: classad::builtins::lookup(n),
                    args
                }))),
            prop::collection::vec(inner.clone(), 0..4).prop_map(Expr::List),
            prop::collection::vec((name(), inner), 0..4).prop_map(|items| {
                let mut ad = ClassAd::new();
                for (n, e) in items {
                    ad.insert(n.as_str(), e);
                }
                Expr::Record(Arc::new(ad))
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn unparse_then_parse_is_identity(e in expr()) {
        let text = e.to_string();
        let back = parse_expr(&text).map_err(|err| TestCaseError::fail(format!("{text:?}: {err}")))?;
        prop_assert_eq!(&back, &e, "text: {}", text);
        // Canonical text is a fixed point.
        prop_assert_eq!(back.to_string(), text);
    }

    #[test]
    fn ads_round_trip_in_both_syntaxes(items in prop::collection::vec((name(), expr()), 0..6)) {
        let mut ad = ClassAd::new();
        for (n, e) in items {
            ad.insert(n.as_str(), e);
        }
        let new_syntax = ad.to_string();
        prop_assert_eq!(&parse_ad(&new_syntax).map_err(|e| TestCaseError::fail(format!("{new_syntax}: {e}")))?, &ad);
        // Old syntax holds one attribute per line; values with newlines in
        // nested parts are still one line because strings escape them.
        let old = ad.to_old_syntax();
        if !ad.is_empty() {
            prop_assert_eq!(&classad::parse_old_ad(&old).map_err(|e| TestCaseError::fail(format!("{old}: {e}")))?, &ad);
        }
    }

    #[test]
    fn json_round_trips(items in prop::collection::vec((name(), expr()), 0..6)) {
        let mut ad = ClassAd::new();
        for (n, e) in items {
            ad.insert(n.as_str(), e);
        }
        let text = classad::json::ad_to_json_string(&ad);
        let back = classad::json::ad_from_json_str(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(&back, &ad);
        let via_serde: ClassAd = serde_json::from_str(&serde_json::to_string(&ad).unwrap()).unwrap();
        prop_assert_eq!(&via_serde, &ad);
    }

    #[test]
    fn an_ad_travels_as_a_delta_from_another(
        base in prop::collection::vec((name(), expr()), 0..8),
        kept in prop::collection::vec(any::<bool>(), 8),
        more in prop::collection::vec((name(), expr()), 0..4),
    ) {
        // `ad` keeps some of `base`'s attributes, changes or adds others.
        let mut b = ClassAd::new();
        for (n, e) in &base {
            b.insert(n.as_str(), e.clone());
        }
        let mut ad = ClassAd::new();
        for ((n, e), keep) in base.iter().zip(&kept) {
            if *keep {
                ad.insert(n.as_str(), e.clone());
            }
        }
        for (n, e) in more {
            ad.insert(n.as_str(), e);
        }
        let (delta, unset) = ad.delta_from(&b);
        // As a batch carries it: printed, parsed back on the other side.
        let text = delta.to_string();
        let delta = parse_ad(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(&b.with_delta(&delta, &unset), &ad, "delta {} unset {:?}", text, unset);
        // Nothing the two share travels.
        for (n, e) in delta.iter() {
            prop_assert!(b.lookup(n) != Some(e), "{} travelled unchanged", n.as_str());
        }
    }

    #[test]
    fn parser_never_panics(s in "\\PC{0,64}") {
        let _ = parse_expr(&s);
        let _ = parse_ad(&s);
    }
}
