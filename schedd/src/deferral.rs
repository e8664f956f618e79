//! Job deferral and CronTab scheduling, the schedd's side (pure).
//!
//! A deferred job carries `DeferralTime` (an expression giving Unix seconds),
//! `DeferralWindow` (seconds it may start late) and `DeferralPrepTime`
//! (seconds before `DeferralTime` it may be matched). The schedd offers it to
//! the negotiator when the manual's
//! `(time() + ScheddInterval) >= (DeferralTime - DeferralPrepTime)` holds and
//! while `time() < DeferralTime + DeferralWindow` (the clause condor_submit
//! adds to Requirements), and wakes at exactly those instants rather than at a
//! polling interval. A job still idle when its window closes has missed its
//! run: a cron job counts it (`CronMissedRuns`) and takes its next run, any
//! other deferred job is held (HoldReasonCode 25), since it can never match.
//!
//! A cron job's `DeferralTime` is the next run of its schedule after the
//! current time rounded up to the next minute, computed when it enters the
//! queue, is requeued, is released, is evicted, and for every idle cron job
//! when the schedd starts.

use andes_cron::{CronError, Schedule};
use classad::{ClassAd, EvalOptions, Evaluator, Value};
use jiff::tz::TimeZone;

/// A job's deferral as the schedd sees it at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deferral {
    /// DeferralTime, Unix seconds.
    pub time: i64,
    /// DeferralWindow, seconds.
    pub window: i64,
    /// DeferralPrepTime, seconds.
    pub prep: i64,
    /// ScheddInterval: how long before its prep time the job may be offered.
    pub lead: i64,
}

/// Where a deferred idle job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Not yet: offer it to the negotiator at `offer_at`.
    Early {
        /// `DeferralTime - DeferralPrepTime - ScheddInterval`.
        offer_at: i64,
    },
    /// Matchable now, until `miss_at`.
    Ready {
        /// `DeferralTime + DeferralWindow`.
        miss_at: i64,
    },
    /// Its window closed before it was matched.
    Missed {
        /// Seconds since DeferralTime.
        late: i64,
    },
}

fn int(v: Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(i),
        Value::Real(r) if r.is_finite() => Some(r as i64),
        _ => None,
    }
}

impl Deferral {
    /// The deferral of `ad` at `now` (`CurrentTime` and `time()` are `now`);
    /// `None` when the job has no DeferralTime; an error when it is not a
    /// number. `schedd_interval` stands in for a missing ScheddInterval.
    pub fn of(ad: &ClassAd, now: i64, schedd_interval: i64) -> Option<Result<Deferral, String>> {
        let expr = ad.get(classad::name!("DeferralTime"))?;
        let mut ev = Evaluator::with_options(EvalOptions { now: Some(now), ..Default::default() });
        let time = match int(ev.eval(expr, Some(ad), None)) {
            Some(t) => t,
            None => {
                let v = ev.eval(expr, Some(ad), None);
                return Some(Err(format!("DeferralTime `{expr}` is {v}, not a time")));
            }
        };
        let mut get = |name: &str, default: i64| match ad.get(name) {
            Some(e) => int(ev.eval(e, Some(ad), None)).unwrap_or(default).max(0),
            None => default,
        };
        Some(Ok(Deferral {
            time,
            window: get("DeferralWindow", 0),
            prep: get("DeferralPrepTime", 0),
            lead: get("ScheddInterval", schedd_interval),
        }))
    }

    /// Where the job stands at `now`.
    pub fn readiness(&self, now: i64) -> Readiness {
        let offer_at = self.time.saturating_sub(self.prep).saturating_sub(self.lead);
        let miss_at = self.time.saturating_add(self.window);
        if now >= miss_at {
            Readiness::Missed { late: now.saturating_sub(self.time) }
        } else if now < offer_at {
            Readiness::Early { offer_at }
        } else {
            Readiness::Ready { miss_at }
        }
    }
}

/// The next `DeferralTime` of a cron job at `now`: `None` if the ad has no
/// cron schedule.
pub fn next_run(ad: &ClassAd, now: i64, tz: &TimeZone) -> Option<Result<i64, CronError>> {
    Some(Schedule::from_ad(ad)?.and_then(|s| {
        s.next_after(now, tz)
            .ok_or(CronError::Never { reason: "no run in the next 40 years".into() })
    }))
}

/// Runs of `ad`'s schedule in `(after, until]` (at most 10,000).
pub fn runs_between(ad: &ClassAd, after: i64, until: i64, tz: &TimeZone) -> u64 {
    match Schedule::from_ad(ad) {
        Some(Ok(s)) => s.runs_between(after, until, tz, 10_000),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ad(text: &str) -> ClassAd {
        classad::parse_ad(text).unwrap()
    }

    // The manual's deferral examples.

    #[test]
    fn example_execute_on_january_1st_2006_at_noon() {
        let d = Deferral::of(&ad("[DeferralTime = 1136138400]"), 1136138000, 0).unwrap().unwrap();
        assert_eq!(d.time, 1_136_138_400);
        assert_eq!(d.readiness(1_136_138_000), Readiness::Early { offer_at: 1_136_138_400 });
        assert_eq!(d.readiness(1_136_138_400), Readiness::Missed { late: 0 });
    }

    #[test]
    fn example_always_deferred_for_60_seconds() {
        let a =
            ad("[DeferralTime = (CurrentTime + 60); DeferralPrepTime = 300; ScheddInterval = 300]");
        for now in [0, 1_000_000, 1_700_000_000] {
            let d = Deferral::of(&a, now, 300).unwrap().unwrap();
            assert_eq!(d.time, now + 60);
            assert_eq!(d.readiness(now), Readiness::Ready { miss_at: now + 60 });
        }
    }

    #[test]
    fn example_sixty_seconds_late_within_a_120_second_window() {
        let a = ad("[DeferralTime = (CurrentTime - 60); DeferralWindow = 120]");
        let d = Deferral::of(&a, 5000, 0).unwrap().unwrap();
        assert_eq!((d.time, d.window), (4940, 120));
        assert_eq!(d.readiness(5000), Readiness::Ready { miss_at: 5060 });
    }

    #[test]
    fn example_prep_time_delays_matching_until_60_seconds_before() {
        let a = ad("[DeferralTime = 1262368800; DeferralPrepTime = 60; ScheddInterval = 0]");
        let d = Deferral::of(&a, 1_262_368_000, 300).unwrap().unwrap();
        assert_eq!(d.readiness(1_262_368_000), Readiness::Early { offer_at: 1_262_368_740 });
        assert_eq!(d.readiness(1_262_368_740), Readiness::Ready { miss_at: 1_262_368_800 });
    }

    #[test]
    fn example_qdate_plus_60() {
        let a = ad("[QDate = 1000; DeferralTime = (QDate + 60); DeferralPrepTime = 300]");
        let d = Deferral::of(&a, 1000, 0).unwrap().unwrap();
        assert_eq!(d.time, 1060);
        assert_eq!(d.readiness(1000), Readiness::Ready { miss_at: 1060 });
    }

    #[test]
    fn example_cron_prep_time_300_submitted_at_9_30_is_sent_from_9_55() {
        // cron_minute = 0, cron_hour = *, cron_prep_time = 300: submitted at
        // 09:30, the next run is 10:00 and the job may be sent from 09:55
        // (with no ScheddInterval lead: the schedd wakes at that instant).
        let t930 = 1_795_339_800; // 2026-11-22T09:30:00Z
        let a = ad(
            "[CronMinute = \"0\"; CronHour = \"*\"; DeferralPrepTime = 300; ScheddInterval = 0]",
        );
        let next = next_run(&a, t930, &TimeZone::UTC).unwrap().unwrap();
        assert_eq!(next, t930 + 1800);
        let mut a = a;
        a.insert_value("DeferralTime", next);
        let d = Deferral::of(&a, t930, 300).unwrap().unwrap();
        assert_eq!(d.readiness(t930), Readiness::Early { offer_at: t930 + 1500 });
        assert_eq!(d.readiness(t930 + 1500), Readiness::Ready { miss_at: t930 + 1800 });
    }

    #[test]
    fn example_cron_window_360_lets_the_job_start_up_to_six_minutes_late() {
        let a = ad("[DeferralTime = 6000; DeferralWindow = 360; DeferralPrepTime = 0]");
        let d = Deferral::of(&a, 0, 0).unwrap().unwrap();
        assert_eq!(d.readiness(6359), Readiness::Ready { miss_at: 6360 });
        assert_eq!(d.readiness(6360), Readiness::Missed { late: 360 });
    }

    #[test]
    fn the_schedds_formula_uses_the_jobs_schedd_interval() {
        // (time() + ScheddInterval) >= (DeferralTime - DeferralPrepTime)
        let a = ad("[DeferralTime = 10000; DeferralPrepTime = 100; ScheddInterval = 300]");
        let d = Deferral::of(&a, 0, 5).unwrap().unwrap();
        assert_eq!(d.readiness(9599), Readiness::Early { offer_at: 9600 });
        assert_eq!(d.readiness(9600), Readiness::Ready { miss_at: 10000 });
        let b = ad("[DeferralTime = 10000; DeferralPrepTime = 100]");
        assert_eq!(Deferral::of(&b, 0, 5).unwrap().unwrap().lead, 5);
    }

    #[test]
    fn a_deferral_time_that_is_not_a_number_is_an_error() {
        let e = Deferral::of(&ad("[DeferralTime = \"soon\"]"), 0, 0).unwrap().unwrap_err();
        assert!(e.contains("not a time"), "{e}");
        assert!(Deferral::of(&ad("[A = 1]"), 0, 0).is_none());
    }

    #[test]
    fn cron_next_run_rounds_up_to_the_next_minute() {
        let a = ad("[CronMinute = \"*/5\"]");
        assert_eq!(next_run(&a, 1_700_000_000, &TimeZone::UTC).unwrap().unwrap(), 1_700_000_100);
        assert!(next_run(&ad("[A = 1]"), 0, &TimeZone::UTC).is_none());
        let bad = ad("[CronMinute = \"61\"]");
        assert!(next_run(&bad, 0, &TimeZone::UTC).unwrap().is_err());
    }
}
