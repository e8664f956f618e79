//! `andes status`: condor_status's views of the pool, from the collector.

use std::collections::BTreeMap;
use std::process::ExitCode;

use andes_central::collector::AdType;
use andes_central::collector::api::{QueryReply, QueryRequest};
use anyhow::{Result, anyhow};
use clap::Args;
use classad::{ClassAd, Value};

use crate::cmd::client::{self, Session};
use crate::cmd::format::{Format, int, string};

/// Arguments of `andes status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Only ads whose Name (or Machine) is one of these.
    names: Vec<String>,
    /// Machine (slot) ads: the default.
    #[arg(long)]
    startd: bool,
    /// Schedd ads.
    #[arg(long)]
    schedd: bool,
    /// Submitter ads: each user's jobs at each schedd.
    #[arg(long)]
    submitters: bool,
    /// Negotiator ads.
    #[arg(long)]
    negotiator: bool,
    /// Every ad, whatever its type.
    #[arg(long)]
    any: bool,
    /// Only ads for which this ClassAd expression is true.
    #[arg(long, value_name = "EXPR")]
    constraint: Option<String>,
    #[command(flatten)]
    format: Format,
}

impl StatusArgs {
    /// The type selected (none: every type).
    fn kind(&self) -> Result<Option<AdType>> {
        let chosen: Vec<Option<AdType>> = [
            (self.startd, Some(AdType::Machine)),
            (self.schedd, Some(AdType::Schedd)),
            (self.submitters, Some(AdType::Submitter)),
            (self.negotiator, Some(AdType::Negotiator)),
            (self.any, None),
        ]
        .into_iter()
        .filter_map(|(on, k)| on.then_some(k))
        .collect();
        match chosen.as_slice() {
            [] => Ok(Some(AdType::Machine)),
            [one] => Ok(*one),
            _ => Err(anyhow!("choose one of -startd, -schedd, -submitters, -negotiator and -any")),
        }
    }

    /// The constraint sent: `-constraint` and the names given.
    fn constraint(&self) -> Option<String> {
        let names: Vec<String> = self
            .names
            .iter()
            .map(|n| {
                let lit = Value::string(n.as_str());
                let mut s = String::new();
                classad::unparse::value_to(&mut s, &lit);
                format!("Name == {s} || Machine == {s}")
            })
            .collect();
        let names = (!names.is_empty()).then(|| names.join(" || "));
        match (&self.constraint, names) {
            (Some(c), Some(n)) => Some(format!("({c}) && ({n})")),
            (Some(c), None) => Some(c.clone()),
            (None, n) => n,
        }
    }
}

/// Every slot ad the collector has (for `andes q -better-analyze`).
pub(crate) fn machine_ads() -> Result<Vec<ClassAd>> {
    let session = Session::collector()?;
    let req = QueryRequest {
        kind: Some(AdType::Machine.my_type().to_string()),
        constraint: None,
        projection: Vec::new(),
    };
    let r: QueryReply = session.block_on(session.client.call(
        http::Method::POST,
        "/v1/collector/query",
        Some(&req),
    ))?;
    r.ads
        .iter()
        .map(|t| classad::parse_ad(t).map_err(|e| anyhow!("the collector sent a bad ad: {e}")))
        .collect()
}

/// Runs `andes status`.
pub fn run(args: StatusArgs) -> Result<ExitCode> {
    let kind = args.kind()?;
    args.format.check()?;
    let session = Session::collector()?;
    let req = QueryRequest {
        kind: kind.map(|k| k.my_type().to_string()),
        constraint: args.constraint(),
        projection: args.format.projection(),
    };
    let r: QueryReply = session.block_on(session.client.call(
        http::Method::POST,
        "/v1/collector/query",
        Some(&req),
    ))?;
    let ads = r
        .ads
        .iter()
        .map(|t| classad::parse_ad(t).map_err(|e| anyhow!("the collector sent a bad ad: {e}")))
        .collect::<Result<Vec<ClassAd>>>()?;
    let out = if args.format.is_set() {
        args.format.render(&ads)
    } else {
        match kind {
            Some(AdType::Machine) => machine_table(&ads, client::now()),
            Some(AdType::Schedd) => schedd_table(&ads),
            Some(AdType::Submitter) => submitter_table(&ads),
            Some(AdType::Negotiator) => negotiator_table(&ads),
            None => any_table(&ads),
        }
    };
    out!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// condor_status's `format_time`: `%3d+%02d:%02d:%02d`.
fn format_time(secs: i64) -> String {
    let s = secs.max(0);
    format!("{:3}+{:02}:{:02}:{:02}", s / 86400, s / 3600 % 24, s / 60 % 60, s % 60)
}

/// A string attribute, or HTCondor's `[???]` when it is missing.
fn text(ad: &ClassAd, name: &str) -> String {
    match ad.eval_attr(name) {
        Value::Str(s) => s.to_string(),
        _ => "[???]".to_string(),
    }
}

/// An integer attribute as text, or `[???]`.
fn number(ad: &ClassAd, name: &str) -> String {
    match ad.eval_attr(name) {
        Value::Int(i) => i.to_string(),
        Value::Real(r) if r.is_finite() => (r as i64).to_string(),
        _ => "[???]".to_string(),
    }
}

fn width<'a>(min: usize, cells: impl Iterator<Item = &'a String>) -> usize {
    cells.map(|c| c.chars().count()).fold(min, usize::max)
}

/// The machine states condor_status's totals count, in column order.
const STATE_COLUMNS: [(&str, usize); 9] = [
    ("Total", 5),
    ("Owner", 5),
    ("Claimed", 7),
    ("Unclaimed", 9),
    ("Matched", 7),
    ("Preempting", 10),
    ("Drain", 6),
    ("Backfill", 8),
    ("BkIdle", 6),
];

/// The totals column a slot counts in (besides Total), by State and Activity.
fn state_column(state: &str, activity: &str) -> Option<usize> {
    Some(match state {
        "Owner" => 1,
        "Claimed" => 2,
        "Unclaimed" => 3,
        "Matched" => 4,
        "Preempting" => 5,
        "Drained" => 6,
        "Backfill" if activity == "Idle" => 8,
        "Backfill" => 7,
        _ => return None,
    })
}

/// condor_status's default view of machine ads: one line per slot, then the totals
/// by `Arch/OpSys`. `now` gives each slot's ActvtyTime (`now -
/// EnteredCurrentActivity`).
pub fn machine_table(ads: &[ClassAd], now: i64) -> String {
    if ads.is_empty() {
        return String::new();
    }
    struct Row {
        name: String,
        opsys: String,
        arch: String,
        state: String,
        activity: String,
        load: String,
        mem: String,
        time: String,
    }
    let rows: Vec<Row> = ads
        .iter()
        .map(|ad| Row {
            name: text(ad, "Name"),
            opsys: text(ad, "OpSys"),
            arch: text(ad, "Arch"),
            state: text(ad, "State"),
            // A Busy slot whose job still waits for its DeferralTime.
            activity: match (text(ad, "Activity").as_str(), ad.eval_attr("JobDeferredUntil")) {
                ("Busy", Value::Int(_)) => "Deferred".to_string(),
                (a, _) => a.to_string(),
            },
            load: match ad.eval_attr("LoadAvg") {
                Value::Real(r) => format!("{r:.3}"),
                Value::Int(i) => format!("{:.3}", i as f64),
                _ => "[???]".into(),
            },
            mem: number(ad, "Memory"),
            time: match ad.eval_attr("EnteredCurrentActivity") {
                Value::Int(t) => format_time(now - t),
                _ => "   [Unknown]".into(),
            },
        })
        .collect();
    let wn = width(4, rows.iter().map(|r| &r.name));
    let wo = width(10, rows.iter().map(|r| &r.opsys));
    let wa = width(6, rows.iter().map(|r| &r.arch));
    let ws = width(9, rows.iter().map(|r| &r.state));
    let wc = width(8, rows.iter().map(|r| &r.activity));
    let wl = width(6, rows.iter().map(|r| &r.load));
    let wm = width(4, rows.iter().map(|r| &r.mem));
    let wt = width(12, rows.iter().map(|r| &r.time));
    let mut out = format!(
        "{:<wn$} {:<wo$} {:<wa$} {:<ws$} {:<wc$} {:<wl$} {:<wm$}{:<wt$}\n\n",
        "Name", "OpSys", "Arch", "State", "Activity", "LoadAv", "Mem", "  ActvtyTime"
    );
    for r in &rows {
        out.push_str(&format!(
            "{:<wn$} {:<wo$} {:<wa$} {:<ws$} {:<wc$} {:>wl$} {:>wm$}{:>wt$}\n",
            r.name, r.opsys, r.arch, r.state, r.activity, r.load, r.mem, r.time
        ));
    }
    out.push('\n');
    out.push_str(&machine_totals(ads));
    out
}

/// condor_status's totals block: one row per `Arch/OpSys`, then `Total`.
pub fn machine_totals(ads: &[ClassAd]) -> String {
    let mut by_platform: BTreeMap<String, [u64; 9]> = BTreeMap::new();
    let mut total = [0u64; 9];
    for ad in ads {
        let key = format!("{}/{}", string(ad, "Arch"), string(ad, "OpSys"));
        let counts = by_platform.entry(key).or_default();
        let col = state_column(&string(ad, "State"), &string(ad, "Activity"));
        for c in [counts, &mut total] {
            c[0] += 1;
            if let Some(i) = col {
                c[i] += 1;
            }
        }
    }
    let label = by_platform.keys().map(|k| k.chars().count()).fold(12, usize::max) + 2;
    let line = |name: &str, counts: Option<&[u64; 9]>| {
        let mut l = format!("{name:>label$}");
        for (i, (head, w)) in STATE_COLUMNS.iter().enumerate() {
            match counts {
                Some(c) => l.push_str(&format!(" {:>w$}", c[i])),
                None => l.push_str(&format!(" {head:>w$}")),
            }
        }
        l + "\n"
    };
    let mut out = line("", None);
    out.push('\n');
    for (k, c) in &by_platform {
        out.push_str(&line(k, Some(c)));
    }
    out.push('\n');
    out.push_str(&line("Total", Some(&total)));
    out
}

/// condor_status -schedd: `Name Machine RunningJobs IdleJobs HeldJobs`, then the
/// pool's totals.
pub fn schedd_table(ads: &[ClassAd]) -> String {
    if ads.is_empty() {
        return String::new();
    }
    let rows: Vec<[String; 2]> =
        ads.iter().map(|ad| [text(ad, "Name"), text(ad, "Machine")]).collect();
    let wn = width(4, rows.iter().map(|r| &r[0]));
    let wm = width(7, rows.iter().map(|r| &r[1]));
    let mut out = format!(
        "{:<wn$} {:<wm$} {:>11} {:>10} {:>10}\n\n",
        "Name", "Machine", "RunningJobs", "IdleJobs", "HeldJobs"
    );
    let mut totals = [0i64; 3];
    for (ad, r) in ads.iter().zip(&rows) {
        let n = [int(ad, "TotalRunningJobs"), int(ad, "TotalIdleJobs"), int(ad, "TotalHeldJobs")];
        for (t, v) in totals.iter_mut().zip(n) {
            *t = t.saturating_add(v);
        }
        out.push_str(&format!(
            "{:<wn$} {:<wm$} {:>11} {:>10} {:>10}\n",
            r[0],
            r[1],
            number(ad, "TotalRunningJobs"),
            number(ad, "TotalIdleJobs"),
            number(ad, "TotalHeldJobs")
        ));
    }
    out.push('\n');
    out.push_str(&format!(
        "{:>20} {:>17} {:>18} {:>18}\n\n",
        "", "TotalRunningJobs", "TotalIdleJobs", "TotalHeldJobs"
    ));
    out.push_str(&format!(
        "{:>20} {:>17} {:>18} {:>18}\n",
        "Total", totals[0], totals[1], totals[2]
    ));
    out
}

/// condor_status -submitters: `Name Machine RunningJobs IdleJobs HeldJobs`, then
/// the totals per user and for the pool.
pub fn submitter_table(ads: &[ClassAd]) -> String {
    if ads.is_empty() {
        return String::new();
    }
    let rows: Vec<[String; 2]> =
        ads.iter().map(|ad| [text(ad, "Name"), text(ad, "Machine")]).collect();
    let wn = width(4, rows.iter().map(|r| &r[0]));
    let wm = width(7, rows.iter().map(|r| &r[1]));
    let mut out = format!(
        "{:<wn$} {:<wm$} {:>11} {:>8} {:>8}\n\n",
        "Name", "Machine", "RunningJobs", "IdleJobs", "HeldJobs"
    );
    let mut by_user: BTreeMap<String, [i64; 3]> = BTreeMap::new();
    let mut totals = [0i64; 3];
    for (ad, r) in ads.iter().zip(&rows) {
        let n = [int(ad, "RunningJobs"), int(ad, "IdleJobs"), int(ad, "HeldJobs")];
        let user = by_user.entry(r[0].clone()).or_default();
        for i in 0..3 {
            user[i] = user[i].saturating_add(n[i]);
            totals[i] = totals[i].saturating_add(n[i]);
        }
        out.push_str(&format!(
            "{:<wn$} {:<wm$} {:>11} {:>8} {:>8}\n",
            r[0],
            r[1],
            number(ad, "RunningJobs"),
            number(ad, "IdleJobs"),
            number(ad, "HeldJobs")
        ));
    }
    let label = by_user.keys().map(|k| k.chars().count()).fold(20, usize::max) + 4;
    out.push('\n');
    out.push_str(&format!(
        "{:>label$} {:>17} {:>18} {:>18}\n\n",
        "", "RunningJobs", "IdleJobs", "HeldJobs"
    ));
    for (u, n) in &by_user {
        out.push_str(&format!("{u:>label$} {:>17} {:>18} {:>18}\n", n[0], n[1], n[2]));
    }
    out.push_str(&format!(
        "{:>label$} {:>17} {:>18} {:>18}\n",
        "Total", totals[0], totals[1], totals[2]
    ));
    out
}

/// condor_status -negotiator: `Name Machine`.
pub fn negotiator_table(ads: &[ClassAd]) -> String {
    if ads.is_empty() {
        return String::new();
    }
    let rows: Vec<[String; 2]> =
        ads.iter().map(|ad| [text(ad, "Name"), text(ad, "Machine")]).collect();
    let wn = width(20, rows.iter().map(|r| &r[0]));
    let mut out = format!("{:<wn$} {}\n\n", "Name", "Machine");
    for r in &rows {
        out.push_str(&format!("{:<wn$} {}\n", r[0], r[1]));
    }
    out
}

/// condor_status -any: `MyType TargetType Name`.
pub fn any_table(ads: &[ClassAd]) -> String {
    if ads.is_empty() {
        return String::new();
    }
    let or_none = |ad: &ClassAd, n: &str| match ad.eval_attr(n) {
        Value::Str(s) if !s.is_empty() => s.to_string(),
        _ => "None".to_string(),
    };
    let mut out = format!("{:<18} {:<18} {}\n\n", "MyType", "TargetType", "Name");
    for ad in ads {
        out.push_str(&format!(
            "{:<18} {:<18} {}\n",
            or_none(ad, "MyType"),
            or_none(ad, "TargetType"),
            text(ad, "Name")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(name: &str, arch: &str, state: &str, activity: &str, load: f64, mem: i64) -> ClassAd {
        classad::parse_ad(&format!(
            r#"[Name = "{name}"; OpSys = "LINUX"; Arch = "{arch}"; State = "{state}";
                Activity = "{activity}"; LoadAvg = {load:?}; Memory = {mem};
                EnteredCurrentActivity = 1000]"#
        ))
        .unwrap()
    }

    #[test]
    fn machine_table_is_condor_status() {
        let ads = [
            slot("slot1@exec-1.example.com", "X86_64", "Unclaimed", "Idle", 0.71, 1895),
            slot("slot2@exec-1.example.com", "X86_64", "Claimed", "Busy", 1.0, 1895),
            slot("slot1@mac", "ARM64", "Owner", "Idle", 0.0, 16384),
            slot("slot3@exec-1.example.com", "X86_64", "Backfill", "Idle", 0.0, 512),
            slot("slot4@exec-1.example.com", "X86_64", "Drained", "Retiring", 0.0, 512),
        ];
        let want = "\
Name                     OpSys      Arch   State     Activity LoadAv Mem    ActvtyTime

slot1@exec-1.example.com LINUX      X86_64 Unclaimed Idle      0.710  1895  0+00:00:24
slot2@exec-1.example.com LINUX      X86_64 Claimed   Busy      1.000  1895  0+00:00:24
slot1@mac                LINUX      ARM64  Owner     Idle      0.000 16384  0+00:00:24
slot3@exec-1.example.com LINUX      X86_64 Backfill  Idle      0.000   512  0+00:00:24
slot4@exec-1.example.com LINUX      X86_64 Drained   Retiring  0.000   512  0+00:00:24

               Total Owner Claimed Unclaimed Matched Preempting  Drain Backfill BkIdle

   ARM64/LINUX     1     1       0         0       0          0      0        0      0
  X86_64/LINUX     4     0       1         1       0          0      1        0      1

         Total     5     1       1         1       0          0      1        0      1
";
        assert_eq!(machine_table(&ads, 1024), want);
        assert_eq!(machine_table(&[], 0), "");
    }

    #[test]
    fn activity_time_and_missing_values() {
        let ad = classad::parse_ad(r#"[Name = "s"; EnteredCurrentActivity = 0]"#).unwrap();
        let t = machine_table(&[ad], 90061 + 11 * 86400);
        let row = t.lines().nth(2).unwrap();
        assert_eq!(row, "s    [???]      [???]  [???]     [???]     [???] [???] 12+01:01:01");
        let ad = classad::parse_ad(r#"[Name = "s"]"#).unwrap();
        assert!(machine_table(&[ad], 0).lines().nth(2).unwrap().ends_with("   [Unknown]"));
        assert_eq!(format_time(-5), "  0+00:00:00");
        assert_eq!(format_time(3600 * 24 * 100), "100+00:00:00");
    }

    #[test]
    fn schedd_table_totals() {
        let ads = [
            classad::parse_ad(
                r#"[Name = "andes@submit-1"; Machine = "submit-1"; TotalRunningJobs = 3;
                    TotalIdleJobs = 10; TotalHeldJobs = 1]"#,
            )
            .unwrap(),
            classad::parse_ad(r#"[Name = "andes@submit-2"; Machine = "submit-2"; TotalRunningJobs = 0; TotalIdleJobs = 2; TotalHeldJobs = 0]"#).unwrap(),
        ];
        let want = "\
Name           Machine  RunningJobs   IdleJobs   HeldJobs

andes@submit-1 submit-1           3         10          1
andes@submit-2 submit-2           0          2          0

                      TotalRunningJobs      TotalIdleJobs      TotalHeldJobs

               Total                 3                 12                  1
";
        assert_eq!(schedd_table(&ads), want);
    }

    #[test]
    fn submitters_negotiators_and_any() {
        let sub = classad::parse_ad(
            r#"[MyType = "Submitter"; Name = "alice@pool"; Machine = "submit-1";
                RunningJobs = 2; IdleJobs = 5; HeldJobs = 0]"#,
        )
        .unwrap();
        let t = submitter_table(std::slice::from_ref(&sub));
        assert!(t.starts_with("Name       Machine  RunningJobs IdleJobs HeldJobs\n\n"), "{t}");
        assert!(t.contains("alice@pool submit-1           2        5        0\n"), "{t}");
        assert!(t.ends_with(&format!("{:>24} {:>17} {:>18} {:>18}\n", "Total", 2, 5, 0)), "{t}");
        let neg = classad::parse_ad(r#"[MyType = "Negotiator"; Name = "neg@cm"; Machine = "cm"]"#)
            .unwrap();
        assert_eq!(
            negotiator_table(std::slice::from_ref(&neg)),
            "Name                 Machine\n\nneg@cm               cm\n"
        );
        assert_eq!(
            any_table(&[sub, neg]),
            "MyType             TargetType         Name\n\n\
             Submitter          None               alice@pool\n\
             Negotiator         None               neg@cm\n"
        );
    }

    #[test]
    fn names_become_a_constraint() {
        let a = StatusArgs {
            names: vec!["exec-1".into(), "a\"b".into()],
            startd: false,
            schedd: true,
            submitters: false,
            negotiator: false,
            any: false,
            constraint: Some("Memory > 1".into()),
            format: Format::default(),
        };
        assert_eq!(a.kind().unwrap(), Some(AdType::Schedd));
        let c = a.constraint().unwrap();
        assert_eq!(
            c,
            r#"(Memory > 1) && (Name == "exec-1" || Machine == "exec-1" || Name == "a\"b" || Machine == "a\"b")"#
        );
        classad::parse_expr(&c).unwrap();
        let both = StatusArgs { any: true, ..a };
        assert!(both.kind().is_err());
    }
}
