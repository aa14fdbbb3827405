//! Target encodings, strictness, and the errors an encode can return.

use std::fmt;

/// A byte encoding a rope can be written in. The names are Node.js's.
///
/// ```
/// use unflat::{size, Encoding, Latin1};
/// let text = Latin1(b"caf\xe9");
/// assert_eq!(size(&text, Encoding::Latin1), 4);
/// assert_eq!(size(&text, Encoding::Utf8), 5);
/// assert_eq!(size(&text, Encoding::Utf16Le), 8);
/// assert_eq!(Encoding::Utf16Le.to_string(), "utf16le");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// One byte per UTF-16 code unit, U+0000..=U+00FF (Node's `latin1`).
    Latin1,
    /// One byte per UTF-16 code unit, U+0000..=U+007F. In [`Mode::Lossy`] it
    /// writes exactly what [`Encoding::Latin1`] writes, as Node's `ascii` does.
    Ascii,
    /// UTF-8; unpaired surrogates become U+FFFD, as in Node.
    Utf8,
    /// UTF-16, little endian, two bytes per code unit; surrogates are kept
    /// as they are, paired or not.
    Utf16Le,
}

impl Encoding {
    /// All encodings, for tests and tables.
    pub const ALL: [Encoding; 4] = [
        Encoding::Latin1,
        Encoding::Ascii,
        Encoding::Utf8,
        Encoding::Utf16Le,
    ];

    /// Node's name for the encoding.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Latin1 => "latin1",
            Encoding::Ascii => "ascii",
            Encoding::Utf8 => "utf8",
            Encoding::Utf16Le => "utf16le",
        }
    }

    /// The largest code point the encoding represents in strict mode, for
    /// the one-byte encodings.
    pub(crate) fn one_byte_limit(self) -> Option<u32> {
        match self {
            Encoding::Latin1 => Some(0xFF),
            Encoding::Ascii => Some(0x7F),
            Encoding::Utf8 | Encoding::Utf16Le => None,
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What to do with a character the target encoding cannot represent. Only
/// [`Encoding::Latin1`] and [`Encoding::Ascii`] have such characters.
///
/// ```
/// use unflat::{write, Encoding, Mode, Utf16};
/// let euro = Utf16(&[0x20AC]); // U+20AC: not in Latin-1
/// let mut out = [0u8; 1];
/// assert!(write(&euro, Encoding::Latin1, Mode::Strict, &mut out).is_err());
/// assert_eq!(write(&euro, Encoding::Latin1, Mode::Lossy, &mut out), Ok(1));
/// assert_eq!(out, [0xAC]); // the low byte
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Refuse: the encode returns [`EncodeError::Unencodable`] and writes
    /// nothing.
    #[default]
    Strict,
    /// Keep the low byte of each UTF-16 code unit, as Node's `latin1` does
    /// (so `€`, U+20AC, becomes `0xAC`).
    Lossy,
}

/// Why an encode wrote nothing.
///
/// ```
/// use unflat::{write, EncodeError, Encoding, Mode};
/// let mut small = [0u8; 4];
/// assert_eq!(
///     write(&"café", Encoding::Utf8, Mode::Strict, &mut small),
///     Err(EncodeError::DestinationTooSmall { needed: 5, available: 4 })
/// );
/// let err = write(&"café", Encoding::Ascii, Mode::Strict, &mut small).unwrap_err();
/// assert_eq!(
///     err,
///     EncodeError::Unencodable { code_point: 0xE9, index: 3, encoding: Encoding::Ascii }
/// );
/// assert_eq!(
///     err.to_string(),
///     "character U+00E9 'é' at character index 3 cannot be encoded as ascii (strict mode)"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The destination cannot hold the encoded rope.
    DestinationTooSmall {
        /// Bytes the encoded rope takes.
        needed: usize,
        /// Bytes the destination offered.
        available: usize,
    },
    /// In [`Mode::Strict`], a character the encoding cannot represent.
    Unencodable {
        /// The character's code point (an unpaired surrogate is reported as
        /// its own code unit, U+D800..=U+DFFF).
        code_point: u32,
        /// Characters before it in the rope (a surrogate pair counts once).
        index: usize,
        /// The encoding that cannot represent it.
        encoding: Encoding,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EncodeError::DestinationTooSmall { needed, available } => write!(
                f,
                "destination too small: the encoded rope needs {needed} bytes, the destination has {available}"
            ),
            EncodeError::Unencodable {
                code_point,
                index,
                encoding,
            } => {
                write!(f, "character U+{code_point:04X} ")?;
                if let Some(c) = char::from_u32(code_point) {
                    write!(f, "{c:?} ")?;
                }
                write!(
                    f,
                    "at character index {index} cannot be encoded as {encoding} (strict mode)"
                )
            }
        }
    }
}

impl std::error::Error for EncodeError {}
