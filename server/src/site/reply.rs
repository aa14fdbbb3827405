//! What a request is answered with, and how each answer writes itself.
//!
//! [`crate::routes`] chooses a [`Reply`] from the request head; the session
//! calls [`Reply::respond`] once the request body has been read, and the
//! reply turns itself into a [`Response`] for the server's
//! [`Writer`](crate::response::Writer): the help text, an `/end-string`
//! body or a `/large` payload (from the cache, or built first by a [`Job`]),
//! the echo (JSON or raw), the health check, the metrics, or an error with
//! its reason. Nothing else in the server knows what a reply's response
//! looks like.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use base64::Engine as _;
use unflat::head::{Line, Status};
use unflat::queue::WriteQueue;

use crate::bodies::{Body as Built, BodyKey, Memo, Text, Unavailable};
use crate::config::Strategy;
use crate::memory::{Full, Lease};
use crate::request::RequestHead;
use crate::response::{Body, Exchange, Response, Written};
use crate::App;

/// The routes, for the help text and 404s.
pub const ROUTES: &str = "\
GET|HEAD /end-string/{len}?kind=ascii|latin1|twobyte&body=flat|rope
GET|HEAD /large/{bytes}
*        /echo[?format=json|raw]
GET|HEAD /healthz     200 ok; 503 while shutting down
GET|HEAD /metrics     OpenMetrics text (Prometheus)
GET|HEAD /
OPTIONS  * and every path above (204 with Allow)
";

/// The text of `GET /` and of the start-up banner: over HTTPS when
/// `https`, naming the self-signed certificate's PEM (`trust`) if there is
/// one.
pub fn help_text(
    addr: SocketAddr,
    strategy: Strategy,
    https: bool,
    trust: Option<&Path>,
) -> String {
    let scheme = if https { "https" } else { "http" };
    let trust = trust.map_or(String::new(), |pem| {
        format!(
            "\nSelf-signed certificate for localhost (removed when the server stops): {}\n  curl --cacert {} https://localhost:{}/\n",
            pem.display(),
            pem.display(),
            addr.port()
        )
    });
    format!(
        "unflat-server ({strategy} strategy) at {scheme}://{addr}\n{trust}\n\
         Routes:\n{ROUTES}\n\
         /end-string bodies: body=flat (the default) keeps the text as one flat\n\
         string, sent as one iovec (ascii) or encoded behind the head (latin1,\n\
         twobyte); body=rope keeps it as a ropey rope of ~1 KiB chunks, copied\n\
         behind the head (a frame at a time when longer than one): chunks that\n\
         short cost the kernel more as iovecs than as a copy.\n\n\
         Benchmark it:\n  wrk -s wrk_scripts/end-string.lua {scheme}://{addr} -- 1024\n",
        strategy = strategy.name()
    )
}

/// What a request is answered with.
#[derive(Debug)]
pub enum Reply {
    /// `GET /`: the help text.
    Help,
    /// `/end-string/{len}?kind=…&body=…` or `/large/{bytes}`: answered from
    /// the key alone for `HEAD`; a `GET` needs the body, from the cache or
    /// built by a [`Job`].
    Body(BodyKey),
    /// A body at hand, cached or built.
    Ready(Arc<Built>),
    /// `/healthz`: 200 `ok`, or 503 once shutdown has begun, so that a load
    /// balancer stops sending while the server drains.
    Health,
    /// `/metrics`: the counters, in the OpenMetrics text format.
    Metrics,
    /// `/echo`: the request as received; the body is added once read.
    Echo(Echo),
    /// `OPTIONS`: 204 with the methods allowed on the path, or on some path
    /// of the server for `OPTIONS *`.
    Options {
        /// `OPTIONS *`.
        server_wide: bool,
    },
    /// An error with a plain-text reason.
    Error {
        /// The status.
        status: Status,
        /// Why.
        reason: Cow<'static, str>,
        /// A field line besides `Content-Type`, if any.
        field: Option<ErrorField>,
    },
}

/// The field line an error sends besides its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorField {
    /// `Allow: GET, HEAD, OPTIONS` (405).
    Allow,
    /// `Retry-After: 1` (503: the server is at a limit now).
    RetryAfter,
}

/// How `/echo` answers.
#[derive(Debug)]
pub enum Echo {
    /// `format=json` (the default): method, target, version, fields and
    /// body, each base64-encoded.
    Json(EchoJson),
    /// `format=raw`: the request body exactly as received, as
    /// `application/octet-stream`.
    Raw,
}

impl Reply {
    /// An error reply.
    pub fn error(status: Status, reason: impl Into<Cow<'static, str>>) -> Reply {
        Reply::Error {
            status,
            reason: reason.into(),
            field: None,
        }
    }

    /// 503 with `Retry-After`: the server cannot take this request now.
    pub fn unavailable(reason: impl Into<Cow<'static, str>>) -> Reply {
        Reply::Error {
            status: Status::SERVICE_UNAVAILABLE,
            reason: reason.into(),
            field: Some(ErrorField::RetryAfter),
        }
    }

    /// 503 for want of memory, naming the limit.
    pub fn out_of_memory(full: Full) -> Reply {
        Reply::unavailable(format!(
            "the server's memory is at its limit ({}); try again later",
            full.limit
        ))
    }

    /// 404, with the routes there are.
    pub fn not_found(path: &str) -> Reply {
        Reply::error(
            Status::NOT_FOUND,
            format!("no route for {path}; routes:\n{ROUTES}"),
        )
    }

    /// 405 for a path that takes GET, HEAD and OPTIONS, with `Allow`.
    pub fn method_not_allowed(method: &str, path: &str) -> Reply {
        Reply::Error {
            status: Status::METHOD_NOT_ALLOWED,
            reason: Cow::Owned(format!(
                "{method} is not allowed on {path}; use GET, HEAD or OPTIONS"
            )),
            field: Some(ErrorField::Allow),
        }
    }

    /// The JSON echo of `head`, waiting for its body.
    pub fn echo_json(head: &RequestHead<'_>) -> Reply {
        Reply::Echo(Echo::Json(EchoJson::new(head)))
    }

    /// True for `/echo`, whose request body is kept.
    pub fn wants_body(&self) -> bool {
        matches!(self, Reply::Echo(_))
    }

    /// Bytes the reply holds while it waits for its request body: the echo's
    /// JSON so far (every field of the head, base64-encoded), or an error's
    /// reason made for this request.
    pub fn held(&self) -> usize {
        match self {
            Reply::Echo(Echo::Json(echo)) => echo.prefix.capacity(),
            Reply::Error {
                reason: Cow::Owned(reason),
                ..
            } => reason.capacity(),
            _ => 0,
        }
    }

    /// Makes the reply ready to write, or gives the job that makes it: the
    /// body of a `GET` that is not at hand (`memo` remembers an
    /// `/end-string` one), to wait for while it is built off the async
    /// workers. A `HEAD` needs no body: it is answered from the key.
    pub fn prepare(&mut self, app: &App, exchange: Exchange, memo: &mut Memo) -> Option<Job> {
        let Reply::Body(key) = *self else {
            return None;
        };
        if !exchange.sends_content() {
            return None;
        }
        let at_hand = match key {
            BodyKey::Text(text) => app.bodies.text(text, memo),
            BodyKey::Large(_) => app.bodies.cached(key),
        };
        if let Some(body) = at_hand {
            *self = Reply::Ready(body);
            return None;
        }
        let bodies = app.bodies.clone();
        Some(Job::new(async move {
            match bodies.get(key).await {
                Ok(body) => Reply::Ready(body),
                Err(Unavailable::Memory(full)) => Reply::out_of_memory(full),
                Err(Unavailable::Failed) => Reply::unavailable("the body could not be built"),
            }
        }))
    }

    /// The body this reply sends, if it is a built one (the session keeps
    /// it alive until the response is written).
    pub fn into_body(self) -> Option<Arc<Built>> {
        match self {
            Reply::Ready(body) => Some(body),
            _ => None,
        }
    }

    /// Queues the response; says what was written. Refused with [`Full`],
    /// queueing nothing, when the connection's lease cannot cover it.
    pub fn respond(&self, to: To<'_>, queue: &mut WriteQueue) -> Result<Written, Full> {
        let app = to.app;
        let fields = &app.fields;
        let mut besides = to.besides;
        // Bodies made here for this response live until it is queued.
        let json: Vec<u8>;
        let text: Cow<'_, str>;
        let metrics: String;
        let r = match self {
            Reply::Help => Response::new(
                Status::OK,
                [Some(&fields.text_plain), None],
                Body::Bytes(app.help.as_bytes()),
            ),
            // A GET is prepared into a body first: only a HEAD gets here,
            // answered from the key alone.
            Reply::Body(key) => Response::new(
                Status::OK,
                [Some(fields.content_type(*key)), None],
                Body::Unsent(key.len()),
            ),
            Reply::Ready(body) => {
                let (form, content_type) = match &body.text {
                    Text::Ascii(b) => (Body::Ascii(b), &fields.text_plain),
                    Text::Rope(rope) => (Body::Rope(rope.get(), body.len), &fields.text_plain),
                    Text::Transcoded(text) => {
                        (Body::Transcoded(text, body.len), &fields.text_plain)
                    }
                    Text::Payload(b) => (Body::Shared(b), &fields.octet_stream),
                };
                Response::new(Status::OK, [Some(content_type), None], form)
            }
            Reply::Health if app.is_draining() => Response::new(
                Status::SERVICE_UNAVAILABLE,
                [Some(&fields.text_plain), None],
                Body::Bytes(b"shutting down\n"),
            ),
            Reply::Health => Response::new(
                Status::OK,
                [Some(&fields.text_plain), None],
                Body::Bytes(b"ok\n"),
            ),
            Reply::Metrics => {
                metrics = app.metrics.render();
                Response::new(
                    Status::OK,
                    [Some(&fields.openmetrics), None],
                    Body::Bytes(metrics.as_bytes()),
                )
            }
            Reply::Options { server_wide } => {
                let allow = if *server_wide {
                    &fields.allow_any
                } else {
                    &fields.allow
                };
                Response::new(Status::NO_CONTENT, [Some(allow), None], Body::Empty)
            }
            Reply::Echo(Echo::Json(echo)) => {
                // The document is made before it is queued: counted first.
                let len = echo.len(to.request_body.len());
                besides += len;
                to.lease.cover(besides)?;
                json = echo.finish(to.request_body, len);
                Response::new(Status::OK, [Some(&fields.json), None], Body::Bytes(&json))
            }
            Reply::Echo(Echo::Raw) => Response::new(
                Status::OK,
                [Some(&fields.octet_stream), None],
                Body::Bytes(to.request_body),
            ),
            Reply::Error {
                status,
                reason,
                field,
            } => {
                text = if reason.ends_with('\n') {
                    Cow::Borrowed(reason)
                } else {
                    Cow::Owned(format!("{reason}\n"))
                };
                let field = field.map(|f| match f {
                    ErrorField::Allow => &fields.allow,
                    ErrorField::RetryAfter => &fields.retry_after,
                });
                Response::new(
                    *status,
                    [Some(&fields.text_plain), field],
                    Body::Bytes(text.as_bytes()),
                )
            }
        };
        app.writer.write(queue, &r, to.exchange, to.lease, besides)
    }
}

/// The field lines the routes send, rendered once at start-up.
#[derive(Debug)]
pub struct Fields {
    /// `Content-Type: text/plain; charset=utf-8`.
    pub text_plain: Line,
    /// `Content-Type: application/json`.
    pub json: Line,
    /// `Content-Type: application/octet-stream`.
    pub octet_stream: Line,
    /// The OpenMetrics text format's `Content-Type`.
    pub openmetrics: Line,
    /// `Allow: GET, HEAD, OPTIONS`: the methods of every path but /echo.
    pub allow: Line,
    /// The methods of `OPTIONS *`: those of some path of the server (/echo
    /// takes any).
    pub allow_any: Line,
    /// `Retry-After: 1`: a 503 for a limit the server is at now.
    pub retry_after: Line,
}

impl Fields {
    /// Renders the lines.
    pub fn new() -> Fields {
        let line = |n, v| Line::parse(n, v).expect("a valid static header line");
        Fields {
            text_plain: line("Content-Type", "text/plain; charset=utf-8"),
            json: line("Content-Type", "application/json"),
            octet_stream: line("Content-Type", "application/octet-stream"),
            openmetrics: line(
                "Content-Type",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            ),
            allow: line("Allow", "GET, HEAD, OPTIONS"),
            allow_any: line("Allow", "GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE"),
            retry_after: line("Retry-After", "1"),
        }
    }

    /// The `Content-Type` of a body: text for `/end-string`, bytes for
    /// `/large`.
    pub fn content_type(&self, key: BodyKey) -> &Line {
        match key {
            BodyKey::Text(_) => &self.text_plain,
            BodyKey::Large(_) => &self.octet_stream,
        }
    }
}

/// What a reply waits for before it can be written — a body being built on
/// the blocking pool, by this request or another — and the reply it then
/// becomes. The session hands it to the connection
/// ([`crate::session::Step::Defer`]), which awaits it (no thread is held
/// while it waits) and gives back what it made
/// ([`crate::session::Session::resume`]); nothing in the session knows what
/// the job does.
pub struct Job(Pin<Box<dyn Future<Output = Reply> + Send>>);

/// What a [`Job`] made: the reply, ready to write.
#[derive(Debug)]
pub struct Finished(pub(crate) Reply);

impl Job {
    fn new(work: impl Future<Output = Reply> + Send + 'static) -> Job {
        Job(Box::pin(work))
    }

    /// Waits for the work; on a tokio runtime, whose blocking pool builds.
    pub async fn run(self) -> Finished {
        Finished(self.0.await)
    }

    /// Waits for the work from outside an async context — a session driven
    /// in memory, by tests or the fuzzer — on a runtime of this thread's
    /// own.
    pub fn wait(self) -> Finished {
        thread_local! {
            static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for jobs run in memory");
        }
        RUNTIME.with(|rt| rt.block_on(self.run()))
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job")
    }
}

/// Who a reply answers, and what it needs from the connection.
#[derive(Debug)]
pub struct To<'a> {
    /// The server.
    pub app: &'a App,
    /// The request body, for the echo.
    pub request_body: &'a [u8],
    /// What the request asked of its response.
    pub exchange: Exchange,
    /// The connection's reservation, which must cover the response before
    /// it is queued.
    pub lease: &'a mut Lease,
    /// What the connection's buffers occupy outside the queue.
    pub besides: usize,
}

/// The JSON `/echo` answers with: method, target, version, fields (name,
/// value pairs in order) and body, every one base64-encoded — the origin
/// format of the HTTP Garden differential harness.
#[derive(Debug)]
pub struct EchoJson {
    /// Everything up to the body's value.
    prefix: String,
}

/// What ends the echo's JSON document.
const SUFFIX: &[u8] = b"\"}\n";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl EchoJson {
    /// The JSON for `head`, waiting for its body.
    pub fn new(head: &RequestHead<'_>) -> EchoJson {
        let version = if head.version == 0 {
            "HTTP/1.0"
        } else {
            "HTTP/1.1"
        };
        let mut prefix = String::with_capacity(256);
        // base64 has no character JSON must escape, so plain formatting is
        // well-formed JSON.
        let _ = write!(
            prefix,
            "{{\"method\":\"{}\",\"target\":\"{}\",\"version\":\"{}\",\"headers\":[",
            b64(head.method.as_bytes()),
            b64(head.target.as_bytes()),
            b64(version.as_bytes())
        );
        for (i, f) in head.fields.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(
                prefix,
                "{sep}[\"{}\",\"{}\"]",
                b64(f.name.as_bytes()),
                b64(f.value)
            );
        }
        prefix.push_str("],\"body\":\"");
        EchoJson { prefix }
    }

    /// The length of the whole document for a body of `body_len` bytes.
    pub fn len(&self, body_len: usize) -> usize {
        self.prefix.len() + body_len.div_ceil(3) * 4 + SUFFIX.len()
    }

    /// The whole JSON document, with `body`, in one allocation of `len`
    /// ([`EchoJson::len`]) bytes.
    pub fn finish(&self, body: &[u8], len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(self.prefix.as_bytes());
        let at = out.len();
        out.resize(len - SUFFIX.len(), 0);
        let n = base64::engine::general_purpose::STANDARD
            .encode_slice(body, &mut out[at..])
            .expect("room for the base64 of the body");
        debug_assert_eq!(at + n, len - SUFFIX.len());
        out.extend_from_slice(SUFFIX);
        out
    }
}
