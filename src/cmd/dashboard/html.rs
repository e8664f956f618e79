//! The dashboard's HTML: every value that comes from a job ad, a slot ad, a log or
//! a daemon's error goes through [`esc`]; the page's script is a file of its own,
//! so the Content-Security-Policy allows no inline script at all.

use std::fmt::Write as _;

use andes_schedd::job::JobStatus;
use classad::{ClassAd, Value};

/// `s` as HTML text (also safe inside a quoted attribute).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: the navigation, `body`, the stylesheets and scripts. Every
/// link is relative to `base` (the session's prefix, `/s/SESSION/`), which
/// the page names as its `<base href>`.
pub fn page(base: &str, title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <base href=\"{base}\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>andes · {title}</title>\
         <link rel=\"stylesheet\" href=\"assets/uPlot.min.css\">\
         <link rel=\"stylesheet\" href=\"assets/dashboard.css\">\
         <script src=\"assets/uPlot.iife.min.js\" defer></script>\
         <script src=\"assets/dashboard.js\" defer></script></head>\n<body>\
         <header><a class=\"brand\" href=\"./\">andes</a><nav><a href=\"./\">Overview</a>\
         <a href=\"jobs\">Jobs</a></nav><span id=\"live-state\"></span></header>\n\
         <main>{body}</main></body></html>\n",
        base = esc(base),
        title = esc(title)
    )
}

/// The page a request without the token gets.
pub fn unauthorized() -> String {
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
     <title>andes · login needed</title></head><body><h1>Login needed</h1>\
     <p>Open the dashboard with the URL it printed when it started \
     (<code>dashboard: http://…/?token=…</code>; a personal pool also writes it to \
     <code>dashboard.url</code> in its directory).</p></body></html>\n"
        .to_string()
}

/// An error, as a paragraph.
pub fn error(what: &str, e: &str) -> String {
    format!("<p class=\"error\">{}: {}</p>", esc(what), esc(e))
}

/// An integer attribute (reals truncated); `None` when not a number.
pub fn int(ad: &ClassAd, name: &str) -> Option<i64> {
    match ad.eval_attr(name) {
        Value::Int(i) => Some(i),
        Value::Real(r) if r.is_finite() => Some(r as i64),
        _ => None,
    }
}

/// A string attribute, empty when not a string.
pub fn string(ad: &ClassAd, name: &str) -> String {
    match ad.eval_attr(name) {
        Value::Str(s) => s.to_string(),
        _ => String::new(),
    }
}

/// A time as `YYYY-MM-DD HH:MM:SS` in local time; empty for 0 or less.
pub fn when(t: i64) -> String {
    if t <= 0 {
        return String::new();
    }
    match jiff::Timestamp::from_second(t) {
        Ok(ts) => {
            ts.to_zoned(jiff::tz::TimeZone::system()).strftime("%Y-%m-%d %H:%M:%S").to_string()
        }
        Err(_) => String::new(),
    }
}

/// A job status's name.
pub fn status_name(code: i64) -> &'static str {
    match JobStatus::from_code(code) {
        Some(JobStatus::Idle) => "Idle",
        Some(JobStatus::Running) => "Running",
        Some(JobStatus::Removed) => "Removed",
        Some(JobStatus::Completed) => "Completed",
        Some(JobStatus::Held) => "Held",
        Some(JobStatus::TransferringOutput) => "Transferring output",
        Some(JobStatus::Suspended) => "Suspended",
        None => "Unknown",
    }
}

/// A job's id `C.P` from its ad.
pub fn job_id(ad: &ClassAd) -> String {
    format!("{}.{}", int(ad, "ClusterId").unwrap_or(0), int(ad, "ProcId").unwrap_or(0))
}

/// The attributes a job table shows.
pub const JOB_COLUMNS: &[&str] = &[
    "ClusterId",
    "ProcId",
    "Owner",
    "JobStatus",
    "QDate",
    "CompletionDate",
    "EnteredCurrentStatus",
    "Cmd",
    "Arguments",
    "Args",
    "RemoteHost",
    "HoldReason",
];

/// A job table: one row per ad, `where_` saying whether it is in the queue or
/// in history.
pub fn job_rows(out: &mut String, ads: &[ClassAd], where_: &str) {
    for ad in ads {
        let id = job_id(ad);
        let code = int(ad, "JobStatus").unwrap_or(0);
        let status = status_name(code);
        let note = match JobStatus::from_code(code) {
            Some(JobStatus::Held) => string(ad, "HoldReason"),
            Some(JobStatus::Running) => string(ad, "RemoteHost"),
            _ => String::new(),
        };
        let _ = write!(
            out,
            "<tr id=\"job-{dom}\" class=\"st-{cls}\"><td><a href=\"job/{id}\">{id}</a></td>\
             <td>{owner}</td><td class=\"status\">{status}</td><td>{q}</td><td>{done}</td>\
             <td>{where_}</td><td class=\"cmd\">{cmd}</td><td>{note}</td></tr>",
            dom = id.replace('.', "-"),
            cls = status.to_ascii_lowercase().replace(' ', "-"),
            id = esc(&id),
            owner = esc(&string(ad, "Owner")),
            q = esc(&when(int(ad, "QDate").unwrap_or(0))),
            done = esc(&when(int(ad, "CompletionDate").unwrap_or(0))),
            cmd = esc(&crate::cmd::q::cmd_line(ad)),
            note = esc(&note),
        );
    }
}

/// The head of a job table.
pub const JOB_TABLE_HEAD: &str = "<table id=\"jobs\" class=\"grid\"><thead><tr><th>ID</th>\
    <th>Owner</th><th>Status</th><th>Submitted</th><th>Completed</th><th>Where</th>\
    <th>Command</th><th>Note</th></tr></thead><tbody>";

/// An ad as a two-column table, attributes in name order.
pub fn ad_table(ad: &ClassAd) -> String {
    let mut rows: Vec<(String, String)> = ad
        .to_old_syntax()
        .lines()
        .filter_map(|l| l.split_once(" = ").map(|(n, v)| (n.to_string(), v.to_string())))
        .collect();
    rows.sort_by_key(|(n, _)| n.to_ascii_lowercase());
    let mut out = String::from("<table id=\"ad\" class=\"grid ad\"><tbody>");
    for (n, v) in rows {
        let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(&n), esc(&v));
    }
    out.push_str("</tbody></table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_values_is_text() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        let ad = classad::parse_ad(
            "[ClusterId = 3; ProcId = 0; Owner = \"<b>me</b>\"; JobStatus = 5; \
             HoldReason = \"<img src=x onerror=alert(1)>\"; Cmd = \"/a/<i>.wasm\"]",
        )
        .unwrap();
        let mut out = String::new();
        job_rows(&mut out, std::slice::from_ref(&ad), "queue");
        assert!(!out.contains("<b>") && !out.contains("<img") && !out.contains("<i>"), "{out}");
        assert!(out.contains("&lt;img src=x onerror=alert(1)&gt;"), "{out}");
        let table = ad_table(&ad);
        assert!(!table.contains("<b>") && table.contains("&lt;b&gt;me&lt;/b&gt;"), "{table}");
    }
}
