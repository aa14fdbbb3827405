//! What the core asks of the application it serves: the [`Service`] trait
//! and its [`Reply`]. The core reads each request, decides persistence,
//! HEAD, 1xx/204/304 and framing, writes every response and keeps the
//! connection; the service chooses the reply to each request from its head
//! and says what its response is — a status, field lines and a body form
//! ([`Response`]) — or first gives a job to await.

use std::time::Duration;

use unflat::head::Status;

use super::job::Job;
use crate::h1::RequestHead;
use crate::memory::Full;
use crate::response::{Chunk, Exchange, Response};

/// An application served by the core (the demo site is one; so is
/// `examples/hello.rs`). Its methods are called on the connection's
/// worker, once per request or response: none may block.
pub trait Service: Send + Sync + 'static {
    /// The answer to one request, chosen from its head.
    type Reply: Reply;
    /// What a connection keeps for the service between its requests.
    type Conn: Default + Send + std::fmt::Debug;
    /// What a response is counted under in [`Service::answered`] (the
    /// demo's route).
    type Label: Copy + Send + std::fmt::Debug;

    /// The reply to the request whose head is `head`, and its label.
    fn call(&self, head: &RequestHead<'_>) -> (Self::Label, Self::Reply);

    /// Readies `reply` for the response `exchange` describes, once its
    /// request body is read: `None` when it can be written now, or a job
    /// whose result replaces it.
    fn prepare(
        &self,
        reply: &mut Self::Reply,
        exchange: Exchange,
        conn: &mut Self::Conn,
    ) -> Option<Job<Self::Reply>> {
        let _ = (reply, exchange, conn);
        None
    }

    /// The response to write for `reply`, given the request body it kept
    /// ([`Reply::wants_body`]; empty otherwise). What it makes for the
    /// response (a document) goes into the reply, which the core keeps
    /// until the queue has written whatever the response shares of it;
    /// fails with [`Full`] when that cannot be charged.
    fn respond<'a>(
        &'a self,
        reply: &'a mut Self::Reply,
        request_body: &'a [u8],
    ) -> Result<Response<'a>, Full>;

    /// The next chunk of `reply`'s streamed body (its response's body was
    /// [`Body::Stream`](crate::response::Body::Stream)), or `None` once it
    /// has ended. Asked for only while the queue holds less than
    /// [`STREAM_AHEAD`](super::STREAM_AHEAD), so a paused reader holds that
    /// and one chunk, however long the stream. Fails with [`Full`] when the
    /// chunk's memory cannot be charged: the connection then closes, the
    /// body cut short.
    fn next_chunk(&self, reply: &mut Self::Reply) -> Result<Option<Chunk>, Full> {
        let _ = reply;
        Ok(None)
    }

    /// Told once per response queued — `None` for the core's own refusals
    /// of a head it could not read — with its status and the time since
    /// its request's head was complete.
    fn answered(&self, label: Option<Self::Label>, status: Status, took: Duration) {
        let _ = (label, status, took);
    }

    /// Told when a connection opens.
    fn connection_opened(&self) {}

    /// Told when a connection ends.
    fn connection_closed(&self) {}

    /// Told of bytes a connection's socket took.
    fn written(&self, bytes: usize) {
        let _ = bytes;
    }

    /// Told when a connection is reset after `--send-timeout`.
    fn send_timed_out(&self) {}
}

/// What the core asks of a reply while its request's body is read.
pub trait Reply: Send + std::fmt::Debug + 'static {
    /// Whether the request body is kept for [`Service::respond`].
    fn wants_body(&self) -> bool {
        false
    }

    /// Bytes the reply holds while the body is read (counted against the
    /// connection's lease).
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
