//! `axum-app`: unflat-server's `examples/app` written on axum 0.8, as an
//! application developer writes it there, for the side-by-side comparison
//! in docs/results/application.md (lines of code; instructions and
//! allocations per request). The same routes and the same bytes of body.
//!
//! `cargo run --release -p unflat-peers --bin axum-app -- --addr 127.0.0.1:0 --workers 1`
//! prints `axum-app at http://ADDR` once it listens.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use clap::Parser;
use futures_util::{stream, StreamExt};
use sha2::{Digest, Sha256};

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

const DATABASE: Duration = Duration::from_millis(50);
const TEXT: &str = "text/plain; charset=utf-8";

static FILES: LazyLock<Vec<(&str, Bytes, String)>> = LazyLock::new(|| {
    let report: String = (0..100_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    [
        ("report.txt", report),
        ("café menu.txt", "Croissant 2 €\nCafé 1,50 €\n".into()),
    ]
    .into_iter()
    .map(|(name, content)| {
        let mut hash = DefaultHasher::new();
        content.hash(&mut hash);
        (
            name,
            Bytes::from(content),
            format!("\"{:x}\"", hash.finish()),
        )
    })
    .collect()
});

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
            let app = Router::new()
                .route("/hello/{name}", get(hello))
                .route("/login", post(login).layer(DefaultBodyLimit::max(4 * 1024)))
                .route("/slow", get(slow))
                .route("/download/{name}", get(download))
                .route("/events", get(events))
                .route(
                    "/upload",
                    post(upload).layer(DefaultBodyLimit::max(10 << 20)),
                )
                .route("/panic", get(panics))
                .fallback(|req: Request| async move {
                    let error =
                        serde_json::json!({ "error": "not found", "path": req.uri().path() });
                    (StatusCode::NOT_FOUND, Json(error))
                })
                .with_state(Arc::new(AtomicU64::new(0)))
                .layer(tower_http::catch_panic::CatchPanicLayer::new());
            let listener = tokio::net::TcpListener::bind(args.addr).await?;
            println!("axum-app at http://{}", listener.local_addr()?);
            axum::serve(listener, app).await
        })
}

async fn panics() -> Response {
    panic!("a route that panics")
}

#[derive(serde::Deserialize)]
struct Greeting {
    greeting: Option<String>,
}

async fn hello(Path(name): Path<String>, Query(q): Query<Greeting>) -> impl IntoResponse {
    let greeting = q.greeting.unwrap_or_else(|| "Hello".into());
    (
        [
            (header::CONTENT_TYPE, TEXT),
            (header::CACHE_CONTROL, "max-age=60"),
        ],
        format!("{greeting}, {name}!\n"),
    )
}

#[derive(serde::Deserialize)]
struct Login {
    user: String,
    password: String,
}

async fn login(State(sessions): State<Arc<AtomicU64>>, Form(form): Form<Login>) -> Response {
    tokio::time::sleep(DATABASE).await; // as a database would be asked
    if form.password != "open sesame" {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, TEXT)],
            "wrong user or password\n",
        )
            .into_response();
    }
    let session = sessions.fetch_add(1, Ordering::Relaxed) + 1;
    let user: String = form_urlencoded::byte_serialize(form.user.as_bytes()).collect();
    let mut h = HeaderMap::new();
    let sid = format!("session={session}; Path=/; HttpOnly; SameSite=Lax");
    h.append(header::SET_COOKIE, sid.parse().expect("ASCII"));
    let user_cookie = format!("user={user}; Path=/; Max-Age=86400");
    h.append(
        header::SET_COOKIE,
        user_cookie.parse().expect("percent-encoded"),
    );
    h.insert(header::CACHE_CONTROL, "no-store".parse().expect("ASCII"));
    (h, Redirect::to(&format!("/hello/{user}"))).into_response()
}

async fn slow() -> impl IntoResponse {
    tokio::time::sleep(DATABASE).await;
    ([(header::CONTENT_TYPE, TEXT)], "waited 50 ms\n")
}

async fn download(Path(name): Path<String>, headers: HeaderMap) -> Response {
    let Some((name, content, etag)) = FILES.iter().find(|(n, ..)| *n == name) else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, TEXT)],
            "no such file\n",
        )
            .into_response();
    };
    if headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v == etag.as_str())
    {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag.clone())]).into_response();
    }
    let encoded: String = percent_encoding::utf8_percent_encode(name, ATTR_CHAR).collect();
    let disposition = format!("attachment; filename*=UTF-8''{encoded}");
    (
        [
            (header::CONTENT_TYPE, TEXT.to_string()),
            (header::CONTENT_DISPOSITION, disposition),
            (header::ETAG, etag.clone()),
        ],
        content.clone(),
    )
        .into_response()
}

/// What RFC 8187 leaves unescaped in `filename*`.
const ATTR_CHAR: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'!')
    .remove(b'#')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b'-')
    .remove(b'.')
    .remove(b'^')
    .remove(b'_')
    .remove(b'`')
    .remove(b'|')
    .remove(b'~');

async fn events() -> impl IntoResponse {
    let events = stream::unfold(0, |sent| async move {
        if sent == 5 {
            return None;
        }
        if sent > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Some((
            Ok::<_, std::io::Error>(format!("<p>event {}</p>\n", sent + 1)),
            sent + 1,
        ))
    });
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        Body::from_stream(events),
    )
}

async fn upload(body: Body) -> Response {
    let (mut stream, mut hash, mut bytes) = (body.into_data_stream(), Sha256::new(), 0);
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else {
            return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n").into_response();
        };
        hash.update(&chunk);
        bytes += chunk.len();
    }
    (
        [(header::CONTENT_TYPE, TEXT)],
        format!("{bytes} bytes, sha256 {:x}\n", hash.finalize()),
    )
        .into_response()
}
