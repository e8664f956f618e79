//! Whole-pool tests: a central manager, a schedd and execute hosts as real
//! `andes` processes on 127.0.0.1, with the commands users run.
//!
//! Waiting here is polling for a state the pool must reach (a job completed, a
//! slot claimed), with a deadline; no test sleeps for a timer to fire.

use crate::common;

use std::time::Duration;

use classad::{ClassAd, Value};
use common::pool::{Pool, VACATING_POOL, int, text, wait_for, wait_or};

#[test]
fn jobs_run_to_completion_with_outputs_exit_codes_and_event_log() {
    let p = Pool::new("", 1);
    std::fs::create_dir_all(p.path().join("jobs")).unwrap();
    std::fs::write(p.path().join("jobs/in.txt"), "line one\n").unwrap();
    p.submit(
        "alice",
        "hello",
        "executable = hello.wasm\narguments = x $(Process)\ninput = in.txt\n\
         output = out/hello.$(Process).out\nerror = out/hello.$(Process).err\n\
         log = hello.log\nenvironment = \"GREETING=hey\"\nqueue 3\n",
    );
    p.submit(
        "alice",
        "codes",
        "executable = exit_code.wasm\narguments = 7\nlog = codes.log\nqueue\n",
    );
    wait_for("4 jobs in history", Duration::from_secs(60), || p.history().len() == 4);
    let jobs = p.path().join("jobs");
    for i in 0..3 {
        let out = std::fs::read_to_string(jobs.join(format!("out/hello.{i}.out"))).unwrap();
        assert!(out.contains(&format!("argv[2] = {i}")), "{out}");
        assert!(out.contains("GREETING = hey"), "{out}");
        assert!(out.contains("stdin: LINE ONE"), "{out}");
    }
    assert!(std::fs::read_to_string(jobs.join("hello.out")).unwrap().starts_with("hey, world"));
    let h = p.history();
    let code = h.iter().find(|a| text(a, "Cmd").ends_with("exit_code.wasm")).unwrap();
    assert_eq!(int(code, "ExitCode"), 7);
    assert_eq!(int(code, "JobStatus"), 4);
    assert!(text(code, "LastRemoteHost").starts_with("slot"), "{code}");
    // The startd keeps its own record of each job (STARTD_HISTORY), and the
    // job's event log has its events: each written once the end is
    // committed, so perhaps a moment after history shows it.
    let startd_history =
        || std::fs::read_to_string(p.path().join("startd_history")).unwrap_or_default();
    wait_or(
        "4 jobs in the startd's history",
        Duration::from_secs(30),
        || startd_history().matches("\n*** ClusterId = ").count() == 4,
        startd_history,
    );
    let startd = startd_history();
    assert!(startd.contains("ExitCode = 7"), "{startd}");
    let log = || std::fs::read_to_string(jobs.join("codes.log")).unwrap_or_default();
    wait_or(
        "the job's end in its event log",
        Duration::from_secs(30),
        || log().contains("005 ("),
        log,
    );
    let log = log();
    for event in ["000 (", "001 (", "005 (", "return value 7"] {
        assert!(log.contains(event), "{event} missing from\n{log}");
    }
}

fn job<'a>(ads: &'a [ClassAd], id: &str) -> Option<&'a ClassAd> {
    ads.iter().find(|a| format!("{}.{}", int(a, "ClusterId"), int(a, "ProcId")) == id)
}

fn running(p: &Pool) -> usize {
    p.queue().iter().filter(|a| int(a, "JobStatus") == 2).count()
}

#[test]
fn hold_release_rm_and_qedit_reach_running_jobs() {
    // qedit reaches the startd's copy of the job ad: PREEMPT and START read it.
    let p = Pool::new(
        "PREEMPT = (TARGET.KickMe =?= True)\nSTART = (TARGET.KickMe =!= True)\n\
         MAXJOBRETIREMENTTIME = 0\nNUM_CPUS = 2",
        1,
    );
    p.submit("alice", "sleep", "executable = sleeper.wasm\noutput = s.$(Process).out\nqueue 3\n");
    wait_for("two jobs running", Duration::from_secs(60), || running(&p) == 2);
    let q = p.queue();
    let held: Vec<String> = q
        .iter()
        .filter(|a| int(a, "JobStatus") == 2)
        .map(|a| format!("{}.{}", int(a, "ClusterId"), int(a, "ProcId")))
        .collect();
    // Hold one running job: it stops, and its slot takes the idle one.
    p.ok("alice", &["hold", &held[0]]);
    wait_for("the held job's slot to run the third job", Duration::from_secs(60), || {
        let q = p.queue();
        job(&q, &held[0]).is_some_and(|a| int(a, "JobStatus") == 5)
            && q.iter().filter(|a| int(a, "JobStatus") == 2).count() == 2
    });
    p.ok("alice", &["release", &held[0]]);
    wait_for("the released job to be idle", Duration::from_secs(30), || {
        job(&p.queue(), &held[0]).is_some_and(|a| int(a, "JobStatus") == 1)
    });
    // Remove the other running job: it leaves the queue.
    p.ok("alice", &["rm", &held[1]]);
    wait_for("the removed job in history", Duration::from_secs(30), || {
        job(&p.history(), &held[1]).is_some_and(|a| int(a, "JobStatus") == 3)
    });
    // qedit a running job: the startd's PREEMPT sees it and evicts the job,
    // which goes back to idle and, refused by START, stays there.
    wait_for("a job running again", Duration::from_secs(60), || running(&p) >= 1);
    let q = p.queue();
    let r = q.iter().find(|a| int(a, "JobStatus") == 2).unwrap();
    let id = format!("{}.{}", int(r, "ClusterId"), int(r, "ProcId"));
    p.ok("alice", &["qedit", &id, "KickMe", "True"]);
    wait_for("the edited job evicted to idle", Duration::from_secs(60), || {
        job(&p.queue(), &id)
            .is_some_and(|a| int(a, "JobStatus") == 1 && int(a, "LastVacateTime") > 0)
    });
    // The negotiator now finds no slot for it, and says so on the job.
    wait_for("the rejection recorded", Duration::from_secs(60), || {
        job(&p.queue(), &id).is_some_and(|a| {
            text(a, "LastRejMatchReason") == "no match found" && int(a, "LastRejMatchTime") > 0
        })
    });
}

#[test]
fn short_jobs_go_out_in_batches_and_run_metered() {
    // One slot and many trivial jobs: the claim's activations grow into
    // batches, and a job of a batch runs metered (its fuel is counted),
    // while the first job, activated alone, runs as any job does.
    let p = Pool::new("NUM_CPUS = 1", 1);
    // Each job exits with its own ProcId: a batch's queued jobs travel as
    // deltas from its first job's ad, and each must run with its own.
    p.submit("alice", "many", "executable = exit_code.wasm\narguments = $(Process)\nqueue 200\n");
    wait_for("200 jobs in history", Duration::from_secs(120), || p.history().len() == 200);
    let h = p.history();
    assert!(
        h.iter().all(|a| int(a, "JobStatus") == 4 && int(a, "ExitCode") == int(a, "ProcId")),
        "a job ran with another's arguments"
    );
    // ... and with the whole of its ad: the host's STARTD_HISTORY holds
    // every job once, with what only the first job's ad carried.
    let text = std::fs::read_to_string(p.path().join("startd_history")).unwrap_or_default();
    let mut ran: Vec<i64> = text
        .lines()
        .filter(|l| l.contains(r#"Owner = "alice""#))
        .filter_map(|l| l.strip_prefix("*** ClusterId = 1 ProcId = "))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    ran.sort();
    assert_eq!(ran, (0..200).collect::<Vec<i64>>(), "the host's history: {text}");
    let batched = h.iter().filter(|a| a.get("WasmFuelConsumed").is_some()).count();
    assert!(batched > 0, "no job ran in a batch");
    let first = h.iter().find(|a| int(a, "ProcId") == 0).unwrap();
    if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        // Unmetered: nobody counted its fuel.
        assert!(first.get("WasmFuelConsumed").is_none(), "{first}");
    }
    // Every job's shadow recorded its own start and end.
    assert!(h.iter().all(|a| int(a, "NumJobStarts") == 1), "a job started twice");
    // Once the jobs were known to be short, the next batch went to the host
    // while the last one ran (the slot did not wait for the schedd).
    let log = std::fs::read_to_string(p.path().join("log/StartLog")).unwrap_or_default();
    assert!(log.contains("more jobs queued behind the claim's running one"), "{log}");
}

#[test]
fn each_job_of_a_slot_gets_back_only_its_own_output_and_error() {
    // One slot runs 40 jobs one after another, most of them in batches,
    // short, their files used in place on the host's runtime: each job's
    // output and error must come back holding its own lines and nothing of
    // another job's.
    let p = Pool::new("NUM_CPUS = 1", 1);
    p.submit(
        "alice",
        "streams",
        "executable = hello.wasm\narguments = $(Process)\noutput = streams/$(Process).out\n\
         error = streams/$(Process).err\nqueue 40\n",
    );
    wait_for("40 jobs in history", Duration::from_secs(120), || p.history().len() == 40);
    assert!(p.history().iter().all(|a| int(a, "JobStatus") == 4 && int(a, "ExitCode") == 0));
    let dir = p.path().join("jobs/streams");
    for i in 0..40 {
        let out = std::fs::read_to_string(dir.join(format!("{i}.out"))).unwrap();
        assert_eq!(out.matches("argv[1] = ").count(), 1, "job {i}: {out:?}");
        assert!(out.contains(&format!("argv[1] = {i}\n")), "job {i}: {out:?}");
        assert_eq!(out.lines().count(), 4, "job {i}: {out:?}");
        assert!(out.ends_with("wrote hello.out\n"), "job {i}: {out:?}");
        let err = std::fs::read(dir.join(format!("{i}.err"))).unwrap();
        assert!(err.is_empty(), "job {i}: {}", String::from_utf8_lossy(&err));
    }
}

/// The ProcIds of cluster 1's jobs in the host's STARTD_HISTORY, one per run.
fn runs_on_host(p: &Pool) -> Vec<i64> {
    let text = std::fs::read_to_string(p.path().join("startd_history")).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix("*** ClusterId = 1 ProcId = "))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn a_job_held_while_queued_on_its_host_never_runs_there() {
    // One slot, jobs of one module: short ones first, so the claim's batches
    // grow, then a long one, with more of the batch queued on the host
    // behind it. Those are held while it runs: the host must drop them
    // unrun, and the long job must run on undisturbed. Only every other job
    // is held: the claim goes on with the rest, its queue still followed.
    let p = Pool::new("NUM_CPUS = 1", 1);
    let long = 24;
    let items: Vec<&str> = (0..48).map(|i| if i == long { "3000000000" } else { "1000" }).collect();
    p.submit(
        "alice",
        "primes",
        &format!("executable = primes.wasm\narguments = $(N)\nqueue N in ({})\n", items.join(", ")),
    );
    let long_id = format!("1.{long}");
    wait_for("the long job to run", Duration::from_secs(120), || {
        job(&p.queue(), &long_id).is_some_and(|a| int(a, "JobStatus") == 2)
    });
    p.ok("alice", &["hold", "--constraint", "JobStatus == 1 && ProcId % 2 == 1"]);
    let held: Vec<i64> =
        p.queue().iter().filter(|a| int(a, "JobStatus") == 5).map(|a| int(a, "ProcId")).collect();
    assert!(!held.is_empty(), "nothing left to hold");
    let others = 48 - held.len();
    wait_for("every job not held to complete", Duration::from_secs(120), || {
        p.history().len() == others
    });
    let ran = runs_on_host(&p);
    let ran_held: Vec<_> = held.iter().filter(|id| ran.contains(id)).collect();
    assert!(ran_held.is_empty(), "held jobs {ran_held:?} ran on the host: {ran:?}");
    // The jobs queued behind the long one ran on from the host's queue as it
    // ended: none was dropped there and sent again later, out of order.
    assert!(ran.is_sorted(), "jobs ran out of order: {ran:?}");
    let done = job(&p.history(), &long_id).unwrap().clone();
    assert_eq!(int(&done, "NumJobStarts"), 1, "the long job was disturbed: {done}");
    // Released, each held job runs once, and only once.
    p.ok("alice", &["release", "1"]);
    wait_for("all 48 jobs done", Duration::from_secs(120), || p.history().len() == 48);
    let mut ran = runs_on_host(&p);
    ran.sort();
    assert_eq!(ran, (0..48).collect::<Vec<i64>>(), "each job runs on the host once");
    assert!(p.history().iter().all(|a| int(a, "NumJobStarts") == 1 && int(a, "ExitCode") == 0));
}

#[test]
fn claims_are_reused_until_claim_worklife() {
    for (worklife, claims) in [("-1", 1), ("0", 4)] {
        let p = Pool::new(&format!("CLAIM_WORKLIFE = {worklife}\nNUM_CPUS = 1"), 1);
        p.submit("alice", "hello", "executable = hello.wasm\noutput = h.$(Process).out\nqueue 4\n");
        wait_for("4 jobs done", Duration::from_secs(60), || p.history().len() == 4);
        let matches: i64 = p.history().iter().map(|a| int(a, "NumJobMatches").max(0)).sum();
        assert_eq!(
            matches,
            claims,
            "CLAIM_WORKLIFE = {worklife}\n{}\n{:#?}",
            p.logs(),
            p.history().iter().map(|a| a.to_string()).collect::<Vec<_>>()
        );
    }
}

#[test]
fn an_unknown_host_is_refused_by_the_collector() {
    let mut p = Pool::new("", 1);
    // host2 signs with a key the trust file does not list.
    p.start_host(2, "HOST_KEY_NAME = stranger");
    wait_for("host1's slots", Duration::from_secs(30), || {
        p.slots().iter().any(|a| text(a, "Name").ends_with("@host1"))
    });
    let log = p.path().join("host2.log");
    wait_for("host2 to be refused", Duration::from_secs(30), || {
        std::fs::read_to_string(&log).unwrap_or_default().contains("not in the pool's trust file")
    });
    assert!(!p.slots().iter().any(|a| text(a, "Name").ends_with("@host2")));
    // Nor may a user publish a slot.
    let o = p.cmd("stranger", &["status"]);
    assert!(!o.status.success());
}

#[test]
fn a_killed_host_s_job_is_requeued_and_completes_elsewhere() {
    let mut p = Pool::new("NUM_CPUS = 1", 2);
    p.submit(
        "alice",
        "primes",
        "executable = primes.wasm\narguments = 1500000000\noutput = p.out\n\
         +JobLeaseDuration = 3\nqueue\n",
    );
    wait_for("the job running", Duration::from_secs(60), || running(&p) == 1);
    let host = text(&p.queue()[0], "RemoteHost");
    let victim = if host.ends_with("@host1") { 0 } else { 1 };
    Pool::kill9(&mut p.hosts[victim]);
    wait_for("the job to complete elsewhere", Duration::from_secs(120), || p.history().len() == 1);
    let h = &p.history()[0];
    assert_eq!(int(h, "JobStatus"), 4, "{h}");
    assert_ne!(text(h, "LastRemoteHost"), host);
    assert_eq!(int(h, "NumJobStarts"), 2, "{h}");
    assert!(std::fs::read_to_string(p.path().join("jobs/p.out")).unwrap().contains("primes below"));
}

#[test]
fn a_killed_schedd_reconnects_to_its_running_jobs() {
    let mut p = Pool::new("NUM_CPUS = 2", 1);
    p.submit(
        "alice",
        "primes",
        "executable = primes.wasm\narguments = 800000000\noutput = p.$(Process).out\nqueue 2\n",
    );
    wait_for("both running", Duration::from_secs(60), || running(&p) == 2);
    Pool::kill9(&mut p.schedd);
    p.start_schedd();
    wait_for("both complete", Duration::from_secs(120), || p.history().len() == 2);
    for h in p.history() {
        assert_eq!(int(&h, "JobStatus"), 4, "{h}");
        assert_eq!(int(&h, "NumJobStarts"), 1, "restarted: {h}");
        assert_eq!(int(&h, "NumJobReconnects"), 1, "{h}");
    }
}

#[test]
fn rank_preemption_moves_a_job_off_its_slot() {
    let p = Pool::new(
        "NUM_CPUS = 1\nRANK = (TARGET.Owner == \"bob\") * 10\nWANT_VACATE = True\n\
         MAXJOBRETIREMENTTIME = 0\nMACHINE_MAX_VACATE_TIME = 1",
        1,
    );
    p.submit("alice", "a", "executable = sleeper.wasm\nqueue\n");
    wait_for("alice's job running", Duration::from_secs(60), || running(&p) == 1);
    p.submit("bob", "b", "executable = sleeper.wasm\nqueue\n");
    wait_or(
        "bob's job running and alice's idle",
        Duration::from_secs(60),
        || {
            let q = p.queue();
            q.iter().any(|a| text(a, "Owner") == "bob" && int(a, "JobStatus") == 2)
                && q.iter().any(|a| text(a, "Owner") == "alice" && int(a, "JobStatus") == 1)
        },
        || p.logs(),
    );
    let log = std::fs::read_to_string(p.path().join("host1.log")).unwrap();
    assert!(log.contains("Claimed/Retiring"), "{log}");
    assert!(log.contains("Preempting/Vacating"), "{log}");
}

#[test]
fn fair_share_between_submitters_and_requirements_always_hold() {
    // Short claims and a short half-life, so the pie is cut again and again
    // and priorities follow usage within the test. The red host takes only
    // carol's jobs (its START), and her jobs ask for red (their
    // Requirements): alice and bob share the blue host's two slots.
    let mut p = Pool::new(
        "CLAIM_WORKLIFE = 1\nPRIORITY_HALFLIFE = 10\nNEGOTIATOR_INTERVAL = 1\nNUM_CPUS = 2\n\
         STARTD_ATTRS = Color",
        0,
    );
    p.start_host(1, "Color = \"red\"\nSTART = (TARGET.Owner == \"carol\")");
    p.start_host(2, "Color = \"blue\"");
    // Submitted held and released together, so the negotiator sees the three
    // submitters' demand at once (a submitter alone in the queue rightly
    // gets every slot it can use).
    let primes = "executable = primes.wasm\narguments = 3000000\nhold = true\n";
    p.submit("alice", "a", &format!("{primes}queue 600\n"));
    p.submit("bob", "b", &format!("{primes}queue 600\n"));
    p.submit(
        "carol",
        "c",
        &format!("{primes}requirements = (TARGET.Color == \"red\")\nqueue 300\n"),
    );
    p.ok("root", &["release", "-constraint", "true"]);
    wait_or("1,500 jobs done", Duration::from_secs(300), || p.history().len() == 1500, || p.logs());
    let history = p.history();
    // Requirements, both ways, against the ad of the slot each job ran on.
    let slots = p.slots();
    for h in &history {
        assert_eq!(int(h, "JobStatus"), 4, "{h}");
        let ran_on = text(h, "LastRemoteHost");
        let slot = slots
            .iter()
            .find(|s| text(s, "Name") == ran_on)
            .unwrap_or_else(|| panic!("no slot {ran_on}"));
        assert!(classad::matching::symmetric_match(h, slot), "{h}\nran on\n{slot}");
        if text(h, "Owner") == "carol" {
            assert!(ran_on.ends_with("@host1"), "carol's job ran on {ran_on}");
        }
    }
    // Fair share: alice and bob asked for the same, have the same priority
    // factor and compete for the same two slots, so neither finishes far
    // ahead of the other: when the first of them is done, the other has at
    // least 75 % done. Claims last a second and the pie is cut again as each
    // ends, so one submitter may hold both slots for a claim or two: the run
    // is long enough (600 jobs each) that this stays well inside the bound.
    let done_at = |who: &str| -> Vec<i64> {
        let mut t: Vec<i64> = history
            .iter()
            .filter(|a| text(a, "Owner") == who)
            .map(|a| int(a, "CompletionDate"))
            .collect();
        t.sort();
        t
    };
    let (a, b) = (done_at("alice"), done_at("bob"));
    let first_end = a.last().unwrap().min(b.last().unwrap());
    for (who, t) in [("alice", &a), ("bob", &b)] {
        let done = t.iter().filter(|&&c| c <= *first_end).count();
        eprintln!("fair share: {who} had {done} of {} done when the first finished", t.len());
        assert!(
            done * 4 >= t.len() * 3,
            "{who} had {done} of {} done when the other finished",
            t.len()
        );
    }
    let prio = p.ok("root", &["userprio"]);
    assert!(prio.contains("alice") && prio.contains("bob") && prio.contains("carol"), "{prio}");
}

#[test]
fn a_vacated_job_resumes_from_its_own_checkpoint() {
    let p = Pool::new(VACATING_POOL, 1);
    p.submit(
        "alice",
        "v",
        "executable = vacate.wasm\narguments = 4000000000\noutput = v.out\n\
         checkpoint_exit_code = 85\nlog = v.log\nqueue\n",
    );
    wait_for("the job to make progress", Duration::from_secs(60), || {
        p.queue().first().is_some_and(|a| {
            int(a, "JobStatus") == 2
                && matches!(a.eval_attr("RemoteUserCpu"), Value::Real(c) if c > 0.3)
        })
    });
    p.host_cmd(1, "root", &["vacate", "slot1@host1"]);
    wait_or("the job to finish", Duration::from_secs(120), || p.history().len() == 1, || p.logs());
    let h = &p.history()[0];
    assert_eq!(int(h, "ExitCode"), 0, "{h}");
    assert_eq!(int(h, "NumJobStarts"), 2, "{h}");
    assert!(int(h, "LastCkptTime") > 0, "{h}");
    let out = std::fs::read_to_string(p.path().join("jobs/v.out")).unwrap();
    assert!(out.contains("resuming at term"), "{out}");
    assert!(out.contains("sum of 1/k^2 for k = 1..=4000000000"), "{out}");
    let log = std::fs::read_to_string(p.path().join("jobs/v.log")).unwrap();
    assert!(log.contains("Job was evicted") && log.contains("Job was checkpointed"), "{log}");
}

/// The queue's ads, as text (for a failing test's message).
fn queue_text(p: &Pool) -> String {
    p.queue().iter().map(|a| a.to_string()).collect::<Vec<_>>().join("\n")
}

/// What the `digest` sample reads: `lines` lines of text.
fn digest_input(lines: usize) -> String {
    (0..lines).map(|i| format!("line {i} of the input, {}\n", "x".repeat(i % 37))).collect()
}

/// The module, input and arguments of a `digest` job compiled by `andes
/// compile`, and what it prints, writes and burns (fuel) when run through
/// once with `andes run`, uninterrupted.
struct Digest {
    module: String,
    args: String,
    stdout: String,
    digests: String,
    fuel: i64,
}

fn compiled_digest(p: &Pool, lines: usize, rounds: u32) -> Digest {
    compiled_digest_keeping(p, lines, rounds, 0)
}

/// [`compiled_digest`], the job keeping `keep_mib` MiB of memory filled as it goes.
fn compiled_digest_keeping(p: &Pool, lines: usize, rounds: u32, keep_mib: u32) -> Digest {
    let module = p.compile("digest");
    let jobs = p.path().join("jobs");
    std::fs::write(jobs.join("input.txt"), digest_input(lines)).unwrap();
    let args = format!("input.txt digests.txt {rounds} {keep_mib}");
    let dir = p.path().join("reference");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(jobs.join("input.txt"), dir.join("input.txt")).unwrap();
    // Metered, so that its fuel says how much work the whole run is.
    let o = common::andes()
        .args(["run", "--json", "--meter-fuel", "--dir"])
        .arg(&dir)
        .arg(jobs.join(&module))
        .args(args.split(' '))
        .output()
        .unwrap();
    let stdout = common::succeeded(o, "andes run");
    let (printed, json) = stdout.trim_end().rsplit_once('\n').unwrap();
    let json: serde_json::Value = serde_json::from_str(json).unwrap();
    Digest {
        module,
        args,
        stdout: format!("{printed}\n"),
        digests: std::fs::read_to_string(dir.join("digests.txt")).unwrap(),
        fuel: json["WasmFuelConsumed"].as_i64().unwrap(),
    }
}

/// Checks a `digest` job that was checkpointed and resumed once ended as an
/// uninterrupted run does, having run only part of the way the second time.
fn resumed_as_if_never_stopped(p: &Pool, d: &Digest, first_host: &str) {
    let h = &p.history()[0];
    assert_eq!(int(h, "JobStatus"), 4, "{h}");
    assert_eq!(int(h, "ExitCode"), 0, "{h}");
    assert_eq!(int(h, "NumJobStarts"), 2, "{h}");
    assert_eq!(int(h, "NumRestarts"), 1, "{h}");
    assert!(int(h, "NumCkpts") >= 1, "{h}");
    assert!(int(h, "CkptSize") >= 1, "{h}");
    assert_eq!(text(h, "WasmCheckpoint"), "transparent", "{h}");
    assert_eq!(text(h, "LastCheckpointPlatform"), andes_host::daemon::checkpoint_platform(), "{h}");
    assert_ne!(text(h, "LastRemoteHost"), first_host, "{h}");
    // Resumed, not restarted: a job run metered (with a MaxFuel) burnt
    // only what was left in its second run. (A compiled job without one runs
    // unmetered where the host can, as any job does.)
    if h.get("MaxFuel").is_some() {
        let fuel = int(h, "WasmFuelConsumed");
        assert!(fuel > 0 && fuel < d.fuel, "the last run used {fuel} of {} fuel", d.fuel);
    }
    let jobs = p.path().join("jobs");
    assert_eq!(std::fs::read_to_string(jobs.join("d.out")).unwrap(), d.stdout);
    assert_eq!(std::fs::read_to_string(jobs.join("digests.txt")).unwrap(), d.digests);
}

/// A module compiled by `andes compile` checkpoints by snapshot when its
/// host shuts down gracefully (a vacate), and the job resumes from that
/// snapshot on another host, ending exactly as a run never stopped does.
#[test]
fn a_compiled_job_vacated_from_its_host_resumes_elsewhere_from_its_snapshot() {
    let mut p = Pool::new(VACATING_POOL, 1);
    let d = compiled_digest(&p, 3000, 150_000);
    // With a MaxFuel the job runs metered, and its fuel shows it resumed.
    p.submit(
        "alice",
        "d",
        &format!(
            "executable = {}\narguments = {}\ntransfer_input_files = input.txt\n\
             output = d.out\nerror = d.err\nlog = d.log\n+MaxFuel = {}\nqueue\n",
            d.module,
            d.args,
            d.fuel * 10
        ),
    );
    wait_or(
        "the job to make progress",
        Duration::from_secs(60),
        || {
            p.queue().first().is_some_and(|a| {
                int(a, "JobStatus") == 2
                    && matches!(a.eval_attr("RemoteUserCpu"), Value::Real(c) if c > 0.5)
            })
        },
        || p.logs(),
    );
    p.start_host(2, "");
    // host1 leaves: its job is vacated, and snapshotted as it goes.
    p.host_cmd(1, "root", &["host", "off", "-graceful"]);
    wait_or(
        "the job to finish",
        Duration::from_secs(120),
        || p.history().len() == 1,
        || format!("{}\n{}", p.logs(), queue_text(&p)),
    );
    resumed_as_if_never_stopped(&p, &d, "slot1@host1");
    let log = std::fs::read_to_string(p.path().join("jobs/d.log")).unwrap();
    assert!(log.contains("Job was evicted") && log.contains("Job was checkpointed"), "{log}");
    // Nothing of it is left in the spool.
    let left: Vec<_> = std::fs::read_dir(p.path().join("spool/checkpoints"))
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// A compiled job with a big memory and a big input file: its snapshot (tens
/// of MiB, more than any message carries) and the file contents it names move
/// between host, schedd and the next host as streams, and the job resumes
/// from them exactly as in the small case.
#[test]
fn a_compiled_job_with_a_big_snapshot_resumes_elsewhere_from_streamed_parts() {
    let mut p = Pool::new(
        "NUM_CPUS = 1\nWANT_VACATE = True\nMACHINE_MAX_VACATE_TIME = 60\n\
         STARTER_INITIAL_UPDATE_INTERVAL = 1\nSTARTER_UPDATE_INTERVAL = 1\n\
         SHADOW_QUEUE_UPDATE_INTERVAL = 1",
        1,
    );
    // 2.4 MiB of input; 32 MiB of memory the job fills with hashes.
    let d = compiled_digest_keeping(&p, 60_000, 7_500, 32);
    assert!(std::fs::metadata(p.path().join("jobs/input.txt")).unwrap().len() > 2 << 20);
    p.submit(
        "alice",
        "d",
        &format!(
            "executable = {}\narguments = {}\ntransfer_input_files = input.txt\n\
             request_memory = 256MB\noutput = d.out\nerror = d.err\nlog = d.log\nqueue\n",
            d.module, d.args
        ),
    );
    wait_or(
        "the job to make progress",
        Duration::from_secs(90),
        || {
            p.queue().first().is_some_and(|a| {
                int(a, "JobStatus") == 2
                    && matches!(a.eval_attr("RemoteUserCpu"), Value::Real(c) if c > 1.0)
            })
        },
        || p.logs(),
    );
    p.start_host(2, "");
    p.host_cmd(1, "root", &["host", "off", "-graceful"]);
    wait_or(
        "the job to finish",
        Duration::from_secs(180),
        || p.history().len() == 1,
        || format!("{}\n{}", p.logs(), queue_text(&p)),
    );
    resumed_as_if_never_stopped(&p, &d, "slot1@host1");
    let h = &p.history()[0];
    assert!(int(h, "CkptSize") > 16 << 10, "a snapshot of {} KiB", int(h, "CkptSize"));
}

/// PERIODIC_CHECKPOINT snapshots a compiled job while it runs; when its host
/// dies, the job resumes on another host from the last snapshot that
/// reached the schedd.
#[test]
fn a_compiled_job_whose_host_dies_resumes_from_its_last_periodic_snapshot() {
    let mut p = Pool::new(
        "NUM_CPUS = 1\nPOLLING_INTERVAL = 1\n\
         PERIODIC_CHECKPOINT = (time() - LastPeriodicCheckpoint) >= 1\n\
         STARTER_INITIAL_UPDATE_INTERVAL = 1\nSTARTER_UPDATE_INTERVAL = 1\n\
         SHADOW_QUEUE_UPDATE_INTERVAL = 1",
        1,
    );
    let d = compiled_digest(&p, 3000, 150_000);
    p.submit(
        "alice",
        "d",
        &format!(
            "executable = {}\narguments = {}\ntransfer_input_files = input.txt\n\
             output = d.out\nerror = d.err\n+JobLeaseDuration = 3\nqueue\n",
            d.module, d.args
        ),
    );
    wait_or(
        "two snapshots kept",
        Duration::from_secs(60),
        || p.queue().first().is_some_and(|a| int(a, "JobStatus") == 2 && int(a, "NumCkpts") >= 2),
        || p.logs(),
    );
    p.start_host(2, "");
    Pool::kill9(&mut p.hosts[0]);
    wait_or("the job to finish", Duration::from_secs(120), || p.history().len() == 1, || p.logs());
    resumed_as_if_never_stopped(&p, &d, "slot1@host1");
}

/// Vacates the job on host 1 once it has run a while past its last start:
/// its RemoteUserCpu (the run's, from the host's updates) is past 0.3 s and
/// is not `last`, the last run's final figure, which the queue shows until
/// the new run's first update.
/// What the cooperative sample prints for `terms` run without a stop, in
/// a thread (`andes run`, meanwhile).
fn coop_uninterrupted(terms: &'static str) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let dir = tempfile::tempdir().unwrap();
        let out = common::andes()
            .args(["run", "--dir"])
            .arg(dir.path())
            .arg(common::pool::sample("coop"))
            .arg(terms)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    })
}

/// Waits until the pool's first job runs and has reported more than 0.3 s
/// of CPU.
fn running_a_while(p: &Pool) {
    wait_or(
        "the job to run a while",
        Duration::from_secs(90),
        || {
            p.queue().first().is_some_and(|a| {
                int(a, "JobStatus") == 2
                    && matches!(a.eval_attr("RemoteUserCpu"), Value::Real(c) if c > 0.3)
            })
        },
        || format!("{}\n{}", p.logs(), queue_text(p)),
    );
}

fn vacate_when_running(p: &Pool, starts: i64, last: &mut f64) {
    let mut seen = 0.0;
    wait_or(
        "the job to run again",
        Duration::from_secs(90),
        || {
            p.queue().first().is_some_and(|a| {
                let cpu = match a.eval_attr("RemoteUserCpu") {
                    Value::Real(c) => c,
                    _ => 0.0,
                };
                seen = cpu;
                int(a, "JobStatus") == 2
                    && int(a, "NumJobStarts") == starts
                    && cpu > 0.3
                    && cpu != *last
            })
        },
        || format!("{}\n{}", p.logs(), queue_text(p)),
    );
    p.host_cmd(1, "root", &["vacate", "slot1@host1"]);
    // What the run will have used by its end: at least this.
    wait_for("the vacate", Duration::from_secs(60), || {
        p.queue()
            .first()
            .is_some_and(|a| int(a, "JobStatus") != 2 || int(a, "NumJobStarts") > starts)
    });
    *last = match p.queue().first().map(|a| a.eval_attr("RemoteUserCpu")) {
        Some(Value::Real(c)) => c,
        _ => seen,
    };
}

#[test]
fn a_cooperative_job_vacated_three_times_resumes_from_what_it_saved() {
    let p = Pool::new(VACATING_POOL, 1);
    // About 10 s of work on this machine (unmetered, as the host runs it by
    // default); each vacate comes once a run has reported more than 0.3 s of
    // it (the first report is 1 s in), so each run takes 1 to 2.5 s of it
    // and the job is still running at the third.
    const TERMS: &str = "5400000000";
    // Each saved state carries 8 MiB more, checked by the job when it loads it:
    // states move between host, schedd and host as streams, whole.
    p.submit(
        "alice",
        "c",
        &format!(
            "executable = coop.wasm\narguments = {TERMS} 8\noutput = c.out\nerror = c.err\n\
             +WasmCheckpoint = \"cooperative\"\ncheckpoint_exit_code = 85\nqueue\n"
        ),
    );
    // What the same job prints when it runs without a stop, meanwhile.
    let whole = coop_uninterrupted(TERMS);
    let mut last = 0.0;
    for starts in 1..=3 {
        vacate_when_running(&p, starts, &mut last);
    }
    wait_or("the job to finish", Duration::from_secs(180), || p.history().len() == 1, || p.logs());
    let h = &p.history()[0];
    assert_eq!(int(h, "ExitCode"), 0, "{h}");
    assert_eq!(int(h, "NumJobStarts"), 4, "{h}");
    assert!(int(h, "NumCkpts") >= 3, "{h}");
    assert!(int(h, "CkptSize") >= 8 << 10, "{h}");
    // Its output is what an uninterrupted run prints: the same bits.
    let out = std::fs::read_to_string(p.path().join("jobs/c.out")).unwrap();
    assert!(out.starts_with(&format!("sum of 1/k^2 for k = 1..={TERMS}: ")), "{out}");
    assert_eq!(out, whole.join().unwrap());
    let err = std::fs::read_to_string(p.path().join("jobs/c.err")).unwrap();
    assert!(err.contains("resuming at term"), "{err}");
}

#[test]
fn a_checkpoint_exit_code_job_restarted_three_times_completes() {
    let p = Pool::new(VACATING_POOL, 1);
    p.submit(
        "alice",
        "v",
        "executable = vacate.wasm\narguments = 6000000000\noutput = v.out\n\
         checkpoint_exit_code = 85\nqueue\n",
    );
    // About 10 s of work: each run takes 1 to 2.5 s of it before its vacate.
    let mut last = 0.0;
    for starts in 1..=3 {
        vacate_when_running(&p, starts, &mut last);
    }
    wait_or("the job to finish", Duration::from_secs(180), || p.history().len() == 1, || p.logs());
    let h = &p.history()[0];
    assert_eq!(int(h, "ExitCode"), 0, "{h}");
    assert_eq!(int(h, "NumJobStarts"), 4, "{h}");
    let out = std::fs::read_to_string(p.path().join("jobs/v.out")).unwrap();
    assert!(out.contains("sum of 1/k^2 for k = 1..=6000000000"), "{out}");
}

#[test]
fn a_deferred_job_waits_on_its_host_and_starts_on_time() {
    let p = Pool::new("NUM_CPUS = 2", 1);
    // One job 10 s ahead, one an hour ahead (both matched at once: the
    // prep time and ScheddInterval allow it). The 10 s leave a loaded
    // machine time to see both waiting before the first one starts.
    p.submit(
        "alice",
        "soon",
        "executable = stamp.wasm\ndeferral_time = (QDate + 10)\noutput = soon.out\nlog = soon.log\nqueue\n",
    );
    p.submit(
        "alice",
        "later",
        "executable = stamp.wasm\ndeferral_time = (QDate + 3600)\ndeferral_prep_time = 3600\n\
         output = later.out\nqueue\n",
    );
    // While they wait they are Running (the manual) but say they are deferred.
    wait_or(
        "both jobs running and deferred",
        Duration::from_secs(30),
        || {
            let q = p.queue();
            q.len() == 2
                && q.iter().all(|a| int(a, "JobStatus") == 2 && int(a, "JobDeferredUntil") > 0)
        },
        || format!("{}\n{}", p.ok("alice", &["q", "-long"]), p.logs()),
    );
    let q = p.queue();
    let soon = job(&q, "1.0").unwrap().clone();
    let deferral_time = int(&soon, "QDate") + 10;
    assert_eq!(int(&soon, "JobDeferredUntil"), deferral_time);
    let listing = p.ok("alice", &["q", "-nobatch"]);
    assert_eq!(listing.matches("deferred until").count(), 2, "{listing}");
    let summary = p.ok("alice", &["q"]);
    assert_eq!(summary.matches("(1 deferred)").count(), 2, "{summary}");
    // The slots' ads show it within PUBLISH_DETAIL_GAP.
    wait_or(
        "both slots to publish JobDeferredUntil",
        Duration::from_secs(30),
        || p.slots().iter().filter(|s| int(s, "JobDeferredUntil") > 0).count() == 2,
        || p.logs(),
    );
    let status = p.ok("root", &["status"]);
    assert_eq!(status.matches("Deferred").count(), 2, "{status}");

    // The first starts on time by the host's clock: never early, within 1 s.
    wait_for("the soon job done", Duration::from_secs(30), || job(&p.history(), "1.0").is_some());
    let out = std::fs::read_to_string(p.path().join("jobs/soon.out")).unwrap();
    let started: i64 = out.trim().strip_prefix("started ").unwrap().parse().unwrap();
    let lateness = started - deferral_time * 1000;
    println!("the deferred job started {lateness} ms after its DeferralTime");
    assert!((0..=1000).contains(&lateness), "started {lateness} ms after DeferralTime");
    let h = job(&p.history(), "1.0").unwrap().clone();
    assert!(!h.contains("JobDeferredUntil"), "the wait is over: {h}");

    // Held while it waits: the hold takes it off the host, unrun.
    p.ok("alice", &["hold", "2.0"]);
    wait_for("the later job held and its slot free", Duration::from_secs(30), || {
        job(&p.queue(), "2.0").is_some_and(|a| int(a, "JobStatus") == 5)
            && p.slots().iter().all(|s| text(s, "State") == "Unclaimed")
    });
    assert!(
        std::fs::read_to_string(p.path().join("jobs/later.out")).unwrap_or_default().is_empty(),
        "a held deferred job never ran"
    );
    // Released, it waits again; removed, the wait is cancelled.
    p.ok("alice", &["release", "2.0"]);
    wait_for("the released job deferred again", Duration::from_secs(30), || {
        job(&p.queue(), "2.0").is_some_and(|a| int(a, "JobDeferredUntil") > 0)
    });
    p.ok("alice", &["rm", "2.0"]);
    wait_for("the removed job gone and its slot free", Duration::from_secs(30), || {
        job(&p.history(), "2.0").is_some_and(|a| int(a, "JobStatus") == 3)
            && p.slots().iter().all(|s| text(s, "State") == "Unclaimed")
    });
}

#[test]
fn a_cron_job_runs_every_minute_on_the_minute_keeping_its_id() {
    // The manual: intervals below SCHEDD_INTERVAL cannot be guaranteed. Here
    // SCHEDD_INTERVAL is 300 s and the job still runs at each minute.
    let p = Pool::new("SCHEDD_INTERVAL = 300\nCRON_TIME_ZONE = UTC", 1);
    p.submit(
        "alice",
        "cron",
        "executable = stamp.wasm\ncron_minute = *\non_exit_remove = false\n\
         output = cron.out\nlog = cron.log\nqueue\n",
    );
    let jobs = p.path().join("jobs");
    let mut starts: Vec<i64> = Vec::new();
    // Each run's output comes back when it ends (and the job requeues at
    // once, waiting on the host for the next minute): collect two runs.
    wait_or(
        "two cron runs",
        Duration::from_secs(150),
        || {
            let out = std::fs::read_to_string(jobs.join("cron.out")).unwrap_or_default();
            if let Some(ms) = out.trim().strip_prefix("started ").and_then(|m| m.parse().ok())
                && starts.last() != Some(&ms)
            {
                starts.push(ms);
            }
            starts.len() >= 2
        },
        || p.logs(),
    );
    for (run, ms) in starts.iter().enumerate() {
        // Each run starts on a minute, by the job's own clock, within 1 s.
        assert!(ms % 60_000 < 1000, "run {run} started {} ms past the minute", ms % 60_000);
    }
    assert_eq!(starts[1] / 60_000 - starts[0] / 60_000, 1, "consecutive minutes: {starts:?}");
    let a = job(&p.queue(), "1.0").unwrap().clone();
    assert_eq!(int(&a, "DeferralTime") % 60, 0);
    assert!(int(&a, "DeferralTime") * 1000 > starts[1], "the next run is ahead");
    let listing = p.ok("alice", &["q", "-nobatch"]);
    assert!(listing.contains("next run") || listing.contains("deferred until"), "{listing}");
}

/// condor_vacate_job: the owner vacates a running job by its id; it saves
/// its state, goes back to idle, runs again from what it saved and ends as
/// an uninterrupted run does. Another user cannot; an idle job is not
/// running and says so.
#[test]
fn vacate_job_sends_a_running_job_back_to_idle_with_its_checkpoint() {
    let p = Pool::new(VACATING_POOL, 1);
    const TERMS: &str = "2700000000";
    p.submit(
        "alice",
        "c",
        &format!(
            "executable = coop.wasm\narguments = {TERMS}\noutput = c.out\nerror = c.err\n\
             +WasmCheckpoint = \"cooperative\"\ncheckpoint_exit_code = 85\nqueue\n"
        ),
    );
    let whole = coop_uninterrupted(TERMS);
    running_a_while(&p);
    let o = p.cmd("bob", &["vacate-job", "1.0"]);
    assert!(!o.status.success(), "bob vacated alice's job");
    assert!(p.queue().first().is_some_and(|a| int(a, "NumJobStarts") == 1));
    assert_eq!(p.ok("alice", &["vacate-job", "1.0"]), "Job 1.0 vacated\n");
    wait_or("the job to finish", Duration::from_secs(180), || p.history().len() == 1, || p.logs());
    let h = &p.history()[0];
    assert_eq!(int(h, "ExitCode"), 0, "{h}");
    assert_eq!(int(h, "NumJobStarts"), 2, "{h}");
    assert!(int(h, "NumCkpts") >= 1, "{h}");
    let out = std::fs::read_to_string(p.path().join("jobs/c.out")).unwrap();
    assert_eq!(out, whole.join().unwrap());
    let err = std::fs::read_to_string(p.path().join("jobs/c.err")).unwrap();
    assert!(err.contains("resuming at term"), "{err}");
    // Not running: nothing to vacate, and it says why.
    p.submit("alice", "held", "executable = hello.wasm\nhold = true\nqueue\n");
    let o = p.cmd("alice", &["vacate-job", "2"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("Job 2.0 not vacated: not running"),
        "{o:?}"
    );
}

/// condor_checkpoint: the host's running job checkpoints now and runs on
/// (the checkpoint reaches the schedd, the job is not restarted); a slot
/// with no job that can checkpoint says so.
#[test]
fn checkpoint_asks_a_running_job_to_save_now_and_it_runs_on() {
    let p = Pool::new(
        "NUM_CPUS = 1\nSTARTER_INITIAL_UPDATE_INTERVAL = 1\nSTARTER_UPDATE_INTERVAL = 1\n\
         SHADOW_QUEUE_UPDATE_INTERVAL = 1",
        1,
    );
    let e = p.host_cmd_fails(1, "root", &["checkpoint", "slot1@host1"]);
    assert!(e.contains("no job that can checkpoint is running on slot 1"), "{e}");
    p.submit(
        "alice",
        "c",
        "executable = coop.wasm\narguments = 2700000000\noutput = c.out\nerror = c.err\n\
         +WasmCheckpoint = \"cooperative\"\nqueue\n",
    );
    running_a_while(&p);
    let said = p.host_cmd(1, "root", &["checkpoint", "slot1@host1"]);
    assert!(said.contains("checkpointing the job of slot 1"), "{said}");
    wait_or(
        "the checkpoint at the schedd",
        Duration::from_secs(60),
        || p.queue().first().is_some_and(|a| int(a, "NumCkpts") >= 1),
        || format!("{}\n{}", p.logs(), queue_text(&p)),
    );
    let a = p.queue().first().cloned().unwrap();
    assert_eq!((int(&a, "JobStatus"), int(&a, "NumJobStarts")), (2, 1), "{a}");
    p.ok("alice", &["rm", "1"]);
}

/// condor_tail: the owner reads a running job's output as the host has it;
/// `-f` follows until the job stops running. Another user cannot; a job
/// that is not running says so.
#[test]
fn tail_shows_a_running_jobs_output_from_its_host() {
    let p = Pool::new("NUM_CPUS = 1", 1);
    p.submit("alice", "s", "executable = sleeper.wasm\noutput = s.out\nqueue\n");
    wait_or(
        "the job to print",
        Duration::from_secs(60),
        || p.cmd("alice", &["tail", "1.0"]).stdout == b"sleeping\n",
        || format!("{}\n{}", p.logs(), queue_text(&p)),
    );
    assert_eq!(p.ok("alice", &["tail", "1.0", "-maxbytes", "3"]), "ng\n");
    assert_eq!(p.ok("alice", &["tail", "1.0", "-stderr"]), "");
    let o = p.cmd("bob", &["tail", "1.0"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("is alice's, not bob's"), "{o:?}");
    // Followed, it ends when the job does: held once the follower has
    // printed what the job wrote, so the hold comes while it follows.
    let mut follow = common::andes()
        .args(["tail", "-f", "1.0"])
        .env("ANDES_CONFIG_DIR", p.path())
        .env("ANDES_CONFIG", p.user_config())
        .env("USER", "alice")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(follow.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    assert_eq!(first, "sleeping\n");
    p.ok("alice", &["hold", "1.0"]);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let o = follow.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(rest, "", "nothing written twice");
    let o = p.cmd("alice", &["tail", "1.0"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("1.0 is not running (status H)"), "{o:?}");
}

/// condor_drain: a drained host takes no new job; its running job leaves
/// (back to idle, to run elsewhere) and every slot shows Drained; cancelled,
/// the host takes the job again.
#[test]
fn a_drained_host_takes_no_jobs_until_the_drain_is_cancelled() {
    let p = Pool::new("NUM_CPUS = 2\nMACHINE_MAX_VACATE_TIME = 5", 1);
    p.submit("alice", "s", "executable = sleeper.wasm\nqueue\n");
    wait_or(
        "the job to run",
        Duration::from_secs(60),
        || p.queue().first().is_some_and(|a| int(a, "JobStatus") == 2),
        || p.logs(),
    );
    let said = p.ok("root", &["drain", "host1"]);
    assert!(said.contains("draining (graceful)"), "{said}");
    let drained = || {
        let slots = p.slots();
        slots.len() == 2 && slots.iter().all(|s| text(s, "State") == "Drained")
    };
    wait_or("both slots Drained", Duration::from_secs(60), drained, || {
        format!("{}\n{}", p.logs(), queue_text(&p))
    });
    wait_or(
        "the job back to idle",
        Duration::from_secs(60),
        || p.queue().first().is_some_and(|a| int(a, "JobStatus") == 1),
        || p.logs(),
    );
    // A negotiation cycle after the drain finds it no slot.
    let since = int(&p.queue()[0], "EnteredCurrentStatus");
    wait_or(
        "a negotiation cycle that rejects it",
        Duration::from_secs(60),
        || {
            p.queue()
                .first()
                .is_some_and(|a| int(a, "JobStatus") == 1 && int(a, "LastRejMatchTime") >= since)
        },
        || {
            format!(
                "{}
{}",
                p.logs(),
                queue_text(&p)
            )
        },
    );
    assert!(drained());
    let e = p.cmd("alice", &["drain", "host1"]);
    assert!(!e.status.success(), "a user drained the host");
    p.ok("root", &["drain", "host1", "-cancel"]);
    wait_or(
        "the job to run again",
        Duration::from_secs(60),
        || {
            p.queue()
                .first()
                .is_some_and(|a| int(a, "JobStatus") == 2 && int(a, "NumJobStarts") == 2)
        },
        || format!("{}\n{}", p.logs(), queue_text(&p)),
    );
    p.ok("alice", &["rm", "1"]);
}
