//! `axum-app`: unflat-server's `examples/app` written on axum 0.8, as an
//! application developer writes it there, for the side-by-side comparison
//! in docs/results/application.md (lines of code; req/s and CPU per
//! request on `/hello/{name}`). The same routes and the same bytes of
//! body: a greeting with its name and query decoded, a form login against
//! a 50 ms "database" answered 303 with six field lines, a timer, a
//! download with `Content-Disposition` and an `ETag`, five events on a
//! 20 ms timer, a header echoed from the query, 404 for the rest.
//!
//! `cargo run --release -p unflat-peers --bin axum-app -- --addr 127.0.0.1:0 --workers 1`
//! prints `axum-app at http://ADDR` once it listens.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use clap::Parser;
use http_body::Frame;

/// axum-app: examples/app on axum, for comparison.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    addr: std::net::SocketAddr,
    /// Worker threads (default: the cores).
    #[arg(long)]
    workers: Option<usize>,
}

const TEXT: &str = "text/plain; charset=utf-8";
const FILES: [(&str, &str); 2] = [
    (
        "notes.txt",
        "Rope-built heads, bodies at their own memory.\n",
    ),
    ("café menu.txt", "Croissant 2 €\nCafé 1,50 €\n"),
];

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()?
        .block_on(async {
            let sessions = Arc::new(AtomicU64::new(0));
            let app = Router::new()
                .route("/hello/{name}", get(hello))
                .route("/login", post(login))
                .route("/slow", get(slow))
                .route("/download/{name}", get(download))
                .route("/events", get(events))
                .route("/echo", get(echo))
                .fallback(|| async {
                    (
                        StatusCode::NOT_FOUND,
                        [(header::CONTENT_TYPE, TEXT)],
                        "not found\n",
                    )
                })
                .with_state(sessions);
            let listener = tokio::net::TcpListener::bind(args.addr).await?;
            println!("axum-app at http://{}", listener.local_addr()?);
            axum::serve(listener, app).await
        })
}

/// The pairs of a query or form, decoded.
fn pairs(raw: &[u8]) -> impl Iterator<Item = (String, String)> + '_ {
    form_urlencoded::parse(raw).map(|(k, v)| (k.into_owned(), v.into_owned()))
}

async fn hello(Path(name): Path<String>, RawQuery(query): RawQuery) -> impl IntoResponse {
    let greeting = query
        .as_deref()
        .and_then(|q| pairs(q.as_bytes()).find(|(k, _)| k == "greeting"))
        .map_or("Hello".to_string(), |(_, v)| v);
    (
        [(header::CONTENT_TYPE, TEXT)],
        format!("{greeting}, {name}!\n"),
    )
}

async fn login(State(sessions): State<Arc<AtomicU64>>, body: Bytes) -> Response {
    let session = sessions.fetch_add(1, Ordering::Relaxed) + 1;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (mut user, mut password) = (None, None);
    for (k, v) in pairs(&body) {
        match k.as_str() {
            "user" => user = Some(v),
            "password" => password = Some(v),
            _ => {}
        }
    }
    let (Some(user), Some("open sesame")) = (user, password.as_deref()) else {
        return (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, TEXT)],
            "wrong user or password\n",
        )
            .into_response();
    };
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT));
    let location = format!("/hello/{user}");
    let (Ok(location), Ok(user_cookie)) = (
        HeaderValue::from_str(&location),
        HeaderValue::from_str(&format!("user={user}; Path=/; Max-Age=86400")),
    ) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    h.insert(header::LOCATION, location);
    let sid = format!("session={session}; Path=/; HttpOnly; SameSite=Lax");
    h.append(
        header::SET_COOKIE,
        HeaderValue::from_str(&sid).expect("digits and ASCII"),
    );
    h.append(header::SET_COOKIE, user_cookie);
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-session-count",
        HeaderValue::from(sessions.load(Ordering::Relaxed)),
    );
    h.insert(header::VARY, HeaderValue::from_static("Cookie"));
    (StatusCode::SEE_OTHER, h, "signed in\n").into_response()
}

async fn slow() -> impl IntoResponse {
    tokio::time::sleep(Duration::from_millis(50)).await;
    ([(header::CONTENT_TYPE, TEXT)], "waited 50 ms\n")
}

async fn download(Path(name): Path<String>) -> Response {
    let Some((name, content)) = FILES.iter().find(|(n, _)| *n == name) else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, TEXT)],
            "no such file\n",
        )
            .into_response();
    };
    let mut hash = DefaultHasher::new();
    content.hash(&mut hash);
    let encoded: String = name
        .bytes()
        .map(|b| match b {
            b'0'..=b'9'
            | b'a'..=b'z'
            | b'A'..=b'Z'
            | b'!'
            | b'#'
            | b'$'
            | b'&'
            | b'+'
            | b'-'
            | b'.'
            | b'^'
            | b'_'
            | b'`'
            | b'|'
            | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let disposition = format!("attachment; filename*=UTF-8''{encoded}");
    let etag = format!("\"{}\"", hash.finish());
    (
        [
            (header::CONTENT_DISPOSITION, disposition),
            (header::ETAG, etag),
            (header::CONTENT_TYPE, TEXT.to_string()),
        ],
        *content,
    )
        .into_response()
}

/// Five events, one per 20 ms.
struct Events {
    sent: u64,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl http_body::Body for Events {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.sent == 5 {
            return Poll::Ready(None);
        }
        if let Some(wait) = &mut self.wait {
            std::task::ready!(wait.as_mut().poll(cx));
        }
        self.sent += 1;
        self.wait = Some(Box::pin(tokio::time::sleep(Duration::from_millis(20))));
        let line = format!("<p>event {}</p>\n", self.sent);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(line)))))
    }
}

async fn events() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        Body::new(Events {
            sent: 0,
            wait: None,
        }),
    )
}

async fn echo(RawQuery(query): RawQuery) -> Response {
    let v = query
        .as_deref()
        .and_then(|q| pairs(q.as_bytes()).find(|(k, _)| k == "v"))
        .map(|(_, v)| v)
        .unwrap_or_default();
    match HeaderValue::from_str(&v) {
        Ok(v) => (
            [
                (header::CONTENT_TYPE, HeaderValue::from_static(TEXT)),
                (header::HeaderName::from_static("x-echo"), v),
            ],
            "echoed\n",
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

use std::future::Future as _;
