//! A DAGMan job's page shows its DAG as a graph: the DAG file (read as the
//! user, as DAGMan reads it) laid out by depth, each node coloured by the
//! state of its latest job (from the queue and the history: its nodes carry
//! `DAGManJobId`), each a link to that job's page. The page is live, so the
//! graph is too. A DAG of more than [`MAX_DRAWN`] nodes is summed up, not
//! drawn.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use andes_dagman::dag::{Dag, Limits};
use andes_schedd::api::{HistoryRequest, QueryRequest, Targets};
use classad::ClassAd;

use super::Dash;
use super::html::{esc, int, string};

/// The most nodes drawn.
pub const MAX_DRAWN: usize = 400;

/// The most node jobs read for one DAG.
const MAX_JOBS: usize = 20_000;

/// A node's state as drawn: its label and fill.
fn state_of(job: Option<&ClassAd>) -> (&'static str, &'static str) {
    let Some(a) = job else { return ("waiting", "#ffffff") };
    match int(a, "JobStatus").unwrap_or(0) {
        1 => ("idle", "#fff3b0"),
        2 | 6 => ("running", "#a8d4ff"),
        3 => ("removed", "#d0d0d0"),
        4 if int(a, "ExitCode") == Some(0) => ("done", "#a8e6a3"),
        4 => ("failed", "#ff9c9c"),
        5 => ("held", "#ffc980"),
        7 => ("suspended", "#e0c8ff"),
        _ => ("unknown", "#ffffff"),
    }
}

/// The `DAG` section of DAGMan job `ad`'s page.
pub async fn section(d: &Dash, ad: &ClassAd) -> String {
    let cluster = int(ad, "ClusterId").unwrap_or(0);
    let file = PathBuf::from(string(ad, andes_job::dagman::DAG_FILE));
    let iwd = PathBuf::from(string(ad, "Iwd"));
    let parsed = tokio::task::spawn_blocking(move || read_dag(&file, &iwd))
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
    let dag = match parsed {
        Ok(dag) => dag,
        Err(e) => return format!("<p class=\"note\">{}</p>", esc(&e)),
    };
    let jobs = match node_jobs(d, cluster).await {
        Ok(j) => j,
        Err(e) => return super::html::error("the schedd", &e),
    };
    draw(&dag, &jobs)
}

fn read_dag(file: &Path, iwd: &Path) -> Result<Dag, String> {
    andes_dagman::dag::parse_file(file, &andes_dagman::dag::Disk::new(iwd), &Limits::default())
        .map_err(|e| format!("the DAG cannot be read: {e}"))
}

/// Each node's latest job (the highest cluster naming it).
async fn node_jobs(d: &Dash, cluster: i64) -> Result<HashMap<String, ClassAd>, String> {
    let constraint = format!("DAGManJobId == {cluster}");
    let projection: Vec<String> =
        ["ClusterId", "ProcId", "JobStatus", "ExitCode", "DAGNodeName"].map(String::from).into();
    let q = QueryRequest {
        targets: Targets { constraint: Some(constraint.clone()), ..Targets::default() },
        projection: projection.clone(),
        limit: Some(MAX_JOBS),
        mine: false,
        group_by: None,
    };
    let h = HistoryRequest {
        constraint: Some(constraint),
        owners: Vec::new(),
        limit: Some(MAX_JOBS),
        projection,
    };
    let mut all = d.ads("/v1/history", &h).await?;
    all.extend(d.ads("/v1/query", &q).await?);
    let mut latest: HashMap<String, ClassAd> = HashMap::new();
    for a in all {
        let name = string(&a, "DAGNodeName");
        let newer = latest.get(&name).is_none_or(|b| int(b, "ClusterId") <= int(&a, "ClusterId"));
        if !name.is_empty() && newer {
            latest.insert(name, a);
        }
    }
    Ok(latest)
}

/// The graph as SVG (or, past [`MAX_DRAWN`] nodes, counts by state).
pub fn draw(dag: &Dag, jobs: &HashMap<String, ClassAd>) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for n in &dag.nodes {
        let (s, _) = state_of(jobs.get(&n.name));
        match counts.iter_mut().find(|(k, _)| *k == s) {
            Some((_, c)) => *c += 1,
            None => counts.push((s, 1)),
        }
    }
    let mut out = String::from("<p id=\"dag-counts\">");
    let summary: Vec<String> = counts.iter().map(|(s, c)| format!("{c} {s}")).collect();
    let _ = write!(out, "{} nodes: {}</p>", dag.nodes.len(), summary.join(", "));
    if dag.nodes.len() > MAX_DRAWN {
        let _ = write!(
            out,
            "<p class=\"note\">The graph is drawn for DAGs of at most {MAX_DRAWN} nodes.</p>"
        );
        return out;
    }
    // Depth: the longest path from a root (the DAG is acyclic, checked).
    let n = dag.nodes.len();
    let mut depth = vec![0usize; n];
    let mut waiting: Vec<usize> = dag.parents.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    while let Some(i) = ready.pop() {
        for &c in &dag.children[i] {
            let c = c as usize;
            depth[c] = depth[c].max(depth[i] + 1);
            waiting[c] -= 1;
            if waiting[c] == 0 {
                ready.push(c);
            }
        }
    }
    let (w, h, gx, gy) = (130usize, 30usize, 20usize, 40usize);
    let mut row = vec![0usize; n];
    let mut per_depth: HashMap<usize, usize> = HashMap::new();
    for i in 0..n {
        let k = per_depth.entry(depth[i]).or_default();
        row[i] = *k;
        *k += 1;
    }
    let width = per_depth.values().max().copied().unwrap_or(1) * (w + gx) + gx;
    let height = (depth.iter().max().copied().unwrap_or(0) + 1) * (h + gy) + gy;
    let at = |i: usize| (gx + row[i] * (w + gx), gy + depth[i] * (h + gy));
    let _ = write!(
        out,
        "<svg id=\"dag-graph\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" \
         height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    for (p, c) in dag.edges() {
        let ((px, py), (cx, cy)) = (at(p as usize), at(c as usize));
        let _ = write!(
            out,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{cy}\" stroke=\"#888\"/>",
            px + w / 2,
            py + h,
            cx + w / 2
        );
    }
    for (i, node) in dag.nodes.iter().enumerate() {
        let (x, y) = at(i);
        let job = jobs.get(&node.name);
        let (state, fill) = state_of(job);
        let label = esc(&node.name);
        let shape = format!(
            "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" rx=\"6\" fill=\"{fill}\" \
             stroke=\"#444\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{label}</text>\
             <title>{label}: {state}</title>",
            x + w / 2,
            y + h / 2 + 4
        );
        let _ = match job {
            Some(a) => write!(
                out,
                "<a href=\"job/{}.{}\" class=\"dag-node\" data-state=\"{state}\">{shape}</a>",
                int(a, "ClusterId").unwrap_or(0),
                int(a, "ProcId").unwrap_or(0)
            ),
            None => write!(out, "<g class=\"dag-node\" data-state=\"{state}\">{shape}</g>"),
        };
    }
    out.push_str("</svg>");
    out
}
