//! Containment, tried as an attacker would on a pool of real processes: a
//! hostile job or user takes nothing that is not theirs and stops nothing.

use crate::common;

use std::time::Duration;

use common::pool::{Pool, int, sample, text, wait_or};

/// Every file under `dir`, with its contents (lossy).
fn contents(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
            if m.is_dir() {
                stack.push(p);
            } else if m.is_file() {
                let data = std::fs::read(&p).unwrap_or_default();
                out.push((p.display().to_string(), String::from_utf8_lossy(&data).into_owned()));
            }
        }
    }
    out
}

#[test]
fn a_job_gets_none_of_the_hosts_files_back_through_links() {
    let p = Pool::new("", 1);
    let jobs = p.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::copy(sample("linkout"), jobs.join("linkout.wasm")).unwrap();
    // The execute host's sandboxes are EXECUTE/dir_<slot>_<n>, with EXECUTE
    // under the host's LOCAL_DIR beside its keys and configuration.
    let secret = std::fs::read_to_string(p.path().join("keys/host1")).unwrap();
    let config = std::fs::read_to_string(p.path().join("host1.config")).unwrap();
    assert!(secret.len() > 20 && config.contains("HOST_KEY_NAME"));
    // Named outputs and the output stream replaced by links.
    p.submit(
        "alice",
        "named",
        "executable = linkout.wasm\n\
         arguments = _andes_stdout=../../keys/host1 r2=../../host1.config\n\
         output = out/named.out\nerror = out/named.err\n\
         transfer_output_files = r2, r5, linkdir\nlog = named.log\nqueue\n",
    );
    // No list: every new file would come back; the streams are links.
    p.submit(
        "alice",
        "auto",
        "executable = linkout.wasm\narguments = _andes_stdout=../../keys/host1 \
         _andes_stderr=../../trust\noutput = out/auto.out\nerror = out/auto.err\n\
         log = auto.log\nqueue\n",
    );
    // A good job beside them finishes normally.
    std::fs::write(jobs.join("in.txt"), "line one\n").unwrap();
    p.submit(
        "bob",
        "good",
        "executable = hello.wasm\ninput = in.txt\noutput = out/good.out\nlog = good.log\nqueue\n",
    );
    wait_or(
        "the two link jobs held and the good one done",
        Duration::from_secs(90),
        || {
            let q = p.queue();
            let held = q.iter().filter(|a| int(a, "JobStatus") == 5).count();
            held == 2 && p.history().len() == 1
        },
        || format!("{:#?}\n{}", p.queue(), p.logs()),
    );
    for ad in p.queue() {
        assert_eq!(int(&ad, "HoldReasonCode"), 12, "{ad}");
        let reason = text(&ad, "HoldReason");
        assert!(reason.contains("symbolic link"), "{reason}");
    }
    let good = std::fs::read_to_string(jobs.join("out/good.out")).unwrap();
    assert!(good.contains("stdin: LINE ONE"), "{good}");
    // Not a byte of the host's key, its configuration, the trust file or
    // /etc/passwd reached the submitter, under any name.
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let trust = std::fs::read_to_string(p.path().join("trust")).unwrap();
    for (path, data) in contents(&jobs) {
        assert!(!data.contains(secret.trim()), "{path} holds the host's key");
        assert!(!data.contains("HOST_KEY_NAME"), "{path} holds the host's configuration");
        assert!(!data.contains(trust.lines().next().unwrap()), "{path} holds the trust file");
        if let Some(line) = passwd.lines().next() {
            assert!(!data.contains(line), "{path} holds /etc/passwd");
        }
    }
}

/// `[a0 = 1; a1 = a0 + a0; ...].aN`: 2^N steps of work without a budget.
fn doubling(n: usize) -> String {
    let mut s = String::from("[a0 = 1");
    for i in 1..=n {
        s.push_str(&format!("; a{i} = a{} + a{}", i - 1, i - 1));
    }
    format!("{s}].a{n} > 0")
}

#[test]
fn a_costly_constraint_is_refused_and_stops_nobody_else() {
    let p = Pool::new("", 0);
    p.submit("alice", "three", "executable = hello.wasm\nqueue 3\n");
    // Without a budget this evaluates for years, holding the queue as it goes.
    let costly = doubling(40);
    let cfg = p.user_config();
    let path = p.path().to_path_buf();
    let query = std::thread::spawn(move || {
        common::andes()
            .args(["q", "-allusers", "-constraint", &costly])
            .env("ANDES_CONFIG_DIR", &path)
            .env("ANDES_CONFIG", &cfg)
            .env("USER", "carol")
            .output()
            .unwrap()
    });
    // Another user's submit and query go through meanwhile.
    p.submit("bob", "mine", "executable = hello.wasm\nqueue\n");
    assert_eq!(p.queue().len(), 4);
    assert!(p.queue().iter().any(|a| text(a, "Owner") == "bob"));
    let o = query.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(err.contains("evaluation steps"), "{err}");
    // The same through the history and through hold with a constraint.
    p.ok("bob", &["rm", "2"]);
    wait_or(
        "bob's job in history",
        Duration::from_secs(30),
        || p.history().len() == 1,
        || p.logs(),
    );
    let o = p.cmd("alice", &["history", "-constraint", &doubling(40)]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("evaluation steps"));
    let o = p.cmd("alice", &["hold", "-constraint", &doubling(40)]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("evaluation steps"), "{o:?}");
    assert!(p.queue().iter().all(|a| int(a, "JobStatus") == 1));
    assert_eq!(p.queue().len(), 3);
}

#[test]
fn a_constraint_cannot_read_another_users_claim() {
    let p = Pool::new("", 1);
    p.submit("alice", "long", "executable = primes.wasm\narguments = 3000000000\nqueue\n");
    wait_or(
        "alice's job running",
        Duration::from_secs(60),
        || p.queue().iter().any(|a| int(a, "JobStatus") == 2),
        || p.logs(),
    );
    // The claim id is in the schedd's queue; no constraint can see it, no
    // query shows it.
    let o =
        p.ok("bob", &["q", "-allusers", "-constraint", "ClaimId =!= undefined", "-af", "ProcId"]);
    assert!(o.trim().is_empty(), "{o}");
    let o = p.ok(
        "bob",
        &["q", "-allusers", "-constraint", "regexp(\"^1#\", ClaimId) || true", "-af", "ClaimId"],
    );
    assert!(!o.contains('#'), "{o}");
    // Nor does any daemon's log carry one whole: only its public form.
    let logs = p.logs();
    for word in logs.split(|c: char| c.is_whitespace() || c == ',' || c == ':') {
        if let Some((slot, secret)) = word.split_once('#') {
            let whole = !slot.is_empty()
                && slot.bytes().all(|b| b.is_ascii_digit())
                && secret.len() >= 32
                && secret.bytes().all(|b| b.is_ascii_hexdigit());
            assert!(!whole, "a claim id in the logs: {word}");
        }
    }
    p.ok("alice", &["rm", "-constraint", "true"]);
}

#[test]
fn a_schedd_that_cannot_act_as_a_user_takes_only_spooled_jobs() {
    // No identity map: alice is no account the schedd may act as (it is not
    // root, or alice has no account here), so it must never touch her paths.
    let p = Pool::new("USER_ACCOUNT_MAP =", 1);
    let jobs = p.path().join("jobs");
    std::fs::create_dir_all(jobs.join("data")).unwrap();
    std::fs::write(jobs.join("in.txt"), "line one\nline two\n").unwrap();
    std::fs::write(jobs.join("data/a.txt"), "aaa").unwrap();
    let sub = "executable = hello.wasm\narguments = x\ninput = in.txt\n\
               transfer_input_files = data\noutput = out/s.out\nerror = out/s.err\n\
               log = s.log\nqueue\n";
    std::fs::copy(sample("hello"), jobs.join("hello.wasm")).unwrap();
    std::fs::write(jobs.join("s.sub"), sub).unwrap();
    let o = p.cmd("alice", &["submit", "s.sub"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--spool"), "{err}");
    assert!(p.queue().is_empty());
    let out = p.ok("alice", &["submit", "--spool", "s.sub"]);
    assert!(out.contains("1 job(s) submitted"), "{out}");
    wait_or(
        "the spooled job completed and kept in the queue",
        Duration::from_secs(60),
        || p.queue().iter().any(|a| int(a, "JobStatus") == 4),
        || p.logs(),
    );
    // The schedd wrote nothing of hers: not the output, not the log.
    assert!(!jobs.join("out").exists() && !jobs.join("s.log").exists());
    // Nobody else may fetch it.
    let cluster = out.trim().rsplit(' ').next().unwrap().trim_end_matches('.').to_string();
    let id = format!("{cluster}.0");
    let o = p.cmd("bob", &["transfer-data", &id]);
    assert!(!o.status.success(), "{o:?}");
    let got = p.ok("alice", &["transfer-data"]);
    assert!(got.contains(&format!("Fetched the output of job {id}")), "{got}");
    let out = std::fs::read_to_string(jobs.join("out/s.out")).unwrap();
    assert!(out.contains("stdin: LINE ONE") && out.contains("stdin: LINE TWO"), "{out}");
    assert!(std::fs::read_to_string(jobs.join("hello.out")).unwrap().contains("args: 2"));
    let log = std::fs::read_to_string(jobs.join("s.log")).unwrap();
    for event in ["000 (", "001 (", "005 ("] {
        let e = format!("{event}{:03}.000.000)", cluster.parse::<u32>().unwrap());
        assert!(log.contains(&e), "{e} missing from\n{log}");
    }
    wait_or(
        "the fetched job left the queue",
        Duration::from_secs(30),
        || p.queue().is_empty(),
        || p.logs(),
    );
    assert_eq!(p.history().len(), 1);
}

/// `transfer_output_remaps` and `preserve_relative_paths` are user input: a
/// remap is written by the same writer as any output (the owner's rights,
/// never through a link in its place), and a preserved path never leaves the
/// sandbox, whether the job or its ad tries.
#[test]
fn a_remap_or_a_preserved_path_reaches_nothing_a_plain_output_could_not() {
    let p = Pool::new("NUM_CPUS = 2", 1);
    let jobs = crate::transfer::remap_workspace(&p);
    std::fs::copy(sample("linkout"), jobs.join("linkout.wasm")).unwrap();
    // A link where the remap points, to a file outside the job's directory.
    let victim = p.path().join("victim.txt");
    std::fs::write(&victim, "untouched").unwrap();
    std::os::unix::fs::symlink(&victim, jobs.join("planted.txt")).unwrap();
    // A file above the job's directory that a preserved input would reach.
    std::fs::write(p.path().join("secret.txt"), "a secret").unwrap();
    let secret = std::fs::read_to_string(p.path().join("keys/host1")).unwrap();
    for (name, text) in [
        (
            "planted",
            "executable = copyfile.wasm\narguments = in.txt out.txt\n\
             transfer_input_files = data/in.txt\ntransfer_output_files = out.txt\n\
             transfer_output_remaps = \"out.txt = planted.txt\"\nlog = planted.log\nqueue\n",
        ),
        // The job makes the preserved directory a link to the host's keys.
        (
            "linkdir",
            "executable = linkout.wasm\narguments = d=../../keys\n\
             preserve_relative_paths = true\ntransfer_output_files = d/host1\n\
             transfer_output_remaps = \"d = stolen\"\nlog = linkdir.log\nqueue\n",
        ),
        // Held at submit, then given PreserveRelativePaths by qedit, which
        // `andes submit` would have refused with this input.
        (
            "climb",
            "executable = copyfile.wasm\narguments = secret.txt out.txt\n\
             transfer_input_files = ../secret.txt\nhold = true\nlog = climb.log\nqueue\n",
        ),
    ] {
        p.submit("alice", name, text);
    }
    let held = |c: i64, code: i64| {
        p.queue().iter().any(|a| {
            int(a, "ClusterId") == c && int(a, "JobStatus") == 5 && int(a, "HoldReasonCode") == code
        })
    };
    wait_or(
        "the first two held",
        Duration::from_secs(90),
        || held(1, 12) && held(2, 12),
        || format!("{:#?}\n{}", p.queue(), p.logs()),
    );
    p.ok("alice", &["qedit", "3.0", "PreserveRelativePaths", "true"]);
    p.ok("alice", &["release", "3.0"]);
    wait_or(
        "the third held for its input",
        Duration::from_secs(90),
        || held(3, 13),
        || format!("{:#?}\n{}", p.queue(), p.logs()),
    );
    let reason = |c: i64| {
        let ad = p.queue().into_iter().find(|a| int(a, "ClusterId") == c).unwrap();
        (int(&ad, "HoldReasonCode"), text(&ad, "HoldReason"))
    };
    let (code, why) = reason(1);
    assert_eq!(code, 12, "{why}");
    assert!(why.contains("planted.txt") && why.contains("symbolic link"), "{why}");
    let (code, why) = reason(2);
    assert_eq!(code, 12, "{why}");
    assert!(why.contains("d/host1") && why.contains("symbolic link"), "{why}");
    let (code, why) = reason(3);
    assert_eq!(code, 13, "{why}");
    assert!(why.contains("../secret.txt") && why.contains("beneath"), "{why}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    assert!(!jobs.join("stolen").exists());
    for (path, data) in contents(&jobs) {
        assert!(!data.contains(secret.trim()), "{path} holds the host's key");
    }
}
