//! The response ledger: the ends of the responses not yet written in full,
//! as positions in the stream of bytes ever pushed (`pushed_total`) and
//! ever written (`written_total`).

use super::WriteQueue;

impl WriteQueue {
    /// Marks the end of a response: everything pushed so far belongs to it
    /// or to earlier ones. A response whose bytes are all written already
    /// (or that has none) is not pending.
    pub fn end_response(&mut self) {
        if self.pushed_total > self.written_total {
            self.response_ends.push_back(self.pushed_total);
        }
    }

    /// Responses (as marked by [`WriteQueue::end_response`]) not yet written
    /// in full.
    pub fn pending_responses(&self) -> usize {
        self.response_ends.len()
    }

    /// Bytes written since the queue was made.
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
