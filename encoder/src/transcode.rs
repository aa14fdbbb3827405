//! Path 3 and the resumable encoder: the one transcoding engine.
//!
//! Node flattens a two-byte string before writing it; here every piece is
//! transcoded where it lies, straight into the destination, by the kernel
//! for its kind and the target encoding ([`crate::kernel`]). What a rope
//! needs around the kernels lives here once: surrogate pairs split across
//! pieces ([`Joiner`]), and stopping between characters when the
//! destination is full.
//!
//! Both ways of writing run this engine. The one-shot path
//! ([`crate::write()`] on [`crate::EncodePath::TwoByte`]) runs it once into a
//! destination that holds the whole text ([`write`]); the resumable
//! [`crate::Encoder`] runs it once per call, from its position, into
//! whatever destination it is given. So the bytes are the same by
//! construction.

use std::cell::RefCell;
use std::ops::ControlFlow;

use crate::encoding::Encoding;
use crate::kernel;
use crate::measure::bound;
use crate::rope::{Piece, Rope, Shape};
use crate::surrogate::{Joined, Joiner};

/// Writes `rope` (of shape `s`) in `encoding` into `dst`, which holds at
/// least the encoded size ([`crate::size`]). Returns the bytes written.
///
/// # Panics
/// If `dst` is shorter than the encoded size.
pub(crate) fn write<R: Rope + ?Sized>(
    rope: &R,
    s: Shape,
    encoding: Encoding,
    dst: &mut [u8],
) -> usize {
    if s.utf8 == 0 && s.len() <= WHOLE_MAX {
        if let Some(written) = write_whole(rope, encoding, dst) {
            return written;
        }
    }
    let mut run = Run::new(encoding, dst);
    assert!(
        run.walk(rope, 0),
        "destination shorter than the encoded size"
    );
    run.out.written
}

/// One-byte and two-byte ropes of at most this many units are gathered
/// whole on the stack and converted by one kernel call, without the
/// engine's walk, the [`Joiner`] or the thread's [`Stage`]: for such a rope
/// their cost is the write's, and a rope of a few tiny pieces gathered
/// whole takes fewer instructions than staged or unstaged. 32 units are
/// 64 bytes of stack, cleared per write; below the 16 units from which
/// simdutf converts, one kernel call is what a flat string costs. The
/// threshold comes from `body/twobyte/pieces/direct/4` in the encoder
/// bench, counted by callgrind: docs/measurements.md, "Staged
/// transcoding".
const WHOLE_MAX: usize = 32;

/// [`write`] of a rope of one-byte and two-byte pieces, at most
/// [`WHOLE_MAX`] units: the rope gathered as UTF-16 (one-byte pieces
/// widened), then converted as the flat text it now is. A pair split
/// across pieces is whole in the gathered text, and a lone surrogate is
/// written as the kernels write it anywhere, so the bytes are the
/// engine's. `None`, having written nothing, when the pieces do not match
/// the rope's shape (a [`Rope::shape`] that undercounts, or UTF-8 text
/// where it counted none): the engine then writes the rope as it is.
fn write_whole<R: Rope + ?Sized>(rope: &R, encoding: Encoding, dst: &mut [u8]) -> Option<usize> {
    let mut units = [0u16; WHOLE_MAX];
    let mut len = 0;
    let fits = rope.for_each_piece(&mut |p| {
        let Some(to) = units.get_mut(len..len + p.len()) else {
            return ControlFlow::Break(());
        };
        match p {
            Piece::TwoByte(u) => kernel::copy_short(u, to),
            Piece::OneByte(b) => widen(b, to),
            Piece::Utf8("") => {}
            Piece::Utf8(_) => return ControlFlow::Break(()),
        }
        len += p.len();
        ControlFlow::Continue(())
    });
    if fits.is_break() {
        return None;
    }
    let (read, written) = convert_units(encoding, &units[..len], dst);
    assert_eq!(read, len, "destination shorter than the encoded size");
    Some(written)
}

/// One-byte text as UTF-16, unit for unit.
fn widen(b: &[u8], to: &mut [u16]) {
    for (d, &x) in to.iter_mut().zip(b) {
        *d = u16::from(x);
    }
}

/// The kernel for two-byte text into `encoding`.
fn convert_units(encoding: Encoding, src: &[u16], dst: &mut [u8]) -> (usize, usize) {
    match encoding {
        Encoding::Utf8 => kernel::convert_utf16_to_utf8(src, dst),
        Encoding::Utf16Le => kernel::convert_utf16_to_utf16le(src, dst),
        Encoding::Latin1 | Encoding::Ascii => kernel::convert_utf16_to_latin1_lossy(src, dst),
    }
}

/// One walk of the engine over a rope, from a position, into one
/// destination.
///
/// **Invariant:** `read` counts only units whose output is written. A high
/// surrogate held back by the [`Joiner`] is not counted until it is written
/// (with its low surrogate, or alone), so a walk that stops there resumes
/// *at* it, and the next walk sees the pair again, whole.
pub(crate) struct Run<'d> {
    out: Out<'d>,
    joiner: Joiner,
}

/// Pieces shorter than this many units are gathered in the [`Stage`]. The
/// `shapes` group of the encoder bench chose it, once simdutf converted
/// one-byte pieces to utf16le: pieces just below it, converted one by one,
/// ran behind flattening, and staged ran about level with it or ahead
/// (docs/measurements.md, "Staged transcoding"). Longer pieces are
/// converted where they lie: one kernel call on 512 units or more costs
/// little beside the conversion.
const STAGE_MIN: usize = 512;

/// Units the [`Stage`] holds: a kernel call per 2048 units costs little
/// beside converting them, and the stage (4 KiB of units or 2 KiB of
/// bytes in use at a time) stays in the first-level cache. A much smaller
/// stage left short two-byte pieces into UTF-8 further behind flattening:
/// docs/measurements.md, "Staged transcoding".
const STAGE_UNITS: usize = 2048;

/// Short pieces gathered so that one kernel call converts many of them: the
/// cost of a call is what a rope of many tiny pieces would otherwise pay per
/// piece — the case that made Node flatten before converting
/// (nodejs/node#6103). A bounded flat copy, made once per thread, that
/// holds one kind of text at a time as it is: two-byte pieces as UTF-16,
/// one-byte pieces as bytes (converted by the one-byte kernel, as the flat
/// copy of a one-byte rope would be), UTF-8 pieces as their bytes
/// (converted as one `&str`).
///
/// Staged units stand one for one for source units, in order, so the
/// [`Joiner`] sees staged two-byte text as one two-byte piece (and staged
/// bytes as one other piece), and the counts of what is read stay exact: a
/// stage converted only in part (the destination full) counts the units
/// converted, like any piece.
struct Stage {
    units: [u16; STAGE_UNITS],
    bytes: [u8; STAGE_UNITS],
    /// Which of the two holds the staged text.
    held: Held,
    len: usize,
    /// Units the stage takes before it is flushed: at most
    /// [`STAGE_UNITS`], and no more than what is left of the destination
    /// holds at worst, so that a flush nearly always fits whole (a high
    /// surrogate the [`Joiner`] holds back is written first, and may take
    /// the room of a few bytes; the flush then converts what fits, as any
    /// piece does, and the walk stops). Set when the first piece is staged;
    /// one comparison per piece after that.
    cap: usize,
}

/// The kind of text in the [`Stage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// Two-byte pieces, in `units`.
    Units,
    /// One-byte pieces, in `bytes`.
    Bytes,
    /// UTF-8 pieces, in `bytes`: whole pieces only, so what is staged is
    /// UTF-8 too.
    Utf8,
}

thread_local! {
    /// The thread's stage. Kept between walks so that no walk clears 6 KiB
    /// of stack for a rope of a few pieces (with a stage on the stack, such
    /// a rope took longer the larger the stage: docs/measurements.md,
    /// "Staged transcoding"); never allocated (a constant initialiser and
    /// no destructor).
    static STAGE: RefCell<Stage> = const {
        RefCell::new(Stage {
            units: [0; STAGE_UNITS],
            bytes: [0; STAGE_UNITS],
            held: Held::Units,
            len: 0,
            cap: 0,
        })
    };
}

impl Stage {
    /// Whether `p` is staged, into `encoding`: short pieces, unless they
    /// are copied as they are (one-byte pieces into latin1, UTF-8 pieces
    /// into UTF-8).
    fn takes(p: &Piece<'_>, encoding: Encoding) -> bool {
        match p {
            Piece::TwoByte(u) => u.len() < STAGE_MIN,
            Piece::OneByte(b) => b.len() < STAGE_MIN && encoding.one_byte_limit().is_none(),
            Piece::Utf8(s) => s.len() < STAGE_MIN && encoding != Encoding::Utf8,
        }
    }

    /// Stages `p`, which [`Stage::takes`], flushing first when the stage
    /// holds the other kind of text or has no room; converts it straight
    /// instead when not even an empty stage may take it (what is left of
    /// the destination is short), so a walk into a small destination visits
    /// no piece it cannot write.
    fn add(&mut self, joiner: &mut Joiner, out: &mut Out<'_>, p: Piece<'_>) -> ControlFlow<()> {
        let held = match p {
            Piece::OneByte(_) => Held::Bytes,
            Piece::Utf8(_) => Held::Utf8,
            Piece::TwoByte(_) => Held::Units,
        };
        if self.len > 0 && (held != self.held || self.len + p.len() > self.cap) {
            self.flush(joiner, out)?;
        }
        if self.len == 0 {
            // What one unit of this kind takes at worst in the target.
            let one = match held {
                Held::Bytes => Shape::of_piece(Piece::OneByte(b"\xff")),
                Held::Utf8 => Shape::utf8(1, false),
                Held::Units => Shape::of_piece(Piece::TwoByte(&[0xFFFF])),
            };
            self.held = held;
            self.cap = STAGE_UNITS.min(out.room() / bound(one, out.encoding));
        }
        if self.push(&p) {
            return ControlFlow::Continue(());
        }
        out.piece(joiner, p)
    }

    /// Appends `p` when it is short, of the kind staged, and within the
    /// cap; false (and nothing staged) otherwise. The kind and the cap are
    /// [`Stage::add`]'s to set, when it stages into an empty stage.
    #[inline(always)]
    fn push(&mut self, p: &Piece<'_>) -> bool {
        let end = self.len + p.len();
        if end > self.cap {
            return false;
        }
        match (*p, self.held) {
            (Piece::TwoByte(u), Held::Units) if u.len() < STAGE_MIN => {
                kernel::copy_short(u, &mut self.units[self.len..end]);
            }
            (Piece::OneByte(b), Held::Bytes) if b.len() < STAGE_MIN => {
                kernel::copy_short(b, &mut self.bytes[self.len..end]);
            }
            (Piece::Utf8(s), Held::Utf8) if s.len() < STAGE_MIN => {
                kernel::copy_short(s.as_bytes(), &mut self.bytes[self.len..end]);
            }
            _ => return false,
        }
        self.len = end;
        true
    }

    /// Converts what is staged, through the joiner, and empties the stage.
    fn flush(&mut self, joiner: &mut Joiner, out: &mut Out<'_>) -> ControlFlow<()> {
        if self.len == 0 {
            return ControlFlow::Continue(());
        }
        self.convert(joiner, out)
    }

    /// [`Stage::flush`] of a stage that holds something; not inlined, to
    /// keep the walk's frame small.
    #[inline(never)]
    fn convert(&mut self, joiner: &mut Joiner, out: &mut Out<'_>) -> ControlFlow<()> {
        let len = std::mem::take(&mut self.len);
        match self.held {
            Held::Units => joiner.two_byte(&self.units[..len], &mut |j| out.joined(j)),
            Held::Bytes => {
                joiner.other(len, &mut |j| out.joined(j))?;
                out.one_byte(&self.bytes[..len])
            }
            Held::Utf8 => {
                joiner.other(len, &mut |j| out.joined(j))?;
                out.utf8(kernel::staged_str(&self.bytes[..len]))
            }
        }
    }
}

/// The destination and the counts of a [`Run`].
struct Out<'d> {
    encoding: Encoding,
    dst: &'d mut [u8],
    written: usize,
    read: usize,
}

impl<'d> Run<'d> {
    /// A walk into `dst`, nothing written yet.
    pub(crate) fn new(encoding: Encoding, dst: &'d mut [u8]) -> Run<'d> {
        Run {
            out: Out {
                encoding,
                dst,
                written: 0,
                read: 0,
            },
            joiner: Joiner::default(),
        }
    }

    /// Source units read: those whose output is written.
    pub(crate) fn read(&self) -> usize {
        self.out.read
    }

    /// Bytes written at the start of the destination.
    pub(crate) fn written(&self) -> usize {
        self.out.written
    }

    /// Writes `rope` from position `from` (see [`Rope::for_each_piece_from`])
    /// until it ends or the next character does not fit. True when the
    /// whole rest of the rope is written.
    pub(crate) fn walk<R: Rope + ?Sized>(&mut self, rope: &R, from: usize) -> bool {
        STAGE.with(|stage| match stage.try_borrow_mut() {
            Ok(mut stage) => {
                // Empty: every walk flushes it, and a walk cut short (the
                // destination full) drops what it staged, which `read`
                // never counted.
                stage.len = 0;
                self.walk_with(rope, from, Some(&mut stage))
            }
            // A walk inside a walk on this thread (a rope whose pieces are
            // made by writing another rope): the inner one goes unstaged.
            Err(_) => self.walk_with(rope, from, None),
        })
    }

    fn walk_with<R: Rope + ?Sized>(
        &mut self,
        rope: &R,
        from: usize,
        mut stage: Option<&mut Stage>,
    ) -> bool {
        let Run { out, joiner } = self;
        // One short piece alone (a flat string, the last piece) is converted
        // as it is; staging starts with the second short piece in a row.
        let mut after_short = false;
        let walked = rope.for_each_piece_from(from, &mut |p| {
            // The common case of a rope of many short pieces, kept small
            // enough to need no registers saved: one more piece of the kind
            // staged. Everything else is [`visit`]'s, out of line.
            if let Some(st) = stage.as_deref_mut() {
                if st.len > 0 && st.push(&p) {
                    return ControlFlow::Continue(());
                }
            }
            visit(stage.as_deref_mut(), joiner, out, &mut after_short, p)
        });
        walked.is_continue()
            && stage
                .map_or(ControlFlow::Continue(()), |st| st.flush(joiner, out))
                .is_continue()
            && joiner.finish(&mut |j| out.joined(j)).is_continue()
    }
}

/// One piece of a walk that [`Stage::push`] did not take: staged when it
/// is short and follows a short piece (or the stage holds some), else
/// converted straight after what is staged.
#[inline(never)]
fn visit(
    stage: Option<&mut Stage>,
    joiner: &mut Joiner,
    out: &mut Out<'_>,
    after_short: &mut bool,
    p: Piece<'_>,
) -> ControlFlow<()> {
    let short = !p.is_empty() && Stage::takes(&p, out.encoding);
    match stage {
        Some(st) if short && (*after_short || st.len > 0) => st.add(joiner, out, p),
        st => {
            *after_short = short;
            if let Some(st) = st {
                st.flush(joiner, out)?;
            }
            out.piece(joiner, p)
        }
    }
}

impl Out<'_> {
    /// Converts a piece that is not staged, straight from its memory.
    fn piece(&mut self, joiner: &mut Joiner, p: Piece<'_>) -> ControlFlow<()> {
        match p {
            Piece::TwoByte(u) => joiner.two_byte(u, &mut |j| self.joined(j)),
            Piece::OneByte(b) => {
                joiner.other(b.len(), &mut |j| self.joined(j))?;
                self.one_byte(b)
            }
            Piece::Utf8(s) => {
                joiner.other(s.len(), &mut |j| self.joined(j))?;
                self.utf8(s)
            }
        }
    }

    fn room(&self) -> usize {
        self.dst.len() - self.written
    }

    /// Runs a kernel over a piece of `len` units: `step(at, dst)` converts
    /// from unit `at` into `dst`. Calls it until the piece is all read, and
    /// stops the walk when the kernel can take no more. (A kernel that
    /// stops short of what fits is called again on the rest, so no kernel
    /// has to fill the destination to its last byte in one call.)
    fn convert(
        &mut self,
        len: usize,
        mut step: impl FnMut(usize, &mut [u8]) -> (usize, usize),
    ) -> ControlFlow<()> {
        let mut at = 0;
        while at < len {
            let (r, w) = step(at, &mut self.dst[self.written..]);
            if r == 0 {
                return ControlFlow::Break(());
            }
            at += r;
            self.read += r;
            self.written += w;
        }
        ControlFlow::Continue(())
    }

    // The kernel is chosen by a `match` around each call, not through a
    // function pointer: direct calls, inlined where small, keep the cost per
    // piece low for ropes of many short pieces.

    fn one_byte(&mut self, b: &[u8]) -> ControlFlow<()> {
        match self.encoding {
            Encoding::Utf8 => self.convert(b.len(), |at, dst| {
                kernel::convert_latin1_to_utf8(&b[at..], dst)
            }),
            Encoding::Utf16Le => self.convert(b.len(), |at, dst| {
                kernel::convert_latin1_to_utf16le(&b[at..], dst)
            }),
            Encoding::Latin1 | Encoding::Ascii => {
                self.convert(b.len(), |at, dst| kernel::copy_bytes(&b[at..], dst))
            }
        }
    }

    fn utf8(&mut self, s: &str) -> ControlFlow<()> {
        match self.encoding {
            Encoding::Utf8 => self.convert(s.len(), |at, dst| kernel::copy_str(&s[at..], dst)),
            Encoding::Utf16Le => self.convert(s.len(), |at, dst| {
                kernel::convert_str_to_utf16le(&s[at..], dst)
            }),
            Encoding::Latin1 | Encoding::Ascii => self.convert(s.len(), |at, dst| {
                kernel::convert_str_to_latin1_lossy(&s[at..], dst)
            }),
        }
    }

    fn units(&mut self, u: &[u16]) -> ControlFlow<()> {
        let encoding = self.encoding;
        self.convert(u.len(), |at, dst| convert_units(encoding, &u[at..], dst))
    }

    /// What the [`Joiner`] hands on: two-byte text. A pair joined across
    /// pieces or a lone high surrogate goes through the same kernel as any
    /// two-byte text: the kernels never part a pair, and write an unpaired
    /// surrogate as U+FFFD in UTF-8 and as its low byte in latin1.
    fn joined(&mut self, j: Joined<'_>) -> ControlFlow<()> {
        match j {
            Joined::Units(u) => self.units(u),
            Joined::Pair(high, low) => self.units(&[high, low]),
            Joined::Lone(high) => self.units(&[high]),
        }
    }
}

#[cfg(test)]
mod tests;
