//! `andes q` and `andes history`: condor_q's and condor_history's views of jobs.

use std::process::ExitCode;

use andes_schedd::api::{
    HistoryRequest, QueryReply, QueryRequest, SummaryReply, SummaryRequest, Targets, Totals,
};
use andes_schedd::job::{JobSelector, JobStatus};
use anyhow::{Result, anyhow};
use clap::Args;
use classad::{ClassAd, Value};

use crate::cmd::client::{self, Session};
pub use crate::cmd::format::Format;
use crate::cmd::format::{af_value, int, string};

/// Arguments of `andes q`.
#[derive(Args, Debug)]
pub struct QArgs {
    /// Job ids (`C` or `C.P`) or owners to show. Without them, only your own
    /// jobs, as condor_q shows (every job for an admin of the pool, or with
    /// `-allusers`, or when CONDOR_Q_ONLY_MY_JOBS is false).
    selection: Vec<String>,
    /// Every user's jobs, not only yours.
    #[arg(long)]
    allusers: bool,
    /// One line per job instead of one per batch.
    #[arg(long)]
    nobatch: bool,
    /// One line per job, each DAG's node jobs under its DAGMan job, named
    /// by their nodes (condor_q -nobatch -dag).
    #[arg(long)]
    dag: bool,
    /// Held jobs, with their hold reasons.
    #[arg(long)]
    hold: bool,
    /// Running jobs, with where they run.
    #[arg(long)]
    run: bool,
    /// Only jobs for which this ClassAd expression is true.
    #[arg(long, value_name = "EXPR")]
    constraint: Option<String>,
    /// Only the schedd's banner and the totals lines.
    #[arg(long)]
    totals: bool,
    /// Why each selected job runs or not, as condor_q -better-analyze shows it:
    /// each clause of its Requirements with the slots it matches, the slots
    /// that refuse it by their own requirements, and the negotiator's last word.
    #[arg(long = "better-analyze", visible_alias = "analyze")]
    analyze: bool,
    #[command(flatten)]
    format: Format,
}

/// Arguments of `andes history`.
#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// Job ids (`C` or `C.P`) or owners whose jobs to show.
    owners: Vec<String>,
    /// At most this many jobs (newest first).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Only jobs for which this ClassAd expression is true.
    #[arg(long, value_name = "EXPR")]
    constraint: Option<String>,
    #[command(flatten)]
    format: Format,
}

/// Splits command-line words into job ids and owners.
pub fn selection(words: &[String]) -> Result<Targets> {
    let mut t = Targets::default();
    for w in words {
        if w.starts_with(|c: char| c.is_ascii_digit()) {
            t.ids.push(w.parse::<JobSelector>().map_err(|e| anyhow!(e))?);
        } else {
            t.owners.push(w.clone());
        }
    }
    Ok(t)
}

fn and(a: Option<String>, b: &str) -> Option<String> {
    Some(match a {
        Some(a) => format!("({a}) && ({b})"),
        None => b.to_string(),
    })
}

/// Runs `andes q`.
pub fn run(args: QArgs) -> Result<ExitCode> {
    let mut targets = selection(&args.selection)?;
    targets.constraint = args.constraint.clone();
    let settings = crate::settings::Settings::load()?;
    let mine = !args.allusers && settings.bool("CONDOR_Q_ONLY_MY_JOBS", true)?;
    let session = Session::open_url(&settings, settings.schedd_url()?)?;
    if args.analyze {
        let req =
            QueryRequest { targets, projection: Vec::new(), limit: None, mine, group_by: None };
        let r: QueryReply =
            session.block_on(session.client.call(http::Method::POST, "/v1/query", Some(&req)))?;
        let jobs = parse_ads(&r)?;
        if jobs.is_empty() {
            outln!("No job matches.");
            return Ok(ExitCode::SUCCESS);
        }
        let slots = crate::cmd::status::machine_ads()?;
        for job in &jobs {
            out!("{}", analyze(job, &slots));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let per_job = args.nobatch || args.dag || args.hold || args.run || args.format.is_set();
    // condor_q's banner and the whole queue's totals go with every table
    // (batches, -nobatch, -dag, -hold, -run, -totals), never with the ads
    // themselves (-af, -format, -long, -json).
    let summary = if args.format.is_set() {
        None
    } else {
        let req = SummaryRequest { owners: targets.owners.clone(), mine };
        let r: SummaryReply =
            session.block_on(session.client.call(http::Method::POST, "/v1/summary", Some(&req)))?;
        Some(r)
    };
    // Said once the answer is in: a query refused prints nothing but why.
    let head = |summary: &Option<SummaryReply>| {
        if let Some(r) = summary {
            outln!("\n{}", banner(&r.schedd, &session.url, client::now()));
        }
    };
    let all_users = targets.owners.is_empty();
    // condor_q's default query (your own jobs) adds `Total for YOU`, where the
    // schedd kept to your jobs (an admin's answer holds everyone's).
    let own = mine && all_users && targets.ids.is_empty() && targets.constraint.is_none();
    let me = settings.get("KEY_NAME")?;
    let everyone = |table: &mut String| {
        let Some(r) = &summary else { return };
        if own
            && let Some(me) = &me
            && r.rows.iter().all(|row| row.owner == *me)
        {
            table.push_str(&totals_line(me, &rows_totals(&r.rows)));
        }
        if all_users {
            table.push_str(&totals_line("all users", &r.totals));
        }
    };
    if !per_job && targets.ids.is_empty() && targets.constraint.is_none() {
        let r = summary.as_ref().ok_or_else(|| anyhow!("the schedd's summary is missing"))?;
        let mut table = summary_table(r);
        everyone(&mut table);
        head(&summary);
        out!("{}", if args.totals { totals_only(&table) } else { table });
        return Ok(ExitCode::SUCCESS);
    }
    if args.hold {
        targets.constraint = and(targets.constraint, "JobStatus == 5");
    }
    if args.run {
        targets.constraint = and(targets.constraint, "JobStatus == 2 || JobStatus == 7");
    }
    args.format.check()?;
    let req = QueryRequest {
        targets,
        projection: args.format.projection(),
        limit: None,
        mine,
        group_by: None,
    };
    let r: QueryReply =
        session.block_on(session.client.call(http::Method::POST, "/v1/query", Some(&req)))?;
    let ads = parse_ads(&r)?;
    let mut out = if args.format.is_set() {
        args.format.render(&ads)
    } else if args.hold {
        hold_table(&ads)
    } else if args.run {
        run_table(&ads)
    } else if args.dag {
        job_table(&dag_order(ads), true)
    } else {
        job_table(&ads, false)
    };
    everyone(&mut out);
    head(&summary);
    out!("{}", if args.totals { totals_only(&out) } else { out });
    Ok(ExitCode::SUCCESS)
}

/// condor_q's banner: `-- Schedd: NAME : <ADDRESS> @ MM/DD/YY HH:MM:SS`,
/// the address as the schedd was reached (`host:port`).
fn banner(name: &str, url: &str, now: i64) -> String {
    let addr = url.split("://").last().unwrap_or(url).trim_end_matches('/');
    format!("-- Schedd: {name} : <{addr}> @ {}", short_date_year(now))
}

/// Runs `andes history`.
pub fn history(args: HistoryArgs) -> Result<ExitCode> {
    let session = Session::open()?;
    // Job ids (`C` or `C.P`) as condor_history takes them, besides owners.
    let t = selection(&args.owners)?;
    let mut constraint = args.constraint;
    if !t.ids.is_empty() {
        let ids: Vec<String> = t
            .ids
            .iter()
            .map(|s| match s {
                JobSelector::Job(j) => {
                    format!("(ClusterId == {} && ProcId == {})", j.cluster, j.proc)
                }
                JobSelector::Cluster(c) => format!("ClusterId == {c}"),
            })
            .collect();
        constraint = and(constraint, &ids.join(" || "));
    }
    args.format.check()?;
    let req = HistoryRequest {
        constraint,
        owners: t.owners,
        limit: args.limit,
        projection: args.format.projection(),
    };
    let r: QueryReply =
        session.block_on(session.client.call(http::Method::POST, "/v1/history", Some(&req)))?;
    let ads = parse_ads(&r)?;
    if args.format.is_set() {
        out!("{}", args.format.render(&ads));
    } else {
        out!("{}", history_table(&ads));
    }
    Ok(ExitCode::SUCCESS)
}

/// The ads of a schedd's answer, each checked.
pub(crate) fn parse_ads(r: &QueryReply) -> Result<Vec<ClassAd>> {
    r.ads
        .iter()
        .map(|t| classad::parse_ad(t).map_err(|e| anyhow!("the schedd sent a bad ad: {e}")))
        .collect()
}

/// condor_q -better-analyze's account of one job against the pool's slots.
pub(crate) fn analyze(job: &ClassAd, slots: &[ClassAd]) -> String {
    use classad::eval::Evaluator;
    use classad::matching::{conjuncts, requirements_hold};
    let id = format!("{:03}.{:03}", int(job, "ClusterId"), int(job, "ProcId"));
    let mut ev = Evaluator::new();
    let mut out = String::new();
    let req = job.get("Requirements");
    out.push_str(&format!(
        "\nThe Requirements expression for job {id} is\n\n    {}\n\n",
        req.map_or_else(|| "(none: every slot)".to_string(), |r| r.to_string())
    ));
    let defined: Vec<String> = ["RequestCpus", "RequestMemory", "RequestDisk"]
        .iter()
        .filter_map(|n| job.get(n).map(|_| format!("    {n} = {}", af_value(&job.eval_attr(n)))))
        .collect();
    if !defined.is_empty() {
        out.push_str(&format!(
            "Job {id} defines the following attributes:\n\n{}\n\n",
            defined.join("\n")
        ));
    }
    if let Some(req) = req {
        out.push_str(&format!(
            "The Requirements expression for job {id} reduces to these conditions:\n\n\
             {:>14}\nStep    Matched  Condition\n-----  --------  ---------\n",
            "Slots"
        ));
        for (k, c) in conjuncts(req).into_iter().enumerate() {
            let n = slots
                .iter()
                .filter(|s| ev.eval(c, Some(job), Some(s)).as_bool() == Some(true))
                .count();
            out.push_str(&format!("[{k}] {n:>10}  {c}\n"));
        }
        out.push('\n');
    }
    let owner = string(job, "Owner");
    let (mut by_job, mut by_slot, mut mine, mut others, mut able) = (0, 0, 0, 0, 0);
    for s in slots {
        if !requirements_hold(&mut ev, job, s) {
            by_job += 1;
        } else if !requirements_hold(&mut ev, s, job) {
            by_slot += 1;
        } else if string(s, "State") == "Claimed" && string(s, "RemoteOwner") == owner {
            mine += 1;
        } else if string(s, "State") == "Claimed" {
            others += 1;
        } else {
            able += 1;
        }
    }
    out.push_str(&format!(
        "{id}:  Run analysis summary ignoring user priority.  Of {} machines,\n\
         {by_job:>7} are rejected by your job's requirements\n\
         {by_slot:>7} reject your job because of their own requirements\n\
         {mine:>7} match and are already running your jobs\n\
         {others:>7} match but are serving other users\n\
         {able:>7} are able to run your job\n",
        slots.len()
    ));
    match JobStatus::from_code(int(job, "JobStatus")) {
        Some(JobStatus::Running) => {
            out.push_str(&format!("\nJob {id} is running on {}.\n", string(job, "RemoteHost")))
        }
        Some(JobStatus::Held) => {
            out.push_str(&format!("\nJob {id} is held: {}\n", string(job, "HoldReason")))
        }
        _ => {}
    }
    let reason = string(job, "LastRejMatchReason");
    if !reason.is_empty() {
        out.push_str(&format!(
            "\nThe negotiator's last word on job {id} ({}): {reason}\n",
            short_date(int(job, "LastRejMatchTime"))
        ));
    } else if int(job, "JobStatus") == 1 && able == 0 {
        out.push_str(&format!("\nNo slot can run job {id} now.\n"));
    }
    out
}

/// The `Total for ...` lines of a table (`-totals`).
fn totals_only(table: &str) -> String {
    table.lines().filter(|l| l.starts_with("Total for ")).map(|l| format!("{l}\n")).collect()
}

/// `MM/DD HH:MM` in local time, as condor_q prints dates.
pub fn short_date(t: i64) -> String {
    match jiff::Timestamp::from_second(t) {
        Ok(ts) => ts.to_zoned(jiff::tz::TimeZone::system()).strftime("%m/%d %H:%M").to_string(),
        Err(_) => "??/?? ??:??".into(),
    }
}

/// `MM/DD/YY HH:MM:SS` in local time, as condor_q's header prints the time.
fn short_date_year(t: i64) -> String {
    match jiff::Timestamp::from_second(t) {
        Ok(ts) => {
            ts.to_zoned(jiff::tz::TimeZone::system()).strftime("%m/%d/%y %H:%M:%S").to_string()
        }
        Err(_) => String::new(),
    }
}

/// `D+HH:MM:SS`, as condor_q prints durations.
pub fn duration(secs: i64) -> String {
    let s = secs.max(0);
    format!("{}+{:02}:{:02}:{:02}", s / 86400, s / 3600 % 24, s / 60 % 60, s % 60)
}

fn dash(n: u64) -> String {
    if n == 0 { "_".into() } else { n.to_string() }
}

fn totals_line(label: &str, t: &Totals) -> String {
    format!(
        "Total for {label}: {} jobs; {} completed, {} removed, {} idle, {} running, {} held, {} suspended\n",
        t.jobs, t.completed, t.removed, t.idle, t.running, t.held, t.suspended
    )
}

/// The jobs the summary's rows count, by status (completed and removed
/// jobs have left the queue or are leaving it: not counted).
fn rows_totals(rows: &[andes_schedd::api::SummaryRow]) -> Totals {
    let mut t = Totals::default();
    for row in rows {
        t.jobs += row.run + row.idle + row.held + row.suspended;
        t.idle += row.idle;
        t.running += row.run;
        t.held += row.held;
        t.suspended += row.suspended;
    }
    t
}

/// condor_q's batch table and its `Total for query` line.
fn summary_table(r: &SummaryReply) -> String {
    let mut out = String::from(
        "OWNER      BATCH_NAME       SUBMITTED   DONE   RUN    IDLE   HOLD  TOTAL JOB_IDS\n",
    );
    for row in &r.rows {
        let total = row.run + row.idle + row.held + row.suspended;
        let ids = match (row.ids.first(), row.ids.last()) {
            (Some(f), Some(l)) if row.ids.len() > 1 => {
                format!("{}.{} ... {}.{}", f.0, f.1, l.0, l.2)
            }
            (Some(f), _) if f.1 == f.2 => format!("{}.{}", f.0, f.1),
            (Some(f), _) => format!("{}.{}-{}", f.0, f.1, f.2),
            _ => String::new(),
        };
        let mut notes = Vec::new();
        if row.deferred > 0 {
            notes.push(format!("{} deferred", row.deferred));
        }
        if let Some(t) = row.next_run {
            notes.push(format!("next run {}", short_date(t)));
        }
        let ids = if notes.is_empty() { ids } else { format!("{ids}  ({})", notes.join(", ")) };
        out.push_str(&format!(
            "{:<10} {:<14} {:>11} {:>6} {:>5} {:>7} {:>6} {:>6} {}\n",
            row.owner,
            row.batch,
            short_date(row.submitted),
            dash(row.done),
            dash(row.run),
            dash(row.idle),
            dash(row.held),
            total,
            ids
        ));
    }
    out.push('\n');
    out.push_str(&totals_line("query", &rows_totals(&r.rows)));
    out
}

/// The command line `andes q` shows: the module's name and its arguments.
pub(crate) fn cmd_line(ad: &ClassAd) -> String {
    let cmd = string(ad, "Cmd");
    let name = cmd.rsplit(['/', '\\']).next().unwrap_or(&cmd).to_string();
    let args = match ad.eval_attr("Arguments") {
        Value::Str(s) if !s.is_empty() => s.to_string(),
        _ => string(ad, "Args"),
    };
    if args.is_empty() { name } else { format!("{name} {args}") }
}

/// What `andes q` says of a deferred job: a running job still waiting for
/// its DeferralTime, or an idle job's next (cron) or deferred start.
fn deferral_note(ad: &ClassAd) -> Option<String> {
    let status = JobStatus::from_code(int(ad, "JobStatus"))?;
    match status {
        JobStatus::Running => match ad.eval_attr("JobDeferredUntil") {
            Value::Int(t) => Some(format!("deferred until {}", short_date_secs(t))),
            _ => None,
        },
        JobStatus::Idle => {
            let Value::Int(t) = ad.eval_attr("DeferralTime") else { return None };
            let cron = andes_cron::Field::ALL.iter().any(|f| ad.contains(f.attribute()));
            Some(format!("{} {}", if cron { "next run" } else { "deferred to" }, short_date(t)))
        }
        _ => None,
    }
}

/// `MM/DD HH:MM:SS` in local time.
fn short_date_secs(t: i64) -> String {
    match jiff::Timestamp::from_second(t) {
        Ok(ts) => ts.to_zoned(jiff::tz::TimeZone::system()).strftime("%m/%d %H:%M:%S").to_string(),
        Err(_) => "??/?? ??:??:??".into(),
    }
}

fn id(ad: &ClassAd) -> String {
    format!("{}.{}", int(ad, "ClusterId"), int(ad, "ProcId"))
}

fn run_time(ad: &ClassAd) -> i64 {
    let mut t = int(ad, "RemoteWallClockTime");
    if matches!(JobStatus::from_code(int(ad, "JobStatus")), Some(JobStatus::Running)) {
        let start = int(ad, "JobCurrentStartDate");
        if start > 0 {
            t += client::now() - start;
        }
    }
    t
}

/// `ads` with each DAG's node jobs (`DAGManJobId`) right after its DAGMan
/// job, when that is among them; every other job in id order.
fn dag_order(mut ads: Vec<ClassAd>) -> Vec<ClassAd> {
    let key = |a: &ClassAd| (int(a, "ClusterId"), int(a, "ProcId"));
    ads.sort_by_key(key);
    let dagmen: std::collections::HashSet<i64> = ads
        .iter()
        .filter(|a| a.contains(andes_job::dagman::DAG_FILE))
        .map(|a| int(a, "ClusterId"))
        .collect();
    let parent = |a: &ClassAd| match a.eval_attr("DAGManJobId") {
        Value::Int(d) if dagmen.contains(&d) => Some(d),
        _ => None,
    };
    let (nodes, top): (Vec<ClassAd>, Vec<ClassAd>) =
        ads.into_iter().partition(|a| parent(a).is_some());
    let mut by_dag: std::collections::HashMap<i64, Vec<ClassAd>> = Default::default();
    for n in nodes {
        by_dag.entry(parent(&n).unwrap_or_default()).or_default().push(n);
    }
    let mut out = Vec::new();
    for a in top {
        let c = int(&a, "ClusterId");
        out.push(a);
        out.extend(by_dag.remove(&c).unwrap_or_default());
    }
    out
}

fn job_table(ads: &[ClassAd], dag: bool) -> String {
    let mut out = if dag {
        String::from(" ID        OWNER/NODENAME  SUBMITTED     RUN_TIME ST PRI SIZE CMD\n")
    } else {
        String::from(" ID        OWNER       SUBMITTED     RUN_TIME ST PRI SIZE CMD\n")
    };
    let mut t = Totals::default();
    for ad in ads {
        let st = JobStatus::from_code(int(ad, "JobStatus"));
        count(&mut t, st);
        let who = match ad.eval_attr("DAGNodeName") {
            Value::Str(n) if dag => format!(" |-{n}"),
            _ => string(ad, "Owner"),
        };
        let width = if dag { 14 } else { 10 };
        out.push_str(&format!(
            "{:>6}    {:<width$} {:>11} {:>12} {:<2} {:<3} {:<4.1} {}\n",
            id(ad),
            who,
            short_date(int(ad, "QDate")),
            duration(run_time(ad)),
            st.map_or('?', JobStatus::letter),
            int(ad, "JobPrio"),
            int(ad, "ImageSize") as f64 / 1024.0,
            match deferral_note(ad) {
                Some(n) => format!("{}  ({n})", cmd_line(ad)),
                None => cmd_line(ad),
            }
        ));
    }
    out.push('\n');
    out.push_str(&totals_line("query", &t));
    out
}

fn count(t: &mut Totals, st: Option<JobStatus>) {
    t.jobs += 1;
    match st {
        Some(JobStatus::Idle) => t.idle += 1,
        Some(JobStatus::Running | JobStatus::TransferringOutput) => t.running += 1,
        Some(JobStatus::Held) => t.held += 1,
        Some(JobStatus::Suspended) => t.suspended += 1,
        Some(JobStatus::Removed) => t.removed += 1,
        Some(JobStatus::Completed) => t.completed += 1,
        None => {}
    }
}

fn hold_table(ads: &[ClassAd]) -> String {
    let mut out = String::from(" ID        OWNER          HELD_SINCE  HOLD_REASON\n");
    let mut t = Totals::default();
    for ad in ads {
        count(&mut t, JobStatus::from_code(int(ad, "JobStatus")));
        out.push_str(&format!(
            "{:>6}    {:<14} {:<11} {} (code {}, subcode {})\n",
            id(ad),
            string(ad, "Owner"),
            short_date(int(ad, "EnteredCurrentStatus")),
            string(ad, "HoldReason"),
            int(ad, "HoldReasonCode"),
            int(ad, "HoldReasonSubCode")
        ));
    }
    out.push('\n');
    out.push_str(&totals_line("query", &t));
    out
}

fn run_table(ads: &[ClassAd]) -> String {
    let mut out = String::from(" ID        OWNER       SUBMITTED     RUN_TIME HOST(S)\n");
    let mut t = Totals::default();
    for ad in ads {
        count(&mut t, JobStatus::from_code(int(ad, "JobStatus")));
        out.push_str(&format!(
            "{:>6}    {:<10} {:>11} {:>12} {}\n",
            id(ad),
            string(ad, "Owner"),
            short_date(int(ad, "QDate")),
            duration(run_time(ad)),
            string(ad, "RemoteHost")
        ));
    }
    out.push('\n');
    out.push_str(&totals_line("query", &t));
    out
}

fn history_table(ads: &[ClassAd]) -> String {
    let mut out =
        String::from(" ID        OWNER          SUBMITTED   RUN_TIME     ST COMPLETED   CMD\n");
    for ad in ads {
        let st = JobStatus::from_code(int(ad, "JobStatus"));
        let done = int(ad, "CompletionDate");
        out.push_str(&format!(
            "{:>6}    {:<14} {:>11} {:>12} {:<2} {:<11} {}\n",
            id(ad),
            string(ad, "Owner"),
            short_date(int(ad, "QDate")),
            duration(int(ad, "RemoteWallClockTime")),
            st.map_or('?', JobStatus::letter),
            if done > 0 { short_date(done) } else { "???".into() },
            cmd_line(ad)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_condor_q_does() {
        assert_eq!(duration(0), "0+00:00:00");
        assert_eq!(duration(90061), "1+01:01:01");
        assert_eq!(duration(-5), "0+00:00:00");
    }

    #[test]
    fn selection_splits_ids_and_owners() {
        let t = selection(&["12".into(), "alice".into(), "3.4".into()]).unwrap();
        assert_eq!(t.ids.len(), 2);
        assert_eq!(t.owners, vec!["alice".to_string()]);
        assert!(selection(&["1.x".into()]).is_err());
    }
}
