//! The publisher of slot ads to the collector: newest ad per slot, each
//! round in one request, a gap between rounds, retries and a heartbeat; what
//! changes within a claim waits for [`PUBLISH_DETAIL_GAP`]. A slot's ad goes
//! whole once, then as what changed since the ad the collector holds (a
//! delta, numbered), for as long as the collector says it holds that ad.

use std::time::Duration;

use andes_protocol::pool::{self};
use classad::Value;

/// The sandbox names of the job's streams: one contract, in `andes-protocol`.
pub use andes_protocol::pool::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};

/// The least time between two rounds of slot ads sent to the collector: the
/// ads of a busy slot change with every job, and only the newest matters.
pub const PUBLISH_GAP: Duration = Duration::from_millis(100);

/// How often a failing collector is tried again.
pub const PUBLISH_RETRY: Duration = Duration::from_secs(1);

/// How long what changes within a claim (the slot's Activity, its job's
/// attributes, its load) may wait before it reaches the collector: a slot
/// running short jobs on one claim changes with every job, and the
/// negotiator acts on none of it. What it does act on (the State, the claim,
/// the claim's user) goes at once.
pub const PUBLISH_DETAIL_GAP: Duration = Duration::from_secs(5);

/// With nothing to send for this long at most (each publisher waits a part
/// of it of its own, no less than half, as with details), one slot's ad
/// goes anyway (to notice a collector that restarted).
pub const PUBLISH_HEARTBEAT: Duration = Duration::from_secs(10);

/// Sends the slot ads the daemon publishes to the collector at `client`
/// (`POST /v1/collector/updates`, a round in one request), newest ad per
/// slot first, until the daemon drops its sender: at once when nothing was
/// sent for [`PUBLISH_GAP`] or the slot became Unclaimed, else coalesced into
/// the next round; a change within a claim (the same State, claim and user as
/// the slot's ad last sent) waits up to [`PUBLISH_DETAIL_GAP`], so that a
/// claim running short jobs costs the collector nothing per job.
///
/// The pool is whole again within seconds of a collector's return: a send
/// that fails is tried again every [`PUBLISH_RETRY`] (and every slot's newest
/// ad is sent once it succeeds); a collector that answers with a new
/// incarnation (it restarted, and holds none of our ads) gets every slot's
/// newest ad at once; and with nothing to send for [`PUBLISH_HEARTBEAT`]
/// (at most: each publisher its own part of it), one slot's ad goes anyway,
/// so that a restart is noticed even on a host whose slots do not change.
pub fn spawn_publisher(
    client: andes_protocol::Client,
    rx: tokio::sync::mpsc::UnboundedReceiver<crate::remote::PublishedAd>,
) -> tokio::task::JoinHandle<()> {
    // Numbers new to any collector that may hold this host's ads from an
    // earlier run of the daemon: they start at the time, in nanoseconds.
    let serial = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let detail_gap = detail_gap(rand_core::RngCore::next_u32(&mut rand_core::OsRng));
    tokio::spawn(Publisher { serial, detail_gap, ..Publisher::default() }.run(client, rx))
}

/// This publisher's wait for changes in detail, from a random `draw`: between
/// half of [`PUBLISH_DETAIL_GAP`] and all of it. Hosts whose claims were made
/// together would otherwise send their details together, every gap, as one
/// burst at the collector (12,500 requests at once at 100,000 slots); with
/// gaps of their own, their rounds drift apart.
fn detail_gap(draw: u32) -> Duration {
    let half = PUBLISH_DETAIL_GAP / 2;
    half + half.mul_f64(f64::from(draw) / f64::from(u32::MAX))
}

/// A slot's ad as the publisher keeps it: shared, since the newest ad of a
/// slot is kept both for the next round and as the slot's latest.
type Ad = std::sync::Arc<crate::remote::PublishedAd>;

fn name(p: &Ad) -> String {
    p.ad.get(classad::name!("Name")).map(|e| e.to_string()).unwrap_or_default()
}

/// Whether two ads are the same slot's (their `Name`s are [`name`]'s same
/// text), without printing either: a round holds an ad of every slot that
/// changed, and each new ad is compared with all of them.
fn same_slot(a: &Ad, b: &Ad) -> bool {
    a.ad.get(classad::name!("Name")) == b.ad.get(classad::name!("Name"))
}

fn unclaimed(p: &Ad) -> bool {
    matches!(p.ad.eval_attr(classad::name!("State")), Value::Str(s) if &*s == "Unclaimed")
}

/// What the negotiator acts on in a slot's ad: its State, its claim, the
/// claim's user. Two ads of a Claimed slot with the same differ only in
/// detail.
fn decisive(p: &Ad) -> (String, String, String) {
    let text = |ad: &classad::ClassAd, n: &classad::AttrName| {
        ad.get(n).map(|e| e.to_string()).unwrap_or_default()
    };
    (
        text(&p.ad, classad::name!("State")),
        text(&p.private, classad::name!("ClaimId")),
        text(&p.ad, classad::name!("RemoteOwner")),
    )
}

#[derive(Default)]
struct Publisher {
    /// To send in the next round: the newest ad of each slot.
    pending: Vec<Ad>,
    /// Changes in detail, sent at `details_due` (or sooner, with a round).
    details: std::collections::BTreeMap<String, Ad>,
    details_due: Option<tokio::time::Instant>,
    /// Every slot's newest ad, sent or not.
    latest: std::collections::BTreeMap<String, Ad>,
    /// What the negotiator acts on, as last sent, per slot.
    sent: std::collections::HashMap<String, (String, String, String)>,
    failing: bool,
    incarnation: Option<String>,
    /// Whether the collector said it takes deltas.
    takes_deltas: bool,
    /// The ad the collector holds of each slot, as it took it, and the
    /// number it took it under: the base of the slot's next delta.
    held: std::collections::HashMap<String, (u64, Ad)>,
    /// The last number given to an ad sent.
    serial: u64,
    /// How long changes in detail wait here (see [`detail_gap`]; zero:
    /// [`PUBLISH_DETAIL_GAP`]).
    detail_gap: Duration,
}

/// One slot's ad as it goes in a request: whole, or (to a collector that
/// holds its last ad) as what changed since that ad.
fn update_for(p: &Ad, serial: u64, held: Option<&(u64, Ad)>) -> pool::CollectorUpdate {
    match held {
        Some((base, old)) => {
            let (mut delta, unset) = p.ad.delta_from(&old.ad);
            if let Some((n, e)) = p.ad.get_entry(classad::name!("Name")) {
                delta.insert(n.clone(), e.clone());
            }
            pool::CollectorUpdate {
                kind: "Machine".into(),
                ad: delta.to_string(),
                private: (p.private != old.private).then(|| p.private.to_string()),
                serial: Some(serial),
                base: Some(*base),
                unset,
            }
        }
        None => pool::CollectorUpdate {
            serial: Some(serial),
            ..pool::CollectorUpdate::whole("Machine", p.ad.to_string(), Some(p.private.to_string()))
        },
    }
}

impl Publisher {
    /// Takes in a slot's newest ad: for the next round, or (a change in
    /// detail) for the next round of details. True when it should go at once
    /// (the slot became Unclaimed).
    fn take(&mut self, p: Ad) -> bool {
        let n = name(&p);
        self.latest.insert(n.clone(), p.clone());
        let key = decisive(&p);
        if key.0 == "\"Claimed\"" && self.sent.get(&n) == Some(&key) && !self.failing {
            self.pending.retain(|a| !same_slot(a, &p));
            self.details.insert(n, p);
            let gap = self.detail_wait();
            self.details_due.get_or_insert_with(|| tokio::time::Instant::now() + gap);
            return false;
        }
        self.details.remove(&n);
        let now = unclaimed(&p);
        self.pend(p);
        now
    }

    /// How long this publisher waits with nothing to send before a
    /// heartbeat: [`PUBLISH_HEARTBEAT`] in the proportion of its detail gap
    /// to [`PUBLISH_DETAIL_GAP`] (idle hosts started together do not beat
    /// together either).
    fn heartbeat(&self) -> Duration {
        PUBLISH_HEARTBEAT
            .mul_f64(self.detail_wait().as_secs_f64() / PUBLISH_DETAIL_GAP.as_secs_f64())
    }

    /// How long changes in detail wait here: this publisher's own gap, or
    /// [`PUBLISH_DETAIL_GAP`] when it has none.
    fn detail_wait(&self) -> Duration {
        if self.detail_gap.is_zero() { PUBLISH_DETAIL_GAP } else { self.detail_gap }
    }

    /// `p` goes in the next round, in place of its slot's ad there.
    fn pend(&mut self, p: Ad) {
        self.pending.retain(|a| !same_slot(a, &p));
        self.pending.push(p);
    }

    /// The details, due or not, join the round.
    fn details_join(&mut self) {
        self.details_due = None;
        for (_, p) in std::mem::take(&mut self.details) {
            self.pend(p);
        }
    }

    /// Sends `pending` in one request (or as many as it takes); what is not
    /// kept stays pending. True when every slot's ad should be sent again
    /// (the collector restarted, or came back).
    async fn send(&mut self, client: &andes_protocol::Client) -> bool {
        let round = std::mem::take(&mut self.pending);
        let mut resend_all = false;
        for chunk in round.chunks(pool::MAX_COLLECTOR_UPDATES) {
            if self.failing && !self.pending.is_empty() {
                self.pending.extend(chunk.iter().cloned());
                continue;
            }
            let mut serials = Vec::with_capacity(chunk.len());
            let mut updates = Vec::with_capacity(chunk.len());
            for p in chunk {
                self.serial = self.serial.wrapping_add(1);
                serials.push(self.serial);
                let held = self.held.get(&name(p)).filter(|_| self.takes_deltas);
                updates.push(update_for(p, self.serial, held));
            }
            let body = pool::CollectorUpdates { updates };
            match client.post_json("/v1/collector/updates", &body).await {
                Ok(r) if r.status.is_success() => {
                    if self.failing {
                        tracing::info!("the collector takes our ads again");
                        resend_all = true;
                    }
                    self.failing = false;
                    let reply = r.json::<pool::CollectorUpdatesReply>().unwrap_or_default();
                    if !reply.incarnation.is_empty() {
                        if self.incarnation.as_ref().is_some_and(|i| *i != reply.incarnation) {
                            tracing::info!("the collector restarted: sending every slot's ad");
                            resend_all = true;
                        }
                        self.incarnation = Some(reply.incarnation);
                    }
                    self.takes_deltas = reply.takes_deltas;
                    for (i, p) in chunk.iter().enumerate() {
                        let n = name(p);
                        if reply.stale.contains(&i) {
                            // The collector lost the delta's base: whole, next round.
                            self.held.remove(&n);
                            self.pend(p.clone());
                            continue;
                        }
                        match reply.refused.iter().find(|(at, _)| *at == i) {
                            Some((_, why)) => {
                                tracing::warn!("the collector refused a slot ad: {why}");
                                self.held.remove(&n);
                            }
                            None => {
                                self.sent.insert(n.clone(), decisive(p));
                                self.held.insert(n, (serials[i], p.clone()));
                            }
                        }
                    }
                }
                Ok(r) => {
                    if !self.failing {
                        tracing::warn!(
                            "the collector refused the slot ads: {}",
                            r.error_reason().unwrap_or_default()
                        );
                    }
                    self.failing = true;
                    self.forget(chunk);
                    self.pending.extend(chunk.iter().cloned());
                }
                Err(e) => {
                    if !self.failing {
                        tracing::warn!("cannot send slot ads to the collector: {e}");
                    }
                    self.failing = true;
                    self.forget(chunk);
                    self.pending.extend(chunk.iter().cloned());
                }
            }
        }
        if resend_all {
            self.held.clear();
        }
        resend_all
    }

    /// Whether the collector took the ads of `chunk` is not known: they go
    /// whole next time.
    fn forget(&mut self, chunk: &[Ad]) {
        for p in chunk {
            self.held.remove(&name(p));
        }
    }

    async fn run(
        mut self,
        client: andes_protocol::Client,
        mut rx: tokio::sync::mpsc::UnboundedReceiver<crate::remote::PublishedAd>,
    ) {
        let mut beat = 0usize;
        let mut open = true;
        while open || !self.pending.is_empty() || !self.details.is_empty() {
            if !open {
                // The daemon is stopping: what is left goes now.
                self.details_join();
            }
            if self.pending.is_empty() {
                let due = self.details_due;
                tokio::select! {
                    p = rx.recv(), if open => match p {
                        Some(p) => {
                            self.take(std::sync::Arc::new(p));
                        }
                        None => open = false,
                    },
                    _ = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)),
                        if due.is_some() => self.details_join(),
                    _ = tokio::time::sleep(self.heartbeat()), if due.is_none() => {
                        // Nothing to send for a while: one slot's ad, round
                        // robin, to hear the collector's incarnation.
                        if let Some(p) = self.latest.values().nth(beat % self.latest.len().max(1)) {
                            self.pending.push(p.clone());
                        }
                        beat = beat.wrapping_add(1);
                    }
                }
                if self.pending.is_empty() {
                    continue;
                }
            }
            while let Ok(p) = rx.try_recv() {
                self.take(std::sync::Arc::new(p));
            }
            if self.details_due.is_some_and(|d| d <= tokio::time::Instant::now()) {
                self.details_join();
            }
            let round = tokio::time::Instant::now();
            if self.send(&client).await {
                self.details = Default::default();
                self.details_due = None;
                self.pending = self.latest.values().cloned().collect();
                continue;
            }
            let gap = if self.failing { PUBLISH_RETRY } else { PUBLISH_GAP };
            // Gather what comes during the gap; a slot becoming Unclaimed
            // goes at once (the negotiator is waiting for it), unless the
            // collector is failing.
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(round + gap) => break,
                    p = rx.recv(), if open => match p {
                        Some(p) => {
                            if self.take(std::sync::Arc::new(p)) && !self.failing {
                                break;
                            }
                        }
                        None => {
                            open = false;
                            break;
                        }
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ad(name: &str, state: &str, activity: &str, claim: &str, owner: &str) -> Ad {
        let mut a = classad::ClassAd::new();
        a.insert_value("Name", name);
        a.insert_value("State", state);
        a.insert_value("Activity", activity);
        if !owner.is_empty() {
            a.insert_value("RemoteOwner", owner);
        }
        let mut private = classad::ClassAd::new();
        if !claim.is_empty() {
            private.insert_value("ClaimId", claim);
        }
        Ad::new(crate::remote::PublishedAd { ad: std::sync::Arc::new(a), private })
    }

    fn names(v: &[Ad]) -> Vec<String> {
        v.iter().map(name).collect()
    }

    /// Each host waits a gap of its own for details, within
    /// PUBLISH_DETAIL_GAP and no shorter than half of it, so that hosts
    /// claimed together do not send their details together.
    #[test]
    fn each_publisher_has_a_detail_gap_of_its_own_within_the_bound() {
        assert_eq!(detail_gap(0), PUBLISH_DETAIL_GAP / 2);
        assert_eq!(detail_gap(u32::MAX), PUBLISH_DETAIL_GAP);
        let gaps: std::collections::BTreeSet<Duration> =
            (0..64u32).map(|i| detail_gap(i.wrapping_mul(0x9e37_79b9))).collect();
        assert!(gaps.len() > 60, "spread: {gaps:?}");
        assert!(gaps.iter().all(|g| *g >= PUBLISH_DETAIL_GAP / 2 && *g <= PUBLISH_DETAIL_GAP));
        // The details wait this publisher's gap.
        let mut p = Publisher { detail_gap: detail_gap(1 << 30), ..Publisher::default() };
        p.sent.insert("\"s1\"".into(), decisive(&ad("s1", "Claimed", "Idle", "c1", "alice")));
        let before = tokio::time::Instant::now();
        p.take(ad("s1", "Claimed", "Busy", "c1", "alice"));
        let due = p.details_due.expect("a detail waits");
        assert!(due >= before + p.detail_gap && due <= tokio::time::Instant::now() + p.detail_gap);
        assert!(p.detail_gap < PUBLISH_DETAIL_GAP);
        // And its heartbeat, in the same proportion.
        assert!(p.heartbeat() < PUBLISH_HEARTBEAT && p.heartbeat() >= PUBLISH_HEARTBEAT / 2);
        assert_eq!(Publisher::default().heartbeat(), PUBLISH_HEARTBEAT);
    }

    /// What the negotiator acts on goes in the next round; what changes
    /// within a claim waits for the details' round; an Unclaimed slot goes
    /// at once.
    #[test]
    fn changes_within_a_claim_wait_and_decisive_ones_do_not() {
        let mut p = Publisher::default();
        // Never sent: goes, whatever it is.
        assert!(!p.take(ad("s1", "Claimed", "Idle", "c1", "alice")));
        assert_eq!(names(&p.pending), ["\"s1\""]);
        // Sent: the collector has it.
        let sent = std::mem::take(&mut p.pending);
        for a in &sent {
            p.sent.insert(name(a), decisive(a));
        }
        // The same claim, now Busy, then Idle, then Busy: details, the newest kept.
        for act in ["Busy", "Idle", "Busy"] {
            assert!(!p.take(ad("s1", "Claimed", act, "c1", "alice")));
        }
        assert!(p.pending.is_empty());
        assert_eq!(p.details.len(), 1);
        assert!(p.details_due.is_some());
        // A new claim on the slot is decisive: it goes, and replaces the detail.
        assert!(!p.take(ad("s1", "Claimed", "Busy", "c2", "alice")));
        assert_eq!(names(&p.pending), ["\"s1\""]);
        assert!(p.details.is_empty());
        // So are another user, and another state; Unclaimed goes at once.
        p.pending.clear();
        assert!(!p.take(ad("s1", "Claimed", "Busy", "c1", "bob")));
        assert!(!p.take(ad("s1", "Preempting", "Vacating", "c1", "alice")));
        assert_eq!(p.pending.len(), 1, "the newest ad per slot");
        assert!(p.take(ad("s1", "Unclaimed", "Idle", "", "")));
        // Details join the round when due, the newest per slot.
        p.pending.clear();
        assert!(!p.take(ad("s1", "Claimed", "Busy", "c1", "alice")));
        assert!(!p.take(ad("s1", "Claimed", "Idle", "c1", "alice")));
        p.details_join();
        assert_eq!(p.pending.len(), 1);
        assert_eq!(p.pending[0].ad.get("Activity").unwrap().to_string(), "\"Idle\"");
        assert!(p.details_due.is_none());
        // While the collector fails, nothing waits for details.
        p.pending.clear();
        p.failing = true;
        assert!(!p.take(ad("s1", "Claimed", "Busy", "c1", "alice")));
        assert_eq!(p.pending.len(), 1);
    }
}

/// The publisher against the real collector (its router, behind the real
/// signature check, over a socket): whole ads, deltas, and a collector that
/// lost the base.
#[cfg(test)]
mod against_the_collector {
    use std::sync::{Arc, Mutex};

    use andes_central::collector::{AdType, Collector};
    use andes_protocol::{Auth, Client, Keypair, ManualClock, TrustFile, Verifier, VerifierConfig};
    use classad::Value;

    use super::*;

    /// A Claimed slot's ad, as big as a host's (padding), with `activity`,
    /// `load` and, when `job`, a JobId.
    fn slot(activity: &str, load: i64, job: bool) -> Ad {
        let mut a = classad::ClassAd::new();
        a.insert_value("Name", "slot1@exec-1");
        a.insert_value("State", "Claimed");
        a.insert_value("Activity", activity);
        a.insert_value("RemoteOwner", "alice");
        a.insert_value("LoadAvg", load);
        if job {
            a.insert_value("JobId", "12.0");
        }
        for i in 0..60 {
            a.insert_value(format!("Padding{i}").as_str(), format!("a value of some length {i}"));
        }
        let mut private = classad::ClassAd::new();
        private.insert_value("ClaimId", "claim-1");
        Ad::new(crate::remote::PublishedAd { ad: Arc::new(a), private })
    }

    fn held(c: &Mutex<Collector>) -> Option<classad::ClassAd> {
        let c = c.lock().unwrap();
        let now = 1_800_000_000;
        let mut ads = c.query(Some(AdType::Machine), None, &[], now);
        assert!(ads.len() <= 1);
        assert!(ads.is_empty() || c.private(AdType::Machine, "slot1@exec-1", now).is_some());
        ads.pop()
    }

    #[tokio::test]
    async fn ads_go_whole_then_as_deltas_the_collector_resolves() {
        let clock = Arc::new(ManualClock::new(1_800_000_000));
        let key = Arc::new(Keypair::from_seed("exec-1", [1; 32]).unwrap());
        let trust =
            TrustFile::parse(&format!("host exec-1 {}\n", key.public_line()), "trust").unwrap();
        let collector = Arc::new(Mutex::new(Collector::new(900)));
        let auth = Auth::new(Verifier::new(trust, VerifierConfig::default()), clock.clone());
        // The size of each request's body, as it reached the collector.
        let sizes = Arc::new(Mutex::new(Vec::<usize>::new()));
        let seen = sizes.clone();
        let app = andes_central::collector::api::router(collector.clone(), clock.clone(), &auth)
            .layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let len = req
                        .headers()
                        .get(axum::http::header::CONTENT_LENGTH)
                        .and_then(|v| v.to_str().ok()?.parse().ok())
                        .unwrap_or(0);
                    seen.lock().unwrap().push(len);
                    next.run(req)
                },
            ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = andes_protocol::Server::plain(listener).unwrap();
        tokio::spawn(server.serve(app, std::future::pending()));
        let client = Client::new(&url, key).unwrap().with_clock(clock);

        let mut p = Publisher::default();
        let activity = |ad: &classad::ClassAd| ad.eval_attr("Activity");
        // First: whole.
        p.take(slot("Idle", 0, true));
        assert!(!p.send(&client).await);
        let ad = held(&collector).expect("the collector holds the slot");
        assert_eq!(activity(&ad), Value::Str("Idle".into()));
        assert!(p.takes_deltas, "the collector said it takes deltas");
        // Then a change in detail: a delta, the JobId gone, the rest kept.
        p.take(slot("Busy", 1, false));
        p.details_join();
        assert!(!p.send(&client).await);
        let ad = held(&collector).unwrap();
        assert_eq!(activity(&ad), Value::Str("Busy".into()));
        assert_eq!(ad.eval_attr("LoadAvg"), Value::Int(1));
        assert!(ad.get("JobId").is_none(), "unset by the delta");
        assert_eq!(ad.eval_attr("Padding59"), Value::Str("a value of some length 59".into()));
        {
            let s = sizes.lock().unwrap();
            assert!(s[1] * 4 < s[0], "a delta is a fraction of the whole ad: {s:?}");
        }
        // A collector that lost the ad (say, it expired there): the delta
        // is stale, and the ad goes whole in the next round.
        collector.lock().unwrap().remove(AdType::Machine, "slot1@exec-1");
        p.take(slot("Idle", 2, true));
        p.details_join();
        assert!(!p.send(&client).await);
        assert!(held(&collector).is_none());
        assert_eq!(names(&p.pending), ["\"slot1@exec-1\""], "to go again, whole");
        assert!(!p.send(&client).await);
        let ad = held(&collector).expect("whole again");
        assert_eq!(activity(&ad), Value::Str("Idle".into()));
        assert_eq!(ad.eval_attr("LoadAvg"), Value::Int(2));
        assert_eq!(ad.eval_attr("JobId"), Value::Str("12.0".into()));
        let s = sizes.lock().unwrap();
        assert_eq!(s.len(), 4);
        assert!(s[3] > s[2] * 4, "the last went whole: {s:?}");
    }

    fn names(v: &[Ad]) -> Vec<String> {
        v.iter().map(name).collect()
    }
}
