//! The encoder against its flatten reference: ropes of arbitrary pieces, in
//! every encoding and mode, must encode to the same bytes (or the same
//! error) both ways, with the exact size `plan` announced.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unflat::flatten::flatten_then_write;
use unflat::{plan, storage_size, write, Encoding, Mode, Piece, Rope};

fuzz_target!(|data: &[u8]| {
    // Pieces: a tag byte (kind, length), then that many bytes of content.
    let mut owned_one: Vec<&[u8]> = Vec::new();
    let mut owned_utf8: Vec<String> = Vec::new();
    let mut owned_two: Vec<Vec<u16>> = Vec::new();
    let mut order = Vec::new();
    let mut rest = data;
    while let Some((&tag, tail)) = rest.split_first() {
        let len = usize::from(tag >> 2).min(tail.len());
        let (content, tail) = tail.split_at(len);
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
            if let Ok(bytes) = &direct {
                let p = plan(rope, encoding, mode).unwrap();
                assert_eq!(p.size(), bytes.len());
                let mut exact = vec![0u8; p.size()];
                assert_eq!(write(rope, encoding, mode, &mut exact), Ok(bytes.len()));
                assert_eq!(&exact, bytes);
            }
        }
    }
    let _ = rope.shape();
});
