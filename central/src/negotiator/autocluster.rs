//! Autoclusters: idle jobs that the negotiator cannot tell apart share one.
//!
//! Two jobs can be matched as one when every attribute that can affect a
//! match has the same expression text in both: their significant
//! attributes, which depend on the machines in the pool (what their
//! Requirements, START and Rank read of a job), plus what each job's own
//! Requirements and Rank read of the job itself.

use std::collections::{BTreeSet, HashMap};

use classad::{AttrName, ClassAd};

use super::refs::names;

/// In a significant-attribute list, "every attribute matters": some machine
/// expression reads the job in a way that cannot be analysed.
pub const ALL_ATTRIBUTES: &str = "*";

/// Job attributes that always matter.
const ALWAYS: [&str; 5] = ["Requirements", "Rank", "RequestMemory", "RequestDisk", "RequestCpus"];

/// Attributes that tell submitters apart; jobs of different submitters
/// never share an autocluster.
const SUBMITTER: [&str; 3] = ["Owner", "User", "AccountingGroup"];

/// The job attributes that can affect a match against `machine_ads`:
/// Requirements, Rank, the request attributes, and every attribute the
/// machines' Requirements, START and Rank read as `TARGET.x` or as a plain
/// name the machine ad lacks (following the machine ad's own attributes,
/// so `Requirements = START` reads what START reads). Sorted, each name
/// once (case-insensitively). Contains [`ALL_ATTRIBUTES`] when some
/// machine expression cannot be analysed.
pub fn significant_attributes<'a>(
    machine_ads: impl IntoIterator<Item = &'a ClassAd>,
) -> Vec<String> {
    let mut seen: HashMap<String, String> = HashMap::new();
    for n in ALWAYS {
        seen.insert(n.to_ascii_lowercase(), n.to_string());
    }
    let seeds = [AttrName::new("Requirements"), AttrName::new("START"), AttrName::new("Rank")];
    let mut other: Vec<AttrName> = Vec::new();
    for ad in machine_ads {
        let n = names(ad, &seeds, &[]);
        if n.opaque {
            seen.insert(ALL_ATTRIBUTES.to_string(), ALL_ATTRIBUTES.to_string());
        }
        for name in n.other {
            if !other.contains(name) {
                other.push(name.clone());
            }
        }
    }
    for name in other {
        seen.entry(name.as_str().to_ascii_lowercase()).or_insert_with(|| name.as_str().to_string());
    }
    let mut out: Vec<String> = seen.into_values().collect();
    out.sort_by_key(|n| n.to_ascii_lowercase());
    out
}

/// Assigns idle jobs to autoclusters.
#[derive(Debug, Default)]
pub struct Autoclusters {
    significant: Vec<String>,
    names: Vec<AttrName>,
    /// `Requirements` and `Rank`.
    own_seeds: Vec<AttrName>,
    all: bool,
    ids: HashMap<String, u32>,
    next: u32,
}

impl Autoclusters {
    /// Autoclusters over `significant` attributes (from
    /// [`significant_attributes`]); the always-significant ones and the
    /// submitter's attributes are added.
    pub fn new(significant: Vec<String>) -> Autoclusters {
        let mut a = Autoclusters::default();
        a.set_significant(significant);
        a
    }

    /// The significant attributes in use (lowercase, sorted).
    pub fn significant(&self) -> &[String] {
        &self.significant
    }

    /// The number of autoclusters made since the last re-keying.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when no job has been assigned since the last re-keying.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Changes the significant set. When it differs from the current one,
    /// every job must be assigned again: earlier ids mean nothing any more
    /// (new ids never reuse old ones). Returns true when it changed.
    pub fn set_significant(&mut self, significant: Vec<String>) -> bool {
        let mut set: BTreeSet<String> =
            significant.iter().map(|n| n.to_ascii_lowercase()).collect();
        set.extend(ALWAYS.iter().map(|n| n.to_ascii_lowercase()));
        set.extend(SUBMITTER.iter().map(|n| n.to_ascii_lowercase()));
        let all = set.remove(ALL_ATTRIBUTES);
        let list: Vec<String> = set.into_iter().collect();
        if list == self.significant && all == self.all && !self.names.is_empty() {
            return false;
        }
        self.names = list.iter().map(|n| AttrName::new(n)).collect();
        self.own_seeds = vec![AttrName::new("Requirements"), AttrName::new("Rank")];
        self.significant = list;
        self.all = all;
        self.ids.clear();
        true
    }

    /// The key of `job`: the text of each significant attribute and of
    /// every attribute the job's own Requirements and Rank read of the job.
    pub fn key(&self, job: &ClassAd) -> String {
        let mut key = String::with_capacity(256);
        let own = names(job, &self.own_seeds, &[]);
        if self.all || own.opaque {
            // Every attribute, in a canonical order.
            let mut attrs: Vec<(String, &classad::Expr)> =
                job.iter().map(|(k, v)| (k.as_str().to_ascii_lowercase(), v)).collect();
            attrs.sort_by(|a, b| a.0.cmp(&b.0));
            for (k, v) in attrs {
                key.push_str(&k);
                key.push('=');
                classad::unparse::expr_to(&mut key, v);
                key.push('\n');
            }
            return key;
        }
        let push = |key: &mut String, name: &str, e: Option<&classad::Expr>| {
            key.push_str(name);
            match e {
                Some(e) => {
                    key.push('=');
                    classad::unparse::expr_to(key, e);
                }
                None => key.push('\u{0}'),
            }
            key.push('\n');
        };
        for (name, attr) in self.significant.iter().zip(&self.names) {
            push(&mut key, name, job.lookup(attr));
        }
        key.push('\u{1}');
        let mut extra: Vec<(String, &AttrName)> = own
            .local
            .iter()
            .filter(|n| !self.names.contains(n))
            .map(|n| (n.as_str().to_ascii_lowercase(), *n))
            .collect();
        extra.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, attr) in extra {
            push(&mut key, &name, job.lookup(attr));
        }
        key
    }

    /// The autocluster of `job`. Jobs get the same id exactly when their
    /// keys ([`Autoclusters::key`]) are equal; ids are stable while the
    /// significant set stays the same.
    pub fn assign(&mut self, job: &ClassAd) -> u32 {
        let key = self.key(job);
        if let Some(id) = self.ids.get(&key) {
            return *id;
        }
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        self.ids.insert(key, id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> ClassAd {
        classad::parse_ad(
            "[Name = \"slot1@a\"; Memory = 4096; Requirements = START; \
              START = TARGET.RequestMemory <= Memory && Department == \"physics\"; \
              Rank = TARGET.Owner == \"alice\"]",
        )
        .unwrap()
    }

    fn job(extra: &str) -> ClassAd {
        classad::parse_ad(&format!(
            "[Owner = \"alice\"; RequestMemory = 1024; RequestDisk = 10; RequestCpus = 1; \
              Department = \"physics\"; Args = \"1\"; \
              Requirements = TARGET.Memory >= RequestMemory && WantFast =!= true; {extra}]"
        ))
        .unwrap()
    }

    #[test]
    fn machine_references_are_significant() {
        let sig = significant_attributes(&[machine()]);
        let lower: Vec<String> = sig.iter().map(|s| s.to_ascii_lowercase()).collect();
        for n in ["department", "owner", "requestmemory", "requirements", "rank"] {
            assert!(lower.contains(&n.to_string()), "{n} in {sig:?}");
        }
        assert!(!lower.contains(&"memory".to_string()));
        assert!(!lower.contains(&"args".to_string()));
    }

    #[test]
    fn groups_identical_jobs_and_splits_on_significant_differences() {
        let mut ac = Autoclusters::new(significant_attributes(&[machine()]));
        let a = ac.assign(&job("Args = \"1\""));
        // An insignificant attribute differs: same cluster.
        assert_eq!(ac.assign(&job("Args = \"2\"; Out = \"o\"")), a);
        // Name case does not matter.
        assert_eq!(ac.assign(&job("ARGS = \"3\"")), a);
        // A significant one (read by the machine's START) differs: split.
        let b = ac.assign(&job("Department = \"chemistry\""));
        assert_ne!(a, b);
        // Read by the job's own Requirements: split.
        let c = ac.assign(&job("WantFast = true"));
        assert_ne!(a, c);
        assert_ne!(b, c);
        // Another submitter never shares.
        let d = ac.assign(&job("Owner = \"bob\""));
        assert_ne!(a, d);
        assert_eq!(ac.assign(&job("")), a);
        assert_eq!(ac.len(), 4);
    }

    #[test]
    fn rekeys_when_the_significant_set_changes() {
        let mut ac = Autoclusters::new(significant_attributes(std::iter::empty()));
        let a = ac.assign(&job(""));
        assert_eq!(ac.assign(&job("Department = \"chemistry\"")), a);
        assert!(!ac.set_significant(significant_attributes(std::iter::empty())));
        assert!(ac.set_significant(significant_attributes(&[machine()])));
        assert!(ac.is_empty());
        let x = ac.assign(&job(""));
        let y = ac.assign(&job("Department = \"chemistry\""));
        assert_ne!(x, y);
        assert_ne!(x, a, "ids are not reused across re-keying");
    }

    #[test]
    fn follows_each_machine_s_own_attributes() {
        // Same START text, different helper: both helpers' reads count.
        let a = classad::parse_ad("[Requirements = START; START = Helper; Helper = TARGET.Foo]")
            .unwrap();
        let b = classad::parse_ad("[Requirements = START; START = Helper; Helper = TARGET.Bar]")
            .unwrap();
        let sig = significant_attributes(&[a, b]);
        assert!(sig.iter().any(|s| s == "Foo"), "{sig:?}");
        assert!(sig.iter().any(|s| s == "Bar"), "{sig:?}");
    }

    #[test]
    fn opaque_machine_expressions_make_everything_significant() {
        let m = classad::parse_ad("[Requirements = size(TARGET) > 3]").unwrap();
        let sig = significant_attributes(&[m]);
        assert!(sig.iter().any(|s| s == ALL_ATTRIBUTES));
        let mut ac = Autoclusters::new(sig);
        assert_ne!(ac.assign(&job("Args = \"1\"")), ac.assign(&job("Args = \"2\"")));
    }
}
