//! One connection's requests, without IO: [`Session::process`] answers every
//! complete request in the bytes read, pipelined ones included, by queueing
//! responses on the [`WriteQueue`], and says what the connection does next
//! ([`Step`]). No socket, no blocking: the same code runs under tokio, in
//! tests and in the fuzzer. Replies come from the [`Service`], called once
//! per request (`requests.rs`); one that must wait hands the connection a
//! [`Job`]; its observer hears of each response.
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
mod dispatch;
mod refuse;
mod requests;
mod stream;

use dispatch::Dispatch;
use refuse::Refusal;
use stream::Streaming;

use crate::clock::Moment;
use crate::h1::{
    begins_head_request, first_line, parse_head, BodyDecoder, BodyLimits, HeadLimits, Parsed,
    Reject, FIELDS_CAP,
};
use crate::memory::{Budget, Full, Lease, Memory};
use crate::response::{Chunk, Exchange, Fields, Second, Stream, StreamHead, Unqueued, Unsendable};
use crate::response::{Writer, Written};
use crate::service::{block_on, guarded, log, Answered, Finished, Job, LabelOf, Service};

/// What every session shares.
#[derive(Debug)]
pub struct Protocol<S: Service> {
    /// The application, called once per request.
    pub service: S,
    /// What hears of its responses ([`Service::observer`], asked once).
    pub observer: S::Observer,
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
    /// body's next chunk, which the reply is waiting for
    /// ([`Reply::poll_chunk`](crate::service::Reply::poll_chunk)), or its
    /// room for more of the request body
    /// ([`Reply::poll_body_room`](crate::service::Reply::poll_body_room)) —
    /// and call `process` again.
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

/// What a turn has of the input: the bytes read and not taken yet. A
/// request's bytes are taken by moving a cursor, and the buffer lets go of
/// all a turn took once, as the turn ends (or unwinds): a
/// `BytesMut::advance` per request cost every pipelined one ~25
/// instructions.
struct Unread<'a> {
    buf: &'a mut BytesMut,
    taken: usize,
}

impl<'a> Unread<'a> {
    fn new(buf: &'a mut BytesMut) -> Unread<'a> {
        Unread { buf, taken: 0 }
    }

    /// Takes the first `n` bytes not taken yet.
    #[inline(always)]
    fn take(&mut self, n: usize) {
        debug_assert!(n <= self.len(), "taking bytes that were read");
        self.taken += n;
    }
}

impl std::ops::Deref for Unread<'_> {
    type Target = [u8];

    #[inline(always)]
    fn deref(&self) -> &[u8] {
        &self.buf[self.taken..]
    }
}

impl std::ops::DerefMut for Unread<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.taken..]
    }
}

impl Drop for Unread<'_> {
    fn drop(&mut self) {
        self.buf.advance(self.taken);
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

/// A reply waiting for its request body (or its job, or memory).
#[derive(Debug)]
struct Pending<S: Service> {
    answer: Outcome<S::Reply>,
    /// What the request asked of its response.
    exchange: Exchange,
    /// What the observer counts its response under; `None` for a head the
    /// core could not read.
    label: Option<LabelOf<S>>,
    /// The request body so far, for a reply that uses it.
    body: Option<Vec<u8>>,
    /// A refusal, the connection's last answer: when even it finds no
    /// room, the connection closes without a word.
    refusal: bool,
}

impl<S: Service> Pending<S> {
    fn new(answer: Outcome<S::Reply>, exchange: Exchange, label: Option<LabelOf<S>>) -> Pending<S> {
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
            Outcome::Reply(reply) => dispatch::held(reply),
            Outcome::Refusal(_) => 0,
        }
    }
}

/// One connection's state in the core: the request being read or
/// answered, what its lease covers, the replies its queued responses
/// still share memory with, and what the service and its observer keep
/// for it.
#[derive(Debug)]
pub struct Session<S: Service> {
    state: State<S>,
    served: u64,
    /// What the service and its observer keep for this connection.
    app: Dispatch<S>,
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
    /// The second the current call's responses are dated by, read with it.
    second: Second,
    /// Whether the request being answered is a `HEAD` (for a 500 in place
    /// of its response, should the service panic).
    head_request: bool,
    /// The label of the request being answered, once the service gave it
    /// (for the log's line, should the service panic).
    answering: Option<LabelOf<S>>,
    /// A streamed response whose head is queued and whose end is not:
    /// whether it is chunked (how a panic must end it).
    begun: Option<bool>,
    /// The reply reading its body has no room for more of it: nothing is
    /// read until it has ([`Session::poll_wait`]). Here, not in the
    /// state, where it would enlarge every idle connection's future.
    paused: bool,
    /// A refusal of a head never read is queued, and the observer not yet
    /// told what its line held ([`Session::hear`]).
    unheard: bool,
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
            app: Dispatch::open(service, peer),
            job: None,
            budget: Budget::new(lease, read_buffer, socket, Session::kept_memory(service)),
            referenced: VecDeque::new(),
            began: Moment::default(),
            now: Moment::default(),
            second: Second::now(),
            head_request: false,
            answering: None,
            begun: None,
            paused: false,
            unheard: false,
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

    /// Whether [`Step::Wait`] waits for the reply reading its body to have
    /// room for more ([`Reply::poll_body_room`](crate::service::Reply::poll_body_room)),
    /// not for a stream's next chunk.
    pub fn waits_for_room(&self) -> bool {
        self.paused && matches!(self.state, State::Body { .. })
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
        let turn = guarded(|| {
            let step = self.turn(input, queue, service);
            self.app.turn_ended(service);
            step
        });
        match turn {
            Ok(step) => step,
            Err(payload) => self.panicked(queue, service, &*payload),
        }
    }

    /// Reads the clocks a call dates what it answers by: once per call,
    /// however many requests it answers — the latency histogram's clock
    /// ticks in milliseconds, `Date` in seconds, and what one call answers
    /// takes microseconds.
    #[inline(always)]
    fn read_clocks(&mut self) {
        self.now = Moment::now();
        self.second = Second::now();
    }

    /// Tells the observer what the line of the head refused unread held
    /// (`input` begins with it: nothing is taken from the input after a
    /// refusal). As the turn ends, not where the parser refuses: a call
    /// there, even one never taken, cost every pipelined request ~30
    /// instructions (docs/results/instructions-and-profiles.md).
    #[cold]
    #[inline(never)]
    fn hear(&mut self, input: &[u8], service: &Protocol<S>) {
        self.unheard = false;
        self.app
            .refused(service, first_line(input, service.limits.head.request_line));
    }

    /// Ready once what the reply waits for ([`Step::Wait`]) is: room for
    /// more of its request body, or the streamed body's next chunk — the chunk, the stream's end, or
    /// its refusal is kept for the next [`Session::process`], as is a panic
    /// (logged here).
    pub fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let s = match &mut self.state {
            State::Streaming(s) => s,
            State::Body { pending, .. } => {
                return Self::poll_body_room(pending, &mut self.paused, cx)
            }
            _ => return Poll::Ready(()),
        };
        if !s.waiting {
            return Poll::Ready(());
        }
        let reply = &mut s.reply;
        match guarded(|| dispatch::poll_chunk(reply, cx)) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(Ok(Some(chunk)))) => s.next = Some(chunk),
            Ok(Poll::Ready(Ok(None))) => s.ended = true,
            Ok(Poll::Ready(Err(full))) => s.refused = Some(full),
            Err(payload) => {
                log(
                    &*payload,
                    "a stream's chunk",
                    s.label.as_ref().map(|l| l as _),
                );
                s.failed = true;
            }
        }
        s.waiting = false;
        Poll::Ready(())
    }

    /// Ready once the reply reading its body ([`Step::Wait`]) has room for
    /// more of it. A panic (logged here) makes the request's answer a 500,
    /// after which the connection closes; its body is read and dropped.
    fn poll_body_room(
        pending: &mut Pending<S>,
        paused: &mut bool,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        if !*paused {
            return Poll::Ready(());
        }
        if let Outcome::Reply(reply) = &mut pending.answer {
            match guarded(|| dispatch::poll_body_room(reply, cx)) {
                Ok(Poll::Pending) => return Poll::Pending,
                Ok(Poll::Ready(())) => {}
                Err(payload) => {
                    log(
                        &*payload,
                        "a body's reader",
                        pending.label.as_ref().map(|l| l as _),
                    );
                    pending.answer = Outcome::Refusal(Refusal::failed());
                    pending.refusal = true;
                    pending.exchange.keep_alive = false;
                }
            }
        }
        *paused = false;
        Poll::Ready(())
    }

    /// [`Session::poll_wait`] to its end outside an async context (a
    /// session driven in memory), on a runtime of this thread's own.
    pub fn wait(&mut self) {
        block_on(std::future::poll_fn(|cx| self.poll_wait(cx)));
    }

    /// After a panic of the service (or of the core) during a turn, caught
    /// in [`Session::process`] and logged here: [`Session::failed`],
    /// whatever state the panic left (dropped unread), and the connection
    /// closes.
    #[cold]
    fn panicked(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        payload: &(dyn std::any::Any + Send),
    ) -> Step<S::Reply> {
        log(payload, "a turn", self.answering.as_ref().map(|l| l as _));
        self.job = None;
        // The queue holds whole responses: a 500 goes after them.
        let next = self.failed(queue, service, self.head_request, None);
        // Its line may be gone from the input: the log says `-`.
        self.unheard = false;
        // The turn's end was not reached: what the observer gathered this
        // turn, the 500 included, is counted now.
        self.app.turn_ended(service);
        self.state = State::Closed;
        match next {
            State::Reset => Step::Reset,
            _ => Step::Close,
        }
    }

    /// [`Session::process`]'s work: its requests answered.
    #[inline(always)]
    fn turn(
        &mut self,
        input: &mut BytesMut,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
    ) -> Step<S::Reply> {
        let input = &mut Unread::new(input);
        self.read_clocks();
        self.release_written(queue, service);
        let copied_before = queue.copied_len();
        let mut chunks_asked = 0;
        loop {
            match self.state {
                State::Closed => {
                    // Where a refusal leaves the turn: off the way of the
                    // requests answered and kept alive.
                    if self.unheard {
                        self.hear(input, service);
                    }
                    return Step::Close;
                }
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
                // A reply without room for more of its body: the
                // connection flushes and awaits its room.
                State::Body { .. } if self.paused => {
                    self.state = state;
                    return Step::Wait;
                }
                State::Body {
                    decoder,
                    pending,
                    payload,
                } => match self.body(input, queue, service, decoder, pending, payload) {
                    Ok(next) => next,
                    Err(Some(waiting)) => return Step::Read(waiting),
                    Err(None) => return Step::Wait,
                },
                // Its work done (the job's reply is not prepared again), or
                // waiting for memory: its response is written now.
                State::Ready(pending) => self.respond(queue, service, pending),
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
