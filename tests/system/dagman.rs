//! `andes dagman` (condor_dagman) against a real pool: a diamond whose data
//! flows between nodes through files, retries told `$(RETRY)`, PRE and POST
//! scripts with their macros, a failure leaving a rescue DAG that a second
//! run uses, a DAGMan killed with -9 recovering without running a node
//! twice, a removal, and bad DAGs refused before anything is submitted.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use classad::ClassAd;

use crate::common::andes;
use crate::common::pool::{Pool, int, sample, text, wait_or};

/// The jobs' directory of `p`, with the samples the DAGs use beside it.
fn jobs(p: &Pool) -> PathBuf {
    let dir = p.path().join("jobs");
    std::fs::create_dir_all(&dir).unwrap();
    for s in ["hello", "exit_code", "sleeper", "copyfile"] {
        std::fs::copy(sample(s), dir.join(format!("{s}.wasm"))).unwrap();
    }
    dir
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn script(dir: &Path, name: &str, text: &str) {
    write(dir, name, text);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// `andes dagman ARGS` as alice, in the jobs' directory.
fn dagman(p: &Pool, args: &[&str]) -> std::process::Command {
    let mut c = andes();
    c.arg("dagman")
        .args(args)
        .current_dir(p.path().join("jobs"))
        .env("ANDES_CONFIG_DIR", p.path())
        .env("ANDES_CONFIG", p.user_config())
        .env("USER", "alice");
    c
}

/// A DAGMan in the background, killed if the test ends first (a failed
/// assertion leaves no DAGMan running).
struct Running(Option<std::process::Child>);

impl Running {
    fn start(p: &Pool, args: &[&str]) -> Running {
        Running(Some(
            dagman(p, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap(),
        ))
    }

    fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, std::process::Child::id)
    }

    fn kill(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn wait_with_output(mut self) -> std::process::Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

fn run_dag(p: &Pool, args: &[&str]) -> std::process::Output {
    dagman(p, args).output().unwrap()
}

fn said(o: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The history's node jobs, by node name.
fn node_jobs(p: &Pool, node: &str) -> Vec<ClassAd> {
    p.history().into_iter().filter(|a| text(a, "DAGNodeName") == node).collect()
}

#[test]
fn a_diamond_runs_with_its_files_retries_and_scripts() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "a.sub", "executable = hello.wasm\noutput = a.stdout\nlog = a.log\nqueue\n");
    write(
        &d,
        "copy.sub",
        "executable = copyfile.wasm\narguments = $(in) $(out)\n\
         transfer_input_files = $(in)\noutput = $(node).stdout\nqueue\n",
    );
    write(&d, "d.sub", "executable = exit_code.wasm\narguments = $(code)\nqueue\n");
    // C's POST script fails its first try: the node is retried, whole.
    script(&d, "post_c.sh", "#!/bin/sh\necho \"$1 retry $2\" >> post_c.txt\n[ \"$2\" -ge 1 ]\n");
    script(&d, "post_d.sh", "#!/bin/sh\necho \"$1 $2 $3 $4\" > post_d.txt\nexit 0\n");
    script(&d, "pre_b.sh", "#!/bin/sh\necho \"pre $1\" > pre_b.txt\n");
    write(
        &d,
        "diamond.dag",
        "# A diamond: A makes hello.out, B and C copy it, D exits 7, its POST says why.\n\
         JOB A a.sub\n\
         JOB B copy.sub\n\
         JOB C copy.sub\n\
         JOB D d.sub\n\
         VARS B in=\"hello.out\" out=\"b.txt\" node=\"$(JOB)\"\n\
         VARS C in=\"hello.out\" out=\"c$(RETRY).txt\" node=\"$(JOB)\"\n\
         VARS D code=\"7\"\n\
         PARENT A CHILD B C\n\
         PARENT B C CHILD D\n\
         SCRIPT PRE B pre_b.sh $JOB\n\
         SCRIPT POST C post_c.sh $JOB $RETRY\n\
         SCRIPT POST D post_d.sh $JOB $RETURN $JOBID $MAX_RETRIES\n\
         RETRY C 2\n",
    );
    let o = run_dag(&p, &["diamond.dag"]);
    assert!(o.status.success(), "{}\n{}", said(&o), p.logs());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("DAG_Status 0, exit 0"), "{out}");
    // Data flowed A -> B, C through files.
    let hello = read(&d, "hello.out");
    assert!(hello.starts_with("hello, world"), "{hello}");
    assert_eq!(read(&d, "b.txt"), hello);
    assert_eq!(read(&d, "c0.txt"), hello, "C's first try ran with $(RETRY) 0");
    assert_eq!(read(&d, "c1.txt"), hello, "and its retry with $(RETRY) 1");
    assert_eq!(read(&d, "post_c.txt"), "C retry 0\nC retry 1\n");
    assert_eq!(read(&d, "pre_b.txt"), "pre B\n");
    // D exited 7; its POST script was told so, and said success for it.
    let d_jobs = node_jobs(&p, "D");
    assert_eq!(d_jobs.len(), 1, "{d_jobs:?}");
    let d_id = format!("{}.0", int(&d_jobs[0], "ClusterId"));
    assert_eq!(read(&d, "post_d.txt"), format!("D 7 {d_id} 0\n"));
    assert_eq!(text(&d_jobs[0], "DAGParentNodeNames"), "B,C");
    assert_eq!(node_jobs(&p, "A").len(), 1);
    assert_eq!(node_jobs(&p, "C").len(), 2, "C ran twice");
    // The node log has every node job's events; a node's own log has its own.
    let nodes_log = read(&d, "diamond.dag.nodes.log");
    for n in ["A", "B", "C", "D"] {
        assert!(nodes_log.contains(&format!("DAG Node: {n}")), "{nodes_log}");
    }
    assert!(nodes_log.contains("POST Script terminated."), "{nodes_log}");
    let a_log = read(&d, "a.log");
    assert!(a_log.contains("Job terminated") && !a_log.contains("DAG Node: B"), "{a_log}");
    let metrics: serde_json::Value =
        serde_json::from_str(&read(&d, "diamond.dag.metrics")).unwrap();
    assert_eq!(metrics["exitcode"], 0, "{metrics}");
    assert_eq!(metrics["nodes_done"], 4, "{metrics}");
    assert_eq!(metrics["jobs_submitted"], 5, "{metrics}");
    let progress = read(&d, "diamond.dag.dagman.out");
    assert!(progress.contains("exiting with status 0"), "{progress}");
    assert!(!d.join("diamond.dag.lock").exists(), "the lock is gone");
    assert!(!d.join("diamond.dag.rescue001").exists());
}

#[test]
fn a_failed_node_leaves_a_rescue_dag_that_the_next_run_uses() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    write(&d, "b.sub", "executable = exit_code.wasm\narguments = 3\nqueue\n");
    write(
        &d,
        "f.dag",
        "JOB A ok.sub\nJOB B b.sub\nJOB C ok.sub\nPARENT A CHILD B\nPARENT B CHILD C\n",
    );
    let o = run_dag(&p, &["f.dag"]);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    let rescue = read(&d, "f.dag.rescue001");
    assert!(rescue.contains("\nDONE A\n") && !rescue.contains("DONE B"), "{rescue}");
    assert!(rescue.contains("# Nodes that failed: 1"), "{rescue}");
    assert!(node_jobs(&p, "C").is_empty(), "C never ran after B failed");
    // Fixed, the DAG runs again from its rescue: A is not run again.
    write(&d, "b.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    let o = run_dag(&p, &["f.dag"]);
    assert!(o.status.success(), "{}", said(&o));
    assert_eq!(node_jobs(&p, "A").len(), 1, "A ran once in all");
    assert_eq!(node_jobs(&p, "B").len(), 2);
    assert_eq!(node_jobs(&p, "C").len(), 1);
    let progress = read(&d, "f.dag.dagman.out");
    assert!(progress.contains("Using rescue DAG"), "{progress}");
}

#[test]
fn a_dagman_killed_outright_recovers_without_running_a_node_twice() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "slow.sub", "executable = sleeper.wasm\narguments = 4\nqueue\n");
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    script(&d, "post.sh", "#!/bin/sh\necho \"$1\" >> posts.txt\n");
    write(
        &d,
        "r.dag",
        "JOB A ok.sub\nJOB B slow.sub\nJOB C ok.sub\nPARENT A CHILD B\nPARENT B CHILD C\n\
         SCRIPT POST A post.sh $JOB\n",
    );
    let mut child = Running::start(&p, &["r.dag"]);
    // Killed while B runs: after A's POST script ended, before B's job did.
    wait_or(
        "B's job running",
        Duration::from_secs(60),
        || p.queue().iter().any(|a| text(a, "DAGNodeName") == "B" && int(a, "JobStatus") == 2),
        || p.logs(),
    );
    child.kill();
    assert!(d.join("r.dag.lock").exists(), "a DAGMan killed outright leaves its lock");
    let o = run_dag(&p, &["r.dag"]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("(recovered)"), "{}", said(&o));
    for n in ["A", "B", "C"] {
        assert_eq!(node_jobs(&p, n).len(), 1, "node {n} ran once");
    }
    assert_eq!(read(&d, "posts.txt"), "A\n", "A's POST script ran once");
}

#[test]
fn a_removed_dag_removes_its_jobs_and_runs_its_final_node() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "slow.sub", "executable = sleeper.wasm\narguments = 600\nqueue\n");
    write(&d, "fin.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    script(&d, "status.sh", "#!/bin/sh\necho \"$1 $2\" > final.txt\n");
    write(
        &d,
        "rm.dag",
        "JOB A slow.sub\nJOB B slow.sub\nPARENT A CHILD B\nFINAL F fin.sub\n\
         SCRIPT PRE F status.sh $JOB $DAG_STATUS\n",
    );
    let child = Running::start(&p, &["rm.dag"]);
    wait_or(
        "A's job running",
        Duration::from_secs(60),
        || p.queue().iter().any(|a| text(a, "DAGNodeName") == "A" && int(a, "JobStatus") == 2),
        || p.logs(),
    );
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let o = child.wait_with_output();
    // The FINAL node's success is the DAG's, after a removal too.
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    assert_eq!(read(&d, "final.txt"), "F 4\n", "the FINAL node was told DAG_Status 4");
    let a = node_jobs(&p, "A");
    assert_eq!(a.len(), 1);
    assert_eq!(int(&a[0], "JobStatus"), 3, "A's job was removed");
    assert!(node_jobs(&p, "B").is_empty());
    assert!(d.join("rm.dag.rescue001").exists());
}

#[test]
fn a_bad_dag_is_refused_before_anything_is_submitted() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    write(&d, "cycle.dag", "JOB A ok.sub\nJOB B ok.sub\nPARENT A CHILD B\nPARENT B CHILD A\n");
    write(&d, "missing.dag", "JOB A ok.sub\nJOB B nowhere.sub\n");
    write(&d, "broken.sub", "executable = exit_code.wasm\nqueue 1 in (\n");
    write(&d, "broken.dag", "JOB A ok.sub\nJOB B broken.sub\n");
    write(&d, "sub.dag", "JOB A ok.sub\nSUBDAG EXTERNAL S inner.dag\n");
    write(&d, "reject.dag", "JOB A ok.sub\nREJECT\n");
    for (dag, says) in [
        ("cycle.dag", "cycle"),
        ("missing.dag", "missing.dag:2"),
        ("broken.dag", "broken.sub"),
        ("sub.dag", "sub.dag:2"),
        ("reject.dag", "reject.dag:2"),
    ] {
        let o = run_dag(&p, &[dag]);
        assert!(!o.status.success(), "{dag}: {}", said(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{dag}: {err}");
    }
    assert!(p.queue().is_empty() && p.history().is_empty(), "nothing was submitted");
}

/// `andes submit-dag DAG` as alice; the DAGMan job's cluster.
fn submit_dag(p: &Pool, args: &[&str]) -> u32 {
    submit_dag_with(p, args, &[])
}

/// [`submit_dag`] with `env` set too.
fn submit_dag_with(p: &Pool, args: &[&str], env: &[(&str, &str)]) -> u32 {
    let mut c = andes();
    c.envs(env.iter().copied());
    let o = c
        .arg("submit-dag")
        .args(args)
        .current_dir(p.path().join("jobs"))
        .env("ANDES_CONFIG_DIR", p.path())
        .env("ANDES_CONFIG", p.user_config())
        .env("USER", "alice")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", said(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let n = out
        .lines()
        .find_map(|l| l.strip_prefix("1 job(s) submitted to cluster "))
        .unwrap_or_else(|| panic!("{out}"));
    n.trim_end_matches('.').parse().unwrap()
}

/// The DAGMan job `cluster` in the history, once it is there.
fn dagman_done(p: &Pool, cluster: u32, within: Duration) -> ClassAd {
    let mut found = None;
    wait_or(
        "the DAGMan job in the history",
        within,
        || {
            found = p.history().into_iter().find(|a| int(a, "ClusterId") == i64::from(cluster));
            found.is_some()
        },
        || format!("{}\n{:?}", p.logs(), p.queue()),
    );
    found.unwrap()
}

#[test]
fn submit_dag_queues_a_dagman_job_that_runs_the_dag_as_its_owner() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    script(&d, "post.sh", "#!/bin/sh\nid -un > post_user.txt\necho \"$1\" >> posts.txt\n");
    write(
        &d,
        "q.dag",
        "JOB A ok.sub\nJOB B ok.sub\nJOB C ok.sub\nPARENT A CHILD B C\nSCRIPT POST C post.sh $JOB\n",
    );
    // -append: submit commands for the DAGMan job itself.
    let cluster =
        submit_dag(&p, &["-append", "+Experiment = \"lhc\"", "-append", "priority = 3", "q.dag"]);
    let ad = dagman_done(&p, cluster, Duration::from_secs(90));
    assert_eq!(int(&ad, "JobStatus"), 4, "{ad}");
    assert_eq!(int(&ad, "ExitCode"), 0, "{ad}");
    assert_eq!(int(&ad, "JobUniverse"), 7, "{ad}");
    assert_eq!((text(&ad, "Experiment"), int(&ad, "JobPrio")), ("lhc".into(), 3), "{ad}");
    for n in ["A", "B", "C"] {
        let jobs = node_jobs(&p, n);
        assert_eq!(jobs.len(), 1, "{n}");
        assert_eq!(int(&jobs[0], "DAGManJobId"), i64::from(cluster), "{}", jobs[0]);
        assert_eq!(text(&jobs[0], "JobBatchName"), format!("q.dag+{cluster}"));
        assert_eq!(text(&jobs[0], "Owner"), "alice");
    }
    assert_eq!(read(&d, "posts.txt"), "C\n");
    // The DAGMan job's own log tells its life; its progress is in dagman.out.
    let life = read(&d, "q.dag.dagman.log");
    assert!(life.contains("Job submitted") && life.contains("Job terminated"), "{life}");
    assert!(read(&d, "q.dag.dagman.out").contains("exiting with status 0"));
    assert!(d.join("q.dag.condor.sub").exists());
    // A second submit of a running DAG's lock is refused; this one is over.
    assert!(!d.join("q.dag.lock").exists());
}

#[test]
fn removing_a_dagman_job_removes_its_nodes_and_leaves_a_rescue_dag() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "slow.sub", "executable = sleeper.wasm\narguments = 600\nqueue\n");
    write(&d, "rmq.dag", "JOB A slow.sub\nJOB B slow.sub\nPARENT A CHILD B\n");
    let cluster = submit_dag(&p, &["rmq.dag"]);
    wait_or(
        "A's job running",
        Duration::from_secs(60),
        || p.queue().iter().any(|a| text(a, "DAGNodeName") == "A" && int(a, "JobStatus") == 2),
        || p.logs(),
    );
    // condor_q -dag: the node under its DAGMan job, named by its node.
    let q = p.ok("alice", &["q", "-dag"]);
    let lines: Vec<&str> = q.lines().collect();
    let at = lines.iter().position(|l| l.contains("condor_dagman")).expect(&q);
    assert!(lines[at].trim_start().starts_with(&format!("{cluster}.0")), "{q}");
    assert!(lines[at + 1].contains(" |-A ") && lines[at + 1].contains("sleeper.wasm"), "{q}");
    p.ok("alice", &["rm", &cluster.to_string()]);
    let ad = dagman_done(&p, cluster, Duration::from_secs(60));
    assert_eq!(int(&ad, "JobStatus"), 3, "{ad}");
    wait_or("the queue empty", Duration::from_secs(60), || p.queue().is_empty(), || p.logs());
    let a = node_jobs(&p, "A");
    assert_eq!((a.len(), int(&a[0], "JobStatus")), (1, 3), "A's job was removed");
    assert!(node_jobs(&p, "B").is_empty());
    let rescue = read(&d, "rmq.dag.rescue001");
    assert!(
        rescue.contains("# Nodes premarked DONE: 0") && !rescue.contains("\nDONE "),
        "{rescue}"
    );
}

#[test]
fn a_held_dagman_job_stops_and_its_release_resumes_the_dag() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "slow.sub", "executable = sleeper.wasm\narguments = 3\nqueue\n");
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    write(&d, "h.dag", "JOB A slow.sub\nJOB B ok.sub\nPARENT A CHILD B\n");
    let cluster = submit_dag(&p, &["h.dag"]);
    wait_or(
        "A's job running",
        Duration::from_secs(60),
        || p.queue().iter().any(|a| text(a, "DAGNodeName") == "A" && int(a, "JobStatus") == 2),
        || p.logs(),
    );
    p.ok("alice", &["hold", &cluster.to_string()]);
    // Its node goes on and ends; nothing follows it while the DAG is held.
    wait_or("A done", Duration::from_secs(60), || node_jobs(&p, "A").len() == 1, || p.logs());
    let held = p.queue();
    assert!(
        held.iter().all(|a| text(a, "DAGNodeName") != "B"),
        "B was submitted while its DAG was held: {held:?}"
    );
    assert!(d.join("h.dag.lock").exists(), "a stopped DAGMan leaves its lock");
    p.ok("alice", &["release", &cluster.to_string()]);
    let ad = dagman_done(&p, cluster, Duration::from_secs(90));
    assert_eq!((int(&ad, "JobStatus"), int(&ad, "ExitCode")), (4, 0), "{ad}");
    assert_eq!(node_jobs(&p, "A").len(), 1, "A ran once");
    assert_eq!(node_jobs(&p, "B").len(), 1);
    assert!(read(&d, "h.dag.dagman.out").contains("RECOVERY"));
}

#[test]
fn a_schedd_killed_outright_mid_dag_runs_each_node_once() {
    let mut p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "slow.sub", "executable = sleeper.wasm\narguments = 4\nqueue\n");
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    write(
        &d,
        "k.dag",
        "JOB A ok.sub\nJOB B slow.sub\nJOB C ok.sub\nPARENT A CHILD B\nPARENT B CHILD C\n",
    );
    let cluster = submit_dag(&p, &["k.dag"]);
    wait_or(
        "B's job running",
        Duration::from_secs(60),
        || p.queue().iter().any(|a| text(a, "DAGNodeName") == "B" && int(a, "JobStatus") == 2),
        || p.logs(),
    );
    Pool::kill9(&mut p.schedd);
    p.start_schedd();
    let ad = dagman_done(&p, cluster, Duration::from_secs(120));
    assert_eq!((int(&ad, "JobStatus"), int(&ad, "ExitCode")), (4, 0), "{ad}");
    for n in ["A", "B", "C"] {
        assert_eq!(node_jobs(&p, n).len(), 1, "node {n} ran once");
    }
    assert!(read(&d, "k.dag.dagman.out").contains("RECOVERY"));
}

/// An execute host killed outright while a node's job runs on it: the job
/// runs again once the host is back, DAGMan waits for it (the node is not
/// submitted twice), and the DAG completes.
#[test]
fn a_host_killed_outright_mid_dag_loses_nothing_and_submits_no_node_twice() {
    let mut p = Pool::new("", 1);
    let d = jobs(&p);
    // A lease of 3 s: the schedd gives the dead host's job up that soon
    // (HTCondor's default waits 40 minutes for the host to come back).
    write(
        &d,
        "slow.sub",
        "executable = sleeper.wasm\narguments = 3\n+JobLeaseDuration = 3\nqueue\n",
    );
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    write(
        &d,
        "h.dag",
        "JOB A ok.sub\nJOB B slow.sub\nJOB C ok.sub\nPARENT A CHILD B\nPARENT B CHILD C\n",
    );
    let cluster = submit_dag(&p, &["h.dag"]);
    wait_or(
        "B's job running",
        Duration::from_secs(60),
        || p.queue().iter().any(|a| text(a, "DAGNodeName") == "B" && int(a, "JobStatus") == 2),
        || p.logs(),
    );
    Pool::kill9(&mut p.hosts[0]);
    p.start_host(1, "");
    let ad = dagman_done(&p, cluster, Duration::from_secs(180));
    assert_eq!((int(&ad, "JobStatus"), int(&ad, "ExitCode")), (4, 0), "{ad}\n{}", p.logs());
    for n in ["A", "B", "C"] {
        assert_eq!(node_jobs(&p, n).len(), 1, "node {n} submitted once");
    }
    let b = &node_jobs(&p, "B")[0];
    assert!(int(b, "NumJobStarts") >= 2, "B's job ran again after the host died: {b}");
    let out = read(&d, "h.dag.dagman.out");
    assert_eq!(out.matches("Node B job completed").count(), 1, "{out}");
}

#[test]
fn a_dag_s_config_vars_forms_reports_and_wasm_scripts_apply() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    write(&d, "dag.config", "DAGMAN_MAX_JOBS_SUBMITTED = 1\nDAGMAN_SUPPRESS_JUNK = true\n");
    write(
        &d,
        "r.dag",
        "CONFIG dag.config\n\
         JOB A ok.sub\nJOB B ok.sub\nJOB C ok.sub\nPARENT A CHILD B C\n\
         VARS B +Color=\"\\\"blue\\\"\"\n\
         VARS C My.Size=\"3\"\n\
         SCRIPT PRE C exit_code.wasm 0\n\
         DOT g.dot UPDATE\n\
         NODE_STATUS_FILE status.txt 0\n\
         JOBSTATE_LOG jobstate.log\n\
         SAVE_POINT_FILE B b.save\n",
    );
    let o = run_dag(&p, &["r.dag"]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("DAGMAN_SUPPRESS_JUNK"), "{}", said(&o));
    assert_eq!(text(&node_jobs(&p, "B")[0], "Color"), "blue");
    assert_eq!(int(&node_jobs(&p, "C")[0], "Size"), 3);
    let dot = read(&d, "g.dot");
    assert!(dot.contains("\"A\" -> \"B\"") && dot.contains("C (done)"), "{dot}");
    let status = read(&d, "status.txt");
    assert!(
        status.contains("NodesDone = 3;") && status.contains("Type = \"StatusEnd\""),
        "{status}"
    );
    let js = read(&d, "jobstate.log");
    for w in ["DAGMAN_STARTED", "SUBMIT", "JOB_SUCCESS", "PRE_SCRIPT_SUCCESS", "DAGMAN_FINISHED 0"]
    {
        assert!(js.contains(w), "{w}: {js}");
    }
    let save = read(&d.join("save_files"), "b.save");
    assert!(save.contains("\nDONE A\n"), "{save}");
    // With DAGMAN_MAX_JOBS_SUBMITTED 1, B and C were never queued together.
    let progress = read(&d, "r.dag.dagman.out");
    let order: Vec<&str> = progress
        .lines()
        .filter(|l| l.contains("Submitting HTCondor Node") || l.contains("job completed"))
        .collect();
    for w in order.windows(2) {
        assert!(
            !(w[0].contains("Submitting") && w[1].contains("Submitting")),
            "two nodes queued at once: {order:?}"
        );
    }
}

#[test]
fn a_held_node_job_runs_its_hold_script() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "slow.sub", "executable = sleeper.wasm\narguments = 3\nqueue\n");
    script(&d, "held.sh", "#!/bin/sh\necho \"$1 held\" > held.txt\n");
    write(&d, "h.dag", "JOB A slow.sub\nSCRIPT HOLD A held.sh $JOB\n");
    let child = Running::start(&p, &["h.dag"]);
    wait_or(
        "A's job running",
        Duration::from_secs(60),
        || p.queue().iter().any(|a| text(a, "DAGNodeName") == "A" && int(a, "JobStatus") == 2),
        || p.logs(),
    );
    let id = p.queue().iter().find(|a| text(a, "DAGNodeName") == "A").map(|a| int(a, "ClusterId"));
    let id = id.unwrap().to_string();
    p.ok("alice", &["hold", &id]);
    wait_or(
        "the HOLD script",
        Duration::from_secs(30),
        || d.join("held.txt").exists(),
        || p.logs(),
    );
    assert_eq!(read(&d, "held.txt"), "A held\n");
    p.ok("alice", &["release", &id]);
    let o = child.wait_with_output();
    assert!(o.status.success(), "{}", said(&o));
}

#[test]
fn a_script_that_hangs_is_killed_with_what_it_started_and_fails_its_node() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    // The script starts a child of its own, says its pid, and waits on it.
    script(&d, "hang.sh", "#!/bin/sh\nsleep 600 &\necho $! > child.pid\nwait\n");
    write(&d, "hang.dag", "JOB A ok.sub\nSCRIPT PRE A hang.sh\n");
    let started = std::time::Instant::now();
    let o = run_dag(&p, &["--script-timeout", "1", "hang.dag"]);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(read(&d, "hang.dag.dagman.out").contains("PRE Script of Node A completed: -9"));
    assert!(node_jobs(&p, "A").is_empty(), "a failed PRE script skips the job");
    let pid = read(&d, "child.pid").trim().to_string();
    wait_or(
        "the script's own child gone",
        Duration::from_secs(10),
        || {
            !Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"))
        },
        String::new,
    );
}

#[test]
fn a_sub_dag_runs_as_a_node_under_a_dagman_of_its_own() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    std::fs::create_dir_all(d.join("inner")).unwrap();
    std::fs::copy(d.join("exit_code.wasm"), d.join("inner/exit_code.wasm")).unwrap();
    // Its files are in its own directory: it runs there.
    write(&d.join("inner"), "step.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    write(&d.join("inner"), "inner.dag", "JOB X step.sub\nJOB Y step.sub\nPARENT X CHILD Y\n");
    write(
        &d,
        "outer.dag",
        "JOB A ok.sub\nSUBDAG EXTERNAL S inner.dag DIR inner\nJOB B ok.sub\n\
         PARENT A CHILD S\nPARENT S CHILD B\n",
    );
    let cluster = submit_dag(&p, &["outer.dag"]);
    let ad = dagman_done(&p, cluster, Duration::from_secs(120));
    assert_eq!((int(&ad, "JobStatus"), int(&ad, "ExitCode")), (4, 0), "{ad}");
    // S is a DAGMan job of its own, a node of the outer DAG.
    let s = node_jobs(&p, "S");
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(int(&s[0], "JobUniverse"), 7);
    assert_eq!(int(&s[0], "DAGManJobId"), i64::from(cluster));
    let inner = int(&s[0], "ClusterId");
    for n in ["X", "Y"] {
        let jobs = node_jobs(&p, n);
        assert_eq!(jobs.len(), 1, "{n}");
        assert_eq!(int(&jobs[0], "DAGManJobId"), inner, "{n} belongs to the inner DAGMan");
    }
    // B ran after the whole sub-DAG.
    let end_of = |n: &str| int(&node_jobs(&p, n)[0], "CompletionDate");
    let start_of = |n: &str| int(&node_jobs(&p, n)[0], "QDate");
    assert!(start_of("B") >= end_of("Y"));
    assert!(read(&d.join("inner"), "inner.dag.dagman.out").contains("exiting with status 0"));
}

#[test]
fn a_dag_spliced_twice_runs_each_copy_from_its_directory() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    std::fs::create_dir_all(d.join("part")).unwrap();
    std::fs::copy(d.join("hello.wasm"), d.join("part/hello.wasm")).unwrap();
    write(&d.join("part"), "say.sub", "executable = hello.wasm\noutput = $(JOB).out\nqueue\n");
    write(&d.join("part"), "part.dag", "JOB X say.sub\nJOB Y say.sub\nPARENT X CHILD Y\n");
    write(
        &d,
        "s.dag",
        "JOB A ok.sub\nSPLICE S1 part.dag DIR part\nSPLICE S2 part.dag DIR part\nJOB B ok.sub\n\
         PARENT A CHILD S1 S2\nPARENT S1 S2 CHILD B\n",
    );
    let o = run_dag(&p, &["s.dag"]);
    assert!(o.status.success(), "{}", said(&o));
    for n in ["S1+X", "S1+Y", "S2+X", "S2+Y"] {
        assert_eq!(node_jobs(&p, n).len(), 1, "{n}");
        assert!(read(&d.join("part"), &format!("{n}.out")).contains("wrote hello.out"), "{n}");
    }
    let b = node_jobs(&p, "B");
    assert_eq!(text(&b[0], "DAGParentNodeNames"), "S1+Y,S2+Y");
}

#[test]
fn maxidle_holds_back_submits_while_that_many_node_jobs_are_idle() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    // They match nothing until their requirements are edited.
    write(
        &d,
        "wait.sub",
        "executable = exit_code.wasm\narguments = 0\nrequirements = Go =?= true\nqueue\n",
    );
    write(&d, "i.dag", "JOB A wait.sub\nJOB B wait.sub\nJOB C wait.sub\n");
    let child = Running::start(&p, &["--maxidle", "2", "i.dag"]);
    wait_or(
        "DAGMan held back by -maxidle",
        Duration::from_secs(60),
        || {
            std::fs::read_to_string(d.join("i.dag.dagman.out"))
                .is_ok_and(|t| t.contains("2 node jobs idle: -maxidle 2 reached"))
        },
        || p.logs(),
    );
    // DAGMan counts a submit in flight as idle: the queue shows the two
    // once their submits are acknowledged, and never a third while both wait.
    wait_or(
        "the two node jobs queued",
        Duration::from_secs(60),
        || p.queue().len() >= 2,
        || p.logs(),
    );
    let queued = p.queue();
    assert_eq!(queued.len(), 2, "{queued:?}");
    // Let them run: the third is submitted once fewer than 2 are idle.
    p.ok("alice", &["qedit", "--constraint", "DAGNodeName =!= undefined", "Go", "true"]);
    wait_or(
        "C submitted",
        Duration::from_secs(60),
        || node_jobs(&p, "C").len() == 1 || p.queue().iter().any(|a| text(a, "DAGNodeName") == "C"),
        || format!("{}\n{:?}\n{}", read(&d, "i.dag.dagman.out"), p.queue(), p.logs()),
    );
    p.ok("alice", &["qedit", "--constraint", "DAGNodeName =!= undefined", "Go", "true"]);
    let o = child.wait_with_output();
    assert!(o.status.success(), "{}", said(&o));
    for n in ["A", "B", "C"] {
        assert_eq!(node_jobs(&p, n).len(), 1, "{n}");
    }
}

/// How DAGMan submits its nodes, one request each: cluster ids reserved a
/// block at a time (`POST /v1/clusters`, bounded, contiguous), and a module
/// sent again when the schedd no longer has it for its owner (412), never
/// a submit lost for it.
#[test]
fn node_submits_take_clusters_by_block_and_send_a_module_the_schedd_lacks() {
    let p = Pool::new("", 1);
    let callers = crate::common::callers::Callers::new(&p);
    let schedd = p.schedd_address();
    let alice = callers.client(&schedd, "alice");
    for bad in [0, andes_job::api::MAX_CLUSTER_BLOCK + 1] {
        let body = format!("{{\"count\": {bad}}}");
        let s = callers.call(&schedd, "alice", "POST", "/v1/clusters", body.as_bytes());
        assert_eq!(s, Some(http::StatusCode::BAD_REQUEST), "count {bad}");
    }
    let (a, b) = callers.block_on(async {
        let a = andes_client::submit::reserve_clusters(&alice, 16).await.unwrap();
        let b = andes_client::submit::reserve_clusters(&alice, 16).await.unwrap();
        (a, b)
    });
    assert_eq!(b, a + 16, "blocks are contiguous and do not overlap");
    // The submit goes first, but alice never uploaded the module: the
    // schedd says 412, and the module goes up before the submit again.
    let d = jobs(&p);
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    let desc = andes_submit::parse(&read(&d, "ok.sub"), "ok.sub").unwrap();
    let expand = |cluster: u32| {
        let fs = andes_submit::RealFs;
        let mut ctx =
            andes_submit::Context::new(cluster.into(), 0, d.to_string_lossy()).with_fs(&fs);
        ctx.owner = Some("alice".into());
        andes_submit::expand(&desc, &ctx).unwrap()
    };
    let first = expand(a);
    let digest = first.modules[0].digest.clone();
    let s = callers.call(&schedd, "alice", "GET", &format!("/v1/modules/{digest}"), b"");
    assert_eq!(s, Some(http::StatusCode::NOT_FOUND));
    let queue = |cluster: u32| {
        callers.block_on(andes_client::submit::queue(
            &alice,
            cluster,
            expand(cluster),
            false,
            0,
            |_| {},
        ))
    };
    assert_eq!(queue(a).unwrap().cluster, a);
    let s = callers.call(&schedd, "alice", "GET", &format!("/v1/modules/{digest}"), b"");
    assert_eq!(s, Some(http::StatusCode::OK), "the module was sent");
    // Stored now: the next node goes in one request.
    let r = queue(a + 1);
    assert_eq!(r.unwrap().cluster, a + 1);
    // Bob may not submit into alice's reserved ids.
    let bob = callers.client(&schedd, "bob");
    let r = callers.block_on(andes_client::submit::queue(&bob, b, expand(b), false, 0, |_| {}));
    assert!(r.is_err(), "bob submitted into alice's reserved cluster {b}");
}

/// condor_submit_dag's options that HTCondor's own test DAGs pass: each is
/// taken, and those with an effect have it (-autorescue 0 runs the DAG from
/// its start despite a rescue DAG, -outfile_dir moves dagman.out,
/// -import_env gives the scripts the submitter's environment, -notification
/// is the DAGMan job's).
#[test]
fn submit_dag_takes_the_options_htcondor_s_tests_pass() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    script(&d, "post.sh", "#!/bin/sh\necho \"$ANDES_TEST_IMPORTED\" > imported.txt\n");
    write(&d, "o.dag", "JOB A ok.sub\nJOB B ok.sub\nPARENT A CHILD B\nSCRIPT POST B post.sh\n");
    // A rescue DAG that says A is done: -autorescue 0 runs A all the same.
    write(&d, "o.dag.rescue001", "DONE A\n");
    std::fs::create_dir_all(d.join("outs")).unwrap();
    let args = [
        "-verbose",
        "-notification",
        "Complete",
        "-suppress_notification",
        "-dont_suppress_notification",
        "-allowversionmismatch",
        "-update_submit",
        "-do_recurse",
        "-allowlogerror",
        "-import_env",
        "-outfile_dir",
        "outs",
        "-autorescue",
        "0",
        "o.dag",
    ];
    let cluster = submit_dag_with(&p, &args, &[("ANDES_TEST_IMPORTED", "from the submitter")]);
    let ad = dagman_done(&p, cluster, Duration::from_secs(90));
    assert_eq!((int(&ad, "JobStatus"), int(&ad, "ExitCode")), (4, 0), "{ad}");
    assert_eq!(int(&ad, "JobNotification"), 2, "notification = Complete: {ad}");
    assert_eq!(node_jobs(&p, "A").len(), 1, "A ran: the rescue DAG was not used");
    assert_eq!(read(&d, "imported.txt"), "from the submitter\n");
    assert!(read(&d.join("outs"), "o.dag.dagman.out").contains("exiting with status 0"));
    assert!(!d.join("o.dag.dagman.out").exists());
}

/// An inline submit description without a `queue` statement queues one
/// job, as HTCondor's DAGMan submits it.
#[test]
fn an_inline_description_without_queue_queues_one_job() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "i.dag", "JOB A {\n executable = exit_code.wasm\n arguments = 0\n}\n");
    let o = run_dag(&p, &["i.dag"]);
    assert!(o.status.success(), "{}", said(&o));
    assert_eq!(node_jobs(&p, "A").len(), 1);
}

/// DAGMAN_MAX_JOB_HOLDS in the DAG's CONFIG file: a node's job held that
/// many times is removed and the node fails (HTCondor's default is 100).
#[test]
fn a_node_job_held_too_often_is_removed_and_its_node_fails() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "held.sub", "executable = exit_code.wasm\narguments = 0\nhold = true\nqueue\n");
    write(&d, "ok.sub", "executable = exit_code.wasm\narguments = 0\nqueue\n");
    write(&d, "holds.config", "DAGMAN_MAX_JOB_HOLDS = 1\n");
    write(&d, "h.dag", "CONFIG holds.config\nJOB A held.sub\nJOB B ok.sub\nPARENT A CHILD B\n");
    let o = run_dag(&p, &["h.dag"]);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    let out = read(&d, "h.dag.dagman.out");
    assert!(out.contains("DAGMAN_MAX_JOB_HOLDS 1"), "{out}");
    wait_or("A's job gone", Duration::from_secs(30), || p.queue().is_empty(), || p.logs());
    assert!(node_jobs(&p, "B").is_empty(), "B never ran");
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("DAGMAN_MAX_JOB_HOLDS"),
        "applied, not warned"
    );
}

/// DAGMAN_PROHIBIT_MULTI_JOBS: a node whose submit queues more than one job
/// fails, nothing of it queued.
#[test]
fn a_node_of_several_jobs_fails_where_multi_jobs_are_prohibited() {
    let p = Pool::new("", 1);
    let d = jobs(&p);
    write(&d, "two.sub", "executable = exit_code.wasm\narguments = 0\nqueue 2\n");
    write(&d, "multi.config", "DAGMAN_PROHIBIT_MULTI_JOBS = True\n");
    write(&d, "m.dag", "CONFIG multi.config\nJOB A two.sub\n");
    let o = run_dag(&p, &["m.dag"]);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(read(&d, "m.dag.dagman.out").contains("DAGMAN_PROHIBIT_MULTI_JOBS allows a node one"));
    assert!(node_jobs(&p, "A").is_empty(), "nothing of A was queued");
}
