//! Properties of the protocol code, run in memory through the sans-IO
//! session (the same properties the fuzz targets check, on stable):
//! a request split at any byte boundary is answered the same; every response
//! parses back with httparse; a response never has both Content-Length and
//! Transfer-Encoding; no CR, LF or NUL appears in a head outside line ends.
//! (The head builder's own properties are the encoder's:
//! `encoder/tests/head.rs`.)

mod common;

use bytes::{Buf, BytesMut};
use common::{app, serve_in_memory as serve, undated};
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
        let body_len: usize = if code < 200 || head_requests.get(n).copied().unwrap_or(false) {
            0
        } else {
            res.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                .unwrap_or(0)
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
    let paths = prop_oneof![
        (0usize..3000, 0usize..3).prop_map(|(n, k)| format!(
            "/end-string/{n}?kind={}",
            ["ascii", "latin1", "twobyte"][k]
        )),
        (0usize..5000).prop_map(|n| format!("/large/{n}")),
        Just("/".to_string()),
        Just("/echo".to_string()),
        "/[a-z%0-9]{0,12}".prop_map(|p| p),
    ];
    let methods = prop_oneof![Just("GET"), Just("HEAD"), Just("POST"), Just("PUT")];
    let extra = prop::collection::vec(("[A-Za-z-]{1,10}", "[ -~]{0,20}"), 0..4);
    let body = prop_oneof![
        Just(None),
        "[a-z]{0,40}".prop_map(|b| Some((false, b))),
        "[a-z]{0,40}".prop_map(|b| Some((true, b))),
    ];
    (methods, paths, extra, body, any::<bool>()).prop_map(|(m, p, extra, body, v10)| {
        let mut r = format!("{m} {p} HTTP/1.{}\r\nHost: t\r\n", if v10 { 0 } else { 1 });
        if v10 {
            r.push_str("Connection: keep-alive\r\n");
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
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_request_split_anywhere_is_answered_the_same(reqs in prop::collection::vec(request(), 1..3), seed in any::<u64>()) {
        let app = app();
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
        let app = app();
        let (out, _) = serve(&app, &[&junk]);
        check_responses(&out, &[])?;
    }

}

#[test]
fn a_large_transcoded_body_costs_one_frame_of_memory() {
    // 4 M two-byte characters: 12 MB of UTF-8, which used to be encoded into
    // the connection's write buffer whole (48 MB reserved for the worst case).
    let app = app();
    let mut session = Session::new(app.protocol());
    let mut queue = WriteQueue::with_policy(app.config().policy());
    let mut input =
        BytesMut::from(&b"GET /end-string/4000000?kind=twobyte HTTP/1.1\r\nHost: t\r\n\r\n"[..]);
    // The body is built first (off the async workers, in a server).
    let Step::Defer(job) = session.process(&mut input, &mut queue, app.protocol()) else {
        panic!("a body not yet built is built first");
    };
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
