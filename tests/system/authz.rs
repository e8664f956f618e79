//! Who may call what, every route of every daemon: the authorization matrix.
//!
//! Each daemon of a pool of real processes (central manager, schedd, host)
//! answers its route table at `GET /v1/routes` (built with the routes
//! themselves, so a new route is in it). The test checks the table against
//! the one written here (a new route must be added below, with who may call
//! it, or this fails), then calls every route as every identity of the pool
//! (a user, an admin, a schedd, a host, the negotiator, a key the pool does
//! not know) and checks each is refused exactly when its role is not listed.
//! Then the owner's rules: another user can neither see a job's digests, nor
//! act on it, fetch its output or tail it; nothing the schedd sets can be
//! submitted or edited.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use andes_protocol::Role;
use andes_protocol::routes::RouteSpec;
use common::callers::Callers;
use common::pool::{Pool, sample, wait_or};
use http::StatusCode;

/// The routes each daemon must have, and who may call each (an admin passes
/// wherever a user does).
fn expected() -> Vec<(&'static str, &'static str, &'static str, &'static [Role])> {
    use Role::*;
    const ANYONE: &[Role] = &[User, Schedd, Host, Negotiator];
    const SUBMIT: &[Role] = &[User, Schedd];
    vec![
        ("cm", "POST", "/v1/collector/update", ANYONE),
        ("cm", "POST", "/v1/collector/updates", ANYONE),
        ("cm", "POST", "/v1/collector/invalidate", ANYONE),
        ("cm", "POST", "/v1/collector/query", ANYONE),
        ("cm", "GET", "/v1/negotiator/userprio", ANYONE),
        ("cm", "POST", "/v1/negotiator/setfactor", &[Admin]),
        ("cm", "POST", "/v1/negotiator/reconfig", &[Admin]),
        ("cm", "GET", "/v1/routes", &[Admin]),
        ("schedd", "GET", "/v1/modules/{digest}", SUBMIT),
        ("schedd", "PUT", "/v1/modules/{digest}", SUBMIT),
        ("schedd", "POST", "/v1/cluster", SUBMIT),
        ("schedd", "POST", "/v1/clusters", SUBMIT),
        ("schedd", "POST", "/v1/submit", SUBMIT),
        ("schedd", "POST", "/v1/query", SUBMIT),
        ("schedd", "POST", "/v1/summary", SUBMIT),
        ("schedd", "POST", "/v1/change", SUBMIT),
        ("schedd", "POST", "/v1/history", SUBMIT),
        ("schedd", "PUT", "/v1/uploads/{digest}", SUBMIT),
        ("schedd", "POST", "/v1/transfer", SUBMIT),
        ("schedd", "POST", "/v1/transfer/file", SUBMIT),
        ("schedd", "POST", "/v1/transfer/done", SUBMIT),
        ("schedd", "POST", "/v1/negotiate/demand", &[Negotiator, Admin]),
        ("schedd", "POST", "/v1/negotiate/matches", &[Negotiator, Admin]),
        ("schedd", "POST", "/v1/tail", &[User, Admin]),
        ("schedd", "POST", "/v1/reconfig", &[Admin]),
        ("schedd", "GET", "/v1/routes", &[Admin]),
        ("host1", "GET", "/v1/status", &[User, Schedd, Host]),
        ("host1", "POST", "/v1/vacate", &[Admin]),
        ("host1", "POST", "/v1/checkpoint", &[Admin]),
        ("host1", "POST", "/v1/drain", &[Admin]),
        ("host1", "POST", "/v1/off", &[Admin]),
        ("host1", "POST", "/v1/set-attr", &[Admin]),
        ("host1", "POST", "/v1/reconfig", &[Admin]),
        ("host1", "POST", "/v1/host/match", &[Negotiator, Admin]),
        ("host1", "POST", "/v1/host/claim", &[Schedd]),
        ("host1", "GET", "/v1/host/modules/{digest}", &[Schedd]),
        ("host1", "PUT", "/v1/host/modules/{digest}", &[Schedd]),
        ("host1", "PUT", "/v1/host/inputs/{sha256}", &[Schedd]),
        ("host1", "POST", "/v1/host/output", &[Schedd]),
        ("host1", "POST", "/v1/host/snapshot", &[Schedd]),
        ("host1", "POST", "/v1/host/saved", &[Schedd]),
        ("host1", "POST", "/v1/host/activate", &[Schedd]),
        ("host1", "POST", "/v1/host/wait", &[Schedd]),
        ("host1", "POST", "/v1/host/edit", &[Schedd]),
        ("host1", "POST", "/v1/host/withdraw", &[Schedd]),
        ("host1", "POST", "/v1/host/vacate", &[Schedd]),
        ("host1", "POST", "/v1/host/tail", &[Schedd]),
        ("host1", "POST", "/v1/host/release", &[Schedd]),
        ("host1", "POST", "/v1/host/alive", &[Schedd]),
        ("host1", "GET", "/v1/routes", &[Admin]),
    ]
}

fn addresses(pool: &Pool) -> Vec<(&'static str, String)> {
    let read = |f: &str| std::fs::read_to_string(pool.path().join(f)).unwrap().trim().to_string();
    vec![
        ("cm", read(".collector_address")),
        ("schedd", read("spool/.schedd_address")),
        ("host1", read(".host1_address")),
    ]
}

/// A path with each `{parameter}` filled in.
fn concrete(path: &str) -> String {
    let digest = format!("sha256:{}", "0".repeat(64));
    path.replace("{digest}", &digest).replace("{sha256}", &"0".repeat(64))
}

#[test]
fn every_route_of_every_daemon_refuses_exactly_the_roles_it_does_not_list() {
    let pool = Pool::new("", 1);
    let callers = Callers::new(&pool);
    let identities: [(&str, Role); 5] = [
        ("alice", Role::User),
        ("root", Role::Admin),
        ("schedd", Role::Schedd),
        ("host1", Role::Host),
        ("negotiator", Role::Negotiator),
    ];
    let mut seen: BTreeSet<(String, String, String)> = BTreeSet::new();
    for (daemon, addr) in addresses(&pool) {
        // Only an admin may read the table.
        for (who, _) in &identities[..1] {
            let s = callers.call(&addr, who, "GET", "/v1/routes", b"");
            assert_eq!(s, Some(StatusCode::FORBIDDEN), "{daemon}: {who} read the route table");
        }
        let table: Vec<RouteSpec> = callers.json(&addr, "root", "/v1/routes");
        let want: Vec<_> = expected().into_iter().filter(|e| e.0 == daemon).collect();
        for r in &table {
            let listed = want.iter().find(|e| e.1 == r.method && e.2 == r.path);
            let Some(e) = listed else {
                panic!(
                    "{daemon} serves {} {} (roles {:?}), which this test does not list: add it \
                     to expected() with who may call it",
                    r.method, r.path, r.roles
                );
            };
            let got: BTreeSet<&str> = r.roles.iter().map(|r| r.as_str()).collect();
            let exp: BTreeSet<&str> = e.3.iter().map(|r| r.as_str()).collect();
            assert_eq!(got, exp, "{daemon} {} {}", r.method, r.path);
            seen.insert((daemon.to_string(), r.method.clone(), r.path.clone()));
        }
        for e in &want {
            assert!(
                seen.contains(&(daemon.to_string(), e.1.to_string(), e.2.to_string())),
                "{daemon} does not serve {} {}",
                e.1,
                e.2
            );
        }
        // Every route as every identity: refused (403) exactly when the
        // role is not listed; a listed role gets past the check (the body,
        // not JSON, is then refused by the route itself, so nothing acts).
        for r in &table {
            let path = concrete(&r.path);
            for (who, role) in &identities {
                let allowed = r.roles.contains(role)
                    || (*role == Role::Admin && r.roles.contains(&Role::User));
                let s =
                    callers.call(&addr, who, &r.method, &path, b"not json").unwrap_or_else(|| {
                        panic!("{daemon}: {who} could not reach {} {}", r.method, r.path)
                    });
                if allowed {
                    assert!(
                        s != StatusCode::FORBIDDEN && s != StatusCode::UNAUTHORIZED,
                        "{daemon} {} {} refused {who} ({role:?}), which it lists: {s}",
                        r.method,
                        r.path
                    );
                } else {
                    assert_eq!(
                        s,
                        StatusCode::FORBIDDEN,
                        "{daemon} {} {} let {who} ({role:?}) through",
                        r.method,
                        r.path
                    );
                }
            }
            // A key the pool does not know is refused at the handshake.
            assert_eq!(
                callers.call(&addr, "stranger", &r.method, &path, b""),
                None,
                "{daemon} {} {} answered an unknown key",
                r.method,
                r.path
            );
        }
    }
    assert_eq!(seen.len(), expected().len(), "every expected route was served");
}

#[test]
fn another_user_can_neither_see_nor_touch_a_users_job() {
    let pool = Pool::new("", 1);
    let callers = Callers::new(&pool);
    let schedd = pool.schedd_address();
    std::fs::create_dir_all(pool.path().join("jobs")).unwrap();
    std::fs::copy(sample("sleeper"), pool.path().join("jobs/sleeper.wasm")).unwrap();
    // A job that runs a while, with things the schedd sets forged in its ad.
    pool.submit(
        "alice",
        "forged",
        "executable = sleeper.wasm\n+ClaimId = \"<1.2.3.4:5>#1#1\"\n+RoutedToJobId = \"1.0\"\n\
         +User = \"root@vm\"\n+StartdAddr = \"127.0.0.1:1\"\n+NumJobStarts = 99\n\
         output = s.out\nqueue\n",
    );
    wait_or(
        "alice's job running",
        Duration::from_secs(60),
        || pool.queue().iter().any(|a| common::pool::int(a, "JobStatus") == 2),
        || pool.logs(),
    );
    let ad = pool.ads("alice", &["q", "-l", "-allusers"]).remove(0);
    let cluster = common::pool::int(&ad, "ClusterId");
    let id = format!("{cluster}.0");
    // Nothing forged survived the submit, and User is the schedd's.
    for a in ["RoutedToJobId", "NumJobStarts"] {
        assert!(!ad.contains(a) || common::pool::int(&ad, a) != 99, "{a}: {ad}");
    }
    assert!(common::pool::text(&ad, "User").starts_with("alice@"), "{ad}");
    assert!(ad.contains("CmdDigest"), "the owner sees the module's digest");
    // Bob sees the job, but not its digests.
    let seen = pool.ads("bob", &["q", "-l", "-allusers"]);
    let theirs = seen.iter().find(|a| common::pool::int(a, "ClusterId") == cluster).unwrap();
    assert!(!theirs.contains("CmdDigest") && !theirs.contains("ClaimId"), "{theirs}");
    // Bob can hold, remove, edit, fetch and tail none of it.
    for args in [
        vec!["hold", id.as_str()],
        vec!["rm", id.as_str()],
        vec!["qedit", id.as_str(), "Arguments", "\"x\""],
        vec!["transfer-data", id.as_str()],
        vec!["tail", id.as_str()],
    ] {
        let o = pool.cmd("bob", &args);
        assert!(!o.status.success(), "bob ran {args:?}: {}", String::from_utf8_lossy(&o.stdout));
    }
    // Nor can alice edit what the schedd sets on her own job.
    for attr in
        ["ClaimId", "StartdAddr", "RemoteHost", "RoutedToJobId", "User", "Owner", "CmdDigest"]
    {
        let o = pool.cmd("alice", &["qedit", &id, attr, "\"x\""]);
        assert!(!o.status.success(), "alice edited {attr}");
    }
    // A raw request naming another's job by id in a change is refused.
    let body = serde_json::json!({
        "targets": {"ids": [id], "owners": [], "constraint": null},
        "change": {"Hold": {"reason": "x"}}
    });
    let s = callers.call(&schedd, "bob", "POST", "/v1/change", body.to_string().as_bytes());
    assert_ne!(s, Some(StatusCode::OK), "bob's raw change of alice's job");
    pool.ok("alice", &["rm", &id]);
}
