//! One connection's protocol state, without IO: bytes in, responses queued.
//!
//! [`Session::process`] takes the bytes read so far, answers every request
//! they hold completely — pipelined requests included — by queueing the
//! responses on the [`WriteQueue`], and says what the connection must do
//! next ([`Step`]). It never blocks and never touches a socket, so the same
//! code runs under tokio, in tests, and in the fuzzer.
//!
//! Backpressure: while the queue holds more than `--max-queued-bytes` of
//! copied output or `--max-queued-responses` responses, or while all
//! connections together hold more than `--max-queued-total`
//! ([`crate::budget`]), `process` stops and asks for a flush before it
//! parses further pipelined requests.
//!
//! A reply that must be finished off the async workers (a `/large` payload
//! to build) stops the session too: it hands the connection a [`Job`]
//! ([`Step::Defer`]), the connection runs it where blocking is allowed and
//! gives back what it made with [`Session::resume`], and the session goes on
//! in request order. The session knows nothing of what the job does.
//!
//! Every response queued passes one place, `record`: the metrics count it
//! by route and status, and with `--access-log` it gets its line.

use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use unflat::head::Status;
use unflat::queue::WriteQueue;

use crate::access;
use crate::bodies::Memo;
use crate::budget::Account;
use crate::chunked::ChunkLimits;
use crate::decode::BodyDecoder;
pub use crate::reply::{Finished, Job};
use crate::reply::{Reply, To};
use crate::request::{after_empty_lines, parse_head, HeadLimits, Parsed, Reject, FIELDS_CAP};
use crate::response::{Exchange, Written};
use crate::routes::{route, Route};
use crate::App;

/// What the connection must do after [`Session::process`].
#[derive(Debug)]
pub enum Step {
    /// Flush the queue, then read more input.
    Read(Waiting),
    /// Flush the queue (it is over its limits), then call `process` again
    /// before reading.
    Flush,
    /// Run the job off the async workers ([`Job::run`]), pass what it made
    /// to [`Session::resume`], then call `process` again. The queue may be
    /// flushed meanwhile.
    Defer(Job),
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
    /// More of a request body, of which this many bytes (framing
    /// included) have been read: the body deadline grows with them.
    Body {
        /// Bytes of the body read so far.
        received: u64,
    },
}

#[derive(Debug)]
enum State {
    Head,
    Body {
        decoder: BodyDecoder,
        pending: Pending,
        /// The body so far, for routes that use it.
        collected: Option<Vec<u8>>,
        /// Bytes of the body read so far, framing included.
        received: u64,
    },
    /// Waiting for the job the pending reply needs ([`Session::resume`]).
    Deferred(Pending),
    /// The pending reply, finished by its job, to answer now.
    Resumed(Pending),
    Closed,
}

/// A reply waiting for its request body (or its job).
#[derive(Debug)]
struct Pending {
    reply: Reply,
    /// What the request asked of its response.
    exchange: Exchange,
    /// The route that answers it, for the metrics.
    route: Route,
}

/// What the access log needs of the request being answered (a session
/// answers one at a time); its buffers are kept from one request to the
/// next.
#[derive(Debug)]
struct Logged {
    method: String,
    target: String,
    /// When its head was complete.
    began: Instant,
}

/// One connection's protocol state.
#[derive(Debug)]
pub struct Session {
    state: State,
    served: u64,
    memo: Memo,
    /// The job the pending reply needs, to hand to the connection.
    job: Option<Job>,
    /// The connection's share of the server's queued-output budget.
    account: Account,
    /// The peer's address as the access log writes it (rendered once per
    /// connection).
    peer: Option<String>,
    /// With `--access-log`: the request being answered.
    logged: Option<Logged>,
}

impl Session {
    /// A session of `app` before its first request.
    pub fn new(app: &App) -> Session {
        Session {
            state: State::Head,
            served: 0,
            memo: Memo::default(),
            job: None,
            account: Account::new(app.budget.clone()),
            peer: None,
            logged: None,
        }
    }

    /// With `--access-log`, notes the request about to be answered: its
    /// method and target (`-` for a request refused before its head was
    /// read), from now.
    #[inline]
    fn log_request(&mut self, app: &App, method: &str, target: &str) {
        if !app.config.access_log {
            return;
        }
        let logged = self.logged.get_or_insert_with(|| Logged {
            method: String::new(),
            target: String::new(),
            began: Instant::now(),
        });
        logged.method.clear();
        logged.method.push_str(method);
        logged.target.clear();
        logged.target.push_str(target);
        logged.began = Instant::now();
    }

    /// Names the peer in the access log's lines.
    pub fn set_peer(&mut self, peer: SocketAddr) {
        self.peer = Some(peer.to_string());
    }

    /// Reports what `queue` holds to the server's budget; the connection
    /// calls it after writing.
    pub fn settle(&mut self, queue: &WriteQueue) {
        self.account.settle(queue);
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.served
    }

    /// Hands over what the job of [`Step::Defer`] made.
    pub fn resume(&mut self, finished: Finished) {
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Deferred(mut pending) => {
                pending.reply = finished.0;
                self.state = State::Resumed(pending);
            }
            other => {
                debug_assert!(false, "resumed while not waiting for a job");
                self.state = other;
            }
        }
    }

    /// Answers the requests `input` holds, consuming them, and says what to
    /// do next.
    pub fn process(&mut self, input: &mut BytesMut, queue: &mut WriteQueue, app: &App) -> Step {
        loop {
            if matches!(self.state, State::Closed) {
                return Step::Close;
            }
            // An empty queue holds nothing and may always take the next
            // response (the connection settles it after writing).
            if queue.has_remaining() {
                self.account.settle(queue);
                if queue.copied_len() > app.config.max_queued_bytes
                    || queue.pending_responses() >= app.config.max_queued_responses
                    || self.account.exceeded()
                {
                    return Step::Flush;
                }
            }
            if let State::Head = self.state {
                // Between requests, what nearly every turn is: handled in
                // place, and a keep-alive answer leaves the state as it is.
                // (Moving the whole state out and back, and dropping the
                // one replaced, cost about 60 instructions per pipelined
                // request.)
                if input.is_empty() {
                    return Step::Read(Waiting::Idle);
                }
                match self.head(input, queue, app) {
                    Some(State::Head) => {}
                    Some(next) => self.state = next,
                    None => return Step::Read(Waiting::Head),
                }
                if let Some(job) = self.job.take() {
                    return Step::Defer(job);
                }
                continue;
            }
            let state = std::mem::replace(&mut self.state, State::Head);
            self.state = match state {
                State::Head => unreachable!("handled in place above"),
                State::Body {
                    mut decoder,
                    pending,
                    mut collected,
                    received,
                } => {
                    let mut sink = |chunk: &[u8]| {
                        if let Some(body) = &mut collected {
                            body.extend_from_slice(chunk);
                        }
                    };
                    match decoder.decode(input, &mut sink) {
                        Err(reject) => self.reject(
                            queue,
                            app,
                            reject,
                            pending.exchange.head_request,
                            pending.route,
                        ),
                        Ok(d) => {
                            input.advance(d.consumed);
                            let received = received + d.consumed as u64;
                            if !d.done {
                                self.state = State::Body {
                                    decoder,
                                    pending,
                                    collected,
                                    received,
                                };
                                return Step::Read(Waiting::Body { received });
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
                State::Resumed(pending) => self.answer(queue, app, pending, &[]),
                // `process` without `resume`: the job is gone; closing is
                // all that is left.
                State::Deferred(_) => State::Closed,
                State::Closed => State::Closed,
            };
            if let Some(job) = self.job.take() {
                return Step::Defer(job);
            }
        }
    }

    /// Parses one head from `input`; `None` when it is not complete yet.
    fn head(&mut self, input: &mut BytesMut, queue: &mut WriteQueue, app: &App) -> Option<State> {
        let limits = HeadLimits {
            head: app.config.max_head,
            request_line: app.config.max_request_line,
            fields: app.config.max_fields,
        };
        // Uninitialised: httparse writes the fields it finds, and an array
        // of 256 empty headers would cost an 8 KiB memset per request.
        let mut fields = [MaybeUninit::uninit(); FIELDS_CAP];
        let head = match parse_head(input, &mut fields, limits) {
            Parsed::Partial => return None,
            Parsed::Rejected(reject) => {
                // No body may follow even a refusal of a HEAD request.
                let head_request = starts_with_head_method(input);
                self.log_request(app, "-", "-");
                return Some(self.reject(queue, app, reject, head_request, Route::Unmatched));
            }
            Parsed::NewerMinor(at) => {
                // HTTP/1.x, x > 1: processed as HTTP/1.1 (RFC 9112 §2.3),
                // parsed again on the next turn of `process` (a loop, not a
                // recursion, so that this function stays inlined).
                input[at] = b'1';
                return Some(State::Head);
            }
            Parsed::Complete(head) => head,
        };
        let last_allowed = app
            .config
            .max_requests
            .is_some_and(|max| self.served + 1 >= max);
        let (route, reply) = route(app, &head);
        self.log_request(app, head.method, head.target);
        let pending = Pending {
            reply,
            exchange: Exchange {
                // Draining, the connection closes after this response: say
                // so (`Connection: close`), so that no client or balancer
                // sends another request on it.
                keep_alive: head.keep_alive && !last_allowed && !app.is_draining(),
                head_request: head.is_head(),
            },
            route,
        };
        // The trailer section, if any, shares the head's budget.
        let limits = ChunkLimits {
            data: app.config.max_body as u64,
            trailer_bytes: app.config.max_head.saturating_sub(head.len),
            trailer_fields: app.config.max_fields.saturating_sub(head.fields.len()),
        };
        let (len, framing, expect_continue) = (head.len, head.framing, head.expect_continue);
        input.advance(len);
        let decoder = match BodyDecoder::new(framing, limits) {
            Ok(Some(decoder)) => decoder,
            Ok(None) => return Some(self.answer(queue, app, pending, &[])),
            // Refused before it is sent; the unread body makes the
            // connection unusable, so it is closed.
            Err(reject) => {
                let head_request = pending.exchange.head_request;
                return Some(self.reject(queue, app, reject, head_request, pending.route));
            }
        };
        if expect_continue {
            app.writer.interim(queue, Status::CONTINUE);
        }
        let collected = pending.reply.wants_body().then(Vec::new);
        Some(State::Body {
            decoder,
            pending,
            collected,
            received: 0,
        })
    }

    /// Queues the response to a request whose body has been read, unless its
    /// reply needs a job done first.
    fn answer(&mut self, queue: &mut WriteQueue, app: &App, mut p: Pending, body: &[u8]) -> State {
        if let Some(job) = p.reply.prepare(app, p.exchange) {
            self.job = Some(job);
            return State::Deferred(p);
        }
        self.served += 1;
        let to = To {
            app,
            memo: &mut self.memo,
            request_body: body,
            exchange: p.exchange,
        };
        let written = p.reply.respond(to, queue);
        self.record(app, p.route, written);
        if p.exchange.keep_alive {
            State::Head
        } else {
            State::Closed
        }
    }

    /// Counts a response in the metrics, and logs it with `--access-log`:
    /// the one place every response passes once it is queued.
    fn record(&self, app: &App, route: Route, written: Written) {
        app.metrics.request(route, written.status);
        if let Some(logged) = &self.logged {
            access::log(&access::Entry {
                peer: self.peer.as_deref().unwrap_or("-"),
                method: &logged.method,
                target: &logged.target,
                status: written.status.code(),
                bytes: written.body_bytes,
                duration: logged.began.elapsed(),
            });
        }
    }

    /// Queues the answer to a refused request; the connection then closes.
    fn reject(
        &mut self,
        queue: &mut WriteQueue,
        app: &App,
        reject: Reject,
        head_request: bool,
        route: Route,
    ) -> State {
        let pending = Pending {
            reply: Reply::error(reject.status, reject.reason),
            exchange: Exchange {
                keep_alive: false,
                head_request,
            },
            route,
        };
        self.answer(queue, app, pending, &[])
    }

    /// Queues `408 Request Timeout` for the head in `input`, or the body,
    /// that did not arrive in time; the connection then closes.
    pub fn timed_out(&mut self, input: &[u8], queue: &mut WriteQueue, app: &App) {
        let (reason, head_request, about) = match std::mem::replace(&mut self.state, State::Closed)
        {
            State::Body { pending, .. } => (
                "request body not received in time",
                pending.exchange.head_request,
                pending.route,
            ),
            _ => {
                // No head was read: the access log has no method or target.
                self.log_request(app, "-", "-");
                (
                    "request head not received in time",
                    starts_with_head_method(input),
                    Route::Unmatched,
                )
            }
        };
        let reject = Reject {
            status: Status::REQUEST_TIMEOUT,
            reason,
        };
        self.state = self.reject(queue, app, reject, head_request, about);
    }
}

/// True when `input` holds the start of a `HEAD` request (after the empty
/// lines a request may begin with).
fn starts_with_head_method(input: &[u8]) -> bool {
    after_empty_lines(input).starts_with(b"HEAD ")
}
