//! The one walk that writes a head: every piece copied into the destination
//! once, and every character of a value rope checked as it is written —
//! the one-byte path's check fused with its copy, UTF-8 and two-byte
//! pieces narrowed to Latin-1 a character at a time. Nothing walks a value
//! before this, so no value can pass a check on one walk and write other
//! bytes on another.

use std::ops::ControlFlow;

use super::grammar::is_field_value_byte;
use super::HeadError;
use crate::rope::{Piece, Rope};

/// Why a head could not be written. Nothing written of it counts: the
/// queue ([`WriteQueue::head`](crate::queue::WriteQueue::head)) and
/// [`Head::write_to_vec`](super::Head::write_to_vec) drop it, and a slice
/// given to [`Head::write`](super::Head::write) holds no head.
///
/// ```
/// use unflat::head::{Head, HeadError, HeaderName, RequestMethod, Status, WriteError};
/// use unflat::Concat;
/// let name = HeaderName::new("X-Note").unwrap();
/// let value = Concat::new([&"fine", &"\r\nInjected: 1"]);
/// let mut head = Head::new(Status::OK, RequestMethod::Other);
/// head.value(name, &value).unwrap(); // nothing walked yet
/// let err = head.to_vec().unwrap_err();
/// assert_eq!(err, WriteError::Value { name: "X-Note", error: HeadError::InvalidValue { at: 4, byte: b'\r' } });
/// assert_eq!(err.to_string(), "field \"X-Note\": invalid header value: byte 0x0D at 4 is not allowed");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteError<'a> {
    /// A field's value refused as it was written: the field's name, and
    /// what was wrong at which character of its value.
    Value {
        /// The field's name.
        name: &'a str,
        /// What was wrong ([`HeadError::InvalidValue`],
        /// [`HeadError::UnsendableChar`] or [`HeadError::ValueChanged`]).
        error: HeadError,
    },
    /// The destination is shorter than [`Head::max_len`](super::Head::max_len).
    NoRoom {
        /// The bytes the head may take.
        needed: usize,
        /// The destination's.
        available: usize,
    },
}

impl std::fmt::Display for WriteError<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Value { name, error } => write!(f, "field {name:?}: {error}"),
            WriteError::NoRoom { needed, available } => write!(
                f,
                "destination too small: the head may take {needed} bytes, the destination has {available}"
            ),
        }
    }
}

impl std::error::Error for WriteError<'_> {}

/// No room left in the destination for a part of the head.
#[derive(Debug)]
pub(super) struct Overrun;

/// A destination being filled: `dst[..at]` written.
pub(super) struct Out<'d> {
    dst: &'d mut [u8],
    at: usize,
}

impl<'d> Out<'d> {
    /// Writing from the start of `dst`.
    pub(super) fn new(dst: &'d mut [u8]) -> Out<'d> {
        Out { dst, at: 0 }
    }

    /// Bytes written.
    pub(super) fn written(&self) -> usize {
        self.at
    }

    /// Copies `bytes`; [`Overrun`] when the destination has no room for
    /// them (a value rope wrote more than it measured).
    #[inline]
    pub(super) fn put(&mut self, bytes: &[u8]) -> Result<(), Overrun> {
        let to = self
            .dst
            .get_mut(self.at..self.at + bytes.len())
            .ok_or(Overrun)?;
        to.copy_from_slice(bytes);
        self.at += bytes.len();
        Ok(())
    }

    /// Writes `value` as Latin-1, each character checked as it is written
    /// (a field-value byte, at most U+00FF), then its first and last byte
    /// checked for whitespace — the bytes checked are the bytes in the
    /// destination. The value may take what is left of the destination,
    /// which the head's measure sized: a rope that gives more than it
    /// measured changed between the two ([`HeadError::ValueChanged`]).
    pub(super) fn value(&mut self, value: &dyn Rope) -> Result<(), HeadError> {
        let start = self.at;
        let end = self.dst.len();
        let mut error = None;
        let _ = value.for_each_piece(&mut |piece| {
            // A rope that walks on after a `Break` is not heard again: the
            // first error is the one reported.
            if error.is_some() {
                return ControlFlow::Break(());
            }
            let done = match piece {
                Piece::OneByte(b) => self.one_byte(b, start, end),
                Piece::Utf8(s) => self.utf8(s, start, end),
                Piece::TwoByte(u) => self.two_byte(u, start, end),
            };
            match done {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    error = Some(e);
                    ControlFlow::Break(())
                }
            }
        });
        if let Some(e) = error {
            return Err(e);
        }
        let written = &self.dst[start..self.at];
        for (at, byte) in [
            (0, written.first()),
            (written.len().wrapping_sub(1), written.last()),
        ] {
            if let Some(&byte @ (b' ' | b'\t')) = byte {
                return Err(HeadError::InvalidValue { at, byte });
            }
        }
        Ok(())
    }

    /// The room left for a value that ends at `end`, `n` bytes of it, or
    /// the error for a value longer than it measured.
    #[inline]
    fn room(&mut self, n: usize, start: usize, end: usize) -> Result<&mut [u8], HeadError> {
        if self.at + n > end {
            return Err(HeadError::ValueChanged {
                at: self.at - start,
            });
        }
        Ok(&mut self.dst[self.at..self.at + n])
    }

    /// One-byte characters: copied and checked in one loop (which the
    /// compiler vectorises), the first bad one looked for only on failure.
    #[inline]
    fn one_byte(&mut self, src: &[u8], start: usize, end: usize) -> Result<(), HeadError> {
        let at = self.at;
        let room = self.room(src.len(), start, end)?;
        let mut bad = false;
        for (d, &s) in room.iter_mut().zip(src) {
            *d = s;
            bad |= !is_field_value_byte(s);
        }
        if bad {
            let i = room
                .iter()
                .position(|&b| !is_field_value_byte(b))
                .expect("a bad byte was copied");
            return Err(HeadError::InvalidValue {
                at: at - start + i,
                byte: room[i],
            });
        }
        self.at += src.len();
        Ok(())
    }

    /// UTF-8 text: runs of ASCII as one-byte characters; a two-byte
    /// sequence led by C2 or C3 is U+0080..=U+00FF, written as its Latin-1
    /// byte; any longer character is above U+00FF and refused.
    fn utf8(&mut self, s: &str, start: usize, end: usize) -> Result<(), HeadError> {
        let bytes = s.as_bytes();
        // Nearly every value is ASCII: looked at a word at a time, then
        // copied and checked in one loop.
        if s.is_ascii() {
            return self.one_byte(bytes, start, end);
        }
        let mut i = 0;
        while i < bytes.len() {
            let run = bytes[i..]
                .iter()
                .position(|&b| !b.is_ascii())
                .unwrap_or(bytes.len() - i);
            self.one_byte(&bytes[i..i + run], start, end)?;
            i += run;
            let Some(&lead) = bytes.get(i) else {
                break;
            };
            let at = self.at - start;
            if lead > 0xC3 {
                let c = s[i..].chars().next().expect("a character starts here");
                return Err(HeadError::UnsendableChar {
                    at,
                    code_point: u32::from(c),
                });
            }
            // `s` is UTF-8: a lead byte C2 or C3 has its continuation byte.
            let byte = (lead & 0x1F) << 6 | (bytes[i + 1] & 0x3F);
            if !is_field_value_byte(byte) {
                return Err(HeadError::InvalidValue { at, byte });
            }
            self.room(1, start, end)?[0] = byte;
            self.at += 1;
            i += 2;
        }
        Ok(())
    }

    /// UTF-16 code units, each at most 0xFF written as its byte.
    fn two_byte(&mut self, units: &[u16], start: usize, end: usize) -> Result<(), HeadError> {
        let at = self.at;
        let room = self.room(units.len(), start, end)?;
        for (i, (d, &u)) in room.iter_mut().zip(units).enumerate() {
            let Ok(byte) = u8::try_from(u) else {
                return Err(HeadError::UnsendableChar {
                    at: at - start + i,
                    code_point: u32::from(u),
                });
            };
            if !is_field_value_byte(byte) {
                return Err(HeadError::InvalidValue {
                    at: at - start + i,
                    byte,
                });
            }
            *d = byte;
        }
        self.at += units.len();
        Ok(())
    }
}
