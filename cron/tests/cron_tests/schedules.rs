//! The manual's CronTab examples, one test each, and the behaviour around
//! daylight-saving transitions.

use andes_cron::{CronError, Field, Schedule};
use jiff::tz::TimeZone;

fn sched(fields: &[(&str, &str)]) -> Schedule {
    Schedule::from_named(fields.iter().copied()).expect("valid schedule")
}

fn at(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>().expect("timestamp").as_second()
}

fn show(t: i64, tz: &TimeZone) -> String {
    jiff::Timestamp::from_second(t)
        .unwrap()
        .to_zoned(tz.clone())
        .strftime("%Y-%m-%d %H:%M %a %Z")
        .to_string()
}

/// The next `n` runs after `from`, as local text.
fn runs(s: &Schedule, from: &str, n: usize, tz: &TimeZone) -> Vec<String> {
    let mut t = at(from);
    let mut out = Vec::new();
    for _ in 0..n {
        t = s.next_after(t, tz).expect("fires");
        out.push(show(t, tz));
    }
    out
}

fn utc_runs(s: &Schedule, from: &str, n: usize) -> Vec<String> {
    runs(s, from, n, &TimeZone::UTC)
}

#[test]
fn example_run_23_minutes_after_every_two_hours() {
    let s = sched(&[
        ("minute", "23"),
        ("hour", "0-23/2"),
        ("day_of_month", "*"),
        ("month", "*"),
        ("day_of_week", "*"),
    ]);
    assert_eq!(
        utc_runs(&s, "2026-03-01T21:00:00Z", 3),
        ["2026-03-01 22:23 Sun UTC", "2026-03-02 00:23 Mon UTC", "2026-03-02 02:23 Mon UTC"]
    );
}

#[test]
fn example_may_10th_to_20th_or_the_given_weekday() {
    // The manual's text says 10:30 pm and Mondays, but its fields say hour 20
    // and day of week 2: the fields are what runs (20:30, May 10-20 or Tuesdays).
    let s = sched(&[
        ("minute", "30"),
        ("hour", "20"),
        ("day_of_month", "10-20"),
        ("month", "5"),
        ("day_of_week", "2"),
    ]);
    let r = utc_runs(&s, "2026-04-30T00:00:00Z", 14);
    assert_eq!(r[0], "2026-05-05 20:30 Tue UTC"); // a Tuesday before the 10th
    assert_eq!(r[1], "2026-05-10 20:30 Sun UTC");
    assert_eq!(r[11], "2026-05-20 20:30 Wed UTC");
    assert_eq!(r[12], "2026-05-26 20:30 Tue UTC"); // Tuesdays after the 20th
    assert_eq!(r[13], "2027-05-04 20:30 Tue UTC");
}

#[test]
fn example_every_ten_and_every_six_minutes_before_noon_on_january_18th() {
    let s = sched(&[
        ("minute", "*/10,*/6"),
        ("hour", "0-11"),
        ("day_of_month", "18"),
        ("month", "1"),
        ("day_of_week", "*"),
    ]);
    let r = utc_runs(&s, "2027-01-17T23:59:00Z", 6);
    assert_eq!(
        r,
        [
            "2027-01-18 00:00 Mon UTC",
            "2027-01-18 00:06 Mon UTC",
            "2027-01-18 00:10 Mon UTC",
            "2027-01-18 00:12 Mon UTC",
            "2027-01-18 00:18 Mon UTC",
            "2027-01-18 00:20 Mon UTC"
        ]
    );
    assert_eq!(utc_runs(&s, "2027-01-18T11:54:00Z", 1), ["2028-01-18 00:00 Tue UTC"]);
}

#[test]
fn operator_all_values_month() {
    let s = sched(&[("minute", "0"), ("hour", "0"), ("day_of_month", "1"), ("month", "*")]);
    let r = utc_runs(&s, "2026-01-01T00:00:00Z", 12);
    assert_eq!(r[0], "2026-02-01 00:00 Sun UTC");
    assert_eq!(r[11], "2027-01-01 00:00 Fri UTC");
}

#[test]
fn operator_range_hours_midnight_to_four() {
    let s = sched(&[("minute", "0"), ("hour", "0-4")]);
    let r = utc_runs(&s, "2026-01-01T23:30:00Z", 6);
    assert_eq!(r[0], "2026-01-02 00:00 Fri UTC");
    assert_eq!(r[4], "2026-01-02 04:00 Fri UTC");
    assert_eq!(r[5], "2026-01-03 00:00 Sat UTC");
}

#[test]
fn operator_lists() {
    let s = sched(&[("minute", "15,20,25,30"), ("hour", "0-3,9-12,15")]);
    let hours: Vec<String> =
        utc_runs(&s, "2026-01-01T00:00:00Z", 36).iter().map(|r| r[11..16].to_string()).collect();
    assert_eq!(&hours[..5], ["00:15", "00:20", "00:25", "00:30", "01:15"]);
    let distinct: std::collections::BTreeSet<&str> = hours.iter().map(|h| &h[..2]).collect();
    assert_eq!(
        distinct.into_iter().collect::<Vec<_>>(),
        ["00", "01", "02", "03", "09", "10", "11", "12", "15"]
    );
}

#[test]
fn operator_steps() {
    let s = sched(&[("minute", "10-30/5"), ("hour", "*/3")]);
    let r = utc_runs(&s, "2026-01-01T00:00:00Z", 6);
    assert_eq!(
        r.iter().map(|r| &r[11..16]).collect::<Vec<_>>(),
        ["00:10", "00:15", "00:20", "00:25", "00:30", "03:10"]
    );
}

#[test]
fn preparation_time_example_top_of_every_hour() {
    // Submitted at 09:30: the next run is 10:00 (the job may be sent at 09:55).
    let s = sched(&[("minute", "0"), ("hour", "*")]);
    assert_eq!(utc_runs(&s, "2026-06-01T09:30:00Z", 1), ["2026-06-01 10:00 Mon UTC"]);
}

#[test]
fn current_time_is_rounded_up_to_the_next_minute() {
    let s = sched(&[]);
    assert_eq!(utc_runs(&s, "2026-06-01T09:30:00Z", 1), ["2026-06-01 09:31 Mon UTC"]);
    assert_eq!(utc_runs(&s, "2026-06-01T09:30:59Z", 1), ["2026-06-01 09:31 Mon UTC"]);
}

#[test]
fn sunday_is_zero_and_seven() {
    let a = sched(&[("minute", "0"), ("hour", "9"), ("day_of_week", "0")]);
    let b = sched(&[("minute", "0"), ("hour", "9"), ("day_of_week", "7")]);
    assert_eq!(utc_runs(&a, "2026-11-22T10:00:00Z", 2), utc_runs(&b, "2026-11-22T10:00:00Z", 2));
    assert_eq!(utc_runs(&a, "2026-11-22T10:00:00Z", 1), ["2026-11-29 09:00 Sun UTC"]);
}

#[test]
fn day_of_week_crossing_a_month_end_finds_the_right_day() {
    // HTCondor's C++ returns Sunday 03-31 here; the manual gives Monday 04-01.
    let s = sched(&[("minute", "0"), ("hour", "0"), ("day_of_week", "1")]);
    assert_eq!(utc_runs(&s, "2024-03-30T12:00:00Z", 1), ["2024-04-01 00:00 Mon UTC"]);
}

#[test]
fn invalid_fields_name_the_field_value_and_range() {
    for (field, value, needle) in [
        ("minute", "60", "60 is outside 0-59"),
        ("hour", "24", "24 is outside 0-23"),
        ("day_of_month", "0", "0 is outside 1-31"),
        ("month", "13", "13 is outside 1-12"),
        ("day_of_week", "8", "8 is outside 0-7"),
        ("minute", "5-3", "left end must be less"),
        ("minute", "5-5", "left end must be less"),
        ("minute", "1/2", "a step needs"),
        ("minute", "*/0", "at least 1"),
        ("minute", "1,,2", "empty"),
        ("month", "jan", "not a number"),
        ("minute", "", "empty"),
    ] {
        let e = Schedule::from_named([(field, value)]).expect_err(value);
        assert!(e.contains(needle), "{field}={value}: {e}");
        assert!(e.contains(Field::from_name(field).unwrap().attribute()), "{e}");
    }
    let e = Schedule::parse([Some("61"), None, None, None, None]).unwrap_err();
    assert!(
        e.for_submit().starts_with("cron_minute = 61: 61 is outside 0-59"),
        "{}",
        e.for_submit()
    );
}

#[test]
fn february_30th_is_refused_not_searched() {
    let e = Schedule::parse([None, None, Some("30"), Some("2"), None]).unwrap_err();
    assert!(matches!(e, CronError::Never { .. }), "{e}");
    assert!(e.to_string().contains("never"), "{e}");
    // With a restricted day of week too, either matches: possible.
    assert!(Schedule::parse([None, None, Some("30"), Some("2"), Some("1")]).is_ok());
    // February 29th is possible, across 2100 (not a leap year).
    let s = sched(&[("minute", "0"), ("hour", "0"), ("day_of_month", "29"), ("month", "2")]);
    assert_eq!(utc_runs(&s, "2096-03-01T00:00:00Z", 1), ["2104-02-29 00:00 Fri UTC"]);
}

#[test]
fn runs_between_counts_skipped_runs() {
    let s = sched(&[("minute", "*/15")]);
    let tz = TimeZone::UTC;
    assert_eq!(s.runs_between(at("2026-01-01T00:00:00Z"), at("2026-01-01T01:00:00Z"), &tz, 100), 4);
    assert_eq!(s.runs_between(at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z"), &tz, 10), 10);
}

fn new_york() -> TimeZone {
    // The POSIX rule, so the test needs no time-zone database.
    TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").unwrap()
}

#[test]
fn spring_forward_runs_a_skipped_time_once_after_the_gap() {
    // 2026-03-08: 02:00 EST becomes 03:00 EDT in New York.
    let tz = new_york();
    let daily = sched(&[("minute", "30"), ("hour", "2")]);
    assert_eq!(
        runs(&daily, "2026-03-07T12:00:00Z", 3, &tz),
        ["2026-03-08 03:30 Sun EDT", "2026-03-09 02:30 Mon EDT", "2026-03-10 02:30 Tue EDT"]
    );
    // An hourly job simply has one run fewer that night.
    let hourly = sched(&[("minute", "0")]);
    assert_eq!(
        runs(&hourly, "2026-03-08T05:30:00Z", 3, &tz),
        ["2026-03-08 01:00 Sun EST", "2026-03-08 03:00 Sun EDT", "2026-03-08 04:00 Sun EDT"]
    );
}

#[test]
fn fall_back_runs_a_fixed_time_once_and_keeps_an_hourly_rhythm() {
    // 2026-11-01: 02:00 EDT becomes 01:00 EST in New York; 01:xx occurs twice.
    let tz = new_york();
    let daily = sched(&[("minute", "30"), ("hour", "1")]);
    assert_eq!(
        runs(&daily, "2026-11-01T04:00:00Z", 2, &tz),
        ["2026-11-01 01:30 Sun EDT", "2026-11-02 01:30 Mon EST"]
    );
    let hourly = sched(&[("minute", "30")]);
    assert_eq!(
        runs(&hourly, "2026-11-01T04:00:00Z", 4, &tz),
        [
            "2026-11-01 00:30 Sun EDT",
            "2026-11-01 01:30 Sun EDT",
            "2026-11-01 01:30 Sun EST",
            "2026-11-01 02:30 Sun EST"
        ]
    );
}

#[test]
fn zones_by_name() {
    assert!(andes_cron::time_zone("UTC").is_ok());
    assert!(andes_cron::time_zone("EST5EDT,M3.2.0,M11.1.0").is_ok());
    let e = andes_cron::time_zone("Not/AZone").unwrap_err();
    assert!(e.contains("Not/AZone"), "{e}");
}

mod brute_force {
    use super::*;
    use proptest::prelude::*;

    fn item() -> impl Strategy<Value = (u32, u32, u32, u8)> {
        // (a, b, step, kind): kind 0 = N, 1 = A-B, 2 = A-B/S, 3 = */S
        (0u32..60, 0u32..60, 1u32..20, 0u8..4)
    }

    fn field_text(items: &[(u32, u32, u32, u8)], lo: u32, hi: u32) -> String {
        let span = hi - lo + 1;
        let parts: Vec<String> = items
            .iter()
            .map(|&(a, b, s, k)| {
                let (a, b) = (lo + a % span, lo + b % span);
                let (a, b) = (a.min(b), a.max(b));
                match k {
                    0 => a.to_string(),
                    1 if a < b => format!("{a}-{b}"),
                    2 if a < b => format!("{a}-{b}/{s}"),
                    3 => format!("*/{s}"),
                    _ => "*".to_string(),
                }
            })
            .collect();
        parts.join(",")
    }

    /// Minute by minute, the manual's rules literally.
    fn scan(s: &Schedule, now: i64, limit_minutes: i64) -> Option<i64> {
        let f = s.fields();
        let sets: Vec<Vec<u32>> = Field::ALL
            .iter()
            .zip(f)
            .map(|(field, _)| {
                let (lo, hi) = field.range();
                (lo..=hi).filter(|v| contains(s, *field, *v)).collect()
            })
            .collect();
        let dom_r = f[2] != "*";
        let dow_r = f[4] != "*";
        let start = (now.div_euclid(60) + 1) * 60;
        for i in 0..limit_minutes {
            let t = start + i * 60;
            let z = jiff::Timestamp::from_second(t).unwrap().to_zoned(TimeZone::UTC);
            let (mi, h, d, mo) =
                (z.minute() as u32, z.hour() as u32, z.day() as u32, z.month() as u32);
            let wd = z.weekday().to_sunday_zero_offset() as u32;
            let dom = sets[2].contains(&d);
            let dow = sets[4].contains(&wd) || (wd == 0 && sets[4].contains(&7));
            let day = if dom_r && dow_r { dom || dow } else { dom && dow };
            if sets[0].contains(&mi) && sets[1].contains(&h) && sets[3].contains(&mo) && day {
                return Some(t);
            }
        }
        None
    }

    /// Whether `v` is in one field's set, read through the public API: a
    /// schedule of only that field fires at a time carrying `v`.
    fn contains(s: &Schedule, field: Field, v: u32) -> bool {
        let text = s.fields()[field as usize];
        let (lo, _) = field.range();
        text.split(',').any(|item| {
            let (base, step) = match item.split_once('/') {
                Some((b, st)) => (b, st.parse::<u32>().unwrap()),
                None => (item, 1),
            };
            let (a, b) = if base == "*" {
                (lo, field.range().1)
            } else if let Some((a, b)) = base.split_once('-') {
                (a.parse().unwrap(), b.parse().unwrap())
            } else {
                let n: u32 = base.parse().unwrap();
                (n, n)
            };
            v >= a && v <= b && (v - a).is_multiple_of(step)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn next_run_equals_a_minute_by_minute_scan(
            mi in proptest::collection::vec(item(), 1..3),
            h in proptest::collection::vec(item(), 1..3),
            star_days in any::<bool>(),
            dow in proptest::collection::vec(item(), 1..2),
            now in 0i64..4_000_000_000,
        ) {
            let m = field_text(&mi, 0, 59);
            let hh = field_text(&h, 0, 23);
            let dw = if star_days { "*".to_string() } else { field_text(&dow, 0, 7) };
            let s = Schedule::from_named([("minute", m.as_str()), ("hour", hh.as_str()), ("day_of_week", dw.as_str())]).unwrap();
            let limit = 8 * 24 * 60;
            let want = scan(&s, now, limit);
            let got = s.next_after(now, &TimeZone::UTC);
            match want {
                Some(w) => prop_assert_eq!(got, Some(w), "{} {} {}", m, hh, dw),
                None => prop_assert!(got.is_some_and(|g| g >= (now / 60 + 1) * 60 + limit * 60)),
            }
        }
    }
}
