use bytes::Bytes;

use super::*;
use crate::encoding::{EncodeError, Encoding, Mode};

/// Drains `q` as a socket would that takes at most `step` bytes per
/// call and at most `iov_max` iovecs, checking on every call that
/// `chunk()` is the first iovec.
fn drain_in_steps(q: &mut WriteQueue, step: usize, iov_max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while q.has_remaining() {
        let mut iov = vec![IoSlice::new(&[]); iov_max];
        let n = q.chunks_vectored(&mut iov);
        assert!(n > 0);
        assert_eq!(q.chunk(), &*iov[0]);
        let mut budget = step;
        let mut took = 0;
        for s in &iov[..n] {
            let k = s.len().min(budget);
            out.extend_from_slice(&s[..k]);
            budget -= k;
            took += k;
            if budget == 0 {
                break;
            }
        }
        q.advance(took);
    }
    out
}

/// Every iovec `chunks_vectored` gives for the whole queue (the tests
/// queue fewer than 1024).
fn iovecs(q: &WriteQueue) -> Vec<Vec<u8>> {
    let mut iov = vec![IoSlice::new(&[]); 1024];
    let n = q.chunks_vectored(&mut iov);
    iov[..n].iter().map(|s| s.to_vec()).collect()
}

/// The byte offsets where `rope`'s chunks begin.
fn chunk_starts(rope: &ropey::Rope) -> Vec<usize> {
    let mut at = 0;
    rope.chunks()
        .map(|c| {
            let start = at;
            at += c.len();
            start
        })
        .collect()
}

#[test]
fn partial_writes_resume_in_order_across_every_segment_kind() {
    let text: String = (0..20_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let rope = ropey::Rope::from_str(&text);
    let big = Bytes::from(vec![7u8; 1000]);
    for policy in [Policy::DEFAULT, Policy::SHARE_ALL, Policy::COPY_ALL] {
        for step in [1, 7, 64, 1000, 100_000] {
            for iov_max in [1, 3, 64] {
                let mut q = WriteQueue::with_policy(policy);
                q.copy(b"head1|");
                q.share(&big);
                q.share(&Bytes::from_static(b"tiny"));
                q.share_rope(&rope, 5..text.len() - 3);
                q.end_response();
                q.encode(&"|head2", Encoding::Latin1, Mode::Strict).unwrap();
                q.end_response();
                assert_eq!(q.ledger().pending_responses(), 2);
                let mut expected = b"head1|".to_vec();
                expected.extend_from_slice(&big);
                expected.extend_from_slice(b"tiny");
                expected.extend_from_slice(&text.as_bytes()[5..text.len() - 3]);
                expected.extend_from_slice(b"|head2");
                assert_eq!(q.remaining(), expected.len());
                assert_eq!(
                    drain_in_steps(&mut q, step, iov_max),
                    expected,
                    "{policy:?}, step {step}, iov {iov_max}"
                );
                assert_eq!(q.ledger().pending_responses(), 0);
                assert_eq!(q.copied_len(), 0);
            }
        }
    }
}

#[test]
fn rope_ranges_that_cut_characters_are_written_byte_for_byte() {
    // Two-, three- and four-byte characters: every partial write and
    // every range boundary below falls inside some character.
    let text = "é€😀x".repeat(3000);
    let rope = ropey::Rope::from_str(&text);
    let bytes = text.as_bytes();
    for policy in [Policy::DEFAULT, Policy::SHARE_ALL, Policy::COPY_ALL] {
        for (start, end) in [(0, bytes.len()), (1, bytes.len() - 1), (3, 5), (2, 9001)] {
            for step in [1, 3, 1000] {
                let mut q = WriteQueue::with_policy(policy);
                q.share_rope(&rope, start..end);
                assert_eq!(
                    drain_in_steps(&mut q, step, 16),
                    &bytes[start..end],
                    "{policy:?} {start}..{end} step {step}"
                );
            }
        }
    }
}

#[test]
#[should_panic(expected = "outside the rope")]
fn a_rope_range_past_the_end_is_refused() {
    let rope = ropey::Rope::from_str("abc");
    WriteQueue::new().share_rope(&rope, 1..4);
}

#[test]
fn short_chunks_are_copied_and_long_ones_shared() {
    let text = "r".repeat(10_000);
    let rope = ropey::Rope::from_str(&text);
    let starts = chunk_starts(&rope);
    assert!(starts.len() > 4, "a rope of several chunks");
    let (from, to) = (starts[1] - 10, starts[3] + 10);
    let policy = Policy {
        copy_below: 256,
        ..Policy::DEFAULT
    };
    let mut q = WriteQueue::with_policy(policy);
    q.copy(b"head|");
    q.share_rope(&rope, from..to);
    // The head and the 10-byte tail of chunk 0 are one copied slice,
    // chunks 1 and 2 are shared, the 10-byte head of chunk 3 is copied.
    let iov = iovecs(&q);
    assert_eq!(
        iov.len(),
        4,
        "{:?}",
        iov.iter().map(Vec::len).collect::<Vec<_>>()
    );
    assert_eq!(iov[0].len(), 5 + 10);
    assert_eq!(iov[1].len(), starts[2] - starts[1]);
    assert_eq!(iov[3].len(), 10);
    assert_eq!(q.copied_len(), 5 + 20);
    // Shared chunks point into the rope.
    let chunk1 = rope.chunks().nth(1).unwrap().as_bytes();
    assert_eq!(iov[1].as_slice(), chunk1);
    let mut iov = [IoSlice::new(&[]); 4];
    q.chunks_vectored(&mut iov);
    assert_eq!(iov[1].as_ptr(), chunk1.as_ptr());
}

#[test]
fn short_buffers_and_ranges_are_copied_behind_the_head() {
    let mut q = WriteQueue::with_policy(Policy {
        copy_below: 100,
        ..Policy::DEFAULT
    });
    let rope = ropey::Rope::from_str(&"x".repeat(5000));
    q.copy(b"HTTP/1.1 200 OK\r\n\r\n");
    q.share(&Bytes::from_static(b"small body"));
    q.share_rope(&rope, 10..109);
    q.copy(b"HTTP/1.1 200 OK\r\n\r\n");
    assert_eq!(iovecs(&q).len(), 1);
    assert_eq!(q.copied_len(), q.remaining());
    q.share(&Bytes::from(vec![1; 100]));
    q.share_rope(&rope, 0..100);
    assert_eq!(iovecs(&q).len(), 3);
}

/// Two-byte text with surrogate pairs, as a shared rope, and its UTF-8.
fn two_byte_text() -> (SharedRope, Vec<u8>) {
    let text = "a€😀é".repeat(5000);
    let units: Vec<u16> = text.encode_utf16().collect();
    (Arc::new(crate::Utf16(units)), text.into_bytes())
}

#[test]
fn a_stream_is_written_frame_by_frame_between_other_segments() {
    let (rope, utf8) = two_byte_text();
    for frame in [4, 7, 1000, 65536] {
        for (step, iov_max) in [(1, 4), (5, 2), (999, 64), (1 << 20, 64)] {
            let mut q = WriteQueue::with_policy(Policy {
                frame,
                ..Policy::DEFAULT
            });
            q.copy(b"head|");
            assert_eq!(
                q.stream(&rope, Encoding::Utf8, Mode::Strict),
                Ok(utf8.len())
            );
            q.end_response();
            q.copy(b"|next");
            q.stream(&rope, Encoding::Utf8, Mode::Strict).unwrap();
            q.end_response();
            // Memory: text longer than a frame is never held whole (only
            // the frame buffer holds any of it); shorter text is copied.
            if utf8.len() > frame {
                assert_eq!(q.copied_len(), 10);
            } else {
                assert_eq!(q.copied_len(), 10 + 2 * utf8.len());
            }
            let mut expected = b"head|".to_vec();
            expected.extend_from_slice(&utf8);
            expected.extend_from_slice(b"|next");
            expected.extend_from_slice(&utf8);
            assert_eq!(q.remaining(), expected.len());
            let out = drain_in_steps(&mut q, step, iov_max);
            assert!(
                out == expected,
                "frame {frame}, step {step}: output differs"
            );
            assert!(q.spare_frame.len() <= frame.max(Encoder::MIN_DST));
            assert_eq!(q.ledger().pending_responses(), 0);
        }
    }
}

#[test]
fn short_text_is_encoded_at_once_and_refusals_queue_nothing() {
    let mut q = WriteQueue::new();
    let short: SharedRope = Arc::new(crate::Latin1(b"caf\xe9".to_vec()));
    assert_eq!(q.stream(&short, Encoding::Utf8, Mode::Strict), Ok(5));
    assert_eq!(q.copied_len(), 5);
    let (long, _) = two_byte_text();
    let err = q.stream(&long, Encoding::Latin1, Mode::Strict);
    assert!(
        matches!(err, Err(EncodeError::Unencodable { index: 1, .. })),
        "{err:?}"
    );
    assert_eq!(q.remaining(), 5);
    // Buf helpers drain a stream like any other segment.
    q.stream(&long, Encoding::Utf16Le, Mode::Strict).unwrap();
    let all = q.copy_to_bytes(q.remaining());
    assert_eq!(&all[..5], "café".as_bytes());
    assert_eq!(all.len(), 5 + 2 * "a€😀é".encode_utf16().count() * 5000);
}

#[test]
fn buf_laws_hold_at_every_cursor_position() {
    let rope = ropey::Rope::from_str(&"é".repeat(2000));
    let mut q = WriteQueue::with_policy(Policy::SHARE_ALL);
    q.copy(b"head");
    q.share(&Bytes::from(vec![b's'; 300]));
    q.share_rope(&rope, 1..3001);
    q.copy(b"tail");
    let expected: Vec<u8> = iovecs(&q).concat();
    let total = q.remaining();
    assert_eq!(expected.len(), total);
    // Advance by every amount from every position: what remains is
    // always the suffix of the whole, and remaining() its length.
    for step in [1, 3, 299, 4096] {
        let mut q2 = WriteQueue::with_policy(Policy::SHARE_ALL);
        q2.copy(b"head");
        q2.share(&Bytes::from(vec![b's'; 300]));
        q2.share_rope(&rope, 1..3001);
        q2.copy(b"tail");
        let mut done = 0;
        while q2.has_remaining() {
            assert_eq!(q2.remaining(), total - done);
            assert_eq!(iovecs(&q2).concat(), &expected[done..]);
            let k = step.min(q2.remaining());
            q2.advance(k);
            done += k;
        }
        assert_eq!(q2.chunk(), b"");
        assert_eq!(q2.chunks_vectored(&mut [IoSlice::new(&[])]), 0);
    }
    // `Buf`'s own helpers work on it.
    assert_eq!(q.copy_to_bytes(total), expected);
}

#[test]
fn write_to_resumes_after_partial_writes() {
    /// Takes at most 7 bytes per call.
    struct Trickle(Vec<u8>, usize);
    impl std::io::Write for Trickle {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let n = b.len().min(7);
            self.0.extend_from_slice(&b[..n]);
            self.1 += 1;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut q = WriteQueue::with_policy(Policy::SHARE_ALL);
    q.copy(b"head|");
    q.share(&Bytes::from(vec![b'x'; 100]));
    let mut w = Trickle(Vec::new(), 0);
    assert_eq!(q.write_to(&mut w).unwrap(), 105);
    assert_eq!(&w.0[..5], b"head|");
    assert!(w.0[5..].iter().all(|&b| b == b'x'));
    // The default `write_vectored` writes the first slice only: one call
    // for the head, then one per 7 bytes of the body.
    assert_eq!(w.1, 1 + 15);
    assert!(!q.has_remaining());
}

#[test]
fn empty_pushes_queue_nothing() {
    let mut q = WriteQueue::with_policy(Policy::SHARE_ALL);
    let rope = ropey::Rope::from_str("abc");
    q.share(&Bytes::new());
    q.share_rope(&rope, 1..1);
    q.copy(b"");
    q.encode("", Encoding::Utf8, Mode::Strict).unwrap();
    let empty: SharedRope = Arc::new(String::new());
    q.stream(&empty, Encoding::Utf8, Mode::Strict).unwrap();
    assert!(!q.has_remaining());
    assert_eq!(q.chunks_vectored(&mut [IoSlice::new(&[]); 4]), 0);
    assert!(q.segments.is_empty());
}

#[test]
fn a_response_with_nothing_left_to_write_is_not_pending() {
    let mut q = WriteQueue::new();
    q.end_response();
    assert_eq!(q.ledger().pending_responses(), 0);
    q.copy(b"abc");
    q.advance(3);
    q.end_response();
    assert_eq!(q.ledger().pending_responses(), 0);
    q.copy(b"de");
    q.end_response();
    assert_eq!(q.ledger().pending_responses(), 1);
    q.advance(2);
    assert_eq!(q.ledger().pending_responses(), 0);
}

#[test]
fn a_rope_range_longer_than_a_frame_is_copied_a_frame_at_a_time() {
    let text = "é€😀x".repeat(20_000);
    let rope = ropey::Rope::from_str(&text);
    let bytes = text.as_bytes();
    let sizes: Vec<usize> = rope.chunks().map(str::len).collect();
    let mid = sizes[sizes.len() / 2];
    // Every chunk copied, then some shared (those of `mid` bytes and up)
    // between copied runs.
    for copy_below in [usize::MAX, mid] {
        for frame in [4, 1000, 4096] {
            let policy = Policy { copy_below, frame };
            for (start, end) in [(0, bytes.len()), (3, bytes.len() - 2)] {
                let mut q = WriteQueue::with_policy(policy);
                q.copy(b"head|");
                q.share_rope(&rope, start..end);
                q.end_response();
                q.copy(b"|next");
                // Nothing of the rope is held but one frame.
                assert_eq!(q.copied_len(), 10);
                assert!(q.held() <= 10 + frame.max(Encoder::MIN_DST));
                let mut expected = b"head|".to_vec();
                expected.extend_from_slice(&bytes[start..end]);
                expected.extend_from_slice(b"|next");
                let out = drain_in_steps(&mut q, 777, 16);
                assert!(out == expected, "{policy:?} {start}..{end}");
                assert_eq!(q.held(), 0);
            }
        }
    }
}

#[test]
fn a_queue_that_never_drains_holds_what_is_pending_not_what_it_sent() {
    let mut q = WriteQueue::new();
    let block = [7u8; 1000];
    q.copy(&block);
    for _ in 0..10_000 {
        // The peer takes all but a few bytes of what is queued, and a
        // new response comes: the queue is never empty.
        q.copy(&block);
        q.advance(q.remaining() - 3);
        assert!(q.has_remaining());
    }
    assert_eq!(q.remaining(), 3);
    assert!(q.buf.len() <= 8 * 1024, "{} bytes held", q.buf.len());
    assert_eq!(q.chunk(), &[7, 7, 7]);
}

#[test]
fn a_drained_queue_keeps_its_buffers_up_to_the_retained_size() {
    let mut q = WriteQueue::new();
    q.set_retain(8 * 1024);
    q.copy(&[1; 4096]);
    q.advance(4096);
    assert!(q.buf.len() >= 4096, "kept for reuse");
    q.copy(&[2; 20_000]);
    q.advance(20_000);
    assert!(q.buf.is_empty(), "larger than the retained size: freed");
    assert_eq!(q.ledger().written(), 24_096);
}

#[test]
fn the_write_buffer_is_reused_once_drained() {
    let mut q = WriteQueue::new();
    q.copy(&[1; 100]);
    let first = q.buf.as_ptr();
    q.advance(100);
    q.copy(&[2; 100]);
    assert_eq!(q.buf.as_ptr(), first);
    assert_eq!(q.filled, 100);
}

/// What is pushed behind a mark that fails or panics is taken back
/// whole — copies (the tail of the run the mark ended in, wherever a
/// compaction moved it), shared buffers, rope ranges, framed text, ends of
/// responses — and the queue goes on as if it had never been pushed: the
/// same bytes and ledger as a queue that never saw it (the room it grew
/// is kept, as after any write).
#[test]
fn a_failed_mark_takes_back_every_kind_of_push() {
    let big = Bytes::from(vec![b'b'; 64 * 1024]);
    let rope = ropey::Rope::from_str(&"r".repeat(40_000));
    let text: SharedRope = std::sync::Arc::new(crate::Utf16(vec![0x20AC; 30_000]));
    for written_first in [0, 3, 10] {
        for panics in [false, true] {
            let mut q = WriteQueue::new();
            let mut twin = WriteQueue::new();
            for q in [&mut q, &mut twin] {
                q.copy(b"0123456789");
                q.end_response();
                q.advance(written_first);
            }
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                q.marked(|q| {
                    q.copy(b"size\r\n");
                    q.share(&big);
                    q.copy(b"tail");
                    q.share_rope(&rope, 0..rope.len_bytes());
                    q.stream(&text, Encoding::Utf8, Mode::Strict).unwrap();
                    // Past the buffer's room: a compaction moves the run.
                    q.copy(&[b'c'; 10_000]);
                    q.end_response();
                    if panics {
                        panic!("a push failed");
                    }
                    Err::<(), _>("a push failed")
                })
            }));
            assert_eq!(result.is_err(), panics);
            assert_eq!(q.remaining(), twin.remaining());
            assert_eq!(
                q.ledger().pending_responses(),
                twin.ledger().pending_responses()
            );
            assert_eq!(q.framed, 0);
            for q in [&mut q, &mut twin] {
                q.copy(b"|next");
                q.end_response();
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            q.write_to(&mut a).unwrap();
            twin.write_to(&mut b).unwrap();
            assert_eq!(a, b);
            assert_eq!(a, &b"0123456789|next"[written_first..]);
            assert_eq!(q.ledger().pending_responses(), 0);
        }
    }
    // A mark that holds keeps what was pushed.
    let mut q = WriteQueue::new();
    q.marked(|q| {
        q.copy(b"kept");
        Ok::<(), ()>(())
    })
    .unwrap();
    assert_eq!(q.remaining(), 4);
}
