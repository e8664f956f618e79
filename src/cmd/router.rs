//! `andes router q` and `andes router history`: condor_router_q's and
//! condor_router_history's views of the job router.

use std::collections::BTreeMap;
use std::process::ExitCode;

use andes_schedd::job::JobStatus;
use andes_schedd::router::service::{HistoryRecord, RouterHistoryRequest, RouterQReply};
use anyhow::{Result, anyhow};
use clap::{Args, Subcommand};

use crate::cmd::client::{self, Session};
use crate::cmd::format::{int, string};

/// `andes router`'s subcommands.
#[derive(Subcommand, Debug)]
pub enum RouterCmd {
    /// The routed jobs (condor_router_q); `-S` sums them per route and status.
    Q(RouterQArgs),
    /// Finished routed jobs per route over a time range (condor_router_history).
    History(RouterHistoryArgs),
}

/// Arguments of `andes router q`.
#[derive(Args, Debug)]
pub struct RouterQArgs {
    /// A summary: JOBS, ST, Route and GridResource per route and status.
    #[arg(short = 'S', long = "summary")]
    summary: bool,
}

/// Arguments of `andes router history`.
#[derive(Args, Debug)]
pub struct RouterHistoryArgs {
    /// From this time (Unix seconds or RFC 3339); default a day ago.
    #[arg(long)]
    from: Option<String>,
    /// Until this time; default now.
    #[arg(long)]
    to: Option<String>,
}

/// Runs `andes router`.
pub fn run(cmd: RouterCmd) -> Result<ExitCode> {
    let session = Session::open()?;
    match cmd {
        RouterCmd::Q(a) => {
            let r: RouterQReply = session.block_on(session.client.call(
                http::Method::POST,
                "/v1/router/q",
                Some(&serde_json::json!({})),
            ))?;
            out!("{}", if a.summary { summary(&r)? } else { listing(&r)? });
        }
        RouterCmd::History(a) => {
            let now = client::now();
            let to = a.to.as_deref().map(time).transpose()?.unwrap_or(now);
            let from = a.from.as_deref().map(time).transpose()?.unwrap_or(to - 86_400);
            let req = RouterHistoryRequest { from, to };
            let r: Vec<HistoryRecord> = session.block_on(session.client.call(
                http::Method::POST,
                "/v1/router/history",
                Some(&req),
            ))?;
            out!("{}", history(&r, from, to));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn time(t: &str) -> Result<i64> {
    if let Ok(n) = t.parse::<i64>() {
        return Ok(n);
    }
    t.parse::<jiff::Timestamp>()
        .map(|ts| ts.as_second())
        .map_err(|e| anyhow!("`{t}` is not Unix seconds or an RFC 3339 time: {e}"))
}

fn ads(r: &RouterQReply) -> Result<Vec<classad::ClassAd>> {
    r.jobs
        .iter()
        .map(|t| classad::parse_ad(t).map_err(|e| anyhow!("the schedd sent a bad ad: {e}")))
        .collect()
}

fn letter(ad: &classad::ClassAd) -> char {
    JobStatus::from_code(int(ad, "JobStatus")).map_or('?', JobStatus::letter)
}

/// condor_router_q -S: jobs per route and status.
fn summary(r: &RouterQReply) -> Result<String> {
    let mut counts: BTreeMap<(usize, char), usize> = BTreeMap::new();
    let order = |name: &str| r.routes.iter().position(|(n, _)| n == name).unwrap_or(usize::MAX);
    let ads = ads(r)?;
    for ad in &ads {
        *counts.entry((order(&string(ad, "RouteName")), letter(ad))).or_default() += 1;
    }
    let mut out = String::from("   JOBS ST Route      GridResource\n");
    for ((i, st), n) in counts {
        let (name, gr) = r.routes.get(i).cloned().unwrap_or_else(|| ("?".into(), "?".into()));
        out.push_str(&format!("{n:>7}  {st} {name:<10} {gr}\n"));
    }
    Ok(out)
}

/// condor_router_q: one line per routed job.
fn listing(r: &RouterQReply) -> Result<String> {
    let mut out = String::from(" ID        FROM      ST ROUTE      GRID_JOB_ID\n");
    for ad in ads(r)? {
        out.push_str(&format!(
            "{:>6}    {:<9} {}  {:<10} {}\n",
            format!("{}.{}", int(&ad, "ClusterId"), int(&ad, "ProcId")),
            string(&ad, "RoutedFromJobId"),
            letter(&ad),
            string(&ad, "RouteName"),
            string(&ad, "GridJobId"),
        ));
    }
    Ok(out)
}

fn stamp(t: i64) -> String {
    jiff::Timestamp::from_second(t)
        .map(|ts| ts.to_zoned(jiff::tz::TimeZone::system()).strftime("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

/// condor_router_history's per-site summary.
fn history(records: &[HistoryRecord], from: i64, to: i64) -> String {
    let mut per: BTreeMap<&str, (f64, u64, u64)> = BTreeMap::new();
    for h in records {
        let e = per.entry(h.route.as_str()).or_default();
        e.0 += h.wall_seconds / 3600.0;
        if h.completed {
            e.1 += 1;
        } else {
            e.2 += 1;
        }
    }
    let rule = "-------------------------------------------------------\n";
    let mut out = format!("Routed job history from {} to {}\n\n", stamp(from), stamp(to));
    out.push_str(
        "Site            Hours    Jobs    Runs\n                      Completed Aborted\n",
    );
    out.push_str(rule);
    let mut total = (0.0, 0, 0);
    for (site, (hours, done, aborted)) in &per {
        out.push_str(&format!("{site:<15} {:>5} {done:>7} {aborted:>5}\n", hours.round() as i64));
        total.0 += hours;
        total.1 += done;
        total.2 += aborted;
    }
    out.push_str(rule);
    out.push_str(&format!(
        "{:<15} {:>5} {:>7} {:>5}\n",
        "TOTAL",
        total.0.round() as i64,
        total.1,
        total.2
    ));
    out
}
