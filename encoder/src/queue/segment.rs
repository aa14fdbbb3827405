//! The kinds of segment a write queue holds, each with its own cursor: what
//! is left of it is what it holds, so the queue needs no position of its
//! own in its front segment.

use std::io::IoSlice;
use std::ops::{ControlFlow, Range};

use bytes::{Buf, Bytes};

use super::chunk_bytes;
use super::framed::Framed;
use crate::rope::Walk;

/// One segment of pending output.
pub(super) enum Segment {
    /// Bytes `start..end` of the queue's write buffer; `start` moves as
    /// they are written.
    Copied { start: usize, end: usize },
    /// A shared buffer, advanced past what is written (a pointer bump).
    Shared(Bytes),
    /// A byte range of a ropey rope, one iovec per chunk; `range.start`
    /// moves as it is written.
    Rope {
        rope: ropey::Rope,
        range: Range<usize>,
    },
    /// A long body, written a frame at a time.
    Framed(Framed),
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Segment::Copied { start, end } => write!(f, "Copied({start}..{end})"),
            Segment::Shared(b) => write!(f, "Shared({} bytes)", b.len()),
            Segment::Rope { range, .. } => write!(f, "Rope({range:?})"),
            Segment::Framed(framed) => framed.fmt(f),
        }
    }
}

impl Segment {
    /// Bytes not yet written.
    pub(super) fn remaining(&self) -> usize {
        match self {
            Segment::Copied { start, end } => end - start,
            Segment::Shared(b) => b.len(),
            Segment::Rope { range, .. } => range.len(),
            Segment::Framed(framed) => framed.remaining(),
        }
    }

    /// Bytes that one [`Segment::advance`] may take: all that is left, or,
    /// for a framed segment, what is left of its frame.
    pub(super) fn available(&self) -> usize {
        match self {
            Segment::Framed(framed) => framed.rest().len(),
            other => other.remaining(),
        }
    }

    /// Records that `n` bytes (at most [`Segment::available`]) were written.
    pub(super) fn advance(&mut self, n: usize) {
        match self {
            Segment::Copied { start, .. } => *start += n,
            Segment::Shared(b) => b.advance(n),
            Segment::Rope { range, .. } => range.start += n,
            Segment::Framed(framed) => framed.advance(n),
        }
    }

    /// The first slice of what is left (`buf` is the queue's write buffer).
    pub(super) fn chunk<'a>(&'a self, buf: &'a [u8]) -> &'a [u8] {
        match self {
            Segment::Copied { start, end } => &buf[*start..*end],
            Segment::Shared(b) => b,
            Segment::Rope { rope, range } => {
                let mut first: &[u8] = &[];
                let _ = chunk_bytes(rope, range.clone(), Walk::LookUp, |c| {
                    first = c;
                    ControlFlow::Break(())
                });
                first
            }
            Segment::Framed(framed) => framed.rest(),
        }
    }

    /// Adds iovecs for what is left to `dst` from `dst[*n]` on, as many as
    /// fit. Breaks after a framed segment: only its current frame is at
    /// hand, and what follows it waits.
    pub(super) fn iovecs<'a>(
        &'a self,
        buf: &'a [u8],
        dst: &mut [IoSlice<'a>],
        n: &mut usize,
    ) -> ControlFlow<()> {
        if *n == dst.len() {
            return ControlFlow::Break(());
        }
        match self {
            Segment::Copied { .. } | Segment::Shared(_) => {
                dst[*n] = IoSlice::new(self.chunk(buf));
                *n += 1;
            }
            Segment::Framed(framed) => {
                // Not at the front yet: no frame filled, nothing to offer.
                if !framed.rest().is_empty() {
                    dst[*n] = IoSlice::new(framed.rest());
                    *n += 1;
                }
                return ControlFlow::Break(());
            }
            Segment::Rope { rope, range } => {
                return chunk_bytes(rope, range.clone(), Walk::LookUp, |chunk| {
                    dst[*n] = IoSlice::new(chunk);
                    *n += 1;
                    if *n == dst.len() {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                });
            }
        }
        ControlFlow::Continue(())
    }
}
