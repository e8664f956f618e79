//! The DAG checked whole once read: edges without repeats, no cycle, every
//! named submit description defined.

use crate::*;

/// Sorts and dedupes the edges (a repeat is a warning, as DAGMan gives), then
/// refuses a cycle (naming it) and a node whose `SUBMIT-DESCRIPTION` is not
/// declared. A node's submit file that names a declared description becomes
/// [`SubmitSource::Named`].
pub(crate) fn check(dag: &mut Dag) -> Result<(), DagError> {
    for (i, cs) in dag.children.iter_mut().enumerate() {
        let before = cs.len();
        cs.sort_unstable();
        cs.dedup();
        if cs.len() != before {
            let n = &dag.nodes[i];
            dag.warnings.push(DagError {
                place: n.place.clone(),
                message: format!("an edge from {} is given more than once", n.name),
            });
        }
    }
    for ps in &mut dag.parents {
        ps.sort_unstable();
        ps.dedup();
    }
    for n in &mut dag.nodes {
        if let SubmitSource::File(f) = &n.submit
            && n.kind != NodeKind::SubDag
            && let Some(name) = f.to_str()
            && dag.descriptions.contains_key(name)
        {
            n.submit = SubmitSource::Named(name.to_string());
        }
    }
    if let Some(cycle) = find_cycle(dag) {
        // A long cycle is named by its ends.
        const SHOWN: usize = 12;
        let name = |i: &NodeId| dag.nodes[*i as usize].name.as_str();
        let along = if cycle.len() <= SHOWN {
            cycle.iter().map(name).collect::<Vec<_>>().join(" -> ")
        } else {
            let head: Vec<&str> = cycle[..SHOWN / 2].iter().map(name).collect();
            let tail: Vec<&str> = cycle[cycle.len() - SHOWN / 2..].iter().map(name).collect();
            format!(
                "{} -> ... -> {} ({} nodes)",
                head.join(" -> "),
                tail.join(" -> "),
                cycle.len() - 1
            )
        };
        let first = &dag.nodes[cycle[0] as usize];
        return Err(DagError {
            place: first.place.clone(),
            message: format!("the DAG has a cycle: {along}"),
        });
    }
    Ok(())
}

/// A cycle, as the nodes along it (the first repeated at the end), if there
/// is one. Kahn's algorithm removes every node not on or behind a cycle; a
/// walk along the remaining nodes' parents then must come back to one.
fn find_cycle(dag: &Dag) -> Option<Vec<NodeId>> {
    let n = dag.nodes.len();
    let mut waiting: Vec<usize> = dag.parents.iter().map(Vec::len).collect();
    let mut ready: Vec<NodeId> = (0..n as NodeId).filter(|&i| waiting[i as usize] == 0).collect();
    let mut done = 0usize;
    while let Some(i) = ready.pop() {
        done += 1;
        for &c in &dag.children[i as usize] {
            waiting[c as usize] -= 1;
            if waiting[c as usize] == 0 {
                ready.push(c);
            }
        }
    }
    if done == n {
        return None;
    }
    // Every node left has a parent left: walk parents until one repeats.
    let start = (0..n).find(|&i| waiting[i] > 0)? as NodeId;
    let mut seen = vec![usize::MAX; n];
    let mut path = Vec::new();
    let mut at = start;
    loop {
        if seen[at as usize] != usize::MAX {
            let mut cycle = path[seen[at as usize]..].to_vec();
            cycle.reverse();
            cycle.push(cycle[0]);
            return Some(cycle);
        }
        seen[at as usize] = path.len();
        path.push(at);
        at = *dag.parents[at as usize].iter().find(|&&p| waiting[p as usize] > 0)?;
    }
}
