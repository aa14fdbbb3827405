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
//! The queue (this file) keeps the write buffer, the segment list and the
//! response ledger; each segment kind keeps its own cursor (`segment.rs`),
//! and a framed segment (`framed.rs`) the frame it is written from. What
//! the queue's buffers occupy, and may grow to, is `footprint.rs`'s.
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
//! (docs/design.md has the measurements).
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
mod segment;

use std::collections::VecDeque;
use std::io::IoSlice;
use std::ops::{ControlFlow, Range};
use std::sync::Arc;

use bytes::{Buf, Bytes};

use crate::encoding::{EncodeError, Encoding, Mode};
use crate::measure::{bound, plan_shaped};
use crate::resume::Encoder;
use crate::rope::{walk_ropey_chunks, Rope, Walk};
use framed::Framed;
use segment::Segment;

/// Linux's `IOV_MAX`: the most slices one `writev` takes.
pub const IOV_MAX: usize = 1024;

/// How much write buffer an empty queue keeps for reuse by default.
pub const DEFAULT_RETAIN: usize = 256 * 1024;

/// When the queue copies bytes it is asked to share, and how it streams
/// large text. See the [module documentation](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// A contiguous piece — a [`Bytes`], or a chunk of a rope — shorter
    /// than this is copied into the write buffer; a longer one is sent as an
    /// iovec at its own memory.
    pub copy_below: usize,
    /// Text whose encoded form may be longer than this is encoded frame by
    /// frame, in frames of this many bytes ([`WriteQueue::stream`]); at least
    /// [`Encoder::MIN_DST`].
    pub frame: usize,
}

impl Policy {
    /// Measured on the development machine (docs/design.md): a contiguous
    /// body was as cheap or cheaper copied at 1 and 4 KiB and shared at 16
    /// and 100 KiB, and a rope of ~1 KiB chunks cheaper copied at every
    /// length; hence 8 KiB. Frames of 64 KiB.
    pub const DEFAULT: Policy = Policy {
        copy_below: 8 * 1024,
        frame: 64 * 1024,
    };

    /// Never copy: every buffer and chunk is shared (for tests and
    /// measurements).
    pub const SHARE_ALL: Policy = Policy {
        copy_below: 0,
        ..Policy::DEFAULT
    };

    /// Always copy (for tests and measurements).
    pub const COPY_ALL: Policy = Policy {
        copy_below: usize::MAX,
        ..Policy::DEFAULT
    };
}

impl Default for Policy {
    fn default() -> Self {
        Policy::DEFAULT
    }
}

/// A rope the queue can keep until it is written: owned, and shareable
/// between threads. Cloning one is an `Arc` increment.
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
    pub fn new() -> WriteQueue {
        WriteQueue::with_policy(Policy::DEFAULT)
    }

    /// An empty queue that copies or shares by `policy`.
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
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Sets how many bytes of buffers (the write buffer and the frame) an
    /// empty queue keeps for reuse; larger ones (grown by one large encoded
    /// body) are freed once drained.
    pub fn set_retain(&mut self, bytes: usize) {
        self.retain = bytes;
    }

    /// Of the bytes waiting, those held in the queue's own write buffer
    /// (the memory the queue costs beyond what it references).
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
    pub fn held(&self) -> usize {
        let framing = if self.framed > 0 {
            self.frame_size()
        } else {
            0
        };
        self.copied_pending + framing
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

    /// Copies `bytes` into the write buffer and queues them.
    pub fn copy(&mut self, bytes: &[u8]) {
        self.room(bytes.len()).copy_from_slice(bytes);
        self.commit(bytes.len());
    }

    /// Queues `bytes` as an iovec at its own memory — keeping a clone, a
    /// reference-count increment, until it is written — or copies them when
    /// the policy says a copy is cheaper ([`Policy::copy_below`]); a copied
    /// buffer's count is never touched, so a small body shared by every
    /// worker costs no contended atomic.
    pub fn share(&mut self, bytes: &Bytes) {
        // An empty buffer queues nothing: a segment of no bytes would never
        // be advanced past.
        if bytes.len() < self.policy.copy_below || bytes.is_empty() {
            self.copy(bytes);
            return;
        }
        self.grew(bytes.len(), 0);
        self.segments.push_back(Segment::Shared(bytes.clone()));
    }

    /// Queues the bytes `range` of `rope`'s UTF-8 text: chunks long enough
    /// to pay for an iovec ([`Policy::copy_below`]) are sent from the rope's
    /// own memory (the queue keeps a clone of the rope until they are
    /// written), runs of shorter ones are copied — a frame at a time as the
    /// socket drains when the range is longer than a frame. The range may
    /// cut a character: the queue moves bytes.
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

    /// Marks the end of a response: everything pushed so far belongs to it
    /// or to earlier ones. A response whose bytes are all written already
    /// (or that has none) is not pending.
    pub fn end_response(&mut self) {
        if self.pushed_total > self.written_total {
            self.response_ends.push_back(self.pushed_total);
        }
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
    /// at most [`IOV_MAX`]). A framed segment ends the list: only its
    /// current frame is at hand, and the segments behind it wait.
    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for seg in &self.segments {
            if seg.iovecs(&self.buf, dst, &mut n).is_break() {
                break;
            }
        }
        n
    }

    /// Records that the first `n` pending bytes were written.
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
        while self
            .response_ends
            .front()
            .is_some_and(|&end| end <= self.written_total)
        {
            self.response_ends.pop_front();
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
mod tests {
    use super::*;

    /// Drains `q` as a socket would that takes at most `step` bytes per
    /// call and at most `iov_max` iovecs, checking on every call that
    /// `chunk()` is the first iovec.
    fn drain_in_steps(q: &mut WriteQueue, step: usize, iov_max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while q.has_remaining() {
            let mut iov = vec![IoSlice::new(&[]); iov_max];
            let n = q.chunks_vectored(&mut iov);
            assert!(n > 0);
            assert_eq!(q.chunk(), &*iov[0]);
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

    /// Every iovec `chunks_vectored` gives for the whole queue.
    fn iovecs(q: &WriteQueue) -> Vec<Vec<u8>> {
        let mut iov = vec![IoSlice::new(&[]); IOV_MAX];
        let n = q.chunks_vectored(&mut iov);
        iov[..n].iter().map(|s| s.to_vec()).collect()
    }

    /// The byte offsets where `rope`'s chunks begin.
    fn chunk_starts(rope: &ropey::Rope) -> Vec<usize> {
        let mut at = 0;
        rope.chunks()
            .map(|c| {
                let start = at;
                at += c.len();
                start
            })
            .collect()
    }

    #[test]
    fn partial_writes_resume_in_order_across_every_segment_kind() {
        let text: String = (0..20_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let rope = ropey::Rope::from_str(&text);
        let big = Bytes::from(vec![7u8; 1000]);
        for policy in [Policy::DEFAULT, Policy::SHARE_ALL, Policy::COPY_ALL] {
            for step in [1, 7, 64, 1000, 100_000] {
                for iov_max in [1, 3, 64] {
                    let mut q = WriteQueue::with_policy(policy);
                    q.copy(b"head1|");
                    q.share(&big);
                    q.share(&Bytes::from_static(b"tiny"));
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
                    assert_eq!(q.remaining(), expected.len());
                    assert_eq!(
                        drain_in_steps(&mut q, step, iov_max),
                        expected,
                        "{policy:?}, step {step}, iov {iov_max}"
                    );
                    assert_eq!(q.pending_responses(), 0);
                    assert_eq!(q.copied_len(), 0);
                }
            }
        }
    }

    #[test]
    fn rope_ranges_that_cut_characters_are_written_byte_for_byte() {
        // Two-, three- and four-byte characters: every partial write and
        // every range boundary below falls inside some character.
        let text = "é€😀x".repeat(3000);
        let rope = ropey::Rope::from_str(&text);
        let bytes = text.as_bytes();
        for policy in [Policy::DEFAULT, Policy::SHARE_ALL, Policy::COPY_ALL] {
            for (start, end) in [(0, bytes.len()), (1, bytes.len() - 1), (3, 5), (2, 9001)] {
                for step in [1, 3, 1000] {
                    let mut q = WriteQueue::with_policy(policy);
                    q.share_rope(&rope, start..end);
                    assert_eq!(
                        drain_in_steps(&mut q, step, 16),
                        &bytes[start..end],
                        "{policy:?} {start}..{end} step {step}"
                    );
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "outside the rope")]
    fn a_rope_range_past_the_end_is_refused() {
        let rope = ropey::Rope::from_str("abc");
        WriteQueue::new().share_rope(&rope, 1..4);
    }

    #[test]
    fn short_chunks_are_copied_and_long_ones_shared() {
        let text = "r".repeat(10_000);
        let rope = ropey::Rope::from_str(&text);
        let starts = chunk_starts(&rope);
        assert!(starts.len() > 4, "a rope of several chunks");
        let (from, to) = (starts[1] - 10, starts[3] + 10);
        let policy = Policy {
            copy_below: 256,
            ..Policy::DEFAULT
        };
        let mut q = WriteQueue::with_policy(policy);
        q.copy(b"head|");
        q.share_rope(&rope, from..to);
        // The head and the 10-byte tail of chunk 0 are one copied slice,
        // chunks 1 and 2 are shared, the 10-byte head of chunk 3 is copied.
        let iov = iovecs(&q);
        assert_eq!(
            iov.len(),
            4,
            "{:?}",
            iov.iter().map(Vec::len).collect::<Vec<_>>()
        );
        assert_eq!(iov[0].len(), 5 + 10);
        assert_eq!(iov[1].len(), starts[2] - starts[1]);
        assert_eq!(iov[3].len(), 10);
        assert_eq!(q.copied_len(), 5 + 20);
        // Shared chunks point into the rope.
        let chunk1 = rope.chunks().nth(1).unwrap().as_bytes();
        assert_eq!(iov[1].as_slice(), chunk1);
        let mut iov = [IoSlice::new(&[]); 4];
        q.chunks_vectored(&mut iov);
        assert_eq!(iov[1].as_ptr(), chunk1.as_ptr());
    }

    #[test]
    fn short_buffers_and_ranges_are_copied_behind_the_head() {
        let mut q = WriteQueue::with_policy(Policy {
            copy_below: 100,
            ..Policy::DEFAULT
        });
        let rope = ropey::Rope::from_str(&"x".repeat(5000));
        q.copy(b"HTTP/1.1 200 OK\r\n\r\n");
        q.share(&Bytes::from_static(b"small body"));
        q.share_rope(&rope, 10..109);
        q.copy(b"HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(iovecs(&q).len(), 1);
        assert_eq!(q.copied_len(), q.remaining());
        q.share(&Bytes::from(vec![1; 100]));
        q.share_rope(&rope, 0..100);
        assert_eq!(iovecs(&q).len(), 3);
    }

    /// Two-byte text with surrogate pairs, as a shared rope, and its UTF-8.
    fn two_byte_text() -> (SharedRope, Vec<u8>) {
        let text = "a€😀é".repeat(5000);
        let units: Vec<u16> = text.encode_utf16().collect();
        (Arc::new(crate::Utf16(units)), text.into_bytes())
    }

    #[test]
    fn a_stream_is_written_frame_by_frame_between_other_segments() {
        let (rope, utf8) = two_byte_text();
        for frame in [4, 7, 1000, 65536] {
            for (step, iov_max) in [(1, 4), (5, 2), (999, 64), (1 << 20, 64)] {
                let mut q = WriteQueue::with_policy(Policy {
                    frame,
                    ..Policy::DEFAULT
                });
                q.copy(b"head|");
                assert_eq!(
                    q.stream(&rope, Encoding::Utf8, Mode::Strict),
                    Ok(utf8.len())
                );
                q.end_response();
                q.copy(b"|next");
                q.stream(&rope, Encoding::Utf8, Mode::Strict).unwrap();
                q.end_response();
                // Memory: text longer than a frame is never held whole (only
                // the frame buffer holds any of it); shorter text is copied.
                if utf8.len() > frame {
                    assert_eq!(q.copied_len(), 10);
                } else {
                    assert_eq!(q.copied_len(), 10 + 2 * utf8.len());
                }
                let mut expected = b"head|".to_vec();
                expected.extend_from_slice(&utf8);
                expected.extend_from_slice(b"|next");
                expected.extend_from_slice(&utf8);
                assert_eq!(q.remaining(), expected.len());
                let out = drain_in_steps(&mut q, step, iov_max);
                assert!(
                    out == expected,
                    "frame {frame}, step {step}: output differs"
                );
                assert!(q.spare_frame.len() <= frame.max(Encoder::MIN_DST));
                assert_eq!(q.pending_responses(), 0);
            }
        }
    }

    #[test]
    fn short_text_is_encoded_at_once_and_refusals_queue_nothing() {
        let mut q = WriteQueue::new();
        let short: SharedRope = Arc::new(crate::Latin1(b"caf\xe9".to_vec()));
        assert_eq!(q.stream(&short, Encoding::Utf8, Mode::Strict), Ok(5));
        assert_eq!(q.copied_len(), 5);
        let (long, _) = two_byte_text();
        let err = q.stream(&long, Encoding::Latin1, Mode::Strict);
        assert!(
            matches!(err, Err(EncodeError::Unencodable { index: 1, .. })),
            "{err:?}"
        );
        assert_eq!(q.remaining(), 5);
        // Buf helpers drain a stream like any other segment.
        q.stream(&long, Encoding::Utf16Le, Mode::Strict).unwrap();
        let all = q.copy_to_bytes(q.remaining());
        assert_eq!(&all[..5], "café".as_bytes());
        assert_eq!(all.len(), 5 + 2 * "a€😀é".encode_utf16().count() * 5000);
    }

    #[test]
    fn buf_laws_hold_at_every_cursor_position() {
        let rope = ropey::Rope::from_str(&"é".repeat(2000));
        let mut q = WriteQueue::with_policy(Policy::SHARE_ALL);
        q.copy(b"head");
        q.share(&Bytes::from(vec![b's'; 300]));
        q.share_rope(&rope, 1..3001);
        q.copy(b"tail");
        let expected: Vec<u8> = iovecs(&q).concat();
        let total = q.remaining();
        assert_eq!(expected.len(), total);
        // Advance by every amount from every position: what remains is
        // always the suffix of the whole, and remaining() its length.
        for step in [1, 3, 299, 4096] {
            let mut q2 = WriteQueue::with_policy(Policy::SHARE_ALL);
            q2.copy(b"head");
            q2.share(&Bytes::from(vec![b's'; 300]));
            q2.share_rope(&rope, 1..3001);
            q2.copy(b"tail");
            let mut done = 0;
            while q2.has_remaining() {
                assert_eq!(q2.remaining(), total - done);
                assert_eq!(iovecs(&q2).concat(), &expected[done..]);
                let k = step.min(q2.remaining());
                q2.advance(k);
                done += k;
            }
            assert_eq!(q2.chunk(), b"");
            assert_eq!(q2.chunks_vectored(&mut [IoSlice::new(&[])]), 0);
        }
        // `Buf`'s own helpers work on it.
        assert_eq!(q.copy_to_bytes(total), expected);
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
        let mut q = WriteQueue::with_policy(Policy::SHARE_ALL);
        q.copy(b"head|");
        q.share(&Bytes::from(vec![b'x'; 100]));
        let mut w = Trickle(Vec::new(), 0);
        assert_eq!(q.write_to(&mut w).unwrap(), 105);
        assert_eq!(&w.0[..5], b"head|");
        assert!(w.0[5..].iter().all(|&b| b == b'x'));
        // The default `write_vectored` writes the first slice only: one call
        // for the head, then one per 7 bytes of the body.
        assert_eq!(w.1, 1 + 15);
        assert!(!q.has_remaining());
    }

    #[test]
    fn empty_pushes_queue_nothing() {
        let mut q = WriteQueue::with_policy(Policy::SHARE_ALL);
        let rope = ropey::Rope::from_str("abc");
        q.share(&Bytes::new());
        q.share_rope(&rope, 1..1);
        q.copy(b"");
        q.encode("", Encoding::Utf8, Mode::Strict).unwrap();
        let empty: SharedRope = Arc::new(String::new());
        q.stream(&empty, Encoding::Utf8, Mode::Strict).unwrap();
        assert!(!q.has_remaining());
        assert_eq!(q.chunks_vectored(&mut [IoSlice::new(&[]); 4]), 0);
        assert!(q.segments.is_empty());
    }

    #[test]
    fn a_response_with_nothing_left_to_write_is_not_pending() {
        let mut q = WriteQueue::new();
        q.end_response();
        assert_eq!(q.pending_responses(), 0);
        q.copy(b"abc");
        q.advance(3);
        q.end_response();
        assert_eq!(q.pending_responses(), 0);
        q.copy(b"de");
        q.end_response();
        assert_eq!(q.pending_responses(), 1);
        q.advance(2);
        assert_eq!(q.pending_responses(), 0);
    }

    #[test]
    fn a_rope_range_longer_than_a_frame_is_copied_a_frame_at_a_time() {
        let text = "é€😀x".repeat(20_000);
        let rope = ropey::Rope::from_str(&text);
        let bytes = text.as_bytes();
        let sizes: Vec<usize> = rope.chunks().map(str::len).collect();
        let mid = sizes[sizes.len() / 2];
        // Every chunk copied, then some shared (those of `mid` bytes and up)
        // between copied runs.
        for copy_below in [usize::MAX, mid] {
            for frame in [4, 1000, 4096] {
                let policy = Policy { copy_below, frame };
                for (start, end) in [(0, bytes.len()), (3, bytes.len() - 2)] {
                    let mut q = WriteQueue::with_policy(policy);
                    q.copy(b"head|");
                    q.share_rope(&rope, start..end);
                    q.end_response();
                    q.copy(b"|next");
                    // Nothing of the rope is held but one frame.
                    assert_eq!(q.copied_len(), 10);
                    assert!(q.held() <= 10 + frame.max(Encoder::MIN_DST));
                    let mut expected = b"head|".to_vec();
                    expected.extend_from_slice(&bytes[start..end]);
                    expected.extend_from_slice(b"|next");
                    let out = drain_in_steps(&mut q, 777, 16);
                    assert!(out == expected, "{policy:?} {start}..{end}");
                    assert_eq!(q.held(), 0);
                }
            }
        }
    }

    #[test]
    fn a_queue_that_never_drains_holds_what_is_pending_not_what_it_sent() {
        let mut q = WriteQueue::new();
        let block = [7u8; 1000];
        q.copy(&block);
        for _ in 0..10_000 {
            // The peer takes all but a few bytes of what is queued, and a
            // new response comes: the queue is never empty.
            q.copy(&block);
            q.advance(q.remaining() - 3);
            assert!(q.has_remaining());
        }
        assert_eq!(q.remaining(), 3);
        assert!(q.buf.len() <= 8 * 1024, "{} bytes held", q.buf.len());
        assert_eq!(q.chunk(), &[7, 7, 7]);
    }

    #[test]
    fn a_drained_queue_keeps_its_buffers_up_to_the_retained_size() {
        let mut q = WriteQueue::new();
        q.set_retain(8 * 1024);
        q.copy(&[1; 4096]);
        q.advance(4096);
        assert!(q.buf.len() >= 4096, "kept for reuse");
        q.copy(&[2; 20_000]);
        q.advance(20_000);
        assert!(q.buf.is_empty(), "larger than the retained size: freed");
        assert_eq!(q.written_total(), 24_096);
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
