//! `andes schedd`: the schedd daemon, set up from the configuration.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use andes_protocol::{Auth, SystemClock};
use andes_schedd::schedd::{self, BODY_LIMIT, Schedd, ScheddConfig};
use andes_schedd::shadow::{PoolConfig, ScheddPool};
use anyhow::{Context, Result};
use clap::Args;

use crate::settings::Settings;

/// Arguments of `andes schedd`.
#[derive(Args, Debug)]
pub struct ScheddArgs {
    /// Listen here instead of SCHEDD_ADDRESS (port 0 picks a free port).
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<SocketAddr>,
}

/// Runs the schedd until interrupted.
pub fn run(args: ScheddArgs) -> Result<ExitCode> {
    let s = Settings::load()?;
    crate::logs::init(&s, &[crate::logs::Daemon::Schedd])?;
    super::run_daemon(|| {
        let stop = super::stop_signal();
        serve(s, args.listen, None, async move {
            stop.await;
            tracing::info!("andes schedd: interrupted, stopping");
        })
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Runs a schedd from `s` until `stop` completes: binds (SCHEDD_ADDRESS unless
/// `listen`), writes SCHEDD_ADDRESS_FILE, reports the address on `ready`, and,
/// with COLLECTOR_HOST set, joins the pool (advertises, takes matches, runs
/// shadows).
pub async fn serve(
    s: Settings,
    listen: Option<SocketAddr>,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let spool = s.path("SPOOL")?;
    let trust = s.trust("the schedd")?;
    let listen = s.listen("SCHEDD_ADDRESS", listen)?;
    s.check_listen("SCHEDD_ADDRESS", listen)?;
    s.install_transport("the schedd")?;
    let interval = s.int("PERIODIC_EXPR_INTERVAL")?.unwrap_or(60).max(1) as u64;
    let mut config = ScheddConfig {
        name: s.require("SCHEDD_NAME")?,
        data_dir: spool.clone(),
        periodic_interval: Duration::from_secs(interval),
        history_max_jobs: s.int("HISTORY_MAX_JOBS")?.unwrap_or(1_000_000).max(0) as u64,
        history_max_age: s.int("HISTORY_MAX_AGE")?,
        submit_host: String::new(),
        cron_time_zone: andes_cron::time_zone(&s.get("CRON_TIME_ZONE")?.unwrap_or_default())
            .map_err(|e| anyhow::anyhow!("CRON_TIME_ZONE: {e}"))?,
        schedd_interval: s.secs("SCHEDD_INTERVAL", 300)?.max(0),
        accounts: Arc::new(
            andes_schedd::userfs::Accounts::detect(&s.get("USER_ACCOUNT_MAP")?.unwrap_or_default())
                .map_err(|e| anyhow::anyhow!(e))?,
        ),
        uid_domain: s.get("UID_DOMAIN")?.filter(|d| !d.is_empty()),
        spool_quota: s
            .int("SPOOL_QUOTA_PER_OWNER")?
            .map_or(andes_schedd::queue::DEFAULT_UPLOAD_QUOTA_BYTES, |v| v.max(0) as u64),
        spool_reserve: s.int("SPOOL_RESERVE")?.map(|v| v.max(0) as u64),
        job_limits: {
            let d = andes_schedd::queue::JobLimits::default();
            let limit = |name: &str, default: u64| -> Result<u64> {
                Ok(s.int(name)?.map_or(default, |v| v.max(0) as u64))
            };
            andes_schedd::queue::JobLimits {
                per_submission: limit("MAX_JOBS_PER_SUBMISSION", d.per_submission)?,
                per_owner: limit("MAX_JOBS_PER_OWNER", d.per_owner)?,
                submitted: limit("MAX_JOBS_SUBMITTED", d.submitted)?,
            }
        },
    };
    let collector = s.collector_host()?;
    let keypair = match s.daemon_keypair("SCHEDD_KEY_NAME") {
        Ok(k) => Some(Arc::new(k)),
        Err(e) if collector.is_some() => {
            return Err(e.context("a schedd in a pool (COLLECTOR_HOST is set) needs its key"));
        }
        Err(e) if !s.plaintext()? => {
            return Err(e.context("the schedd serves TLS with its key (SCHEDD_KEY_NAME)"));
        }
        Err(_) => None,
    };
    let secs = |name: &str, default: i64| -> Result<Duration> {
        Ok(Duration::from_secs(s.secs(name, default)?.max(0) as u64))
    };
    let address_file = s.get("SCHEDD_ADDRESS_FILE")?;
    let clock = Arc::new(SystemClock);
    let (listener, addr) =
        schedd::bind(listen).await.with_context(|| format!("cannot listen on {listen}"))?;
    config.submit_host = format!("<{addr}>");
    let schedd = Schedd::open(&config, clock.clone())?;
    // Nothing evaluates a job's expressions before the schedd serves.
    schedd.defer_startup();
    // Transparent checkpoints are kept only when signed by the pool's hosts.
    let hosts = Arc::new(trust.keys_with_role(andes_protocol::Role::Host));
    let auth = Auth::with_body_limit(s.verifier(trust, "SCHEDD_REPLAY_CACHE")?, clock, BODY_LIMIT);
    let server = s.server(listener, keypair.as_deref(), "SCHEDD_KEY_NAME", &auth)?;
    let mut served = schedd.routes(&auth);
    if let Some(keypair) = keypair {
        let mut pc = PoolConfig::new(&config.name, &s.advertised(addr)?);
        pc.collector = collector.clone();
        pc.claim_worklife = s.secs("CLAIM_WORKLIFE", -1)?;
        pc.job_lease = s.secs("JOB_LEASE_DURATION", 2400)?.max(1) as u64;
        pc.queue_update_interval = secs("SHADOW_QUEUE_UPDATE_INTERVAL", 900)?;
        pc.cleanup_retry_delay = secs("SHADOW_JOB_CLEANUP_RETRY_DELAY", 30)?;
        pc.max_cleanup_retries = s.secs("SHADOW_MAX_JOB_CLEANUP_RETRIES", 5)?.max(0) as u32;
        pc.schedd_interval = secs("SCHEDD_INTERVAL", 300)?.max(Duration::from_secs(1));
        pc.spool = Some(spool.clone());
        pc.snapshot_signers = Some(hosts);
        pc.accounts = config.accounts.clone();
        pc.alive_interval = secs("ALIVE_INTERVAL", 10)?.max(Duration::from_secs(1));
        let pool = ScheddPool::start(&schedd, pc, keypair);
        served = served.merge(pool.routes(&auth));
    }
    let mut job_router = None;
    if let Some(rc) = router_config(&s, &spool)? {
        let key = Arc::new(s.daemon_keypair("JOB_ROUTER_KEY_NAME")?);
        let router = andes_schedd::router::service::JobRouter::start(&schedd, rc, key)
            .map_err(|e| anyhow::anyhow!("job router: {e}"))?;
        tracing::info!("andes schedd: job router with {} routes", router.table().routes.len());
        served = served.merge(router.routes(&auth));
        job_router = Some(router);
    }
    served = served.merge(reconfig_router(
        &auth,
        Reconfig {
            schedd: schedd.clone(),
            router: job_router,
            reload: Arc::new(s.reloader()),
            spool: spool.clone(),
            auth: auth.clone(),
        },
    ));
    let app = served.into_router(&auth);
    if let Some(f) = &address_file {
        crate::settings::write_atomically(f, &addr.to_string())
            .with_context(|| format!("writing SCHEDD_ADDRESS_FILE {f}"))?;
    }
    let jobs = schedd.queue.read().len();
    tracing::info!(
        "andes schedd {} listening on {addr}; queue {} ({jobs} jobs){}",
        config.name,
        spool.join("job_queue.db").display(),
        match &collector {
            Some(c) => format!("; pool {c}"),
            None => String::new(),
        }
    );
    let _periodic = schedd.spawn_periodic(config.periodic_interval);
    // DAGMan jobs (the scheduler universe) run here, as their owners.
    let dagman = match s.get("DAGMAN")?.filter(|p| !p.is_empty()) {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::current_exe().context("the DAGMan program (set DAGMAN)")?,
    };
    let _dagmen = andes_schedd::scheduler::Dagmen::start(&schedd, dagman);
    if let Some(r) = ready {
        let _ = r.send(addr);
    }
    // Serving starts now; the held-back start-up work runs beside it.
    let startup = schedd.clone();
    tokio::spawn(async move { startup.finish_startup().await });
    server.serve(app, stop).await.context("serving")?;
    if let Some(f) = &address_file {
        let _ = std::fs::remove_file(f);
    }
    Ok(())
}

/// The job router's configuration, `None` when no route source is set.
fn router_config(
    s: &Settings,
    spool: &std::path::Path,
) -> Result<Option<andes_schedd::router::service::RouterConfig>> {
    let secs = |name: &str, default: i64| -> Result<Duration> {
        Ok(Duration::from_secs(s.secs(name, default)?.max(0) as u64))
    };
    let entries = s.get("JOB_ROUTER_ENTRIES")?;
    let entries_file = s.get("JOB_ROUTER_ENTRIES_FILE")?.filter(|f| !f.trim().is_empty());
    let entries_cmd = s.get("JOB_ROUTER_ENTRIES_CMD")?;
    let named = andes_schedd::router::NamedRoutes::from_config(s.config())
        .map_err(|e| anyhow::anyhow!("job router: {e}"))?;
    if entries.is_none() && entries_cmd.is_none() && entries_file.is_none() && named.names.is_none()
    {
        return Ok(None);
    }
    Ok(Some(andes_schedd::router::service::RouterConfig {
        named,
        defaults: s.get("JOB_ROUTER_DEFAULTS")?,
        entries,
        entries_file: entries_file.map(std::path::PathBuf::from),
        entries_cmd,
        entries_refresh: secs("JOB_ROUTER_ENTRIES_REFRESH", 3600)?,
        source_constraint: s.get("JOB_ROUTER_SOURCE_JOB_CONSTRAINT")?,
        polling_period: secs("JOB_ROUTER_POLLING_PERIOD", 10)?,
        history: spool.join("router_history.jsonl"),
        work_dir: spool.join("router"),
        andes: std::env::current_exe().context("the andes command's path")?,
    }))
}

/// What `POST /v1/reconfig` needs.
#[derive(Clone)]
struct Reconfig {
    schedd: Schedd,
    router: Option<andes_schedd::router::service::JobRouter>,
    reload: Arc<dyn Fn() -> Result<Settings> + Send + Sync>,
    spool: std::path::PathBuf,
    auth: andes_protocol::Auth,
}

/// `POST /v1/reconfig` (admin; condor_reconfig): the schedd reads its
/// configuration again, and its trust file (keys added or removed apply to
/// the next request and handshake). Every idle cron job takes its next run again, as
/// the manual says a reconfiguration does, and the job router loads its
/// routes from the new configuration (a table that does not load is
/// refused, and the one in use stays). Other knobs apply at the next start.
fn reconfig_router(auth: &andes_protocol::Auth, state: Reconfig) -> andes_protocol::routes::Served {
    use andes_protocol::{ApiError, Role, SignedJson};
    use axum::extract::State;
    async fn reconfig(
        State(r): State<Reconfig>,
        SignedJson(_): SignedJson<serde_json::Value>,
    ) -> Result<axum::Json<serde_json::Value>, ApiError> {
        let s = (r.reload)().map_err(|e| ApiError::bad_request(format!("{e:#}")))?;
        let trust = s.trust("the schedd").map_err(|e| ApiError::bad_request(format!("{e:#}")))?;
        // The routing table first: one that does not load refuses the whole
        // reconfiguration, and nothing is half applied.
        let routes =
            router_config(&s, &r.spool).map_err(|e| ApiError::bad_request(format!("{e:#}")))?;
        let mut said_router = Vec::new();
        match (&r.router, routes) {
            (Some(router), Some(rc)) => {
                let (n, skipped) = router.reconfigure(rc).map_err(|e| {
                    ApiError::bad_request(format!("job router: {e}; the routes in use stay"))
                })?;
                said_router.push(format!("job router: {n} routes"));
                said_router.extend(skipped.into_iter().map(|w| format!("job router: {w}")));
            }
            (Some(_), None) => said_router
                .push("job router: no route source is set now; it stops at the next start".into()),
            (None, Some(_)) => said_router.push("job router: it starts at the next start".into()),
            (None, None) => {}
        }
        let now = andes_protocol::Clock::now(&*r.schedd.clock());
        r.schedd
            .queue
            .recompute_cron(now)
            .await
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        r.auth.verifier().set_trust(trust);
        let mut said = vec![
            "cron jobs' next runs computed again".to_string(),
            "trust file read again".to_string(),
        ];
        said.extend(said_router);
        said.push("the schedd's other knobs apply at its next start".into());
        let message = said.join("; ");
        tracing::info!("andes schedd: reconfigured: {message}");
        Ok(axum::Json(serde_json::json!({ "message": message })))
    }
    andes_protocol::routes::Api::new()
        .route(http::Method::POST, "/v1/reconfig", &[Role::Admin], axum::routing::post(reconfig))
        .finish(auth, state)
}
