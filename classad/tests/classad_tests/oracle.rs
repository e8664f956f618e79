//! Differential tests against HTCondor's own ClassAd library: every case of
//! the oracle corpora (tests/data/*.jsonl), with the agreement rate reported.

use classad::json::{normalize, parse_oracle_expr};
use classad::matching::{rank_with, requirements_hold};
use classad::{ClassAd, EvalOptions, Evaluator, parse_ad};
use serde_json::Value as Json;

fn data(name: &str) -> String {
    let p = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// Compares a normalised value with the expected one: types equal, values
/// equal (reals exactly, NaN equal to NaN, ad keys case-insensitively).
fn same(expected: &Json, got: &Json, check_value: bool) -> bool {
    if expected["type"] != got["type"] {
        return false;
    }
    if !check_value {
        return true;
    }
    let (e, g) = (&expected["value"], &got["value"]);
    match expected["type"].as_str() {
        Some("real") => match (e, g) {
            (Json::Number(a), Json::Number(b)) => {
                a.as_f64().map(f64::to_bits) == b.as_f64().map(f64::to_bits)
            }
            _ => e == g,
        },
        Some("list") => match (e.as_array(), g.as_array()) {
            (Some(a), Some(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y, true))
            }
            _ => false,
        },
        Some("classad") => match (e.as_object(), g.as_object()) {
            (Some(a), Some(b)) => {
                a.len() == b.len()
                    && a.iter().all(|(k, v)| {
                        b.iter().any(|(k2, v2)| k.eq_ignore_ascii_case(k2) && same(v, v2, true))
                    })
            }
            _ => false,
        },
        _ => e == g,
    }
}

fn ad_of(j: &Json) -> Option<ClassAd> {
    j.as_str().map(|t| parse_ad(t).unwrap_or_else(|e| panic!("oracle ad {t}: {e}")))
}

fn eval_case(case: &Json, strict: bool) -> Json {
    let Some(expr) = parse_oracle_expr(case["expr"].as_str().unwrap()) else {
        return serde_json::json!({"type": "parse_error", "value": null});
    };
    let my = ad_of(&case["my"]);
    let target = ad_of(&case["target"]);
    let mut ev =
        Evaluator::with_options(EvalOptions { strict, seed: Some(1), ..Default::default() });
    let v = ev.eval(&expr, my.as_ref(), target.as_ref());
    if let (Some(m), Some(t)) = (&my, &target) {
        // The negotiator's scan gives the value `eval` gives (on one clock).
        let opts =
            EvalOptions { strict, seed: Some(1), now: Some(1_700_000_000), ..Default::default() };
        let want = Evaluator::with_options(opts.clone()).eval(&expr, Some(m), Some(t));
        let mut got = None;
        Evaluator::with_options(opts).scan(&expr, m, std::slice::from_ref(t), |_, v| got = Some(v));
        assert_eq!(got.as_ref(), Some(&want), "scan of `{}`", case["expr"]);
    }
    normalize(&mut ev, &expr, &v, my.as_ref(), target.as_ref())
}

#[test]
fn classad_corpus_agrees_with_htcondor() {
    let text = data("classad_public.jsonl");
    let (mut total, mut agree, mut strict_agree) = (0, 0, 0);
    let mut diffs = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: Json = serde_json::from_str(line).unwrap();
        let check = case["check_value"].as_bool().unwrap_or(true);
        total += 1;
        let got = eval_case(&case, false);
        if same(&case["result"], &got, check) {
            agree += 1;
        } else {
            diffs.push(format!(
                "{} `{}`: expected {} got {}",
                case["id"], case["expr"], case["result"], got
            ));
        }
        let got = eval_case(&case, true);
        if same(&case["result_strict"], &got, check) {
            strict_agree += 1;
        } else {
            diffs.push(format!(
                "{} (strict) `{}`: expected {} got {}",
                case["id"], case["expr"], case["result_strict"], got
            ));
        }
    }
    let rate = agree as f64 / total as f64;
    let strict_rate = strict_agree as f64 / total as f64;
    println!("classad corpus: {agree}/{total} agree ({:.2} %)", rate * 100.0);
    println!("classad corpus, strict: {strict_agree}/{total} agree ({:.2} %)", strict_rate * 100.0);
    for d in &diffs {
        println!("  differs: {d}");
    }
    assert!(rate >= 0.995, "agreement {rate} below 99.5 %:\n{}", diffs.join("\n"));
    assert!(
        strict_rate >= 0.99,
        "strict agreement {strict_rate} below 99 %:\n{}",
        diffs.join("\n")
    );
}

#[test]
fn matchmaking_corpus_agrees_with_htcondor() {
    let text = data("matchmaking.jsonl");
    let mut total = 0;
    let mut diffs = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: Json = serde_json::from_str(line).unwrap();
        total += 1;
        for strict in [false, true] {
            let exp = if strict { &case["strict"] } else { &case };
            let job = parse_ad(case["job"].as_str().unwrap()).unwrap();
            let mach = parse_ad(case["machine"].as_str().unwrap()).unwrap();
            let mut ev = Evaluator::with_options(EvalOptions { strict, ..Default::default() });
            let side = |ev: &mut Evaluator, me: &ClassAd, other: &ClassAd, attr: &str| match me
                .get(attr)
            {
                None => serde_json::json!({"type": "missing", "value": null}),
                Some(e) => {
                    let v = ev.eval(e, Some(me), Some(other));
                    normalize(ev, e, &v, Some(me), Some(other))
                }
            };
            let checks = [
                ("job_requirements", side(&mut ev, &job, &mach, "Requirements")),
                ("machine_requirements", side(&mut ev, &mach, &job, "Requirements")),
                ("job_rank", side(&mut ev, &job, &mach, "Rank")),
                ("machine_rank", side(&mut ev, &mach, &job, "Rank")),
            ];
            for (k, got) in checks {
                if !same(&exp[k], &got, true) {
                    diffs.push(format!(
                        "{} strict={strict} {k}: expected {} got {got}",
                        case["id"], exp[k]
                    ));
                }
            }
            let jr = requirements_hold(&mut ev, &job, &mach);
            let mr = requirements_hold(&mut ev, &mach, &job);
            for (k, got) in [
                ("job_requirements_ok", jr),
                ("machine_requirements_ok", mr),
                ("symmetric_match", jr && mr),
            ] {
                if exp[k].as_bool() != Some(got) {
                    diffs.push(format!(
                        "{} strict={strict} {k}: expected {} got {got}",
                        case["id"], exp[k]
                    ));
                }
            }
            // Rank as the negotiator reads it is numeric or 0.
            let _ = rank_with(&mut ev, &job, &mach);
            // The negotiator's scan gives the values `eval` gives.
            for (me, other) in [(&job, &mach), (&mach, &job)] {
                for attr in ["Requirements", "Rank"] {
                    let Some(e) = me.get(attr) else { continue };
                    let want = ev.eval(e, Some(me), Some(other));
                    let mut got = None;
                    ev.scan(e, me, std::slice::from_ref(other), |_, v| got = Some(v));
                    if got.as_ref() != Some(&want) {
                        diffs.push(format!(
                            "{} strict={strict} scan of {attr}: eval gives {want}, scan {got:?}",
                            case["id"]
                        ));
                    }
                }
            }
        }
    }
    println!("matchmaking corpus: {} cases, {} differences", total, diffs.len());
    assert!(diffs.is_empty(), "matchmaking differs:\n{}", diffs.join("\n"));
}
