//! The server over raw TCP: pipelining, HTTP/1.0, HEAD, chunked bodies,
//! slow readers, and byte-identical output from both strategies.

use std::io::{Read, Write};

use crate::common::{
    closed, config, connect, end_string_body, exchange, large_body, read_response, sha256, start,
    start_demo, Raw,
};
use unflat_server::{Config, Strategy};

const KINDS: [&str; 3] = ["ascii", "latin1", "twobyte"];

#[test]
fn a_hundred_pipelined_requests_in_one_write_get_a_hundred_responses_in_order() {
    for strategy in [Strategy::Direct, Strategy::Flatten] {
        let server = start(strategy);
        let mut s = connect(&server);
        let mut batch = Vec::new();
        for i in 0..100 {
            let kind = KINDS[i % 3];
            batch.extend_from_slice(
                format!(
                    "GET /end-string/{}?kind={kind} HTTP/1.1\r\nHost: t\r\n\r\n",
                    i * 37
                )
                .as_bytes(),
            );
        }
        s.write_all(&batch).unwrap();
        let mut buf = Vec::new();
        for i in 0..100 {
            let r = read_response(&mut s, &mut buf, false).unwrap();
            assert_eq!(r.status, 200);
            assert_eq!(
                r.body,
                end_string_body(i * 37, KINDS[i % 3]),
                "{strategy:?} response {i}"
            );
        }
        assert!(buf.is_empty(), "no stray bytes");
    }
}

/// The values of every `Server` line of `r`.
fn servers(r: &Raw) -> Vec<&[u8]> {
    r.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("server"))
        .map(|(_, v)| v.as_slice())
        .collect()
}

#[test]
fn server_header_names_the_server_on_every_final_response_once() {
    // Routes' answers (templated, streamed, a body from memory), the core's
    // refusals, an error the client caused: each carries the line, once,
    // pipelined too; without the option none does.
    let requests = [
        "GET /end-string/4 HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /large/100000 HTTP/1.1\r\nHost: t\r\n\r\n",
        "HEAD /end-string/100 HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
        "DELETE /large/5 HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /end-string/1 HTTP/1.1\r\n\r\n",
    ];
    for strategy in [Strategy::Direct, Strategy::Flatten] {
        let named = start_demo(Config {
            server_header: Some("unflat-test/1.0 (caf\u{e9})".into()),
            ..config(strategy)
        })
        .unwrap();
        let plain = start(strategy);
        for req in requests {
            let a = exchange(&named, req.as_bytes());
            assert_eq!(
                servers(&a),
                [b"unflat-test/1.0 (caf\xe9)"],
                "{strategy:?} {req:?}"
            );
            let b = exchange(&plain, req.as_bytes());
            assert_eq!(b.header("server"), None, "{strategy:?} {req:?}");
            assert_eq!((a.status, &a.body), (b.status, &b.body), "{req:?}");
        }
        // Sixteen in one write, from the templates.
        let mut s = connect(&named);
        s.write_all(requests[0].repeat(16).as_bytes()).unwrap();
        let mut buf = Vec::new();
        for _ in 0..16 {
            let r = read_response(&mut s, &mut buf, false).unwrap();
            assert_eq!(servers(&r), [b"unflat-test/1.0 (caf\xe9)"], "{strategy:?}");
        }
    }
}

#[test]
fn both_strategies_answer_with_identical_bytes() {
    let direct = start(Strategy::Direct);
    let flatten = start(Strategy::Flatten);
    // (`GET /` is left out: its text names the server's own address.)
    let mut requests: Vec<String> = vec![
        "HEAD /end-string/100 HTTP/1.1\r\nHost: t\r\n\r\n".into(),
        "GET /large/100000 HTTP/1.1\r\nHost: t\r\n\r\n".into(),
        "GET /large/10 HTTP/1.1\r\nHost: t\r\n\r\n".into(),
        "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello".into(),
        "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n".into(),
        "DELETE /large/5 HTTP/1.1\r\nHost: t\r\n\r\n".into(),
        "GET /end-string/x HTTP/1.1\r\nHost: t\r\n\r\n".into(),
        "GET /end-string/5 HTTP/1.0\r\n\r\n".into(),
        "GET /end-string/1 HTTP/1.1\r\n\r\n".into(),
    ];
    for kind in KINDS {
        for len in [0, 3, 5000, 70000] {
            requests.push(format!(
                "GET /end-string/{len}?kind={kind} HTTP/1.1\r\nHost: t\r\n\r\n"
            ));
        }
    }
    for req in &requests {
        let a = exchange(&direct, req.as_bytes());
        let b = exchange(&flatten, req.as_bytes());
        assert_eq!(a.without_date(), b.without_date(), "{req:?}");
    }
}

#[test]
fn http10_closes_unless_asked_to_keep_alive() {
    let server = start(Strategy::Direct);
    let mut s = connect(&server);
    s.write_all(b"GET /end-string/3 HTTP/1.0\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"aaa"[..]));
    assert_eq!(r.header("connection"), Some("close"));
    assert!(
        closed(&mut s, &mut buf),
        "the server closes an HTTP/1.0 connection"
    );

    let mut s = connect(&server);
    for _ in 0..3 {
        s.write_all(b"GET /end-string/3 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.header("connection"), Some("keep-alive"));
        assert_eq!(r.body, b"aaa");
    }

    // HTTP/1.1 with Connection: close: answered, then closed, and a request
    // pipelined behind it is not processed.
    let mut s = connect(&server);
    s.write_all(b"GET /end-string/1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET /end-string/2 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!(
        (r.body.as_slice(), r.header("connection")),
        (&b"a"[..], Some("close"))
    );
    assert!(closed(&mut s, &mut buf));
}

#[test]
fn head_sends_the_get_headers_and_no_body() {
    let server = start(Strategy::Direct);
    let mut s = connect(&server);
    let mut buf = Vec::new();
    for kind in KINDS {
        s.write_all(format!("HEAD /end-string/1000?kind={kind} HTTP/1.1\r\nHost: t\r\n\r\nGET /end-string/1000?kind={kind} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).unwrap();
        let head = read_response(&mut s, &mut buf, true).unwrap();
        let get = read_response(&mut s, &mut buf, false).unwrap();
        assert!(head.body.is_empty());
        assert_eq!(head.header("content-length"), get.header("content-length"));
        assert_eq!(
            head.header("content-length").unwrap(),
            end_string_body(1000, kind).len().to_string()
        );
        assert_eq!(get.body, end_string_body(1000, kind));
    }
    s.write_all(b"HEAD /large/100000 HTTP/1.1\r\nHost: t\r\n\r\nGET /end-string/2 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let head = read_response(&mut s, &mut buf, true).unwrap();
    assert_eq!(head.header("content-length"), Some("100000"));
    assert_eq!(
        read_response(&mut s, &mut buf, false).unwrap().body,
        b"aa",
        "no body bytes after a HEAD response"
    );
}

#[test]
fn chunked_request_to_echo() {
    use base64::Engine as _;
    let server = start(Strategy::Direct);
    let mut s = connect(&server);
    // Split in odd places across writes, with a chunk extension and a trailer.
    let parts: [&[u8]; 5] = [
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhel",
        b"lo\r\n",
        b"7\r\n, world\r",
        b"\n0\r\nX-Trailer: yes\r\n",
        b"\r\nGET /end-string/2 HTTP/1.1\r\nHost: t\r\n\r\n",
    ];
    for p in parts {
        s.write_all(p).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf, false).unwrap();
    let json = String::from_utf8(r.body).unwrap();
    let body = base64::engine::general_purpose::STANDARD.encode("hello, world");
    assert!(
        json.ends_with(&format!("\"body\":\"{body}\"}}\n")),
        "{json}"
    );
    assert_eq!(
        read_response(&mut s, &mut buf, false).unwrap().body,
        b"aa",
        "keep-alive framing intact"
    );
}

#[test]
fn a_slow_reader_gets_every_byte_of_a_large_body() {
    for strategy in [Strategy::Direct, Strategy::Flatten] {
        let server = start(strategy);
        let size = 64 << 20;
        let mut s = connect(&server);
        s.write_all(format!("GET /large/{size} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
            .unwrap();
        // Small reads, with pauses, so the server's writes are partial and
        // resumed many times.
        let mut got = Vec::with_capacity(size + 512);
        let mut chunk = [0u8; 4096];
        let mut reads = 0u64;
        loop {
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed early after {} bytes", got.len());
            got.extend_from_slice(&chunk[..n]);
            reads += 1;
            if reads.is_multiple_of(1024) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                if got.len() >= end + 4 + size {
                    break;
                }
            }
        }
        let start = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert_eq!(got.len() - start, size);
        assert_eq!(
            sha256(&got[start..]),
            sha256(&large_body(size)),
            "{strategy:?}"
        );
    }
}

#[test]
fn raw_echo_answers_the_body_exactly_as_received() {
    let server = start(Strategy::Direct);
    // Every byte value, by Content-Length, then the same by chunks.
    let body: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    let mut s = connect(&server);
    let mut req = format!(
        "PUT /echo?format=raw HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    req.extend_from_slice(
        b"DELETE /echo?x=1&format=raw HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    for chunk in body.chunks(1000) {
        req.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        req.extend_from_slice(chunk);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\nGET /echo?format=raw HTTP/1.1\r\nHost: t\r\n\r\n");
    s.write_all(&req).unwrap();
    let mut buf = Vec::new();
    for expected in [&body[..], &body[..], b""] {
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        assert_eq!(r.body, expected);
    }
    // JSON stays the default; an unknown format is refused.
    let json = crate::common::exchange(
        &server,
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi",
    );
    assert_eq!(json.header("content-type"), Some("application/json"));
    let bad = crate::common::exchange(&server, b"GET /echo?format=xml HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(bad.status, 400);
}

/// No body the server generates is sniffed into another type: every
/// response that can carry one says its `Content-Type` and
/// `X-Content-Type-Options: nosniff` — errors echoing a decoded query
/// value included — and so does the `HEAD` answer, as `GET`'s would; a 204
/// says neither.
#[test]
fn every_generated_body_says_its_type_and_nosniff() {
    let server = start(Strategy::Direct);
    for (request, status, content_type) in [
        (
            "GET / HTTP/1.1\r\nHost: t\r\n\r\n",
            200,
            "text/plain; charset=utf-8",
        ),
        (
            "GET /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n",
            200,
            "text/plain; charset=utf-8",
        ),
        (
            "HEAD /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n",
            200,
            "text/plain; charset=utf-8",
        ),
        (
            "GET /large/5 HTTP/1.1\r\nHost: t\r\n\r\n",
            200,
            "application/octet-stream",
        ),
        (
            "HEAD /large/5 HTTP/1.1\r\nHost: t\r\n\r\n",
            200,
            "application/octet-stream",
        ),
        (
            "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n",
            200,
            "text/plain; charset=utf-8",
        ),
        (
            "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n",
            200,
            "text/plain; version=0.0.4; charset=utf-8",
        ),
        (
            "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi",
            200,
            "application/json",
        ),
        (
            "POST /echo?format=raw HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi",
            200,
            "application/octet-stream",
        ),
        (
            "GET /end-string/3?kind=%3Cscript%3E HTTP/1.1\r\nHost: t\r\n\r\n",
            400,
            "text/plain; charset=utf-8",
        ),
        (
            "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
            404,
            "text/plain; charset=utf-8",
        ),
        (
            "DELETE /healthz HTTP/1.1\r\nHost: t\r\n\r\n",
            405,
            "text/plain; charset=utf-8",
        ),
        ("GET / HTTP/1.1\r\n\r\n", 400, "text/plain; charset=utf-8"),
    ] {
        let r = crate::common::exchange(&server, request.as_bytes());
        let first = request.lines().next().unwrap();
        assert_eq!(r.status, status, "{first}");
        assert_eq!(r.header("content-type"), Some(content_type), "{first}");
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{first}"
        );
    }
    let r = crate::common::exchange(&server, b"OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 204);
    assert_eq!(r.header("x-content-type-options"), None);
    assert_eq!(r.header("content-type"), None);
}
