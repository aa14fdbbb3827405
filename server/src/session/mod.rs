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
//! asks for a flush before it parses further pipelined requests; and one
//! call copies or encodes [`TURN`] bytes at most.
//!
//! **Memory.** The session holds the connection's [`Lease`] on the server's
//! memory account, and every buffer the connection grows is covered by it
//! first: the read buffer (the connection asks,
//! [`Session::grow_read_buffer`]), each response before it is queued (the
//! writer checks), a request body kept for `/echo` before it grows, TLS
//! records being written ([`Session::cover_sending`]). When the lease
//! cannot grow, a connection with output still queued waits for it to
//! drain and tries again; one with nothing queued is answered 503 with
//! `Retry-After` and closed. The bodies its queued responses reference are
//! kept alive here until the queue has written past them, so that each is
//! counted (once, by its own charge) for exactly as long as it is needed;
//! the session remembers no body beyond that.
//!
//! A reply that must wait for a body to be built hands the connection a
//! [`Job`] ([`Step::Defer`]); the connection awaits it and gives back what
//! it made with [`Session::resume`], and the session goes on in request
//! order. The session knows nothing of what the job does.
//!
//! Every response queued passes one place, `record`: the metrics count it
//! by route and status, and with `--access-log` it gets its line.

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use unflat::head::Status;
use unflat::queue::WriteQueue;

use crate::access;
use crate::bodies::{Body, Memo};
use crate::chunked::ChunkLimits;
use crate::decode::BodyDecoder;
use crate::memory::{Full, Lease};
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
    /// Flush the queue (it is over its limits, or a reply waits for the
    /// memory its output holds), then call `process` again before reading.
    Flush,
    /// Await the job ([`Job::run`]), pass what it made to
    /// [`Session::resume`], then call `process` again. The queue may be
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
    /// More of a request body, of which this many bytes of payload — chunk
    /// data, never framing — have been read: the body deadline grows with
    /// them.
    Body {
        /// Bytes of payload read so far.
        payload: u64,
    },
}

#[derive(Debug)]
enum State {
    Head,
    Body {
        decoder: BodyDecoder,
        pending: Pending,
        /// Bytes of payload read so far.
        payload: u64,
    },
    /// Waiting for the job the pending reply needs ([`Session::resume`]).
    Deferred(Pending),
    /// A reply to answer on the next turn: back from its job, or waiting
    /// for the queue to drain because the lease could not cover it.
    Ready(Pending),
    Closed,
}

/// A reply waiting for its request body (or its job, or memory).
#[derive(Debug)]
struct Pending {
    reply: Reply,
    /// What the request asked of its response.
    exchange: Exchange,
    /// The route that answers it, for the metrics.
    route: Route,
    /// The request body so far, for a reply that uses it.
    body: Option<Vec<u8>>,
    /// A refusal, the connection's last answer: when even it finds no
    /// room, the connection closes without a word.
    refusal: bool,
}

impl Pending {
    fn new(reply: Reply, exchange: Exchange, route: Route) -> Pending {
        Pending {
            reply,
            exchange,
            route,
            body: None,
            refusal: false,
        }
    }

    /// Bytes it holds: the request body so far, and what the reply holds.
    fn held(&self) -> usize {
        self.body.as_ref().map_or(0, Vec::capacity) + self.reply.held()
    }
}

/// What the access log needs of the request being answered (a session
/// answers one at a time): its method and target in one buffer, allocated
/// once at the longest request line, so that it never grows.
#[derive(Debug)]
struct Logged {
    line: String,
    method_len: usize,
    /// When its head was complete.
    began: Instant,
}

/// Bytes of memory a connection's buffers occupy that its queue does not
/// show, as the session counts them against its lease.
#[derive(Clone, Copy, Debug, Default)]
struct Outside {
    /// The read buffer's allocation.
    read_buffer: usize,
    /// The socket's own buffers, always (TLS records being read).
    socket: usize,
    /// What the socket may hold of the write in progress (TLS records).
    sending: usize,
}

/// One connection's protocol state.
#[derive(Debug)]
pub struct Session {
    state: State,
    served: u64,
    memo: Memo,
    /// The job the pending reply needs, to hand to the connection.
    job: Option<Job>,
    /// The connection's reservation on the server's memory account.
    lease: Lease,
    outside: Outside,
    /// The bodies queued responses reference, each with the position in the
    /// queue's output where its response ends.
    referenced: VecDeque<(u64, Arc<Body>)>,
    /// The peer's address as the access log writes it (rendered once per
    /// connection).
    peer: Option<String>,
    /// With `--access-log`: the request being answered.
    logged: Option<Logged>,
}

impl Session {
    /// A session of `app` before its first request, with a lease of its own
    /// that covers nothing yet (for a session driven in memory).
    pub fn new(app: &App) -> Session {
        let lease = Lease::open(&app.memory, 0);
        Session::open(app, lease, 0, 0)
    }

    /// A session of `app` before its first request, on `lease`, which
    /// covers the connection's read buffer of `read_buffer` bytes and its
    /// socket's own buffers of `socket` bytes (see
    /// [`Session::base_memory`]).
    pub fn open(app: &App, lease: Lease, read_buffer: usize, socket: usize) -> Session {
        Session {
            state: State::Head,
            served: 0,
            memo: Memo::default(),
            job: None,
            lease,
            outside: Outside {
                read_buffer,
                socket,
                sending: 0,
            },
            referenced: VecDeque::new(),
            peer: None,
            logged: app.config.access_log.then(|| Logged {
                line: String::with_capacity(app.config.max_request_line),
                method_len: 0,
                began: Instant::now(),
            }),
        }
    }

    /// A connection's base ([`Lease`]): its read buffer of `read_buffer`
    /// bytes, its socket's buffers of `socket`, a write buffer for a small
    /// response, and the access log's line when it is on.
    pub fn base_memory(app: &App, read_buffer: usize, socket: usize) -> usize {
        let logged = if app.config.access_log {
            app.config.max_request_line
        } else {
            0
        };
        read_buffer + socket + WRITE_BUFFER_FIRST + logged
    }

    /// With `--access-log`, notes the request about to be answered: its
    /// method and target (`-` for a request refused before its head was
    /// read), from now.
    #[inline]
    fn log_request(&mut self, method: &str, target: &str) {
        let Some(logged) = &mut self.logged else {
            return;
        };
        // Both come from one request line, which is never longer than the
        // buffer: it does not grow.
        logged.line.clear();
        logged.line.push_str(method);
        logged.line.push_str(target);
        logged.method_len = method.len();
        logged.began = Instant::now();
    }

    /// Names the peer in the access log's lines.
    pub fn set_peer(&mut self, peer: SocketAddr) {
        self.peer = Some(peer.to_string());
    }

    /// Bytes the connection's buffers occupy outside `queue`.
    fn besides(&self) -> usize {
        let o = self.outside;
        let body = match &self.state {
            State::Body { pending, .. } | State::Ready(pending) | State::Deferred(pending) => {
                pending.held()
            }
            State::Head | State::Closed => 0,
        };
        let logged = self.logged.as_ref().map_or(0, |l| l.line.capacity());
        o.read_buffer + o.socket + o.sending + body + logged
    }

    /// Makes the lease cover the read buffer grown to `bytes`, or fails (the
    /// buffer must then not grow).
    pub fn grow_read_buffer(&mut self, queue: &WriteQueue, bytes: usize) -> Result<(), Full> {
        let need = self.besides() - self.outside.read_buffer + bytes + queue.footprint();
        self.lease.cover(need)?;
        self.outside.read_buffer = bytes;
        Ok(())
    }

    /// Makes the lease cover `bytes` the socket may hold of the write about
    /// to begin, or fails (the socket must then hold no more than its own
    /// buffers allow); [`Session::settle`] gives it back.
    pub fn cover_sending(&mut self, queue: &WriteQueue, bytes: usize) -> Result<(), Full> {
        let need = self.besides() - self.outside.sending + bytes + queue.footprint();
        self.lease.cover(need)?;
        self.outside.sending = bytes;
        Ok(())
    }

    /// After a write: lets go of the bodies responses no longer need, and
    /// gives back what the buffers no longer occupy.
    pub fn settle(&mut self, queue: &WriteQueue) {
        self.release_written(queue);
        self.outside.sending = 0;
        self.lease.trim(self.besides() + queue.footprint());
    }

    /// Drops the bodies of the responses the queue has written whole.
    #[inline]
    fn release_written(&mut self, queue: &WriteQueue) {
        let written = queue.written_total();
        while self
            .referenced
            .front()
            .is_some_and(|&(end, _)| end <= written)
        {
            self.referenced.pop_front();
        }
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.served
    }

    /// Bytes the session's lease covers.
    pub fn leased(&self) -> usize {
        self.lease.held()
    }

    /// Hands over what the job of [`Step::Defer`] made.
    pub fn resume(&mut self, finished: Finished) {
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Deferred(mut pending) => {
                pending.reply = finished.0;
                self.state = State::Ready(pending);
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
        self.release_written(queue);
        let copied_before = queue.copied_len();
        loop {
            if matches!(self.state, State::Closed) {
                return Step::Close;
            }
            if queue.has_remaining()
                && (queue.copied_len() > app.config.max_queued_bytes
                    || queue.pending_responses() >= app.config.max_queued_responses
                    // A reply that waits for memory waits for the queue.
                    || matches!(self.state, State::Ready(_))
                    // One call copies or encodes a turn's worth at most.
                    || queue.copied_len() >= copied_before + TURN)
            {
                return Step::Flush;
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
                    decoder,
                    pending,
                    payload,
                } => match self.body(input, queue, app, decoder, pending, payload) {
                    Ok(next) => next,
                    Err(waiting) => return Step::Read(waiting),
                },
                State::Ready(pending) => self.answer(queue, app, pending),
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
                self.log_request("-", "-");
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
        self.log_request(head.method, head.target);
        let exchange = Exchange {
            // Draining, the connection closes after this response: say
            // so (`Connection: close`), so that no client or balancer
            // sends another request on it.
            keep_alive: head.keep_alive && !last_allowed && !app.is_draining(),
            head_request: head.is_head(),
        };
        let mut pending = Pending::new(reply, exchange, route);
        // What the reply made from the head (the echo's JSON so far, an
        // error's reason) is held while the body is read: counted now.
        let held = pending.reply.held();
        if held > 0 {
            let need = self.besides() + held + queue.footprint();
            if let Err(full) = self.lease.cover(need) {
                input.advance(head.len);
                return Some(self.out_of_memory(queue, app, pending, full));
            }
        }
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
            Ok(None) => return Some(self.answer(queue, app, pending)),
            // Refused before it is sent; the unread body makes the
            // connection unusable, so it is closed.
            Err(reject) => {
                return Some(self.reject(queue, app, reject, exchange.head_request, route));
            }
        };
        if expect_continue {
            let besides = self.besides();
            if let Err(full) = app
                .writer
                .interim(queue, Status::CONTINUE, &mut self.lease, besides)
            {
                return Some(self.out_of_memory(queue, app, pending, full));
            }
        }
        if pending.reply.wants_body() {
            pending.body = Some(Vec::new());
        }
        Some(State::Body {
            decoder,
            pending,
            payload: 0,
        })
    }

    /// Decodes what `input` holds of a request body; the next state, or
    /// what to wait for when the body is not complete.
    fn body(
        &mut self,
        input: &mut BytesMut,
        queue: &mut WriteQueue,
        app: &App,
        mut decoder: BodyDecoder,
        mut pending: Pending,
        payload: u64,
    ) -> Result<State, Waiting> {
        if let Some(body) = &pending.body {
            // Room first for all this input may add to the kept body.
            let limit = app.config.max_body;
            let want = body.len() + input.len().min(limit.saturating_sub(body.len()));
            if want > body.capacity() {
                let grown = want.max(body.capacity() * 2).min(limit.max(want));
                // The state is out of `self` while it is worked on: the
                // body is counted here, at its grown size.
                let need = self.besides() + grown + pending.reply.held() + queue.footprint();
                if let Err(full) = self.lease.cover(need) {
                    return Ok(self.out_of_memory(queue, app, pending, full));
                }
                if let Some(body) = &mut pending.body {
                    body.reserve_exact(grown - body.len());
                }
            }
        }
        let mut got = 0;
        let kept = &mut pending.body;
        let mut sink = |chunk: &[u8]| {
            got += chunk.len() as u64;
            if let Some(body) = kept {
                debug_assert!(body.capacity() - body.len() >= chunk.len(), "room made");
                body.extend_from_slice(chunk);
            }
        };
        let decoded = match decoder.decode(input, &mut sink) {
            Ok(d) => d,
            Err(reject) => {
                let (head_request, route) = (pending.exchange.head_request, pending.route);
                drop(pending);
                return Ok(self.reject(queue, app, reject, head_request, route));
            }
        };
        input.advance(decoded.consumed);
        let payload = payload + got;
        if !decoded.done {
            self.state = State::Body {
                decoder,
                pending,
                payload,
            };
            return Err(Waiting::Body { payload });
        }
        Ok(self.answer(queue, app, pending))
    }

    /// Queues the response to a request whose body has been read, unless its
    /// reply needs a job done first, or the memory to queue it (then it
    /// waits for the queue to drain, or is refused when nothing is queued).
    fn answer(&mut self, queue: &mut WriteQueue, app: &App, mut p: Pending) -> State {
        if let Some(job) = p.reply.prepare(app, p.exchange, &mut self.memo) {
            self.job = Some(job);
            return State::Deferred(p);
        }
        self.respond(queue, app, p)
    }

    /// Queues the response of `p`, whose reply is ready. When the lease
    /// cannot cover it: waits for the queue to drain if anything is queued,
    /// else refuses with 503 — or, for a refusal itself, closes.
    fn respond(&mut self, queue: &mut WriteQueue, app: &App, p: Pending) -> State {
        let besides = self.besides() + p.held();
        let to = To {
            app,
            request_body: p.body.as_deref().unwrap_or_default(),
            exchange: p.exchange,
            lease: &mut self.lease,
            besides,
        };
        match p.reply.respond(to, queue) {
            Ok(written) => {
                self.served += 1;
                self.record(app, p.route, written);
                if written.references_body {
                    if let Some(body) = p.reply.into_body() {
                        let end = queue.written_total() + queue.remaining() as u64;
                        self.referenced.push_back((end, body));
                    }
                }
                if p.exchange.keep_alive {
                    State::Head
                } else {
                    State::Closed
                }
            }
            // The queue's output holds memory that writing gives back.
            Err(_) if queue.has_remaining() => State::Ready(p),
            Err(_) if p.refusal => State::Closed,
            Err(full) => self.out_of_memory(queue, app, p, full),
        }
    }

    /// Counts a response in the metrics, and logs it with `--access-log`:
    /// the one place every response passes once it is queued.
    fn record(&self, app: &App, route: Route, written: Written) {
        app.metrics.request(route, written.status);
        if let Some(logged) = &self.logged {
            let (method, target) = logged.line.split_at(logged.method_len);
            access::log(&access::Entry {
                peer: self.peer.as_deref().unwrap_or("-"),
                method,
                target,
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
        let reply = Reply::error(reject.status, reject.reason);
        self.refuse(queue, app, reply, head_request, route)
    }

    /// Queues `503` with `Retry-After` for a request the connection has no
    /// memory left to answer (`full` says which limit), and closes.
    fn out_of_memory(
        &mut self,
        queue: &mut WriteQueue,
        app: &App,
        p: Pending,
        full: Full,
    ) -> State {
        app.memory.refused();
        let (head_request, route) = (p.exchange.head_request, p.route);
        // The request body it kept is given back before the refusal.
        drop(p);
        self.refuse(queue, app, Reply::out_of_memory(full), head_request, route)
    }

    /// Queues `reply` as the last response of the connection. A refusal is
    /// short and fits the write buffer the connection's base covers; were
    /// there no room even for it, the connection closes without a word.
    fn refuse(
        &mut self,
        queue: &mut WriteQueue,
        app: &App,
        reply: Reply,
        head_request: bool,
        route: Route,
    ) -> State {
        let exchange = Exchange {
            keep_alive: false,
            head_request,
        };
        let mut refusal = Pending::new(reply, exchange, route);
        refusal.refusal = true;
        self.respond(queue, app, refusal)
    }

    /// Queues `503` with `Retry-After` for the head in `input`, or the body,
    /// that the read buffer has no room left to take (`full` says which
    /// limit); the connection then closes.
    pub fn no_room_to_read(&mut self, input: &[u8], queue: &mut WriteQueue, app: &App, full: Full) {
        let (head_request, route) = match std::mem::replace(&mut self.state, State::Closed) {
            State::Body { pending, .. } => (pending.exchange.head_request, pending.route),
            _ => {
                self.log_request("-", "-");
                (starts_with_head_method(input), Route::Unmatched)
            }
        };
        app.memory.refused();
        let reply = Reply::out_of_memory(full);
        self.state = self.refuse(queue, app, reply, head_request, route);
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
                self.log_request("-", "-");
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

/// Bytes one [`Session::process`] copies or encodes at most before it asks
/// for a flush: pipelined requests for long bodies are answered a turn at
/// a time, so that the connection can let others run between turns.
pub const TURN: usize = 64 * 1024;

/// The write buffer a connection's base covers: room for a small response
/// (a refusal, `/healthz`, `/metrics`, a short body), so that a client
/// asking for one is answered whatever other connections hold.
const WRITE_BUFFER_FIRST: usize = 8 * 1024;

/// True when `input` holds the start of a `HEAD` request (after the empty
/// lines a request may begin with).
fn starts_with_head_method(input: &[u8]) -> bool {
    after_empty_lines(input).starts_with(b"HEAD ")
}
