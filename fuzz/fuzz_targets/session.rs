//! Arbitrary bytes, split arbitrarily, fed to the core's session in memory,
//! serving the trivial service the session tests use: it must never panic,
//! its queue must stay within its limits, and what it writes must be a
//! sequence of well-formed responses, streamed ones included.
#![no_main]

use std::sync::OnceLock;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use unflat::queue::WriteQueue;
use unflat_server::session::{Session, Step};
use unflat_server::{Config, Stack};

// The session tests' trivial service, included by path. The fuzz crate
// cannot use the tests' helpers, and a module of unflat-server kept for
// tests alone would widen the core's public API.
#[path = "../../server/tests/common/trivial.rs"]
mod trivial;

use trivial::Trivial;

fn app() -> &'static Stack<Trivial> {
    static APP: OnceLock<Stack<Trivial>> = OnceLock::new();
    APP.get_or_init(|| {
        let config = Config {
            // Small limits, so the fuzzer reaches them.
            max_body: 1024,
            max_head: 2048,
            max_request_line: 512,
            max_fields: 16,
            max_queued_bytes: 8192,
            max_queued_responses: 8,
            ..Config::default()
        };
        // Bodies of 64 Ki characters at most, so that each run stays quick.
        let address = "127.0.0.1:0".parse().unwrap();
        Stack::with_service(config, address, None, |_| Trivial::new(65536))
    })
}

/// Checks that `out` is a sequence of well-formed responses. A response to
/// HEAD carries a length but no body, and a raw echo's body may itself look
/// like a response, so at each response both readings are tried (the body
/// follows, or not): one of them must parse to the end. Positions that
/// failed are remembered, so the search stays linear.
fn check_responses(out: &[u8]) {
    let mut failed = std::collections::HashSet::new();
    assert!(
        parses_from(out, 0, &mut failed),
        "malformed responses: {:?}",
        String::from_utf8_lossy(&out[..out.len().min(400)])
    );
}

fn parses_from(out: &[u8], at: usize, failed: &mut std::collections::HashSet<usize>) -> bool {
    if at == out.len() {
        return true;
    }
    if failed.contains(&at) {
        return false;
    }
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let mut res = httparse::Response::new(&mut fields);
    let Ok(httparse::Status::Complete(len)) = res.parse(&out[at..]) else {
        failed.insert(at);
        return false;
    };
    let named = |name: &'static str| res.headers.iter().filter(move |h| h.name.eq_ignore_ascii_case(name));
    let cl: Vec<_> = named("content-length").collect();
    let te: Vec<_> = named("transfer-encoding").collect();
    assert!(cl.len() <= 1 && !(!te.is_empty() && !cl.is_empty()), "CL and TE, or two CL");
    assert!(te.iter().all(|h| h.value == b"chunked"), "a coding other than chunked");
    let closes = named("connection").any(|h| h.value == b"close");
    let body: usize = cl.first().map_or(0, |h| std::str::from_utf8(h.value).unwrap().parse().unwrap());
    let code = res.code.unwrap();
    let has_body = code >= 200 && code != 204 && code != 304;
    let next = at + len;
    // The body as its framing says: a length, chunks (a stream to
    // HTTP/1.1), or, with neither, the rest of the output up to the close
    // (a stream to HTTP/1.0); or no body at all (HEAD, 1xx, 204, 304).
    let framed = if !has_body {
        false
    } else if !te.is_empty() {
        trivial::chunked(&out[next..]).is_some_and(|(_, _, took)| parses_from(out, next + took, failed))
    } else if cl.is_empty() {
        closes
    } else {
        body > 0 && next + body <= out.len() && parses_from(out, next + body, failed)
    };
    let ok = framed || parses_from(out, next, failed);
    if !ok {
        failed.insert(at);
    }
    ok
}


fuzz_target!(|data: &[u8]| {
    // The first byte picks the read size, the rest is the stream.
    let Some((&chunk, stream)) = data.split_first() else { return };
    let chunk = usize::from(chunk).max(1);
    let app = app();
    let mut session = Session::new(app.protocol());
    let mut queue = WriteQueue::new();
    let mut input = BytesMut::new();
    let mut out = Vec::new();
    'feed: for part in stream.chunks(chunk) {
        input.extend_from_slice(part);
        loop {
            let step = session.process(&mut input, &mut queue, app.protocol());
            // Bounded: past its limits the session asks for a flush before
            // it queues more than one more response.
            assert!(queue.ledger().pending_responses() <= app.config().max_queued_responses + 1);
            queue.write_to(&mut out).unwrap();
            match step {
                Step::Flush => continue,
                Step::Defer(job) => session.resume(job.wait()),
                Step::Wait => session.wait(),
                Step::Close | Step::Reset => break 'feed,
                Step::Read(_) => break,
            }
        }
    }
    check_responses(&out);
});
