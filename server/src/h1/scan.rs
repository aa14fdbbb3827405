//! The request head's grammar in one walk over its bytes: what httparse's
//! `Request::parse_with_uninit_headers` answers, the same in every case —
//! the same head, the same `Partial`, the same error at the same byte (a
//! test and a fuzz target hold the two equal) — for less work per request:
//! a block at a time through targets and field values, a target checked
//! for UTF-8 only when it holds a byte above ASCII, and no dispatch per
//! field. The target's URI bytes and its query are found in the same walk
//! ([`Scanned::walked`]), so that checking it
//! (`uri.rs`) walks it again only when it holds an escape, a `+` or a byte
//! a URI may not, and reading its query looks for nothing to decode in a
//! target that holds neither. `benches/head_scan.rs` measures the two.
// Bytes checked to be ASCII are read as text without a second check, and
// the fields are written into the caller's uninitialised slots.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use httparse::{Error, Header};

use super::Walked;

/// A head as [`scan`] found it.
#[derive(Debug, PartialEq, Eq)]
pub struct Scanned<'b> {
    /// The method token.
    pub method: &'b str,
    /// The request target, as sent.
    pub target: &'b str,
    /// What the walk that found the target's end found of it besides.
    pub walked: Walked,
    /// The minor version: 0 or 1.
    pub version: u8,
    /// The fields, their values without the whitespace around them.
    pub fields: &'b [Header<'b>],
    /// Bytes the head took, from the start of the input (leading empty
    /// lines included).
    pub len: usize,
}

/// Scans the request head at the start of `input`, its fields into
/// `fields`: `Ok(None)` when more bytes are needed, or the error httparse
/// gives, [`Error::TooManyHeaders`] when the fields do not fit.
pub fn scan<'b>(
    input: &'b [u8],
    fields: &'b mut [MaybeUninit<Header<'b>>],
) -> Result<Option<Scanned<'b>>, Error> {
    let mut at = Walk { input, i: 0 };
    // Empty lines before the request line (RFC 9112 §2.2).
    loop {
        match at.peek() {
            Some(b'\r') => {
                at.i += 1;
                at.expect(b'\n', Error::NewLine)?;
            }
            Some(b'\n') => at.i += 1,
            Some(_) => break,
            None => return Ok(None),
        }
    }
    let start = at.i;
    // method SP: one token. `GET ` as one word, what nearly every request
    // begins with; any other byte by byte.
    if input.get(start..start + 4) == Some(b"GET ") {
        at.i += 3;
    } else {
        match at.peek() {
            Some(b) if TOKEN[usize::from(b)] => at.i += 1,
            Some(_) => return Err(Error::Token),
            None => return Ok(None),
        }
        loop {
            match at.peek() {
                Some(b' ') => break,
                Some(b) if TOKEN[usize::from(b)] => at.i += 1,
                Some(_) => return Err(Error::Token),
                None => return Ok(None),
            }
        }
    }
    // SAFETY: token bytes are ASCII.
    let method = unsafe { std::str::from_utf8_unchecked(&input[start..at.i]) };
    at.i += 1;
    // request-target SP: visible bytes, and any above ASCII.
    let target_start = at.i;
    let walked = at.skip_target();
    match at.peek() {
        Some(b' ') if at.i > target_start => {}
        Some(_) => return Err(Error::Token),
        None => return Ok(None),
    }
    let target = &input[target_start..at.i];
    let target = if walked.above_ascii {
        std::str::from_utf8(target).map_err(|_| Error::Token)?
    } else {
        // SAFETY: every byte is ASCII.
        unsafe { std::str::from_utf8_unchecked(target) }
    };
    at.i += 1;
    // HTTP-version: as httparse, a whole `HTTP/1.0` or `HTTP/1.1`, or a
    // prefix of `HTTP/1.` that has not ended yet.
    // The eight bytes as one word: two comparisons, not sixteen.
    const HTTP_1_0: u64 = u64::from_le_bytes(*b"HTTP/1.0");
    const HTTP_1_1: u64 = u64::from_le_bytes(*b"HTTP/1.1");
    let word = input
        .get(at.i..at.i + 8)
        .and_then(|w| <[u8; 8]>::try_from(w).ok());
    let version = match word.map(u64::from_le_bytes) {
        Some(HTTP_1_0) => 0,
        Some(HTTP_1_1) => 1,
        Some(_) => return Err(Error::Version),
        None => {
            let rest = &input[at.i..];
            return if b"HTTP/1.".starts_with(rest) {
                Ok(None)
            } else {
                Err(Error::Version)
            };
        }
    };
    at.i += 8;
    if !at.newline(Error::NewLine)? {
        return Ok(None);
    }
    let mut count = 0;
    loop {
        // An empty line ends the head.
        let Some(b) = at.peek() else {
            return Ok(None);
        };
        if b == b'\r' || b == b'\n' {
            if !at.newline(Error::NewLine)? {
                return Ok(None);
            }
            break;
        }
        // field-name ":"
        if !TOKEN[usize::from(b)] {
            return Err(Error::HeaderName);
        }
        let name_start = at.i;
        at.i += 1;
        at.skip_name();
        match at.peek() {
            Some(b':') => {}
            Some(_) => return Err(Error::HeaderName),
            None => return Ok(None),
        }
        // SAFETY: token bytes are ASCII.
        let name = unsafe { std::str::from_utf8_unchecked(&input[name_start..at.i]) };
        at.i += 1;
        // OWS field-value OWS, then the line's end.
        while matches!(at.peek(), Some(b' ' | b'\t')) {
            at.i += 1;
        }
        let value_start = at.i;
        at.skip_value();
        let mut value = &input[value_start..at.i];
        if !at.newline(Error::HeaderValue)? {
            return Ok(None);
        }
        if let [.., b' ' | b'\t'] = value {
            while let [rest @ .., b' ' | b'\t'] = value {
                value = rest;
            }
        }
        let Some(slot) = fields.get_mut(count) else {
            return Err(Error::TooManyHeaders);
        };
        *slot = MaybeUninit::new(Header { name, value });
        count += 1;
    }
    let (written, _) = fields.split_at_mut(count);
    // SAFETY: the first `count` slots were written above, and
    // `MaybeUninit<T>` has `T`'s layout.
    let fields = unsafe { &*(written as *const [MaybeUninit<Header<'b>>] as *const [Header<'b>]) };
    Ok(Some(Scanned {
        method,
        target,
        walked: Walked {
            query_at: walked.query_at.map(|q| q - target_start),
            plain: !walked.odd,
        },
        version,
        fields,
        len: at.i,
    }))
}

/// What the walk through a target found, as it goes.
#[derive(Default)]
struct TargetWalk {
    /// A byte above ASCII.
    above_ascii: bool,
    /// A byte a URI does not hold as it is (`%` included), or a `+`.
    odd: bool,
    /// The first `?`, as a position in the input.
    query_at: Option<usize>,
}

/// A position in the input.
struct Walk<'b> {
    input: &'b [u8],
    i: usize,
}

impl<'b> Walk<'b> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.input.get(self.i).copied()
    }

    /// Consumes `want`, or fails with `err` at another byte (`Ok(false)`:
    /// the input ended first).
    #[inline]
    fn expect(&mut self, want: u8, err: Error) -> Result<bool, Error> {
        match self.peek() {
            Some(b) if b == want => {
                self.i += 1;
                Ok(true)
            }
            Some(_) => Err(err),
            None => Ok(false),
        }
    }

    /// Consumes a line's end, CRLF or a bare LF; fails with `err` at any
    /// other byte (`Ok(false)`: the input ended first).
    #[inline(always)]
    fn newline(&mut self, err: Error) -> Result<bool, Error> {
        // CRLF, what nearly every line ends with, in one comparison.
        if self.input.get(self.i..self.i + 2) == Some(b"\r\n") {
            self.i += 2;
            return Ok(true);
        }
        match self.peek() {
            Some(b'\r') => {
                self.i += 1;
                self.expect(b'\n', err)
            }
            Some(b'\n') => {
                self.i += 1;
                Ok(true)
            }
            Some(_) => Err(err),
            None => Ok(false),
        }
    }

    /// Moves past the bytes a target may hold (`!` to `~`, and any above
    /// ASCII), a block at a time; what it found on the way.
    #[inline]
    fn skip_target(&mut self) -> TargetWalk {
        let mut found = TargetWalk::default();
        while let Some(block) = self.block() {
            let t = block::target(block);
            // Only the bytes before the stop are the target's.
            let before = match t.stop {
                0 => u32::MAX,
                stop => (1 << stop.trailing_zeros()) - 1,
            };
            found.above_ascii |= t.above & before != 0;
            found.odd |= (t.odd | t.above) & before != 0;
            if found.query_at.is_none() && t.query & before != 0 {
                found.query_at = Some(self.i + (t.query & before).trailing_zeros() as usize);
            }
            if t.stop != 0 {
                self.i += t.stop.trailing_zeros() as usize;
                return found;
            }
            self.i += block::LEN;
        }
        while let Some(b) = self.peek() {
            if b < 0x21 || b == 0x7f {
                break;
            }
            found.above_ascii |= b >= 0x80;
            found.odd |= !PLAIN_BYTE[usize::from(b)];
            if b == b'?' && found.query_at.is_none() {
                found.query_at = Some(self.i);
            }
            self.i += 1;
        }
        found
    }

    /// Moves past the bytes a field name may hold (tchar): a block at a
    /// time through letters, digits and `-`, what nearly every name is
    /// made of, then byte by byte through the rest.
    #[inline(always)]
    fn skip_name(&mut self) {
        while let Some(block) = self.block() {
            let stop = block::name(block);
            if stop != 0 {
                self.i += stop.trailing_zeros() as usize;
                break;
            }
            self.i += block::LEN;
        }
        while self.peek().is_some_and(|b| TOKEN[usize::from(b)]) {
            self.i += 1;
        }
    }

    /// Moves past the bytes a field value may hold (HTAB, SP, `!` to `~`,
    /// and any above ASCII), a block at a time.
    #[inline(always)]
    fn skip_value(&mut self) {
        loop {
            loop {
                let Some(block) = self.block() else {
                    // A head read alone ends its input: its last value is
                    // in the block that ends there, the bytes walked
                    // shifted out and the input's end a stop of its own.
                    #[cfg(target_arch = "x86_64")]
                    if let Some((block, walked)) = self.last_block() {
                        let stop = (block::value(block) >> walked) | 1 << (block::LEN - walked);
                        self.i += stop.trailing_zeros() as usize;
                    }
                    break;
                };
                let stop = block::value(block);
                if stop != 0 {
                    self.i += stop.trailing_zeros() as usize;
                    break;
                }
                self.i += block::LEN;
            }
            // Within the last block, or at a control byte: HTAB is the one
            // a value may hold.
            match self.peek() {
                Some(b) if VALUE[usize::from(b)] => self.i += 1,
                _ => return,
            }
        }
    }

    /// The block that ends where the input ends, and how many of its bytes
    /// are walked already; `None` for an input shorter than a block. Only
    /// where a block's bits are all exact (SSE2; SWAR's lowest alone is).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn last_block(&self) -> Option<(&'b [u8; block::LEN], usize)> {
        let start = self.input.len().checked_sub(block::LEN)?;
        let (block, _) = self.input[start..].split_first_chunk()?;
        Some((block, self.i.saturating_sub(start).min(block::LEN)))
    }

    /// The next block of bytes, if there is a whole one: one comparison,
    /// where slicing and splitting checked twice (every target, value and
    /// name asks for one or more).
    #[inline(always)]
    fn block(&self) -> Option<&'b [u8; block::LEN]> {
        // The walk never passes the input's end: `i + LEN` cannot wrap.
        if self.i + block::LEN > self.input.len() {
            return None;
        }
        // SAFETY: the `LEN` bytes from `i` are within the input, and an
        // array of bytes has the alignment of a byte.
        Some(unsafe { &*self.input.as_ptr().add(self.i).cast::<[u8; block::LEN]>() })
    }
}

#[cfg(target_arch = "x86_64")]
use sse2 as block;
#[cfg(not(target_arch = "x86_64"))]
use swar as block;

/// Blocks of 16 bytes with SSE2, which every x86-64 has.
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::*;

    use super::Target;

    pub const LEN: usize = 16;

    /// A bit per byte (bit k for byte k): those a field value may not hold
    /// or that end it (controls but HTAB, which the walk takes alone, and
    /// DEL).
    #[inline]
    pub fn value(block: &[u8; LEN]) -> u32 {
        stops(block, 0x20).0
    }

    /// A bit per byte other than a letter, a digit or `-`.
    #[inline]
    pub fn name(block: &[u8; LEN]) -> u32 {
        // SAFETY: SSE2 is part of x86-64; the load reads the 16 bytes of
        // `block`, unaligned.
        unsafe {
            let v = _mm_loadu_si128(block.as_ptr().cast());
            let within = |x: __m128i, lo: u8, hi: u8| {
                _mm_and_si128(
                    _mm_cmpgt_epi8(x, _mm_set1_epi8(lo as i8 - 1)),
                    _mm_cmplt_epi8(x, _mm_set1_epi8(hi as i8 + 1)),
                )
            };
            // Signed: bytes above ASCII are in no range.
            let letter = within(_mm_or_si128(v, _mm_set1_epi8(0x20)), b'a', b'z');
            let digit = within(v, b'0', b'9');
            let dash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'-' as i8));
            let common = _mm_or_si128(_mm_or_si128(letter, digit), dash);
            !(_mm_movemask_epi8(common) as u32) & 0xffff
        }
    }

    /// A target's bits ([`Target`]), a bit per byte.
    #[inline]
    pub fn target(block: &[u8; LEN]) -> Target {
        let (stop, above) = stops(block, 0x21);
        // SAFETY: SSE2 is part of x86-64; the load reads the 16 bytes of
        // `block`, unaligned.
        unsafe {
            let v = _mm_loadu_si128(block.as_ptr().cast());
            let is = |x: __m128i, b: u8| _mm_cmpeq_epi8(x, _mm_set1_epi8(b as i8));
            // The visible bytes a URI does not hold as it is, and `+`,
            // which a query decodes, in six tests: `[\]` and `{|}` are one
            // range with bit 5 set; `"#` and `<>` are one value each with
            // bit 0 or bit 1 set; `^`, `` ` ``, `%` and `+` alone. Signed:
            // bytes above ASCII are none.
            let set = _mm_or_si128(v, _mm_set1_epi8(0x20));
            let brackets = _mm_and_si128(
                _mm_cmpgt_epi8(set, _mm_set1_epi8(0x7a)),
                _mm_cmplt_epi8(set, _mm_set1_epi8(0x7e)),
            );
            let quote_hash = is(_mm_or_si128(v, _mm_set1_epi8(1)), b'#');
            let angles = is(_mm_or_si128(v, _mm_set1_epi8(2)), b'>');
            let alone = _mm_or_si128(
                _mm_or_si128(is(v, b'^'), is(v, b'`')),
                _mm_or_si128(is(v, b'%'), is(v, b'+')),
            );
            let odd = _mm_or_si128(
                _mm_or_si128(brackets, alone),
                _mm_or_si128(quote_hash, angles),
            );
            Target {
                stop,
                above,
                odd: _mm_movemask_epi8(odd) as u32,
                query: _mm_movemask_epi8(is(v, b'?')) as u32,
            }
        }
    }

    /// A bit per byte below `below` (ASCII only) or DEL, and a bit per
    /// byte above ASCII.
    #[inline]
    fn stops(block: &[u8; LEN], below: i8) -> (u32, u32) {
        // SAFETY: SSE2 is part of x86-64; the load reads the 16 bytes of
        // `block`, unaligned.
        unsafe {
            let v = _mm_loadu_si128(block.as_ptr().cast());
            // Signed: bytes above ASCII are negative, not controls.
            let low = _mm_and_si128(
                _mm_cmplt_epi8(v, _mm_set1_epi8(below)),
                _mm_cmpgt_epi8(v, _mm_set1_epi8(-1)),
            );
            let del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
            (
                _mm_movemask_epi8(_mm_or_si128(low, del)) as u32,
                _mm_movemask_epi8(v) as u32,
            )
        }
    }
}

/// Blocks of 8 bytes in a `u64` elsewhere (SWAR): the lowest flagged byte
/// is exact, which is all a walk asks.
#[cfg(any(test, not(target_arch = "x86_64")))]
mod swar {
    use super::super::word::{below, equal, HI, LO};
    use super::Target;

    pub const LEN: usize = 8;

    /// One bit per byte, bit k for byte k, from a mask of high bits.
    fn bits(mask: u64) -> u32 {
        (0..8).fold(0, |bits, k| {
            bits | (((mask >> (8 * k + 7)) & 1) as u32) << k
        })
    }

    /// As the x86-64 `value`.
    pub fn value(block: &[u8; LEN]) -> u32 {
        let word = u64::from_le_bytes(*block);
        let stop = below(word, 0x20) | equal(word, 0x7f);
        // Only the lowest flagged byte is exact: keep it alone.
        bits(stop & stop.wrapping_neg())
    }

    /// As the x86-64 `name`, byte by byte (exact).
    pub fn name(block: &[u8; LEN]) -> u32 {
        block.iter().enumerate().fold(0, |bits, (k, &b)| {
            bits | u32::from(!(b.is_ascii_alphanumeric() || b == b'-')) << k
        })
    }

    /// As the x86-64 `target`; of each kind of bit, the lowest alone is
    /// exact, which is all a walk asks.
    pub fn target(block: &[u8; LEN]) -> Target {
        let word = u64::from_le_bytes(*block);
        let stop = below(word, 0x21) | equal(word, 0x7f);
        let set = word | (LO * 0x20);
        let odd = equal(set, b'{')
            | equal(set, b'|')
            | equal(set, b'}')
            | equal(word | LO, b'#')
            | equal(word | (LO * 2), b'>')
            | equal(word, b'^')
            | equal(word, b'`')
            | equal(word, b'%')
            | equal(word, b'+');
        let lowest = |m: u64| bits(m & m.wrapping_neg());
        Target {
            stop: lowest(stop),
            above: bits(word & HI),
            odd: lowest(odd),
            query: lowest(equal(word, b'?')),
        }
    }
}

/// The bits of a block of a target: bit k for byte k.
#[derive(Clone, Copy, Debug)]
struct Target {
    /// Bytes that end it: SP, a control, DEL.
    stop: u32,
    /// Bytes above ASCII.
    above: u32,
    /// Visible ASCII a URI does not hold as it is (`"#%<>[\]^`{|}`),
    /// and `+`.
    odd: u32,
    /// `?`.
    query: u32,
}

use super::uri::PLAIN_BYTE;

/// tchar (RFC 9110 §5.6.2): methods and field names.
static TOKEN: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let extra = b"!#$%&'*+-.^_`|~";
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
};

/// The bytes of a field value: HTAB, SP, VCHAR, obs-text.
static VALUE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = b == 0x09 || (b >= 0x20 && b != 0x7f);
        b += 1;
    }
    t
};

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::{sse2, swar, PLAIN_BYTE};

    /// The first flagged byte of 16, by SWAR's two halves.
    fn first(flags: (u32, u32)) -> u32 {
        match flags {
            (0, 0) => 32,
            (0, hi) => 8 + hi.trailing_zeros(),
            (lo, _) => lo.trailing_zeros(),
        }
    }

    /// Both ways of looking at a block find the same first stop, and the
    /// same bytes above ASCII before it, over blocks of the bytes that
    /// matter and of any byte.
    #[test]
    fn sse2_and_swar_blocks_agree() {
        let edges = [
            0x00, 0x09, 0x0a, 0x0d, 0x1f, 0x20, 0x21, 0x7e, 0x7f, 0x80, 0xc3, 0xff, b'a', b'?',
            b'%', b'#', b'"', b'<', b'=', b'>', b'[', b'\\', b']', b'^', b'_', b'`', b'{', b'|',
            b'}', b'~', b';', b'$', 0xdb, 0xfb, 0x3b, 0x5f, b'-', b':', b'Z', b'z', b'0', b'9',
            b'/', b'@', b'A', 0xc1, 0xe1,
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for round in 0..200_000 {
            let mut block = [0u8; 16];
            for b in &mut block {
                // xorshift: a fixed sequence, the same on every run.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = if round % 2 == 0 {
                    edges[(x % edges.len() as u64) as usize]
                } else {
                    x as u8
                };
            }
            let (lo, hi) = block.split_at(8);
            let (lo, hi): (&[u8; 8], &[u8; 8]) = (lo.try_into().unwrap(), hi.try_into().unwrap());
            let stop = |s: u32| if s == 0 { 32 } else { s.trailing_zeros() };
            assert_eq!(
                stop(sse2::value(&block)),
                first((swar::value(lo), swar::value(hi))),
                "{block:?}"
            );
            let name = sse2::name(&block);
            let common = |b: u8| b.is_ascii_alphanumeric() || b == b'-';
            let want = block
                .iter()
                .enumerate()
                .fold(0, |m, (k, &b)| m | u32::from(!common(b)) << k);
            assert_eq!(name, want, "{block:?}");
            assert_eq!(
                u64::from(swar::name(lo)) | u64::from(swar::name(hi)) << 8,
                u64::from(want)
            );
            let t = sse2::target(&block);
            let (l, h) = (swar::target(lo), swar::target(hi));
            let n = stop(t.stop);
            assert_eq!(n, first((l.stop, h.stop)), "{block:?}");
            let before = |bits: u64| bits & ((1u64 << n.min(16)) - 1);
            assert_eq!(
                before(u64::from(t.above)),
                before(u64::from(l.above) | u64::from(h.above) << 8),
                "{block:?}"
            );
            // The first odd byte and the first `?`: the same by both, and
            // what the URI table says of every byte.
            for (sse, (lo, hi), is) in [
                (
                    t.odd,
                    (l.odd, h.odd),
                    &(|b: u8| (0x21..0x7f).contains(&b) && !PLAIN_BYTE[usize::from(b)])
                        as &dyn Fn(u8) -> bool,
                ),
                (t.query, (l.query, h.query), &|b| b == b'?'),
            ] {
                let want = block.iter().position(|&b| is(b)).map_or(32, |k| k as u32);
                assert_eq!(stop(sse), want, "{block:?}");
                assert_eq!(first((lo, hi)).min(32), want, "{block:?}");
                assert_eq!(
                    sse,
                    block
                        .iter()
                        .enumerate()
                        .fold(0, |m, (k, &b)| m | u32::from(is(b)) << k)
                );
            }
        }
    }
}
