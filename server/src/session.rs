//! One connection's protocol state, without IO: bytes in, responses queued.
//!
//! [`Session::process`] takes the bytes read so far, answers every request
//! they hold completely — pipelined requests included — by queueing the
//! responses on the [`WriteQueue`], and says what the connection must do
//! next ([`Step`]). It never blocks and never touches a socket, so the same
//! code runs under tokio, in tests, and in the fuzzer.
//!
//! Backpressure: while the queue holds more than `--max-queued-bytes` of
//! copied output or `--max-queued-responses` responses, `process` stops and
//! asks for a flush before it parses further pipelined requests.

use std::borrow::Cow;

use bytes::{Buf, BytesMut};
use unflat::head::Status;
use unflat::queue::WriteQueue;

use crate::request::{parse_head, BodyDecoder, Framing, HeadLimits, Parsed, Reject, FIELDS_CAP};
use crate::response::{Body, Response, Writer};
use crate::routes::{route, Reply};
use crate::App;

/// `HTTP/1.1 100 Continue`, sent before reading a body the client waits to
/// send (RFC 9110 §10.1.1).
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// A request body over `--max-body`, whether announced by Content-Length or
/// found while decoding chunks.
const BODY_TOO_LARGE: Reject = Reject {
    status: Status::PAYLOAD_TOO_LARGE,
    reason: "request body too large",
};

/// What the connection must do after [`Session::process`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Flush the queue, then read more input.
    Read(Waiting),
    /// Flush the queue (it is over its limits), then call `process` again
    /// before reading.
    Flush,
    /// Flush the queue, then close the connection.
    Close,
}

/// What the session is waiting for, which decides the read timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// Nothing: between requests (the idle keep-alive timeout).
    Idle,
    /// The rest of a request head (the head deadline).
    Head,
    /// More of a request body (the body timeout).
    Body,
}

#[derive(Debug)]
enum State {
    Head,
    Body {
        decoder: BodyDecoder,
        pending: Pending,
        /// The body so far, for routes that use it.
        collected: Option<Vec<u8>>,
    },
    Closed,
}

/// A reply waiting for its request body to be read.
#[derive(Debug)]
struct Pending {
    reply: Reply,
    keep_alive: bool,
    head_request: bool,
}

/// One connection's protocol state.
#[derive(Debug)]
pub struct Session {
    state: State,
    served: u64,
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

impl Session {
    /// A session before its first request.
    pub fn new() -> Session {
        Session {
            state: State::Head,
            served: 0,
        }
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.served
    }

    /// Answers the requests `input` holds, consuming them, and says what to
    /// do next.
    pub fn process(&mut self, input: &mut BytesMut, queue: &mut WriteQueue, app: &App) -> Step {
        loop {
            if matches!(self.state, State::Closed) {
                return Step::Close;
            }
            if queue.copied_len() > app.config.max_queued_bytes
                || queue.pending_responses() >= app.config.max_queued_responses
            {
                return Step::Flush;
            }
            let state = std::mem::replace(&mut self.state, State::Head);
            self.state = match state {
                State::Head => {
                    if input.is_empty() {
                        return Step::Read(Waiting::Idle);
                    }
                    match self.head(input, queue, app) {
                        Some(next) => next,
                        None => return Step::Read(Waiting::Head),
                    }
                }
                State::Body {
                    mut decoder,
                    pending,
                    mut collected,
                } => {
                    let max_body = app.config.max_body;
                    let mut sink = |chunk: &[u8]| match &mut collected {
                        Some(body) if body.len() + chunk.len() > max_body => Err(BODY_TOO_LARGE),
                        Some(body) => {
                            body.extend_from_slice(chunk);
                            Ok(())
                        }
                        None => Ok(()),
                    };
                    match decoder.decode(input, app.config.max_head, &mut sink) {
                        Err(reject) => self.reject(queue, app, reject),
                        Ok(d) => {
                            input.advance(d.consumed);
                            if !d.done {
                                self.state = State::Body {
                                    decoder,
                                    pending,
                                    collected,
                                };
                                return Step::Read(Waiting::Body);
                            }
                            self.answer(
                                queue,
                                app,
                                pending,
                                collected.as_deref().unwrap_or_default(),
                            )
                        }
                    }
                }
                State::Closed => State::Closed,
            };
        }
    }

    /// Parses one head from `input`; `None` when it is not complete yet.
    fn head(&mut self, input: &mut BytesMut, queue: &mut WriteQueue, app: &App) -> Option<State> {
        let limits = HeadLimits {
            head: app.config.max_head,
            request_line: app.config.max_request_line,
            fields: app.config.max_fields,
        };
        let mut fields = [httparse::EMPTY_HEADER; FIELDS_CAP];
        let head = match parse_head(input, &mut fields, limits) {
            Parsed::Partial => return None,
            Parsed::Rejected(reject) => return Some(self.reject(queue, app, reject)),
            Parsed::Complete(head) => head,
        };
        let last_allowed = app
            .config
            .max_requests
            .is_some_and(|max| self.served + 1 >= max);
        let pending = Pending {
            reply: route(app, &head),
            keep_alive: head.keep_alive && !last_allowed,
            head_request: head.is_head(),
        };
        let (len, framing, expect_continue) = (head.len, head.framing, head.expect_continue);
        input.advance(len);

        let Some(decoder) = BodyDecoder::new(framing) else {
            return Some(self.answer(queue, app, pending, &[]));
        };
        if pending.reply.wants_body() {
            if let Framing::Length(n) = framing {
                if n > app.config.max_body as u64 {
                    // Refused before it is sent; the unread body makes the
                    // connection unusable, so it is closed.
                    return Some(self.reject(queue, app, BODY_TOO_LARGE));
                }
            }
        }
        if expect_continue {
            queue.copy(CONTINUE);
        }
        let collected = pending.reply.wants_body().then(Vec::new);
        Some(State::Body {
            decoder,
            pending,
            collected,
        })
    }

    /// Queues the response to a request whose body has been read.
    fn answer(&mut self, queue: &mut WriteQueue, app: &App, p: Pending, body: &[u8]) -> State {
        self.served += 1;
        respond(queue, app, &p.reply, body, p.keep_alive, p.head_request);
        if p.keep_alive {
            State::Head
        } else {
            State::Closed
        }
    }

    /// Queues the answer to a refused request; the connection then closes.
    fn reject(&mut self, queue: &mut WriteQueue, app: &App, reject: Reject) -> State {
        self.served += 1;
        let reply = Reply::error(reject.status, reject.reason);
        respond(queue, app, &reply, &[], false, false);
        State::Closed
    }

    /// Queues `408 Request Timeout` for a head that did not arrive in time;
    /// the connection then closes.
    pub fn timed_out(&mut self, queue: &mut WriteQueue, app: &App) {
        self.reject(
            queue,
            app,
            Reject {
                status: Status::REQUEST_TIMEOUT,
                reason: "request head not received in time",
            },
        );
    }
}

/// Queues the response for `reply`.
fn respond(
    queue: &mut WriteQueue,
    app: &App,
    reply: &Reply,
    request_body: &[u8],
    keep_alive: bool,
    head_request: bool,
) {
    let writer = Writer {
        strategy: app.config.strategy,
        lines: &app.lines,
        copy_below: app.config.copy_below,
    };
    let lines = &app.lines;
    let mut r = Response {
        status: Status::OK,
        content_type: Some(&lines.text_plain),
        extra: None,
        body: Body::Empty,
        keep_alive,
        head_request,
    };
    match reply {
        Reply::Help => {
            r.body = Body::Bytes(app.help.as_bytes());
            writer.write(queue, &r);
        }
        Reply::EndString { len, kind } => {
            let text = app.end_strings.get(*len, *kind);
            r.body = Body::Text(&text);
            writer.write(queue, &r);
        }
        Reply::Large(size) => {
            let payload = app.large.get(*size);
            r.content_type = None;
            r.body = Body::Shared(&payload);
            writer.write(queue, &r);
        }
        Reply::Echo(json) => {
            let json = json.finish(request_body);
            r.content_type = Some(&lines.json);
            r.body = Body::Bytes(&json);
            writer.write(queue, &r);
        }
        Reply::Error {
            status,
            reason,
            allow,
        } => {
            let text: Cow<'_, str> = if reason.ends_with('\n') {
                Cow::Borrowed(reason)
            } else {
                Cow::Owned(format!("{reason}\n"))
            };
            r.status = *status;
            r.extra = allow.then_some(&lines.allow);
            r.body = Body::Bytes(text.as_bytes());
            writer.write(queue, &r);
        }
    }
}
