//! Writing into a pre-sized destination allocates nothing, on every path,
//! for ropes of 1, 10 and 1000 pieces — counted by a global allocator.

use unflat::{plan, storage_size, write, EncodePath, Encoding, Mode, Piece, Rope};

#[path = "common/alloc.rs"]
mod alloc;

use alloc::allocations_during;

/// Writes a rope of `count` copies of `piece` and returns the allocations the
/// write made.
fn count_for(piece: Piece<'_>, count: usize, encoding: Encoding, path: EncodePath) -> usize {
    let parts: Vec<&dyn Rope> = vec![&piece as &dyn Rope; count];
    let rope: &[&dyn Rope] = &parts;
    let p = plan(rope, encoding, Mode::Lossy).unwrap();
    assert_eq!(p.path(), path, "{piece:?} × {count} as {encoding}");
    // Exactly sized, and sized for the worst case (which lets the two-byte
    // path skip measuring).
    let mut exact = vec![0u8; p.size()];
    let mut worst = vec![0u8; storage_size(rope, encoding)];
    allocations_during(|| {
        for dst in [&mut exact, &mut worst] {
            let n = write(rope, encoding, Mode::Lossy, dst).unwrap();
            assert_eq!(n, p.size());
        }
    })
}

#[test]
fn writing_allocates_nothing_on_any_path() {
    let latin1 = Piece::OneByte(b"cr\xe8me br\xfbl\xe9e, ");
    let ascii = Piece::Utf8("plain ascii text, ");
    let wide = Piece::TwoByte(&[0x20AC, 0x20, 0xD83D, 0xDE00, 0x61, 0xD800]);
    // Pieces long enough to be converted straight from their memory (not
    // gathered, not staged), by the vectorised kernels.
    let long_latin1: Vec<u8> = (0..2000)
        .map(|i| if i % 8 == 0 { 0xE9 } else { b'a' })
        .collect();
    let long_latin1 = Piece::OneByte(&long_latin1);
    let long_wide: Vec<u16> = (0..300).map(|i| [0x20AC, 0x61, 0xE9][i % 3]).collect();
    let long_wide = Piece::TwoByte(&long_wide);
    let cases = [
        (long_latin1, Encoding::Utf8, EncodePath::Expand),
        (long_wide, Encoding::Utf8, EncodePath::TwoByte),
        (long_wide, Encoding::Utf16Le, EncodePath::TwoByte),
        (latin1, Encoding::Latin1, EncodePath::OneByte),
        (ascii, Encoding::Utf8, EncodePath::OneByte),
        (latin1, Encoding::Utf8, EncodePath::Expand),
        (wide, Encoding::Utf8, EncodePath::TwoByte),
        (wide, Encoding::Latin1, EncodePath::TwoByte),
        (ascii, Encoding::Utf16Le, EncodePath::TwoByte),
        (latin1, Encoding::Utf16Le, EncodePath::TwoByte),
        (wide, Encoding::Utf16Le, EncodePath::TwoByte),
    ];
    for (piece, encoding, path) in cases {
        for count in [1, 10, 1000] {
            assert_eq!(
                count_for(piece, count, encoding, path),
                0,
                "{path:?}: {piece:?} × {count} as {encoding}"
            );
        }
    }
}

#[test]
fn ropey_ropes_write_with_at_most_one_allocation() {
    // Up to 16 KiB the chunks are looked up: nothing is allocated. Longer
    // ropes are walked with ropey's chunk iterator, whose node stack is one
    // small allocation, because that measured faster (docs/encoder-measurements.md).
    for (reps, most) in [(200, 0), (5000, 1)] {
        let text = "ropey chunk text, ".repeat(reps);
        let rope = ropey::Rope::from_str(&text);
        assert!(rope.chunks().count() > 3, "a rope of several chunks");
        let mut dst = vec![0u8; text.len()];
        let n = allocations_during(|| {
            write(&rope, Encoding::Utf8, Mode::Strict, &mut dst).unwrap();
        });
        assert!(n <= most, "{n} allocations for {} bytes", text.len());
        assert_eq!(dst, text.as_bytes());
    }
}

#[test]
fn the_counter_sees_allocations() {
    // Guards the guard: a test that cannot fail proves nothing.
    let n = allocations_during(|| {
        std::hint::black_box(vec![1u8; 64]);
    });
    assert_eq!(n, 1);
}
