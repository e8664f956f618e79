//! A pool of real `andes` processes in a temporary directory: central
//! manager, schedd and hosts, and the commands users run against it.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use classad::{ClassAd, Value};

use super::andes;

pub fn sample(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples/target/wasm32-wasip1/release")
        .join(format!("{name}.wasm"));
    assert!(p.exists(), "{}: build the samples first (`cargo xtask test` does)", p.display());
    p
}

/// What every process of a test pool shares.
pub const COMMON: &str = "
NUM_CPUS = 2
START = True
SUSPEND = False
CONTINUE = True
PREEMPT = False
KILL = False
WANT_SUSPEND = False
WANT_VACATE = False
RANK = 0
NEGOTIATOR_INTERVAL = 2
SCHEDD_INTERVAL = 2
UPDATE_INTERVAL = 2
CLASSAD_LIFETIME = 8
PERIODIC_EXPR_INTERVAL = 2
SCHEDD_ADDRESS = 127.0.0.1:0
HOST_ADDRESS = 127.0.0.1:0
CENTRAL_MANAGER_ADDRESS = 127.0.0.1:0
";

pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A pool of real processes in a temporary directory.
/// The configuration of a one-slot pool whose jobs are vacated in the tests
/// (a soft kill with 30 s to leave) and whose running jobs report every
/// second.
pub const VACATING_POOL: &str = "NUM_CPUS = 1\nWANT_VACATE = True\nMACHINE_MAX_VACATE_TIME = 30\n\
     STARTER_INITIAL_UPDATE_INTERVAL = 1\nSTARTER_UPDATE_INTERVAL = 1\n\
     SHADOW_QUEUE_UPDATE_INTERVAL = 1";

pub struct Pool {
    pub dir: tempfile::TempDir,
    pub common: String,
    pub cm: Option<Proc>,
    pub schedd: Option<Proc>,
    pub hosts: Vec<Option<Proc>>,
}

pub fn wait_for(what: &str, timeout: Duration, f: impl FnMut() -> bool) {
    wait_or(what, timeout, f, String::new);
}

/// Polls `f` until true; on timeout fails with `context()` (the pool's logs).
pub fn wait_or(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}\n{}", context());
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Pool {
    /// A central manager and a schedd; `extra` is added to every process's
    /// configuration. Users alice, bob and carol, and admin root.
    pub fn new(extra: &str, hosts: usize) -> Pool {
        Pool::new_trusting(extra, hosts, &[])
    }

    /// As [`Pool::new`], with more lines in the pool's trust file (another
    /// pool's router key, say).
    pub fn new_trusting(extra: &str, hosts: usize, trust: &[String]) -> Pool {
        Pool::new_prepared(extra, hosts, trust, |_| {})
    }

    /// As [`Pool::new_trusting`], with `prepare` run on the pool's directory
    /// before any daemon starts (a small file system mounted for SPOOL, say).
    pub fn new_prepared(
        extra: &str,
        hosts: usize,
        trust: &[String],
        prepare: impl FnOnce(&Path),
    ) -> Pool {
        let dir = tempfile::tempdir().unwrap();
        let mut who = vec![
            ("schedd", "schedd"),
            ("negotiator", "negotiator"),
            ("alice", "user"),
            ("bob", "user"),
            ("carol", "user"),
            ("root", "admin"),
        ];
        let host_names: Vec<String> = (1..=hosts.max(3)).map(|i| format!("host{i}")).collect();
        for h in &host_names {
            who.push((h.as_str(), "host"));
        }
        // A key the pool does not know.
        who.push(("stranger", ""));
        super::keys_and_trust(dir.path(), &who);
        if !trust.is_empty() {
            let f = dir.path().join("trust");
            let mut t = std::fs::read_to_string(&f).unwrap();
            for line in trust {
                t.push_str(line);
                t.push('\n');
            }
            std::fs::write(&f, t).unwrap();
        }
        // The test's users alice, bob and carol are identities of this one
        // account (the schedd runs as it): their files are its own.
        let account = super::this_account();
        let common = format!("{COMMON}\nUSER_ACCOUNT_MAP = * = {account}\n{extra}\n");
        prepare(dir.path());
        let mut pool = Pool { dir, common, cm: None, schedd: None, hosts: Vec::new() };
        pool.start_cm();
        pool.start_schedd();
        for i in 1..=hosts {
            pool.start_host(i, "");
        }
        pool
    }

    /// The schedd's address (`host:port`).
    pub fn schedd_address(&self) -> String {
        std::fs::read_to_string(self.path().join("spool/.schedd_address"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// Stops the schedd, adds `config` to every later process's
    /// configuration, and starts the schedd again.
    pub fn restart_schedd_with(&mut self, config: &str) {
        Pool::kill9(&mut self.schedd);
        self.common.push_str(config);
        self.common.push('\n');
        self.start_schedd();
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn spawn(&self, name: &str, args: &[&str], config: &str) -> Proc {
        self.spawn_from(andes(), name, args, config)
    }

    /// As [`Pool::spawn`], with `program` (an `andes` of another platform
    /// under its emulator, say) in place of this build's `andes`.
    pub fn spawn_from(
        &self,
        mut program: std::process::Command,
        name: &str,
        args: &[&str],
        config: &str,
    ) -> Proc {
        let cfg = self.path().join(format!("{name}.config"));
        std::fs::write(&cfg, config).unwrap();
        let log = self.path().join(format!("{name}.log"));
        // Appended: a daemon started again after a kill keeps its earlier
        // runs' lines, which a failure shows with the rest.
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        let child = program
            .args(args)
            .env("ANDES_CONFIG_DIR", self.path())
            .env("ANDES_CONFIG", &cfg)
            .env("USER", "nobody")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        Proc { child, log }
    }

    pub fn wait_file(&self, p: &mut Proc, file: &Path) -> String {
        let start = Instant::now();
        loop {
            if let Ok(a) = std::fs::read_to_string(file)
                && !a.trim().is_empty()
            {
                return a.trim().to_string();
            }
            if let Some(st) = p.child.try_wait().unwrap() {
                panic!(
                    "{} exited: {st}: {}",
                    p.log.display(),
                    std::fs::read_to_string(&p.log).unwrap_or_default()
                );
            }
            assert!(start.elapsed() < Duration::from_secs(60), "{} did not start", p.log.display());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn start_cm(&mut self) {
        let _ = std::fs::remove_file(self.path().join(".collector_address"));
        let mut p = self.spawn("cm", &["central-manager"], &self.common.clone());
        let addr = self.wait_file(&mut p, &self.path().join(".collector_address"));
        self.common.push_str(&format!("COLLECTOR_HOST = {addr}\n"));
        self.cm = Some(p);
    }

    /// Kills the central manager (SIGKILL) and starts it again at the same
    /// address, as a restarted machine would be.
    pub fn restart_cm(&mut self) {
        self.restart_cm_from(andes());
    }

    /// As [`Pool::restart_cm`], run by `program` (see [`Pool::spawn_from`]).
    pub fn restart_cm_from(&mut self, program: std::process::Command) {
        let addr = std::fs::read_to_string(self.path().join(".collector_address")).unwrap();
        let addr = addr.trim().to_string();
        Pool::kill9(&mut self.cm);
        let _ = std::fs::remove_file(self.path().join(".collector_address"));
        let config = format!("{}CENTRAL_MANAGER_ADDRESS = {addr}\n", self.common);
        let mut p = self.spawn_from(program, "cm", &["central-manager"], &config);
        self.wait_file(&mut p, &self.path().join(".collector_address"));
        self.cm = Some(p);
    }

    /// Kills the schedd (SIGKILL) and starts it again, run by `program`
    /// (see [`Pool::spawn_from`]).
    pub fn restart_schedd_from(&mut self, program: std::process::Command) {
        Pool::kill9(&mut self.schedd);
        let f = self.path().join("spool/.schedd_address");
        let _ = std::fs::remove_file(&f);
        let mut p = self.spawn_from(program, "schedd", &["schedd"], &self.common.clone());
        self.wait_file(&mut p, &f);
        self.schedd = Some(p);
    }

    /// Kills host `i` (SIGKILL) and starts it again, run by `program`.
    pub fn restart_host_from(&mut self, program: std::process::Command, i: usize) {
        if let Some(h) = self.hosts.get_mut(i - 1) {
            Pool::kill9(h);
        }
        self.start_host_from(program, i, "");
    }

    pub fn start_schedd(&mut self) {
        let f = self.path().join("spool/.schedd_address");
        let _ = std::fs::remove_file(&f);
        let mut p = self.spawn("schedd", &["schedd"], &self.common.clone());
        self.wait_file(&mut p, &f);
        self.schedd = Some(p);
    }

    /// Starts host `i` (1-based) with 2 slots unless `extra` says otherwise.
    pub fn start_host(&mut self, i: usize, extra: &str) {
        self.start_host_from(andes(), i, extra);
    }

    /// As [`Pool::start_host`], run by `program` (see [`Pool::spawn_from`]).
    pub fn start_host_from(&mut self, program: std::process::Command, i: usize, extra: &str) {
        let f = self.path().join(format!(".host{i}_address"));
        let _ = std::fs::remove_file(&f);
        let config = format!(
            "{}HOST_KEY_NAME = host{i}\nEXECUTE = $(LOCAL_DIR)/execute{i}\n\
             HOST_ADDRESS_FILE = {}\nMODULE_CACHE = $(LOCAL_DIR)/cache{i}\n\
             STARTD_NAME = host{i}\n{extra}\n",
            self.common,
            f.display()
        );
        let mut p = self.spawn_from(program, &format!("host{i}"), &["host"], &config);
        self.wait_file(&mut p, &f);
        while self.hosts.len() < i {
            self.hosts.push(None);
        }
        self.hosts[i - 1] = Some(p);
    }

    pub fn user_config(&self) -> PathBuf {
        let cfg = self.path().join("user.config");
        std::fs::write(&cfg, &self.common).unwrap();
        cfg
    }

    pub fn cmd(&self, user: &str, args: &[&str]) -> std::process::Output {
        self.cmd_with(user, &self.user_config(), args)
    }

    /// Runs a command of host `i` (`andes vacate`, `andes host ...`) as `user`.
    pub fn host_cmd(&self, i: usize, user: &str, args: &[&str]) -> String {
        super::succeeded(self.host_run(i, user, args), &format!("{args:?} as {user}"))
    }

    /// As [`Pool::host_cmd`], for a command that must fail: its standard error.
    pub fn host_cmd_fails(&self, i: usize, user: &str, args: &[&str]) -> String {
        let o = self.host_run(i, user, args);
        assert!(!o.status.success(), "{args:?} as {user} should fail");
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    fn host_run(&self, i: usize, user: &str, args: &[&str]) -> std::process::Output {
        let cfg = self.path().join(format!("user-host{i}.config"));
        let f = self.path().join(format!(".host{i}_address"));
        std::fs::write(&cfg, format!("{}HOST_ADDRESS_FILE = {}\n", self.common, f.display()))
            .unwrap();
        self.cmd_with(user, &cfg, args)
    }

    /// Runs `andes ARGS` as `user` with configuration `cfg`, in the jobs'
    /// directory (submit files name their modules relative to it).
    pub fn cmd_with(&self, user: &str, cfg: &Path, args: &[&str]) -> std::process::Output {
        let cwd = self.path().join("jobs");
        std::fs::create_dir_all(&cwd).unwrap();
        andes()
            .args(args)
            .current_dir(cwd)
            .env("ANDES_CONFIG_DIR", self.path())
            .env("ANDES_CONFIG", cfg)
            .env("USER", user)
            .output()
            .unwrap()
    }

    pub fn ok(&self, user: &str, args: &[&str]) -> String {
        super::succeeded(self.cmd(user, args), &format!("{args:?} as {user}"))
    }

    /// Writes a submit file (with the sample copied beside it) and submits it.
    pub fn submit(&self, user: &str, name: &str, text: &str) {
        let out = self.submit_output(user, name, text);
        super::succeeded(out, &format!("submit {name} as {user}"));
    }

    /// As [`Pool::submit`], whatever `andes submit` says: for a job that
    /// kills its schedd so soon after the commit that the answer may be lost.
    pub fn submit_output(&self, user: &str, name: &str, text: &str) -> std::process::Output {
        let wasm = self.path().join("jobs");
        std::fs::create_dir_all(&wasm).unwrap();
        for s in [
            "hello",
            "exit_code",
            "sleeper",
            "spin",
            "primes",
            "vacate",
            "stamp",
            "coop",
            "digest",
            "copyfile",
        ] {
            let dst = wasm.join(format!("{s}.wasm"));
            if !dst.exists() {
                std::fs::copy(sample(s), dst).unwrap();
            }
        }
        let f = wasm.join(format!("{name}.sub"));
        std::fs::write(&f, text).unwrap();
        self.cmd(user, &["submit", f.to_str().unwrap()])
    }

    /// `andes compile`s sample `name` into `jobs/<name>_c.wasm`, as a user
    /// would before submitting it; returns that file name.
    pub fn compile(&self, name: &str) -> String {
        let jobs = self.path().join("jobs");
        std::fs::create_dir_all(&jobs).unwrap();
        let out = format!("{name}_c.wasm");
        let o = andes()
            .arg("compile")
            .arg(sample(name))
            .arg("-o")
            .arg(jobs.join(&out))
            .output()
            .unwrap();
        super::succeeded(o, "andes compile");
        out
    }

    pub fn ads(&self, user: &str, args: &[&str]) -> Vec<ClassAd> {
        let mut a = args.to_vec();
        a.push("-json");
        let out = self.ok(user, &a);
        let v: serde_json::Value =
            serde_json::from_str(out.trim()).unwrap_or(serde_json::json!([]));
        v.as_array()
            .map(|arr| arr.iter().filter_map(|j| classad::json::ad_from_json(j).ok()).collect())
            .unwrap_or_default()
    }

    pub fn queue(&self) -> Vec<ClassAd> {
        self.ads("root", &["q"])
    }

    pub fn history(&self) -> Vec<ClassAd> {
        self.ads("root", &["history"])
    }

    pub fn slots(&self) -> Vec<ClassAd> {
        self.ads("root", &["status"])
    }

    /// Sends the pool's one running job to another host: drains the host it
    /// runs on (gracefully: the job retires for its MaxJobRetirementTime, 0
    /// by default, then is vacated and saves what it can), after opening the
    /// host `drained` names, drained by the call before. Returns the slot it
    /// left (`slot1@host2`); `drained` becomes its host.
    pub fn move_running_job(&self, drained: &mut Option<String>) -> String {
        let slot = text(&self.queue()[0], "RemoteHost");
        let host = slot.rsplit('@').next().unwrap_or_default().to_string();
        if let Some(before) = drained.replace(host.clone()) {
            self.ok("root", &["drain", &before, "-cancel"]);
        }
        self.ok("root", &["drain", &host]);
        slot
    }

    pub fn kill9(p: &mut Option<Proc>) {
        if let Some(mut p) = p.take() {
            let _ = p.child.kill();
            let _ = p.child.wait();
            std::mem::forget(p);
        }
    }

    pub fn logs(&self) -> String {
        let mut s = String::new();
        for p in [&self.cm, &self.schedd].into_iter().chain(self.hosts.iter()).flatten() {
            s.push_str(&format!("== {}\n", p.log.display()));
            s.push_str(&std::fs::read_to_string(&p.log).unwrap_or_default());
        }
        s
    }
}

pub fn int(ad: &ClassAd, n: &str) -> i64 {
    match ad.eval_attr(n) {
        Value::Int(i) => i,
        _ => -1,
    }
}

/// Attribute `n` as text: a string's contents, another value unparsed, and
/// nothing (the empty string) for an attribute the ad does not have, so that
/// `!text(ad, n).is_empty()` says the attribute is there.
pub fn text(ad: &ClassAd, n: &str) -> String {
    match ad.eval_attr(n) {
        Value::Str(s) => s.to_string(),
        Value::Undefined if !ad.contains(n) => String::new(),
        v => v.to_string(),
    }
}
