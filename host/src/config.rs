//! What the host daemon is configured with: its knobs read from the
//! configuration, the snapshot keys, the backfill jobs, and the versions it
//! advertises.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use andes_config::Config;
use andes_startd::{MachineInfo, Measurements, Policy, PolicyError};
use classad::{ClassAd, Value};

/// The wasmtime version the host is built with (`WasmtimeVersion`).
pub const WASMTIME_VERSION: &str = "36.0.20";

/// The Wasm proposals the engine enables (`WasmFeatures`).
pub const WASM_FEATURES: &[&str] = &[
    "bulk-memory",
    "multi-value",
    "mutable-global",
    "reference-types",
    "saturating-float-to-int",
    "sign-extension",
    "simd",
];

/// A configuration holding `andes_startd`'s defaults and default policy
/// (as [`andes_startd::default_config`]) whose `$ENV(NAME)` reads `env`:
/// load the site's files on top of it.
pub fn base_config<I, K, V>(env: I) -> Config
where
    I: IntoIterator<Item = (K, V)>,
    K: Into<String>,
    V: Into<String>,
{
    let mut cfg = Config::with_env(env);
    andes_startd::policy::load_defaults(&mut cfg);
    cfg
}

/// Why the daemon cannot start, or a request failed.
#[derive(Debug)]
pub enum DaemonError {
    /// The startd policy is wrong.
    Policy(PolicyError),
    /// A configuration value is wrong.
    Config {
        /// The knob.
        name: String,
        /// Where it was defined (`file, line N`), when known.
        location: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A file or directory could not be used.
    Io {
        /// Which.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

impl fmt::Display for DaemonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DaemonError::Policy(e) => write!(f, "{e}"),
            DaemonError::Config { name, location: Some(l), message } => {
                write!(f, "{l}: {name}: {message}")
            }
            DaemonError::Config { name, location: None, message } => write!(f, "{name}: {message}"),
            DaemonError::Io { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for DaemonError {}

impl From<PolicyError> for DaemonError {
    fn from(e: PolicyError) -> Self {
        DaemonError::Policy(e)
    }
}

/// A backfill job the daemon can run: its ad and its module.
#[derive(Clone, Debug)]
pub struct BackfillJob {
    /// The job ad (`Cmd`, `Arguments`, `Environment`, `Out`, `Err`, limits).
    pub ad: ClassAd,
    /// The module's bytes, read from `Cmd` at startup.
    pub module: Arc<[u8]>,
}

/// How a host signs the transparent checkpoints it takes, and whose it
/// restores.
#[derive(Clone)]
pub struct SnapshotKeys {
    /// The public half of the host's key.
    pub public: [u8; 32],
    /// Signs with the host's key.
    pub sign: andes_starter::transparent::SignFn,
    /// Whose snapshots a restore accepts (the pool's hosts).
    pub trusted: andes_starter::transparent::TrustFn,
}

impl fmt::Debug for SnapshotKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotKeys").field("public", &hex::encode(self.public)).finish()
    }
}

/// Everything the daemon needs, read from the configuration.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The startd policy.
    pub policy: Policy,
    /// The machine.
    pub info: MachineInfo,
    /// EXECUTE: where job sandboxes are made.
    pub execute: PathBuf,
    /// The backfill jobs named by BACKFILL_JOBS.
    pub backfill: HashMap<String, BackfillJob>,
    /// STARTER_INITIAL_UPDATE_INTERVAL: seconds from a job's start to its
    /// first update to the shadow (HTCondor: 8).
    pub starter_initial_update: u64,
    /// STARTER_UPDATE_INTERVAL: seconds between later updates (HTCondor: 300).
    pub starter_update: u64,
    /// STARTD_HISTORY: the file each finished job's ad is appended to.
    pub history: Option<PathBuf>,
    /// ALIVE_INTERVAL: seconds between a schedd's keep-alives when its claim
    /// does not say (HTCondor's knob; andes: 10).
    pub alive_interval: u64,
    /// MAX_CLAIM_ALIVES_MISSED: keep-alives a claim may miss before it is
    /// released (HTCondor: 6; andes: 3).
    pub max_alives_missed: u64,
}

impl DaemonConfig {
    /// Reads the policy and the backfill jobs from `cfg`. Each name in
    /// BACKFILL_JOBS needs `BACKFILL_JOB_<name>`: a new-syntax job ad whose
    /// `Cmd` is the module's path (relative paths are taken from the current
    /// directory), e.g. `BACKFILL_JOB_primes = [ Cmd = "/opt/andes/primes.wasm";
    /// Arguments = "5000000" ]`.
    pub fn from_config(
        cfg: &Config,
        execute: PathBuf,
        info: MachineInfo,
    ) -> Result<DaemonConfig, DaemonError> {
        let policy = Policy::from_config(cfg)?;
        let mut backfill = HashMap::new();
        if policy.backfill {
            for name in &policy.backfill_jobs {
                let knob = format!("BACKFILL_JOB_{name}");
                let location = cfg.location(&knob).map(|l| l.to_string());
                let err = |message: String| DaemonError::Config {
                    name: knob.clone(),
                    location: location.clone(),
                    message,
                };
                let text = cfg
                    .get(&knob)
                    .map_err(|e| err(e.to_string()))?
                    .filter(|t| !t.trim().is_empty())
                    .ok_or_else(|| {
                        err(format!(
                            "BACKFILL_JOBS names `{name}`, but {knob} is not set \
                             (a job ad such as [ Cmd = \"/path/{name}.wasm\" ])"
                        ))
                    })?;
                let ad =
                    classad::parse_ad(&text).map_err(|e| err(format!("not a ClassAd: {e}")))?;
                let cmd = match ad.eval_attr("Cmd") {
                    Value::Str(s) if !s.is_empty() => PathBuf::from(s.to_string()),
                    _ => return Err(err("the ad has no Cmd (the module's path)".into())),
                };
                let module = std::fs::read(&cmd)
                    .map_err(|e| err(format!("cannot read Cmd {}: {e}", cmd.display())))?;
                backfill.insert(name.clone(), BackfillJob { ad, module: module.into() });
            }
        }
        let int = |name: &str, default: u64| -> u64 {
            cfg.get(name)
                .ok()
                .flatten()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .filter(|&v| v > 0)
                .unwrap_or(default)
        };
        Ok(DaemonConfig {
            policy,
            info,
            execute,
            backfill,
            starter_initial_update: int("STARTER_INITIAL_UPDATE_INTERVAL", 8),
            starter_update: int("STARTER_UPDATE_INTERVAL", 300),
            alive_interval: int("ALIVE_INTERVAL", 10),
            max_alives_missed: int("MAX_CLAIM_ALIVES_MISSED", 3),
            history: cfg
                .get("STARTD_HISTORY")
                .ok()
                .flatten()
                .filter(|p| !p.trim().is_empty())
                .map(PathBuf::from),
        })
    }
}

/// A source of measurements: given each slot's own job load
/// (`CondorLoadAvg`), the machine's [`Measurements`]; with `true`, the
/// slow-changing resources too (free disk and swap, which cost a look at
/// the file systems): asked every UPDATE_INTERVAL, while load and keyboard
/// are measured before every poll.
pub type Measurer = Box<dyn FnMut(Vec<f64>, bool) -> Measurements + Send>;

/// Where the daemon's log lines go (besides `tracing`): transitions,
/// starters' endings, refusals.
pub type Logger = Box<dyn FnMut(&str) + Send>;
