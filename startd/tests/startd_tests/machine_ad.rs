//! What the slot ads carry that HTCondor users query: the domains, the
//! disk and swap as they are now, and the running job's own attributes.

use crate::common;

use andes_startd::{Event, MachineInfo, Measurements, Startd};
use classad::{ClassAd, Value, parse_ad};
use common::*;

fn attr(h: &Harness, slot: u32, name: &str) -> Value {
    h.sd.slot(slot).unwrap().ad().eval_attr(name)
}

#[test]
fn uid_and_filesystem_domains_default_to_the_hosts_name_or_are_configured() {
    let info = MachineInfo { cpus: 1, hostname: "exec1.example.org".into(), ..Default::default() };
    let sd = Startd::new(policy(&[]), &info, T0).unwrap();
    let ad = sd.slot(1).unwrap().ad();
    assert_eq!(ad.eval_attr("UidDomain"), Value::from("exec1.example.org"));
    assert_eq!(ad.eval_attr("FileSystemDomain"), Value::from("exec1.example.org"));
    let sd = Startd::new(
        policy(&["UID_DOMAIN = example.org\nFILESYSTEM_DOMAIN = nfs.example.org"]),
        &info,
        T0,
    )
    .unwrap();
    let ad = sd.slot(1).unwrap().ad();
    assert_eq!(ad.eval_attr("UidDomain"), Value::from("example.org"));
    assert_eq!(ad.eval_attr("FileSystemDomain"), Value::from("nfs.example.org"));
}

#[test]
fn disk_and_virtual_memory_are_the_slots_share_of_what_is_free_now() {
    // Two slots of a machine that had 1000 KB of disk and 400 KB of swap
    // free at startup: each had half. Measured later, 600 KB and 100 KB are
    // free: each slot has half of that.
    let info = MachineInfo {
        cpus: 2,
        memory_mb: 2048,
        disk_kb: 1000,
        virtual_memory_kb: 400,
        ..Default::default()
    };
    let mut h = Harness { sd: Startd::new(policy(&[]), &info, T0).unwrap(), now: T0, log: vec![] };
    assert_eq!(attr(&h, 1, "Disk"), Value::Int(500));
    assert_eq!(attr(&h, 2, "VirtualMemory"), Value::Int(200));
    h.ev(Event::Measured(Measurements {
        disk_free_kb: Some(600),
        swap_free_kb: Some(100),
        ..Measurements::default()
    }));
    for slot in [1, 2] {
        assert_eq!(attr(&h, slot, "Disk"), Value::Int(300));
        assert_eq!(attr(&h, slot, "VirtualMemory"), Value::Int(50));
    }
    // A measurement that could not read them leaves them as they were.
    h.ev(Event::Measured(Measurements::default()));
    assert_eq!(attr(&h, 1, "Disk"), Value::Int(300));
}

#[test]
fn a_running_jobs_universe_and_live_memory_are_in_its_slots_ad() {
    let mut h = Harness::idle(1, &[]);
    let job = "[ ClusterId = 7; ProcId = 0; JobUniverse = 5; ImageSize = 1000; Owner = \"alice\" ]";
    h.run_job(1, job);
    assert_eq!(attr(&h, 1, "JobUniverse"), Value::Int(5));
    assert_eq!(attr(&h, 1, "ImageSize"), Value::Int(1000));
    // The starter reports the job's memory as it grows.
    let attrs: ClassAd =
        parse_ad("[ ImageSize = 65536; ResidentSetSize = 65536; MemoryUsage = 64 ]").unwrap();
    h.ev(Event::JobUpdated { slot: 1, claim_id: "c1".into(), attrs });
    assert_eq!(attr(&h, 1, "ImageSize"), Value::Int(65536));
    assert_eq!(attr(&h, 1, "ResidentSetSize"), Value::Int(65536));
    assert_eq!(attr(&h, 1, "MemoryUsage"), Value::Int(64));
    // The policy sees it too (TARGET.ImageSize is the job's, now current).
    let job_ad = h.sd.slot(1).unwrap().job().unwrap().clone();
    assert_eq!(job_ad.eval_attr("ImageSize"), Value::Int(65536));
    // Gone with the job.
    h.ev(Event::StarterExited { slot: 1, outcome: andes_startd::StarterOutcome::Completed });
    for n in ["JobUniverse", "ImageSize", "ResidentSetSize", "MemoryUsage"] {
        assert_eq!(attr(&h, 1, n), Value::Undefined, "{n}");
    }
}

/// An event of one slot refreshes that slot's ad (and publishes it fresh);
/// the other slots' time-dependent attributes catch up at the next poll, so
/// a host's cost per job does not grow with its slots. A slot the timers
/// read (retiring here) is kept fresh whatever the event.
#[test]
fn an_event_of_one_slot_refreshes_its_ad_and_the_next_poll_every_slot() {
    let mut h = Harness::idle(3, &["MAXJOBRETIREMENTTIME = 3600"]);
    let job = "[ ClusterId = 7; ProcId = 0; JobUniverse = 5; ImageSize = 1000; Owner = \"alice\" ]";
    for slot in 1..=3 {
        h.run_job(slot, job);
    }
    h.now += 30;
    h.tick();
    // Slot 3 retires for a better match: the timers read it from now on.
    h.ev(Event::BetterMatch { slot: 3, claim: request("c3b", VANILLA) });
    assert_eq!(h.sa(3).1, andes_startd::Activity::Retiring);
    let run_time = |h: &Harness, slot| attr(h, slot, "TotalJobRunTime");
    assert_eq!((run_time(&h, 1), run_time(&h, 2)), (Value::Int(30), Value::Int(30)));
    h.now += 60;
    let a =
        h.ev(Event::StarterExited { slot: 1, outcome: andes_startd::StarterOutcome::Completed });
    // The slot the event concerns: fresh, and published so.
    let ad = published(&a, 1).expect("slot 1 changed state: published");
    assert_eq!(ad.eval_attr("TotalClaimRunTime"), Value::Int(90));
    assert_eq!(ad.eval_attr("TotalJobRunTime"), Value::Undefined);
    // Slot 2 waits for the poll; slot 3 (retiring) does not.
    assert_eq!(run_time(&h, 2), Value::Int(30));
    assert_eq!(run_time(&h, 3), Value::Int(90));
    h.tick();
    assert_eq!(run_time(&h, 2), Value::Int(90));
}
