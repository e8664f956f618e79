//! The accountant: HTCondor's user priorities, for fair share.
//!
//! Each submitter (`"owner@domain"`) has a *real priority* that moves toward
//! the number of slots it uses, with a half-life: after `dt` seconds,
//! `prio' = prio * b + (1 - b) * in_use` with `b = 0.5^(dt / halflife)`,
//! never below [`MIN_PRIORITY`]. Its *effective priority* is the real
//! priority times its *priority factor*. Lower is better. Pure: the caller
//! passes `now`.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

/// The lowest real priority (HTCondor's MIN_PRIORITY).
pub const MIN_PRIORITY: f64 = 0.5;

/// The accountant's knobs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AccountantConfig {
    /// PRIORITY_HALFLIFE, in seconds (default 86400).
    pub halflife: f64,
    /// DEFAULT_PRIO_FACTOR (default 1000).
    pub default_factor: f64,
}

impl Default for AccountantConfig {
    fn default() -> Self {
        AccountantConfig { halflife: 86_400.0, default_factor: 1000.0 }
    }
}

impl AccountantConfig {
    /// From configuration values (`PRIORITY_HALFLIFE`, `DEFAULT_PRIO_FACTOR`)
    /// as the caller read them; a missing, non-finite or non-positive value
    /// takes the default.
    pub fn from_values(halflife: Option<f64>, default_factor: Option<f64>) -> AccountantConfig {
        let d = AccountantConfig::default();
        let ok = |v: Option<f64>| v.filter(|x| x.is_finite() && *x > 0.0);
        AccountantConfig {
            halflife: ok(halflife).unwrap_or(d.halflife),
            default_factor: ok(default_factor).unwrap_or(d.default_factor),
        }
    }
}

/// One submitter's record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Submitter {
    /// Real priority (>= [`MIN_PRIORITY`]).
    pub real_priority: f64,
    /// Priority factor; `None` follows the configured default.
    pub factor: Option<f64>,
    /// Slots in use at the last update.
    pub in_use: u32,
    /// Accumulated usage, in slot-seconds.
    pub usage_seconds: f64,
    /// The last time (Unix seconds) the submitter was seen using a slot.
    pub last_usage: Option<i64>,
}

impl Default for Submitter {
    fn default() -> Self {
        Submitter {
            real_priority: MIN_PRIORITY,
            factor: None,
            in_use: 0,
            usage_seconds: 0.0,
            last_usage: None,
        }
    }
}

/// One row of `andes userprio`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserPrioRow {
    /// The submitter, `owner@domain`.
    pub name: String,
    /// Effective priority: real priority times factor.
    pub effective_priority: f64,
    /// Real priority.
    pub real_priority: f64,
    /// Priority factor.
    pub priority_factor: f64,
    /// Slots in use.
    pub in_use: u32,
    /// Accumulated usage, in hours.
    pub usage_hours: f64,
    /// The last time the submitter used a slot (Unix seconds).
    pub last_usage: Option<i64>,
}

/// User priorities of every submitter the pool has seen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Accountant {
    config: AccountantConfig,
    submitters: BTreeMap<String, Submitter>,
    last_update: Option<i64>,
}

impl Accountant {
    /// An empty accountant.
    pub fn new(config: AccountantConfig) -> Accountant {
        Accountant { config, submitters: BTreeMap::new(), last_update: None }
    }

    /// The knobs.
    pub fn config(&self) -> AccountantConfig {
        self.config
    }

    /// Changes the knobs (after a reconfiguration).
    pub fn set_config(&mut self, config: AccountantConfig) {
        self.config = config;
    }

    /// The time of the last [`Accountant::update`].
    pub fn last_update(&self) -> Option<i64> {
        self.last_update
    }

    /// Ages every priority to `now` and records `in_use` (slots per
    /// submitter; a submitter absent from it uses none). Usage since the
    /// last update is charged at the previously recorded counts. A clock
    /// that goes backwards ages nothing, and ageing goes on from there.
    pub fn update(&mut self, now: i64, in_use: &HashMap<String, u32>) {
        let dt = match self.last_update {
            Some(t) => now.saturating_sub(t).max(0) as f64,
            None => 0.0,
        };
        let halflife = if self.config.halflife.is_finite() && self.config.halflife > 0.0 {
            self.config.halflife
        } else {
            AccountantConfig::default().halflife
        };
        let b = 0.5f64.powf(dt / halflife);
        for name in in_use.keys() {
            if !self.submitters.contains_key(name) {
                self.submitters.insert(name.clone(), Submitter::default());
            }
        }
        for (name, s) in self.submitters.iter_mut() {
            let used = in_use.get(name).copied().unwrap_or(0);
            s.usage_seconds += f64::from(s.in_use) * dt;
            if s.in_use > 0 && dt > 0.0 {
                s.last_usage = Some(now);
            }
            if used > 0 {
                s.last_usage = Some(now);
            }
            let p = s.real_priority * b + (1.0 - b) * f64::from(used);
            s.real_priority = if p.is_finite() { p.max(MIN_PRIORITY) } else { MIN_PRIORITY };
            s.in_use = used;
        }
        // Followed back when the clock is stepped back: kept at the later
        // time, nothing would age until the clock came back there.
        self.last_update = Some(now);
    }

    /// The submitter's record, if it has one.
    pub fn get(&self, submitter: &str) -> Option<&Submitter> {
        self.submitters.get(submitter)
    }

    /// Real priority ([`MIN_PRIORITY`] for a submitter never seen).
    pub fn real(&self, submitter: &str) -> f64 {
        self.submitters.get(submitter).map_or(MIN_PRIORITY, |s| s.real_priority)
    }

    /// The priority factor (the default for a submitter without its own).
    pub fn factor(&self, submitter: &str) -> f64 {
        self.submitters.get(submitter).and_then(|s| s.factor).unwrap_or(self.config.default_factor)
    }

    /// Effective priority: real priority times factor. Lower is better.
    pub fn effective(&self, submitter: &str) -> f64 {
        self.real(submitter) * self.factor(submitter)
    }

    /// Sets a submitter's priority factor (`andes userprio -setfactor`).
    /// HTCondor's factors are at least 1; anything else is refused (false).
    pub fn set_factor(&mut self, submitter: &str, factor: f64) -> bool {
        if !factor.is_finite() || factor < 1.0 {
            return false;
        }
        self.submitters.entry(submitter.to_string()).or_default().factor = Some(factor);
        true
    }

    /// Sets a submitter's real priority (`andes userprio -setprio`), at
    /// least [`MIN_PRIORITY`]; false for a non-finite value.
    pub fn set_real(&mut self, submitter: &str, prio: f64) -> bool {
        if !prio.is_finite() {
            return false;
        }
        self.submitters.entry(submitter.to_string()).or_default().real_priority =
            prio.max(MIN_PRIORITY);
        true
    }

    /// The `andes userprio` table, best (lowest) effective priority first.
    pub fn rows(&self) -> Vec<UserPrioRow> {
        let mut rows: Vec<UserPrioRow> = self
            .submitters
            .iter()
            .map(|(name, s)| {
                let factor = s.factor.unwrap_or(self.config.default_factor);
                UserPrioRow {
                    name: name.clone(),
                    effective_priority: s.real_priority * factor,
                    real_priority: s.real_priority,
                    priority_factor: factor,
                    in_use: s.in_use,
                    usage_hours: s.usage_seconds / 3600.0,
                    last_usage: s.last_usage,
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            a.effective_priority.total_cmp(&b.effective_priority).then_with(|| a.name.cmp(&b.name))
        });
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(pairs: &[(&str, u32)]) -> HashMap<String, u32> {
        pairs.iter().map(|(n, c)| (n.to_string(), *c)).collect()
    }

    #[test]
    fn halves_toward_the_floor_after_one_halflife() {
        let mut a = Accountant::new(AccountantConfig::default());
        a.update(0, &usage(&[]));
        assert!(a.set_real("alice@x", 10.0));
        a.update(86_400, &usage(&[]));
        assert!((a.real("alice@x") - 5.0).abs() < 1e-9);
        a.update(2 * 86_400, &usage(&[]));
        assert!((a.real("alice@x") - 2.5).abs() < 1e-9);
        // Many half-lives later: floored.
        a.update(100 * 86_400, &usage(&[]));
        assert_eq!(a.real("alice@x"), MIN_PRIORITY);
        assert_eq!(a.effective("alice@x"), MIN_PRIORITY * 1000.0);
    }

    #[test]
    fn moves_toward_usage_and_accumulates_hours() {
        let mut a = Accountant::new(AccountantConfig { halflife: 100.0, default_factor: 1.0 });
        a.update(0, &usage(&[("bob@x", 8)]));
        assert_eq!(a.real("bob@x"), MIN_PRIORITY);
        a.update(100, &usage(&[("bob@x", 8)]));
        assert!((a.real("bob@x") - (0.25 + 4.0)).abs() < 1e-9);
        a.update(3700, &usage(&[]));
        let row = &a.rows()[0];
        assert_eq!(row.name, "bob@x");
        assert!((row.usage_hours - 8.0 * 3700.0 / 3600.0).abs() < 1e-9);
        assert_eq!(row.in_use, 0);
        assert_eq!(row.last_usage, Some(3700));
        // Backwards clock: nothing ages.
        let before = a.real("bob@x");
        a.update(10, &usage(&[]));
        assert_eq!(a.real("bob@x"), before);
    }

    #[test]
    fn ageing_goes_on_after_the_clock_is_stepped_back() {
        let mut a = Accountant::new(AccountantConfig { halflife: 100.0, default_factor: 1.0 });
        a.update(10_000, &usage(&[]));
        assert!(a.set_real("alice@x", 10.0));
        // Stepped back an hour: nothing ages then, and one halflife later
        // the priority has halved, as it would have without the step.
        a.update(6_400, &usage(&[]));
        assert_eq!(a.real("alice@x"), 10.0);
        a.update(6_500, &usage(&[]));
        assert!((a.real("alice@x") - 5.0).abs() < 1e-9, "{}", a.real("alice@x"));
    }

    #[test]
    fn factors_and_serde() {
        let mut a = Accountant::new(AccountantConfig::from_values(None, Some(10.0)));
        assert_eq!(a.effective("new@x"), 5.0);
        assert!(a.set_factor("new@x", 2.0));
        assert!(!a.set_factor("new@x", f64::NAN));
        assert!(!a.set_factor("new@x", 0.5));
        assert_eq!(a.effective("new@x"), 1.0);
        let json = serde_json::to_string(&a).unwrap();
        let back: Accountant = serde_json::from_str(&json).unwrap();
        assert_eq!(back, a);
        assert_eq!(AccountantConfig::from_values(Some(-1.0), None), AccountantConfig::default());
    }
}
