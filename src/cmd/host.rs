//! `andes host`: the execute host daemon (condor_startd), and its commands
//! `andes host status` (condor_status), `andes host off` (condor_off) and
//! `andes host set-attr`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use andes_host::api::{self, OffMode, OffRequest, SetAttrRequest, StatusReply};
use andes_host::daemon::{Daemon, DaemonConfig};
use andes_protocol::{Auth, Client};
use andes_starter::{Host, HostConfig, SystemClock};
use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand};
use classad::{ClassAd, Value};

use crate::cmd::client::Session;
use crate::settings::Settings;

/// Arguments of `andes host`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct HostArgs {
    #[command(subcommand)]
    command: Option<HostCmd>,
    /// Listen here instead of HOST_ADDRESS (port 0 picks a free port).
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<SocketAddr>,
}

impl HostArgs {
    /// Whether this runs the daemon (no subcommand).
    pub fn is_daemon(&self) -> bool {
        self.command.is_none()
    }
}

/// The subcommands of `andes host`.
#[derive(Subcommand, Debug)]
pub enum HostCmd {
    /// Show this host's slots (condor_status).
    Status(StatusArgs),
    /// Shut the host daemon down (condor_off).
    Off(OffArgs),
    /// Set an attribute of the slots' ads, e.g. `KeyboardIdle 0` to act as
    /// the machine's owner.
    SetAttr(SetAttrArgs),
}

/// Arguments of `andes host status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Every attribute of each slot, in the old ClassAd syntax.
    #[arg(long = "long", short = 'l')]
    long: bool,
    /// The ads as HTCondor's JSON.
    #[arg(long, conflicts_with = "long")]
    json: bool,
}

/// Arguments of `andes host off`.
#[derive(Args, Debug)]
#[group(multiple = false)]
pub struct OffArgs {
    /// Jobs retire (MaxJobRetirementTime), then are vacated (the default).
    #[arg(long)]
    graceful: bool,
    /// Jobs run to their end; no new ones start.
    #[arg(long)]
    peaceful: bool,
    /// Jobs are hard-killed now.
    #[arg(long)]
    fast: bool,
}

/// Arguments of `andes host set-attr`.
#[derive(Args, Debug)]
pub struct SetAttrArgs {
    /// The attribute.
    attr: String,
    /// Its new value, a ClassAd expression (`0`, `"text"`, `KeyboardIdle > 60`).
    value: String,
    /// Only this slot (default: every slot).
    #[arg(long, value_name = "N")]
    slot: Option<u32>,
}

/// Runs `andes host` or one of its subcommands.
pub fn run(args: HostArgs) -> Result<ExitCode> {
    match args.command {
        None => daemon(args.listen),
        Some(HostCmd::Status(a)) => status(a),
        Some(HostCmd::Off(a)) => {
            let mode = if a.fast {
                OffMode::Fast
            } else if a.peaceful {
                OffMode::Peaceful
            } else {
                OffMode::Graceful
            };
            command("/v1/off", serde_json::to_value(OffRequest { mode })?)
        }
        Some(HostCmd::SetAttr(a)) => command(
            "/v1/set-attr",
            serde_json::to_value(SetAttrRequest {
                slot: a.slot,
                name: a.attr,
                value: Some(a.value),
            })?,
        ),
    }
}

fn daemon(listen: Option<SocketAddr>) -> Result<ExitCode> {
    let base = andes_host::daemon::base_config(std::env::vars());
    let s = Settings::load_over(base)?;
    crate::logs::init(&s, &[crate::logs::Daemon::Startd])?;
    super::run_daemon(|| {
        let stop = super::stop_signal();
        serve(s, listen, None, stop)
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Runs the execute host daemon from `s` (loaded over
/// `andes_host::daemon::base_config`) until it has shut down: binds
/// (HOST_ADDRESS unless `listen`), writes HOST_ADDRESS_FILE, reports the
/// address on `ready` and, with COLLECTOR_HOST set, joins the pool
/// (publishes its slots, takes claims). When `stop` completes the host shuts
/// down gracefully within SHUTDOWN_GRACEFUL_TIMEOUT (what still runs a
/// second before it is out is killed; see `Command::OffWithin`); a Ctrl-C
/// after that makes it fast at once.
pub async fn serve(
    s: Settings,
    listen: Option<SocketAddr>,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let execute = s.path("EXECUTE")?;
    let trust = s.trust("the host")?;
    let listen = s.listen("HOST_ADDRESS", listen)?;
    s.check_listen("HOST_ADDRESS", listen)?;
    s.install_transport("the host")?;
    std::fs::create_dir_all(&execute)
        .with_context(|| format!("creating EXECUTE {}", execute.display()))?;
    let mut info = andes_host::daemon::machine_info(&execute);
    // STARTD_NAME names the slots `slotN@STARTD_NAME` (several hosts on one machine).
    if let Some(name) = s.get("STARTD_NAME")? {
        info.hostname = name;
    }
    let config = DaemonConfig::from_config(s.config(), execute.clone(), info)?;
    let slots = config.policy.slot_layout(
        config.info.cpus,
        config.info.memory_mb,
        config.info.disk_kb,
        config.info.virtual_memory_kb,
    )?;
    let max_instances = (slots.len() as u32).saturating_mul(2).clamp(4, 1000);
    // STARTER_METER_FUEL = True counts every job's fuel (WasmFuelConsumed);
    // by default a job that needs none (no MaxFuel; compiled by `andes
    // compile` or not) runs unmetered where the platform allows it: about
    // twice as fast on compute, with the same control, checkpoints and limits.
    let host = Host::new(HostConfig {
        max_instances,
        cache_dir: s.get("MODULE_CACHE")?.map(Into::into),
        meter_fuel: s.bool("STARTER_METER_FUEL", false)?,
        ..Default::default()
    })?;
    let collector = s.collector_host()?;
    let keypair = match (&collector, s.plaintext()?) {
        (Some(_), _) => Some(Arc::new(
            s.daemon_keypair("HOST_KEY_NAME")
                .context("a host in a pool (COLLECTOR_HOST is set) needs its key")?,
        )),
        (None, false) => Some(Arc::new(
            s.daemon_keypair("HOST_KEY_NAME")
                .context("the host serves TLS with its key (HOST_KEY_NAME)")?,
        )),
        (None, true) => None,
    };
    let address_file = s.get("HOST_ADDRESS_FILE")?;
    let graceful = s.shutdown_graceful_timeout()?;
    let clock = Arc::new(SystemClock);
    let measurer = andes_host::daemon::real_measurer(&config.execute);
    let (execute_again, info_again) = (execute.clone(), config.info.clone());
    let mut daemon = Daemon::new(config, Arc::new(host), clock.clone(), measurer)?;
    if let Some(k) = &keypair {
        // Snapshots of jobs compiled by `andes compile` are signed with the
        // host's key; a restore takes only those signed by the pool's hosts.
        let hosts = Arc::new(trust.keys_with_role(andes_protocol::Role::Host));
        let signer = k.clone();
        daemon.set_snapshot_keys(andes_host::daemon::SnapshotKeys {
            public: *k.public().as_bytes(),
            sign: Arc::new(move |m: &[u8]| signer.sign(m)),
            trusted: Arc::new(move |key: &[u8; 32]| hosts.contains(key)),
        });
    }
    let remote = daemon.remote();
    let (listener, addr) =
        api::bind(listen).await.with_context(|| format!("cannot listen on {listen}"))?;
    let auth =
        Auth::new(s.verifier(trust, "HOST_REPLAY_CACHE")?, Arc::new(andes_protocol::SystemClock));
    // `andes reconfig`: the same files read again (the trust file too), the
    // machine as it is.
    let reload = s.reloader();
    let reload_auth = auth.clone();
    daemon.set_reload(Arc::new(move || {
        let s = reload().map_err(|e| format!("{e:#}"))?;
        let config =
            DaemonConfig::from_config(s.config(), execute_again.clone(), info_again.clone())
                .map_err(|e| e.to_string())?;
        let trust = s.trust("the host").map_err(|e| format!("{e:#}"))?;
        reload_auth.verifier().set_trust(trust);
        Ok(config)
    }));
    let server = s.server(listener, keypair.as_deref(), "HOST_KEY_NAME", &auth)?;
    let mut served = api::routes(remote.clone(), &auth);
    let mut publisher = None;
    let mut withdraw = None;
    if let (Some(url), Some(keypair)) = (&collector, keypair) {
        let client = Client::new(url, keypair)?;
        let names: Vec<String> = daemon
            .ads()
            .iter()
            .filter_map(|a| match a.eval_attr("Name") {
                Value::Str(n) => Some(n.to_string()),
                _ => None,
            })
            .collect();
        withdraw = Some((client.clone().with_timeout(std::time::Duration::from_secs(2)), names));
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        daemon.join_pool(s.advertised(addr)?, tx);
        publisher = Some(andes_host::pool::spawn_publisher(client, rx));
        served = served.merge(andes_host::pool::routes(remote.clone(), clock, &auth));
    }
    let app = served.into_router(&auth);
    if let Some(f) = &address_file {
        crate::settings::write_atomically(f, &addr.to_string())
            .with_context(|| format!("writing HOST_ADDRESS_FILE {f}"))?;
    }
    tracing::info!(
        "andes host listening on {addr}; {} slots; sandboxes under {}{}",
        slots.len(),
        execute.display(),
        match &collector {
            Some(c) => format!("; pool {c}"),
            None => String::new(),
        }
    );
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        server
            .serve(app, async move {
                let _ = stop_rx.await;
            })
            .await
    });
    // The stop signal: a graceful shutdown (condor_off) bounded by
    // SHUTDOWN_GRACEFUL_TIMEOUT; a Ctrl-C after it, fast.
    let interrupts = tokio::spawn(async move {
        stop.await;
        tracing::info!(
            "andes host: shutting down (graceful, within SHUTDOWN_GRACEFUL_TIMEOUT = {} s)",
            graceful.as_secs()
        );
        let _ = remote.command(andes_host::daemon::Command::OffWithin(graceful)).await;
        {
            super::stop_signal().await;
            tracing::info!("andes host: interrupted again, shutting down (fast)");
            let _ = remote.command(andes_host::daemon::Command::Off(OffMode::Fast.into())).await;
        }
    });
    if let Some(r) = ready {
        let _ = r.send(addr);
    }
    daemon.run().await;
    interrupts.abort();
    if let Some(p) = publisher {
        p.abort();
    }
    // The slots are gone: the collector hears so at once, not after
    // CLASSAD_LIFETIME.
    if let Some((client, names)) = withdraw {
        for name in names {
            let body = andes_protocol::pool::CollectorInvalidate { kind: "Machine".into(), name };
            let _ = client.post_json("/v1/collector/invalidate", &body).await;
        }
    }
    let _ = stop_tx.send(());
    let _ = server.await;
    if let Some(f) = &address_file {
        let _ = std::fs::remove_file(f);
    }
    tracing::info!("andes host: shutdown complete");
    Ok(())
}

/// Sends an admin command and prints the daemon's answer.
pub fn command(path: &str, body: serde_json::Value) -> Result<ExitCode> {
    command_at(None, path, body)
}

/// Sends an admin command to the host at `addr` (or the configured one).
pub fn command_at(addr: Option<&str>, path: &str, body: serde_json::Value) -> Result<ExitCode> {
    let session = Session::host(&Settings::load()?, addr)?;
    outln!("{}", session.command(path, &body)?);
    Ok(ExitCode::SUCCESS)
}

fn status(args: StatusArgs) -> Result<ExitCode> {
    let session = Session::host(&Settings::load()?, None)?;
    let reply: StatusReply =
        session.block_on(session.client.call::<(), _>(http::Method::GET, "/v1/status", None))?;
    let mut ads = Vec::with_capacity(reply.ads.len());
    for (i, text) in reply.ads.iter().enumerate() {
        ads.push(
            classad::parse_ad(text)
                .map_err(|e| anyhow!("the host sent an unreadable ad for slot {}: {e}", i + 1))?,
        );
    }
    if args.json {
        let v: Vec<serde_json::Value> = ads.iter().map(classad::json::ad_to_json).collect();
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else if args.long {
        for ad in &ads {
            outln!("{}", ad.to_old_syntax());
        }
    } else {
        out!("{}", table(&ads, super::client::now()));
    }
    Ok(ExitCode::SUCCESS)
}

fn text(ad: &ClassAd, name: &str) -> String {
    match ad.eval_attr(name) {
        Value::Str(s) => s.to_string(),
        Value::Int(i) => i.to_string(),
        _ => "?".into(),
    }
}

/// `d+hh:mm:ss`, as condor_status prints durations (as condor_q does).
pub(crate) use super::q::duration as duration_text;

/// condor_status's default table, and its summary by Arch/OpSys.
pub fn table(ads: &[ClassAd], now: i64) -> String {
    let mut rows = vec![[
        "Name".to_string(),
        "OpSys".into(),
        "Arch".into(),
        "State".into(),
        "Activity".into(),
        "LoadAv".into(),
        "Mem".into(),
        "ActvtyTime".into(),
    ]];
    for ad in ads {
        let load = ad.eval_attr("LoadAvg").as_real().unwrap_or(0.0);
        let entered = ad.eval_attr("EnteredCurrentActivity").as_int().unwrap_or(now);
        rows.push([
            text(ad, "Name"),
            text(ad, "OpSys"),
            text(ad, "Arch"),
            text(ad, "State"),
            text(ad, "Activity"),
            format!("{load:.3}"),
            text(ad, "Memory"),
            duration_text(now - entered),
        ]);
    }
    let mut width = [0usize; 8];
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in &rows {
        let mut line = String::new();
        for (i, (c, w)) in r.iter().zip(width.iter()).enumerate() {
            // Numbers right-aligned, as condor_status does.
            if i == 5 || i == 6 {
                line.push_str(&format!("{c:>w$} "));
            } else {
                line.push_str(&format!("{c:<w$} "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    // The summary: slots per state, by Arch/OpSys.
    const STATES: [&str; 7] =
        ["Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Backfill", "Drained"];
    let mut groups: std::collections::BTreeMap<String, [usize; 8]> = Default::default();
    for ad in ads {
        let key = format!("{}/{}", text(ad, "Arch"), text(ad, "OpSys"));
        let state = text(ad, "State");
        for g in [key, "Total".to_string()] {
            let c = groups.entry(g).or_default();
            c[0] += 1;
            if let Some(i) = STATES.iter().position(|s| *s == state) {
                c[i + 1] += 1;
            }
        }
    }
    let total = groups.remove("Total").unwrap_or_default();
    out.push_str(&format!(
        "\n{:>14} {:>5} {:>5} {:>7} {:>9} {:>7} {:>10} {:>8} {:>5}\n",
        "", "Total", "Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Backfill", "Drain"
    ));
    for (k, c) in groups.iter().chain(std::iter::once((&"Total".to_string(), &total))) {
        out.push_str(&format!(
            "{:>14} {:>5} {:>5} {:>7} {:>9} {:>7} {:>10} {:>8} {:>5}\n",
            k, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{duration_text, table};

    #[test]
    fn durations_read_as_condor_status_prints_them() {
        assert_eq!(duration_text(0), "0+00:00:00");
        assert_eq!(duration_text(93_784), "1+02:03:04");
        assert_eq!(duration_text(-5), "0+00:00:00");
    }

    #[test]
    fn the_table_has_condor_status_columns_and_summary() {
        let ads: Vec<classad::ClassAd> = [
            r#"[ Name = "slot1@h"; OpSys = "LINUX"; Arch = "X86_64"; State = "Unclaimed";
                 Activity = "Idle"; LoadAvg = 0.25; Memory = 1024; EnteredCurrentActivity = 1000 ]"#,
            r#"[ Name = "slot2@h"; OpSys = "LINUX"; Arch = "X86_64"; State = "Owner";
                 Activity = "Idle"; LoadAvg = 1.0; Memory = 1024; EnteredCurrentActivity = 1990 ]"#,
        ]
        .iter()
        .map(|t| classad::parse_ad(t).unwrap())
        .collect();
        let t = table(&ads, 2000);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "Name    OpSys Arch   State     Activity LoadAv  Mem ActvtyTime");
        assert_eq!(lines[1], "slot1@h LINUX X86_64 Unclaimed Idle      0.250 1024 0+00:16:40");
        assert_eq!(lines[2], "slot2@h LINUX X86_64 Owner     Idle      1.000 1024 0+00:00:10");
        let total: Vec<&str> = lines.last().unwrap().split_whitespace().collect();
        assert_eq!(total, ["Total", "2", "1", "0", "1", "0", "0", "0", "0"]);
        assert!(t.contains("X86_64/LINUX     2     1       0         1"), "{t}");
    }
}
