//! A hyper 1.x server that serves ropes without flattening them, through
//! `unflat::body::RopeBody`.
//!
//! ```sh
//! cargo run -p unflat --features http-body --example hyper_rope -- --addr 127.0.0.1:3003
//! curl http://127.0.0.1:3003/        # a ropey rope: frames point into its chunks
//! curl http://127.0.0.1:3003/mixed   # &str + Latin-1 + UTF-16, encoded frame by frame
//! ```
//!
//! The flags every example takes: `--addr HOST:PORT` (port 0 picks a free
//! one) or `--port PORT`; 127.0.0.1:3003 by default.
//!
//! `GET /` answers a `ropey::Rope` of about 30 KB: every data frame is a
//! `Bytes` pointing into one of the rope's own chunks, which hyper writes
//! with `writev` — no copy in user space. `GET /mixed` answers a
//! concatenation of a `&'static str`, a Latin-1 piece and a UTF-16 piece,
//! owned by a `Vec<Box<dyn Rope + Send + Sync>>` built once: it is encoded
//! to UTF-8 by the resumable encoder into bounded frames, never into one
//! flat string.

#[path = "support/args.rs"]
mod args;

use std::convert::Infallible;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use unflat::body::RopeBody;
use unflat::{Latin1, Rope, Utf16};

/// The text of `GET /`.
fn root_text() -> String {
    "unflat serves this rope from its own chunks \u{2014} d\u{e9}j\u{e0} vu \u{2713}\n".repeat(500)
}

/// The parts of `GET /mixed`: "<p>crème brûlée — €😀</p>\n" in three
/// representations.
fn mixed_parts() -> Vec<Box<dyn Rope + Send + Sync>> {
    vec![
        Box::new("<p>"),
        Box::new(Latin1(b"cr\xe8me br\xfbl\xe9e".to_vec())),
        Box::new(Utf16(
            " \u{2014} \u{20ac}\u{1F600}</p>\n"
                .encode_utf16()
                .collect::<Vec<u16>>(),
        )),
    ]
}

/// The ropes every request shares: cloning either is an `Arc` increment.
#[derive(Clone)]
struct Ropes {
    root: ropey::Rope,
    mixed: Arc<Vec<Box<dyn Rope + Send + Sync>>>,
}

fn respond(ropes: &Ropes, req: &Request<Incoming>) -> Response<RopeBody> {
    let (status, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/") => (StatusCode::OK, RopeBody::from(ropes.root.clone())),
        (&Method::GET, "/mixed") => (StatusCode::OK, RopeBody::new(ropes.mixed.clone())),
        _ => (StatusCode::NOT_FOUND, RopeBody::new("not found\n")),
    };
    let mut res = Response::new(body);
    *res.status_mut() = status;
    res.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = args::addr_from_args("127.0.0.1:3003", |arg, _| {
        Err(format!("unknown argument {arg:?}"))
    })
    .unwrap_or_else(|e| {
        eprintln!("hyper_rope: {e}; usage: hyper_rope [--addr HOST:PORT | --port PORT]");
        std::process::exit(2)
    });
    let ropes = Ropes {
        root: ropey::Rope::from_str(&root_text()),
        mixed: Arc::new(mixed_parts()),
    };
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("hyper_rope at http://{}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let ropes = ropes.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let res = respond(&ropes, &req);
                async move { Ok::<_, Infallible>(res) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                eprintln!("connection: {e}");
            }
        });
    }
}
