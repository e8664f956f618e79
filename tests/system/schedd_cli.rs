//! The schedd as a real process, driven by the real commands over signed HTTP:
//! keygen, submit, q, hold, release, rm, qedit, history, and every refusal.

use std::path::PathBuf;

use crate::common;
use common::{Daemon, andes};

/// A running schedd on a free port, with keys for alice, bob, root (admin) and
/// mallory (unknown to the pool) and a trust file.
fn start() -> Daemon {
    Daemon::start(
        "schedd",
        &[
            ("schedd", "schedd"),
            ("alice", "user"),
            ("bob", "user"),
            ("root", "admin"),
            ("mallory", ""),
        ],
        "SCHEDD_ADDRESS = 127.0.0.1:0\nSCHEDD_NAME = schedd@test\n",
        "spool/.schedd_address",
    )
}

/// Writes a file into the daemon's directory, where the commands run.
fn write(pool: &Daemon, name: &str, content: &[u8]) -> PathBuf {
    let p = pool.path().join(name);
    std::fs::write(&p, content).unwrap();
    p
}

const MODULE: &[u8] = b"\0asm\x01\0\0\0";

#[test]
fn submit_query_and_change_jobs_over_signed_http() {
    let pool = start();
    write(&pool, "job.wasm", MODULE);
    write(
        &pool,
        "job.sub",
        b"executable = job.wasm\narguments = --n $(Process)\nlog = job.log\n\
          +Project = \"physics\"\nqueue 3\n",
    );
    assert_eq!(pool.ok("alice", &["submit", "job.sub"]), "3 job(s) submitted to cluster 1.\n");
    assert_eq!(
        pool.ok("bob", &["submit", "job.sub", "-a", "hold = true", "-batch-name", "sweep"]),
        "3 job(s) submitted to cluster 2.\n"
    );

    // condor_q's default: the caller's own jobs, with the whole queue's
    // totals; -allusers (or naming owners or jobs) shows others'.
    let mine = pool.ok("alice", &["q"]);
    assert!(mine.lines().any(|l| l.starts_with("alice")), "{mine}");
    assert!(!mine.lines().any(|l| l.starts_with("bob")), "{mine}");
    assert!(mine.contains("Total for query: 3 jobs"), "{mine}");
    assert!(mine.contains("Total for all users: 6 jobs"), "{mine}");
    assert_eq!(pool.ok("alice", &["q", "-af", "Owner"]), "alice\nalice\nalice\n");
    assert_eq!(pool.ok("alice", &["q", "bob", "-af", "Owner"]), "bob\nbob\nbob\n");
    assert_eq!(pool.ok("alice", &["q", "2.1", "-af", "Owner"]), "bob\n");
    let summary = pool.ok("alice", &["q", "-allusers"]);
    assert!(summary.contains("OWNER") && summary.contains("JOB_IDS"), "{summary}");
    assert!(
        summary
            .lines()
            .any(|l| l.starts_with("alice") && l.contains("ID: 1") && l.ends_with("1.0-2"))
    );
    assert!(summary.lines().any(|l| l.starts_with("bob") && l.contains("sweep")));
    assert!(summary.contains(
        "Total for all users: 6 jobs; 0 completed, 0 removed, 3 idle, 0 running, 3 held"
    ));

    // The Owner is the verified identity, whatever the submit file says.
    let af = pool
        .ok("alice", &["q", "-allusers", "-af", "ClusterId", "ProcId", "Owner", "Project", "Args"]);
    assert_eq!(af.lines().next(), Some("1 0 alice physics --n 0"));
    assert_eq!(af.lines().count(), 6);
    // condor_q's output forms: -af:OPTS, expressions, -format, -totals.
    assert_eq!(
        pool.ok("alice", &["q", "1", "-af:jh", "Owner", "ProcId * 10"]),
        "ID Owner ProcId * 10\n1.0 alice 0\n1.1 alice 10\n1.2 alice 20\n"
    );
    assert_eq!(
        pool.ok("alice", &["q", "1.1", "-af:lV,", "Owner", "Project"]),
        "Owner = \"alice\",Project = \"physics\"\n"
    );
    assert_eq!(pool.ok("alice", &["q", "1.1", "-autoformat:r", "ProcId + 1"]), "undefined\n");
    assert_eq!(
        pool.ok(
            "alice",
            &[
                "q",
                "1",
                "-format",
                "%d.",
                "ClusterId",
                "-format",
                "%03d ",
                "ProcId",
                "-format",
                "[%-8s]\\n",
                "Owner",
                "-format",
                "%d",
                "NoSuchAttr"
            ]
        ),
        "1.000 [alice   ]\n1.001 [alice   ]\n1.002 [alice   ]\n"
    );
    // -totals: the schedd's banner (as condor_q prints it) and the totals only.
    let totals = pool.ok("alice", &["q", "-allusers", "-totals"]);
    assert!(totals.starts_with("\n-- Schedd: "), "{totals}");
    assert!(
        totals.ends_with(
            "\nTotal for query: 6 jobs; 0 completed, 0 removed, 3 idle, 0 running, 3 held, 0 \
             suspended\nTotal for all users: 6 jobs; 0 completed, 0 removed, 3 idle, 0 running, \
             3 held, 0 suspended\n"
        ),
        "{totals}"
    );
    assert_eq!(totals.lines().count(), 4, "{totals}");
    let one = pool.ok("alice", &["q", "1", "-totals"]);
    assert!(one.starts_with("\n-- Schedd: schedd@test : <"), "{one}");
    assert!(
        one.ends_with(
            "\nTotal for query: 3 jobs; 0 completed, 0 removed, 3 idle, 0 running, 0 held, 0 \
             suspended\nTotal for all users: 6 jobs; 0 completed, 0 removed, 3 idle, 0 running, \
             3 held, 0 suspended\n"
        ),
        "{one}"
    );
    let json = pool.ok("alice", &["q", "1.2", "-json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["ProcId"], 2);
    assert!(pool.ok("alice", &["q", "-long", "1.0"]).contains("Owner = \"alice\""));
    let nobatch = pool.ok("alice", &["q", "-nobatch", "alice"]);
    assert!(nobatch.lines().any(|l| l.trim_start().starts_with("1.1") && l.contains(" I ")));

    // Hold with a reason, see it, release.
    assert_eq!(pool.ok("alice", &["hold", "1.0", "-reason", "wait for data"]), "Job 1.0 held\n");
    let held = pool.ok("alice", &["q", "-hold", "alice"]);
    assert!(held.contains("wait for data (code 1, subcode 0)"), "{held}");
    pool.ok("alice", &["release", "1.0"]);
    assert!(
        pool.ok(
            "alice",
            &["q", "-af", "JobStatus", "-constraint", "ProcId == 0 && ClusterId == 1"]
        )
        .starts_with('1')
    );

    // Another owner's jobs are refused, with the reason; an admin may act.
    let e = pool.fails("bob", &["hold", "1.0"]);
    assert!(e.contains("403") && e.contains("belongs to alice"), "{e}");
    let e = pool.fails("bob", &["rm", "alice"]);
    assert!(e.contains("403"), "{e}");
    let e = pool.fails("alice", &["qedit", "1.0", "Owner", "\"bob\""]);
    assert!(e.contains("403") && e.contains("protected"), "{e}");
    // Said once, without how the schedd was reached.
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert_eq!(e.matches("protected").count(), 1, "{e}");
    assert!(!e.contains("/v1/") && !e.contains("POST"), "{e}");
    assert!(pool.ok("root", &["release", "bob"]).contains("Job 2.2 released"));

    // qedit, by id and by constraint.
    assert!(
        pool.ok("alice", &["qedit", "1.1", "Project", "\"chemistry\""]).contains("for 1 matching")
    );
    assert!(
        pool.ok("alice", &["qedit", "-constraint", "ProcId == 2", "Weight", "3"])
            .contains("for 1 matching")
    );
    let af = pool.ok("alice", &["q", "1", "-af", "Project", "Weight"]);
    assert_eq!(af, "physics undefined\nchemistry undefined\nphysics 3\n");

    // Remove: jobs go to history, with the reason; the event log says so.
    assert_eq!(pool.ok("alice", &["rm", "1", "-reason", "wrong input"]).lines().count(), 3);
    let h =
        pool.ok("alice", &["history", "-af", "ClusterId", "ProcId", "JobStatus", "RemoveReason"]);
    assert!(h.lines().all(|l| l.starts_with("1 ") && l.ends_with(" 3 wrong input")), "{h}");
    assert_eq!(pool.ok("alice", &["history", "-limit", "1", "-af", "ProcId"]), "2\n");
    let log = std::fs::read_to_string(pool.path().join("job.log")).unwrap();
    assert_eq!(log.matches("Job submitted from host").count(), 6, "{log}");
    assert_eq!(log.matches("Job was held.").count(), 4, "{log}");
    assert_eq!(log.matches("Job was aborted").count(), 3, "{log}");

    // Bad input: a clear error naming what is wrong, and nothing changes.
    write(&pool, "bad.sub", b"executable = job.wasm\nhold = maybe\nqueue\n");
    let e = pool.fails("alice", &["submit", "bad.sub"]);
    assert!(e.contains("bad.sub:2") || e.contains("hold"), "{e}");
    write(&pool, "notwasm.sub", b"executable = job.sub\nqueue\n");
    assert!(!pool.fails("alice", &["submit", "notwasm.sub"]).is_empty());
    let e = pool.fails("alice", &["q", "-constraint", "ProcId =="]);
    assert!(e.contains("400"), "{e}");
    let o = pool.run("alice", &["q", "-nobatch", "-constraint", "ProcId =="]);
    assert!(o.stdout.is_empty(), "a refused query prints no banner: {o:?}");
    assert!(pool.ok("alice", &["q"]).contains("Total for all users: 3 jobs"));
}

/// condor_q prints its banner (`-- Schedd: NAME : <ADDRESS> @ DATE`) and the
/// totals lines (the query's, yours for the default query, and all users')
/// with every table, batches or one line per job, and neither with the ads
/// themselves (-af, -long, -json).
#[test]
fn every_condor_q_table_has_the_schedd_banner_and_the_totals() {
    let pool = start();
    write(&pool, "job.wasm", MODULE);
    write(&pool, "job.sub", b"executable = job.wasm\nqueue 2\n");
    pool.ok("alice", &["submit", "job.sub"]);
    pool.ok("bob", &["submit", "job.sub", "-a", "hold = true"]);
    let query = |n: u32, idle: u32, held: u32| {
        format!(
            "Total for query: {n} jobs; 0 completed, 0 removed, {idle} idle, 0 running, {held} \
             held, 0 suspended\n"
        )
    };
    let everyone = "Total for all users: 4 jobs; 0 completed, 0 removed, 2 idle, 0 running, 2 \
                    held, 0 suspended\n";
    // The default query (your own jobs) also totals yours, as condor_q does.
    let alice = "Total for alice: 2 jobs; 0 completed, 0 removed, 2 idle, 0 running, 0 held, 0 \
                 suspended\n";
    let mine = |query: String| format!("{query}{alice}");
    for (args, totals) in [
        (vec!["q"], mine(query(2, 2, 0))),
        (vec!["q", "-nobatch"], mine(query(2, 2, 0))),
        (vec!["q", "-nobatch", "-allusers"], query(4, 2, 2)),
        (vec!["q", "-dag"], mine(query(2, 2, 0))),
        (vec!["q", "-hold", "-allusers"], query(2, 0, 2)),
        (vec!["q", "-run"], mine(query(0, 0, 0))),
        (vec!["q", "1"], query(2, 2, 0)),
        (vec!["q", "-nobatch", "-totals"], mine(query(2, 2, 0))),
    ] {
        let out = pool.ok("alice", &args);
        assert!(out.starts_with("\n-- Schedd: schedd@test : <127.0.0.1:"), "{args:?}: {out}");
        let banner = out.lines().nth(1).unwrap();
        assert!(
            banner.contains("> @ ") && banner.rsplit(" @ ").next().unwrap().len() == 17,
            "{args:?}: {banner}"
        );
        assert!(out.ends_with(&format!("\n{totals}{everyone}")), "{args:?}: {out}");
        if args.contains(&"-totals") {
            assert_eq!(out.lines().count(), 5, "{args:?}: {out}");
        }
    }
    // An admin's default query is everyone's jobs: no line of their own.
    let root = pool.ok("root", &["q"]);
    assert!(root.ends_with(&format!("\n{}{everyone}", query(4, 2, 2))), "{root}");
    for args in [vec!["q", "-af", "ProcId"], vec!["q", "-long"], vec!["q", "-json"]] {
        let out = pool.ok("alice", &args);
        assert!(!out.contains("-- Schedd:") && !out.contains("Total for"), "{args:?}: {out}");
    }
}

#[test]
fn unknown_keys_are_refused() {
    let pool = start();
    let e = pool.fails("mallory", &["q"]);
    assert!(e.contains("the key is not in the pool's trust file"), "{e}");
    let e = pool.fails("nobody", &["q"]);
    assert!(e.contains("andes keygen nobody"), "{e}");
}

#[test]
fn dump_needs_no_schedd() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.wasm"), MODULE).unwrap();
    std::fs::write(dir.path().join("job.sub"), "executable = job.wasm\nqueue 2\n").unwrap();
    let out = andes()
        .args(["submit", "--dump", "job.sub"])
        .current_dir(dir.path())
        .env("ANDES_CONFIG_DIR", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("ProcId = ").count(), 2, "{text}");
    assert!(text.contains("CmdDigest = \"sha256:"));
}

/// condor_submit's command-line habits, checked without a schedd: `name=value`
/// arguments apply before the file, `-queue` replaces the file's last queue
/// statement (or ends a file without one), `-dry-run FILE` writes the ads.
#[test]
fn submit_takes_definitions_queue_and_dry_run_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.wasm"), MODULE).unwrap();
    std::fs::write(
        dir.path().join("job.sub"),
        "executable = job.wasm\narguments = $(word) $(Process)\nqueue 2\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("noq.sub"), "executable = job.wasm\n").unwrap();
    let submit = |args: &[&str]| {
        let out = andes()
            .arg("submit")
            .args(args)
            .current_dir(dir.path())
            .env("ANDES_CONFIG_DIR", dir.path())
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), {
            String::from_utf8_lossy(&out.stderr).into_owned()
        })
    };
    let (ok, out, err) = submit(&["-dry-run", "-", "job.sub", "word=hello"]);
    assert!(ok, "{err}");
    assert_eq!(out.matches("ProcId = ").count(), 2, "{out}");
    assert!(out.contains("Args = \"hello 1\""), "{out}");
    assert!(out.ends_with("Dry-Run 2 job(s) would be submitted to cluster 1.\n"), "{out}");
    // -queue replaces the file's queue statement; a file without one gets it.
    let (ok, out, err) = submit(&["-dry-run", "ads.txt", "-queue", "word in (a, b, c)", "job.sub"]);
    assert!(ok, "{err}");
    assert!(out.contains("Dry-Run 3 job(s)"), "{out}");
    let ads = std::fs::read_to_string(dir.path().join("ads.txt")).unwrap();
    assert!(ads.contains("Args = \"a 0\"") && ads.contains("Args = \"c 2\""), "{ads}");
    let (ok, out, err) = submit(&["--dump", "-queue", "4", "noq.sub"]);
    assert!(ok, "{err}");
    assert_eq!(out.matches("ProcId = ").count(), 4, "{out}");
    // A word without `=` after the file is refused, naming what may follow.
    let (ok, _, err) = submit(&["--dump", "job.sub", "oops"]);
    assert!(!ok && err.contains("name=value"), "{err}");
}

#[cfg(unix)]
#[test]
fn sigterm_stops_the_schedd_gracefully() {
    let mut pool = start();
    let addr_file = pool.path().join("spool/.schedd_address");
    assert!(addr_file.exists());
    let st = std::process::Command::new("kill")
        .args(["-TERM", &pool.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = pool.child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "no exit on SIGTERM");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // A graceful stop: a clean exit, and its address withdrawn.
    assert!(status.success(), "{status}");
    assert!(!addr_file.exists());
}

/// HTCondor's names and options: `andes install-names DIR` makes the
/// condor_* links, each runs its andes command with HTCondor's single-dash
/// options, and a refusal names the option as it was typed.
#[test]
fn condor_names_and_single_dash_options_work_as_in_htcondor() {
    let pool = start();
    write(&pool, "job.wasm", MODULE);
    write(&pool, "job.sub", b"executable = job.wasm\nqueue 2\n");
    let names = pool.path().join("bin");
    let made = pool.ok("alice", &["install-names", names.to_str().unwrap()]);
    assert!(made.lines().any(|l| l.ends_with("condor_submit")), "{made}");
    // Again: the links are replaced, not refused.
    pool.ok("alice", &["install-names", names.to_str().unwrap()]);
    let condor = |name: &str, args: &[&str]| {
        let o = std::process::Command::new(names.join(name))
            .args(args)
            .current_dir(pool.path())
            .env("ANDES_CONFIG_DIR", pool.path())
            .env_remove("ANDES_CONFIG")
            .env("USER", "alice")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        (o.status.success(), text + &String::from_utf8_lossy(&o.stderr))
    };
    let (ok, out) = condor("condor_submit", &["job.sub", "-batch-name", "viaName"]);
    assert!(ok && out.contains("2 job(s) submitted to cluster 1."), "{out}");
    let (ok, out) = condor("condor_q", &["-nobatch", "-af", "ClusterId", "ProcId", "JobBatchName"]);
    assert!(ok, "{out}");
    assert_eq!(out, "1 0 viaName\n1 1 viaName\n");
    let (ok, out) = condor("condor_hold", &["1.1", "-reason", "by name"]);
    assert!(ok && out.contains("Job 1.1 held"), "{out}");
    let (ok, out) = condor("condor_q", &["-hold", "-af", "HoldReason"]);
    assert!(ok && out.trim() == "by name", "{out}");
    // `-word=value` and the double-dash form are the same option.
    let (ok, out) = condor("condor_q", &["-constraint=ProcId == 0", "-af", "ProcId"]);
    assert!(ok && out == "0\n", "{out}");
    // Refusals name what was typed.
    let (ok, out) = condor("condor_q", &["-bogus"]);
    assert!(!ok && out.contains("'-bogus'") && !out.contains("'-b'"), "{out}");
    let (ok, out) = condor("condor_q", &["-constraint"]);
    assert!(!ok && out.contains("'-constraint"), "{out}");
    assert!(!out.contains("--constraint"), "{out}");
    // A condor_* name andes does not answer to says so. (A link, not a copy:
    // a copy is a file this process writes and then runs, which a child
    // another test forks meanwhile can hold open for writing: ETXTBSY.)
    let andes = std::fs::canonicalize(names.join("condor_q")).unwrap();
    std::os::unix::fs::symlink(andes, names.join("condor_frobnicate")).unwrap();
    let (ok, out) = condor("condor_frobnicate", &[]);
    assert!(!ok && out.contains("condor_frobnicate is not one of"), "{out}");
    // A file of such a name that is not a link is left alone.
    std::fs::remove_file(names.join("condor_rm")).unwrap();
    std::fs::write(names.join("condor_rm"), "#!/bin/sh\n").unwrap();
    let e = pool.fails("alice", &["install-names", names.to_str().unwrap()]);
    assert!(e.contains("condor_rm exists and is not a link"), "{e}");
}

/// Shell completions and man pages come from the command definitions:
/// every command is in them, nested ones too.
#[test]
fn completions_and_man_pages_are_generated_from_the_commands() {
    let o = andes().args(["completions", "bash"]).output().unwrap();
    let script = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    for word in ["vacate-job", "config-val", "install-names", "--allusers"] {
        assert!(script.contains(word), "{word} not in the bash completions");
    }
    let o = andes().args(["completions", "tcsh-ish"]).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("tcsh-ish"), "{o:?}");
    let dir = tempfile::tempdir().unwrap();
    let o = andes().arg("man").arg(dir.path()).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let q = std::fs::read_to_string(dir.path().join("andes-q.1")).unwrap();
    assert!(q.contains(".SH NAME") && q.contains("condor_q") && q.contains("allusers"), "{q}");
    assert!(dir.path().join("andes.1").exists());
    assert!(dir.path().join("andes-router-q.1").exists());
}

/// Runs `andes ARGS` as `user` against `pool` with standard output a pipe
/// whose reader has gone before the first write (`| head` that exited):
/// its status and standard error.
#[cfg(unix)]
fn to_a_gone_reader(pool: &Daemon, user: &str, args: &[&str]) -> (Option<i32>, String) {
    use std::process::Stdio;
    let mut child = andes()
        .args(args)
        .current_dir(pool.path())
        .env("ANDES_CONFIG_DIR", pool.path())
        .env_remove("ANDES_CONFIG")
        .env("USER", user)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Every kind of command that prints, into a pipe whose reader stopped
/// early (`andes q | head -1`), ends quietly with 141, a shell's status for
/// SIGPIPE (as condor_q ends): no panic (exit 101) and no error message.
/// `cargo xtask tidy` keeps `println!` out of the binary's sources.
#[cfg(unix)]
#[test]
fn a_command_whose_reader_stopped_early_ends_quietly() {
    let pool = start();
    write(&pool, "job.wasm", MODULE);
    write(&pool, "job.sub", b"executable = job.wasm\nqueue 3\n");
    pool.ok("alice", &["submit", "job.sub"]);
    let commands: &[&[&str]] = &[
        &["q"],
        &["q", "-af", "ClusterId", "ProcId"],
        &["q", "-l"],
        &["q", "-json"],
        &["history"],
        &["submit", "job.sub"],
        &["submit", "--dump", "job.sub"],
        &["hold", "alice"],
        &["classad", "eval", "1 + 1"],
        &["cron", "next", "--count", "100000", "--from", "0"],
        &["config-val", "--dump"],
        &["completions", "bash"],
        &["--help"],
    ];
    for args in commands {
        // A process another test forks at the same moment holds a copy of the
        // pipe's read end until it execs: a short output may then go into the
        // pipe whole, and the command ends 0, quietly. That is no failure, but
        // it shows nothing either: it is tried again.
        let mut tries = 0;
        let (code, err) = loop {
            let (code, err) = to_a_gone_reader(&pool, "alice", args);
            tries += 1;
            if code != Some(0) || !err.is_empty() || tries == 5 {
                break (code, err);
            }
        };
        assert_eq!(code, Some(141), "andes {args:?} into a closed pipe: {code:?}\n{err}");
        assert!(err.is_empty(), "andes {args:?} into a closed pipe said: {err}");
    }
}
