//! The DAG language as HTCondor's manual writes it: its examples verbatim,
//! then every refusal with its place.

use std::path::Path;

use andes_dag::*;

fn parse(text: &str) -> Result<Dag, DagError> {
    parse_str(
        Path::new("test.dag"),
        text,
        &Disk::new(Path::new("/nonexistent")),
        &Limits::default(),
    )
}

fn refused(text: &str) -> DagError {
    match parse(text) {
        Ok(d) => panic!("accepted: {d:?}"),
        Err(e) => e,
    }
}

fn names(dag: &Dag, ids: &[NodeId]) -> Vec<String> {
    ids.iter().map(|&i| dag.nodes[i as usize].name.clone()).collect()
}

/// The manual's diamond, verbatim (dagman-introduction).
#[test]
fn the_manuals_diamond() {
    let dag = parse(
        "# File name: diamond.dag\n\n    JOB A A.sub\n    JOB B B.sub\n    JOB C C.sub\n    JOB D D.sub\n    PARENT A CHILD B C\n    PARENT B C CHILD D\n",
    )
    .unwrap();
    assert_eq!(dag.nodes.len(), 4);
    assert_eq!(dag.edge_count(), 4);
    let a = dag.by_name["A"];
    let d = dag.by_name["D"];
    assert_eq!(names(&dag, &dag.children[a as usize]), ["B", "C"]);
    assert_eq!(names(&dag, &dag.parents[d as usize]), ["B", "C"]);
    assert_eq!(dag.node("B").unwrap().submit, SubmitSource::File("B.sub".into()));
    assert_eq!(dag.node("C").unwrap().place.line, 5);
    assert!(dag.warnings.is_empty());
}

/// The manual's PRE scripts and `$RETURN` examples.
#[test]
fn scripts_keep_their_arguments_and_options() {
    let dag = parse(
        "JOB  A  A.condor\nJOB  B  B.condor\nJOB  C  C.condor\nJOB  D  D.condor\n\
         SCRIPT PRE  B  pre.sh $JOB .gz\nSCRIPT PRE  C  pre.sh $JOB .gz\n\
         SCRIPT POST A stage-out job_status $RETURN\n\
         SCRIPT DEFER 4 30 DEBUG b.debug ALL POST B check.sh\n\
         SCRIPT HOLD D notify\n\
         PARENT A CHILD B C\nPARENT B C CHILD D\n",
    )
    .unwrap();
    let b = dag.node("B").unwrap();
    let pre = b.pre.as_ref().unwrap();
    assert_eq!(
        (pre.program.as_str(), pre.args.clone()),
        ("pre.sh", vec!["$JOB".into(), ".gz".into()])
    );
    let post = b.post.as_ref().unwrap();
    assert_eq!(post.defer, Some((4, 30)));
    assert_eq!(post.debug, Some(("b.debug".into(), DebugStreams::All)));
    let a = dag.node("A").unwrap().post.as_ref().unwrap();
    assert_eq!(a.args, ["job_status", "$RETURN"]);
    assert!(dag.node("D").unwrap().hold.is_some());
}

/// The manual's VARS with every special character (dagman-vars), verbatim.
#[test]
fn vars_unescape_as_the_manual_shows() {
    let dag = parse(concat!(
        "JOB NodeA a.sub\nJOB NodeB b.sub\nJOB NodeC c.sub\nJOB NodeF f.sub\n",
        "    VARS NodeA first=\"Alberto Contador\"\n",
        "    VARS NodeA second=\"\\\"\\\"Andy Schleck\\\"\\\"\"\n",
        "    VARS NodeA third=\"Lance\\\\ Armstrong\"\n",
        "    VARS NodeA fourth=\"Vincenzo ''The Shark'' Nibali\"\n",
        "    VARS NodeA misc=\"!@#$%^&*()_-=+=[]{}?/\"\n",
        "    VARS NodeB second=\"\\\\\\\"Andreas_Kloden\\\\\\\"\"\n",
        "    VARS NodeC args=\"'Nairo Quintana' 'Chris Froome'\"\n",
        "    VARS NodeF My.A=\"\\\"bob\\\"\" +B=\"x\" PREPEND=\"not a keyword here\"\n",
    ))
    .unwrap();
    let v = |node: &str| -> Vec<(String, String)> {
        dag.node(node).unwrap().vars.iter().map(|v| (v.name.clone(), v.value.clone())).collect()
    };
    assert_eq!(
        v("NodeA"),
        [
            ("first".into(), "Alberto Contador".into()),
            ("second".into(), "\"\"Andy Schleck\"\"".into()),
            ("third".into(), "Lance\\ Armstrong".into()),
            ("fourth".into(), "Vincenzo ''The Shark'' Nibali".into()),
            ("misc".into(), "!@#$%^&*()_-=+=[]{}?/".into()),
        ]
    );
    assert_eq!(v("NodeB"), [("second".to_string(), "\\\"Andreas_Kloden\\\"".to_string())]);
    assert_eq!(v("NodeC"), [("args".to_string(), "'Nairo Quintana' 'Chris Froome'".to_string())]);
    assert_eq!(
        v("NodeF"),
        [
            ("My.A".to_string(), "\"bob\"".to_string()),
            ("+B".to_string(), "x".to_string()),
            ("PREPEND".to_string(), "not a keyword here".to_string())
        ]
    );
}

/// PREPEND / APPEND, and a macro given twice: both kept, the later wins,
/// with DAGMan's warning.
#[test]
fn vars_placement_and_redefinition() {
    let dag = parse(
        "JOB A theotherfile.sub\nVARS A PREPEND var1=\"A\"\nVARS A APPEND  var2=\"B\"\nVARS A var2=\"C\"\n",
    )
    .unwrap();
    let a = dag.node("A").unwrap();
    let at: Vec<VarsAt> = a.vars.iter().map(|v| v.at).collect();
    assert_eq!(at, [VarsAt::Prepend, VarsAt::Append, VarsAt::Default]);
    assert_eq!(dag.warnings.len(), 1);
    assert_eq!(dag.warnings[0].to_string(), "test.dag:4: VAR var2 is already defined in job A");
}

/// The manual's ALL_NODES example (dagman-all-nodes), verbatim: the later
/// command wins, and ALL_NODES never reaches the FINAL node.
#[test]
fn all_nodes_as_the_manual_says() {
    let dag = parse(
        "    # File: all_ex.dag\n    JOB A node.sub\n    JOB B node.sub\n    JOB C node.sub\n\n    SCRIPT PRE ALL_NODES my_script $JOB\n\n    VARS ALL_NODES name=\"$(JOB)\"\n\n    # This overrides the above VARS command for node B.\n    VARS B name=\"nodeB\"\n\n    RETRY all_nodes 3\nFINAL F final.sub\n",
    )
    .unwrap();
    for n in ["A", "B", "C"] {
        let node = dag.node(n).unwrap();
        assert_eq!(node.retry, Some(Retry { times: 3, unless_exit: None }), "{n}");
        assert_eq!(node.pre.as_ref().unwrap().program, "my_script");
    }
    let last = |n: &str| dag.node(n).unwrap().vars.last().unwrap().value.clone();
    assert_eq!(last("A"), "$(JOB)");
    assert_eq!(last("B"), "nodeB");
    let f = dag.node("F").unwrap();
    assert!(f.retry.is_none() && f.pre.is_none() && f.vars.is_empty());
    assert_eq!(dag.final_node, Some(dag.by_name["F"]));
}

/// Two passes: a node may be named before its JOB line.
#[test]
fn a_node_may_be_named_before_it_is_defined() {
    let dag = parse(
        "PARENT A CHILD B\nRETRY B 2 UNLESS-EXIT 42\nJOB A a.sub\nJOB B b.sub DIR work NOOP\n",
    )
    .unwrap();
    let b = dag.node("B").unwrap();
    assert_eq!(b.retry, Some(Retry { times: 2, unless_exit: Some(42) }));
    assert_eq!(b.dir.as_deref(), Some(Path::new("work")));
    assert!(b.noop && !b.done);
}

/// Inline submit descriptions and SUBMIT-DESCRIPTION (the manual's sidebars).
#[test]
fn inline_and_named_submit_descriptions() {
    let dag = parse(
        "            JOB A {\n                executable   = /path/diamond.exe\n                output       = diamond.out.$(cluster)\n            }\n\
         SUBMIT-DESCRIPTION DiamondDesc {\n    executable   = /path/diamond.exe\n    request_cpus   = 1\n}\n\
         JOB B DiamondDesc\nJOB C c.sub\nPARENT A CHILD B C\n",
    )
    .unwrap();
    match &dag.node("A").unwrap().submit {
        SubmitSource::Inline(s) => {
            assert!(s.text.contains("executable   = /path/diamond.exe"));
            assert!(s.text.contains("output       = diamond.out.$(cluster)"));
            assert_eq!(s.place.line, 1);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(dag.node("B").unwrap().submit, SubmitSource::Named("DiamondDesc".into()));
    assert_eq!(dag.node("C").unwrap().submit, SubmitSource::File("c.sub".into()));
    assert!(dag.descriptions["DiamondDesc"].text.contains("request_cpus   = 1"));
}

/// The commands about the DAG as a whole.
#[test]
fn dag_wide_commands() {
    let dag = parse(
        "JOB A a.sub\nJOB B b.sub\nCATEGORY A light\nCATEGORY ALL_NODES heavy\nCATEGORY A light\nMAXJOBS heavy 5\n\
         PRIORITY B -7\nPRE_SKIP A 3\nABORT-DAG-ON B 2 RETURN 1\nDONE B\nCONFIG dag.config\n\
         SET_JOB_ATTR Project = \"physics\"\nENV GET HOME PATH\nENV SET A=1;B = two ;\n\
         DOT dag.dot UPDATE DONT-OVERWRITE INCLUDE head.dot\nNODE_STATUS_FILE status.txt 30 ALWAYS-UPDATE\n\
         JOBSTATE_LOG js.log\nSAVE_POINT_FILE A\nSUBDAG EXTERNAL S inner.dag DIR sub\nSERVICE W watch.sub\n",
    )
    .unwrap();
    assert_eq!(dag.node("A").unwrap().category.as_deref(), Some("light"));
    assert_eq!(dag.node("B").unwrap().category.as_deref(), Some("heavy"));
    assert_eq!(dag.max_jobs["heavy"], 5);
    assert_eq!(dag.node("B").unwrap().priority, -7);
    assert_eq!(dag.node("A").unwrap().pre_skip, Some(3));
    assert_eq!(dag.node("B").unwrap().abort_on, Some(AbortOn { exit: 2, dag_return: Some(1) }));
    assert!(dag.node("B").unwrap().done);
    assert_eq!(dag.config.as_ref().unwrap().0, Path::new("dag.config"));
    assert_eq!(dag.set_job_attrs, [("Project".to_string(), "\"physics\"".to_string())]);
    assert_eq!(
        dag.env,
        [
            EnvCommand::Get(vec!["HOME".into(), "PATH".into()]),
            EnvCommand::Set(vec![("A".into(), "1".into()), ("B".into(), "two".into())])
        ]
    );
    let dot = dag.dot.as_ref().unwrap();
    assert!(dot.update && !dot.overwrite && dot.include.as_deref() == Some(Path::new("head.dot")));
    let st = dag.node_status.as_ref().unwrap();
    assert_eq!((st.min_update_secs, st.always_update), (30, true));
    assert_eq!(dag.jobstate_log.as_deref(), Some(Path::new("js.log")));
    assert_eq!(dag.node("A").unwrap().save_point.as_deref(), Some(Path::new("A.save")));
    let s = dag.node("S").unwrap();
    assert_eq!(
        (s.kind, s.submit.clone()),
        (NodeKind::SubDag, SubmitSource::File("inner.dag".into()))
    );
    assert_eq!(dag.node("W").unwrap().kind, NodeKind::Service);
    assert!(dag.rejected.is_none());
    assert_eq!(parse("JOB A a.sub\nREJECT\n").unwrap().rejected.unwrap().line, 2);
}

/// Keywords are case-insensitive; node names are not.
#[test]
fn keywords_in_any_case_names_exactly() {
    let dag = parse("job a a.sub\nJob A A.sub\nparent a child A\nRetry A 1\n").unwrap();
    assert_eq!(dag.nodes.len(), 2);
    assert_eq!(dag.node("A").unwrap().retry.unwrap().times, 1);
    assert!(dag.node("a").unwrap().retry.is_none());
}

/// INCLUDE splices a file in place; its errors name it and its line.
#[test]
fn include_splices_a_file_and_its_places() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nodes.dag"), "JOB B b.sub\n\nJOB C c.sub\n").unwrap();
    std::fs::write(dir.path().join("bad.dag"), "JOB D d.sub\nPARENT D CHILD Q\n").unwrap();
    std::fs::write(dir.path().join("self.dag"), "INCLUDE self.dag\n").unwrap();
    std::fs::write(
        dir.path().join("main.dag"),
        "JOB A a.sub\nINCLUDE nodes.dag\nPARENT A CHILD B C\n",
    )
    .unwrap();
    let dag =
        parse_file(Path::new("main.dag"), &Disk::new(dir.path()), &Limits::default()).unwrap();
    assert_eq!(dag.nodes.len(), 3);
    assert_eq!(dag.node("C").unwrap().place.to_string(), "nodes.dag:3");
    let e = parse_str(
        Path::new("m.dag"),
        "INCLUDE bad.dag\n",
        &Disk::new(dir.path()),
        &Limits::default(),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "bad.dag:2: no node is named Q");
    let e = parse_str(
        Path::new("m.dag"),
        "INCLUDE self.dag\n",
        &Disk::new(dir.path()),
        &Limits::default(),
    )
    .unwrap_err();
    assert!(e.message.contains("nested more than 32 deep"), "{e}");
    let e = parse_str(
        Path::new("m.dag"),
        "JOB A a.sub\nINCLUDE missing.dag\n",
        &Disk::new(dir.path()),
        &Limits::default(),
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("m.dag:2: cannot read"), "{e}");
    let e =
        parse_file(Path::new("none.dag"), &Disk::new(dir.path()), &Limits::default()).unwrap_err();
    assert!(e.to_string().starts_with("none.dag:0: cannot read"), "{e}");
}

/// Every refusal names the file and line, and says what.
#[test]
fn refusals_say_what_and_where() {
    let cases: &[(&str, &str)] = &[
        ("JOB A a.sub\nJOB A b.sub\n", "test.dag:2: node A is defined twice (first at test.dag:1)"),
        ("JOB A a.sub\nPARENT A CHILD B\n", "test.dag:2: no node is named B"),
        ("JOB A a.sub\nRETRY Z 2\n", "test.dag:2: no node is named Z"),
        (
            "JOB A a.sub\nRETRY A many\n",
            "test.dag:2: RETRY's count: `many` is not a number in range",
        ),
        (
            "JOB A a.sub\nRETRY A 1 UNLESS 3\n",
            "test.dag:2: unexpected `UNLESS`; the form is RETRY node|ALL_NODES times [UNLESS-EXIT value]",
        ),
        ("JOB A a.sub\nFROB A\n", "test.dag:2: `FROB` is not a command of the DAG language"),
        (
            "JOB A a.sub\nPARENT A\n",
            "test.dag:2: PARENT without CHILD: the form is PARENT p1 [p2 ...] CHILD c1 [c2 ...]",
        ),
        ("JOB A a.sub\nPARENT A CHILD A\n", "test.dag:2: node A is its own parent (a cycle)"),
        (
            "JOB A a.sub\nCHILD A\n",
            "test.dag:2: CHILD without PARENT: the form is PARENT p1 [p2 ...] CHILD c1 [c2 ...]",
        ),
        (
            "JOB a.b x.sub\n",
            "test.dag:1: node name a.b: `.` and `+` are reserved (splices scope names with them)",
        ),
        ("JOB parent x.sub\n", "test.dag:1: parent is a keyword, not a node name"),
        (
            "JOB A\n",
            "test.dag:1: JOB A needs a submit description (a file, a SUBMIT-DESCRIPTION's name, or `{ ... }`)",
        ),
        (
            "JOB A a.sub FAST\n",
            "test.dag:1: `FAST` is not an option of JOB (DIR directory, NOOP, DONE)",
        ),
        (
            "JOB A {\nexecutable = x\n",
            "test.dag:1: the inline submit description opened here has no closing `}`",
        ),
        (
            "FINAL F f.sub\nFINAL G g.sub\n",
            "test.dag:2: a second FINAL node (G); F at test.dag:1 is the first",
        ),
        (
            "JOB A a.sub\nFINAL F f.sub\nPARENT A CHILD F\n",
            "test.dag:3: F is a FINAL node, which runs after all the others: it has no PARENT or CHILD",
        ),
        (
            "JOB A a.sub\nVARS A x=unquoted\n",
            "test.dag:2: VARS x: the value must be in double quotes",
        ),
        (
            "JOB A a.sub\nVARS A x=\"open\n",
            "test.dag:2: VARS x: the value's closing quote is missing",
        ),
        (
            "JOB A a.sub\nVARS A queue_n=\"1\"\n",
            "test.dag:2: VARS: a macro name may not begin with `queue` (queue_n)",
        ),
        (
            "JOB A a.sub\nVARS A a-b=\"1\"\n",
            "test.dag:2: VARS: `a-b` is not a macro name (letters, digits, _; or My.attr / +attr)",
        ),
        (
            "JOB A a.sub\nVARS A\n",
            "test.dag:2: VARS A defines nothing: the form is VARS node|ALL_NODES [PREPEND|APPEND] name=\"value\" ...",
        ),
        (
            "JOB A a.sub\nSCRIPT PRE A\n",
            "test.dag:2: SCRIPT needs a node and a program: the form is SCRIPT [DEFER status time] [DEBUG file STDOUT|STDERR|ALL] PRE|POST|HOLD node|ALL_NODES program [arguments]",
        ),
        (
            "JOB A a.sub\nSCRIPT LATER A x\n",
            "test.dag:2: SCRIPT needs PRE, POST or HOLD: the form is SCRIPT [DEFER status time] [DEBUG file STDOUT|STDERR|ALL] PRE|POST|HOLD node|ALL_NODES program [arguments]",
        ),
        (
            "JOB A a.sub\nSCRIPT DEBUG f BOTH PRE A x\n",
            "test.dag:2: DEBUG's type `BOTH` is not STDOUT, STDERR or ALL",
        ),
        (
            "JOB A a.sub\nPRE_SKIP A 0\n",
            "test.dag:2: PRE_SKIP's exit code must not be 0 (0 is the PRE script's success)",
        ),
        (
            "JOB A a.sub\nABORT-DAG-ON A 1 RETURN 300\n",
            "test.dag:2: RETURN's value (0 to 255): `300` is not a number in range",
        ),
        (
            "CONFIG a.config\nCONFIG b.config\n",
            "test.dag:2: a second CONFIG file; a.config at test.dag:1 is the first",
        ),
        ("SET_JOB_ATTR 1x = 2\n", "test.dag:1: SET_JOB_ATTR: `1x` is not an attribute name"),
        ("ENV PUT X\n", "test.dag:1: ENV takes GET VAR [VAR ...] or SET Key=Value[;Key=Value ...]"),
        (
            "DOT d.dot SOMETIMES\n",
            "test.dag:1: `SOMETIMES` is not an option of DOT (UPDATE, DONT-UPDATE, OVERWRITE, DONT-OVERWRITE, INCLUDE file)",
        ),
        ("SUBDAG inner.dag\n", "test.dag:1: SUBDAG must be SUBDAG EXTERNAL name dag_file"),
        (
            "SUBDAG EXTERNAL S {\nx = 1\n}\n",
            "test.dag:1: a sub-DAG is a DAG file, not an inline submit description",
        ),
        (
            "CONNECT S1 S2\n",
            "test.dag:1: CONNECT joins two splices: S1 is not a splice (a node or a sub-DAG is joined with PARENT ... CHILD)",
        ),
        ("SPLICE S\n", "test.dag:1: the form is SPLICE name dag_file [DIR directory]"),
        ("INCLUDE a b\n", "test.dag:1: INCLUDE takes one file name"),
        ("REJECT now\n", "test.dag:1: unexpected `now`; the form is REJECT"),
    ];
    for (text, want) in cases {
        assert_eq!(refused(text).to_string(), *want, "for {text:?}");
    }
}

/// A cycle is refused before anything runs, and named.
#[test]
fn a_cycle_is_named() {
    let e = refused(
        "JOB A a\nJOB B b\nJOB C c\nJOB D d\nPARENT A CHILD B\nPARENT B CHILD C\nPARENT C CHILD B D\n",
    );
    assert!(
        e.message == "the DAG has a cycle: B -> C -> B"
            || e.message == "the DAG has a cycle: C -> B -> C",
        "{e}"
    );
    assert_eq!(e.place.file, Path::new("test.dag"));
}

/// Every bound holds, and is said.
#[test]
fn limits_hold() {
    let small =
        Limits { nodes: 2, edges: 3, line_bytes: 40, inline_bytes: 20, ..Limits::default() };
    let p = |t: &str| {
        parse_str(Path::new("t.dag"), t, &Disk::new(Path::new(".")), &small)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(p("JOB A a\nJOB B b\nJOB C c\n"), "t.dag:3: more than 2 nodes");
    assert_eq!(
        p(
            "JOB A a\nJOB B b\nPARENT A CHILD B\nPARENT A CHILD B\nPARENT A CHILD B\nPARENT A CHILD B\n"
        ),
        "t.dag:6: more than 3 edges"
    );
    assert_eq!(
        p(&format!("JOB A {}\n", "x".repeat(50))),
        "t.dag:1: the line is longer than 40 bytes"
    );
    assert_eq!(
        p("JOB A {\nexecutable = something_long\n}\n"),
        "t.dag:1: the inline submit description is longer than 20 bytes"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.dag"), "JOB A a.sub\n".repeat(10)).unwrap();
    let tiny = Limits { file_bytes: 50, ..Limits::default() };
    let e = parse_file(Path::new("big.dag"), &Disk::new(dir.path()), &tiny).unwrap_err();
    assert!(e.message.ends_with("is larger than 50 bytes"), "{e}");
    std::fs::write(dir.path().join("bin.dag"), [0xff, 0xfe, b'\n']).unwrap();
    let e =
        parse_file(Path::new("bin.dag"), &Disk::new(dir.path()), &Limits::default()).unwrap_err();
    assert!(e.message.contains("is not UTF-8 text (byte 0)"), "{e}");
}

/// A repeated edge is one edge, with a warning.
#[test]
fn a_repeated_edge_is_one_edge() {
    let dag = parse("JOB A a\nJOB B b\nPARENT A CHILD B\nPARENT A CHILD B\n").unwrap();
    assert_eq!(dag.edge_count(), 1);
    assert_eq!(dag.warnings.len(), 1);
    assert_eq!(dag.edges().collect::<Vec<_>>(), [(0, 1)]);
}

/// Big DAGs read in one go: 1,000 x 100 fan-out and fan-in (100,000 nodes),
/// checked for cycles without recursion.
#[test]
fn a_hundred_thousand_nodes() {
    let mut t = String::from("JOB top t.sub\nJOB bottom b.sub\n");
    for i in 0..1000 {
        for j in 0..100 {
            t.push_str(&format!("JOB n{i}_{j} n.sub\n"));
        }
        t.push_str("PARENT top CHILD");
        for j in 0..100 {
            t.push_str(&format!(" n{i}_{j}"));
        }
        t.push('\n');
        for j in 0..100 {
            t.push_str(&format!("PARENT n{i}_{j} CHILD bottom\n"));
        }
    }
    let dag = parse(&t).unwrap();
    assert_eq!(dag.nodes.len(), 100_002);
    assert_eq!(dag.edge_count(), 200_000);
    // A long chain: no recursion in the check.
    let mut chain = String::new();
    for i in 0..200_000 {
        chain.push_str(&format!("JOB c{i} c.sub\n"));
    }
    for i in 1..200_000 {
        chain.push_str(&format!("PARENT c{} CHILD c{i}\n", i - 1));
    }
    chain.push_str("PARENT c199999 CHILD c0\n");
    let e = refused(&chain);
    assert!(e.message.starts_with("the DAG has a cycle: "), "{e}");
    assert!(e.message.ends_with(" (200000 nodes)"), "{e}");
    assert_eq!(e.message.matches(" -> ").count(), 12, "{e}");
}

/// Every command of HTCondor's DAG quick reference is read, or refused as
/// one andes does not run yet: none is an unknown word.
#[test]
fn every_command_of_the_quick_reference_is_known() {
    let commands = [
        ("INCLUDE", "INCLUDE /nonexistent/x.dag"),
        ("JOB", "JOB X x.sub"),
        ("PARENT", "PARENT A CHILD B"),
        ("SPLICE", "SPLICE S s.dag"),
        ("SUBDAG", "SUBDAG EXTERNAL S s.dag"),
        ("SUBMIT-DESCRIPTION", "SUBMIT-DESCRIPTION D {\nexecutable = x\n}"),
        ("DONE", "DONE A"),
        ("PRE_SKIP", "PRE_SKIP A 1"),
        ("PRIORITY", "PRIORITY A 1"),
        ("RETRY", "RETRY A 1"),
        ("SCRIPT", "SCRIPT PRE A x"),
        ("VARS", "VARS A x=\"1\""),
        ("FINAL", "FINAL F f.sub"),
        ("PROVISIONER", "PROVISIONER P p.sub"),
        ("SERVICE", "SERVICE S s.sub"),
        ("CATEGORY", "CATEGORY A c"),
        ("MAXJOBS", "MAXJOBS c 1"),
        ("ABORT-DAG-ON", "ABORT-DAG-ON A 1"),
        ("CONFIG", "CONFIG c.config"),
        ("ENV", "ENV GET HOME"),
        ("SET_JOB_ATTR", "SET_JOB_ATTR X = 1"),
        ("REJECT", "REJECT"),
        ("DOT", "DOT d.dot"),
        ("JOBSTATE_LOG", "JOBSTATE_LOG j.log"),
        ("NODE_STATUS_FILE", "NODE_STATUS_FILE s.txt"),
        ("SAVE_POINT_FILE", "SAVE_POINT_FILE A"),
        ("CONNECT", "CONNECT S1 S2"),
        ("PIN_IN", "PIN_IN A 1"),
        ("PIN_OUT", "PIN_OUT A 1"),
    ];
    for (name, line) in commands {
        let text = format!("JOB A a.sub\nJOB B b.sub\n{line}\n");
        match parse(&text) {
            Ok(_) => {}
            Err(e) => {
                assert!(!e.message.contains("is not a command"), "{name}: {e}");
                assert_eq!(e.place.line, 3, "{name}: {e}");
                assert!(
                    e.message.contains("cannot read")
                        || e.message.contains("does not run yet")
                        || e.message.contains("is not a splice"),
                    "{name}: {e}"
                );
            }
        }
    }
}

/// A line ending in a backslash goes on on the next, as in HTCondor's
/// files; an error is placed at the command's first line; a comment's
/// backslash continues nothing.
#[test]
fn a_backslash_continues_a_line() {
    let dag = parse("JOB A \\\n    a.sub\n# a comment \\\nJOB B b.sub\nPARENT A \\\n  CHILD B\n")
        .unwrap();
    assert_eq!(dag.nodes.len(), 2);
    assert_eq!(dag.node("A").unwrap().submit, SubmitSource::File("a.sub".into()));
    assert_eq!(names(&dag, &dag.children[0]), ["B"]);
    let e = refused("JOB A a.sub\nRETRY A \\\n  x\n");
    assert_eq!(e.place.line, 2, "{e}");
}

/// CONNECT, PIN_IN and PIN_OUT as the manual's "DAG Splice Connections"
/// example has them (verbatim): A1 is the parent of B1 and B2, A2 of B3 and
/// B4, and B1 to B4 all of C1; and the restrictions it lists, each refused.
#[test]
fn connect_joins_splices_pin_to_pin() {
    let dir = tempfile::tempdir().unwrap();
    let w = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    w(
        "top.dag",
        "# File: top.dag\nSPLICE A spliceA.dag\nSPLICE B spliceB.dag\nSPLICE C spliceC.dag\n\nCONNECT A B\nCONNECT B C\n",
    );
    w(
        "spliceA.dag",
        "# File: spliceA.dag\nJOB A1 A1.sub\nJOB A2 A2.sub\n\nPIN_OUT A1 1\nPIN_OUT A2 2\n",
    );
    w(
        "spliceB.dag",
        "# File: spliceB.dag\nJOB B1 B1.sub\nJOB B2 B2.sub\nJOB B3 B3.sub\nJOB B4 B4.sub\n\n\
         PIN_IN B1 1\nPIN_IN B2 1\nPIN_IN B3 2\nPIN_IN B4 2\n\n\
         PIN_OUT B1 1\nPIN_OUT B2 2\nPIN_OUT B3 3\nPIN_OUT B4 4\n",
    );
    w(
        "spliceC.dag",
        "# File: spliceC.dag\nJOB C1 C1.sub\n\nPIN_IN C1 1\nPIN_IN C1 2\nPIN_IN C1 3\nPIN_IN C1 4\n",
    );
    let parse =
        |name: &str| parse_file(Path::new(name), &Disk::new(dir.path()), &Limits::default());
    let dag = parse("top.dag").unwrap();
    let id = |n: &str| dag.by_name[n];
    let kids = |n: &str| names(&dag, &dag.children[id(n) as usize]);
    assert_eq!(kids("A+A1"), ["B+B1", "B+B2"]);
    assert_eq!(kids("A+A2"), ["B+B3", "B+B4"]);
    for b in ["B+B1", "B+B2", "B+B3", "B+B4"] {
        assert_eq!(kids(b), ["C+C1"], "{b}");
    }
    assert_eq!(dag.edge_count(), 8);
    // Pins nobody CONNECTs are ignored, as in HTCondor, and a side of a
    // splice no CONNECT joins is not checked (a gap in half's PIN_INs).
    w("alone.dag", "SPLICE B spliceB.dag\nPIN_IN X 1\nJOB X x.sub\n");
    assert_eq!(parse("alone.dag").unwrap().edge_count(), 0);
    w("half.dag", "JOB N1 n.sub\nJOB N2 n.sub\nPIN_OUT N1 1\nPIN_OUT N2 2\nPIN_IN N2 2\n");
    w("side.dag", "SPLICE A half.dag\nSPLICE B spliceB.dag\nCONNECT A B\n");
    assert_eq!(parse("side.dag").unwrap().edge_count(), 4);
    let refusals: &[(&str, &str, &str)] = &[
        (
            "CONNECT A Z\n",
            "",
            "t.dag:4: CONNECT joins two splices: Z is not a splice (a node or a sub-DAG is joined with PARENT ... CHILD)",
        ),
        (
            "JOB N n.sub\nCONNECT N B\n",
            "",
            "t.dag:5: CONNECT joins two splices: N is not a splice (a node or a sub-DAG is joined with PARENT ... CHILD)",
        ),
        (
            "CONNECT A C\n",
            "",
            "t.dag:4: splice A has 2 PIN_OUT(s) and splice C 4 PIN_IN(s): they must match",
        ),
        (
            "SPLICE G gap.dag\nCONNECT G B\n",
            "JOB G1 g.sub\nPIN_OUT G1 1\nPIN_OUT G1 3\n",
            "t.dag:5: splice G has PIN_OUT 3 but no PIN_OUT 2: pins are numbered from 1 without gaps",
        ),
        (
            "SPLICE G gap.dag\nCONNECT A G\n",
            "JOB G1 g.sub\nPIN_IN G1 2\n",
            "t.dag:5: splice G has PIN_IN 2 but no PIN_IN 1: pins are numbered from 1 without gaps",
        ),
        (
            "SPLICE G gap.dag\nCONNECT A G\n",
            "JOB G1 g.sub\nJOB G2 g.sub\nPIN_IN G1 1\nPIN_IN G1 2\n",
            "t.dag:5: node G+G2 begins splice G but is on none of its PIN_INs: every first node of a CONNECTed input splice must be",
        ),
        (
            "SPLICE G gap.dag\n",
            "JOB G1 g.sub\nPIN_IN G1 0\n",
            "gap.dag:2: pins are numbered from 1 to 5000000: not 0",
        ),
        ("SPLICE G gap.dag\n", "JOB G1 g.sub\nPIN_IN G9 1\n", "gap.dag:2: no node is named G9"),
        (
            "SPLICE G gap.dag\n",
            "JOB G1 g.sub\nFINAL F f.sub\nPIN_OUT F 1\n",
            "gap.dag:3: F is a FINAL node, which runs after all the others: it has no PARENT or CHILD",
        ),
        (
            "SPLICE G gap.dag\n",
            "JOB G1 g.sub\nPIN_OUT G1\n",
            "gap.dag:2: the form is PIN_OUT node pin_number",
        ),
        ("CONNECT A\n", "", "t.dag:4: the form is CONNECT output_splice input_splice"),
    ];
    for (extra, gap, want) in refusals {
        w("gap.dag", gap);
        w(
            "t.dag",
            &format!("SPLICE A spliceA.dag\nSPLICE B spliceB.dag\nSPLICE C spliceC.dag\n{extra}"),
        );
        let e = parse("t.dag").unwrap_err();
        assert_eq!(e.to_string(), *want, "for {extra:?} with {gap:?}");
    }
}

/// The FINAL node takes no part in RETRY, ABORT-DAG-ON, PRIORITY or CATEGORY.
#[test]
fn the_final_node_takes_no_retry_priority_category_or_abort() {
    for cmd in ["RETRY F 1", "ABORT-DAG-ON F 1", "PRIORITY F 1", "CATEGORY F c"] {
        let e = refused(&format!("FINAL F f.sub\n{cmd}\n"));
        let key = cmd.split(' ').next().unwrap();
        assert_eq!(e.to_string(), format!("test.dag:2: F is the FINAL node, which takes no {key}"));
    }
}

/// Every file a DAG names is read through the caller's [`DagFiles`]: a DAG run
/// for its owner reads only what the owner may, and a refusal is placed.
#[test]
fn files_are_read_only_through_the_callers_reader() {
    struct OwnerMay;
    impl DagFiles for OwnerMay {
        fn read(&self, path: &Path, _limit: u64) -> Result<String, String> {
            match path.to_str() {
                Some("mine.dag") => Ok("JOB B b.sub\n".into()),
                _ => Err(format!("{}: the DAG's owner may not read it", path.display())),
            }
        }
    }
    let ok =
        parse_str(Path::new("d.dag"), "JOB A a\nINCLUDE mine.dag\n", &OwnerMay, &Limits::default());
    assert_eq!(ok.unwrap().nodes.len(), 2);
    let e = parse_str(
        Path::new("d.dag"),
        "JOB A a\nINCLUDE /etc/shadow\n",
        &OwnerMay,
        &Limits::default(),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "d.dag:2: /etc/shadow: the DAG's owner may not read it");
    let e = parse_file(Path::new("other.dag"), &OwnerMay, &Limits::default()).unwrap_err();
    assert_eq!(e.to_string(), "other.dag:0: other.dag: the DAG's owner may not read it");
}

/// SPLICE adds another DAG's nodes as `splice+node` (beneath its DIR, its
/// categories scoped to it), and a PARENT or CHILD naming the splice means
/// its last or first nodes; nested splices scope twice; what only a whole
/// DAG may have is refused in a splice.
#[test]
fn splices_add_scoped_nodes_joined_at_their_ends() {
    let dir = tempfile::tempdir().unwrap();
    let w = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w(
        "sub/diamond.dag",
        "JOB A a.sub\nJOB B b.sub\nJOB C c.sub\nJOB D d.sub\nPARENT A CHILD B C\nPARENT B C CHILD D\n\
         RETRY B 2\nCATEGORY B local\nCATEGORY C +global\nMAXJOBS local 1\nSPLICE in inner.dag\n\
         PARENT D CHILD in\n",
    );
    w("sub/inner.dag", "JOB X x.sub\n");
    w("final.dag", "JOB X x.sub\nFINAL F f.sub\n");
    w(
        "main.dag",
        "JOB start s.sub\nSPLICE S1 diamond.dag DIR sub\nSPLICE S2 diamond.dag DIR sub\n\
         JOB end e.sub\nPARENT start CHILD S1 S2\nPARENT S1 S2 CHILD end\nRETRY S2+A 3\n",
    );
    let dag =
        parse_file(Path::new("main.dag"), &Disk::new(dir.path()), &Limits::default()).unwrap();
    assert_eq!(dag.nodes.len(), 2 + 2 * 5);
    let b = dag.node("S1+B").unwrap();
    assert_eq!(b.retry.unwrap().times, 2);
    assert_eq!(b.dir.as_deref(), Some(Path::new("sub")));
    assert_eq!(b.category.as_deref(), Some("S1+local"));
    assert_eq!(dag.node("S2+C").unwrap().category.as_deref(), Some("global"));
    assert_eq!(dag.max_jobs.get("S1+local"), Some(&1));
    assert_eq!(dag.node("S2+A").unwrap().retry.unwrap().times, 3);
    assert!(dag.node("S1+in+X").is_some(), "a splice within a splice is scoped twice");
    let id = |n: &str| dag.by_name[n];
    let kids = |n: &str| names(&dag, &dag.children[id(n) as usize]);
    assert_eq!(kids("start"), ["S1+A", "S2+A"]);
    assert_eq!(kids("S1+D"), ["S1+in+X"]);
    assert_eq!(kids("S1+in+X"), ["end"]);
    assert_eq!(kids("S2+in+X"), ["end"]);
    assert_eq!(names(&dag, &dag.parents[id("S1+D") as usize]), ["S1+B", "S1+C"]);
    let e = parse_str(
        Path::new("m.dag"),
        "SPLICE F final.dag\n",
        &Disk::new(dir.path()),
        &Limits::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "m.dag:1: splice F (final.dag) holds a FINAL node, which only the whole DAG may have"
    );
    w("loop.dag", "SPLICE L loop.dag\n");
    let e =
        parse_file(Path::new("loop.dag"), &Disk::new(dir.path()), &Limits::default()).unwrap_err();
    assert!(e.message.contains("nested more than"), "{e}");
}
