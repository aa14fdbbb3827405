//! How many bytes a rope takes in an encoding, and which path writes it.
//!
//! [`storage_size`] reads lengths only. [`plan`] reads the text only where the
//! shape leaves the exact size or the path open: it counts the Latin-1 bytes
//! that become two UTF-8 bytes, the UTF-16 units of UTF-8 pieces, the UTF-8
//! length of two-byte pieces, and in strict mode looks for a character the
//! target cannot hold. It never copies text.

use std::ops::ControlFlow;

use encoding_rs::mem::str_latin1_up_to;

use crate::encoding::{EncodeError, Encoding, Mode};
use crate::kernel;
use crate::rope::{CharRange, Piece, Rope, Shape};
use crate::surrogate::{self, Joined, Joiner};

/// The three ways a rope is written.
///
/// [`plan`] says which one a rope takes in an encoding; the bytes are the
/// same whichever it is, only the work differs.
///
/// ```
/// use unflat::{plan, Encoding, Latin1, Mode, EncodePath, Utf16};
/// let path = |r: &dyn unflat::Rope, e| plan(r, e, Mode::Strict).unwrap().path();
/// assert_eq!(path(&"ascii", Encoding::Utf8), EncodePath::OneByte);
/// assert_eq!(path(&Latin1(b"caf\xe9"), Encoding::Latin1), EncodePath::OneByte);
/// assert_eq!(path(&Latin1(b"caf\xe9"), Encoding::Utf8), EncodePath::Expand);
/// assert_eq!(path(&Utf16(&[0x20AC]), Encoding::Utf8), EncodePath::TwoByte);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EncodePath {
    /// Every piece is copied as it is, one `memcpy` each: one-byte ropes to
    /// latin1, ASCII ropes to latin1 or utf8 (UTF-8 pieces count as ASCII for
    /// utf8, which they already are).
    OneByte,
    /// One-byte ropes with non-ASCII characters to utf8, by back-of-buffer
    /// expansion.
    ///
    /// A Latin-1 character takes one UTF-8 byte (below 0x80) or two. The encoded
    /// size is therefore `n + h`, where `n` is the number of source bytes and `h`
    /// the number of them that are ≥ 0x80; [`crate::plan`] counts `h`. Short
    /// pieces are copied, one memcpy each, to the tail of the region, and one
    /// forward pass writes their UTF-8 form from its start:
    ///
    /// ```text
    /// step 1: copy every short piece, one memcpy each, to the tail of the region
    ///
    ///   0         h                                   n+h
    ///   [ unused  | c a f é   n a ï v e               ]
    ///   ^ w         ^ r
    ///
    /// step 2: one forward pass; the reader r walks the copied bytes, the writer w
    ///         writes their UTF-8 form from the start of the region
    ///
    ///   [ c a f Ã © _ n a Ã ¯ v e                     ]   w == r: done early,
    ///                                        ^ w = r      the rest is in place
    /// ```
    ///
    /// Node puts the characters in the last third of a `3 × n` buffer; sizing the
    /// region exactly is what lets the pass end as soon as the last two-byte
    /// character is written: from then on every byte is already where it belongs.
    ///
    /// Long one-byte pieces and UTF-8 pieces are not copied to the tail: in the
    /// same walk, once the bytes waiting there are expanded, they are written at
    /// `w` straight from their own memory. A destination with room for the worst
    /// case, `2n`, is written the same way without counting `h` first.
    ///
    /// That is how a rope that mixes one-byte and UTF-8 pieces is written. A
    /// rope of one-byte pieces only takes the thread's stage instead: short
    /// pieces are copied there, and converted from there into the
    /// destination, many pieces a kernel call, without the tail's limit on
    /// block length; text of up to 16 KiB is gathered whole and counted in the
    /// stage, so that `h` costs no second walk over the pieces.
    Expand,
    /// Everything else — two-byte pieces, characters above U+00FF in latin1,
    /// and every rope written as utf16le — is transcoded piece by piece,
    /// never flattened.
    TwoByte,
}

/// What [`plan`] found: the exact encoded size, the path that writes it, and
/// the encoding it was made for (so that [`crate::write_planned`] cannot
/// write it in another).
///
/// ```
/// use unflat::{plan, write_planned, Encoding, Mode, EncodePath, Utf16};
/// let rope = Utf16(&[0x63, 0x61, 0x66, 0xE9]); // "café" as UTF-16
/// let p = plan(&rope, Encoding::Utf8, Mode::Strict).unwrap();
/// assert_eq!((p.size(), p.path(), p.encoding()), (5, EncodePath::TwoByte, Encoding::Utf8));
/// let mut dst = vec![0; p.size()]; // exactly the size
/// write_planned(&rope, p, &mut dst).unwrap();
/// assert_eq!(dst, "café".as_bytes());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    size: usize,
    path: EncodePath,
    encoding: Encoding,
    mode: Mode,
    shape: Shape,
}

impl Plan {
    /// Exact number of bytes the rope takes in the encoding.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The path that writes it.
    pub fn path(&self) -> EncodePath {
        self.path
    }

    /// The encoding the plan was made for.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The mode the plan was made in. A strict plan exists only for a rope
    /// whose every character the encoding holds.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The rope's shape, as measured (so that writing need not ask again).
    pub(crate) fn shape(&self) -> Shape {
        self.shape
    }
}

/// An upper bound of the bytes `rope` takes in `encoding`, from its lengths
/// alone (the text is never read).
///
/// Per source code unit: a Latin-1 byte takes at most 2 UTF-8 bytes (1 when
/// the rope is known ASCII); a UTF-8 byte at most 1 latin1 byte or one UTF-16
/// unit; a UTF-16 unit at most 3 UTF-8 bytes.
///
/// ```
/// use unflat::{storage_size, Encoding, Latin1};
/// assert_eq!(storage_size(&Latin1(b"caf\xe9"), Encoding::Utf8), 8);
/// assert_eq!(storage_size(&Latin1(b"caf\xe9"), Encoding::Latin1), 4);
/// ```
pub fn storage_size<R: Rope + ?Sized>(rope: &R, encoding: Encoding) -> usize {
    bound(rope.shape(), encoding)
}

/// [`storage_size`] of a rope of shape `s`.
pub(crate) fn bound(s: Shape, encoding: Encoding) -> usize {
    match encoding {
        Encoding::Latin1 | Encoding::Ascii => s.len(),
        Encoding::Utf8 => {
            let per_one_byte = if s.range == CharRange::Ascii { 1 } else { 2 };
            s.one_byte
                .saturating_mul(per_one_byte)
                .saturating_add(s.utf8)
                .saturating_add(s.two_byte.saturating_mul(3))
        }
        Encoding::Utf16Le => s.len().saturating_mul(2),
    }
}

/// The exact number of bytes `rope` takes in `encoding`. For latin1 and
/// ascii this is the lossy size, which is also the strict size whenever the
/// strict encode succeeds.
///
/// ```
/// use unflat::{size, Encoding, Latin1};
/// assert_eq!(size(&Latin1(b"caf\xe9"), Encoding::Utf8), 5);
/// ```
pub fn size<R: Rope + ?Sized>(rope: &R, encoding: Encoding) -> usize {
    match plan(rope, encoding, Mode::Lossy) {
        Ok(p) => p.size,
        Err(e) => unreachable!("a lossy plan cannot fail: {e}"),
    }
}

/// Measures `rope` for `encoding`: its exact size and the path that will
/// write it. In [`Mode::Strict`], fails with [`EncodeError::Unencodable`]
/// naming the first character the encoding cannot represent.
///
/// ```
/// use unflat::{plan, write_planned, Encoding, Latin1, Mode, EncodePath};
/// let rope = Latin1(b"caf\xe9");
/// let p = plan(&rope, Encoding::Utf8, Mode::Strict).unwrap();
/// assert_eq!((p.size(), p.path()), (5, EncodePath::Expand));
/// let mut dst = vec![0; p.size()]; // sized from the plan
/// write_planned(&rope, p, &mut dst).unwrap();
/// assert_eq!(dst, "café".as_bytes());
/// assert!(plan(&"€", Encoding::Latin1, Mode::Strict).is_err());
/// ```
pub fn plan<R: Rope + ?Sized>(
    rope: &R,
    encoding: Encoding,
    mode: Mode,
) -> Result<Plan, EncodeError> {
    plan_shaped(rope, rope.shape(), encoding, mode)
}

/// [`plan`] for a rope whose shape is already known.
pub(crate) fn plan_shaped<R: Rope + ?Sized>(
    rope: &R,
    s: Shape,
    encoding: Encoding,
    mode: Mode,
) -> Result<Plan, EncodeError> {
    let (size, path) = match encoding {
        Encoding::Latin1 | Encoding::Ascii => plan_one_byte_target(rope, s, encoding, mode)?,
        Encoding::Utf8 => plan_utf8(rope, s),
        Encoding::Utf16Le => (
            2 * (s.one_byte + s.two_byte + utf16_units_of_utf8_pieces(rope, s)),
            EncodePath::TwoByte,
        ),
    };
    Ok(Plan {
        size,
        path,
        encoding,
        mode,
        shape: s,
    })
}

fn plan_one_byte_target<R: Rope + ?Sized>(
    rope: &R,
    s: Shape,
    encoding: Encoding,
    mode: Mode,
) -> Result<(usize, EncodePath), EncodeError> {
    let limit = encoding.one_byte_limit().expect("a one-byte encoding");
    let check = mode == Mode::Strict && !known_to_fit(s, limit);
    // One output byte per UTF-16 code unit; only UTF-8 pieces have a
    // different number of code units than bytes. The count and the strict
    // check share one walk, and a walk only happens when one is needed.
    let count = s.utf8 > 0 && s.range != CharRange::Ascii;
    let mut utf8_units = s.utf8;
    if check || count {
        utf8_units = 0;
        let fits = rope
            .for_each_piece(&mut |p| {
                if let Piece::Utf8(t) = p {
                    utf8_units += utf16_units(t);
                }
                if !check || piece_fits(p, limit) {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                }
            })
            .is_continue();
        if !fits {
            return Err(locate_unencodable(rope, encoding));
        }
    }
    let as_is = s.two_byte == 0 && utf8_units == s.utf8;
    let path = if as_is {
        EncodePath::OneByte
    } else {
        EncodePath::TwoByte
    };
    Ok((s.one_byte + utf8_units + s.two_byte, path))
}

/// The size in `encoding` of a rope whose shape alone shows that its
/// pieces are copied as they are (path 1), whatever the mode; `None` when
/// the text must be read first. No two-byte pieces, and: into utf8, UTF-8
/// pieces and one-byte pieces known to be ASCII; into latin1 or ascii,
/// pieces whose every character the shape's range shows to fit, UTF-8
/// ones only when ASCII (a UTF-8 piece's bytes are its one-byte text only
/// then). A response head into latin1 is the second case: one-byte pieces,
/// range Latin1.
pub(crate) fn as_is(s: Shape, encoding: Encoding) -> Option<usize> {
    let fits = match encoding {
        Encoding::Utf8 => s.one_byte == 0 || s.range == CharRange::Ascii,
        Encoding::Latin1 | Encoding::Ascii => {
            let limit = encoding.one_byte_limit().expect("a one-byte encoding");
            (s.utf8 == 0 || s.range == CharRange::Ascii) && known_to_fit(s, limit)
        }
        Encoding::Utf16Le => false,
    };
    (s.two_byte == 0 && fits).then(|| s.one_byte + s.utf8)
}

fn plan_utf8<R: Rope + ?Sized>(rope: &R, s: Shape) -> (usize, EncodePath) {
    if let Some(size) = as_is(s, Encoding::Utf8) {
        return (size, EncodePath::OneByte);
    }
    let mut highs = 0;
    let mut two_byte = 0;
    if s.two_byte == 0 {
        // No surrogates to pair: only the one-byte pieces need reading.
        let _ = rope.for_each_piece(&mut |p| {
            if let Piece::OneByte(b) = p {
                highs += kernel::count_high_bytes(b);
            }
            ControlFlow::Continue(())
        });
    } else {
        let mut joiner = Joiner::default();
        let mut count = |j: Joined<'_>| {
            two_byte += match j {
                Joined::Pair(..) => 4,
                Joined::Lone(_) => 3,
                Joined::Units(u) => surrogate::utf8_len(u),
            };
            ControlFlow::Continue(())
        };
        let _ = rope.for_each_piece(&mut |p| match p {
            Piece::OneByte(b) => {
                highs += kernel::count_high_bytes(b);
                joiner.other(b.len(), &mut count)
            }
            Piece::Utf8(t) => joiner.other(t.len(), &mut count),
            Piece::TwoByte(u) => joiner.two_byte(u, &mut count),
        });
        let _ = joiner.finish(&mut count);
    }
    let path = if s.two_byte > 0 {
        EncodePath::TwoByte
    } else if highs > 0 {
        EncodePath::Expand
    } else {
        EncodePath::OneByte
    };
    (s.one_byte + highs + s.utf8 + two_byte, path)
}

/// UTF-16 code units in the UTF-8 pieces of `rope` (their byte count when the
/// rope is known ASCII, without reading).
fn utf16_units_of_utf8_pieces<R: Rope + ?Sized>(rope: &R, s: Shape) -> usize {
    if s.utf8 == 0 || s.range == CharRange::Ascii {
        return s.utf8;
    }
    let mut units = 0;
    let _ = rope.for_each_piece(&mut |p| {
        if let Piece::Utf8(t) = p {
            units += utf16_units(t);
        }
        ControlFlow::Continue(())
    });
    units
}

/// UTF-16 code units of UTF-8 text: one per lead byte, two for a four-byte
/// sequence.
pub(crate) fn utf16_units(s: &str) -> usize {
    // At most 2 per byte, so a `u8` accumulator holds a chunk of 127.
    s.as_bytes()
        .chunks(127)
        .map(|c| {
            usize::from(c.iter().fold(0u8, |n, &b| {
                n + u8::from((b as i8) >= -0x40) + u8::from(b >= 0xF0)
            }))
        })
        .sum()
}

/// In [`Mode::Strict`], refuses a rope with a character `encoding` cannot
/// hold ([`EncodeError::Unencodable`]); reads the text only when the shape
/// leaves it open. Lossy encodes and utf8/utf16le refuse nothing.
pub(crate) fn check_encodable<R: Rope + ?Sized>(
    rope: &R,
    s: Shape,
    encoding: Encoding,
    mode: Mode,
) -> Result<(), EncodeError> {
    let Some(limit) = encoding.one_byte_limit() else {
        return Ok(());
    };
    if mode == Mode::Lossy || known_to_fit(s, limit) || fits(rope, limit) {
        Ok(())
    } else {
        Err(locate_unencodable(rope, encoding))
    }
}

/// True when the shape alone shows that every character is at most
/// `limit` (0x7F or 0xFF): the text need not be read to know it fits.
fn known_to_fit(s: Shape, limit: u32) -> bool {
    s.range == CharRange::Ascii || (limit == 0xFF && s.range == CharRange::Latin1)
}

/// True when no character of `rope` is above `limit` (0x7F or 0xFF).
pub(crate) fn fits<R: Rope + ?Sized>(rope: &R, limit: u32) -> bool {
    rope.for_each_piece(&mut |p| {
        if piece_fits(p, limit) {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    })
    .is_continue()
}

/// True when no character of `piece` is above `limit` (0x7F or 0xFF).
fn piece_fits(piece: Piece<'_>, limit: u32) -> bool {
    let ascii = limit == 0x7F;
    match piece {
        Piece::OneByte(b) => !ascii || b.is_ascii(),
        Piece::Utf8(t) if ascii => t.is_ascii(),
        Piece::Utf8(t) => str_latin1_up_to(t) == t.len(),
        Piece::TwoByte(u) => u.iter().all(|&u| u32::from(u) <= limit),
    }
}

/// Characters looked at one by one, counted, until one is above `limit`.
struct Chars {
    limit: u32,
    index: usize,
}

impl Chars {
    /// Stops at a character above the limit, with its code point and index.
    fn check(&mut self, cp: u32) -> ControlFlow<(u32, usize)> {
        if cp > self.limit {
            return ControlFlow::Break((cp, self.index));
        }
        self.index += 1;
        ControlFlow::Continue(())
    }

    /// [`Chars::check`] over what a [`Joiner`] hands on (an unpaired
    /// surrogate is a character of its own).
    fn joined(&mut self, j: Joined<'_>) -> ControlFlow<(u32, usize)> {
        match j {
            Joined::Pair(h, l) => self.check(surrogate::pair_code_point(h, l)),
            Joined::Lone(h) => self.check(u32::from(h)),
            Joined::Units(u) => char::decode_utf16(u.iter().copied()).try_for_each(|c| {
                self.check(c.map_or_else(|e| u32::from(e.unpaired_surrogate()), u32::from))
            }),
        }
    }
}

/// The first character of `rope` that `encoding` cannot hold, decoded
/// character by character. Called only once [`fits`] has said there is one.
fn locate_unencodable<R: Rope + ?Sized>(rope: &R, encoding: Encoding) -> EncodeError {
    let limit = encoding.one_byte_limit().expect("a one-byte encoding");
    let mut chars = Chars { limit, index: 0 };
    let mut joiner = Joiner::default();
    let mut found = None;
    let _ = rope.for_each_piece(&mut |p| {
        let step = (|| match p {
            Piece::OneByte(b) => {
                joiner.other(b.len(), &mut |j| chars.joined(j))?;
                b.iter().try_for_each(|&x| chars.check(u32::from(x)))
            }
            Piece::Utf8(t) => {
                joiner.other(t.len(), &mut |j| chars.joined(j))?;
                t.chars().try_for_each(|c| chars.check(u32::from(c)))
            }
            Piece::TwoByte(u) => joiner.two_byte(u, &mut |j| chars.joined(j)),
        })();
        found = step.break_value();
        step.map_break(|_| ())
    });
    if found.is_none() {
        found = joiner.finish(&mut |j| chars.joined(j)).break_value();
    }
    let (code_point, index) = found.expect("fits() found a character above the limit");
    EncodeError::Unencodable {
        code_point,
        index,
        encoding,
    }
}
