//! One connection's requests, without IO: [`Session::process`] answers every
//! complete request in the bytes read, pipelined ones included, by queueing
//! responses on the [`WriteQueue`], and says what the connection does next
//! ([`Step`]). No socket, no blocking: the same code runs under tokio, in
//! tests and in the fuzzer. Replies come from the [`Service`]
//! (`service.rs`); one that must wait hands the connection a [`Job`].
//!
//! **Backpressure**: past `--max-queued-bytes` or `--max-queued-responses`,
//! and after [`TURN`] bytes, `process` asks for a flush before parsing on.
//! **Memory**: the session owns the connection's [`Budget`]; every buffer is
//! covered before it grows. Uncovered, a connection with output queued waits
//! for it to drain; one with none is answered 503 and closed. Replies whose
//! memory queued responses share are kept until the queue has written them.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, BytesMut};
use unflat::head::{Framing, Status};
use unflat::queue::WriteQueue;

mod buffers;
mod guard;
mod job;
mod service;

pub use guard::Panicked;
pub use job::{Finished, Job};
pub use service::{Answered, Reply, Service};

use crate::clock::Moment;
use crate::h1::{
    begins_head_request, parse_head, BodyDecoder, BodyLimits, HeadLimits, Parsed, Reject,
    FIELDS_CAP,
};
use crate::memory::{Budget, Full, Lease, Memory};
use crate::response::{Chunk, Exchange, FieldError, Fields, Stream, StreamHead, Writer, Written};

/// What answering a ready reply came to, once its fields are let go.
enum Next {
    Written(Result<Written, Full>),
    Stream(StreamHead),
    Refused(Option<FieldError>),
}
use guard::guarded;

/// What every session shares.
#[derive(Debug)]
pub struct Protocol<S> {
    /// The application: its replies, and what it is told of responses.
    pub service: S,
    /// Writes responses, by the configured strategy.
    pub writer: Writer,
    /// The memory account.
    pub memory: Arc<Memory>,
    /// The protocol's limits.
    pub limits: Limits,
    /// Set once shutdown has begun.
    pub draining: Draining,
}

/// Whether the server is shutting down: connections are then not kept
/// alive, and a service may say so too. Shared by the core and its service.
#[derive(Clone, Debug, Default)]
pub struct Draining(Arc<AtomicBool>);

impl Draining {
    /// Marks the server as shutting down.
    pub fn begin(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// True once [`Draining::begin`] was called.
    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The limits a session keeps to.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// A request head's (`--max-head`, `--max-request-line`,
    /// `--max-fields`).
    pub head: HeadLimits,
    /// A request body, on any route (`--max-body`).
    pub max_body: usize,
    /// Copied output queued before pipelined requests wait
    /// (`--max-queued-bytes`).
    pub max_queued_bytes: usize,
    /// Responses queued before pipelined requests wait
    /// (`--max-queued-responses`).
    pub max_queued_responses: usize,
    /// Requests answered on one connection before it closes
    /// (`--max-requests`).
    pub max_requests: Option<u64>,
}

/// What the connection must do after [`Session::process`] (`R`: the
/// service's reply).
#[derive(Debug)]
pub enum Step<R> {
    /// Flush the queue, then read more input.
    Read(Waiting),
    /// Flush the queue (it is over its limits, or a reply waits for the
    /// memory its output holds), then call `process` again before reading.
    Flush,
    /// Await the job ([`Job::run`]), pass what it made to
    /// [`Session::resume`], then call `process` again. The queue may be
    /// flushed meanwhile.
    Defer(Job<R>),
    /// Flush the queue, then await [`Session::poll_wait`] — a streamed
    /// body's next chunk, which the service is waiting for
    /// ([`Service::poll_chunk`]) — and call `process` again.
    Wait,
    /// Flush the queue, then close the connection.
    Close,
    /// Reset the connection without flushing: a response cut short whose
    /// end only the close marks (HTTP/1.0's), which a clean close would
    /// make look complete.
    Reset,
}

/// What the session is waiting for, which decides the read timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// Nothing: between requests (the idle keep-alive timeout).
    Idle,
    /// The rest of a request head (the head deadline).
    Head,
    /// More of a request body: the body deadline grows with the payload
    /// read (chunk data, never framing).
    Body {
        /// Bytes of payload read so far.
        payload: u64,
    },
}

#[derive(Debug)]
enum State<S: Service> {
    Head,
    Body {
        decoder: BodyDecoder,
        pending: Pending<S>,
        /// Bytes of payload read so far.
        payload: u64,
    },
    /// Waiting for the job the pending reply needs ([`Session::resume`]).
    Deferred(Pending<S>),
    /// A reply to answer on the next turn: back from its job, or waiting
    /// for the queue to drain because the lease could not cover it.
    Ready(Pending<S>),
    /// A streamed response whose head is queued: its chunks are asked for
    /// as the queue drains. Boxed: rare, and larger than the rest.
    Streaming(Box<Streaming<S>>),
    Closed,
    /// A stream to HTTP/1.0 cut short: the connection is reset.
    Reset,
}

/// A streamed response being queued ([`Service::next_chunk`]).
#[derive(Debug)]
struct Streaming<S: Service> {
    reply: S::Reply,
    label: Option<S::Label>,
    /// Its head, until it is queued with the first chunk.
    head: Option<StreamHead>,
    exchange: Exchange,
    status: Status,
    stream: Stream,
    keep_alive: bool,
    /// A chunk asked for that the lease could not cover yet.
    next: Option<Chunk>,
    /// The service said the stream ended; its end waits for memory.
    ended: bool,
    /// The service is waiting for the next chunk ([`Service::poll_chunk`]
    /// was `Pending`): the connection awaits [`Session::poll_wait`].
    waiting: bool,
    /// The service's chunk could not be charged ([`Full`]), seen while
    /// waiting for it: handled on the next turn.
    refused: Option<Full>,
}

impl<S: Service> Streaming<S> {
    /// Whether the queue must drain before the stream goes on: it holds
    /// [`STREAM_AHEAD`] or more, or what comes next waits for memory.
    fn waits(&self, queue: &WriteQueue) -> bool {
        self.next.is_some() || self.ended || queue.remaining() >= STREAM_AHEAD
    }
}

/// What the session keeps of a request head once it is parsed: how long
/// it was, how its body is framed, how many fields it had (the trailers
/// share the head's limits), and whether it expects `100 Continue`.
#[derive(Clone, Copy, Debug)]
struct HeadFacts {
    len: usize,
    framing: Framing,
    fields: usize,
    expect_continue: bool,
}

/// What a request is answered with: the service's reply, or the core's own
/// refusal.
#[derive(Debug)]
enum Outcome<R> {
    Reply(R),
    Refusal(Refusal),
}

/// The core's refusal of a request: a status and a plain-text reason
/// (`retry_after`: a limit the server is at now).
#[derive(Debug)]
struct Refusal {
    status: Status,
    reason: Cow<'static, str>,
    retry_after: bool,
}

impl Refusal {
    /// 503 for want of memory, naming the limit.
    fn out_of_memory(full: Full) -> Refusal {
        Refusal {
            status: Status::SERVICE_UNAVAILABLE,
            reason: Cow::Owned(format!(
                "the server's memory is at its limit ({}); try again later",
                full.limit
            )),
            retry_after: true,
        }
    }
}

impl Refusal {
    /// 500 for a request whose service panicked (logged where caught).
    fn failed() -> Refusal {
        Refusal {
            status: Status::INTERNAL_SERVER_ERROR,
            reason: Cow::Borrowed("the server failed to answer this request"),
            retry_after: false,
        }
    }
}

impl From<Reject> for Refusal {
    fn from(reject: Reject) -> Refusal {
        Refusal {
            status: reject.status,
            reason: Cow::Borrowed(reject.reason),
            retry_after: false,
        }
    }
}

/// A reply waiting for its request body (or its job, or memory).
#[derive(Debug)]
struct Pending<S: Service> {
    answer: Outcome<S::Reply>,
    /// What the request asked of its response.
    exchange: Exchange,
    /// What the service counts its response under; `None` for a head the
    /// core could not read.
    label: Option<S::Label>,
    /// The request body so far, for a reply that uses it.
    body: Option<Vec<u8>>,
    /// A refusal, the connection's last answer: when even it finds no
    /// room, the connection closes without a word.
    refusal: bool,
}

impl<S: Service> Pending<S> {
    fn new(answer: Outcome<S::Reply>, exchange: Exchange, label: Option<S::Label>) -> Pending<S> {
        Pending {
            answer,
            exchange,
            label,
            body: None,
            refusal: false,
        }
    }

    /// Bytes it holds: the request body so far, and what the reply holds.
    fn held(&self) -> usize {
        self.body.as_ref().map_or(0, Vec::capacity) + self.reply_held()
    }

    /// Bytes the reply holds (the echo's JSON so far).
    fn reply_held(&self) -> usize {
        match &self.answer {
            Outcome::Reply(reply) => reply.held(),
            Outcome::Refusal(_) => 0,
        }
    }
}

/// One connection's state in the core: the request being read or
/// answered, what its lease covers, the replies its queued responses
/// still share memory with, and what the service keeps for it.
#[derive(Debug)]
pub struct Session<S: Service> {
    state: State<S>,
    served: u64,
    /// What the service keeps for this connection.
    conn: S::Conn,
    /// The job the pending reply needs, to hand to the connection.
    job: Option<Job<S::Reply>>,
    /// The connection's memory: its lease, and what it covers.
    budget: Budget,
    /// The replies whose memory queued responses share, each with the
    /// position in the queue's output where its response ends.
    referenced: VecDeque<(u64, S::Reply)>,
    /// When the head of the request being answered was complete (or the
    /// request refused), on the latency histogram's coarse clock.
    began: Moment,
    /// That clock, read as the current call began.
    now: Moment,
    /// Whether the request being answered is a `HEAD` (for a 500 in place
    /// of its response, should the service panic).
    head_request: bool,
    /// A streamed response whose head is queued and whose end is not:
    /// whether it is chunked (how a panic must end it).
    begun: Option<bool>,
    /// A panic caught while waiting for a stream's chunk
    /// ([`Session::poll_wait`]), answered on the next turn.
    panic: Option<Box<dyn std::any::Any + Send>>,
}

impl<S: Service> Session<S> {
    /// A session of `service` before its first request, with a lease of its
    /// own that covers nothing yet (for a session driven in memory).
    pub fn new(service: &Protocol<S>) -> Session<S> {
        let lease = Lease::open(&service.memory, 0);
        Session::open(service, lease, 0, 0, None)
    }

    /// A session of `service` before the first request from `peer`, on
    /// `lease`, which covers the connection's read buffer of `read_buffer`
    /// bytes and its socket's own buffers of `socket` bytes (see
    /// [`Session::base_memory`]).
    pub fn open(
        service: &Protocol<S>,
        lease: Lease,
        read_buffer: usize,
        socket: usize,
        peer: Option<SocketAddr>,
    ) -> Session<S> {
        Session {
            state: State::Head,
            served: 0,
            conn: service.service.open(peer),
            job: None,
            budget: Budget::new(lease, read_buffer, socket, service.service.conn_memory()),
            referenced: VecDeque::new(),
            began: Moment::default(),
            now: Moment::default(),
            head_request: false,
            begun: None,
            panic: None,
        }
    }

    /// The one place persistence is decided: open when the client wants it,
    /// unless this is its last request (`--max-requests`) or the server is
    /// draining (then `Connection: close` says so).
    fn exchange(
        &self,
        service: &Protocol<S>,
        wants_keep_alive: bool,
        head_request: bool,
        takes_chunked: bool,
    ) -> Exchange {
        let last_allowed = service
            .limits
            .max_requests
            .is_some_and(|max| self.served + 1 >= max);
        Exchange {
            keep_alive: wants_keep_alive && !last_allowed && !service.draining.is_on(),
            head_request,
            takes_chunked,
        }
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.served
    }

    /// Hands over what the job of [`Step::Defer`] made.
    pub fn resume(&mut self, finished: Finished<S::Reply>) {
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Deferred(mut pending) => {
                match finished.0 {
                    Ok(reply) => pending.answer = Outcome::Reply(reply),
                    // The job's panic was logged: a 500, the connection's
                    // last response.
                    Err(_) => {
                        pending.answer = Outcome::Refusal(Refusal::failed());
                        pending.refusal = true;
                        pending.exchange.keep_alive = false;
                    }
                }
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
    pub fn process(
        &mut self,
        input: &mut BytesMut,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
    ) -> Step<S::Reply> {
        // One catch per call, however many requests it answers: the
        // service's code runs only inside it, never while a response is
        // half queued (chunks are asked for before they are queued), so
        // the queue holds whole responses when a panic is caught.
        if let Some(payload) = self.panic.take() {
            return self.panicked(queue, service, &*payload);
        }
        let turn = guarded(|| {
            let step = self.turn(input, queue, service);
            service.service.turn_ended(&mut self.conn);
            step
        });
        match turn {
            Ok(step) => step,
            Err(payload) => self.panicked(queue, service, &*payload),
        }
    }

    /// Ready once the streamed body's next chunk, which the service is
    /// waiting for ([`Step::Wait`]), is: the chunk, the stream's end, or
    /// its refusal is kept for the next [`Session::process`], as is a panic.
    pub fn poll_wait(&mut self, cx: &mut Context<'_>, service: &Protocol<S>) -> Poll<()> {
        let State::Streaming(s) = &mut self.state else {
            return Poll::Ready(());
        };
        if !s.waiting {
            return Poll::Ready(());
        }
        let reply = &mut s.reply;
        match guarded(|| service.service.poll_chunk(reply, cx)) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(Ok(Some(chunk)))) => s.next = Some(chunk),
            Ok(Poll::Ready(Ok(None))) => s.ended = true,
            Ok(Poll::Ready(Err(full))) => s.refused = Some(full),
            Err(payload) => self.panic = Some(payload),
        }
        if let State::Streaming(s) = &mut self.state {
            s.waiting = false;
        }
        Poll::Ready(())
    }

    /// [`Session::poll_wait`] to its end outside an async context (a
    /// session driven in memory), on a runtime of this thread's own.
    pub fn wait(&mut self, service: &Protocol<S>) {
        job::block_on(std::future::poll_fn(|cx| self.poll_wait(cx, service)));
    }

    /// After a panic of the service (or of the core) during a turn, caught
    /// in [`Session::process`] and logged here: a streamed response begun
    /// is ended as one cut short is ([`cut`]); else the request being
    /// answered gets a 500 and the connection closes, whatever state the
    /// panic left (dropped unread).
    #[cold]
    fn panicked(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        payload: &(dyn std::any::Any + Send),
    ) -> Step<S::Reply> {
        guard::log(payload, "a turn");
        self.state = State::Closed;
        self.job = None;
        if let Some(chunked) = self.begun.take() {
            return if chunked { Step::Close } else { Step::Reset };
        }
        let refusal = Outcome::Refusal(Refusal::failed());
        // The queue holds whole responses: the 500 goes after them.
        let _ = self.refuse(queue, service, refusal, self.head_request, None);
        Step::Close
    }

    /// [`Session::process`]'s work: its requests answered.
    #[inline(always)]
    fn turn(
        &mut self,
        input: &mut BytesMut,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
    ) -> Step<S::Reply> {
        // One clock read per call, however many requests it answers: the
        // latency histogram's clock ticks in milliseconds, and what one
        // call answers takes microseconds.
        self.now = Moment::now();
        self.release_written(queue, service);
        let copied_before = queue.copied_len();
        let mut chunks_asked = 0;
        loop {
            match self.state {
                State::Closed => return Step::Close,
                State::Reset => return Step::Reset,
                _ => {}
            }
            if queue.has_remaining()
                && (queue.copied_len() > service.limits.max_queued_bytes
                    || queue.ledger().pending_responses() >= service.limits.max_queued_responses
                    // A reply that waits for memory waits for the queue.
                    || matches!(self.state, State::Ready(_))
                    // A stream is asked for more as the queue drains.
                    || matches!(&self.state, State::Streaming(s) if s.waits(queue))
                    // One call copies or encodes a turn's worth at most.
                    || queue.copied_len() >= copied_before + TURN)
            {
                return Step::Flush;
            }
            if let State::Head = self.state {
                // Between requests, what nearly every turn is: handled in
                // place, and a keep-alive answer leaves the state as it is:
                // moving the whole state out and back, and dropping the one
                // replaced, cost instructions on every pipelined request
                // (docs/measurements.md, "Server").
                if input.is_empty() {
                    return Step::Read(Waiting::Idle);
                }
                if !self.head(input, queue, service) {
                    return Step::Read(Waiting::Head);
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
                } => match self.body(input, queue, service, decoder, pending, payload) {
                    Ok(next) => next,
                    Err(waiting) => return Step::Read(waiting),
                },
                State::Ready(pending) => self.answer(queue, service, pending),
                // A turn asks for so many chunks at most: a stream of empty
                // or tiny ones lets the worker's other connections run.
                State::Streaming(streaming) if chunks_asked == CHUNKS_PER_TURN => {
                    self.state = State::Streaming(streaming);
                    return Step::Flush;
                }
                // The service waits for the next chunk: the connection
                // flushes what is queued and awaits it.
                State::Streaming(streaming) if streaming.waiting => {
                    self.state = State::Streaming(streaming);
                    return Step::Wait;
                }
                State::Streaming(streaming) => {
                    chunks_asked += 1;
                    self.stream(queue, service, streaming)
                }
                // `process` without `resume`: the job is gone; closing is
                // all that is left.
                State::Deferred(_) => State::Closed,
                done @ (State::Closed | State::Reset) => done,
            };
            if let Some(job) = self.job.take() {
                return Step::Defer(job);
            }
        }
    }

    /// Parses one head from `input` and answers or begins its request;
    /// false when the head is not complete yet.
    fn head(
        &mut self,
        input: &mut BytesMut,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
    ) -> bool {
        let limits = service.limits.head;
        // Uninitialised: httparse writes the fields it finds, and an array
        // of 256 empty headers would cost an 8 KiB memset per request.
        let mut fields = [MaybeUninit::uninit(); FIELDS_CAP];
        let head = match parse_head(input, &mut fields, limits) {
            Parsed::Partial => return false,
            Parsed::Rejected {
                reject,
                head_request,
            } => {
                // No body may follow even a refusal of a HEAD request.
                self.noted();
                let next = self.reject(queue, service, reject, head_request, None);
                self.go(next);
                return true;
            }
            Parsed::NewerMinor(at) => {
                // HTTP/1.x, x > 1: processed as HTTP/1.1 (RFC 9112 §2.3),
                // parsed again on the next turn of `process` (a loop, not a
                // recursion, so that this function stays inlined).
                input[at] = b'1';
                return true;
            }
            Parsed::Complete(head) => head,
        };
        // What a 500 in place of its response needs, should the service
        // panic (`Session::panicked`).
        self.head_request = head.is_head();
        let (label, reply) = service.service.call(&head, &mut self.conn);
        self.noted();
        let exchange = self.exchange(
            service,
            head.wants_keep_alive,
            head.is_head(),
            head.version == 1,
        );
        let framed = HeadFacts {
            len: head.len,
            framing: head.framing,
            fields: head.fields().len(),
            expect_continue: head.expect_continue,
        };
        let next = self.begin(
            input,
            queue,
            service,
            Pending::new(Outcome::Reply(reply), exchange, Some(label)),
            framed,
        );
        self.go(next);
        true
    }

    /// Moves on to `next` from [`State::Head`], where the session is while
    /// a head is parsed. Staying there is the common case: the head is
    /// forgotten, not dropped (it holds nothing), so that no drop glue and
    /// no copy of the large state run for every request answered.
    #[inline]
    fn go(&mut self, next: State<S>) {
        debug_assert!(matches!(self.state, State::Head));
        match next {
            head @ State::Head => std::mem::forget(head),
            next => self.state = next,
        }
    }

    /// Starts on the request `pending` answers, whose head `framed`
    /// describes: consumes the head, and answers at once when there is no
    /// body (or the client waits for `100 Continue` and the reply is a
    /// refusal), or sets out to read it.
    #[inline]
    fn begin(
        &mut self,
        input: &mut BytesMut,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        mut pending: Pending<S>,
        framed: HeadFacts,
    ) -> State<S> {
        input.advance(framed.len);
        // What the reply made from the head (the echo's JSON so far, an
        // error's reason) is held while the body is read: counted now.
        let held = pending.held();
        if held > 0 {
            if let Err(full) = self.budget.hold(held, queue.footprint()) {
                return self.out_of_memory(queue, service, pending, full);
            }
        }
        // The trailer section, if any, shares the head's budget.
        let head = service.limits.head;
        let limits = BodyLimits {
            data: service.limits.max_body as u64,
            trailer_bytes: head.head.saturating_sub(framed.len),
            trailer_fields: head.fields.saturating_sub(framed.fields),
        };
        let decoder = match BodyDecoder::new(framed.framing, limits) {
            Ok(Some(decoder)) => decoder,
            Ok(None) => return self.answer(queue, service, pending),
            // Refused before it is sent; the unread body makes the
            // connection unusable, so it is closed.
            Err(reject) => {
                let (head_request, label) = (pending.exchange.head_request, pending.label);
                return self.reject(queue, service, reject, head_request, label);
            }
        };
        if framed.expect_continue {
            // A head already refused is answered now, without 100 Continue,
            // so the client sends no body (RFC 9110 §10.1.1); unread, that
            // body leaves the connection unusable, so it closes.
            if matches!(&pending.answer, Outcome::Reply(reply) if reply.refuses()) {
                let (head_request, label) = (pending.exchange.head_request, pending.label);
                return self.refuse(queue, service, pending.answer, head_request, label);
            }
            if let Err(full) = service
                .writer
                .interim(queue, Status::CONTINUE, &mut self.budget)
            {
                return self.out_of_memory(queue, service, pending, full);
            }
        }
        if matches!(&pending.answer, Outcome::Reply(reply) if reply.wants_body()) {
            pending.body = Some(Vec::new());
        }
        State::Body {
            decoder,
            pending,
            payload: 0,
        }
    }

    /// Decodes what `input` holds of a request body; the next state, or
    /// what to wait for when the body is not complete.
    fn body(
        &mut self,
        input: &mut BytesMut,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        mut decoder: BodyDecoder,
        mut pending: Pending<S>,
        payload: u64,
    ) -> Result<State<S>, Waiting> {
        if let Some(body) = &pending.body {
            // Room first for all this input may add to the kept body: no
            // more than a declared length, so that the capacity charged
            // is the body's own size once it is whole.
            let most = match decoder {
                BodyDecoder::Length(left) => body.len().saturating_add(left as usize),
                BodyDecoder::Chunked(_) => service.limits.max_body,
            };
            let want = body.len() + input.len().min(most.saturating_sub(body.len()));
            if want > body.capacity() {
                let grown = want.max(body.capacity() * 2).min(most.max(want));
                // Counted at its grown size before it grows.
                let held = grown + pending.reply_held();
                if let Err(full) = self.budget.hold(held, queue.footprint()) {
                    return Ok(self.out_of_memory(queue, service, pending, full));
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
                let (head_request, label) = (pending.exchange.head_request, pending.label);
                drop(pending);
                return Ok(self.reject(queue, service, reject, head_request, label));
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
        Ok(self.answer(queue, service, pending))
    }

    /// Queues the response to a request whose body has been read, unless its
    /// reply needs a job done first, or the memory to queue it (then it
    /// waits for the queue to drain, or is refused when nothing is queued).
    #[inline(always)]
    fn answer(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        mut p: Pending<S>,
    ) -> State<S> {
        if let Outcome::Reply(reply) = &mut p.answer {
            let body = p.body.as_deref().unwrap_or_default();
            if let Some(job) = service
                .service
                .prepare(reply, body, p.exchange, &mut self.conn)
            {
                self.job = Some(job);
                return State::Deferred(p);
            }
        }
        self.respond(queue, service, p)
    }

    /// Queues the response of `p`, whose reply is ready. When the lease
    /// cannot cover it: waits for the queue to drain if anything is queued,
    /// else refuses with 503 — or, for a refusal itself, closes.
    fn respond(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        mut p: Pending<S>,
    ) -> State<S> {
        // What the request holds now (its reply may be a job's, made since).
        self.budget.note_held(p.held());
        let (writer, budget) = (&service.writer, &mut self.budget);
        let request_body = p.body.as_deref().unwrap_or_default();
        let written = match &mut p.answer {
            Outcome::Reply(reply) => {
                // The response's own field lines, on the stack: what they
                // borrow, the reply holds.
                let mut fields = Fields::new();
                let next = match service.service.respond(reply, request_body, &mut fields) {
                    Ok(_) if fields.is_refused() => Next::Refused(fields.error()),
                    Ok(r) => match writer.stream_head(&r, &fields, p.exchange) {
                        Some(head) => Next::Stream(head),
                        None => Next::Written(writer.write(queue, &r, &fields, p.exchange, budget)),
                    },
                    Err(full) => Next::Written(Err(full)),
                };
                drop(fields);
                match next {
                    Next::Written(written) => written,
                    Next::Stream(head) => return self.begin_stream(queue, p, head),
                    Next::Refused(e) => return self.refused_field(queue, service, p, e),
                }
            }
            Outcome::Refusal(r) => {
                let (status, reason) = (r.status, &r.reason);
                writer.refuse(queue, status, reason, r.retry_after, p.exchange, budget)
            }
        };
        let written = match written {
            Ok(written) => written,
            // The queue's output holds memory that writing gives back.
            Err(_) if queue.has_remaining() => return State::Ready(p),
            Err(_) if p.refusal => return State::Closed,
            Err(full) => return self.out_of_memory(queue, service, p, full),
        };
        self.answered(queue, &mut p);
        let Outcome::Reply(reply) = p.answer else {
            self.record(service, queue, p.label, written);
            return State::Closed;
        };
        self.record(service, queue, p.label, written);
        if written.references_body {
            let end = queue.ledger().written() + queue.remaining() as u64;
            self.referenced.push_back((end, reply));
        }
        if written.keep_alive {
            State::Head
        } else {
            State::Closed
        }
    }

    /// Queues `500` in place of the response of `p`, one of whose field
    /// lines was refused (`e`, logged here with the request's label: once
    /// per response), and closes.
    #[cold]
    fn refused_field(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        p: Pending<S>,
        e: Option<FieldError>,
    ) -> State<S> {
        if let Some(e) = e {
            tracing::error!(label = ?p.label, "a response's {e}: answered 500 instead");
        }
        let (head_request, label) = (p.exchange.head_request, p.label);
        drop(p);
        let refusal = Outcome::Refusal(Refusal::failed());
        self.refuse(queue, service, refusal, head_request, label)
    }

    /// Counts the request of `p` answered, its response queued or set out
    /// on: what it held is in the queue now, or let go, and a request body
    /// it kept is freed now, not once the response is written, with its
    /// part of the lease.
    fn answered(&mut self, queue: &WriteQueue, p: &mut Pending<S>) {
        self.served += 1;
        self.budget.note_held(0);
        if p.body.take().is_some() {
            self.budget.trim(queue.footprint());
        }
    }

    /// Sets out on a streamed response whose head is `head`, to be queued
    /// only with its first chunk ([`Session::stream`]).
    fn begin_stream(
        &mut self,
        queue: &mut WriteQueue,
        mut p: Pending<S>,
        head: StreamHead,
    ) -> State<S> {
        self.answered(queue, &mut p);
        let Outcome::Reply(reply) = p.answer else {
            unreachable!("a refusal is no stream")
        };
        let streaming = Box::new(Streaming {
            reply,
            label: p.label,
            status: head.status,
            keep_alive: head.keep_alive,
            head: Some(head),
            exchange: p.exchange,
            stream: Stream::new(p.exchange),
            next: None,
            ended: false,
            waiting: false,
            refused: None,
        });
        // The turn's loop asks for the first chunk (counted as any other).
        State::Streaming(streaming)
    }

    /// Queues what comes next of a streamed response: its head with its
    /// first chunk, a chunk asked of the service, or its end. When the
    /// lease cannot cover it, it waits for the queue to drain; with nothing
    /// queued, a stream not begun is refused (503), and one begun is cut
    /// short so that no client can take it for whole ([`Session::cut_short`]).
    fn stream(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        mut s: Box<Streaming<S>>,
    ) -> State<S> {
        let (writer, budget) = (&service.writer, &mut self.budget);
        let asked = match s.refused.take() {
            Some(full) => Some(Err(full)),
            None if !s.ended && s.next.is_none() => {
                // Asked with a waker that does nothing: a chunk not ready
                // is awaited by the connection (`Step::Wait`), with its own.
                let mut cx = Context::from_waker(Waker::noop());
                match service.service.poll_chunk(&mut s.reply, &mut cx) {
                    Poll::Ready(asked) => Some(asked),
                    Poll::Pending => {
                        s.waiting = true;
                        return State::Streaming(s);
                    }
                }
            }
            None => None,
        };
        match asked {
            None => {}
            Some(Ok(Some(chunk))) => s.next = Some(chunk),
            Some(Ok(None)) => s.ended = true,
            Some(Err(full)) if s.head.is_some() => {
                return self.refuse_stream(queue, service, s, full)
            }
            Some(Err(_)) => return self.cut_short(service, &s),
        }
        if let Some(head) = &s.head {
            match writer.start_stream(queue, head, &mut s.stream, s.next.as_ref(), budget) {
                Ok(()) => {
                    s.head = None;
                    s.next = None;
                    self.begun = Some(s.stream.is_chunked());
                }
                Err(_) if queue.has_remaining() => return State::Streaming(s),
                Err(full) => return self.refuse_stream(queue, service, s, full),
            }
            if !s.ended {
                return State::Streaming(s);
            }
        }
        if let Some(chunk) = s.next.take() {
            return match writer.chunk(queue, &mut s.stream, &chunk, budget) {
                Ok(_) => State::Streaming(s),
                Err(_) if queue.has_remaining() => {
                    s.next = Some(chunk);
                    State::Streaming(s)
                }
                Err(_) => self.cut_short(service, &s),
            };
        }
        match writer.end_stream(queue, &s.stream, budget) {
            Ok(()) => self.begun = None,
            Err(_) if queue.has_remaining() => return State::Streaming(s),
            Err(_) => return self.cut_short(service, &s),
        }
        let s = *s;
        let written = Written {
            status: s.status,
            body_bytes: s.stream.sent(),
            references_body: true,
            keep_alive: s.keep_alive,
        };
        self.record(service, queue, s.label, written);
        let end = queue.ledger().written() + queue.remaining() as u64;
        self.referenced.push_back((end, s.reply));
        if s.keep_alive {
            State::Head
        } else {
            State::Closed
        }
    }

    /// Refuses with 503 a stream whose head is not queued yet, for want of
    /// memory (`full`) to start it; the connection then closes.
    fn refuse_stream(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        s: Box<Streaming<S>>,
        full: Full,
    ) -> State<S> {
        let about = (s.exchange, s.label);
        self.refused_for_memory(queue, service, about, s, full)
    }

    /// Ends the connection in the middle of a streamed response, for want
    /// of memory: a chunked body stops before its last chunk and the
    /// connection closes; a body that only the close ends (HTTP/1.0) is
    /// reset instead, since a clean close would make it look complete.
    fn cut_short(&mut self, service: &Protocol<S>, s: &Streaming<S>) -> State<S> {
        service.memory.refused();
        cut(s)
    }

    /// Notes that the request about to be answered began now.
    #[inline]
    fn noted(&mut self) {
        self.began = self.now;
    }

    /// Tells the service of a response queued: the one place every
    /// response passes.
    fn record(
        &mut self,
        service: &Protocol<S>,
        queue: &WriteQueue,
        label: Option<S::Label>,
        written: Written,
    ) {
        let answered = Answered {
            label,
            status: written.status,
            body_bytes: written.body_bytes,
            began: self.began,
            queued: self.now,
            ends: queue.ledger().written() + queue.remaining() as u64,
        };
        service.service.answered(answered, &mut self.conn);
    }

    /// Queues the answer to a refused request; the connection then closes.
    fn reject(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        reject: Reject,
        head_request: bool,
        label: Option<S::Label>,
    ) -> State<S> {
        let refusal = Outcome::Refusal(reject.into());
        self.refuse(queue, service, refusal, head_request, label)
    }

    /// Queues `503` with `Retry-After` for a request the connection has no
    /// memory left to answer (`full` says which limit), and closes.
    fn out_of_memory(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        p: Pending<S>,
        full: Full,
    ) -> State<S> {
        let about = (p.exchange, p.label);
        self.refused_for_memory(queue, service, about, p, full)
    }

    /// Queues `503` with `Retry-After` for the request `about` describes,
    /// once what it `held` (a request body it kept, a stream not begun) is
    /// given back; the connection then closes.
    fn refused_for_memory<H>(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        (exchange, label): (Exchange, Option<S::Label>),
        held: H,
        full: Full,
    ) -> State<S> {
        service.memory.refused();
        drop(held);
        let refusal = Outcome::Refusal(Refusal::out_of_memory(full));
        self.refuse(queue, service, refusal, exchange.head_request, label)
    }

    /// Queues `reply` as the last response of the connection. A refusal is
    /// short and fits the write buffer the connection's base covers; were
    /// there no room even for it, the connection closes without a word.
    fn refuse(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        answer: Outcome<S::Reply>,
        head_request: bool,
        label: Option<S::Label>,
    ) -> State<S> {
        // No request may follow a refusal on this connection.
        let exchange = self.exchange(service, false, head_request, false);
        let mut refusal = Pending::new(answer, exchange, label);
        refusal.refusal = true;
        self.respond(queue, service, refusal)
    }

    /// Queues `503` with `Retry-After` for the head in `input`, or the body,
    /// that the read buffer has no room left to take (`full` says which
    /// limit); the connection then closes.
    pub fn no_room_to_read(
        &mut self,
        input: &[u8],
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        full: Full,
    ) {
        self.now = Moment::now();
        let (head_request, label) = match std::mem::replace(&mut self.state, State::Closed) {
            State::Body { pending, .. } => (pending.exchange.head_request, pending.label),
            _ => {
                self.noted();
                (begins_head_request(input), None)
            }
        };
        service.memory.refused();
        let refusal = Outcome::Refusal(Refusal::out_of_memory(full));
        self.state = self.refuse(queue, service, refusal, head_request, label);
        service.service.turn_ended(&mut self.conn);
    }

    /// Queues `408 Request Timeout` for the head in `input`, or the body,
    /// that did not arrive in time; the connection then closes.
    pub fn timed_out(&mut self, input: &[u8], queue: &mut WriteQueue, service: &Protocol<S>) {
        self.now = Moment::now();
        let (reason, head_request, about) = match std::mem::replace(&mut self.state, State::Closed)
        {
            State::Body { pending, .. } => (
                "request body not received in time",
                pending.exchange.head_request,
                pending.label,
            ),
            _ => {
                // No head was read: the service is told of no label.
                self.noted();
                (
                    "request head not received in time",
                    begins_head_request(input),
                    None,
                )
            }
        };
        let reject = Reject {
            status: Status::REQUEST_TIMEOUT,
            reason,
        };
        self.state = self.reject(queue, service, reject, head_request, about);
        service.service.turn_ended(&mut self.conn);
    }
}

/// How a streamed response begun is ended before its end: a chunked body
/// stops before its last chunk and the connection closes; a body that only
/// the close ends (HTTP/1.0) is reset, since a clean close would make it
/// look complete.
fn cut<S: Service>(s: &Streaming<S>) -> State<S> {
    if s.stream.is_chunked() {
        State::Closed
    } else {
        State::Reset
    }
}

/// Bytes one [`Session::process`] copies or encodes at most before it asks
/// for a flush, so that the connection lets others run between turns.
pub const TURN: usize = 64 * 1024;

/// Bytes a streamed response keeps queued before it asks for its next
/// chunk: a paused reader holds this and one chunk, not the stream.
pub const STREAM_AHEAD: usize = TURN;

/// Chunks one [`Session::process`] asks a stream for at most.
const CHUNKS_PER_TURN: usize = 1024;

/// The write buffer a connection's base covers: room for a small response
/// (a refusal, a health check), answered whatever others hold.
pub const WRITE_BUFFER_FIRST: usize = 8 * 1024;
