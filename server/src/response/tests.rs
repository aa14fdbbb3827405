//! The writer's bytes: every body form by both strategies, heads from
//! templates equal to heads encoded, framing and persistence.

use std::sync::Arc;

use bytes::Bytes;
use unflat::queue::WriteQueue;

use super::*;
use crate::memory::{Budget, Memory};
use unflat::head::{HeaderName, HeaderValue};
use unflat::{Latin1, Utf16};

/// Everything the writer queues for `r`, Date value blanked.
fn written(strategy: Strategy, r: &Response<'_>, exchange: Exchange) -> Vec<u8> {
    let mut queue = WriteQueue::new();
    let memory = Arc::new(Memory::new(1 << 30, 1 << 30));
    let mut budget = Budget::new(crate::memory::Lease::open(&memory, 0), 0, 0, 0);
    Writer::new(strategy, 5, memory)
        .write(&mut queue, r, exchange, &mut budget, Second::now())
        .unwrap();
    let mut out = Vec::new();
    queue.write_to(&mut out).unwrap();
    let at = out
        .windows(6)
        .position(|w| w == b"Date: ")
        .expect("a Date line")
        + 6;
    out[at..at + 29].fill(b'*');
    out
}

#[test]
fn a_prepared_start_writes_the_bytes_of_its_lines() {
    let text = Line::parse("Content-Type", "text/plain").unwrap();
    let body = Bytes::from_static(b"four");
    for status in [Status::OK, Status::NOT_FOUND, Status::NO_CONTENT] {
        let prepared = Prepared::new(status, [Some(&text), None]);
        for strategy in [Strategy::Direct, Strategy::Flatten] {
            for (keep_alive, head_request) in [(true, false), (false, false), (true, true)] {
                let exchange = Exchange {
                    keep_alive,
                    head_request,
                    takes_chunked: true,
                };
                let body = if status.has_no_body() {
                    Body::Empty
                } else {
                    Body::SharedText(&body)
                };
                let lines = Response::with_lines(status, [Some(&text), None], body);
                let start = Response::prepared(&prepared, body);
                assert_eq!(start.status(), status);
                assert_eq!(
                    written(strategy, &start, exchange),
                    written(strategy, &lines, exchange),
                    "{status:?} {strategy:?} {exchange:?}"
                );
            }
        }
    }
}

#[test]
fn templates_write_the_bytes_of_each_head_however_shapes_alternate() {
    // More shapes than a thread keeps templates of, each asked for in
    // turn three times: a template is never another shape's bytes.
    let text = Line::parse("Content-Type", "text/plain").unwrap();
    let octets = Line::parse("Content-Type", "application/octet-stream").unwrap();
    // A head longer than a template holds: written without one.
    let long = Line::parse(
        "Content-Type",
        &format!("text/plain; x={}", "y".repeat(300)),
    )
    .unwrap();
    let starts = [
        Prepared::new(Status::OK, [Some(&text), None]),
        Prepared::new(Status::OK, [Some(&octets), None]),
        Prepared::new(Status::OK, [Some(&long), None]),
    ];
    let bodies: Vec<Bytes> = [0, 4, 10, 1000].map(|n| Bytes::from(vec![b'x'; n])).into();
    for _ in 0..3 {
        for (start, line) in starts.iter().zip([&text, &octets, &long]) {
            for body in &bodies {
                for (keep_alive, head_request, takes_chunked) in [
                    (true, false, true),
                    (false, false, true),
                    (true, true, false),
                ] {
                    let exchange = Exchange {
                        keep_alive,
                        head_request,
                        takes_chunked,
                    };
                    let lines = Response::with_lines(
                        Status::OK,
                        [Some(line), None],
                        Body::SharedText(body),
                    );
                    let start = Response::prepared(start, Body::SharedText(body));
                    assert_eq!(
                        written(Strategy::Direct, &start, exchange),
                        written(Strategy::Direct, &lines, exchange),
                        "{} bytes, {exchange:?}",
                        body.len()
                    );
                }
            }
        }
    }
}

#[test]
fn both_strategies_write_the_same_bytes_obs_text_included() {
    // obs-text in a field value is sent as the bytes it is (Latin-1) by
    // both strategies, whatever the body's form.
    let obs = Line::new(
        HeaderName::new("X-Obs").unwrap(),
        HeaderValue::from_bytes(b"caf\xe9 \xff").unwrap(),
    );
    let len = 70_000;
    let ascii = Bytes::from(vec![b'a'; len]);
    let rope = ropey::Rope::from_str(&"\u{e9}\u{20ac}".repeat(len / 2));
    let latin1: SharedRope = Arc::new(Latin1(vec![0xe9; len]));
    let two_byte: SharedRope = Arc::new(Utf16(vec![0x20ac; len]));
    let payload = Bytes::from_static(b"payload");
    let bodies = [
        Body::SharedText(&ascii),
        Body::Rope(&rope, rope.len_bytes()),
        Body::Transcoded(&latin1, 2 * len),
        Body::Transcoded(&two_byte, 3 * len),
        Body::Empty,
        Body::Bytes(b"plain"),
        Body::SharedBytes(&payload),
    ];
    for body in bodies {
        for head_request in [false, true] {
            let r = Response::with_lines(Status::OK, [None, Some(&obs)], body);
            let exchange = Exchange {
                keep_alive: true,
                head_request,
                takes_chunked: true,
            };
            let direct = written(Strategy::Direct, &r, exchange);
            assert!(direct.windows(8).any(|w| w == b"caf\xe9 \xff\r\n"));
            assert_eq!(direct, written(Strategy::Flatten, &r, exchange), "{body:?}");
        }
    }
}
