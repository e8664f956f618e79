//! Reading a log's text back: [`parse_log`] with [`ParseOptions`] (the zone
//! and year of dates), each event's header and body read as HTCondor's
//! reader reads them, and [`ParseError`] naming the line.

use std::fmt;

use classad::ClassAd;
use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::TimeZone;

use super::old_syntax::old_to_new_syntax;
use super::resources::TableColumns;
use super::text::clip;
use super::*;

/// How to read the dates of a log.
#[derive(Clone, Debug)]
pub struct ParseOptions {
    /// The zone of dates written without `Z` (HTCondor writes local time by default).
    pub zone: TimeZone,
    /// The year of legacy `MM/DD` dates, which carry none.
    pub legacy_year: Option<i16>,
}

impl Default for ParseOptions {
    /// The system's local time zone; no year for legacy dates.
    fn default() -> ParseOptions {
        ParseOptions { zone: TimeZone::system(), legacy_year: None }
    }
}

impl ParseOptions {
    /// Dates without `Z` are in `zone`.
    pub fn in_zone(zone: TimeZone) -> ParseOptions {
        ParseOptions { zone, legacy_year: None }
    }
}

/// A malformed log: the 1-based line and what was wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub msg: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.msg)
    }
}

impl std::error::Error for ParseError {}

/// Parses a whole log. Lines an event does not need are skipped, as
/// HTCondor's reader skips them; a last event without its `...` line is an
/// error (it may still be being written).
pub fn parse_log(text: &str, opts: &ParseOptions) -> Result<Vec<JobEvent>, ParseError> {
    let mut events = Vec::new();
    let mut lines =
        text.split('\n').enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
    while let Some((lineno, line)) = lines.next() {
        let mut last_line = lineno;
        if line.trim().is_empty() {
            continue;
        }
        let (number, id, time, rest) =
            parse_header(line, opts).map_err(|msg| ParseError { line: lineno, msg })?;
        let mut body = vec![(lineno, rest)];
        let mut closed = false;
        for (n, l) in lines.by_ref() {
            last_line = n;
            if l == SYNC_LINE {
                closed = true;
                break;
            }
            body.push((n, l));
        }
        if !closed {
            return Err(ParseError {
                line: lineno,
                msg: format!(
                    "event {number:03} has no closing `...` line (line {last_line} is the last)"
                ),
            });
        }
        let kind = Body { lines: body, pos: 0, number }.parse()?;
        events.push(JobEvent { id, time, kind });
    }
    Ok(events)
}

fn parse_int<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, String> {
    s.trim().parse::<T>().map_err(|_| format!("expected {what}, found `{s}`"))
}

/// `NNN (c.p.s) DATE TIME rest` → its parts.
fn parse_header<'a>(
    line: &'a str,
    opts: &ParseOptions,
) -> Result<(u16, EventJobId, Timestamp, &'a str), String> {
    let bad = || {
        format!(
            "expected an event header `NNN (cluster.proc.subproc) date time`, found `{}`",
            clip(line, 80)
        )
    };
    let b = line.as_bytes();
    if b.len() < 4 || !b[..3].iter().all(u8::is_ascii_digit) || b[3] != b' ' {
        return Err(bad());
    }
    let number: u16 = line[..3].parse().map_err(|_| bad())?;
    let rest = line[4..].strip_prefix('(').ok_or_else(bad)?;
    let (ids, rest) = rest.split_once(") ").ok_or_else(bad)?;
    let mut parts = ids.split('.');
    let mut next =
        || -> Result<i32, String> { parse_int(parts.next().unwrap_or(""), "a job id number") };
    let id = EventJobId { cluster: next()?, proc: next()?, subproc: next()? };
    // The date: `YYYY-MM-DD hh:mm:ss[.fff][Z]`, `YYYY-MM-DDThh:…` or legacy `MM/DD hh:mm:ss`.
    let rb = rest.as_bytes();
    let (year, month, day, rest) = if rb.len() > 5 && rb[2] == b'/' {
        let year = opts.legacy_year.ok_or_else(|| {
            "a legacy date (MM/DD) has no year: give ParseOptions::legacy_year".to_string()
        })?;
        let month: i8 = parse_int(&rest[..2], "a month")?;
        let day: i8 = parse_int(rest.get(3..5).ok_or_else(bad)?, "a day")?;
        (year, month, day, rest.get(6..).ok_or_else(bad)?)
    } else if rb.len() > 11 && rb[4] == b'-' && rb[7] == b'-' && (rb[10] == b' ' || rb[10] == b'T')
    {
        let year: i16 = parse_int(&rest[..4], "a year")?;
        let month: i8 = parse_int(&rest[5..7], "a month")?;
        let day: i8 = parse_int(&rest[8..10], "a day")?;
        (year, month, day, &rest[11..])
    } else {
        return Err(bad());
    };
    let (clock, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let (clock, utc) = match clock.strip_suffix('Z') {
        Some(c) => (c, true),
        None => (clock, false),
    };
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let mut hms = hms.split(':');
    let mut field = |what| -> Result<i8, String> { parse_int(hms.next().unwrap_or(""), what) };
    let (hour, minute, second) = (field("an hour")?, field("a minute")?, field("a second")?);
    let nanos: i32 = if frac.is_empty() {
        0
    } else {
        if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("bad fraction of a second `{frac}`"));
        }
        format!("{frac:0<9}").parse().map_err(|_| bad())?
    };
    let dt = DateTime::new(year, month, day, hour, minute, second, nanos)
        .map_err(|e| format!("bad date or time: {e}"))?;
    let zone = if utc { TimeZone::UTC } else { opts.zone.clone() };
    let time = dt.to_zoned(zone).map_err(|e| format!("bad date or time: {e}"))?.timestamp();
    Ok((number, id, time, rest))
}

/// The lines of one event's body: the rest of the header line, then the others.
struct Body<'a> {
    lines: Vec<(usize, &'a str)>,
    pos: usize,
    number: u16,
}

impl<'a> Body<'a> {
    fn err(&self, msg: impl Into<String>) -> ParseError {
        let line =
            self.lines.get(self.pos.saturating_sub(1)).or(self.lines.last()).map_or(0, |l| l.0);
        ParseError { line, msg: format!("event {:03}: {}", self.number, msg.into()) }
    }

    fn next(&mut self) -> Option<&'a str> {
        let l = self.lines.get(self.pos).map(|l| l.1);
        if l.is_some() {
            self.pos += 1;
        }
        l
    }

    fn peek(&self) -> Option<&'a str> {
        self.lines.get(self.pos).map(|l| l.1)
    }

    fn expect(&mut self, what: &str) -> Result<&'a str, ParseError> {
        match self.next() {
            Some(l) => Ok(l),
            None => Err(self.err(format!("missing {what}"))),
        }
    }

    /// The next line, which must start with `prefix`: the rest of it.
    fn prefixed(&mut self, prefix: &str) -> Result<&'a str, ParseError> {
        let l = self.expect(&format!("`{}`", prefix.trim()))?;
        l.strip_prefix(prefix).ok_or_else(|| {
            self.err(format!("expected `{}`, found `{}`", prefix.trim(), clip(l, 80)))
        })
    }

    fn wrap<T>(&self, r: Result<T, String>) -> Result<T, ParseError> {
        r.map_err(|m| self.err(m))
    }

    fn usage(&mut self, label: &str) -> Result<CpuUsage, ParseError> {
        let l = self.expect(&format!("the `{label}` line"))?;
        let r = parse_usage(l);
        self.wrap(r.ok_or_else(|| {
            format!(
                "expected `Usr D HH:MM:SS, Sys D HH:MM:SS  -  {label}`, found `{}`",
                clip(l, 80)
            )
        }))
    }

    /// An optional `\tN  -  <label>` line.
    fn bytes(&mut self, label: &str) -> Option<u64> {
        let l = self.peek()?;
        let (n, rest) = l.trim_start().split_once("  -  ")?;
        if rest != label {
            return None;
        }
        let v = n.parse::<u64>().ok().or_else(|| n.parse::<f64>().ok().map(|f| f as u64))?;
        self.pos += 1;
        Some(v)
    }

    fn ending(&mut self) -> Result<Ending, ParseError> {
        let l = self.expect("the termination line")?;
        let t = l.trim_start();
        if let Some(rest) = t.strip_prefix("(1) Normal termination (return value ") {
            let v =
                self.wrap(parse_int(rest.trim_end().trim_end_matches(')'), "a return value"))?;
            return Ok(Ending::Normal { return_value: v });
        }
        if let Some(rest) = t.strip_prefix("(0) Abnormal termination (signal ") {
            let signal =
                self.wrap(parse_int(rest.trim_end().trim_end_matches(')'), "a signal number"))?;
            let core = self.expect("the core file line")?.trim();
            let core_file = if let Some(c) = core.strip_prefix("(1) Corefile in: ") {
                Some(c.to_string())
            } else if core.starts_with("(0)") {
                None
            } else {
                return Err(self.err(format!(
                    "expected `(0) No core file` or `(1) Corefile in: …`, found `{}`",
                    clip(core, 80)
                )));
            };
            return Ok(Ending::Abnormal { signal, core_file });
        }
        Err(self.err(format!(
            "expected `(1) Normal termination …` or `(0) Abnormal termination …`, found `{}`",
            clip(l, 80)
        )))
    }

    /// An optional resources table.
    fn resources(&mut self) -> Result<Vec<ResourceUsage>, ParseError> {
        let Some(header) = self.peek() else { return Ok(Vec::new()) };
        let h = header.trim_start_matches(['\t', ' ']);
        if !h.starts_with("Partitionable ") && !h.starts_with("Resources") {
            return Ok(Vec::new());
        }
        self.pos += 1;
        let cols = TableColumns::from_header(header);
        let mut out: Vec<ResourceUsage> = Vec::new();
        while let Some(l) = self.peek() {
            let Some(row) = cols.row(l) else { break };
            self.pos += 1;
            let row = self.wrap(row)?;
            match out.iter_mut().find(|r| r.name.eq_ignore_ascii_case(&row.name)) {
                Some(r) => *r = row,
                None => out.push(row),
            }
        }
        Ok(out)
    }

    /// The rest of the lines, trimmed, as optional notes.
    fn optional_trimmed(&mut self) -> Option<String> {
        let l = self.peek()?.trim();
        self.pos += 1;
        (!l.is_empty()).then(|| l.to_string())
    }

    fn parse(mut self) -> Result<EventKind, ParseError> {
        use number as n;
        let first = self.expect("the event's text")?;
        // `expect` moved past the first line; put it back for the prefixed readers.
        self.pos = 0;
        let kind = match self.number {
            n::SUBMIT | n::CLUSTER_SUBMIT => {
                let prefix = if self.number == n::SUBMIT {
                    "Job submitted from host: "
                } else {
                    "Cluster submitted from host: "
                };
                let host = self.prefixed(prefix)?.to_string();
                let (mut log_notes, mut user_notes, mut warnings) = (None, None, None);
                let mut k = 0;
                while let Some(l) = self.next() {
                    let l = l.trim();
                    k += 1;
                    if let Some(w) =
                        l.strip_prefix("WARNING: ").filter(|_| self.number == n::SUBMIT)
                    {
                        let w = w
                            .strip_prefix("Committed job submission into the queue with the following warning(s): ")
                            .unwrap_or(w);
                        warnings = Some(w.to_string());
                    } else if k == 1 {
                        log_notes = Some(l.to_string());
                    } else if k == 2 {
                        user_notes = Some(l.to_string());
                    }
                }
                if self.number == n::SUBMIT {
                    EventKind::Submit(Submit { submit_host: host, log_notes, user_notes, warnings })
                } else {
                    EventKind::ClusterSubmit(ClusterSubmit {
                        submit_host: host,
                        log_notes,
                        user_notes,
                    })
                }
            }
            n::EXECUTE => {
                let host = self.prefixed("Job executing on host: ")?.to_string();
                let slot_name = match self.peek() {
                    Some(l) if l.starts_with("\tSlotName:") => {
                        self.pos += 1;
                        let s = l["\tSlotName:".len()..].trim();
                        Some(s.trim_matches('"').to_string())
                    }
                    _ => None,
                };
                EventKind::Execute(Execute { execute_host: host, slot_name })
            }
            n::EXECUTABLE_ERROR => {
                let rest = self.prefixed("(")?;
                let code = rest.split(')').next().unwrap_or("");
                match self.wrap(parse_int::<i32>(code, "an error type"))? {
                    0 => EventKind::ExecutableError(ExecErrorType::NotExecutable),
                    1 => EventKind::ExecutableError(ExecErrorType::BadLink),
                    other => return Err(self.err(format!("unknown executable error type {other}"))),
                }
            }
            n::CHECKPOINTED => {
                self.prefixed("Job was checkpointed.")?;
                let run_remote_usage = self.usage("Run Remote Usage")?;
                let run_local_usage = self.usage("Run Local Usage")?;
                let sent_bytes = self.bytes("Run Bytes Sent By Job For Checkpoint").unwrap_or(0);
                EventKind::Checkpointed(Checkpointed {
                    run_remote_usage,
                    run_local_usage,
                    sent_bytes,
                })
            }
            n::JOB_EVICTED => {
                let rest = self.prefixed("Job was evicted.")?;
                let (mut reason_code, mut reason_subcode) = (0, 0);
                if let Some(codes) = rest.trim().strip_prefix("Code ") {
                    let (c, s) = codes.split_once(" Subcode ").unwrap_or((codes, "0"));
                    reason_code = self.wrap(parse_int(c, "a code"))?;
                    reason_subcode = self.wrap(parse_int(s, "a subcode"))?;
                }
                let how = self.expect("the eviction line")?.trim();
                let requeued = how.starts_with("(0) Job terminated and was requeued");
                let checkpointed = how.starts_with("(1)");
                let run_remote_usage = self.usage("Run Remote Usage")?;
                let run_local_usage = self.usage("Run Local Usage")?;
                let sent_bytes = self.bytes("Run Bytes Sent By Job");
                let received_bytes =
                    sent_bytes.and_then(|_| self.bytes("Run Bytes Received By Job"));
                let eviction = if requeued && received_bytes.is_some() {
                    Eviction::TerminatedAndRequeued(self.ending()?)
                } else if requeued {
                    Eviction::TerminatedAndRequeued(Ending::Normal { return_value: -1 })
                } else if checkpointed {
                    Eviction::Checkpointed
                } else {
                    Eviction::NotCheckpointed
                };
                let mut reason = None;
                if received_bytes.is_some()
                    && let Some(l) = self.peek()
                    && !l.starts_with("\tPartitionable Resources")
                {
                    self.pos += 1;
                    let r = match l.strip_prefix("\tReason: ") {
                        Some(r) => r.to_string(),
                        None => l.trim().to_string(),
                    };
                    reason = (!r.is_empty()).then_some(r);
                }
                let resources = self.resources()?;
                EventKind::Evicted(Evicted {
                    eviction,
                    reason_code,
                    reason_subcode,
                    run_remote_usage,
                    run_local_usage,
                    sent_bytes: sent_bytes.unwrap_or(0),
                    received_bytes: received_bytes.unwrap_or(0),
                    reason,
                    resources,
                })
            }
            n::JOB_TERMINATED => {
                self.prefixed("Job terminated.")?;
                let ending = self.ending()?;
                let run_remote_usage = self.usage("Run Remote Usage")?;
                let run_local_usage = self.usage("Run Local Usage")?;
                let total_remote_usage = self.usage("Total Remote Usage")?;
                let total_local_usage = self.usage("Total Local Usage")?;
                let sent_bytes = self.bytes("Run Bytes Sent By Job").unwrap_or(0);
                let received_bytes = self.bytes("Run Bytes Received By Job").unwrap_or(0);
                let total_sent_bytes = self.bytes("Total Bytes Sent By Job").unwrap_or(0);
                let total_received_bytes = self.bytes("Total Bytes Received By Job").unwrap_or(0);
                let resources = self.resources()?;
                EventKind::Terminated(Terminated {
                    ending,
                    run_remote_usage,
                    run_local_usage,
                    total_remote_usage,
                    total_local_usage,
                    sent_bytes,
                    received_bytes,
                    total_sent_bytes,
                    total_received_bytes,
                    resources,
                })
            }
            n::IMAGE_SIZE => {
                let size = self.prefixed("Image size of job updated: ")?;
                let mut s = ImageSize {
                    image_size_kb: self.wrap(parse_int(size, "an image size"))?,
                    ..ImageSize::default()
                };
                while let Some(l) = self.peek() {
                    let Some((v, label)) = l.trim_start().split_once("  -  ") else { break };
                    let Ok(v) = v.trim().parse::<i64>() else { break };
                    let label = label.split_whitespace().next().unwrap_or("");
                    let slot = if label.eq_ignore_ascii_case("MemoryUsage") {
                        &mut s.memory_usage_mb
                    } else if label.eq_ignore_ascii_case("ResidentSetSize") {
                        &mut s.resident_set_size_kb
                    } else if label.eq_ignore_ascii_case("ProportionalSetSize") {
                        &mut s.proportional_set_size_kb
                    } else {
                        break;
                    };
                    *slot = Some(v);
                    self.pos += 1;
                }
                EventKind::ImageSize(s)
            }
            n::SHADOW_EXCEPTION => {
                self.prefixed("Shadow exception!")?;
                let message = self.next().map(|l| l.trim().to_string()).unwrap_or_default();
                let sent_bytes = self.bytes("Run Bytes Sent By Job").unwrap_or(0);
                let received_bytes = self.bytes("Run Bytes Received By Job").unwrap_or(0);
                EventKind::ShadowException(ShadowException { message, sent_bytes, received_bytes })
            }
            n::GENERIC => EventKind::Generic(first.to_string()),
            n::JOB_ABORTED => {
                self.prefixed("Job was aborted")?;
                EventKind::Aborted(self.optional_trimmed())
            }
            n::JOB_SUSPENDED => {
                self.prefixed("Job was suspended.")?;
                let count = self.prefixed("\tNumber of processes actually suspended: ")?;
                EventKind::Suspended(self.wrap(parse_int(count, "a number of processes"))?)
            }
            n::JOB_UNSUSPENDED => {
                self.prefixed("Job was unsuspended.")?;
                EventKind::Unsuspended
            }
            n::JOB_HELD => {
                self.prefixed("Job was held.")?;
                let reason = self.optional_trimmed().filter(|r| r != "Reason unspecified");
                let (mut code, mut subcode) = (0, 0);
                if let Some(codes) = self.peek().and_then(|l| l.strip_prefix("\tCode ")) {
                    self.pos += 1;
                    let (c, s) = codes.split_once(" Subcode ").unwrap_or((codes, "0"));
                    code = self.wrap(parse_int(c, "a hold code"))?;
                    subcode = self.wrap(parse_int(s, "a hold subcode"))?;
                }
                EventKind::Held { reason, code, subcode }
            }
            n::JOB_RELEASED => {
                self.prefixed("Job was released.")?;
                EventKind::Released(self.optional_trimmed())
            }
            n::REMOTE_ERROR => {
                let l = self.expect("the remote error line")?.trim();
                let (kind, rest) = l.split_once(" from ").ok_or_else(|| {
                    self.err(format!(
                        "expected `Error from DAEMON on HOST:`, found `{}`",
                        clip(l, 80)
                    ))
                })?;
                let (daemon, host) = rest.split_once(" on ").unwrap_or(("", rest));
                let mut e = RemoteError {
                    critical: kind.trim() != "Warning",
                    daemon_name: daemon.trim().to_string(),
                    execute_host: host.trim().trim_end_matches(':').to_string(),
                    ..RemoteError::default()
                };
                let mut text: Vec<&str> = Vec::new();
                while let Some(l) = self.next() {
                    let l = l.strip_prefix('\t').unwrap_or(l);
                    if let Some(codes) = l.strip_prefix("Code ")
                        && let Some((c, s)) = codes.split_once(" Subcode ")
                        && let (Ok(c), Ok(s)) = (c.parse(), s.trim().parse())
                    {
                        e.hold_reason_code = c;
                        e.hold_reason_subcode = s;
                        break;
                    }
                    text.push(l);
                }
                e.error = text.join("\n");
                EventKind::RemoteError(e)
            }
            n::JOB_DISCONNECTED => {
                self.prefixed("Job disconnected")?;
                let reason = self.prefixed("    ")?.to_string();
                let who = self.prefixed("    Trying to reconnect to ")?;
                let (name, addr) = who
                    .split_once(' ')
                    .ok_or_else(|| self.err("expected `Trying to reconnect to NAME ADDRESS`"))?;
                EventKind::Disconnected(Disconnected {
                    reason,
                    startd_name: name.to_string(),
                    startd_addr: addr.to_string(),
                })
            }
            n::JOB_RECONNECTED => {
                let startd_name = self.prefixed("Job reconnected to ")?.to_string();
                let startd_addr = self.prefixed("    startd address: ")?.to_string();
                let starter_addr = self.prefixed("    starter address: ")?.to_string();
                EventKind::Reconnected(Reconnected { startd_name, startd_addr, starter_addr })
            }
            n::JOB_RECONNECT_FAILED => {
                self.prefixed("Job reconnection failed")?;
                let reason = self.prefixed("    ")?.to_string();
                let who = self.prefixed("    Can not reconnect to ")?;
                let name = who.split(',').next().unwrap_or("").to_string();
                EventKind::ReconnectFailed(ReconnectFailed { reason, startd_name: name })
            }
            n::JOB_AD_INFORMATION => {
                self.prefixed("Job ad information event triggered.")?;
                let mut ad = ClassAd::new();
                while let Some(l) = self.next() {
                    let (name, rhs) = l.split_once('=').ok_or_else(|| {
                        self.err(format!("expected `Name = value`, found `{}`", clip(l, 80)))
                    })?;
                    let name = name.trim();
                    let expr = classad::parse_expr(&old_to_new_syntax(rhs.trim()))
                        .map_err(|e| self.err(format!("attribute `{name}`: {e}")))?;
                    if name.is_empty() {
                        return Err(self.err("an attribute line without a name"));
                    }
                    ad.insert(name, expr);
                }
                EventKind::JobAdInformation(ad)
            }
            n::ATTRIBUTE_UPDATE => {
                let l = self.expect("the attribute update line")?;
                let words: Vec<&str> = l.split_whitespace().collect();
                let u =
                    match words.as_slice() {
                        ["Changing", "job", "attribute", name, "from", old, "to", value] => {
                            AttributeUpdate {
                                name: name.to_string(),
                                value: value.to_string(),
                                old_value: Some(old.to_string()),
                            }
                        }
                        ["Setting", "job", "attribute", name, "to", value] => AttributeUpdate {
                            name: name.to_string(),
                            value: value.to_string(),
                            old_value: None,
                        },
                        _ => return Err(self.err(format!(
                            "expected `Changing job attribute NAME from OLD to NEW`, found `{}`",
                            clip(l, 80)
                        ))),
                    };
                EventKind::AttributeUpdate(u)
            }
            n::CLUSTER_REMOVE => {
                self.expect("`Cluster removed`")?;
                let (mut next_proc_id, mut next_row, mut completion, mut notes) =
                    (0, 0, Completion::Incomplete, None);
                if let Some(l) = self.next() {
                    let mut p = l.trim_start();
                    if let Some(rest) = p.strip_prefix("Materialized ")
                        && let Some((jobs, rest)) = rest.split_once(" jobs from ")
                        && let Some((items, rest)) = rest.split_once(" items.")
                    {
                        next_proc_id = self.wrap(parse_int(jobs, "a number of jobs"))?;
                        next_row = self.wrap(parse_int(items, "a number of items"))?;
                        p = rest.trim_start();
                    }
                    completion = if p.get(..5).is_some_and(|w| w.eq_ignore_ascii_case("error")) {
                        let code: i32 = p.get(5..).unwrap_or("").trim().parse().unwrap_or(-1);
                        Completion::Error(if code < 0 { code } else { -1 })
                    } else if p.starts_with("Complete") {
                        Completion::Complete
                    } else if p.starts_with("Paused") {
                        Completion::Paused
                    } else {
                        Completion::Incomplete
                    };
                    notes = self.optional_trimmed();
                }
                EventKind::ClusterRemove(ClusterRemove {
                    next_proc_id,
                    next_row,
                    completion,
                    notes,
                })
            }
            number => {
                let lines = self.lines.iter().map(|l| l.1.to_string()).collect();
                EventKind::Other { number, lines }
            }
        };
        Ok(kind)
    }
}

/// `Usr D HH:MM:SS, Sys D HH:MM:SS  -  …` (leading tabs allowed).
fn parse_usage(line: &str) -> Option<CpuUsage> {
    let rest = line.trim_start_matches('\t').strip_prefix("Usr ")?;
    let (usr, rest) = rest.split_once(", Sys ")?;
    let sys = rest.split("  -  ").next()?;
    let secs = |s: &str| -> Option<u64> {
        let (days, hms) = s.trim().split_once(' ')?;
        let mut f = hms.split(':');
        let (h, m, sec) = (f.next()?, f.next()?, f.next()?);
        let n = |x: &str| x.trim().parse::<u64>().ok();
        n(days)?
            .checked_mul(86_400)?
            .checked_add(n(h)?.checked_mul(3600)?)?
            .checked_add(n(m)?.checked_mul(60)?)?
            .checked_add(n(sec)?)
    };
    Some(CpuUsage::from_secs(secs(usr)?, secs(sys)?))
}
