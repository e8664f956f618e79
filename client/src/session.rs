//! What the commands that talk to a daemon share: the signed client, a runtime,
//! the clock, and how their errors read.

use std::sync::Arc;

use andes_protocol::{Client, Response};
use anyhow::{Result, anyhow};

use crate::settings::Settings;

/// A signed connection to a daemon (the schedd, the collector), with a runtime to drive it.
pub struct Session {
    /// The client.
    pub client: Client,
    /// The daemon's URL.
    pub url: String,
    rt: tokio::runtime::Runtime,
}

impl Session {
    /// Connects as the configured user to the configured schedd.
    pub fn open() -> Result<Session> {
        let s = Settings::load()?;
        let url = s.schedd_url()?;
        Session::open_url(&s, url)
    }

    /// Connects as the configured user to the configured collector.
    pub fn collector() -> Result<Session> {
        let s = Settings::load()?;
        let url = s.collector_url()?;
        Session::open_url(&s, url)
    }

    /// Connects as the user `settings` name to the daemon at `url`.
    pub fn open_url(settings: &Settings, url: String) -> Result<Session> {
        let client = user_client(settings, &url)?;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        Ok(Session { client, url, rt })
    }

    /// Connects as the configured user to the execute host daemon at `addr`
    /// (`host:port`), else the one `settings` names ([`host_address`]); only
    /// a daemon holding a host's key is taken for it.
    pub fn host(settings: &Settings, addr: Option<&str>) -> Result<Session> {
        settings.install_transport("connecting to the host")?;
        let keypair = Arc::new(settings.keypair()?);
        let addr = match addr {
            Some(a) => a.to_string(),
            None => host_address(settings)?,
        };
        let client = Client::expecting(
            &addr,
            keypair,
            &andes_protocol::Transport::installed(),
            &[andes_protocol::Role::Host],
        )?;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        Ok(Session { client, url: addr, rt })
    }

    /// Sends an admin command (`andes host off`, `drain`, `vacate`,
    /// `reconfig`...) with `body` to `path` of the daemon: the daemon's
    /// sentence saying what it did (its reply's `message`).
    pub fn command(&self, path: &str, body: &serde_json::Value) -> Result<String> {
        let reply: serde_json::Value =
            self.block_on(self.client.call(http::Method::POST, path, Some(body)))?;
        Ok(reply["message"].as_str().unwrap_or("done").to_string())
    }

    /// Runs `f` to completion.
    pub fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.rt.block_on(f)
    }
}

/// The signed client of the user `settings` name for the daemon at `url`, over the
/// pool's transport: what every command (and `andes dashboard`) speaks to a daemon with.
pub fn user_client(settings: &Settings, url: &str) -> Result<Client> {
    settings.install_transport("connecting to the pool")?;
    let keypair = Arc::new(settings.keypair()?);
    Ok(Client::new(url, keypair)?)
}

/// The address of this configuration's execute host daemon: the address
/// file it wrote (HOST_ADDRESS_FILE) when there is one, else HOST_ADDRESS.
pub fn host_address(settings: &Settings) -> Result<String> {
    match settings.get("HOST_ADDRESS_FILE")?.and_then(|f| std::fs::read_to_string(f).ok()) {
        Some(a) if !a.trim().is_empty() => Ok(a.trim().to_string()),
        _ => settings.require("HOST_ADDRESS"),
    }
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    classad::eval::system_now()
}

/// An error status as a message.
pub fn status_error(r: &Response) -> anyhow::Error {
    anyhow!("{}: {}", r.status, r.error_reason().unwrap_or_default())
}
