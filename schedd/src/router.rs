//! The job router's routing table and its planner (pure).
//!
//! The table comes from configuration as HTCondor's manual gives it:
//! JOB_ROUTER_DEFAULTS (one new-syntax ad) and JOB_ROUTER_ENTRIES (any number
//! of ads, one after another, with C-style comments), plus the entries a
//! JOB_ROUTER_ENTRIES_CMD prints. Each entry is merged over the defaults (the
//! entry's settings win). The attributes of a route:
//!
//! | attribute | meaning |
//! | --- | --- |
//! | `GridResource` | where routed copies go: `andes HOST:PORT` (another pool's schedd) or `slurm PARTITION` |
//! | `Name` | the route's name (default: its GridResource) |
//! | `Requirements` | which jobs may take the route: `MY` is the route, `TARGET` the job |
//! | `MaxJobs` (100), `MaxIdleJobs` (50) | routed copies on the route at once, and idle ones |
//! | `FailureRateThreshold` (0.03/s), `JobFailureTest` | black-hole throttling |
//! | `TargetUniverse` (9) | the routed copy's JobUniverse |
//! | `OverrideRoutingEntry` (true) | replaces an earlier entry of the same name (false: the earlier stays) |
//! | `EditJobInPlace` | transform the job itself instead of routing a copy |
//! | `Set_A`, `Eval_Set_A`, `Copy_A`, `Delete_A` | the transforms, applied in that manual's order: copy, delete, set, eval_set |
//!
//! The X.509 attributes (`UseSharedX509UserProxy`, `SharedX509UserProxy`,
//! `JobShouldBeSandboxed`) have no meaning for andes: identities are keys,
//! and they are ignored with a warning.
//!
//! [`plan`] decides which idle jobs take which route: a job takes the
//! matching route with room (below MaxJobs and MaxIdleJobs, and not throttled)
//! that holds the fewest of its copies, so jobs spread across routes.

use std::collections::VecDeque;

use classad::{ClassAd, EvalOptions, Evaluator, Expr, Value};

use crate::job::JobId;
use crate::quarantine::Journal;

/// What the journal names while the job router evaluates a job's ad
/// against its routes.
pub const ROUTING: &str = "routing, against the job router's routes";

/// Where a route sends its copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Another andes pool's schedd at `host:port`.
    Andes(String),
    /// A Slurm partition, through `sbatch`.
    Slurm(String),
}

impl Target {
    /// Parses a GridResource: `andes HOST:PORT` or `slurm PARTITION`.
    pub fn parse(grid_resource: &str) -> Result<Target, String> {
        let mut words = grid_resource.split_whitespace();
        let kind = words.next().unwrap_or("");
        let arg = words.next();
        if !kind.eq_ignore_ascii_case("andes") && !kind.eq_ignore_ascii_case("slurm") {
            return Err(format!(
                "GridResource `{grid_resource}`: andes cannot serve grid type `{kind}` (it \
                 routes to `andes HOST:PORT`, another pool's schedd, or `slurm PARTITION`)"
            ));
        }
        if words.next().is_some() {
            return Err(format!("GridResource `{grid_resource}` has too many words"));
        }
        match (kind.to_ascii_lowercase().as_str(), arg) {
            ("andes", Some(a)) => Ok(Target::Andes(a.to_string())),
            ("slurm", Some(p)) => Ok(Target::Slurm(p.to_string())),
            ("andes" | "slurm", None) => Err(format!(
                "GridResource `{grid_resource}` needs a {}",
                if kind == "andes" { "schedd address (andes HOST:PORT)" } else { "partition" }
            )),
            _ => Err(format!(
                "GridResource `{grid_resource}`: andes cannot serve grid type `{kind}` (it \
                 routes to `andes HOST:PORT`, another pool's schedd, or `slurm PARTITION`)"
            )),
        }
    }
}

/// One transform of a routed copy.
#[derive(Clone, Debug)]
pub enum Transform {
    /// `Copy_<from> = "to"`: the original's `from` into the copy's `to`.
    Copy {
        /// Attribute of the original.
        from: String,
        /// Attribute of the copy.
        to: String,
    },
    /// `Delete_<attr>`.
    Delete(String),
    /// `Set_<attr> = expr`: the expression itself.
    Set(String, Expr),
    /// `Eval_Set_<attr> = expr`: the expression's value, evaluated with MY the
    /// copy being built and TARGET the route.
    EvalSet(String, Expr),
    /// `DEFAULT attr expr`: set where the copy has none (or undefined).
    Default(String, Expr),
    /// `COPY from to` / `RENAME from to`: within the copy as built so far.
    CopyCurrent {
        /// Attribute of the copy.
        from: String,
        /// Its new name.
        to: String,
        /// Remove `from` (RENAME).
        rename: bool,
    },
    /// `COPY /regex/ to` / `RENAME /regex/ to`: every attribute matching.
    CopyMatching {
        /// What names match.
        re: regex::Regex,
        /// The new name (`\N` is group N).
        to: String,
        /// Remove the originals (RENAME).
        rename: bool,
    },
    /// `DELETE /regex/`: every attribute matching.
    DeleteMatching(regex::Regex),
}

/// A route of the table.
#[derive(Clone, Debug)]
pub struct Route {
    /// Name.
    pub name: String,
    /// GridResource, as written.
    pub grid_resource: String,
    /// Where copies go (`None` for an EditJobInPlace route).
    pub target: Option<Target>,
    /// Which jobs may take it.
    pub requirements: Expr,
    /// MaxJobs.
    pub max_jobs: u32,
    /// MaxIdleJobs.
    pub max_idle_jobs: u32,
    /// FailureRateThreshold, failures per second.
    pub failure_rate_threshold: f64,
    /// JobFailureTest (none: every ending is a success; removal is a failure).
    pub job_failure_test: Option<Expr>,
    /// TargetUniverse.
    pub target_universe: i64,
    /// EditJobInPlace.
    pub edit_in_place: Expr,
    /// The transforms in the order they apply.
    pub transforms: Vec<Transform>,
    /// The merged entry (MY when its expressions are evaluated).
    pub ad: ClassAd,
}

/// What is wrong with the routing table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableError {
    /// Where the text came from (JOB_ROUTER_ENTRIES, the command's output...).
    pub origin: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.origin, self.message)
    }
}

impl std::error::Error for TableError {}

const IGNORED: [&str; 4] =
    ["UseSharedX509UserProxy", "SharedX509UserProxy", "JobShouldBeSandboxed", "X509UserProxy"];

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() > prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

fn eval_in(ad: &ClassAd, name: &str) -> Option<Value> {
    let e = ad.get(name)?;
    Some(Evaluator::new().eval(e, Some(ad), None))
}

/// The routing table: routes in order.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// The routes.
    pub routes: Vec<Route>,
    /// Things ignored on the way (X.509 attributes, overridden entries).
    pub warnings: Vec<String>,
}

impl Table {
    /// Builds the table from the defaults ad (if any) and entry texts, each
    /// `(origin, text)` holding any number of ads. An entry that cannot be
    /// read or used (a syntax error, a grid type andes cannot serve, a bad
    /// value) is skipped with a warning naming where it is, which entry and
    /// what is wrong: one bad entry never takes the table down. Only
    /// unreadable defaults, which every route depends on, refuse the table.
    pub fn load(defaults: Option<&str>, entries: &[(String, String)]) -> Result<Table, TableError> {
        let defaults = match defaults.map(str::trim).filter(|t| !t.is_empty()) {
            None => ClassAd::new(),
            Some(text) => {
                let mut ads = classad::parse_ads(text).map_err(|e| TableError {
                    origin: "JOB_ROUTER_DEFAULTS".into(),
                    message: e.to_string(),
                })?;
                if ads.len() != 1 {
                    return Err(TableError {
                        origin: "JOB_ROUTER_DEFAULTS".into(),
                        message: format!("expected one ClassAd, found {}", ads.len()),
                    });
                }
                ads.remove(0)
            }
        };
        let mut table = Table::default();
        for (origin, text) in entries {
            if text.trim().is_empty() {
                continue;
            }
            for (i, chunk) in split_entries(text).into_iter().enumerate() {
                let at = format!("{origin}, entry {}", i + 1);
                let entry = match classad::parse_ad(chunk) {
                    Ok(a) => a,
                    Err(e) => {
                        table.warnings.push(format!("{at}: {e}; skipped"));
                        continue;
                    }
                };
                let mut merged = defaults.clone();
                merged.update(&entry);
                let route = match Route::from_ad(merged, &mut table.warnings) {
                    Ok(r) => r,
                    Err(message) => {
                        table.warnings.push(format!("{at}: {message}; skipped"));
                        continue;
                    }
                };
                let overrides = match eval_in(&route.ad, "OverrideRoutingEntry") {
                    Some(Value::Bool(b)) => b,
                    _ => true,
                };
                match table.routes.iter().position(|r| r.name == route.name) {
                    Some(at) if overrides => {
                        table
                            .warnings
                            .push(format!("route `{}` replaces an earlier entry", route.name));
                        table.routes[at] = route;
                    }
                    Some(_) => table.warnings.push(format!(
                        "route `{}`: OverrideRoutingEntry is false, the earlier entry stays",
                        route.name
                    )),
                    None => table.routes.push(route),
                }
            }
        }
        Ok(table)
    }
}

/// Routes in the transform language (see [`transform`]) and the knobs
/// around them, as the configuration gives them.
#[derive(Clone, Debug, Default)]
pub struct NamedRoutes {
    /// JOB_ROUTER_ROUTE_NAMES, in order; `None` when it is not set (the
    /// old-syntax entries in their order, then).
    pub names: Option<Vec<String>>,
    /// Each JOB_ROUTER_ROUTE_<name> that is set: (name, text).
    pub routes: Vec<(String, String)>,
    /// JOB_ROUTER_PRE_ROUTE_TRANSFORM_NAMES's JOB_ROUTER_TRANSFORM_<name>s.
    pub pre: Vec<(String, String)>,
    /// JOB_ROUTER_POST_ROUTE_TRANSFORM_NAMES's JOB_ROUTER_TRANSFORM_<name>s.
    pub post: Vec<(String, String)>,
    /// JOB_ROUTER_DEFAULT_MAX_JOBS_PER_ROUTE: MaxJobs of a route that sets none.
    pub max_jobs: Option<u32>,
    /// JOB_ROUTER_DEFAULT_MAX_IDLE_JOBS_PER_ROUTE.
    pub max_idle_jobs: Option<u32>,
    /// The configuration's macros the texts use (`$(NAME)`), by lower-case name.
    pub macros: std::collections::HashMap<String, String>,
}

impl NamedRoutes {
    /// Reads JOB_ROUTER_ROUTE_NAMES (names separated by spaces or commas),
    /// each JOB_ROUTER_ROUTE_<name>, the pre- and post-route transforms and
    /// the default limits from `config`. The transforms are taken
    /// unexpanded (their `$(NAME)`s may be their own macros), with the
    /// configuration's values of the macros they use.
    pub fn from_config(config: &andes_config::Config) -> Result<NamedRoutes, String> {
        let get = |knob: &str| -> Result<Option<String>, String> {
            Ok(config.get(knob).map_err(|e| e.to_string())?.filter(|v| !v.is_empty()))
        };
        let list = |knob: &str| -> Result<Option<Vec<String>>, String> {
            Ok(get(knob)?.map(|v| {
                v.split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|w| !w.is_empty())
                    .map(str::to_string)
                    .collect()
            }))
        };
        let texts = |names: &[String], prefix: &str| -> Vec<(String, String)> {
            names
                .iter()
                .filter_map(|n| Some((n.clone(), config.raw(&format!("{prefix}{n}"))?.to_string())))
                .collect()
        };
        let count = |knob: &str| -> Result<Option<u32>, String> {
            match get(knob)? {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse::<u32>()
                    .map(Some)
                    .map_err(|_| format!("{knob} = {v}: expected a count of jobs")),
            }
        };
        let names = list("JOB_ROUTER_ROUTE_NAMES")?;
        let pre_names = list("JOB_ROUTER_PRE_ROUTE_TRANSFORM_NAMES")?.unwrap_or_default();
        let post_names = list("JOB_ROUTER_POST_ROUTE_TRANSFORM_NAMES")?.unwrap_or_default();
        let mut named = NamedRoutes {
            routes: texts(names.as_deref().unwrap_or_default(), "JOB_ROUTER_ROUTE_"),
            pre: texts(&pre_names, "JOB_ROUTER_TRANSFORM_"),
            post: texts(&post_names, "JOB_ROUTER_TRANSFORM_"),
            names,
            max_jobs: count("JOB_ROUTER_DEFAULT_MAX_JOBS_PER_ROUTE")?,
            max_idle_jobs: count("JOB_ROUTER_DEFAULT_MAX_IDLE_JOBS_PER_ROUTE")?,
            macros: Default::default(),
        };
        let mut macros = std::collections::HashMap::new();
        for (_, text) in named.routes.iter().chain(&named.pre).chain(&named.post) {
            for name in transform::macro_names(text) {
                if let Ok(Some(v)) = get(name) {
                    macros.insert(name.to_ascii_lowercase(), v);
                }
            }
        }
        named.macros = macros;
        Ok(named)
    }
}

impl Table {
    /// Adds the transform-language routes to a table of old-syntax entries:
    /// with JOB_ROUTER_ROUTE_NAMES the routes it names, in its order (a
    /// JOB_ROUTER_ROUTE_<name>, else the old-syntax entry of that name; an
    /// entry it does not name is not used), every route wrapped in the pre-
    /// and post-route transforms. A route or transform that cannot be read
    /// is skipped with a warning naming it.
    pub fn arrange(mut self, named: &NamedRoutes) -> Table {
        let steps = |which: &str, list: &[(String, String)], warnings: &mut Vec<String>| {
            let mut out = Vec::new();
            for (name, text) in list {
                match transform::parse(name, text, &named.macros) {
                    Ok(p) if p.settings.len() > 1 => warnings.push(format!(
                        "JOB_ROUTER_TRANSFORM_{name} ({which}-route): route settings such as \
                         {} belong in a route; the transform is skipped",
                        p.settings.iter().nth(1).map_or("", |(a, _)| a.as_str())
                    )),
                    Ok(p) => out.extend(p.steps),
                    Err(e) => warnings
                        .push(format!("JOB_ROUTER_TRANSFORM_{name} ({which}-route): {e}; skipped")),
                }
            }
            out
        };
        let pre = steps("pre", &named.pre, &mut self.warnings);
        let post = steps("post", &named.post, &mut self.warnings);
        let mut old = std::mem::take(&mut self.routes);
        let mut routes = Vec::new();
        match &named.names {
            None => routes.append(&mut old),
            Some(names) => {
                for name in names {
                    if let Some((_, text)) = named.routes.iter().find(|(n, _)| n == name) {
                        let at = format!("JOB_ROUTER_ROUTE_{name}");
                        let parsed = transform::parse(name, text, &named.macros)
                            .map_err(|e| format!("{at}: {e}"))
                            .and_then(|p| {
                                self.warnings.extend(p.warnings);
                                let mut r = Route::from_ad(p.settings, &mut self.warnings)
                                    .map_err(|e| format!("{at}: {e}"))?;
                                r.transforms = p.steps;
                                Ok(r)
                            });
                        match parsed {
                            Ok(r) => routes.push(r),
                            Err(e) => self.warnings.push(format!("{e}; skipped")),
                        }
                    } else if let Some(i) = old.iter().position(|r| r.name == *name) {
                        routes.push(old.remove(i));
                    } else {
                        self.warnings.push(format!(
                            "JOB_ROUTER_ROUTE_NAMES names `{name}`, which no \
                             JOB_ROUTER_ROUTE_{name} or entry defines; skipped"
                        ));
                    }
                }
                for r in old {
                    self.warnings.push(format!(
                        "route `{}` is not in JOB_ROUTER_ROUTE_NAMES; it is not used",
                        r.name
                    ));
                }
            }
        }
        for r in &mut routes {
            if let Some(m) = named.max_jobs
                && !r.ad.contains(classad::name!("MaxJobs"))
            {
                r.max_jobs = m;
            }
            if let Some(m) = named.max_idle_jobs
                && !r.ad.contains(classad::name!("MaxIdleJobs"))
            {
                r.max_idle_jobs = m;
            }
            if !pre.is_empty() || !post.is_empty() {
                let own = std::mem::take(&mut r.transforms);
                r.transforms = pre.iter().cloned().chain(own).chain(post.iter().cloned()).collect();
            }
        }
        self.routes = routes;
        self
    }
}

/// Checks that every entry of a table's text parses, naming the first that
/// does not: a program's output (JOB_ROUTER_ENTRIES_CMD) with an unreadable
/// entry is taken as a failed run, not as a table with one entry fewer.
pub fn check_entries(text: &str) -> Result<(), String> {
    for (i, chunk) in split_entries(text).into_iter().enumerate() {
        classad::parse_ad(chunk).map_err(|e| format!("entry {}: {e}", i + 1))?;
    }
    Ok(())
}

/// The most entries one text may hold.
const MAX_ENTRIES: usize = 10_000;

/// Splits a routing table's text into its top-level `[ ... ]` entries, so
/// that one that does not parse is skipped alone. Strings, comments and
/// nested ads are stepped over; text outside brackets is kept as an entry of
/// its own (it is an error the parser names). At most [`MAX_ENTRIES`].
fn split_entries(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let (mut out, mut depth, mut start, mut i) = (Vec::new(), 0usize, None, 0usize);
    while i < b.len() && out.len() < MAX_ENTRIES {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 1);
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = text[i..].find('\n').map_or(b.len(), |e| i + e);
            }
            b'[' => {
                if depth == 0 {
                    start = Some(i);
                }
                depth += 1;
            }
            b']' if depth > 0 => {
                depth -= 1;
                if depth == 0
                    && let Some(s) = start.take()
                {
                    out.push(&text[s..=i]);
                }
            }
            c if depth == 0 && !c.is_ascii_whitespace() => {
                // Stray text: up to the next entry, as one (bad) entry.
                let end = text[i..].find('[').map_or(b.len(), |e| i + e);
                out.push(&text[i..end]);
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if let Some(s) = start {
        out.push(&text[s..]);
    }
    out
}

impl Route {
    fn from_ad(ad: ClassAd, warnings: &mut Vec<String>) -> Result<Route, String> {
        let grid_resource = match eval_in(&ad, "GridResource") {
            Some(Value::Str(s)) => s.to_string(),
            Some(Value::Undefined) | None => String::new(),
            Some(v) => return Err(format!("GridResource must be a string, not {v}")),
        };
        let name = match eval_in(&ad, "Name") {
            Some(Value::Str(s)) => s.to_string(),
            _ if !grid_resource.is_empty() => grid_resource.clone(),
            _ => return Err("a route needs a Name or a GridResource".into()),
        };
        let edit_in_place = ad
            .get(classad::name!("EditJobInPlace"))
            .cloned()
            .unwrap_or(Expr::from(Value::Bool(false)));
        let in_place_always = matches!(eval_in(&ad, "EditJobInPlace"), Some(Value::Bool(true)));
        let target = if in_place_always {
            None
        } else if grid_resource.is_empty() {
            return Err(format!("route `{name}` has no GridResource"));
        } else {
            Some(Target::parse(&grid_resource).map_err(|e| format!("route `{name}`: {e}"))?)
        };
        let int = |n: &str, default: i64| -> Result<i64, String> {
            match eval_in(&ad, n) {
                None | Some(Value::Undefined) => Ok(default),
                Some(Value::Int(i)) => Ok(i),
                Some(Value::Real(r)) if r.is_finite() => Ok(r as i64),
                Some(v) => Err(format!("route `{name}`: {n} must be a number, not {v}")),
            }
        };
        let max_jobs = int("MaxJobs", 100)?.clamp(0, u32::MAX as i64) as u32;
        let max_idle_jobs = int("MaxIdleJobs", 50)?.clamp(0, u32::MAX as i64) as u32;
        let failure_rate_threshold = match eval_in(&ad, "FailureRateThreshold") {
            None | Some(Value::Undefined) => 0.03,
            Some(Value::Int(i)) => i as f64,
            Some(Value::Real(r)) => r,
            Some(v) => {
                return Err(format!(
                    "route `{name}`: FailureRateThreshold must be a number, not {v}"
                ));
            }
        };
        let mut copies = Vec::new();
        let mut deletes = Vec::new();
        let mut sets = Vec::new();
        let mut evals = Vec::new();
        for (attr, e) in ad.iter() {
            let a = attr.as_str();
            if let Some(rest) = strip_prefix_ci(a, "Eval_Set_") {
                evals.push(Transform::EvalSet(rest.to_string(), e.clone()));
            } else if let Some(rest) = strip_prefix_ci(a, "Set_") {
                sets.push(Transform::Set(rest.to_string(), e.clone()));
            } else if let Some(rest) = strip_prefix_ci(a, "Copy_") {
                let to = match Evaluator::new().eval(e, Some(&ad), None) {
                    Value::Str(s) => s.to_string(),
                    v => {
                        return Err(format!("route `{name}`: {a} must name an attribute, not {v}"));
                    }
                };
                copies.push(Transform::Copy { from: rest.to_string(), to });
            } else if let Some(rest) = strip_prefix_ci(a, "Delete_") {
                deletes.push(Transform::Delete(rest.to_string()));
            } else if IGNORED.iter().any(|i| i.eq_ignore_ascii_case(a)) {
                warnings.push(format!("route `{name}`: {a} has no meaning in andes; ignored"));
            }
        }
        let transforms = copies.into_iter().chain(deletes).chain(sets).chain(evals).collect();
        Ok(Route {
            requirements: ad
                .get(classad::name!("Requirements"))
                .cloned()
                .unwrap_or(Expr::from(Value::Bool(true))),
            job_failure_test: ad.get(classad::name!("JobFailureTest")).cloned(),
            target_universe: int("TargetUniverse", 9)?,
            name,
            grid_resource,
            target,
            max_jobs,
            max_idle_jobs,
            failure_rate_threshold,
            edit_in_place,
            transforms,
            ad,
        })
    }

    /// Whether `job` may take this route.
    pub fn matches(&self, ev: &mut Evaluator, job: &ClassAd) -> bool {
        matches!(ev.eval(&self.requirements, Some(&self.ad), Some(job)), Value::Bool(true))
    }

    /// Whether this route edits `job` in place.
    pub fn edits_in_place(&self, ev: &mut Evaluator, job: &ClassAd) -> bool {
        match &self.edit_in_place {
            Expr::Lit(Value::Bool(b)) => *b,
            e => matches!(ev.eval(e, Some(&self.ad), Some(job)), Value::Bool(true)),
        }
    }

    /// Applies the transforms to `ad` (the original's attributes).
    pub fn transform(&self, ev: &mut Evaluator, original: &ClassAd, ad: &mut ClassAd) {
        for t in &self.transforms {
            match t {
                Transform::Copy { from, to } => match original.get(from) {
                    Some(e) => ad.insert(to.as_str(), e.clone()),
                    None => {
                        ad.remove(to);
                    }
                },
                Transform::Delete(a) => {
                    ad.remove(a);
                }
                Transform::Set(a, e) => ad.insert(a.as_str(), e.clone()),
                Transform::EvalSet(a, e) => {
                    let v = ev.eval(e, Some(ad), Some(&self.ad));
                    ad.insert(a.as_str(), Expr::from(v));
                }
                Transform::Default(a, e) => {
                    if matches!(ad.get(a), None | Some(Expr::Lit(Value::Undefined))) {
                        ad.insert(a.as_str(), e.clone());
                    }
                }
                Transform::CopyCurrent { from, to, rename } => {
                    if let Some(e) = ad.get(from).cloned() {
                        if *rename {
                            ad.remove(from);
                        }
                        ad.insert(to.as_str(), e);
                    }
                }
                Transform::CopyMatching { re, to, rename } => {
                    transform::copy_matching(ad, re, to, *rename)
                }
                Transform::DeleteMatching(re) => {
                    let names: Vec<String> = ad
                        .iter()
                        .map(|(a, _)| a.as_str().to_string())
                        .filter(|a| re.is_match(a))
                        .collect();
                    for a in names {
                        ad.remove(&a);
                    }
                }
            }
        }
    }

    /// The routed copy of `original` (its whole ad): the job's attributes
    /// without its identity, the route's universe and GridResource, then the
    /// transforms.
    pub fn routed_copy(&self, ev: &mut Evaluator, original: &ClassAd, from: JobId) -> ClassAd {
        let mut ad = original.clone();
        for a in COPY_DROPS {
            ad.remove(a);
        }
        ad.insert_value(classad::name!("JobUniverse"), self.target_universe);
        ad.insert_value(classad::name!("GridResource"), self.grid_resource.as_str());
        self.transform(ev, original, &mut ad);
        ad.insert_value(classad::name!("RoutedFromJobId"), from.to_string());
        ad.insert_value(classad::name!("RouteName"), self.name.as_str());
        ad
    }

    /// Whether a finished routed copy counts as a failure.
    pub fn failed(&self, ev: &mut Evaluator, copy: &ClassAd) -> bool {
        match &self.job_failure_test {
            Some(t) => matches!(ev.eval(t, Some(&self.ad), Some(copy)), Value::Bool(true)),
            None => false,
        }
    }
}

/// What a routed copy does not inherit: the original's identity, state and
/// its own log (the original's log tells the job's story).
const COPY_DROPS: [&str; 15] = [
    "ClusterId",
    "ProcId",
    "GlobalJobId",
    "QDate",
    "JobStatus",
    "EnteredCurrentStatus",
    "NumJobStarts",
    "NumShadowStarts",
    "LastMatchTime",
    "NumJobMatches",
    "LastRejMatchTime",
    "LastRejMatchReason",
    "UserLog",
    "DAGManNodesLog",
    "RoutedToJobId",
];

/// Seconds over which a route's failure rate is measured.
pub const FAILURE_WINDOW: i64 = 60;

/// A route's load and recent endings, as the router tracks them.
#[derive(Clone, Debug, Default)]
pub struct RouteLoad {
    /// Routed copies alive on the route.
    pub jobs: u32,
    /// Of those, idle.
    pub idle: u32,
    /// When recent copies failed (Unix seconds), oldest first.
    pub failures: VecDeque<i64>,
    /// Failures in a row, without a success between.
    pub consecutive_failures: u32,
    /// The last failure.
    pub last_failure: i64,
}

impl RouteLoad {
    /// Records a finished copy.
    pub fn ended(&mut self, failed: bool, now: i64) {
        if failed {
            self.failures.push_back(now);
            self.consecutive_failures = self.consecutive_failures.saturating_add(1);
            self.last_failure = now;
        } else {
            self.consecutive_failures = 0;
            self.failures.clear();
        }
    }

    /// Failures per second over the last [`FAILURE_WINDOW`].
    pub fn failure_rate(&mut self, now: i64) -> f64 {
        while self.failures.front().is_some_and(|&t| t <= now - FAILURE_WINDOW) {
            self.failures.pop_front();
        }
        self.failures.len() as f64 / FAILURE_WINDOW as f64
    }

    /// Whether the route may take one more job at `now`. Above its failure
    /// threshold a route gets one probe at a time, each after a pause that
    /// doubles with every failure in a row (2 s, 4 s, ... up to an hour), so a
    /// black hole receives fewer and fewer jobs; a success ends it.
    pub fn has_room(&mut self, route: &Route, now: i64) -> bool {
        if self.jobs >= route.max_jobs || self.idle >= route.max_idle_jobs {
            return false;
        }
        if self.failure_rate(now) <= route.failure_rate_threshold {
            return true;
        }
        let pause = 1i64 << self.consecutive_failures.min(11);
        self.jobs == 0 && now >= self.last_failure + pause.min(3600)
    }
}

/// A decision of the planner.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Route a copy of `job` along route `route`.
    Route {
        /// The original.
        job: JobId,
        /// Index in the table.
        route: usize,
        /// The routed copy's ad.
        copy: ClassAd,
    },
    /// Transform `job` in place: these attributes change (`None`: deleted).
    Edit {
        /// The job.
        job: JobId,
        /// Index in the table.
        route: usize,
        /// Its changed attributes.
        changes: Vec<(String, Option<Expr>)>,
    },
}

/// Decides where idle candidate jobs go. `jobs` are the idle jobs that may
/// be routed (not copies, not already routed, within
/// JOB_ROUTER_SOURCE_JOB_CONSTRAINT), each with its whole ad; `loads` is each
/// route's state and is updated as copies are planned. Each job's
/// evaluation is recorded in `journal` while it runs (see
/// [`crate::quarantine`]).
pub fn plan(
    table: &Table,
    loads: &mut [RouteLoad],
    jobs: &[(JobId, ClassAd)],
    now: i64,
    journal: &Journal,
) -> Vec<Decision> {
    let mut ev = Evaluator::with_options(EvalOptions { now: Some(now), ..Default::default() });
    let mut out = Vec::new();
    let mut room: Vec<bool> =
        table.routes.iter().zip(loads.iter_mut()).map(|(r, l)| l.has_room(r, now)).collect();
    for (id, ad) in jobs {
        if !room.iter().any(|r| *r) && !table.routes.iter().any(|r| r.target.is_none()) {
            break;
        }
        let _evaluating = journal.enter(*id, ROUTING);
        crate::quarantine::fault_point("route", ad);
        let mut best: Option<(usize, bool)> = None;
        for (i, route) in table.routes.iter().enumerate() {
            let in_place = route.edits_in_place(&mut ev, ad);
            if !in_place && !room[i] {
                continue;
            }
            if !route.matches(&mut ev, ad) {
                continue;
            }
            if in_place {
                best = Some((i, true));
                break;
            }
            if best.is_none_or(|(b, _)| loads[i].jobs < loads[b].jobs) {
                best = Some((i, false));
            }
        }
        let Some((i, in_place)) = best else { continue };
        let route = &table.routes[i];
        if in_place {
            let mut edited = ad.clone();
            route.transform(&mut ev, ad, &mut edited);
            let mut changes = Vec::new();
            for (name, e) in edited.iter() {
                if ad.get(name.as_str()) != Some(e) {
                    changes.push((name.as_str().to_string(), Some(e.clone())));
                }
            }
            for (name, _) in ad.iter() {
                if !edited.contains(name.as_str()) {
                    changes.push((name.as_str().to_string(), None));
                }
            }
            if !changes.is_empty() {
                out.push(Decision::Edit { job: *id, route: i, changes });
            }
            continue;
        }
        let copy = route.routed_copy(&mut ev, ad, *id);
        loads[i].jobs += 1;
        loads[i].idle += 1;
        room[i] = loads[i].has_room(route, now);
        out.push(Decision::Route { job: *id, route: i, copy });
    }
    out
}

pub mod service;
pub mod transform;

#[cfg(test)]
mod tests;
