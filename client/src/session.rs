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

/// Seconds since the epoch.
pub fn now() -> i64 {
    classad::eval::system_now()
}

/// An error status as a message.
pub fn status_error(r: &Response) -> anyhow::Error {
    anyhow!("{}: {}", r.status, r.error_reason().unwrap_or_default())
}
