//! The collector's HTTP API on a real socket with the real signing client: who may
//! publish what, queries, and expiry on a manual clock.

use std::sync::{Arc, Mutex};

use andes_central::collector::api::{
    InvalidateReply, InvalidateRequest, MAX_COLLECTOR_UPDATES, QueryReply, QueryRequest,
    UpdateReply, UpdateRequest, UpdatesReply, UpdatesRequest,
};
use andes_central::collector::{AdType, Collector};
use andes_protocol::{
    Auth, Client, Clock, Keypair, ManualClock, TrustFile, Verifier, VerifierConfig,
};
use http::{Method, StatusCode};

const NOW: i64 = 1_800_000_000;

struct Fixture {
    clock: Arc<ManualClock>,
    collector: Arc<Mutex<Collector>>,
    host: Client,
    other_host: Client,
    schedd: Client,
    alice: Client,
    admin: Client,
    stranger: Client,
    /// Woken when an update may give the negotiator work.
    poke: Arc<tokio::sync::Notify>,
}

async fn fixture() -> Fixture {
    let clock = Arc::new(ManualClock::new(NOW));
    let key = |name: &str, n: u8| Arc::new(Keypair::from_seed(name, [n; 32]).unwrap());
    let (host, other_host, schedd, alice, admin, stranger) = (
        key("exec-1", 1),
        key("exec-2", 2),
        key("schedd", 3),
        key("alice", 4),
        key("root", 5),
        key("mallory", 6),
    );
    let trust = TrustFile::parse(
        &format!(
            "host exec-1 {}\nhost exec-2 {}\nschedd schedd@submit {}\nuser alice {}\nadmin root {}\n",
            host.public_line(),
            other_host.public_line(),
            schedd.public_line(),
            alice.public_line(),
            admin.public_line()
        ),
        "trust",
    )
    .unwrap();
    let collector = Arc::new(Mutex::new(Collector::new(900)));
    let auth = Auth::new(Verifier::new(trust, VerifierConfig::default()), clock.clone());
    let poke = Arc::new(tokio::sync::Notify::new());
    let app = andes_central::collector::api::router_with_poke(
        collector.clone(),
        clock.clone(),
        &auth,
        Some(poke.clone()),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = andes_protocol::Server::plain(listener).unwrap();
    tokio::spawn(server.serve(app, std::future::pending()));
    let client = |k: &Arc<Keypair>| Client::new(&url, k.clone()).unwrap().with_clock(clock.clone());
    Fixture {
        host: client(&host),
        other_host: client(&other_host),
        schedd: client(&schedd),
        alice: client(&alice),
        admin: client(&admin),
        stranger: client(&stranger),
        clock,
        collector,
        poke,
    }
}

fn machine(name: &str, state: &str, memory: i64) -> UpdateRequest {
    UpdateRequest::whole(
        "Machine",
        format!(
            r#"[Name = "{name}"; State = "{state}"; Activity = "Idle"; Memory = {memory}; OpSys = "LINUX"; Arch = "X86_64"]"#
        ),
        Some(format!(r#"[Name = "{name}"; Capability = "claim-{name}"]"#)),
    )
}

async fn post<T: serde::Serialize>(c: &Client, path: &str, body: &T) -> (StatusCode, String) {
    let r = c.post_json(path, body).await.unwrap();
    let reason = r.error_reason().unwrap_or_default();
    (r.status, reason)
}

async fn query(c: &Client, req: &QueryRequest) -> Vec<classad::ClassAd> {
    let r: QueryReply =
        c.call(Method::POST, "/v1/collector/query", Some(req)).await.expect("query");
    r.ads.iter().map(|a| classad::parse_ad(a).unwrap()).collect()
}

fn name(ad: &classad::ClassAd) -> String {
    match ad.eval_attr("Name") {
        classad::Value::Str(s) => s.to_string(),
        v => format!("{v:?}"),
    }
}

#[tokio::test]
async fn hosts_publish_machines_and_others_are_refused() {
    let f = fixture().await;
    let r: UpdateReply = f
        .host
        .call(
            Method::POST,
            "/v1/collector/update",
            Some(&machine("slot1@exec-1", "Unclaimed", 2048)),
        )
        .await
        .unwrap();
    assert_eq!(r.lifetime, 900);
    let ads = query(&f.alice, &QueryRequest::default()).await;
    assert_eq!(ads.len(), 1);
    assert_eq!(ads[0].eval_attr("AuthenticatedIdentity"), classad::Value::string("exec-1"));
    assert_eq!(ads[0].eval_attr("LastHeardFrom"), classad::Value::Int(NOW));
    assert_eq!(ads[0].eval_attr("MyType"), classad::Value::string("Machine"));
    assert!(!ads[0].contains("Capability"), "the private ad is not shown");
    {
        let c = f.collector.lock().unwrap();
        let p = c.private(AdType::Machine, "slot1@exec-1", NOW).unwrap();
        assert_eq!(p.eval_attr("Capability"), classad::Value::string("claim-slot1@exec-1"));
    }

    // Not in the trust file: 401.
    let (st, why) =
        post(&f.stranger, "/v1/collector/update", &machine("slot9@x", "Unclaimed", 1)).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert!(why.contains("not in the pool's trust file"), "{why}");
    let (st, _) = post(&f.stranger, "/v1/collector/query", &QueryRequest::default()).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);

    // A user publishing a machine: 403, naming who, the role and the type.
    let (st, why) =
        post(&f.alice, "/v1/collector/update", &machine("slot9@x", "Unclaimed", 1)).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert!(why.contains("alice (role user)") && why.contains("Machine ads"), "{why}");
    // A schedd publishing a machine: 403; its own schedd ad: fine.
    let (st, why) =
        post(&f.schedd, "/v1/collector/update", &machine("slot9@x", "Unclaimed", 1)).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{why}");
    let schedd_ad = UpdateRequest::whole(
        "scheduler",
        r#"[Name = "schedd@submit"; Machine = "submit"; TotalRunningJobs = 3]"#.into(),
        None,
    );
    let (st, why) = post(&f.schedd, "/v1/collector/update", &schedd_ad).await;
    assert_eq!(st, StatusCode::OK, "{why}");
    // A host publishing a schedd ad: 403.
    let (st, why) = post(&f.host, "/v1/collector/update", &schedd_ad).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert!(why.contains("exec-1 (role host)") && why.contains("Scheduler"), "{why}");
    // Another host overwriting exec-1's slot: 403, and nothing changes.
    let (st, why) =
        post(&f.other_host, "/v1/collector/update", &machine("slot1@exec-1", "Owner", 1)).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert!(why.contains("published by exec-1"), "{why}");

    // Bad bodies: 400 with the reason.
    let mut bad = machine("slot2@exec-1", "Unclaimed", 1);
    bad.ad = "[Name = ".into();
    let (st, why) = post(&f.host, "/v1/collector/update", &bad).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(why.starts_with("the Machine ad:"), "{why}");
    let mut bad = machine("slot2@exec-1", "Unclaimed", 1);
    bad.ad = "[State = \"Owner\"]".into();
    let (st, why) = post(&f.host, "/v1/collector/update", &bad).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(why.contains("no Name"), "{why}");
    let mut bad = machine("slot2@exec-1", "Unclaimed", 1);
    bad.kind = "Startd".into();
    let (st, why) = post(&f.host, "/v1/collector/update", &bad).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(why.contains("unknown ad type `Startd`"), "{why}");

    let all = query(&f.admin, &QueryRequest::default()).await;
    assert_eq!(all.iter().map(name).collect::<Vec<_>>(), ["schedd@submit", "slot1@exec-1"]);
    assert_eq!(all[1].eval_attr("State"), classad::Value::string("Unclaimed"));
}

#[tokio::test]
async fn query_with_constraint_and_projection() {
    let f = fixture().await;
    for (n, state, mem) in [
        ("slot1@exec-1", "Unclaimed", 4096),
        ("slot2@exec-1", "Claimed", 1024),
        ("slot3@exec-1", "Unclaimed", 512),
    ] {
        let (st, why) = post(&f.host, "/v1/collector/update", &machine(n, state, mem)).await;
        assert_eq!(st, StatusCode::OK, "{why}");
    }
    let req = QueryRequest {
        kind: Some("Machine".into()),
        constraint: Some(r#"State == "Unclaimed" && Memory > 1000"#.into()),
        projection: vec!["Name".into(), "memory".into()],
    };
    let ads = query(&f.alice, &req).await;
    assert_eq!(ads.len(), 1);
    assert_eq!(ads[0].to_string(), r#"[ Name = "slot1@exec-1"; Memory = 4096 ]"#);
    let ads = query(
        &f.alice,
        &QueryRequest { kind: Some("Scheduler".into()), ..QueryRequest::default() },
    )
    .await;
    assert!(ads.is_empty());
    let (st, why) = post(
        &f.alice,
        "/v1/collector/query",
        &QueryRequest { constraint: Some("Memory >".into()), ..QueryRequest::default() },
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(why.starts_with("constraint `Memory >`"), "{why}");
    let (st, why) = post(
        &f.alice,
        "/v1/collector/query",
        &QueryRequest { kind: Some("Toaster".into()), ..QueryRequest::default() },
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(why.contains("`Toaster`"), "{why}");

    // Invalidation: only the publisher (or an admin).
    let inv = InvalidateRequest { kind: "Machine".into(), name: "slot2@exec-1".into() };
    let (st, _) = post(&f.other_host, "/v1/collector/invalidate", &inv).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, _) = post(&f.alice, "/v1/collector/invalidate", &inv).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let r: InvalidateReply =
        f.host.call(Method::POST, "/v1/collector/invalidate", Some(&inv)).await.unwrap();
    assert!(r.removed);
    let inv = InvalidateRequest { kind: "Machine".into(), name: "slot3@exec-1".into() };
    let r: InvalidateReply =
        f.admin.call(Method::POST, "/v1/collector/invalidate", Some(&inv)).await.unwrap();
    assert!(r.removed);
    let ads = query(&f.alice, &QueryRequest::default()).await;
    assert_eq!(ads.iter().map(name).collect::<Vec<_>>(), ["slot1@exec-1"]);
}

#[tokio::test]
async fn ads_expire_on_the_collectors_clock() {
    let f = fixture().await;
    let mut short = machine("slot2@exec-1", "Unclaimed", 1);
    short.ad = short.ad.replace("Memory = 1;", "Memory = 1; ClassAdLifetime = 60;");
    let r: UpdateReply =
        f.host.call(Method::POST, "/v1/collector/update", Some(&short)).await.unwrap();
    assert_eq!(r.lifetime, 60);
    let (st, _) =
        post(&f.host, "/v1/collector/update", &machine("slot1@exec-1", "Unclaimed", 1)).await;
    assert_eq!(st, StatusCode::OK);
    f.clock.advance(61);
    let ads = query(&f.alice, &QueryRequest::default()).await;
    assert_eq!(ads.iter().map(name).collect::<Vec<_>>(), ["slot1@exec-1"]);
    // Refreshed at NOW + 600, slot1 outlives NOW + 900.
    f.clock.advance(539);
    let (st, _) =
        post(&f.host, "/v1/collector/update", &machine("slot1@exec-1", "Claimed", 1)).await;
    assert_eq!(st, StatusCode::OK);
    f.clock.advance(900);
    assert_eq!(query(&f.alice, &QueryRequest::default()).await.len(), 1);
    f.clock.advance(1);
    assert!(query(&f.alice, &QueryRequest::default()).await.is_empty());
    // Once expired, another host may take the name.
    let (st, why) =
        post(&f.other_host, "/v1/collector/update", &machine("slot1@exec-1", "Owner", 1)).await;
    assert_eq!(st, StatusCode::OK, "{why}");
    assert_eq!(f.collector.lock().unwrap().expire(f.clock.now()), 1, "slot2 was still held");
}

/// A round of a host's slot ads in one request: each kept as its own update
/// would be; one the host may not publish (another host's slot, another
/// type, a bad ad) is refused by index and the rest kept; too many at once
/// is refused whole.
#[tokio::test]
async fn several_updates_in_one_request_are_each_judged_alone() {
    let f = fixture().await;
    f.other_host
        .post_json("/v1/collector/update", &machine("slot9@exec-2", "Unclaimed", 1))
        .await
        .unwrap();
    let mut bad = machine("slot3@exec-1", "Unclaimed", 1);
    bad.ad = "[Name = ".into();
    let mut schedd = machine("s@submit", "Unclaimed", 1);
    schedd.kind = "Scheduler".into();
    let req = UpdatesRequest {
        updates: vec![
            machine("slot1@exec-1", "Unclaimed", 2048),
            machine("slot9@exec-2", "Claimed", 1),
            bad,
            schedd,
            machine("slot2@exec-1", "Claimed", 1024),
        ],
    };
    let r: UpdatesReply =
        f.host.call(Method::POST, "/v1/collector/updates", Some(&req)).await.unwrap();
    assert_eq!(r.lifetime, 900);
    assert!(!r.incarnation.is_empty());
    let refused: Vec<usize> = r.refused.iter().map(|(i, _)| *i).collect();
    assert_eq!(refused, [1, 2, 3], "{:?}", r.refused);
    assert!(r.refused[0].1.contains("exec-2"), "{:?}", r.refused);
    let mut names: Vec<String> =
        query(&f.alice, &QueryRequest::default()).await.iter().map(name).collect();
    names.sort();
    assert_eq!(names, ["slot1@exec-1", "slot2@exec-1", "slot9@exec-2"]);
    let other = query(
        &f.alice,
        &QueryRequest { constraint: Some("Name == \"slot9@exec-2\"".into()), ..Default::default() },
    )
    .await;
    assert_eq!(other[0].eval_attr("State"), classad::Value::string("Unclaimed"), "not replaced");
    // A user publishes nothing, in one request or many.
    let r: UpdatesReply =
        f.alice.call(Method::POST, "/v1/collector/updates", Some(&req)).await.unwrap();
    assert_eq!(r.refused.len(), 5, "{:?}", r.refused);
    assert!(r.refused[0].1.contains("may not publish"), "{:?}", r.refused);
    let too_many = UpdatesRequest {
        updates: vec![machine("slot1@exec-1", "Unclaimed", 1); MAX_COLLECTOR_UPDATES + 1],
    };
    let (status, reason) = post(&f.host, "/v1/collector/updates", &too_many).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(reason.contains("at most"), "{reason}");
}

/// A delta is judged as the whole ad it stands for: it wakes the
/// negotiator when it makes the slot Unclaimed; a delta from another
/// publisher, or of an ad never held, is stale (in a request of many) or
/// refused with the ad named (alone); names to unset without a base are bad.
#[tokio::test]
async fn deltas_are_judged_as_the_ads_they_stand_for() {
    let f = fixture().await;
    let mut whole = machine("slot1@exec-1", "Claimed", 2048);
    whole.serial = Some(41);
    let r: UpdatesReply = f
        .host
        .call(Method::POST, "/v1/collector/updates", Some(&UpdatesRequest { updates: vec![whole] }))
        .await
        .unwrap();
    assert!(r.takes_deltas && r.refused.is_empty() && r.stale.is_empty(), "{r:?}");
    assert!(!poked(&f).await);
    let delta = |base| UpdateRequest {
        serial: Some(42),
        base: Some(base),
        unset: vec!["Memory".into()],
        ..UpdateRequest::whole(
            "Machine",
            r#"[Name = "slot1@exec-1"; State = "Unclaimed"]"#.into(),
            None,
        )
    };
    // Another host's delta of this ad, and one of a base never sent: stale.
    let r: UpdatesReply = f
        .other_host
        .call(
            Method::POST,
            "/v1/collector/updates",
            Some(&UpdatesRequest { updates: vec![delta(41)] }),
        )
        .await
        .unwrap();
    assert_eq!((r.stale.as_slice(), r.refused.len()), (&[0][..], 0), "{r:?}");
    let (status, reason) = post(&f.host, "/v1/collector/update", &delta(40)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(reason.contains("slot1@exec-1") && reason.contains("whole"), "{reason}");
    assert!(!poked(&f).await);
    // Its own, of the ad held: the slot is Unclaimed, its Memory gone, its
    // private part kept; the negotiator is woken.
    let (status, reason) = post(&f.host, "/v1/collector/update", &delta(41)).await;
    assert_eq!(status, StatusCode::OK, "{reason}");
    assert!(poked(&f).await);
    let ads = query(&f.alice, &QueryRequest::default()).await;
    assert_eq!(ads[0].eval_attr("State"), classad::Value::string("Unclaimed"));
    assert_eq!(ads[0].eval_attr("OpSys"), classad::Value::string("LINUX"));
    assert!(ads[0].get("Memory").is_none());
    let now = f.clock.now();
    assert!(f.collector.lock().unwrap().private(AdType::Machine, "slot1@exec-1", now).is_some());
    let mut bad = machine("slot2@exec-1", "Claimed", 1);
    bad.unset = vec!["Memory".into()];
    let (status, reason) = post(&f.host, "/v1/collector/update", &bad).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(reason.contains("no base"), "{reason}");
}

/// Whether the negotiator was woken since the last look.
async fn poked(f: &Fixture) -> bool {
    tokio::time::timeout(std::time::Duration::ZERO, f.poke.notified()).await.is_ok()
}

/// A schedd's ad with idle jobs wakes the negotiator only when a cycle could
/// match one (a slot is Unclaimed, or there is no slot at all, so that idle
/// jobs hear nothing matches): a pool whose every slot is claimed, running
/// short jobs on reused claims, costs no cycle per job. A slot becoming
/// Unclaimed always wakes it.
#[tokio::test]
async fn idle_jobs_wake_the_negotiator_only_when_a_slot_could_take_one() {
    let f = fixture().await;
    let schedd_ad = |idle: i64| {
        UpdateRequest::whole(
            "Scheduler",
            format!(r#"[Name = "schedd@submit"; TotalIdleJobs = {idle}]"#),
            None,
        )
    };
    let send = |c: &Client, u: UpdateRequest| {
        let c = c.clone();
        async move { assert_eq!(post(&c, "/v1/collector/update", &u).await.0, StatusCode::OK) }
    };
    send(&f.schedd, schedd_ad(3)).await;
    assert!(poked(&f).await, "no slot at all: a cycle says nothing matches");
    send(&f.host, machine("slot1@exec-1", "Unclaimed", 1)).await;
    assert!(poked(&f).await, "an Unclaimed slot");
    send(&f.schedd, schedd_ad(0)).await;
    assert!(!poked(&f).await, "no idle job");
    send(&f.schedd, schedd_ad(3)).await;
    assert!(poked(&f).await, "idle jobs and an Unclaimed slot");
    send(&f.host, machine("slot1@exec-1", "Claimed", 1)).await;
    assert!(!poked(&f).await);
    send(&f.schedd, schedd_ad(5)).await;
    assert!(!poked(&f).await, "every slot claimed: the claims' schedds use them");
    let round = UpdatesRequest {
        updates: vec![
            machine("slot1@exec-1", "Claimed", 2),
            machine("slot2@exec-1", "Unclaimed", 1),
        ],
    };
    assert_eq!(post(&f.host, "/v1/collector/updates", &round).await.0, StatusCode::OK);
    assert!(poked(&f).await, "a round with an Unclaimed slot");
    send(&f.schedd, schedd_ad(5)).await;
    assert!(poked(&f).await);
}
