//! The HTTP/1.1 response head as a rope.
//!
//! A [`Head`] is composed per response without touching the heap: the status
//! line and fixed header lines are `'static` pieces (or [`Line`]s rendered
//! once at start-up), the `Date` line comes from a [`DateLine`] refreshed once
//! a second, and the `Content-Length` digits are formatted with itoa into the
//! head itself. The head is a [`Rope`], so it is encoded straight into a
//! write buffer like any other rope — by the one-byte fast path, since every
//! piece is ASCII or Latin-1.
//!
//! **Injection cannot be expressed.** Every name and value is validated where
//! it is built — [`HeaderName`] against the RFC 9110 token rule, [`HeaderValue`]
//! against field-value bytes (HTAB, SP, VCHAR, obs-text: no CR, LF or NUL) — and
//! the head writes every line ending itself.
//!
//! **The head owns framing.** [`Head::content_length`] and [`Head::chunked`]
//! exclude each other, statuses that never carry a body (1xx, 204, 304) refuse
//! both, and [`Head::body_allowed`] says whether body bytes may follow (never
//! after a response to `HEAD`).

use std::fmt;
use std::io::Write as _;
use std::ops::ControlFlow;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::rope::{CharRange, Piece, Rope, Shape};

/// Most header fields one [`Head`] holds besides its framing and date.
pub const MAX_FIELDS: usize = 16;

/// Why a head could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadError {
    /// A header name is empty or has a byte outside the token rule.
    InvalidName {
        /// Position of the offending byte.
        at: usize,
        /// The byte (0 when the name is empty).
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
    /// A status code outside 100..=999 or without a reason phrase here.
    UnknownStatus(u16),
    /// Both `Content-Length` and `Transfer-Encoding: chunked`, or either on a
    /// status that never has a body.
    Framing(&'static str),
    /// More than [`MAX_FIELDS`] fields.
    TooManyFields,
}

impl fmt::Display for HeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HeadError::InvalidName { at, byte } if byte == 0 && at == 0 => {
                f.write_str("invalid header name: empty")
            }
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
            HeadError::UnknownStatus(code) => write!(f, "unknown status code {code}"),
            HeadError::Framing(why) => write!(f, "invalid framing: {why}"),
            HeadError::TooManyFields => write!(f, "more than {MAX_FIELDS} header fields"),
        }
    }
}

impl std::error::Error for HeadError {}

/// RFC 9110 `tchar`.
const fn is_tchar(b: u8) -> bool {
    matches!(b,
        b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' |
        b'^' | b'_' | b'`' | b'|' | b'~' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z')
}

/// RFC 9110 field-value byte: HTAB, SP, VCHAR or obs-text.
const fn is_value_byte(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7F)
}

/// A header field name that satisfies the token rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderName<'a>(&'a str);

impl<'a> HeaderName<'a> {
    /// Validates `name`.
    pub const fn new(name: &'a str) -> Result<Self, HeadError> {
        let b = name.as_bytes();
        if b.is_empty() {
            return Err(HeadError::InvalidName { at: 0, byte: 0 });
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

/// A header field value: field-value bytes only, no surrounding whitespace.
/// Bytes 0x80..=0xFF are obs-text and are sent as they are (Latin-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderValue<'a>(&'a [u8]);

impl<'a> HeaderValue<'a> {
    /// Validates `value`.
    pub const fn new(value: &'a [u8]) -> Result<Self, HeadError> {
        let mut i = 0;
        while i < value.len() {
            if !is_value_byte(value[i]) {
                return Err(HeadError::InvalidValue {
                    at: i,
                    byte: value[i],
                });
            }
            i += 1;
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line(Vec<u8>);

impl Line {
    /// Renders `name: value\r\n`.
    pub fn new(name: HeaderName<'_>, value: HeaderValue<'_>) -> Line {
        let mut line = Vec::with_capacity(name.0.len() + value.0.len() + 4);
        line.extend_from_slice(name.0.as_bytes());
        line.extend_from_slice(b": ");
        line.extend_from_slice(value.0);
        line.extend_from_slice(b"\r\n");
        Line(line)
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
        &self.0
    }
}

/// A status code with its status line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    code: u16,
    line: &'static str,
}

macro_rules! statuses {
    ($($name:ident $code:literal $reason:literal;)*) => {
        impl Status {
            $(
                #[doc = concat!("`", $code, " ", $reason, "`")]
                pub const $name: Status = Status {
                    code: $code,
                    line: concat!("HTTP/1.1 ", $code, " ", $reason, "\r\n"),
                };
            )*

            /// The status for `code`, when this module knows its reason phrase.
            pub fn from_code(code: u16) -> Result<Status, HeadError> {
                match code {
                    $($code => Ok(Status::$name),)*
                    _ => Err(HeadError::UnknownStatus(code)),
                }
            }
        }
    };
}

statuses! {
    CONTINUE 100 "Continue";
    OK 200 "OK";
    NO_CONTENT 204 "No Content";
    NOT_MODIFIED 304 "Not Modified";
    BAD_REQUEST 400 "Bad Request";
    NOT_FOUND 404 "Not Found";
    METHOD_NOT_ALLOWED 405 "Method Not Allowed";
    REQUEST_TIMEOUT 408 "Request Timeout";
    LENGTH_REQUIRED 411 "Length Required";
    PAYLOAD_TOO_LARGE 413 "Content Too Large";
    URI_TOO_LONG 414 "URI Too Long";
    EXPECTATION_FAILED 417 "Expectation Failed";
    HEADER_FIELDS_TOO_LARGE 431 "Request Header Fields Too Large";
    INTERNAL_SERVER_ERROR 500 "Internal Server Error";
    NOT_IMPLEMENTED 501 "Not Implemented";
    SERVICE_UNAVAILABLE 503 "Service Unavailable";
    VERSION_NOT_SUPPORTED 505 "HTTP Version Not Supported";
}

impl Status {
    /// The numeric code.
    pub fn code(&self) -> u16 {
        self.code
    }

    /// `HTTP/1.1 <code> <reason>\r\n`.
    pub fn line(&self) -> &'static str {
        self.line
    }

    /// 1xx, 204 and 304 responses never carry a body (RFC 9110 §6.4.1).
    pub fn has_no_body(&self) -> bool {
        self.code < 200 || self.code == 204 || self.code == 304
    }
}

/// The `Date: <IMF-fixdate>\r\n` line, rendered at most once a second.
#[derive(Clone, Copy, Debug)]
pub struct DateLine {
    second: u64,
    line: [u8; DateLine::LEN],
}

impl DateLine {
    /// `Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n` is always 37 bytes.
    pub const LEN: usize = 37;

    /// The line for `now`.
    pub fn at(now: SystemTime) -> DateLine {
        let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut line = [0u8; DateLine::LEN];
        let mut w = &mut line[..];
        // An IMF-fixdate is exactly 29 bytes, so this cannot fail.
        write!(w, "Date: {}\r\n", httpdate::HttpDate::from(now))
            .expect("an IMF-fixdate line is 37 bytes");
        DateLine { second, line }
    }

    /// Re-renders the line if `now` is in a later second; true if it did.
    pub fn refresh(&mut self, now: SystemTime) -> bool {
        let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if second == self.second {
            return false;
        }
        *self = DateLine::at(now);
        true
    }

    /// The line, CRLF included.
    pub fn as_bytes(&self) -> &[u8; DateLine::LEN] {
        &self.line
    }
}

/// How the body that follows a head is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No `Content-Length` nor `Transfer-Encoding` (bodiless statuses, or a
    /// response whose body ends when the connection closes).
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The keep-alive decision the head announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persistence<'a> {
    /// Say nothing (an HTTP/1.1 connection stays open by default).
    Default,
    /// `Connection: keep-alive` and the given `Keep-Alive: timeout=…` line.
    KeepAlive(&'a Line),
    /// `Connection: close`.
    Close,
}

/// One field of a head.
#[derive(Clone, Copy, Debug)]
enum Field<'a> {
    Line(&'a Line),
    Pair(HeaderName<'a>, HeaderValue<'a>),
}

/// An HTTP/1.1 response head, composed without heap allocation.
///
/// ```
/// use unflat::head::{DateLine, Head, Line, Status};
/// use unflat::{size, write, Encoding, Mode};
/// let content_type = Line::parse("Content-Type", "text/plain").unwrap();
/// let date = DateLine::at(std::time::UNIX_EPOCH);
/// let mut head = Head::new(Status::OK, false);
/// head.line(&content_type).unwrap();
/// head.date(&date).content_length(5).unwrap();
/// let mut out = vec![0; size(&head, Encoding::Latin1)];
/// write(&head, Encoding::Latin1, Mode::Strict, &mut out).unwrap();
/// assert_eq!(out, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
///     Date: Thu, 01 Jan 1970 00:00:00 GMT\r\nContent-Length: 5\r\n\r\n");
/// ```
#[derive(Clone, Debug)]
pub struct Head<'a> {
    status: Status,
    head_request: bool,
    fields: [Option<Field<'a>>; MAX_FIELDS],
    count: usize,
    date: Option<&'a DateLine>,
    framing: Framing,
    digits: [u8; 20],
    digits_len: u8,
    persistence: Persistence<'a>,
}

impl<'a> Head<'a> {
    /// A head with `status`, answering a `HEAD` request when `head_request`
    /// (it then announces the framing a `GET` would have, and allows no body).
    pub fn new(status: Status, head_request: bool) -> Head<'a> {
        Head {
            status,
            head_request,
            fields: [None; MAX_FIELDS],
            count: 0,
            date: None,
            framing: Framing::None,
            digits: [0; 20],
            digits_len: 0,
            persistence: Persistence::Default,
        }
    }

    /// The status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Adds a pre-rendered line.
    pub fn line(&mut self, line: &'a Line) -> Result<&mut Self, HeadError> {
        self.push(Field::Line(line))
    }

    /// Adds `name: value`.
    pub fn field(
        &mut self,
        name: HeaderName<'a>,
        value: HeaderValue<'a>,
    ) -> Result<&mut Self, HeadError> {
        self.push(Field::Pair(name, value))
    }

    fn push(&mut self, field: Field<'a>) -> Result<&mut Self, HeadError> {
        let slot = self
            .fields
            .get_mut(self.count)
            .ok_or(HeadError::TooManyFields)?;
        *slot = Some(field);
        self.count += 1;
        Ok(self)
    }

    /// Adds the `Date` line.
    pub fn date(&mut self, date: &'a DateLine) -> &mut Self {
        self.date = Some(date);
        self
    }

    /// Sets `Content-Length: n`.
    pub fn content_length(&mut self, n: u64) -> Result<&mut Self, HeadError> {
        self.set_framing(Framing::Length(n))?;
        let mut buf = itoa::Buffer::new();
        let digits = buf.format(n).as_bytes();
        self.digits[..digits.len()].copy_from_slice(digits);
        self.digits_len = digits.len() as u8;
        Ok(self)
    }

    /// Sets `Transfer-Encoding: chunked`.
    pub fn chunked(&mut self) -> Result<&mut Self, HeadError> {
        self.set_framing(Framing::Chunked)
    }

    fn set_framing(&mut self, framing: Framing) -> Result<&mut Self, HeadError> {
        if self.framing != Framing::None {
            return Err(HeadError::Framing(
                "Content-Length and Transfer-Encoding exclude each other, and each is sent once",
            ));
        }
        if self.status.has_no_body() {
            return Err(HeadError::Framing(
                "1xx, 204 and 304 responses carry no body framing",
            ));
        }
        self.framing = framing;
        Ok(self)
    }

    /// Sets what the head says about the connection.
    pub fn persistence(&mut self, persistence: Persistence<'a>) -> &mut Self {
        self.persistence = persistence;
        self
    }

    /// The framing announced.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Whether body bytes may follow this head: never for `HEAD` requests or
    /// bodiless statuses.
    pub fn body_allowed(&self) -> bool {
        !self.head_request && !self.status.has_no_body()
    }

    fn content_length_digits(&self) -> &[u8] {
        &self.digits[..usize::from(self.digits_len)]
    }
}

const CONTENT_LENGTH: &str = "Content-Length: ";
const CHUNKED: &str = "Transfer-Encoding: chunked\r\n";
const KEEP_ALIVE: &str = "Connection: keep-alive\r\n";
const CLOSE: &str = "Connection: close\r\n";
const CRLF: &str = "\r\n";

impl Rope for Head<'_> {
    fn for_each_piece<'s>(
        &'s self,
        visit: &mut dyn FnMut(Piece<'s>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let mut one = |s: &'s [u8]| visit(Piece::OneByte(s));
        one(self.status.line.as_bytes())?;
        for field in self.fields[..self.count].iter().flatten() {
            match field {
                Field::Line(line) => one(line.as_bytes())?,
                Field::Pair(name, value) => {
                    one(name.0.as_bytes())?;
                    one(b": ")?;
                    one(value.0)?;
                    one(CRLF.as_bytes())?;
                }
            }
        }
        if let Some(date) = self.date {
            one(date.as_bytes())?;
        }
        match self.framing {
            Framing::None => {}
            Framing::Length(_) => {
                one(CONTENT_LENGTH.as_bytes())?;
                one(self.content_length_digits())?;
                one(CRLF.as_bytes())?;
            }
            Framing::Chunked => one(CHUNKED.as_bytes())?,
        }
        match self.persistence {
            Persistence::Default => {}
            Persistence::KeepAlive(line) => {
                one(KEEP_ALIVE.as_bytes())?;
                one(line.as_bytes())?;
            }
            Persistence::Close => one(CLOSE.as_bytes())?,
        }
        one(CRLF.as_bytes())
    }

    /// O(fields), from lengths. Every piece is one-byte (ASCII, and
    /// obs-text in values), so the head always takes the one-byte fast path
    /// to latin1.
    fn shape(&self) -> Shape {
        let fields: usize = self.fields[..self.count]
            .iter()
            .flatten()
            .map(|f| match f {
                Field::Line(line) => line.as_bytes().len(),
                Field::Pair(name, value) => name.0.len() + 2 + value.0.len() + CRLF.len(),
            })
            .sum();
        let framing = match self.framing {
            Framing::None => 0,
            Framing::Length(_) => {
                CONTENT_LENGTH.len() + self.content_length_digits().len() + CRLF.len()
            }
            Framing::Chunked => CHUNKED.len(),
        };
        let persistence = match self.persistence {
            Persistence::Default => 0,
            Persistence::KeepAlive(line) => KEEP_ALIVE.len() + line.as_bytes().len(),
            Persistence::Close => CLOSE.len(),
        };
        Shape {
            one_byte: self.status.line.len()
                + fields
                + self.date.map_or(0, |_| DateLine::LEN)
                + framing
                + persistence
                + CRLF.len(),
            utf8: 0,
            two_byte: 0,
            range: CharRange::Latin1,
        }
    }
}

/// The head's bytes as Latin-1: a convenience for tests and small tools.
impl Head<'_> {
    /// Encodes the head into a new vector (the server encodes it straight
    /// into its write buffer instead).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        crate::write_buf(self, crate::Encoding::Latin1, crate::Mode::Strict, &mut out)
            .expect("a head is one-byte text");
        out
    }
}
