//! The encoder against its flatten reference: ropes of arbitrary pieces, in
//! every encoding and mode, must encode to the same bytes (or the same
//! error) both ways, with the exact size `plan` announced, into the worst
//! case (at an even and an odd address) and into exactly that size, and
//! resumed in frames of any size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unflat::flatten::flatten_then_write;
use unflat::{plan, storage_size, write, Encoder, Encoding, Mode, Piece, Rope};

fuzz_target!(|data: &[u8]| {
    // The frame size for the resumed encode, then pieces: a tag byte (kind,
    // length), a second length byte when the tag's length is 63 (pieces of
    // 64 to 2104 bytes, long enough for the vectorised kernels' blocks),
    // then that many bytes of content.
    let Some((&frame, data)) = data.split_first() else {
        return;
    };
    // From 4 bytes up, mostly small (4 + frame²: up to 65 029).
    let frame = Encoder::MIN_DST + usize::from(frame).pow(2);
    let mut owned_one: Vec<&[u8]> = Vec::new();
    let mut owned_utf8: Vec<String> = Vec::new();
    let mut owned_two: Vec<Vec<u16>> = Vec::new();
    let mut order = Vec::new();
    let mut rest = data;
    while let Some((&tag, tail)) = rest.split_first() {
        let (len, tail) = match (tag >> 2, tail.split_first()) {
            (63, Some((&more, tail))) => (64 + usize::from(more) * 8, tail),
            (len, _) => (usize::from(len), tail),
        };
        let (content, tail) = tail.split_at(len.min(tail.len()));
        rest = tail;
        match tag & 3 {
            0 => {
                order.push((0, owned_one.len()));
                owned_one.push(content);
            }
            1 => {
                order.push((1, owned_utf8.len()));
                owned_utf8.push(String::from_utf8_lossy(content).into_owned());
            }
            _ => {
                order.push((2, owned_two.len()));
                owned_two.push(content.chunks(2).map(|c| u16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0xD8)])).collect());
            }
        }
    }
    let pieces: Vec<Piece<'_>> = order
        .iter()
        .map(|&(k, i)| match k {
            0 => Piece::OneByte(owned_one[i]),
            1 => Piece::Utf8(&owned_utf8[i]),
            _ => Piece::TwoByte(&owned_two[i]),
        })
        .collect();
    let rope: &[Piece<'_>] = &pieces;
    for encoding in Encoding::ALL {
        for mode in [Mode::Strict, Mode::Lossy] {
            let bound = storage_size(rope, encoding);
            let mut a = vec![0u8; bound];
            let mut b = vec![0u8; bound];
            let direct = write(rope, encoding, mode, &mut a).map(|n| a[..n].to_vec());
            let reference = flatten_then_write(rope, encoding, mode, &mut b).map(|n| b[..n].to_vec());
            assert_eq!(direct, reference, "{encoding} {mode:?}");
            // At an odd address, where no kernel may view the destination
            // as UTF-16 units.
            let mut odd = vec![0u8; bound + 1];
            let shifted = write(rope, encoding, mode, &mut odd[1..]).map(|n| odd[1..1 + n].to_vec());
            assert_eq!(shifted, direct, "{encoding} {mode:?} at an odd address");
            if let Ok(bytes) = &direct {
                let p = plan(rope, encoding, mode).unwrap();
                assert_eq!(p.size(), bytes.len());
                let mut exact = vec![0u8; p.size()];
                assert_eq!(write(rope, encoding, mode, &mut exact), Ok(bytes.len()));
                assert_eq!(&exact, bytes);
            }
            if mode == Mode::Strict {
                // Strict refuses on the first call or writes the lossy bytes.
                continue;
            }
            let mut encoder = Encoder::new(encoding, mode);
            let mut resumed = Vec::new();
            let mut dst = vec![0u8; frame];
            let resumed = loop {
                match encoder.encode(rope, &mut dst) {
                    Err(e) => break Err(e),
                    Ok(step) => {
                        resumed.extend_from_slice(&dst[..step.written]);
                        if step.finished {
                            break Ok(resumed);
                        }
                        assert!(step.written > 0, "no progress into {frame} bytes");
                    }
                }
            };
            assert_eq!(resumed, direct, "resumed in frames of {frame}, {encoding} {mode:?}");
        }
    }
    let _ = rope.shape();
});
