//! The core serves any [`Service`], not only the demo site: a second,
//! small service on the same core gets the same grammar, framing,
//! persistence, HEAD, pipelining, refusals, its connections counted by the
//! core, one call per request, and an observer told of each response (the
//! service observes itself).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::read_response;
use unflat::head::{Line, Status};
use unflat_server::h1::RequestHead;
use unflat_server::memory::Full;
use unflat_server::response::{Body, Fields, Response};
use unflat_server::service::{Answered, Observe, Reply, Service};
use unflat_server::{Config, Running};

/// A service of three answers; its observer counts what the core tells it.
#[derive(Debug)]
struct Greeter(Arc<Counts>);

/// What the greeter's observer counts.
#[derive(Debug, Default)]
struct Counts {
    /// Calls of the service: one per request it answers.
    called: AtomicU64,
    answered: AtomicU64,
    refused: AtomicU64,
    /// Body bytes of the responses answered.
    body_bytes: AtomicU64,
    /// Connections opened from a known peer on the loopback.
    opened: AtomicU64,
    /// Responses the core said were written whole.
    written: AtomicU64,
    /// Replies given back once the core was done with them.
    recycled: AtomicU64,
}

/// What a connection keeps for the greeter: where its responses still
/// being written end in its output.
#[derive(Debug, Default)]
struct Unwritten(Vec<u64>);

#[derive(Debug)]
enum Answer {
    Hello,
    Length(String),
    Forbidden,
}

/// Every response's `Content-Type`.
fn text() -> Option<&'static Line> {
    static TEXT: std::sync::LazyLock<Line> =
        std::sync::LazyLock::new(|| Line::parse("Content-Type", "text/plain").unwrap());
    Some(&TEXT)
}

impl Service for Greeter {
    type Reply = Answer;
    type Conn = ();
    type Observer = Arc<Counts>;

    fn observer(&self) -> Arc<Counts> {
        self.0.clone()
    }

    fn call(&self, head: &RequestHead<'_>, _: &mut ()) -> Answer {
        self.0.called.fetch_add(1, Ordering::Relaxed);
        match head.path {
            "/hello" => Answer::Hello,
            "/length" => Answer::Length(String::new()),
            _ => Answer::Forbidden,
        }
    }

    fn recycle(&self, _: Answer, _: &mut ()) {
        self.0.recycled.fetch_add(1, Ordering::Relaxed);
    }
}

impl Reply for Answer {
    fn wants_body(&self) -> bool {
        matches!(self, Answer::Length(_))
    }

    fn refuses(&self) -> bool {
        matches!(self, Answer::Forbidden)
    }

    fn respond<'a>(
        &'a mut self,
        request_body: &'a [u8],
        _: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        let text = text();
        Ok(match self {
            Answer::Hello => {
                Response::with_lines(Status::OK, [text, None], Body::Bytes(b"hello\n"))
            }
            Answer::Length(made) => {
                *made = format!("{}\n", request_body.len());
                Response::with_lines(Status::OK, [text, None], Body::Bytes(made.as_bytes()))
            }
            Answer::Forbidden => {
                Response::with_lines(Status::FORBIDDEN, [text, None], Body::Bytes(b"no\n"))
            }
        })
    }
}

impl Observe<Answer> for Counts {
    type Conn = Unwritten;
    type Label = &'static str;

    fn open(&self, peer: Option<SocketAddr>) -> Unwritten {
        if peer.is_some_and(|p| p.ip().is_loopback()) {
            self.opened.fetch_add(1, Ordering::Relaxed);
        }
        Unwritten::default()
    }

    fn begun(&self, _: &RequestHead<'_>, reply: &Answer, _: &mut Unwritten) -> &'static str {
        match reply {
            Answer::Hello => "hello",
            Answer::Length(_) => "length",
            Answer::Forbidden => "other",
        }
    }

    fn answered(&self, answered: Answered<&'static str>, conn: &mut Unwritten) {
        match answered.label {
            Some(_) => self.answered.fetch_add(1, Ordering::Relaxed),
            None => self.refused.fetch_add(1, Ordering::Relaxed),
        };
        let bytes = answered.body_bytes as u64;
        self.body_bytes.fetch_add(bytes, Ordering::Relaxed);
        conn.0.push(answered.ends);
    }

    fn sent(&self, total: u64, conn: &mut Unwritten) {
        let before = conn.0.len();
        conn.0.retain(|&end| end > total);
        let whole = (before - conn.0.len()) as u64;
        self.written.fetch_add(whole, Ordering::Relaxed);
    }
}

fn start() -> Running<Greeter> {
    let config = Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: Some(1),
        ..Config::default()
    };
    Running::start_with(config, |_| Greeter(Arc::default())).unwrap()
}

#[test]
fn a_second_service_is_served_by_the_same_core() {
    let server = start();
    let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Pipelined: a GET, a HEAD, a POST with a chunked body, then a GET of
    // HTTP/1.0, which closes the connection.
    s.write_all(
        b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n\
          HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\n\
          POST /length HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n\
          GET /hello HTTP/1.0\r\n\r\n",
    )
    .unwrap();
    let mut buf = Vec::new();
    let get = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!((get.status, &get.body[..]), (200, &b"hello\n"[..]));
    assert_eq!(get.header("content-length"), Some("6"));
    let head = read_response(&mut s, &mut buf, true).unwrap();
    assert_eq!((head.status, head.body.len()), (200, 0));
    assert_eq!(head.header("content-length"), Some("6"));
    let post = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!((post.status, &post.body[..]), (200, &b"5\n"[..]));
    let old = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!((old.status, old.header("connection")), (200, Some("close")));
    assert!(crate::common::closed(&mut s, &mut buf), "HTTP/1.0 closes");

    // The core's own refusal: a head it cannot read.
    let r = crate::common::exchange(
        &server,
        b"GET /hello HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n",
    );
    assert_eq!((r.status, r.header("connection")), (400, Some("close")));
    // A refusal from the head: no 100 Continue, the final status at once.
    let r = crate::common::exchange(
        &server,
        b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    );
    assert_eq!((r.status, r.header("connection")), (403, Some("close")));

    let g = &*server.stack().service().0;
    assert_eq!(
        g.answered.load(Ordering::Relaxed),
        5,
        "every response it answered"
    );
    // The service itself is called once per request it answers — the
    // HEAD, the body read, the HTTP/1.0 close, the refusal from the head
    // alike — and never for the head the core refused; its reply does
    // the rest.
    assert_eq!(g.called.load(Ordering::Relaxed), 5, "one call per request");
    assert_eq!(g.refused.load(Ordering::Relaxed), 1, "the core's refusal");
    // `hello`, nothing after HEAD, `5`, `hello`, `no`, and the refusal's
    // reason.
    let known = 6 + 2 + 6 + 3;
    let bytes = g.body_bytes.load(Ordering::Relaxed);
    assert!(bytes > known, "{bytes}: the refusal's reason is its body");
    assert_eq!(g.opened.load(Ordering::Relaxed), 3, "each from its peer");
    // The core counts its connections itself, and tells the service of
    // each response its sockets took whole.
    let transport = &server.stack().connections().transport;
    for _ in 0..100 {
        if transport.open_connections() == 0 && g.written.load(Ordering::Relaxed) == 6 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(transport.open_connections(), 0, "every connection ended");
    assert_eq!(
        g.written.load(Ordering::Relaxed),
        6,
        "every response written whole, as the core said"
    );
    assert!(transport.bytes_written() > 0);
    // Each reply is given back once its response is queued (the head's
    // 403 too, before its connection closes); none twice.
    assert_eq!(g.recycled.load(Ordering::Relaxed), 5, "replies given back");
}

/// The core's observer serves any handler: its responses counted under
/// the handler's labels (`()`: `route="all"`), the access log written when
/// asked; a server whose observer writes no access log refuses
/// `--access-log` rather than ignore it.
#[test]
fn a_handler_observed_by_the_core_is_counted_and_an_unwritten_access_log_refused() {
    use crate::common::trivial::Trivial;
    use unflat_server::app::reply::{Exposition, Metrics, Observed};
    use unflat_server::{Server, Strategy};

    let config = Config {
        access_log: true,
        ..crate::common::config(Strategy::Direct)
    };
    let refused = Server::bind_with(config.clone(), |_| Trivial::new(64)).unwrap_err();
    assert!(refused.to_string().contains("--access-log"), "{refused}");

    let metrics: std::sync::OnceLock<Metrics> = std::sync::OnceLock::new();
    let server = Running::start_with(config, |m| {
        let observer = m.standard();
        metrics.set(observer.metrics().clone()).unwrap();
        Observed::new(Trivial::new(64), observer)
    })
    .unwrap();
    for path in ["/n/4", "/n/5", "/n/6", "/nowhere"] {
        let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
        crate::common::exchange(&server, request.as_bytes());
    }
    let text = metrics.get().unwrap().render(Exposition::Prometheus);
    for line in [
        r#"unflat_requests_total{route="all",status="200"} 3"#,
        r#"unflat_requests_total{route="all",status="404"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }
    server.stop().unwrap();
}
