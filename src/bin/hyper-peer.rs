//! `hyper-peer`: the benchmark's reference server, hyper 1.x used well.
//!
//! It serves `GET /end-string/{len}?kind=ascii|latin1|twobyte` with the
//! headers unflat-server sends (Content-Type, Content-Length, Date,
//! Connection: keep-alive, Keep-Alive) and a cached `Bytes` body, on a
//! multi-threaded tokio runtime, with hyper's vectored write queue forced on
//! (`writev(true)`), so the body goes to the socket without being copied.
//!
//! `cargo run --release --bin hyper-peer -- --addr 127.0.0.1:0 --workers 2`
//! prints `hyper-peer at http://ADDR` once it listens.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use clap::Parser;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

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
}

type Cache = Arc<Mutex<HashMap<(usize, char), Bytes>>>;

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
    let listener = TcpListener::bind(args.addr).await?;
    println!("hyper-peer at http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    let cache: Cache = Arc::default();
    let max_len = args.max_len;
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let cache = cache.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let cache = cache.clone();
                async move { Ok::<_, Infallible>(respond(&req, &cache, max_len)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .writev(true)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn respond(
    req: &Request<hyper::body::Incoming>,
    cache: &Cache,
    max_len: usize,
) -> Response<Full<Bytes>> {
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
    let body = cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry((len, c))
        .or_insert_with(|| Bytes::from(c.to_string().repeat(len)))
        .clone();
    let mut r = Response::new(Full::new(body));
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(CONNECTION, HeaderValue::from_static("keep-alive"));
    h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
    r
}
