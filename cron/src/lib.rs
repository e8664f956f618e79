//! HTCondor's CronTab schedules, as its manual defines them.
//!
//! A schedule has five fields: minute (0–59), hour (0–23), day of month
//! (1–31), month (1–12) and day of week (0–7, where both 0 and 7 are Sunday).
//! A field is `*`, a value `N`, a range `A-B` (inclusive, `A < B`), a step
//! `*/S` or `A-B/S` (A, A+S, A+2S, … up to B; `*` starts at the field's
//! minimum), or a comma-separated list of these. Whitespace is ignored. An
//! unspecified field is `*`. When both day fields are restricted (their text
//! is not exactly `*`), a day matches when either does; otherwise both must.
//!
//! This follows the manual where HTCondor's own C++ code does not: steps count
//! from the range's start, not in absolute multiples; out-of-range values and
//! malformed items are errors, never silently `*`; a schedule that can never
//! fire (February 30) is an error found before any search; and a
//! day-of-week schedule crossing a month end finds the right day.
//!
//! [`Schedule::next_after`] gives the first run at or after the minute that
//! follows `now` (HTCondor's rounding: now rounded up to the next minute),
//! in a time zone. Where the zone's clocks change:
//!
//! - a local time skipped by a spring-forward transition runs at the instant
//!   it maps to with the offset in force before the gap (02:30 becomes 03:30
//!   new time), as RFC 5545 resolves such times, so a daily 02:30 job still
//!   runs that day, once;
//! - a local time that occurs twice (fall back) runs once, at its first
//!   occurrence, unless the hour field starts with `*` (an hourly or more
//!   frequent rhythm), which keeps its rhythm through both passes.
//!
//! The search never loops: an impossible schedule is refused by
//! [`Schedule::parse`], and a possible one fires within eight years (February
//! 29 across a century that is not a leap year), so the search is bounded.
#![forbid(unsafe_code)]

use std::fmt;

use classad::{ClassAd, Value};
use jiff::tz::{AmbiguousOffset, TimeZone};

/// One of the five fields of a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// Minute, 0–59.
    Minute,
    /// Hour, 0–23.
    Hour,
    /// Day of month, 1–31.
    DayOfMonth,
    /// Month, 1–12.
    Month,
    /// Day of week, 0–7 (0 and 7 are Sunday).
    DayOfWeek,
}

impl Field {
    /// The five fields in order.
    pub const ALL: [Field; 5] =
        [Field::Minute, Field::Hour, Field::DayOfMonth, Field::Month, Field::DayOfWeek];

    /// The five fields' job attributes in order ([`Field::attribute`]).
    pub const ALL_ATTRIBUTES: [&'static str; 5] = {
        let mut all = [""; 5];
        let mut i = 0;
        while i < Field::ALL.len() {
            all[i] = Field::ALL[i].attribute();
            i += 1;
        }
        all
    };

    /// The job attribute: `CronMinute`, …, `CronDayOfWeek`.
    pub const fn attribute(self) -> &'static str {
        match self {
            Field::Minute => "CronMinute",
            Field::Hour => "CronHour",
            Field::DayOfMonth => "CronDayOfMonth",
            Field::Month => "CronMonth",
            Field::DayOfWeek => "CronDayOfWeek",
        }
    }

    /// The submit command: `cron_minute`, …, `cron_day_of_week`.
    pub fn submit_command(self) -> &'static str {
        match self {
            Field::Minute => "cron_minute",
            Field::Hour => "cron_hour",
            Field::DayOfMonth => "cron_day_of_month",
            Field::Month => "cron_month",
            Field::DayOfWeek => "cron_day_of_week",
        }
    }

    /// The short name: `minute`, `hour`, `day_of_month`, `month`, `day_of_week`.
    pub fn key(self) -> &'static str {
        &self.submit_command()[5..]
    }

    /// The field named by its short name, submit command or attribute
    /// (case-insensitive).
    pub fn from_name(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| {
            name.eq_ignore_ascii_case(f.key())
                || name.eq_ignore_ascii_case(f.submit_command())
                || name.eq_ignore_ascii_case(f.attribute())
        })
    }

    /// The allowed values, inclusive.
    pub fn range(self) -> (u32, u32) {
        match self {
            Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (0, 7),
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.attribute())
    }
}

/// Why a schedule was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CronError {
    /// A field's text is malformed or out of range.
    Invalid {
        /// The field.
        field: Field,
        /// Its text as given.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// The fields are valid but no date ever satisfies them.
    Never {
        /// Why (for example February 30).
        reason: String,
    },
}

impl CronError {
    /// The message with the field named by its submit command
    /// (`cron_minute`) rather than its attribute.
    pub fn for_submit(&self) -> String {
        match self {
            CronError::Invalid { field, value, reason } => {
                let (lo, hi) = field.range();
                format!(
                    "{} = {value}: {reason} (allowed: {lo}-{hi}, `*`, lists, ranges A-B, steps */S or A-B/S)",
                    field.submit_command()
                )
            }
            CronError::Never { .. } => self.to_string(),
        }
    }
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CronError::Invalid { field, value, reason } => {
                let (lo, hi) = field.range();
                write!(f, "{field} \"{value}\": {reason} (allowed values {lo}-{hi})")
            }
            CronError::Never { reason } => write!(f, "the cron schedule can never run: {reason}"),
        }
    }
}

impl std::error::Error for CronError {}

/// A parsed CronTab schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    dom_restricted: bool,
    dow_restricted: bool,
    hour_periodic: bool,
    text: [String; 5],
}

struct ParsedField {
    bits: u64,
    restricted: bool,
    starts_with_star: bool,
    text: String,
}

fn number(field: Field, value: &str, s: &str) -> Result<u32, CronError> {
    let bad = |reason: String| CronError::Invalid { field, value: value.to_string(), reason };
    if s.is_empty() {
        return Err(bad("a number is missing".into()));
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(format!("`{s}` is not a number")));
    }
    let n: u32 = s.parse().map_err(|_| bad(format!("{s} is out of range")))?;
    let (lo, hi) = field.range();
    if n < lo || n > hi {
        return Err(bad(format!("{n} is outside {lo}-{hi}")));
    }
    Ok(n)
}

fn parse_field(field: Field, value: &str) -> Result<ParsedField, CronError> {
    let bad = |reason: &str| CronError::Invalid {
        field,
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let text: String = value.chars().filter(|c| !c.is_whitespace()).collect();
    if text.is_empty() {
        return Err(bad("the field is empty"));
    }
    let (lo, hi) = field.range();
    let mut bits = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err(bad("an item of the list is empty"));
        }
        let (base, step) = match item.split_once('/') {
            None => (item, None),
            Some((b, s)) => {
                if s.contains('/') {
                    return Err(bad("more than one `/` in an item"));
                }
                if !s.bytes().all(|b| b.is_ascii_digit()) || s.is_empty() {
                    return Err(bad(&format!("step `{s}` is not a number")));
                }
                let n: u32 = s.parse().map_err(|_| bad(&format!("step {s} is too large")))?;
                if n == 0 {
                    return Err(bad("a step must be at least 1"));
                }
                (b, Some(n))
            }
        };
        let (a, b) = if base == "*" {
            (lo, hi)
        } else if let Some((a, b)) = base.split_once('-') {
            let a = number(field, value, a)?;
            let b = number(field, value, b)?;
            if a >= b {
                return Err(bad(&format!(
                    "in the range {a}-{b} the left end must be less than the right"
                )));
            }
            (a, b)
        } else {
            if step.is_some() {
                return Err(bad("a step needs `*` or a range before it"));
            }
            let n = number(field, value, base)?;
            (n, n)
        };
        // A step may be as large as `u32::MAX`: stepping past `b` ends the
        // item (adding the step to `v` could overflow).
        let step = usize::try_from(step.unwrap_or(1)).unwrap_or(usize::MAX);
        for v in (a..=b).step_by(step) {
            bits |= 1 << v;
        }
    }
    if field == Field::DayOfWeek && bits & (1 << 7) != 0 {
        bits = (bits & !(1 << 7)) | 1;
    }
    Ok(ParsedField { bits, restricted: text != "*", starts_with_star: text.starts_with('*'), text })
}

/// The days of `month` in a leap year (the most it ever has).
fn max_days(month: u32) -> u32 {
    match month {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

#[cfg(test)]
fn days_in(y: i64, m: u32) -> u32 {
    if m == 2 && !is_leap(y) { 28 } else { max_days(m) }
}

#[cfg(test)]
/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day number.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// How many days the search looks ahead before it gives up (a possible
/// schedule always fires well within it).
const SEARCH_DAYS: i64 = 366 * 40;

impl Schedule {
    /// Parses the five fields (`None`: `*`), in [`Field::ALL`]'s order.
    pub fn parse(fields: [Option<&str>; 5]) -> Result<Schedule, CronError> {
        let mut parsed = Vec::with_capacity(5);
        for (f, v) in Field::ALL.into_iter().zip(fields) {
            parsed.push(parse_field(f, v.unwrap_or("*"))?);
        }
        let [mi, h, dom, mo, dow]: [ParsedField; 5] = match parsed.try_into() {
            Ok(a) => a,
            Err(_) => unreachable!("five fields parsed"),
        };
        let s = Schedule {
            minutes: mi.bits,
            hours: h.bits as u32,
            days: dom.bits as u32,
            months: mo.bits as u16,
            weekdays: dow.bits as u8,
            dom_restricted: dom.restricted,
            dow_restricted: dow.restricted,
            hour_periodic: h.starts_with_star,
            text: [mi.text, h.text, dom.text, mo.text, dow.text],
        };
        s.check_possible()?;
        Ok(s)
    }

    /// Parses fields given by name (`minute`, `cron_minute` or `CronMinute`);
    /// fields not given are `*`.
    pub fn from_named<'a>(
        fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Schedule, String> {
        let mut v: [Option<&str>; 5] = [None; 5];
        for (name, text) in fields {
            let f = Field::from_name(name).ok_or_else(|| format!("unknown cron field `{name}`"))?;
            v[f as usize] = Some(text);
        }
        Schedule::parse(v).map_err(|e| e.to_string())
    }

    /// The schedule of a job ad, if it has any `Cron*` attribute. A value may
    /// be a string or an integer.
    pub fn from_ad(ad: &ClassAd) -> Option<Result<Schedule, CronError>> {
        if !Field::ALL.iter().any(|f| ad.contains(f.attribute())) {
            return None;
        }
        let mut texts: [Option<String>; 5] = Default::default();
        for f in Field::ALL {
            if !ad.contains(f.attribute()) {
                continue;
            }
            texts[f as usize] = Some(match ad.eval_attr(f.attribute()) {
                Value::Str(s) => s.to_string(),
                Value::Int(i) => i.to_string(),
                other => {
                    return Some(Err(CronError::Invalid {
                        field: f,
                        value: other.to_string(),
                        reason: "not a string".into(),
                    }));
                }
            });
        }
        let refs: [Option<&str>; 5] = std::array::from_fn(|i| texts[i].as_deref());
        Some(Schedule::parse(refs))
    }

    /// The fields as normalised text (whitespace removed), in [`Field::ALL`]'s order.
    pub fn fields(&self) -> [&str; 5] {
        std::array::from_fn(|i| self.text[i].as_str())
    }

    fn check_possible(&self) -> Result<(), CronError> {
        // A restricted day of week always finds its day: alone, every month
        // has every weekday; with a restricted day of month, either matches.
        if self.dow_restricted {
            return Ok(());
        }
        for m in 1..=12u32 {
            if self.months & (1 << m) == 0 {
                continue;
            }
            if (1..=max_days(m)).any(|d| self.days & (1 << d) != 0) {
                return Ok(());
            }
        }
        let months: Vec<String> =
            (1..=12).filter(|m| self.months & (1 << m) != 0).map(|m| m.to_string()).collect();
        Err(CronError::Never {
            reason: format!(
                "day of month {} never occurs in month {}",
                self.text[2],
                months.join(",")
            ),
        })
    }

    fn day_matches(&self, m: u32, d: u32, weekday: u32) -> bool {
        if self.months & (1 << m) == 0 {
            return false;
        }
        let dom = self.days & (1 << d) != 0;
        let dow = self.weekdays & (1 << weekday) != 0;
        if self.dom_restricted && self.dow_restricted { dom || dow } else { dom && dow }
    }

    /// The first run at or after the minute following `now` (Unix seconds),
    /// in `tz`; `None` only past the representable range.
    pub fn next_after(&self, now: i64, tz: &TimeZone) -> Option<i64> {
        let start = now.div_euclid(60).checked_add(1)?.checked_mul(60)?;
        let offset = jiff::Timestamp::from_second(start).ok().map(|t| tz.to_offset(t))?;
        let local_day = (start + offset.seconds() as i64).div_euclid(86_400);
        let mut best: Option<i64> = None;
        let mut found_day = None;
        for day in local_day - 1..local_day + SEARCH_DAYS {
            if let Some(f) = found_day
                && day > f + 1
            {
                break;
            }
            let (y, m, d) = civil_from_days(day);
            let weekday = (day + 4).rem_euclid(7) as u32; // 1970-01-01 was a Thursday
            if !self.day_matches(m, d, weekday) {
                continue;
            }
            if let Some(t) = self.first_in_day(y, m, d, day, start, tz) {
                best = Some(best.map_or(t, |b| b.min(t)));
                found_day.get_or_insert(day);
            }
        }
        // A run in the last hours of 9999 is past the range a time zone can
        // read (it could not be the start of the next search): none.
        best.filter(|&t| jiff::Timestamp::from_second(t).is_ok())
    }

    /// The earliest run of one local day at or after `start`.
    fn first_in_day(
        &self,
        y: i64,
        m: u32,
        d: u32,
        day: i64,
        start: i64,
        tz: &TimeZone,
    ) -> Option<i64> {
        let civil = |h: u32, mi: u32| -> Option<jiff::civil::DateTime> {
            let y = i16::try_from(y).ok()?;
            jiff::civil::DateTime::new(y, m as i8, d as i8, h as i8, mi as i8, 0, 0).ok()
        };
        let resolve = |h, mi| civil(h, mi).map(|dt| tz.to_ambiguous_timestamp(dt).offset());
        let midnight = day * 86_400;
        // A day with one offset throughout: runs are in order, take the first.
        if let (
            Some(AmbiguousOffset::Unambiguous { offset: a }),
            Some(AmbiguousOffset::Unambiguous { offset: b }),
        ) = (resolve(0, 0), resolve(23, 59))
            && a == b
        {
            let base = midnight - a.seconds() as i64;
            for h in (0..24).filter(|h| self.hours & (1 << h) != 0) {
                let hs = base + h as i64 * 3600;
                if hs + 3599 < start {
                    continue;
                }
                for mi in (0..60).filter(|mi| self.minutes & (1 << mi) != 0) {
                    let t = hs + mi as i64 * 60;
                    if t >= start {
                        return Some(t);
                    }
                }
            }
            return None;
        }
        // A day with a transition: resolve each local time.
        let mut best: Option<i64> = None;
        let mut consider = |t: i64| {
            if t >= start {
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        };
        for h in (0..24).filter(|h| self.hours & (1 << h) != 0) {
            for mi in (0..60).filter(|mi| self.minutes & (1 << mi) != 0) {
                let local = midnight + h as i64 * 3600 + mi as i64 * 60;
                match resolve(h, mi) {
                    Some(AmbiguousOffset::Unambiguous { offset }) => {
                        consider(local - offset.seconds() as i64)
                    }
                    Some(AmbiguousOffset::Gap { before, .. }) => {
                        consider(local - before.seconds() as i64)
                    }
                    Some(AmbiguousOffset::Fold { before, after }) => {
                        consider(local - before.seconds() as i64);
                        if self.hour_periodic {
                            consider(local - after.seconds() as i64);
                        }
                    }
                    None => {}
                }
            }
        }
        best
    }

    /// How many runs fall in `(after, until]`, counting at most `cap`.
    pub fn runs_between(&self, after: i64, until: i64, tz: &TimeZone, cap: u64) -> u64 {
        let mut n = 0;
        let mut t = after;
        while n < cap {
            match self.next_after(t, tz) {
                Some(next) if next <= until => {
                    n += 1;
                    t = next;
                }
                _ => break,
            }
        }
        n
    }
}

/// A time zone by name: an IANA name (`Europe/Paris`), `UTC`, a POSIX TZ
/// string (`EST5EDT,M3.2.0,M11.1.0`), or empty for the system's own zone.
pub fn time_zone(name: &str) -> Result<TimeZone, String> {
    let name = name.trim();
    if name.is_empty() {
        return Ok(TimeZone::system());
    }
    if name.eq_ignore_ascii_case("utc") {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name)
        .or_else(|e| TimeZone::posix(name).map_err(|_| format!("unknown time zone `{name}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days_round_trip() {
        for z in [-800_000, -1, 0, 1, 59, 60, 10_956, 47_482, 2_932_896] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
            assert!(d <= days_in(y, m));
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn a_step_past_the_largest_number_is_one_value_not_an_overflow() {
        // Found by fuzzing: adding the step to the last value overflowed.
        let s = Schedule::parse([Some("1-59/4294967295"), None, None, None, None]).unwrap();
        assert_eq!(s.minutes, 1 << 1);
        let s = Schedule::parse([Some("*/4294967295"), Some("3-23/4294967290"), None, None, None])
            .unwrap();
        assert_eq!((s.minutes, s.hours), (1, 1 << 3));
        let e = Schedule::parse([Some("1-59/4294967296"), None, None, None, None]).unwrap_err();
        assert!(e.to_string().contains("step 4294967296 is too large"), "{e}");
    }

    #[test]
    fn no_run_past_the_last_instant_a_time_zone_reads() {
        // Found by fuzzing: minute 5 after 9999-12-30 21:56:33 UTC gave
        // 22:05, past jiff's last instant (22:00), and the search from that
        // run then had no answer.
        let s = Schedule::parse([Some("5"), None, None, None, None]).unwrap();
        let max = jiff::Timestamp::MAX.as_second();
        assert_eq!(s.next_after(max - 207, &TimeZone::UTC), None);
        assert_eq!(s.next_after(max - 3600, &TimeZone::UTC), Some(max - 3300));
    }
}
