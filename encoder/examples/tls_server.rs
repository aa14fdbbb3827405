//! An HTTPS/1.1 server that drains a `WriteQueue` into a tokio-rustls stream
//! with `AsyncWriteExt::write_all_buf`. The TLS stream is vectored
//! (`poll_write_vectored`), so the queue's segments — the encoded head and
//! the shared body — reach rustls's `write_vectored` as slices, and rustls
//! encrypts its records from them without joining them first.
//!
//! `cargo run -p unflat --example tls_server -- --addr 127.0.0.1:3443`
//! makes a self-signed certificate for `localhost` and prints where its PEM
//! is; then:
//! - `curl --cacert PEM https://localhost:3443/5000` — 5000 bytes behind an
//!   encoded head (a body this short is copied behind the head: the queue's
//!   `Policy` finds the copy cheaper than a slice);
//! - `curl --cacert PEM https://localhost:3443/100000` — the body goes to
//!   rustls as a slice of the shared `Bytes`, next to the head's.
//!
//! `--cert PATH --key PATH` serve a PEM certificate chain and key instead.
//! The address takes the flags every example takes: `--addr HOST:PORT`
//! (port 0 picks a free one) or `--port PORT`; 127.0.0.1:3443 by default.

#[path = "support/args.rs"]
mod args;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use rustls::ServerConfig;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use unflat::head::{DateLine, Head, Line, Persistence, RequestMethod, Status};
use unflat::queue::WriteQueue;

/// The longest body served, in bytes.
const MAX: usize = 1 << 20;

#[tokio::main]
async fn main() -> io::Result<()> {
    let (mut cert, mut key): (Option<PathBuf>, Option<PathBuf>) = (None, None);
    let addr = args::addr_from_args("127.0.0.1:3443", |arg, rest| {
        let slot = match arg {
            "--cert" => &mut cert,
            "--key" => &mut key,
            _ => return Err(format!("unknown argument {arg:?}")),
        };
        *slot = Some(PathBuf::from(rest.next().ok_or(format!("{arg} needs a value"))?));
        Ok(())
    })
    .unwrap_or_else(|e| {
        fail(&format!(
            "tls_server: {e}; usage: tls_server [--addr HOST:PORT | --port PORT] [--cert PEM --key PEM]"
        ))
    });
    let files = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => fail("error: --cert and --key go together"),
    };
    let config = tls_config(files).unwrap_or_else(|e| fail(&format!("error: {e}")));
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| fail(&format!("error: --addr {addr}: {e}")));
    println!(
        "tls_server at https://localhost:{}/",
        listener.local_addr()?.port()
    );
    // The body every response slices: built once, shared by every task.
    let body = Bytes::from("unflat ".repeat(MAX / 7 + 1)).slice(..MAX);
    loop {
        let (tcp, _) = listener.accept().await?;
        let (acceptor, body) = (acceptor.clone(), body.clone());
        tokio::spawn(async move {
            if let Err(e) = serve(&acceptor, tcp, &body).await {
                eprintln!("connection: {e}");
            }
        });
    }
}

/// Prints `message` and exits with status 2.
fn fail(message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(2);
}

/// rustls on aws-lc-rs, TLS 1.2 and 1.3, ALPN `http/1.1`, with the PEM
/// chain and key in `files`, or else a new self-signed certificate for
/// `localhost`. An error names the file and what is wrong with it.
fn tls_config(files: Option<(PathBuf, PathBuf)>) -> Result<ServerConfig, String> {
    let (chain, key) = match &files {
        Some((cert, key)) => (
            read_pem(cert, "certificate", |path| {
                let chain = CertificateDer::pem_file_iter(path)?.collect::<Result<Vec<_>, _>>()?;
                if chain.is_empty() {
                    return Err(pem::Error::NoItemsFound);
                }
                Ok(chain)
            })?,
            read_pem(key, "private key", |path| {
                PrivateKeyDer::from_pem_file(path)
            })?,
        ),
        None => self_signed()?,
    };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| match &files {
            Some((cert, key)) => format!("{} and {}: {e}", cert.display(), key.display()),
            None => format!("the self-signed certificate: {e}"),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// What `read` finds in the PEM file at `path`, or an error naming the
/// file: the PEM reader's "no items found" says which item was missing.
fn read_pem<T>(
    path: &Path,
    what: &str,
    read: impl FnOnce(&Path) -> Result<T, pem::Error>,
) -> Result<T, String> {
    read(path).map_err(|e| match e {
        pem::Error::NoItemsFound => format!("{}: no PEM {what} in the file", path.display()),
        e => format!("{}: {e}", path.display()),
    })
}

/// A new certificate for `localhost` and its key; the certificate's PEM is
/// written to the temporary directory, for `curl --cacert`.
fn self_signed() -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .map_err(|e| format!("cannot make a self-signed certificate: {e}"))?;
    // One file per process, so that servers side by side keep their own.
    let path = std::env::temp_dir().join(format!("unflat-tls-server-{}.pem", std::process::id()));
    std::fs::write(&path, made.cert.pem())
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    println!("self-signed certificate: {}", path.display());
    let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    Ok((vec![made.cert.der().clone()], key.into()))
}

/// Serves keep-alive requests on one TLS connection until the peer closes
/// it or sends a request this server refuses.
async fn serve(acceptor: &TlsAcceptor, tcp: TcpStream, body: &Bytes) -> io::Result<()> {
    let mut stream = acceptor.accept(tcp).await?;
    let plain = Line::parse("Content-Type", "text/plain; charset=utf-8").expect("a valid line");
    let mut input = Vec::new();
    let mut queue = WriteQueue::new();
    loop {
        // Read until a whole head is in; this example takes no bodies, so
        // anything but a well-formed GET is refused and the connection closed.
        let (used, target) = loop {
            let mut fields = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut fields);
            match req.parse(&input) {
                Ok(httparse::Status::Complete(n)) if req.method == Some("GET") => {
                    break (n, req.path.map(str::to_owned));
                }
                Ok(httparse::Status::Partial) => {
                    if stream.read_buf(&mut input).await? == 0 {
                        // The peer is done: answer its close_notify with ours.
                        return stream.shutdown().await;
                    }
                }
                Ok(httparse::Status::Complete(_)) | Err(_) => break (input.len(), None),
            }
        };
        input.drain(..used);

        let date = DateLine::at(SystemTime::now());
        let n = target
            .as_deref()
            .and_then(|t| t.strip_prefix('/')?.parse::<usize>().ok());
        let (status, n) = match (&target, n) {
            (None, _) => (Status::BAD_REQUEST, 0),
            (_, Some(n)) if n <= MAX => (Status::OK, n),
            _ => (Status::NOT_FOUND, 0),
        };
        let mut head = Head::new(status, RequestMethod::Other);
        head.line(&plain).expect("room for a line").date(&date);
        head.content_length(n as u64).expect("one framing");
        if target.is_none() {
            head.persistence(Persistence::Close);
        }
        queue.head(&head).expect("its lines are checked when built");
        // A slice of the shared body, an `Arc` increment: the queue sends it
        // from the body's own memory, or copies it if it is short.
        queue.share(&body.slice(..n));
        queue.end_response();
        // tokio writes the queue's chunks with `poll_write_vectored`, which
        // hands rustls every slice at once; rustls encrypts from them.
        stream.write_all_buf(&mut queue).await?;
        // That returns once rustls has taken the plaintext; records the
        // socket did not take yet wait in rustls until a flush or the next
        // write, so flush: the client is waiting for them.
        stream.flush().await?;
        if target.is_none() {
            return stream.shutdown().await;
        }
    }
}
