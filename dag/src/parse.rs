//! Reading a DAG input file: its lines (with the files it includes spliced
//! in, and inline submit descriptions gathered), then the two passes.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::*;

/// Where a DAG's files are read from: the disk as the process sees it
/// ([`Disk`]), or whatever the caller lets the DAG's owner read.
pub trait DagFiles {
    /// The file `path` (as the DAG names it), whole, as UTF-8, if it holds at
    /// most `limit` bytes; else what is wrong, naming the file.
    fn read(&self, path: &Path, limit: u64) -> Result<String, String>;
}

/// Files on disk, relative paths taken from a base directory (DAGMan's
/// working directory: where the DAG was submitted, or the DAG file's own
/// directory under `-usedagdir`).
#[derive(Clone, Copy, Debug)]
pub struct Disk<'a> {
    base: &'a Path,
}

impl<'a> Disk<'a> {
    /// Files beneath `base`.
    pub fn new(base: &'a Path) -> Disk<'a> {
        Disk { base }
    }
}

impl DagFiles for Disk<'_> {
    fn read(&self, path: &Path, limit: u64) -> Result<String, String> {
        read_bounded(&self.base.join(path), limit)
    }
}

/// Reads the DAG input file `path` and the files it includes from `files`,
/// and checks the DAG whole.
pub fn parse_file(path: &Path, files: &dyn DagFiles, limits: &Limits) -> Result<Dag, DagError> {
    let at = Place { file: path.to_path_buf(), line: 0 };
    let text =
        files.read(path, limits.file_bytes).map_err(|message| DagError { place: at, message })?;
    parse_str(path, &text, files, limits)
}

/// Parses `text` as the DAG input file named `name` (for places in errors);
/// the files it includes are read from `files`.
pub fn parse_str(
    name: &Path,
    text: &str,
    files: &dyn DagFiles,
    limits: &Limits,
) -> Result<Dag, DagError> {
    parse_at(name, text, files, limits, 0)
}

/// [`parse_str`] of a DAG `depth` splices deep.
fn parse_at(
    name: &Path,
    text: &str,
    source: &dyn DagFiles,
    limits: &Limits,
    depth: usize,
) -> Result<Dag, DagError> {
    let mut lines = Vec::new();
    let mut names = vec![name.to_path_buf()];
    gather(text, 0, source, limits, &mut names, &mut lines, 0)?;
    let files = names;
    let mut p = Parser {
        dag: Dag::default(),
        files,
        limits: *limits,
        edges: 0,
        source,
        depth,
        splices: std::collections::HashMap::new(),
    };
    for l in &lines {
        p.define(l)?;
    }
    for l in &lines {
        p.apply(l)?;
    }
    let Parser { mut dag, .. } = p;
    crate::check::check(&mut dag)?;
    Ok(dag)
}

/// Reads a file of at most `limit` bytes, as UTF-8.
fn read_bounded(path: &Path, limit: u64) -> Result<String, String> {
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    f.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > limit {
        return Err(format!("{} is larger than {limit} bytes", path.display()));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!("{} is not UTF-8 text (byte {})", path.display(), e.utf8_error().valid_up_to())
    })
}

/// One command of the DAG: a line, or a line that opens an inline submit
/// description with the description's lines.
struct Line {
    file: u16,
    line: u32,
    text: String,
    block: Option<String>,
}

/// Splits `text` (file number `file`) into commands, splicing in the files
/// its `INCLUDE`s name (read from `source`), `depth` includes deep.
fn gather(
    text: &str,
    file: u16,
    source: &dyn DagFiles,
    limits: &Limits,
    files: &mut Vec<PathBuf>,
    out: &mut Vec<Line>,
    depth: usize,
) -> Result<(), DagError> {
    let mut it = text.lines().enumerate();
    while let Some((i, first)) = it.next() {
        let line = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let place = || Place { file: files[file as usize].clone(), line };
        let too_long = || DagError {
            place: place(),
            message: format!("the line is longer than {} bytes", limits.line_bytes),
        };
        if first.len() > limits.line_bytes {
            return Err(too_long());
        }
        // A line ending in `\` goes on on the next, as in HTCondor's files
        // (not in a comment, nor in an inline description's body).
        let mut joined = std::borrow::Cow::Borrowed(first);
        while !joined.trim_start().starts_with('#') && joined.trim_end().ends_with('\\') {
            let Some((_, next)) = it.next() else { break };
            let mut s = joined.trim_end().trim_end_matches('\\').to_string();
            s.push(' ');
            s.push_str(next);
            if s.len() > limits.line_bytes {
                return Err(too_long());
            }
            joined = std::borrow::Cow::Owned(s);
        }
        let raw: &str = &joined;
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut words = t.split_whitespace();
        let first = words.next().unwrap_or_default();
        if first.eq_ignore_ascii_case("INCLUDE") {
            let (Some(name), None) = (words.next(), words.next()) else {
                return Err(DagError {
                    place: place(),
                    message: "INCLUDE takes one file name".into(),
                });
            };
            if depth + 1 > limits.include_depth {
                return Err(DagError {
                    place: place(),
                    message: format!(
                        "INCLUDE nested more than {} deep (does a file include itself?)",
                        limits.include_depth
                    ),
                });
            }
            let included = source
                .read(Path::new(name), limits.file_bytes)
                .map_err(|message| DagError { place: place(), message })?;
            let n = u16::try_from(files.len()).map_err(|_| DagError {
                place: place(),
                message: "more than 65,535 included files".into(),
            })?;
            files.push(PathBuf::from(name));
            gather(&included, n, source, limits, files, out, depth + 1)?;
            continue;
        }
        // An inline submit description: `JOB A {`, `FINAL F {`,
        // `SUBMIT-DESCRIPTION D {`, up to a line that is `}`.
        // `SUBDAG EXTERNAL S {` is gathered too, so that its refusal says why.
        let opens = t.ends_with('{') && DEFINING.contains(&first.to_ascii_uppercase().as_str());
        if opens {
            let head = t[..t.len() - 1].trim_end().to_string();
            let mut block = String::new();
            let mut closed = false;
            for (_, body) in it.by_ref() {
                if body.trim() == "}" {
                    closed = true;
                    break;
                }
                if block.len() + body.len() + 1 > limits.inline_bytes {
                    return Err(DagError {
                        place: place(),
                        message: format!(
                            "the inline submit description is longer than {} bytes",
                            limits.inline_bytes
                        ),
                    });
                }
                block.push_str(body);
                block.push('\n');
            }
            if !closed {
                return Err(DagError {
                    place: place(),
                    message: "the inline submit description opened here has no closing `}`".into(),
                });
            }
            out.push(Line { file, line, text: head, block: Some(block) });
            continue;
        }
        out.push(Line { file, line, text: t.to_string(), block: None });
    }
    Ok(())
}

struct Parser<'s> {
    dag: Dag,
    files: Vec<PathBuf>,
    limits: Limits,
    /// Edges given so far (repeats counted: they are kept until the check).
    edges: usize,
    /// Where files are read (a splice's DAG file among them).
    source: &'s dyn DagFiles,
    /// Splices deep.
    depth: usize,
    /// Each splice, by name.
    splices: std::collections::HashMap<String, Spliced>,
}

/// A splice as the DAG that holds it sees it.
struct Spliced {
    /// Its nodes without parents (what a PARENT naming it leads to).
    first: Vec<NodeId>,
    /// Its nodes without children (what a CHILD naming it follows).
    last: Vec<NodeId>,
    /// The nodes on each PIN_IN, pin 1 first.
    pins_in: Vec<Vec<NodeId>>,
    /// The nodes on each PIN_OUT, pin 1 first.
    pins_out: Vec<Vec<NodeId>>,
}

/// The files beneath a splice's `DIR`.
struct Under<'a> {
    outer: &'a dyn DagFiles,
    dir: PathBuf,
}

impl DagFiles for Under<'_> {
    fn read(&self, path: &Path, limit: u64) -> Result<String, String> {
        self.outer.read(&self.dir.join(path), limit)
    }
}

/// The commands that define nodes (the first pass), and those it skips.
const DEFINING: &[&str] =
    &["JOB", "FINAL", "SUBDAG", "SERVICE", "PROVISIONER", "SUBMIT-DESCRIPTION", "SPLICE"];

impl Parser<'_> {
    fn place(&self, l: &Line) -> Place {
        Place { file: self.files[l.file as usize].clone(), line: l.line }
    }

    fn err<T>(&self, l: &Line, message: impl Into<String>) -> Result<T, DagError> {
        Err(DagError { place: self.place(l), message: message.into() })
    }

    /// The first pass: a line that defines a node or a submit description.
    fn define(&mut self, l: &Line) -> Result<(), DagError> {
        let words: Vec<&str> = l.text.split_whitespace().collect();
        let key = words[0].to_ascii_uppercase();
        if !DEFINING.contains(&key.as_str()) {
            return Ok(());
        }
        if key == "SPLICE" {
            return self.splice(l, &words);
        }
        if key == "SUBMIT-DESCRIPTION" {
            let (Some(name), None) = (words.get(1), words.get(2)) else {
                return self.err(l, "SUBMIT-DESCRIPTION takes a name and a `{ ... }` description");
            };
            let Some(text) = l.block.clone() else {
                return self.err(l, "SUBMIT-DESCRIPTION needs its description in `{ ... }`");
            };
            let d = InlineSubmit { text, place: self.place(l) };
            if self.dag.descriptions.insert(name.to_string(), d).is_some() {
                return self.err(l, format!("submit description {name} is defined twice"));
            }
            return Ok(());
        }
        let (kind, rest) = match key.as_str() {
            "JOB" => (NodeKind::Job, &words[1..]),
            "FINAL" => (NodeKind::Final, &words[1..]),
            "SERVICE" => (NodeKind::Service, &words[1..]),
            "PROVISIONER" => (NodeKind::Provisioner, &words[1..]),
            _ => {
                // SUBDAG EXTERNAL name file ...
                if !words.get(1).is_some_and(|w| w.eq_ignore_ascii_case("EXTERNAL")) {
                    return self.err(l, "SUBDAG must be SUBDAG EXTERNAL name dag_file");
                }
                (NodeKind::SubDag, &words[2..])
            }
        };
        let Some(name) = rest.first() else {
            return self.err(l, format!("{key} needs a node name"));
        };
        self.check_name(l, name)?;
        if l.block.is_some() && kind == NodeKind::SubDag {
            return self.err(l, "a sub-DAG is a DAG file, not an inline submit description");
        }
        let (submit, opts) = match &l.block {
            Some(text) => (
                SubmitSource::Inline(InlineSubmit { text: text.clone(), place: self.place(l) }),
                &rest[1..],
            ),
            _ => {
                let Some(file) = rest.get(1) else {
                    return self.err(l, format!("{key} {name} needs a submit description (a file, a SUBMIT-DESCRIPTION's name, or `{{ ... }}`)"));
                };
                (SubmitSource::File(PathBuf::from(file)), &rest[2..])
            }
        };
        let mut node = Node {
            name: name.to_string(),
            kind,
            submit,
            dir: None,
            noop: false,
            done: false,
            retry: None,
            vars: Vec::new(),
            pre: None,
            post: None,
            hold: None,
            pre_skip: None,
            priority: 0,
            category: None,
            abort_on: None,
            save_point: None,
            place: self.place(l),
        };
        let mut i = 0;
        while i < opts.len() {
            let o = opts[i].to_ascii_uppercase();
            match o.as_str() {
                "DIR" => {
                    let Some(d) = opts.get(i + 1) else {
                        return self.err(l, "DIR needs a directory");
                    };
                    node.dir = Some(PathBuf::from(d));
                    i += 2;
                    continue;
                }
                "NOOP" => node.noop = true,
                "DONE" if kind != NodeKind::Final => node.done = true,
                _ => {
                    return self.err(
                        l,
                        format!(
                            "`{}` is not an option of {key} (DIR directory, NOOP, DONE)",
                            opts[i]
                        ),
                    );
                }
            }
            i += 1;
        }
        if kind == NodeKind::Final {
            if let Some(f) = self.dag.final_node {
                let other = &self.dag.nodes[f as usize];
                return self.err(
                    l,
                    format!(
                        "a second FINAL node ({name}); {} at {} is the first",
                        other.name, other.place
                    ),
                );
            }
            self.dag.final_node = Some(self.dag.nodes.len() as NodeId);
        }
        if kind == NodeKind::Provisioner
            && let Some(p) = self.dag.nodes.iter().find(|n| n.kind == NodeKind::Provisioner)
        {
            return self.err(
                l,
                format!("a second PROVISIONER node; {} at {} is the first", p.name, p.place),
            );
        }
        if let Some(&was) = self.dag.by_name.get(*name) {
            let was = &self.dag.nodes[was as usize].place;
            return self.err(l, format!("node {name} is defined twice (first at {was})"));
        }
        if self.dag.nodes.len() >= self.limits.nodes {
            return self.err(l, format!("more than {} nodes", self.limits.nodes));
        }
        let id = self.dag.nodes.len() as NodeId;
        self.dag.by_name.insert(name.to_string(), id);
        self.dag.nodes.push(node);
        self.dag.children.push(Vec::new());
        self.dag.parents.push(Vec::new());
        Ok(())
    }

    /// A node name as DAGMan allows it: no `.` or `+` (the names of splices'
    /// nodes are scoped with them), not PARENT, CHILD or ALL_NODES.
    fn check_name(&self, l: &Line, name: &str) -> Result<(), DagError> {
        if name.contains(['.', '+']) {
            return self.err(
                l,
                format!(
                    "node name {name}: `.` and `+` are reserved (splices scope names with them)"
                ),
            );
        }
        for reserved in ["PARENT", "CHILD", "ALL_NODES"] {
            if name.eq_ignore_ascii_case(reserved) {
                return self.err(l, format!("{name} is a keyword, not a node name"));
            }
        }
        Ok(())
    }

    /// The nodes a command names: one, or `ALL_NODES` (every node but the FINAL one).
    fn targets(&self, l: &Line, name: &str) -> Result<Vec<NodeId>, DagError> {
        if name.eq_ignore_ascii_case("ALL_NODES") {
            return Ok((0..self.dag.nodes.len() as NodeId)
                .filter(|&i| Some(i) != self.dag.final_node)
                .collect());
        }
        Ok(vec![self.id(l, name)?])
    }

    /// [`Self::targets`] for a command the FINAL node takes no part in
    /// (RETRY, ABORT-DAG-ON, PRIORITY, CATEGORY): naming it is refused.
    fn not_final(&self, l: &Line, key: &str, name: &str) -> Result<Vec<NodeId>, DagError> {
        let ids = self.targets(l, name)?;
        if let [id] = ids[..]
            && Some(id) == self.dag.final_node
        {
            return self.err(l, format!("{name} is the FINAL node, which takes no {key}"));
        }
        Ok(ids)
    }

    fn id(&self, l: &Line, name: &str) -> Result<NodeId, DagError> {
        match self.dag.by_name.get(name) {
            Some(&i) => Ok(i),
            None => self.err(l, format!("no node is named {name}")),
        }
    }

    fn int<T: std::str::FromStr>(
        &self,
        l: &Line,
        what: &str,
        word: Option<&&str>,
    ) -> Result<T, DagError> {
        match word.map(|w| w.parse::<T>()) {
            Some(Ok(v)) => Ok(v),
            Some(Err(_)) => {
                self.err(l, format!("{what}: `{}` is not a number in range", word.unwrap_or(&"")))
            }
            None => self.err(l, format!("{what} is missing")),
        }
    }

    /// An optional `KEYWORD value` ending a command at `words[at]` (RETRY's
    /// `UNLESS-EXIT`, ABORT-DAG-ON's `RETURN`), and nothing after it.
    fn optional_tail<T: std::str::FromStr>(
        &self,
        l: &Line,
        words: &[&str],
        at: usize,
        keyword: &str,
        what: &str,
        usage: &str,
    ) -> Result<Option<T>, DagError> {
        match words.get(at) {
            None => Ok(None),
            Some(w) if w.eq_ignore_ascii_case(keyword) => {
                let v = self.int(l, what, words.get(at + 1))?;
                self.no_more(l, words, at + 2, usage)?;
                Ok(Some(v))
            }
            Some(w) => self.err(l, format!("unexpected `{w}`; the form is {usage}")),
        }
    }

    fn no_more(&self, l: &Line, words: &[&str], from: usize, usage: &str) -> Result<(), DagError> {
        match words.get(from) {
            None => Ok(()),
            Some(w) => self.err(l, format!("unexpected `{w}`; the form is {usage}")),
        }
    }

    /// The second pass: every other command, in file order.
    fn apply(&mut self, l: &Line) -> Result<(), DagError> {
        let words: Vec<&str> = l.text.split_whitespace().collect();
        let key = words[0].to_ascii_uppercase();
        match key.as_str() {
            k if DEFINING.contains(&k) => Ok(()),
            "PARENT" => self.parent_child(l, &words),
            "DONE" => {
                self.no_more(l, &words, 2, "DONE node")?;
                let Some(name) = words.get(1) else { return self.err(l, "DONE needs a node name") };
                let id = self.id(l, name)?;
                self.dag.nodes[id as usize].done = true;
                Ok(())
            }
            "RETRY" => {
                const USAGE: &str = "RETRY node|ALL_NODES times [UNLESS-EXIT value]";
                let Some(name) = words.get(1) else { return self.err(l, USAGE) };
                let times: u32 = self.int(l, "RETRY's count", words.get(2))?;
                let unless_exit =
                    self.optional_tail(l, &words, 3, "UNLESS-EXIT", "UNLESS-EXIT's value", USAGE)?;
                for id in self.not_final(l, "RETRY", name)? {
                    self.dag.nodes[id as usize].retry = Some(Retry { times, unless_exit });
                }
                Ok(())
            }
            "VARS" => self.vars(l),
            "SCRIPT" => self.script(l, &words),
            "PRE_SKIP" => {
                const USAGE: &str = "PRE_SKIP node|ALL_NODES exit_code";
                let Some(name) = words.get(1) else { return self.err(l, USAGE) };
                let code: i32 = self.int(l, "PRE_SKIP's exit code", words.get(2))?;
                if code == 0 {
                    return self.err(
                        l,
                        "PRE_SKIP's exit code must not be 0 (0 is the PRE script's success)",
                    );
                }
                self.no_more(l, &words, 3, USAGE)?;
                for id in self.targets(l, name)? {
                    self.dag.nodes[id as usize].pre_skip = Some(code);
                }
                Ok(())
            }
            "PRIORITY" => {
                const USAGE: &str = "PRIORITY node|ALL_NODES value";
                let Some(name) = words.get(1) else { return self.err(l, USAGE) };
                let v: i64 = self.int(l, "PRIORITY's value", words.get(2))?;
                self.no_more(l, &words, 3, USAGE)?;
                for id in self.not_final(l, "PRIORITY", name)? {
                    self.dag.nodes[id as usize].priority = v;
                }
                Ok(())
            }
            "CATEGORY" => {
                const USAGE: &str = "CATEGORY node|ALL_NODES category";
                let (Some(name), Some(cat)) = (words.get(1), words.get(2)) else {
                    return self.err(l, USAGE);
                };
                self.no_more(l, &words, 3, USAGE)?;
                for id in self.not_final(l, "CATEGORY", name)? {
                    self.dag.nodes[id as usize].category = Some(cat.to_string());
                }
                Ok(())
            }
            "MAXJOBS" => {
                const USAGE: &str = "MAXJOBS category limit";
                let Some(cat) = words.get(1) else { return self.err(l, USAGE) };
                let n: u32 = self.int(l, "MAXJOBS's limit", words.get(2))?;
                self.no_more(l, &words, 3, USAGE)?;
                self.dag.max_jobs.insert(cat.to_string(), n);
                Ok(())
            }
            "ABORT-DAG-ON" => {
                const USAGE: &str = "ABORT-DAG-ON node|ALL_NODES exit_value [RETURN dag_return]";
                let Some(name) = words.get(1) else { return self.err(l, USAGE) };
                let exit: i32 = self.int(l, "ABORT-DAG-ON's exit value", words.get(2))?;
                let dag_return = self.optional_tail::<u8>(
                    l,
                    &words,
                    3,
                    "RETURN",
                    "RETURN's value (0 to 255)",
                    USAGE,
                )?;
                for id in self.not_final(l, "ABORT-DAG-ON", name)? {
                    self.dag.nodes[id as usize].abort_on = Some(AbortOn { exit, dag_return });
                }
                Ok(())
            }
            "CONFIG" => {
                let (Some(file), None) = (words.get(1), words.get(2)) else {
                    return self.err(l, "CONFIG takes one file name");
                };
                if let Some((was, at)) = &self.dag.config
                    && was != &PathBuf::from(file)
                {
                    return self.err(
                        l,
                        format!("a second CONFIG file; {} at {at} is the first", was.display()),
                    );
                }
                self.dag.config = Some((PathBuf::from(file), self.place(l)));
                Ok(())
            }
            "SET_JOB_ATTR" => {
                let rest = l.text[words[0].len()..].trim();
                let Some((name, value)) = rest.split_once('=') else {
                    return self.err(l, "SET_JOB_ATTR takes name = value");
                };
                let (name, value) = (name.trim(), value.trim());
                if name.is_empty()
                    || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    || name.starts_with(|c: char| c.is_ascii_digit())
                {
                    return self.err(l, format!("SET_JOB_ATTR: `{name}` is not an attribute name"));
                }
                if value.is_empty() {
                    return self.err(l, format!("SET_JOB_ATTR {name}: the value is missing"));
                }
                self.dag.set_job_attrs.push((name.to_string(), value.to_string()));
                Ok(())
            }
            "ENV" => self.env(l, &words),
            "DOT" => {
                let Some(file) = words.get(1) else { return self.err(l, "DOT needs a file name") };
                let mut dot = Dot {
                    file: PathBuf::from(file),
                    update: false,
                    overwrite: true,
                    include: None,
                };
                let mut i = 2;
                while let Some(w) = words.get(i) {
                    match w.to_ascii_uppercase().as_str() {
                        "UPDATE" => dot.update = true,
                        "DONT-UPDATE" => dot.update = false,
                        "OVERWRITE" => dot.overwrite = true,
                        "DONT-OVERWRITE" => dot.overwrite = false,
                        "INCLUDE" => {
                            let Some(h) = words.get(i + 1) else {
                                return self.err(l, "DOT ... INCLUDE needs a file name");
                            };
                            dot.include = Some(PathBuf::from(h));
                            i += 1;
                        }
                        _ => {
                            return self.err(l, format!("`{w}` is not an option of DOT (UPDATE, DONT-UPDATE, OVERWRITE, DONT-OVERWRITE, INCLUDE file)"));
                        }
                    }
                    i += 1;
                }
                self.dag.dot = Some(dot);
                Ok(())
            }
            "NODE_STATUS_FILE" => {
                const USAGE: &str = "NODE_STATUS_FILE file [min_update_seconds] [ALWAYS-UPDATE]";
                let Some(file) = words.get(1) else { return self.err(l, USAGE) };
                let mut st = NodeStatusFile {
                    file: PathBuf::from(file),
                    min_update_secs: 60,
                    always_update: false,
                };
                let mut i = 2;
                if let Some(w) = words.get(i)
                    && !w.eq_ignore_ascii_case("ALWAYS-UPDATE")
                {
                    st.min_update_secs =
                        self.int(l, "NODE_STATUS_FILE's update time", words.get(i))?;
                    i += 1;
                }
                if let Some(w) = words.get(i)
                    && w.eq_ignore_ascii_case("ALWAYS-UPDATE")
                {
                    st.always_update = true;
                    i += 1;
                }
                self.no_more(l, &words, i, USAGE)?;
                self.dag.node_status = Some(st);
                Ok(())
            }
            "JOBSTATE_LOG" => {
                let (Some(file), None) = (words.get(1), words.get(2)) else {
                    return self.err(l, "JOBSTATE_LOG takes one file name");
                };
                self.dag.jobstate_log = Some(PathBuf::from(file));
                Ok(())
            }
            "SAVE_POINT_FILE" => {
                const USAGE: &str = "SAVE_POINT_FILE node [file]";
                let Some(name) = words.get(1) else { return self.err(l, USAGE) };
                self.no_more(l, &words, 3, USAGE)?;
                let id = self.id(l, name)?;
                let file = words
                    .get(2)
                    .map_or_else(|| PathBuf::from(format!("{name}.save")), PathBuf::from);
                self.dag.nodes[id as usize].save_point = Some(file);
                Ok(())
            }
            "REJECT" => {
                self.no_more(l, &words, 1, "REJECT")?;
                self.dag.rejected = Some(self.place(l));
                Ok(())
            }
            "PIN_IN" | "PIN_OUT" => {
                let usage = format!("{key} node pin_number");
                let (Some(name), Some(_)) = (words.get(1), words.get(2)) else {
                    return self.err(l, format!("the form is {usage}"));
                };
                self.no_more(l, &words, 3, &usage)?;
                let number: u32 = self.int(l, "the pin's number", words.get(2))?;
                if number == 0 || number as usize > self.limits.nodes {
                    return self.err(
                        l,
                        format!("pins are numbered from 1 to {}: not {number}", self.limits.nodes),
                    );
                }
                let node = self.linkable(l, name)?;
                let place = self.place(l);
                self.dag.pins.push(Pin { out: key == "PIN_OUT", number, node, place });
                Ok(())
            }
            "CONNECT" => self.connect(l, &words),
            "CHILD" => self
                .err(l, "CHILD without PARENT: the form is PARENT p1 [p2 ...] CHILD c1 [c2 ...]"),
            _ => self.err(l, format!("`{}` is not a command of the DAG language", words[0])),
        }
    }

    /// `PARENT p1 [p2 ...] CHILD c1 [c2 ...]`: every child after every parent.
    fn parent_child(&mut self, l: &Line, words: &[&str]) -> Result<(), DagError> {
        const USAGE: &str = "PARENT p1 [p2 ...] CHILD c1 [c2 ...]";
        let Some(at) = words.iter().position(|w| w.eq_ignore_ascii_case("CHILD")) else {
            return self.err(l, format!("PARENT without CHILD: the form is {USAGE}"));
        };
        let (parents, children) = (&words[1..at], &words[at + 1..]);
        if parents.is_empty() || children.is_empty() {
            return self.err(
                l,
                format!("PARENT and CHILD each need at least one node: the form is {USAGE}"),
            );
        }
        // A splice as a parent is its last nodes; as a child, its first.
        let mut ps: Vec<NodeId> = Vec::new();
        for n in parents {
            match self.splices.get(*n) {
                Some(s) => ps.extend(&s.last),
                None => ps.push(self.linkable(l, n)?),
            }
        }
        let mut cs: Vec<NodeId> = Vec::new();
        for n in children {
            match self.splices.get(*n) {
                Some(s) => cs.extend(&s.first),
                None => cs.push(self.linkable(l, n)?),
            }
        }
        self.link(l, &ps, &cs)
    }

    /// `CONNECT out in`: each PIN_OUT of splice `out` joined to the PIN_IN of
    /// splice `in` with its number, every node on the one a parent of every
    /// node on the other.
    fn connect(&mut self, l: &Line, words: &[&str]) -> Result<(), DagError> {
        const USAGE: &str = "CONNECT output_splice input_splice";
        let (Some(out), Some(inp)) = (words.get(1), words.get(2)) else {
            return self.err(l, format!("the form is {USAGE}"));
        };
        self.no_more(l, words, 3, USAGE)?;
        let splice = |name: &str| {
            self.splices.get(name).ok_or_else(|| DagError {
                place: self.place(l),
                message: format!(
                    "CONNECT joins two splices: {name} is not a splice (a node or a sub-DAG \
                     is joined with PARENT ... CHILD)"
                ),
            })
        };
        let (o, i) = (splice(out)?, splice(inp)?);
        // Only the sides joined are checked, as HTCondor does: the output
        // splice's PIN_OUTs and the input splice's PIN_INs.
        for (name, kind, pins) in [(out, "PIN_OUT", &o.pins_out), (inp, "PIN_IN", &i.pins_in)] {
            if let Some(gap) = pins.iter().position(Vec::is_empty) {
                return self.err(
                    l,
                    format!(
                        "splice {name} has {kind} {} but no {kind} {}: pins are numbered from 1 \
                         without gaps",
                        pins.len(),
                        gap + 1
                    ),
                );
            }
        }
        if o.pins_out.len() != i.pins_in.len() {
            return self.err(
                l,
                format!(
                    "splice {out} has {} PIN_OUT(s) and splice {inp} {} PIN_IN(s): they must match",
                    o.pins_out.len(),
                    i.pins_in.len()
                ),
            );
        }
        if let Some(&loose) = i.first.iter().find(|n| !i.pins_in.iter().any(|p| p.contains(n))) {
            let name = &self.dag.nodes[loose as usize].name;
            return self.err(
                l,
                format!(
                    "node {name} begins splice {inp} but is on none of its PIN_INs: every \
                     first node of a CONNECTed input splice must be"
                ),
            );
        }
        let pairs: Vec<(Vec<NodeId>, Vec<NodeId>)> =
            o.pins_out.iter().cloned().zip(i.pins_in.iter().cloned()).collect();
        for (parents, children) in pairs {
            self.link(l, &parents, &children)?;
        }
        Ok(())
    }

    /// Every node of `children` after every node of `parents`.
    fn link(&mut self, l: &Line, parents: &[NodeId], children: &[NodeId]) -> Result<(), DagError> {
        let adding = parents.len().saturating_mul(children.len());
        if self.edges.saturating_add(adding) > self.limits.edges {
            return self.err(l, format!("more than {} edges", self.limits.edges));
        }
        self.edges += adding;
        for &p in parents {
            for &c in children {
                if p == c {
                    let name = &self.dag.nodes[p as usize].name;
                    return self.err(l, format!("node {name} is its own parent (a cycle)"));
                }
                self.dag.children[p as usize].push(c);
                self.dag.parents[c as usize].push(p);
            }
        }
        Ok(())
    }

    /// `SPLICE name file [DIR dir]`: the DAG in `file` (read beneath `dir`),
    /// its nodes added as `name+node` (their DIR beneath `dir`, their
    /// categories scoped to the splice unless named `+category`), its edges
    /// kept. A PARENT or CHILD naming the splice means its last or first
    /// nodes. A splice holds nodes and what they do, not what is the whole
    /// DAG's (FINAL, PROVISIONER, CONFIG, DOT, NODE_STATUS_FILE,
    /// JOBSTATE_LOG, SET_JOB_ATTR, ENV, REJECT): those are refused.
    fn splice(&mut self, l: &Line, words: &[&str]) -> Result<(), DagError> {
        const USAGE: &str = "SPLICE name dag_file [DIR directory]";
        let (Some(name), Some(file)) = (words.get(1), words.get(2)) else {
            return self.err(l, format!("the form is {USAGE}"));
        };
        let dir = match (words.get(3), words.get(4), words.get(5)) {
            (None, _, _) => None,
            (Some(d), Some(dir), None) if d.eq_ignore_ascii_case("DIR") => Some(PathBuf::from(dir)),
            _ => return self.err(l, format!("the form is {USAGE}")),
        };
        if l.block.is_some() {
            return self.err(l, "a splice is a DAG file, not an inline description");
        }
        self.check_name(l, name)?;
        if self.dag.by_name.contains_key(*name) || self.splices.contains_key(*name) {
            return self.err(l, format!("{name} names a node or a splice already"));
        }
        if self.depth + 1 > self.limits.include_depth {
            return self.err(
                l,
                format!(
                    "splices nested more than {} deep (does a splice splice itself?)",
                    self.limits.include_depth
                ),
            );
        }
        let under = Under { outer: self.source, dir: dir.clone().unwrap_or_default() };
        let path = PathBuf::from(file);
        let text = under
            .read(&path, self.limits.file_bytes)
            .map_err(|message| DagError { place: self.place(l), message })?;
        let shown = dir.as_ref().map_or(path.clone(), |d| d.join(&path));
        let inner = parse_at(&shown, &text, &under, &self.limits, self.depth + 1)?;
        let whole = [
            (inner.final_node.is_some(), "a FINAL node"),
            (inner.nodes.iter().any(|n| n.kind == NodeKind::Provisioner), "a PROVISIONER node"),
            (inner.config.is_some(), "CONFIG"),
            (inner.dot.is_some(), "DOT"),
            (inner.node_status.is_some(), "NODE_STATUS_FILE"),
            (inner.jobstate_log.is_some(), "JOBSTATE_LOG"),
            (!inner.set_job_attrs.is_empty(), "SET_JOB_ATTR"),
            (!inner.env.is_empty(), "ENV"),
            (inner.rejected.is_some(), "REJECT"),
        ];
        if let Some((_, what)) = whole.iter().find(|(has, _)| *has) {
            return self.err(
                l,
                format!("splice {name} ({file}) holds {what}, which only the whole DAG may have"),
            );
        }
        let scoped_category = |c: &str| match c.strip_prefix('+') {
            Some(global) => global.to_string(),
            None => format!("{name}+{c}"),
        };
        if self.dag.nodes.len().saturating_add(inner.nodes.len()) > self.limits.nodes {
            return self.err(l, format!("more than {} nodes", self.limits.nodes));
        }
        let added = inner.edge_count();
        if self.edges.saturating_add(added) > self.limits.edges {
            return self.err(l, format!("more than {} edges", self.limits.edges));
        }
        let base = self.dag.nodes.len() as NodeId;
        for mut n in inner.nodes {
            n.name = format!("{name}+{}", n.name);
            if let Some(d) = &dir {
                n.dir = Some(match &n.dir {
                    Some(own) => d.join(own),
                    None => d.clone(),
                });
            }
            n.category = n.category.as_deref().map(scoped_category);
            if let SubmitSource::Named(d) = &n.submit {
                n.submit = SubmitSource::Named(format!("{name}+{d}"));
            }
            if let Some(&was) = self.dag.by_name.get(&n.name) {
                let was = &self.dag.nodes[was as usize].place;
                return self.err(l, format!("node {} is defined twice (first at {was})", n.name));
            }
            let id = self.dag.nodes.len() as NodeId;
            self.dag.by_name.insert(n.name.clone(), id);
            self.dag.nodes.push(n);
            self.dag.children.push(Vec::new());
            self.dag.parents.push(Vec::new());
        }
        let count = self.dag.nodes.len() as NodeId - base;
        let mut first = Vec::new();
        let mut last = Vec::new();
        for i in 0..count {
            let (id, inner_id) = (base + i, i as usize);
            self.dag.children[id as usize] =
                inner.children[inner_id].iter().map(|c| base + c).collect();
            self.dag.parents[id as usize] =
                inner.parents[inner_id].iter().map(|p| base + p).collect();
            // SERVICE nodes run beside the splice: no edge reaches them.
            if !matches!(self.dag.nodes[id as usize].kind, NodeKind::Job | NodeKind::SubDag) {
                continue;
            }
            if inner.parents[inner_id].is_empty() {
                first.push(id);
            }
            if inner.children[inner_id].is_empty() {
                last.push(id);
            }
        }
        self.edges += added;
        for (d, text) in inner.descriptions {
            self.dag.descriptions.insert(format!("{name}+{d}"), text);
        }
        for (c, n) in inner.max_jobs {
            self.dag.max_jobs.insert(scoped_category(&c), n);
        }
        self.dag.warnings.extend(inner.warnings);
        let mut pins = [Vec::new(), Vec::new()];
        for pin in &inner.pins {
            let list: &mut Vec<Vec<NodeId>> = &mut pins[usize::from(pin.out)];
            if list.len() < pin.number as usize {
                list.resize(pin.number as usize, Vec::new());
            }
            list[pin.number as usize - 1].push(base + pin.node);
        }
        let [pins_in, pins_out] = pins;
        self.splices.insert(name.to_string(), Spliced { first, last, pins_in, pins_out });
        Ok(())
    }

    /// A node an edge may touch: not FINAL, SERVICE or PROVISIONER.
    fn linkable(&self, l: &Line, name: &str) -> Result<NodeId, DagError> {
        let id = self.id(l, name)?;
        let kind = self.dag.nodes[id as usize].kind;
        let what = match kind {
            NodeKind::Final => "a FINAL node, which runs after all the others",
            NodeKind::Service => "a SERVICE node, which runs beside the DAG",
            NodeKind::Provisioner => "a PROVISIONER node, which runs before all the others",
            NodeKind::Job | NodeKind::SubDag => return Ok(id),
        };
        self.err(l, format!("{name} is {what}: it has no PARENT or CHILD"))
    }

    /// `VARS node|ALL_NODES [PREPEND|APPEND] name="value" ...`.
    fn vars(&mut self, l: &Line) -> Result<(), DagError> {
        const USAGE: &str = "VARS node|ALL_NODES [PREPEND|APPEND] name=\"value\" ...";
        let text = l.text.as_str();
        let mut rest = text[text.find(char::is_whitespace).unwrap_or(text.len())..].trim_start();
        let (name, after) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if name.is_empty() {
            return self.err(l, USAGE);
        }
        let targets = self.targets(l, name)?;
        rest = after.trim_start();
        let mut at = VarsAt::Default;
        if let Some((w, after)) = rest.split_once(char::is_whitespace) {
            if w.eq_ignore_ascii_case("PREPEND") {
                at = VarsAt::Prepend;
                rest = after.trim_start();
            } else if w.eq_ignore_ascii_case("APPEND") {
                at = VarsAt::Append;
                rest = after.trim_start();
            }
        }
        let mut vars = Vec::new();
        while !rest.is_empty() {
            let Some(eq) = rest.find('=') else {
                return self.err(l, format!("`{rest}` is not name=\"value\": the form is {USAGE}"));
            };
            let var = rest[..eq].trim_end();
            let plain = var.strip_prefix('+').or_else(|| {
                var.get(..3).filter(|p| p.eq_ignore_ascii_case("My.")).map(|_| &var[3..])
            });
            let bare = plain.unwrap_or(var);
            if bare.is_empty() || !bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return self.err(
                    l,
                    format!(
                        "VARS: `{var}` is not a macro name (letters, digits, _; or My.attr / +attr)"
                    ),
                );
            }
            if plain.is_none() && var.len() >= 5 && var[..5].eq_ignore_ascii_case("queue") {
                return self
                    .err(l, format!("VARS: a macro name may not begin with `queue` ({var})"));
            }
            let after_eq = rest[eq + 1..].trim_start();
            let Some(body) = after_eq.strip_prefix('"') else {
                return self.err(l, format!("VARS {var}: the value must be in double quotes"));
            };
            let mut value = String::new();
            let mut chars = body.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, '"')) => value.push('"'),
                        Some((_, '\\')) => value.push('\\'),
                        Some((_, other)) => {
                            value.push('\\');
                            value.push(other);
                        }
                        None => value.push('\\'),
                    },
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let Some(end) = end else {
                return self.err(l, format!("VARS {var}: the value's closing quote is missing"));
            };
            vars.push(Var { name: var.to_string(), value, at });
            rest = body[end + 1..].trim_start();
        }
        if vars.is_empty() {
            return self.err(l, format!("VARS {name} defines nothing: the form is {USAGE}"));
        }
        for id in targets {
            let node = &mut self.dag.nodes[id as usize];
            for v in &vars {
                if node.vars.iter().any(|w| w.name == v.name) {
                    self.dag.warnings.push(DagError {
                        place: Place { file: self.files[l.file as usize].clone(), line: l.line },
                        message: format!("VAR {} is already defined in job {}", v.name, node.name),
                    });
                }
                node.vars.push(v.clone());
            }
        }
        Ok(())
    }

    /// `SCRIPT [DEFER status time] [DEBUG file type] PRE|POST|HOLD node|ALL_NODES program [args]`.
    fn script(&mut self, l: &Line, words: &[&str]) -> Result<(), DagError> {
        const USAGE: &str = "SCRIPT [DEFER status time] [DEBUG file STDOUT|STDERR|ALL] PRE|POST|HOLD node|ALL_NODES program [arguments]";
        let mut i = 1;
        let mut defer = None;
        let mut debug = None;
        if words.get(i).is_some_and(|w| w.eq_ignore_ascii_case("DEFER")) {
            let status: i32 = self.int(l, "DEFER's status", words.get(i + 1))?;
            let time: u64 = self.int(l, "DEFER's time", words.get(i + 2))?;
            defer = Some((status, time));
            i += 3;
        }
        if words.get(i).is_some_and(|w| w.eq_ignore_ascii_case("DEBUG")) {
            let (Some(file), Some(kind)) = (words.get(i + 1), words.get(i + 2)) else {
                return self.err(
                    l,
                    format!("DEBUG needs a file and STDOUT, STDERR or ALL: the form is {USAGE}"),
                );
            };
            let streams = match kind.to_ascii_uppercase().as_str() {
                "STDOUT" => DebugStreams::Stdout,
                "STDERR" => DebugStreams::Stderr,
                "ALL" => DebugStreams::All,
                _ => {
                    return self
                        .err(l, format!("DEBUG's type `{kind}` is not STDOUT, STDERR or ALL"));
                }
            };
            debug = Some((PathBuf::from(file), streams));
            i += 3;
        }
        let kind = match words.get(i).map(|w| w.to_ascii_uppercase()).as_deref() {
            Some("PRE") => ScriptKind::Pre,
            Some("POST") => ScriptKind::Post,
            Some("HOLD") => ScriptKind::Hold,
            _ => {
                return self.err(l, format!("SCRIPT needs PRE, POST or HOLD: the form is {USAGE}"));
            }
        };
        let (Some(name), Some(program)) = (words.get(i + 1), words.get(i + 2)) else {
            return self.err(l, format!("SCRIPT needs a node and a program: the form is {USAGE}"));
        };
        let script = Script {
            program: program.to_string(),
            args: words[i + 3..].iter().map(|s| s.to_string()).collect(),
            defer,
            debug,
            place: self.place(l),
        };
        for id in self.targets(l, name)? {
            let node = &mut self.dag.nodes[id as usize];
            let slot = match kind {
                ScriptKind::Pre => &mut node.pre,
                ScriptKind::Post => &mut node.post,
                ScriptKind::Hold => &mut node.hold,
            };
            *slot = Some(script.clone());
        }
        Ok(())
    }

    /// `ENV GET VAR ...` or `ENV SET Key=Value;Key=Value;...`.
    fn env(&mut self, l: &Line, words: &[&str]) -> Result<(), DagError> {
        match words.get(1).map(|w| w.to_ascii_uppercase()).as_deref() {
            Some("GET") if words.len() > 2 => {
                self.dag
                    .env
                    .push(EnvCommand::Get(words[2..].iter().map(|s| s.to_string()).collect()));
                Ok(())
            }
            Some("SET") if words.len() > 2 => {
                let text = l.text.as_str();
                let start = text.to_ascii_uppercase().find("SET").map_or(text.len(), |i| i + 3);
                let mut set = Vec::new();
                for pair in text[start..].split(';').map(str::trim).filter(|p| !p.is_empty()) {
                    let Some((k, v)) = pair.split_once('=') else {
                        return self.err(l, format!("ENV SET: `{pair}` is not Key=Value"));
                    };
                    let k = k.trim();
                    if k.is_empty() || k.contains(char::is_whitespace) {
                        return self.err(l, format!("ENV SET: `{k}` is not a variable name"));
                    }
                    set.push((k.to_string(), v.trim().to_string()));
                }
                self.dag.env.push(EnvCommand::Set(set));
                Ok(())
            }
            _ => self.err(l, "ENV takes GET VAR [VAR ...] or SET Key=Value[;Key=Value ...]"),
        }
    }
}
