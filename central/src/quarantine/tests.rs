use std::sync::Mutex;

use classad::parse_ad;

use super::*;
use crate::negotiator::{
    Accountant, AccountantConfig, NegotiatorConfig, SlotAd, Snapshot, plan_watched,
};

fn request(schedd: &str, proc_id: u32, requirements: &str) -> Request {
    let ad = parse_ad(&format!(
        "[ClusterId = 7; ProcId = {proc_id}; Owner = \"bob\"; RequestMemory = 64; \
          RequestDisk = 1; RequestCpus = 1; Requirements = {requirements}; Rank = 0]"
    ))
    .unwrap();
    Request { schedd: schedd.into(), submitter: "bob@pool".into(), autocluster: 1, ad, idle: 3 }
}

fn slot(name: &str, memory: usize) -> SlotAd {
    let ad = parse_ad(&format!(
        "[Name = \"{name}\"; State = \"Unclaimed\"; Memory = {memory}; Cpus = 1; Disk = 100000; \
          START = true; Requirements = START; Rank = 0]"
    ))
    .unwrap();
    SlotAd { ad: ad.into(), claim_id: format!("claim-{name}") }
}

#[test]
fn a_signature_names_the_jobs_shape_not_which_job_stands_for_it() {
    let sig = Signature::of;
    let a = request("schedd@a", 0, "TARGET.Memory > 1");
    // Another job of the same autocluster stands for it: the same request.
    assert_eq!(sig(&a), sig(&request("schedd@a", 5, "TARGET.Memory > 1")));
    // Changed Requirements, another schedd, another submitter: another.
    assert_ne!(sig(&a), sig(&request("schedd@a", 0, "TARGET.Memory > 2")));
    assert_ne!(sig(&a), sig(&request("schedd@b", 0, "TARGET.Memory > 1")));
    let mut c = a.clone();
    c.submitter = "carol@pool".into();
    assert_ne!(sig(&a), sig(&c));
    // What a request asks for counts; another attribute does not.
    let mut d = a.clone();
    d.ad.insert_value("RequestMemory", 5);
    assert_ne!(sig(&a), sig(&d));
    let mut e = a.clone();
    e.ad.insert_value("Color", "red");
    assert_eq!(sig(&a), sig(&e));
}

/// A watch over a planner's evaluations, as the manager's is, remembering
/// each `enter` and failing (as an evaluator bug would) on one request.
struct Recorder {
    known: Vec<bool>,
    entered: Mutex<Vec<(usize, usize, bool)>>,
    panic_on: Option<usize>,
}

impl Watch for Recorder {
    fn known(&self, r: usize) -> bool {
        self.known[r]
    }
    fn enter(&self, thread: usize, r: usize, alone: bool) {
        self.entered.lock().unwrap().push((thread, r, alone));
        assert_ne!(Some(r), self.panic_on, "an evaluation that fails");
    }
    fn leave(&self, _: usize) {}
}

fn snapshot(requests: usize, slots: usize) -> Snapshot {
    Snapshot {
        // Each slot its own group: work enough for every core.
        slots: (0..slots).map(|i| slot(&format!("slot{i}"), 4096 + i)).collect(),
        requests: (0..requests)
            .map(|i| {
                let mut r = request("schedd@a", 0, &format!("TARGET.Memory > {i}"));
                r.autocluster = i as u32;
                r
            })
            .collect(),
    }
}

#[test]
fn requests_never_evaluated_before_are_evaluated_alone_and_first() {
    // Enough work for the planner to use every core on what it knows.
    let snap = snapshot(400, 100);
    let known: Vec<bool> = (0..400).map(|r| r % 4 != 0).collect();
    let w = Recorder { known: known.clone(), entered: Mutex::new(Vec::new()), panic_on: None };
    let acct = Accountant::new(AccountantConfig::default());
    let p = plan_watched(&snap, &acct, &NegotiatorConfig::default(), 0, &w);
    assert!(p.failed.is_empty());
    let entered = w.entered.into_inner().unwrap();
    assert_eq!(entered.len(), 400, "each request evaluated once");
    // The 100 unknown requests come first, each alone.
    for &(_, r, alone) in &entered[..100] {
        assert!(!known[r] && alone, "request {r} (known: {}) alone: {alone}", known[r]);
    }
    for &(_, r, _) in &entered[100..] {
        assert!(known[r]);
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        assert!(entered[100..].iter().all(|e| !e.2), "known requests evaluated together");
    }
}

#[test]
fn a_request_whose_evaluation_fails_is_listed_and_the_others_are_planned() {
    for known in [false, true] {
        let snap = snapshot(300, 100);
        let w = Recorder {
            known: vec![known; 300],
            entered: Mutex::new(Vec::new()),
            panic_on: Some(17),
        };
        let acct = Accountant::new(AccountantConfig::default());
        let p = plan_watched(&snap, &acct, &NegotiatorConfig::default(), 0, &w);
        assert_eq!(p.failed, vec![17]);
        assert!(p.matches.iter().all(|m| m.request != 17));
        assert_eq!(p.matches.len(), 100, "every slot matched to another request");
        assert_eq!(w.entered.into_inner().unwrap().len(), 300);
    }
}

#[test]
fn a_request_named_alone_in_the_journal_is_quarantined_and_stays_so() {
    let dir = tempfile::tempdir().unwrap();
    let reqs = vec![request("schedd@a", 0, "TARGET.Memory > 1"), request("schedd@a", 1, "X")];
    let sigs: Vec<Signature> = reqs.iter().map(Signature::of).collect();
    {
        let q = Quarantine::open(Some(dir.path()), 100);
        assert!(q.is_empty());
        let w = q.watch(&reqs, &sigs);
        assert!(!w.known(0) && !w.known(1));
        w.enter(0, 1, true);
        // The process aborts here: the record is never blanked.
    }
    let journal = dir.path().join("negotiator.evaluating");
    andes_protocol::journal::mark_aborted(&journal).unwrap();
    let q = Quarantine::open(Some(dir.path()), 200);
    assert_eq!(q.len(), 1);
    assert_eq!(q.why(sigs[1], &reqs[1]).as_deref(), Some(STOPPED));
    assert_eq!(q.why(sigs[0], &reqs[0]), None);
    // Kept across restarts, once the journal is clear.
    let q = Quarantine::open(Some(dir.path()), 300);
    assert_eq!(q.why(sigs[1], &reqs[1]).as_deref(), Some(STOPPED));
    // What passed is known from then on.
    q.passed([sigs[0]]);
    let w = q.watch(&reqs, &sigs);
    assert!(w.known(0) && !w.known(1));
}

#[test]
fn a_request_named_beside_others_is_only_evaluated_alone_next_time() {
    let dir = tempfile::tempdir().unwrap();
    let reqs = vec![request("schedd@a", 0, "A"), request("schedd@a", 0, "B")];
    let sigs: Vec<Signature> = reqs.iter().map(Signature::of).collect();
    {
        let q = Quarantine::open(Some(dir.path()), 100);
        let w = q.watch(&reqs, &sigs);
        w.enter(0, 0, false);
        w.enter(1, 1, false);
    }
    andes_protocol::journal::mark_aborted(&dir.path().join("negotiator.evaluating")).unwrap();
    let q = Quarantine::open(Some(dir.path()), 200);
    assert!(q.is_empty(), "an innocent request may have been named");
    let w = q.watch(&reqs, &sigs);
    assert!(!w.known(0) && !w.known(1));
}

#[test]
fn the_quarantine_is_bounded_and_a_damaged_list_is_ignored() {
    let q = Quarantine::open(None, 0);
    for i in 0..(MAX_QUARANTINED as u64 + 5) {
        q.add(Signature(i), "s".into(), "bob@pool".into(), i as i64, FAILED.into());
    }
    assert_eq!(q.len(), MAX_QUARANTINED);
    let r = request("s", 0, "true");
    assert_eq!(q.why(Signature(0), &r), None, "the oldest forgotten");
    assert_eq!(q.why(Signature(5), &r).as_deref(), Some(FAILED));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("negotiator.quarantine"), "{not json").unwrap();
    assert!(Quarantine::open(Some(dir.path()), 0).is_empty());
}

/// A signature is a hash anyone can compute: a user who chose a request with
/// another's signature, and had it quarantined, neither holds the other's
/// jobs nor lifts the other's quarantine; across a restart too.
#[test]
fn a_quarantine_holds_only_its_own_submitters_requests_whatever_their_signature() {
    let dir = tempfile::tempdir().unwrap();
    let victim = request("schedd@a", 0, "TARGET.Memory > 1");
    let mut other = request("schedd@a", 0, "TARGET.Memory > 1");
    other.submitter = "mallory@pool".into();
    let sig = Signature::of(&victim);
    let q = Quarantine::open(Some(dir.path()), 100);
    q.add(sig, other.schedd.clone(), other.submitter.clone(), 100, FAILED.into());
    assert_eq!(q.why(sig, &other).as_deref(), Some(FAILED));
    assert_eq!(q.why(sig, &victim), None, "another submitter's entry holds no job of bob's");
    // Both quarantined under one signature: two entries, each its own.
    q.add(sig, victim.schedd.clone(), victim.submitter.clone(), 101, STOPPED.into());
    assert_eq!(q.len(), 2);
    let q = Quarantine::open(Some(dir.path()), 200);
    assert_eq!(q.why(sig, &victim).as_deref(), Some(STOPPED));
    assert_eq!(q.why(sig, &other).as_deref(), Some(FAILED));
    let mut elsewhere = victim.clone();
    elsewhere.schedd = "schedd@b".into();
    assert_eq!(q.why(sig, &elsewhere), None, "nor another schedd's");
}
