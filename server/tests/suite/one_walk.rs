//! Nothing an application gives can break the framing, driven in memory
//! through the core: a field value whose rope changes between walks never
//! puts an unchecked byte on the wire; a 1xx never ends an exchange; a
//! text chunk that panics while it is encoded never puts another
//! response inside a body; the fields the core writes itself go out once.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use unflat::head::Status;
use unflat::queue::{SharedRope, WriteQueue};
use unflat::{Piece, Rope, Shape};
use unflat_server::app::reply::{Handler, Reply};
use unflat_server::h1::RequestHead;
use unflat_server::memory::Full;
use unflat_server::response::{Body, Chunk, Fields, Prepared, Response};
use unflat_server::session::{Session, Step};
use unflat_server::{Config, Stack};

use crate::common::read_response;

/// What a flipping value turns into: a forged field and an early end of
/// the head.
const FORGED: &str = "x\r\nInjected: 1\r\n\r\n";

/// A rope that is `honest` on every call but the `at`-th (its measures
/// and walks counted together, from 0), where it is `FORGED` — or, with
/// `panics`, where it panics.
struct Turncoat {
    calls: AtomicUsize,
    at: usize,
    honest: &'static str,
    panics: bool,
}

impl Turncoat {
    fn new(at: usize, honest: &'static str, panics: bool) -> Turncoat {
        Turncoat {
            calls: AtomicUsize::new(0),
            at,
            honest,
            panics,
        }
    }

    /// This call's text.
    fn text(&self) -> &'static str {
        if self.calls.fetch_add(1, Ordering::SeqCst) != self.at {
            return self.honest;
        }
        if self.panics {
            panic!("a rope failed on purpose at call {}", self.at);
        }
        FORGED
    }
}

impl Rope for Turncoat {
    fn for_each_piece<'a>(
        &'a self,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        visit(Piece::Utf8(self.text()))
    }

    fn shape(&self) -> Shape {
        Shape::of_piece(Piece::Utf8(self.text()))
    }
}

/// The application: its routes give what the core must not send as given.
struct App {
    /// `/flip`'s value, shared by every response.
    flip: Arc<Turncoat>,
    /// `/stream/…`'s text chunk.
    chunk: SharedRope,
}

#[derive(Debug)]
enum Answer {
    Ok,
    Flip(Arc<Turncoat>),
    Status(u16),
    Owned(&'static str),
    /// `X-Text` with `TEXTS[.0]`, as text (`.1`) or as its bytes.
    Text(usize, bool),
    /// A whole body of the application's text, said to be `.1` bytes.
    Body(Text, usize),
    /// A stream whose text chunk is `.1`-th (0: the first); `.0` chunks sent.
    Stream(usize, usize, Text),
}

/// A stream's text chunk.
#[derive(Clone)]
struct Text(SharedRope);

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Text")
    }
}

impl std::fmt::Debug for Turncoat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Turncoat(at {})", self.at)
    }
}

/// Strings sent through the core's doors, and what the text door sends
/// of each: its Latin-1 bytes, or nothing (a 500).
const TEXTS: [(&str, Option<&[u8]>); 4] = [
    ("plain", Some(b"plain")),
    ("na\u{ef}ve", Some(b"na\xefve")),
    ("5\u{20ac}", None),
    ("\u{1f600}", None),
];

const OWNED: [&str; 6] = [
    "Connection",
    "Date",
    "Keep-Alive",
    "Content-Length",
    "Transfer-Encoding",
    "X-Content-Type-Options",
];

impl Handler for App {
    type Reply = Answer;

    fn call(&self, head: &RequestHead<'_>) -> Answer {
        let path = head.path;
        if path == "/flip" {
            return Answer::Flip(self.flip.clone());
        }
        if let Some(code) = path.strip_prefix("/status/") {
            return Answer::Status(code.parse().unwrap());
        }
        if let Some(name) = path.strip_prefix("/owned/") {
            let name = OWNED.iter().find(|n| n.eq_ignore_ascii_case(name)).unwrap();
            return Answer::Owned(name);
        }
        if let Some(i) = path.strip_prefix("/text/") {
            return Answer::Text(i.parse().unwrap(), true);
        }
        if let Some(i) = path.strip_prefix("/bytes/") {
            return Answer::Text(i.parse().unwrap(), false);
        }
        if let Some(len) = path.strip_prefix("/body/") {
            return Answer::Body(Text(self.chunk.clone()), len.parse().unwrap());
        }
        if let Some(at) = path.strip_prefix("/stream/") {
            return Answer::Stream(0, at.parse().unwrap(), Text(self.chunk.clone()));
        }
        Answer::Ok
    }
}

impl Reply for Answer {
    fn respond<'a>(
        &'a mut self,
        _: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        let ok = |body| Response::new(Status::OK, Body::Bytes(body));
        Ok(match self {
            Answer::Ok => ok(b"ok\n"),
            Answer::Flip(flip) => {
                fields.add("X-Flip", &**flip as &(dyn Rope + Sync));
                ok(b"flip\n")
            }
            Answer::Status(code) => {
                let status = Status::from_code(*code).unwrap();
                Response::new(status, Body::Empty)
            }
            Answer::Owned(name) => {
                fields.add(name, "x");
                ok(b"owned\n")
            }
            Answer::Text(i, true) => {
                fields.add("X-Text", TEXTS[*i].0);
                ok(b"text\n")
            }
            Answer::Text(i, false) => {
                fields.add("X-Text", TEXTS[*i].0.as_bytes());
                ok(b"bytes\n")
            }
            Answer::Body(text, len) => Response::new(Status::OK, Body::Transcoded(&text.0, *len)),
            Answer::Stream(..) => Response::new(Status::OK, Body::Stream),
        })
    }

    fn poll_chunk(&mut self, _: &mut Context<'_>) -> Poll<Result<Option<Chunk>, Full>> {
        let Answer::Stream(sent, text_at, text) = self else {
            return Poll::Ready(Ok(None));
        };
        let chunk = match *sent {
            n if n == *text_at => Chunk::Text(text.0.clone()),
            n if n > *text_at + 1 => return Poll::Ready(Ok(None)),
            _ => Chunk::Bytes(Bytes::from_static(b"part\n")),
        };
        *sent += 1;
        Poll::Ready(Ok(Some(chunk)))
    }
}

fn stack(flip: Turncoat, chunk: Turncoat) -> Stack<App> {
    let config = Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: Some(1),
        ..Config::default()
    };
    let app = App {
        flip: Arc::new(flip),
        chunk: Arc::new(chunk),
    };
    Stack::with_service(config, "127.0.0.1:0".parse().unwrap(), None, |_| app)
}

/// Serves `requests` (one read) on a new in-memory session: all it wrote,
/// and how it ended (`None`: still open).
fn serve(stack: &Stack<App>, requests: &[u8]) -> (Vec<u8>, Option<&'static str>) {
    let mut session = Session::new(stack.protocol());
    let mut queue = WriteQueue::new();
    let mut input = BytesMut::from(requests);
    let mut out = Vec::new();
    loop {
        let step = session.process(&mut input, &mut queue, stack.protocol());
        queue.write_to(&mut out).unwrap();
        match step {
            Step::Flush => continue,
            Step::Defer(job) => session.resume(job.wait()),
            Step::Wait => session.wait(),
            Step::Close => return (out, Some("close")),
            Step::Reset => return (out, Some("reset")),
            Step::Read(_) => return (out, None),
        }
    }
}

/// The responses in `out`, in order: status and body.
fn responses(mut out: &[u8]) -> Vec<(u16, Vec<u8>, Vec<u8>)> {
    let mut all = Vec::new();
    let mut buf = Vec::new();
    while !out.is_empty() || !buf.is_empty() {
        match read_response(&mut out, &mut buf, false) {
            Ok(r) => all.push((r.status, r.head, r.body)),
            Err(e) => panic!("{e}: after {} responses", all.len()),
        }
    }
    all
}

/// A field value that turns into a forged field and an early end of the
/// head on its N-th measure or walk (N = 0…8), asked for on one
/// connection nine times with a plain request between each: every head
/// that goes out holds the value as it was checked, the forged bytes
/// never go out, and every response answers its own request — the one
/// whose value changed on the walk that wrote it is a 500, which ends the
/// connection.
#[test]
fn a_value_that_changes_between_walks_never_reaches_the_wire() {
    let requests =
        "GET /flip HTTP/1.1\r\nHost: t\r\n\r\nGET /ok HTTP/1.1\r\nHost: t\r\n\r\n".repeat(9);
    for at in 0..=8 {
        let stack = stack(Turncoat::new(at, "x", false), Turncoat::new(99, "t", false));
        let (out, end) = serve(&stack, requests.as_bytes());
        assert!(
            !out.windows(8).any(|w| w == b"Injected"),
            "flip at {at}: {}",
            String::from_utf8_lossy(&out)
        );
        let all = responses(&out);
        for (i, (status, head, body)) in all.iter().enumerate() {
            let text = String::from_utf8_lossy(head);
            match (i % 2, status) {
                (0, 200) => {
                    assert!(text.contains("\r\nX-Flip: x\r\n"), "{text}");
                    assert_eq!(body, b"flip\n");
                }
                (1, 200) => assert_eq!(body, b"ok\n", "{text}"),
                (_, 500) => {
                    assert_eq!(i % 2, 0, "the 500 answers the /flip request");
                    assert_eq!(i, all.len() - 1, "a 500 ends the connection");
                    assert_eq!(end, Some("close"));
                }
                _ => panic!("flip at {at}: {text}"),
            }
        }
        // The value is measured and walked once per response: the flip
        // falls on response at/2, as a 500, whether it hit the measure
        // (more room than needed, harmless) or the walk.
        let refused = all.iter().filter(|r| r.0 == 500).count();
        assert!(refused <= 1);
        assert!(
            all.len() > at / 2 * 2,
            "flip at {at}: {} responses",
            all.len()
        );
    }
}

/// An application answering 100, 101, 103, 199 or a code above 599 gets
/// a 500 in its place (logged), never a final 1xx: pipelined behind and
/// ahead of plain requests, every response reaches its own request.
#[test]
fn a_final_response_is_200_to_599() {
    let stack = stack(Turncoat::new(99, "x", false), Turncoat::new(99, "t", false));
    for code in [100, 101, 103, 199, 600, 999] {
        let requests = format!(
            "GET /ok HTTP/1.1\r\nHost: t\r\n\r\nGET /status/{code} HTTP/1.1\r\nHost: t\r\n\r\nGET /ok HTTP/1.1\r\nHost: t\r\n\r\n"
        );
        let (out, end) = serve(&stack, requests.as_bytes());
        let all = responses(&out);
        let statuses: Vec<u16> = all.iter().map(|r| r.0).collect();
        assert_eq!(
            statuses,
            [200, 500],
            "{code}: {}",
            String::from_utf8_lossy(&out)
        );
        assert_eq!(all[0].2, b"ok\n");
        assert_eq!(end, Some("close"), "{code}");
    }
    // A prepared start, made once for every response of its kind, is
    // refused where it is made.
    for code in [103, 600] {
        let status = Status::from_code(code).unwrap();
        let made = std::panic::catch_unwind(|| Prepared::new(status, [None, None]));
        assert!(made.is_err(), "{code}");
    }
    // The statuses in range go out as given.
    for code in [200, 204, 299, 404, 599] {
        let requests = format!(
            "GET /status/{code} HTTP/1.1\r\nHost: t\r\n\r\nGET /ok HTTP/1.1\r\nHost: t\r\n\r\n"
        );
        let (out, _) = serve(&stack, requests.as_bytes());
        let statuses: Vec<u16> = responses(&out).iter().map(|r| r.0).collect();
        assert_eq!(statuses, [code, 200]);
    }
}

/// Each field the core writes itself, added by an application, makes its
/// response a 500 (the cause, naming the field, logged): one
/// `Connection`, one `Date`, one framing line, one `nosniff`, never two.
#[test]
fn the_fields_the_core_writes_go_out_once() {
    let stack = stack(Turncoat::new(99, "x", false), Turncoat::new(99, "t", false));
    for name in OWNED {
        let requests = format!(
            "GET /ok HTTP/1.1\r\nHost: t\r\n\r\nGET /owned/{name} HTTP/1.1\r\nHost: t\r\n\r\n"
        );
        let (out, end) = serve(&stack, requests.as_bytes());
        let all = responses(&out);
        let statuses: Vec<u16> = all.iter().map(|r| r.0).collect();
        assert_eq!(statuses, [200, 500], "{name}");
        assert_eq!(end, Some("close"));
        for (_, head, _) in &all {
            let text = String::from_utf8_lossy(head).to_ascii_lowercase();
            for owned in OWNED {
                let line = format!("\r\n{}: ", owned.to_ascii_lowercase());
                assert!(text.matches(&line).count() <= 1, "{name}: {text}");
            }
        }
    }
}

/// A text chunk whose rope panics on its k-th measure or walk (k = 0…11,
/// past the last call it makes: then it goes out whole), as the first
/// chunk of a stream or a later one, to HTTP/1.1 and HTTP/1.0: another
/// response never appears inside a body. A first chunk that fails takes
/// its head back: a whole 500. A later one ends the stream as every cut
/// does: no last chunk on HTTP/1.1, a reset on HTTP/1.0.
#[test]
fn a_chunk_that_panics_while_encoded_never_puts_a_response_in_a_body() {
    let mut whole = 0;
    for version in ["1.1", "1.0"] {
        for first in [true, false] {
            for at in 0..12 {
                let stack = stack(
                    Turncoat::new(99, "x", false),
                    Turncoat::new(at, "text\u{e9}\n", true),
                );
                let target = if first { 0 } else { 1 };
                let request = format!("GET /stream/{target} HTTP/{version}\r\nHost: t\r\n\r\n");
                let (out, end) = serve(&stack, request.as_bytes());
                let text = String::from_utf8_lossy(&out);
                let case = format!("HTTP/{version}, first: {first}, panic at {at}: {text:?}");
                let starts = out.windows(9).filter(|w| w == b"HTTP/1.1 ").count();
                assert_eq!(starts, 1, "one response: {case}");
                let head_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                let body = &out[head_end..];
                if text.starts_with("HTTP/1.1 500") {
                    assert!(first, "only a stream not begun becomes a 500: {case}");
                    assert_eq!(end, Some("close"));
                    continue;
                }
                assert!(text.starts_with("HTTP/1.1 200"), "{case}");
                let complete = match version {
                    "1.1" => crate::common::trivial::chunked(body).is_some(),
                    _ => end == Some("close"),
                };
                if complete {
                    // The rope's calls ran out before `at`: it went out whole.
                    whole += 1;
                    assert!(
                        body.windows(6).any(|w| w == "text\u{e9}".as_bytes()),
                        "{case}"
                    );
                    continue;
                }
                match version {
                    // Cut: the body is whole chunks, never a size line
                    // without its data, and no last chunk.
                    "1.1" => {
                        assert_eq!(end, Some("close"), "{case}");
                        let mut rest = body;
                        while !rest.is_empty() {
                            let line = rest.windows(2).position(|w| w == b"\r\n").unwrap();
                            let size = usize::from_str_radix(
                                std::str::from_utf8(&rest[..line]).unwrap(),
                                16,
                            )
                            .unwrap();
                            assert!(size > 0, "no last chunk: {case}");
                            assert_eq!(&rest[line + 2 + size..line + 4 + size], b"\r\n", "{case}");
                            rest = &rest[line + 4 + size..];
                        }
                    }
                    _ => {
                        assert_eq!(end, Some("reset"), "{case}");
                        assert!(body.iter().all(|&b| b"part\n".contains(&b)), "{case}");
                    }
                }
            }
        }
    }
    assert!(whole > 0, "some k is past the rope's last call");
}

/// The same strings through the core's doors: as text (`&str`) each goes
/// out as the library's text doors send it — its Latin-1 bytes, the same
/// as `Line::parse` renders — or is refused (a 500); as bytes, as given.
#[test]
fn the_same_string_gives_the_same_bytes_as_the_librarys_doors() {
    let stack = stack(Turncoat::new(99, "x", false), Turncoat::new(99, "t", false));
    for (i, (text, latin1)) in TEXTS.iter().enumerate() {
        let line = unflat::head::Line::parse("X-Text", text);
        let request = format!("GET /text/{i} HTTP/1.1\r\nHost: t\r\n\r\n");
        let (out, _) = serve(&stack, request.as_bytes());
        let all = responses(&out);
        match latin1 {
            Some(bytes) => {
                let line = line.unwrap();
                assert_eq!(&line.as_bytes()[8..line.as_bytes().len() - 2], *bytes);
                assert_eq!(all[0].0, 200);
                assert!(all[0]
                    .1
                    .windows(line.as_bytes().len())
                    .any(|w| w == line.as_bytes()));
            }
            None => {
                assert!(line.is_err(), "{text:?}");
                assert_eq!(all[0].0, 500, "{text:?}");
            }
        }
        let request = format!("GET /bytes/{i} HTTP/1.1\r\nHost: t\r\n\r\n");
        let (out, _) = serve(&stack, request.as_bytes());
        let all = responses(&out);
        let mut line = b"X-Text: ".to_vec();
        line.extend_from_slice(text.as_bytes());
        assert_eq!(all[0].0, 200);
        assert!(all[0].1.windows(line.len()).any(|w| w == line), "{text:?}");
    }
}

/// A whole body of the application's text, encoded as it is queued behind
/// its head: whether its rope panics on its k-th measure or walk, or gives
/// other bytes than its response said, the head goes back with it and the
/// 500 in its place is whole — never `abcHTTP/1.1 500` inside a 200's
/// body, as a client would read it.
#[test]
fn a_body_that_fails_as_it_is_encoded_takes_its_head_back() {
    // "text\u{e9}\n" is 7 bytes as UTF-8.
    for (at, len) in (0..6).map(|at| (at, 7)).chain([(99, 10), (99, 3)]) {
        let stack = stack(
            Turncoat::new(99, "x", false),
            Turncoat::new(at, "text\u{e9}\n", true),
        );
        let request = format!("GET /body/{len} HTTP/1.1\r\nHost: t\r\n\r\n");
        let (out, _) = serve(&stack, request.as_bytes());
        let text = String::from_utf8_lossy(&out);
        let starts = out.windows(9).filter(|w| w == b"HTTP/1.1 ").count();
        assert_eq!(starts, 1, "panic at {at}, said {len}: {text:?}");
        let all = responses(&out);
        match all[0].0 {
            200 => assert_eq!(all[0].2, "text\u{e9}\n".as_bytes(), "{text:?}"),
            500 => {}
            other => panic!("{other}: {text:?}"),
        }
        if len != 7 {
            assert_eq!(all[0].0, 500, "said {len}: {text:?}");
        }
    }
}
