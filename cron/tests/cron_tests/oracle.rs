//! The CronTab corpus (expected answers from the documented-semantics
//! reference, see CONFORMANCE.md): every case must agree.

use andes_cron::Schedule;
use jiff::tz::TimeZone;

#[test]
fn every_public_case_agrees() {
    let text = include_str!("../data/cron_public.jsonl");
    let (mut total, mut bad) = (0, Vec::new());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: serde_json::Value = serde_json::from_str(line).expect("corpus line is JSON");
        total += 1;
        let fields = case["fields"].as_object().expect("fields");
        let named = fields.iter().map(|(k, v)| (k.as_str(), v.as_str().expect("string field")));
        let now = case["now_epoch"].as_i64().expect("now");
        let got = match Schedule::from_named(named) {
            Ok(s) => match s.next_after(now, &TimeZone::UTC) {
                Some(t) => serde_json::json!(t),
                None => serde_json::Value::Null,
            },
            Err(e) if e.contains("never run") => serde_json::Value::Null,
            Err(_) => serde_json::json!("invalid"),
        };
        if got != case["next_epoch"] {
            bad.push(format!(
                "{}: {:?} expected {} got {}",
                case["id"], fields, case["next_epoch"], got
            ));
        }
    }
    println!("cron corpus: {}/{total} agree", total - bad.len());
    assert!(bad.is_empty(), "{} disagreements:\n{}", bad.len(), bad.join("\n"));
}
