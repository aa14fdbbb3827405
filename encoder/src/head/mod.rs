//! The HTTP/1.1 response head, built by concatenation: a [`Head`] is
//! composed per response without touching the heap, from `'static` pieces,
//! [`Line`]s rendered once, value ropes, a [`DateLine`] and a
//! `Content-Length` line formatted into the head, and written in one walk
//! ([`Head::write`], [`WriteQueue::head`](crate::queue::WriteQueue::head)).
//!
//! **A head is one-byte text**, the only form HTTP/1.1 gives it: it is
//! written as its bytes, and the API has no way to ask for another
//! encoding. **Injection cannot be expressed**: names, rendered lines and
//! byte values are validated where they are built ([`is_tchar`],
//! [`is_field_value_byte`]); a value rope is checked in the walk that
//! writes it, each character as it goes into the destination, so no value
//! is checked on one walk and written on another; the head writes every
//! line ending itself. **The head owns framing**: [`Head::content_length`]
//! and [`Head::chunked`] exclude each other, bodiless statuses refuse both,
//! and [`Head::body_allowed`] says whether body bytes may follow.
//!
//! ## One rule for header text, at every door
//!
//! Text is characters: each up to U+00FF goes out as its Latin-1 byte, one
//! above is refused ([`HeadError::UnsendableChar`]). Bytes go out as given
//! only through a door whose name says bytes. The same `&str` gives the
//! same bytes through every text door, or is refused by all of them.
//!
//! | door | takes | `"naïve"` | `"5€"` |
//! |---|---|---|---|
//! | [`Line::parse`]`(name, &str)` | text | `na\xEFve` | [`UnsendableChar`](HeadError::UnsendableChar) |
//! | [`Head::value`]`(name, &rope)` (`&str`, [`Concat`](crate::Concat), [`Latin1`](crate::Latin1), [`Utf16`](crate::Utf16), …) | text | `na\xEFve` | `UnsendableChar`, when written |
//! | [`HeaderValue::from_bytes`], then [`Head::field`] or [`Line::new`] | bytes | as given | as given (its UTF-8 bytes) |
//! | `From<&http::HeaderValue>`, [`Head::header_map`] (feature `http`) | bytes (the `http` crate's values are bytes) | as stored | as stored |
//! | a reason phrase, [`Status::new`] | ASCII text | [`InvalidReason`](HeadError::InvalidReason) | `InvalidReason` |
//!
//! A server built on the crate says the same of its own doors
//! (`unflat-server`'s `Fields::add`: text as Latin-1, `Part::Bytes` as
//! given).

mod date;
mod error;
mod field;
#[cfg(feature = "http")]
mod from_http;
mod grammar;
mod prefix;
mod status;
mod write;

use crate::rope::Rope;

pub use date::DateLine;
pub use error::HeadError;
use field::owned_name;
pub use field::{HeaderName, HeaderValue, Line};
pub use grammar::{is_field_value_byte, is_tchar};
pub use prefix::Prefix;
pub use status::Status;
pub use write::WriteError;
use write::{Out, Overrun};

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
///     head.to_vec().unwrap(),
///     b"HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n"
/// );
/// head.persistence(Persistence::Close);
/// assert!(head.to_vec().unwrap().ends_with(b"Connection: close\r\n\r\n"));
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
    /// A value rope, checked as it is written.
    Value(HeaderName<'a>, &'a (dyn Rope + Sync)),
    /// Every field of a map, walked when the head is written.
    #[cfg(feature = "http")]
    Map(&'a http::HeaderMap),
}

impl std::fmt::Debug for Field<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Field::Line(line) => f.debug_tuple("Line").field(line).finish(),
            Field::Pair(name, value) => f.debug_tuple("Pair").field(name).field(value).finish(),
            Field::Value(name, value) => f
                .debug_tuple("Value")
                .field(name)
                .field(&value.shape().len())
                .finish(),
            #[cfg(feature = "http")]
            Field::Map(map) => f.debug_tuple("Map").field(map).finish(),
        }
    }
}

impl Field<'_> {
    /// The most bytes its lines take: exact but for a value rope, whose
    /// measure counts a UTF-8 piece's bytes, at least its characters.
    fn max_len(&self) -> usize {
        match self {
            Field::Line(line) => line.as_bytes().len(),
            Field::Pair(name, value) => pair_len(name.0.as_bytes(), value.0),
            // Saturating: a rope's measure is its own word, however large.
            Field::Value(name, value) => {
                pair_len(name.0.as_bytes(), b"").saturating_add(value.shape().len())
            }
            #[cfg(feature = "http")]
            Field::Map(map) => map
                .iter()
                .map(|(n, v)| pair_len(n.as_str().as_bytes(), HeaderValue::from(v).0))
                .sum(),
        }
    }

    /// Writes its lines, a value rope checked as it is written; the
    /// value refused, or [`Overrun`] past the destination's end.
    fn write(&self, out: &mut Out<'_>) -> Result<(), FieldFailure> {
        match *self {
            Field::Line(line) => out.put(line.as_bytes())?,
            Field::Pair(name, value) => write_pair(out, name.0.as_bytes(), value.0)?,
            Field::Value(name, value) => {
                out.put(name.0.as_bytes())?;
                out.put(b": ")?;
                out.value(value).map_err(FieldFailure::Value)?;
                out.put(CRLF.as_bytes())?;
            }
            #[cfg(feature = "http")]
            Field::Map(map) => {
                for (name, value) in map.iter() {
                    let value = HeaderValue::from(value).0;
                    write_pair(out, name.as_str().as_bytes(), value)?;
                }
            }
        }
        Ok(())
    }
}

/// Why a field was not written.
enum FieldFailure {
    /// Its value was refused.
    Value(HeadError),
    /// The destination ended.
    Overrun,
}

impl From<Overrun> for FieldFailure {
    fn from(_: Overrun) -> Self {
        FieldFailure::Overrun
    }
}

/// Writes `name: value\r\n`.
fn write_pair(out: &mut Out<'_>, name: &[u8], value: &[u8]) -> Result<(), Overrun> {
    out.put(name)?;
    out.put(b": ")?;
    out.put(value)?;
    out.put(CRLF.as_bytes())
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
/// let content_type = Line::parse("Content-Type", "text/plain").unwrap();
/// let date = DateLine::at(std::time::UNIX_EPOCH);
/// let mut head = Head::new(Status::OK, RequestMethod::Other);
/// head.line(&content_type).unwrap();
/// head.date(&date).content_length(5).unwrap();
/// let mut out = vec![0; head.max_len()];
/// let n = head.write(&mut out).unwrap();
/// assert_eq!(&out[..n], b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
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
        }
    }

    /// [`Head::prefixed`] with room for `N` more fields.
    pub fn prefixed_with_room(prefix: &'a Prefix, method: RequestMethod) -> Head<'a, N> {
        let mut head = Head::with_room(prefix.status(), method);
        head.prefix = Some(prefix.as_bytes());
        head
    }

    /// The status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Adds a pre-rendered line. A field the head writes itself is refused:
    /// `Content-Length` or `Transfer-Encoding` ([`HeadError::FramingField`]),
    /// `Connection`, `Keep-Alive` or `Date` ([`HeadError::OwnedField`]).
    pub fn line(&mut self, line: &'a Line) -> Result<&mut Self, HeadError> {
        owned_name(&line.as_bytes()[..line.name_len])?;
        self.push(Field::Line(line))
    }

    /// Adds `name: value`, its bytes as given ([`HeaderValue::from_bytes`]).
    /// The fields the head writes itself are refused, as by [`Head::line`].
    pub fn field(
        &mut self,
        name: HeaderName<'a>,
        value: HeaderValue<'a>,
    ) -> Result<&mut Self, HeadError> {
        owned_name(name.0.as_bytes())?;
        self.push(Field::Pair(name, value))
    }

    /// Adds `name: value` with a value rope — text built by concatenation
    /// ([`Concat`](crate::Concat) of `str`s, [`Latin1`](crate::Latin1)
    /// bytes, a [`Decimal`](crate::Decimal), …) — written into the head
    /// as Latin-1, one byte per character, as Node writes a header string,
    /// never flattened first. Nothing of the value is walked here: it is
    /// checked in the walk that writes it, each character as it goes into
    /// the destination, so that what is checked is what is sent. A CR, LF,
    /// NUL, DEL or other control character below U+0020 but HTAB (U+0080
    /// to U+00FF are obs-text, sent as their byte), whitespace first or last
    /// ([`HeadError::InvalidValue`]), or a character above U+00FF
    /// ([`HeadError::UnsendableChar`]) fails the write
    /// ([`WriteError::Value`], naming the field), and nothing of the head
    /// is kept. (`Sync`, so that the head stays `Send` and `Sync`.)
    ///
    /// ```
    /// use unflat::head::{Head, HeadError, HeaderName, RequestMethod, Status, WriteError};
    /// use unflat::{Concat, Decimal};
    /// let id = Decimal::new(42);
    /// let cookie = Concat::new([&"sid=", &id, &"; Path=/; HttpOnly"]);
    /// let mut head = Head::new(Status::OK, RequestMethod::Other);
    /// head.value(HeaderName::new("Set-Cookie").unwrap(), &cookie).unwrap();
    /// let name = HeaderName::new("Content-Disposition").unwrap();
    /// head.value(name, &"attachment; filename=\"caf\u{e9}.txt\"").unwrap();
    /// let bytes = head.to_vec().unwrap();
    /// let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
    /// assert!(has(b"Set-Cookie: sid=42; Path=/; HttpOnly\r\n"));
    /// assert!(has(b"filename=\"caf\xe9.txt\"\r\n"));
    /// // Never written: a line ending, or a character a byte cannot hold.
    /// let bad = Concat::new([&"a", &"\r\nSet-Cookie: x"]);
    /// let name = HeaderName::new("X-Bad").unwrap();
    /// let mut evil = head.clone();
    /// evil.value(name, &bad).unwrap();
    /// let error = HeadError::InvalidValue { at: 1, byte: b'\r' };
    /// assert_eq!(evil.to_vec().unwrap_err(), WriteError::Value { name: name.as_str(), error });
    /// let mut euro = head.clone();
    /// euro.value(name, &"\u{20ac}5").unwrap();
    /// let error = HeadError::UnsendableChar { at: 0, code_point: 0x20AC };
    /// assert_eq!(euro.to_vec().unwrap_err(), WriteError::Value { name: name.as_str(), error });
    /// ```
    pub fn value(
        &mut self,
        name: HeaderName<'a>,
        value: &'a (dyn Rope + Sync),
    ) -> Result<&mut Self, HeadError> {
        owned_name(name.0.as_bytes())?;
        self.push(Field::Value(name, value))
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
    /// let mut out = head.to_vec().unwrap();
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

    /// The most bytes the head takes: the destination size
    /// [`Head::write`] needs. Exact unless a value rope holds UTF-8 pieces
    /// with characters above U+007F (counted by their bytes, written as one
    /// byte each). O(fields): lengths, and each value rope's measure.
    pub fn max_len(&self) -> usize {
        let start = self
            .prefix
            .map_or_else(|| self.status.line_len(), <[u8]>::len);
        let fields = self.fields[..self.count]
            .iter()
            .flatten()
            .map(Field::max_len)
            .fold(0, usize::saturating_add);
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
        let rest = start + self.date.map_or(0, |_| DateLine::LEN) + framing + persistence;
        fields.saturating_add(rest + CRLF.len())
    }

    /// Writes the head into `dst`, which needs [`Head::max_len`] bytes, in
    /// one walk: every value rope checked as it is written. The bytes
    /// written, or why nothing of `dst` holds a head: a value refused
    /// ([`WriteError::Value`]) or `dst` too short ([`WriteError::NoRoom`]).
    ///
    /// ```
    /// use unflat::head::{Head, RequestMethod, Status, WriteError};
    /// let mut head = Head::new(Status::NO_CONTENT, RequestMethod::Other);
    /// let mut dst = [0; 64];
    /// let n = head.write(&mut dst).unwrap();
    /// assert_eq!(&dst[..n], b"HTTP/1.1 204 No Content\r\n\r\n");
    /// assert_eq!(head.write(&mut [0; 8]), Err(WriteError::NoRoom { needed: 27, available: 8 }));
    /// ```
    pub fn write(&self, dst: &mut [u8]) -> Result<usize, WriteError<'a>> {
        let needed = self.max_len();
        let available = dst.len();
        if available < needed {
            return Err(WriteError::NoRoom { needed, available });
        }
        self.write_measured(&mut dst[..needed])
    }

    /// Writes the head into `dst`, sized by [`Head::max_len`], without
    /// measuring it again: what the write queue calls once it has made the
    /// room.
    pub(crate) fn write_measured(&self, dst: &mut [u8]) -> Result<usize, WriteError<'a>> {
        let mut out = Out::new(dst);
        // The room was measured: only a value rope that gave more than it
        // measured can overrun it, taking the room of what follows it. The
        // overrun is the last value's written, its position counted from
        // that value's start.
        let overrun = |written: Option<(&'a str, usize)>, out: &Out<'_>| match written {
            Some((name, start)) => WriteError::Value {
                name,
                error: HeadError::ValueChanged {
                    at: out.written() - start,
                },
            },
            None => WriteError::NoRoom {
                needed: self.max_len(),
                available: out.written(),
            },
        };
        let mut last_value: Option<(&'a str, usize)> = None;
        let start = match self.prefix {
            Some(prefix) => out.put(prefix),
            None => self.status.write(&mut out),
        };
        start.map_err(|Overrun| overrun(None, &out))?;
        for field in self.fields[..self.count].iter().flatten() {
            if let Field::Value(name, _) = field {
                // Its value starts after `name: `.
                last_value = Some((name.as_str(), out.written() + name.0.len() + 2));
            }
            field.write(&mut out).map_err(|failure| match failure {
                FieldFailure::Value(error) => WriteError::Value {
                    name: last_value.expect("a value refused is a value field").0,
                    error,
                },
                FieldFailure::Overrun => overrun(last_value, &out),
            })?;
        }
        self.write_end(&mut out)
            .map_err(|Overrun| overrun(last_value, &out))?;
        Ok(out.written())
    }

    /// The lines after the fields: date, framing, persistence, the blank
    /// line.
    fn write_end(&self, out: &mut Out<'_>) -> Result<(), Overrun> {
        if let Some(date) = self.date {
            out.put(date.as_bytes())?;
        }
        match self.framing {
            Framing::None => {}
            Framing::Length(_) => out.put(self.length_line())?,
            Framing::Chunked => out.put(CHUNKED.as_bytes())?,
        }
        match self.persistence {
            Persistence::Default => {}
            Persistence::KeepAlive(line) => {
                out.put(KEEP_ALIVE.as_bytes())?;
                out.put(line.as_bytes())?;
            }
            Persistence::Close => out.put(CLOSE.as_bytes())?,
        }
        out.put(CRLF.as_bytes())
    }

    /// Appends the head to `out`; on an error `out` is as it was.
    ///
    /// ```
    /// use unflat::head::{Head, RequestMethod, Status};
    /// let mut out = b"earlier bytes|".to_vec();
    /// Head::new(Status::NO_CONTENT, RequestMethod::Other).write_to_vec(&mut out).unwrap();
    /// assert_eq!(out, b"earlier bytes|HTTP/1.1 204 No Content\r\n\r\n");
    /// ```
    pub fn write_to_vec(&self, out: &mut Vec<u8>) -> Result<usize, WriteError<'a>> {
        let start = out.len();
        out.resize(start + self.max_len(), 0);
        let written = self.write_measured(&mut out[start..]);
        out.truncate(start + *written.as_ref().unwrap_or(&0));
        written
    }

    /// The head in a new vector (for tests and small tools; a server writes
    /// it into its write buffer, [`WriteQueue::head`](crate::queue::WriteQueue::head)).
    pub fn to_vec(&self) -> Result<Vec<u8>, WriteError<'a>> {
        let mut out = Vec::new();
        self.write_to_vec(&mut out)?;
        Ok(out)
    }
}

const CONTENT_LENGTH: &str = "Content-Length: ";
const CHUNKED: &str = "Transfer-Encoding: chunked\r\n";
const KEEP_ALIVE: &str = "Connection: keep-alive\r\n";
const CLOSE: &str = "Connection: close\r\n";
const CRLF: &str = "\r\n";
