//! Deferred idle jobs: when each becomes matchable, or misses its window.

use std::sync::Arc;
use std::time::Duration;

use andes_protocol::Clock;
use classad::ClassAd;

use super::state::{PoolState, lock};
use crate::deferral::{Deferral, Readiness};
use crate::job::{JobId, JobStatus};

impl PoolState {
    /// The deferral of an idle job at `now`, if it has one (its ad from the
    /// queue unless given).
    pub(crate) fn deferral_of(&self, ad: &ClassAd, now: i64) -> Option<Deferral> {
        match Deferral::of(ad, now, self.queue.deferral_config().1)? {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::debug!("{e}");
                None
            }
        }
    }

    /// True when an idle job may be offered to the negotiator now: it has no
    /// deferral, or its deferral is ready.
    pub(crate) fn offerable(&self, v: &crate::queue::JobView<'_>, now: i64) -> bool {
        if !v.has(classad::name!("DeferralTime")) {
            return true;
        }
        match self.deferral_of(&v.ad(), now) {
            Some(d) => matches!(d.readiness(now), Readiness::Ready { .. }),
            None => true,
        }
    }

    /// Schedules a look at a deferred idle job when it becomes matchable or
    /// its window closes; its ad is the event's when one is given, else the
    /// queue's (either made only for a job with a DeferralTime).
    pub(crate) fn watch_deferral(&self, id: JobId, ad: Option<&crate::queue::EventAd>) {
        let owned;
        let ad: &ClassAd = match ad {
            Some(a) if a.has(classad::name!("DeferralTime")) => a,
            Some(_) => return,
            None => match self.queue.read().job(id) {
                Some(v) if v.has(classad::name!("DeferralTime")) => {
                    owned = v.ad();
                    &owned
                }
                _ => return,
            },
        };
        let now = self.clock.now();
        let Some(d) = self.deferral_of(ad, now) else { return };
        let at = match d.readiness(now) {
            Readiness::Early { offer_at } => offer_at,
            Readiness::Ready { miss_at } => miss_at,
            Readiness::Missed { .. } => now,
        };
        let mut w = lock(&self.wakes);
        let earliest = w.first().is_none_or(|f| at < f.0);
        w.insert((at, id));
        drop(w);
        if earliest {
            self.rewake.notify_one();
        }
    }

    /// Wakes at each deferred job's instants: offers it when it becomes
    /// matchable (at once, not at the next advertisement), and hands jobs
    /// whose window closed unmatched to the queue.
    pub(crate) async fn deferral_loop(self: Arc<Self>) {
        loop {
            let next = lock(&self.wakes).first().map(|w| w.0);
            let delay = match next {
                Some(t) => Duration::from_millis(
                    (t.saturating_mul(1000) - self.clock.now_ms()).clamp(0, 60_000) as u64,
                ),
                None => Duration::from_secs(3600),
            };
            if !delay.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = self.rewake.notified() => continue,
                }
            }
            let now = self.clock.now();
            let due: Vec<JobId> = {
                let mut w = lock(&self.wakes);
                let mut due = Vec::new();
                while let Some(&(t, id)) = w.first() {
                    if t > now {
                        break;
                    }
                    w.pop_first();
                    due.push(id);
                }
                due
            };
            if due.is_empty() {
                continue;
            }
            let (mut ready, mut missed) = (false, Vec::new());
            let mut again = Vec::new();
            {
                let busy = lock(&self.state).busy.clone();
                let st = self.queue.read();
                for id in due {
                    let Some(v) = st.job(id) else { continue };
                    if v.proc.status != JobStatus::Idle || busy.contains(&id) {
                        continue;
                    }
                    let Some(d) = self.deferral_of(&v.ad(), now) else { continue };
                    match d.readiness(now) {
                        Readiness::Early { offer_at } => again.push((offer_at, id)),
                        Readiness::Ready { miss_at } => {
                            ready = true;
                            again.push((miss_at, id));
                        }
                        Readiness::Missed { .. } => missed.push(id),
                    }
                }
            }
            lock(&self.wakes).extend(again);
            if ready {
                self.urgent.notify_one();
                self.advertise.notify_one();
            }
            if !missed.is_empty()
                && let Err(e) = self.queue.deferral_missed(missed, now).await
            {
                tracing::warn!("deferred jobs that missed their window: {e}");
            }
        }
    }
}
