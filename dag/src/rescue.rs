//! Rescue DAGs, as DAGMan writes and reads them: when a DAG ends with work
//! undone, `<dag>.rescue001` (then `002`...) records the nodes that
//! succeeded as `DONE` lines (HTCondor's partial rescue DAG); submitting
//! the DAG again reads the DAG file, then the newest rescue file over it,
//! so only what did not succeed runs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::run::{Run, State};
use crate::{Dag, DagError, NodeKind, Place};

/// The most rescue files of one DAG (HTCondor's `DAGMAN_MAX_RESCUE_NUM`).
pub const MAX_RESCUE: u32 = 100;

/// The text of the rescue DAG for `run` of `dag` (read from `dag_file`).
pub fn rescue_text(dag: &Dag, run: &Run<'_>, dag_file: &Path) -> String {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for (i, n) in dag.nodes.iter().enumerate() {
        // A SERVICE node runs again with the DAG; the FINAL node is never DONE.
        if n.kind == NodeKind::Service {
            continue;
        }
        match run.state(i as u32) {
            State::Done if n.kind != NodeKind::Final => done.push(n.name.as_str()),
            State::Failed => failed.push(n.name.as_str()),
            _ => {}
        }
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Rescue DAG file, created after running\n#   the {} DAG file",
        dag_file.display()
    );
    let _ = writeln!(t, "#\n# Total number of Nodes: {}", dag.nodes.len());
    let _ = writeln!(t, "# Nodes premarked DONE: {}", done.len());
    let _ = writeln!(t, "# Nodes that failed: {}", failed.len());
    let _ = writeln!(t, "#   {},<ENDLIST>\n", failed.join(","));
    for name in done {
        let _ = writeln!(t, "DONE {name}");
    }
    t
}

/// `<dag_file>.rescueNNN`.
pub fn rescue_path(dag_file: &Path, n: u32) -> PathBuf {
    let mut s = dag_file.as_os_str().to_owned();
    s.push(format!(".rescue{n:03}"));
    PathBuf::from(s)
}

/// The newest rescue file of `dag_file` (the highest number that exists,
/// counting from 1 without gaps, as DAGMan does), if any.
pub fn newest_rescue(dag_file: &Path) -> Option<(u32, PathBuf)> {
    let mut newest = None;
    for n in 1..=MAX_RESCUE {
        let p = rescue_path(dag_file, n);
        if !p.is_file() {
            break;
        }
        newest = Some((n, p));
    }
    newest
}

/// Marks done the nodes a rescue file's `DONE` lines name. Anything but
/// comments and `DONE node` lines is refused: a rescue file is DAGMan's
/// own, and one that says more was not written by it.
pub fn apply_rescue(dag: &mut Dag, text: &str, name: &Path) -> Result<u32, DagError> {
    let mut marked = 0;
    for (i, raw) in text.lines().enumerate() {
        let place =
            || Place { file: name.to_path_buf(), line: u32::try_from(i + 1).unwrap_or(u32::MAX) };
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut words = t.split_whitespace();
        let node = match (words.next(), words.next(), words.next()) {
            (Some(key), Some(node), None) if key.eq_ignore_ascii_case("DONE") => node,
            _ => {
                let message = "a rescue DAG holds only DONE node lines".into();
                return Err(DagError { place: place(), message });
            }
        };
        let Some(&id) = dag.by_name.get(node) else {
            return Err(DagError {
                place: place(),
                message: format!("no node is named {node} (was the DAG file changed since?)"),
            });
        };
        if dag.final_node == Some(id) {
            return Err(DagError {
                place: place(),
                message: format!("{node} is the FINAL node, never DONE"),
            });
        }
        dag.nodes[id as usize].done = true;
        marked += 1;
    }
    Ok(marked)
}
