//! The andes configuration every command and daemon reads, in HTCondor's
//! configuration language.
//!
//! The file is `$ANDES_CONFIG` if set, else `andes.config` in the andes configuration
//! directory (`$ANDES_CONFIG_DIR`, else the platform's, e.g. `~/.config/andes`) if it
//! exists; built-in defaults fill the rest:
//!
//! | knob | default | meaning |
//! | --- | --- | --- |
//! | `LOCAL_DIR` | the configuration directory | where daemons keep state |
//! | `SPOOL` | `$(LOCAL_DIR)/spool` | the schedd's queue database |
//! | `LOG` | `$(LOCAL_DIR)/log` | where daemons write their logs: SchedLog, StartLog, CollectorLog, NegotiatorLog (each path its own knob: `SCHEDD_LOG`, `STARTD_LOG`, `COLLECTOR_LOG`, `NEGOTIATOR_LOG`) |
//! | `MAX_DEFAULT_LOG`, `MAX_<SUBSYS>_LOG` | `10485760` | bytes a daemon log grows to before it is moved to `<file>.old` and begun again |
//! | `TRUST_FILE` | `$(LOCAL_DIR)/trust` | the pool's keys, identities and roles |
//! | `SCHEDD_NAME` | `andes@<host>` | first part of every GlobalJobId |
//! | `SCHEDD_ADDRESS` | `127.0.0.1:9618` | where the schedd listens (port 0: any) |
//! | `SCHEDD_ADDRESS_FILE` | `$(SPOOL)/.schedd_address` | the schedd writes its address here; commands read it first |
//! | `PERIODIC_EXPR_INTERVAL` | `60` | seconds between periodic job policy passes |
//! | `HISTORY_MAX_JOBS` | `1000000` | history keeps at most this many jobs |
//! | `HISTORY_MAX_AGE` | (none) | …and none older than this many seconds |
//! | `KEY_NAME` | your user name | the key (under `keys/`) commands sign with |
//! | `EXECUTE` | `$(LOCAL_DIR)/execute` | the host makes each job's sandbox under it |
//! | `HOST_ADDRESS` | `127.0.0.1:9619` | where `andes host` listens (port 0: any) |
//! | `HOST_ADDRESS_FILE` | `$(LOCAL_DIR)/.host_address` | `andes host` writes its address here; commands read it first |
//! | `MODULE_CACHE` | `$(LOCAL_DIR)/module_cache` | the host's compiled-module cache |
//! | `STARTER_METER_FUEL` | `False` | `True` counts every job's fuel (WasmFuelConsumed); otherwise a job with no MaxFuel runs unmetered on Linux x86_64, compiled by `andes compile` or not (about twice as fast on compute; its fuel is not counted) |
//! | `STARTD_HISTORY` | `$(LOCAL_DIR)/startd_history` | the host appends each finished job's ad here |
//! | `KEYS_DIR` | `$(LOCAL_DIR)/keys` | where key pairs are (`andes keygen` writes the configuration directory's) |
//! | `SCHEDD_KEY_NAME`, `HOST_KEY_NAME`, `NEGOTIATOR_KEY_NAME` | `schedd`, `host`, `negotiator` | the keys the daemons sign with |
//! | `JOB_ROUTER_DEFAULTS`, `JOB_ROUTER_ENTRIES`, `JOB_ROUTER_ENTRIES_CMD` | (none) | the job router's routing table (the router runs in the schedd when entries are set) |
//! | `JOB_ROUTER_ROUTE_NAMES`, `JOB_ROUTER_ROUTE_<name>` | (none) | routes in HTCondor's transform language, considered in the order named (see `the schedd's router::transform`); an old-syntax entry is used only if named too |
//! | `JOB_ROUTER_PRE_ROUTE_TRANSFORM_NAMES`, `JOB_ROUTER_POST_ROUTE_TRANSFORM_NAMES`, `JOB_ROUTER_TRANSFORM_<name>` | (none) | transforms applied before and after every route |
//! | `JOB_ROUTER_DEFAULT_MAX_JOBS_PER_ROUTE`, `JOB_ROUTER_DEFAULT_MAX_IDLE_JOBS_PER_ROUTE` | (100, 50) | MaxJobs and MaxIdleJobs of a route that sets none |
//! | `JOB_ROUTER_ENTRIES_REFRESH` | `3600` | seconds between runs of JOB_ROUTER_ENTRIES_CMD |
//! | `JOB_ROUTER_SOURCE_JOB_CONSTRAINT` | (none) | only jobs matching it are routed |
//! | `JOB_ROUTER_POLLING_PERIOD` | `10` | seconds between routing passes (also run at once on queue changes) |
//! | `JOB_ROUTER_KEY_NAME` | `$(SCHEDD_KEY_NAME)` | the key routed jobs are submitted to other pools with (their trust files list it as a `schedd`, which may submit for the users they trust) |
//! | `COLLECTOR_HOST` | (none) | the central manager's `HOST:PORT`; set, the schedd and host join its pool (commands: `127.0.0.1:9620` when unset) |
//! | `NETWORK_HOSTNAME` | (none) | the host name daemons advertise (default: this machine's name when listening on 0.0.0.0) |
//! | `COLLECTOR_ADDRESS_FILE` | `$(LOCAL_DIR)/.collector_address` | the central manager writes its address here; commands read it first |
//! | `CENTRAL_MANAGER_ADDRESS` | `$(COLLECTOR_HOST)` | where `andes central-manager` listens |
//! | `NEGOTIATOR_INTERVAL` | `60` | seconds between negotiation cycles (also run at once on new demand or free slots) |
//! | `CLASSAD_LIFETIME` | `900` | seconds an ad lives in the collector without a refresh |
//! | `PRIORITY_HALFLIFE` | `86400` | seconds for a user's priority to halve toward its usage |
//! | `DEFAULT_PRIO_FACTOR` | `1000` | a new submitter's priority factor |
//! | `PREEMPTION_REQUIREMENTS` | `False` | when the negotiator may preempt a claim for user priority |
//! | `NEGOTIATOR_CONSIDER_PREEMPTION` | `True` | whether claimed slots are matched at all |
//! | `SCHEDD_INTERVAL` | `300` | seconds between the schedd's ads (also sent at once on change); a deferred job's lead when it sets no ScheddInterval |
//! | `CRON_TIME_ZONE` | (the system's) | the zone cron schedules are read in: an IANA name, `UTC` or a POSIX TZ string |
//! | `CLAIM_WORKLIFE` | `-1` | seconds a claim takes new jobs (negative: forever) |
//! | `JOB_LEASE_DURATION` | `2400` | JobLeaseDuration of jobs that do not set it |
//! | `SHADOW_QUEUE_UPDATE_INTERVAL` | `900` | seconds between a shadow's updates of the queue |
//! | `SHADOW_JOB_CLEANUP_RETRY_DELAY`, `SHADOW_MAX_JOB_CLEANUP_RETRIES` | `30`, `5` | the final update's retries |
//! | `USER_ACCOUNT_MAP` | (none: each identity is the account of its name) | `identity = account` pairs (`* = account` for everyone): the local account whose rights the schedd reads and writes a job owner's files with. The schedd acts for an owner with its own rights only when the owner's account is its own; running as root it takes the owner's account for that work; otherwise it accepts only jobs submitted with `--spool` |
//! | `USE_PLAINTEXT_HTTP` | `False` | `True` drops TLS for plain HTTP: only for a personal pool on 127.0.0.1 (a daemon refuses to start if it would listen elsewhere; a command refuses a daemon elsewhere). Otherwise every connection is TLS 1.3 authenticated by the pool's keys, and commands need the trust file too |
//! | `SCHEDD_REPLAY_CACHE`, `HOST_REPLAY_CACHE`, `CENTRAL_MANAGER_REPLAY_CACHE` | `$(SPOOL)/replay_cache`, `$(LOCAL_DIR)/host_replay_cache.$(HOST_KEY_NAME)`, `$(LOCAL_DIR)/central_replay_cache` | each daemon's file of accepted request nonces, so a request is never accepted twice, even across a restart (one file per daemon) |
//! | `MAX_CONNECTIONS` | `1024` | connections established (a trusted key proved) at once, at most half for one key; as many more may wait to prove theirs, a new one taking the oldest waiting one's place |
//! | `MAX_JOBS_PER_SUBMISSION`, `MAX_JOBS_PER_OWNER`, `MAX_JOBS_SUBMITTED` | `20000`, `100000`, `2147483647` | jobs one submit may create, one owner may have in the queue, the queue may hold |
//! | `SPOOL_QUOTA_PER_OWNER` | `4294967296` | bytes one owner may keep in the spool: uploads, spooled jobs' outputs and checkpoints together |
//! | `SPOOL_RESERVE` | `67108864`, or a sixteenth of the spool's file system if less | bytes the schedd keeps free on the spool's file system (and in a reserve file it gives back when a commit finds the disk full), so removals, holds and job ends always commit |
//! | `UID_DOMAIN` | (the part of `SCHEDD_NAME` after `@`) | the part of each job's `User` after `Owner@` |
//! | `HEADER_READ_TIMEOUT`, `IDLE_CONNECTION_TIMEOUT`, `TLS_HANDSHAKE_TIMEOUT`, `REQUEST_BODY_TIMEOUT` | `30`, `60`, `10`, `60` | seconds a daemon waits for a request's head (also an idle keep-alive connection's next request), on a connection where nothing moves, for a TLS handshake, and for a request's body |
//! | `LOCAL_CONFIG_FILE` | (none) | more configuration files, read in order after the main one (a list, commas or spaces) |
//! | `REQUIRE_LOCAL_CONFIG_FILE` | `True` | a LOCAL_CONFIG_FILE that does not exist is an error (`False`: skipped) |
//! | `LOCAL_CONFIG_DIR` | (none) | a directory whose files are read after those, in name order (not those matching `LOCAL_CONFIG_DIR_EXCLUDE_REGEXP`: by default hidden files, `*~`, `#*`, `*.rpmsave`, `*.rpmnew`) |
//! | `SHUTDOWN_GRACEFUL_TIMEOUT` | `1800` (HTCondor's; `andes pool up` writes `5`) | seconds a graceful shutdown (SIGTERM or Ctrl-C to `andes host` or `andes pool up`, `andes pool down`) may take in all: the host's jobs retire and vacate (checkpointing those that can), and their shadows hear how each ended; a second before it runs out, what still runs is killed (a fast shutdown), and once it has run out the daemons wait for nothing more and go |
//! | `PER_KEY_REQUEST_RATE`, `PER_KEY_REQUEST_BURST`, `PER_KEY_REPLAY_SHARE` | `10000`, `20000`, `131072` | requests a second one key may make on average and at once, and nonces it may hold in a daemon's replay cache once that is half full (524,288 nonces); past them that key gets 429 |
//!
//! `andes host` reads the same file on top of the startd's defaults and
//! default policy (`andes_startd::default_config`): NUM_CPUS, SLOT_TYPE_N,
//! START, ..., ENABLE_BACKFILL, BACKFILL_JOBS and `BACKFILL_JOB_<name>`.

use std::path::PathBuf;
use std::sync::Arc;

use andes_config::Config;
use anyhow::{Context, Result, anyhow};

/// The loaded configuration.
pub struct Settings {
    config: Config,
    /// How it was loaded: over which base, from which file (`None`:
    /// `$ANDES_CONFIG` or the default file), so that it can be read again.
    origin: Option<(Config, Option<PathBuf>)>,
}

const DEFAULTS: &str = r#"
SPOOL = $(LOCAL_DIR)/spool
LOG = $(LOCAL_DIR)/log
TRUST_FILE = $(LOCAL_DIR)/trust
SCHEDD_ADDRESS = 127.0.0.1:9618
SCHEDD_ADDRESS_FILE = $(SPOOL)/.schedd_address
PERIODIC_EXPR_INTERVAL = 60
HISTORY_MAX_JOBS = 1000000
EXECUTE = $(LOCAL_DIR)/execute
HOST_ADDRESS = 127.0.0.1:9619
HOST_ADDRESS_FILE = $(LOCAL_DIR)/.host_address
MODULE_CACHE = $(LOCAL_DIR)/module_cache
KEYS_DIR = $(LOCAL_DIR)/keys
STARTD_HISTORY = $(LOCAL_DIR)/startd_history
SCHEDD_KEY_NAME = schedd
JOB_ROUTER_KEY_NAME = $(SCHEDD_KEY_NAME)
JOB_ROUTER_POLLING_PERIOD = 10
JOB_ROUTER_ENTRIES_REFRESH = 3600
HOST_KEY_NAME = host
NEGOTIATOR_KEY_NAME = negotiator
CENTRAL_MANAGER_ADDRESS = $(COLLECTOR_HOST)
COLLECTOR_ADDRESS_FILE = $(LOCAL_DIR)/.collector_address
NEGOTIATOR_INTERVAL = 60
CLASSAD_LIFETIME = 900
PRIORITY_HALFLIFE = 86400
DEFAULT_PRIO_FACTOR = 1000
NEGOTIATOR_CONSIDER_PREEMPTION = True
SCHEDD_INTERVAL = 300
CLAIM_WORKLIFE = -1
JOB_LEASE_DURATION = 2400
SHADOW_QUEUE_UPDATE_INTERVAL = 900
SHADOW_JOB_CLEANUP_RETRY_DELAY = 30
SHADOW_MAX_JOB_CLEANUP_RETRIES = 5
SCHEDD_REPLAY_CACHE = $(SPOOL)/replay_cache
HOST_REPLAY_CACHE = $(LOCAL_DIR)/host_replay_cache.$(HOST_KEY_NAME)
CENTRAL_MANAGER_REPLAY_CACHE = $(LOCAL_DIR)/central_replay_cache
SHUTDOWN_GRACEFUL_TIMEOUT = 1800
"#;

/// This machine's host name, as the operating system gives it (any OS).
fn host_name() -> String {
    whoami::fallible::hostname()
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The current user's name: `USER`, `LOGNAME` or `USERNAME` from the
/// environment (so a test or a sudo can say who), else the operating
/// system's name for the account. Every command finds it this one way, so
/// `andes keygen` makes the key `andes q` looks for.
pub fn user_name() -> Option<String> {
    user_name_from(|v| std::env::var(v).ok())
}

/// [`user_name`] with `var` reading the environment.
pub fn user_name_from(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    ["USER", "LOGNAME", "USERNAME"]
        .into_iter()
        .filter_map(var)
        .find(|n| !n.is_empty())
        .or_else(|| whoami::fallible::username().ok().filter(|n| !n.is_empty()))
}

/// HTCondor's default LOCAL_CONFIG_DIR_EXCLUDE_REGEXP: hidden files, editor
/// backups and package managers' leftovers.
const LOCAL_CONFIG_DIR_EXCLUDE: &str = r"^((\..*)|(.*~)|(#.*)|(.*\.rpmsave)|(.*\.rpmnew))$";

/// Reads the local configuration after the main file, as HTCondor does:
/// each file LOCAL_CONFIG_FILE lists (one that is missing is an error unless
/// REQUIRE_LOCAL_CONFIG_FILE is false), then the files of LOCAL_CONFIG_DIR in
/// name order. Each knob is looked at once, as the main file left it.
fn load_local(config: &mut Config) -> Result<()> {
    let files = config.get("LOCAL_CONFIG_FILE")?.unwrap_or_default();
    let required = match config.get("REQUIRE_LOCAL_CONFIG_FILE")?.as_deref() {
        None | Some("") => true,
        Some(v) => parse_bool(v)
            .ok_or_else(|| anyhow!("REQUIRE_LOCAL_CONFIG_FILE = {v}: expected True or False"))?,
    };
    let dir = config.get("LOCAL_CONFIG_DIR")?.filter(|d| !d.trim().is_empty());
    let exclude = config
        .get("LOCAL_CONFIG_DIR_EXCLUDE_REGEXP")?
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| LOCAL_CONFIG_DIR_EXCLUDE.to_string());
    for f in files.split([',', ' ', '\t']).filter(|f| !f.is_empty()) {
        let path = std::path::Path::new(f);
        if !path.exists() {
            if required {
                anyhow::bail!(
                    "LOCAL_CONFIG_FILE names {f}, which does not exist \
                     (REQUIRE_LOCAL_CONFIG_FILE = False skips it)"
                );
            }
            continue;
        }
        config.load_file(path).with_context(|| format!("reading {f} (LOCAL_CONFIG_FILE)"))?;
    }
    if let Some(dir) = dir {
        let exclude = regex::Regex::new(&exclude)
            .map_err(|e| anyhow!("LOCAL_CONFIG_DIR_EXCLUDE_REGEXP: {e}"))?;
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(anyhow!("LOCAL_CONFIG_DIR {dir}: {e}")),
        };
        let mut names: Vec<std::path::PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
            .filter(|e| !exclude.is_match(&e.file_name().to_string_lossy()))
            .map(|e| e.path())
            .collect();
        names.sort();
        for p in names {
            config
                .load_file(&p)
                .with_context(|| format!("reading {} (LOCAL_CONFIG_DIR)", p.display()))?;
        }
    }
    Ok(())
}

/// HTCondor's booleans: True/False, Yes/No, 1/0, any case.
fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Some(true),
        "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

impl Settings {
    /// Loads the configuration.
    pub fn load() -> Result<Settings> {
        Settings::load_over(Config::with_env(std::env::vars()))
    }

    /// `base` with the built-in defaults loaded over it; and the andes
    /// configuration directory.
    fn with_defaults(base: Config) -> Result<(Config, PathBuf)> {
        let dir = andes_protocol::key::config_dir()?;
        let mut config = base;
        config.set("LOCAL_DIR", &dir.to_string_lossy())?;
        config.set("SCHEDD_NAME", &format!("andes@{}", host_name()))?;
        if let Some(u) = user_name() {
            config.set("KEY_NAME", &u)?;
        }
        config.load_str(DEFAULTS, "<built-in defaults>")?;
        Ok((config, dir))
    }

    /// Loads the configuration file `file` (instead of `$ANDES_CONFIG`) on top
    /// of `base`.
    pub fn load_file_over(file: &std::path::Path, base: Config) -> Result<Settings> {
        let origin = Some((base.clone(), Some(file.to_path_buf())));
        let (mut config, _) = Settings::with_defaults(base)?;
        config.load_file(file).with_context(|| format!("reading {}", file.display()))?;
        load_local(&mut config)?;
        Ok(Settings { config, origin })
    }

    /// Reads the configuration again from where it was read first (its
    /// files may have changed): what a daemon does on `andes reconfig`.
    pub fn reloader(&self) -> impl Fn() -> Result<Settings> + Send + Sync + 'static {
        let origin = self.origin.clone();
        move || match &origin {
            Some((base, Some(file))) => Settings::load_file_over(file, base.clone()),
            Some((base, None)) => Settings::load_over(base.clone()),
            None => Err(anyhow!("this configuration was not read from files")),
        }
    }

    /// Loads the configuration on top of `base` (a daemon's own defaults).
    pub fn load_over(base: Config) -> Result<Settings> {
        let origin = Some((base.clone(), None));
        let (mut config, dir) = Settings::with_defaults(base)?;
        let file = match std::env::var_os("ANDES_CONFIG") {
            Some(f) if !f.is_empty() => Some(PathBuf::from(f)),
            _ => Some(dir.join("andes.config")).filter(|p| p.exists()),
        };
        if let Some(f) = file {
            config.load_file(&f).with_context(|| format!("reading {}", f.display()))?;
        }
        load_local(&mut config)?;
        Ok(Settings { config, origin })
    }

    /// The whole configuration table.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A knob's expanded value.
    pub fn get(&self, name: &str) -> Result<Option<String>> {
        Ok(self.config.get(name)?.filter(|v| !v.is_empty()))
    }

    /// A knob that must have a value.
    pub fn require(&self, name: &str) -> Result<String> {
        self.get(name)?.ok_or_else(|| anyhow!("the configuration does not set {name}"))
    }

    /// A path knob.
    pub fn path(&self, name: &str) -> Result<PathBuf> {
        Ok(PathBuf::from(self.require(name)?))
    }

    /// An integer knob.
    pub fn int(&self, name: &str) -> Result<Option<i64>> {
        match self.get(name)? {
            None => Ok(None),
            Some(v) => {
                v.trim().parse().map(Some).map_err(|_| anyhow!("{name} = {v}: expected an integer"))
            }
        }
    }

    /// The schedd's address for commands: its address file if the schedd wrote
    /// one, else SCHEDD_ADDRESS.
    pub fn schedd_url(&self) -> Result<String> {
        if let Some(f) = self.get("SCHEDD_ADDRESS_FILE")?
            && let Ok(a) = std::fs::read_to_string(&f)
            && !a.trim().is_empty()
        {
            return Ok(format!("http://{}", a.trim()));
        }
        Ok(format!("http://{}", self.require("SCHEDD_ADDRESS")?))
    }

    /// The key pair commands sign with.
    pub fn keypair(&self) -> Result<andes_protocol::Keypair> {
        let name = self.get("KEY_NAME")?.ok_or_else(|| {
            anyhow!(
                "cannot tell your user name (USER is not set): set KEY_NAME in the configuration"
            )
        })?;
        self.named_keypair(&name)
    }

    /// The key pair named by the knob `knob` (a daemon's: SCHEDD_KEY_NAME, ...).
    pub fn daemon_keypair(&self, knob: &str) -> Result<andes_protocol::Keypair> {
        let name = self.require(knob)?;
        self.named_keypair(&name).with_context(|| format!("{knob} = {name}"))
    }

    fn named_keypair(&self, name: &str) -> Result<andes_protocol::Keypair> {
        let dir = match self.get("KEYS_DIR")? {
            Some(d) => PathBuf::from(d),
            None => andes_protocol::key::keys_dir()?,
        };
        if name.is_empty() || name.contains('/') || name.contains('\\') || name.starts_with('.') {
            return Err(anyhow!("bad key name `{name}`"));
        }
        andes_protocol::Keypair::load(&dir.join(name)).map_err(|e| {
            anyhow!("{e}\n  (make one with `andes keygen {name}` and add its line to the pool's trust file)")
        })
    }

    /// The pool's trust file (TRUST_FILE), which `daemon` needs.
    pub fn trust(&self, daemon: &str) -> Result<andes_protocol::TrustFile> {
        let path = self.path("TRUST_FILE")?;
        andes_protocol::TrustFile::load(&path).with_context(|| {
            format!("{daemon} needs the pool's trust file {} (TRUST_FILE)", path.display())
        })
    }

    /// Where a daemon listens: `given` (its --listen), else the knob `knob`.
    pub fn listen(
        &self,
        knob: &str,
        given: Option<std::net::SocketAddr>,
    ) -> Result<std::net::SocketAddr> {
        if let Some(a) = given {
            return Ok(a);
        }
        let a = self.require(knob)?;
        a.parse().map_err(|_| anyhow!("{knob} = {a}: expected HOST:PORT"))
    }

    /// A knob as seconds (`default` when unset).
    pub fn secs(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    /// SHUTDOWN_GRACEFUL_TIMEOUT: how long a graceful shutdown may take in
    /// all before the daemons go regardless (HTCondor's default, 1800 s,
    /// when unset; a negative value counts as 0).
    pub fn shutdown_graceful_timeout(&self) -> Result<std::time::Duration> {
        let secs = self.secs("SHUTDOWN_GRACEFUL_TIMEOUT", 1800)?.max(0);
        Ok(std::time::Duration::from_secs(secs as u64))
    }

    /// A boolean knob (`True`/`False`, any case; `default` when unset).
    pub fn bool(&self, name: &str, default: bool) -> Result<bool> {
        match self.get(name)? {
            None => Ok(default),
            Some(v) => {
                parse_bool(&v).ok_or_else(|| anyhow!("{name} = {v}: expected True or False"))
            }
        }
    }

    /// The address a daemon bound to `addr` gives others (`MyAddress`):
    /// NETWORK_HOSTNAME if set, else the machine's host name when bound to
    /// every interface (0.0.0.0 or ::), else the address itself; the port is
    /// the one bound.
    pub fn advertised(&self, addr: std::net::SocketAddr) -> Result<String> {
        if let Some(h) = self.get("NETWORK_HOSTNAME")? {
            return Ok(format!("{h}:{}", addr.port()));
        }
        if addr.ip().is_unspecified() {
            return Ok(format!("{}:{}", host_name(), addr.port()));
        }
        Ok(addr.to_string())
    }

    /// The pool's collector for a daemon: COLLECTOR_HOST as a URL, `None`
    /// when the daemon is in no pool.
    pub fn collector_host(&self) -> Result<Option<String>> {
        Ok(self.get("COLLECTOR_HOST")?.map(|a| format!("http://{a}")))
    }

    /// The collector's address for commands: its address file if the central
    /// manager wrote one, else COLLECTOR_HOST, else `127.0.0.1:9620`.
    pub fn collector_url(&self) -> Result<String> {
        if let Some(f) = self.get("COLLECTOR_ADDRESS_FILE")?
            && let Ok(a) = std::fs::read_to_string(&f)
            && !a.trim().is_empty()
        {
            return Ok(format!("http://{}", a.trim()));
        }
        Ok(self.collector_host()?.unwrap_or_else(|| "http://127.0.0.1:9620".to_string()))
    }
}

impl Settings {
    /// Whether the pool opted out of TLS (USE_PLAINTEXT_HTTP).
    pub fn plaintext(&self) -> Result<bool> {
        self.bool("USE_PLAINTEXT_HTTP", false)
    }

    /// How this process reaches daemons (TLS with the trust file, or plain HTTP when
    /// USE_PLAINTEXT_HTTP is set), installed for every client the process makes.
    /// `who` names what needs the trust file, for the error.
    pub fn install_transport(&self, who: &str) -> Result<andes_protocol::Transport> {
        let t = if self.plaintext()? {
            andes_protocol::Transport::Plain
        } else {
            let trust = self.trust(who).context(
                "connections are TLS authenticated by the pool's keys (set \
                 USE_PLAINTEXT_HTTP = True only for a personal pool on 127.0.0.1)",
            )?;
            andes_protocol::Transport::Tls(Arc::new(trust))
        };
        t.clone().install();
        Ok(t)
    }

    /// Refuses, before binding, a daemon that would serve plain HTTP on an address
    /// other than loopback.
    pub fn check_listen(&self, knob: &str, addr: std::net::SocketAddr) -> Result<()> {
        if self.plaintext()? && !addr.ip().is_loopback() {
            return Err(anyhow!(
                "USE_PLAINTEXT_HTTP = True, but {knob} = {addr} is not a loopback address: \
                 plain HTTP is only for a personal pool on 127.0.0.1; listen on 127.0.0.1, \
                 or remove USE_PLAINTEXT_HTTP to use TLS"
            ));
        }
        Ok(())
    }

    /// A daemon's verifier over `trust`: the per-key limits from the configuration
    /// and its replay-cache file (the knob `cache_knob`).
    pub fn verifier(
        &self,
        trust: andes_protocol::TrustFile,
        cache_knob: &str,
    ) -> Result<andes_protocol::Verifier> {
        let d = andes_protocol::VerifierConfig::default();
        let positive = |name: &str, default: u64| -> Result<u64> {
            match self.int(name)? {
                None => Ok(default),
                Some(n) if n > 0 => Ok(n as u64),
                Some(n) => Err(anyhow!("{name} = {n}: expected a positive number")),
            }
        };
        let config = andes_protocol::VerifierConfig {
            per_key_rate: u32::try_from(positive("PER_KEY_REQUEST_RATE", d.per_key_rate.into())?)
                .unwrap_or(u32::MAX),
            per_key_burst: u32::try_from(positive(
                "PER_KEY_REQUEST_BURST",
                d.per_key_burst.into(),
            )?)
            .unwrap_or(u32::MAX),
            per_key_nonces: usize::try_from(positive(
                "PER_KEY_REPLAY_SHARE",
                d.per_key_nonces as u64,
            )?)
            .unwrap_or(usize::MAX),
            ..d
        };
        let path = self.path(cache_knob)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("{cache_knob}: creating {}", parent.display()))?;
        }
        let now = classad::eval::system_now();
        andes_protocol::Verifier::with_replay_file(trust, config, &path, now)
            .with_context(|| format!("{cache_knob} = {}", path.display()))
    }

    /// Sets `auth`'s body deadline from REQUEST_BODY_TIMEOUT.
    pub fn body_timeout(&self, auth: &andes_protocol::Auth) -> Result<()> {
        let secs = self.secs("REQUEST_BODY_TIMEOUT", 60)?.max(1) as u64;
        auth.set_body_timeout(std::time::Duration::from_secs(secs));
        Ok(())
    }

    /// The server of a daemon bound to `listener`: TLS presenting `keypair` (the knob
    /// `key_knob` names it), or plain HTTP when USE_PLAINTEXT_HTTP is set; with the
    /// connection limits of the configuration.
    pub fn server(
        &self,
        listener: tokio::net::TcpListener,
        keypair: Option<&andes_protocol::Keypair>,
        key_knob: &str,
        auth: &andes_protocol::Auth,
    ) -> Result<andes_protocol::Server> {
        let server = if self.plaintext()? {
            andes_protocol::Server::plain(listener)?
        } else {
            let Some(k) = keypair else {
                return Err(anyhow!(
                    "the daemon serves TLS with its own key, and {key_knob} names none: make \
                     one with `andes keygen` and list it in the trust file (or set \
                     USE_PLAINTEXT_HTTP = True for a personal pool on 127.0.0.1)"
                ));
            };
            andes_protocol::Server::tls(listener, k, auth)?
        };
        self.body_timeout(auth)?;
        let secs = |name: &str, default: i64| -> Result<std::time::Duration> {
            Ok(std::time::Duration::from_secs(self.secs(name, default)?.max(1) as u64))
        };
        let limits = andes_protocol::Limits {
            max_connections: self.int("MAX_CONNECTIONS")?.unwrap_or(1024).max(1) as usize,
            handshake_timeout: secs("TLS_HANDSHAKE_TIMEOUT", 10)?,
            header_read_timeout: secs("HEADER_READ_TIMEOUT", 30)?,
            idle_timeout: secs("IDLE_CONNECTION_TIMEOUT", 60)?,
        };
        Ok(server.with_limits(limits))
    }
}

/// Writes `text` to `path` through a temporary file and a rename, so a reader never
/// sees half of it (the daemons' address files).
///
/// Address files are for every user: the file is 0644 and any directory
/// made for it 0755, whatever the daemon's umask.
pub fn write_atomically(path: &str, text: &str) -> std::io::Result<()> {
    let path = std::path::Path::new(path);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        andes_beneath::private::create_dirs_reachable(dir)?;
    }
    andes_beneath::replace_file(path, text.as_bytes(), 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(lines: &[(&str, &str)]) -> Settings {
        let mut config = Config::new();
        for (k, v) in lines {
            config.set(k, v).unwrap();
        }
        Settings { config, origin: None }
    }

    #[test]
    fn plain_http_is_refused_before_binding_anywhere_but_loopback() {
        let plain = settings(&[("USE_PLAINTEXT_HTTP", "True")]);
        let e = plain.check_listen("SCHEDD_ADDRESS", "0.0.0.0:9618".parse().unwrap()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("SCHEDD_ADDRESS = 0.0.0.0:9618 is not a loopback address"), "{text}");
        assert!(text.contains("plain HTTP is only for a personal pool on 127.0.0.1"), "{text}");
        plain.check_listen("SCHEDD_ADDRESS", "127.0.0.1:0".parse().unwrap()).unwrap();
        plain.check_listen("HOST_ADDRESS", "[::1]:9619".parse().unwrap()).unwrap();
        // With TLS (the default) any address will do.
        let tls = settings(&[]);
        assert!(!tls.plaintext().unwrap());
        tls.check_listen("SCHEDD_ADDRESS", "0.0.0.0:9618".parse().unwrap()).unwrap();
        let bad = settings(&[("USE_PLAINTEXT_HTTP", "maybe")]);
        assert!(bad.plaintext().unwrap_err().to_string().contains("expected True or False"));
    }

    /// LOCAL_CONFIG_FILE's files in order, then LOCAL_CONFIG_DIR's in name
    /// order without backups and hidden files, each over what came before;
    /// a missing local file is an error naming it unless not required.
    #[test]
    fn local_configuration_is_read_after_the_main_file_as_htcondor_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let write = |name: &str, text: &str| std::fs::write(d.join(name), text).unwrap();
        std::fs::create_dir(d.join("config.d")).unwrap();
        write("a.local", "A = from a\nB = from a\nC = from a\n");
        write("b.local", "B = from b\n");
        write("config.d/20-late", "C = from 20\n");
        write("config.d/10-early", "C = from 10\nD = from 10\n");
        write("config.d/30-backup~", "C = from a backup\n");
        write("config.d/.hidden", "C = hidden\n");
        write(
            "main",
            &format!(
                "LOCAL_CONFIG_FILE = {0}/a.local, {0}/b.local\nLOCAL_CONFIG_DIR = {0}/config.d\n\
                 A = from main\nD = from main\n",
                d.display()
            ),
        );
        let mut config = Config::new();
        config.load_file(d.join("main")).unwrap();
        load_local(&mut config).unwrap();
        let get = |n: &str| config.get(n).unwrap().unwrap();
        assert_eq!(
            [get("A"), get("B"), get("C"), get("D")],
            ["from a", "from b", "from 20", "from 10"]
        );
        assert_eq!(
            config.location("B").unwrap().to_string(),
            format!("{}/b.local, line 1", d.display())
        );
        // A missing local file.
        let mut config = Config::new();
        config.set("LOCAL_CONFIG_FILE", &format!("{}/nowhere.local", d.display())).unwrap();
        let e = load_local(&mut config.clone()).unwrap_err().to_string();
        assert!(e.contains("nowhere.local") && e.contains("REQUIRE_LOCAL_CONFIG_FILE"), "{e}");
        config.set("REQUIRE_LOCAL_CONFIG_FILE", "False").unwrap();
        load_local(&mut config).unwrap();
    }
}
