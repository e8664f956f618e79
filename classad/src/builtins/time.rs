//! Time: `time`, `interval`, `splitTime` and `formatTime`, in local time as
//! HTCondor computes it (its `day_numbers`, `mktime`, `struct tm`).

use std::sync::Arc;

use super::FnEnv;
use super::strftime::strftime;
use super::values::{bytes_value, cstr, to_int};
use crate::ast::ClassAd;
use crate::value::Value;

/// `time()`: the evaluation's now.
pub(super) fn time(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    if args.is_empty() { Value::Int(env.now) } else { Value::Error }
}

/// `interval(secs)`: `[days+]hh:mm:ss` with leading zero fields dropped.
pub(super) fn interval(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    let Ok(secs) = to_int(v) else { return Value::Error };
    // HTCondor reads the value into a C int.
    let tot = secs as i32;
    let days = tot / 86400;
    let rem = tot % 86400;
    let (hours, min, sec) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    let s = if days != 0 {
        format!("{days}+{:02}:{:02}:{:02}", hours.abs(), min.abs(), sec.abs())
    } else if hours != 0 {
        format!("{hours}:{:02}:{:02}", min.abs(), sec.abs())
    } else if min != 0 {
        format!("{min}:{:02}", sec.abs())
    } else {
        format!("{sec}")
    };
    Value::string(s)
}

/// The offset of local time from UTC at `t`, in seconds.
pub(super) fn local_offset(t: i64) -> i64 {
    jiff::Timestamp::from_second(t)
        .map_or(0, |ts| i64::from(jiff::tz::TimeZone::system().to_offset(ts).seconds()))
}

/// The local time zone's standard abbreviation, for `%Z` (HTCondor passes
/// no zone in its `struct tm`, so glibc falls back to `tzname[0]`).
fn local_zone_name() -> String {
    if let Ok(tz) = std::env::var("TZ") {
        let tz = tz.trim_start_matches(':');
        let name: String = tz.chars().take_while(char::is_ascii_alphabetic).collect();
        if name.len() >= 3 && !tz.contains('/') {
            return name;
        }
    }
    if local_offset(0) == 0 { "UTC".to_string() } else { String::new() }
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

/// (year, month 1-12, day) to days since 1970-01-01.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// HTCondor's `day_numbers`: weekday (0 = Sunday) and day of the year
/// (0-based) of a date, with its C arithmetic.
pub(super) fn day_numbers(year: i64, month: i64, day: i64) -> (i64, i64) {
    let leap = |y: i64| {
        let (m4, m400) = (y % 4, y % 400);
        m4 == 0 && m400 != 100 && m400 != 200 && m400 != 300
    };
    let fixed = |y: i64, m: i64, d: i64| {
        let adj = if m <= 2 {
            0
        } else if leap(y) {
            -1
        } else {
            -2
        };
        365 * (y - 1) + (y - 1) / 4 - (y - 1) / 100 + (y - 1) / 400 + (367 * m - 362) / 12 + adj + d
    };
    let f = fixed(year, month, day);
    (f % 7, f - fixed(year, 1, 1))
}

/// The broken-down time HTCondor hands to `strftime`.
pub(super) struct Tm {
    pub(super) year: i64,
    pub(super) mon: i64,
    pub(super) mday: i64,
    pub(super) hour: i64,
    pub(super) min: i64,
    pub(super) sec: i64,
    pub(super) wday: i64,
    pub(super) yday: i64,
}

impl Tm {
    /// Components of a time value as HTCondor's `splitTime` computes them:
    /// local time (`None` when out of range).
    fn from_epoch(t: i64) -> Option<(Tm, i64)> {
        let off = local_offset(t);
        let local = t.checked_add(off)?;
        let days = local.div_euclid(86_400);
        let secs = local.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        if i32::try_from(y - 1900).is_err() {
            return None;
        }
        let (wday, yday) = day_numbers(y, m, d);
        let tm = Tm {
            year: y,
            mon: m - 1,
            mday: d,
            hour: secs / 3600,
            min: secs % 3600 / 60,
            sec: secs % 60,
            wday,
            yday,
        };
        Some((tm, off))
    }

    /// What `mktime` would give for these (local) components.
    fn epoch(&self) -> i64 {
        let naive = days_from_civil(self.year, self.mon + 1, self.mday)
            .saturating_mul(86_400)
            .saturating_add(self.hour * 3600 + self.min * 60 + self.sec);
        naive.saturating_sub(local_offset(naive))
    }
}

/// A time argument of `formatTime` / `splitTime` as seconds: integers as
/// they are, reals through a C `int` cast.
fn time_arg(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::Real(r) => Some(if r.is_nan() || *r >= 2_147_483_648.0 || *r <= -2_147_483_649.0 {
            i32::MIN as i64
        } else {
            *r as i64
        }),
        _ => None,
    }
}

/// `splitTime(t)`: an ad with the local-time components of `t`.
pub(super) fn split_time(args: &[Value], _: &mut FnEnv<'_>) -> Value {
    let [v] = args else { return Value::Error };
    if v.is_undefined() {
        return Value::Undefined;
    }
    let Some(t) = time_arg(v) else { return Value::Error };
    let Some((tm, off)) = Tm::from_epoch(t) else { return Value::Error };
    let mut ad = ClassAd::new();
    ad.insert_value("Type", "AbsoluteTime");
    ad.insert_value("Year", Value::Int(tm.year));
    ad.insert_value("Month", Value::Int(tm.mon + 1));
    ad.insert_value("Day", Value::Int(tm.mday));
    ad.insert_value("Hours", Value::Int(tm.hour));
    ad.insert_value("Minutes", Value::Int(tm.min));
    ad.insert_value("Seconds", Value::Int(tm.sec));
    ad.insert_value("Offset", Value::Int(off));
    Value::Ad(Arc::new(ad))
}

/// `formatTime([t [, format]])`: `strftime` of `t` (default now) in local
/// time, format default `%c`. `t` may also be an ad such as `splitTime`
/// makes.
pub(super) fn format_time(args: &[Value], env: &mut FnEnv<'_>) -> Value {
    let (tm, epoch) = match args.first() {
        None => match Tm::from_epoch(env.now) {
            Some((tm, _)) => (tm, env.now),
            None => return Value::Error,
        },
        Some(_) if args.len() > 2 => return Value::Error,
        Some(Value::Ad(ad)) => {
            let now = env.now;
            let mut field =
                |name: &str| match crate::eval::eval_attr_within(ad, name, now, env.budget) {
                    Value::Int(i) => Some(i as i32 as i64),
                    _ => None,
                };
            let year = field("Year").unwrap_or(1900);
            let mon = field("Month").map_or(0, |m| m - 1);
            let mday = field("Day").unwrap_or(0);
            let (wday, yday) = day_numbers(year, mon + 1, mday);
            let tm = Tm {
                year,
                mon,
                mday,
                hour: field("Hours").unwrap_or(0),
                min: field("Minutes").unwrap_or(0),
                sec: field("Seconds").unwrap_or(0),
                wday,
                yday,
            };
            let e = tm.epoch();
            (tm, e)
        }
        Some(v) => match time_arg(v).and_then(Tm::from_epoch) {
            Some((tm, _)) => {
                let e = tm.epoch();
                (tm, e)
            }
            None => return Value::Error,
        },
    };
    let fmt: &[u8] = match args.get(1) {
        None => b"%c",
        Some(Value::Str(f)) => cstr(f),
        Some(_) => return Value::Error,
    };
    let zone = local_zone_name();
    let mut out = Vec::new();
    if !strftime(fmt, &tm, epoch, &zone, &mut out) {
        out.clear();
    }
    bytes_value(&out)
}
