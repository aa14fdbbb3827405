//! Path 2, one-byte text to UTF-8: the method is documented on
//! [`crate::EncodePath::Expand`]. A rope of one-byte pieces only goes through
//! the thread's stage ([`write_one_byte`]); a rope that mixes them with
//! UTF-8 pieces, or a write inside a rope's walk, by back-of-buffer
//! expansion ([`write`]).

use std::cell::RefCell;
use std::ops::ControlFlow;

use crate::kernel;
use crate::rope::{Piece, Rope, Shape};

/// Bytes the thread's stage holds: one-byte text of at most this many
/// bytes is gathered whole, counted and converted in one walk whatever the
/// room in the destination ([`write_one_byte`]); longer text goes through
/// the stage in turns of this many bytes. 16 KiB stay in the first-level
/// cache with the destination beside them, and a kernel call per 16 KiB
/// costs nothing beside the conversion.
pub(crate) const STAGE_BYTES: usize = 16 * 1024;

thread_local! {
    /// The thread's stage for one-byte text on its way to UTF-8. Kept
    /// between writes, so that no write clears 16 KiB of stack; never
    /// allocated (a constant initialiser and no destructor).
    static STAGE: RefCell<[u8; STAGE_BYTES]> = const { RefCell::new([0; STAGE_BYTES]) };
}

/// Path 2 for a rope of one-byte pieces only (`s.utf8 == 0`,
/// `s.two_byte == 0`): short pieces are copied into the thread's stage and
/// converted from there into `dst` by the Latin-1 kernel, many pieces a
/// call; long pieces are converted straight from their own memory.
///
/// - `dst` holds the worst case `2n` (or `room` says it holds the exact
///   size, counted by a plan): one walk, the stage flushed whenever it is
///   full or a long piece comes.
/// - Otherwise, text of at most [`STAGE_BYTES`] is gathered whole, its
///   bytes ≥ 0x80 counted in the stage, and converted only if the result
///   fits: `Err(needed)` leaves `dst` untouched.
///
/// Source and destination never overlap, so the kernel converts whole
/// blocks whatever the room, where expanding in place ([`write`]) is held
/// to blocks that fit between its writer and its reader.
///
/// `None`, having written nothing that the caller keeps, when the thread's
/// stage is in use (a write inside a rope's walk), when text longer than
/// the stage would have to be counted first, or when the pieces do not
/// match the shape: the caller then takes [`write`] or a plan.
pub(crate) fn write_one_byte<R: Rope + ?Sized>(
    rope: &R,
    s: Shape,
    dst: &mut [u8],
    room: Room,
) -> Option<Result<usize, usize>> {
    debug_assert!(s.utf8 == 0 && s.two_byte == 0, "one-byte pieces only");
    let n = s.one_byte;
    STAGE.with(|stage| {
        let mut stage = stage.try_borrow_mut().ok()?;
        if room == Room::Enough || dst.len() >= n.saturating_mul(2) {
            return stream(rope, n, &mut stage, dst).map(Ok);
        }
        if n > STAGE_BYTES {
            return None;
        }
        let len = gather(rope, &mut stage[..n])?;
        let text = &stage[..len];
        let needed = len + kernel::count_high_bytes(text);
        let Some(out) = dst.get_mut(..needed) else {
            return Some(Err(needed));
        };
        let (read, written) = kernel::convert_latin1_to_utf8(text, out);
        debug_assert_eq!((read, written), (len, needed));
        Some(Ok(written))
    })
}

/// What the caller of [`write_one_byte`] knows of the destination's room.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Room {
    /// At least the encoded size: a plan counted it.
    Enough,
    /// Not known: checked against the worst case, or counted.
    Unknown,
}

/// Copies every piece of a one-byte rope into `stage`, which is exactly
/// as long as the rope's shape says. The copied length, or `None` when a
/// piece is not one-byte, the pieces overrun the shape, or a piece is long
/// enough to be converted where it lies ([`DIRECT_MIN`]): counting it
/// there and converting it straight costs less than copying it (a flat
/// string is such a rope).
fn gather<R: Rope + ?Sized>(rope: &R, stage: &mut [u8]) -> Option<usize> {
    let mut len = 0;
    let walked = rope.for_each_piece(&mut |p| {
        let short = p.len() < DIRECT_MIN;
        let (Piece::OneByte(b), Some(to), true) = (p, stage.get_mut(len..len + p.len()), short)
        else {
            return if p.is_empty() {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            };
        };
        kernel::copy_short(b, to);
        len += b.len();
        ControlFlow::Continue(())
    });
    walked.is_continue().then_some(len)
}

/// One walk of a one-byte rope of `n` bytes into `dst`, which holds its
/// UTF-8: short pieces staged, the stage converted when full or before a
/// long piece, long pieces converted where they lie. Bytes written, or
/// `None` when a piece is not one-byte (what was written is left for the
/// caller to write over).
///
/// # Panics
/// If `dst` is shorter than the encoded size.
fn stream<R: Rope + ?Sized>(
    rope: &R,
    n: usize,
    stage: &mut [u8; STAGE_BYTES],
    dst: &mut [u8],
) -> Option<usize> {
    // `len` bytes staged; `w` bytes written to `dst`.
    let (mut len, mut w) = (0, 0);
    let walked = rope.for_each_piece(&mut |p| {
        // The common case, kept small: one more short piece that fits.
        if let Piece::OneByte(b) = p {
            if b.len() < DIRECT_MIN {
                if let Some(to) = stage.get_mut(len..len + b.len()) {
                    kernel::copy_short(b, to);
                    len += b.len();
                    return ControlFlow::Continue(());
                }
            }
        }
        stream_piece(stage, &mut len, dst, &mut w, p)
    });
    if walked.is_break() {
        return None;
    }
    w += flush(&stage[..len], &mut dst[w..]);
    debug_assert!(w >= n, "{w} bytes written of {n} at least");
    Some(w)
}

/// A piece that [`stream`]'s common case did not take: the stage is
/// converted first, then the piece is staged (a short piece) or converted
/// straight (a long one). Out of line, to keep the walk's closure small.
#[inline(never)]
fn stream_piece(
    stage: &mut [u8; STAGE_BYTES],
    len: &mut usize,
    dst: &mut [u8],
    w: &mut usize,
    p: Piece<'_>,
) -> ControlFlow<()> {
    let Piece::OneByte(b) = p else {
        return if p.is_empty() {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        };
    };
    if *len > 0 {
        *w += flush(&stage[..*len], &mut dst[*w..]);
        *len = 0;
    }
    if b.len() < DIRECT_MIN {
        kernel::copy_short(b, &mut stage[..b.len()]);
        *len = b.len();
    } else {
        *w += flush(b, &mut dst[*w..]);
    }
    ControlFlow::Continue(())
}

/// Converts all of `text` (Latin-1) to UTF-8 at the start of `dst`.
///
/// # Panics
/// If `dst` cannot hold it.
fn flush(text: &[u8], dst: &mut [u8]) -> usize {
    let (read, written) = kernel::convert_latin1_to_utf8(text, dst);
    assert_eq!(
        read,
        text.len(),
        "destination shorter than the encoded size"
    );
    written
}

/// One-byte pieces at least this long are converted straight from their own
/// memory; shorter ones are gathered at the tail of the destination and
/// expanded together, one pass over contiguous bytes for many pieces. The
/// `shapes` group of the encoder bench chose it: below it, pieces converted
/// one each ran well behind flattening, and gathered ran about level with
/// it or ahead (docs/encoder-measurements.md has the table; the figures:
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

    /// Writes `pieces` through the stage into the worst case, into the
    /// exact size (counted by a plan, and not), and one byte short.
    fn staged(pieces: &[&[u8]]) -> Vec<u8> {
        let ropes: Vec<Latin1<&[u8]>> = pieces.iter().map(|p| Latin1(*p)).collect();
        let rope: &[Latin1<&[u8]>] = &ropes;
        let s = rope.shape();
        let expected = truth(pieces);
        let needed = expected.len();
        let mut worst = vec![0u8; 2 * s.one_byte];
        let written = write_one_byte(&rope, s, &mut worst, Room::Unknown);
        assert_eq!(written, Some(Ok(needed)), "worst case");
        assert_eq!(worst[..needed], expected[..], "worst case");
        let mut exact = vec![0u8; needed];
        let written = write_one_byte(&rope, s, &mut exact, Room::Enough);
        assert_eq!(written, Some(Ok(needed)), "planned");
        assert_eq!(exact, expected, "planned");
        let mut counted = vec![0u8; needed];
        let written = write_one_byte(&rope, s, &mut counted, Room::Unknown);
        let long = pieces.iter().any(|p| p.len() >= DIRECT_MIN);
        if s.one_byte <= STAGE_BYTES && !long {
            assert_eq!(written, Some(Ok(needed)), "gathered");
            assert_eq!(counted, expected, "gathered");
        } else if needed < 2 * s.one_byte {
            assert_eq!(written, None, "a long piece, or longer than the stage");
        }
        if needed > 0 && needed < 2 * s.one_byte {
            let mut short = vec![0xA5u8; needed - 1];
            let refused = write_one_byte(&rope, s, &mut short, Room::Unknown);
            if s.one_byte <= STAGE_BYTES && !long {
                assert_eq!(refused, Some(Err(needed)), "one byte short");
            }
            assert!(short.iter().all(|&b| b == 0xA5), "refused, untouched");
        }
        expected
    }

    #[test]
    fn staged_at_the_edges_of_the_stage_and_of_direct_min() {
        let text: Vec<u8> = (0..3 * STAGE_BYTES + 7)
            .map(|i| {
                if i % 7 == 3 {
                    0xE9
                } else {
                    b'a' + (i % 26) as u8
                }
            })
            .collect();
        let high = vec![0xFFu8; STAGE_BYTES + 1];
        for n in [
            0,
            1,
            STAGE_BYTES - 1,
            STAGE_BYTES,
            STAGE_BYTES + 1,
            text.len(),
        ] {
            for piece in [1, 7, DIRECT_MIN - 1, DIRECT_MIN, STAGE_BYTES, n.max(1)] {
                let pieces: Vec<&[u8]> = text[..n].chunks(piece).collect();
                staged(&pieces);
            }
        }
        // Short and long pieces in turn, the stage full mid-piece.
        let mut pieces: Vec<&[u8]> = Vec::new();
        for (i, chunk) in text.chunks(3 * DIRECT_MIN / 2).enumerate() {
            let (a, b) = chunk.split_at(if i % 2 == 0 { 5 } else { chunk.len() / 2 });
            pieces.extend([a, &b""[..], b]);
        }
        staged(&pieces);
        staged(&[&high[..]]);
        staged(&[&high[..STAGE_BYTES]]);
    }

    #[test]
    fn a_write_inside_a_walk_leaves_the_stage_to_the_outer_one() {
        let rope = Latin1(&b"caf\xe9"[..]);
        STAGE.with(|stage| {
            let _held = stage.borrow_mut();
            let mut dst = [0u8; 8];
            assert_eq!(
                write_one_byte(&rope, rope.shape(), &mut dst, Room::Unknown),
                None
            );
            // The tail path writes it instead.
            let written = crate::write(&rope, crate::Encoding::Utf8, crate::Mode::Strict, &mut dst);
            assert_eq!(written, Ok(5));
            assert_eq!(&dst[..5], "café".as_bytes());
        });
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
