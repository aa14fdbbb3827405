//! The zero-copy write queue: what a connection still owes its peer, as an
//! ordered list of segments, with no IO of its own. A segment is bytes
//! copied into the queue's buffer (consecutive copies merge into one
//! slice), a [`Bytes`](bytes::Bytes) or a ropey range sent from its own
//! memory, or a long body written a frame at a time as the socket drains.
//!
//! **Copy or share** is decided here and nowhere else, by the [`Policy`]: a
//! piece shorter than [`Policy::copy_below`] costs less copied than as an
//! iovec. **Memory**: a queue holds its unwritten copies and one frame
//! ([`WriteQueue::held`]); [`WriteQueue::footprint_after`] bounds a push
//! before it is made. The queue is a [`bytes::Buf`]: a partial write moves a
//! cursor, the rest waits by reference. Beside the write path, extras for
//! servers: memory, the [`Ledger`], buffers for a pool ([`Spare`]).
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

// The write path first: rustdoc lists `impl` blocks in module order.
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

/// A rope the queue can keep until it is written, owned and shareable
/// between threads: what [`WriteQueue::stream`] takes.
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
/// `range`, cut to it, until it breaks. Bytes, not `str`: a partial write may
/// stop inside a character. The writer, which walks on every `writev`,
/// passes [`Walk::LookUp`] so that a response costs at most its push's one
/// allocation.
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

/// Where a queue stood, for taking back what was pushed after it.
#[derive(Clone, Copy, Debug)]
struct Mark {
    pending: usize,
    copied_pending: usize,
    segments: usize,
    ends: usize,
    written: u64,
}

/// Pending output of one connection ([module documentation](self)): push
/// what a response is made of, mark its end, drain it into the socket.
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
/// q.head(&head).unwrap(); // written straight into the buffer, its values checked as they go
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
    /// All initialised and reused; `filled` ends what is queued in it.
    buf: Vec<u8>,
    filled: usize,
    /// Each keeps its own cursor.
    segments: VecDeque<Segment>,
    pending: usize,
    /// Of `pending`, bytes in the write buffer.
    copied_pending: usize,
    ledger: Ledger,
    retain: usize,
    policy: Policy,
    /// Lent to the framed segment at the front while it is written.
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
    /// Room for `n` more bytes at the end of the write buffer. The written
    /// front is reclaimed first, so a queue that never drains holds what is
    /// pending, not all it sent; growth is by a quarter, to stay close to it.
    #[inline]
    fn room(&mut self, n: usize) -> &mut [u8] {
        // Inlined: nearly every push fits the buffer as it is.
        if self.buf.len() < self.filled + n {
            self.make_room(n);
        }
        &mut self.buf[self.filled..self.filled + n]
    }

    #[cold]
    fn make_room(&mut self, n: usize) {
        self.compact();
        let need = self.filled + n;
        if self.buf.len() < need {
            let grown = need.max(self.buf.len() + self.buf.len() / 4).max(4096);
            self.buf.reserve_exact(grown - self.buf.len());
            self.buf.resize(grown, 0);
        }
    }

    /// Moves the unwritten copied bytes to the start of the write buffer.
    /// Copied segments lie in queue order, each from its first unwritten
    /// byte: the first one's start is where they begin.
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
    #[inline]
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

    /// Whether a buffer of `len` bytes asked to be shared
    /// ([`WriteQueue::share`]) is copied: when the policy says a copy is
    /// cheaper, and always when it is empty (a segment of no bytes would
    /// never be advanced past).
    ///
    /// ```
    /// use unflat::queue::WriteQueue;
    /// let q = WriteQueue::new();
    /// assert!(q.copies(0) && q.copies(16));
    /// assert!(!q.copies(1 << 20), "a megabyte goes as an iovec");
    /// ```
    #[inline]
    pub fn copies(&self, len: usize) -> bool {
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

    /// Where the queue stands now, to take back what is pushed after it
    /// ([`WriteQueue::marked`]).
    fn mark(&self) -> Mark {
        Mark {
            pending: self.pending,
            copied_pending: self.copied_pending,
            segments: self.segments.len(),
            ends: self.ledger.ends.len(),
            written: self.ledger.written(),
        }
    }

    /// Takes back everything pushed since `mark`. Nothing was written
    /// since (a mark lives within one push), so what was pushed after it
    /// is the back of the queue: whole segments, and the tail of the
    /// copied run the mark ended in — the last `copied` bytes of the write
    /// buffer, wherever a compaction moved them.
    #[cold]
    fn roll_back(&mut self, mark: Mark) {
        assert_eq!(
            self.ledger.written(),
            mark.written,
            "nothing written within a mark"
        );
        let mut copied = self.copied_pending - mark.copied_pending;
        self.ledger
            .taken_back(self.pending - mark.pending, mark.ends);
        self.filled -= copied;
        while self.segments.len() > mark.segments {
            match self.segments.pop_back() {
                Some(Segment::Copied { start, end }) => copied -= end - start,
                Some(Segment::Framed(mut framed)) => {
                    self.framed -= 1;
                    if self.segments.is_empty() {
                        // It was the front, lent the frame buffer.
                        self.spare_frame = framed.release();
                    }
                }
                _ => {}
            }
        }
        if copied > 0 {
            // The rest was appended to the run the mark ended in.
            match self.segments.back_mut() {
                Some(Segment::Copied { end, .. }) => *end -= copied,
                _ => unreachable!("copied bytes since the mark belong to a run"),
            }
        }
        self.pending = mark.pending;
        self.copied_pending = mark.copied_pending;
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

    /// Fills `dst` with iovecs for the pending bytes from the cursor on, and
    /// returns how many it filled. A framed segment ends the list: only its
    /// current frame is at hand.
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
        // One copied run, what a queue of short responses nearly always
        // holds: its iovec without the walk.
        if let (1, Some(&Segment::Copied { start, end }), Some(first)) =
            (self.segments.len(), self.segments.front(), dst.first_mut())
        {
            *first = IoSlice::new(&self.buf[start..end]);
            return 1;
        }
        let mut n = 0;
        for seg in &self.segments {
            if seg.iovecs(&self.buf, dst, &mut n).is_break() {
                break;
            }
        }
        n
    }

    /// Records that the first `n` pending bytes were written; the rest waits
    /// where it is.
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
        if self.pending == 0 && self.framed == 0 {
            // All written, and no frame to hand on: what a write of short
            // responses nearly always does.
            self.copied_pending = 0;
            // Nearly always one segment: popped, without `clear`'s walk.
            if self.segments.len() == 1 {
                self.segments.pop_back();
            } else {
                self.segments.clear();
            }
            n = 0;
        }
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
            // Drained: the buffers are kept up to the retained size between
            // them, the frame freed first (only a long body needs it).
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
