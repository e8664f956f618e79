//! The one way every andes daemon serves its API: TLS with the pool's raw public keys
//! (or plain HTTP on the loopback interface when the pool opts out), HTTP/1.1 through
//! hyper, and the limits that keep slow or idle peers from exhausting a daemon.
//!
//! * **Connections** ([`crate::admission`]): a connection waits until it proves a
//!   key the trust file knows (its TLS handshake, or over plain HTTP its first signed
//!   request); as many wait at once as [`Limits::max_connections`] (at least 64), and
//!   a new one takes the place of the oldest waiting. At most
//!   [`Limits::max_connections`] are established, at most half of them one key's.
//!   So a peer with no key cannot keep anyone out, nor one key everyone else.
//! * **TLS handshake**: must finish within [`Limits::handshake_timeout`].
//! * **Headers**: a request's head must arrive within [`Limits::header_read_timeout`]
//!   (hyper's timer). It runs from the moment the connection is ready for a request,
//!   so it also closes a keep-alive connection left idle that long.
//! * **Idle**: a connection on which no byte moves either way for
//!   [`Limits::idle_timeout`] while no handler runs for it (a peer that stops reading
//!   its answer) is closed.
//! * **Bodies**: [`crate::Auth`] reads a body within its deadline
//!   ([`crate::Auth::set_body_timeout`]) and limit.
//! * **Per key**: request rates and replay-cache shares ([`crate::VerifierConfig`]).
//!
//! Every request reaches the router with a [`ConnectionInfo`] extension: the TLS
//! identities the authentication layer binds the request's signature to.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tower_service::Service;

use crate::admission::{Admission, AdmissionLimits, Ticket};
use crate::auth::Auth;
pub use crate::connection::{ConnectionInfo, is_loopback_authority};
use crate::key::{Keypair, PublicKey};
use crate::tls::{self, TrustSource};

/// The limits of [`Server`] (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once (default 1,024).
    pub max_connections: usize,
    /// Time a TLS handshake may take (default 10 s).
    pub handshake_timeout: Duration,
    /// Time a request's head may take to arrive, counted from when the connection is
    /// ready for it (default 30 s).
    pub header_read_timeout: Duration,
    /// Time with no byte moving either way, while no handler runs, before the
    /// connection is closed (default 60 s).
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Why a daemon cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Plain HTTP was asked for on an address other than loopback.
    #[error(
        "plain HTTP is only for a personal pool on the loopback interface, but this daemon \
         listens on {addr}: listen on 127.0.0.1, or remove USE_PLAINTEXT_HTTP from the \
         configuration to use TLS"
    )]
    PlainNotLoopback {
        /// The address.
        addr: SocketAddr,
    },
    /// The TLS configuration could not be built.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// The listener has no local address.
    #[error("the listening socket: {0}")]
    Io(#[from] io::Error),
}

/// A daemon's listening socket with its transport and limits.
pub struct Server {
    listener: TcpListener,
    addr: SocketAddr,
    tls: Option<(tokio_rustls::TlsAcceptor, PublicKey)>,
    limits: Limits,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("tls_key", &self.tls.as_ref().map(|t| t.1))
            .field("limits", &self.limits)
            .finish()
    }
}

impl Server {
    /// Serves TLS on `listener`, presenting `keypair` and accepting clients whose key
    /// `auth`'s trust file knows (the trust file in force at each handshake).
    pub fn tls(
        listener: TcpListener,
        keypair: &Keypair,
        auth: &Auth,
    ) -> Result<Server, ServeError> {
        let a = auth.clone();
        let trust = TrustSource::Live(Arc::new(move || a.verifier().trust()));
        let config = tls::server_config(keypair, trust)?;
        let addr = listener.local_addr()?;
        Ok(Server {
            listener,
            addr,
            tls: Some((tokio_rustls::TlsAcceptor::from(config), keypair.public())),
            limits: Limits::default(),
        })
    }

    /// Serves plain HTTP on `listener`, which must be bound to a loopback address.
    pub fn plain(listener: TcpListener) -> Result<Server, ServeError> {
        let addr = listener.local_addr()?;
        if !addr.ip().is_loopback() {
            return Err(ServeError::PlainNotLoopback { addr });
        }
        Ok(Server { listener, addr, tls: None, limits: Limits::default() })
    }

    /// Serves plain HTTP on `listener` whatever its address. Never for the pool's
    /// signed API, whose plain HTTP stays on loopback ([`Server::plain`]): only for
    /// pages that carry their own login (`andes dashboard --listen` on an address its
    /// user named), which travel in clear.
    pub fn plain_anywhere(listener: TcpListener) -> Result<Server, ServeError> {
        let addr = listener.local_addr()?;
        Ok(Server { listener, addr, tls: None, limits: Limits::default() })
    }

    /// TLS with `keypair` when `plaintext` is false, else plain HTTP (loopback only).
    pub fn new(
        listener: TcpListener,
        plaintext: bool,
        keypair: &Keypair,
        auth: &Auth,
    ) -> Result<Server, ServeError> {
        if plaintext { Server::plain(listener) } else { Server::tls(listener, keypair, auth) }
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The address bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether connections are TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Serves `app` until `shutdown` completes; then stops accepting, lets each
    /// connection finish the request it is on, and returns once all have closed.
    pub async fn serve(
        self,
        app: Router,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        let Server { listener, addr, tls, limits } = self;
        let admission = Admission::new(AdmissionLimits::for_connections(limits.max_connections));
        let (closing_tx, closing_rx) = watch::channel(false);
        let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let (tcp, remote) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of descriptors and the like: wait rather than spin.
                        tracing::warn!("accepting a connection on {addr}: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("TCP_NODELAY: {e}");
            }
            let app = app.clone();
            let tls = tls.clone();
            let closing = closing_rx.clone();
            let alive = alive_tx.clone();
            let ticket = admission.arrive();
            let place = ticket.clone();
            let task = tokio::spawn(async move {
                let _alive = alive;
                let mut info = ConnectionInfo {
                    peer_key: None,
                    local_key: None,
                    local_addr: addr,
                    remote_addr: remote,
                };
                match tls {
                    None => serve_connection(tcp, info, ticket, app, limits, closing).await,
                    Some((acceptor, key)) => {
                        let stream = match tokio::time::timeout(
                            limits.handshake_timeout,
                            acceptor.accept(tcp),
                        )
                        .await
                        {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::info!("TLS handshake with {remote} refused: {e}");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!("TLS handshake with {remote}: no answer in time");
                                return;
                            }
                        };
                        info.peer_key = tls::peer_key(stream.get_ref().1);
                        info.local_key = Some(key);
                        if info.peer_key.is_none() {
                            tracing::info!("TLS connection from {remote} without a client key");
                            return;
                        }
                        if !ticket.establish(info.peer_key) {
                            tracing::info!(
                                "closing a connection from {remote}: the daemon, or its key, \
                                 holds as many as it may"
                            );
                            return;
                        }
                        serve_connection(stream, info, ticket, app, limits, closing).await
                    }
                }
            });
            place.set_abort(task.abort_handle());
        }
        drop(listener);
        let _ = closing_tx.send(true);
        drop(alive_tx);
        // Every connection task holds a sender: this ends when the last one has.
        let _ = alive_rx.recv().await;
        Ok(())
    }
}

/// Milliseconds since a fixed instant: a connection's last activity.
fn now_ms(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_millis()).unwrap_or(u64::MAX)
}

async fn serve_connection<S>(
    stream: S,
    info: ConnectionInfo,
    ticket: Ticket,
    app: Router,
    limits: Limits,
    mut closing: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let base = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let busy = Arc::new(AtomicUsize::new(0));
    let io = TokioIo::new(Activity { inner: stream, last: last.clone(), base });
    let handler_busy = busy.clone();
    let remote = info.remote_addr;
    let service = hyper::service::service_fn(move |mut req: http::Request<Incoming>| {
        req.extensions_mut().insert(info.clone());
        req.extensions_mut().insert(ticket.clone());
        let mut app = app.clone();
        let busy = Busy::enter(&handler_busy);
        async move {
            let resp = app.call(req.map(Body::new)).await;
            drop(busy);
            resp.map_err(|e: Infallible| match e {})
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    let mut shutting_down = *closing.borrow();
    if shutting_down {
        conn.as_mut().graceful_shutdown();
    }
    let idle = limits.idle_timeout;
    let mut deadline = tokio::time::Instant::now() + idle;
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("connection from {remote}: {e}");
                }
                return;
            }
            changed = closing.changed(), if !shutting_down => {
                if changed.is_err() || *closing.borrow() {
                    shutting_down = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                let now = now_ms(base);
                let quiet = Duration::from_millis(now.saturating_sub(last.load(Ordering::Relaxed)));
                if busy.load(Ordering::Relaxed) > 0 {
                    deadline = tokio::time::Instant::now() + idle;
                } else if quiet >= idle {
                    tracing::debug!("closing a connection idle for {quiet:?}");
                    return;
                } else {
                    deadline = tokio::time::Instant::now() + (idle - quiet);
                }
            }
        }
    }
}

/// Counts a handler running for a connection while it lives.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn enter(n: &Arc<AtomicUsize>) -> Busy {
        n.fetch_add(1, Ordering::Relaxed);
        Busy(n.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream that notes when a byte last moved either way.
struct Activity<S> {
    inner: S,
    last: Arc<AtomicU64>,
    base: Instant,
}

impl<S> Activity<S> {
    fn touch(&self) {
        self.last.store(now_ms(self.base), Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Activity<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Activity<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_authorities() {
        for a in ["127.0.0.1:80", "localhost:80", "LOCALHOST:80", "[::1]:80", "127.3.4.5:80"] {
            assert!(is_loopback_authority(a, 80), "{a}");
        }
        for a in ["127.0.0.1:81", "10.0.0.1:80", "example.org:80", "127.0.0.1", "[::2]:80", ""] {
            assert!(!is_loopback_authority(a, 80), "{a}");
        }
    }
}
