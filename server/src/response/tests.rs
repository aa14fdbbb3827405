//! The writer's bytes: every body form by both strategies, heads from
//! templates equal to heads encoded, framing and persistence.

use std::sync::Arc;

use bytes::Bytes;
use unflat::queue::WriteQueue;

use super::*;
use crate::memory::{Budget, Memory};
use unflat::head::{HeaderName, HeaderValue};
use unflat::{Latin1, Utf16};

thread_local! {
    /// A writer of each strategy per test thread, kept from one response
    /// to the next as a server's is: its templates too.
    static WRITERS: [Writer; 2] = [Strategy::Direct, Strategy::Flatten].map(|s| writer(s, 5, None));
}

/// A writer by `strategy` advertising `idle_secs`, sending `server`.
fn writer(strategy: Strategy, idle_secs: u64, server: Option<Line>) -> Writer {
    Writer::new(
        strategy,
        idle_secs,
        server,
        Arc::new(Memory::new(1 << 30, 1 << 30)),
    )
}

/// Everything the writer of `strategy` queues for `r`, Date value blanked.
fn written(strategy: Strategy, r: &Response<'_>, exchange: Exchange) -> Vec<u8> {
    WRITERS.with(|w| written_by(&w[strategy as usize], r, None, exchange))
}

/// Everything `writer` queues for `r` with `fields` of its own, Date value
/// blanked.
fn written_by(
    writer: &Writer,
    r: &Response<'_>,
    fields: Option<&Fields<'_>>,
    exchange: Exchange,
) -> Vec<u8> {
    let mut queue = WriteQueue::new();
    let memory = Arc::new(Memory::new(1 << 30, 1 << 30));
    let mut budget = Budget::new(crate::memory::Lease::open(&memory, 0), 0, 0, 0);
    let second = Second::now();
    match fields {
        None => writer.write(&mut queue, r, exchange, &mut budget, second),
        Some(f) => writer.write_with(&mut queue, r, f, exchange, &mut budget, second),
    }
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

/// The head of `bytes`, as text.
fn head_of(bytes: &[u8]) -> String {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    String::from_utf8(bytes[..end].to_vec()).unwrap()
}

#[test]
fn writers_on_one_thread_keep_to_their_own_lines() {
    // Two servers' writers taking turns on one thread (an application
    // serving both on its own runtime): each head has its writer's
    // `Keep-Alive` and `Server`, whatever the other's templates hold.
    let text = Line::parse("Content-Type", "text/plain").unwrap();
    let start = Prepared::new(Status::OK, [Some(&text), None]);
    let body = Bytes::from_static(b"four");
    let a = writer(Strategy::Direct, 5, None);
    let b = writer(
        Strategy::Direct,
        60,
        Some(Line::parse(SERVER, "b/1").unwrap()),
    );
    let exchange = Exchange {
        keep_alive: true,
        head_request: false,
        takes_chunked: true,
    };
    for _ in 0..3 {
        let r = Response::prepared(&start, Body::SharedText(&body));
        let (from_a, from_b) = (
            written_by(&a, &r, None, exchange),
            written_by(&b, &r, None, exchange),
        );
        assert!(
            head_of(&from_a).contains("Keep-Alive: timeout=5\r\n"),
            "{}",
            head_of(&from_a)
        );
        assert!(!head_of(&from_a).contains("Server"), "{}", head_of(&from_a));
        assert_eq!(
            head_of(&from_b),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Content-Type-Options: nosniff\r\n\
             Server: b/1\r\nDate: *****************************\r\nContent-Length: 4\r\n\
             Connection: keep-alive\r\nKeep-Alive: timeout=60\r\n\r\n"
        );
    }
}

#[test]
fn the_server_line_goes_on_every_final_response_that_names_none() {
    let server = Line::parse(SERVER, "unflat/0.1").unwrap();
    let own = Line::parse("server", "app/2").unwrap();
    let text = Line::parse("Content-Type", "text/plain").unwrap();
    let body = Bytes::from_static(b"four");
    let exchange = Exchange {
        keep_alive: true,
        head_request: false,
        takes_chunked: true,
    };
    for strategy in [Strategy::Direct, Strategy::Flatten] {
        let w = writer(strategy, 5, Some(server.clone()));
        let plain = Prepared::new(Status::OK, [Some(&text), None]);
        let named = Prepared::new(Status::OK, [Some(&text), Some(&own)]);
        let servers = |r: &Response<'_>, fields: Option<&Fields<'_>>| -> Vec<String> {
            head_of(&written_by(&w, r, fields, exchange))
                .lines()
                .filter(|l| l.to_ascii_lowercase().starts_with("server:"))
                .map(str::to_string)
                .collect()
        };
        let ours = vec!["Server: unflat/0.1".to_string()];
        let theirs = vec!["server: app/2".to_string()];
        // Twice: the second from the template.
        for _ in 0..2 {
            let r = Response::prepared(&plain, Body::SharedText(&body));
            assert_eq!(servers(&r, None), ours, "{strategy:?}");
            let r = Response::prepared(&named, Body::SharedText(&body));
            assert_eq!(servers(&r, None), theirs, "{strategy:?}");
        }
        let r = Response::with_lines(Status::NOT_FOUND, [Some(&text), None], Body::Empty);
        assert_eq!(servers(&r, None), ours, "{strategy:?}");
        let r = Response::with_lines(Status::OK, [Some(&own), None], Body::Empty);
        assert_eq!(servers(&r, None), theirs, "{strategy:?}");
        let r = Response::new(Status::NO_CONTENT, Body::Empty);
        let mut fields = Fields::new();
        fields.add("Cache-Control", "no-store");
        assert_eq!(servers(&r, Some(&fields)), ours, "{strategy:?}");
        fields.add("SERVER", "app/3");
        assert_eq!(
            servers(&r, Some(&fields)),
            ["SERVER: app/3"],
            "{strategy:?}"
        );
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
