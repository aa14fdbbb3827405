//! The zero-copy write queue: what a connection still owes its peer, as an
//! ordered list of segments, with no IO of its own.
//!
//! Three kinds of segment:
//!
//! - **copied** — bytes in the queue's own write buffer: response heads, and
//!   text encoded by [`WriteQueue::encode`] (one-byte and two-byte bodies,
//!   small bodies the caller chose to copy). Consecutive copied segments
//!   merge, so many small pipelined responses are one contiguous slice;
//! - **shared** — a [`Bytes`] sent as an iovec at its own memory, never copied
//!   (the fix of the Deno write-up); ones of at most [`COPY_MAX`] bytes are
//!   copied instead, where an iovec costs more than the copy;
//! - **rope** — a byte range of a [`ropey::Rope`] sent as one iovec per chunk
//!   of its own; the queue holds a clone of the rope (an `Arc` increment),
//!   which keeps the chunks alive until they are written.
//!
//! The connection asks for the pending bytes as iovecs
//! ([`WriteQueue::io_slices`]), hands them to `write_vectored`, and reports
//! how much the socket took ([`WriteQueue::advance`]). A partial write moves
//! a cursor — the front segment and an offset into it, O(1) per finished
//! segment — and the rest waits where it is, by reference. Order is the order
//! of the pushes.
//!
//! ```
//! use std::io::{IoSlice, Write};
//! use unflat::queue::WriteQueue;
//! use unflat::{Encoding, Mode};
//!
//! let head = "HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n";
//! let body = bytes::Bytes::from(vec![b'x'; 4096]);
//! let mut q = WriteQueue::new();
//! q.encode(&head, Encoding::Latin1, Mode::Strict).unwrap();
//! q.share(body.clone());
//! q.end_response();
//!
//! // What a connection does, one call at a time (`write_to` wraps this loop
//! // for blocking writers):
//! let mut socket = Vec::new();
//! while !q.is_empty() {
//!     let mut iov = [IoSlice::new(&[]); 64];
//!     let n = q.io_slices(&mut iov);
//!     let written = socket.write_vectored(&iov[..n]).unwrap();
//!     q.advance(written);
//! }
//! assert_eq!(socket.len(), head.len() + 4096);
//! assert_eq!(q.pending_responses(), 0);
//! ```

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::Bytes;

use crate::encoding::{EncodeError, Encoding, Mode};
use crate::rope::Rope;

/// Shared buffers of at most this many bytes are copied into the write buffer
/// rather than queued as their own iovec (as the Deno change does for small
/// typed arrays).
pub const COPY_MAX: usize = 64;

/// Linux's `IOV_MAX`: the most slices one `writev` takes.
pub const IOV_MAX: usize = 1024;

/// How much write buffer an empty queue keeps for reuse by default.
pub const DEFAULT_RETAIN: usize = 256 * 1024;

#[derive(Debug)]
enum Segment {
    Copied {
        start: usize,
        end: usize,
    },
    Shared(Bytes),
    Rope {
        rope: ropey::Rope,
        start: usize,
        end: usize,
    },
}

impl Segment {
    fn len(&self) -> usize {
        match self {
            Segment::Copied { start, end } | Segment::Rope { start, end, .. } => end - start,
            Segment::Shared(b) => b.len(),
        }
    }
}

/// Pending output of one connection. See the [module documentation](self).
#[derive(Debug)]
pub struct WriteQueue {
    /// The write buffer. Its whole length is initialised memory that is
    /// reused; `filled` marks the end of what is queued in it.
    buf: Vec<u8>,
    filled: usize,
    segments: VecDeque<Segment>,
    /// Bytes of the front segment already written.
    offset: usize,
    /// Bytes queued and not yet written.
    pending: usize,
    /// Of those, bytes in the write buffer.
    copied_pending: usize,
    /// Bytes ever pushed and ever written: response ends are positions in
    /// this stream.
    pushed_total: u64,
    written_total: u64,
    response_ends: VecDeque<u64>,
    retain: usize,
}

impl Default for WriteQueue {
    fn default() -> Self {
        WriteQueue::new()
    }
}

impl WriteQueue {
    /// An empty queue. Nothing is allocated until something is pushed.
    pub fn new() -> WriteQueue {
        WriteQueue {
            buf: Vec::new(),
            filled: 0,
            segments: VecDeque::new(),
            offset: 0,
            pending: 0,
            copied_pending: 0,
            pushed_total: 0,
            written_total: 0,
            response_ends: VecDeque::new(),
            retain: DEFAULT_RETAIN,
        }
    }

    /// Sets how many bytes of write buffer an empty queue keeps for reuse; a
    /// larger buffer (grown by one large encoded body) is freed once drained.
    pub fn set_retain(&mut self, bytes: usize) {
        self.retain = bytes;
    }

    /// True when nothing is waiting to be written.
    pub fn is_empty(&self) -> bool {
        self.pending == 0
    }

    /// Bytes waiting to be written.
    pub fn len(&self) -> usize {
        self.pending
    }

    /// Of the bytes waiting, those held in the queue's own write buffer
    /// (the memory the queue costs beyond what it references).
    pub fn copied_len(&self) -> usize {
        self.copied_pending
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

    /// Room for `n` more bytes at the end of the write buffer: initialised
    /// memory, zeroed only when the buffer grows.
    fn reserve(&mut self, n: usize) -> &mut [u8] {
        let need = self.filled + n;
        if self.buf.len() < need {
            let grown = need.max(self.buf.len() * 2).max(4096);
            self.buf.resize(grown, 0);
        }
        &mut self.buf[self.filled..need]
    }

    /// Queues `n` bytes just written at `buf[filled..]`.
    fn commit(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let start = self.filled;
        self.filled += n;
        match self.segments.back_mut() {
            Some(Segment::Copied { end, .. }) if *end == start => *end = self.filled,
            _ => self.segments.push_back(Segment::Copied {
                start,
                end: self.filled,
            }),
        }
        self.grew(n, n);
    }

    fn grew(&mut self, n: usize, copied: usize) {
        self.pending += n;
        self.copied_pending += copied;
        self.pushed_total += n as u64;
    }

    /// Encodes `rope` straight into the write buffer (no intermediate flat
    /// string) and queues it. Returns the bytes queued; on error nothing is
    /// queued.
    pub fn encode<R: Rope + ?Sized>(
        &mut self,
        rope: &R,
        encoding: Encoding,
        mode: Mode,
    ) -> Result<usize, EncodeError> {
        // Room for the worst case, as Node's 3 × length buffer: the write
        // buffer is reused, so the slack costs nothing after warm-up, and it
        // lets the two-byte path skip its measuring pass.
        let shape = rope.shape();
        let dst = self.reserve(crate::measure::bound(shape, encoding));
        let n = crate::encode::write_shaped(rope, shape, encoding, mode, dst)?;
        self.commit(n);
        Ok(n)
    }

    /// Copies `bytes` into the write buffer and queues them.
    pub fn copy(&mut self, bytes: &[u8]) {
        self.reserve(bytes.len()).copy_from_slice(bytes);
        self.commit(bytes.len());
    }

    /// Queues `bytes` as an iovec at its own memory (copied instead when at
    /// most [`COPY_MAX`] bytes).
    pub fn share(&mut self, bytes: Bytes) {
        if bytes.len() <= COPY_MAX {
            self.copy(&bytes);
            return;
        }
        self.grew(bytes.len(), 0);
        self.segments.push_back(Segment::Shared(bytes));
    }

    /// Queues the UTF-8 bytes `range` of `rope` as iovecs at its own chunks,
    /// keeping a clone of the rope until they are written.
    ///
    /// # Panics
    /// If `range` is out of bounds.
    pub fn share_rope(&mut self, rope: &ropey::Rope, range: std::ops::Range<usize>) {
        assert!(range.start <= range.end && range.end <= rope.len_bytes());
        let n = range.end - range.start;
        if n == 0 {
            return;
        }
        self.grew(n, 0);
        self.segments.push_back(Segment::Rope {
            rope: rope.clone(),
            start: range.start,
            end: range.end,
        });
    }

    /// Marks the end of a response: everything pushed so far belongs to it
    /// or to earlier ones.
    pub fn end_response(&mut self) {
        self.response_ends.push_back(self.pushed_total);
    }

    /// Fills `out` with iovecs for the pending bytes, in order, from the
    /// cursor on, and returns how many it filled (at most `out.len()`; pass at
    /// most [`IOV_MAX`]).
    pub fn io_slices<'a>(&'a self, out: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        let mut skip = self.offset;
        for seg in &self.segments {
            if n == out.len() {
                break;
            }
            match seg {
                Segment::Copied { start, end } => {
                    out[n] = IoSlice::new(&self.buf[start + skip..*end]);
                    n += 1;
                }
                Segment::Shared(b) => {
                    out[n] = IoSlice::new(&b[skip..]);
                    n += 1;
                }
                Segment::Rope { rope, start, end } => {
                    // ropey's chunk iterator: O(1) per chunk (it allocates
                    // its node stack once per call, which costs less than
                    // looking each chunk up from the root).
                    for chunk in rope.byte_slice(start + skip..*end).chunks() {
                        if n == out.len() {
                            break;
                        }
                        if !chunk.is_empty() {
                            out[n] = IoSlice::new(chunk.as_bytes());
                            n += 1;
                        }
                    }
                }
            }
            skip = 0;
        }
        n
    }

    /// Writes everything pending to a blocking writer, one `write_vectored`
    /// call per batch of up to 64 iovecs, resuming at the cursor after each
    /// partial write. Returns the bytes written. For blocking sockets, and
    /// for tests and fuzzers that collect the output in a `Vec<u8>`.
    ///
    /// # Errors
    /// What the writer returns; `WriteZero` if it takes nothing. The bytes
    /// not written stay queued.
    pub fn write_to<W: std::io::Write + ?Sized>(&mut self, w: &mut W) -> std::io::Result<usize> {
        let mut total = 0;
        while !self.is_empty() {
            let mut iov = [IoSlice::new(&[]); 64];
            let n = self.io_slices(&mut iov);
            let written = w.write_vectored(&iov[..n])?;
            if written == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.advance(written);
            total += written;
        }
        Ok(total)
    }

    /// Records that the first `n` pending bytes were written.
    ///
    /// # Panics
    /// If `n` is more than [`WriteQueue::len`].
    pub fn advance(&mut self, mut n: usize) {
        assert!(n <= self.pending, "advanced past the queued bytes");
        self.pending -= n;
        self.written_total += n as u64;
        while n > 0 {
            let front = self.segments.front().expect("pending bytes have a segment");
            let rest = front.len() - self.offset;
            let step = rest.min(n);
            if matches!(front, Segment::Copied { .. }) {
                self.copied_pending -= step;
            }
            if step == rest {
                self.segments.pop_front();
                self.offset = 0;
            } else {
                self.offset += step;
            }
            n -= step;
        }
        while self
            .response_ends
            .front()
            .is_some_and(|&end| end <= self.written_total)
        {
            self.response_ends.pop_front();
        }
        if self.segments.is_empty() {
            // Drained: the write buffer is reused from its start.
            self.filled = 0;
            if self.buf.len() > self.retain {
                self.buf = Vec::new();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain_in_steps(q: &mut WriteQueue, step: usize, iov_max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while !q.is_empty() {
            let mut iov = vec![IoSlice::new(&[]); iov_max];
            let n = q.io_slices(&mut iov);
            assert!(n > 0);
            let mut budget = step;
            let mut took = 0;
            for s in &iov[..n] {
                let k = s.len().min(budget);
                out.extend_from_slice(&s[..k]);
                budget -= k;
                took += k;
                if budget == 0 {
                    break;
                }
            }
            q.advance(took);
        }
        out
    }

    #[test]
    fn partial_writes_resume_in_order_across_every_segment_kind() {
        let text: String = (0..20_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let rope = ropey::Rope::from_str(&text);
        let big = Bytes::from(vec![7u8; 1000]);
        for step in [1, 7, 64, 1000, 100_000] {
            for iov_max in [1, 3, 64] {
                let mut q = WriteQueue::new();
                q.copy(b"head1|");
                q.share(big.clone());
                q.share(Bytes::from_static(b"tiny"));
                q.share_rope(&rope, 5..text.len() - 3);
                q.end_response();
                q.encode(&"|head2", Encoding::Latin1, Mode::Strict).unwrap();
                q.end_response();
                assert_eq!(q.pending_responses(), 2);
                let mut expected = b"head1|".to_vec();
                expected.extend_from_slice(&big);
                expected.extend_from_slice(b"tiny");
                expected.extend_from_slice(&text.as_bytes()[5..text.len() - 3]);
                expected.extend_from_slice(b"|head2");
                assert_eq!(q.len(), expected.len());
                assert_eq!(
                    drain_in_steps(&mut q, step, iov_max),
                    expected,
                    "step {step}, iov {iov_max}"
                );
                assert_eq!(q.pending_responses(), 0);
                assert_eq!(q.copied_len(), 0);
            }
        }
    }

    #[test]
    fn write_to_resumes_after_partial_writes() {
        /// Takes at most 7 bytes per call.
        struct Trickle(Vec<u8>, usize);
        impl std::io::Write for Trickle {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                let n = b.len().min(7);
                self.0.extend_from_slice(&b[..n]);
                self.1 += 1;
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut q = WriteQueue::new();
        q.copy(b"head|");
        q.share(Bytes::from(vec![b'x'; 100]));
        let mut w = Trickle(Vec::new(), 0);
        assert_eq!(q.write_to(&mut w).unwrap(), 105);
        assert_eq!(&w.0[..5], b"head|");
        assert!(w.0[5..].iter().all(|&b| b == b'x'));
        // The default `write_vectored` writes the first slice only: one call
        // for the head, then one per 7 bytes of the body.
        assert_eq!(w.1, 1 + 15);
        assert!(q.is_empty());
    }

    #[test]
    fn small_shared_buffers_and_consecutive_copies_merge_into_one_slice() {
        let mut q = WriteQueue::new();
        q.copy(b"HTTP/1.1 200 OK\r\n\r\n");
        q.share(Bytes::from_static(b"small body"));
        q.copy(b"HTTP/1.1 200 OK\r\n\r\n");
        let mut iov = [IoSlice::new(&[]); 8];
        assert_eq!(q.io_slices(&mut iov), 1);
        assert_eq!(q.copied_len(), q.len());
    }

    #[test]
    fn the_write_buffer_is_reused_once_drained() {
        let mut q = WriteQueue::new();
        q.copy(&[1; 100]);
        let first = q.buf.as_ptr();
        q.advance(100);
        q.copy(&[2; 100]);
        assert_eq!(q.buf.as_ptr(), first);
        assert_eq!(q.filled, 100);
    }
}
