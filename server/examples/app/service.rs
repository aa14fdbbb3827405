//! The application: eight routes on the core's async door. No socket and
//! no process here — `main.rs` serves it; the tests serve it too
//! (server/tests/suite/example_app.rs).

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use sha2::{Digest, Sha256};
use unflat_server::app::{get, post, Request, Response, Router, Status};

/// How long a "database" call takes (`/login`, `/slow`).
pub const DATABASE: Duration = Duration::from_millis(50);
/// Chunks `/events` sends, one per [`EVENT_EVERY`].
pub const EVENTS: u64 = 5;
/// See [`EVENTS`].
pub const EVENT_EVERY: Duration = Duration::from_millis(20);
/// The longest login form and upload taken.
pub const LOGIN_LIMIT: u64 = 4 * 1024;
/// See [`LOGIN_LIMIT`].
pub const UPLOAD_LIMIT: u64 = 10 << 20;

/// The files `/download/{name}` serves: name and content, with its `ETag`.
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
        let mut hash = std::collections::hash_map::DefaultHasher::new();
        content.hash(&mut hash);
        (
            name,
            Bytes::from(content),
            format!("\"{:x}\"", hash.finish()),
        )
    })
    .collect()
});

/// The application's routes.
pub fn router() -> Router {
    let sessions = Arc::new(AtomicU64::new(0));
    Router::new()
        .route("/hello/{name}", get(hello))
        .route(
            "/login",
            post(move |req| login(req, sessions.clone())).limit(LOGIN_LIMIT),
        )
        .route(
            "/slow",
            get(|_| async {
                tokio::time::sleep(DATABASE).await;
                "waited 50 ms\n"
            }),
        )
        .route("/download/{name}", get(download))
        .route("/events", get(|_| async { Response::html(events()) }))
        .route("/upload", post(upload).limit(UPLOAD_LIMIT))
        .route("/panic", get(panics))
        .fallback(|req: Request| async move {
            let error = serde_json::json!({ "error": "not found", "path": req.path() });
            Response::json(&error).status(Status::NOT_FOUND)
        })
}

async fn panics(_: Request) -> Response {
    panic!("a route that panics")
}

async fn hello(req: Request) -> Response {
    let greeting = match req.query_param("greeting") {
        Ok(greeting) => greeting.unwrap_or("Hello".into()).into_owned(),
        Err(e) => return (Status::BAD_REQUEST, format!("{e}\n")).into(),
    };
    let name = req.param("name").unwrap_or_default();
    Response::text(format!("{greeting}, {name}!\n")).header("Cache-Control", ("max-age=", 60))
}

#[derive(serde::Deserialize)]
struct Login {
    user: String,
    password: String,
}

async fn login(req: Request, sessions: Arc<AtomicU64>) -> Response {
    let form: Login = match req.form().await {
        Ok(form) => form,
        Err(rejected) => return rejected.into(),
    };
    tokio::time::sleep(DATABASE).await; // as a database would be asked
    if form.password != "open sesame" {
        return (Status::UNAUTHORIZED, "wrong user or password\n").into();
    }
    let session = sessions.fetch_add(1, Ordering::Relaxed) + 1;
    let user: String = form_urlencoded::byte_serialize(form.user.as_bytes()).collect();
    Response::redirect(Status::SEE_OTHER, ("/hello/", user.clone()))
        .header(
            "Set-Cookie",
            ("session=", session, "; Path=/; HttpOnly; SameSite=Lax"),
        )
        .header("Set-Cookie", ("user=", user, "; Path=/; Max-Age=86400"))
        .header("Cache-Control", "no-store")
}

async fn download(req: Request) -> Response {
    let name = req.param("name").unwrap_or_default();
    let Some((name, content, etag)) = FILES.iter().find(|(n, ..)| *n == name) else {
        return (Status::NOT_FOUND, "no such file\n").into();
    };
    if req.field_str("if-none-match") == Some(etag) {
        return Response::with_status(Status::NOT_MODIFIED).header("ETag", etag.clone());
    }
    let encoded: String = percent_encoding::utf8_percent_encode(name, ATTR_CHAR).collect();
    Response::text(content.clone())
        .header(
            "Content-Disposition",
            ("attachment; filename*=UTF-8''", encoded),
        )
        .header("ETag", etag.clone())
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

/// [`EVENTS`] chunks, one per [`EVENT_EVERY`].
fn events() -> unflat_server::app::Body {
    unflat_server::app::Body::stream(stream::unfold(0, |sent| async move {
        if sent == EVENTS {
            return None;
        }
        if sent > 0 {
            tokio::time::sleep(EVENT_EVERY).await;
        }
        Some((format!("<p>event {}</p>\n", sent + 1), sent + 1))
    }))
}

async fn upload(mut req: Request) -> Response {
    let (mut body, mut hash, mut bytes) = (req.body(), Sha256::new(), 0);
    while let Some(chunk) = body.chunk().await {
        hash.update(&chunk);
        bytes += chunk.len();
    }
    Response::text(format!("{bytes} bytes, sha256 {:x}\n", hash.finalize()))
}
