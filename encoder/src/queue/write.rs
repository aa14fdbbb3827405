//! The write path, as a user meets the queue: a queue made, the pieces
//! of a response pushed onto it, its end marked, and the whole written to
//! a blocking writer. The buffer machinery behind the pushes is `mod.rs`'s.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::ops::{ControlFlow, Range};

use bytes::{Buf, Bytes};

use super::framed::Framed;
use super::segment::Segment;
use super::{chunk_bytes, Ledger, Mark, Policy, SharedRope, WriteQueue, DEFAULT_RETAIN};
use crate::encoding::{EncodeError, Encoding, Mode};
use crate::measure::{bound, plan_shaped};
use crate::resume::Encoder;
use crate::rope::{Rope, Walk};

/// **The write path**: make a queue, push what a response is made of, mark
/// its end, and drain the queue: [`WriteQueue::write_to`], or as a [`Buf`].
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
            ledger: Ledger::new(),
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

    /// Encodes `rope` straight into the write buffer and queues it; the
    /// bytes queued, or an error and nothing queued. The whole text is held
    /// until written: [`WriteQueue::stream`] bounds a long body to a frame.
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
        // Room for the worst case, as Node's 3 × length: the buffer is
        // reused, and the two-byte path skips its measuring pass.
        let shape = rope.shape();
        let dst = self.room(bound(shape, encoding));
        let n = crate::encode::write_shaped(rope, shape, encoding, mode, dst)?;
        self.commit(n);
        Ok(n)
    }

    /// Writes `head` straight into the write buffer, in the one walk that
    /// checks its values ([`Head::write`](crate::head::Head::write)), and
    /// queues it; the bytes queued, or the error and nothing queued (the
    /// buffer back to where the head began).
    ///
    /// ```
    /// use bytes::Buf;
    /// use unflat::head::{Head, HeadError, HeaderName, RequestMethod, Status, WriteError};
    /// use unflat::queue::WriteQueue;
    /// use unflat::Concat;
    /// let mut q = WriteQueue::new();
    /// let bad = Concat::new([&"x", &"\nInjected: 1"]);
    /// let mut head = Head::new(Status::OK, RequestMethod::Other);
    /// head.value(HeaderName::new("X-Note").unwrap(), &bad).unwrap();
    /// assert!(matches!(q.head(&head), Err(WriteError::Value { error: HeadError::InvalidValue { at: 1, .. }, .. })));
    /// assert_eq!(q.remaining(), 0, "nothing of it queued");
    /// ```
    pub fn head<'h, const N: usize>(
        &mut self,
        head: &crate::head::Head<'h, N>,
    ) -> Result<usize, crate::head::WriteError<'h>> {
        self.head_measured(head, head.max_len())
    }

    /// [`WriteQueue::head`] for a head whose [`Head::max_len`] is
    /// `measured`, taken already (to count it against a budget first): one
    /// measure per head. A `measured` below it fails the write, queueing
    /// nothing.
    ///
    /// [`Head::max_len`]: crate::head::Head::max_len
    pub fn head_measured<'h, const N: usize>(
        &mut self,
        head: &crate::head::Head<'h, N>,
        measured: usize,
    ) -> Result<usize, crate::head::WriteError<'h>> {
        let dst = self.room(measured);
        // Written past `filled`: kept only by the commit below.
        let n = head.write_measured(dst)?;
        self.commit(n);
        Ok(n)
    }

    /// Runs `push`, which queues something on this queue; if it fails or
    /// panics, everything it queued is taken back, the queue as it was
    /// before (no byte of it is ever written). For what is encoded behind a
    /// mark: a chunk whose text fails half-way leaves no size line without
    /// its data.
    ///
    /// ```
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// q.copy(b"kept|");
    /// let failed: Result<(), &str> = q.marked(|q| {
    ///     q.copy(b"5\r\n");
    ///     Err("the chunk's text failed")
    /// });
    /// assert!(failed.is_err());
    /// let mut out = Vec::new();
    /// q.write_to(&mut out).unwrap();
    /// assert_eq!(out, b"kept|");
    /// ```
    pub fn marked<T, E>(
        &mut self,
        push: impl FnOnce(&mut WriteQueue) -> Result<T, E>,
    ) -> Result<T, E> {
        /// Takes the pushes back unless disarmed: on an error, and while
        /// unwinding from a panic.
        struct Rollback<'q> {
            queue: &'q mut WriteQueue,
            mark: Mark,
            armed: bool,
        }
        impl Drop for Rollback<'_> {
            fn drop(&mut self) {
                if self.armed {
                    self.queue.roll_back(self.mark);
                }
            }
        }
        let mark = self.mark();
        let mut guard = Rollback {
            queue: self,
            mark,
            armed: true,
        };
        let result = push(guard.queue);
        guard.armed = result.is_err();
        result
    }

    /// Queues `rope` in `encoding`, text longer than a frame
    /// ([`Policy::frame`]) encoded a frame at a time as the socket drains,
    /// from the rope the queue keeps. The encoded size, or an error and
    /// nothing queued.
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

    /// Queues the bytes of each of `parts`, in order, into the write buffer:
    /// what a [`WriteQueue::copy`] of each does, with one look at the
    /// buffer's room (a head from a template and a short body behind it).
    ///
    /// ```
    /// use bytes::Buf;
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// q.copy_all(&[b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n", b"four"]);
    /// assert_eq!(q.chunk(), b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfour");
    /// ```
    #[inline]
    pub fn copy_all(&mut self, parts: &[&[u8]]) {
        let n = parts.iter().map(|p| p.len()).sum();
        let mut room = self.room(n);
        for part in parts {
            let (to, rest) = room.split_at_mut(part.len());
            to.copy_from_slice(part);
            room = rest;
        }
        self.commit(n);
    }

    /// Queues `bytes` as an iovec at its own memory (a clone kept until
    /// written), or copies them below [`Policy::copy_below`]: a small body
    /// shared by every worker then costs no contended atomic.
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

    /// Queues the bytes `range` of `rope`'s UTF-8 text: chunks of at least
    /// [`Policy::copy_below`] from the rope's own memory, runs of shorter ones
    /// copied (a frame at a time for a range longer than a frame).
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
        // A connection never holds more than a frame of a long range.
        let framed = range.len() > self.frame_size();
        // One walk: short chunks copied (or gathered into framed runs); a
        // run of long ones is one segment, which the writer walks again.
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

    /// Marks the end of a response, for the [`Ledger`]'s count of responses
    /// not yet written; a queue that only writes needs no marks.
    ///
    /// ```
    /// use unflat::queue::WriteQueue;
    /// let mut q = WriteQueue::new();
    /// q.copy(b"HTTP/1.1 204 No Content\r\n\r\n");
    /// q.end_response();
    /// q.copy(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    /// q.end_response();
    /// assert_eq!(q.ledger().pending_responses(), 2);
    /// q.write_to(&mut std::io::sink()).unwrap();
    /// assert_eq!(q.ledger().pending_responses(), 0);
    /// ```
    #[inline]
    pub fn end_response(&mut self) {
        self.ledger.end_response();
    }

    /// How far the output has gone: bytes written, and responses not yet
    /// written in full ([`Ledger`]).
    #[inline]
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Writes everything pending to a blocking writer, one `write_vectored`
    /// per batch of up to 64 iovecs; the bytes written.
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
