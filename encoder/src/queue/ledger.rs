//! The response ledger: the ends of the responses not yet written in full,
//! as positions in the stream of bytes ever pushed (`pushed_total`) and
//! ever written (`written_total`).

use super::WriteQueue;

impl WriteQueue {
    /// Marks the end of a response: everything pushed so far belongs to it
    /// or to earlier ones. A response whose bytes are all written already
    /// (or that has none) is not pending.
    ///
    /// ```
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// q.copy(b"HTTP/1.1 204 No Content\r\n\r\n");
    /// q.end_response();
    /// q.copy(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    /// q.end_response();
    /// assert_eq!(q.pending_responses(), 2);
    /// q.write_to(&mut std::io::sink()).unwrap();
    /// assert_eq!(q.pending_responses(), 0);
    /// assert_eq!(q.written_total(), 27 + 40);
    /// ```
    pub fn end_response(&mut self) {
        if self.pushed_total > self.written_total {
            self.response_ends.push_back(self.pushed_total);
        }
    }

    /// Responses (as marked by [`WriteQueue::end_response`]) not yet written
    /// in full. See [`WriteQueue::end_response`] for an example.
    pub fn pending_responses(&self) -> usize {
        self.response_ends.len()
    }

    /// Bytes written since the queue was made.
    ///
    /// ```
    /// use bytes::Buf;
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// q.copy(b"0123456789");
    /// q.advance(4);
    /// assert_eq!(q.written_total(), 4);
    /// ```
    pub fn written_total(&self) -> u64 {
        self.written_total
    }

    /// Forgets the ends of the responses now written in full: the part of
    /// `advance` that keeps the ledger, after `written_total` has counted
    /// what was written.
    #[inline]
    pub(super) fn pop_written_responses(&mut self) {
        while self
            .response_ends
            .front()
            .is_some_and(|&end| end <= self.written_total)
        {
            self.response_ends.pop_front();
        }
    }
}
