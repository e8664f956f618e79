//! The job router between real pools: a source pool whose schedd routes
//! jobs (the manual's example configuration) to other andes pools' schedds.

use crate::common;

use std::time::Duration;

use classad::ClassAd;
use common::pool::{Pool, int, text, wait_or};

/// The manual's example configuration (schedd/tests/data), its three
/// GridResources pointed at `sites`.
fn example_config(sites: &[String; 3]) -> String {
    include_str!("../../schedd/tests/data/router_example.config")
        .replace("andes 127.0.0.1:9701", &format!("andes {}", sites[0]))
        .replace("andes 127.0.0.1:9702", &format!("andes {}", sites[1]))
        .replace("slurm debug", &format!("andes {}", sites[2]))
        + "\nJOB_ROUTER_POLLING_PERIOD = 1\nJOB_ROUTER_KEY_NAME = schedd\n"
}

/// Waits until `andes router history` shows `site` with `completed` jobs and
/// `aborted` runs (the router records endings as it hears of them).
fn wait_history(p: &Pool, site: &str, completed: &str, aborted: &str) -> String {
    let last = std::cell::RefCell::new(String::new());
    wait_or(
        &format!("router history: {site} {completed} completed, {aborted} aborted"),
        Duration::from_secs(30),
        || {
            let h = p.ok("alice", &["router", "history"]);
            let found = h.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.first() == Some(&site)
                    && w.get(2) == Some(&completed)
                    && w.get(3) == Some(&aborted)
            });
            *last.borrow_mut() = h;
            found
        },
        || last.borrow().clone(),
    );
    last.into_inner()
}

/// The source pool (no execute hosts of its own) and `n` target pools that
/// trust the source's schedd key as the schedd `source`, which may submit
/// for the users they know (alice, bob, carol). Each target has `extra` in
/// its configuration. The source trusts each target's schedd key, which its
/// router's TLS connections must find; its schedd reads it when restarted
/// with its routes.
fn pools_with(n: usize, extra: &str) -> (Pool, Vec<Pool>) {
    pools_from(0, n, extra)
}

/// [`pools_with`], the source with `hosts` execute hosts of its own.
fn pools_from(hosts: usize, n: usize, extra: &str) -> (Pool, Vec<Pool>) {
    let source = Pool::new("", hosts);
    let key = std::fs::read_to_string(source.path().join("keys/schedd.pub")).unwrap();
    let line = format!("schedd source {}", key.trim());
    let targets: Vec<Pool> =
        (0..n).map(|_| Pool::new_trusting(extra, 1, std::slice::from_ref(&line))).collect();
    let trust = source.path().join("trust");
    let mut text = std::fs::read_to_string(&trust).unwrap();
    for (i, t) in targets.iter().enumerate() {
        let key = std::fs::read_to_string(t.path().join("keys/schedd.pub")).unwrap();
        text.push_str(&format!("schedd site{i} {}\n", key.trim()));
    }
    std::fs::write(&trust, text).unwrap();
    (source, targets)
}

/// [`pools_with`], the targets as the source configured.
fn pools(n: usize) -> (Pool, Vec<Pool>) {
    pools_with(n, "")
}

/// How many originals (jobs not routed copies) `p`'s history holds.
fn originals_done(p: &Pool) -> usize {
    p.history().iter().filter(|a| !a.contains("RoutedFromJobId")).count()
}

/// Routed copies finished (in the history). An original is finished from
/// its copy's end, and the copy leaves the queue just after: a test reading
/// the copies waits for them too.
fn copies_done(p: &Pool) -> usize {
    p.history().iter().filter(|a| a.contains("RoutedFromJobId")).count()
}

fn routed_copies(p: &Pool) -> Vec<ClassAd> {
    p.queue().into_iter().filter(|a| a.contains("RoutedFromJobId")).collect()
}

#[test]
fn the_manuals_example_spreads_jobs_over_three_pools_within_max_idle_jobs() {
    let (mut source, targets) = pools(3);
    let sites: [String; 3] = std::array::from_fn(|i| targets[i].schedd_address());
    source.restart_schedd_with(&example_config(&sites));
    // Jobs that found no match here (this pool has no hosts) want the router.
    source.submit(
        "alice",
        "work",
        "executable = primes.wasm\narguments = 2000000\noutput = out/p.$(Process).out\n\
         +WantJobRouter = LastRejMatchTime =!= UNDEFINED\nqueue 45\n",
    );
    // MaxIdleJobs = 10: no route ever holds more than 10 idle copies.
    let mut seen_sites = std::collections::BTreeSet::new();
    wait_or(
        "every job done through the routes",
        Duration::from_secs(240),
        || {
            let copies = routed_copies(&source);
            for site in ["Site 1", "Site 2", "Site 3"] {
                let idle = copies
                    .iter()
                    .filter(|a| text(a, "RouteName") == site && int(a, "JobStatus") == 1)
                    .count();
                assert!(idle <= 10, "{site} holds {idle} idle copies");
            }
            for a in &copies {
                seen_sites.insert(text(a, "RouteName"));
            }
            originals_done(&source) == 45
        },
        || {
            let q = source.ok(
                "root",
                &[
                    "q",
                    "-af",
                    "ClusterId",
                    "ProcId",
                    "JobStatus",
                    "LastRejMatchTime",
                    "RoutedToJobId",
                    "RouteName",
                    "GridJobId",
                ],
            );
            let t: Vec<String> = targets.iter().map(|t| t.ok("root", &["q", "-nobatch"])).collect();
            format!("{}\nsource queue:\n{q}\ntargets:\n{}", source.logs(), t.join("\n"))
        },
    );
    assert_eq!(seen_sites.len(), 3, "jobs spread over every route: {seen_sites:?}");
    // Each original completed with its copy's result; outputs came back.
    let h = source.history();
    let originals: Vec<&ClassAd> = h.iter().filter(|a| !a.contains("RoutedFromJobId")).collect();
    assert!(originals.iter().all(|a| int(a, "JobStatus") == 4 && int(a, "ExitCode") == 0));
    assert!(originals.iter().all(|a| text(a, "RouteName").starts_with("Site ")));
    let out = std::fs::read_to_string(source.path().join("jobs/out/p.7.out")).unwrap();
    assert!(out.contains("primes below 2000000: 148933"), "{out}");
    // Each target ran its share, as alice, routed by the source's schedd.
    let ran: Vec<usize> = targets.iter().map(|t| t.history().len()).collect();
    assert_eq!(ran.iter().sum::<usize>(), 45, "{ran:?}");
    assert!(
        targets[0]
            .history()
            .iter()
            .all(|a| text(a, "Owner") == "alice" && text(a, "RoutedFromSchedd") == "source")
    );
    // The router's own views.
    let q = wait_history(&source, "TOTAL", "45", "0");
    assert!(q.contains("Site 1") && q.contains("Site 3"), "{q}");
}

#[test]
fn a_black_hole_route_receives_fewer_and_fewer_jobs() {
    // Two routes: one to a pool with no hosts, where copies sit idle until
    // the route's PeriodicRemove takes them back (a failure: a black hole),
    // one to a pool that runs them.
    let (mut source, mut targets) = pools(2);
    let hole = targets[0].schedd_address();
    let good = targets[1].schedd_address();
    Pool::kill9(&mut targets[0].hosts[0]); // the hole runs nothing
    source.restart_schedd_with(&format!(
        r#"
JOB_ROUTER_DEFAULTS = [ requirements = target.WantJobRouter is true; MaxIdleJobs = 2; \
    set_PeriodicRemove = JobStatus == 1 && time() - QDate > 2; set_requirements = true; ]
JOB_ROUTER_ENTRIES = [ name = "hole"; GridResource = "andes {hole}"; ] \
    [ name = "good"; GridResource = "andes {good}"; ]
JOB_ROUTER_POLLING_PERIOD = 1
JOB_ROUTER_KEY_NAME = schedd
"#
    ));
    source.submit(
        "alice",
        "work",
        "executable = primes.wasm\narguments = 6000000\noutput = p.$(Process).out\n\
         +WantJobRouter = LastRejMatchTime =!= UNDEFINED\nqueue 50\n",
    );
    let completed_good = |copies: &[ClassAd]| {
        copies.iter().filter(|a| text(a, "RouteName") == "good" && int(a, "JobStatus") == 4).count()
    };
    let finished_copies = || -> Vec<ClassAd> {
        source.history().into_iter().filter(|a| a.contains("RoutedFromJobId")).collect()
    };
    wait_or(
        "every job and its good copy done",
        Duration::from_secs(240),
        || originals_done(&source) == 50 && completed_good(&finished_copies()) == 50,
        || source.logs(),
    );
    let copies: Vec<ClassAd> = finished_copies();
    let mut to_hole: Vec<i64> =
        copies.iter().filter(|a| text(a, "RouteName") == "hole").map(|a| int(a, "QDate")).collect();
    to_hole.sort_unstable();
    // The hole took its first two, then single probes ever further apart.
    let gaps: Vec<i64> = to_hole.windows(2).map(|w| w[1] - w[0]).collect();
    let span = to_hole.last().unwrap() - to_hole[0];
    println!(
        "copies sent to the hole at +{:?} s (gaps {gaps:?})",
        to_hole.iter().map(|t| t - to_hole[0]).collect::<Vec<_>>()
    );
    assert!(to_hole.len() >= 3, "the hole was probed again: {to_hole:?}");
    assert!(to_hole.len() <= 10, "the hole kept receiving jobs: {to_hole:?} over {span} s");
    // After the first batch, one probe at a time, each later than the last
    // while the failures stay within the rate's 60 s window (the pauses of
    // 4, 8 and 16 s; the doubling itself is unit-tested with exact times).
    // Once only one failure is left in the window the route reopens, so
    // later gaps depend on how long the good route took.
    let probes = &gaps[1..];
    assert!(probes[0] >= 4, "the first probe came too soon: {gaps:?}");
    assert!(
        probes[..probes.len().min(3)].windows(2).all(|w| w[1] > w[0]),
        "probe gaps did not grow: {gaps:?}\n{}",
        source.logs()
    );
}

fn single_route(source: &mut Pool, target: &Pool) {
    source.restart_schedd_with(&format!(
        "JOB_ROUTER_ENTRIES = [ name = \"site\"; GridResource = \"andes {}\"; \
         requirements = target.WantJobRouter is true; ]\n\
         JOB_ROUTER_POLLING_PERIOD = 1\nJOB_ROUTER_KEY_NAME = schedd\n",
        target.schedd_address()
    ));
}

#[test]
fn a_removed_copy_is_rerouted_and_a_removed_original_takes_its_copy_along() {
    let (mut source, targets) = pools(1);
    let target = &targets[0];
    single_route(&mut source, target);
    source.submit(
        "alice",
        "sleep",
        "executable = sleeper.wasm\n+WantJobRouter = LastRejMatchTime =!= UNDEFINED\nqueue\n",
    );
    let running_at_target = |p: &Pool| {
        p.queue().iter().any(|a| int(a, "JobStatus") == 2 && text(a, "Owner") == "alice")
    };
    wait_or(
        "the copy running at the target",
        Duration::from_secs(60),
        || running_at_target(target),
        || source.logs(),
    );
    // The original mirrors its running copy.
    wait_or(
        "the original running",
        Duration::from_secs(30),
        || {
            source
                .queue()
                .iter()
                .any(|a| !a.contains("RoutedFromJobId") && int(a, "JobStatus") == 2)
        },
        || source.logs(),
    );
    let q = source.queue();
    let copy = q.iter().find(|a| a.contains("RoutedFromJobId")).unwrap();
    let copy_id = format!("{}.{}", int(copy, "ClusterId"), int(copy, "ProcId"));
    let listing = source.ok("alice", &["router", "q"]);
    assert!(listing.contains(&copy_id) && listing.contains("site"), "{listing}");
    let summary = source.ok("alice", &["router", "q", "-S"]);
    assert!(summary.contains("      1  R site"), "{summary}");

    // Removing the copy: the original is idle again, and routed anew.
    source.ok("alice", &["rm", &copy_id]);
    wait_or(
        "the original rerouted to a new copy",
        Duration::from_secs(60),
        || {
            source
                .queue()
                .iter()
                .any(|a| a.contains("RoutedToJobId") && text(a, "LastRoutedToJobId") == copy_id)
        },
        || source.logs(),
    );
    wait_or(
        "the first remote job removed",
        Duration::from_secs(30),
        || target.history().iter().any(|a| int(a, "JobStatus") == 3),
        || source.logs(),
    );

    // Removing the original: its copy goes, here and at the target.
    wait_or(
        "the new copy running at the target",
        Duration::from_secs(60),
        || running_at_target(target),
        || source.logs(),
    );
    source.ok("alice", &["rm", "1.0"]);
    wait_or(
        "both gone here and the remote job removed",
        Duration::from_secs(60),
        || {
            source.queue().is_empty()
                && target.queue().is_empty()
                && target.history().iter().filter(|a| int(a, "JobStatus") == 3).count() == 2
        },
        || source.logs(),
    );
    // Two runs aborted, none completed.
    wait_history(&source, "site", "0", "2");
}

/// Brings up the one-node Slurm cluster (tests/support/slurm-up.sh). Where
/// Slurm is not installed it says loudly that the test did not run (false);
/// where it is installed and will not come up, that is a failure.
fn slurm_up() -> bool {
    let installed = std::process::Command::new("sh")
        .args(["-c", "command -v slurmctld && command -v sbatch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        common::not_run("the Slurm route test", "slurm-wlm (slurmctld, slurmd, sbatch)");
        return false;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/slurm-up.sh");
    let o = std::process::Command::new("bash").arg(&script).output().unwrap();
    assert!(
        o.status.success(),
        "Slurm is installed but the one-node cluster did not come up: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    true
}

#[test]
fn a_route_to_slurm_runs_jobs_with_andes_run_on_the_cluster() {
    if !slurm_up() {
        return;
    }
    let mut source = Pool::new("", 0);
    source.restart_schedd_with(
        "JOB_ROUTER_ENTRIES = [ name = \"cluster\"; GridResource = \"slurm debug\"; \
         requirements = target.WantJobRouter is true; ]\n\
         JOB_ROUTER_POLLING_PERIOD = 1\nJOB_ROUTER_KEY_NAME = schedd\n",
    );
    source.submit(
        "alice",
        "slurm",
        "executable = primes.wasm\narguments = 100000 \noutput = s.$(Process).out\n\
         +WantJobRouter = LastRejMatchTime =!= UNDEFINED\nqueue 3\n",
    );
    wait_or(
        "three jobs done on Slurm",
        Duration::from_secs(120),
        || originals_done(&source) == 3,
        || source.logs(),
    );
    let h = source.history();
    for a in h.iter().filter(|a| a.contains("RoutedFromJobId")) {
        assert!(text(a, "GridJobId").starts_with("slurm debug "), "{a}");
        assert_eq!(int(a, "ExitCode"), 0, "{a}");
    }
    for i in 0..3 {
        let out = std::fs::read_to_string(source.path().join(format!("jobs/s.{i}.out"))).unwrap();
        assert!(out.contains("primes below 100000: 9592"), "{out}");
    }
    wait_history(&source, "cluster", "3", "0");

    // A node that cannot see the job's directory says so: the job is held
    // with the reason, not run again and again.
    let gone = source.path().join("jobs/gone");
    std::fs::create_dir_all(&gone).unwrap();
    let exe = source.path().join("jobs/primes.wasm");
    source.submit(
        "alice",
        "gone",
        &format!(
            "executable = {}\ninitialdir = gone\narguments = 10\n\
             +WantJobRouter = true\nqueue\n",
            exe.display()
        ),
    );
    std::fs::remove_dir_all(&gone).unwrap();
    wait_or(
        "the job held saying the node needs a shared filesystem",
        Duration::from_secs(120),
        || {
            source.queue().iter().any(|a| {
                !a.contains("RoutedFromJobId")
                    && int(a, "JobStatus") == 5
                    && text(a, "HoldReason").contains("shared filesystem")
            })
        },
        || format!("{}\n{:?}", source.logs(), source.queue()),
    );
}

/// The manual's router configuration, exactly as printed (gt2 and HTCondor-C
/// routes), does not stop the schedd: each route andes cannot serve is
/// skipped with one warning naming it, and the schedd serves its users.
#[test]
fn the_manuals_configuration_verbatim_leaves_the_schedd_running() {
    let mut p = Pool::new("", 0);
    p.restart_schedd_with(include_str!("../../schedd/tests/data/router_manual.config"));
    p.ok("alice", &["q"]);
    let log = p.logs();
    assert!(log.contains("job router with 0 routes"), "{log}");
    for (site, kind) in [("Site 1", "gt2"), ("Site 2", "gt2"), ("Site 3", "condor")] {
        let lines: Vec<&str> =
            log.lines().filter(|l| l.contains(&format!("route `{site}`"))).collect();
        assert_eq!(lines.len(), 1, "{log}");
        assert!(lines[0].contains(&format!("grid type `{kind}`")), "{}", lines[0]);
    }
}

/// Runs three `digest` jobs (an input file in, an output file and stdout
/// out) in `p` as alice; `routed` sends them to the router at once.
fn digest_jobs(p: &Pool, routed: bool) {
    let jobs = p.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    for i in 0..3 {
        let lines: String = (0..200).map(|n| format!("line {n} of input {i}\n")).collect();
        std::fs::write(jobs.join(format!("lines.{i}.in")), lines).unwrap();
    }
    let want = if routed { "+WantJobRouter = true\n" } else { "" };
    p.submit(
        "alice",
        "digest",
        &format!(
            "executable = digest.wasm\narguments = lines.$(Process).in digest.$(Process).out 300\n\
             transfer_input_files = lines.$(Process).in\noutput = d.$(Process).stdout\n\
             error = d.$(Process).stderr\nlog = d.log\n{want}queue 3\n"
        ),
    );
}

/// Two pools in separate processes and directories, the target unable to
/// touch any submitter's files (its USER_ACCOUNT_MAP maps every owner to no
/// account, so it accepts only jobs that carry their files): routed jobs
/// carry their module and inputs to the target's spool, run there as their
/// owner, and their output comes back where the submit file says, byte for
/// byte what a local run writes.
#[test]
fn two_pools_without_a_shared_directory_route_jobs_with_the_outputs_of_a_local_run() {
    let (mut source, targets) = pools_with(1, "USER_ACCOUNT_MAP = * = andes-no-such-account\n");
    let target = &targets[0];
    single_route(&mut source, target);
    let local = Pool::new("", 1);
    digest_jobs(&local, false);
    digest_jobs(&source, true);
    let done = |p: &Pool| {
        p.history()
            .iter()
            .filter(|a| !a.contains("RoutedFromJobId") && int(a, "JobStatus") == 4)
            .count()
            == 3
    };
    wait_or("the local run", Duration::from_secs(120), || done(&local), || local.logs());
    wait_or(
        "the routed run",
        Duration::from_secs(120),
        || done(&source),
        || format!("{}\ntarget:\n{}", source.logs(), target.logs()),
    );
    for i in 0..3 {
        for f in [format!("digest.{i}.out"), format!("d.{i}.stdout")] {
            let here = std::fs::read(source.path().join("jobs").join(&f)).unwrap();
            let there = std::fs::read(local.path().join("jobs").join(&f)).unwrap();
            assert!(!here.is_empty(), "{f} is empty");
            assert_eq!(here, there, "{f} differs from the local run's");
        }
    }
    // At the target: spooled, run as alice, routed by the source's schedd.
    let ran = target.history();
    assert_eq!(ran.len(), 3, "{ran:?}");
    for a in &ran {
        assert_eq!(text(a, "Owner"), "alice", "{a}");
        assert_eq!(text(a, "RoutedFromSchedd"), "source", "{a}");
        assert!(a.contains("SpooledInput") && a.contains("RoutedFromGlobalJobId"), "{a}");
        assert!(!a.contains("RoutedFromJobId"), "the source's ids stay at the source: {a}");
    }
    // Each original ended as its copy did, with its use at the target.
    for a in source.history().iter().filter(|a| !a.contains("RoutedFromJobId")) {
        assert_eq!(int(a, "ExitCode"), 0, "{a}");
        assert!(a.contains("RemoteWallClockTime"), "{a}");
    }
    let log = std::fs::read_to_string(source.path().join("jobs/d.log")).unwrap();
    assert!(log.matches("Job terminated").count() >= 3, "{log}");
}

/// A routed original and its copy at another pool follow each other: the
/// original shows where and what the copy runs, an edit of it reaches the
/// job at the target, a hold there comes back with its reason (and a
/// release there releases it); as the manual says, holding or removing the
/// original takes the copy away, at the target too, and a released original
/// is routed anew.
#[test]
fn the_original_and_its_copy_in_another_pool_follow_each_other() {
    let (mut source, targets) = pools(1);
    let target = &targets[0];
    single_route(&mut source, target);
    source.submit("alice", "sleep", "executable = sleeper.wasm\n+WantJobRouter = true\nqueue\n");
    let both = || format!("{}\ntarget:\n{}", source.logs(), target.logs());
    let remote = |what: &str, f: &dyn Fn(&ClassAd) -> bool| {
        wait_or(what, Duration::from_secs(60), || target.queue().iter().any(f), both)
    };
    let original = |what: &str, f: &dyn Fn(&ClassAd) -> bool| {
        wait_or(
            what,
            Duration::from_secs(60),
            || source.queue().iter().any(|a| int(a, "ClusterId") == 1 && f(a)),
            both,
        )
    };
    remote("the copy running at the target", &|a| int(a, "JobStatus") == 2);
    original("the original running where its copy runs", &|a| {
        int(a, "JobStatus") == 2 && text(a, "RemoteHost").contains("host1")
    });
    source.ok("alice", &["qedit", "1.0", "Wanted", "42"]);
    remote("the edit at the target", &|a| int(a, "Wanted") == 42);
    // Held at the target by its administrator: the original is held, with
    // the reason; released there, it runs again.
    let rid = format!("{}.0", int(&target.queue()[0], "ClusterId"));
    target.ok("root", &["hold", &rid, "--reason", "disk full here"]);
    original("the original held with the target's reason", &|a| {
        int(a, "JobStatus") == 5 && text(a, "HoldReason").contains("disk full here")
    });
    target.ok("root", &["release", &rid]);
    original("the original running again", &|a| int(a, "JobStatus") == 2);
    // Held here: the copy goes, at the target too; released, routed anew.
    source.ok("alice", &["hold", "1.0"]);
    wait_or(
        "the job removed at the target",
        Duration::from_secs(60),
        || target.history().iter().any(|a| int(a, "JobStatus") == 3),
        both,
    );
    source.ok("alice", &["release", "1.0"]);
    remote("a new copy running at the target", &|a| {
        int(a, "JobStatus") == 2 && format!("{}.0", int(a, "ClusterId")) != rid
    });
    source.ok("alice", &["rm", "1.0"]);
    wait_or(
        "every job removed at the target",
        Duration::from_secs(60),
        || {
            target.queue().is_empty()
                && target.history().iter().filter(|a| int(a, "JobStatus") == 3).count() == 2
        },
        both,
    );
}

/// The target's trust decides for whom the router may submit: a job of an
/// owner the target does not know is refused there, and its copy and
/// original are held with the target's reason (not run as anyone else).
#[test]
fn a_job_whose_owner_the_target_does_not_trust_is_held_with_its_reason() {
    let (mut source, mut targets) = pools(1);
    let target = &mut targets[0];
    let trust = target.path().join("trust");
    let kept: String = std::fs::read_to_string(&trust)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("user carol"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&trust, kept).unwrap();
    target.restart_schedd_with("");
    single_route(&mut source, target);
    source.submit("carol", "c", "executable = hello.wasm\n+WantJobRouter = true\nqueue\n");
    wait_or(
        "carol's job held with the target's reason",
        Duration::from_secs(60),
        || {
            source.queue().iter().any(|a| {
                !a.contains("RoutedFromJobId")
                    && int(a, "JobStatus") == 5
                    && text(a, "HoldReason").contains("may not submit for carol")
            })
        },
        || format!("{}\n{:?}", source.logs(), source.queue()),
    );
    assert!(target.queue().is_empty() && target.history().is_empty());
}

/// A route whose TargetUniverse is not the grid universe makes a copy this
/// pool runs itself: the job runs once, here, and nothing goes to the
/// route's GridResource.
#[test]
fn a_copy_of_another_universe_runs_here_once_and_nowhere_else() {
    let (mut source, targets) = pools_from(1, 1, "");
    let target = &targets[0];
    source.restart_schedd_with(&format!(
        "JOB_ROUTER_ENTRIES = [ name = \"vanilla\"; GridResource = \"andes {}\"; \
         TargetUniverse = 5; set_Routed = true; requirements = target.WantJobRouter is true; ]\n\
         JOB_ROUTER_POLLING_PERIOD = 1\nJOB_ROUTER_KEY_NAME = schedd\n",
        target.schedd_address()
    ));
    source.submit(
        "alice",
        "v",
        // Only the copies (set_Routed) match here: an original the local
        // negotiator matched first would run here as itself, not be routed.
        "executable = primes.wasm\narguments = 100000\noutput = v.$(Process).out\n\
         +WantJobRouter = true\nrequirements = Routed =?= true\nqueue 2\n",
    );
    wait_or(
        "both jobs and both copies done",
        Duration::from_secs(90),
        || originals_done(&source) == 2 && copies_done(&source) == 2,
        || source.logs(),
    );
    let h = source.history();
    let copies: Vec<&ClassAd> = h.iter().filter(|a| a.contains("RoutedFromJobId")).collect();
    assert_eq!(copies.len(), 2, "{h:?}");
    for c in copies {
        assert_eq!(int(c, "JobUniverse"), 5, "{c}");
        assert_eq!(int(c, "NumJobStarts"), 1, "{c}");
        assert!(!c.contains("GridJobId"), "a vanilla copy was sent away: {c}");
    }
    assert!(target.queue().is_empty() && target.history().is_empty(), "it ran at the target too");
}

/// Routes written in the transform language current HTCondor documents
/// (JOB_ROUTER_ROUTE_NAMES, JOB_ROUTER_ROUTE_<name>, a pre-route transform)
/// route jobs between real pools; a route andes cannot serve is skipped.
#[test]
fn routes_in_the_transform_language_route_jobs_to_another_pool() {
    let (mut source, targets) = pools(1);
    let target = &targets[0];
    source.restart_schedd_with(&format!(
        r#"
JOB_ROUTER_SOURCE_JOB_CONSTRAINT = WantJobRouter
JOB_ROUTER_DEFAULT_MAX_IDLE_JOBS_PER_ROUTE = 10
JOB_ROUTER_ROUTE_NAMES = Arc Site
JOB_ROUTER_ROUTE_Arc @=rt
  GridResource = "arc site2.example.org"
@rt
JOB_ROUTER_ROUTE_Site @=rt
  GridResource = "andes {}"
  SET RoutedVia = "Site"
@rt
JOB_ROUTER_PRE_ROUTE_TRANSFORM_NAMES = Defaults
JOB_ROUTER_TRANSFORM_Defaults @=jrd
  SET PeriodicRemove = JobStatus == 5
  DELETE WantJobRouter
  SET Requirements = true
@jrd
JOB_ROUTER_POLLING_PERIOD = 1
JOB_ROUTER_KEY_NAME = schedd
"#,
        target.schedd_address()
    ));
    source.submit(
        "alice",
        "t",
        "executable = primes.wasm\narguments = 100000\noutput = t.$(Process).out\n\
         +WantJobRouter = true\nqueue 2\n",
    );
    wait_or(
        "both jobs done through the Site route",
        Duration::from_secs(90),
        || originals_done(&source) == 2,
        || source.logs(),
    );
    let ran = target.history();
    assert_eq!(ran.len(), 2, "{ran:?}");
    for a in &ran {
        assert_eq!(text(a, "RoutedVia"), "Site", "{a}");
        assert!(!a.contains("WantJobRouter"), "{a}");
    }
    let out = std::fs::read_to_string(source.path().join("jobs/t.1.out")).unwrap();
    assert!(out.contains("primes below 100000: 9592"), "{out}");
    assert!(source.logs().contains("JOB_ROUTER_ROUTE_Arc"), "the skipped route is named");
}

/// A route whose jobs really fail (they exit 3 there) is judged by its
/// JobFailureTest on each run, max_retries included: each copy runs again at
/// the target as a new run until its retries are spent, the original ends
/// with the real count of runs, and the failing route receives fewer and
/// fewer jobs while the good one takes the rest.
#[test]
fn a_route_whose_jobs_really_fail_is_throttled_and_each_retry_is_a_real_run() {
    let (mut source, targets) = pools(2);
    let (bad, good) = (targets[0].schedd_address(), targets[1].schedd_address());
    source.restart_schedd_with(&format!(
        r#"
JOB_ROUTER_DEFAULTS = [ requirements = target.WantJobRouter is true; MaxIdleJobs = 2; \
    JobFailureTest = TARGET.ExitCode =!= 0; FailureRateThreshold = 0.01; ]
JOB_ROUTER_ENTRIES = [ name = "bad"; GridResource = "andes {bad}"; set_Arguments = "3"; ] \
    [ name = "good"; GridResource = "andes {good}"; set_Arguments = "0"; ]
JOB_ROUTER_POLLING_PERIOD = 1
JOB_ROUTER_KEY_NAME = schedd
"#
    ));
    source.submit(
        "alice",
        "f",
        "executable = exit_code.wasm\narguments = 0\nmax_retries = 1\n\
         +WantJobRouter = true\nqueue 20\n",
    );
    wait_or(
        "every job done",
        Duration::from_secs(180),
        || originals_done(&source) == 20,
        || source.logs(),
    );
    let h = source.history();
    let originals: Vec<&ClassAd> = h.iter().filter(|a| !a.contains("RoutedFromJobId")).collect();
    let on = |route: &str| -> Vec<&&ClassAd> {
        originals.iter().filter(|a| text(a, "RouteName") == route).collect()
    };
    let (failed, passed) = (on("bad"), on("good"));
    assert_eq!(failed.len() + passed.len(), 20);
    for a in &failed {
        assert_eq!((int(a, "ExitCode"), int(a, "NumJobCompletions")), (3, 2), "{a}");
    }
    for a in &passed {
        assert_eq!((int(a, "ExitCode"), int(a, "NumJobCompletions")), (0, 1), "{a}");
    }
    // Each run on the failing route was a real run at its target.
    assert_eq!(targets[0].history().len(), 2 * failed.len());
    assert!(!failed.is_empty(), "the failing route was tried");
    assert!(failed.len() <= 5, "the failing route kept receiving jobs: {}", failed.len());
}

/// The original shows what its copy does at the target as it happens: the
/// copy suspended there (its owner came back) shows as suspended here and
/// running again when it resumes, with the CPU and memory it uses there.
#[test]
fn the_original_is_suspended_with_its_copy_and_shows_what_it_uses_there() {
    let (mut source, targets) = pools_with(
        1,
        "NUM_CPUS = 1\nWANT_SUSPEND = True\nSUSPEND = KeyboardIdle < 60\n\
         CONTINUE = KeyboardIdle >= 60\nPREEMPT = False\nSTARTER_UPDATE_INTERVAL = 1\n\
         STARTER_INITIAL_UPDATE_INTERVAL = 1\nSHADOW_QUEUE_UPDATE_INTERVAL = 1\n",
    );
    let target = &targets[0];
    single_route(&mut source, target);
    source.submit("alice", "spin", "executable = spin.wasm\n+WantJobRouter = true\nqueue\n");
    let original =
        || source.queue().into_iter().find(|a| int(a, "ClusterId") == 1).unwrap_or_default();
    let both = || format!("{}\ntarget:\n{}", source.logs(), target.logs());
    wait_or(
        "the original running, with the CPU and memory its copy uses",
        Duration::from_secs(60),
        || {
            let a = original();
            int(&a, "JobStatus") == 2
                && int(&a, "ResidentSetSize") > 0
                && matches!(a.eval_attr("RemoteUserCpu"), classad::Value::Real(c) if c > 0.0)
        },
        || format!("{}\noriginal: {}\nat the target: {:?}", both(), original(), target.queue()),
    );
    target.host_cmd(1, "root", &["host", "set-attr", "KeyboardIdle", "0"]);
    wait_or(
        "the original suspended",
        Duration::from_secs(60),
        || int(&original(), "JobStatus") == 7,
        both,
    );
    target.host_cmd(1, "root", &["host", "set-attr", "KeyboardIdle", "1000"]);
    wait_or(
        "the original running again",
        Duration::from_secs(60),
        || int(&original(), "JobStatus") == 2,
        both,
    );
    source.ok("alice", &["rm", "1"]);
}
