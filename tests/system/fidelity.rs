//! What an HTCondor user expects of the schedd's job policy, on a pool of real
//! processes: submit files as condor_submit documents them.

use crate::common;

use std::time::Duration;

use common::pool::{Pool, int, text, wait_or};

/// The event types HTCondor's own reader (`htcondor2.JobEventLog`, the `htcondor`
/// wheel) finds in a job event log, or `None`, said aloud, when it is not
/// installed (`pip install htcondor`; CI installs it).
fn htcondor_reads(log: &std::path::Path) -> Option<Vec<String>> {
    let o = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import htcondor2, sys\n\
             for e in htcondor2.JobEventLog(sys.argv[1]).events(0): print(e.type.name)",
        )
        .arg(log)
        .output()
        .ok()?;
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("No module named 'htcondor2'") {
        common::not_run(
            &format!("HTCondor's reader of {}", log.display()),
            "the htcondor Python package (pip install htcondor)",
        );
        return None;
    }
    assert!(o.status.success(), "htcondor2 could not read {}: {err}", log.display());
    Some(String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect())
}

/// The history ad of job `c.0`, once it is there.
fn finished(p: &Pool, c: i64) -> classad::ClassAd {
    let mut found = None;
    wait_or(
        &format!("job {c}.0 in the history"),
        Duration::from_secs(120),
        || {
            found = p.history().into_iter().find(|a| int(a, "ClusterId") == c);
            found.is_some()
        },
        || p.logs(),
    );
    found.unwrap()
}

#[test]
fn max_retries_success_exit_code_and_retry_until_work_as_condor_submit_documents() {
    let p = Pool::new("", 1);
    // Exits 3 under max_retries = 2: three runs in all, then it leaves.
    p.submit(
        "alice",
        "r",
        "executable = exit_code.wasm\narguments = 3\nmax_retries = 2\nlog = r.log\nqueue\n",
    );
    // 3 means success here: one run.
    p.submit(
        "alice",
        "s",
        "executable = exit_code.wasm\narguments = 3\nmax_retries = 5\nsuccess_exit_code = 3\nqueue\n",
    );
    // retry_until an exit code: no retry once it is seen.
    p.submit(
        "alice",
        "u",
        "executable = exit_code.wasm\narguments = 3\nmax_retries = 5\nretry_until = 3\nqueue\n",
    );
    let retried = finished(&p, 1);
    assert_eq!(int(&retried, "NumJobStarts"), 3, "{retried}");
    assert_eq!(int(&retried, "NumJobCompletions"), 3, "{retried}");
    assert_eq!(int(&retried, "ExitCode"), 3, "{retried}");
    assert_eq!(int(&retried, "JobStatus"), 4, "{retried}");
    // Each requeue is logged as HTCondor's shadow logs it: an eviction,
    // "Job terminated and was requeued", never a termination followed by a
    // silent restart; the last run is the job's termination.
    let log = std::fs::read_to_string(p.path().join("jobs/r.log")).unwrap();
    assert_eq!(log.matches("Job terminated and was requeued").count(), 2, "{log}");
    assert_eq!(log.matches("\n005 (").count() + usize::from(log.starts_with("005 (")), 1, "{log}");
    if let Some(types) = htcondor_reads(&p.path().join("jobs/r.log")) {
        let want = [
            "SUBMIT",
            "EXECUTE",
            "JOB_EVICTED",
            "EXECUTE",
            "JOB_EVICTED",
            "EXECUTE",
            "JOB_TERMINATED",
        ];
        let got: Vec<&str> =
            types.iter().map(String::as_str).filter(|t| *t != "IMAGE_SIZE").collect();
        assert_eq!(got, want, "{log}");
    }
    for c in [2, 3] {
        let once = finished(&p, c);
        assert_eq!(int(&once, "NumJobStarts"), 1, "{once}");
        assert_eq!(int(&once, "NumJobCompletions"), 1, "{once}");
    }
}

#[test]
fn a_bad_value_queues_nothing_and_names_its_line_and_a_misspelt_command_is_a_warning() {
    let p = Pool::new("", 0);
    let jobs = p.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::copy(common::pool::sample("hello"), jobs.join("hello.wasm")).unwrap();
    for (line, want) in [
        ("deferral_time = abc", "bad.sub:2: deferral_time = abc: must be an integer"),
        ("cron_minute = 99", "bad.sub:2: cron_minute = 99: 99 is outside 0-59"),
        ("request_memory = lots", "bad.sub:2: request_memory = lots: must be a number"),
    ] {
        std::fs::write(jobs.join("bad.sub"), format!("executable = hello.wasm\n{line}\nqueue 2\n"))
            .unwrap();
        let o = p.cmd("alice", &["submit", "bad.sub"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{line}: {err}");
    }
    assert!(p.queue().is_empty(), "nothing is queued from a failing submit");
    std::fs::write(jobs.join("typo.sub"), "executable = hello.wasm\nrequirments = True\nqueue\n")
        .unwrap();
    let o = p.cmd("alice", &["submit", "typo.sub"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(
            "WARNING: typo.sub:2: the line 'requirments = True' was unused by andes submit. \
             Is it a typo?"
        ),
        "{err}"
    );
    assert_eq!(p.queue().len(), 1);
}

#[test]
fn a_vacate_ends_a_plain_job_at_once_as_htcondors_sigterm_does() {
    // The grace is long: waiting it out would take ten minutes.
    let p = Pool::new(
        "NUM_CPUS = 1\nWANT_VACATE = True\nMACHINE_MAX_VACATE_TIME = 600\nKILLING_TIMEOUT = 600\n",
        1,
    );
    p.submit("alice", "spin", "executable = spin.wasm\nlog = spin.log\nqueue\n");
    let jobs = p.path().join("jobs");
    wait_or(
        "the job to run",
        Duration::from_secs(60),
        || p.queue().first().is_some_and(|a| int(a, "JobStatus") == 2),
        || p.logs(),
    );
    p.host_cmd(1, "root", &["vacate", "slot1@host1"]);
    let log = jobs.join("spin.log");
    wait_or(
        "the eviction in the job's log",
        Duration::from_secs(60),
        || std::fs::read_to_string(&log).unwrap_or_default().contains("Job was evicted"),
        || format!("{}\n{}", std::fs::read_to_string(&log).unwrap_or_default(), p.logs()),
    );
    if let Some(types) = htcondor_reads(&log) {
        assert_eq!(types[..3], ["SUBMIT", "EXECUTE", "JOB_EVICTED"], "{types:?}");
    }
    p.ok("alice", &["rm", "1"]);
}

#[test]
fn a_suspended_job_is_status_7_with_its_log_events_and_suspension_time() {
    // The owner comes back (KeyboardIdle 0): the job is suspended; gone
    // again, it continues.
    let p = Pool::new(
        "NUM_CPUS = 1\nWANT_SUSPEND = True\nSUSPEND = KeyboardIdle < 60\n\
         CONTINUE = KeyboardIdle >= 60\nPREEMPT = False\nSTARTER_UPDATE_INTERVAL = 1\n\
         STARTER_INITIAL_UPDATE_INTERVAL = 1\n",
        1,
    );
    p.submit("alice", "spin", "executable = spin.wasm\nlog = spin.log\nqueue\n");
    let jobs = p.path().join("jobs");
    let status = || p.queue().first().map(|a| int(a, "JobStatus"));
    wait_or("the job to run", Duration::from_secs(60), || status() == Some(2), || p.logs());
    p.host_cmd(1, "root", &["host", "set-attr", "KeyboardIdle", "0"]);
    wait_or("status 7", Duration::from_secs(60), || status() == Some(7), || p.logs());
    p.host_cmd(1, "root", &["host", "set-attr", "KeyboardIdle", "1000"]);
    wait_or("running again", Duration::from_secs(60), || status() == Some(2), || p.logs());
    let ad = p.queue().remove(0);
    assert_eq!(int(&ad, "TotalSuspensions"), 1, "{ad}");
    assert!(int(&ad, "CumulativeSuspensionTime") >= 0, "an integer: {ad}");
    let log = std::fs::read_to_string(jobs.join("spin.log")).unwrap();
    assert!(log.contains("010 (") && log.contains("Job was suspended."), "{log}");
    assert!(log.contains("011 (") && log.contains("Job was unsuspended."), "{log}");
    if let Some(types) = htcondor_reads(&jobs.join("spin.log")) {
        assert_eq!(types[..4], ["SUBMIT", "EXECUTE", "JOB_SUSPENDED", "JOB_UNSUSPENDED"], "{log}");
    }
    p.ok("alice", &["rm", "1"]);
}

/// `andes q -better-analyze` says why a job does not run, as condor_q does:
/// each clause of its Requirements with the slots it matches, and the
/// summary of the pool's slots.
#[test]
fn better_analyze_says_which_clause_keeps_a_job_idle() {
    let p = Pool::new("", 1);
    p.submit("alice", "big", "executable = hello.wasm\nrequest_memory = 900000000\nqueue\n");
    wait_or(
        "the negotiator's verdict",
        Duration::from_secs(30),
        || p.queue().iter().any(|a| !common::pool::text(a, "LastRejMatchReason").is_empty()),
        || p.logs(),
    );
    let out = p.ok("alice", &["q", "-better-analyze", "1"]);
    assert!(out.contains("The Requirements expression for job 001.000 is"), "{out}");
    assert!(out.contains("RequestMemory = 900000000"), "{out}");
    assert!(out.contains("reduces to these conditions"), "{out}");
    // The memory clause matches none of the host's two slots.
    let memory = out
        .lines()
        .find(|l| l.starts_with('[') && l.contains("Memory") && l.contains("RequestMemory"))
        .unwrap_or_else(|| panic!("no memory clause in {out}"));
    assert_eq!(memory.split_whitespace().nth(1), Some("0"), "{memory}");
    assert!(out.contains("Of 2 machines,"), "{out}");
    assert!(out.contains("      2 are rejected by your job's requirements"), "{out}");
    assert!(out.contains("      0 are able to run your job"), "{out}");
    assert!(out.contains("The negotiator's last word on job 001.000"), "{out}");
    // -analyze is another name for it.
    assert!(p.ok("alice", &["q", "-analyze", "1"]).contains("reduces to these conditions"));
}

/// The slot ad has what HTCondor users query of it, and the job's memory is
/// kept current while it runs: StartdIpAddr, UidDomain, FileSystemDomain,
/// Disk as it is now, the running job's JobUniverse and ImageSize; in the
/// queue, ResidentSetSize and MemoryUsage.
#[test]
fn the_slot_ad_and_the_running_jobs_memory_are_what_htcondor_users_query() {
    let p = Pool::new(
        "NUM_CPUS = 1\nSTARTER_UPDATE_INTERVAL = 1\nSTARTER_INITIAL_UPDATE_INTERVAL = 1\n\
         SHADOW_QUEUE_UPDATE_INTERVAL = 1\nUID_DOMAIN = example.org\n",
        1,
    );
    p.submit("alice", "spin", "executable = spin.wasm\nlog = spin.log\nqueue\n");
    let job = || p.queue().into_iter().next();
    wait_or(
        "the job's memory in the queue",
        Duration::from_secs(90),
        || job().is_some_and(|a| int(&a, "JobStatus") == 2 && int(&a, "ResidentSetSize") > 0),
        || p.logs(),
    );
    // A Wasm job's memory is its linear memory: a Rust program's is at
    // least a MiB.
    let ad = job().unwrap();
    assert!(int(&ad, "ResidentSetSize") >= 1024, "{ad}");
    assert_eq!(int(&ad, "MemoryUsage"), (int(&ad, "ResidentSetSize") + 1023) / 1024, "{ad}");
    assert_eq!(int(&ad, "ImageSize"), int(&ad, "ResidentSetSize"), "{ad}");
    // The slot's ad shows its job within PUBLISH_DETAIL_GAP.
    let slot =
        || p.slots().into_iter().find(|s| text(s, "State") == "Claimed" && int(s, "ImageSize") > 0);
    wait_or(
        "the claimed slot's ad to show its job",
        Duration::from_secs(30),
        || slot().is_some(),
        || p.logs(),
    );
    let slot = slot().unwrap();
    assert!(text(&slot, "StartdIpAddr").starts_with("<127.0.0.1:"), "{slot}");
    assert_eq!(text(&slot, "UidDomain"), "example.org", "{slot}");
    assert!(!text(&slot, "FileSystemDomain").is_empty(), "{slot}");
    assert!(int(&slot, "Disk") > 0, "{slot}");
    assert_eq!(int(&slot, "JobUniverse"), int(&ad, "JobUniverse"), "{slot}");
    assert!(int(&slot, "ImageSize") > 0, "{slot}");
    p.ok("alice", &["rm", "1"]);
}

/// Periodic policy sees usage a few seconds old, not what the queue heard
/// SHADOW_QUEUE_UPDATE_INTERVAL (15 minutes) ago: a job held by
/// `periodic_hold = RemoteUserCpu > 2` is held within seconds of its third
/// CPU second, with the schedd's and the host's update intervals left at
/// HTCondor's defaults.
#[test]
fn periodic_policy_sees_usage_seconds_old() {
    let p = Pool::new("NUM_CPUS = 1\nPERIODIC_EXPR_INTERVAL = 1\n", 1);
    p.submit("alice", "spin", "executable = spin.wasm\nperiodic_hold = RemoteUserCpu > 2\nqueue\n");
    let held = || p.queue().first().is_some_and(|a| int(a, "JobStatus") == 5);
    wait_or("the periodic hold", Duration::from_secs(60), held, || p.logs());
    let ad = p.queue().remove(0);
    assert_eq!(int(&ad, "HoldReasonCode"), 3, "{ad}");
}

/// A transfer hold carries HTCondor's subcode, the errno: an output file
/// the job did not create is 12 / 2, an input file that is not there 13 / 2.
#[test]
fn transfer_holds_carry_the_errno_as_their_subcode() {
    let p = Pool::new("NUM_CPUS = 1\n", 1);
    p.submit("alice", "out", "executable = hello.wasm\ntransfer_output_files = never.txt\nqueue\n");
    // The input is there at submit, and gone when the job starts.
    let input = p.path().join("jobs/gone.txt");
    std::fs::write(&input, "soon gone\n").unwrap();
    p.submit(
        "alice",
        "in",
        "executable = hello.wasm\ntransfer_input_files = gone.txt\nhold = true\nqueue\n",
    );
    std::fs::remove_file(&input).unwrap();
    p.ok("alice", &["release", "2"]);
    let held = || {
        p.queue()
            .iter()
            .filter(|a| int(a, "JobStatus") == 5 && int(a, "HoldReasonCode") != 1)
            .count()
            == 2
    };
    wait_or("both held", Duration::from_secs(90), held, || p.logs());
    for ad in p.queue() {
        let want = if int(&ad, "ClusterId") == 1 { (12, 2) } else { (13, 2) };
        assert_eq!((int(&ad, "HoldReasonCode"), int(&ad, "HoldReasonSubCode")), want, "{ad}");
    }
}

/// condor_wait: `andes wait LOG [JOB]` follows the job event log until the
/// jobs end (exit 0), says "Time expired." with exit 1 when `-wait` runs
/// out, and exits 1 for a job the log does not have; `-status` tells each
/// job's start and end, `-num` waits for that many.
#[test]
fn wait_follows_the_log_until_the_jobs_end_as_condor_wait_does() {
    let p = Pool::new("", 1);
    p.submit("alice", "two", "executable = hello.wasm\nlog = two.log\nhold = true\nqueue 2\n");
    let log = p.path().join("jobs").join("two.log");
    let log = log.to_str().unwrap();
    // Held: nothing ends, so a wait of no time expires.
    let o = p.cmd("alice", &["wait", "-wait", "0", log]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "Time expired.\n");
    let o = p.cmd("alice", &["wait", "-wait", "0", log, "7.0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("job 7.0 was submitted"), "{o:?}");
    let o = p.cmd("alice", &["wait", "-wait", "0", &format!("{log}.missing")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("two.log.missing"), "{o:?}");
    // Released, the waits end with the jobs, the log followed as it grows.
    let waiter = {
        let mut c = common::andes();
        let cfg = p.user_config();
        c.args(["wait", "-status", log])
            .env("ANDES_CONFIG_DIR", p.path())
            .env("ANDES_CONFIG", cfg)
            .env("USER", "alice");
        std::thread::spawn(move || c.output().unwrap())
    };
    p.ok("alice", &["release", "1"]);
    let o = waiter.join().unwrap();
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    for line in ["1.0.0 submitted", "1.1.0 submitted", "1.0.0 completed", "1.1.0 completed"] {
        assert!(out.lines().any(|l| l == line), "{line}: {out}");
    }
    assert!(out.lines().any(|l| l.starts_with("1.0.0 executing on host")), "{out}");
    assert!(out.ends_with("All jobs done.\n"), "{out}");
    let o = p.cmd("alice", &["wait", "-num", "1", log, "1.1"]);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout) == "Specified job(s) done.\n");
    let o = p.cmd("alice", &["wait", "-wait", "0", log, "1"]);
    assert!(o.status.success(), "{o:?}");

    // `andes submit -wait`: until the cluster is done; held jobs are a
    // failure, with their reasons.
    let jobs = p.path().join("jobs");
    std::fs::write(jobs.join("ok.sub"), "executable = hello.wasm\nqueue 3\n").unwrap();
    let o = p.cmd("alice", &["submit", "ok.sub", "-wait"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert!(out.contains("Cluster 2: 3 done, 0 running, 0 idle, 0 held, 0 removed."), "{out}");
    std::fs::write(jobs.join("held.sub"), "executable = hello.wasm\nhold = true\nqueue\n").unwrap();
    let o = p.cmd("alice", &["submit", "held.sub", "--wait"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(out.contains("Job 3.0 is held: "), "{out}");
}

/// condor_watch_q: `andes watch` finds the caller's jobs' event logs with
/// one query and follows them: a row per cluster with its counts and a
/// progress bar; `-exit GROUP,STATE[,CODE]` ends it when the jobs get there.
#[test]
fn watch_tracks_jobs_through_their_logs_as_condor_watch_q_does() {
    let p = Pool::new("", 1);
    p.submit("alice", "two", "executable = hello.wasm\nlog = two.log\nhold = true\nqueue 2\n");
    p.submit("bob", "his", "executable = hello.wasm\nlog = his.log\nqueue\n");
    let table = p.ok("alice", &["watch", "-once"]);
    let row = table.lines().find(|l| l.starts_with("ID: 1")).unwrap_or_else(|| panic!("{table}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[2..8], ["-", "-", "-", "2", "2", "1.0-1"], "{table}");
    assert!(!table.contains("ID: 2"), "bob's cluster: {table}");
    let o = p.cmd("alice", &["watch", "-exit", "any,held,7"]);
    assert_eq!(o.status.code(), Some(7), "{o:?}");
    p.ok("alice", &["release", "1"]);
    let o = p.cmd("alice", &["watch", "-clusters", "1", "-exit", "all,done"]);
    assert!(o.status.success(), "{o:?}");
    let log = p.path().join("jobs/two.log");
    let table = p.ok("alice", &["watch", "-files", log.to_str().unwrap(), "-once"]);
    assert!(table.contains("[####################] 100%"), "{table}");
    assert!(table.contains("Total: 2 jobs; 2 completed"), "{table}");
    let e = p.cmd("alice", &["watch", "-exit", "most,done"]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("`most` is not all, any or none"), "{e:?}");
}
