//! The encoder against the flatten reference and against std, on arbitrary
//! ropes: random text of every kind, split at random points into pieces of
//! every kind that can hold each part, with empty pieces between. The
//! resumable encoder against the one-shot one, on the same ropes, into
//! destinations of random sizes.

use proptest::prelude::*;
use unflat::flatten::flatten_then_write;
use unflat::{
    plan, size, storage_size, write, write_buf, write_planned, EncodeError, EncodePath, Encoder,
    Encoding, Latin1, Mode, Piece, Rope, Utf16,
};

/// One piece of a generated rope, owning its text.
#[derive(Clone, Debug)]
enum Owned {
    OneByte(Vec<u8>),
    Utf8(String),
    TwoByte(Vec<u16>),
}

impl Owned {
    fn piece(&self) -> Piece<'_> {
        match self {
            Owned::OneByte(b) => Piece::OneByte(b),
            Owned::Utf8(s) => Piece::Utf8(s),
            Owned::TwoByte(u) => Piece::TwoByte(u),
        }
    }
}

/// A small deterministic generator, so that ropes of 200 000 characters cost
/// proptest one seed rather than 200 000 shrinkable values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The characters that sit on the encoder's edges, as UTF-16.
const EDGES: &[&[u16]] = &[
    &[0x61],
    &[0x7F],
    &[0x80],
    &[0xE9],
    &[0xFF],
    &[0x100],
    &[0x20AC],
    &[0xD83D, 0xDE00], // 😀, a surrogate pair
    &[0xD800],         // lone high surrogate
    &[0xDFFF],         // lone low surrogate
    &[0xFFFD],
];

/// Logical text (JavaScript-style UTF-16) of `len` units drawn from `palette`
/// (a bitmask over the edge characters) and, sometimes, any code unit.
fn text(rng: &mut Rng, len: usize, palette: u64, ascii_run: bool) -> Vec<u16> {
    let mut out = Vec::with_capacity(len + 1);
    while out.len() < len {
        if ascii_run && rng.below(4) != 0 {
            out.push(0x61 + rng.below(26) as u16);
            continue;
        }
        let pick = rng.below(EDGES.len() as u64 + 1) as usize;
        if pick == EDGES.len() {
            out.push(rng.next() as u16);
        } else if palette & (1 << pick) != 0 {
            out.extend_from_slice(EDGES[pick]);
        } else {
            out.push(0x62);
        }
    }
    out
}

/// Splits `units` into pieces of random kinds, each a kind that can hold it,
/// with empty pieces sprinkled in.
fn split(rng: &mut Rng, units: &[u16], max_pieces: u64) -> Vec<Owned> {
    let mut cuts: Vec<usize> = (0..rng.below(max_pieces))
        .map(|_| rng.below(units.len() as u64 + 1) as usize)
        .collect();
    cuts.push(0);
    cuts.push(units.len());
    cuts.sort_unstable();
    let mut pieces = Vec::new();
    for w in cuts.windows(2) {
        let part = &units[w[0]..w[1]];
        if rng.below(8) == 0 {
            pieces.push(match rng.below(3) {
                0 => Owned::OneByte(Vec::new()),
                1 => Owned::Utf8(String::new()),
                _ => Owned::TwoByte(Vec::new()),
            });
        }
        let mut kinds = vec![2];
        if part.iter().all(|&u| u <= 0xFF) {
            kinds.push(0);
        }
        if String::from_utf16(part).is_ok() {
            kinds.push(1);
        }
        pieces.push(match kinds[rng.below(kinds.len() as u64) as usize] {
            0 => Owned::OneByte(part.iter().map(|&u| u as u8).collect()),
            1 => Owned::Utf8(String::from_utf16(part).unwrap()),
            _ => Owned::TwoByte(part.to_vec()),
        });
    }
    pieces
}

/// What std says the encoding of `units` is.
fn truth(units: &[u16], encoding: Encoding, mode: Mode) -> Result<Vec<u8>, EncodeError> {
    match encoding {
        Encoding::Utf16Le => Ok(units.iter().flat_map(|u| u.to_le_bytes()).collect()),
        Encoding::Utf8 => Ok(char::decode_utf16(units.iter().copied())
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect::<String>()
            .into_bytes()),
        Encoding::Latin1 | Encoding::Ascii => {
            let limit = if encoding == Encoding::Latin1 {
                0xFF
            } else {
                0x7F
            };
            if mode == Mode::Strict {
                let bad = char::decode_utf16(units.iter().copied())
                    .map(|c| c.map_or_else(|e| u32::from(e.unpaired_surrogate()), u32::from))
                    .enumerate()
                    .find(|&(_, cp)| cp > limit);
                if let Some((index, code_point)) = bad {
                    return Err(EncodeError::Unencodable {
                        code_point,
                        index,
                        encoding,
                    });
                }
            }
            Ok(units.iter().map(|&u| u as u8).collect())
        }
    }
}

fn check(pieces: &[Owned], units: &[u16]) -> Result<(), TestCaseError> {
    let views: Vec<Piece<'_>> = pieces.iter().map(Owned::piece).collect();
    let parts: Vec<&dyn Rope> = views.iter().map(|p| p as &dyn Rope).collect();
    let rope: &[&dyn Rope] = &parts;
    for encoding in Encoding::ALL {
        let bound = storage_size(rope, encoding);
        let exact = size(rope, encoding);
        prop_assert!(
            bound >= exact,
            "{encoding}: storage_size {bound} < size {exact}"
        );
        for mode in [Mode::Strict, Mode::Lossy] {
            let expected = truth(units, encoding, mode);
            let ctx = format!("{encoding} {mode:?}");

            // Into the worst case (where the two-byte path may skip measuring)
            // and into exactly the size needed (where it may not), each at an
            // even and at an odd address (where no kernel may view the
            // destination as UTF-16 units).
            let exact_len = expected.as_ref().map_or(bound, Vec::len);
            for room in [bound, exact_len] {
                for skew in [0, 1] {
                    let mut buf = vec![0xA5; room + skew];
                    let dst = &mut buf[skew..];
                    let direct = write(rope, encoding, mode, dst).map(|n| dst[..n].to_vec());
                    prop_assert_eq!(
                        &direct,
                        &expected,
                        "direct into {} bytes at offset {}, {}",
                        room,
                        skew,
                        ctx
                    );
                }
            }

            let mut dst = vec![0x5A; bound];
            let flat =
                flatten_then_write(rope, encoding, mode, &mut dst).map(|n| dst[..n].to_vec());
            prop_assert_eq!(&flat, &expected, "flatten reference, {}", ctx);

            let mut grown = b"prefix".to_vec();
            let appended = write_buf(rope, encoding, mode, &mut grown);
            match &expected {
                Ok(bytes) => {
                    prop_assert_eq!(appended, Ok(bytes.len()));
                    prop_assert_eq!(&grown[..6], b"prefix");
                    prop_assert_eq!(&grown[6..], &bytes[..]);
                    prop_assert_eq!(bytes.len(), exact, "size() for {}", ctx);
                }
                Err(e) => {
                    prop_assert_eq!(appended, Err(*e));
                    prop_assert_eq!(
                        &grown[..],
                        b"prefix",
                        "a failed write_buf leaves the buffer as it was"
                    );
                }
            }

            // One byte short: refused, nothing written, not even inside dst.
            if let Ok(bytes) = &expected {
                if !bytes.is_empty() {
                    let mut canary = vec![0xC3; bytes.len() + 16];
                    let short = bytes.len() - 1;
                    let err = write(rope, encoding, mode, &mut canary[..short]);
                    prop_assert_eq!(
                        err,
                        Err(EncodeError::DestinationTooSmall {
                            needed: bytes.len(),
                            available: short
                        })
                    );
                    prop_assert!(
                        canary.iter().all(|&b| b == 0xC3),
                        "bytes touched by a refused write, {}",
                        ctx
                    );
                }
            }
        }
    }
    Ok(())
}

fn rope_strategy() -> impl Strategy<Value = (Vec<Owned>, Vec<u16>)> {
    let len = prop_oneof![
        6 => 0usize..64,
        3 => 64usize..4096,
        1 => 4096usize..=200_000,
    ];
    (any::<u64>(), len, any::<u64>(), any::<bool>(), 1u64..64).prop_map(
        |(seed, len, palette, ascii_run, max_pieces)| {
            let mut rng = Rng(seed | 1);
            let units = text(&mut rng, len, palette, ascii_run);
            let pieces = split(&mut rng, &units, max_pieces);
            (pieces, units)
        },
    )
}

/// Encodes `rope` with the resumable encoder into destinations whose sizes
/// `rng` draws (mostly 1..=64 bytes, sometimes up to 70 000), and checks each
/// call: reads and writes add up, no call splits a character, only a
/// destination smaller than `Encoder::MIN_DST` may take nothing. Returns the
/// concatenated output, or the error of the first call.
fn resumed<R: Rope + ?Sized>(
    rope: &R,
    encoding: Encoding,
    mode: Mode,
    rng: &mut Rng,
) -> Result<Result<Vec<u8>, EncodeError>, TestCaseError> {
    let mut encoder = Encoder::new(encoding, mode);
    let mut out = Vec::new();
    let mut frames: Vec<usize> = Vec::new(); // where each call's output starts
    let mut read = 0;
    loop {
        let room = if rng.below(10) < 7 {
            1 + rng.below(64) as usize
        } else {
            65 + rng.below(70_000) as usize
        };
        let mut dst = vec![0xA5; room];
        let step = match encoder.encode(rope, &mut dst) {
            Ok(step) => step,
            Err(e) => {
                prop_assert!(out.is_empty(), "refused after {} bytes", out.len());
                prop_assert!(dst.iter().all(|&b| b == 0xA5), "bytes written by a refusal");
                return Ok(Err(e));
            }
        };
        prop_assert!(step.written <= room);
        prop_assert!(
            step.written > 0 || step.finished || room < Encoder::MIN_DST,
            "no progress into {} bytes",
            room
        );
        prop_assert!(
            dst[step.written..].iter().all(|&b| b == 0xA5),
            "written past the count"
        );
        read += step.read;
        prop_assert_eq!(encoder.position(), read);
        frames.push(out.len());
        out.extend_from_slice(&dst[..step.written]);
        if step.finished {
            break;
        }
    }
    prop_assert_eq!(read, rope.shape().len(), "units read in all");
    // No call splits a character.
    for w in frames
        .windows(2)
        .map(|w| (w[0], w[1]))
        .chain([(*frames.last().unwrap(), out.len())])
    {
        let chunk = &out[w.0..w.1];
        match encoding {
            Encoding::Utf8 => prop_assert!(std::str::from_utf8(chunk).is_ok(), "UTF-8 split"),
            Encoding::Utf16Le => {
                prop_assert!(chunk.len() % 2 == 0, "code unit split");
                let unit = |at: usize| u16::from_le_bytes([out[at], out[at + 1]]);
                if w.1 >= 2 && w.1 + 2 <= out.len() && w.0 < w.1 {
                    let (last, next) = (unit(w.1 - 2), unit(w.1));
                    prop_assert!(
                        !((0xD800..0xDC00).contains(&last) && (0xDC00..0xE000).contains(&next)),
                        "surrogate pair split"
                    );
                }
            }
            Encoding::Latin1 | Encoding::Ascii => {}
        }
    }
    Ok(Ok(out))
}

fn check_resumed(pieces: &[Owned], seed: u64) -> Result<(), TestCaseError> {
    let views: Vec<Piece<'_>> = pieces.iter().map(Owned::piece).collect();
    let parts: Vec<&dyn Rope> = views.iter().map(|p| p as &dyn Rope).collect();
    let rope: &[&dyn Rope] = &parts;
    let mut rng = Rng(seed | 1);
    for encoding in Encoding::ALL {
        for mode in [Mode::Strict, Mode::Lossy] {
            let mut dst = vec![0; storage_size(rope, encoding)];
            let one_shot = write(rope, encoding, mode, &mut dst).map(|n| dst[..n].to_vec());
            let got = resumed(rope, encoding, mode, &mut rng)?;
            prop_assert_eq!(got, one_shot, "{} {:?}", encoding, mode);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn direct_equals_flatten_equals_std((pieces, units) in rope_strategy()) {
        check(&pieces, &units)?;
    }

    #[test]
    fn ropey_ropes_equal_std(s in "[a-z\u{e9}\u{20ac}\u{1F600}]{0,3000}", cut in 0usize..3000) {
        let rope = ropey::Rope::from_str(&s);
        let cut = rope.byte_to_char(cut.min(rope.len_bytes()));
        let slice = rope.slice(cut..);
        let units: Vec<u16> = s.chars().skip(cut).collect::<String>().encode_utf16().collect();
        for encoding in Encoding::ALL {
            let mut dst = vec![0; storage_size(&slice, encoding)];
            for mode in [Mode::Strict, Mode::Lossy] {
                let got = write(&slice, encoding, mode, &mut dst).map(|n| dst[..n].to_vec());
                prop_assert_eq!(got, truth(&units, encoding, mode));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn resumed_equals_one_shot((pieces, _) in rope_strategy(), seed in any::<u64>()) {
        check_resumed(&pieces, seed)?;
    }

    #[test]
    fn resumed_ropey_ropes_equal_one_shot(s in "[a-z\u{e9}\u{20ac}\u{1F600}]{0,5000}", seed in any::<u64>()) {
        let rope = ropey::Rope::from_str(&s);
        let mut rng = Rng(seed | 1);
        for encoding in Encoding::ALL {
            for mode in [Mode::Strict, Mode::Lossy] {
                let mut dst = vec![0; storage_size(&rope, encoding)];
                let one_shot = write(&rope, encoding, mode, &mut dst).map(|n| dst[..n].to_vec());
                prop_assert_eq!(resumed(&rope, encoding, mode, &mut rng)?, one_shot);
            }
        }
    }
}

/// A plan carries its encoding: `write_planned` writes in it.
#[test]
fn a_plan_is_written_in_its_own_encoding() {
    let rope = Utf16(&[0x63, 0xE9, 0xD83D, 0xDE00]);
    for encoding in Encoding::ALL {
        let p = plan(&rope, encoding, Mode::Lossy).unwrap();
        assert_eq!(p.encoding(), encoding);
        let mut planned = vec![0; p.size()];
        write_planned(&rope, p, &mut planned).unwrap();
        let mut direct = vec![0; p.size()];
        write(&rope, encoding, Mode::Lossy, &mut direct).unwrap();
        assert_eq!(planned, direct, "{encoding}");
    }
}

/// Builds a rope from pieces and runs `f` on it.
fn with_rope<T>(pieces: &[Piece<'_>], f: impl FnOnce(&[&dyn Rope]) -> T) -> T {
    let parts: Vec<&dyn Rope> = pieces.iter().map(|p| p as &dyn Rope).collect();
    f(&parts)
}

#[test]
fn each_rope_takes_its_path() {
    let ascii = ropey::Rope::from_str("plain ascii text");
    let cases: &[(&dyn Rope, Encoding, EncodePath)] = &[
        (&ascii, Encoding::Utf8, EncodePath::OneByte),
        (&ascii, Encoding::Latin1, EncodePath::OneByte),
        (&Latin1(b"caf\xe9"), Encoding::Latin1, EncodePath::OneByte),
        (&Latin1(b"cafe"), Encoding::Utf8, EncodePath::OneByte),
        (&Latin1(b"caf\xe9"), Encoding::Utf8, EncodePath::Expand),
        (&Utf16(&[0x63, 0xE9]), Encoding::Utf8, EncodePath::TwoByte),
        (&Utf16(&[0x63, 0xE9]), Encoding::Latin1, EncodePath::TwoByte),
        (&"\u{20AC}", Encoding::Latin1, EncodePath::TwoByte),
        (&Latin1(b"cafe"), Encoding::Utf16Le, EncodePath::TwoByte),
    ];
    for (rope, encoding, path) in cases {
        assert_eq!(
            plan(rope, *encoding, Mode::Lossy).unwrap().path(),
            *path,
            "{encoding}"
        );
    }
}

/// The back-of-buffer expansion at the edges of "the writer never overtakes
/// the reader": every byte ≥ 0x80, none, one at each end, across pieces.
#[test]
fn expansion_at_the_edges() {
    let all_high: Vec<u8> = (0x80..=0xFF).cycle().take(1000).collect();
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![&all_high],
        vec![&all_high[..1]],
        vec![b"\xe9bcdefgh"],
        vec![b"abcdefg\xff"],
        vec![b"\xe9", b"bcdef", b"g\xff"],
        vec![b"\xff", b"", &all_high, b"z"],
    ];
    for case in cases {
        let pieces: Vec<Piece<'_>> = case.iter().map(|b| Piece::OneByte(b)).collect();
        with_rope(&pieces, |rope| {
            assert_eq!(
                plan(rope, Encoding::Utf8, Mode::Strict).unwrap().path(),
                EncodePath::Expand
            );
            let expected: String = case.concat().iter().map(|&b| char::from(b)).collect();
            let mut dst = vec![0; expected.len()];
            assert_eq!(
                write(rope, Encoding::Utf8, Mode::Strict, &mut dst),
                Ok(expected.len())
            );
            assert_eq!(dst, expected.as_bytes());
        });
    }
}

#[test]
fn strict_errors_name_the_character_and_its_index() {
    // "a😀" + "b" + "€": the pair is one character, so € is at index 3.
    let pieces = [
        Piece::TwoByte(&[0x61, 0xD83D]),
        Piece::TwoByte(&[0xDE00]),
        Piece::Utf8("b\u{20AC}"),
    ];
    with_rope(&pieces, |rope| {
        let mut dst = [0u8; 32];
        let err = write(rope, Encoding::Latin1, Mode::Strict, &mut dst).unwrap_err();
        assert_eq!(
            err,
            EncodeError::Unencodable {
                code_point: 0x1F600,
                index: 1,
                encoding: Encoding::Latin1
            }
        );
        assert_eq!(
            err.to_string(),
            "character U+1F600 '😀' at character index 1 cannot be encoded as latin1 (strict mode)"
        );
        assert!(dst.iter().all(|&b| b == 0), "nothing written on error");
    });
    let err = write(
        &Latin1(b"ok\xe9"),
        Encoding::Ascii,
        Mode::Strict,
        &mut [0; 8],
    )
    .unwrap_err();
    assert_eq!(
        err,
        EncodeError::Unencodable {
            code_point: 0xE9,
            index: 2,
            encoding: Encoding::Ascii
        }
    );
    // Lossy keeps the low byte of each code unit, as Node's latin1 does.
    let mut dst = [0u8; 4];
    assert_eq!(
        write(
            &"\u{20AC}\u{1F600}",
            Encoding::Latin1,
            Mode::Lossy,
            &mut dst
        ),
        Ok(3)
    );
    assert_eq!(dst[..3], [0xAC, 0x3D, 0x00]);
}
