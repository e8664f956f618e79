//! Which connections a daemon keeps: those that proved a trusted key, ahead
//! of those that have not yet.
//!
//! A connection arrives *waiting*: its TLS handshake (or, over loopback plain
//! HTTP, its first signed request) is still to come. It becomes
//! *established* when it proves a key the trust file knows. Waiting
//! connections are cheap to refuse, and so they are kept in a queue of their
//! own with room for [`AdmissionLimits::waiting`]: a new connection that
//! finds it full takes the place of the oldest waiting one, which is closed.
//! A peer with no key can therefore fill the waiting queue, but never keep a
//! connection in it for longer than it takes others to arrive: a client that
//! proves its key within a few milliseconds gets in whatever such a peer
//! does. Established connections have the room of `max_connections`, and
//! one key may hold at most [`AdmissionLimits::per_key`] of them, so one
//! user with a key cannot take them all either.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::task::AbortHandle;

use crate::key::PublicKey;

/// How many connections of each kind a daemon keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionLimits {
    /// Established connections at once.
    pub established: usize,
    /// Connections waiting to prove a key; past it the oldest is closed.
    pub waiting: usize,
    /// Established connections one key may hold.
    pub per_key: usize,
}

impl AdmissionLimits {
    /// The limits for a daemon serving `max_connections` at once: as many
    /// waiting besides (at least 64), and half of them for one key.
    pub fn for_connections(max_connections: usize) -> AdmissionLimits {
        let established = max_connections.max(1);
        AdmissionLimits {
            established,
            waiting: established.max(64),
            per_key: (established / 2).max(1),
        }
    }
}

#[derive(Default)]
struct State {
    next: u64,
    /// Waiting connections, oldest first (ids no longer waiting are skipped).
    queue: VecDeque<u64>,
    waiting: HashMap<u64, Option<AbortHandle>>,
    established: HashMap<u64, Option<PublicKey>>,
    per_key: HashMap<PublicKey, usize>,
}

/// The admission of a server's connections (see the module documentation).
pub struct Admission {
    limits: AdmissionLimits,
    state: Mutex<State>,
}

/// One connection's place; dropping the last clone frees it.
#[derive(Clone)]
pub struct Ticket(Arc<Place>);

struct Place {
    id: u64,
    admission: Arc<Admission>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket").field("id", &self.0.id).finish()
    }
}

impl Admission {
    /// An admission with `limits`.
    pub fn new(limits: AdmissionLimits) -> Arc<Admission> {
        Arc::new(Admission { limits, state: Mutex::new(State::default()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new connection: its ticket (waiting), having closed the oldest
    /// waiting connection if the queue was full.
    pub fn arrive(self: &Arc<Self>) -> Ticket {
        let mut st = self.lock();
        while st.waiting.len() >= self.limits.waiting {
            let Some(old) = st.queue.pop_front() else { break };
            if let Some(handle) = st.waiting.remove(&old) {
                tracing::debug!("closing a connection that proved no key, for a newer one");
                if let Some(h) = handle {
                    h.abort();
                }
            }
        }
        let id = st.next;
        st.next += 1;
        st.queue.push_back(id);
        st.waiting.insert(id, None);
        drop(st);
        Ticket(Arc::new(Place { id, admission: self.clone() }))
    }

    /// Connections now: (waiting, established).
    pub fn counts(&self) -> (usize, usize) {
        let st = self.lock();
        (st.waiting.len(), st.established.len())
    }
}

impl Ticket {
    /// How to close this connection while it waits (its task).
    pub fn set_abort(&self, handle: AbortHandle) {
        let a = &self.0.admission;
        let mut st = a.lock();
        if let Some(slot) = st.waiting.get_mut(&self.0.id) {
            *slot = Some(handle);
        }
    }

    /// The connection proved `key` (over TLS at its handshake; over plain
    /// HTTP with its first signed request): established, unless the
    /// established connections, or this key's, are at their limit (then
    /// false, and the caller closes it). True at once for one already
    /// established.
    pub fn establish(&self, key: Option<PublicKey>) -> bool {
        let a = &self.0.admission;
        let mut st = a.lock();
        if st.established.contains_key(&self.0.id) {
            return true;
        }
        if st.established.len() >= a.limits.established {
            return false;
        }
        if let Some(k) = &key
            && st.per_key.get(k).copied().unwrap_or(0) >= a.limits.per_key
        {
            return false;
        }
        // A waiting connection that was closed meanwhile is not let back.
        if st.waiting.remove(&self.0.id).is_none() {
            return false;
        }
        if let Some(k) = key {
            *st.per_key.entry(k).or_insert(0) += 1;
        }
        st.established.insert(self.0.id, key);
        true
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut st = self.admission.lock();
        st.waiting.remove(&self.id);
        if let Some(Some(k)) = st.established.remove(&self.id)
            && let Some(n) = st.per_key.get_mut(&k)
        {
            *n -= 1;
            if *n == 0 {
                st.per_key.remove(&k);
            }
        }
        // Keep the queue from growing with ids that left while waiting.
        if st.queue.len() > 2 * st.waiting.len() + 16 {
            let State { queue, waiting, .. } = &mut *st;
            queue.retain(|id| waiting.contains_key(id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> PublicKey {
        crate::key::Keypair::from_seed("k", [n; 32]).unwrap().public()
    }

    #[test]
    fn a_new_connection_takes_the_place_of_the_oldest_waiting_one() {
        let a = Admission::new(AdmissionLimits { established: 4, waiting: 3, per_key: 4 });
        let flood: Vec<Ticket> = (0..10).map(|_| a.arrive()).collect();
        assert_eq!(a.counts(), (3, 0), "only the newest three wait");
        // The oldest were pushed out: they cannot be established any more.
        assert!(!flood[0].establish(Some(key(1))));
        // A client arriving now proves its key and is in.
        let good = a.arrive();
        assert!(good.establish(Some(key(1))));
        assert_eq!(a.counts(), (2, 1));
        drop(good);
        assert_eq!(a.counts(), (2, 0));
        drop(flood);
        assert_eq!(a.counts(), (0, 0));
    }

    #[test]
    fn one_key_holds_at_most_its_share() {
        let a = Admission::new(AdmissionLimits { established: 4, waiting: 8, per_key: 2 });
        let mine: Vec<Ticket> = (0..3).map(|_| a.arrive()).collect();
        assert!(mine[0].establish(Some(key(1))));
        assert!(mine[1].establish(Some(key(1))));
        assert!(!mine[2].establish(Some(key(1))), "past the key's share");
        let other = a.arrive();
        assert!(other.establish(Some(key(2))));
        assert!(other.establish(Some(key(2))), "established once, established");
        let more: Vec<Ticket> = (0..2).map(|_| a.arrive()).collect();
        assert!(more[0].establish(Some(key(3))));
        assert!(!more[1].establish(Some(key(3))), "all four established places taken");
        drop(mine);
        assert!(more[1].establish(Some(key(3))));
    }
}
