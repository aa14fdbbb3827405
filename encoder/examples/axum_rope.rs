//! An axum 0.8 server whose handlers answer ropes as `Response<RopeBody>`,
//! never flattened (`unflat::body::RopeBody`, feature `http-body`).
//!
//! ```sh
//! cargo run -p unflat --features http-body --example axum_rope -- --addr 127.0.0.1:3002
//! curl http://127.0.0.1:3002/rope                      # a ropey rope: frames point into its chunks
//! curl http://127.0.0.1:3002/concat                    # four ropes of three kinds, encoded in frames
//! curl http://127.0.0.1:3002/utf16                     # UTF-16 code units, sent as UTF-8
//! curl 'http://127.0.0.1:3002/utf16?charset=utf-16le'  # the same text as UTF-16LE
//! ```
//!
//! The flags every example takes: `--addr HOST:PORT` (port 0 takes any free
//! port; the first line printed names the address) or `--port PORT`, short
//! for `--addr 127.0.0.1:PORT`; 127.0.0.1:3002 by default.
//!
//! axum takes any `http_body::Body<Data = Bytes>` a handler returns and
//! hands its frames to hyper as they are, so each route costs what it does
//! with hyper alone (`examples/hyper_rope.rs`): `/rope`'s frames are `Bytes`
//! pointing into the ropey rope's own chunks (zero copies in user space),
//! and the other ropes are encoded by the resumable encoder into frames of at
//! most 16 KiB. Every body's size is known before its first frame, so every
//! response has a `Content-Length`, never chunked framing.

#[path = "support/args.rs"]
mod args;

use std::process::ExitCode;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header::{HeaderValue, CONTENT_TYPE};
use axum::http::{Response, StatusCode, Uri};
use axum::routing::get;
use axum::Router;
use unflat::body::RopeBody;
use unflat::{Encoding, Latin1, Mode, Rope, Utf16};

/// The ropes every request shares, built once: cloning any of them is an
/// `Arc` increment.
#[derive(Clone)]
pub struct Ropes {
    /// `GET /rope`: about 30 KB of UTF-8 in a ropey rope of many chunks.
    rope: ropey::Rope,
    /// `GET /concat`: a concatenation of four ropes. A `Concat` borrows its
    /// parts, so it lives on the stack of the code that writes it; a body
    /// outlives its handler, so it holds the same concatenation owned, as
    /// a vector of boxed ropes.
    concat: Arc<Vec<Box<dyn Rope + Send + Sync>>>,
    /// `GET /utf16`: text as UTF-16 code units, as a JavaScript string holds
    /// it (with surrogate pairs).
    utf16: Arc<[u16]>,
}

impl Ropes {
    /// Builds the three bodies.
    pub fn new() -> Ropes {
        let line =
            "axum serves this rope from its own chunks \u{2014} d\u{e9}j\u{e0} vu \u{2713}\n";
        let concat: Vec<Box<dyn Rope + Send + Sync>> = vec![
            Box::new("<p>"),
            Box::new(Latin1(b"cr\xe8me br\xfbl\xe9e".to_vec())),
            Box::new(Utf16(
                " \u{2014} \u{20ac}\u{1F600}"
                    .encode_utf16()
                    .collect::<Vec<u16>>(),
            )),
            Box::new(ropey::Rope::from_str("</p>\n")),
        ];
        let utf16 = "Gr\u{fc}\u{df}e aus UTF-16 \u{2014} \u{1D11E} \u{266A}\n"
            .repeat(1000)
            .encode_utf16()
            .collect();
        Ropes {
            rope: ropey::Rope::from_str(&line.repeat(500)),
            concat: Arc::new(concat),
            utf16,
        }
    }
}

impl Default for Ropes {
    fn default() -> Ropes {
        Ropes::new()
    }
}

/// The routes, with their shared ropes as state.
pub fn router() -> Router {
    Router::new()
        .route("/rope", get(rope))
        .route("/concat", get(concat))
        .route("/utf16", get(utf16))
        .fallback(not_found)
        .with_state(Ropes::new())
}

/// `body` with `status` and a `Content-Type`.
fn respond(status: StatusCode, content_type: &'static str, body: RopeBody) -> Response<RopeBody> {
    let mut res = Response::new(body);
    *res.status_mut() = status;
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    res
}

const PLAIN_UTF8: &str = "text/plain; charset=utf-8";

/// `GET /rope`: the ropey rope, its chunks sent as they are.
pub async fn rope(State(ropes): State<Ropes>) -> Response<RopeBody> {
    respond(StatusCode::OK, PLAIN_UTF8, RopeBody::from(ropes.rope))
}

/// `GET /concat`: the concatenation, encoded to UTF-8 in frames.
pub async fn concat(State(ropes): State<Ropes>) -> Response<RopeBody> {
    let body = RopeBody::new(ropes.concat);
    respond(StatusCode::OK, "text/html; charset=utf-8", body)
}

/// `GET /utf16[?charset=utf-8|utf-16le]`: the UTF-16 text, transcoded to
/// UTF-8 (the default) or written as UTF-16LE, frame by frame. Any other
/// query is a 400 that names what was wrong.
pub async fn utf16(State(ropes): State<Ropes>, uri: Uri) -> Response<RopeBody> {
    let (encoding, content_type) = match charset(uri.query().unwrap_or("")) {
        Ok(Charset::Utf8) => (Encoding::Utf8, PLAIN_UTF8),
        Ok(Charset::Utf16Le) => (Encoding::Utf16Le, "text/plain; charset=utf-16le"),
        Err(message) => {
            return respond(StatusCode::BAD_REQUEST, PLAIN_UTF8, RopeBody::new(message));
        }
    };
    // Both encodings hold every character, so strict mode refuses nothing.
    match RopeBody::encoded(Utf16(ropes.utf16), encoding, Mode::Strict) {
        Ok(body) => respond(StatusCode::OK, content_type, body),
        Err(e) => respond(
            StatusCode::INTERNAL_SERVER_ERROR,
            PLAIN_UTF8,
            RopeBody::new(format!("{e}\n")),
        ),
    }
}

/// The encodings `/utf16` is offered in.
enum Charset {
    Utf8,
    Utf16Le,
}

/// `/utf16`'s query: empty, or `charset=utf-8` / `charset=utf-16le`.
fn charset(query: &str) -> Result<Charset, String> {
    let mut charset = Charset::Utf8;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        charset = match pair.split_once('=') {
            Some(("charset", "utf-8")) => Charset::Utf8,
            Some(("charset", "utf-16le")) => Charset::Utf16Le,
            Some(("charset", other)) => {
                return Err(format!(
                    "unknown charset {other:?}: use utf-8 or utf-16le\n"
                ))
            }
            _ => return Err(format!("unknown query parameter {pair:?}: only charset\n")),
        };
    }
    Ok(charset)
}

/// Any other path.
async fn not_found(uri: Uri) -> Response<RopeBody> {
    let body = RopeBody::new(format!("no route for {}\n", uri.path()));
    respond(StatusCode::NOT_FOUND, PLAIN_UTF8, body)
}

/// Usage errors exit with status 2, and an address that cannot be bound
/// with 1, each as one line naming what was wrong.
#[tokio::main]
async fn main() -> ExitCode {
    let addr = match args::addr_from_args("127.0.0.1:3002", |arg, _| {
        Err(format!("unknown argument {arg:?}"))
    }) {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("axum_rope: {e}; usage: axum_rope [--addr HOST:PORT | --port PORT]");
            return ExitCode::from(2);
        }
    };
    match serve(&addr).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("axum_rope: --addr {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Serves the router on `addr` until Ctrl-C.
async fn serve(addr: &str) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("axum_rope at http://{}/", listener.local_addr()?);
    axum::serve(listener, router())
        .with_graceful_shutdown(async {
            // Ctrl-C stops accepting and lets answers in progress finish;
            // if the signal cannot be listened for, the server runs on.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .await
}
