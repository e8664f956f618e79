//! The collector's store (condor_collector): the ads daemons publish about themselves
//! (machines, schedds, submitters, negotiators), each kept until its publisher
//! invalidates it or stops refreshing it.
//!
//! Pure: no I/O and no clock reads; every call that depends on time takes `now`
//! (Unix seconds). The HTTP routes are in [`api`].
//!
//! ```
//! use andes_central::collector::{AdType, Collector, DEFAULT_CLASSAD_LIFETIME};
//!
//! let mut c = Collector::new(DEFAULT_CLASSAD_LIFETIME);
//! let ad = classad::parse_ad(r#"[Name = "slot1@exec-1"; State = "Unclaimed"]"#).unwrap();
//! c.update(AdType::Machine, ad, None, "exec-1", 1000).unwrap();
//! let found = c.query(Some(AdType::Machine), None, &[], 1000);
//! assert_eq!(found.len(), 1);
//! assert_eq!(found[0].eval_attr(classad::name!("LastHeardFrom")), classad::Value::Int(1000));
//! // Silent for longer than CLASSAD_LIFETIME: gone.
//! assert!(c.query(None, None, &[], 1000 + DEFAULT_CLASSAD_LIFETIME + 1).is_empty());
//! ```

pub mod api;

use std::collections::BTreeMap;
use std::fmt;

use std::sync::Arc;

use classad::{ClassAd, EvalOptions, Evaluator, Expr, Value};

/// HTCondor's default CLASSAD_LIFETIME: an ad not refreshed for this many seconds is
/// dropped.
pub const DEFAULT_CLASSAD_LIFETIME: i64 = 900;

/// The kinds of ad the collector keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AdType {
    /// A slot of an execute host (condor_startd), MyType `Machine`.
    Machine,
    /// A schedd, MyType `Scheduler`.
    Schedd,
    /// One user's demand at one schedd, MyType `Submitter`.
    Submitter,
    /// A negotiator, MyType `Negotiator`.
    Negotiator,
}

impl AdType {
    /// Every kind, in display order.
    pub const ALL: [AdType; 4] =
        [AdType::Machine, AdType::Schedd, AdType::Submitter, AdType::Negotiator];

    /// HTCondor's `MyType` for ads of this kind.
    pub fn my_type(self) -> &'static str {
        match self {
            AdType::Machine => "Machine",
            AdType::Schedd => "Scheduler",
            AdType::Submitter => "Submitter",
            AdType::Negotiator => "Negotiator",
        }
    }

    /// The kind whose `MyType` is `word`, case-insensitively.
    pub fn parse(word: &str) -> Option<AdType> {
        AdType::ALL.into_iter().find(|t| t.my_type().eq_ignore_ascii_case(word))
    }

    /// condor_status's option selecting this kind (`-startd`, `-schedd`,
    /// `-submitters`, `-negotiator`).
    pub fn status_option(self) -> &'static str {
        match self {
            AdType::Machine => "-startd",
            AdType::Schedd => "-schedd",
            AdType::Submitter => "-submitters",
            AdType::Negotiator => "-negotiator",
        }
    }

    /// The kind condor_status's option selects (with or without its dash).
    pub fn from_status_option(option: &str) -> Option<AdType> {
        let word = option.trim_start_matches('-');
        AdType::ALL.into_iter().find(|t| t.status_option()[1..].eq_ignore_ascii_case(word))
    }
}

impl fmt::Display for AdType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.my_type())
    }
}

impl std::str::FromStr for AdType {
    type Err = CollectorError;
    fn from_str(s: &str) -> Result<Self, CollectorError> {
        AdType::parse(s).ok_or_else(|| CollectorError::UnknownType(s.to_string()))
    }
}

/// Why the collector refused a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CollectorError {
    /// The word is not an ad type.
    UnknownType(String),
    /// The ad has no string `Name`.
    NoName {
        /// The ad's kind.
        kind: AdType,
    },
    /// A delta whose base the collector does not hold (it restarted, or
    /// the ad expired, or another ad replaced it): its publisher sends the
    /// ad whole.
    StaleBase {
        /// The ad's kind.
        kind: AdType,
        /// Its `Name`.
        name: String,
        /// The serial the delta was taken from.
        base: u64,
    },
    /// Another identity published this ad and it has not expired.
    Forbidden {
        /// The ad's kind.
        kind: AdType,
        /// Its `Name`.
        name: String,
        /// Who published it.
        owner: String,
        /// Who tried to change it.
        identity: String,
    },
}

impl fmt::Display for CollectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectorError::UnknownType(w) => write!(
                f,
                "unknown ad type `{w}` (expected Machine, Scheduler, Submitter or Negotiator)"
            ),
            CollectorError::NoName { kind } => {
                write!(f, "the {kind} ad has no Name (a string attribute is required)")
            }
            CollectorError::StaleBase { kind, name, base } => write!(
                f,
                "a delta of the {kind} ad `{name}` from its ad {base}, which the collector \
                 does not hold: send it whole"
            ),
            CollectorError::Forbidden { kind, name, owner, identity } => write!(
                f,
                "{identity} may not change the {kind} ad `{name}`: it was published by {owner}"
            ),
        }
    }
}

impl std::error::Error for CollectorError {}

#[derive(Debug, Clone)]
struct Entry {
    ad: Arc<ClassAd>,
    private: Option<ClassAd>,
    identity: String,
    last_heard: i64,
    lifetime: i64,
    /// The publisher's number for this ad, the base of its next delta.
    serial: Option<u64>,
}

impl Entry {
    fn expired(&self, now: i64) -> bool {
        self.last_heard.saturating_add(self.lifetime) < now
    }

    fn name(&self) -> String {
        match self.ad.eval_attr(classad::name!("Name")) {
            Value::Str(s) => s.to_string(),
            _ => String::new(),
        }
    }
}

/// Stamps an ad the collector keeps, whole or resolved from a delta, with
/// `MyType`, `LastHeardFrom` and `AuthenticatedIdentity`; returns its
/// lifetime (its own `ClassAdLifetime`, else `default_lifetime`).
fn stamp(ad: &mut ClassAd, kind: AdType, identity: &str, now: i64, default_lifetime: i64) -> i64 {
    ad.insert_value(classad::name!("MyType"), kind.my_type());
    ad.insert_value(classad::name!("LastHeardFrom"), now);
    ad.insert_value(classad::name!("AuthenticatedIdentity"), identity);
    match ad.eval_attr(classad::name!("ClassAdLifetime")) {
        Value::Int(i) => i.max(0),
        _ => default_lifetime,
    }
}

/// The collector's ads, keyed by kind and `Name` (case-insensitively, as ClassAd
/// strings compare).
#[derive(Debug, Clone)]
pub struct Collector {
    ads: BTreeMap<(AdType, String), Entry>,
    default_lifetime: i64,
    generation: u64,
}

impl Default for Collector {
    fn default() -> Self {
        Collector::new(DEFAULT_CLASSAD_LIFETIME)
    }
}

fn key(kind: AdType, name: &str) -> (AdType, String) {
    (kind, name.to_lowercase())
}

impl Collector {
    /// An empty collector whose ads live `classad_lifetime` seconds (CLASSAD_LIFETIME)
    /// unless they carry their own `ClassAdLifetime`.
    pub fn new(classad_lifetime: i64) -> Collector {
        Collector { ads: BTreeMap::new(), default_lifetime: classad_lifetime.max(0), generation: 0 }
    }

    /// CLASSAD_LIFETIME, seconds.
    pub fn classad_lifetime(&self) -> i64 {
        self.default_lifetime
    }

    /// Stores (or replaces) an ad published by `identity` at `now`, and its private ad
    /// (kept apart: never returned by [`Collector::query`]). Sets `LastHeardFrom`,
    /// `MyType` and `AuthenticatedIdentity`. Returns the ad's lifetime in seconds.
    ///
    /// Refused when the ad has no string `Name`, or when another identity published
    /// the same ad and it has not expired.
    pub fn update(
        &mut self,
        kind: AdType,
        ad: ClassAd,
        private: Option<ClassAd>,
        identity: &str,
        now: i64,
    ) -> Result<i64, CollectorError> {
        self.update_numbered(kind, ad, private, identity, now, None)
    }

    /// Applies a delta to the ad it was taken from, in place: `delta`'s
    /// attributes (it holds the `Name`) bound over the ad of the
    /// publisher's serial `base`, those named in `unset` removed, and
    /// `private` in place of the held private ad when given; the ad is then
    /// numbered `serial` and stamped as [`Collector::update`] stamps one.
    /// Returns its lifetime and the ad as it now is. Refused as
    /// [`CollectorError::StaleBase`] when the collector holds no live ad of
    /// that name, serial and publisher (nothing changes).
    #[allow(clippy::too_many_arguments, reason = "the parts of one update")]
    pub fn apply_delta(
        &mut self,
        kind: AdType,
        delta: &ClassAd,
        unset: &[String],
        private: Option<ClassAd>,
        base: u64,
        serial: Option<u64>,
        identity: &str,
        now: i64,
    ) -> Result<(i64, Arc<ClassAd>), CollectorError> {
        let name = match delta.eval_attr(classad::name!("Name")) {
            Value::Str(s) if !s.is_empty() => s.to_string(),
            _ => return Err(CollectorError::NoName { kind }),
        };
        if unset.iter().any(|u| u.eq_ignore_ascii_case("Name")) {
            return Err(CollectorError::NoName { kind });
        }
        let default_lifetime = self.default_lifetime;
        let e = match self.ads.get_mut(&key(kind, &name)) {
            Some(e) if e.serial == Some(base) && e.identity == identity && !e.expired(now) => e,
            _ => return Err(CollectorError::StaleBase { kind, name, base }),
        };
        // In place unless a query or a cycle holds the ad this moment.
        let ad = Arc::make_mut(&mut e.ad);
        ad.update(delta);
        ad.remove_all(unset);
        e.lifetime = stamp(ad, kind, identity, now, default_lifetime);
        if private.is_some() {
            e.private = private;
        }
        e.last_heard = now;
        e.serial = serial;
        let out = (e.lifetime, e.ad.clone());
        self.generation += 1;
        Ok(out)
    }

    /// [`Collector::update`], the ad numbered `serial` by its publisher (the
    /// base its next delta names, see [`Collector::apply_delta`]).
    pub fn update_numbered(
        &mut self,
        kind: AdType,
        mut ad: ClassAd,
        private: Option<ClassAd>,
        identity: &str,
        now: i64,
        serial: Option<u64>,
    ) -> Result<i64, CollectorError> {
        let name = match ad.eval_attr(classad::name!("Name")) {
            Value::Str(s) if !s.is_empty() => s.to_string(),
            _ => return Err(CollectorError::NoName { kind }),
        };
        let k = key(kind, &name);
        if let Some(old) = self.ads.get(&k)
            && old.identity != identity
            && !old.expired(now)
        {
            return Err(CollectorError::Forbidden {
                kind,
                name,
                owner: old.identity.clone(),
                identity: identity.to_string(),
            });
        }
        let lifetime = stamp(&mut ad, kind, identity, now, self.default_lifetime);
        self.ads.insert(
            k,
            Entry {
                ad: Arc::new(ad),
                private,
                identity: identity.to_string(),
                last_heard: now,
                lifetime,
                serial,
            },
        );
        self.generation += 1;
        Ok(lifetime)
    }

    /// Removes the ad `name` of `kind` if `identity` published it (or it has expired:
    /// anyone may clear an expired ad). Returns whether an ad was removed.
    pub fn invalidate(
        &mut self,
        kind: AdType,
        name: &str,
        identity: &str,
        now: i64,
    ) -> Result<bool, CollectorError> {
        let k = key(kind, name);
        match self.ads.get(&k) {
            None => Ok(false),
            Some(old) if old.identity != identity && !old.expired(now) => {
                Err(CollectorError::Forbidden {
                    kind,
                    name: old.name(),
                    owner: old.identity.clone(),
                    identity: identity.to_string(),
                })
            }
            Some(_) => {
                self.ads.remove(&k);
                self.generation += 1;
                Ok(true)
            }
        }
    }

    /// Removes the ad `name` of `kind` whoever published it (an administrator's
    /// invalidation). Returns whether an ad was removed.
    pub fn remove(&mut self, kind: AdType, name: &str) -> bool {
        let removed = self.ads.remove(&key(kind, name)).is_some();
        if removed {
            self.generation += 1;
        }
        removed
    }

    /// Drops every ad whose `LastHeardFrom + lifetime < now`; returns how many.
    pub fn expire(&mut self, now: i64) -> usize {
        let before = self.ads.len();
        self.ads.retain(|_, e| !e.expired(now));
        let dropped = before - self.ads.len();
        if dropped > 0 {
            self.generation += 1;
        }
        dropped
    }

    /// The public ads of `kind` (every kind when `None`) for which `constraint`
    /// (evaluated with MY = the ad, at `now`) is `true`, with only the `projection`
    /// attributes (case-insensitively) when it is not empty. Sorted by `Name`. Never
    /// an expired ad, nor a private one. (The API takes a [`Collector::snapshot`]
    /// under its lock and runs [`select`] after releasing it.)
    pub fn query(
        &self,
        kind: Option<AdType>,
        constraint: Option<&Expr>,
        projection: &[String],
        now: i64,
    ) -> Vec<ClassAd> {
        select(&self.snapshot(kind, now), constraint, projection, now).unwrap_or_default()
    }

    /// The live public ads of `kind` (every kind when `None`), sorted by
    /// `Name`, sharing their storage with the collector: cheap to take under
    /// a lock, to be filtered by [`select`] after it is released.
    pub fn snapshot(&self, kind: Option<AdType>, now: i64) -> Vec<Arc<ClassAd>> {
        let mut found: Vec<(&(AdType, String), &Entry)> = self.live(kind, now).collect();
        found.sort_by(|a, b| (&a.0.1, a.0.0).cmp(&(&b.0.1, b.0.0)));
        found.into_iter().map(|(_, e)| e.ad.clone()).collect()
    }

    /// Whether a negotiation could give a slot to an idle job now: some
    /// live slot ad is Unclaimed, or there is none at all (a cycle then
    /// tells every idle job that nothing matches, which the job router
    /// waits for). When every slot is claimed, jobs that appear wait for
    /// a slot to become Unclaimed (its ad wakes the negotiator) or for the
    /// next NEGOTIATOR_INTERVAL (preemption).
    pub fn negotiation_may_match(&self, now: i64) -> bool {
        let mut machines = self.live(Some(AdType::Machine), now).peekable();
        machines.peek().is_none()
            || machines.any(|(_, e)| {
                matches!(e.ad.eval_attr(classad::name!("State")), classad::Value::Str(s) if &*s == "Unclaimed")
            })
    }

    /// Every live ad of `kind` with its private ad, sorted by `Name`: the negotiator's
    /// view.
    pub fn ads(&self, kind: AdType, now: i64) -> Vec<(ClassAd, Option<ClassAd>)> {
        self.live(Some(kind), now).map(|(_, e)| ((*e.ad).clone(), e.private.clone())).collect()
    }

    /// [`Collector::ads`], the ads shared with the collector rather than
    /// copied (a negotiation cycle's view: at 100,000 slots a copy of every
    /// ad costs seconds).
    pub fn shared_ads(&self, kind: AdType, now: i64) -> Vec<(Arc<ClassAd>, Option<ClassAd>)> {
        self.live(Some(kind), now).map(|(_, e)| (e.ad.clone(), e.private.clone())).collect()
    }

    /// The private ad published with the ad `name` of `kind`, if it is live.
    pub fn private(&self, kind: AdType, name: &str, now: i64) -> Option<&ClassAd> {
        self.ads.get(&key(kind, name)).filter(|e| !e.expired(now)).and_then(|e| e.private.as_ref())
    }

    /// Who published the ad `name` of `kind`, if it is live.
    pub fn publisher(&self, kind: AdType, name: &str, now: i64) -> Option<&str> {
        self.ads.get(&key(kind, name)).filter(|e| !e.expired(now)).map(|e| e.identity.as_str())
    }

    /// A counter bumped by every change (update, invalidation, expiry).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether anything changed since [`Collector::generation`] returned `generation`.
    pub fn changed_since(&self, generation: u64) -> bool {
        self.generation != generation
    }

    /// The number of ads held, expired ones not yet dropped included.
    pub fn len(&self) -> usize {
        self.ads.len()
    }

    /// Whether no ad is held.
    pub fn is_empty(&self) -> bool {
        self.ads.is_empty()
    }

    fn live(
        &self,
        kind: Option<AdType>,
        now: i64,
    ) -> impl Iterator<Item = (&(AdType, String), &Entry)> {
        self.ads.iter().filter(move |(k, e)| kind.is_none_or(|t| k.0 == t) && !e.expired(now))
    }
}

/// Steps a query's constraint may take over all the ads it is evaluated on.
pub const QUERY_STEPS: u64 = 20_000_000;

/// The ads of `ads` for which `constraint` (evaluated with MY = the ad, at
/// `now`) is `true`, projected; refused when the constraint takes more than
/// [`QUERY_STEPS`] evaluation steps in all.
pub fn select(
    ads: &[Arc<ClassAd>],
    constraint: Option<&Expr>,
    projection: &[String],
    now: i64,
) -> Result<Vec<ClassAd>, String> {
    let mut ev = Evaluator::with_options(EvalOptions { now: Some(now), ..Default::default() });
    ev.set_step_pool(Some(QUERY_STEPS));
    let mut out = Vec::new();
    for ad in ads {
        if let Some(c) = constraint {
            let v = ev.eval(c, Some(ad), None);
            if ev.exhausted() {
                return Err(format!(
                    "the constraint takes more than {QUERY_STEPS} evaluation steps over the \
                     ads it is applied to; simplify it"
                ));
            }
            if !matches!(v, Value::Bool(true)) {
                continue;
            }
        }
        out.push(project(ad, projection));
    }
    Ok(out)
}

/// `ad` with only the attributes named in `projection` (all when it is empty).
pub fn project(ad: &ClassAd, projection: &[String]) -> ClassAd {
    if projection.is_empty() {
        return ad.clone();
    }
    let mut out = ClassAd::new();
    for p in projection {
        if let Some((name, e)) = ad.get_entry(p) {
            out.insert(name.clone(), e.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ad(text: &str) -> ClassAd {
        classad::parse_ad(text).unwrap()
    }

    fn slot(name: &str, state: &str, memory: i64) -> ClassAd {
        ad(&format!(r#"[Name = "{name}"; State = "{state}"; Memory = {memory}; Arch = "X86_64"]"#))
    }

    fn names(ads: &[ClassAd]) -> Vec<String> {
        ads.iter()
            .map(|a| match a.eval_attr("Name") {
                Value::Str(s) => s.to_string(),
                v => format!("{v:?}"),
            })
            .collect()
    }

    /// A delta applies to the ad of its base serial, from its publisher,
    /// while it lives; anything else is stale, says which ad, and changes
    /// nothing.
    #[test]
    fn deltas_apply_to_their_base_and_nothing_else() {
        let mut c = Collector::new(100);
        let private = ad(r#"[Name = "s1"; ClaimId = "c1"]"#);
        let whole = ad(r#"[Name = "s1"; State = "Claimed"; Activity = "Idle"; JobId = "1.0"]"#);
        c.update_numbered(AdType::Machine, whole, Some(private.clone()), "h1", 1000, Some(7))
            .unwrap();
        let delta = ad(r#"[Name = "s1"; Activity = "Busy"; LoadAvg = 1.0]"#);
        let unset = vec!["JobId".to_string()];
        let stale = |c: &mut Collector, base, who, now| {
            c.apply_delta(AdType::Machine, &delta, &[], None, base, Some(9), who, now).unwrap_err()
        };
        // Another base, another publisher, an expired ad.
        for (e, base) in [
            (stale(&mut c, 6, "h1", 1001), 6),
            (stale(&mut c, 7, "h2", 1001), 7),
            (stale(&mut c, 7, "h1", 1200), 7),
        ] {
            assert_eq!(
                e,
                CollectorError::StaleBase { kind: AdType::Machine, name: "s1".into(), base }
            );
            assert!(e.to_string().contains("`s1`"), "{e}");
        }
        let (lifetime, full) =
            c.apply_delta(AdType::Machine, &delta, &unset, None, 7, Some(8), "h1", 1001).unwrap();
        assert_eq!(lifetime, 100);
        assert_eq!(full.eval_attr("Activity"), Value::Str("Busy".into()));
        assert_eq!(full.eval_attr("State"), Value::Str("Claimed".into()));
        assert_eq!(full.eval_attr("LoadAvg"), Value::Real(1.0));
        assert_eq!(full.eval_attr("LastHeardFrom"), Value::Int(1001));
        assert!(full.get("JobId").is_none());
        let now = c.query(Some(AdType::Machine), None, &[], 1001);
        assert_eq!(now.len(), 1);
        assert_eq!(&now[0], &*full);
        assert_eq!(c.private(AdType::Machine, "s1", 1001), Some(&private), "the held private part");
        // The old base is stale now; the new one is not.
        assert!(matches!(stale(&mut c, 7, "h1", 1001), CollectorError::StaleBase { .. }));
        assert!(c.apply_delta(AdType::Machine, &delta, &[], None, 8, Some(9), "h1", 1001).is_ok());
        let other = ad(r#"[Name = "s2"; Activity = "Busy"]"#);
        assert!(matches!(
            c.apply_delta(AdType::Machine, &other, &[], None, 9, None, "h1", 1001),
            Err(CollectorError::StaleBase { .. })
        ));
        // A delta without a Name, or unsetting it, names nothing.
        let no_name = ad("[Activity = 1]");
        for (d, u) in [(&no_name, &[][..]), (&delta, &["name".to_string()][..])] {
            assert_eq!(
                c.apply_delta(AdType::Machine, d, u, None, 9, None, "h1", 1001).unwrap_err(),
                CollectorError::NoName { kind: AdType::Machine }
            );
        }
    }

    #[test]
    fn types_spell_as_htcondor() {
        assert_eq!(AdType::parse("scheduler"), Some(AdType::Schedd));
        assert_eq!(AdType::parse("MACHINE"), Some(AdType::Machine));
        assert_eq!(AdType::parse("Schedd"), None);
        assert_eq!("Submitter".parse::<AdType>(), Ok(AdType::Submitter));
        assert!("Startd".parse::<AdType>().unwrap_err().to_string().contains("`Startd`"));
        assert_eq!(AdType::from_status_option("-submitters"), Some(AdType::Submitter));
        assert_eq!(AdType::from_status_option("startd"), Some(AdType::Machine));
        assert_eq!(AdType::Negotiator.to_string(), "Negotiator");
    }

    #[test]
    fn update_stamps_the_ad() {
        let mut c = Collector::new(900);
        assert_eq!(
            c.update(AdType::Machine, slot("s1@h", "Unclaimed", 1024), None, "h", 50),
            Ok(900)
        );
        let got = c.query(None, None, &[], 50);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].eval_attr("MyType"), Value::string("Machine"));
        assert_eq!(got[0].eval_attr("LastHeardFrom"), Value::Int(50));
        assert_eq!(got[0].eval_attr("AuthenticatedIdentity"), Value::string("h"));
        let err = c.update(AdType::Machine, ad("[State = \"Owner\"]"), None, "h", 50).unwrap_err();
        assert_eq!(err, CollectorError::NoName { kind: AdType::Machine });
        let err = c.update(AdType::Machine, ad("[Name = 3]"), None, "h", 50).unwrap_err();
        assert_eq!(err, CollectorError::NoName { kind: AdType::Machine });
    }

    #[test]
    fn refresh_keeps_an_ad_and_silence_drops_it() {
        let mut c = Collector::new(900);
        c.update(AdType::Machine, slot("a", "Unclaimed", 1), None, "h", 0).unwrap();
        c.update(AdType::Machine, slot("b", "Unclaimed", 1), None, "h", 0).unwrap();
        // a is refreshed at 800; b is not.
        c.update(AdType::Machine, slot("a", "Claimed", 1), None, "h", 800).unwrap();
        assert_eq!(names(&c.query(None, None, &[], 900)), ["a", "b"], "900 is still inside");
        assert_eq!(names(&c.query(None, None, &[], 901)), ["a"], "query hides b at once");
        assert_eq!(c.len(), 2, "…before expire drops it");
        let g = c.generation();
        assert_eq!(c.expire(901), 1);
        assert!(c.changed_since(g));
        assert_eq!(c.len(), 1);
        assert_eq!(c.expire(1700), 0);
        assert_eq!(c.expire(1701), 1);
        assert!(c.is_empty());
    }

    #[test]
    fn classad_lifetime_is_honoured() {
        let mut c = Collector::new(900);
        let mut a = slot("short", "Unclaimed", 1);
        a.insert_value("ClassAdLifetime", 10i64);
        assert_eq!(c.update(AdType::Machine, a, None, "h", 100), Ok(10));
        let mut b = slot("odd", "Unclaimed", 1);
        b.insert_value("ClassAdLifetime", "soon");
        assert_eq!(c.update(AdType::Machine, b, None, "h", 100), Ok(900));
        assert_eq!(names(&c.query(None, None, &[], 110)), ["odd", "short"]);
        assert_eq!(names(&c.query(None, None, &[], 111)), ["odd"]);
        assert!(
            c.ads(AdType::Machine, 111)
                .iter()
                .all(|(a, _)| a.eval_attr("Name") != Value::string("short"))
        );
    }

    #[test]
    fn constraint_and_projection() {
        let mut c = Collector::new(900);
        c.update(AdType::Machine, slot("z@h", "Unclaimed", 4096), None, "h", 0).unwrap();
        c.update(AdType::Machine, slot("a@h", "Claimed", 2048), None, "h", 0).unwrap();
        c.update(AdType::Machine, slot("m@h", "Unclaimed", 512), None, "h", 0).unwrap();
        c.update(AdType::Schedd, ad(r#"[Name = "b@submit"; Memory = 99999]"#), None, "s", 0)
            .unwrap();
        let big = classad::parse_expr("Memory >= 1024").unwrap();
        let got = c.query(Some(AdType::Machine), Some(&big), &[], 1);
        assert_eq!(names(&got), ["a@h", "z@h"]);
        let got = c.query(None, Some(&big), &[], 1);
        assert_eq!(names(&got), ["a@h", "b@submit", "z@h"]);
        // Only `true` selects: an undefined or integer result does not.
        let undef = classad::parse_expr("NoSuchAttr > 1").unwrap();
        assert!(c.query(None, Some(&undef), &[], 1).is_empty());
        let one = classad::parse_expr("1").unwrap();
        assert!(c.query(None, Some(&one), &[], 1).is_empty());
        // MY is the ad.
        let my = classad::parse_expr(r#"MY.State == "unclaimed""#).unwrap();
        assert_eq!(names(&c.query(None, Some(&my), &[], 1)), ["m@h", "z@h"]);
        // Projection: case-insensitive, missing attributes left out.
        let got = c.query(
            Some(AdType::Machine),
            None,
            &["name".into(), "MEMORY".into(), "Nope".into()],
            1,
        );
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[0].to_string(),
            classad::parse_ad(r#"[Name = "a@h"; Memory = 2048]"#).unwrap().to_string()
        );
        assert!(got.iter().all(|a| a.len() == 2));
    }

    #[test]
    fn private_ads_stay_private() {
        let mut c = Collector::new(900);
        let private = ad(r#"[Name = "s1@h"; Capability = "secret-claim-id"]"#);
        c.update(AdType::Machine, slot("s1@h", "Unclaimed", 1), Some(private), "h", 0).unwrap();
        let all = c.query(None, None, &[], 0);
        assert!(all.iter().all(|a| !a.to_string().contains("secret-claim-id")));
        let proj = c.query(None, None, &["Capability".into()], 0);
        assert_eq!(proj.len(), 1);
        assert!(proj[0].is_empty());
        let p = c.private(AdType::Machine, "S1@H", 0).unwrap();
        assert_eq!(p.eval_attr("Capability"), Value::string("secret-claim-id"));
        let ads = c.ads(AdType::Machine, 0);
        assert_eq!(ads.len(), 1);
        assert!(ads[0].1.is_some());
        assert!(c.private(AdType::Machine, "s1@h", 901).is_none(), "expired");
        assert!(c.ads(AdType::Schedd, 0).is_empty());
    }

    #[test]
    fn another_identity_cannot_overwrite_until_expiry() {
        let mut c = Collector::new(900);
        c.update(AdType::Machine, slot("s1@h", "Unclaimed", 1), None, "exec-1", 0).unwrap();
        let g = c.generation();
        let err =
            c.update(AdType::Machine, slot("S1@h", "Owner", 1), None, "exec-2", 10).unwrap_err();
        assert_eq!(
            err.to_string(),
            "exec-2 may not change the Machine ad `S1@h`: it was published by exec-1"
        );
        assert!(!c.changed_since(g), "a refusal changes nothing");
        assert_eq!(c.query(None, None, &[], 10)[0].eval_attr("State"), Value::string("Unclaimed"));
        // The same name of another kind is another ad.
        c.update(AdType::Schedd, ad(r#"[Name = "s1@h"]"#), None, "exec-2", 10).unwrap();
        // Once expired, anyone may take the name.
        c.update(AdType::Machine, slot("s1@h", "Owner", 1), None, "exec-2", 901).unwrap();
        assert_eq!(c.publisher(AdType::Machine, "s1@h", 901), Some("exec-2"));
    }

    #[test]
    fn invalidate_removes_only_ones_own() {
        let mut c = Collector::new(900);
        c.update(AdType::Machine, slot("s1@h", "Unclaimed", 1), None, "exec-1", 0).unwrap();
        c.update(AdType::Machine, slot("s2@h", "Unclaimed", 1), None, "exec-1", 0).unwrap();
        assert!(matches!(
            c.invalidate(AdType::Machine, "s1@h", "exec-2", 5),
            Err(CollectorError::Forbidden { .. })
        ));
        assert_eq!(c.invalidate(AdType::Schedd, "s1@h", "exec-1", 5), Ok(false));
        let g = c.generation();
        assert_eq!(c.invalidate(AdType::Machine, "s1@h", "exec-1", 5), Ok(true));
        assert!(c.changed_since(g));
        assert_eq!(c.invalidate(AdType::Machine, "s1@h", "exec-1", 5), Ok(false));
        assert_eq!(names(&c.query(None, None, &[], 5)), ["s2@h"]);
        assert!(c.remove(AdType::Machine, "s2@h"));
        assert!(!c.remove(AdType::Machine, "s2@h"));
        assert!(c.is_empty());
    }
}
