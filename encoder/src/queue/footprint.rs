//! What a queue's own buffers cost in memory — the write buffer, the one
//! frame buffer, its two lists; shared bodies are their owners' — and what a
//! push may add, so that a server refuses a response before it grows past a
//! bound rather than after.

use std::mem::size_of;

use super::segment::Segment;
use super::{SharedRope, WriteQueue};
use crate::encoding::Encoding;
use crate::measure::bound;
use crate::rope::Rope;

/// The longest chunk of a ropey rope (a leaf holds at most 984 bytes):
/// above it, the copy threshold shares no chunk.
const ROPEY_CHUNK_MOST: usize = 1024;

/// The shortest chunk of a ropey rope but its first and last, at least:
/// it bounds how often a range alternates between shared and copied runs.
const ROPEY_CHUNK_LEAST: usize = 256;

/// A push, described rather than made, for [`WriteQueue::pushes`]: what the
/// queue would occupy for it is decided by the same rules as the push.
///
/// ```
/// use bytes::Bytes;
/// use unflat::queue::{Push, Pushes, WriteQueue};
/// let q = WriteQueue::new();
/// // Shorter than the copy threshold (8 KiB by default): copied.
/// let copied = q.pushes(Push::Share(100));
/// assert_eq!((copied.copied, copied.shares), (100, false));
/// // Longer: an iovec at its own memory, nothing copied.
/// let shared = q.pushes(Push::Share(1 << 20));
/// assert_eq!((shared.copied, shared.shares), (0, true));
/// ```
#[derive(Clone, Copy)]
pub enum Push<'a> {
    /// [`WriteQueue::copy`] of this many bytes.
    Copy(usize),
    /// [`WriteQueue::share`] of a buffer of this many bytes.
    Share(usize),
    /// [`WriteQueue::share_rope`] of a range of this many bytes.
    ShareRope(usize),
    /// [`WriteQueue::stream`] of `rope` in `encoding`, `len` bytes encoded.
    Stream {
        /// The text.
        rope: &'a SharedRope,
        /// Its encoding on the wire.
        encoding: Encoding,
        /// Its encoded length.
        len: usize,
    },
}

/// What a caller is about to push, for [`WriteQueue::footprint_after`]
/// (encoding counts its worst case, [`crate::storage_size`]).
///
/// ```
/// use unflat::queue::Pushes;
/// let head_and_small_body = Pushes { copied: 300, segments: 1, ..Pushes::default() };
/// let long_stream = Pushes { framed: true, ..Pushes::default() };
/// # let _ = (head_and_small_body, long_stream);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pushes {
    /// Bytes copied or encoded into the write buffer, in all.
    pub copied: usize,
    /// Whether a framed segment is among the pushes.
    pub framed: bool,
    /// Segments the pushes add, at most.
    pub segments: usize,
    /// Whether the queue keeps a reference to memory pushed: its owner must
    /// keep it alive until the queue has written past it.
    pub shares: bool,
}

impl std::fmt::Debug for Push<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Push::Copy(len) => write!(f, "Copy({len})"),
            Push::Share(len) => write!(f, "Share({len})"),
            Push::ShareRope(len) => write!(f, "ShareRope({len})"),
            Push::Stream {
                rope,
                encoding,
                len,
            } => write!(f, "Stream({:?}, {encoding:?}, {len})", rope.shape()),
        }
    }
}

impl Pushes {
    /// These pushes, then `next`.
    pub fn then(self, next: Pushes) -> Pushes {
        Pushes {
            copied: self.copied + next.copied,
            framed: self.framed || next.framed,
            segments: self.segments + next.segments,
            shares: self.shares || next.shares,
        }
    }
}

/// **Memory**, for a server that bounds what its connections hold: what a
/// queue holds and occupies now, and will once a response is pushed; asked
/// first, they let a server refuse it rather than grow past its limit:
///
/// ```
/// use bytes::Bytes;
/// use unflat::queue::{Push, WriteQueue};
///
/// const LIMIT: usize = 64 * 1024; // what one connection's buffers may occupy
/// let head = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n";
/// let body = Bytes::from(vec![b'x'; 100_000]);
/// let mut q = WriteQueue::new();
/// let pushes = q.pushes(Push::Copy(head.len())).then(q.pushes(Push::Share(body.len())));
/// let after = q.footprint_after(pushes);
/// assert!(after <= LIMIT, "within the limit: queued (else a 503)");
/// q.reserve(pushes.copied);
/// q.copy(head);
/// q.share(&body);
/// q.end_response();
/// assert!(q.footprint() <= after);
/// assert_eq!(q.held(), head.len(), "the body is its owner's memory, shared");
/// ```
impl WriteQueue {
    /// Bytes the queue holds of its own for what is pending: copied bytes
    /// not yet written, and the frame buffer while a framed segment is
    /// queued — what a connection costs beyond the memory it shares.
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

    /// Of the bytes waiting, those in the queue's own write buffer.
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

    /// What `push` would add to the queue, for
    /// [`WriteQueue::footprint_after`], decided by the push's own rules, so
    /// that a caller keeps no copy of them; join pushes with [`Pushes::then`].
    #[inline]
    pub fn pushes(&self, push: Push<'_>) -> Pushes {
        let frame = self.frame_size();
        // A copy joins the copied run before it, or begins one.
        let copy = |copied| Pushes {
            copied,
            framed: false,
            segments: 1,
            shares: false,
        };
        match push {
            Push::Copy(len) => copy(len),
            Push::Share(len) if self.copies(len) => copy(len),
            Push::Share(_) => Pushes {
                copied: 0,
                framed: false,
                segments: 1,
                shares: true,
            },
            Push::ShareRope(len) => Pushes {
                copied: if len > frame { 0 } else { len },
                framed: len > frame,
                // Runs alternate between shared and copied only when some
                // chunks are long enough to share.
                segments: if self.policy.copy_below > ROPEY_CHUNK_MOST {
                    1
                } else {
                    len / ROPEY_CHUNK_LEAST + 2
                },
                // Copied whole at once only when no chunk is long enough to
                // share and the range fits a frame.
                shares: len > frame || self.policy.copy_below <= ROPEY_CHUNK_MOST,
            },
            // As `stream` decides: at once into room for the worst case
            // when that fits a frame, else into room for the exact size
            // when that does, else framed.
            Push::Stream {
                rope,
                encoding,
                len,
            } => match bound(rope.shape(), encoding) {
                worst if worst <= frame => copy(worst),
                _ if len <= frame => copy(len),
                _ => Pushes {
                    copied: 0,
                    framed: true,
                    segments: 1,
                    shares: true,
                },
            },
        }
    }

    /// Bytes the queue's own buffers occupy now, by allocated capacity.
    ///
    /// ```
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// assert_eq!(q.footprint(), 0, "nothing is allocated before a push");
    /// q.copy(b"HTTP/1.1 204 No Content\r\n\r\n");
    /// assert!(q.footprint() >= 4096, "the write buffer's first allocation");
    /// ```
    #[inline]
    pub fn footprint(&self) -> usize {
        self.buf.capacity()
            + self.spare_frame.capacity()
            + self.lent_frame()
            + self.segments.capacity() * size_of::<Segment>()
            + self.ledger.ends.capacity() * size_of::<u64>()
    }

    /// An upper bound of [`WriteQueue::footprint`] after
    /// [`WriteQueue::reserve`]`(pushes.copied)`, the `pushes` and the end of
    /// one response. Only with the reserve first: each push may grow the
    /// buffer otherwise.
    ///
    /// ```
    /// use unflat::queue::{Pushes, WriteQueue};
    /// let mut q = WriteQueue::new();
    /// let after = q.footprint_after(Pushes { copied: 10_000, segments: 2, ..Pushes::default() });
    /// q.reserve(10_000);
    /// q.copy(&[b'h'; 200]);
    /// q.copy(&[b'b'; 9_800]);
    /// q.end_response();
    /// assert!(q.footprint() <= after);
    /// ```
    pub fn footprint_after(&self, pushes: Pushes) -> usize {
        let Pushes {
            copied,
            framed,
            segments,
            ..
        } = pushes;
        let buffer = self
            .grown_len(copied)
            .map_or(self.buf.capacity(), |len| len.max(self.buf.capacity()));
        // One frame buffer exists at most: allocated when the first framed
        // segment reaches the front, then lent from segment to segment.
        let frame = self.spare_frame.capacity() + self.lent_frame();
        let frame = if framed {
            frame.max(self.frame_size())
        } else {
            frame
        };
        buffer
            + frame
            + list_after(self.segments.len(), self.segments.capacity(), segments)
                * size_of::<Segment>()
            + list_after(self.ledger.ends.len(), self.ledger.ends.capacity(), 1) * size_of::<u64>()
    }

    /// Whether copying `n` more bytes as one run and ending a response
    /// leaves [`WriteQueue::footprint`] as it is: the write buffer has the
    /// room, the run extends the last copied one or the list of segments
    /// has a free slot, and so has the list of response ends. What a
    /// caller covered for the queue as it is then covers it after.
    ///
    /// ```
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// assert!(!q.copies_in_place(10), "no buffer yet");
    /// q.reserve(4096);
    /// q.copy(b"HTTP/1.1 204 No Content\r\n\r\n");
    /// q.end_response();
    /// let before = q.footprint();
    /// assert!(q.copies_in_place(100));
    /// q.copy(&[b'x'; 100]);
    /// q.end_response();
    /// assert_eq!(q.footprint(), before);
    /// ```
    #[inline]
    pub fn copies_in_place(&self, n: usize) -> bool {
        let extends = matches!(
            self.segments.back(),
            Some(Segment::Copied { end, .. }) if *end == self.filled
        );
        self.buf.len() >= self.filled + n
            && (extends || self.segments.len() < self.segments.capacity())
            && self.ledger.ends.len() < self.ledger.ends.capacity()
    }

    /// Makes room in the write buffer for `copied` more bytes at once (count
    /// an encoded push's worst case, [`crate::storage_size`]).
    ///
    /// ```
    /// use unflat::queue::{Pushes, WriteQueue};
    /// use unflat::{storage_size, Encoding, Mode};
    /// let head = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n";
    /// let body = "x".repeat(100_000);
    /// let n = storage_size(&head, Encoding::Latin1) + storage_size(&body, Encoding::Utf8);
    /// let mut q = WriteQueue::new();
    /// let bound = q.footprint_after(Pushes { copied: n, segments: 1, ..Pushes::default() });
    /// q.reserve(n); // one allocation for both pushes
    /// q.encode(&head, Encoding::Latin1, Mode::Strict).unwrap();
    /// q.encode(&body, Encoding::Utf8, Mode::Strict).unwrap();
    /// assert!(q.footprint() <= bound);
    /// ```
    pub fn reserve(&mut self, copied: usize) {
        self.room(copied);
    }

    /// Sets how many bytes of buffers an empty queue keeps for reuse; larger
    /// ones are freed once drained.
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

    /// The write buffer's length after [`WriteQueue::reserve`]`(copied)`,
    /// if it grows (`room`'s rule; compaction only makes it smaller).
    fn grown_len(&self, copied: usize) -> Option<usize> {
        let need = self.filled + copied;
        let len = self.buf.len();
        (len < need).then(|| need.max(len + len / 4).max(4096))
    }

    /// The capacity of the frame lent to the front segment, if framed.
    fn lent_frame(&self) -> usize {
        match self.segments.front() {
            Some(Segment::Framed(framed)) => framed.frame_capacity(),
            _ => 0,
        }
    }
}

/// A list's capacity after `more` pushes onto `len` of `capacity`: a
/// `VecDeque` doubles when full (and allocates 4 at least).
fn list_after(len: usize, capacity: usize, more: usize) -> usize {
    let mut capacity = capacity;
    while len + more > capacity {
        capacity = (capacity * 2).max(4);
    }
    capacity
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::{Buf, Bytes};

    use super::super::{Policy, SharedRope};
    use super::*;
    use crate::{Encoding, Latin1, Mode, Utf16};

    /// A push onto a queue, made.
    type Make<'a> = dyn Fn(&mut WriteQueue) + 'a;

    /// Every kind of push, made after reserving what the bound was asked
    /// for, leaves the footprint within it.
    #[test]
    fn the_bound_holds_for_every_kind_of_push() {
        let text: String = "é€a".repeat(40_000);
        let rope = ropey::Rope::from_str(&text);
        let two_byte: SharedRope = Arc::new(Utf16(vec![0x20ac; 50_000]));
        let small: SharedRope = Arc::new(Latin1(vec![0xe9; 1000]));
        let shared = Bytes::from(vec![1u8; 100_000]);
        for policy in [Policy::DEFAULT, Policy::COPY_ALL, Policy::SHARE_ALL] {
            let mut q = WriteQueue::with_policy(policy);
            for round in 0..3 {
                let pushes: [(usize, bool, &Make<'_>); 5] = [
                    (300 + 5000, false, &|q| {
                        q.encode(&"HTTP/1.1 200 OK\r\n", Encoding::Latin1, Mode::Strict)
                            .unwrap();
                        q.copy(&[b'x'; 5000]);
                    }),
                    (policy.copy_below.min(100_000), false, &|q| q.share(&shared)),
                    (
                        rope.len_bytes().min(policy.frame),
                        rope.len_bytes() > policy.frame,
                        &|q| q.share_rope(&rope, 0..rope.len_bytes()),
                    ),
                    (0, true, &|q| {
                        q.stream(&two_byte, Encoding::Utf8, Mode::Strict).unwrap();
                    }),
                    (3000, false, &|q| {
                        q.stream(&small, Encoding::Utf8, Mode::Strict).unwrap();
                    }),
                ];
                for (copied, framed, push) in pushes {
                    let after = q.footprint_after(Pushes {
                        copied,
                        framed,
                        segments: 4,
                        shares: false,
                    });
                    q.reserve(copied);
                    push(&mut q);
                    q.end_response();
                    assert!(
                        q.footprint() <= after,
                        "{policy:?}, round {round}: {} > {after}",
                        q.footprint()
                    );
                }
                // Partly drained between rounds, so that compaction and the
                // frame's lending both happen.
                let n = q.remaining() / 2 + round;
                q.advance(n.min(q.remaining()));
            }
        }
    }

    /// `pushes` says what each push then does: the bytes it copies into
    /// the write buffer (at most), whether it is framed, and the segments it
    /// adds (at most).
    #[test]
    fn pushes_predict_what_each_push_does() {
        let text: String = "é€a".repeat(40_000);
        let rope = ropey::Rope::from_str(&text);
        let long: SharedRope = Arc::new(Utf16(vec![0x20ac; 50_000]));
        let short: SharedRope = Arc::new(Latin1(vec![0xe9; 1000]));
        let mid: SharedRope = Arc::new(Latin1(vec![0xe9; 40_000]));
        let shared = Bytes::from(vec![1u8; 100_000]);
        let small = Bytes::from(vec![1u8; 100]);
        for policy in [Policy::DEFAULT, Policy::COPY_ALL, Policy::SHARE_ALL] {
            let cases: [(Push<'_>, &Make<'_>); 7] = [
                (Push::Copy(5000), &|q| q.copy(&[b'x'; 5000])),
                (Push::Share(100_000), &|q| q.share(&shared)),
                (Push::Share(100), &|q| q.share(&small)),
                (Push::ShareRope(rope.len_bytes()), &|q| {
                    q.share_rope(&rope, 0..rope.len_bytes())
                }),
                (Push::ShareRope(3000), &|q| q.share_rope(&rope, 30..3030)),
                (
                    Push::Stream {
                        rope: &long,
                        encoding: Encoding::Utf8,
                        len: 150_000,
                    },
                    &|q| {
                        q.stream(&long, Encoding::Utf8, Mode::Strict).unwrap();
                    },
                ),
                (
                    Push::Stream {
                        rope: &mid,
                        encoding: Encoding::Utf8,
                        len: 80_000,
                    },
                    &|q| {
                        q.stream(&mid, Encoding::Utf8, Mode::Strict).unwrap();
                    },
                ),
            ];
            for (push, make) in cases {
                let mut q = WriteQueue::with_policy(policy);
                let said = q.pushes(push);
                make(&mut q);
                let segments = q.segments.len();
                let framed = q.framed > 0;
                assert!(
                    q.copied_pending <= said.copied,
                    "{policy:?} {push:?}: {said:?}, copied {}",
                    q.copied_pending
                );
                assert!(!framed || said.framed, "{policy:?} {push:?}: framed");
                assert!(
                    segments <= said.segments,
                    "{policy:?} {push:?}: {segments} segments, {said:?}"
                );
                let keeps = q
                    .segments
                    .iter()
                    .any(|seg| !matches!(seg, Segment::Copied { .. }));
                assert!(
                    !keeps || said.shares,
                    "{policy:?} {push:?}: keeps a reference, {said:?}"
                );
            }
        }
        let q = WriteQueue::new();
        let short_stream = Push::Stream {
            rope: &short,
            encoding: Encoding::Utf8,
            len: 2000,
        };
        assert_eq!(
            q.pushes(short_stream).copied,
            2000,
            "the worst case, at once"
        );
    }

    #[test]
    fn a_drained_queue_counts_what_it_keeps_for_reuse() {
        let mut q = WriteQueue::new();
        q.copy(&[0; 10_000]);
        let full = q.footprint();
        q.advance(10_000);
        assert_eq!(q.footprint(), full, "kept for reuse, so still counted");
        q.set_retain(0);
        q.copy(&[0; 10]);
        q.advance(10);
        assert!(
            q.footprint() < 4096,
            "freed once drained: {}",
            q.footprint()
        );
    }
}
