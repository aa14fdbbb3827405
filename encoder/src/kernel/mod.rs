//! The conversion kernels: one per (piece kind, target encoding), each
//! converting as much of one piece as fits in a destination.
//!
//! Every kernel has the shape of encoding_rs's `_partial` converters: it
//! reads from the start of `src`, writes at the start of `dst`, stops before
//! the first character whose encoded form does not fit, and returns
//! `(read, written)` — source units read, bytes written. It never splits a
//! character, so with the room [`crate::size`] computes for the piece it
//! reads all of it. A surrogate pair is one character: a kernel that stops
//! between its halves stops before the high one.
//!
//! Two-byte sources given to these kernels never end with a high surrogate
//! that could pair with the next piece: the transcoding engine
//! ([`crate::transcode`]) holds such a unit back and joins it itself
//! ([`crate::surrogate::Joiner`]).
//!
//! With the `simdutf` feature, Latin-1 and UTF-16 to UTF-8 run on simdutf
//! ([`simd`]) in blocks that fit at their worst case, and encoding_rs
//! converts what is left exactly; the count of bytes ≥ 0x80 that sizes
//! Latin-1 as UTF-8 is simdutf's from [`COUNT_SIMD_MIN`] bytes. Latin-1 and
//! UTF-8 into utf16le run on simdutf straight into the destination when it
//! is aligned for `u16` (simdutf writes `char16_t`s), as a buffer from the
//! allocator is and stays (every unit written is two bytes); at an odd
//! address the Latin-1 loop, or UTF-8 through UTF-16 on the stack, write
//! the bytes. UTF-8 into Node's latin1 goes through UTF-16 on the stack
//! too: simdutf's own UTF-8 to Latin-1 refuses what Node's latin1
//! truncates. The kept benchmark (`cargo bench --bench encoder --
//! kernels`, in docs/encoder-measurements.md) chose each, and the lengths below which
//! encoding_rs or the loops here stay. The ASCII scans stay encoding_rs's:
//! they look for the end of one run between non-ASCII characters, mostly
//! short, and on short runs encoding_rs's scan was faster. The figures:
//! docs/measurements.md, "Kernel thresholds".

#[cfg(feature = "simdutf")]
pub(crate) mod simd;

/// Latin-1 blocks shorter than this go to encoding_rs even with simdutf:
/// below it, the call into simdutf costs more than it saves. The threshold
/// comes from the `kernels` group of the encoder bench:
/// docs/measurements.md, "Kernel thresholds".
#[cfg(feature = "simdutf")]
pub(crate) const LATIN1_SIMD_MIN: usize = 8;

/// The same for UTF-16 blocks, from the same `kernels` group:
/// docs/measurements.md, "Kernel thresholds".
#[cfg(feature = "simdutf")]
const UTF16_SIMD_MIN: usize = 16;

/// Converts `src` in whole blocks of at least `min` units with `simd`, each
/// block as long as what is left of `dst` holds at `worst` bytes per unit
/// (`cut` shortens a block so that it does not part a surrogate pair), then
/// hands the rest to `exact`, which converts as much as fits. So a
/// destination with room for the worst case takes one simdutf call, and an
/// exactly sized one is filled to its last byte by blocks that shrink as the
/// room does.
#[cfg(feature = "simdutf")]
fn in_blocks<T>(
    src: &[T],
    dst: &mut [u8],
    min: usize,
    worst: usize,
    cut: fn(&[T], usize) -> usize,
    simd: fn(&[T], &mut [u8]) -> usize,
    exact: fn(&[T], &mut [u8]) -> (usize, usize),
) -> (usize, usize) {
    let (mut read, mut written) = (0, 0);
    while read < src.len() {
        let take = cut(&src[read..], (dst.len() - written) / worst);
        if take < min {
            break;
        }
        written += simd(&src[read..read + take], &mut dst[written..]);
        read += take;
    }
    let (r, w) = exact(&src[read..], &mut dst[written..]);
    (read + r, written + w)
}

/// UTF-16 units staged on the stack on their way to a UTF-16LE byte buffer.
const STAGE: usize = 512;

/// Copies `src` to the start of `dst`, which must be at least as long.
///
/// Ropes of many short pieces copy a few bytes (or units) at a time, where a
/// call to `memcpy` costs more than the copy: up to 16 elements are copied
/// by fixed-size moves (the first and last 1, 4 or 8, overlapping in the
/// middle), which compile to plain loads and stores.
#[inline(always)]
pub(crate) fn copy_short<T: Copy>(src: &[T], dst: &mut [T]) {
    let len = src.len();
    let to = &mut dst[..len];
    match len {
        0 => {}
        1..=3 => {
            to[0] = src[0];
            to[len / 2] = src[len / 2];
            to[len - 1] = src[len - 1];
        }
        4..=7 => {
            to[..4].copy_from_slice(&src[..4]);
            to[len - 4..].copy_from_slice(&src[len - 4..]);
        }
        8..=16 => {
            to[..8].copy_from_slice(&src[..8]);
            to[len - 8..].copy_from_slice(&src[len - 8..]);
        }
        _ => to.copy_from_slice(src),
    }
}

/// One-byte text copied as it is: latin1 into latin1 (and ASCII into
/// either). Reads `min(src.len(), dst.len())`.
pub(crate) fn copy_bytes(src: &[u8], dst: &mut [u8]) -> (usize, usize) {
    let n = src.len().min(dst.len());
    copy_short(&src[..n], dst);
    (n, n)
}

/// UTF-8 text copied as it is, up to the last whole character that fits.
pub(crate) fn copy_str(src: &str, dst: &mut [u8]) -> (usize, usize) {
    let n = floor_char_boundary(src, dst.len());
    copy_short(&src.as_bytes()[..n], dst);
    (n, n)
}

/// Latin-1 to UTF-8: one byte per byte below 0x80, two per byte above.
pub(crate) fn convert_latin1_to_utf8(src: &[u8], dst: &mut [u8]) -> (usize, usize) {
    #[cfg(feature = "simdutf")]
    if src.len() >= LATIN1_SIMD_MIN {
        // Room for the text as ASCII but not for the worst case (an exactly
        // sized destination): one call when the text's own UTF-8 fits,
        // rather than blocks that halve with the room. Never where the
        // room is shorter than the text, so a long piece written frame by
        // frame is not counted again per frame.
        if dst.len() >= src.len() && dst.len() < 2 * src.len() {
            if let Some(written) = simd::latin1_to_utf8_fitting(src, dst) {
                return (src.len(), written);
            }
        }
        return in_blocks(
            src,
            dst,
            LATIN1_SIMD_MIN,
            2,
            |s, max| s.len().min(max),
            simd::latin1_to_utf8,
            encoding_rs::mem::convert_latin1_to_utf8_partial,
        );
    }
    encoding_rs::mem::convert_latin1_to_utf8_partial(src, dst)
}

/// Latin-1 to UTF-16LE: two bytes per byte, into a destination of any
/// alignment.
pub(crate) fn convert_latin1_to_utf16le(src: &[u8], dst: &mut [u8]) -> (usize, usize) {
    let n = src.len().min(dst.len() / 2);
    #[cfg(feature = "simdutf")]
    if n >= LATIN1_UTF16_SIMD_MIN {
        if let Some(written) = simd::latin1_to_utf16le(&src[..n], &mut dst[..2 * n]) {
            return (n, written);
        }
    }
    for (d, &x) in dst.chunks_exact_mut(2).zip(&src[..n]) {
        d.copy_from_slice(&[x, 0]);
    }
    (n, 2 * n)
}

/// UTF-8 to UTF-16LE: two bytes per unit (four for a character outside the
/// BMP), into a destination of any alignment.
pub(crate) fn convert_str_to_utf16le(src: &str, dst: &mut [u8]) -> (usize, usize) {
    let (mut read, mut written) = (0, 0);
    // Straight into the destination when it is aligned for units, in one
    // block of as many bytes as units fit; what is left (the room ran
    // short) goes on below.
    #[cfg(feature = "simdutf")]
    {
        let n = floor_char_boundary(src, dst.len() / 2);
        if n >= UTF8_SIMD_MIN {
            if let Some(w) = simd::utf8_to_utf16le(&src[..n], dst) {
                (read, written) = (n, w);
            }
        }
    }
    let mut rest = &src[read..];
    while !rest.is_empty() {
        let room = dst.len() - written;
        // Never more bytes than units fit: a chunk's UTF-16 takes at most
        // one unit per byte.
        let n = floor_char_boundary(rest, STAGE.min(room / 2));
        if n == 0 {
            // Room for less than the next character's bytes, maybe still
            // for its units.
            let c = rest.chars().next().expect("not empty");
            let mut units = [0; 2];
            let units = c.encode_utf16(&mut units);
            if 2 * units.len() > room {
                break;
            }
            written += put_utf16le(units, &mut dst[written..]);
            read += c.len_utf8();
            rest = &rest[c.len_utf8()..];
            continue;
        }
        written += through_stage(&rest[..n], &mut dst[written..], put_utf16le);
        read += n;
        rest = &rest[n..];
    }
    (read, written)
}

/// UTF-8 of at most [`STAGE`] bytes converted to UTF-16 units on the stack,
/// then handed to `put`, which writes them at the start of `dst` and
/// returns the bytes written. A short chunk gets a short stage: clearing
/// 1 KiB of stack for a piece of a few bytes cost more than converting it.
fn through_stage(src: &str, dst: &mut [u8], put: fn(&[u16], &mut [u8]) -> usize) -> usize {
    fn staged<const N: usize>(
        src: &str,
        dst: &mut [u8],
        put: fn(&[u16], &mut [u8]) -> usize,
    ) -> usize {
        let mut stage = [0u16; N];
        let units = convert_str_to_units(src, &mut stage);
        put(&stage[..units], dst)
    }
    if src.len() <= 64 {
        staged::<64>(src, dst, put)
    } else {
        staged::<STAGE>(src, dst, put)
    }
}

/// UTF-8 to UTF-16 units in this machine's byte order, into `dst`, which
/// holds one unit per byte of `src`. Returns the units written.
fn convert_str_to_units(src: &str, dst: &mut [u16]) -> usize {
    #[cfg(feature = "simdutf")]
    if src.len() >= UTF8_SIMD_MIN {
        return simd::utf8_to_units(src, dst);
    }
    encoding_rs::mem::convert_str_to_utf16(src, dst)
}

/// UTF-8 blocks shorter than this go to encoding_rs even with simdutf: on
/// shorter text encoding_rs is faster, at this length the two are even,
/// and on longer text simdutf is well ahead. The threshold comes from
/// `kernels/utf8_to_utf16` of the encoder bench: docs/measurements.md,
/// "Kernel thresholds".
#[cfg(feature = "simdutf")]
const UTF8_SIMD_MIN: usize = 32;

/// Latin-1 blocks shorter than this are widened to UTF-16LE by the loop of
/// [`convert_latin1_to_utf16le`] even with simdutf: on short blocks the
/// loop is faster, on long ones simdutf. The threshold comes from
/// `kernels/latin1_to_utf16` of the encoder bench: docs/measurements.md,
/// "Kernel thresholds".
#[cfg(feature = "simdutf")]
const LATIN1_UTF16_SIMD_MIN: usize = 128;

/// Staged UTF-8 pieces as the text they are. Whole `&str` pieces joined
/// are UTF-8, so this never fails; it is checked all the same, as this
/// crate keeps `unsafe` to the calls into simdutf. With simdutf, by its
/// validator: the standard library's took a large share of the time of
/// many short `&str` pieces into utf16le (a profile of a cell of the
/// `shapes` group: docs/measurements.md, "Validating staged UTF-8").
///
/// # Panics
/// If `bytes` is not UTF-8.
pub(crate) fn staged_str(bytes: &[u8]) -> &str {
    #[cfg(feature = "simdutf")]
    let text = simd::as_str(bytes);
    #[cfg(not(feature = "simdutf"))]
    let text = std::str::from_utf8(bytes).ok();
    text.expect("staged UTF-8 pieces are UTF-8")
}

/// UTF-8 to Node's latin1: the low byte of each UTF-16 code unit, one byte
/// per unit (two for a character outside the BMP).
///
/// With simdutf, text from [`UTF8_SIMD_MIN`] bytes goes in blocks through
/// UTF-16 on the stack ([`through_stage`], each unit then narrowed by
/// [`put_low_bytes`]), each block as many bytes as fit (a character takes
/// at most as many units as it has bytes). What is left, and all of it
/// without simdutf, goes by [`str_to_latin1_by_char`].
pub(crate) fn convert_str_to_latin1_lossy(src: &str, dst: &mut [u8]) -> (usize, usize) {
    #[cfg(feature = "simdutf")]
    if src.len() >= UTF8_SIMD_MIN {
        // The ASCII start of the text is copied as it is: all of it, for
        // ASCII text written unmeasured, which a plan would have copied.
        let ascii = simd::ascii_prefix(&src.as_bytes()[..src.len().min(dst.len())]);
        dst[..ascii].copy_from_slice(&src.as_bytes()[..ascii]);
        let (mut read, mut written) = (ascii, ascii);
        while read < src.len() {
            // As many bytes as fit: a character takes at most as many units
            // as it has bytes.
            let n = floor_char_boundary(&src[read..], STAGE.min(dst.len() - written));
            if n < UTF8_SIMD_MIN {
                break;
            }
            written += through_stage(&src[read..read + n], &mut dst[written..], put_low_bytes);
            read += n;
        }
        let (r, w) = str_to_latin1_by_char(&src[read..], &mut dst[written..]);
        return (read + r, written + w);
    }
    str_to_latin1_by_char(src, dst)
}

/// [`convert_str_to_latin1_lossy`] one character at a time: ASCII runs are
/// found and copied by encoding_rs's word-at-a-time scan, the other
/// characters go one by one (encoding_rs's own conversion wants as much
/// room as the source has bytes, which an exactly sized destination does
/// not have).
fn str_to_latin1_by_char(src: &str, dst: &mut [u8]) -> (usize, usize) {
    let bytes = src.as_bytes();
    let (mut read, mut written) = (0, 0);
    while read < bytes.len() {
        // Scan no further than fits, so that a long ASCII piece written in
        // small steps is scanned once, not per step.
        let end = bytes.len().min(read + dst.len() - written);
        let ascii = encoding_rs::Encoding::ascii_valid_up_to(&bytes[read..end]);
        copy_short(&bytes[read..read + ascii], &mut dst[written..]);
        read += ascii;
        written += ascii;
        let Some(c) = src[read..].chars().next() else {
            break;
        };
        let mut units = [0; 2];
        let units = c.encode_utf16(&mut units);
        let Some(to) = dst.get_mut(written..written + units.len()) else {
            break;
        };
        for (d, &u) in to.iter_mut().zip(units.iter()) {
            *d = u as u8;
        }
        written += units.len();
        read += c.len_utf8();
    }
    (read, written)
}

/// UTF-16 to UTF-8, unpaired surrogates as U+FFFD: 1, 2 or 3 bytes per
/// unit, 4 per pair ([`crate::surrogate::utf8_len`] counts them).
pub(crate) fn convert_utf16_to_utf8(src: &[u16], dst: &mut [u8]) -> (usize, usize) {
    // encoding_rs stops before a pair that does not fit, never inside it.
    #[cfg(feature = "simdutf")]
    if src.len() >= UTF16_SIMD_MIN {
        return in_blocks(
            src,
            dst,
            UTF16_SIMD_MIN,
            3,
            keep_pairs,
            simd::utf16_to_utf8,
            encoding_rs::mem::convert_utf16_to_utf8_partial,
        );
    }
    encoding_rs::mem::convert_utf16_to_utf8_partial(src, dst)
}

/// Bytes ≥ 0x80: the Latin-1 characters that take two bytes in UTF-8.
pub(crate) fn count_high_bytes(bytes: &[u8]) -> usize {
    #[cfg(feature = "simdutf")]
    if bytes.len() >= COUNT_SIMD_MIN {
        return simd::count_high_bytes(bytes);
    }
    // A `u8` accumulator per chunk of 255 lets the loop vectorise with one
    // byte per lane, far faster than a `usize` sum on baseline x86-64
    // (docs/measurements.md, "Kernel thresholds").
    bytes
        .chunks(255)
        .map(|c| usize::from(c.iter().fold(0u8, |n, &b| n + (b >> 7))))
        .sum()
}

/// From this length on, simdutf counts the bytes ≥ 0x80 faster than the
/// loop of [`count_high_bytes`]; below it, the loop is faster. The
/// threshold comes from the `kernels` group of the encoder bench:
/// docs/measurements.md, "Kernel thresholds".
#[cfg(feature = "simdutf")]
const COUNT_SIMD_MIN: usize = 128;

/// UTF-16 to UTF-16LE: two bytes per unit, into a destination of any
/// alignment.
pub(crate) fn convert_utf16_to_utf16le(src: &[u16], dst: &mut [u8]) -> (usize, usize) {
    let n = keep_pairs(src, dst.len() / 2);
    (n, put_utf16le(&src[..n], dst))
}

/// UTF-16 to Node's latin1: the low byte of each code unit (exact for
/// U+0000..=U+00FF), one byte per unit.
///
/// Hand-written because encoding_rs leaves the output for units above 0xFF
/// unspecified; the loop vectorises.
pub(crate) fn convert_utf16_to_latin1_lossy(src: &[u16], dst: &mut [u8]) -> (usize, usize) {
    let n = keep_pairs(src, dst.len());
    (n, put_low_bytes(&src[..n], dst))
}

/// How many of `units` to take when `max` fit: `max` or all, one fewer when
/// that would part a surrogate pair.
fn keep_pairs(units: &[u16], max: usize) -> usize {
    if max >= units.len() {
        return units.len();
    }
    if max > 0 && is_pair(units[max - 1], units[max]) {
        max - 1
    } else {
        max
    }
}

fn is_pair(high: u16, low: u16) -> bool {
    crate::surrogate::is_high(high) && crate::surrogate::is_low(low)
}

/// The largest char boundary of `s` at or below `max` (0 when `max` is
/// smaller than the first character; a `max` of at least 4 always takes
/// one).
fn floor_char_boundary(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    let mut i = max;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Writes the low byte of each of `units` (Node's latin1) at the start of
/// `dst`, which needs `units.len()` bytes; the loop vectorises. Returns the
/// bytes written.
fn put_low_bytes(units: &[u16], dst: &mut [u8]) -> usize {
    let dst = &mut dst[..units.len()];
    for (d, &u) in dst.iter_mut().zip(units) {
        *d = u as u8;
    }
    dst.len()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `(read, written)` of the longest prefix, among a kernel's whole
    /// characters `steps`, whose bytes fit in `room`.
    fn fitting(steps: &[(usize, usize)], room: usize) -> (usize, usize) {
        *steps.iter().rev().find(|s| s.1 <= room).unwrap()
    }

    #[test]
    fn short_copies_copy_every_byte_once() {
        let src: Vec<u8> = (1..=40).collect();
        for len in 0..=40 {
            let mut dst = [0u8; 41];
            copy_short(&src[..len], &mut dst);
            assert_eq!(&dst[..len], &src[..len], "len {len}");
            assert!(
                dst[len..].iter().all(|&b| b == 0),
                "len {len}: wrote past the end"
            );
        }
    }

    /// Text long enough for the simdutf blocks, written into every room and
    /// both alignments of the destination: each kernel writes the longest
    /// prefix of whole characters that fits, byte for byte as the standard
    /// library encodes it.
    #[test]
    fn long_text_is_converted_up_to_what_fits_at_any_alignment() {
        let s: String = "abc\u{e9}d\u{20AC}efgh\u{1F600}ijklmnop".repeat(9);
        let utf16: Vec<u16> = s.encode_utf16().collect();
        let latin1: Vec<u8> = utf16.iter().map(|&u| u as u8).collect();
        let utf16le: Vec<u8> = utf16.iter().flat_map(|u| u.to_le_bytes()).collect();
        // Per character: (UTF-8 bytes, UTF-16 units) read so far.
        let mut steps = vec![(0, 0)];
        for c in s.chars() {
            let (b, u) = *steps.last().unwrap();
            steps.push((b + c.len_utf8(), u + c.len_utf16()));
        }
        let one_byte: Vec<u8> = (0..=255u8).cycle().take(300).collect();
        let widened: Vec<u8> = one_byte.iter().flat_map(|&b| [b, 0]).collect();
        let mut buf = vec![0u8; 2 * s.len() + 2];
        for skew in 0..2 {
            for room in 0..=2 * s.len() {
                let dst = &mut buf[skew..skew + room];
                let (r, w) = fitting(&steps, room / 2);
                let (r, w) = (r, 2 * w);
                assert_eq!(convert_str_to_utf16le(&s, dst), (r, w), "room {room}");
                assert_eq!(&dst[..w], &utf16le[..w], "utf16le, room {room}");
                let (r, w) = fitting(&steps, room);
                assert_eq!(convert_str_to_latin1_lossy(&s, dst), (r, w), "room {room}");
                assert_eq!(&dst[..w], &latin1[..w], "latin1, room {room}");
                let n = one_byte.len().min(room / 2);
                assert_eq!(convert_latin1_to_utf16le(&one_byte, dst), (n, 2 * n));
                assert_eq!(&dst[..2 * n], &widened[..2 * n], "widened, room {room}");
            }
        }
    }

    #[test]
    fn kernels_stop_before_a_character_that_does_not_fit() {
        // "é€😀": 2, 3 and 4 bytes of UTF-8; 1, 1 and 2 units of UTF-16.
        let s = "\u{e9}\u{20AC}\u{1F600}";
        let units: Vec<u16> = s.encode_utf16().collect();
        for room in 0..=10 {
            let mut dst = [0u8; 10];
            let dst = &mut dst[..room];
            let by_char = [(0, 0), (2, 2), (5, 5), (9, 9)];
            assert_eq!(copy_str(s, dst), fitting(&by_char, room));
            let by_char = [(0, 0), (2, 2), (5, 4), (9, 8)];
            assert_eq!(convert_str_to_utf16le(s, dst), fitting(&by_char, room));
            let by_char = [(0, 0), (2, 1), (5, 2), (9, 4)];
            assert_eq!(convert_str_to_latin1_lossy(s, dst), fitting(&by_char, room));
            let by_char = [(0, 0), (1, 2), (2, 4), (4, 8)];
            assert_eq!(
                convert_utf16_to_utf16le(&units, dst),
                fitting(&by_char, room)
            );
            let by_char = [(0, 0), (1, 1), (2, 2), (4, 4)];
            assert_eq!(
                convert_utf16_to_latin1_lossy(&units, dst),
                fitting(&by_char, room)
            );
            let by_char = [(0, 0), (1, 2), (2, 5), (4, 9)];
            assert_eq!(convert_utf16_to_utf8(&units, dst), fitting(&by_char, room));
        }
    }
}
