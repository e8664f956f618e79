//! `andes classad` as a user runs it.

use assert_cmd::Command;

fn andes() -> Command {
    Command::cargo_bin("andes").unwrap()
}

/// A file holding `text`, removed when the value is dropped.
fn tmp(name: &str, text: &str) -> tempfile::TempPath {
    let f = tempfile::Builder::new().prefix("andes-cli-").suffix(&format!("-{name}")).tempfile();
    let f = f.unwrap();
    std::fs::write(f.path(), text).unwrap();
    f.into_temp_path()
}

#[test]
fn eval_prints_values_in_classad_syntax() {
    let out = andes().args(["classad", "eval", "{1, 2.5, \"x\", [a = 1]}"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{ 1,2.500000000000000E+00,\"x\",[ a = 1 ] }\n"
    );
}

#[test]
fn eval_uses_my_and_target_ads_in_either_syntax() {
    let my = tmp("my.ad", "RequestMemory = 2048\nOwner = \"alice\"\n");
    let target = tmp("target.ad", "[ Memory = 4096; Arch = \"X86_64\" ]");
    let out = andes()
        .args(["classad", "eval", "--my"])
        .arg(&my)
        .arg("--target")
        .arg(&target)
        .arg("TARGET.Memory - RequestMemory")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2048\n");
    // Unscoped Memory falls back to TARGET by default; not in strict mode.
    let run = |strict: bool| {
        let mut c = andes();
        c.args(["classad", "eval", "--my"]).arg(&my).arg("--target").arg(&target);
        if strict {
            c.arg("--strict");
        }
        String::from_utf8(c.arg("Memory").output().unwrap().stdout).unwrap()
    };
    assert_eq!(run(false), "4096\n");
    assert_eq!(run(true), "undefined\n");
}

#[test]
fn bad_input_says_where() {
    let out = andes().args(["classad", "eval", "1 + (2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("<expression>:1:7") && err.contains("expected `)`"), "{err}");

    let bad = tmp("bad.ad", "A = 1\nB = = 2\n");
    let out = andes().args(["classad", "eval", "--my"]).arg(&bad).arg("A").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.ad:2:5"), "{err}");
}

#[test]
fn jsonl_mode_normalises_like_the_oracle() {
    let input = tmp(
        "cases.jsonl",
        concat!(
            "{\"expr\": \"{1, x}\", \"my\": \"[x = 5]\", \"target\": null}\n",
            "{\"expr\": \"[a = 1; b = a + 1]\", \"my\": null, \"target\": null}\n",
            "{\"expr\": \"1 +\", \"my\": null, \"target\": null}\n",
            "{\"expr\": \"x\", \"my\": \"[a = 1]\", \"target\": \"[x = 9]\"}\n",
            "{\"expr\": \"-1.0/0\", \"my\": null, \"target\": null}\n",
        ),
    );
    let out = andes().args(["classad", "eval", "--jsonl"]).arg(&input).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        serde_json::json!({"type": "list", "value": [{"type": "int", "value": 1}, {"type": "int", "value": 5}]})
    );
    assert_eq!(
        lines[1],
        serde_json::json!({"type": "classad", "value": {"a": {"type": "int", "value": 1}, "b": {"type": "int", "value": 2}}})
    );
    assert_eq!(lines[2], serde_json::json!({"type": "parse_error", "value": null}));
    assert_eq!(lines[3], serde_json::json!({"type": "int", "value": 9}));
    assert_eq!(lines[4], serde_json::json!({"type": "real", "value": "-inf"}));
}

#[test]
fn match_names_the_failing_clauses_and_ranks() {
    let job = tmp(
        "job.ad",
        "[ RequestMemory = 8192; Owner = \"alice\"; \
           Requirements = TARGET.Arch == \"X86_64\" && TARGET.Memory >= RequestMemory && TARGET.HasGPU; \
           Rank = TARGET.Mips ]",
    );
    let machine = tmp(
        "machine.ad",
        "Arch = \"X86_64\"\nMemory = 4096\nMips = 3000\nRequirements = TARGET.Owner == \"alice\"\nRank = 1.5\n",
    );
    let out = andes().args(["classad", "match"]).arg(&job).arg(&machine).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Job Requirements are NOT satisfied"), "{text}");
    assert!(text.contains("clause failed: TARGET.Memory >= RequestMemory  -- is false"), "{text}");
    assert!(text.contains("clause failed: TARGET.HasGPU  -- is undefined"), "{text}");
    assert!(!text.contains("clause failed: TARGET.Arch"), "{text}");
    assert!(text.contains("Machine Requirements are satisfied"), "{text}");
    assert!(text.contains("Job Rank of the machine: 3000"), "{text}");
    assert!(text.contains("Machine Rank of the job: 1.500000000000000E+00"), "{text}");
    assert!(text.ends_with("Result: NO MATCH\n"), "{text}");
}
