//! A request body on its way from the connection to a handler: the
//! connection pushes what it decodes into a [`Slot`], the handler takes it
//! out as a [`RequestBody`]. Both ends run on the connection's task (the
//! handler's future is polled there), so the lock is never contended; it
//! only makes the pair `Send`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};

/// Bytes a slot holds before the connection stops reading, unless the
/// handler asked for the body whole ([`RequestBody::bytes`]): one read
/// more may land on top of it, so a slot holds at most this and a read.
pub(crate) const ROOM: usize = 64 * 1024;

/// What the two ends share.
#[derive(Debug, Default)]
struct Shared {
    /// Decoded and not yet taken.
    held: BytesMut,
    /// The body has ended: nothing more comes.
    ended: bool,
    /// The handler takes the body whole ([`RequestBody::bytes`]): the slot
    /// keeps it all, bounded by the route's limit, and asks for no pause.
    whole: bool,
    /// The handler's waker, while it waits for more.
    waker: Option<Waker>,
}

/// The connection's end: what it decodes of the body goes in.
#[derive(Debug, Clone)]
pub(crate) struct Slot(Arc<Mutex<Shared>>);

impl Slot {
    /// A slot, and the handler's end of it.
    pub(crate) fn new() -> (Slot, RequestBody) {
        let shared = Arc::new(Mutex::new(Shared::default()));
        (Slot(shared.clone()), RequestBody(Some(shared)))
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while the lock was held left bytes, not a broken invariant.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the handler's end is still held (by the handler, or by what
    /// it handed it to: a response's stream, a task of its own).
    pub(crate) fn is_read(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }

    /// The body goes on to whoever holds its end after the handler is
    /// done: kept whole as it comes (the route's limit bounds it), with no
    /// pause — its reader may be the response, which waits for the body's
    /// end to be sent.
    pub(crate) fn outlive_handler(&self) {
        self.lock().whole = true;
    }

    /// Adds a piece of the body, unless nobody holds its end any more:
    /// then what was kept goes too.
    pub(crate) fn push(&self, chunk: &[u8]) {
        let mut s = self.lock();
        if !self.is_read() {
            s.held = BytesMut::new();
            return;
        }
        s.held.extend_from_slice(chunk);
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    }

    /// The body is whole.
    pub(crate) fn end(&self) {
        let mut s = self.lock();
        s.ended = true;
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    }

    /// Bytes it holds (for the memory account): none once nobody holds
    /// its end.
    pub(crate) fn held(&self) -> usize {
        let mut s = self.lock();
        if !self.is_read() {
            s.held = BytesMut::new();
        }
        s.held.capacity()
    }

    /// Whether the connection should read no more until the handler takes
    /// what is held.
    pub(crate) fn is_full(&self) -> bool {
        let s = self.lock();
        self.is_read() && !s.whole && s.held.len() >= ROOM
    }
}

/// A request's body as its handler reads it: piece by piece as it arrives
/// ([`RequestBody::chunk`]: the connection reads no further while 64 KiB
/// are untaken), or whole ([`RequestBody::bytes`]). Either way it is
/// bounded by the route's limit ([`MethodRouter::limit`]) within
/// `--max-body`: a longer body is refused with 413 by the core, and the
/// handler is never asked. Chunked framing and trailers are the core's:
/// only the payload comes here.
///
/// [`MethodRouter::limit`]: super::MethodRouter::limit
#[derive(Debug, Default)]
pub struct RequestBody(Option<Arc<Mutex<Shared>>>);

impl RequestBody {
    /// A request without a body.
    pub(crate) fn empty() -> RequestBody {
        RequestBody(None)
    }

    /// The next piece of the body as it arrives, `None` at its end.
    pub async fn chunk(&mut self) -> Option<Bytes> {
        std::future::poll_fn(|cx| self.poll_chunk(cx)).await
    }

    /// [`RequestBody::chunk`] as a poll.
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let Some(shared) = &self.0 else {
            return Poll::Ready(None);
        };
        let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
        if !s.held.is_empty() {
            return Poll::Ready(Some(s.held.split().freeze()));
        }
        if s.ended {
            return Poll::Ready(None);
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// The whole body, once it has arrived: kept as it comes in one buffer,
    /// counted on the connection's memory account, with no copy after.
    pub async fn bytes(mut self) -> Bytes {
        let Some(shared) = self.0.take() else {
            return Bytes::new();
        };
        std::future::poll_fn(|cx| {
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            s.whole = true;
            if s.ended {
                return Poll::Ready(std::mem::take(&mut s.held).freeze());
            }
            s.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

impl futures_core::Stream for RequestBody {
    type Item = Bytes;

    fn poll_next(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        self.get_mut().poll_chunk(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_then_the_end() {
        let (slot, mut body) = Slot::new();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(body.poll_chunk(&mut cx).is_pending());
        slot.push(b"ab");
        slot.push(b"cd");
        assert_eq!(
            body.poll_chunk(&mut cx),
            Poll::Ready(Some(Bytes::from("abcd")))
        );
        slot.end();
        assert_eq!(body.poll_chunk(&mut cx), Poll::Ready(None));
    }

    #[test]
    fn full_until_taken_unless_whole() {
        let (slot, mut body) = Slot::new();
        slot.push(&vec![0; ROOM]);
        assert!(slot.is_full());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(matches!(body.poll_chunk(&mut cx), Poll::Ready(Some(b)) if b.len() == ROOM));
        assert!(!slot.is_full());
        let mut whole = std::pin::pin!(body.bytes());
        assert!(whole.as_mut().poll(&mut cx).is_pending());
        slot.push(&vec![1; 2 * ROOM]);
        assert!(!slot.is_full(), "a body taken whole asks for no pause");
        slot.end();
        assert!(matches!(whole.as_mut().poll(&mut cx), Poll::Ready(b) if b.len() == 2 * ROOM));
    }

    #[test]
    fn nothing_kept_once_the_handler_let_go() {
        let (slot, body) = Slot::new();
        slot.push(&vec![0; ROOM]);
        assert!(slot.is_full());
        drop(body);
        assert!(!slot.is_full(), "no pause for a body nobody reads");
        assert_eq!(slot.held(), 0, "what was kept goes");
        slot.push(b"ignored");
        assert_eq!(slot.held(), 0);
    }

    use std::future::Future as _;
}
