use super::*;

/// The pieces visited from `start`, as UTF-16.
fn from(rope: &dyn Rope, start: usize) -> Vec<u16> {
    let mut out = Vec::new();
    let _ = rope.for_each_piece_from(start, &mut |p| {
        match p {
            Piece::OneByte(b) => out.extend(b.iter().map(|&b| u16::from(b))),
            Piece::Utf8(s) => out.extend(s.encode_utf16()),
            Piece::TwoByte(u) => out.extend_from_slice(u),
        }
        ControlFlow::Continue(())
    });
    out
}

#[test]
fn every_rope_visits_the_same_text_from_any_position() {
    let text = "ab\u{e9}".repeat(700);
    let big = ropey::Rope::from_str(&text);
    let small = ropey::Rope::from_str("xyz");
    let parts: Vec<Box<dyn Rope>> = vec![
        Box::new(Latin1(b"l1\xe9".to_vec())),
        Box::new(""),
        Box::new(big.clone()),
        Box::new(Utf16(vec![0x20AC, 0xD83D, 0xDE00])),
        Box::new(Concat::new([&"cc", &Latin1(b"")])),
        Box::new(small.slice(1..)),
    ];
    // Units per part in its own representation, and the whole as UTF-16.
    let mut whole: Vec<u16> = b"l1\xe9".iter().map(|&b| u16::from(b)).collect();
    whole.extend(text.encode_utf16());
    whole.extend([0x20AC, 0xD83D, 0xDE00]);
    whole.extend("ccyz".encode_utf16());
    let total = parts.shape().len();
    assert_eq!(total, 3 + text.len() + 3 + 2 + 2);
    // Each position that is a character boundary, through the slice
    // override and the default walk-and-skip (via a wrapper that does
    // not override it).
    struct Plain<'r>(&'r dyn Rope);
    impl Rope for Plain<'_> {
        fn for_each_piece<'a>(
            &'a self,
            visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
        ) -> ControlFlow<()> {
            self.0.for_each_piece(visit)
        }
    }
    let boundaries = (0..=3)
        .chain((3..3 + text.len()).filter(|i| text.is_char_boundary(i - 3)))
        .chain(3 + text.len()..=total + 2);
    for start in boundaries {
        let expected_skip = |units: &[u16]| -> Vec<u16> {
            // `start` in own units → the same text in UTF-16 units.
            let before: usize = if start <= 3 {
                start
            } else if start <= 3 + text.len() {
                3 + text[..start - 3].encode_utf16().count()
            } else {
                3 + text.encode_utf16().count() + (start - 3 - text.len())
            };
            units[before.min(units.len())..].to_vec()
        };
        assert_eq!(from(&parts, start), expected_skip(&whole), "slice, {start}");
        assert_eq!(
            from(&Plain(&parts), start),
            expected_skip(&whole),
            "default, {start}"
        );
    }
    assert_eq!(from(&big, 4), text[4..].encode_utf16().collect::<Vec<_>>());
}

#[test]
fn ropey_shapes_say_ascii_exactly_when_the_text_is() {
    for text in [
        String::new(),
        "abcd".to_string(),
        "ab\u{e9}".to_string(),
        "x".repeat(1024),
        "y".repeat(5000),
        format!("{}\u{20AC}", "z".repeat(5000)),
        format!("\u{e9}{}", "z".repeat(1022)),
    ] {
        let rope = ropey::Rope::from_str(&text);
        let expected = Shape::utf8(text.len(), text.is_ascii());
        assert_eq!(rope.shape(), expected, "{} bytes", text.len());
        let n = rope.len_chars();
        for range in [0..0, 0..n, 1.min(n)..n] {
            let slice = rope.slice(range.clone());
            let part: String = slice.chars().collect();
            let expected = Shape::utf8(part.len(), part.is_ascii());
            assert_eq!(slice.shape(), expected, "{} bytes, {range:?}", text.len());
        }
    }
}
