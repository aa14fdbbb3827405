//! What the core asks of the application it serves: the [`Service`] trait
//! and its [`Reply`]. The core reads requests, decides persistence, HEAD,
//! 1xx/204/304 and framing, and writes every response; the service chooses
//! each [`Response`] (or first a job to await) and observes: it hears of
//! each response as it is queued ([`Service::answered`]) and of the output
//! as the socket takes it ([`Service::sent`]).

use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use unflat::head::Status;

use super::job::Job;
use crate::clock::Moment;
use crate::h1::RequestHead;
use crate::memory::Full;
use crate::response::{Chunk, Exchange, Fields, Response};

/// An application served by the core (the demo site is one; so is
/// `examples/hello.rs`). Its methods are called on the connection's
/// worker, once per request or response: none may block.
pub trait Service: Send + Sync + 'static {
    /// The answer to one request, chosen from its head.
    type Reply: Reply;
    /// What a connection keeps for the service, from its opening
    /// ([`Service::open`]) until it ends.
    type Conn: Default + Send + std::fmt::Debug;
    /// What a response is counted under in [`Service::answered`] (the
    /// demo's route).
    type Label: Copy + Send + std::fmt::Debug;

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

    /// The reply to the request whose head is `head`, and its label; what
    /// must outlive the head goes into `conn`.
    fn call(&self, head: &RequestHead<'_>, conn: &mut Self::Conn) -> (Self::Label, Self::Reply);

    /// Readies `reply` for the response `exchange` describes, once its
    /// request body is read (`request_body`, kept when
    /// [`Reply::wants_body`]): `None` when it can be written now, or a job
    /// — any future on the server's runtime, timers included — whose
    /// result replaces it. A job that needs the body copies what it uses;
    /// the core keeps the body for [`Service::respond`] too.
    fn prepare(
        &self,
        reply: &mut Self::Reply,
        request_body: &[u8],
        exchange: Exchange,
        conn: &mut Self::Conn,
    ) -> Option<Job<Self::Reply>> {
        let _ = (reply, request_body, exchange, conn);
        None
    }

    /// The response to write for `reply`, given the request body it kept
    /// ([`Reply::wants_body`]), with any field lines of its own added to
    /// `fields` (values are ropes: text, bytes, integers and their
    /// concatenations, written straight into the head). What it makes goes
    /// into the reply, which the core keeps until the queue has written
    /// what the response shares of it; [`Full`] when that cannot be
    /// charged. A field refused ([`Fields::add`]) makes it a 500.
    fn respond<'a>(
        &'a self,
        reply: &'a mut Self::Reply,
        request_body: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full>;

    /// The next chunk of a [`Body::Stream`](crate::response::Body::Stream),
    /// or `None` at its end. Asked only while the queue holds less than
    /// [`STREAM_AHEAD`](super::STREAM_AHEAD), so a paused reader holds that
    /// and one chunk. The first is asked for before the head is queued:
    /// [`Full`] then, or a first chunk the connection's memory cannot take,
    /// answers 503 instead. Later, [`Full`] cuts the body short: a chunked
    /// one ends without its last chunk and the connection closes; one to
    /// HTTP/1.0, which only the close ends, is reset.
    fn next_chunk(&self, reply: &mut Self::Reply) -> Result<Option<Chunk>, Full> {
        let _ = reply;
        Ok(None)
    }

    /// The next chunk of a stream that may wait for it — on a timer, a
    /// channel, another server — as a `Stream`'s `poll_next` is: `Pending`
    /// (having arranged for `cx`'s waker to be woken) until it is ready.
    /// The connection flushes what is queued and awaits it; what
    /// [`Service::next_chunk`] says of the queue, [`Full`] and the stream's
    /// end holds for it. The default: [`Service::next_chunk`], at once.
    fn poll_chunk(
        &self,
        reply: &mut Self::Reply,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Chunk>, Full>> {
        let _ = cx;
        Poll::Ready(self.next_chunk(reply))
    }

    /// Told once per response queued, the core's own refusals included:
    /// the one place a service counts, times and logs its responses.
    fn answered(&self, answered: Answered<Self::Label>, conn: &mut Self::Conn) {
        let _ = (answered, conn);
    }

    /// Told once per turn of the session ([`Session::process`]), after
    /// the [`Service::answered`] calls of the batch of pipelined requests
    /// it answered and before their responses are written: what a service
    /// gathers per connection in `answered` is counted here, once a batch.
    ///
    /// [`Session::process`]: super::Session::process
    fn turn_ended(&self, conn: &mut Self::Conn) {
        let _ = conn;
    }

    /// Told after a write that the connection's socket has taken `total`
    /// bytes of its output so far: every response whose
    /// [`Answered::ends`] is at most `total` is written whole.
    fn sent(&self, total: u64, conn: &mut Self::Conn) {
        let _ = (total, conn);
    }
}

/// What the core tells its service of one response queued
/// ([`Service::answered`]).
#[derive(Clone, Copy, Debug)]
pub struct Answered<L> {
    /// The label [`Service::call`] gave its request; `None` for the core's
    /// refusal of a head it could not read (no method, no target).
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
    /// [`Service::sent`] reports as many bytes.
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

/// What the core asks of a reply while its request's body is read.
pub trait Reply: Send + std::fmt::Debug + 'static {
    /// Whether the request body is kept for [`Service::respond`].
    fn wants_body(&self) -> bool {
        false
    }

    /// Bytes the reply holds while the body is read (the budget counts
    /// them).
    fn held(&self) -> usize {
        0
    }

    /// Whether it refuses the request from its head alone (a 4xx or 5xx):
    /// an `Expect: 100-continue` then gets the final status at once, and
    /// the connection closes after it.
    fn refuses(&self) -> bool {
        false
    }
}
