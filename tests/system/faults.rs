//! Faults on a pool of real processes: daemons killed with SIGKILL at random
//! (seeded) moments while work flows. At the end every acknowledged job has
//! completed exactly once, and no slot is left claimed.
//!
//! `ANDES_FAULT_SEED` picks the schedule (default 1); `ANDES_FAULT_KILLS` the
//! number of kills (default 4).
#![cfg(unix)]

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::pool::{Pool, int, text, wait_or};

use common::{Lcg, env_u64 as env};

/// (ClusterId, ProcId) → how many runs the startd's history says ended with
/// an exit code (ran to completion).
fn completions(p: &Pool) -> HashMap<(i64, i64), u32> {
    let text = std::fs::read_to_string(p.path().join("startd_history")).unwrap_or_default();
    let mut out = HashMap::new();
    let mut ad = String::new();
    for line in text.lines() {
        if !line.starts_with("*** ") {
            ad.push_str(line);
            ad.push('\n');
            continue;
        }
        if let Ok(a) = classad::parse_old_ad(&std::mem::take(&mut ad))
            && matches!(a.eval_attr("ExitCode"), classad::Value::Int(_))
        {
            *out.entry((int(&a, "ClusterId"), int(&a, "ProcId"))).or_default() += 1;
        }
    }
    out
}

/// Submits `exit_code` jobs (three a cluster) as alice every 50 ms while
/// the schedd is killed with SIGKILL `kills` times at `rng`'s moments and
/// started again each time; returns the clusters whose submit was
/// acknowledged.
/// Whether the collector shows `n` slots, every one in `state`.
fn every_slot_is(p: &Pool, n: usize, state: &str) -> bool {
    let s = p.slots();
    s.len() == n && s.iter().all(|a| text(a, "State") == state)
}

fn stream_in_killing_the_schedd(p: &mut Pool, kills: u64, rng: &mut Lcg) -> Vec<i64> {
    let jobs = p.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::copy(common::pool::sample("exit_code"), jobs.join("exit_code.wasm")).unwrap();
    std::fs::write(jobs.join("s.sub"), "executable = exit_code.wasm\narguments = 0\nqueue 3\n")
        .unwrap();
    let acknowledged: Arc<Mutex<Vec<i64>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let submitter = {
        let (ack, stop) = (acknowledged.clone(), stop.clone());
        let cfg = p.user_config();
        let dir = p.path().to_path_buf();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let o = common::andes()
                    .args(["submit", "s.sub"])
                    .current_dir(dir.join("jobs"))
                    .env("ANDES_CONFIG_DIR", &dir)
                    .env("ANDES_CONFIG", &cfg)
                    .env("USER", "alice")
                    .output()
                    .unwrap();
                if let Some(c) = common::submitted_cluster(&o, 3) {
                    ack.lock().unwrap().push(c);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    for _ in 0..kills {
        std::thread::sleep(Duration::from_millis(300 + rng.next(1700)));
        Pool::kill9(&mut p.schedd);
        std::thread::sleep(Duration::from_millis(rng.next(500)));
        p.start_schedd();
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let t = std::time::Instant::now();
    submitter.join().unwrap();
    eprintln!("faults: the submitter stopped in {:?}", t.elapsed());
    acknowledged.lock().unwrap().clone()
}

#[test]
fn a_schedd_killed_while_jobs_stream_in_loses_none_runs_none_twice_and_frees_every_slot() {
    let seed = env("ANDES_FAULT_SEED", 1);
    let kills = env("ANDES_FAULT_KILLS", 4);
    let mut rng = Lcg(seed);
    // Claims kept alive every second; a match taken by a schedd that then
    // dies holds its slot for MATCH_TIMEOUT (HTCondor: 120 s), here 10 s.
    let mut p =
        Pool::new("ALIVE_INTERVAL = 1\nMAX_CLAIM_ALIVES_MISSED = 3\nMATCH_TIMEOUT = 10\n", 1);
    let acknowledged = stream_in_killing_the_schedd(&mut p, kills, &mut rng);
    let t = std::time::Instant::now();
    assert!(!acknowledged.is_empty(), "no submit was acknowledged");
    // Every job, acknowledged or not, leaves the queue completed.
    wait_or(
        "the queue to drain",
        Duration::from_secs(env("ANDES_FAULT_DRAIN", 180)),
        || p.queue().is_empty(),
        || {
            let show = |ads: Vec<classad::ClassAd>| {
                ads.iter().map(|a| a.to_string()).collect::<Vec<_>>().join("\n")
            };
            format!("{}\n{}\n{}", show(p.queue()), show(p.slots()), p.logs())
        },
    );
    eprintln!("faults: the queue drained in {:?}", t.elapsed());
    let history = p.history();
    let done = completions(&p);
    for c in &acknowledged {
        for proc in 0..3 {
            let h = history
                .iter()
                .find(|a| int(a, "ClusterId") == *c && int(a, "ProcId") == proc)
                .unwrap_or_else(|| panic!("acknowledged job {c}.{proc} is lost"));
            assert_eq!(int(h, "JobStatus"), 4, "{h}");
        }
    }
    for ((c, proc), n) in &done {
        if *n != 1 {
            let runs = std::fs::read_to_string(p.path().join("startd_history")).unwrap_or_default();
            let marker = format!("*** ClusterId = {c} ProcId = {proc} ");
            let mut shown = String::new();
            let mut block = String::new();
            for line in runs.lines() {
                block.push_str(line);
                block.push('\n');
                if line.starts_with("*** ") {
                    if line.starts_with(&marker) {
                        shown.push_str(&block);
                    }
                    block.clear();
                }
            }
            let q = p.history();
            let h = q.iter().find(|a| int(a, "ClusterId") == *c && int(a, "ProcId") == *proc);
            panic!(
                "job {c}.{proc} ran to completion {n} times:\n{shown}\nhistory: {}\n{}",
                h.map(|a| a.to_string()).unwrap_or_default(),
                p.logs()
            );
        }
    }
    // No slot stays claimed once the work is done.
    wait_or(
        "every slot unclaimed",
        Duration::from_secs(60),
        || {
            let s = p.slots();
            !s.is_empty() && s.iter().all(|a| text(a, "State") != "Claimed")
        },
        || {
            let s: Vec<String> = p.slots().iter().map(|a| a.to_string()).collect();
            format!("{}\n{}", s.join("\n"), p.logs())
        },
    );
}

#[test]
fn a_central_manager_killed_and_restarted_has_the_whole_pool_again_within_seconds() {
    // Ads are due only every 300 s: without reconnecting, a restarted
    // central manager would know no slot and no schedd for five minutes.
    let mut p = Pool::new("UPDATE_INTERVAL = 300\nSCHEDD_INTERVAL = 300\n", 1);
    wait_or("both slots", Duration::from_secs(30), || p.slots().len() == 2, || p.logs());
    p.restart_cm();
    wait_or(
        "both slots known to the restarted central manager",
        Duration::from_secs(30),
        || p.slots().len() == 2,
        || p.logs(),
    );
    p.submit("alice", "after", "executable = hello.wasm\nqueue 2\n");
    wait_or("the jobs run", Duration::from_secs(60), || p.history().len() == 2, || p.logs());
}

#[test]
fn a_job_that_cannot_be_started_is_held_after_a_few_tries_not_rescheduled_forever() {
    // An input file whose name the host refuses (a `:`, which no sandbox name
    // may hold): each try is refused. After a few, the job is held with the
    // host's reason.
    let p = Pool::new("", 1);
    let jobs = p.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::write(jobs.join("c:d"), b"x").unwrap();
    p.submit("alice", "big", "executable = hello.wasm\ntransfer_input_files = c:d\nqueue\n");
    wait_or(
        "the job held",
        Duration::from_secs(120),
        || p.queue().iter().any(|a| int(a, "JobStatus") == 5),
        || p.logs(),
    );
    let ad = &p.queue()[0];
    assert_eq!(int(ad, "NumShadowExceptions"), 5, "{ad}");
    let reason = text(ad, "HoldReason");
    assert!(reason.contains("could not be started on 5 matches"), "{reason}");
}

/// Issue 41: after five kill -9s of the schedd while jobs streamed in, and
/// the queue drained, two jobs submitted to the two free slots ran one after
/// the other on one claim while the other slot stayed Unclaimed. The rule:
/// N idle jobs that fit N unclaimed slots all start within one negotiation
/// cycle, also after schedd crashes; a claim takes the next job of its
/// autocluster only when no other slot is waiting for it.
#[test]
fn after_five_schedd_crashes_two_jobs_start_together_on_the_two_free_slots() {
    let mut rng = Lcg(env("ANDES_FAULT_SEED", 1));
    let mut p =
        Pool::new("ALIVE_INTERVAL = 1\nMAX_CLAIM_ALIVES_MISSED = 3\nMATCH_TIMEOUT = 10\n", 1);
    let show = |p: &Pool| {
        let ads = |ads: Vec<classad::ClassAd>| {
            ads.iter().map(|a| a.to_string()).collect::<Vec<_>>().join("\n")
        };
        format!("{}\n{}\n{}", ads(p.queue()), ads(p.slots()), p.logs())
    };
    let acknowledged = stream_in_killing_the_schedd(&mut p, 5, &mut rng);
    assert!(!acknowledged.is_empty(), "no submit was acknowledged");
    wait_or("the queue to drain", Duration::from_secs(180), || p.queue().is_empty(), || show(&p));
    wait_or(
        "both slots unclaimed",
        Duration::from_secs(60),
        || every_slot_is(&p, 2, "Unclaimed"),
        || show(&p),
    );
    // Two jobs of one autocluster, each long enough that one after the
    // other on one claim is told apart from side by side.
    let o = p.submit_output("alice", "pair", "executable = sleeper.wasm\narguments = 5\nqueue 2\n");
    let cluster = common::submitted_cluster(&o, 2)
        .unwrap_or_else(|| panic!("submit: {}", String::from_utf8_lossy(&o.stderr)));
    let ours = |ads: Vec<classad::ClassAd>| -> Vec<classad::ClassAd> {
        ads.into_iter().filter(|a| int(a, "ClusterId") == cluster).collect()
    };
    let t = std::time::Instant::now();
    let running = loop {
        let q = ours(p.queue());
        if q.len() == 2 && q.iter().all(|a| int(a, "JobStatus") == 2) {
            break q;
        }
        // One of them ended before the other started: one after the other.
        let ended = ours(p.history());
        assert!(ended.is_empty(), "a job ended before the other started:\n{}", show(&p));
        assert!(t.elapsed() < Duration::from_secs(60), "the jobs did not start:\n{}", show(&p));
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("faults: both jobs running {:?} after the submit", t.elapsed());
    let hosts: Vec<String> = running.iter().map(|a| text(a, "RemoteHost")).collect();
    assert_ne!(hosts[0], hosts[1], "both on one slot:\n{}", show(&p));
    // Within one negotiation cycle (NEGOTIATOR_INTERVAL = 2) of each other,
    // give or take the second each start date is rounded to.
    let starts: Vec<i64> = running.iter().map(|a| int(a, "JobCurrentStartDate")).collect();
    assert!((starts[0] - starts[1]).abs() <= 3, "started at {starts:?}:\n{}", show(&p));
    // The collector sees both slots claimed while both jobs run.
    wait_or(
        "both slots claimed",
        Duration::from_secs(4),
        || every_slot_is(&p, 2, "Claimed"),
        || show(&p),
    );
    wait_or(
        "both jobs complete",
        Duration::from_secs(60),
        || ours(p.history()).iter().filter(|a| int(a, "JobStatus") == 4).count() == 2,
        || show(&p),
    );
}

/// A host killed after its job ended and before the schedd took the end in
/// (the fault harness's job 201.0 on 2026-12-06: its 1.8 MiB output still to
/// fetch) offers the end again when it is back: the job completes once, with
/// its output whole, and does not run a second time. The schedd is stopped
/// (SIGSTOP) from the job's start to the host's return, so nothing of the
/// end is taken in before the kill.
#[test]
fn a_host_killed_before_its_schedd_took_a_jobs_end_in_offers_it_again_and_the_job_runs_once() {
    let mut p = Pool::new("", 0);
    let history = p.path().join("startd_history");
    let extra = format!("STARTD_HISTORY = {}\n", history.display());
    p.start_host(1, &extra);
    let jobs = p.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    let input: Vec<u8> = (0..600u32 << 10).map(|i| (i % 251) as u8).collect();
    std::fs::write(jobs.join("in"), &input).unwrap();
    // Deferred a few seconds on the host: the schedd is stopped while the
    // job waits there, before it runs.
    p.submit(
        "alice",
        "big",
        "executable = copyfile.wasm\narguments = in out 3\ntransfer_input_files = in\n\
         transfer_output_files = out\nrequest_disk = 10MB\ndeferral_time = (QDate + 4)\ndeferral_window = 600\n\
         log = big.log\nqueue\n",
    );
    wait_or(
        "the job activated on the host",
        Duration::from_secs(60),
        || p.queue().iter().any(|a| int(a, "JobStatus") == 2),
        || p.logs(),
    );
    let schedd = p.schedd.as_ref().unwrap().child.id().to_string();
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill").args([sig, &schedd]).status().unwrap();
        assert!(ok.success(), "kill {sig} {schedd}");
    };
    signal("-STOP");
    let ended = || std::fs::read_to_string(&history).unwrap_or_default();
    wait_or(
        "the job's end on the host",
        Duration::from_secs(60),
        || ended().contains("\n*** ClusterId = "),
        || p.logs(),
    );
    // The host dies with the end owed, and comes back where it was.
    let addr = std::fs::read_to_string(p.path().join(".host1_address")).unwrap();
    Pool::kill9(&mut p.hosts[0]);
    p.start_host(1, &format!("{extra}HOST_ADDRESS = {}\n", addr.trim()));
    signal("-CONT");
    wait_or(
        "the job completed",
        Duration::from_secs(120),
        || p.history().iter().any(|a| int(a, "JobStatus") == 4),
        || {
            let q: Vec<String> = p.queue().iter().map(|a| a.to_string()).collect();
            format!("{}\n{}", q.join("\n"), p.logs())
        },
    );
    let ad = &p.history()[0];
    let out = std::fs::read(jobs.join("out")).unwrap_or_default();
    assert!(out == input.repeat(3), "the output is {} bytes, not the job's: {ad}", out.len());
    assert_eq!(int(ad, "NumJobStarts"), 1, "{ad}");
    assert_eq!(ended().matches("\n*** ClusterId = ").count(), 1, "it ran again:\n{}", ended());
    assert!(p.queue().is_empty(), "the job is still queued");
}
