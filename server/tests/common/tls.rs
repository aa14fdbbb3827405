//! HTTPS for the tests: a certificate for localhost, the server's
//! configuration that uses it, and clients that trust only it — a raw
//! rustls stream for exact bytes, and reqwest.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;

use crate::common::Site;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use unflat_server::{Config, Running, Strategy};

/// A certificate for localhost in PEM files, removed on drop.
pub struct Cert {
    dir: PathBuf,
    /// The certificate, for clients to trust.
    pub der: CertificateDer<'static>,
}

impl Cert {
    /// A new certificate, its files in a directory of the temporary
    /// directory named after `name` and the process.
    pub fn new(name: &str) -> Cert {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        Cert::written(name, &made.cert, &made.signing_key)
    }

    /// [`Cert::new`], expiring at the start of 1 January of `year`.
    pub fn expiring(name: &str, year: i32) -> Cert {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        params.not_after = rcgen::date_time_ymd(year, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        Cert::written(name, &params.self_signed(&key).unwrap(), &key)
    }

    fn written(name: &str, cert: &rcgen::Certificate, key: &rcgen::KeyPair) -> Cert {
        let dir = std::env::temp_dir().join(format!("unflat-tls-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
        Cert {
            dir,
            der: cert.der().clone(),
        }
    }

    /// Makes this certificate's PEM file hold it `copies` times over: a
    /// chain of that many certificates, as long as a test needs.
    pub fn repeat(&self, copies: usize) {
        let pem = self.dir.join("cert.pem");
        let one = std::fs::read_to_string(&pem).unwrap();
        std::fs::write(&pem, one.repeat(copies)).unwrap();
    }

    /// The test configuration for `strategy`, serving HTTPS with this
    /// certificate.
    pub fn config(&self, strategy: Strategy) -> Config {
        Config {
            tls_cert: Some(self.dir.join("cert.pem")),
            tls_key: Some(self.dir.join("key.pem")),
            ..super::config(strategy)
        }
    }

    /// `--tls-cert PATH --tls-key PATH`, for the server binary.
    pub fn args(&self) -> Vec<String> {
        let path = |f: &str| self.dir.join(f).display().to_string();
        vec![
            "--tls-cert".into(),
            path("cert.pem"),
            "--tls-key".into(),
            path("key.pem"),
        ]
    }

    /// Makes this certificate's files hold `other`'s certificate and key,
    /// as an operator renewing a certificate would.
    pub fn replace_with(&self, other: &Cert) {
        for f in ["cert.pem", "key.pem"] {
            std::fs::copy(other.dir.join(f), self.dir.join(f)).unwrap();
        }
    }

    /// A client configuration that trusts only this certificate and asks
    /// for `http/1.1` by ALPN.
    pub fn client_config(&self) -> ClientConfig {
        trusting(&self.der)
    }

    /// A reqwest client that trusts only this certificate.
    pub fn reqwest(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .use_preconfigured_tls(self.client_config())
            .build()
            .unwrap()
    }
}

/// A reqwest client for cleartext URLs. reqwest builds a TLS
/// configuration for every client, from the process's default rustls
/// provider, which is installed here first (aws-lc-rs, as the server).
pub fn reqwest_cleartext() -> reqwest::Client {
    // Err when already installed: by another test of this process.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    reqwest::Client::new()
}

impl Drop for Cert {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// OpenSSL's default `max_cert_list`: the longest Certificate message its
/// clients take (`SSL_R_EXCESSIVE_MESSAGE_SIZE` past it).
pub const OPENSSL_MAX_CERT_LIST: usize = 100 * 1024;

/// Bytes of the body of the TLS 1.3 Certificate message that carries
/// `copies` certificates of `der` bytes, without extensions: the request
/// context's length (1), the list's length (3), and for each entry its
/// length (3), its DER and its extensions' length (2).
pub fn certificate_message(der: usize, copies: usize) -> usize {
    1 + 3 + copies * (3 + der + 2)
}

/// The most copies of a certificate of `der` bytes whose Certificate
/// message OpenSSL's clients take.
pub fn most_copies_taken(der: usize) -> usize {
    (OPENSSL_MAX_CERT_LIST - 4) / (der + 5)
}

/// A client configuration (aws-lc-rs, as the server) that trusts only
/// `der` and asks for `http/1.1` by ALPN.
pub fn trusting(der: &CertificateDer<'static>) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    roots.add(der.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// A TLS client stream to `server` that trusts only `der`; the handshake
/// happens on its first read or write.
pub fn client(server: &Running<Site>, der: &CertificateDer<'static>) -> TlsClient {
    over(super::connect(server), der)
}

/// TLS, trusting only `der`, over a connected `tcp`.
pub fn over(tcp: TcpStream, der: &CertificateDer<'static>) -> TlsClient {
    let name = ServerName::try_from("localhost").unwrap();
    TlsClient {
        conn: ClientConnection::new(Arc::new(trusting(der)), name).unwrap(),
        sock: tcp,
    }
}

/// A blocking TLS client whose reads only read. rustls's `StreamOwned`
/// first sends whatever an earlier write left unsent, so once a server has
/// answered part of a request (413) and stopped reading, every read fails
/// with the write's broken pipe and the answer cannot be read; a client
/// such as curl reads it. This one does too.
pub struct TlsClient {
    /// The TLS state.
    pub conn: ClientConnection,
    /// The socket under it.
    pub sock: TcpStream,
}

impl TlsClient {
    /// Completes the handshake if it is not done yet.
    fn handshake(&mut self) -> io::Result<()> {
        while self.conn.is_handshaking() {
            self.conn.complete_io(&mut self.sock)?;
        }
        Ok(())
    }
}

impl Read for TlsClient {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.handshake()?;
        loop {
            // Plaintext already decrypted; at the end, Ok(0) after the
            // peer's close_notify, UnexpectedEof without one.
            match self.conn.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            self.conn.read_tls(&mut self.sock)?;
            self.conn
                .process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        }
    }
}

impl Write for TlsClient {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.handshake()?;
        let n = self.conn.writer().write(buf)?;
        self.flush()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sock)?;
        }
        Ok(())
    }
}

/// A raw connection to a server, cleartext or TLS, for tests that send
/// exact bytes either way.
pub trait Duplex: Read + Write {
    /// Ends the client's sending side: a TCP half-close, after
    /// `close_notify` over TLS.
    fn shutdown_write(&mut self) -> io::Result<()>;
}

impl Duplex for TcpStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
}

impl Duplex for TlsClient {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        self.flush()?;
        self.sock.shutdown(Shutdown::Write)
    }
}
