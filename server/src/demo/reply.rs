//! What a request is answered with ([`Answer`], chosen by `routes.rs` from
//! the head and made ready by [`Answer::resolve`] in the one call), the
//! site's reply ([`Routed`]: the answer and its route), and the
//! [`Response`] each answer gives once the request body is read
//! ([`Answer::respond`]); a body not at hand is built first by a [`Job`].
//! Nothing else in the server knows what a response looks like.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use unflat::head::Status;

use super::bodies::{Bodies, Memo, Unavailable};
use super::body::{BodyKey, Built, Text};
use super::chunks::{Chunks, Plan};
use super::echo::EchoJson;
use super::{fields, Fields, Routed, Site};
use unflat_server::h1::RequestHead;
use unflat_server::memory::{Full, Memory, Part};
use unflat_server::observe::Exposition;
use unflat_server::response::{Body, Response};
use unflat_server::service::{Job, Reply};

/// What a request is answered with. Its tag a word of its own: each
/// variant's fields then lie on word boundaries, and the answer moves as
/// words, where a packed layout moved it a few bytes at a time.
#[derive(Debug)]
#[repr(u64)]
pub enum Answer {
    /// `GET /`: the help text (the site's, given by [`Answer::resolve`]).
    Help,
    /// The help text.
    HelpText(Arc<str>),
    /// `/end-string/{len}?kind=…&body=…` or `/large/{size}`: answered from
    /// the key alone for `HEAD`; a `GET` needs the body, from the cache or
    /// built by a [`Job`].
    Body(BodyKey),
    /// A body at hand, cached or built.
    Ready(Arc<Built>),
    /// A body neither in the connection's memo nor in the cache: built by
    /// the job [`Reply::prepare`] gives, sent whole or as a stream.
    Building {
        /// The body.
        key: BodyKey,
        /// Its chunks, for a stream.
        chunks: Option<Plan>,
        /// Where it is built.
        bodies: Arc<Bodies>,
    },
    /// `/end-string/{len}?chunks=K`: as [`Answer::Body`], sent as a stream
    /// of `K` chunks.
    Streamed(BodyKey, Plan),
    /// A body at hand, being sent a chunk at a time.
    Stream(Chunks),
    /// `/healthz`: 200 `ok`, or 503 once shutdown has begun (`draining`,
    /// as [`Answer::resolve`] found it), so that a load balancer stops
    /// sending while the server drains.
    Health {
        /// Whether shutdown had begun.
        draining: bool,
    },
    /// `/metrics`: the counters, in the text format the scraper asked for.
    Metrics(Exposition),
    /// The counters rendered for `/metrics`, in that format.
    Rendered(Exposition, String),
    /// `/echo`: the request as received; the body is added once read.
    Echo(Echoed),
    /// The JSON echo waiting for its body, with the account its JSON is
    /// charged to.
    EchoJson(EchoJson, Arc<Memory>),
    /// The echo's JSON, made once the body was read: a body of its own.
    Json(Arc<Built>),
    /// `OPTIONS`: 204 with the methods allowed on the path, or on some path
    /// of the server for `OPTIONS *`.
    Options {
        /// `OPTIONS *`.
        server_wide: bool,
    },
    /// An error with a plain-text reason.
    Error {
        /// The status: a reference, so that this rare answer does not make
        /// every reply larger (each is moved whole).
        status: &'static Status,
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
pub enum Echoed {
    /// `format=json` (the default): method, target, version, fields and
    /// body, each base64-encoded.
    Json(EchoJson),
    /// `format=raw`: the request body exactly as received, as
    /// `application/octet-stream`.
    Raw,
}

impl Answer {
    /// An error reply.
    pub fn error(status: &'static Status, reason: impl Into<Cow<'static, str>>) -> Answer {
        Answer::Error {
            status,
            reason: reason.into(),
            field: None,
        }
    }

    /// 503 with `Retry-After`: the server cannot take this request now.
    pub fn unavailable(reason: impl Into<Cow<'static, str>>) -> Answer {
        Answer::Error {
            status: &Status::SERVICE_UNAVAILABLE,
            reason: reason.into(),
            field: Some(ErrorField::RetryAfter),
        }
    }

    /// 503 for want of memory, naming the limit.
    pub fn out_of_memory(full: Full) -> Answer {
        Answer::unavailable(format!(
            "the server's memory is at its limit ({}); try again later",
            full.limit
        ))
    }

    /// 405 for a path that takes GET, HEAD and OPTIONS, with `Allow`.
    pub fn method_not_allowed(method: &str, path: &str) -> Answer {
        Answer::Error {
            status: &Status::METHOD_NOT_ALLOWED,
            reason: Cow::Owned(format!(
                "{method} is not allowed on {path}; use GET, HEAD or OPTIONS"
            )),
            field: Some(ErrorField::Allow),
        }
    }

    /// The JSON echo of `head`, waiting for its body.
    pub fn echo_json(head: &RequestHead<'_>) -> Answer {
        Answer::Echo(Echoed::Json(EchoJson::new(head)))
    }

    /// True for an error decided from the head (a 4xx or 5xx), which needs
    /// none of the request body.
    pub fn refuses(&self) -> bool {
        matches!(self, Answer::Error { status, .. } if status.code() >= 400)
    }

    /// True for `/echo`, whose request body is kept.
    pub fn wants_body(&self) -> bool {
        matches!(self, Answer::Echo(_) | Answer::EchoJson(..))
    }

    /// Bytes the reply holds while it waits for its request body: the echo's
    /// JSON so far (every field of the head, base64-encoded), or an error's
    /// reason made for this request.
    pub fn held(&self) -> usize {
        match self {
            Answer::Echo(Echoed::Json(echo)) | Answer::EchoJson(echo, _) => echo.prefix.capacity(),
            Answer::Error {
                reason: Cow::Owned(reason),
                ..
            } => reason.capacity(),
            _ => 0,
        }
    }

    /// Makes the answer the route chose ready, in the site's one call:
    /// what it needs of the site (the help text, the counters rendered,
    /// whether the server drains, the account the echo is charged to) and
    /// the body — found in the connection's `memo` or the cache, or left
    /// to be built ([`Answer::Building`]). A `HEAD` needs no body: it is
    /// answered from the key.
    #[inline(always)]
    pub fn resolve(&mut self, site: &Site, head_request: bool, memo: &mut Memo) {
        let key = match self {
            Answer::Body(key) => *key,
            _ => return self.resolve_rare(site, head_request, memo),
        };
        if head_request {
            return;
        }
        let next = match at_hand(site, key, memo) {
            Some(body) => Answer::Ready(body),
            None => Answer::Building {
                key,
                chunks: None,
                bodies: site.bodies.clone(),
            },
        };
        // What it replaces is a key, which holds nothing: forgotten, not
        // dropped, so that no drop glue runs on every request.
        std::mem::forget(std::mem::replace(self, next));
    }

    /// [`Answer::resolve`] for the answers of the routes that are not
    /// whole bodies.
    #[inline(never)]
    fn resolve_rare(&mut self, site: &Site, head_request: bool, memo: &mut Memo) {
        match self {
            Answer::Streamed(key, plan) if !head_request => {
                let (key, plan) = (*key, *plan);
                *self = match at_hand(site, key, memo) {
                    Some(body) => Answer::Stream(Chunks::new(body, plan)),
                    None => Answer::Building {
                        key,
                        chunks: Some(plan),
                        bodies: site.bodies.clone(),
                    },
                };
            }
            Answer::Help => *self = Answer::HelpText(site.help.clone()),
            Answer::Health { draining } => *draining = site.is_draining(),
            Answer::Metrics(format) => {
                let format = *format;
                *self = Answer::Rendered(format, site.metrics().render(format));
            }
            Answer::Echo(Echoed::Json(_)) => {
                let Answer::Echo(Echoed::Json(echo)) = std::mem::replace(self, Answer::Help) else {
                    unreachable!("matched above")
                };
                *self = Answer::EchoJson(echo, site.memory.clone());
            }
            _ => {}
        }
    }

    /// The response to write, given the request body. What it makes (the
    /// metrics' text, the echo's JSON) goes into the reply first, which the
    /// core keeps while the queue shares its memory.
    #[inline]
    pub(super) fn respond<'a>(&'a mut self, request_body: &'a [u8]) -> Result<Response<'a>, Full> {
        if let Answer::Ready(body) = self {
            // What nearly every request is: a built body, nothing made.
            return Ok(built(body, fields()));
        }
        match self {
            Answer::EchoJson(echo, memory) => {
                let json = echo_body(echo, memory, request_body)?;
                *self = Answer::Json(json);
            }
            Answer::Error { reason, .. } if !reason.ends_with('\n') => reason.to_mut().push('\n'),
            _ => {}
        }
        let this: &'a Answer = self;
        Ok(this.response(request_body))
    }

    /// The response: its status, its field lines, its body in its form.
    fn response<'a>(&'a self, request_body: &'a [u8]) -> Response<'a> {
        let fields = fields();
        let text_plain =
            |status, body| Response::with_lines(status, [Some(&fields.text_plain), None], body);
        match self {
            Answer::HelpText(help) => text_plain(Status::OK, Body::Bytes(help.as_bytes())),
            // A GET is prepared into a body first: only a HEAD gets here,
            // answered from the key alone.
            Answer::Body(key) => Response::with_lines(
                Status::OK,
                [Some(fields.content_type(*key)), None],
                Body::Unsent(key.len()),
            ),
            Answer::Ready(body) => built(body, fields),
            Answer::Streamed(key, _) => Response::with_lines(
                Status::OK,
                [Some(fields.content_type(*key)), None],
                Body::Stream,
            ),
            Answer::Stream(chunks) => Response {
                body: Body::Stream,
                ..built(chunks.body(), fields)
            },
            Answer::Health { draining } => {
                let (status, text): (_, &[u8]) = if *draining {
                    (Status::SERVICE_UNAVAILABLE, b"shutting down\n")
                } else {
                    (Status::OK, b"ok\n")
                };
                let fields = [Some(&fields.text_plain), Some(&fields.no_store)];
                Response::with_lines(status, fields, Body::Bytes(text))
            }
            Answer::Rendered(format, text) => {
                let content_type = match format {
                    Exposition::OpenMetrics => &fields.openmetrics,
                    Exposition::Prometheus => &fields.prometheus_text,
                };
                Response::with_lines(
                    Status::OK,
                    [Some(content_type), Some(&fields.no_store)],
                    Body::Bytes(text.as_bytes()),
                )
            }
            Answer::Json(json) => {
                let Text::Payload(bytes) = &json.text else {
                    unreachable!("made as a payload")
                };
                Response::with_lines(
                    Status::OK,
                    [Some(&fields.json), Some(&fields.no_store)],
                    Body::SharedBytes(bytes),
                )
            }
            Answer::Help
            | Answer::Metrics(_)
            | Answer::Echo(Echoed::Json(_))
            | Answer::EchoJson(..)
            | Answer::Building { .. } => {
                unreachable!("made into another answer by resolve, respond or the job")
            }
            Answer::Options { server_wide } => {
                let allow = if *server_wide {
                    &fields.allow_any
                } else {
                    &fields.allow
                };
                Response::with_lines(Status::NO_CONTENT, [Some(allow), None], Body::Empty)
            }
            Answer::Echo(Echoed::Raw) => Response::with_lines(
                Status::OK,
                [Some(&fields.octet_stream), Some(&fields.no_store)],
                Body::Bytes(request_body),
            ),
            Answer::Error {
                status,
                reason,
                field,
            } => {
                let field = field.map(|f| fields.error_field(f));
                Response::with_lines(
                    **status,
                    [Some(&fields.text_plain), field],
                    Body::Bytes(reason.as_bytes()),
                )
            }
        }
    }
}

/// The echo's JSON, charged before it is made and sent from its own memory
/// like any body: a long one is held once, not copied into the write buffer.
fn echo_body(
    echo: &EchoJson,
    memory: &Arc<Memory>,
    request_body: &[u8],
) -> Result<Arc<Built>, Full> {
    let len = echo.len(request_body.len());
    // As a flat body is charged (`BodyKey::footprint`): its one allocation
    // and what making it leaves resident, a sixty-fourth over.
    let charge = memory.charge(Part::Connections, len + len / 64)?;
    let json = Bytes::from(echo.finish(request_body, len));
    Ok(Arc::new(Built::new(Text::Payload(json), len, charge)))
}

/// The response of a built body: in the form it is kept, with its
/// `Content-Type`.
#[inline]
fn built<'a>(body: &'a Built, fields: &'a Fields) -> Response<'a> {
    let (form, start) = match &body.text {
        Text::Ascii(b) => (Body::SharedText(b), &fields.ok_text),
        Text::Rope(rope) => (Body::Rope(rope.get(), body.len), &fields.ok_text),
        Text::Transcoded(text) => (Body::Transcoded(text, body.len), &fields.ok_text),
        Text::Payload(b) => (Body::SharedBytes(b), &fields.ok_octets),
    };
    Response::prepared(start, form)
}

/// The body of `key` if it is at hand: in the connection's `memo` or the
/// cache.
#[inline(always)]
fn at_hand(site: &Site, key: BodyKey, memo: &mut Memo) -> Option<Arc<Built>> {
    match key {
        BodyKey::Text(text) => site.bodies.text(text, memo),
        BodyKey::Large(_) => site.bodies.cached(key),
    }
}

/// A body at hand, sent whole (`chunks`: `None`) or as a stream.
fn ready(body: Arc<Built>, chunks: Option<Plan>) -> Answer {
    match chunks {
        None => Answer::Ready(body),
        Some(plan) => Answer::Stream(Chunks::new(body, plan)),
    }
}

/// The site's reply, as the core asks it: the body only `/echo` keeps, the
/// job that builds a body not at hand, the response, a stream's chunks.
impl Reply for Routed {
    fn wants_body(&self) -> bool {
        self.answer.wants_body()
    }

    fn held(&self) -> usize {
        self.answer.held()
    }

    fn refuses(&self) -> bool {
        self.answer.refuses()
    }

    /// The job of a body neither memo nor cache had: built on the blocking
    /// pool (`--max-builds`), or 503 when it cannot be.
    fn prepare(&mut self, _: &[u8]) -> Option<Job<Routed>> {
        let Answer::Building {
            key,
            chunks,
            bodies,
        } = &self.answer
        else {
            return None;
        };
        let (route, key, chunks, bodies) = (self.route, *key, *chunks, bodies.clone());
        Some(Job::new(async move {
            let answer = match bodies.get(key).await {
                Ok(body) => ready(body, chunks),
                Err(Unavailable::Memory(full)) => Answer::out_of_memory(full),
                Err(Unavailable::Failed) => Answer::unavailable("the body could not be built"),
            };
            Routed { route, answer }
        }))
    }

    #[inline]
    fn respond<'a>(
        &'a mut self,
        request_body: &'a [u8],
        _: &mut unflat_server::response::Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        self.answer.respond(request_body)
    }

    fn poll_chunk(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<Option<unflat_server::response::Chunk>, Full>> {
        match &mut self.answer {
            Answer::Stream(chunks) => chunks.poll_chunk(cx).map(Ok),
            _ => std::task::Poll::Ready(Ok(None)),
        }
    }
}
