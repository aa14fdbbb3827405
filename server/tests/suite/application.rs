//! An application's service on the core, served on the application's own
//! runtime ([`Server::serve`] inside `#[tokio::test]`, as inside
//! `#[tokio::main]`): a reply that awaits a timer, one that reads its POST
//! body in async work, and panics — in `call`, `respond`, a job, a stream's
//! first chunk and a later one — each answered 500 (or, once a stream has
//! begun, ended so that it cannot look whole), while the next request on
//! the same single worker is served, and each 500 is counted by the core's
//! observer.

use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::common::read_response;
use unflat::head::{Line, Status};
use unflat_server::app::reply::{Exposition, Handler, Job, Metrics, Observed, Reply};
use unflat_server::h1::RequestHead;
use unflat_server::memory::Full;
use unflat_server::response::{Body, Chunk, Fields, Response};
use unflat_server::{Config, Server};

/// How long `/sleep` awaits.
const NAP: Duration = Duration::from_millis(50);

#[derive(Debug)]
struct App;

/// Every response's `Content-Type`.
fn text() -> Option<&'static Line> {
    static TEXT: std::sync::LazyLock<Line> =
        std::sync::LazyLock::new(|| Line::parse("Content-Type", "text/plain").unwrap());
    Some(&TEXT)
}

#[derive(Debug)]
enum Answer {
    Sleep,
    Login,
    Text(String),
    /// Signed in: a 303 with cookies, its session number and user.
    Welcome(u64, String),
    /// A header value taken from the request's query, as it came.
    Echoed(String),
    Forbidden,
    PanicRespond,
    PanicJob,
    /// A stream whose `next_chunk` panics at chunk `.0` (0: the first),
    /// having sent `.1` chunks.
    PanicStream(usize, usize),
    /// A stream whose chunk `.0` (0: the first) is awaited on a timer, and
    /// whose service panics once the timer has passed; `.1` sent so far.
    PanicAwaited(usize, usize, Option<Pin<Box<tokio::time::Sleep>>>),
    /// `POST /digest`: the body hashed as it is read, never kept.
    Digest(Box<Digest>),
    NotFound,
}

/// What `/digest` has seen of its body so far.
#[derive(Debug, Default)]
struct Digest {
    hasher: sha2::Sha256,
    bytes: usize,
    pieces: usize,
    largest: usize,
}

impl Handler for App {
    type Reply = Answer;

    fn call(&self, head: &RequestHead<'_>) -> Answer {
        match (head.method, head.path) {
            ("GET" | "HEAD", "/sleep") => Answer::Sleep,
            ("POST", "/login") => Answer::Login,
            // The path decoded (UTF-8), a query pair decoded, a field by
            // name in any case: the request as an application reads it.
            ("GET" | "HEAD", path) if path.starts_with("/greet/") => {
                let decoded = head.decoded_path();
                let name = &decoded["/greet/".len()..];
                let greeting = head
                    .query_pairs()
                    .filter_map(Result::ok)
                    .find(|(k, _)| k == "greeting")
                    .map_or("Hello".into(), |(_, v)| v.into_owned());
                let from = head.field("x-from").map(String::from_utf8_lossy);
                let from = from.as_deref().unwrap_or("nobody");
                Answer::Text(format!("{greeting}, {name}! (from {from})\n"))
            }
            (_, "/echo-header") => {
                Answer::Echoed(head.query.unwrap_or_default().replace("%0D", "\r"))
            }
            ("POST", "/digest") => Answer::Digest(Box::default()),
            (_, "/panic/call") => panic!("call failed on purpose"),
            (_, "/panic/respond") => Answer::PanicRespond,
            (_, "/panic/job") => Answer::PanicJob,
            (_, "/panic/stream-first") => Answer::PanicStream(0, 0),
            (_, "/panic/stream-later") => Answer::PanicStream(2, 0),
            (_, "/panic/awaited-first") => Answer::PanicAwaited(0, 0, None),
            (_, "/panic/awaited-later") => Answer::PanicAwaited(2, 0, None),
            _ => Answer::NotFound,
        }
    }
}

impl Reply for Answer {
    fn wants_body(&self) -> bool {
        matches!(self, Answer::Login)
    }

    fn streams_body(&self) -> bool {
        matches!(self, Answer::Digest(_))
    }

    fn body_chunk(&mut self, chunk: &[u8]) {
        use sha2::Digest as _;
        if let Answer::Digest(d) = self {
            d.hasher.update(chunk);
            d.bytes += chunk.len();
            d.pieces += 1;
            d.largest = d.largest.max(chunk.len());
        }
    }

    fn prepare(&mut self, request_body: &[u8]) -> Option<Job<Answer>> {
        match self {
            Answer::Digest(d) => {
                use sha2::Digest as _;
                let d = std::mem::take(&mut **d);
                let hash: String = d
                    .hasher
                    .finalize()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                assert!(request_body.is_empty(), "a streamed body is not kept");
                *self = Answer::Text(format!(
                    "{} bytes in {} pieces, the largest {}: sha256 {hash}\n",
                    d.bytes, d.pieces, d.largest
                ));
                None
            }
            Answer::Sleep => Some(Job::new(async {
                tokio::time::sleep(NAP).await;
                Answer::Text(format!("slept {} ms\n", NAP.as_millis()))
            })),
            Answer::Login => {
                // As a database call would: the body read, then awaited.
                let form = String::from_utf8_lossy(request_body).into_owned();
                Some(Job::new(async move {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    match form.strip_prefix("user=") {
                        Some(user) if form.ends_with("&password=right") => {
                            let user = user.split('&').next().unwrap_or_default();
                            Answer::Welcome(4_200_042, user.to_string())
                        }
                        _ => Answer::Forbidden,
                    }
                }))
            }
            Answer::PanicJob => Some(Job::new(async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                panic!("job failed on purpose")
            })),
            _ => None,
        }
    }

    fn respond<'a>(
        &'a mut self,
        _: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        let text = text();
        Ok(match self {
            Answer::Text(t) => {
                Response::with_lines(Status::OK, [text, None], Body::Bytes(t.as_bytes()))
            }
            Answer::Welcome(sid, user) => {
                fields
                    .add("Location", ("/welcome/", user.as_str()))
                    .add("Set-Cookie", ("sid=", *sid, "; Path=/; HttpOnly"))
                    .add(
                        "Set-Cookie",
                        ("user=", user.as_str(), "; Path=/; Max-Age=", 3600),
                    )
                    .add("Cache-Control", "no-store")
                    .add("ETag", ("\"", *sid, "\""))
                    .add("Content-Disposition", "inline; filename=\"caf\u{e9}.txt\"");
                Response::with_lines(Status::SEE_OTHER, [text, None], Body::Bytes(b"see other\n"))
            }
            Answer::Echoed(v) => {
                fields.add("X-Echo", v.as_str());
                Response::with_lines(Status::OK, [text, None], Body::Bytes(b"echoed\n"))
            }
            Answer::Forbidden => {
                Response::with_lines(Status::FORBIDDEN, [text, None], Body::Bytes(b"no\n"))
            }
            Answer::PanicRespond => panic!("respond failed on purpose"),
            Answer::PanicStream(..) | Answer::PanicAwaited(..) => {
                Response::with_lines(Status::OK, [text, None], Body::Stream)
            }
            _ => Response::with_lines(Status::NOT_FOUND, [text, None], Body::Bytes(b"none\n")),
        })
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Chunk>, Full>> {
        let Answer::PanicAwaited(at, sent, wait) = self else {
            return Poll::Ready(self.next_chunk());
        };
        if *sent == *at {
            let wait = wait.get_or_insert_with(|| Box::pin(tokio::time::sleep(NAP)));
            std::task::ready!(wait.as_mut().poll(cx));
            panic!("a chunk awaited failed on purpose");
        }
        *sent += 1;
        Poll::Ready(Ok(Some(Chunk::Bytes(bytes::Bytes::from_static(b"part\n")))))
    }
}

impl Answer {
    /// A chunk of [`Answer::PanicStream`], at once.
    fn next_chunk(&mut self) -> Result<Option<Chunk>, Full> {
        let Answer::PanicStream(at, sent) = self else {
            return Ok(None);
        };
        if *sent == *at {
            panic!("next_chunk failed on purpose");
        }
        *sent += 1;
        Ok(Some(Chunk::Bytes(bytes::Bytes::from_static(b"part\n"))))
    }
}

/// `request` on a new connection to `addr`, and everything read until the
/// server closes it (or resets it: then `Err`).
fn whole(addr: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(request)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    Ok(out)
}

/// `request` on a new connection to `addr`: its first response whole (by
/// its Content-Length; a HEAD's head alone).
fn whole_or_first(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let head_request = request.starts_with(b"HEAD ");
    let r = read_response(&mut s, &mut Vec::new(), head_request).unwrap();
    let mut out = r.head.clone();
    out.extend_from_slice(&r.body);
    out
}

/// The status and body of `GET target` (`method`, with `body`) over
/// HTTP/1.1, one request on its own connection.
fn ask(addr: SocketAddr, method: &str, target: &str, body: &str) -> (u16, String, Option<String>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!(
        "{method} {target} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).unwrap();
    let r = read_response(&mut s, &mut Vec::new(), method == "HEAD").unwrap();
    let connection = r.header("connection").map(str::to_string);
    (
        r.status,
        String::from_utf8_lossy(&r.body).into_owned(),
        connection,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn served_on_the_applications_runtime_async_replies_and_panics_answered() {
    let config = Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        ..Config::default()
    };
    let mut counters = None;
    let server = Server::bind_with(config, |m| {
        Observed::with(m.standard::<()>(), |metrics| {
            counters = Some(metrics.clone());
            App
        })
    })
    .unwrap();
    let counters: Metrics = counters.unwrap();
    // Responses of status 500 counted so far.
    let errors = move || {
        let text = counters.render(Exposition::Prometheus);
        let series = r#"unflat_requests_total{route="all",status="500"} "#;
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .map_or(0, |n| n.parse::<u64>().unwrap())
    };
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));

    tokio::task::spawn_blocking(move || {
        // A timer awaited by a job, on the application's runtime.
        let begun = Instant::now();
        assert_eq!(
            ask(addr, "GET", "/sleep", ""),
            (200, "slept 50 ms\n".into(), Some("keep-alive".into()))
        );
        assert!(begun.elapsed() >= NAP, "{:?}", begun.elapsed());
        // The body read by async work.
        let good = "user=ada&password=right";
        assert_eq!(
            ask(addr, "POST", "/login", "user=ada&password=wrong").0,
            403
        );
        // Signed in: seven field lines of its own, two of them Set-Cookie,
        // values built of text, integers and their concatenations; é sent
        // as the one byte Latin-1 has for it. HTTP/1.1 and 1.0 alike.
        for version in ["1.1", "1.0"] {
            let request = format!(
                "POST /login HTTP/{version}\r\nHost: t\r\nContent-Length: {}\r\n\r\n{good}",
                good.len()
            );
            let out = whole_or_first(addr, request.as_bytes());
            let head = &out[..out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4];
            let text = String::from_utf8_lossy(head);
            assert!(text.starts_with("HTTP/1.1 303 See Other\r\n"), "{text}");
            for line in [
                &b"Location: /welcome/ada\r\n"[..],
                b"Set-Cookie: sid=4200042; Path=/; HttpOnly\r\n",
                b"Set-Cookie: user=ada; Path=/; Max-Age=3600\r\n",
                b"Cache-Control: no-store\r\n",
                b"ETag: \"4200042\"\r\n",
                b"Content-Disposition: inline; filename=\"caf\xe9.txt\"\r\n",
                b"Content-Type: text/plain\r\n",
                b"Content-Length: 10\r\n",
            ] {
                assert!(
                    head.windows(line.len()).any(|w| w == line),
                    "{version}: {text}"
                );
            }
            assert!(out.ends_with(b"\r\n\r\nsee other\n"), "{version}");
        }
        // A value with a CR is never written: a 500, and the next request
        // served. With only what a value may hold, the field is sent.
        let (status, _, connection) = ask(addr, "GET", "/echo-header?a%0DSet-Cookie:x=1", "");
        assert_eq!((status, connection.as_deref()), (500, Some("close")));
        let out = whole_or_first(
            addr,
            b"HEAD /echo-header?a%0DSet-Cookie:x=1 HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        assert!(
            out.starts_with(b"HTTP/1.1 500 "),
            "{}",
            String::from_utf8_lossy(&out)
        );
        assert!(!out.windows(10).any(|w| w == b"Set-Cookie"));
        let out = whole_or_first(addr, b"GET /echo-header?fine HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(
            out.windows(14).any(|w| w == b"X-Echo: fine\r\n"),
            "{}",
            String::from_utf8_lossy(&out)
        );

        // A greeting: the path's escapes and the query's + decoded.
        let out = whole_or_first(
            addr,
            b"GET /greet/Ad%C3%A9le?greeting=Good+day HTTP/1.1\r\nHost: t\r\nX-FROM: me\r\n\r\n",
        );
        assert!(
            out.ends_with("Good day, Adéle! (from me)\n".as_bytes()),
            "{}",
            String::from_utf8_lossy(&out)
        );
        // Escapes that are not UTF-8: refused by the core, 400.
        assert_eq!(ask(addr, "GET", "/greet/%FF", "").0, 400);

        // A body handed to the reply as it is read, never kept whole: by
        // length and chunked, each piece at most one read; past
        // --max-body, 413 as for a body kept.
        let body: Vec<u8> = (0..900_000u32).map(|i| (i % 251) as u8).collect();
        let hash: String = {
            use sha2::Digest as _;
            let sum = sha2::Sha256::digest(&body);
            sum.iter().map(|b| format!("{b:02x}")).collect()
        };
        let by_length = [
            format!(
                "POST /digest HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes(),
            body.clone(),
        ]
        .concat();
        let mut chunked =
            b"POST /digest HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for piece in body.chunks(100_000) {
            chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            chunked.extend_from_slice(piece);
            chunked.extend_from_slice(b"\r\n");
        }
        chunked.extend_from_slice(b"0\r\n\r\n");
        for request in [by_length, chunked] {
            let out = whole_or_first(addr, &request);
            let text = String::from_utf8_lossy(&out);
            assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
            let (_, said) = text.split_once("\r\n\r\n").unwrap();
            let (seen, sum) = said.trim_end().split_once(": sha256 ").unwrap();
            assert_eq!(sum, hash, "{said}");
            let words: Vec<&str> = seen.split(' ').collect();
            let (bytes, pieces, largest): (usize, usize, usize) = (
                words[0].parse().unwrap(),
                words[3].parse().unwrap(),
                words[7].trim_end_matches(':').parse().unwrap(),
            );
            assert_eq!(bytes, body.len(), "{said}");
            assert!(pieces > 1 && largest < bytes, "{said}");
        }
        let too_long = format!(
            "POST /digest HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            2 << 20
        );
        let out = whole_or_first(addr, too_long.as_bytes());
        assert!(
            out.starts_with(b"HTTP/1.1 413 "),
            "{}",
            String::from_utf8_lossy(&out)
        );

        // Each panic: a 500 that closes its connection, then the next
        // request served by the same (single) worker.
        let before = errors();
        for target in [
            "/panic/call",
            "/panic/respond",
            "/panic/job",
            "/panic/stream-first",
            "/panic/awaited-first",
        ] {
            for method in ["GET", "HEAD"] {
                let (status, _, connection) = ask(addr, method, target, "");
                if method == "HEAD" && target.ends_with("-first") {
                    // Nothing of a stream is asked for after HEAD.
                    assert_eq!(status, 200);
                    continue;
                }
                assert_eq!(
                    (status, connection.as_deref()),
                    (500, Some("close")),
                    "{method} {target}"
                );
                assert_eq!(
                    ask(addr, "GET", "/sleep", "").0,
                    200,
                    "after {method} {target}"
                );
            }
        }
        // Every 500 counted, the turn a panic cut short included: GET on
        // each target, HEAD on the three that are not streams.
        assert_eq!(errors() - before, 5 + 3);
        // A stream that panics after two chunks: to HTTP/1.1, the chunks
        // sent and no last chunk, then the close; to HTTP/1.0, a reset.
        let out = whole(addr, b"GET /panic/stream-later HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(
            text.ends_with("\r\n\r\n5\r\npart\n\r\n5\r\npart\n\r\n"),
            "{text}"
        );
        let old = whole(addr, b"GET /panic/stream-later HTTP/1.0\r\n\r\n");
        assert!(old.is_err(), "HTTP/1.0 saw a clean end: {old:?}");
        // The same when the panic comes while a chunk is awaited.
        let out = whole(
            addr,
            b"GET /panic/awaited-later HTTP/1.1\r\nHost: t\r\n\r\n",
        )
        .unwrap();
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.ends_with("\r\n\r\n5\r\npart\n\r\n5\r\npart\n\r\n"),
            "{text}"
        );
        let old = whole(addr, b"GET /panic/awaited-later HTTP/1.0\r\n\r\n");
        assert!(old.is_err(), "HTTP/1.0 saw a clean end: {old:?}");
        assert_eq!(ask(addr, "GET", "/sleep", "").0, 200, "after the streams");
    })
    .await
    .unwrap();

    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
}
