//! `andes cron next` as users and checkers run it.

use crate::common;

use common::andes;

#[test]
fn next_prints_runs_in_the_given_zone() {
    let out = andes()
        .args(["cron", "next", "--minute", "0", "--hour", "*/6", "--tz", "UTC"])
        .args(["--from", "2026-11-22T10:00:00Z", "--count", "3"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        "Sun 2026-11-22 12:00 UTC  1795348800\nSun 2026-11-22 18:00 UTC  1795370400\n\
         Mon 2026-11-23 00:00 UTC  1795392000\n"
    );
}

#[test]
fn a_bad_field_is_an_error_naming_it() {
    let out = andes().args(["cron", "next", "--minute", "61"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cron_minute = 61: 61 is outside 0-59"), "{err}");
}

#[test]
fn jsonl_answers_every_corpus_case() {
    let corpus = include_str!("../../cron/tests/data/cron_public.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let mut lines = String::new();
    let mut want = Vec::new();
    for l in corpus.lines() {
        let c: serde_json::Value = serde_json::from_str(l).unwrap();
        lines.push_str(
            &serde_json::json!({"fields": c["fields"], "now": c["now_epoch"]}).to_string(),
        );
        lines.push('\n');
        want.push(c["next_epoch"].clone());
    }
    std::fs::write(&input, lines).unwrap();
    let out = andes().args(["cron", "next", "--jsonl"]).arg(&input).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        if w == "invalid" {
            assert!(g["invalid"].is_string(), "{g} for {w}");
        } else {
            assert_eq!(&g["next"], w);
        }
    }
}
