//! Performance benchmarks for the `classad` crate (`cargo bench -p classad`).
//!
//! * `matchmaking/scan_10k`: one job ad's match expression evaluated against
//!   10,000 distinct machine (slot) ads of 114-122 attributes; the whole
//!   scan is one iteration, ad by ad with `Evaluator::eval`;
//!   `scan_10k_prefetch` is the same through `Evaluator::scan`.
//!   `scan_10k_hot100` (and `scan_10k_hot100_prefetch`) do the same 10,000
//!   evaluations against 100 ads only (cache-resident), to separate memory
//!   cost from evaluation cost.
//! * `matchmaking/symmetric_match_10k`: the job's Requirements and each
//!   machine's Requirements, both ways; `rank_10k`: each machine's Rank.
//! * `parse/*`: 1,000 old-syntax job ads as `condor_q -long` prints them
//!   (120 attributes, about 3.9 MB), parsed as one text and ad by ad; the
//!   same ads in new `[ ... ]` syntax; and the 10,000 machine ads (43 MB).
//!
//! All data is generated here, deterministically, from a seeded SplitMix64.
//! Set `ANDES_BENCH_DUMP=<dir>` to also write the generated data to `<dir>`
//! (read by `bench/htcondor_reference.py`, the HTCondor side-by-side).
//! See BENCHMARKS.md at the workspace root for the figures.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Duration;

use classad::matching::{rank_with, symmetric_match_with};
use classad::parser::{parse_ads, parse_old_ad};
use classad::{ClassAd, Evaluator, Expr, parse_expr};
use criterion::{BatchSize, Criterion, Throughput};

/// The matchmaking expression of benchmark 1.
const MATCH_EXPR: &str = r#"(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Memory >= MY.RequestMemory) && (TARGET.Disk >= MY.RequestDisk)"#;

/// Number of machine (slot) ads scanned.
const N_MACHINES: usize = 10_000;
/// Number of job ads in the parse corpus (about 3.9 KB each).
const N_JOBS: usize = 1_000;

// ---------------------------------------------------------------------------
// Deterministic data
// ---------------------------------------------------------------------------

/// SplitMix64: small, fast, and easy to reproduce in any language.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `pct`/100.
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    /// Uniform real in `[lo, hi)`, with 4 decimals so its text is short.
    fn real(&mut self, lo: f64, hi: f64) -> f64 {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((lo + u * (hi - lo)) * 10_000.0).round() / 10_000.0
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    /// Picks from `(weight, item)` pairs.
    fn weighted<'a, T>(&mut self, xs: &'a [(u64, T)]) -> &'a T {
        let total: u64 = xs.iter().map(|(w, _)| w).sum();
        let mut r = self.below(total);
        for (w, x) in xs {
            if r < *w {
                return x;
            }
            r -= w;
        }
        &xs[xs.len() - 1].1
    }
}

const NOW: i64 = 1_763_769_600; // 2025-11-22T00:00:00Z, a fixed clock for the data
const DOMAIN: &str = "cluster.example.org";

fn real(x: f64) -> String {
    // Old-syntax reals as condor prints them: always with a decimal point.
    let s = format!("{x}");
    if s.contains('.') || s.contains('e') { s } else { format!("{s}.0") }
}

/// One machine slot ad in old syntax, 114 to 122 attributes, like
/// `condor_status -long` prints for a static or dynamic slot.
fn machine_ad_text(rng: &mut Rng, i: usize) -> String {
    let host = i / 4;
    let slot = i % 4 + 1;
    // Host-level properties: draw from a per-host generator so that the
    // four slots of a host agree on them.
    let mut h = Rng::new(0x5EED_0000 + host as u64);
    let (arch, opsys, opsys_and_ver, opsys_long, opsys_name, major, ver) = *h.weighted(&[
        (
            55,
            (
                "X86_64",
                "LINUX",
                "AlmaLinux9",
                "AlmaLinux release 9.4 (Seafoam Ocelot)",
                "AlmaLinux",
                9,
                904,
            ),
        ),
        (
            25,
            (
                "X86_64",
                "LINUX",
                "CentOS7",
                "CentOS Linux release 7.9.2009 (Core)",
                "CentOS",
                7,
                709,
            ),
        ),
        (8, ("X86_64", "LINUX", "Ubuntu22", "Ubuntu 22.04.4 LTS", "Ubuntu", 22, 2204)),
        (
            6,
            (
                "aarch64",
                "LINUX",
                "AlmaLinux9",
                "AlmaLinux release 9.4 (Seafoam Ocelot)",
                "AlmaLinux",
                9,
                904,
            ),
        ),
        (
            2,
            (
                "ppc64le",
                "LINUX",
                "RedHat8",
                "Red Hat Enterprise Linux release 8.10 (Ootpa)",
                "RedHat",
                8,
                810,
            ),
        ),
        (3, ("X86_64", "WINDOWS", "WINDOWS1000", "Windows 10 Enterprise", "Windows", 10, 1000)),
        (1, ("X86_64", "OSX", "macOS14", "macOS 14.6", "macOS", 14, 1406)),
    ]);
    let detected_cpus = *h.pick(&[16i64, 24, 32, 40, 48, 64, 128]);
    let detected_mem = detected_cpus * *h.pick(&[2048i64, 3072, 4096, 8192]);
    let total_disk = h.range(200_000_000, 2_000_000_000);
    let cpu_model = *h.pick(&[
        ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", 85, 23_456),
        ("AMD EPYC 7742 64-Core Processor", 49, 27_311),
        ("Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz", 79, 19_870),
        ("AMD EPYC 9654 96-Core Processor", 17, 34_102),
    ]);
    let start_time = NOW - h.range(3_600, 40 * 86_400);
    let ip = format!("10.{}.{}.{}", 1 + host / 65_536, (host / 256) % 256, host % 256);
    let machine = format!("node{host:05}.{DOMAIN}");

    // Slot-level properties.
    let cpus = *rng.weighted(&[(50, 1i64), (25, 2), (15, 4), (10, 8)]);
    let memory = *rng.weighted(&[
        (6, 512i64),
        (10, 1024),
        (6, 1536),
        (20, 2048),
        (18, 4096),
        (18, 8192),
        (12, 16384),
        (6, 32768),
        (4, 131072),
    ]);
    let disk = rng.range(500_000, 80_000_000);
    let (state, activity) = *rng.weighted(&[
        (45, ("Claimed", "Busy")),
        (35, ("Unclaimed", "Idle")),
        (8, ("Owner", "Idle")),
        (6, ("Claimed", "Idle")),
        (4, ("Preempting", "Vacating")),
        (2, ("Drained", "Retiring")),
    ]);
    let load = if activity == "Busy" { rng.real(0.8, 1.2) } else { rng.real(0.0, 0.3) };
    let condor_load = if activity == "Busy" { load - rng.real(0.0, 0.05) } else { 0.0 };
    let condor_load = (condor_load.max(0.0) * 10_000.0).round() / 10_000.0;
    // A desktop in the Owner state has a user at the keyboard.
    let kbd_idle = if state == "Owner" { rng.range(0, 600) } else { rng.range(0, 3_000_000) };
    let entered = NOW - rng.range(10, 200_000);
    let kflops = rng.range(900_000, 4_000_000);
    let mips = cpu_model.2 + rng.range(-500, 500);
    let job_starts = rng.range(0, 5000);
    let seq = rng.range(1, 100_000);
    let desktop = "(KeyboardIdle > 15 * 60) && ((LoadAvg - CondorLoadAvg) <= 0.3)";
    let start = match state {
        "Owner" => desktop.to_string(),
        "Drained" => "false".to_string(),
        _ => rng
            .weighted(&[
                (55, "true".to_string()),
                (20, desktop.to_string()),
                (10, format!("(TARGET.Owner =!= \"badguy\") && (TARGET.RequestCpus <= {cpus})")),
                (10, "(TARGET.AcctGroup =?= \"group_physics\")".to_string()),
                (
                    5,
                    "(TARGET.AcctGroup =?= \"group_physics\") || (KeyboardIdle > 3600)".to_string(),
                ),
            ])
            .clone(),
    };
    let rank = rng
        .weighted(&[
            (70, "0.0".to_string()),
            (20, "(TARGET.AcctGroup =?= \"group_physics\") * 10".to_string()),
            (10, "TARGET.JobPrio".to_string()),
        ])
        .clone();
    let gpus = if rng.chance(8) { rng.range(1, 4) } else { 0 };
    let slot_type = if slot == 1 && rng.chance(30) { "Partitionable" } else { "Static" };

    let mut s = String::with_capacity(6 * 1024);
    let mut a = |name: &str, value: &str| {
        s.push_str(name);
        s.push_str(" = ");
        s.push_str(value);
        s.push('\n');
    };
    let q = |v: &str| format!("\"{v}\"");
    a("Activity", &q(activity));
    a(
        "AddressV1",
        &q(&format!(
            "{{[ p='primary'; a='{ip}'; port=9618; n='Internet'; spid='startd_{host}'; noUDP=true; ], [ p='IPv4'; a='{ip}'; port=9618; n='Internet'; spid='startd_{host}'; noUDP=true; ]}}"
        )),
    );
    a("Arch", &q(arch));
    a("AuthenticatedIdentity", &q(&format!("condor@{DOMAIN}")));
    a("AuthenticationMethod", &q("IDTOKENS"));
    a("CanHibernate", "true");
    a(
        "CheckpointPlatform",
        &q(&format!("LINUX {arch} 5.14.0 normal N/A avx2 ssse3 sse4_1 sse4_2")),
    );
    a("ClockDay", "6");
    a("ClockMin", &format!("{}", rng.range(0, 1439)));
    a("CondorLoadAvg", &real(condor_load));
    a("CondorPlatform", &q(&format!("$CondorPlatform: {arch}-{opsys_name}_{major} $")));
    a(
        "CondorVersion",
        &q("$CondorVersion: 24.0.1 2024-10-31 BuildID: 765432 PackageID: 24.0.1-1 $"),
    );
    a("ConsoleIdle", &format!("{kbd_idle}"));
    a("CpuBusy", "((LoadAvg - CondorLoadAvg) >= 0.5)");
    a("CpuBusyTime", "0");
    a("CpuCacheSize", "36608");
    a("CpuFamily", "6");
    a("CpuIsBusy", "false");
    a("CpuModel", &q(cpu_model.0));
    a("CpuModelNumber", &format!("{}", cpu_model.1));
    a("Cpus", &format!("{cpus}"));
    a("CurrentRank", "0.0");
    a("DaemonCoreDutyCycle", &real(rng.real(0.0, 0.05)));
    a("DaemonStartTime", &format!("{start_time}"));
    a("DetectedCpus", &format!("{detected_cpus}"));
    a("DetectedMemory", &format!("{detected_mem}"));
    a("Disk", &format!("{disk}"));
    a("EnteredCurrentActivity", &format!("{entered}"));
    a("EnteredCurrentState", &format!("{entered}"));
    a("FileSystemDomain", &q(DOMAIN));
    a("GPUs", &format!("{gpus}"));
    a(
        "HardwareAddress",
        &q(&format!(
            "52:54:00:{:02x}:{:02x}:{:02x}",
            host >> 16 & 255,
            host >> 8 & 255,
            host & 255
        )),
    );
    a("HasContainer", "true");
    a("HasDocker", if rng.chance(20) { "true" } else { "false" });
    a("HasEncryptExecuteDirectory", "true");
    a("HasFileTransfer", "true");
    a("HasFileTransferPluginMethods", &q("box,data,dav,davs,gdrive,http,https,onedrive,osdf,s3"));
    a("HasIOProxy", "true");
    a("HasJobDeferral", "true");
    a("HasJobTransferPlugins", "true");
    a("HasPerFileEncryption", "true");
    a("HasReconnect", "true");
    a("HasSelfCheckpointTransfers", "true");
    a("HasSingularity", if rng.chance(70) { "true" } else { "false" });
    a("HasTDP", "true");
    a("HasUserNamespaces", "true");
    a("HasVM", "false");
    a(
        "IsValidCheckpointPlatform",
        "(TARGET.JobUniverse =!= 1 || ((MY.CheckpointPlatform =!= undefined) && ((TARGET.LastCheckpointPlatform =?= MY.CheckpointPlatform) || (TARGET.NumCkpts == 0))))",
    );
    a("IsWakeAble", "false");
    a("JobStarts", &format!("{job_starts}"));
    a("KeyboardIdle", &format!("{kbd_idle}"));
    a("KFlops", &format!("{kflops}"));
    a("LastBenchmark", &format!("{}", start_time + 300));
    a("LastHeardFrom", &format!("{}", NOW - rng.range(0, 300)));
    a("LoadAvg", &real(load));
    a("Machine", &q(&machine));
    a("MachineMaxVacateTime", "10 * 60");
    a("MaxJobRetirementTime", "0");
    a("Memory", &format!("{memory}"));
    a("Mips", &format!("{mips}"));
    a("MonitorSelfAge", &format!("{}", NOW - start_time));
    a("MonitorSelfCPUUsage", &real(rng.real(0.0, 2.0)));
    a("MonitorSelfImageSize", &format!("{}", rng.range(20_000, 90_000)));
    a("MonitorSelfRegisteredSocketCount", &format!("{}", rng.range(1, 20)));
    a("MonitorSelfResidentSetSize", &format!("{}", rng.range(8_000, 40_000)));
    a("MonitorSelfTime", &format!("{}", NOW - rng.range(0, 300)));
    a(
        "MyAddress",
        &q(&format!(
            "<{ip}:9618?addrs={ip}-9618&alias={machine}&noUDP&sock=startd_{}_{:04x}>",
            1000 + host,
            (host * 7) & 0xffff
        )),
    );
    a("MyCurrentTime", &format!("{NOW}"));
    a("MyType", &q("Machine"));
    a("Name", &q(&format!("slot{slot}@{machine}")));
    a("NextFetchWorkDelay", "-1");
    a("NumPids", &format!("{}", if activity == "Busy" { rng.range(1, 12) } else { 0 }));
    a("OpSys", &q(opsys));
    a("OpSysAndVer", &q(opsys_and_ver));
    a("OpSysLegacy", &q(opsys));
    a("OpSysLongName", &q(opsys_long));
    a("OpSysMajorVer", &format!("{major}"));
    a("OpSysName", &q(opsys_name));
    a("OpSysShortName", &q(opsys_name));
    a("OpSysVer", &format!("{ver}"));
    a("Rank", &rank);
    a("RecentDaemonCoreDutyCycle", &real(rng.real(0.0, 0.05)));
    a("RecentJobStarts", &format!("{}", rng.range(0, 10)));
    a("Requirements", "(START) && (IsValidCheckpointPlatform) && (WithinResourceLimits)");
    a("RetirementTimeRemaining", "0");
    a("SlotID", &format!("{slot}"));
    a("SlotType", &q(slot_type));
    a("SlotTypeID", &format!("{}", if slot_type == "Partitionable" { 1 } else { 0 }));
    a("SlotWeight", "Cpus");
    a("Start", &start);
    a("StartdIpAddr", &q(&format!("<{ip}:9618?addrs={ip}-9618&alias={machine}>")));
    a(
        "StarterAbilityList",
        &q(
            "HasFileTransfer,HasJobDeferral,HasJICLocalConfig,HasJICLocalStdin,HasPerFileEncryption,HasReconnect,HasTDP,HasVM",
        ),
    );
    a("State", &q(state));
    a("TargetType", &q("Job"));
    a("TimeToLive", "2147483647");
    a("TotalCondorLoadAvg", &real(condor_load * 4.0));
    a("TotalCpus", &real(detected_cpus as f64));
    a("TotalDisk", &format!("{total_disk}"));
    a("TotalLoadAvg", &real(load * 4.0));
    a("TotalMemory", &format!("{detected_mem}"));
    a("TotalSlotCpus", &format!("{cpus}"));
    a("TotalSlotDisk", &real(disk as f64));
    a("TotalSlotMemory", &format!("{memory}"));
    a("TotalSlots", "4");
    a("TotalVirtualMemory", &format!("{}", detected_mem * 1024));
    a("UidDomain", &q(DOMAIN));
    a("Unhibernate", "MY.MachineLastMatchTime =!= undefined");
    a("UpdateSequenceNumber", &format!("{seq}"));
    a("UpdatesHistory", &q("0x00000000000000000000000000000000"));
    a("UpdatesLost", "0");
    a("UpdatesSequenced", &format!("{seq}"));
    a("UpdatesTotal", &format!("{}", seq + 1));
    a("VirtualMemory", &format!("{}", memory * 1024 * 2));
    a(
        "WithinResourceLimits",
        "(MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && TARGET.RequestMemory <= MY.Memory && MY.Disk > 0 && TARGET.RequestDisk <= MY.Disk && (TARGET.RequestGPUs =?= undefined || MY.GPUs >= TARGET.RequestGPUs))",
    );
    if slot_type == "Partitionable" {
        a("ChildCpus", "{ 1,1,2 }");
        a("ChildState", "{ \"Claimed\",\"Claimed\",\"Claimed\" }");
        a("NumDynamicSlots", "3");
    }
    if state == "Claimed" {
        a("RemoteOwner", &q(&format!("user{}@{DOMAIN}", rng.range(1, 300))));
        a("RemoteUser", &q(&format!("user{}@{DOMAIN}", rng.range(1, 300))));
        a("JobId", &q(&format!("{}.{}", rng.range(1000, 999_999), rng.range(0, 99))));
        a("JobStart", &format!("{}", NOW - rng.range(60, 90_000)));
        a("TotalJobRunTime", &format!("{}", rng.range(60, 90_000)));
    }
    s
}

/// One job ad in old syntax, 120 attributes, like `condor_q -long`
/// prints. `request_memory` in MB and `disk_usage` in KB.
fn job_ad_text(
    rng: &mut Rng,
    cluster: i64,
    proc: i64,
    request_memory: i64,
    disk_usage: i64,
) -> String {
    let owner = format!("user{}", rng.range(1, 300));
    let qdate = NOW - rng.range(60, 7 * 86_400);
    let status = *rng.weighted(&[(60, 1i64), (30, 2), (5, 5), (5, 4)]);
    let runs = if status == 1 { rng.range(0, 1) } else { rng.range(1, 4) };
    let image = rng.range(10_000, 2_000_000);
    let rss = rng.range(1_000, 4_000_000);
    let cpu = rng.real(0.0, 80_000.0);
    let wall = rng.range(0, 90_000);
    let group = *rng.pick(&["group_physics", "group_chem", "group_bio", "group_cms.prod"]);
    let exe = *rng.pick(&["analyze", "simulate.sh", "run_reco", "wrapper.py", "blast"]);
    let iwd = format!("/home/{owner}/runs/batch{}", cluster % 97);
    let req_cpus = *rng.weighted(&[(80, 1i64), (15, 2), (5, 4)]);

    let mut s = String::with_capacity(6 * 1024);
    let mut a = |name: &str, value: &str| {
        s.push_str(name);
        s.push_str(" = ");
        s.push_str(value);
        s.push('\n');
    };
    let q = |v: &str| format!("\"{v}\"");
    let int = |v: i64| v.to_string();
    a("AccountingGroup", &q(&format!("{group}.{owner}")));
    a("AcctGroup", &q(group));
    a("AcctGroupUser", &q(&owner));
    a("AllowedExecuteDuration", "2 * 24 * 60 * 60");
    a(
        "Args",
        &q(&format!("--input data_{proc:04}.dat --seed {} --events 10000", rng.range(1, 1 << 30))),
    );
    a(
        "AutoClusterAttrs",
        &q(
            "_cp_orig_RequestCpus,_cp_orig_RequestDisk,_cp_orig_RequestMemory,JobUniverse,LastCheckpointPlatform,NumCkpts,RequestCpus,RequestDisk,RequestMemory,Requirements,DiskUsage,RequestGPUs,ConcurrencyLimits,NiceUser,Rank",
        ),
    );
    a("AutoClusterId", &int(rng.range(1, 500)));
    a("BufferBlockSize", "32768");
    a("BufferSize", "524288");
    a("BytesRecvd", &real(rng.real(0.0, 1e7).round()));
    a("BytesSent", &real(rng.real(0.0, 1e6).round()));
    a("ClusterId", &int(cluster));
    a("Cmd", &q(&format!("{iwd}/{exe}")));
    a("CommittedSlotTime", &int(0));
    a("CommittedSuspensionTime", "0");
    a("CommittedTime", "0");
    a("CompletionDate", "0");
    a("CondorPlatform", &q("$CondorPlatform: X86_64-AlmaLinux_9.4 $"));
    a(
        "CondorVersion",
        &q("$CondorVersion: 24.0.1 2024-10-31 BuildID: 765432 PackageID: 24.0.1-1 $"),
    );
    a("CoreSize", "0");
    a("CpusProvisioned", &int(req_cpus));
    a("CumulativeRemoteSysCpu", &real(rng.real(0.0, 500.0)));
    a("CumulativeRemoteUserCpu", &real(cpu));
    a("CumulativeSlotTime", &real(wall as f64));
    a("CumulativeSuspensionTime", "0");
    a("CurrentHosts", &int((status == 2) as i64));
    a("DiskProvisioned", &int(disk_usage * 2));
    a("DiskUsage", &int(disk_usage));
    a("DiskUsage_RAW", &int(disk_usage - 17));
    a("EncryptExecuteDirectory", "false");
    a("EnteredCurrentStatus", &int(NOW - rng.range(10, 86_400)));
    a(
        "Environment",
        &q(&format!("HOME=/home/{owner} OMP_NUM_THREADS={req_cpus} PYTHONUNBUFFERED=1")),
    );
    a("Err", &q(&format!("logs/job.{cluster}.{proc}.err")));
    a("ExecutableSize", &int(rng.range(10, 50_000)));
    a("ExecutableSize_RAW", &int(rng.range(10, 50_000)));
    a("ExitBySignal", "false");
    a("ExitStatus", "0");
    a("FileSystemDomain", &q(DOMAIN));
    a("GlobalJobId", &q(&format!("submit01.{DOMAIN}#{cluster}.{proc}#{qdate}")));
    a("ImageSize", &int(image));
    a("ImageSize_RAW", &int(image - 3));
    a("In", &q("/dev/null"));
    a("Iwd", &q(&iwd));
    a("JobBatchName", &q(&format!("{exe}_batch_{}", cluster % 97)));
    a("JobCurrentStartDate", &int(qdate + rng.range(10, 3600)));
    a("JobCurrentStartExecutingDate", &int(qdate + rng.range(3600, 7200)));
    a("JobLeaseDuration", "2400");
    a("JobNotification", "0");
    a("JobPrio", &int(rng.range(-5, 5)));
    a("JobRunCount", &int(runs));
    a("JobStartDate", &int(qdate + rng.range(10, 3600)));
    a("JobStatus", &int(status));
    a("JobUniverse", "5");
    a("KillSig", &q("SIGTERM"));
    a("LastJobLeaseRenewal", &int(NOW - rng.range(0, 600)));
    a("LastJobStatus", "1");
    a("LastMatchTime", &int(NOW - rng.range(60, 90_000)));
    a("LastRejMatchReason", &q("no match found "));
    a("LastRejMatchTime", &int(NOW - rng.range(60, 90_000)));
    a("LastSuspensionTime", "0");
    a("LeaveJobInQueue", "false");
    a("LocalSysCpu", "0.0");
    a("LocalUserCpu", "0.0");
    a("MachineAttrCpus0", &int(req_cpus));
    a("MachineAttrSlotWeight0", &int(req_cpus));
    a("MaxHosts", "1");
    a("MemoryProvisioned", &int(request_memory));
    a("MemoryUsage", "((ResidentSetSize + 1023) / 1024)");
    a("MinHosts", "1");
    a("MyType", &q("Job"));
    a("NiceUser", "false");
    a("NumCkpts", "0");
    a("NumCkpts_RAW", "0");
    a("NumJobCompletions", "0");
    a("NumJobMatches", &int(runs));
    a("NumJobStarts", &int(runs));
    a("NumRestarts", "0");
    a("NumShadowStarts", &int(runs));
    a("NumSystemHolds", "0");
    a("OnExitHold", "(ExitBySignal == true) || (ExitCode =!= undefined && ExitCode != 0)");
    a("OnExitRemove", "true");
    a("OrigMaxHosts", "1");
    a("Out", &q(&format!("logs/job.{cluster}.{proc}.out")));
    a("Owner", &q(&owner));
    a(
        "PeriodicHold",
        "(JobStatus == 2) && (time() - JobCurrentStartDate > AllowedExecuteDuration)",
    );
    a(
        "PeriodicRelease",
        "(NumJobStarts < 5) && (HoldReasonCode == 13 || HoldReasonCode == 12) && ((time() - EnteredCurrentStatus) > 600)",
    );
    a(
        "PeriodicRemove",
        "(JobStatus == 5 && (time() - EnteredCurrentStatus) > 7 * 24 * 3600) || (NumJobStarts > 10) || (MemoryUsage > 4 * RequestMemory)",
    );
    a("ProcId", &int(proc));
    a("QDate", &int(qdate));
    a("Rank", "0.0");
    a("RemoteSysCpu", &real(rng.real(0.0, 500.0)));
    a("RemoteUserCpu", &real(cpu));
    a("RemoteWallClockTime", &real(wall as f64));
    a("RequestCpus", &int(req_cpus));
    a("RequestDisk", "DiskUsage");
    a("RequestMemory", &int(request_memory));
    a(
        "Requirements",
        r#"(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory) && (TARGET.HasFileTransfer)"#,
    );
    a("ResidentSetSize", &int(rss));
    a("ResidentSetSize_RAW", &int(rss - 11));
    a("RootDir", &q("/"));
    a("ServerTime", &int(NOW));
    a("ShouldTransferFiles", &q("YES"));
    a("StreamErr", "false");
    a("StreamOut", "false");
    a("SubmitEventNotes", &q(&format!("DAG Node: node_{proc}")));
    a("TargetType", &q("Machine"));
    a("TotalSubmitProcs", &int(rng.range(1, 1000)));
    a("TotalSuspensions", "0");
    a("TransferIn", "false");
    a("TransferInput", &q(&format!("data_{proc:04}.dat,common/config.json,common/lib.tar.gz")));
    a("TransferInputSizeMB", &int(rng.range(0, 2000)));
    a("TransferOutput", &q("output,summary.json"));
    a("User", &q(&format!("{owner}@{DOMAIN}")));
    a("UserLog", &q(&format!("{iwd}/logs/{cluster}.log")));
    a("WantCheckpoint", "false");
    a("WantRemoteIO", "true");
    a("WantRemoteSyscalls", "false");
    a("WhenToTransferOutput", &q("ON_EXIT"));
    a("x509UserProxyExpiration", &int(NOW + rng.range(3600, 864_000)));
    a(
        "x509userproxysubject",
        &q(&format!("/DC=org/DC=example/OU=People/CN={owner} {}", rng.range(1000, 9999))),
    );
    s
}

struct Data {
    /// The MY job ad of the scan, in old syntax.
    job_text: String,
    /// The 10,000 machine ads in old syntax, separated by blank lines.
    machines_text: String,
    /// The parse corpus: job ads in old syntax, separated by blank lines.
    jobs_old_text: String,
    /// The same ads in new syntax, one per line.
    jobs_new_text: String,
    /// Each old-syntax job ad on its own.
    jobs_old_each: Vec<String>,
}

fn generate() -> Data {
    let mut rng = Rng::new(20_261_122);
    let job_text = job_ad_text(&mut rng, 4242, 0, 2048, 3_000_000);
    let mut machines_text = String::with_capacity(N_MACHINES * 5 * 1024);
    for i in 0..N_MACHINES {
        if i > 0 {
            machines_text.push('\n');
        }
        machines_text.push_str(&machine_ad_text(&mut rng, i));
    }
    let mut jobs_old_each = Vec::with_capacity(N_JOBS);
    for i in 0..N_JOBS {
        let cluster = 100_000 + (i as i64) / 10;
        let proc = (i as i64) % 10;
        let mem = *rng.pick(&[512i64, 1024, 2048, 4096, 8192]);
        let disk = rng.range(10_000, 10_000_000);
        jobs_old_each.push(job_ad_text(&mut rng, cluster, proc, mem, disk));
    }
    let jobs_old_text = jobs_old_each.join("\n");
    let mut jobs_new_text = String::with_capacity(jobs_old_text.len() * 11 / 10);
    for t in &jobs_old_each {
        let ad = parse_old_ad(t).expect("generated job ad parses");
        writeln!(jobs_new_text, "{ad}").unwrap();
    }
    Data { job_text, machines_text, jobs_old_text, jobs_new_text, jobs_old_each }
}

fn dump(data: &Data, dir: &str) {
    let dir = std::path::Path::new(dir);
    std::fs::create_dir_all(dir).expect("create dump directory");
    let files = [
        ("job.ad", data.job_text.as_str()),
        ("machines.ads", data.machines_text.as_str()),
        ("jobs_old.ads", data.jobs_old_text.as_str()),
        ("jobs_new.ads", data.jobs_new_text.as_str()),
        ("match_expr.txt", MATCH_EXPR),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("write dump file");
    }
    eprintln!("wrote benchmark data to {}", dir.display());
}

// ---------------------------------------------------------------------------
// Benchmarks
// ---------------------------------------------------------------------------

fn scan<'a>(
    ev: &mut Evaluator,
    expr: &Expr,
    job: &ClassAd,
    machines: impl IntoIterator<Item = &'a ClassAd>,
) -> usize {
    let mut n = 0;
    for m in machines {
        if ev.eval(expr, Some(job), Some(m)).as_bool() == Some(true) {
            n += 1;
        }
    }
    n
}

fn bench_matchmaking(c: &mut Criterion, data: &Data) {
    let job = parse_old_ad(&data.job_text).expect("job ad parses");
    let machines = parse_ads(&data.machines_text).expect("machine ads parse");
    assert_eq!(machines.len(), N_MACHINES);
    let attrs: usize = machines.iter().map(ClassAd::len).sum();
    let expr = parse_expr(MATCH_EXPR).expect("match expression parses");
    let mut ev = Evaluator::new();

    let matched = scan(&mut ev, &expr, &job, &machines);
    let sym = machines.iter().filter(|m| symmetric_match_with(&mut ev, &job, m)).count();
    eprintln!(
        "data: {} machine ads, {:.1} attributes each on average; the scan matches {matched}, \
         the symmetric match {sym}; job ad has {} attributes",
        machines.len(),
        attrs as f64 / machines.len() as f64,
        job.len()
    );
    assert!(matched > N_MACHINES / 4 && matched < N_MACHINES * 9 / 10, "unrealistic match rate");
    assert!(sym <= matched && sym > N_MACHINES / 10, "unrealistic symmetric match rate");

    let mut g = c.benchmark_group("matchmaking");
    g.sample_size(50).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(N_MACHINES as u64));
    g.bench_function("scan_10k", |b| {
        b.iter(|| scan(&mut ev, black_box(&expr), black_box(&job), black_box(&machines)))
    });
    // The same scan through `Evaluator::scan`, which prefetches the next
    // ads' slots and entries for the expression's TARGET references.
    let mut n_prefetch = 0;
    ev.scan(&expr, &job, &machines, |_, v| n_prefetch += (v.as_bool() == Some(true)) as usize);
    assert_eq!(n_prefetch, matched, "Evaluator::scan disagrees with eval");
    g.bench_function("scan_10k_prefetch", |b| {
        b.iter(|| {
            let mut n = 0;
            ev.scan(black_box(&expr), black_box(&job), black_box(&machines), |_, v| {
                n += (v.as_bool() == Some(true)) as usize
            });
            n
        })
    });
    // The same 10,000 evaluations against only 100 distinct ads, which stay
    // in cache: the gap to scan_10k is the cost of reaching 10,000 ads' memory.
    let hot: Vec<&ClassAd> = (0..N_MACHINES).map(|i| &machines[i % 100]).collect();
    g.bench_function("scan_10k_hot100", |b| {
        b.iter(|| scan(&mut ev, black_box(&expr), black_box(&job), black_box(&hot).iter().copied()))
    });
    // The same through `Evaluator::scan`: its evaluation cost without the
    // cost of reaching memory.
    g.bench_function("scan_10k_hot100_prefetch", |b| {
        b.iter(|| {
            let mut n = 0;
            ev.scan(black_box(&expr), black_box(&job), black_box(&hot), |_, v| {
                n += (v.as_bool() == Some(true)) as usize
            });
            n
        })
    });
    g.bench_function("symmetric_match_10k", |b| {
        b.iter(|| {
            black_box(&machines)
                .iter()
                .filter(|m| symmetric_match_with(&mut ev, black_box(&job), m))
                .count()
        })
    });
    g.bench_function("rank_10k", |b| {
        b.iter(|| {
            black_box(&machines).iter().map(|m| rank_with(&mut ev, m, black_box(&job))).sum::<f64>()
        })
    });
    g.finish();
}

fn bench_parse(c: &mut Criterion, data: &Data) {
    let n_ads = parse_ads(&data.jobs_old_text).expect("old-syntax corpus parses").len();
    assert_eq!(n_ads, N_JOBS);
    assert_eq!(parse_ads(&data.jobs_new_text).expect("new-syntax corpus parses").len(), N_JOBS);
    let attrs = parse_old_ad(&data.jobs_old_each[0]).unwrap().len();
    eprintln!(
        "data: {N_JOBS} job ads ({attrs} attributes in the first), old syntax {} bytes, new syntax {} bytes",
        data.jobs_old_text.len(),
        data.jobs_new_text.len()
    );

    let mut g = c.benchmark_group("parse");
    g.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));

    g.throughput(Throughput::BytesDecimal(data.jobs_old_text.len() as u64));
    g.bench_function("old_parse_ads", |b| {
        b.iter_batched(
            || (),
            |()| parse_ads(black_box(&data.jobs_old_text)).unwrap(),
            // Dropping 1,000 ads is not part of parsing.
            BatchSize::PerIteration,
        )
    });
    let each_bytes: usize = data.jobs_old_each.iter().map(String::len).sum();
    g.throughput(Throughput::BytesDecimal(each_bytes as u64));
    g.bench_function("old_parse_old_ad_each", |b| {
        b.iter_batched(
            || (),
            |()| {
                data.jobs_old_each
                    .iter()
                    .map(|t| parse_old_ad(black_box(t)).unwrap())
                    .collect::<Vec<_>>()
            },
            BatchSize::PerIteration,
        )
    });
    g.throughput(Throughput::BytesDecimal(data.jobs_new_text.len() as u64));
    g.bench_function("new_parse_ads", |b| {
        b.iter_batched(
            || (),
            |()| parse_ads(black_box(&data.jobs_new_text)).unwrap(),
            BatchSize::PerIteration,
        )
    });
    // One iteration takes most of a second: the minimum of 10 samples.
    g.sample_size(10);
    g.throughput(Throughput::BytesDecimal(data.machines_text.len() as u64));
    g.bench_function("old_parse_machines_10k", |b| {
        b.iter_batched(
            || (),
            |()| parse_ads(black_box(&data.machines_text)).unwrap(),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

/// Printing ads, as every daemon does for each job (a batch to a host, an
/// end to the schedd, a history row): the 1,000 job ads and 10,000 machine
/// ads (which hold many reals: loads, MIPS, ...), in new and old syntax.
fn bench_unparse(c: &mut Criterion, data: &Data) {
    let jobs = parse_ads(&data.jobs_new_text).expect("new-syntax corpus parses");
    let machines = parse_ads(&data.machines_text).expect("machine corpus parses");
    let mut g = c.benchmark_group("unparse");
    g.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(jobs.len() as u64));
    g.bench_function("new_jobs", |b| {
        b.iter(|| jobs.iter().map(|ad| black_box(ad).to_string().len()).sum::<usize>())
    });
    g.bench_function("old_jobs", |b| {
        b.iter(|| jobs.iter().map(|ad| black_box(ad).to_old_syntax().len()).sum::<usize>())
    });
    g.throughput(Throughput::Elements(machines.len() as u64));
    g.bench_function("new_machines_10k", |b| {
        b.iter(|| machines.iter().map(|ad| black_box(ad).to_string().len()).sum::<usize>())
    });
    g.finish();
}

/// Attribute names made from their text, as the daemons' code does at every
/// `ad.get("JobStatus")`: the 24 names a job's end reads and writes, made
/// one after another (`names/new_24`), and the same lookups in a job ad by
/// text (`names/get_24`) and by names made once (`names/lookup_24`).
fn bench_names(c: &mut Criterion, data: &Data) {
    const NAMES: [&str; 24] = [
        "ClusterId",
        "ProcId",
        "Owner",
        "JobStatus",
        "RequestDisk",
        "RequestMemory",
        "GlobalJobId",
        "ExitCode",
        "ExitBySignal",
        "CompletionDate",
        "RemoteWallClockTime",
        "HoldReasonCode",
        "HoldReason",
        "TransferOutput",
        "Out",
        "Err",
        "Cmd",
        "Arguments",
        "Iwd",
        "JobUniverse",
        "NumJobStarts",
        "LastJobStatus",
        "EnteredCurrentStatus",
        "RemoteSysCpu",
    ];
    let jobs = parse_ads(&data.jobs_new_text).expect("new-syntax corpus parses");
    let job = &jobs[0];
    let made: Vec<classad::AttrName> = NAMES.iter().map(|n| classad::AttrName::new(n)).collect();
    let mut g = c.benchmark_group("names");
    g.sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(NAMES.len() as u64));
    g.bench_function("new_24", |b| {
        b.iter(|| {
            NAMES.iter().map(|n| classad::AttrName::new(black_box(n)).as_str().len()).sum::<usize>()
        })
    });
    g.bench_function("get_24", |b| {
        b.iter(|| NAMES.iter().filter(|n| black_box(job).get(black_box(n)).is_some()).count())
    });
    g.bench_function("lookup_24", |b| {
        b.iter(|| made.iter().filter(|n| black_box(job).lookup(black_box(n)).is_some()).count())
    });
    g.finish();
}

fn main() {
    let data = generate();
    if let Ok(dir) = std::env::var("ANDES_BENCH_DUMP") {
        dump(&data, &dir);
    }
    let mut c = Criterion::default().configure_from_args();
    bench_matchmaking(&mut c, &data);
    bench_parse(&mut c, &data);
    bench_unparse(&mut c, &data);
    bench_names(&mut c, &data);
    c.final_summary();
}
