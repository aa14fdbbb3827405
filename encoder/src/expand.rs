//! Path 2, one-byte text to UTF-8 by back-of-buffer expansion: the
//! method is documented on [`crate::Path::Expand`].

use std::ops::ControlFlow;

use crate::rope::{Piece, Rope, Shape};

/// Writes `rope` — one-byte and UTF-8 pieces only — as UTF-8 into `dst`,
/// whose length must be exactly the encoded size. Returns `dst.len()`.
pub(crate) fn write<R: Rope + ?Sized>(rope: &R, shape: Shape, dst: &mut [u8]) -> usize {
    let copied = shape.one_byte + shape.utf8;
    debug_assert_eq!(
        shape.two_byte, 0,
        "the expansion path takes no two-byte pieces"
    );
    // The region is exactly n + h bytes, so the copy starts at h.
    let start = dst.len() - copied;

    // Step 1: the pieces, as they are, to the tail.
    let copied_now = crate::encode::copy_pieces(rope, &mut dst[start..]);
    debug_assert_eq!(copied_now, copied);

    // Step 2: expand forward. Without UTF-8 pieces the whole tail is
    // Latin-1 and one call expands it; otherwise the pieces are walked again
    // to tell the bytes to expand from the bytes to move.
    let (mut r, mut w) = (start, 0);
    if shape.utf8 == 0 {
        (r, w) = expand_latin1(dst, r, dst.len(), w);
    } else {
        let _ = rope.for_each_piece(&mut |p| {
            if w == r {
                // Every two-byte character is written: the rest is in place.
                return ControlFlow::Break(());
            }
            match p {
                Piece::OneByte(b) => (r, w) = expand_latin1(dst, r, r + b.len(), w),
                Piece::Utf8(s) => {
                    dst.copy_within(r..r + s.len(), w);
                    r += s.len();
                    w += s.len();
                }
                Piece::TwoByte(_) => {}
            }
            ControlFlow::Continue(())
        });
    }
    debug_assert_eq!(w, r);
    dst.len()
}

/// Expands the Latin-1 bytes `buf[r..end]` to UTF-8 at `buf[w..]`, in place,
/// and returns the new `(r, w)`.
///
/// **The writer never overtakes the reader.** Before each byte is read,
/// `w = (r - start) + k`, where `k` counts the bytes ≥ 0x80 already read. The
/// region was sized so that `start = h`, the total of such bytes, and `k ≤ h`;
/// hence `w ≤ r`. Reading a byte ≥ 0x80 writes `buf[w]` and `buf[w + 1]`, and
/// since `k + 1 ≤ h` still holds after it, `w + 1 ≤ r`: the second write lands
/// at most on the byte just read, never on one not yet read. ASCII runs are
/// moved with `copy_within` (memmove), which is correct for any overlap.
fn expand_latin1(buf: &mut [u8], mut r: usize, end: usize, mut w: usize) -> (usize, usize) {
    while r < end {
        if w == r {
            // k == h: no byte ≥ 0x80 remains, everything is in place.
            return (end, end);
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
    (r, w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::Latin1;

    fn expand(pieces: &[&[u8]]) -> Vec<u8> {
        let ropes: Vec<Latin1<&[u8]>> = pieces.iter().map(|p| Latin1(*p)).collect();
        let parts: Vec<&dyn Rope> = ropes.iter().map(|r| r as &dyn Rope).collect();
        let rope: &[&dyn Rope] = &parts;
        let n: usize = pieces.iter().map(|p| p.len()).sum();
        let h: usize = pieces
            .iter()
            .map(|p| crate::measure::count_high_bytes(p))
            .sum();
        let mut dst = vec![0u8; n + h];
        assert_eq!(write(&rope, rope.shape(), &mut dst), n + h);
        dst
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
}
