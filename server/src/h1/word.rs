//! Eight bytes tested at once in a `u64` (SWAR): the high bit of each
//! byte that passes. Of the bytes marked, the lowest is exact; a borrow
//! may mark bytes above it, never below, which is all a search asks.

/// 0x01 in every byte.
pub(super) const LO: u64 = 0x0101_0101_0101_0101;
/// 0x80 in every byte.
pub(super) const HI: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `word` below `n` (at most 0x80).
#[inline(always)]
pub(super) fn below(word: u64, n: u8) -> u64 {
    word.wrapping_sub(LO * u64::from(n)) & !word & HI
}

/// The high bit of each byte of `word` equal to `b`.
#[inline(always)]
pub(super) fn equal(word: u64, b: u8) -> u64 {
    below(word ^ (LO * u64::from(b)), 1)
}
