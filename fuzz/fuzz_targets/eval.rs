//! Evaluates an arbitrary expression against two arbitrary ads, matches the
//! ads and round-trips them through JSON. Nothing may panic or hang.
//!
//! Input layout: one flag byte (bit 0: strict evaluation), then the
//! expression, the MY ad and the TARGET ad separated by 0 bytes. A part
//! that is missing or does not parse is the empty ad (for an ad) or skips
//! expression evaluation (for the expression).
#![no_main]

use classad::{ClassAd, EvalOptions, Evaluator};
use libfuzzer_sys::fuzz_target;

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

fuzz_target!(|data: &[u8]| {
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
    if let Some(expr) = &expr {
        let v = ev.eval(expr, Some(&my), Some(&target));
        let _ = v.to_string();
        let _ = ev.eval(expr, Some(&my), None);
        let _ = ev.eval(expr, None, None);
    }
    for (name, _) in my.iter() {
        let _ = ev.eval_attr(&my, Some(&target), name.as_str());
    }
    let _ = classad::matching::symmetric_match(&my, &target);
    let _ = classad::rank(&my, &target);
    json_round_trip(&my);
    json_round_trip(&target);
});
