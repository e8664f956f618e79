//! Signed requests to a test pool's daemons as any of its identities, for
//! the tests that call routes directly (authorization, attacks).

use std::sync::Arc;
use std::time::Duration;

use andes_protocol::{Client, Keypair, Transport, TrustFile};
use http::{Method, StatusCode};

use super::pool::Pool;

/// Clients of a pool's daemons, one per identity asked for.
pub struct Callers {
    rt: tokio::runtime::Runtime,
    transport: Transport,
    keys: std::path::PathBuf,
}

impl Callers {
    pub fn new(pool: &Pool) -> Callers {
        let trust = std::fs::read_to_string(pool.path().join("trust")).unwrap();
        let transport = Transport::Tls(Arc::new(TrustFile::parse(&trust, "trust").unwrap()));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        Callers { rt, transport, keys: pool.path().join("keys") }
    }

    /// Runs `f` on the callers' runtime.
    pub fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.rt.block_on(f)
    }

    pub fn client(&self, addr: &str, who: &str) -> Client {
        let kp = Arc::new(Keypair::load(&self.keys.join(who)).unwrap());
        Client::with_transport(addr, kp, &self.transport)
            .unwrap()
            .with_timeout(Duration::from_secs(20))
    }

    /// The status `who` gets for `method path` with `body`, or `None` when
    /// the daemon refused the connection itself (an unknown key).
    pub fn call(
        &self,
        addr: &str,
        who: &str,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Option<StatusCode> {
        let c = self.client(addr, who);
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        let body = body.to_vec();
        self.rt.block_on(async { c.request(m, path, body.into()).await }).ok().map(|r| r.status)
    }

    pub fn json<T: serde::de::DeserializeOwned>(&self, addr: &str, who: &str, path: &str) -> T {
        let c = self.client(addr, who);
        self.rt.block_on(async { c.call::<(), T>(Method::GET, path, None).await }).unwrap()
    }

    /// `PUT path` with `bytes` as a streamed body (an upload), as client `c`.
    pub fn put_stream(&self, c: &Client, path: &str, bytes: Vec<u8>) -> Option<StatusCode> {
        self.rt
            .block_on(async { c.upload_bytes(Method::PUT, path, bytes.into(), &[]).await })
            .ok()
            .map(|r| r.status)
    }
}
