//! Who may write, and who may read, each job attribute: one table, read by
//! every door a value comes in or goes out of.
//!
//! - A **submit** keeps none of [`SCHEDD_SET`]: the queue sets them itself
//!   (`Owner` and `User` from the verified key, never the ad), so a job
//!   cannot arrive holding another job's claim, route or counters.
//! - **qedit** changes none of [`SCHEDD_SET`] nor [`FROZEN`] (what a
//!   submit names and the schedd checked then: the module, the spooled
//!   inputs).
//! - An **execute host's report** sets only [`HOST_REPORTED`] (and the
//!   `Chirp*` attributes a guest may set): a host reports how a run went,
//!   never whose job it is or where its files live.
//! - A **query** never shows [`PRIVATE`] (claim ids) to anyone, and shows
//!   [`OWNER_ONLY`] (the digests of a job's module and spooled inputs, which
//!   would confirm a guess at another user's file) to the owner and admins
//!   alone; constraints are evaluated on what the caller may see.
//!
//! Every name is compared case-insensitively, as ClassAd names are. A test
//! (`tests::every_attribute_the_daemons_set_is_in_the_table`) greps the
//! schedd's sources for the attributes they write and checks each is here.

use classad::ClassAd;

/// Attributes only the schedd (its queue, shadow or router) writes: stripped
/// from a submitted ad, refused by qedit.
pub const SCHEDD_SET: &[&str] = &[
    // Identity: from the queue and the verified key.
    "ClusterId",
    "ProcId",
    "GlobalJobId",
    "Owner",
    "User",
    "QDate",
    "JobStatus",
    "EnteredCurrentStatus",
    "ScheddInterval",
    // Routing: the queue's links between originals and copies.
    ROUTED_BY,
    ROUTED_TO,
    ROUTED_FROM,
    "RouteName",
    "RoutedBy",
    "LastRoutedToJobId",
    "RoutedCopyHeld",
    "RoutedFromGlobalJobId",
    "GridResource",
    "GridJobId",
    "GridJobStatus",
    // A run: the claim it holds and where.
    CLAIM_ID_ATTR,
    "ClaimIds",
    "Capability",
    "ChildClaimIds",
    "TransferKey",
    "TransferSocket",
    "StartdAddr",
    "RemoteHost",
    "LastRemoteHost",
    ACTIVATION_PENDING,
    "JobDeferredUntil",
    // The job's life, counted by the schedd.
    "NumJobStarts",
    "NumShadowStarts",
    "NumJobCompletions",
    "NumJobMatches",
    "NumJobReconnects",
    "NumShadowExceptions",
    "NumHolds",
    "NumCkpts",
    "NumRestarts",
    "JobStartDate",
    "JobCurrentStartDate",
    "JobLastReconnectTime",
    "CompletionDate",
    "LastMatchTime",
    "LastRejMatchReason",
    "LastRejMatchTime",
    "LastShadowException",
    "LastVacateTime",
    "LastVacateReason",
    "TotalSuspensions",
    "LastSuspensionTime",
    "CumulativeSuspensionTime",
    "CumulativeSlotTime",
    "RemoteWallClockTime",
    "RemoteUserCpu",
    "RemoteSysCpu",
    "LastCkptTime",
    "CkptSize",
    "LastCheckpointPlatform",
    "CronMissedRuns",
    "CronSkippedRuns",
    crate::quarantine::QUARANTINED,
    // Holds and endings.
    "HoldReason",
    "HoldReasonCode",
    "HoldReasonSubCode",
    "LastHoldReason",
    "LastHoldReasonCode",
    "LastHoldReasonSubCode",
    "ReleaseReason",
    "RemoveReason",
    "ExitCode",
    "ExitBySignal",
    "ExitSignal",
    "WasmTrap",
    "WasmFuelConsumed",
];

/// Attributes a submit names, the schedd checks then, and nobody changes
/// afterwards: refused by qedit.
pub const FROZEN: &[&str] =
    &["Cmd", "CmdDigest", andes_job::files::SPOOLED_INPUT, "JobUniverse", "MyType", "TargetType"];

/// What an execute host's report may set on a job (besides a guest's
/// `Chirp*` attributes): how its run went.
pub const HOST_REPORTED: &[&str] = &[
    "ExitCode",
    "ExitBySignal",
    "ExitSignal",
    "WasmTrap",
    "WasmFuelConsumed",
    "HoldReason",
    "HoldReasonCode",
    "HoldReasonSubCode",
    "RemoteUserCpu",
    "RemoteSysCpu",
    "RemoteWallClockTime",
    "CumulativeSuspensionTime",
    "ImageSize",
    "ResidentSetSize",
    "MemoryUsage",
    "DiskUsage",
    "JobState",
    "JobDeferredUntil",
    "Progress",
];

/// Attributes no query, history or constraint shows anyone (HTCondor's
/// private attributes): a claim id is a capability.
pub const PRIVATE: &[&str] = &[
    CLAIM_ID_ATTR,
    "ClaimIds",
    "Capability",
    "ChildClaimIds",
    "TransferKey",
    "TransferSocket",
    "StartdAddr",
];

/// Attributes shown only to the job's owner and admins: content digests,
/// with which anyone could confirm a guess at the file behind them.
pub const OWNER_ONLY: &[&str] = &["CmdDigest", andes_job::files::SPOOLED_INPUT];

fn listed(list: &[&str], name: &str) -> bool {
    list.iter().any(|a| a.eq_ignore_ascii_case(name))
}

/// True when only the schedd writes `name`.
pub fn is_schedd_set(name: &str) -> bool {
    listed(SCHEDD_SET, name)
}

/// True when qedit may not change `name`.
pub fn is_protected(name: &str) -> bool {
    is_schedd_set(name) || listed(FROZEN, name)
}

/// True when an execute host may report `name`.
pub fn host_may_set(name: &str) -> bool {
    listed(HOST_REPORTED, name) || (name.len() > 5 && name[..5].eq_ignore_ascii_case("chirp"))
}

/// True when no query shows `name`.
pub fn is_private(name: &str) -> bool {
    listed(PRIVATE, name)
}

/// Who is reading a job's ad.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// The job's owner, or an admin: sees all but [`PRIVATE`].
    Owner,
    /// Anyone else: sees neither [`PRIVATE`] nor [`OWNER_ONLY`].
    Other,
}

/// `ad` as `reader` may see it.
pub fn visible(mut ad: ClassAd, reader: Reader) -> ClassAd {
    let hidden: &[&[&str]] = match reader {
        Reader::Owner => &[PRIVATE],
        Reader::Other => &[PRIVATE, OWNER_ONLY],
    };
    for list in hidden {
        for a in *list {
            if ad.contains(a) {
                ad.remove(a);
            }
        }
    }
    ad
}

/// True when `reader` may see attribute `name` of a job.
pub fn may_see(name: &str, reader: Reader) -> bool {
    !is_private(name) && (reader == Reader::Owner || !listed(OWNER_ONLY, name))
}

/// Removes from a submitted ad everything the schedd writes itself. A job
/// routed here by another pool's schedd keeps the `Owner` that schedd names
/// (checked against the trust file before) and the global id it came from.
pub fn strip_submitted(ad: &mut ClassAd, by_schedd: bool) {
    let names: Vec<String> = ad
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| is_schedd_set(n))
        .filter(|n| {
            !(by_schedd
                && (n.eq_ignore_ascii_case("Owner")
                    || n.eq_ignore_ascii_case("RoutedFromGlobalJobId")))
        })
        .map(str::to_string)
        .collect();
    for n in names {
        ad.remove(&n);
    }
}

/// What an execute host reported, keeping only what a host may set.
pub fn from_host(ad: ClassAd) -> ClassAd {
    if ad.iter().all(|(n, _)| host_may_set(n.as_str())) {
        return ad;
    }
    let mut kept = ClassAd::new();
    for (n, e) in ad.iter() {
        if host_may_set(n.as_str()) {
            kept.insert(n.clone(), e.clone());
        } else {
            tracing::debug!("an execute host reported {n}, which only the schedd sets: ignored");
        }
    }
    kept
}

/// On an original job: its routed copy's id (`"C.P"`).
pub const ROUTED_TO: &str = "RoutedToJobId";

/// On a routed copy: the original's id (`"C.P"`).
pub const ROUTED_FROM: &str = "RoutedFromJobId";

/// The attribute naming the schedd (its identity in this pool's trust file)
/// that routed a job here for its owner.
pub const ROUTED_BY: &str = "RoutedFromSchedd";

/// The attribute holding a running job's claim id: a secret, kept in the queue
/// so a restarted schedd can reconnect, never shown by queries or history.
pub const CLAIM_ID_ATTR: &str = "ClaimId";

/// Set on an idle job whose activation was sent (or is about to be) and
/// not yet seen to start: see [`crate::queue::PoolOp::Activating`].
pub const ACTIVATION_PENDING: &str = "ActivationPending";

/// The attribute naming a copy's job at its target (`andes HOST:PORT C.P`).
pub const GRID_JOB_ID: &str = "GridJobId";

/// The copy's status at its target as the router last mirrored it (a
/// JobStatus code).
pub const GRID_JOB_STATUS: &str = "GridJobStatus";

/// An attribute's value as a string, if it is a non-empty string.
pub fn str_attr<N: classad::NameRef + ?Sized>(ad: &ClassAd, name: &N) -> Option<String> {
    match ad.eval_attr(name) {
        classad::Value::Str(s) if !s.is_empty() => Some(s.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submit_keeps_nothing_the_schedd_sets() {
        let mut ad = classad::parse_ad(
            r#"[Owner = "root"; User = "root@vm"; ClaimId = "1#2"; RoutedToJobId = "1.0";
                remotehost = "x"; Cmd = "a.wasm"; Arguments = "1"; MY_Attr = 3]"#,
        )
        .unwrap();
        strip_submitted(&mut ad, false);
        let names: Vec<_> = ad.iter().map(|(n, _)| n.as_str().to_string()).collect();
        assert_eq!(names, ["Cmd", "Arguments", "MY_Attr"]);

        let mut routed = classad::parse_ad(r#"[Owner = "bob"; ClaimId = "x"]"#).unwrap();
        strip_submitted(&mut routed, true);
        assert!(routed.contains("Owner") && !routed.contains("ClaimId"));
    }

    #[test]
    fn a_host_reports_how_a_run_went_and_nothing_else() {
        let ad = classad::parse_ad(
            r#"[ExitCode = 0; Owner = "root"; Iwd = "/etc"; ChirpX = 1; Progress = 50;
                RoutedFromJobId = "2.0"]"#,
        )
        .unwrap();
        let kept = from_host(ad);
        let names: Vec<_> = kept.iter().map(|(n, _)| n.as_str().to_string()).collect();
        assert_eq!(names, ["ExitCode", "ChirpX", "Progress"]);
    }

    #[test]
    fn digests_are_the_owners_and_claims_nobodys() {
        let ad = classad::parse_ad(
            r#"[ClaimId = "1#2"; StartdAddr = "x"; CmdDigest = "sha256:00"; Cmd = "a"]"#,
        )
        .unwrap();
        let mine = visible(ad.clone(), Reader::Owner);
        assert!(mine.contains("CmdDigest") && !mine.contains("ClaimId"));
        let theirs = visible(ad, Reader::Other);
        assert!(!theirs.contains("CmdDigest") && theirs.contains("Cmd"));
        assert!(!may_see("claimid", Reader::Owner));
        assert!(!may_see("spooledinput", Reader::Other));
    }

    #[test]
    fn protected_means_schedd_set_or_frozen() {
        for a in SCHEDD_SET.iter().chain(FROZEN) {
            assert!(is_protected(a) && is_protected(&a.to_ascii_uppercase()), "{a}");
        }
        assert!(!is_protected("Arguments") && !is_protected("PeriodicHold"));
        // Nothing a host reports decides whose job it is or where its files are.
        for a in HOST_REPORTED {
            assert!(!["Owner", "User", "Iwd", "Out", "Err", "UserLog"].contains(a));
        }
    }

    /// Every attribute the schedd's sources write into a job ad (a literal
    /// name passed to `insert_value` or `insert` on a job's or proc's ad) is
    /// in the table, or named here as one a user may write too.
    #[test]
    fn every_attribute_the_daemons_set_is_in_the_table() {
        // Written by the schedd on the user's behalf, and the user's to set
        // as well (HTCondor's own rules).
        const SHARED: &[&str] = &[
            "MyType",
            "DeferralTime",
            "StageInStart",
            "StageInFinish",
            "StageOutStart",
            "StageOutFinish",
            "LeaveJobInQueue",
            "ImageSize",
            "MemoryUsage",
            "DiskUsage",
            "ResidentSetSize",
        ];
        // The schedd's own ads (Scheduler, Submitter), built in shadow.rs.
        const NOT_JOB_ADS: &[&str] = &[
            "Name",
            "ScheddName",
            "Machine",
            "MyAddress",
            "MyCurrentTime",
            "IdleJobs",
            "RunningJobs",
            "HeldJobs",
            "TotalIdleJobs",
            "TotalRunningJobs",
            "TotalHeldJobs",
            "NumUsers",
            // A route's settings (`router::transform`), not a job's ad.
            "TargetUniverse",
            // A query's ads of groups of jobs (`schedd::group_ads`).
            "JobCount",
            "AutoClusterId",
            "AutoClusterAttrs",
        ];
        // Every source file of the schedd, and the job's files it writes with.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("../job/src/files.rs")];
        let mut dirs = vec![root.join("src")];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs")
                    && p.file_name().is_none_or(|n| n != "tests.rs")
                {
                    files.push(p);
                }
            }
        }
        assert!(files.len() > 20, "the schedd's sources were not found: {files:?}");
        let mut missing = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            // Only the code before a file's tests.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for part in code.split("insert_value(\"").skip(1) {
                let name: String =
                    part.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !name.is_empty()
                    && !is_protected(&name)
                    && !host_may_set(&name)
                    && !SHARED.iter().chain(NOT_JOB_ADS).any(|s| s.eq_ignore_ascii_case(&name))
                {
                    missing.push(format!("{}: {name}", file.display()));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "attributes the schedd writes but the table misses: {missing:?}"
        );
    }
}
