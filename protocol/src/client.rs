//! The HTTP client every andes part uses to call another: it signs each request and
//! returns the status and the JSON body.
//!
//! Built on hyper 1 and hyper-util's client (the stack axum's server already brings
//! in): plain HTTP/1.1, because the requests are authenticated by their signatures
//! rather than by TLS, and no second HTTP stack or TLS library is compiled in.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ErrorBody;
use crate::key::Keypair;
use crate::sign::SignedHeaders;
use crate::verify::{Clock, SystemClock};

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
    /// Connecting failed otherwise.
    #[error("cannot connect: {0}")]
    Connect(String),
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
}

/// A failed call: which URL, and why.
#[derive(Debug, thiserror::Error)]
#[error("{}{url}: {kind}", method.as_ref().map(|m| format!("{m} ")).unwrap_or_default())]
pub struct ClientError {
    /// The method (none for an error making the client).
    pub method: Option<Method>,
    /// The URL called.
    pub url: String,
    /// What went wrong.
    #[source]
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

/// A signing HTTP client for one daemon.
#[derive(Clone)]
pub struct Client {
    scheme_authority: String,
    authority: String,
    prefix: String,
    keypair: Arc<Keypair>,
    http: HyperClient<HttpConnector, Full<Bytes>>,
    clock: Arc<dyn Clock>,
    timeout: Duration,
    max_response: usize,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &format_args!("{}{}", self.scheme_authority, self.prefix))
            .field("key", &self.keypair.name())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for the daemon at `base_url` (`http://host:port`, optionally with a path
    /// prefix), signing with `keypair`. Must be used inside a tokio runtime.
    pub fn new(base_url: &str, keypair: Arc<Keypair>) -> Result<Client, ClientError> {
        let bad = |why: String| ClientError {
            method: None,
            url: base_url.to_string(),
            kind: ClientErrorKind::BadUrl(why),
        };
        let uri: Uri = base_url.parse().map_err(|e| bad(format!("not a URL ({e})")))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(bad(
                    "https is not supported: andes requests are signed, use http://".into()
                ));
            }
            _ => return Err(bad("expected http://HOST:PORT".into())),
        }
        let authority = uri.authority().ok_or_else(|| bad("no host".into()))?.to_string();
        if uri.query().is_some() {
            return Err(bad("a base URL has no query".into()));
        }
        let prefix = uri.path().trim_end_matches('/').to_string();
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        connector.set_nodelay(true);
        let http = HyperClient::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(connector);
        Ok(Client {
            scheme_authority: format!("http://{authority}"),
            authority,
            prefix,
            keypair,
            http,
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

    /// The key pair requests are signed with.
    pub fn keypair(&self) -> &Keypair {
        &self.keypair
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}{}", self.scheme_authority, self.prefix, path)
    }

    fn error(&self, method: &Method, path: &str, kind: ClientErrorKind) -> ClientError {
        ClientError { method: Some(method.clone()), url: self.url(path), kind }
    }

    /// Builds the signed request for `path` (starting with `/`, relative to the base
    /// URL, with its query if any), without sending it.
    pub fn prepare(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<http::Request<Full<Bytes>>, ClientError> {
        if !path.starts_with('/') {
            return Err(self.error(
                &method,
                path,
                ClientErrorKind::BadUrl("the path must start with `/`".into()),
            ));
        }
        let uri: Uri = self
            .url(path)
            .parse()
            .map_err(|e| self.error(&method, path, ClientErrorKind::BadUrl(format!("{e}"))))?;
        // Sign exactly what is sent, as the server will see it.
        let signed_path = uri.path_and_query().map_or("/", |p| p.as_str());
        let signed = SignedHeaders::sign(
            &self.keypair,
            method.as_str(),
            signed_path,
            &body,
            self.clock.now(),
        );
        let mut req = http::Request::new(Full::new(body.clone()));
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        let h = req.headers_mut();
        signed.apply(h);
        if !body.is_empty() {
            h.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
        }
        h.insert(header::ACCEPT, header::HeaderValue::from_static("application/json"));
        Ok(req)
    }

    /// Sends a request (normally from [`Client::prepare`]) and reads the answer.
    pub async fn send(&self, req: http::Request<Full<Bytes>>) -> Result<Response, ClientError> {
        let method = req.method().clone();
        let path = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_string();
        let path = path.strip_prefix(&self.prefix).unwrap_or(&path).to_string();
        let exchange = async {
            let resp = self.http.request(req).await.map_err(|e| self.classify(e))?;
            let status = resp.status();
            let body = match Limited::new(resp.into_body(), self.max_response).collect().await {
                Ok(c) => c.to_bytes(),
                Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                    return Err(ClientErrorKind::TooLarge(self.max_response));
                }
                Err(e) => return Err(ClientErrorKind::Http(e.to_string())),
            };
            Ok(Response { status, body })
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(kind)) => Err(self.error(&method, &path, kind)),
            Err(_) => Err(self.error(&method, &path, ClientErrorKind::Timeout(self.timeout))),
        }
    }

    fn classify(&self, e: hyper_util::client::legacy::Error) -> ClientErrorKind {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        let mut innermost = e.to_string();
        while let Some(s) = source {
            if s.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
            {
                return ClientErrorKind::Refused(self.authority.clone());
            }
            innermost = s.to_string();
            source = s.source();
        }
        if e.is_connect() {
            ClientErrorKind::Connect(innermost)
        } else {
            ClientErrorKind::Http(innermost)
        }
    }

    /// Signs and sends a request with a raw body.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<Response, ClientError> {
        let req = self.prepare(method, path, body)?;
        self.send(req).await
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
