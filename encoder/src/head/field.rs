//! Header fields: names and values validated where they are built, and
//! whole lines rendered once.

use super::grammar::{first_invalid_value_byte, is_tchar, TCHAR};
use super::write::Out;
use super::HeadError;

/// The fields a head writes itself, refused as fields: framing
/// ([`HeadError::FramingField`]), persistence and the date
/// ([`HeadError::OwnedField`], which names the field).
pub(super) fn owned_name(name: &[u8]) -> Result<(), HeadError> {
    // Only names of these lengths can be one: most names are rejected by
    // their length alone.
    match name.len() {
        14 | 17 if is_framing_name(name) => Err(HeadError::FramingField),
        4 | 10 => {
            for owned in ["Date", "Connection", "Keep-Alive"] {
                if name.eq_ignore_ascii_case(owned.as_bytes()) {
                    return Err(HeadError::OwnedField { name: owned });
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `Content-Length` or `Transfer-Encoding`, in any case.
fn is_framing_name(name: &[u8]) -> bool {
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
        // Every byte looked up, the first bad one searched for only when
        // there is one: a name is checked without a branch per byte.
        let mut i = 0;
        let mut all = true;
        while i < b.len() {
            all &= TCHAR[b[i] as usize];
            i += 1;
        }
        if all {
            return Ok(HeaderName(name));
        }
        let mut i = 0;
        while is_tchar(b[i]) {
            i += 1;
        }
        Err(HeadError::InvalidName { at: i, byte: b[i] })
    }

    /// The name.
    pub fn as_str(&self) -> &'a str {
        self.0
    }

    /// Validates `name` as the name of a field a head takes: a token, and
    /// none of the fields the head writes itself (`Content-Length`,
    /// `Transfer-Encoding`: [`HeadError::FramingField`]; `Connection`,
    /// `Keep-Alive`, `Date`: [`HeadError::OwnedField`]) — the check of
    /// [`Head::value`](super::Head::value), for code that gathers fields
    /// before it builds the head.
    ///
    /// ```
    /// use unflat::head::{HeadError, HeaderName};
    /// assert!(HeaderName::for_field("Set-Cookie").is_ok());
    /// assert_eq!(HeaderName::for_field("connection"), Err(HeadError::OwnedField { name: "Connection" }));
    /// ```
    pub fn for_field(name: &'a str) -> Result<Self, HeadError> {
        let name = HeaderName::new(name)?;
        owned_name(name.0.as_bytes())?;
        Ok(name)
    }
}

/// A header field value as bytes, sent as given: field-value bytes only
/// (obs-text allowed), no surrounding whitespace; CR and LF are refused, so
/// no injection. Text goes through a text door ([`Line::parse`],
/// [`Head::value`](super::Head::value)), which writes each character as
/// its Latin-1 byte.
///
/// ```
/// use unflat::head::{Head, HeadError, HeaderName, HeaderValue, Status, RequestMethod};
/// let value = HeaderValue::from_bytes(b"text/plain").unwrap();
/// assert_eq!(
///     HeaderValue::from_bytes(b"x\r\nSet-Cookie: a=b"),
///     Err(HeadError::InvalidValue { at: 1, byte: b'\r' })
/// );
/// let mut head = Head::new(Status::OK, RequestMethod::Other);
/// head.field(HeaderName::new("Content-Type").unwrap(), value).unwrap();
/// assert_eq!(head.to_vec().unwrap(), b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderValue<'a>(pub(super) &'a [u8]);

impl<'a> HeaderValue<'a> {
    /// Validates `value`, bytes to be sent as they are.
    pub const fn from_bytes(value: &'a [u8]) -> Result<Self, HeadError> {
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
/// start-up, for fields every response carries): from text
/// ([`Line::parse`], each character its Latin-1 byte) or bytes
/// ([`Line::new`] of a [`HeaderValue::from_bytes`]).
///
/// ```
/// use unflat::head::{Head, Line, Status, RequestMethod};
/// let server = Line::parse("Server", "unflat").unwrap(); // once, at start-up
/// assert_eq!(server.as_bytes(), b"Server: unflat\r\n");
/// assert_eq!(server.name().as_str(), "Server");
/// let mut head = Head::new(Status::OK, RequestMethod::Other); // per response: borrowed, not copied
/// head.line(&server).unwrap().content_length(0).unwrap();
/// assert_eq!(head.to_vec().unwrap(), b"HTTP/1.1 200 OK\r\nServer: unflat\r\nContent-Length: 0\r\n\r\n");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    bytes: Vec<u8>,
    pub(super) name_len: usize,
}

impl Line {
    /// Renders `name: value\r\n`, the value's bytes as given.
    pub fn new(name: HeaderName<'_>, value: HeaderValue<'_>) -> Line {
        let mut line = Vec::with_capacity(name.0.len() + value.0.len() + 4);
        line.extend_from_slice(name.0.as_bytes());
        line.extend_from_slice(b": ");
        line.extend_from_slice(value.0);
        line.extend_from_slice(b"\r\n");
        Line {
            bytes: line,
            name_len: name.0.len(),
        }
    }

    /// Validates and renders `name: value\r\n`, `value` text: each
    /// character written as its Latin-1 byte, checked as it is written —
    /// the rule of [`Head::value`](super::Head::value), with its errors.
    ///
    /// ```
    /// use unflat::head::{HeadError, Line};
    /// let line = Line::parse("X-Word", "na\u{ef}ve").unwrap();
    /// assert_eq!(line.as_bytes(), b"X-Word: na\xefve\r\n");
    /// let err = Line::parse("X-Price", "5\u{20ac}").unwrap_err();
    /// assert_eq!(err, HeadError::UnsendableChar { at: 1, code_point: 0x20AC });
    /// ```
    pub fn parse(name: &str, value: &str) -> Result<Line, HeadError> {
        let name = HeaderName::new(name)?;
        let mut bytes = vec![0; name.0.len() + 2 + value.len() + 2];
        let mut out = Out::new(&mut bytes);
        let overrun =
            |_| unreachable!("a line's room is its text's bytes, at least its characters");
        out.put(name.0.as_bytes()).unwrap_or_else(overrun);
        out.put(b": ").unwrap_or_else(overrun);
        out.value(&value)?;
        out.put(b"\r\n").unwrap_or_else(overrun);
        let n = out.written();
        bytes.truncate(n);
        Ok(Line {
            bytes,
            name_len: name.0.len(),
        })
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
