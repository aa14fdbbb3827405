//! Why a head could not be built.

use std::fmt;

/// Why a head could not be built.
///
/// ```
/// use unflat::head::{Head, HeadError, Status, RequestMethod};
/// let mut head = Head::new(Status::NOT_MODIFIED, RequestMethod::Other);
/// assert_eq!(head.content_length(5).unwrap_err(), HeadError::FramingWithoutBody);
/// let mut head = Head::new(Status::OK, RequestMethod::Other);
/// head.chunked().unwrap();
/// let err = head.content_length(5).unwrap_err();
/// assert_eq!(err, HeadError::FramingTwice);
/// assert!(err.to_string().starts_with("invalid framing"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeadError {
    /// A header name is empty.
    EmptyName,
    /// A header name has a byte outside the token rule.
    InvalidName {
        /// Position of the offending byte.
        at: usize,
        /// The byte.
        byte: u8,
    },
    /// A header value has a byte that field values may not hold (CR, LF,
    /// NUL or another control byte), or leading/trailing whitespace.
    InvalidValue {
        /// Position of the offending byte.
        at: usize,
        /// The byte.
        byte: u8,
    },
    /// A reason phrase has a byte that reason phrases may not hold (CR, LF,
    /// NUL or another control byte other than HTAB).
    InvalidReason {
        /// Position of the offending byte.
        at: usize,
        /// The byte.
        byte: u8,
    },
    /// A status code outside 100..=999 (three digits; classes beyond 5xx
    /// are sendable, as in the `http` crate).
    InvalidStatus(u16),
    /// `Content-Length` or `Transfer-Encoding` given as a field: the head
    /// owns framing ([`Head::content_length`](super::Head::content_length), [`Head::chunked`](super::Head::chunked)).
    FramingField,
    /// A field the head writes itself given as a field: `Connection`,
    /// `Keep-Alive` ([`Head::persistence`](super::Head::persistence)) or
    /// `Date` ([`Head::date`](super::Head::date)); a server on the head
    /// names those it adds of its own the same way.
    OwnedField {
        /// The field, as the head writes it.
        name: &'static str,
    },
    /// Framing set twice: `Content-Length` and `Transfer-Encoding` exclude
    /// each other, and each is sent once.
    FramingTwice,
    /// Framing on a status that never has a body (1xx, 204, 304).
    FramingWithoutBody,
    /// More fields than the head has room for (its `N`).
    TooManyFields,
    /// A value rope ([`Head::value`](super::Head::value)) gave more
    /// characters as it was written than it measured: its pieces changed
    /// between the two. The room it took was measured for the fields after
    /// it: the value named is the last one written when the room ran out.
    ValueChanged {
        /// Bytes from the value's start to where the room ran out.
        at: usize,
    },
    /// A character of a text value ([`Head::value`](super::Head::value),
    /// [`Line::parse`](super::Line::parse)) above U+00FF: a head is one-byte
    /// text, each character one byte.
    UnsendableChar {
        /// Characters before it in the value.
        at: usize,
        /// The character's code point (a UTF-16 code unit as it is).
        code_point: u32,
    },
}

impl fmt::Display for HeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HeadError::EmptyName => f.write_str("invalid header name: empty"),
            HeadError::InvalidName { at, byte } => {
                write!(
                    f,
                    "invalid header name: byte 0x{byte:02X} at {at} is not a token character"
                )
            }
            HeadError::InvalidValue { at, byte } => {
                write!(
                    f,
                    "invalid header value: byte 0x{byte:02X} at {at} is not allowed"
                )
            }
            HeadError::InvalidReason { at, byte } => {
                write!(
                    f,
                    "invalid reason phrase: byte 0x{byte:02X} at {at} is not allowed"
                )
            }
            HeadError::InvalidStatus(code) => {
                write!(f, "status code {code} is not in 100..=999")
            }
            HeadError::FramingField => f.write_str(
                "invalid framing: Content-Length and Transfer-Encoding are set by content_length() and chunked(), not as fields",
            ),
            HeadError::FramingTwice => f.write_str(
                "invalid framing: Content-Length and Transfer-Encoding exclude each other, and each is sent once",
            ),
            HeadError::FramingWithoutBody => {
                f.write_str("invalid framing: 1xx, 204 and 304 responses carry no body framing")
            }
            HeadError::OwnedField { name } => write!(
                f,
                "invalid field: {name} is written by the head itself, never as a field"
            ),
            HeadError::ValueChanged { at } => write!(
                f,
                "invalid header value: the value gave more than {at} characters, more than it measured (it changed between its measure and its walk)"
            ),
            HeadError::TooManyFields => {
                f.write_str("more header fields than the head has room for")
            }
            HeadError::UnsendableChar { at, code_point } => write!(
                f,
                "invalid header value: character U+{code_point:04X} at {at} is above U+00FF (a head is one-byte text)"
            ),
        }
    }
}

impl std::error::Error for HeadError {}
