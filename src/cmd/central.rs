//! `andes central-manager`: the collector and the negotiator, set up from the
//! configuration; and `andes userprio` (condor_userprio).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use andes_central::collector::Collector;
use andes_central::manager::{self, Central, CentralConfig, SetFactorRequest, UserPrioReply};
use andes_central::negotiator::{AccountantConfig, NegotiatorConfig};
use andes_protocol::{Auth, SystemClock};
use anyhow::{Context, Result, anyhow};
use clap::Args;

use crate::settings::Settings;

/// Arguments of `andes central-manager`.
#[derive(Args, Debug)]
pub struct CentralArgs {
    /// Listen here instead of CENTRAL_MANAGER_ADDRESS (port 0 picks a free port).
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<SocketAddr>,
}

/// Runs the central manager until interrupted.
pub fn run(args: CentralArgs) -> Result<ExitCode> {
    let s = Settings::load()?;
    use crate::logs::Daemon;
    crate::logs::init(&s, &[Daemon::Collector, Daemon::Negotiator])?;
    super::run_daemon(|| {
        let stop = super::stop_signal();
        serve(s, args.listen, None, None, async move {
            stop.await;
            tracing::info!("andes central-manager: interrupted, stopping");
        })
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Reads the negotiator's knobs.
pub fn central_config(s: &Settings) -> Result<CentralConfig> {
    let interval = s.secs("NEGOTIATOR_INTERVAL", 60)?.max(1) as u64;
    let expr = |name: &str| -> Result<Option<classad::Expr>> {
        match s.get(name)? {
            None => Ok(None),
            Some(t) => classad::parse_expr(&t)
                .map(Some)
                .map_err(|e| anyhow!("{name} = {t}: not a ClassAd expression: {e}")),
        }
    };
    let negotiator = NegotiatorConfig {
        preemption_requirements: expr("PREEMPTION_REQUIREMENTS")?,
        preemption_rank: expr("PREEMPTION_RANK")?,
        consider_preemption: s.bool("NEGOTIATOR_CONSIDER_PREEMPTION", true)?,
        ..Default::default()
    };
    let float = |name: &str| -> Result<Option<f64>> {
        match s.get(name)? {
            None => Ok(None),
            Some(t) => {
                t.trim().parse().map(Some).map_err(|_| anyhow!("{name} = {t}: expected a number"))
            }
        }
    };
    let accountant =
        AccountantConfig::from_values(float("PRIORITY_HALFLIFE")?, float("DEFAULT_PRIO_FACTOR")?);
    Ok(CentralConfig {
        interval: Duration::from_secs(interval),
        negotiator,
        accountant,
        state_file: Some(s.path("LOCAL_DIR")?.join("accountant.json")),
    })
}

/// Routes served beside the central manager's, made with its authentication.
pub type ExtraRoutes = Box<dyn FnOnce(&Auth) -> andes_protocol::routes::Served + Send>;

/// Runs a central manager from `s` until `stop` completes: binds
/// (CENTRAL_MANAGER_ADDRESS unless `listen`), writes COLLECTOR_ADDRESS_FILE,
/// reports the address on `ready`. `extra` routes (the pool's own, made with the
/// central manager's authentication) are served beside the collector's and the
/// negotiator's.
pub async fn serve(
    s: Settings,
    listen: Option<SocketAddr>,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
    extra: Option<ExtraRoutes>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let trust = s.trust("the central manager")?;
    if listen.is_none() && s.get("CENTRAL_MANAGER_ADDRESS")?.is_none() {
        return Err(anyhow!("set COLLECTOR_HOST (or CENTRAL_MANAGER_ADDRESS) to HOST:PORT"));
    }
    let listen = s.listen("CENTRAL_MANAGER_ADDRESS", listen)?;
    s.check_listen("CENTRAL_MANAGER_ADDRESS", listen)?;
    s.install_transport("the central manager")?;
    let keypair = Arc::new(s.daemon_keypair("NEGOTIATOR_KEY_NAME")?);
    let central_key = keypair.clone();
    let cfg = central_config(&s)?;
    let lifetime = s.secs("CLASSAD_LIFETIME", 900)?.max(1);
    let address_file = s.get("COLLECTOR_ADDRESS_FILE")?;
    let clock = Arc::new(SystemClock);
    let collector = Arc::new(Mutex::new(Collector::new(lifetime)));
    let poke = Arc::new(tokio::sync::Notify::new());
    let central =
        Arc::new(Central::new(collector.clone(), poke.clone(), clock.clone(), keypair, cfg));
    let auth = Auth::new(s.verifier(trust, "CENTRAL_MANAGER_REPLAY_CACHE")?, clock.clone());
    let mut served = andes_central::collector::api::routes(collector, clock, &auth, Some(poke))
        .merge(manager::routes(central.clone(), &auth));
    if let Some(extra) = extra {
        served = served.merge(extra(&auth));
    }
    let app = served.into_router(&auth);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    let server = s.server(listener, Some(&central_key), "NEGOTIATOR_KEY_NAME", &auth)?;
    if let Some(f) = &address_file {
        crate::settings::write_atomically(f, &addr.to_string())
            .with_context(|| format!("writing COLLECTOR_ADDRESS_FILE {f}"))?;
    }
    tracing::info!("andes central-manager listening on {addr} (collector and negotiator)");
    let reload = s.reloader();
    let reload_auth = auth.clone();
    central.set_reload(Arc::new(move || {
        let s = reload().map_err(|e| format!("{e:#}"))?;
        let config = central_config(&s).map_err(|e| format!("{e:#}"))?;
        let trust = s.trust("the central manager").map_err(|e| format!("{e:#}"))?;
        reload_auth.verifier().set_trust(trust);
        Ok(config)
    }));
    let negotiator = tokio::spawn(central.clone().run());
    if let Some(r) = ready {
        let _ = r.send(addr);
    }
    server.serve(app, stop).await.context("serving")?;
    negotiator.abort();
    if let Some(f) = &address_file {
        let _ = std::fs::remove_file(f);
    }
    Ok(())
}

/// Arguments of `andes userprio`.
#[derive(Args, Debug)]
pub struct UserprioArgs {
    /// Set a submitter's priority factor (admin): `-setfactor NAME FACTOR`.
    #[arg(long = "setfactor", num_args = 2, value_names = ["NAME", "FACTOR"])]
    setfactor: Option<Vec<String>>,
    /// The table as JSON.
    #[arg(long)]
    json: bool,
}

/// `andes userprio`: the negotiator's user priorities (condor_userprio).
pub fn userprio(args: UserprioArgs) -> Result<ExitCode> {
    let session = super::client::Session::collector()?;
    if let Some(v) = args.setfactor {
        let (name, factor) = (&v[0], &v[1]);
        let factor: f64 =
            factor.parse().map_err(|_| anyhow!("priority factor {factor}: expected a number"))?;
        let req = SetFactorRequest { submitter: name.clone(), factor };
        let r = session.block_on(session.client.post_json("/v1/negotiator/setfactor", &req))?;
        if !r.status.is_success() {
            return Err(super::client::status_error(&r));
        }
        outln!("The priority factor of {name} was set to {factor:.2}");
        return Ok(ExitCode::SUCCESS);
    }
    let reply: UserPrioReply = session.block_on(session.client.call::<(), _>(
        http::Method::GET,
        "/v1/negotiator/userprio",
        None,
    ))?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&reply.rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    out!("{}", userprio_table(&reply.rows, super::client::now()));
    Ok(ExitCode::SUCCESS)
}

/// condor_userprio's default table.
pub fn userprio_table(rows: &[andes_central::negotiator::UserPrioRow], now: i64) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let w = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(24);
    let _ = writeln!(
        out,
        "{:<w$} {:>10} {:>10} {:>10} {:>6} {:>12} {:>16}",
        "User Name", "Effective", "Real", "Priority", "Res", "Total Usage", "Time Since"
    );
    let _ = writeln!(
        out,
        "{:<w$} {:>10} {:>10} {:>10} {:>6} {:>12} {:>16}",
        "", "Priority", "Priority", "Factor", "In Use", "(wghted-hrs)", "Last Usage"
    );
    let _ = writeln!(out, "{}", "-".repeat(w + 72));
    let mut in_use = 0u64;
    for r in rows {
        in_use += r.in_use as u64;
        let since = match r.last_usage {
            Some(t) if r.in_use == 0 => super::host::duration_text(now - t),
            Some(_) => "<now>".to_string(),
            None => "<never>".to_string(),
        };
        let _ = writeln!(
            out,
            "{:<w$} {:>10.2} {:>10.2} {:>10.2} {:>6} {:>12.2} {:>16}",
            r.name,
            r.effective_priority,
            r.real_priority,
            r.priority_factor,
            r.in_use,
            r.usage_hours,
            since
        );
    }
    let _ = writeln!(out, "{}", "-".repeat(w + 72));
    let _ = writeln!(out, "Number of users: {}  {:>w2$}", rows.len(), in_use, w2 = w + 22);
    out
}
