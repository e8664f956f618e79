//! Running a parsed description: macros, queue statements, one ad per proc.

use std::collections::HashMap;

use classad::ClassAd;

use crate::job::JobBuilder;
use crate::macros::{Macros, Origin};
use crate::parse::{self, ItemSource, MatchKind, QueueStatement, StatementKind};
pub use crate::run::Module;
use crate::run::{ModuleCache, Run, normalize, resolve};
use crate::{Context, ErrorKind, SubmitDescription, SubmitError};

/// The most jobs one description may make unless [`Context::max_jobs`] says
/// otherwise.
pub const DEFAULT_MAX_JOBS: usize = 100_000;

/// The most bytes the job ads of one submission may take, printed, unless
/// [`Context::max_ad_bytes`] says otherwise.
pub const DEFAULT_MAX_AD_BYTES: usize = 256 << 20;

/// Largest `queue ... from FILE` file read, in bytes.
const MAX_ITEM_FILE: u64 = 16 << 20;

/// The result of [`expand`]: the job ads, in proc order, and the modules they
/// run (each once, in order of first use).
#[derive(Clone, Debug)]
pub struct Submission {
    /// One job ad per proc.
    pub jobs: Vec<ClassAd>,
    /// The distinct modules named by the jobs' `Cmd`/`CmdDigest`.
    pub modules: Vec<Module>,
    /// Warnings for the user, as condor_submit prints them: each line that
    /// defined something nothing read (`FILE:LINE: the line 'X = V' was
    /// unused by andes submit. Is it a typo?`).
    pub warnings: Vec<String>,
}

/// Runs `desc` against `ctx`: applies its commands and macros in order, and
/// makes one job ad per proc of every `queue` statement (all in the one
/// cluster `ctx.cluster_id`, procs numbered from 0).
pub fn expand(desc: &SubmitDescription, ctx: &Context<'_>) -> Result<Submission, SubmitError> {
    let extra = parse::parse(&ctx.extra_lines.join("\n"), "<command line>")?;
    if let Some(q) = extra.statements.iter().find(|s| matches!(s.kind, StatementKind::Queue(_))) {
        return Err(SubmitError::new(
            ErrorKind::Syntax,
            "<command line>",
            Some(q.line),
            "a `queue` statement cannot be given with -a",
        ));
    }
    let no_queue = |d: &SubmitDescription, what: &str| -> Result<(), SubmitError> {
        match d.statements.iter().find(|s| matches!(s.kind, StatementKind::Queue(_))) {
            Some(q) => Err(SubmitError::new(
                ErrorKind::Syntax,
                "<command line>",
                Some(q.line),
                format!("a `queue` statement cannot be given {what}"),
            )),
            None => Ok(()),
        }
    };
    let defines = parse::parse(&ctx.defines.join("\n"), "<command line>")?;
    no_queue(&defines, "as name=value (use -queue)")?;
    let replacement = match &ctx.queue {
        None => None,
        Some(q) => {
            let d = parse::parse(&format!("queue {q}"), "<command line>")?;
            match d.statements.into_iter().next() {
                Some(st) if matches!(st.kind, StatementKind::Queue(_)) => Some(st),
                _ => {
                    return Err(SubmitError::new(
                        ErrorKind::Syntax,
                        "<command line>",
                        None,
                        format!("-queue {q:?} is not a queue statement's arguments"),
                    ));
                }
            }
        }
    };
    let last_queue =
        desc.statements.iter().rposition(|s| matches!(s.kind, StatementKind::Queue(_)));
    let mut run = Run::new(desc, ctx);
    for x in &defines.statements {
        let o = Origin { source: "<command line>".into(), line: Some(x.line) };
        run.apply(&x.kind, &o)?;
    }
    let mut queued = false;
    let tail = if last_queue.is_none() { replacement.as_ref() } else { None };
    for (i, st) in desc.statements.iter().enumerate() {
        let (st, source) = match &replacement {
            Some(r) if Some(i) == last_queue => (r, "<command line>".to_string()),
            _ => (st, desc.source.clone()),
        };
        let origin = Origin { source, line: Some(st.line) };
        match &st.kind {
            StatementKind::Queue(q) => {
                for x in &extra.statements {
                    let o = Origin { source: "<command line>".into(), line: Some(x.line) };
                    run.apply(&x.kind, &o)?;
                }
                run.queue(q, &origin)?;
                queued = true;
            }
            k => run.apply(k, &origin)?,
        }
    }
    if let Some(st) = tail
        && let StatementKind::Queue(q) = &st.kind
    {
        for x in &extra.statements {
            let o = Origin { source: "<command line>".into(), line: Some(x.line) };
            run.apply(&x.kind, &o)?;
        }
        run.queue(q, &Origin { source: "<command line>".into(), line: None })?;
        queued = true;
    }
    if !queued {
        return Err(SubmitError::new(
            ErrorKind::NoQueue,
            &desc.source,
            None,
            "no `queue` statement: nothing to submit",
        ));
    }
    let warnings = run
        .macros
        .unused()
        .into_iter()
        .map(|(text, o)| {
            format!(
                "{}:{}: the line '{text}' was unused by andes submit. Is it a typo?",
                o.source,
                o.line.unwrap_or(0)
            )
        })
        .collect();
    Ok(Submission { jobs: run.jobs, modules: run.modules.into_modules(), warnings })
}

impl<'c, 'f> Run<'c, 'f> {
    /// A fresh expansion of `desc` in `ctx`, its cluster's macros defined.
    fn new(desc: &SubmitDescription, ctx: &'c Context<'f>) -> Run<'c, 'f> {
        let mut run = Run {
            ctx,
            macros: Macros::new(&ctx.env, ctx.seed),
            attrs: Vec::new(),
            jobs: Vec::new(),
            modules: ModuleCache::default(),
            sizes: HashMap::new(),
            source: desc.source.clone(),
            ad_bytes: 0,
        };
        let cluster = ctx.cluster_id.to_string();
        for n in ["Cluster", "ClusterId"] {
            run.macros.builtin(n, &cluster);
        }
        run
    }

    fn apply(&mut self, kind: &StatementKind, origin: &Origin) -> Result<(), SubmitError> {
        match kind {
            StatementKind::Assign { name, value } => self.macros.define(name, value, origin),
            StatementKind::Attr { name, value } => {
                self.attrs.retain(|(n, _, _)| !n.eq_ignore_ascii_case(name));
                self.attrs.push((name.clone(), value.clone(), origin.clone()));
                Ok(())
            }
            StatementKind::Queue(_) => Ok(()),
        }
    }

    fn queue(&mut self, q: &QueueStatement, origin: &Origin) -> Result<(), SubmitError> {
        let iwd = self.ctx.iwd.clone();
        let qerr = |msg: String| origin.error(ErrorKind::Queue, msg);
        let count: u64 = if q.count.trim().is_empty() {
            1
        } else {
            let c = self.macros.expand(&q.count, &iwd, origin)?;
            let c = c.trim();
            match crate::job::eval_int(c) {
                Some(n) if n >= 0 => n as u64,
                _ => {
                    return Err(qerr(format!(
                        "bad queue statement: the count {c:?} is not a non-negative integer"
                    )));
                }
            }
        };
        let rows = self.item_rows(q, origin)?;
        let has_items = !matches!(q.items, ItemSource::None);
        let vars: Vec<String> =
            if q.vars.is_empty() { vec!["Item".to_string()] } else { q.vars.clone() };
        let nrows = if has_items { rows.len() as u64 } else { 1 };
        let total = nrows.saturating_mul(count);
        if total.saturating_add(self.jobs.len() as u64) > self.ctx.max_jobs as u64 {
            return Err(origin.error(
                ErrorKind::TooManyJobs,
                format!(
                    "the queue statement makes {total} jobs; at most {} are allowed in one submission",
                    self.ctx.max_jobs
                ),
            ));
        }
        for r in 0..nrows as usize {
            if has_items {
                let row = rows.get(r).map(String::as_str).unwrap_or("");
                let values = split_row(
                    row,
                    vars.len(),
                    matches!(q.items, ItemSource::FromRows(_) | ItemSource::FromFile(_)),
                );
                for (v, val) in vars.iter().zip(values) {
                    self.macros.builtin(v, &val);
                }
            }
            self.macros.builtin("ItemIndex", &r.to_string());
            self.macros.builtin("Row", &r.to_string());
            for step in 0..count {
                let proc = self.jobs.len();
                self.macros.builtin("Step", &step.to_string());
                for n in ["Process", "ProcId"] {
                    self.macros.builtin(n, &proc.to_string());
                }
                let ad = JobBuilder::new(self, origin, proc as i64).build()?;
                let mut size = crate::run::ByteCount(0);
                let _ = std::fmt::Write::write_fmt(&mut size, format_args!("{ad}"));
                self.ad_bytes = self.ad_bytes.saturating_add(size.0);
                if self.ad_bytes > self.ctx.max_ad_bytes {
                    return Err(origin.error(
                        ErrorKind::TooManyJobs,
                        format!(
                            "the job ads would take more than {} KiB; make fewer or smaller jobs",
                            self.ctx.max_ad_bytes >> 10
                        ),
                    ));
                }
                self.jobs.push(ad);
            }
        }
        Ok(())
    }

    /// The item rows of queue statement `q` (its `in` items, its `from`
    /// rows, the lines of its item file, the names its globs match), not
    /// yet split among its variables.
    fn item_rows(
        &mut self,
        q: &QueueStatement,
        origin: &Origin,
    ) -> Result<Vec<String>, SubmitError> {
        let iwd = self.ctx.iwd.clone();
        let qerr = |msg: String| origin.error(ErrorKind::Queue, msg);
        let dir = self.job_iwd(origin)?;
        Ok(match &q.items {
            ItemSource::None => Vec::new(),
            ItemSource::In(items) => items.clone(),
            ItemSource::FromRows(rows) => rows.clone(),
            ItemSource::FromFile(f) => {
                let name = self.macros.expand(f, &iwd, origin)?;
                let path = resolve(&dir, name.trim());
                let bytes = self.ctx.fs.read(&path, MAX_ITEM_FILE).map_err(|e| {
                    qerr(format!("cannot read the item file {path:?} for `queue ... from`: {e}"))
                })?;
                String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(str::to_string)
                    .collect()
            }
            ItemSource::Matching { what, globs } => {
                let mut found = Vec::new();
                for g in globs {
                    let g = self.macros.expand(g, &iwd, origin)?;
                    for m in self.glob(&dir, &g, *what, origin)? {
                        if !found.contains(&m) {
                            found.push(m);
                        }
                    }
                }
                found
            }
        })
    }

    /// The job's initial directory (`Iwd`), as the ad writes it.
    pub fn job_iwd(&mut self, origin: &Origin) -> Result<String, SubmitError> {
        let base = self.ctx.iwd.clone();
        for key in ["initialdir", "initial_dir", "iwd"] {
            if self.macros.is_defined(key) {
                let v = self.macros.get(key, &base, &origin.source)?.unwrap_or_default();
                let v = v.trim();
                if !v.is_empty() {
                    return Ok(normalize(&resolve(&base, v)));
                }
            }
        }
        Ok(normalize(&base))
    }

    fn glob(
        &self,
        dir: &str,
        pattern: &str,
        what: MatchKind,
        origin: &Origin,
    ) -> Result<Vec<String>, SubmitError> {
        let (sub, pat) = match pattern.rfind('/') {
            Some(i) => (&pattern[..=i], &pattern[i + 1..]),
            None => ("", pattern),
        };
        let p = glob::Pattern::new(pat).map_err(|e| {
            origin.error(
                ErrorKind::Queue,
                format!("bad pattern {pattern:?} in `queue ... matching`: {e}"),
            )
        })?;
        let base = resolve(dir, sub);
        let mut out = Vec::new();
        let opts = glob::MatchOptions { require_literal_leading_dot: true, ..Default::default() };
        for (name, is_dir) in self.ctx.fs.read_dir(&base).unwrap_or_default() {
            let ok = match what {
                MatchKind::Any => true,
                MatchKind::Files => !is_dir,
                MatchKind::Dirs => is_dir,
            };
            if ok && p.matches_with(&name, opts) {
                out.push(format!("{sub}{name}"));
            }
        }
        out.sort();
        Ok(out)
    }
}

/// What [`prepared`] gives: the run, and the last queue statement with where it is.
type Prepared<'r, 'c, 'f> = (Run<'c, 'f>, Option<(&'r QueueStatement, Origin)>);

/// A [`Run`] of `desc` with its commands and macros applied up to its last
/// `queue` statement (or all of them when it has none), as the first job
/// sees them (`Process`, `ProcId`, `Step`, `Row` 0): what
/// [`expand_value`] and [`itemdata`] read; the last queue statement, if any.
fn prepared<'r, 'c, 'f>(
    desc: &'r SubmitDescription,
    ctx: &'c Context<'f>,
) -> Result<Prepared<'r, 'c, 'f>, SubmitError> {
    let mut run = Run::new(desc, ctx);
    for n in ["Process", "ProcId", "Step", "Row", "ItemIndex"] {
        run.macros.builtin(n, "0");
    }
    let mut last = None;
    for st in &desc.statements {
        let origin = Origin { source: desc.source.clone(), line: Some(st.line) };
        match &st.kind {
            StatementKind::Queue(q) => last = Some((q, origin)),
            k => run.apply(k, &origin)?,
        }
    }
    Ok((run, last))
}

/// The value of the submit command or macro `name` in `desc`, every macro
/// in it expanded as for the first job (`Process` 0, `Cluster` the
/// context's; a queue statement's variables are not defined), or `None`
/// when nothing defines it: htcondor2's `Submit.expand`.
pub fn expand_value(
    desc: &SubmitDescription,
    ctx: &Context<'_>,
    name: &str,
) -> Result<Option<String>, SubmitError> {
    let (mut run, _) = prepared(desc, ctx)?;
    if !run.macros.is_defined(name) {
        return Ok(None);
    }
    let iwd = ctx.iwd.clone();
    run.macros.get(name, &iwd, &desc.source)
}

/// The items of `desc`'s last `queue` statement: its variables (`Item`
/// when it names none) and, for each item, their values, as the jobs would
/// get them (item files read, globs matched); `None` when the statement has
/// no items (`queue 3`) or there is none: htcondor2's `Submit.itemdata`.
#[allow(clippy::type_complexity)]
pub fn itemdata(
    desc: &SubmitDescription,
    ctx: &Context<'_>,
) -> Result<Option<(Vec<String>, Vec<Vec<String>>)>, SubmitError> {
    let (mut run, last) = prepared(desc, ctx)?;
    let Some((q, origin)) = last else { return Ok(None) };
    if matches!(q.items, ItemSource::None) {
        return Ok(None);
    }
    let rows = run.item_rows(q, &origin)?;
    let vars: Vec<String> =
        if q.vars.is_empty() { vec!["Item".to_string()] } else { q.vars.clone() };
    let split = matches!(q.items, ItemSource::FromRows(_) | ItemSource::FromFile(_));
    let rows = rows.iter().map(|r| split_row(r, vars.len(), split)).collect();
    Ok(Some((vars, rows)))
}

/// Splits an item row among `n` variables: fields are separated by commas
/// and/or white space, and the last variable takes the rest of the row.
/// With one variable the whole row (trimmed) is the value; `in` lists
/// (`rows == false`) hold one value per item.
fn split_row(row: &str, n: usize, rows: bool) -> Vec<String> {
    if n <= 1 || !rows {
        return vec![row.trim().to_string()];
    }
    let mut out = Vec::with_capacity(n);
    let mut rest = row.trim();
    for _ in 0..n - 1 {
        let end = rest.find(|c: char| c == ',' || c.is_whitespace()).unwrap_or(rest.len());
        out.push(rest[..end].to_string());
        rest = rest[end..].trim_start_matches(|c: char| c == ',' || c.is_whitespace());
    }
    out.push(rest.trim().to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_split_like_htcondor() {
        assert_eq!(split_row("first, second value", 2, true), ["first", "second value"]);
        assert_eq!(split_row("a b c", 2, true), ["a", "b c"]);
        assert_eq!(split_row("a", 3, true), ["a", "", ""]);
        assert_eq!(split_row(" x y ", 1, true), ["x y"]);
        assert_eq!(normalize("/iwd/./sub//"), "/iwd/sub");
        assert_eq!(resolve("/iwd", "a/b"), "/iwd/a/b");
        assert_eq!(resolve("/iwd", "/abs"), "/abs");
    }
}
