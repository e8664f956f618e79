//! The language's edges: errors with positions, bounded depth, scoping,
//! cycles, old syntax, options.

use classad::{ClassAd, EvalOptions, Evaluator, Value, parse_ad, parse_expr, parse_old_ad};

fn eval_in(expr: &str, my: &str, target: Option<&str>) -> Value {
    let e = parse_expr(expr).unwrap();
    let my = parse_ad(my).unwrap();
    let target = target.map(|t| parse_ad(t).unwrap());
    Evaluator::new().eval(&e, Some(&my), target.as_ref())
}

#[test]
fn parse_errors_name_line_column_and_expectation() {
    let e = parse_ad("[ a = 1;\n  b = ]").unwrap_err();
    assert_eq!((e.line, e.col), (2, 7), "{e}");
    assert!(e.msg.contains("expected an expression"), "{e}");

    let e = parse_ad("A = 1\nB = 2 3\n").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    assert!(e.msg.contains("end of the line"), "{e}");

    let e = parse_expr("f(1,").unwrap_err();
    assert!(e.msg.contains("expected an expression"), "{e}");
    let e = parse_expr("\"open").unwrap_err();
    assert!(e.msg.contains("unterminated string"), "{e}");
    let e = parse_expr("[a = 1; b = 2").unwrap_err();
    assert!(e.msg.contains("`;` or `]`") || e.msg.contains("close the ClassAd"), "{e}");
    assert!(e.to_string().starts_with("line 1, column "), "{e}");
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for (open, close) in [("(", ")"), ("[a=", "]"), ("{", "}"), ("!", ""), ("-", "")] {
        let text = format!("{}1{}", open.repeat(100_000), close.repeat(100_000));
        let e = parse_expr(&text).unwrap_err();
        assert!(e.msg.contains("nested more than"), "{open}: {e}");
    }
    let chain = vec!["1"; 100_000].join(" + ");
    assert!(parse_expr(&chain).unwrap_err().msg.contains("nested more than"));
    // Just inside the bound parses and evaluates.
    let chain = vec!["1"; 3000].join(" + ");
    let e = parse_expr(&chain).unwrap();
    assert_eq!(Evaluator::new().eval(&e, None, None), Value::Int(3000));
    let text = format!("{}1{}", "(".repeat(3000), ")".repeat(3000));
    assert_eq!(ClassAd::new().eval(&parse_expr(&text).unwrap()), Value::Int(1));
}

#[test]
fn long_attribute_chains_never_overflow_the_stack() {
    let mut ad = ClassAd::new();
    let n = 100_000;
    for i in 0..n {
        ad.insert_expr(&format!("a{i}"), &format!("a{} + 1", i + 1)).unwrap();
    }
    ad.insert_value(format!("a{n}").as_str(), 0i64);
    // Deeper than the evaluation bound: error, as HTCondor gives.
    assert_eq!(ad.eval_attr("a0"), Value::Error);
    // Within the bound: the right answer.
    assert_eq!(ad.eval_attr(&format!("a{}", n - 500)), Value::Int(500));
}

#[test]
fn cycles_evaluate_to_undefined() {
    assert_eq!(eval_in("a", "[a = a]", None), Value::Undefined);
    assert_eq!(eval_in("a", "[a = b + 1; b = c; c = a]", None), Value::Undefined);
    assert_eq!(eval_in("a", "[a = TARGET.b]", Some("[b = TARGET.a]")), Value::Undefined);
    assert_eq!(eval_in("a.b", "[a = [b = a.b]]", None), Value::Undefined);
    assert_eq!(eval_in("isError(a)", "[a = a]", None), Value::Bool(false));
}

#[test]
fn scoping_follows_htcondor() {
    // Plain names fall back from MY to TARGET by default, not in strict mode.
    let e = parse_expr("x").unwrap();
    let my = parse_ad("[a = 1]").unwrap();
    let t = parse_ad("[x = 9]").unwrap();
    assert_eq!(Evaluator::new().eval(&e, Some(&my), Some(&t)), Value::Int(9));
    let mut strict = Evaluator::with_options(EvalOptions { strict: true, ..Default::default() });
    assert_eq!(strict.eval(&e, Some(&my), Some(&t)), Value::Undefined);
    // An attribute found in TARGET evaluates there.
    assert_eq!(eval_in("TARGET.y", "[x = 100]", Some("[x = 1; y = x * 2]")), Value::Int(2));
    // TARGET inside the target ad is MY again.
    assert_eq!(eval_in("TARGET.TARGET.q", "[q = 5]", Some("[r = 1]")), Value::Int(5));
    // Nested ads see their enclosing ad; parent and toplevel name it.
    assert_eq!(eval_in("a.c", "[x = 10; a = [c = x]]", None), Value::Int(10));
    assert_eq!(eval_in("a.p", "[x = 10; a = [p = parent.x]]", None), Value::Int(10));
    assert_eq!(eval_in("a.b.t", "[x = 7; a = [b = [t = toplevel.x]]]", None), Value::Int(7));
    // Names are case-insensitive and keep their first spelling.
    let ad = parse_ad("[Foo = 1; FOO = 2]").unwrap();
    assert_eq!(ad.len(), 1);
    assert_eq!(ad.get_entry("foo").unwrap().0.as_str(), "Foo");
    assert_eq!(ad.eval_attr("fOO"), Value::Int(2));
    // Quoted names.
    assert_eq!(eval_in("'odd name' + 1", "['odd name' = 41]", None), Value::Int(42));
}

#[test]
fn time_uses_the_virtual_clock() {
    let mut ev =
        Evaluator::with_options(EvalOptions { now: Some(1_700_000_000), ..Default::default() });
    let e = parse_expr("time() - CurrentTime + time()").unwrap();
    assert_eq!(ev.eval(&e, None, None), Value::Int(1_700_000_000));
}

#[test]
fn old_syntax_ads_as_condor_q_prints_them() {
    let text = "\
MyType = \"Job\"
ClusterId = 42
Cmd = \"/home/alice/job.wasm\"
Requirements = (TARGET.Arch == \"X86_64\") && (TARGET.Memory >= RequestMemory) // trailing comment
RequestMemory = 2048
Args = \"-n 'hello world'\"

MyType = \"Job\"
ClusterId = 43
";
    let ads = classad::parser::parse_ads(text).unwrap();
    assert_eq!(ads.len(), 2);
    assert_eq!(ads[0].eval_attr("ClusterId"), Value::Int(42));
    assert_eq!(ads[1].eval_attr("ClusterId"), Value::Int(43));
    let one = parse_old_ad("A = 1\nB = A + 1\n").unwrap();
    assert_eq!(one.eval_attr("B"), Value::Int(2));
    // Printing and reading back gives the same ad.
    assert_eq!(parse_old_ad(&ads[0].to_old_syntax()).unwrap(), ads[0]);
}

#[test]
fn unknown_functions_are_errors_at_evaluation_not_parse() {
    assert_eq!(eval_in("nosuchfunction(1)", "[]", None), Value::Error);
    assert_eq!(eval_in("isError(sqrt(4))", "[]", None), Value::Bool(true));
}

#[test]
fn infinities_and_nan_round_trip_through_their_text() {
    for (text, v) in [("1e701", f64::INFINITY), ("-1e701", f64::NEG_INFINITY)] {
        let e = parse_expr(text).unwrap();
        assert_eq!(e, classad::Expr::Lit(Value::Real(v)));
        assert_eq!(parse_expr(&e.to_string()).unwrap(), e, "{}", e);
    }
    let nan = classad::Expr::Lit(Value::Real(f64::NAN));
    assert_eq!(nan.to_string(), "real(\"NaN\")");
    assert_eq!(parse_expr(&nan.to_string()).unwrap(), nan);
    // Other real() calls stay calls.
    assert!(matches!(parse_expr("real(\"2.5\")").unwrap(), classad::Expr::Call(_)));
}

#[test]
fn scan_gives_exactly_what_eval_gives() {
    let job =
        parse_ad("[ RequestMemory = 2048; RequestDisk = DiskUsage; DiskUsage = 10 ]").unwrap();
    let mut machines = Vec::new();
    for i in 0..200i64 {
        let mut text = format!(
            "[ Arch = \"{}\"; OpSys = \"LINUX\"; Memory = {}; Disk = {}; Name = \"slot{i}\"",
            if i % 3 == 0 { "aarch64" } else { "X86_64" },
            1024 * (i % 5),
            i * 3
        );
        for k in 0..(i % 20) {
            text.push_str(&format!("; Pad{k} = {k}"));
        }
        // Some ads redefine the scope names or miss attributes.
        match i % 7 {
            0 => text.push_str("; TARGET = [ Memory = 1 ]"),
            1 => text.push_str("; Memory = undefined"),
            2 => text.push_str("; Disk = TARGET.RequestDisk * 2"),
            _ => {}
        }
        text.push(']');
        machines.push(parse_ad(&text).unwrap());
    }
    let expr = parse_expr(
        "(TARGET.Arch == \"X86_64\") && (TARGET.OpSys == \"LINUX\") && \
         (TARGET.Memory >= MY.RequestMemory) && (TARGET.Disk >= MY.RequestDisk)",
    )
    .unwrap();
    let mut ev = Evaluator::new();
    let expected: Vec<Value> =
        machines.iter().map(|m| ev.eval(&expr, Some(&job), Some(m))).collect();
    let mut got = Vec::new();
    ev.scan(&expr, &job, &machines, |i, v| got.push((i, v)));
    assert_eq!(got.len(), machines.len());
    for (i, v) in got {
        assert_eq!(v, expected[i], "ad {i}");
    }
    assert!(expected.contains(&Value::Bool(true)));
    assert!(expected.contains(&Value::Undefined));
}

/// Reals and layout as HTCondor prints them in old syntax and in JSON: each
/// expected text is what classad2 25.x's `printOld` and `printJson` print
/// for the same ad (its attributes in the same order), but for v12, which
/// classad2 prints as `1.234567890123457E+16`: sixteen digits that read back
/// as another real, where andes prints the seventeen that keep it.
#[test]
fn old_syntax_and_json_print_reals_and_empties_as_classad2_does() {
    let ad = parse_ad(
        "[v0 = 1.0; v1 = 1e15; v2 = 1e16; v3 = 0.3333333333333333; v4 = 123456789.0; \
         v5 = -0.0; v6 = 0.0; v7 = 1e-5; v8 = 0.0001; v9 = 1152921504606846976.0; \
         v10 = 1.5e-300; v11 = -2.5; v12 = 12345678901234568.0; a = 2.5 + x; \
         s = strcat(\"a\", 1.0); l = {1.5, 2, {}, [y = 1; z = {3}]}; n = [w = [v = 0.1]]; \
         e = []; m = {}]",
    )
    .unwrap();
    let old = "v0 = 1.0\nv1 = 1000000000000000.0\nv2 = 1E+16\nv3 = 0.3333333333333333\n\
               v4 = 123456789.0\nv5 = -0.0\nv6 = 0.0\nv7 = 1E-05\nv8 = 0.0001\n\
               v9 = 1.152921504606847E+18\nv10 = 1.5E-300\nv11 = -2.5\n\
               v12 = 12345678901234568.0\na = 2.5 + x\ns = strcat(\"a\",1.0)\n\
               l = { 1.5,2,{  },[ y = 1; z = { 3 } ] }\nn = [ w = [ v = 0.1 ] ]\ne = [  ]\nm = {  }\n";
    assert_eq!(ad.to_old_syntax(), old);
    let json = classad::json::ad_to_json_string(
        &parse_ad(
            "[a = 2.5; b = 1e300; c = 0.1; d = 1.0; i = 3; x = 2.5 + y; e = []; \
         l = {1.5, 2, {}, [z = {3}]}]",
        )
        .unwrap(),
    );
    let want = "{\n  \"a\": 2.5,\n  \"b\": 1E+300,\n  \"c\": 0.1,\n  \"d\": 1.0,\n  \"e\": {\n  },\n  \
                \"i\": 3,\n  \"l\": [\n    1.5,\n    2,\n    [\n    ],\n    {\n      \"z\": [\n        3\n      ]\n    }\n  ],\n  \
                \"x\": \"\\/Expr(2.500000000000000E+00 + y)\\/\"\n}";
    assert_eq!(json, want);
    assert_eq!(classad::json::ad_to_json_string(&ClassAd::new()), "{\n}");
    // Sixteen digits where they read back exactly; seventeen where HTCondor's
    // sixteen would change the value (it prints 0.3 for 0.1 + 0.2).
    let sum = parse_ad("[t = 0.30000000000000004]").unwrap();
    assert_eq!(sum.to_old_syntax(), "t = 0.30000000000000004\n");
    assert_eq!(parse_old_ad(&sum.to_old_syntax()).unwrap(), sum);
}
