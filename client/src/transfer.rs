//! Fetching the output of spooled jobs (submitted with `spool`) from the
//! schedd's spool, as `andes transfer-data` and the Python `Schedd.retrieve`
//! do: each job's files and events are written out, then the completed jobs
//! fetched may leave the queue.
//!
//! A job's files go where its ad says only when the job is the caller's
//! own: paths in someone else's ad are theirs to choose, and writing there
//! with the caller's rights (an admin's, root's) would let them choose what
//! the caller overwrites. Anyone else's job is fetched into a directory the
//! caller names ([`Retrieve::dir`]), under names of the job's (`C.P.out`,
//! `C.P.err`, `C.P.log`, its other files by their own names), with no link
//! followed.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use andes_job::api::{ChangeReport, QueryReply, QueryRequest, TransferDoneRequest, TransferReply};
use andes_job::files as transfer;
use andes_job::ids::{JobId, JobSelector};
use andes_protocol::Client;
use andes_protocol::pool::{STDERR_NAME, STDOUT_NAME};
use anyhow::{Context, Result, anyhow, bail};

/// Which spooled jobs to fetch, and where to.
#[derive(Clone, Debug, Default)]
pub struct Retrieve {
    /// Job ids or clusters; with none, the caller's own spooled jobs (those
    /// `constraint` selects, completed ones unless `all`).
    pub ids: Vec<JobSelector>,
    /// Only the jobs this ClassAd expression is true of.
    pub constraint: Option<String>,
    /// With no ids: every spooled job of the caller's, completed or not
    /// (what each has so far).
    pub all: bool,
    /// Writes each job's files into this directory (under `C.P/`) rather
    /// than where its ad says; needed for another user's jobs.
    pub dir: Option<PathBuf>,
    /// How the caller names such a directory (`give --dir DIR`), said when
    /// another user's job is refused for want of one.
    pub dir_hint: Option<String>,
}

/// One job whose output was fetched.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The job.
    pub id: JobId,
    /// How many files it had.
    pub files: usize,
    /// The directory its files went into, when [`Retrieve::dir`] named one.
    pub into: Option<PathBuf>,
}

/// What a retrieve did.
#[derive(Clone, Debug, Default)]
pub struct Retrieved {
    /// The jobs fetched, in order.
    pub fetched: Vec<Fetched>,
    /// Jobs fetched that the schedd did not let leave the queue, and why.
    pub kept: Vec<(JobId, String)>,
}

/// Fetches the spooled jobs `what` selects, for the caller `me` (the name of
/// the key the requests are signed with), telling `each` of every job as its
/// files are written. An error when ids were named and none is a spooled
/// job the caller may fetch; no job at all otherwise is no error.
pub async fn retrieve(
    c: &Client,
    me: Option<&str>,
    what: &Retrieve,
    mut each: impl FnMut(&Fetched),
) -> Result<Retrieved> {
    let mut targets = andes_job::api::Targets { ids: what.ids.clone(), ..Default::default() };
    // With no ids, your own jobs: the schedd knows you by your key's name.
    if targets.ids.is_empty() {
        targets.owners = me.map(str::to_string).into_iter().collect();
    }
    let mut constraint = format!("{} =!= undefined", transfer::SPOOLED_INPUT);
    if targets.ids.is_empty() && !what.all {
        constraint.push_str(" && JobStatus == 4");
    }
    if let Some(user) = &what.constraint {
        constraint = format!("{constraint} && ({user})");
    }
    targets.constraint = Some(constraint);
    let req = QueryRequest {
        targets,
        projection: vec!["ClusterId".into(), "ProcId".into()],
        limit: None,
        mine: false,
        group_by: None,
    };
    let found: QueryReply = c.call(http::Method::POST, "/v1/query", Some(&req)).await?;
    let mut ids = Vec::new();
    for text in &found.ads {
        let ad = classad::parse_ad(text).map_err(|e| anyhow!("the schedd's answer: {e}"))?;
        match (ad.eval_attr("ClusterId"), ad.eval_attr("ProcId")) {
            (classad::Value::Int(c), classad::Value::Int(p)) => {
                ids.push((JobId::new(c as u32, p as u32), transfer::input_limit(&ad)))
            }
            _ => bail!("the schedd's answer names a job without ClusterId and ProcId"),
        }
    }
    if ids.is_empty() && !what.ids.is_empty() {
        let named: Vec<String> = what.ids.iter().map(|s| s.to_string()).collect();
        bail!(
            "none of {} is a job submitted with spool that you may fetch (the output of a \
             spooled job is its owner's)",
            named.join(", ")
        );
    }
    let mut out = Retrieved::default();
    if ids.is_empty() {
        return Ok(out);
    }
    let mut done = Vec::new();
    for (id, limit) in ids {
        let got = transfer::fetch_spooled(c, id, limit).await.map_err(|e| anyhow!(e))?;
        let r = &got.reply;
        let ad = classad::parse_ad(&r.ad).map_err(|e| anyhow!("job {id}'s ad: {e}"))?;
        let mut staged = got.staged.open().map_err(|e| anyhow!(e))?;
        let owner = match ad.eval_attr("Owner") {
            classad::Value::Str(o) => o.to_string(),
            _ => String::new(),
        };
        let into = match &what.dir {
            Some(dir) => {
                write_into(dir, id, r, &mut staged).with_context(|| format!("job {id}"))?;
                Some(dir.join(id.to_string()))
            }
            None if me == Some(owner.as_str()) => {
                write_output(&ad, r, &mut staged).with_context(|| format!("job {id}"))?;
                None
            }
            None => bail!(
                "job {id} belongs to {owner}: its output goes where its ad says only when \
                 its owner fetches it; fetch it as {owner}{}",
                what.dir_hint.as_ref().map(|h| format!(", or {h}")).unwrap_or_default()
            ),
        };
        let f = Fetched { id, files: r.files.len(), into };
        each(&f);
        out.fetched.push(f);
        done.push(id);
    }
    let report: ChangeReport = c
        .call(http::Method::POST, "/v1/transfer/done", Some(&TransferDoneRequest { jobs: done }))
        .await?;
    out.kept = report.skipped;
    Ok(out)
}

/// The path of a job's event log: `UserLog`, relative to `Iwd` unless absolute.
fn log_path(ad: &classad::ClassAd) -> Option<PathBuf> {
    let classad::Value::Str(log) = ad.eval_attr("UserLog") else { return None };
    if log.is_empty() {
        return None;
    }
    let p = Path::new(&*log);
    match ad.eval_attr("Iwd") {
        classad::Value::Str(iwd) if !p.is_absolute() => Some(Path::new(&*iwd).join(p)),
        _ => Some(p.to_path_buf()),
    }
}

/// Writes a spooled job's output where it would have gone without spool:
/// its streams to `Out` and `Err`, other files into `Iwd`, its events
/// appended to its `UserLog`.
fn write_output(
    ad: &classad::ClassAd,
    r: &TransferReply,
    staged: &mut HashMap<String, std::fs::File>,
) -> Result<()> {
    transfer::write_outputs(ad, &r.files, staged).map_err(|e| anyhow!(e))?;
    if !r.log.is_empty()
        && let Some(path) = log_path(ad)
    {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let mut o = std::fs::OpenOptions::new();
        o.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW);
        let mut f =
            o.open(&path).with_context(|| format!("opening the job's log {}", path.display()))?;
        if !f.metadata()?.is_file() {
            bail!("the job's log {} is not a regular file", path.display());
        }
        f.write_all(r.log.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Writes a spooled job's output beneath `dir`, in `C.P/`: its streams as
/// `C.P.out` and `C.P.err`, its other files by their names, its events as
/// `C.P.log`; no link is followed, at any depth.
fn write_into(
    dir: &Path,
    id: JobId,
    r: &TransferReply,
    staged: &mut HashMap<String, std::fs::File>,
) -> Result<()> {
    let root = andes_beneath::Beneath::create(dir)
        .with_context(|| format!("opening {}", dir.display()))?;
    let name = |file: &str| match file {
        STDOUT_NAME => format!("{id}/{id}.out"),
        STDERR_NAME => format!("{id}/{id}.err"),
        other => format!("{id}/{other}"),
    };
    for f in &r.files {
        let path = name(&f.name);
        let mut out = root.create_file(&path).map_err(|e| anyhow!("{}: {e}", dir.display()))?;
        match (&f.streamed, staged.get_mut(&f.name)) {
            (None, _) => out.write_all(&f.data)?,
            (Some(_), Some(from)) => {
                std::io::copy(from, &mut out)?;
            }
            (Some(_), None) => bail!("{} was not transferred", f.name),
        }
    }
    if !r.log.is_empty() {
        root.write(&format!("{id}/{id}.log"), r.log.as_bytes())
            .map_err(|e| anyhow!("{}: {e}", dir.display()))?;
    }
    Ok(())
}
