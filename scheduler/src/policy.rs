//! Job policy expressions, as the schedd evaluates them: `OnExitHold` and
//! `OnExitRemove` when a job ends, and `PeriodicHold`, `PeriodicRelease`,
//! `PeriodicRemove` (and `TimerRemove`) every `PERIODIC_EXPR_INTERVAL`.
//!
//! Pure functions of a job ad and `now`: the queue calls them and applies the answer.
//! The rules are HTCondor's:
//! - an expression is true when it evaluates to a non-zero number (booleans included);
//! - a periodic expression, or `OnExitHold`, that evaluates to anything else
//!   (undefined, error, a string) is ignored, unless it is literally `undefined`,
//!   which is simply false;
//! - a missing `OnExitRemove` means remove (complete) on exit, and so does one that
//!   evaluates to undefined;
//! - periodic order: hold (unless held), release (only if held), then remove.

use classad::{ClassAd, EvalOptions, Evaluator, Expr, Value};

use crate::job::{JobStatus, hold_code};

/// What the schedd does with a job that has just ended.
#[derive(Clone, Debug, PartialEq)]
pub enum ExitDecision {
    /// Leave the queue as Completed.
    Complete,
    /// Put the job on hold.
    Hold(HoldInfo),
    /// Back to Idle, to run again (`OnExitRemove` false).
    Requeue,
}

/// A hold's reason, code and subcode.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HoldInfo {
    /// HoldReason.
    pub reason: String,
    /// HoldReasonCode.
    pub code: i64,
    /// HoldReasonSubCode.
    pub subcode: i64,
}

impl HoldInfo {
    /// The hold `ad` records, if it has a HoldReasonCode: its HoldReason
    /// (else `default_reason`) and HoldReasonSubCode (else 0).
    pub fn from_ad(ad: &ClassAd, default_reason: &str) -> Option<HoldInfo> {
        let Some(Value::Int(code)) = ad.get("HoldReasonCode").and_then(|e| e.as_literal().cloned())
        else {
            return None;
        };
        Some(HoldInfo {
            code,
            reason: match ad.eval_attr("HoldReason") {
                Value::Str(s) => s.to_string(),
                _ => default_reason.to_string(),
            },
            subcode: match ad.eval_attr("HoldReasonSubCode") {
                Value::Int(s) => s,
                _ => 0,
            },
        })
    }
}

/// What a periodic evaluation asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum PeriodicAction {
    /// Hold the job.
    Hold(HoldInfo),
    /// Release the held job, with this ReleaseReason.
    Release(String),
    /// Remove the job, with this RemoveReason.
    Remove(String),
}

/// The outcome of evaluating one policy attribute.
enum Fired {
    /// Absent, false, or literally undefined.
    No,
    /// True.
    Yes,
    /// Evaluated to something that is not a number.
    Undefined,
}

fn fire(ev: &mut Evaluator, ad: &ClassAd, attr: &str) -> Fired {
    let Some(expr) = ad.get(attr) else { return Fired::No };
    if matches!(expr.unparen(), Expr::Lit(Value::Undefined)) {
        return Fired::No;
    }
    match ev.eval_attr(ad, None, attr) {
        Value::Bool(b) => bool_fired(b),
        Value::Int(i) => bool_fired(i != 0),
        Value::Real(r) => bool_fired(r != 0.0),
        _ => Fired::Undefined,
    }
}

fn bool_fired(b: bool) -> Fired {
    if b { Fired::Yes } else { Fired::No }
}

fn evaluator(now: i64) -> Evaluator {
    Evaluator::with_options(EvalOptions { now: Some(now), ..EvalOptions::default() })
}

/// The reason HTCondor gives when the job names none:
/// `The job attribute PeriodicHold expression '...' evaluated to TRUE`.
fn default_reason(ad: &ClassAd, attr: &str) -> String {
    let text = ad.get(attr).map(|e| e.to_string()).unwrap_or_default();
    format!("The job attribute {attr} expression '{text}' evaluated to TRUE")
}

fn string_attr(ev: &mut Evaluator, ad: &ClassAd, attr: &str) -> Option<String> {
    match ev.eval_attr(ad, None, attr) {
        Value::Str(s) if !s.is_empty() => Some(s.to_string()),
        _ => None,
    }
}

fn int_attr(ev: &mut Evaluator, ad: &ClassAd, attr: &str) -> i64 {
    match ev.eval_attr(ad, None, attr) {
        Value::Int(i) => i,
        Value::Real(r) if r.is_finite() => r as i64,
        Value::Bool(b) => b as i64,
        _ => 0,
    }
}

fn policy_hold(ev: &mut Evaluator, ad: &ClassAd, attr: &str) -> HoldInfo {
    HoldInfo {
        reason: string_attr(ev, ad, &format!("{attr}Reason"))
            .unwrap_or_else(|| default_reason(ad, attr)),
        code: hold_code::JOB_POLICY,
        subcode: int_attr(ev, ad, &format!("{attr}SubCode")),
    }
}

/// The schedd's decision for a job that ended, whose ad already carries the
/// ending (`ExitCode` or `ExitSignal`, `ExitBySignal`, usage).
pub fn on_exit(ad: &ClassAd, now: i64) -> ExitDecision {
    let mut ev = evaluator(now);
    if let Fired::Yes = fire(&mut ev, ad, "OnExitHold") {
        return ExitDecision::Hold(policy_hold(&mut ev, ad, "OnExitHold"));
    }
    match fire(&mut ev, ad, "OnExitRemove") {
        Fired::No if ad.contains("OnExitRemove") => ExitDecision::Requeue,
        _ => ExitDecision::Complete,
    }
}

/// The periodic policy for a job in `status` at `now`, if any fires.
pub fn periodic(ad: &ClassAd, status: JobStatus, now: i64) -> Option<PeriodicAction> {
    if status.is_terminal() {
        return None;
    }
    let mut ev = evaluator(now);
    if let Value::Int(t) = ev.eval_attr(ad, None, "TimerRemove")
        && t >= 0
        && t < now
    {
        return Some(PeriodicAction::Remove(default_reason(ad, "TimerRemove")));
    }
    if status != JobStatus::Held
        && let Fired::Yes = fire(&mut ev, ad, "PeriodicHold")
    {
        return Some(PeriodicAction::Hold(policy_hold(&mut ev, ad, "PeriodicHold")));
    }
    if status == JobStatus::Held
        && let Fired::Yes = fire(&mut ev, ad, "PeriodicRelease")
    {
        let reason = string_attr(&mut ev, ad, "PeriodicReleaseReason")
            .unwrap_or_else(|| default_reason(ad, "PeriodicRelease"));
        return Some(PeriodicAction::Release(reason));
    }
    if let Fired::Yes = fire(&mut ev, ad, "PeriodicRemove") {
        let reason = string_attr(&mut ev, ad, "PeriodicRemoveReason")
            .unwrap_or_else(|| default_reason(ad, "PeriodicRemove"));
        return Some(PeriodicAction::Remove(reason));
    }
    None
}

/// True when the ad has any periodic expression worth evaluating, so that a
/// periodic pass can skip the (many) jobs that have none.
pub fn has_periodic(ad: &ClassAd) -> bool {
    ["PeriodicHold", "PeriodicRelease", "PeriodicRemove", "TimerRemove"].iter().any(|a| {
        ad.get(a).is_some_and(|e| {
            !matches!(e.unparen(), Expr::Lit(Value::Bool(false)) | Expr::Lit(Value::Undefined))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ad(text: &str) -> ClassAd {
        classad::parse_ad(text).unwrap()
    }

    #[test]
    fn exit_defaults_to_complete() {
        assert_eq!(on_exit(&ad("[ExitCode = 3]"), 0), ExitDecision::Complete);
        // Undefined OnExitRemove removes, as HTCondor does.
        assert_eq!(on_exit(&ad("[OnExitRemove = Nope]"), 0), ExitDecision::Complete);
    }

    #[test]
    fn exit_remove_false_requeues() {
        let a = ad("[ExitCode = 3; OnExitRemove = ExitCode == 0]");
        assert_eq!(on_exit(&a, 0), ExitDecision::Requeue);
        let a = ad("[ExitCode = 0; OnExitRemove = ExitCode == 0]");
        assert_eq!(on_exit(&a, 0), ExitDecision::Complete);
    }

    #[test]
    fn exit_hold_with_reason_and_subcode() {
        let a = ad(r#"[ExitCode = 7; OnExitHold = ExitCode =!= 0;
            OnExitHoldReason = strcat("exit ", string(ExitCode)); OnExitHoldSubCode = ExitCode]"#);
        assert_eq!(
            on_exit(&a, 0),
            ExitDecision::Hold(HoldInfo { reason: "exit 7".into(), code: 3, subcode: 7 })
        );
        let a = ad("[ExitCode = 7; OnExitHold = ExitCode > 1]");
        let ExitDecision::Hold(h) = on_exit(&a, 0) else { panic!() };
        assert_eq!(
            h.reason,
            "The job attribute OnExitHold expression 'ExitCode > 1' evaluated to TRUE"
        );
        // An undefined OnExitHold is ignored.
        assert_eq!(on_exit(&ad("[OnExitHold = Nope > 1]"), 0), ExitDecision::Complete);
    }

    #[test]
    fn periodic_hold_uses_now() {
        let a = ad(r#"[JobStatus = 2; EnteredCurrentStatus = 1000;
            PeriodicHold = (CurrentTime - EnteredCurrentStatus) > 3600;
            PeriodicHoldReason = "ran too long"]"#);
        assert_eq!(periodic(&a, JobStatus::Running, 4000), None);
        assert_eq!(
            periodic(&a, JobStatus::Running, 4601),
            Some(PeriodicAction::Hold(HoldInfo {
                reason: "ran too long".into(),
                code: 3,
                subcode: 0
            }))
        );
        // Not evaluated for held jobs.
        assert_eq!(periodic(&a, JobStatus::Held, 9999), None);
    }

    #[test]
    fn periodic_release_only_when_held_and_remove_any_time() {
        let a = ad("[PeriodicRelease = true; PeriodicRemove = NumJobStarts > 2; NumJobStarts = 3]");
        assert!(matches!(periodic(&a, JobStatus::Held, 0), Some(PeriodicAction::Release(_))));
        assert!(matches!(periodic(&a, JobStatus::Idle, 0), Some(PeriodicAction::Remove(_))));
        assert_eq!(periodic(&a, JobStatus::Completed, 0), None);
    }

    #[test]
    fn periodic_undefined_is_ignored_and_timer_remove_fires() {
        let a = ad("[PeriodicHold = Nope; PeriodicRemove = undefined]");
        assert_eq!(periodic(&a, JobStatus::Idle, 0), None);
        let a = ad("[TimerRemove = 100]");
        assert_eq!(periodic(&a, JobStatus::Idle, 100), None);
        assert!(matches!(periodic(&a, JobStatus::Idle, 101), Some(PeriodicAction::Remove(_))));
    }

    #[test]
    fn has_periodic_skips_false_and_missing() {
        assert!(!has_periodic(&ad("[PeriodicHold = false; PeriodicRemove = undefined]")));
        assert!(has_periodic(&ad("[PeriodicRemove = x > 1]")));
    }
}
