//! The startd policy document's default policy block, loaded verbatim from a
//! file, expanded, and evaluated as ClassAd expressions against a machine ad
//! and a job ad, on a virtual clock.

use andes_config::Config;
use classad::{ClassAd, EvalOptions, Evaluator, Value, parse_ad, parse_expr};

const NOW: i64 = 1_700_000_000;
const POLICY: [&str; 9] = [
    "START",
    "SUSPEND",
    "CONTINUE",
    "PREEMPT",
    "KILL",
    "WANT_SUSPEND",
    "WANT_VACATE",
    "PERIODIC_CHECKPOINT",
    "MaxJobRetirementTime",
];

fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The block as the spec prints it, then the example-configuration macros it
/// names without defining (SmallJob, IsPVM, IsVanilla) and the spec's
/// unbalanced MachineBusy repaired.
fn policy_config() -> Config {
    let mut cfg = Config::new();
    cfg.load_file(data("default_policy.config")).unwrap();
    cfg.load_file(data("default_policy_supplement.config")).unwrap();
    cfg
}

/// A machine ad carrying the policy expressions, as the startd publishes them
/// (PREEMPT refers to SUSPEND and WANT_SUSPEND by name).
fn machine(cfg: &Config, extra: &str) -> ClassAd {
    let mut ad = parse_ad(extra).unwrap();
    for name in POLICY {
        let text = cfg.get(name).unwrap().unwrap_or_else(|| panic!("{name} is not defined"));
        assert!(!text.contains("$("), "{name} not fully expanded: {text}");
        let e = parse_expr(&text).unwrap_or_else(|e| panic!("{name} = {text}: {e}"));
        ad.insert(name, e);
    }
    ad
}

fn eval(ad: &ClassAd, job: &ClassAd, name: &str) -> Value {
    let mut ev = Evaluator::with_options(EvalOptions { now: Some(NOW), ..Default::default() });
    ev.eval_attr(ad, Some(job), name)
}

fn job() -> ClassAd {
    parse_ad("[ JobUniverse = 5; ImageSize = 200000; Owner = \"alice\" ]").unwrap()
}

#[test]
fn every_policy_macro_expands_to_a_classad_expression() {
    let cfg = policy_config();
    assert_eq!(
        cfg.get("START").unwrap().unwrap().split_whitespace().collect::<Vec<_>>().join(" "),
        "( (KeyboardIdle > 15 * 60) && ( (LoadAvg - CondorLoadAvg) <= 0.3 || \
         (State != \"Unclaimed\" && State != \"Owner\")) )"
    );
    let m = machine(&cfg, "[]");
    for name in POLICY {
        assert!(m.contains(name));
    }
}

#[test]
fn an_idle_desktop_starts_jobs_and_leaves_them_alone() {
    let cfg = policy_config();
    let m = machine(
        &cfg,
        &format!(
            "[ KeyboardIdle = 1200; ConsoleIdle = 1200; LoadAvg = 0.05; CondorLoadAvg = 0.0; \
               CpuBusyTime = 0; State = \"Unclaimed\"; Activity = \"Idle\"; \
               EnteredCurrentState = {}; EnteredCurrentActivity = {}; JobStart = {}; \
               LastPeriodicCheckpoint = {} ]",
            NOW - 100,
            NOW - 100,
            NOW - 100,
            NOW - 100
        ),
    );
    let j = job();
    assert_eq!(eval(&m, &j, "START"), Value::Bool(true));
    assert_eq!(eval(&m, &j, "SUSPEND"), Value::Bool(false));
    assert_eq!(eval(&m, &j, "PREEMPT"), Value::Bool(false));
    assert_eq!(eval(&m, &j, "KILL"), Value::Bool(false));
    assert_eq!(eval(&m, &j, "PERIODIC_CHECKPOINT"), Value::Bool(false));
    assert_eq!(eval(&m, &j, "MaxJobRetirementTime"), Value::Int(0));
}

#[test]
fn the_owner_returning_suspends_then_preempts_then_kills() {
    let cfg = policy_config();
    let j = job();
    // Keyboard touched 10 s ago, job running for 20 minutes: the big
    // vanilla job is suspended rather than vacated.
    let busy = format!(
        "[ KeyboardIdle = 10; ConsoleIdle = 10; LoadAvg = 1.2; CondorLoadAvg = 1.0; \
           CpuBusyTime = 0; State = \"Claimed\"; Activity = \"Busy\"; \
           EnteredCurrentState = {0}; EnteredCurrentActivity = {0}; JobStart = {0}; \
           LastPeriodicCheckpoint = {0} ]",
        NOW - 1200
    );
    let m = machine(&cfg, &busy);
    assert_eq!(eval(&m, &j, "START"), Value::Bool(false));
    assert_eq!(eval(&m, &j, "SUSPEND"), Value::Bool(true));
    assert_eq!(eval(&m, &j, "WANT_SUSPEND"), Value::Bool(true));
    assert_eq!(eval(&m, &j, "WANT_VACATE"), Value::Bool(true));
    assert_eq!(eval(&m, &j, "PREEMPT"), Value::Bool(false));
    // Suspended for 11 minutes: MaxSuspendTime (10 minutes) is past.
    let suspended = busy.replace("\"Busy\"", "\"Suspended\"").replace(
        &format!("EnteredCurrentActivity = {}", NOW - 1200),
        &format!("EnteredCurrentActivity = {}", NOW - 660),
    );
    let m = machine(&cfg, &suspended);
    assert_eq!(eval(&m, &j, "PREEMPT"), Value::Bool(true));
    assert_eq!(eval(&m, &j, "CONTINUE"), Value::Bool(false));
    // Vacating for 11 minutes: KILL (MaxVacateTime, 10 minutes) fires.
    let vacating = suspended.replace("\"Suspended\"", "\"Vacating\"");
    let m = machine(&cfg, &vacating);
    assert_eq!(eval(&m, &j, "KILL"), Value::Bool(true));
    // Seven hours since the last checkpoint of a small image: checkpoint.
    let small = parse_ad("[ JobUniverse = 5; ImageSize = 1000 ]").unwrap();
    let m = machine(
        &cfg,
        &busy.replace(
            &format!("LastPeriodicCheckpoint = {}", NOW - 1200),
            &format!("LastPeriodicCheckpoint = {}", NOW - 7 * 3600),
        ),
    );
    assert_eq!(eval(&m, &small, "PERIODIC_CHECKPOINT"), Value::Bool(true));
    assert_eq!(eval(&m, &j, "PERIODIC_CHECKPOINT"), Value::Bool(false));
    // A small job is suspended even when the keyboard is quiet.
    assert_eq!(eval(&m, &small, "WANT_SUSPEND"), Value::Bool(true));
}

#[test]
fn the_block_alone_leaves_the_undefined_macros_empty_as_htcondor_does() {
    let mut cfg = Config::new();
    cfg.load_file(data("default_policy.config")).unwrap();
    // START, SUSPEND, CONTINUE, PREEMPT and KILL need nothing else.
    for name in ["START", "SUSPEND", "CONTINUE", "PREEMPT", "KILL", "PERIODIC_CHECKPOINT"] {
        let text = cfg.get(name).unwrap().unwrap();
        parse_expr(&text).unwrap_or_else(|e| panic!("{name} = {text}: {e}"));
    }
    // WANT_SUSPEND names SmallJob, IsPVM and IsVanilla, which the block does
    // not define: they expand to nothing and the text is not an expression.
    let text = cfg.get("WANT_SUSPEND").unwrap().unwrap();
    assert!(parse_expr(&text).is_err(), "{text}");
}
