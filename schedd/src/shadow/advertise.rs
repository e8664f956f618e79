//! Advertising: the Scheduler and Submitter ads sent to the collector,
//! the idle demand by autocluster the negotiator asks for, and the queue's
//! events that wake them.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use andes_protocol::pool::{
    CollectorUpdate, CollectorUpdates, CollectorUpdatesReply, DemandGroup, DemandReply,
    MAX_COLLECTOR_UPDATES,
};
use andes_protocol::{Client, Clock};
use classad::{ClassAd, Value};

use super::claim::withdraw_soon;
use super::files::may_have_checkpoints;
use super::state::{ADVERTISE_GAP, ADVERTISE_HEARTBEAT, PoolState, Signal, lock};
use crate::job::{JobId, JobStatus};
use crate::queue::{ACTIVATION_PENDING, EventKind};

impl PoolState {
    pub(crate) fn on_events(&self, batch: &[crate::queue::QueueEvent]) {
        let mut wake = false;
        let mut st = lock(&self.state);
        for e in batch {
            match &e.kind {
                EventKind::Held(_) | EventKind::Removed(_) => {
                    if let Some(s) = st.shadows.get(&e.id) {
                        let _ = s.send(Signal::Stop);
                    }
                    if let Some(at) = st.queued.remove(&e.id) {
                        withdraw_soon(at, e.id);
                    }
                    if matches!(e.kind, EventKind::Removed(_))
                        && may_have_checkpoints(&e.ad)
                        && let Some(spool) = self.spool()
                    {
                        // Its checkpoints are of no more use.
                        spool.remove_job(e.id);
                    }
                    wake = true;
                }
                EventKind::VacateAsked(why) => {
                    if let Some(s) = st.shadows.get(&e.id) {
                        let _ = s.send(Signal::Vacate(why.clone()));
                    }
                }
                EventKind::Edited(attr) => {
                    self.watch_deferral(e.id, Some(&e.ad));
                    if let Some(s) = st.shadows.get(&e.id)
                        && let Some(expr) = e.ad.get(attr)
                    {
                        let mut ad = ClassAd::new();
                        ad.insert(attr.as_str(), expr.clone());
                        let _ = s.send(Signal::Edit(ad));
                    }
                }
                EventKind::Submitted
                | EventKind::Released(_)
                | EventKind::Requeued
                | EventKind::Evicted { .. }
                | EventKind::Note(_) => {
                    self.watch_deferral(e.id, Some(&e.ad));
                    wake = true;
                    if self.last_idle.load(std::sync::atomic::Ordering::Relaxed) == 0 {
                        self.urgent.notify_one();
                    }
                }
                _ => wake = true,
            }
        }
        drop(st);
        if wake {
            self.advertise.notify_one();
        }
    }

    pub(crate) async fn advertise_loop(self: Arc<Self>) {
        let Some(url) = self.cfg.collector.clone() else { return };
        let client = match Client::new(&url, self.keypair.clone()) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("COLLECTOR_HOST {url}: {e}");
                return;
            }
        };
        let mut failing = false;
        let mut incarnation: Option<String> = None;
        loop {
            // Every ad, again if the collector turns out to have restarted
            // (it holds none of ours) as they go.
            let mut restarted = false;
            let ads = self.ads();
            for (kind, ad) in &ads {
                if *kind == "Scheduler"
                    && let Value::Int(n) = ad.eval_attr(classad::name!("TotalIdleJobs"))
                {
                    self.last_idle.store(n, std::sync::atomic::Ordering::Relaxed);
                }
            }
            // One request for them all (a schedd has an ad per owner).
            let updates: Vec<CollectorUpdate> = ads
                .iter()
                .map(|(kind, ad)| CollectorUpdate::whole(kind, ad.to_string(), None))
                .collect();
            for chunk in updates.chunks(MAX_COLLECTOR_UPDATES) {
                let body = CollectorUpdates { updates: chunk.to_vec() };
                match client.post_json("/v1/collector/updates", &body).await {
                    Ok(r) if r.status.is_success() => {
                        failing = false;
                        let reply = r.json::<CollectorUpdatesReply>().unwrap_or_default();
                        if !reply.incarnation.is_empty() {
                            restarted |=
                                incarnation.as_ref().is_some_and(|i| *i != reply.incarnation);
                            incarnation = Some(reply.incarnation);
                        }
                        if let Some((i, why)) = reply.refused.first() {
                            tracing::warn!(
                                "the collector refused the {} ad: {why}",
                                chunk.get(*i).map_or("", |u| u.kind.as_str())
                            );
                        }
                    }
                    Ok(r) => {
                        if !failing {
                            tracing::warn!(
                                "the collector refused the schedd's ads: {}",
                                r.error_reason().unwrap_or_default()
                            );
                        }
                        failing = true;
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!("cannot advertise to the collector: {e}");
                        }
                        failing = true;
                    }
                }
            }
            if restarted {
                tracing::info!("the collector restarted: sending every ad again");
                continue;
            }
            // Changes arriving within ADVERTISE_GAP go out together, unless
            // they bring work to a pool that had none.
            tokio::select! {
                _ = tokio::time::sleep(ADVERTISE_GAP) => {}
                _ = self.urgent.notified() => {}
            }
            // A failing collector is tried again every second; a quiet
            // schedd still sends its ads every ADVERTISE_HEARTBEAT, so that a
            // collector that restarted has them again within seconds.
            let wait = if failing {
                Duration::from_secs(1)
            } else {
                self.cfg.schedd_interval.min(ADVERTISE_HEARTBEAT)
            };
            tokio::select! {
                _ = self.advertise.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// The Scheduler ad and one Submitter ad per owner.
    pub(crate) fn ads(&self) -> Vec<(&'static str, ClassAd)> {
        let busy = lock(&self.state).busy.clone();
        let st = self.queue.read();
        let mut per: HashMap<String, [i64; 3]> = HashMap::new();
        for v in st.jobs() {
            // The schedd runs its DAGMan jobs itself: they ask the pool for nothing.
            if crate::scheduler::is_dagman_view(&v) {
                continue;
            }
            let slot = match v.proc.status {
                JobStatus::Idle if !busy.contains(&v.id) => 0,
                s if s.is_active() => 1,
                JobStatus::Held => 2,
                _ => continue,
            };
            per.entry(v.owner().to_string()).or_default()[slot] += 1;
        }
        drop(st);
        let now = self.clock.now();
        let mut total = [0i64; 3];
        let mut out = Vec::new();
        let mut owners: Vec<_> = per.into_iter().collect();
        owners.sort();
        for (owner, n) in &owners {
            for i in 0..3 {
                total[i] += n[i];
            }
            let mut ad = ClassAd::new();
            ad.insert_value(classad::name!("Name"), format!("{owner}@{}", self.cfg.name));
            ad.insert_value(classad::name!("Owner"), owner.as_str());
            ad.insert_value(classad::name!("ScheddName"), self.cfg.name.as_str());
            ad.insert_value(classad::name!("MyAddress"), self.cfg.address.as_str());
            ad.insert_value(classad::name!("IdleJobs"), n[0]);
            ad.insert_value(classad::name!("RunningJobs"), n[1]);
            ad.insert_value(classad::name!("HeldJobs"), n[2]);
            ad.insert_value(classad::name!("MyCurrentTime"), now);
            out.push(("Submitter", ad));
        }
        let mut ad = ClassAd::new();
        ad.insert_value(classad::name!("Name"), self.cfg.name.as_str());
        ad.insert_value(
            classad::name!("Machine"),
            self.cfg.name.rsplit('@').next().unwrap_or(&self.cfg.name),
        );
        ad.insert_value(classad::name!("MyAddress"), self.cfg.address.as_str());
        ad.insert_value(classad::name!("TotalIdleJobs"), total[0]);
        ad.insert_value(classad::name!("TotalRunningJobs"), total[1]);
        ad.insert_value(classad::name!("TotalHeldJobs"), total[2]);
        ad.insert_value(classad::name!("IdleJobs"), total[0]);
        ad.insert_value(classad::name!("RunningJobs"), total[1]);
        ad.insert_value(classad::name!("HeldJobs"), total[2]);
        ad.insert_value(classad::name!("NumUsers"), owners.len() as i64);
        ad.insert_value(classad::name!("MyCurrentTime"), now);
        // The Scheduler ad first: it is what wakes the negotiator.
        out.insert(0, ("Scheduler", ad));
        out
    }

    pub(crate) fn demand(&self, significant: &[String]) -> DemandReply {
        *lock(&self.significant) = significant.to_vec();
        // Made into names once for all the jobs below.
        let sig: Vec<classad::AttrName> = crate::schedd::autocluster_attrs(significant)
            .iter()
            .map(|a| classad::AttrName::new(a))
            .collect();
        let now = self.clock.now();
        let mut state = lock(&self.state);
        let st = self.queue.read();
        let mut groups: HashMap<u32, (String, ClassAd, VecDeque<JobId>)> = HashMap::new();
        let mut running: HashMap<String, u32> = HashMap::new();
        let mut cluster_keys: HashMap<u32, String> = HashMap::new();
        for v in st.jobs() {
            if v.proc.status.is_active() {
                *running.entry(v.owner().to_string()).or_default() += 1;
                continue;
            }
            if v.proc.status != JobStatus::Idle || state.busy.contains(&v.id) {
                continue;
            }
            // An activation sent and not resolved: its host may be running it.
            if v.proc.ad.contains(classad::name!(ACTIVATION_PENDING)) {
                continue;
            }
            if v.routed_away() || !self.offerable(&v, now) || crate::scheduler::is_dagman_view(&v) {
                continue;
            }
            let base = cluster_keys.entry(v.id.cluster).or_insert_with(|| {
                let mut k = v.owner().to_string();
                for a in &sig {
                    k.push('\u{1}');
                    if let Some(e) = v.cluster.ad.lookup(a) {
                        k.push_str(&e.to_string());
                    }
                }
                k
            });
            let mut key = base.clone();
            for a in &sig {
                if let Some(e) = v.proc.ad.lookup(a) {
                    key.push('\u{2}');
                    key.push_str(a.as_str());
                    key.push('=');
                    key.push_str(&e.to_string());
                }
            }
            let next = state.ac_ids.len() as u32 + 1;
            let ac = *state.ac_ids.entry(key).or_insert(next);
            groups
                .entry(ac)
                .or_insert_with(|| (v.owner().to_string(), v.ad(), VecDeque::new()))
                .2
                .push_back(v.id);
        }
        drop(st);
        // The key table only grows with distinct job shapes; bound it.
        if state.ac_ids.len() > 1_000_000 {
            state.ac_ids.clear();
        }
        let mut reply = DemandReply {
            schedd: self.cfg.name.clone(),
            groups: Vec::with_capacity(groups.len()),
            running: running.into_iter().collect(),
        };
        state.ac_jobs.clear();
        for (ac, (owner, ad, ids)) in groups {
            reply.groups.push(DemandGroup {
                autocluster: ac,
                submitter: owner,
                ad: ad.to_string(),
                idle: ids.len() as u32,
            });
            state.ac_jobs.insert(ac, ids);
        }
        reply.groups.sort_by_key(|g| g.autocluster);
        reply
    }
}
