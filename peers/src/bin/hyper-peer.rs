//! `hyper-peer`: the benchmark's reference server, hyper 1.x used well.
//!
//! It serves `GET /end-string/{len}?kind=ascii|latin1|twobyte` with the
//! headers unflat-server sends (Content-Type, X-Content-Type-Options,
//! Content-Length, Date, Connection: keep-alive, Keep-Alive; the end-string
//! harness checks that they agree) and a cached `Bytes` body, on a
//! multi-threaded tokio runtime, with hyper's vectored write queue forced on
//! (`writev(true)`), so the body goes to the socket without being copied.
//! The bodies are cached per worker thread, so a request takes no lock
//! (unflat-server keeps a memo per connection). `--pipeline-flush` turns on
//! hyper's `pipeline_flush`, which answers a pipelined batch with one
//! write; it is off by default because it costs requests that are not
//! pipelined: 489 640 user-space instructions per 100 KiB response over
//! TLS against 388 276 without it (callgrind, `benches/instructions.py`).
//!
//! With `--tls-cert`/`--tls-key` it serves HTTPS through tokio-rustls with
//! the rustls configuration unflat-server builds (`unflat_server::net::tls`: the
//! same provider, protocol versions, cipher suites and ALPN) and unflat-server's
//! handshake (its deadline, its answer to plain HTTP, its bound on the
//! records rustls holds), so that the two servers differ only in their HTTP
//! layers. `--tls-provider aws-lc-rs|ring` picks rustls's crypto provider,
//! as unflat-server's flag of that name does (default aws-lc-rs).
//!
//! `--tls-stock` serves HTTPS as hyper 1.x on tokio-rustls is written by its
//! users instead: a stock `ServerConfig` (`builder_with_provider` on the
//! `--tls-provider`, safe default protocol versions, no client
//! authentication, the single certificate chain, ALPN `http/1.1`; rustls's
//! own default buffer limits) and a plain `acceptor.accept(stream)` — no
//! handshake deadline, no record bound, nothing of unflat-server's. Its
//! difference from the default shows what unflat-server's handshake and
//! record bound cost or save.
//!
//! `cargo run --release -p unflat-peers --bin hyper-peer -- --addr 127.0.0.1:0 --workers 2`
//! prints `hyper-peer at http://ADDR` (over HTTPS, `hyper-peer (rustls with
//! PROVIDER) at https://ADDR`, `stock tokio-rustls, …` with `--tls-stock`)
//! once it listens.

use std::cell::RefCell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use clap::Parser;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use unflat_server::net::tls;

/// hyper-peer: the end-string route on hyper, for comparison.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3001")]
    addr: SocketAddr,
    /// Worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Largest len served.
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    max_len: usize,
    /// Aggregate the flushes of pipelined responses (hyper's
    /// `pipeline_flush`): for pipelined load.
    #[arg(long)]
    pipeline_flush: bool,
    /// PEM certificate chain: serve HTTPS (with --tls-key).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// rustls's crypto provider for HTTPS.
    #[arg(long, value_enum, default_value_t = tls::Provider::AwsLcRs)]
    tls_provider: tls::Provider,
    /// HTTPS through a stock tokio-rustls acceptor (a plain
    /// `ServerConfig`, `acceptor.accept(stream)`) instead of unflat-server's
    /// configuration and handshake.
    #[arg(long, requires = "tls_cert")]
    tls_stock: bool,
}

/// How HTTPS connections are accepted.
#[derive(Clone)]
enum Https {
    /// unflat-server's configuration and handshake (`tls::handshake`).
    Unflat(TlsAcceptor),
    /// A stock configuration and `acceptor.accept(stream)`.
    Stock(TlsAcceptor),
}

thread_local! {
    /// The bodies this worker thread has served, by length and character.
    static CACHE: RefCell<HashMap<(usize, char), Bytes>> = RefCell::new(HashMap::new());
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()?
        .block_on(serve(args))
}

async fn serve(args: Args) -> std::io::Result<()> {
    let provider = args.tls_provider;
    let https = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => {
            let made = if args.tls_stock {
                stock_acceptor(&cert, &key, provider).map(Https::Stock)
            } else {
                tls::acceptor(&tls::CertSource::Files { cert, key }, provider).map(Https::Unflat)
            };
            match made {
                Ok(https) => Some(https),
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            }
        }
        _ => None,
    };
    let listener = TcpListener::bind(args.addr).await?;
    let addr = listener.local_addr()?;
    match &https {
        None => println!("hyper-peer at http://{addr}"),
        Some(Https::Unflat(_)) => println!("hyper-peer (rustls with {provider}) at https://{addr}"),
        Some(Https::Stock(_)) => {
            println!("hyper-peer (stock tokio-rustls, rustls with {provider}) at https://{addr}")
        }
    }
    std::io::stdout().flush()?;
    let (max_len, pipeline_flush) = (args.max_len, args.pipeline_flush);
    // unflat-server's default `--handshake-timeout`.
    let handshake_timeout = unflat_server::Config::default().handshake_timeout;
    loop {
        let (stream, peer) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let https = https.clone();
        tokio::spawn(async move {
            match https {
                None => connection(stream, max_len, pipeline_flush).await,
                // unflat-server's handshake: its deadline, and its bound on
                // the records rustls holds.
                Some(Https::Unflat(acceptor)) => {
                    if let Some(stream) =
                        tls::handshake(&acceptor, stream, peer, handshake_timeout).await
                    {
                        connection(stream, max_len, pipeline_flush).await
                    }
                }
                // As tokio-rustls's users write it.
                Some(Https::Stock(acceptor)) => {
                    if let Ok(stream) = acceptor.accept(stream).await {
                        connection(stream, max_len, pipeline_flush).await
                    }
                }
            }
        });
    }
}

/// A stock tokio-rustls acceptor: the certificate chain and key of the PEM
/// files `cert` and `key`, rustls's safe default protocol versions on
/// `provider`, no client authentication, ALPN `http/1.1`, and nothing else
/// changed from rustls's defaults.
fn stock_acceptor(cert: &Path, key: &Path, provider: tls::Provider) -> Result<TlsAcceptor, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider.crypto()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("--tls-cert and --tls-key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves one connection, cleartext or TLS, until it closes.
async fn connection<S>(stream: S, max_len: usize, pipeline_flush: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| async move { Ok::<_, Infallible>(respond(&req, max_len)) });
    let _ = hyper::server::conn::http1::Builder::new()
        .writev(true)
        .pipeline_flush(pipeline_flush)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

fn respond(req: &Request<hyper::body::Incoming>, max_len: usize) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, msg: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from_static(msg.as_bytes())));
        *r.status_mut() = status;
        r
    };
    let Some(len) = req.uri().path().strip_prefix("/end-string/") else {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    };
    let Ok(len) = len.parse::<usize>() else {
        return plain(StatusCode::BAD_REQUEST, "bad len\n");
    };
    if len > max_len {
        return plain(StatusCode::BAD_REQUEST, "len too large\n");
    }
    let c = match req.uri().query() {
        None | Some("kind=ascii") => 'a',
        Some("kind=latin1") => 'é',
        Some("kind=twobyte") => '€',
        Some(_) => return plain(StatusCode::BAD_REQUEST, "bad kind\n"),
    };
    let body = CACHE.with_borrow_mut(|cache| {
        cache
            .entry((len, c))
            .or_insert_with(|| Bytes::from(c.to_string().repeat(len)))
            .clone()
    });
    let mut r = Response::new(Full::new(body));
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(CONNECTION, HeaderValue::from_static("keep-alive"));
    h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
    r
}
