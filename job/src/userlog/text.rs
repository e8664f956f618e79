//! An event's exact text: [`FormatOptions`] (how dates are written, HTCondor's
//! `DEFAULT_USERLOG_FORMAT_OPTIONS`), [`JobEvent::to_text`] with the header
//! line and each event's body, and [`one_line`], which keeps free text from
//! breaking the format.

use std::borrow::Cow;
use std::fmt::Write as _;

use jiff::tz::TimeZone;

use super::old_syntax::old_value;
use super::resources::resources_text;
use super::{
    Completion, CpuUsage, Ending, EventJobId, EventKind, Eviction, ExecErrorType, JobEvent,
    SYNC_LINE,
};

/// How dates are written: HTCondor's `DEFAULT_USERLOG_FORMAT_OPTIONS`.
#[derive(Clone, Debug)]
pub struct FormatOptions {
    /// `ISO_DATE` (the default): `2026-11-22 04:05:49`; otherwise the legacy
    /// `11/22 04:05:49`, which has no year.
    pub iso_date: bool,
    /// `UTC`: write UTC time with a `Z` suffix instead of local time.
    pub utc: bool,
    /// `SUB_SECOND`: append milliseconds (`.123`).
    pub sub_second: bool,
    /// The local time zone (used unless `utc`).
    pub zone: TimeZone,
}

impl Default for FormatOptions {
    /// HTCondor 25's default: ISO dates in the system's local time zone.
    fn default() -> FormatOptions {
        FormatOptions { iso_date: true, utc: false, sub_second: false, zone: TimeZone::system() }
    }
}

impl FormatOptions {
    /// ISO dates in UTC with a `Z`: unambiguous for readers in any time zone.
    pub fn utc() -> FormatOptions {
        FormatOptions { iso_date: true, utc: true, sub_second: false, zone: TimeZone::UTC }
    }

    /// ISO dates in local time of `zone`, without a `Z` (HTCondor's default form).
    pub fn local(zone: TimeZone) -> FormatOptions {
        FormatOptions { iso_date: true, utc: false, sub_second: false, zone }
    }

    /// Applies a `DEFAULT_USERLOG_FORMAT_OPTIONS` value (`ISO_DATE`, `UTC`,
    /// `SUB_SECOND`, `LEGACY`, each optionally negated with `!`, separated by
    /// spaces or commas) to these options, as HTCondor does. `XML` and `JSON`
    /// select other log formats, which andes does not write: they are ignored.
    pub fn apply(mut self, options: &str) -> FormatOptions {
        for opt in options.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty())
        {
            let (bang, name) = match opt.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, opt),
            };
            let on = !bang;
            if name.eq_ignore_ascii_case("ISO_DATE") {
                self.iso_date = on;
            } else if name.eq_ignore_ascii_case("UTC") {
                self.utc = on;
            } else if name.eq_ignore_ascii_case("SUB_SECOND") {
                self.sub_second = on;
            } else if name.eq_ignore_ascii_case("LEGACY") {
                if bang {
                    self.iso_date = true;
                } else {
                    self.iso_date = false;
                    self.utc = false;
                    self.sub_second = false;
                }
            }
        }
        self
    }
}

/// A one-line field as HTCondor's event setters store it: `\n` becomes `|`,
/// `\r` a space (and NUL, which C readers would stop at, a space).
pub fn one_line(s: &str) -> Cow<'_, str> {
    if !s.contains(['\n', '\r', '\0']) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                '\n' => '|',
                '\r' | '\0' => ' ',
                c => c,
            })
            .collect(),
    )
}

/// `%.Ns`: at most `n` bytes, cut at a character boundary.
pub(super) fn clip(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn opt_text(s: &Option<String>) -> Option<Cow<'_, str>> {
    s.as_deref().filter(|s| !s.is_empty()).map(one_line)
}

pub(super) fn usage_text(out: &mut String, u: &CpuUsage) {
    let split = |s: u32| (s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60);
    let (ud, uh, um, us) = split(u.user.min(i32::MAX as u32));
    let (sd, sh, sm, ss) = split(u.system.min(i32::MAX as u32));
    let _ = write!(out, "\tUsr {ud} {uh:02}:{um:02}:{us:02}, Sys {sd} {sh:02}:{sm:02}:{ss:02}");
}

fn ending_text(out: &mut String, ending: &Ending, trailing_tab: bool) {
    let tab = if trailing_tab { "\t" } else { "" };
    match ending {
        Ending::Normal { return_value } => {
            let _ = write!(out, "\t(1) Normal termination (return value {return_value})\n{tab}");
        }
        Ending::Abnormal { signal, core_file } => {
            let _ = writeln!(out, "\t(0) Abnormal termination (signal {signal})");
            match core_file.as_deref().filter(|c| !c.is_empty()) {
                Some(core) => {
                    let _ = write!(out, "\t(1) Corefile in: {}\n{tab}", one_line(core));
                }
                None => {
                    let _ = write!(out, "\t(0) No core file\n{tab}");
                }
            }
        }
    }
}

fn notes_text(out: &mut String, notes: &Option<String>) {
    if let Some(n) = opt_text(notes) {
        let _ = writeln!(out, "    {}", clip(&n, 8191));
    }
}

impl JobEvent {
    /// The event's exact text, from the header line to the closing `...` line
    /// (with its newline).
    pub fn to_text(&self, opts: &FormatOptions) -> String {
        let mut out = String::with_capacity(256);
        self.header_to(&mut out, opts);
        self.body_to(&mut out);
        out.push_str(SYNC_LINE);
        out.push('\n');
        out
    }

    fn header_to(&self, out: &mut String, opts: &FormatOptions) {
        let EventJobId { cluster, proc, subproc } = self.id;
        let _ = write!(out, "{:03} ({cluster:03}.{proc:03}.{subproc:03}) ", self.kind.number());
        let zone = if opts.utc { TimeZone::UTC } else { opts.zone.clone() };
        let t = self.time.to_zoned(zone);
        if opts.iso_date {
            let _ = write!(out, "{:04}-{:02}-{:02} ", t.year(), t.month(), t.day());
        } else {
            let _ = write!(out, "{:02}/{:02} ", t.month(), t.day());
        }
        let _ = write!(out, "{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second());
        if opts.sub_second {
            let _ = write!(out, ".{:03}", t.millisecond());
        }
        if opts.utc {
            out.push('Z');
        }
        out.push(' ');
    }

    fn body_to(&self, out: &mut String) {
        match &self.kind {
            EventKind::Submit(s) => {
                let _ = writeln!(out, "Job submitted from host: {}", one_line(&s.submit_host));
                notes_text(out, &s.log_notes);
                notes_text(out, &s.user_notes);
                if let Some(w) = opt_text(&s.warnings) {
                    let _ = writeln!(
                        out,
                        "    WARNING: Committed job submission into the queue with the following warning(s): {}",
                        clip(&w, 8110)
                    );
                }
            }
            EventKind::Execute(e) => {
                let _ = writeln!(out, "Job executing on host: {}", one_line(&e.execute_host));
                if let Some(slot) = opt_text(&e.slot_name) {
                    let _ = writeln!(out, "\tSlotName: {slot}");
                }
            }
            EventKind::ExecutableError(t) => {
                let _ = match t {
                    ExecErrorType::NotExecutable => writeln!(out, "(0) Job file not executable."),
                    ExecErrorType::BadLink => {
                        writeln!(out, "(1) Job not properly linked for Condor.")
                    }
                };
            }
            EventKind::Checkpointed(c) => {
                out.push_str("Job was checkpointed.\n");
                usage_text(out, &c.run_remote_usage);
                out.push_str("  -  Run Remote Usage\n");
                usage_text(out, &c.run_local_usage);
                out.push_str("  -  Run Local Usage\n");
                let _ =
                    writeln!(out, "\t{}  -  Run Bytes Sent By Job For Checkpoint", c.sent_bytes);
            }
            EventKind::Evicted(e) => {
                if e.reason_code != 0 {
                    let _ = write!(
                        out,
                        "Job was evicted. Code {} Subcode {}\n\t",
                        e.reason_code, e.reason_subcode
                    );
                } else {
                    out.push_str("Job was evicted.\n\t");
                }
                out.push_str(match e.eviction {
                    Eviction::TerminatedAndRequeued(_) => "(0) Job terminated and was requeued\n\t",
                    Eviction::Checkpointed => "(1) Job was checkpointed.\n\t",
                    Eviction::NotCheckpointed => "(0) CPU times\n\t",
                });
                usage_text(out, &e.run_remote_usage);
                out.push_str("  -  Run Remote Usage\n\t");
                usage_text(out, &e.run_local_usage);
                out.push_str("  -  Run Local Usage\n");
                let _ = writeln!(out, "\t{}  -  Run Bytes Sent By Job", e.sent_bytes);
                let _ = writeln!(out, "\t{}  -  Run Bytes Received By Job", e.received_bytes);
                if let Eviction::TerminatedAndRequeued(ending) = &e.eviction {
                    ending_text(out, ending, false);
                }
                if let Some(reason) = opt_text(&e.reason) {
                    if matches!(e.eviction, Eviction::TerminatedAndRequeued(_)) {
                        let _ = writeln!(out, "\t{reason}");
                    } else {
                        let _ = writeln!(out, "\tReason: {reason}");
                    }
                }
                resources_text(out, &e.resources);
            }
            EventKind::Terminated(t) => {
                out.push_str("Job terminated.\n");
                ending_text(out, &t.ending, true);
                usage_text(out, &t.run_remote_usage);
                out.push_str("  -  Run Remote Usage\n\t");
                usage_text(out, &t.run_local_usage);
                out.push_str("  -  Run Local Usage\n\t");
                usage_text(out, &t.total_remote_usage);
                out.push_str("  -  Total Remote Usage\n\t");
                usage_text(out, &t.total_local_usage);
                out.push_str("  -  Total Local Usage\n");
                let _ = writeln!(out, "\t{}  -  Run Bytes Sent By Job", t.sent_bytes);
                let _ = writeln!(out, "\t{}  -  Run Bytes Received By Job", t.received_bytes);
                let _ = writeln!(out, "\t{}  -  Total Bytes Sent By Job", t.total_sent_bytes);
                let _ =
                    writeln!(out, "\t{}  -  Total Bytes Received By Job", t.total_received_bytes);
                resources_text(out, &t.resources);
            }
            EventKind::ImageSize(s) => {
                let _ = writeln!(out, "Image size of job updated: {}", s.image_size_kb);
                if let Some(m) = s.memory_usage_mb.filter(|v| *v >= 0) {
                    let _ = writeln!(out, "\t{m}  -  MemoryUsage of job (MB)");
                }
                if let Some(r) = s.resident_set_size_kb.filter(|v| *v >= 0) {
                    let _ = writeln!(out, "\t{r}  -  ResidentSetSize of job (KB)");
                }
                if let Some(p) = s.proportional_set_size_kb.filter(|v| *v >= 0) {
                    let _ = writeln!(out, "\t{p}  -  ProportionalSetSize of job (KB)");
                }
            }
            EventKind::ShadowException(s) => {
                let _ = writeln!(out, "Shadow exception!\n\t{}", one_line(&s.message));
                let _ = writeln!(out, "\t{}  -  Run Bytes Sent By Job", s.sent_bytes);
                let _ = writeln!(out, "\t{}  -  Run Bytes Received By Job", s.received_bytes);
            }
            EventKind::Generic(info) => {
                let _ = writeln!(out, "{}", clip(&one_line(info), 1023));
            }
            EventKind::Aborted(reason) => {
                out.push_str("Job was aborted.\n");
                if let Some(r) = opt_text(reason) {
                    let _ = writeln!(out, "\t{r}");
                }
            }
            EventKind::Suspended(n) => {
                let _ = writeln!(
                    out,
                    "Job was suspended.\n\tNumber of processes actually suspended: {n}"
                );
            }
            EventKind::Unsuspended => out.push_str("Job was unsuspended.\n"),
            EventKind::Held { reason, code, subcode } => {
                out.push_str("Job was held.\n");
                match opt_text(reason) {
                    Some(r) => {
                        let _ = writeln!(out, "\t{r}");
                    }
                    None => out.push_str("\tReason unspecified\n"),
                }
                let _ = writeln!(out, "\tCode {code} Subcode {subcode}");
            }
            EventKind::Released(reason) => {
                out.push_str("Job was released.\n");
                if let Some(r) = opt_text(reason) {
                    let _ = writeln!(out, "\t{r}");
                }
            }
            EventKind::RemoteError(e) => {
                let _ = writeln!(
                    out,
                    "{} from {} on {}:",
                    if e.critical { "Error" } else { "Warning" },
                    one_line(&e.daemon_name),
                    one_line(&e.execute_host)
                );
                if !e.error.is_empty() {
                    for line in e.error.split('\n') {
                        let _ = writeln!(out, "\t{}", one_line(line));
                    }
                }
                if e.hold_reason_code != 0 {
                    let _ = writeln!(
                        out,
                        "\tCode {} Subcode {}",
                        e.hold_reason_code, e.hold_reason_subcode
                    );
                }
            }
            EventKind::Disconnected(d) => {
                out.push_str("Job disconnected, attempting to reconnect\n");
                let _ = writeln!(out, "    {}", clip(&one_line(&d.reason), 8191));
                let _ = writeln!(
                    out,
                    "    Trying to reconnect to {} {}",
                    one_line(&d.startd_name),
                    one_line(&d.startd_addr)
                );
            }
            EventKind::Reconnected(r) => {
                let _ = writeln!(out, "Job reconnected to {}", one_line(&r.startd_name));
                let _ = writeln!(out, "    startd address: {}", one_line(&r.startd_addr));
                let _ = writeln!(out, "    starter address: {}", one_line(&r.starter_addr));
            }
            EventKind::ReconnectFailed(r) => {
                out.push_str("Job reconnection failed\n");
                let _ = writeln!(out, "    {}", clip(&one_line(&r.reason), 8191));
                let _ = writeln!(
                    out,
                    "    Can not reconnect to {}, rescheduling job",
                    one_line(&r.startd_name)
                );
            }
            EventKind::JobAdInformation(ad) => {
                out.push_str("Job ad information event triggered.\n");
                let mut lines: Vec<(&str, String)> = ad
                    .iter()
                    .filter(|(name, _)| !name.needs_quotes())
                    .filter_map(|(name, e)| Some((name.as_str(), old_value(e)?)))
                    .collect();
                // sPrintAd's order: attribute names sorted bytewise.
                lines.sort_by(|a, b| a.0.cmp(b.0));
                for (name, value) in lines {
                    let _ = writeln!(out, "{name} = {value}");
                }
            }
            EventKind::AttributeUpdate(u) => {
                let _ = match &u.old_value {
                    Some(old) => writeln!(
                        out,
                        "Changing job attribute {} from {} to {}",
                        one_line(&u.name),
                        one_line(old),
                        one_line(&u.value)
                    ),
                    None => writeln!(
                        out,
                        "Setting job attribute {} to {}",
                        one_line(&u.name),
                        one_line(&u.value)
                    ),
                };
            }
            EventKind::ClusterSubmit(c) => {
                let _ = writeln!(out, "Cluster submitted from host: {}", one_line(&c.submit_host));
                notes_text(out, &c.log_notes);
                notes_text(out, &c.user_notes);
            }
            EventKind::ClusterRemove(c) => {
                let _ = write!(
                    out,
                    "Cluster removed\n\tMaterialized {} jobs from {} items.",
                    c.next_proc_id, c.next_row
                );
                let _ = match c.completion {
                    Completion::Error(code) => writeln!(out, "\tError {code}"),
                    Completion::Complete => writeln!(out, "\tComplete"),
                    Completion::Paused => writeln!(out, "\tPaused"),
                    Completion::Incomplete => writeln!(out, "\tIncomplete"),
                };
                if let Some(n) = opt_text(&c.notes) {
                    let _ = writeln!(out, "\t{n}");
                }
            }
            EventKind::Other { lines, .. } => {
                if lines.is_empty() {
                    out.push('\n');
                }
                for line in lines {
                    let line = one_line(line);
                    // A body line must never read as the end of the event.
                    if line == SYNC_LINE {
                        out.push(' ');
                    }
                    let _ = writeln!(out, "{line}");
                }
            }
        }
    }
}
