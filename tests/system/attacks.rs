//! The multi-user attack suite (`cargo xtask attacks`; part of the test
//! suite): an ordinary user, bob, with a `user` key, against a pool of
//! separate processes that alice, another user, and root, its admin, share.
//! Each attack is one found from outside (or a member of its class), run the
//! way it was: the daemons must stay up, no byte may cross from one user to
//! another, and alice's job must complete.

use crate::common;

use std::time::Duration;

use common::callers::Callers;
use common::pool::{Pool, int, text, wait_or};
use http::StatusCode;

/// An expression whose value doubles at each of 40 links: 2^40 bytes from
/// about a kilobyte of text. As a constraint it killed the schedd; as a
/// periodic_release it did so after every restart; as requirements it killed
/// the central manager.
fn bomb() -> String {
    let mut s = String::from(r#"[a0 = "x""#);
    for i in 1..=40 {
        s.push_str(&format!(r#"; a{i} = join(a{}, {{"y","y","y"}})"#, i - 1));
    }
    s.push_str("].a40");
    s
}

/// Alice submits a job that returns its output, and it completes.
fn alice_completes(pool: &Pool, name: &str) {
    pool.submit(
        "alice",
        name,
        &format!("executable = hello.wasm\narguments = {name}\noutput = {name}.out\nqueue\n"),
    );
    let out = pool.path().join("jobs").join(format!("{name}.out"));
    wait_or("alice's job completed", Duration::from_secs(90), || out.exists(), || pool.logs());
}

fn alive(pool: &mut Pool) {
    for (what, p) in [("schedd", &mut pool.schedd), ("central manager", &mut pool.cm)] {
        let p = p.as_mut().unwrap();
        assert!(p.child.try_wait().unwrap().is_none(), "the {what} died:\n{}", pool_log(&p.log));
    }
}

fn pool_log(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

#[test]
fn an_expression_that_grows_without_end_stops_no_daemon() {
    let mut pool = Pool::new("", 1);
    let b = bomb();
    // As a query's constraint: refused or nothing, and the schedd answers on.
    let o = pool.cmd("bob", &["q", "-allusers", "-constraint", &format!("size({b}) > 0")]);
    assert!(String::from_utf8_lossy(&o.stderr).len() < 100_000);
    // As bob's periodic policy and his job's requirements.
    pool.submit(
        "bob",
        "bomb",
        &format!(
            "executable = hello.wasm\nrequirements = size({b}) > 0\n\
             periodic_release = size({b}) > 0\nperiodic_hold = size({b}) > 0\nqueue\n"
        ),
    );
    // The periodic pass holds it: the expression is error, HTCondor's
    // UNDEFINED_EVAL (code 5), and it is not evaluated at every pass again.
    wait_or(
        "bob's job held by its policy",
        Duration::from_secs(60),
        || pool.queue().iter().any(|a| int(a, "JobStatus") == 5 && int(a, "HoldReasonCode") == 5),
        || pool.logs(),
    );
    // The schedd restarted (as after any crash) serves at once, and the
    // admin can remove the job.
    pool.restart_schedd_with("");
    alive(&mut pool);
    alice_completes(&pool, "after-bomb");
    pool.ok("root", &["rm", "-constraint", "Owner == \"bob\""]);
    alive(&mut pool);
}

#[test]
fn what_one_user_stored_stays_theirs() {
    let pool = Pool::new("", 1);
    let callers = Callers::new(&pool);
    let schedd = pool.schedd_address();
    // Alice spools a secret input; its digest is not shown to bob, and bob
    // cannot name it, nor learn whether it is stored.
    let jobs = pool.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::write(jobs.join("secret.txt"), "the secret number is 7\n").unwrap();
    pool.submit(
        "alice",
        "secret",
        "executable = hello.wasm\nhold = true\ntransfer_input_files = secret.txt\nqueue\n",
    );
    let digest = andes_schedd::queue::module_digest(b"the secret number is 7\n");
    // (Spooled or not, the module's and inputs' digests stay with alice.)
    for ad in pool.ads("bob", &["q", "-l", "-allusers"]) {
        assert!(!ad.contains("SpooledInput") && !ad.contains("CmdDigest"), "{ad}");
    }
    let s = callers.call(&schedd, "bob", "GET", &format!("/v1/modules/{digest}"), b"");
    assert_eq!(s, Some(StatusCode::NOT_FOUND));
    let ad = format!(
        r#"[Cmd = "x.wasm"; CmdDigest = "{digest}"; SpooledInput = "s.txt={digest}"; Iwd = "/tmp"]"#
    );
    let body = serde_json::json!({"cluster": null, "cluster_ad": ad, "procs": ["[]"]});
    let s = callers.call(&schedd, "bob", "POST", "/v1/submit", body.to_string().as_bytes());
    // The answer a submit naming anything bob never uploaded gets.
    assert_eq!(s, Some(StatusCode::PRECONDITION_FAILED), "bob named alice's upload");
    assert!(pool.queue().iter().all(|a| text(a, "Owner") != "bob"));
}

#[test]
fn job_data_is_the_daemons_alone_on_disk() {
    use std::os::unix::fs::PermissionsExt;
    let pool = Pool::new("", 1);
    alice_completes(&pool, "modes");
    let spool = pool.path().join("spool");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for f in ["job_queue.db", "job_queue.db-wal"] {
        let p = spool.join(f);
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{f}");
        }
    }
    assert_eq!(mode(&spool.join("uploads")), 0o700);
    // The address file is for everyone, the spool enterable.
    assert_eq!(mode(&spool.join(".schedd_address")), 0o644);
    assert_eq!(mode(&spool), 0o755);
    // Everything else the daemons made is private.
    let mut open = Vec::new();
    for root in [spool.clone(), pool.path().join("log"), pool.path().join("execute1")] {
        for e in walk(&root) {
            let m = e.1 & 0o777;
            let name = e.0.display().to_string();
            let shared = name.ends_with(".schedd_address") || e.0 == spool || e.0 == root;
            if !shared && m & 0o077 != 0 {
                open.push(format!("{name} {m:o}"));
            }
        }
    }
    assert!(open.is_empty(), "job data others may read: {open:?}");
}

fn walk(root: &std::path::Path) -> Vec<(std::path::PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
        out.push((p.clone(), m.permissions().mode()));
        if m.is_dir()
            && let Ok(rd) = std::fs::read_dir(&p)
        {
            stack.extend(rd.flatten().map(|e| e.path()));
        }
    }
    out
}

#[test]
fn an_admins_transfer_data_writes_nowhere_a_users_ad_or_link_points() {
    let pool = Pool::new("", 1);
    let jobs = pool.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    // Bob's job writes its output where a link in his directory points.
    let victim = pool.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::os::unix::fs::symlink(&victim, jobs.join("out")).unwrap();
    let sub = "executable = hello.wasm\narguments = x\noutput = out/cron-job\nqueue\n";
    std::fs::copy(common::pool::sample("hello"), jobs.join("hello.wasm")).unwrap();
    std::fs::write(jobs.join("linked.sub"), sub).unwrap();
    let o = pool.cmd("bob", &["submit", "--spool", "linked.sub"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_or(
        "bob's spooled job completed",
        Duration::from_secs(90),
        || pool.queue().iter().any(|a| int(a, "JobStatus") == 4),
        || pool.logs(),
    );
    let id = pool
        .queue()
        .iter()
        .find(|a| int(a, "JobStatus") == 4)
        .map(|a| format!("{}.{}", int(a, "ClusterId"), int(a, "ProcId")))
        .unwrap();
    // The admin fetching it for bob: refused, nothing written through the link.
    let o = pool.cmd("root", &["transfer-data", &id]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--dir"));
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    // With --dir, beneath it, by the job's names.
    let into = pool.path().join("fetched");
    pool.ok("root", &["transfer-data", "--dir", into.to_str().unwrap(), &id]);
    assert!(into.join(&id).join(format!("{id}.out")).exists());
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
}

#[test]
fn a_flood_of_keyless_connections_keeps_no_user_out() {
    let pool = Pool::new("", 1);
    let addr = pool.schedd_address();
    let flood: Vec<_> =
        (0..3000).filter_map(|_| std::net::TcpStream::connect(&addr).ok()).collect();
    assert!(flood.len() > 1000, "{} connections", flood.len());
    for _ in 0..5 {
        let t = std::time::Instant::now();
        pool.ok("alice", &["q"]);
        eprintln!("andes q during the flood: {:?}", t.elapsed());
    }
    drop(flood);
}

#[test]
fn one_submit_or_one_owner_cannot_make_the_schedd_keep_without_end() {
    let pool = Pool::new("MAX_JOBS_PER_OWNER = 30\n", 1);
    pool.submit("bob", "some", "executable = hello.wasm\nhold = true\nqueue 20\n");
    let f = pool.path().join("jobs/many.sub");
    std::fs::write(&f, "executable = hello.wasm\nhold = true\nqueue 20\n").unwrap();
    let o = pool.cmd("bob", &["submit", f.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("MAX_JOBS_PER_OWNER"));
    let f = pool.path().join("jobs/huge.sub");
    std::fs::write(&f, "executable = hello.wasm\nhold = true\nqueue 20001\n").unwrap();
    let o = pool.cmd("alice", &["submit", f.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("MAX_JOBS_PER_SUBMISSION"));
    alice_completes(&pool, "within-limits");
}

/// `andes`, armed to abort (debug builds only) when it evaluates, at fault
/// point `site`, an ad with `CrashMe`: as an input that crashed the
/// evaluator there would.
fn armed(site: &str) -> std::process::Command {
    let mut cmd = common::andes();
    cmd.env("ANDES_FAULT_ABORT_ON", format!("CrashMe@{site}"));
    cmd
}

/// Waits for `p` (taken out of the pool) to die, with its log on timeout.
fn dies(what: &str, mut p: common::pool::Proc) {
    let log = p.log.clone();
    wait_or(
        &format!("the {what} to die evaluating bob's job"),
        Duration::from_secs(60),
        || p.child.try_wait().unwrap().is_some(),
        || pool_log(&log),
    );
}

/// Bob's job held as quarantined (code 5) with `what` and a reason that
/// says `why`, once; the daemons up; then alice's job completes.
fn quarantined_then_alice_completes(pool: &mut Pool, what: &str, why: &str, name: &str) {
    let quarantined = |pool: &Pool| {
        pool.queue().into_iter().find(|a| a.contains("Quarantined") && int(a, "JobStatus") == 5)
    };
    wait_or(
        "bob's job quarantined",
        Duration::from_secs(60),
        || quarantined(pool).is_some(),
        || pool.logs(),
    );
    let ad = quarantined(pool).unwrap();
    assert_eq!(int(&ad, "HoldReasonCode"), 5, "{ad}");
    assert!(text(&ad, "HoldReason").contains(why), "{ad}");
    assert!(text(&ad, "Quarantined").contains(what), "{ad}");
    alive(pool);
    alice_completes(pool, name);
    alive(pool);
}

#[test]
fn a_job_the_schedd_died_evaluating_is_quarantined_not_replayed() {
    let mut pool = Pool::new("", 1);
    pool.restart_schedd_from(armed("periodic policy"));
    pool.submit("bob", "crash", "executable = hello.wasm\nhold = true\n+CrashMe = true\nperiodic_remove = JobStatus == 99\nqueue\n");
    // The periodic pass reaches it: the schedd dies.
    dies("schedd", pool.schedd.take().unwrap());
    // Started again (fault still armed): it quarantines the job and serves on.
    pool.restart_schedd_from(armed("periodic policy"));
    quarantined_then_alice_completes(
        &mut pool,
        "periodic policy",
        "stopped while evaluating",
        "after-quarantine",
    );
}

#[test]
fn a_job_a_shadow_died_matching_to_its_slot_is_quarantined_not_replayed() {
    let mut pool = Pool::new("", 1);
    pool.restart_schedd_from(armed("match"));
    // Matched, the shadow checks the job against the slot: the schedd dies,
    // perhaps before its answer to the submit (committed first) goes out.
    let _ = pool.submit_output("bob", "crash", "executable = hello.wasm\n+CrashMe = true\nqueue\n");
    dies("schedd", pool.schedd.take().unwrap());
    pool.restart_schedd_from(armed("match"));
    quarantined_then_alice_completes(
        &mut pool,
        "Requirements, against a claimed slot",
        "stopped while evaluating",
        "after-match-quarantine",
    );
}

#[test]
fn a_job_the_router_died_routing_is_quarantined_not_replayed() {
    let mut pool = Pool::new("", 1);
    pool.common.push_str(
        "JOB_ROUTER_ENTRIES = [ name = \"site\"; GridResource = \"andes 127.0.0.1:9\"; \
         requirements = target.WantJobRouter is true; ]\n\
         JOB_ROUTER_POLLING_PERIOD = 1\nJOB_ROUTER_KEY_NAME = schedd\n",
    );
    pool.restart_schedd_from(armed("route"));
    // Never matched here (requirements false): only the router looks at it.
    pool.submit(
        "bob",
        "crash",
        "executable = hello.wasm\nrequirements = false\n+WantJobRouter = true\n\
         +CrashMe = true\nqueue\n",
    );
    dies("schedd", pool.schedd.take().unwrap());
    pool.restart_schedd_from(armed("route"));
    quarantined_then_alice_completes(
        &mut pool,
        "job router",
        "stopped while evaluating",
        "after-route-quarantine",
    );
}

#[test]
fn a_job_an_execute_host_died_evaluating_is_quarantined_not_replayed() {
    // In the startd's policy (the claim's START), and in the daemon's own
    // handling of the job (the claim request).
    for site in ["startd", "host"] {
        let mut pool = Pool::new("", 1);
        pool.restart_host_from(armed(site), 1);
        pool.submit("bob", "crash", "executable = hello.wasm\n+CrashMe = true\nqueue\n");
        dies("execute host", pool.hosts[0].take().unwrap());
        // Started again (fault still armed), it refuses the job it died on,
        // which the schedd holds; every other job runs there.
        pool.restart_host_from(armed(site), 1);
        quarantined_then_alice_completes(
            &mut pool,
            "execute host",
            "execute host stopped while evaluating",
            &format!("after-{site}-quarantine"),
        );
        let h = pool.hosts[0].as_mut().unwrap();
        assert!(
            h.child.try_wait().unwrap().is_none(),
            "the host died again ({site}):\n{}",
            pool_log(&h.log)
        );
    }
}

#[test]
fn a_request_the_central_manager_died_matching_is_quarantined_not_replayed() {
    // A debug build aborts when it evaluates a job marked so, as an input
    // that crashed the evaluator would.
    let mut pool = Pool::new("", 1);
    let armed = || armed("negotiator");
    pool.restart_cm_from(armed());
    pool.submit("bob", "crash", "executable = hello.wasm\n+CrashMe = true\nqueue\n");
    // The next negotiation reaches it: the central manager dies.
    let log = pool.cm.as_ref().unwrap().log.clone();
    wait_or(
        "the central manager to die matching the job",
        Duration::from_secs(60),
        || pool.cm.as_mut().unwrap().child.try_wait().unwrap().is_some(),
        || pool_log(&log),
    );
    // Started again (fault still armed): it quarantines the request, and the
    // schedd holds its jobs.
    pool.restart_cm_from(armed());
    let quarantined = |pool: &Pool| {
        pool.queue().into_iter().find(|a| a.contains("Quarantined") && int(a, "JobStatus") == 5)
    };
    wait_or(
        "the job quarantined",
        Duration::from_secs(60),
        || quarantined(&pool).is_some(),
        || pool.logs(),
    );
    let ad = quarantined(&pool).unwrap();
    assert_eq!(int(&ad, "HoldReasonCode"), 5);
    assert!(text(&ad, "HoldReason").contains("central manager stopped"), "{ad}");
    let id = format!("{}.{}", int(&ad, "ClusterId"), int(&ad, "ProcId"));
    let holds = int(&ad, "NumHolds");
    // Released unchanged: held again without being matched.
    pool.ok("bob", &["release", &id]);
    wait_or(
        "the job held again",
        Duration::from_secs(60),
        || quarantined(&pool).is_some_and(|a| int(&a, "NumHolds") > holds),
        || pool.logs(),
    );
    alive(&mut pool);
    alice_completes(&pool, "after-cm-quarantine");
    alive(&mut pool);
}

/// SPOOL on a small file system of its own (a tmpfs: needs root, as CI has).
#[test]
fn one_user_filling_the_spool_locks_nobody_out() {
    assert!(
        is_root(),
        "this attack mounts a 64 MiB tmpfs for the spool, which needs root (CI runs as root)"
    );
    let mut mounted = None;
    let mut pool = Pool::new_prepared("SPOOL_RESERVE = 8388608\n", 1, &[], |dir| {
        let spool = dir.join("spool");
        std::fs::create_dir_all(&spool).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
            .arg(&spool)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount tmpfs on {}", spool.display());
        mounted = Some(spool);
    });
    let _unmount = Unmount(mounted.clone().unwrap());
    let spool = mounted.unwrap();
    let callers = Callers::new(&pool);
    let schedd = pool.schedd_address();
    // Bob uploads 4 MiB blobs until the schedd refuses: it stops at the
    // reserve, not at a full disk.
    let mut refused = false;
    for i in 0..40u32 {
        let blob = vec![i as u8; 4 << 20];
        let digest = andes_schedd::queue::module_digest(&blob);
        let c = callers.client(&schedd, "bob");
        let r = callers.put_stream(&c, &format!("/v1/uploads/{digest}"), blob);
        if r != Some(StatusCode::NO_CONTENT) {
            refused = true;
            break;
        }
    }
    assert!(refused, "the spool took bob's uploads without end");
    assert!(spool.join(".reserve").exists(), "the reserve is kept");
    // Alice's held job is in the queue when something else fills the rest.
    pool.submit("alice", "held", "executable = hello.wasm\nhold = true\nqueue 3\n");
    let filler = spool.join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 64 << 20]);
    // Alice's and the admin's commits still go through: the reserve is
    // given back to make room for them.
    pool.ok("alice", &["release", "-constraint", "ProcId == 0"]);
    pool.ok("root", &["rm", "-constraint", "ProcId == 1"]);
    pool.ok("root", &["hold", "-constraint", "Owner == \"bob\""]);
    assert!(!spool.join(".reserve").exists(), "the reserve was given back to commit");
    alive(&mut pool);
    let _ = std::fs::remove_file(&filler);
    alice_completes(&pool, "after-full");
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
