//! The token and field-value rules (RFC 9110 §5.1, §5.5), byte by byte:
//! what every door of the head checks, and what a parser of the same
//! grammar accepts.

/// RFC 9110 `tchar`, a byte of a token: the rule of [`HeaderName::new`](super::HeaderName::new),
/// public so that a parser of the same grammar accepts what the head sends.
///
/// ```
/// use unflat::head::is_tchar;
/// // A chunk extension's name, as a request parser checks it.
/// let is_token = |s: &[u8]| !s.is_empty() && s.iter().all(|&b| is_tchar(b));
/// assert!(is_token(b"x-checksum"));
/// assert!(!is_token(b"bad name") && !is_token(b"a:b") && !is_token(b""));
/// ```
pub const fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

/// [`is_tchar`] of every byte: a name is checked a load per byte, with no
/// branch until its end ([`HeaderName::new`](super::HeaderName::new)).
pub(super) const TCHAR: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = matches!(b as u8,
            b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' |
            b'^' | b'_' | b'`' | b'|' | b'~' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z');
        b += 1;
    }
    table
};

/// RFC 9110 field-value byte (HTAB, SP, VCHAR, obs-text), as a reason
/// phrase's: the rule of [`HeaderValue::from_bytes`](super::HeaderValue::from_bytes), public as
/// [`is_tchar`] is.
///
/// ```
/// use unflat::head::is_field_value_byte;
/// assert!(b"text/plain; q=0.5\t\xe9".iter().all(|&b| is_field_value_byte(b)));
/// // No line ending and no NUL: a value cannot inject a field.
/// assert!(!is_field_value_byte(b'\r') && !is_field_value_byte(b'\n'));
/// assert!(!is_field_value_byte(0) && !is_field_value_byte(0x7f));
/// ```
pub const fn is_field_value_byte(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7F)
}

/// The first byte of `bytes` that is not a field-value byte.
pub(super) const fn first_invalid_value_byte(bytes: &[u8]) -> Option<(usize, u8)> {
    let mut i = 0;
    while i < bytes.len() {
        if !is_field_value_byte(bytes[i]) {
            return Some((i, bytes[i]));
        }
        i += 1;
    }
    None
}
