//! The DOT file: what Graphviz draws of a DAG, before and as it runs.

use std::path::Path;

use andes_dag::dot::{dot_path, dot_text};
use andes_dag::run::{Event, Options, Run};
use andes_dag::*;

#[test]
fn the_diamond_as_graphviz_reads_it() {
    let d = parse_str(
        Path::new("diamond.dag"),
        "JOB A A.sub\nJOB B B.sub\nJOB C C.sub\nJOB D D.sub\nFINAL F f.sub\nPARENT A CHILD B C\nPARENT B C CHILD D\nDOT dag.dot\n",
        &Disk::new(Path::new(".")),
        &Limits::default(),
    )
    .unwrap();
    let before = dot_text(&d, None, Path::new("diamond.dag"), Some("size=\"7,7\";"));
    assert_eq!(
        before,
        "digraph DAG {\n    label=\"DAG diamond.dag\";\nsize=\"7,7\";\n\
         \x20   \"A\" [shape=ellipse label=\"A\"];\n    \"B\" [shape=ellipse label=\"B\"];\n\
         \x20   \"C\" [shape=ellipse label=\"C\"];\n    \"D\" [shape=ellipse label=\"D\"];\n\
         \x20   \"F\" [shape=doubleoctagon label=\"F\"];\n\
         \x20   \"A\" -> \"B\";\n    \"A\" -> \"C\";\n    \"B\" -> \"D\";\n    \"C\" -> \"D\";\n}\n"
    );
    let mut r = Run::new(&d, Options::default()).unwrap();
    r.start();
    r.on(Event::JobEnded(d.by_name["A"], 0));
    r.on(Event::JobEnded(d.by_name["B"], 1));
    let during = dot_text(&d, Some(&r), Path::new("diamond.dag"), None);
    assert!(
        during.contains("\"A\" [shape=ellipse label=\"A (done)\" style=filled fillcolor=green];"),
        "{during}"
    );
    assert!(
        during.contains("\"B\" [shape=ellipse label=\"B (failed)\" style=filled fillcolor=red];"),
        "{during}"
    );
    assert!(
        during.contains(
            "\"C\" [shape=ellipse label=\"C (submitted)\" style=filled fillcolor=yellow];"
        ),
        "{during}"
    );
    assert!(
        during.contains("\"D\" [shape=ellipse label=\"D (futile)\" style=filled fillcolor=grey];"),
        "{during}"
    );
    let dot = d.dot.as_ref().unwrap();
    assert_eq!(dot_path(dot, 3), Path::new("dag.dot"));
    let keep = Dot { overwrite: false, ..dot.clone() };
    assert_eq!(dot_path(&keep, 3), Path::new("dag.dot.3"));
}

/// Whatever a name or file holds, the DOT text stays DOT: quotes and
/// backslashes escaped.
#[test]
fn names_are_quoted() {
    let d = parse_str(
        Path::new("q.dag"),
        "JOB a\"b x.sub\nJOB c\\d y.sub\nPARENT a\"b CHILD c\\d\n",
        &Disk::new(Path::new(".")),
        &Limits::default(),
    )
    .unwrap();
    let t = dot_text(&d, None, Path::new("we\"ird.dag"), None);
    assert!(t.contains("label=\"DAG we\\\"ird.dag\";"), "{t}");
    assert!(t.contains("\"a\\\"b\" -> \"c\\\\d\";"), "{t}");
}
