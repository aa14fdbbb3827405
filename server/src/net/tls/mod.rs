//! HTTPS: the server's TLS configuration, loaded (or made) before anything
//! listens, and each connection's handshake. rustls on the [`Provider`]
//! `--tls-provider` names, safe defaults, ALPN `http/1.1`. After the
//! handshake a connection is served as a cleartext one: the queue's slices
//! go to rustls as one vectored write, encrypted without being joined.
//! What rustls holds per connection is bounded and counted by the budget
//! ([`TlsSocket`]): one record of a write always, up to [`RECORDS_HELD`]
//! while covered. Certificate files: `files.rs`, keys: `keys.rs`.

use std::path::PathBuf;

#[cfg(feature = "tls")]
use std::{io, net::SocketAddr, path::Path, sync::Arc, time::Duration};

#[cfg(feature = "tls")]
use rustls::ServerConfig;
#[cfg(feature = "tls")]
use tokio::net::TcpStream;
#[cfg(feature = "tls")]
use tokio_rustls::{server::TlsStream, TlsAcceptor};
#[cfg(feature = "tls")]
use tracing::{debug, info};

#[cfg(feature = "tls")]
mod expiry;
#[cfg(feature = "tls")]
mod files;
#[cfg(feature = "tls")]
mod keys;
mod provider;
#[cfg(feature = "self-signed")]
mod self_signed;

#[cfg(feature = "tls")]
pub use files::{MAX_CERT_LIST, MAX_PEM_BYTES};
pub use provider::Provider;

#[cfg(feature = "tls")]
use self::files::{read_chain, read_key};
#[cfg(feature = "tls")]
use self::keys::unusable_key;
#[cfg(feature = "self-signed")]
use self::self_signed::{self_signed, SelfSigned};
#[cfg(feature = "tls")]
use super::Socket;

#[cfg(feature = "tls")]
/// Encrypted bytes rustls may hold for a socket that has not taken them,
/// while the budget covers them: a 100 KiB response then leaves in one
/// socket write, where rustls's default of 64 KiB took two.
pub const RECORDS_HELD: usize = 256 * 1024;

#[cfg(feature = "tls")]
/// One TLS record on the wire at its largest: 16 KiB of plaintext, the
/// expansion TLS allows, the header.
const RECORD: usize = 16 * 1024 + 2048 + 5;

#[cfg(feature = "tls")]
/// What rustls holds per connection whatever it does, beyond the chain: a
/// handshake message (64 KiB cap, and a 4 KiB read), plaintext ahead of the
/// reader (16 KiB and a record), one record being written, its own state.
const FIXED: usize = 64 * 1024 + 4096 + 16 * 1024 + RECORD + RECORD + 8 * 1024;

/// Where the server's certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertSource {
    /// A PEM certificate chain and its PEM private key (PKCS#8, PKCS#1 or
    /// SEC1).
    Files {
        /// The certificate chain, end-entity certificate first.
        cert: PathBuf,
        /// The private key of the end-entity certificate.
        key: PathBuf,
    },
    /// A certificate for `localhost` made at start-up, its PEM written to a
    /// private directory for clients to trust (`curl --cacert`).
    SelfSigned,
}

/// The server's TLS; a self-signed certificate's file is removed when the
/// last clone is dropped.
#[cfg(feature = "tls")]
#[derive(Clone)]
pub struct Tls {
    /// Accepts handshakes.
    pub acceptor: TlsAcceptor,
    /// The crypto provider of its configuration.
    pub provider: Provider,
    /// Bytes rustls holds per connection whatever it does (`FIXED`, and
    /// the chain the server sends in each handshake).
    pub fixed_memory: usize,
    /// [`Tls::not_after`].
    not_after: Option<i64>,
    #[cfg(feature = "self-signed")]
    self_signed: Option<Arc<SelfSigned>>,
}

/// Without the `tls` feature the server serves cleartext only: there is no
/// value of this type, so a connection's `Option<&Tls>` is always `None`.
#[cfg(not(feature = "tls"))]
#[derive(Clone, Debug)]
pub enum Tls {}

#[cfg(feature = "tls")]
impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("provider", &self.provider)
            .field("fixed_memory", &self.fixed_memory)
            .field("self_signed", &self.self_signed_pem())
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// When its certificate (the chain's first) expires, in seconds since
    /// the Unix epoch, as far as its DER could be read.
    pub fn not_after(&self) -> Option<i64> {
        #[cfg(feature = "tls")]
        return self.not_after;
        #[cfg(not(feature = "tls"))]
        match *self {}
    }
}

#[cfg(feature = "tls")]
impl Tls {
    /// Where the self-signed certificate's PEM is (`curl --cacert`), for
    /// `--tls-self-signed`.
    pub fn self_signed_pem(&self) -> Option<&Path> {
        #[cfg(feature = "self-signed")]
        return self.self_signed.as_deref().map(|s| s.pem.as_path());
        #[cfg(not(feature = "self-signed"))]
        None
    }
}

/// A server built without the `tls` feature cannot serve HTTPS: the error
/// that says so, for `--tls-cert` or `--tls-self-signed`.
#[cfg(not(feature = "tls"))]
pub fn load(source: &CertSource, provider: Provider) -> Result<Tls, String> {
    let flag = match source {
        CertSource::Files { .. } => "--tls-cert",
        CertSource::SelfSigned => "--tls-self-signed",
    };
    Err(format!(
        "{flag}: HTTPS (rustls on {provider}) is not built into this server: it needs unflat-server's `tls` feature"
    ))
}

/// The server's TLS for `source`, on `provider`, or an error naming the
/// file and what is wrong with it.
#[cfg(feature = "tls")]
pub fn load(source: &CertSource, provider: Provider) -> Result<Tls, String> {
    #[cfg(feature = "self-signed")]
    let mut written = None;
    let (chain, key) = match source {
        CertSource::Files { cert, key } => (read_chain(cert)?, read_key(key)?),
        #[cfg(feature = "self-signed")]
        CertSource::SelfSigned => {
            let (chain, key, made) = self_signed()?;
            written = Some(Arc::new(made));
            (chain, key)
        }
        #[cfg(not(feature = "self-signed"))]
        CertSource::SelfSigned => {
            return Err(
                "--tls-self-signed: this server is built without the `self-signed` feature of unflat-server".into(),
            )
        }
    };
    let crypto = Arc::new(provider.crypto());
    if let CertSource::Files { key: path, .. } = source {
        if let Err(e) = crypto.key_provider.load_private_key(key.clone_key()) {
            return Err(format!(
                "--tls-key {}: {}",
                path.display(),
                unusable_key(&key, &e, provider)
            ));
        }
    }
    let chain_len: usize = chain.iter().map(|c| c.len()).sum();
    let not_after = chain.first().and_then(expiry::not_after);
    let mut config = ServerConfig::builder_with_provider(crypto)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| match source {
            CertSource::Files { cert, key } => format!(
                "--tls-cert {} and --tls-key {}: {e}",
                cert.display(),
                key.display()
            ),
            CertSource::SelfSigned => format!("the self-signed certificate: {e}"),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Tls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        provider,
        fixed_memory: FIXED + chain_len,
        not_after,
        #[cfg(feature = "self-signed")]
        self_signed: written,
    })
}

#[cfg(feature = "tls")]
/// The acceptor for `source` on `provider` (a server that keeps nothing
/// else of its TLS).
pub fn acceptor(source: &CertSource, provider: Provider) -> Result<TlsAcceptor, String> {
    load(source, provider).map(|tls| tls.acceptor)
}

#[cfg(feature = "tls")]
/// The TLS handshake of an accepted connection, within `timeout`. A client
/// that stalls it, or speaks something other than TLS, is closed and logged
/// at debug level (`None`).
pub async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    timeout: Duration,
) -> Option<TlsStream<TcpStream>> {
    let accepted = super::timers::timeout(timeout, async {
        if speaks_plain_http(&stream).await {
            refuse_plain_http(stream, peer).await;
            return None;
        }
        Some(acceptor.accept(stream).await)
    })
    .await;
    match accepted {
        Ok(None) => None,
        Ok(Some(accepted)) => handshaken(accepted, peer),
        Err(_) => {
            debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}

/// What the handshake came to.
#[cfg(feature = "tls")]
fn handshaken(
    accepted: std::io::Result<TlsStream<TcpStream>>,
    peer: SocketAddr,
) -> Option<TlsStream<TcpStream>> {
    match accepted {
        Ok(mut stream) => {
            // One record until a write's lease says more.
            stream.get_mut().1.set_buffer_limit(Some(RECORD));
            Some(stream)
        }
        Err(e) => {
            debug!(%peer, "TLS handshake failed: {e}");
            None
        }
    }
}

/// Whether a connection's first byte is a letter, as an HTTP request's
/// method begins, rather than a TLS record's type (a handshake is 22).
#[cfg(feature = "tls")]
async fn speaks_plain_http(stream: &TcpStream) -> bool {
    let mut first = [0u8; 1];
    matches!(stream.peek(&mut first).await, Ok(1) if first[0].is_ascii_alphabetic())
}

/// The answer to plain HTTP on the HTTPS port, as nginx gives one: a 400
/// in plain HTTP that says what is wrong, then the connection closed.
#[cfg(feature = "tls")]
const PLAIN_HTTP_REFUSED: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
Content-Length: 72\r\n\
Connection: close\r\n\
\r\n\
This port speaks HTTPS: send the request again with https:// (over TLS)\n";

/// Answers plain HTTP on the HTTPS port with [`PLAIN_HTTP_REFUSED`], logged
/// (a client set up wrong). What the client sent is read, up to 16 KiB, so
/// that the close does not reset the connection before the answer is read.
#[cfg(feature = "tls")]
async fn refuse_plain_http(mut stream: TcpStream, peer: SocketAddr) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    info!(%peer, "plain HTTP on the HTTPS port: answered 400");
    let mut sink = [0u8; 4096];
    let _ = stream.read(&mut sink).await;
    if stream.write_all(PLAIN_HTTP_REFUSED).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    let mut drained = 0;
    while drained < 16 * 1024 {
        match stream.read(&mut sink).await {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

#[cfg(feature = "tls")]
/// An encrypted connection after its handshake, with what its TLS costs in
/// memory.
pub struct TlsSocket {
    /// The encrypted stream.
    pub stream: TlsStream<TcpStream>,
    /// [`Tls::fixed_memory`].
    pub fixed_memory: usize,
}

#[cfg(feature = "tls")]
/// Encrypted connections are served like cleartext ones; the vectored
/// write is tokio-rustls's, which hands rustls every slice at once.
impl Socket for TlsSocket {
    fn acknowledged(&self) -> Option<crate::net::Acked> {
        self.stream.get_ref().0.acknowledged()
    }

    fn tcp_fd(&self) -> Option<std::os::fd::RawFd> {
        self.stream.get_ref().0.tcp_fd()
    }

    fn fixed_memory(&self) -> usize {
        self.fixed_memory
    }

    /// The records of `pending` bytes of plaintext, up to [`RECORDS_HELD`],
    /// beyond the one record the fixed memory covers.
    fn send_memory(&self, pending: usize) -> usize {
        let records = pending.div_ceil(16 * 1024) * RECORD;
        records.min(RECORDS_HELD).saturating_sub(RECORD)
    }

    fn limit_send_memory(&mut self, bytes: usize) {
        self.stream
            .get_mut()
            .1
            .set_buffer_limit(Some(RECORD + bytes));
    }
}

#[cfg(feature = "tls")]
impl tokio::io::AsyncRead for TlsSocket {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

#[cfg(feature = "tls")]
impl tokio::io::AsyncWrite for TlsSocket {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(all(test, feature = "tls"))]
mod tests {
    use super::PLAIN_HTTP_REFUSED;

    #[test]
    fn the_refusal_of_plain_http_is_framed_by_its_length() {
        let text = std::str::from_utf8(PLAIN_HTTP_REFUSED).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap();
        assert_eq!(length.parse::<usize>().unwrap(), body.len());
    }
}
