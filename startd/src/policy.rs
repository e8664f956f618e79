//! The startd's configuration: policy expressions, intervals, slot layout,
//! backfill, and the attributes configuration adds to the machine ad.

use std::fmt;

use andes_config::{Config, ConfigError};
use classad::{Expr, parse_expr};

/// The andes defaults, loaded first (`config/andes_defaults.config`).
pub const ANDES_DEFAULTS: &str = include_str!("../config/andes_defaults.config");
/// The spec's default policy block, verbatim (`config/default_policy.config`).
pub const DEFAULT_POLICY: &str = include_str!("../config/default_policy.config");
/// The labelled supplement defining the names the default block uses without
/// defining them (`config/default_policy_supplement.config`).
pub const DEFAULT_POLICY_SUPPLEMENT: &str =
    include_str!("../config/default_policy_supplement.config");

/// The spec's test-job policy example (`config/testjob_policy.config`).
pub const TESTJOB_POLICY: &str = include_str!("../config/testjob_policy.config");
/// The spec's time-of-day policy example (`config/time_of_day_policy.config`).
pub const TIME_OF_DAY_POLICY: &str = include_str!("../config/time_of_day_policy.config");
/// The spec's desktop/non-desktop policy example (`config/desktop_policy.config`).
pub const DESKTOP_POLICY: &str = include_str!("../config/desktop_policy.config");
/// The spec's "disabling preemption" example (`config/disable_preemption_policy.config`).
pub const DISABLE_PREEMPTION_POLICY: &str =
    include_str!("../config/disable_preemption_policy.config");
/// The spec's two-slot job suspension example (`config/job_suspension_policy.config`).
pub const JOB_SUSPENSION_POLICY: &str = include_str!("../config/job_suspension_policy.config");
/// An example backfill configuration (`config/backfill.config`).
pub const BACKFILL_EXAMPLE: &str = include_str!("../config/backfill.config");

/// A configuration holding the andes defaults, then the spec's default
/// policy and its supplement: load site files on top of it.
pub fn default_config() -> Config {
    let mut cfg = Config::new();
    load_defaults(&mut cfg);
    cfg
}

/// Loads andes's defaults, the spec's default policy and its supplement into
/// `cfg` (for a configuration made with an environment, say).
pub fn load_defaults(cfg: &mut Config) {
    // The shipped texts are tested to load; an error here would be a build
    // defect, and the table is left as it was on error anyway.
    for (text, origin) in [
        (ANDES_DEFAULTS, "andes_defaults.config"),
        (DEFAULT_POLICY, "default_policy.config"),
        (DEFAULT_POLICY_SUPPLEMENT, "default_policy_supplement.config"),
    ] {
        let _ = cfg.load_str(text, origin);
    }
}

/// A configuration problem, with the macro and where it was defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The configuration name concerned (`START`, `SLOT_TYPE_1`, ...).
    pub name: String,
    /// Where it was defined (`file, line N`), when known.
    pub location: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(l) => write!(f, "{l}: {}: {}", self.name, self.message),
            None => write!(f, "{}: {}", self.name, self.message),
        }
    }
}

impl std::error::Error for PolicyError {}

impl PolicyError {
    fn new(cfg: &Config, name: &str, message: impl Into<String>) -> PolicyError {
        PolicyError {
            name: name.to_string(),
            location: cfg.location(name).map(|l| l.to_string()),
            message: message.into(),
        }
    }

    fn from_config(cfg: &Config, name: &str, e: ConfigError) -> PolicyError {
        PolicyError::new(cfg, name, e.to_string())
    }
}

/// The expressions that decide a claimed slot's activity, as one set: the
/// standard set, or the `_VANILLA` set for jobs that cannot checkpoint.
#[derive(Debug, Clone)]
pub struct ClaimExprs {
    /// `WANT_SUSPEND`.
    pub want_suspend: Expr,
    /// `SUSPEND`.
    pub suspend: Expr,
    /// `CONTINUE`.
    pub cont: Expr,
    /// `PREEMPT`.
    pub preempt: Expr,
    /// `WANT_VACATE`.
    pub want_vacate: Expr,
    /// `KILL`.
    pub kill: Expr,
}

/// The names of [`ClaimExprs`], as published in the machine ad.
pub static CLAIM_EXPR_NAMES: classad::Names<6> =
    classad::Names::new(["WANT_SUSPEND", "SUSPEND", "CONTINUE", "PREEMPT", "WANT_VACATE", "KILL"]);

impl ClaimExprs {
    /// The expressions in the order of [`CLAIM_EXPR_NAMES`].
    pub fn iter(&self) -> [&Expr; 6] {
        [
            &self.want_suspend,
            &self.suspend,
            &self.cont,
            &self.preempt,
            &self.want_vacate,
            &self.kill,
        ]
    }
}

/// One slot's share of the machine, from `SLOT_TYPE_<N>` or an even split.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotSpec {
    /// `Cpus`.
    pub cpus: u32,
    /// `Memory`, in MB.
    pub memory_mb: u64,
    /// `Disk`, in KB.
    pub disk_kb: u64,
    /// `VirtualMemory`, in KB.
    pub virtual_memory_kb: u64,
    /// The slot type (`N` of `SLOT_TYPE_<N>`), 0 for the default type.
    pub slot_type: u32,
}

/// The startd's configuration, read once from a [`Config`].
#[derive(Debug, Clone)]
pub struct Policy {
    /// `START`.
    pub start: Expr,
    /// `IS_OWNER`.
    pub is_owner: Expr,
    /// `IS_VALID_CHECKPOINT_PLATFORM`.
    pub valid_ckpt_platform: Expr,
    /// `RANK`.
    pub rank: Expr,
    /// The standard claim expressions.
    pub standard: ClaimExprs,
    /// The claim expressions for jobs that cannot checkpoint (`_VANILLA`
    /// variants, falling back to the standard ones).
    pub vanilla: ClaimExprs,
    /// `PERIODIC_CHECKPOINT`.
    pub periodic_checkpoint: Expr,
    /// `MAXJOBRETIREMENTTIME` (published as `MaxJobRetirementTime`).
    pub max_job_retirement_time: Expr,
    /// `KILLING_TIMEOUT`.
    pub killing_timeout: Expr,
    /// `CLAIM_WORKLIFE`.
    pub claim_worklife: Expr,
    /// `MATCH_TIMEOUT`.
    pub match_timeout: Expr,
    /// `RunBenchmarks`.
    pub run_benchmarks: Expr,
    /// `START_BACKFILL`.
    pub start_backfill: Expr,
    /// `EVICT_BACKFILL`.
    pub evict_backfill: Expr,
    /// The `CPUBusy` macro, giving `CpuIsBusy` and `CpuBusyTime`.
    pub cpu_busy: Expr,
    /// `MACHINE_MAX_VACATE_TIME`: the soft kill's grace, in seconds.
    pub machine_max_vacate_time: i64,
    /// `POLLING_INTERVAL`, seconds.
    pub polling_interval: i64,
    /// `UPDATE_INTERVAL`, seconds.
    pub update_interval: i64,
    /// `ENABLE_BACKFILL` (and `BACKFILL_SYSTEM` is `andes`).
    pub backfill: bool,
    /// `BACKFILL_JOBS`: the backfill jobs, started in turn.
    pub backfill_jobs: Vec<String>,
    /// `STARTD_ATTRS` / `STARTD_EXPRS`: configuration names added to every
    /// slot's ad, with their expressions.
    pub startd_attrs: Vec<(String, Expr)>,
    /// `STARTD_SLOT_ATTRS` / `STARTD_SLOT_EXPRS` / `STARTD_VM_EXPRS`:
    /// attributes of each slot published in every slot's ad as
    /// `slot<N>_<name>` and `vm<N>_<name>`.
    pub cross_slot_attrs: Vec<String>,
    /// `NUM_CPUS`, when configured.
    pub num_cpus: Option<u32>,
    /// `MEMORY` (MB), when configured.
    pub memory_mb: Option<u64>,
    /// `SLOT_TYPE_<N>` and `NUM_SLOTS_TYPE_<N>`: (type, count, text).
    pub slot_types: Vec<(u32, u32, String)>,
    /// `NUM_SLOTS`, when configured.
    pub num_slots: Option<u32>,
    /// `UID_DOMAIN` (`UidDomain`), when configured; else the host's name.
    pub uid_domain: Option<String>,
    /// `FILESYSTEM_DOMAIN` (`FileSystemDomain`), when configured; else the
    /// host's name.
    pub filesystem_domain: Option<String>,
}

fn expr_or(cfg: &Config, name: &str, fallback: &str) -> Result<Expr, PolicyError> {
    let text = cfg.get(name).map_err(|e| PolicyError::from_config(cfg, name, e))?;
    let text = match text {
        Some(t) if !t.trim().is_empty() => t,
        _ => fallback.to_string(),
    };
    parse_expr(&text).map_err(|e| {
        PolicyError::new(cfg, name, format!("not a ClassAd expression: {e} (in `{}`)", text.trim()))
    })
}

fn int_or(cfg: &Config, name: &str, fallback: i64) -> Result<i64, PolicyError> {
    let e = expr_or(cfg, name, &fallback.to_string())?;
    match classad::Evaluator::new().eval(&e, None, None) {
        classad::Value::Int(i) => Ok(i),
        classad::Value::Real(r) if r.is_finite() => Ok(r as i64),
        v => Err(PolicyError::new(cfg, name, format!("must be an integer, is {v}"))),
    }
}

fn bool_or(cfg: &Config, name: &str, fallback: bool) -> Result<bool, PolicyError> {
    let e = expr_or(cfg, name, if fallback { "true" } else { "false" })?;
    match classad::Evaluator::new().eval(&e, None, None).as_bool() {
        Some(b) => Ok(b),
        None => Err(PolicyError::new(cfg, name, "must be True or False")),
    }
}

/// A configured string, `None` when unset or empty.
fn text(cfg: &Config, name: &str) -> Result<Option<String>, PolicyError> {
    let v = cfg.get(name).map_err(|e| PolicyError::from_config(cfg, name, e))?;
    Ok(v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
}

fn list(cfg: &Config, name: &str) -> Result<Vec<String>, PolicyError> {
    let text = cfg.get(name).map_err(|e| PolicyError::from_config(cfg, name, e))?;
    Ok(text
        .unwrap_or_default()
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect())
}

/// The most slots or slot types a configuration may ask for.
pub const MAX_SLOTS: u32 = 4096;

impl Policy {
    /// Reads the policy from `cfg` (usually [`default_config`] with site
    /// files loaded on top).
    pub fn from_config(cfg: &Config) -> Result<Policy, PolicyError> {
        let claim = |suffix: &str, base: Option<&ClaimExprs>| -> Result<ClaimExprs, PolicyError> {
            let one = |name: &str, fallback: &Expr| -> Result<Expr, PolicyError> {
                let full = format!("{name}{suffix}");
                if suffix.is_empty() || cfg.is_defined(&full) {
                    expr_or(cfg, &full, &fallback.to_string())
                } else {
                    Ok(fallback.clone())
                }
            };
            let f = |s: &str| parse_expr(s).unwrap_or(Expr::Lit(classad::Value::Bool(false)));
            let d = match base {
                Some(b) => b.clone(),
                None => ClaimExprs {
                    want_suspend: f("false"),
                    suspend: f("false"),
                    cont: f("true"),
                    preempt: f("false"),
                    want_vacate: f("true"),
                    kill: f("false"),
                },
            };
            Ok(ClaimExprs {
                want_suspend: one("WANT_SUSPEND", &d.want_suspend)?,
                suspend: one("SUSPEND", &d.suspend)?,
                cont: one("CONTINUE", &d.cont)?,
                preempt: one("PREEMPT", &d.preempt)?,
                want_vacate: one("WANT_VACATE", &d.want_vacate)?,
                kill: one("KILL", &d.kill)?,
            })
        };
        let standard = claim("", None)?;
        let vanilla = claim("_VANILLA", Some(&standard))?;
        let mut startd_attrs = Vec::new();
        for key in ["STARTD_ATTRS", "STARTD_EXPRS"] {
            for name in list(cfg, key)? {
                if startd_attrs.iter().any(|(n, _): &(String, Expr)| n.eq_ignore_ascii_case(&name))
                {
                    continue;
                }
                if cfg.is_defined(&name) {
                    startd_attrs.push((name.clone(), expr_or(cfg, &name, "undefined")?));
                }
            }
        }
        let mut cross_slot_attrs: Vec<String> = Vec::new();
        for key in ["STARTD_SLOT_ATTRS", "STARTD_SLOT_EXPRS", "STARTD_VM_EXPRS", "STARTD_VM_ATTRS"]
        {
            for name in list(cfg, key)? {
                if !cross_slot_attrs.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
                    cross_slot_attrs.push(name);
                }
            }
        }
        let mut slot_types = Vec::new();
        for n in 1..=MAX_SLOTS.min(64) {
            let name = format!("SLOT_TYPE_{n}");
            let vm_name = format!("VIRTUAL_MACHINE_TYPE_{n}");
            let text = cfg
                .get(&name)
                .map_err(|e| PolicyError::from_config(cfg, &name, e))?
                .or(cfg.get(&vm_name).map_err(|e| PolicyError::from_config(cfg, &vm_name, e))?);
            let Some(text) = text else { continue };
            let count_name = format!("NUM_SLOTS_TYPE_{n}");
            let count = if cfg.is_defined(&count_name) {
                int_or(cfg, &count_name, 0)?
            } else {
                int_or(cfg, &format!("NUM_VIRTUAL_MACHINES_TYPE_{n}"), 0)?
            };
            if !(0..=MAX_SLOTS as i64).contains(&count) {
                return Err(PolicyError::new(
                    cfg,
                    &count_name,
                    format!("must be 0 to {MAX_SLOTS}"),
                ));
            }
            slot_types.push((n, count as u32, text));
        }
        let opt_u = |name: &str| -> Result<Option<i64>, PolicyError> {
            if cfg.get(name).map_err(|e| PolicyError::from_config(cfg, name, e))?.is_some() {
                let v = int_or(cfg, name, 0)?;
                if v < 0 {
                    return Err(PolicyError::new(cfg, name, "must not be negative"));
                }
                Ok(Some(v))
            } else {
                Ok(None)
            }
        };
        let num_cpus = opt_u("NUM_CPUS")?;
        if num_cpus.is_some_and(|n| n == 0 || n > MAX_SLOTS as i64) {
            return Err(PolicyError::new(cfg, "NUM_CPUS", format!("must be 1 to {MAX_SLOTS}")));
        }
        let num_slots = opt_u("NUM_SLOTS")?.or(opt_u("NUM_VIRTUAL_MACHINES")?);
        if num_slots.is_some_and(|n| n > MAX_SLOTS as i64) {
            return Err(PolicyError::new(cfg, "NUM_SLOTS", format!("must be 0 to {MAX_SLOTS}")));
        }
        let backfill_system = cfg
            .get("BACKFILL_SYSTEM")
            .map_err(|e| PolicyError::from_config(cfg, "BACKFILL_SYSTEM", e))?
            .unwrap_or_default();
        let backfill = bool_or(cfg, "ENABLE_BACKFILL", false)?;
        if backfill && !backfill_system.trim().eq_ignore_ascii_case("andes") {
            return Err(PolicyError::new(
                cfg,
                "BACKFILL_SYSTEM",
                format!("`{}` is not a backfill system andes runs (use `andes`)", backfill_system),
            ));
        }
        let positive = |name: &str, d: i64| -> Result<i64, PolicyError> {
            let v = int_or(cfg, name, d)?;
            if v <= 0 {
                return Err(PolicyError::new(cfg, name, "must be a positive number of seconds"));
            }
            Ok(v)
        };
        Ok(Policy {
            start: expr_or(cfg, "START", "true")?,
            is_owner: expr_or(cfg, "IS_OWNER", "(START =?= FALSE)")?,
            valid_ckpt_platform: expr_or(cfg, "IS_VALID_CHECKPOINT_PLATFORM", "true")?,
            rank: expr_or(cfg, "RANK", "0")?,
            standard,
            vanilla,
            periodic_checkpoint: expr_or(cfg, "PERIODIC_CHECKPOINT", "false")?,
            max_job_retirement_time: expr_or(cfg, "MAXJOBRETIREMENTTIME", "0")?,
            killing_timeout: expr_or(cfg, "KILLING_TIMEOUT", "30")?,
            claim_worklife: expr_or(cfg, "CLAIM_WORKLIFE", "-1")?,
            match_timeout: expr_or(cfg, "MATCH_TIMEOUT", "120")?,
            run_benchmarks: expr_or(cfg, "RunBenchmarks", "false")?,
            start_backfill: expr_or(cfg, "START_BACKFILL", "false")?,
            evict_backfill: expr_or(cfg, "EVICT_BACKFILL", "false")?,
            cpu_busy: expr_or(cfg, "CPUBusy", "false")?,
            machine_max_vacate_time: int_or(cfg, "MACHINE_MAX_VACATE_TIME", 600)?.max(0),
            polling_interval: positive("POLLING_INTERVAL", 5)?,
            update_interval: positive("UPDATE_INTERVAL", 300)?,
            backfill,
            backfill_jobs: list(cfg, "BACKFILL_JOBS")?,
            startd_attrs,
            cross_slot_attrs,
            num_cpus: num_cpus.map(|n| n as u32),
            memory_mb: opt_u("MEMORY")?.map(|n| n as u64),
            slot_types,
            num_slots: num_slots.map(|n| n as u32),
            uid_domain: text(cfg, "UID_DOMAIN")?,
            filesystem_domain: text(cfg, "FILESYSTEM_DOMAIN")?,
        })
    }

    /// The default policy: [`default_config`] alone.
    pub fn default_policy() -> Policy {
        // The shipped configuration is tested to read without error.
        Policy::from_config(&default_config()).unwrap_or_else(|e| unreachable!("{e}"))
    }

    /// Divides a machine of `cpus` CPUs, `memory_mb`, `disk_kb` and
    /// `virtual_memory_kb` into slots as `NUM_CPUS`, `MEMORY`,
    /// `SLOT_TYPE_<N>`/`NUM_SLOTS_TYPE_<N>` and `NUM_SLOTS` say: by default
    /// one slot per CPU, dividing memory and disk evenly.
    pub fn slot_layout(
        &self,
        cpus: u32,
        memory_mb: u64,
        disk_kb: u64,
        virtual_memory_kb: u64,
    ) -> Result<Vec<SlotSpec>, PolicyError> {
        let cpus = self.num_cpus.unwrap_or(cpus).clamp(1, MAX_SLOTS);
        let memory_mb = self.memory_mb.unwrap_or(memory_mb);
        let total =
            Resources { cpus: cpus as f64, mem: memory_mb, disk: disk_kb, swap: virtual_memory_kb };
        let mut out = Vec::new();
        let typed: Vec<_> = self.slot_types.iter().filter(|(_, n, _)| *n > 0).collect();
        if !typed.is_empty() {
            for (t, count, text) in typed {
                let spec = parse_slot_type(text, &total).map_err(|m| PolicyError {
                    name: format!("SLOT_TYPE_{t}"),
                    location: None,
                    message: m,
                })?;
                for _ in 0..*count {
                    if out.len() >= MAX_SLOTS as usize {
                        break;
                    }
                    out.push(SlotSpec { slot_type: *t, ..spec.clone() });
                }
            }
            return Ok(out);
        }
        let n = self.num_slots.unwrap_or(cpus).clamp(1, MAX_SLOTS);
        for _ in 0..n {
            out.push(SlotSpec {
                cpus: (cpus / n).max(1),
                memory_mb: memory_mb / n as u64,
                disk_kb: disk_kb / n as u64,
                virtual_memory_kb: virtual_memory_kb / n as u64,
                slot_type: 0,
            });
        }
        Ok(out)
    }
}

struct Resources {
    cpus: f64,
    mem: u64,
    disk: u64,
    swap: u64,
}

/// A share: an absolute number, `N%` or `a/b` of the whole.
fn share(text: &str, whole: f64) -> Result<f64, String> {
    let t = text.trim();
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p.trim().parse().map_err(|_| format!("`{t}` is not a percentage"))?;
        return Ok(whole * v / 100.0);
    }
    if let Some((a, b)) = t.split_once('/') {
        let a: f64 = a.trim().parse().map_err(|_| format!("`{t}` is not a fraction"))?;
        let b: f64 = b.trim().parse().map_err(|_| format!("`{t}` is not a fraction"))?;
        if b == 0.0 {
            return Err(format!("`{t}` divides by zero"));
        }
        return Ok(whole * a / b);
    }
    t.parse::<f64>().map_err(|_| format!("`{t}` is not a number, a percentage or a fraction"))
}

/// `SLOT_TYPE_<N>`: `cpus=2, memory=50%, disk=1/4, swap=...` (HTCondor's
/// keys and abbreviations: c/cpus, m/mem/memory/ram, d/disk, v/swap), or a
/// single share of everything (`1/4`, `25%`). Unnamed resources get an even
/// share by CPUs.
fn parse_slot_type(text: &str, total: &Resources) -> Result<SlotSpec, String> {
    let t = text.trim();
    if !t.contains('=') {
        let f = share(t, 1.0)?;
        if !(0.0..=1.0).contains(&f) {
            return Err(format!("`{t}` is not a share of the machine"));
        }
        return Ok(SlotSpec {
            cpus: ((total.cpus * f).round() as u32).max(1),
            memory_mb: (total.mem as f64 * f) as u64,
            disk_kb: (total.disk as f64 * f) as u64,
            virtual_memory_kb: (total.swap as f64 * f) as u64,
            slot_type: 0,
        });
    }
    let (mut cpus, mut mem, mut disk, mut swap) = (None, None, None, None);
    for part in t.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (k, v) = part.split_once('=').ok_or_else(|| format!("`{part}` is not key=value"))?;
        match k.trim().to_ascii_lowercase().as_str() {
            "c" | "cpu" | "cpus" => cpus = Some(share(v, total.cpus)?),
            "m" | "mem" | "memory" | "ram" => mem = Some(share(v, total.mem as f64)?),
            "d" | "disk" => disk = Some(share(v, total.disk as f64)?),
            "v" | "swap" | "virtualmemory" => swap = Some(share(v, total.swap as f64)?),
            other => return Err(format!("unknown resource `{other}`")),
        }
    }
    let cpus = cpus.unwrap_or(1.0).round().max(1.0);
    if cpus > MAX_SLOTS as f64 {
        return Err(format!("{cpus} CPUs is too many"));
    }
    let f = cpus / total.cpus.max(1.0);
    let nn = |x: f64| if x.is_finite() && x > 0.0 { x as u64 } else { 0 };
    Ok(SlotSpec {
        cpus: cpus as u32,
        memory_mb: nn(mem.unwrap_or(total.mem as f64 * f)),
        disk_kb: nn(disk.unwrap_or(total.disk as f64 * f)),
        virtual_memory_kb: nn(swap.unwrap_or(total.swap as f64 * f)),
        slot_type: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_configuration_reads() {
        let p = Policy::default_policy();
        assert_eq!(p.polling_interval, 5);
        assert_eq!(p.update_interval, 300);
        assert!(!p.backfill);
        assert!(p.standard.want_suspend.to_string().contains("ImageSize"));
    }

    #[test]
    fn one_slot_per_cpu_dividing_memory_and_disk() {
        let p = Policy::default_policy();
        let s = p.slot_layout(4, 8000, 4000, 400).unwrap();
        assert_eq!(s.len(), 4);
        assert!(s.iter().all(|s| s.cpus == 1 && s.memory_mb == 2000 && s.disk_kb == 1000));
    }

    #[test]
    fn slot_types_as_htcondor_writes_them() {
        let mut cfg = default_config();
        cfg.load_str(
            "SLOT_TYPE_1 = cpus=2, memory=50%, disk=1/2\nNUM_SLOTS_TYPE_1 = 1\n\
             SLOT_TYPE_2 = 1/4\nNUM_SLOTS_TYPE_2 = 2\n",
            "site.config",
        )
        .unwrap();
        let p = Policy::from_config(&cfg).unwrap();
        let s = p.slot_layout(4, 8000, 4000, 0).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].cpus, s[0].memory_mb, s[0].disk_kb, s[0].slot_type), (2, 4000, 2000, 1));
        assert_eq!((s[1].cpus, s[1].memory_mb, s[1].slot_type), (1, 2000, 2));
    }

    #[test]
    fn a_bad_expression_says_which_and_where() {
        let mut cfg = default_config();
        cfg.load_str("\nSTART = (KeyboardIdle > \n", "site.config").unwrap();
        let e = Policy::from_config(&cfg).unwrap_err();
        assert_eq!(e.name, "START");
        assert_eq!(e.location.as_deref(), Some("site.config, line 2"));
        assert!(e.to_string().starts_with("site.config, line 2: START: not a ClassAd"), "{e}");
    }

    #[test]
    fn slots_are_bounded_whatever_the_host_reports() {
        let p = Policy::default_policy();
        assert_eq!(p.slot_layout(u32::MAX, 1, 1, 1).unwrap().len(), MAX_SLOTS as usize);
        assert_eq!(p.slot_layout(0, 1, 1, 1).unwrap().len(), 1);
    }

    #[test]
    fn a_bad_slot_type_is_refused() {
        let mut cfg = default_config();
        cfg.load_str("SLOT_TYPE_1 = cpus=two\nNUM_SLOTS_TYPE_1 = 1\n", "s").unwrap();
        let p = Policy::from_config(&cfg).unwrap();
        let e = p.slot_layout(4, 100, 100, 0).unwrap_err();
        assert_eq!(e.name, "SLOT_TYPE_1");
    }
}
