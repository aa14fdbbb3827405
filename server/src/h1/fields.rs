//! The RFC 9112 checks on a request's fields: its framing (§6), Host
//! (RFC 9110 §7.2), Connection (§9.3) and Expect (RFC 9110 §10.1.1). What
//! they say of the body's framing and the connection is read here, once.

use std::str;

use unflat::head::{Framing, Status};

use super::uri::valid_host;
use super::{reject, Reject};

/// What the fields say.
pub(super) struct Checked {
    /// How the body is delimited.
    pub framing: Framing,
    /// Whether the client asks to keep the connection open (HTTP/1.1, or
    /// `Connection: keep-alive` in HTTP/1.0, and no `close`).
    pub wants_keep_alive: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request with a body.
    pub expect_continue: bool,
}

/// The fields the rules read, as they have been seen so far.
#[derive(Default)]
struct Seen {
    length: Option<u64>,
    transfer_encoding: bool,
    chunked_last: bool,
    chunked_count: usize,
    other_coding: bool,
    hosts: usize,
    close: bool,
    keep_alive_token: bool,
    expect_continue: bool,
}

/// Checks the fields of a request of HTTP/1.`version`: each field, then
/// the rules between them. Inlined into its one caller, the head's parser.
#[inline(always)]
pub(super) fn check_fields(
    fields: &[httparse::Header<'_>],
    version: u8,
) -> Result<Checked, Reject> {
    let mut seen = Seen::default();
    for f in fields {
        // Classified by length first: one comparison of the name at most,
        // none for a name no rule reads, and its value is not looked at.
        let name = f.name.as_bytes();
        match name.len() {
            4 if is(name, b"host") => seen.host(trim(f.value))?,
            6 if is(name, b"expect") && version == 1 => {
                // Expect is only defined for HTTP/1.1 (RFC 9110 §10.1.1).
                seen.expect(trim(f.value))?;
            }
            10 if is(name, b"connection") => seen.connection(f.value),
            14 if is(name, b"content-length") => {
                seen.content_length(f.value)?;
            }
            17 if is(name, b"transfer-encoding") => {
                seen.transfer_encoding(f.value, version)?;
            }
            _ => {}
        }
    }
    seen.finish(version)
}

impl Seen {
    /// A list of identical values is allowed (§6.3 item 5), anything else
    /// is an attempt at smuggling or a mistake.
    #[inline]
    fn content_length(&mut self, value: &[u8]) -> Result<(), Reject> {
        for item in value.split(|&b| b == b',') {
            let n = parse_length(trim(item))?;
            if self.length.is_some_and(|l| l != n) {
                return Err(reject(
                    Status::BAD_REQUEST,
                    "conflicting Content-Length values",
                ));
            }
            self.length = Some(n);
        }
        Ok(())
    }

    #[inline]
    fn transfer_encoding(&mut self, value: &[u8], version: u8) -> Result<(), Reject> {
        if version == 0 {
            return Err(reject(
                Status::BAD_REQUEST,
                "Transfer-Encoding in an HTTP/1.0 request",
            ));
        }
        self.transfer_encoding = true;
        for coding in value
            .split(|&b| b == b',')
            .map(trim)
            .filter(|c| !c.is_empty())
        {
            let chunked = is(coding, b"chunked");
            self.chunked_count += usize::from(chunked);
            self.other_coding |= !chunked;
            self.chunked_last = chunked;
        }
        Ok(())
    }

    #[inline]
    fn host(&mut self, value: &[u8]) -> Result<(), Reject> {
        self.hosts += 1;
        if !valid_host(value) {
            return Err(reject(Status::BAD_REQUEST, "invalid Host"));
        }
        Ok(())
    }

    #[inline]
    fn connection(&mut self, value: &[u8]) {
        for token in value.split(|&b| b == b',').map(trim) {
            self.close |= is(token, b"close");
            self.keep_alive_token |= is(token, b"keep-alive");
        }
    }

    #[inline]
    fn expect(&mut self, value: &[u8]) -> Result<(), Reject> {
        if is(value, b"100-continue") {
            self.expect_continue = true;
            Ok(())
        } else {
            Err(reject(
                Status::EXPECTATION_FAILED,
                "unsupported expectation",
            ))
        }
    }

    /// The rules between fields, once all are seen.
    #[inline(always)]
    fn finish(self, version: u8) -> Result<Checked, Reject> {
        if self.transfer_encoding && self.length.is_some() {
            return Err(reject(
                Status::BAD_REQUEST,
                "both Content-Length and Transfer-Encoding",
            ));
        }
        if self.transfer_encoding && (!self.chunked_last || self.chunked_count > 1) {
            // §6.3 item 4: the body length cannot be determined.
            return Err(reject(
                Status::BAD_REQUEST,
                "chunked must be the last transfer coding, once",
            ));
        }
        if self.other_coding {
            // RFC 9112 §6.1: a coding the server does not understand.
            return Err(reject(
                Status::NOT_IMPLEMENTED,
                "unsupported transfer coding",
            ));
        }
        if version == 1 && self.hosts != 1 {
            return Err(reject(
                Status::BAD_REQUEST,
                if self.hosts == 0 {
                    "missing Host"
                } else {
                    "more than one Host"
                },
            ));
        }
        if self.hosts > 1 {
            return Err(reject(Status::BAD_REQUEST, "more than one Host"));
        }
        let framing = match (self.transfer_encoding, self.length) {
            (true, _) => Framing::Chunked,
            (false, Some(0) | None) => Framing::None,
            (false, Some(n)) => Framing::Length(n),
        };
        Ok(Checked {
            framing,
            wants_keep_alive: !self.close && (version == 1 || self.keep_alive_token),
            expect_continue: self.expect_continue && framing != Framing::None,
        })
    }
}

fn parse_length(v: &[u8]) -> Result<u64, Reject> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return Err(reject(Status::BAD_REQUEST, "invalid Content-Length"));
    }
    // Digits only, so the string is ASCII; overflow is an error, not a wrap.
    str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(reject(Status::BAD_REQUEST, "Content-Length out of range"))
}

/// Whether `bytes` is `lower` in any case, a word at a time: each byte
/// with its 0x20 bit set (a letter lowercased) against the pattern, whose
/// bytes are lowercase letters, digits and `-`. Exact for the bytes the
/// scanner lets into a name or a value (`scan.rs`): the only other bytes
/// that become a digit or `-` so are controls (0x10–0x19, CR), and HTAB
/// becomes `)`, in no pattern.
#[inline(always)]
fn is<const N: usize>(bytes: &[u8], lower: &[u8; N]) -> bool {
    const { assert!(N >= 4, "a pattern of four bytes at least") };
    let Ok(bytes) = <&[u8; N]>::try_from(bytes) else {
        return false;
    };
    let (mut i, mut differ) = (0, 0u64);
    // Words of 8 (or 4) bytes, the last one overlapping the one before.
    let word = if N >= 8 { 8 } else { 4 };
    loop {
        let at = i.min(N - word);
        differ |= lowered(bytes, at, word) ^ lowered(lower, at, word);
        i += word;
        if i >= N {
            return differ == 0;
        }
    }
}

/// The `width` (4 or 8) bytes of `b` at `at` as a number, each with its
/// 0x20 bit set.
#[inline(always)]
fn lowered(b: &[u8], at: usize, width: usize) -> u64 {
    if width == 8 {
        u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes")) | 0x2020_2020_2020_2020
    } else {
        u64::from(u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) | 0x2020_2020)
    }
}

/// `v` without the spaces and tabs around it (OWS).
fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |e| e + 1);
    &v[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `is` answers as `eq_ignore_ascii_case` for every byte a field value
    /// may hold (HTAB, SP, visible ASCII, obs-text), in every position of
    /// every pattern; a control byte is what it would confuse.
    #[test]
    fn a_word_at_a_time_compares_as_byte_by_byte() {
        fn check<const N: usize>(pattern: &[u8; N]) {
            let allowed = (0u8..=255).filter(|&b| b == b'\t' || b == b' ' || b > 0x20 && b != 0x7f);
            for at in 0..N {
                for b in allowed.clone() {
                    let mut v = *pattern;
                    v[at] = b;
                    assert_eq!(is(&v, pattern), v.eq_ignore_ascii_case(pattern), "{v:?}");
                    v[at] = b.to_ascii_uppercase();
                    assert_eq!(is(&v, pattern), v.eq_ignore_ascii_case(pattern), "{v:?}");
                }
            }
            assert!(!is(&pattern[..N - 1], pattern), "a shorter value");
            let mut cr = *pattern;
            cr[N / 2] = b'\r';
            let confused = is(&cr, pattern);
            assert!(!confused || pattern[N / 2] == b'-', "{cr:?}");
        }
        check(b"host");
        check(b"close");
        check(b"expect");
        check(b"chunked");
        check(b"connection");
        check(b"keep-alive");
        check(b"100-continue");
        check(b"content-length");
        check(b"transfer-encoding");
        assert!(is(b"Keep-Alive", b"keep-alive"));
        assert!(is(b"CONTENT-LENGTH", b"content-length"));
    }
}
