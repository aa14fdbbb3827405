//! The one caller of the application: every call the session makes into
//! the service, its observer and the replies it gave passes here, so that
//! the rest of the session — framing, `100 Continue`, backpressure,
//! refusals, memory — never names them (tests/structure.rs checks it), as
//! hyper's `proto/h1/dispatch.rs` stands apart from its `conn.rs`. Each
//! call is inlined: the seam costs nothing.

use std::net::SocketAddr;
use std::task::{Context, Poll};

use super::Protocol;
use crate::h1::RequestHead;
use crate::memory::Full;
use crate::response::{Chunk, Fields, Response};
use crate::service::{Answered, Job, LabelOf, Observe, Reply, Service, Watch};

/// What one connection keeps for the application: the service's state and
/// its observer's.
#[derive(Debug)]
pub(super) struct Dispatch<S: Service> {
    conn: S::Conn,
    watch: Watch<S>,
}

impl<S: Service> Dispatch<S> {
    /// What a new connection from `peer` keeps for the service and its
    /// observer.
    pub(super) fn open(p: &Protocol<S>, peer: Option<SocketAddr>) -> Dispatch<S> {
        Dispatch {
            conn: p.service.open(peer),
            watch: p.observer.open(peer),
        }
    }

    /// Bytes [`Dispatch::open`] keeps at most.
    pub(super) fn memory(p: &Protocol<S>) -> usize {
        p.service.conn_memory() + p.observer.conn_memory()
    }

    /// The one call per request: its reply. (Apart from [`Dispatch::begun`]:
    /// a reply returned with its label would be moved once more.)
    #[inline(always)]
    pub(super) fn call(&mut self, p: &Protocol<S>, head: &RequestHead<'_>) -> S::Reply {
        p.service.call(head, &mut self.conn)
    }

    /// Gives the service back a reply the core is done with.
    #[inline(always)]
    pub(super) fn recycle(&mut self, p: &Protocol<S>, reply: S::Reply) {
        p.service.recycle(reply, &mut self.conn);
    }

    /// Tells the observer that the request of `head` began, answered by
    /// `reply`: the label its response is counted under.
    #[inline(always)]
    pub(super) fn begun(
        &mut self,
        p: &Protocol<S>,
        head: &RequestHead<'_>,
        reply: &S::Reply,
    ) -> LabelOf<S> {
        p.observer.begun(head, reply, &mut self.watch)
    }

    /// Tells the observer of a request refused before its head was read,
    /// whose first line was `line`.
    #[cold]
    #[inline(never)]
    pub(super) fn refused(&mut self, p: &Protocol<S>, line: &[u8]) {
        p.observer.refused(line, &mut self.watch);
    }

    /// Tells the observer of a response queued.
    #[inline(always)]
    pub(super) fn answered(&mut self, p: &Protocol<S>, answered: Answered<LabelOf<S>>) {
        p.observer.answered(answered, &mut self.watch);
    }

    /// Tells the observer that a turn of the session ended.
    #[inline(always)]
    pub(super) fn turn_ended(&mut self, p: &Protocol<S>) {
        p.observer.turn_ended(&mut self.watch);
    }

    /// Tells the observer how far the output is written.
    #[inline(always)]
    pub(super) fn sent(&mut self, p: &Protocol<S>, total: u64) {
        p.observer.sent(total, &mut self.watch);
    }
}

/// Bytes `reply` holds ([`Reply::held`]).
#[inline(always)]
pub(super) fn held<R: Reply>(reply: &R) -> usize {
    reply.held()
}

/// Whether `reply` refuses its request from the head ([`Reply::refuses`]).
#[inline(always)]
pub(super) fn refuses<R: Reply>(reply: &R) -> bool {
    reply.refuses()
}

/// Whether `reply` keeps the request body ([`Reply::wants_body`]).
#[inline(always)]
pub(super) fn wants_body<R: Reply>(reply: &R) -> bool {
    reply.wants_body()
}

/// Whether `reply` takes the request body as it is read
/// ([`Reply::streams_body`]).
#[inline(always)]
pub(super) fn streams_body<R: Reply>(reply: &R) -> bool {
    reply.streams_body()
}

/// Hands `reply` a piece of the request body ([`Reply::body_chunk`]).
#[inline(always)]
pub(super) fn body_chunk<R: Reply>(reply: &mut R, chunk: &[u8]) {
    reply.body_chunk(chunk)
}

/// The longest body `reply` takes ([`Reply::body_limit`]).
#[inline(always)]
pub(super) fn body_limit<R: Reply>(reply: &R) -> Option<u64> {
    reply.body_limit()
}

/// Whether `reply` has room for more of its body ([`Reply::poll_body_room`]).
#[inline(always)]
pub(super) fn poll_body_room<R: Reply>(reply: &mut R, cx: &mut Context<'_>) -> Poll<()> {
    reply.poll_body_room(cx)
}

/// The work `reply` awaits first ([`Reply::prepare`]).
#[inline(always)]
pub(super) fn prepare<R: Reply>(reply: &mut R, request_body: &[u8]) -> Option<Job<R>> {
    reply.prepare(request_body)
}

/// The response of `reply` ([`Reply::respond`]).
#[inline(always)]
pub(super) fn respond<'a, R: Reply>(
    reply: &'a mut R,
    request_body: &'a [u8],
    fields: &mut Fields<'a>,
) -> Result<Response<'a>, Full> {
    reply.respond(request_body, fields)
}

/// A stream's next chunk from `reply` ([`Reply::poll_chunk`]).
#[inline(always)]
pub(super) fn poll_chunk<R: Reply>(
    reply: &mut R,
    cx: &mut Context<'_>,
) -> Poll<Result<Option<Chunk>, Full>> {
    reply.poll_chunk(cx)
}
