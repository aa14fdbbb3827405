//! The rope model: text as an ordered sequence of borrowed pieces.
//!
//! A rope never owns a flat copy of its text. It hands out its pieces in
//! order, each in one of the three representations V8 uses for strings:
//!
//! | piece            | code units | character range                      |
//! |------------------|------------|--------------------------------------|
//! | [`Piece::OneByte`] | `u8`     | U+0000..=U+00FF (Latin-1)            |
//! | [`Piece::Utf8`]    | `u8`     | any (valid UTF-8, e.g. ropey chunks) |
//! | [`Piece::TwoByte`] | `u16`    | any, unpaired surrogates allowed     |
//!
//! The logical text of a rope is the concatenation of its pieces, read as a
//! sequence of UTF-16 code units, exactly like a JavaScript string: a high
//! surrogate at the end of one two-byte piece and a low surrogate at the start
//! of the next one form a single character.
//!
//! Besides its pieces, a rope reports a [`Shape`] — its lengths per
//! representation and what it knows about its character range — computed
//! without reading the text. The encoder chooses its path from the shape.
//!
//! The ropes are here; ropey's, with the chunk walk they share with the
//! write queue, are in `rope/ropey_walk.rs`.

mod ropey_walk;

mod decimal;
pub use decimal::Decimal;

use std::ops::ControlFlow;

pub(crate) use ropey_walk::{walk_ropey_chunks, Walk};

/// One borrowed run of text in one of the three representations.
///
/// A piece is itself a rope, and a slice of pieces is one too.
///
/// ```
/// use unflat::{write, Encoding, Mode, Piece};
/// let pieces = [Piece::Utf8("na"), Piece::OneByte(b"\xefve "), Piece::TwoByte(&[0x20AC])];
/// assert_eq!(pieces[1].len(), 4);
/// let mut out = [0u8; 16];
/// let n = write(&pieces[..], Encoding::Utf8, Mode::Strict, &mut out).unwrap();
/// assert_eq!(&out[..n], "naïve €".as_bytes());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Latin-1: each byte is the code point U+0000..=U+00FF of one character.
    OneByte(&'a [u8]),
    /// UTF-8 text.
    Utf8(&'a str),
    /// UTF-16 code units; unpaired surrogates are allowed, as in JavaScript.
    TwoByte(&'a [u16]),
}

impl<'a> Piece<'a> {
    /// Number of code units in this piece's own representation (bytes for
    /// one-byte and UTF-8 pieces, `u16`s for two-byte pieces).
    pub fn len(&self) -> usize {
        match self {
            Piece::OneByte(b) => b.len(),
            Piece::Utf8(s) => s.len(),
            Piece::TwoByte(u) => u.len(),
        }
    }

    /// True when the piece holds no text.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The piece cut in two at `mid` code units of its own representation,
    /// like [`slice::split_at`].
    ///
    /// ```
    /// use unflat::Piece;
    /// let (a, b) = Piece::TwoByte(&[0x68, 0x69, 0x21]).split_at(2);
    /// assert_eq!((a, b), (Piece::TwoByte(&[0x68, 0x69]), Piece::TwoByte(&[0x21])));
    /// ```
    ///
    /// # Panics
    /// If `mid` is past the end, or inside a character of a UTF-8 piece.
    pub fn split_at(self, mid: usize) -> (Piece<'a>, Piece<'a>) {
        match self {
            Piece::OneByte(b) => {
                let (x, y) = b.split_at(mid);
                (Piece::OneByte(x), Piece::OneByte(y))
            }
            Piece::Utf8(s) => {
                let (x, y) = s.split_at(mid);
                (Piece::Utf8(x), Piece::Utf8(y))
            }
            Piece::TwoByte(u) => {
                let (x, y) = u.split_at(mid);
                (Piece::TwoByte(x), Piece::TwoByte(y))
            }
        }
    }
}

/// What a rope knows about its characters without reading them.
///
/// Ordered from the narrowest: joining two ropes keeps the wider range.
///
/// ```
/// use unflat::{CharRange, Concat, Latin1, Rope};
/// assert_eq!(Latin1(b"caf\xe9").shape().range, CharRange::Latin1);
/// // A `str` is not read to find out: its range is unknown, unless empty.
/// assert_eq!("abc".shape().range, CharRange::Unknown);
/// assert_eq!(Concat::new([&Latin1(b"a"), &"b"]).shape().range, CharRange::Unknown);
/// assert!(CharRange::Ascii < CharRange::Latin1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CharRange {
    /// Every character is ASCII (U+0000..=U+007F).
    Ascii,
    /// Every character is at most U+00FF: the rope is *one-byte*.
    Latin1,
    /// Nothing is known: characters may be anywhere in Unicode, and two-byte
    /// pieces may hold unpaired surrogates.
    Unknown,
}

/// A rope's lengths per piece representation and its known character range,
/// all obtained without reading the text.
///
/// ```
/// use unflat::{CharRange, Concat, Latin1, Rope, Shape, Utf16};
/// let rope = Concat::new([&Latin1(b"caf\xe9 "), &"au ", &Utf16(&[0x20AC])]);
/// let shape = rope.shape();
/// assert_eq!((shape.one_byte, shape.utf8, shape.two_byte), (5, 3, 1));
/// assert_eq!(shape.len(), 9);
/// assert_eq!(shape.range, CharRange::Unknown);
/// assert_eq!(Shape::utf8(3, true).then(Shape::EMPTY), Shape::utf8(3, true));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Total bytes in [`Piece::OneByte`] pieces.
    pub one_byte: usize,
    /// Total bytes in [`Piece::Utf8`] pieces.
    pub utf8: usize,
    /// Total code units in [`Piece::TwoByte`] pieces.
    pub two_byte: usize,
    /// What is known about the characters of all pieces together.
    pub range: CharRange,
}

impl Shape {
    /// The shape of an empty rope.
    pub const EMPTY: Shape = Shape {
        one_byte: 0,
        utf8: 0,
        two_byte: 0,
        range: CharRange::Ascii,
    };

    /// The shape of one piece. Reads only lengths; a one-byte piece is
    /// [`CharRange::Latin1`], a two-byte piece [`CharRange::Unknown`], and a
    /// UTF-8 piece is [`CharRange::Ascii`] only when empty.
    pub fn of_piece(piece: Piece<'_>) -> Shape {
        match piece {
            Piece::OneByte(b) => Shape {
                one_byte: b.len(),
                range: if b.is_empty() {
                    CharRange::Ascii
                } else {
                    CharRange::Latin1
                },
                ..Shape::EMPTY
            },
            Piece::Utf8(s) => Shape::utf8(s.len(), s.is_empty()),
            Piece::TwoByte(u) => Shape {
                two_byte: u.len(),
                range: if u.is_empty() {
                    CharRange::Ascii
                } else {
                    CharRange::Unknown
                },
                ..Shape::EMPTY
            },
        }
    }

    /// The shape of UTF-8 text of `len` bytes, ASCII-only when the caller
    /// knows it is.
    pub fn utf8(len: usize, ascii: bool) -> Shape {
        Shape {
            utf8: len,
            range: if ascii {
                CharRange::Ascii
            } else {
                CharRange::Unknown
            },
            ..Shape::EMPTY
        }
    }

    /// The shape of two ropes one after the other.
    pub fn then(self, next: Shape) -> Shape {
        Shape {
            one_byte: self.one_byte + next.one_byte,
            utf8: self.utf8 + next.utf8,
            two_byte: self.two_byte + next.two_byte,
            range: self.range.max(next.range),
        }
    }

    /// Code units in all representations together: a rope's positions
    /// (see [`Rope::for_each_piece_from`]) run from 0 to this.
    pub fn len(&self) -> usize {
        self.one_byte + self.utf8 + self.two_byte
    }

    /// True when the rope has no text at all.
    pub fn is_empty(&self) -> bool {
        self.one_byte == 0 && self.utf8 == 0 && self.two_byte == 0
    }
}

/// Text that yields its pieces in order, without flattening.
///
/// Implemented for [`ropey::Rope`], [`ropey::RopeSlice`], `str`, `String`,
/// [`Piece`], [`Latin1`], [`Utf16`], [`Concat`], [`Measured`], for slices,
/// arrays and vectors of ropes (`[&dyn Rope]`, `[Piece]`,
/// `Vec<Box<dyn Rope + Send>>`, …), and through `&R`, `Box<R>`, `Rc<R>` and
/// `Arc<R>`. The trait is object safe, so ropes of different types can be
/// joined in a [`Concat`] or a vector of boxes.
///
/// Every walk over the same rope must yield the same pieces: the encoder
/// measures in one walk and writes in another, and a resumed encode picks up
/// at a position counted in an earlier walk.
///
/// # Implementing `Rope` for your own type
///
/// One method is required, [`Rope::for_each_piece`]: call `visit` with each
/// piece of your text in order, borrowed from `self`, and stop as soon as it
/// returns [`ControlFlow::Break`] (the `?` operator does that). The other two
/// have defaults that are correct for any rope:
///
/// - [`Rope::shape`] walks the pieces and adds up their lengths. Override
///   it when your type knows its lengths already; the answer must match the
///   pieces exactly, and its [`CharRange`] must never be narrower than the
///   text (when unsure, [`CharRange::Unknown`]).
/// - [`Rope::for_each_piece_from`] walks from the first piece and skips.
///   Override it only if your type can find a position faster, for long
///   ropes encoded in many small steps ([`crate::Encoder`]).
///
/// A list of lines, sent with a line feed after each, never joined into one
/// string:
///
/// ```
/// use std::ops::ControlFlow;
/// use unflat::queue::WriteQueue;
/// use unflat::{write, Encoding, Mode, Piece, Rope};
///
/// struct Lines(Vec<String>);
///
/// impl Rope for Lines {
///     fn for_each_piece<'a>(
///         &'a self,
///         visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
///     ) -> ControlFlow<()> {
///         for line in &self.0 {
///             visit(Piece::Utf8(line))?;
///             visit(Piece::Utf8("\n"))?;
///         }
///         ControlFlow::Continue(())
///     }
/// }
///
/// let lines = Lines(vec!["caf\u{e9}".into(), "cr\u{e8}me".into()]);
/// assert_eq!(lines.shape().utf8, 13); // the default: the pieces' lengths
///
/// // Encoded like any rope: into a buffer of yours...
/// let mut out = [0u8; 32];
/// let n = write(&lines, Encoding::Latin1, Mode::Strict, &mut out).unwrap();
/// assert_eq!(&out[..n], b"caf\xe9\ncr\xe8me\n");
///
/// // ...or into a write queue's buffer.
/// let mut q = WriteQueue::new();
/// q.encode(&lines, Encoding::Utf8, Mode::Strict).unwrap();
/// let mut socket = Vec::new();
/// q.write_to(&mut socket).unwrap();
/// assert_eq!(socket, "café\ncrème\n".as_bytes());
/// ```
///
/// A UTF-16 gap buffer, as a text editor keeps one: the text is the units
/// before the gap and the units after it, two pieces. It knows its length,
/// so it overrides `shape` with an O(1) answer; its characters are unknown
/// (any UTF-16), so the range is [`CharRange::Unknown`].
///
/// ```
/// use std::ops::ControlFlow;
/// use unflat::{size, write, CharRange, Encoding, Mode, Piece, Rope, Shape};
///
/// struct GapBuffer {
///     units: Vec<u16>,
///     gap: std::ops::Range<usize>,
/// }
///
/// impl Rope for GapBuffer {
///     fn for_each_piece<'a>(
///         &'a self,
///         visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
///     ) -> ControlFlow<()> {
///         visit(Piece::TwoByte(&self.units[..self.gap.start]))?;
///         visit(Piece::TwoByte(&self.units[self.gap.end..]))
///     }
///
///     fn shape(&self) -> Shape {
///         Shape {
///             two_byte: self.units.len() - self.gap.len(),
///             range: CharRange::Unknown,
///             ..Shape::EMPTY
///         }
///     }
/// }
///
/// // "€ 5" with a gap of three units after the euro sign.
/// let buffer = GapBuffer { units: vec![0x20AC, 0, 0, 0, 0x20, 0x35], gap: 1..4 };
/// assert_eq!(size(&buffer, Encoding::Utf8), 5);
/// let mut out = Vec::new();
/// unflat::write_buf(&buffer, Encoding::Utf8, Mode::Strict, &mut out).unwrap();
/// assert_eq!(out, "€ 5".as_bytes());
/// let mut utf16 = [0u8; 6];
/// assert_eq!(write(&buffer, Encoding::Utf16Le, Mode::Strict, &mut utf16), Ok(6));
/// assert_eq!(utf16, [0xAC, 0x20, 0x20, 0, 0x35, 0]);
/// ```
///
/// To hand your rope to [`WriteQueue::stream`](crate::queue::WriteQueue::stream)
/// or to `RopeBody` (feature `http-body`), which keep it after the call,
/// make it owned and `Send + Sync`, and wrap it in an `Arc`
/// ([`crate::queue::SharedRope`]).
pub trait Rope {
    /// Calls `visit` with each piece in order until it returns
    /// [`ControlFlow::Break`], and returns what the last call returned.
    /// Empty pieces may be visited.
    fn for_each_piece<'a>(
        &'a self,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()>;

    /// Lengths and character range, without reading the text.
    ///
    /// The default walks the pieces and adds up their lengths (it reads no
    /// text, but costs one step per piece); types that know their lengths
    /// override it with an O(1) answer.
    fn shape(&self) -> Shape {
        let mut shape = Shape::EMPTY;
        let _ = self.for_each_piece(&mut |p| {
            shape = shape.then(Shape::of_piece(p));
            ControlFlow::Continue(())
        });
        shape
    }

    /// [`Rope::for_each_piece`] from position `start` on: the piece that
    /// holds `start` is visited cut to begin there, the pieces before it not
    /// at all. A position counts code units in each piece's own
    /// representation (bytes of one-byte and UTF-8 pieces, `u16`s of two-byte
    /// pieces), from 0 to [`Shape::len`]; past the end, nothing is visited.
    ///
    /// This is how a resumed encode ([`crate::Encoder`]) continues where it
    /// stopped. The default walks the pieces from the first and skips, one
    /// step per piece skipped; ropes that can find a position faster
    /// override it (ropey ropes in O(log n), slices and [`Concat`] part by
    /// part), so that encoding a large rope in many small steps stays linear.
    ///
    /// # Panics
    /// If `start` falls inside a character of a UTF-8 piece (the encoder
    /// only stops between characters).
    fn for_each_piece_from<'a>(
        &'a self,
        start: usize,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        // From the start, the walk itself: no visitor wrapped around the
        // caller's, whose call per piece a rope of thousands of short
        // pieces would pay.
        if start == 0 {
            return self.for_each_piece(visit);
        }
        let mut skip = start;
        self.for_each_piece(&mut |p| {
            if skip == 0 {
                return visit(p);
            }
            if skip >= p.len() {
                skip -= p.len();
                return ControlFlow::Continue(());
            }
            let (_, rest) = p.split_at(skip);
            skip = 0;
            visit(rest)
        })
    }
}

/// Implements [`Rope`] for a type that holds a rope — a pointer (`&R`,
/// `Box<R>`, …) or a container of ropes (`[R; N]`, `Vec<R>`) — by delegating
/// every method to the rope `|this| place` names.
macro_rules! delegate_rope {
    ($(impl[$($generics:tt)*] $ty:ty => |$this:ident| $place:expr;)*) => {$(
        impl<$($generics)*> Rope for $ty {
            fn for_each_piece<'a>(
                &'a self,
                visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
            ) -> ControlFlow<()> {
                let $this = self;
                $place.for_each_piece(visit)
            }

            fn shape(&self) -> Shape {
                let $this = self;
                $place.shape()
            }

            fn for_each_piece_from<'a>(
                &'a self,
                start: usize,
                visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
            ) -> ControlFlow<()> {
                let $this = self;
                $place.for_each_piece_from(start, visit)
            }
        }
    )*};
}

delegate_rope! {
    impl[R: Rope + ?Sized] &R => |this| **this;
    impl[R: Rope + ?Sized] Box<R> => |this| **this;
    impl[R: Rope + ?Sized] std::rc::Rc<R> => |this| **this;
    impl[R: Rope + ?Sized] std::sync::Arc<R> => |this| **this;
}

/// Visits `piece` from position `start` on (nothing when `start` is past it).
fn visit_from<'a>(
    piece: Piece<'a>,
    start: usize,
    visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    if start >= piece.len() {
        return ControlFlow::Continue(());
    }
    visit(piece.split_at(start).1)
}

/// Implements [`Rope`] for a type that is one piece of text, the [`Piece`]
/// `|this| piece` names.
macro_rules! one_piece_rope {
    ($(impl[$($generics:tt)*] $ty:ty => |$this:ident| $piece:expr;)*) => {$(
        impl<$($generics)*> Rope for $ty {
            fn for_each_piece<'a>(
                &'a self,
                visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
            ) -> ControlFlow<()> {
                let $this = self;
                visit($piece)
            }

            fn shape(&self) -> Shape {
                let $this = self;
                Shape::of_piece($piece)
            }

            fn for_each_piece_from<'a>(
                &'a self,
                start: usize,
                visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
            ) -> ControlFlow<()> {
                let $this = self;
                visit_from($piece, start, visit)
            }
        }
    )*};
}

// A `str` is one UTF-8 piece; its shape is O(1): the length is known, the
// character range is not (finding it would mean reading the text).
one_piece_rope! {
    impl[] Piece<'_> => |this| *this;
    impl[] str => |this| Piece::Utf8(this);
    impl[] String => |this| Piece::Utf8(this);
}

/// Latin-1 text: every byte is one character U+0000..=U+00FF (what V8 calls
/// a one-byte string). Not to be confused with windows-1252.
///
/// Borrowed or owned: `Latin1(b"caf\xe9")`, `Latin1(&vec[..])`,
/// `Latin1(Vec<u8>)`, `Latin1(bytes::Bytes)`, `Latin1(Arc<[u8]>)` — any
/// `B: AsRef<[u8]>`.
///
/// ```
/// use unflat::{size, write, Encoding, Latin1, Mode};
/// let owned = Latin1(b"cr\xe8me br\xfbl\xe9e".to_vec());
/// assert_eq!(size(&owned, Encoding::Latin1), 12);
/// assert_eq!(size(&owned, Encoding::Utf8), 15); // è, û, é take two bytes
/// let mut out = [0u8; 15];
/// write(&owned, Encoding::Utf8, Mode::Strict, &mut out).unwrap();
/// assert_eq!(&out, "crème brûlée".as_bytes());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Latin1<B>(pub B);

/// UTF-16 text as code units (what V8 calls a two-byte string); unpaired
/// surrogates are allowed.
///
/// Borrowed or owned: `Utf16(&[0x20AC])`, `Utf16(Vec<u16>)`,
/// `Utf16(Arc<[u16]>)` — any `B: AsRef<[u16]>`.
///
/// ```
/// use unflat::{write, Encoding, Mode, Utf16};
/// let units: Vec<u16> = "€ 😀".encode_utf16().collect();
/// let text = Utf16(units);
/// let mut out = [0u8; 8];
/// assert_eq!(write(&text, Encoding::Utf8, Mode::Strict, &mut out), Ok(8));
/// assert_eq!(&out, "€ 😀".as_bytes());
/// // An unpaired surrogate becomes U+FFFD in UTF-8, as in JavaScript.
/// let lone = Utf16([0xD800]);
/// assert_eq!(write(&lone, Encoding::Utf8, Mode::Strict, &mut out), Ok(3));
/// assert_eq!(&out[..3], "\u{FFFD}".as_bytes());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Utf16<B>(pub B);

one_piece_rope! {
    impl[B: AsRef<[u8]>] Latin1<B> => |this| Piece::OneByte(this.0.as_ref());
    impl[B: AsRef<[u16]>] Utf16<B> => |this| Piece::TwoByte(this.0.as_ref());
}

/// Ropes of any kind, one after the other: a borrowed concatenation that
/// copies no text and allocates nothing.
///
/// The parts are held in an array inside the `Concat` itself, so one can be
/// built per HTTP response on the stack, for free:
///
/// ```
/// use unflat::{size, Concat, Encoding, Latin1, Rope};
/// let status = "HTTP/1.1 200 OK\r\n";
/// let server = Latin1(b"Server: unflat\r\n");
/// let len = 42.to_string();
/// let head = Concat::new([&status, &server, &"Content-Length: ", &len, &"\r\n\r\n"]);
/// assert_eq!(head.shape().one_byte, 16);
/// assert_eq!(size(&head, Encoding::Latin1), 55);
/// ```
///
/// A `Concat` is itself a rope, so concatenations nest. For a number of parts
/// known only at run time, a slice or vector of ropes is a rope too
/// (`[&dyn Rope]`, `Vec<Box<dyn Rope + Send>>`).
///
/// Its parts are `Sync` (every rope of this crate that is not behind an
/// `Rc` is), so that a `Concat`, and a head holding one as a value, can be
/// sent between threads and held across an `.await`.
#[derive(Clone, Copy)]
pub struct Concat<'a, const N: usize> {
    parts: [&'a (dyn Rope + Sync); N],
}

impl<'a, const N: usize> Concat<'a, N> {
    /// Joins `parts` in order.
    pub fn new(parts: [&'a (dyn Rope + Sync); N]) -> Self {
        Concat { parts }
    }
}

impl<const N: usize> std::fmt::Debug for Concat<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Concat")
            .field("parts", &N)
            .field("shape", &self.shape())
            .finish()
    }
}

impl<const N: usize> Rope for Concat<'_, N> {
    fn for_each_piece<'a>(
        &'a self,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.parts[..].for_each_piece(visit)
    }

    /// O(number of parts): the parts' shapes added up.
    fn shape(&self) -> Shape {
        self.parts[..].shape()
    }

    fn for_each_piece_from<'a>(
        &'a self,
        start: usize,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.parts[..].for_each_piece_from(start, visit)
    }
}

/// Ropes one after the other: `[Piece]`, `[&dyn Rope]`,
/// `[Box<dyn Rope + Send>]`, …
impl<R: Rope> Rope for [R] {
    fn for_each_piece<'a>(
        &'a self,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.iter().try_for_each(|p| p.for_each_piece(visit))
    }

    /// O(number of parts): the parts' shapes added up.
    fn shape(&self) -> Shape {
        self.iter().fold(Shape::EMPTY, |acc, p| acc.then(p.shape()))
    }

    /// Skips whole parts by their [`Shape::len`], then hands the rest of
    /// `start` to the part that holds it.
    fn for_each_piece_from<'a>(
        &'a self,
        start: usize,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        // From the start, the plain walk: no position to check per part.
        if start == 0 {
            return self.for_each_piece(visit);
        }
        let mut skip = start;
        for part in self {
            if skip == 0 {
                part.for_each_piece(visit)?;
                continue;
            }
            let len = part.shape().len();
            if skip >= len {
                skip -= len;
                continue;
            }
            part.for_each_piece_from(skip, visit)?;
            skip = 0;
        }
        ControlFlow::Continue(())
    }
}

delegate_rope! {
    impl[R: Rope, const N: usize] [R; N] => |this| this[..];
    impl[R: Rope] Vec<R> => |this| this[..];
}

/// A rope together with its shape, measured once.
///
/// Some ropes pay for [`Rope::shape`]: a [`Concat`] walks its parts, and a
/// ropey rope of a single leaf recounts its text (ropey 1.x caches counts
/// only in inner nodes). A rope that is written many times — a cached
/// response body — is best wrapped once:
///
/// ```
/// use unflat::{Measured, Rope};
/// let body = Measured::new(ropey::Rope::from_str("hello"));
/// assert_eq!(body.shape().utf8, 5);
/// assert_eq!(body.get().len_chars(), 5);
/// ```
#[derive(Clone, Debug)]
pub struct Measured<R> {
    rope: R,
    shape: Shape,
}

impl<R: Rope> Measured<R> {
    /// Measures `rope`.
    pub fn new(rope: R) -> Self {
        let shape = rope.shape();
        Measured { rope, shape }
    }

    /// The rope.
    pub fn get(&self) -> &R {
        &self.rope
    }
}

impl<R: Rope> Rope for Measured<R> {
    fn for_each_piece<'a>(
        &'a self,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.rope.for_each_piece(visit)
    }

    /// O(1): measured when wrapped.
    fn shape(&self) -> Shape {
        self.shape
    }

    fn for_each_piece_from<'a>(
        &'a self,
        start: usize,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.rope.for_each_piece_from(start, visit)
    }
}

#[cfg(test)]
mod tests;
