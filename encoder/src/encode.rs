//! Writing a rope into bytes: the entry points, and path 1.
//!
//! Every entry point knows the size before it writes — from the shape alone
//! where that settles it (path 1 of text copied as it is; paths 2 and 3
//! into a destination that holds the worst case), else by measuring
//! ([`crate::plan`]) — and refuses before writing anything if the
//! destination is too small or (in strict mode) a character cannot be
//! encoded. The destination is the only buffer that ever holds the whole
//! encoded text.

use std::ops::ControlFlow;

use bytes::{BufMut, BytesMut};

use crate::encoding::{EncodeError, Encoding, Mode};
use crate::expand::{self, Room};
use crate::measure::{as_is, bound, plan, plan_shaped, EncodePath, Plan};
use crate::rope::{CharRange, Piece, Rope, Shape};
use crate::transcode;

/// Writes `rope` in `encoding` into the start of `dst` and returns the bytes
/// written.
///
/// Fails, leaving `dst` untouched, with [`EncodeError::DestinationTooSmall`]
/// (carrying the size needed) or, in strict mode, [`EncodeError::Unencodable`].
///
/// ```
/// use unflat::{write, Concat, Encoding, Latin1, Mode, Utf16};
/// let (a, b) = (Latin1(b"na\xefve "), Utf16(&[0x20AC, 0xD83D, 0xDE00]));
/// let rope = Concat::new([&a, &"caf\u{e9} ", &b]);
/// let mut dst = [0u8; 64];
/// let n = write(&rope, Encoding::Utf8, Mode::Strict, &mut dst).unwrap();
/// assert_eq!(&dst[..n], "naïve café €😀".as_bytes());
/// ```
pub fn write<R: Rope + ?Sized>(
    rope: &R,
    encoding: Encoding,
    mode: Mode,
    dst: &mut [u8],
) -> Result<usize, EncodeError> {
    write_shaped(rope, rope.shape(), encoding, mode, dst)
}

/// [`write()`] for a rope whose shape is already known. The shape is asked
/// for once per write: for some ropes (a ropey rope of one leaf) it costs a
/// pass over the text.
#[inline]
pub(crate) fn write_shaped<R: Rope + ?Sized>(
    rope: &R,
    shape: Shape,
    encoding: Encoding,
    mode: Mode,
    dst: &mut [u8],
) -> Result<usize, EncodeError> {
    // Path 1 known from the shape alone (a ropey rope or `&str` pieces into
    // utf8, a response head into latin1) is copied without a plan: nothing
    // to measure, nothing to choose, and none of the other paths' code in
    // the caller's frame.
    if let Some(needed) = as_is(shape, encoding) {
        let written = copy_pieces(rope, first(dst, needed)?);
        debug_assert_eq!(written, needed, "path 1 from the shape");
        return Ok(written);
    }
    write_chosen(rope, shape, encoding, mode, dst)
}

/// [`write_shaped`] past path 1 known from the shape: the unmeasured paths,
/// or a plan and the path it chooses.
#[inline(never)]
fn write_chosen<R: Rope + ?Sized>(
    rope: &R,
    shape: Shape,
    encoding: Encoding,
    mode: Mode,
    dst: &mut [u8],
) -> Result<usize, EncodeError> {
    if encoding == Encoding::Utf8 && one_byte_only(shape) {
        let available = dst.len();
        if let Some(result) = expand::write_one_byte(rope, shape, dst, Room::Unknown) {
            return result.map_err(|needed| EncodeError::DestinationTooSmall { needed, available });
        }
    }
    if let Some(written) = write_unmeasured(rope, shape, encoding, mode, dst) {
        return Ok(written);
    }
    let plan = plan_shaped(rope, shape, encoding, mode)?;
    write_planned(rope, plan, dst)
}

/// One-byte text shorter than this is not gathered at the tail and expanded
/// forwards when it is written as UTF-8 unmeasured: on short text that
/// expansion costs more than measuring and copying. It is copied to the
/// front and expanded backwards instead ([`expand::write_short`]). The
/// threshold comes from the `body` group of the encoder bench:
/// docs/measurements.md, "Back-of-buffer expansion".
const UNMEASURED_MIN: usize = 64;

/// Paths 2 and 3 without the measuring pass, where the measurement can
/// change nothing: the target cannot refuse a character (utf8, utf16le;
/// latin1 in lossy mode),
/// the shape alone already says the rope is converted (two-byte pieces, or
/// one-byte pieces of unknown range written as UTF-8), and `dst` holds the
/// worst case ([`crate::storage_size`]) — as Node's `3 × length` buffer
/// does. Returns `None` when any of that is not so.
fn write_unmeasured<R: Rope + ?Sized>(
    rope: &R,
    s: Shape,
    encoding: Encoding,
    mode: Mode,
    dst: &mut [u8],
) -> Option<usize> {
    /// How a rope is written without measuring it first.
    enum Unmeasured {
        /// Gathered at the tail and expanded forwards ([`expand::write`]).
        Expand,
        /// Copied and counted in one walk, then expanded backwards where it
        /// lies ([`expand::write_short`]).
        ExpandShort,
        /// Transcoded ([`transcode::write`]).
        Transcode,
    }
    let one_byte = s.one_byte > 0 && s.range != CharRange::Ascii;
    let how = match encoding {
        Encoding::Utf8 if s.two_byte > 0 => Unmeasured::Transcode,
        Encoding::Utf8 if one_byte && s.one_byte >= UNMEASURED_MIN => Unmeasured::Expand,
        Encoding::Utf8 if one_byte && s.utf8 == 0 => Unmeasured::ExpandShort,
        Encoding::Utf16Le => Unmeasured::Transcode,
        // UTF-8 pieces that may hold non-ASCII characters, into latin1 in
        // lossy mode: every character takes at most as many bytes as its
        // UTF-8, and none is refused, so the count of UTF-16 units that
        // sizes the output exactly (a walk over the pieces) changes
        // nothing. The engine's bytes are the plan's: text it finds ASCII
        // it copies, as path 1 would.
        Encoding::Latin1 if mode == Mode::Lossy && s.utf8 > 0 && s.range != CharRange::Ascii => {
            Unmeasured::Transcode
        }
        Encoding::Utf8 | Encoding::Latin1 | Encoding::Ascii => return None,
    };
    let bound = bound(s, encoding);
    if dst.len() < bound {
        return None;
    }
    Some(match how {
        // The tail of the worst case is where the text is gathered.
        Unmeasured::Expand => expand::write(rope, s, &mut dst[..bound]),
        Unmeasured::ExpandShort => expand::write_short(rope, dst),
        Unmeasured::Transcode => transcode::write(rope, s, encoding, dst),
    })
}

/// [`write()`] with a [`Plan`] already made by [`crate::plan`] for the same
/// rope, for callers that size their buffer from the plan. The plan carries
/// its encoding (and, in strict mode, the check that every character fits),
/// so only [`EncodeError::DestinationTooSmall`] can be returned here.
///
/// ```
/// use unflat::{plan, write_planned, Encoding, Mode, Utf16};
/// let rope = Utf16(&[0x63, 0x20AC]);
/// let p = plan(&rope, Encoding::Utf8, Mode::Strict).unwrap();
/// let mut dst = vec![0; p.size()];
/// assert_eq!(write_planned(&rope, p, &mut dst), Ok(4));
/// assert_eq!(dst, "c€".as_bytes());
/// ```
pub fn write_planned<R: Rope + ?Sized>(
    rope: &R,
    plan: Plan,
    dst: &mut [u8],
) -> Result<usize, EncodeError> {
    let encoding = plan.encoding();
    let needed = plan.size();
    let dst = first(dst, needed)?;
    let written = match plan.path() {
        EncodePath::OneByte => copy_pieces(rope, dst),
        EncodePath::Expand if one_byte_only(plan.shape()) => {
            match expand::write_one_byte(rope, plan.shape(), dst, Room::Enough) {
                Some(Ok(written)) => written,
                _ => expand::write(rope, plan.shape(), dst),
            }
        }
        EncodePath::Expand => expand::write(rope, plan.shape(), dst),
        EncodePath::TwoByte => transcode::write(rope, plan.shape(), encoding, dst),
    };
    debug_assert_eq!(
        written,
        needed,
        "{:?} wrote {written} of {needed}",
        plan.path()
    );
    Ok(written)
}

/// A rope of one-byte pieces only, not known to be ASCII: path 2 through
/// the stage ([`expand::write_one_byte`]) when written as UTF-8.
fn one_byte_only(s: Shape) -> bool {
    s.utf8 == 0 && s.two_byte == 0 && s.range != CharRange::Ascii
}

/// The first `needed` bytes of `dst`, or the error naming both sizes.
fn first(dst: &mut [u8], needed: usize) -> Result<&mut [u8], EncodeError> {
    let available = dst.len();
    dst.get_mut(..needed)
        .ok_or(EncodeError::DestinationTooSmall { needed, available })
}

/// A growable [`BufMut`] that can make room for exactly `n` more bytes:
/// `Vec<u8>` and [`BytesMut`]. What [`write_buf`] appends to.
///
/// ```
/// use unflat::{write_buf, Encoding, GrowBuf, Latin1, Mode};
/// let mut out = b"<p>".to_vec();
/// write_buf(&Latin1(b"caf\xe9"), Encoding::Utf8, Mode::Strict, &mut out).unwrap();
/// assert_eq!(out, "<p>café".as_bytes());
/// // What write_buf calls: room for exactly n more bytes, zeroed.
/// assert_eq!(out.grow_zeroed(2), [0, 0]);
/// assert_eq!(out.len(), 10);
/// ```
pub trait GrowBuf: BufMut {
    /// Appends `n` zero bytes and returns them, for the encoder to overwrite.
    fn grow_zeroed(&mut self, n: usize) -> &mut [u8];
}

impl GrowBuf for Vec<u8> {
    fn grow_zeroed(&mut self, n: usize) -> &mut [u8] {
        let len = self.len();
        self.reserve_exact(n);
        self.resize(len + n, 0);
        &mut self[len..]
    }
}

impl GrowBuf for BytesMut {
    fn grow_zeroed(&mut self, n: usize) -> &mut [u8] {
        let len = self.len();
        self.reserve(n);
        self.resize(len + n, 0);
        &mut self[len..]
    }
}

/// Appends `rope` in `encoding` to `buf`, reserving exactly the encoded size
/// first, and returns the bytes appended.
///
/// Fails, leaving `buf` as it was, with [`EncodeError::DestinationTooSmall`]
/// when `buf` cannot grow by that much ([`BufMut::remaining_mut`]), or in
/// strict mode with [`EncodeError::Unencodable`].
///
/// The new bytes are zeroed before they are written (one `memset`), which
/// keeps this function free of `unsafe`; a caller that reuses an initialised
/// buffer calls [`write()`] instead and pays nothing.
///
/// ```
/// use unflat::{write_buf, Encoding, Mode};
/// let rope = ropey::Rope::from_str("hello, rope");
/// let mut buf = bytes::BytesMut::new();
/// write_buf(&rope, Encoding::Utf8, Mode::Strict, &mut buf).unwrap();
/// assert_eq!(&buf[..], b"hello, rope");
/// ```
pub fn write_buf<R: Rope + ?Sized, B: GrowBuf>(
    rope: &R,
    encoding: Encoding,
    mode: Mode,
    buf: &mut B,
) -> Result<usize, EncodeError> {
    let plan = plan(rope, encoding, mode)?;
    if buf.remaining_mut() < plan.size() {
        return Err(EncodeError::DestinationTooSmall {
            needed: plan.size(),
            available: buf.remaining_mut(),
        });
    }
    write_planned(rope, plan, buf.grow_zeroed(plan.size()))
}

/// Path 1: every piece copied as it is, one `memcpy` each (a byte stored),
/// no per-character work, into `dst` from its start. The plan chose it only when each piece's
/// bytes are already its encoding (one-byte or ASCII pieces; UTF-8 pieces for
/// utf8). Step 1 of path 2 uses it too, to fill the tail of its region.
pub(crate) fn copy_pieces<R: Rope + ?Sized>(rope: &R, dst: &mut [u8]) -> usize {
    let mut at = 0;
    let _ = rope.for_each_piece(&mut |p| {
        let bytes = match p {
            Piece::OneByte(b) => b,
            Piece::Utf8(s) => s.as_bytes(),
            Piece::TwoByte(u) => {
                debug_assert!(u.is_empty(), "only two-byte paths take two-byte text");
                &[]
            }
        };
        // Short pieces are copied by plain moves, not by a call to
        // `memcpy`, whose cost per call is what a rope of many tiny pieces
        // pays per piece: one byte (a rope built character by character) is
        // stored, 8 to 16 bytes are two overlapping 8-byte moves. In the
        // encoder bench's shape matrix that made ropes of many tiny pieces
        // faster, at a small cost in instructions to the response head,
        // whose pieces are mostly 8 to 16 bytes: docs/measurements.md, "The
        // one-byte fast path".
        let len = bytes.len();
        let to = &mut dst[at..at + len];
        if let [b] = bytes {
            to[0] = *b;
        } else if (8..=16).contains(&len) {
            to[..8].copy_from_slice(&bytes[..8]);
            to[len - 8..].copy_from_slice(&bytes[len - 8..]);
        } else {
            to.copy_from_slice(bytes);
        }
        at += bytes.len();
        ControlFlow::Continue(())
    });
    at
}
