//! Names made after the global interner is full get no identity and are
//! compared by text. This test fills the interner (so it runs in its own
//! process) and checks that lookups, equality and scans still treat names
//! case-insensitively and exactly, for names with and without identities
//! in the same ads.

use classad::{AttrName, ClassAd, Evaluator, Value, parse_ad, parse_expr};

#[test]
fn names_made_after_the_interner_is_full_still_compare_exactly() {
    // Made while the interner has room.
    let early = parse_ad("[Memory = 1; Arch = \"X86_64\"]").unwrap();
    for i in 0..70_000 {
        let _ = AttrName::new(&format!("FillerName{i}"));
    }
    // New texts now get no identity; a new spelling of an interned name
    // still gets that name's identity.
    assert_eq!(AttrName::new("BrandNewName"), AttrName::new("BRANDNEWNAME"));
    assert_ne!(AttrName::new("BrandNewName"), AttrName::new("BrandNewName2"));
    assert_eq!(AttrName::new("MEMORY"), AttrName::new("memory"));
    assert_ne!(AttrName::new("BrandNewName"), AttrName::new("Memory"));

    let mut text = String::from("[");
    for i in 0..20 {
        text.push_str(&format!("Late{i} = {i}; lateonly{i} = \"s{i}\"; "));
    }
    text.push_str(
        "MEMORY = 4096; arch = \"x86_64\"; Another_New = 7; RequestMemory = ANOTHER_NEW]",
    );
    let late = parse_ad(&text).unwrap();
    assert_eq!(late.get("late3").and_then(|e| e.as_literal()), Some(&Value::Int(3)));
    assert_eq!(late.get("LATEONLY4").and_then(|e| e.as_literal()), Some(&Value::string("s4")));
    assert_eq!(late.get("memory").and_then(|e| e.as_literal()), Some(&Value::Int(4096)));
    assert!(late.get("Late99").is_none());
    assert!(late.get("BrandNewName").is_none());
    assert_eq!(late.eval_attr("requestmemory"), Value::Int(7));

    let targets: Vec<ClassAd> = vec![late.clone(), early.clone(), parse_ad(&text).unwrap()];
    for expr in [
        "TARGET.Memory >= 2048 && TARGET.ARCH == \"X86_64\"",
        "TARGET.late5 == 5 && TARGET.LateOnly5 == \"S5\" && TARGET.another_new =?= 7",
        "TARGET.Late19 < MY.Memory || TARGET.NoSuchNewName =?= undefined",
    ] {
        let e = parse_expr(expr).unwrap();
        let mut scanned = Vec::new();
        Evaluator::new().scan(&e, &early, &targets, |_, v| scanned.push(v));
        let mut ev = Evaluator::new();
        let evaluated: Vec<Value> =
            targets.iter().map(|t| ev.eval(&e, Some(&early), Some(t))).collect();
        assert_eq!(scanned, evaluated, "{expr}");
    }
    let e = parse_expr("TARGET.late5 == 5 && TARGET.LateOnly5 == \"S5\"").unwrap();
    assert_eq!(Evaluator::new().eval(&e, Some(&early), Some(&late)), Value::Bool(true));
}
