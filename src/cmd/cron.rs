//! `andes cron next`: check a CronTab schedule before submitting it.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use andes_cron::Schedule;
use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use jiff::tz::TimeZone;

/// `andes cron`'s subcommands.
#[derive(Subcommand, Debug)]
pub enum CronCmd {
    /// Print the next run times of a schedule (the submit commands
    /// cron_minute, cron_hour, cron_day_of_month, cron_month and
    /// cron_day_of_week; a field not given is `*`).
    Next(NextArgs),
}

/// Arguments of `andes cron next`.
#[derive(Args, Debug)]
pub struct NextArgs {
    /// cron_minute (0-59).
    #[arg(long, value_name = "FIELD", allow_hyphen_values = true)]
    minute: Option<String>,
    /// cron_hour (0-23).
    #[arg(long, value_name = "FIELD", allow_hyphen_values = true)]
    hour: Option<String>,
    /// cron_day_of_month (1-31).
    #[arg(long = "day-of-month", value_name = "FIELD", allow_hyphen_values = true)]
    day_of_month: Option<String>,
    /// cron_month (1-12).
    #[arg(long, value_name = "FIELD", allow_hyphen_values = true)]
    month: Option<String>,
    /// cron_day_of_week (0-7, Sunday is 0 or 7).
    #[arg(long = "day-of-week", value_name = "FIELD", allow_hyphen_values = true)]
    day_of_week: Option<String>,
    /// How many run times to print.
    #[arg(long, default_value_t = 5)]
    count: usize,
    /// Start from this time instead of now: Unix seconds, an RFC 3339 time
    /// (`2026-11-22T10:00:00Z`), or a local `YYYY-MM-DD HH:MM[:SS]` in the zone.
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// The time zone: an IANA name, `UTC` or a POSIX TZ string. Default: the
    /// schedd's, CRON_TIME_ZONE, else this machine's zone; UTC with --jsonl.
    #[arg(long, value_name = "ZONE")]
    tz: Option<String>,
    /// Read `{"fields": {...}, "now": EPOCH}` lines from FILE (`-`: stdin) and
    /// print `{"next": EPOCH|null}` or `{"invalid": "reason"}` for each.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["minute", "hour", "day_of_month", "month", "day_of_week", "from", "count"])]
    jsonl: Option<String>,
}

/// Runs `andes cron`.
pub fn run(cmd: CronCmd) -> Result<ExitCode> {
    match cmd {
        CronCmd::Next(a) => next(a),
    }
}

fn zone(arg: Option<&str>, jsonl: bool) -> Result<TimeZone> {
    if let Some(z) = arg {
        return andes_cron::time_zone(z).map_err(|e| anyhow!(e));
    }
    if jsonl {
        return Ok(TimeZone::UTC);
    }
    let configured = crate::settings::Settings::load()
        .ok()
        .and_then(|s| s.get("CRON_TIME_ZONE").ok().flatten())
        .unwrap_or_default();
    andes_cron::time_zone(&configured).map_err(|e| anyhow!("CRON_TIME_ZONE: {e}"))
}

fn parse_time(text: &str, tz: &TimeZone) -> Result<i64> {
    let t = text.trim();
    if let Ok(n) = t.parse::<i64>() {
        return Ok(n);
    }
    if let Ok(ts) = t.parse::<jiff::Timestamp>() {
        return Ok(ts.as_second());
    }
    let civil: jiff::civil::DateTime = t
        .parse()
        .with_context(|| format!("--from `{t}`: not Unix seconds, RFC 3339 or YYYY-MM-DD HH:MM"))?;
    Ok(civil.to_zoned(tz.clone())?.timestamp().as_second())
}

fn next(a: NextArgs) -> Result<ExitCode> {
    let tz = zone(a.tz.as_deref(), a.jsonl.is_some())?;
    if let Some(file) = &a.jsonl {
        return jsonl(file, &tz);
    }
    let schedule = Schedule::parse([
        a.minute.as_deref(),
        a.hour.as_deref(),
        a.day_of_month.as_deref(),
        a.month.as_deref(),
        a.day_of_week.as_deref(),
    ])
    .map_err(|e| anyhow!(e.for_submit()))?;
    let mut t = match &a.from {
        Some(f) => parse_time(f, &tz)?,
        None => crate::cmd::client::now(),
    };
    let mut out = std::io::stdout().lock();
    for _ in 0..a.count {
        let Some(n) = schedule.next_after(t, &tz) else { break };
        let z = jiff::Timestamp::from_second(n)?.to_zoned(tz.clone());
        writeln!(out, "{}  {n}", z.strftime("%a %Y-%m-%d %H:%M %Z"))?;
        t = n;
    }
    Ok(ExitCode::SUCCESS)
}

fn jsonl(file: &str, tz: &TimeZone) -> Result<ExitCode> {
    let reader: Box<dyn BufRead> = if file == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("opening {file}"))?,
        ))
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (i, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading {file}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = match answer(&line, tz) {
            Ok(v) => v,
            Err(e) => bail!("{file}:{}: {e}", i + 1),
        };
        writeln!(out, "{answer}")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn answer(line: &str, tz: &TimeZone) -> Result<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(line)?;
    let now = v["now"].as_i64().ok_or_else(|| anyhow!("`now` must be an integer"))?;
    let fields = v["fields"].as_object().ok_or_else(|| anyhow!("`fields` must be an object"))?;
    let mut named = Vec::new();
    for (k, v) in fields {
        let text = v.as_str().ok_or_else(|| anyhow!("field `{k}` must be a string"))?;
        named.push((k.as_str(), text));
    }
    let mut texts: [Option<&str>; 5] = [None; 5];
    for (k, text) in named {
        let f = andes_cron::Field::from_name(k).ok_or_else(|| anyhow!("unknown field `{k}`"))?;
        texts[f as usize] = Some(text);
    }
    Ok(match Schedule::parse(texts) {
        Ok(s) => serde_json::json!({ "next": s.next_after(now, tz) }),
        Err(andes_cron::CronError::Never { .. }) => serde_json::json!({ "next": null }),
        Err(e) => serde_json::json!({ "invalid": e.to_string() }),
    })
}
