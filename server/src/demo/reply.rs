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

use super::bodies::{AtHand, Bodies, Memo, Unavailable};
use super::body::{BodyKey, Built, Text};
use super::chunks::{Chunks, Plan};
use super::echo::EchoJson;
use super::{fields, Fields, Routed, Site};
use unflat_server::h1::RequestHead;
use unflat_server::memory::{Full, Memory, Part};
use unflat_server::observe::Exposition;
use unflat_server::response::{Body, Response};
use unflat_server::service::{Job, Reply};

/// What a request is answered with, in two words. What more an answer
/// holds (a stream, an error's reason, the echo) is [`Made`], boxed: every
/// request's answer is then made, moved and dropped in registers. A larger
/// one goes through memory, and a copy of it read whole before its pieces
/// are written waits for them (a store-forwarding stall per move).
#[derive(Debug)]
pub enum Answer {
    /// `GET /`: the help text (the site's, given by [`Answer::resolve`]).
    Help,
    /// `/end-string/{len}?kind=…&body=…` or `/large/{size}`: answered from
    /// the key alone for `HEAD`; a `GET` needs the body, from the cache or
    /// built by a [`Job`].
    Body(BodyKey),
    /// A body at hand, cached or built.
    Ready(Arc<Built>),
    /// A body lent by the connection's memo: given back to it when the
    /// core is done with the reply ([`Memo::give_back`]).
    Lent(Arc<Built>),
    /// `/healthz`: 200 `ok` — or, once [`Answer::resolve`] finds that
    /// shutdown has begun, [`Answer::Draining`].
    Health,
    /// `/healthz` once shutdown has begun: 503, so that a load balancer
    /// stops sending while the server drains.
    Draining,
    /// `OPTIONS` on a path: 204 with the methods allowed on it.
    Options,
    /// `OPTIONS *`: 204 with the methods allowed on some path.
    OptionsAny,
    /// Every answer that holds more.
    Made(Box<Made>),
}
// No variant above has a field beside the one word of `Body`, `Ready`,
// `Lent` and `Made`: a flag of its own would lie in a byte of that word, and every
// answer would then be copied in pieces that straddle how it was stored.

/// The answers that hold more than a word ([`Answer::Made`]).
#[derive(Debug)]
pub enum Made {
    /// The help text.
    HelpText(Arc<str>),
    /// `/metrics`: the counters, in the text format the scraper asked for.
    Metrics(Exposition),
    /// A body neither in the connection's memo nor in the cache: built by
    /// the job [`Reply::prepare`] gives, sent whole or as a stream.
    Building(Building),
    /// `/end-string/{len}?chunks=K`: as [`Answer::Body`], sent as a stream
    /// of `K` chunks.
    Streamed(BodyKey, Plan),
    /// A body at hand, being sent a chunk at a time.
    Stream(Chunks),
    /// The counters rendered for `/metrics`, in that format.
    Rendered(Exposition, String),
    /// `/echo`: the request as received; the body is added once read.
    Echo(Echoed),
    /// The JSON echo waiting for its body, with the account its JSON is
    /// charged to.
    EchoJson(EchoJson, Arc<Memory>),
    /// The echo's JSON, made once the body was read: a body of its own.
    Json(Arc<Built>),
    /// An error with a plain-text reason.
    Error(Refusal),
}

/// A body to build before it is sent ([`Made::Building`]).
#[derive(Debug)]
pub struct Building {
    /// The body.
    key: BodyKey,
    /// Its chunks, for a stream.
    chunks: Option<Plan>,
    /// Where it is built.
    bodies: Arc<Bodies>,
}

/// An error's answer ([`Made::Error`]).
#[derive(Debug)]
pub struct Refusal {
    /// The status.
    pub status: Status,
    /// Why.
    pub reason: Cow<'static, str>,
    /// A field line besides `Content-Type`, if any.
    pub field: Option<ErrorField>,
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
    pub fn error(status: Status, reason: impl Into<Cow<'static, str>>) -> Answer {
        Answer::refusal(status, reason.into(), None)
    }

    fn refusal(status: Status, reason: Cow<'static, str>, field: Option<ErrorField>) -> Answer {
        Answer::made(Made::Error(Refusal {
            status,
            reason,
            field,
        }))
    }

    /// An answer that holds more than a word.
    pub fn made(made: Made) -> Answer {
        Answer::Made(Box::new(made))
    }

    /// What more the answer holds, if it is one that does.
    fn more(&self) -> Option<&Made> {
        match self {
            Answer::Made(made) => Some(made),
            _ => None,
        }
    }

    /// 503 with `Retry-After`: the server cannot take this request now.
    pub fn unavailable(reason: impl Into<Cow<'static, str>>) -> Answer {
        Answer::refusal(
            Status::SERVICE_UNAVAILABLE,
            reason.into(),
            Some(ErrorField::RetryAfter),
        )
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
        Answer::refusal(
            Status::METHOD_NOT_ALLOWED,
            Cow::Owned(format!(
                "{method} is not allowed on {path}; use GET, HEAD or OPTIONS"
            )),
            Some(ErrorField::Allow),
        )
    }

    /// The JSON echo of `head`, waiting for its body.
    pub fn echo_json(head: &RequestHead<'_>) -> Answer {
        Answer::made(Made::Echo(Echoed::Json(EchoJson::new(head))))
    }

    /// True for an error decided from the head (a 4xx or 5xx), which needs
    /// none of the request body.
    pub fn refuses(&self) -> bool {
        matches!(self.more(), Some(Made::Error(e)) if e.status.code() >= 400)
    }

    /// True for `/echo`, whose request body is kept.
    pub fn wants_body(&self) -> bool {
        matches!(self.more(), Some(Made::Echo(_) | Made::EchoJson(..)))
    }

    /// Bytes the reply holds while it waits for its request body: the echo's
    /// JSON so far (every field of the head, base64-encoded), or an error's
    /// reason made for this request.
    pub fn held(&self) -> usize {
        match self.more() {
            Some(Made::Echo(Echoed::Json(echo)) | Made::EchoJson(echo, _)) => {
                echo.prefix.capacity()
            }
            Some(Made::Error(Refusal {
                reason: Cow::Owned(reason),
                ..
            })) => reason.capacity(),
            _ => 0,
        }
    }

    /// Makes the answer the route chose ready, in the site's one call:
    /// what it needs of the site (the help text, the counters rendered,
    /// whether the server drains, the account the echo is charged to) and
    /// the body — found in the connection's `memo` or the cache, or left
    /// to be built ([`Made::Building`]). A `HEAD` needs no body: it is
    /// answered from the key. By value, as two words in registers: an
    /// answer lent to the call out of line would be stored whole and then
    /// copied before its pieces were written.
    #[inline(always)]
    pub fn resolve(self, site: &Site, head_request: bool, memo: &mut Memo) -> Answer {
        let key = match self {
            Answer::Body(key) if !head_request => key,
            Answer::Body(_) => return self,
            _ => return self.resolve_rare(site, head_request, memo),
        };
        match at_hand(site, key, memo) {
            Some(AtHand::Lent(body)) => Answer::Lent(body),
            Some(AtHand::Shared(body)) => Answer::Ready(body),
            None => Answer::made(Made::Building(Building::of(site, key, None))),
        }
    }

    /// [`Answer::resolve`] for the answers of the routes that are not
    /// whole bodies.
    #[inline(never)]
    fn resolve_rare(mut self, site: &Site, head_request: bool, memo: &mut Memo) -> Answer {
        let this = &mut self;
        match this {
            Answer::Help => *this = Answer::made(Made::HelpText(site.help.clone())),
            Answer::Health if site.is_draining() => *this = Answer::Draining,
            Answer::Made(made) => match &mut **made {
                &mut Made::Metrics(format) => {
                    **made = Made::Rendered(format, site.metrics().render(format));
                }
                &mut Made::Streamed(key, plan) if !head_request => {
                    **made = match at_hand(site, key, memo) {
                        Some(AtHand::Lent(body) | AtHand::Shared(body)) => {
                            Made::Stream(Chunks::new(body, plan))
                        }
                        None => Made::Building(Building::of(site, key, Some(plan))),
                    };
                }
                Made::Echo(echo @ Echoed::Json(_)) => {
                    let Echoed::Json(echo) = std::mem::replace(echo, Echoed::Raw) else {
                        unreachable!("matched above")
                    };
                    **made = Made::EchoJson(echo, site.memory.clone());
                }
                _ => {}
            },
            _ => {}
        }
        self
    }

    /// The response to write, given the request body. What it makes (the
    /// metrics' text, the echo's JSON) goes into the reply first, which the
    /// core keeps while the queue shares its memory.
    #[inline(always)]
    pub(super) fn respond<'a>(&'a mut self, request_body: &'a [u8]) -> Result<Response<'a>, Full> {
        match self {
            // What nearly every request is: a built body, nothing made.
            // Inlined, its response is made where it is written, never
            // returned through memory and copied.
            Answer::Ready(body) | Answer::Lent(body) => Ok(built(body, fields())),
            _ => self.respond_made(request_body),
        }
    }

    /// [`Answer::respond`] for every answer but a built body.
    #[inline(never)]
    fn respond_made<'a>(&'a mut self, request_body: &'a [u8]) -> Result<Response<'a>, Full> {
        if let Answer::Made(made) = self {
            match &mut **made {
                Made::EchoJson(echo, memory) => {
                    let json = echo_body(echo, memory, request_body)?;
                    **made = Made::Json(json);
                }
                Made::Error(e) if !e.reason.ends_with('\n') => e.reason.to_mut().push('\n'),
                _ => {}
            }
        }
        let this: &'a Answer = self;
        Ok(this.response(request_body))
    }

    /// The response: its status, its field lines, its body in its form.
    fn response<'a>(&'a self, request_body: &'a [u8]) -> Response<'a> {
        let fields = fields();
        match self {
            // A GET is prepared into a body first: only a HEAD gets here,
            // answered from the key alone.
            Answer::Body(key) => Response::with_lines(
                Status::OK,
                [Some(fields.content_type(*key)), None],
                Body::Unsent(key.len()),
            ),
            Answer::Ready(body) | Answer::Lent(body) => built(body, fields),
            Answer::Health | Answer::Draining => {
                let (status, text): (_, &[u8]) = match self {
                    Answer::Draining => (Status::SERVICE_UNAVAILABLE, b"shutting down\n"),
                    _ => (Status::OK, b"ok\n"),
                };
                let fields = [Some(&fields.text_plain), Some(&fields.no_store)];
                Response::with_lines(status, fields, Body::Bytes(text))
            }
            Answer::Options | Answer::OptionsAny => {
                let allow = match self {
                    Answer::OptionsAny => &fields.allow_any,
                    _ => &fields.allow,
                };
                Response::with_lines(Status::NO_CONTENT, [Some(allow), None], Body::Empty)
            }
            Answer::Made(made) => made.response(request_body, fields),
            Answer::Help => unreachable!("made into another answer by resolve"),
        }
    }
}

impl Made {
    /// [`Answer::response`] for an answer that holds more.
    fn response<'a>(&'a self, request_body: &'a [u8], fields: &'a Fields) -> Response<'a> {
        let text_plain =
            |status, body| Response::with_lines(status, [Some(&fields.text_plain), None], body);
        match self {
            Made::HelpText(help) => text_plain(Status::OK, Body::Bytes(help.as_bytes())),
            Made::Streamed(key, _) => Response::with_lines(
                Status::OK,
                [Some(fields.content_type(*key)), None],
                Body::Stream,
            ),
            Made::Stream(chunks) => Response {
                body: Body::Stream,
                ..built(chunks.body(), fields)
            },
            Made::Rendered(format, text) => {
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
            Made::Json(json) => {
                let Text::Payload(bytes) = &json.text else {
                    unreachable!("made as a payload")
                };
                Response::with_lines(
                    Status::OK,
                    [Some(&fields.json), Some(&fields.no_store)],
                    Body::SharedBytes(bytes),
                )
            }
            Made::Echo(Echoed::Raw) => Response::with_lines(
                Status::OK,
                [Some(&fields.octet_stream), Some(&fields.no_store)],
                Body::Bytes(request_body),
            ),
            Made::Error(e) => {
                let field = e.field.map(|f| fields.error_field(f));
                Response::with_lines(
                    e.status,
                    [Some(&fields.text_plain), field],
                    Body::Bytes(e.reason.as_bytes()),
                )
            }
            Made::Metrics(_)
            | Made::Echo(Echoed::Json(_))
            | Made::EchoJson(..)
            | Made::Building(_) => {
                unreachable!("made into another answer by resolve, respond or the job")
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
fn at_hand(site: &Site, key: BodyKey, memo: &mut Memo) -> Option<AtHand> {
    match key {
        BodyKey::Text(text) => site.bodies.text(text, memo),
        BodyKey::Large(_) => site.bodies.cached(key).map(AtHand::Shared),
    }
}

/// A body at hand, sent whole (`chunks`: `None`) or as a stream.
fn ready(body: Arc<Built>, chunks: Option<Plan>) -> Answer {
    match chunks {
        None => Answer::Ready(body),
        Some(plan) => Answer::made(Made::Stream(Chunks::new(body, plan))),
    }
}

impl Building {
    /// The body of `key`, to build at `site`, sent whole (`chunks`:
    /// `None`) or as a stream.
    #[cold]
    fn of(site: &Site, key: BodyKey, chunks: Option<Plan>) -> Building {
        Building {
            key,
            chunks,
            bodies: site.bodies.clone(),
        }
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
        let Some(Made::Building(Building {
            key,
            chunks,
            bodies,
        })) = self.answer.more()
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

    #[inline(always)]
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
            Answer::Made(made) => match &mut **made {
                Made::Stream(chunks) => chunks.poll_chunk(cx).map(Ok),
                _ => std::task::Poll::Ready(Ok(None)),
            },
            _ => std::task::Poll::Ready(Ok(None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every request's answer is made, moved and dropped in two words:
    /// what holds more is boxed ([`Made`]).
    #[test]
    fn an_answer_is_two_words() {
        assert_eq!(
            std::mem::size_of::<Answer>(),
            2 * std::mem::size_of::<usize>()
        );
    }
}
