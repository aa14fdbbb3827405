//! Streamed responses (`Body::Stream`): byte-exact over HTTP/1.1 (chunked),
//! HTTP/1.0 (ended by the close) and after `HEAD` (nothing), for every
//! kind and body form of the demo's `/end-string/{len}?chunks=K`, by both
//! strategies; and produced lazily, so that a reader that pauses holds a
//! bounded part of a long stream.

use std::future::Future;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::common::{connect, end_string_body, read_response, Raw};
use bytes::{Buf, Bytes, BytesMut};
use unflat::head::Status;
use unflat::queue::{SharedRope, WriteQueue};
use unflat::Utf16;
use unflat_server::app::reply::{Handler, Reply};
use unflat_server::h1::RequestHead;
use unflat_server::memory::{Full, Part};
use unflat_server::response::{Body, Chunk, Fields, Response};
use unflat_server::session::{Session, Step, STREAM_AHEAD};
use unflat_server::{Config, Running, Stack, Strategy};

/// Reads a chunked body from `s` (`buf`: bytes already read): the size of
/// each chunk, and the body. Fails on anything but exact framing with no
/// trailer fields.
fn read_chunked(s: &mut TcpStream, buf: &mut Vec<u8>) -> (Vec<usize>, Vec<u8>) {
    let mut sizes = Vec::new();
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(at) = buf.windows(2).position(|w| w == b"\r\n") {
                break at;
            }
            fill(s, buf);
        };
        let line = std::str::from_utf8(&buf[..line_end]).unwrap();
        let size = usize::from_str_radix(line, 16).unwrap_or_else(|_| panic!("size {line:?}"));
        assert_eq!(line, format!("{size:X}"), "the shortest hex digits");
        buf.drain(..line_end + 2);
        while buf.len() < size + 2 {
            fill(s, buf);
        }
        assert_eq!(&buf[size..size + 2], b"\r\n", "a chunk ends its line");
        if size == 0 {
            buf.drain(..2);
            return (sizes, body);
        }
        sizes.push(size);
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) {
    let mut chunk = [0u8; 65536];
    let n = s.read(&mut chunk).unwrap();
    assert!(n > 0, "the stream ended early");
    buf.extend_from_slice(&chunk[..n]);
}

/// The sizes of the non-empty chunks `/end-string/{len}?chunks=K` sends of
/// characters `width` bytes long: chunk `i` holds characters `i * len / K`
/// up to `(i + 1) * len / K`.
fn chunk_sizes(len: usize, chunks: usize, width: usize) -> Vec<usize> {
    (0..chunks)
        .map(|i| ((i + 1) * len / chunks - i * len / chunks) * width)
        .filter(|&n| n > 0)
        .collect()
}

fn assert_streamed_head(r: &Raw, chunked: bool) {
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), None, "a stream has no length");
    let te = r.header("transfer-encoding");
    assert_eq!(te, chunked.then_some("chunked"));
}

#[test]
fn a_stream_is_byte_exact_chunked_bare_and_after_head_for_every_kind_and_form() {
    for strategy in [Strategy::Direct, Strategy::Flatten] {
        let server = crate::common::start(strategy);
        // HTTP/1.1 on one connection: a wrong byte of framing anywhere
        // breaks every response after it.
        let mut s = connect(&server);
        let mut buf = Vec::new();
        for (kind, width) in [("ascii", 1), ("latin1", 2), ("twobyte", 3)] {
            for form in ["flat", "rope"] {
                // 70 000 characters: longer than a frame of the queue, so
                // encoded a frame at a time within one chunk.
                for len in [0, 5, 70_000] {
                    for chunks in [1, 4, 9] {
                        let target =
                            format!("/end-string/{len}?kind={kind}&body={form}&chunks={chunks}");
                        let what = format!("{strategy:?} {target}");
                        write!(
                            s,
                            "GET {target} HTTP/1.1\r\nHost: t\r\n\r\nHEAD {target} HTTP/1.1\r\nHost: t\r\n\r\n"
                        )
                        .unwrap();
                        let get = read_response(&mut s, &mut buf, true).unwrap();
                        assert_streamed_head(&get, true);
                        assert_eq!(get.header("connection"), Some("keep-alive"), "{what}");
                        let (sizes, body) = read_chunked(&mut s, &mut buf);
                        assert_eq!(sizes, chunk_sizes(len, chunks, width), "{what}");
                        assert!(body == end_string_body(len, kind), "{what}: the body");
                        let head = read_response(&mut s, &mut buf, true).unwrap();
                        assert_streamed_head(&head, true);
                        assert!(head.body.is_empty(), "{what}: nothing after HEAD");

                        // HTTP/1.0: the chunks bare, the close ends them.
                        let mut old = connect(&server);
                        write!(old, "GET {target} HTTP/1.0\r\n\r\n").unwrap();
                        let mut out = Vec::new();
                        old.read_to_end(&mut out).unwrap();
                        let mut rest = out;
                        let r = read_response(&mut &[][..], &mut rest, true).unwrap();
                        assert_streamed_head(&r, false);
                        assert_eq!(r.header("connection"), Some("close"), "{what}");
                        assert!(rest == end_string_body(len, kind), "{what}: HTTP/1.0 body");
                    }
                }
            }
        }
        // The connection is still in step: a plain request after them all.
        s.write_all(b"GET /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!((r.status, &r.body[..]), (200, &b"aaa"[..]));
        assert!(buf.is_empty());
    }
}

/// A stream that waits between chunks (`&every=MS`: each chunk after the
/// first on a timer, the service's `poll_chunk` pending meanwhile): byte
/// exact chunked to HTTP/1.1, bare to HTTP/1.0 until the close, nothing
/// after HEAD (and no wait); the waits are taken; the connection stays in
/// step for the next request.
#[test]
fn a_stream_that_waits_between_chunks_is_byte_exact() {
    let server = crate::common::start(Strategy::Direct);
    let mut s = connect(&server);
    let mut buf = Vec::new();
    for (kind, width) in [("ascii", 1), ("twobyte", 3)] {
        let target = format!("/end-string/1000?kind={kind}&chunks=5&every=40");
        let begun = Instant::now();
        write!(s, "GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let get = read_response(&mut s, &mut buf, true).unwrap();
        assert_streamed_head(&get, true);
        let (sizes, body) = read_chunked(&mut s, &mut buf);
        // Four waits of 40 ms, each on the server's coarse clock, which
        // reads up to a tick (4 ms) late and counts whole milliseconds:
        // each wait may end 5 ms early by the test's precise one.
        assert!(
            begun.elapsed() >= Duration::from_millis(4 * (40 - 5)),
            "{:?}",
            begun.elapsed()
        );
        assert_eq!(sizes, chunk_sizes(1000, 5, width), "{target}");
        assert!(body == end_string_body(1000, kind), "{target}: the body");

        let begun = Instant::now();
        write!(s, "HEAD {target} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let head = read_response(&mut s, &mut buf, true).unwrap();
        assert_streamed_head(&head, true);
        assert!(begun.elapsed() < Duration::from_millis(160), "HEAD waited");

        let mut old = connect(&server);
        write!(old, "GET {target} HTTP/1.0\r\n\r\n").unwrap();
        let mut rest = Vec::new();
        old.read_to_end(&mut rest).unwrap();
        let r = read_response(&mut &[][..], &mut rest, true).unwrap();
        assert_streamed_head(&r, false);
        assert_eq!(r.header("connection"), Some("close"));
        assert!(
            rest == end_string_body(1000, kind),
            "{target}: HTTP/1.0 body"
        );
    }
    s.write_all(b"GET /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let r = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"aaa"[..]));
    // Out of bounds: a wait too long, a stream too long in all, a wait
    // without chunks.
    for query in [
        "chunks=2&every=10001",
        "chunks=10&every=0",
        "chunks=100&every=1000",
        "every=5",
    ] {
        let r = crate::common::exchange(
            &server,
            format!("GET /end-string/1000?{query} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes(),
        );
        assert_eq!(r.status, 400, "{query}");
    }
}

#[test]
fn a_chunk_count_out_of_range_or_repeated_is_refused() {
    let server = crate::common::start(Strategy::Direct);
    for query in ["chunks=0", "chunks=65537", "chunks=x", "chunks=2&chunks=3"] {
        let r = crate::common::exchange(
            &server,
            format!("GET /end-string/10?{query} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes(),
        );
        assert_eq!(r.status, 400, "{query}");
        assert!(
            String::from_utf8_lossy(&r.body).contains("chunks"),
            "{query}: the reason names the parameter"
        );
    }
    let r = crate::common::exchange(
        &server,
        b"GET /end-string/10?chunks=65536 HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    assert_eq!(r.status, 200);
}

/// A service of one endless kind of answer: `GET /{n}` streams `n` chunks
/// of [`CHUNK`] bytes, made only when asked for, in turn shared bytes, a
/// ropey rope and two-byte text; it counts the bytes it made.
#[derive(Debug, Default)]
struct Counting {
    made: Arc<AtomicUsize>,
    asked: Arc<AtomicUsize>,
}

const CHUNK: usize = 16 * 1024;

/// Chunk `i` of the stream, as the client must receive it.
fn chunk_text(i: usize) -> String {
    let c = [b'a', b'b', b'c'][i % 3] as char;
    let euro = i % 3 == 2;
    if euro {
        "€".repeat(CHUNK / 3)
    } else {
        c.to_string().repeat(CHUNK)
    }
}

#[derive(Debug)]
struct Chunks {
    next: usize,
    count: usize,
    /// `GET /empty/{n}`: every chunk empty.
    empty: bool,
    /// `GET /paced/{n}`: each chunk after a millisecond's wait, on a tokio
    /// timer (`poll_chunk` pending meanwhile).
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The service's counts.
    counts: Counting,
}

impl Handler for Counting {
    type Reply = Chunks;

    fn call(&self, head: &RequestHead<'_>) -> Chunks {
        let (empty, n) = match head.path.strip_prefix("/empty/") {
            Some(n) => (true, n),
            None => (false, &head.path[1..]),
        };
        let (wait, n) = match n.strip_prefix("paced/") {
            Some(n) => (
                Some(Box::pin(tokio::time::sleep(Duration::from_millis(1)))),
                n,
            ),
            None => (None, n),
        };
        let count = n.parse().unwrap_or(0);
        Chunks {
            next: 0,
            count,
            empty,
            wait,
            counts: Counting {
                made: self.made.clone(),
                asked: self.asked.clone(),
            },
        }
    }
}

impl Reply for Chunks {
    fn respond<'a>(&'a mut self, _: &'a [u8], _: &mut Fields<'a>) -> Result<Response<'a>, Full> {
        Ok(Response::new(Status::OK, Body::Stream))
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Chunk>, Full>> {
        let reply = self;
        if let Some(wait) = &mut reply.wait {
            std::task::ready!(wait.as_mut().poll(cx));
            let next = tokio::time::Instant::now() + Duration::from_millis(1);
            wait.as_mut().reset(next);
        }
        Poll::Ready(reply.next_chunk())
    }
}

impl Chunks {
    /// The next chunk, made now.
    fn next_chunk(&mut self) -> Result<Option<Chunk>, Full> {
        if self.next == self.count {
            return Ok(None);
        }
        let i = self.next;
        self.next += 1;
        self.counts.asked.fetch_add(1, Ordering::Relaxed);
        if self.empty {
            return Ok(Some(Chunk::Bytes(Bytes::new())));
        }
        let text = chunk_text(i);
        self.counts.made.fetch_add(text.len(), Ordering::Relaxed);
        Ok(Some(match i % 3 {
            0 => Chunk::Bytes(Bytes::from(text)),
            1 => Chunk::Rope(ropey::Rope::from_str(&text)),
            _ => {
                let units: Vec<u16> = text.encode_utf16().collect();
                let rope: SharedRope = Arc::new(Utf16(units));
                Chunk::Text(rope)
            }
        }))
    }
}

fn counting_config() -> Config {
    Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: Some(1),
        ..Config::default()
    }
}

/// `service`'s stack, for a session driven in memory.
fn in_memory(service: Counting) -> Stack<Counting> {
    let addr = "127.0.0.1:0".parse().unwrap();
    Stack::with_service(counting_config(), addr, None, |_| service)
}

#[test]
fn a_stream_is_asked_for_no_faster_than_the_queue_drains() {
    let made = Arc::new(AtomicUsize::new(0));
    let service = Counting {
        made: made.clone(),
        asked: Arc::default(),
    };
    let stack = in_memory(service);
    let protocol = stack.protocol();
    let mut session = Session::new(protocol);
    let mut queue = WriteQueue::new();
    let chunks = 256; // 4 MiB
    let mut input = BytesMut::from(&format!("GET /{chunks} HTTP/1.1\r\nHost: t\r\n\r\n")[..]);
    // A reader that does not read: the queue is never written out.
    for _ in 0..10 {
        assert!(matches!(
            session.process(&mut input, &mut queue, protocol),
            Step::Flush
        ));
        let held = made.load(Ordering::Relaxed);
        assert!(
            held <= STREAM_AHEAD + CHUNK,
            "made {held} bytes for a paused reader"
        );
        assert!(queue.remaining() <= STREAM_AHEAD + CHUNK + 256);
    }
    let leased = session.leased();
    assert!(leased <= 256 << 10, "leased {leased}");
    // Read, then everything arrives, in order.
    let mut out = Vec::new();
    loop {
        queue.write_to(&mut out).unwrap();
        match session.process(&mut input, &mut queue, protocol) {
            Step::Flush => {}
            Step::Read(_) => break,
            other => panic!("{other:?}"),
        }
    }
    queue.write_to(&mut out).unwrap();
    let total: usize = (0..chunks).map(|i| chunk_text(i).len()).sum();
    assert_eq!(made.load(Ordering::Relaxed), total);
    let at = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(out[..at]
        .windows(28)
        .any(|w| w == b"Transfer-Encoding: chunked\r\n"));
    let mut expected = Vec::new();
    for i in 0..chunks {
        let text = chunk_text(i);
        expected.extend_from_slice(format!("{:X}\r\n", text.len()).as_bytes());
        expected.extend_from_slice(text.as_bytes());
        expected.extend_from_slice(b"\r\n");
    }
    expected.extend_from_slice(b"0\r\n\r\n");
    assert!(out[at..] == expected[..], "the stream, byte for byte");
}

#[test]
fn a_paused_reader_of_a_long_stream_holds_a_bounded_part_of_it() {
    paused_reader_holds_a_bounded_part("")
}

/// The same of a stream that waits for each chunk: what a paused reader
/// holds does not depend on how the chunks come.
#[test]
fn a_paused_reader_of_a_stream_that_waits_holds_a_bounded_part_of_it() {
    paused_reader_holds_a_bounded_part("paced/")
}

/// A reader of `/{prefix}2048` (32 MiB) paused for 0.8 s: what was made is
/// what the socket buffers and the queue hold; then it reads all, exact.
fn paused_reader_holds_a_bounded_part(prefix: &str) {
    let made = Arc::new(AtomicUsize::new(0));
    let service = Counting {
        made: made.clone(),
        asked: Arc::default(),
    };
    let server = Running::start_with(counting_config(), |_| service).unwrap();
    let chunks = 2048; // 32 MiB
    let mut s = connect(&server);
    write!(s, "GET /{prefix}{chunks} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    // Paused: what is made is what the socket buffers and the queue hold.
    std::thread::sleep(Duration::from_millis(800));
    let paused = made.load(Ordering::Relaxed);
    let charged = server.stack().memory().used(Part::Connections);
    eprintln!("a paused reader: {paused} bytes made, {charged} charged beyond the base");
    assert!(
        paused < 8 << 20,
        "made {paused} of {} bytes",
        chunks * CHUNK
    );
    assert!(charged < 1 << 20, "charged {charged}");
    // Then it reads the stream whole, exact.
    let mut buf = Vec::new();
    let head = read_response(&mut s, &mut buf, true).unwrap();
    assert_streamed_head(&head, true);
    let (sizes, body) = read_chunked(&mut s, &mut buf);
    assert_eq!(sizes.len(), chunks);
    let mut at = 0;
    for (i, size) in sizes.into_iter().enumerate() {
        let text = chunk_text(i);
        assert_eq!(size, text.len());
        assert!(body[at..at + size] == *text.as_bytes(), "chunk {i}");
        at += size;
    }
    assert_eq!(made.load(Ordering::Relaxed), at);
}

#[test]
fn a_stream_of_empty_chunks_sends_none_and_lets_others_run() {
    let asked = Arc::new(AtomicUsize::new(0));
    let service = Counting {
        made: Arc::default(),
        asked: asked.clone(),
    };
    let stack = in_memory(service);
    let protocol = stack.protocol();
    let mut session = Session::new(protocol);
    let mut queue = WriteQueue::new();
    let mut input = BytesMut::from(&b"GET /empty/5000 HTTP/1.1\r\nHost: t\r\n\r\n"[..]);
    let mut out = Vec::new();
    let mut turns = 0;
    loop {
        let step = session.process(&mut input, &mut queue, protocol);
        queue.write_to(&mut out).unwrap();
        turns += 1;
        match step {
            // A turn asks for a bounded number of chunks, then yields.
            Step::Flush => assert!(asked.load(Ordering::Relaxed) <= turns * 1024),
            Step::Read(_) => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(asked.load(Ordering::Relaxed), 5000, "every chunk asked for");
    assert!(turns >= 5, "{turns} turns");
    assert!(out.ends_with(b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n0\r\n\r\n"), "{}", String::from_utf8_lossy(&out));
}

/// Streams `GET /{first}/{then}`: a chunk of `first` bytes, then one of
/// `then` bytes, then its end; copied into the queue (`--copy-below` above
/// both), so that the connection's memory must take each.
#[derive(Debug, Default)]
struct Sized;

#[derive(Debug)]
struct Two(Vec<usize>);

impl Handler for Sized {
    type Reply = Two;

    fn call(&self, head: &RequestHead<'_>) -> Two {
        // Anything else (a proxy's health check) is one empty chunk.
        let sizes = head.path[1..].split('/').rev();
        Two(sizes.map(|n| n.parse().unwrap_or(0)).collect())
    }
}

impl Reply for Two {
    fn respond<'a>(&'a mut self, _: &'a [u8], _: &mut Fields<'a>) -> Result<Response<'a>, Full> {
        Ok(Response::new(Status::OK, Body::Stream))
    }

    fn poll_chunk(&mut self, _: &mut Context<'_>) -> Poll<Result<Option<Chunk>, Full>> {
        let next = self.0.pop();
        Poll::Ready(Ok(next.map(|n| Chunk::Bytes(Bytes::from(vec![b'x'; n])))))
    }
}

/// A server of [`Sized`] whose connections may hold 1 MiB each.
fn sized_server() -> Running<Sized> {
    let config = Config {
        connection_memory: Some(1 << 20),
        copy_below: 8 << 20,
        ..counting_config()
    };
    Running::start_with(config, |_| Sized).unwrap()
}

/// Reads `s` to its end: the bytes, and whether it ended in a reset.
fn read_to_end_or_reset(s: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return (out, false),
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (out, true),
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// A stream whose first chunk the connection's memory cannot take is
/// refused whole, with a status that says so, to HTTP/1.1 and HTTP/1.0
/// alike: its head is never sent without its first chunk.
#[test]
fn a_stream_that_cannot_start_is_refused_503_never_begun() {
    let server = sized_server();
    for version in ["1.1", "1.0"] {
        let mut s = connect(&server);
        write!(s, "GET /2097152/1 HTTP/{version}\r\nHost: t\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.status, 503, "HTTP/{version}");
        assert_eq!(r.header("retry-after"), Some("1"), "HTTP/{version}");
        assert_eq!(r.header("connection"), Some("close"), "HTTP/{version}");
    }
    // One that fits is streamed whole.
    let mut s = connect(&server);
    write!(s, "GET /1024/1024 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    assert_streamed_head(&read_response(&mut s, &mut buf, true).unwrap(), true);
    assert_eq!(read_chunked(&mut s, &mut buf).0, [1024, 1024]);
}

/// A stream begun and then cut short for memory never looks complete: a
/// chunked body stops before its last chunk, and a body to HTTP/1.0, which
/// only the close ends, ends in a reset rather than a clean close.
#[test]
fn a_stream_cut_short_never_ends_as_if_complete() {
    let server = sized_server();
    let mut s = connect(&server);
    s.write_all(b"GET /1024/2097152 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    assert_streamed_head(&read_response(&mut s, &mut buf, true).unwrap(), true);
    let (rest, _) = read_to_end_or_reset(&mut s);
    buf.extend_from_slice(&rest);
    assert!(buf.starts_with(b"400\r\n"), "the first chunk is sent");
    assert!(!buf.ends_with(b"0\r\n\r\n"), "no last chunk after a cut");
    assert_eq!(buf.len(), 5 + 1024 + 2, "nothing after the first chunk");

    let mut s = connect(&server);
    s.write_all(b"GET /1024/2097152 HTTP/1.0\r\nHost: t\r\n\r\n")
        .unwrap();
    let (out, reset) = read_to_end_or_reset(&mut s);
    assert!(out.starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(
        reset,
        "HTTP/1.0: a cut body must end in a reset, not a clean close"
    );
}

/// Through haproxy (`deploy/haproxy.cfg`), which speaks HTTP/1.1 to the
/// server: a stream cut short reaches an HTTP/1.1 client without its last
/// chunk. (An HTTP/1.0 client is sent the body close-delimited by haproxy,
/// which ends it with a clean close whatever the server did: recorded in
/// docs/robustness.md, and printed here.) Skipped without haproxy.
#[test]
fn a_stream_cut_short_is_seen_cut_through_haproxy() {
    if !crate::common::haproxy::installed() {
        eprintln!("skipped: haproxy is not on PATH (apt-get install haproxy runs this test)");
        return;
    }
    let server = sized_server();
    let dir = std::env::temp_dir().join(format!("unflat-cut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let frontend = format!("127.0.0.1:{}", crate::common::haproxy::free_port());
    let addr = server.addr().to_string();
    let proxy = crate::common::haproxy::Haproxy::start(&frontend, &[&addr, &addr], &dir);
    for name in ["r1", "r2"] {
        proxy.wait_up("replicas", name, Duration::from_secs(10));
    }
    for version in ["1.0", "1.1"] {
        let mut s = TcpStream::connect(&frontend).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(s, "GET /1024/2097152 HTTP/{version}\r\nHost: t\r\n\r\n").unwrap();
        let (out, reset) = read_to_end_or_reset(&mut s);
        let at = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&out[..at]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "HTTP/{version}: {head}");
        let chunked = head.contains("transfer-encoding: chunked");
        let body = out.len() - at;
        eprintln!(
            "HTTP/{version} through haproxy: chunked {chunked}, reset {reset}, {body} body bytes"
        );
        if version == "1.1" {
            assert!(chunked, "{head}");
            assert!(
                !out.ends_with(b"0\r\n\r\n"),
                "a cut stream ended with its last chunk"
            );
            assert!(body < 2 * 1024 * 1024, "the second chunk was never sent");
        }
    }
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Through nginx's default `proxy_pass`, which speaks HTTP/1.0 to the
/// server: the server resets a stream cut short (its body only the close
/// would end), and nginx passes the cut on: its HTTP/1.1 client gets no
/// last chunk. Skipped without nginx.
#[test]
fn a_stream_cut_short_is_seen_cut_through_nginx() {
    let nginx = ["nginx", "/usr/sbin/nginx"].into_iter().find(|bin| {
        std::process::Command::new(bin)
            .arg("-v")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(nginx) = nginx else {
        eprintln!("skipped: nginx is not on PATH (apt-get install nginx runs this test)");
        return;
    };
    let server = sized_server();
    let dir = std::env::temp_dir().join(format!("unflat-nginx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = crate::common::haproxy::free_port();
    let conf = format!(
        "worker_processes 1; daemon off; pid {dir}/nginx.pid; error_log {dir}/error.log;\n\
         events {{ worker_connections 64; }}\n\
         http {{ access_log off; client_body_temp_path {dir}; proxy_temp_path {dir};\n\
         server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://{addr}; }} }} }}\n",
        dir = dir.display(),
        addr = server.addr(),
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let mut child = std::process::Command::new(nginx)
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let begun = std::time::Instant::now();
    let mut s = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if begun.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("nginx did not listen: {e}"),
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /1024/2097152 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let (out, reset) = read_to_end_or_reset(&mut s);
    // SIGTERM, not SIGKILL: the master stops its workers before it exits.
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let at = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&out[..at]).to_ascii_lowercase();
    eprintln!("through nginx: reset {reset}, {} bytes\n{head}", out.len());
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(
        !out.ends_with(b"0\r\n\r\n"),
        "a cut stream ended with its last chunk"
    );
}
