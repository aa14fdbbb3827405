//! The application's own field lines of one response: any number up to
//! [`MAX_FIELDS`], repeated names allowed, each value a rope — text,
//! bytes, an integer, a concatenation of such pieces, or any
//! [`Rope`] — encoded straight into the write buffer with the rest of the
//! head, never collected into a `String` first. Names are checked when
//! added; values in the one walk that writes them (the head's rule,
//! [`Head::value`](unflat::head::Head::value)): a CR, LF, NUL or other
//! control character, or a character above U+00FF, is never written —
//! nothing of that head reaches the queue, the response becomes a 500 and
//! the cause is logged once.
//!
//! Text is characters, bytes are bytes, as at every door of the library's
//! head: [`Part::Text`] (a `&str`) goes out as Latin-1, one byte per
//! character, each at most U+00FF; [`Part::Bytes`] as given.
//!
//! **The fields the core writes itself** are refused by name when added,
//! and the response is a 500: `Content-Length` and `Transfer-Encoding`
//! (the core frames the body), `Connection` and `Keep-Alive` (the core
//! decides persistence: a `Connection: close` would go out beside its own
//! `keep-alive`), `Date` (one per response, the core's clock), and
//! `X-Content-Type-Options` (the core's `nosniff`, on every response with
//! a body). None of them goes out twice. `Server` is the application's
//! to send: the core's (`--server-header`) goes only on a response whose
//! own fields name none.

use std::ops::ControlFlow;

use arrayvec::ArrayVec;
use unflat::head::{HeadError, HeaderName, WriteError};
use unflat::{CharRange, Piece, Rope, Shape};

/// Field lines a response takes besides the core's own (`Date`, framing,
/// persistence, `X-Content-Type-Options`): two dozen, more than an
/// application sends (cookies, caching, a dozen security headers, a
/// `Location`, a `Content-Disposition`), and few enough that the fields of
/// every response stay under a page of the stack (no stack probe).
pub const MAX_FIELDS: usize = 24;

/// One piece of a concatenated value.
#[derive(Clone, Copy)]
pub enum Part<'a> {
    /// Text, written as Latin-1: one byte per character, each at most U+00FF.
    Text(&'a str),
    /// Bytes as they are (obs-text allowed).
    Bytes(&'a [u8]),
    /// An integer's decimal digits.
    Int(Digits),
    /// A rope of the application's, borrowed as long as the response (from
    /// the reply, the service, or a `static`).
    Rope(&'a (dyn Rope + Sync)),
}

impl std::fmt::Debug for Part<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Part::Text(s) => f.debug_tuple("Text").field(s).finish(),
            Part::Bytes(b) => f.debug_tuple("Bytes").field(b).finish(),
            Part::Int(n) => f.debug_tuple("Int").field(&n.as_str()).finish(),
            Part::Rope(r) => write!(f, "Rope({} units)", r.shape().len()),
        }
    }
}

impl<'a> From<&'a (dyn Rope + Sync)> for Part<'a> {
    fn from(r: &'a (dyn Rope + Sync)) -> Self {
        Part::Rope(r)
    }
}

impl<'a> From<&'a str> for Part<'a> {
    fn from(s: &'a str) -> Self {
        Part::Text(s)
    }
}

impl<'a> From<&'a String> for Part<'a> {
    fn from(s: &'a String) -> Self {
        Part::Text(s)
    }
}

impl<'a> From<&'a [u8]> for Part<'a> {
    fn from(b: &'a [u8]) -> Self {
        Part::Bytes(b)
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Part<'a> {
    fn from(b: &'a [u8; N]) -> Self {
        Part::Bytes(b)
    }
}

/// The decimal digits of an integer of up to 64 bits, held inline: 21
/// bytes where the library's [`Decimal`](unflat::Decimal) keeps room for
/// 128 bits, so that a response's [`Fields`] stay small on the stack.
#[derive(Clone, Copy)]
pub struct Digits {
    bytes: [u8; 20],
    len: u8,
}

impl Digits {
    /// `n`'s digits.
    pub fn new(n: impl itoa::Integer) -> Digits {
        let mut buf = itoa::Buffer::new();
        let text = buf.format(n).as_bytes();
        let mut bytes = [0; 20];
        // At most 20 bytes: u64::MAX, or i64::MIN with its sign.
        bytes[..text.len()].copy_from_slice(text);
        Digits {
            bytes,
            len: text.len() as u8,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("ASCII digits")
    }
}

macro_rules! int_parts {
    ($($t:ty)*) => {$(
        impl From<$t> for Part<'_> {
            fn from(n: $t) -> Self {
                Part::Int(Digits::new(n))
            }
        }

        impl From<$t> for Value<'_> {
            fn from(n: $t) -> Self {
                Value::one(Part::Int(Digits::new(n)))
            }
        }
    )*};
}
int_parts!(u8 u16 u32 u64 usize i8 i16 i32 i64 isize);

impl Rope for Part<'_> {
    fn for_each_piece<'s>(
        &'s self,
        visit: &mut dyn FnMut(Piece<'s>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        match self {
            Part::Text(s) => visit(Piece::Utf8(s)),
            Part::Bytes(b) => visit(Piece::OneByte(b)),
            Part::Int(n) => visit(Piece::OneByte(n.as_bytes())),
            Part::Rope(r) => r.for_each_piece(visit),
        }
    }

    fn shape(&self) -> Shape {
        match self {
            Part::Text(s) => Shape::of_piece(Piece::Utf8(s)),
            Part::Bytes(b) => Shape::of_piece(Piece::OneByte(b)),
            Part::Int(n) => Shape {
                one_byte: usize::from(n.len),
                range: CharRange::Ascii,
                ..Shape::EMPTY
            },
            Part::Rope(r) => r.shape(),
        }
    }
}

/// Pieces a value of parts holds at most; longer values are a [`Rope`]
/// of the application's ([`Value::Rope`]).
const MAX_PARTS: usize = 4;

/// A field value: up to four [`Part`]s one after the other — a tuple
/// `("sid=", id, "; Path=/; HttpOnly")` — or any rope.
#[derive(Clone, Copy)]
pub enum Value<'a> {
    /// Parts, held inline.
    Parts([Part<'a>; MAX_PARTS], u8),
    /// A rope of the application's (a [`unflat::Concat`], a ropey rope, …).
    Rope(&'a (dyn Rope + Sync)),
}

impl<'a> Value<'a> {
    /// Up to four parts one after the other (more are a [`Rope`] of the
    /// caller's: [`Value::Rope`]).
    ///
    /// # Panics
    /// On more than four parts.
    pub fn of_parts(parts: impl IntoIterator<Item = Part<'a>>) -> Value<'a> {
        let mut held = [Part::Bytes(b""); MAX_PARTS];
        let mut n = 0;
        for part in parts {
            assert!(n < MAX_PARTS, "a value of parts holds four at most");
            held[n] = part;
            n += 1;
        }
        Value::Parts(held, n as u8)
    }

    fn one(part: Part<'a>) -> Value<'a> {
        Value::Parts(
            [part, Part::Bytes(b""), Part::Bytes(b""), Part::Bytes(b"")],
            1,
        )
    }

    fn parts(&self) -> &[Part<'a>] {
        match self {
            Value::Parts(parts, n) => &parts[..usize::from(*n)],
            Value::Rope(_) => &[],
        }
    }
}

impl std::fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Parts(..) => f.debug_list().entries(self.parts()).finish(),
            Value::Rope(r) => write!(f, "Rope({} units)", r.shape().len()),
        }
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::one(Part::Text(s))
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(s: &'a String) -> Self {
        Value::one(Part::Text(s))
    }
}

impl<'a> From<&'a [u8]> for Value<'a> {
    fn from(b: &'a [u8]) -> Self {
        Value::one(Part::Bytes(b))
    }
}

impl<'a> From<&'a (dyn Rope + Sync)> for Value<'a> {
    fn from(r: &'a (dyn Rope + Sync)) -> Self {
        Value::Rope(r)
    }
}

macro_rules! tuple_values {
    ($($n:literal: $($p:ident)+;)*) => {$(
        impl<'a, $($p: Into<Part<'a>>),+> From<($($p,)+)> for Value<'a> {
            #[allow(non_snake_case)]
            fn from(($($p,)+): ($($p,)+)) -> Self {
                let mut parts = [Part::Bytes(b""); MAX_PARTS];
                for (slot, part) in parts.iter_mut().zip([$($p.into()),+]) {
                    *slot = part;
                }
                Value::Parts(parts, $n)
            }
        }
    )*};
}
tuple_values! {
    2: A B;
    3: A B C;
    4: A B C D;
}

impl Rope for Value<'_> {
    fn for_each_piece<'s>(
        &'s self,
        visit: &mut dyn FnMut(Piece<'s>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        match self {
            Value::Parts(..) => self
                .parts()
                .iter()
                .try_for_each(|p| p.for_each_piece(visit)),
            Value::Rope(r) => r.for_each_piece(visit),
        }
    }

    fn shape(&self) -> Shape {
        match self {
            Value::Parts(..) => self
                .parts()
                .iter()
                .fold(Shape::EMPTY, |s, p| s.then(p.shape())),
            Value::Rope(r) => r.shape(),
        }
    }
}

/// The field the core adds to every response with a body (`nosniff`).
pub(super) const NOSNIFF: &str = "X-Content-Type-Options";

/// The field the core adds to every final response when configured
/// (`--server-header`), unless the response names its own.
pub const SERVER: &str = "Server";

/// Whether `name` is [`SERVER`].
pub(super) fn is_server(name: &str) -> bool {
    name.eq_ignore_ascii_case(SERVER)
}

/// Why a response's fields cannot be sent: the field, and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field's name as given (at most 64 bytes of it).
    pub name: String,
    /// What was wrong with its name or value.
    pub error: HeadError,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field {:?}: {}", self.name, self.error)
    }
}

impl std::error::Error for FieldError {}

impl From<WriteError<'_>> for FieldError {
    /// A value refused as its head was written.
    fn from(e: WriteError<'_>) -> FieldError {
        match e {
            WriteError::Value { name, error } => FieldError {
                name: name.chars().take(64).collect(),
                error,
            },
            // The writer sizes the room by the head's measure: only a value
            // can overrun it, and that is a `Value` error.
            other => unreachable!("a head written into its measured room: {other}"),
        }
    }
}

/// Why the core did not send a response an application gave: it answers
/// 500 in its place, and logs the cause once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unsendable {
    /// A field line refused: by its name when added, or by its value as
    /// the head was written (nothing of that head was queued).
    Field(FieldError),
    /// A status that cannot end an exchange: a 1xx is interim (RFC 9110
    /// §15.2), never a final response, and codes above 599 are no class
    /// of HTTP's. A final response is 200–599.
    Status(u16),
}

impl std::fmt::Display for Unsendable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsendable::Field(e) => e.fmt(f),
            Unsendable::Status(code) => write!(
                f,
                "status {code} cannot end an exchange (a final response is 200-599; 1xx is interim)"
            ),
        }
    }
}

impl std::error::Error for Unsendable {}

impl From<FieldError> for Unsendable {
    fn from(e: FieldError) -> Unsendable {
        Unsendable::Field(e)
    }
}

/// A response's own field lines, in order ([`Fields::add`]); the core
/// hands one, empty, to [`Reply::respond`](crate::service::Reply::respond)
/// on its stack, and writes it into the head. No heap: names and values
/// borrow, integers and concatenations are held inline; an empty one is
/// made without touching its slots (an `ArrayVec`), so that a response
/// without fields of its own pays nothing for them.
pub struct Fields<'a> {
    list: ArrayVec<(HeaderName<'a>, Value<'a>), MAX_FIELDS>,
    /// The first field refused: the response is then a 500.
    error: Option<(&'a str, HeadError)>,
}

impl<'a> Fields<'a> {
    /// No fields.
    pub fn new() -> Fields<'a> {
        Fields {
            list: ArrayVec::new(),
            error: None,
        }
    }

    /// Adds `name: value`, after those added before (a name may repeat:
    /// `Set-Cookie`). `value` is text (`&str`, written as Latin-1), bytes,
    /// an integer, a tuple of up to four of these (`("sid=", id, "; Path=/")`),
    /// or any [`Rope`]. The name is checked now: one that is not a token,
    /// one of the fields the core writes itself (`Connection`,
    /// `Keep-Alive`, `Date`, `Content-Length`, `Transfer-Encoding`,
    /// `X-Content-Type-Options`), or more than [`MAX_FIELDS`] fields makes the
    /// response a 500 with the cause logged. The value is checked as it is
    /// written ([`Head::value`](unflat::head::Head::value)'s rule): a CR,
    /// LF, NUL or other control character, whitespace first or last, or a
    /// character above U+00FF makes the response a 500 too, and nothing
    /// of its head is sent.
    ///
    /// ```
    /// use unflat_server::response::Fields;
    /// let id = 42_u64;
    /// let mut fields = Fields::new();
    /// fields
    ///     .add("Set-Cookie", ("sid=", id, "; Path=/; HttpOnly"))
    ///     .add("Cache-Control", "no-store");
    /// assert_eq!(fields.len(), 2);
    /// assert!(fields.error().is_none());
    /// fields.add("Connection", "close");
    /// assert!(fields.error().unwrap().to_string().contains("Connection"));
    /// ```
    pub fn add(&mut self, name: &'a str, value: impl Into<Value<'a>>) -> &mut Self {
        if self.error.is_some() {
            return self;
        }
        let value = value.into();
        match self.check(name) {
            Ok(name) => self.list.push((name, value)),
            Err(e) => self.error = Some((name, e)),
        }
        self
    }

    /// The name's check: the value's is the walk that writes it.
    fn check(&self, name: &'a str) -> Result<HeaderName<'a>, HeadError> {
        let header = HeaderName::for_field(name)?;
        if header.as_str().eq_ignore_ascii_case(NOSNIFF) {
            return Err(HeadError::OwnedField { name: NOSNIFF });
        }
        if self.list.is_full() {
            return Err(HeadError::TooManyFields);
        }
        Ok(header)
    }

    /// Fields added.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether none was added.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether a field was refused: the response is then a 500.
    #[inline]
    pub fn is_refused(&self) -> bool {
        self.error.is_some()
    }

    /// The first field refused, if any.
    pub fn error(&self) -> Option<FieldError> {
        self.error.map(|(name, error)| FieldError {
            name: name.chars().take(64).collect(),
            error,
        })
    }

    /// Whether one of them is `Server`: asked only by a writer that has a
    /// `Server` line of its own to send, so `add` does not keep count.
    pub(super) fn names_server(&self) -> bool {
        self.list.iter().any(|(name, _)| is_server(name.as_str()))
    }

    /// The fields, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (HeaderName<'a>, &Value<'a>)> {
        self.list.iter().map(|(name, value)| (*name, value))
    }
}

impl Default for Fields<'_> {
    fn default() -> Self {
        Fields::new()
    }
}

impl std::fmt::Debug for Fields<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|(n, v)| (n.as_str(), v)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response's fields live on the session's stack for every response:
    /// under a page, so that no stack probe runs for them.
    #[test]
    fn fields_stay_under_a_page() {
        let size = std::mem::size_of::<Fields<'_>>();
        eprintln!("Fields: {size} bytes");
        assert!(size < 4096, "{size} bytes");
    }

    /// Integers are written as their decimal digits, signs included.
    #[test]
    fn integers_are_their_digits() {
        for (n, text) in [(0_i64, "0"), (-5, "-5"), (i64::MIN, "-9223372036854775808")] {
            assert_eq!(Digits::new(n).as_str(), text);
        }
        assert_eq!(Digits::new(u64::MAX).as_str(), "18446744073709551615");
    }
}
