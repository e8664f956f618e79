//! The shadow's pieces on their own.

use super::dollar::{expand_dollar_dollar, host_ad};
use super::files::save_checkpoint;
use super::reports::{Ends, Viewed, no_report};
use super::state::{PoolConfig, ScheddPool};
use super::*;
use crate::attrs::str_attr;
use crate::jobfiles::{read_inputs, write_outputs};
use crate::transfer::Staged;
use crate::userfs::Accounts;
use andes_protocol::Clock;
use andes_protocol::pool::{FileData, JobEnd, JobReport, RunState};
use andes_protocol::pool::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};
use classad::Value;
use std::time::Duration;

fn ad(text: &str) -> ClassAd {
    classad::parse_ad(text).unwrap()
}

/// A schedd (its pool side started, its collector nowhere) with a cluster
/// of `n` jobs of alice's; the directory, the schedd, its pool side, the
/// cluster and the jobs' autocluster.
async fn schedd_with_jobs(
    n: usize,
) -> (tempfile::TempDir, crate::schedd::Schedd, ScheddPool, u32, u32) {
    use crate::queue::{Actor, Submit};
    let dir = tempfile::tempdir().unwrap();
    let config = crate::schedd::ScheddConfig {
        name: "schedd@test".into(),
        data_dir: dir.path().join("spool"),
        periodic_interval: Duration::from_secs(60),
        history_max_jobs: 100,
        history_max_age: None,
        submit_host: "<127.0.0.1:0>".into(),
        cron_time_zone: jiff::tz::TimeZone::UTC,
        schedd_interval: 300,
        accounts: Arc::new(
            crate::userfs::Accounts::fixed("tester", false, "* = tester", |_| None).unwrap(),
        ),
        uid_domain: None,
        job_limits: Default::default(),
        spool_quota: crate::queue::DEFAULT_UPLOAD_QUOTA_BYTES,
        spool_reserve: Some(0),
    };
    let clock: Arc<dyn Clock> = Arc::new(andes_protocol::ManualClock::new(1_800_000_000));
    let schedd = crate::schedd::Schedd::open(&config, clock).unwrap();
    let keypair = Arc::new(Keypair::from_seed("schedd", [9; 32]).unwrap());
    let pool = ScheddPool::start(&schedd, PoolConfig::new("schedd@test", "127.0.0.1:1"), keypair);
    let alice = Actor::user("alice");
    let module = b"\0asm\x01\0\0\0".to_vec();
    let digest = crate::queue::module_digest(&module);
    schedd.queue.store_module(&alice, &digest, module, 1_800_000_000).await.unwrap();
    let job = ad(&format!(
        r#"[Cmd = "job.wasm"; CmdDigest = "{digest}"; Owner = "alice"; RequestMemory = 100; RequestDisk = 10; RequestCpus = 1; Requirements = TARGET.Memory >= RequestMemory]"#,
    ));
    let c = schedd
        .queue
        .submit(
            &alice,
            Submit { cluster: None, cluster_ad: job, procs: vec![ClassAd::new(); n] },
            1_800_000_000,
        )
        .await
        .unwrap();
    let demand = pool.inner.demand(&[]);
    assert_eq!(demand.groups.len(), 1, "{demand:?}");
    let ac = demand.groups[0].autocluster;
    (dir, schedd, pool, c, ac)
}

/// A job edited after its autocluster was filed (here: asking for more
/// memory than the slot has) is not taken by a claim reused for that
/// autocluster; the next one that fits is.
#[tokio::test]
async fn a_reused_claim_takes_only_a_job_that_still_matches_its_slot() {
    use crate::job::JobSelector;
    use crate::queue::{Actor, Change, Targets};
    let (_dir, schedd, pool, c, ac) = schedd_with_jobs(3).await;
    let alice = Actor::user("alice");
    let edit = Change::Edit { attr: "RequestMemory".into(), expr: "99999999".into() };
    let one = Targets { ids: vec![JobSelector::Job(JobId::new(c, 1))], ..Default::default() };
    schedd.queue.change(&alice, one, edit, 1_800_000_001).await.unwrap();
    let slot =
        ad(r#"[Name = "slot1@h"; Memory = 1024; Disk = 100000; Cpus = 1; Requirements = true]"#);
    assert_eq!(pool.inner.next_job(ac, Some(&slot)), Some(JobId::new(c, 0)));
    assert_eq!(pool.inner.next_job(ac, Some(&slot)), Some(JobId::new(c, 2)));
    assert_eq!(pool.inner.next_job(ac, Some(&slot)), None);
}

/// A claim counts among its autocluster's claims (what each claim's share of
/// the queue is divided by) from its match until it ends, however it ends:
/// one refused (here: no host where the match says) is counted no more, nor
/// is one whose job went before the claim was made. Another autocluster's
/// claims never count in this one's.
#[tokio::test]
async fn a_claim_is_counted_in_its_autoclusters_share_until_it_ends_however_it_ends() {
    use super::state::{ClaimCount, lock};
    use andes_protocol::pool::MatchGrant;
    let (_dir, _schedd, pool, c, ac) = schedd_with_jobs(2).await;
    let claims = |ac| lock(&pool.inner.state).claims_of(ac);
    let grant = |id: &str| MatchGrant {
        autocluster: ac,
        slot_ad: r#"[Name = "slot1@h"; Memory = 1024; Disk = 100000; Cpus = 1]"#.into(),
        claim_id: id.into(),
        // Nothing listens there: the claim fails.
        host_address: "127.0.0.1:1".into(),
        preempting: false,
    };
    let first = pool.inner.next_job(ac, None).unwrap();
    let counted = ClaimCount::new(&pool.inner, ac);
    let other = ClaimCount::new(&pool.inner, ac + 1);
    assert_eq!((claims(ac), claims(ac + 1)), (1, 1));
    pool.inner.clone().run_claim(grant("c1"), first, counted).await;
    assert_eq!((claims(ac), claims(ac + 1)), (0, 1), "a refused claim still counted");
    drop(other);
    let counted = ClaimCount::new(&pool.inner, ac);
    pool.inner.clone().run_claim(grant("c2"), JobId::new(c, 99), counted).await;
    assert_eq!(claims(ac), 0, "a claim whose job was gone still counted");
    assert!(lock(&pool.inner.state).claims.is_empty());
}

/// A batch of two: job 2 ends and job 3 starts in one step of the host,
/// so the shadow following job 2 may first hear of its end in a report
/// about job 3, running. Job 3 must be followed from that report; the
/// view rewritten as job 2's end would say job 3 never started (nothing
/// queued, not the report's job), and job 3 would run twice.
#[test]
fn a_job_whose_end_comes_with_the_next_ones_start_hands_that_start_on() {
    let end = |job: &str| JobEnd {
        job: job.into(),
        version: 4,
        update: "[ RemoteUserCpu = 0.1 ]".into(),
        ending: "[ ExitCode = 0; ExitBySignal = false ]".into(),
        outputs: Vec::new(),
        evicted: false,
        log: vec![format!("job log [Info]: {job} ends")],
        run_us: None,
    };
    let next_running = JobReport {
        version: 5,
        state: RunState::Running,
        job: Some("h#2.0#1".into()),
        ended: vec![end("h#1.0#1")],
        queued: 0,
        ..no_report(true)
    };
    let mut ends = Ends::default();
    let Viewed::Mine(mine) = ends.view(next_running, "h#1.0#1") else {
        panic!("job 1's end is in the report")
    };
    assert_eq!(mine.state, RunState::Exited);
    assert!(mine.ending.as_deref().is_some_and(|e| e.contains("ExitCode")));
    assert_eq!(mine.log, ["job log [Info]: h#1.0#1 ends"], "its log goes with its end");
    let behind = ends.behind(&mine);
    match ends.view(behind, "h#2.0#1") {
        Viewed::Mine(r) => assert_eq!(r.state, RunState::Running),
        Viewed::NotYet(r) => panic!("job 2 taken as never started: {r:?}"),
    }
    // A report about the job itself, ending it, hands on the same facts.
    let own_end = JobReport {
        version: 6,
        state: RunState::Exited,
        job: Some("h#2.0#1".into()),
        ended: vec![end("h#2.0#1")],
        queued: 0,
        ..no_report(true)
    };
    let Viewed::Mine(mine) = ends.view(own_end, "h#2.0#1") else { panic!() };
    let behind = ends.behind(&mine);
    assert_eq!(
        (behind.version, behind.state, behind.job.as_deref()),
        (6, RunState::Exited, Some("h#2.0#1"))
    );
}

#[test]
fn dollar_dollar_expands_against_the_slot() {
    let slot = ad(r#"[ Name = "slot1@h"; Memory = 2048; Arch = "X86_64" ]"#);
    let job = ad(r#"[ Arguments = "--mem $$(Memory) --arch $$(Arch)"; Env = "X=$$(Missing:none)";
             Big = "$$([Memory * 2])"; Keep = "$$(Nope)"; Plain = 3 ]"#);
    let out = expand_dollar_dollar(&job, &slot);
    assert_eq!(str_attr(&out, "Arguments").unwrap(), "--mem 2048 --arch X86_64");
    assert_eq!(str_attr(&out, "Env").unwrap(), "X=none");
    assert_eq!(str_attr(&out, "Big").unwrap(), "4096");
    assert_eq!(str_attr(&out, "Keep").unwrap(), "$$(Nope)");
    assert_eq!(out.eval_attr("Plain"), Value::Int(3));
    // Unbalanced: left alone, no panic.
    let nested = ad(r#"[ R = [ X = "$$(Arch)" ] ]"#);
    assert_eq!(
        expand_dollar_dollar(&nested, &slot).get("R").unwrap().to_string(),
        r#"[ X = "X86_64" ]"#
    );
    let odd = ad(r#"[ A = "$$(Memory" ]"#);
    assert_eq!(str_attr(&expand_dollar_dollar(&odd, &slot), "A").unwrap(), "$$(Memory");
}

#[test]
fn inputs_and_outputs_move_between_iwd_and_sandbox_names() {
    let dir = tempfile::tempdir().unwrap();
    let iwd = dir.path();
    std::fs::write(iwd.join("data.txt"), b"123").unwrap();
    std::fs::create_dir(iwd.join("d")).unwrap();
    std::fs::write(iwd.join("d/x"), b"x").unwrap();
    std::fs::write(iwd.join("stdin.txt"), b"in").unwrap();
    let job = ad(&format!(
        r#"[ Iwd = "{}"; TransferInput = "data.txt, d"; In = "stdin.txt";
             Out = "out/job.out"; Err = "job.err"; RequestDisk = 1 ]"#,
        iwd.display()
    ));
    // Every owner is the schedd's own account here.
    let own = Accounts::fixed("tester", false, "* = tester", |_| None).unwrap();
    let none = |_: &str| None;
    let mut names: Vec<_> =
        read_inputs(&job, None, &own, &none).unwrap().files.into_iter().map(|f| f.name).collect();
    names.sort();
    assert_eq!(names, ["_andes_stdin", "d/x", "data.txt"]);
    let outputs = vec![
        FileData::inline(STDOUT_NAME, b"hello".to_vec()),
        FileData::inline(STDERR_NAME, b"oops".to_vec()),
        FileData::inline("result", b"42".to_vec()),
    ];
    let id = JobId::new(1, 0);
    write_outputs(id, &job, &outputs, &Staged::default(), &own, None).unwrap();
    assert_eq!(std::fs::read(iwd.join("out/job.out")).unwrap(), b"hello");
    assert_eq!(std::fs::read(iwd.join("job.err")).unwrap(), b"oops");
    assert_eq!(std::fs::read(iwd.join("result")).unwrap(), b"42");
    let bad = vec![FileData::inline("../escape", vec![])];
    assert!(write_outputs(id, &job, &bad, &Staged::default(), &own, None).is_err());
    // Over RequestDisk (1 KiB).
    std::fs::write(iwd.join("data.txt"), vec![0u8; 2048]).unwrap();
    assert!(read_inputs(&job, None, &own, &none).unwrap_err().message.contains("RequestDisk"));
}

#[test]
fn a_checkpoint_replaces_the_last_and_travels_with_the_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("checkpoints/1.0");
    std::fs::create_dir_all(dir.path().join("checkpoints")).unwrap();
    let files = |pairs: &[(&str, &str)]| -> Vec<FileData> {
        pairs.iter().map(|(n, d)| FileData::inline(n.to_string(), d.as_bytes().to_vec())).collect()
    };
    save_checkpoint(&ckpt, &files(&[("partial.txt", "1"), ("old.txt", "x")]), &Staged::default())
        .unwrap();
    save_checkpoint(
        &ckpt,
        &files(&[("partial.txt", "2"), (STDOUT_NAME, "out"), ("sub/state", "s")]),
        &Staged::default(),
    )
    .unwrap();
    std::fs::write(dir.path().join("partial.txt"), "stale input").unwrap();
    let job =
        ad(&format!(r#"[ Iwd = "{}"; TransferInput = "partial.txt" ]"#, dir.path().display()));
    let own = Accounts::fixed("tester", false, "* = tester", |_| None).unwrap();
    let mut got: Vec<(String, String)> = read_inputs(&job, Some(&ckpt), &own, &|_| None)
        .unwrap()
        .files
        .into_iter()
        .map(|f| (f.name, String::from_utf8(f.data).unwrap()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [("partial.txt".to_string(), "2".to_string()), ("sub/state".into(), "s".into())]
    );
}

#[test]
fn host_ad_renames_the_streams() {
    let job = ad(r#"[ In = "a.in"; Out = "a.out"; Err = "/dev/null"; ClaimId = "secret" ]"#);
    let out = host_ad(&crate::quarantine::Journal::none(), JobId::new(1, 0), &job, &ClassAd::new());
    assert!(!out.contains("ClaimId"));
    assert_eq!(str_attr(&out, "In").unwrap(), STDIN_NAME);
    assert_eq!(str_attr(&out, "Out").unwrap(), STDOUT_NAME);
    assert_eq!(str_attr(&out, "Err").unwrap(), "/dev/null");
}

/// A claim's next batch: its grown size, within CLAIM_WORKLIFE, and no more
/// than its share of the jobs not started yet, less what it holds queued:
/// each claim takes its part of a queue at once, and the last jobs are spread
/// over the claims, not queued behind one while slots stand idle.
#[test]
fn a_batch_is_at_most_the_claims_share_of_what_is_left() {
    use super::claim::{Share, batch_size};
    use std::time::Duration;
    let ms = Duration::from_millis;
    let share = |waiting, queued, mine, claims| Share { waiting, queued, mine, claims };
    // Plenty waiting: the grown size.
    assert_eq!(batch_size(128, ms(1), None, share(10_000, 0, 0, 2)), 128);
    // 100 jobs (99 waiting and the one in hand) among 4 claims: 25 each.
    assert_eq!(batch_size(128, ms(1), None, share(99, 0, 0, 4)), 25);
    assert_eq!(batch_size(128, ms(1), None, share(100, 0, 0, 4)), 26);
    // 6,000 jobs among 64 claims: the first claim takes 94; so does the
    // next, the first's 93 queued behind its running job counted in (a
    // share of what no claim had taken shrank with each: 94, 93, 91, ...).
    assert_eq!(batch_size(128, ms(1), None, share(5_999, 0, 0, 64)), 94);
    assert_eq!(batch_size(128, ms(1), None, share(5_905, 93, 0, 64)), 94);
    // A claim holding its share queued already takes one more at most.
    assert_eq!(batch_size(128, ms(1), None, share(3_000, 2_900, 93, 64)), 1);
    // The last job: one; with no claims counted, the whole rest.
    assert_eq!(batch_size(128, ms(1), None, share(0, 0, 0, 64)), 1);
    assert_eq!(batch_size(128, ms(1), None, share(9, 0, 0, 0)), 10);
    // CLAIM_WORKLIFE: 50 ms left at 10 ms a job fit 5; none left still one.
    assert_eq!(batch_size(128, ms(10), Some(ms(50)), share(10_000, 0, 0, 1)), 5);
    assert_eq!(batch_size(128, ms(10), Some(Duration::ZERO), share(10_000, 0, 0, 1)), 1);
    // A size never falls below one.
    assert_eq!(batch_size(0, Duration::ZERO, None, Share::default()), 1);
}

/// The jobs queued on hosts are counted by autocluster, whatever order they
/// are noted and taken off in: a claim's share of one autocluster does not
/// count another's queued jobs.
#[test]
fn queued_jobs_are_counted_by_autocluster() {
    use super::link::Link;
    use super::state::QueuedJobs;
    let keypair = Arc::new(Keypair::from_seed("schedd", [9; 32]).unwrap());
    let client = andes_protocol::Client::new("http://127.0.0.1:1", keypair).unwrap();
    let link = || Link { short: client.clone(), long: client.clone() };
    let id = |p| JobId { cluster: 1, proc: p };
    let mut q = QueuedJobs::default();
    q.insert(id(0), link(), "c1".into(), 7);
    q.insert(id(1), link(), "c1".into(), 7);
    q.insert(id(2), link(), "c2".into(), 9);
    assert_eq!((q.of(7), q.of(9), q.of(1)), (2, 1, 0));
    // Noted again (another activation): counted once, under its new one.
    q.insert(id(1), link(), "c2".into(), 9);
    assert_eq!((q.of(7), q.of(9)), (1, 2));
    assert_eq!(q.remove(&id(1)).map(|(_, c)| c).as_deref(), Some("c2"));
    assert!(q.remove(&id(1)).is_none(), "taken off once");
    assert!(q.contains(&id(0)) && !q.contains(&id(1)));
    q.remove(&id(0));
    q.remove(&id(2));
    assert_eq!((q.of(7), q.of(9)), (0, 0));
}

/// A claim's batches grow while its jobs are short by the host's clock
/// (`JobEnd::run_us`), however long the schedd waited for each: on a machine
/// shared by 64 slots, trivial jobs took the schedd over 10 ms each and went
/// one at a time. Without the host's word, the schedd's own time decides.
#[test]
fn a_batch_grows_by_how_long_the_jobs_ran_on_the_host() {
    use super::claim::next_batch;
    use super::state::MAX_BATCH;
    use std::time::Duration;
    let (ms, us) = (Duration::from_millis, Duration::from_micros);
    // Trivial jobs on a busy machine: 40 us on the host, 20 ms a job for
    // the schedd. They are short: the batch grows at once to as many as fit
    // in a long job's 50 ms, here past the most a batch holds.
    assert_eq!(next_batch(1, ms(20), Some(us(40))), (MAX_BATCH, us(40)));
    assert_eq!(next_batch(MAX_BATCH, ms(80), Some(us(40))), (MAX_BATCH, us(40)));
    // 5 ms jobs: ten fit in 50 ms; past that, the batch doubles.
    assert_eq!(next_batch(1, ms(20), Some(ms(5))), (10, ms(5)));
    assert_eq!(next_batch(10, ms(20), Some(ms(5))), (20, ms(5)));
    // Long on the host: one at a time, whatever the schedd saw.
    assert_eq!(next_batch(64, ms(1), Some(ms(200))), (1, ms(200)));
    // Between 10 and 50 ms: the size stays.
    assert_eq!(next_batch(16, ms(1), Some(ms(20))), (16, ms(20)));
    // A host that does not say (an older one): the schedd's time.
    assert_eq!(next_batch(4, ms(20), None), (4, ms(20)));
    assert_eq!(next_batch(4, ms(2), None), (25, ms(2)));
    assert_eq!(next_batch(32, ms(2), None), (64, ms(2)));
    assert_eq!(next_batch(4, ms(60), None), (1, ms(60)));
}
