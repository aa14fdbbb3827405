//! The contract between the core and the application it serves. The core
//! reads requests, decides persistence, HEAD, 1xx/204/304 and framing, and
//! writes every response; the application is called once per request
//! ([`Service::call`]) and gives a [`Reply`], which the core then owns: it
//! hands the reply its request body, awaits the work it asks for
//! ([`Reply::prepare`], a [`Job`]), has it give its [`Response`]
//! ([`Reply::respond`]) and, for a stream, its chunks ([`Reply::poll_chunk`]),
//! and keeps it until the socket has taken what the response shares of it —
//! as hyper's service returns a future and its body is polled. Observing
//! the responses (counting, timing, logging them) is apart: an
//! [`Observe`]r the service names, `()` for none.

use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use unflat::head::Status;

pub(crate) mod guard;
mod job;

pub use guard::Panicked;
pub use job::{Finished, Job, Work};

pub(crate) use guard::{guarded, log};
pub(crate) use job::block_on;

use crate::clock::Moment;
use crate::h1::RequestHead;
use crate::memory::Full;
use crate::response::{Chunk, Fields, Response};

/// An application served by the core (the demo site is one; so is
/// `examples/hello.rs`). Called on the connection's worker: none of its
/// methods may block.
pub trait Service: Send + Sync + 'static {
    /// The answer to one request, from its head until its response is
    /// written.
    type Reply: Reply;
    /// What a connection keeps for the service, from its opening
    /// ([`Service::open`]) until it ends.
    type Conn: Default + Send + std::fmt::Debug;
    /// What observes the responses (`()`: nothing).
    type Observer: Observe<Self::Reply>;

    /// What a new connection from `peer` (`None`: unknown, as for a
    /// session driven in memory) keeps for the service.
    fn open(&self, peer: Option<SocketAddr>) -> Self::Conn {
        let _ = peer;
        Self::Conn::default()
    }

    /// Bytes a connection's [`Service::Conn`] holds at most: counted in the
    /// connection's base on the memory account.
    fn conn_memory(&self) -> usize {
        0
    }

    /// The observer of the responses, asked for once, as the server is
    /// built (the core keeps it beside the service).
    fn observer(&self) -> Self::Observer;

    /// The reply to the request whose head is `head`: the one call per
    /// request. What must outlive the head goes into the reply (or `conn`).
    fn call(&self, head: &RequestHead<'_>, conn: &mut Self::Conn) -> Self::Reply;

    /// A reply the core is done with — its response queued, and written
    /// when it shares the reply's memory — given back with its
    /// connection's `conn`: what the reply took from there (a body the
    /// connection keeps, moved into the reply) goes back moved, where
    /// dropping it and taking it again would count a reference each time.
    /// Dropped by default. A reply the connection drops as it ends, or
    /// after a panic, is dropped, not given back.
    fn recycle(&self, reply: Self::Reply, conn: &mut Self::Conn) {
        let _ = conn;
        drop(reply);
    }
}

/// One request's answer, which the core owns from [`Service::call`] until
/// the socket has taken the response: it gives the core what it asks, in
/// this order — the body read ([`Reply::wants_body`]), work to await
/// ([`Reply::prepare`]), the response ([`Reply::respond`]), a stream's
/// chunks ([`Reply::poll_chunk`]).
pub trait Reply: Send + std::fmt::Debug + Sized + 'static {
    /// Whether the request body is kept for [`Reply::prepare`] and
    /// [`Reply::respond`] (within `--max-body`, on the memory account).
    fn wants_body(&self) -> bool {
        false
    }

    /// Whether the request body is handed to [`Reply::body_chunk`] as it
    /// is read, a piece at a time, instead of kept whole: a body of any
    /// length within `--max-body` (an upload hashed, counted, forwarded),
    /// of which the connection holds only what one read brings. A reply
    /// that streams its body keeps none ([`Reply::wants_body`] is then not
    /// asked).
    fn streams_body(&self) -> bool {
        false
    }

    /// The next piece of the request body, as it is decoded (no chunked
    /// framing, no trailers), for a reply that [`Reply::streams_body`]; the
    /// last piece has come when [`Reply::prepare`] is asked. What the reply
    /// keeps of it counts in [`Reply::held`], charged after each read.
    fn body_chunk(&mut self, chunk: &[u8]) {
        let _ = chunk;
    }

    /// Bytes the reply holds while the body is read (the budget counts
    /// them).
    fn held(&self) -> usize {
        0
    }

    /// The longest request body this reply takes, below `--max-body`
    /// (`None`: `--max-body` alone). A longer one is refused with 413 as
    /// `--max-body` refuses: from its `Content-Length` before any of it is
    /// read, or as a chunked body passes it; the connection then closes.
    fn body_limit(&self) -> Option<u64> {
        None
    }

    /// For a reply that [`Reply::streams_body`]: `Ready` while it has room
    /// for more of the body, `Pending` (having arranged for `cx`'s waker to
    /// be woken) while the connection must stop reading until it has — the
    /// body's backpressure. Asked after each read that handed it body, first
    /// with a waker that does nothing (it is then asked again with the
    /// connection's): it may make progress on what it holds each time.
    /// While it waits, the connection waits as for a [`Job`]: the
    /// application's time, with no deadline of the core's, and not given
    /// up at `--max-connections` as an idle connection is. `Ready` by
    /// default.
    fn poll_body_room(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let _ = cx;
        Poll::Ready(())
    }

    /// Whether it refuses the request from its head alone (a 4xx or 5xx):
    /// an `Expect: 100-continue` then gets the final status at once, and
    /// the connection closes after it.
    fn refuses(&self) -> bool {
        false
    }

    /// Work to await before the response, once the request body is read
    /// (`request_body`, kept when [`Reply::wants_body`]): a [`Job`] — any
    /// future on the server's runtime, timers included — whose result
    /// takes this reply's place and is then asked to respond. A job that
    /// needs the body copies what it uses. None by default.
    fn prepare(&mut self, request_body: &[u8]) -> Option<Job<Self>> {
        let _ = request_body;
        None
    }

    /// The response to write, given the request body it kept, with any
    /// field lines of its own added to `fields` (values are ropes: text,
    /// bytes, integers and their concatenations, written straight into the
    /// head). What it borrows, the reply holds (or the body); the core
    /// keeps both until the queue has written what the response shares of
    /// them. [`Full`] when what it makes cannot be charged (a 503); a field
    /// refused ([`Fields::add`]) makes it a 500.
    fn respond<'a>(
        &'a mut self,
        request_body: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full>;

    /// The next chunk of a [`Body::Stream`](crate::response::Body::Stream),
    /// `Pending` while it waits (having arranged for `cx`'s waker to be
    /// woken, as a `Stream`'s `poll_next`), `None` at its end. Asked only
    /// while the queue holds less than
    /// [`STREAM_AHEAD`](crate::session::STREAM_AHEAD), so a paused reader
    /// holds that and one chunk; the connection flushes what is queued
    /// while it waits. The first is asked for before the head is queued:
    /// [`Full`] then, or a first chunk the connection's memory cannot take,
    /// answers 503 instead. Later, [`Full`] cuts the body short: a chunked
    /// one ends without its last chunk and the connection closes; one to
    /// HTTP/1.0, which only the close ends, is reset. A stream that ends
    /// at once by default.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Chunk>, Full>> {
        let _ = cx;
        Poll::Ready(Ok(None))
    }
}

/// What watches a service's responses — counts, times, logs them — apart
/// from answering them; `R` is the service's reply. Each method is told of
/// one event on one connection; none may block.
pub trait Observe<R>: Send + Sync + std::fmt::Debug + 'static {
    /// What a connection keeps for the observer.
    type Conn: Send + std::fmt::Debug;
    /// What a response is counted under (a service's route, say).
    type Label: Copy + Send + std::fmt::Debug;

    /// What a new connection from `peer` keeps for the observer.
    fn open(&self, peer: Option<SocketAddr>) -> Self::Conn;

    /// Bytes a connection's [`Observe::Conn`] holds at most: counted in the
    /// connection's base on the memory account.
    fn conn_memory(&self) -> usize {
        0
    }

    /// Whether it writes the access log `--access-log` asks for (the
    /// core's [`Standard`](crate::observe::Standard) does): a server whose
    /// observer does not refuses the flag rather than ignore it.
    fn writes_access_log(&self) -> bool {
        false
    }

    /// A request's head read and its reply chosen: the label its response
    /// is counted under.
    fn begun(&self, head: &RequestHead<'_>, reply: &R, conn: &mut Self::Conn) -> Self::Label;

    /// A request refused before its head could be read (a 400 for a bad
    /// request line, a 408, a 414, a 431): its first line as the client
    /// sent it, at most the request-line limit and unchecked (escape it
    /// before it is written anywhere). Told after its response
    /// ([`Observe::answered`], with no label), before the turn ends and
    /// before any of the response is [`Observe::sent`].
    fn refused(&self, line: &[u8], conn: &mut Self::Conn) {
        let _ = (line, conn);
    }

    /// Its counters as `/metrics` text in the format an `Accept` value asks
    /// for, with that format's `Content-Type`: what the admin address
    /// serves (`--admin-addr`). `None`, by default: it keeps none.
    fn exposition(&self, accept: Option<&[u8]>) -> Option<(&'static str, String)> {
        let _ = accept;
        None
    }

    /// One response queued, the core's own refusals included: the one
    /// place responses are counted, timed and logged.
    fn answered(&self, answered: Answered<Self::Label>, conn: &mut Self::Conn) {
        let _ = (answered, conn);
    }

    /// A turn of the session ended ([`Session::process`]), after the
    /// [`Observe::answered`] calls of the batch of pipelined requests it
    /// answered and before their responses are written: what is gathered
    /// per connection is counted here, once a batch.
    ///
    /// [`Session::process`]: crate::session::Session::process
    fn turn_ended(&self, conn: &mut Self::Conn) {
        let _ = conn;
    }

    /// After a write, the connection's socket has taken `total` bytes of
    /// its output so far: every response whose [`Answered::ends`] is at
    /// most `total` is written whole.
    fn sent(&self, total: u64, conn: &mut Self::Conn) {
        let _ = (total, conn);
    }
}

/// No observer: nothing kept, nothing told.
impl<R> Observe<R> for () {
    type Conn = ();
    type Label = ();

    #[inline(always)]
    fn open(&self, _: Option<SocketAddr>) {}

    #[inline(always)]
    fn begun(&self, _: &RequestHead<'_>, _: &R, _: &mut ()) {}
}

/// An observer shared with what made it.
impl<R, O: Observe<R>> Observe<R> for std::sync::Arc<O> {
    type Conn = O::Conn;
    type Label = O::Label;

    #[inline(always)]
    fn open(&self, peer: Option<SocketAddr>) -> O::Conn {
        O::open(self, peer)
    }

    #[inline(always)]
    fn conn_memory(&self) -> usize {
        O::conn_memory(self)
    }

    fn writes_access_log(&self) -> bool {
        O::writes_access_log(self)
    }

    #[inline(always)]
    fn begun(&self, head: &RequestHead<'_>, reply: &R, conn: &mut O::Conn) -> O::Label {
        O::begun(self, head, reply, conn)
    }

    fn refused(&self, line: &[u8], conn: &mut O::Conn) {
        O::refused(self, line, conn)
    }

    fn exposition(&self, accept: Option<&[u8]>) -> Option<(&'static str, String)> {
        O::exposition(self, accept)
    }

    #[inline(always)]
    fn answered(&self, answered: Answered<O::Label>, conn: &mut O::Conn) {
        O::answered(self, answered, conn)
    }

    #[inline(always)]
    fn turn_ended(&self, conn: &mut O::Conn) {
        O::turn_ended(self, conn)
    }

    #[inline(always)]
    fn sent(&self, total: u64, conn: &mut O::Conn) {
        O::sent(self, total, conn)
    }
}

/// The label a service's observer counts its responses under.
pub type LabelOf<S> = <<S as Service>::Observer as Observe<<S as Service>::Reply>>::Label;

/// What a service's observer keeps per connection.
pub type Watch<S> = <<S as Service>::Observer as Observe<<S as Service>::Reply>>::Conn;

/// What the core tells an observer of one response queued
/// ([`Observe::answered`]).
#[derive(Clone, Copy, Debug)]
pub struct Answered<L> {
    /// The label [`Observe::begun`] gave its request; `None` for the core's
    /// refusal of a head it could not read (no method, no target), and for
    /// its 500 after a panic during a turn.
    pub label: Option<L>,
    /// The status sent.
    pub status: Status,
    /// Bytes of body sent (none after a `HEAD`, or on 204 and 304).
    pub body_bytes: usize,
    /// When its request's head was complete (or the request refused), on
    /// the server's one clock.
    pub began: Moment,
    /// When it was queued (the clock is read once per turn of the session).
    pub queued: Moment,
    /// Where it ends in the connection's output: it is written whole once
    /// [`Observe::sent`] reports as many bytes.
    pub ends: u64,
}

impl<L> Answered<L> {
    /// From the request's complete head to the response queued.
    pub fn took(&self) -> Duration {
        self.queued.since(self.began)
    }

    /// [`Answered::took`] in whole milliseconds, the clock's own unit.
    #[inline]
    pub fn took_ms(&self) -> u64 {
        self.queued.millis().saturating_sub(self.began.millis())
    }
}
