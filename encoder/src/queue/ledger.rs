//! The response ledger: how far the writer has got through what was
//! pushed, and where the responses not yet written in full end, as
//! positions in the stream of bytes ever pushed.

use std::collections::VecDeque;

// Named by the documentation only.
#[cfg(doc)]
use super::WriteQueue;

/// How far a queue's output has gone ([`WriteQueue::ledger`]): bytes written,
/// and responses not yet written in full. A response has gone out whole once
/// [`Ledger::written`] passes where it ended when queued.
///
/// ```
/// use bytes::Buf;
/// use unflat::queue::WriteQueue;
///
/// let mut q = WriteQueue::new();
/// q.copy(b"HTTP/1.1 204 No Content\r\n\r\n");
/// q.end_response();
/// q.copy(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
/// let second_ends = q.ledger().written() + q.remaining() as u64;
/// q.end_response();
/// assert_eq!(q.ledger().pending_responses(), 2);
///
/// q.advance(30); // a partial write: the first response and 3 bytes
/// assert_eq!(q.ledger().pending_responses(), 1);
/// assert!(q.ledger().written() < second_ends, "the second is not out yet");
/// q.write_to(&mut std::io::sink()).unwrap();
/// assert_eq!(q.ledger().pending_responses(), 0);
/// assert_eq!(q.ledger().written(), second_ends);
/// ```
#[derive(Debug)]
pub struct Ledger {
    /// Bytes ever pushed and written: `ends` are positions in this stream.
    pushed: u64,
    written: u64,
    pub(super) ends: VecDeque<u64>,
}

impl Ledger {
    /// Nothing pushed, nothing written; made by the queue only.
    pub(super) fn new() -> Ledger {
        Ledger {
            pushed: 0,
            written: 0,
            ends: VecDeque::new(),
        }
    }

    /// Responses ([`WriteQueue::end_response`]) not yet written in full.
    #[inline]
    pub fn pending_responses(&self) -> usize {
        self.ends.len()
    }

    /// Bytes written since the queue was made.
    #[inline]
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Counts `n` bytes pushed.
    #[inline]
    pub(super) fn pushed(&mut self, n: usize) {
        self.pushed += n as u64;
    }

    /// Marks the end of a response at what has been pushed so far, unless
    /// all of it is written already.
    #[inline]
    pub(super) fn end_response(&mut self) {
        if self.pushed > self.written {
            self.ends.push_back(self.pushed);
        }
    }

    /// Takes back the last `n` bytes pushed and the response ends marked
    /// after the first `ends` ([`WriteQueue::marked`](super::WriteQueue::marked)).
    pub(super) fn taken_back(&mut self, n: usize, ends: usize) {
        self.pushed -= n as u64;
        self.ends.truncate(ends);
    }

    /// Counts `n` bytes written, and forgets the ends of the responses now
    /// written in full.
    #[inline]
    pub(super) fn wrote(&mut self, n: usize) {
        self.written += n as u64;
        // The ends are in order: those written are a prefix, let go at
        // once — nearly always all of them (a pipelined batch written in
        // one go), not one `pop_front` each.
        let written = self.written;
        match self.ends.back() {
            Some(&last) if last <= written => self.ends.clear(),
            Some(_) => {
                let done = self.ends.partition_point(|&end| end <= written);
                self.ends.drain(..done);
            }
            None => {}
        }
    }
}
