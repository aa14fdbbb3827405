//! Path 3: transcoding piece by piece.
//!
//! Node flattens a two-byte string before writing it; here every piece is
//! transcoded where it lies, straight into the destination. The kernels are
//! encoding_rs's; this module adds what a rope needs around them: surrogate
//! pairs split across pieces ([`crate::surrogate`]), Node's lossy latin1
//! (the low byte of each code unit, which encoding_rs leaves unspecified),
//! and UTF-16LE output into a byte buffer of any alignment.

use std::ops::ControlFlow;

use crate::encoding::Encoding;
use crate::rope::{Piece, Rope};
use crate::surrogate::{self, Joined, Joiner};

/// UTF-8 of U+FFFD, which replaces an unpaired surrogate.
pub(crate) const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

/// UTF-16 units staged on the stack on their way to a UTF-16LE byte buffer.
pub(crate) const STAGE: usize = 512;

/// Writes `rope` in `encoding` into `dst`, whose length must be exactly the
/// encoded size. Returns the bytes written.
pub(crate) fn write<R: Rope + ?Sized>(rope: &R, encoding: Encoding, dst: &mut [u8]) -> usize {
    let mut out = Out { dst, pos: 0 };
    let mut joiner = Joiner::default();
    let _ = rope.for_each_piece(&mut |p| {
        match (encoding, p) {
            (Encoding::Utf8, Piece::OneByte(b)) => {
                joiner.other(b.len(), &mut |j| out.utf8_joined(j));
                let n = convert_latin1_to_utf8(b, out.rest());
                out.pos += n;
            }
            (Encoding::Utf8, Piece::Utf8(s)) => {
                joiner.other(s.len(), &mut |j| out.utf8_joined(j));
                out.put(s.as_bytes());
            }
            (Encoding::Utf8, Piece::TwoByte(u)) => joiner.two_byte(u, &mut |j| out.utf8_joined(j)),
            (Encoding::Latin1 | Encoding::Ascii, Piece::OneByte(b)) => out.put(b),
            (Encoding::Latin1 | Encoding::Ascii, Piece::Utf8(s)) => {
                let n = convert_str_to_latin1_lossy(s, out.rest());
                out.pos += n;
            }
            (Encoding::Latin1 | Encoding::Ascii, Piece::TwoByte(u)) => {
                let n = convert_utf16_to_latin1_lossy(u, out.rest());
                out.pos += n;
            }
            (Encoding::Utf16Le, Piece::OneByte(b)) => {
                for chunk in b.chunks(STAGE) {
                    let mut stage = [0u16; STAGE];
                    encoding_rs::mem::convert_latin1_to_utf16(chunk, &mut stage);
                    out.put_units(&stage[..chunk.len()]);
                }
            }
            (Encoding::Utf16Le, Piece::Utf8(s)) => {
                let mut rest = s;
                while !rest.is_empty() {
                    let chunk = &rest[..floor_char_boundary(rest, STAGE)];
                    let mut stage = [0u16; STAGE];
                    let n = encoding_rs::mem::convert_str_to_utf16(chunk, &mut stage);
                    out.put_units(&stage[..n]);
                    rest = &rest[chunk.len()..];
                }
            }
            (Encoding::Utf16Le, Piece::TwoByte(u)) => out.put_units(u),
        }
        ControlFlow::Continue(())
    });
    joiner.finish(&mut |j| out.utf8_joined(j));
    out.pos
}

/// The destination and how much of it is written.
struct Out<'d> {
    dst: &'d mut [u8],
    pos: usize,
}

impl Out<'_> {
    fn rest(&mut self) -> &mut [u8] {
        &mut self.dst[self.pos..]
    }

    fn put(&mut self, bytes: &[u8]) {
        self.dst[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
    }

    /// Code units as UTF-16LE bytes.
    fn put_units(&mut self, units: &[u16]) {
        self.pos += put_utf16le(units, &mut self.dst[self.pos..]);
    }

    /// What the [`Joiner`] hands on, as UTF-8.
    fn utf8_joined(&mut self, j: Joined<'_>) {
        match j {
            Joined::Pair(high, low) => {
                let c = char::from_u32(surrogate::pair_code_point(high, low))
                    .expect("a surrogate pair is a valid character");
                let n = c.encode_utf8(self.rest()).len();
                self.pos += n;
            }
            Joined::Lone(_) => self.put(REPLACEMENT),
            Joined::Units(u) => {
                let n = convert_utf16_to_utf8(u, self.rest());
                self.pos += n;
            }
        }
    }
}

/// The largest char boundary of `s` at or below `max` (0 when `max` is
/// smaller than the first character; a `max` of at least 4 always takes
/// one).
pub(crate) fn floor_char_boundary(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    let mut i = max;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Writes `units` as UTF-16LE at the start of `dst`, which needs
/// `2 * units.len()` bytes (of any alignment). Returns the bytes written.
pub(crate) fn put_utf16le(units: &[u16], dst: &mut [u8]) -> usize {
    let dst = &mut dst[..2 * units.len()];
    for (d, u) in dst.chunks_exact_mut(2).zip(units) {
        d.copy_from_slice(&u.to_le_bytes());
    }
    dst.len()
}

/// Latin-1 to UTF-8. `dst` needs `src.len()` bytes plus one per byte ≥ 0x80.
/// Returns the bytes written.
///
/// # Panics
/// If `dst` is shorter than that.
pub(crate) fn convert_latin1_to_utf8(src: &[u8], dst: &mut [u8]) -> usize {
    convert_all(src, dst, encoding_rs::mem::convert_latin1_to_utf8_partial)
}

/// Runs one of encoding_rs's `_partial` converters until all of `src` is
/// converted (with the exact room it needs, one call normally does it all)
/// and returns the bytes written.
fn convert_all<T>(
    src: &[T],
    dst: &mut [u8],
    partial: fn(&[T], &mut [u8]) -> (usize, usize),
) -> usize {
    let (mut read, mut written) = (0, 0);
    while read < src.len() {
        let (r, w) = partial(&src[read..], &mut dst[written..]);
        assert!(r > 0, "destination shorter than the encoded size");
        read += r;
        written += w;
    }
    written
}

/// UTF-16 to UTF-8, unpaired surrogates as U+FFFD. `dst` needs the exact
/// UTF-8 length ([`surrogate::utf8_len`]). Returns the bytes written.
///
/// # Panics
/// If `dst` is shorter than that.
pub(crate) fn convert_utf16_to_utf8(src: &[u16], dst: &mut [u8]) -> usize {
    convert_all(src, dst, encoding_rs::mem::convert_utf16_to_utf8_partial)
}

/// UTF-8 to Node's latin1: the low byte of each UTF-16 code unit. `dst` needs
/// one byte per UTF-16 code unit. Returns the bytes written.
///
/// ASCII runs are found and copied by encoding_rs's word-at-a-time scan; the
/// other characters go one by one (encoding_rs's own conversion wants as
/// much room as the source has bytes, which an exactly sized destination
/// does not have).
pub(crate) fn convert_str_to_latin1_lossy(src: &str, dst: &mut [u8]) -> usize {
    let bytes = src.as_bytes();
    let (mut read, mut written) = (0, 0);
    while read < bytes.len() {
        let ascii = encoding_rs::Encoding::ascii_valid_up_to(&bytes[read..]);
        dst[written..written + ascii].copy_from_slice(&bytes[read..read + ascii]);
        read += ascii;
        written += ascii;
        let Some(c) = src[read..].chars().next() else {
            break;
        };
        let mut units = [0u16; 2];
        for u in c.encode_utf16(&mut units) {
            dst[written] = *u as u8;
            written += 1;
        }
        read += c.len_utf8();
    }
    written
}

/// UTF-16 to Node's latin1: the low byte of each code unit (exact for
/// U+0000..=U+00FF). `dst` needs `src.len()` bytes. Returns `src.len()`.
///
/// Hand-written because encoding_rs leaves the output for units above 0xFF
/// unspecified; the loop vectorises.
pub(crate) fn convert_utf16_to_latin1_lossy(src: &[u16], dst: &mut [u8]) -> usize {
    for (d, &u) in dst[..src.len()].iter_mut().zip(src) {
        *d = u as u8;
    }
    src.len()
}
