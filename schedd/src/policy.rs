//! Job policy expressions, as the schedd evaluates them: `OnExitHold` and
//! `OnExitRemove` when a job ends, and `PeriodicHold`, `PeriodicRelease`,
//! `PeriodicRemove` (and `TimerRemove`) every `PERIODIC_EXPR_INTERVAL`.
//!
//! Pure functions of a job ad and `now`: the queue calls them and applies the answer.
//! The rules are HTCondor's:
//! - an expression is true when it evaluates to a non-zero number (booleans included);
//! - one that evaluates to anything else (undefined, error, a string, or `error`
//!   because it ran past its evaluation budget) holds the job, with
//!   HoldReasonCode 5 (JobPolicyUndefined) and the reason
//!   `The job attribute PeriodicHold expression '...' evaluated to UNDEFINED`:
//!   HTCondor's `UNDEFINED_EVAL` ("the user screwed something up and they better
//!   deal with it"), for the periodic and the exit expressions alike; an expression
//!   that is literally `undefined` is simply false;
//! - a missing `OnExitRemove` means remove (complete) on exit;
//! - periodic order: TimerRemove, hold (unless held), release (only if held), then
//!   remove; a held job whose `PeriodicRelease` is undefined stays held as it is.

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
        let Some(Value::Int(code)) =
            ad.get(classad::name!("HoldReasonCode")).and_then(|e| e.as_literal().cloned())
        else {
            return None;
        };
        Some(HoldInfo {
            code,
            reason: match ad.eval_attr(classad::name!("HoldReason")) {
                Value::Str(s) => s.to_string(),
                _ => default_reason.to_string(),
            },
            subcode: match ad.eval_attr(classad::name!("HoldReasonSubCode")) {
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
#[derive(Clone, Copy, PartialEq)]
enum Fired {
    /// Absent, false, or literally undefined.
    No,
    /// True.
    Yes,
    /// Evaluated to something that is not a number (HTCondor's `UNDEFINED_EVAL`).
    Undefined,
}

fn fire(ev: &mut Evaluator, ad: &ClassAd, attr: &classad::AttrName) -> Fired {
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
    firing_reason(ad, attr, "TRUE")
}

/// `The job attribute <attr> expression '<text>' evaluated to <value>`, with
/// the expression's text cut to a kilobyte (it is the user's, and the reason
/// lands in the queue and the event log).
fn firing_reason(ad: &ClassAd, attr: &str, value: &str) -> String {
    const MAX_TEXT: usize = 1024;
    let mut text = ad.get(attr).map(|e| e.to_string()).unwrap_or_default();
    if text.len() > MAX_TEXT {
        let mut cut = MAX_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    format!("The job attribute {attr} expression '{text}' evaluated to {value}")
}

/// HTCondor's hold for an expression that evaluated to neither true nor
/// false: code 5, JobPolicyUndefined.
fn undefined_hold(ad: &ClassAd, attr: &str) -> HoldInfo {
    HoldInfo {
        reason: firing_reason(ad, attr, "UNDEFINED"),
        code: hold_code::JOB_POLICY_UNDEFINED,
        subcode: 0,
    }
}

fn string_attr<N: classad::NameRef + ?Sized>(
    ev: &mut Evaluator,
    ad: &ClassAd,
    attr: &N,
) -> Option<String> {
    match ev.eval_attr(ad, None, attr) {
        Value::Str(s) if !s.is_empty() => Some(s.to_string()),
        _ => None,
    }
}

fn int_attr<N: classad::NameRef + ?Sized>(ev: &mut Evaluator, ad: &ClassAd, attr: &N) -> i64 {
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
    match fire(&mut ev, ad, classad::name!("OnExitHold")) {
        Fired::Yes => return ExitDecision::Hold(policy_hold(&mut ev, ad, "OnExitHold")),
        Fired::Undefined => return ExitDecision::Hold(undefined_hold(ad, "OnExitHold")),
        Fired::No => {}
    }
    match fire(&mut ev, ad, classad::name!("OnExitRemove")) {
        Fired::No if ad.contains(classad::name!("OnExitRemove")) => ExitDecision::Requeue,
        Fired::Undefined => ExitDecision::Hold(undefined_hold(ad, "OnExitRemove")),
        _ => ExitDecision::Complete,
    }
}

/// The periodic policy for a job in `status` at `now`, if any fires.
pub fn periodic(ad: &ClassAd, status: JobStatus, now: i64) -> Option<PeriodicAction> {
    if status.is_terminal() {
        return None;
    }
    let mut ev = evaluator(now);
    if let Value::Int(t) = ev.eval_attr(ad, None, classad::name!("TimerRemove"))
        && t >= 0
        && t < now
    {
        return Some(PeriodicAction::Remove(default_reason(ad, "TimerRemove")));
    }
    // An undefined expression holds the job; a held job stays held.
    let undefined = |attr: &str| match status {
        JobStatus::Held => None,
        _ => Some(PeriodicAction::Hold(undefined_hold(ad, attr))),
    };
    if status != JobStatus::Held {
        match fire(&mut ev, ad, classad::name!("PeriodicHold")) {
            Fired::Yes => {
                return Some(PeriodicAction::Hold(policy_hold(&mut ev, ad, "PeriodicHold")));
            }
            Fired::Undefined => return undefined("PeriodicHold"),
            Fired::No => {}
        }
    }
    if status == JobStatus::Held {
        match fire(&mut ev, ad, classad::name!("PeriodicRelease")) {
            Fired::Yes => {
                let reason = string_attr(&mut ev, ad, classad::name!("PeriodicReleaseReason"))
                    .unwrap_or_else(|| default_reason(ad, "PeriodicRelease"));
                return Some(PeriodicAction::Release(reason));
            }
            Fired::Undefined => return None,
            Fired::No => {}
        }
    }
    match fire(&mut ev, ad, classad::name!("PeriodicRemove")) {
        Fired::Yes => {
            let reason = string_attr(&mut ev, ad, classad::name!("PeriodicRemoveReason"))
                .unwrap_or_else(|| default_reason(ad, "PeriodicRemove"));
            Some(PeriodicAction::Remove(reason))
        }
        Fired::Undefined => undefined("PeriodicRemove"),
        Fired::No => None,
    }
}

/// True when the ad has any periodic expression worth evaluating, so that a
/// periodic pass can skip the (many) jobs that have none.
pub fn has_periodic(ad: &ClassAd) -> bool {
    static PERIODIC: classad::Names<4> =
        classad::Names::new(["PeriodicHold", "PeriodicRelease", "PeriodicRemove", "TimerRemove"]);
    PERIODIC.get().iter().any(|a| {
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
        // An OnExitRemove that evaluates to undefined holds (code 5), as
        // HTCondor's UNDEFINED_EVAL does; literally undefined is false.
        let ExitDecision::Hold(h) = on_exit(&ad("[OnExitRemove = Nope]"), 0) else { panic!() };
        assert_eq!(h.code, hold_code::JOB_POLICY_UNDEFINED);
        assert_eq!(
            h.reason,
            "The job attribute OnExitRemove expression 'Nope' evaluated to UNDEFINED"
        );
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
        // An undefined OnExitHold holds, code 5.
        let ExitDecision::Hold(h) = on_exit(&ad("[OnExitHold = Nope > 1]"), 0) else { panic!() };
        assert_eq!((h.code, h.subcode), (5, 0));
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
    fn periodic_undefined_holds_and_timer_remove_fires() {
        // Literally undefined is false.
        let a = ad("[PeriodicHold = undefined; PeriodicRemove = undefined]");
        assert_eq!(periodic(&a, JobStatus::Idle, 0), None);
        // Anything else that is not a number holds, code 5 (JobPolicyUndefined).
        for text in ["[PeriodicHold = Nope]", "[PeriodicRemove = 1/0]", r#"[PeriodicHold = "x"]"#] {
            let Some(PeriodicAction::Hold(h)) = periodic(&ad(text), JobStatus::Idle, 0) else {
                panic!("{text}")
            };
            assert_eq!(h.code, hold_code::JOB_POLICY_UNDEFINED, "{text}");
            assert!(h.reason.ends_with("evaluated to UNDEFINED"), "{}", h.reason);
        }
        // A held job whose release is undefined stays held as it is.
        assert_eq!(periodic(&ad("[PeriodicRelease = Nope]"), JobStatus::Held, 0), None);
        let a = ad("[TimerRemove = 100]");
        assert_eq!(periodic(&a, JobStatus::Idle, 100), None);
        assert!(matches!(periodic(&a, JobStatus::Idle, 101), Some(PeriodicAction::Remove(_))));
    }

    /// An expression that runs past its evaluation budget (here one whose
    /// string doubles at each link) is error, so it holds its job: it is
    /// never evaluated at a daemon's cost again until someone releases it.
    #[test]
    fn a_policy_past_its_budget_holds_its_job_with_code_5() {
        let mut text = String::from(r#"[a0 = "x""#);
        for i in 1..=40 {
            text.push_str(&format!(r#"; a{i} = join(a{}, {{"y","y","y"}})"#, i - 1));
        }
        text.push_str("; PeriodicRelease = size(a40) > 0; PeriodicHold = size(a40) > 0]");
        let a = ad(&text);
        let Some(PeriodicAction::Hold(h)) = periodic(&a, JobStatus::Idle, 0) else { panic!() };
        assert_eq!(h.code, 5);
        assert_eq!(periodic(&a, JobStatus::Held, 0), None);
        let ExitDecision::Hold(h) = on_exit(&ad(&text.replace("PeriodicHold", "OnExitHold")), 0)
        else {
            panic!()
        };
        assert_eq!(h.code, 5);
    }

    #[test]
    fn has_periodic_skips_false_and_missing() {
        assert!(!has_periodic(&ad("[PeriodicHold = false; PeriodicRemove = undefined]")));
        assert!(has_periodic(&ad("[PeriodicRemove = x > 1]")));
    }
}
