use super::*;
use crate::flatten::flatten_then_write;
use crate::Mode;

/// Short two-byte and one-byte pieces, every length below
/// [`STAGE_MIN`] and a few at or above it, with surrogate pairs split
/// across pieces: several stagefuls, flushed at every possible offset.
fn short_pieces() -> (Vec<Vec<u16>>, Vec<Vec<u8>>) {
    let text: Vec<u16> = "a\u{e9}\u{20AC}\u{1F600}".encode_utf16().collect();
    let mut at = 0;
    let mut take = |n: usize| -> Vec<u16> {
        (0..n)
            .map(|_| {
                at += 1;
                text[at % text.len()]
            })
            .collect()
    };
    let lens = (1..STAGE_MIN + 3).chain([1, 1, 2, 3, 5, 8, 13]).cycle();
    let wide: Vec<Vec<u16>> = lens.clone().take(STAGE_MIN + 40).map(&mut take).collect();
    let narrow = lens
        .take(STAGE_MIN)
        .map(|n| (0..n).map(|i| [b'a', 0xE9][i % 2]).collect())
        .collect();
    (wide, narrow)
}

fn direct_and_flat(rope: &dyn Rope, encoding: Encoding) -> (Vec<u8>, Vec<u8>) {
    let mut direct = vec![0; crate::storage_size(rope, encoding)];
    let n = crate::write(rope, encoding, Mode::Lossy, &mut direct).unwrap();
    direct.truncate(n);
    let mut flat = vec![0; crate::storage_size(rope, encoding)];
    let n = flatten_then_write(rope, encoding, Mode::Lossy, &mut flat).unwrap();
    flat.truncate(n);
    (direct, flat)
}

#[test]
fn staged_pieces_are_written_as_flattened() {
    let (wide, narrow) = short_pieces();
    let mut pieces: Vec<Piece<'_>> = Vec::new();
    for (i, u) in wide.iter().enumerate() {
        pieces.push(Piece::TwoByte(u));
        if let Some(b) = narrow.get(i).filter(|_| i % 3 == 0) {
            pieces.push(Piece::OneByte(b));
        }
    }
    // UTF-8 pieces in runs (one- to four-byte characters, several
    // stagefuls), with a one-byte piece now and then.
    let texts: Vec<String> = wide.iter().map(|u| String::from_utf16_lossy(u)).collect();
    let mut utf8: Vec<Piece<'_>> = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        utf8.push(Piece::Utf8(t));
        if let Some(b) = narrow.get(i).filter(|_| i % 7 == 0) {
            utf8.push(Piece::OneByte(b));
        }
    }
    for rope in [&pieces, &utf8] {
        let total: usize = rope.iter().map(Piece::len).sum();
        assert!(total > 3 * STAGE_UNITS, "{total} units");
        for encoding in Encoding::ALL {
            let (direct, flat) = direct_and_flat(&rope.as_slice(), encoding);
            assert_eq!(direct, flat, "{encoding}");
        }
    }
}

/// Ropes short enough to be converted whole ([`WHOLE_MAX`]): pairs split
/// across pieces, lone surrogates at either end and between one-byte
/// pieces, empty pieces of every kind, and the longest such rope.
#[test]
fn whole_ropes_are_written_as_flattened() {
    let (high, low) = (&[0xD83D_u16][..], &[0xDE00_u16][..]);
    let ropes: Vec<Vec<Piece<'_>>> = vec![
        vec![Piece::TwoByte(high), Piece::TwoByte(low)],
        vec![Piece::TwoByte(high), Piece::Utf8(""), Piece::TwoByte(low)],
        vec![
            Piece::TwoByte(high),
            Piece::OneByte(b"\xe9"),
            Piece::TwoByte(low),
        ],
        vec![
            Piece::TwoByte(low),
            Piece::OneByte(b"a"),
            Piece::TwoByte(high),
        ],
        vec![
            Piece::OneByte(b""),
            Piece::TwoByte(&[0x20AC; WHOLE_MAX - 1]),
            Piece::OneByte(b"\xff"),
        ],
    ];
    for pieces in &ropes {
        assert!(pieces.shape().len() <= WHOLE_MAX);
        for encoding in Encoding::ALL {
            let (direct, flat) = direct_and_flat(&pieces.as_slice(), encoding);
            assert_eq!(direct, flat, "{encoding} {pieces:?}");
        }
    }
}

/// A rope whose pieces are made, while it is walked, by writing another
/// rope of short pieces on the same thread.
struct Nested<'a>(&'a [Piece<'a>]);

impl Rope for Nested<'_> {
    fn for_each_piece<'a>(
        &'a self,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.0.iter().try_for_each(|&p| {
            let inner = [p, p, p];
            let mut scratch = vec![0; crate::storage_size(&inner[..], Encoding::Utf8)];
            let n = crate::write(&inner[..], Encoding::Utf8, Mode::Lossy, &mut scratch);
            let Piece::TwoByte(u) = p else {
                unreachable!("two-byte pieces only")
            };
            let expected = String::from_utf16_lossy(&u.repeat(3));
            assert_eq!(&scratch[..n.unwrap()], expected.as_bytes());
            visit(p)
        })
    }

    fn shape(&self) -> Shape {
        self.0.shape()
    }
}

#[test]
fn a_walk_inside_a_walk_is_written_unstaged() {
    let (wide, _) = short_pieces();
    let pieces: Vec<Piece<'_>> = wide.iter().map(|u| Piece::TwoByte(u)).collect();
    for encoding in Encoding::ALL {
        let (direct, flat) = direct_and_flat(&Nested(&pieces), encoding);
        assert_eq!(direct, flat, "{encoding}");
    }
}
