//! Arbitrary bytes, split arbitrarily, fed to the connection's protocol
//! state machine in memory: it must never panic, its queue must stay within
//! its limits, and what it writes must be a sequence of well-formed
//! responses.
#![no_main]

use std::sync::OnceLock;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use unflat::queue::WriteQueue;
use unflat_server::session::{Session, Step};
use unflat_server::{App, Config};

fn app() -> &'static App {
    static APP: OnceLock<App> = OnceLock::new();
    APP.get_or_init(|| {
        let config = Config {
            // Small limits, so the fuzzer reaches them.
            max_len: 4096,
            max_large: 65536,
            max_body: 1024,
            max_head: 2048,
            max_request_line: 512,
            max_fields: 16,
            max_queued_bytes: 8192,
            max_queued_responses: 8,
            ..Config::default()
        };
        App::new(config, "127.0.0.1:0".parse().unwrap())
    })
}

fn check_responses(mut out: &[u8]) {
    while !out.is_empty() {
        let mut fields = [httparse::EMPTY_HEADER; 32];
        let mut res = httparse::Response::new(&mut fields);
        let len = match res.parse(out) {
            Ok(httparse::Status::Complete(len)) => len,
            other => panic!("malformed response {other:?}: {:?}", String::from_utf8_lossy(&out[..out.len().min(200)])),
        };
        let cl: Vec<_> = res.headers.iter().filter(|h| h.name.eq_ignore_ascii_case("content-length")).collect();
        let te = res.headers.iter().any(|h| h.name.eq_ignore_ascii_case("transfer-encoding"));
        assert!(cl.len() <= 1 && !(te && !cl.is_empty()));
        // HEAD responses carry a length but no body; both are accepted here
        // as long as what follows parses.
        let body: usize = cl.first().map_or(0, |h| std::str::from_utf8(h.value).unwrap().parse().unwrap());
        let code = res.code.unwrap();
        let rest = &out[len..];
        out = if code >= 200 && rest.len() >= body && (body == 0 || !rest.starts_with(b"HTTP/1.1 ")) {
            &rest[body..]
        } else {
            rest
        };
    }
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks the read size, the rest is the stream.
    let Some((&chunk, stream)) = data.split_first() else { return };
    let chunk = usize::from(chunk).max(1);
    let app = app();
    let mut session = Session::new(app);
    let mut queue = WriteQueue::new();
    let mut input = BytesMut::new();
    let mut out = Vec::new();
    'feed: for part in stream.chunks(chunk) {
        input.extend_from_slice(part);
        loop {
            let step = session.process(&mut input, &mut queue, app);
            // Bounded: past its limits the session asks for a flush before
            // it queues more than one more response.
            assert!(queue.pending_responses() <= app.config.max_queued_responses + 1);
            queue.write_to(&mut out).unwrap();
            match step {
                Step::Flush => continue,
                Step::Build(size) => session.payload(app.large.build(size)),
                Step::Close => break 'feed,
                Step::Read(_) => break,
            }
        }
    }
    check_responses(&out);
});
