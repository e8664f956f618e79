//! The Graphviz file a `DOT` command asks for: the DAG's nodes and edges,
//! labelled (and, as it runs, coloured) by state, the `INCLUDE`d header text
//! after the `label=` line as HTCondor's DAGMan places it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::run::{Run, State};
use crate::{Dag, Dot, NodeKind};

/// The DOT text of `dag` (named `dag_file`), as `run` has it if it runs;
/// `header` is the text of the command's `INCLUDE` file.
pub fn dot_text(dag: &Dag, run: Option<&Run<'_>>, dag_file: &Path, header: Option<&str>) -> String {
    let mut t = String::from("digraph DAG {\n");
    let _ = writeln!(t, "    label={};", quoted(&format!("DAG {}", dag_file.display())));
    if let Some(h) = header {
        t.push_str(h);
        if !h.ends_with('\n') {
            t.push('\n');
        }
    }
    for (i, n) in dag.nodes.iter().enumerate() {
        let state = run.map(|r| r.state(i as u32));
        let (word, colour) = match state {
            None => ("", None),
            Some(State::Waiting) => (" (waiting)", None),
            Some(State::Ready | State::ReadyToSubmit) => (" (ready)", None),
            Some(State::Pre) => (" (pre)", Some("lightblue")),
            Some(State::Submitted) => (" (submitted)", Some("yellow")),
            Some(State::ReadyForPost | State::Post) => (" (post)", Some("lightblue")),
            Some(State::Done) => (" (done)", Some("green")),
            Some(State::Failed) => (" (failed)", Some("red")),
            Some(State::Futile) => (" (futile)", Some("grey")),
        };
        let shape = match n.kind {
            NodeKind::Final => "doubleoctagon",
            NodeKind::SubDag => "box3d",
            NodeKind::Service | NodeKind::Provisioner => "component",
            NodeKind::Job => "ellipse",
        };
        let _ = write!(
            t,
            "    {} [shape={shape} label={}",
            quoted(&n.name),
            quoted(&format!("{}{word}", n.name))
        );
        if let Some(c) = colour {
            let _ = write!(t, " style=filled fillcolor={c}");
        }
        t.push_str("];\n");
    }
    for (p, c) in dag.edges() {
        let _ = writeln!(
            t,
            "    {} -> {};",
            quoted(&dag.nodes[p as usize].name),
            quoted(&dag.nodes[c as usize].name)
        );
    }
    t.push_str("}\n");
    t
}

/// Where the `n`th DOT file goes: the file itself (`OVERWRITE`), or
/// `file.n` (`DONT-OVERWRITE`).
pub fn dot_path(dot: &Dot, n: u32) -> PathBuf {
    if dot.overwrite {
        return dot.file.clone();
    }
    let mut s = dot.file.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

/// A DOT string: quoted, with `"` and `\` escaped and line ends as `\n`.
fn quoted(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\r' => {}
            c => q.push(c),
        }
    }
    q.push('"');
    q
}
