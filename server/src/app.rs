//! Writing an application on the core: async handlers on a [`Router`],
//! each taking a [`Request`] and returning a [`Response`], served by
//! [`run`] from a `main` of a few lines. Everything an application needs
//! is on this page; [`reply`] is the zero-allocation door beneath it.
//!
//! ```no_run
//! use unflat_server::app::{get, post, run, Config, Request, Response, Router, Status};
//!
//! async fn hello(req: Request) -> Response {
//!     let name = req.param("name").unwrap_or("you");
//!     Response::text(format!("Hello, {name}!\n")).header("Cache-Control", ("max-age=", 60))
//! }
//!
//! async fn upload(mut req: Request) -> Response {
//!     let mut body = req.body();
//!     let mut bytes = 0;
//!     while let Some(chunk) = body.chunk().await {
//!         bytes += chunk.len(); // hashed, forwarded, counted as it arrives
//!     }
//!     Response::text(format!("{bytes} bytes\n")).status(Status::CREATED)
//! }
//!
//! fn main() -> std::io::Result<()> {
//!     let config = Config::from_app_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
//!     let app = Router::new()
//!         .route("/hello/{name}", get(hello))
//!         .route("/upload", post(upload).limit(10 << 20));
//!     run(config, app)
//! }
//! ```
//!
//! A login answered with a redirect and cookies, a download with its
//! `ETag` and 304, a stream of events, and a JSON 404:
//!
//! ```no_run
//! use std::time::Duration;
//! use unflat_server::app::{get, post, Body, Request, Response, Router, Status};
//!
//! #[derive(serde::Deserialize)]
//! struct Login { user: String, password: String }
//!
//! async fn login(req: Request) -> Response {
//!     let form: Login = match req.form().await {
//!         Ok(form) => form,
//!         Err(rejected) => return rejected.into(), // 415 or 400, and why
//!     };
//!     if form.password != "open sesame" {
//!         return (Status::UNAUTHORIZED, "wrong user or password\n").into();
//!     }
//!     Response::redirect(Status::SEE_OTHER, "/")
//!         .header("Set-Cookie", ("user=", form.user, "; Path=/; HttpOnly"))
//!         .header("Set-Cookie", ("seen=", 1, "; Max-Age=86400"))
//!         .header("Cache-Control", "no-store")
//! }
//!
//! async fn download(req: Request) -> Response {
//!     const ETAG: &str = "\"v1\"";
//!     if req.field_str("if-none-match") == Some(ETAG) {
//!         return Response::with_status(Status::NOT_MODIFIED).header("ETag", ETAG);
//!     }
//!     Response::text("the file's contents\n")
//!         .header("Content-Disposition", "attachment; filename*=UTF-8''caf%C3%A9.txt")
//!         .header("ETag", ETAG)
//! }
//!
//! async fn events(_: Request) -> Response {
//!     // Any `futures_core::Stream` of chunks (`String`, `Bytes`, `&'static
//!     // str`, a ropey rope); here five, 20 ms apart.
//!     let events = futures_util::stream::unfold(0, |n| async move {
//!         (n < 5).then_some(())?;
//!         tokio::time::sleep(Duration::from_millis(20)).await;
//!         Some((format!("event {n}\n"), n + 1))
//!     });
//!     Response::text(Body::stream(events))
//! }
//!
//! let app = Router::new()
//!     .route("/login", post(login).limit(4 * 1024))
//!     .route("/download", get(download))
//!     .route("/events", get(events))
//!     .fallback(|req: Request| async move {
//!         let error = serde_json::json!({ "error": "not found", "path": req.path() });
//!         Response::json(&error).status(Status::NOT_FOUND)
//!     });
//! # drop(app);
//! ```
//!
//! # Handlers
//! A handler is an `async fn(Request) -> R` or a closure returning a
//! future, where `R` is a [`Response`] or becomes one: a [`Status`] (no
//! body), `&'static str` or `String` (200, `text/plain; charset=utf-8`),
//! `(Status, text)`. It runs on the connection that read its request: it
//! is polled once as the request is routed (a handler that awaits nothing
//! is answered at once), then after each read of its body, then until it
//! is done. It may await anything on the tokio runtime (timers, a
//! database client); while its body is being read, what it awaits besides
//! the body is looked at again as more body arrives, and once the body is
//! whole. A request without a body costs two allocations: its head,
//! copied once into one buffer, and the handler's future with room for
//! its answer; one with a body adds the body's way in and its buffer.
//! Whatever the handler allocates itself comes on top
//! (docs/results/application.md).
//!
//! # The request
//! [`Request`] owns what a handler reads of the head: [`Request::method`],
//! [`Request::path`] (as sent) and [`Request::decoded_path`], the route's
//! parameters ([`Request::param`]: percent-decoded within their segment, a
//! `%2F` stays inside as `/`; a `{*rest}` as sent; a path whose escapes
//! are not UTF-8 is answered 400 by the core before any route is tried),
//! the query
//! ([`Request::query_param`], [`Request::query_pairs`]: `+` a space, an
//! undecodable pair an error naming it, for your 400), and the fields by
//! name ([`Request::field`], any case; [`Request::field_values`] for a
//! repeated one).
//!
//! # The request body
//! Read whole ([`Request::bytes`], [`Request::form_pairs`]) or a piece at
//! a time as it arrives ([`Request::body`], then [`RequestBody::chunk`];
//! it is also a `futures_core::Stream`). While 64 KiB are read and not
//! taken, the connection reads no more: a handler that is slow to consume
//! slows its client, it does not buffer the upload. Every body is bounded:
//! by `--max-body` (1 MiB by default), and below it by the route's
//! [`MethodRouter::limit`]. A longer body is answered `413` by the core
//! and the connection closes: from its `Content-Length` before a byte of
//! it is read and before the handler is begun (a client that sent `Expect:
//! 100-continue` gets the 413 instead of `100 Continue`), or, chunked, as
//! it passes the limit — the handler, begun and reading, is then dropped
//! unanswered. A handler that answers 4xx or 5xx before asking for the
//! body spares a client that waits for `100 Continue` the sending of it.
//! Chunked framing and trailers are the core's; what is held (the head's
//! copy, the body's untaken bytes) counts on the server's memory account
//! (`--memory-limit`, `--connection-memory`: past it, 503). While a
//! handler holds its body untaken, the connection waits for it as for any
//! of its work: no deadline of the core's, and an upload under way is not
//! given up at `--max-connections`. Once the handler is done and nothing
//! it handed its body to (a response's stream, a task of its own) holds
//! it, the rest is read and dropped; while something does, the rest is
//! kept for it, whole, within the limit.
//!
//! # The response
//! [`Response::text`], [`Response::html`], [`Response::bytes`],
//! [`Response::stream`], [`Response::redirect`], [`Response::with_status`],
//! then [`Response::status`], [`Response::header`] and [`Response::body`].
//! Statuses are [`Status`]'s constants (`Status::OK`, `Status::SEE_OTHER`,
//! `Status::UNAUTHORIZED`, `Status::NOT_FOUND`, `Status::PAYLOAD_TOO_LARGE`,
//! …) or [`Status::from_code`]; a final status is 200–599 (anything else is
//! answered 500 and logged). A field value is text (written as Latin-1: a
//! character above U+00FF is refused), bytes, an integer, a tuple of up to
//! four of them — `("sid=", id, "; Path=/; HttpOnly")` — or any rope
//! ([`FieldValue::rope`]), written straight into the head in the one walk
//! that checks it: a CR, LF or other control character, or a field the
//! core writes itself (`Content-Length`, `Transfer-Encoding`,
//! `Connection`, `Keep-Alive`, `Date`, `X-Content-Type-Options`), makes
//! the response a 500 with the cause logged, and nothing of it is sent.
//! A body is bytes (`&'static str`, `String`, `Vec<u8>`, [`Bytes`](bytes::Bytes):
//! sent from where they are when large, never copied into a buffer of the
//! core's), a ropey rope, text of any kind ([`Body::rope`]: Latin-1 and
//! UTF-16 pieces encoded to UTF-8 as they are sent), a file's contents
//! ([`Body::file`]), or a stream of chunks ([`Body::stream`],
//! [`Body::try_stream`]): the next chunk is asked for while less than
//! 64 KiB is queued, so a slow reader holds that and one chunk.
//!
//! **Framing is the core's.** A body of known length is sent with
//! `Content-Length`, a stream chunked (to HTTP/1.0, ended by the close).
//! `HEAD` is answered by the route's `GET` handler: the same head, no body.
//! 204 and 304 go without body or `Content-Length`: for a conditional
//! `GET`, compare `If-None-Match` with your `ETag` and answer
//! `Response::with_status(Status::NOT_MODIFIED).header("ETag", etag)`.
//! Persistence and `Date` are added, and `X-Content-Type-Options:
//! nosniff` to a response with a body.
//!
//! # Routing
//! [`Router::route`] takes a path pattern — literal segments, `{name}`,
//! a last `{*rest}` — and a [`MethodRouter`] ([`get`], [`post`], [`put`],
//! [`delete`], [`patch`], [`options`], chained: `get(show).post(update)`).
//! The first matching route answers; a method it has no handler for is
//! answered `405` with `Allow`; a path no route matches goes to the
//! [`Router::fallback`] (`404 not found` by default).
//!
//! # Panics, errors, logging
//! A handler that panics is answered `500`, the panic logged once (its
//! message escaped, its place), and the connection goes on; a stream that
//! fails ([`Body::try_stream`]) ends as a panic does, and one already
//! begun is cut short, never ended as if whole. The log is the core's:
//! `--log-level`, `--log-format text|json`, `--access-log`; a handler's
//! own `tracing` events go to the same place.
//!
//! # Running
//! [`run`] serves a router on a runtime of `--workers` threads until
//! SIGINT or SIGTERM, then lets responses finish within
//! `--grace`. Its flags are the core's ([`Config::from_app_args`];
//! `--help` lists them, each with its `UNFLAT_*` variable); an application
//! with flags of its own adds them to the core's command and reads both
//! from the same matches:
//!
//! ```no_run
//! use unflat_server::app::{get, run, Config, Response, Router};
//!
//! fn main() -> std::io::Result<()> {
//!     let command = clap::Command::new("greeter")
//!         .arg(clap::arg!(--greeting <TEXT> "what to greet with").default_value("Hello"));
//!     let matches = Config::app_command(command).get_matches();
//!     let config = Config::from_app_matches(&matches).unwrap_or_else(|e| e.exit());
//!     let greeting: &'static str = matches.get_one::<String>("greeting").unwrap().clone().leak();
//!     run(config, Router::new().route("/", get(move |_| async move { greeting })))
//! }
//! ```
//!
//! Inside a runtime of the application's (`#[tokio::main]`),
//! [`Server::bind_with`] with `|making| router.observed(making.standard())`,
//! then [`Server::serve`], serve it there (on a runtime of `--workers`
//! threads of its own when the caller's has not that many).
//!
//! # Operating it
//! `--admin-addr 127.0.0.1:9100` serves, on a port of its own and never
//! through the router, `/metrics` (every response counted by status, under
//! `route="all"`; the memory account, the connections, the process),
//! `/livez`, and `/readyz` (503 from SIGTERM on, while the server drains,
//! so that a balancer stops sending); `--shutdown-delay` keeps serving for
//! as long as a balancer takes to hear it. docs/operations.md lists the
//! series and every flag.

mod body;
pub mod reply;
mod request;
mod response;
mod router;

pub use body::RequestBody;
#[cfg(any(feature = "json", feature = "form"))]
pub use request::Rejection;
pub use request::{Request, MAX_PARAMS};
pub use response::{Body, FieldValue, IntoPart, Response, Text};
pub use router::{
    delete, get, options, patch, post, put, Endpoint, Exchange, MethodRouter, Routed, Router,
    Running,
};
pub use unflat::head::Status;

pub use crate::config::Config;
pub use crate::response::Chunk;
pub use crate::server::{Making, Server};

/// Serves `router` as `config` says — `--workers` threads, the core's
/// log, its access log and counters — until SIGINT or SIGTERM, then lets
/// responses finish within `--grace`; SIGHUP reloads the TLS
/// certificate. Blocks. Fails, before serving anything, on a configuration
/// that cannot work or an address that cannot be bound.
pub fn run(config: Config, router: Router) -> std::io::Result<()> {
    let server = Server::bind_with(config, |making| router.observed(making.standard()))?;
    server.run_on_signals(|| {})
}
