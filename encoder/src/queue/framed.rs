//! A long body written a frame at a time: text encoded by a resumable
//! [`Encoder`], or the short chunks of a ropey range copied. The segment
//! owns its cursor and, while it is the front of the queue, the queue's
//! reused frame buffer.

use std::ops::{ControlFlow, Range};

use super::{chunk_bytes, SharedRope};
use crate::resume::Encoder;
use crate::rope::Walk;

/// Where a framed segment's bytes come from.
enum FrameSource {
    /// Text encoded frame by frame (the encoder keeps its position).
    Encode { rope: SharedRope, encoder: Encoder },
    /// Bytes of a ropey rope, copied frame by frame; `range.start` is the
    /// next byte to copy.
    Copy {
        rope: ropey::Rope,
        range: Range<usize>,
    },
}

/// A segment written a frame at a time.
pub(super) struct Framed {
    source: FrameSource,
    /// Bytes not yet written.
    remaining: usize,
    /// The frame buffer: lent by the queue while this segment is at the
    /// front ([`Framed::activate`]), empty before.
    frame: Vec<u8>,
    /// Bytes of a frame.
    size: usize,
    /// The unwritten bytes of the frame are `frame[at..filled]`.
    at: usize,
    filled: usize,
}

impl std::fmt::Debug for Framed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.source {
            FrameSource::Encode { encoder, .. } => format!("{:?}", encoder.encoding()),
            FrameSource::Copy { range, .. } => format!("rope {range:?}"),
        };
        write!(f, "Framed({kind}, {} bytes left)", self.remaining)
    }
}

impl Framed {
    /// `len` bytes of `rope`, encoded by `encoder`.
    pub(super) fn encode(rope: SharedRope, encoder: Encoder, len: usize) -> Framed {
        Framed::new(FrameSource::Encode { rope, encoder }, len)
    }

    /// The bytes `range` of `rope`, copied.
    pub(super) fn copy(rope: ropey::Rope, range: Range<usize>) -> Framed {
        let len = range.len();
        Framed::new(FrameSource::Copy { rope, range }, len)
    }

    fn new(source: FrameSource, len: usize) -> Framed {
        Framed {
            source,
            remaining: len,
            frame: Vec::new(),
            size: 0,
            at: 0,
            filled: 0,
        }
    }

    /// Bytes not yet written.
    pub(super) fn remaining(&self) -> usize {
        self.remaining
    }

    /// Takes `frame` (the queue's reused buffer) and fills the first frame
    /// of `size` bytes: the segment has become the front of the queue.
    pub(super) fn activate(&mut self, mut frame: Vec<u8>, size: usize) {
        if frame.len() < size {
            frame.resize(size, 0);
        }
        self.frame = frame;
        self.size = size;
        self.refill();
    }

    /// Bytes allocated for the frame buffer it holds (none before it is
    /// the front).
    pub(super) fn frame_capacity(&self) -> usize {
        self.frame.capacity()
    }

    /// Gives the frame buffer back to the queue.
    pub(super) fn release(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.frame)
    }

    /// The unwritten bytes of the current frame.
    pub(super) fn rest(&self) -> &[u8] {
        &self.frame[self.at..self.filled]
    }

    /// Records that `n` bytes of the current frame were written (at most
    /// [`Framed::rest`]'s length), and fills the next frame when this one is
    /// done.
    pub(super) fn advance(&mut self, n: usize) {
        debug_assert!(n <= self.filled - self.at, "advanced past the frame");
        self.at += n;
        self.remaining -= n;
        if self.at == self.filled && self.remaining > 0 {
            self.refill();
        }
    }

    /// Fills the frame with the next bytes. **While the segment is at the
    /// front and not done, `at < filled`**: the next byte to write is always
    /// in the frame (a frame of [`Encoder::MIN_DST`] bytes or more always
    /// makes progress, and a copied range always has a next byte).
    fn refill(&mut self) {
        let frame = &mut self.frame[..self.size];
        let written = match &mut self.source {
            FrameSource::Encode { rope, encoder } => {
                encoder
                    .encode(&**rope, frame)
                    .expect("a planned stream encodes without error")
                    .written
            }
            FrameSource::Copy { rope, range } => {
                let to = range.end.min(range.start + frame.len());
                let mut n = 0;
                let _ = chunk_bytes(rope, range.start..to, Walk::LookUp, |chunk| {
                    frame[n..n + chunk.len()].copy_from_slice(chunk);
                    n += chunk.len();
                    ControlFlow::Continue(())
                });
                range.start += n;
                n
            }
        };
        debug_assert!(written > 0 || self.remaining == 0, "a frame makes progress");
        self.at = 0;
        self.filled = written;
    }
}
