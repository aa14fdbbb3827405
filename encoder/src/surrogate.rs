//! Joining surrogate pairs that a rope splits across two pieces.
//!
//! A rope's text is a sequence of UTF-16 code units, so a high surrogate that
//! ends one two-byte piece and a low surrogate that starts the next one (with
//! only empty pieces between them) are one character. Every pass that treats
//! characters rather than code units — measuring and writing UTF-8, locating
//! an unencodable character — walks two-byte pieces through a [`Joiner`].

use std::ops::ControlFlow;

/// True for U+D800..=U+DBFF.
pub(crate) fn is_high(u: u16) -> bool {
    (0xD800..0xDC00).contains(&u)
}

/// True for U+DC00..=U+DFFF.
pub(crate) fn is_low(u: u16) -> bool {
    (0xDC00..0xE000).contains(&u)
}

/// The code point of a high and a low surrogate.
pub(crate) fn pair_code_point(high: u16, low: u16) -> u32 {
    0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(low) - 0xDC00)
}

/// What a [`Joiner`] hands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Joined<'a> {
    /// A surrogate pair that was split across pieces.
    Pair(u16, u16),
    /// A high surrogate held back from the end of a piece that turned out to
    /// be unpaired.
    Lone(u16),
    /// Code units that end without a dangling high surrogate; pairs inside are
    /// whole, unpaired surrogates inside are really unpaired.
    Units(&'a [u16]),
}

/// Carries a high surrogate from the end of one two-byte piece to the next.
///
/// Every pass that hands on what a joiner joins can stop early: `emit`
/// returns [`ControlFlow::Break`] to stop, and the joiner returns it at once
/// (its state is then of no further use: a stopped pass starts a new
/// joiner when it resumes).
#[derive(Debug, Default)]
pub(crate) struct Joiner {
    pending: Option<u16>,
}

impl Joiner {
    /// Feeds a two-byte piece.
    pub(crate) fn two_byte<'a, B>(
        &mut self,
        mut units: &'a [u16],
        emit: &mut impl FnMut(Joined<'a>) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        let Some(&first) = units.first() else {
            return ControlFlow::Continue(()); // an empty piece separates nothing
        };
        if let Some(high) = self.pending.take() {
            if is_low(first) {
                emit(Joined::Pair(high, first))?;
                units = &units[1..];
            } else {
                emit(Joined::Lone(high))?;
            }
        }
        if let Some((&last, rest)) = units.split_last() {
            if is_high(last) {
                self.pending = Some(last);
                units = rest;
            }
        }
        if units.is_empty() {
            return ControlFlow::Continue(());
        }
        emit(Joined::Units(units))
    }

    /// Feeds a one-byte or UTF-8 piece of `len` code units: a non-empty one
    /// ends any pending pair.
    pub(crate) fn other<B>(
        &mut self,
        len: usize,
        emit: &mut impl FnMut(Joined<'_>) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        if len == 0 {
            return ControlFlow::Continue(());
        }
        self.finish(emit)
    }

    /// Ends the rope: a pending high surrogate is unpaired.
    pub(crate) fn finish<B>(
        &mut self,
        emit: &mut impl FnMut(Joined<'_>) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        match self.pending.take() {
            Some(high) => emit(Joined::Lone(high)),
            None => ControlFlow::Continue(()),
        }
    }
}

/// Exact UTF-8 length of code units that [`Joiner`] produced as
/// [`Joined::Units`]: unpaired surrogates count 3 bytes (U+FFFD).
///
/// Counted without branches so that it vectorises: every unit counts 1, 2
/// or 3 bytes by value (a surrogate counts 3), and each high surrogate
/// directly followed by a low one takes 2 back, a pair being 4 bytes.
pub(crate) fn utf8_len(units: &[u16]) -> usize {
    // u16 accumulators (8 lanes per SSE2 register): at most 3 per unit, so a
    // chunk of 16384 units cannot overflow one.
    const CHUNK: usize = 16384;
    let by_value: usize = units
        .chunks(CHUNK)
        .map(|c| {
            usize::from(c.iter().fold(0u16, |n, &u| {
                n + 1 + u16::from(u >= 0x80) + u16::from(u >= 0x800)
            }))
        })
        .sum();
    let pairs: usize = (0..units.len().saturating_sub(1))
        .step_by(CHUNK)
        .map(|start| {
            let end = (start + CHUNK).min(units.len() - 1);
            let (this, next) = (&units[start..end], &units[start + 1..=end]);
            usize::from(this.iter().zip(next).fold(0u16, |n, (&h, &l)| {
                n + u16::from(((h & 0xFC00) == 0xD800) & ((l & 0xFC00) == 0xDC00))
            }))
        })
        .sum();
    by_value - 2 * pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pieces: &[&[u16]]) -> Vec<String> {
        let mut j = Joiner::default();
        let mut out = Vec::new();
        let mut emit = |e: Joined<'_>| {
            out.push(format!("{e:?}"));
            ControlFlow::<()>::Continue(())
        };
        for p in pieces {
            let _ = j.two_byte(p, &mut emit);
        }
        let _ = j.finish(&mut emit);
        out
    }

    #[test]
    fn pair_split_across_pieces_is_joined_even_through_empty_pieces() {
        assert_eq!(
            run(&[&[0x61, 0xD83D], &[], &[0xDE00, 0x62]]),
            ["Units([97])", "Pair(55357, 56832)", "Units([98])"]
        );
    }

    #[test]
    fn dangling_high_surrogates_are_lone() {
        assert_eq!(run(&[&[0xD800], &[0xD801]]), ["Lone(55296)", "Lone(55297)"]);
        assert_eq!(run(&[&[0xD800], &[0x41]]), ["Lone(55296)", "Units([65])"]);
    }

    #[test]
    fn utf8_len_counts_replacements_and_pairs() {
        assert_eq!(
            utf8_len(&[0x41, 0xE9, 0x20AC, 0xD83D, 0xDE00, 0xDC00]),
            1 + 2 + 3 + 4 + 3
        );
    }
}
