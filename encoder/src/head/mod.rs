//! The HTTP/1.1 response head as a rope: a [`Head`] is composed per response
//! without touching the heap, from `'static` pieces, [`Line`]s rendered once,
//! a [`DateLine`] and a `Content-Length` line formatted into the head, and is
//! encoded like any [`Rope`] by the one-byte fast path.
//!
//! **Injection cannot be expressed**: every [`HeaderName`] and
//! [`HeaderValue`] is validated where it is built ([`is_tchar`],
//! [`is_field_value_byte`]), and the head writes every line ending itself.
//! **The head owns framing**: [`Head::content_length`] and [`Head::chunked`]
//! exclude each other, bodiless statuses refuse both, and
//! [`Head::body_allowed`] says whether body bytes may follow.

mod date;
mod error;
mod field;
#[cfg(feature = "http")]
mod from_http;
mod prefix;
mod status;

use std::ops::ControlFlow;

use crate::rope::{CharRange, Piece, Rope, Shape};

pub use date::DateLine;
pub use error::HeadError;
use field::is_framing_name;
pub use field::{is_field_value_byte, is_tchar, HeaderName, HeaderValue, Line};
pub use prefix::Prefix;
pub use status::Status;

/// Header fields a [`Head`] holds by default (its `N`), besides its status,
/// framing, date and persistence lines.
///
/// ```
/// use unflat::head::{Head, HeadError, Line, Status, MAX_FIELDS, RequestMethod};
/// let line = Line::parse("X-Trace", "1").unwrap();
/// let mut head = Head::new(Status::OK, RequestMethod::Other);
/// for _ in 0..MAX_FIELDS {
///     head.line(&line).unwrap();
/// }
/// assert_eq!(head.line(&line).unwrap_err(), HeadError::TooManyFields);
/// // More room: a head of 64 fields.
/// let mut big = Head::<'_, 64>::with_room(Status::OK, RequestMethod::Other);
/// for _ in 0..64 {
///     big.line(&line).unwrap();
/// }
/// ```
pub const MAX_FIELDS: usize = 16;

/// How a message body is delimited (RFC 9112 §6), in a response head
/// ([`Head::framing`]) or a request.
///
/// ```
/// use unflat::head::{Framing, Head, RequestMethod, Status};
/// let mut head = Head::new(Status::OK, RequestMethod::Other);
/// assert_eq!(head.framing(), Framing::None);
/// head.content_length(5).unwrap();
/// assert_eq!(head.framing(), Framing::Length(5));
/// ```
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

/// The request a head answers, as far as it matters: the response to a
/// `HEAD` announces a `GET`'s framing and carries no body.
///
/// ```
/// use unflat::head::{Head, RequestMethod, Status};
/// let mut head = Head::new(Status::OK, RequestMethod::Head);
/// head.content_length(5).unwrap(); // what a GET would have received
/// assert!(!head.body_allowed());
/// assert!(Head::new(Status::OK, RequestMethod::Other).body_allowed());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestMethod {
    /// `HEAD`: the head alone is sent.
    Head,
    /// Any method but `HEAD`.
    Other,
}

/// The keep-alive decision the head announces.
///
/// ```
/// use unflat::head::{Head, Line, Persistence, Status, RequestMethod};
/// let timeout = Line::parse("Keep-Alive", "timeout=5").unwrap();
/// let mut head = Head::new(Status::NO_CONTENT, RequestMethod::Other);
/// head.persistence(Persistence::KeepAlive(&timeout));
/// assert_eq!(
///     head.to_vec(),
///     b"HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n"
/// );
/// head.persistence(Persistence::Close);
/// assert!(head.to_vec().ends_with(b"Connection: close\r\n\r\n"));
/// ```
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
#[derive(Clone, Copy)]
enum Field<'a> {
    Line(&'a Line),
    Pair(HeaderName<'a>, HeaderValue<'a>),
    /// A value rope, checked when added; its shape, with the range the
    /// check found (ASCII or Latin-1).
    Value(HeaderName<'a>, &'a (dyn Rope + Sync), Shape),
    /// Every field of a map, walked when the head is written.
    #[cfg(feature = "http")]
    Map(&'a http::HeaderMap),
}

impl std::fmt::Debug for Field<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Field::Line(line) => f.debug_tuple("Line").field(line).finish(),
            Field::Pair(name, value) => f.debug_tuple("Pair").field(name).field(value).finish(),
            Field::Value(name, _, shape) => {
                f.debug_tuple("Value").field(name).field(shape).finish()
            }
            #[cfg(feature = "http")]
            Field::Map(map) => f.debug_tuple("Map").field(map).finish(),
        }
    }
}

impl Field<'_> {
    /// The shape of the field's lines.
    fn shape(&self) -> Shape {
        let one_byte = |n| Shape {
            one_byte: n,
            ..Shape::EMPTY
        };
        match self {
            Field::Line(line) => one_byte(line.as_bytes().len()),
            Field::Pair(name, value) => one_byte(pair_len(name.0.as_bytes(), value.0)),
            Field::Value(name, _, shape) => one_byte(pair_len(name.0.as_bytes(), b"")).then(*shape),
            #[cfg(feature = "http")]
            Field::Map(map) => one_byte(
                map.iter()
                    .map(|(n, v)| pair_len(n.as_str().as_bytes(), HeaderValue::from(v).0))
                    .sum(),
            ),
        }
    }
}

/// Checks a value rope as a head sends it: every character a
/// field-value byte (no CR, LF, NUL or other control but HTAB) at most
/// U+00FF, no whitespace first or last. Its shape, with the range found.
fn checked_value(value: &dyn Rope) -> Result<Shape, HeadError> {
    let mut at = 0;
    let mut last = None;
    let mut ascii = true;
    let mut error = None;
    let mut check = |c: u32| {
        if c > 0xFF {
            error = Some(HeadError::UnsendableChar { at, code_point: c });
            return ControlFlow::Break(());
        }
        let byte = c as u8;
        let edge_space = at == 0 && (byte == b' ' || byte == b'\t');
        if !is_field_value_byte(byte) || edge_space {
            error = Some(HeadError::InvalidValue { at, byte });
            return ControlFlow::Break(());
        }
        ascii &= byte.is_ascii();
        last = Some((at, byte));
        at += 1;
        ControlFlow::Continue(())
    };
    let _ = value.for_each_piece(&mut |piece| match piece {
        Piece::OneByte(b) => b.iter().try_for_each(|&b| check(u32::from(b))),
        Piece::Utf8(s) => s.chars().try_for_each(|c| check(u32::from(c))),
        Piece::TwoByte(u) => u.iter().try_for_each(|&u| check(u32::from(u))),
    });
    if let Some(e) = error {
        return Err(e);
    }
    if let Some((at, byte @ (b' ' | b'\t'))) = last {
        return Err(HeadError::InvalidValue { at, byte });
    }
    let mut shape = value.shape();
    shape.range = if ascii {
        CharRange::Ascii
    } else {
        CharRange::Latin1
    };
    Ok(shape)
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
/// It holds up to `N` fields ([`MAX_FIELDS`] by default) besides its status,
/// `Date`, framing and persistence lines; with the `http` feature, one slot
/// can hold a whole `http::HeaderMap`.
///
/// ```
/// use unflat::head::{DateLine, Head, Line, Status, RequestMethod};
/// use unflat::{size, write, Encoding, Mode};
/// let content_type = Line::parse("Content-Type", "text/plain").unwrap();
/// let date = DateLine::at(std::time::UNIX_EPOCH);
/// let mut head = Head::new(Status::OK, RequestMethod::Other);
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
    /// The status line and lines rendered once, sent in place of the status
    /// line ([`Head::prefixed`]).
    prefix: Option<&'a [u8]>,
    method: RequestMethod,
    fields: [Option<Field<'a>>; N],
    count: usize,
    date: Option<&'a DateLine>,
    framing: Framing,
    /// `Content-Length: N\r\n`, rendered whole when the length is set, so
    /// that it is one piece to copy rather than three.
    length_line: [u8; LENGTH_LINE_MAX],
    length_line_len: u8,
    persistence: Persistence<'a>,
    /// Whether a byte of its status line or fields is above 0x7F (obs-text):
    /// then it is Latin-1 and not ASCII, which its shape says.
    non_ascii: bool,
}

/// The longest `Content-Length` line: the name, 20 digits (`u64::MAX`),
/// CRLF.
const LENGTH_LINE_MAX: usize = CONTENT_LENGTH.len() + 20 + CRLF.len();

impl<'a> Head<'a> {
    /// A head with `status` and room for [`MAX_FIELDS`] fields, answering a
    /// request made with `method`.
    pub fn new(status: Status, method: RequestMethod) -> Head<'a> {
        Head::with_room(status, method)
    }

    /// A head that begins with `prefix` (copied as one piece), with room for
    /// [`MAX_FIELDS`] more fields, answering a request made with `method`.
    pub fn prefixed(prefix: &'a Prefix, method: RequestMethod) -> Head<'a> {
        Head::prefixed_with_room(prefix, method)
    }
}

impl<'a, const N: usize> Head<'a, N> {
    /// [`Head::new`] with room for `N` fields: `Head::<'_, 64>::with_room(..)`.
    pub fn with_room(status: Status, method: RequestMethod) -> Head<'a, N> {
        Head {
            status,
            prefix: None,
            method,
            fields: [None; N],
            count: 0,
            date: None,
            framing: Framing::None,
            length_line: [0; LENGTH_LINE_MAX],
            length_line_len: 0,
            persistence: Persistence::Default,
            non_ascii: !status.is_ascii(),
        }
    }

    /// [`Head::prefixed`] with room for `N` more fields.
    pub fn prefixed_with_room(prefix: &'a Prefix, method: RequestMethod) -> Head<'a, N> {
        let mut head = Head::with_room(prefix.status(), method);
        head.prefix = Some(prefix.as_bytes());
        head.non_ascii = !prefix.ascii;
        head
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
        self.push(Field::Line(line))?;
        self.non_ascii |= !line.ascii;
        Ok(self)
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
        self.push(Field::Pair(name, value))?;
        self.non_ascii |= !value.0.is_ascii();
        Ok(self)
    }

    /// Adds `name: value` with a value rope — text built by concatenation
    /// ([`Concat`](crate::Concat) of `str`s, [`Latin1`](crate::Latin1)
    /// bytes, a [`Decimal`](crate::Decimal), …) — written into the head
    /// as Latin-1, one byte per character, as Node writes a header string,
    /// never flattened first. Checked here, in one walk: a CR, LF, NUL or
    /// other control character, whitespace first or last
    /// ([`HeadError::InvalidValue`]), or a character above U+00FF
    /// ([`HeadError::UnsendableChar`]) is refused, so none is ever written.
    /// (`Sync`, so that the head stays `Send` and `Sync`.)
    ///
    /// ```
    /// use unflat::head::{Head, HeadError, HeaderName, RequestMethod, Status};
    /// use unflat::{Concat, Decimal};
    /// let id = Decimal::new(42);
    /// let cookie = Concat::new([&"sid=", &id, &"; Path=/; HttpOnly"]);
    /// let mut head = Head::new(Status::OK, RequestMethod::Other);
    /// head.value(HeaderName::new("Set-Cookie").unwrap(), &cookie).unwrap();
    /// let name = HeaderName::new("Content-Disposition").unwrap();
    /// head.value(name, &"attachment; filename=\"caf\u{e9}.txt\"").unwrap();
    /// let bytes = head.to_vec();
    /// let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
    /// assert!(has(b"Set-Cookie: sid=42; Path=/; HttpOnly\r\n"));
    /// assert!(has(b"filename=\"caf\xe9.txt\"\r\n"));
    /// // Never written: a line ending, or a character a byte cannot hold.
    /// let bad = Concat::new([&"a", &"\r\nSet-Cookie: x"]);
    /// let name = HeaderName::new("X-Bad").unwrap();
    /// assert_eq!(head.value(name, &bad).unwrap_err(), HeadError::InvalidValue { at: 1, byte: b'\r' });
    /// let err = head.value(name, &"\u{20ac}5").unwrap_err();
    /// assert_eq!(err, HeadError::UnsendableChar { at: 0, code_point: 0x20AC });
    /// ```
    pub fn value(
        &mut self,
        name: HeaderName<'a>,
        value: &'a (dyn Rope + Sync),
    ) -> Result<&mut Self, HeadError> {
        if is_framing_name(name.0.as_bytes()) {
            return Err(HeadError::FramingField);
        }
        let shape = checked_value(value)?;
        self.push(Field::Value(name, value, shape))?;
        self.non_ascii |= shape.range != CharRange::Ascii;
        Ok(self)
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
        let mut at = 0;
        for part in [CONTENT_LENGTH.as_bytes(), digits, CRLF.as_bytes()] {
            self.length_line[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        // At most LENGTH_LINE_MAX (38): it fits in a u8.
        self.length_line_len = at as u8;
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
        self.method == RequestMethod::Other && !self.status.has_no_body()
    }

    /// How the body after this head is delimited, for the code that writes
    /// it (an allowed body of [`Framing::None`] ends with the connection).
    ///
    /// ```
    /// use unflat::head::{Framing, Head, RequestMethod, Status};
    /// let mut head = Head::new(Status::OK, RequestMethod::Other);
    /// head.chunked().unwrap();
    /// let mut out = head.to_vec();
    /// if head.framing() == Framing::Chunked {
    ///     out.extend_from_slice(b"5\r\nhello\r\n0\r\n\r\n");
    /// }
    /// assert!(out.ends_with(b"chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
    /// ```
    pub fn framing(&self) -> Framing {
        self.framing
    }

    fn length_line(&self) -> &[u8] {
        &self.length_line[..usize::from(self.length_line_len)]
    }

    /// Encodes the head into a new vector, as Latin-1 (for tests and small
    /// tools; a server encodes it into its write buffer).
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
        match self.prefix {
            Some(prefix) => visit(Piece::OneByte(prefix))?,
            None => self.status.visit(&mut |s| visit(Piece::OneByte(s)))?,
        }
        for field in self.fields[..self.count].iter().flatten() {
            match field {
                Field::Line(line) => visit(Piece::OneByte(line.as_bytes()))?,
                Field::Pair(name, value) => visit_pair(name.0.as_bytes(), value.0, visit)?,
                Field::Value(name, value, _) => {
                    visit(Piece::OneByte(name.0.as_bytes()))?;
                    visit(Piece::OneByte(b": "))?;
                    value.for_each_piece(visit)?;
                    visit(Piece::OneByte(CRLF.as_bytes()))?;
                }
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
            Framing::Length(_) => one(self.length_line())?,
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

    /// O(fields), from lengths. A head of one-byte pieces (all but value
    /// ropes with UTF-8 or two-byte pieces) takes the one-byte fast path.
    fn shape(&self) -> Shape {
        let fields = self.fields[..self.count]
            .iter()
            .flatten()
            .fold(Shape::EMPTY, |shape, field| shape.then(field.shape()));
        let framing = match self.framing {
            Framing::None => 0,
            Framing::Length(_) => self.length_line().len(),
            Framing::Chunked => CHUNKED.len(),
        };
        let persistence = match self.persistence {
            Persistence::Default => 0,
            Persistence::KeepAlive(line) => KEEP_ALIVE.len() + line.as_bytes().len(),
            Persistence::Close => CLOSE.len(),
        };
        let start = self
            .prefix
            .map_or_else(|| self.status.line_len(), <[u8]>::len);
        let range = if self.non_ascii {
            CharRange::Latin1
        } else {
            CharRange::Ascii
        };
        Shape {
            one_byte: start
                + self.date.map_or(0, |_| DateLine::LEN)
                + framing
                + persistence
                + CRLF.len(),
            utf8: 0,
            two_byte: 0,
            range,
        }
        .then(fields)
    }

    /// A head is one-byte text: written as Latin-1, or as UTF-8 only when
    /// it is ASCII ([`EncodeError::OneByteOnly`](crate::EncodeError::OneByteOnly)).
    fn one_byte_only(&self) -> bool {
        true
    }
}
