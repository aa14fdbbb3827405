//! The flatten-then-write reference: what Node did before the change.
//!
//! [`flatten`] collects a rope into one new flat string the way V8 flattens a
//! `ConsString` — one-byte when every character is at most U+00FF, two-byte
//! otherwise — and [`flatten_then_write`] then encodes that flat string.
//! Every byte is copied twice and the flat copy is a heap allocation as large
//! as the text; the output is byte for byte the same as the direct
//! encoder's.
//!
//! Public as a baseline, not a way to send text: to hold the direct path
//! against the old one — the crate's differential tests, fuzzer and
//! benchmarks do, and so does a server that can serve either way to
//! measure the difference (`unflat-server --strategy flatten`).
//!
//! ```
//! use unflat::flatten::flatten_then_write;
//! use unflat::{write, Concat, Encoding, Latin1, Mode, Utf16};
//!
//! let rope = Concat::new([&Latin1(b"caf\xe9 "), &Utf16(&[0x20AC])]);
//! let (mut direct, mut flattened) = ([0; 16], [0; 16]);
//! let n = write(&rope, Encoding::Utf8, Mode::Strict, &mut direct).unwrap();
//! let m = flatten_then_write(&rope, Encoding::Utf8, Mode::Strict, &mut flattened).unwrap();
//! assert_eq!(direct[..n], flattened[..m], "the same bytes, by the copying route");
//! ```

use std::ops::ControlFlow;

use crate::encoding::{EncodeError, Encoding, Mode};
use crate::measure::fits;
use crate::rope::{CharRange, Latin1, Piece, Rope, Utf16};

/// A flat string, as V8 stores one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Flat {
    /// Every character is at most U+00FF: one byte each.
    OneByte(Vec<u8>),
    /// Some character is above U+00FF (or an unpaired surrogate): UTF-16.
    TwoByte(Vec<u16>),
}

/// Copies `rope` into one new flat string.
///
/// ```
/// use unflat::{flatten::{flatten, Flat}, Concat, Latin1};
/// let rope = Concat::new([&Latin1(b"caf\xe9"), &" ok"]);
/// assert_eq!(flatten(&rope), Flat::OneByte(b"caf\xe9 ok".to_vec()));
/// ```
pub fn flatten<R: Rope + ?Sized>(rope: &R) -> Flat {
    let shape = rope.shape();
    let capacity = shape.len();
    if shape.range <= CharRange::Latin1 || fits(rope, 0xFF) {
        let mut flat = Vec::with_capacity(capacity);
        let _ = rope.for_each_piece(&mut |p| {
            match p {
                Piece::OneByte(b) => flat.extend_from_slice(b),
                Piece::Utf8(s) => {
                    let at = flat.len();
                    flat.resize(at + s.len(), 0);
                    let n = encoding_rs::mem::convert_utf8_to_latin1_lossy(
                        s.as_bytes(),
                        &mut flat[at..],
                    );
                    flat.truncate(at + n);
                }
                Piece::TwoByte(u) => flat.extend(u.iter().map(|&u| u as u8)),
            }
            ControlFlow::Continue(())
        });
        Flat::OneByte(flat)
    } else {
        let mut flat = Vec::with_capacity(capacity);
        let _ = rope.for_each_piece(&mut |p| {
            let at = flat.len();
            match p {
                Piece::OneByte(b) => {
                    flat.resize(at + b.len(), 0);
                    encoding_rs::mem::convert_latin1_to_utf16(b, &mut flat[at..]);
                }
                Piece::Utf8(s) => {
                    flat.resize(at + s.len(), 0);
                    let n = encoding_rs::mem::convert_str_to_utf16(s, &mut flat[at..]);
                    flat.truncate(at + n);
                }
                Piece::TwoByte(u) => flat.extend_from_slice(u),
            }
            ControlFlow::Continue(())
        });
        Flat::TwoByte(flat)
    }
}

/// Flattens `rope`, then writes the flat string in `encoding` into `dst`:
/// the same result as [`crate::write()`], by the old, copying route.
pub fn flatten_then_write<R: Rope + ?Sized>(
    rope: &R,
    encoding: Encoding,
    mode: Mode,
    dst: &mut [u8],
) -> Result<usize, EncodeError> {
    match flatten(rope) {
        Flat::OneByte(flat) => crate::write(&Latin1(&flat), encoding, mode, dst),
        Flat::TwoByte(flat) => crate::write(&Utf16(&flat), encoding, mode, dst),
    }
}
