//! HTTPS: the server's TLS configuration, loaded (or made) before anything
//! listens, and the handshake of each accepted connection.
//!
//! rustls with the aws-lc-rs provider (chosen over *ring* by the
//! `tls-providers` bench: docs/design.md, "HTTPS"), its safe defaults (TLS
//! 1.2 and 1.3), ALPN `http/1.1`. After the handshake a connection is served
//! exactly as a cleartext one ([`crate::connection::serve`]): the write
//! queue's slices — the encoded head, shared bodies, streamed frames — go to
//! rustls as one vectored plaintext write per batch, which rustls encrypts
//! from the slices themselves into records, never joining them first.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use crate::connection::Socket;

/// Encrypted bytes rustls holds for a socket that has not taken them yet,
/// and so the most plaintext one vectored write hands it: a 100 KiB
/// response then leaves in one socket write, as in cleartext, where
/// rustls's default of 64 KiB took two (strace, docs/design.md). A client
/// that never reads holds this much more than in cleartext.
pub const RECORDS_HELD: usize = 256 * 1024;

/// Where the server's certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A PEM certificate chain and its PEM private key (PKCS#8, PKCS#1 or
    /// SEC1).
    Files {
        /// The certificate chain, end-entity certificate first.
        cert: PathBuf,
        /// The private key of the end-entity certificate.
        key: PathBuf,
    },
    /// A certificate for `localhost` made at start-up, its PEM written to
    /// `cert` for clients to trust (`curl --cacert`).
    SelfSigned {
        /// Where the certificate is written.
        cert: PathBuf,
    },
}

/// A new file name in the temporary directory for a self-signed
/// certificate: one per server, so that servers started side by side (in
/// one process or several) never overwrite each other's.
pub fn self_signed_path() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("unflat-localhost-{}-{n}.pem", std::process::id()))
}

/// The acceptor for `source`, or an error naming the file and what is wrong
/// with it.
pub fn acceptor(source: &Source) -> Result<TlsAcceptor, String> {
    let (chain, key) = match source {
        Source::Files { cert, key } => (read_chain(cert)?, read_key(key)?),
        Source::SelfSigned { cert } => self_signed(cert)?,
    };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| match source {
            Source::Files { cert, key } => format!(
                "--tls-cert {} and --tls-key {}: {e}",
                cert.display(),
                key.display()
            ),
            Source::SelfSigned { .. } => format!("the self-signed certificate: {e}"),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Every certificate in the PEM file at `path`, in order.
fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let named = |e: &dyn std::fmt::Display| format!("--tls-cert {}: {e}", path.display());
    readable(path).map_err(|e| named(&e))?;
    let chain = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| named(&e))?;
    if chain.is_empty() {
        return Err(named(&"no PEM certificate (BEGIN CERTIFICATE) in the file"));
    }
    Ok(chain)
}

/// The first private key in the PEM file at `path`.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let named = |e: &dyn std::fmt::Display| format!("--tls-key {}: {e}", path.display());
    readable(path).map_err(|e| named(&e))?;
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => {
            named(&"no PEM private key (PKCS#8, PKCS#1 or SEC1) in the file")
        }
        e => named(&e),
    })
}

/// Opens `path` once, so that a missing or unreadable file is reported as
/// the operating system says it (the PEM reader's own errors say less).
fn readable(path: &Path) -> io::Result<()> {
    std::fs::File::open(path).map(drop)
}

/// A new certificate for `localhost` (and 127.0.0.1, ::1), its PEM written
/// to `path`.
fn self_signed(
    path: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let names = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| format!("cannot make a self-signed certificate: {e}"))?;
    std::fs::write(path, made.cert.pem())
        .map_err(|e| format!("--tls-self-signed: cannot write {}: {e}", path.display()))?;
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
        .map_err(|e| format!("the self-signed certificate's key: {e}"))?;
    Ok((vec![made.cert.der().clone()], key))
}

/// The TLS handshake of an accepted connection, within `timeout`. A client
/// that stalls it, or speaks something other than TLS, is closed and logged
/// at debug level (`None`); a connection that completes it holds at most
/// [`RECORDS_HELD`] of encrypted records.
pub async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    timeout: Duration,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
        Ok(Ok(mut stream)) => {
            stream.get_mut().1.set_buffer_limit(Some(RECORDS_HELD));
            Some(stream)
        }
        Ok(Err(e)) => {
            debug!(%peer, "TLS handshake failed: {e}");
            None
        }
        Err(_) => {
            debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}

/// Encrypted connections are served like cleartext ones; the vectored
/// write is tokio-rustls's, which hands rustls every slice at once.
impl Socket for TlsStream<TcpStream> {
    fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.get_ref().0.peer_addr().ok()
    }
}
