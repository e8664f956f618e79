use super::*;

/// The manual's example configuration, verbatim but for the three
/// GridResources, which point at test pools (shared with the whole-pool
/// router tests).
pub(crate) const EXAMPLE: &str = include_str!("../../tests/data/router_example.config");

pub(crate) fn example_table() -> Table {
    let mut config = andes_config::Config::new();
    config.load_str(EXAMPLE, "example").unwrap();
    let defaults = config.get("JOB_ROUTER_DEFAULTS").unwrap();
    let entries = config.get("JOB_ROUTER_ENTRIES").unwrap().unwrap();
    Table::load(defaults.as_deref(), &[("JOB_ROUTER_ENTRIES".into(), entries)]).unwrap()
}

fn ad(text: &str) -> ClassAd {
    classad::parse_ad(text).unwrap()
}

fn job(extra: &str) -> ClassAd {
    ad(&format!(
        r#"[ClusterId = 1; ProcId = 0; Owner = "alice"; JobStatus = 1; QDate = 100;
            Cmd = "job.wasm"; Requirements = TARGET.HasWasm; JobUniverse = 5;
            LastRejMatchTime = 50; WantJobRouter = LastRejMatchTime =!= UNDEFINED; {extra}]"#
    ))
}

#[test]
fn the_manuals_example_configuration_loads() {
    let t = example_table();
    let names: Vec<&str> = t.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["Site 1", "Site 2", "Site 3"]);
    for r in &t.routes {
        assert_eq!((r.max_jobs, r.max_idle_jobs), (200, 10), "{}", r.name);
        assert_eq!(r.failure_rate_threshold, 0.03);
        assert_eq!(r.target_universe, 9);
    }
    assert_eq!(t.routes[0].target, Some(Target::Andes("127.0.0.1:9701".into())));
    assert_eq!(t.routes[2].target, Some(Target::Slurm("debug".into())));
    // The entry's settings merge over the defaults'; the macro is expanded.
    let mut ev = Evaluator::new();
    let copy = t.routes[1].routed_copy(&mut ev, &job(""), JobId::new(1, 0));
    assert_eq!(copy.eval_attr("GlobusRSL"), Value::from("(maxwalltime=1440)(jobType=single)"));
    assert_eq!(copy.eval_attr("Requirements"), Value::Bool(true));
    assert!(!copy.contains("WantJobRouter"), "delete_WantJobRouter");
    assert_eq!(
        copy.get("PeriodicRemove").unwrap().to_string(),
        "JobStatus == 5 || (JobStatus == 1 && (time() - QDate) > 3600 * 6)"
    );
    assert_eq!(copy.eval_attr("JobUniverse"), Value::Int(9));
    assert_eq!(copy.eval_attr("GridResource"), Value::from("andes 127.0.0.1:9702"));
    assert_eq!(copy.eval_attr("RoutedFromJobId"), Value::from("1.0"));
    assert_eq!(copy.eval_attr("RouteName"), Value::from("Site 2"));
    assert!(!copy.contains("ClusterId") && !copy.contains("JobStatus") && !copy.contains("QDate"));
    let copy3 = t.routes[2].routed_copy(&mut ev, &job(""), JobId::new(1, 0));
    assert_eq!(copy3.eval_attr("remote_jobuniverse"), Value::Int(5));
}

#[test]
fn requirements_see_the_job_as_target() {
    let t = example_table();
    let mut ev = Evaluator::new();
    assert!(t.routes[0].matches(&mut ev, &job("")));
    assert!(!t.routes[0].matches(&mut ev, &job("LastRejMatchTime = undefined")));
}

#[test]
fn every_transform_form() {
    let text = r#"[ Name = "t"; GridResource = "andes h:1";
        Copy_Requirements = "OriginalRequirements";
        Copy_Missing = "GoneToo";
        Delete_Cmd = true;
        Set_Requirements = TARGET.Memory > 10;
        Set_Note = "routed";
        Eval_Set_Doubled = RequestMemory * 2;
        Eval_Set_RoutedAt = time();
        Eval_Set_FromRoute = TARGET.Name;
    ]"#;
    let t = Table::load(None, &[("entries".into(), text.into())]).unwrap();
    let r = &t.routes[0];
    let mut ev = Evaluator::with_options(EvalOptions { now: Some(777), ..Default::default() });
    let original = job("RequestMemory = 64; GoneToo = 1");
    let copy = r.routed_copy(&mut ev, &original, JobId::new(1, 0));
    // Copy_ runs before Set_: the original expression is kept under the new name.
    assert_eq!(copy.get("OriginalRequirements").unwrap().to_string(), "TARGET.HasWasm");
    assert!(!copy.contains("GoneToo"), "copying an absent attribute removes the target");
    assert!(!copy.contains("Cmd"));
    // Set_ keeps the expression; Eval_Set_ stores its value.
    assert_eq!(copy.get("Requirements").unwrap().to_string(), "TARGET.Memory > 10");
    assert_eq!(copy.eval_attr("Note"), Value::from("routed"));
    assert_eq!(copy.get("Doubled").unwrap().to_string(), "128");
    assert_eq!(copy.eval_attr("RoutedAt"), Value::Int(777));
    assert_eq!(copy.eval_attr("FromRoute"), Value::from("t"));
}

#[test]
fn override_routing_entry_replaces_or_keeps_the_earlier_entry() {
    let a =
        r#"[ Name = "x"; GridResource = "andes a:1" ] [ Name = "x"; GridResource = "andes b:1" ]"#;
    let t = Table::load(None, &[("e".into(), a.into())]).unwrap();
    assert_eq!(t.routes.len(), 1);
    assert_eq!(t.routes[0].grid_resource, "andes b:1");
    let b = r#"[ Name = "x"; GridResource = "andes a:1" ]
               [ Name = "x"; GridResource = "andes b:1"; OverrideRoutingEntry = false ]"#;
    let t = Table::load(None, &[("e".into(), b.into())]).unwrap();
    assert_eq!(t.routes[0].grid_resource, "andes a:1");
    assert!(t.warnings.iter().any(|w| w.contains("earlier entry stays")));
}

/// The manual's example configuration exactly as the manual prints it
/// (section 5.4.3): its routes use Globus gt2 and HTCondor-C.
const MANUAL: &str = include_str!("../../tests/data/router_manual.config");

#[test]
fn the_manuals_configuration_loads_verbatim_and_routes_andes_cannot_serve_are_skipped() {
    let mut config = andes_config::Config::new();
    config.load_str(MANUAL, "router_manual.config").unwrap();
    let defaults = config.get("JOB_ROUTER_DEFAULTS").unwrap();
    let mut entries = config.get("JOB_ROUTER_ENTRIES").unwrap().unwrap();
    let t = Table::load(defaults.as_deref(), &[("JOB_ROUTER_ENTRIES".into(), entries.clone())])
        .unwrap();
    assert!(t.routes.is_empty());
    // One clear warning for each, naming the entry, the route and the type.
    for (n, (name, kind)) in
        [("Site 1", "gt2"), ("Site 2", "gt2"), ("Site 3", "condor")].into_iter().enumerate()
    {
        let w = t.warnings.iter().filter(|w| w.contains(&format!("route `{name}`"))).count();
        assert_eq!(w, 1, "{:?}", t.warnings);
        assert!(
            t.warnings
                .iter()
                .any(|w| w.starts_with(&format!("JOB_ROUTER_ENTRIES, entry {}", n + 1))
                    && w.contains(&format!("grid type `{kind}`"))
                    && w.ends_with("skipped")),
            "{:?}",
            t.warnings
        );
    }
    // A route andes can serve beside them works, with the manual's defaults.
    entries.push_str("\n[ GridResource = \"andes 127.0.0.1:9701\"; name = \"Overflow\"; ]\n");
    let t = Table::load(defaults.as_deref(), &[("JOB_ROUTER_ENTRIES".into(), entries)]).unwrap();
    let names: Vec<&str> = t.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["Overflow"]);
    assert_eq!((t.routes[0].max_jobs, t.routes[0].max_idle_jobs), (200, 10));
}

#[test]
fn one_bad_entry_is_reported_with_where_and_why_and_skipped_alone() {
    let good = "[ Name = \"ok\"; GridResource = \"andes h:1\" ]";
    let load = |bad: &str| {
        Table::load(None, &[("JOB_ROUTER_ENTRIES".into(), format!("{bad}\n{good}"))]).unwrap()
    };
    for (bad, why) in [
        ("[ Name = \"n\"; GridResource = \"gt2 site1.edu\" ]", "grid type `gt2`"),
        ("[ Name = ; GridResource = \"andes h:2\" ]", ""),
        ("[ Name = \"n\" ]", "no GridResource"),
        ("[ Name = \"n\"; GridResource = \"andes h:2\"; MaxJobs = \"many\" ]", "MaxJobs"),
        ("stray words", ""),
        (
            "[ Name = \"n\"; GridResource = \"andes h:2\"; Note = \"a ] in a string\"; MaxJobs = ]",
            "",
        ),
    ] {
        let t = load(bad);
        let names: Vec<&str> = t.routes.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["ok"], "{bad}: {:?}", t.warnings);
        assert!(
            t.warnings.iter().any(|w| w.starts_with("JOB_ROUTER_ENTRIES, entry 1: ")
                && w.contains(why)
                && w.ends_with("skipped")),
            "{bad}: {:?}",
            t.warnings
        );
    }
    // A string or comment holding brackets does not split an entry.
    let t = Table::load(
        None,
        &[(
            "e".into(),
            "/* [ not an entry ] */ [ Name = \"x]\"; GridResource = \"andes h:1\" ] // [".into(),
        )],
    )
    .unwrap();
    assert_eq!(t.routes.len(), 1, "{:?}", t.warnings);
    assert_eq!(t.routes[0].name, "x]");
    // Unreadable defaults, which every route depends on, refuse the table.
    let e = Table::load(Some("[a=1] [b=2]"), &[]).unwrap_err();
    assert!(e.to_string().contains("expected one ClassAd"), "{e}");
    let t = Table::load(
        None,
        &[("e".into(), "[ GridResource = \"andes h:1\"; SharedX509UserProxy = \"/p\" ]".into())],
    )
    .unwrap();
    assert_eq!(t.routes[0].name, "andes h:1", "the name defaults to GridResource");
    assert!(t.warnings.iter().any(|w| w.contains("no meaning")));
}

fn jobs(n: u32) -> Vec<(JobId, ClassAd)> {
    (0..n).map(|i| (JobId::new(1, i), job(&format!("ProcId = {i}")))).collect()
}

#[test]
fn jobs_spread_across_routes_within_max_idle_jobs() {
    let t = example_table();
    let mut loads = vec![RouteLoad::default(); 3];
    let d = plan(&t, &mut loads, &jobs(100), 1000, &Journal::none());
    // MaxIdleJobs = 10 on each of three routes: 30 routed, 10 each.
    assert_eq!(d.len(), 30);
    let per: Vec<u32> = loads.iter().map(|l| l.jobs).collect();
    assert_eq!(per, [10, 10, 10]);
    // Jobs that fail the route's Requirements are not routed.
    let mut loads = vec![RouteLoad::default(); 3];
    let unwanted = vec![(JobId::new(2, 0), job("LastRejMatchTime = undefined"))];
    assert!(plan(&t, &mut loads, &unwanted, 1000, &Journal::none()).is_empty());
}

#[test]
fn max_jobs_caps_running_copies_too() {
    let text = r#"[ Name = "small"; GridResource = "andes h:1"; MaxJobs = 3; MaxIdleJobs = 50 ]"#;
    let t = Table::load(None, &[("e".into(), text.into())]).unwrap();
    let mut loads = vec![RouteLoad { jobs: 2, idle: 0, ..Default::default() }];
    assert_eq!(plan(&t, &mut loads, &jobs(10), 0, &Journal::none()).len(), 1);
    assert_eq!(plan(&t, &mut loads, &jobs(10), 0, &Journal::none()).len(), 0);
}

#[test]
fn a_failing_route_is_throttled_to_ever_rarer_probes() {
    let text =
        r#"[ Name = "hole"; GridResource = "andes h:1"; JobFailureTest = TARGET.ExitCode != 0 ]"#;
    let t = Table::load(None, &[("e".into(), text.into())]).unwrap();
    let r = &t.routes[0];
    let mut ev = Evaluator::new();
    assert!(r.failed(&mut ev, &ad("[ExitCode = 1]")));
    assert!(!r.failed(&mut ev, &ad("[ExitCode = 0]")));
    let mut l = RouteLoad::default();
    assert!(l.has_room(r, 0));
    // Two failures within a minute: 2/60 > 0.03 per second.
    l.ended(true, 10);
    l.ended(true, 11);
    assert!(!l.has_room(r, 12), "paused after failing");
    assert!(l.has_room(r, 11 + 4), "a probe after 2^2 s");
    l.jobs = 1;
    assert!(!l.has_room(r, 16), "one probe at a time");
    l.jobs = 0;
    l.ended(true, 20);
    assert!(!l.has_room(r, 20 + 7) && l.has_room(r, 20 + 8), "the pause doubles");
    // A success ends the throttling.
    l.ended(false, 30);
    assert!(l.has_room(r, 30));
    // Failures age out of the window.
    let mut l = RouteLoad::default();
    l.ended(true, 0);
    l.ended(true, 1);
    l.consecutive_failures = 0;
    assert!(l.has_room(r, 1 + FAILURE_WINDOW));
}

#[test]
fn edit_job_in_place_once_and_with_a_timestamp_guard() {
    // Once: the edit marks the job so the route no longer matches.
    let once = r#"[ Name = "tag"; EditJobInPlace = true;
        Requirements = TARGET.Tagged =?= undefined;
        Set_Tagged = true; Set_RequestMemory = 128 ]"#;
    let t = Table::load(None, &[("e".into(), once.into())]).unwrap();
    assert!(t.routes[0].target.is_none(), "GridResource is ignored in place");
    let mut loads = vec![RouteLoad::default()];
    let d = plan(&t, &mut loads, &jobs(1), 0, &Journal::none());
    let Decision::Edit { changes, .. } = &d[0] else { panic!("{d:?}") };
    let mut names: Vec<&str> = changes.iter().map(|c| c.0.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["RequestMemory", "Tagged"]);
    let mut edited = jobs(1);
    for (n, e) in changes {
        edited[0].1.insert(n.as_str(), e.clone().unwrap());
    }
    assert!(plan(&t, &mut loads, &edited, 0, &Journal::none()).is_empty(), "transformed once");
    assert_eq!(loads[0].jobs, 0, "an edit in place is not a routed copy");
    // Guarded by a timestamp: again only after 60 s.
    let guard = r#"[ Name = "stamp"; EditJobInPlace = true;
        Requirements = TARGET.LastEdited =?= undefined || time() - TARGET.LastEdited > 60;
        Eval_Set_LastEdited = time() ]"#;
    let t = Table::load(None, &[("e".into(), guard.into())]).unwrap();
    let mut j = jobs(1);
    let d = plan(&t, &mut loads, &j, 1000, &Journal::none());
    let Decision::Edit { changes, .. } = &d[0] else { panic!("{d:?}") };
    assert_eq!(changes[0].1.as_ref().unwrap().to_string(), "1000");
    j[0].1.insert("LastEdited", changes[0].1.clone().unwrap());
    assert!(plan(&t, &mut loads, &j, 1060, &Journal::none()).is_empty());
    assert_eq!(plan(&t, &mut loads, &j, 1061, &Journal::none()).len(), 1);
}

/// A configuration in the transform language, as current HTCondor documents
/// it: the routes in JOB_ROUTER_ROUTE_NAMES order, pre- and post-route
/// transforms around each, the default limits, and config macros.
const NAMED: &str = r#"
JOB_ROUTER_DEFAULT_MAX_JOBS_PER_ROUTE = 200
JOB_ROUTER_DEFAULT_MAX_IDLE_JOBS_PER_ROUTE = 10
MAX_HOURS = 6
JOB_ROUTER_ROUTE_NAMES = Cluster Overflow Grid
JOB_ROUTER_ROUTE_Cluster @=rt
  GridResource = "slurm debug"
  REQUIREMENTS TARGET.RequestCpus <= 4
  UNIVERSE vanilla
  SET Partition = "debug"
@rt
JOB_ROUTER_ROUTE_Overflow @=rt
  MaxIdleJobs = 20
  GridResource = andes 127.0.0.1:9701
  site = overflow
  SET Site = "$(site)"
  # keep the job's own requirements under another name
  COPY Requirements OriginalRequirements
  RENAME /^Want(.*)$/ Wanted\1
  DEFAULT RequestMemory 512
  DEFAULT Owner "mallory"
  EVALSET Routed = 1 + 1
@rt
JOB_ROUTER_ROUTE_Grid @=rt
  GridResource = "gt2 gate.example.org/jobmanager"
@rt
JOB_ROUTER_PRE_ROUTE_TRANSFORM_NAMES = Defaults
JOB_ROUTER_TRANSFORM_Defaults @=jrd
  SET PeriodicRemove = JobStatus == 5 || \
      (JobStatus == 1 && (time() - QDate) > 3600 * $(MAX_HOURS))
  SET Requirements = true
@jrd
JOB_ROUTER_POST_ROUTE_TRANSFORM_NAMES = Tag
JOB_ROUTER_TRANSFORM_Tag @=t
  SET RoutedBy = "andes"
  DELETE /^LastRej/
@t
"#;

fn named_table(config_text: &str) -> Table {
    let mut config = andes_config::Config::new();
    config.load_str(config_text, "named").unwrap();
    let named = NamedRoutes::from_config(&config).unwrap();
    let entries = config.get("JOB_ROUTER_ENTRIES").unwrap().unwrap_or_default();
    Table::load(None, &[("JOB_ROUTER_ENTRIES".into(), entries)]).unwrap().arrange(&named)
}

#[test]
fn routes_in_the_transform_language_load_in_route_names_order() {
    let t = named_table(NAMED);
    let names: Vec<&str> = t.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["Cluster", "Overflow"], "{:?}", t.warnings);
    assert!(t.warnings.iter().any(|w| w.contains("JOB_ROUTER_ROUTE_Grid") && w.contains("gt2")));
    let (cluster, overflow) = (&t.routes[0], &t.routes[1]);
    assert_eq!(cluster.target, Some(Target::Slurm("debug".into())));
    assert_eq!(cluster.target_universe, 5);
    assert_eq!((cluster.max_jobs, cluster.max_idle_jobs), (200, 10), "the default limits");
    assert_eq!(overflow.target, Some(Target::Andes("127.0.0.1:9701".into())), "unquoted");
    assert_eq!(overflow.target_universe, 9);
    assert_eq!((overflow.max_jobs, overflow.max_idle_jobs), (200, 20), "its own MaxIdleJobs");
    let mut ev = Evaluator::new();
    assert!(cluster.matches(&mut ev, &job("RequestCpus = 2")));
    assert!(!cluster.matches(&mut ev, &job("RequestCpus = 8")));
    assert!(overflow.matches(&mut ev, &job("")), "no REQUIREMENTS: every job");
}

#[test]
fn transform_statements_apply_in_order_between_the_pre_and_post_route_transforms() {
    let t = named_table(NAMED);
    let mut ev = Evaluator::new();
    let copy =
        t.routes[1].routed_copy(&mut ev, &job("RequestMemory = undefined"), JobId::new(1, 0));
    let text = |a: &str| copy.get(a).map(|e| e.to_string()).unwrap_or_default();
    // The pre-route transform ran first: COPY saw its Requirements.
    assert_eq!(text("OriginalRequirements"), "true");
    assert_eq!(text("Requirements"), "true");
    assert!(text("PeriodicRemove").contains("3600 * 6"), "{}", text("PeriodicRemove"));
    assert_eq!(text("Site"), r#""overflow""#, "the transform's own macro");
    assert!(copy.contains("WantedJobRouter"), "renamed by regex");
    assert!(!copy.contains("WantJobRouter"));
    assert_eq!(text("RequestMemory"), "512", "DEFAULT fills an undefined value");
    assert_eq!(text("Owner"), r#""alice""#, "DEFAULT keeps a value");
    assert_eq!(copy.eval_attr("Routed"), Value::Int(2));
    // The post-route transform ran last.
    assert_eq!(text("RoutedBy"), r#""andes""#);
    assert!(!copy.contains("LastRejMatchTime"));
    assert_eq!(copy.eval_attr("JobUniverse"), Value::Int(9));
}

#[test]
fn a_bad_transform_route_is_skipped_with_its_line_and_the_others_work() {
    let bad = NAMED
        .replace("  SET Partition = \"debug\"", "  SET Partition = \"debug\"\n  EVALMACRO x = 1\n")
        + "JOB_ROUTER_ENTRIES = [ Name = \"Old\"; GridResource = \"andes 127.0.0.1:1\" ]\n";
    let t = named_table(&bad);
    let names: Vec<&str> = t.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["Overflow"]);
    assert!(
        t.warnings.iter().any(|w| w.contains("JOB_ROUTER_ROUTE_Cluster")
            && w.contains("line 5")
            && w.contains("EVALMACRO")),
        "{:?}",
        t.warnings
    );
    assert!(t.warnings.iter().any(|w| w.contains("`Old` is not in JOB_ROUTER_ROUTE_NAMES")));
    for text in ["SET", "SET A", "COPY A", "DELETE /(/", "UNIVERSE moon", "FROB A 1", "SET A 1 +"] {
        let e = transform::parse("r", text, &Default::default()).unwrap_err();
        assert!(e.starts_with("line 1: "), "{text}: {e}");
    }
}
