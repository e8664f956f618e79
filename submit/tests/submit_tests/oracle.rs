//! Differential test against HTCondor's own submit expansion
//! (`tests/data/submit_public.jsonl`, made with htcondor 24.12.24; see
//! CONFORMANCE.md). Run with `--nocapture` to see every disagreement.
//!
//! The corpus's executables `job.sh` and `other.sh` are replaced by Wasm
//! modules `job.wasm` and `other.wasm` of the same sizes (2000 and 500
//! bytes), in the submit text and in the expected values.

use std::io;
use std::path::PathBuf;

use andes_submit::{Context, FileSystem, MappedFs, expand, parse};
use classad::{Expr, Value};
use serde_json::Value as Json;

/// Attributes the corpus records when present (its README, part 2).
const RECORDED: &[&str] = &[
    "ClusterId",
    "ProcId",
    "JobStatus",
    "JobUniverse",
    "Cmd",
    "Args",
    "Arguments",
    "Environment",
    "Env",
    "In",
    "Out",
    "Err",
    "UserLog",
    "StreamOut",
    "StreamErr",
    "TransferIn",
    "TransferOut",
    "TransferErr",
    "TransferInput",
    "TransferOutput",
    "ShouldTransferFiles",
    "WhenToTransferOutput",
    "RequestCpus",
    "RequestMemory",
    "RequestDisk",
    "RequestGPUs",
    "Requirements",
    "Rank",
    "JobPrio",
    "DeferralTime",
    "DeferralWindow",
    "DeferralPrepTime",
    "CronMinute",
    "CronHour",
    "CronDayOfMonth",
    "CronMonth",
    "CronDayOfWeek",
    "CronPrepTime",
    "CronWindow",
    "OnExitRemove",
    "OnExitHold",
    "OnExitHoldReason",
    "OnExitHoldSubCode",
    "PeriodicHold",
    "PeriodicHoldReason",
    "PeriodicRelease",
    "PeriodicRemove",
    "HoldReason",
    "HoldReasonCode",
    "HoldReasonSubCode",
    "JobMaxRetries",
    "SuccessExitCode",
    "JobNotification",
    "NotifyUser",
    "Iwd",
    "QDate",
    "DiskUsage",
    "ImageSize",
    "ExecutableSize",
    "TransferInputSizeMB",
];

/// A valid Wasm module of exactly `total` bytes (header plus one custom
/// section of padding).
fn padded_module(total: usize) -> Vec<u8> {
    let mut m = b"\0asm\x01\0\0\0".to_vec();
    // section: id 0, size (2-byte LEB128), name length 3, "pad", payload.
    let content = total - m.len() - 1 - 2;
    m.push(0);
    m.push((content & 0x7f) as u8 | 0x80);
    m.push((content >> 7) as u8);
    m.push(3);
    m.extend_from_slice(b"pad");
    m.resize(total, 0);
    m
}

/// The corpus's initial directory with the two scripts replaced by modules.
struct CorpusFs {
    dir: MappedFs,
    job: Vec<u8>,
    other: Vec<u8>,
}

impl CorpusFs {
    fn new() -> Self {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/submit_iwd");
        CorpusFs {
            dir: MappedFs::new("/iwd", root),
            job: padded_module(2000),
            other: padded_module(500),
        }
    }
    fn module(&self, path: &str) -> Option<&Vec<u8>> {
        match path {
            "/iwd/job.wasm" => Some(&self.job),
            "/iwd/other.wasm" => Some(&self.other),
            _ => None,
        }
    }
}

impl FileSystem for CorpusFs {
    fn read(&self, path: &str, limit: u64) -> io::Result<Vec<u8>> {
        match self.module(path) {
            Some(m) if m.len() as u64 <= limit => Ok(m.clone()),
            Some(_) => Err(io::Error::new(io::ErrorKind::FileTooLarge, "too large")),
            None if path.ends_with(".sh") => Err(io::Error::new(io::ErrorKind::NotFound, "gone")),
            None => self.dir.read(path, limit),
        }
    }
    fn file_size(&self, path: &str) -> Option<u64> {
        match self.module(path) {
            Some(m) => Some(m.len() as u64),
            None if path.ends_with(".sh") => None,
            None => self.dir.file_size(path),
        }
    }
    fn read_dir(&self, path: &str) -> Option<Vec<(String, bool)>> {
        let mut v = self.dir.read_dir(path)?;
        if path == "/iwd" {
            for e in &mut v {
                e.0 = e.0.replace("job.sh", "job.wasm").replace("other.sh", "other.wasm");
            }
            v.sort();
        }
        Some(v)
    }
}

fn rename(s: &str) -> String {
    s.replace("job.sh", "job.wasm").replace("other.sh", "other.wasm")
}

fn unparse(e: &Expr) -> String {
    e.to_string()
}

/// Does our attribute agree with the corpus's record?
fn agrees(ours: &Expr, want: &Json) -> bool {
    let expr = rename(want["expr"].as_str().unwrap_or(""));
    match want.get("type").and_then(Json::as_str) {
        Some(t) => {
            let Some(v) = ours.as_literal() else { return false };
            let wv = &want["value"];
            match (t, v) {
                ("int", Value::Int(n)) => wv.as_i64() == Some(*n),
                ("real", Value::Real(r)) => {
                    wv.as_f64().is_some_and(|w| (w - r).abs() <= 1e-12 * w.abs().max(1.0))
                }
                ("bool", Value::Bool(b)) => wv.as_bool() == Some(*b),
                ("string", Value::Str(s)) => wv.as_str().map(rename).as_deref() == Some(&**s),
                ("undefined", Value::Undefined) => true,
                _ => false,
            }
        }
        None => match classad::parse_expr(&expr) {
            Ok(w) => unparse(&w) == unparse(ours),
            Err(_) => expr == unparse(ours),
        },
    }
}

/// The corpus's Requirements with HTCondor's Arch/OpSys/FileSystemDomain
/// clauses taken out and andes's `(TARGET.HasWasm)` put in: the documented
/// difference (CONFORMANCE.md).
fn wasm_requirements(expr: &str, user: Option<&str>) -> String {
    // The user's own clause comes first and is kept as it is.
    let (head, rest) = match user {
        Some(u) => {
            let head = format!("({})", unparse(&classad::parse_expr(u).unwrap()));
            match expr.strip_prefix(&format!("{head} && ")) {
                Some(rest) => (format!("{head} && "), rest.to_string()),
                None => (String::new(), expr.to_string()),
            }
        }
        None => (String::new(), expr.to_string()),
    };
    let mut s = rest
        .replace("(TARGET.Arch == \"X86_64\") && ", "")
        .replace("(TARGET.OpSys == \"LINUX\") && ", "")
        .replace(
            " && ((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))",
            "",
        )
        .replace(" && (TARGET.HasFileTransfer)", "");
    s = s.replacen(
        "(TARGET.Disk >= RequestDisk)",
        "(TARGET.HasWasm) && (TARGET.Disk >= RequestDisk)",
        1,
    );
    head + &s
}

/// The `requirements = ...` value of a submit text, if any.
fn user_requirements(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        k.trim().eq_ignore_ascii_case("requirements").then(|| v.trim().to_string())
    })
}

#[test]
fn oracle_submit_corpus() {
    let data = include_str!("../data/submit_public.jsonl");
    let fs = CorpusFs::new();
    let (mut compared, mut agreed) = (0usize, 0usize);
    let (mut req_compared, mut req_agreed_modulo) = (0usize, 0usize);
    let mut rejected_ok = 0;
    let mut rejected_total = 0;
    let mut cases = 0;
    let mut problems = Vec::new();
    for line in data.lines().filter(|l| !l.trim().is_empty()) {
        let case: Json = serde_json::from_str(line).unwrap();
        cases += 1;
        let id = case["id"].as_str().unwrap();
        let text = rename(case["submit"].as_str().unwrap());
        let mut ctx = Context::new(
            case["clusterid"].as_i64().unwrap(),
            case["qdate"].as_i64().unwrap(),
            case["iwd"].as_str().unwrap(),
        )
        .with_fs(&fs);
        ctx.owner = case["owner_arg"].as_str().map(str::to_string);
        let result = parse(&text, &format!("{id}.sub")).and_then(|d| expand(&d, &ctx));
        if !case["error"].is_null() {
            rejected_total += 1;
            match result {
                Err(e) => {
                    rejected_ok += 1;
                    println!("{id}: rejected as HTCondor does: {e}  (HTCondor: {})", case["error"]);
                }
                Ok(_) => problems
                    .push(format!("{id}: HTCondor rejects it ({}), we accept it", case["error"])),
            }
            continue;
        }
        let sub = match result {
            Ok(s) => s,
            Err(e) => {
                // Deliberate (CONFORMANCE.md): a cron field out of range is a
                // submit error here; HTCondor copies it and its schedd runs the
                // job every minute instead. And a resource request that is not
                // a number (HTCondor: a reference to a missing attribute, so
                // the job never matches) is an error too.
                let text = e.to_string();
                if (text.contains("cron_") && text.contains("is outside"))
                    || (text.contains("request_") && text.contains("must be a number"))
                {
                    rejected_ok += 1;
                    rejected_total += 1;
                    println!("{id}: rejected on purpose (HTCondor accepts it): {e}");
                } else {
                    problems.push(format!("{id}: rejected: {e}"));
                }
                continue;
            }
        };
        let want_jobs = case["jobs"].as_array().unwrap();
        if want_jobs.len() != sub.jobs.len() {
            println!("DISAGREE {id}: {} jobs, HTCondor makes {}", sub.jobs.len(), want_jobs.len());
        }
        for (i, want) in want_jobs.iter().enumerate() {
            let want = want.as_object().unwrap();
            let Some(ours) = sub.jobs.get(i) else {
                compared += want.len();
                continue;
            };
            for (name, w) in want {
                compared += 1;
                match ours.get(name) {
                    Some(e) if agrees(e, w) => agreed += 1,
                    got => println!(
                        "DISAGREE {id} proc {i} {name}: ours {} | HTCondor {}",
                        got.map(unparse).unwrap_or_else(|| "<absent>".into()),
                        rename(w["expr"].as_str().unwrap_or(""))
                    ),
                }
                if name == "Requirements" {
                    req_compared += 1;
                    let want_req = wasm_requirements(
                        &rename(w["expr"].as_str().unwrap()),
                        user_requirements(&text).as_deref(),
                    );
                    let want_e = classad::parse_expr(&want_req).unwrap();
                    if ours.get(name).map(unparse) == Some(unparse(&want_e)) {
                        req_agreed_modulo += 1;
                    } else {
                        problems.push(format!(
                            "{id} proc {i}: Requirements differ beyond the documented clauses:\n  ours {}\n  want {}",
                            ours.get(name).map(unparse).unwrap_or_default(),
                            want_req
                        ));
                    }
                }
            }
            for name in RECORDED {
                if ours.contains(name) && !want.keys().any(|k| k.eq_ignore_ascii_case(name)) {
                    compared += 1;
                    println!(
                        "DISAGREE {id} proc {i} {name}: ours {} | HTCondor <absent>",
                        unparse(ours.get(name).unwrap())
                    );
                }
            }
        }
    }
    let rate = agreed as f64 * 100.0 / compared.max(1) as f64;
    println!(
        "submit oracle: {cases} cases, {agreed}/{compared} attributes agree ({rate:.2} %); \
         Requirements {req_agreed_modulo}/{req_compared} agree modulo the documented Wasm clauses; \
         {rejected_ok}/{rejected_total} rejected files rejected"
    );
    for p in &problems {
        println!("PROBLEM {p}");
    }
    assert_eq!(rejected_ok, rejected_total, "every file HTCondor rejects must be rejected");
    assert!(problems.is_empty(), "{} problems, see output", problems.len());
    assert!(rate >= 95.0, "agreement {rate:.2} % is below 95 %");
}

#[test]
fn padded_modules_are_valid_and_sized() {
    for n in [500, 2000] {
        let m = padded_module(n);
        assert_eq!(m.len(), n);
        // The custom section's declared size covers the rest of the module.
        let size = (m[9] & 0x7f) as usize | ((m[10] as usize) << 7);
        assert_eq!(11 + size, n);
    }
}
