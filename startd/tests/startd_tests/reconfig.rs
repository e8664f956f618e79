//! `andes reconfig` (condor_reconfig) at the startd: a policy read again
//! applies at once while every slot keeps its state, claim and job.

use crate::common;

use andes_startd::{Action, Activity, State};
use classad::Value;
use common::*;

#[test]
fn a_new_policy_applies_at_once_and_slots_keep_their_claims_and_jobs() {
    let mut h = Harness::idle(2, &[]);
    h.run_job(1, VANILLA);
    h.tick();
    assert_eq!(h.sa(2), (State::Unclaimed, Activity::Idle));

    // A new START that keeps the running job's claim, an attribute of the
    // site's, and a slot layout the running machine cannot take.
    let r = h.sd.reconfigure(
        policy(&[
            "START = $(START) && (TARGET.NoSuchAttribute =!= 42)",
            "SITE_TAG = \"blue\"\nSTARTD_ATTRS = SITE_TAG",
            "NUM_CPUS = 8",
        ]),
        h.now,
    );
    assert!(r.changed.contains(&"START".to_string()), "{r:?}");
    assert!(r.changed.contains(&"STARTD_ATTRS".to_string()), "{r:?}");
    assert!(!r.changed.contains(&"RANK".to_string()), "{r:?}");
    assert_eq!(r.at_restart, vec!["NUM_CPUS".to_string()]);
    let a = h.tick();
    assert!(
        a.iter().all(|a| matches!(a, Action::Publish { .. } | Action::Transition { .. })),
        "a reconfiguration touches no job: {a:?}"
    );
    assert_eq!(h.sd.slots().len(), 2, "the layout waits for a restart");
    assert_eq!(h.sa(1), (State::Claimed, Activity::Busy));
    assert!(h.sd.slot(1).unwrap().job().is_some(), "the job runs on");
    for s in h.sd.slots() {
        let start = s.ad().get("START").map(|e| e.to_string()).unwrap_or_default();
        assert!(start.contains("NoSuchAttribute"), "slot {}: START = {start}", s.id());
        assert_eq!(s.ad().eval_attr("SITE_TAG"), Value::from("blue"));
    }

    // START turned false: the unclaimed slot goes to Owner (transition 2)
    // at once; the attribute the site dropped leaves every ad.
    let r = h.sd.reconfigure(policy(&["START = False"]), h.now);
    assert!(r.changed.contains(&"START".to_string()), "{r:?}");
    assert!(r.changed.contains(&"STARTD_ATTRS".to_string()), "{r:?}");
    assert!(r.at_restart.is_empty(), "{r:?}");
    h.tick();
    assert_eq!(h.sa(2).0, State::Owner);
    assert!(h.sd.slots().iter().all(|s| s.ad().get("SITE_TAG").is_none()));

    // The same configuration again changes nothing.
    let r = h.sd.reconfigure(policy(&["START = False"]), h.now);
    assert_eq!((r.changed.len(), r.at_restart.len()), (0, 0), "{r:?}");
}
