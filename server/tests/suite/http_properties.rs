//! Properties of the core, run in memory through the sans-IO session on
//! a trivial service (`common/trivial.rs`), the same properties the
//! session fuzz target checks, on stable: a request split at any byte
//! boundary is answered the same; every response parses back with
//! httparse; a response never has both Content-Length and
//! Transfer-Encoding; no CR, LF or NUL appears in a head outside line
//! ends; and each body form, status and request kind gets exactly the
//! bytes it must. (The head builder's own properties are the encoder's:
//! `encoder/tests/head.rs`.)

use crate::common::trivial::{chunked, Form};
use crate::common::{read_response, serve_in_memory as serve, trivial, undated, Raw};
use bytes::{Buf, BytesMut};
use proptest::prelude::*;
use unflat::queue::WriteQueue;
use unflat_server::session::{Session, Step};

/// Splits `out` into responses and checks each head; returns their count.
fn check_responses(mut out: &[u8], head_requests: &[bool]) -> Result<usize, TestCaseError> {
    let mut n = 0;
    while !out.is_empty() {
        let mut fields = [httparse::EMPTY_HEADER; 32];
        let mut res = httparse::Response::new(&mut fields);
        let len = match res.parse(out) {
            Ok(httparse::Status::Complete(len)) => len,
            other => {
                return Err(TestCaseError::fail(format!(
                    "unparsable response: {other:?}"
                )))
            }
        };
        let head = &out[..len];
        // CR and LF only as CRLF line ends; no NUL anywhere.
        for (i, &b) in head.iter().enumerate() {
            prop_assert!(b != 0, "NUL in a head");
            if b == b'\r' {
                prop_assert_eq!(head.get(i + 1), Some(&b'\n'));
            }
            if b == b'\n' {
                prop_assert!(i > 0 && head[i - 1] == b'\r');
            }
        }
        let has = |name: &str| {
            res.headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case(name))
                .count()
        };
        prop_assert!(
            !(has("content-length") > 0 && has("transfer-encoding") > 0),
            "CL and TE"
        );
        prop_assert!(has("content-length") <= 1);
        let code = res.code.unwrap();
        let value = |name: &str| {
            res.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| std::str::from_utf8(h.value).unwrap())
        };
        let no_body = code < 200 || code == 204 || code == 304;
        let body_len: usize = if no_body || head_requests.get(n).copied().unwrap_or(false) {
            0
        } else if let Some(te) = value("transfer-encoding") {
            prop_assert_eq!(te, "chunked");
            match chunked(&out[len..]) {
                Some((_, _, consumed)) => consumed,
                None => return Err(TestCaseError::fail("a chunked body malformed or cut short")),
            }
        } else if let Some(cl) = value("content-length") {
            cl.parse().unwrap()
        } else {
            // A stream to HTTP/1.0: its body ends with the connection.
            prop_assert_eq!(
                value("connection"),
                Some("close"),
                "no length, yet kept open"
            );
            out.len() - len
        };
        prop_assert!(out.len() >= len + body_len, "body cut short");
        out = &out[len + body_len..];
        if code >= 200 {
            n += 1;
        }
    }
    Ok(n)
}

/// Requests, good and bad, the generator draws from.
fn request() -> impl Strategy<Value = (Vec<u8>, bool)> {
    let statuses = prop_oneof![Just(200u16), Just(204), Just(304), Just(404)];
    let paths = prop_oneof![
        (0usize..5000, 0..Form::ALL.len(), statuses, 0usize..5).prop_map(
            |(n, form, status, option)| format!(
                "/n/{n}?form={}&status={status}{}",
                Form::ALL[form].name(),
                ["", "&later", "&unsent", "&chunks=3", "&chunks=1&later"][option]
            )
        ),
        Just("/".to_string()),
        Just("/echo".to_string()),
        Just("/refuse".to_string()),
        "/[a-z%0-9]{0,12}".prop_map(|p| p),
    ];
    let methods = prop_oneof![Just("GET"), Just("HEAD"), Just("POST"), Just("PUT")];
    let extra = prop::collection::vec(("[A-Za-z-]{1,10}", "[ -~]{0,20}"), 0..4);
    let expect = any::<bool>();
    let body = prop_oneof![
        Just(None),
        "[a-z]{0,40}".prop_map(|b| Some((false, b))),
        "[a-z]{0,40}".prop_map(|b| Some((true, b))),
    ];
    (methods, paths, extra, body, any::<bool>(), expect).prop_map(
        |(m, p, extra, body, v10, expect)| {
            let mut r = format!("{m} {p} HTTP/1.{}\r\nHost: t\r\n", if v10 { 0 } else { 1 });
            if v10 {
                r.push_str("Connection: keep-alive\r\n");
            } else if expect {
                r.push_str("Expect: 100-continue\r\n");
            }
            for (n, v) in extra {
                r.push_str(&format!("X-{n}: {}\r\n", v.trim()));
            }
            match body {
                None => r.push_str("\r\n"),
                Some((true, b)) if !v10 => {
                    r.push_str("Transfer-Encoding: chunked\r\n\r\n");
                    if !b.is_empty() {
                        r.push_str(&format!("{:x}\r\n{b}\r\n", b.len()));
                    }
                    r.push_str("0\r\n\r\n");
                }
                Some((_, b)) => r.push_str(&format!("Content-Length: {}\r\n\r\n{b}", b.len())),
            }
            (r.into_bytes(), m == "HEAD")
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_request_split_anywhere_is_answered_the_same(reqs in prop::collection::vec(request(), 1..3), seed in any::<u64>()) {
        let app = trivial();
        let bytes: Vec<u8> = reqs.iter().flat_map(|r| r.0.clone()).collect();
        let heads: Vec<bool> = reqs.iter().map(|r| r.1).collect();
        let (whole, _) = serve(&app, &[&bytes]);
        let answered = check_responses(&whole, &heads)?;
        prop_assert!(answered >= 1);
        // Every single split point, and one random multi-way split.
        for cut in 0..=bytes.len() {
            let (a, b) = bytes.split_at(cut);
            let (split, _) = serve(&app, &[a, b]);
            prop_assert_eq!(undated(&split), undated(&whole), "split at {}", cut);
        }
        let mut cuts: Vec<usize> = (0..5).map(|i| (seed.rotate_left(i * 7) as usize) % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut parts = Vec::new();
        let mut last = 0;
        for c in cuts.into_iter().chain([bytes.len()]) {
            parts.push(&bytes[last..c]);
            last = c;
        }
        let (many, _) = serve(&app, &parts);
        prop_assert_eq!(undated(&many), undated(&whole));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_any_output_is_well_formed(junk in prop::collection::vec(any::<u8>(), 0..600)) {
        let app = trivial();
        let (out, _) = serve(&app, &[&junk]);
        check_responses(&out, &[])?;
    }

}

#[test]
fn a_large_transcoded_body_costs_one_frame_of_memory() {
    // 4 M two-byte characters: 12 MB of UTF-8, which used to be encoded into
    // the connection's write buffer whole (48 MB reserved for the worst case).
    let app = trivial();
    let mut session = Session::new(app.protocol());
    let mut queue = WriteQueue::with_policy(app.config().policy());
    let mut input =
        BytesMut::from(&b"GET /n/4000000?form=twobyte&later HTTP/1.1\r\nHost: t\r\n\r\n"[..]);
    // Made `later`: the job is handed to the connection before anything is
    // written.
    let Step::Defer(job) = session.process(&mut input, &mut queue, app.protocol()) else {
        panic!("a body made later is waited for first");
    };
    assert!(!queue.has_remaining());
    session.resume(job.wait());
    assert!(matches!(
        session.process(&mut input, &mut queue, app.protocol()),
        Step::Read(_)
    ));
    let head = queue.copied_len();
    assert!(head < 512, "only the head is copied: {head} bytes");
    assert_eq!(queue.remaining(), head + 12_000_000);
    // Drained a frame at a time, the bytes are the text.
    let mut out = Vec::new();
    queue.write_to(&mut out).unwrap();
    assert_eq!(out.len(), head + 12_000_000);
    assert!(out[head..].chunks(3).all(|c| c == "€".as_bytes()));
}

/// Reads the responses in `out` one after the other, `head_requests`
/// saying which answer a HEAD; all of `out` must be read.
fn responses(out: &[u8], head_requests: &[bool]) -> Vec<Raw> {
    let mut buf = out.to_vec();
    let rs = head_requests
        .iter()
        .map(|&head| read_response(&mut &[][..], &mut buf, head).unwrap())
        .collect();
    assert!(
        buf.is_empty(),
        "more than the responses: {:?}",
        buf.escape_ascii().to_string()
    );
    rs
}

#[test]
fn every_body_form_is_framed_exactly_on_get_and_head_pipelined() {
    let app = trivial();
    let mut input = Vec::new();
    let mut expect = Vec::new();
    for form in Form::ALL {
        // Empty, short, and past a turn of the session (64 KiB).
        for len in [0, 1, 100, 70_000] {
            for option in ["", "&later", "&unsent"] {
                for method in ["GET", "HEAD"] {
                    let target = format!("/n/{len}?form={}{option}", form.name());
                    input.extend(format!("{method} {target} HTTP/1.1\r\nHost: t\r\n\r\n").bytes());
                    expect.push((target, method == "HEAD", form.body(len)));
                }
            }
        }
    }
    let heads: Vec<bool> = expect.iter().map(|e| e.1).collect();
    let (out, closed) = serve(&app, &[&input]);
    assert!(!closed);
    for (r, (target, head, body)) in responses(&out, &heads).iter().zip(&expect) {
        let what = format!("{} {target}", if *head { "HEAD" } else { "GET" });
        assert_eq!(r.status, 200, "{what}");
        assert_eq!(
            r.header("content-length"),
            Some(&*body.len().to_string()),
            "{what}"
        );
        assert_eq!(r.header("connection"), Some("keep-alive"), "{what}");
        assert!(r.header("transfer-encoding").is_none(), "{what}");
        // Nothing after a HEAD's head: the next response follows at once.
        let sent: &[u8] = if *head { b"" } else { body };
        assert!(r.body == sent, "{what}: the body");
    }
    // One response, its head exactly.
    let (out, _) = serve(&app, &[b"GET /n/3 HTTP/1.1\r\nHost: t\r\n\r\n"]);
    assert_eq!(
        String::from_utf8(undated(&out)).unwrap(),
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n\
         X-Content-Type-Options: nosniff\r\nDate: *****************************\r\n\
         Content-Length: 3\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\nabc"
    );
}

#[test]
fn every_body_form_streams_chunked_bare_and_after_head() {
    let app = trivial();
    for form in Form::ALL {
        // Empty, short, and a chunk longer than a frame of the queue.
        for len in [0, 5, 70_000] {
            for chunks in [1, 4, 9] {
                for option in ["", "&later"] {
                    let target = format!("/n/{len}?form={}&chunks={chunks}{option}", form.name());
                    // Pipelined, GET then HEAD: a byte of framing wrong
                    // anywhere breaks what follows.
                    let request = format!(
                        "GET {target} HTTP/1.1\r\nHost: t\r\n\r\nHEAD {target} HTTP/1.1\r\nHost: t\r\n\r\n"
                    );
                    let (mut buf, closed) = serve(&app, &[request.as_bytes()]);
                    assert!(!closed, "{target}");
                    let get = read_response(&mut &[][..], &mut buf, true).unwrap();
                    assert_eq!(get.status, 200, "{target}");
                    assert_eq!(get.header("content-length"), None, "{target}");
                    assert_eq!(get.header("transfer-encoding"), Some("chunked"), "{target}");
                    assert_eq!(get.header("connection"), Some("keep-alive"), "{target}");
                    let (sizes, body, took) = chunked(&buf).expect("a chunked body");
                    // Chunk `i` holds characters `i * len / K` up to
                    // `(i + 1) * len / K`; the empty ones are skipped.
                    let expected: Vec<usize> = (0..chunks)
                        .map(|i| ((i + 1) * len / chunks - i * len / chunks) * form.width())
                        .filter(|&n| n > 0)
                        .collect();
                    assert_eq!(sizes, expected, "{target}");
                    assert!(body == form.body(len), "{target}: the body");
                    buf.drain(..took);
                    let head = read_response(&mut &[][..], &mut buf, true).unwrap();
                    assert_eq!(
                        head.header("transfer-encoding"),
                        Some("chunked"),
                        "{target}"
                    );
                    assert!(buf.is_empty(), "{target}: nothing after a HEAD's head");

                    // HTTP/1.0: the chunks bare, the close ends them.
                    let request = format!("GET {target} HTTP/1.0\r\n\r\n");
                    let (mut buf, closed) = serve(&app, &[request.as_bytes()]);
                    let old = read_response(&mut &[][..], &mut buf, true).unwrap();
                    assert_eq!(old.header("content-length"), None, "{target}");
                    assert_eq!(old.header("transfer-encoding"), None, "{target}");
                    assert_eq!((old.header("connection"), closed), (Some("close"), true));
                    assert!(buf == form.body(len), "{target}: the bare body");
                }
            }
        }
    }
}

#[test]
fn no_content_and_not_modified_carry_no_body_nor_length() {
    let app = trivial();
    let mut input = Vec::new();
    let mut heads = Vec::new();
    for status in [204, 304, 200] {
        // The service gives a body of 5 characters, or a stream of them: the
        // core sends none after 204 and 304.
        for stream in ["", "&chunks=2"] {
            for method in ["GET", "HEAD"] {
                input.extend(
                    format!(
                        "{method} /n/5?form=rope&status={status}{stream} HTTP/1.1\r\nHost: t\r\n\r\n"
                    )
                    .bytes(),
                );
                heads.push(method == "HEAD");
            }
        }
    }
    let (out, _) = serve(&app, &[&input]);
    let mut buf = out;
    let mut next = |head| read_response(&mut &[][..], &mut buf, head).unwrap();
    let rs: Vec<Raw> = heads[..8].iter().map(|&head| next(head)).collect();
    for r in &rs {
        assert!(r.header("content-length").is_none(), "{}", r.status);
        assert!(r.header("transfer-encoding").is_none(), "{}", r.status);
        // nosniff is for a body, which these never have.
        assert!(r.header("x-content-type-options").is_none());
    }
    // What follows a 204 is the next response: no body was sent.
    assert_eq!(
        rs.iter().map(|r| r.status).collect::<Vec<_>>(),
        [204, 204, 204, 204, 304, 304, 304, 304]
    );
    // The 200s, with their bodies.
    let (get, head) = (next(false), next(true));
    assert_eq!(
        (get.header("content-length"), &get.body[..]),
        (Some("5"), &b"abcde"[..])
    );
    assert_eq!(
        (head.header("content-length"), head.body.len()),
        (Some("5"), 0)
    );
    let get = next(true);
    assert_eq!(get.header("transfer-encoding"), Some("chunked"));
    let (sizes, body, took) = chunked(&buf).expect("a chunked body");
    assert_eq!((sizes, &body[..]), (vec![2, 3], &b"abcde"[..]));
    buf.drain(..took);
    let head = read_response(&mut &[][..], &mut buf, true).unwrap();
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    assert!(buf.is_empty(), "nothing after a HEAD's head");
}

#[test]
fn persistence_expect_continue_and_refusals() {
    let app = trivial();
    // HTTP/1.0: closed after its response unless it asks to keep alive.
    let (out, closed) = serve(
        &app,
        &[b"GET /n/2 HTTP/1.0\r\n\r\nGET /n/2 HTTP/1.0\r\n\r\n"],
    );
    let r = &responses(&out, &[false])[0];
    assert_eq!((r.header("connection"), closed), (Some("close"), true));
    let (out, closed) = serve(
        &app,
        &[b"GET /n/2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /n/2 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET /n/1 HTTP/1.1\r\nHost: t\r\n\r\n"],
    );
    let rs = responses(&out, &[false, false]);
    assert_eq!(rs[0].header("connection"), Some("keep-alive"));
    assert_eq!((rs[1].header("connection"), closed), (Some("close"), true));

    // Expect: 100-continue: the interim status, then the answer to the body.
    let continued =
        b"POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
    let (out, closed) = serve(&app, &[continued, b"hello"]);
    assert!(
        out.starts_with(b"HTTP/1.1 100 Continue\r\n\r\n"),
        "{:?}",
        out.escape_ascii().to_string()
    );
    let r = &responses(&out[25..], &[false])[0];
    assert_eq!((r.status, &r.body[..], closed), (200, &b"hello"[..], false));

    // Refused from its head: the final status at once, no 100, and the
    // connection closes with the body unsent and nothing after answered.
    for target in ["/refuse", "/n/2?status=404", "/n/x"] {
        let request = format!(
            "POST {target} HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
        );
        let (out, closed) = serve(
            &app,
            &[request.as_bytes(), b"GET /n/1 HTTP/1.1\r\nHost: t\r\n\r\n"],
        );
        let r = &responses(&out, &[false])[0];
        assert!((400..500).contains(&r.status), "{target}: {}", r.status);
        assert_eq!(
            (r.header("connection"), closed),
            (Some("close"), true),
            "{target}"
        );
    }
    // Without the Expect, the refusal is an answer like another: its body
    // is read and the connection kept.
    let (out, closed) = serve(
        &app,
        &[b"POST /refuse HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhelloGET /n/1 HTTP/1.1\r\nHost: t\r\n\r\n"],
    );
    let rs = responses(&out, &[false, false]);
    assert_eq!(
        (rs[0].status, rs[1].status, &rs[1].body[..], closed),
        (403, 200, &b"a"[..], false)
    );

    // The core's own refusal of a head it cannot read: 400, closed.
    let (out, closed) = serve(
        &app,
        &[b"GET /n/1 HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\nGET /n/1 HTTP/1.1\r\nHost: t\r\n\r\n"],
    );
    let r = &responses(&out, &[false])[0];
    assert_eq!(
        (r.status, r.header("connection"), closed),
        (400, Some("close"), true)
    );
}
