//! The receiver's checks: known key, time window, signature, replay. Sans-IO: the time
//! comes in as an argument (from a [`Clock`] in the server), so tests use virtual time.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::error::AuthError;
use crate::key::PublicKey;
use crate::replay::{Record, ReplayLog, ReplayLogError};
use crate::sign::{Destination, SignedHeaders, body_digest, check_request_line};
use crate::trust::{Identity, Role, TrustFile};

/// A source of the current time, Unix seconds.
pub trait Clock: Send + Sync {
    /// Now, Unix seconds.
    fn now(&self) -> i64;
    /// Now, Unix milliseconds (for timers that fire on a second's edge).
    fn now_ms(&self) -> i64 {
        self.now().saturating_mul(1000)
    }
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
        }
    }
    fn now_ms(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
        }
    }
}

/// A clock that moves only when told to (tests, simulations).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock showing `now`.
    pub fn new(now: i64) -> Self {
        ManualClock(AtomicI64::new(now))
    }

    /// Sets the time.
    pub fn set(&self, now: i64) {
        self.0.store(now, Ordering::SeqCst);
    }

    /// Moves the time by `secs` (negative goes back).
    pub fn advance(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> i64 {
        (**self).now()
    }
}

/// The verifier's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifierConfig {
    /// How far a request's timestamp may be from the receiver's clock, either way,
    /// seconds (default 300). Nonces are remembered this long past their timestamp.
    pub max_skew: u64,
    /// The most nonces remembered at once (default 524,288, some 60 MB). When full, new
    /// requests get 503 with `Retry-After` until nonces expire: the verifier never
    /// forgets a nonce still inside the window, so a replay is never let through.
    pub nonce_cap: usize,
    /// The most nonces one key may hold once the cache is half full (default a quarter
    /// of `nonce_cap`): past it that key's requests get 429, and no one else's, so one
    /// key cannot fill the cache for everyone. A busy key may use more of a cache that
    /// is less than half full.
    pub per_key_nonces: usize,
    /// Requests per second one key may make on average (default 10,000); past it and
    /// its burst, that key gets 429.
    pub per_key_rate: u32,
    /// Requests one key may make at once above its rate (default 20,000).
    pub per_key_burst: u32,
}

impl Default for VerifierConfig {
    fn default() -> Self {
        VerifierConfig {
            max_skew: 300,
            nonce_cap: 1 << 19,
            per_key_nonces: 1 << 17,
            per_key_rate: 10_000,
            per_key_burst: 20_000,
        }
    }
}

/// Who is calling: the verified key, its identity and role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The identity the trust file gives the key (for `user`, the `Owner`).
    pub identity: String,
    /// The identity's role.
    pub role: Role,
    /// The key that signed the request.
    pub key: PublicKey,
}

impl Caller {
    /// Passes if the caller's role is among `allowed` (`admin` passes wherever `user`
    /// does), else [`AuthError::Forbidden`] (403).
    pub fn require(&self, allowed: &[Role]) -> Result<(), AuthError> {
        if self.role.is_allowed(allowed) {
            Ok(())
        } else {
            Err(AuthError::Forbidden {
                identity: self.identity.clone(),
                role: self.role,
                allowed: allowed.to_vec(),
            })
        }
    }
}

/// A request whose headers passed [`Verifier::check_headers`]; its body is yet to be
/// checked by [`Verifier::finish`].
#[derive(Debug, Clone)]
pub struct Pending {
    headers: SignedHeaders,
    identity: Identity,
}

impl Pending {
    /// The parsed signature headers.
    pub fn headers(&self) -> &SignedHeaders {
        &self.headers
    }

    /// The identity the key belongs to.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }
}

/// A key's token bucket: `tokens` left at second `at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: u64,
    at: i64,
}

/// Nonces seen within the window, each kept until its timestamp + the window, with
/// the signer of each, how many each key holds, each key's request bucket, and the
/// file they are written to.
#[derive(Debug, Default)]
struct NonceCache {
    seen: HashMap<[u8; 16], [u8; 32]>,
    by_expiry: BTreeSet<(i64, [u8; 16])>,
    per_key: HashMap<[u8; 32], usize>,
    buckets: HashMap<[u8; 32], Bucket>,
    /// The latest time the cache has been told; time never goes back inside it, so a
    /// nonce purged by one request is never accepted by a slower one.
    high_water: i64,
    log: Option<ReplayLog>,
}

impl NonceCache {
    fn purge(&mut self, now: i64) {
        while let Some(&(expiry, id)) = self.by_expiry.first() {
            if expiry >= now {
                break;
            }
            self.by_expiry.pop_first();
            if let Some(key) = self.seen.remove(&id)
                && let Some(n) = self.per_key.get_mut(&key)
            {
                *n -= 1;
                if *n == 0 {
                    self.per_key.remove(&key);
                }
            }
        }
    }

    fn insert(&mut self, r: Record) {
        if self.seen.insert(r.id, r.key).is_none() {
            self.by_expiry.insert((r.expiry, r.id));
            *self.per_key.entry(r.key).or_default() += 1;
        }
    }

    fn live(&self) -> Vec<Record> {
        self.by_expiry
            .iter()
            .filter_map(|&(expiry, id)| self.seen.get(&id).map(|&key| Record { key, id, expiry }))
            .collect()
    }
}

/// Checks signed requests against a trust file: known key, timestamp within the
/// window, valid signature, unused nonce. Shared between connections (`&self`).
#[derive(Debug)]
pub struct Verifier {
    trust: RwLock<Arc<TrustFile>>,
    config: VerifierConfig,
    nonces: Mutex<NonceCache>,
}

impl Verifier {
    /// A verifier trusting the keys of `trust`, remembering nonces in memory only.
    pub fn new(trust: TrustFile, config: VerifierConfig) -> Self {
        Verifier {
            trust: RwLock::new(Arc::new(trust)),
            config,
            nonces: Mutex::new(NonceCache { high_water: i64::MIN, ..NonceCache::default() }),
        }
    }

    /// A verifier whose nonces are also written to the replay-cache file at `path`
    /// ([`crate::replay`]), and which starts with the nonces that file holds that are
    /// still inside the window at `now`: a request accepted before a restart (even
    /// after `kill -9`) is still refused as a replay after it.
    pub fn with_replay_file(
        trust: TrustFile,
        config: VerifierConfig,
        path: &Path,
        now: i64,
    ) -> Result<Self, ReplayLogError> {
        let (log, live) = ReplayLog::open(path, now)?;
        let v = Verifier::new(trust, config);
        {
            let mut cache = v.nonces.lock().unwrap_or_else(PoisonError::into_inner);
            for r in live {
                cache.insert(r);
            }
            cache.log = Some(log);
        }
        Ok(v)
    }

    /// Replaces the trust file (for a reconfiguration); requests already past
    /// [`Verifier::check_headers`] keep the identity they were given.
    pub fn set_trust(&self, trust: TrustFile) {
        *self.trust.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(trust);
    }

    /// The trust file in force.
    pub fn trust(&self) -> Arc<TrustFile> {
        self.trust.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The settings.
    pub fn config(&self) -> VerifierConfig {
        self.config
    }

    /// How many nonces are remembered now.
    pub fn nonces_held(&self) -> usize {
        self.nonces.lock().unwrap_or_else(PoisonError::into_inner).seen.len()
    }

    /// The replay-cache file, if nonces are written to one.
    pub fn replay_file(&self) -> Option<std::path::PathBuf> {
        let cache = self.nonces.lock().unwrap_or_else(PoisonError::into_inner);
        cache.log.as_ref().map(|l| l.path().to_path_buf())
    }

    /// First stage, before the body is read: the headers parse, the key is trusted
    /// and the timestamp is inside the window. Cheap, so that an unsigned or stale
    /// request is refused before its body is read.
    pub fn check_headers(&self, headers: &HeaderMap, now: i64) -> Result<Pending, AuthError> {
        let headers = SignedHeaders::from_headers(headers)?;
        let identity = self
            .trust()
            .lookup(&headers.key)
            .cloned()
            .ok_or_else(|| AuthError::UnknownKey { key: headers.key.to_base64() })?;
        self.check_time(headers.timestamp, now)?;
        Ok(Pending { headers, identity })
    }

    fn check_time(&self, timestamp: i64, now: i64) -> Result<(), AuthError> {
        if timestamp.abs_diff(now) > self.config.max_skew {
            return Err(AuthError::Skewed { timestamp, now, max_skew: self.config.max_skew });
        }
        Ok(())
    }

    /// Second stage, with the body: the request was signed for `this` (the daemon
    /// checking it, see [`Destination`]), the signature covers this method, path (with
    /// query) and body, the nonce is new and the key is within its limits. On success
    /// the nonce is remembered (and written to the replay-cache file, if any) until its
    /// timestamp + `max_skew`.
    pub fn finish(
        &self,
        pending: Pending,
        method: &str,
        path_and_query: &str,
        body: &[u8],
        this: &Destination,
        now: i64,
    ) -> Result<Caller, AuthError> {
        self.finish_digest(pending, method, path_and_query, &body_digest(body), this, now)
    }

    /// [`Verifier::finish`] for a body known by its SHA-256 (a streamed body, which
    /// the receiver checks against the digest as it arrives).
    pub fn finish_digest(
        &self,
        pending: Pending,
        method: &str,
        path_and_query: &str,
        body_sha256: &[u8; 32],
        this: &Destination,
        now: i64,
    ) -> Result<Caller, AuthError> {
        let Pending { headers, identity } = pending;
        check_request_line(method, path_and_query)?;
        if &headers.destination != this {
            return Err(AuthError::WrongDestination {
                signed_for: headers.destination.to_string(),
                this: this.to_string(),
            });
        }
        if !headers.signature_matches_digest(method, path_and_query, body_sha256) {
            return Err(AuthError::BadSignature { identity: identity.name });
        }
        let id: [u8; 16] = {
            let mut h = Sha256::new();
            h.update(headers.key.as_bytes());
            h.update(&headers.nonce);
            let d = h.finalize();
            let mut id = [0u8; 16];
            id.copy_from_slice(&d[..16]);
            id
        };
        let mut cache = self.nonces.lock().unwrap_or_else(PoisonError::into_inner);
        let now = self.cache_now(&mut cache, now);
        // Checked again under the lock: the body may have taken a while.
        self.check_time(headers.timestamp, now)?;
        cache.purge(now);
        if cache.seen.contains_key(&id) {
            return Err(AuthError::Replayed { window: self.config.max_skew });
        }
        let oldest = cache.by_expiry.first().map_or(now, |&(e, _)| e);
        let until_oldest = oldest.saturating_sub(now).unsigned_abs().saturating_add(1);
        if cache.seen.len() >= self.config.nonce_cap {
            return Err(AuthError::ReplayCacheFull {
                held: cache.seen.len(),
                retry_after: until_oldest,
            });
        }
        let key = *headers.key.as_bytes();
        let held = cache.per_key.get(&key).copied().unwrap_or(0);
        if held >= self.config.per_key_nonces && cache.seen.len() >= self.config.nonce_cap / 2 {
            return Err(AuthError::TooManyRequests {
                identity: identity.name,
                why: format!(
                    "it holds {held} nonces of the replay cache, its share (each is kept {} s)",
                    self.config.max_skew
                ),
                retry_after: until_oldest,
            });
        }
        let identity = self.take_token(&mut cache, key, identity, now)?;
        let record = Record {
            key,
            id,
            expiry: headers.timestamp.saturating_add_unsigned(self.config.max_skew),
        };
        if let Some(log) = cache.log.as_mut() {
            // Kept only as long as the file has it: a nonce the file lost could be
            // replayed after a restart.
            log.append(&record).map_err(|e| AuthError::ReplayCacheWrite(e.to_string()))?;
        }
        cache.insert(record);
        let rewrite =
            cache.log.as_ref().is_some_and(|log| log.records() > 2 * cache.seen.len() + 4096);
        if rewrite {
            let live = cache.live();
            if let Some(log) = cache.log.as_mut()
                && let Err(e) = log.rewrite(&live)
            {
                tracing::warn!("{e} (the file keeps growing until a rewrite succeeds)");
            }
        }
        Ok(Caller { identity: identity.name, role: identity.role, key: headers.key })
    }

    /// The time the cache goes by, from the clock's `now`: never back (a nonce purged
    /// by one request is never accepted by a slower one), except that a clock stepped
    /// back by more than half the window is followed (requests signed by the stepped
    /// clock would be refused otherwise); smaller differences are concurrent requests
    /// reading the clock at slightly different moments.
    fn cache_now(&self, cache: &mut NonceCache, now: i64) -> i64 {
        if now < cache.high_water.saturating_sub_unsigned(self.config.max_skew / 2) {
            cache.high_water = now;
        }
        cache.high_water = now.max(cache.high_water);
        cache.high_water
    }

    /// Takes one request of `key`'s rate (its token bucket), or refuses it with 429.
    fn take_token(
        &self,
        cache: &mut NonceCache,
        key: [u8; 32],
        identity: Identity,
        now: i64,
    ) -> Result<Identity, AuthError> {
        let (rate, burst) =
            (u64::from(self.config.per_key_rate), u64::from(self.config.per_key_burst));
        let bucket = cache.buckets.entry(key).or_insert(Bucket { tokens: burst, at: now });
        let elapsed = now.saturating_sub(bucket.at).max(0).unsigned_abs();
        bucket.tokens = bucket.tokens.saturating_add(elapsed.saturating_mul(rate)).min(burst);
        // `now` is the cache's time, which goes back only when the clock was
        // stepped back (see `cache_now`): the bucket follows it, or it would
        // refill nothing until the clock came back to where it was.
        bucket.at = now;
        if bucket.tokens == 0 {
            return Err(AuthError::TooManyRequests {
                identity: identity.name,
                why: format!("more than {rate} requests a second (burst {burst})"),
                retry_after: 1,
            });
        }
        bucket.tokens -= 1;
        Ok(identity)
    }

    /// The caller of an unsigned request on a TLS connection whose handshake proved
    /// `key` (the connection is the request's authentication, see [`crate::sign`]):
    /// the key must be in the trust file in force now (a key removed from it is
    /// refused on the connections it already holds) and within its rate. No nonce is
    /// kept: TLS refuses a replayed or altered record, and no one else can speak on
    /// the connection.
    pub fn connection_caller(&self, key: &PublicKey, now: i64) -> Result<Caller, AuthError> {
        let identity = self
            .trust()
            .lookup(key)
            .cloned()
            .ok_or_else(|| AuthError::UnknownKey { key: key.to_base64() })?;
        let mut cache = self.nonces.lock().unwrap_or_else(PoisonError::into_inner);
        let now = self.cache_now(&mut cache, now);
        let identity = self.take_token(&mut cache, *key.as_bytes(), identity, now)?;
        Ok(Caller { identity: identity.name, role: identity.role, key: *key })
    }

    /// Both stages at once, for a request whose body is already in memory.
    pub fn verify(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &HeaderMap,
        body: &[u8],
        this: &Destination,
        now: i64,
    ) -> Result<Caller, AuthError> {
        let pending = self.check_headers(headers, now)?;
        self.finish(pending, method, path_and_query, body, this, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Keypair;

    const T0: i64 = 1_700_000_000;

    fn here() -> Destination {
        Destination::Addr("127.0.0.1:9618".into())
    }

    fn setup(cap: usize) -> (Verifier, Keypair, Keypair) {
        let alice = Keypair::from_seed("alice", [1; 32]).unwrap();
        let stranger = Keypair::from_seed("eve", [2; 32]).unwrap();
        let trust =
            TrustFile::parse(&format!("user alice ed25519 {}", alice.public()), "t").unwrap();
        let config = VerifierConfig { max_skew: 300, nonce_cap: cap, ..VerifierConfig::default() };
        (Verifier::new(trust, config), alice, stranger)
    }

    fn signed(kp: &Keypair, ts: i64, nonce: u8, body: &[u8]) -> HeaderMap {
        let mut m = HeaderMap::new();
        let mut n = vec![0u8; 16];
        n[0] = nonce;
        SignedHeaders::sign_with_nonce(kp, &here(), "POST", "/jobs", body, ts, n).apply(&mut m);
        m
    }

    #[test]
    fn accepts_a_good_request() {
        let (v, alice, _) = setup(10);
        let c =
            v.verify("POST", "/jobs", &signed(&alice, T0, 1, b"{}"), b"{}", &here(), T0).unwrap();
        assert_eq!(c, Caller { identity: "alice".into(), role: Role::User, key: alice.public() });
        assert_eq!(v.nonces_held(), 1);
    }

    #[test]
    fn skew_both_ways() {
        let (v, alice, _) = setup(10);
        for (ts, ok) in [(T0 - 300, true), (T0 + 300, true), (T0 - 301, false), (T0 + 301, false)] {
            let r = v.verify(
                "POST",
                "/jobs",
                &signed(&alice, ts, (ts - T0) as u8, b""),
                b"",
                &here(),
                T0,
            );
            match (ok, r) {
                (true, Ok(_)) => {}
                (false, Err(AuthError::Skewed { timestamp, now: T0, max_skew: 300 })) => {
                    assert_eq!(timestamp, ts)
                }
                (_, r) => panic!("ts {ts}: {r:?}"),
            }
        }
        let e = v
            .verify("POST", "/jobs", &signed(&alice, T0 - 400, 9, b""), b"", &here(), T0)
            .unwrap_err();
        assert!(e.to_string().contains("400 s behind the server's clock"), "{e}");
        let e = v
            .verify("POST", "/jobs", &signed(&alice, T0 + 400, 9, b""), b"", &here(), T0)
            .unwrap_err();
        assert!(e.to_string().contains("400 s ahead of the server's clock"), "{e}");
        // Extreme timestamps do not overflow.
        let e =
            v.verify("POST", "/jobs", &signed(&alice, i64::MIN, 9, b""), b"", &here(), i64::MAX);
        assert!(matches!(e, Err(AuthError::Skewed { .. })));
    }

    #[test]
    fn unknown_key_and_bad_signature() {
        let (v, alice, eve) = setup(10);
        let e = v.verify("POST", "/jobs", &signed(&eve, T0, 1, b""), b"", &here(), T0).unwrap_err();
        assert_eq!(e, AuthError::UnknownKey { key: eve.public().to_base64() });
        let h = signed(&alice, T0, 1, b"{}");
        let e = v.verify("POST", "/jobs", &h, b"{\"x\":1}", &here(), T0).unwrap_err();
        assert_eq!(e, AuthError::BadSignature { identity: "alice".into() });
        let e = v.verify("POST", "/jobs/1", &h, b"{}", &here(), T0).unwrap_err();
        assert!(matches!(e, AuthError::BadSignature { .. }));
        let e = v.verify("PUT", "/jobs", &h, b"{}", &here(), T0).unwrap_err();
        assert!(matches!(e, AuthError::BadSignature { .. }));
        // Rejected requests leave no nonce behind, so the genuine one still passes.
        assert_eq!(v.nonces_held(), 0);
        v.verify("POST", "/jobs", &h, b"{}", &here(), T0).unwrap();
    }

    #[test]
    fn replay_is_refused_until_the_window_passes_and_memory_goes() {
        let (v, alice, _) = setup(10);
        let h = signed(&alice, T0, 1, b"");
        v.verify("POST", "/jobs", &h, b"", &here(), T0).unwrap();
        for later in [0, 1, 299, 300] {
            let e = v.verify("POST", "/jobs", &h, b"", &here(), T0 + later).unwrap_err();
            assert_eq!(e, AuthError::Replayed { window: 300 }, "at +{later}");
        }
        // Past the window the timestamp itself is refused...
        let e = v.verify("POST", "/jobs", &h, b"", &here(), T0 + 301).unwrap_err();
        assert!(matches!(e, AuthError::Skewed { .. }));
        // ... and the nonce is dropped at the next request.
        assert_eq!(v.nonces_held(), 1);
        v.verify("POST", "/jobs", &signed(&alice, T0 + 301, 2, b""), b"", &here(), T0 + 301)
            .unwrap();
        assert_eq!(v.nonces_held(), 1);
    }

    #[test]
    fn a_request_from_the_future_is_remembered_long_enough() {
        let (v, alice, _) = setup(10);
        let h = signed(&alice, T0 + 300, 1, b"");
        v.verify("POST", "/jobs", &h, b"", &here(), T0).unwrap();
        // Still acceptable by time at T0 + 600, so still refused as a replay.
        let e = v.verify("POST", "/jobs", &h, b"", &here(), T0 + 600).unwrap_err();
        assert_eq!(e, AuthError::Replayed { window: 300 });
    }

    #[test]
    fn clock_going_back_cannot_resurrect_a_purged_nonce() {
        let (v, alice, _) = setup(10);
        let h = signed(&alice, T0, 1, b"");
        let pending = v.check_headers(&h, T0 + 300).unwrap();
        v.verify("POST", "/jobs", &h, b"", &here(), T0).unwrap();
        // Another request at T0 + 301 purges the nonce.
        v.verify("POST", "/jobs", &signed(&alice, T0 + 301, 2, b""), b"", &here(), T0 + 301)
            .unwrap();
        // The slow replay whose headers passed at T0 + 300 is refused at finish.
        let e = v.finish(pending, "POST", "/jobs", b"", &here(), T0 + 300).unwrap_err();
        assert!(matches!(e, AuthError::Skewed { now, .. } if now == T0 + 301), "{e:?}");
    }

    #[test]
    fn a_clock_stepped_back_is_followed() {
        let (v, alice, _) = setup(10);
        v.verify("POST", "/jobs", &signed(&alice, T0 + 3600, 1, b""), b"", &here(), T0 + 3600)
            .unwrap();
        // The clock is stepped back an hour: fresh requests are accepted at once.
        v.verify("POST", "/jobs", &signed(&alice, T0, 2, b""), b"", &here(), T0).unwrap();
        // The first request is still remembered.
        let e =
            v.verify("POST", "/jobs", &signed(&alice, T0 + 3600, 1, b""), b"", &here(), T0 + 3600);
        assert_eq!(e, Err(AuthError::Replayed { window: 300 }));
    }

    #[test]
    fn cap_gives_503_then_recovers_as_nonces_expire() {
        let (v, alice, _) = setup(3);
        for i in 0..3u8 {
            v.verify("POST", "/jobs", &signed(&alice, T0 + i64::from(i), i, b""), b"", &here(), T0)
                .unwrap();
        }
        let e = v
            .verify("POST", "/jobs", &signed(&alice, T0, 9, b""), b"", &here(), T0 + 10)
            .unwrap_err();
        assert_eq!(e, AuthError::ReplayCacheFull { held: 3, retry_after: 291 });
        assert_eq!(e.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(v.nonces_held(), 3);
        // When the oldest expires, one more fits.
        v.verify("POST", "/jobs", &signed(&alice, T0 + 301, 9, b""), b"", &here(), T0 + 301)
            .unwrap();
        assert_eq!(v.nonces_held(), 3);
        let e =
            v.verify("POST", "/jobs", &signed(&alice, T0 + 301, 10, b""), b"", &here(), T0 + 301);
        assert!(matches!(e, Err(AuthError::ReplayCacheFull { held: 3, retry_after: 1 })));
        v.verify("POST", "/jobs", &signed(&alice, T0 + 303, 10, b""), b"", &here(), T0 + 303)
            .unwrap();
        // The first three expired; nonces 9 and 10 remain.
        assert_eq!(v.nonces_held(), 2);
    }

    #[test]
    fn a_request_for_another_daemon_is_refused() {
        let (v, alice, _) = setup(10);
        let h = signed(&alice, T0, 1, b"");
        let other = Destination::Addr("127.0.0.1:9619".into());
        let e = v.verify("POST", "/jobs", &h, b"", &other, T0).unwrap_err();
        assert_eq!(
            e,
            AuthError::WrongDestination {
                signed_for: "addr 127.0.0.1:9618".into(),
                this: "addr 127.0.0.1:9619".into()
            }
        );
        assert_eq!(v.nonces_held(), 0);
    }

    fn two_users(config: VerifierConfig) -> (Verifier, Keypair, Keypair) {
        let alice = Keypair::from_seed("alice", [1; 32]).unwrap();
        let bob = Keypair::from_seed("bob", [3; 32]).unwrap();
        let trust = TrustFile::parse(
            &format!("user alice ed25519 {}\nuser bob ed25519 {}", alice.public(), bob.public()),
            "t",
        )
        .unwrap();
        (Verifier::new(trust, config), alice, bob)
    }

    #[test]
    fn one_key_over_its_nonce_share_gets_429_alone() {
        let config =
            VerifierConfig { per_key_nonces: 3, nonce_cap: 8, ..VerifierConfig::default() };
        let (v, alice, bob) = two_users(config);
        // While the cache is less than half full a busy key may hold more.
        for n in 0..4 {
            v.verify("POST", "/jobs", &signed(&alice, T0, n, b""), b"", &here(), T0).unwrap();
        }
        let e = v.verify("POST", "/jobs", &signed(&alice, T0, 9, b""), b"", &here(), T0 + 5);
        let e = e.unwrap_err();
        assert_eq!(e.status(), http::StatusCode::TOO_MANY_REQUESTS);
        assert!(e.to_string().contains("too many requests from alice"), "{e}");
        assert!(matches!(e, AuthError::TooManyRequests { retry_after: 296, .. }), "{e:?}");
        v.verify("POST", "/jobs", &signed(&bob, T0, 1, b""), b"", &here(), T0 + 5).unwrap();
        // Alice's nonces expire, and she is served again.
        v.verify("POST", "/jobs", &signed(&alice, T0 + 301, 9, b""), b"", &here(), T0 + 301)
            .unwrap();
    }

    #[test]
    fn a_key_past_its_rate_waits_for_the_next_second() {
        let config =
            VerifierConfig { per_key_rate: 2, per_key_burst: 3, ..VerifierConfig::default() };
        let (v, alice, bob) = two_users(config);
        for n in 0..3 {
            v.verify("POST", "/jobs", &signed(&alice, T0, n, b""), b"", &here(), T0).unwrap();
        }
        let e = v.verify("POST", "/jobs", &signed(&alice, T0, 3, b""), b"", &here(), T0);
        assert!(matches!(e, Err(AuthError::TooManyRequests { retry_after: 1, .. })), "{e:?}");
        v.verify("POST", "/jobs", &signed(&bob, T0, 1, b""), b"", &here(), T0).unwrap();
        // One second refills two requests.
        for n in 4..6 {
            v.verify("POST", "/jobs", &signed(&alice, T0 + 1, n, b""), b"", &here(), T0 + 1)
                .unwrap();
        }
        let e = v.verify("POST", "/jobs", &signed(&alice, T0 + 1, 6, b""), b"", &here(), T0 + 1);
        assert!(matches!(e, Err(AuthError::TooManyRequests { .. })), "{e:?}");
    }

    #[test]
    fn a_key_keeps_its_rate_after_the_clock_is_stepped_back() {
        let config =
            VerifierConfig { per_key_rate: 2, per_key_burst: 3, ..VerifierConfig::default() };
        let (v, alice, _) = two_users(config);
        let key = alice.public();
        let later = T0 + 3600;
        for _ in 0..3 {
            v.connection_caller(&key, later).unwrap();
        }
        let e = v.connection_caller(&key, later);
        assert!(matches!(e, Err(AuthError::TooManyRequests { .. })), "{e:?}");
        // The clock is stepped back an hour: a second later the bucket has
        // refilled a second's worth, as it would have without the step.
        let e = v.connection_caller(&key, T0);
        assert!(matches!(e, Err(AuthError::TooManyRequests { .. })), "{e:?}");
        for _ in 0..2 {
            v.connection_caller(&key, T0 + 1).unwrap();
        }
        let e = v.connection_caller(&key, T0 + 1);
        assert!(matches!(e, Err(AuthError::TooManyRequests { .. })), "{e:?}");
    }

    #[test]
    fn nonces_survive_a_restart_through_the_replay_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replay");
        let alice = Keypair::from_seed("alice", [1; 32]).unwrap();
        let trust =
            || TrustFile::parse(&format!("user alice ed25519 {}", alice.public()), "t").unwrap();
        let h = signed(&alice, T0, 1, b"");
        let v = Verifier::with_replay_file(trust(), VerifierConfig::default(), &path, T0).unwrap();
        v.verify("POST", "/jobs", &h, b"", &here(), T0).unwrap();
        drop(v);
        let v =
            Verifier::with_replay_file(trust(), VerifierConfig::default(), &path, T0 + 10).unwrap();
        assert_eq!(v.nonces_held(), 1);
        let e = v.verify("POST", "/jobs", &h, b"", &here(), T0 + 10);
        assert_eq!(e, Err(AuthError::Replayed { window: 300 }));
        drop(v);
        // Past the window the file forgets it, as the timestamp is refused anyway.
        let v = Verifier::with_replay_file(trust(), VerifierConfig::default(), &path, T0 + 301)
            .unwrap();
        assert_eq!(v.nonces_held(), 0);
    }

    #[test]
    fn trust_can_be_replaced() {
        let (v, alice, eve) = setup(10);
        v.set_trust(TrustFile::parse(&format!("admin eve ed25519 {}", eve.public()), "t").unwrap());
        let c = v.verify("POST", "/jobs", &signed(&eve, T0, 1, b""), b"", &here(), T0).unwrap();
        assert_eq!((c.identity.as_str(), c.role), ("eve", Role::Admin));
        assert!(matches!(
            v.verify("POST", "/jobs", &signed(&alice, T0, 2, b""), b"", &here(), T0),
            Err(AuthError::UnknownKey { .. })
        ));
    }

    #[test]
    fn require_roles() {
        let c = |role| Caller {
            identity: "x".into(),
            role,
            key: Keypair::from_seed("k", [1; 32]).unwrap().public(),
        };
        assert!(c(Role::Admin).require(&[Role::User]).is_ok());
        let e = c(Role::User).require(&[Role::Schedd, Role::Host]).unwrap_err();
        assert_eq!(e.status(), http::StatusCode::FORBIDDEN);
        assert_eq!(
            e.to_string(),
            "x (role user) may not use this route; it needs role schedd or host"
        );
    }
}
