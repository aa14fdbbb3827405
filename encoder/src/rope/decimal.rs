//! An integer as a rope: its decimal digits rendered once into a buffer of
//! its own, so that a number in a concatenation (`"sid=" + id`) costs no
//! `String`.

use std::ops::ControlFlow;

use crate::rope::{CharRange, Piece, Rope, Shape};

/// The decimal digits of an integer (a `-` first when negative), held
/// inline: one ASCII piece, no heap.
///
/// ```
/// use unflat::{Concat, Decimal, Rope};
/// let version = Decimal::new(1234567_u32);
/// let etag = Concat::new([&"\"", &version, &"\""]);
/// let mut out = Vec::new();
/// unflat::write_buf(&etag, unflat::Encoding::Latin1, unflat::Mode::Strict, &mut out).unwrap();
/// assert_eq!(out, b"\"1234567\"");
/// assert_eq!(Decimal::new(-5_i64).as_str(), "-5");
/// assert_eq!(Decimal::new(u64::MAX).shape().len(), 20);
/// ```
#[derive(Clone, Copy)]
pub struct Decimal {
    digits: [u8; Decimal::MOST],
    len: u8,
}

impl Decimal {
    /// The most bytes an integer of up to 128 bits takes (`i128::MIN`).
    const MOST: usize = 40;

    /// The digits of `n`.
    pub fn new(n: impl itoa::Integer) -> Decimal {
        let mut buf = itoa::Buffer::new();
        let text = buf.format(n).as_bytes();
        let mut digits = [0; Decimal::MOST];
        digits[..text.len()].copy_from_slice(text);
        // At most MOST (40) bytes: it fits in a u8.
        Decimal {
            digits,
            len: text.len() as u8,
        }
    }

    /// The digits as text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.digits[..usize::from(self.len)]).expect("ASCII digits")
    }
}

impl std::fmt::Debug for Decimal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Decimal({})", self.as_str())
    }
}

impl Rope for Decimal {
    fn for_each_piece<'a>(
        &'a self,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        visit(Piece::OneByte(&self.digits[..usize::from(self.len)]))
    }

    /// O(1): ASCII digits.
    fn shape(&self) -> Shape {
        Shape {
            one_byte: usize::from(self.len),
            range: CharRange::Ascii,
            ..Shape::EMPTY
        }
    }
}
