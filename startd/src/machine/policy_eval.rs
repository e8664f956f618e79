//! Evaluating the policy for a slot: the slot's ad as MY, the job (or the
//! claim's request) as TARGET; the claim expressions by their published
//! names; what counts as true and as false.

use classad::{AttrName, ClassAd, Expr, Value};

use super::Startd;
use crate::policy::Policy;

/// Attribute names the startd writes at every refresh, made once.
pub(super) struct Names {
    pub(super) loadavg: AttrName,
    pub(super) condorloadavg: AttrName,
    pub(super) keyboardidle: AttrName,
    pub(super) consoleidle: AttrName,
    pub(super) clockmin: AttrName,
    pub(super) clockday: AttrName,
    pub(super) totalclaimruntime: AttrName,
    pub(super) totalclaimsuspendtime: AttrName,
    pub(super) totaljobruntime: AttrName,
    pub(super) totaljobsuspendtime: AttrName,
    pub(super) cpuisbusy: AttrName,
    pub(super) cpubusytime: AttrName,
    pub(super) want_suspend: Expr,
    pub(super) suspend: Expr,
    pub(super) cont: Expr,
    pub(super) preempt: Expr,
    pub(super) want_vacate: Expr,
    pub(super) kill: Expr,
    pub(super) periodic_checkpoint: Expr,
}

pub(super) fn names() -> &'static Names {
    static NAMES: std::sync::OnceLock<Names> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| Names {
        loadavg: AttrName::new("LoadAvg"),
        condorloadavg: AttrName::new("CondorLoadAvg"),
        keyboardidle: AttrName::new("KeyboardIdle"),
        consoleidle: AttrName::new("ConsoleIdle"),
        clockmin: AttrName::new("ClockMin"),
        clockday: AttrName::new("ClockDay"),
        totalclaimruntime: AttrName::new("TotalClaimRunTime"),
        totalclaimsuspendtime: AttrName::new("TotalClaimSuspendTime"),
        totaljobruntime: AttrName::new("TotalJobRunTime"),
        totaljobsuspendtime: AttrName::new("TotalJobSuspendTime"),
        cpuisbusy: AttrName::new("CpuIsBusy"),
        cpubusytime: AttrName::new("CpuBusyTime"),
        want_suspend: Expr::attr("WANT_SUSPEND"),
        suspend: Expr::attr("SUSPEND"),
        cont: Expr::attr("CONTINUE"),
        preempt: Expr::attr("PREEMPT"),
        want_vacate: Expr::attr("WANT_VACATE"),
        kill: Expr::attr("KILL"),
        periodic_checkpoint: Expr::attr("PERIODIC_CHECKPOINT"),
    })
}

pub(super) fn truthy(v: &Value) -> bool {
    v.as_bool() == Some(true)
}

pub(super) fn is_false(v: &Value) -> bool {
    matches!(v, Value::Bool(false))
}

impl Startd {
    /// Evaluates a policy expression with the slot's ad as MY and, as
    /// TARGET, the job (or else the claim's request ad) when `with_job`.
    pub(super) fn pol(&mut self, i: usize, which: fn(&Policy) -> &Expr, with_job: bool) -> Value {
        let s = &self.slots[i];
        let t = if with_job {
            s.job.as_ref().map(|j| &j.ad).or(s.claim.as_ref().map(|c| &c.req.ad))
        } else {
            None
        };
        self.ev.eval(which(&self.policy), Some(&s.ad), t)
    }

    /// Evaluates a policy expression against `target`.
    pub(super) fn pol_with(
        &mut self,
        i: usize,
        which: fn(&Policy) -> &Expr,
        target: &ClassAd,
    ) -> Value {
        self.ev.eval(which(&self.policy), Some(&self.slots[i].ad), Some(target))
    }

    pub(super) fn eval_named(&mut self, i: usize, which: fn(&Names) -> &Expr) -> Value {
        let s = &self.slots[i];
        let target = s.job.as_ref().map(|j| &j.ad).or(s.claim.as_ref().map(|c| &c.req.ad));
        self.ev.eval(which(names()), Some(&s.ad), target)
    }

    pub(super) fn pol_int(&mut self, i: usize, which: fn(&Policy) -> &Expr, default: i64) -> i64 {
        self.pol(i, which, true).as_int().unwrap_or(default)
    }

    pub(super) fn requirements_hold(&mut self, i: usize, ad: &ClassAd) -> bool {
        let start = self.ev.eval_attr(&self.slots[i].ad, Some(ad), classad::name!("START"));
        let ckpt = self.ev.eval_attr(
            &self.slots[i].ad,
            Some(ad),
            classad::name!("IS_VALID_CHECKPOINT_PLATFORM"),
        );
        truthy(&start) && truthy(&ckpt)
    }
}
