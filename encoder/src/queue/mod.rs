//! The zero-copy write queue: what a connection still owes its peer, as an
//! ordered list of segments, with no IO of its own.
//!
//! Five kinds of segment:
//!
//! - **copied** — bytes in the queue's own write buffer: response heads,
//!   text encoded by [`WriteQueue::encode`], and whatever the copy-or-share
//!   policy copies. Consecutive copied segments merge, so a head and a small
//!   body, or many small pipelined responses, are one contiguous slice;
//! - **shared** — a [`Bytes`] sent as an iovec at its own memory, never copied
//!   (the fix of the Deno write-up);
//! - **rope** — a byte range of a [`ropey::Rope`] sent as one iovec per chunk
//!   of its own; the queue holds a clone of the rope (an `Arc` increment),
//!   which keeps the chunks alive until they are written;
//! - **stream** — a rope encoded frame by frame as the socket drains
//!   ([`WriteQueue::stream`]): a large transcoded body costs the connection
//!   one frame of memory, not its whole encoded size;
//! - **rope frames** — the short chunks of a ropey range longer than a frame,
//!   copied a frame at a time as the socket drains, for the same reason.
//!
//! The queue (this file) keeps the write buffer and the segment list; the
//! response ledger is `ledger.rs`'s, the copy-or-share [`Policy`]
//! `policy.rs`'s, and the queue's tests are `tests.rs`'s. Each segment kind
//! keeps its own cursor (`segment.rs`), and a framed segment (`framed.rs`)
//! the frame it is written from. What the queue's buffers occupy, and may
//! grow to, is `footprint.rs`'s.
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
//! [`Policy`]: a contiguous piece — a [`Bytes`], or a chunk of a rope —
//! shorter than [`Policy::copy_below`] is copied behind what is queued
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
//! assert_eq!(q.pending_responses(), 0);
//! ```

mod footprint;
mod framed;
mod ledger;
mod policy;
mod segment;
mod spare;

use std::collections::VecDeque;
use std::io::IoSlice;
use std::ops::{ControlFlow, Range};
use std::sync::Arc;

use bytes::{Buf, Bytes};

use crate::encoding::{EncodeError, Encoding, Mode};
use crate::measure::{bound, plan_shaped};
use crate::resume::Encoder;
use crate::rope::{walk_ropey_chunks, Rope, Walk};
pub use footprint::{Push, Pushes};
use framed::Framed;
pub use policy::Policy;
use segment::Segment;
pub use spare::Spare;

/// Linux's `IOV_MAX`: the most slices one `writev` takes.
// Hidden: the server sizes its iovec array with it. A user needs no such
// constant: std's and tokio's `write_vectored` already cap one call at the
// system's limit, and `WriteQueue::write_to` passes 64 slices at a time.
#[doc(hidden)]
pub const IOV_MAX: usize = 1024;

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
/// assert_eq!(q.pending_responses(), 0);
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
    /// Bytes ever pushed and ever written: response ends are positions in
    /// this stream (the response ledger).
    pushed_total: u64,
    written_total: u64,
    response_ends: VecDeque<u64>,
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

impl WriteQueue {
    /// An empty queue with the [default policy](Policy::DEFAULT). Nothing is
    /// allocated until something is pushed.
    ///
    /// ```
    /// use bytes::Buf;
    /// use unflat::queue::{Policy, WriteQueue};
    /// let q = WriteQueue::new();
    /// assert_eq!(q.remaining(), 0);
    /// assert_eq!(q.footprint(), 0);
    /// assert_eq!(q.policy(), Policy::DEFAULT);
    /// ```
    pub fn new() -> WriteQueue {
        WriteQueue::with_policy(Policy::DEFAULT)
    }

    /// An empty queue that copies or shares by `policy`.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use unflat::queue::{Policy, WriteQueue};
    /// // Copy anything shorter than 1 KiB, share the rest.
    /// let mut q = WriteQueue::with_policy(Policy { copy_below: 1024, ..Policy::DEFAULT });
    /// q.share(&Bytes::from(vec![b'a'; 100]));  // copied
    /// q.share(&Bytes::from(vec![b'b'; 2000])); // sent from its own memory
    /// assert_eq!(q.copied_len(), 100);
    /// ```
    pub fn with_policy(policy: Policy) -> WriteQueue {
        WriteQueue {
            buf: Vec::new(),
            filled: 0,
            segments: VecDeque::new(),
            pending: 0,
            copied_pending: 0,
            pushed_total: 0,
            written_total: 0,
            response_ends: VecDeque::new(),
            retain: DEFAULT_RETAIN,
            policy,
            spare_frame: Vec::new(),
            framed: 0,
        }
    }

    /// The copy-or-share policy.
    ///
    /// ```
    /// use unflat::queue::{Policy, WriteQueue};
    /// assert_eq!(WriteQueue::new().policy().copy_below, 8 * 1024);
    /// assert_eq!(WriteQueue::with_policy(Policy::COPY_ALL).policy(), Policy::COPY_ALL);
    /// ```
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Sets how many bytes of buffers (the write buffer and the frame) an
    /// empty queue keeps for reuse; larger ones (grown by one large encoded
    /// body) are freed once drained.
    ///
    /// ```
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// q.set_retain(0); // an idle connection keeps no write buffer
    /// q.copy(b"HTTP/1.1 204 No Content\r\n\r\n");
    /// q.write_to(&mut std::io::sink()).unwrap();
    /// assert!(q.take_spare().is_some_and(|s| s.buffer_capacity() == 0), "freed once drained");
    /// ```
    pub fn set_retain(&mut self, bytes: usize) {
        self.retain = bytes;
    }

    /// Takes the frame buffer (what streamed segments are encoded into)
    /// out of a queue with no streamed segment queued, as
    /// [`WriteQueue::take_spare`] does the write buffer; `None` when a
    /// streamed segment is queued or the queue keeps no frame buffer.
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

    /// Gives a queue without a frame buffer `buffer` to encode streamed
    /// segments into; a queue that has one keeps its own. See
    /// [`WriteQueue::take_frame_buffer`] for an example.
    pub fn reuse_frame_buffer(&mut self, buffer: Vec<u8>) {
        if self.framed == 0 && self.spare_frame.capacity() == 0 {
            self.spare_frame = buffer;
        }
    }

    /// Of the bytes waiting, those held in the queue's own write buffer
    /// (the memory the queue costs beyond what it references).
    ///
    /// ```
    /// use bytes::{Buf, Bytes};
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// q.copy(b"HTTP/1.1 200 OK\r\n\r\n");
    /// q.share(&Bytes::from(vec![0; 100_000])); // long: not copied
    /// assert_eq!(q.copied_len(), 19);
    /// assert_eq!(q.remaining(), 19 + 100_000);
    /// ```
    pub fn copied_len(&self) -> usize {
        self.copied_pending
    }

    /// Bytes the queue holds of its own for what is pending: copied and
    /// encoded bytes not yet written, and the frame buffer while a framed
    /// segment (a long stream, or a rope's copied chunks) is queued. What a
    /// connection costs beyond the memory it shares, and what a server
    /// bounds across its connections. The write buffer's allocation is at
    /// most a quarter above the bytes it holds, or the retained size
    /// ([`WriteQueue::set_retain`]) once drained.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bytes::{Buf, Bytes};
    /// use unflat::queue::{Policy, SharedRope, WriteQueue};
    /// use unflat::{Encoding, Mode, Utf16};
    ///
    /// let mut q = WriteQueue::new();
    /// q.share(&Bytes::from(vec![0; 1 << 20])); // shared: its owner's memory
    /// assert_eq!(q.held(), 0);
    /// let euros: SharedRope = Arc::new(Utf16(vec![0x20AC; 1 << 20])); // 3 MiB as UTF-8
    /// q.stream(&euros, Encoding::Utf8, Mode::Strict).unwrap();
    /// assert_eq!(q.held(), Policy::DEFAULT.frame, "one frame, not the body");
    /// assert_eq!(q.remaining(), (1 << 20) + 3 * (1 << 20));
    /// ```
    pub fn held(&self) -> usize {
        let framing = if self.framed > 0 {
            self.frame_size()
        } else {
            0
        };
        self.copied_pending + framing
    }

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
        self.pushed_total += n as u64;
    }

    /// Encodes `rope` straight into the write buffer (no intermediate flat
    /// string) and queues it. Returns the bytes queued; on error nothing is
    /// queued.
    ///
    /// The whole encoded text is held in the write buffer until written;
    /// for a body that may be long, [`WriteQueue::stream`] bounds that to a
    /// frame.
    ///
    /// ```
    /// use unflat::queue::WriteQueue;
    /// use unflat::{Concat, EncodeError, Encoding, Latin1, Mode, Utf16};
    ///
    /// let mut q = WriteQueue::new();
    /// let rope = Concat::new([&"price: ", &Latin1(b"12 "), &Utf16(&[0x20AC])]);
    /// assert_eq!(q.encode(&rope, Encoding::Utf8, Mode::Strict), Ok(13));
    /// // Strict latin1 cannot hold the euro sign: nothing is queued.
    /// assert!(matches!(
    ///     q.encode(&rope, Encoding::Latin1, Mode::Strict),
    ///     Err(EncodeError::Unencodable { code_point: 0x20AC, .. })
    /// ));
    /// let mut out = Vec::new();
    /// q.write_to(&mut out).unwrap();
    /// assert_eq!(out, "price: 12 €".as_bytes());
    /// ```
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
        let dst = self.room(bound(shape, encoding));
        let n = crate::encode::write_shaped(rope, shape, encoding, mode, dst)?;
        self.commit(n);
        Ok(n)
    }

    /// Queues `rope` in `encoding`, bounding what it costs in memory: text
    /// that fits in one frame ([`Policy::frame`]) is encoded into the write
    /// buffer at once, as [`WriteQueue::encode`] does; longer text is
    /// encoded a frame at a time, as the socket takes the previous frame,
    /// from the rope the queue keeps (a clone of the `Arc`). Returns the
    /// encoded size; on error (strict mode, checked before anything is
    /// queued) nothing is queued.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bytes::Buf;
    /// use unflat::queue::{SharedRope, WriteQueue};
    /// use unflat::{Encoding, Mode, Utf16};
    ///
    /// let text: SharedRope = Arc::new(Utf16(vec![0x20AC; 100_000])); // 100 000 euro signs
    /// let mut q = WriteQueue::new();
    /// assert_eq!(q.stream(&text, Encoding::Utf8, Mode::Strict), Ok(300_000));
    /// assert!(q.chunk().len() <= 64 * 1024, "only the current frame is encoded");
    /// let mut out = Vec::new();
    /// q.write_to(&mut out).unwrap();
    /// assert_eq!(out, "€".repeat(100_000).as_bytes());
    /// ```
    pub fn stream(
        &mut self,
        rope: &SharedRope,
        encoding: Encoding,
        mode: Mode,
    ) -> Result<usize, EncodeError> {
        let shape = rope.shape();
        let frame = self.frame_size();
        if bound(shape, encoding) <= frame {
            return self.encode(&**rope, encoding, mode);
        }
        let plan = plan_shaped(&**rope, shape, encoding, mode)?;
        let len = plan.size();
        if len <= frame {
            let dst = self.room(len);
            let n = crate::encode::write_planned(&**rope, plan, dst)?;
            self.commit(n);
            return Ok(n);
        }
        self.push_framed(Framed::encode(rope.clone(), Encoder::from_plan(&plan), len));
        Ok(len)
    }

    /// Bytes per frame: the policy's, but never below what always makes
    /// progress.
    fn frame_size(&self) -> usize {
        self.policy.frame.max(Encoder::MIN_DST)
    }

    /// Copies `bytes` into the write buffer and queues them. Consecutive
    /// copies are one contiguous run, one iovec.
    ///
    /// ```
    /// use bytes::Buf;
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// q.copy(b"HTTP/1.1 204 No Content\r\n");
    /// q.copy(b"\r\n");
    /// assert_eq!(q.chunk(), b"HTTP/1.1 204 No Content\r\n\r\n");
    /// ```
    pub fn copy(&mut self, bytes: &[u8]) {
        self.room(bytes.len()).copy_from_slice(bytes);
        self.commit(bytes.len());
    }

    /// Queues `bytes` as an iovec at its own memory — keeping a clone, a
    /// reference-count increment, until it is written — or copies them when
    /// the policy says a copy is cheaper ([`Policy::copy_below`]); a copied
    /// buffer's count is never touched, so a small body shared by every
    /// worker costs no contended atomic.
    ///
    /// ```
    /// use std::io::IoSlice;
    /// use bytes::{Buf, Bytes};
    /// use unflat::queue::WriteQueue;
    ///
    /// let body = Bytes::from(vec![b'x'; 64 * 1024]);
    /// let mut q = WriteQueue::new();
    /// q.copy(b"HTTP/1.1 200 OK\r\nContent-Length: 65536\r\n\r\n");
    /// q.share(&body);
    /// let mut iov = [IoSlice::new(&[]); 4];
    /// assert_eq!(q.chunks_vectored(&mut iov), 2);
    /// assert_eq!(iov[1].as_ptr(), body.as_ptr(), "the body's own memory");
    /// ```
    pub fn share(&mut self, bytes: &Bytes) {
        if self.copies(bytes.len()) {
            self.copy(bytes);
            return;
        }
        self.grew(bytes.len(), 0);
        self.segments.push_back(Segment::Shared(bytes.clone()));
    }

    /// Whether a buffer of `len` bytes asked to be shared is copied: when
    /// the policy says a copy is cheaper, and always when it is empty (a
    /// segment of no bytes would never be advanced past).
    fn copies(&self, len: usize) -> bool {
        len < self.policy.copy_below || len == 0
    }

    /// Queues the bytes `range` of `rope`'s UTF-8 text: chunks long enough
    /// to pay for an iovec ([`Policy::copy_below`]) are sent from the rope's
    /// own memory (the queue keeps a clone of the rope until they are
    /// written), runs of shorter ones are copied — a frame at a time as the
    /// socket drains when the range is longer than a frame. The range may
    /// cut a character: the queue moves bytes.
    ///
    /// ```
    /// use unflat::queue::WriteQueue;
    /// let text = ropey::Rope::from_str(&"unflat ".repeat(10_000));
    /// let mut q = WriteQueue::new();
    /// q.share_rope(&text, 7..13); // "unflat": a short range is copied
    /// q.share_rope(&text, 0..text.len_bytes());
    /// let mut out = Vec::new();
    /// q.write_to(&mut out).unwrap();
    /// assert_eq!(out.len(), 6 + 70_000);
    /// assert!(out.starts_with(b"unflatunflat unflat "));
    /// ```
    ///
    /// # Panics
    /// If `range` is not within `0..=rope.len_bytes()` or runs backwards.
    pub fn share_rope(&mut self, rope: &ropey::Rope, range: Range<usize>) {
        assert!(
            range.start <= range.end && range.end <= rope.len_bytes(),
            "byte range {range:?} is outside the rope's {} bytes",
            rope.len_bytes()
        );
        let min = self.policy.copy_below;
        let walk = Walk::for_len(range.len());
        // A range longer than a frame has its short chunks copied a frame at
        // a time as the socket drains, so that the connection never holds
        // more than a frame of it.
        let framed = range.len() > self.frame_size();
        // One walk: short chunks are copied as they come (or gathered into
        // runs copied later, frame by frame); a run of long ones becomes one
        // segment, which the writer walks again.
        let mut at = range.start;
        let mut shared: Option<Range<usize>> = None;
        let mut copied: Option<Range<usize>> = None;
        let _ = chunk_bytes(rope, range, walk, |chunk| {
            let end = at + chunk.len();
            if chunk.len() >= min {
                if let Some(run) = copied.take() {
                    self.push_framed(Framed::copy(rope.clone(), run));
                }
                shared.get_or_insert(at..at).end = end;
            } else {
                if let Some(run) = shared.take() {
                    self.push_rope(rope, run);
                }
                if framed {
                    copied.get_or_insert(at..at).end = end;
                } else {
                    self.copy(chunk);
                }
            }
            at = end;
            ControlFlow::Continue(())
        });
        if let Some(run) = shared {
            self.push_rope(rope, run);
        }
        if let Some(run) = copied {
            self.push_framed(Framed::copy(rope.clone(), run));
        }
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

    /// Writes everything pending to a blocking writer, one `write_vectored`
    /// call per batch of up to 64 iovecs, resuming at the cursor after each
    /// partial write. Returns the bytes written. For blocking sockets, and
    /// for tests and fuzzers that collect the output in a `Vec<u8>`.
    ///
    /// ```
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// q.copy(b"hello, ");
    /// q.copy(b"world");
    /// let mut socket = Vec::new(); // any io::Write: a TcpStream, a file
    /// assert_eq!(q.write_to(&mut socket).unwrap(), 12);
    /// assert_eq!(socket, b"hello, world");
    /// ```
    ///
    /// # Errors
    /// What the writer returns; `WriteZero` if it takes nothing. The bytes
    /// not written stay queued.
    pub fn write_to<W: std::io::Write + ?Sized>(&mut self, w: &mut W) -> std::io::Result<usize> {
        let mut total = 0;
        while self.has_remaining() {
            let mut iov = [IoSlice::new(&[]); 64];
            let n = self.chunks_vectored(&mut iov);
            let written = w.write_vectored(&iov[..n])?;
            if written == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.advance(written);
            total += written;
        }
        Ok(total)
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
    /// assert_eq!(q.pending_responses(), 1);
    /// q.advance(8);
    /// assert_eq!(q.remaining(), 0);
    /// assert_eq!(q.pending_responses(), 0);
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
        self.written_total += n as u64;
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
        self.pop_written_responses();
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
