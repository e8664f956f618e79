//! The overview's plots, from job ads: throughput (jobs completed per minute) and
//! queue depth (jobs idle, running or held) over the last hour. Pure: the ads' times
//! and the samples taken so far in, the series out.
//!
//! The history is derived from each job's QDate, CompletionDate,
//! EnteredCurrentStatus and JobStatus, so the plots are whole even when the
//! dashboard has just started; a depth sampled while it runs replaces the derived
//! one for the minute it was taken in.

use classad::{ClassAd, Value};
use serde::Serialize;

/// The span plotted, seconds.
pub const WINDOW: i64 = 3600;
/// The width of one point of the plots, seconds.
pub const STEP: i64 = 60;

/// When one job entered the queue, left it and completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobTimes {
    /// QDate.
    pub queued: i64,
    /// When it stopped being idle, running or held (completed or removed); `None`
    /// while it is still one of those.
    pub ended: Option<i64>,
    /// CompletionDate of a job that completed.
    pub completed: Option<i64>,
}

fn int(ad: &ClassAd, name: &str) -> Option<i64> {
    match ad.eval_attr(name) {
        Value::Int(i) => Some(i),
        Value::Real(r) if r.is_finite() => Some(r as i64),
        _ => None,
    }
}

impl JobTimes {
    /// A job's times from its ad (queue or history); `None` without a QDate.
    pub fn from_ad(ad: &ClassAd) -> Option<JobTimes> {
        let queued = int(ad, "QDate")?;
        let status = int(ad, "JobStatus").unwrap_or(0);
        let done = int(ad, "CompletionDate").filter(|t| *t > 0);
        let entered = int(ad, "EnteredCurrentStatus").filter(|t| *t > 0);
        // 3: removed, 4: completed; any other status still counts in the queue.
        let (ended, completed) = match status {
            4 => {
                let at = done.or(entered).unwrap_or(queued);
                (Some(at), Some(at))
            }
            3 => (Some(entered.or(done).unwrap_or(queued)), None),
            _ => (None, None),
        };
        Some(JobTimes { queued, ended, completed })
    }
}

/// A queue depth observed at `t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When, seconds since the epoch.
    pub t: i64,
    /// Jobs idle, running or held then.
    pub depth: u64,
}

/// The plots' data, as uPlot takes it: x values and one y array per series.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Series {
    /// The end of each minute, seconds since the epoch (the last is now).
    pub t: Vec<i64>,
    /// Jobs completed in the minute ending at each `t`.
    pub completed: Vec<u64>,
    /// Jobs idle, running or held at each `t`.
    pub depth: Vec<u64>,
}

/// The last hour's series at `now`: a point per minute, the last at `now`.
pub fn series(now: i64, jobs: &[JobTimes], samples: &[Sample]) -> Series {
    let points = (WINDOW / STEP) as usize;
    let mut s = Series {
        t: Vec::with_capacity(points + 1),
        completed: Vec::with_capacity(points + 1),
        depth: Vec::with_capacity(points + 1),
    };
    for k in (0..=points as i64).rev() {
        let t = now - k * STEP;
        let from = t - STEP;
        let completed =
            jobs.iter().filter(|j| j.completed.is_some_and(|c| c > from && c <= t)).count();
        let derived =
            jobs.iter().filter(|j| j.queued <= t && j.ended.is_none_or(|e| e > t)).count() as u64;
        let sampled = samples.iter().filter(|x| x.t > from && x.t <= t).max_by_key(|x| x.t);
        s.t.push(t);
        s.completed.push(completed as u64);
        s.depth.push(sampled.map_or(derived, |x| x.depth));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_come_from_the_ads_status_and_dates() {
        let ad = |s: &str| classad::parse_ad(s).unwrap();
        let done =
            ad("[QDate = 100; JobStatus = 4; CompletionDate = 160; EnteredCurrentStatus = 161]");
        assert_eq!(
            JobTimes::from_ad(&done),
            Some(JobTimes { queued: 100, ended: Some(160), completed: Some(160) })
        );
        let removed =
            ad("[QDate = 100; JobStatus = 3; CompletionDate = 0; EnteredCurrentStatus = 130]");
        assert_eq!(
            JobTimes::from_ad(&removed),
            Some(JobTimes { queued: 100, ended: Some(130), completed: None })
        );
        let held = ad("[QDate = 100; JobStatus = 5; EnteredCurrentStatus = 130]");
        assert_eq!(
            JobTimes::from_ad(&held),
            Some(JobTimes { queued: 100, ended: None, completed: None })
        );
        assert_eq!(JobTimes::from_ad(&ad("[JobStatus = 1]")), None);
    }

    #[test]
    fn an_hour_of_minutes_from_the_ads_alone_and_with_samples() {
        let now = 10_000;
        let jobs = [
            // Queued 30 minutes ago, completed 10 minutes ago.
            JobTimes { queued: now - 1800, ended: Some(now - 600), completed: Some(now - 600) },
            // Queued 20 minutes ago, still in the queue.
            JobTimes { queued: now - 1200, ended: None, completed: None },
            // Removed after 5 minutes, long before the window.
            JobTimes { queued: now - 9000, ended: Some(now - 8700), completed: None },
            // Completed in the last minute.
            JobTimes { queued: now - 90, ended: Some(now - 30), completed: Some(now - 30) },
        ];
        let s = series(now, &jobs, &[]);
        assert_eq!(s.t.len(), 61);
        assert_eq!((s.t[0], s.t[60]), (now - 3600, now));
        assert_eq!(s.completed.iter().sum::<u64>(), 2);
        // The point at now - 600 counts the completion at exactly now - 600.
        assert_eq!(s.completed[50], 1);
        assert_eq!(s.completed[60], 1);
        // Depth: nothing an hour ago; one job 25 minutes ago; two 15 minutes ago;
        // one after the first completed; two while the last one waited; one now.
        assert_eq!(s.depth[0], 0);
        assert_eq!(s.depth[35], 1);
        assert_eq!(s.depth[45], 2);
        assert_eq!(s.depth[55], 1);
        assert_eq!(s.depth[59], 2);
        assert_eq!(s.depth[60], 1);
        // A sample taken in a minute replaces what the ads say of it; the latest wins.
        let samples = [
            Sample { t: now - 20, depth: 7 },
            Sample { t: now - 5, depth: 9 },
            Sample { t: now - 5000, depth: 3 },
        ];
        let s2 = series(now, &jobs, &samples);
        assert_eq!(s2.depth[60], 9);
        assert_eq!(s2.depth[..60], s.depth[..60]);
        assert_eq!(s2.completed, s.completed);
    }
}
