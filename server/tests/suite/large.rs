//! `/large` payloads: built off the event loop, within their memory bound,
//! and not at all for a `HEAD`. In a test binary of their own, because a
//! gigabyte payload would skew the memory measured by the other tests.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::common::demo::Options;
use crate::common::{config, connect};
use crate::common::{start_demo_with, Site};
use unflat_server::memory::Part;
use unflat_server::{Config, Running, Strategy};

/// A demo with room for a gigabyte payload.
fn gigabyte(workers: u16) -> Running<Site> {
    let config = Config {
        workers: Some(workers),
        memory_limit: 2 << 30,
        ..config(Strategy::Direct)
    };
    let options = Options {
        max_large: Some(1 << 30),
        ..Options::default()
    };
    start_demo_with(config, options).unwrap()
}

fn served(server: &Running<Site>) -> bool {
    let r = crate::common::exchange(server, b"GET /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n");
    r.status == 200 && r.body == b"aaa"
}

#[test]
fn a_large_payload_is_built_off_the_event_loop() {
    // One worker: were the payload built on it, the small request would
    // wait for the whole build.
    let server = gigabyte(1);
    assert!(served(&server));
    let size = 1 << 30;
    let mut big = connect(&server);
    big.write_all(format!("GET /large/{size} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .unwrap();
    let memory = &server.stack().memory();
    let begun = Instant::now();
    while memory.used(Part::Building) == 0 {
        assert!(
            begun.elapsed() < Duration::from_secs(10),
            "the build never began"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Answered while the gigabyte is still being built.
    assert!(served(&server));
    assert!(
        memory.used(Part::Building) > 0,
        "the build ended before a small request was answered"
    );
    let mut buf = Vec::new();
    let mut head = [0u8; 1];
    // Read the head, then count the body without keeping it.
    while !buf.ends_with(b"\r\n\r\n") {
        big.read_exact(&mut head).unwrap();
        buf.push(head[0]);
    }
    assert!(buf.starts_with(b"HTTP/1.1 200 OK\r\n"));
    let mut chunk = vec![0u8; 1 << 20];
    let mut got = 0;
    while got < size {
        let n = big.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after {got} bytes");
        got += n;
    }
    assert_eq!(got, size);
}

#[test]
fn head_of_a_large_payload_is_answered_from_its_size_alone() {
    let server = gigabyte(2);
    let size = 1 << 30;
    let r = crate::common::exchange(
        &server,
        format!("HEAD /large/{size} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes(),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("1073741824"));
    assert!(r.body.is_empty());
    let memory = &server.stack().memory();
    assert_eq!(
        (memory.used(Part::Bodies), memory.used(Part::Building)),
        (0, 0),
        "nothing was built"
    );
}

/// The flatten strategy copies a payload into an owned buffer before it is
/// written (the old path): that copy is counted once, and the payload not
/// again as flattened text — a payload of N needs N of memory besides its
/// own, not 3N — and a short one is copied behind the head like any short
/// buffer (a debug build checks every response against its bound).
#[test]
fn the_flatten_strategy_counts_its_copy_of_a_payload_once() {
    let size = 20 << 20;
    let config = Config {
        memory_limit: 64 << 20,
        ..config(Strategy::Flatten)
    };
    let options = Options {
        max_large: Some(size),
        cache_bytes: Some(0),
        ..Options::default()
    };
    let server = start_demo_with(config, options).unwrap();
    let mut s = connect(&server);
    let small = "GET /large/3000 HTTP/1.1\r\nHost: t\r\n\r\n".repeat(3);
    s.write_all(format!("{small}GET /large/{size} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .unwrap();
    let mut buf = Vec::new();
    for len in [3000, 3000, 3000, size] {
        let r = crate::common::read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!((r.status, r.body.len()), (200, len));
        assert!(
            r.body == crate::common::large_body(len),
            "the payload of {len} bytes"
        );
    }
}
