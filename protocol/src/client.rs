//! The HTTP client every andes part uses to call another: it connects (over TLS with
//! the pool's raw public keys, see [`crate::tls`], or plain HTTP to a loopback daemon),
//! authenticates each request (over TLS by its connection's handshake; over plain HTTP
//! by signing it for the daemon the connection reached, see [`crate::sign`]), and
//! returns the status and the JSON body.
//!
//! Built on hyper 1's HTTP/1.1 connections with a small pool of its own: a request is
//! built only once its connection is chosen, because a signature names the
//! destination.

use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ErrorBody;
use crate::key::Keypair;
use crate::sign::{Destination, SignedHeaders};
use crate::tls;
use crate::trust::{Role, TrustFile};
use crate::verify::{Clock, SystemClock};

/// How long an unused pooled connection is kept: shorter than a server's header read
/// timeout ([`crate::serve::Limits`]), so the client lets go of a connection first.
pub const POOL_IDLE: Duration = Duration::from_secs(20);
/// Time to set up a connection (TCP and the TLS handshake).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most idle connections a client keeps. A schedd holds a long poll and
/// makes short calls for every claim on a host through one client: with
/// fewer kept than a host's claims use at once, connections were closed
/// and set up again (TLS handshakes) at every batch of a host of many
/// slots. Unused ones still go after [`POOL_IDLE`]; a server holds at most
/// half its connections for one key (see [`crate::admission`]).
const POOL_MAX_IDLE: usize = 256;

/// The body of every request a connection carries: whole bytes or a file's stream.
type ReqBody = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

fn whole(body: Full<Bytes>) -> ReqBody {
    body.map_err(|never| match never {}).boxed()
}

/// Default time a whole request may take: 30 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default largest response body read: 64 MiB.
pub const DEFAULT_MAX_RESPONSE: usize = 64 << 20;

/// What went wrong calling a daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientErrorKind {
    /// The base URL or path is not usable.
    #[error("bad URL: {0}")]
    BadUrl(String),
    /// Nothing listens at the address.
    #[error("connection refused: is the daemon running at {0}?")]
    Refused(String),
    /// Connecting failed otherwise (including a TLS handshake refused either way).
    #[error("cannot connect: {0}")]
    Connect(String),
    /// Plain HTTP was asked for a daemon that is not on the loopback interface.
    #[error("plain HTTP is only for daemons on 127.0.0.1 (USE_PLAINTEXT_HTTP); {0} needs TLS")]
    PlainNotLoopback(String),
    /// The request or response failed at the HTTP level.
    #[error("HTTP error: {0}")]
    Http(String),
    /// The whole exchange took too long.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The response body is larger than the client's limit.
    #[error("the response is larger than {0} bytes")]
    TooLarge(usize),
    /// The request body could not be encoded.
    #[error("cannot encode the request body: {0}")]
    Encode(String),
    /// The daemon refused the request (its `{"error": ...}` reason).
    #[error("{status}: {reason}")]
    Status {
        /// The response's status.
        status: StatusCode,
        /// The daemon's reason.
        reason: String,
    },
    /// The response is not the JSON expected.
    #[error("malformed JSON response: {0}")]
    BadJson(String),
    /// A streamed file could not be sent or received whole.
    #[error("{0}")]
    Transfer(#[from] crate::stream::StreamError),
}

/// A failed call: which URL, and why.
#[derive(Debug, thiserror::Error)]
#[error("{}{url}: {kind}", method.as_ref().map(|m| format!("{m} ")).unwrap_or_default())]
pub struct ClientError {
    /// The method (none for an error making the client).
    pub method: Option<Method>,
    /// The URL called.
    pub url: String,
    /// What went wrong (part of the message, not its source: an error chain
    /// printed whole says it once).
    pub kind: ClientErrorKind,
}

/// A daemon's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status.
    pub status: StatusCode,
    /// The body.
    pub body: Bytes,
}

impl Response {
    /// Decodes the body as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }

    /// The reason of an error response (`{"error": ...}`), if the body is one.
    pub fn error_reason(&self) -> Option<String> {
        self.json::<ErrorBody>().ok().map(|e| e.error)
    }
}

/// How a client reaches daemons: decided once per process by the pool's configuration
/// ([`Transport::install`]), or given to one client ([`Client::with_transport`]).
#[derive(Clone)]
pub enum Transport {
    /// TLS 1.3 with raw public keys; a server's key must be in this trust file.
    Tls(Arc<TrustFile>),
    /// Plain HTTP, to loopback daemons only (a personal pool's opt-out).
    Plain,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Tls(t) => write!(f, "Tls({} keys)", t.len()),
            Transport::Plain => f.write_str("Plain"),
        }
    }
}

static INSTALLED: RwLock<Option<Transport>> = RwLock::new(None);

impl Transport {
    /// Makes `self` the transport of every [`Client::new`] in this process from now on
    /// (a daemon or command calls it once, after reading its configuration).
    pub fn install(self) {
        *INSTALLED.write().unwrap_or_else(PoisonError::into_inner) = Some(self);
    }

    /// The installed transport; plain HTTP if none was installed, which reaches only
    /// loopback daemons serving plain HTTP.
    pub fn installed() -> Transport {
        INSTALLED.read().unwrap_or_else(PoisonError::into_inner).clone().unwrap_or(Transport::Plain)
    }
}

/// An open HTTP/1.1 connection and the daemon it reached.
struct Conn {
    send: SendRequest<ReqBody>,
    dest: Destination,
    idle_since: Instant,
}

/// An HTTP client for one daemon, authenticated by its key pair (the TLS handshake
/// presents it; over plain HTTP each request is signed with it).
#[derive(Clone)]
pub struct Client {
    scheme_authority: String,
    authority: String,
    host: String,
    port: u16,
    prefix: String,
    keypair: Arc<Keypair>,
    tls: Option<(tokio_rustls::TlsConnector, rustls::pki_types::ServerName<'static>)>,
    idle: Arc<Mutex<Vec<Conn>>>,
    clock: Arc<dyn Clock>,
    timeout: Duration,
    max_response: usize,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &format_args!("{}{}", self.scheme_authority, self.prefix))
            .field("key", &self.keypair.name())
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for the daemon at `base_url`, authenticated by `keypair`, over the process's
    /// installed [`Transport`]. `base_url` is `HOST:PORT` or `http://HOST:PORT`
    /// (optionally with a path prefix); the transport, not the scheme, decides between
    /// TLS and plain HTTP. `https://` insists on TLS.
    pub fn new(base_url: &str, keypair: Arc<Keypair>) -> Result<Client, ClientError> {
        Client::with_transport(base_url, keypair, &Transport::installed())
    }

    /// A client over `transport`, accepting over TLS a server with a daemon role
    /// ([`tls::DAEMON_ROLES`]).
    pub fn with_transport(
        base_url: &str,
        keypair: Arc<Keypair>,
        transport: &Transport,
    ) -> Result<Client, ClientError> {
        Client::expecting(base_url, keypair, transport, tls::DAEMON_ROLES)
    }

    /// A client over `transport` that accepts over TLS only a server whose key the
    /// trust file gives one of `roles`.
    pub fn expecting(
        base_url: &str,
        keypair: Arc<Keypair>,
        transport: &Transport,
        roles: &[Role],
    ) -> Result<Client, ClientError> {
        let bad = |why: String| ClientError {
            method: None,
            url: base_url.to_string(),
            kind: ClientErrorKind::BadUrl(why),
        };
        let (insist_tls, rest) = if let Some(r) = base_url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = base_url.strip_prefix("http://") {
            (false, r)
        } else if base_url.contains("://") {
            return Err(bad("expected HOST:PORT or http://HOST:PORT".into()));
        } else {
            (false, base_url)
        };
        let uri: Uri =
            format!("http://{rest}").parse().map_err(|e| bad(format!("not a URL ({e})")))?;
        let auth = uri.authority().ok_or_else(|| bad("no host".into()))?;
        let authority = auth.to_string();
        let port = auth.port_u16().ok_or_else(|| bad("no port: expected HOST:PORT".into()))?;
        let host = auth.host().trim_start_matches('[').trim_end_matches(']').to_string();
        if uri.query().is_some() {
            return Err(bad("a base URL has no query".into()));
        }
        let prefix = uri.path().trim_end_matches('/').to_string();
        let tls = match transport {
            Transport::Plain if insist_tls => {
                return Err(bad("https:// needs TLS, but this process uses plain HTTP".into()));
            }
            Transport::Plain => {
                if !crate::serve::is_loopback_authority(&authority, port) {
                    return Err(ClientError {
                        method: None,
                        url: base_url.to_string(),
                        kind: ClientErrorKind::PlainNotLoopback(authority),
                    });
                }
                None
            }
            Transport::Tls(trust) => {
                let config = tls::client_config(&keypair, trust.clone(), roles)
                    .map_err(|e| bad(format!("TLS configuration: {e}")))?;
                let name =
                    rustls::pki_types::ServerName::try_from(host.clone()).unwrap_or_else(|_| {
                        rustls::pki_types::ServerName::try_from("andes.invalid")
                            .expect("a valid DNS name")
                    });
                Some((tokio_rustls::TlsConnector::from(config), name))
            }
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        Ok(Client {
            scheme_authority: format!("{scheme}://{authority}"),
            authority,
            host,
            port,
            prefix,
            keypair,
            tls,
            idle: Arc::new(Mutex::new(Vec::new())),
            clock: Arc::new(SystemClock),
            timeout: DEFAULT_TIMEOUT,
            max_response: DEFAULT_MAX_RESPONSE,
        })
    }

    /// Signs with the time of `clock` instead of the system's.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Bounds the time of a whole exchange (default [`DEFAULT_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Bounds the response body read (default [`DEFAULT_MAX_RESPONSE`]).
    pub fn with_max_response(mut self, bytes: usize) -> Self {
        self.max_response = bytes;
        self
    }

    /// The key pair the client is authenticated by (presented in the TLS handshake,
    /// or signing each request over plain HTTP).
    pub fn keypair(&self) -> &Keypair {
        &self.keypair
    }

    /// Whether this client speaks TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}{}", self.scheme_authority, self.prefix, path)
    }

    fn error(&self, method: &Method, path: &str, kind: ClientErrorKind) -> ClientError {
        ClientError { method: Some(method.clone()), url: self.url(path), kind }
    }

    /// A ready connection: an idle one of the pool, else a new one. The flag tells
    /// whether it was pooled (a request on it may find it closed by the server).
    async fn checkout(&self) -> Result<(Conn, bool), ClientErrorKind> {
        loop {
            let c = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
            let Some(mut c) = c else { break };
            if c.send.is_closed() || c.idle_since.elapsed() >= POOL_IDLE {
                continue;
            }
            if c.send.ready().await.is_ok() {
                return Ok((c, true));
            }
        }
        Ok((self.connect().await?, false))
    }

    fn checkin(&self, mut c: Conn) {
        if c.send.is_closed() {
            return;
        }
        c.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|c| !c.send.is_closed() && c.idle_since.elapsed() < POOL_IDLE);
        if idle.len() < POOL_MAX_IDLE {
            idle.push(c);
        }
    }

    async fn connect(&self) -> Result<Conn, ClientErrorKind> {
        let setup = async {
            let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(|e| self.classify_io(e))?;
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("TCP_NODELAY: {e}");
            }
            match &self.tls {
                None => {
                    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                        .await
                        .map_err(|e| ClientErrorKind::Connect(e.to_string()))?;
                    tokio::spawn(async move {
                        if let Err(e) = conn.await {
                            tracing::debug!("connection: {e}");
                        }
                    });
                    Ok(Conn {
                        send,
                        dest: Destination::Addr(self.authority.clone()),
                        idle_since: Instant::now(),
                    })
                }
                Some((connector, name)) => {
                    let stream = connector
                        .connect(name.clone(), tcp)
                        .await
                        .map_err(|e| ClientErrorKind::Connect(format!("TLS: {}", chain(&e))))?;
                    let key = tls::peer_key(stream.get_ref().1).ok_or_else(|| {
                        ClientErrorKind::Connect("TLS: the server presented no key".into())
                    })?;
                    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .map_err(|e| ClientErrorKind::Connect(e.to_string()))?;
                    tokio::spawn(async move {
                        if let Err(e) = conn.await {
                            tracing::debug!("connection: {e}");
                        }
                    });
                    Ok(Conn { send, dest: Destination::Key(key), idle_since: Instant::now() })
                }
            }
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, setup).await {
            Ok(r) => r,
            Err(_) => Err(ClientErrorKind::Connect(format!(
                "no connection to {} within {CONNECT_TIMEOUT:?}",
                self.authority
            ))),
        }
    }

    fn classify_io(&self, e: std::io::Error) -> ClientErrorKind {
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            ClientErrorKind::Refused(self.authority.clone())
        } else {
            ClientErrorKind::Connect(format!("{}: {e}", self.authority))
        }
    }

    /// The request for `path` (starting with `/`, relative to the base URL, with its
    /// query if any) to the daemon `dest`, signed if its connection is plain HTTP.
    fn build(
        &self,
        method: &Method,
        path: &str,
        body: &Bytes,
        dest: &Destination,
    ) -> Result<http::Request<Full<Bytes>>, ClientErrorKind> {
        let req = self.build_signed(method, path, dest, |k, d, m, p, ts| {
            SignedHeaders::sign(k, d, m, p, body, ts)
        })?;
        let mut req = req.map(|()| Full::new(body.clone()));
        let h = req.headers_mut();
        if !body.is_empty() {
            h.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
        }
        h.insert(header::ACCEPT, header::HeaderValue::from_static("application/json"));
        Ok(req)
    }

    /// The request head for `path` (starting with `/`), signed for `dest` by `sign`
    /// (given the key pair, destination, method, signed path and timestamp) when `dest`
    /// is a plain HTTP daemon's address; over TLS the connection authenticates it.
    fn build_signed(
        &self,
        method: &Method,
        path: &str,
        dest: &Destination,
        sign: impl FnOnce(&Keypair, &Destination, &str, &str, i64) -> SignedHeaders,
    ) -> Result<http::Request<()>, ClientErrorKind> {
        if !path.starts_with('/') {
            return Err(ClientErrorKind::BadUrl("the path must start with `/`".into()));
        }
        let target = format!("{}{}", self.prefix, path);
        let uri: Uri = target.parse().map_err(|e| ClientErrorKind::BadUrl(format!("{e}")))?;
        // Over TLS the connection authenticates the request: no signature (see
        // `crate::sign`). Over plain HTTP, signed exactly as sent, as the server will
        // see it.
        let signed = match dest {
            Destination::Key(_) => None,
            Destination::Addr(_) => {
                let signed_path = uri.path_and_query().map_or("/", |p| p.as_str());
                Some(sign(&self.keypair, dest, method.as_str(), signed_path, self.clock.now()))
            }
        };
        let mut req = http::Request::new(());
        *req.method_mut() = method.clone();
        *req.uri_mut() = uri;
        let h = req.headers_mut();
        if let Some(signed) = signed {
            signed.apply(h);
        }
        if let Ok(host) = header::HeaderValue::try_from(self.authority.as_str()) {
            h.insert(header::HOST, host);
        }
        Ok(req)
    }

    /// Builds the request for `path` (starting with `/`, relative to the base URL,
    /// with its query if any), without sending it: over plain HTTP signed for the
    /// daemon this client reaches; over TLS unsigned, for a connection of this
    /// client's key to authenticate (see [`crate::sign`]).
    pub async fn prepare(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<http::Request<Full<Bytes>>, ClientError> {
        let made = async {
            let (conn, _) = self.checkout().await?;
            let req = self.build(&method, path, &body, &conn.dest);
            self.checkin(conn);
            req
        };
        match tokio::time::timeout(self.timeout, made).await {
            Ok(r) => r.map_err(|k| self.error(&method, path, k)),
            Err(_) => Err(self.error(&method, path, ClientErrorKind::Timeout(self.timeout))),
        }
    }

    /// Sends a request (normally from [`Client::prepare`]) as it is and reads the
    /// answer.
    pub async fn send(&self, req: http::Request<Full<Bytes>>) -> Result<Response, ClientError> {
        let method = req.method().clone();
        let path = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_string();
        let path = path.strip_prefix(&self.prefix).unwrap_or(&path).to_string();
        let exchange = async {
            let (conn, _) = self.checkout().await?;
            self.exchange(conn, req).await.map_err(|(k, _)| k)
        };
        self.finish(&method, &path, exchange).await
    }

    async fn finish(
        &self,
        method: &Method,
        path: &str,
        exchange: impl Future<Output = Result<Response, ClientErrorKind>>,
    ) -> Result<Response, ClientError> {
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(kind)) => Err(self.error(method, path, kind)),
            Err(_) => Err(self.error(method, path, ClientErrorKind::Timeout(self.timeout))),
        }
    }

    /// One request on `conn`. On failure, whether the request certainly never reached
    /// the server (so sending it again cannot do anything twice).
    async fn exchange(
        &self,
        conn: Conn,
        req: http::Request<Full<Bytes>>,
    ) -> Result<Response, (ClientErrorKind, bool)> {
        let (conn, resp) = self.start(conn, req.map(whole)).await?;
        let status = resp.status();
        let body = match Limited::new(resp.into_body(), self.max_response).collect().await {
            Ok(c) => c.to_bytes(),
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                return Err((ClientErrorKind::TooLarge(self.max_response), false));
            }
            Err(e) => return Err((ClientErrorKind::Http(e.to_string()), false)),
        };
        self.checkin(conn);
        Ok(Response { status, body })
    }

    /// Sends a request on `conn` and returns the response's head with the body unread.
    /// On failure, whether the request certainly never reached the server.
    async fn start(
        &self,
        mut conn: Conn,
        req: http::Request<ReqBody>,
    ) -> Result<(Conn, http::Response<hyper::body::Incoming>), (ClientErrorKind, bool)> {
        let resp = match conn.send.try_send_request(req).await {
            Ok(r) => r,
            Err(mut e) => {
                // The request comes back only if it was never written.
                let unsent = e.take_message().is_some();
                let e = e.into_error();
                let text = chain(&e);
                // Over TLS 1.3 a server refuses the client's key after the client's
                // side of the handshake is done: the first request hears the alert.
                if self.tls.is_some() && text.contains("received fatal alert") {
                    return Err((
                        ClientErrorKind::Connect(format!(
                            "the daemon at {} refused this key ({} {}) in the TLS handshake \
                             ({text}): the key is not in the pool's trust file there",
                            self.authority,
                            self.keypair.name(),
                            self.keypair.public()
                        )),
                        false,
                    ));
                }
                return Err((ClientErrorKind::Http(text), unsent || e.is_canceled()));
            }
        };
        Ok((conn, resp))
    }

    /// Sends a request with a raw body (signed over plain HTTP). A request on a pooled
    /// connection that the server had closed, and which therefore never reached it, is
    /// built again and sent once more on a new connection.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<Response, ClientError> {
        let exchange = async {
            let mut retried = false;
            loop {
                let (conn, pooled) = self.checkout().await?;
                let req = self.build(&method, path, &body, &conn.dest)?;
                match self.exchange(conn, req).await {
                    Ok(r) => return Ok(r),
                    Err((_, true)) if pooled && !retried => retried = true,
                    Err((kind, _)) => return Err(kind),
                }
            }
        };
        self.finish(&method, path, exchange).await
    }

    /// Sends `method path` (with `headers` besides the signature's) with the file's
    /// contents as a streamed body (signed over
    /// its SHA-256, which is computed first: see [`crate::stream`]) and reads the
    /// answer. The file is read from its start on a blocking thread, a few chunks at
    /// a time; the transfer fails when no byte moves for the client's timeout (at
    /// least [`crate::stream::IDLE`]), not after a fixed time for the whole.
    pub async fn upload(
        &self,
        method: Method,
        path: &str,
        file: std::fs::File,
        headers: &[(&'static str, &str)],
    ) -> Result<Response, ClientError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        let err = |k: ClientErrorKind| self.error(&method, path, k);
        let mut file = file;
        let ((digest, len), file) = tokio::task::spawn_blocking(move || {
            crate::stream::file_sha256(&mut file).map(|d| (d, file))
        })
        .await
        .map_err(|e| err(ClientErrorKind::Encode(e.to_string())))?
        .map_err(|e| err(ClientErrorKind::Encode(format!("reading the file: {e}"))))?;
        let base = Instant::now();
        let progress = Arc::new(AtomicU64::new(0));
        let moved = progress.clone();
        let body = crate::stream::file_body_with(file, move || {
            moved.store(base.elapsed().as_millis() as u64, Ordering::Relaxed);
        });
        self.send_streamed(method, path, headers, digest, len, body.boxed(), base, progress).await
    }

    /// [`Client::upload`] of bytes already in memory: the same streamed request
    /// (signed over their SHA-256, no JSON, no base64), for a receiver that
    /// writes it to disk as it arrives.
    pub async fn upload_bytes(
        &self,
        method: Method,
        path: &str,
        bytes: Bytes,
        headers: &[(&'static str, &str)],
    ) -> Result<Response, ClientError> {
        let digest = crate::sign::body_digest(&bytes);
        let len = bytes.len() as u64;
        let body = whole(Full::new(bytes));
        let progress = Arc::new(std::sync::atomic::AtomicU64::new(0));
        self.send_streamed(method, path, headers, digest, len, body, Instant::now(), progress).await
    }

    /// Sends a streamed body of `len` bytes whose SHA-256 is `digest`; `progress`
    /// holds the milliseconds since `base` at which a chunk last went out.
    #[allow(clippy::too_many_arguments)]
    async fn send_streamed(
        &self,
        method: Method,
        path: &str,
        headers: &[(&'static str, &str)],
        digest: [u8; 32],
        len: u64,
        body: ReqBody,
        base: Instant,
        progress: Arc<std::sync::atomic::AtomicU64>,
    ) -> Result<Response, ClientError> {
        use std::sync::atomic::Ordering;
        let err = |k: ClientErrorKind| self.error(&method, path, k);
        let exchange = async {
            // A fresh connection: a streamed body cannot be sent again on another
            // if a pooled one turns out closed.
            let conn = self.connect().await.map_err(|k| (k, false))?;
            let mut req = self
                .build_signed(&method, path, &conn.dest, |k, d, m, p, ts| {
                    SignedHeaders::sign_digest(k, d, m, p, &digest, ts)
                })
                .map_err(|k| (k, false))?;
            let h = req.headers_mut();
            h.insert(
                crate::sign::BODY_SHA256,
                header::HeaderValue::try_from(hex::encode(digest)).expect("hex"),
            );
            h.insert(header::CONTENT_LENGTH, header::HeaderValue::from(len));
            for (name, value) in headers {
                let v = header::HeaderValue::try_from(*value)
                    .map_err(|e| (ClientErrorKind::BadUrl(format!("header {name}: {e}")), false))?;
                h.insert(*name, v);
            }
            h.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/octet-stream"),
            );
            let (conn, resp) = self.start(conn, req.map(|_| body)).await.map_err(|(k, sent)| {
                match k {
                    // The daemon answered (a refusal) and closed before taking it all.
                    ClientErrorKind::Http(e) if e.contains("writing a body") => (
                        ClientErrorKind::Http(format!(
                            "the daemon closed the connection before the whole {len}-byte \
                             file was sent: it refuses a file it cannot take ({e})"
                        )),
                        sent,
                    ),
                    k => (k, sent),
                }
            })?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), self.max_response)
                .collect()
                .await
                .map_err(|e| (ClientErrorKind::Http(e.to_string()), false))?
                .to_bytes();
            self.checkin(conn);
            Ok::<_, (ClientErrorKind, bool)>(Response { status, body })
        };
        let patience = self.timeout.max(crate::stream::IDLE);
        let watchdog = async {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let last = Duration::from_millis(progress.load(Ordering::Relaxed));
                if base.elapsed().saturating_sub(last) > patience {
                    return;
                }
            }
        };
        tokio::select! {
            r = exchange => r.map_err(|(k, _)| err(k)),
            () = watchdog => Err(err(ClientErrorKind::Transfer(
                crate::stream::StreamError::Stalled(patience),
            ))),
        }
    }

    /// `POST path` with `value` as JSON, and the answer's body written to `file` as
    /// it arrives (at most `limit` bytes, no pause longer than
    /// [`crate::stream::IDLE`]). Returns what was written (length and SHA-256, for
    /// the caller to compare with the digest it expects) and the file.
    pub async fn download<T: Serialize + ?Sized>(
        &self,
        path: &str,
        value: &T,
        file: std::fs::File,
        limit: u64,
    ) -> Result<(crate::stream::Written, std::fs::File), ClientError> {
        let method = Method::POST;
        let err = |k: ClientErrorKind| self.error(&method, path, k);
        let body: Bytes = serde_json::to_vec(value)
            .map_err(|e| err(ClientErrorKind::Encode(e.to_string())))?
            .into();
        let head = async {
            let mut retried = false;
            loop {
                let (conn, pooled) = self.checkout().await?;
                let req = self.build(&method, path, &body, &conn.dest)?;
                match self.start(conn, req.map(whole)).await {
                    Ok(r) => return Ok(r),
                    Err((_, true)) if pooled && !retried => retried = true,
                    Err((kind, _)) => return Err(kind),
                }
            }
        };
        let (conn, resp) = match tokio::time::timeout(self.timeout, head).await {
            Ok(r) => r.map_err(err)?,
            Err(_) => return Err(err(ClientErrorKind::Timeout(self.timeout))),
        };
        let status = resp.status();
        if !status.is_success() {
            let body = Limited::new(resp.into_body(), 64 << 10)
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            let r = Response { status, body };
            let reason = r.error_reason().unwrap_or_else(|| {
                String::from_utf8_lossy(&r.body[..r.body.len().min(200)]).into_owned()
            });
            return Err(err(ClientErrorKind::Status { status, reason }));
        }
        let written = crate::stream::write_body(resp.into_body(), file, limit)
            .await
            .map_err(|e| err(ClientErrorKind::Transfer(e)))?;
        self.checkin(conn);
        Ok(written)
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Result<Response, ClientError> {
        self.request(Method::GET, path, Bytes::new()).await
    }

    /// `POST path` with `value` as JSON.
    pub async fn post_json<T: Serialize + ?Sized>(
        &self,
        path: &str,
        value: &T,
    ) -> Result<Response, ClientError> {
        let body = serde_json::to_vec(value)
            .map_err(|e| self.error(&Method::POST, path, ClientErrorKind::Encode(e.to_string())))?;
        self.request(Method::POST, path, body.into()).await
    }

    /// Calls `method path` with an optional JSON body and decodes a successful answer
    /// as `R`; an error status becomes [`ClientErrorKind::Status`] with the daemon's
    /// reason.
    pub async fn call<B: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<R, ClientError> {
        let bytes = match body {
            None => Bytes::new(),
            Some(b) => serde_json::to_vec(b)
                .map_err(|e| self.error(&method, path, ClientErrorKind::Encode(e.to_string())))?
                .into(),
        };
        let resp = self.request(method.clone(), path, bytes).await?;
        if !resp.status.is_success() {
            let reason = resp.error_reason().unwrap_or_else(|| {
                String::from_utf8_lossy(&resp.body[..resp.body.len().min(200)]).into_owned()
            });
            return Err(self.error(
                &method,
                path,
                ClientErrorKind::Status { status: resp.status, reason },
            ));
        }
        resp.json().map_err(|e| self.error(&method, path, ClientErrorKind::BadJson(e.to_string())))
    }
}

/// An error and its sources, as one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        source = s.source();
    }
    text
}
