//! Queueing a DAG's DAGMan as a job of the schedd (`andes submit-dag`,
//! condor_submit_dag, and the Python package's `Submit.from_dag`): the DAG
//! is checked whole first ([`crate::prepare`]), then one job of the
//! scheduler universe is queued, which the schedd runs as its owner.

use std::path::{Path, PathBuf};

use andes_job::dagman::{DAG_ENV, DAG_FILE, SCHEDULER_UNIVERSE};
use andes_protocol::Client;
use anyhow::{Context as _, Result, bail};
use classad::{ClassAd, Value};

use crate::{DagFiles, Options, Prepared, prepare};

/// The environment a DAGMan job takes from its submitter: what finds the
/// pool and the user's key, and what its scripts run with.
pub const KEPT_ENV: &[&str] =
    &["ANDES_CONFIG", "ANDES_CONFIG_DIR", "USER", "LOGNAME", "HOME", "PATH", "LANG", "TZ"];

/// condor_submit_dag's options that apply.
#[derive(Clone, Debug, Default)]
pub struct SubmitDag {
    /// `-maxjobs`.
    pub max_jobs: Option<u32>,
    /// `-maxidle`.
    pub max_idle: Option<u32>,
    /// `-maxpre`.
    pub max_pre: Option<u32>,
    /// `-maxpost`.
    pub max_post: Option<u32>,
    /// `-AlwaysRunPost`.
    pub always_run_post: bool,
    /// `-usedagdir`.
    pub use_dag_dir: bool,
    /// `-batch-name` (one word).
    pub batch_name: Option<String>,
    /// `-force`: earlier rescue DAGs are set aside.
    pub force: bool,
    /// `-DoRecov`.
    pub recover: bool,
    /// Seconds a script may run.
    pub script_timeout: Option<u64>,
    /// `-append`: submit commands added to the DAGMan job's description
    /// (`+Attr = value`, `accounting_group = g`, `priority = 5`, ...).
    pub append: Vec<String>,
    /// `-autorescue 0`: the DAG runs from its start, rescue DAGs or not.
    pub no_autorescue: bool,
    /// `-outfile_dir`: where `<dag>.dagman.out` is written.
    pub outfile_dir: Option<PathBuf>,
    /// `-import_env`: the DAGMan job (and so its scripts and node submits)
    /// takes the submitter's whole environment, not only [`KEPT_ENV`].
    pub import_env: bool,
}

/// Attributes that make a DAGMan job what it is: `-append` may not change them.
const DAGMAN_OWN: &[&str] = &[
    "JobUniverse",
    "Cmd",
    "Arguments",
    "Args",
    "Iwd",
    "Owner",
    "ClusterId",
    "ProcId",
    "JobStatus",
    "Out",
    "Err",
    "UserLog",
    "In",
    DAG_FILE,
    DAG_ENV,
    "DAGManDagName",
];

/// The attributes `-append`'s `lines` give the DAGMan job: the submit
/// commands are read by the submit language itself, and what they change in
/// a job's ad (against the same job without them) is taken. A line that
/// does not parse, or that would change what makes the job a DAGMan, is
/// refused, naming it.
pub fn appended_attrs(lines: &[String], iwd: &Path) -> Result<ClassAd> {
    if lines.is_empty() {
        return Ok(ClassAd::new());
    }
    const EXE: &str = "/andes-dagman/condor_dagman.wasm";
    let mut fs = andes_submit::MemFs::new();
    fs.add(EXE, b"\0asm\x01\0\0\0".to_vec());
    let iwd = iwd.to_string_lossy();
    let job = |extra: &str| -> Result<ClassAd> {
        let text = format!("executable = {EXE}\n{extra}queue\n");
        let d =
            andes_submit::parse(&text, "-append").map_err(|e| anyhow::anyhow!("-append: {e}"))?;
        let ctx = andes_submit::Context::new(1, 0, iwd.as_ref()).with_fs(&fs);
        let mut out =
            andes_submit::expand(&d, &ctx).map_err(|e| anyhow::anyhow!("-append: {e}"))?;
        Ok(out.jobs.swap_remove(0))
    };
    let plain = job("")?;
    let mut extra = String::new();
    for l in lines {
        if l.contains('\n') || l.trim_start().to_ascii_lowercase().starts_with("queue") {
            bail!("-append {l:?}: one submit command, not a queue statement or several lines");
        }
        extra.push_str(l);
        extra.push('\n');
    }
    let with = job(&extra)?;
    let mut ad = ClassAd::new();
    for (name, expr) in with.iter() {
        let same = plain.lookup(name).is_some_and(|e| e.to_string() == expr.to_string());
        if same {
            continue;
        }
        if DAGMAN_OWN.iter().any(|a| a.eq_ignore_ascii_case(name.as_str())) {
            bail!(
                "-append: {name} is the DAGMan job's own and may not be changed ({})",
                lines.join("; ")
            );
        }
        ad.insert(name.as_str(), expr.clone());
    }
    Ok(ad)
}

impl SubmitDag {
    /// The `andes dagman` arguments these options make.
    pub fn dagman_args(&self) -> Result<Vec<String>> {
        let mut a: Vec<String> = Vec::new();
        let mut opt = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                a.push(format!("--{name}"));
                a.push(v);
            }
        };
        opt("maxjobs", self.max_jobs.map(|v| v.to_string()));
        opt("maxidle", self.max_idle.map(|v| v.to_string()));
        opt("maxpre", self.max_pre.map(|v| v.to_string()));
        opt("maxpost", self.max_post.map(|v| v.to_string()));
        opt("script-timeout", self.script_timeout.map(|v| v.to_string()));
        opt("autorescue", self.no_autorescue.then(|| "0".to_string()));
        opt("outfile_dir", self.outfile_dir.as_ref().map(|d| d.display().to_string()));
        if let Some(b) = &self.batch_name {
            if b.split_whitespace().count() != 1 {
                bail!("-batch-name: one word, please ({b:?})");
            }
            opt("batch-name", Some(b.clone()));
        }
        for (flag, on) in [
            ("--AlwaysRunPost", self.always_run_post),
            ("--usedagdir", self.use_dag_dir),
            ("--DoRecov", self.recover),
        ] {
            if on {
                a.push(flag.into());
            }
        }
        Ok(a)
    }
}

/// A DAG checked and its DAGMan job made, ready to queue.
#[derive(Debug)]
pub struct DagmanJob {
    /// The DAG as DAGMan will read it.
    pub prepared: Prepared,
    /// The job's ad, without its cluster.
    pub ad: ClassAd,
    /// The DAG file (absolute).
    pub dag: PathBuf,
}

/// Checks the DAG `dag` whole (refusing a running one's, unless
/// recovering) and makes its DAGMan job, to be queued from `iwd` by
/// `owner` with the submitter's environment `env` (what [`KEPT_ENV`] and the
/// DAG's `ENV GET` name is kept).
pub fn dagman_job(
    dag: &Path,
    iwd: &Path,
    owner: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    o: &SubmitDag,
) -> Result<DagmanJob> {
    let dag = iwd.join(dag);
    let files = DagFiles::of(&dag);
    if files.lock.exists() && !o.recover {
        bail!(
            "{} exists: a DAGMan of this DAG may be running (andes q shows it); if it is not, \
             submit with -DoRecov to recover it",
            files.lock.display()
        );
    }
    if o.force {
        set_rescues_aside(&dag)?;
    }
    let mut opts = Options::new(&dag, "andes");
    opts.use_dag_dir = o.use_dag_dir;
    // Its DAGMan runs in `iwd`: the DAG is read from there, as it will.
    opts.working_dir = Some(iwd.to_path_buf());
    opts.autorescue = !o.no_autorescue;
    let prepared = prepare(&opts)?;
    let args = o.dagman_args()?;
    let mut keep: Vec<String> = KEPT_ENV.iter().map(|k| k.to_string()).collect();
    if o.import_env {
        keep.extend(std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()));
        keep.sort();
        keep.dedup();
    }
    for e in &prepared.dag.env {
        if let andes_dag::EnvCommand::Get(names) = e {
            keep.extend(names.iter().cloned());
        }
    }
    let vars: Vec<Value> =
        keep.iter().filter_map(|k| env(k).map(|v| Value::string(format!("{k}={v}")))).collect();
    let mut ad = ClassAd::new();
    ad.insert_value("JobUniverse", SCHEDULER_UNIVERSE);
    ad.insert_value("Cmd", "condor_dagman");
    ad.insert_value(DAG_FILE, dag.to_string_lossy().as_ref());
    ad.insert_value("Arguments", args.join(" "));
    ad.insert_value("Iwd", iwd.to_string_lossy().as_ref());
    ad.insert_value("Out", format!("{}.lib.out", dag.display()));
    ad.insert_value("Err", format!("{}.lib.err", dag.display()));
    ad.insert_value("UserLog", format!("{}.dagman.log", dag.display()));
    ad.insert_value("JobStatus", 1i64);
    ad.insert_value("KillSig", "SIGTERM");
    if let Some(b) = &o.batch_name {
        ad.insert_value("JobBatchName", b.as_str());
    }
    if let Some(o) = owner {
        ad.insert_value("Owner", o);
    }
    ad.insert_value("DAGManDagName", file_name(&dag).as_str());
    ad.insert_value(DAG_ENV, Value::list(vars));
    ad.update(&appended_attrs(&o.append, iwd)?);
    Ok(DagmanJob { prepared, ad, dag })
}

/// Queues `job` at the schedd `client`; its cluster. The ad gets its
/// cluster, and (without `-batch-name`) the batch name `<dag>+<cluster>`
/// its nodes will carry, and is written to `<dag>.condor.sub`.
pub async fn queue(client: &Client, job: &mut DagmanJob, now: i64) -> Result<u32> {
    let cluster = andes_client::submit::reserve_cluster(client).await?;
    job.ad.insert_value("ClusterId", i64::from(cluster));
    job.ad.insert_value("QDate", now);
    if !job.ad.contains("JobBatchName") {
        job.ad.insert_value("JobBatchName", format!("{}+{cluster}", file_name(&job.dag)));
    }
    let req = andes_job::api::SubmitRequest {
        cluster: Some(cluster),
        cluster_ad: job.ad.to_string(),
        procs: vec!["[ProcId = 0]".into()],
    };
    let r: andes_job::api::SubmitReply =
        client.call(http::Method::POST, "/v1/submit", Some(&req)).await?;
    write_condor_sub(job)?;
    Ok(r.cluster)
}

/// `<dag>.condor.sub`: the DAGMan job's ad, as queued (or, with
/// `-no_submit`, as it would be).
pub fn write_condor_sub(job: &DagmanJob) -> Result<PathBuf> {
    let mut s = job.dag.clone().into_os_string();
    s.push(".condor.sub");
    let path = PathBuf::from(s);
    std::fs::write(&path, format!("{}\n", job.ad.to_old_syntax()))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// The last component of `p`.
pub fn file_name(p: &Path) -> String {
    p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
}

/// `-force`: the rescue DAGs of an earlier run are renamed `.old`, so the
/// DAG runs from its start.
pub fn set_rescues_aside(dag: &Path) -> Result<()> {
    while let Some((_, p)) = andes_dag::rescue::newest_rescue(dag) {
        let mut old = p.clone().into_os_string();
        old.push(".old");
        std::fs::rename(&p, &old).with_context(|| format!("cannot rename {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(lines: &[&str]) -> Result<ClassAd> {
        let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        appended_attrs(&lines, Path::new("/home/u"))
    }

    /// `-append` takes submit commands as condor_submit reads them: custom
    /// attributes in both forms and ordinary commands, with their
    /// attribute names.
    #[test]
    fn append_adds_what_the_submit_commands_say() {
        let ad = append(&[
            "+Experiment = \"lhc\"",
            "My.Shift = 3",
            "priority = 5",
            "notify_user = me@example.org",
        ])
        .unwrap();
        assert_eq!(ad.eval_attr("Experiment").as_str(), Some("lhc"));
        assert_eq!(ad.eval_attr("Shift").as_int(), Some(3));
        assert_eq!(ad.eval_attr("NotifyUser").as_str(), Some("me@example.org"));
        assert_eq!(ad.eval_attr("JobPrio").as_int(), Some(5));
        assert!(append(&[]).unwrap().iter().next().is_none());
    }

    /// What makes the job a DAGMan, a queue statement and a line the submit
    /// language refuses are each refused, saying which.
    #[test]
    fn append_refuses_what_would_unmake_the_dagman() {
        for (line, want) in [
            ("+JobUniverse = 9", "JobUniverse is the DAGMan job's own"),
            ("arguments = -x", "Args is the DAGMan job's own"),
            ("+DAGManDagFile = \"/etc/passwd\"", "DAGManDagFile is the DAGMan job's own"),
            ("queue 2", "not a queue statement"),
            ("priority = high", "-append"),
            ("+Bad = (", "-append"),
        ] {
            let e = append(&[line]).unwrap_err().to_string();
            assert!(e.contains(want), "{line}: {e}");
        }
    }
}
