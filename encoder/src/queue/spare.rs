//! What an empty queue gives away and takes back: its write buffer and its
//! two lists ([`Spare`]), and its frame buffer, so that a connection
//! waiting for its next request holds none of them.

use std::collections::VecDeque;

use super::segment::Segment;
use super::WriteQueue;

/// The allocations of an empty [`WriteQueue`] but its frame buffer: the
/// write buffer and its two lists, for a pool, so that an idle connection
/// holds none of them and a busy one allocates none.
///
/// ```
/// use bytes::Buf;
/// use unflat::queue::WriteQueue;
///
/// let mut q = WriteQueue::new();
/// q.copy(b"HTTP/1.1 204 No Content\r\n\r\n");
/// q.end_response();
/// assert!(q.take_spare().is_none(), "output pending");
/// q.write_to(&mut std::io::sink()).unwrap();
/// let spare = q.take_spare().expect("an empty queue gives its allocations away");
/// assert!(spare.buffer_capacity() >= 27);
/// assert!(WriteQueue::new().take_spare().is_none(), "a new queue has allocated nothing");
/// assert_eq!(q.footprint(), 0, "it holds nothing now");
/// let mut other = WriteQueue::new();
/// other.reuse_spare(spare);
/// other.copy(b"ok");
/// assert!(other.footprint() >= 27, "the buffer it was given");
/// ```
#[derive(Debug, Default)]
pub struct Spare {
    buf: Vec<u8>,
    segments: VecDeque<Segment>,
    response_ends: VecDeque<u64>,
}

impl Spare {
    /// The write buffer's capacity, for a pool that keeps only buffers of
    /// a size it chooses.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Frees the write buffer and keeps the lists: for a pool that keeps
    /// buffers up to a size, and a buffer grown past it by one long body.
    pub fn free_buffer(&mut self) {
        self.buf = Vec::new();
    }
}

/// **Buffers for a pool**: an empty queue gives its allocations away and
/// takes them back when it has something to write. The frame buffer goes
/// apart: only a connection that streams long bodies needs one.
///
/// ```
/// use unflat::queue::WriteQueue;
///
/// let mut pool = Vec::new();
/// let mut q = WriteQueue::new();
/// q.copy(b"HTTP/1.1 204 No Content\r\n\r\n");
/// q.write_to(&mut std::io::sink()).unwrap();
/// // Waiting for the next request: the buffers go to the pool.
/// pool.extend(q.take_spare());
/// assert_eq!(q.footprint(), 0);
/// // The request came: they come back, and the response allocates nothing.
/// if let Some(spare) = pool.pop() {
///     q.reuse_spare(spare);
/// }
/// let before = q.footprint();
/// q.copy(b"HTTP/1.1 204 No Content\r\n\r\n");
/// assert!(before > 0 && q.footprint() == before);
/// ```
impl WriteQueue {
    /// Takes the write buffer and the two lists out of an empty queue;
    /// `None` while output is pending or when it has allocated none.
    pub fn take_spare(&mut self) -> Option<Spare> {
        let allocated =
            self.buf.capacity() + self.segments.capacity() + self.ledger.ends.capacity();
        if self.pending > 0 || allocated == 0 {
            return None;
        }
        // Empty: nothing pending means no segment and no response end.
        debug_assert!(self.segments.is_empty() && self.ledger.ends.is_empty());
        self.segments.clear();
        self.ledger.ends.clear();
        self.filled = 0;
        Some(Spare {
            buf: std::mem::take(&mut self.buf),
            segments: std::mem::take(&mut self.segments),
            response_ends: std::mem::take(&mut self.ledger.ends),
        })
    }

    /// Gives an empty queue the allocations of `spare` it lacks (their bytes
    /// are overwritten, never sent); the spare's others are dropped.
    pub fn reuse_spare(&mut self, spare: Spare) {
        if self.pending > 0 {
            return;
        }
        let Spare {
            mut buf,
            segments,
            response_ends,
        } = spare;
        if self.buf.capacity() == 0 {
            // The whole length is initialised memory the queue reuses.
            buf.resize(buf.capacity(), 0);
            std::mem::forget(std::mem::replace(&mut self.buf, buf));
            self.filled = 0;
        }
        // The lists replaced are empty and unallocated: nothing to drop
        // (forgetting them leaks nothing, and skips their drop glue, which
        // an idle connection's every request would pay).
        if self.segments.capacity() == 0 {
            std::mem::forget(std::mem::replace(&mut self.segments, segments));
        }
        if self.ledger.ends.capacity() == 0 {
            std::mem::forget(std::mem::replace(&mut self.ledger.ends, response_ends));
        }
    }

    /// Takes the frame buffer out of a queue with no framed segment queued;
    /// `None` otherwise, or when it keeps none.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use unflat::queue::{SharedRope, WriteQueue};
    /// use unflat::{Encoding, Mode, Utf16};
    ///
    /// let mut q = WriteQueue::new();
    /// assert!(q.take_frame_buffer().is_none(), "no frame buffer yet");
    /// let long: SharedRope = Arc::new(Utf16(vec![0x20AC; 100_000])); // framed
    /// q.stream(&long, Encoding::Utf8, Mode::Strict).unwrap();
    /// assert!(q.take_frame_buffer().is_none(), "lent to the queued stream");
    /// q.write_to(&mut std::io::sink()).unwrap();
    /// let frame = q.take_frame_buffer().expect("drained: the frame is free");
    /// q.reuse_frame_buffer(frame);
    /// ```
    pub fn take_frame_buffer(&mut self) -> Option<Vec<u8>> {
        if self.framed > 0 || self.spare_frame.capacity() == 0 {
            return None;
        }
        Some(std::mem::take(&mut self.spare_frame))
    }

    /// Gives a queue without a frame buffer `buffer`; one that has one keeps
    /// its own.
    pub fn reuse_frame_buffer(&mut self, buffer: Vec<u8>) {
        if self.framed == 0 && self.spare_frame.capacity() == 0 {
            self.spare_frame = buffer;
        }
    }
}
