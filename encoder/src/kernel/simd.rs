//! The calls into simdutf (feature `simdutf`): the crate's only `unsafe`.
//!
//! simdutf's converters take raw pointers and write as many bytes (or
//! units) as the converted text needs, with no bound given to them: the
//! caller promises the room. Each function here is safe because it checks
//! that promise first, against the worst case of simdutf's own length
//! function for the conversion (`utf8_length_from_latin1(src) ≤ 2 ×
//! src.len()`, `utf8_length_from_utf16(src) ≤ 3 × src.len()`,
//! `utf16_length_from_utf8(src) ≤ src.len()`, one unit per Latin-1 byte),
//! and panics rather than calls when the room is short (or, for Latin-1
//! into a destination shorter than that, against the length simdutf's
//! function counts for the text itself, and declines). Units are written
//! only through a `&mut [u16]`, so aligned: a byte destination is viewed as
//! units only when its start is aligned for them ([`as_units`]). The
//! functions that assume valid input are only called on text the
//! validating call has just proved valid, or on a `&str`.
#![allow(unsafe_code)]

/// UTF-8 of U+FFFD, which replaces an unpaired surrogate.
const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

/// Latin-1 to UTF-8: all of `src` into `dst`, which must hold two bytes per
/// byte of `src`. Returns the bytes written.
///
/// # Panics
/// If `dst.len() < 2 * src.len()`.
pub(crate) fn latin1_to_utf8(src: &[u8], dst: &mut [u8]) -> usize {
    assert!(
        dst.len() >= 2 * src.len(),
        "latin1 to utf8: room for 2 bytes per byte"
    );
    // SAFETY: `src` is valid for `src.len()` reads; simdutf writes
    // `utf8_length_from_latin1(src)` bytes, at most two per byte (every
    // Latin-1 character is one or two bytes of UTF-8), and `dst` was checked
    // to hold `2 * src.len()`. The borrows keep the two from overlapping.
    unsafe { simdutf::convert_latin1_to_utf8(src.as_ptr(), src.len(), dst.as_mut_ptr()) }
}

/// Latin-1 to UTF-8: all of `src` into `dst` when its UTF-8 fits there,
/// counted first; `None` (nothing written) when it does not. Returns the
/// bytes written.
pub(crate) fn latin1_to_utf8_fitting(src: &[u8], dst: &mut [u8]) -> Option<usize> {
    let needed = simdutf::utf8_length_from_latin1(src);
    if dst.len() < needed {
        return None;
    }
    // SAFETY: `src` is valid for `src.len()` reads; simdutf writes
    // `utf8_length_from_latin1(src)` bytes, just computed as `needed`, and
    // `dst` was checked to hold them. The borrows keep the two from
    // overlapping.
    Some(unsafe { simdutf::convert_latin1_to_utf8(src.as_ptr(), src.len(), dst.as_mut_ptr()) })
}

/// UTF-16 to UTF-8 with unpaired surrogates as U+FFFD: all of `src` into
/// `dst`, which must hold three bytes per unit. Returns the bytes written.
///
/// Runs of valid text go through simdutf's validating converter in one
/// call; where it stops at an unpaired surrogate, the valid run before it
/// is converted again (the validating call leaves its output unspecified on
/// error) and the surrogate is written as U+FFFD, then the rest follows.
///
/// # Panics
/// If `dst.len() < 3 * src.len()`.
pub(crate) fn utf16_to_utf8(src: &[u16], dst: &mut [u8]) -> usize {
    assert!(
        dst.len() >= 3 * src.len(),
        "utf16 to utf8: room for 3 bytes per unit"
    );
    let (mut read, mut written) = (0, 0);
    while read < src.len() {
        let rest = &src[read..];
        let out = &mut dst[written..];
        // SAFETY: `rest` is valid for `rest.len()` reads. simdutf writes at
        // most `utf8_length_from_utf16(rest)` bytes, at most three per unit
        // (one, two or three per unit; four per surrogate pair, two units),
        // and `out` holds three per unit of `rest`: `dst` held three per
        // unit of `src`, and every unit read so far wrote at most three.
        let r = unsafe {
            simdutf::convert_utf16_to_utf8_with_errors(rest.as_ptr(), rest.len(), out.as_mut_ptr())
        };
        if r.error == simdutf::ErrorCode::Success {
            return written + r.count;
        }
        // `r.count` is the position of the unpaired surrogate: the units
        // before it are valid UTF-16.
        let valid = &rest[..r.count];
        // SAFETY: `valid` was just validated (every unit before the first
        // error), and `out` holds three bytes per unit of it, as above.
        written += unsafe {
            simdutf::convert_valid_utf16_to_utf8(valid.as_ptr(), valid.len(), out.as_mut_ptr())
        };
        dst[written..written + 3].copy_from_slice(REPLACEMENT);
        written += 3;
        read += r.count + 1;
    }
    written
}

/// The length of the ASCII start of `src` (all of it when it is ASCII).
pub(crate) fn ascii_prefix(src: &[u8]) -> usize {
    simdutf::validate_ascii_with_errors(src).count
}

/// Bytes ≥ 0x80 in `src`: the Latin-1 characters that take two bytes in
/// UTF-8 (simdutf's UTF-8 length less the byte count).
pub(crate) fn count_high_bytes(src: &[u8]) -> usize {
    simdutf::utf8_length_from_latin1(src) - src.len()
}

/// `dst` as UTF-16 code units, when its start is aligned for them
/// (simdutf writes `char16_t`s, which must be); `None` otherwise. An odd
/// last byte is left out.
fn as_units(dst: &mut [u8]) -> Option<&mut [u16]> {
    // SAFETY: every bit pattern of two bytes is a `u16`, so viewing the
    // aligned middle of `dst` as units reads and writes nothing invalid;
    // `align_to_mut` takes the alignment into account itself.
    let (before, units, _) = unsafe { dst.align_to_mut::<u16>() };
    before.is_empty().then_some(units)
}

/// Latin-1 to UTF-16LE: all of `src` into `dst`, which must hold two bytes
/// per byte of `src`. Returns the bytes written, or `None` (nothing
/// written) when `dst` is not aligned for `u16`.
///
/// # Panics
/// If `dst.len() < 2 * src.len()`.
pub(crate) fn latin1_to_utf16le(src: &[u8], dst: &mut [u8]) -> Option<usize> {
    let units = as_units(dst)?;
    assert!(
        units.len() >= src.len(),
        "latin1 to utf16le: room for 1 unit per byte"
    );
    // SAFETY: `src` is valid for `src.len()` reads; simdutf writes one unit
    // per byte, and `units` (aligned, from `as_units`) holds `src.len()`.
    let n =
        unsafe { simdutf::convert_latin1_to_utf16le(src.as_ptr(), src.len(), units.as_mut_ptr()) };
    Some(2 * n)
}

/// UTF-8 to UTF-16LE: all of `src` into `dst`, which must hold two bytes per
/// byte of `src`. Returns the bytes written, or `None` (nothing written)
/// when `dst` is not aligned for `u16`.
///
/// # Panics
/// If `dst.len() < 2 * src.len()`.
pub(crate) fn utf8_to_utf16le(src: &str, dst: &mut [u8]) -> Option<usize> {
    let units = as_units(dst)?;
    Some(2 * utf8_to_utf16(src, units, true))
}

/// UTF-8 to UTF-16 units in this machine's byte order: all of `src` into
/// `dst`, which must hold one unit per byte of `src`. Returns the units
/// written.
///
/// # Panics
/// If `dst.len() < src.len()`.
pub(crate) fn utf8_to_units(src: &str, dst: &mut [u16]) -> usize {
    utf8_to_utf16(src, dst, false)
}

fn utf8_to_utf16(src: &str, dst: &mut [u16], little_endian: bool) -> usize {
    assert!(
        dst.len() >= src.len(),
        "utf8 to utf16: room for 1 unit per byte"
    );
    let (from, len, to) = (src.as_ptr(), src.len(), dst.as_mut_ptr());
    // SAFETY: `src` is a `&str`, valid UTF-8, as the `valid` converters
    // require, and valid for `len` reads. simdutf writes
    // `utf16_length_from_utf8(src)` units, at most one per byte (a
    // character of n bytes takes one unit, or two for n = 4), and `dst`, a
    // `&mut [u16]` (so aligned), holds `len` units.
    unsafe {
        if little_endian {
            simdutf::convert_valid_utf8_to_utf16le(from, len, to)
        } else {
            simdutf::convert_valid_utf8_to_utf16(from, len, to)
        }
    }
}

/// `bytes` as a `&str` when they are UTF-8, checked by simdutf's validator
/// (faster than the standard library's on text that is not all ASCII:
/// docs/measurements.md, "Validating staged UTF-8"); `None` otherwise.
pub(crate) fn as_str(bytes: &[u8]) -> Option<&str> {
    // SAFETY: simdutf has just checked that `bytes` are UTF-8, which is all
    // `from_utf8_unchecked` requires.
    simdutf::validate_utf8(bytes).then(|| unsafe { std::str::from_utf8_unchecked(bytes) })
}
