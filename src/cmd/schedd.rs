//! `andes schedd`: the schedd daemon, set up from the configuration.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use andes_protocol::{Auth, SystemClock, TrustFile, Verifier, VerifierConfig};
use andes_scheduler::schedd::{self, BODY_LIMIT, Schedd, ScheddConfig};
use anyhow::{Context, Result, anyhow};
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
    let spool = s.path("SPOOL")?;
    let trust_path = s.path("TRUST_FILE")?;
    let trust = TrustFile::load(&trust_path).with_context(|| {
        format!("the schedd needs the pool's trust file {} (TRUST_FILE)", trust_path.display())
    })?;
    let listen: SocketAddr = match args.listen {
        Some(a) => a,
        None => {
            let a = s.require("SCHEDD_ADDRESS")?;
            a.parse().map_err(|_| anyhow!("SCHEDD_ADDRESS = {a}: expected HOST:PORT"))?
        }
    };
    let interval = s.int("PERIODIC_EXPR_INTERVAL")?.unwrap_or(60).max(1) as u64;
    let mut config = ScheddConfig {
        name: s.require("SCHEDD_NAME")?,
        data_dir: spool.clone(),
        periodic_interval: Duration::from_secs(interval),
        history_max_jobs: s.int("HISTORY_MAX_JOBS")?.unwrap_or(1_000_000).max(0) as u64,
        history_max_age: s.int("HISTORY_MAX_AGE")?,
        submit_host: String::new(),
    };
    let address_file = s.get("SCHEDD_ADDRESS_FILE")?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let clock = Arc::new(SystemClock);
        let (listener, addr) =
            schedd::bind(listen).await.with_context(|| format!("cannot listen on {listen}"))?;
        config.submit_host = format!("<{addr}>");
        let schedd = Schedd::open(&config, clock.clone())?;
        let auth = Auth::with_body_limit(
            Verifier::new(trust, VerifierConfig::default()),
            clock,
            BODY_LIMIT,
        );
        if let Some(f) = &address_file {
            crate::settings::write_atomically(f, &addr.to_string())
                .with_context(|| format!("writing SCHEDD_ADDRESS_FILE {f}"))?;
        }
        let jobs = schedd.queue.read().len();
        eprintln!(
            "andes schedd {} listening on {addr}; queue {} ({jobs} jobs)",
            config.name,
            spool.join("job_queue.db").display()
        );
        let _periodic = schedd.spawn_periodic(config.periodic_interval);
        tokio::select! {
            r = schedd::serve(schedd, auth, listener) => r.context("serving")?,
            _ = tokio::signal::ctrl_c() => eprintln!("andes schedd: interrupted, stopping"),
        }
        if let Some(f) = &address_file {
            let _ = std::fs::remove_file(f);
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}
