//! Every input a fuzz campaign found (`fuzz/findings/<target>-<what>`),
//! replayed through its target's checks: a finding once fixed stays fixed.
//! And the table of targets here is the fuzz crate's: a target added there
//! and missing here fails.

use std::path::Path;

/// A target's checks of one input.
type Run = fn(&[u8]);

/// Every fuzz target, by its name in `fuzz/Cargo.toml`.
const TARGETS: &[(&str, Run)] = &[
    ("classad_json", andes_fuzz_cases::classad_json::run),
    ("config", andes_fuzz_cases::config::run),
    ("cron", andes_fuzz_cases::cron::run),
    ("eval", andes_fuzz_cases::eval::run),
    ("guest_abi", andes_fuzz_cases::guest_abi::run),
    ("parse", andes_fuzz_cases::parse::run),
    ("request", andes_fuzz_cases::request::run),
    ("snapshot", andes_fuzz_cases::snapshot::run),
    ("submit", andes_fuzz_cases::submit::run),
    ("trust", andes_fuzz_cases::trust::run),
    ("wire", andes_fuzz_cases::wire::run),
];

fn fuzz_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz"))
}

#[test]
fn every_finding_replays_through_its_target() {
    let mut replayed = Vec::new();
    for entry in std::fs::read_dir(fuzz_dir().join("findings")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        // The longest target name the file's name starts with, then '-'.
        let target = TARGETS
            .iter()
            .filter(|(t, _)| name.strip_prefix(t).is_some_and(|r| r.starts_with('-')))
            .max_by_key(|(t, _)| t.len());
        let Some((_, run)) = target else {
            panic!("fuzz/findings/{name} names no target: call it <target>-<what>");
        };
        run(&std::fs::read(&path).unwrap());
        replayed.push(name);
    }
    // The five findings of the campaigns so far, at least.
    assert!(replayed.len() >= 5, "findings replayed: {replayed:?}");
}

#[test]
fn the_table_names_every_fuzz_target() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    let mut bins: Vec<&str> = manifest
        .split("[[bin]]")
        .skip(1)
        .filter_map(|b| b.lines().find_map(|l| l.trim().strip_prefix("name = ")))
        .map(|n| n.trim_matches('"'))
        .collect();
    bins.sort();
    let table: Vec<&str> = TARGETS.iter().map(|(t, _)| *t).collect();
    assert_eq!(bins, table, "fuzz/Cargo.toml's targets and this table differ");
}

/// Each target's source is one call into its case here, in the one form
/// libFuzzer's macro takes, and is the file `fuzz/Cargo.toml` names for it:
/// with [`TARGETS`] (which names each case's `run`, so this test does not
/// compile when one is missing or has another signature) that is what
/// building the fuzz crate would check, without building it.
#[test]
fn each_fuzz_target_is_one_call_into_its_case() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(fuzz_dir().join("fuzz_targets")).unwrap() {
        files.push(entry.unwrap().file_name().to_string_lossy().into_owned());
    }
    files.sort();
    let expected: Vec<String> = TARGETS.iter().map(|(t, _)| format!("{t}.rs")).collect();
    assert_eq!(files, expected, "fuzz/fuzz_targets/ and the table of targets differ");
    for (name, _) in TARGETS {
        let bin = manifest
            .split("[[bin]]")
            .find(|b| b.lines().any(|l| l.trim() == format!("name = \"{name}\"")))
            .unwrap_or_else(|| panic!("fuzz/Cargo.toml has no [[bin]] {name}"));
        assert!(
            bin.lines().any(|l| l.trim() == format!("path = \"fuzz_targets/{name}.rs\"")),
            "fuzz/Cargo.toml: target {name} is not fuzz_targets/{name}.rs"
        );
        let text =
            std::fs::read_to_string(fuzz_dir().join(format!("fuzz_targets/{name}.rs"))).unwrap();
        let code: Vec<&str> =
            text.lines().filter(|l| !l.starts_with("//!") && !l.trim().is_empty()).collect();
        let call = format!(
            "libfuzzer_sys::fuzz_target!(|data: &[u8]| andes_fuzz_cases::{name}::run(data));"
        );
        assert_eq!(
            code,
            ["#![no_main]", call.as_str()],
            "fuzz/fuzz_targets/{name}.rs is not the one call into its case"
        );
    }
}
