//! The `Partitionable Resources` table of events 004 and 005: written as
//! HTCondor's writer lays it out, and read back by its column edges as
//! HTCondor's reader finds them.

use std::fmt::Write as _;

use super::ResourceUsage;
use super::old_syntax::{old_string, unquote_old};

/// A cell of the resources table: `%.2f` when it has a fractional part,
/// else the integer.
fn usage_cell(v: Option<f64>) -> (String, bool) {
    match v {
        None => (String::new(), false),
        Some(r) if r.fract() > 0.0 => (format!("{r:.2}"), true),
        Some(r) => (format!("{}", r.trunc() as i64), false),
    }
}

pub(super) fn resources_text(out: &mut String, resources: &[ResourceUsage]) {
    struct Row {
        name: String,
        use_: String,
        req: String,
        alloc: String,
        assigned: String,
    }
    let mut rows: Vec<Row> = Vec::with_capacity(resources.len());

    let (mut use_fp, mut req_fp, mut alloc_fp) = (false, false, false);
    // A row with no value says nothing (and HTCondor's reader drops it).
    let present = |r: &&ResourceUsage| {
        r.usage.is_some() || r.request.is_some() || r.allocated.is_some() || r.assigned.is_some()
    };
    for r in resources.iter().filter(present) {
        let (use_, f1) = usage_cell(r.usage);
        let (req, f2) = usage_cell(r.request);
        let (alloc, f3) = usage_cell(r.allocated);
        use_fp |= f1;
        req_fp |= f2;
        alloc_fp |= f3;
        let assigned = match &r.assigned {
            Some(a) => {
                let mut s = String::new();
                old_string(&mut s, a);
                s
            }
            None => String::new(),
        };
        rows.push(Row { name: r.name.clone(), use_, req, alloc, assigned });
    }
    if rows.is_empty() {
        return;
    }
    // HTCondor keeps the rows in a map ordered case-insensitively.
    rows.sort_by_key(|r| r.name.to_ascii_lowercase());
    let bare = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (mut w_res, mut w_use, mut w_req, mut w_alloc, mut w_assigned) =
        ("Memory (MB)".len() + 1, 8, 8, 0, 0);
    for row in &mut rows {
        if use_fp && bare(&row.use_) {
            row.use_.push_str("   ");
        }
        if req_fp && bare(&row.req) {
            row.req.push_str("   ");
        }
        if alloc_fp && bare(&row.alloc) {
            row.alloc.push_str("   ");
        }
        w_res = w_res.max(row.name.len());
        w_use = w_use.max(row.use_.len());
        w_req = w_req.max(row.req.len());
        w_alloc = w_alloc.max(row.alloc.len());
        w_assigned = w_assigned.max(row.assigned.len());
    }
    let w_alloc_col = w_alloc.max(9);
    let _ = writeln!(
        out,
        "\tPartitionable Resources : {:>w_use$} {:>w_req$} {:>w_alloc_col$} {}",
        "Usage",
        "Request",
        if w_alloc > 0 { "Allocated" } else { "" },
        if w_assigned > 0 { "Assigned" } else { "" },
    );
    let w_label = w_res + 8;
    for row in &rows {
        let label = match row.name.as_str() {
            "Memory" | "GpusMemory" => format!("{} (MB)", row.name),
            "Disk" => "Disk (KB)".to_string(),
            "Gpus" => "Gpus (Average)".to_string(),
            "TimeExecute" | "TimeSlotBusy" => format!("{} (s)", row.name),
            _ => row.name.clone(),
        };
        let _ = writeln!(
            out,
            "\t   {label:<w_label$} : {:>w_use$} {:>w_req$} {:>w_alloc_col$} {}",
            row.use_, row.req, row.alloc, row.assigned
        );
    }
}

/// Column edges of the resources table, found from its header as
/// HTCondor's reader finds them.
pub(super) struct TableColumns {
    use_end: usize,
    req_end: usize,
    alloc_end: Option<usize>,
    assigned_start: Option<usize>,
}

impl TableColumns {
    pub(super) fn from_header(header: &str) -> TableColumns {
        let tbl = header.split_once(':').map_or("", |(_, t)| t).as_bytes();
        let mut i = 0;
        let skip = |i: &mut usize, space: bool| {
            while *i < tbl.len() && (tbl[*i] == b' ') == space {
                *i += 1;
            }
        };
        skip(&mut i, true);
        skip(&mut i, false);
        let use_end = i + 1;
        skip(&mut i, true);
        skip(&mut i, false);
        let req_end = i + 1;
        skip(&mut i, true);
        let rest = std::str::from_utf8(&tbl[i.min(tbl.len())..]).unwrap_or("");
        let (mut alloc_end, mut assigned_start) = (None, None);
        if let Some(p) = rest.find("Allocated") {
            alloc_end = Some(i + p + 9);
            if let Some(q) = rest[p..].find("Assigned") {
                assigned_start = Some(i + p + q);
            }
        }
        TableColumns { use_end, req_end, alloc_end, assigned_start }
    }

    /// A table row, or None when the line is not one (the table has ended).
    pub(super) fn row(&self, line: &str) -> Option<Result<ResourceUsage, String>> {
        let (label, tbl) = line.split_once(':')?;
        let name =
            label.trim_start_matches(['\t', ' ']).split(' ').next().unwrap_or("").to_string();
        let cell = |a: usize, b: usize| -> &str {
            let b = b.min(tbl.len());
            tbl.get(a.min(b)..b).unwrap_or("").trim()
        };
        let num = |s: &str| -> Result<Option<f64>, String> {
            if s.is_empty() {
                return Ok(None);
            }
            s.parse::<f64>()
                .map(Some)
                .map_err(|_| format!("resource `{name}`: `{s}` is not a number"))
        };
        let r = (|| {
            let usage = num(cell(0, self.use_end))?;
            let request = num(cell(self.use_end, self.req_end))?;
            let allocated = match self.alloc_end {
                Some(end) => num(cell(self.req_end, end))?,
                None => None,
            };
            let assigned = match self.assigned_start {
                Some(start) => {
                    let s = cell(start, tbl.len());
                    (!s.is_empty()).then(|| unquote_old(s))
                }
                None => None,
            };
            Ok(ResourceUsage { name: name.clone(), usage, request, allocated, assigned })
        })();
        Some(r)
    }
}
