//! `andes classad`: evaluate expressions against ads, and explain matches.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use classad::json::{normalize, parse_oracle_expr};
use classad::matching::{SideAnalysis, analyze_side, rank_with};
use classad::{ClassAd, EvalOptions, Evaluator, parse_ad, parse_expr};
use serde_json::json;

/// `andes classad` subcommands.
#[derive(Subcommand)]
pub enum ClassadCmd {
    /// Evaluate an expression, print its value in ClassAd syntax.
    Eval(EvalArgs),
    /// Say whether a job ad and a machine ad match, with each side's Rank,
    /// and which clauses of Requirements fail.
    Match(MatchArgs),
}

/// Arguments of `andes classad eval`.
#[derive(Args)]
pub struct EvalArgs {
    /// The ad that is MY (a file in old or new syntax, or `-` for stdin).
    #[arg(long, value_name = "FILE")]
    my: Option<PathBuf>,
    /// The ad that is TARGET.
    #[arg(long, value_name = "FILE")]
    target: Option<PathBuf>,
    /// Pure new-ClassAd semantics (STRICT_CLASSAD_EVALUATION = true).
    #[arg(long)]
    strict: bool,
    /// Read `{"expr", "my", "target"}` lines from FILE (`-` for stdin) and
    /// print one normalised `{"type", "value"}` JSON line for each.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["my", "target", "expr"])]
    jsonl: Option<PathBuf>,
    /// Seed for `random()`, for reproducible output.
    #[arg(long)]
    seed: Option<u64>,
    /// The expression.
    #[arg(required_unless_present = "jsonl")]
    expr: Option<String>,
}

/// Arguments of `andes classad match`.
#[derive(Args)]
pub struct MatchArgs {
    /// The job ad (old or new syntax).
    job: PathBuf,
    /// The machine ad (old or new syntax).
    machine: PathBuf,
    /// Pure new-ClassAd semantics.
    #[arg(long)]
    strict: bool,
}

/// Runs an `andes classad` subcommand.
pub fn run(cmd: ClassadCmd) -> Result<ExitCode> {
    match cmd {
        ClassadCmd::Eval(a) => eval(a),
        ClassadCmd::Match(a) => do_match(a),
    }
}

fn read_input(path: &Path) -> Result<String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).context("reading stdin")?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    }
}

fn read_ad(path: &Path) -> Result<ClassAd> {
    let text = read_input(path)?;
    let shown = if path.as_os_str() == "-" { "<stdin>".into() } else { path.display().to_string() };
    parse_ad(&text).map_err(|e| anyhow!("{shown}:{}:{}: {}", e.line, e.col, e.msg))
}

fn eval(a: EvalArgs) -> Result<ExitCode> {
    let opts = EvalOptions { strict: a.strict, seed: a.seed, ..Default::default() };
    if let Some(path) = a.jsonl {
        return eval_jsonl(&path, opts);
    }
    let my = a.my.as_deref().map(read_ad).transpose()?;
    let target = a.target.as_deref().map(read_ad).transpose()?;
    let text = a.expr.unwrap_or_default();
    let expr =
        parse_expr(&text).map_err(|e| anyhow!("<expression>:{}:{}: {}", e.line, e.col, e.msg))?;
    let v = Evaluator::with_options(opts).eval(&expr, my.as_ref(), target.as_ref());
    outln!("{v}");
    Ok(ExitCode::SUCCESS)
}

fn eval_jsonl(path: &Path, opts: EvalOptions) -> Result<ExitCode> {
    let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        Box::new(std::io::BufReader::new(f))
    };
    let mut ev = Evaluator::with_options(opts);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (n, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("{}:{}: reading", path.display(), n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let case: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("{}:{}: not a JSON object", path.display(), n + 1))?;
        let result =
            jsonl_case(&mut ev, &case).with_context(|| format!("{}:{}", path.display(), n + 1))?;
        writeln!(out, "{result}")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn jsonl_case(ev: &mut Evaluator, case: &serde_json::Value) -> Result<serde_json::Value> {
    let parse_error = json!({"type": "parse_error", "value": null});
    let Some(text) = case.get("expr").and_then(|e| e.as_str()) else {
        bail!("line has no string `expr`");
    };
    let ad = |key: &str| -> Option<Option<ClassAd>> {
        match case.get(key) {
            None | Some(serde_json::Value::Null) => Some(None),
            Some(serde_json::Value::String(s)) => parse_ad(s).ok().map(Some),
            Some(_) => None,
        }
    };
    let (Some(my), Some(target)) = (ad("my"), ad("target")) else {
        return Ok(parse_error);
    };
    let Some(expr) = parse_oracle_expr(text) else {
        return Ok(parse_error);
    };
    let v = ev.eval(&expr, my.as_ref(), target.as_ref());
    Ok(normalize(ev, &expr, &v, my.as_ref(), target.as_ref()))
}

fn print_side(out: &mut String, who: &str, other: &str, side: &SideAnalysis) {
    use std::fmt::Write as _;
    if !side.present {
        let _ = writeln!(out, "{who} Requirements: missing, so it matches nothing");
        return;
    }
    let verdict = if side.holds() { "satisfied" } else { "NOT satisfied" };
    let _ =
        writeln!(out, "{who} Requirements are {verdict} by the {other} (value: {})", side.value);
    if !side.holds() {
        for c in side.failing() {
            let why = match &c.value {
                classad::Value::Bool(false) => "is false".to_string(),
                classad::Value::Undefined => {
                    "is undefined (an attribute it needs is missing)".into()
                }
                classad::Value::Error => "is an error (a type mismatch or a bad operation)".into(),
                v => format!("is {v}, not a boolean"),
            };
            let _ = writeln!(out, "  clause failed: {}  -- {why}", c.text);
        }
    }
}

fn do_match(a: MatchArgs) -> Result<ExitCode> {
    let job = read_ad(&a.job)?;
    let machine = read_ad(&a.machine)?;
    let mut ev = Evaluator::with_options(EvalOptions { strict: a.strict, ..Default::default() });
    let js = analyze_side(&mut ev, &job, &machine);
    let ms = analyze_side(&mut ev, &machine, &job);
    let mut out = String::new();
    print_side(&mut out, "Job", "machine", &js);
    print_side(&mut out, "Machine", "job", &ms);
    let rank_text = |ad: &ClassAd, other: &ClassAd, ev: &mut Evaluator| match ad.get("Rank") {
        None => "missing (0.0)".to_string(),
        Some(e) => {
            let v = ev.eval(e, Some(ad), Some(other));
            format!("{v} (as used by the negotiator: {})", rank_with(ev, ad, other))
        }
    };
    out.push_str(&format!("Job Rank of the machine: {}\n", rank_text(&job, &machine, &mut ev)));
    out.push_str(&format!("Machine Rank of the job: {}\n", rank_text(&machine, &job, &mut ev)));
    let matched = js.holds() && ms.holds();
    out.push_str(if matched { "Result: MATCH\n" } else { "Result: NO MATCH\n" });
    out!("{out}");
    Ok(ExitCode::SUCCESS)
}
