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

/// Header fields a [`Head`] holds by default (its `N`), besides its status,
/// framing, date and persistence lines.
pub const MAX_FIELDS: usize = 16;

/// Why a head could not be built.
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
    /// A status code outside 100..=999 (RFC 9110 §15: three digits; the
    /// classes beyond 5xx are unassigned, but sendable, as in the `http`
    /// crate).
    InvalidStatus(u16),
    /// `Content-Length` or `Transfer-Encoding` given as a field: the head
    /// owns framing ([`Head::content_length`], [`Head::chunked`]).
    FramingField,
    /// Framing set twice: `Content-Length` and `Transfer-Encoding` exclude
    /// each other, and each is sent once.
    FramingTwice,
    /// Framing on a status that never has a body (1xx, 204, 304).
    FramingWithoutBody,
    /// More fields than the head has room for (its `N`).
    TooManyFields,
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
            HeadError::TooManyFields => {
                f.write_str("more header fields than the head has room for")
            }
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

/// RFC 9110 field-value byte: HTAB, SP, VCHAR or obs-text. RFC 9112's
/// reason-phrase allows the same bytes.
const fn is_value_byte(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7F)
}

/// The first byte of `bytes` that is not a field-value byte.
const fn first_invalid_value_byte(bytes: &[u8]) -> Option<(usize, u8)> {
    let mut i = 0;
    while i < bytes.len() {
        if !is_value_byte(bytes[i]) {
            return Some((i, bytes[i]));
        }
        i += 1;
    }
    None
}

/// `Content-Length` or `Transfer-Encoding`, in any case: the fields the head
/// writes itself.
fn is_framing_name(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"content-length") || name.eq_ignore_ascii_case(b"transfer-encoding")
}

/// A header field name that satisfies the token rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderName<'a>(&'a str);

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

/// A header field value: field-value bytes only, no surrounding whitespace.
/// Bytes 0x80..=0xFF are obs-text and are sent as they are (Latin-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderValue<'a>(&'a [u8]);

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    bytes: Vec<u8>,
    name_len: usize,
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

/// A status code and its reason phrase: the status line of a response.
///
/// Any code from 100 to 999 can be sent, with any reason phrase or none
/// (`HTTP/1.1 299 \r\n`, which RFC 9112 §4 allows). The codes registered
/// with IANA have constants ([`Status::OK`], [`Status::CREATED`], …) whose
/// line is one `'static` string, so the common head costs one piece; a code
/// with another phrase, or none, is written as a few `'static` pieces.
///
/// ```
/// use unflat::head::{Head, Status};
/// assert_eq!(Status::from_code(404).unwrap(), Status::NOT_FOUND);
/// assert_eq!(Status::from_code(299).unwrap().reason(), None);
/// let teapot = Status::new(418, Some("I'm a teapot")).unwrap();
/// assert!(Head::new(teapot, false).to_vec().starts_with(b"HTTP/1.1 418 I'm a teapot\r\n"));
/// assert!(Status::new(1000, None).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status {
    code: u16,
    /// Empty when there is none.
    reason: &'static str,
    /// The whole line, when it is the code's registered phrase. A function
    /// of `code` and `reason` (see [`Status::new`]), so equality stays that
    /// of code and phrase.
    line: Option<&'static str>,
}

/// The three digits of every code 100..=999, one after the other, so that a
/// status line without a static string of its own still borrows only
/// `'static` text.
static DIGITS: [u8; 2700] = {
    let mut t = [0u8; 2700];
    let mut code = 100;
    while code < 1000 {
        let at = (code - 100) * 3;
        t[at] = b'0' + (code / 100) as u8;
        t[at + 1] = b'0' + (code / 10 % 10) as u8;
        t[at + 2] = b'0' + (code % 10) as u8;
        code += 1;
    }
    t
};

/// `const` string equality.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

macro_rules! statuses {
    ($($name:ident $code:literal $reason:literal;)*) => {
        impl Status {
            $(
                #[doc = concat!("`", $code, " ", $reason, "`")]
                pub const $name: Status = Status {
                    code: $code,
                    reason: $reason,
                    line: Some(concat!("HTTP/1.1 ", $code, " ", $reason, "\r\n")),
                };
            )*

            /// The status with the phrase registered for `code`, if IANA
            /// registered one.
            pub const fn registered(code: u16) -> Option<Status> {
                match code {
                    $($code => Some(Status::$name),)*
                    _ => None,
                }
            }
        }
    };
}

// The IANA HTTP Status Code Registry (RFC 9110 §15 and the RFCs it lists),
// without the unused 306 and 418 and the temporary 104.
statuses! {
    CONTINUE 100 "Continue";
    SWITCHING_PROTOCOLS 101 "Switching Protocols";
    PROCESSING 102 "Processing";
    EARLY_HINTS 103 "Early Hints";
    OK 200 "OK";
    CREATED 201 "Created";
    ACCEPTED 202 "Accepted";
    NON_AUTHORITATIVE_INFORMATION 203 "Non-Authoritative Information";
    NO_CONTENT 204 "No Content";
    RESET_CONTENT 205 "Reset Content";
    PARTIAL_CONTENT 206 "Partial Content";
    MULTI_STATUS 207 "Multi-Status";
    ALREADY_REPORTED 208 "Already Reported";
    IM_USED 226 "IM Used";
    MULTIPLE_CHOICES 300 "Multiple Choices";
    MOVED_PERMANENTLY 301 "Moved Permanently";
    FOUND 302 "Found";
    SEE_OTHER 303 "See Other";
    NOT_MODIFIED 304 "Not Modified";
    USE_PROXY 305 "Use Proxy";
    TEMPORARY_REDIRECT 307 "Temporary Redirect";
    PERMANENT_REDIRECT 308 "Permanent Redirect";
    BAD_REQUEST 400 "Bad Request";
    UNAUTHORIZED 401 "Unauthorized";
    PAYMENT_REQUIRED 402 "Payment Required";
    FORBIDDEN 403 "Forbidden";
    NOT_FOUND 404 "Not Found";
    METHOD_NOT_ALLOWED 405 "Method Not Allowed";
    NOT_ACCEPTABLE 406 "Not Acceptable";
    PROXY_AUTHENTICATION_REQUIRED 407 "Proxy Authentication Required";
    REQUEST_TIMEOUT 408 "Request Timeout";
    CONFLICT 409 "Conflict";
    GONE 410 "Gone";
    LENGTH_REQUIRED 411 "Length Required";
    PRECONDITION_FAILED 412 "Precondition Failed";
    PAYLOAD_TOO_LARGE 413 "Content Too Large";
    URI_TOO_LONG 414 "URI Too Long";
    UNSUPPORTED_MEDIA_TYPE 415 "Unsupported Media Type";
    RANGE_NOT_SATISFIABLE 416 "Range Not Satisfiable";
    EXPECTATION_FAILED 417 "Expectation Failed";
    MISDIRECTED_REQUEST 421 "Misdirected Request";
    UNPROCESSABLE_CONTENT 422 "Unprocessable Content";
    LOCKED 423 "Locked";
    FAILED_DEPENDENCY 424 "Failed Dependency";
    TOO_EARLY 425 "Too Early";
    UPGRADE_REQUIRED 426 "Upgrade Required";
    PRECONDITION_REQUIRED 428 "Precondition Required";
    TOO_MANY_REQUESTS 429 "Too Many Requests";
    HEADER_FIELDS_TOO_LARGE 431 "Request Header Fields Too Large";
    UNAVAILABLE_FOR_LEGAL_REASONS 451 "Unavailable For Legal Reasons";
    INTERNAL_SERVER_ERROR 500 "Internal Server Error";
    NOT_IMPLEMENTED 501 "Not Implemented";
    BAD_GATEWAY 502 "Bad Gateway";
    SERVICE_UNAVAILABLE 503 "Service Unavailable";
    GATEWAY_TIMEOUT 504 "Gateway Timeout";
    VERSION_NOT_SUPPORTED 505 "HTTP Version Not Supported";
    VARIANT_ALSO_NEGOTIATES 506 "Variant Also Negotiates";
    INSUFFICIENT_STORAGE 507 "Insufficient Storage";
    LOOP_DETECTED 508 "Loop Detected";
    NOT_EXTENDED 510 "Not Extended";
    NETWORK_AUTHENTICATION_REQUIRED 511 "Network Authentication Required";
}

const STATUS_PREFIX: &str = "HTTP/1.1 ";

impl Status {
    /// `code` with `reason` (`None`: an empty reason phrase). When `reason`
    /// is the phrase registered for `code`, the result is that constant.
    ///
    /// Fails with [`HeadError::InvalidStatus`] for a code outside 100..=999
    /// and [`HeadError::InvalidReason`] for a phrase with a control byte
    /// (HTAB, SP, visible characters and obs-text are allowed).
    pub const fn new(code: u16, reason: Option<&'static str>) -> Result<Status, HeadError> {
        if code < 100 || code > 999 {
            return Err(HeadError::InvalidStatus(code));
        }
        let reason = match reason {
            Some(r) => r,
            None => "",
        };
        if let Some((at, byte)) = first_invalid_value_byte(reason.as_bytes()) {
            return Err(HeadError::InvalidReason { at, byte });
        }
        Ok(Status::checked(code, reason))
    }

    /// `code` (in 100..=999) with `reason` (valid, possibly empty): the
    /// registered status, whose line is prebuilt, when the reason is its
    /// own; otherwise a status whose line is built from its parts.
    const fn checked(code: u16, reason: &'static str) -> Status {
        if let Some(known) = Status::registered(code) {
            if same(known.reason, reason) {
                return known;
            }
        }
        Status {
            code,
            reason,
            line: None,
        }
    }

    /// `code` with its registered reason phrase, or with none when IANA
    /// registered none (`HTTP/1.1 299 \r\n`).
    pub const fn from_code(code: u16) -> Result<Status, HeadError> {
        match Status::registered(code) {
            Some(status) => Ok(status),
            None => Status::new(code, None),
        }
    }

    /// The numeric code.
    pub fn code(&self) -> u16 {
        self.code
    }

    /// The reason phrase, if not empty.
    pub fn reason(&self) -> Option<&'static str> {
        (!self.reason.is_empty()).then_some(self.reason)
    }

    /// `HTTP/1.1 <code> <reason>\r\n` when it is one `'static` string: for
    /// the registered phrases. Other statuses are written in a few pieces.
    pub fn line(&self) -> Option<&'static str> {
        self.line
    }

    /// 1xx, 204 and 304 responses never carry a body (RFC 9110 §6.4.1).
    pub fn has_no_body(&self) -> bool {
        self.code < 200 || self.code == 204 || self.code == 304
    }

    /// The code's three digits.
    fn digits(&self) -> &'static [u8] {
        let at = usize::from(self.code - 100) * 3;
        &DIGITS[at..at + 3]
    }

    /// Bytes of the status line.
    fn line_len(&self) -> usize {
        match self.line {
            Some(line) => line.len(),
            None => STATUS_PREFIX.len() + 3 + 1 + self.reason.len() + CRLF.len(),
        }
    }

    /// Visits the status line's pieces.
    fn visit<'s>(&self, one: &mut impl FnMut(&'s [u8]) -> ControlFlow<()>) -> ControlFlow<()> {
        if let Some(line) = self.line {
            return one(line.as_bytes());
        }
        one(STATUS_PREFIX.as_bytes())?;
        one(self.digits())?;
        one(b" ")?;
        if !self.reason.is_empty() {
            one(self.reason.as_bytes())?;
        }
        one(CRLF.as_bytes())
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

/// How a message body is delimited (RFC 9112 §6): the body that follows a
/// response head, and, in a server, the request body it reads.
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
    /// Every field of a map, walked when the head is written.
    #[cfg(feature = "http")]
    Map(&'a http::HeaderMap),
}

impl Field<'_> {
    /// Bytes of the field's lines.
    fn len(&self) -> usize {
        match self {
            Field::Line(line) => line.as_bytes().len(),
            Field::Pair(name, value) => pair_len(name.0.as_bytes(), value.0),
            #[cfg(feature = "http")]
            Field::Map(map) => map
                .iter()
                .map(|(n, v)| pair_len(n.as_str().as_bytes(), HeaderValue::from(v).0))
                .sum(),
        }
    }
}

/// Visits `name: value\r\n` as four pieces.
fn visit_pair<'s>(
    name: &'s [u8],
    value: &'s [u8],
    visit: &mut dyn FnMut(Piece<'s>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    visit(Piece::OneByte(name))?;
    visit(Piece::OneByte(b": "))?;
    visit(Piece::OneByte(value))?;
    visit(Piece::OneByte(CRLF.as_bytes()))
}

/// Bytes of `name: value\r\n`.
fn pair_len(name: &[u8], value: &[u8]) -> usize {
    name.len() + 2 + value.len() + CRLF.len()
}

/// An HTTP/1.1 response head, composed without heap allocation.
///
/// It holds up to `N` fields (16 by default, [`MAX_FIELDS`]) besides the
/// status line, `Date`, framing and persistence lines; a head with more
/// room is `Head::<'_, 64>::with_room(..)`. With the `http` feature, one
/// field slot can hold a whole `http::HeaderMap` (`Head::header_map`).
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
///
/// // The head owns framing: no Content-Length or Transfer-Encoding field.
/// let length = Line::parse("content-length", "5").unwrap();
/// assert!(head.line(&length).is_err());
/// ```
#[derive(Clone, Debug)]
pub struct Head<'a, const N: usize = MAX_FIELDS> {
    status: Status,
    head_request: bool,
    fields: [Option<Field<'a>>; N],
    count: usize,
    date: Option<&'a DateLine>,
    framing: Framing,
    digits: [u8; 20],
    digits_len: u8,
    persistence: Persistence<'a>,
}

impl<'a> Head<'a> {
    /// A head with `status` and room for [`MAX_FIELDS`] fields, answering a
    /// `HEAD` request when `head_request` (it then announces the framing a
    /// `GET` would have, and allows no body).
    pub fn new(status: Status, head_request: bool) -> Head<'a> {
        Head::with_room(status, head_request)
    }
}

impl<'a, const N: usize> Head<'a, N> {
    /// [`Head::new`] with room for `N` fields: `Head::<'_, 64>::with_room(..)`.
    pub fn with_room(status: Status, head_request: bool) -> Head<'a, N> {
        Head {
            status,
            head_request,
            fields: [None; N],
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

    /// Adds a pre-rendered line. A `Content-Length` or `Transfer-Encoding`
    /// line is refused with [`HeadError::FramingField`].
    pub fn line(&mut self, line: &'a Line) -> Result<&mut Self, HeadError> {
        if is_framing_name(&line.as_bytes()[..line.name_len]) {
            return Err(HeadError::FramingField);
        }
        self.push(Field::Line(line))
    }

    /// Adds `name: value`. `Content-Length` and `Transfer-Encoding` are
    /// refused with [`HeadError::FramingField`].
    pub fn field(
        &mut self,
        name: HeaderName<'a>,
        value: HeaderValue<'a>,
    ) -> Result<&mut Self, HeadError> {
        if is_framing_name(name.0.as_bytes()) {
            return Err(HeadError::FramingField);
        }
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
            return Err(HeadError::FramingTwice);
        }
        if self.status.has_no_body() {
            return Err(HeadError::FramingWithoutBody);
        }
        self.framing = framing;
        Ok(self)
    }

    /// Sets what the head says about the connection.
    pub fn persistence(&mut self, persistence: Persistence<'a>) -> &mut Self {
        self.persistence = persistence;
        self
    }

    /// Whether body bytes may follow this head: never for `HEAD` requests or
    /// bodiless statuses.
    pub fn body_allowed(&self) -> bool {
        !self.head_request && !self.status.has_no_body()
    }

    fn content_length_digits(&self) -> &[u8] {
        &self.digits[..usize::from(self.digits_len)]
    }

    /// Encodes the head into a new vector, as Latin-1: a convenience for
    /// tests and small tools (a server encodes it straight into its write
    /// buffer instead).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        crate::write_buf(self, crate::Encoding::Latin1, crate::Mode::Strict, &mut out)
            .expect("a head is one-byte text");
        out
    }
}

const CONTENT_LENGTH: &str = "Content-Length: ";
const CHUNKED: &str = "Transfer-Encoding: chunked\r\n";
const KEEP_ALIVE: &str = "Connection: keep-alive\r\n";
const CLOSE: &str = "Connection: close\r\n";
const CRLF: &str = "\r\n";

impl<const N: usize> Rope for Head<'_, N> {
    fn for_each_piece<'s>(
        &'s self,
        visit: &mut dyn FnMut(Piece<'s>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.status.visit(&mut |s| visit(Piece::OneByte(s)))?;
        for field in self.fields[..self.count].iter().flatten() {
            match field {
                Field::Line(line) => visit(Piece::OneByte(line.as_bytes()))?,
                Field::Pair(name, value) => visit_pair(name.0.as_bytes(), value.0, visit)?,
                #[cfg(feature = "http")]
                Field::Map(map) => {
                    for (name, value) in map.iter() {
                        let value = HeaderValue::from(value).0;
                        visit_pair(name.as_str().as_bytes(), value, visit)?;
                    }
                }
            }
        }
        let mut one = |s: &'s [u8]| visit(Piece::OneByte(s));
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

    /// O(fields), from lengths (O(entries) for a header map). Every piece is
    /// one-byte (ASCII, and obs-text in values), so the head always takes
    /// the one-byte fast path to latin1.
    fn shape(&self) -> Shape {
        let fields: usize = self.fields[..self.count]
            .iter()
            .flatten()
            .map(Field::len)
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
            one_byte: self.status.line_len()
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

/// With the `http` feature: heads from the `http` crate's types, taking what
/// those types guarantee as given (no second validation) and allocating
/// nothing.
#[cfg(feature = "http")]
mod from_http {
    use super::*;

    /// Any `http::StatusCode` (always 100..=999), with the `http` crate's
    /// `canonical_reason()` as its phrase, or none. Where that phrase is the
    /// IANA one, the status line is one `'static` piece; where the `http`
    /// crate words it differently (413, 422 and 203 in http 1.x), it is
    /// written in a few.
    impl From<http::StatusCode> for Status {
        fn from(code: http::StatusCode) -> Status {
            // http guarantees the range, and its phrases are fixed strings
            // of plain text: nothing to check again.
            Status::checked(code.as_u16(), code.canonical_reason().unwrap_or(""))
        }
    }

    /// `http::HeaderName` is a token by construction (and lower case).
    impl<'a> From<&'a http::HeaderName> for HeaderName<'a> {
        fn from(name: &'a http::HeaderName) -> HeaderName<'a> {
            HeaderName(name.as_str())
        }
    }

    /// `http::HeaderValue` holds field-value bytes only (HTAB, SP, visible
    /// ASCII and obs-text: no CR, LF, NUL or other control byte), but may
    /// begin or end with whitespace, which a field value does not include
    /// (RFC 9110 §5.5: a recipient strips it). The conversion leaves that
    /// whitespace out — it reads only the ends of the value and cannot fail —
    /// so what is sent is exactly the value a recipient would have seen.
    impl<'a> From<&'a http::HeaderValue> for HeaderValue<'a> {
        fn from(value: &'a http::HeaderValue) -> HeaderValue<'a> {
            HeaderValue(trim_ows(value.as_bytes()))
        }
    }

    /// `bytes` without leading and trailing SP and HTAB.
    fn trim_ows(mut bytes: &[u8]) -> &[u8] {
        while let [b' ' | b'\t', rest @ ..] = bytes {
            bytes = rest;
        }
        while let [rest @ .., b' ' | b'\t'] = bytes {
            bytes = rest;
        }
        bytes
    }

    impl<'a, const N: usize> Head<'a, N> {
        /// Adds every field of `map`, in the map's order, in one field slot:
        /// the map is walked when the head is written, so its size is not
        /// bounded by `N`, and nothing is copied. Values are sent without
        /// surrounding whitespace (see `From<&http::HeaderValue>` for
        /// [`HeaderValue`]); names in the `http` crate's lower case.
        ///
        /// A map with `Content-Length` or `Transfer-Encoding` is refused
        /// with [`HeadError::FramingField`]: the head owns framing.
        ///
        /// ```
        /// use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE, VARY};
        /// use unflat::head::{Head, Status};
        /// let mut map = HeaderMap::new();
        /// map.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        /// map.append(VARY, HeaderValue::from_static(" accept "));
        /// let mut head = Head::new(http::StatusCode::CREATED.into(), false);
        /// head.header_map(&map).unwrap().content_length(0).unwrap();
        /// assert_eq!(
        ///     head.to_vec(),
        ///     b"HTTP/1.1 201 Created\r\ncontent-type: text/plain\r\nvary: accept\r\n\
        ///       Content-Length: 0\r\n\r\n"
        /// );
        /// ```
        pub fn header_map(&mut self, map: &'a http::HeaderMap) -> Result<&mut Self, HeadError> {
            if map.contains_key(http::header::CONTENT_LENGTH)
                || map.contains_key(http::header::TRANSFER_ENCODING)
            {
                return Err(HeadError::FramingField);
            }
            self.push(Field::Map(map))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn whitespace_is_trimmed_from_both_ends_only() {
            assert_eq!(trim_ows(b" \t a b\t "), b"a b");
            assert_eq!(trim_ows(b"   "), b"");
            assert_eq!(trim_ows(b""), b"");
        }
    }
}
