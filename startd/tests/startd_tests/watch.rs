//! The watcher hears whose job ad the startd evaluates, before it does.

use std::sync::{Arc, Mutex};

use crate::common::*;

type Heard = Arc<Mutex<Vec<Option<String>>>>;

fn watched(h: &mut Harness) -> Heard {
    let heard: Heard = Arc::default();
    let into = heard.clone();
    h.sd.set_watcher(Some(Box::new(move |ad| {
        let id = ad.map(|a| a.eval_attr("GlobalJobId").as_str().unwrap_or("?").to_string());
        into.lock().unwrap().push(id);
    })));
    heard
}

const JOB: &str = r#"[GlobalJobId = "submit#7.0#1"; Owner = "alice"; Cmd = "x.wasm"]"#;

#[test]
fn every_evaluation_of_a_job_ad_is_announced_and_closed() {
    let mut h = Harness::idle(2, &[]);
    let heard = watched(&mut h);
    h.tick();
    // Nothing of a job evaluated yet: nothing heard.
    assert!(heard.lock().unwrap().is_empty());
    h.claim(1, "c1", JOB);
    h.activate(1, "c1", JOB);
    // The claim's request and the job were evaluated (START, RANK), once
    // announced per event, and closed after it.
    let got = std::mem::take(&mut *heard.lock().unwrap());
    assert!(!got.is_empty());
    for pair in got.chunks(2) {
        assert_eq!(pair, [Some("submit#7.0#1".to_string()), None]);
    }
    // A policy round over the running job: announced once, closed once,
    // however many expressions it evaluates.
    h.advance(60);
    let got = std::mem::take(&mut *heard.lock().unwrap());
    assert!(!got.is_empty());
    for pair in got.chunks(2) {
        assert_eq!(pair, [Some("submit#7.0#1".to_string()), None]);
    }
}

#[test]
fn without_a_watcher_nothing_changes() {
    let mut a = Harness::idle(1, &[]);
    let mut b = Harness::idle(1, &[]);
    let _ = watched(&mut b);
    a.run_job(1, JOB);
    b.run_job(1, JOB);
    assert_eq!(a.advance(600), b.advance(600));
}
