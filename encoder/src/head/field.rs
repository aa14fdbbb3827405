//! Header fields: the token and field-value rules (RFC 9110 §5.1, §5.5),
//! names and values validated where they are built, and whole lines
//! rendered once.

use super::HeadError;

/// RFC 9110 `tchar`, a byte of a token: the rule of [`HeaderName::new`],
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
    matches!(b,
        b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' |
        b'^' | b'_' | b'`' | b'|' | b'~' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z')
}

/// RFC 9110 field-value byte (HTAB, SP, VCHAR, obs-text), as a reason
/// phrase's: the rule of [`HeaderValue::new`], public as [`is_tchar`] is.
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

/// `Content-Length` or `Transfer-Encoding`, in any case: the fields the head
/// writes itself.
pub(super) fn is_framing_name(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"content-length") || name.eq_ignore_ascii_case(b"transfer-encoding")
}

/// A header field name that satisfies the token rule.
///
/// ```
/// use unflat::head::{HeadError, HeaderName};
/// assert_eq!(HeaderName::new("X-Request-Id").unwrap().as_str(), "X-Request-Id");
/// assert_eq!(HeaderName::new("Bad Name"), Err(HeadError::InvalidName { at: 3, byte: b' ' }));
/// assert_eq!(HeaderName::new(""), Err(HeadError::EmptyName));
/// // `const`: checked at compile time in a constant.
/// const SERVER: HeaderName = match HeaderName::new("Server") {
///     Ok(name) => name,
///     Err(_) => panic!("not a token"),
/// };
/// # let _ = SERVER;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderName<'a>(pub(super) &'a str);

impl<'a> HeaderName<'a> {
    /// Validates `name`.
    pub const fn new(name: &'a str) -> Result<Self, HeadError> {
        let b = name.as_bytes();
        if b.is_empty() {
            return Err(HeadError::EmptyName);
        }
        let mut i = 0;
        while i < b.len() {
            if !is_tchar(b[i]) {
                return Err(HeadError::InvalidName { at: i, byte: b[i] });
            }
            i += 1;
        }
        Ok(HeaderName(name))
    }

    /// The name.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// A header field value: field-value bytes only (obs-text sent as Latin-1),
/// no surrounding whitespace; CR and LF are refused, so no injection.
///
/// ```
/// use unflat::head::{Head, HeadError, HeaderName, HeaderValue, Status, RequestMethod};
/// let value = HeaderValue::new(b"text/plain").unwrap();
/// assert_eq!(
///     HeaderValue::new(b"x\r\nSet-Cookie: a=b"),
///     Err(HeadError::InvalidValue { at: 1, byte: b'\r' })
/// );
/// let mut head = Head::new(Status::OK, RequestMethod::Other);
/// head.field(HeaderName::new("Content-Type").unwrap(), value).unwrap();
/// assert_eq!(head.to_vec(), b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderValue<'a>(pub(super) &'a [u8]);

impl<'a> HeaderValue<'a> {
    /// Validates `value`.
    pub const fn new(value: &'a [u8]) -> Result<Self, HeadError> {
        if let Some((at, byte)) = first_invalid_value_byte(value) {
            return Err(HeadError::InvalidValue { at, byte });
        }
        if let [first, ..] = value {
            if *first == b' ' || *first == b'\t' {
                return Err(HeadError::InvalidValue {
                    at: 0,
                    byte: *first,
                });
            }
        }
        if let [.., last] = value {
            if *last == b' ' || *last == b'\t' {
                return Err(HeadError::InvalidValue {
                    at: value.len() - 1,
                    byte: *last,
                });
            }
        }
        Ok(HeaderValue(value))
    }

    /// The value's bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }
}

/// A whole header line, `Name: value\r\n`, validated and rendered once (at
/// start-up, for fields every response carries).
///
/// ```
/// use unflat::head::{Head, Line, Status, RequestMethod};
/// let server = Line::parse("Server", "unflat").unwrap(); // once, at start-up
/// assert_eq!(server.as_bytes(), b"Server: unflat\r\n");
/// assert_eq!(server.name().as_str(), "Server");
/// let mut head = Head::new(Status::OK, RequestMethod::Other); // per response: borrowed, not copied
/// head.line(&server).unwrap().content_length(0).unwrap();
/// assert_eq!(head.to_vec(), b"HTTP/1.1 200 OK\r\nServer: unflat\r\nContent-Length: 0\r\n\r\n");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    bytes: Vec<u8>,
    pub(super) name_len: usize,
    /// Whether every byte is ASCII (the head's shape says so).
    pub(super) ascii: bool,
}

impl Line {
    /// Renders `name: value\r\n`.
    pub fn new(name: HeaderName<'_>, value: HeaderValue<'_>) -> Line {
        let mut line = Vec::with_capacity(name.0.len() + value.0.len() + 4);
        line.extend_from_slice(name.0.as_bytes());
        line.extend_from_slice(b": ");
        line.extend_from_slice(value.0);
        line.extend_from_slice(b"\r\n");
        Line {
            bytes: line,
            name_len: name.0.len(),
            ascii: value.0.is_ascii(),
        }
    }

    /// Validates and renders `name: value\r\n`.
    pub fn parse(name: &str, value: &str) -> Result<Line, HeadError> {
        Ok(Line::new(
            HeaderName::new(name)?,
            HeaderValue::new(value.as_bytes())?,
        ))
    }

    /// The rendered line, CRLF included.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The field name.
    pub fn name(&self) -> HeaderName<'_> {
        // Rendered from a `HeaderName`: ASCII token bytes.
        HeaderName(std::str::from_utf8(&self.bytes[..self.name_len]).expect("a token is ASCII"))
    }
}
