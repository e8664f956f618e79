//! The publisher of slot ads to the collector: newest ad per slot, a gap
//! between rounds, retries and a heartbeat.

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

/// With nothing to send for this long, one slot's ad goes anyway (to notice
/// a collector that restarted).
pub const PUBLISH_HEARTBEAT: Duration = Duration::from_secs(10);

/// Sends the slot ads the daemon publishes to the collector at `client`
/// (`POST /v1/collector/update`), newest ad per slot first, until the daemon
/// drops its sender: at once when nothing was sent for [`PUBLISH_GAP`] or the
/// slot became Unclaimed, else coalesced into the next round.
///
/// The pool is whole again within seconds of a collector's return: a send
/// that fails is tried again every [`PUBLISH_RETRY`] (and every slot's newest
/// ad is sent once it succeeds); a collector that answers with a new
/// incarnation (it restarted, and holds none of our ads) gets every slot's
/// newest ad at once; and with nothing to send for [`PUBLISH_HEARTBEAT`],
/// one slot's ad goes anyway, so that a restart is noticed even on a host
/// whose slots do not change.
pub fn spawn_publisher(
    client: andes_protocol::Client,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<crate::remote::PublishedAd>,
) -> tokio::task::JoinHandle<()> {
    fn name(p: &crate::remote::PublishedAd) -> String {
        p.ad.get("Name").map(|e| e.to_string()).unwrap_or_default()
    }
    fn unclaimed(p: &crate::remote::PublishedAd) -> bool {
        matches!(p.ad.eval_attr("State"), Value::Str(s) if &*s == "Unclaimed")
    }
    // Only each slot's newest ad matters.
    fn push(pending: &mut Vec<crate::remote::PublishedAd>, p: crate::remote::PublishedAd) {
        let n = name(&p);
        pending.retain(|a| name(a) != n);
        pending.push(p);
    }
    tokio::spawn(async move {
        let mut failing = false;
        let mut pending: Vec<crate::remote::PublishedAd> = Vec::new();
        // Every slot's newest ad, sent or not.
        let mut latest: std::collections::BTreeMap<String, crate::remote::PublishedAd> =
            std::collections::BTreeMap::new();
        let mut incarnation: Option<String> = None;
        let mut beat = 0usize;
        let mut open = true;
        while open || !pending.is_empty() {
            if pending.is_empty() {
                tokio::select! {
                    p = rx.recv() => match p {
                        Some(p) => push(&mut pending, p),
                        None => return,
                    },
                    _ = tokio::time::sleep(PUBLISH_HEARTBEAT) => {
                        // Nothing to send for a while: one slot's ad, round
                        // robin, to hear the collector's incarnation.
                        if let Some(p) = latest.values().nth(beat % latest.len().max(1)) {
                            pending.push(p.clone());
                        }
                        beat = beat.wrapping_add(1);
                        if pending.is_empty() {
                            continue;
                        }
                    }
                }
            }
            while let Ok(p) = rx.try_recv() {
                push(&mut pending, p);
            }
            for p in &pending {
                latest.insert(name(p), p.clone());
            }
            let round = tokio::time::Instant::now();
            let mut resend_all = false;
            let mut unsent = Vec::new();
            for p in std::mem::take(&mut pending) {
                if failing && !unsent.is_empty() {
                    unsent.push(p);
                    continue;
                }
                let body = pool::CollectorUpdate {
                    kind: "Machine".into(),
                    ad: p.ad.to_string(),
                    private: Some(p.private.to_string()),
                };
                match client.post_json("/v1/collector/update", &body).await {
                    Ok(r) if r.status.is_success() => {
                        if failing {
                            tracing::info!("the collector takes our ads again");
                            resend_all = true;
                        }
                        failing = false;
                        if let Ok(reply) = r.json::<pool::CollectorUpdateReply>()
                            && !reply.incarnation.is_empty()
                        {
                            if incarnation.as_ref().is_some_and(|i| *i != reply.incarnation) {
                                tracing::info!("the collector restarted: sending every slot's ad");
                                resend_all = true;
                            }
                            incarnation = Some(reply.incarnation);
                        }
                    }
                    Ok(r) => {
                        if !failing {
                            tracing::warn!(
                                "the collector refused a slot ad: {}",
                                r.error_reason().unwrap_or_default()
                            );
                        }
                        failing = true;
                        unsent.push(p);
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!("cannot send slot ads to the collector: {e}");
                        }
                        failing = true;
                        unsent.push(p);
                    }
                }
            }
            if resend_all {
                pending = latest.values().cloned().collect();
                continue;
            }
            let gap = if failing {
                pending = unsent;
                PUBLISH_RETRY
            } else {
                PUBLISH_GAP
            };
            // Gather what comes during the gap; a slot becoming Unclaimed
            // goes at once (the negotiator is waiting for it), unless the
            // collector is failing.
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(round + gap) => break,
                    p = rx.recv() => match p {
                        Some(p) => {
                            let now = unclaimed(&p);
                            push(&mut pending, p);
                            if now && !failing {
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
    })
}
