//! Resumable encoding: the [`Encoder`] (its documentation says how it
//! works and what it guarantees). Each call is one walk of the transcoding
//! engine ([`crate::transcode`]) from the encoder's position.

use crate::encoding::{EncodeError, Encoding, Mode};
use crate::measure::{check_encodable, Plan};
use crate::rope::Rope;
use crate::transcode::Run;

/// What one [`Encoder::encode`] call did.
///
/// ```
/// use unflat::{Encoder, Encoding, Mode, Progress, Utf16};
/// let rope = Utf16(&[0x61, 0x20AC, 0x62]); // "a€b"
/// let mut encoder = Encoder::new(Encoding::Utf8, Mode::Strict);
/// let mut frame = [0u8; 3];
/// let step = encoder.encode(&rope, &mut frame).unwrap();
/// // "a" fits, "€" (3 bytes) does not: no character is split.
/// assert_eq!((step.read, step.written, step.finished), (1, 1, false));
/// let step = encoder.encode(&rope, &mut frame).unwrap();
/// assert_eq!((step.read, step.written, &frame[..3]), (1, 3, "€".as_bytes()));
/// let step: Progress = encoder.encode(&rope, &mut frame).unwrap();
/// assert!(step.finished);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// Source code units read, in each piece's own representation (see
    /// [`Rope::for_each_piece_from`]): the encoder's position moved by this.
    pub read: usize,
    /// Bytes written at the start of `dst`.
    pub written: usize,
    /// True when the whole rope is written: further calls write nothing.
    pub finished: bool,
}

/// Encodes one rope in steps, into destinations of any size, picking up
/// where the last call stopped.
///
/// The one-shot entry points ([`crate::write()`]) need a destination that
/// holds the whole encoded rope. An [`Encoder`] fills whatever it is given —
/// a 16 KiB frame, the free space of a socket buffer — and remembers its
/// position, in the manner of encoding_rs's `_partial` converters: each
/// call runs the same engine and kernels as [`crate::write()`] and reports
/// the source units it read, the bytes it wrote, and whether the rope is
/// done. Memory is bounded by the destination, not by the rope.
///
/// Guarantees, call after call:
///
/// - **No character is split.** A call stops before a character whose
///   encoded form does not fit in what is left of `dst`, so every call's
///   output is a whole number of characters. A surrogate pair — also one split
///   across two two-byte pieces — is one character, in every encoding. A
///   destination of at least [`Encoder::MIN_DST`] bytes always makes
///   progress; a smaller one (an empty one included) may take nothing.
/// - **The bytes are the one-shot bytes.** Concatenated, the output of all
///   calls equals what [`crate::write()`] writes, byte for byte.
/// - **Strict mode refuses before the first byte.** The first call checks
///   the whole rope and returns [`EncodeError::Unencodable`] having written
///   nothing, so a stream never stops half-sent because of an unencodable
///   character.
/// - **No walk from the start.** Each call finds its position with
///   [`Rope::for_each_piece_from`] and visits only the pieces it writes from:
///   a ropey rope finds a byte index in O(log n); a slice, vector or
///   [`crate::Concat`] skips whole parts by their [`crate::Shape`] (lengths,
///   not text) and hands the rest to the part that holds the position. So
///   the text is read once over all calls, however small the destinations.
///
/// Pass the same rope (the same text, walked into the same pieces) to every
/// call: the encoder keeps only a position in it.
///
/// ```
/// use unflat::{write, Concat, Encoder, Encoding, Latin1, Mode, Utf16};
/// let rope = Concat::new([&"<p>", &Latin1(b"cr\xe8me"), &Utf16(&[0x20, 0xD83D, 0xDE00])]);
/// let mut encoder = Encoder::new(Encoding::Utf8, Mode::Strict);
/// let mut out = Vec::new();
/// let mut frame = [0u8; 4]; // any size from Encoder::MIN_DST up
/// loop {
///     let step = encoder.encode(&rope, &mut frame).unwrap();
///     out.extend_from_slice(&frame[..step.written]);
///     if step.finished {
///         break;
///     }
/// }
/// assert_eq!(out, "<p>crème 😀".as_bytes());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoder {
    encoding: Encoding,
    mode: Mode,
    position: usize,
    checked: bool,
    finished: bool,
}

impl Encoding {
    /// A resumable [`Encoder`] into this encoding (as encoding_rs's
    /// `Encoding::new_encoder`).
    pub fn new_encoder(self, mode: Mode) -> Encoder {
        Encoder::new(self, mode)
    }
}

impl Encoder {
    /// The smallest destination that always makes progress: the longest
    /// encoded character (a surrogate pair in UTF-8 or UTF-16LE).
    pub const MIN_DST: usize = 4;

    /// An encoder at the start of a rope.
    pub fn new(encoding: Encoding, mode: Mode) -> Encoder {
        Encoder {
            encoding,
            mode,
            position: 0,
            checked: false,
            finished: false,
        }
    }

    /// An encoder at the start of the rope `plan` was made for, in the
    /// plan's encoding and mode. The plan's strict check stands for the
    /// first call's, which is skipped (a caller that plans to learn the size
    /// does not pay for the check twice).
    pub fn from_plan(plan: &Plan) -> Encoder {
        Encoder {
            checked: true,
            ..Encoder::new(plan.encoding(), plan.mode())
        }
    }

    /// The target encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Source units read so far: the position the next call starts at.
    pub fn position(&self) -> usize {
        self.position
    }

    /// True once the whole rope is written.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Writes as much of `rope`, from the encoder's position on, as fits in
    /// `dst` without splitting a character, and moves the position past it.
    ///
    /// On the first call in [`Mode::Strict`], a rope with a character the
    /// encoding cannot represent is refused with
    /// [`EncodeError::Unencodable`], nothing written and the position left
    /// at 0 (and refused again on a later call). No other error is possible:
    /// a destination too small for the next character returns the
    /// [`Progress`] made so far (possibly none), not an error.
    pub fn encode<R: Rope + ?Sized>(
        &mut self,
        rope: &R,
        dst: &mut [u8],
    ) -> Result<Progress, EncodeError> {
        if self.finished {
            return Ok(Progress {
                read: 0,
                written: 0,
                finished: true,
            });
        }
        if !self.checked {
            check_encodable(rope, rope.shape(), self.encoding, self.mode)?;
            self.checked = true;
        }
        let mut run = Run::new(self.encoding, dst);
        let finished = run.walk(rope, self.position);
        self.position += run.read();
        self.finished = finished;
        Ok(Progress {
            read: run.read(),
            written: run.written(),
            finished,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::{Latin1, Piece, Utf16};
    use std::ops::ControlFlow;

    /// Encodes `rope` in steps of `frame` bytes; returns the output and the
    /// number of calls.
    fn in_frames(rope: &dyn Rope, encoding: Encoding, frame: usize) -> (Vec<u8>, usize) {
        let mut enc = Encoder::new(encoding, Mode::Lossy);
        let mut out = Vec::new();
        let mut calls = 0;
        loop {
            let mut dst = vec![0; frame];
            let step = enc.encode(rope, &mut dst).unwrap();
            calls += 1;
            out.extend_from_slice(&dst[..step.written]);
            if step.finished {
                return (out, calls);
            }
            assert!(step.written > 0, "no progress into {frame} bytes");
        }
    }

    fn one_shot(rope: &dyn Rope, encoding: Encoding) -> Vec<u8> {
        let mut dst = vec![0; crate::storage_size(rope, encoding)];
        let n = crate::write(rope, encoding, Mode::Lossy, &mut dst).unwrap();
        dst.truncate(n);
        dst
    }

    #[test]
    fn a_pair_split_across_pieces_is_never_split_across_calls() {
        let parts: [&dyn Rope; 4] = [
            &Utf16(&[0x61, 0xD83D]),
            &Latin1(b""),
            &Utf16(&[0xDE00, 0xD800]),
            &"z",
        ];
        for encoding in Encoding::ALL {
            let whole = one_shot(&parts, encoding);
            for frame in Encoder::MIN_DST..12 {
                let (out, _) = in_frames(&parts, encoding, frame);
                assert_eq!(out, whole, "{encoding}, frames of {frame}");
            }
        }
        // Frames of 4 in UTF-8: "a", then the pair (4 bytes) whole, then
        // U+FFFD for the lone high and "z".
        let mut enc = Encoder::new(Encoding::Utf8, Mode::Strict);
        let mut dst = [0; 4];
        let steps: Vec<(usize, usize, bool)> = (0..3)
            .map(|_| {
                let p = enc.encode(&parts, &mut dst).unwrap();
                (p.read, p.written, p.finished)
            })
            .collect();
        assert_eq!(steps, [(1, 1, false), (2, 4, false), (2, 4, true)]);
    }

    #[test]
    fn a_destination_too_small_for_the_next_character_takes_nothing() {
        let mut enc = Encoder::new(Encoding::Utf8, Mode::Strict);
        let p = enc.encode(&"€", &mut [0; 2]).unwrap();
        assert_eq!((p.read, p.written, p.finished), (0, 0, false));
        let p = enc.encode(&"€", &mut []).unwrap();
        assert_eq!((p.read, p.written, p.finished), (0, 0, false));
        let mut dst = [0; 3];
        let p = enc.encode(&"€", &mut dst).unwrap();
        assert_eq!((p.read, p.written, p.finished), (3, 3, true));
        // An empty rope is finished at once, even into nothing.
        let p = Encoder::new(Encoding::Utf16Le, Mode::Strict)
            .encode(&"", &mut [])
            .unwrap();
        assert!(p.finished);
    }

    #[test]
    fn strict_refuses_before_the_first_byte() {
        let rope = ["fine", "\u{20AC}"];
        let mut enc = Encoder::new(Encoding::Latin1, Mode::Strict);
        let mut dst = [0xA5; 8];
        let err = enc.encode(&rope, &mut dst).unwrap_err();
        assert_eq!(
            err,
            EncodeError::Unencodable {
                code_point: 0x20AC,
                index: 4,
                encoding: Encoding::Latin1
            }
        );
        assert_eq!(dst, [0xA5; 8]);
        assert_eq!(enc.position(), 0);
        assert!(enc.encode(&rope, &mut dst).is_err(), "refused again");
    }

    /// Counts the pieces a walk hands out, delegating the seek.
    struct Counted<R>(R, std::cell::Cell<usize>);

    impl<R: Rope> Rope for Counted<R> {
        fn for_each_piece<'a>(
            &'a self,
            visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
        ) -> ControlFlow<()> {
            self.for_each_piece_from(0, visit)
        }

        fn for_each_piece_from<'a>(
            &'a self,
            start: usize,
            visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
        ) -> ControlFlow<()> {
            self.0.for_each_piece_from(start, &mut |p| {
                self.1.set(self.1.get() + 1);
                visit(p)
            })
        }
    }

    #[test]
    fn resuming_does_not_walk_the_rope_from_its_start() {
        let text = "0123456789abcdef".repeat(20_000);
        let ropey = Counted(ropey::Rope::from_str(&text), Default::default());
        let pieces: Vec<Latin1<&[u8]>> = text.as_bytes().chunks(100).map(Latin1).collect();
        let pieces = Counted(pieces, Default::default());
        for (rope, visits, parts) in [
            (&ropey as &dyn Rope, &ropey.1, ropey.0.chunks().count()),
            (&pieces, &pieces.1, pieces.0.len()),
        ] {
            let (out, calls) = in_frames(rope, Encoding::Utf8, 64);
            assert_eq!(out, text.as_bytes());
            assert!(calls >= text.len() / 64 && parts >= 200);
            // Each call visits the pieces it writes from, the last of them
            // partly; one walk from the start per call would instead visit
            // about calls × parts / 2 (here over 10⁶).
            assert!(
                visits.get() <= 2 * calls + parts,
                "{} visits for {calls} calls over {parts} parts",
                visits.get()
            );
        }
    }

    #[test]
    fn a_large_ropey_rope_in_small_frames() {
        let text = "ropey \u{e9}\u{20AC}\u{1F600} ".repeat(3000);
        let rope = ropey::Rope::from_str(&text);
        for encoding in Encoding::ALL {
            let (out, calls) = in_frames(&rope, encoding, 64);
            assert_eq!(out, one_shot(&rope, encoding), "{encoding}");
            assert!(calls >= out.len() / 64);
        }
    }
}
