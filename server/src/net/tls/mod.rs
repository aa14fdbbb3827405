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
//!
//! **Start-up input.** The certificate and the key are read from regular
//! files only, of at most [`MAX_PEM_BYTES`], opened without blocking (a FIFO
//! or a device is refused, never read); a key of a type or size rustls does
//! not take is named as such. A self-signed certificate's PEM goes into a
//! private directory of its own (mode 0700, the file created anew with mode
//! 0600), removed when the server stops.
//!
//! **Memory.** What rustls holds per connection is bounded and counted
//! against the connection's lease ([`TlsSocket`]): records being read (a
//! handshake message of at most 64 KiB, then one record), plaintext
//! decrypted ahead of the reader (16 KiB and a record), and the records of
//! a write the peer has not taken — one record always, up to
//! [`RECORDS_HELD`] while the lease covers them.

use std::io::{self, Read as _, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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

/// Encrypted bytes rustls may hold for a socket that has not taken them
/// yet, while the connection's lease covers them, and so the most
/// plaintext one vectored write hands it: a 100 KiB response then leaves in
/// one socket write, as in cleartext, where rustls's default of 64 KiB took
/// two (strace, docs/design.md).
pub const RECORDS_HELD: usize = 256 * 1024;

/// The largest PEM file read for `--tls-cert` or `--tls-key`: a chain of a
/// dozen certificates of large RSA keys fits in a few tens of kilobytes.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// One TLS record on the wire at its largest: 16 KiB of plaintext, the
/// expansion TLS allows, the header.
const RECORD: usize = 16 * 1024 + 2048 + 5;

/// What rustls holds per connection whatever the connection does, beyond
/// the chain it sends: a handshake message being joined (64 KiB, rustls's
/// cap, and its last read of 4 KiB), plaintext decrypted ahead of the
/// reader (16 KiB, and the record that passed it), one record being
/// written, and the connection's own state.
const FIXED: usize = 64 * 1024 + 4096 + 16 * 1024 + RECORD + RECORD + 8 * 1024;

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
    /// A certificate for `localhost` made at start-up, its PEM written to a
    /// private directory for clients to trust (`curl --cacert`).
    SelfSigned,
}

/// The server's TLS: the acceptor, what each connection's TLS costs in
/// memory, and the self-signed certificate's file, if any, which is removed
/// when the last clone is dropped.
#[derive(Clone)]
pub struct Tls {
    /// Accepts handshakes.
    pub acceptor: TlsAcceptor,
    /// Bytes rustls holds per connection whatever it does (`FIXED`, and
    /// the chain the server sends in each handshake).
    pub fixed_memory: usize,
    self_signed: Option<Arc<SelfSigned>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("fixed_memory", &self.fixed_memory)
            .field("self_signed", &self.self_signed_pem())
            .finish_non_exhaustive()
    }
}

/// A self-signed certificate's PEM in a private directory, removed on drop.
struct SelfSigned {
    _dir: tempfile::TempDir,
    pem: PathBuf,
}

impl Tls {
    /// Where the self-signed certificate's PEM is (`curl --cacert`), for
    /// `--tls-self-signed`.
    pub fn self_signed_pem(&self) -> Option<&Path> {
        self.self_signed.as_deref().map(|s| s.pem.as_path())
    }
}

/// The server's TLS for `source`, or an error naming the file and what is
/// wrong with it.
pub fn load(source: &Source) -> Result<Tls, String> {
    let (chain, key, self_signed) = match source {
        Source::Files { cert, key } => (read_chain(cert)?, read_key(key)?, None),
        Source::SelfSigned => {
            let (chain, key, written) = self_signed()?;
            (chain, key, Some(Arc::new(written)))
        }
    };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    if let Source::Files { key: path, .. } = source {
        if let Err(e) = provider.key_provider.load_private_key(key.clone_key()) {
            return Err(format!(
                "--tls-key {}: {}",
                path.display(),
                unusable_key(&key, &e)
            ));
        }
    }
    let chain_len: usize = chain.iter().map(|c| c.len()).sum();
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
            Source::SelfSigned => format!("the self-signed certificate: {e}"),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Tls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        fixed_memory: FIXED + chain_len,
        self_signed,
    })
}

/// The acceptor for `source` (a server that keeps nothing else of its TLS).
pub fn acceptor(source: &Source) -> Result<TlsAcceptor, String> {
    load(source).map(|tls| tls.acceptor)
}

/// The bytes of the PEM file at `path` (`flag` names it in errors): a
/// regular file (a symbolic link to one is followed) of at most
/// [`MAX_PEM_BYTES`]. It is opened without blocking and checked once open,
/// so that a FIFO or a device is refused without a read, and a file
/// replaced between a check and the open cannot slip through.
fn read_pem(flag: &str, path: &Path) -> Result<Vec<u8>, String> {
    let named = |e: &dyn std::fmt::Display| format!("{flag} {}: {e}", path.display());
    let mut file = open_nonblocking(path).map_err(|e| named(&e))?;
    let meta = file.metadata().map_err(|e| named(&e))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(named(&format!(
            "not a regular file ({}); give the path of a PEM file",
            file_kind(&kind)
        )));
    }
    if meta.len() > MAX_PEM_BYTES {
        return Err(named(&format!(
            "{} bytes; a PEM file of more than 1 MiB is refused",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // At most one byte past the cap, should the file grow meanwhile.
    (&mut file)
        .take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| named(&e))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(named(&"grew past 1 MiB while it was read"));
    }
    Ok(bytes)
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// What a file that is not a regular one is, in words.
fn file_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Every certificate in the PEM file at `path`, in order.
fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_pem("--tls-cert", path)?;
    let named = |e: &dyn std::fmt::Display| format!("--tls-cert {}: {e}", path.display());
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| named(&e))?;
    if chain.is_empty() {
        return Err(named(&"no PEM certificate (BEGIN CERTIFICATE) in the file"));
    }
    Ok(chain)
}

/// The first private key in the PEM file at `path`.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read_pem("--tls-key", path)?;
    let named = |e: &dyn std::fmt::Display| format!("--tls-key {}: {e}", path.display());
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => {
            named(&"no PEM private key (PKCS#8, PKCS#1 or SEC1) in the file")
        }
        e => named(&e),
    })
}

/// Why rustls refused `key` (`error`), naming its type and size when they
/// are what it does not take.
fn unusable_key(key: &PrivateKeyDer<'_>, error: &rustls::Error) -> String {
    const SUPPORTED: &str =
        "rustls takes RSA keys of 2048 to 8192 bits, ECDSA keys on P-256, P-384 or P-521, and Ed25519 keys";
    match key_kind(key) {
        Some(KeyKind::Rsa { bits }) if !(2048..=8192).contains(&bits) => {
            format!("an RSA key of {bits} bits, a size not supported: {SUPPORTED}")
        }
        Some(KeyKind::Other(name)) => {
            format!("a key of type {name}, not supported: {SUPPORTED}")
        }
        // A type and size rustls takes: the key itself is at fault.
        Some(KeyKind::Ec { curve }) if !SUPPORTED_CURVES.contains(&curve) => {
            format!("an ECDSA key on {curve}, a curve not supported: {SUPPORTED}")
        }
        _ => format!("the private key cannot be used ({error})"),
    }
}

/// What a private key is, as far as its encoding says.
#[derive(Debug, PartialEq, Eq)]
enum KeyKind {
    Rsa { bits: usize },
    Ec { curve: &'static str },
    Ed25519,
    Other(String),
}

const SUPPORTED_CURVES: [&str; 3] = ["P-256", "P-384", "P-521"];

/// The type (and RSA size, EC curve) of `key`, read from its DER: PKCS#1
/// is RSA, SEC1 is an EC key, PKCS#8 says its algorithm. `None` when the
/// DER cannot be read.
fn key_kind(key: &PrivateKeyDer<'_>) -> Option<KeyKind> {
    match key {
        PrivateKeyDer::Pkcs1(k) => rsa_bits(k.secret_pkcs1_der()).map(|bits| KeyKind::Rsa { bits }),
        PrivateKeyDer::Sec1(k) => sec1_curve(k.secret_sec1_der()),
        PrivateKeyDer::Pkcs8(k) => pkcs8_kind(k.secret_pkcs8_der()),
        _ => None,
    }
}

/// `RSAPrivateKey ::= SEQUENCE { version, modulus INTEGER, … }`: the
/// modulus's size in bits.
fn rsa_bits(der: &[u8]) -> Option<usize> {
    let modulus = yasna::parse_der(der, |r| {
        r.read_sequence(|r| {
            r.next().read_u8()?;
            let (modulus, _) = r.next().read_bigint_bytes()?;
            // The rest (exponents, primes) is not needed.
            while r.read_optional(|r| r.read_der())?.is_some() {}
            Ok(modulus)
        })
    })
    .ok()?;
    let first = modulus.iter().position(|&b| b != 0)?;
    Some((modulus.len() - first) * 8 - modulus[first].leading_zeros() as usize)
}

/// `ECPrivateKey ::= SEQUENCE { version, privateKey, [0] parameters, … }`:
/// the curve named in its parameters.
fn sec1_curve(der: &[u8]) -> Option<KeyKind> {
    let oid = yasna::parse_der(der, |r| {
        r.read_sequence(|r| {
            r.next().read_u8()?;
            r.next().read_bytes()?;
            let oid =
                r.read_optional(|r| r.read_tagged(yasna::Tag::context(0), |r| r.read_oid()))?;
            while r.read_optional(|r| r.read_der())?.is_some() {}
            Ok(oid)
        })
    })
    .ok()??;
    Some(KeyKind::Ec {
        curve: curve_name(&oid.to_string()),
    })
}

/// `PrivateKeyInfo ::= SEQUENCE { version, AlgorithmIdentifier, privateKey
/// OCTET STRING, … }`.
fn pkcs8_kind(der: &[u8]) -> Option<KeyKind> {
    let (algorithm, parameter, inner) = yasna::parse_der(der, |r| {
        r.read_sequence(|r| {
            r.next().read_u8()?;
            let (algorithm, parameter) = r.next().read_sequence(|r| {
                let algorithm = r.next().read_oid()?;
                let parameter = r.read_optional(|r| r.read_oid()).unwrap_or(None);
                while r.read_optional(|r| r.read_der())?.is_some() {}
                Ok((algorithm, parameter))
            })?;
            let inner = r.next().read_bytes()?;
            while r.read_optional(|r| r.read_der())?.is_some() {}
            Ok((algorithm, parameter, inner))
        })
    })
    .ok()?;
    Some(match algorithm.to_string().as_str() {
        "1.2.840.113549.1.1.1" => KeyKind::Rsa {
            bits: rsa_bits(&inner)?,
        },
        "1.2.840.10045.2.1" => KeyKind::Ec {
            curve: parameter.map_or("an unnamed curve", |oid| curve_name(&oid.to_string())),
        },
        "1.3.101.112" => KeyKind::Ed25519,
        oid => KeyKind::Other(algorithm_name(oid)),
    })
}

/// A named curve by its OID.
fn curve_name(oid: &str) -> &'static str {
    match oid {
        "1.2.840.10045.3.1.7" => "P-256",
        "1.3.132.0.34" => "P-384",
        "1.3.132.0.35" => "P-521",
        "1.3.132.0.10" => "secp256k1",
        "1.2.840.10045.3.1.1" => "P-192",
        "1.3.132.0.33" => "P-224",
        "1.3.36.3.3.2.8.1.1.7" => "brainpoolP256r1",
        _ => "a curve not named here",
    }
}

/// A key algorithm by its OID, for the ones a key file is likely to hold.
fn algorithm_name(oid: &str) -> String {
    match oid {
        "1.2.840.113549.1.1.10" => "RSASSA-PSS".into(),
        "1.2.840.10040.4.1" => "DSA".into(),
        "1.3.101.113" => "Ed448".into(),
        "1.3.101.110" => "X25519".into(),
        "1.3.101.111" => "X448".into(),
        "1.2.840.113549.1.3.1" => "DH".into(),
        oid => format!("OID {oid}"),
    }
}

/// A new certificate for `localhost` (and 127.0.0.1, ::1), its PEM written
/// to `localhost.pem` in a new private directory.
fn self_signed() -> Result<
    (
        Vec<CertificateDer<'static>>,
        PrivateKeyDer<'static>,
        SelfSigned,
    ),
    String,
> {
    let names = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| format!("cannot make a self-signed certificate: {e}"))?;
    let written = write_private(made.cert.pem().as_bytes())?;
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
        .map_err(|e| format!("the self-signed certificate's key: {e}"))?;
    Ok((vec![made.cert.der().clone()], key, written))
}

/// Writes `pem` to a file of its own in a new directory of the temporary
/// directory that only this user can enter (0700; `tempfile` picks an
/// unpredictable name and creates it exclusively), the file itself created
/// anew (`O_EXCL`) and readable by this user alone (0600).
fn write_private(pem: &[u8]) -> Result<SelfSigned, String> {
    let failed = |e: &dyn std::fmt::Display| format!("--tls-self-signed: {e}");
    let mut builder = tempfile::Builder::new();
    builder.prefix("unflat-tls-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o700));
    }
    let dir = builder
        .tempdir()
        .map_err(|e| failed(&format!("cannot make a private directory: {e}")))?;
    let path = dir.path().join("localhost.pem");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(&path)
        .map_err(|e| failed(&format!("cannot create {}: {e}", path.display())))?;
    file.write_all(pem)
        .map_err(|e| failed(&format!("cannot write {}: {e}", path.display())))?;
    Ok(SelfSigned {
        _dir: dir,
        pem: path,
    })
}

/// The TLS handshake of an accepted connection, within `timeout`. A client
/// that stalls it, or speaks something other than TLS, is closed and logged
/// at debug level (`None`).
pub async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    timeout: Duration,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
        Ok(Ok(mut stream)) => {
            // One record until a write's lease says more.
            stream.get_mut().1.set_buffer_limit(Some(RECORD));
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

/// An encrypted connection after its handshake, with what its TLS costs in
/// memory.
pub struct TlsSocket {
    /// The stream.
    pub stream: TlsStream<TcpStream>,
    /// [`Tls::fixed_memory`].
    pub fixed_memory: usize,
}

/// Encrypted connections are served like cleartext ones; the vectored
/// write is tokio-rustls's, which hands rustls every slice at once.
impl Socket for TlsSocket {
    fn peer_addr(&self) -> Option<SocketAddr> {
        self.stream.get_ref().0.peer_addr().ok()
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

impl tokio::io::AsyncRead for TlsSocket {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_kinds_are_read_from_their_der() {
        let kind =
            |key: rcgen::KeyPair| key_kind(&PrivateKeyDer::try_from(key.serialize_der()).unwrap());
        let rsa =
            rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_3072);
        assert_eq!(kind(rsa.unwrap()), Some(KeyKind::Rsa { bits: 3072 }));
        let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
        assert_eq!(kind(ec), Some(KeyKind::Ec { curve: "P-384" }));
        let ed = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        assert_eq!(kind(ed), Some(KeyKind::Ed25519));
    }
}
