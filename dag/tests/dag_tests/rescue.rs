//! Rescue DAGs: what succeeded is DONE on the next submit, nothing else.

use std::path::Path;

use andes_dag::rescue::*;
use andes_dag::run::{Event, Options, Run, Step};
use andes_dag::*;

const DAG: &str =
    "JOB A a\nJOB B b\nJOB C c\nJOB D d\nFINAL F f\nPARENT A CHILD B C\nPARENT B C CHILD D\n";

fn dag() -> Dag {
    parse_str(Path::new("x.dag"), DAG, &Disk::new(Path::new(".")), &Limits::default()).unwrap()
}

#[test]
fn a_rescue_dag_reruns_only_what_did_not_succeed() {
    let d = dag();
    let id = |n: &str| d.by_name[n];
    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    r.on(Event::JobEnded(id("A"), 0));
    r.on(Event::JobEnded(id("B"), 0));
    r.on(Event::JobEnded(id("C"), 1));
    let end = r.on(Event::JobEnded(id("F"), 1));
    assert!(matches!(end.last(), Some(Step::Finished { exit: 1, .. })), "{end:?}");
    let text = rescue_text(&d, &r, Path::new("x.dag"));
    assert!(
        text.contains("# Nodes premarked DONE: 2\n# Nodes that failed: 2\n#   C,F,<ENDLIST>\n"),
        "{text}"
    );
    let done: Vec<&str> = text.lines().filter(|l| l.starts_with("DONE")).collect();
    assert_eq!(done, ["DONE A", "DONE B"]);

    let mut again = dag();
    assert_eq!(apply_rescue(&mut again, &text, Path::new("x.dag.rescue001")).unwrap(), 2);
    let mut r = Run::new(&again, Options::default()).unwrap();
    let steps = r.start();
    assert_eq!(steps, [Step::Submit { node: id("C"), retry: 0 }]);
}

#[test]
fn rescue_files_are_numbered_and_the_newest_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let dag_file = dir.path().join("x.dag");
    assert_eq!(rescue_path(&dag_file, 1), dir.path().join("x.dag.rescue001"));
    assert!(newest_rescue(&dag_file).is_none());
    std::fs::write(rescue_path(&dag_file, 1), "").unwrap();
    std::fs::write(rescue_path(&dag_file, 2), "").unwrap();
    std::fs::write(rescue_path(&dag_file, 4), "").unwrap();
    assert_eq!(newest_rescue(&dag_file), Some((2, rescue_path(&dag_file, 2))));
}

#[test]
fn a_rescue_file_holds_only_done_lines() {
    let cases = [
        ("DONE Z\n", "r:1: no node is named Z (was the DAG file changed since?)"),
        ("# c\nRETRY A 2\n", "r:2: a rescue DAG holds only DONE node lines"),
        ("DONE A B\n", "r:1: a rescue DAG holds only DONE node lines"),
        ("DONE F\n", "r:1: F is the FINAL node, never DONE"),
    ];
    for (text, want) in cases {
        let mut d = dag();
        assert_eq!(apply_rescue(&mut d, text, Path::new("r")).unwrap_err().to_string(), want);
    }
}
