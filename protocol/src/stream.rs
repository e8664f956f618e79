//! Files that move as streams: big inputs, outputs, modules and snapshots never
//! travel inside a JSON body (whole in memory, base64, under the body limit) but as
//! the raw body of a request or a response, written to disk as it arrives.
//!
//! A streamed request is signed like any other, over the SHA-256 of its body, which
//! the client computes first and sends in [`BODY_SHA256`]. The server checks the
//! signature, the key and the nonce **before** it reads a byte of the body (see
//! [`crate::Auth`]); the handler takes the body with [`SignedStream`] and writes it
//! with [`SignedStream::write_to`], which hashes what arrives and succeeds only if it
//! is exactly the body that was signed, within the handler's size limit, with no
//! pause longer than [`IDLE`]. A streamed response (`Client::download`) is written
//! the same way; its integrity is the connection's (TLS), and callers compare its
//! digest with the one the message that named it gave.
//!
//! Hashing and writing run on one blocking thread per transfer, fed through a small
//! bounded channel, so a transfer holds a few chunks in memory whatever its size.

use std::io::{Read, Seek, SeekFrom, Write};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequest, Request};
use bytes::Bytes;
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};

use crate::error::AuthError;
pub use crate::sign::BODY_SHA256;

/// The longest pause in a transfer (no byte moved) before it is given up.
pub const IDLE: Duration = Duration::from_secs(60);
/// Bytes read from a file per chunk of a streamed body.
pub const CHUNK: usize = 256 << 10;
/// Chunks in flight between the network and the blocking thread of a transfer.
const IN_FLIGHT: usize = 8;

/// Why a transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// More bytes than the receiver takes.
    #[error("the file is larger than the {limit} bytes this transfer takes")]
    TooLarge {
        /// The limit, bytes.
        limit: u64,
    },
    /// Nothing arrived for [`IDLE`].
    #[error("the transfer stalled: no data for {} s", .0.as_secs())]
    Stalled(Duration),
    /// The bytes are not the ones the sender signed or named.
    #[error("the file's SHA-256 is {got}, not the {expected} it was sent as")]
    Digest {
        /// The digest announced.
        expected: String,
        /// The digest of what arrived.
        got: String,
    },
    /// The connection failed mid-transfer.
    #[error("the transfer was cut: {0}")]
    Body(String),
    /// Writing or reading the file failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl From<StreamError> for AuthError {
    fn from(e: StreamError) -> AuthError {
        match e {
            StreamError::TooLarge { limit } => {
                AuthError::TooLarge { limit: usize::try_from(limit).unwrap_or(usize::MAX) }
            }
            StreamError::Stalled(d) => AuthError::BodyTimeout { secs: d.as_secs().max(1) },
            other => AuthError::BodyRead(other.to_string()),
        }
    }
}

/// Parses 64 hex digits (either case).
pub fn parse_hex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

/// Parses a digest as the API names it, `sha256:<64 hex digits>`.
pub fn parse_digest(digest: &str) -> Option<[u8; 32]> {
    parse_hex(digest.strip_prefix("sha256:")?)
}

/// The SHA-256 and length of a file from its start; leaves it at its start.
pub fn file_sha256(file: &mut std::fs::File) -> std::io::Result<([u8; 32], u64)> {
    file.seek(SeekFrom::Start(0))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut len = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        len += n as u64;
    }
    file.seek(SeekFrom::Start(0))?;
    Ok((h.finalize().into(), len))
}

/// What was written: its length and SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// Bytes.
    pub len: u64,
    /// SHA-256.
    pub sha256: [u8; 32],
}

/// Writes a body to `file` on a blocking thread, hashing it, at most `limit` bytes,
/// failing if no frame comes for [`IDLE`]. The file is flushed, not synced: the
/// caller syncs what it keeps.
pub async fn write_body<B>(
    mut body: B,
    file: std::fs::File,
    limit: u64,
) -> Result<(Written, std::fs::File), StreamError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(IN_FLIGHT);
    let writer = tokio::task::spawn_blocking(move || {
        let mut file = file;
        let mut out = std::io::BufWriter::with_capacity(CHUNK, &mut file);
        let mut h = Sha256::new();
        let mut len = 0u64;
        while let Some(chunk) = rx.blocking_recv() {
            h.update(&chunk);
            len += chunk.len() as u64;
            out.write_all(&chunk)?;
        }
        out.flush()?;
        drop(out);
        Ok::<_, std::io::Error>((Written { len, sha256: h.finalize().into() }, file))
    });
    let mut got = 0u64;
    let pumped = async {
        loop {
            let frame = match tokio::time::timeout(IDLE, body.frame()).await {
                Err(_) => return Err(StreamError::Stalled(IDLE)),
                Ok(None) => return Ok(()),
                Ok(Some(Err(e))) => return Err(StreamError::Body(e.to_string())),
                Ok(Some(Ok(f))) => f,
            };
            let Ok(data) = frame.into_data() else { continue };
            got += data.len() as u64;
            if got > limit {
                return Err(StreamError::TooLarge { limit });
            }
            if tx.send(data).await.is_err() {
                // The writer stopped: its error says why.
                return Ok(());
            }
        }
    }
    .await;
    drop(tx);
    let written = writer.await.map_err(|e| StreamError::Io(std::io::Error::other(e)))?;
    pumped?;
    Ok(written?)
}

/// A body fed by a channel of chunks (a file read on a blocking thread).
pub struct FileBody(tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>);

impl std::fmt::Debug for FileBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileBody")
    }
}

impl http_body::Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        self.0.poll_recv(cx).map(|c| c.map(|r| r.map(http_body::Frame::data)))
    }
}

/// The file's contents from where it stands, as a body read on a blocking thread a
/// few chunks ahead of the network.
pub fn file_body(file: std::fs::File) -> FileBody {
    file_body_with(file, || {})
}

/// [`file_body`], calling `progress` after each chunk the network took.
pub fn file_body_with(mut file: std::fs::File, progress: impl Fn() + Send + 'static) -> FileBody {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        loop {
            let mut buf = vec![0u8; CHUNK];
            let n = match file.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => n,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            };
            buf.truncate(n);
            if tx.blocking_send(Ok(buf.into())).is_err() {
                return;
            }
            progress();
        }
    });
    FileBody(rx)
}

/// A 200 response whose body is the file (from where it stands), `len` bytes.
pub fn file_response(file: std::fs::File, len: u64) -> axum::response::Response {
    let mut r = axum::response::Response::new(Body::new(file_body(file)));
    r.headers_mut().insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/octet-stream"),
    );
    r
}

/// A request body to write to disk, signed over [`SignedStream::sha256`]: streamed
/// (the request carries [`BODY_SHA256`]), or a whole body the server already read
/// within its body limit.
#[derive(Debug)]
pub struct SignedStream {
    /// The SHA-256 the signature covers.
    pub sha256: [u8; 32],
    /// The length the client declared (`Content-Length`), if any.
    pub declared: Option<u64>,
    body: Body,
}

impl SignedStream {
    /// Writes the body to `file` (at most `limit` bytes; a larger declared length is
    /// refused before any byte is read) and returns the file once every byte is
    /// written and the whole is the body that was signed.
    pub async fn write_to(
        self,
        file: std::fs::File,
        limit: u64,
    ) -> Result<(u64, std::fs::File), StreamError> {
        if self.declared.is_some_and(|n| n > limit) {
            return Err(StreamError::TooLarge { limit });
        }
        let (w, file) = write_body(self.body, file, limit).await?;
        if w.sha256 != self.sha256 {
            return Err(StreamError::Digest {
                expected: hex::encode(self.sha256),
                got: hex::encode(w.sha256),
            });
        }
        Ok((w.len, file))
    }

    /// Reads the whole body into memory (at most `limit` bytes), checked against the
    /// signed digest: for things the receiver needs in memory anyway (a module).
    pub async fn into_bytes(self, limit: u64) -> Result<Bytes, StreamError> {
        if self.declared.is_some_and(|n| n > limit) {
            return Err(StreamError::TooLarge { limit });
        }
        let mut body = self.body;
        let mut buf = bytes::BytesMut::new();
        loop {
            let frame = match tokio::time::timeout(IDLE, body.frame()).await {
                Err(_) => return Err(StreamError::Stalled(IDLE)),
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(StreamError::Body(e.to_string())),
                Ok(Some(Ok(f))) => f,
            };
            if let Ok(d) = frame.into_data() {
                if (buf.len() + d.len()) as u64 > limit {
                    return Err(StreamError::TooLarge { limit });
                }
                buf.extend_from_slice(&d);
            }
        }
        let got: [u8; 32] = Sha256::digest(&buf).into();
        if got != self.sha256 {
            return Err(StreamError::Digest {
                expected: hex::encode(self.sha256),
                got: hex::encode(got),
            });
        }
        Ok(buf.freeze())
    }
}

impl<S: Send + Sync> FromRequest<S> for SignedStream {
    type Rejection = AuthError;
    async fn from_request(req: Request, _: &S) -> Result<Self, AuthError> {
        let Some(crate::extract::Streamed(sha256)) =
            req.extensions().get::<crate::extract::Streamed>().copied()
        else {
            // A whole body (within the server's body limit) does as well: it
            // was checked against its signature already.
            if let Some(crate::extract::VerifiedBody(bytes)) =
                req.extensions().get::<crate::extract::VerifiedBody>().cloned()
            {
                let sha256 = crate::sign::body_digest(&bytes);
                let declared = Some(bytes.len() as u64);
                return Ok(SignedStream { sha256, declared, body: Body::from(bytes) });
            }
            return Err(AuthError::NotAuthenticated);
        };
        let declared = req
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        Ok(SignedStream { sha256, declared, body: req.into_body() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let d: [u8; 32] = Sha256::digest(b"x").into();
        assert_eq!(parse_hex(&hex::encode(d)), Some(d));
        assert_eq!(parse_hex(&hex::encode(d).to_uppercase()), Some(d));
        assert_eq!(parse_hex("zz"), None);
        assert_eq!(parse_hex(&"g".repeat(64)), None);
    }

    #[tokio::test]
    async fn a_body_is_written_hashed_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let data = vec![7u8; 3 * CHUNK + 5];
        let body = http_body_util::Full::new(Bytes::from(data.clone()));
        let f = std::fs::File::create(dir.path().join("a")).unwrap();
        let (w, _) = write_body(body, f, 10 * CHUNK as u64).await.unwrap();
        assert_eq!(w.len, data.len() as u64);
        assert_eq!(w.sha256, <[u8; 32]>::from(Sha256::digest(&data)));
        assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), data);
        let body = http_body_util::Full::new(Bytes::from(data.clone()));
        let f = std::fs::File::create(dir.path().join("b")).unwrap();
        let e = write_body(body, f, 100).await.unwrap_err();
        assert!(matches!(e, StreamError::TooLarge { limit: 100 }), "{e}");
    }

    #[test]
    fn a_file_hashes_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"hello").unwrap();
        let mut f = std::fs::File::open(&p).unwrap();
        let mut skip = [0u8; 2];
        f.read_exact(&mut skip).unwrap();
        let (d, len) = file_sha256(&mut f).unwrap();
        assert_eq!(len, 5);
        assert_eq!(d, <[u8; 32]>::from(Sha256::digest(b"hello")));
    }
}
