//! ropey's `Rope` and `RopeSlice` as [`Rope`]s, and the one walk over a
//! ropey rope's chunks that they and the write queue share.

use std::ops::ControlFlow;

use super::{Piece, Rope, Shape};

/// Walks longer than this many bytes use ropey's chunk iterator; shorter
/// ones look each chunk up. On short walks the lookups are faster (the
/// iterator's node stack is one allocation); on long ones the two draw
/// even, then the iterator pulls ahead. So lookups, which allocate nothing,
/// up to this length. Measured by `cargo bench --bench encoder` (group
/// `ropey_walk`, docs/encoder-measurements.md): docs/measurements.md, "Walking a ropey
/// rope".
pub(crate) const ITERATE_ABOVE: usize = 16 * 1024;

/// How a walk over a ropey rope finds its chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Walk {
    /// ropey's chunk iterator: O(1) per chunk after one descent, for one
    /// small allocation (its node stack) per walk.
    Iterate,
    /// A descent from the root per chunk, O(log n): no allocation.
    LookUp,
}

impl Walk {
    /// The walk that measured faster for `len` bytes ([`ITERATE_ABOVE`]).
    pub(crate) fn for_len(len: usize) -> Walk {
        if len > ITERATE_ABOVE {
            Walk::Iterate
        } else {
            Walk::LookUp
        }
    }
}

/// The one walk over the chunks of a ropey rope or slice: calls
/// `visit(chunk, chunk_start)` for each chunk that overlaps the bytes
/// `start..end`, in order, until it breaks. Each caller cuts the chunks to
/// what it needs (as text, or as bytes that may cut a character).
pub(crate) fn walk_ropey_chunks<'a, C: Iterator<Item = &'a str>>(
    start: usize,
    end: usize,
    walk: Walk,
    chunk_at_byte: impl Fn(usize) -> (&'a str, usize),
    chunks_at_byte: impl FnOnce(usize) -> (C, usize),
    mut visit: impl FnMut(&'a str, usize) -> ControlFlow<()>,
) -> ControlFlow<()> {
    if start >= end {
        return ControlFlow::Continue(());
    }
    match walk {
        Walk::Iterate => {
            let (chunks, mut at) = chunks_at_byte(start);
            for chunk in chunks {
                visit(chunk, at)?;
                at += chunk.len();
                if at >= end {
                    break;
                }
            }
        }
        Walk::LookUp => {
            let mut pos = start;
            while pos < end {
                let (chunk, at) = chunk_at_byte(pos);
                visit(chunk, at)?;
                pos = at + chunk.len();
            }
        }
    }
    ControlFlow::Continue(())
}

/// `ropey::Rope` and `ropey::RopeSlice` offer the same calls for what a rope
/// needs, so one implementation serves both.
macro_rules! ropey_rope {
    ($ty:ty) => {
        impl Rope for $ty {
            fn for_each_piece<'a>(
                &'a self,
                visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
            ) -> ControlFlow<()> {
                self.for_each_piece_from(0, visit)
            }

            /// O(1) for ropes of more than one leaf: ropey keeps byte and
            /// char counts in its tree, and the text is pure ASCII exactly
            /// when they are equal. (For a rope of one leaf, ropey 1.x counts
            /// them anew, a pass over at most 1 KiB.)
            fn shape(&self) -> Shape {
                let bytes = self.len_bytes();
                Shape::utf8(bytes, bytes == self.len_chars())
            }

            /// O(log n) to find `start`: a position is a byte index.
            fn for_each_piece_from<'a>(
                &'a self,
                start: usize,
                visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
            ) -> ControlFlow<()> {
                let len = self.len_bytes();
                walk_ropey_chunks(
                    start,
                    len,
                    Walk::for_len(len.saturating_sub(start)),
                    |i| {
                        let (c, start, _, _) = self.chunk_at_byte(i);
                        (c, start)
                    },
                    |i| {
                        let (chunks, start, _, _) = self.chunks_at_byte(i);
                        (chunks, start)
                    },
                    |chunk, at| visit(Piece::Utf8(&chunk[start.saturating_sub(at)..])),
                )
            }
        }
    };
}

ropey_rope!(ropey::Rope);
ropey_rope!(ropey::RopeSlice<'_>);
