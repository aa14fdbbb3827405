//! Path 2, one-byte text to UTF-8 by back-of-buffer expansion: the
//! method is documented on [`crate::Path::Expand`].

use std::ops::ControlFlow;

use crate::kernel;
use crate::rope::{Piece, Rope, Shape};

/// One-byte pieces at least this long are converted straight from their own
/// memory; shorter ones are gathered at the tail of the destination and
/// expanded together, one pass over contiguous bytes for many pieces. The
/// `shapes` group of the encoder bench chose it: below it, pieces converted
/// one each ran well behind flattening, and gathered ran about level with
/// it or ahead (docs/encoder.md has the table; the figures:
/// docs/measurements.md, "Back-of-buffer expansion").
pub(crate) const DIRECT_MIN: usize = 1024;

/// Writes `rope` — one-byte and UTF-8 pieces only — as UTF-8 at the start of
/// `dst`, which holds at least the encoded size: exactly `n + h` (the text's
/// bytes, plus one per byte ≥ 0x80), or more, up to the worst case `2n`
/// that a caller who has not counted `h` provides. Returns the bytes written.
///
/// One walk over the pieces. The text is laid out as if copied whole to the
/// tail of `dst`, starting at `start = dst.len() − n`; the UTF-8 is written
/// from the front, at `w`, and `r` is where the not yet converted text
/// starts. A short one-byte piece is copied to its place in the tail and
/// waits; a long one-byte piece or a UTF-8 piece first has the waiting bytes
/// expanded, then is written at `w` straight from its own memory.
///
/// **The writer never overtakes the reader:** `w = (r − start) + k`, where
/// `k` counts the bytes ≥ 0x80 converted so far, and `k ≤ h ≤ start`, so
/// `w ≤ r` — writing a piece's UTF-8 at `w` never reaches the tail bytes
/// beyond it, which are still to be copied or converted.
pub(crate) fn write<R: Rope + ?Sized>(rope: &R, shape: Shape, dst: &mut [u8]) -> usize {
    debug_assert_eq!(
        shape.two_byte, 0,
        "the expansion path takes no two-byte pieces"
    );
    let start = dst.len() - (shape.one_byte + shape.utf8);
    // [r, end): copied to the tail, waiting to be expanded.
    let (mut r, mut end, mut w) = (start, start, 0);
    let _ = rope.for_each_piece(&mut |p| {
        match p {
            Piece::OneByte(b) if b.len() < DIRECT_MIN => {
                kernel::copy_short(b, &mut dst[end..]);
                end += b.len();
            }
            Piece::OneByte(b) => {
                w = expand_latin1(dst, r, end, w);
                // The piece's UTF-8 ends at or before the end of its place
                // in the tail (the invariant above), and what follows that
                // place is not written yet: all of `dst[w..]` is free.
                let (read, written) = kernel::convert_latin1_to_utf8(b, &mut dst[w..]);
                debug_assert_eq!(read, b.len());
                w += written;
                end += b.len();
                r = end;
            }
            Piece::Utf8(s) => {
                w = expand_latin1(dst, r, end, w);
                dst[w..w + s.len()].copy_from_slice(s.as_bytes());
                w += s.len();
                end += s.len();
                r = end;
            }
            Piece::TwoByte(_) => {}
        }
        ControlFlow::Continue(())
    });
    expand_latin1(dst, r, end, w)
}

/// Writes `rope` — one-byte pieces only — as UTF-8 at the start of `dst`,
/// which holds the worst case `2n`, in one walk: every piece is copied to
/// the front while its bytes ≥ 0x80 are counted, then the copy is expanded
/// in place from its end backwards. Returns the bytes written, `n + h`.
///
/// For short text, where a walk over the pieces costs more than the bytes
/// in them: the measured path walks twice (once to count `h`, once to
/// write), this once. The backward pass is scalar, so long text takes
/// [`write`] instead.
pub(crate) fn write_short<R: Rope + ?Sized>(rope: &R, dst: &mut [u8]) -> usize {
    let (mut n, mut h) = (0, 0);
    let _ = rope.for_each_piece(&mut |p| {
        if let Piece::OneByte(b) = p {
            kernel::copy_short(b, &mut dst[n..]);
            h += kernel::count_high_bytes(b);
            n += b.len();
        }
        debug_assert!(
            matches!(p, Piece::OneByte(_)) || p.is_empty(),
            "one-byte pieces only"
        );
        ControlFlow::Continue(())
    });
    expand_backwards(&mut dst[..n + h], n);
    n + h
}

/// Expands the Latin-1 bytes `buf[..n]` to UTF-8 in place, filling all of
/// `buf`, whose length is `n` plus the number of those bytes ≥ 0x80.
///
/// **The writer never overtakes the reader,** going backwards: with `k`
/// bytes ≥ 0x80 still unread in `buf[..r]`, the writer stands at
/// `w = r + k`. A byte read at `r − 1` is written at `w − 1` (ASCII,
/// `k` unchanged) or at `w − 2` and `w − 1` (`k` one less, so `w − 2 ≥ r − 1`):
/// it lands on the byte just read or after it, never on one not yet read.
/// At `w == r` no byte ≥ 0x80 is left and the rest is already in place.
fn expand_backwards(buf: &mut [u8], n: usize) {
    let (mut r, mut w) = (n, buf.len());
    while w > r {
        r -= 1;
        let b = buf[r];
        if b < 0x80 {
            w -= 1;
            buf[w] = b;
        } else {
            w -= 2;
            buf[w] = 0xC0 | (b >> 6);
            buf[w + 1] = 0x80 | (b & 0x3F);
        }
    }
}

/// Expands the Latin-1 bytes `buf[r..end]` to UTF-8 at `buf[w..]`, in place,
/// and returns where the writer ends.
///
/// **The writer never overtakes the reader.** Before each byte is read,
/// `w = (r - start) + k`, where `k` counts the bytes ≥ 0x80 already read
/// and `start ≥ h`, the total of such bytes ([`write`]); since `k ≤ h`,
/// `w ≤ r`. Reading a byte ≥ 0x80 writes `buf[w]` and `buf[w + 1]`, and
/// since `k + 1 ≤ h` still holds after it, `w + 1 ≤ r`: the second write lands
/// at most on the byte just read, never on one not yet read. ASCII runs are
/// moved with `copy_within` (memmove), which is correct for any overlap.
/// When `w == r` (only where the region is sized exactly, `start = h`), no
/// byte ≥ 0x80 is left and the rest is already in place.
fn expand_latin1(buf: &mut [u8], mut r: usize, end: usize, mut w: usize) -> usize {
    while r < end {
        if w == r {
            // k == h: no byte ≥ 0x80 remains, everything is in place.
            return end;
        }
        #[cfg(feature = "simdutf")]
        {
            // A block whose UTF-8, at two bytes per byte, fits between the
            // writer and the reader goes to simdutf whole: its source and
            // destination cannot overlap (`split_at_mut` makes that a
            // borrow, not an argument). The gap `r - w` is at least the
            // number of bytes ≥ 0x80 not yet read (exactly that in a region
            // sized exactly), so blocks are long where such bytes are many,
            // and the loop below takes the sparse rest.
            let take = (end - r).min((r - w) / 2);
            if take >= kernel::LATIN1_SIMD_MIN {
                let (written, unread) = buf.split_at_mut(r);
                w += kernel::simd::latin1_to_utf8(&unread[..take], &mut written[w..]);
                r += take;
                continue;
            }
        }
        let ascii = encoding_rs::Encoding::ascii_valid_up_to(&buf[r..end]);
        if ascii > 0 {
            buf.copy_within(r..r + ascii, w);
            r += ascii;
            w += ascii;
        }
        while r < end {
            let b = buf[r];
            if b < 0x80 {
                break;
            }
            buf[w] = 0xC0 | (b >> 6);
            buf[w + 1] = 0x80 | (b & 0x3F);
            w += 2;
            r += 1;
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::Latin1;

    /// Expands `pieces` into exactly `n + h` bytes and into the worst case
    /// `2n`, forwards and backwards, and checks that all give the same bytes.
    fn expand(pieces: &[&[u8]]) -> Vec<u8> {
        let ropes: Vec<Latin1<&[u8]>> = pieces.iter().map(|p| Latin1(*p)).collect();
        let parts: Vec<&dyn Rope> = ropes.iter().map(|r| r as &dyn Rope).collect();
        let rope: &[&dyn Rope] = &parts;
        let n: usize = pieces.iter().map(|p| p.len()).sum();
        let h: usize = pieces
            .iter()
            .map(|p| crate::kernel::count_high_bytes(p))
            .sum();
        let mut exact = vec![0u8; n + h];
        assert_eq!(write(&rope, rope.shape(), &mut exact), n + h);
        let mut worst = vec![0u8; 2 * n];
        assert_eq!(write(&rope, rope.shape(), &mut worst), n + h);
        assert_eq!(worst[..n + h], exact[..], "worst-case room");
        let mut short = vec![0u8; 2 * n];
        assert_eq!(write_short(&rope, &mut short), n + h);
        assert_eq!(short[..n + h], exact[..], "copied, then expanded backwards");
        exact
    }
    fn truth(pieces: &[&[u8]]) -> Vec<u8> {
        let s: String = pieces.concat().iter().map(|&b| char::from(b)).collect();
        s.into_bytes()
    }

    #[test]
    fn edges_of_the_invariant() {
        let all_high: Vec<u8> = (0x80..=0xFF).collect();
        let cases: Vec<Vec<&[u8]>> = vec![
            vec![&all_high],                   // every byte ≥ 0x80: w == r only at the end
            vec![b"plain ascii"],              // none: w == r from the start
            vec![b"\xe9abcdef"],               // one, at the start: done after one byte
            vec![b"abcdef\xff"],               // one, at the end: w == r - 1 all along
            vec![b"\xe9", b"", b"x", b"\xff"], // split over pieces, with an empty one
            vec![b"", b""],
        ];
        for pieces in cases {
            assert_eq!(expand(&pieces), truth(&pieces), "{pieces:?}");
        }
    }

    #[test]
    fn long_pieces_converted_in_place_between_gathered_ones() {
        // Pieces on both sides of DIRECT_MIN, dense and sparse in bytes
        // ≥ 0x80, in every order: the long ones are written straight from
        // their memory between runs of gathered short ones.
        let dense: Vec<u8> = (0x80..=0xFF).cycle().take(3 * DIRECT_MIN).collect();
        let sparse: Vec<u8> = (0..5 * DIRECT_MIN)
            .map(|i| {
                if i % 97 == 0 {
                    0xE9
                } else {
                    b'a' + (i % 26) as u8
                }
            })
            .collect();
        let ascii = vec![b'z'; DIRECT_MIN];
        let short: &[&[u8]] = &[b"\xe9t\xe9", b"", b"ab", b"\xff"];
        for order in [[0, 1, 2], [1, 2, 0], [2, 0, 1]] {
            let long: [&[u8]; 3] = [&dense, &sparse, &ascii];
            let mut pieces: Vec<&[u8]> = Vec::new();
            for i in order {
                pieces.extend_from_slice(short);
                pieces.push(long[i]);
            }
            pieces.extend_from_slice(short);
            assert_eq!(expand(&pieces), truth(&pieces), "order {order:?}");
        }
    }
}
