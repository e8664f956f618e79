//! Parses arbitrary CronTab fields, each alone and as a whole schedule (also
//! through `from_named` and a job ad), then searches for the next runs in
//! several time zones from a fuzzed start time. Nothing may panic or hang:
//! every field is a schedule or a clear error naming the field, and every
//! search answers.
//!
//! Input: a zone byte (low 4 bits: which zone; bit 4: an empty line is an
//! empty field rather than an unspecified one; bit 5: the start time is the
//! raw `i64`, not folded into the time-zone database's range), an `i64 LE`
//! start time (Unix seconds), then the fields as text, one a line, in the
//! order minute, hour, day of month, month, day of week; lines past the fifth
//! are ignored and missing ones are unspecified (`*`).
//!
//! For a schedule that parses: its normalised text parses to an equal
//! schedule; a run is on a minute, after the start, within eight years
//! (`None` only past the representable range), and is itself the next run of
//! the minute before it. In UTC and fixed-offset zones each run is checked
//! against an independent reading of the fields (the manual's rules, applied
//! to the normalised text), and nothing earlier matches.

use std::sync::OnceLock;

use andes_cron::{CronError, Field, Schedule};
use classad::{ClassAd, Expr, Value};
use jiff::tz::{Offset, TimeZone};

/// A zone, and its fixed offset in seconds when it has one.
struct Zone {
    tz: TimeZone,
    fixed: Option<i64>,
}

fn zones() -> &'static [Zone] {
    static ZONES: OnceLock<Vec<Zone>> = OnceLock::new();
    ZONES.get_or_init(|| {
        let fixed = |secs: i32| Zone {
            tz: TimeZone::fixed(Offset::from_seconds(secs).unwrap()),
            fixed: Some(secs.into()),
        };
        let posix = |rule: &str| Zone { tz: TimeZone::posix(rule).unwrap(), fixed: None };
        let mut z = vec![
            Zone { tz: TimeZone::UTC, fixed: Some(0) },
            fixed(5 * 3600 + 45 * 60),
            fixed(-(9 * 3600 + 30 * 60)),
            fixed(14 * 3600),
            // New York; Sydney (southern, the change at 03:00); Lord Howe
            // (a 30-minute change); a change at midnight (`/0`).
            posix("EST5EDT,M3.2.0,M11.1.0"),
            posix("AEST-10AEDT,M10.1.0,M4.1.0/3"),
            posix("<+1030>-10:30<+11>-11,M10.1.0,M4.1.0"),
            posix("<-03>3<-02>,M3.5.0/0,M10.5.0/0"),
        ];
        // Zones with history, where the database is installed: Apia skipped
        // 2011-12-30; Kathmandu changed by 15 minutes; St John's by 2 hours once.
        for name in ["Pacific/Apia", "Asia/Kathmandu", "America/St_Johns", "Europe/London"] {
            if let Ok(tz) = TimeZone::get(name) {
                z.push(Zone { tz, fixed: None });
            }
        }
        z
    })
}

const MINUTE: i64 = 60;
const DAY: i64 = 86_400;
/// A possible schedule fires within eight years (February 29 across 2100).
const EIGHT_YEARS: i64 = (8 * 366 + 2) * DAY;

/// The values a normalised field selects, read straight from the manual.
fn values(field: Field, text: &str) -> u64 {
    let (lo, hi) = field.range();
    let mut bits = 0u64;
    for item in text.split(',') {
        let (base, step) = match item.split_once('/') {
            Some((b, s)) => (b, s.parse::<u64>().unwrap()),
            None => (item, 1),
        };
        let (a, b) = match base.split_once('-') {
            _ if base == "*" => (lo, hi),
            Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
            None => (base.parse().unwrap(), base.parse().unwrap()),
        };
        let mut v = u64::from(a);
        while v <= u64::from(b) {
            bits |= 1 << v;
            v += step;
        }
    }
    if field == Field::DayOfWeek && bits & (1 << 7) != 0 {
        bits |= 1;
    }
    bits
}

/// The schedule as sets of values, for the reference checks.
struct Reference {
    sets: [u64; 5],
    dom_restricted: bool,
    dow_restricted: bool,
}

impl Reference {
    fn new(s: &Schedule) -> Reference {
        let f = s.fields();
        Reference {
            sets: std::array::from_fn(|i| values(Field::ALL[i], f[i])),
            dom_restricted: f[2] != "*",
            dow_restricted: f[4] != "*",
        }
    }

    /// Whether the local day `day` (days since 1970-01-01) matches.
    fn day(&self, day: i64) -> bool {
        let date = jiff::civil::Date::constant(1970, 1, 1).checked_add(jiff::Span::new().days(day));
        let Ok(date) = date else { return false };
        let (m, d) = (date.month() as u32, date.day() as u32);
        let wd = date.weekday().to_sunday_zero_offset() as u32;
        if self.sets[3] & (1 << m) == 0 {
            return false;
        }
        let dom = self.sets[2] & (1 << d) != 0;
        let dow = self.sets[4] & (1 << wd) != 0;
        if self.dom_restricted && self.dow_restricted { dom || dow } else { dom && dow }
    }

    /// Whether local time `local` (seconds, a minute) matches.
    fn minute(&self, local: i64) -> bool {
        let in_day = local.rem_euclid(DAY);
        self.sets[0] & (1 << (in_day % 3600 / 60)) != 0
            && self.sets[1] & (1 << (in_day / 3600)) != 0
            && self.day(local.div_euclid(DAY))
    }
}

/// Checks `next` from `start` in a zone of fixed offset `off`: it matches and
/// no earlier minute does.
fn check_fixed(r: &Reference, start: i64, next: i64, off: i64) {
    let first = (start.div_euclid(MINUTE) + 1) * MINUTE;
    assert!(r.minute(next + off), "{next} does not match the schedule (offset {off})");
    if (next - first) / MINUTE <= 3000 {
        let mut t = first;
        while t < next {
            assert!(!r.minute(t + off), "{t} matches, before the answer {next} (offset {off})");
            t += MINUTE;
        }
    } else {
        // Whole days strictly between the two: none may match (every
        // matching day has a matching minute).
        let (d0, d1) = ((first + off).div_euclid(DAY), (next + off).div_euclid(DAY));
        for d in d0 + 1..d1 {
            assert!(!r.day(d), "day {d} matches, before the answer {next} (offset {off})");
        }
        let mut t = first;
        while (t + off).div_euclid(DAY) == d0 && t < next {
            assert!(!r.minute(t + off), "{t} matches, before the answer {next} (offset {off})");
            t += MINUTE;
        }
        let mut t = (d1 * DAY - off).max(first);
        while t < next {
            assert!(!r.minute(t + off), "{t} matches, before the answer {next} (offset {off})");
            t += MINUTE;
        }
    }
}

fn check_error(e: &CronError) {
    let (text, submit) = (e.to_string(), e.for_submit());
    assert!(!text.is_empty() && !submit.is_empty());
    if let CronError::Invalid { field, .. } = e {
        assert!(text.contains(field.attribute()), "{text}");
        assert!(submit.contains(field.submit_command()), "{submit}");
    }
}

/// Runs one input through the target's checks; panics on a failure.
pub fn run(data: &[u8]) {
    if data.len() < 9 {
        return;
    }
    let flags = data[0];
    let raw = i64::from_le_bytes(data[1..9].try_into().unwrap());
    let Ok(text) = std::str::from_utf8(&data[9..]) else { return };
    let empty_is_field = flags & 0x10 != 0;
    let mut fields: [Option<&str>; 5] = [None; 5];
    for (slot, line) in fields.iter_mut().zip(text.split('\n')) {
        if !line.is_empty() || empty_is_field {
            *slot = Some(line);
        }
    }

    // Each field alone, in each place.
    for text in fields.iter().flatten() {
        for (i, f) in Field::ALL.into_iter().enumerate() {
            let mut one = [None; 5];
            one[i] = Some(*text);
            if let Err(e) = Schedule::parse(one) {
                check_error(&e);
                if let CronError::Invalid { field, .. } = e {
                    assert_eq!(field, f);
                }
            }
        }
    }

    // The whole schedule, three ways.
    let parsed = Schedule::parse(fields);
    let named = Schedule::from_named(
        Field::ALL.into_iter().zip(fields).filter_map(|(f, v)| Some((f.attribute(), v?))),
    );
    assert_eq!(parsed.clone().map_err(|e| e.to_string()), named);
    let mut ad = ClassAd::new();
    for (f, v) in Field::ALL.into_iter().zip(fields) {
        if let Some(v) = v {
            ad.insert(f.attribute(), Expr::Lit(Value::string(v)));
        }
    }
    match Schedule::from_ad(&ad) {
        None => assert!(fields.iter().all(Option::is_none)),
        Some(r) => assert_eq!(r, parsed),
    }
    let s = match parsed {
        Ok(s) => s,
        Err(e) => return check_error(&e),
    };
    let norm = s.fields();
    assert_eq!(Schedule::parse(norm.map(Some)).as_ref(), Ok(&s), "normalised {norm:?}");

    // Next runs, in one zone.
    let (min, max) = (jiff::Timestamp::MIN.as_second(), jiff::Timestamp::MAX.as_second());
    let start = if flags & 0x20 != 0 { raw } else { min + raw.rem_euclid(max - min) };
    let zones = zones();
    let zone = &zones[usize::from(flags & 0x0f) % zones.len()];
    let first = start.div_euclid(MINUTE).saturating_add(1).saturating_mul(MINUTE);
    let next = s.next_after(start, &zone.tz);
    match next {
        None => assert!(
            start < min + 2 * DAY || start > max - EIGHT_YEARS,
            "no run found after {start}"
        ),
        Some(t) => {
            // On a minute of local time: with the offset in force at `t`, or
            // (a time pushed past a gap) the one before. Local mean time
            // before 1900 has offsets with seconds (Kathmandu's +05:41:16).
            let on_minute = |at: i64| {
                let off = jiff::Timestamp::from_second(at)
                    .map_or(0, |ts| zone.tz.to_offset(ts).seconds());
                (t + i64::from(off)).rem_euclid(MINUTE) == 0
            };
            assert!(on_minute(t) || on_minute(t - DAY), "{t} is not on a local minute");
            assert!(t >= first, "{t} is before the start {start}");
            assert!(t - first <= EIGHT_YEARS, "{t} is more than eight years after {start}");
            assert_eq!(s.next_after(t - MINUTE, &zone.tz), Some(t), "rerun from before {t}");
            if let Some(after) = s.next_after(t, &zone.tz) {
                assert!(after > t);
            }
            if let Some(off) = zone.fixed {
                check_fixed(&Reference::new(&s), start, t, off);
            }
        }
    }
    let n = s.runs_between(start, start.saturating_add(2 * DAY), &zone.tz, 50);
    assert!(n <= 50);
}
