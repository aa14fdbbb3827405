//! What a request is answered with, and how each answer writes itself.
//!
//! [`crate::routes`] chooses a [`Reply`] from the request head; the session
//! calls [`Reply::respond`] once the request body has been read, and the
//! reply turns itself into a [`Response`] for the server's
//! [`Writer`](crate::response::Writer): the help text, an `/end-string`
//! body from the cache, a `/large` payload, the echo (JSON or raw), the
//! health check, the metrics, or an error with its reason. Nothing else in the server knows what a reply's
//! response looks like.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::net::SocketAddr;

use base64::Engine as _;
use bytes::Bytes;
use unflat::head::{Line, Status};
use unflat::queue::WriteQueue;

use crate::bodies::{Busy, Key, Memo, Text};
use crate::config::Strategy;
use crate::request::RequestHead;
use crate::response::{Body, Exchange, Response, Written};
use crate::tls::Source;
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

/// The text of `GET /` and of the start-up banner.
pub fn help_text(addr: SocketAddr, strategy: Strategy, tls: Option<&Source>) -> String {
    let (scheme, trust) = match tls {
        None => ("http", String::new()),
        Some(Source::Files { .. }) => ("https", String::new()),
        Some(Source::SelfSigned { cert }) => (
            "https",
            format!(
                "\nSelf-signed certificate for localhost: {}\n  curl --cacert {} https://localhost:{}/\n",
                cert.display(),
                cert.display(),
                addr.port()
            ),
        ),
    };
    format!(
        "unflat-server ({strategy} strategy) at {scheme}://{addr}\n{trust}\n\
         Routes:\n{ROUTES}\n\
         /end-string bodies: body=flat (the default) keeps the text as one flat\n\
         string, sent as one iovec (ascii) or encoded behind the head (latin1,\n\
         twobyte); body=rope keeps it as a ropey rope of ~1 KiB chunks, sent as\n\
         an iovec per chunk, or copied where chunks are short.\n\n\
         Benchmark it:\n  wrk -s wrk_scripts/end-string.lua {scheme}://{addr} -- 1024\n",
        strategy = strategy.name()
    )
}

/// What a request is answered with.
#[derive(Debug)]
pub enum Reply {
    /// `GET /`: the help text.
    Help,
    /// `/end-string/{len}?kind=…&body=…`.
    EndString(Key),
    /// `/large/{bytes}`: answered from its size alone for `HEAD`; a `GET`
    /// needs the payload, from the cache or built by a [`Job`].
    Large(usize),
    /// A payload at hand (a `/large` one, cached or built).
    Payload(Bytes),
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
        /// Whether to send `Allow: GET, HEAD, OPTIONS` (for 405).
        allow: bool,
    },
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
            allow: false,
        }
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
            allow: true,
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

    /// Makes the reply ready to write, or gives the job that makes it, to
    /// run off the async workers: a `GET /large/{n}` whose payload is not
    /// cached (it may be a gigabyte to build).
    pub fn prepare(&mut self, app: &App, exchange: Exchange) -> Option<Job> {
        let Reply::Large(size) = *self else {
            return None;
        };
        if !exchange.sends_content() {
            return None;
        }
        if let Some(hit) = app.large.cached(size) {
            *self = Reply::Payload(hit);
            return None;
        }
        let large = app.large.clone();
        Some(Job::new(move || match large.build(size) {
            Ok(payload) => Reply::Payload(payload),
            Err(Busy) => Reply::error(
                Status::SERVICE_UNAVAILABLE,
                "the payload cannot be held within --large-bytes now; try again",
            ),
        }))
    }

    /// Queues the response; says what was written.
    pub fn respond(&self, to: To<'_>, queue: &mut WriteQueue) -> Written {
        let app = to.app;
        let fields = &app.fields;
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
            Reply::EndString(key) => {
                let body = app.end_strings.get(*key, to.memo);
                let form = match &body.text {
                    Text::Ascii(b) => Body::Ascii(b),
                    Text::Rope(rope) => Body::Rope(rope.get(), body.utf8_len),
                    Text::Transcoded(text) => Body::Transcoded(text, body.utf8_len),
                };
                Response::new(Status::OK, [Some(&fields.text_plain), None], form)
            }
            // A GET is prepared into a payload first: only a HEAD gets here,
            // answered from the size alone.
            Reply::Large(size) => Response::new(Status::OK, [None, None], Body::Unsent(*size)),
            Reply::Payload(payload) => {
                Response::new(Status::OK, [None, None], Body::Shared(payload))
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
                json = echo.finish(to.request_body);
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
                allow,
            } => {
                text = if reason.ends_with('\n') {
                    Cow::Borrowed(reason)
                } else {
                    Cow::Owned(format!("{reason}\n"))
                };
                Response::new(
                    *status,
                    [Some(&fields.text_plain), allow.then_some(&fields.allow)],
                    Body::Bytes(text.as_bytes()),
                )
            }
        };
        app.writer.write(queue, &r, to.exchange)
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
        }
    }
}

/// Work a reply needs done off the async workers before it can be written
/// (building a `/large` payload), and the reply it then becomes. The
/// session hands it to the connection ([`crate::session::Step::Defer`]),
/// which runs it where blocking is allowed and gives back what it made
/// ([`crate::session::Session::resume`]); nothing in the session knows what
/// the job does.
pub struct Job(Box<dyn FnOnce() -> Reply + Send>);

/// What a [`Job`] made: the reply, ready to write.
#[derive(Debug)]
pub struct Finished(pub(crate) Reply);

impl Job {
    fn new(work: impl FnOnce() -> Reply + Send + 'static) -> Job {
        Job(Box::new(work))
    }

    /// Does the work (blocking; call it off the async workers).
    pub fn run(self) -> Finished {
        Finished((self.0)())
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
    /// The connection's body memo (see [`crate::bodies::Memo`]).
    pub memo: &'a mut Memo,
    /// The request body, for the echo.
    pub request_body: &'a [u8],
    /// What the request asked of its response.
    pub exchange: Exchange,
}

/// The JSON `/echo` answers with: method, target, version, fields (name,
/// value pairs in order) and body, every one base64-encoded — the origin
/// format of the HTTP Garden differential harness.
#[derive(Debug)]
pub struct EchoJson {
    /// Everything up to the body's value.
    prefix: String,
}

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

    /// The whole JSON document, with `body`.
    pub fn finish(&self, body: &[u8]) -> Vec<u8> {
        let mut out = self.prefix.clone().into_bytes();
        out.extend_from_slice(b64(body).as_bytes());
        out.extend_from_slice(b"\"}\n");
        out
    }
}
