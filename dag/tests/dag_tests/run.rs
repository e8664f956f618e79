//! How a DAG runs: HTCondor's manual's rules of node success, retries,
//! PRE_SKIP, ABORT-DAG-ON, FINAL, throttles and priorities, driven event by
//! event through the pure state machine.

use std::path::Path;

use andes_dag::run::{DagStatus, Event, Options, Run, State, Step};
use andes_dag::*;

fn dag(text: &str) -> Dag {
    parse_str(Path::new("t.dag"), text, &Disk::new(Path::new(".")), &Limits::default()).unwrap()
}

/// The steps, with node names for ids.
fn named(d: &Dag, steps: &[Step]) -> Vec<String> {
    let n = |i: &NodeId| d.nodes[*i as usize].name.clone();
    steps
        .iter()
        .map(|s| match s {
            Step::RunPre { node, retry } => format!("pre {} {retry}", n(node)),
            Step::Submit { node, retry } => format!("submit {} {retry}", n(node)),
            Step::RunPost { node, retry, job_return, pre_return } => {
                format!("post {} {retry} {job_return} {pre_return}", n(node))
            }
            Step::RemoveAll => "remove all".into(),
            Step::Finished { status, exit } => format!("finished {status:?} {exit}"),
        })
        .collect()
}

const DIAMOND: &str =
    "JOB A A.sub\nJOB B B.sub\nJOB C C.sub\nJOB D D.sub\nPARENT A CHILD B C\nPARENT B C CHILD D\n";

#[test]
fn the_diamond_runs_in_order() {
    let d = dag(DIAMOND);
    let id = |n: &str| d.by_name[n];
    let mut r = Run::new(&d, Options::default()).unwrap();
    assert_eq!(named(&d, &r.start()), ["submit A 0"]);
    assert_eq!(r.state(id("B")), State::Waiting);
    assert_eq!(named(&d, &r.on(Event::JobEnded(id("A"), 0))), ["submit B 0", "submit C 0"]);
    assert!(r.on(Event::JobEnded(id("B"), 0)).is_empty());
    assert_eq!(named(&d, &r.on(Event::JobEnded(id("C"), 0))), ["submit D 0"]);
    assert_eq!(named(&d, &r.on(Event::JobEnded(id("D"), 0))), ["finished Ok 0"]);
    // Late or repeated events change nothing, nor events for nodes it lacks.
    assert!(r.on(Event::JobEnded(id("D"), 1)).is_empty());
    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    for e in [Event::PreExited(99, 0), Event::JobEnded(4, 0), Event::PostExited(u32::MAX, 1)] {
        assert!(r.on(e).is_empty(), "{e:?}");
    }
    assert_eq!(r.state(id("A")), State::Submitted);
}

/// Table 2.1: the exit of whatever ran last decides the node; a POST script
/// overrides its job, and is told `$RETURN` and `$PRE_SCRIPT_RETURN`.
#[test]
fn the_last_component_run_decides() {
    let d =
        dag("JOB A a\nJOB B b\nSCRIPT PRE A pre\nSCRIPT POST A post $RETURN\nPARENT A CHILD B\n");
    let (a, b) = (d.by_name["A"], d.by_name["B"]);
    let mut r = Run::new(&d, Options::default()).unwrap();
    assert_eq!(named(&d, &r.start()), ["pre A 0"]);
    assert_eq!(named(&d, &r.on(Event::PreExited(a, 0))), ["submit A 0"]);
    assert_eq!(named(&d, &r.on(Event::JobEnded(a, 5))), ["post A 0 5 0"]);
    assert_eq!(named(&d, &r.on(Event::PostExited(a, 0))), ["submit B 0"]);
    assert_eq!(r.state(a), State::Done);
    assert_eq!(named(&d, &r.on(Event::JobEnded(b, 0))), ["finished Ok 0"]);

    // A job that succeeds under a POST script that fails: the node fails.
    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    r.on(Event::PreExited(a, 0));
    r.on(Event::JobEnded(a, 0));
    assert_eq!(named(&d, &r.on(Event::PostExited(a, 3))), ["finished NodeFailed 1"]);
    assert_eq!((r.state(a), r.state(b), r.failed_count()), (State::Failed, State::Futile, 1));
}

/// A PRE failure skips the job and (by default) the POST script; with
/// always_run_post the POST script runs, told the job never ran (-1004).
#[test]
fn a_pre_failure_and_always_run_post() {
    let d = dag("JOB A a\nSCRIPT PRE A pre\nSCRIPT POST A post\n");
    let a = d.by_name["A"];
    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    assert_eq!(named(&d, &r.on(Event::PreExited(a, 7))), ["finished NodeFailed 1"]);
    let mut r = Run::new(&d, Options { always_run_post: true, ..Options::default() }).unwrap();
    r.start();
    assert_eq!(named(&d, &r.on(Event::PreExited(a, 7))), ["post A 0 -1004 7"]);
    assert_eq!(named(&d, &r.on(Event::PostExited(a, 0))), ["finished Ok 0"]);
}

/// PRE_SKIP: the PRE script's exit with that value makes the node a
/// success without its job or POST script.
#[test]
fn pre_skip_skips_the_rest_of_the_node() {
    let d = dag(
        "JOB A a\nJOB B b\nSCRIPT PRE A pre\nSCRIPT POST A post\nPRE_SKIP A 9\nPARENT A CHILD B\n",
    );
    let a = d.by_name["A"];
    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    assert_eq!(named(&d, &r.on(Event::PreExited(a, 9))), ["submit B 0"]);
    assert_eq!(r.state(a), State::Done);
}

/// RETRY reruns the whole node with `$RETRY` counting, until its count or
/// its UNLESS-EXIT value.
#[test]
fn retries_rerun_the_whole_node() {
    let d = dag("JOB C c\nSCRIPT PRE C pre $RETRY\nRETRY C 2 UNLESS-EXIT 42\n");
    let c = d.by_name["C"];
    let mut r = Run::new(&d, Options::default()).unwrap();
    assert_eq!(named(&d, &r.start()), ["pre C 0"]);
    r.on(Event::PreExited(c, 0));
    assert_eq!(named(&d, &r.on(Event::JobEnded(c, 1))), ["pre C 1"]);
    assert_eq!(r.retry(c), 1);
    r.on(Event::PreExited(c, 0));
    assert_eq!(named(&d, &r.on(Event::JobEnded(c, 1))), ["pre C 2"]);
    r.on(Event::PreExited(c, 0));
    assert_eq!(named(&d, &r.on(Event::JobEnded(c, 1))), ["finished NodeFailed 1"]);

    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    r.on(Event::PreExited(c, 0));
    assert_eq!(named(&d, &r.on(Event::JobEnded(c, 42))), ["finished NodeFailed 1"]);
    assert_eq!(r.retry(c), 0);
}

/// The manual's ABORT-DAG-ON example: node C exiting 10 aborts the DAG with
/// exit 1, over its retries, removing what runs.
#[test]
fn abort_dag_on_as_the_manual_shows() {
    let text = format!("{DIAMOND}RETRY  C 3\nABORT-DAG-ON C 10 RETURN 1\n");
    let d = dag(&text);
    let id = |n: &str| d.by_name[n];
    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    r.on(Event::JobEnded(id("A"), 0));
    assert_eq!(
        named(&d, &r.on(Event::JobEnded(id("C"), 10))),
        ["remove all", "finished Aborted 1"]
    );
    assert_eq!(r.state(id("B")), State::Waiting, "removed, left for the rescue DAG");
    assert!(r.on(Event::JobEnded(id("B"), 0)).is_empty());

    // Without RETURN the DAG exits with the node's value; with a POST
    // script the POST script's exit is the one checked.
    let d = dag("JOB A a\nSCRIPT POST A post\nABORT-DAG-ON A 4\n");
    let a = d.by_name["A"];
    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    assert_eq!(named(&d, &r.on(Event::JobEnded(a, 4))), ["post A 0 4 -1"]);
    assert_eq!(named(&d, &r.on(Event::PostExited(a, 4))), ["remove all", "finished Aborted 4"]);
}

/// The FINAL node runs once nothing else can (after failures, an abort or a
/// removal), and its result is the DAG's.
#[test]
fn the_final_node_runs_last_and_decides() {
    let d = dag("JOB A a\nJOB B b\nFINAL F f\nPARENT A CHILD B\nABORT-DAG-ON A 3\n");
    let (a, f) = (d.by_name["A"], d.by_name["F"]);
    let mut r = Run::new(&d, Options::default()).unwrap();
    assert_eq!(named(&d, &r.start()), ["submit A 0"]);
    assert_eq!(named(&d, &r.on(Event::JobEnded(a, 1))), ["submit F 0"]);
    assert_eq!(r.status(), DagStatus::NodeFailed);
    assert_eq!(named(&d, &r.on(Event::JobEnded(f, 0))), ["finished Ok 0"]);

    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    assert_eq!(named(&d, &r.on(Event::JobEnded(a, 3))), ["remove all", "submit F 0"]);
    assert_eq!(r.status(), DagStatus::Aborted);
    assert_eq!(named(&d, &r.on(Event::JobEnded(f, 1))), ["finished NodeFailed 1"]);

    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    assert_eq!(named(&d, &r.on(Event::Removed)), ["remove all", "submit F 0"]);
    assert_eq!(r.status(), DagStatus::Removed);
    assert_eq!(named(&d, &r.on(Event::JobEnded(f, 0))), ["finished Ok 0"]);

    let d = dag("JOB A a\n");
    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    assert_eq!(named(&d, &r.on(Event::Removed)), ["remove all", "finished Removed 2"]);
}

/// -maxjobs, a category's MAXJOBS and PRIORITY decide what starts.
#[test]
fn throttles_and_priorities() {
    let d = dag("JOB A a\nJOB B b\nJOB C c\nJOB D d\nJOB E e\nPRIORITY C 10\nPRIORITY E 5\n\
         CATEGORY A heavy\nCATEGORY B heavy\nMAXJOBS heavy 1\n");
    let id = |n: &str| d.by_name[n];
    let mut r = Run::new(&d, Options { max_jobs: 3, ..Options::default() }).unwrap();
    // C (10), E (5), then A (0, first defined); B waits on its category.
    assert_eq!(named(&d, &r.start()), ["submit C 0", "submit E 0", "submit A 0"]);
    assert_eq!(named(&d, &r.on(Event::JobEnded(id("C"), 0))), ["submit D 0"]);
    assert!(r.on(Event::JobEnded(id("E"), 0)).is_empty());
    assert_eq!(named(&d, &r.on(Event::JobEnded(id("A"), 0))), ["submit B 0"]);
    r.on(Event::JobEnded(id("D"), 0));
    assert_eq!(named(&d, &r.on(Event::JobEnded(id("B"), 0))), ["finished Ok 0"]);
}

/// -maxpre and -maxpost bound the scripts running at once.
#[test]
fn script_throttles() {
    let d = dag("JOB A a\nJOB B b\nSCRIPT PRE ALL_NODES pre\nSCRIPT POST ALL_NODES post\n");
    let (a, b) = (d.by_name["A"], d.by_name["B"]);
    let mut r = Run::new(&d, Options { max_pre: 1, max_post: 1, ..Options::default() }).unwrap();
    assert_eq!(named(&d, &r.start()), ["pre A 0"]);
    assert_eq!(named(&d, &r.on(Event::PreExited(a, 0))), ["pre B 0", "submit A 0"]);
    assert_eq!(named(&d, &r.on(Event::PreExited(b, 0))), ["submit B 0"]);
    assert_eq!(named(&d, &r.on(Event::JobEnded(a, 0))), ["post A 0 0 0"]);
    assert!(r.on(Event::JobEnded(b, 0)).is_empty(), "B's POST waits for A's");
    assert_eq!(named(&d, &r.on(Event::PostExited(a, 0))), ["post B 0 0 0"]);
    assert_eq!(named(&d, &r.on(Event::PostExited(b, 0))), ["finished Ok 0"]);
}

/// DONE nodes (a rescue DAG's) and NOOP nodes: neither submits a job.
#[test]
fn done_and_noop_nodes() {
    let d = dag(
        "JOB A a DONE\nJOB B b NOOP\nJOB C c\nPARENT A CHILD B\nPARENT B CHILD C\nSCRIPT POST B post\n",
    );
    let (b, c) = (d.by_name["B"], d.by_name["C"]);
    let mut r = Run::new(&d, Options::default()).unwrap();
    assert_eq!(named(&d, &r.start()), ["post B 0 0 -1"]);
    assert_eq!(named(&d, &r.on(Event::PostExited(b, 0))), ["submit C 0"]);
    assert_eq!(named(&d, &r.on(Event::JobEnded(c, 0))), ["finished Ok 0"]);
}

/// A failure leaves its descendants never run, the rest of the DAG runs on;
/// SERVICE nodes start first, never decide, and are removed at the end.
#[test]
fn a_failure_stops_its_branch_only_and_services_are_removed() {
    let d = dag("JOB A a\nJOB B b\nJOB C c\nSERVICE S s\nPARENT A CHILD B\n");
    let id = |n: &str| d.by_name[n];
    let mut r = Run::new(&d, Options::default()).unwrap();
    assert_eq!(named(&d, &r.start()), ["submit S 0", "submit A 0", "submit C 0"]);
    assert!(r.on(Event::JobEnded(id("A"), 2)).is_empty());
    assert_eq!(r.state(id("B")), State::Futile);
    assert_eq!(
        named(&d, &r.on(Event::JobEnded(id("C"), 0))),
        ["remove all", "finished NodeFailed 1"]
    );
}

#[test]
fn provisioner_nodes_are_refused_not_ignored() {
    let d = dag("PROVISIONER P p.sub\nJOB A a\n");
    let e = Run::new(&d, Options::default()).unwrap_err();
    assert_eq!(e, "t.dag:1: PROVISIONER nodes are not run by andes yet (P)");
}

/// A 1,000 x 100 fan-out and fan-in (100,002 nodes) runs to its end under
/// -maxjobs 100: every event costs a few set operations, not a walk over
/// the nodes (which made this quadratic).
#[test]
fn a_hundred_thousand_nodes_run_to_the_end() {
    let mut t = String::from("JOB top t.sub\nJOB bottom b.sub\nCATEGORY top c\nMAXJOBS c 1\n");
    for i in 0..1000 {
        for j in 0..100 {
            t.push_str(&format!("JOB n{i}_{j} n.sub\n"));
        }
        t.push_str(&format!(
            "PARENT top CHILD {}\n",
            (0..100).map(|j| format!("n{i}_{j}")).collect::<Vec<_>>().join(" ")
        ));
        t.push_str(&format!(
            "PARENT {} CHILD bottom\n",
            (0..100).map(|j| format!("n{i}_{j}")).collect::<Vec<_>>().join(" ")
        ));
    }
    let d = dag(&t);
    let mut r = Run::new(&d, Options { max_jobs: 100, ..Options::default() }).unwrap();
    let mut queue = std::collections::VecDeque::new();
    let mut submitted = 0usize;
    let mut most = 0usize;
    let mut take =
        |steps: Vec<Step>, queue: &mut std::collections::VecDeque<NodeId>| -> Option<i32> {
            for s in steps {
                match s {
                    Step::Submit { node, .. } => {
                        submitted += 1;
                        queue.push_back(node);
                    }
                    Step::Finished { exit, .. } => return Some(exit),
                    other => panic!("{other:?}"),
                }
            }
            None
        };
    let mut end = take(r.start(), &mut queue);
    while end.is_none() {
        most = most.max(queue.len());
        let node = queue.pop_front().expect("something runs until the end");
        end = take(r.on(Event::JobEnded(node, 0)), &mut queue);
    }
    assert_eq!(end, Some(0));
    assert_eq!(submitted, 100_002);
    assert_eq!(most, 100, "-maxjobs holds");
}
