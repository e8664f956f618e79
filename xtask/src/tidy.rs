//! `cargo xtask tidy`: the rules of the house, checked rather than written
//! down only. CI runs it first.
//!
//! - **Layering**: every dependency between the workspace's crates (from
//!   `cargo metadata`) is in [`ALLOWED`], the ARCHITECTURE.md rule as data; a
//!   new edge fails until it is added here, where a reviewer sees it.
//! - **File size**: no source file (but tests and benches) over [`BUDGET`]
//!   lines, but those in [`OVER_BUDGET`], each of which may not grow past the
//!   size it has there (the list only shrinks).
//! - **References**: every file path a Markdown page (but the dated
//!   records of `journal/`) names in backticks exists (a path from a top-level directory exactly; any other as the
//!   end of some file's path).
//! - **Unsafe**: every `unsafe` block or impl has a `SAFETY:` comment just
//!   above it (but in the guest SDK's generated bindings).
//! - **Bindings**: the guest SDK's bindings were made from `wit/job.wit` as
//!   it is (see `cargo xtask bindings`).
//! - **Profile**: what only runs while building (proc-macros, build
//!   scripts' dependencies) is compiled unoptimised in the test build, and
//!   nothing a shipped program links is (see `xtask/src/profile.rs`).
//! - **Standard output**: the `andes` binary's sources (`src/`) print
//!   through `out!` and `outln!` (`src/out.rs`), never `print!` or
//!   `println!`, which panic when the reader of a pipe stopped early.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Lines a source file may have.
pub const BUDGET: usize = 1600;

/// Source files over [`BUDGET`], each with the most lines it may have until
/// it is cut into files of one concept.
pub const OVER_BUDGET: &[(&str, usize)] = &[];

/// Which workspace crates each may depend on (normal, build and dev
/// dependencies alike).
pub const ALLOWED: &[(&str, &[&str])] = &[
    ("andes-beneath", &[]),
    ("classad", &[]),
    ("andes-config", &["classad"]),
    ("andes-cron", &["classad"]),
    ("andes-dag", &[]),
    ("andes-compile", &[]),
    ("andes-snapshot", &["andes-beneath"]),
    ("andes-protocol", &["classad", "andes-beneath"]),
    ("andes-submit", &["classad", "andes-config", "andes-cron", "andes-compile"]),
    ("andes-startd", &["classad", "andes-config"]),
    ("andes-central", &["classad", "andes-protocol", "andes-beneath"]),
    ("andes-job", &["classad", "andes-protocol", "andes-beneath"]),
    (
        "andes-schedd",
        &[
            "classad",
            "andes-config",
            "andes-protocol",
            "andes-snapshot",
            "andes-beneath",
            "andes-cron",
            "andes-job",
        ],
    ),
    ("andes-starter", &["classad", "andes-snapshot", "andes-compile", "andes-beneath"]),
    (
        "andes-host",
        &[
            "classad",
            "andes-config",
            "andes-protocol",
            "andes-startd",
            "andes-starter",
            "andes-snapshot",
            "andes-compile",
            "andes-beneath",
            // A dev-dependency: the publisher's tests against the real collector.
            "andes-central",
        ],
    ),
    (
        "andes-client",
        &[
            "classad",
            "andes-config",
            "andes-protocol",
            "andes-job",
            "andes-submit",
            "andes-beneath",
        ],
    ),
    (
        "andes-dagman",
        &[
            "classad",
            "andes-config",
            "andes-dag",
            "andes-client",
            "andes-job",
            "andes-protocol",
            "andes-submit",
        ],
    ),
    (
        "andes-python",
        &[
            "classad",
            "andes-config",
            "andes-client",
            "andes-job",
            "andes-protocol",
            "andes-submit",
            "andes-dagman",
        ],
    ),
    (
        "andes",
        &[
            "classad",
            "andes-host",
            "andes-starter",
            "andes-protocol",
            "andes-schedd",
            "andes-central",
            "andes-job",
            "andes-submit",
            "andes-cron",
            "andes-snapshot",
            "andes-beneath",
            "andes-client",
            "andes-compile",
            "andes-startd",
            "andes-dagman",
        ],
    ),
    (
        "andes-fuzz-cases",
        &[
            "classad",
            "andes-config",
            "andes-submit",
            "andes-protocol",
            "andes-snapshot",
            "andes-cron",
            "andes-schedd",
            "andes-central",
            "andes-job",
            "andes-host",
            "andes-starter",
        ],
    ),
    ("xtask", &[]),
];

/// Runs every check; prints what fails; true when all pass.
pub fn run() -> bool {
    let root = crate::root();
    let mut failures = Vec::new();
    failures.extend(layering(&root));
    failures.extend(sizes(&root));
    failures.extend(pages(&root));
    failures.extend(references(&root));
    failures.extend(unsafe_blocks(&root));
    failures.extend(stdout_prints(&root));
    failures.extend(crate::bindings::check(&root));
    failures.extend(crate::profile::check(&root));
    if failures.is_empty() {
        eprintln!("tidy: ok");
        return true;
    }
    for f in &failures {
        eprintln!("tidy: {f}");
    }
    eprintln!("tidy: {} problems", failures.len());
    false
}

fn git_files(root: &Path) -> Vec<String> {
    let out = Command::new("git").args(["ls-files"]).current_dir(root).output();
    match out {
        Ok(o) if o.status.success() => {
            String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect()
        }
        _ => Vec::new(),
    }
}

/// `cargo metadata --format-version 1` with `args`, in `root`, parsed; the
/// error says which step failed.
pub(crate) fn cargo_metadata(root: &Path, args: &[&str]) -> Result<serde_json::Value, String> {
    let out = Command::new(crate::cargo_program())
        .args(["metadata", "--format-version", "1"])
        .args(args)
        .current_dir(root)
        .output();
    let text = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => return Err(format!("cargo metadata: {}", String::from_utf8_lossy(&o.stderr))),
        Err(e) => return Err(format!("cargo metadata: {e}")),
    };
    serde_json::from_str(&text).map_err(|e| format!("cargo metadata's answer: {e}"))
}

/// Every edge between workspace crates is allowed.
fn layering(root: &Path) -> Vec<String> {
    let meta = match cargo_metadata(root, &["--no-deps"]) {
        Ok(m) => m,
        Err(e) => return vec![e],
    };
    let packages = meta["packages"].as_array().cloned().unwrap_or_default();
    let ours: BTreeSet<String> =
        packages.iter().filter_map(|p| p["name"].as_str().map(str::to_string)).collect();
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut out = Vec::new();
    for p in &packages {
        let name = p["name"].as_str().unwrap_or("");
        let Some(may) = allowed.get(name) else {
            out.push(format!("crate {name} is not in tidy's ALLOWED table: say what it may use"));
            continue;
        };
        let deps = p["dependencies"].as_array().cloned().unwrap_or_default();
        for d in deps {
            let dep = d["name"].as_str().unwrap_or("");
            if ours.contains(dep) && dep != name && !may.contains(&dep) {
                out.push(format!(
                    "{name} depends on {dep}, which ARCHITECTURE.md's layering (tidy's ALLOWED) \
                     does not allow"
                ));
            }
        }
    }
    out
}

fn is_source(path: &str) -> bool {
    path.ends_with(".rs")
        && !path.starts_with("tests/")
        && !path.contains("/tests/")
        && !path.contains("/benches/")
        && !path.starts_with("benches/")
        && !path.starts_with("fuzz/")
        && !path.starts_with("samples/")
        && !path.starts_with("bench/")
}

/// No source file over the budget but those listed, which may not grow.
fn sizes(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let listed: BTreeMap<&str, usize> = OVER_BUDGET.iter().copied().collect();
    for f in git_files(root).iter().filter(|f| is_source(f)) {
        let Ok(text) = std::fs::read_to_string(root.join(f)) else { continue };
        let n = text.lines().count();
        match listed.get(f.as_str()) {
            Some(max) if n > *max => {
                out.push(format!("{f} has {n} lines, more than the {max} it may have"))
            }
            Some(_) => {}
            None if n > BUDGET => out.push(format!(
                "{f} has {n} lines, over the budget of {BUDGET}: cut it into files of one concept"
            )),
            None => {}
        }
    }
    for (f, _) in OVER_BUDGET {
        if let Ok(text) = std::fs::read_to_string(root.join(f))
            && text.lines().count() <= BUDGET
        {
            out.push(format!("{f} is within the budget now: remove it from OVER_BUDGET"));
        }
    }
    out
}

/// Reference pages that must stay short enough to read: dated records go
/// to `journal/`.
const PAGE_BUDGETS: [(&str, usize); 1] = [("BENCHMARKS.md", 400)];

/// Each reference page within its budget of lines.
fn pages(root: &Path) -> Vec<String> {
    PAGE_BUDGETS
        .iter()
        .filter_map(|(f, max)| {
            let n = std::fs::read_to_string(root.join(f)).map_or(0, |t| t.lines().count());
            (n > *max).then(|| {
                format!(
                    "{f} has {n} lines, over its {max}: move dated records to journal/ and keep \
                     the latest figure with a link"
                )
            })
        })
        .collect()
}

/// The paths Markdown pages name in backticks.
fn references(root: &Path) -> Vec<String> {
    let files = git_files(root);
    let all: BTreeSet<&str> = files.iter().map(String::as_str).collect();
    let dirs: BTreeSet<String> =
        files.iter().filter_map(|f| f.split_once('/').map(|(d, _)| format!("{d}/"))).collect();
    let mut out = Vec::new();
    // The journal records runs as they were: it names files where they stood.
    for md in files.iter().filter(|f| f.ends_with(".md") && !f.starts_with("journal/")) {
        let Ok(text) = std::fs::read_to_string(root.join(md)) else { continue };
        let mut in_code = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                continue;
            }
            if in_code {
                continue;
            }
            for (i, part) in line.split('`').enumerate() {
                if i % 2 == 1
                    && let Some(p) = as_path(part)
                    && !exists(&p, &all, &dirs, md)
                {
                    out.push(format!("{md}:{}: `{p}` names no file of the repository", n + 1));
                }
            }
        }
    }
    out
}

/// `text` when it names a file of the repository by its path: relative,
/// with a slash and a known extension, no placeholders. (A bare name may be
/// a file a command writes, not one of the repository's.)
fn as_path(text: &str) -> Option<String> {
    const EXT: [&str; 9] = [".rs", ".md", ".toml", ".py", ".sh", ".wit", ".pyi", ".js", ".css"];
    let t = text.trim();
    let plain = t.chars().all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c));
    if !plain || t.starts_with('/') || t.starts_with('.') || t.contains("..") {
        return None;
    }
    let file = t.rsplit('/').next().unwrap_or(t);
    if !t.contains('/') || !EXT.iter().any(|e| file.ends_with(e)) || file.len() <= 3 {
        return None;
    }
    Some(t.to_string())
}

fn exists(p: &str, all: &BTreeSet<&str>, dirs: &BTreeSet<String>, md: &str) -> bool {
    if all.contains(p) {
        return true;
    }
    // Relative to the page's own directory.
    if let Some((dir, _)) = md.rsplit_once('/')
        && all.contains(format!("{dir}/{p}").as_str())
    {
        return true;
    }
    // A path from a top-level directory must be exact; any other may be the
    // end of a path (`common/pool.rs`, `budget.rs`).
    if dirs.iter().any(|d| p.starts_with(d.as_str())) {
        return false;
    }
    let tail = format!("/{p}");
    all.iter().any(|f| f.ends_with(&tail))
}

/// Every `unsafe` block or impl has `SAFETY:` in the comment just above it.
/// `print!` or `println!` in the binary's sources, but in `src/out.rs`.
fn stdout_prints(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let files = git_files(root);
    let sources = files
        .iter()
        .filter(|f| f.starts_with("src/") && f.ends_with(".rs") && f.as_str() != "src/out.rs");
    for f in sources {
        let Ok(text) = std::fs::read_to_string(root.join(f)) else { continue };
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let prints = ["print!(", "println!("].iter().any(|m| {
                code.match_indices(m).any(|(at, _)| {
                    let before = code[..at].chars().next_back();
                    !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
            });
            if prints {
                out.push(format!(
                    "{f}:{}: print!/println! panic on a closed pipe: use out!/outln! (src/out.rs)",
                    i + 1
                ));
            }
        }
    }
    out
}

fn unsafe_blocks(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    // Generated code (the guest SDK's bindings) is checked where it is made.
    let made = |f: &&String| f.as_str() == crate::bindings::FILE;
    for f in git_files(root).iter().filter(|f| f.ends_with(".rs") && !made(f)) {
        let Ok(text) = std::fs::read_to_string(root.join(f)) else { continue };
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            // The word in code, not in a string literal (an odd number of
            // quotes before it).
            let in_code = |word: &str| {
                code.match_indices(word).any(|(at, _)| code[..at].matches('"').count() % 2 == 0)
            };
            let opens = in_code("unsafe {") || in_code("unsafe impl");
            if !opens || code.trim_start().starts_with("#") {
                continue;
            }
            let above = lines[i.saturating_sub(6)..i].iter().chain(std::iter::once(line));
            if !above.clone().any(|l| l.contains("SAFETY:")) {
                out.push(format!("{f}:{}: an unsafe block with no SAFETY: comment", i + 1));
            }
        }
    }
    out
}
