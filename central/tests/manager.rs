//! The negotiation cycle against a schedd on a real socket: what happens to
//! a slot whose match the schedd does not take.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use andes_central::collector::{AdType, Collector};
use andes_central::manager::{
    ACCOUNTANT_SAVE_EVERY, Central, CentralConfig, POKED_CYCLE_BURST, POKED_CYCLE_GAP,
    POKED_CYCLE_SHARE, PokeBudget,
};
use andes_protocol::pool::{DemandGroup, DemandReply, MatchesReply, MatchesRequest};
use andes_protocol::{Keypair, ManualClock};
use axum::Router;
use axum::routing::post;

const NOW: i64 = 1_800_000_000;

/// A schedd with one idle job of alice's that takes the matches it is
/// handed only while `take` says so, and records the claim ids it was
/// handed, cycle by cycle.
#[derive(Clone, Default)]
struct Schedd {
    take: Arc<Mutex<bool>>,
    handed: Arc<Mutex<Vec<Vec<String>>>>,
}

async fn start_schedd(s: Schedd) -> String {
    let demand = || async {
        axum::Json(DemandReply {
            schedd: "schedd@submit".into(),
            groups: vec![DemandGroup {
                autocluster: 1,
                submitter: "alice@submit".into(),
                ad: r#"[Owner = "alice"; Requirements = true; RequestMemory = 1]"#.into(),
                idle: 1,
            }],
            running: Vec::new(),
        })
    };
    let s2 = s.clone();
    let matches = move |axum::Json(req): axum::Json<MatchesRequest>| {
        let s = s2.clone();
        async move {
            let ids: Vec<String> = req.matches.iter().map(|m| m.claim_id.clone()).collect();
            s.handed.lock().unwrap().push(ids.clone());
            let take = *s.take.lock().unwrap();
            axum::Json(if take {
                MatchesReply { taken: ids.len() as u32, claimed: ids }
            } else {
                MatchesReply::default()
            })
        }
    };
    let app = Router::new()
        .route("/v1/negotiate/demand", post(demand))
        .route("/v1/negotiate/matches", post(matches));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn pool(schedd_addr: &str) -> (Central, Arc<ManualClock>) {
    pool_saving(schedd_addr, None)
}

/// As [`pool`], the accountant's state kept in `state_file`.
fn pool_saving(
    schedd_addr: &str,
    state_file: Option<std::path::PathBuf>,
) -> (Central, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(NOW));
    let mut c = Collector::new(900);
    let slot = classad::parse_ad(
        r#"[Name = "slot1@exec"; State = "Unclaimed"; Activity = "Idle"; Memory = 1024;
            Requirements = true; MyAddress = "127.0.0.1:9"]"#,
    )
    .unwrap();
    let private = classad::parse_ad(r#"[Name = "slot1@exec"; ClaimId = "offer-1"]"#).unwrap();
    c.update(AdType::Machine, slot, Some(private), "exec", NOW).unwrap();
    let schedd = classad::parse_ad(&format!(
        r#"[Name = "schedd@submit"; MyAddress = "{schedd_addr}"; TotalIdleJobs = 1]"#
    ))
    .unwrap();
    c.update(AdType::Schedd, schedd, None, "schedd@submit", NOW).unwrap();
    let key = Arc::new(Keypair::from_seed("negotiator", [9; 32]).unwrap());
    let cfg = CentralConfig {
        interval: Duration::from_secs(60),
        negotiator: Default::default(),
        accountant: Default::default(),
        state_file,
    };
    let central = Central::new(
        Arc::new(Mutex::new(c)),
        Arc::new(tokio::sync::Notify::new()),
        clock.clone(),
        key,
        cfg,
    );
    (central, clock)
}

#[tokio::test]
async fn a_match_the_schedd_did_not_take_is_offered_again_at_the_next_cycle() {
    let s = Schedd::default();
    let addr = start_schedd(s.clone()).await;
    let (central, _clock) = pool(&addr);
    assert_eq!(central.cycle().await.matches, 1);
    // Not taken (its job went to a claim it already held, say): the slot
    // is free for the next cycle at once, not after OFFER_GRACE.
    *s.take.lock().unwrap() = true;
    assert_eq!(central.cycle().await.taken, 1);
    assert_eq!(
        *s.handed.lock().unwrap(),
        [vec!["offer-1".to_string()], vec!["offer-1".to_string()]]
    );
}

#[tokio::test]
async fn a_match_the_schedd_took_is_not_offered_twice_while_its_claim_is_on_its_way() {
    let s = Schedd::default();
    *s.take.lock().unwrap() = true;
    let addr = start_schedd(s.clone()).await;
    let (central, clock) = pool(&addr);
    assert_eq!(central.cycle().await.taken, 1);
    // The collector still shows the slot unclaimed with the same offer:
    // within OFFER_GRACE it is not offered again.
    assert_eq!(central.cycle().await.matches, 0);
    // After it, the claim never came: offered again.
    clock.advance(andes_central::manager::OFFER_GRACE);
    assert_eq!(central.cycle().await.matches, 1);
    let granted: Vec<_> =
        s.handed.lock().unwrap().iter().filter(|g| !g.is_empty()).cloned().collect();
    assert_eq!(granted, [vec!["offer-1".to_string()], vec!["offer-1".to_string()]]);
}

/// Cycles save the accountant's state at most every ACCOUNTANT_SAVE_EVERY
/// seconds (a busy pool runs many a second), and a factor set by an admin
/// at once.
#[tokio::test]
async fn cycles_save_the_accountant_at_most_every_few_seconds() {
    let s = Schedd::default();
    let addr = start_schedd(s.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("accountant.json");
    let (central, clock) = pool_saving(&addr, Some(file.clone()));
    let read = || std::fs::read_to_string(&file).unwrap();
    central.cycle().await;
    let first = read();
    // alice's claim counts as usage from now on.
    let claimed = classad::parse_ad(
        r#"[Name = "slot1@exec"; State = "Claimed"; Activity = "Busy"; Memory = 1024;
            Requirements = true; MyAddress = "127.0.0.1:9"; RemoteOwner = "alice@submit"]"#,
    )
    .unwrap();
    let private = classad::parse_ad(r#"[Name = "slot1@exec"; ClaimId = "offer-2"]"#).unwrap();
    central
        .collector
        .lock()
        .unwrap()
        .update(AdType::Machine, claimed, Some(private), "exec", NOW)
        .unwrap();
    for _ in 0..3 {
        clock.advance(ACCOUNTANT_SAVE_EVERY / 4);
        central.cycle().await;
        assert_eq!(read(), first, "not saved again within ACCOUNTANT_SAVE_EVERY");
    }
    clock.advance(ACCOUNTANT_SAVE_EVERY);
    central.cycle().await;
    let later = read();
    assert_ne!(later, first, "saved once ACCOUNTANT_SAVE_EVERY passed");
    central.set_factor("bob@submit", 10.0);
    assert_ne!(read(), later, "a factor is saved at once");
}

/// A poke after a few quick cycles (a job's start and a slot's release
/// each poke one) starts the next at once: a job submitted just after
/// another came and went waits for none of them. Before, each poke waited
/// ten times the last cycle's work, and a cycle of 3 ms on a busy machine
/// held the next job 30 ms.
#[test]
fn a_poke_after_a_few_quick_cycles_starts_its_cycle_at_once() {
    let ms = Duration::from_millis;
    let t0 = Instant::now();
    let mut b = PokeBudget::new(t0);
    b.spend(t0 + ms(3), ms(3));
    assert_eq!(b.wait(t0 + ms(4)), Duration::ZERO);
    b.spend(t0 + ms(7), ms(3));
    assert_eq!(b.wait(t0 + ms(8)), Duration::ZERO);
    b.spend(t0 + ms(11), ms(3));
    assert_eq!(b.wait(t0 + ms(12)), Duration::ZERO, "three cycles of 3 ms in a row");
}

/// However many pokes come, poked cycles take about a tenth of the
/// negotiator's time (plus the burst), and none waits more than
/// POKED_CYCLE_GAP: cycles longer than a tenth of it are each followed by
/// the whole gap (their share is then more than a tenth, as it must be for
/// a poke to be answered within the gap).
#[test]
fn poked_cycles_take_their_share_and_no_poke_waits_past_the_gap() {
    let t0 = Instant::now();
    let tenth = POKED_CYCLE_GAP / POKED_CYCLE_SHARE;
    for work in [Duration::from_micros(300), Duration::from_millis(2), tenth] {
        // A poke always waiting: cycle, wait, cycle, ... for ten seconds.
        let mut b = PokeBudget::new(t0);
        let (mut now, mut busy) = (t0, Duration::ZERO);
        while now < t0 + Duration::from_secs(10) {
            now += work;
            busy += work;
            b.spend(now, work);
            let wait = b.wait(now);
            assert!(wait <= POKED_CYCLE_GAP, "{wait:?} after cycles of {work:?}");
            now += wait;
        }
        let share = (now - t0) / POKED_CYCLE_SHARE + POKED_CYCLE_BURST + work;
        assert!(busy <= share, "cycles of {work:?}: {busy:?} of work in {:?}", now - t0);
        assert!(busy * 11 >= share * 10 - work * 11, "held back too much: {busy:?}");
    }
    let mut b = PokeBudget::new(t0);
    let (work, mut now) = (tenth + Duration::from_millis(2), t0);
    let waits: Vec<Duration> = (0..20)
        .map(|_| {
            now += work;
            b.spend(now, work);
            let wait = b.wait(now);
            now += wait;
            wait
        })
        .collect();
    assert!(waits[5..].iter().all(|w| *w == POKED_CYCLE_GAP), "{waits:?}");
    let mut b = PokeBudget::new(t0);
    b.spend(t0 + Duration::from_secs(3), Duration::from_secs(3));
    assert_eq!(b.wait(t0 + Duration::from_secs(3)), POKED_CYCLE_GAP, "after a 3 s cycle");
    assert_eq!(b.wait(t0 + Duration::from_secs(3) + POKED_CYCLE_GAP), Duration::ZERO);
}
