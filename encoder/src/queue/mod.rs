//! The zero-copy write queue: what a connection still owes its peer, as an
//! ordered list of segments, with no IO of its own.
//!
//! Five kinds of segment:
//!
//! - **copied** — bytes in the queue's own write buffer: response heads,
//!   text encoded by [`WriteQueue::encode`], and whatever the copy-or-share
//!   policy copies. Consecutive copied segments merge, so a head and a small
//!   body, or many small pipelined responses, are one contiguous slice;
//! - **shared** — a [`Bytes`](bytes::Bytes) sent as an iovec at its own
//!   memory, never copied (the fix of the Deno write-up);
//! - **rope** — a byte range of a [`ropey::Rope`] sent as one iovec per chunk
//!   of its own; the queue holds a clone of the rope (an `Arc` increment),
//!   which keeps the chunks alive until they are written;
//! - **stream** — a rope encoded frame by frame as the socket drains
//!   ([`WriteQueue::stream`]): a large transcoded body costs the connection
//!   one frame of memory, not its whole encoded size;
//! - **rope frames** — the short chunks of a ropey range longer than a frame,
//!   copied a frame at a time as the socket drains, for the same reason.
//!
//! **What a user meets**, in the order the documentation lists it: the
//! write path — [`WriteQueue::new`], the pushes ([`WriteQueue::encode`],
//! [`WriteQueue::stream`], [`WriteQueue::copy`], [`WriteQueue::share`],
//! [`WriteQueue::share_rope`]), [`WriteQueue::end_response`] and
//! [`WriteQueue::write_to`] — and the [`Buf`] the queue is; then three
//! extras for servers, each documented where it begins: **memory** (what
//! the queue holds and will hold, for a server that bounds it), the
//! **[`Ledger`]** (how far the output has gone, response by response), and
//! **buffers for a pool** ([`Spare`]: what an idle connection gives away).
//!
//! The write path is `write.rs`'s, the extras `footprint.rs`'s,
//! `ledger.rs`'s and `spare.rs`'s; the queue's state, the buffer machinery
//! and the `Buf` (this file) are behind them all. The copy-or-share
//! [`Policy`] is `policy.rs`'s, and the queue's tests are `tests.rs`'s. Each
//! segment kind keeps its own cursor (`segment.rs`), and a framed segment
//! (`framed.rs`) the frame it is written from.
//!
//! **Memory.** What a queue holds of its own ([`WriteQueue::held`]) is its
//! copied bytes not yet written and one frame: every body longer than a
//! frame is framed, whatever its form, and the write buffer reclaims its
//! written front before it grows. What its buffers occupy, kept for reuse
//! included, is [`WriteQueue::footprint`], and
//! [`WriteQueue::footprint_after`] bounds it before a push, so that a server
//! can refuse a response before it grows past a limit.
//!
//! **Copy or share** is decided here and nowhere else, by the queue's
//! [`Policy`]: a contiguous piece — a [`Bytes`](bytes::Bytes), or a chunk of
//! a rope — shorter than [`Policy::copy_below`] is copied behind what is queued
//! (consecutive short chunks into one run), a longer one is shared. An iovec
//! costs the kernel a segment to gather from memory the writer did not just
//! touch; a copy costs a `memcpy`. Below the threshold the copy is cheaper
//! (docs/results/history.md, "Copy or share", has the measurements).
//!
//! The queue is a [`bytes::Buf`]: [`Buf::chunks_vectored`] gives the pending
//! bytes as iovecs for `write_vectored`, and [`Buf::advance`] records how much
//! the socket took. A partial write moves a cursor — the front segment and an
//! offset into it, O(1) per finished segment — and the rest waits where it
//! is, by reference. Order is the order of the pushes. Anything written for
//! `Buf` drains it, tokio's `AsyncWriteExt::write_all_buf` included.
//!
//! ```
//! use std::io::{IoSlice, Write};
//! use bytes::Buf;
//! use unflat::queue::WriteQueue;
//! use unflat::{Encoding, Mode};
//!
//! let head = "HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n";
//! let body = bytes::Bytes::from(vec![b'x'; 4096]);
//! let mut q = WriteQueue::new();
//! q.encode(&head, Encoding::Latin1, Mode::Strict).unwrap();
//! q.share(&body);
//! q.end_response();
//!
//! // What a connection does, one call at a time (`write_to` wraps this loop
//! // for blocking writers):
//! let mut socket = Vec::new();
//! while q.has_remaining() {
//!     let mut iov = [IoSlice::new(&[]); 64];
//!     let n = q.chunks_vectored(&mut iov);
//!     let written = socket.write_vectored(&iov[..n]).unwrap();
//!     q.advance(written);
//! }
//! assert_eq!(socket.len(), head.len() + 4096);
//! assert_eq!(q.ledger().pending_responses(), 0);
//! ```

mod framed;
mod policy;
mod segment;

// The write path first: the documentation lists `impl` blocks in the order
// of their modules, and the extras after it.
mod write;

mod footprint;
mod ledger;
mod spare;

use std::collections::VecDeque;
use std::io::IoSlice;
use std::ops::{ControlFlow, Range};
use std::sync::Arc;

use bytes::Buf;

use crate::resume::Encoder;
use crate::rope::{walk_ropey_chunks, Rope, Walk};
pub use footprint::{Push, Pushes};
use framed::Framed;
pub use ledger::Ledger;
pub use policy::Policy;
use segment::Segment;
pub use spare::Spare;

/// How much write buffer an empty queue keeps for reuse by default
/// ([`WriteQueue::set_retain`] changes it): a buffer grown past it by one
/// large encoded body is freed once the queue drains.
///
/// ```
/// use bytes::Buf;
/// use unflat::queue::{WriteQueue, DEFAULT_RETAIN};
/// use unflat::{Encoding, Mode};
///
/// let mut q = WriteQueue::new();
/// let big = "x".repeat(2 * DEFAULT_RETAIN);
/// q.encode(&big, Encoding::Utf8, Mode::Strict).unwrap();
/// assert!(q.footprint() > DEFAULT_RETAIN);
/// q.write_to(&mut std::io::sink()).unwrap();
/// assert!(!q.has_remaining());
/// assert!(q.footprint() <= DEFAULT_RETAIN, "drained: the oversized buffer is freed");
/// ```
pub const DEFAULT_RETAIN: usize = 256 * 1024;

/// A rope the queue can keep until it is written: owned, and shareable
/// between threads. Cloning one is an `Arc` increment. What
/// [`WriteQueue::stream`] takes, so that it can encode a long body frame by
/// frame after the call returns.
///
/// ```
/// use std::sync::Arc;
/// use unflat::queue::SharedRope;
/// use unflat::{Latin1, Rope, Utf16};
///
/// // Any owned rope: text from a script engine, a ropey rope, a vector of them.
/// let latin1: SharedRope = Arc::new(Latin1(b"caf\xe9".to_vec()));
/// let utf16: SharedRope = Arc::new(Utf16(vec![0x20AC; 3]));
/// let parts: SharedRope = Arc::new(vec![latin1.clone(), utf16]);
/// assert_eq!(parts.shape().one_byte, 4);
/// assert_eq!(parts.shape().two_byte, 3);
/// ```
pub type SharedRope = Arc<dyn Rope + Send + Sync>;

/// Calls `visit` with the bytes of each chunk of `rope` that overlaps
/// `range`, cut to the range, in order, until it breaks. Bytes, not `str`: a
/// range of the UTF-8 encoding may cut a character, and a partial write may
/// stop inside one.
///
/// Which walk ([`Walk`]): a push iterates a range longer than
/// `ITERATE_ABOVE` (one small allocation per push) and looks a shorter one
/// up; the writer, which walks the shared runs on every `writev` (again
/// after each partial write), always looks up, so that a response costs at
/// most the one allocation of its push.
fn chunk_bytes<'r>(
    rope: &'r ropey::Rope,
    range: Range<usize>,
    walk: Walk,
    mut visit: impl FnMut(&'r [u8]) -> ControlFlow<()>,
) -> ControlFlow<()> {
    walk_ropey_chunks(
        range.start,
        range.end,
        walk,
        |i| {
            let (c, at, _, _) = rope.chunk_at_byte(i);
            (c, at)
        },
        |i| {
            let (chunks, at, _, _) = rope.chunks_at_byte(i);
            (chunks, at)
        },
        |chunk, at| {
            let bytes = chunk.as_bytes();
            let from = range.start.saturating_sub(at);
            let to = (range.end - at).min(bytes.len());
            if from < to {
                visit(&bytes[from..to])
            } else {
                ControlFlow::Continue(())
            }
        },
    )
}

/// Pending output of one connection. See the [module documentation](self).
///
/// Push what a response is made of, mark its end, and drain the queue into
/// the socket: [`WriteQueue::write_to`] for a blocking writer, or as a
/// [`bytes::Buf`] (tokio's `write_all_buf`, or
/// [`Buf::chunks_vectored`] and [`Buf::advance`] by hand).
///
/// ```
/// use unflat::head::{Head, Status, RequestMethod};
/// use unflat::queue::WriteQueue;
/// use unflat::{Encoding, Latin1, Mode};
///
/// let body = Latin1(b"cr\xe8me"); // Latin-1 text: 5 characters, 6 bytes as UTF-8
/// let mut head = Head::new(Status::OK, RequestMethod::Other);
/// head.content_length(6).unwrap();
///
/// let mut q = WriteQueue::new();
/// q.encode(&head, Encoding::Latin1, Mode::Strict).unwrap();
/// q.encode(&body, Encoding::Utf8, Mode::Strict).unwrap();
/// q.end_response();
///
/// let mut socket = Vec::new(); // a TcpStream in a server
/// q.write_to(&mut socket).unwrap();
/// assert_eq!(socket, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\ncrème".as_bytes());
/// assert_eq!(q.ledger().pending_responses(), 0);
/// ```
#[derive(Debug)]
pub struct WriteQueue {
    /// The write buffer. Its whole length is initialised memory that is
    /// reused; `filled` marks the end of what is queued in it.
    buf: Vec<u8>,
    filled: usize,
    /// The segments in order; each keeps its own cursor.
    segments: VecDeque<Segment>,
    /// Bytes queued and not yet written.
    pending: usize,
    /// Of those, bytes in the write buffer.
    copied_pending: usize,
    /// Bytes ever pushed and written, and where responses end.
    ledger: Ledger,
    retain: usize,
    policy: Policy,
    /// The frame buffer, reused: lent to the framed segment at the front
    /// while it is written, kept here between them.
    spare_frame: Vec<u8>,
    /// Framed segments queued.
    framed: usize,
}

impl Default for WriteQueue {
    fn default() -> Self {
        WriteQueue::new()
    }
}

// The machinery of the write path (`write.rs`): the write buffer's room,
// what a push adds, and the frame lent to the front segment.
impl WriteQueue {
    /// Room for `n` more bytes at the end of the write buffer: initialised
    /// memory, zeroed only when the buffer grows. The bytes already written
    /// at the front of the buffer are reclaimed first, so that a queue that
    /// never drains completely (a peer reading slowly while it pipelines)
    /// holds what is pending, not all it ever sent; the buffer grows by a
    /// quarter at a time, so that what it holds stays close to what is
    /// queued.
    fn room(&mut self, n: usize) -> &mut [u8] {
        if self.buf.len() < self.filled + n {
            self.compact();
        }
        let need = self.filled + n;
        if self.buf.len() < need {
            let grown = need.max(self.buf.len() + self.buf.len() / 4).max(4096);
            self.buf.reserve_exact(grown - self.buf.len());
            self.buf.resize(grown, 0);
        }
        &mut self.buf[self.filled..need]
    }

    /// Moves the unwritten copied bytes to the start of the write buffer.
    /// Copied segments lie in the buffer in queue order, each starting at
    /// its first unwritten byte, so the first one's start is where the
    /// unwritten bytes begin.
    fn compact(&mut self) {
        let first = self.segments.iter().find_map(|seg| match seg {
            Segment::Copied { start, .. } => Some(*start),
            _ => None,
        });
        let first = first.unwrap_or(self.filled);
        if first == 0 {
            return;
        }
        self.buf.copy_within(first..self.filled, 0);
        self.filled -= first;
        for seg in &mut self.segments {
            if let Segment::Copied { start, end } = seg {
                *start -= first;
                *end -= first;
            }
        }
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
        self.ledger.pushed(n);
    }

    /// Bytes per frame: the policy's, but never below what always makes
    /// progress.
    fn frame_size(&self) -> usize {
        self.policy.frame.max(Encoder::MIN_DST)
    }

    /// Whether a buffer of `len` bytes asked to be shared is copied: when
    /// the policy says a copy is cheaper, and always when it is empty (a
    /// segment of no bytes would never be advanced past).
    fn copies(&self, len: usize) -> bool {
        len < self.policy.copy_below || len == 0
    }

    fn push_rope(&mut self, rope: &ropey::Rope, range: Range<usize>) {
        self.grew(range.len(), 0);
        self.segments.push_back(Segment::Rope {
            rope: rope.clone(),
            range,
        });
    }

    /// Queues a framed segment; one that becomes the front gets its first
    /// frame at once.
    fn push_framed(&mut self, framed: Framed) {
        self.grew(framed.remaining(), 0);
        self.segments.push_back(Segment::Framed(framed));
        self.framed += 1;
        if self.segments.len() == 1 {
            self.activate_front();
        }
    }

    /// Lends the frame buffer to the front segment if it is framed: it has
    /// just become the front.
    fn activate_front(&mut self) {
        let size = self.frame_size();
        if let Some(Segment::Framed(framed)) = self.segments.front_mut() {
            framed.activate(std::mem::take(&mut self.spare_frame), size);
        }
    }
}

impl Buf for WriteQueue {
    /// Bytes queued and not yet written.
    fn remaining(&self) -> usize {
        self.pending
    }

    /// The pending bytes of the front segment (its first chunk, for a rope;
    /// its current frame, for a framed segment).
    fn chunk(&self) -> &[u8] {
        self.segments
            .front()
            .map_or(&[], |seg| seg.chunk(&self.buf))
    }

    /// Fills `dst` with iovecs for the pending bytes, in order, from the
    /// cursor on, and returns how many it filled (at most `dst.len()`; pass
    /// any number: std's and tokio's `write_vectored` take as many as the
    /// system allows and report what they wrote). A framed segment ends the
    /// list: only its current frame is at hand, and the segments behind it
    /// wait.
    ///
    /// ```
    /// use std::io::IoSlice;
    /// use bytes::{Buf, Bytes};
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// q.copy(b"head ");
    /// q.share(&Bytes::from(vec![b'b'; 10_000]));
    /// q.copy(b" tail");
    /// let mut iov = [IoSlice::new(&[]); 8];
    /// let n = q.chunks_vectored(&mut iov);
    /// let lens: Vec<usize> = iov[..n].iter().map(|s| s.len()).collect();
    /// assert_eq!(lens, [5, 10_000, 5]);
    /// ```
    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for seg in &self.segments {
            if seg.iovecs(&self.buf, dst, &mut n).is_break() {
                break;
            }
        }
        n
    }

    /// Records that the first `n` pending bytes were written: the rest
    /// waits where it is, and the next [`Buf::chunks_vectored`] starts
    /// after them.
    ///
    /// ```
    /// use bytes::Buf;
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// q.copy(b"HTTP/1.1 200 OK\r\n");
    /// q.end_response();
    /// q.advance(9); // a partial write took 9 bytes
    /// assert_eq!(q.chunk(), b"200 OK\r\n");
    /// assert_eq!(q.ledger().pending_responses(), 1);
    /// q.advance(8);
    /// assert_eq!(q.remaining(), 0);
    /// assert_eq!(q.ledger().pending_responses(), 0);
    /// ```
    ///
    /// # Panics
    /// If `n` is more than [`Buf::remaining`].
    fn advance(&mut self, mut n: usize) {
        assert!(
            n <= self.pending,
            "advanced {n} bytes past the {} queued",
            self.pending
        );
        self.pending -= n;
        self.ledger.wrote(n);
        while n > 0 {
            let front = self
                .segments
                .front_mut()
                .expect("pending bytes have a segment");
            let step = front.available().min(n);
            if matches!(front, Segment::Copied { .. }) {
                self.copied_pending -= step;
            }
            n -= step;
            if step < front.remaining() {
                front.advance(step);
                continue;
            }
            // Written whole (the common case): dropped without moving its
            // cursor, and the next one, if framed, gets its frame.
            if let Some(Segment::Framed(mut done)) = self.segments.pop_front() {
                self.spare_frame = done.release();
                self.framed -= 1;
            }
            if matches!(self.segments.front(), Some(Segment::Framed(_))) {
                self.activate_front();
            }
        }
        if self.segments.is_empty() {
            // Drained: the write buffer is reused from its start. The two
            // buffers are kept for reuse up to the retained size between
            // them, the frame going first: it is needed again only by the
            // next long body.
            self.filled = 0;
            if self.buf.len() + self.spare_frame.len() > self.retain {
                self.spare_frame = Vec::new();
            }
            if self.buf.len() > self.retain {
                self.buf = Vec::new();
            }
        }
    }
}

#[cfg(test)]
mod tests;
