//! The fault harness (`cargo xtask faults`): a pool of separate processes on
//! 127.0.0.1 (a central manager, a schedd, three hosts) whose every link
//! between daemons passes through a proxy of the harness's own, and a seeded
//! schedule of faults while jobs stream in:
//!
//! * `kill-schedd`, `kill-cm`, `kill-host`: SIGKILL at a random moment (during a
//!   submit, a claim, an activation, a job's end or its output's return:
//!   whatever the pool is doing), then a restart at the same address;
//! * `partition`: one link (schedd↔central manager, host↔central manager or
//!   schedd↔host) swallows every byte for a while: open connections are cut,
//!   new ones are accepted and never answered;
//! * `cut`: every connection of one link closed at once;
//! * `delay`: every chunk on one link held back for a while;
//! * `disk-full`: the schedd's SPOOL (a tmpfs of its own; root only) filled to
//!   the last byte for a while;
//! * `clock-step`: a host's wall clock stepped by up to two minutes either way
//!   (libfaketime; the monotonic clock is left alone, as a real step leaves it).
//!
//! After each fault heals, the harness waits until the pool is whole (every
//! slot advertised, and a probe job submitted after the heal completed: on the
//! host the fault hit, if it hit one) and records the time. At the end a checker proves: every
//! acknowledged job completed exactly once in the schedd's history (none
//! lost, none twice), each output is byte-identical to an uninterrupted run's,
//! no slot is left claimed and no job is left running on a host. It prints a
//! table of faults per kind and recovery times, for RELIABILITY.md.
//!
//! `ANDES_FAULT_SEED` picks the schedule (the same seed gives the same
//! sequence of faults), `ANDES_FAULT_SECONDS` how long faults are injected
//! (default 60). The short run is part of the test suite; `cargo xtask faults`
//! runs a long one.
#![cfg(target_os = "linux")]

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use classad::ClassAd;

use common::pool::{int, text};
use common::{Lcg, env_u64 as env};

// ---------------------------------------------------------------- the proxy

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Open,
    /// Accept, never answer; open connections cut.
    Blackhole,
    /// Every chunk held back this long.
    Delay(Duration),
}

#[derive(Default)]
struct LinkState {
    mode: Mutex<Option<Mode>>,
    next: AtomicU64,
    /// Both ends of every live connection, to cut them.
    live: Mutex<HashMap<u64, (TcpStream, TcpStream)>>,
    /// Connections accepted during a partition, never answered.
    held: Mutex<Vec<TcpStream>>,
}

/// One direction of daemon-to-daemon traffic, through the harness.
struct Link {
    name: String,
    state: Arc<LinkState>,
}

impl Link {
    fn start(name: &str, listen: SocketAddr, target: SocketAddr) -> Link {
        let listener = TcpListener::bind(listen)
            .unwrap_or_else(|e| panic!("proxy {name}: binding {listen}: {e}"));
        let state = Arc::new(LinkState::default());
        *state.mode.lock().unwrap() = Some(Mode::Open);
        let st = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let mode = st.mode.lock().unwrap().unwrap_or(Mode::Open);
                if mode == Mode::Blackhole {
                    st.held.lock().unwrap().push(conn);
                    continue;
                }
                let Ok(up) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else {
                    continue;
                };
                let _ = up.set_nodelay(true);
                let _ = conn.set_nodelay(true);
                let id = st.next.fetch_add(1, Ordering::Relaxed);
                if let (Ok(a), Ok(b)) = (conn.try_clone(), up.try_clone()) {
                    st.live.lock().unwrap().insert(id, (a, b));
                }
                for (from, to) in [(conn.try_clone(), up.try_clone()), (Ok(up), Ok(conn))] {
                    let (Ok(from), Ok(to)) = (from, to) else { continue };
                    let st = st.clone();
                    std::thread::spawn(move || pump(id, from, to, &st));
                }
            }
        });
        Link { name: name.into(), state }
    }

    fn set(&self, mode: Mode) {
        *self.state.mode.lock().unwrap() = Some(mode);
        match mode {
            Mode::Blackhole => self.cut(),
            Mode::Open => {
                for c in self.state.held.lock().unwrap().drain(..) {
                    let _ = c.shutdown(Shutdown::Both);
                }
            }
            Mode::Delay(_) => {}
        }
    }

    fn cut(&self) {
        for (_, (a, b)) in self.state.live.lock().unwrap().drain() {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
    }
}

fn pump(id: u64, mut from: TcpStream, mut to: TcpStream, st: &LinkState) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        match *st.mode.lock().unwrap() {
            Some(Mode::Delay(d)) => std::thread::sleep(d),
            Some(Mode::Blackhole) => break,
            _ => {}
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
    st.live.lock().unwrap().remove(&id);
}

// ---------------------------------------------------------------- the pool

/// A port nobody listens on now, for a daemon that must come back at the
/// same address after each restart.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Daemon {
    name: String,
    args: Vec<String>,
    config: PathBuf,
    log: PathBuf,
    /// File the daemon writes its address to once it listens.
    ready: PathBuf,
    env: Vec<(String, String)>,
    child: Option<Child>,
}

impl Daemon {
    fn start(&mut self, dir: &Path) {
        let _ = std::fs::remove_file(&self.ready);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let mut cmd = common::andes();
        cmd.args(&self.args)
            .env("ANDES_CONFIG_DIR", dir)
            .env("ANDES_CONFIG", &self.config)
            .env("USER", "nobody")
            .stdout(Stdio::null())
            .stderr(log);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let start = Instant::now();
        while std::fs::read_to_string(&self.ready).map(|s| s.trim().is_empty()).unwrap_or(true) {
            if let Some(st) = child.try_wait().unwrap() {
                panic!("{} exited at start: {st}\n{}", self.name, tail(&self.log, 40));
            }
            assert!(start.elapsed() < Duration::from_secs(60), "{} did not start", self.name);
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child = Some(child);
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Whether the daemon died on its own (a crash, not a kill of ours).
    fn crashed(&mut self) -> Option<String> {
        let c = self.child.as_mut()?;
        let st = c.try_wait().ok()??;
        self.child = None;
        Some(format!("{} exited by itself: {st}\n{}", self.name, tail(&self.log, 60)))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn tail(p: &Path, lines: usize) -> String {
    let t = std::fs::read_to_string(p).unwrap_or_default();
    let v: Vec<&str> = t.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
const HOSTS: usize = 3;
/// Two slots for the stream of jobs and a third for the probes only, so
/// that a probe measures how soon the host works again, not how long the
/// stream keeps its slots claimed.
const SLOTS_PER_HOST: usize = 3;
/// What each host adds to the pool's configuration for that (the jobs'
/// Requirements pick their slots).
const PROBE_SLOT: &str = "NUM_CPUS = 3\n";
/// The primes jobs' arguments: each runs a third of a second to over a second.
const SIZES: [u64; 4] = [60_000_000, 120_000_000, 180_000_000, 240_000_000];
/// The workload of big files (`copyfile`), beside the primes of each size.
const COPY: u64 = 0;
/// The submit files the stream of submits cycles through: `p0.sub`...
const WORKLOADS: usize = SIZES.len() + 1;

struct Pool {
    cm: Daemon,
    schedd: Daemon,
    hosts: Vec<Daemon>,
    links: Vec<Link>,
    user_config: PathBuf,
    /// The SPOOL is a tmpfs of its own (root only), for disk-full faults.
    spool_tmpfs: Option<PathBuf>,
    /// Host i's libfaketime offset file, when clock steps can be made.
    clocks: Vec<PathBuf>,
    /// Last, so that it is removed after every daemon has stopped.
    dir: tempfile::TempDir,
}

fn am_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { geteuid() == 0 }
}

unsafe extern "C" {
    fn geteuid() -> u32;
}

impl Pool {
    fn new() -> Pool {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let mut who = vec![("schedd", "schedd"), ("negotiator", "negotiator"), ("alice", "user")];
        who.push(("root", "admin"));
        let names: Vec<String> = (1..=HOSTS).map(|i| format!("host{i}")).collect();
        for n in &names {
            who.push((n.as_str(), "host"));
        }
        common::keys_and_trust(p, &who);
        let spool = p.join("spool");
        std::fs::create_dir_all(&spool).unwrap();
        let spool_tmpfs = (am_root()
            && std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=48m", "andes-faults", spool.to_str().unwrap()])
                .status()
                .is_ok_and(|s| s.success()))
        .then(|| spool.clone());
        let (pc, ps) = (free_port(), free_port());
        let ph: Vec<u16> = (0..HOSTS).map(|_| free_port()).collect();
        let common_cfg = format!(
            "{}\nUSER_ACCOUNT_MAP = * = {}\nALIVE_INTERVAL = 1\nMAX_CLAIM_ALIVES_MISSED = 3\n\
             MATCH_TIMEOUT = 10\nSPOOL = {}\n",
            common::pool::COMMON.replace(
                "CENTRAL_MANAGER_ADDRESS = 127.0.0.1:0",
                &format!("CENTRAL_MANAGER_ADDRESS = 127.0.0.1:{pc}")
            ),
            common::this_account(),
            spool.display()
        );
        let write = |name: &str, text: String| {
            let f = p.join(format!("{name}.config"));
            std::fs::write(&f, text).unwrap();
            f
        };
        let daemon = |name: &str, args: &[&str], config: PathBuf, ready: PathBuf| Daemon {
            name: name.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            config,
            log: p.join(format!("{name}.log")),
            ready,
            env: Vec::new(),
            child: None,
        };
        let mut links = Vec::new();
        let cm_addr: SocketAddr = format!("127.0.0.1:{pc}").parse().unwrap();
        let mut cm = daemon(
            "cm",
            &["central-manager"],
            write("cm", format!("{common_cfg}COLLECTOR_HOST = 127.0.0.1:{pc}\n")),
            p.join(".collector_address"),
        );
        cm.start(p);
        links.push(Link::start("schedd→cm", format!("127.0.0.2:{pc}").parse().unwrap(), cm_addr));
        let mut schedd = daemon(
            "schedd",
            &["schedd"],
            write(
                "schedd",
                format!(
                    "{common_cfg}SCHEDD_ADDRESS = 127.0.0.1:{ps}\nCOLLECTOR_HOST = 127.0.0.2:{pc}\n"
                ),
            ),
            spool.join(".schedd_address"),
        );
        schedd.start(p);
        let faketime = Path::new(FAKETIME).exists();
        let mut hosts = Vec::new();
        let mut clocks = Vec::new();
        for (i, port) in ph.iter().enumerate() {
            let n = i + 1;
            let host_addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            links.push(Link::start(
                &format!("host{n}→cm"),
                format!("127.0.0.{}:{pc}", 10 + n).parse().unwrap(),
                cm_addr,
            ));
            links.push(Link::start(
                &format!("schedd→host{n}"),
                format!("127.0.0.{}:{port}", 20 + n).parse().unwrap(),
                host_addr,
            ));
            let ready = p.join(format!(".host{n}_address"));
            let cfg = write(
                &format!("host{n}"),
                format!(
                    "{common_cfg}HOST_ADDRESS = 127.0.0.1:{port}\nNETWORK_HOSTNAME = 127.0.0.{}\n\
                     COLLECTOR_HOST = 127.0.0.{}:{pc}\nHOST_KEY_NAME = host{n}\n\
                     EXECUTE = $(LOCAL_DIR)/execute{n}\nHOST_ADDRESS_FILE = {}\n\
                     MODULE_CACHE = $(LOCAL_DIR)/cache{n}\nSTARTD_NAME = host{n}\n{PROBE_SLOT}",
                    20 + n,
                    10 + n,
                    ready.display()
                ),
            );
            let mut h = daemon(&format!("host{n}"), &["host"], cfg, ready);
            if faketime {
                let clock = p.join(format!("clock{n}"));
                std::fs::write(&clock, "+0\n").unwrap();
                h.env = vec![
                    ("LD_PRELOAD".into(), FAKETIME.into()),
                    ("FAKETIME_TIMESTAMP_FILE".into(), clock.display().to_string()),
                    ("FAKETIME_NO_CACHE".into(), "1".into()),
                    ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
                ];
                clocks.push(clock);
            }
            h.start(p);
            hosts.push(h);
        }
        let user_config = write("user", format!("{common_cfg}COLLECTOR_HOST = 127.0.0.1:{pc}\n"));
        Pool { dir, cm, schedd, hosts, links, user_config, spool_tmpfs, clocks }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn cmd(&self, args: &[&str]) -> std::process::Output {
        let cwd = self.path().join("jobs");
        std::fs::create_dir_all(&cwd).unwrap();
        common::andes()
            .args(args)
            .current_dir(cwd)
            .env("ANDES_CONFIG_DIR", self.path())
            .env("ANDES_CONFIG", &self.user_config)
            .env("USER", "root")
            .output()
            .unwrap()
    }

    /// Ads from `andes ARGS -json`, or `None` when the command failed.
    fn ads(&self, args: &[&str]) -> Option<Vec<ClassAd>> {
        let mut a = args.to_vec();
        a.push("--json");
        let o = self.cmd(&a);
        if !o.status.success() {
            return None;
        }
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        Some(v.as_array()?.iter().filter_map(|j| classad::json::ad_from_json(j).ok()).collect())
    }

    fn link(&self, name: &str) -> &Link {
        self.links.iter().find(|l| l.name == name).unwrap()
    }

    fn heal_all(&self) {
        for l in &self.links {
            l.set(Mode::Open);
        }
        if let Some(s) = &self.spool_tmpfs {
            let _ = std::fs::remove_file(s.join("filler"));
        }
    }

    fn logs(&self) -> String {
        let mut s = String::new();
        for d in [&self.cm, &self.schedd].into_iter().chain(&self.hosts) {
            s.push_str(&format!("== {} (last lines)\n{}\n", d.name, tail(&d.log, 80)));
        }
        s
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.schedd.kill9();
        if let Some(s) = &self.spool_tmpfs {
            let _ = std::process::Command::new("umount").arg(s).status();
        }
    }
}

// ---------------------------------------------------------------- the run

#[derive(Default)]
struct Tally {
    /// kind → (count, recovery times).
    kinds: BTreeMap<&'static str, (u32, Vec<Duration>)>,
    stuck: Vec<String>,
}

/// Fills the file system holding `dir` to its last byte.
fn fill(dir: &Path) {
    let Ok(mut f) = std::fs::File::create(dir.join("filler")) else { return };
    let chunk = vec![0u8; 1 << 20];
    while f.write_all(&chunk).is_ok() {}
    let small = [0u8; 512];
    while f.write_all(&small).is_ok() {}
    let _ = f.flush();
}

#[test]
fn a_pool_under_a_seeded_schedule_of_faults_loses_nothing_runs_nothing_twice_and_frees_every_slot()
{
    let seed = env("ANDES_FAULT_SEED", 1);
    let seconds = env("ANDES_FAULT_SECONDS", 60);
    let mut rng = Lcg(seed);
    let mut pool = Pool::new();
    let not_run: Vec<&str> = [
        (pool.spool_tmpfs.is_none(), "disk-full (needs root to mount a tmpfs)"),
        (pool.clocks.is_empty(), "clock-step (needs libfaketime)"),
    ]
    .into_iter()
    .filter_map(|(missing, what)| missing.then_some(what))
    .collect();
    for w in &not_run {
        if common::not_run(&format!("the fault harness's {w} faults"), w) {
            eprintln!("faults: NOT RUN: {w}");
        }
    }

    // Uninterrupted runs give the expected outputs.
    let jobs = pool.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::copy(common::pool::sample("primes"), jobs.join("primes.wasm")).unwrap();
    let mut expected = HashMap::new();
    for n in SIZES {
        let o = pool.cmd(&["run", "primes.wasm", &n.to_string()]);
        assert!(o.status.success(), "andes run primes {n}: {o:?}");
        expected.insert(n, o.stdout);
    }
    // One workload of big files: 3 MiB in, 3 MiB out, both moving as streams.
    std::fs::copy(common::pool::sample("copyfile"), jobs.join("copyfile.wasm")).unwrap();
    let mut x = seed | 1;
    let big: Vec<u8> = (0..3 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(jobs.join("big.in"), &big).unwrap();
    expected.insert(COPY, format!("{}\n", big.len()).into_bytes());
    std::fs::write(
        jobs.join(format!("p{}.sub", SIZES.len())),
        "executable = copyfile.wasm\narguments = big.in big.$(Cluster).$(Process)\n\
         transfer_input_files = big.in\noutput = out.$(Cluster).$(Process)\n\
         error = err.$(Cluster).$(Process)\nrequirements = TARGET.SlotID <= 2\nqueue 3\n",
    )
    .unwrap();
    for (k, n) in SIZES.iter().enumerate() {
        std::fs::write(
            jobs.join(format!("p{k}.sub")),
            format!(
                "executable = primes.wasm\narguments = {n}\noutput = out.$(Cluster).$(Process)\n\
                 error = err.$(Cluster).$(Process)\nrequirements = TARGET.SlotID <= 2\nqueue 3\n"
            ),
        )
        .unwrap();
    }

    // Probes: a short job anywhere, or on one host, submitted after each heal.
    let probe = |req: &str| {
        format!(
            "executable = primes.wasm\narguments = {}\noutput = out.$(Cluster).$(Process)\n\
             error = err.$(Cluster).$(Process)\n{req}queue 1\n",
            SIZES[0]
        )
    };
    std::fs::write(jobs.join("probe.sub"), probe("requirements = TARGET.SlotID == 3\n")).unwrap();
    for i in 1..=HOSTS {
        let req = format!("requirements = TARGET.Name == \"slot3@host{i}\"\n");
        std::fs::write(jobs.join(format!("probe{i}.sub")), probe(&req)).unwrap();
    }

    // A steady stream of submits, each acknowledged one recorded with its size.
    // (cluster, the primes job's argument, jobs in the cluster).
    let acknowledged: Arc<Mutex<Vec<(i64, u64, i64)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let submitter = {
        let (ack, stop) = (acknowledged.clone(), stop.clone());
        let (dir, cfg) = (pool.path().to_path_buf(), pool.user_config.clone());
        std::thread::spawn(move || {
            let mut k = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let o = common::andes()
                    .args(["submit", &format!("p{}.sub", k % WORKLOADS)])
                    .current_dir(dir.join("jobs"))
                    .env("ANDES_CONFIG_DIR", &dir)
                    .env("ANDES_CONFIG", &cfg)
                    .env("USER", "alice")
                    .output()
                    .unwrap();
                if let Some(c) = common::submitted_cluster(&o, 3) {
                    let n = SIZES.get(k % WORKLOADS).copied().unwrap_or(COPY);
                    ack.lock().unwrap().push((c, n, 3));
                    k += 1;
                }
                std::thread::sleep(Duration::from_millis(2500));
            }
        })
    };

    let mut tally = Tally::default();
    let started = Instant::now();
    let mut fault_no = 0;
    let mut crashes = Vec::new();
    while started.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(rng.between(500, 3000)));
        fault_no += 1;
        let link_names: Vec<String> = pool.links.iter().map(|l| l.name.clone()).collect();
        let mut kinds = vec!["kill-schedd", "kill-cm", "kill-host", "partition", "cut", "delay"];
        if pool.spool_tmpfs.is_some() {
            kinds.push("disk-full");
        }
        if !pool.clocks.is_empty() {
            kinds.push("clock-step");
        }
        let kind = kinds[rng.next(kinds.len() as u64) as usize];
        let dir = pool.path().to_path_buf();
        let (target, what) = match kind {
            "kill-schedd" => {
                pool.schedd.kill9();
                std::thread::sleep(Duration::from_millis(rng.next(2000)));
                pool.schedd.start(&dir);
                (Target::Schedd, String::new())
            }
            "kill-cm" => {
                pool.cm.kill9();
                std::thread::sleep(Duration::from_millis(rng.next(3000)));
                pool.cm.start(&dir);
                (Target::Cm, String::new())
            }
            "kill-host" => {
                let i = rng.next(HOSTS as u64) as usize;
                pool.hosts[i].kill9();
                std::thread::sleep(Duration::from_millis(rng.next(3000)));
                pool.hosts[i].start(&dir);
                (Target::Host(i + 1), pool.hosts[i].name.clone())
            }
            "partition" => {
                let l = &link_names[rng.next(link_names.len() as u64) as usize];
                pool.link(l).set(Mode::Blackhole);
                std::thread::sleep(Duration::from_millis(rng.between(2000, 15000)));
                pool.link(l).set(Mode::Open);
                (Target::of_link(l), l.clone())
            }
            "cut" => {
                let l = &link_names[rng.next(link_names.len() as u64) as usize];
                pool.link(l).cut();
                (Target::of_link(l), l.clone())
            }
            "delay" => {
                let l = &link_names[rng.next(link_names.len() as u64) as usize];
                let d = Duration::from_millis(rng.between(50, 800));
                pool.link(l).set(Mode::Delay(d));
                std::thread::sleep(Duration::from_millis(rng.between(3000, 12000)));
                pool.link(l).set(Mode::Open);
                (Target::of_link(l), format!("{l} {d:?}"))
            }
            "disk-full" => {
                let s = pool.spool_tmpfs.clone().unwrap();
                fill(&s);
                std::thread::sleep(Duration::from_millis(rng.between(2000, 10000)));
                let _ = std::fs::remove_file(s.join("filler"));
                (Target::Schedd, String::new())
            }
            "clock-step" => {
                let i = rng.next(pool.clocks.len() as u64) as usize;
                let step = rng.between(0, 240) as i64 - 120;
                std::fs::write(&pool.clocks[i], format!("{step:+}\n")).unwrap();
                (Target::Host(i + 1), format!("host{} {step:+} s", i + 1))
            }
            _ => unreachable!(),
        };
        eprintln!("faults: #{fault_no} at {:?}: {kind} {what}", started.elapsed());
        for d in [&mut pool.cm, &mut pool.schedd].into_iter().chain(pool.hosts.iter_mut()) {
            if let Some(c) = d.crashed() {
                crashes.push(c);
            }
        }
        let healed = Instant::now();
        let entry = tally.kinds.entry(kind).or_default();
        entry.0 += 1;
        match wait_whole(&pool, target, Duration::from_secs(180)) {
            Ok(c) => {
                let took = healed.elapsed();
                eprintln!("faults: #{fault_no} recovered in {:.1} s", took.as_secs_f64());
                if took > Duration::from_secs(30) {
                    eprintln!(
                        "faults: SLOW recovery after #{fault_no} {kind} {what}:\n{}",
                        pool.logs()
                    );
                }
                entry.1.push(took);
                acknowledged.lock().unwrap().push((c, SIZES[0], 1));
            }
            Err(why) => {
                tally.stuck.push(format!("#{fault_no} {kind} {what}: {why}"));
                eprintln!("faults: STUCK after #{fault_no} {kind} {what}: {why}\n{}", pool.logs());
                break;
            }
        }
    }
    let fault_time = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    submitter.join().unwrap();
    pool.heal_all();
    for d in [&mut pool.cm, &mut pool.schedd].into_iter().chain(pool.hosts.iter_mut()) {
        if let Some(c) = d.crashed() {
            crashes.push(c);
        }
    }
    assert!(crashes.is_empty(), "daemons died without being killed:\n{}", crashes.join("\n"));
    assert!(tally.stuck.is_empty(), "the pool did not recover: {:#?}", tally.stuck);

    // The queue drains, every acknowledged job exactly once, every output right.
    let drained = Instant::now();
    let mut last;
    loop {
        match pool.ads(&["q"]) {
            Some(q) if q.iter().all(|a| int(a, "JobStatus") == 5) => break,
            Some(q) => last = format!("{} jobs left", q.len()),
            None => last = "the schedd does not answer".into(),
        }
        assert!(
            drained.elapsed() < Duration::from_secs(300),
            "the queue did not drain: {last}\n{}",
            pool.logs()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let held: Vec<ClassAd> = pool.ads(&["q"]).unwrap_or_default();
    let history = pool.ads(&["history"]).expect("history");
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(!acknowledged.is_empty(), "no submit was acknowledged");
    let mut count: HashMap<(i64, i64), u32> = HashMap::new();
    for a in &history {
        if int(a, "JobStatus") == 4 {
            *count.entry((int(a, "ClusterId"), int(a, "ProcId"))).or_default() += 1;
        }
    }
    let (mut lost, mut twice, mut wrong, mut held_n) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for (c, n, procs) in &acknowledged {
        for proc in 0..*procs {
            if let Some(h) =
                held.iter().find(|a| int(a, "ClusterId") == *c && int(a, "ProcId") == proc)
            {
                assert!(!text(h, "HoldReason").is_empty(), "held without a reason: {h}");
                eprintln!("faults: {c}.{proc} held: {}", text(h, "HoldReason"));
                held_n += 1;
                continue;
            }
            match count.get(&(*c, proc)) {
                None => lost.push(format!("{c}.{proc}")),
                Some(1) => {}
                Some(k) => twice.push(format!("{c}.{proc} ({k} times)")),
            }
            let out = std::fs::read(jobs.join(format!("out.{c}.{proc}"))).unwrap_or_default();
            if out != expected[n] {
                wrong.push(format!("{c}.{proc}: {:?}", String::from_utf8_lossy(&out)));
            }
            if *n == COPY
                && std::fs::read(jobs.join(format!("big.{c}.{proc}"))).unwrap_or_default() != big
            {
                wrong.push(format!("{c}.{proc}: its 3 MiB output is not its input"));
            }
        }
    }
    // What the hosts ran to the end (their STARTD_HISTORY, one file here):
    // a job the schedd saw complete once may not have run to its end twice.
    let mut runs: HashMap<(i64, i64), u32> = HashMap::new();
    for line in
        std::fs::read_to_string(pool.path().join("startd_history")).unwrap_or_default().lines()
    {
        if let Some(rest) = line.strip_prefix("*** ClusterId = ") {
            let mut f = rest.split_whitespace();
            let c = f.next().and_then(|v| v.parse().ok());
            let p = f.nth(2).and_then(|v| v.parse().ok());
            if let (Some(c), Some(p)) = (c, p) {
                *runs.entry((c, p)).or_default() += 1;
            }
        }
    }
    let ran_twice: Vec<String> = runs
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((c, p), n)| format!("{c}.{p} ({n} runs)"))
        .collect();
    // No slot stays claimed, no job runs on a host.
    let freed = Instant::now();
    let mut stuck_slots = Vec::new();
    while freed.elapsed() < Duration::from_secs(120) {
        stuck_slots = match pool.ads(&["status"]) {
            Some(s) if s.len() == HOSTS * SLOTS_PER_HOST => s
                .iter()
                .filter(|a| text(a, "State") != "Unclaimed" || text(a, "Activity") != "Idle")
                .map(|a| {
                    format!("{} {} {}", text(a, "Name"), text(a, "State"), text(a, "Activity"))
                })
                .collect(),
            Some(s) => vec![format!("{} slots advertised", s.len())],
            None => vec!["the collector does not answer".into()],
        };
        if stuck_slots.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }

    let drain_time = drained.elapsed();
    // The record.
    let jobs_n: i64 = acknowledged.iter().map(|a| a.2).sum();
    eprintln!(
        "\nfaults: seed {seed}, {:.0} s of faults, {fault_no} faults, then drained and checked in \
         {:.0} s, {jobs_n} acknowledged jobs \
         ({held_n} held), lost {}, duplicated {} (completed twice {}, ran to the end twice {}), \
         wrong output {}, stuck slots {}",
        fault_time.as_secs_f64(),
        drain_time.as_secs_f64(),
        lost.len(),
        twice.len() + ran_twice.len(),
        twice.len(),
        ran_twice.len(),
        wrong.len(),
        stuck_slots.len()
    );
    eprintln!("| fault | injected | recovery median | recovery max |\n| --- | --- | --- | --- |");
    for (kind, (n, times)) in &tally.kinds {
        let mut t = times.clone();
        t.sort();
        let med = t.get(t.len() / 2).copied().unwrap_or_default();
        let max = t.last().copied().unwrap_or_default();
        eprintln!("| {kind} | {n} | {:.1} s | {:.1} s |", med.as_secs_f64(), max.as_secs_f64());
    }
    for w in &not_run {
        eprintln!("| {w} | NOT RUN | | |");
    }
    assert!(lost.is_empty(), "acknowledged jobs lost: {lost:?}\n{}", pool.logs());
    assert!(twice.is_empty(), "jobs completed more than once: {twice:?}\n{}", pool.logs());
    assert!(ran_twice.is_empty(), "jobs ran to their end twice: {ran_twice:?}\n{}", pool.logs());
    assert!(wrong.is_empty(), "outputs differ from an uninterrupted run: {wrong:?}");
    assert!(stuck_slots.is_empty(), "slots left busy: {stuck_slots:?}\n{}", pool.logs());
}

/// What a fault hit, and so what must work again before the pool is whole.
#[derive(Clone, Copy, Debug)]
enum Target {
    Cm,
    Schedd,
    /// Host `i` (1-based).
    Host(usize),
}

impl Target {
    fn of_link(name: &str) -> Target {
        match name.split('→').find_map(|end| end.strip_prefix("host")) {
            Some(i) => Target::Host(i.parse().unwrap()),
            None => Target::Schedd,
        }
    }
}

/// Waits until the pool is whole after a fault on `target` healed: every
/// slot advertised, and a probe job submitted after the heal (pinned to the
/// host, for a fault on a host) completed. Returns the probe's cluster.
fn wait_whole(pool: &Pool, target: Target, limit: Duration) -> Result<i64, String> {
    let start = Instant::now();
    let sub = match target {
        Target::Host(i) => format!("probe{i}.sub"),
        _ => "probe.sub".to_string(),
    };
    let mut probe: Option<i64> = None;
    let mut why = String::new();
    let mut said = Instant::now();
    while start.elapsed() < limit {
        // A slow recovery says why it waits, every ten seconds.
        if said.elapsed() >= Duration::from_secs(10) && !why.is_empty() {
            eprintln!(
                "faults: waiting {:.0} s for {target:?}: {why}",
                start.elapsed().as_secs_f64()
            );
            said = Instant::now();
        }
        let ads = pool.ads(&["status"]).unwrap_or_default();
        let slots = ads.len();
        if slots != HOSTS * SLOTS_PER_HOST {
            let names: Vec<String> = ads.iter().map(|a| text(a, "Name")).collect();
            why = format!("{slots} of {} slots advertised: {names:?}", HOSTS * SLOTS_PER_HOST);
        } else if let Some(c) = probe {
            let o = pool.cmd(&["history", &c.to_string(), "--af", "JobStatus"]);
            if String::from_utf8_lossy(&o.stdout).trim() == "4" {
                return Ok(c);
            }
            why = format!("the probe job {c} for {target:?} has not completed");
        } else {
            let o = pool.cmd(&["submit", &sub]);
            match common::submitted_cluster(&o, 1) {
                Some(c) => probe = Some(c),
                None => {
                    why = format!("the probe submit failed: {}", String::from_utf8_lossy(&o.stderr))
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(why)
}
