//! A streamed response: set out on with its head held back, its chunks
//! asked of the reply as the queue drains (or awaited, `Step::Wait`),
//! its end, and how it ends when it cannot go on.

use super::*;

/// A streamed response being queued ([`Reply::poll_chunk`]).
#[derive(Debug)]
pub(super) struct Streaming<S: Service> {
    pub(super) reply: S::Reply,
    pub(super) label: Option<LabelOf<S>>,
    /// Its head, until it is queued with the first chunk.
    pub(super) head: Option<StreamHead>,
    pub(super) exchange: Exchange,
    pub(super) status: Status,
    pub(super) stream: Stream,
    pub(super) keep_alive: bool,
    /// A chunk asked for that the lease could not cover yet.
    pub(super) next: Option<Chunk>,
    /// The reply said the stream ended; its end waits for memory.
    pub(super) ended: bool,
    /// The reply is waiting for the next chunk ([`Reply::poll_chunk`]
    /// was `Pending`): the connection awaits [`Session::poll_wait`].
    pub(super) waiting: bool,
    /// The reply's chunk could not be charged ([`Full`]), seen while
    /// waiting for it: handled on the next turn.
    pub(super) refused: Option<Full>,
    /// The reply panicked while the chunk was awaited (logged then).
    pub(super) failed: bool,
}

impl<S: Service> Streaming<S> {
    /// Whether the queue must drain before the stream goes on: it holds
    /// [`STREAM_AHEAD`] or more, or what comes next waits for memory.
    pub(super) fn waits(&self, queue: &WriteQueue) -> bool {
        self.next.is_some() || self.ended || queue.remaining() >= STREAM_AHEAD
    }
}

impl<S: Service> Session<S> {
    /// Sets out on a streamed response whose head is `head`, to be queued
    /// only with its first chunk ([`Session::stream`]).
    pub(super) fn begin_stream(
        &mut self,
        queue: &mut WriteQueue,
        mut p: Pending<S>,
        head: StreamHead,
    ) -> State<S> {
        self.answered(queue, p.body.take());
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
            failed: false,
        });
        // The turn's loop asks for the first chunk (counted as any other).
        State::Streaming(streaming)
    }

    /// Queues what comes next of a streamed response: its head with its
    /// first chunk, a chunk asked of the reply, or its end. When the
    /// lease cannot cover it, it waits for the queue to drain; with nothing
    /// queued, a stream not begun is refused (503), and one begun is cut
    /// short so that no client can take it for whole ([`Session::cut_short`]).
    pub(super) fn stream(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        mut s: Box<Streaming<S>>,
    ) -> State<S> {
        if s.failed {
            // The reply panicked while its chunk was awaited (logged).
            let (head_request, label) = (s.exchange.head_request, s.label);
            drop(s);
            return self.failed(queue, service, head_request, label);
        }
        let (writer, budget) = (&service.writer, &mut self.budget);
        let asked = match s.refused.take() {
            Some(full) => Some(Err(full)),
            None if !s.ended && s.next.is_none() => {
                // Asked with a waker that does nothing: a chunk not ready
                // is awaited by the connection (`Step::Wait`), with its own.
                let mut cx = Context::from_waker(Waker::noop());
                match dispatch::poll_chunk(&mut s.reply, &mut cx) {
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
    pub(super) fn refuse_stream(
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
    pub(super) fn cut_short(&mut self, service: &Protocol<S>, s: &Streaming<S>) -> State<S> {
        service.memory.refused();
        cut(s)
    }
}

/// How a streamed response begun is ended before its end: a chunked body
/// stops before its last chunk and the connection closes; a body that only
/// the close ends (HTTP/1.0) is reset, since a clean close would make it
/// look complete.
pub(super) fn cut<S: Service>(s: &Streaming<S>) -> State<S> {
    if s.stream.is_chunked() {
        State::Closed
    } else {
        State::Reset
    }
}
