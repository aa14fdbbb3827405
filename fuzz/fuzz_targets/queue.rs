//! The write queue against the plain concatenation of what was pushed:
//! random pushes of every kind (copied bytes, shared buffers, ranges of a
//! ropey rope whose text is not ASCII, encoded text, text streamed in
//! frames), under a random copy-or-share policy and frame size, drained by a
//! writer that takes a random number of bytes and iovecs per call. What
//! comes out must be exactly what went in, in order, and the queue's counts
//! must agree with it at every step.
#![no_main]

use std::io::IoSlice;
use std::sync::OnceLock;

use bytes::{Buf, Bytes};
use libfuzzer_sys::fuzz_target;
use unflat::queue::{Policy, SharedRope, WriteQueue};
use unflat::{Encoding, Mode, Utf16};

/// A rope of two-, three- and four-byte characters with ASCII between, so
/// that ranges and partial writes fall inside characters.
fn rope() -> &'static (ropey::Rope, String) {
    static ROPE: OnceLock<(ropey::Rope, String)> = OnceLock::new();
    ROPE.get_or_init(|| {
        // ~3 KiB: four or five ropey chunks, so ranges cross chunk ends.
        let text = "é€😀ab".repeat(300);
        (ropey::Rope::from_str(&text), text)
    })
}

/// Two-byte text with surrogate pairs, shared, and its UTF-8 and UTF-16LE.
fn two_byte() -> &'static (SharedRope, Vec<u8>, Vec<u8>) {
    static TEXT: OnceLock<(SharedRope, Vec<u8>, Vec<u8>)> = OnceLock::new();
    TEXT.get_or_init(|| {
        let text = "x€😀é".repeat(60);
        let units: Vec<u16> = text.encode_utf16().collect();
        let le = units.iter().flat_map(|u| u.to_le_bytes()).collect();
        let rope: SharedRope = std::sync::Arc::new(Utf16(units));
        (rope, text.into_bytes(), le)
    })
}

/// Reads the fuzz input a few bytes at a time.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn u16(&mut self) -> Option<usize> {
        Some(usize::from(self.byte()?) << 8 | usize::from(self.byte()?))
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let (Some(a), Some(b)) = (input.u16(), input.byte()) else {
        return;
    };
    let policy = Policy {
        copy_below: a % 2048,
        frame: usize::from(b) * 64 + 4,
    };
    let (rope, text) = rope();
    let mut q = WriteQueue::with_policy(policy);
    let mut expected = Vec::new();
    let mut out = Vec::new();
    while let Some(op) = input.byte() {
        match op % 7 {
            0 => {
                let n = usize::from(op / 6);
                let bytes: Vec<u8> = (0..n).map(|i| i as u8).collect();
                q.copy(&bytes);
                expected.extend_from_slice(&bytes);
            }
            1 => {
                // Up to 2 KiB: either side of any copy threshold below it.
                let n = input.u16().unwrap_or(0) % 2048;
                let bytes = Bytes::from(vec![op; n]);
                q.share(&bytes);
                expected.extend_from_slice(&bytes);
            }
            2 => {
                let (Some(start), Some(len)) = (input.u16(), input.u16()) else { break };
                let start = start.min(text.len());
                let end = (start + len).min(text.len());
                q.share_rope(rope, start..end);
                expected.extend_from_slice(&text.as_bytes()[start..end]);
            }
            3 => {
                let s = "caf\u{e9} \u{20ac}";
                let n = q.encode(s, Encoding::Utf8, Mode::Strict).unwrap();
                assert_eq!(n, s.len());
                expected.extend_from_slice(s.as_bytes());
            }
            4 => q.end_response(),
            5 => {
                let (rope, utf8, utf16le) = two_byte();
                let (encoding, bytes) = if op & 0x80 == 0 {
                    (Encoding::Utf8, utf8)
                } else {
                    (Encoding::Utf16Le, utf16le)
                };
                assert_eq!(q.stream(rope, encoding, Mode::Strict), Ok(bytes.len()));
                expected.extend_from_slice(bytes);
            }
            _ => {
                // A partial write: at most `budget` bytes over at most
                // `slots` iovecs.
                let (Some(slots), Some(budget)) = (input.byte(), input.u16()) else { break };
                let mut iov = vec![IoSlice::new(&[]); usize::from(slots % 64) + 1];
                let n = q.chunks_vectored(&mut iov);
                assert_eq!(n == 0, !q.has_remaining());
                if n > 0 {
                    assert_eq!(q.chunk(), &*iov[0]);
                }
                let mut took = 0;
                for s in &iov[..n] {
                    let k = s.len().min(budget - took);
                    out.extend_from_slice(&s[..k]);
                    took += k;
                }
                q.advance(took);
            }
        }
        assert_eq!(out.len() + q.remaining(), expected.len());
        assert!(q.copied_len() <= q.remaining());
    }
    q.write_to(&mut out).unwrap();
    assert_eq!(out, expected);
    assert_eq!(q.ledger().pending_responses(), 0);
    assert_eq!(q.copied_len(), 0);
});
