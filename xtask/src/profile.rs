//! Tidy's check of the test build's profile: what only runs while building
//! (proc-macros, build scripts' dependencies) is compiled unoptimised.
//!
//! The dev profile optimises every dependency (`[profile.dev.package."*"]`,
//! for wasmtime's compiler above all), and cargo gives that glob precedence
//! over `[profile.dev.build-override]`: left alone, `syn`, `serde_derive` and
//! every other proc-macro were optimised too, for macros that run a few
//! milliseconds in a build. Each is named in `[profile.dev.package]` at
//! `opt-level = 0`; this check derives the set from `cargo metadata` and
//! fails when the list misses one or names a package that a shipped program
//! (`andes`, the Python extension) runs, so the list follows the lock file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

/// The workspace packages whose programs are shipped: what they run must
/// never be left unoptimised by the list.
const SHIPPED: &[&str] = &["andes", "andes-python"];

/// One package of the resolved graph.
struct Package {
    name: String,
    version: String,
    proc_macro: bool,
}

/// A package's dependencies: each one's id, with the kinds of the edge
/// (`None` normal, else `"dev"` / `"build"`).
type Edges = Vec<(String, Vec<Option<String>>)>;

/// The resolved graph: packages by id, and each one's dependencies.
struct Graph {
    packages: BTreeMap<String, Package>,
    deps: BTreeMap<String, Edges>,
    members: Vec<String>,
}

impl Graph {
    fn from_metadata(meta: &Value) -> Result<Graph, String> {
        let mut packages = BTreeMap::new();
        for p in meta["packages"].as_array().ok_or("no packages")? {
            let id = p["id"].as_str().ok_or("a package without an id")?.to_string();
            let proc_macro = p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["kind"].as_array().into_iter().flatten().any(|k| k == "proc-macro"));
            packages.insert(
                id,
                Package {
                    name: p["name"].as_str().unwrap_or("").to_string(),
                    version: p["version"].as_str().unwrap_or("").to_string(),
                    proc_macro,
                },
            );
        }
        let mut deps = BTreeMap::new();
        for n in meta["resolve"]["nodes"].as_array().ok_or("no resolved graph")? {
            let id = n["id"].as_str().unwrap_or("").to_string();
            let edges = n["deps"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| {
                    let kinds = d["dep_kinds"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|k| k["kind"].as_str().map(str::to_string))
                        .collect();
                    (d["pkg"].as_str().unwrap_or("").to_string(), kinds)
                })
                .collect();
            deps.insert(id, edges);
        }
        let members = meta["workspace_members"]
            .as_array()
            .ok_or("no workspace members")?
            .iter()
            .filter_map(|m| m.as_str().map(str::to_string))
            .collect();
        Ok(Graph { packages, deps, members })
    }

    /// The packages reached from `roots` by the edges `follow` takes
    /// (given the edge's source, its target and its kinds).
    fn reach(
        &self,
        roots: &[String],
        follow: impl Fn(&str, &str, &[Option<String>]) -> bool,
    ) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<String> = roots.to_vec();
        while let Some(at) = stack.pop() {
            if !seen.insert(at.clone()) {
                continue;
            }
            for (to, kinds) in self.deps.get(&at).into_iter().flatten() {
                if follow(&at, to, kinds) {
                    stack.push(to.clone());
                }
            }
        }
        seen
    }

    fn is_proc_macro(&self, id: &str) -> bool {
        self.packages.get(id).is_some_and(|p| p.proc_macro)
    }

    /// Linked into some target the build makes: reached by normal edges
    /// (and a member's dev edges) without passing through a proc-macro.
    fn linked(&self, roots: &[String], with_dev: bool) -> BTreeSet<String> {
        let members: BTreeSet<&str> = self.members.iter().map(String::as_str).collect();
        self.reach(roots, |from, to, kinds| {
            let normal = kinds.iter().any(Option::is_none);
            let dev = with_dev
                && members.contains(from)
                && kinds.iter().any(|k| k.as_deref() == Some("dev"));
            (normal || dev) && !self.is_proc_macro(to)
        })
    }

    /// What only runs while building: reached from the workspace, not in
    /// `linked` (what its targets link, [`Graph::linked`] from the members).
    fn build_only(&self, linked: &BTreeSet<String>) -> BTreeSet<String> {
        let members: BTreeSet<&str> = self.members.iter().map(String::as_str).collect();
        let all = self.reach(&self.members, |from, _, kinds| {
            kinds.iter().any(|k| k.as_deref() != Some("dev")) || members.contains(from)
        });
        all.difference(linked).cloned().collect()
    }
}

/// The `[profile.dev.package]` entries of the root manifest that set
/// `opt-level = 0`: each a package name.
fn unoptimised_entries(manifest: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[profile.dev.package]";
            continue;
        }
        if !inside || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let value: String = value.chars().filter(|c| !c.is_whitespace()).collect();
        if value.contains("opt-level=0") {
            out.insert(key.trim().trim_matches('"').to_string());
        }
    }
    out
}

/// The check: every build-only package is listed at opt-level 0, and no
/// listed package is one a shipped program links.
pub fn check(root: &Path) -> Vec<String> {
    let graph = match crate::tidy::cargo_metadata(root, &["--locked"])
        .and_then(|m| Graph::from_metadata(&m).map_err(|e| format!("cargo metadata's answer: {e}")))
    {
        Ok(g) => g,
        Err(e) => return vec![e],
    };
    let manifest = match std::fs::read_to_string(root.join("Cargo.toml")) {
        Ok(t) => t,
        Err(e) => return vec![format!("Cargo.toml: {e}")],
    };
    problems(&graph, &unoptimised_entries(&manifest))
}

fn problems(graph: &Graph, listed: &BTreeSet<String>) -> Vec<String> {
    let shipped_roots: Vec<String> = graph
        .members
        .iter()
        .filter(|m| graph.packages.get(*m).is_some_and(|p| SHIPPED.contains(&p.name.as_str())))
        .cloned()
        .collect();
    let shipped = graph.linked(&shipped_roots, false);
    let linked = graph.linked(&graph.members, true);
    let build_only = graph.build_only(&linked);
    let linked_names: BTreeSet<&str> =
        linked.iter().filter_map(|id| graph.packages.get(id).map(|p| p.name.as_str())).collect();
    let mut out = Vec::new();
    for id in &build_only {
        let p = &graph.packages[id];
        // A build-only version of a package linked in another version keeps
        // the glob's level: its name would cover both, and a `name@version`
        // entry makes cargo refuse xtask's builds that name the package too.
        if linked_names.contains(p.name.as_str()) {
            continue;
        }
        if !listed.contains(&p.name) {
            out.push(format!(
                "{} {} only runs while building: list it in Cargo.toml's \
                 [profile.dev.package] at opt-level 0",
                p.name, p.version
            ));
        }
    }
    for entry in listed {
        if entry.contains('@') {
            out.push(format!(
                "Cargo.toml's [profile.dev.package] names `{entry}`: name packages without a \
                 version (cargo refuses two entries matching one package, and xtask's builds \
                 name some by name)"
            ));
            continue;
        }
        let matched: Vec<&String> =
            graph.packages.iter().filter(|(_, p)| p.name == *entry).map(|(id, _)| id).collect();
        if matched.is_empty() {
            out.push(format!(
                "Cargo.toml's [profile.dev.package] names `{entry}` at opt-level 0, which is \
                 in no dependency: take it out"
            ));
        }
        for id in matched {
            if shipped.contains(id) {
                let p = &graph.packages[id];
                out.push(format!(
                    "Cargo.toml's [profile.dev.package] leaves `{entry}` unoptimised, but \
                     {} {} is linked into a shipped program: take it out",
                    p.name, p.version
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &str, Option<&str>)], macros: &[&str], members: &[&str]) -> Graph {
        let mut packages = BTreeMap::new();
        let mut deps: BTreeMap<String, Edges> = BTreeMap::new();
        for (a, b, _) in edges {
            for n in [a, b] {
                let (name, version) = n.split_once('@').unwrap_or((n, "1.0.0"));
                packages.insert(
                    n.to_string(),
                    Package {
                        name: name.into(),
                        version: version.into(),
                        proc_macro: macros.contains(n),
                    },
                );
            }
        }
        for (a, b, kind) in edges {
            deps.entry(a.to_string())
                .or_default()
                .push((b.to_string(), vec![kind.map(str::to_string)]));
        }
        Graph { packages, deps, members: members.iter().map(|m| m.to_string()).collect() }
    }

    fn listed(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// andes uses serde (which uses serde_derive, a macro, which uses syn),
    /// ring (built by cc) and, in its tests, wat; object has one version
    /// linked and one a build script uses.
    fn sample() -> Graph {
        graph(
            &[
                ("andes", "serde", None),
                ("serde", "serde_derive", None),
                ("serde_derive", "syn", None),
                ("andes", "ring", None),
                ("ring", "cc", Some("build")),
                ("andes", "wat", Some("dev")),
                ("andes", "object@0.37.3", None),
                ("ring", "ar@1.0.0", Some("build")),
                ("ar@1.0.0", "object@0.39.1", None),
            ],
            &["serde_derive"],
            &["andes"],
        )
    }

    #[test]
    fn every_package_only_building_runs_must_be_listed() {
        let g = sample();
        let p = problems(&g, &listed(&[]));
        let missing: Vec<&String> =
            p.iter().filter(|m| m.contains("only runs while building")).collect();
        // object 0.39.1 is build-only, but 0.37.3 is linked: it is not asked for.
        assert_eq!(missing.len(), 4, "{p:#?}");
        for name in ["serde_derive", "syn", "cc", "ar"] {
            assert!(missing.iter().any(|m| m.starts_with(name)), "{name}: {p:#?}");
        }
        assert!(problems(&g, &listed(&["serde_derive", "syn", "cc", "ar"])).is_empty());
    }

    #[test]
    fn a_listed_package_a_shipped_program_links_is_refused() {
        let g = sample();
        let all = ["serde_derive", "syn", "cc", "ar"];
        let with = |extra: &str| {
            let mut l = listed(&all);
            l.insert(extra.to_string());
            problems(&g, &l)
        };
        // The name covers the linked object too; a version is refused.
        let p = with("object");
        assert!(
            p.iter().any(|m| m.contains("object 0.37.3 is linked into a shipped program")),
            "{p:#?}"
        );
        let p = with("object@0.39.1");
        assert!(p.iter().any(|m| m.contains("without a version")), "{p:#?}");
        assert!(with("ring").iter().any(|m| m.contains("`ring`")));
        // A test's tool (wat) may be listed; a name in no dependency may not.
        assert!(with("wat").is_empty());
        assert!(with("nothing").iter().any(|m| m.contains("`nothing`")));
    }

    #[test]
    fn the_manifest_entries_are_read_from_the_dev_package_table_only() {
        let manifest = "[profile.dev.package]\n\"*\" = { opt-level = 2 }\nsyn = { opt-level = 0 }\n\
                        \"object@0.39.1\" = { opt-level=0 }\n# x = { opt-level = 0 }\n\
                        [profile.release.package]\nquote = { opt-level = 0 }\n";
        assert_eq!(unoptimised_entries(manifest), listed(&["syn", "object@0.39.1"]));
    }
}
