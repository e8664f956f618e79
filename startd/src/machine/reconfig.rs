//! Reconfiguration: [`Startd::reconfigure`] takes a policy read again while
//! every slot keeps its state, claim and job, and says what changed
//! ([`Reconfigured`]); the policy's expressions a slot's ad publishes.

use classad::Expr;

use super::Startd;
use crate::policy::{CLAIM_EXPR_NAMES, Policy};

/// What [`Startd::reconfigure`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reconfigured {
    /// The knobs whose new values apply now.
    pub changed: Vec<String>,
    /// The knobs whose new values wait for the next start (the slot layout).
    pub at_restart: Vec<String>,
}

/// The policy's expressions a slot's ad carries, by attribute name.
pub(super) fn published_policy(policy: &Policy) -> Vec<(String, Expr)> {
    let mut out = vec![
        ("START".to_string(), policy.start.clone()),
        ("IS_VALID_CHECKPOINT_PLATFORM".to_string(), policy.valid_ckpt_platform.clone()),
        ("Rank".to_string(), policy.rank.clone()),
        ("PERIODIC_CHECKPOINT".to_string(), policy.periodic_checkpoint.clone()),
        ("MaxJobRetirementTime".to_string(), policy.max_job_retirement_time.clone()),
    ];
    for (name, e) in CLAIM_EXPR_NAMES.texts().iter().zip(policy.standard.iter()) {
        out.push((name.to_string(), e.clone()));
    }
    out.extend(policy.startd_attrs.iter().cloned());
    out
}

/// Every knob of the policy that can change while the startd runs, with its
/// value as text: what a reconfiguration compares.
fn policy_knobs(p: &Policy) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![
        ("START".into(), p.start.to_string()),
        ("IS_OWNER".into(), p.is_owner.to_string()),
        ("IS_VALID_CHECKPOINT_PLATFORM".into(), p.valid_ckpt_platform.to_string()),
        ("RANK".into(), p.rank.to_string()),
        ("PERIODIC_CHECKPOINT".into(), p.periodic_checkpoint.to_string()),
        ("MAXJOBRETIREMENTTIME".into(), p.max_job_retirement_time.to_string()),
        ("KILLING_TIMEOUT".into(), p.killing_timeout.to_string()),
        ("CLAIM_WORKLIFE".into(), p.claim_worklife.to_string()),
        ("MATCH_TIMEOUT".into(), p.match_timeout.to_string()),
        ("RunBenchmarks".into(), p.run_benchmarks.to_string()),
        ("START_BACKFILL".into(), p.start_backfill.to_string()),
        ("EVICT_BACKFILL".into(), p.evict_backfill.to_string()),
        ("CPUBusy".into(), p.cpu_busy.to_string()),
        ("MACHINE_MAX_VACATE_TIME".into(), p.machine_max_vacate_time.to_string()),
        ("POLLING_INTERVAL".into(), p.polling_interval.to_string()),
        ("UPDATE_INTERVAL".into(), p.update_interval.to_string()),
        ("ENABLE_BACKFILL".into(), p.backfill.to_string()),
        ("BACKFILL_JOBS".into(), p.backfill_jobs.join(",")),
        ("STARTD_SLOT_ATTRS".into(), p.cross_slot_attrs.join(",")),
    ];
    for (name, e) in CLAIM_EXPR_NAMES.texts().iter().zip(p.standard.iter()) {
        out.push((name.to_string(), e.to_string()));
    }
    for (name, e) in CLAIM_EXPR_NAMES.texts().iter().zip(p.vanilla.iter()) {
        out.push((format!("{name}_VANILLA"), e.to_string()));
    }
    let attrs: Vec<String> = p.startd_attrs.iter().map(|(n, e)| format!("{n} = {e}")).collect();
    out.push(("STARTD_ATTRS".into(), attrs.join("; ")));
    out
}

impl Startd {
    /// Takes a policy read again from the configuration (`andes reconfig`,
    /// condor_reconfig) while every slot keeps its state, activity, claim
    /// and job: the expressions (START, RANK, the claim expressions and
    /// their `_VANILLA` variants, PERIODIC_CHECKPOINT, STARTD_ATTRS, ...)
    /// and intervals apply from the next evaluation, which runs at once.
    /// The slot layout (NUM_CPUS, MEMORY, NUM_SLOTS, the slot types) and
    /// the domains are the machine's shape while the startd runs, as in
    /// HTCondor: a change to them is reported and takes effect at the next
    /// start.
    pub fn reconfigure(&mut self, mut policy: Policy, now: i64) -> Reconfigured {
        let old = &self.policy;
        let mut at_restart = Vec::new();
        // The machine's shape stays as it is; a change to it is reported.
        let mut keep = |name: &str, changed: bool| {
            if changed {
                at_restart.push(name.to_string());
            }
        };
        keep("NUM_CPUS", policy.num_cpus != old.num_cpus);
        keep("MEMORY", policy.memory_mb != old.memory_mb);
        keep("NUM_SLOTS", policy.num_slots != old.num_slots);
        keep("SLOT_TYPE_<N> / NUM_SLOTS_TYPE_<N>", policy.slot_types != old.slot_types);
        keep("UID_DOMAIN", policy.uid_domain != old.uid_domain);
        keep("FILESYSTEM_DOMAIN", policy.filesystem_domain != old.filesystem_domain);
        policy.num_cpus = old.num_cpus;
        policy.memory_mb = old.memory_mb;
        policy.num_slots = old.num_slots;
        policy.slot_types = old.slot_types.clone();
        policy.uid_domain = old.uid_domain.clone();
        policy.filesystem_domain = old.filesystem_domain.clone();
        let changed: Vec<String> = policy_knobs(old)
            .into_iter()
            .zip(policy_knobs(&policy))
            .filter(|((_, a), (_, b))| a != b)
            .map(|((name, _), _)| name)
            .collect();
        let gone: Vec<String> = old
            .startd_attrs
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| !policy.startd_attrs.iter().any(|(m, _)| m.eq_ignore_ascii_case(n)))
            .collect();
        let published = published_policy(&policy);
        for slot in &mut self.slots {
            for ad in [&mut slot.ad, &mut slot.static_ad] {
                for name in &gone {
                    ad.remove(name.as_str());
                }
                for (name, e) in &published {
                    ad.insert(name.as_str(), e.clone());
                }
            }
            slot.dirty = true;
        }
        self.policy = policy;
        // The next poll comes at the new interval at the latest.
        self.next_poll =
            self.next_poll.min(now.saturating_add(self.policy.polling_interval.max(1)));
        self.refresh_all(now);
        self.ev.done();
        Reconfigured { changed, at_restart }
    }
}
